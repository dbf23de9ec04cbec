"""The control-flow graph of one kernel body and a forward dataflow solver over it.

Blocks split at labels and after `bra`/`ret`/`exit`/`trap`. A guarded `@p bra L` has two
successors (L and the fallthrough), a guarded `@p ret`/`@p exit` leaves to EXIT or falls
through, the end of the body falls into EXIT (an implicit `ret`). Post-dominators (Cooper,
Harvey and Kennedy's iterative algorithm on the reversed graph) give each branch its
reconvergence point, which bounds the region a divergent branch controls.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Container, Sequence
from typing import Any, cast

import attrs

from ..instructions.compare import Setp
from ..instructions.control import Bra, Exit, Ret, Trap
from ..instructions.move import Mov
from ..operands import NegPred
from ..statements import LabelDef, Statement


@attrs.frozen
class Block:
    """A basic block: `stmts` are indices into the kernel's body (labels excluded).

    `branch` is the index of a guarded `bra` ending the block (None otherwise); `taken` and
    `fall` are its two successors. `exits` says whether control may leave the kernel here,
    with `exit_stmt` the `ret`/`exit` responsible (None: the body's end).
    """

    id: int
    stmts: range
    succs: tuple[int, ...]
    branch: int | None = None
    taken: int | None = None
    fall: int | None = None
    exits: bool = False
    exit_stmt: int | None = None


class CFG:
    """Blocks, predecessors, a reverse postorder, and immediate post-dominators.

    `insns[i]` is body[i]'s instruction (None for a label); callers that already have that
    list pass it, since one pass over a 100k-statement body is most of the cost.
    """

    def __init__(self, body: Sequence[Statement | LabelDef],
                 guard_value: Callable[[Any], bool | None] = lambda g: None,
                 insns: Sequence[Any] | None = None):
        # Read as statements: a block's indices (stmts, branch, exit_stmt) never name a label.
        self.body = cast(Sequence[Statement], body)
        if insns is None:
            insns = [getattr(x, "insn", None) for x in body]
        self.blocks: list[Block] = _build(body, insns, guard_value)
        self.exit = len(self.blocks)  # the virtual EXIT node
        self.preds: list[list[int]] = [[] for _ in range(len(self.blocks) + 1)]
        for b in self.blocks:
            for s in b.succs:
                self.preds[s].append(b.id)
        self.rpo: list[int] = _rpo(0, lambda n: self.succs(n), len(self.blocks) + 1) \
            if self.blocks else []
        self._starts = [b.stmts.start if b.stmts else len(body) for b in self.blocks]
        self._ipdom: list[int | None] | None = None

    def block_of(self, i: int) -> int:
        """The block holding statement i (labels belong to none)."""
        return bisect.bisect_right(self._starts, i) - 1

    def succs(self, n: int) -> tuple[int, ...]:
        """The successors of block `n` (none for the exit block)."""
        return self.blocks[n].succs if n < len(self.blocks) else ()

    @property
    def ipdom(self) -> list[int | None]:
        """Immediate post-dominator of each block (EXIT's id for the last ones; None where no
        path reaches EXIT, e.g. inside an endless loop)."""
        if self._ipdom is None:
            self._ipdom = _post_dominators(self)
        return self._ipdom

    def reachable(self, starts: Sequence[int], stop: int | None) -> set[int]:
        """Blocks reachable from `starts` without entering `stop` (EXIT is never included)."""
        seen: set[int] = set()
        todo = [s for s in starts if s != stop and s != self.exit]
        while todo:
            n = todo.pop()
            if n in seen:
                continue
            seen.add(n)
            todo.extend(s for s in self.succs(n) if s != stop and s != self.exit
                        and s not in seen)
        return seen


    def reaching(self, defs: Sequence[int], at: int) -> frozenset[int]:
        """Which of a register's writes `defs` (statement indices) may reach statement `at`:
        searching back from `at`, an unguarded write ends a path; a guarded one may not run,
        so the search goes on past it."""
        by_block: dict[int, list[int]] = {}
        for d in sorted(defs, reverse=True):
            by_block.setdefault(self.block_of(d), []).append(d)
        found: set[int] = set()
        seen: set[int] = set()
        todo: list[tuple[int, int]] = [(self.block_of(at), at)]
        while todo:
            b, limit = todo.pop()
            for d in by_block.get(b, ()):
                if d < limit:
                    found.add(d)
                    if self.body[d].guard is None:
                        break
            else:
                for p in self.preds[b]:
                    if p not in seen:
                        seen.add(p)
                        todo.append((p, len(self.body)))
        return frozenset(found)

    def thread_flags(self, defs: Any, const: Callable[[Any], int | None]) -> None:
        """Jump threading for flag predicates. A block holding only `@f bra T`, on a
        predicate every write of which is an unguarded `mov` of a constant, is passed
        through by each predecessor that set f on its way in: that edge goes straight to the
        successor f picks. nvcc keeps CUTLASS's "did any tile run" this way (`mov.pred f, -1`
        before the persistent loop, `mov.pred f, 0` in its latch, `@f bra` past the
        epilogue's final `cp.async.bulk.wait_group`): the path from the latch never skips
        that wait, and the path that skips it ran no tile."""
        exit_id = self.exit
        changed = False
        for blk in self.blocks:
            if blk.branch is None or blk.taken == blk.fall or any(
                    getattr(self.body[i].insn, "MNEMONIC", None) != "directive"
                    for i in blk.stmts if i != blk.branch):
                continue   # (a parsed `.loc` or declaration runs nothing)
            pred, polarity = guard_polarity(self.body[blk.branch].guard)
            writes = defs.get(pred, ())
            values: dict[int, int] = {}
            for i in writes:
                st = self.body[i]
                c = _moved_constant(st.insn, const) if st.guard is None else None
                if c is None:
                    break
                values[i] = c
            else:
                for p in list(self.preds[blk.id]):
                    last = self._last_of(p, values)
                    v = None if last is None else values[last]
                    if v is not None and p != blk.id:
                        s = blk.taken if bool(v) == polarity else blk.fall
                        assert s is not None   # (a branch block has both)
                        self._redirect(p, blk.id, s, exit_id)
                        changed = True
        if changed:
            self._refresh()

    def thread_first_trips(self, defs: Any, const: Callable[[Any], int | None]) -> None:
        """Jump threading for a counted loop's first test. A block holding only `setp p,
        i, C` and `@p bra T` (a loop head tested before the first trip, `for (i = 0; i < 4;
        ++i)` as written by hand), entered from a predecessor whose last write of i is an
        unguarded `mov` of a constant: that edge goes straight to the successor the test
        picks for that constant. Otherwise the path on which a loop of constant bounds runs
        no trip (never taken) skips what the loop does: an array of mbarriers initialised
        in it looks uninitialised after it."""
        changed = False
        for blk in self.blocks:
            if blk.branch is None or blk.taken == blk.fall:
                continue
            run = [i for i in blk.stmts if i != blk.branch
                   and getattr(self.body[i].insn, "MNEMONIC", None) != "directive"]
            test = self.body[run[0]] if len(run) == 1 else None
            insn = getattr(test, "insn", None)
            pred, polarity = guard_polarity(self.body[blk.branch].guard)
            if test is None or test.guard is not None or not isinstance(insn, Setp) \
                    or insn.p is not pred or insn.q is not None or insn.bool_op is not None \
                    or insn.cmp not in _COMPARE or len(defs.get(pred, ())) != 1:
                continue
            bound = const(insn.b)
            writes = set(defs.get(insn.a, ()))
            if bound is None or not 0 <= bound < 1 << 31 or not writes:
                continue
            for p in list(self.preds[blk.id]):
                last = self._last_of(p, writes) if p != blk.id else None
                st = None if last is None else self.body[last]
                v = None if st is None or st.guard is not None else \
                    _moved_constant(st.insn, const)
                if v is None or not 0 <= v < 1 << 31:
                    continue
                s = blk.taken if _COMPARE[insn.cmp](v, bound) == polarity else blk.fall
                assert s is not None   # (a branch block has both)
                self._redirect(p, blk.id, s, self.exit)
                changed = True
        if changed:
            self._refresh()

    def _refresh(self) -> None:
        """Predecessors and block order again, after edges were redirected."""
        self.preds = [[] for _ in range(len(self.blocks) + 1)]
        for b in self.blocks:
            for s in b.succs:
                self.preds[s].append(b.id)
        self.rpo = _rpo(0, lambda n: self.succs(n), len(self.blocks) + 1)
        self._ipdom = None

    def _last_of(self, p: int, writes: Container[int]) -> int | None:
        """The last statement of `writes` before the end of block p, found in p or up a
        chain of single predecessors (None: not found, or a join first)."""
        for _ in range(16):
            for i in reversed(self.blocks[p].stmts):
                if i in writes:
                    return i
            if len(self.preds[p]) != 1:
                return None
            p = self.preds[p][0]
        return None

    def _redirect(self, p: int, old: int, new: int, exit_id: int) -> None:
        blk = self.blocks[p]
        taken = new if blk.taken == old else blk.taken
        fall = new if blk.fall == old else blk.fall
        succs = tuple(dict.fromkeys(new if s == old else s for s in blk.succs))
        if blk.branch is not None and taken == fall:
            blk = attrs.evolve(blk, succs=succs, branch=None, taken=None, fall=None)
        else:
            blk = attrs.evolve(blk, succs=succs, taken=taken, fall=fall)
        self.blocks[p] = attrs.evolve(blk, exits=blk.exits or exit_id in succs)


_COMPARE: dict[str, Callable[[int, int], bool]] = {
    "lt": lambda a, b: a < b, "le": lambda a, b: a <= b, "gt": lambda a, b: a > b,
    "ge": lambda a, b: a >= b, "eq": lambda a, b: a == b, "ne": lambda a, b: a != b,
    "lo": lambda a, b: a < b, "ls": lambda a, b: a <= b, "hi": lambda a, b: a > b,
    "hs": lambda a, b: a >= b}


def _moved_constant(insn: Any, const: Callable[[Any], int | None]) -> int | None:
    """The constant a `mov` writes (None: not a mov of a constant). The parser keeps
    `mov.pred p, -1` as raw text (ptxdsl's Mov takes no immediate predicate): its one
    source is the number."""
    if isinstance(insn, Mov):
        return const(insn.a)
    srcs: Sequence[Any] = getattr(insn, "srcs", ())
    if getattr(insn, "MNEMONIC", None) == "raw" and str(getattr(insn, "op", "")).startswith(
            "mov.") and len(srcs) == 1 and isinstance(srcs[0], int):
        return int(srcs[0])
    return None


_ENDERS = (Bra, Ret, Exit, Trap)


def _groups(body: Sequence[Any], insns: Sequence[Any]) -> tuple[list[range], dict[str, int]]:
    """Statement ranges of the blocks, and the block each label starts. Labels only begin
    blocks, so a block is a contiguous range of statements."""
    marks = [i for i, insn in enumerate(insns) if insn is None or type(insn) in _ENDERS]
    groups: list[range] = []
    label_block: dict[str, int] = {}
    start = 0
    for i in marks:
        if insns[i] is None:            # a label: close the block before it
            if i > start:
                groups.append(range(start, i))
            label_block[body[i].label.name] = len(groups)
        else:                           # bra/ret/exit/trap: the block ends with it
            groups.append(range(start, i + 1))
        start = i + 1
    if start < len(body) or not groups or len(groups) in label_block.values():
        groups.append(range(start, len(body)))
    return groups, label_block


def _build(body: Sequence[Statement | LabelDef], insns: Sequence[Any],
           guard_value: Callable[[Any], bool | None]) -> list[Block]:
    """Blocks with their successors; a branch or exit whose guard is a known constant keeps
    only the edge it can take."""
    groups, label_block = _groups(body, insns)
    n = len(groups)
    exit_id = n
    blocks: list[Block] = []
    for bid, stmts in enumerate(groups):
        nxt = bid + 1 if bid + 1 < n else exit_id
        last = cast(Statement, body[stmts[-1]]) if stmts else None   # blocks hold no labels
        insn = last.insn if last is not None else None
        guard = last.guard if last is not None else None
        known = guard_value(guard) if isinstance(insn, _ENDERS) else None
        succs: tuple[int, ...]
        if isinstance(insn, _ENDERS) and known is False:
            blocks.append(Block(bid, stmts, (nxt,), exits=nxt == exit_id))
        elif isinstance(insn, Bra):
            target = label_block.get(insn.target.name, exit_id)
            if guard is None or known:
                blocks.append(Block(bid, stmts, (target,), exits=target == exit_id))
            else:
                succs = (target,) if target == nxt else (target, nxt)
                blocks.append(Block(bid, stmts, succs, stmts[-1], target, nxt,
                                    exits=exit_id in succs))
        elif isinstance(insn, Ret | Exit):
            succs = (exit_id,) if guard is None or known else (nxt, exit_id)
            blocks.append(Block(bid, stmts, tuple(dict.fromkeys(succs)), exits=True,
                                exit_stmt=stmts[-1]))
        elif isinstance(insn, Trap):
            # A trap aborts the kernel: no successor (and no exit with pending work).
            succs = () if guard is None or known else (nxt,)
            blocks.append(Block(bid, stmts, succs, exits=nxt == exit_id and bool(succs)))
        else:
            blocks.append(Block(bid, stmts, (nxt,), exits=nxt == exit_id))
    return blocks


def _rpo(entry: int, succs: Callable[[int], Sequence[int]], size: int) -> list[int]:
    """Reverse postorder from `entry` (iterative DFS: kernels may have thousands of blocks)."""
    seen = [False] * size
    order: list[int] = []
    stack: list[tuple[int, int]] = [(entry, 0)]
    seen[entry] = True
    while stack:
        node, i = stack[-1]
        nexts = succs(node)
        if i < len(nexts):
            stack[-1] = (node, i + 1)
            s = nexts[i]
            if not seen[s]:
                seen[s] = True
                stack.append((s, 0))
        else:
            stack.pop()
            order.append(node)
    order.reverse()
    return order


def _immediate_dominators(order: list[int], preds: Callable[[int], Sequence[int]],
                          size: int) -> list[int | None]:
    """Cooper-Harvey-Kennedy: `order` is a reverse post-order starting at the root, `preds`
    the predecessors in the graph being dominated (the reversed CFG for post-dominators)."""
    index = {n: i for i, n in enumerate(order)}
    idom: list[int | None] = [None] * size
    if not order:
        return idom
    idom[order[0]] = order[0]

    def intersect(a: int, b: int) -> int:
        # Both walks climb through processed nodes, whose idom is set.
        while a != b:
            while index[a] > index[b]:
                a = cast(int, idom[a])
            while index[b] > index[a]:
                b = cast(int, idom[b])
        return a

    changed = True
    while changed:
        changed = False
        for n in order[1:]:
            # A node with an idom is in `order`, so only processed predecessors count.
            done = [p for p in preds(n) if idom[p] is not None]
            if not done:
                continue
            new = done[0]
            for p in done[1:]:
                new = intersect(p, new)
            if idom[n] != new:
                idom[n] = new
                changed = True
    return idom


def _post_dominators(cfg: CFG) -> list[int | None]:
    """Immediate post-dominators: dominators of the reversed CFG, rooted at EXIT."""
    size = len(cfg.blocks) + 1
    order = _rpo(cfg.exit, lambda n: cfg.preds[n], size)  # RPO of the reversed graph
    return _immediate_dominators(order, cfg.succs, size)[:-1]


def guard_polarity(guard: Any) -> tuple[Any, bool]:
    """(predicate register, value it must have for the guarded instruction to run)."""
    if isinstance(guard, NegPred):
        return guard.reg, False
    return guard, True


def solve(cfg: CFG, entry: Any, transfer: Callable[[int, Any], Any],
          join: Callable[[list[Any], list[bool]], Any],
          union_at: Sequence[frozenset[int]] = (), max_rounds: int = 64,
          edge: Callable[[int, int, Any], Any] | None = None) -> list[Any]:
    """Forward dataflow to a fixed point; returns the state at the entry of each block.

    `join(states, united)` merges the states of the visited predecessors; `united[i]` says
    that state i comes from a divergent branch reconverging here (`union_at[block]` holds
    those predecessors): every such path was taken by some thread.
    Unvisited predecessors are left out (the optimistic start of a must-analysis); a block
    whose entry never becomes known (unreachable code) keeps None. `edge(p, b, state)`, when
    given, refines the state flowing along the edge p -> b (what the branch condition says).
    """
    n = len(cfg.blocks)
    ins: list[Any] = [None] * n
    outs: list[Any] = [None] * n
    if not n:
        return ins
    order = [b for b in cfg.rpo if b < n]
    for _ in range(max_rounds):
        changed = False
        for b in order:
            group = union_at[b] if union_at else frozenset()
            preds = [p for p in cfg.preds[b] if outs[p] is not None]
            got = [outs[p] for p in preds] if edge is None else [
                edge(p, b, outs[p]) for p in preds]
            flags = [p in group for p in preds]
            if b == 0:
                got, flags = [entry] + got, [False] + flags
            if not got:
                continue
            state = got[0] if len(got) == 1 else join(got, flags)
            if state != ins[b] or outs[b] is None:
                ins[b] = state
                out = transfer(b, state)
                if out != outs[b]:
                    outs[b] = out
                    changed = True
        if not changed:
            break
    return ins


def dominators(cfg: CFG) -> list[int | None]:
    """Immediate dominators of the blocks reachable from entry."""
    n = len(cfg.blocks)
    return _immediate_dominators([b for b in cfg.rpo if b < n], lambda b: cfg.preds[b], n)


def dominates(idom: list[int | None], h: int, b: int | None) -> bool:
    """Does block h dominate block b (`idom` from `dominators`; the entry is its own)?"""
    while b is not None:
        if b == h:
            return True
        nxt = idom[b]
        b = None if nxt == b else nxt
    return False


def natural_loops(cfg: CFG) -> list[tuple[int, frozenset[int]]]:
    """(header, blocks) of each natural loop; loops sharing a header are merged."""
    idom = dominators(cfg)
    rank = {b: i for i, b in enumerate(cfg.rpo)}
    bodies: dict[int, set[int]] = {}
    for b in cfg.blocks:
        if idom[b.id] is None:
            continue
        for s in b.succs:
            # Only an edge to a block no later in reverse postorder can close a loop; the
            # dominance walk (long in straight-line code) is done for those alone.
            if s < len(cfg.blocks) and rank.get(s, -1) <= rank[b.id] and dominates(idom, s, b.id):
                body = bodies.setdefault(s, {s})
                todo = [b.id]
                while todo:
                    x = todo.pop()
                    if x not in body:
                        body.add(x)
                        todo.extend(cfg.preds[x])
    return [(h, frozenset(body)) for h, body in bodies.items()]
