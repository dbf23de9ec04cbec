"""Tensor memory (Blackwell's tcgen05 family): its allocation, and the ordering of the
asynchronous tcgen05 operations (PTX ISA, "Tensor Memory" and "Memory Consistency Model for
5th generation of TensorCore operations").

- `tmem-use-before-alloc`: an asynchronous tcgen05 operation or a dealloc on a path that ran
  no tcgen05.alloc, or on a constant address (not the one the alloc wrote); the address slot
  an alloc writes read before the alloc on some path, or by threads that did not run it with
  no barrier (bar.sync, a cluster barrier or an mbarrier wait) between the alloc and the
  read.
- `tmem-not-deallocated`: an exit reachable by the allocating warp from its alloc without a
  dealloc of the same `.cta_group` (ISA: all of it must be deallocated before the kernel
  exits). A dealloc run by another warp counts when every path from the alloc passes it.
- `tmem-permit-not-relinquished` (warning): the same for relinquish_alloc_permit.
- `tmem-alloc-after-relinquish`: an alloc after a relinquish_alloc_permit of the CTA on
  some path (ISA: illegal).
- `tmem-read-before-commit-wait`: a tcgen05.ld or st (or a dealloc) while a tcgen05.mma may still
  write tensor memory: not committed (tcgen05.commit), or committed to an mbarrier no wait
  after it waited on.
- `tcgen05-ld-no-wait`: a tcgen05.ld whose read of tensor memory has not completed
  (tcgen05.wait::ld) when this thread writes tensor memory (mma, st, cp, shift), frees it, or
  hands it to other threads (a barrier or an arrive). Its registers are another matter: the
  ISA orders a true register dependency on them, so reading them is not reported.
- `tcgen05-st-no-wait`: a tcgen05.st whose write has not completed (tcgen05.wait::st) when
  this thread reads or writes tensor memory with another asynchronous operation (ld, mma, cp,
  shift), frees it, or hands it to other threads.
- `tcgen05-fence-missing`: an asynchronous tcgen05 operation before a synchronisation that
  hands tensor memory over (mbarrier.arrive, barrier.cluster.arrive, a bar.sync of the whole
  CTA) with no tcgen05.fence::before_thread_sync between them (tcgen05.commit does it for the
  mma, cp and shift it tracks), when tcgen05 instructions may follow the synchronisation; or
  one after such a synchronisation (an mbarrier wait, a cluster barrier, a bar.sync of the
  whole CTA) with no tcgen05.fence::after_thread_sync between them, when tcgen05
  instructions ran before it. Either way the synchronisation is taken to order tcgen05 work
  between threads; a barrier with a thread count (some warps' own) is taken not to.
- `tcgen05-cta-group-mixed`: tcgen05 instructions of one kernel with different
  `.cta_group` values (ISA: all must specify the same).

A tcgen05.commit's mbarrier is checked as an arrive's (`hazards_mbar`: initialised, and
the init published). The checker does not tell tensor-memory columns apart: an mma, ld or
st is taken to touch whatever the others touch.

Facts (may): ("tm_live", alloc, cta_group), ("tm_permit", alloc, cta_group) owned by the
allocating threads; ("tm_gave_up", relinquish); ("tm_unpublished", alloc) until a barrier;
("tm_mma", mma, commits) owned by the issuing thread until a wait on one of the commits'
barriers (a commit tracks every earlier mma of its thread); ("tm_open", acquirer, mma) from
each issue of the mma until the acquirer (`_acquirers`: a wait on the barrier of a commit
that may follow the mma, or a CTA barrier after such a wait in any thread) runs, owned by
the acquirer's threads (the other threads' path around the epilogue warps' wait says
nothing of those warps). A reader is reported while some mma is open for every acquirer
whose threads cover its own: a loop whose every turn waits leaves nothing open after it
(its zero-turn path issued nothing, its last turn waited), a turn that may skip the wait
does; ("tm_ld", ld) until wait::ld, ("tm_st", st) until wait::st; ("tm_unfenced", op,
kind) until fence::before_thread_sync (or a commit), ("tm_waited", op, kind) once a
wait::ld/st completed it; ("tm_synced", sync) until fence::after_thread_sync; ("tm_seen",)
once any tcgen05 instruction ran. Must: ("tm_alloc",) once an alloc ran on every
path; ("tm_freed", cg) / ("tm_relinquished", cg) once a dealloc / relinquish followed
the last alloc.
"""

from __future__ import annotations

from typing import Any

from ..operands import Addr, Reg
from .analysis import EXIT_CHECKS, OWNED, STRUCTURAL, Analysis, handles, keys_match
from .findings import Hazard
from .hazards_mbar import _use as mbarrier_use
from .ops import Op, Role
from .state import State

OWNED.update({"tm_live", "tm_permit", "tm_unfenced", "tm_waited", "tm_synced", "tm_ld", "tm_st",
              "tm_mma", "tm_open"})
_TC = frozenset({Role.TC_ALLOC, Role.TC_DEALLOC, Role.TC_RELINQUISH, Role.TC_FENCE,
                 Role.TC_COMMIT, Role.TC_WAIT, Role.TC_ASYNC})
_TRACKED = frozenset({"mma", "cp", "shift"})    # what tcgen05.commit tracks (and fences)
_WRITES = frozenset({"mma", "st", "cp", "shift"})
_USES = {"ld": "reads", "st": "writes", "mma": "uses", "cp": "writes", "shift": "moves"}


def _with(state: State, add: Any = (), drop: Any = None, must: frozenset | None = None) -> State:
    may = state.may
    if drop is not None:
        may = frozenset(f for f in may if not drop(f))
    if add:
        may = may | frozenset(add)
    if must is None and may is state.may:
        return state
    return State(state.must if must is None else must, may, state.tx)


def _pending(state: State, tag: str) -> list[tuple]:
    return sorted((f for f in state.may if f[0] == tag), key=lambda f: (f[1], repr(f)))


def _slot_allocs(an: Analysis) -> list[Op]:
    got = an.cache.get("tm_allocs")
    if got is None:
        got = an.cache["tm_allocs"] = [o for o in an.ops if o.role is Role.TC_ALLOC]
    return got


def _tc_follows(an: Analysis, i: int) -> bool:
    """Can a tcgen05 instruction run after statement i (later in its block, or in a block
    reachable from it)?"""
    reaching = an.cache.get("tm_reaching")
    if reaching is None:
        # the blocks from which a tcgen05 instruction can be reached, grown to a fixed point
        # (one pass per loop nesting level, a few in practice)
        blocks = an.cfg.blocks
        reaching = {b.id for b in blocks if any(o.role in _TC for o in an.by_block[b.id])}
        grown = True
        while grown:
            grown = False
            for b in reversed(blocks):
                if b.id not in reaching and any(s in reaching for s in an.cfg.succs(b.id)):
                    reaching.add(b.id)
                    grown = True
        an.cache["tm_reaching"] = reaching
    start = an.cfg.block_of(i)
    return any(o.role in _TC and o.index > i for o in an.by_block[start]) or any(
        s in reaching for s in an.cfg.succs(start))


# -- allocation ----------------------------------------------------------------------------------
def _need_alloc(an: Analysis, state: State, op: Op, what: str) -> None:
    if ("tm_alloc",) not in state.must:
        allocs = _slot_allocs(an)
        why = ("no tcgen05.alloc runs in this kernel" if not allocs else
               "some path reaches it without passing a tcgen05.alloc")
        # (a kernel with no alloc at all is one mistake, reported at its first use)
        an.report(Hazard.TMEM_USE_BEFORE_ALLOC, f"{what} uses tensor memory, but {why}",
                  [("use", op.index)] + [("alloc", a.index) for a in allocs[:1]],
                  dedupe=("unallocated", op.index if allocs else None))
        return
    # A constant address is a guess at what the alloc will return at run time.
    taddr = op.value.base if isinstance(op.value, Addr) else op.value
    value = an.const(taddr) if isinstance(taddr, Reg) else None
    if value is not None:
        an.report(Hazard.TMEM_USE_BEFORE_ALLOC, f"{what} uses the constant tensor-memory "
                  f"address {value:#x}, not the one tcgen05.alloc wrote to shared memory (read "
                  "the address from there)", [("use", op.index)], dedupe=("constant", op.index))


@handles(Role.TC_ALLOC)
def alloc(an: Analysis, state: State, op: Op, report: bool) -> State:
    """tcgen05.alloc: `tmem-alloc-after-relinquish`; then the columns are live and the
    permit held (by the allocating warp) until a dealloc and a relinquish."""
    i = op.index
    if report:
        for (r,) in [f[1:] for f in _pending(state, "tm_gave_up")][:1]:
            an.report(Hazard.TMEM_ALLOC_AFTER_RELINQUISH, "this tcgen05.alloc may run after "
                      "the CTA gave up its right to allocate (tcgen05.relinquish_alloc_permit)",
                      [("alloc", i), ("relinquish", r)])
    add = {("tm_live", i, op.n), ("tm_unpublished", i), ("tm_seen",)}
    if ("tm_relinquished", op.n) not in state.must:   # (else that is the finding above)
        add.add(("tm_permit", i, op.n))
    must = state.must - {("tm_freed", op.n), ("tm_relinquished", op.n)}
    if an.runs_somewhere(i):
        must = must | {("tm_alloc",)}
    return _with(state, add, must=must)


@handles(Role.TC_DEALLOC)
def dealloc(an: Analysis, state: State, op: Op, report: bool) -> State:
    """tcgen05.dealloc: `tmem-use-before-alloc`, `tmem-read-before-commit-wait` (an mma may
    still write the columns), `tcgen05-ld-no-wait` (an ld may still read them)."""
    if report:
        _need_alloc(an, state, op, "this tcgen05.dealloc")
        _mma_in_flight(an, state, op, "tcgen05.dealloc frees tensor memory")
        _ld_in_flight(an, state, op, "tcgen05.dealloc frees tensor memory")
        _st_in_flight(an, state, op, "tcgen05.dealloc frees tensor memory")
    return _with(state, {("tm_seen",)}, drop=lambda f: f[0] == "tm_live" and f[2] == op.n,
                 must=state.must | {("tm_freed", op.n)})


@handles(Role.TC_RELINQUISH)
def relinquish(an: Analysis, state: State, op: Op, report: bool) -> State:
    """tcgen05.relinquish_alloc_permit: no alloc may follow in this CTA."""
    return _with(state, {("tm_gave_up", op.index), ("tm_seen",)},
                 drop=lambda f: f[0] == "tm_permit" and f[2] == op.n,
                 must=state.must | {("tm_relinquished", op.n)})


@handles(Role.SMEM_READ)
def slot_read(an: Analysis, state: State, op: Op, report: bool) -> State:
    """A shared read of the slot an alloc writes its address to: `tmem-use-before-alloc`
    when the alloc may not have run, or ran in other threads with no barrier since."""
    if not report or Role.TC_ALLOC not in an.roles:
        return state
    key = an.key(op, "smem")
    mine = [a for a in _slot_allocs(an) if keys_match(an.key(a, "smem"), key)]
    if not mine:
        return state
    if ("tm_alloc",) not in state.must:
        an.report(Hazard.TMEM_USE_BEFORE_ALLOC, "this reads the tensor-memory address "
                  f"tcgen05.alloc writes to {an.describe(op.smem)}, but some path reaches "
                  "it without passing the alloc", [("read", op.index), ("alloc", mine[0].index)])
        return state
    ids = {a.index for a in mine}
    for (a,) in [f[1:] for f in _pending(state, "tm_unpublished") if f[1] in ids]:
        if not an.div.same_threads(a, op.index):
            an.report(Hazard.TMEM_USE_BEFORE_ALLOC, "this reads the tensor-memory address "
                      f"tcgen05.alloc writes to {an.describe(op.smem)} in threads that did "
                      "not run the alloc, with no barrier between the alloc and the read "
                      "(bar.sync, then tcgen05.fence::after_thread_sync before using it)",
                      [("read", op.index), ("alloc", a)])
            break
    return state


def tmem_exit(an: Analysis, state: State, at: int | None) -> None:
    """`tmem-not-deallocated` / `tmem-permit-not-relinquished` at an exit the allocating
    warp may reach."""
    for tag, done, hazard, what in (
            ("tm_live", "tm_freed", Hazard.TMEM_NOT_DEALLOCATED,
             "the tensor memory this tcgen05.alloc takes is not deallocated "
             "(tcgen05.dealloc)"),
            ("tm_permit", "tm_relinquished", Hazard.TMEM_PERMIT_NOT_RELINQUISHED,
             "the CTA keeps the right to allocate this tcgen05.alloc used: no "
             "tcgen05.relinquish_alloc_permit follows it")):
        for f in _pending(state, tag):
            if (done, f[2]) not in state.must:
                an.report(hazard, f"{what} before the kernel exits on some path",
                          [("alloc", f[1]), ("exit", at)], dedupe=(tag, f[1]))


EXIT_CHECKS.append(tmem_exit)


# -- asynchronous operations -----------------------------------------------------------------------
def _mma_in_flight(an: Analysis, state: State, op: Op, does: str) -> None:
    """`tmem-read-before-commit-wait`: an mma of this thread not yet complete, or an mma of
    any thread issued on some path to this op with no wait on a commit's barrier (or a
    barrier after one) since, run by threads that cover this op's."""
    for f in _pending(state, "tm_mma"):
        how = ("it was never committed (tcgen05.commit)" if not f[2] else
               "no mbarrier wait on its tcgen05.commit's barrier came after the commit")
        an.report(Hazard.TMEM_READ_BEFORE_COMMIT_WAIT, f"this {does} while the tcgen05.mma "
                  f"that writes it may still run: {how}",
                  [("use", op.index), ("mma", f[1])] + [("commit", c) for c in sorted(f[2])[-1:]],
                  dedupe=("mma", op.index))
        return
    open_ = _open(state)
    mine = [a for a in _acquirers(an) if an.div.same_threads(a, op.index)]
    for mma in sorted({m for _a, m in open_}):
        if all((a, mma) in open_ for a in mine):
            an.report(Hazard.TMEM_READ_BEFORE_COMMIT_WAIT, f"this {does}, but the threads "
                      "that run it waited on no tcgen05.commit's mbarrier (nor passed a "
                      "barrier after such a wait) since a tcgen05.mma that may write it",
                      [("use", op.index), ("mma", mma)], dedupe=("mma", op.index))
            return


def _open(state: State) -> set[tuple[int, int]]:
    """(acquirer, mma) of every tm_open fact."""
    return {(f[1], f[2]) for f in state.may if f[0] == "tm_open"}


def _acquirers(an: Analysis) -> list[int]:
    """The statements that may order threads after an mma (each standing, `_canonical`, for
    those run by the same threads with the same barrier key): the waits on a barrier a
    tcgen05.commit may arrive on (unless a uniform guard may skip them), and the CTA and
    cluster barriers."""
    got = an.cache.get("tm_acquirers")
    if got is None:
        commits = [c.index for c in an.ops if c.role is Role.TC_COMMIT]
        got = an.cache["tm_acquirers"] = sorted({_canonical(
            an, o.index, an.key(o, "mbar") if o.role is Role.MBAR_WAIT else None)
            for o in an.ops if o.role in (Role.CTA_BARRIER, Role.CLUSTER_BARRIER) or (
                o.role is Role.MBAR_WAIT and an.runs_somewhere(o.index)
                and any(_same_barrier(an, c, an.key(o, "mbar")) for c in commits))})
    return got


def _ld_in_flight(an: Analysis, state: State, op: Op, does: str) -> None:
    for f in _pending(state, "tm_ld"):
        an.report(Hazard.TCGEN05_LD_NO_WAIT, f"this {does} while a tcgen05.ld of this thread "
                  "may still be reading tensor memory (no tcgen05.wait::ld since)",
                  [("here", op.index), ("ld", f[1])], dedupe=("ld", op.index))
        return


def _st_in_flight(an: Analysis, state: State, op: Op, does: str) -> None:
    for f in _pending(state, "tm_st"):
        an.report(Hazard.TCGEN05_ST_NO_WAIT, f"this {does} while a tcgen05.st of this thread "
                  "may still be writing tensor memory (no tcgen05.wait::st since)",
                  [("here", op.index), ("st", f[1])], dedupe=("st", op.index))
        return


@handles(Role.TC_ASYNC)
def async_op(an: Analysis, state: State, op: Op, report: bool) -> State:
    """mma, cp, shift, ld, st: the allocation, the fence after a synchronisation, an mma in
    flight (ld), an ld in flight (writes); then the op is pending until its completion
    mechanism and unfenced until fence::before_thread_sync."""
    kind = op.field or "?"
    i = op.index
    if report:
        name = f"tcgen05.{kind}"
        _need_alloc(an, state, op, f"this {name}")
        for (s,) in [f[1:] for f in _pending(state, "tm_synced")][:1]:
            an.report(Hazard.TCGEN05_FENCE_MISSING, f"this {name} follows a thread "
                      "synchronisation with no tcgen05.fence::after_thread_sync between them: "
                      "it is not ordered after the tcgen05 work other threads did before "
                      "synchronising", [(kind, i), ("sync", s)], dedupe=("after", s))
        if kind in ("ld", "st"):
            # (mma -> mma and mma -> shift are pipelined: they run in issue order)
            _mma_in_flight(an, state, op, f"{name} {_USES[kind]} tensor memory")
        if kind in _WRITES:
            _ld_in_flight(an, state, op, f"{name} writes tensor memory")
        if kind != "st":
            _st_in_flight(an, state, op, f"{name} {_USES[kind]} tensor memory")
    add: set[tuple] = {("tm_unfenced", i, kind), ("tm_seen",)}
    if kind == "mma":
        # Issued again, it is acquired by nothing yet: what waits acquired an earlier turn's
        # issue does not carry over to this one.
        add |= {("tm_mma", i, frozenset())}
        add |= {("tm_open", a, i) for a in _acquirers(an)}
        return _with(state, add, drop=lambda f: f[0] == "tm_open" and f[2] == i)
    if kind in ("ld", "st"):
        add.add((f"tm_{kind}", i))
    return _with(state, add)


@handles(Role.TC_COMMIT)
def commit(an: Analysis, state: State, op: Op, report: bool) -> State:
    """tcgen05.commit: its mbarrier must be initialised (`mbar-uninit` /
    `mbar-init-unsynced`, as for an arrive: the commit arrives on it); every earlier mma of
    this thread completes on the barrier (too); it fences the mma, cp and shift it tracks (the
    ISA's implicit before_thread_sync)."""
    if report:
        # A multicast commit arrives in the peer CTAs too, but is checked as a CTA-local
        # use: hazards_mbar's cluster check takes an init fenced in a second `if tid == 0`
        # (the same thread) as unfenced on the other threads' path around it.
        mbarrier_use(an, state, op, "thread")
    may = frozenset(("tm_mma", f[1], f[2] | {op.index}) if f[0] == "tm_mma" else f
                    for f in state.may if not (f[0] == "tm_unfenced" and f[2] in _TRACKED))
    return State(state.must, may | {("tm_seen",)}, state.tx)


@handles(Role.TC_WAIT)
def wait(an: Analysis, state: State, op: Op, report: bool) -> State:
    """tcgen05.wait::ld completes this thread's loads, wait::st its stores (still to be
    fenced before a synchronisation that hands tensor memory over)."""
    tag = f"tm_{op.field}"
    done = frozenset(("tm_waited", *f[1:]) for f in state.may
                     if f[0] == "tm_unfenced" and f[2] == op.field)
    return _with(state, done, drop=lambda f: f[0] == tag or f[0] == "tm_unfenced"
                 and f[2] == op.field)


@handles(Role.TC_FENCE)
def fence(an: Analysis, state: State, op: Op, report: bool) -> State:
    """fence::before_thread_sync orders the async ops before it before the next
    synchronisation; fence::after_thread_sync the ones after it after the last."""
    tags = ("tm_unfenced", "tm_waited") if op.field == "before" else ("tm_synced",)
    return _with(state, drop=lambda f: f[0] in tags)


# -- thread synchronisation ------------------------------------------------------------------------
def _release(an: Analysis, state: State, op: Op) -> None:
    """A synchronisation this thread's earlier tcgen05 work may be handed over by: its loads
    and stores must be complete; before an arrive or a CTA-wide barrier (`_hands_over`) they
    and the other async ops must also be fenced (the ISA's pattern: ld, wait::ld,
    fence::before_thread_sync, arrive)."""
    tags = ("tm_unfenced", "tm_waited") if _hands_over(an, op) else ()
    if not any(f[0] in tags or f[0] in ("tm_ld", "tm_st") for f in state.may) or \
            not _tc_follows(an, op.index):
        return
    _ld_in_flight(an, state, op, "thread synchronisation hands tensor memory to other threads")
    _st_in_flight(an, state, op, "thread synchronisation hands tensor memory to other threads")
    for f in sorted((f for f in state.may if f[0] in tags), key=lambda f: f[1])[:1]:
        an.report(Hazard.TCGEN05_FENCE_MISSING, f"this thread synchronisation follows a "
                  f"tcgen05.{f[2]} with no tcgen05.fence::before_thread_sync between them: "
                  "threads that synchronise with it are not ordered after that operation",
                  [("sync", op.index), (f[2], f[1])], dedupe=("before", op.index))


def _hands_over(an: Analysis, op: Op) -> bool:
    """Can tensor memory change hands at this synchronisation: an mbarrier or cluster arrive
    or wait, or a barrier of the whole CTA (no thread count)? A barrier of some warps (their
    own, around a staging buffer) is taken to order nothing of tensor memory."""
    if op.role in (Role.MBAR_ARRIVE, Role.CLUSTER_ARRIVE, Role.MBAR_WAIT,
                   Role.CLUSTER_BARRIER):
        return True
    if op.role is Role.NAMED_BARRIER:
        return False
    return not any(o.role is Role.NAMED_BARRIER and o.index == op.index
                   for o in an.by_block[an.cfg.block_of(op.index)])


def _acquire(an: Analysis, state: State, op: Op) -> State:
    """A synchronisation that later tcgen05 work of this thread must be fenced after; it
    publishes allocs. A wait on a commit's barrier completes this thread's mmas committed to
    it and orders its threads after them (closes their tm_open facts of it); a CTA barrier
    after such a wait (in any thread: the epilogue warps of a warp-specialised kernel) does
    both for every thread."""
    if not any(f[0] in ("tm_seen", "tm_unpublished") for f in state.may):
        return state
    if op.role is Role.MBAR_WAIT:
        key = an.key(op, "mbar")
        at = _canonical(an, op.index, key)
        # (a wait a uniform guard may skip acquires nothing, as in `_acquirers`)
        closed = {f for f in state.may if f[0] == "tm_open" and f[1] == at
                  and an.runs_somewhere(op.index)
                  and any(_same_barrier(an, c, key) for c in _commits_after(an, f[2]))}
        done = {f for f in state.may if f[0] == "tm_mma"
                and any(_same_barrier(an, c, key) for c in f[2])}
    else:
        at = _canonical(an, op.index, None)
        opened = _open(state)
        # mmas some acquirer (some threads' wait, on every path) has closed
        waited = {m for _a, m in opened if any((a, m) not in opened for a in _acquirers(an)
                                                if a != at)}
        closed = {f for f in state.may if f[0] == "tm_open" and f[1] == at and f[2] in waited}
        done = {f for f in state.may if f[0] == "tm_mma" and f[1] in waited}
    add = {("tm_synced", op.index)} if ("tm_seen",) in state.may and _hands_over(an, op) \
        else set()
    return _with(state, add, drop=lambda f: f in done or f in closed
                 or f[0] == "tm_unpublished")


def _canonical(an: Analysis, i: int, key: Any) -> int:
    """One statement standing for every statement run by the same threads as statement i with
    the same barrier key (None for a CTA barrier): one acquirer serves them all, so a loop
    of waits does not grow the state, and paths through two of them still agree."""
    memo = an.cache.setdefault("tm_canonical", {})
    sig = (an.div.stmt_tokens(i), key)
    return memo.setdefault(sig, i)


def _commits_after(an: Analysis, mma: int) -> list[int]:
    """The commits that may run after the mma at statement `mma` (later in its block, or in
    a block reachable from it): those that may track it. (Which thread commits is not
    asked: the other threads' path around the issuer's commit never passes it, so a
    path-wise set of commits would lose it where the paths join.)"""
    memo = an.cache.setdefault("tm_commits_after", {})
    got = memo.get(mma)
    if got is None:
        start = an.cfg.block_of(mma)
        seen: set[int] = set()
        todo = list(an.cfg.succs(start))
        while todo:
            b = todo.pop()
            if b not in seen:
                seen.add(b)
                todo.extend(an.cfg.succs(b))
        got = memo[mma] = [o.index for o in an.ops if o.role is Role.TC_COMMIT and (
            an.cfg.block_of(o.index) in seen
            or an.cfg.block_of(o.index) == start and o.index >= mma)]
    return got


def _same_barrier(an: Analysis, commit: int, key: Any) -> bool:
    """May the commit at statement `commit` arrive on the barrier a wait's `key` names?
    (Unknown keys may.)"""
    commits = an.cache.get("tm_commits")
    if commits is None:   # (by statement: an inline one may hold an mma before its commit)
        commits = an.cache["tm_commits"] = {o.index: o for o in an.ops
                                            if o.role is Role.TC_COMMIT}
    mine = an.key(commits[commit], "mbar")
    return key is None or mine is None or keys_match(mine, key)


@handles(Role.CTA_BARRIER, Role.CLUSTER_BARRIER)
def barrier(an: Analysis, state: State, op: Op, report: bool) -> State:
    """bar.sync (and a cluster barrier): releases and acquires; publishes allocs."""
    if not an.roles & _TC:
        return state
    if report:
        _release(an, state, op)
    return _acquire(an, state, op)


@handles(Role.MBAR_WAIT)
def mbar_wait(an: Analysis, state: State, op: Op, report: bool) -> State:
    """An mbarrier wait: completes the mmas committed to its barrier; acquires."""
    if not an.roles & _TC:
        return state
    return _acquire(an, state, op)


@handles(Role.MBAR_ARRIVE, Role.CLUSTER_ARRIVE, Role.NAMED_BARRIER)
def arrive(an: Analysis, state: State, op: Op, report: bool) -> State:
    """An arrive (mbarrier, cluster, or bar.arrive): releases."""
    if report and an.roles & _TC:
        _release(an, state, op)
    return state


# -- the whole kernel -----------------------------------------------------------------------------
def cta_group_mixed(an: Analysis) -> None:
    """`tcgen05-cta-group-mixed`: two .cta_group values among the kernel's tcgen05 ops."""
    groups: dict[int, list[int]] = {}
    for o in an.ops:
        if o.role in _TC and o.n is not None:
            groups.setdefault(o.n, []).append(o.index)
    if len(groups) < 2:
        return
    (a, first), (b, other) = sorted(groups.items(), key=lambda g: (-len(g[1]), g[0]))[:2]
    an.report(Hazard.TCGEN05_CTA_GROUP_MIXED, f"this tcgen05 instruction names "
              f".cta_group::{b} while the kernel's others name .cta_group::{a} (all tcgen05 "
              "instructions of a kernel must name the same)",
              [("here", other[0]), ("other", first[0])])


STRUCTURAL.append(cta_group_mixed)
