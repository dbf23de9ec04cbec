"""Operator sugar on registers: each operator emits exactly one instruction."""

from __future__ import annotations

import pytest

from ptxdsl import BuildError, Kernel, Module, t
from ptxdsl.operands import NegPred


def test_operators_golden(golden):
    k = Kernel("sugar")
    a = k.ld_param(k.param(t.u32, "a"))
    b = k.ld_param(k.param(t.u32, "b"))
    s = k.ld_param(k.param(t.s32, "s"))
    f = k.ld_param(k.param(t.f32, "f"))
    exprs = [a + b, a + 1, 1 + a, a - b, 10 - a, a * b, 3 * a, a / b, a // 2, a % b,
             a & b, a | 0xF, a ^ b, a << 2, a >> 1, s >> 1, -s, ~a, f + 0.5, f * f, -f]
    p = a < b
    preds = [p, a <= b, a > 1, a >= b, a == b, a != 0, f < 1.0]
    with k.if_(~p):
        k.st(k.shared_array(t.u32, 1, name="out"), exprs[0])
    golden(Module([k]), "core/sugar")
    assert all(r.type is t.u32 for r in exprs[:15])
    assert exprs[15].type is t.s32 and exprs[16].type is t.s32
    assert all(q.type is t.pred for q in preds)


def test_each_operator_emits_one_instruction():
    k = Kernel("k")
    a, b = k.reg(t.u32), k.reg(t.u32)
    cases = {"add.u32": lambda: a + b, "sub.u32": lambda: a - b, "mul.lo.u32": lambda: a * b,
             "div.u32": lambda: a / b, "rem.u32": lambda: a % b, "and.b32": lambda: a & b,
             "or.b32": lambda: a | b, "xor.b32": lambda: a ^ b, "shl.b32": lambda: a << b,
             "shr.u32": lambda: a >> b, "not.b32": lambda: ~a, "setp.lt.u32": lambda: a < b,
             "setp.ge.u32": lambda: a >= b, "setp.eq.u32": lambda: a == b,
             "setp.ne.u32": lambda: a != b}
    for opcode, build in cases.items():
        before = len(k.body)
        build()
        assert len(k.body) == before + 1
        assert k.body[-1].insn.opcode() == opcode


def test_invert_of_a_predicate_is_a_negation_not_an_instruction():
    k = Kernel("k")
    p = k.reg(t.pred)
    n = ~p
    assert isinstance(n, NegPred) and n.render() == "!%p1"
    assert ~n is p
    assert k.body == []


def test_registers_have_no_python_truth_value():
    k = Kernel("k")
    p = k.reg(t.u32) < 4
    with pytest.raises(BuildError, match=r"register %p1 has no Python truth value; use k\.if_"):
        if p:
            pass
    with pytest.raises(BuildError, match="has no Python truth value"):
        k.reg(t.u32) < k.reg(t.u32) < 3  # noqa: B015 - chained comparisons call bool()


def test_registers_stay_hashable():
    k = Kernel("k")
    a, b = k.reg(t.u32), k.reg(t.u32)
    assert len({a, b, a}) == 2


def test_copy_moves_nbytes_with_ld_st_pairs():
    k = Kernel("k")
    tm = k.param_tensormap("tm")
    smap = k.shared_array(t.b8, 128, align=128, name="smap")
    k.copy(smap, tm, 128)
    ops = [st.insn.opcode() for st in k.statements()]
    assert ops == ["ld.param.b64", "st.shared.b64"] * 16
    offsets = [st.insn.a.offset for st in k.statements()]
    assert offsets == [o for o in range(0, 128, 8) for _ in (0, 1)]
