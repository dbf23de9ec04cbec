"""Generic stores over TMA destinations: a buffer the threads reuse as staging once its copies
are consumed (a ring's stage area holding an epilogue's tile: stmatrix, a barrier, ld.shared)
is read for what the threads stored there, not for what a copy wrote, so the ring rules
(`hazards_ring.check_read`: `smem-read-before-wait`, `wait-wrong-barrier`) do not judge
such a read against the copies' waits (`stored_over`, unless `wait_after` finds more copies
to come).

Facts (must: on every path): ("gstore", s) a shared store s into a symbol copies write, not
yet ordered for other threads; ("gsynced", s, b) the same after the CTA barrier b (bar.sync,
with or without a thread count). May: ("glanded", s), a copy issued on some path after the
store s into bytes it may have written: that store no longer hides the copies.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .analysis import Analysis, handles
from .cfg import dominates, dominators
from .hazards_bulk import extent_of
from .hazards_ring import _loads, _reach, lands_in
from .ops import Op, Role
from .staged import thread_cover
from .state import State


def _holds_copies(an: Analysis, op: Op) -> bool:
    return bool(_loads(an)) and op.smem is not None and lands_in(an, op.smem)


@handles(Role.SMEM_WRITE)
def store(an: Analysis, state: State, op: Op, report: bool) -> State:
    """A generic store into a symbol that copies write: ("gstore", s)."""
    if not _holds_copies(an, op) or extent_of(an, op) is None:
        return state
    return State(state.must | {("gstore", op.index)}, state.may, state.tx)


@handles(Role.CTA_BARRIER)
def barrier(an: Analysis, state: State, op: Op, report: bool) -> State:
    """A CTA barrier orders the stores before it for every thread that passes it."""
    if not any(f[0] == "gstore" for f in state.must):
        return state
    must = frozenset(("gsynced", f[1], op.index) if f[0] == "gstore" else f
                     for f in state.must)
    return State(must, state.may, state.tx)


@handles(Role.TMA_LOAD, Role.BULK_LOAD)
def copy(an: Analysis, state: State, op: Op, report: bool) -> State:
    """A copy issued after the stores may land over them: ("glanded", s) for each store s
    whose bytes it may write (a may-fact: one thread's copy under an `if` is enough)."""
    if not any(f[0] in ("gstore", "gsynced") for f in state.must):
        return state
    ext = extent_of(an, op)
    hit = {("glanded", f[1]) for f in state.must if f[0] in ("gstore", "gsynced")
           and _may_meet(ext, extent_of(an, an.op_at[f[1]]))}
    return State(state.must, state.may | hit, state.tx) if hit else state


def _may_meet(a: tuple[Any, float, float] | None, b: tuple[Any, float, float] | None) -> bool:
    return a is None or b is None or (a[0] is b[0] and a[1] < b[2] and b[1] < a[2])


def stored_over(an: Analysis, state: State, at: int, extent: tuple[Any, float, float],
                sources: list[Op], smem: Any = None) -> bool:
    """Did the threads store over the bytes the read at statement `at` (of `extent`) reads,
    after the copies `sources` into them landed? When all of these hold:

    - stores into the read's symbol ran on every path to it, and after them a CTA barrier
      whose block dominates the read's: every thread reaching the read passed a barrier that
      orders the stores before it, whichever thread wrote which byte (staging offsets are
      per thread, `smem+?`, and cannot be matched one by one);
    - the bytes each thread reads were stored by threads its barrier orders before it
      (`staged.thread_cover`, where the addresses are one register the same in every thread
      plus offsets computed from thread ids: a stage picked at run time); otherwise the
      union of those stores' byte bounds contains the read's bounds: a flag the threads
      wrote elsewhere in the symbol does not make a read of a tile a read of staging;
    - for each of those copies, the reading threads waited, before the read, on a barrier
      it may complete on (a wait every thread running the read runs, up to conditions the
      same in every thread, on a barrier whose address is known: a producer's wait on the
      empty barrier is none): a copy none of them waited for (a tile loaded into the stage
      on its own barrier) may still be landing over the stores;
    - no copy was issued over the stores since.

    The read then sees the stores unless more copies into those bytes are still to come
    (`wait_after`). What this cannot see: a copy that only other threads wait for, still to
    come while these stage (a second consumer warpgroup still in its loop, with no barrier
    ordering its last wait before the stores), races with the stores; the checker does not
    relate the groups."""
    root, lo, hi = extent
    synced: list[tuple[int, int]] = []     # (store, the barrier that orders it)
    spans: list[tuple[float, float]] = []
    idom = an.cache.get("idom")
    if idom is None:
        idom = an.cache["idom"] = dominators(an.cfg)
    here = an.cfg.block_of(at)
    for f in state.must:
        if f[0] != "gsynced" or ("glanded", f[1]) in state.may:
            continue
        b = an.cfg.block_of(f[2])
        ext = extent_of(an, an.op_at[f[1]])
        if ext is not None and ext[0] is root and (
                f[2] < at if b == here else dominates(idom, b, here)):
            synced.append((f[1], f[2]))
            spans.append((ext[1], ext[2]))
    if not synced:
        return False
    covered = thread_cover(an, at, smem, synced)
    if not (_covers(sorted(spans), lo, hi) if covered is None else covered):
        return False
    waits = {f[1] for f in state.must if f[0] == "waited"} | \
        {f[1] for f in state.may if f[0] == "wstep"}
    waits = {w for w in waits if an.div.same_threads(w, at, _uniform(an))}
    # Every copy into the bytes read, not just one of them: a copy only the ring's waits
    # do not cover (a tile loaded into the stage on a barrier nobody waited on) may still
    # be landing over the stores.
    return all(any(_completes(an, an.op_at[w], [src], False) for w in waits)
               for src in sources)


def wait_after(an: Analysis, at: int, sources: list[Op]) -> int | None:
    """A wait that may be on a barrier the copies `sources` complete on and can follow the
    read at statement `at` in its threads (a later trip of a loop around it included), or
    None. Where there is one, copies into the bytes read are still to come, and with the
    stages released a producer may issue one while the threads stage there (a persistent
    kernel loading the next tile's first stages during the epilogue of the last): the read
    may see that copy's data, and it stays judged by the waits."""
    here = an.cfg.block_of(at)
    blocks = _reach(an, here)
    return next((o.index for o in an.ops if o.role is Role.MBAR_WAIT and (
        an.cfg.block_of(o.index) in blocks or an.cfg.block_of(o.index) == here and o.index > at)
        and _completes(an, o, sources, True)), None)


def _uniform(an: Analysis) -> Callable[[tuple[Any, bool]], bool]:
    """Conditions the same in every thread (a ring loop's `kb < blocks`): they do not make
    the wait another thread's."""
    return lambda tok: an.div.cond_level(tok[0]) == 0


def _covers(spans: list[tuple[float, float]], lo: float, hi: float) -> bool:
    """Do the sorted intervals cover [lo, hi)?"""
    at = lo
    for a, b in spans:
        if a > at:
            break
        at = max(at, b)
        if at >= hi:
            return True
    return at >= hi


def _completes(an: Analysis, wait: Op, sources: list[Op], unknown: bool) -> bool:
    """May the wait be on a barrier one of the copies completes on (`unknown`: the answer
    where a barrier's address is not known)?"""
    from .hazards_arrive import _same_barriers
    return any(_same_barriers(an, wait, o) or unknown and (
        an.key(wait, "mbar") is None or an.key(o, "mbar") is None) for o in sources)
