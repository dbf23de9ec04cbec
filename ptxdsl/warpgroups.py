"""Which threads of a CTA run which statements: a per-thread constant propagation over the
kernel's control-flow graph, for the questions that depend on the thread index (which
warpgroup executes which `setmaxnreg`, is a statement uniform across its warpgroup).

For one thread, `%tid`, `%laneid` and (with `.reqntid`) `%ntid` are constants; everything
computed from them and from immediates by integer arithmetic, `setp`, `selp` and integer
`cvt` is too, and so is a whole-warp `shfl.sync.idx` from a constant lane of a value that
lane computes from those alone (Triton's and CUTLASS's broadcast of the warp index), and a
branch whose predicate is known goes one way. Everything else (loads, parameters,
`%warpid`, inline PTX results) is unknown and a branch on it may go both ways.
At a join, a register keeps its value only when every incoming path agrees, so a loop
counter becomes unknown after the first trip: the result is a sound over-approximation of
the statements the thread reaches, and `definite` is a sound under-approximation of those
it reaches on every path that ends the kernel.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import attrs

from .errors import OperandError
from .instructions.arith import Binary, Unary
from .instructions.base import dests, sources
from .instructions.compare import Selp, Setp
from .instructions.control import Bra, Exit, Ret, Trap
from .instructions.move import Cvt, Mov
from .instructions.warp import Shfl, ShflMode
from .operands import Imm, NegPred, Reg, SpecialReg, _show

UNKNOWN = object()
_STEP_LIMIT = 200_000   # block visits per thread before the analysis gives up


@attrs.frozen
class Reach:
    """Of the watched statements (and the other statements that matter to the analysis), what
    one thread reaches: `reached` (may run), `definite` (runs on every path that ends the
    kernel; empty when no path ends it), `complete` (False: the analysis gave up)."""

    reached: frozenset[int]
    definite: frozenset[int]
    complete: bool = True
    # Of the statements asked to be recorded: their guard's truth and source operands'
    # values in this thread (None: unknown), as at the fixed point (a loop counter's unknown).
    seen: dict[int, tuple[Any, ...]] = attrs.field(factory=dict)


class _Block:
    __slots__ = ("start", "end", "succ", "exits")

    def __init__(self, start: int):
        self.start, self.end, self.exits = start, start, False
        self.succ: list[tuple[str, int, Any]] = []   # (kind, block, guard)


class Flow:
    """The CFG of a kernel body (labels start blocks; bra/ret/exit/trap end them) and the
    registers that decide its branches (the backward slice of every branch guard)."""

    def __init__(self, body: list, watch: Iterable[int] = (),
                 record: Mapping[int, tuple] | None = None,
                 definite: Iterable[int] | None = None):
        self.body = body
        self.insns = [getattr(s, "insn", None) for s in body]
        label_at = {s.label.name: i for i, s in enumerate(body) if not hasattr(s, "insn")}
        heads = {0} | set(label_at.values())
        for i, insn in enumerate(self.insns):
            if isinstance(insn, Bra | Ret | Exit | Trap):
                heads.add(i + 1)
        starts = sorted(s for s in heads if s < len(body)) or [0]
        self.blocks = [_Block(s) for s in starts]
        self.block_at: dict[int, int] = {}
        for b, blk in enumerate(self.blocks):
            blk.end = starts[b + 1] if b + 1 < len(starts) else len(body)
            for i in range(blk.start, blk.end):
                self.block_at[i] = b
        for b, blk in enumerate(self.blocks):
            succ: list[tuple[str, int | None, Any]] = []   # (kind, block or None: exit, guard)
            last = self.insns[blk.end - 1] if blk.end > blk.start else None
            guard = body[blk.end - 1].guard if last is not None else None
            nxt = b + 1 if b + 1 < len(self.blocks) else None
            if isinstance(last, Bra):
                succ.append(("taken", self.block_at.get(label_at[last.target.name]),
                                 guard))
                if guard is not None:
                    succ.append(("fall", nxt, guard))
            elif isinstance(last, Ret | Exit | Trap):
                blk.exits = True
                if guard is not None:
                    succ.append(("fall", nxt, guard))
            else:
                succ.append(("fall", nxt, None))
            blk.exits = blk.exits or any(t is None for _, t, _ in succ)
            blk.succ = [(k, t, g) for k, t, g in succ if t is not None]
        self.record = dict(record or {})
        watch = set(watch) | set(self.record)
        # `definite` costs a graph search per block: only for the statements that ask for it
        self.want_definite = watch if definite is None else set(definite)
        self.relevant = self._slice(watch)
        # Per block, only the statements that matter: watched ones, guarded ones (their
        # guard may make a watched one's block reachable or not) and writers of relevant
        # registers. Everything else is skipped without a look.
        self.interesting: list[list[int]] = []
        self.outs: dict[int, list[Reg]] = {}    # per kept statement: its relevant registers
        for blk in self.blocks:
            keep = []
            for i in range(blk.start, blk.end):
                insn = self.insns[i]
                if insn is None or (isinstance(insn, Bra) and i not in self.record):
                    continue
                outs = [r for r in self._dests(insn) if r in self.relevant]
                if i in watch or outs:
                    keep.append(i)
                    self.outs[i] = outs
            self.interesting.append(keep)

    def _slice(self, watch: Iterable[int]) -> set[Reg]:
        """Registers that branch guards (and the watched statements' guards) depend on."""
        want: set[Reg] = set()
        for i, st in enumerate(self.body):
            g = getattr(st, "guard", None)
            if g is not None and (isinstance(self.insns[i], Bra | Ret | Exit | Trap)
                                  or i in watch):
                want.add(g.reg if isinstance(g, NegPred) else g)
            want.update(r for r in self.record.get(i, ()) if isinstance(r, Reg))
        writers: dict[Reg, list[Any]] = {}
        for insn in self.insns:
            if insn is not None:
                for r in dests(insn):
                    writers.setdefault(r, []).append(insn)
        todo = list(want)
        while todo:
            r = todo.pop()
            for insn in writers.get(r, ()):
                for s in sources(insn):
                    if s not in want:
                        want.add(s)
                        todo.append(s)
        self._dests = dests
        self._writers = writers
        return want

    # -- one thread ------------------------------------------------------------------------------
    def run(self, special: dict[str, int], warp: Sequence[dict[str, int]] = ()) -> Reach:
        """Constant propagation for the thread whose special registers are `special`;
        `warp`: the special registers of each lane of its warp (for `shfl.sync.idx`)."""
        self._warp = warp
        n = len(self.blocks)
        if not n or not self.body:
            return Reach(frozenset(), frozenset())
        env_in: list[dict | None] = [None] * n
        env_in[0] = {}
        edges: set[tuple[int, int]] = set()
        reached: set[int] = set()
        maybe: set[int] = set()        # statements whose guard is unknown
        seen: dict[int, tuple[Any, ...]] = {}
        work = [0]
        steps = 0
        while work:
            steps += 1
            if steps > _STEP_LIMIT:
                return Reach(frozenset(reached), frozenset(), False)
            b = work.pop()
            blk = self.blocks[b]
            entry = env_in[b]
            assert entry is not None   # a block is queued once its entry state is known
            env = dict(entry)
            for i in self.interesting[b]:
                insn = self.insns[i]
                g = self.body[i].guard
                gv = True if g is None else _truth(env, g)
                if i in self.record:
                    seen[i] = (gv, *(_val(env, x, special) for x in self.record[i]))
                    if isinstance(insn, Bra):
                        continue   # a branch recorded for its guard: nothing to reach
                if gv is False:
                    continue
                reached.add(i)
                if gv is None:
                    maybe.add(i)
                if self.outs[i]:
                    self._step(env, insn, self.outs[i], special, gv is None)
            for kind, t, g in blk.succ:
                gv = True if g is None else _truth(env, g)
                if kind == "fall" and g is not None and gv is not None:
                    gv = not gv    # the fall-through of a guarded branch/ret runs when it is not
                if gv is False:
                    continue
                edges.add((b, t))
                old = env_in[t]
                new = dict(env) if old is None else _join(old, env)
                if old is None or new != old:
                    env_in[t] = new
                    work.append(t)
        definite = self._definite(edges, (reached - maybe) & self.want_definite)
        return Reach(frozenset(reached), frozenset(definite), seen=seen)

    def _step(self, env: dict, insn: Any, outs: list[Reg], special: dict[str, int],
              maybe: bool) -> None:
        value = None if maybe else self._shfl(insn) if isinstance(insn, Shfl) else \
            _eval(env, insn, special)
        if value is None:          # unknown: absent from the state
            for r in outs:
                env.pop(r, None)
            return
        for r, v in value:
            env[r] = v

    def _shfl(self, insn: Shfl) -> list[tuple[Reg, Any]] | None:
        """`shfl.sync.idx` of the whole warp from a constant lane (Triton's and CUTLASS's
        broadcast of the warp or warpgroup index): the value the source lane computes, when
        it is a function of that lane's special registers and immediates alone."""
        if insn.mode is not ShflMode.idx or len(self._warp) != 32:
            return None
        lane, clamp, mask = (self._pure(x, self._warp[0], 4)
                             for x in (insn.b, insn.c, insn.membermask))
        if lane is None or not 0 <= lane < 32 or clamp != 31 or mask not in (-1, 0xFFFFFFFF):
            return None
        v = self._pure(insn.a, self._warp[lane], 16)
        if v is None:
            return None
        return [(insn.d, v)] + ([(insn.p, True)] if insn.p is not None else [])

    def _pure(self, x: Any, special: dict[str, int], depth: int) -> int | None:
        """x's value in the thread whose special registers are `special`, computed from its
        only definitions back to special registers and immediates (None otherwise)."""
        if not isinstance(x, Reg):
            return _val({}, x, special)
        defs = self._writers.get(x, ())
        if depth <= 0 or len(defs) != 1 or isinstance(defs[0], Shfl):
            return None
        insn = defs[0]
        env: dict[Reg, Any] = {}
        for r in sources(insn):
            v = self._pure(r, special, depth - 1)
            if v is None:
                return None
            env[r] = v
        out = _eval(env, insn, special)
        return next((v for r, v in out if r is x), None) if out else None

    def _definite(self, edges: set[tuple[int, int]], candidates: set[int]) -> set[int]:
        """Statements on every path from the entry to an exit over the executable edges."""
        succ: dict[int, list[int]] = {}
        for a, b in edges:
            succ.setdefault(a, []).append(b)
        exits = {b for b, blk in enumerate(self.blocks) if blk.exits}

        def ends_without(skip: int) -> bool:
            if skip == 0:
                return False
            seen, todo = {0}, [0]
            while todo:
                b = todo.pop()
                if b in exits:
                    return True
                for t in succ.get(b, ()):
                    if t != skip and t not in seen:
                        seen.add(t)
                        todo.append(t)
            return False

        if not ends_without(-1):
            return set()
        out, verdict = set(), {}
        for i in candidates:
            b = self.block_at[i]
            if b not in verdict:
                verdict[b] = not ends_without(b)
            if verdict[b]:
                out.add(i)
        return out


def _truth(env: dict, g: Any) -> bool | None:
    neg = isinstance(g, NegPred)
    v = env.get(g.reg if neg else g, UNKNOWN)
    if v is UNKNOWN:
        return None
    return (not v) if neg else bool(v)


def _join(a: dict, b: dict) -> dict:
    """The values both states know and agree on (a register absent from a state is
    unknown there)."""
    return {r: v for r, v in a.items() if r in b and b[r] == v}


def _val(env: dict, x: Any, special: dict[str, int]) -> int | None:
    if isinstance(x, Imm):
        v = x.value
        return v if isinstance(v, int) and not isinstance(v, bool) else None
    if isinstance(x, int) and not isinstance(x, bool):
        return x
    if isinstance(x, Reg):
        v = env.get(x, UNKNOWN)
        return None if v is UNKNOWN else int(v)
    if isinstance(x, SpecialReg):
        return special.get(x.name)
    if isinstance(x, NegPred):
        v = env.get(x.reg, UNKNOWN)
        return None if v is UNKNOWN else int(not v)
    return None


def _wrap(v: int, t: Any) -> int:
    bits = t.bits
    v &= (1 << bits) - 1
    if t.kind == "s" and v >> (bits - 1):
        v -= 1 << bits
    return v


def _signed(t: Any, v: int) -> int:
    """An integer operand as the type reads it (unsigned types see the bit pattern)."""
    return _wrap(v, t)


_CMP = {"eq": lambda a, b: a == b, "ne": lambda a, b: a != b, "lt": lambda a, b: a < b,
        "le": lambda a, b: a <= b, "gt": lambda a, b: a > b, "ge": lambda a, b: a >= b,
        "lo": lambda a, b: a < b, "ls": lambda a, b: a <= b, "hi": lambda a, b: a > b,
        "hs": lambda a, b: a >= b}
_BIN: dict[str, Callable[[int, int], int]] = {
    "add": lambda a, b: a + b, "sub": lambda a, b: a - b, "and": lambda a, b: a & b,
    "or": lambda a, b: a | b, "xor": lambda a, b: a ^ b, "min": min, "max": max,
    "shl": lambda a, b: a << min(b, 64)}


def _eval(env: dict, insn: Any, special: dict[str, int]) -> list[tuple[Reg, Any]] | None:
    """The registers an instruction sets and their values, when all are known."""
    t = getattr(insn, "type", None)
    if isinstance(insn, Mov):
        v = _val(env, insn.a, special)
        return None if v is None else [(insn.d, v)]
    if isinstance(insn, Cvt):
        if not (insn.dtype.is_int and insn.atype.is_int):
            return None
        v = _val(env, insn.a, special)
        return None if v is None else [(insn.d, _wrap(_wrap(v, insn.atype), insn.dtype))]
    if t is None or not (t.is_int or t.kind == "b" or t.kind == "pred"):
        return None
    if isinstance(insn, Binary):
        a, b = _val(env, insn.a, special), _val(env, insn.b, special)
        if a is None or b is None:
            return None
        a, b = _signed(t, a), _signed(t, b)
        op = insn.op
        if op in _BIN:
            r = _BIN[op](a, b)
        elif op == "mul" and insn.mode in (None, "lo"):
            r = a * b
        elif op in ("div", "rem") and b != 0:
            q = abs(a) // abs(b) * (1 if (a < 0) == (b < 0) else -1)
            r = q if op == "div" else a - q * b
        elif op == "shr":
            r = a >> min(b, 64)
        else:
            return None
        if t.kind == "pred":
            return [(insn.d, bool(r & 1))]
        return [(insn.d, _wrap(r, t))]
    if isinstance(insn, Unary):
        a = _val(env, insn.a, special)
        if a is None:
            return None
        if t.kind == "pred":
            return [(insn.d, not a)] if insn.op == "not" else None
        u = {"not": ~a, "neg": -_signed(t, a), "abs": abs(_signed(t, a))}.get(insn.op)
        return None if u is None else [(insn.d, _wrap(u, t))]
    if isinstance(insn, Setp):
        a, b = _val(env, insn.a, special), _val(env, insn.b, special)
        if a is None or b is None or insn.cmp not in _CMP:
            return None
        r = _CMP[insn.cmp](_signed(t, a), _signed(t, b))
        q = not r
        if insn.bool_op is not None:
            c = _val(env, insn.c, special)
            if c is None:
                return None
            f = {"and": lambda x, y: x and y, "or": lambda x, y: x or y,
                 "xor": lambda x, y: x != y}[insn.bool_op]
            r, q = f(r, bool(c)), f(q, bool(c))
        out = [(insn.p, bool(r))]
        if insn.q is not None:
            out.append((insn.q, bool(q)))
        return out
    if isinstance(insn, Selp):
        c = _val(env, insn.c, special)
        if c is None:
            return None
        v = _val(env, insn.a if c else insn.b, special)
        return None if v is None else [(insn.d, v)]
    return None


def check_kernel_like(what: str, kernel: Any, *fields: str) -> None:
    """`kernel` has the fields `what` reads: a `Kernel`, or a kernel the front end read (this
    layer cannot name either class), else an error naming `what` instead of an AttributeError
    from inside it."""
    if not all(hasattr(kernel, f) for f in ("reqntid", "maxntid", *fields)):
        raise OperandError(what, "kernel", "a kernel (a ptxdsl Kernel or a parsed one)",
                           _show(kernel))


def thread_specials(kernel: Any, linear: int) -> dict[str, int]:
    """The known special registers of the thread with this linear index in the CTA."""
    check_kernel_like("thread_specials", kernel)
    if type(linear) is not int or linear < 0:
        raise OperandError("thread_specials", "linear", "a thread's index in the CTA (an int "
                           ">= 0)", _show(linear))
    dims: tuple[int, ...] = kernel.reqntid or kernel.maxntid or (linear + 1,)
    nx = dims[0]
    ny = dims[1] if len(dims) > 1 else 1
    out = {"tid.x": linear % nx, "tid.y": linear // nx % ny, "tid.z": linear // (nx * ny),
           "laneid": linear % 32}
    if kernel.reqntid:
        for axis, d in zip("xyz", (*kernel.reqntid, 1, 1, 1)[:3], strict=True):
            out[f"ntid.{axis}"] = d
    return out


def cta_threads(kernel: Any) -> int | None:
    """The CTA's thread count from `.reqntid` (or the `.maxntid` bound); None when neither."""
    check_kernel_like("cta_threads", kernel)
    dims = kernel.reqntid or kernel.maxntid
    if not dims:
        return None
    n = 1
    for d in dims:
        n *= d
    return n


def per_thread(kernel: Any, watch: Iterable[int],
               record: Mapping[int, tuple] | None = None,
               definite: Iterable[int] | None = None) -> list[Reach] | None:
    """`Reach` of every thread of the CTA (None when the CTA size is unknown); `record`:
    statement -> operands whose values (and the statement's guard) each thread's
    `Reach.seen` keeps; `definite`: the statements `Reach.definite` is decided for (None:
    every watched one)."""
    check_kernel_like("per_thread", kernel, "body")
    n = cta_threads(kernel)
    if n is None:
        return None
    flow = Flow(kernel.body, watch, record, definite)
    specials = [thread_specials(kernel, i) for i in range(n)]
    return [flow.run(specials[i], specials[i - i % 32:i - i % 32 + 32]) for i in range(n)]
