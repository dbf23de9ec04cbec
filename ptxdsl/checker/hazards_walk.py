"""Phases a loop carries, walked trip by trip: the loop is run on concrete values (`_Walk`),
its registers starting at the constants they enter with, waits passing, a branch out of the
loop on a run-time condition staying in it. Each wait then names a barrier (its offset) and a
parity, trip after trip, whatever form the stage and phase take (a stage register advanced
in place, `s += 1; s = s == N ? 0 : s`, a phase flipped by `selp` or `@p xor`, `s = i % N`,
`(i / N) & 1`, nvcc's one register reused for each role's addresses). A barrier completes
one phase per use, so:

- `ring-parity` (`walk_ring`): a barrier's first wait in the loop names the parity the wait
  site's first wait named (every stage starts fresh alike), and each later wait the other
  parity than the wait before it on that barrier (a second wait of the phase by another site
  in the same trip excepted). A phase flipped at `stage == 2` of a ring wrapping at 4 makes
  stage 2's first wait name parity 1.
- `wait-parity-constant` (`walk_tail`): a wait after the loop, with a constant parity, on the
  one barrier the loop waits on once per trip, flipping its phase: with a run-time trip count
  the phase there is the trip count's parity, which a constant matches for half the counts;
  with a constant one (the walk leaves the loop) it is known.

The loads a loop issues are recorded too (`copies`: where `hazards_overlap` finds the stages a
copy writes). Only what the walk shows is reported: a loop it cannot follow is skipped.
"""

from __future__ import annotations

from typing import Any

from ..instructions.arith import Binary
from ..instructions.base import dests
from ..instructions.compare import Selp, Setp
from ..instructions.move import Mov
from ..operands import Addr, Imm, NegPred, Reg, Symbol
from .analysis import STRUCTURAL, Analysis
from .cfg import dominates, dominators
from .findings import Hazard
from .ops import Op, Role
from .values import _CMP, FOLD_DIV, Kind

_TRIPS = 64          # trips walked at most
_LOADS = (Role.TMA_LOAD, Role.BULK_LOAD)
_STEPS = 20000       # statements interpreted per walk at most
_MASK = (1 << 32) - 1


class _Stuck(Exception):
    """The walk meets something it cannot follow."""


def _idom(an: Analysis) -> list[int | None]:
    idom = an.cache.get("idom")
    if idom is None:
        idom = an.cache["idom"] = dominators(an.cfg)
    return idom


class _Walk:
    """One loop run on concrete values, trip after trip: the registers the loop writes start
    at the constants they enter with (unknown otherwise), those it only reads are what the
    checker knows of them (a constant, or a shared symbol's address as its offset). A wait
    passes; a branch out of the loop on an unknown condition stays in it (the trip count is
    a run-time value); any other branch on an unknown condition stops the walk. `seen`:
    (barrier offset, parity) each wait named, per trip (None where unknown); `events`: the
    same in the order run."""

    def __init__(self, an: Analysis, header: int, body: frozenset):
        self.an, self.header, self.body = an, header, body
        self.seen: dict[int, list[list[tuple[Any, Any]]]] = {}
        # every wait in the order run: (trip, wait, barrier offset, parity)
        self.events: list[tuple[int, int, Any, Any]] = []
        self.trip = 0
        # load -> (destination offset, barrier offset) of each copy it issued
        self.copies: dict[int, set[tuple[Any, Any]]] = {}
        self.root: Symbol | None = None     # the one shared symbol offsets are into
        self.exited = False       # the walk left the loop on a known condition
        self.steps = 0
        writes = {id(r): r for b in body for i in an.cfg.blocks[b].stmts
                  for r in dests(an.body[i].insn)}
        self.state = {k: self._entry(r) for k, r in writes.items()}
        self.written = set(writes)
        for _ in range(_TRIPS):
            if self.exited:
                break
            for w in self.seen.values():
                w.append([])
            self._trip()
            self.trip += 1

    def _entry(self, reg: Reg) -> int | None:
        an = self.an
        at = an.cfg.blocks[self.header].stmts.start
        outside = [d for d in an.cfg.reaching(an.values.defs.get(reg, ()), at)
                   if an.cfg.block_of(d) not in self.body]
        st = an.body[outside[0]] if len(outside) == 1 else None
        if st is None or st.guard is not None or not isinstance(st.insn, Mov):
            return None
        where = an.cfg.block_of(outside[0])
        if any(self.body < body and where not in body for _, body in an.loops):
            return None   # set once around an enclosing loop: later entries see this loop's exit
        c = an.const(st.insn.a)
        return None if c is None else c & _MASK

    def _value(self, x: Any) -> int | None:
        if isinstance(x, Imm):
            return int(x.value) & _MASK if isinstance(x.value, int) else None
        if isinstance(x, Addr):
            v = self._value(x.base)
            return None if v is None else (v + x.offset) & _MASK
        if isinstance(x, Symbol):
            return self._offset(x, 0)
        if not isinstance(x, Reg):
            return None
        if id(x) in self.written:
            return self.state.get(id(x))
        known = self.an.val(x)
        if known.kind is Kind.const and known.const is not None:
            return known.const & _MASK
        if known.kind is Kind.addr and known.offset is not None:
            return self._offset(known.root, known.offset)
        return None

    def _offset(self, root: Any, offset: int) -> int | None:
        """An address into a shared symbol as its offset, for one symbol per walk."""
        if not isinstance(root, Symbol) or not root.space.is_shared or \
                self.root not in (None, root):
            return None
        self.root = root
        return offset

    def _pred(self, guard: Any) -> int | None:
        neg = isinstance(guard, NegPred)
        v = self._value(guard.reg if neg else guard)
        return None if v is None else int(bool(v)) ^ neg

    def _trip(self) -> None:
        b = self.header
        while True:
            nxt = self._block(b)
            if nxt is None or nxt not in self.body:
                self.exited = True
                return
            if nxt == self.header:
                return
            b = nxt

    def _block(self, b: int) -> int | None:
        an, blk = self.an, self.an.cfg.blocks[b]
        self.steps += 1 + len(blk.stmts)   # (an empty block counts too: a loop of them ends)
        if self.steps > _STEPS:
            raise _Stuck(b)
        for i in blk.stmts:
            if i != blk.branch:
                self._run(i)
        if blk.branch is None:
            if len(blk.succs) != 1:
                raise _Stuck(b)
            return blk.succs[0]
        g = self._pred(an.body[blk.branch].guard)
        if g is None:
            out = [s for s in (blk.taken, blk.fall) if s not in self.body]
            if len(out) != 1:
                raise _Stuck(b)    # a branch inside the loop on an unknown condition
            return blk.fall if out[0] == blk.taken else blk.taken
        return blk.taken if g else blk.fall

    def _run(self, i: int) -> None:
        an, st = self.an, self.an.body[i]
        insn, outs = st.insn, dests(st.insn)
        op = an.op_at.get(i)
        if op is not None and op.role is Role.MBAR_WAIT and op.parity is not None:
            if i not in self.seen:
                self.seen[i] = [[]]
            bar, par = self._value(op.mbar), self._value(op.parity)
            self.seen[i][-1].append((bar, par))
            self.events.append((self.trip, i, bar, None if par is None else par & 1))
            for r in outs:
                self.state[id(r)] = 1      # the wait passes
            return
        if op is not None and op.role in _LOADS and op.smem is not None:
            self.copies.setdefault(i, set()).add(
                (self._value(op.smem), None if op.mbar is None else self._value(op.mbar)))
        if not outs:
            return
        val: int | None = None
        g = 1 if st.guard is None else self._pred(st.guard)
        if g == 0:
            return
        if g is not None:
            val = self._compute(insn)
        for r in outs:
            self.state[id(r)] = val if len(outs) == 1 or not isinstance(insn, Setp) \
                else (val if r is insn.p else None if val is None else 1 - val)

    def _compute(self, insn: Any) -> int | None:
        v = self._value
        if isinstance(insn, Mov):
            return v(insn.a)
        if isinstance(insn, Binary) and insn.op in FOLD_DIV and insn.mode in (None, "lo") \
                and not insn.type.is_float:
            a, b = v(insn.a), v(insn.b)
            r = None if a is None or b is None else FOLD_DIV[insn.op](a, b)
            return None if r is None else r & _MASK
        if isinstance(insn, Setp) and insn.bool_op is None and insn.cmp in _CMP \
                and not insn.type.is_float:
            a, b = v(insn.a), v(insn.b)
            if a is None or b is None:
                return None
            return int(_CMP[insn.cmp](_signed(a, insn), _signed(b, insn)))
        if isinstance(insn, Selp):
            c = v(insn.c)
            return None if c is None else v(insn.a) if c else v(insn.b)
        return None


def _walk(an: Analysis, header: int, body: frozenset) -> _Walk | None:
    key = ("walk", header)
    if key not in an.cache:
        try:
            an.cache[key] = _Walk(an, header, body)
        except _Stuck:
            an.cache[key] = None
    return an.cache[key]


def _sequence(walk: _Walk, w: Op) -> list[tuple[int, int]] | None:
    """(barrier offset, parity) the wait names on each trip walked (it must run exactly once
    per trip, on known values)."""
    trips = walk.seen.get(w.index)
    if not trips:
        return None
    if not trips[-1]:
        trips = trips[:-1]    # the walk left the loop before this trip's wait
    out = []
    for t in trips:
        if len(t) != 1 or t[0][0] is None or t[0][1] is None:
            return None
        out.append((t[0][0], t[0][1] & 1))
    return out


def _mismatch(seq: list[tuple[int, int]]) -> tuple[int, int, int, int] | None:
    """(trip, barrier, parity named, uses before) of the first wait of one site whose parity is
    not the first trip's flipped once per earlier use of its barrier."""
    uses: dict[int, int] = {}
    first = seq[0][1] if seq else 0
    for t, (bar, par) in enumerate(seq):
        k = uses.get(bar, 0)
        if par != first ^ (k & 1):
            return t, bar, par, k
        uses[bar] = k + 1
    return None


def _misnamed(walk: _Walk, site: int) -> tuple[int, int, int, str] | None:
    """(trip, barrier, parity named, why) of the first wait of `site` that names a phase its
    barrier is not in, judging every wait of the walk in the order run: a barrier's first wait
    names the parity the site's first wait named (every stage starts fresh alike), and each
    later one the other parity than the wait before it on that barrier, unless that was
    another site's in the same trip (a second wait for the phase already waited for)."""
    base = next((par for _, i, _, par in walk.events if i == site), None)
    last: dict[Any, tuple[int, int, int]] = {}
    for trip, i, bar, par in walk.events:
        if bar is None or par is None or base is None:
            return None
        prev = last.get(bar)
        last[bar] = (trip, i, par)
        if i != site:
            continue
        if prev is None and par != base:
            return trip, bar, par, (f"the barrier's first wait in the loop, while every "
                                    f"stage starts in the phase the first wait named "
                                    f"(parity {base})")
        if prev is not None and par == prev[2] and (prev[1] == i or prev[0] != trip):
            return trip, bar, par, (f"the parity its previous wait named (on trip "
                                    f"{prev[0]}), a phase already completed")
    return None


def _fresh(an: Analysis, walk: _Walk, header: int, body: frozenset, bars: set) -> bool:
    """Are the walked barriers fresh when the loop starts: no wait outside the loop that may
    run before it (one the loop's header is reachable from) may be on one of them (a first
    trip peeled off the loop consumed a phase the walk does not see)?"""
    for o in an.ops:
        b = an.cfg.block_of(o.index)
        if o.role is not Role.MBAR_WAIT or b in body or \
                header not in an.cfg.reachable([b], None):
            continue
        v = an.val(o.mbar)
        if not (v.kind is Kind.addr and v.offset is not None and v.root is walk.root
                and v.offset not in bars):
            return False
    return True


def walk_ring(an: Analysis) -> None:
    """`ring-parity`: a ring wait whose parity, walked trip by trip, is not its stage's."""
    waits = [o for o in an.ops if o.role is Role.MBAR_WAIT and o.parity is not None]
    for header, body in an.loops if waits else ():
        mine = [w for w in waits if an.cfg.block_of(w.index) in body]
        walk = _walk(an, header, body) if mine else None
        if walk is None or not walk.events:
            continue
        bars = {bar for _, _, bar, _ in walk.events}
        if not _fresh(an, walk, header, body, bars):
            continue
        for w in mine:
            stages = {bar for _, i, bar, _ in walk.events if i == w.index}
            parities = {par for _, i, _, par in walk.events if i == w.index}
            # (a parity that never changes is `wait-parity-constant`'s: reported once, so)
            bad = _misnamed(walk, w.index) if len(stages) > 1 and len(parities) > 1 else None
            if bad is None:
                continue
            t, bar, par, why = bad
            an.report(Hazard.RING_PARITY, f"the wait on the {len(stages)}-stage ring of "
                      f"barriers at {an.describe(w.mbar)} names parity {par} on trip {t} (the "
                      f"barrier at offset {bar}), {why}: each stage's barrier completes one "
                      "phase per use, so the phase must flip when the stage index wraps, at "
                      "no other stage", [("wait", w.index)], dedupe=("ring-parity", w.index))


def walk_tail(an: Analysis) -> None:
    """`wait-parity-constant`: a constant-parity wait after a loop that advanced its barrier's
    phase a run-time number of times."""
    waits = [o for o in an.ops if o.role is Role.MBAR_WAIT and o.parity is not None]
    inits = [o for o in an.ops if o.role is Role.MBAR_INIT]
    for tail in waits:
        c, key = an.const(tail.parity), an.key(tail, "mbar")
        if c is None or key is None or key[1] is None:
            continue
        tb = an.cfg.block_of(tail.index)
        for header, body in an.loops:
            # The tail follows the loop: the block the loop is entered from (its zero-trip
            # test, if any) dominates it, so a thread reaching it ran the loop or skipped it
            # on the trip count (a role's loop ending in another role's code does not).
            # And no loop holds both: the barrier's phase there moves on with each trip of
            # that loop too (the rule for waits in loops judges those).
            pre = _idom(an)[header]
            if tb in body or pre is None or not dominates(_idom(an), pre, tb) or any(
                    tb in outer and header in outer for _, outer in an.loops) or any(
                    _same(an.key(o, "mbar"), key)
                    and dominates(_idom(an), header, an.cfg.block_of(o.index)) for o in inits):
                continue
            walk = _walk(an, header, body)
            if walk is None or not (walk.exited or _runtime_trips(an, body)):
                continue
            for w in waits:
                if an.cfg.block_of(w.index) not in body or not _same(an.key(w, "mbar"), key):
                    continue
                seq = _sequence(walk, w)
                if not seq or len(seq) < 2 or _mismatch(seq) is not None \
                        or len({bar for bar, _ in seq}) != 1:
                    continue   # not one barrier waited once per trip, its phase followed
                if walk.exited:   # a constant trip count: the phase after it is known
                    want = seq[0][1] ^ (len(seq) & 1)
                    if (c & 1) == want:
                        break
                    how = (f"after its {len(seq)} trips, each waiting on that barrier once, "
                           f"the barrier is in the phase of parity {want}")
                else:
                    how = ("the loop waits on that barrier once per trip, flipping the phase "
                           "each trip, for a trip count known only at run time: after an odd "
                           "number of trips the barrier is in the other phase")
                an.report(Hazard.WAIT_PARITY_CONSTANT, f"the wait on the mbarrier at "
                          f"{an.describe(tail.mbar)} after a loop names parity {c}, but "
                          f"{how}, so the wait passes at once on a stale phase or hangs (wait "
                          "with the phase the loop leaves)",
                          [("wait", tail.index), ("loop wait", w.index)], dedupe=tail.index)
                break


def _runtime_trips(an: Analysis, body: frozenset) -> bool:
    """Does the loop leave on a test against a value fixed before it and not a constant (a
    trip count read from a parameter)?"""
    cfg = an.cfg
    for b in body:
        blk = cfg.blocks[b]
        if blk.branch is None or all(s in body for s in blk.succs):
            continue
        guard = an.body[blk.branch].guard
        pred = guard.reg if isinstance(guard, NegPred) else guard
        defs = an.values.defs.get(pred, ()) if isinstance(pred, Reg) else ()
        insn = an.body[defs[0]].insn if len(defs) == 1 else None
        if not isinstance(insn, Setp):
            continue
        for x in (insn.a, insn.b):
            if isinstance(x, Reg) and an.const(x) is None and all(
                    cfg.block_of(d) not in body for d in an.values.defs.get(x, ())):
                return True
    return False


def _same(a: Any, b: Any) -> bool:
    return a is not None and b is not None and a[0] is b[0] and a[1:] == b[1:]


def _signed(v: int, insn: Any) -> int:
    return v - (1 << 32) if str(insn.type).startswith("s") and v >> 31 else v


STRUCTURAL.extend([walk_ring, walk_tail])
