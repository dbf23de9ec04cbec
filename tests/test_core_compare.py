"""setp with every comparison of each type class, bool combining, selp: goldens, refusals."""

from __future__ import annotations

import pytest

from ptxdsl import Kernel, Module, OperandError, t
from ptxdsl.instructions.compare import FLOAT_CMP, INT_CMP, UNSIGNED_CMP, Setp


def test_setp_golden(golden):
    k = Kernel("setp")
    u = k.ld_param(k.param(t.u32, "u"))
    s = k.ld_param(k.param(t.s64, "s"))
    f = k.ld_param(k.param(t.f32, "f"))
    d = k.ld_param(k.param(t.f64, "d"))
    b = k.ld_param(k.param(t.b32, "b"))
    for cmp in INT_CMP + UNSIGNED_CMP:
        k.setp(cmp, u, 1)
    for cmp in INT_CMP:
        k.setp(cmp, s, -1)
    for cmp in INT_CMP + FLOAT_CMP:
        k.setp(cmp, f, 0.5)
    for cmp in INT_CMP + FLOAT_CMP:
        k.setp(cmp, d, d)
    for cmp in ("eq", "ne"):
        k.setp(cmp, b, 0)
    p = k.setp("lt", u, 10)
    k.setp("ge", u, 3, bool_op="and", c=p)
    k.setp("eq", s, 0, bool_op="or", c=~p)
    k.setp("ne", f, f, bool_op="xor", c=p, ftz=True)
    k.emit(Setp("lt", t.u32, k.reg(t.pred), u, 1, q=k.reg(t.pred)))   # p|q: q = !(u < 1)
    k.selp(u, 0, p)
    k.selp(1.0, f, p)
    k.selp(d, 2.0, p)
    k.selp(s, s, p)
    golden(Module([k]), "core/setp")


def test_setp_refusals():
    k = Kernel("bad")
    u, s, f = k.reg(t.u32), k.reg(t.s32), k.reg(t.f32)
    with pytest.raises(OperandError, match=r"setp\.s32: operand 'cmp': expected one of 'eq', "
                       r"'ne', 'lt', 'le', 'gt', 'ge', got str 'lo'"):
        k.setp("lo", s, s)
    with pytest.raises(OperandError, match=r"setp\.u32: operand 'cmp': expected one of .*got "
                       "str 'nan'"):
        k.setp("nan", u, u)
    with pytest.raises(OperandError, match=r"setp\.lt\.ftz\.u32: operand 'ftz': expected an "
                       r"\.f32 comparison"):
        k.setp("lt", u, u, ftz=True)
    with pytest.raises(OperandError, match=r"operand 'c': expected a predicate exactly when "
                       "bool_op is given"):
        k.setp("lt", u, u, bool_op="and")
    with pytest.raises(OperandError, match=r"setp\.lt\.u32: operand 'b': expected a register "
                       r"compatible with \.u32, got register %f1 of type \.f32"):
        k.setp("lt", u, f)
    with pytest.raises(OperandError, match=r"selp\.u32: operand 'c': expected a \.pred register"
                       r", got register %r1 of type \.u32"):
        k.selp(u, u, u)
