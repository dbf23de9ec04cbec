"""The cross-GPU signal protocol (symmetric memory): publish with a `.sys` release, consume
with a `.sys` acquire.

Ranks write into each other's buffers (plain or vector `st`/`red`, TMA stores through peer
maps), then set a flag in the peer's signal pad; the peer spins on its own pad, then reads.
The caller names the parameters (`check_module(mod, peer_buffers=["buffer_ptrs"],
signal_pads=["signal_pad_ptrs"])`), each one pointer or a device array of per-rank pointers:
an address derived from the parameter, or from a pointer loaded out of the array it points
to (`ld.global.u64 p, [ptrs + 8*peer]`), is that buffer's or pad's. Here the accesses become
`XG_*` ops (only for kernels the context names such parameters for, so other kernels pay
nothing), and two rules judge their memory order:

- `peer-publish-no-sys-release`: a peer-buffer write reaches a pad write (a signal) on some
  path, and the signal is not `.release.sys` (nor `.acq_rel.sys`), and no `.sys` fence with
  release semantics lies between them with the signal a strong `.sys` access; a TMA store
  must also have completed (`cp.async.bulk.wait_group 0`) before the signal.
- `peer-consume-no-sys-acquire`: a peer-buffer read follows, on some path, a pad read that is
  not `.acquire.sys` with no `.sys` fence with acquire semantics between them (a weak flag
  load is never enough: only strong accesses synchronize).

`.volatile` is `.relaxed.sys`, and an `atom`/`red` without an order `.relaxed.gpu` (PTX ISA,
memory consistency model). The round rules (reuse, a spin no rank satisfies) are in
`hazards_xgpu_rounds`; `polls` finds the peer-buffer reads that wait for the data itself
(no pad: the data is its own flag), whose rules are in `hazards_xgpu_lamport`.
"""

from __future__ import annotations

import re
from typing import Any

from ..instructions.arith import Binary, Mad, Unary
from ..instructions.base import dests, sources
from ..instructions.compare import Selp, Setp
from ..instructions.memory import Ld
from ..instructions.move import Cvt, Cvta, Mov
from ..instructions.warp import Vote
from ..operands import Addr, Reg
from ..statements import Param
from ..types import ScalarType, Scope, StateSpace
from .analysis import PREPARE, Analysis, handles
from .cfg import guard_polarity
from .findings import Hazard
from .ops import Op, Role
from .state import State
from .values import Kind

XG_ROLES = frozenset({Role.XG_WRITE, Role.XG_READ, Role.XG_PAD_WRITE, Role.XG_PAD_READ,
                      Role.XG_FENCE})
_ATOMIC = {"Red": "red", "Atom": "atom", "AtomCas": "cas"}
_SEMS = ("weak", "relaxed", "acquire", "release", "acq_rel", "volatile", "sc")
_SCOPES = {s.value: s for s in Scope}
_POINTER_TYPES = (ScalarType.u64, ScalarType.b64, ScalarType.s64)
_MEMBAR = {"sys": Scope.sys, "gl": Scope.gpu, "cta": Scope.cta}


def order(kind: str, sem: str | None, scope: Scope | None) -> tuple[str, Scope | None]:
    """What PTX makes of an access's qualifiers: `.volatile` is `.relaxed.sys`, an atomic
    without an order `.relaxed` (at `.gpu` unless it names a scope), ld/st without one weak."""
    if sem == "volatile":
        return "relaxed", Scope.sys
    if sem in (None, "weak"):
        if kind.startswith(("red", "atom", "cas")):
            return "relaxed", scope or Scope.gpu
        return "weak", None
    return sem, scope or (Scope.gpu if kind.startswith(("red", "atom", "cas")) else None)


def releases(op: Op) -> bool:
    """A `.sys` release: the signal itself, or a fence that orders the writes before it."""
    return op.scope is Scope.sys and op.sem in ("release", "acq_rel", "sc")


def acquires(op: Op) -> bool:
    """A `.sys` acquire: the flag load itself, or a fence that orders the reads after it."""
    return op.scope is Scope.sys and op.sem in ("acquire", "acq_rel", "sc")


def strong_sys(op: Op) -> bool:
    """A strong access at .sys scope: one that a .sys fence turns into a release/acquire."""
    return op.scope is Scope.sys and op.sem != "weak"


def shown(op: Op) -> str:
    """The access's order as a user would write it (`.release.gpu`, `weak`)."""
    if op.sem == "weak":
        return "weak (no .sem)"
    return f".{op.sem}" + (f".{op.scope.value}" if op.scope is not None else "")


def is_reset(an: Analysis, op: Op) -> bool:
    """A store of 0 (st, atom.exch, or a cas to 0): a receiver clearing its flag, no signal."""
    return op.field in ("st", "atom.exch", "cas") and an.values.const(op.value) == 0


# -- which parameter an address comes from ------------------------------------------------------
def root_param(an: Analysis, operand: Any, depth: int = 0, loads: bool = True) -> Param | None:
    """The peer-buffer or signal-pad parameter an address is derived from: directly (through
    add, cvta, mov, cvt, mad, selp: whichever operand leads to one), or through a pointer
    loaded (`loads`) from the array it points to. A register stepped in place (`add p, p, 16` in a
    copy loop) keeps the root of its other writes. None for any other address."""
    base = operand.base if isinstance(operand, Addr) else operand
    v = an.val(base)
    # (the address of a by-value tensor map parameter counts as the map's: `tensormap_addr`)
    if isinstance(v.root, Param) and (v.kind is Kind.value or v.kind is Kind.addr and
                                      v.root.kind == "tensormap") and \
            an.ctx.xgpu_kind(v.root, an.kernel) is not None:
        return v.root
    if not isinstance(base, Reg) or depth > 32:
        return None
    memo = an.cache.setdefault("xgpu-roots", {})
    key = (id(base), loads)
    if key not in memo:
        memo[key] = None    # (a cycle through a loop finds nothing)
        found: Param | None = None
        for i in an.values.defs.get(base, ()):
            insn: Any = an.body[i].insn
            if isinstance(insn, Binary) and insn.op in ("add", "sub") and (
                    insn.a is base or insn.b is base):
                continue
            r = _root_of_def(an, insn, depth, loads)
            if r is None or (found is not None and r is not found):
                found = None
                break
            found = r
        memo[key] = found
    return memo[key]


def _root_of_def(an: Analysis, insn: Any, depth: int, loads: bool) -> Param | None:
    def up(x: Any, more: bool = loads) -> Param | None:
        return root_param(an, x, depth + 1, more)
    if isinstance(insn, Ld):
        # one level: the array's element is a pointer (the array itself is no pointer's)
        ok = loads and insn.space in (StateSpace.global_, StateSpace.generic)
        return up(insn.a, False) if ok else None
    if isinstance(insn, Mov | Cvt | Cvta):
        return up(insn.a)
    if isinstance(insn, Binary) and insn.op in ("add", "sub"):
        return up(insn.a) or (up(insn.b) if insn.op == "add" else None)
    if isinstance(insn, Mad):
        return up(insn.c) or up(insn.a) or up(insn.b)
    if isinstance(insn, Selp):
        # one of two addresses (a map picked per owner, this rank's own among them): an
        # access that may be a peer's is judged as one
        return up(insn.a) or up(insn.b)
    return None


def classify(an: Analysis, operand: Any) -> str | None:
    """'pad', 'peer' or None for an address (`Context.xgpu_kind` of its root parameter)."""
    root = root_param(an, operand)
    return an.ctx.xgpu_kind(root, an.kernel) if root is not None else None


# -- data as its own flag ------------------------------------------------------------------------
def polls(an: Analysis) -> dict[int, Op]:
    """The peer-buffer reads that are their own wait (the data-as-flag protocol), by
    statement: a load inside a loop that one of the loop's exits decides by comparing a word
    it loaded with a constant (the sentinel a slot holds until the peer's data lands)."""
    if "xgpu-polls" not in an.cache:
        found = {}
        for ops in an.by_block:
            for op in ops:
                if op.role is Role.XG_READ and op.field != "tma" and _polls(an, op):
                    found[op.index] = op
        an.cache["xgpu-polls"] = found
    return an.cache["xgpu-polls"]


def innermost_loop(an: Analysis, index: int) -> frozenset | None:
    """The blocks of the innermost loop holding statement `index` (None: in no loop)."""
    b = an.cfg.block_of(index)
    bodies = [body for _h, body in an.loops if b in body]
    return min(bodies, key=len) if bodies else None


def with_copies(an: Analysis, regs: Any, body: frozenset) -> set[int]:
    """The ids of `regs` and of their copies and conversions (`mov`, `cvt`) in the loop
    `body`: a value a loop tests through a copy is still that value."""
    names = {id(r) for r in regs}
    for x in sorted(body):
        for i in an.cfg.blocks[x].stmts:
            insn: Any = getattr(an.body[i], "insn", None)
            if isinstance(insn, Mov | Cvt) and id(insn.a) in names:
                names.add(id(insn.d))
    return names


def _polls(an: Analysis, op: Op) -> bool:
    body = innermost_loop(an, op.index)
    if body is None:
        return False
    words = with_copies(an, dests(an.body[op.index].insn), body)
    for x in body:
        blk = an.cfg.blocks[x]
        if blk.branch is not None and (blk.taken in body) != (blk.fall in body):
            pred = guard_polarity(an.body[blk.branch].guard)[0]
            if _decides(an, pred, words, body):
                return True
    return False


def _decides(an: Analysis, pred: Any, words: set[int], body: frozenset) -> bool:
    """Does a predicate come, through setp/and/or/xor/not/selp/vote/mov inside the loop,
    from a comparison of one of the loaded `words` with a constant?"""
    seen: set[int] = set()
    todo = [pred]
    while todo:
        r = todo.pop()
        if not isinstance(r, Reg) or id(r) in seen:
            continue
        seen.add(id(r))
        for i in an.values.defs.get(r, ()):
            if an.cfg.block_of(i) not in body:
                continue
            insn: Any = an.body[i].insn
            if isinstance(insn, Setp):
                a, b = id(insn.a) in words, id(insn.b) in words
                if a != b and an.const(insn.b if a else insn.a) is not None:
                    return True
            if isinstance(insn, Setp | Selp | Vote | Mov) or isinstance(
                    insn, Binary | Unary) and insn.op in ("and", "or", "xor", "not"):
                todo += sources(insn)
    return False


# -- the ops ------------------------------------------------------------------------------------
def _raw_access(insn: Any) -> tuple[str, str | None, Scope | None, Any, Any] | None:
    """(kind, sem, scope, address, value) of a global/generic ld/st/red/atom that the front
    end kept as text (a vector `red`, ...); None for anything else."""
    parts = str(getattr(insn, "op", "")).split(".")
    if parts[0] not in ("ld", "st", "red", "atom") or "async" in parts or any(
            p.startswith(("shared", "local", "param", "const")) for p in parts):
        return None
    srcs = tuple(getattr(insn, "srcs", ()) or ())
    addr = next((o for o in srcs if isinstance(o, Addr)), None)
    if addr is None:
        return None
    sem = next((p for p in parts if p in _SEMS), None)
    scope = next((_SCOPES[p] for p in parts if p in _SCOPES), None)
    kind = parts[0]
    if kind in ("red", "atom"):
        op = next((p for p in parts[1:] if p in ("add", "exch", "cas", "inc", "max", "min",
                                                  "or", "and", "xor", "dec")), "add")
        kind = "cas" if op == "cas" else f"{kind}.{op}"
    rest = srcs[srcs.index(addr) + 1:]
    value = rest[-1] if kind == "cas" and rest else rest[0] if rest else None
    return kind, sem, scope, addr, value


def _ops_of(an: Analysis, insn: Any, i: int) -> list[Op]:
    name = type(insn).__name__
    if name == "Fence":
        return [Op(Role.XG_FENCE, i, sem=insn.sem.value, scope=insn.scope)]
    if name == "Membar":
        return [Op(Role.XG_FENCE, i, sem="sc", scope=_MEMBAR.get(insn.level.value))]
    result = None
    if name in ("Ld", "St") or name in _ATOMIC:
        if insn.space not in (StateSpace.global_, StateSpace.generic):
            return []
        kind = "ld" if name == "Ld" else "st" if name == "St" else _ATOMIC[name]
        if name in ("Red", "Atom"):
            kind = f"{kind}.{insn.op.value}"
        sem = insn.sem.value if insn.sem is not None else None
        scope, addr = insn.scope, insn.a
        value = insn.c if name == "AtomCas" else getattr(insn, "b", None)
        if name == "Ld":
            result = insn.d
            if isinstance(insn.d, Reg) and insn.type in _POINTER_TYPES:
                return []    # a pointer loaded from an array of per-rank pointers
    elif name == "Raw":
        got = _raw_access(insn)
        if got is None:
            return []
        kind, sem, scope, addr, value = got
        if kind == "ld" and re.search(r"\.[bsu]64$", insn.op) and not re.search(
                r"\.v\d", insn.op):
            return []
    else:
        return []
    where = classify(an, addr)
    if where is None:
        return []
    sem, scope = order(kind, sem, scope)
    common = dict(smem=addr, sem=sem, scope=scope, field=kind)
    if where == "peer":
        role = Role.XG_READ if kind == "ld" else Role.XG_WRITE
        return [Op(role, i, **common)]
    if kind == "ld":
        return [Op(Role.XG_PAD_READ, i, result=result, **common)]
    write = Op(Role.XG_PAD_WRITE, i, value=value, **common)
    if kind == "cas" and an.values.const(value) == 0:
        # torch's wait_signal: swap the flag back to 0 once set, a read that also resets
        wait = Op(Role.XG_PAD_READ, i, result=getattr(insn, "d", None), **common)
        return [wait, write]
    return [write]


def prepare(an: Analysis) -> None:
    """The protocol's ops, for a kernel the context names peer buffers or pads for."""
    if not an.ctx.has_xgpu(an.kernel):
        return
    for i, st in enumerate(an.body):
        insn = getattr(st, "insn", None)
        if insn is not None:
            for op in _ops_of(an, insn, i):
                an.add_op(op)
    for op in an.ops:
        if op.role in (Role.TMA_STORE, Role.TMA_LOAD):
            _kind, _key, root = an.classify_map(op.map)
            if root is None:
                # a map register picked per peer in a loop (`mov p, maps` then `mad.wide p,
                # peer, 128, maps`) has no single value: its writes all lead to the array
                root = root_param(an, op.map, loads=False)
            if root is not None and an.ctx.xgpu_kind(root, an.kernel) == "peer":
                role = Role.XG_WRITE if op.role is Role.TMA_STORE else Role.XG_READ
                an.add_op(Op(role, op.index, smem=op.map, field="tma"))


PREPARE.append(prepare)


def _with(state: State, may: frozenset) -> State:
    return state if may == state.may else State(state.must, may, state.tx)


# -- publish ------------------------------------------------------------------------------------
@handles(Role.XG_WRITE)
def peer_write(an: Analysis, state: State, op: Op, report: bool) -> State:
    """A write into a peer buffer: every signal after it is judged (`signal`); a .sys fence
    turns it into one a strong .sys signal may publish."""
    tag = "xg-tma" if op.field == "tma" else "xg-w"
    return _with(state, state.may | {(tag, op.index)})


@handles(Role.WAIT_GROUP)
def tma_done(an: Analysis, state: State, op: Op, report: bool) -> State:
    """`cp.async.bulk.wait_group 0` (not .read) completes the TMA stores into peers."""
    if op.n != 0 or op.read or not any(f[0] == "xg-tma" for f in state.may):
        return state
    return _with(state, frozenset(("xg-w", f[1]) if f[0] == "xg-tma" else f
                                  for f in state.may))


@handles(Role.XG_FENCE)
def sys_fence(an: Analysis, state: State, op: Op, report: bool) -> State:
    """A .sys fence makes the writes before it publishable by a strong .sys signal, and the
    strong .sys flag reads before it acquiring."""
    may = state.may
    if releases(op):
        may = frozenset(("xg-wf", f[1]) if f[0] == "xg-w" else f for f in may)
    if acquires(op):
        may = frozenset(f for f in may if not (f[0] == "xg-r" and f[2]))
    return _with(state, may)


@handles(Role.XG_PAD_WRITE)
def signal(an: Analysis, state: State, op: Op, report: bool) -> State:
    """`peer-publish-no-sys-release`: every signal after a peer write (on some path) is
    judged by its own order."""
    if is_reset(an, op):
        return state
    pending = sorted((f for f in state.may if f[0] in ("xg-w", "xg-wf", "xg-tma")),
                     key=lambda f: f[1])
    if not pending:
        return state
    if report:
        ok = releases(op)
        bad = [f for f in pending if f[0] == "xg-tma" or not ok and (
            f[0] == "xg-w" or not strong_sys(op))]
        if bad:
            tag, at = bad[0]
            if tag == "xg-tma":
                why = ("the TMA store into the peer's buffer may still be in flight: wait "
                       "for it with cp.async.bulk.wait_group 0 (not .read) first")
            elif tag == "xg-wf":
                why = (f"after the .sys fence the signal is {shown(op)}, not a strong .sys "
                       "access the fence could order the writes with")
            elif op.scope is not None and op.scope is not Scope.sys and op.sem in (
                    "release", "acq_rel"):
                why = (f"the signal is {shown(op)}: a release narrower than .sys orders "
                       "nothing for another GPU")
            else:
                why = (f"the signal is {shown(op)} and no fence.acq_rel.sys (or "
                       "fence.sc.sys) lies between the writes and it on that path")
            an.report(Hazard.PEER_PUBLISH_NO_SYS_RELEASE, "this signal tells another GPU "
                      f"that the peer-buffer writes before it are done, but {why}",
                      [("signal", op.index), ("write", at)], dedupe=op.index)
    # The writes stay pending: a later signal (to the next peer) must release them too, as
    # a release orders nothing for a relaxed store after it.
    return state


# -- consume ------------------------------------------------------------------------------------
@handles(Role.XG_PAD_READ)
def flag_read(an: Analysis, state: State, op: Op, report: bool) -> State:
    """A flag read that is not a .sys acquire leaves the reads after it unordered."""
    if acquires(op):
        return _with(state, frozenset(f for f in state.may if f[0] != "xg-r"))
    return _with(state, state.may | {("xg-r", op.index, strong_sys(op))})


@handles(Role.XG_READ)
def peer_read(an: Analysis, state: State, op: Op, report: bool) -> State:
    """`peer-consume-no-sys-acquire`: a peer-buffer read after such a flag read."""
    if not report:
        return state
    for at, strong in an.pending(state, "xg-r"):
        flag = next(o for o in an.by_block[an.cfg.block_of(at)]
                    if o.index == at and o.role is Role.XG_PAD_READ)
        how = shown(flag)
        if strong:
            why = (f"the flag load is {how} and no fence.acq_rel.sys (or fence.sc.sys) "
                   "follows it before this read")
        else:
            why = f"the flag load is {how}, which no fence can make an acquire"
        an.report(Hazard.PEER_CONSUME_NO_SYS_ACQUIRE, "this reads data another GPU "
                  f"published, but {why}", [("read", op.index), ("flag", at)], dedupe=at)
    return state
