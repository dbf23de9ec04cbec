"""Copies a launch never issues on the paths where a read has no wait.

A condition built only from constants, parameters and CTA-uniform special registers (Triton's
`K + 63 < 64`: the K loop runs no trip) has one value for the whole CTA during a launch. When
it holds, every branch on it in every thread goes one way: the consumer skips its K loop (no
wait) and the producer warps skip theirs (no copy). A read after the consumer's loop then has a
path with no wait, yet no copy ran on that launch. `copy_free_without_wait` checks that, one
condition at a time: for each value the condition can take, either every path from the entry
to the read passes a wait, or no copy can run (its statement is unreachable once the
branches that value rules out are removed).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from .analysis import Analysis
from .cfg import guard_polarity
from .divergence import invariant
from .ops import Op, Role


def _conditions(an: Analysis) -> dict[Any, list[tuple[int, int, bool]]]:
    """Launch-fixed branch conditions: value number -> [(block, successor, value of the
    condition when that edge is taken)]."""
    hit = an.cache.get("launch_conds")
    if hit is not None:
        return hit
    out: dict[Any, list[tuple[int, int, bool]]] = {}
    for blk in an.cfg.blocks:
        if blk.branch is None or blk.taken is None or blk.fall is None \
                or blk.taken == blk.fall:
            continue
        pred, polarity = guard_polarity(an.body[blk.branch].guard)
        if an.values.level(pred):
            continue
        vn = an.values.vn(pred)
        if not invariant(vn) or vn[0] == "const":
            continue
        out.setdefault(vn, []).extend([(blk.id, blk.taken, polarity),
                                       (blk.id, blk.fall, not polarity)])
    an.cache["launch_conds"] = out
    return out


def _reaches(an: Analysis, target: int, cut: set[tuple[int, int]],
             stops: set[int]) -> bool:
    """Does a path from the entry reach statement `target` without taking an edge in `cut`
    or passing a statement in `stops` (before the target)?"""
    cfg = an.cfg
    goal = cfg.block_of(target)
    seen, todo = {0}, [0]
    while todo:
        b = todo.pop()
        if b >= len(cfg.blocks):
            continue
        blocked = False
        for i in cfg.blocks[b].stmts:
            if b == goal and i == target:
                return True
            if i in stops:
                blocked = True
                break
        if blocked:
            continue
        for s in cfg.succs(b):
            if (b, s) not in cut and s not in seen:
                seen.add(s)
                todo.append(s)
    return False


def copy_free_without_wait(an: Analysis, at: int, sources: Iterable[Op]) -> bool:
    """Is there a launch-fixed condition such that, whichever value it has, either the read
    at statement `at` is reached only through a wait or none of the `sources` copies can
    run? (see the module docstring)"""
    from .trywait import wait_edges
    conds = _conditions(an)
    if not conds:
        return False
    sources = list(sources)
    if any(getattr(o, "multicast", False) for o in sources):
        return False   # another CTA issues it, where a condition on %ctaid may differ
    # A blocking wait stops a path; a try_wait counts only on the edge taken when it passed.
    stops = {o.index for o in an.ops if o.role is Role.MBAR_WAIT
             and getattr(o, "result", None) is None}
    passed = set(wait_edges(an))
    for edges in conds.values():
        ok = True
        for value in (True, False):
            cut = {(p, s) for p, s, v in edges if v != value}
            if not _reaches(an, at, cut | passed, stops):
                continue   # every path to the read waits, with this value
            if any(_reaches(an, o.index, cut, set()) for o in sources):
                ok = False
                break
        if ok:
            return True
    return False
