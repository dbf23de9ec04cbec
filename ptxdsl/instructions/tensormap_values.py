"""Named values of the enum-valued `tensormap.replace` fields (digest §1.5, §7.3).

`elemtype`, `interleave_layout`, `swizzle_mode`, `swizzle_atomicity` and `fill_mode` take an
immediate code. These enums give the codes names; `parse_*` accept a member, the PTX code, a
name ('bf16', '128B', 'nan', ...), and for elemtype a numpy dtype or (through
`elemtype_from_driver`) a `CUtensorMapDataType` — whose numbering differs from PTX's for
f64, bf16 and f32.ftz.
"""

from __future__ import annotations

import enum
from typing import Any

from ..errors import OperandError
from ..types import Requires, req
from .base import int_like


class Elemtype(enum.IntEnum):
    """PTX `.elemtype` codes (not the driver's CUtensorMapDataType values)."""

    u8 = 0
    u16 = 1
    u32 = 2
    s32 = 3
    u64 = 4
    s64 = 5
    f16 = 6
    f32 = 7
    f32_ftz = 8
    f64 = 9
    bf16 = 10
    tf32 = 11
    tf32_ftz = 12
    b4x16 = 13
    b4x16_p64 = 14
    b6x16_p32 = 15   # also spelled .b6p2x16 (stores); same code

    @property
    def ptx_name(self) -> str:
        """The name as the PTX ISA's table writes it (`f32.ftz` for `f32_ftz`)."""
        return self.name.replace("_ftz", ".ftz")


class Interleave(enum.IntEnum):
    none = 0
    b16 = 1
    b32 = 2


class SwizzleMode(enum.IntEnum):
    none = 0
    b32 = 1
    b64 = 2
    b128 = 3
    b96 = 4          # sm_103a only, PTX 8.8


class SwizzleAtomicity(enum.IntEnum):
    b16 = 0
    b32 = 1
    b32_flip_8b = 2
    b64 = 3


class FillMode(enum.IntEnum):
    zero = 0
    nan = 1          # OOB-NaN fill (driver: NAN_REQUEST_ZERO_FMA)


_ELEMTYPE_NAMES = {e.ptx_name: e for e in Elemtype} | {"b6p2x16": Elemtype.b6x16_p32}
_NUMPY = {"uint8": Elemtype.u8, "uint16": Elemtype.u16, "uint32": Elemtype.u32,
          "int32": Elemtype.s32, "uint64": Elemtype.u64, "int64": Elemtype.s64,
          "float16": Elemtype.f16, "float32": Elemtype.f32, "float64": Elemtype.f64,
          "bfloat16": Elemtype.bf16}
_SPELLINGS: dict[type, dict[str, Any]] = {
    Interleave: {"none": Interleave.none, "16b": Interleave.b16, "32b": Interleave.b32},
    SwizzleMode: {"none": SwizzleMode.none, "32b": SwizzleMode.b32, "64b": SwizzleMode.b64,
                  "128b": SwizzleMode.b128, "96b": SwizzleMode.b96},
    SwizzleAtomicity: {"16b": SwizzleAtomicity.b16, "32b": SwizzleAtomicity.b32,
                       "32b_flip_8b": SwizzleAtomicity.b32_flip_8b,
                       "64b": SwizzleAtomicity.b64},
    FillMode: {"zero": FillMode.zero, "none": FillMode.zero, "nan": FillMode.nan,
               "oob_nan": FillMode.nan, "nan_request_zero_fma": FillMode.nan},
}
_PREFIXES = {Interleave: "cu_tensor_map_interleave_", SwizzleMode: "cu_tensor_map_swizzle_",
             FillMode: "cu_tensor_map_float_oob_fill_"}

# CUtensorMapDataType (CUDA 13 cuda.h) -> PTX elemtype; names without the driver prefix.
DRIVER_DTYPES: dict[str, tuple[int, Elemtype]] = {
    "UINT8": (0, Elemtype.u8), "UINT16": (1, Elemtype.u16), "UINT32": (2, Elemtype.u32),
    "INT32": (3, Elemtype.s32), "UINT64": (4, Elemtype.u64), "INT64": (5, Elemtype.s64),
    "FLOAT16": (6, Elemtype.f16), "FLOAT32": (7, Elemtype.f32), "FLOAT64": (8, Elemtype.f64),
    "BFLOAT16": (9, Elemtype.bf16), "FLOAT32_FTZ": (10, Elemtype.f32_ftz),
    "TFLOAT32": (11, Elemtype.tf32), "TFLOAT32_FTZ": (12, Elemtype.tf32_ftz),
    "16U4_ALIGN8B": (13, Elemtype.b4x16), "16U4_ALIGN16B": (14, Elemtype.b4x16_p64),
    "16U6_ALIGN16B": (15, Elemtype.b6x16_p32),
}
_DRIVER_ALIASES = {"U4X16_ALIGN8B": "16U4_ALIGN8B", "U4X16_ALIGN16B": "16U4_ALIGN16B",
                   "U6X16_ALIGN16B": "16U6_ALIGN16B"}
_DRIVER_BY_VALUE = {v: e for v, e in DRIVER_DTYPES.values()}


def _choices(cls) -> str:
    names = [k for k in _SPELLINGS.get(cls, {})] or [e.ptx_name for e in Elemtype]
    return ", ".join(repr(n) for n in names) + f" or a code 0..{max(cls)}"


def _from_int(insn: str, operand: str, cls, value: int):
    try:
        return cls(value)
    except ValueError:
        raise OperandError(insn, operand, f"one of {_choices(cls)}", value) from None


def parse_value(insn: str, operand: str, cls, value: Any):
    """An enum member of `cls` from a member, a code, or a name (case-insensitive)."""
    if isinstance(value, cls):
        return value
    if isinstance(value, bool):
        raise OperandError(insn, operand, f"one of {_choices(cls)}", repr(value))
    if not isinstance(value, enum.Enum):
        value = int_like(value)
    if isinstance(value, int) and not isinstance(value, enum.Enum):
        return _from_int(insn, operand, cls, value)
    if isinstance(value, str):
        text = value.strip().lstrip(".").lower()
        if cls is Elemtype and text in _ELEMTYPE_NAMES:
            return _ELEMTYPE_NAMES[text]
        text = text.removeprefix(_PREFIXES.get(cls, "\0"))
        for name, member in _SPELLINGS.get(cls, {}).items():
            if text in (name, member.name):
                return member
        if cls is SwizzleMode and text.startswith("128b_atom"):
            raise OperandError(insn, operand, "a swizzle mode; the driver's 128B_ATOM_* "
                               "swizzles set two fields: swizzle_mode '128B' plus "
                               "swizzle_atomicity ('32B', '32B_flip_8B' or '64B')", repr(value))
    if cls is Elemtype and not isinstance(value, str | enum.Enum):
        found = _from_numpy(value)
        if found is not None:
            return found
    raise OperandError(insn, operand, f"one of {_choices(cls)}", repr(value))


def _from_numpy(value: Any) -> Elemtype | None:
    try:
        import numpy as np
        dt = np.dtype(value)
    except (TypeError, ImportError):
        return None
    return _NUMPY.get(dt.name)


def parse_elemtype(insn: str, value: Any) -> Elemtype:
    """A PTX elemtype from its code, PTX name ('bf16', 'f32.ftz'), or a numpy dtype (a dtype,
    a scalar type, or a dtype name such as 'float32'; codes like 'f8' are refused as
    ambiguous)."""
    if isinstance(value, str) and value.strip().lower() in _NUMPY:   # 'float32', not 'f4'
        return _NUMPY[value.strip().lower()]
    return parse_value(insn, "new_val", Elemtype, value)


def elemtype_from_driver(insn: str, value: Any) -> Elemtype:
    """The PTX elemtype of a CUtensorMapDataType given as a name ('FLOAT64',
    'CU_TENSOR_MAP_DATA_TYPE_FLOAT64'), an enum member (cuda.bindings' or ptxdsl.runtime's),
    or the driver's integer value. FLOAT64 (8) -> 9, BFLOAT16 (9) -> 10, FLOAT32_FTZ (10) -> 8.
    """
    if isinstance(value, enum.Enum):
        value = value.name
    if isinstance(value, str):
        key = value.strip().upper().removeprefix("CU_TENSOR_MAP_DATA_TYPE_")
        key = _DRIVER_ALIASES.get(key, key)
        if key in DRIVER_DTYPES:
            return DRIVER_DTYPES[key][1]
    elif isinstance(value, int) and not isinstance(value, bool) and value in _DRIVER_BY_VALUE:
        return _DRIVER_BY_VALUE[value]
    raise OperandError(insn, "driver_dtype", "a CUtensorMapDataType name or value (" +
                       ", ".join(DRIVER_DTYPES) + ")", repr(value))


# -- validity per target (digest §0.1, [ptxas]) ---------------------------------------------------
# tensormap.replace is arch-specific; 'f' targets (PTX 8.8) of the same SMs accept it too.
ARCH_ALL = (90, 100, 101, 103, 110, 120, 121)
ARCH_BLACKWELL = (100, 101, 103, 110, 120, 121)
REPLACE = req("8.3", 90, arch=ARCH_ALL, family=True)
SWIZZLE_ATOMICITY = req("8.6", 100, arch=ARCH_BLACKWELL, family=True)
PACKED_ELEMTYPES = req("8.7", 100, arch=ARCH_BLACKWELL, family=True)
SWIZZLE_96B = req("8.8", 103, arch=(103,))


def value_requires(member: enum.IntEnum) -> Requires:
    """What a field3 value needs beyond tensormap.replace itself."""
    if isinstance(member, SwizzleAtomicity):
        return SWIZZLE_ATOMICITY
    if isinstance(member, Elemtype) and member >= Elemtype.b4x16:
        return PACKED_ELEMTYPES
    if member is SwizzleMode.b96:
        return SWIZZLE_96B
    return REPLACE
