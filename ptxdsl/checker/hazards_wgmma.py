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
  The buffer a descriptor names is traced back to a shared symbol when its arithmetic starts
  from one; otherwise the wgmma may read any shared write.
- `wgmma-smem-released`: handing a stage back to its producer (a plain `mbarrier.arrive`, not
  the producer's arrive.expect_tx) while a wgmma that reads shared memory has not been waited
  for. A wgmma counts as waited for once any `wgmma.wait_group` ran after it: with
  wait_group 1 the previous stage is free while the current one still computes (which stage
  an arrive releases is not tracked).
- `setmaxnreg-not-uniform`: the threads of a warpgroup must all run the same setmaxnreg. With
  `.reqntid`/`.maxntid`, `ptxdsl.warpgroups` decides per thread which ones can run it (exact for
  conditions computed from %tid, %laneid, %ntid and constants); whatever the CTA size, a
  setmaxnreg under a per-lane condition (the checker's divergence level 2) is reported.

Facts: ("wgmma", stmt, groups committed after it or None, waited) pending wgmmas;
("wg_touched", stmt) register accesses since the last wgmma.fence; the must-fact
("wg_fenced",) once a wgmma.fence ran; shared writes reuse `smem_dirty`/`smem_fenced` (see
`sync`).
"""

from __future__ import annotations

from typing import Any

import attrs

from ..operands import Addr, NegPred, Reg, Symbol, Vec, registers_in
from ..types import StateSpace
from ..warpgroups import per_thread
from .analysis import PREPARE, STRUCTURAL, Analysis, handles
from .findings import Hazard
from .ops import Op, Role
from .state import State
from .values import Kind

_AGE_CAP = 8        # wait_group takes 0..7: older groups all count as "8 or more"
_TRACE_DEPTH = 16   # how far back a descriptor's arithmetic is followed to its symbol
_HOLDERS = (tuple, list, Vec, Addr, NegPred)   # operand values that may hold registers
_SHARED = (StateSpace.generic, StateSpace.shared, StateSpace.shared_cta,
           StateSpace.shared_cluster)   # the spaces whose writes may land in shared memory


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
    if report:
        for f in _pending(state):
            hit = op.value & _regs_of(an, f[1])
            if hit:
                reg = sorted(hit, key=lambda r: r.name)[0]
                how = ("it was never committed (wgmma.commit_group)" if f[2] is None else
                       "no wgmma.wait_group has retired its group yet")
                an.report(Hazard.WGMMA_REGS_IN_FLIGHT, f"%{reg.name} is accessed while the "
                          f"wgmma.mma_async that owns it may still run: {how}",
                          [("access", op.index), ("wgmma", f[1])])
                break
    return State(state.must, state.may | {("wg_touched", op.index)}, state.tx)


@handles(Role.WGMMA_FENCE)
def fence(an: Analysis, state: State, op: Op, report: bool) -> State:
    may = frozenset(f for f in state.may if f[0] != "wg_touched")
    return State(state.must | {("wg_fenced",)}, may, state.tx)


@handles(Role.WGMMA)
def wgmma(an: Analysis, state: State, op: Op, report: bool) -> State:
    if report:
        _fence_check(an, state, op)
        _smem_check(an, state, op)
    return State(state.must, state.may | {("wgmma", op.index, None, False)}, state.tx)


def _fence_check(an: Analysis, state: State, op: Op) -> None:
    mine = _regs_of(an, op.index)
    for f in sorted((f for f in state.may if f[0] == "wg_touched"), key=lambda f: f[1]):
        hit = _touched(an, f[1]) & mine
        if hit:
            reg = sorted(hit, key=lambda r: r.name)[0]
            an.report(Hazard.WGMMA_NO_FENCE, f"%{reg.name} was accessed by another "
                      "instruction and no wgmma.fence follows before this wgmma.mma_async "
                      "uses it", [("wgmma", op.index), ("access", f[1])])
            return
    if ("wg_fenced",) not in state.must:
        an.report(Hazard.WGMMA_NO_FENCE, "no wgmma.fence runs before this wgmma.mma_async "
                  "on some path (one is needed before the first)", [("wgmma", op.index)])


def _touched(an: Analysis, i: int) -> frozenset[Reg]:
    key = ("wg_touched", i)
    hit = an.cache.get(key)
    if hit is None:
        watched = _watched(an)
        hit = an.cache[key] = frozenset(
            r for r in an.body[i].insn.registers() if r in watched)
    return hit


def _descriptor_roots(an: Analysis, i: int) -> frozenset | None:
    """The shared symbols the wgmma at statement i may read (None: unknown, any)."""
    key = ("wg_roots", i)
    if key in an.cache:
        return an.cache[key]
    insn = an.body[i].insn
    roots: set = set()
    known = True
    for desc in ([insn.a] if not isinstance(insn.a, tuple) else []) + [insn.b_desc]:
        found = _trace(an, desc)
        if found is None:
            known = False
            break
        roots |= found
    out = frozenset(roots) if known else None
    an.cache[key] = out
    return out


def _trace(an: Analysis, desc: Any) -> set | None:
    """Shared symbols whose addresses feed a descriptor's arithmetic (None: none found)."""
    if not isinstance(desc, Reg):
        return None
    found: set = set()
    seen, todo = {desc}, [(desc, 0)]
    while todo:
        r, depth = todo.pop()
        v = an.val(r)
        if v.kind is Kind.addr and isinstance(v.root, Symbol) and v.root.space.is_shared:
            found.add(v.root)
            continue
        if depth >= _TRACE_DEPTH:
            return None
        for d in an.values.defs.get(r, ()):
            for s in an.values.sources_of(d):
                if s not in seen:
                    seen.add(s)
                    todo.append((s, depth + 1))
    return found or None


def _written_root(an: Analysis, i: int) -> Any:
    v = an.val(an.op_at[i].smem)
    return v.root if v.kind is Kind.addr and isinstance(v.root, Symbol) else None


def _smem_check(an: Analysis, state: State, op: Op) -> None:
    roots = _descriptor_roots(an, op.index)
    for tag, why in (("smem_dirty", "no fence.proxy.async.shared::cta follows it"),
                     ("smem_fenced", "it was fenced, but no barrier orders it before the "
                                     "wgmma (other threads wrote it)")):
        for (s, *_) in an.pending(state, tag):
            if an.op_at.get(s) is None or an.op_at[s].role is not Role.SMEM_WRITE:
                continue
            root = _written_root(an, s)
            if roots is not None and root is not None and root not in roots:
                continue
            if tag == "smem_fenced" and an.div.same_single_threads(s, op.index):
                continue
            an.report(Hazard.WGMMA_SMEM_NO_PROXY_FENCE, f"{an.describe(an.op_at[s].smem)} "
                      f"was written through the generic proxy and {why}; the wgmma.mma_async "
                      "reads shared memory through the async proxy",
                      [("wgmma", op.index), ("write", s)], dedupe=(op.index, tag))
            return


@handles(Role.SMEM_WRITE)
def shared_write(an: Analysis, state: State, op: Op, report: bool) -> State:
    if Role.WGMMA not in an.roles or op.space not in _SHARED:
        return state
    return State(state.must, state.may | {("smem_dirty", op.index)}, state.tx)


@handles(Role.WGMMA_COMMIT)
def commit(an: Analysis, state: State, op: Op, report: bool) -> State:
    return state.commit_group("wgmma", _AGE_CAP)


@handles(Role.WGMMA_WAIT)
def wait_group(an: Analysis, state: State, op: Op, report: bool) -> State:
    """wait_group N retires every group but the N most recent; uncommitted wgmmas stay."""
    if not any(f[0] == "wgmma" for f in state.may):
        return state
    may = set()
    for f in state.may:
        if f[0] == "wgmma":
            if f[2] is not None and f[2] >= op.n:
                continue
            f = ("wgmma", f[1], f[2], True)
        may.add(f)
    return State(state.must, frozenset(may), state.tx)


@handles(Role.MBAR_ARRIVE)
def arrive(an: Analysis, state: State, op: Op, report: bool) -> State:
    if report and op.count is None:
        for f in _pending(state):
            if not f[3]:
                how = ("it was never committed" if f[2] is None else
                       "no wgmma.wait_group ran after it")
                an.report(Hazard.WGMMA_SMEM_RELEASED, "this mbarrier.arrive hands shared "
                          f"memory back while a wgmma.mma_async may still read it ({how})",
                          [("arrive", op.index), ("wgmma", f[1])])
                break
    return state


# -- setmaxnreg ----------------------------------------------------------------------------------
def _setmaxnreg_uniform(an: Analysis) -> None:
    sites = [op.index for op in an.ops if op.role is Role.SETMAXNREG]
    if not sites:
        return
    reach = per_thread(an.kernel, sites)
    for i in sites:
        if reach is None:
            if an.div.stmt_level(i) >= 2:
                _report_uniform(an, i, "it runs under a condition that differs between the "
                                "lanes of a warp")
            continue
        for w in range(0, len(reach), 128):
            group = reach[w:w + 128]
            runs = [i in t.reached for t in group]
            if any(runs) and not all(runs):
                first = runs.index(not runs[0])
                lo, hi = (w + first, w) if not runs[0] else (w, w + first)
                _report_uniform(an, i, f"in warpgroup {w // 128}, thread {lo} may run it but "
                                f"thread {hi} never does (the condition depends on the "
                                "thread index within the warpgroup)")
                break
            # Reached only through conditions the per-thread analysis cannot evaluate (a
            # loaded value, elect.sync): the divergence levels still see per-lane ones.
            if any(i in t.reached and i not in t.definite for t in group) \
                    and an.div.stmt_level(i) >= 2:
                _report_uniform(an, i, "it runs under a condition that differs between the "
                                "lanes of a warp")
                break


def _report_uniform(an: Analysis, i: int, why: str) -> None:
    ctrl = an.div.controlling(i, 1)
    an.report(Hazard.SETMAXNREG_NOT_UNIFORM, f"setmaxnreg is not run by all 128 threads of "
              f"its warpgroup: {why}", [("setmaxnreg", i)] + [("condition", c)
                                                                for c in ctrl[:1]])


STRUCTURAL.append(_setmaxnreg_uniform)
