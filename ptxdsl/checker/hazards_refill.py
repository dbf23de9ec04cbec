"""`ring-refill-unguarded`: a producer loop that refills buffers consumers read with no wait
of its own for the consumers to release them.

The loops around a copy are judged from the innermost out (`refills`): a wait of the copy's
thread in the loop guards it (a wait skipped on the ring's first pass too, `_first_pass`),
unless it is shown to be on another ring's barrier (`_another_rings`: FlashAttention's
producer refills K and V in one loop, and V's wait says nothing of K's stages); a loop that
writes no byte twice (a fill loop over fresh stages, `_fills_once`, or a loop over
the boxes of one stage, `_fresh_each_trip`) passes the question to the loop around it.
"""

from __future__ import annotations

import functools
from typing import Any

from ..instructions.arith import Binary, Mad
from ..instructions.move import Mov
from ..operands import Addr, Imm, Reg, SpecialReg, Symbol
from .analysis import STRUCTURAL, Analysis, handles
from .cfg import dominates, dominators, guard_polarity
from .divergence import normal_token
from .findings import Hazard
from .hazards_ring import _FAR, _apart, _box, _loads, _slot, index_current, ring_index
from .ops import Op, Role
from .state import State


def refills(an: Analysis) -> None:
    """A producer loop that refills buffers consumers read (the load's barrier is waited
    by other threads) with no wait of its own anywhere in the loop.

    The loops around the copy are judged from the innermost out: one with a wait of the
    copy's thread guards the copy; one whose iterations never write the same bytes twice
    (a fill loop over fresh stages, or a loop over the boxes of one stage) refills nothing,
    so the loop around it is judged; any other loop refills unguarded."""
    loads = [o for o in _loads(an) if o.mbar is not None]
    if not loads or not an.loops:
        return
    waits = [o for o in an.ops if o.role is Role.MBAR_WAIT]
    for o in loads:
        key = an.key(o, "mbar")
        root = key[0] if key is not None else None
        consumers = [w for w in waits if (an.key(w, "mbar") or (None,))[0] is root
                     and root is not None and not an.div.same_threads(w.index, o.index)]
        if not consumers:
            continue
        home = an.cfg.block_of(o.index)
        # Natural loops nest (loops sharing a header are merged), so sorting the ones
        # holding the copy by size orders them innermost first.
        enclosing = sorted((lp for lp in an.loops if home in lp[1]), key=lambda lp: len(lp[1]))
        for depth, (header, body) in enumerate(enclosing):
            # A wait skipped on the first pass over the ring (`if i >= S`) still guards
            # every refill: those first iterations fill stages nothing has filled yet.
            skip = functools.partial(_first_pass, an, o, body=body)
            mine = [w for w in waits if an.cfg.block_of(w.index) in body
                    and an.div.same_threads(w.index, o.index, skip=skip)]
            if not all(_another_rings(an, w, o, body) for w in mine):
                break
            # Only the innermost loop runs the copy once per iteration, so only there does
            # a destination moving by a box a trip show that no bytes are written twice.
            if _fills_once(an, o, body) or (depth == 0
                                            and _fresh_each_trip(an, o, header, body)):
                continue
            how = "in the loop its thread waits only on another ring's barriers, never" \
                if mine else "its thread never waits in the loop"
            an.report(Hazard.RING_REFILL_UNGUARDED, f"this copy refills "
                      f"{an.describe(o.smem)} on every iteration, but {how} for the "
                      f"consumers (who wait on {an.describe(consumers[0].mbar)}) to release "
                      "the stage", [("copy", o.index), ("consumer", consumers[0].index)]
                      + [("other ring's wait", w.index) for w in mine[:1]],
                      dedupe=("refill", o.index))
            break


def _another_rings(an: Analysis, w: Op, o: Op, body: frozenset) -> bool:
    """Positive evidence that the wait `w` guards another ring than the one the copy `o`
    fills (FlashAttention's producer waits on V's empty barrier in the loop that refills K
    too), or another phase of it: `_other_counter` or `_other_stage`."""
    _, ws = _slot(an, w.mbar)
    if ws is None or ws[0] != "ring" or not _apart(an, w, o):
        return False
    _, mine = _slot(an, o.mbar)
    if mine is None:
        return False
    counter = ring_index(an, ws)[0]
    if mine[0] == "ring" and ring_index(an, mine)[0] is counter:
        return _other_stage(an, w, o, ws, mine)
    return _other_counter(an, o, ws, counter, body)


def _other_counter(an: Analysis, o: Op, ws: tuple, counter: Any, body: frozenset) -> bool:
    """The wait's counter (`ws`: its ring slot) indexes, with the same stage count, the
    barrier of another copy in the loop, one completing on barriers apart from `o`'s, and
    `o`'s barrier is a constant slot or a stage of another counter (each ring's producer
    view keeps its own stage register, as `MbarrierRing` does)."""
    for c in _loads(an):
        if c is o or c.mbar is None or an.cfg.block_of(c.index) not in body \
                or not _apart(an, c, o):
            continue
        _, cs = _slot(an, c.mbar)
        if cs is not None and cs[0] == "ring" and cs[2] == ws[2] \
                and ring_index(an, cs)[0] is counter:
            return True
    return False


def _other_stage(an: Analysis, w: Op, o: Op, ws: tuple, mine: tuple) -> bool:
    """Two rings on one stage counter (K and V of stage `j % S`): on every path to the copy,
    the wait last ran on another stage of the counter than the one `o` fills, or on an
    earlier phase of it (`wait(V[s]); copy V; s += 1; copy K` with K's own wait dropped
    reaches K's copy of stage s + 1 one step after V's wait on stage s). The steps come
    from `hazards_ring`'s ("wstep", wait, k) facts at the copy (`_steps_at_loads`)."""
    n = ws[2]
    (counter, wc), (_, oc) = ring_index(an, ws), ring_index(an, mine)
    if mine[2] != n or not index_current(an, o.mbar, counter, o.index) \
            or not index_current(an, w.mbar, counter, w.index):
        return False
    ks = {f[2] for f in an.cache.get("refill_wsteps", {}).get(o.index, ()) if f[1] == w.index}
    if not ks or None in ks:
        return False
    return not any(k < _FAR and wc == k + oc for k in ks)


@handles(Role.TMA_LOAD, Role.BULK_LOAD)
def _steps_at_loads(an: Analysis, state: State, op: Op, report: bool) -> State:
    """Keep, on the reporting pass, the wait-step facts at each copy for `_other_stage`."""
    if report:
        an.cache.setdefault("refill_wsteps", {})[op.index] = frozenset(
            f for f in state.may if f[0] == "wstep")
    return state


def _first_pass(an: Analysis, o: Op, tok: tuple[Any, bool], *, body: frozenset) -> bool:
    """Is condition `tok` of a wait false only on the first pass over the ring load `o`
    fills: `i >= T` (or `i > T-1`, either operand order) on the ring's counter i, which
    starts at 0 and steps by 1 in this loop, with T no more than the ring's stages? The
    iterations that skip the wait then load stages 0..T-1 once each, before any refill."""
    _, slot = _slot(an, o.smem)
    if slot is None or slot[0] != "ring":
        return False
    counter, stages = slot[1], slot[2]
    vn, pol = normal_token(*tok)
    if not (isinstance(vn, tuple) and len(vn) == 6 and vn[0] == "setp" and vn[4] is None
            and vn[1] in ("lt", "lo", "le", "ls")):
        return False
    mine = an.values.vn(counter)
    strict = vn[1] in ("lt", "lo")
    if vn[2] == mine and isinstance(vn[3], tuple) and vn[3][0] == "const" and not pol:
        bound = vn[3][1] if strict else vn[3][1] + 1     # not (i < C) / not (i <= C)
    elif vn[3] == mine and isinstance(vn[2], tuple) and vn[2][0] == "const" and pol:
        bound = vn[2][1] + 1 if strict else vn[2][1]     # C < i / C <= i
    else:
        return False
    if not isinstance(bound, int) or bound > stages:
        return False
    inits: list[int] = []
    steps: list[int] = []
    for i in an.values.defs.get(counter, ()):
        (steps if an.cfg.block_of(i) in body else inits).append(i)
    if len(inits) != 1 or len(steps) != 1:
        return False
    # A counter reset by an outer loop would skip the wait again on stages still in use.
    home = an.cfg.block_of(o.index)
    if any(an.cfg.block_of(inits[0]) in outer and home in outer for _, outer in an.loops):
        return False
    init, step = an.body[inits[0]], an.body[steps[0]]
    return (init.guard is None
            and isinstance(init.insn, Mov) and an.const(init.insn.a) == 0
            and step.guard is None and isinstance(step.insn, Binary)
            and step.insn.op == "add" and step.insn.a is counter
            and an.const(step.insn.b) == 1)


def _fills_once(an: Analysis, o: Op, body: frozenset) -> bool:
    """Does a loop of a constant trip count C load each of at least C stages once (a fill
    loop, no refill)? Recognised for `i < C` (from 0) and a ring destination of >= C stages."""
    trips = None
    for x in body:
        blk = an.cfg.blocks[x]
        if blk.branch is None or all(s in body for s in blk.succs):
            continue
        vn = an.values.vn(guard_polarity(an.body[blk.branch].guard)[0])
        if isinstance(vn, tuple) and len(vn) == 6 and vn[0] == "setp" and vn[1] in (
                "lt", "lo", "ne") and isinstance(vn[3], tuple) and vn[3][0] == "const":
            trips = vn[3][1]
    if trips is None:
        return False
    _, slot = _slot(an, o.smem)
    if slot is None or slot[0] != "ring":
        return trips <= 1
    # The ring's counter must move in this loop: a box loop inside a stage (`sa + h * box`
    # on the outer loop's stage) writes one stage however many stages the ring has.
    if not any(an.cfg.block_of(d) in body for d in an.values.defs.get(slot[1], ())):
        return False
    return trips <= slot[2]


def _fresh_each_trip(an: Analysis, o: Op, header: int, body: frozenset) -> bool:
    """Does the copy `o`, in the innermost loop `body`, write other bytes on every trip (a
    loop over the boxes of one stage: `base + h * 8192` for `h` in 0, 1, ...)? Its
    destination must be `c * h + (a value the loop never changes)` summed over counters
    `h` that step by a constant once a trip, the sum of `c * step` moving it by at least
    its box (by anything but 0 when the box is unknown). A ring index (`h % n`) or a base
    the loop recomputes from memory is not followed, so such loops stay refills."""
    idom = an.cache.get("idom")
    if idom is None:
        idom = an.cache["idom"] = dominators(an.cfg)
    latches = [b for b, h in an.back_edges if h == header]
    home = an.cfg.block_of(o.index)
    steps: dict[int, tuple[Reg, int]] = {}
    for x in body:
        for i in an.cfg.blocks[x].stmts:
            st = an.body[i]
            insn = st.insn
            if not (isinstance(insn, Binary) and insn.op in ("add", "sub")
                    and isinstance(insn.d, Reg) and insn.a is insn.d):
                continue
            c = an.const(insn.b)
            inside = [d for d in an.values.defs.get(insn.d, ()) if an.cfg.block_of(d) in body]
            # Stepped exactly once on every trip: one unguarded write in the loop, on a
            # block every back edge passes through.
            if c and st.guard is None and inside == [i] \
                    and all(dominates(idom, x, latch) for latch in latches):
                steps[id(insn.d)] = (insn.d, c if insn.op == "add" else -c)
    if not steps:
        return False
    coef = _coefficients(an, o.smem, steps, body, idom, home, 0)
    if coef is None:
        return False
    move = abs(sum(c * steps[k][1] for k, c in coef.items()))
    box = _box(an, o)
    # (Wrapping the 32-bit address takes 2**32 / move trips, far past any shared window.)
    return move > 0 and (box is None or move >= box)


def _coefficients(an: Analysis, x: Any, steps: dict[int, tuple[Reg, int]], body: frozenset,
                  idom: list[int | None], home: int, depth: int) -> dict[int, int] | None:
    """`x` as `sum(c * h) + (a value the loop does not change)` over the stepped counters
    `h` of `steps`: {id(h): c}, or None when it is not of that form. Registers written in
    the loop are followed only through single unguarded writes on every path to the copy
    (block `home`), so the value the copy sees is this trip's."""
    if isinstance(x, Addr):
        x = x.base
    if isinstance(x, int | Imm | Symbol):
        return {}
    if not isinstance(x, Reg) or depth > 16:
        return None
    if id(x) in steps:
        return {id(x): 1}
    defs = an.values.defs.get(x, ())
    if not any(an.cfg.block_of(d) in body for d in defs):
        return {}      # not written in the loop: the same on every trip
    if len(defs) != 1 or an.body[defs[0]].guard is not None \
            or not dominates(idom, an.cfg.block_of(defs[0]), home):
        return None
    insn = an.body[defs[0]].insn
    d = depth + 1

    def sub(y: Any) -> dict[int, int] | None:
        return _coefficients(an, y, steps, body, idom, home, d)

    def plus(a: dict[int, int] | None, b: dict[int, int] | None,
             sign: int = 1) -> dict[int, int] | None:
        if a is None or b is None:
            return None
        out = dict(a)
        for k, c in b.items():
            out[k] = out.get(k, 0) + sign * c
        return out

    def times(a: Any, b: Any) -> dict[int, int] | None:
        ca, cb = an.const(a), an.const(b)
        if cb is None and ca is not None:
            a, cb = b, ca
        if cb is None:   # a product of two values: affine only when neither moves
            ta, tb = sub(a), sub(b)
            return {} if ta == {} and tb == {} else None
        ta = sub(a)
        return None if ta is None else {k: c * cb for k, c in ta.items()}

    if isinstance(insn, Mov) and not isinstance(insn.a, SpecialReg):
        return sub(insn.a)
    if isinstance(insn, Mad) and insn.mode in (None, "lo"):
        return plus(times(insn.a, insn.b), sub(insn.c))
    if not isinstance(insn, Binary):
        return None
    if insn.op in ("add", "sub"):
        return plus(sub(insn.a), sub(insn.b), 1 if insn.op == "add" else -1)
    if insn.op == "mul" and insn.mode in (None, "lo"):
        return times(insn.a, insn.b)
    if insn.op == "shl":
        b = an.const(insn.b)
        ta = sub(insn.a)
        if b is None or not 0 <= b < 32 or ta is None:
            return None
        return {k: c << b for k, c in ta.items()}
    return None


STRUCTURAL.append(refills)
