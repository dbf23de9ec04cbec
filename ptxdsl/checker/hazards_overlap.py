"""`tma-dst-overlap`: two copies completing on one barrier phase that write the same shared
bytes: one load issued by several threads into one address (`_same_in_threads`), or two
loads into overlapping slots of one stage (`_exact` destinations, the ring's counter not
stepped between them: `_stepped_between`); and (`inflight_overlap`) copies a loop issues
that can be in flight together, on whatever barriers, whose destinations overlap: two
stages of a ring closer than a box, or two rings of one buffer at overlapping offsets.
"""

from __future__ import annotations

import itertools
import math
from typing import Any

from ..instructions.arith import Binary
from ..instructions.memory import Ld
from ..instructions.move import Cvt, Cvta, Mov
from ..operands import Addr, Imm, Reg, SpecialReg, Symbol
from ..types import StateSpace
from .analysis import STRUCTURAL, Analysis
from .findings import Hazard
from .hazards_arrive import _ARITH, _Unknown
from .hazards_bulk import _start
from .hazards_refill import refills
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


# -- copies in flight together -------------------------------------------------------------
_VALUES = 256    # stage values (products of a load's counters' values) enumerated, at most


def _leaves(vn: Any, out: set) -> set:
    """The registers written more than once (`('reg', id)` numbers) a value number reads."""
    if isinstance(vn, tuple) and vn:
        if vn[0] == "reg":
            out.add(vn)
        else:
            for x in vn[1:]:
                _leaves(x, out)
    return out


def _moduli(vn: Any, leaf: Any) -> set[int] | None:
    """The moduli every read of `leaf` in `vn` is reduced by (`i % n`, `i & (n - 1)`);
    None when some read is not reduced (its value then matters beyond one period)."""
    if vn == leaf:
        return None
    if not isinstance(vn, tuple) or not vn:
        return set()
    if vn[0] in ("rem", "and") and len(vn) == 3 and vn[1] == leaf \
            and isinstance(vn[2], tuple) and vn[2][:1] == ("const",):
        n = vn[2][1] + (vn[0] == "and")
        if isinstance(n, int) and n > 0 and (vn[0] == "rem" or n & (n - 1) == 0):
            return {n}
        return None
    out: set[int] = set()
    for x in vn[1:]:
        m = _moduli(x, leaf)
        if m is None:
            return None
        out |= m
    return out


def _domain(an: Analysis, leaf: Any, exprs: list[Any]) -> range | None:
    """The values a counter takes where the copies read it: its bounds (a counted loop's
    `i < C`, a stage register wrapped in place), or one period of the moduli every read
    reduces it by (`k % 3` of an unbounded k)."""
    regs = an.cache.get("leaf_regs")
    if regs is None:
        regs = an.cache["leaf_regs"] = {v: r for r, v in an.values._vn.items()
                                        if isinstance(v, tuple) and v[:1] == ("reg",)}
    reg = regs.get(leaf)
    span = an.spans.of(reg) if reg is not None else None
    if span is not None and span.root is None and span.ring is None and span.lo is not None \
            and span.hi is not None and 0 <= span.lo <= span.hi < span.lo + _VALUES:
        return range(span.lo, span.hi + 1)
    moduli: set[int] = set()
    for e in exprs:
        m = _moduli(e, leaf)
        if m is None:
            return None
        moduli |= m
    period = math.lcm(*moduli) if moduli else 1
    return range(period) if period <= _VALUES else None


def _eval(vn: Any, env: dict) -> int:
    """`vn`'s value with the counters of `env` set, a shared symbol's address as 0."""
    if not isinstance(vn, tuple) or not vn:
        raise _Unknown(vn)
    tag = vn[0]
    if tag == "const" and isinstance(vn[1], int):
        return vn[1]
    if tag == "addr":
        return 0
    if tag == "reg" and vn in env:
        return env[vn]
    if tag == "cvt":
        return _eval(vn[1], env)
    if tag == "mad" and vn[2] in (None, "lo") and vn[1].is_int:
        return _eval(vn[4], env) * _eval(vn[5], env) + _eval(vn[6], env)
    if tag in _ARITH and len(vn) == 3:
        out = _ARITH[tag](_eval(vn[1], env), _eval(vn[2], env))
        if out is not None:
            return out
    raise _Unknown(vn)


def _number(an: Analysis, x: Any) -> tuple[Any, int]:
    if isinstance(x, Addr):
        return an.values.vn(x.base), x.offset
    return an.values.vn(x), 0


def _instances(an: Analysis, o: Op) -> tuple[Any, int, dict[int, int | None]] | None:
    """(symbol, box, {start offset: barrier offset}) of a load over every value its
    counters take (a barrier offset None where it cannot be evaluated); None where the
    destination cannot be (a per-thread or run-time address, an unknown box)."""
    key = ("inflight", o.index)
    if key in an.cache:
        return an.cache[key]
    # The walk first: it takes the values the loop gives, where a counter's bounds may
    # include its exit value.
    hit = an.cache[key] = _walked(an, o)
    if hit is not None:
        return hit
    start, size = _start(an, o.smem), _box(an, o)
    if start is not None and size is not None and isinstance(start[0], Symbol):
        (dst, doff), (bar, boff) = _number(an, o.smem), _number(an, o.mbar)
        leaves = sorted(_leaves(dst, set()), key=repr)
        domains = [_domain(an, leaf, [dst, bar]) for leaf in leaves]
        if all(d is not None for d in domains) and \
                math.prod(len(d) for d in domains if d is not None) <= _VALUES:
            try:
                out: dict[int, int | None] = {}
                for vals in itertools.product(*[d for d in domains if d is not None]):
                    env = dict(zip(leaves, vals, strict=True))
                    try:
                        b: int | None = _eval(bar, env) + boff
                    except _Unknown:
                        b = None
                    out.setdefault(_eval(dst, env) + doff, b)
                hit = (start[0], size, out)
            except _Unknown:
                hit = None
    an.cache[key] = hit
    return hit


def _walked(an: Analysis, o: Op) -> tuple[Any, int, dict[int, int | None]] | None:
    """`_instances` from the walk of the innermost loop issuing the load (`hazards_walk`):
    registers written more than once (nvcc reuses one for each role's stage address) are
    followed there by their values, trip by trip."""
    from .hazards_walk import _walk
    size, b = _box(an, o), an.cfg.block_of(o.index)
    loops = sorted((body for _, body in an.loops if b in body), key=len)
    header = next((h for h, body in an.loops if loops and body is loops[0]), None)
    walk = _walk(an, header, loops[0]) if header is not None and size is not None else None
    seen = walk.copies.get(o.index) if walk is not None else None
    if not seen or walk is None or walk.root is None or size is None \
            or any(d is None for d, _ in seen):
        return None
    if not walk.exited and 2 * len({d for d, _ in seen}) > walk.trip:
        return None   # a run-time trip count and no stage seen twice: not a ring's stages
    out: dict[int, int | None] = {}
    for d, bar in sorted(seen, key=repr):
        out.setdefault(d, bar)
    return walk.root, size, out


def _waited_on(an: Analysis, *loads: Op) -> bool:
    """Does the walk of a load's loop see a wait there on one of the loads' barriers, or on
    a barrier it cannot evaluate?"""
    from .hazards_walk import _walk
    bars: set[Any] = set()
    for o in loads:
        inst = _instances(an, o)
        bars |= set(inst[2].values()) if inst is not None else {None}
    for o in loads:
        b = an.cfg.block_of(o.index)
        for h, body in an.loops:
            walk = _walk(an, h, body) if b in body else None
            if walk is not None and any(bar is None or bar in bars or None in bars
                                        for _, _, bar, _ in walk.events):
                return True
    return False


def _clash(a: tuple, b: tuple, same: bool) -> tuple[int, int] | None:
    """Two starts, one of each load, whose boxes overlap (of one load: two different
    starts, its stages; one start is a stage the ring reuses, after its release)."""
    _, za, sa = a
    _, zb, sb = b
    for x in sorted(sa):
        for y in sorted(sb):
            if (x != y or not same) and x < y + zb and y < x + za:
                return x, y
    return None


def inflight_overlap(an: Analysis) -> None:
    """Copies one loop issues, with no wait in the loop for their barriers (so every stage
    may be in flight at once, each on its own barrier), whose destinations overlap at some
    values of their counters: two stages of one ring closer than a box, or two rings of one
    buffer placed over each other. A ring reusing one stage after its release wait writes
    the same start again, which is not an overlap."""
    loads = [o for o in _loads(an) if o.mbar is not None and o.smem is not None
             and not o.multicast]
    if not loads or not an.loops:
        return
    from .hazards_arrive import _same_barriers
    from .hazards_phase import FirstTrip
    waits = [w for w in an.ops if w.role is Role.MBAR_WAIT]
    ft = FirstTrip(an)
    for _, body in an.loops:
        inside = [o for o in loads if an.cfg.block_of(o.index) in body]
        served = [w for w in waits if an.cfg.block_of(w.index) in body]
        for x, a in enumerate(inside):
            for b in inside[x:]:
                if any(_same_barriers(an, w, a) or _same_barriers(an, w, b) for w in served) \
                        or _waited_on(an, a, b):
                    continue   # the loop waits for its copies: they are not all in flight
                if a is not b and not (ft.before(a.index, b.index)
                                       or ft.before(b.index, a.index)):
                    continue   # alternatives one thread chooses between
                ia, ib = _instances(an, a), _instances(an, b)
                if ia is None or ib is None or ia[0] is not ib[0]:
                    continue
                hit = _clash(ia, ib, a is b)
                if hit is None or (a is b and an.reported(Hazard.RING_REFILL_UNGUARDED,
                                                          ("refill", a.index))):
                    continue   # (a copy refilling its own bytes unguarded: reported so)
                (xa, xb), root = hit, ia[0].name
                bars = {ia[2][xa], ib[2][xb]}
                on = "its barrier" if len(bars) == 1 and None not in bars else \
                    "their own barriers"
                what = "two of this copy's stages" if a is b else "this copy and another"
                an.report(Hazard.TMA_DST_OVERLAP, f"{what} this loop issues write "
                          f"overlapping bytes of {root} (offsets {xa}..{xa + ia[1] - 1} "
                          f"and {xb}..{xb + ib[1] - 1}), and the loop waits on neither's "
                          f"barrier (a release wait orders only a stage's reuse): both can "
                          f"be in flight at once, each completing on {on}, and one "
                          "overwrites the other's tile before it is read",
                          [("copy", b.index), ("copy", a.index)],
                          dedupe=("dst-overlap", a.index, b.index))


# After `refills` (imported above, so registered first): a copy that refills its own bytes
# with no wait is reported once, as that.
assert refills in STRUCTURAL
STRUCTURAL.extend([dst_overlap, inflight_overlap])
