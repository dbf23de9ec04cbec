"""mbarrier arrive counts and lifecycle: a barrier initialised with a count the arrivals of
one phase cannot reach (or overshoot), and a live barrier re-initialised inside a loop.

How many threads run an arrive is found by evaluating its conditions for every thread of
the CTA (`.reqntid` gives the exact shape): `tid == 0` is one thread, `warp == 0` a warp,
`elect.sync` one lane of each warp that gets there, no condition all of them. Conditions on
anything else (a run-time value, a loop counter) make the number unknown: the check is then
skipped with a note, except that an arrive under a per-lane condition on a barrier expecting
every thread of the CTA is reported (the condition would have to hold in every lane).
Several arrive sites on one barrier are judged by the sums of their arrivals
(`_rival_sites`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from ..instructions.arith import Binary
from ..operands import Addr, Reg, Symbol
from .analysis import STRUCTURAL, Analysis, keys_match
from .cfg import guard_polarity
from .findings import Hazard
from .hazards_bulk import _start
from .hazards_cluster import cp_async_arrives, remote_roots
from .ops import Op, Role
from .values import _CMP, FOLD_DIV, Kind, inline_elected

_ARITH: dict[str, Callable[[Any, Any], Any]] = dict(FOLD_DIV, min=min, max=max)


_MAX_RUN = 64      # barriers one init in a loop is taken to initialise, at most


class _Unknown(Exception):
    pass


class Threads:
    """Evaluates thread-invariant conditions (value numbers) for each thread of the CTA."""

    def __init__(self, an: Analysis, dims: tuple[int, ...]):
        self.an = an
        self.dims = tuple(dims) + (1,) * (3 - len(dims))
        self.n = self.dims[0] * self.dims[1] * self.dims[2]
        self._regs: dict[Any, Any] | None = None

    def _sreg(self, name: str, tid: int) -> int:
        dx, dy, dz = self.dims
        table = {"tid.x": tid % dx, "tid.y": tid // dx % dy, "tid.z": tid // (dx * dy),
                 "ntid.x": dx, "ntid.y": dy, "ntid.z": dz, "laneid": tid % 32}
        if name not in table:
            raise _Unknown(name)
        return table[name]

    def value(self, vn: Any, tid: int) -> int:
        """The value of value number `vn` in thread `tid` (constants, special registers,
        conversions, comparisons and integer arithmetic); `_Unknown` when it depends on anything
        else."""
        if not isinstance(vn, tuple) or not vn:
            raise _Unknown(vn)
        tag = vn[0]
        if tag == "const" and isinstance(vn[1], int):
            return vn[1]
        if tag == "sreg":
            return self._sreg(str(vn[1]), tid)
        if tag == "cvt":
            return self.value(vn[1], tid)
        if tag == "setp" and vn[4] is None and vn[1] in _CMP:
            return int(_CMP[vn[1]](self.value(vn[2], tid), self.value(vn[3], tid)))
        if tag == "mad" and vn[2] in (None, "lo") and vn[1].is_int:   # values.Values' number
            return self.value(vn[4], tid) * self.value(vn[5], tid) + self.value(vn[6], tid)
        if tag in _ARITH and len(vn) == 3:
            out = _ARITH[tag](self.value(vn[1], tid), self.value(vn[2], tid))
            if out is None:
                raise _Unknown(vn)
            return out
        raise _Unknown(vn)

    def _known(self, vn: Any) -> bool:
        try:
            self.value(vn, 0)
        except _Unknown:
            return self._is_elect(vn)
        return True

    def per_lane_unknown(self, i: int) -> bool:
        """Does statement i run under a per-lane condition (`tid + kb * 128 < n`, `lane <
        rem`) that cannot be evaluated per thread?"""
        div = self.an.div
        return any(vn != "region" and div.cond_level(vn) == 2 and not self._known(vn)
                   for vn, _ in div.stmt_tokens(i))

    def _is_elect(self, vn: Any) -> bool:
        if self._regs is None:
            self._regs = {v: r for r, v in self.an.values._vn.items()}
        reg = self._regs.get(vn)
        defs = self.an.values.defs.get(reg, ()) if reg is not None else ()
        if reg is not None and inline_elected(self.an.values, reg) is not None:
            return True
        return len(defs) == 1 and type(self.an.body[defs[0]].insn).__name__ == "Elect"

    def _loop_exits(self, i: int) -> set:
        """Value numbers of the branches leaving the loops around statement i: they decide
        how many iterations (phases) a thread runs, not how many threads arrive per phase."""
        an = self.an
        b = an.cfg.block_of(i)
        out = set()
        for _header, body in an.loops:
            if b not in body:
                continue
            for x in body:
                blk = an.cfg.blocks[x]
                if blk.branch is not None and any(s not in body for s in blk.succs):
                    out.add(an.values.vn(guard_polarity(an.body[blk.branch].guard)[0]))
        return out

    def running(self, i: int, partial: bool = False) -> int | None:
        """How many threads of the CTA run statement i (None: the conditions are unknown).
        Conditions that are the same in every thread computing them (a loop counter's, even
        in a warp-specialized branch) decide whether a phase's arrivals happen, not how many.
        `partial`: leave out the conditions that cannot be evaluated (at most that many)."""
        hit = self.running_tids(i, partial)
        if hit is None:
            return None
        tids, elect = hit
        if elect:   # one lane of every warp some thread of which gets there
            return len({t // 32 for t in tids})
        return len(tids)

    def running_tids(self, i: int, partial: bool = False) -> tuple[list[int], bool] | None:
        """The threads whose conditions let them reach statement i, and whether an
        elect.sync then picks one lane of each of their warps (None: unknown). `partial` as
        in `running`."""
        plain, elect = [], []
        exits = self._loop_exits(i)
        div = self.an.div
        for tok in div.stmt_tokens(i):
            vn, pol = tok
            if vn in exits or div.cond_level(vn) == 0:
                continue
            if vn == "region" or partial and not self._known(vn):
                if partial:
                    continue
                return None
            if self._is_elect(vn):
                if not pol:
                    return None
                elect.append(vn)
            else:
                plain.append((vn, pol))
        try:
            tids = [t for t in range(self.n)
                    if all(bool(self.value(vn, t)) == pol for vn, pol in plain)]
        except _Unknown:
            return None
        return tids, bool(elect)


def _count_of(an: Analysis, inits: list[Op]) -> tuple[int | None, int | None]:
    counts = {an.const(o.count) for o in inits}
    return (counts.pop(), inits[0].index) if len(counts) == 1 else (None, None)


def _anchor(an: Analysis, operand: Any, depth: int = 0) -> tuple[Any, int] | None:
    """(symbol, offset) of the constant base of `base + run-time offset` (a ring stage
    `full_base + 8 * stage`), when the base is a known address and the other term a plain
    integer; None otherwise."""
    if isinstance(operand, Addr) and not isinstance(operand.base, Symbol):
        hit = _anchor(an, operand.base, depth + 1)
        return None if hit is None else (hit[0], hit[1] + operand.offset)
    if not isinstance(operand, Reg) or depth > 8:
        return None
    v = an.val(operand)
    if v.kind is Kind.addr and isinstance(v.root, Symbol) and v.offset is not None:
        return v.root, v.offset
    defs = an.values.defs.get(operand, ())
    if len(defs) != 1 or an.body[defs[0]].guard is not None:
        return None
    insn = an.body[defs[0]].insn
    if not (isinstance(insn, Binary) and insn.op == "add"):
        return None
    for base, rest in ((insn.a, insn.b), (insn.b, insn.a)):
        hit = _anchor(an, base, depth + 1)
        if hit is not None and an.spans.of(rest).root is None:
            return hit
    return None


def _barriers(an: Analysis) -> dict[int, frozenset | None]:
    """Statement -> the offsets (into its symbol) of the initialised barriers each barrier
    operand may address (None: unknown). A constant address is one barrier; bounded offsets
    (`full + 8 * (i % N)`) the inits in those bounds (an init in a counted loop inits every
    barrier of its bounds); `base + run-time offset` the run of
    barriers initialised 8 bytes apart from `base` up to the next base another barrier
    operation uses (the layout of rings in one buffer: full[0..N), then empty[0..N))."""
    hit = an.cache.get("arrive_barriers")
    if hit is not None:
        return hit
    inits: dict[int, list[int]] = {}
    for o in an.ops:
        if o.role is Role.MBAR_INIT:
            k = an.key(o, "mbar")
            if k is not None and k[1] is not None:
                inits.setdefault(id(k[0]), []).append(k[1])
            elif k is not None:
                # An init in a counted loop (`init(&full[i], 1)` for i < N) inits each
                # barrier of its bounded span.
                start = _start(an, o.mbar)
                if start is not None and start[1] is not None and start[2] is not None \
                        and start[3] is None and 0 <= start[2] - start[1] <= 8 * _MAX_RUN:
                    inits.setdefault(id(k[0]), []).extend(range(start[1], start[2] + 1, 8))
    users = [o for o in an.ops if o.mbar is not None and o.role is not Role.MBAR_INIT]
    anchors: dict[int, tuple[Any, int] | None] = {o.index: _anchor(an, o.mbar) for o in users}
    bases: dict[int, set[int]] = {}
    for a in anchors.values():
        if a is not None:
            bases.setdefault(id(a[0]), set()).add(a[1])
    out: dict[int, frozenset | None] = {}
    for o in an.ops:
        if o.mbar is None:
            continue
        k = an.key(o, "mbar")
        if k is not None and k[1] is not None:
            out[o.index] = frozenset({k[1]})
            continue
        offs = sorted(set(inits.get(id(k[0]), ()))) if k is not None else []
        start = _start(an, o.mbar)
        if start is not None and start[1] is not None and start[2] is not None:
            _, lo, hi, ring = start
            if ring is not None:
                lo, hi = lo + min(0, ring[2] * (ring[1] - 1)), hi + max(0, ring[2] * (ring[1] - 1))
            out[o.index] = frozenset(x for x in offs if lo <= x <= hi)
            continue
        a = anchors.get(o.index)
        if a is None or k is None or a[0] is not k[0] or a[1] not in offs:
            out[o.index] = None
            continue
        stop = min((b for b in bases.get(id(a[0]), ()) if b > a[1]), default=None)
        run, x = [], a[1]
        while x in offs and (stop is None or x < stop):
            run.append(x)
            x += 8
        out[o.index] = frozenset(run)
    an.cache["arrive_barriers"] = out
    return out


def _same_barriers(an: Analysis, a: Op, b: Op) -> bool:
    """May two barrier operations address the same barrier?"""
    ka, kb = an.key(a, "mbar"), an.key(b, "mbar")
    if ka is None or kb is None or ka[0] is not kb[0]:
        return False
    sa, sb = _barriers(an).get(a.index), _barriers(an).get(b.index)
    if sa is None or sb is None:
        return keys_match(ka, kb)
    return bool(sa & sb)


def arrive_counts(an: Analysis) -> None:
    """`mbar-arrive-count`: per barrier of a shared symbol, the arrivals one phase
    gets (the arrive's thread count from its conditions, times its count) against the count the
    barrier was initialised with; a note when the threads cannot be counted."""
    arrives = [o for o in an.ops if o.role is Role.MBAR_ARRIVE]
    if not arrives or cp_async_arrives(an):
        return
    dims = getattr(an.kernel, "reqntid", None)
    inits = [o for o in an.ops if o.role is Role.MBAR_INIT]
    threads = Threads(an, dims) if dims else None
    by_root: dict[Any, list[Op]] = {}
    for o in arrives:
        key = an.key(o, "mbar")
        if key is not None and isinstance(key[0], Symbol) and key[0].space.is_shared:
            by_root.setdefault(id(key[0]), []).append(o)
    remote = remote_roots(an)
    for root, group in by_root.items():
        if root in remote:
            continue   # other CTAs arrive too: hazards_remote counts them all
        for o in group:
            mine = [i for i in inits if _same_barriers(an, i, o)]
            rivals = {x.index for x in group if _same_barriers(an, x, o)}
            if not mine:
                continue   # reported as mbar-uninit
            count, init_at = _count_of(an, mine)
            if len(rivals) != 1:
                _rival_sites(an, o, sorted((x for x in group if x.index in rivals),
                                           key=lambda x: x.index), threads, count, init_at)
                continue
            per = an.const(o.arrivals)
            if count is None or per is None:
                an.note("arrive-count", f"the mbarrier at {an.describe(o.mbar)} is one of "
                        "several initialised with different or run-time counts, or the "
                        "arrive's count is computed at run time: its count is not compared "
                        "with the init", [("arrive", o.index)] + [("init", i.index)
                                                                 for i in mine[:1]])
                continue
            _check(an, o, threads, count, per, init_at)


def _rival_sites(an: Analysis, o: Op, rivals: list[Op], threads: Threads | None,
                 count: int | None, init_at: int | None) -> None:
    """Several arrive sites may arrive on one barrier. Which phase each feeds is open (a
    release inside a loop and a drain after it are alternatives; two producers feed one
    phase together), but a phase gets a sum of whole sites' arrivals either way: reported
    when even the smallest site's overshoots the init count, or when no sum of them can
    equal it (the count is not a multiple of the sites' common divisor); else a note."""
    arrivals: list[tuple[int, int]] = []
    for x in rivals:
        running = threads.running(x.index) if threads is not None else None
        per = an.const(x.arrivals)
        if running is None or per is None or count is None:
            arrivals = []
            break
        arrivals.append((running, per))
    if not arrivals or count is None:
        an.note("arrive-count", f"{len(rivals)} arrive sites may arrive on the mbarrier at "
                f"{an.describe(o.mbar)}, and how many arrivals one of them makes (or the "
                "init count) is unknown: their counts are not compared with its init",
                [("arrive", r.index) for r in rivals[:2]])
        return
    totals = [n * per for n, per in arrivals]
    at = rivals.index(o)
    running, per = arrivals[at]
    got = totals[at]
    if min(totals) > count:
        effect = ("the phase completes before all of them arrived and the rest count toward "
                  "the next phase")
    elif count % math.gcd(*totals):
        effect = (f"no sum of the {len(rivals)} arrive sites' arrivals on it "
                  f"({', '.join(map(str, sorted(set(totals))))} each) makes {count}: the "
                  "phase never completes, or overshoots into the next")
    else:
        # Which phase each site feeds is open (a release inside the loop and a drain after
        # it, or two producers): sums that fit exist.
        an.note("arrive-count", f"{len(rivals)} arrive sites may arrive on the mbarrier at "
                f"{an.describe(o.mbar)}: which of them feed one phase is not known, and some "
                "sums of their arrivals make its init count", [("arrive", r.index)
                                                               for r in rivals[:2]])
        return
    an.report(Hazard.MBAR_ARRIVE_COUNT, f"the mbarrier at {an.describe(o.mbar)} is initialised "
              f"to expect {count} arrivals per phase, but {running} "
              f"thread{'s' if running != 1 else ''} run this arrive"
              f"{f' (count {per} each)' if per != 1 else ''}, {got} arrivals: {effect}",
              [("arrive", o.index), ("init", init_at)],
              dedupe=("arrive-sites", tuple(r.index for r in rivals)))


def _check(an: Analysis, o: Op, threads: Threads | None, count: int, per: int,
           init_at: int | None) -> None:
    what = an.describe(o.mbar)
    running = threads.running(o.index) if threads is not None else None
    if running is None:
        most = threads.running(o.index, partial=True) \
            if threads is not None and threads.per_lane_unknown(o.index) else None
        if threads is not None and most is not None and count == most * per:
            who = (f"every thread of the {threads.n}-thread CTA" if most == threads.n else
                   f"every one of the {most} threads that can run this arrive")
            an.report(Hazard.MBAR_ARRIVE_COUNT, f"the mbarrier at {what} expects {count} "
                      f"arrivals per phase ({who}), but "
                      "this arrive runs under a condition that differs between lanes: some "
                      "threads do not arrive and the phase never completes",
                      [("arrive", o.index), ("init", init_at)]
                      + [("condition", c) for c in an.div.controlling(o.index)[:1]])
            return
        why = ("the CTA shape is not fixed (use reqntid=)" if threads is None else
               "its condition depends on values the checker cannot evaluate per thread")
        an.note("arrive-count", f"how many threads run the arrive on {what} is unknown ({why})"
                ": its count is not compared with the init", [("arrive", o.index)])
        return
    got = running * per
    if got == count:
        return
    effect = ("the phase never completes and its waiters hang" if got < count else
              "the phase completes before all of them arrived and the rest count toward the "
              "next phase")
    an.report(Hazard.MBAR_ARRIVE_COUNT, f"the mbarrier at {what} is initialised to expect "
              f"{count} arrivals per phase, but {running} thread{'s' if running != 1 else ''} "
              f"run this arrive{f' (count {per} each)' if per != 1 else ''}, {got} arrivals: "
              f"{effect}", [("arrive", o.index), ("init", init_at)])


def reinit_in_loop(an: Analysis) -> None:
    """An mbarrier.init inside a loop whose barrier is also used in that loop: each iteration
    re-initialises a barrier that threads or TMA may still be using (reported as such, not as
    the constant parity it leads to)."""
    inits = [o for o in an.ops if o.role is Role.MBAR_INIT]
    if not inits or not an.loops:
        return
    users = [o for o in an.ops if o.mbar is not None and o.role is not Role.MBAR_INIT]
    invals = [o for o in an.ops if o.role is Role.MBAR_INVAL]
    for o in inits:
        key = an.key(o, "mbar")
        for _header, body in an.loops:
            if an.cfg.block_of(o.index) not in body:
                continue
            used = [u for u in users if an.cfg.block_of(u.index) in body
                    and keys_match(an.key(u, "mbar"), key)]
            if not used or any(an.cfg.block_of(v.index) in body
                               and keys_match(an.key(v, "mbar"), key) for v in invals):
                continue
            an.report(Hazard.MBAR_REINIT, f"the mbarrier at {an.describe(o.mbar)} is "
                      "initialised again on every iteration of a loop that also uses it: the "
                      "re-init races with arrivals, copies and waits of the previous "
                      "iteration, and resets its phase to 0", [("init", o.index),
                                                              ("use", used[0].index)],
                      dedupe=("reinit", o.index))
            an.cache.setdefault("reinit", set()).add(id(key[0]) if key else None)
            break


STRUCTURAL.insert(0, reinit_in_loop)
STRUCTURAL.append(arrive_counts)
