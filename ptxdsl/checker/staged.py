"""Which bytes a staged read sees stored, thread by thread: an epilogue staging through a
ring stage picked at run time (`base = tiles + stage * STAGE`, stage = `(n - 1) % S` or a
phase bit) has addresses whose bounds span every stage, so the stores' bounds and the
read's cannot be compared. Both are `base + f(tid)` on one register `base`, defined once,
before the stores, and the same in every thread: `thread_cover` evaluates f for each thread
that stores and g for each that reads, and asks whether the bytes each reader reads were
stored by itself or by threads its barrier waits for (those that reach that barrier with
the reader's id: `bar.sync 2 + wg, 128` orders one warpgroup's stores, not the other's).
"""

from __future__ import annotations

from typing import Any

from ..operands import Addr, Reg
from .analysis import Analysis
from .blocks import _chain
from .cfg import dominates, dominators
from .hazards_arrive import Threads, _Unknown
from .hazards_bulk import _size

_BYTES = 1 << 16     # bytes a barrier's group may store before the sets are not built


def thread_cover(an: Analysis, at: int, smem: Any, synced: list[tuple[int, int]]
                 ) -> bool | None:
    """Do the stores `synced` ((store, barrier ordering it) statement pairs) write every
    byte the read at statement `at` (address `smem`) reads, in each thread that runs it,
    by that thread or by threads that pass the same barrier instance? None where that
    cannot be evaluated (no `.reqntid`, a base that may differ between threads or between
    the stores and the read, offsets or conditions not computed from thread ids and
    constants): the caller then compares bounds."""
    op = an.op_at.get(at)
    dims = getattr(an.kernel, "reqntid", None)
    if op is None or op.smem is not smem or an.div.threads is None or not dims:
        return None
    base = _common_base(an, [smem] + [an.op_at[s].smem for s, _ in synced],
                        [s for s, _ in synced])
    if base is None:
        return None
    threads = Threads(an, tuple(dims))
    try:
        readers = _members(an, at)
        got: dict[int, set[int]] = {t: set() for t in readers}
        for s, b in synced:
            store = an.op_at[s]
            mine = {t: _bytes(an, threads, store.smem, base, t, _size(an, store))
                    for t in _members(an, s) & _members(an, b)}
            for t, group in _groups(an, threads, b, set(mine)).items():
                if t in got:
                    got[t] |= set().union(*(mine[u] for u in group))
        need = {t: _bytes(an, threads, smem, base, t, _size(an, op)) for t in readers}
    except _Unknown:
        return None
    return all(need[t] <= got[t] for t in readers)


def _groups(an: Analysis, threads: Threads, b: int, runs: set[int]) -> dict[int, set[int]]:
    """For each thread of `runs` (those that store and reach barrier b), the threads of
    `runs` whose stores b orders before its later reads: those reaching b with its id, when
    they are not more than b's count (more: several instances, of threads unknown), else
    the thread alone."""
    insn = an.body[b].insn
    bar = an.values.vn(getattr(insn, "id", 0))
    count = getattr(insn, "count", None)
    limit = None if count is None else an.const(count)
    by_id: dict[int, set[int]] = {}
    for t in runs:
        by_id.setdefault(threads.value(bar, t), set()).add(t)
    if sum(len(g) for g in by_id.values()) * 16 > _BYTES:
        raise _Unknown(b)
    out: dict[int, set[int]] = {}
    for group in by_id.values():
        one = count is not None and (limit is None or len(group) > limit)
        for t in group:
            out[t] = {t} if one else group
    return out


def _common_base(an: Analysis, addrs: list[Any], stores: list[int]) -> Reg | None:
    """The first register every address adds to (along its adds' first operands) that
    holds the same value in every thread computing it, written by one instruction that runs
    before each store (it dominates them): the stores and the read see one value."""
    chains = [_chain(an, a) for a in addrs]
    rest = [set(c) for c in chains[1:]]
    idom = an.cache.get("idom")
    if idom is None:
        idom = an.cache["idom"] = dominators(an.cfg)

    def before(d: int, s: int) -> bool:
        bd, bs = an.cfg.block_of(d), an.cfg.block_of(s)
        return d < s if bd == bs else dominates(idom, bd, bs)

    for r in chains[0]:
        defs = an.values.defs.get(r, ())
        if all(r in c for c in rest) and len(defs) == 1 and \
                all(before(defs[0], s) for s in stores) and an.values.data_level(r) == 0:
            return r
    return None


def _bytes(an: Analysis, threads: Threads, addr: Any, base: Reg, t: int,
           size: int | None) -> set[int]:
    """The bytes (relative to `base`) that thread t touches at `addr`, `size` wide."""
    if size is None:
        raise _Unknown(addr)
    off = addr.offset if isinstance(addr, Addr) else 0
    reg = addr.base if isinstance(addr, Addr) else addr
    while reg is not base:
        insn = an.body[an.values.defs.get(reg)[0]].insn    # an add (`_chain` followed it)
        off += threads.value(an.values.vn(insn.b), t)
        reg = insn.a
    return set(range(off, off + size))


def _members(an: Analysis, i: int) -> set[int]:
    """The threads that run statement i, up to conditions the same in every thread (a
    loop's `kb < n`: all of them run it or none)."""
    sets = an.div.threads
    assert sets is not None     # (thread_cover asked first)
    toks = [tok for tok in an.div.stmt_tokens(i)
            if tok[0] != "region" and an.div.cond_level(tok[0]) != 0]
    bits = sets.conj(toks)
    if bits is None or len(bits) != 1:     # not evaluable, or an elected lane
        raise _Unknown(i)
    return {t for t in range(sets.n) if bits[0] >> t & 1}
