"""Packed conversions: two values converted and packed into one register, or unpacked
(PTX ISA §9.7.9.21, the packed forms of cvt).

::

    cvt.frnd2{.relu}{.satfinite}.{f16x2,bf16x2}.f32  d, a, b;  // d: .b32; a -> upper half
    cvt.rn.satfinite{.relu}.{e4m3x2,e5m2x2}.f32      d, a, b;  // d: .b16; a -> upper byte
    cvt.rn.satfinite{.relu}.{e4m3x2,e5m2x2}.f16x2    d, a;     // a: .b32 (.f16x2)
    cvt.rn{.relu}.f16x2.{e4m3x2,e5m2x2}              d, a;     // a: .b16, d: .b32

frnd2 is .rn or .rz. Two fp8 values live in a .b16 register (ptxdsl has no fp8 register
type: PTX declares none). Requirements, from ptxas 13: f16x2/bf16x2 from f32 PTX 7.0, sm_80
(.satfinite PTX 8.1); every fp8 form PTX 7.8, sm_90 (sm_89 takes them from PTX 8.1; ptxdsl's
requirement model keeps one minimum per form, so it names sm_90); fp8 destinations must say
.satfinite and round only .rn (ptxas: "'.satfinite' modifier required", "Illegal rounding
modifier").
"""

from __future__ import annotations

import enum
from typing import Any

import attrs

from ..errors import OperandError
from ..operands import Reg, declared_type
from ..types import Requires, ScalarType, req
from .base import Instruction, check_dst, check_enum, check_src, refuse

__all__ = ["Packed", "CvtPacked", "cvt_packed", "FORMS"]

B16, B32, F32 = ScalarType.b16, ScalarType.b32, ScalarType.f32


class Packed(enum.Enum):
    """The type qualifiers of the packed conversions."""

    f32 = "f32"
    f16x2 = "f16x2"
    bf16x2 = "bf16x2"
    e4m3x2 = "e4m3x2"
    e5m2x2 = "e5m2x2"

    @property
    def is_fp8(self) -> bool:
        """Whether this is one of the two 8-bit float pairs (`.e4m3x2`, `.e5m2x2`): their own
        version/target, and `.satfinite` by default."""
        return self in (Packed.e4m3x2, Packed.e5m2x2)


def _spelled(value: Any) -> Any:
    """t.f32 / t.f16x2 / t.bf16x2 name the same qualifiers as their spellings."""
    return value.value if isinstance(value, ScalarType) else value


R_HALF = req("7.0", 80)
R_HALF_SATFINITE = req("8.1", 80)
R_FP8 = req("7.8", 90)
_FP8 = (Packed.e4m3x2, Packed.e5m2x2)


@attrs.frozen
class _Form:
    sources: int                    # 2: d, a, b (a and b are .f32); 1: d, a
    a_type: ScalarType              # the register type of a (and b)
    d_type: ScalarType
    roundings: tuple[str, ...]
    satfinite: str                  # "optional", "required" or "no"


# (dtype, atype) -> form: every pair the ISA defines for sm_90.
_FORMS: dict[tuple[Packed, Packed], _Form] = {
    **{(d, Packed.f32): _Form(2, F32, B32, ("rn", "rz"), "optional")
       for d in (Packed.f16x2, Packed.bf16x2)},
    **{(d, Packed.f32): _Form(2, F32, B16, ("rn",), "required") for d in _FP8},
    **{(d, Packed.f16x2): _Form(1, B32, B16, ("rn",), "required") for d in _FP8},
    **{(Packed.f16x2, a): _Form(1, B16, B32, ("rn",), "no") for a in _FP8},
}


def _exact(insn: str, operand: str, reg: Any, allowed: tuple[str, ...]) -> Any:
    if isinstance(reg, Reg) and declared_type(reg) not in allowed:
        raise OperandError(insn, operand, "a register declared " + " or ".join(
            f".{t}" for t in allowed) + " (ptxas checks the declaration here)",
            f"%{reg.name}, declared .{declared_type(reg)}")
    return reg


@attrs.frozen
class CvtPacked(Instruction):
    """`cvt.rnd{.relu}{.satfinite}.dtype.atype d, a{, b};` — see the module doc for the forms.
    With two sources, a lands in the upper half (byte) of d and b in the lower."""

    MNEMONIC = "cvt"
    dtype: Packed
    atype: Packed
    d: Reg
    a: Any
    b: Any = None
    rnd: str = "rn"
    relu: bool = False
    satfinite: bool = False

    def __attrs_post_init__(self):
        self._set("dtype", check_enum("cvt", "dtype", _spelled(self.dtype), Packed))
        self._set("atype", check_enum("cvt", "atype", _spelled(self.atype), Packed))
        form = _FORMS.get((self.dtype, self.atype))
        if form is None:
            refuse(f"cvt.{self.dtype.value}.{self.atype.value}", "not a packed conversion; "
                   "the pairs are " + ", ".join(f".{d.value}.{a.value}" for d, a in _FORMS))
        if self.rnd not in form.roundings:
            refuse(self, "the rounding must be " + " or ".join(
                f".{r}" for r in form.roundings) + f", got {self.rnd!r}")
        if form.satfinite == "required" and not self.satfinite:
            refuse(self, f"a conversion to .{self.dtype.value} must saturate: pass "
                   "satfinite=True (ptxas: '.satfinite' modifier required)")
        if form.satfinite == "no" and self.satfinite:
            refuse(self, "no .satfinite when widening fp8 to .f16x2 (every value fits)")
        n = self.opcode()
        _exact(n, "d", check_dst(n, "d", self.d, form.d_type), self._allowed(form.d_type))
        self._set("a", _exact(n, "a", check_src(n, "a", self.a, form.a_type, imm=False),
                              self._allowed(form.a_type)))
        if form.sources == 2:
            if self.b is None:
                refuse(n, "two .f32 sources: b goes to the lower half of d")
            self._set("b", _exact(n, "b", check_src(n, "b", self.b, form.a_type, imm=False),
                                  self._allowed(form.a_type)))
        elif self.b is not None:
            refuse(n, f"one source: a holds both .{self.atype.value} values")

    def _allowed(self, t: ScalarType) -> tuple[str, ...]:
        """The declarations ptxas 13 takes for an operand of the form's register type `t`:
        stricter than the PTX ISA's same-size rule (no .u32/.s32/.f32 register for a packed
        value, no .b32 one for the .f32 sources of cvt.f16x2.f32). Automatic registers of
        integer and packed types are declared .bN, so they pass; named ones keep their type."""
        if t is F32:
            return ("f32",) if self.dtype is Packed.f16x2 else ("f32", "b32")
        if t is B16:
            return ("b16",)
        return ("b32", "f16x2") if Packed.f16x2 in (self.dtype, self.atype) else ("b32",)

    @property
    def requires(self) -> Requires:
        if self.dtype.is_fp8 or self.atype.is_fp8:
            return R_FP8
        return R_HALF_SATFINITE if self.satfinite else R_HALF

    def opcode(self) -> str:
        q = f"cvt.{self.rnd}"
        if self.dtype.is_fp8:     # the ISA's order: .satfinite before .relu here only
            q += ".satfinite" * self.satfinite + ".relu" * self.relu
        else:
            q += ".relu" * self.relu + ".satfinite" * self.satfinite
        return f"{q}.{self.dtype.value}.{self.atype.value}"

    def operands(self):
        return (self.d, self.a) if self.b is None else (self.d, self.a, self.b)


def cvt_packed(k, dtype, a, b=None, *, atype=None, rnd: str = "rn", relu: bool = False,
               satfinite: bool | None = None, dst: Reg | None = None) -> Reg:
    """Pack: `cvt_packed(k, "bf16x2", hi, lo)` (two .f32), `cvt_packed(k, "e4m3x2", h2,
    atype="f16x2")`; unpack: `cvt_packed(k, "f16x2", q, atype="e4m3x2")`. The source type
    defaults to .f32 with two sources; fp8 destinations saturate by default (PTX requires it).
    Returns d (a fresh .b32 or .b16 register unless `dst` is given)."""
    d_t = check_enum("cvt_packed", "dtype", _spelled(dtype), Packed)
    a_t = check_enum("cvt_packed", "atype", _spelled(atype if atype is not None else "f32"),
                     Packed)
    if satfinite is None:
        satfinite = d_t.is_fp8
    form = _FORMS.get((d_t, a_t))
    if dst is None:
        dst = k.reg(form.d_type if form is not None else B32)
    k.emit(CvtPacked(d_t, a_t, dst, a, b, rnd, relu, satfinite))
    return dst


FORMS: list[tuple[str, Requires, str]] = [
    ("cvt.{rn,rz}{.relu}.{f16x2,bf16x2}.f32 d, a, b", R_HALF, "d .b32"),
    ("cvt.{rn,rz}{.relu}.satfinite.{f16x2,bf16x2}.f32 d, a, b", R_HALF_SATFINITE, "d .b32"),
    ("cvt.rn.satfinite{.relu}.{e4m3x2,e5m2x2}.f32 d, a, b", R_FP8,
     "d .b16; sm_89 from PTX 8.1"),
    ("cvt.rn.satfinite{.relu}.{e4m3x2,e5m2x2}.f16x2 d, a", R_FP8, "d .b16, a .b32"),
    ("cvt.rn{.relu}.f16x2.{e4m3x2,e5m2x2} d, a", R_FP8, "d .b32, a .b16"),
]
