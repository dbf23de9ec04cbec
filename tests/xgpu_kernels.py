"""Cross-GPU kernels on symmetric memory for the checker's tests (tests/test_checker_xgpu.py):
a one-shot and a two-shot all-reduce over WORLD ranks and their broken variants; their
findings name the statements `LINES` marks (lines of this file).

Buffers and pads arrive as device arrays of per-rank pointers (torch's `buffer_ptrs_dev`,
`signal_pad_ptrs_dev`); `CONTEXT` names them for the checker. Thread p < WORLD signals rank
p and waits for rank p's signal; the signal carries the launch's epoch (a parameter)."""

from __future__ import annotations

import sys

from ptxdsl import Kernel, ptx, t

WORLD = 4
THREADS = 128
CONTEXT = {"peer_buffers": ["buffer_ptrs"], "signal_pads": ["signal_pad_ptrs"]}
LINES: dict[str, int] = {}
# Variants whose flag is the constant 1 (no epoch): "two_phase" resets it and runs a second,
# epoch-numbered round after it.
_CONSTANT = ("const_flag", "reset_no_round", "two_phase")


def _mark(name: str) -> None:
    """Remember the caller's next line as `LINES[name]`."""
    LINES[name] = sys._getframe(1).f_lineno + 1


class Sym:
    """A kernel's parameters and the per-rank pointers it loads from the arrays."""

    def __init__(self, name: str):
        self.k = k = Kernel(name, reqntid=THREADS)
        self.bufs = k.ld_param(k.param_ptr("buffer_ptrs"))
        self.pads = k.ld_param(k.param_ptr("signal_pad_ptrs"))
        self.inp = k.ld_param(k.param_ptr("input"))
        self.out = k.ld_param(k.param_ptr("output"))
        self.rank = k.ld_param(k.param(t.u32, "rank"))
        self.epoch = k.ld_param(k.param(t.u32, "epoch"))
        self.tid = k.mov(k.tid.x, type=t.u32)

    def ptr(self, array, index):
        """`array[index]`: the pointer of one rank (`mad.wide.u32 row, index, 8, array;
        ld.global.u64 p, [row]`)."""
        k = self.k
        row = k.add(array, 8 * index) if isinstance(index, int) else \
            k.mad(index, 8, array, mode="wide")      # as torch's kernels index the array
        return k.ld(row, type=t.u64, space="global")

    def at(self, base, index):
        """The address of 32-bit element `index` of a buffer."""
        k = self.k
        off = 4 * index if isinstance(index, int) else k.mul(index, 4, mode="wide")
        return k.add(base, off)


def _signal(s: Sym, variant: str, slot_base: int) -> None:
    """Thread p (< WORLD) sets rank p's flag for this rank (slot slot_base + rank)."""
    k = s.k
    pad = s.ptr(s.pads, s.tid)
    flag = s.at(pad, k.add(s.rank, slot_base))
    value = 1 if variant in _CONSTANT else s.epoch
    if variant == "release_gpu":
        _mark("signal")
        k.st(flag, value, type=t.u32, space="global", sem="release", scope="gpu")
    elif variant == "relaxed_nofence":
        _mark("signal")
        k.st(flag, value, type=t.u32, space="global", sem="relaxed", scope="sys")
    elif variant == "volatile_nofence":
        _mark("signal")
        k.st(flag, value, type=t.u32, space="global", sem="volatile")
    elif variant == "fence_gpu":
        ptx.fence(k, "acq_rel", "gpu")
        _mark("signal")
        k.st(flag, value, type=t.u32, space="global", sem="relaxed", scope="sys")
    elif variant == "fence_weak_store":
        ptx.fence(k, "acq_rel", "sys")
        _mark("signal")
        k.st(flag, value, type=t.u32, space="global")
    elif variant == "fence_relaxed":
        ptx.fence(k, "acq_rel", "sys")
        k.st(flag, value, type=t.u32, space="global", sem="relaxed", scope="sys")
    elif variant in ("counter", "red_plain"):
        # one counter per rank: every peer adds 1, the owner waits for epoch * WORLD
        own_slot = s.at(pad, slot_base)
        if variant == "red_plain":
            _mark("signal")
            k.red("add", own_slot, 1, type=t.u32, space="global")
        else:
            k.red("add", own_slot, 1, type=t.u32, space="global", sem="release", scope="sys")
    elif variant == "cas_handshake":
        # torch's put_signal: wait until the peer consumed the last signal, then set it
        with k.loop():
            old = k.atom_cas(flag, 0, 1, type=t.b32, space="global", sem="release",
                             scope="sys")
            k.break_(k.setp("eq", old, 0))
    else:
        _mark("signal")
        k.st(flag, value, type=t.u32, space="global", sem="release", scope="sys")


def _wait(s: Sym, variant: str, slot_base: int, bounded: bool = False) -> None:
    """Thread p (< WORLD) waits for rank p's flag in this rank's pad."""
    k = s.k
    pad = s.ptr(s.pads, s.rank)
    flag = s.at(pad, k.add(s.tid, slot_base))
    if variant == "cas_handshake":
        # torch's wait_signal: swap the flag back to 0 once the peer set it
        with k.loop():
            old = k.atom_cas(flag, 1, 0, type=t.b32, space="global", sem="acquire",
                             scope="sys")
            k.break_(k.setp("eq", old, 1))
        return
    if variant in ("counter", "red_plain"):
        flag = s.at(pad, slot_base)
    sem, scope = {"acquire_gpu": ("acquire", "gpu"), "volatile_nofence": ("volatile", None),
                  "volatile_fence": ("volatile", None), "weak_spin_fence": (None, None)
                  }.get(variant, ("acquire", "sys"))
    target = 1 if variant in _CONSTANT else s.epoch
    if variant in ("counter", "red_plain"):
        target = k.mul(s.epoch, WORLD)
    tries = k.mov(0, type=t.u32) if bounded else None
    with k.loop():
        _mark("wait")
        got = k.ld(flag, type=t.u32, space="global", sem=sem, scope=scope)
        k.break_(k.setp("ge" if variant in ("counter", "red_plain") else "eq", got, target))
        if tries is not None:     # a bounded wait (as debug.bounded_waits builds): trap
            k.add(tries, 1, dst=tries)
            with k.if_(tries > 1 << 20):
                k.trap()
    if variant in ("volatile_fence", "weak_spin_fence"):
        ptx.fence(k, "acq_rel", "sys")
    if variant in ("reset_no_round", "two_phase"):
        _mark("reset")
        k.st(flag, 0, type=t.u32, space="global", sem="relaxed", scope="sys")


def _barrier(s: Sym, variant: str, slot_base: int = 0) -> None:
    """bar.sync; threads < WORLD signal then wait (each its peer); bar.sync. A variant
    ending in "_bounded" gives up (traps) after a bounded number of polls."""
    k = s.k
    bounded = variant.endswith("_bounded")
    variant = variant.removesuffix("_bounded")
    k.bar_sync(0)
    with k.if_(s.tid < WORLD):
        if variant == "set_after_wait":
            _wait(s, variant, slot_base)
            _signal(s, variant, slot_base)
        elif variant == "rank_guarded_set":
            with k.if_(s.rank == 0):
                _signal(s, variant, slot_base)
            _wait(s, variant, slot_base)
        elif variant == "no_wait":        # signals, but reads without waiting
            _signal(s, variant, slot_base)
        elif variant == "rank_guarded_wait":
            _signal(s, variant, slot_base)
            with k.if_(s.rank == 0):
                _wait(s, variant, slot_base)
        elif variant == "data_guarded_set":
            x = k.ld(s.at(s.inp, s.tid), type=t.u32, space="global")
            with k.if_(x != 0):
                _signal(s, variant, slot_base)
            _wait(s, variant, slot_base)
        else:
            _signal(s, variant, slot_base)
            _wait(s, variant, slot_base, bounded)
    k.bar_sync(0)


def one_shot(variant: str = "ok") -> Kernel:
    """Each rank copies its THREADS elements into slot `rank` of every rank's buffer, then
    (barrier) sums the WORLD slots of its own buffer into `output`."""
    s = Sym(f"one_shot_{variant}")
    k = s.k
    x = k.ld(s.at(s.inp, s.tid), type=t.f32, space="global")
    for p in range(WORLD):
        peer = s.ptr(s.bufs, p)
        _mark(f"copy{p}")
        k.st(s.at(peer, k.mad(s.rank, THREADS, s.tid)), x, type=t.f32, space="global")
    _barrier(s, variant)
    if variant.startswith("two_phase"):   # the second round: an epoch on slots WORLD + r
        _barrier(s, "ok" + variant.removeprefix("two_phase"), WORLD)
    mine = s.ptr(s.bufs, s.rank)
    acc = k.mov(0.0, type=t.f32)
    for p in range(WORLD):
        _mark(f"sum{p}")
        v = k.ld(s.at(mine, k.add(s.tid, p * THREADS)), type=t.f32, space="global")
        k.add(acc, v, dst=acc)
    k.st(s.at(s.out, s.tid), acc, type=t.f32, space="global")
    k.ret()
    return k


def two_shot(variant: str = "ok") -> Kernel:
    """The rank's buffer already holds its input (WORLD chunks of THREADS elements). Barrier;
    rank r sums chunk r of every buffer and writes the sum into chunk r of every buffer;
    barrier (slots WORLD + r); every rank copies its buffer to `output`."""
    s = Sym(f"two_shot_{variant}")
    k = s.k
    _barrier(s, "ok")
    chunk = k.mad(s.rank, THREADS, s.tid)
    acc = k.mov(0.0, type=t.f32)
    for p in range(WORLD):
        _mark(f"reduce{p}")
        v = k.ld(s.at(s.ptr(s.bufs, p), chunk), type=t.f32, space="global")
        k.add(acc, v, dst=acc)
    for p in range(WORLD):
        k.st(s.at(s.ptr(s.bufs, p), chunk), acc, type=t.f32, space="global")
    _barrier(s, variant, WORLD)
    mine = s.ptr(s.bufs, s.rank)
    for c in range(WORLD):
        i = k.add(s.tid, c * THREADS)
        k.st(s.at(s.out, i), k.ld(s.at(mine, i), type=t.f32, space="global"), type=t.f32,
             space="global")
    k.ret()
    return k


def loops(variant: str = "ok") -> Kernel:
    """The one-shot all-reduce over a run-time number of ranks (`world`), with loops over the
    peers: thread 0 signals every peer, then waits for each; "late_signal" signals only
    after waiting, "guards" has threads tid < world signal and (in a second if) wait. In
    "wait_each" every thread waits for peer p before reading its slot, in "read_then_wait"
    after; "memo" waits for p only when a register says it has not yet (as allgather_gemm
    does), "memo_other" when a value the wait does not change says so."""
    s = Sym(f"loops_{variant}")
    k = s.k
    world = k.ld_param(k.param(t.u32, "world"))
    x = k.ld(s.at(s.inp, s.tid), type=t.f32, space="global")
    with k.for_range(0, world) as p:
        k.st(s.at(s.ptr(s.bufs, p), k.mad(s.rank, THREADS, s.tid)), x, type=t.f32,
             space="global")
    k.bar_sync(0)

    def signal_all() -> None:
        with k.for_range(0, world) as p:
            k.st(s.at(s.ptr(s.pads, p), s.rank), s.epoch, type=t.u32, space="global",
                 sem="release", scope="sys")

    def wait_for(p) -> None:
        with k.loop():
            _mark(f"wait_{variant}")
            got = k.ld(s.at(s.ptr(s.pads, s.rank), p), type=t.u32, space="global",
                       sem="acquire", scope="sys")
            k.break_(k.setp("ge", got, s.epoch))

    if variant == "guards":
        with k.if_(s.tid < world):
            k.st(s.at(s.ptr(s.pads, s.tid), s.rank), s.epoch, type=t.u32, space="global",
                 sem="release", scope="sys")
        k.bar_sync(0)
        with k.if_(s.tid < world):
            wait_for(s.tid)
    elif variant in ("wait_each", "read_then_wait", "memo", "memo_other"):
        with k.if_(s.tid == 0):
            signal_all()
    else:
        with k.if_(s.tid == 0):
            if variant != "late_signal":
                signal_all()
            with k.for_range(0, world) as p:
                wait_for(p)
            if variant == "late_signal":
                signal_all()
    k.bar_sync(0)
    acc = k.mov(0.0, type=t.f32)
    waited = k.mov(0, type=t.u32)
    x_bits = k.cvt(x, t.u32, atype=t.f32, rnd="rzi")
    with k.for_range(0, world) as p:
        if variant == "wait_each":       # each peer's slot after its signal
            wait_for(p)
        elif variant in ("memo", "memo_other"):
            # wait for peer p once (a register remembers it): the skip is a later visit
            bit = k.shl(k.mov(1, type=t.u32), p)
            with k.if_(k.and_(waited if variant == "memo" else x_bits, bit) == 0):
                wait_for(p)
                k.or_(waited, bit, dst=waited)
        _mark(f"read_{variant}")
        v = k.ld(s.at(s.ptr(s.bufs, s.rank), k.mad(p, THREADS, s.tid)), type=t.f32,
                 space="global")
        if variant == "read_then_wait":   # the first iteration reads before any wait
            wait_for(p)
        k.add(acc, v, dst=acc)
    k.st(s.at(s.out, s.tid), acc, type=t.f32, space="global")
    k.ret()
    return k
