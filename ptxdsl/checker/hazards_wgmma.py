"""Tensor-core hazards: wgmma.mma_async's asynchronous register and shared-memory use, and
setmaxnreg's warpgroup uniformity.

- `wgmma-regs-in-flight`: a wgmma's accumulators (and RS-form A registers) belong to it from
  issue until a `wgmma.wait_group N` retires its group (N smaller than the number of groups
  committed after it); another instruction touching them before that is undefined. Another
  wgmma.mma_async accumulating into the same registers is the allowed exception.
- `wgmma-no-fence`: a `wgmma.fence` must come before the first wgmma.mma_async and between any
  other access of its d/A registers and the wgmma.
- `wgmma-smem-no-proxy-fence`: wgmma reads shared memory through the async proxy; generic
  writes (st.shared, atom, stmatrix) it reads need fence.proxy.async and a barrier first.
  `hazards_proxy` judges it, as it does tcgen05's readers, and traces the descriptors to
  their buffers (`addresses`, `traced`) for the rules here too.
- `wgmma-smem-released`: handing a stage back to its producer (a plain `mbarrier.arrive`, not
  the producer's arrive.expect_tx) while a wgmma that reads it may still run. wait_group N
  retires all but the N most recent committed groups. When the wgmma's buffer and the
  arrive's barrier are ring slots on one counter (or on `i` and `(i + c) % n`, or on two
  counters `stages.relation` relates: two views of one MbarrierRing), and the counter's steps
  since the wgmma are known (`stages.moved`: adds, and a stage register's advance and wrap),
  an unretired wgmma is reported exactly when it reads the released stage (release the
  previous stage after wait_group 1: clean). A wgmma that reads no TMA or bulk copy's
  destination (a tile the consumer wrote itself) is not what a ring's release hands back,
  nor is a buffer whose copies never wait on the released barrier (`guards`: another ring's
  barrier on the same stage counter, FlashAttention's V release with QK^T reading K).
  Otherwise
  an unretired wgmma is reported when no wait_group after it retired any group (none ran, or
  N was at least the groups in flight); after one that did, the pipelined idiom is assumed.
- The descriptors' start addresses also count as shared reads of TMA destinations for
  `smem-read-before-wait` / `wait-wrong-barrier` (hazards_ring.check_read).
- `setmaxnreg-not-uniform`: the threads of a warpgroup must all run the same setmaxnreg. With
  `.reqntid`/`.maxntid`, `ptxdsl.warpgroups` decides per thread which ones can run it (exact for
  conditions computed from %tid, %laneid, %ntid and constants); whatever the CTA size, a
  setmaxnreg under a per-lane condition (the checker's divergence level 2) is reported.
- `wgmma-not-warpgroup`: the same for the wgmma family (fence, mma_async, commit_group,
  wait_group), all `.sync.aligned` per warpgroup; both also report a CTA whose last warpgroup
  is short of 128 threads.

Facts: ("wgmma", stmt, groups committed after it or None, (waits, moved)) pending wgmmas,
`waits` "none"/"noop"/"retiring" (the wait_groups run since), `moved` how far the counter of
the ring it reads stepped since (mod n; None: unknown);
("wg_touched", stmt) register accesses since the last wgmma.fence; the must-fact
("wg_fenced",) once a wgmma.fence ran; shared writes reuse `smem_dirty`/`smem_fenced` (see
`sync`).
"""

from __future__ import annotations

from typing import Any

import attrs

from ..operands import Addr, NegPred, Reg, Vec, registers_in
from .analysis import PREPARE, STRUCTURAL, Analysis, handles
from .findings import Hazard
from .guards import enables_no_copy, released_elsewhere, tile_spans
from .hazards_proxy import addresses, smem_check, traced
from .hazards_ring import (
    _slot,
    check_read,
    index_current,
    lands_in,
    read_extent,
    ring_index,
)
from .ops import Op, Role
from .stages import moved, relate, relation
from .state import State

_AGE_CAP = 8        # wait_group takes 0..7: older groups all count as "8 or more"
_HOLDERS = (tuple, list, Vec, Addr, NegPred)   # operand values that may hold registers


def _regs_of(an: Analysis, i: int) -> frozenset[Reg]:
    """The d and RS-form A registers of the wgmma at statement i."""
    key = ("wg_regs", i)
    hit = an.cache.get(key)
    if hit is None:
        insn = an.body[i].insn
        regs = set(insn.d)
        if isinstance(insn.a, tuple):
            regs.update(insn.a)
        hit = an.cache[key] = frozenset(regs)
    return hit


def _watched(an: Analysis) -> frozenset[Reg]:
    hit = an.cache.get("wg_watched")
    if hit is None:
        hit = frozenset().union(*(_regs_of(an, op.index) for op in an.ops
                                  if op.role is Role.WGMMA))
        an.cache["wg_watched"] = hit
    return hit


def _register_accesses(an: Analysis) -> None:
    """A synthetic WGMMA_REGS op at every other statement that touches a wgmma's d/A
    registers (the op's value: the registers it touches)."""
    if Role.WGMMA not in an.roles:
        return
    watched = _watched(an)
    wgmmas = {op.index for op in an.ops if op.role is Role.WGMMA}
    fields: dict[type, tuple[str, ...]] = {}
    for i, st in enumerate(an.body):
        insn = getattr(st, "insn", None)
        if insn is None or i in wgmmas:
            continue
        cls = type(insn)
        names = fields.get(cls)
        if names is None:
            names = fields[cls] = tuple(f.name for f in attrs.fields(cls))
        hit = False
        for n in names:     # most operands are plain registers: test those inline
            v = getattr(insn, n)
            if type(v) is Reg:
                if v in watched:
                    hit = True
                    break
            elif isinstance(v, _HOLDERS) and any(r in watched for r in registers_in(v)):
                hit = True
                break
        if hit:
            touched = frozenset(r for r in insn.registers() if r in watched)
            an.add_op(Op(Role.WGMMA_REGS, i, value=touched))


PREPARE.append(_register_accesses)


def _pending(state: State) -> list[tuple]:
    return sorted((f for f in state.may if f[0] == "wgmma"), key=lambda f: f[1])


@handles(Role.WGMMA_REGS)
def register_access(an: Analysis, state: State, op: Op, report: bool) -> State:
    """An instruction touching registers: `wgmma-regs-in-flight` when they belong to a wgmma whose
    group no wait_group has retired (collected per wgmma, reported once)."""
    if report:
        for f in _pending(state):
            hit = op.value & _regs_of(an, f[1])
            if hit:
                # Collected per wgmma and reported once (`_in_flight`): an epilogue reading
                # a 64-register fragment is one mistake, not 64.
                how = ("it was never committed (wgmma.commit_group)" if f[2] is None else
                       "no wgmma.wait_group has retired its group yet")
                seen = an.cache.setdefault("wg_in_flight", {}).setdefault(
                    f[1], (set(), set(), how))
                seen[0].update(hit)
                seen[1].add(op.index)
                break
    return State(state.must, state.may | {("wg_touched", op.index)}, state.tx)


def _in_flight(an: Analysis) -> None:
    for w, (regs, sites, how) in sorted(an.cache.get("wg_in_flight", {}).items()):
        first, *rest = sorted(sites)
        many = len(regs) > 1
        where = f" by {len(sites)} instructions" if len(sites) > 1 else ""
        an.report(Hazard.WGMMA_REGS_IN_FLIGHT, f"{_reg_list(regs)} {'are' if many else 'is'} "
                  f"accessed{where} while the wgmma.mma_async that owns "
                  f"{'them' if many else 'it'} may still run: {how}",
                  [("access", first), ("wgmma", w)] + [("access", s) for s in rest[:2]],
                  dedupe=("in-flight", w))


def _reg_list(regs: set) -> str:
    """Registers as compact ranges: `%f1..%f64 (64 registers)`, `%f4`, `%f1, %f3`."""
    groups: dict[str, list[int]] = {}
    odd: list[str] = []
    for r in regs:
        stem = r.name.rstrip("0123456789")
        digits = r.name[len(stem):]
        if digits:
            groups.setdefault(stem, []).append(int(digits))
        else:
            odd.append(r.name)
    parts: list[str] = []
    for stem, nums in sorted(groups.items()):
        nums.sort()
        lo = prev = nums[0]
        for x in nums[1:] + [None]:
            if x is not None and x == prev + 1:
                prev = x
                continue
            parts.append(f"%{stem}{lo}" if lo == prev else f"%{stem}{lo}..%{stem}{prev}")
            if x is not None:
                lo = prev = x
    parts += [f"%{n}" for n in sorted(odd)]
    text = ", ".join(parts[:4]) + (", ..." if len(parts) > 4 else "")
    return text + (f" ({len(regs)} registers)" if len(regs) > 1 else "")


@handles(Role.WGMMA_FENCE)
def fence(an: Analysis, state: State, op: Op, report: bool) -> State:
    """wgmma.fence: registers touched since are fenced for the next wgmma.mma_async."""
    may = frozenset(f for f in state.may if f[0] != "wg_touched")
    return State(state.must | {("wg_fenced",)}, may, state.tx)


@handles(Role.WGMMA)
def wgmma(an: Analysis, state: State, op: Op, report: bool) -> State:
    """wgmma.mma_async: `wgmma-no-fence`, `wgmma-smem-no-proxy-fence` for shared operands written
    through the generic proxy without a fence, and the TMA checks of its shared operands (read
    before the copy's wait); the wgmma is then in flight until committed and retired."""
    if report:
        _fence_check(an, state, op)
        smem_check(an, state, op)
        _tma_check(an, state, op)
    return State(state.must, state.may | {("wgmma", op.index, None, ("none", 0))}, state.tx)


def _tma_check(an: Analysis, state: State, op: Op) -> None:
    """The wgmma reads TMA destinations through its descriptors: like an ld.shared, the read
    needs the copy's mbarrier wait first. The read is taken as the 16 bytes at the
    descriptor's start address (the first row of its first core matrix, which every shape
    reads); the rest of the tile lies in the same copy's box in the layouts TMA fills."""
    for addr in addresses(an, op.index):
        if lands_in(an, addr):
            check_read(an, state, op.index, addr, read_extent(an, addr, 16),
                       "this wgmma.mma_async (through its descriptor)")


def _fence_check(an: Analysis, state: State, op: Op) -> None:
    # One finding per group: the wgmmas issued since the last commit_group (uncommitted
    # facts) share the first one's fence, so they share its finding too.
    group = min((f[1] for f in state.may if f[0] == "wgmma" and f[2] is None),
                default=op.index)
    mine = _regs_of(an, op.index)
    for f in sorted((f for f in state.may if f[0] == "wg_touched"), key=lambda f: f[1]):
        hit = _touched(an, f[1]) & mine
        if hit:
            reg = sorted(hit, key=lambda r: r.name)[0]
            an.report(Hazard.WGMMA_NO_FENCE, f"%{reg.name} was accessed by another "
                      "instruction and no wgmma.fence follows before this wgmma.mma_async "
                      "uses it", [("wgmma", op.index), ("access", f[1])],
                      dedupe=("fence", group))
            return
    if ("wg_fenced",) not in state.must:
        an.report(Hazard.WGMMA_NO_FENCE, "no wgmma.fence runs before this wgmma.mma_async "
                  "on some path (one is needed before the first)", [("wgmma", op.index)],
                  dedupe=("fence", group))


def _touched(an: Analysis, i: int) -> frozenset[Reg]:
    key = ("wg_touched", i)
    hit = an.cache.get(key)
    if hit is None:
        watched = _watched(an)
        hit = an.cache[key] = frozenset(
            r for r in an.body[i].insn.registers() if r in watched)
    return hit


@handles(Role.WGMMA_COMMIT)
def commit(an: Analysis, state: State, op: Op, report: bool) -> State:
    """wgmma.commit_group: the uncommitted wgmmas become the newest group."""
    return state.commit_group("wgmma", _AGE_CAP)


@handles(Role.WGMMA_WAIT)
def wait_group(an: Analysis, state: State, op: Op, report: bool) -> State:
    """wait_group N retires every group but the N most recent; uncommitted wgmmas stay. The
    survivors remember whether a wait_group after them retired anything ("retiring": the
    pipelined idiom, where the stage of the retired group is the one released) or nothing
    ("noop": N at least the groups in flight, e.g. wait_group 1 after a single commit)."""
    if not any(f[0] == "wgmma" for f in state.may):
        return state
    n = op.n if op.n is not None else 0
    retired = any(f[0] == "wgmma" and f[2] is not None and f[2] >= n for f in state.may)
    may = set()
    for f in state.may:
        if f[0] == "wgmma":
            if f[2] is not None and f[2] >= n:
                continue
            seen = "retiring" if retired or f[3][0] == "retiring" else "noop"
            f = ("wgmma", f[1], f[2], (seen, f[3][1]))
        may.add(f)
    return State(state.must, frozenset(may), state.tx)


def _ring_of(an: Analysis, i: int) -> tuple | None:
    """The ring slot ('ring', counter, n, stride) the wgmma at i reads, if any."""
    key = ("wg_ring", i)
    if key not in an.cache:
        found = None
        for r in addresses(an, i):
            s = _slot(an, r)[1]
            if s is not None and s[0] == "ring":
                # (a descriptor built before a step of its counter reads another stage)
                found = s if index_current(an, r, ring_index(an, s)[0], i) else None
                break
        an.cache[key] = found
    return an.cache[key]


def _counter(an: Analysis, ring: tuple) -> tuple[Any, int]:
    """(counter written in place, c) of a ring slot's index register (= counter + c)."""
    return ring_index(an, ring)


def _wgmma_ring_steps(an: Analysis) -> None:
    """A RING_STEP op at every write of the counter of a ring a wgmma reads (unless another
    hazard module placed one there already), so a pending wgmma knows how far its stage is
    behind the counter's current value."""
    if Role.WGMMA not in an.roles:
        return
    counters = {}
    for op in an.ops:
        r = _ring_of(an, op.index) if op.role is Role.WGMMA else None
        if op.role is Role.MBAR_ARRIVE and op.count is None:
            slot = _slot(an, op.mbar)[1]
            r = slot if slot is not None and slot[0] == "ring" else None
        if r is not None:
            c = _counter(an, r)[0]
            counters[id(c)] = c
    follow_relations(an, counters.values())


def follow_relations(an: Analysis, counters: Any) -> None:
    """Follow the relations between these counters (`stages.relate`, in `ring_step`), so two
    views of one ring can be compared: the counters of the stages wgmmas read and arrives
    release, and of those bulk stores read (`hazards_bulk_release`)."""
    an.cache.setdefault("related_counters", set()).update(id(c) for c in counters)
    an.add_ring_steps(counters)


PREPARE.append(_wgmma_ring_steps)


@handles(Role.RING_STEP)
def ring_step(an: Analysis, state: State, op: Op, report: bool) -> State:
    """A step of the counter moves the pending wgmmas' stages behind it (`stages.moved`: an
    add, or a stage register's advance and wrap); other writes lose track."""
    reg = op.value
    facts = state.may
    if id(reg) in an.cache.get("related_counters", ()):
        facts = relate(an.values, facts, op.index, reg)
    if not any(f[0] == "wgmma" for f in facts):
        return state if facts is state.may else State(state.must, facts, state.tx)
    may = set()
    for f in facts:
        if f[0] == "wgmma" and f[3][1] is not None:
            ring = _ring_of(an, f[1])
            if ring is not None and _counter(an, ring)[0] is reg:
                k = moved(an.values, op.index, reg, ring[2])
                f = (*f[:3], (f[3][0], None if k is None else (f[3][1] + k) % ring[2]))
        may.add(f)
    return State(state.must, frozenset(may), state.tx)


def same_stage(an: Analysis, state: State, mine: tuple | None, since: int | None,
               released: Any) -> bool | None:
    """Is the ring slot `mine` ('ring', index, n, stride), read by an operation after which
    its counter moved `since` stages, the stage the arrive on `released` (a barrier slot)
    hands back? Known when both are ring slots of n stages on one counter, on counters one
    defined from the other (`(i + c) % n`), or on two counters the state relates (two views
    of one ring, `stages.relation`), and the counter's moves since are known; None
    otherwise."""
    if mine is None or released is None or released[0] != "ring" or since is None \
            or mine[2] != released[2]:
        return None
    (rb, rc), (mb, mc) = _counter(an, released), _counter(an, mine)
    d = 0 if rb is mb else relation(state.may, rb, mb, mine[2])
    if d is None:
        return None
    return (d + rc - mc + since) % mine[2] == 0


def released_slot(an: Analysis, op: Op) -> Any:
    """The barrier slot (`hazards_ring._slot`) a count-less arrive releases: ('unknown',)
    when its address was built before a step of its counter (it releases another stage)."""
    slot = _slot(an, op.mbar)[1]
    ok = slot is not None and (slot[0] != "ring" or index_current(
        an, op.mbar, ring_index(an, slot)[0], op.index))
    return slot if ok else ("unknown",)


def _reads_no_copy(an: Analysis, i: int) -> bool:
    """Does the wgmma at statement i read only buffers no TMA or bulk copy fills, in a kernel
    whose rings are filled by such copies? Then a stage handed back is not what it reads (a
    W8A16 consumer reads the int8 stage with ld.shared, releases it, and multiplies a tile
    it dequantised into with st.shared)."""
    from .hazards_ring import _load_extents, _loads
    if not _loads(an) or traced(an, i) is None:
        return False
    if sum(map(len, _load_extents(an).values())) < len(_loads(an)):
        return False   # a copy it cannot place may fill what the wgmma reads
    for a in addresses(an, i):
        ext = read_extent(an, a, 16)     # (its first row, as for smem-read-before-wait)
        if ext is None:
            return False
        root, lo, hi = ext
        if any(x < hi and lo < y for _, x, y in _load_extents(an).get(id(root), ())):
            return False
    return True


@handles(Role.MBAR_ARRIVE)
def arrive(an: Analysis, state: State, op: Op, report: bool) -> State:
    """A count-less arrive (a consumer's release of a ring stage): `wgmma-smem-released` when a
    wgmma still in flight reads that stage's shared memory."""
    if not report or op.count is not None:
        return state
    released: Any = None
    for f in _pending(state):
        if released is None:
            released = released_slot(an, op)
        same = same_stage(an, state, _ring_of(an, f[1]), f[3][1], released)
        if same is False or (same is None and _reads_no_copy(an, f[1])):
            continue   # it reads another stage (the previous one, with wait_group 1)
        if enables_no_copy(an, op):
            break      # no producer waits for this barrier: it releases nothing
        spans = tile_spans(an, f[1])
        if spans is not None and released_elsewhere(an, spans, op):
            continue   # another ring's barrier (K and V rings on one stage counter)
        if spans is not None and released_elsewhere(an, spans, op, assume=True):
            an.note("wgmma-smem-released", "this arrive releases a buffer the wgmma reads only "
                    "if a TMA copy's box (unknown: pass maps={...}) runs past its ring stage",
                    [("arrive", op.index), ("wgmma", f[1])])
            continue
        seen = f[3][0]
        if f[2] is None:
            how = "it was never committed"
        elif same:
            how = ("it reads the stage this arrive releases, and no wgmma.wait_group after it "
                   "retired its group" if seen == "none" else "it reads the stage this "
                   "arrive releases, and the wgmma.wait_group before the arrive leaves its "
                   "group in flight (wait_group N retires all but the N most recent groups)")
        elif seen == "none":
            how = "no wgmma.wait_group ran after it"
        elif seen == "noop":
            how = ("the wgmma.wait_group after it retires no group (N is at least the "
                   "number of groups in flight), so it still runs")
        else:
            continue   # a wait_group retired an older group: the idiom that frees its stage
        an.report(Hazard.WGMMA_SMEM_RELEASED, "this mbarrier.arrive hands shared "
                  f"memory back while a wgmma.mma_async may still read it ({how})",
                  [("arrive", op.index), ("wgmma", f[1])])
        break
    return state


# -- warpgroup-aligned instructions ---------------------------------------------------------------
# setmaxnreg and the wgmma family are `.sync.aligned` per warpgroup: all 128 threads of a
# warpgroup run the same instruction (ISA: otherwise the behaviour is undefined).
_ALIGNED = {Role.SETMAXNREG: (Hazard.SETMAXNREG_NOT_UNIFORM, "setmaxnreg"),
            Role.WGMMA: (Hazard.WGMMA_NOT_WARPGROUP, "wgmma.mma_async"),
            Role.WGMMA_FENCE: (Hazard.WGMMA_NOT_WARPGROUP, "wgmma.fence"),
            Role.WGMMA_COMMIT: (Hazard.WGMMA_NOT_WARPGROUP, "wgmma.commit_group"),
            Role.WGMMA_WAIT: (Hazard.WGMMA_NOT_WARPGROUP, "wgmma.wait_group")}
_PER_LANE = "it runs under a condition that differs between the lanes of a warp"


def _warpgroup_uniform(an: Analysis) -> None:
    sites = [op for op in an.ops if op.role in _ALIGNED]
    if not sites:
        return
    reach = an.threads()
    bad: dict[Hazard, list[tuple[int, str, str]]] = {}
    for op in sites:
        why = _not_uniform(an, op.index, reach)
        if why is not None:
            hazard, name = _ALIGNED[op.role]
            bad.setdefault(hazard, []).append((op.index, name, why))
    # Each setmaxnreg is its own mistake (a .dec and an .inc in two branches); the wgmma
    # family gets one finding, because a branch that splits a warpgroup usually holds a whole
    # K loop of them and the first says it for all.
    for hazard, found in bad.items():
        if hazard is Hazard.WGMMA_NOT_WARPGROUP:
            more = f" ({len(found) - 1} more such instructions)" if len(found) > 1 else ""
            found = [(found[0][0], found[0][1], found[0][2] + more)]
        for i, name, why in found:
            ctrl = an.div.controlling(i, 1)
            an.report(hazard, f"{name} is not run by all 128 threads of its warpgroup: {why}",
                      [(name, i)] + [("condition", c) for c in ctrl[:1]])


def _not_uniform(an: Analysis, i: int, reach: list | None) -> str | None:
    """Why statement i may run in only part of a warpgroup (None: it runs in whole ones)."""
    if reach is None:
        return _PER_LANE if an.div.stmt_level(i) >= 2 else None
    for w in range(0, len(reach), 128):
        group = reach[w:w + 128]
        runs = [i in t.reached for t in group]
        if any(runs) and len(group) < 128:
            return (f"warpgroup {w // 128} has only {len(group)} threads (the CTA has "
                    f"{len(reach)}; give it a multiple of 128)")
        if any(runs) and not all(runs):
            first = runs.index(not runs[0])
            lo, hi = (w + first, w) if not runs[0] else (w, w + first)
            return (f"in warpgroup {w // 128}, thread {lo} may run it but thread {hi} never "
                    "does (the condition depends on the thread index within the warpgroup)")
        # Reached only through conditions the per-thread analysis cannot evaluate (a loaded
        # value, elect.sync): the divergence levels still see per-lane ones.
        if any(i in t.reached and i not in t.definite for t in group) \
                and an.div.stmt_level(i) >= 2:
            return _PER_LANE
    return None


STRUCTURAL.extend([_warpgroup_uniform, _in_flight])
