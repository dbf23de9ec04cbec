"""shfl.sync, vote.sync, activemask, elect.sync: goldens, version needs, refusals."""

from __future__ import annotations

import sys

import pytest

from ptxdsl import Kernel, Module, OperandError, VersionError, t
from ptxdsl.instructions.warp import Elect, Shfl, Vote


def test_shfl_golden(golden):
    k = Kernel("shfl")
    v = k.ld_param(k.param(t.u32, "v"))
    f = k.ld_param(k.param(t.f32, "f"))
    lane = k.laneid
    k.shfl_sync("up", v, 1)                              # c = 0, the CUDA default for up
    k.shfl_sync("down", v, 16)                           # c = 31
    k.shfl_sync("bfly", f, 8)                            # a .f32 value moves as .b32
    k.shfl_sync("idx", v, lane, 0x1F, mask=0x0000FFFF)
    k.shfl_sync("idx", 7, 0, 0x1F1F, mask=v)             # immediate source, register mask
    d, p = k.shfl_sync("down", v, lane, pred=True)       # d|p: p says the lane was in range
    k.shfl_sync("up", d, 2, lane, dst=v)
    golden(Module([k]), "core/shfl")


def test_vote_activemask_golden(golden):
    k = Kernel("vote")
    n = k.ld_param(k.param(t.u32, "n"))
    p = k.laneid < n
    mask = k.activemask()
    k.vote_sync("all", p)
    k.vote_sync("any", ~p, mask=0xFFFF0000)
    k.vote_sync("uni", p, mask=mask)
    k.vote_sync("ballot", p)
    k.vote_sync("ballot", ~p, mask=mask, dst=k.reg(t.u32))
    golden(Module([k]), "core/vote")


def test_elect_golden(golden):
    k = Kernel("elect")
    m = k.ld_param(k.param(t.u32, "m"))
    leader = k.elect_sync()                              # elect.sync _|p, -1
    with k.if_(leader):
        lane, p = k.elect_sync(m, leader=True)
    mod = Module([k])
    assert (str(mod.version), str(mod.target)) == ("8.0", "sm_90")
    golden(mod, "core/elect")


def test_warp_forms_need_only_the_floor():
    k = Kernel("w")
    k.shfl_sync("idx", k.laneid, 0)
    k.vote_sync("ballot", k.reg(t.pred))
    k.activemask()
    m = Module([k])
    assert (str(m.version), str(m.target)) == ("6.3", "sm_75")


def test_pinning_below_elect_raises():
    k = Kernel("w")
    line = sys._getframe().f_lineno + 1
    k.elect_sync()
    with pytest.raises(VersionError, match=r"elect\.sync needs PTX ISA 8\.0, sm_90\+, but the "
                       r"module is pinned to \.target sm_89") as e:
        Module([k], target="sm_89").emit()
    assert (e.value.loc.file, e.value.loc.line) == (__file__, line)
    with pytest.raises(VersionError, match=r"elect\.sync needs PTX ISA 8\.0, sm_90\+, but the "
                       r"module is pinned to \.version 7\.8"):
        Module([k], version="7.8").emit()


@pytest.mark.parametrize("b", [32, -1, 1.0])
def test_shfl_lane_out_of_range(b):
    k = Kernel("w")
    with pytest.raises(OperandError, match=r"shfl\.sync\.idx\.b32: operand 'b': expected a "
                       rf"32-bit register or a lane number in \[0, 31\], got {b!r}") as e:
        k.shfl_sync("idx", k.reg(t.u32), b)
    assert e.value.loc.file == __file__


@pytest.mark.parametrize("c", [0x2000, 0x20, -1])
def test_shfl_clamp_segmask_bits(c):
    k = Kernel("w")
    with pytest.raises(OperandError, match=r"operand 'c': expected a 32-bit register or an "
                       r"immediate using only bits 0-4 \(clamp\) and 8-12"):
        k.shfl_sync("bfly", k.reg(t.u32), 1, c)


def test_shfl_refusals():
    k = Kernel("w")
    v = k.reg(t.u32)
    with pytest.raises(OperandError, match="shfl.sync: operand 'mode': expected one of 'up', "
                       "'down', 'bfly', 'idx', got str 'xor'"):
        k.shfl_sync("xor", v, 1)
    with pytest.raises(OperandError, match=r"shfl\.sync\.idx\.b32: operand 'a': expected a "
                       r"register compatible with \.b32, got register %rd1 of type \.u64"):
        k.shfl_sync("idx", k.reg(t.u64), 0)
    with pytest.raises(OperandError, match=r"operand 'd': expected a register compatible with "
                       r"\.b32, got register %rs1 of type \.u16"):
        k.shfl_sync("idx", v, 0, dst=k.reg(t.u16))
    with pytest.raises(OperandError, match="operand 'p': expected a .pred register"):
        Shfl("idx", v, v, 0, 0x1F, -1, p=v)
    with pytest.raises(OperandError, match="operand 'membermask': expected a .b32 register or a "
                       "non-zero 32-bit mask"):
        k.shfl_sync("idx", v, 0, mask=0)


def test_vote_refusals():
    k = Kernel("w")
    p = k.reg(t.pred)
    with pytest.raises(OperandError, match="vote.sync: operand 'mode': expected one of 'all', "
                       "'any', 'uni', 'ballot', got str 'none'"):
        k.vote_sync("none", p)
    with pytest.raises(OperandError, match=r"vote\.sync\.all\.pred: operand 'a': expected a "
                       r"\.pred register, got register %r1 of type \.u32"):
        k.vote_sync("all", k.reg(t.u32))
    with pytest.raises(OperandError, match=r"vote\.sync\.ballot\.b32: operand 'd': expected a "
                       r"\.b32 register, got register %p\d of type \.pred"):
        Vote("ballot", k.reg(t.pred), p)
    with pytest.raises(OperandError, match=r"vote\.sync\.any\.pred: operand 'membermask'"):
        k.vote_sync("any", p, mask=1 << 32)


def test_elect_refusals():
    k = Kernel("w")
    with pytest.raises(OperandError, match=r"elect\.sync: operand 'p': expected a \.pred "
                       r"register, got register %r1 of type \.b32"):
        Elect(k.reg(t.b32))
    with pytest.raises(OperandError, match=r"elect\.sync: operand 'd': expected a register "
                       r"compatible with \.u32, got register %f1 of type \.f32"):
        Elect(k.reg(t.pred), k.reg(t.f32))
    with pytest.raises(OperandError, match="elect.sync: operand 'membermask'"):
        k.elect_sync(0)


def test_activemask_destination():
    k = Kernel("w")
    with pytest.raises(OperandError, match=r"activemask\.b32: operand 'd': expected a register "
                       r"compatible with \.b32, got register %rd1 of type \.u64"):
        k.activemask(dst=k.reg(t.u64))
