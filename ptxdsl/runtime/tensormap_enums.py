"""Tensor-map enums (CUDA 13 `cuda.h` values, digest §7.3) and their PTX field values.

No cuda.bindings import: device-side encoding code (tensormap.replace), static checkers and CPU
tests use these on machines without a driver. Each enum accepts its member, its int value, or
its driver name with or without the `CU_TENSOR_MAP_..._` prefix (`Swizzle.coerce("128B")`).
The `ptx_*` properties give the `tensormap.replace` field values, which differ from the driver
values for the element type (f64, bf16, f32.ftz) and split the swizzle into mode + atomicity.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from typing import TYPE_CHECKING, NoReturn, SupportsIndex, TypeAlias

import numpy as np

from ptxdsl.runtime.errors import TensorMapRuleError

if TYPE_CHECKING:  # pragma: no cover
    from numpy.typing import DTypeLike

    from ptxdsl.types import ScalarType


def _refuse(message: str) -> NoReturn:
    """Raise the "enum" refusal: a TensorMapRuleError (a ValueError) at the user's line."""
    from ptxdsl.runtime.tensormap_desc import Violation  # here: that module imports this one
    raise TensorMapRuleError([Violation("enum", message[:300])])


class _Named(enum.IntEnum):
    """Accepts a member, its int value (a Python or numpy integer), or a name with or without
    the driver's prefix."""

    @classmethod
    def coerce(cls, value, field: str):
        if isinstance(value, cls):
            return value
        if isinstance(value, enum.Enum) and not isinstance(value, cls):
            value = value.name  # e.g. a cuda.bindings enum member
        if isinstance(value, str):
            key = value.strip().upper()
            for prefix in cls._prefixes():
                key = key.removeprefix(prefix)
            for m in cls:
                if key in (m.name, m.driver_name):
                    return m
            names = ", ".join(m.driver_name for m in cls)
            _refuse(f"{field}: unknown {cls.__name__} {value!r}; expected one of {names}")
        # int() would turn 1.5 into 1 and True into 1 silently: only integers are values.
        if isinstance(value, bool | np.bool_) or not isinstance(value, int | np.integer):
            _refuse(f"{field}: expected a {cls.__name__} member, its name or its int value "
                    f"(0..{max(cls)}), got {type(value).__name__} {value!r}")
        try:
            return cls(int(value))
        except ValueError:
            _refuse(f"{field}: {value!r} is not a {cls.__name__} (0..{max(cls)})")

    @classmethod
    def _prefixes(cls) -> tuple[str, ...]:
        return ()

    @property
    def driver_name(self) -> str:
        return self.name


class DataType(_Named):
    """CUtensorMapDataType."""

    UINT8 = 0
    UINT16 = 1
    UINT32 = 2
    INT32 = 3
    UINT64 = 4
    INT64 = 5
    FLOAT16 = 6
    FLOAT32 = 7
    FLOAT64 = 8
    BFLOAT16 = 9
    FLOAT32_FTZ = 10
    TFLOAT32 = 11
    TFLOAT32_FTZ = 12
    U4X16_ALIGN8B = 13
    U4X16_ALIGN16B = 14
    U6X16_ALIGN16B = 15

    @classmethod
    def _prefixes(cls):
        return ("CU_TENSOR_MAP_DATA_TYPE_",)

    @property
    def driver_name(self) -> str:
        return _PACKED_DRIVER_NAMES.get(self, self.name)

    @property
    def bits(self) -> int:
        """Bits per counted element (packed types count single 4/6-bit values; the 16B-aligned
        ones spend 16 bytes on 16 values, i.e. 8 bits each)."""
        return _BITS[self]

    @property
    def is_float(self) -> bool:
        return self in _FLOATS

    @property
    def is_packed(self) -> bool:
        return self >= DataType.U4X16_ALIGN8B

    @property
    def ptx_elemtype(self) -> int:
        """The `tensormap.replace .elemtype` code (differs for f64, bf16, f32.ftz)."""
        return _PTX_ELEMTYPE[self]

    @property
    def ptx_name(self) -> str:
        return _PTX_NAMES[self.ptx_elemtype]

    def inner_bytes(self, elements: int) -> int:
        return elements * self.bits // 8


_PACKED_DRIVER_NAMES = {DataType.U4X16_ALIGN8B: "16U4_ALIGN8B",
                        DataType.U4X16_ALIGN16B: "16U4_ALIGN16B",
                        DataType.U6X16_ALIGN16B: "16U6_ALIGN16B"}
_BITS = {DataType.UINT8: 8, DataType.UINT16: 16, DataType.UINT32: 32, DataType.INT32: 32,
         DataType.UINT64: 64, DataType.INT64: 64, DataType.FLOAT16: 16, DataType.FLOAT32: 32,
         DataType.FLOAT64: 64, DataType.BFLOAT16: 16, DataType.FLOAT32_FTZ: 32,
         DataType.TFLOAT32: 32, DataType.TFLOAT32_FTZ: 32, DataType.U4X16_ALIGN8B: 4,
         DataType.U4X16_ALIGN16B: 8, DataType.U6X16_ALIGN16B: 8}
_FLOATS = frozenset({DataType.FLOAT16, DataType.FLOAT32, DataType.FLOAT64, DataType.BFLOAT16,
                     DataType.FLOAT32_FTZ, DataType.TFLOAT32, DataType.TFLOAT32_FTZ})
# Driver value -> PTX .elemtype code (digest §7.3): only 8, 9, 10 are permuted.
_PTX_ELEMTYPE = {d: int(d) for d in DataType} | {
    DataType.FLOAT64: 9, DataType.BFLOAT16: 10, DataType.FLOAT32_FTZ: 8}
_PTX_NAMES = {0: ".u8", 1: ".u16", 2: ".u32", 3: ".s32", 4: ".u64", 5: ".s64", 6: ".f16",
              7: ".f32", 8: ".f32.ftz", 9: ".f64", 10: ".bf16", 11: ".tf32", 12: ".tf32.ftz",
              13: ".b4x16", 14: ".b4x16_p64", 15: ".b6x16_p32"}
PTX_ELEMTYPE_TO_DATATYPE = {v: k for k, v in _PTX_ELEMTYPE.items()}


class Interleave(_Named):
    """CUtensorMapInterleave; the PTX `.interleave_layout` uses the same numbers."""

    NONE = 0
    B16 = 1
    B32 = 2

    @classmethod
    def _prefixes(cls):
        return ("CU_TENSOR_MAP_INTERLEAVE_", "INTERLEAVE_")

    @property
    def driver_name(self) -> str:
        return {0: "NONE", 1: "16B", 2: "32B"}[int(self)]

    @property
    def ptx_interleave_layout(self) -> int:
        return int(self)


class Swizzle(_Named):
    """CUtensorMapSwizzle."""

    NONE = 0
    B32 = 1
    B64 = 2
    B128 = 3
    B128_ATOM_32B = 4
    B128_ATOM_32B_FLIP_8B = 5
    B128_ATOM_64B = 6

    @classmethod
    def _prefixes(cls):
        return ("CU_TENSOR_MAP_SWIZZLE_", "SWIZZLE_")

    @property
    def driver_name(self) -> str:
        if self.name == "NONE":
            return "NONE"
        size, _, rest = self.name[1:].partition("_")
        return f"{size}B" + (f"_{rest}" if rest else "")

    @property
    def span_bytes(self) -> int | None:
        """Largest inner box extent in bytes the swizzle allows; None for NONE."""
        return {0: None, 1: 32, 2: 64}.get(int(self), 128)

    @property
    def ptx_swizzle_mode(self) -> int:
        return min(int(self), 3)

    @property
    def ptx_swizzle_atomicity(self) -> int:
        """0: 16B, 1: 32B, 2: 32B + 8B flip, 3: 64B (a field sm_90a cannot write)."""
        return max(int(self) - 3, 0)

    @property
    def needs_atomicity(self) -> bool:
        return self >= Swizzle.B128_ATOM_32B


class L2Promotion(_Named):
    """CUtensorMapL2promotion (no PTX field: tensormap.replace cannot change it)."""

    NONE = 0
    L2_64B = 1
    L2_128B = 2
    L2_256B = 3

    @classmethod
    def _prefixes(cls):
        return ("CU_TENSOR_MAP_L2_PROMOTION_",)


class OobFill(_Named):
    """CUtensorMapFloatOOBfill; the PTX `.fill_mode` uses the same numbers."""

    NONE = 0
    NAN_REQUEST_ZERO_FMA = 1

    @classmethod
    def _prefixes(cls):
        return ("CU_TENSOR_MAP_FLOAT_OOB_FILL_",)

    @property
    def ptx_fill_mode(self) -> int:
        return int(self)


_NUMPY_TO_DATATYPE = {
    "uint8": DataType.UINT8, "int8": DataType.UINT8, "bool": DataType.UINT8,
    "uint16": DataType.UINT16, "int16": DataType.UINT16, "uint32": DataType.UINT32,
    "int32": DataType.INT32, "uint64": DataType.UINT64, "int64": DataType.INT64,
    "float16": DataType.FLOAT16, "float32": DataType.FLOAT32, "float64": DataType.FLOAT64,
    "bfloat16": DataType.BFLOAT16,
}


# PTX's reading of a type name; the 8-bit floats, like int8, travel as UINT8 (a copy moves
# bits unchanged and the driver has no FP8 type).
_PTX_TO_DATATYPE = {
    "u8": DataType.UINT8, "s8": DataType.UINT8, "b8": DataType.UINT8,
    "e4m3": DataType.UINT8, "e5m2": DataType.UINT8,
    "u16": DataType.UINT16, "s16": DataType.UINT16, "b16": DataType.UINT16,
    "u32": DataType.UINT32, "b32": DataType.UINT32, "s32": DataType.INT32,
    "u64": DataType.UINT64, "b64": DataType.UINT64, "s64": DataType.INT64,
    "f16": DataType.FLOAT16, "bf16": DataType.BFLOAT16, "f32": DataType.FLOAT32,
    "f64": DataType.FLOAT64, "tf32": DataType.TFLOAT32,
}


def _from_ptx_name(dtype) -> DataType | None:
    """The DataType of a PTX type (t.f16) or a PTX/wgmma type name ('f16', 'u8'), else None."""
    from ptxdsl.instructions.wgmma import WgmmaType, ptx_type_named  # lazy: runtime layer
    from ptxdsl.types import ScalarType
    named = dtype if isinstance(dtype, ScalarType | WgmmaType) else \
        ptx_type_named(dtype) if isinstance(dtype, str) else None
    if named is None:
        return None
    if named.value not in _PTX_TO_DATATYPE:
        _refuse(f"dtype: PTX type {named.value} has no CUtensorMapDataType; PTX types that "
                f"have one: {', '.join(_PTX_TO_DATATYPE)}")
    return _PTX_TO_DATATYPE[named.value]


# made once: building it per call was most of an encode's Python time (a map per launch at
# decode shapes costs more than the kernel otherwise)
_DATA_TYPE_NAMES = frozenset({*(m.name for m in DataType), *(m.driver_name for m in DataType)})


def data_type_of(dtype) -> DataType:
    """A CUtensorMapDataType from a DataType, a driver name, a PTX type or type name ('f16',
    'u8', t.s32: PTX's meaning), or a numpy dtype (a dtype, a scalar type or a dtype name such
    as 'float16'; numpy's codes such as 'f8' or '<u2' are refused as ambiguous).

    int8/int16/bool have no TMA type of their own and map to UINT8/UINT16: a copy moves bits
    unchanged (only reductions and OOB-NaN fill look at the type).
    """
    # np.dtype(None) is float64 and np.dtype(np.True_) is bool: neither names a type here.
    if dtype is None or isinstance(dtype, bool | np.bool_):
        _refuse(f"dtype: expected a numpy dtype or a CUtensorMapDataType name, got "
                f"{type(dtype).__name__} {dtype!r}")
    if isinstance(dtype, DataType | int | np.integer):
        return DataType.coerce(dtype, "dtype")
    if isinstance(dtype, str) and dtype.upper().removeprefix("CU_TENSOR_MAP_DATA_TYPE_") in \
            _DATA_TYPE_NAMES:
        return DataType.coerce(dtype, "dtype")
    from_ptx = _from_ptx_name(dtype)
    if from_ptx is not None:
        return from_ptx
    name = dtype if isinstance(dtype, str) else getattr(dtype, "name", None)
    if name != "bfloat16":
        try:
            name = np.dtype(dtype).name
        except (TypeError, ValueError):
            _refuse(f"dtype: {dtype!r} is neither a numpy dtype nor a CUtensorMapDataType "
                    "name")
    from ptxdsl.instructions.wgmma import numpy_code
    if numpy_code(dtype) is not None:
        _refuse(f"dtype: {dtype!r} is numpy's code for {name}, ambiguous beside PTX's type "
                f"names; write {name!r} or a PTX type name ('f16', 'u8')")
    if name not in _NUMPY_TO_DATATYPE:
        _refuse(f"dtype: numpy {name} has no CUtensorMapDataType; supported: "
                f"{', '.join(sorted(_NUMPY_TO_DATATYPE))}")
    return _NUMPY_TO_DATATYPE[name]


# What the map builders take, for annotations (each value is checked by its rule): dimensions
# as one int or a sequence of them in numpy order; an element type as a DataType, a PTX type
# or name, or a numpy dtype; each enum as its member, int value or (driver) name.
Dims: TypeAlias = "SupportsIndex | Sequence[SupportsIndex] | np.ndarray"
TmaDType: TypeAlias = "DataType | ScalarType | DTypeLike"
InterleaveLike: TypeAlias = Interleave | int | str
SwizzleLike: TypeAlias = Swizzle | int | str
L2PromotionLike: TypeAlias = L2Promotion | int | str
OobFillLike: TypeAlias = OobFill | int | str
