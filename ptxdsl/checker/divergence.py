"""Which code runs in only some threads, and under which conditions.

A conditional branch whose predicate differs between threads (its level, see `values`) makes
the blocks between it and its reconvergence point (its immediate post-dominator) divergent.
Each such block gets condition tokens: `(value number of p, polarity)` when it is reached only
with p true (or only false), or `("region", branch block)` when either way. A statement's
tokens are its block's plus its own guard's. "Thread set A is inside thread set B" is then
approximated by `tokens(B) <= tokens(A)`: the checker uses it to tell whether an init or an
acquire was done by the same threads that later rely on it.

Where the tokens differ, a CTA of known shape (`.reqntid`) lets `ThreadSets` decide it by
evaluating the conditions for every thread, so one leader written two ways (`tid == 0` and
`warp == 0 && lane == 0`, `tid & 127` and `tid % 128`) is one thread set.

At the reconvergence point of a divergent branch, CTA-wide facts ("some thread has initialised
the barrier") hold if they hold on any path from the branch: `union_at[block]` lists the
predecessors whose states are united there (the others, such as a loop's back edge, are
still intersected).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from ..instructions.warp import Elect
from .cfg import CFG, dominators, guard_polarity
from .defs import dests as _written
from .ops import inline_elect
from .values import _CMP, FOLD_DIV, Values, inline_elected

# A comparison and its negation name one condition: `tid != 0` false is `tid == 0` true.
# (Integer comparisons only: the ordered float `ne` is not the negation of `eq` for NaN, but
# the conditions correlated here are thread identities, never floats.)
_NEGATED = {"ne": "eq", "ge": "lt", "gt": "le", "hs": "lo", "hi": "ls"}
# Special registers that change while a thread runs: conditions on them are not correlated.
_VOLATILE = ("clock", "globaltimer", "pm")


def invariant(vn: Any, settled: Callable[[int], bool] | None = None) -> bool:
    """Does a value number name a value that stays the same for a thread all kernel long
    (built from its identity, constants and parameters only)? Then two branches on it in that
    thread go the same way. `settled(id)`: is the register of an opaque `("reg", id)` leaf
    one that no thread writes again once it has read it (`Divergence.settled`)?"""
    if not isinstance(vn, tuple) or not vn:
        return True
    tag = vn[0]
    if tag == "reg":
        return settled is not None and settled(vn[1])
    if tag == "other":
        return False
    if tag == "sreg":
        return not str(vn[1]).startswith(_VOLATILE)
    if tag in ("const", "param", "addr", "elect"):
        return True
    return all(invariant(x, settled) for x in vn[1:] if isinstance(x, tuple))


def normal_token(vn: Any, polarity: bool) -> tuple[Any, bool]:
    """One spelling per condition: `setp.ne a, b` false becomes `setp.eq a, b` true, and
    `not.pred q, p` true is p false."""
    while isinstance(vn, tuple) and len(vn) == 2 and vn[0] == "not":
        vn, polarity = vn[1], not polarity
    if isinstance(vn, tuple) and len(vn) == 6 and vn[0] == "setp" and vn[4] is None \
            and vn[1] in _NEGATED:
        return ("setp", _NEGATED[vn[1]], *vn[2:]), not polarity
    return vn, polarity


# Values a condition is evaluated on stay in [0, 2**31): there the signed and unsigned forms
# of an operation agree (a value number does not record the type); anything else is unknown.
_LIMIT = 1 << 31
# A shift by 32 or more is left unknown (its result depends on the operand's width).
_ARITH: dict[str, Callable[[int, int], int | None]] = dict(
    FOLD_DIV, shl=lambda a, b: a << b if b < 32 else None, min=min, max=max)
_BOOL = {"and": lambda a, b: a & b, "or": lambda a, b: a | b, "xor": lambda a, b: a ^ b}
_DEPTH = 64   # conditions on thread ids are short; a longer chain is not evaluated
_SREGS = ("tid.x", "tid.y", "tid.z", "ntid.x", "ntid.y", "ntid.z", "laneid")
Bits = tuple[int, ...]   # a thread set per possible elected lane (one entry: no elect.sync)


class _Unknown(Exception):
    pass


def _pairs(a: Bits, b: Bits) -> Iterable[tuple[int, int]]:
    """Pair the entries of two thread sets (a single entry holds for every elected lane)."""
    if len(a) == 1:
        return ((a[0], y) for y in b)
    if len(b) == 1:
        return ((x, b[0]) for x in a)
    return zip(a, b, strict=True)


class ThreadSets:
    """Which threads of a CTA of known shape satisfy thread-invariant conditions: each
    condition is evaluated for every thread (`%tid`, `%ntid`, `%laneid`, constants, integer
    arithmetic and comparisons) into a bitmask of linear thread indices.

    `elect.sync` is modelled too. The PTX ISA promises that "the same leader thread is elected
    for the same membermask every time", not which lane it is: so two elect.sync with one
    membermask name the same lane L of a warp, and a set that involves one is a tuple with an
    entry for every lane L of the mask (a question must hold for each). Kernels whose
    elect.sync use several masks (or one not constant) get no elect modelling.
    """

    def __init__(self, values: Values, dims: tuple[int, ...]):
        self.values = values
        dx, dy, dz = (*dims, 1, 1)[:3]
        self.n = dx * dy * dz
        self.all = (1 << self.n) - 1
        lin = range(self.n)
        self._sregs: dict[str, list[int]] = dict(zip(_SREGS, (
            [t % dx for t in lin], [t // dx % dy for t in lin], [t // (dx * dy) for t in lin],
            [dx] * self.n, [dy] * self.n, [dz] * self.n, [t % 32 for t in lin]), strict=True))
        self._vals: dict[tuple[Any, int | None], list[int]] = {}
        self._bits: dict[tuple[Any, bool], Bits | None] = {}
        self._uses: dict[Any, bool] = {}
        self._elects: dict[Any, int] | None = None
        self.lanes: tuple[int, ...] = ()

    def elects(self) -> dict[Any, int]:
        """The value number of each elect.sync predicate (one unguarded definition) and its
        membermask; empty unless every such elect.sync uses one constant mask."""
        if self._elects is None:
            values = self.values
            table: dict[Any, int | None] = {}
            for st in values.body:
                insn = getattr(st, "insn", None)
                elected = inline_elect(insn) if getattr(st, "guard", 1) is None else None
                mask = inline_elected(values, elected[0]) if elected is not None else None
                if elected is not None and mask is not None:
                    table[values.vn(elected[0])] = mask & 0xFFFFFFFF
                if isinstance(insn, Elect) and st.guard is None \
                        and len(values.defs.get(insn.p, ())) == 1:
                    mask = values.const(insn.membermask)
                    table[values.vn(insn.p)] = None if mask is None else mask & 0xFFFFFFFF
            masks = set(table.values())
            only = masks.pop() if len(masks) == 1 else None
            if only is not None:
                self.lanes = tuple(lane for lane in range(32) if only >> lane & 1)
            self._elects = {k: v for k, v in table.items()
                            if v is not None and only is not None}
        return self._elects

    def _elected(self, vn: Any, depth: int = 0) -> bool:
        """Does a value number depend on an elect.sync result? (_Unknown past _DEPTH.)"""
        hit = self._uses.get(vn)
        if hit is None:
            if depth > _DEPTH:
                raise _Unknown(vn)
            hit = vn in self.elects() or (isinstance(vn, tuple) and any(
                self._elected(x, depth + 1) for x in vn[1:] if isinstance(x, tuple)))
            self._uses[vn] = hit
        return hit

    def _eval(self, vn: Any, lane: int | None, depth: int = 0) -> list[int]:
        """vn's value in every thread (`lane`: the elected lane), or _Unknown."""
        key = (vn, lane if self._elected(vn) else None)
        hit = self._vals.get(key)
        if hit is not None:
            return hit
        if not isinstance(vn, tuple) or not vn or depth > _DEPTH:
            raise _Unknown(vn)
        d = depth + 1
        tag, n = vn[0], self.n
        if vn in self.elects():
            out = [int(t % 32 == lane) for t in range(n)]
        elif tag == "const" and isinstance(vn[1], int) and 0 <= vn[1] < _LIMIT:
            out = [vn[1]] * n
        elif tag == "sreg" and vn[1] in self._sregs:
            out = self._sregs[vn[1]]
        elif tag == "cvt":
            out = self._eval(vn[1], lane, d)
        elif tag == "not":   # (a negated predicate: 0 or 1)
            out = [1 - x for x in self._eval(vn[1], lane, d)]
        elif tag == "setp" and len(vn) == 6 and vn[1] in _CMP and (
                vn[4] is None or vn[4] in _BOOL):
            cmp = _CMP[vn[1]]
            out = [int(cmp(x, y)) for x, y in zip(self._eval(vn[2], lane, d),
                                                   self._eval(vn[3], lane, d), strict=True)]
            if vn[4] is not None:
                out = [_BOOL[vn[4]](x, int(bool(y))) for x, y in zip(
                    out, self._eval(vn[5], lane, d), strict=True)]
        elif tag in _ARITH and len(vn) == 3:
            fn = _ARITH[tag]
            out = []
            for x, y in zip(self._eval(vn[1], lane, d), self._eval(vn[2], lane, d),
                            strict=True):
                r = fn(x, y)
                if r is None or not 0 <= r < _LIMIT:
                    raise _Unknown(vn)
                out.append(r)
        else:
            raise _Unknown(vn)
        self._vals[key] = out
        return out

    def bits(self, tok: tuple[Any, bool]) -> Bits | None:
        """The threads in which condition `(vn, polarity)` holds (None: not evaluable)."""
        if tok in self._bits:
            return self._bits[tok]
        vn, pol = tok
        out: Bits | None
        try:
            if self._elected(vn):
                out = tuple(self._mask(self._eval(vn, lane), pol) for lane in self.lanes) \
                    or None
            else:
                out = (self._mask(self._eval(vn, None), pol),)
        except _Unknown:
            out = None
        self._bits[tok] = out
        return out

    def id_bounds(self, mask: int) -> dict[str, tuple[int, int]]:
        """The lowest and highest `%tid.x/y/z` and `%laneid` of the threads in a (non-empty)
        set."""
        threads = [t for t in range(self.n) if mask >> t & 1]
        return {name: (min(self._sregs[name][t] for t in threads),
                       max(self._sregs[name][t] for t in threads))
                for name in ("tid.x", "tid.y", "tid.z", "laneid")}

    @staticmethod
    def _mask(vals: list[int], pol: bool) -> int:
        return int("".join("1" if bool(v) == pol else "0" for v in reversed(vals)) or "0", 2)

    def conj(self, toks: Iterable[tuple[Any, bool]], partial: bool = False) -> Bits | None:
        """The threads satisfying every condition (None: one is not evaluable); `partial`
        skips those instead, which over-approximates the set."""
        out: Bits = (self.all,)
        for tok in toks:
            b = self.bits(tok)
            if b is None:
                if partial:
                    continue
                return None
            out = tuple(x & y for x, y in _pairs(out, b))
        return out


class Divergence:
    """Per-block divergence level and condition tokens, and per-statement queries.
    `dims`: the CTA's exact shape (`.reqntid`), which enables the per-thread `ThreadSets`."""

    def __init__(self, cfg: CFG, values: Values, dims: tuple[int, ...] | None = None):
        self.cfg, self.values = cfg, values
        self.dims = tuple(dims) if dims else None
        self._sets: ThreadSets | None = None
        self._leaves: dict[tuple[int, int, int], bool] = {}
        n = len(cfg.blocks)
        self.level = [0] * n
        self.tokens: list[frozenset] = [frozenset()] * n
        self.union_at: list[frozenset[int]] = [frozenset()] * n
        self.ctrl: list[list[tuple[int, int]]] = [[] for _ in range(n)]
        self._owners: dict[int, frozenset] = {}
        self._pred_of: dict[Any, Any] = {}   # a condition token's value number -> its predicate
        self._idom: list[int | None] | None = None
        self._flags: Any = None
        # Reads of a register written more than once take the level of the writes that
        # reach them (see `Values._read_level`): levels computed before are recomputed.
        values.reaching = cfg.reaching
        for memo in (values._level, values._data_level, values._def_level,
                     values._def_data_level):
            memo.clear()
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
            self._pred_of.setdefault(vn, pred)
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
            # A branch every thread that reaches it takes the same way (a loop counter's
            # `kb > 0` inside a warp-specialized branch: per-thread only through that
            # branch) chooses between paths for all of them: its ways are intersected.
            if stop is not None and stop < n and values.data_level(pred):
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
        values.ctrl_branches = {i: tuple(s for s, _ in self.ctrl[b.id]) for b in cfg.blocks
                                for i in b.stmts if self.ctrl[b.id]}
        values._level.clear()
        values._def_level.clear()
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
        """The conditions (value number, polarity) that decide whether a thread runs statement `i`,
        with its guard's when the guard can differ between threads; empty when every thread that
        reaches the block runs it."""
        toks = self.tokens[self.cfg.block_of(i)]
        guard = self.cfg.body[i].guard
        if guard is not None and self.values.level(guard):
            pred, polarity = guard_polarity(guard)
            vn = self.values.vn(pred)
            self._pred_of.setdefault(vn, pred)
            toks = toks | {(vn, polarity)}
        return toks

    def cond_level(self, vn: Any) -> int | None:
        """How far a condition token's value may differ between the threads that evaluate it,
        through data alone (`Values.data_level`): 0 for `kb * 128 < n` on a loop counter
        even in a warp-specialized branch, 1 for `warp + kb < n`, 2 for `tid + kb * 128 < n`
        or `lane < rem` (per-lane: in a ragged tail some lanes of a warp pass and others do
        not). None for a token that is no branch condition."""
        pred = self._pred_of.get(vn)
        return None if pred is None else self.values.data_level(pred)

    def owner_tokens(self, i: int) -> frozenset:
        """The conditions, fixed for the life of a thread, under which statement i runs
        (normalised; see `normal_token`): what every thread running it satisfies."""
        hit = self._owners.get(i)
        if hit is None:
            hit = self._owners[i] = frozenset(
                normal_token(vn, pol) for vn, pol in self.stmt_tokens(i)
                if vn != "region" and invariant(vn, self.settled))
        return hit

    def settled(self, reg_id: int) -> bool:
        """Does a thread see one value at every read of the register written more than once
        with this id (an opaque value number's)? See `flags.Flags`."""
        if self._flags is None:
            from .flags import Flags
            self._flags = Flags(self)
        return self._flags.stable(reg_id)

    def edge_cond(self, p: int, b: int) -> tuple[Any, bool] | None:
        """The condition `(vn, polarity)` of a divergent branch that holds along the CFG edge
        p -> b (None when the edge says nothing: no branch, both ways to b, a uniform one)."""
        blk = self.cfg.blocks[p]
        if blk.branch is None or blk.taken == blk.fall:
            return None
        pred, polarity = guard_polarity(self.cfg.body[blk.branch].guard)
        if not self.values.level(pred):
            return None
        return self.values.vn(pred), polarity if b == blk.taken else not polarity

    def edge_token(self, p: int, b: int) -> tuple[Any, bool] | None:
        """The thread-invariant condition that holds along the CFG edge p -> b (None when the
        edge says nothing: no branch, both ways to b, or a condition that changes)."""
        cond = self.edge_cond(p, b)
        if cond is None or not invariant(cond[0], self.settled):
            return None
        return normal_token(*cond)

    @property
    def threads(self) -> ThreadSets | None:
        """The per-thread evaluator (None: the CTA shape is not fixed by `.reqntid`)."""
        if self._sets is None and self.dims:
            self._sets = ThreadSets(self.values, self.dims)
        return self._sets

    def leaves(self, i: int, p: int, b: int) -> bool:
        """Can no thread that runs statement i take the CFG edge p -> b? Then what those
        threads own (their bulk async-groups) does not flow along it."""
        key = (i, p, b)
        hit = self._leaves.get(key)
        if hit is None:
            hit = self._leaves[key] = self._leaves_uncached(i, p, b)
        return hit

    def _leaves_uncached(self, i: int, p: int, b: int) -> bool:
        tok = self.edge_token(p, b)
        if tok is not None and (tok[0], not tok[1]) in self.owner_tokens(i):
            return True
        cond, sets = self.edge_cond(p, b), self.threads
        edge = sets.bits(cond) if cond is not None and sets is not None else None
        if sets is None or edge is None:
            return False
        # i's conditions that cannot be evaluated are left out: a superset of its threads.
        owners = sets.conj(self.stmt_tokens(i), partial=True)
        assert owners is not None   # (partial: never None)
        return all(o & e == 0 for o, e in _pairs(owners, edge))

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
        one-thread CTA)? Data one thread writes is then read back by that thread only.
        Conditions that differ are compared per thread (`ThreadSets`): both must be
        evaluable and give one set, not the whole CTA."""
        if self.values.nthreads == 1:
            return True
        ta, tb = self.stmt_tokens(earlier), self.stmt_tokens(later)
        if ta and ta == tb:
            return True
        sets = self.threads
        if sets is None or not ta or not tb:
            return False
        # A condition both share restricts both alike: only its evaluable part matters.
        shared = [x for x in ta & tb if sets.bits(x) is not None]
        a, b = sets.conj([*(ta - tb), *shared]), sets.conj([*(tb - ta), *shared])
        return a is not None and b is not None and all(
            x == y and x != sets.all for x, y in _pairs(a, b))

    def same_threads(self, earlier: int, later: int,
                     skip: Callable[[tuple[Any, bool]], bool] | None = None) -> bool:
        """Does every thread that runs statement `later` also run `earlier`? (approximation:
        the conditions of `earlier` are among those of `later`, or, evaluated per thread,
        hold in every thread satisfying those of `later`). `skip(token)`: conditions of
        `earlier` the caller has accounted for itself."""
        te, tl = self.stmt_tokens(earlier), self.stmt_tokens(later)
        rest = [x for x in te - tl if skip is None or not skip(x)]
        if not rest:
            return True
        sets = self.threads
        need = sets.conj(rest) if sets is not None else None
        if sets is None or need is None:
            return False
        # `later`'s conditions that cannot be evaluated are left out: a superset of its threads.
        have = sets.conj(tl, partial=True)
        assert have is not None   # (partial: never None)
        return all(h & ~n == 0 for h, n in _pairs(have, need))
