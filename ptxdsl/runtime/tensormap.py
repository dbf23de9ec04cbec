"""Host-encoded tensor maps: `TensorMap.tiled(...)` / `encode_tiled(...)` /
`TensorMap.from_array(...)` call cuTensorMapEncodeTiled after `tensormap_desc.check` has
verified every rule in Python, and hold the 128 resulting bytes with their description.

Pass a TensorMap straight to a kernel's tensormap parameter (it is copied by value into the
`.param .align 64 .b8 name[128]`); `bytes(tmap)` gives the raw map; `describe()` shows the
description it was built from, the PTX field values and the 16 qwords.
"""

from __future__ import annotations

from typing import Any, cast

import attrs
import numpy as np

from ptxdsl.runtime._driver import check, driver
from ptxdsl.runtime.arrays import array_info, device_name
from ptxdsl.runtime.device import device_info, on_device
from ptxdsl.runtime.errors import DevicePointerError, TensorMapRuleError
from ptxdsl.runtime.tensormap_desc import (
    Interleave,
    L2Promotion,
    OobFill,
    Swizzle,
    TiledDesc,
    Violation,
)
from ptxdsl.runtime.tensormap_desc import check as check_desc
from ptxdsl.runtime.tensormap_enums import (
    Dims,
    InterleaveLike,
    L2PromotionLike,
    OobFillLike,
    SwizzleLike,
    TmaDType,
)

TENSORMAP_BYTES = 128
# numpy arrays taken as a map's bytes: the bytes themselves, or the 16 qwords of the CUtensorMap
# (what `TensorMap.qwords` and cuda.bindings' `opaque` hold). An array of another type is more
# likely data passed by mistake than a map.
MAP_ARRAY_DTYPES = (np.dtype(np.uint8), np.dtype(np.uint64))


def map_bytes(data: object) -> bytes:
    """The 128 bytes of a CUtensorMap from bytes, bytearray, memoryview, or a numpy array of
    128 uint8 / 16 uint64; anything else is refused (rule "map_bytes"). `bytes()` alone
    would take an int as a count of zero bytes and refuse a str with a raw TypeError."""
    if isinstance(data, np.ndarray) and data.dtype in MAP_ARRAY_DTYPES:
        raw: bytes | None = np.ascontiguousarray(data).tobytes()
    elif isinstance(data, bytes | bytearray | memoryview):
        raw = bytes(data)
    else:
        raw = None
    if raw is None or len(raw) != TENSORMAP_BYTES:
        given = (f"{len(raw)} bytes" if raw is not None else
                 f"{type(data).__name__}" + (f" of dtype {data.dtype}"
                                             if isinstance(data, np.ndarray) else ""))
        raise TensorMapRuleError([Violation(
            "map_bytes", f"data: a CUtensorMap is {TENSORMAP_BYTES} bytes, got {given} "
            "(expected bytes, bytearray, memoryview, or a numpy array of 128 uint8 or 16 "
            "uint64)")])
    return raw


def _map_desc(desc) -> TiledDesc | None:
    if desc is not None and not isinstance(desc, TiledDesc):
        raise TensorMapRuleError([Violation(
            "map_desc", f"desc: expected a TiledDesc or None, got {type(desc).__name__} "
            f"{desc!r}"[:300])])
    return desc


def _encode(desc: TiledDesc, device: int) -> bytes:
    """cuTensorMapEncodeTiled (needs a current context, hence on_device)."""
    drv = driver()
    with on_device(device):
        u64, u32 = drv.cuuint64_t, drv.cuuint32_t
        strides = list(desc.global_strides)
        if not strides:
            # Rank 1 has no stride, but cuda.bindings passes an empty list as NULL and the driver
            # refuses a NULL globalStrides (CUDA_ERROR_INVALID_VALUE, seen on an H100 with driver
            # 580): pass one unused entry, as C callers do, sized like a padded row.
            strides = [-(-desc.data_type.inner_bytes(desc.global_dim[0]) // 16) * 16]
        res = drv.cuTensorMapEncodeTiled(
            drv.CUtensorMapDataType(int(desc.data_type)), desc.rank, desc.global_address,
            [u64(x) for x in desc.global_dim], [u64(x) for x in strides],
            [u32(x) for x in desc.box_dim], [u32(x) for x in desc.element_strides],
            drv.CUtensorMapInterleave(int(desc.interleave)),
            drv.CUtensorMapSwizzle(int(desc.swizzle)),
            drv.CUtensorMapL2promotion(int(desc.l2_promotion)),
            drv.CUtensorMapFloatOOBfill(int(desc.oob_fill)))
        tmap = check(res, "cuTensorMapEncodeTiled",
                     f"{_summary(desc)} passed ptxdsl's rule check but the driver refused it")
        return b"".join(int(q).to_bytes(8, "little") for q in tmap.opaque)


def _summary(d: TiledDesc) -> str:
    return (f"tensor map {d.data_type.driver_name} globalDim={list(d.global_dim)} "
            f"globalStrides={list(d.global_strides)} boxDim={list(d.box_dim)} "
            f"elementStrides={list(d.element_strides)} interleave={d.interleave.driver_name} "
            f"swizzle={d.swizzle.driver_name}")


@attrs.frozen
class TensorMap:
    """128 bytes of CUtensorMap plus the `TiledDesc` it was encoded from (None when built from
    raw bytes). `source` keeps the array the map points into alive."""

    data: bytes = attrs.field(converter=map_bytes)
    desc: TiledDesc | None = attrs.field(default=None, converter=_map_desc)
    source: object = attrs.field(default=None, eq=False, repr=False)

    @classmethod
    def from_desc(cls, desc: TiledDesc, *, device: int = 0, source: object = None) -> TensorMap:
        """Check every rule (including the device's compute capability), then encode."""
        _map_desc(desc)
        # The rules that need no device first: a broken description is refused by its rules
        # even where no driver is usable (device_info needs one).
        check_desc(desc)
        check_desc(desc, device_info(device).compute_capability)
        return cls(_encode(desc, device), desc, source)

    @classmethod
    def tiled(cls, address: object, shape: Dims, dtype: TmaDType, box: Dims, *,
              strides: Dims | None = None, byte_strides: Dims | None = None,
              element_strides: Dims | None = None,
              interleave: InterleaveLike = Interleave.NONE,
              swizzle: SwizzleLike = Swizzle.NONE,
              l2_promotion: L2PromotionLike = L2Promotion.NONE,
              oob_fill: OobFillLike = OobFill.NONE, device: int = 0) -> TensorMap:
        """Encode a tiled map from a numpy-ordered description (axis 0 outermost).

        `address`: an int device address or anything `DeviceBuffer`-like (its pointer).
        `shape`, `box`, `element_strides`, and `strides` (elements) or `byte_strides` (bytes)
        are in numpy order; `dtype` a numpy dtype, a PTX type name ('f16', 'u8': PTX's
        meaning) or a CUtensorMapDataType name (see `data_type_of`); the enums
        accept members, ints or driver names ('128B', 'SWIZZLE_128B', ...).
        """
        from ptxdsl.runtime.arrays import device_pointer
        ptr = device_pointer(address)
        desc = TiledDesc.from_numpy_order(
            ptr, shape, dtype, box, strides=strides, byte_strides=byte_strides,
            element_strides=element_strides, interleave=interleave, swizzle=swizzle,
            l2_promotion=l2_promotion, oob_fill=oob_fill)
        return cls.from_desc(desc, device=device,
                             source=None if isinstance(address, int) else address)

    @classmethod
    def from_array(cls, array: object, box: Dims, *, dtype: TmaDType | None = None,
                   element_strides: Dims | None = None,
                   interleave: InterleaveLike = Interleave.NONE,
                   swizzle: SwizzleLike = Swizzle.NONE,
                   l2_promotion: L2PromotionLike = L2Promotion.NONE,
                   oob_fill: OobFillLike = OobFill.NONE, device: int = 0) -> TensorMap:
        """Encode a map over a device array: a DeviceBuffer, or anything exposing
        `__cuda_array_interface__` or `__dlpack__` (CuPy, PyTorch). Shape, strides and dtype
        come from the array (`dtype` overrides, e.g. 'TFLOAT32' for float32 data)."""
        info = array_info(array)
        if not info.on_device:
            raise DevicePointerError(f"from_array: the array lives in "
                                     f"{device_name(info.device_type)} memory; a tensor map "
                                     "must point to GPU memory")
        desc = TiledDesc.from_numpy_order(
            info.ptr, info.shape, dtype if dtype is not None else info.dtype, box,
            byte_strides=info.strides_or_contiguous(), element_strides=element_strides,
            interleave=interleave, swizzle=swizzle, l2_promotion=l2_promotion,
            oob_fill=oob_fill)
        return cls.from_desc(desc, device=device, source=array)

    @classmethod
    def from_bytes(cls, data: object, desc: TiledDesc | None = None) -> TensorMap:
        """A map from its 128 bytes (see `map_bytes` for what is taken) and, optionally, the
        `TiledDesc` it was encoded from (for `describe()` and the PTX field values)."""
        return cls(data, desc)

    def __bytes__(self) -> bytes:
        return self.data

    @property
    def qwords(self) -> tuple[int, ...]:
        """The 128 bytes as 16 little-endian 64-bit words (CUtensorMap's `opaque`)."""
        return tuple(int.from_bytes(self.data[i:i + 8], "little") for i in range(0, 128, 8))

    def replace_address(self, address: object, *, device: int = 0) -> TensorMap:
        """A copy pointing at another base address (cuTensorMapReplaceAddress)."""
        from ptxdsl.runtime.arrays import device_pointer
        ptr = device_pointer(address)
        desc = attrs.evolve(self.desc, global_address=ptr) if self.desc else None
        if desc is not None:
            check_desc(desc)
        drv = driver()
        with on_device(device):
            tmap = self.as_cutensormap()
            check(drv.cuTensorMapReplaceAddress(tmap, ptr), "cuTensorMapReplaceAddress")
            data = b"".join(int(q).to_bytes(8, "little") for q in tmap.opaque)
            return TensorMap(data, desc, address if not isinstance(address, int) else None)

    def as_cutensormap(self) -> Any:
        """The same 128 bytes as a cuda.bindings CUtensorMap."""
        tmap = driver().CUtensorMap()
        tmap.opaque = [driver().cuuint64_t(q) for q in self.qwords]
        return tmap

    # PTX tensormap.replace field values, for device-side encoding from this description.
    def _field(self, name: str) -> int:
        if self.desc is None:
            raise TensorMapRuleError([Violation(
                "map_desc", "this TensorMap was built from raw bytes: its fields are unknown "
                "(give TensorMap.from_bytes the TiledDesc it was encoded from)")])
        # the enum fields read here are ints (ptx_fields also holds the dimension tuples)
        return cast(int, self.desc.ptx_fields[name])

    @property
    def ptx_elemtype(self) -> int:
        """The `tensormap.replace .elemtype` value."""
        return self._field("elemtype")

    @property
    def swizzle_mode(self) -> int:
        """The `tensormap.replace .swizzle_mode` value."""
        return self._field("swizzle_mode")

    @property
    def swizzle_atomicity(self) -> int:
        """The `tensormap.replace .swizzle_atomicity` value."""
        return self._field("swizzle_atomicity")

    @property
    def interleave_layout(self) -> int:
        """The `tensormap.replace .interleave_layout` value."""
        return self._field("interleave_layout")

    @property
    def fill_mode(self) -> int:
        """The `tensormap.replace .fill_mode` value."""
        return self._field("fill_mode")

    def describe(self) -> str:
        """What the map holds: its description (both orders), PTX field values, and a hex dump
        of the 16 qwords (the layout is opaque, so the bytes are not decoded)."""
        out = []
        d = self.desc
        if d is None:
            out.append("TensorMap (raw 128 bytes; description unknown)")
        else:
            n = d.numpy_order()
            f = d.ptx_fields
            out += [
                f"TensorMap tiled, rank {d.rank}, {d.data_type.driver_name} "
                f"(driver value {int(d.data_type)}, PTX .elemtype {f['elemtype']} "
                f"{d.data_type.ptx_name})",
                f"  global address  0x{d.global_address:x}",
                f"  numpy order     shape {n['shape']}, byte strides {n['byte_strides']}, "
                f"box {n['box']}, element strides {n['element_strides']}",
                f"  driver order    globalDim {list(d.global_dim)}, globalStrides "
                f"{list(d.global_strides)}, boxDim {list(d.box_dim)}, elementStrides "
                f"{list(d.element_strides)}",
                f"  interleave      {d.interleave.driver_name} (PTX .interleave_layout "
                f"{f['interleave_layout']})",
                f"  swizzle         {d.swizzle.driver_name} (PTX .swizzle_mode "
                f"{f['swizzle_mode']}, .swizzle_atomicity {f['swizzle_atomicity']})",
                f"  l2 promotion    {d.l2_promotion.name} (no PTX field)",
                f"  oob fill        {d.oob_fill.name} (PTX .fill_mode {f['fill_mode']})",
                f"  box bytes       {d.box_bytes} (the expect_tx count of one box: "
                f"{' x '.join(map(str, d.box_elements[::-1]))} elements in numpy order, "
                "ceil(box / element stride))",
            ]
        out.append("  qwords:")
        q = self.qwords
        for i in range(0, 16, 4):
            out.append("    " + "  ".join(f"[{j:2d}] 0x{q[j]:016x}" for j in range(i, i + 4)))
        return "\n".join(out)


def encode_tiled(address, shape, dtype, box, **kwargs) -> TensorMap:
    """Function spelling of `TensorMap.tiled`."""
    return TensorMap.tiled(address, shape, dtype, box, **kwargs)
