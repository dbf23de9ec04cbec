"""Checker: the data-as-flag ("Lamport") protocol on symmetric memory, where no signal pad
is used: each rank stores its data into every peer's slot with a strong .sys store, and a
receiver polls its own slots until no word is the sentinel (-0.0, which no sender stores).
The clean one-shot (built, and written as PTX text) checks clean; a weak poll, a poll at
.gpu scope, a weak push with no signal and a read of another address after the poll are
reported for their rules, each at its line; a weak push followed by a signal (the pad
protocol) is not. A weak write (or a TMA store) needs a signal after it on every path: the
paths a thread-id branch, a loop over the peers or an early exit make are read as the
checker's other cross-GPU rules read them."""

from __future__ import annotations

import sys

import pytest

from ptxdsl import Addr, Kernel, Module, ptx, signals, t
from ptxdsl.checker import Hazard, check_kernel, check_module
from ptxdsl.frontend import parse_ptx
from ptxdsl.instructions.mbarrier_wait import WaitTimeout, spin
from tests.checker_kernels import PEER_TMA_CONTEXT, clean, here, ids, peer_tma

WEAK_POLL = Hazard.PEER_POLL_WEAK
UNPUBLISHED = Hazard.PEER_WRITE_UNPUBLISHED
UNSYNC = Hazard.PEER_READ_UNSYNCHRONIZED

WORLD = 4
THREADS = 128
SLOT = THREADS * 16            # bytes of one rank's slot in a buffer
SENTINEL = 0x80000000          # f32 -0.0
CONTEXT = {"peer_buffers": ["bufs"], "signal_pads": ["pads"]}
LINES: dict[str, int] = {}


def _mark(name: str) -> None:
    """Remember the caller's next line as `LINES[name]`."""
    LINES[name] = sys._getframe(1).f_lineno + 1


def lamport(variant: str = "ok") -> Kernel:
    """Rank r stores its THREADS x 16 bytes into slot r of every rank's buffer, then polls
    the WORLD slots of its own, resets each to the sentinel and sums them into `out`.

    Variants: "bounded" (the poll gives up and traps), "volatile" and "acquire" (the poll's
    order), "weak_poll" and "gpu_poll" (bugs), "weak_push" and "weak_reset" (plain stores,
    no signal: bugs), "read_same" (the slot read again after its poll), "read_other"
    (another slot read after one poll: a bug), "counted" (a loop that leaves on a count, not
    on the data: no poll)."""
    k = Kernel(f"lamport_{variant}", reqntid=THREADS)
    bufs = k.ld_param(k.param_ptr("bufs"))
    x = k.ld_param(k.param_ptr("x"))
    out = k.ld_param(k.param_ptr("out"))
    rank = k.ld_param(k.param(t.u32, "rank"))
    off = k.mul(k.mov(k.tid.x, type=t.u32), 16, type=t.u32, mode="wide")
    data = k.ld(Addr(k.add(x, off)), type=t.f32, vec=4, space="global")
    data = tuple(k.add(w, 0.0, type=t.f32) for w in data)     # -0.0 becomes +0.0
    mine = k.add(k.mul(rank, SLOT, type=t.u32, mode="wide"), off)
    sem, scope = ("relaxed", "sys") if variant != "weak_push" else (None, None)
    for q in range(WORLD):
        _mark(f"push{q}")
        k.st(Addr(k.add(signals.peer_pointer(k, bufs, q), mine)), data, type=t.f32,
             space="global", sem=sem, scope=scope)
    own = k.add(signals.peer_pointer(k, bufs, rank), off)
    sentinel = k.mov(SENTINEL, type=t.b32)
    acc = [k.mov(0.0, type=t.f32) for _ in range(4)]
    order = {"weak_poll": (None, None), "gpu_poll": ("relaxed", "gpu"),
             "volatile": ("volatile", None), "acquire": ("acquire", "sys")}
    sem, scope = order.get(variant, ("relaxed", "sys"))
    bound = WaitTimeout(ns=1 << 30) if variant == "bounded" else None
    for q in range(WORLD):
        slot = Addr(own, q * SLOT)
        words = tuple(k.reg(t.b32) for _ in range(4))
        tries = k.mov(0, type=t.u32) if variant == "counted" else None

        def poll(slot: Addr = slot, words: tuple = words, q: int = q,
                 tries: object = tries) -> object:
            _mark(f"poll{q}")
            k.ld(slot, type=t.b32, vec=4, space="global", sem=sem, scope=scope, dst=words)
            if variant == "counted":     # leaves on a count, whatever the data
                return k.setp("ge", k.add(tries, 1, dst=tries), 1000, type=t.u32)
            done = k.setp("ne", words[0], sentinel, type=t.b32)
            for w in words[1:]:
                done = k.and_(done, k.setp("ne", w, sentinel, type=t.b32), type=t.pred)
            return done

        spin(k, poll, bound, "lamport")
        if variant in ("read_same", "read_other") and q == 0:
            again = slot if variant == "read_same" else Addr(own, SLOT)
            _mark("again")
            words = k.ld(again, type=t.b32, vec=4, space="global")
        reset = ("relaxed", "sys") if variant != "weak_reset" else (None, None)
        _mark(f"reset{q}")
        k.st(slot, (sentinel,) * 4, type=t.b32, space="global", sem=reset[0], scope=reset[1])
        for i in range(4):
            k.add(acc[i], words[i], type=t.f32, dst=acc[i])
    k.st(Addr(k.add(out, off)), tuple(acc), type=t.f32, space="global")
    k.ret()
    return k


def _parsed(k: Kernel) -> list[str]:
    return ids(check_module(parse_ptx(Module([k]).emit()), **CONTEXT))


@pytest.mark.parametrize("variant", ["ok", "bounded", "volatile", "acquire", "read_same"])
def test_the_lamport_one_shot_checks_clean(variant):
    # A poll is its own wait: no signal pad, no peer-read-unsynchronized; its strong .sys
    # pushes need no signal after them.
    k = lamport(variant)
    clean(k, **CONTEXT)
    assert _parsed(k) == []


@pytest.mark.parametrize("variant, hazard, where, words", [
    ("weak_poll", WEAK_POLL, "poll0", "it is weak (no .sem): it may be served from L1"),
    ("gpu_poll", WEAK_POLL, "poll0", "it is .relaxed.gpu: a scope narrower than .sys"),
    ("weak_push", UNPUBLISHED, "push0", "this write into a peer buffer is weak (no .sem), and "
     "on some path from it to the kernel's end no signal-pad set follows"),
    ("weak_reset", UNPUBLISHED, "reset0", "this write into a peer buffer is weak (no .sem)"),
    ("read_other", UNSYNC, "again", "on some path to it no signal-pad wait has run"),
    ("counted", UNSYNC, "poll0", "on some path to it no signal-pad wait has run"),
])
def test_a_lamport_mistake_is_reported_at_its_line(variant, hazard, where, words):
    k = lamport(variant)
    found = check_kernel(k, **CONTEXT)
    assert ids(found) == [hazard.value] * len(found), [f.format() for f in found]
    first = min(found, key=lambda f: f.loc.line)
    assert (first.loc.file, first.loc.line) == (__file__, LINES[where]), first.format()
    assert words in first.message
    assert set(_parsed(k)) == {hazard.value}


def test_a_weak_push_followed_by_a_signal_is_the_pad_protocol():
    # Weak stores into the peers, then a .sys release on a pad: the existing publish
    # protocol, clean; without the signal the same stores are unpublished.
    def push(signal: bool) -> tuple[Kernel, int]:
        k = Kernel(f"push_{signal}", reqntid=THREADS)
        bufs = k.ld_param(k.param_ptr("bufs"))
        pads = k.ld_param(k.param_ptr("pads"))
        rank = k.ld_param(k.param(t.u32, "rank"))
        epoch = k.ld_param(k.param(t.u32, "epoch"))
        tid = k.mov(k.tid.x, type=t.u32)
        off = k.mul(tid, 4, type=t.u32, mode="wide")
        for q in range(WORLD):
            line = here() + 1
            k.st(Addr(k.add(signals.peer_pointer(k, bufs, q), off)), 1.0, type=t.f32,
                 space="global")
        k.bar_sync(0)
        if signal:
            with k.if_(tid < WORLD):
                pad = signals.peer_pointer(k, pads, tid)
                signals.signal_set(k, k.mad(rank, 4, pad, type=t.u32, mode="wide"), epoch)
        k.ret()
        return k, line

    clean(push(True)[0], **CONTEXT)
    k, line = push(False)
    (f,) = check_kernel(k, **CONTEXT)
    assert f.hazard is UNPUBLISHED and f.loc.line == line, f.format()


def _after(variant: str) -> tuple[Kernel, int]:
    """A weak write into a peer and a signal: "tid_branch" writes, bar.sync, then threads
    tid < WORLD signal; "loop" signals every peer in a loop over a run-time count after the
    write; "other_way" writes on the other way of the branch whose one way signals;
    "early_exit" may return between the write and the signal; "write_in_loop_after" writes
    in a loop over the peers after the only signal."""
    k = Kernel(f"after_{variant}", reqntid=THREADS)
    bufs = k.ld_param(k.param_ptr("bufs"))
    pads = k.ld_param(k.param_ptr("pads"))
    world = k.ld_param(k.param(t.u32, "world"))
    tid = k.mov(k.tid.x, type=t.u32)
    peer = signals.peer_pointer(k, bufs, 1)

    def signal(q: object) -> None:
        signals.signal_set(k, signals.peer_pointer(k, pads, q), 1)

    if variant not in ("other_way", "write_in_loop_after"):
        line = here() + 1
        k.st(Addr(peer), 1.0, type=t.f32, space="global")
    if variant == "tid_branch":
        k.bar_sync(0)
        with k.if_(tid < WORLD):
            signal(tid)
    elif variant == "loop":
        with k.for_range(0, world) as q:
            signal(q)
    elif variant == "other_way":
        with k.if_(tid < WORLD):
            signal(tid)
        with k.else_():
            line = here() + 1
            k.st(Addr(peer), 1.0, type=t.f32, space="global")
    elif variant == "early_exit":
        with k.if_(world == 0):
            k.ret()
        signal(tid)
    else:
        signal(tid)
        with k.for_range(0, world) as q:
            line = here() + 1
            k.st(Addr(signals.peer_pointer(k, bufs, q)), 1.0, type=t.f32, space="global")
    k.ret()
    return k, line


@pytest.mark.parametrize("variant, bug", [
    ("tid_branch", False), ("loop", False), ("other_way", True), ("early_exit", True),
    ("write_in_loop_after", True)])
def test_a_weak_write_needs_a_signal_after_it_on_every_path(variant, bug):
    # A signal some thread runs after a bar.sync covers the CTA's writes before it, and a
    # loop over the peers runs once; a signal the write's path skips does not.
    k, line = _after(variant)
    found = check_kernel(k, **CONTEXT)
    if not bug:
        assert [f.format() for f in found] == []
        return
    (f,) = found
    assert f.hazard is UNPUBLISHED and f.loc.line == line, f.format()


@pytest.mark.parametrize("signal", [False, True], ids=["no_signal", "signal"])
def test_a_tma_store_into_a_peer_needs_a_signal_after_it(signal):
    # A TMA store is weak: through a peer's map with no signal after it, it is unpublished.
    m, pad = peer_tma(f"tma_push_{signal}")
    k = m.k
    with k.if_(k.tid.x == 0):
        line = here() + 1
        ptx.cp_async_bulk_tensor(k, "global", "shared::cta", m.tmap, (0, 0), m.tile)
        ptx.cp_async_bulk_commit_group(k)
        ptx.cp_async_bulk_wait_group(k, 0)
        if signal:
            k.st(pad, 1, type=t.u32, space="global", sem="release", scope="sys")
    k.ret()
    if signal:
        clean(k, **PEER_TMA_CONTEXT)
        return
    (f,) = check_kernel(k, **PEER_TMA_CONTEXT)
    assert f.hazard is UNPUBLISHED and f.loc.line == line, f.format()
    assert "this write into a peer buffer is a TMA store (weak)" in f.message


# -- hand-written PTX: two ranks, bf16 data, the poll's exit through setp.or and vote --------
_PTX = """
.version 8.4
.target sm_90a
.address_size 64
.visible .entry lamport(.param .u64 bufs, .param .u64 x, .param .u64 out, .param .u32 rank)
.reqntid 128, 1, 1
{
  .reg .b32 %r<24>; .reg .b64 %rd<24>; .reg .pred %p<8>;
  ld.param.u64 %rd1, [bufs];
  ld.param.u64 %rd2, [x];
  ld.param.u64 %rd3, [out];
  ld.param.u32 %r1, [rank];
  mov.u32 %r2, %tid.x;
  mul.wide.u32 %rd4, %r2, 16;
  cvta.to.global.u64 %rd5, %rd1;
  add.s64 %rd6, %rd2, %rd4;
  ld.global.v4.b32 {%r3, %r4, %r5, %r6}, [%rd6];
  mul.wide.u32 %rd7, %r1, 2048;
  add.s64 %rd8, %rd7, %rd4;
  ld.global.u64 %rd9, [%rd5];
  add.s64 %rd10, %rd9, %rd8;
  PUSH [%rd10], {%r3, %r4, %r5, %r6};
  ld.global.u64 %rd11, [%rd5+8];
  add.s64 %rd12, %rd11, %rd8;
  PUSH [%rd12], {%r3, %r4, %r5, %r6};
  mul.wide.u32 %rd13, %r1, 8;
  add.s64 %rd14, %rd5, %rd13;
  ld.global.u64 %rd15, [%rd14];
  add.s64 %rd16, %rd15, %rd4;
  mov.b32 %r7, -2147450880;
$L__lamport_1:
  POLL {%r8, %r9, %r10, %r11}, [%rd16+2048];
  setp.eq.b32 %p1, %r8, %r7;
  setp.eq.or.b32 %p2, %r9, -2147450880, %p1;
  setp.eq.b32 %p3, %r10, -2147450880;
  or.pred %p4, %p2, %p3;
  setp.eq.or.b32 %p5, %r11, -2147450880, %p4;
  vote.sync.any.pred %p6, %p5, -1;
  @%p6 bra $L__lamport_1;
  st.relaxed.sys.global.v4.b32 [%rd16+2048], {%r7, %r7, %r7, %r7};
  add.s64 %rd17, %rd3, %rd4;
  st.global.v4.b32 [%rd17], {%r8, %r9, %r10, %r11};
  ret;
}
"""
_PUSH = "st.relaxed.sys.global.v4.b32"
_POLL = "ld.relaxed.sys.global.v4.b32"


@pytest.mark.parametrize("push, poll, want", [
    (_PUSH, _POLL, []),
    ("st.volatile.global.v4.b32", "ld.volatile.global.v4.b32", []),
    (_PUSH, "ld.global.v4.b32", [WEAK_POLL]),
    (_PUSH, "ld.acquire.gpu.global.v4.b32", [WEAK_POLL]),
    ("st.global.v4.b32", _POLL, [UNPUBLISHED]),
    ("st.relaxed.gpu.global.v4.b32", _POLL, [UNPUBLISHED]),
])
def test_hand_written_lamport_ptx(push, poll, want):
    text = _PTX.replace("PUSH", push).replace("POLL", poll)
    found = check_module(parse_ptx(text), **CONTEXT)
    assert ids(found) == sorted(h.value for h in want), [f.format() for f in found]
    for f in found:
        assert f.sites[0].ptx.startswith(poll if f.hazard is WEAK_POLL else push)
