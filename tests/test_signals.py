"""ptxdsl.signals: signal_set / signal_wait / peer_pointer / barrier_all_ranks (goldens that
assemble), the bounded wait's error record, and one refusal per class of mistake."""

from __future__ import annotations

import struct

import pytest

from ptxdsl import BuildError, Kernel, Module, OperandError, debug, t
from ptxdsl.signals import barrier_all_ranks, peer_pointer, signal_set, signal_wait
from ptxdsl.testing import assemble_declared


def _kernel(name="sig"):
    k = Kernel(name, maxntid=(128, 1, 1))
    flag = k.ld_param(k.param_ptr("flag"))
    return k, flag


def _at_call(e) -> bool:
    """The error names this file and the line of the test's call that raised it."""
    return (e.value.loc.file, e.value.loc.line) == (__file__, e.traceback[0].lineno + 1)


def test_signal_set_and_wait_golden(golden):
    k, flag = _kernel("signals")
    epoch = k.ld_param(k.param(t.u32, "epoch"))
    signal_set(k, flag, 1)
    signal_set(k, flag, epoch, add=True)                 # a counter: red.release.sys.add
    signal_set(k, flag + 4, 2, scope="gpu")
    signal_wait(k, flag, epoch)
    signal_wait(k, flag + 4, 2, cmp="eq", scope="gpu")
    golden(Module([k]), "signals/set_wait")


def test_barrier_all_ranks_golden(golden):
    k = Kernel("barrier", maxntid=(128, 1, 1))
    pads = k.param_ptr("pads")
    rank = k.ld_param(k.param(t.u32, "rank"))
    epoch = k.ld_param(k.param(t.u32, "epoch"))
    barrier_all_ranks(k, pads, rank, 4, epoch)           # run-time rank, %ctaid.x slots
    barrier_all_ranks(k, pads, 1, 2, 7, block=0)         # everything known: folded offsets
    golden(Module([k]), "signals/barrier_all_ranks")


def test_peer_pointer_reads_the_pointer_array():
    k = Kernel("peers")
    ptrs = k.param_ptr("ptrs")
    p = peer_pointer(k, ptrs, 3)
    q = peer_pointer(k, ptrs, k.ld_param(k.param(t.u32, "peer")))
    k.st(p, 1, type=t.u32, space="global")
    k.st(q, 1, type=t.u32, space="global")
    text = Module([k]).emit()
    assert "ld.global.u64 %rd3, [%rd2+24];" in text            # ptrs[3]
    assert "mad.wide.u32 %rd6, %r1, 8, %rd5;" in text           # &ptrs[peer]
    assemble_declared(text)


@pytest.mark.parametrize("build", [
    lambda k, flag: signal_wait(k, flag, 1),
    lambda k, flag: barrier_all_ranks(k, k.param_ptr("pads"), 0, 8, 1, block=2),
])
def test_bounded_signal_waits_write_the_record_and_trap(build):
    k, flag = _kernel("bounded")
    debug.bounded_waits(k, timeout_ns=1000)
    build(k, flag)
    text = debug.module([k]).emit()
    assemble_declared(text)
    for needed in ("%globaltimer", "trap;", "ptxdsl_dbg_record", "membar.sys;",
                   "+56], 3;", "+20], 3;"):
        assert needed in text, needed


def test_a_signal_record_names_the_wait():
    raw = struct.pack("<IIQII3I3IQII", debug.MAGIC, debug.kernel_id("allreduce"), 0x7F00_0040,
                      5, 3, 1, 0, 0, 2, 0, 0, 1234, debug.COMPARE_CODES["ge"], 4)
    rec = debug.ErrorRecord.parse(raw, ["allreduce"])
    assert rec is not None and (rec.compare, rec.seen, rec.parity, rec.space) == (
        "ge", 4, 5, "global")
    assert str(rec) == ("kernel 'allreduce' gave up waiting on the signal at 0x7f000040 "
                        "(global) for a value ge 5 (last read 4): block (1, 0, 0), thread "
                        "(2, 0, 0)")


def test_signal_refusals():
    k, flag = _kernel("bad")
    smem = k.shared_array(t.u32, 4, align=4, name="smem")
    with pytest.raises(OperandError, match=r"signal_set: operand 'addr': expected an address "
                       r"in global memory \(signal pads live there\), got an address in "
                       r"\.shared") as e:
        signal_set(k, smem, 1)
    assert _at_call(e)
    with pytest.raises(OperandError, match=r"signal_wait: operand 'addr': expected a global "
                       r"address \(a 64-bit pointer register, an Addr of one, or a \.global "
                       r"variable\), got int"):
        signal_wait(k, 0x1000, 1)
    with pytest.raises(OperandError, match=r"signal_wait: operand 'cmp': expected one of 'eq', "
                       r"'ne', 'ge', 'gt', got str 'lt'"):
        signal_wait(k, flag, 1, cmp="lt")
    with pytest.raises(OperandError, match=r"signal_set: operand 'scope': expected one of "
                       r"'gpu', 'sys', got .*cta"):
        signal_set(k, flag, 1, scope="cta")
    with pytest.raises(OperandError, match=r"signal_set: operand 'add': expected True or "
                       r"False, got str 'yes'"):
        signal_set(k, flag, 1, add="yes")
    with pytest.raises(OperandError, match=r"signal_wait: operand 'expected': expected"):
        signal_wait(k, flag, k.reg(t.f32))
    with pytest.raises(BuildError, match=r"signal_wait: give timeout=WaitTimeout\(\.\.\.\) or "
                       r"timeout_ns/timeout_cycles, not both"):
        signal_wait(k, flag, 1, timeout=debug.bounded_waits(Kernel("o")), timeout_ns=5)
    with pytest.raises(OperandError, match=r"signal_wait: operand 'timeout': expected a "
                       r"positive integer below 2\^63, got -5"):
        signal_wait(k, flag, 1, timeout_ns=-5)
    with pytest.raises(BuildError, match=r"signal_set: expected the Kernel to build in, got "
                       r"str"):
        signal_set("k", flag, 1)
    with pytest.raises(OperandError, match=r"peer_pointer: operand 'peer': expected a 32-bit "
                       r"integer register or an integer"):
        peer_pointer(k, flag, k.reg(t.u64))
    assert not [s for s in k.body if "release" in s.render() or "acquire" in s.render()]


def test_barrier_all_ranks_refusals():
    k, _ = _kernel("badbar")
    pads = k.param_ptr("pads")
    with pytest.raises(OperandError, match=r"barrier_all_ranks: operand 'world': expected an "
                       r"integer in 2\.\.8 \(the GPUs of one host\), got int 9") as e:
        barrier_all_ranks(k, pads, 0, 9, 1)
    assert _at_call(e)
    for world in (1, "4", k.reg(t.u32)):
        with pytest.raises(OperandError, match=r"operand 'world': expected an integer in 2\.\.8"):
            barrier_all_ranks(k, pads, 0, world, 1)
    with pytest.raises(OperandError, match=r"barrier_all_ranks: operand 'rank': expected an "
                       r"integer in \[0, 4\), got 4"):
        barrier_all_ranks(k, pads, 4, 4, 1)
    with pytest.raises(OperandError, match=r"barrier_all_ranks: operand 'epoch': expected an "
                       r"integer >= 1 \(the pads start at 0"):
        barrier_all_ranks(k, pads, 0, 4, 0)
    with pytest.raises(OperandError, match=r"barrier_all_ranks: operand 'rank': expected a "
                       r"32-bit integer register or an integer in \[0, 2\)"):
        barrier_all_ranks(k, pads, k.reg(t.f32), 2, 1)
    with pytest.raises(OperandError, match=r"barrier_all_ranks: operand 'pads': expected a "
                       r"global address"):
        barrier_all_ranks(k, [1, 2], 0, 2, 1)
    small = Kernel("small", reqntid=(4, 1, 1))
    with pytest.raises(BuildError, match=r"barrier_all_ranks: the kernel's CTA has at most 4 "
                       r"threads \(\.reqntid/\.maxntid \(4, 1, 1\)\), fewer than the 8 ranks"):
        barrier_all_ranks(small, small.param_ptr("pads"), 0, 8, 1)
    assert not [s for s in k.body if "bar.sync" in s.render()]
