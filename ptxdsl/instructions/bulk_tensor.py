"""Tensor bulk copies through a CUtensorMap (PTX ISA §5.5, §9.7.9.25.5, digest §5).

`cp.async.bulk.tensor` (loads to shared::cluster / shared::cta, stores from shared::cta),
`cp.reduce.async.bulk.tensor` and `cp.async.bulk.prefetch.tensor`, 1d-5d, in every load mode.
Qualifiers come out in the canonical order CCCL and LLVM emit:
`cp.async.bulk.tensor.<N>d.<dst>.<src>.<mode>.<completion>[.multicast::cluster][.cta_group::k]
[.L2::cache_hint]`, and the trailing operands in the order ptxas insists on: im2colInfo,
ctaMask, cache-policy.
"""

from __future__ import annotations

import enum
from typing import Any

import attrs

from ..errors import BuildError, OperandError
from ..operands import Imm, Operand, Reg, Symbol, Vec
from ..types import Requires, ScalarType, StateSpace
from . import _ptx_args as A
from ._tma_addr import MBARRIER
from .base import Instruction, _given, check_enum, int_like, refuse
from .bulk import (
    BLACKWELL,
    CLUSTER,
    CTA,
    GLOBAL,
    R80,
    R86,
    R86_SM100,
    Completion,
    CtaGroup,
    RedOp,
    _bar,
    _in_cluster,
    cache_hint_arg,
    completion_arg,
    converted,
    cta_group_arg,
    is_cta_group,
    mask16,
    mem_addr,
    multicast_arg,
    space_arg,
)

__all__ = [
    "TensorMode", "CpAsyncBulkTensor", "CpReduceAsyncBulkTensor", "CpAsyncBulkPrefetchTensor",
    "cp_async_bulk_tensor", "cp_async_bulk_tensor_tile_gather4",
    "cp_async_bulk_tensor_tile_scatter4", "cp_reduce_async_bulk_tensor",
    "cp_async_bulk_prefetch_tensor",
    "tensor_requires", "FORMS",
]


class TensorMode(enum.Enum):
    """The `.load_mode` of a tensor copy (stores and reductions use tile/scatter4/no_offs)."""

    tile = "tile"
    tile_gather4 = "tile::gather4"
    im2col = "im2col"
    im2col_w = "im2col::w"
    im2col_w_128 = "im2col::w::128"
    tile_scatter4 = "tile::scatter4"
    im2col_no_offs = "im2col_no_offs"


M = TensorMode
LOAD_MODES = (M.tile, M.tile_gather4, M.im2col, M.im2col_w, M.im2col_w_128)
STORE_MODES = (M.tile, M.tile_scatter4, M.im2col_no_offs)
_FOUR = (M.tile_gather4, M.tile_scatter4)           # .2d with five coordinates
_IM2COL = (M.im2col, M.im2col_w, M.im2col_w_128, M.im2col_no_offs)  # 3d-5d only


def tensor_requires(dst: StateSpace | None, mode: TensorMode, *, cta_group: bool = False
                    ) -> Requires:
    """The minimum PTX ISA version and target of a tensor form (ptxas 13 verified).

    `dst` is the shared destination of a load, GLOBAL for stores/reductions, None for prefetch.
    gather4 and im2col::w into .shared::cta run on any sm_100+; into .shared::cluster, and as
    prefetches, they need an sm_100a-class target, like im2col::w::128, scatter4 and cta_group.
    """
    r = R86 if dst is CTA else R80
    if mode in (M.tile_gather4, M.im2col_w):
        r = r.merge(R86_SM100 if dst is CTA else BLACKWELL)
    elif mode in (M.im2col_w_128, M.tile_scatter4):
        r = r.merge(BLACKWELL)
    return r.merge(BLACKWELL) if cta_group else r


# -- shared operand checks ------------------------------------------------------------------------
def _tensormap(insn: str, value: Any) -> Reg:
    """The tensor map: a 64-bit register holding its generic address."""
    if isinstance(value, Symbol):
        if getattr(value, "kind", None) == "tensormap" or value.space is StateSpace.param:
            raise OperandError(insn, "tensormap", "the map's 64-bit generic address: use "
                               f"k.tensormap_addr({value.name}) (mov + cvta.param); a raw param "
                               "address assembles but faults at run time (digest pitfall 11)",
                               _given(value))
        raise OperandError(insn, "tensormap", "a 64-bit register holding the map's generic "
                           f"address (e.g. k.generic_addr({value.name}))", _given(value))
    if not isinstance(value, Reg) or value.type.bits != 64 or value.type.is_float:
        raise OperandError(insn, "tensormap", "a 64-bit register holding the map's generic "
                           "address (k.tensormap_addr(param) for a kernel parameter)",
                           _given(value))
    if value.space in (StateSpace.param, StateSpace.shared, CTA, CLUSTER, StateSpace.local):
        how = ("use k.tensormap_addr(param): the map needs cvta.param (digest pitfall 11)"
               if value.space is StateSpace.param else "convert it to generic with cvta")
        raise OperandError(insn, "tensormap", f"a generic address ({how})",
                           f"%{value.name}, which holds a .{value.space.value} address")
    return value


# The shared box of a tensor copy: the PTX ISA requires 16-byte alignment (ptx-isa-digest §5.2,
# PTXISA §5.5.3.1), which is refused here; the CUDA C++ Programming Guide's TMA table asks for
# 128 bytes and a swizzled map for the swizzle repeat (256/512/1024 B for 32B/64B/128B) — those
# are the checker's `tma-smem-align` warning (the swizzle is in the map, a run-time value).
SMEM_ALIGN = 16
SMEM_BOX = ("a tensor copy's shared box (the PTX ISA's minimum; use align=128, or the swizzle "
            "repeat, e.g. 1024 for a 128B swizzle, as the checker's tma-smem-align advises)")


def _coords(insn: str, values: Any, want: int, dim: int, mode: TensorMode, store: bool) -> Vec:
    """tensorCoords: `want` 32-bit registers or immediates (non-negative for stores)."""
    if not isinstance(values, tuple | list | Vec):
        raise OperandError(insn, "coords", "a tuple of 32-bit registers or ints", _given(values))
    items = list(values.items if isinstance(values, Vec) else values)
    if len(items) != want:
        why = (f".{mode.value} takes {want} ({{col, row0, row1, row2, row3}})" if mode in _FOUR
               else f".{dim}d takes {want}")
        refuse(insn, f"wrong coordinate count: {why}, got {len(items)}")
    out: list[Operand] = []
    for i, c in enumerate(items):
        if isinstance(c, Reg):
            if c.type.bits != 32 or c.type.is_float:
                raise OperandError(insn, f"coords[{i}]", "a 32-bit integer register or an int",
                                   _given(c))
            out.append(c)
            continue
        if isinstance(c, Imm):
            c = c.value
        c = int_like(c)
        if isinstance(c, bool) or not isinstance(c, int) or not -(1 << 31) <= c < (1 << 31):
            raise OperandError(insn, f"coords[{i}]", "a 32-bit register or an int in the .s32 "
                               "range", _given(c))
        if store and c < 0:
            refuse(insn, f"a store's start coordinates must be non-negative (coords[{i}] = {c}); "
                   "a negative start faults at run time (digest pitfall 13)")
        out.append(Imm(c, ScalarType.s32))
    return Vec(tuple(out))


def _im2col(insn: str, values: Any, dim: int, mode: TensorMode) -> Vec | None:
    """im2colInfo: N-2 16-bit offsets (.im2col) or {wHalo, wOffset} (.im2col::w{::128})."""
    if mode not in (M.im2col, M.im2col_w, M.im2col_w_128):
        if values is not None:
            refuse(insn, f"im2col offsets belong to the .im2col modes, not .{mode.value}")
        return None
    want = dim - 2 if mode is M.im2col else 2
    what = (f"{want} 16-bit offsets (N-2 for .{dim}d)" if mode is M.im2col
            else "2 16-bit values {wHalo, wOffset}")
    if values is None:
        refuse(insn, f".{mode.value} needs im2colInfo: {what} (im2col=...)")
    if not isinstance(values, tuple | list | Vec):
        raise OperandError(insn, "im2col", f"a tuple of {what}", _given(values))
    items = list(values.items if isinstance(values, Vec) else values)
    if len(items) != want:
        refuse(insn, f"wrong im2col offset count: .{mode.value} with .{dim}d takes {what}, "
               f"got {len(items)}")
    return Vec(tuple(mask16(insn, f"im2col[{i}]", v) for i, v in enumerate(items)))


def _mode_text(insn: Any) -> str:
    """`.mode`, or nothing where the text left `.tile` implied (`mode_implied=True`, as CUTLASS
    and Triton write their loads, stores and prefetches: the same instruction)."""
    if insn.mode_implied:
        return ""
    return "." + insn.mode.value


def _check_implied(insn: Any) -> None:
    if type(insn.mode_implied) is not bool:
        raise OperandError(insn.MNEMONIC, "mode_implied", "True or False",
                           repr(insn.mode_implied))
    if insn.mode_implied and insn.mode not in (TensorMode.tile, "tile"):
        refuse(insn.MNEMONIC, f"only .tile may be left implied, not {insn.mode!r}")


def _common(insn: str, dim: Any, mode: Any, modes: tuple[TensorMode, ...], tensormap: Any,
            coords: Any, im2col: Any, store: bool) -> tuple[int, TensorMode, Reg, Vec, Any]:
    dim = int_like(dim)
    if isinstance(dim, bool) or not isinstance(dim, int) or not 1 <= dim <= 5:
        raise OperandError(insn, "dim", "a dimension 1..5", _given(dim))
    mode = check_enum(insn, "mode", mode, TensorMode, modes)
    name = f"{insn}.{dim}d"
    if mode in _FOUR and dim != 2:
        refuse(name, f".{mode.value} is a .2d form (five coordinates), not .{dim}d")
    if mode in _IM2COL and dim < 3:
        refuse(name, f".{mode.value} needs a 3d-5d tensor, not .{dim}d")
    want = 5 if mode in _FOUR else dim
    return (dim, mode, _tensormap(name, tensormap), _coords(name, coords, want, dim, mode, store),
            _im2col(name, im2col, dim, mode))


@attrs.frozen
class TensorRef(Operand):
    """`[tensorMap, {c0, ...}]`."""

    tensormap: Reg
    coords: Vec

    def render(self) -> str:
        """`[tensormap, {c0, c1, ...}]`, the tensor operand of the cp.async.bulk.tensor forms."""
        return f"[{self.tensormap.render()}, {self.coords.render()}]"


# -- cp.async.bulk.tensor --------------------------------------------------------------------------
@attrs.frozen
class CpAsyncBulkTensor(Instruction):
    """Tensor load (global -> shared) or store (shared::cta -> global):

    `cp.async.bulk.tensor.Nd.dst.global.mode.mbarrier::complete_tx::bytes{.multicast::cluster}
    {.cta_group::k}{.L2::cache_hint} [dstMem], [tensorMap, {coords}], [mbar]{, {im2colInfo}}
    {, ctaMask}{, cache-policy};`  dst = .shared::cluster (PTX 8.0) | .shared::cta (PTX 8.6),
    mode = .tile | .tile::gather4 | .im2col | .im2col::w | .im2col::w::128
    `cp.async.bulk.tensor.Nd.global.shared::cta.mode.bulk_group{.L2::cache_hint}
    [tensorMap, {coords}], [srcMem]{, cache-policy};`  mode = .tile | .tile::scatter4 |
    .im2col_no_offs

    `smem` is dstMem for a load and srcMem for a store.
    """

    MNEMONIC = "cp.async.bulk.tensor"
    dim: int
    dst_space: StateSpace
    src_space: StateSpace
    smem: Any
    tensormap: Any
    coords: Any
    mbar: Any = None
    mode: TensorMode = TensorMode.tile
    completion: Completion | None = None
    im2col: Any = None
    multicast: bool | None = None
    cta_mask: Any = None
    cta_group: CtaGroup | None = None
    cache_hint: bool | None = None
    cache_policy: Any = None
    mode_implied: bool = attrs.field(default=False, eq=False, kw_only=True)

    def __attrs_post_init__(self):
        _check_implied(self)
        n = self.MNEMONIC
        self._set("dst_space", space_arg(n, "dst_space", self.dst_space, (CLUSTER, CTA, GLOBAL)))
        self._set("src_space", space_arg(n, "src_space", self.src_space, (GLOBAL, CTA)))
        direction = (self.dst_space, self.src_space)
        if direction not in ((CLUSTER, GLOBAL), (CTA, GLOBAL), (GLOBAL, CTA)):
            refuse(n, f"no .{self.dst_space.value}.{self.src_space.value} direction; loads are "
                   ".shared::cluster.global or .shared::cta.global, stores .global.shared::cta")
        store = self.dst_space is GLOBAL
        dim, mode, tmap, coords, im2col = _common(
            n, self.dim, self.mode, STORE_MODES if store else LOAD_MODES, self.tensormap,
            self.coords, self.im2col, store)
        for field, v in (("dim", dim), ("mode", mode), ("tensormap", tmap), ("coords", coords),
                         ("im2col", im2col)):
            self._set(field, v)
        n = f"{n}.{dim}d.{self.dst_space.value}.{self.src_space.value}.{mode.value}"
        self._set("completion", completion_arg(n, self.completion, self.mbar, store))
        mc, mask = multicast_arg(n, self.multicast, self.cta_mask,
                                 self.dst_space if not store else GLOBAL)
        self._set("multicast", mc)
        self._set("cta_mask", mask)
        if self.cta_group is not None:
            if store:
                refuse(n, ".cta_group::k exists only on loads")
            self._set("cta_group", cta_group_arg(n, self.cta_group))
        hint, policy = cache_hint_arg(n, self.cache_hint, self.cache_policy)
        self._set("cache_hint", hint)
        self._set("cache_policy", policy)
        self._set("smem", mem_addr(n, "src" if store else "dst", self.smem,
                                   CTA if store else self.dst_space, SMEM_ALIGN, what=SMEM_BOX))
        if self.mbar is not None:
            self._set("mbar", mem_addr(n, "mbar", self.mbar, self.dst_space, 8, 8, MBARRIER))

    @property
    def is_store(self) -> bool:
        """Whether the copy goes from shared memory to the tensor in global memory (the store
        direction, with a bulk-group completion)."""
        return self.dst_space is GLOBAL

    @property
    def requires(self) -> Requires:
        return tensor_requires(self.dst_space, self.mode, cta_group=self.cta_group is not None)

    def opcode(self) -> str:
        completion = self.completion
        assert completion is not None   # __attrs_post_init__ picks one
        q = (f"cp.async.bulk.tensor.{self.dim}d.{self.dst_space.value}.{self.src_space.value}"
             f"{_mode_text(self)}.{completion.value}")
        if self.multicast:
            q += ".multicast::cluster"
        if self.cta_group is not None:
            q += "." + self.cta_group.value
        if self.cache_hint:
            q += ".L2::cache_hint"
        return q

    def operands(self):
        ref = TensorRef(self.tensormap, self.coords)
        if self.is_store:
            ops = [ref, self.smem]
        else:
            ops = [self.smem, ref, self.mbar]
        return [op for op in (*ops, self.im2col, self.cta_mask, self.cache_policy)
                if op is not None]


@attrs.frozen
class CpReduceAsyncBulkTensor(Instruction):
    """`cp.reduce.async.bulk.tensor.Nd.global.shared::cta.op.mode.bulk_group{.L2::cache_hint}
    [tensorMap, {coords}], [srcMem]{, cache-policy};` (PTX 8.0, sm_90)

    op = .add | .min | .max | .inc | .dec | .and | .or | .xor (the element type comes from
    the map); mode = .tile | .im2col_no_offs | .tile::scatter4 (sm_100a).
    """

    MNEMONIC = "cp.reduce.async.bulk.tensor"
    dim: int
    op: RedOp
    tensormap: Any
    coords: Any
    src: Any
    mode: TensorMode = TensorMode.tile
    cache_hint: bool | None = None
    cache_policy: Any = None
    mode_implied: bool = attrs.field(default=False, eq=False, kw_only=True)

    def __attrs_post_init__(self):
        _check_implied(self)
        n = self.MNEMONIC
        self._set("op", A.op(n, self.op, RedOp))
        dim, mode, tmap, coords, _ = _common(n, self.dim, self.mode, STORE_MODES,
                                             self.tensormap, self.coords, None, True)
        for field, v in (("dim", dim), ("mode", mode), ("tensormap", tmap), ("coords", coords)):
            self._set(field, v)
        n = f"{n}.{dim}d.global.shared::cta.{self.op.value}.{mode.value}"
        hint, policy = cache_hint_arg(n, self.cache_hint, self.cache_policy)
        self._set("cache_hint", hint)
        self._set("cache_policy", policy)
        self._set("src", mem_addr(n, "src", self.src, CTA, SMEM_ALIGN, what=SMEM_BOX))

    @property
    def requires(self) -> Requires:
        return tensor_requires(GLOBAL, self.mode)

    def opcode(self) -> str:
        return (f"cp.reduce.async.bulk.tensor.{self.dim}d.global.shared::cta.{self.op.value}"
                f"{_mode_text(self)}.bulk_group" + (".L2::cache_hint" if self.cache_hint else ""))

    def operands(self):
        ops = [TensorRef(self.tensormap, self.coords), self.src]
        return ops + ([self.cache_policy] if self.cache_hint else [])


@attrs.frozen
class CpAsyncBulkPrefetchTensor(Instruction):
    """`cp.async.bulk.prefetch.tensor.Nd.L2.global.mode{.L2::cache_hint}
    [tensorMap, {coords}]{, {im2colInfo}}{, cache-policy};` (PTX 8.0, sm_90)

    mode = .tile | .im2col | .tile::gather4, .im2col::w, .im2col::w::128 (sm_100a).
    """

    MNEMONIC = "cp.async.bulk.prefetch.tensor"
    dim: int
    tensormap: Any
    coords: Any
    mode: TensorMode = TensorMode.tile
    im2col: Any = None
    cache_hint: bool | None = None
    cache_policy: Any = None
    mode_implied: bool = attrs.field(default=False, eq=False, kw_only=True)

    def __attrs_post_init__(self):
        _check_implied(self)
        n = self.MNEMONIC
        dim, mode, tmap, coords, im2col = _common(n, self.dim, self.mode, LOAD_MODES,
                                                  self.tensormap, self.coords, self.im2col, False)
        for field, v in (("dim", dim), ("mode", mode), ("tensormap", tmap), ("coords", coords),
                         ("im2col", im2col)):
            self._set(field, v)
        n = f"{n}.{dim}d.L2.global.{mode.value}"
        hint, policy = cache_hint_arg(n, self.cache_hint, self.cache_policy)
        self._set("cache_hint", hint)
        self._set("cache_policy", policy)

    @property
    def requires(self) -> Requires:
        return tensor_requires(None, self.mode)

    def opcode(self) -> str:
        return (f"cp.async.bulk.prefetch.tensor.{self.dim}d.L2.global{_mode_text(self)}"
                + (".L2::cache_hint" if self.cache_hint else ""))

    def operands(self):
        return [op for op in (TensorRef(self.tensormap, self.coords), self.im2col,
                              self.cache_policy) if op is not None]


# -- builders (cuda::ptx names, kernel first) ------------------------------------------------------
def _dim_of(coords: Any, mode: Any, dim: int | None) -> int:
    if dim is not None:
        return dim
    if isinstance(mode, str) and mode in ("tile::gather4", "tile_gather4", "tile::scatter4",
                                          "tile_scatter4") or mode in _FOUR:
        return 2
    if not isinstance(coords, tuple | list):
        raise BuildError(f"tensorCoords must be a tuple of registers/ints, got {coords!r}")
    return len(coords)


_LOAD = ("dst_space", "src_space", "dst_mem", "tensor_map", "tensor_coords", "smem_bar")
_EXT = ("*mode", "*im2col", "*cache_policy", "*dim")
# cta_group is positional in cuda::ptx; by keyword it may follow the others
_TENSOR: tuple[tuple[str, ...], ...] = (
    (*_LOAD, "*cta_group", *_EXT),
    (*_LOAD[:2], "cta_group", *_LOAD[2:], *_EXT),
    (*_LOAD, "cta_mask", "*cta_group", *_EXT),
    (*_LOAD[:2], "cta_group", *_LOAD[2:], "cta_mask", *_EXT),
    ("dst_space", "src_space", "tensor_map", "tensor_coords", "src_mem", "*mode",
     "*cache_policy", "*dim"),
)


def _tensor_copy(k, name: str, args, kw, mode) -> CpAsyncBulkTensor:
    dst = args[0] if args else kw.get("dst_space")
    if dst is not None and A.is_space(dst):     # the direction picks loads or the store
        dst_space = space_arg("cp.async.bulk.tensor", "dst_space", dst, (CLUSTER, CTA, GLOBAL))
        overloads = _TENSOR[4:] if dst_space is GLOBAL else _TENSOR[:4]
    else:
        overloads = _TENSOR
    if len(args) == 7:   # (.., cta_group, dst_mem, ..., bar) or (.., dst_mem, ..., bar, cta_mask)
        overloads = tuple(o for o in overloads
                          if ("cta_group" in o) == is_cta_group(args[2]) and "src_mem" not in o)
    _, a = A.bind(name, args, kw, overloads)
    n = "cp.async.bulk.tensor"
    mode = a.get("mode", mode)
    store = space_arg(n, "dst_space", a["dst_space"], (CLUSTER, CTA, GLOBAL)) is GLOBAL
    smem = a["src_mem"] if store else a["dst_mem"]
    smem_space = a["src_space"] if store else a["dst_space"]
    smem = converted(k, n, smem, smem_space, (CLUSTER, CTA), "src_space" if store else "dst_space")
    bar = _bar(k, n, a.get("smem_bar"), a["dst_space"])
    coords = a["tensor_coords"]
    return k.emit(_in_cluster(k, CpAsyncBulkTensor(
        _dim_of(coords, mode, a.get("dim")), a["dst_space"], a["src_space"], smem,
        a["tensor_map"], coords, bar, mode, None, a.get("im2col"), None, a.get("cta_mask"),
        a.get("cta_group"), None, a.get("cache_policy"))))


@A.overloads(*_TENSOR)
def cp_async_bulk_tensor(k, *args, **kw) -> CpAsyncBulkTensor:
    """cuda::ptx's overloads (1d-5d by the coordinate count):

    load:  `(k, 'cluster'|'shared', 'global', dst_mem, tensor_map, tensor_coords, smem_bar)`,
    with `cta_group` after the spaces (`ptx.cta_group_1`, 1, 'cta_group::2'), with `cta_mask`
    last (.multicast::cluster), or both;
    store: `(k, 'global', 'shared', tensor_map, tensor_coords, src_mem)`.

    Keyword extensions: `mode=` ('tile', 'im2col', 'im2col::w', 'tile::gather4', ...),
    `im2col=` offsets, `cache_policy=` (.L2::cache_hint), `dim=` (default: the coordinate
    count; 2 for gather4/scatter4). tensor_map is a 64-bit generic address
    (`k.tensormap_addr(param)`); coordinates are 32-bit registers or ints.
    """
    return _tensor_copy(k, "cp_async_bulk_tensor", args, kw, "tile")


@A.overloads(*_TENSOR[:4])   # loads only: the mode is the gather
def cp_async_bulk_tensor_tile_gather4(k, *args, **kw) -> CpAsyncBulkTensor:
    """`(k, 'shared'|'cluster', 'global', {cta_group,} dst_mem, tensor_map, coords5, smem_bar
    {, cta_mask})`: `cp.async.bulk.tensor.2d.<dst>.global.tile::gather4...`"""
    return _tensor_copy(k, "cp_async_bulk_tensor_tile_gather4", args, kw, "tile::gather4")


@A.overloads(*_TENSOR[4:])   # the store only
def cp_async_bulk_tensor_tile_scatter4(k, *args, **kw) -> CpAsyncBulkTensor:
    """`(k, 'global', 'shared', tensor_map, coords5, src_mem)`:
    `cp.async.bulk.tensor.2d.global.shared::cta.tile::scatter4.bulk_group [...], [src];`"""
    return _tensor_copy(k, "cp_async_bulk_tensor_tile_scatter4", args, kw, "tile::scatter4")


_REDUCE = (("dst_space", "src_space", "op", "tensor_map", "tensor_coords", "src_mem", "*mode",
            "*cache_policy", "*dim"),
           ("op", "tensor_map", "tensor_coords", "src_mem", "*mode", "*cache_policy", "*dim"))


@A.overloads(*_REDUCE)
def cp_reduce_async_bulk_tensor(k, *args, **kw) -> CpReduceAsyncBulkTensor:
    """`(k, 'global', 'shared', op, tensor_map, tensor_coords, src_mem)` as cuda::ptx (op 'add',
    ptx.op_add, 'op_and_op', ...); the spaces may be left out (a ptxdsl extension)."""
    i, a = A.bind("cp_reduce_async_bulk_tensor", args, kw, _REDUCE)
    n = "cp.reduce.async.bulk.tensor"
    if i == 0:
        space_arg(n, "dst_space", a["dst_space"], (GLOBAL,))
        space_arg(n, "src_space", a["src_space"], (CTA,))
    mode, coords = a.get("mode", "tile"), a["tensor_coords"]
    return k.emit(CpReduceAsyncBulkTensor(
        _dim_of(coords, mode, a.get("dim")), a["op"], a["tensor_map"], coords,
        A.space_addr(k, n, a["src_mem"], CTA), mode, None, a.get("cache_policy")))


# Positional only: cuda::ptx's optional leading space_global, then the cache policy trailing.
_PREFETCH_EXT = ("*mode", "*im2col", "*dim")


@A.overloads(("/src_space", "/tensor_map", "/tensor_coords", *_PREFETCH_EXT, "*cache_policy"),
             ("/tensor_map", "/tensor_coords", *_PREFETCH_EXT, "*cache_policy"),
             ("/src_space", "/tensor_map", "/tensor_coords", "/cache_policy", *_PREFETCH_EXT),
             ("/tensor_map", "/tensor_coords", "/cache_policy", *_PREFETCH_EXT))
def cp_async_bulk_prefetch_tensor(k, *args, mode=None, im2col=None, cache_policy=None,
                                  dim: int | None = None) -> CpAsyncBulkPrefetchTensor:
    """`cp_async_bulk_prefetch_tensor(k, tensormap, coords, cache_policy=None)`; cuda::ptx's
    leading `space_global` may be given as "global"."""
    mode = "tile" if mode is None else mode    # None is "not given", as for every builder
    rest = list(args)
    if rest and isinstance(rest[0], str | StateSpace):
        space_arg("cp.async.bulk.prefetch.tensor", "src_space", rest.pop(0), (GLOBAL,))
    if len(rest) == 3:
        if cache_policy is not None:
            refuse("cp.async.bulk.prefetch.tensor", "cache_policy given twice")
        cache_policy = rest.pop()
    if len(rest) != 2:
        refuse("cp.async.bulk.prefetch.tensor", "expected (tensormap, coords[, cache_policy])")
    tmap, coords = rest
    return k.emit(CpAsyncBulkPrefetchTensor(_dim_of(coords, mode, dim), tmap, coords, mode,
                                            im2col, None, cache_policy))


# -- the version/target table ----------------------------------------------------------------------
_L = "cp.async.bulk.tensor.{1-5}d"
FORMS: list[tuple[str, Requires, str]] = [
    (f"{_L}.shared::cluster.global.tile.mbarrier::complete_tx::bytes",
     tensor_requires(CLUSTER, M.tile),
     "+ .multicast::cluster (16-bit ctaMask; ptxas advises sm_90a), .L2::cache_hint"),
    (f"{_L}.shared::cluster.global.im2col.mbarrier::complete_tx::bytes",
     tensor_requires(CLUSTER, M.im2col), "3d-5d, N-2 16-bit offsets"),
    (f"{_L}.shared::cta.global.{{tile,im2col}}.mbarrier::complete_tx::bytes",
     tensor_requires(CTA, M.tile), "no multicast"),
    ("cp.async.bulk.tensor.2d.shared::cta.global.tile::gather4.mbarrier::complete_tx::bytes",
     tensor_requires(CTA, M.tile_gather4), "5 coords; any sm_100+"),
    ("cp.async.bulk.tensor.2d.shared::cluster.global.tile::gather4.mbarrier::complete_tx::bytes",
     tensor_requires(CLUSTER, M.tile_gather4), "5 coords"),
    (f"{_L}.shared::cta.global.im2col::w.mbarrier::complete_tx::bytes",
     tensor_requires(CTA, M.im2col_w), "3d-5d, {wHalo, wOffset}; any sm_100+"),
    (f"{_L}.shared::cluster.global.im2col::w.mbarrier::complete_tx::bytes",
     tensor_requires(CLUSTER, M.im2col_w), "3d-5d, {wHalo, wOffset}"),
    (f"{_L}.shared::{{cta,cluster}}.global.im2col::w::128.mbarrier::complete_tx::bytes",
     tensor_requires(CTA, M.im2col_w_128), "3d-5d, {wHalo, wOffset}"),
    (f"{_L}.shared::{{cta,cluster}}.global.*.mbarrier::complete_tx::bytes.cta_group::{{1,2}}",
     tensor_requires(CTA, M.tile, cta_group=True), "rejected on sm_90a even as ::1"),
    (f"{_L}.global.shared::cta.{{tile,im2col_no_offs}}.bulk_group",
     tensor_requires(GLOBAL, M.tile), "store; im2col_no_offs 3d-5d; coords >= 0"),
    ("cp.async.bulk.tensor.2d.global.shared::cta.tile::scatter4.bulk_group",
     tensor_requires(GLOBAL, M.tile_scatter4), "store; 5 coords"),
    ("cp.reduce.async.bulk.tensor.{1-5}d.global.shared::cta.op.{tile,im2col_no_offs}.bulk_group",
     tensor_requires(GLOBAL, M.tile), "op: add min max inc dec and or xor"),
    ("cp.reduce.async.bulk.tensor.2d.global.shared::cta.op.tile::scatter4.bulk_group",
     tensor_requires(GLOBAL, M.tile_scatter4), "5 coords"),
    ("cp.async.bulk.prefetch.tensor.{1-5}d.L2.global.{tile,im2col}",
     tensor_requires(None, M.tile), "+ .L2::cache_hint"),
    ("cp.async.bulk.prefetch.tensor.Nd.L2.global.{tile::gather4,im2col::w,im2col::w::128}",
     tensor_requires(None, M.tile_gather4), "sm_100a-class only (sm_100 rejects)"),
]
