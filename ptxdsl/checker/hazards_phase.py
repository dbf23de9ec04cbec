"""The first phase of an mbarrier: a wait whose parity is off by one on its first trip.

A fresh barrier (after `mbarrier.init`) is in phase 0. A parity wait for P passes once the
phase of parity P has completed, and the phase before the first counts as completed: so
`wait(bar, 1)` on a fresh barrier passes at once, `wait(bar, 0)` blocks until phase 0 ends.
The standard ring starts its consumers at parity 0 (the full barrier completes when the
data lands) and its producers at parity 1 (the stages start empty). The wrong way round:

- a consumer whose first wait on a barrier that TMA loads complete on asks for parity 1
  passes before any data landed (`read-before-data`);
- a producer whose first wait on an empty barrier asks for parity 0 blocks until the
  consumers arrive, but they arrive only after their own first wait, on a barrier this
  producer's copies complete after its wait: the kernel hangs.

The parity a wait uses on its first trip is evaluated on the paths that take no loop back
edge: constants, loop counters at their start value (`(i / S) & 1` at i = 0), a phase
variable at its value before the loop (one flipped on wrap), and the arithmetic on them. A
wait under a condition that is false on the first pass (`if i >= S`) has no first trip
there and is not judged; neither is a wait on a barrier another wait may have waited on
before it (that one saw phase 0 go by).
"""

from __future__ import annotations

from typing import Any

from ..instructions.arith import Binary
from ..instructions.compare import Selp, Setp
from ..instructions.memory import Ld
from ..instructions.move import Cvt, Mov
from ..instructions.warp import Elect
from ..operands import Imm, Reg, SpecialReg, Symbol
from ..types import StateSpace
from .analysis import STRUCTURAL, Analysis
from .cfg import dominates, dominators, guard_polarity
from .findings import Hazard
from .hazards_arrive import _same_barriers
from .ops import Op, Role
from .values import _CMP, FOLD_DIV, inline_elected

_COMPLETERS = (Role.TMA_LOAD, Role.BULK_LOAD, Role.MBAR_ARRIVE, Role.MBAR_COMPLETE_TX)


class FirstTrip:
    """Values on the first trip through every loop: the CFG without its back edges."""

    def __init__(self, an: Analysis):
        self.an = an
        self.cfg = an.cfg
        an.loops   # noqa: B018  (sets back_edges)
        self.back = an.back_edges
        idom = an.cache.get("idom")
        if idom is None:
            idom = an.cache["idom"] = dominators(an.cfg)
        self.idom = idom
        self._reach: dict[int, set[int]] = {}

    def preds(self, b: int) -> list[int]:
        """The predecessors of block `b`, less those along a back edge."""
        return [p for p in self.cfg.preds[b] if (p, b) not in self.back]

    def succs(self, b: int) -> list[int]:
        """The successors of block `b`, less back edges and the exit."""
        return [s for s in self.cfg.succs(b) if (b, s) not in self.back
                and s != self.cfg.exit]

    def reach(self, b: int) -> set[int]:
        """Blocks reachable from b (b included) without a back edge."""
        hit = self._reach.get(b)
        if hit is None:
            hit, todo = set(), [b]
            while todo:
                x = todo.pop()
                if x not in hit:
                    hit.add(x)
                    todo.extend(self.succs(x))
            self._reach[b] = hit
        return hit

    def before(self, a: int, b: int) -> bool:
        """Can statement a run before statement b on a path without back edges?"""
        ba, bb = self.cfg.block_of(a), self.cfg.block_of(b)
        return (a < b) if ba == bb else bb in self.reach(ba)

    def dominates(self, a: int, b: int) -> bool:
        """Does statement a run before statement b on every path to b?"""
        ba, bb = self.cfg.block_of(a), self.cfg.block_of(b)
        return a < b if ba == bb else dominates(self.idom, ba, bb)

    def _one_trip_succs(self, b: int) -> list[int]:
        """Successors on the first pass when every loop runs at least once: a loop header
        does not leave its loop (that edge is the zero-trip path); the end of its first
        trip (a latch) goes where the header would have left to."""
        table = self.an.cache.get("one_trip_succs")
        if table is None:
            table = {}
            for h, body in self.an.loops:
                leave = [s for s in self.cfg.succs(h) if s not in body and s != self.cfg.exit]
                table.setdefault(h, [set(), []])[0].update(body)
                for latch, head in self.back:
                    if head == h:
                        table.setdefault(latch, [set(), []])[1].extend(leave)
            self.an.cache["one_trip_succs"] = table
        succs = self.succs(b)
        if b not in table:
            return succs
        inside, more = table[b]
        if inside:
            succs = [s for s in succs if s in inside]
        return succs + [s for s in more if s not in succs]

    def before_every_trip(self, a: int, b: int) -> bool:
        """Does statement a run before statement b on every first-pass path on which each
        loop entered runs at least one trip? A release after a consumer loop follows the
        loop's first wait unless the loop runs no trip at all (then neither does the work
        that would need the release)."""
        if self.dominates(a, b):
            return True
        ba, bb = self.cfg.block_of(a), self.cfg.block_of(b)
        if ba == bb:
            return False
        seen, todo = {0}, [0]
        if ba == 0:
            return True
        while todo:
            x = todo.pop()
            if x == bb:
                return False      # a path that reaches b without running a
            for s in self._one_trip_succs(x):
                if s not in seen and s != ba:
                    seen.add(s)
                    todo.append(s)
        # Unreached even with a: only a path through a leads to b (or none does).
        return bb in self._one_trip_reach()

    def _one_trip_reach(self) -> set[int]:
        hit = self.an.cache.get("one_trip_reach")
        if hit is None:
            hit, todo = {0}, [0]
            while todo:
                for s in self._one_trip_succs(todo.pop()):
                    if s not in hit:
                        hit.add(s)
                        todo.append(s)
            self.an.cache["one_trip_reach"] = hit
        return hit

    def _reaching(self, reg: Reg, at: int) -> int | None:
        """The one definition of reg that reaches statement `at` on its first trip."""
        defs = self.an.values.defs.get(reg, ())
        if not defs:
            return None
        by_block: dict[int, list[int]] = {}
        for d in defs:
            by_block.setdefault(self.cfg.block_of(d), []).append(d)
        home = self.cfg.block_of(at)
        here = [d for d in by_block.get(home, ()) if d < at]
        if here:
            return max(here)
        found: set[int] = set()
        seen: set[int] = set()
        todo = self.preds(home)
        if not todo:
            return None
        while todo:
            p = todo.pop()
            if p in seen:
                continue
            seen.add(p)
            if p in by_block:
                found.add(max(by_block[p]))
                continue
            ps = self.preds(p)
            if not ps:
                return None   # undefined on some path
            todo.extend(ps)
        return found.pop() if len(found) == 1 else None

    def value(self, x: Any, at: int, depth: int = 0) -> int | None:
        """The value of an operand at statement `at` on its first trip (None: unknown)."""
        if isinstance(x, bool):
            return None
        if isinstance(x, int):
            return x
        if isinstance(x, Imm):
            return int(x.value) if isinstance(x.value, int) else None
        if not isinstance(x, Reg) or depth > 40:
            return None
        d = self._reaching(x, at)
        if d is None:
            return None
        st = self.an.body[d]
        # A definition in a loop that does not hold `at` ran an unknown number of times.
        bd, ba = self.cfg.block_of(d), self.cfg.block_of(at)
        if any(bd in body and ba not in body for _, body in self.an.loops):
            return None
        if st.guard is not None:
            # A guarded write (MbarrierRing's `@p xor phase` on the wrap): the value before
            # it where its guard is false on this trip, its own where true.
            pred, polarity = guard_polarity(st.guard)
            g = self.value(pred, d, depth + 1)
            if g is None:
                return None
            if bool(g) != polarity:
                return self.value(x, d, depth + 1)
        insn = st.insn
        if isinstance(insn, Selp):
            c = self.value(insn.c, d, depth + 1)
            return None if c is None else self.value(insn.a if c else insn.b, d, depth + 1)
        if isinstance(insn, Mov):
            return None if isinstance(insn.a, SpecialReg) else self.value(insn.a, d, depth + 1)
        if isinstance(insn, Cvt):
            return self.value(insn.a, d, depth + 1)
        if isinstance(insn, Binary) and insn.op in FOLD_DIV:
            a, b = self.value(insn.a, d, depth + 1), self.value(insn.b, d, depth + 1)
            if a is None or b is None or (insn.op in ("shl", "shr") and not 0 <= b < 64):
                return None
            return FOLD_DIV[insn.op](a, b)
        if isinstance(insn, Setp) and insn.bool_op is None and insn.cmp in _CMP:
            a, b = self.value(insn.a, d, depth + 1), self.value(insn.b, d, depth + 1)
            return None if a is None or b is None else int(_CMP[insn.cmp](a, b))
        return None

    def fixed(self, x: Any, depth: int = 0) -> bool:
        """Is an operand the same in every iteration of every loop (built from thread ids,
        parameters, constants and elect.sync through single definitions)?"""
        if isinstance(x, int | Imm | Symbol):
            return True
        if not isinstance(x, Reg) or depth > 40:
            return False
        if inline_elected(self.an.values, x) is not None:
            return True
        defs = self.an.values.defs.get(x, ())
        if len(defs) != 1 or self.an.body[defs[0]].guard is not None:
            return False
        insn = self.an.body[defs[0]].insn
        if isinstance(insn, Elect):
            return True
        if isinstance(insn, Mov) and isinstance(insn.a, SpecialReg):
            return not insn.a.name.startswith(("clock", "globaltimer", "pm"))
        if isinstance(insn, Ld):
            return insn.space is StateSpace.param
        if isinstance(insn, Mov | Cvt):
            return self.fixed(insn.a, depth + 1)
        if isinstance(insn, Binary):
            return self.fixed(insn.a, depth + 1) and self.fixed(insn.b, depth + 1)
        if isinstance(insn, Setp):
            return all(self.fixed(y, depth + 1) for y in (insn.a, insn.b, insn.c)
                       if y is not None)
        return False

    def runs_first(self, i: int) -> bool:
        """Does statement i run on the first pass (of the threads that reach it at all)?
        Every branch that decides whether control reaches it must be a loop's exit test, a
        condition fixed for the thread, or one that evaluates to the way towards it."""
        home = self.cfg.block_of(i)
        for blk in self.cfg.blocks:
            if blk.branch is None or home not in self.reach(blk.id) or blk.id == home:
                continue
            ways = [s for s in (blk.taken, blk.fall) if s is not None
                    and (blk.id, s) not in self.back and s != self.cfg.exit]
            to = [s for s in ways if home in self.reach(s)]
            if len(ways) < 2 or len(to) == len(ways):
                continue   # not a decision about i
            if any(blk.id in body and any(s not in body for s in ways) and home in body
                   for _, body in self.an.loops):
                continue   # a loop's exit test: not entering the loop runs nothing at all
            pred, polarity = guard_polarity(self.an.body[blk.branch].guard)
            v = self.value(pred, blk.branch)
            if v is not None:
                way = blk.taken if bool(v) == polarity else blk.fall
                if way not in to:
                    return False
                continue
            if not self.fixed(pred) and not self._fixed_write(pred, blk.branch):
                return False
        return True

    def _fixed_write(self, x: Any, at: int) -> bool:
        """Outside loops, is the write of a register written more than once that reaches
        `at` (hand-written PTX reusing one predicate for a loop's zero-trip test and its
        latch, or for several loops) a comparison of values `fixed` for the thread?"""
        b = self.cfg.block_of(at)
        d = self._reaching(x, at) if isinstance(x, Reg) else None
        if d is None or self.an.body[d].guard is not None \
                or any(b in body for _, body in self.an.loops):
            return False
        insn = self.an.body[d].insn
        return isinstance(insn, Setp) and all(self.fixed(y) for y in (insn.a, insn.b, insn.c)
                                              if y is not None)


def _first_waits(an: Analysis, ft: FirstTrip) -> list[tuple[Op, int]]:
    """(wait, its parity on the first trip) of the waits that are the first on their
    barrier and run on the first pass."""
    waits = [o for o in an.ops if o.role is Role.MBAR_WAIT and o.parity is not None]
    out = []
    for w in waits:
        key = an.key(w, "mbar")
        if key is None or not isinstance(key[0], Symbol) or not key[0].space.is_shared:
            continue
        if any(o is not w and _same_barriers(an, o, w) and ft.before(o.index, w.index)
               for o in waits):
            continue   # an earlier wait on this barrier may have seen phase 0 go by
        p = ft.value(w.parity, w.index)
        if p is None or not ft.runs_first(w.index):
            continue
        out.append((w, p & 1))
    return out


def first_phase(an: Analysis) -> None:
    """`wait-parity-first-phase`: the first wait on a fresh barrier whose parity is off by one (a
    consumer starting at 1 passes before the data lands, a producer starting at 0 waits forever)."""
    if not any(o.role is Role.MBAR_WAIT and o.parity is not None for o in an.ops) \
            or Role.MBAR_INIT not in an.roles:
        return
    ft = FirstTrip(an)
    firsts = _first_waits(an, ft)
    if not firsts:
        return
    parity = {w.index: p for w, p in firsts}
    loads = [o for o in an.ops if o.role in (Role.TMA_LOAD, Role.BULK_LOAD)
             and o.mbar is not None]
    for w, p in firsts:
        if p == 1:
            load = next((o for o in loads if _same_barriers(an, o, w)), None)
            if load is not None:
                an.report(Hazard.WAIT_PARITY_FIRST_PHASE, f"the first wait on the mbarrier "
                          f"at {an.describe(w.mbar)} waits for parity 1, which a fresh barrier "
                          "counts as already completed (the phase before the first): it "
                          "passes at once, before the copy completing on that barrier has "
                          "landed, and the data read after it is stale",
                          [("wait", w.index), ("parity", an.def_site(w.parity)),
                           ("copy", load.index)], dedupe=("first-phase", w.index))
        else:
            _hang(an, ft, w, parity, loads)


def _hang(an: Analysis, ft: FirstTrip, w: Op, parity: dict[int, int],
          loads: list[Op]) -> None:
    """Report a first wait for parity 0 on a barrier whose first phase can only complete
    after this wait: every arrival on it follows a first wait (parity 0) on another
    barrier, which only copies and arrivals issued after this wait complete."""
    if Role.MBAR_REMOTE in an.roles or any(_same_barriers(an, o, w) for o in loads):
        return
    arrives = [o for o in an.ops if o.role in (Role.MBAR_ARRIVE, Role.MBAR_COMPLETE_TX)
               and _same_barriers(an, o, w)]
    if not arrives or any(o.space is StateSpace.shared_cluster for o in arrives):
        return
    gate = None
    for a in arrives:
        gates = [g for g, q in parity.items() if q == 0 and g != w.index
                 and ft.before_every_trip(g, a.index) and _after_only(an, ft, w, an.op_at[g])]
        if not gates:
            return
        gate = gate if gate is not None else gates[0]
    assert gate is not None
    g = an.op_at[gate]
    an.report(Hazard.WAIT_PARITY_FIRST_PHASE, f"the first wait on the mbarrier at "
              f"{an.describe(w.mbar)} waits for parity 0, the phase still in progress on a "
              "fresh barrier; the arrivals that complete it come after a wait on "
              f"{an.describe(g.mbar)}, whose phase only this thread's work after this wait "
              "completes: the kernel hangs", [("wait", w.index), ("parity",
                                                                   an.def_site(w.parity)),
                                              ("arrive", arrives[0].index), ("gate", gate)],
              dedupe=("first-phase", w.index))


def _after_only(an: Analysis, ft: FirstTrip, w: Op, g: Op) -> bool:
    """Is every copy and arrival that completes g's barrier issued only after w runs?"""
    done = [o for o in an.ops if o.role in _COMPLETERS and o.mbar is not None
            and _same_barriers(an, o, g)]
    return bool(done) and all(ft.dominates(w.index, o.index) for o in done)


STRUCTURAL.append(first_phase)
