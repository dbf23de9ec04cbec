"""ptxdsl.split_sum.ordered_split_sum: the split-K reduction shared by gemm_decode and
grouped_gemm_moe (their GPU runs check the sums bit for bit); here its PTX and refusals."""

from __future__ import annotations

import re

import pytest

from ptxdsl import Kernel, Module, OperandError, t
from ptxdsl.split_sum import QUAD_BYTES, ordered_split_sum


def _kernel(name="split"):
    k = Kernel(name, maxntid=(256, 1, 1))
    base = k.cvta(k.ld_param(k.param_ptr("ws")), "global", to=True)
    parts = k.ld_param(k.param(t.u32, "parts"))
    leader = (k.and_(k.tid.x, 127) == 0)
    return k, base, parts, leader


def _sum(k, base, parts, leader, acc, stride=16 * 1024):
    return ordered_split_sum(k, acc, mine=k.add(base, 64), first=k.add(base, 64),
                             stride=stride, counter=base, parts=parts, barrier=1,
                             leader=leader)


def test_golden_and_the_protocol_in_order(golden):
    k, base, parts, leader = _kernel()
    acc = k.fragment(t.f32, shape=(64, 64), zero=False)        # 32 registers: 8 quads
    holds = _sum(k, base, parts, leader, acc)
    with k.if_(holds):
        k.st(base, acc.regs[0], type=t.f32, space="global")
    k.ret()
    golden(Module([k], target="sm_90a"), "split_sum/ordered")
    ptx = Module([k], target="sm_90a").emit()
    stores = [m.start() for m in re.finditer(r"st\.global\.v4\.f32", ptx)]
    assert len(stores) == 8 and f"+{7 * QUAD_BYTES}]" in ptx
    steps = ["bar.sync 1, 128;", "atom.acq_rel.gpu.global.add.u32 %parts_before",
             "setp.eq.and.u32", "st.global.u32", "bar.red.or.pred", "ld.global.v4.f32"]
    at = [ptx.index(s, stores[-1]) for s in steps]
    assert at == sorted(at), at           # stores, barrier, count, last?, reset, vote, sums
    loads = ptx[at[-1]:]
    assert loads.count("ld.global.v4.f32") == 16 and loads.count("add.f32") == 32


@pytest.mark.parametrize("acc, stride, operand", [
    (lambda k: k.fragment(t.f32, shape=(64, 64), packed="bf16"), 16384, "acc"),
    (lambda k: k.fragment(t.s32, shape=(64, 64)), 16384, "acc"),
    (lambda k: [k.reg(t.f32)] * 4, 16384, "acc"),
    (lambda k: k.fragment(t.f32, shape=(64, 64)), 8192, "stride"),     # under one slot
    (lambda k: k.fragment(t.f32, shape=(64, 64)), 16392, "stride"),    # not 16-aligned
    (lambda k: k.fragment(t.f32, shape=(64, 64)), 16384.0, "stride"),
])
def test_refusals_name_the_operand_and_the_line(acc, stride, operand):
    k, base, parts, leader = _kernel("bad")
    frag = acc(k)
    with pytest.raises(OperandError, match=f"ordered_split_sum.*{operand}") as e:
        _sum(k, base, parts, leader, frag, stride)
    assert e.value.loc.file == __file__


@pytest.mark.parametrize("operand, bad, expected", [
    ("mine", None, "a 64-bit integer register"),
    ("first", 4096, "a 64-bit integer register"),
    ("counter", lambda k: k.reg(t.u32), "a 64-bit integer register"),
    ("parts", 4, "a 32-bit integer register"),
    ("parts", lambda k: k.reg(t.f32), "a 32-bit integer register"),
    ("leader", lambda k: k.reg(t.u32), "a predicate"),
    ("leader", True, "a predicate"),
])
def test_operands_are_checked_by_the_helper(operand, bad, expected):
    k, base, parts, leader = _kernel("bad_operand")
    args = dict(mine=base, first=base, stride=16384, counter=base, parts=parts, barrier=1,
                leader=leader)
    args[operand] = bad(k) if callable(bad) else bad
    with pytest.raises(OperandError, match=f"ordered_split_sum: operand '{operand}': "
                       f"expected {expected}") as e:
        ordered_split_sum(k, k.fragment(t.f32, shape=(64, 64)), **args)
    assert e.value.loc.file == __file__


def test_the_barrier_is_checked_by_the_helper():
    k, base, parts, leader = _kernel("bad_barrier")
    with pytest.raises(OperandError, match=r"ordered_split_sum: barrier: operand 'id': "
                       r"expected an integer immediate in \[0, 15\]") as e:
        ordered_split_sum(k, k.fragment(t.f32, shape=(64, 64)), mine=base, first=base,
                          stride=16384, counter=base, parts=parts, barrier=16, leader=leader)
    assert e.value.loc.file == __file__
    ordered_split_sum(k, k.fragment(t.f32, shape=(64, 64)), mine=base, first=base,
                      stride=16384, counter=base, parts=parts, barrier=1, leader=~leader)
