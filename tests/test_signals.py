"""ptxdsl.signals: signal_set / signal_wait / peer_pointer / barrier_all_ranks / lamport_wait
(goldens that assemble), the bounded wait's error record, and one refusal per class of
mistake."""

from __future__ import annotations

import struct

import pytest

from ptxdsl import BuildError, Kernel, Module, OperandError, debug, t
from ptxdsl.signals import barrier_all_ranks, lamport_wait, peer_pointer, signal_set, signal_wait
from ptxdsl.testing import assemble_declared


def _kernel(name="sig"):
    k = Kernel(name, maxntid=(128, 1, 1))
    flag = k.ld_param(k.param_ptr("flag"))
    return k, flag


def _at_call(e, call) -> bool:
    """The error names this file and the line of the case's call (where its lambda starts)."""
    return (e.value.loc.file, e.value.loc.line) == (__file__, call.__code__.co_firstlineno)


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


def test_lamport_wait_golden(golden):
    """Two slots, the second waited for only where `ok` holds: both loads in one pass, each
    vector done when no word is the empty one or (the second) when it is not waited for, the
    loop left when both are done."""
    k, flag = _kernel("lamport")
    ok = k.setp("lt", k.mov(k.tid.x, type=t.u32), 64, type=t.u32)
    got = lamport_wait(k, [flag, flag + 16], 0x80008000, ok=[k.setp("eq", 1, 1, type=t.u32),
                                                            ok])
    assert len(got) == 2 and all(len(v) == 4 for v in got)
    k.st(flag + 32, got[1], type=t.b32, space="global", sem="relaxed", scope="sys")
    golden(Module([k]), "signals/lamport_wait")


def test_bounded_lamport_wait_writes_the_record():
    k, flag = _kernel("bounded")
    debug.bounded_waits(k, timeout_ns=1000)
    lamport_wait(k, [flag, flag + 16], 7)
    text = debug.module([k]).emit()
    assemble_declared(text)
    for needed in ("%globaltimer", "trap;", "ld.relaxed.sys.global.v4.b32", "+56], 2;",
                   "+16], 7;"):                                  # compare 'ne', the empty word
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


def _smem(k):
    return k.shared_array(t.u32, 4, align=4, name="smem")


# (call, error class, the error's words): one refusal per class of mistake
SIGNAL_REFUSALS = [
    pytest.param(lambda k, flag: signal_set(k, _smem(k), 1), OperandError,
                 r"signal_set: operand 'addr': expected an address in global memory \(signal "
                 r"pads live there\), got an address in \.shared", id="shared_flag"),
    pytest.param(lambda k, flag: signal_wait(k, 0x1000, 1), OperandError,
                 r"signal_wait: operand 'addr': expected a global address \(a 64-bit pointer "
                 r"register, an Addr of one, or a \.global variable\), got int", id="int_flag"),
    pytest.param(lambda k, flag: signal_wait(k, flag, 1, cmp="lt"), OperandError,
                 r"signal_wait: operand 'cmp': expected one of 'eq', 'ne', 'ge', 'gt', got str "
                 r"'lt'", id="cmp"),
    pytest.param(lambda k, flag: signal_set(k, flag, 1, scope="cta"), OperandError,
                 r"signal_set: operand 'scope': expected one of 'gpu', 'sys', got .*cta",
                 id="scope"),
    pytest.param(lambda k, flag: signal_set(k, flag, 1, add="yes"), OperandError,
                 r"signal_set: operand 'add': expected True or False, got str 'yes'", id="add"),
    pytest.param(lambda k, flag: signal_wait(k, flag, k.reg(t.f32)), OperandError,
                 r"signal_wait: operand 'expected': expected", id="expected_f32"),
    pytest.param(lambda k, flag: signal_wait(k, flag, 1, timeout=debug.bounded_waits(
                     Kernel("o")), timeout_ns=5), BuildError,
                 r"signal_wait: give timeout=WaitTimeout\(\.\.\.\) or timeout_ns/timeout_cycles, "
                 r"not both", id="two_timeouts"),
    pytest.param(lambda k, flag: signal_wait(k, flag, 1, timeout_ns=-5), OperandError,
                 r"signal_wait: operand 'timeout': expected a positive integer below 2\^63, got "
                 r"-5", id="negative_timeout"),
    pytest.param(lambda k, flag: signal_set("k", flag, 1), BuildError,
                 r"signal_set: expected the Kernel to build in, got str", id="not_a_kernel"),
    pytest.param(lambda k, flag: lamport_wait(k, [], 0), OperandError,
                 r"lamport_wait: operand 'addrs': expected a non-empty list of addresses, got "
                 r"list", id="lamport_no_addrs"),
    pytest.param(lambda k, flag: lamport_wait(k, [flag, flag + 16], 0,
                                              ok=[k.setp("eq", 1, 1, type=t.u32)]),
                 OperandError, r"lamport_wait: operand 'ok': expected a list of 2 predicates",
                 id="lamport_ok_count"),
    pytest.param(lambda k, flag: lamport_wait(k, [flag], 0, ok=[k.reg(t.u32)]), OperandError,
                 r"lamport_wait: operand 'ok\[0\]': expected", id="lamport_ok_not_pred"),
    pytest.param(lambda k, flag: lamport_wait(k, [flag], k.reg(t.f64)), OperandError,
                 r"lamport_wait: operand 'empty': expected", id="lamport_empty_f64"),
    pytest.param(lambda k, flag: lamport_wait(k, [_smem(k)], 0), OperandError,
                 r"lamport_wait: operand 'addrs\[0\]': expected an address in global memory",
                 id="lamport_shared"),
    pytest.param(lambda k, flag: peer_pointer(k, flag, k.reg(t.u64)), OperandError,
                 r"peer_pointer: operand 'peer': expected a 32-bit integer register or an "
                 r"integer", id="peer_u64"),
]


@pytest.mark.parametrize("call, error, words", SIGNAL_REFUSALS)
def test_signal_refusals(call, error, words):
    k, flag = _kernel("bad")
    with pytest.raises(error, match=words) as e:
        call(k, flag)
    assert _at_call(e, call)
    assert not [s for s in k.body if "release" in s.render() or "acquire" in s.render()]


def _small(name="small"):
    return Kernel(name, reqntid=(4, 1, 1))


_WORLD = (r"barrier_all_ranks: operand 'world': expected an integer in 2\.\.8 \(the GPUs of one "
          r"host\)")
BARRIER_REFUSALS = [
    pytest.param(lambda k, pads: barrier_all_ranks(k, pads, 0, 9, 1), OperandError,
                 _WORLD + ", got int 9", id="world_9"),
    pytest.param(lambda k, pads: barrier_all_ranks(k, pads, 0, 1, 1), OperandError,
                 _WORLD + ", got int 1", id="world_1"),
    pytest.param(lambda k, pads: barrier_all_ranks(k, pads, 0, "4", 1), OperandError,
                 _WORLD + ", got str '4'", id="world_str"),
    pytest.param(lambda k, pads: barrier_all_ranks(k, pads, 0, k.reg(t.u32), 1), OperandError,
                 _WORLD + ", got register", id="world_register"),
    pytest.param(lambda k, pads: barrier_all_ranks(k, pads, 4, 4, 1), OperandError,
                 r"barrier_all_ranks: operand 'rank': expected an integer in \[0, 4\), got 4",
                 id="rank_4_of_4"),
    pytest.param(lambda k, pads: barrier_all_ranks(k, pads, 0, 4, 0), OperandError,
                 r"barrier_all_ranks: operand 'epoch': expected an integer >= 1 \(the pads "
                 r"start at 0", id="epoch_0"),
    pytest.param(lambda k, pads: barrier_all_ranks(k, pads, k.reg(t.f32), 2, 1), OperandError,
                 r"barrier_all_ranks: operand 'rank': expected a 32-bit integer register or an "
                 r"integer in \[0, 2\)", id="rank_f32"),
    pytest.param(lambda k, pads: barrier_all_ranks(k, [1, 2], 0, 2, 1), OperandError,
                 r"barrier_all_ranks: operand 'pads': expected a global address", id="pads_list"),
    pytest.param(lambda k, pads: barrier_all_ranks(s := _small(), s.param_ptr("pads"), 0, 8,
                                                   1), BuildError,
                 r"barrier_all_ranks: the kernel's CTA has at most 4 threads "
                 r"\(\.reqntid/\.maxntid \(4, 1, 1\)\), fewer than the 8 ranks",
                 id="cta_smaller_than_world"),
]


@pytest.mark.parametrize("call, error, words", BARRIER_REFUSALS)
def test_barrier_all_ranks_refusals(call, error, words):
    k, _ = _kernel("badbar")
    with pytest.raises(error, match=words) as e:
        call(k, k.param_ptr("pads"))
    assert _at_call(e, call)
    assert not [s for s in k.body if "bar.sync" in s.render()]


def test_a_block_whose_slots_pass_the_u32_index_is_refused():
    # block * world + rank is the .u32 slot index: 2^30 blocks of 4 ranks already wrap it
    k, flag = _kernel("blk")
    with pytest.raises(OperandError, match=r"barrier_all_ranks: operand 'block': expected an "
                       r"integer in \[0, 1073741824\)") as e:
        barrier_all_ranks(k, flag, 0, 4, 1, block=1 << 30)
    assert e.value.loc.file == __file__
    barrier_all_ranks(k, flag, 0, 4, 1, block=(1 << 30) - 1)     # the last one that fits


@pytest.mark.parametrize("call, message", [
    (lambda k, f: barrier_all_ranks(k, f, 0, 4, 1, timeout_ns="5"),
     "barrier_all_ranks: operand 'timeout'"),
    (lambda k, f: signal_wait(k, f, 1, timeout_ns=5, timeout_cycles=5),
     "signal_wait: give timeout_ns=... or timeout_cycles=..., not both"),
])
def test_a_bad_bound_names_the_helper_called(call, message):
    k, flag = _kernel("bound")
    with pytest.raises(BuildError, match=message) as e:
        call(k, flag)
    assert _at_call(e, call)


@pytest.mark.parametrize("space", ["shared", "const", "local"])
def test_a_pointer_parameter_to_another_space_is_refused(space):
    # cvta.to.global of a pointer into the shared window (or const, local) is another address
    k = Kernel("ptr_space")
    pad = k.param_ptr("pad", space=space)
    with pytest.raises(OperandError, match=f"signal_set: operand 'addr': expected a pointer to "
                       f".global memory, got pointer parameter pad declared .ptr .{space}") as e:
        signal_set(k, pad)
    assert e.value.loc.file == __file__
    signal_set(k, k.param_ptr("generic", space=None))       # no .ptr space: taken as global
