"""Distributed shared memory across a cluster: reads of another CTA's shared memory before a
cluster barrier orders them after that CTA's writes (`dsmem-read-unsynced`), and a CTA that
exits or overwrites its shared memory while its peers may still read it, write it or arrive
on its barriers (`dsmem-released-early`).

Every CTA of a cluster runs the same code, so what one CTA does to a peer's shared memory
(through a `mapa`'d address) its peers do to its own: a remote read of `buf` means peers read
this CTA's `buf`, a remote arrive on `empty[s]` means peers arrive on this CTA's `empty[s]`.
The rules therefore look at one CTA's path and ask whether its remote accesses are settled
by `barrier.cluster.arrive` + `barrier.cluster.wait` where they must be.

An access through an address that does not come from `mapa` (a `.shared::cluster` form of a
local symbol), or from `mapa` with this CTA's own `%cluster_ctarank`, is a local one.
Writes that complete on an mbarrier (st.async, red.async, multicast and peer-to-peer bulk
copies) are ordered by that barrier's wait instead; st.async and red.async need the final
cluster barrier only when no thread of the kernel waits on the barrier they complete on.
"""

from __future__ import annotations

from typing import Any

from ..instructions.arith import Binary
from ..instructions.cluster import Mapa
from ..instructions.move import Cvt, Cvta, Mov
from ..operands import Addr, Reg
from ..types import StateSpace
from .analysis import EXIT_CHECKS, PREPARE, STRUCTURAL, Analysis, handles, keys_match
from .findings import Hazard
from .hazards_bulk import _overlap, _start, ring_step_amount
from .ops import Op, Role, _ev
from .state import State
from .trywait import _spins

CLUSTER = StateSpace.shared_cluster
_SELF = ("sreg", "cluster_ctarank")
# may-facts: a generic write a peer reads remotely (`w`), a remote read of a peer's memory the
# peer may overwrite (`r`), any access that keeps a peer's memory in use (`acc`); the `+`
# forms are those this thread has announced with barrier.cluster.arrive (`w` only with
# .release), which the next barrier.cluster.wait settles.
_W, _R, _ACC = "dsmem_w", "dsmem_r", "dsmem_acc"
_ARRIVED = {_W: _W + "+", _R: _R + "+", _ACC: _ACC + "+"}


def mapa_source(an: Analysis, operand: Any, depth: int = 0) -> tuple[int, Any, Any] | None:
    """(statement, local address, target rank) of the `mapa` an address comes from, through
    mov, cvt and adds (a mapa'd base plus a per-thread offset); None for an address that is
    not a mapa result."""
    x = operand.base if isinstance(operand, Addr) else operand
    if not isinstance(x, Reg) or depth > 32:
        return None
    key = ("mapa_src", id(x))
    hit = an.cache.get(key, key)
    if hit is not key:
        return hit
    out = None
    defs = an.values.defs.get(x, ())
    insn = an.body[defs[0]].insn if len(defs) == 1 else None
    if isinstance(insn, Mapa):
        out = (defs[0], insn.a, insn.b)
    elif isinstance(insn, Mov | Cvt) or isinstance(insn, Cvta) and insn.to \
            and insn.space.is_shared:
        # (`cvta.to.shared` of a mapa'd generic address is its shared::cluster address.)
        out = mapa_source(an, insn.a, depth + 1)
    elif isinstance(insn, Binary) and insn.op == "add":
        out = mapa_source(an, insn.a, depth + 1) or mapa_source(an, insn.b, depth + 1)
    an.cache[key] = out
    return out


def remote(an: Analysis, operand: Any) -> tuple[int, Any, Any] | None:
    """The mapa behind an address that may name another CTA's shared memory (not a mapa with
    this CTA's own rank)."""
    src = mapa_source(an, operand)
    if src is None or (isinstance(src[2], Reg) and an.values.vn(src[2]) == _SELF):
        return None
    return src


def describe(an: Analysis, operand: Any) -> str:
    """`Analysis.describe` of a possibly mapa'd address: the local buffer it maps."""
    src = mapa_source(an, operand)
    if src is None:
        return an.describe(operand)
    return f"{an.describe(src[1])} of another CTA (through mapa)"


def local_key(an: Analysis, operand: Any) -> Any:
    """The memory key, in this CTA's terms, of a (possibly mapa'd) shared address: peers run
    the same code, so the peer's `buf` a remote access names is this CTA's `buf` to them."""
    src = mapa_source(an, operand)
    if src is None:
        return an.val(operand).key
    k = an.val(src[1]).key
    if k is None:
        return None
    reg, off = (operand.base, operand.offset) if isinstance(operand, Addr) else (operand, 0)
    if tuple(an.values.defs.get(reg, ())) != (src[0],) or k[1] is None:
        return (k[0], None)   # mapa'd base plus a computed offset
    return (k[0], k[1] + off)


def cp_async_arrives(an: Analysis) -> bool:
    """cp.async.mbarrier.arrive arrives when copies land (and .noinc changes the count): the
    arrive counts are not modelled where one exists."""
    return any(o.role is Role.MBAR_REMOTE and type(an.body[o.index].insn).__name__
               == "CpAsyncMbarrierArrive" for o in an.ops)


def remote_roots(an: Analysis) -> set[int]:
    """The barrier symbols (by id) other CTAs arrive on through mapa: their arrive counts are
    hazards_remote's to check."""
    hit = an.cache.get("remote_arrive_roots")
    if hit is None:
        hit = an.cache["remote_arrive_roots"] = {
            id(k[0]) for o in an.ops if o.role is Role.MBAR_ARRIVE and o.space is CLUSTER
            for k in [local_key(an, o.mbar)] if k is not None}
    return hit


def _active(an: Analysis) -> bool:
    """Does the kernel access another CTA's shared memory at all (cheap exit elsewhere)?"""
    hit = an.cache.get("dsmem_active")
    if hit is None:
        hit = an.cache["dsmem_active"] = any(
            o.role in (Role.DSMEM_READ, Role.DSMEM_WRITE, Role.MBAR_REMOTE)
            or (o.role is Role.MBAR_ARRIVE and o.space is CLUSTER) for o in an.ops)
    return hit


def _roots(an: Analysis, role: Role, remote_only: bool) -> set[int]:
    """Roots (by id) of the buffers ops of `role` touch (only their remote accesses)."""
    key = ("dsmem_roots", role, remote_only)
    hit = an.cache.get(key)
    if hit is None:
        hit = set()
        for o in an.ops:
            if o.role is role and (not remote_only or remote(an, o.smem) is not None):
                k = local_key(an, o.smem)
                if k is not None:
                    hit.add(id(k[0]))
        an.cache[key] = hit
    return hit


def _waited(an: Analysis, operand: Any, arrive: Op | None = None) -> bool:
    """Does some thread of the kernel wait on the barrier a remote write completes on (then
    the receiving CTA does not go on before the bytes landed)? For a remote `arrive`, the
    wait must be in the same loops: a ring's producer does not wait for the releases of the
    last stages, which is why a ring needs its final cluster barrier."""
    # (hazards_arrive imports this module)
    from .hazards_arrive import _barriers
    k = local_key(an, operand)
    if k is None:
        return False
    span = _local_span(an, operand) if arrive is not None else None
    waits = [o for o in an.ops if o.role is Role.MBAR_WAIT and keys_match(an.key(o, "mbar"), k)
             and not _apart(span, _barriers(an).get(o.index))]
    if arrive is None:
        return bool(waits)
    # A barrier also waited on outside loops, or in a second loop nest, is taken as drained
    # by its owner: CUTLASS's producer waits on every stage's empty barrier once more after
    # its loop (load_tail, unrolled).
    nests = {loops_of(an, o) for o in waits}
    return loops_of(an, arrive) in nests or span is not None and (
        len(nests) > 1 or frozenset() in nests)


def _apart(span: tuple[int, int] | None, offsets: frozenset | None) -> bool:
    """Positive evidence that a wait's barriers (`offsets`) are none of those a mapa'd
    address may name (`span`): a consumer's release of the peer's `empty[s]` is not waited
    on by the consumers' own waits on `full[s]` in the same loop."""
    return span is not None and bool(offsets) and not any(
        span[0] <= x <= span[1] for x in offsets or ())


def _local_span(an: Analysis, operand: Any) -> tuple[int, int] | None:
    """The offsets, into its symbol, of the barrier a mapa'd address names in its CTA
    (`mapa(empty) + 8 * s` or `mapa(empty + 8 * s)`: empty's offset plus the stage's
    bounds); None if unknown."""
    src = mapa_source(an, operand)
    base = an.spans.of(src[1]).folded() if src is not None else None
    past = _past_mapa(an, operand.base if isinstance(operand, Addr) else operand)
    if base is None or base.lo is None or base.hi is None or past is None:
        return None
    off = operand.offset if isinstance(operand, Addr) else 0
    return base.lo + past[0] + off, base.hi + past[1] + off


def _past_mapa(an: Analysis, x: Any, depth: int = 0) -> tuple[int, int] | None:
    """Bounds of what is added to a `mapa` result to make `x` (0 for the result itself)."""
    defs = an.values.defs.get(x, ()) if isinstance(x, Reg) else ()
    if len(defs) != 1 or an.body[defs[0]].guard is not None or depth > 16:
        return None
    insn = an.body[defs[0]].insn
    if isinstance(insn, Mapa):
        return 0, 0
    if isinstance(insn, Mov | Cvt | Cvta):
        return _past_mapa(an, insn.a, depth + 1)
    if isinstance(insn, Binary) and insn.op == "add":
        for m, t in ((insn.a, insn.b), (insn.b, insn.a)):
            inner = _past_mapa(an, m, depth + 1)
            if inner is None:
                continue
            span = an.spans.of(t).folded()
            if span.root is None and span.lo is not None and span.hi is not None:
                return inner[0] + span.lo, inner[1] + span.hi
    return None


def loops_of(an: Analysis, op: Op) -> frozenset:
    """The loops around an op (a wait's own try_wait retry loop left out): a signal and a
    wait in the same loops meet once per phase."""
    b = an.cfg.block_of(op.index)
    return frozenset(h for h, body in an.loops if b in body and not (
        op.role is Role.MBAR_WAIT and _spins(an, op, h, body)))


def _add(state: State, *facts: tuple) -> State:
    return State(state.must, state.may | set(facts), state.tx)


def _pending(an: Analysis, state: State, tags: tuple[str, ...], key: Any,
             kind: str | None = None, meet: tuple[int, bool] | None = None,
             write: Op | None = None) -> int | None:
    """The first pending write/read fact of these tags on memory `key`. `meet` (statement,
    whether it is the remote access): only a fact whose CTAs can meet that statement's (see
    `_meet`). `write`: a local write, which misses a remote read of another stage of a ring
    the read's counter has moved on from (a double buffer, `buf + 256 * (i & 1)`)."""
    for f in sorted((f for f in state.may if f[0] in tags), key=lambda f: f[1]):
        if (kind is None or f[2] == kind) and keys_match(local_key(an, an.op_at[f[1]].smem)
                                                         if f[1] in an.op_at else None, key):
            if meet is not None and not _meet(
                    an, *((meet[0], f[1]) if meet[1] else (f[1], meet[0]))):
                continue
            if write is not None and len(f) > 3 and f[3] is not None and not _overlap(
                    _start(an, write.smem), _start(an, _local(an, an.op_at[f[1]].smem)),
                    f[3]):
                continue
            return f[1]
    return None


def _local(an: Analysis, operand: Any) -> Any:
    """The local address a (possibly mapa'd) address maps."""
    src = mapa_source(an, operand)
    return src[1] if src is not None else operand


def _read_ring(an: Analysis, op: Op) -> tuple | None:
    """The ring term (counter, n, scale) of a remote read's local address, if any: only
    for an address that is the mapa result itself (an offset added after the mapa is not
    in the local address's range)."""
    src = mapa_source(an, op.smem)
    reg, off = (op.smem.base, op.smem.offset) if isinstance(op.smem, Addr) else (op.smem, 0)
    if src is None or off or tuple(an.values.defs.get(reg, ())) != (src[0],):
        return None
    r = _start(an, src[1])
    return r[3] if r is not None else None


def _ring_steps(an: Analysis) -> None:
    """RING_STEP ops at the writes of the counters that index remotely read buffers (where
    hazards_bulk has not placed them), so a read's fact can count how far its ring moved."""
    if Role.DSMEM_READ not in an.roles:
        return
    counters = {id(r[0]): r[0] for o in an.ops if o.role is Role.DSMEM_READ
                for r in [_read_ring(an, o)] if r is not None}
    an.add_ring_steps(counters.values())


PREPARE.append(_ring_steps)


@handles(Role.RING_STEP)
def ring_step(an: Analysis, state: State, op: Op, report: bool) -> State:
    """The remote reads on this counter's ring: their stage is now `moved` behind."""
    if not any(f[0] in (_R, _R + "+") and f[3] is not None for f in state.may):
        return state
    may = set()
    for f in state.may:
        if f[0] in (_R, _R + "+") and f[3] is not None:
            ring = _read_ring(an, an.op_at[f[1]])
            if ring is not None and ring[0] is op.value:
                step = ring_step_amount(an, op, ring[1])
                f = (*f[:3], None if step is None else (f[3] + step) % ring[1])
        may.add(f)
    return State(state.must, frozenset(may), state.tx)


def _meet(an: Analysis, access: int, local: int) -> bool:
    """Can the CTAs whose shared memory the remote access at `access` reaches be among those
    that run the local statement `local`? Not when the ranks say otherwise: CTA 0 gathers
    its peers' partial tiles and then reuses its own buffer, which no CTA reads."""
    from .hazards_remote import rank_sets  # (hazards_remote imports this module)
    sets = rank_sets(an, access, local)
    return sets is None or bool(sets[0] & sets[1])


@handles(Role.SMEM_WRITE)
def local_write(an: Analysis, state: State, op: Op, report: bool) -> State:
    """A write of this CTA's shared memory: `dsmem-released-early` when the cluster's other CTAs may
    still be reading it through mapa (no cluster barrier since their reads)."""
    if not _active(an) or remote(an, op.smem) is not None:
        return state
    key = an.val(op.smem).key
    if key is None:
        return state
    if report:
        s = _pending(an, state, (_R, _R + "+"), key, meet=(op.index, False), write=op)
        if s is not None:
            an.report(Hazard.DSMEM_RELEASED_EARLY, f"this write overwrites "
                      f"{an.describe(op.smem)}, which the other CTAs of the cluster read "
                      "through mapa (as this CTA reads theirs) with no cluster barrier since "
                      "those reads: a peer may still be reading the old data",
                      [("write", op.index), ("remote read", s)])
    if id(key[0]) in _roots(an, Role.DSMEM_READ, True):
        return _add(state, (_W, op.index, "local"))
    return state


def _keeps_peer(an: Analysis, op: Op) -> bool:
    """Does this op reach another CTA's shared memory in a way that keeps that CTA's memory
    in use until a cluster barrier (not one its owner waits for: st.async / red.async on a
    waited barrier, an arrive waited in the same loops)?"""
    if op.role in (Role.DSMEM_READ, Role.DSMEM_WRITE):
        return remote(an, op.smem) is not None
    if op.role is Role.MBAR_ARRIVE:
        return op.space is CLUSTER and remote(an, op.mbar) is not None and \
            not _waited(an, op.mbar, op)
    if op.role is Role.MBAR_REMOTE:
        return type(an.body[op.index].insn).__name__ != "CpAsyncMbarrierArrive" and \
            remote(an, op.mbar) is not None and not _waited(an, op.mbar)
    return False


@handles(Role.DSMEM_WRITE)
def remote_write(an: Analysis, state: State, op: Op, report: bool) -> State:
    """A write into another CTA's shared memory through mapa: recorded until a cluster barrier."""
    if remote(an, op.smem) is None:
        return state
    return _add(state, (_W, op.index, "remote"), (_ACC, op.index))


@handles(Role.DSMEM_READ)
def remote_read(an: Analysis, state: State, op: Op, report: bool) -> State:
    """A read of another CTA's shared memory through mapa: `dsmem-read-unsynced` when the peers'
    writes to it are not yet ordered by a cluster barrier; recorded until one."""
    if remote(an, op.smem) is None:
        return state
    if report:
        s = _pending(an, state, (_W, _W + "+"), local_key(an, op.smem), "local",
                     meet=(op.index, True))
        if s is not None:
            _unsynced(an, op, s, "the other CTAs of the cluster write it here (as this CTA "
                      "writes its own)")
    moved = 0 if _read_ring(an, op) is not None else None
    return _add(state, (_R, op.index, None, moved), (_ACC, op.index))


@handles(Role.SMEM_READ)
def local_read(an: Analysis, state: State, op: Op, report: bool) -> State:
    """A read of this CTA's shared memory that the cluster's other CTAs write through mapa:
    `dsmem-read-unsynced` without a cluster barrier since those writes."""
    if report and _active(an) and any(f[0] in (_W, _W + "+") for f in state.may):
        s = _pending(an, state, (_W, _W + "+"), an.val(op.smem).key, "remote",
                     meet=(op.index, False))
        if s is not None:
            _unsynced(an, op, s, "the other CTAs of the cluster write into it through mapa "
                      "(st, atom or red .shared::cluster, as this CTA writes into theirs)")
    return state


def _unsynced(an: Analysis, op: Op, s: int, who: str) -> None:
    an.report(Hazard.DSMEM_READ_UNSYNCED, f"this read of {describe(an, op.smem)} is not "
              f"ordered after its writes: {who}, and no barrier.cluster.arrive.release + "
              "barrier.cluster.wait.acquire lies between the write and the read",
              [("read", op.index), ("write", s)])


@handles(Role.MBAR_ARRIVE)
def remote_arrive(an: Analysis, state: State, op: Op, report: bool) -> State:
    """A remote arrive keeps the peer's barrier in use, unless the peer waits on it in the
    same loops; a releasing one also publishes this thread's writes to whoever waits on that
    barrier (by symmetry, this CTA's waits on its own): writes into a peer followed by
    `mbarrier.arrive.release.shared::cluster` on its barrier are ordered before the reads
    that follow the peer's wait, and when the peer waits for it, accesses before it are
    over before the peer goes on."""
    if op.space is not CLUSTER or remote(an, op.mbar) is None:
        return state
    waited = not _keeps_peer(an, op)
    key = local_key(an, op.mbar)
    if key is None or _ev(getattr(an.body[op.index].insn, "sem", None)) == "relaxed":
        return state if waited else _add(state, (_ACC, op.index))
    if waited:   # the peer goes on only after this arrive, so after the accesses before it
        state = State(state.must, frozenset(f for f in state.may if f[0] not in (
            _ACC, _ACC + "+", _R, _R + "+")), state.tx)
    else:
        state = _add(state, (_ACC, op.index))
    return _add(state, *(("dsmem_sig", f[1], id(key[0])) for f in state.may
                         if f[0] in (_W, _W + "+")))


@handles(Role.MBAR_WAIT)
def barrier_wait(an: Analysis, state: State, op: Op, report: bool) -> State:
    """A wait on a barrier the writers released their writes to (see `remote_arrive`)."""
    key = an.key(op, "mbar")
    if key is None or not any(f[0] == "dsmem_sig" for f in state.may) or \
            _ev(getattr(an.body[op.index].insn, "sem", None)) == "relaxed":
        return state
    signed = {f[1] for f in state.may if f[0] == "dsmem_sig" and f[2] == id(key[0])}
    return State(state.must, frozenset(f for f in state.may if not (
        f[0] in (_W, _W + "+", "dsmem_sig") and f[1] in signed)), state.tx)


@handles(Role.MBAR_REMOTE)
def remote_signal(an: Analysis, state: State, op: Op, report: bool) -> State:
    """st.async / red.async: writes into a peer that complete on its barrier; with no wait on
    that barrier anywhere, nothing holds the receiver back until they land. (Multicast
    copies are left out: a kernel that loads data waits for it.)"""
    return _add(state, (_ACC, op.index)) if _keeps_peer(an, op) else state


@handles(Role.CLUSTER_ARRIVE)
def cluster_arrive(an: Analysis, state: State, op: Op, report: bool) -> State:
    """barrier.cluster.arrive: the pending accesses are marked arrived (a `.relaxed` arrive releases
    no writes)."""
    if not any(f[0] in _ARRIVED for f in state.may):
        return state
    release = op.field != "relaxed"
    may = frozenset((_ARRIVED[f[0]], *f[1:]) if f[0] in _ARRIVED and (release or f[0] != _W)
                    else f for f in state.may)
    return State(state.must, may, state.tx)


@handles(Role.CLUSTER_BARRIER)
def cluster_wait(an: Analysis, state: State, op: Op, report: bool) -> State:
    """barrier.cluster.wait (or a full cluster barrier): the accesses arrived on before it are
    ordered for every CTA of the cluster."""
    done = _ARRIVED.values()
    if not any(f[0] in done for f in state.may):
        return state
    return State(state.must, frozenset(f for f in state.may if f[0] not in done), state.tx)


def _exit(an: Analysis, state: State, at: int | None) -> None:
    left = sorted(f[1] for f in state.may if f[0] in (_ACC, _ACC + "+"))
    if not left:
        return
    s = left[-1]
    what = an.body[s].render().split(" ")[0]
    an.report(Hazard.DSMEM_RELEASED_EARLY, f"the CTA may exit while the other CTAs of the "
              f"cluster still access its shared memory: this {what} reaches another CTA's "
              "(as theirs reach this one's), and no barrier.cluster.arrive + "
              "barrier.cluster.wait follows it before the exit",
              [("access", s), ("exit", at)], dedupe=("dsmem-exit", s))


EXIT_CHECKS.append(_exit)


def early_exits(an: Analysis) -> None:
    """A CTA that leaves on a path of its own, branching on its rank, while another rank's
    path still reaches its shared memory: `if rank != 0: ret` before CTA 0 reads the peers'
    partial tiles. Its exit must come after one more cluster barrier than that access: the
    barrier the accessing CTA reaches after it. (The CTAs' own paths are checked by `_exit`;
    here the ranks running the exit and the access differ.) Counted where no loop holds a
    cluster barrier, with the cluster and CTA shape declared."""
    from .hazards_remote import rank_sets  # (hazards_remote imports this module)
    sites = [o for o in an.ops if _keeps_peer(an, o)]
    if not sites or not any(o.role is Role.CLUSTER_BARRIER for o in an.ops) or any(
            o.role in (Role.CLUSTER_BARRIER, Role.CLUSTER_ARRIVE) and loops_of(an, o)
            for o in an.ops):
        return
    waits = _count(an, Role.CLUSTER_BARRIER, min)
    arrives = _count(an, Role.CLUSTER_ARRIVE, max)
    for block in an.cfg.blocks:
        if not block.exits or not block.stmts:
            continue
        at = block.exit_stmt if block.exit_stmt is not None else block.stmts[-1]
        for o in sites:
            sets = rank_sets(an, o.index, at)
            own = rank_sets(an, o.index, o.index)
            if sets is None or own is None or own[1] & sets[1] or not sets[0] & sets[1]:
                continue
            if waits(at) <= arrives(o.index):
                an.report(Hazard.DSMEM_RELEASED_EARLY, f"CTA {min(sets[0] & sets[1])} may "
                          "exit here while another CTA of the cluster still accesses its "
                          "shared memory (this access, which runs in other ranks than the "
                          "exit): the exit is not after a cluster barrier that the access "
                          "comes before", [("exit", at), ("access", o.index)],
                          dedupe=("dsmem-early-exit", at))
                break


def _splits_cluster(vn: Any, dims: tuple) -> bool:
    """Can a CTA-uniform value differ between the CTAs of one cluster (it reads %ctaid along
    a dimension the cluster spans)? %clusterid, %nctaid and parameters are the same in every
    CTA of a cluster; branches on the rank are `early_exits`' (it evaluates them per rank)."""
    if not isinstance(vn, tuple) or not vn:
        return False
    if vn[0] == "sreg":
        name = str(vn[1])
        if name.startswith("ctaid."):
            axis = "xyz".find(name[-1])
            return axis < 0 or axis >= len(dims) or dims[axis] > 1
        return False
    return any(_splits_cluster(x, dims) for x in vn[1:] if isinstance(x, tuple))


def _constant_target(an: Analysis, op: Op) -> bool:
    src = mapa_source(an, op.smem if op.smem is not None else op.mbar)
    return src is None or an.const(src[2]) is not None


def split_exits(an: Analysis) -> None:
    """A CTA that leaves under a condition other CTAs of its cluster may not share (`if
    ctaid.x >= n: ret`, a per-CTA bounds check: with n not a multiple of the cluster, one
    CTA of a cluster leaves and the other stays), while the CTAs that stay still access its
    shared memory: the exit must come after one more cluster barrier than those accesses
    (as in `early_exits`, for conditions on values it cannot evaluate per rank)."""
    from .cfg import guard_polarity
    from .hazards_remote import _reach  # (hazards_remote imports this module)
    dims = tuple(getattr(an.kernel, "reqnctapercluster", None) or ())
    # Accesses to a constant rank are left out: under a bounds check (`ctaid.x >= n`) the
    # CTA of rank 0 is the last of its cluster to leave.
    sites = [o for o in an.ops if _keeps_peer(an, o) and not _constant_target(an, o)]
    if not dims or not sites or any(
            o.role in (Role.CLUSTER_BARRIER, Role.CLUSTER_ARRIVE) and loops_of(an, o)
            for o in an.ops):
        return
    waits = _count(an, Role.CLUSTER_BARRIER, min)
    arrives = _count(an, Role.CLUSTER_ARRIVE, max)
    for blk in an.cfg.blocks:
        if blk.branch is None or blk.taken is None or blk.fall is None or \
                blk.taken == blk.fall:
            continue
        pred, _ = guard_polarity(an.body[blk.branch].guard)
        if an.values.level(pred) or not _splits_cluster(an.values.vn(pred), dims):
            continue
        sides = (_reach(an, blk.taken, blk.id), _reach(an, blk.fall, blk.id))
        for mine, other in (sides, sides[::-1]):
            for x in sorted(mine - other):
                ex = an.cfg.blocks[x]
                if not ex.exits or not ex.stmts:
                    continue
                at = ex.exit_stmt if ex.exit_stmt is not None else ex.stmts[-1]
                hit = next((o for o in sites if an.cfg.block_of(o.index) in other - mine
                            and waits(at) <= arrives(o.index)), None)
                if hit is not None:
                    an.report(Hazard.DSMEM_RELEASED_EARLY, "the CTA may exit here while "
                              "another CTA of its cluster, for which the condition leading "
                              "here differs (it reads %ctaid), still "
                              "accesses its shared memory (this access): the exit is not "
                              "after a cluster barrier that the access comes before; guard "
                              "on the cluster (%clusterid) or stay until the last cluster "
                              "barrier", [("exit", at), ("access", hit.index)],
                              dedupe=("dsmem-early-exit", at))


STRUCTURAL.append(split_exits)


def _count(an: Analysis, role: Role, pick: Any) -> Any:
    """statement -> the fewest (`pick=min`) or most (`max`) ops of `role` on a path from the
    kernel's entry to it (no loop holds one, so the counts are finite)."""
    blocks = an.cfg.blocks
    per = [sum(1 for o in an.by_block[b.id] if o.role is role) for b in blocks]
    at_entry: dict[int, int] = {0: 0}
    todo = [0]
    while todo:
        b = todo.pop()
        out = at_entry[b] + per[b]
        for s in an.cfg.succs(b):
            if s >= len(blocks):
                continue   # the kernel's exit
            if s not in at_entry or pick(at_entry[s], out) != at_entry[s]:
                at_entry[s] = out if s not in at_entry else pick(at_entry[s], out)
                todo.append(s)

    def count(i: int) -> int:
        b = an.cfg.block_of(i)
        return at_entry.get(b, 0) + sum(1 for o in an.by_block[b] if o.role is role
                                        and o.index < i)
    return count


STRUCTURAL.append(early_exits)
