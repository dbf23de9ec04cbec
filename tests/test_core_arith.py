"""Integer, float and bitwise arithmetic: goldens and refusals."""

from __future__ import annotations

import pytest

from ptxdsl import Kernel, Module, OperandError, t


def test_int_arith_golden(golden):
    k = Kernel("int_arith")
    a = k.ld_param(k.param(t.u32, "a"))
    b = k.ld_param(k.param(t.s32, "b"))
    c = k.ld_param(k.param(t.u64, "c"))
    h = k.ld_param(k.param(t.u16, "h"))
    k.add(a, 1)
    k.add(b, -1)
    k.add(b, b, sat=True)
    k.add(c, c)
    k.add(h, 3)
    k.sub(a, a)
    k.sub(b, 5, sat=True)
    k.sub(c, 1)
    k.mul(a, a)                               # .lo by default
    k.mul(a, 3, mode="hi")
    k.mul(b, b, mode="wide")                  # s32 x s32 -> s64
    k.mul(h, h, mode="wide")                  # u16 x u16 -> u32
    k.mul(c, c, mode="hi")
    k.mad(a, a, a)
    k.mad(b, 2, b, mode="hi")
    k.mad(a, a, c, mode="wide")               # c is the 64-bit addend
    k.div(a, 7)
    k.div(b, b)
    k.rem(a, 10)
    k.rem(c, c)
    k.min(a, 1)
    k.min(b, b)
    k.max(c, 2)
    k.max(b, -2)
    k.abs(b)
    k.neg(b)
    k.abs(k.cvt(b, t.s64))
    golden(Module([k]), "core/int_arith")


def test_float_arith_golden(golden):
    k = Kernel("float_arith")
    f = k.ld_param(k.param(t.f32, "f"))
    d = k.ld_param(k.param(t.f64, "d"))
    k.add(f, 1.5)
    k.add(f, f, mode="rz", ftz=True, sat=True)
    k.add(d, d, mode="rn")
    k.sub(f, 0.25)
    k.sub(d, 2.0, mode="rm")
    k.mul(f, f)
    k.mul(d, 0.5, mode="rp")
    k.mad(f, f, 1.0)                          # .rn by default
    k.mad(d, d, d, mode="rz")
    k.mad(f, f, f, ftz=True)
    k.div(f, 3.0)                             # IEEE .rn by default
    k.div(f, f, mode="approx")
    k.div(f, f, mode="full")
    k.div(d, d, mode="rp")
    k.min(f, 0.0)
    k.max(d, d)
    k.abs(f)
    k.abs(f, ftz=True)
    k.neg(d)
    golden(Module([k]), "core/float_arith")


def test_logic_golden(golden):
    k = Kernel("logic")
    a = k.ld_param(k.param(t.u32, "a"))
    b = k.ld_param(k.param(t.s32, "b"))
    c = k.ld_param(k.param(t.u64, "c"))
    h = k.ld_param(k.param(t.u16, "h"))
    p, q = a < 4, b > 0
    k.and_(a, 0xFF)                           # .u32 registers run as .b32
    k.or_(c, c)
    k.xor(h, 1)
    k.and_(p, q)
    k.or_(p, q)
    k.xor(p, q)
    k.not_(a)
    k.not_(c)
    k.not_(p)
    k.shl(a, 3)
    k.shl(c, a)
    k.shr(a, 1)                               # logical: .u32
    k.shr(b, 1)                               # arithmetic: .s32
    k.shr(c, a, type=t.b64)
    golden(Module([k]), "core/logic")


def test_arith_refusals():
    k = Kernel("bad")
    a, b, f = k.reg(t.u32), k.reg(t.u64), k.reg(t.f32)
    with pytest.raises(OperandError, match=r"add\.u32: operand 'b': expected a register "
                       r"compatible with \.u32, got register %rd1 of type \.u64"):
        k.add(a, b)
    with pytest.raises(OperandError, match=r"mul\.wide\.u64: operand 'type': expected a 16- or "
                       r"32-bit type for \.wide, got \.u64"):
        k.mul(b, b, mode="wide")
    with pytest.raises(OperandError, match=r"mul\.u32: operand 'mode': expected one of 'lo', "
                       r"'hi', 'wide', got str 'low'"):
        k.mul(a, a, mode="low")
    with pytest.raises(OperandError, match=r"rem: operand 'type': expected one of .*got \.f32"):
        k.rem(f, f)
    with pytest.raises(OperandError, match=r"add\.ftz\.u32: operand .ftz.: expected an \.f32, "
                       r"\.f16 or \.f16x2 instruction, got \.u32"):
        k.add(a, a, ftz=True)
    with pytest.raises(OperandError, match=r"abs: operand 'type': expected one of .*got \.u32"):
        k.abs(a)
    with pytest.raises(OperandError, match=r"add\.u32: operand 'b': expected an integer "
                       r"immediate for \.u32, got 1\.5"):
        k.add(a, 1.5)
    with pytest.raises(OperandError, match=r"div\.f64: operand 'mode': expected one of 'rn', "
                       r"'rz', 'rm', 'rp', got str 'approx'"):
        k.div(k.reg(t.f64), 1.0, mode="approx")


def test_add_sat_u32_is_ptx_92_on_the_sm120_family_only(golden):
    """add.sat.u32 came with PTX ISA 9.2 for the sm_120/121 targets (ptxas refuses it for
    sm_90a, sm_100a and the plain sm_120): the module is raised to that, a pin below it is
    refused, sub.sat.u32 stays refused, and constants are not folded into a mov that would
    drop the target."""
    from ptxdsl import BuildError, VersionError
    k = Kernel("sat_u32")
    a = k.ld_param(k.param(t.u32, "a"))
    k.add(a, 7, sat=True)
    text = Module([k]).emit()
    assert "add.sat.u32" in text and ".version 9.2" in text and ".target sm_120a" in text
    golden(Module([k]), "core/add_sat_u32")
    Module([k]).assemble("sm_120a")
    with pytest.raises(VersionError, match=r"add\.sat\.u32 needs PTX ISA 9\.2, sm_120a/sm_121a"):
        Module([k], target="sm_90a").emit()
    with pytest.raises(OperandError, match=r"sub\.sat\.u32: operand 'sat': expected add/sub\.s32, "
                       r"add\.u32 \(PTX 9\.2, sm_120f\)"):
        k.sub(a, a, sat=True)
    with pytest.raises(BuildError, match="every source is a constant, and add.sat.u32 needs"):
        k.add(1, 2, type=t.u32, sat=True)
