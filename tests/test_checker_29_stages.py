"""Checker (issue 29): `ptxdsl.checker.stages.wrap_count`, the stage registers a ring advances in
place, recognised in each spelling and refused where the register can leave [0, N)."""

from __future__ import annotations

import pytest

from ptxdsl import Kernel, t
from ptxdsl.checker.stages import wrap_count
from ptxdsl.checker.values import Values
from ptxdsl.pipeline import MbarrierRing


def _stage(spelling: str, n: int = 3):
    """A kernel whose loop advances one stage register; returns (kernel, register)."""
    k = Kernel("k", reqntid=32)
    if spelling == "ring":
        c = MbarrierRing(k, n).consumer()
        with k.for_range(0, 10):
            c.advance()
        return k, c.stage
    s = k.mov(0, type=t.u32)
    with k.for_range(0, 10):
        if spelling == "branch":
            k.add(s, 1, dst=s)
            with k.if_(s == n):
                k.mov(0, dst=s)
        elif spelling == "selp":
            nxt = k.add(s, 1)
            k.selp(0, nxt, nxt == n, dst=s)
        elif spelling == "rem":
            k.rem(k.add(s, 1), n, dst=s)
        elif spelling == "tested-before-step":     # wraps at n, but tests the old value
            p = k.setp("eq", s, n - 1, type=t.u32)
            k.add(s, 1, dst=s)
            with k.guard(p):
                k.mov(0, dst=s)
        elif spelling == "no-wrap":
            k.add(s, 1, dst=s)
        elif spelling == "read-before-wrap":     # s == n is visible to the mul
            k.add(s, 1, dst=s)
            k.mul(s, 4, type=t.u32)
            with k.if_(s == n):
                k.mov(0, dst=s)
    return k, s


@pytest.mark.parametrize("spelling", ["ring", "branch", "selp", "rem"])
def test_stage_registers_are_recognised(spelling):
    k, reg = _stage(spelling)
    assert wrap_count(Values(k.body), reg) == 3


@pytest.mark.parametrize("spelling", ["tested-before-step", "no-wrap", "read-before-wrap"])
def test_registers_that_may_leave_the_ring_are_not(spelling):
    k, reg = _stage(spelling)
    assert wrap_count(Values(k.body), reg) is None
