"""Hypothesis strategy for the special-function builders: `k.ex2`, `k.lg2`, `k.rcp`, `k.sqrt`,
`k.rsqrt`, `k.sin`, `k.cos`, `k.tanh`, over every float type, mode and `.ftz` choice (the
ISA's forms and the rest mixed), with sources of the instruction's type and of others.

The mode and `.ftz` the builders take when none is given are restated here (not read from
the family's table), so the text is determined by the draw and a wrong table shows as a
disagreement with ptxas.
"""

from __future__ import annotations

from hypothesis import strategies as st

from ..types import ScalarType
from .case import R, case, txt
from .core import imm_text
from .tma import maybe, pick

OPS = ("ex2", "lg2", "rcp", "sqrt", "rsqrt", "sin", "cos", "tanh")
TYPES = ("f32", "f64", "f16", "f16x2", "bf16", "bf16x2")
MODES = ("approx", "rn", "rz", "rm", "rp")
# The register a value of the type lives in: halves and packed pairs in bit registers.
REG = {"f32": "f32", "f64": "f64", "f16": "b16", "f16x2": "b32", "bf16": "b16",
       "bf16x2": "b32"}


def _default_mode(op: str, ty: str) -> str:
    """rcp and sqrt round .rn by default where they have IEEE forms; the rest .approx."""
    return "rn" if op in ("rcp", "sqrt") and ty in ("f32", "f64") else "approx"


def _default_ftz(op: str, ty: str, mode: str) -> bool:
    """.ftz where the only form has it: ex2 on bf16 values, rcp.approx.f64."""
    return op == "ex2" and ty.startswith("bf16") or (op, ty, mode) == ("rcp", "f64", "approx")


@st.composite
def sfus(draw):
    """Cases of the sfu family, each with the PTX text it stands for, which ptxas judges."""
    op, ty = pick(draw, OPS), pick(draw, TYPES)
    mode = maybe(draw, MODES, 0.5)
    ftz = maybe(draw, (True, False), 0.5)
    rt = REG[ty]
    a = pick(draw, (R(rt),) * 5 + (R("f16"), R("u32"), R("f32"), R("b16"), 1.5, 2))
    d = maybe(draw, (R(rt, idx=1),) * 3 + (R("f32", idx=1), R("b32", idx=1)), 0.5)
    # type= is needed where the register does not say (bit registers, immediates)
    typed = not (isinstance(a, R) and a.type == ty) or draw(st.booleans())
    m = mode or _default_mode(op, ty)
    f = _default_ftz(op, ty, m) if ftz is None else ftz
    text = (f"{op}.{m}{'.ftz' * f}.{ty} {txt(d or R(rt, idx=1))}, "
            f"{imm_text(a, ty) if not isinstance(a, R) else txt(a)};")
    kw = {"type": ScalarType(ty) if typed else None, "dst": d, "mode": mode, "ftz": ftz}
    return case("sfu", f"k.{op}", (a,), kw, text, op=op, type=ty, mode=mode, ftz=ftz, a=a,
                d=d)


STRATEGIES = {"sfu": sfus()}
