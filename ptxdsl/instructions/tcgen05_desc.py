"""Host-side tcgen05 descriptors: the 32-bit instruction descriptor of tcgen05.mma (PTX ISA
§9.7.16.4.2, "Instruction descriptor", one table per kind family) and the 64-bit sm_100
shared-memory matrix descriptor (§9.7.16.4.1, "Shared memory descriptor").

`InstrDesc` takes the shape and types of one tcgen05.mma and checks them against the ISA's
table of kinds and shapes (§9.7.16.2.1, "Matrix Shape"): the types each kind allows, the M
and N each cta_group (and .ws) allows, the fields a kind leaves reserved. `.value` is the int
the instruction takes as `idesc`; `InstrDesc.decode` reads one back::

    idesc = InstrDesc("f16", 128, 256, atype="bf16", btype="bf16").value

`SmemDesc100` encodes the shared-memory descriptor: start address, leading and stride byte
offsets (each >> 4 in 14 bits, as wgmma's), the fixed 0b001 at bits 46-48, the base offset,
the leading-dimension mode and the 3-bit swizzle (none, 128B with 32B atoms, 128B, 64B, 32B).
`SmemDesc100.from_layout` takes the offsets of a tile from wgmma_desc's `SmemLayout` (the
canonical K- and MN-major arrangements are the same for tcgen05), and
`smem_descriptor(k, layout, addr)` builds one in a register from a run-time address.
Tensor-memory allocation sizes and the tcgen05.ld/st fragment maps are in `tcgen05_tmem`.
"""

from __future__ import annotations

import enum
from typing import Any

import attrs

from ..errors import BuildError, OperandError, fail_closed, fail_closed_methods, refuse_assignment
from ..operands import Reg, as_int
from ..types import ScalarType
from .base import _given, int_like
from .bulk import CtaGroup, cta_group_arg
from .wgmma_desc import SMEM_LIMIT, SmemLayout, SwizzleMode, address_descriptor

__all__ = ["MmaKind", "InstrDesc", "Swizzle100", "SmemDesc100", "smem_descriptor"]


class Kind(enum.Enum):
    """tcgen05.mma's `.kind::*`, for the instructions (`tcgen05_mma`, `ptx.kind_f16`, ...) and
    their descriptors; the value is its PTX spelling, as cuda::ptx's `kind_t` tags (a kind
    given as any enum with these values or 'kind_f16', or a name 'f16' / 'kind::f16' /
    'kind_f16', is taken; an element type such as t.f16 is not)."""

    f16 = "kind::f16"
    tf32 = "kind::tf32"
    f8f6f4 = "kind::f8f6f4"
    i8 = "kind::i8"
    mxf8f6f4 = "kind::mxf8f6f4"
    mxf4 = "kind::mxf4"
    mxf4nvf4 = "kind::mxf4nvf4"

    @property
    def block_scaled(self) -> bool:
        """The kinds whose descriptor carries scale-factor fields (table "mxf8f6f4", "mxf4
        and mxf4nvf4") instead of the D type, saturate and max shift."""
        return self.value.startswith("kind::mx")

    @classmethod
    def coerce(cls, value: Any) -> Kind:
        """A kind from a member, a same-valued member of another enum, or its name."""
        if isinstance(value, cls):
            return value
        text = foreign_kind(value) if isinstance(value, enum.Enum) else value
        if isinstance(text, str):
            key = text.strip().lstrip(".").replace("kind_", "kind::").removeprefix("kind::")
            for m in cls:
                if m.name == key:
                    return m
        raise OperandError("InstrDesc", "kind", "one of " + ", ".join(
            repr(m.name) for m in cls) + " (or 'kind::f16', ptx.kind_f16, ...)", _given(value))


MmaKind = Kind     # the descriptors' name for it


def foreign_kind(value: enum.Enum) -> Any:
    """Another enum's member as a kind's spelling: its value when that is spelled as a kind
    ('kind::f16', 'kind_f16'), else the member itself (refused by the caller). A bare 'f16'
    is not taken: t.f16 and WgmmaType.f16 are element types (they go in atype / btype)."""
    text = value.value
    if isinstance(text, str) and text.strip().lstrip(".").startswith(("kind::", "kind_")):
        return text
    return value


def _kind(v: Any) -> MmaKind:   # a named converter: the attrs plugin types the field
    return MmaKind.coerce(v)


_F8F6F4 = {"e4m3": 0, "e5m2": 1, "e2m3": 3, "e3m2": 4, "e2m1": 5}
_SUB_BYTE = ("e2m3", "e3m2", "e2m1")


@attrs.frozen
class _KindInfo:
    ab: dict[str, int]            # element type -> its atype/btype code
    d: dict[str, int]             # D type -> its dtype code (block-scaled: not encoded)
    k_dense: int                  # K of one dense instruction (sparse: twice)


_KINDS = {
    MmaKind.f16: _KindInfo({"f16": 0, "bf16": 1}, {"f16": 0, "f32": 1}, 16),
    MmaKind.tf32: _KindInfo({"tf32": 2}, {"f32": 1}, 8),
    # PTX ISA 9.0's table allows an f16 D for f8f6f4 (8.7's listed f32 only).
    MmaKind.f8f6f4: _KindInfo(_F8F6F4, {"f16": 0, "f32": 1}, 32),
    MmaKind.i8: _KindInfo({"u8": 0, "s8": 1}, {"s32": 2}, 32),
    MmaKind.mxf8f6f4: _KindInfo(_F8F6F4, {"f32": 1}, 32),
    MmaKind.mxf4: _KindInfo({"e2m1": 1}, {"f32": 1}, 64),
    MmaKind.mxf4nvf4: _KindInfo({"e2m1": 1}, {"f32": 1}, 64),
}
_SCALE_TYPES = {MmaKind.mxf8f6f4: ("ue8m0",), MmaKind.mxf4: ("ue8m0",),
                MmaKind.mxf4nvf4: ("ue4m3", "ue8m0")}
_SCALE_CODE = {"ue4m3": 0, "ue8m0": 1}
_MAX_SHIFT = {0: 0, 8: 1, 16: 2, 32: 3}


def _type_name(what: str, value: Any) -> str:
    """An element type's name: 'bf16', '.e4m3', t.bf16, WgmmaType.e4m3, t.s32."""
    if isinstance(value, ScalarType | enum.Enum):
        value = value.value
    if not isinstance(value, str):
        raise OperandError("InstrDesc", what, "an element type name ('bf16', 'e4m3', ...) or "
                           "a ptxdsl type", _given(value))
    return value.strip().lstrip(".")


def _flag(what: str, value: Any) -> bool:
    if type(value) is not bool:   # a truthy "no" must not set a bit
        raise OperandError("InstrDesc", what, "True or False", _given(value))
    return value


def _n_choices(kind: MmaKind, cta_group: int, ws: bool, sparse: bool
               ) -> tuple[tuple[int, ...], str]:
    """The N values of Table "Various combinations of .kind and shapes" for this case, and
    how to say them."""
    if ws:
        return ((64, 128), "64 or 128") if sparse else ((64, 128, 256), "64, 128 or 256")
    if kind is MmaKind.i8:
        if cta_group == 2:
            return tuple(range(32, 257, 32)), "a multiple of 32 from 32 to 256"
        return (8, 16, 24, *range(32, 257, 16)), "8, 16, 24, or a multiple of 16 to 256"
    step = 16 if cta_group == 2 else 8
    return tuple(range(step, 257, step)), f"a multiple of {step} from {step} to 256"


def _m_choices(kind: MmaKind, cta_group: int, ws: bool, sparse: bool) -> tuple[int, ...]:
    if ws:
        return (32, 64, 128)
    if kind.block_scaled:
        return (256,) if cta_group == 2 and sparse else (128, 256) if cta_group == 2 else (128,)
    return (128, 256) if cta_group == 2 else (64, 128)


def _int(what: str, value: Any) -> int:
    n = int_like(value)
    if isinstance(n, bool) or not isinstance(n, int):
        raise OperandError("InstrDesc", what, "an int", _given(value))
    return n


def _choice(what: str, value: int, choices: tuple[int, ...], said: str, why: str) -> int:
    if value not in choices:
        raise OperandError("InstrDesc", what, f"{said} ({why})", value)
    return value


@attrs.frozen
class InstrDesc:
    """The instruction descriptor of one tcgen05.mma: `kind`, the shape `m` x `n` (M is the
    whole CTA pair's with cta_group=2), the D, A and B types, and the options the kind
    takes. Every field is checked against the ISA's tables when it is made; `.value` is the
    32-bit descriptor."""

    kind: MmaKind = attrs.field(converter=_kind)
    m: int
    n: int
    dtype: Any = None               # default: the kind's only (or f32) D type
    atype: Any = None               # default: the kind's only A type
    btype: Any = None
    cta_group: int = 1
    ws: bool = False                # tcgen05.mma.ws
    sparse: bool = False
    sparsity_selector: int = 0      # .sp: which metadata group (not the block-scaled kinds)
    saturate: bool = False          # .kind::i8 only
    negate_a: bool = False
    negate_b: bool = False
    transpose_a: bool = False       # MN-major A
    transpose_b: bool = False
    max_shift: int = 0              # .ws: B-reuse shift of 0, 8, 16 or 32
    scale_type: Any = None          # block-scaled: 'ue8m0' (default) or 'ue4m3' (mxf4nvf4)
    scale_a_id: int = 0             # block-scaled: the scale factors' byte in each TMEM column
    scale_b_id: int = 0
    k: Any = None                   # K = 96 of mxf4 / mxf4nvf4 (sm_103a); see mma_k

    def __attrs_post_init__(self):
        kind, info = self.kind, _KINDS[self.kind]
        cg = cta_group_arg("InstrDesc", self.cta_group)
        self._set("cta_group", 1 if cg is CtaGroup.one else 2)
        for f in ("ws", "sparse", "saturate", "negate_a", "negate_b", "transpose_a",
                  "transpose_b"):
            _flag(f, getattr(self, f))
        for what, table in (("dtype", info.d), ("atype", info.ab), ("btype", info.ab)):
            value = getattr(self, what)
            if value is None:
                if len(table) > 1 and what != "dtype":
                    raise OperandError("InstrDesc", what, f"the {what} of .{kind.value}: one "
                                       "of " + ", ".join(map(repr, table)), "None")
                value = "f32" if "f32" in table else next(iter(table))
            name = _type_name(what, value)
            if name not in table:
                raise OperandError("InstrDesc", what, f"a {what} of .{kind.value}: one of "
                                   + ", ".join(map(repr, table)), repr(name))
            self._set(what, name)
        self._check_rules(kind)
        m, n = _int("m", self.m), _int("n", self.n)
        self._set("m", m)
        self._set("n", n)
        where = (f".{kind.value}{'.ws' if self.ws else ''}, cta_group::{self.cta_group}"
                 f"{', sparse' if self.sparse else ''}")
        ms = _m_choices(kind, self.cta_group, self.ws, self.sparse)
        _choice("m", m, ms, " or ".join(map(str, ms)), where)
        _choice("n", n, *_n_choices(kind, self.cta_group, self.ws, self.sparse), where)
        self._check_k(kind)

    def _set(self, name: str, value: Any) -> None:
        object.__setattr__(self, name, value)

    def _check_rules(self, kind: MmaKind) -> None:
        """The per-kind options of the descriptor tables."""
        if kind is MmaKind.f16 and (self.atype != self.btype or self.dtype == "f16"
                                    and self.atype != "f16"):
            raise BuildError(f"InstrDesc: .{kind.value} takes A and B of one type (f16 or "
                             f"bf16), and an f16 D only with f16 inputs; got D {self.dtype}, "
                             f"A {self.atype}, B {self.btype}")
        if self.saturate and kind is not MmaKind.i8:
            raise BuildError(f"InstrDesc: saturate is for .kind::i8 only, not .{kind.value}")
        if kind is MmaKind.i8 and (self.negate_a or self.negate_b):
            raise BuildError("InstrDesc: .kind::i8 cannot negate A or B")
        sub_byte = [x for x, t in (("A", self.atype), ("B", self.btype))
                    if t in _SUB_BYTE and getattr(self, f"transpose_{x.lower()}")]
        if kind in (MmaKind.mxf4, MmaKind.mxf4nvf4) and (self.transpose_a or self.transpose_b):
            raise BuildError(f"InstrDesc: .{kind.value} has no transpose (A and B K-major)")
        if sub_byte:
            # CUTLASS's UMMA::InstrDescriptor: MN-major only for 8-bit and wider types.
            raise BuildError(f"InstrDesc: {' and '.join(sub_byte)} of a 6- or 4-bit type must "
                             "be K-major (transpose only for e4m3, e5m2, 8-bit int, f16, bf16, "
                             "tf32)")
        # stored as plain ints: a numpy one would make `.value` a numpy scalar
        sel = _int("sparsity_selector", self.sparsity_selector)
        self._set("sparsity_selector", sel)
        if sel and (not self.sparse or kind.block_scaled) or not 0 <= sel <= 3:
            raise OperandError("InstrDesc", "sparsity_selector", "0..3, with sparse=True, for "
                               "the kinds without block scaling (0 otherwise)", sel)
        shift = _int("max_shift", self.max_shift)
        self._set("max_shift", shift)
        if shift not in _MAX_SHIFT or shift and not self.ws:
            raise OperandError("InstrDesc", "max_shift", "0, 8, 16 or 32, non-zero only for "
                               ".ws", shift)
        if self.ws and (kind.block_scaled or self.cta_group == 2):
            raise BuildError(f"InstrDesc: tcgen05.mma.ws has no .{kind.value} and no "
                             "cta_group::2 form")
        self._check_scales(kind)

    def _check_scales(self, kind: MmaKind) -> None:
        ids = (_int("scale_a_id", self.scale_a_id), _int("scale_b_id", self.scale_b_id))
        self._set("scale_a_id", ids[0])
        self._set("scale_b_id", ids[1])
        if not kind.block_scaled:
            if self.scale_type is not None or any(ids):
                raise BuildError(f"InstrDesc: scale_type and scale factor ids are for the "
                                 f"block-scaled kinds, not .{kind.value}")
            return
        scale = "ue8m0" if self.scale_type is None else _type_name("scale_type",
                                                                    self.scale_type)
        if scale not in _SCALE_TYPES[kind]:
            raise OperandError("InstrDesc", "scale_type", f"a scale type of .{kind.value}: "
                               + " or ".join(map(repr, _SCALE_TYPES[kind])), repr(scale))
        self._set("scale_type", scale)
        allowed = (0, 1, 2, 3) if kind is MmaKind.mxf8f6f4 else (0, 2)
        for what, v in zip(("scale_a_id", "scale_b_id"), ids, strict=True):
            if v not in allowed:
                raise OperandError("InstrDesc", what, f"one of {allowed} for .{kind.value}", v)

    def _check_k(self, kind: MmaKind) -> None:
        if self.k is None:
            return
        k = _int("k", self.k)
        base = _KINDS[kind].k_dense * (2 if self.sparse else 1)
        k96 = (kind in (MmaKind.mxf4, MmaKind.mxf4nvf4) and not self.sparse
               and self.cta_group == 2 and self.m == 256)
        if k != base and not (k == 96 and k96):
            raise OperandError("InstrDesc", "k", f"{base} (the K of this form; 96 only for a "
                               "dense mxf4/mxf4nvf4 256xN with cta_group::2, sm_103a)", k)
        # Only K = 96 is a choice the descriptor records (bit 31); the others follow from the
        # kind and sparsity, so they compare equal to leaving k out.
        self._set("k", 96 if k == 96 else None)

    @property
    def mma_k(self) -> int:
        """The K of one instruction of this form (Table "Various combinations of .kind and
        shapes": the kind's K, twice that when sparse, or 96)."""
        return self.k or _KINDS[self.kind].k_dense * (2 if self.sparse else 1)

    @property
    def value(self) -> int:
        """The 32-bit descriptor (bit positions per the ISA's tables for this kind)."""
        kind, info = self.kind, _KINDS[self.kind]
        v = (int(self.sparse) << 2 | int(self.negate_a) << 13 | int(self.negate_b) << 14
             | int(self.transpose_a) << 15 | int(self.transpose_b) << 16
             | (self.n >> 3) << 17 | info.ab[self.atype] << 7 | info.ab[self.btype] << 10)
        if kind.block_scaled:
            return (v | self.scale_b_id << 4 | _SCALE_CODE[self.scale_type] << 23
                    | (self.m >> 7) << 27 | self.scale_a_id << 29 | int(self.k == 96) << 31)
        return (v | self.sparsity_selector | int(self.saturate) << 3 | info.d[self.dtype] << 4
                | (self.m >> 4) << 24 | _MAX_SHIFT[self.max_shift] << 30)

    @classmethod
    def decode(cls, value: Any, kind: Any, *, cta_group: Any = 1, ws: bool = False
               ) -> InstrDesc:
        """The descriptor `value` holds for `kind` (the bits do not say which kind, nor the
        cta_group or .ws, which decide the legal shapes); a reserved bit set or a field
        value the kind has no meaning for is refused."""
        kind = MmaKind.coerce(kind)
        v = int_like(value)
        if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v < 1 << 32:
            raise OperandError("InstrDesc.decode", "value", "a 32-bit descriptor (an int)",
                               _given(value))
        info = _KINDS[kind]
        if kind.block_scaled:
            reserved = 0b11 | 1 << 3 | 1 << 6 | 0b111 << 24
            if kind is not MmaKind.mxf4 and kind is not MmaKind.mxf4nvf4:
                reserved |= 1 << 31
        else:
            reserved = 1 << 6 | 1 << 23 | 1 << 29
        if kind in (MmaKind.mxf4, MmaKind.mxf4nvf4):
            reserved |= 1 << 12          # btype is 2 bits there
        if v & reserved:
            raise BuildError(f"InstrDesc.decode: {v:#010x} sets bits {v & reserved:#x}, "
                             f"reserved in .{kind.value}'s descriptor")
        names = {c: t for t, c in info.ab.items()}
        dnames = {c: t for t, c in info.d.items()}

        def field(what: str, table: dict[int, str], code: int) -> str:
            if code not in table:
                raise BuildError(f"InstrDesc.decode: {what} code {code} has no meaning in "
                                 f".{kind.value}")
            return table[code]
        common = dict(atype=field("atype", names, v >> 7 & 7),
                      btype=field("btype", names, v >> 10 & 7), cta_group=cta_group, ws=ws,
                      sparse=bool(v >> 2 & 1), negate_a=bool(v >> 13 & 1),
                      negate_b=bool(v >> 14 & 1), transpose_a=bool(v >> 15 & 1),
                      transpose_b=bool(v >> 16 & 1))
        n = (v >> 17 & 0x3F) << 3
        if kind.block_scaled:
            return cls(kind, (v >> 27 & 3) << 7, n, scale_b_id=v >> 4 & 3,
                       scale_type="ue8m0" if v >> 23 & 1 else "ue4m3",
                       scale_a_id=v >> 29 & 3, k=96 if v >> 31 else None, **common)
        return cls(kind, (v >> 24 & 0x1F) << 4, n, dtype=field("dtype", dnames, v >> 4 & 3),
                   sparsity_selector=v & 3, saturate=bool(v >> 3 & 1),
                   max_shift={c: s for s, c in _MAX_SHIFT.items()}[v >> 30 & 3], **common)


class Swizzle100(enum.Enum):
    """The sm_100 descriptor's 3-bit swizzle mode (Table "Shared memory descriptor layout",
    bits 61-63); 3, 5 and 7 are invalid."""

    none = 0
    b128_base32b = 1     # 128-byte swizzle with 32-byte atomicity
    b128 = 2
    b64 = 4
    b32 = 6

    @property
    def pattern_bytes(self) -> int:
        """Where the swizzle's repeating pattern starts (Table "Starting address of repeating
        pattern"): a tile there has base offset 0."""
        return {0: 16, 1: 1024, 2: 1024, 4: 512, 6: 256}[self.value]

    @classmethod
    def coerce(cls, value: Any) -> Swizzle100:
        """A mode from a member, '128B_base32B' (any case), or whatever wgmma's
        `SwizzleMode.coerce` takes ('128B', 'none', 64, SwizzleMode.b32)."""
        if isinstance(value, cls):
            return value
        if isinstance(value, str) and value.strip().lower() in ("128b_base32b",
                                                                "b128_base32b"):
            return cls.b128_base32b
        try:
            mode = SwizzleMode.coerce(value)
        except BuildError:
            raise OperandError("SmemDesc100", "swizzle", "none, 32B, 64B, 128B or "
                               "128B_base32B (or a Swizzle100 / wgmma SwizzleMode)",
                               _given(value)) from None
        return {0: cls.none, 32: cls.b32, 64: cls.b64, 128: cls.b128}[mode.value]


def _swizzle(v: Any) -> Swizzle100:   # a named converter, as _kind
    return Swizzle100.coerce(v)


_VERSION = 0b001 << 46
_FIELDS100 = 0x3FFF | 0x3FFF << 16 | 0x3FFF << 32 | 0b111 << 46 | 0b111 << 49 | 1 << 52 \
    | 0b111 << 61


def _offset(what: str, value: Any) -> int:
    v = int_like(value)
    if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v < SMEM_LIMIT or v % 16:
        raise OperandError("SmemDesc100", what, f"a multiple of 16 in [0, {SMEM_LIMIT}) "
                           "(encoded >> 4 in 14 bits)", _given(value))
    return v


@attrs.frozen
class SmemDesc100:
    """The sm_100 shared-memory matrix descriptor of tcgen05.mma / tcgen05.cp: byte values
    (each a multiple of 16 below 256 KiB), the base offset (0..7), `lbo_absolute` (bit 52:
    the leading field holds an address, not an offset) and the swizzle. `.value` is the
    64-bit descriptor."""

    start: int
    lbo: int
    sbo: int
    swizzle: Swizzle100 = attrs.field(default=Swizzle100.none, converter=_swizzle)
    base_offset: int = 0
    lbo_absolute: bool = False

    def __attrs_post_init__(self):
        for what in ("start", "lbo", "sbo"):
            object.__setattr__(self, what, _offset(what, getattr(self, what)))
        b = int_like(self.base_offset)
        if isinstance(b, bool) or not isinstance(b, int) or not 0 <= b <= 7:
            raise OperandError("SmemDesc100", "base_offset", "0..7 ((pattern start >> 7) & 7 "
                               "for a tile that starts inside its swizzle pattern)",
                               _given(self.base_offset))
        object.__setattr__(self, "base_offset", b)
        if type(self.lbo_absolute) is not bool:
            raise OperandError("SmemDesc100", "lbo_absolute", "True or False",
                               _given(self.lbo_absolute))

    @property
    def value(self) -> int:
        """The 64-bit descriptor."""
        return (self.start >> 4 | (self.lbo >> 4) << 16 | (self.sbo >> 4) << 32 | _VERSION
                | self.base_offset << 49 | int(self.lbo_absolute) << 52
                | self.swizzle.value << 61)

    @classmethod
    def decode(cls, value: Any) -> SmemDesc100:
        """`.value`'s inverse; a reserved bit, a version other than 0b001 or an invalid
        swizzle code is refused."""
        v = int_like(value)
        if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v < 1 << 64:
            raise OperandError("SmemDesc100.decode", "value", "a 64-bit descriptor (an int)",
                               _given(value))
        if v & ~_FIELDS100 or v >> 46 & 7 != 1:
            raise BuildError(f"SmemDesc100.decode: {v:#x} is not an sm_100 descriptor (bits "
                             "46-48 must be 0b001, bits 14-15, 30-31 and 53-60 zero)")
        code = v >> 61
        if code not in (m.value for m in Swizzle100):
            raise BuildError(f"SmemDesc100.decode: swizzle code {code} is invalid (0, 1, 2, 4 "
                             "or 6)")
        return cls((v & 0x3FFF) << 4, (v >> 16 & 0x3FFF) << 4, (v >> 32 & 0x3FFF) << 4,
                   Swizzle100(code), v >> 49 & 7, bool(v >> 52 & 1))

    @classmethod
    def from_layout(cls, layout: SmemLayout, address: Any = 0, *, k_step: Any = 0,
                    base_offset: Any = 0) -> SmemDesc100:
        """The descriptor of a wgmma_desc `SmemLayout` tile at shared `address`, advanced to
        K index `k_step`: the tile's offsets and alignment checks are wgmma's
        (`SmemLayout.encode`), the bits sm_100's."""
        if not isinstance(layout, SmemLayout):
            raise OperandError("SmemDesc100.from_layout", "layout", "an SmemLayout",
                               _given(layout))
        start = layout.encode(address, base_offset, k_step=k_step) & 0x3FFF
        return cls(start << 4, layout.lbo, layout.sbo, layout.swizzle, base_offset)


def smem_descriptor(k, layout: SmemLayout, addr: Any) -> Reg:
    """The sm_100 descriptor of `layout` at `addr` in a 64-bit register: an int address folds
    to a `mov`; a shared symbol, `Addr(symbol, offset)` or a 32/64-bit register holding a
    shared address is checked as wgmma_desc's `descriptor` checks it, then shifted and
    combined with the constant fields (2 instructions after the address). The descriptor of
    K index `kk` of the tile is one add away, as wgmma's: `k.add(desc, layout.k_offset(kk) >>
    4)` (the start address is the low 14 bits)."""
    if not isinstance(layout, SmemLayout):
        raise OperandError("smem_descriptor", "layout", "an SmemLayout", _given(layout))
    known = as_int(addr)
    if known is not None:
        # .u64, as the register paths give (and add takes, to step along K)
        return k.mov(SmemDesc100.from_layout(layout, known).value, type=ScalarType.u64)
    constant = SmemDesc100(0, layout.lbo, layout.sbo, layout.swizzle).value
    return address_descriptor(k, layout, addr, constant, "smem_descriptor")


for _cls, _name in ((InstrDesc, "InstrDesc"), (SmemDesc100, "SmemDesc100"),
                    (MmaKind, "MmaKind"), (Swizzle100, "Swizzle100")):
    fail_closed_methods(_cls, _name)
refuse_assignment(InstrDesc, "its fields were checked together: make another InstrDesc")
refuse_assignment(SmemDesc100, "make another SmemDesc100")
smem_descriptor = fail_closed("smem_descriptor", smem_descriptor)
