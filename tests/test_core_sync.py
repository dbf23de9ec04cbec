"""bar/barrier sync, arrive and red, bar.warp.sync: goldens and refusals."""

from __future__ import annotations

import pytest

from ptxdsl import Kernel, Module, OperandError, t
from ptxdsl.instructions.sync import Barrier, BarrierOp, WarpSync


def test_barriers_golden(golden):
    k = Kernel("barriers")
    n = k.ld_param(k.param(t.u32, "n"))
    p = k.tid.x < n
    k.bar_sync()                       # __syncthreads()
    k.bar_sync(1, 64)
    k.bar_sync(n)                      # barrier number from a register
    k.barrier_sync(2, n)               # thread count from a register
    k.barrier_sync(0, aligned=False)
    k.barrier_sync(15, 1024)
    k.bar_arrive(3, 128)
    k.barrier_arrive(4, 32)
    k.barrier_arrive(5, 96, aligned=False)
    k.bar_red("popc", p)
    k.bar_red("and", ~p, 6, 256)
    k.barrier_red("or", p, 7)
    k.barrier_red("popc", ~p, 8, 64, aligned=False)
    golden(Module([k]), "core/barrier")


def test_syncwarp_golden(golden):
    k = Kernel("syncwarp")
    mask = k.ld_param(k.param(t.u32, "mask"))
    k.syncwarp()                       # full mask, written -1 as nvcc does
    k.syncwarp(0x0000FFFF)
    k.syncwarp(0x80000000)
    k.syncwarp(mask)
    golden(Module([k]), "core/syncwarp")


def test_barrier_forms_need_only_the_floor():
    k = Kernel("b")
    k.barrier_sync(1, 64, aligned=False)
    k.syncwarp()
    m = Module([k])
    assert (str(m.version), str(m.target)) == ("6.3", "sm_75")


@pytest.mark.parametrize("bad", [16, -1, 1.0, "0", True])
def test_barrier_id_out_of_range(bad):
    k = Kernel("b")
    with pytest.raises(OperandError, match=r"bar\.sync: operand 'id': expected an integer "
                       r"immediate in \[0, 15\]") as e:
        k.bar_sync(bad)
    assert e.value.loc.file == __file__


@pytest.mark.parametrize("bad", [33, 0, 16, 1056, 2048])
def test_thread_count_must_be_whole_warps(bad):
    k = Kernel("b")
    with pytest.raises(OperandError, match=r"barrier\.sync\.aligned: operand 'count': expected "
                       r"(an integer immediate in \[32, 1024\]|a thread count that is a multiple "
                       r"of the warp size)"):
        k.barrier_sync(0, bad)


def test_barrier_register_operands_must_be_32_bit_integers():
    k = Kernel("b")
    r64 = k.reg(t.u64)
    with pytest.raises(OperandError, match="operand 'id': expected a register compatible with "
                       r"\.u32, got register %rd1 of type \.u64"):
        k.bar_sync(r64)
    with pytest.raises(OperandError, match="operand 'count'.*of type .f32"):
        k.bar_sync(0, k.reg(t.f32))


def test_arrive_needs_a_count():
    with pytest.raises(OperandError, match=r"bar\.arrive: operand 'count': expected a thread "
                       "count"):
        Barrier(BarrierOp.arrive, 0, None, short=True)


def test_bar_spelling_is_always_aligned():
    with pytest.raises(OperandError, match="bar.* is always .aligned"):
        Barrier("sync", 0, None, aligned=False, short=True)


def test_unknown_barrier_op():
    with pytest.raises(OperandError, match="barrier: operand 'op': expected one of 'sync', "
                       "'arrive', got str 'wait'"):
        Barrier("wait", 0)


def test_barrier_red_refusals():
    k = Kernel("b")
    p = k.reg(t.pred)
    with pytest.raises(OperandError, match="operand 'op': expected one of 'popc', 'and', 'or'"):
        k.bar_red("xor", p)
    with pytest.raises(OperandError, match=r"bar\.red\.popc\.u32: operand 'c': expected a "
                       r"\.pred register, got register %r1 of type \.u32"):
        k.bar_red("popc", k.reg(t.u32))
    with pytest.raises(OperandError, match=r"operand 'd': expected a register compatible "
                       r"with \.pred"):
        k.bar_red("and", p, dst=k.reg(t.u32))


@pytest.mark.parametrize("bad", [0, 1 << 32, -(1 << 31) - 1, 1.5, None])
def test_syncwarp_mask_refusals(bad):
    k = Kernel("b")
    with pytest.raises(OperandError, match=r"bar\.warp\.sync: operand 'membermask': expected a "
                       r"\.b32 register or a non-zero 32-bit mask"):
        k.syncwarp(bad)


def test_syncwarp_mask_register_width():
    with pytest.raises(OperandError, match="membermask.*of type .u64"):
        WarpSync(Kernel("b").reg(t.u64))
