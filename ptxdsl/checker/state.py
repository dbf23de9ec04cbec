"""The dataflow state the hazards share, and how states meet where paths join.

- `must`: facts true on every path, CTA-wide ("some thread initialised barrier B", "some thread
  acquired map M"): intersected at joins, united at the reconvergence point of a divergent
  branch (each side ran in some thread).
- `may`: things possibly pending on some path (an init not yet followed by a barrier, a store
  whose shared source may still be read, ...): united at joins. Facts name the statement that
  caused them, so a finding can point at it.
- `tx`: per mbarrier, the bytes announced with expect_tx and the bytes delivered by TMA in the
  current phase (see `join_tx`).
"""

from __future__ import annotations

from typing import Any

import attrs

# A phase's accounting: (expected, delivered, sites, waited). None counts are unknown.
Tx = tuple[int | None, int | None, frozenset, bool]


@attrs.frozen
class State:
    """The dataflow state at a point of the kernel: `must` facts (true on every path), `may` facts
    (true on some path), and `tx`, each barrier's transaction bytes announced and delivered in
    the current phase."""

    must: frozenset = frozenset()
    may: frozenset = frozenset()
    tx: tuple = ()   # sorted ((barrier key, Tx), ...) -- hashable and comparable

    def tx_get(self, key: Any) -> Tx | None:
        """The transaction count of barrier `key`, or None."""
        for k, v in self.tx:
            if k == key:
                return v
        return None

    def tx_set(self, key: Any, value: Tx | None) -> State:
        """The state with barrier `key`'s transaction count set to `value` (removed for None)."""
        items = [(k, v) for k, v in self.tx if k != key]
        if value is not None:
            items.append((key, value))
        return State(self.must, self.may, tuple(sorted(items, key=_order)))

    def commit_group(self, tag: str, cap: int) -> State:
        """A commit_group of the async operations whose facts are `(tag, site, age, x)`: an
        uncommitted one (age None) joins the newest group (age 0), every older group ages by
        one. Ages stop at `cap` ("cap or more"), which keeps the lattice finite."""
        if not any(f[0] == tag for f in self.may):
            return self
        may = frozenset((tag, f[1], 0 if f[2] is None else min(f[2] + 1, cap), f[3])
                        if f[0] == tag else f for f in self.may)
        return State(self.must, may, self.tx)


def _order(item: tuple[Any, Tx]) -> tuple:
    root, off = item[0]
    return (id(root), -1 if off is None else off)


def join(states: list[State], united: list[bool]) -> State:
    """Meet states from several predecessors; `united[i]`: state i comes from a divergent
    branch reconverging here (its must-facts count if any such path has them)."""
    grouped = [s for s, u in zip(states, united, strict=True) if u]
    rest = [s for s, u in zip(states, united, strict=True) if not u]
    must = frozenset().union(*(s.must for s in grouped)) if grouped else None
    for s in rest:
        must = s.must if must is None else must & s.must
    assert must is not None   # a join of at least one state
    may = frozenset().union(*(s.may for s in states))
    keys = {k for s in states for k, _ in s.tx}
    tx = []
    for k in keys:
        merged = join_tx([s.tx_get(k) for s in states], bool(grouped))
        if merged is not None:
            tx.append((k, merged))
    return State(must, may, tuple(sorted(tx, key=_order)))


def join_tx(values: list[Tx | None], union: bool) -> Tx | None:
    """Meet the phase accounting of one barrier from several paths.

    Waited accounting (its phase was waited for) met with none is none: the next expect_tx
    starts a new phase either way. At a divergent reconvergence the threads that did work in
    the current phase count, and waited leftovers of the previous phase do not; elsewhere a
    path with no accounting, or differing counts, make the counts unknown. Counts therefore
    never grow around a back edge, and loops stay finite.
    """
    present = [v for v in values if v is not None]
    if not present:
        return None
    absent = len(present) < len(values)
    if all(v[3] for v in present):
        if absent or len({v[:2] for v in present}) > 1:
            return None
        return present[0][0], present[0][1], frozenset().union(*(v[2] for v in present)), True
    if union:
        present = [v for v in present if not v[3]]
        absent = False
    sites = frozenset().union(*(v[2] for v in present))
    waited = any(v[3] for v in present)
    counts = {v[:2] for v in present}
    if absent or len(counts) > 1:
        return None, None, sites, waited
    exp, got = counts.pop()
    return exp, got, sites, waited


def add_tx(value: Tx | None, site: int, expected: int | None = 0,
           delivered: int | None = 0) -> Tx:
    """Account expect_tx / delivered bytes; the first after a completed phase starts anew."""
    if value is None or value[3]:
        value = (0, 0, frozenset(), False)
    exp = None if value[0] is None or expected is None else value[0] + expected
    got = None if value[1] is None or delivered is None else value[1] + delivered
    return exp, got, value[2] | {site}, False
