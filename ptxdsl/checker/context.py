"""What the caller knows that the kernel does not say: which maps the host wrote, and the
host descriptions (box, element type, swizzle) of the maps a kernel's parameters carry.

::

    check_module(mod, host_maps=["tmap_ptr"], maps={"tmap": desc})
    check_module(mod, maps={"gemm": {"map_a": desc_a}, "copy": {"map_a": desc_c}})

`host_maps` names pointer parameters (or passes the `Param` objects) whose tensor maps in
global memory the host wrote, e.g. with cudaMemcpy: acquiring those needs `.sys` scope.
`maps` maps a parameter (name or `Param`) to a description: a `TiledDesc`, a runtime
`TensorMap` (its `.desc` is used), an `SmemLayout` (the box of one atom column), or a dict
`{"box_bytes": 512, "swizzle": "128B"}`; or a kernel's name to such a mapping of its own,
for the parameters of that kernel only (two kernels with a same-named parameter). The
description of a pointer parameter applies to every map it points to. A kernel's own
declarations (`Kernel.map_boxes`: `k.param_tensormap(name, box=...)`,
`MbarrierRing(..., loads=...)`) count where the caller gave none; docs/hazards.md, "Context".
`cross_device_maps` names pointer parameters whose maps are written on one GPU and used on
another (peer or host-mapped memory): their release (`tensormap.cp_fenceproxy`) and acquire
both need `.sys` scope (CUDA Programming Guide §10.30.2).
`peer_buffers` and `signal_pads` name the pointer parameters of the cross-GPU protocol
(`hazards_xgpu`): buffers other GPUs of the host write or read (this rank's own included),
and the flags ranks signal each other with. Each parameter is either one pointer or a device
array of pointers, one per rank (torch's `buffer_ptrs_dev`, `signal_pad_ptrs_dev`); a list
of names applies to every kernel, a dict `{kernel name: [names]}` to that kernel only.
`host_signal_pads` names those of the signal pads that the host may set too (a stream's
`SymmetricBuffers.signal` after its copy engines' `put`): a spin on them is a wait even on a
path where no kernel code sets them (`signal-wait-unset` is not reported for it).
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from typing import Any

import attrs

from ..errors import OperandError
from ..instructions._tma_box import declared_box, desc_box
from ..instructions.wgmma_desc import SmemLayout
from ..operands import _show

# Swizzle -> the shared-memory span after which its pattern repeats (digest §7.4). Keys are
# CUtensorMapSwizzle values and names; the PTX swizzle_mode field uses 0..3 for the same four
# plus 4 for 96B (sm_103a), handled in `swizzle_repeat_of_mode`.
_REPEAT_BY_DRIVER: dict[int, int | None] = {
    0: None, 1: 256, 2: 512, 3: 1024, 4: 1024, 5: 1024, 6: 1024}
_REPEAT_BY_NAME: dict[str, int | None] = {
    "NONE": None, "32B": 256, "64B": 512, "128B": 1024, "96B": 256}
_REPEAT_BY_MODE = {0: None, 1: 256, 2: 512, 3: 1024, 4: 256}

# PTX `.elemtype` codes (digest §1.5) -> bytes per element (None: packed sub-byte types).
ELEM_BYTES = {0: 1, 1: 2, 2: 4, 3: 4, 4: 8, 5: 8, 6: 2, 7: 4, 8: 4, 9: 8, 10: 2, 11: 4, 12: 4}


def _by_swizzle(swizzle: Any, by_name: dict[str, int | None],
                by_driver: dict[int, int | None]) -> int | None:
    """A table's entry for a driver swizzle given as an enum, an int or a name ('128B',
    'CU_TENSOR_MAP_SWIZZLE_128B_ATOM_32B'); None for None or anything else."""
    if swizzle is None or isinstance(swizzle, bool):
        return None
    if isinstance(swizzle, str):
        key = swizzle.strip().upper().removeprefix("CU_TENSOR_MAP_SWIZZLE_")
        return by_name.get(key.removeprefix("SWIZZLE_").split("_")[0])
    try:
        return by_driver.get(int(swizzle))
    except (TypeError, ValueError):
        return None


def swizzle_repeat(swizzle: Any) -> int | None:
    """The repeat span in bytes of a driver swizzle (enum, int or name such as '128B')."""
    return _by_swizzle(swizzle, _REPEAT_BY_NAME, _REPEAT_BY_DRIVER)


def swizzle_repeat_of_mode(mode: int) -> int | None:
    """The repeat span of a PTX `tensormap.replace ... swizzle_mode` value."""
    return _REPEAT_BY_MODE.get(mode)


# The same swizzles -> the row width in bytes whose 16-byte chunks they permute, 0 for no
# swizzle: what a wgmma descriptor's layout type must say of the tile (`wgmma-swizzle-mismatch`).
# The sm_100 128B variants (32B / 64B atomicity) keep 128-byte rows.
_WIDTH_BY_DRIVER: dict[int, int | None] = {0: 0, 1: 32, 2: 64, 3: 128, 4: 128, 5: 128, 6: 128}
_WIDTH_BY_NAME: dict[str, int | None] = {"NONE": 0, "32B": 32, "64B": 64, "128B": 128, "96B": 96}
_WIDTH_BY_MODE = {0: 0, 1: 32, 2: 64, 3: 128, 4: 96}


def swizzle_width(swizzle: Any) -> int | None:
    """The row width in bytes of a driver swizzle (enum, int or name), 0 for none; None when
    `swizzle` is None (not given) or not a swizzle."""
    return _by_swizzle(swizzle, _WIDTH_BY_NAME, _WIDTH_BY_DRIVER)


def swizzle_width_of_mode(mode: int) -> int | None:
    """The row width of a PTX `tensormap.replace ... swizzle_mode` value (0: none)."""
    return _WIDTH_BY_MODE.get(mode)


@attrs.frozen
class MapInfo:
    """What the checker uses of a tensor-map description."""

    box_bytes: int | None = None
    swizzle_repeat: int | None = None
    source: str = ""
    # The swizzle's row width in bytes, 0 where the description says "no swizzle"; None where
    # it says nothing (swizzle_repeat is None for both).
    swizzle_width: int | None = None


_DESC_KEYS = frozenset({"box_bytes", "swizzle"})


def map_info(desc: Any, source: str = "") -> MapInfo:
    """A MapInfo from a TiledDesc, a TensorMap (through `.desc`), an SmemLayout, a dict, or
    a MapInfo."""
    if isinstance(desc, MapInfo):
        return desc
    if isinstance(desc, Mapping):
        unknown = set(desc) - _DESC_KEYS
        box = desc.get("box_bytes")
        if unknown or box is not None and (type(box) is not int or box < 1):
            raise OperandError("check_module", f"maps[{source!r}]", "a description {"
                               "'box_bytes': N, 'swizzle': '128B'} (either key may be left "
                               "out), a TiledDesc, a TensorMap or an SmemLayout",
                               _show(dict(desc)))
        sw = desc.get("swizzle")
        return MapInfo(box, swizzle_repeat(sw), source, swizzle_width(sw))
    if isinstance(desc, SmemLayout):
        n, repeat, how = declared_box("check_module", desc, None, None)
        return MapInfo(n, repeat, how, desc.swizzle.value)
    inner = getattr(desc, "desc", None)
    if inner is not None and hasattr(inner, "box_bytes"):
        desc = inner
    box = getattr(desc, "box_bytes", None)
    if hasattr(desc, "box_dim"):
        desc_box("check_module", desc)
    if not hasattr(desc, "swizzle") and (type(box) is not int or box < 1):
        raise OperandError("check_module", f"maps[{source!r}]", "a TiledDesc, a TensorMap "
                           "(encoded from a description, not raw bytes), an SmemLayout or a "
                           "dict {'box_bytes': N, 'swizzle': '128B'}", _show(desc))
    sw = getattr(desc, "swizzle", None)
    return MapInfo(int(box) if box is not None else None, swizzle_repeat(sw), source,
                   swizzle_width(sw))


def _per_kernel(value: Any) -> bool:
    """Is a `maps` entry a kernel's own table (its name to {param: description}) rather than
    one parameter's description? A description dict holds numbers and names; a kernel's
    table, descriptions."""
    return isinstance(value, Mapping) and all(
        v is not None and not isinstance(v, int | float | str | enum.Enum)
        for v in value.values())


@attrs.frozen
class Context:
    """Normalised checker context (see the module docstring)."""

    host_maps: frozenset = frozenset()          # names and Param objects
    maps: tuple = ()                            # ((name or Param), MapInfo) pairs
    cross_device_maps: frozenset = frozenset()  # names and Param objects
    kernel_maps: tuple = ()                     # (kernel name or Kernel, maps pairs) pairs
    peer_buffers: tuple = ()                    # (kernel name or None, frozenset of names)
    signal_pads: tuple = ()                     # (kernel name or None, frozenset of names)
    host_signal_pads: tuple = ()                # the same, for pads the host sets too

    @classmethod
    def make(cls, host_maps: Iterable[Any] = (), maps: Mapping[Any, Any] | None = None,
             cross_device_maps: Iterable[Any] = (), peer_buffers: Any = (),
             signal_pads: Any = (), host_signal_pads: Any = (), **unknown: Any) -> Context:
        """The context from what the caller wrote (`check_module(..., host_maps=["tmap"])`,
        `Module.emit(check={...})`): a name or a list of names (or `Param` objects) for
        `host_maps` and `cross_device_maps`; `maps` from a map's name or `Param` to its host
        description (`TiledDesc`, `TensorMap`, `SmemLayout`, a dict with `box_bytes` and
        `swizzle`, or a `MapInfo`), or from a kernel's name (or the `Kernel`) to such a
        mapping for that kernel's parameters; `peer_buffers`, `signal_pads` and
        `host_signal_pads` as a name, a list of names (or `Param` objects), or a dict from a
        kernel's name to such a list."""
        if unknown:
            raise TypeError(f"unknown checker context {sorted(unknown)}; expected host_maps=, "
                            "maps=, cross_device_maps=, peer_buffers=, signal_pads=, "
                            "host_signal_pads=")
        if isinstance(host_maps, str):
            host_maps = (host_maps,)
        if isinstance(cross_device_maps, str):
            cross_device_maps = (cross_device_maps,)
        if maps is not None and not isinstance(maps, Mapping):
            raise OperandError("check_module", "maps", "a dict from a parameter's name to its "
                               "map's description, or from a kernel's name to such a dict",
                               _show(maps))
        maps = maps or {}
        infos = tuple((k, map_info(v, _name(k))) for k, v in maps.items()
                      if not _per_kernel(v))
        per_kernel = tuple((k, tuple((p, map_info(d, _name(p))) for p, d in v.items()))
                           for k, v in maps.items() if _per_kernel(v))
        return cls(frozenset(_key(h) for h in host_maps), infos,
                   frozenset(_key(h) for h in cross_device_maps), per_kernel,
                   _names_per_kernel("peer_buffers", peer_buffers),
                   _names_per_kernel("signal_pads", signal_pads),
                   _names_per_kernel("host_signal_pads", host_signal_pads))

    def xgpu_kind(self, param: Any, kernel: Any) -> str | None:
        """'pad' when `param` is one of `kernel`'s signal pads, 'peer' when it is one of its
        peer buffers (`signal_pads=`, `peer_buffers=`), else None."""
        for kind, table in (("pad", self.signal_pads), ("peer", self.peer_buffers)):
            if _in_table(table, param, kernel):
                return kind
        return None

    def is_host_signal_pad(self, param: Any, kernel: Any) -> bool:
        """Whether `param` is one of `kernel`'s signal pads that the host sets too
        (`host_signal_pads=`)."""
        return self.xgpu_kind(param, kernel) == "pad" and _in_table(self.host_signal_pads,
                                                                     param, kernel)

    def has_xgpu(self, kernel: Any) -> bool:
        """Does the context name signal pads or peer buffers for `kernel`?"""
        return any(_names_kernel(k, kernel) for k, _ in self.signal_pads + self.peer_buffers)

    def is_cross_device_map(self, param: Any) -> bool:
        """Whether the tensor-map parameter `param` (a `Param` or its name) addresses another
        device's memory (`cross_device_maps`)."""
        return param is not None and (_key(param) in self.cross_device_maps
                                      or getattr(param, "name", None) in self.cross_device_maps)

    def is_host_map(self, param: Any) -> bool:
        """Whether the host wrote the tensor map `param` (a `Param` or its name) before the
        launch, so the kernel needs no acquire fence before using it (`host_maps`)."""
        return param is not None and (_key(param) in self.host_maps
                                      or getattr(param, "name", None) in self.host_maps)

    def info(self, param: Any, kernel: Any = None) -> MapInfo | None:
        """The description of the map `param` carries (box bytes, swizzle) in `kernel`: the
        caller's for that kernel, else the caller's for every kernel, else the kernel's own
        declaration (`Kernel.map_boxes`); None when nobody gave one."""
        if param is None:
            return None
        kname = getattr(kernel, "name", None)
        for k, pairs in self.kernel_maps:
            if k is kernel or (isinstance(k, str) and k == kname):
                found = _lookup(pairs, param)
                if found is not None:
                    return found
        found = _lookup(self.maps, param)
        if found is None:
            found = getattr(kernel, "map_boxes", {}).get(param)
        return found


def _in_table(table: tuple, param: Any, kernel: Any) -> bool:
    """Is `param` (a `Param` or its name) named for `kernel` in a `_names_per_kernel`
    table?"""
    return any(_names_kernel(k, kernel) and (_key(param) in names or getattr(
        param, "name", None) in names) for k, names in table)


def _names_per_kernel(what: str, value: Any) -> tuple:
    """((kernel name or None for every kernel, frozenset of parameter keys), ...)."""
    if isinstance(value, Mapping):
        return tuple((k, _keys(what, v)) for k, v in value.items())
    keys = _keys(what, value)
    return ((None, keys),) if keys else ()


def _keys(what: str, value: Any) -> frozenset:
    if isinstance(value, str):
        value = (value,)
    if not isinstance(value, Iterable) or isinstance(value, Mapping):
        raise OperandError("check_module", what, "a parameter's name, a list of names, or a "
                           "dict from a kernel's name to such a list", _show(value))
    for v in value:
        if not isinstance(v, str) and not hasattr(v, "name"):
            raise OperandError("check_module", what, "parameter names (or Param objects)",
                               _show(v))
    return frozenset(_key(v) for v in value)


def _names_kernel(k: Any, kernel: Any) -> bool:
    return k is None or k is kernel or (isinstance(k, str) and k == getattr(kernel, "name", None))


def _lookup(pairs: tuple, param: Any) -> MapInfo | None:
    name = getattr(param, "name", None)
    for k, info in pairs:
        if k is param or (isinstance(k, str) and k == name):
            return info
    return None


def _key(x: Any) -> Any:
    return x if isinstance(x, str) else id(x)


def _name(k: Any) -> str:
    return k if isinstance(k, str) else getattr(k, "name", repr(k))
