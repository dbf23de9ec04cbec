"""Bulk stores pending at a named barrier's `bar.arrive`, carried to its partners' `bar.sync`
on another branch (for `bulk-src-overwrite` and `bulk-src-released`); shared writes not yet
fenced for the async proxy there, carried likewise, and fenced ones carried to the other
side's `bar.arrive` (for `smem-no-proxy-fence`: `unfenced`, `fenced_to_arrives`).

A warp-specialized epilogue (CUTLASS's, FA3's ping-pong) has one warpgroup TMA-store a
staging buffer and `bar.arrive id, n` without waiting, while the other warpgroup, in the
other branch, runs `bar.sync id, n` and then writes the buffer or releases its ring stage.
The pair orders that write after the store's issue, not after its read: for the syncing
threads the store is pending as at a CTA barrier ("bulk_seen", which
`hazards_bulk_release.barrier` builds at a barrier both sides reach and both rules judge).

No path joins the arrive and the sync, so the facts go by `Analysis.carry`: the stores
pending in their issuing threads at a named-barrier statement ("bulk": not retired there by
a `cp.async.bulk.wait_group.read`) are handed to each sync the named-barrier model pairs
with it (`hazards_namedbar.partners`: the same id, warps that never reach the arrive), and
become "bulk_seen" facts there, naming the arrive as the barrier the store was pending at.
A store its issuer retired before the arrive is not handed on: the pair orders that wait
before the partners' later program, as a CTA barrier does. Its "bulk_done" fact, which
says that only the waiting thread knows, still flows on along the arrive's path (the
arrive orders none of the waiter's siblings) and may reach the partners' threads where the
branches join (a producer in the other warpgroup, next trip); a ("bulk_told", store, wait,
arrive) fact beside it lets `told` clear it for threads that all run a partner sync.

Not seen: a partner sync without a thread count (`bar.sync 1` against `bar.arrive 1,
256`), and pairs the model cannot tell (`partners`: the CTA's size unknown, an id no warp
can compute); a store that other threads saw pending at an earlier barrier and passed on by
their arrive (only the issuers' own "bulk" facts are carried); a carried fact that a later
barrier on the syncing side drops (as for "bulk_seen" of a CTA barrier). The facts are
carried per statement, not per phase: a store pending at some trip's arrive is taken as
pending at every trip's sync of a partner, and a retirement told at one trip's arrive as
told wherever that fact flows.
"""

from __future__ import annotations

from .analysis import Analysis, handles
from .hazards_namedbar import partners
from .ops import Op, Role
from .state import State

_STORES = frozenset({Role.TMA_STORE, Role.BULK_STORE})


def told(an: Analysis, state: State, s: int, w: int, i: int) -> bool:
    """Was the retirement of the store at s by the wait_group at w ("bulk_done") handed to
    the threads that run statement i: all of them run a partner sync of a named-barrier
    arrive that followed the wait ("bulk_told")?"""
    return any(f[0] == "bulk_told" and f[1] == s and f[2] == w
               and any(an.div.same_threads(sync, i) for sync in partners(an, f[3]))
               for f in state.may)


@handles(Role.CTA_BARRIER, Role.CLUSTER_BARRIER)
def barrier(an: Analysis, state: State, op: Op, report: bool) -> State:
    """A CTA barrier publishes every retirement ("bulk_done" is dropped by `sync`)."""
    if not any(f[0] == "bulk_told" for f in state.may):
        return state
    return State(state.must, frozenset(f for f in state.may if f[0] != "bulk_told"), state.tx)


@handles(Role.NAMED_BARRIER)
def named_barrier(an: Analysis, state: State, op: Op, report: bool) -> State:
    """Hand the stores pending here in their issuing threads to this statement's partner
    syncs, and mark the retirements known here as told to them; at a sync, take the stores
    its partners handed here as pending at that arrive."""
    if not an.roles & _STORES:
        return state
    pending = [(f[1], f[3], ("bulk_retiring", f[1]) in state.may)
               for f in state.may if f[0] == "bulk"]
    done = frozenset(("bulk_told", f[1], f[2], op.index)
                     for f in state.may if f[0] == "bulk_done")
    if pending or done:
        syncs = partners(an, op.index)
        for sync in syncs:
            an.carry(("bulk_at_arrive", sync),
                     frozenset((s, op.index, moved, retiring) for s, moved, retiring in pending))
        if syncs and not done <= state.may:
            state = State(state.must, state.may | done, state.tx)
    got = an.carried.get(("bulk_at_arrive", op.index))
    if not got:
        return state
    seen = frozenset(("bulk_seen", *fact) for fact in got)
    return state if seen <= state.may else State(state.must, state.may | seen, state.tx)


@handles(Role.NAMED_BARRIER)
def unfenced(an: Analysis, state: State, op: Op, report: bool) -> State:
    """`smem-no-proxy-fence` across a named barrier: hand the shared writes not yet fenced
    for the async proxy here ("smem_dirty") to this statement's partner syncs, where they
    stay unfenced ("smem_dirty", write, here: the syncing threads' own fence does not fence
    them, `sync.proxy_async_fence`); a write fenced before the arrive is ordered before the
    partners' later program, as by a CTA barrier. At a sync, take the writes handed here
    (and those `fenced_to_arrives` hands to an arrive)."""
    dirty = frozenset((f[1], op.index) for f in state.may
                      if f[0] == "smem_dirty" and len(f) == 2)
    for sync in partners(an, op.index) if dirty else ():
        an.carry(("smem_dirty_at_arrive", sync), dirty)
    facts = frozenset(("smem_dirty", *fact)
                      for fact in an.carried.get(("smem_dirty_at_arrive", op.index), ())) \
        | frozenset(("smem_fenced", *fact, frozenset[int]())
                    for fact in an.carried.get(("smem_fenced_at", op.index), ()))
    return state if facts <= state.may else State(state.must, state.may | facts, state.tx)


@handles(Role.CTA_BARRIER, Role.NAMED_BARRIER)
def fenced_to_arrives(an: Analysis, state: State, op: Op, report: bool) -> State:
    """Hand the writes fenced here ("smem_fenced") to the `bar.arrive` statements of the
    same id in the other warps (`partners(..., sync=False)`), which do not wait: a storer
    that arrives while the writers sync (the pair the wrong way round) has them as fenced
    by other threads with no barrier since, which its next CTA barrier drops. Run at a
    statement's first op (a sync's CTA_BARRIER op, a bar.arrive's NAMED_BARRIER op), before
    `sync`'s handler (`sync` is imported last) drops the facts at a sync. Not the unfenced
    writes: the writers may fence them before a barrier the arriving threads wait on later,
    and a carried fact would not see that fence."""
    # (no bar.arrive without a thread count: a kernel without one has no arrive to hand to,
    # and need not build the named-barrier model for its `bar.sync 0`s)
    if an.op_at[op.index] is not op or Role.NAMED_BARRIER not in an.roles:
        return state
    fenced = frozenset((f[1], op.index) for f in state.may if f[0] == "smem_fenced")
    for arrive in partners(an, op.index, sync=False) if fenced else ():
        an.carry(("smem_fenced_at", arrive), fenced)
    return state
