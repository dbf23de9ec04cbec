"""The value of an arithmetic instruction whose sources are all immediates, for the builders
to emit as one `mov` (`k.mul(0, 128, type=t.u32)` is `mov.u32 d, 0;`).

The instruction object is built first, so every operand and qualifier rule has been checked;
`folded(insn)` then computes what the hardware computes, or refuses where that is not one
exact value: a division by zero (PTX: unspecified), a signed quotient that overflows, a
float result that needs rounding or whose zero's sign depends on the rounding mode, an
approximate division, a flush of subnormals; or an instruction that only some targets have
(its mov would lose that).
"""

from __future__ import annotations

import math
import struct
from fractions import Fraction
from typing import Any, NoReturn

from ..operands import Imm
from ..types import ScalarType as T
from .arith import _WIDE, Binary, Mad, Unary
from .base import refuse

Value = int | float

_ADVICE = ("; compute the constant in Python and move it in (k.mov(value, type=...)), or keep "
           "a source in a register")


def _fail(insn: Any, why: str) -> NoReturn:
    refuse(insn, f"every source is a constant, and {why}{_ADVICE}")


def _wrap(x: int, t: T) -> int:
    """`x` modulo 2^bits, as the type reads it (signed for .sN, unsigned otherwise)."""
    x &= (1 << t.bits) - 1
    return x - (1 << t.bits) if t.kind == "s" and x >> (t.bits - 1) else x


def _trunc_div(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return q if (a < 0) == (b < 0) else -q


def _int(insn: Any, op: str, t: T, mode: str | None, xs: list[int]) -> int:
    n = t.bits
    a, b = xs[0], xs[1] if len(xs) > 1 else 0
    if t.kind == "b":       # logic ops read bits: as unsigned
        a, b = a & ((1 << n) - 1), b & ((1 << n) - 1)
    if op == "add" or op == "sub":
        r = a + b if op == "add" else a - b
        if getattr(insn, "sat", False):   # add/sub.sat.s32 clamp instead of wrapping
            return max(-(1 << 31), min((1 << 31) - 1, r))
        return _wrap(r, t)
    if op == "mul" or op == "mad":
        p = a * b
        c = xs[2] if op == "mad" else 0
        if mode == "wide":
            return _wrap(p + c, _WIDE[t])
        return _wrap((p >> n if mode == "hi" else p) + c, t)
    if op == "div" or op == "rem":
        if b == 0:
            _fail(insn, "it divides by zero (PTX leaves the result unspecified)")
        q = _trunc_div(a, b)
        if op == "div" and _wrap(q, t) != q:
            _fail(insn, f"the quotient {q} does not fit .{t.value}")
        return q if op == "div" else a - b * q
    if op in ("min", "max"):
        return min(a, b) if op == "min" else max(a, b)
    if op in ("and", "or", "xor"):
        return a & b if op == "and" else a | b if op == "or" else a ^ b
    if op == "shl":         # shift amounts beyond the width are clamped to it
        return _wrap(a << min(b, n), t)
    if op == "shr":         # .sN shifts in the sign, .uN/.bN zeros
        return _wrap(a >> min(b, n), t)
    if op == "neg":
        return _wrap(-a, t)
    if op == "abs":
        if a == -(1 << (n - 1)):
            _fail(insn, f"|{a}| does not fit .{t.value}")
        return abs(a)
    return _wrap(~a, t)     # not


def _f32(x: float) -> float:
    """`x` rounded to .f32, as an immediate is written (0fXXXXXXXX); inf beyond its range."""
    if abs(x) > _F32_MAX:
        return math.copysign(math.inf, x)
    return struct.unpack("f", struct.pack("f", x))[0]


_F32_MAX = 3.4028235677973366e38   # the largest .f32 plus half an ulp: rounds to inf above


def _as_float(insn: Any, exact: Fraction, t: T) -> float:
    """The float of type `t` equal to `exact`, refusing one that is not representable."""
    try:
        f = float(exact)
    except OverflowError:
        f = math.inf
    if t is T.f32:
        f = _f32(f)
    if not math.isfinite(f):
        _fail(insn, f"the result overflows .{t.value}")
    if Fraction(f) != exact:
        _fail(insn, f"the exact result {float(exact)!r} is not a .{t.value} value (it would "
              "be rounded)")
    return f


def _subnormal(x: float, t: T) -> bool:
    tiny = 1.1754943508222875e-38 if t is T.f32 else 2.2250738585072014e-308
    return x != 0 and abs(x) < tiny


def _float(insn: Any, op: str, t: T, mode: str | None, xs: list[float]) -> float:
    if t is T.f32:   # the values the instruction's 0f immediates hold
        xs = [_f32(x) for x in xs]
    if not all(math.isfinite(x) for x in xs):
        _fail(insn, "a source is not finite")
    if op == "div" and mode in ("approx", "full"):
        _fail(insn, f"div.{mode} is approximate")
    if op in ("min", "max"):
        a, b = xs
        if a == b == 0 and math.copysign(1, a) != math.copysign(1, b):
            _fail(insn, f"{op} of +0.0 and -0.0 is either zero")
        return min(a, b) if op == "min" else max(a, b)
    if op in ("neg", "abs"):
        r = -xs[0] if op == "neg" else abs(xs[0])
    else:
        p, q = Fraction(xs[0]), Fraction(xs[1])
        if op == "div" and q == 0:
            _fail(insn, "it divides by zero")
        exact = {"add": lambda: p + q, "sub": lambda: p - q, "mul": lambda: p * q,
                 "div": lambda: p / q, "mad": lambda: p * q + Fraction(xs[2])}[op]()
        if getattr(insn, "sat", False):   # .sat clamps to [0.0, 1.0], a zero to +0.0
            exact = max(Fraction(0), min(Fraction(1), exact))
        elif exact == 0:
            _fail(insn, "the sign of a zero result depends on the operands' signs and the "
                  "rounding mode")
        r = _as_float(insn, exact, t)
    if insn.ftz and any(_subnormal(x, t) for x in (*xs, r)):
        _fail(insn, ".ftz would flush a subnormal value")
    return r


def folded(insn: Binary | Mad | Unary) -> Value:
    """The value `insn` (whose sources are all immediates) writes to its destination."""
    if insn.requires.arch_specific:
        # the mov would run anywhere, so the module would not be held to the targets the
        # instruction written has (add.sat.u32: the sm_120 family only)
        _fail(insn, f"{insn.opcode()} needs {insn.requires.describe()}, which a folded mov "
              f"would not ask of the module")
    op = "mad" if isinstance(insn, Mad) else insn.op
    # Validated sources that are not registers are immediates.
    xs = [x.value for x in (insn.a, getattr(insn, "b", None), getattr(insn, "c", None))
          if isinstance(x, Imm)]
    if insn.type.is_float:
        return _float(insn, op, insn.type, getattr(insn, "mode", None), xs)
    return _int(insn, op, insn.type, getattr(insn, "mode", None), [int(x) for x in xs])


def result_type(insn: Binary | Mad | Unary) -> T:
    """The type of the value `insn` writes (`.wide` doubles it)."""
    return _WIDE[insn.type] if getattr(insn, "mode", None) == "wide" else insn.type
