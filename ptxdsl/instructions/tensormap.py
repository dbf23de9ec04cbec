"""`tensormap.replace.tile` (PTX ISA §9.7.9.26; digest §1) and `tensormap.cp_fenceproxy`
(§9.7.13.16; digest §2).

::

    tensormap.replace.tile.<field>{.global,.shared::cta}.b1024.<b32|b64> [addr], {ord,} new_val;
    tensormap.cp_fenceproxy.global.shared::cta.tensormap::generic.release.<scope>.sync.aligned
        [dst], [src], 128;

Builder functions take cuda::ptx's arguments in cuda::ptx's order after the kernel
(`tensormap_replace_box_dim(k, ptx.space_shared, smap, ord, value)`, `tensormap_cp_fenceproxy(k,
'release', 'gpu', dst, src, 128)`), or the same by keyword; the space is 'shared' (.shared::cta),
'global', or 'generic' (a ptxdsl extension). Named values for the enum-valued fields are in
`tensormap_values`.
"""

from __future__ import annotations

import enum

import attrs

from ..errors import OperandError
from ..operands import Addr, Imm, Reg
from ..types import Requires, ScalarType, Scope, Sem, StateSpace, req
from . import _ptx_args as A
from ._tma_addr import tmap_buffer
from ._tma_box import MAX_BOX_DIM, MAX_RANK
from .base import Instruction, _given, check_enum, check_imm, check_src, refuse
from .fence import TENSORMAP_BYTES, check_size_128
from .tensormap_values import (
    PACKED_ELEMTYPES,
    REPLACE,
    SWIZZLE_96B,
    SWIZZLE_ATOMICITY,
    Elemtype,
    FillMode,
    Interleave,
    SwizzleAtomicity,
    SwizzleMode,
    elemtype_from_driver,
    parse_elemtype,
    parse_value,
    value_requires,
)

__all__ = [
    "tensormap_replace_global_address", "tensormap_replace_rank", "tensormap_replace_box_dim",
    "tensormap_replace_global_dim", "tensormap_replace_global_stride",
    "tensormap_replace_element_stride", "tensormap_replace_element_size",
    "tensormap_replace_elemtype", "tensormap_replace_interleave_layout",
    "tensormap_replace_swizzle_mode", "tensormap_replace_swizzle_atomicity",
    "tensormap_replace_fill_mode", "tensormap_cp_fenceproxy",
    "Elemtype", "Interleave", "SwizzleMode", "SwizzleAtomicity", "FillMode",
]

S = StateSpace
T = ScalarType
REPLACE_SPACES = (S.shared_cta, S.global_, S.generic)


class Field(enum.Enum):
    """A tensor-map field `tensormap.replace` can write."""

    global_address = "global_address"
    rank = "rank"
    box_dim = "box_dim"
    global_dim = "global_dim"
    global_stride = "global_stride"
    element_stride = "element_stride"
    elemtype = "elemtype"
    interleave_layout = "interleave_layout"
    swizzle_mode = "swizzle_mode"
    swizzle_atomicity = "swizzle_atomicity"
    fill_mode = "fill_mode"

    @property
    def type(self) -> ScalarType:
        """The type of the field's new value: `.b64` for the global address and strides, `.b32` for
        the rest."""
        return T.b64 if self in (Field.global_address, Field.global_stride) else T.b32

    @property
    def has_ord(self) -> bool:
        """Whether the field is per dimension, so the replace form takes an `ord` operand (box_dim,
        global_dim, global_stride, element_stride)."""
        return self in (Field.box_dim, Field.global_dim, Field.global_stride,
                        Field.element_stride)

    @property
    def enum(self):
        """The value enum of a field3 (immediate-only) field, else None."""
        return {Field.elemtype: Elemtype, Field.interleave_layout: Interleave,
                Field.swizzle_mode: SwizzleMode, Field.swizzle_atomicity: SwizzleAtomicity,
                Field.fill_mode: FillMode}.get(self)


def _check_value(insn: str, field: Field, value):
    """new_val: field3 an immediate code; field1/field2 a register or a range-checked
    immediate (ptxas checks none of these ranges: digest §1.4)."""
    if field.enum is not None:
        if isinstance(value, Reg):
            raise OperandError(insn, "new_val", f"an immediate {field.enum.__name__} value "
                               "(ptxas rejects a register for this field; emit one "
                               "instruction per value)", _given(value))
        return parse_value(insn, "new_val", field.enum, value.value if isinstance(value, Imm)
                           else value)
    v = check_src(insn, "new_val", value, field.type)
    if isinstance(v, Reg):
        if v.type is T.f32:   # ptxas: "Arguments mismatch" for the .b32 fields (not .b64)
            raise OperandError(insn, "new_val", "an integer or bit register of 32 bits",
                               _given(v))
        return v
    n = v.value
    lo, hi, rule = {
        Field.global_address: (0, (1 << 64) - 1, "a 16-byte aligned address"),
        Field.rank: (0, MAX_RANK - 1, "rank - 1 (the field counts from zero; for an N-d "
                     "tensor write N - 1, as cuda::ptx does, or pass rank=N)"),
        Field.box_dim: (1, MAX_BOX_DIM, f"a box extent of 1..{MAX_BOX_DIM} elements"),
        Field.global_dim: (1, (1 << 32) - 1, "a tensor extent of 1..2^32-1 elements"),
        Field.global_stride: (0, (1 << 40) - 1, "a byte stride, a multiple of 16 below 2^40"),
        Field.element_stride: (1, 8, "a traversal stride of 1..8"),
    }[field]
    aligned = n % 16 == 0 if field in (Field.global_address, Field.global_stride) else True
    if not (lo <= n <= hi and aligned):
        raise OperandError(insn, "new_val", f"{rule} ([{lo}, {hi}])", n)
    return Imm(n, T.u64 if field.type is T.b64 else T.u32)


def _addr(insn: str, space, addr) -> tuple[StateSpace, Addr]:
    space = A.space(insn, "space", space, REPLACE_SPACES)
    return space, tmap_buffer(insn, "addr", addr, space)


def _opcode(field: Field, space: StateSpace) -> str:
    return f"tensormap.replace.tile.{field.value}{space.ptx}.b1024.{field.type}"


@attrs.frozen
class TensormapReplace(Instruction):
    """`tensormap.replace.tile.<field>{.ss}.b1024.type [addr], new_val;` for .global_address
    (.b64), .rank (.b32, rank - 1) and the immediate-only fields .elemtype,
    .interleave_layout, .swizzle_mode, .swizzle_atomicity, .fill_mode (.b32)."""

    MNEMONIC = "tensormap.replace.tile"
    field: Field
    space: StateSpace
    addr: Addr
    new_val: object

    def __attrs_post_init__(self):
        field = check_enum(self.MNEMONIC, "field", self.field, Field)
        if field.has_ord:
            refuse(f"tensormap.replace.tile.{field.value}", "this field takes an ord operand "
                   "(use TensormapReplaceDim)")
        self._set("field", field)
        space, addr = _addr(f"tensormap.replace.tile.{field.value}", self.space, self.addr)
        self._set("space", space)
        self._set("addr", addr)
        self._set("new_val", _check_value(self.opcode(), field, self.new_val))

    @property
    def requires(self) -> Requires:
        if isinstance(self.new_val, enum.IntEnum):
            return value_requires(self.new_val)
        return REPLACE

    def opcode(self) -> str:
        return _opcode(self.field, self.space)

    def operands(self):
        v = self.new_val
        return (self.addr, Imm(int(v), T.u32) if isinstance(v, enum.IntEnum) else v)


@attrs.frozen
class TensormapReplaceDim(Instruction):
    """`tensormap.replace.tile.<field>{.ss}.b1024.type [addr], ord, new_val;` for .box_dim,
    .global_dim, .element_stride (.b32) and .global_stride (.b64, bytes; ord k is the stride
    of dimension k+1). `ord` must be an immediate 0..4 (0..3 for global_stride)."""

    MNEMONIC = "tensormap.replace.tile"
    field: Field
    space: StateSpace
    addr: Addr
    ord: int
    new_val: object

    def __attrs_post_init__(self):
        field = check_enum(self.MNEMONIC, "field", self.field, Field)
        if not field.has_ord:
            refuse(f"tensormap.replace.tile.{field.value}", "this field takes no ord operand "
                   "(use TensormapReplace)")
        self._set("field", field)
        space, addr = _addr(f"tensormap.replace.tile.{field.value}", self.space, self.addr)
        self._set("space", space)
        self._set("addr", addr)
        name = self.opcode()
        hi = MAX_RANK - 2 if field is Field.global_stride else MAX_RANK - 1
        if field is Field.global_stride and check_imm(name, "ord", self.ord, 0, MAX_RANK) > hi:
            refuse(name, f"ord {self.ord} would be the stride of dimension {self.ord + 1}; a "
                   "tensor has at most 5 dimensions and global_stride ord k is the byte stride "
                   "of dimension k+1, so ord must be 0..3")
        self._set("ord", check_imm(name, "ord", self.ord, 0, hi))
        self._set("new_val", _check_value(name, field, self.new_val))

    @property
    def requires(self) -> Requires:
        return REPLACE

    def opcode(self) -> str:
        return _opcode(self.field, self.space)

    def operands(self):
        return (self.addr, Imm(self.ord, T.u32), self.new_val)


def _cp_sem(sem) -> Sem:
    insn = "tensormap.cp_fenceproxy"
    try:
        given = A.sem(insn, sem)
    except OperandError:                   # not a semantics at all: name the one that fits
        given = A.sem(insn, sem, (Sem.release,))
    if given is not Sem.release:
        refuse(insn, f".{given.value} is rejected: cp_fenceproxy only releases, use sem "
               "'release' (the consumer acquires with fence_proxy_tensormap_generic(k, "
               "'acquire', scope, addr))")
    return given


@attrs.frozen
class TensormapCpFenceproxy(Instruction):
    """`tensormap.cp_fenceproxy.global.shared::cta.tensormap::generic.release.scope
    .sync.aligned [dst], [src], 128;` — warp-collective copy of a 128-byte map from shared
    memory to a global-space `dst`, then a release towards the tensormap proxy."""

    MNEMONIC = "tensormap.cp_fenceproxy"
    REQUIRES = req("8.3", 90)
    scope: Scope
    dst: Addr
    src: Addr
    size: int = TENSORMAP_BYTES
    sem: Sem = Sem.release

    def __attrs_post_init__(self):
        insn = self.MNEMONIC
        self._set("sem", _cp_sem(self.sem))
        self._set("scope", check_enum(insn, "scope", self.scope, Scope))
        name = self.opcode()
        self._set("dst", tmap_buffer(name, "dst", self.dst, S.global_))
        self._set("src", tmap_buffer(name, "src", self.src, S.shared_cta))
        self._set("size", check_size_128(name, self.size))

    def opcode(self) -> str:
        return ("tensormap.cp_fenceproxy.global.shared::cta.tensormap::generic.release"
                f"{self.scope.ptx}.sync.aligned")

    def operands(self):
        return (self.dst, self.src, Imm(self.size, T.u32))


# -- builder functions (cuda::ptx names and argument order, kernel first) -----------------------
_REPLACE = (("space", "tm_addr", "new_val"),)
_REPLACE_ORD = (("space", "tm_addr", "ord", "new_val"),)


def _replace(k, field: Field, args, kw, overloads=_REPLACE, new_val=None, insn=None):
    insn = insn or f"tensormap_replace_{field.value}"
    _, a = A.bind(insn, args, kw, overloads)
    name = f"tensormap.replace.tile.{field.value}"
    sp = A.space(name, "space", a["space"], REPLACE_SPACES)
    addr = A.space_addr(k, name, a["tm_addr"], sp)
    value = a["new_val"] if new_val is None else new_val
    if field.has_ord:
        k.emit(TensormapReplaceDim(field, sp, addr, a["ord"], value))
    else:
        k.emit(TensormapReplace(field, sp, addr, value))


@A.overloads(*_REPLACE)
def tensormap_replace_global_address(k, *args, **kw) -> None:
    """`(k, space, tm_addr, new_val)`: `tensormap.replace.tile.global_address.<space>.b1024.b64
    [tm_addr], new_val;` — space 'shared' (.shared::cta), 'global' or 'generic'."""
    _replace(k, Field.global_address, args, kw)


@A.overloads(*_REPLACE, ("space", "tm_addr", "=rank"))
def tensormap_replace_rank(k, *args, rank=None, **kw) -> None:
    """`(k, space, tm_addr, new_val)`: `tensormap.replace.tile.rank.<space>.b1024.b32 [tm_addr],
    new_val;` — new_val is the raw field value, rank - 1, as in cuda::ptx. The keyword
    `rank=` (a ptxdsl convenience) takes the tensor's rank instead: `(k, space, tm_addr,
    rank=2)` writes 1."""
    if rank is None:
        _replace(k, Field.rank, args, kw)
        return
    insn = "tensormap.replace.tile.rank"
    if "new_val" in kw or len(args) > 2:
        refuse(insn, "give new_val (the raw field value, rank - 1) or rank= (the tensor's "
               "rank), not both")
    if isinstance(rank, Reg):
        raise OperandError(insn, "rank", "an integer 1..5 (for a register holding rank - 1 "
                           "pass it as new_val)", _given(rank))
    value = check_imm(insn, "rank", rank, 1, MAX_RANK) - 1
    _replace(k, Field.rank, args, kw, (("space", "tm_addr"),), new_val=value)


@A.overloads(*_REPLACE_ORD)
def tensormap_replace_box_dim(k, *args, **kw) -> None:
    """`(k, space, tm_addr, ord, new_val)`: `tensormap.replace.tile.box_dim.<space>.b1024.b32
    [tm_addr], ord, new_val;` (new_val 1..256)."""
    _replace(k, Field.box_dim, args, kw, _REPLACE_ORD)


@A.overloads(*_REPLACE_ORD)
def tensormap_replace_global_dim(k, *args, **kw) -> None:
    """`(k, space, tm_addr, ord, new_val)`: `... .global_dim.<space>.b1024.b32 [tm_addr], ord,
    new_val;`"""
    _replace(k, Field.global_dim, args, kw, _REPLACE_ORD)


@A.overloads(*_REPLACE_ORD)
def tensormap_replace_global_stride(k, *args, **kw) -> None:
    """`(k, space, tm_addr, ord, new_val)`: `... .global_stride.<space>.b1024.b64 [tm_addr], ord,
    new_val;` — bytes, the stride of dimension ord+1 (a multiple of 16, below 2^40)."""
    _replace(k, Field.global_stride, args, kw, _REPLACE_ORD)


@A.overloads(*_REPLACE_ORD)
def tensormap_replace_element_stride(k, *args, **kw) -> None:
    """`(k, space, tm_addr, ord, new_val)`: `... .element_stride.<space>.b1024.b32 [tm_addr], ord,
    new_val;` (1..8)."""
    _replace(k, Field.element_stride, args, kw, _REPLACE_ORD)


@A.overloads(*_REPLACE_ORD)
def tensormap_replace_element_size(k, *args, **kw) -> None:
    """CCCL's legacy name of tensormap_replace_element_stride (the same PTX): `(k, space,
    tm_addr, ord, new_val)`."""
    _replace(k, Field.element_stride, args, kw, _REPLACE_ORD,
             insn="tensormap_replace_element_size")


@A.overloads(*_REPLACE, ("space", "tm_addr", "=driver_dtype"))
def tensormap_replace_elemtype(k, *args, driver_dtype=None, **kw) -> None:
    """`(k, space, tm_addr, new_val)`: `... .elemtype.<space>.b1024.b32 [tm_addr], code;` —
    new_val a PTX code (cuda::ptx's n32_t), a PTX name ('u8', 'bf16', 'f32.ftz', ...), an
    `Elemtype` or a numpy dtype; or, instead of new_val, `driver_dtype=` a CUtensorMapDataType
    (name, member or value), translated to PTX's code."""
    insn = "tensormap.replace.tile.elemtype"
    if driver_dtype is not None:
        if "new_val" in kw or len(args) > 2:
            refuse(insn, "give new_val (a PTX elemtype) or driver_dtype= (a "
                   "CUtensorMapDataType), not both")
        _replace(k, Field.elemtype, args, kw, (("space", "tm_addr"),),
                 new_val=elemtype_from_driver(insn, driver_dtype))
        return
    _, a = A.bind("tensormap_replace_elemtype", args, kw, _REPLACE)
    value = a["new_val"]
    if not isinstance(value, Reg):    # a register is refused with the field3 message
        value = parse_elemtype(insn, value)
    _replace(k, Field.elemtype, (), {**a, "new_val": value})


@A.overloads(*_REPLACE)
def tensormap_replace_interleave_layout(k, *args, **kw) -> None:
    """`(k, space, tm_addr, new_val)`: `... .interleave_layout ...` — 'none', '16B', '32B'
    (or 0..2)."""
    _replace(k, Field.interleave_layout, args, kw)


@A.overloads(*_REPLACE)
def tensormap_replace_swizzle_mode(k, *args, **kw) -> None:
    """`(k, space, tm_addr, new_val)`: `... .swizzle_mode ...` — 'none', '32B', '64B', '128B',
    '96B' (sm_103a), or 0..4."""
    _replace(k, Field.swizzle_mode, args, kw)


@A.overloads(*_REPLACE)
def tensormap_replace_swizzle_atomicity(k, *args, **kw) -> None:
    """`(k, space, tm_addr, new_val)`: `... .swizzle_atomicity ...` — '16B', '32B',
    '32B_flip_8B', '64B' (sm_100a+)."""
    _replace(k, Field.swizzle_atomicity, args, kw)


@A.overloads(*_REPLACE)
def tensormap_replace_fill_mode(k, *args, **kw) -> None:
    """`(k, space, tm_addr, new_val)`: `... .fill_mode ...` — 'zero' or 'nan' (OOB-NaN), or
    0..1."""
    _replace(k, Field.fill_mode, args, kw)


_CP = (("sem", "scope", "dst", "src", "size"), ("sem", "scope", "dst", "src"))


@A.overloads(*_CP)
def tensormap_cp_fenceproxy(k, *args, **kw) -> None:
    """`(k, sem, scope, dst, src, size)`: `tensormap.cp_fenceproxy.global.shared::cta
    .tensormap::generic.release.<scope>.sync.aligned [dst], [src], 128;` — warp-collective:
    all 32 lanes must run it. sem is 'release'; size the immediate 128 (may be left out).
    `dst` a global address (a generic pointer, or a pointer parameter, is converted)."""
    _, a = A.bind("tensormap_cp_fenceproxy", args, kw, _CP)
    sem = _cp_sem(a["sem"])   # refuse before emitting any address conversion
    insn = "tensormap.cp_fenceproxy"
    scope = A.scope(insn, a["scope"])
    size = check_size_128(insn, a.get("size", TENSORMAP_BYTES))
    dst = A.space_addr(k, insn, a["dst"], S.global_)
    src = A.space_addr(k, insn, a["src"], S.shared_cta)
    k.emit(TensormapCpFenceproxy(scope, dst, src, size, sem))


# -- forms: (form, requires, note) — rendered by ptxdsl.forms ----------------------------------
_R = "tensormap.replace.tile"
FORMS: list[tuple[str, Requires, str]] = [
    (f"{_R}.{{global_address,rank}}{{.global,.shared::cta}}.b1024.{{b64,b32}} [a], v",
     REPLACE, "rank writes rank-1"),
    (f"{_R}.{{box_dim,global_dim,element_stride}}{{.ss}}.b1024.b32 [a], ord, v", REPLACE,
     "ord immediate 0..4"),
    (f"{_R}.global_stride{{.ss}}.b1024.b64 [a], ord, v", REPLACE, "ord 0..3; bytes"),
    (f"{_R}.{{elemtype,interleave_layout,swizzle_mode,fill_mode}}{{.ss}}.b1024.b32 [a], imm",
     REPLACE, "immediate only"),
    (f"{_R}.swizzle_atomicity{{.ss}}.b1024.b32 [a], imm", SWIZZLE_ATOMICITY,
     "rejected on sm_90a"),
    (f"{_R}.elemtype{{.ss}}.b1024.b32 [a], 13..15", PACKED_ELEMTYPES,
     "sm_90a accepts 0..12 only"),
    (f"{_R}.swizzle_mode{{.ss}}.b1024.b32 [a], 4", SWIZZLE_96B, "96B swizzle; not sm_103f"),
    ("tensormap.cp_fenceproxy.global.shared::cta.tensormap::generic.release."
     "{cta,cluster,gpu,sys}.sync.aligned [d], [s], 128", req("8.3", 90), "plain sm_90"),
]
