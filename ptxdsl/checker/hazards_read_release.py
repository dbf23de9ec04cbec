"""`smem-read-released`: a thread reads a ring stage after handing it back to its producer.

A consumer's count-less `mbarrier.arrive` on a stage's empty barrier (on this CTA's, or on a
peer's through `mapa`: CUTLASS releases a multicast stage on every rank) tells the producer
the stage is free: once every arrival is in, the producer's next TMA or bulk copy into the
stage may land. A read of the stage after the release, in the same trip (an `ld.shared` of
any width, `ldmatrix`, or the source of a TMA or bulk store issued after the arrive), is
ordered after nothing the producer waits for, so the copy may overwrite the bytes under it;
the reading thread need not be the arriving one (lane 0 releasing for its warp).
`wgmma-smem-released` judges the opposite order (a wgmma issued before the arrive and
still running); this rule is its sibling for reads issued after the arrive, with the same
matching of the released stage and the read's bytes:

- which stage: the read's address and the arrive's barrier (a peer's: the local address
  its `mapa` maps) as ring slots (`hazards_wgmma.same_stage`: one counter, counters one
  defined from the other, or two views of one ring related by `stages.relation`). Only a
  read of the very stage released is reported: a read of another stage (the current one,
  after releasing the previous one), or a stage the checker cannot tell (a constant slot,
  arithmetic `ranges` does not follow) is not.
- which bytes: the read must overlap a TMA or bulk copy's destination whose copy waits on
  the released barrier (`hazards_bulk_release._handed_back`): a staging buffer no copy
  fills, or another ring's stage on the same counter (K released, V read), is clean; an
  arrive no copy waits for (a producer's arrive on a full barrier) releases nothing. Nor is
  a read reported whose copies also wait, each trip, on a barrier a release later in the
  trip arrives on (`_held`: the producer waits on K's and V's empty barriers before its V
  copy, so V read after K's release and before V's is safe). Bytes only a copy of unknown
  destination or unbounded offset may write make a note.

The release is a may-fact ("released", arrive) from the arrive to the end of its trip: any
write of the released barrier's stage counter ends it (the next trip reads another stage,
and a read of this stage n trips on follows its own wait), and so does a wait whose
barrier is not provably another stage's (a wait on the stage's full barrier hands the
refilled stage back to the reader). An arrive of one elected thread after a `bar.sync` that
follows every thread's reads has no read after it, and is clean.
"""

from __future__ import annotations

from typing import Any

from .analysis import PREPARE, Analysis, handles
from .findings import Hazard
from .guards import _not_enabled, enables_no_copy, trip_guards
from .hazards_bulk import extent_of
from .hazards_bulk_release import _handed_back
from .hazards_cluster import mapa_source
from .hazards_ring import _apart, _load_extents, _slot, index_current, lands_in, ring_index
from .hazards_wgmma import follow_relations, released_slot, same_stage
from .ops import Op, Role
from .state import State

_READS = (Role.SMEM_READ, Role.TMA_STORE, Role.BULK_STORE)


def _released(an: Analysis, i: int) -> Any:
    """The barrier slot the release at statement i hands back (`released_slot`, cached)."""
    key = ("read_release_slot", i)
    if key not in an.cache:
        arrive = _arrive(an, i)
        assert arrive is not None
        an.cache[key] = released_slot(an, arrive)
        src = mapa_source(an, arrive.mbar)
        if src is not None:
            # A peer's barrier of the stage (CUTLASS's release on every rank of the
            # multicast group): the stage is the local address's, which the peer's copies
            # multicast into here too.
            slot = _slot(an, src[1])[1]
            ok = slot is not None and (slot[0] != "ring" or index_current(
                an, src[1], ring_index(an, slot)[0], src[0]) and index_current(
                an, arrive.mbar, ring_index(an, slot)[0], i))
            an.cache[key] = slot if ok else ("unknown",)
    return an.cache[key]


def _arrive(an: Analysis, i: int) -> Op | None:
    """The count-less arrive of statement i."""
    return an.cache.get("read_release_arrives", {}).get(i)


def _stage(an: Analysis, i: int) -> Any:
    """The ring slot ('ring', index, n, stride) the read at statement i reads, when its
    index is the counter's current value there; None otherwise."""
    key = ("read_release_ring", i)
    if key not in an.cache:
        smem = an.op_at[i].smem
        slot = _slot(an, smem)[1]
        ok = slot is not None and slot[0] == "ring" \
            and index_current(an, smem, ring_index(an, slot)[0], i)
        an.cache[key] = slot if ok else None
    return an.cache[key]


def _prepare(an: Analysis) -> None:
    """Index the releases (count-less arrives on ring slots that let some copy in) and
    follow their counters, and those of the ring stages read, so a release's fact ends at
    the counter's step and two views of a ring can be compared."""
    if Role.MBAR_ARRIVE not in an.roles or not an.roles & set(_READS) \
            or not an.roles & {Role.TMA_LOAD, Role.BULK_LOAD}:
        return
    arrives = {}
    counters = {}
    for op in an.ops:
        if op.role is Role.MBAR_ARRIVE and op.count is None:
            mapped = mapa_source(an, op.mbar)
            slot = _slot(an, op.mbar if mapped is None else mapped[1])[1]
            if slot is not None and slot[0] == "ring":
                arrives[op.index] = op
                c = ring_index(an, slot)[0]
                counters[id(c)] = c
    if not arrives:
        return
    for op in an.ops:
        if op.role in _READS and op.smem is not None:
            slot = _slot(an, op.smem)[1]
            if slot is not None and slot[0] == "ring":
                c = ring_index(an, slot)[0]
                counters[id(c)] = c
    an.cache["read_release_arrives"] = arrives
    follow_relations(an, counters.values())


PREPARE.append(_prepare)


@handles(Role.MBAR_ARRIVE)
def release(an: Analysis, state: State, op: Op, report: bool) -> State:
    """A release of a ring stage that lets a copy in: ("released", arrive) until the trip
    ends."""
    if _arrive(an, op.index) is not op or enables_no_copy(an, op):
        return state
    if _released(an, op.index)[0] != "ring":
        return state
    fact = ("released", op.index)
    return state if fact in state.may else State(state.must, state.may | {fact}, state.tx)


@handles(Role.RING_STEP)
def step(an: Analysis, state: State, op: Op, report: bool) -> State:
    """A write of a released stage's counter ends the trip the release belongs to."""
    gone = {f for f in state.may if f[0] == "released"
            and ring_index(an, _released(an, f[1]))[0] is op.value}
    return State(state.must, state.may - gone, state.tx) if gone else state


@handles(Role.MBAR_WAIT)
def wait(an: Analysis, state: State, op: Op, report: bool) -> State:
    """A wait on a barrier that may be the released stage's (its full barrier, refilled)
    ends the release; one provably on another stage of the ring does not."""
    if not any(f[0] == "released" for f in state.may):
        return state
    slot = _slot(an, op.mbar)[1]
    mine = slot if slot is not None and slot[0] == "ring" and index_current(
        an, op.mbar, ring_index(an, slot)[0], op.index) else None
    gone = {f for f in state.may if f[0] == "released" and same_stage(
        an, state, mine, 0, _released(an, f[1])) is not False}
    return State(state.must, state.may - gone, state.tx) if gone else state


def _held(an: Analysis, i: int, ext: tuple[Any, float, float], arrive: Op) -> bool:
    """Does every copy into the bytes the read at statement i reads that waits for
    `arrive` also wait, on each trip, on another barrier that a release later in this trip
    arrives on? The thread has not let that copy in yet (the producer waits on K's and then
    V's empty barrier before its V copy: a thread that released K reads V safely before it
    releases V)."""
    root, lo, hi = ext
    later = _later_releases(an, i)
    copies = [o for o, a, b in _load_extents(an).get(id(root), ())
              if a < hi and lo < b and not _not_enabled(an, o, arrive)]
    return bool(copies) and bool(later) and all(
        any(_apart(an, g, arrive) and any(not _apart(an, g, x) for x in later)
            for g in trip_guards(an, o)) for o in copies)


def _later_releases(an: Analysis, i: int) -> list[Op]:
    """The releases that may follow statement i before its innermost loop's next trip."""
    key = ("read_release_later", i)
    if key not in an.cache:
        cfg = an.cfg
        b = cfg.block_of(i)
        inner = min(((h, body) for h, body in an.loops if b in body),
                    key=lambda x: len(x[1]), default=None)
        after = cfg.reachable(cfg.succs(b), None if inner is None else inner[0])
        an.cache[key] = [x for j, x in sorted(an.cache["read_release_arrives"].items())
                         if (cfg.block_of(j) == b and j > i) or cfg.block_of(j) in after]
    return an.cache[key]


@handles(*_READS)
def read(an: Analysis, state: State, op: Op, report: bool) -> State:
    """A read of shared memory (ld.shared, ldmatrix, a TMA or bulk store's source):
    `smem-read-released` when a release earlier in the trip handed back the stage it
    reads."""
    if not report or op.smem is None or not any(f[0] == "released" for f in state.may) \
            or not lands_in(an, op.smem):
        return state
    mine = _stage(an, op.index)
    ext = extent_of(an, op)
    if mine is None or ext is None:
        return state
    for (a,) in an.pending(state, "released"):
        arrive = _arrive(an, a)
        assert arrive is not None
        if not same_stage(an, state, mine, 0, _released(an, a)):
            continue   # another stage (the previous one, released while this one is read)
        hit = _handed_back(an, arrive, ext)
        if hit is None or _held(an, op.index, ext, arrive):
            continue   # no copy that waits for this release (and no other) writes them
        what = {Role.SMEM_READ: "this load" if type(an.body[op.index].insn).__name__ != "LdMatrix"
                else "this ldmatrix"}.get(op.role, f"this {op.role.value}")
        if hit == "maybe":
            an.note("smem-read-released", f"{what} reads {an.describe(op.smem)} after an "
                    "arrive that may release its stage; whether a copy that waits for that "
                    "arrive writes these bytes is not known", [("read", op.index),
                                                                ("arrive", a)])
            continue
        an.report(Hazard.SMEM_READ_RELEASED, f"{what} reads {an.describe(op.smem)}, whose "
                  "stage an mbarrier.arrive earlier in the same trip handed back to the "
                  "producer: the producer's next copy into the stage may land under the "
                  "read", [("read", op.index), ("arrive", a)], dedupe=("released", a))
        break
    return state
