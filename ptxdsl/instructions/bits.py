"""Bit manipulation in cuda::ptx's forms: prmt (every mode), bfind{.shiftamt}, bmsk.{clamp,wrap},
shl, shr (PTX ISA §9.7.8.7, §9.7.1.16, §9.7.1.20, §9.7.8.8-9; cuda::ptx prmt.h, bfind.h, bmsk.h,
shl.h, shr.h). Each builder takes the kernel first and returns the result register::

    uint32_t r = ptx::prmt_b4e(a, b, sel);    r = ptx.prmt_b4e(k, a, b, sel)
    uint32_t n = ptx::bfind_shiftamt(x);      n = ptx.bfind_shiftamt(k, x)

`shl`/`shr` are the kernel's `Binary` instruction (`k.shl`, `k.shr`) in cuda::ptx's typing:
`shl.bN`; `shr.sN` for a signed value (arithmetic shift), `shr.bN` otherwise (any type of
that size, as cuda::ptx's B16/B32/B64 templates).
"""

from __future__ import annotations

import enum

import attrs

from ..errors import OperandError
from ..operands import Reg
from ..types import Requires, ScalarType, req
from .arith import Binary
from .base import Instruction, _given, check_dst, check_enum, check_src, infer_type

__all__ = ["prmt", "prmt_f4e", "prmt_b4e", "prmt_rc8", "prmt_ecl", "prmt_ecr", "prmt_rc16",
           "bfind", "bfind_shiftamt", "bmsk_clamp", "bmsk_wrap", "shl", "shr"]

T = ScalarType
BMSK = req("7.6", 75)        # bmsk: PTX 7.6, sm_70 (below ptxdsl's sm_75 floor)


class PrmtMode(enum.Enum):
    default = ""
    f4e = "f4e"
    b4e = "b4e"
    rc8 = "rc8"
    ecl = "ecl"
    ecr = "ecr"
    rc16 = "rc16"


@attrs.frozen
class Prmt(Instruction):
    """`prmt.b32{.mode} d, a, b, c;` with .mode = .f4e .b4e .rc8 .ecl .ecr .rc16 (none: the
    general byte permute, `c` the selector)."""

    MNEMONIC = "prmt"
    mode: PrmtMode
    d: Reg
    a: object
    b: object
    c: object

    def __attrs_post_init__(self):
        self._set("mode", check_enum(self.MNEMONIC, "mode", self.mode, PrmtMode))
        check_dst(self, "d", self.d, T.b32)
        for name in ("a", "b", "c"):
            self._set(name, check_src(self, name, getattr(self, name), T.b32))

    def opcode(self) -> str:
        return "prmt.b32" + (f".{self.mode.value}" if self.mode.value else "")

    def operands(self):
        return (self.d, self.a, self.b, self.c)


_BFIND_TYPES = (T.u32, T.u64, T.s32, T.s64)


@attrs.frozen
class Bfind(Instruction):
    """`bfind{.shiftamt}.type d, a;` with .type = .u32 .u64 .s32 .s64; `d` is .u32 (the bit
    position of the most significant non-sign bit, 0xffffffff when none)."""

    MNEMONIC = "bfind"
    type: ScalarType
    d: Reg
    a: object
    shiftamt: bool = False

    def __attrs_post_init__(self):
        self._set("type", check_enum(self.MNEMONIC, "type", self.type, T, _BFIND_TYPES))
        if not isinstance(self.shiftamt, bool):
            raise OperandError(self.MNEMONIC, "shiftamt", "True or False", _given(self.shiftamt))
        check_dst(self, "d", self.d, T.u32)
        self._set("a", check_src(self, "a", self.a, self.type))

    def opcode(self) -> str:
        return "bfind" + (".shiftamt" if self.shiftamt else "") + f".{self.type.value}"

    def operands(self):
        return (self.d, self.a)


class BmskMode(enum.Enum):
    clamp = "clamp"
    wrap = "wrap"


@attrs.frozen
class Bmsk(Instruction):
    """`bmsk.mode.b32 d, a, b;` with .mode = .clamp .wrap: a mask of `b` bits from bit `a`."""

    MNEMONIC = "bmsk"
    REQUIRES = BMSK
    mode: BmskMode
    d: Reg
    a: object
    b: object

    def __attrs_post_init__(self):
        self._set("mode", check_enum(self.MNEMONIC, "mode", self.mode, BmskMode))
        check_dst(self, "d", self.d, T.b32)
        # Integer sources (ptxas: "Arguments mismatch" for an .f32 register, although .b32).
        self._set("a", check_src(self, "a", self.a, T.u32))
        self._set("b", check_src(self, "b", self.b, T.u32))

    def opcode(self) -> str:
        return f"bmsk.{self.mode.value}.b32"

    def operands(self):
        return (self.d, self.a, self.b)


# -- builder functions (cuda::ptx names, kernel first) -----------------------------------------
def _prmt(mode: PrmtMode):
    def build(k, a_reg, b_reg, c_reg) -> Reg:
        d = k.reg(T.b32)
        k.emit(Prmt(mode, d, a_reg, b_reg, c_reg))
        return d

    suffix = f"_{mode.value}" if mode.value else ""
    build.__name__ = build.__qualname__ = "prmt" + suffix
    build.__doc__ = (f"`prmt.b32{'.' + mode.value if mode.value else ''} d, a, b, c;` returns d "
                     f"(cuda::ptx::prmt{suffix}).")
    return build


prmt, prmt_f4e, prmt_b4e, prmt_rc8, prmt_ecl, prmt_ecr, prmt_rc16 = map(_prmt, PrmtMode)


def _bfind_type(a) -> ScalarType:
    t = infer_type("bfind", a)
    if t.kind == "b":       # a bit-typed register: cuda::ptx's unsigned overload
        t = {32: T.u32, 64: T.u64}.get(t.bits, t)
    return t


def bfind(k, a_reg) -> Reg:
    """`bfind.{u32,u64,s32,s64} d, a;` returns the .u32 d (cuda::ptx::bfind)."""
    d = k.reg(T.u32)
    k.emit(Bfind(_bfind_type(a_reg), d, a_reg))
    return d


def bfind_shiftamt(k, a_reg) -> Reg:
    """`bfind.shiftamt.{u32,u64,s32,s64} d, a;` returns d (cuda::ptx::bfind_shiftamt)."""
    d = k.reg(T.u32)
    k.emit(Bfind(_bfind_type(a_reg), d, a_reg, True))
    return d


def bmsk_clamp(k, a_reg, b_reg) -> Reg:
    """`bmsk.clamp.b32 d, a, b;` returns d (cuda::ptx::bmsk_clamp)."""
    d = k.reg(T.b32)
    k.emit(Bmsk(BmskMode.clamp, d, a_reg, b_reg))
    return d


def bmsk_wrap(k, a_reg, b_reg) -> Reg:
    """`bmsk.wrap.b32 d, a, b;` returns d (cuda::ptx::bmsk_wrap)."""
    d = k.reg(T.b32)
    k.emit(Bmsk(BmskMode.wrap, d, a_reg, b_reg))
    return d


def _shift(k, op: str, a_reg, b_reg) -> Reg:
    """cuda::ptx's shl/shr take any 2-, 4- or 8-byte value (B16/B32/B64, a float too) and
    shift its bits; shr of int16/32/64 is the arithmetic .sN form."""
    t = infer_type(op, a_reg)
    if t.bits not in (16, 32, 64) or t is T.pred:
        raise OperandError(op, "a_reg", "a 16-, 32- or 64-bit value", _given(a_reg))
    it = t if op == "shr" and t.kind == "s" else {16: T.b16, 32: T.b32, 64: T.b64}[t.bits]
    d = k.reg(t)
    k.emit(Binary(op, it, d, a_reg, b_reg))
    return d


def shl(k, a_reg, b_reg) -> Reg:
    """`shl.{b16,b32,b64} d, a, b;` returns d, of a's type (cuda::ptx::shl); `b` is .u32."""
    return _shift(k, "shl", a_reg, b_reg)


def shr(k, a_reg, b_reg) -> Reg:
    """`shr.{s16,s32,s64} d, a, b;` for a signed `a` (arithmetic), `shr.{b16,b32,b64}`
    otherwise (logical); returns d (cuda::ptx::shr)."""
    return _shift(k, "shr", a_reg, b_reg)


# -- forms: (form, requires, note) — rendered by ptxdsl.forms ----------------------------------
FORMS: list[tuple[str, Requires, str]] = [
    ("prmt.b32{,.f4e,.b4e,.rc8,.ecl,.ecr,.rc16}", req("6.3"), "PTX 2.0 / sm_50 in cuda::ptx"),
    ("bfind{,.shiftamt}.{u32,u64,s32,s64}", req("6.3"), "PTX 2.0 / sm_50 in cuda::ptx"),
    ("bmsk.{clamp,wrap}.b32", BMSK, "sm_70 in cuda::ptx; ptxdsl's floor"),
    ("shl.{b16,b32,b64}", req("6.3"), "k.shl / ptx.shl"),
    ("shr.{b16,b32,b64,s16,s32,s64}", req("6.3"), "k.shr / ptx.shr (also .u16/.u32/.u64)"),
]
