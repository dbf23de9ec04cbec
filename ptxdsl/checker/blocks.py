"""Buffers split into per-thread blocks: each warpgroup's own staging buffers at `smem + cw *
16384`, double-buffered inside by a ring term. The ranges see `cw * 16384` as a bound (0 or
16384), so a write into one warpgroup's second buffer and a store still reading its first
look like they may meet. `apart` splits both addresses at the register they have in common
(`staging`), evaluates that register for every thread of the CTA, and uses the ring
argument only inside one block.
"""

from __future__ import annotations

from typing import Any

from ..instructions.arith import Binary
from ..operands import Addr, Reg
from .analysis import Analysis
from .ops import Op
from .values import Kind

_CHAIN = 16     # how many adds back an address is followed to its block base


def _chain(an: Analysis, reg: Any) -> list[Reg]:
    """The registers an address is the sum of, along the first operands of its adds."""
    out: list[Reg] = []
    if isinstance(reg, Addr):
        reg = reg.base
    while isinstance(reg, Reg) and len(out) < _CHAIN:
        out.append(reg)
        defs = an.values.defs.get(reg, ())
        insn = an.body[defs[0]].insn if len(defs) == 1 else None
        if not (isinstance(insn, Binary) and insn.op == "add"):
            break
        reg = insn.a
    return out


def _block_bases(an: Analysis, base: Reg) -> set[int] | None:
    """The offsets `base` holds in the CTA's threads, when it is `symbol (+ constant) + x`
    with x computed from the thread's ids and constants only (None otherwise)."""
    # (imported here: hazards_arrive imports hazards_bulk, which imports this module)
    from .hazards_arrive import Threads, _Unknown
    key = ("block_bases", id(base))
    if key in an.cache:
        return an.cache[key]
    out: set[int] | None = None
    defs = an.values.defs.get(base, ())
    insn = an.body[defs[0]].insn if len(defs) == 1 else None
    dims = getattr(an.kernel, "reqntid", None)
    if isinstance(insn, Binary) and insn.op == "add" and dims:
        sym = an.val(insn.a)
        if sym.kind is Kind.addr and sym.offset is not None:
            threads = Threads(an, tuple(dims))
            vn = an.values.vn(insn.b)
            try:
                out = {sym.offset + threads.value(vn, t) for t in range(threads.n)}
            except _Unknown:
                out = None
    an.cache[key] = out
    return out


def apart(an: Analysis, a: Op, b: Op, range_a: tuple | None, range_b: tuple | None,
          moved: int | None) -> bool:
    """Positive evidence that two bulk-rule ranges (`hazards_bulk._range`) of ops a and b
    share no byte although their bounds meet: both addresses are one base register (a
    per-thread block: `symbol + f(tid)`) plus the rest; the rests of both fit between two
    neighbouring values the base takes, so threads with different bases touch different
    blocks; and with one base, the rests are different stages of one ring (as
    `hazards_bulk._overlap` decides for whole addresses) that each fit in a stage."""
    if range_a is None or range_b is None:
        return False
    ring_a, ring_b = range_a[3], range_b[3]
    if ring_a is None or ring_b is None or ring_a[0] is not ring_b[0] \
            or ring_a[1:3] != ring_b[1:3] or moved is None \
            or not (moved + ring_a[3] - ring_b[3]) % ring_a[1]:
        return False
    theirs = set(_chain(an, b.smem))
    # the first register both addresses add to that is a block base (below the ring term)
    base = next((r for r in _chain(an, a.smem) if r in theirs and an.spans.of(r).ring is None
                 and _block_bases(an, r)), None)
    if base is None:
        return False
    offsets = _block_bases(an, base)
    span = an.spans.of(base)
    if not offsets or span.lo is None or span.hi is None:
        return False
    rests = []
    for _, lo, end, _ring in (range_a, range_b):
        if lo is None or end is None:
            return False
        rests.append((lo - span.lo, end - span.hi))
    n, stride = ring_a[1], ring_a[2]
    lo = min(r[0] for r in rests)
    if max(r[1] for r in rests) - lo > stride:
        return False     # a rest reaches past one stage: the ring argument does not hold
    values = sorted(offsets)
    gap = min((y - x for x, y in zip(values, values[1:], strict=False)), default=None)
    ring_lo = lo + min(0, stride * (n - 1))
    ring_hi = max(r[1] for r in rests) + max(0, stride * (n - 1))
    return gap is None or ring_hi - ring_lo <= gap
