"""`ring-stage-mismatch`: two sides of one ring that count its stages differently.

A ring's barriers are an array `bars + 8 * (i mod n)` (`ranges` finds the ring term: `i & 3`,
`i % 3`, a stage register wrapped at n, `stages.wrap_count`). The producer (its copies, its
arrive.expect_tx, its empty-waits) and the consumers (their full-waits, their releases) must
all use the same n: after a half-finished change (`kb & 3` on one side, `kb % 3` on the
other, or a ring of 4 on one side and 3 on the other) the two sides meet on different stages
from the fourth trip on, and a wait either hangs or passes on another stage's data.

The barrier operations of a kernel are grouped by array (the symbol and the offset the ring
starts at); an array indexed with more than one n is reported once per counter and n that
differs from the ring's real count: the element count of a static array of barriers, or else
the n the copies completing on the array use. The reads of a ring buffer are compared the
same way with the copies that fill it (a read of `tiles + 16384 * (kb % 3)` from a buffer
loaded at `tiles + 16384 * (kb & 3)`).
"""

from __future__ import annotations

from typing import Any

from ..operands import Symbol
from .analysis import STRUCTURAL, Analysis
from .findings import Hazard
from .hazards_bulk import _start
from .hazards_ring import _loads
from .ops import Op, Role
from .stages import base

_BARRIER_OPS = (Role.MBAR_WAIT, Role.MBAR_ARRIVE, Role.MBAR_EXPECT_TX, Role.TMA_LOAD,
                Role.BULK_LOAD)
_WHAT = {Role.MBAR_WAIT: "wait", Role.MBAR_ARRIVE: "arrive", Role.MBAR_EXPECT_TX: "expect_tx",
         Role.TMA_LOAD: "copy", Role.BULK_LOAD: "copy", Role.SMEM_READ: "read"}


def _ring_at(an: Analysis, operand: Any) -> tuple[Any, int, Any, int, int] | None:
    """(symbol, start offset, counter, n, stride) of a ring address, or None."""
    start = _start(an, operand)
    if start is None or start[1] is None or start[1] != start[2] or start[3] is None:
        return None
    root, lo, _, ring = start
    if not isinstance(root, Symbol) or ring[1] < 2:
        return None
    return root, lo, base(an.values, ring[0])[0], ring[1], ring[2]


def _true_count(an: Analysis, root: Symbol, lo: int, copies: list[tuple[Op, int]]
                ) -> int | None:
    """How many stages a ring of barriers at `root + lo` has: the elements of a static array
    of .b64 barriers it starts, or else the n every copy completing on it uses."""
    if lo == 0 and root.count and root.count > 1 and getattr(root.type, "bits", 0) == 64:
        return int(root.count)
    ns = {n for _, n in copies}
    return ns.pop() if len(ns) == 1 else None


def _init_run(an: Analysis, root: Symbol, lo: int, starts: set[int]) -> int | None:
    """How many barriers `mbarrier.init` sets up 8 bytes apart from `root + lo`, up to the
    next ring start or constant barrier address on `root` (a ring in dynamic shared memory,
    `MbarrierRing(k, n, storage=Addr(dyn, off))`: full[0..n) then empty[0..n))."""
    inits, stops = set(), {b for b in starts if b > lo}
    for o in an.ops:
        if o.mbar is None:
            continue
        k = an.key(o, "mbar")
        if k is None or k[0] is not root or k[1] is None:
            continue
        if o.role is Role.MBAR_INIT:
            inits.add(k[1])
        elif k[1] > lo:
            stops.add(k[1])
    stop = min(stops, default=None)
    n, x = 0, lo
    while x in inits and (stop is None or x < stop):
        n, x = n + 1, x + 8
    return n if n > 1 else None


def _compare(an: Analysis, what: str, groups: dict[tuple, list[tuple[Op, int, Any]]],
             truth_of, out: list[tuple]) -> None:
    """Collect in `out`, per group of ring uses (one barrier array, one buffer), the uses
    whose stage count differs from the group's real count: (op, n, truth, other side's op,
    counter, what)."""
    for key, uses in groups.items():
        if len({n for _, n, _ in uses}) < 2:
            continue
        truth = truth_of(key, uses)
        if truth is None:
            first = uses[0][0]
            an.note("ring-stage-mismatch", f"the ring of {what} at "
                    f"{an.describe(first.mbar if what == 'barriers' else first.smem)} is "
                    "indexed with different stage counts, and the checker cannot tell which "
                    "is the ring's", [(_WHAT.get(o.role, "use"), o.index)
                                      for o, _, _ in uses[:2]])
            continue
        right = next((o for o, n, _ in uses if n == truth), None)
        for o, n, counter in sorted(uses, key=lambda u: u[0].index):
            if n == truth:
                continue
            out.append((o, n, truth, right, counter, what))


def _report(an: Analysis, found: list[tuple]) -> None:
    # In body order, so the finding of a counter leads with its first wrong use.
    for o, n, truth, right, counter, what in sorted(found, key=lambda f: f[0].index):
        operand = o.mbar if what == "barriers" else o.smem
        sites = [(_WHAT.get(o.role, "use"), o.index)]
        if right is not None:
            sites.append((_WHAT.get(right.role, "use"), right.index))
        an.report(Hazard.RING_STAGE_MISMATCH, f"this {_WHAT.get(o.role, 'use')} indexes the "
                  f"ring of {what} at {an.describe(operand)} modulo {n}, but the ring has "
                  f"{truth} stages (the other side walks it modulo {truth}): the two sides "
                  "meet on different stages, so waits hang or pass on another stage's data",
                  sites, dedupe=("stage-mismatch", id(counter), n))


def stage_counts(an: Analysis) -> None:
    """`ring-stage-mismatch`: the uses of one ring's barriers (copies, expect_tx, waits, releases)
    that count its stages with different moduli."""
    loads = _loads(an)
    if not loads:
        return
    bars: dict[tuple, list[tuple[Op, int, Any]]] = {}
    for o in an.ops:
        if o.role not in _BARRIER_OPS or o.mbar is None:
            continue
        r = _ring_at(an, o.mbar)
        if r is not None and r[4] == 8:
            bars.setdefault((id(r[0]), r[1]), []).append((o, r[3], r[2]))

    def bar_truth(key: tuple, uses: list[tuple[Op, int, Any]]) -> int | None:
        copies = [(o, n) for o, n, _ in uses if o.role in (Role.TMA_LOAD, Role.BULK_LOAD)]
        root = _ring_at(an, uses[0][0].mbar)
        if root is None:
            return None
        run = _init_run(an, root[0], key[1], {lo for (r, lo) in bars if r == key[0]})
        # The layout decides where it agrees with one side (a run the other rings' bases
        # do not cut, e.g. full[] and empty[] with no use of empty[], is not trusted).
        if run is not None and any(n == run for _, n, _ in uses):
            return run
        return _true_count(an, root[0], key[1], copies)

    found: list[tuple] = []
    _compare(an, "barriers", bars, bar_truth, found)

    # Buffers: the reads of a ring-indexed destination against the copies that fill it.
    bufs: dict[tuple, list[tuple[Op, int, Any]]] = {}
    for o in list(loads) + [o for o in an.ops if o.role is Role.SMEM_READ]:
        r = _ring_at(an, o.smem) if o.smem is not None else None
        if r is not None:
            bufs.setdefault((id(r[0]), r[1], r[4]), []).append((o, r[3], r[2]))

    def buf_truth(key: tuple, uses: list[tuple[Op, int, Any]]) -> int | None:
        ns = {n for o, n, _ in uses if o.role in (Role.TMA_LOAD, Role.BULK_LOAD)}
        return ns.pop() if len(ns) == 1 else None

    _compare(an, "buffers", {k: v for k, v in bufs.items()
                             if any(o.role is Role.SMEM_READ for o, _, _ in v)}, buf_truth,
             found)
    _report(an, found)


STRUCTURAL.append(stage_counts)
