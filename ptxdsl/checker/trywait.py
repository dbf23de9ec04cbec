"""try_wait and test_wait: when a wait that may return false still counts as a wait.

A `try_wait` (or `test_wait`) returns false when the phase has not completed yet, so its
result must be looped on (`_spins`), or must guard a blocking wait on the same barrier and
parity before the data is used (`guarded`: CUTLASS's `consumer_try_wait` / `consumer_wait`
with a token), or must decide the exit of a loop that runs until it is true (`wait_edges`:
`done = false; while (!done) done = try_wait(...)`). Used by `hazards_ring` (the waits of
`smem-read-before-wait`, and `try-wait-not-looped`) and `hazards_mbar` (`parity_loops`).

Compilers rarely branch on the wait's own predicate: nvcc turns `cuda::ptx`'s bool into an
integer inside the inline asm (`selp.b32 r, 1, 0, P_OUT`) and tests it outside
(`setp.eq.s32 p, r, 0; @p bra retry`), through `cvt` (also the raw `cvt.s32.s8` of a `.b32`
register that `-G` writes), `not.pred`/`and.pred` and, for a `.func` helper, its return
parameter (every `return` of a helper with several). `branch_tests` follows such a chain
back from the branch to the wait (`_pred_test`, `_int_values`) along the one path that
reaches it (through a helper's returns, along each).
"""

from __future__ import annotations

from typing import Any

from ..instructions.arith import Binary, Unary
from ..instructions.compare import Selp, Setp
from ..instructions.memory import Ld
from ..instructions.move import Cvt, Mov
from ..operands import Addr, NegPred, Reg, Symbol
from ..statements import Param
from ..types import ScalarType, StateSpace
from .analysis import Analysis
from .cfg import guard_polarity
from .ops import Op, Role
from .values import _CMP


def _varies(an: Analysis, operand, body: frozenset) -> bool:
    """Is `operand` (a register, or an address on one) written inside the loop `body`?"""
    reg = operand.base if isinstance(operand, Addr) else operand
    if not isinstance(reg, Reg):
        return False
    return any(an.cfg.block_of(i) in body for i in an.values.defs.get(reg, ()))


def _spins(an: Analysis, op: Op, header: int, body: frozenset) -> bool:
    """Is this loop the wait's own retry loop (left or repeated on the wait's predicate)?"""
    vn = an.values.vn(op.result)
    for b in body:
        blk = an.cfg.blocks[b]
        if blk.branch is None or not (blk.taken == header or blk.taken not in body
                                      or blk.fall not in body):
            continue
        guard = an.cfg.body[blk.branch].guard
        pred = guard.reg if hasattr(guard, "reg") else guard
        pvn = an.values.vn(pred)
        if pred is op.result or pvn == vn or _true_test(pvn, vn):
            return True
        # A branch on a value computed from the result: the edge that leaves the loop (or
        # does not go back) must be taken only once the wait returned true.
        taken, fall = branch_tests(an, blk.branch, op)
        if (taken if blk.taken not in body else fall) is True:
            return True
    return False


def _true_test(pvn: Any, vn: Any) -> bool:
    """Is predicate `pvn` a 0/1 result `vn` tested for true (`ok != 0`, `ok == 1`)?"""
    return isinstance(pvn, tuple) and len(pvn) == 6 and pvn[0] == "setp" and pvn[4] is None \
        and pvn[2] == vn and (pvn[1], pvn[3]) in (("ne", ("const", 0)), ("eq", ("const", 1)))


def _operand_vn(an: Analysis, x: Any) -> Any:
    """A value number for an mbarrier or parity operand (an address: its base's and offset)."""
    if isinstance(x, Addr):
        return ("addr", _operand_vn(an, x.base), x.offset)
    if isinstance(x, Symbol):
        return ("sym", x.name)
    return an.values.vn(x)


def same_phase(an: Analysis, a: Op, b: Op) -> bool:
    """Do two waits name the same barrier and the same parity (the same phase)?"""
    return (_operand_vn(an, a.mbar) == _operand_vn(an, b.mbar)
            and _operand_vn(an, a.parity) == _operand_vn(an, b.parity))


def _false_def(an: Analysis, i: int) -> bool:
    """Does statement i set a predicate to a constant false (`done = false` before a
    `while (!done)` retry loop)?"""
    insn = an.body[i].insn
    if isinstance(insn, Mov):
        return an.const(insn.a) == 0
    if isinstance(insn, Setp) and insn.bool_op is None and insn.q is None:
        a, b = an.const(insn.a), an.const(insn.b)
        return a is not None and b is not None and insn.cmp in _CMP \
            and not _CMP[insn.cmp](a, b)
    return False


def _try_waits(an: Analysis) -> dict[int, Op]:
    """The try_wait/test_wait ops (a wait with a result predicate), by statement."""
    got = an.cache.get("try_waits")
    if got is None:
        got = an.cache["try_waits"] = {o.index: o for o in an.ops
                                       if o.role is Role.MBAR_WAIT and o.result is not None}
    return got


def true_waits(an: Analysis, pred: Any) -> Op | None:
    """The try_wait a predicate being true proves complete: every write of `pred` is a
    try_wait on one barrier and parity, or a constant false. Then `pred` true means the last
    write was a try_wait that returned true (the phase completed)."""
    tws = _try_waits(an)
    if not isinstance(pred, Reg) or not tws:
        return None
    found: list[Op] = []
    for i in an.values.defs.get(pred, ()):
        if i in tws:   # (the one predicate a try_wait writes)
            found.append(tws[i])
        elif not _false_def(an, i):
            return None
    if not found or any(not same_phase(an, found[0], o) for o in found[1:]):
        return None
    return min(found, key=lambda o: o.index)


def wait_edges(an: Analysis) -> dict[tuple[int, int], Op]:
    """CFG edges taken only when a try_wait's predicate is true, with that try_wait: the
    exit of `while (!done) done = try_wait(...)` (the loop runs the try_wait at least once
    when `done` starts false), or the skip of `if (!tok) mbarrier_wait(...)`."""
    got = an.cache.get("wait_edges")
    if got is not None:
        return got
    got = an.cache["wait_edges"] = {}
    if not _try_waits(an):
        return got
    for blk in an.cfg.blocks:
        if blk.branch is None:
            continue
        reg, polarity = guard_polarity(an.body[blk.branch].guard)
        o = true_waits(an, reg)
        edge = blk.taken if polarity else blk.fall
        if o is not None and edge is not None and blk.taken != blk.fall:
            got[(blk.id, edge)] = o
    return got


# Roles that read shared memory a TMA copy may fill (the data a wait protects).
_READERS = (Role.SMEM_READ, Role.WGMMA, Role.TMA_STORE, Role.BULK_STORE)


def guarded(an: Analysis, op: Op) -> bool:
    """Is a try_wait's false result followed, on every path, by a wait on the same barrier
    and parity (a blocking `mbarrier_wait`, or a try_wait retry loop) before anything reads
    shared memory or the kernel exits? CUTLASS's `consumer_try_wait` + `consumer_wait(state,
    token)`: `tok = try_wait(); if (!tok) mbarrier_wait();`, and the rotated retry loop
    `done = try_wait(); while (!done) done = try_wait();`. A path that branches on the
    result is followed only where it is false; one that rewrites it is not guarded."""
    res = op.result
    rdefs = set(an.values.defs.get(res, ()))
    loops = an.loops

    def settles(o: Op) -> bool:   # a wait that completes the phase before going on
        if o.role is not Role.MBAR_WAIT or o is op or not same_phase(an, op, o):
            return False
        return o.result is None or any(
            an.cfg.block_of(o.index) in body and _spins(an, o, header, body)
            for header, body in loops)

    start = an.cfg.block_of(op.index)
    work, seen = [(start, op.index + 1)], set()
    while work:
        b, lo = work.pop()
        blk = an.cfg.blocks[b]
        ops: dict[int, list[Op]] = {}
        for o in an.by_block[b]:
            ops.setdefault(o.index, []).append(o)
        done = False
        for i in blk.stmts:
            if i < lo:
                continue
            here = ops.get(i, ())
            if any(settles(o) for o in here):
                done = True
                break
            if i == op.index or i in rdefs or any(o.role in _READERS for o in here):
                return False   # back at the try_wait, a read, or the result rewritten
        if done:
            continue
        if blk.exits:
            return False
        succs = list(blk.succs)
        if blk.branch is not None:
            reg, polarity = guard_polarity(an.body[blk.branch].guard)
            # The result is true on one edge: the phase completed there.
            if reg is res or an.values.vn(reg) == an.values.vn(res):
                false_edge = blk.fall if polarity else blk.taken
                succs = [] if false_edge is None else [false_edge]
            else:
                taken, fall = branch_tests(an, blk.branch, op)
                succs = [s for s, t in ((blk.taken, taken), (blk.fall, fall))
                         if s is not None and t is not True]
        for s in succs:
            if s not in seen:
                seen.add(s)
                work.append((s, -1))
    return True


# What a predicate being true and being false says of a wait's result: True (it returned
# true), False (it returned false) or None (nothing).
Test = tuple[bool | None, bool | None]
_UNRELATED: Test = (None, None)
_DEPTH = 24     # chains compilers make are a handful of instructions
_WALK = 4000    # statements walked back to find a definition


def branch_tests(an: Analysis, branch: int, op: Op) -> Test:
    """What the taken and the fall-through edge of the guarded `bra` at statement `branch`
    say of the result of the try_wait/test_wait `op` (True: taken only when it returned
    true; False: only when it returned false; None: nothing)."""
    key = ("wait-test", branch, op.index)
    got = an.cache.get(key)
    if got is None:
        reg, polarity = guard_polarity(an.body[branch].guard)
        t, f = _pred_test(an, branch, reg, op, 0)
        got = an.cache[key] = (t, f) if polarity else (f, t)
    return got


def _reachable(an: Analysis) -> frozenset[int]:
    """The blocks reachable from the entry (made once per analysis)."""
    reach = an.cache.get("reachable")
    if reach is None:
        reach = an.cache["reachable"] = frozenset(an.cfg.rpo)
    return reach


def _last_write(an: Analysis, at: int, found) -> int | None:
    """The statement before `at` that `found(i)` accepts (True), walking back through the
    block and the blocks with one reachable predecessor: the straight line from a wait to
    the branch on its result, which an inlined `.func` helper (whose registers are written
    once per call site) and a retry loop's own back edge do not interrupt. None when a join
    comes first, or `found` gives up (None) on a statement."""
    reach = _reachable(an)
    cfg = an.cfg
    b, hi, seen, budget = cfg.block_of(at), at - 1, set(), _WALK
    while budget > 0:
        for i in range(hi, cfg.blocks[b].stmts.start - 1, -1):
            hit = found(i)
            if hit is not False:
                return i if hit else None
        budget -= len(cfg.blocks[b].stmts)
        preds = [p for p in cfg.preds[b] if p in reach]
        if len(preds) != 1 or preds[0] in seen:
            return None
        b = preds[0]
        seen.add(b)
        hi = cfg.blocks[b].stmts.stop - 1
    return None


def _reaching(an: Analysis, at: int, reg: Reg) -> int | None:
    """The write of `reg` that reaches statement `at` (see `_last_write`); a register
    written once is that write (the checker's SSA view, see `values`)."""
    defs = an.values.defs.get(reg, ())
    if len(defs) == 1:
        return defs[0]
    if not defs:
        return None
    wanted = set(defs)
    return _last_write(an, at, lambda i: i in wanted)


def _operand_test(an: Analysis, at: int, x: Any, op: Op, depth: int) -> Test:
    if isinstance(x, NegPred):
        t, f = _operand_test(an, at, x.reg, op, depth)
        return f, t
    return _pred_test(an, at, x, op, depth) if isinstance(x, Reg) else _UNRELATED


def _pred_test(an: Analysis, at: int, reg: Any, op: Op, depth: int) -> Test:
    """What predicate `reg`, read at statement `at`, says of `op`'s result: the wait's own
    predicate, `setp` of an integer that encodes it against a constant, `not`, `and`/`or`
    of such predicates, a `mov`."""
    d = _reaching(an, at, reg) if isinstance(reg, Reg) and depth < _DEPTH else None
    if d is None or an.body[d].guard is not None:
        return _UNRELATED
    if d == op.index:
        return (True, False) if reg is op.result else _UNRELATED
    insn = an.body[d].insn
    if isinstance(insn, Setp):
        if reg is not insn.p and reg is not insn.q:
            return _UNRELATED
        t, f = _compare_test(an, d, insn, op, depth + 1)
        if reg is insn.q:   # `p|q`: q is the comparison's negation (before the bool op)
            t, f = f, t
        if insn.bool_op is None:
            return t, f
        return _combine(insn.bool_op, (t, f), _operand_test(an, d, insn.c, op, depth + 1))
    if isinstance(insn, Unary) and insn.op == "not" and insn.type is ScalarType.pred:
        t, f = _operand_test(an, d, insn.a, op, depth + 1)
        return f, t
    if isinstance(insn, Binary) and insn.type is ScalarType.pred:
        return _combine(insn.op, _operand_test(an, d, insn.a, op, depth + 1),
                        _operand_test(an, d, insn.b, op, depth + 1))
    if isinstance(insn, Mov) and isinstance(insn.a, Reg):
        return _pred_test(an, d, insn.a, op, depth + 1)
    return _UNRELATED


def _combine(bool_op: str, a: Test, b: Test) -> Test:
    """`and`/`or` of two predicates: `a and b` true says what either says when true, false
    only what both say when false (and the converse for `or`)."""
    def either(x: bool | None, y: bool | None) -> bool | None:
        if x is not None and y is not None and x != y:
            return None    # contradictory: the edge is never taken
        return x if x is not None else y

    def both(x: bool | None, y: bool | None) -> bool | None:
        return x if x == y else None

    if bool_op == "and":
        return either(a[0], b[0]), both(a[1], b[1])
    if bool_op == "or":
        return both(a[0], b[0]), either(a[1], b[1])
    return _UNRELATED


def _compare_test(an: Analysis, at: int, insn: Setp, op: Op, depth: int) -> Test:
    """`setp.cmp x, k` (or `k, x`), k a constant and x an integer holding one value when
    the wait returned true and another when it returned false."""
    ka, kb = an.const(insn.a), an.const(insn.b)
    x, k, swap = (insn.a, kb, False) if ka is None else (insn.b, ka, True)
    cmp = _CMP.get(insn.cmp)
    if k is None or cmp is None or not insn.type.is_int and insn.type.kind != "b":
        return _UNRELATED
    vals = _int_values(an, at, x, op, depth)
    if vals is None:
        return _UNRELATED
    k = _as(k, insn.type)
    when_true, when_false = (bool(cmp(k, v) if swap else cmp(v, k))
                             for v in (_as(v, insn.type) for v in vals))
    if when_true == when_false:
        return _UNRELATED   # the same either way: the test says nothing of the wait
    return (True, False) if when_true else (False, True)


def _as(v: int, t: ScalarType) -> int:
    """`v` as a `t` register holds it: truncated to its width, signed for `.s` types."""
    u = v % (1 << t.bits)
    return u - (1 << t.bits) if t.kind == "s" and u >> (t.bits - 1) else u


def _int_values(an: Analysis, at: int, x: Any, op: Op, depth: int) -> tuple[int, int] | None:
    """(value when `op` returned true, value when false) of integer `x` read at `at`:
    `selp r, a, b, p` with constants a != b and p the result (or its negation), carried
    through `mov`, a widening or narrowing `cvt` that keeps both values, and a `.func`'s
    return parameter (`st.param [func_retval0]` ... `ld.param [retval0]`)."""
    d = _reaching(an, at, x) if isinstance(x, Reg) and depth < _DEPTH else None
    if d is None or an.body[d].guard is not None:
        return None
    insn = an.body[d].insn
    if isinstance(insn, Selp):
        a, b = an.const(insn.a), an.const(insn.b)
        t = _pred_test(an, d, insn.c, op, depth + 1)
        if a is None or b is None or a == b or t not in ((True, False), (False, True)):
            return None
        return (a, b) if t[0] else (b, a)
    if isinstance(insn, Mov) and isinstance(insn.a, Reg):
        return _int_values(an, d, insn.a, op, depth + 1)
    cvt = _int_cvt(insn)
    if cvt is not None:
        dtype, atype, a = cvt
        vals = _int_values(an, d, a, op, depth + 1)
        if vals is None:
            return None
        vals = (_as(vals[0], atype), _as(vals[1], atype))
        return vals if all(_as(v, dtype) == v for v in vals) else None
    if isinstance(insn, Ld) and insn.space is StateSpace.param and isinstance(insn.a, Addr):
        stores = _last_writes(an, d, lambda i: _param_store(an, i, insn.a.offset))
        if not stores:
            return None
        # A callee with several returns (nvcc -G: each `return` its own store and `ret`)
        # says something only when every return gives the same pair.
        found = {_int_values(an, st, an.body[st].insn.srcs[1], op, depth + 1)
                 for st in stores}
        return found.pop() if len(found) == 1 else None
    return None


def _int_cvt(insn: Any) -> tuple[ScalarType, ScalarType, Any] | None:
    """(destination type, source type, source) of an integer-to-integer `cvt`: typed, or
    kept raw because its register is wider than the type (nvcc -G's `cvt.s32.s8 %r3, %r2`
    normalising a returned bool, a form the Cvt class does not take)."""
    if isinstance(insn, Cvt):
        return (insn.dtype, insn.atype, insn.a) if insn.atype.is_int and insn.dtype.is_int \
            else None
    op = getattr(insn, "op", None)
    srcs: tuple = getattr(insn, "srcs", ())
    if not isinstance(op, str) or not op.startswith("cvt.") or len(srcs) != 1:
        return None
    parts = op.split(".")
    try:
        dtype, atype = ScalarType(parts[-2]), ScalarType(parts[-1])
    except ValueError:
        return None
    if len(parts) != 3 or not (dtype.is_int and atype.is_int) or not isinstance(srcs[0], Reg):
        return None   # (a rounding or saturating cvt is no plain integer conversion)
    return dtype, atype, srcs[0]


_JOINS = 16   # the blocks entered through joins on the way back to a callee's returns


def _last_writes(an: Analysis, at: int, found) -> list[int] | None:
    """`_last_write` through joins: the statements `found` accepts first on each path back
    from `at` (an inlined callee's returns, whose spliced `ret` branches join at its end).
    None when a path gives up, reaches the entry, or more than `_JOINS` blocks are entered."""
    reach = _reachable(an)
    cfg = an.cfg
    out: list[int] = []
    seen: set[int] = set()
    work, budget = [(cfg.block_of(at), at - 1)], _WALK
    while work:
        b, hi = work.pop()
        hit: bool | None = False
        i = hi
        for i in range(hi, cfg.blocks[b].stmts.start - 1, -1):
            hit = found(i)
            if hit is not False:
                break
        if hit is None:
            return None
        if hit:
            out.append(i)
            continue
        budget -= len(cfg.blocks[b].stmts)
        preds = [p for p in cfg.preds[b] if p in reach]
        if not preds or budget <= 0:
            return None
        for p in preds:
            if p in seen:
                continue
            if len(seen) >= _JOINS:
                return None
            seen.add(p)
            work.append((p, cfg.blocks[p].stmts.stop - 1))
    return out


def _param_store(an: Analysis, i: int, offset: int) -> bool | None:
    """For `_last_write` from a `ld.param [retval0+offset]` after a call: the inlined
    callee's store to its return parameter, `st.param [func_retval0+offset], r` (True), or
    the call itself (None: the callee was not inlined, or stored nothing there)."""
    insn = an.body[i].insn
    op = getattr(insn, "op", None)
    if not isinstance(op, str) or not op.startswith(("st.param", "call")):
        return False
    if op.startswith("call") or an.body[i].guard is not None:
        return None
    srcs: tuple = getattr(insn, "srcs", ())
    # A function's return parameter is a `Param` (a call's own arguments are `.param`
    # variables declared in its scope).
    return len(srcs) == 2 and isinstance(srcs[0], Addr) and isinstance(srcs[0].base, Param) \
        and srcs[0].offset == offset and isinstance(srcs[1], Reg)
