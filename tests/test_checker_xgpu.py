"""Checker: the cross-GPU signal protocol on symmetric memory (issue 33). A one-shot and a
two-shot all-reduce (tests/xgpu_kernels.py) check clean, as do the other correct idioms
(a relaxed signal after fence.acq_rel.sys, a volatile spin followed by one, red.add counters
compared with >=, torch's CAS handshake, a constant flag reset and followed by an epoch
round); each broken variant is reported with its hazard, from the built kernel and from its
parsed PTX. Hand-written PTX (one pointer per rank, a vector `red` the builders lack) is
checked for each rule too."""

from __future__ import annotations

import pytest

from ptxdsl import Kernel, Module, ptx, t
from ptxdsl.checker import Hazard, check_kernel, check_module
from ptxdsl.errors import PtxdslError
from ptxdsl.frontend import parse_ptx
from tests import xgpu_kernels as xk
from tests.checker_kernels import PEER_TMA_CONTEXT, clean, here, ids, only, peer_tma

PUBLISH = Hazard.PEER_PUBLISH_NO_SYS_RELEASE
CONSUME = Hazard.PEER_CONSUME_NO_SYS_ACQUIRE
REUSE = Hazard.SIGNAL_PAD_REUSE
UNSET = Hazard.SIGNAL_WAIT_UNSET
UNSYNC = Hazard.PEER_READ_UNSYNCHRONIZED
UNPUB = Hazard.PEER_WRITE_UNPUBLISHED

CLEAN = ["ok", "fence_relaxed", "counter", "cas_handshake", "two_phase", "volatile_fence",
         "ok_bounded", "two_phase_bounded"]
# variant -> (hazards, the statement the first finding names)
BUGGY = {
    "release_gpu": ([PUBLISH], "signal"),          # the classic: a .gpu release
    "relaxed_nofence": ([PUBLISH], "signal"),
    "fence_gpu": ([PUBLISH], "signal"),            # the fence, too, must be .sys
    "fence_weak_store": ([PUBLISH], "signal"),     # a fence needs a strong signal after it
    "red_plain": ([PUBLISH], "signal"),            # red without .sem is .relaxed.gpu
    "volatile_nofence": ([PUBLISH, CONSUME], "signal"),
    "acquire_gpu": ([CONSUME], "sum0"),
    "weak_spin_fence": ([CONSUME], "sum0"),        # a weak load synchronizes with nothing
    "const_flag": ([REUSE], "wait"),               # 1 every launch, never reset
    "reset_no_round": ([REUSE], "wait"),           # reset, but the next set may come first
    "set_after_wait": ([UNSET], "wait"),
    # (the ranks or threads that skip the set leave their weak copies unannounced too)
    "rank_guarded_set": ([UNSET, UNPUB], "wait"),
    "data_guarded_set": ([UNSET, UNPUB], "wait"),
    "no_wait": ([UNSYNC], "sum0"),                 # signals, never waits: reads at once
    "rank_guarded_wait": ([UNSYNC], "sum0"),       # only rank 0 waits
}


def _check(k, **context):
    return check_kernel(k, **(context or xk.CONTEXT))


def _parsed_ids(k) -> list[str]:
    return ids(check_module(parse_ptx(Module([k]).emit()), **xk.CONTEXT))


@pytest.mark.parametrize("variant", CLEAN)
def test_one_shot_idioms_check_clean(variant):
    k = xk.one_shot(variant)
    clean(k, **xk.CONTEXT)
    assert _parsed_ids(k) == []


def test_two_shot_checks_clean():
    k = xk.two_shot()
    clean(k, **xk.CONTEXT)
    assert _parsed_ids(k) == []


@pytest.mark.parametrize("variant", sorted(BUGGY))
def test_one_shot_variant_is_reported(variant):
    hazards, where = BUGGY[variant]
    k = xk.one_shot(variant)
    found = _check(k)
    assert ids(found) == sorted(h.value for h in hazards), [f.format() for f in found]
    first = min(found, key=lambda f: f.loc.line if f.hazard is hazards[0] else 10**9)
    assert first.loc.file == xk.__file__ and first.loc.line == xk.LINES[where], first.format()
    assert _parsed_ids(k) == ids(found)


@pytest.mark.parametrize("variant, hazards", [
    ("acquire_gpu", [CONSUME]), ("const_flag", [REUSE]), ("fence_gpu", [PUBLISH]),
    # the first barrier's signals (slots 0..WORLD-1) do not satisfy the second's wait, and
    # the sums written before it go unannounced on the ranks that skip the set
    ("rank_guarded_set", [UNSET, UNPUB])])
def test_two_shot_second_barrier_variant_is_reported(variant, hazards):
    k = xk.two_shot(variant)
    found = _check(k)
    assert ids(found) == sorted(h.value for h in hazards), [f.format() for f in found]
    assert _parsed_ids(k) == ids(found)


def test_two_shot_second_barrier_at_gpu_scope_is_reported():
    found = _check(xk.two_shot("release_gpu"))
    assert ids(found) == [PUBLISH.value], [f.format() for f in found]
    assert "the signal is .release.gpu" in found[0].message
    assert [s.role for s in found[0].sites] == ["signal", "write"]


@pytest.mark.parametrize("variant", ["ok", "guards"])
def test_loops_over_a_run_time_world_check_clean(variant):
    # A loop over the peers is taken to run at least once; `tid < world` guards the signal
    # and, in a second if, the wait: the same condition.
    k = xk.loops(variant)
    clean(k, **xk.CONTEXT)
    assert _parsed_ids(k) == []


@pytest.mark.parametrize("variant, bug", [
    ("wait_each", False), ("memo", False),
    ("read_then_wait", True),     # the loop's first iteration reads before any wait
    ("memo_other", True)])        # a data-dependent guard the wait does not update
def test_a_peer_read_must_follow_a_wait_on_every_path(variant, bug):
    k = xk.loops(variant)
    found = _check(k)
    if not bug:
        assert [f.format() for f in found] == []
        return
    assert ids(found) == [UNSYNC.value], [f.format() for f in found]
    (f,) = found
    assert (f.loc.file, f.loc.line) == (xk.__file__, xk.LINES[f"read_{variant}"])
    assert "on some path to it no signal-pad wait has run" in f.message
    assert _parsed_ids(k) == [UNSYNC.value]


def test_signalling_only_after_the_waits_is_reported():
    found = _check(xk.loops("late_signal"))
    assert ids(found) == [UNSET.value], [f.format() for f in found]
    assert found[0].loc.line == xk.LINES["wait_late_signal"]


def test_messages_say_what_is_wrong():
    (f,) = _check(xk.one_shot("weak_spin_fence"))
    assert "the flag load is weak (no .sem), which no fence can make an acquire" in f.message
    (f,) = _check(xk.one_shot("const_flag"))
    assert "compares the flag with the constant 1 and nothing resets the slot" in f.message
    (f,) = _check(xk.one_shot("reset_no_round"))
    assert "no further round of signals follows" in f.message
    assert f.sites[1].loc.line == xk.LINES["reset"]


def test_without_context_the_protocol_is_not_checked():
    # Which pointers are peer buffers or pads is the caller's to say.
    assert check_kernel(xk.one_shot("release_gpu")) == []
    k = xk.one_shot("release_gpu")
    assert check_kernel(k, peer_buffers={"other": ["buffer_ptrs"]},
                        signal_pads={"other": ["signal_pad_ptrs"]}) == []
    found = check_kernel(k, peer_buffers={k.name: ["buffer_ptrs"]},
                         signal_pads={k.name: "signal_pad_ptrs"})
    assert ids(found) == [PUBLISH.value]


def test_module_context_takes_the_protocol_parameters():
    k = xk.one_shot("acquire_gpu")
    mod = Module([k], check=dict(xk.CONTEXT))
    assert ids(mod.check()) == [CONSUME.value]


@pytest.mark.parametrize("value, words", [
    (5, r"operand 'signal_pads': expected a parameter's name, a list of names, or a dict "
        r"from a kernel's name to such a list, got int 5"),
    ([3], r"operand 'signal_pads': expected parameter names \(or Param objects\), got int 3"),
])
def test_bad_protocol_context_is_refused(value, words):
    with pytest.raises(PtxdslError, match=words) as ei:
        line = here() + 1
        check_kernel(Kernel("k"), signal_pads=value)
    assert (ei.value.loc.file, ei.value.loc.line) == (__file__, line)


# -- hand-written PTX: one pointer per rank (two ranks), thread 0 signals and waits -------------
_PTX = """
.version 8.4
.target sm_90a
.address_size 64
.visible .entry xchg(.param .u64 peer_buf, .param .u64 own_buf, .param .u64 peer_pad,
                     .param .u64 own_pad, .param .u64 out, .param .u32 rank, .param .u32 epoch)
.reqntid 128, 1, 1
{
  .reg .b32 %r<16>; .reg .b64 %rd<24>; .reg .pred %p<4>; .reg .f32 %f<8>;
  ld.param.u64 %rd1, [peer_buf];
  ld.param.u64 %rd2, [own_buf];
  ld.param.u64 %rd3, [peer_pad];
  ld.param.u64 %rd4, [own_pad];
  ld.param.u64 %rd5, [out];
  ld.param.u32 %r1, [rank];
  ld.param.u32 %r2, [epoch];
  mov.u32 %r3, %tid.x;
  cvta.to.global.u64 %rd6, %rd1;
  mul.wide.u32 %rd7, %r3, 16;
  add.s64 %rd8, %rd6, %rd7;
  mov.f32 %f1, 0f3F800000;
  red.global.add.v4.f32 [%rd8], {%f1, %f1, %f1, %f1};
  bar.sync 0;
  setp.ne.s32 %p1, %r3, 0;
  @%p1 bra $L_join;
  cvta.to.global.u64 %rd9, %rd3;
  setp.eq.u32 %p3, %r1, 0;
  SIGNAL
  cvta.to.global.u64 %rd10, %rd4;
$L_spin:
  WAIT
  @%p2 bra $L_spin;
  AFTER
$L_join:
  bar.sync 0;
  cvta.to.global.u64 %rd11, %rd2;
  add.s64 %rd12, %rd11, %rd7;
  ld.global.v4.f32 {%f2, %f3, %f4, %f5}, [%rd12];
  add.f32 %f6, %f2, %f3;
  cvta.to.global.u64 %rd13, %rd5;
  mul.wide.u32 %rd14, %r3, 4;
  add.s64 %rd15, %rd13, %rd14;
  st.global.f32 [%rd15], %f6;
  ret;
}
"""
_PTX_CONTEXT = {"peer_buffers": ["peer_buf", "own_buf"], "signal_pads": ["peer_pad", "own_pad"]}
_SIGNAL = "red.release.sys.global.add.u32 [%rd9], 1;"
_WAIT = "ld.acquire.sys.global.u32 %r4, [%rd10];\n  setp.lt.u32 %p2, %r4, %r2;"
# rule -> (buggy replacements, clean replacements)
_PTX_CASES = {
    PUBLISH: ({"SIGNAL": "red.global.add.u32 [%rd9], 1;"},
              {"SIGNAL": "red.relaxed.sys.global.add.u32 [%rd9], 1;",
               "AFTER": "", "bar.sync 0;\n  setp.ne": "fence.sc.sys;\n  bar.sync 0;\n"
               "  setp.ne"}),
    CONSUME: ({"WAIT": _WAIT.replace("ld.acquire.sys", "ld.volatile")},
              {"WAIT": _WAIT.replace("ld.acquire.sys", "ld.volatile"),
               "AFTER": "fence.acq_rel.sys;"}),
    REUSE: ({"SIGNAL": "st.release.sys.global.u32 [%rd9], 1;",
             "WAIT": _WAIT.replace("setp.lt.u32 %p2, %r4, %r2", "setp.ne.u32 %p2, %r4, 1")},
            {"SIGNAL": "st.release.sys.global.u32 [%rd9], %r2;",
             "WAIT": _WAIT.replace("setp.lt.u32", "setp.ne.u32")}),
    UNSET: ({"SIGNAL": "@%p3 " + _SIGNAL}, {"SIGNAL": _SIGNAL}),
    UNSYNC: ({"WAIT": "setp.eq.u32 %p2, %r1, 7;"}, {}),       # a loop, but on no flag
}
# rule -> what its buggy variant is reported for besides (a rank-guarded signal leaves the
# other ranks' .gpu red into the peer unannounced)
_PTX_ALSO = {UNSET: [UNPUB]}


def _ptx(replace: dict) -> str:
    text = _PTX
    for key, value in {"SIGNAL": _SIGNAL, "WAIT": _WAIT, "AFTER": "", **replace}.items():
        text = text.replace(key, value, 1) if key not in ("SIGNAL", "WAIT", "AFTER") else \
            text.replace(f"  {key}\n", f"  {value}\n")
    return text


@pytest.mark.parametrize("hazard", list(_PTX_CASES), ids=lambda h: h.value)
def test_hand_written_ptx_bug_and_clean_twin(hazard):
    buggy, fixed = _PTX_CASES[hazard]
    found = check_module(parse_ptx(_ptx(buggy)), **_PTX_CONTEXT)
    want = sorted(h.value for h in [hazard, *_PTX_ALSO.get(hazard, [])])
    assert ids(found) == want, [f.format() for f in found]
    assert [f.format() for f in check_module(parse_ptx(_ptx(fixed)), **_PTX_CONTEXT)] == []


def test_hand_written_ptx_vector_red_is_a_peer_write():
    # The vector red is kept as text by the front end: it still counts as a write whose
    # publication a .gpu release does not cover.
    text = _ptx({"SIGNAL": "st.release.gpu.global.u32 [%rd9], %r2;"})
    (f,) = check_module(parse_ptx(text), **_PTX_CONTEXT)
    assert f.hazard is PUBLISH and f.sites[1].ptx.startswith("red.global.add.v4.f32")


def test_pointer_loaded_from_a_plain_parameter_is_not_a_peer_buffer():
    k = Kernel("k", reqntid=32)
    table = k.ld_param(k.param_ptr("table"))
    p = k.ld(table, type=t.u64, space="global")
    k.st(p, 1.0, type=t.f32, space="global")
    pad = k.ld_param(k.param_ptr("pad"))
    k.st(pad, 1, type=t.u32, space="global", sem="release", scope="gpu")
    k.ret()
    assert check_kernel(k, signal_pads=["pad"], peer_buffers=["bufs"]) == []
    assert ids(check_kernel(k, signal_pads=["pad"], peer_buffers=["table"])) == [PUBLISH.value]


def _tma_into_peers(wait, each: bool) -> tuple[Kernel, int]:
    """Thread 0 stores a tile through a map of the peer's buffer (`each`: into every peer,
    one register picked per peer from an array of maps, `mov p, maps` before the loop and
    `mad.wide p, peer, 128, maps` in it: two writes, no single value), waits with `wait`,
    then signals (.release.sys)."""
    m, pad = peer_tma("tma_each_peer" if each else "tma_peer")
    k = m.k
    with k.if_(k.tid.x == 0):
        if each:
            tmap = k.mov(m.tmap)
            with k.for_range(0, 4) as peer:
                k.mad(peer, 128, m.tmap, type=t.u32, mode="wide", dst=tmap)
                ptx.cp_async_bulk_tensor(k, "global", "shared::cta", tmap, (0, 0), m.tile)
                ptx.cp_async_bulk_commit_group(k)
        else:
            ptx.cp_async_bulk_tensor(k, "global", "shared::cta", m.tmap, (0, 0), m.tile)
            ptx.cp_async_bulk_commit_group(k)
        wait(k, 0)
        line = here() + 1
        k.st(pad, 1, type=t.u32, space="global", sem="release", scope="sys")
    k.ret()
    return k, line


@pytest.mark.parametrize("each", [False, True], ids=["one_peer", "map_picked_per_peer"])
def test_tma_store_into_a_peer_must_complete_before_the_signal(each):
    # a map register picked per peer in a loop is a peer write as a map parameter is
    k, line = _tma_into_peers(ptx.cp_async_bulk_wait_group_read, each)
    f = only(check_kernel(k, **PEER_TMA_CONTEXT), PUBLISH, line)
    assert "TMA store into the peer's buffer may still be in flight" in f.message
    clean(_tma_into_peers(ptx.cp_async_bulk_wait_group, each)[0], **PEER_TMA_CONTEXT)


@pytest.mark.parametrize("fence, bug", [
    ("fence.sc.sys;", False), ("membar.sys;", False), ("fence.acq_rel.sys;", False),
    ("fence.release.sys;", False), ("fence.acquire.sys;", True), ("fence.acq_rel.gpu;", True),
    ("membar.gl;", True)])
def test_a_fence_before_a_relaxed_signal_must_release_at_sys(fence, bug):
    text = _ptx({"SIGNAL": "red.relaxed.sys.global.add.u32 [%rd9], 1;",
                 "bar.sync 0;\n  setp.ne": f"{fence}\n  bar.sync 0;\n  setp.ne"})
    found = check_module(parse_ptx(text), **_PTX_CONTEXT)
    assert ids(found) == ([PUBLISH.value] if bug else []), [f.format() for f in found]


@pytest.mark.parametrize("fence, bug", [
    ("fence.sc.sys;", False), ("membar.sys;", False), ("fence.acquire.sys;", False),
    ("fence.release.sys;", True), ("fence.acq_rel.gpu;", True)])
def test_a_fence_after_a_volatile_spin_must_acquire_at_sys(fence, bug):
    text = _ptx({"WAIT": _WAIT.replace("ld.acquire.sys", "ld.volatile"), "AFTER": fence})
    found = check_module(parse_ptx(text), **_PTX_CONTEXT)
    assert ids(found) == ([CONSUME.value] if bug else []), [f.format() for f in found]


def test_every_signal_after_the_writes_must_release():
    # The release to peer 0 orders nothing for the relaxed signal to peer 1 after it.
    s = xk.Sym("two_signals")
    k = s.k
    x = k.ld(s.at(s.inp, s.tid), type=t.f32, space="global")
    for p in range(2):
        k.st(s.at(s.ptr(s.bufs, p), s.tid), x, type=t.f32, space="global")
    k.bar_sync(0)
    with k.if_(s.tid == 0):
        k.st(s.ptr(s.pads, 0), s.epoch, type=t.u32, space="global", sem="release", scope="sys")
        line = here() + 1
        k.st(s.ptr(s.pads, 1), s.epoch, type=t.u32, space="global", sem="relaxed", scope="sys")
    k.ret()
    only(_check(k), PUBLISH, line)
