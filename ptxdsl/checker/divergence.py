"""Which code runs in only some threads, and under which conditions.

A conditional branch whose predicate differs between threads (its level, see `values`) makes
the blocks between it and its reconvergence point (its immediate post-dominator) divergent.
Each such block gets condition tokens: `(value number of p, polarity)` when it is reached only
with p true (or only false), or `("region", branch block)` when either way. A statement's
tokens are its block's plus its own guard's. "Thread set A is inside thread set B" is then
approximated by `tokens(B) <= tokens(A)`: the checker uses it to tell whether an init or an
acquire was done by the same threads that later rely on it.

At the reconvergence point of a divergent branch, CTA-wide facts ("some thread has initialised
the barrier") hold if they hold on any path from the branch: `union_at[block]` lists the
predecessors whose states are united there (the others, such as a loop's back edge, are
still intersected).
"""

from __future__ import annotations

from typing import Any

from .cfg import CFG, dominators, guard_polarity
from .defs import dests as _written
from .values import Values

# A comparison and its negation name one condition: `tid != 0` false is `tid == 0` true.
# (Integer comparisons only: the ordered float `ne` is not the negation of `eq` for NaN, but
# the conditions correlated here are thread identities, never floats.)
_NEGATED = {"ne": "eq", "ge": "lt", "gt": "le", "hs": "lo", "hi": "ls"}
# Special registers that change while a thread runs: conditions on them are not correlated.
_VOLATILE = ("clock", "globaltimer", "pm")


def invariant(vn: Any) -> bool:
    """Does a value number name a value that stays the same for a thread all kernel long
    (built from its identity, constants and parameters only)? Then two branches on it in that
    thread go the same way."""
    if not isinstance(vn, tuple) or not vn:
        return True
    tag = vn[0]
    if tag in ("reg", "other"):
        return False
    if tag == "sreg":
        return not str(vn[1]).startswith(_VOLATILE)
    if tag in ("const", "param", "addr"):
        return True
    return all(invariant(x) for x in vn[1:] if isinstance(x, tuple))


def normal_token(vn: Any, polarity: bool) -> tuple[Any, bool]:
    """One spelling per condition: `setp.ne a, b` false becomes `setp.eq a, b` true."""
    if isinstance(vn, tuple) and len(vn) == 6 and vn[0] == "setp" and vn[4] is None \
            and vn[1] in _NEGATED:
        return ("setp", _NEGATED[vn[1]], *vn[2:]), not polarity
    return vn, polarity


class Divergence:
    """Per-block divergence level and condition tokens, and per-statement queries."""

    def __init__(self, cfg: CFG, values: Values):
        self.cfg, self.values = cfg, values
        n = len(cfg.blocks)
        self.level = [0] * n
        self.tokens: list[frozenset] = [frozenset()] * n
        self.union_at: list[frozenset[int]] = [frozenset()] * n
        self.ctrl: list[list[tuple[int, int]]] = [[] for _ in range(n)]
        self._owners: dict[int, frozenset] = {}
        self._idom: list[int | None] | None = None
        self._compute()
        if any(self.level) and self._refine():
            self._compute()

    def _compute(self) -> None:
        cfg, values = self.cfg, self.values
        n = len(cfg.blocks)
        level = [0] * n
        tokens: list[set[tuple[Any, Any]]] = [set() for _ in range(n)]
        union_at: list[set[int]] = [set() for _ in range(n)]
        ctrl: list[list[tuple[int, int]]] = [[] for _ in range(n)]
        for b in cfg.blocks:
            if b.branch is None or b.taken is None or b.fall is None or b.taken == b.fall:
                continue   # (a branch block has both successors)
            pred, polarity = guard_polarity(cfg.body[b.branch].guard)
            lv = values.level(pred)
            if lv == 0:
                continue
            stop = cfg.ipdom[b.id]
            taken = cfg.reachable([b.taken], stop)
            fall = cfg.reachable([b.fall], stop)
            vn = values.vn(pred)
            region = taken | fall
            if b.id in region:
                # A loop's own branch (a try_wait spin, a latch): the blocks that run before
                # it in every iteration (those dominating it) run in every thread that came.
                region -= self._dominating(b.id)
            for x in region:
                if x in taken and x not in fall:
                    tokens[x].add((vn, polarity))
                elif x in fall and x not in taken:
                    tokens[x].add((vn, not polarity))
                else:
                    tokens[x].add(("region", b.id))
                level[x] = max(level[x], lv)
                ctrl[x].append((b.branch, lv))
            if stop is not None and stop < n:
                region = taken | fall | {b.id}
                union_at[stop] |= {p for p in cfg.preds[stop] if p in region}
        self.level = level
        self.tokens = [frozenset(t) for t in tokens]
        self.union_at = [frozenset(u) for u in union_at]
        self.ctrl = ctrl

    def _dominating(self, b: int) -> set[int]:
        if self._idom is None:
            self._idom = dominators(self.cfg)
        out: set[int] = set()
        x: int | None = b
        while x is not None and x not in out:
            out.add(x)
            x = self._idom[x]
        return out

    def _refine(self) -> bool:
        """Registers written in divergent code differ per thread too: tell `values`, and say
        whether that changed the level of any branch predicate (then recompute once)."""
        values, cfg = self.values, self.cfg
        # Only registers written more than once take their writer's control divergence.
        if not any(len(values.defs.get(r, ())) > 1 for b in cfg.blocks if self.level[b.id]
                   for i in b.stmts for r in _written(cfg.body[i].insn)):
            return False
        before = {b.id: values.level(guard_polarity(cfg.body[b.branch].guard)[0])
                  for b in cfg.blocks if b.branch is not None}
        values.ctrl_level = {i: self.level[b.id] for b in cfg.blocks for i in b.stmts
                             if self.level[b.id]}
        values._level.clear()
        return any(values.level(guard_polarity(cfg.body[b.branch].guard)[0]) != lv
                   for b in cfg.blocks if b.branch is not None
                   for lv in (before[b.id],))

    # -- per statement ------------------------------------------------------------------------
    def stmt_level(self, i: int) -> int:
        """How far apart threads may be on whether statement i runs (0, 1 warp, 2 lane)."""
        lv = self.level[self.cfg.block_of(i)]
        guard = self.cfg.body[i].guard
        if guard is not None:
            lv = max(lv, self.values.level(guard))
        return lv

    def stmt_tokens(self, i: int) -> frozenset:
        toks = self.tokens[self.cfg.block_of(i)]
        guard = self.cfg.body[i].guard
        if guard is not None and self.values.level(guard):
            pred, polarity = guard_polarity(guard)
            toks = toks | {(self.values.vn(pred), polarity)}
        return toks

    def owner_tokens(self, i: int) -> frozenset:
        """The conditions, fixed for the life of a thread, under which statement i runs
        (normalised; see `normal_token`): what every thread running it satisfies."""
        hit = self._owners.get(i)
        if hit is None:
            hit = self._owners[i] = frozenset(
                normal_token(vn, pol) for vn, pol in self.stmt_tokens(i)
                if vn != "region" and invariant(vn))
        return hit

    def edge_token(self, p: int, b: int) -> tuple[Any, bool] | None:
        """The thread-invariant condition that holds along the CFG edge p -> b (None when the
        edge says nothing: no branch, both ways to b, or a condition that changes)."""
        blk = self.cfg.blocks[p]
        if blk.branch is None or blk.taken == blk.fall:
            return None
        pred, polarity = guard_polarity(self.cfg.body[blk.branch].guard)
        if not self.values.level(pred):
            return None
        vn = self.values.vn(pred)
        if not invariant(vn):
            return None
        return normal_token(vn, polarity if b == blk.taken else not polarity)

    def controlling(self, i: int, level: int = 2) -> list[int]:
        """Statements making statement i run in only some threads (at least `level`): its
        guard's definition, then the divergent branches it lies under."""
        out: list[int] = []
        guard = self.cfg.body[i].guard
        if guard is not None and self.values.level(guard) >= level:
            defs = self.values.defs.get(guard_polarity(guard)[0], ())
            out.extend(defs[:1])
        out.extend(s for s, lv in self.ctrl[self.cfg.block_of(i)] if lv >= level)
        return out

    def same_single_threads(self, earlier: int, later: int) -> bool:
        """Do the same few threads run both statements (equal, non-empty conditions, or a
        one-thread CTA)? Data one thread writes is then read back by that thread only."""
        if self.values.nthreads == 1:
            return True
        toks = self.stmt_tokens(earlier)
        return bool(toks) and toks == self.stmt_tokens(later)

    def same_threads(self, earlier: int, later: int) -> bool:
        """Does every thread that runs statement `later` also run `earlier`? (approximation:
        the conditions of `earlier` are among those of `later`)."""
        return self.stmt_tokens(earlier) <= self.stmt_tokens(later)
