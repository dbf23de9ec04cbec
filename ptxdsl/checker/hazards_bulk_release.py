"""`bulk-src-released`: a ring stage handed back to its producer while a TMA or bulk store
still reads it.

A consumer that stages its output in a ring stage it has finished reading (FlashAttention's
O in the tile's Q stage) must not release the stage (a count-less `mbarrier.arrive` on its
empty barrier) until the stores that read it are retired: bulk async-groups belong to the
thread that committed them, and only its `cp.async.bulk.wait_group.read N` (or
`wait_group N`), N small enough, says the store has read its source; the producer's next
TMA load into the stage may otherwise overwrite bytes the store has yet to read.

The pending stores are `hazards_bulk`'s facts ("bulk", store, age, moved): the issuing
thread's stores not yet retired, which a branch its threads cannot take drops. An arrive in
those threads is judged against each of them as `wgmma-smem-released` judges a wgmma:

- which stage: the store's source and the arrive's barrier as ring slots (`same_stage`: one
  counter, counters one defined from the other, or two views of one ring related by
  `stages.relation`), with the store's counter's moves since the store; a ring of one stage
  is always the same stage;
- which bytes: the store's source must overlap a TMA or bulk copy's destination whose copy
  waits on the released barrier (`guards.released_elsewhere` is the evidence that it does
  not; an arrive no copy waits for releases nothing, `guards.enables_no_copy`).

A store from a buffer no copy fills, or from another stage, is clean. The store's bytes are
bounded over the threads that run it (`hazards_bulk.spans_where_run`); a store of unknown
size is compared by its first byte, and a release only its unknown size could reach is a
note, as for `bulk-src-overwrite`. When the stage cannot be told (a ring slot against an
unrelated counter, two views whose distance differs between paths, or a barrier that is not
a ring slot), a store after which no wait_group retired any group is reported, and after one
that did the pipelined idiom is assumed (a note), as `wgmma-smem-released` does. Copies
whose offset the ranges cannot bound (they overlap everything in the symbol), or of unknown
box size that reach the store only past their ring stage, make a note too.
("bulk_retiring", store): a wait_group that retired some group ran since the store, on some
path; owned by the store's threads.

A store retired by one thread and a release by another (`bulk_done` facts, which a CTA
barrier clears) is reported when the releasing threads do not include the waiting one: the
wait orders that thread's later program only. A store still pending in its threads at a
CTA barrier (`bar.sync`/`barrier.sync`/`bar.red`, with or without a thread count, or a
cluster barrier) is pending for every thread past it, as the barrier orders their later
program after the store's issue but not after its read: ("bulk_seen", store, barrier,
moved, retiring), rebuilt at each barrier from the "bulk" facts there, so the issuer's
wait_group followed by a barrier retires it for all. An arrive whose threads include every
issuing one is left to their own "bulk" fact (the phase needs their arrive too); any other
is judged against the store as above ("retiring": the issuer's wait hint, for a stage that
cannot be told). The facts are built in every kernel with bulk stores: `bulk-src-overwrite`
judges writes after the barrier against them too (`hazards_bulk._seen_check`), leaving to
the arrive a copy a release lets in (`let_in_by_release`). Like `bulk_done`, a barrier
with a thread count is taken to order every thread that runs it (`bar.sync wg + 1, 128` of
two warpgroups: both). A store pending at a named barrier's `bar.arrive` whose partners'
`bar.sync` lies on another branch gets its "bulk_seen" facts there too
(`hazards_bulk_namedbar`), and a retirement before such an arrive is told to the partners
(`told`). Not seen: a store whose fact a later barrier of only other threads dropped.
Still reported: a release whose phase also needs the issuer's own arrive after its wait,
made at another arrive statement (as for `bulk_done`).

An mbarrier hands stores on too, to the threads past a wait on it (`hand_on`, `acquire`):
an arrive on a barrier of this CTA by threads that include the waiting one marks a
"bulk_done" fact with the arrive (its last field, the arrives that handed it on), and a
store still pending in the arriving threads gives ("bulk_handed", store, arrive, moved,
retiring), inert until a wait. A wait on the same barrier (`hazards_arrive._same_barriers`)
that sees a phase the arrive completes drops the marked "bulk_done" facts (the store is
retired for the waiting threads; the path of the other threads, around the wait, keeps
them) and turns "bulk_handed" into "bulk_seen" (the arrive as its barrier). Not the first
wait on a fresh barrier for parity 1 outside any loop but its retry loop
(`hazards_phase`): it passes at once. Not told: which trip's arrive a wait in a loop
pairs with. A CTA barrier clears "bulk_handed" as it does "bulk_done" (`sync`).

The same hand-off serves `smem-no-proxy-fence` (and wgmma's and tcgen05's proxy-fence
rules): a write fenced for the async proxy by its threads ("smem_fenced", write, via,
arrives) is marked by an arrive of threads that include every writing one, and a paired
wait drops it for the waiting threads, as a "bulk_done" fact. A `.relaxed` arrive or wait
(PTX 8.6) orders nothing: it hands on and acquires nothing, for all these facts.
"""

from __future__ import annotations

from typing import Any

from ..types import StateSpace
from .analysis import OWNED, PREPARE, Analysis, handles
from .findings import Hazard
from .guards import enables_no_copy, released_elsewhere, trip_guards
from .hazards_arrive import _same_barriers
from .hazards_bulk import MOVED, _definite, extent_where_run
from .hazards_bulk import _extent as extent_range
from .hazards_bulk_namedbar import told
from .hazards_phase import FirstTrip, _first_waits
from .hazards_ring import _apart, _load_extents, _loads, _slot, index_current, ring_index
from .hazards_wgmma import follow_relations, released_slot, same_stage
from .ops import Op, Role, _ev
from .overwrites import _uniform
from .stages import base
from .state import State
from .trywait import _spins

_STORES = (Role.TMA_STORE, Role.BULK_STORE)
_COPIES = (Role.TMA_LOAD, Role.BULK_LOAD)
# The facts an arrive hands on (their last field: those arrives) and the field naming the
# statement whose threads must all arrive: the wait_group that retired a store, a write
# fenced by its own threads (`sync.proxy_async_fence`).
_HANDED = {"bulk_done": 2, "smem_fenced": 1}


def _store_ring(an: Analysis, s: int) -> tuple | None:
    """The ring slot the store at statement s reads, when its index is a counter written in
    place (the register `hazards_bulk` counts the moves of) and current at the store."""
    key = ("release_ring", s)
    if key not in an.cache:
        smem = an.op_at[s].smem
        slot = _slot(an, smem)[1]
        ok = slot is not None and slot[0] == "ring" \
            and base(an.values, slot[1])[0] is slot[1] \
            and index_current(an, smem, slot[1], s)
        an.cache[key] = slot if ok else None
    return an.cache[key]


def _relations(an: Analysis) -> None:
    """Follow the counters of the rings stores read and arrives release, so a release
    through a second view of the ring (a cursor a tile behind) can be compared."""
    if not an.roles & set(_STORES) or Role.MBAR_ARRIVE not in an.roles:
        return
    counters = {}
    for op in an.ops:
        slot = None
        if op.role in _STORES:
            slot = _slot(an, op.smem)[1]
        elif op.role is Role.MBAR_ARRIVE and op.count is None:
            slot = _slot(an, op.mbar)[1]
        if slot is not None and slot[0] == "ring":
            c = ring_index(an, slot)[0]
            counters[id(c)] = c
    follow_relations(an, counters.values())


PREPARE.append(_relations)
OWNED.add("bulk_retiring")
MOVED.update(("bulk_seen", "bulk_handed"))


def _filled(an: Analysis, ext: tuple[Any, float, float]) -> str | None:
    """Does a TMA or bulk copy write bytes of the extent: 'yes' (one whose start the
    ranges bound, with the bytes it writes whatever its unknown size), 'maybe' (only
    copies at an offset they cannot bound, which overlap everything in the symbol, or
    through the estimated end of an unknown box; or a copy into an unknown buffer), None
    (no)?"""
    root, lo, hi = ext
    over = [o for o, a, b in _load_extents(an).get(id(root), ()) if a < hi and lo < b]
    for o in over:
        sure = _definite(an, o)
        if sure is not None and None not in sure[1:3]:
            a, b = extent_range(sure)
            if a < hi and lo < b:
                return "yes"
    if over or sum(map(len, _load_extents(an).values())) < len(_loads(an)):
        return "maybe"
    return None


def _handed_back(an: Analysis, op: Op, ext: tuple[Any, float, float]) -> str | None:
    """Does the release `op` hand bytes of `ext` to a copy: 'yes', 'maybe' (a copy of
    unknown destination or unbounded offset, or one of unknown box that would have to run
    past its ring stage), None (no: no copy writes them, or those that do wait on other
    barriers)."""
    filled = _filled(an, ext)
    if filled is None or released_elsewhere(an, [ext], op):
        return None
    if filled == "maybe" or released_elsewhere(an, [ext], op, assume=True):
        return "maybe"
    return "yes"


def _judge(an: Analysis, state: State, op: Op, released: Any, s: int,
           moved: int | None, retiring: bool) -> str | None:
    """'report', 'note' (the stage or the copies cannot be told), 'size' (only the
    store's unknown size reaches a refilled byte) or None (clean) for the release `op`
    against the store at s (`retiring`: a wait_group that retired some group ran since
    it)."""
    full = extent_where_run(an, an.op_at[s], False)
    if full is None:
        return None            # not a shared symbol the checker knows
    mine = _store_ring(an, s)
    if mine is not None and mine[2] == 1 and released[0] == "ring" and released[2] == 1:
        same: bool | None = True
    elif released[0] == "const" and (_slot(an, an.op_at[s].smem)[1] or ("",))[0] == "const":
        same = True            # no stage arithmetic: the copies' barriers decide
    else:
        same = same_stage(an, state, mine, moved, released)
    if same is False:
        return None            # another stage of the ring
    first = extent_where_run(an, an.op_at[s], True)
    hit = _handed_back(an, op, first) if first is not None else None
    if hit is None:
        # only the store's unknown size reaches a refilled byte: a note, as for
        # bulk-src-overwrite
        return "size" if _handed_back(an, op, full) is not None else None
    if hit == "maybe" or (same is None and retiring):
        return "note"          # (after a retiring wait: the pipelined idiom is assumed)
    return "report"


def let_in_by_release(an: Analysis, copy: Op) -> bool:
    """Does the TMA or bulk copy `copy` wait, on every trip, on a barrier that a release (a
    count-less arrive that lets a copy in) may arrive on? The release hands the copy its
    stage: a store pending in other threads at a CTA barrier before the release is judged at
    the release (`arrive`), not again at the copy (`bulk-src-overwrite`)."""
    if copy.role not in _COPIES:
        return False
    key = ("let_in_by_release", copy.index)
    if key not in an.cache:
        releases = [o for o in an.ops if o.role is Role.MBAR_ARRIVE and o.count is None
                    and not enables_no_copy(an, o)]
        an.cache[key] = any(not _apart(an, w, o) for w in trip_guards(an, copy)
                            for o in releases)
    return an.cache[key]


@handles(*_STORES)
def store(an: Analysis, state: State, op: Op, report: bool) -> State:
    """A new store: no wait_group has run since it."""
    fact = ("bulk_retiring", op.index)
    return State(state.must, state.may - {fact}, state.tx) if fact in state.may else state


@handles(Role.WAIT_GROUP)
def wait_group(an: Analysis, state: State, op: Op, report: bool) -> State:
    """A wait_group that retired some group (`hazards_bulk.wait_group` turned it into
    "bulk_done" facts): the stores it leaves pending remember it, as a wgmma's fact does."""
    if not any(f[0] == "bulk_done" and f[2] == op.index for f in state.may):
        return state
    marks = {("bulk_retiring", f[1]) for f in state.may if f[0] == "bulk"}
    return State(state.must, state.may | marks, state.tx) if marks - state.may else state


@handles(Role.CTA_BARRIER, Role.CLUSTER_BARRIER)
def barrier(an: Analysis, state: State, op: Op, report: bool) -> State:
    """A CTA barrier: the stores pending in their threads here ("bulk", which a branch of
    other threads drops) are pending for every thread past it ("bulk_seen"); those seen at
    an earlier barrier and retired since by their issuer (wait_group) are not."""
    if not an.roles & set(_STORES):
        return state
    seen = frozenset(("bulk_seen", f[1], op.index, f[3], ("bulk_retiring", f[1]) in state.may)
                     for f in state.may if f[0] == "bulk")
    old = frozenset(f for f in state.may if f[0] == "bulk_seen")
    return state if seen == old else State(state.must, (state.may - old) | seen, state.tx)


@handles(Role.MBAR_ARRIVE)
def arrive(an: Analysis, state: State, op: Op, report: bool) -> State:
    """A count-less arrive (a consumer's release of a ring stage): `bulk-src-released` when a
    TMA or bulk store of this thread not yet retired by a wait_group, or retired only in
    another thread with no CTA barrier since, or pending in other threads at a CTA barrier
    since, reads the released stage."""
    if not report or op.count is not None \
            or not any(f[0] in ("bulk", "bulk_done", "bulk_seen") for f in state.may) \
            or enables_no_copy(an, op):
        return state
    released = released_slot(an, op)
    found: list[tuple[str, str, int, tuple[str, int] | None]] = []
    for s, age, moved in an.pending(state, "bulk"):
        verdict = _judge(an, state, op, released, s, moved, ("bulk_retiring", s) in state.may)
        if verdict is not None:
            how = ("it was never committed" if age is None else "no "
                   "cp.async.bulk.wait_group.read since has retired its group (wait_group N "
                   "retires all but the N most recent groups)")
            found.append((verdict, how, s, None))
    for s, w, moved, _ in an.pending(state, "bulk_done"):
        # (the waiting thread among the releasing ones: the phase needs its arrive too)
        if an.div.same_threads(op.index, w) or told(an, state, s, w, op.index):
            continue
        verdict = _judge(an, state, op, released, s, moved, ("bulk_retiring", s) in state.may)
        if verdict is not None:
            found.append((verdict, "the thread that waited for it with "
                          "cp.async.bulk.wait_group.read is not among the threads that "
                          "arrive, and no CTA barrier follows that wait", s, ("wait", w)))
    for s, b, moved, retiring in an.pending(state, "bulk_seen"):
        # (the issuing threads among the releasing ones: their own "bulk" fact judges it,
        # and the phase needs their arrive too; a condition the same in every thread, such
        # as FlashAttention's "a Q stage is owed", may skip the arrive, not change who runs it)
        if an.div.same_threads(op.index, s, _uniform(an)):
            continue
        verdict = _judge(an, state, op, released, s, moved, retiring)
        if verdict is not None:
            role, where, what = crossed(an, b, "these threads")
            found.append((verdict, "other threads issued it and had not retired its group "
                          f"with cp.async.bulk.wait_group.read at {where} since: the {what} "
                          "orders the arrive after the store's issue, not after its read",
                          s, (role, b)))
    found.sort(key=lambda x: ("report", "note", "size").index(x[0]))
    for verdict, how, s, extra in found[:1]:
        sites = [("arrive", op.index), ("store", s)] + ([extra] if extra is not None else [])
        if verdict == "size":
            an.note("bulk-src-released", f"the size of the {an.op_at[s].role.value} from "
                    f"{an.describe(an.op_at[s].smem)} is unknown: only its first byte is "
                    "compared with the bytes this arrive lets a copy refill (pass its box "
                    "with maps={...})", sites)
        elif verdict == "note":
            an.note("bulk-src-released", "this arrive may hand back the source of a bulk "
                    f"store still reading it ({how}); the checker cannot tell whether the "
                    "stage it releases is the one the store reads (or whether a copy "
                    "refills those bytes)", sites)
        else:
            an.report(Hazard.BULK_SRC_RELEASED, "this mbarrier.arrive hands shared memory "
                      f"back to its producer while a {an.op_at[s].role.value} may still read "
                      f"it from {an.describe(an.op_at[s].smem)} ({how})", sites,
                      dedupe=("released", op.index))
    return state


# -- a retirement handed on through an mbarrier -------------------------------------------------
@handles(Role.MBAR_ARRIVE)
def hand_on(an: Analysis, state: State, op: Op, report: bool) -> State:
    """An arrive on a barrier of this CTA by threads that include the one that issued a
    store, or whose wait_group retired it, or that wrote shared memory and fenced it for the
    async proxy: the arrive releases what that thread's program did before it to the
    threads whose wait on the barrier sees the phase it completes (`acquire`). A retired
    store's "bulk_done" fact and a fenced write's "smem_fenced" fact remember the arrive
    (their last field, the arrives that handed them on); a store still pending here is
    handed on as pending ("bulk_handed", store, arrive, moved, retiring: inert until such a
    wait), as a CTA barrier does ("bulk_seen"): the arrive orders the waiters' writes after
    the store's issue, not after its read. A write not yet fenced is not handed on: the
    fence must come first in the writing thread. A `.relaxed` arrive releases nothing."""
    if op.space is StateSpace.shared_cluster or an.key(op, "mbar") is None \
            or _relaxed(an, op):
        return state   # (a peer's barrier, through mapa: not one this CTA's threads wait on)
    done = {f for f in state.may if f[0] in _HANDED and op.index not in f[-1]
            and an.div.same_threads(op.index, f[_HANDED[f[0]]])}
    handed = {("bulk_handed", f[1], op.index, f[3], ("bulk_retiring", f[1]) in state.may)
              for f in state.may if f[0] == "bulk" and an.div.same_threads(op.index, f[1])}
    if not done and handed <= state.may:
        return state
    marked = {(*f[:-1], f[-1] | {op.index}) for f in done}
    return State(state.must, (state.may - done) | marked | handed, state.tx)


@handles(Role.MBAR_WAIT)
def acquire(an: Analysis, state: State, op: Op, report: bool) -> State:
    """A wait on a barrier that an arrive handing on a store or a fenced write arrived on
    (`hand_on`), for the threads past the wait (the path of the other threads, around the
    wait, keeps the facts as they were): a store retired before the arrive is retired for
    them too, and a write fenced before it is visible to their async-proxy reads (a TMA
    or bulk store, wgmma); a store pending at the arrive is pending for every thread past
    the wait ("bulk_seen", judged by `hazards_bulk._seen_check`). A wait that sees no
    phase the arrive completes acquires nothing: the first wait on a fresh barrier for
    parity 1, outside any loop but its own retry loop, passes at once; nor does a
    `.relaxed` wait."""
    if not any(f[0] == "bulk_handed" or f[0] in _HANDED and f[-1] for f in state.may) \
            or not an.runs_somewhere(op.index) or _passes_at_once(an, op) \
            or _relaxed(an, op):
        return state
    def paired(i: int) -> bool:
        return any(_same_barriers(an, a, op) for a in arrives_at(an, i))

    got = {f for f in state.may if f[0] in _HANDED and any(map(paired, f[-1]))}
    seen = {f for f in state.may if f[0] == "bulk_handed" and paired(f[2])}
    if not got and not seen:
        return state
    return State(state.must, (state.may - got - seen)
                 | {("bulk_seen", *f[1:]) for f in seen}, state.tx)


def _relaxed(an: Analysis, op: Op) -> bool:
    """A `.relaxed` arrive or wait (PTX 8.6): it releases or acquires nothing."""
    return _ev(getattr(an.body[op.index].insn, "sem", None)) == "relaxed"


def crossed(an: Analysis, b: int, who: str) -> tuple[str, str, str]:
    """How a message names the statement b that a "bulk_seen" fact was built at, for the
    threads `who` past it: (the site's role, the place, what orders them). A CTA barrier
    (`barrier`, or a `bar.sync`/`bar.red` with a thread count); a named barrier's
    `bar.arrive`, carried to its partners' `bar.sync` (`hazards_bulk_namedbar`); an
    mbarrier.arrive whose phase they waited for (`hand_on`, `acquire`)."""
    if arrives_at(an, b):
        return "arrive", f"the mbarrier.arrive whose phase {who} waited for", "hand-off"
    insn = an.body[b].insn
    if type(insn).__name__ == "Barrier" and _ev(insn.op) != "sync":
        ident = an.const(insn.id)
        return ("barrier", f"the named barrier's bar.arrive{'' if ident is None else f' {ident}'}"
                f" (whose partner bar.sync {who} ran)", "named barrier")
    return "barrier", "the CTA barrier", "barrier"


def arrives_at(an: Analysis, i: int) -> list[Op]:
    """The mbarrier arrives of statement i (an inline-PTX statement may hold several)."""
    table = an.cache.get("arrives_at")
    if table is None:
        table = an.cache["arrives_at"] = {}
        for o in an.ops:
            if o.role is Role.MBAR_ARRIVE:
                table.setdefault(o.index, []).append(o)
    return table.get(i, [])


def _passes_at_once(an: Analysis, op: Op) -> bool:
    """Is the wait the first on a fresh barrier, for parity 1 (the phase before the first,
    counted as completed: `hazards_phase`), and run once (in no loop but its retry loop)?"""
    key = ("passes_at_once", op.index)
    if key not in an.cache:
        block = an.cfg.block_of(op.index)
        once = all(block not in body or _spins(an, op, h, body) for h, body in an.loops)
        an.cache[key] = once and Role.MBAR_INIT in an.roles and any(
            w is op and p == 1 for w, p in _first_waits(an, FirstTrip(an)))
    return an.cache[key]
