"""Values as they are on one side of a branch: what a dominating `@p bra` edge says.

nvcc keeps a flag's test and the code it guards apart: CUTLASS's epilogue computes a
barrier's address as `smem + 64 + 8 * selp(0, 2, p)` and waits on it only under
`@p bra SKIP` — on that path p is false, so the address is smem + 80. `edge_fact` finds the
nearest branch edge every path to a statement crosses (a block entered from one
predecessor only, which branches on a predicate), and `assuming` evaluates registers with
that predicate fixed: a copy of the kernel's `Values` whose caches start from the fact (and,
for `setp.eq/ne x, k` with x known to be k or one other value, from x's value too).
"""

from __future__ import annotations

import copy
from typing import Any

from ..instructions.compare import Setp
from ..operands import Reg
from .cfg import dominators, guard_polarity
from .values import Kind, Val, Values


def edge_fact(an: Any, i: int) -> tuple[Reg, bool] | None:
    """(predicate, value) that holds wherever statement i runs: the nearest dominating
    block entered only from a branch on a predicate written once (None: none)."""
    cfg = an.cfg
    key = "assume_idom"
    idom = an.cache.get(key)
    if idom is None:
        idom = an.cache[key] = dominators(cfg)
    b: int | None = cfg.block_of(i)
    for _ in range(64):
        if b is None or b < 0 or b >= len(cfg.blocks):
            return None
        preds = cfg.preds[b]
        if len(preds) == 1:
            blk = cfg.blocks[preds[0]]
            if blk.branch is not None and blk.taken != blk.fall:
                pred, polarity = guard_polarity(cfg.body[blk.branch].guard)
                if isinstance(pred, Reg) and len(an.values.defs.get(pred, ())) == 1:
                    return pred, polarity if b == blk.taken else not polarity
        nxt = idom[b] if b < len(idom) else None
        b = None if nxt == b else nxt
    return None


def assuming(an: Any, fact: tuple[Reg, bool]) -> Values:
    """The kernel's values with `fact` (predicate, value) known, cached per fact."""
    key = ("assume", id(fact[0]), fact[1])
    hit = an.cache.get(key)
    if hit is not None:
        return hit
    pred, value = fact
    seeds: dict[Reg, int] = {pred: int(value)}
    insn = an.body[an.values.defs.get(pred)[0]].insn
    if isinstance(insn, Setp) and insn.bool_op is None and insn.cmp in ("eq", "ne") \
            and isinstance(insn.a, Reg):
        k = an.values.const(insn.b)
        span = an.spans.of(insn.a)
        if k is not None and span.root is None and span.ring is None \
                and span.lo is not None and span.hi is not None and span.hi - span.lo == 1 \
                and k in (span.lo, span.hi):
            # x is k or the other value: `x == k` false (or `x != k` true) names the other.
            equal = value if insn.cmp == "eq" else not value
            seeds[insn.a] = k if equal else (span.hi if k == span.lo else span.lo)
    view = copy.copy(an.values)
    # Fresh caches seeded with the fact: everything else is evaluated again on demand.
    view._val = {r: Val(Kind.const, c) for r, c in seeds.items()}
    view._vn = {r: ("const", c) for r, c in seeds.items()}
    view._sym = {}
    view._level = {}
    view._data_level = {}
    view._def_level = {}
    view._def_data_level = {}
    view._busy_preds = set()
    an.cache[key] = view
    return view
