"""`tma-dst-overlap`: two copies completing on one barrier phase that write the same shared
bytes: one load issued by several threads into one address (`_same_in_threads`), or two
loads into overlapping slots of one stage (`_exact` destinations, the ring's counter not
stepped between them: `_stepped_between`).
"""

from __future__ import annotations

from typing import Any

from ..instructions.arith import Binary
from ..instructions.memory import Ld
from ..instructions.move import Cvt, Cvta, Mov
from ..operands import Addr, Imm, Reg, SpecialReg, Symbol
from ..types import StateSpace
from .analysis import STRUCTURAL, Analysis
from .findings import Hazard
from .hazards_bulk import _start
from .hazards_ring import _box, _loads, _passes, _slot, _slot_key
from .ops import Op, Role
from .stages import base


def _exact(an: Analysis, o: Op) -> tuple[Any, int, Any, int] | None:
    """(symbol, start offset, ring term, size) of a load's destination when its start is
    known exactly (up to the ring stage) and its size too."""
    start = _start(an, o.smem)
    size = _box(an, o)
    if start is None or size is None or start[1] is None or start[1] != start[2]:
        return None
    return start[0], start[1], start[3], size


def _same_ring(a: Any, b: Any) -> bool:
    return (a is None and b is None) or (a is not None and b is not None and a[0] is b[0]
                                         and a[1:] == b[1:])


def _same_in_threads(an: Analysis, x: Any) -> bool:
    """Does an operand hold the same value in every thread (built from constants, symbols,
    parameters and registers every thread computes alike: no thread id, no memory)? A
    register written several times (a loop counter) is followed through every write."""
    seen: set[int] = set()
    todo = [x.base if isinstance(x, Addr) else x]
    while todo:
        y = todo.pop()
        if isinstance(y, int | Imm | Symbol):
            continue
        if not isinstance(y, Reg):
            return False
        if id(y) in seen:
            continue
        seen.add(id(y))
        defs = an.values.defs.get(y, ())
        if not defs:
            return False
        for d in defs:
            st = an.body[d]
            insn = st.insn
            if st.guard is not None and an.values.level(st.guard):
                return False
            if isinstance(insn, Ld):
                if insn.space is not StateSpace.param:
                    return False
                continue
            if isinstance(insn, Mov) and isinstance(insn.a, SpecialReg):
                if not insn.a.name.startswith(("ntid", "nctaid", "ctaid", "cluster")):
                    return False
                continue
            if isinstance(insn, Mov | Cvt | Cvta):
                todo.append(insn.a)
            elif isinstance(insn, Binary):
                todo.extend((insn.a, insn.b))
            else:
                return False
    return True


def _stepped_between(an: Analysis, a: int, b: int, index: Any) -> bool:
    """May the counter of a ring index be written on the way from statement a to b (without
    passing a again)? Two copies into `p.slot(...)` with `p.advance()` between them fill
    two stages."""
    counter = base(an.values, index)[0]
    writes = an.values.defs.get(counter, ()) if isinstance(counter, Reg) else ()
    return any(_passes(an, a, i, a) and _passes(an, i, b, a) for i in writes)


def dst_overlap(an: Analysis) -> None:
    """Two copies completing on one barrier phase that write the same shared bytes: one
    load issued by several threads into one address, or two loads into overlapping slots."""
    loads = [o for o in _loads(an) if o.mbar is not None and o.smem is not None
             and not o.multicast]
    if not loads:
        return
    from .hazards_arrive import Threads, _same_barriers
    from .hazards_phase import FirstTrip
    dims = getattr(an.kernel, "reqntid", None)
    threads = Threads(an, dims) if dims else None
    for o in loads:
        if threads is None:
            break
        n = threads.running(o.index)
        if n is None or n < 2 or not _same_in_threads(an, o.smem) \
                or not _same_in_threads(an, o.mbar):
            continue
        if _exact(an, o) is None:
            continue
        an.report(Hazard.TMA_DST_OVERLAP, f"this copy is issued by {n} threads with the same "
                  f"destination {an.describe(o.smem)} and barrier: the {n} copies land on the "
                  "same bytes in one phase, so whatever another slot was meant to receive "
                  "never arrives and the barrier counts the bytes several times",
                  [("copy", o.index)], dedupe=("dst-overlap", o.index))
    if len(loads) < 2:
        return
    ft = FirstTrip(an)
    waits = [w for w in an.ops if w.role is Role.MBAR_WAIT]
    loops = an.loops
    for x, a in enumerate(loads):
        ea = _exact(an, a)
        if ea is None:
            continue
        for b in loads[x + 1:]:
            eb = _exact(an, b)
            if eb is None or eb[0] is not ea[0] or not _same_ring(ea[2], eb[2]):
                continue
            if not (ea[1] < eb[1] + eb[3] and eb[1] < ea[1] + ea[3]):
                continue
            _, sa = _slot(an, a.mbar)
            _, sb = _slot(an, b.mbar)
            if sa is None or sb is None or _slot_key(sa) != _slot_key(sb) \
                    or not _same_barriers(an, a, b):
                continue
            ba, bb = an.cfg.block_of(a.index), an.cfg.block_of(b.index)
            if any((ba in body) != (bb in body) for _, body in loops):
                continue   # not one iteration
            if ft.before(a.index, b.index) or ft.before(b.index, a.index):
                first, then = (a, b) if ft.before(a.index, b.index) else (b, a)
                if any(_same_barriers(an, w, a) and ft.before(first.index, w.index)
                       and ft.before(w.index, then.index) for w in waits):
                    continue   # waited in between: another phase
                if ea[2] is not None and _stepped_between(an, first.index, then.index,
                                                          ea[2][0]):
                    continue   # the ring's counter steps between them: two stages
            else:
                ta, tb = an.div.stmt_tokens(a.index), an.div.stmt_tokens(b.index)
                if not ta or not tb or ta == tb:
                    continue   # alternatives one thread chooses between: one runs
            an.report(Hazard.TMA_DST_OVERLAP, f"this copy and another one completing on "
                      f"the same mbarrier phase ({an.describe(a.mbar)}) write overlapping "
                      f"bytes of {ea[0].name} (offsets {ea[1]}..{ea[1] + ea[3] - 1} and "
                      f"{eb[1]}..{eb[1] + eb[3] - 1}): one overwrites the other's data "
                      "and what the other slot should hold never arrives",
                      [("copy", b.index), ("copy", a.index)],
                      dedupe=("dst-overlap", a.index, b.index))


STRUCTURAL.append(dst_overlap)
