"""One kernel's analysis: builds the CFG, values and divergence, runs the hazards' transfer
functions to a fixed point, then walks every block once more to report.

Hazard modules register a handler per `Role` (`HANDLERS`): `handler(an, state, op, report)`
returns the state after the op and, when `report` is true, calls `an.report(...)`. The first
run (to the fixed point) never reports; the second starts each block from its final entry
state, so every finding reflects all paths. Facts a rule hands between statements no path
joins (`Analysis.carry`: a named barrier's arrive to its partners' sync) only grow; the
fixed point is solved again until they stop.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable
from typing import Any

from ..operands import Symbol
from ..statements import Param
from ..types import StateSpace
from ..warpgroups import Reach, per_thread
from .cfg import CFG, natural_loops, solve
from .context import Context, MapInfo
from .divergence import Divergence
from .findings import Finding, Hazard, Site
from .maps import MapFacts
from .ops import Op, Role
from .ranges import Spans
from .state import State, join
from .values import Kind, Val, Values

# The statements whose per-thread reach some rule asks for (`Analysis.threads`).
_PER_THREAD = frozenset({Role.SETMAXNREG, Role.WGMMA, Role.WGMMA_FENCE, Role.WGMMA_COMMIT,
                         Role.WGMMA_WAIT, Role.CTA_BARRIER, Role.NAMED_BARRIER})

# Where a finding's site is: a statement index, a declaration (text, SourceLoc), or None (the
# end of the kernel).
SiteAt = int | tuple[str, Any] | None
Handler = Callable[["Analysis", State, Op, bool], State]
HANDLERS: dict[Role, list[Handler]] = {}
EXIT_CHECKS: list[Callable[[Analysis, State, int | None], None]] = []
# Called with the state leaving a block along a loop's back edge (the end of an iteration).
LATCH_CHECKS: list[Callable[[Analysis, State, int | None, frozenset], None]] = []
# Tags of may-facts that belong to the threads that ran their statement (a bulk store's
# async-group is the committing thread's): a branch on a condition those threads cannot
# take drops them on that edge.
OWNED: set[str] = set()
STRUCTURAL: list[Callable[[Analysis], None]] = []
# Must-facts an edge establishes by its branch condition alone, given (edge source, target):
# the exit of a try_wait retry loop is taken only once the wait returned true.
EDGE_FACTS: list[Callable[[Analysis, int, int], frozenset]] = []
# Run once per kernel before the analysis: may add synthetic ops (`Analysis.add_op`).
PREPARE: list[Callable[[Analysis], None]] = []


def handles(*roles: Role):
    """Register a transfer/check function for some roles (hazard modules use it)."""
    def deco(fn: Handler) -> Handler:
        for r in roles:
            HANDLERS.setdefault(r, []).append(fn)
        return fn
    return deco


def _dims(kernel: Any) -> tuple[int, ...] | None:
    return getattr(kernel, "reqntid", None) or getattr(kernel, "maxntid", None) or None


def _threads(kernel: Any) -> int | None:
    """The CTA's thread count when .reqntid/.maxntid bound it (None: unknown)."""
    dims = getattr(kernel, "reqntid", None) or getattr(kernel, "maxntid", None)
    if not dims:
        return None
    n = 1
    for d in dims:
        n *= d
    return n


def _warp_rows(kernel: Any) -> bool:
    """Do warps split the CTA along %tid.x at multiples of 32 (see `Values.warp_rows`)?
    Only .reqntid fixes the shape (.maxntid bounds the product, not each dimension; nvcc
    writes `__launch_bounds__(128)` as `.maxntid 128, 1, 1`). Without it the checker takes
    warps as rows of x, as it does for `tid.x >> 5` (the warp index): `tid.x < 32` is then
    the same threads as `tid.x >> 5 == 0`."""
    dims = tuple(getattr(kernel, "reqntid", None) or ())
    return not dims or dims[0] % 32 == 0 or all(d == 1 for d in dims[1:])


def keys_match(a: Any, b: Any) -> bool:
    """Two memory keys may name the same object: same root, and equal or unknown offsets."""
    if a is None or b is None:
        return False
    return a[0] is b[0] and (a[1] is None or b[1] is None or a[1] == b[1])


class Analysis:
    """The checker's view of one kernel: its CFG, register facts, divergence and ops, the
    findings so far, and the helpers the hazard modules share (keys, map kinds, sites)."""

    def __init__(self, kernel: Any, ops: list[Op], ctx: Context, insns: list | None = None):
        self.kernel = kernel
        self.body = kernel.body
        self.ctx = ctx
        if insns is None:
            insns = [getattr(x, "insn", None) for x in self.body]
        self.values = Values(self.body, _threads(kernel), insns, _warp_rows(kernel),
                             getattr(kernel, "reqntid", None),
                             getattr(kernel, "reqnctapercluster", None))
        self.cfg = CFG(self.body, self.values.guard_value, insns)
        self.cfg.thread_flags(self.values.defs, self.values.const)
        self.cfg.thread_first_trips(self.values.defs, self.values.const)
        self.div = Divergence(self.cfg, self.values, getattr(kernel, "reqntid", None))
        self.ops = ops
        self.op_at: dict[int, Op] = {}
        self.by_block: list[list[Op]] = [[] for _ in self.cfg.blocks]
        for op in ops:
            # Facts name their statement; of the ops one inline-PTX statement holds, the
            # acquire is the one facts can come from (the rest are barriers and fences).
            if op.index not in self.op_at or op.role is Role.TMAP_ACQUIRE:
                self.op_at[op.index] = op
            self.by_block[self.cfg.block_of(op.index)].append(op)
        self.roles = {op.role for op in ops}
        self._findings: dict[tuple, Finding] = {}
        self._keys: dict[tuple[int, str], Any] = {}
        self._map_facts: MapFacts | None = None
        self._maps: dict[int, tuple[Any, Any]] = {}   # id(operand) -> (operand, class.)
        self._infos: dict[int, tuple[Any, Any]] = {}
        self._vals: dict[int, tuple[Any, Val]] = {}
        self.cache: dict[Hashable, Any] = {}   # per-kernel tables the hazard modules build lazily
        # Facts handed between statements no path joins (`carry`), and whether they grew
        # during the current solve.
        self.carried: dict[Hashable, frozenset] = {}
        self._carry_grew = False
        self._spans: Spans | None = None
        self._loops: list[tuple[int, frozenset]] | None = None
        self.back_edges: set[tuple[int, int]] = set()
        self.loop_body: dict[int, frozenset] = {}
        if any(len(b.succs) and min(b.succs) <= b.id for b in self.cfg.blocks):
            self.loops   # noqa: B018  (sets back_edges)
        for prep in PREPARE:
            prep(self)

    def add_op(self, op: Op) -> None:
        """Add a synthetic op (after the statement's own ops); it is no fact's source."""
        ops = self.by_block[self.cfg.block_of(op.index)]
        at = len(ops)
        while at and ops[at - 1].index > op.index:
            at -= 1
        ops.insert(at, op)
        self.roles.add(op.role)

    def add_ring_steps(self, counters: Iterable[Any]) -> None:
        """A RING_STEP op at every write of each counter register (once per write, whichever
        rules ask for it), so the ring rules' facts can count how far the counter moved."""
        for reg in counters:
            for i in self.values.defs.get(reg, ()):
                if not any(o.role is Role.RING_STEP and o.index == i and o.value is reg
                           for o in self.by_block[self.cfg.block_of(i)]):
                    self.add_op(Op(Role.RING_STEP, i, value=reg))

    def carry(self, key: Hashable, facts: frozenset) -> None:
        """Hand `facts` to the statement that reads `carried[key]`, where no path of the CFG
        takes them (a named barrier's arrive on one branch to its partners' sync on
        another): they only grow, and the dataflow is solved again until they stop."""
        old = self.carried.get(key, frozenset())
        if not facts <= old:
            self.carried[key] = old | facts
            self._carry_grew = True

    def threads(self) -> list[Reach] | None:
        """`warpgroups.per_thread` of this kernel, run once for every rule that asks: what
        each thread reaches of the warpgroup-aligned and barrier statements, with each
        barrier's id and count and each branch's guard as the thread sees them
        (`Reach.seen`; `Reach.definite` only for the warpgroup-aligned ones); None when the
        CTA's size is unknown."""
        if "threads" not in self.cache:
            watch = sorted({op.index for op in self.ops if op.role in _PER_THREAD})
            record: dict[int, tuple] = {b.branch: () for b in self.cfg.blocks
                                        if b.branch is not None}
            for i in watch:
                insn: Any = getattr(self.body[i], "insn", None)
                if type(insn).__name__ in ("Barrier", "BarrierRed"):
                    record[i] = (insn.id, insn.count)
            aligned = [op.index for op in self.ops if op.role in _PER_THREAD
                       and op.role not in (Role.CTA_BARRIER, Role.NAMED_BARRIER)]
            self.cache["threads"] = per_thread(self.kernel, watch, record, aligned)
        return self.cache["threads"]

    @property
    def spans(self) -> Spans:
        """Offset bounds of addresses and integers (see `ranges`)."""
        if self._spans is None:
            self._spans = Spans(self.values, _dims(self.kernel), any(
                s.count is not None for s in getattr(self.kernel, "shared", ())))
        return self._spans

    # -- running ------------------------------------------------------------------------------
    def step(self, state: State, op: Op, report: bool) -> State:
        """The state after `op`: each transfer function registered for its role (`@handles`) in
        turn; `report` is False while the fixed point is being solved, True on the final pass
        that reports."""
        for fn in HANDLERS.get(op.role, ()):
            state = fn(self, state, op, report)
        return state

    def _transfer(self, b: int, state: State) -> State:
        for op in self.by_block[b]:
            state = self.step(state, op, False)
        return state

    def run(self) -> list[Finding]:
        """Solve the dataflow to its fixed point, then walk every reachable block once more with
        reporting on, run the latch and exit checks and the whole-kernel checks (`STRUCTURAL`),
        and return the findings."""
        while True:   # again while facts carried across paths grow (finitely many)
            self._carry_grew = False
            ins = solve(self.cfg, State(), self._transfer, join, self.div.union_at,
                        edge=self._edge)
            if not self._carry_grew:
                break
        latches = {b for b, _ in self.back_edges}
        for block in self.cfg.blocks:
            state = ins[block.id]
            if state is None:   # unreachable code
                continue
            for op in self.by_block[block.id]:
                state = self.step(state, op, True)
            if block.id in latches:
                last = block.stmts[-1] if block.stmts else None
                for h in {h for b, h in self.back_edges if b == block.id}:
                    for latch_check in LATCH_CHECKS:
                        latch_check(self, state, last, self.loop_body[h])
            if block.exits:
                at = block.exit_stmt if block.exit_stmt is not None else (
                    block.stmts[-1] if block.stmts else None)
                for exit_check in EXIT_CHECKS:
                    exit_check(self, state, at)
        for structural in STRUCTURAL:
            structural(self)
        return sorted(self._findings.values(), key=lambda f: (
            str(f.loc.file) if f.loc else "", f.loc.line if f.loc else 0, f.id))

    @property
    def loops(self) -> list[tuple[int, frozenset]]:
        """(header, blocks) of each natural loop (computed once)."""
        if self._loops is None:
            self._loops = natural_loops(self.cfg)
            self.back_edges = {(b, h) for h, body in self._loops for b in body
                               if h in self.cfg.succs(b)}
            self.loop_body = dict(self._loops)
        return self._loops

    def touched(self, sites: frozenset, body: frozenset) -> bool:
        """Does one of these statements lie in the loop `body`?"""
        return any(self.cfg.block_of(s) in body for s in sites)

    def _edge(self, p: int, b: int, state: State) -> State:
        """What an edge says: the back edge of a loop ends this thread's contributions to
        the mbarrier phases it announced in the iteration (their accounting is closed; the
        latch checks compared it); and facts owned by threads that cannot take the edge do
        not flow along it (the other threads' path of a second `if tid == 0` carries none of
        thread 0's groups); and what `EDGE_FACTS` derive from the branch condition."""
        for edge_facts in EDGE_FACTS:
            add = edge_facts(self, p, b)
            if add and not add <= state.must:
                state = State(state.must | add, state.may, state.tx)
        if state.tx and (p, b) in self.back_edges:
            body = self.loop_body[b]
            state = State(state.must, state.may, tuple(
                (k, (v[0], v[1], v[2], True) if self.touched(v[2], body) else v)
                for k, v in state.tx))
        if not any(f[0] in OWNED for f in state.may):
            return state
        if self.div.edge_cond(p, b) is None:
            return state
        drop = {f for f in state.may if f[0] in OWNED and self.div.leaves(f[1], p, b)}
        return State(state.must, state.may - drop, state.tx) if drop else state

    def runs_somewhere(self, i: int) -> bool:
        """Does statement i run (in some thread) whenever control reaches it? Not when a
        guard that is the same in every thread may be false: then it may not run at all, and
        what it establishes is not a must-fact."""
        guard = self.body[i].guard
        if guard is None or self.values.guard_value(guard):
            return True
        return self.values.level(guard) > 0

    # -- reporting ------------------------------------------------------------------------------
    def site(self, role: str, i: SiteAt) -> Site:
        """The `Site` for statement `i` in the role `role`: its PTX text and Python line (the end of
        the kernel for None; a declaration's text and location for a tuple)."""
        if i is None:
            return Site(role, "(end of kernel)", None)
        if isinstance(i, tuple):   # (text, SourceLoc): a declaration, not a statement
            return Site(role, i[0], i[1])
        st = self.body[i]
        # A block of parsed PTX may begin with a directive (`.loc`, a scope brace): the site
        # is the first instruction from there.
        while getattr(getattr(st, "insn", None), "MNEMONIC", "") == "directive" and \
                i + 1 < len(self.body):
            i += 1
            st = self.body[i]
        return Site(role, st.render().replace("\n", " "), st.loc)

    def note(self, check: str, message: str, sites: Iterable[tuple[str, SiteAt]] = (),
             dedupe: Any = None, unchecked: bool = False) -> None:
        """Say once per kernel (and `dedupe` key) that `check` was skipped (a note-level
        finding); `unchecked`: the command line shows the message without --notes."""
        self.report(Hazard.CHECK_SKIPPED, f"{check}: {message}", sites,
                    dedupe=check if dedupe is None else (check, dedupe),
                    unchecked=message if unchecked else "")

    def report(self, hazard: Hazard, message: str, sites: Iterable[tuple[str, SiteAt]],
               dedupe: Any = None, unchecked: str = "") -> None:
        """Record a finding of `hazard` with `message` and its sites (role, statement), once per
        hazard and `dedupe` key (by default, the sites' statements)."""
        sites = [(r, i) for r, i in sites if i is not None or r == "exit"]
        key = (hazard, dedupe if dedupe is not None else tuple(i for _, i in sites))
        if key not in self._findings:
            self._findings[key] = Finding(hazard, self.kernel.name, message,
                                          tuple(self.site(r, i) for r, i in sites),
                                          unchecked=unchecked)

    def reported(self, hazard: Hazard, dedupe: Any) -> bool:
        """Has a finding of `hazard` with this `dedupe` key been recorded?"""
        return (hazard, dedupe) in self._findings

    # -- operand facts --------------------------------------------------------------------------
    def val(self, operand: Any) -> Val:
        """The `values.Val` of an operand (its value number, symbol and offset, space), cached per
        operand object."""
        hit = self._vals.get(id(operand))   # operands live as long as the kernel: ids are safe
        if hit is None or hit[0] is not operand:
            hit = self._vals[id(operand)] = (operand, self.values.val(operand))
        return hit[1]

    def key(self, op: Op, what: str) -> Any:
        """The memory key (root, offset) of one of an op's address operands, cached."""
        k = (op.index, what)
        if k not in self._keys:
            self._keys[k] = self.val(getattr(op, what)).key
        return self._keys[k]

    def const(self, operand: Any) -> int | None:
        """The operand's value when the analysis knows it to be one integer, else None."""
        if isinstance(operand, int) and not isinstance(operand, bool):
            return operand
        return self.values.const(operand)

    def describe(self, operand: Any) -> str:
        """A short description of what an address operand points at, for messages."""
        v = self.val(operand)
        if v.kind in (Kind.addr, Kind.value) and v.root is not None:
            off = "" if v.offset == 0 else "+?" if v.offset is None else f"{v.offset:+d}"
            what = "the address of" if v.kind is Kind.addr else "the pointer in"
            kind = "parameter" if isinstance(v.root, Param) else "symbol"
            return f"{what} {kind} {v.root.name}{off}"
        text = operand.render() if hasattr(operand, "render") else repr(operand)
        return f"{text} (origin unknown)"

    def classify_map(self, operand: Any) -> tuple[str | None, Any, Any]:
        """How a tensor-map operand is addressed: (kind, key, root) with kind 'global' (a global
        map, `key` its identity, `root` the parameter), 'param' / 'param_raw' (through .param
        space, with or without cvta.param), 'const', or None when unknown; cached."""
        hit = self._maps.get(id(operand))
        if hit is None or hit[0] is not operand:
            hit = self._maps[id(operand)] = (operand, self._classify_map(operand))
        return hit[1]

    def _classify_map(self, operand: Any) -> tuple[str | None, Any, Any]:
        """(kind, key, root) of a tensor-map address: kind is 'param' (a by-value parameter
        through cvta.param), 'param_raw' (a param-space address: no cvta), 'global' (a map in
        global memory), 'const', or None when the origin is unknown."""
        v = self.val(operand)
        root = v.root
        if v.kind is Kind.addr and isinstance(root, Param) and root.kind == "tensormap":
            if v.space is StateSpace.param:
                return "param_raw", v.key, root
            return "param", v.key, root
        if v.kind is Kind.value and isinstance(root, Param):
            return "global", v.key, root
        if v.kind is Kind.addr and isinstance(root, Symbol):
            if root.space is StateSpace.const:
                return "const", v.key, root
            if root.space is StateSpace.global_:
                return "global", v.key, root
        return None, None, None

    def map_info(self, operand: Any) -> MapInfo | None:
        """Box bytes and swizzle of the map an operand addresses, when known."""
        hit = self._infos.get(id(operand))
        if hit is None or hit[0] is not operand:
            hit = self._infos[id(operand)] = (operand, self._map_info(operand))
        return hit[1]

    def _map_info(self, operand: Any) -> MapInfo | None:
        kind, key, root = self.classify_map(operand)
        if kind is None:
            return None
        info = self.ctx.info(root, self.kernel) if isinstance(root, Param) else None
        if info is None and key is not None:
            if self._map_facts is None:
                self._map_facts = MapFacts(self)
            info = self._map_facts.info(key)
        return info

    def pending(self, state: State, tag: str) -> list[Any]:
        """The statement indices (and extra fields) of the may-facts with this tag. In one
        order whatever the set's (a string's hash changes with PYTHONHASHSEED): a rule that
        stops at its first finding reports the same notes in every run."""
        return sorted((f[1:] for f in state.may if f[0] == tag), key=lambda t: (t[0], repr(t)))

    def def_site(self, operand: Any) -> int | None:
        """The statement that defined a register (its only definition), for messages."""
        defs = self.values.defs.get(getattr(operand, "base", operand), ())
        return defs[0] if len(defs) == 1 else None

    def origin_site(self, operand: Any) -> int | None:
        """The statement an address register's space and root come from (cvta, mov, ld)."""
        return self.values.origin(operand)
