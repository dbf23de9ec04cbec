"""try_wait and test_wait: when a wait that may return false still counts as a wait.

A `try_wait` (or `test_wait`) returns false when the phase has not completed yet, so its
result must be looped on (`_spins`), or must guard a blocking wait on the same barrier and
parity before the data is used (`guarded`: CUTLASS's `consumer_try_wait` / `consumer_wait`
with a token), or must decide the exit of a loop that runs until it is true (`wait_edges`:
`done = false; while (!done) done = try_wait(...)`). Used by `hazards_ring` (the waits of
`smem-read-before-wait`, and `try-wait-not-looped`) and `hazards_mbar` (`parity_loops`).
"""

from __future__ import annotations

from typing import Any

from ..instructions.compare import Setp
from ..instructions.move import Mov
from ..operands import Addr, Reg, Symbol
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
        if blk.branch is None:
            continue
        guard = an.cfg.body[blk.branch].guard
        pred = guard.reg if hasattr(guard, "reg") else guard
        pvn = an.values.vn(pred)
        if pred is op.result or pvn == vn or _true_test(pvn, vn):
            if blk.taken == header or blk.taken not in body or blk.fall not in body:
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
        for s in succs:
            if s not in seen:
                seen.add(s)
                work.append((s, -1))
    return True
