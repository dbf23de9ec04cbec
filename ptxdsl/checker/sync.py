"""What barriers and fences settle: the pending facts each one clears or advances.

- A CTA barrier (bar.sync, barrier.sync, bar.red) makes every thread's earlier writes
  visible to the CTA: inits, acquires and tensormap.replace writes are published, shared
  writes already fenced into the async proxy become safe for any thread's TMA store, and a
  store source that one thread saw retired (wait_group.read) becomes free for every thread;
  one still pending in its thread becomes pending for every thread
  (`hazards_bulk_release.barrier`). (An mbarrier does the same for the threads that wait
  on it: `hazards_bulk_release.hand_on` and `acquire`.)
- bar.warp.sync publishes tensormap.replace writes within the warp (for cp_fenceproxy); in a
  CTA of one warp it is a CTA barrier.
- fence.proxy.async (all spaces, or .shared::cta/.shared::cluster) moves this thread's shared
  writes into the async proxy ("smem_dirty" becomes "smem_fenced"; a CTA barrier, or an
  mbarrier hand-off, then makes them safe for other threads' async-proxy reads), and makes an
  init visible to the TMA unit.
- fence.mbarrier_init.release.cluster releases inits to the cluster; a cluster barrier then
  completes the publication for remote arrives and multicast.
"""

from __future__ import annotations

from ..types import StateSpace
from .analysis import Analysis, handles
from .ops import Op, Role
from .state import State

_CTA_CLEARS = frozenset({"init_nosync", "init_noasync", "acq_nosync", "replace_nosync",
                         "smem_fenced", "bulk_done", "bulk_handed"})
_SHARED_FENCES = (StateSpace.generic, StateSpace.shared, StateSpace.shared_cta,
                  StateSpace.shared_cluster)


def _drop(state: State, tags: frozenset) -> State:
    if not any(f[0] in tags for f in state.may):
        return state
    return State(state.must, frozenset(f for f in state.may if f[0] not in tags), state.tx)


def _retag(state: State, old: str, new: str) -> State:
    if not any(f[0] == old for f in state.may):
        return state
    may = frozenset((new, *f[1:]) if f[0] == old else f for f in state.may)
    return State(state.must, may, state.tx)


@handles(Role.CTA_BARRIER)
def cta_barrier(an: Analysis, state: State, op: Op, report: bool) -> State:
    """bar.sync / barrier.sync: orders every thread of the CTA, so facts about other threads not yet
    seeing a write or init are dropped."""
    return _drop(state, _CTA_CLEARS)


@handles(Role.CLUSTER_BARRIER)
def cluster_barrier(an: Analysis, state: State, op: Op, report: bool) -> State:
    """A full cluster barrier: as a CTA barrier, and it publishes mbarrier inits to the cluster."""
    return _drop(state, _CTA_CLEARS | {"init_fenced"})


@handles(Role.WARP_SYNC)
def warp_sync(an: Analysis, state: State, op: Op, report: bool) -> State:
    """bar.warp.sync: lanes' tensormap.replace writes are synchronised; in a CTA of one warp it is a
    CTA barrier."""
    # In a CTA of one warp (.reqntid/.maxntid <= 32) the warp barrier is a CTA barrier: it
    # orders memory among all the threads there are.
    if an.values.nthreads is not None and an.values.nthreads <= 32:
        return _drop(state, _CTA_CLEARS | {"replace_nosync"})
    return _drop(state, frozenset({"replace_nosync"}))


@handles(Role.PROXY_ASYNC_FENCE)
def proxy_async_fence(an: Analysis, state: State, op: Op, report: bool) -> State:
    """fence.proxy.async (for shared memory): generic-proxy writes and mbarrier inits become visible
    to the async proxy."""
    if op.space not in _SHARED_FENCES:   # .global only: orders no shared writes or inits
        return state
    state = _drop(state, frozenset({"init_noasync"}))
    # ("smem_fenced", write, via, arrives): via, the named barrier a write of other threads
    # was carried from (None here); arrives, those since that hand it on
    # (`hazards_bulk_release.hand_on`). A write of other threads carried here from a named
    # barrier unfenced ("smem_dirty", write, barrier) stays: this thread's fence does not
    # fence it.
    dirty = {f for f in state.may if f[0] == "smem_dirty" and len(f) == 2}
    if not dirty:
        return state
    fenced = {("smem_fenced", f[1], None, frozenset[int]()) for f in dirty}
    return State(state.must, (state.may - dirty) | fenced, state.tx)


@handles(Role.MBAR_INIT_FENCE)
def mbarrier_init_fence(an: Analysis, state: State, op: Op, report: bool) -> State:
    """fence.mbarrier_init.release.cluster: the inits become visible to the async proxy and, after a
    cluster barrier, to the cluster."""
    return _retag(_drop(state, frozenset({"init_noasync"})), "init_nocluster", "init_fenced")
