"""The special-function unit and the IEEE reciprocal and square root (PTX ISA §9.7.3: ex2,
lg2, rcp, sqrt, rsqrt, sin, cos, tanh; §9.7.4: their half-precision forms).

::

    ex2.approx{.ftz}.f32       d, a;    // lg2, sin, cos, rsqrt: the same
    ex2.approx.{f16,f16x2}     d, a;    // PTX 7.0, sm_75
    ex2.approx.ftz.{bf16,bf16x2} d, a;  // PTX 7.8, sm_90; .ftz required
    tanh.approx.{f32,f16,f16x2} d, a;   // PTX 7.0, sm_75; no .ftz
    tanh.approx.{bf16,bf16x2}  d, a;    // PTX 7.8, sm_90
    rcp.approx{.ftz}.f32       d, a;    rcp.rnd{.ftz}.f32 d, a;
    rcp.rnd.f64                d, a;    rcp.approx.ftz.f64 d, a;   // .ftz required
    sqrt.approx{.ftz}.f32      d, a;    sqrt.rnd{.ftz}.f32 d, a;    sqrt.rnd.f64 d, a;
    rsqrt.approx{.ftz}.f64     d, a;

.rnd is .rn, .rz, .rm or .rp (IEEE 754 rounding). Every other form needs .approx (ptxas:
".approx modifier required"). The requirements and the .ftz rules are ptxas 13's, which
agrees with the ISA except that it also takes `rcp.rnd.ftz.f64`, a form the ISA does not
define (.f64 keeps subnormals): ptxdsl refuses it. The .f16/.bf16 operands are registers
(PTX has no immediates of those types); a packed pair is one 32-bit register.
"""

from __future__ import annotations

import enum
from typing import Any

import attrs

from ..errors import OperandError
from ..operands import Reg
from ..types import BASE, Requires, ScalarType, req
from .base import Instruction, check_dst, check_enum, check_src, refuse

__all__ = ["SfuOp", "SfuMode", "Sfu", "FORMS"]

T = ScalarType


class SfuOp(enum.Enum):
    """The operation: 2^a, log2(a), 1/a, sqrt(a), 1/sqrt(a), sin(a), cos(a), tanh(a)."""

    ex2 = "ex2"
    lg2 = "lg2"
    rcp = "rcp"
    sqrt = "sqrt"
    rsqrt = "rsqrt"
    sin = "sin"
    cos = "cos"
    tanh = "tanh"


class SfuMode(enum.Enum):
    """How the result is rounded: the unit's approximation or an IEEE 754 rounding."""

    approx = "approx"
    rn = "rn"
    rz = "rz"
    rm = "rm"
    rp = "rp"


# Whether a form takes .ftz.
OPTIONAL, REQUIRED, NO = "optional", "required", "no"

R_HALF = req("7.0", 75)       # ex2 .f16/.f16x2, tanh
R_BF16 = req("7.8", 90)       # ex2 and tanh .bf16/.bf16x2

_IEEE = (SfuMode.rn, SfuMode.rz, SfuMode.rm, SfuMode.rp)


@attrs.frozen
class _Form:
    modes: dict[SfuMode, str]     # the modes of this (op, type), each with its .ftz rule
    requires: Requires = BASE


_APPROX_F32 = _Form({SfuMode.approx: OPTIONAL})
_IEEE_F32 = _Form({SfuMode.approx: OPTIONAL, **dict.fromkeys(_IEEE, OPTIONAL)})

# (op, type) -> form: every pair the ISA defines.
_FORMS: dict[tuple[SfuOp, ScalarType], _Form] = {
    **{(op, T.f32): _APPROX_F32 for op in (SfuOp.ex2, SfuOp.lg2, SfuOp.sin, SfuOp.cos,
                                          SfuOp.rsqrt)},
    (SfuOp.rcp, T.f32): _IEEE_F32,
    (SfuOp.sqrt, T.f32): _IEEE_F32,
    (SfuOp.rcp, T.f64): _Form({**dict.fromkeys(_IEEE, NO), SfuMode.approx: REQUIRED}),
    (SfuOp.sqrt, T.f64): _Form(dict.fromkeys(_IEEE, NO)),
    (SfuOp.rsqrt, T.f64): _Form({SfuMode.approx: OPTIONAL}),
    **{(SfuOp.ex2, t): _Form({SfuMode.approx: NO}, R_HALF) for t in (T.f16, T.f16x2)},
    **{(SfuOp.ex2, t): _Form({SfuMode.approx: REQUIRED}, R_BF16) for t in (T.bf16, T.bf16x2)},
    **{(SfuOp.tanh, t): _Form({SfuMode.approx: NO}, R_HALF) for t in (T.f32, T.f16, T.f16x2)},
    **{(SfuOp.tanh, t): _Form({SfuMode.approx: NO}, R_BF16) for t in (T.bf16, T.bf16x2)},
}


_TYPES = {op: tuple(t for o, t in _FORMS if o is op) for op in SfuOp}


def _modes_text(form: _Form) -> str:
    return " or ".join(f"'{m.value}'" for m in form.modes)


def _form(op: Any, t: Any) -> tuple[SfuOp, ScalarType, _Form]:
    """The op and type checked, and their form: an OperandError naming the types `op` has."""
    op = check_enum("sfu", "op", op, SfuOp)
    types = _TYPES[op]
    if type(t) is not ScalarType or t not in types:
        given = f".{t.value}" if type(t) is ScalarType else repr(t)
        hint = " (a bit type does not say which float it holds: pass type=)" \
            if type(t) is ScalarType and t.kind == "b" else ""
        raise OperandError(op.value, "type", "one of " + ", ".join(f".{x.value}" for x in types),
                           given + hint)
    return op, t, _FORMS[op, t]


def default_mode(op: Any, t: Any) -> SfuMode:
    """The mode a builder uses when none is given: .rn where the form has IEEE rounding
    (rcp and sqrt, as `k.div` rounds .rn by default), else the only one, .approx."""
    _, _, form = _form(op, t)
    return SfuMode.rn if SfuMode.rn in form.modes else SfuMode.approx


def default_ftz(op: Any, t: Any, mode: SfuMode) -> bool:
    """.ftz where the form requires it (ex2 .bf16, rcp.approx.f64), else no."""
    return _form(op, t)[2].modes.get(mode) == REQUIRED


@attrs.frozen
class Sfu(Instruction):
    """`op.mode{.ftz}.type d, a;` — see the module doc for the forms of each op."""

    MNEMONIC = "sfu"
    op: SfuOp
    type: ScalarType
    d: Reg
    a: Any
    mode: SfuMode | None = None
    ftz: bool = False

    def __attrs_post_init__(self):
        op, t, form = _form(self.op, self.type)
        self._set("op", op)
        name = f"{op.value}.{t.value}"
        if self.mode is None:
            refuse(name, f"needs a rounding mode: mode={_modes_text(form)} (PTX has no "
                   f"{op.value} without one)")
        mode = check_enum(name, "mode", self.mode, SfuMode)
        if mode not in form.modes:
            why = "has no IEEE-rounded form" if SfuMode.approx in form.modes else \
                "has no .approx form"
            refuse(name, f"the mode must be {_modes_text(form)} ({op.value}.{t.value} {why}), "
                   f"got '{mode.value}'")
        self._set("mode", mode)
        if type(self.ftz) is not bool:
            refuse(name, f"ftz must be True or False, got {self.ftz!r}"[:200])
        rule = form.modes[mode]
        if rule == NO and self.ftz:
            refuse(name, f"no .ftz: the ISA defines no {op.value}.{mode.value}.ftz.{t.value} "
                   "form; pass ftz=False")
        if rule == REQUIRED and not self.ftz:
            refuse(self, f"the form must flush subnormals: pass ftz=True (PTX has only "
                   f"{op.value}.{mode.value}.ftz.{t.value})")
        check_dst(self, "d", self.d, t)
        self._set("a", check_src(self, "a", self.a, t))

    @property
    def requires(self) -> Requires:
        return _FORMS[self.op, self.type].requires

    def opcode(self) -> str:
        assert self.mode is not None, "validated in __attrs_post_init__"
        return f"{self.op.value}.{self.mode.value}{'.ftz' * self.ftz}.{self.type.value}"

    def operands(self):
        return (self.d, self.a)


FORMS: list[tuple[str, Requires, str]] = [
    ("{ex2,lg2,sin,cos,rsqrt}.approx{.ftz}.f32 d, a", BASE, ""),
    ("{rcp,sqrt}.approx{.ftz}.f32 d, a", BASE, ""),
    ("{rcp,sqrt}.{rn,rz,rm,rp}{.ftz}.f32 d, a", BASE, "IEEE 754 rounding"),
    ("{rcp,sqrt}.{rn,rz,rm,rp}.f64 d, a", BASE, "no .ftz"),
    ("rcp.approx.ftz.f64 d, a", BASE, ".ftz required"),
    ("rsqrt.approx{.ftz}.f64 d, a", BASE, ""),
    ("ex2.approx.{f16,f16x2} d, a", R_HALF, "no .ftz; registers .b16/.b32"),
    ("ex2.approx.ftz.{bf16,bf16x2} d, a", R_BF16, ".ftz required; registers .b16/.b32"),
    ("tanh.approx.{f32,f16,f16x2} d, a", R_HALF, "no .ftz"),
    ("tanh.approx.{bf16,bf16x2} d, a", R_BF16, "no .ftz"),
]
