"""Which bytes a staged read sees stored, thread by thread: an epilogue staging through a
ring stage picked at run time (`base = tiles + stage * STAGE`, stage = `(n - 1) % S` or a
phase bit) has addresses whose bounds span every stage, so the stores' bounds and the
read's cannot be compared. Both are `base + f(tid)` on one register `base` that holds the
same value in every thread: `thread_cover` evaluates f for each thread that stores and g
for each that reads, and asks whether the bytes each reader reads were stored by threads
its barrier waits for (those that reach that barrier with the reader's id: `bar.sync 2 +
wg, 128` orders one warpgroup's stores, not the other's).
"""

from __future__ import annotations

from typing import Any

from ..operands import Addr, Reg
from .analysis import Analysis
from .blocks import _chain
from .hazards_arrive import Threads, _Unknown
from .hazards_bulk import _size

_BYTES = 1 << 16     # bytes per reader id beyond which the sets are not built


def thread_cover(an: Analysis, at: int, smem: Any, synced: list[tuple[int, int]]
                 ) -> bool | None:
    """Do the stores `synced` ((store, barrier ordering it) statement pairs) write every
    byte the read at statement `at` (address `smem`) reads, in each thread that runs it,
    by threads that pass the same barrier instance? None where that cannot be evaluated
    (no `.reqntid`, a base that may differ between threads, offsets or conditions not
    computed from thread ids and constants): the caller then compares bounds."""
    op = an.op_at.get(at)
    sets = an.div.threads
    dims = getattr(an.kernel, "reqntid", None)
    if op is None or op.smem is not smem or sets is None or not dims:
        return None
    base = _common_base(an, [smem] + [an.op_at[s].smem for s, _ in synced])
    if base is None:
        return None
    threads = Threads(an, tuple(dims))
    try:
        readers = _members(an, at)
        need = {t: _bytes(an, threads, smem, base, t, _size(an, op)) for t in readers}
        have: dict[int, set[int]] = {}
        for s, b in synced:
            runs = _members(an, s) & _members(an, b)
            bar_id = _bar_id(an, b)
            for t in runs:
                have.setdefault(threads.value(bar_id, t), set()).update(
                    _bytes(an, threads, an.op_at[s].smem, base, t, _size(an, an.op_at[s])))
                if len(have[threads.value(bar_id, t)]) > _BYTES:
                    return None
        ids = {t: threads.value(_bar_id(an, b), t) for _, b in synced for t in readers}
    except _Unknown:
        return None
    return all(need[t] <= have.get(ids[t], set()) for t in readers)


def _common_base(an: Analysis, addrs: list[Any]) -> Reg | None:
    """The first register every address adds to (along its adds' first operands) that
    holds the same value in every thread computing it."""
    chains = [_chain(an, a) for a in addrs]
    rest = [set(c) for c in chains[1:]]
    return next((r for r in chains[0] if all(r in c for c in rest)
                 and an.values.data_level(r) == 0), None)


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


def _bar_id(an: Analysis, b: int) -> Any:
    """The value number of a barrier's id (bar.sync with no id operand: barrier 0)."""
    return an.values.vn(getattr(an.body[b].insn, "id", 0))
