"""Arithmetic whose sources are all constants (`k.mul(0, 128, type=t.u32)`, issue 32) is folded
at build time into one `mov` of the value the hardware would compute, or refused where that
is not one exact value; a source in a register still emits the instruction."""

from __future__ import annotations

import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ptxdsl import BuildError, Kernel, Module, t
from ptxdsl.instructions.arith import Binary
from ptxdsl.instructions.arith_fold import folded

ARITH = ("add.", "sub.", "mul.", "mad.", "div.", "rem.", "min.", "max.", "and.", "or.", "xor.",
         "shl.", "shr.", "neg.", "abs.", "not.")

FOLDS = [
    (lambda k: k.mul(0, 128, type=t.u32), "mov.u32 %r1, 0;"),
    (lambda k: k.add(4294967295, 2, type=t.u32), "mov.u32 %r1, 1;"),            # wraps
    (lambda k: k.add(2147483647, 1, type=t.s32), "mov.s32 %r1, -2147483648;"),
    (lambda k: k.add(2147483647, 1, type=t.s32, sat=True), "mov.s32 %r1, 2147483647;"),
    (lambda k: k.sub(3, 5, type=t.u16), "mov.u16 %rs1, 65534;"),
    (lambda k: k.mul(-3, 5, type=t.s32, mode="hi"), "mov.s32 %r1, -1;"),
    (lambda k: k.mul(4294967295, 4294967295, type=t.u32, mode="hi"),
     "mov.u32 %r1, 4294967294;"),
    (lambda k: k.mul(65536, 65536, type=t.u32, mode="wide"), "mov.u64 %rd1, 4294967296;"),
    (lambda k: k.mad(3, 4, 5, type=t.s32), "mov.s32 %r1, 17;"),
    (lambda k: k.mad(65536, 65536, 1, type=t.u32, mode="hi"), "mov.u32 %r1, 2;"),
    (lambda k: k.mad(-2, 3, 1, type=t.s32, mode="wide"), "mov.s64 %rd1, -5;"),
    (lambda k: k.div(-7, 2, type=t.s32), "mov.s32 %r1, -3;"),                   # toward zero
    (lambda k: k.rem(-7, 2, type=t.s32), "mov.s32 %r1, -1;"),                   # sign of a
    (lambda k: k.min(-1, 3, type=t.s16), "mov.s16 %rs1, -1;"),
    (lambda k: k.max(7, 3, type=t.u64), "mov.u64 %rd1, 7;"),
    (lambda k: k.and_(12, 10, type=t.b32), "mov.b32 %r1, 8;"),
    (lambda k: k.or_(12, 10, type=t.u32), "mov.b32 %r1, 14;"),
    (lambda k: k.xor(-1, 1, type=t.b16), "mov.b16 %rs1, 65534;"),
    (lambda k: k.shl(1, 40, type=t.u32), "mov.b32 %r1, 0;"),                   # clamped shift
    (lambda k: k.shr(-8, 1, type=t.s32), "mov.s32 %r1, -4;"),                  # arithmetic
    (lambda k: k.shr(-8, 1, type=t.b32), "mov.b32 %r1, 2147483644;"),          # logical
    (lambda k: k.neg(-2147483648, type=t.s32), "mov.s32 %r1, -2147483648;"),
    (lambda k: k.abs(-5, type=t.s64), "mov.s64 %rd1, 5;"),
    (lambda k: k.not_(0, type=t.b64), "mov.b64 %rd1, 18446744073709551615;"),
    (lambda k: k.add(1.5, 2.25, type=t.f32), "mov.f32 %f1, 0f40700000;"),
    (lambda k: k.mul(0.1, 2.0, type=t.f32), "mov.f32 %f1, 0f3E4CCCCD;"),        # f32(0.1) * 2
    (lambda k: k.sub(0.25, 2.0, type=t.f32, sat=True), "mov.f32 %f1, 0f00000000;"),
    (lambda k: k.div(1.0, 4.0, type=t.f64), "mov.f64 %fd1, 0d3FD0000000000000;"),
    (lambda k: k.mad(2.0, 3.0, 0.5, type=t.f32), "mov.f32 %f1, 0f40D00000;"),
    (lambda k: k.min(-0.0, -1.5, type=t.f32), "mov.f32 %f1, 0fBFC00000;"),
    (lambda k: k.neg(0.0, type=t.f64), "mov.f64 %fd1, 0d8000000000000000;"),
]


@pytest.mark.parametrize("build, line", FOLDS, ids=[line for _, line in FOLDS])
def test_constant_sources_fold_to_one_mov(build, line):
    k = Kernel("k")
    build(k)
    body = Module([k]).emit().split("{", 1)[1]
    assert line in body
    assert not any(s.strip().startswith(ARITH) for s in body.splitlines())


def test_folds_assemble_and_dst_is_kept():
    k = Kernel("k")
    for build, _ in FOLDS:
        build(k)
    out = k.reg(t.u64, "out")
    assert k.mul(3, 4, type=t.u32, mode="wide", dst=out) is out
    text = Module([k]).emit()
    assert "mov.u64 %out, 12;" in text
    assert Module([k]).assemble()[:4] == b"\x7fELF"


def test_a_register_source_still_emits_the_instruction():
    k = Kernel("k")
    r = k.ld_param(k.param(t.u32, "n"))
    k.mul(r, 128)
    k.mad(2, 3, r)
    assert "mul.lo.u32 %r2, %r1, 128;" in Module([k]).emit()
    assert "mad.lo.u32 %r3, 2, 3, %r1;" in Module([k]).emit()


_I32 = st.integers(-(1 << 31), (1 << 31) - 1)


@settings(max_examples=200, deadline=None)
@given(op=st.sampled_from(["add", "sub", "mul", "and", "or", "xor", "min", "max"]), a=_I32,
       b=_I32, ty=st.sampled_from([t.s32, t.u32, t.s16, t.u16]))
def test_integer_folds_agree_with_numpy(op, a, b, ty):
    """Two's-complement wrapping, as numpy's fixed-width integers compute it."""
    dtype = np.dtype(ty.value.replace("u", "uint").replace("s", "int"))
    x, y = np.array([a]).astype(dtype), np.array([b]).astype(dtype)
    want = {"add": x + y, "sub": x - y, "mul": x * y, "and": x & y, "or": x | y, "xor": x ^ y,
            "min": np.minimum(x, y), "max": np.maximum(x, y)}[op][0]
    k = Kernel("k")
    bits = {"and", "or", "xor"}
    insn = Binary(op, {16: t.b16, 32: t.b32}[ty.bits] if op in bits else ty, k.reg(ty),
                  int(x[0]), int(y[0]))
    got = folded(insn)
    assert got == (int(want) & ((1 << ty.bits) - 1) if op in bits else int(want))


# -- refusals: one per class of value that is not one exact number ---------------------------
def _next_line() -> int:
    return sys._getframe(1).f_lineno + 1


def test_refuse_division_by_zero():
    k = Kernel("k")
    with pytest.raises(BuildError, match=r"div\.u32: every source is a constant, and it divides "
                                         r"by zero \(PTX leaves the result unspecified\); "
                                         r"compute the constant in Python") as err:
        line = _next_line()
        k.div(7, 0, type=t.u32)
    assert (err.value.loc.file, err.value.loc.line) == (__file__, line)
    with pytest.raises(BuildError, match=r"rem\.s64: .* divides by zero"):
        k.rem(7, 0, type=t.s64)
    with pytest.raises(BuildError, match=r"div\.rn\.f32: .* divides by zero"):
        k.div(1.0, 0.0, type=t.f32)
    assert k.body == []


def test_refuse_signed_overflow():
    k = Kernel("k")
    with pytest.raises(BuildError, match=r"the quotient 2147483648 does not fit \.s32"):
        k.div(-2147483648, -1, type=t.s32)
    with pytest.raises(BuildError, match=r"\|-32768\| does not fit \.s16"):
        k.abs(-32768, type=t.s16)


def test_refuse_float_rounding():
    k = Kernel("k")
    with pytest.raises(BuildError, match=r"add\.f32: .* the exact result 0\.3000000044703483\d* "
                                         r"is not a \.f32 value \(it would be rounded\)"):
        k.add(0.1, 0.2, type=t.f32)
    with pytest.raises(BuildError, match=r"mul\.f32: .* the result overflows \.f32"):
        k.mul(1e38, 10.0, type=t.f32)


def test_refuse_zero_of_unknown_sign():
    k = Kernel("k")
    with pytest.raises(BuildError, match=r"the sign of a zero result depends on the operands' "
                                         r"signs and the rounding mode"):
        k.sub(1.0, 1.0, type=t.f32, mode="rm")
    with pytest.raises(BuildError, match=r"min of \+0\.0 and -0\.0 is either zero"):
        k.min(0.0, -0.0, type=t.f32)


def test_refuse_approximate_division():
    k = Kernel("k")
    with pytest.raises(BuildError, match=r"div\.approx\.f32: .* div\.approx is approximate"):
        k.div(1.0, 4.0, type=t.f32, mode="approx")


def test_refuse_flushed_subnormal():
    k = Kernel("k")
    with pytest.raises(BuildError, match=r"mul\.ftz\.f32: .* \.ftz would flush a subnormal"):
        k.mul(2.0 ** -120, 2.0 ** -10, type=t.f32, ftz=True)
    k.mul(2.0 ** -120, 2.0 ** -10, type=t.f32)    # without .ftz the subnormal is the value


def test_refuse_non_finite_source():
    k = Kernel("k")
    with pytest.raises(BuildError, match=r"add\.f32: .* a source is not finite"):
        k.add(float("inf"), 1.0, type=t.f32)


def test_constants_without_a_type_still_ask_for_one():
    k = Kernel("k")
    with pytest.raises(BuildError, match=r"mul: cannot infer the operand type from immediates "
                                         r"alone; pass type="):
        k.mul(0, 128)


def test_logic_op_on_constants_takes_type():
    """`k.and_(12, 10, type=t.u32)` once asked for the type it was given."""
    k = Kernel("k")
    assert k.and_(12, 10, type=t.u32).type is t.u32
    assert k.shl(1, 3, type=t.b64).type is t.b64
