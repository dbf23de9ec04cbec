"""Ring (multi-stage pipeline) discipline: reads of TMA destinations before the wait that
covers them or after a wait on another stage's (or another ring's) barrier, parities that
flip every iteration on a ring of several stages, and try_wait results nobody loops on.
(Refills without a wait: `hazards_refill`; two copies of one phase on the same bytes:
`hazards_overlap`; stage counts the two sides disagree on: `hazards_stages`.)

Stages are recognised by `ranges`: `base + stride * (i % N)` / `i & (N-1)` on a counter i,
a stage register advanced in place (`stages.wrap_count`: MbarrierRing's views), or constant
offsets (a prologue that fills stage 0, 1, ...). A wait "covers" a read when its barrier is
the one the read buffer's load completes on: the same constant slot, or the same stage of
one counter. Each ring wait carries the steps its counter took since (may-facts ("wstep",
wait, k), k counted up to `_FAR`), so a wait on stage V + c of a counter then covers a read
of stage V' + d now only when c = k + d: a read of the next stage before its own wait is
seen even when the stage register is updated in place. Barriers of one dynamic buffer are
told apart by offset (`_apart`): a wait on another ring's full barrier covers nothing, nor
does a wait on a barrier no copy completes on and no arrive after a copy's wait relays (a
stage's empty barrier waited on for its data: `_relays`). Only
positive evidence is reported (a constant slot against another constant slot, a stage off by
a known count, one fixed barrier for a whole ring, another ring's barrier); stage arithmetic
the checker cannot follow is not reported.
"""

from __future__ import annotations

from typing import Any

from ..instructions.arith import Binary
from ..operands import Addr, Reg, Symbol
from ..types import StateSpace
from .analysis import EDGE_FACTS, PREPARE, STRUCTURAL, Analysis, handles
from .cfg import dominates, dominators
from .findings import Hazard
from .hazards_bulk import _extent, _start, extent_of, first_byte_read, size_how
from .launch_conds import copy_free_without_wait
from .ops import Op, Role
from .stages import base, moved
from .state import State

_LOADS = (Role.TMA_LOAD, Role.BULK_LOAD)


def _loads(an: Analysis) -> list[Op]:
    hit = an.cache.get("ring_loads")
    if hit is None:
        hit = an.cache["ring_loads"] = [o for o in an.ops if o.role in _LOADS]
    return hit


def _slot(an: Analysis, operand: Any) -> tuple[Any, Any]:
    """(root, slot) of a barrier or buffer address: slot is ('const', offset),
    ('ring', counter, n, stride) or None when it cannot be followed."""
    start = _start(an, operand)
    if start is None:
        return None, None
    root, lo, hi, ring = start
    if ring is not None:
        return root, ("ring", *ring)
    if lo is not None and lo == hi:
        return root, ("const", lo)
    return root, None


def _other_stage(an: Analysis, state: State, w: int, wait_slot: Any, read_slot: Any,
                 load_bar: Any, load_buf: Any, read: tuple[Any, int]) -> bool:
    """Positive evidence that the wait at statement w, on `wait_slot`, is not on the barrier
    the read stage's load completes on (or is on it for an earlier phase)."""
    if wait_slot is None or load_bar is None:
        return False
    if wait_slot[0] == "const" and load_bar[0] == "const":
        # The load of exactly this buffer completes on another constant slot.
        return (load_buf is not None and read_slot is not None and load_buf[0] == "const"
                and read_slot[0] == "const" and load_buf[1] == read_slot[1]
                and wait_slot[1] != load_bar[1])
    if wait_slot[0] == "ring" and read_slot is not None and read_slot[0] == "ring":
        if load_bar[0] != "ring" or load_buf is None or load_buf[0] != "ring" \
                or not _same_index(an, load_bar, load_buf):
            return False
        n = wait_slot[2]
        if n != read_slot[2]:
            return False
        (wb, wc), (rb, rc) = ring_index(an, wait_slot), ring_index(an, read_slot)
        if wb is not rb or not index_current(an, read[0], rb, read[1]) \
                or not index_current(an, an.op_at[w].mbar, wb, w):
            return False      # an index computed before a step of its counter: not followed
        # The wait was on stage V + wc of the counter's value V then; the read is of stage
        # V' + rc now, V' = V + k after k steps since: the same phase only when wc = k + rc.
        ks = {f[2] for f in state.may if f[0] == "wstep" and f[1] == w}
        if not ks or None in ks:
            return (wc - rc) % n != 0
        return not any(k < _FAR and wc == k + rc for k in ks)
    if wait_slot[0] == "const" and read_slot is not None and read_slot[0] == "ring" \
            and read_slot[2] > 1:
        # One fixed barrier waited for a whole ring whose loads each complete on their own
        # (a read indexed like the ring: `tid & 31` picks a lane's row, not a stage).
        return load_bar[0] == "ring" and load_buf is not None and load_buf[0] == "ring" \
            and _same_index(an, load_bar, load_buf) and read_slot[2] == load_buf[2]
    return False


def index_current(an: Analysis, operand: Any, counter: Any, at: int) -> bool:
    """Is the ring index an address computes from `counter` the counter's value at statement
    `at`? Not when control can go from a statement of the address's arithmetic that reads
    the counter, through a write of the counter, to `at` without that statement running
    again (`slot = c.slot(...); c.advance(); read(slot)` reads the stage before the
    advance)."""
    key = ("current", id(operand), id(counter), at)
    hit = an.cache.get(key)
    if hit is not None:
        return hit
    writes = an.values.defs.get(counter, ())
    ok = True
    todo = [operand.base if isinstance(operand, Addr) else operand]
    seen: set[int] = set()
    while todo and ok:
        r = todo.pop()
        if not isinstance(r, Reg) or r is counter or id(r) in seen:
            continue
        seen.add(id(r))
        defs = an.values.defs.get(r, ())
        if len(defs) != 1:
            continue
        d = defs[0]
        srcs = an.values.sources_of(d)
        if any(x is counter for x in srcs):
            ok = not any(_passes(an, d, i, d) and _passes(an, i, at, d) for i in writes)
        todo.extend(srcs)
    an.cache[key] = ok
    return ok


def _passes(an: Analysis, p: int, q: int, d: int) -> bool:
    """Can control go from statement p to statement q without running statement d (other
    than p itself)?"""
    cfg = an.cfg
    bp, bq, bd = cfg.block_of(p), cfg.block_of(q), cfg.block_of(d)
    if bp == bq and p < q:
        return not (bd == bp and p < d < q)
    if bd == bp and p < d:
        return False
    seen, todo = set(), list(cfg.succs(bp))
    while todo:
        b = todo.pop()
        if b in seen or b >= len(cfg.blocks):
            continue
        seen.add(b)
        if b == bq and not (bd == b and d < q):
            return True
        if b == bd:
            continue
        todo.extend(cfg.succs(b))
    return False


def ring_index(an: Analysis, slot: tuple) -> tuple[Any, int]:
    """(counter, c) of a ring slot ('ring', index, n, stride[, shift]): its stage is
    `counter + c` mod n, counter a register written in place (`stages.base`), c the index's
    constant offset plus the slot's shift (`(s + shift) mod n`, when `ranges` gives one)."""
    counter, c = base(an.values, slot[1])
    return counter, c + (slot[4] if len(slot) > 4 else 0)


def _same_index(an: Analysis, a: tuple, b: tuple) -> bool:
    """Do two ring slots index the same stage (one counter + the same c)?"""
    (ab, ac), (bb, bc) = ring_index(an, a), ring_index(an, b)
    return ab is bb and ac == bc


# Steps of a counter since a wait are counted up to _FAR ("_FAR or more": a wait that far
# back is never on the phase a read of a nearby stage needs).
_FAR = 4


def _wait_stage(an: Analysis, i: int) -> tuple[Any, int, int] | None:
    """(counter, c, n) when the wait at statement i is on stage `counter + c` of an n-stage
    ring of barriers (counter: a register written in place, `stages.base`)."""
    table = an.cache.setdefault("wait_stage", {})
    if i not in table:
        _, slot = _slot(an, an.op_at[i].mbar)
        table[i] = None if slot is None or slot[0] != "ring" else (
            *ring_index(an, slot), slot[2])
    return table[i]


def _wait_ring_steps(an: Analysis) -> None:
    """A RING_STEP op at every write of a counter a ring wait is indexed by (unless another
    hazard module placed one there), so the waits' facts follow the counter."""
    if not _loads(an):
        return
    counters = {}
    for o in an.ops:
        st = _wait_stage(an, o.index) if o.role is Role.MBAR_WAIT else None
        if st is not None and isinstance(st[0], Reg):
            counters[id(st[0])] = st[0]
    an.add_ring_steps(counters.values())


PREPARE.append(_wait_ring_steps)


@handles(Role.RING_STEP)
def wait_step(an: Analysis, state: State, op: Op, report: bool) -> State:
    """Count the steps of a counter since each wait on a stage of it (`stages.moved`); a
    write that is not a forward step loses the count."""
    if not any(f[0] == "wstep" for f in state.may):
        return state
    reg = op.value
    may = set()
    for f in state.may:
        if f[0] == "wstep" and f[2] is not None:
            st = _wait_stage(an, f[1])
            if st is not None and st[0] is reg:
                k = moved(an.values, op.index, reg, st[2])
                f = ("wstep", f[1], None if k is None or k < 0 else min(f[2] + k, _FAR))
        may.add(f)
    return State(state.must, frozenset(may), state.tx)


def _apart(an: Analysis, a: Op, b: Op) -> bool:
    """Positive evidence that two barrier operations address different barriers: two
    shared symbols, or one symbol (a dynamic buffer holding several rings' barriers) at
    offsets whose initialised barriers do not meet."""
    from .hazards_arrive import _barriers
    ka, kb = an.key(a, "mbar"), an.key(b, "mbar")
    if ka is None or kb is None:
        return False
    if ka[0] is not kb[0]:
        return isinstance(ka[0], Symbol) and isinstance(kb[0], Symbol)
    sa, sb = _barriers(an).get(a.index), _barriers(an).get(b.index)
    return sa is not None and sb is not None and bool(sa) and bool(sb) and not sa & sb


_NOT_ARRIVALS = (Role.MBAR_INIT, Role.MBAR_WAIT, Role.MBAR_INVAL)


def _relays(an: Analysis, w: Op) -> bool:
    """May the barrier `w` waits on relay a copy's completion: does some arrive on it come
    after a wait on a barrier copies complete on (a warp that waited for the tile tells the
    others), or is it arrived on where this cannot be told, or announced bytes on? A barrier
    only plain arrives (no bytes) reach, none of them after such a wait (the consumers'
    release of a stage, waited on by mistake for its data), says nothing of the copy."""
    from .hazards_arrive import _same_barriers
    table = an.cache.setdefault("relays", {})
    if w.index in table:
        return table[w.index]
    users = [o for o in an.ops if o.mbar is not None and o.role not in _NOT_ARRIVALS
             and _same_barriers(an, o, w)]
    arrives = [o for o in users if o.role is Role.MBAR_ARRIVE and o.count is None]
    if len(arrives) != len(users):
        # Bytes announced or delivered on it (expect_tx, a peer's red.async or copy): a
        # barrier of other data, not a stage's release.
        table[w.index] = True
        return True
    data = [o for o in an.ops if o.role is Role.MBAR_WAIT and _data_barrier(an, o)]
    idom = an.cache.get("idom")
    if idom is None:
        idom = an.cache["idom"] = dominators(an.cfg)
    block = an.cfg.block_of

    def after(d: Op, a: Op) -> bool:
        same = block(d.index) == block(a.index)
        return d.index < a.index if same else dominates(idom, block(d.index), block(a.index))

    table[w.index] = not arrives or _data_barrier(an, w) or any(
        o.space is StateSpace.shared_cluster for o in arrives) \
        or any(after(d, a) for a in arrives for d in data)
    return table[w.index]


def _data_barrier(an: Analysis, w: Op) -> bool:
    """Is the wait's barrier one that copies complete on (another buffer's full barrier,
    not a barrier threads arrive on to relay a wait they made)?"""
    from .hazards_arrive import _same_barriers
    table = an.cache.setdefault("data_barrier", {})
    if w.index not in table:
        table[w.index] = any(o.mbar is not None and _same_barriers(an, w, o)
                             for o in _loads(an))
    return table[w.index]


def _reach(an: Analysis, b: int) -> set[int]:
    table = an.cache.setdefault("reach", {})
    hit = table.get(b)
    if hit is None:
        hit = table[b] = an.cfg.reachable(an.cfg.succs(b), None)
    return hit


def _strictly_after(an: Analysis, later: int, i: int) -> bool:
    """Does statement `later` run only after statement i (it follows i and cannot come
    back before it)? A copy issued after a read cannot be what the read sees; one in a
    sibling branch (another warp's role) or earlier in a loop can."""
    a, b = an.cfg.block_of(i), an.cfg.block_of(later)
    if a == b:
        return later > i and a not in _reach(an, a)
    return b in _reach(an, a) and a not in _reach(an, b)


def _slot_key(slot: Any) -> Any:
    """A hashable stand-in for a slot (its counter register by identity)."""
    if slot is None or slot[0] == "const":
        return slot
    return ("ring", id(slot[1]), *slot[2:])


@handles(Role.SMEM_READ)
def read(an: Analysis, state: State, op: Op, report: bool) -> State:
    """A shared-memory read (ld, ldmatrix) of a TMA destination: `smem-read-before-wait` /
    `wait-wrong-barrier` when no wait on the copy's barrier covers it (`check_read`)."""
    if report and _loads(an) and lands_in(an, op.smem):
        what = "this ldmatrix" if type(an.body[op.index].insn).__name__ == "LdMatrix" \
            else "this load"
        check_read(an, state, op.index, op.smem, extent_of(an, op), what)
    return state


def lands_in(an: Analysis, smem: Any) -> bool:
    """May a copy land in the symbol `smem` addresses (a cheap test before the ranges)?"""
    return id(an.val(smem).root) in _load_extents(an)


def _load_extents(an: Analysis) -> dict[int, list[tuple[Op, float, float]]]:
    extents = an.cache.get("load_extents")
    if extents is None:
        extents = an.cache["load_extents"] = {}
        for o in _loads(an):
            ext = extent_of(an, o)
            if ext is not None:
                extents.setdefault(id(ext[0]), []).append((o, ext[1], ext[2]))
    return extents


def read_extent(an: Analysis, smem: Any, size: int) -> tuple[Any, float, float] | None:
    """`(root, lo, hi)` of `size` bytes read at a shared address (for readers that are not
    a SMEM_READ op: a wgmma's descriptor start address)."""
    start = _start(an, smem)
    if start is None:
        return None
    root, lo, hi, ring = start
    return (root, *_extent((root, lo, None if hi is None else hi + size, ring)))


def check_read(an: Analysis, state: State, at: int, smem: Any,
               extent: tuple[Any, float, float] | None, what: str) -> None:
    """Report a read (statement `at`, of `extent`, at the address `smem`) of a TMA
    destination that no wait covers: none on some path (`smem-read-before-wait`), or only
    waits on another stage's barrier (`wait-wrong-barrier`). `what` names the reader."""
    if extent is None:
        return
    root, lo, hi = extent
    # (With no ring step known, two ranges overlap when their intervals do.)
    sources = [o for o, a, b in _load_extents(an).get(id(root), ())
               if a < hi and lo < b and not _strictly_after(an, o.index, at)]
    if not sources:
        return
    from .overwrites import stored_over, wait_after  # (overwrites imports this module)
    refill = None
    if stored_over(an, state, at, extent, sources, smem):
        refill = wait_after(an, at, sources)
        if refill is None:
            return   # the threads' own stores, barrier-ordered, went over the copies' bytes
    # With more copies to come after the read, the finding says so: a wait before the read
    # is not what is missing.
    why = "" if refill is None else (
        "; the threads stored over these bytes since, but a wait on the copies' barrier can "
        "follow this read (the ring is waited on again, and with its stages released a copy "
        "into them may land during the staging)")
    waits = sorted(f[1] for f in state.must if f[0] == "waited")
    if waits:   # the verdict depends only on the waits, their steps since, the sources and
        # the read's slot
        steps = tuple(sorted((f[1], -1 if f[2] is None else f[2]) for f in state.may
                             if f[0] == "wstep" and f[1] in waits))
        key = ("covered", tuple(waits), steps, tuple(o.index for o in sources),
               _slot_key(_slot(an, smem)[1]))
        if an.cache.get(key):
            return
        an.cache[key] = True
    if not waits:
        if copy_free_without_wait(an, at, sources):
            return   # the paths with no wait are those where no copy runs (a K loop of 0 trips)
        an.report(Hazard.SMEM_READ_BEFORE_WAIT, f"{what} reads {an.describe(smem)}, which a "
                  f"TMA copy writes, and no mbarrier wait precedes it on every path{why}",
                  [("read", at), ("copy", sources[0].index), ("next wait", refill)],
                  dedupe=at)
        return
    read_root, read_slot = _slot(an, smem)
    covered = False
    related: int | None = None      # a wait that shows the read means to wait for the copy
    # A copy of unknown size reaches the read only by its estimated end: a wait for it
    # covers the read when no copy reaches the read for sure.
    estimated: tuple[int, Op] | None = None
    for w in waits:
        wop = an.op_at[w]
        w_root, w_slot = _slot(an, wop.mbar)
        for src in sources:
            b_root, b_slot = _slot(an, src.mbar)
            if _apart(an, wop, src):
                # Another ring's barrier (a K ring and a V ring in one buffer): a wait on
                # it says nothing of this copy, but it shows the read means to wait.
                if related is None and _data_barrier(an, wop):
                    related = w
                continue
            if b_root is not w_root:
                continue
            related = w if related is None else related
            _, buf_slot = _slot(an, src.smem)
            if not _other_stage(an, state, w, w_slot, read_slot, b_slot, buf_slot, (smem, at)):
                if first_byte_read(an, src, smem):
                    covered = True
                    break
                estimated = estimated or (w, src)
        if covered:
            break
    if not covered and estimated is not None:
        sure = [o for o in sources if first_byte_read(an, o, smem)]
        if sure:
            _estimate_note(an, at, smem, what, estimated, sure[0])
        return
    if not covered and related is None and waits and \
            not any(_relays(an, an.op_at[w]) for w in waits):
        related = waits[0]   # a stage's release barrier waited on for its data
    if not covered and related is not None:
        some = _waited_on_some_path(an, state, smem, at, read_slot, sources)
        if some is not None:
            an.note("wait-wrong-barrier", f"{what} reads {an.describe(smem)}; the wait on "
                    "its stage runs on some paths only (the next stage's wait at the end of "
                    "the previous trip under a condition, say): not judged",
                    [("read", at), ("wait", some)])
            return
        an.report(Hazard.WAIT_WRONG_BARRIER, f"{what} reads {an.describe(smem)}, but the "
                  "waits before it are on the barrier of another stage or ring than the one "
                  f"the copy into this buffer completes on (or on an earlier phase of it){why}",
                  [("read", at), ("wait", related), ("copy", sources[0].index),
                   ("next wait", refill)], dedupe=at)


def _estimate_note(an: Analysis, at: int, smem: Any, what: str,
                   estimated: tuple[int, Op], sure: Op) -> None:
    """The note for a read that the only covering wait covers through a copy of unknown
    size, while a copy no wait covers starts at the bytes read: the read may be past the
    first copy's box, in the second's."""
    w, src = estimated
    an.note("wait-wrong-barrier", f"{what} reads {an.describe(smem)}, where the "
            f"{sure.role.value} into {an.describe(sure.smem)} lands, and no wait before it "
            "is on that copy's barrier; the wait before it is on the barrier of the "
            f"{src.role.value} into {an.describe(src.smem)}, whose size is unknown, so "
            "whether the read is inside that copy is not known: not judged ("
            f"{size_how(an, src)})",
            [("read", at), ("wait", w), ("copy", src.index), ("copy", sure.index)],
            dedupe=("estimate", at))


def _waited_on_some_path(an: Analysis, state: State, smem: Any, at: int,
                         read_slot: Any, sources: list[Op]) -> int | None:
    """A wait that, on some path, was on exactly the stage (and phase) a ring read at `at`
    reads, though it does not run on every path (a rotated loop waits for the next stage at
    the end of a trip under `if j + 1 < n`, and the checker does not tie that condition to
    the loop's): the read cannot be judged."""
    if read_slot is None or read_slot[0] != "ring":
        return None
    rb, rc = ring_index(an, read_slot)
    if not index_current(an, smem, rb, at):
        return None
    for f in state.may:
        if f[0] != "wstep" or f[2] is None or f[2] >= _FAR:
            continue
        st = _wait_stage(an, f[1])
        w = an.op_at[f[1]]
        if st is not None and st[0] is rb and st[2] == read_slot[2] and st[1] == f[2] + rc \
                and any(_slot(an, src.mbar)[0] is _slot(an, w.mbar)[0]
                        and not _apart(an, w, src) for src in sources):
            return f[1]
    return None


@handles(Role.MBAR_WAIT)
def waited(an: Analysis, state: State, op: Op, report: bool) -> State:
    """A wait: the must-fact ("waited", wait) and, on a ring stage, ("wstep", wait, 0): the
    counter has not stepped since (the latest run of this wait on this path)."""
    if not _loads(an) or not an.runs_somewhere(op.index):
        return state
    may = state.may
    if _wait_stage(an, op.index) is not None:
        may = frozenset(f for f in may if f[0] != "wstep" or f[1] != op.index) \
            | {("wstep", op.index, 0)}
    return State(state.must | {("waited", op.index)}, may, state.tx)


def wait_edge(an: Analysis, p: int, b: int) -> frozenset:
    """A try_wait counts as a wait along the edges taken only when it returned true: the
    exit of `done = false; while (!done) done = try_wait(...)` follows the loop's entry edge
    too (where no wait ran), but is taken only once the try_wait succeeded."""
    from .trywait import wait_edges
    if not _loads(an):
        return frozenset()
    o = wait_edges(an).get((p, b))
    if o is None or not an.runs_somewhere(o.index):
        return frozenset()
    return frozenset({("waited", o.index)})


EDGE_FACTS.append(wait_edge)


def _flips_each_iteration(an: Analysis, parity: Any, body: frozenset,
                          latches: list[int]) -> int | None:
    """The statement toggling `parity` once per iteration (xor p, p, 1 on a path every
    iteration takes), or None."""
    if not isinstance(parity, Reg):
        return None
    defs = [i for i in an.values.defs.get(parity, ()) if an.cfg.block_of(i) in body]
    if len(defs) != 1:
        return None
    st = an.body[defs[0]]
    insn = st.insn
    if st.guard is not None or not (isinstance(insn, Binary) and insn.op == "xor"
                                    and insn.a is parity and an.const(insn.b) == 1):
        return None
    idom = an.cache.get("idom")
    if idom is None:
        idom = an.cache["idom"] = dominators(an.cfg)
    b = an.cfg.block_of(defs[0])
    return defs[0] if all(dominates(idom, b, latch) for latch in latches) else None


def ring_parity(an: Analysis) -> None:
    """`ring-parity`: a wait on a ring of several stages whose parity flips on every trip, rather
    than when the stage index wraps."""
    waits = [o for o in an.ops if o.role is Role.MBAR_WAIT and o.parity is not None]
    if not waits or not an.loops:
        return
    for o in waits:
        root, slot = _slot(an, o.mbar)
        if slot is None or slot[0] != "ring" or slot[2] < 2:
            continue
        counter, n = slot[1], slot[2]
        for header, body in an.loops:
            if an.cfg.block_of(o.index) not in body or not any(
                    an.cfg.block_of(i) in body for i in an.values.defs.get(counter, ())):
                continue   # the loop the stage advances in
            latches = [b for b, h in an.back_edges if h == header]
            flip = _flips_each_iteration(an, o.parity, body, latches)
            span = an.spans.of(o.parity)
            by_counter = span.ring is not None and span.ring[0] is counter and \
                span.ring[1] == 2
            if flip is None and not by_counter:
                continue
            an.report(Hazard.RING_PARITY, f"the wait on the {n}-stage ring of barriers at "
                      f"{an.describe(o.mbar)} flips its parity every iteration, but each "
                      f"stage's barrier completes a phase only every {n} iterations",
                      [("wait", o.index), ("parity", flip if flip is not None
                                           else an.def_site(o.parity))],
                      dedupe=("ring-parity", o.index))
            break


def try_wait_loops(an: Analysis) -> None:
    """`try-wait-not-looped`: a try_wait/test_wait whose result no loop retries and no branch
    guards."""
    from .trywait import _spins, guarded
    for o in an.ops:
        if o.role is not Role.MBAR_WAIT or o.result is None:
            continue
        if any(an.cfg.block_of(o.index) in body and _spins(an, o, header, body)
               for header, body in an.loops):
            continue
        if guarded(an, o):   # `if (!tok) mbarrier_wait(...)`, or a retry loop on false
            continue
        an.report(Hazard.TRY_WAIT_NOT_LOOPED, f"the result of this wait on "
                  f"{an.describe(o.mbar)} is never looped on: try_wait/test_wait can return "
                  "false before the phase completes, and the code after it then runs early",
                  [("wait", o.index)], dedupe=("try-wait", o.index))


STRUCTURAL.extend([ring_parity, try_wait_loops])


def _box(an: Analysis, o: Op) -> int | None:
    """The bytes a load writes (its box, or a bulk copy's constant size)."""
    if o.role is Role.TMA_LOAD:
        info = an.map_info(o.map)
        return info.box_bytes if info is not None else None
    return an.const(o.count)
