"""Checker: `tmem-read-before-commit-wait` follows paths (`ptxdsl/checker/hazards_tmem.py`).
An mma is in flight for a reader from its issue until a wait on one of its commits' barriers
(or a CTA barrier after one) by threads that cover the reader's, on the path taken: a loop
whose every turn waits leaves nothing in flight after it (its zero-turn path issued
nothing), a turn that may skip the wait does. Kernels built on tests/tmem_kernels.py's
`Tile` (warp 0 allocates, thread 0 issues and commits, the load and dealloc end it), each
buggy one with its clean twin; the findings name the load's and the dealloc's lines."""

from __future__ import annotations

import pytest

from ptxdsl import Kernel, Module, ptx, t
from ptxdsl.checker import Hazard, check_kernel, check_module
from ptxdsl.frontend import parse_ptx
from tests import tmem_kernels as tk
from tests.checker_kernels import clean, ids

_RULE = Hazard.TMEM_READ_BEFORE_COMMIT_WAIT


def _wait(s: tk.Tile, phase) -> None:
    """Every thread waits on the commit's barrier, then fences after it."""
    ptx.mbarrier_wait(s.k, s.bar, phase)
    ptx.tcgen05_fence_after_thread_sync(s.k)


def _commit(s: tk.Tile) -> None:
    with s.k.if_(s.k.tid.x == 0):
        ptx.tcgen05_commit(s.k, ptx.cta_group_1, s.bar)


def looped(variant: str) -> Kernel:
    """Thread 0 issues an mma in each turn of a loop of a run-time count (which may be 0),
    then every warp loads its lanes after the loop and warp 0 frees them. In each turn:
    `every_turn`: commit, then every thread waits (clean); `commit_after`: no commit, the
    commit and the wait follow the loop (clean); `waited_before`: as every_turn, after an mma
    before the loop that was committed and waited (clean: whether the loop runs or not);
    `wait_if`: the wait only when a parameter-driven condition holds, which may be false in
    the last turn; `wait_if_more`: the wait only when another turn follows (the last turn's
    mma is never waited on); `wait_first`: the wait opens the turn, for the previous turn's
    mma, none after the loop; `wrong_threads`: only warp 0 waits; `wrong_barrier`: every
    thread waits on another barrier, one only a commit before the loop arrives on."""
    s = tk.Tile(f"loop_{variant}")
    k = s.k
    s.alloc()
    other = None
    if variant == "wrong_barrier":
        other = k.shared_array(t.b64, 1, align=8, name="other")
        with k.if_(k.tid.x == 0):
            ptx.mbarrier_init(k, other, 1)
    s.publish()
    if variant == "wrong_barrier":
        with k.if_(k.tid.x == 0):
            ptx.tcgen05_commit(k, ptx.cta_group_1, other)
    n = k.ld_param(k.param(t.u32, "n"))
    if variant == "waited_before":
        s.mma()
        _wait(s, 0)
    with k.for_range(0, n) as i:
        phase = k.and_(i, 1)
        if variant == "wait_first":
            with k.if_(i != 0):
                _wait(s, phase)
        s.mma(commit=variant != "commit_after")
        if variant in ("every_turn", "waited_before"):
            _wait(s, phase)
        elif variant == "wait_if":
            with k.if_(i < k.ld_param(k.param(t.u32, "waits"))):
                _wait(s, phase)
        elif variant == "wait_if_more":
            with k.if_(k.add(i, 1) < n):
                _wait(s, phase)
        elif variant == "wrong_threads":
            with k.if_(s.warp == 0):
                _wait(s, phase)
        elif variant == "wrong_barrier":
            ptx.mbarrier_wait(k, other, phase)
            ptx.tcgen05_fence_after_thread_sync(k)
    if variant == "commit_after":
        _commit(s)
        _wait(s, 0)
    s.load()
    s.free()
    return k


def persistent_ws(variant: str) -> Kernel:
    """A persistent warp-specialised CTA, one turn per tile: thread 0 waits until warps 1-3
    emptied the accumulator (from the second turn), issues the tile's mma and commits it;
    warps 1-3 wait on the commit, load their lanes and arrive on `empty`. After the loop warp
    0 frees the columns after a CTA barrier (`ok`: the barrier orders it after the epilogue
    warps' last wait, on every path through the loop), without one (`no_barrier`), or the
    epilogue loads without waiting (`no_wait`)."""
    s = tk.Tile(f"persistent_ws_{variant}")
    k = s.k
    empty = k.shared_array(t.b64, 1, align=8, name="empty")
    s.alloc()
    with k.if_(k.tid.x == 0):
        ptx.mbarrier_init(k, empty, 96)
    s.publish()
    with k.for_range(0, k.ld_param(k.param(t.u32, "tiles"))) as i:
        phase = k.and_(i, 1)
        with k.if_(k.tid.x == 0):
            with k.if_(i != 0):
                ptx.mbarrier_wait(k, empty, k.xor(phase, 1))
                ptx.tcgen05_fence_after_thread_sync(k)
            ptx.tcgen05_mma(k, ptx.kind_f16, ptx.cta_group_1, s.taddr, s.a, s.b, tk._IDESC, 0)
            ptx.tcgen05_commit(k, ptx.cta_group_1, s.bar)
        with k.if_(s.warp != 0):
            if variant != "no_wait":
                ptx.mbarrier_wait(k, s.bar, phase)
            ptx.tcgen05_fence_after_thread_sync(k)
            s.load()
            ptx.tcgen05_fence_before_thread_sync(k)
            ptx.mbarrier_arrive(k, empty)
    s.free(barrier=variant != "no_barrier")
    return k


def second_mma(wait_again: bool) -> Kernel:
    """Warps 1-3 wait on thread 0's first mma, thread 0 issues and commits a second one into
    the same columns, then warps 1-3 load (waiting again for it when `wait_again`) and warp 0
    frees the columns after a CTA barrier."""
    s = tk.Tile(f"second_mma_{wait_again}")
    k = s.k
    s.alloc()
    s.publish()
    s.mma()
    with k.if_(s.warp != 0):
        _wait(s, 0)
    s.mma()
    with k.if_(s.warp != 0):
        if wait_again:
            _wait(s, 1)
        s.load()
        ptx.tcgen05_fence_before_thread_sync(k)
    s.free()
    return k


def _parsed(k: Kernel) -> list[str]:
    return ids(check_module(parse_ptx(Module([k]).emit())))


@pytest.mark.parametrize("variant", ["every_turn", "commit_after", "waited_before"])
def test_a_loop_that_waits_before_its_readers_checks_clean(variant):
    k = looped(variant)
    clean(k)
    assert _parsed(k) == []
    Module([k]).assemble()


@pytest.mark.parametrize("variant, count", [
    ("wait_if", 2), ("wait_if_more", 2), ("wait_first", 2), ("wrong_barrier", 2),
    # (warp 0, which waited, frees the columns after the barrier: only the load is early)
    ("wrong_threads", 1)])
def test_a_loop_turn_that_may_skip_the_wait_is_reported(variant, count):
    k = looped(variant)
    found = check_kernel(k)
    # the load after the loop (and the dealloc after it)
    assert ids(found) == [_RULE.value] * count, [f.format() for f in found]
    first = min(found, key=lambda f: f.loc.line)
    assert (first.loc.file, first.loc.line) == (tk.__file__, tk.LINES["ld"]), first.format()
    assert first.sites[1].ptx.startswith("tcgen05.mma"), first.format()
    assert _parsed(k) == ids(found)


def test_the_wrong_threads_waiting_is_told_so():
    f = min(check_kernel(looped("wrong_threads")), key=lambda f: f.loc.line)
    assert "the threads that run it waited on no tcgen05.commit's mbarrier" in f.message


def test_a_persistent_warp_specialised_loop_checks_clean():
    k = persistent_ws("ok")
    clean(k)
    assert _parsed(k) == []
    Module([k]).assemble()


@pytest.mark.parametrize("variant, marks", [("no_barrier", ["dealloc"]),
                                            ("no_wait", ["ld", "dealloc"])])
def test_a_persistent_warp_specialised_loop_missing_a_step_is_reported(variant, marks):
    k = persistent_ws(variant)
    found = check_kernel(k)
    assert ids(found) == [_RULE.value] * len(marks), [f.format() for f in found]
    assert sorted((f.loc.file, f.loc.line) for f in found) == sorted(
        (tk.__file__, tk.LINES[m]) for m in marks), [f.format() for f in found]
    assert _parsed(k) == ids(found)


def test_a_wait_for_the_first_mma_does_not_cover_a_second_one():
    # the epilogue warps did not issue the second mma: only their second wait orders them
    # after it (and the barrier after that wait, warp 0's dealloc)
    k = second_mma(wait_again=True)
    clean(k)
    assert _parsed(k) == []
    k = second_mma(wait_again=False)
    found = check_kernel(k)
    assert ids(found) == [_RULE.value] * 2, [f.format() for f in found]
    first = min(found, key=lambda f: f.loc.line)
    assert (first.loc.file, first.loc.line) == (tk.__file__, tk.LINES["ld"]), first.format()
    assert "the threads that run it waited on no tcgen05.commit's mbarrier" in first.message
    assert _parsed(k) == ids(found)
