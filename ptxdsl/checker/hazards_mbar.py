"""mbarrier hazards: use before init, use without publishing the init (to the other threads,
the async proxy, or the cluster: a remote arrive on a peer's copy of a barrier this kernel
initialises needs the init published cluster-wide first), expect_tx byte counts that differ
from what TMA delivers, wait loops whose parity never changes, and waits on a
.shared::cluster address. (A first wait whose parity is off by one phase: `hazards_phase`.)
"""

from __future__ import annotations

import math
from typing import Any

from ..instructions.arith import Binary
from ..instructions.move import Cvt, Mov
from ..operands import Addr, Reg, Symbol
from ..statements import Param
from ..types import StateSpace
from .analysis import EXIT_CHECKS, LATCH_CHECKS, STRUCTURAL, Analysis, handles, keys_match
from .assume import assuming, edge_fact
from .cfg import guard_polarity, natural_loops
from .findings import Hazard
from .hazards_arrive import _same_barriers
from .hazards_cluster import local_key
from .hazards_remote import multicast_bytes, remote_bytes
from .hazards_txrank import announced_remotely, cluster_fed, phase_bytes
from .maps import declare_box
from .ops import Op, Role
from .published import published
from .state import State, add_tx
from .trywait import _spins, _varies
from .values import Kind

CLUSTER = StateSpace.shared_cluster
_PENDING_INIT = ("init_nosync", "init_noasync", "init_nocluster", "init_fenced")


def _inits_of(an: Analysis, key) -> list[int]:
    return [o.index for o in an.ops if o.role is Role.MBAR_INIT
            and keys_match(an.key(o, "mbar"), key)]


def _use(an: Analysis, state: State, op: Op, how: str) -> None:
    """Report an mbarrier use (`how`: 'thread', 'tma' or 'cluster') that may precede the
    init, or that relies on an init not yet made visible to whoever uses it."""
    key = an.key(op, "mbar")
    root = key[0] if key is not None else None
    if not (isinstance(root, Symbol) and root.space.is_shared):
        if how == "cluster":
            _peer_use(an, state, op)
        return   # a barrier passed in or computed (e.g. another CTA's): its init is elsewhere
    i = op.index
    if not any(f[0] == "init" and keys_match(f[1], key) for f in state.must) \
            and not published(an, key, i) and not _init_loop_skipped(an, key, i):
        what = an.describe(op.mbar)
        inits = _inits_of(an, key)
        where = ("is never initialised in this kernel" if not inits else
                 "may not be initialised yet: some path reaches this use without passing "
                 "its mbarrier.init")
        an.report(Hazard.MBAR_UNINIT, f"{op.role.value} on the mbarrier at {what}, which "
                  f"{where}", [("use", i)] + [("init", s) for s in inits[:1]])
        return
    unsynced = _unsynced(an, state, op, key, how)
    if unsynced is not None:
        s, why = unsynced
        an.report(Hazard.MBAR_INIT_UNSYNCED, why.format(use=op.role.value,
                                                        what=an.describe(op.mbar)),
                  [("use", i), ("init", s)])


def _peer_use(an: Analysis, state: State, op: Op) -> None:
    """A remote use of a peer CTA's barrier (`mapa` of a local barrier address): the peer
    runs this kernel's init of the same barrier, so the init this CTA has not yet published
    cluster-wide (fence.mbarrier_init.release.cluster, then a cluster barrier) is the peer's
    too, and the peer's barrier may not be initialised when this arrive reaches it. Only
    with a cluster of several CTAs declared (`.reqnctapercluster`): CUTLASS publishes the
    init with a cluster barrier only when the launch's cluster has several CTAs, and in a
    cluster of one the "remote" barrier is the CTA's own, published by its `bar.sync`."""
    size = _cluster_size(an)
    key = local_key(an, op.mbar) if size is not None and size > 1 else None
    if key is None or not isinstance(key[0], Symbol) or not key[0].space.is_shared:
        return
    for tag in ("init_nocluster", "init_fenced"):
        for (s,) in an.pending(state, tag):
            if keys_match(an.key(an.op_at[s], "mbar"), key):
                need = ("a cluster barrier after fence.mbarrier_init" if tag == "init_fenced"
                        else "fence.mbarrier_init.release.cluster and a cluster barrier")
                an.report(Hazard.MBAR_INIT_UNSYNCED, f"{op.role.value} on another CTA's "
                          f"mbarrier at {an.describe(op.mbar)} (mapa of a barrier each CTA "
                          f"initialises here) without {need} after the init: the peer's "
                          "init may not be visible to the cluster yet", [("use", op.index),
                                                                          ("init", s)])
                return


def _init_loop_skipped(an: Analysis, key, i: int) -> bool:
    """Is every init of the barrier inside a loop that also uses it (`mbar-reinit`), and the
    use at statement i after that loop? Then it is uninitialised only where the loop ran no
    trip: the same mistake as the re-init (the init belongs before the loop), reported once,
    as mbar-reinit."""
    inits = _inits_of(an, key)
    if not inits or not an.loops:
        return False
    for s in inits:
        in_loop = [[o for o in an.ops if o.mbar is not None and o.role is not Role.MBAR_INIT
                    and an.cfg.block_of(o.index) in body and keys_match(an.key(o, "mbar"), key)]
                   for _h, body in an.loops
                   if an.cfg.block_of(s) in body and an.cfg.block_of(i) not in body]
        # (a loop that also invalidates it re-initialises it rightly: no mbar-reinit)
        loops = [ops for ops in in_loop
                 if ops and not any(o.role is Role.MBAR_INVAL for o in ops)]
        if not loops:
            return False
    return True


def _unsynced(an: Analysis, state: State, op: Op, key, how: str) -> tuple[int, str] | None:
    """The first init this use relies on that was not published to it: (init, message)."""
    if not any(f[0] in _PENDING_INIT for f in state.may):
        return None
    for (s,) in an.pending(state, "init_nosync"):
        if keys_match(an.key(an.op_at[s], "mbar"), key) and not an.div.same_threads(s,
                                                                                  op.index):
            return s, ("{use} on the mbarrier at {what} by threads that did not initialise "
                       "it, with no bar.sync between the init and this use")
    if how in ("tma", "cluster"):
        for (s,) in an.pending(state, "init_noasync"):
            if keys_match(an.key(an.op_at[s], "mbar"), key):
                return s, ("the TMA unit may not see the init of the mbarrier at {what} yet: "
                           "no bar.sync, fence.proxy.async or fence.mbarrier_init between the "
                           "init and this copy")
    if how == "cluster":
        for tag in ("init_nocluster", "init_fenced"):
            for (s,) in an.pending(state, tag):
                if keys_match(an.key(an.op_at[s], "mbar"), key):
                    need = ("a cluster barrier after fence.mbarrier_init" if tag == "init_fenced"
                            else "fence.mbarrier_init.release.cluster and a cluster barrier")
                    return s, ("cluster-wide use (multicast or remote) of the mbarrier at "
                               "{what} without " + need + " after its init")
    return None


@handles(Role.MBAR_INIT)
def init(an: Analysis, state: State, op: Op, report: bool) -> State:
    """mbarrier.init: the barrier is initialised (on the paths where the statement runs); until a
    fence and a barrier, the init is not visible to the async proxy, the cluster, or (when only
    some threads ran it) the other threads."""
    key = an.key(op, "mbar")
    if key is None:
        return state
    i = op.index
    may = {("init_noasync", i), ("init_nocluster", i)}
    if an.div.stmt_tokens(i):   # done by some threads only: the others need a barrier
        may.add(("init_nosync", i))
    must = state.must | {("init", key)} if an.runs_somewhere(i) else state.must
    return State(must, state.may | may, state.tx).tx_set(key, None)


@handles(Role.MBAR_INVAL)
def inval(an: Analysis, state: State, op: Op, report: bool) -> State:
    """mbarrier.inval: `mbar-uninit` / `mbar-init-unsynced` for the use itself, then the barrier is
    no longer initialised."""
    key = an.key(op, "mbar")
    if report:
        _use(an, state, op, "thread")
    must = frozenset(f for f in state.must if not (f[0] == "init" and keys_match(f[1], key)))
    return State(must, state.may, state.tx)


@handles(Role.MBAR_ARRIVE, Role.MBAR_EXPECT_TX, Role.MBAR_COMPLETE_TX)
def arrive(an: Analysis, state: State, op: Op, report: bool) -> State:
    """An arrive, expect_tx or complete_tx: `mbar-uninit` / `mbar-init-unsynced`; adds its
    transaction bytes to the phase's count (a note when the count is known only at run time)."""
    if report:
        _use(an, state, op, "cluster" if op.space is CLUSTER else "thread")
    key = an.key(op, "mbar")
    if key is None or op.count is None:
        return state
    n = an.const(op.count)
    if n is None and report:
        an.note("expect-tx", f"the byte count of this {op.role.value} is computed at run "
                "time: it is not compared with the bytes the copies deliver",
                [(op.role.value.split(".")[-1], op.index)])
    got = add_tx(state.tx_get(key), op.index, *((0, n) if op.role is Role.MBAR_COMPLETE_TX
                                                else (n, 0)))
    return state.tx_set(key, got)


@handles(Role.TMA_LOAD, Role.BULK_LOAD)
def load(an: Analysis, state: State, op: Op, report: bool) -> State:
    """A TMA or bulk load that completes on an mbarrier: `mbar-uninit` / `mbar-init-unsynced` for
    the TMA unit's (or the cluster's) use of it; adds the bytes it delivers to the phase's count
    (a note when the box size is unknown)."""
    if report:
        remote = op.space is CLUSTER or an.val(op.mbar).space is CLUSTER
        _use(an, state, op, "cluster" if op.multicast or remote else "tma")
    key = an.key(op, "mbar")
    if key is None:
        return state
    if op.role is Role.TMA_LOAD:
        info = an.map_info(op.map)
        n = info.box_bytes if info is not None else None
        if n is None and report:
            _unknown_box(an, op)
    else:
        n = an.const(op.count)
    if op.multicast and n is not None:
        n = _multicast_bytes(an, op, n, report)
    return state.tx_set(key, add_tx(state.tx_get(key), op.index, 0, n))


def _unknown_box(an: Analysis, op: Op) -> None:
    """The note, shown by the command line without --notes, that a kernel's expect_tx counts
    are not compared with the bytes its TMA loads deliver: which maps' boxes are unknown, and
    how to declare them."""
    if "box-note" in an.cache:
        return
    an.cache["box-note"] = True
    params: list[Param] = []
    others: list[str] = []     # maps not traced to a parameter: their PTX operands
    for o in an.ops:
        if o.role is Role.TMA_LOAD and o.mbar is not None:
            info = an.map_info(o.map)
            if info is None or info.box_bytes is None:
                root = an.classify_map(o.map)[2]
                if isinstance(root, Param):
                    if root not in params:
                        params.append(root)
                else:
                    text = o.map.render() if hasattr(o.map, "render") else repr(o.map)
                    if text not in others:
                        others.append(text)
    kname = an.kernel.name
    if params:
        how = declare_box(params[0], kname)
    else:
        how = ("a map's box is known from the parameter it comes from or from constant "
               "tensormap.replace values")
    what = ", ".join([p.name for p in params] + (
        [f"the maps at {', '.join(sorted(others))} (not traced to a parameter)"]
        if others else []))
    an.note("expect-tx", f"expect_tx bytes of {kname}: not checked, no box size known for "
            f"{what}; declare it: {how} [docs/hazards.md: Context]",
            [("load", op.index)], dedupe="box", unchecked=True)


def _multicast_bytes(an: Analysis, op: Op, n: int, report: bool) -> int | None:
    """What this CTA's barrier receives from a multicast load when every CTA of the cluster
    runs the same code (no branch on which CTA it is): every CTA issues the load, and each
    delivers one slice to every CTA of the mask. So a CTA of the mask receives a slice from
    each CTA of the cluster (the mask's CTAs when the cluster size is not declared), and a
    CTA outside it none: a mask that leaves out a CTA of a declared cluster is reported.
    A kernel that branches on the rank (or guards a barrier operation on it), or computes
    the mask from it, is counted per rank (`hazards_remote.multicast_bytes`). Otherwise
    unknown."""
    mask = an.const(op.mask)
    if mask is None or mask <= 0 or _branches_on_cta(an):
        got = multicast_bytes(an, op, n)   # per CTA rank, where the ranks are known
        if got is not None:
            return got
        if report:
            an.note("expect-tx", "a multicast load's ctaMask is not a constant, or the "
                    "kernel branches on which CTA it is: the bytes the other CTAs deliver "
                    "are unknown and its count is not checked", [("load", op.index)])
        return None
    size = _cluster_size(an)
    if size is None:
        return n * bin(mask).count("1")
    left_out = [r for r in range(size) if not mask >> r & 1]
    if left_out:
        if report:
            an.report(Hazard.EXPECT_TX_MISMATCH, f"every CTA of the {size}-CTA cluster runs "
                      f"this multicast load with ctaMask {mask:#b}, which leaves out CTA "
                      f"{', '.join(map(str, left_out))}: that CTA's barrier gets none of the "
                      "bytes its expect_tx announces and its wait never ends, while each CTA "
                      f"of the mask receives {size} slices", [("load", op.index)])
        return None
    return n * size


def _cluster_size(an: Analysis) -> int | None:
    """The CTAs of the kernel's cluster when `.reqnctapercluster` fixes them."""
    dims = getattr(an.kernel, "reqnctapercluster", None)
    return math.prod(dims) if dims else None


_CTA_SREGS = ("ctaid", "cluster_ctarank", "cluster_ctaid", "clusterid", "nctaid")


def _branches_on_cta(an: Analysis) -> bool:
    """Do the CTAs of a cluster run different barrier operations: a branch on which CTA it
    is, or a guard on it of a statement naming a barrier (`@p cp.async.bulk...multicast`
    with `p` = `rank == 0` is the branch `@!p bra` around the copy, and is counted per rank
    the same way)?"""
    hit = an.cache.get("cta_branch")
    if hit is None:
        def depends(vn) -> bool:
            if not isinstance(vn, tuple) or not vn:
                return False
            if vn[0] == "sreg":
                return str(vn[1]).startswith(_CTA_SREGS)
            return any(depends(x) for x in vn[1:] if isinstance(x, tuple))
        guards = [an.body[b.branch].guard for b in an.cfg.blocks if b.branch is not None]
        guards += [an.body[o.index].guard for o in an.ops if o.mbar is not None]
        hit = an.cache["cta_branch"] = any(
            depends(an.values.vn(guard_polarity(g)[0])) for g in guards if g is not None)
    return hit


@handles(Role.MBAR_WAIT)
def wait(an: Analysis, state: State, op: Op, report: bool) -> State:
    """A wait: `wait-cluster-space` on a .shared::cluster address, `mbar-uninit` /
    `mbar-init-unsynced`, and `expect-tx-mismatch` when the bytes announced and the bytes
    delivered in the phase are both known and differ (per CTA rank for a cluster-fed barrier);
    the loads it waits for no longer read their maps."""
    key = an.key(op, "mbar")
    if report:
        v = an.val(op.mbar)
        if op.space is CLUSTER or v.space is CLUSTER:
            an.report(Hazard.WAIT_CLUSTER_SPACE, f"the wait names {an.describe(op.mbar)}, a "
                      ".shared::cluster address: only the local CTA's barrier can be waited "
                      "on", [("wait", op.index), ("address", an.origin_site(op.mbar))])
        _use(an, state, op, "thread")
    if key is None:
        return state
    tx = state.tx_get(key)
    known = tx is not None and tx[0] is not None and tx[1] is not None
    # A path shows only its own CTA's multicast loads and announcements: with loads behind a
    # branch on the rank, or a peer's expect_tx through mapa, part of the phase is on no path
    # of this CTA's.
    if report and cluster_fed(an, key, _branches_on_cta(an)) and (
            not known or _rank_multicast(an, key) or announced_remotely(an, key)):
        _per_rank(an, op, key)
        report = False
    if tx is not None:
        if report and known:
            _compare(an, op, key, tx)
        state = state.tx_set(key, (tx[0], tx[1], tx[2], True))
    gone = {f for f in state.may if f[0] == "inflight"
            and keys_match(an.key(an.op_at[f[1]], "mbar"), key)}
    return State(state.must, state.may - gone, state.tx) if gone else state


def _compare(an: Analysis, op: Op, key: Any, tx: Any) -> None:
    """The phase a wait passes, as its own path counts it (`tx`: both counts known)."""
    exp, got = tx[0], tx[1]
    assert exp is not None and got is not None
    # Bytes a peer CTA sends (st.async, red.async, a copy from its shared memory) through a
    # mapa'd address of this barrier count too (hazards_remote).
    peers = remote_bytes(an, key, op) if _foreign(an, key) else [(0, frozenset())]
    bad = next(((n, s) for n, s in peers or () if got + n != exp), None)
    if peers is None and cluster_fed(an, key, _branches_on_cta(an)):
        _per_rank(an, op, key, tx)
    elif peers is None and exp > got:
        an.note("expect-tx", "bytes may reach this kernel's barriers from other CTAs "
                "(st.async, red.async or a copy from a peer's shared memory), in numbers not "
                "known per CTA: a count above this CTA's own deliveries is not checked",
                [("wait", op.index)])
    elif peers is None and exp != got:
        _mismatch(an, op, tx)
    elif bad is not None:
        _mismatch(an, op, (exp, got + bad[0], tx[2] | bad[1], tx[3]))


def _per_rank(an: Analysis, op: Op, key: Any, tx: Any = None) -> None:
    """The phase `op` waits for, counted per CTA rank from every site of the kernel
    (`hazards_txrank`): for a wait whose own path does not show the whole phase (the
    producer warp announces, a rank branch issues a multicast load, a peer announces through
    mapa). Unknown: a note; with this path's own accounting `tx`, more bytes delivered on
    the path than announced is still wrong, unless a peer announces on it too."""
    ranks = phase_bytes(an, key, op)
    if ranks is None:
        if tx is not None and tx[0] is not None and tx[1] is not None and \
                tx[0] < tx[1] and not announced_remotely(an, key):
            _mismatch(an, op, tx)
            return
        an.note("expect-tx", "the bytes of this barrier's phase come from several CTAs of "
                "the cluster or from sites off this wait's path (a producer warp's expect_tx, "
                "a multicast load behind a branch on the rank, an expect_tx through mapa), "
                "and a count, box, condition or rank is not known per CTA: not checked",
                [("wait", op.index)])
        return
    bad = next(((r, ph) for r, ph in ranks if ph[0] != ph[1]), None)
    if bad is None:
        return
    r, (exp, got, told, sent) = bad
    effect = ("the wait can pass before all the data has landed" if exp < got else
              "the phase never completes and the wait hangs")
    if not exp:
        effect = "with no bytes announced the phase completes before the data lands"
    size = _cluster_size(an)
    an.report(Hazard.EXPECT_TX_MISMATCH, f"in CTA {r} of the {size}-CTA cluster, expect_tx "
              f"announces {exp} bytes a phase on the mbarrier at {an.describe(op.mbar)}, but "
              f"the loads and st.async / red.async of every CTA (each thread that runs them, "
              f"to the rank it names) deliver {got} bytes: {effect}",
              [("expect_tx", s) for s in sorted(told)] +
              [(_DELIVERS.get(an.op_at[s].role, "load"), s) for s in sorted(sent)] +
              [("wait", op.index)], dedupe=("tx", told | sent))


def _rank_multicast(an: Analysis, key: Any) -> bool:
    """Does a multicast load on barrier `key` run in a kernel that branches on its CTA?"""
    return _branches_on_cta(an) and any(o.multicast and keys_match(an.key(o, "mbar"), key)
                                        for o in an.ops)


def _foreign(an: Analysis, key: Any = None) -> bool:
    """May this barrier (any of the kernel's with `key` None) receive bytes this CTA's own
    path does not show (st.async, red.async, copies from a peer CTA's shared memory)? Then an
    open phase is not wrong. A signal whose barrier address traces (through mapa, mov, add,
    cvt, cvta) to a symbol reaches that symbol's barriers only."""
    roots = an.cache.get("foreign_roots", an)
    if roots is an:
        sources = [o for o in an.ops if o.role is Role.MBAR_REMOTE or (
            o.role is Role.BULK_LOAD and o.space is CLUSTER)]
        traced = {_signal_root(an, o.mbar) for o in sources}
        roots = an.cache["foreign_roots"] = (
            None if None in traced else frozenset(id(r) for r in traced))
    if roots is None:
        return True   # some signal's barrier is unknown: it may be any of them
    if key is None:
        return bool(roots)
    return id(key[0]) in roots


def _signal_root(an: Analysis, operand: Any) -> Symbol | None:
    """The shared symbol a (possibly mapa'd) barrier address is computed from, or None."""
    from ..instructions.cluster import Mapa
    from ..instructions.move import Cvta
    x = operand.base if isinstance(operand, Addr) else operand
    for _ in range(32):
        if isinstance(x, Symbol):
            return x if x.space.is_shared else None
        if not isinstance(x, Reg):
            return None
        defs = an.values.defs.get(x, ())
        if len(defs) != 1:
            return None
        insn = an.body[defs[0]].insn
        if isinstance(insn, Mapa | Mov | Cvt | Cvta):
            x = insn.a
        elif isinstance(insn, Binary) and insn.op == "add":
            if an.const(insn.b) is not None:
                x = insn.a
            elif an.const(insn.a) is not None:
                x = insn.b
            else:   # base + run-time offset: the base is the one whose value is an address
                a, b = an.val(insn.a), an.val(insn.b)
                x = insn.a if a.root is not None else insn.b if b.root is not None else None
        else:
            return None
        if isinstance(x, Addr):
            x = x.base
    return None


def _open_phases(an: Analysis, state: State, at: int | None, where: str,
                 body: frozenset | None = None) -> None:
    """A thread's announced and delivered bytes on each barrier, compared where its part of
    the phase ends without a wait in its own path: the end of a loop iteration, or the exit
    (the producer of a warp-specialized kernel never waits on the full barriers)."""
    if not state.tx:
        return
    for key, tx in state.tx:
        if _foreign(an, key):
            an.note("expect-tx", "bytes may reach this kernel's barriers from other CTAs "
                    "(st.async, red.async or a copy from a peer's shared memory): byte counts "
                    "are compared only at waits")
            continue
        exp, got, sites, waited = tx
        if waited or exp is None or got is None or exp == got or not got:
            continue
        if body is not None and not an.touched(sites, body):
            continue   # announced before the loop: compared at the exit
        op = next((an.op_at[s] for s in sorted(sites) if s in an.op_at
                   and an.op_at[s].mbar is not None), None)
        if op is None:
            continue
        # A thread that only delivers may rely on another thread's expect_tx (the bytes are
        # then compared at the waits); with no expect_tx on that barrier anywhere, the phase
        # completes on its arrivals alone, before the data lands.
        if not exp and _announced(an, op):
            continue
        _mismatch(an, op, tx, end=(where, at))


def _announced(an: Analysis, op: Op) -> bool:
    """Does some expect_tx (or arrive.expect_tx) of the kernel name op's barrier?"""
    return any((o.role is Role.MBAR_EXPECT_TX or (o.role is Role.MBAR_ARRIVE
                                                  and o.count is not None))
               and _same_barriers(an, o, op) for o in an.ops)


def _latch(an: Analysis, state: State, at: int | None, body: frozenset) -> None:
    _open_phases(an, state, at, "iteration end", body)


def _exit(an: Analysis, state: State, at: int | None) -> None:
    _open_phases(an, state, at, "exit")


LATCH_CHECKS.append(_latch)
EXIT_CHECKS.append(_exit)


_DELIVERS = {Role.MBAR_COMPLETE_TX: "complete_tx", Role.MBAR_REMOTE: "peer store"}


def _mismatch(an: Analysis, op: Op, tx, end: tuple[str, int | None] | None = None) -> None:
    exp, got, sites, _ = tx
    effect = ("the wait can pass before all the data has landed" if exp < got else
              "the phase never completes and the wait hangs")
    if not exp:
        effect = ("with no bytes announced the phase completes on its arrivals alone, "
                  "before the data lands (arrive.expect_tx, not a plain arrive)")
    announced, delivered = [], []
    for s in sorted(sites):
        o = an.op_at.get(s)
        if o is not None and o.role in (Role.TMA_LOAD, Role.BULK_LOAD, Role.MBAR_COMPLETE_TX,
                                        Role.MBAR_REMOTE):
            delivered.append((_DELIVERS.get(o.role, "load"), s))
        else:
            announced.append(("expect_tx", s))
    # The expect_tx leads: it is the count to fix (or, with none at all, the first load).
    last = [("wait", op.index)] if end is None else [end] if end[1] is not None else []
    phase = "in this phase" if end is None else (
        "in one loop iteration" if end[0] == "iteration end" else "before the kernel exits")
    peers = (" (with the st.async / red.async bytes every CTA of the cluster sends)"
             if any(r == "peer store" for r, _ in delivered) else "")
    an.report(Hazard.EXPECT_TX_MISMATCH, f"expect_tx announces {exp} bytes on the mbarrier at "
              f"{an.describe(op.mbar)}, but the copies completing on it {phase}{peers} "
              f"deliver {got} bytes: {effect}", announced + delivered + last,
              dedupe=("tx", frozenset(sites)))


def parity_loops(an: Analysis) -> None:
    """`wait-parity-constant`: a parity wait in a loop whose parity is the same on every trip (the
    second trip passes at once, or never)."""
    waits = [o for o in an.ops if o.role is Role.MBAR_WAIT and o.parity is not None]
    if not waits:
        return
    loops_of: dict[int, list[tuple[int, frozenset]]] = {}
    for header, body in natural_loops(an.cfg):
        for b in body:
            loops_of.setdefault(b, []).append((header, body))
    reinit = an.cache.get("reinit", set())
    for op in waits:
        key = an.key(op, "mbar")
        if key is not None and id(key[0]) in reinit:
            continue   # reported as the re-init it is (hazards_arrive)
        for header, body in loops_of.get(an.cfg.block_of(op.index), ()):
            if _spins(an, op, header, body):
                continue
            c = an.const(op.parity)
            if c is None and _varies(an, op.parity, body):
                continue
            if c is not None and _both_parities(an, op, body, waits):
                continue
            if c is None and an.values.level(op.parity) > 0 and _both_values(an, op.parity):
                an.note("wait-parity-constant", "the parity of a wait repeated by a loop is "
                        "fixed in each thread but differs between warps (consumers taking "
                        "turns on one barrier, as CUTLASS's ping-pong warpgroups do): each "
                        "one's phases are right only if the others consume the phases "
                        "between, which the checker does not follow",
                        [("wait", op.index), ("parity", an.def_site(op.parity))])
                continue
            what = f"parity {c}" if c is not None else (
                f"parity %{op.parity.name}" if isinstance(op.parity, Reg) else "parity")
            first = an.cfg.blocks[header].stmts
            an.report(Hazard.WAIT_PARITY_CONSTANT, f"the wait on the mbarrier at "
                      f"{an.describe(op.mbar)} is repeated by a loop but always waits for "
                      f"{what}: after the first phase it passes at once (the phase it names "
                      "is the previous one) or waits for a phase that never comes",
                      [("wait", op.index), ("loop", first[0] if first else None),
                       ("parity", an.def_site(op.parity))], dedupe=op.index)
            break


def _both_values(an: Analysis, parity: Any) -> bool:
    """May the parity be 0 in some threads and 1 in others? Every write a constant, both
    among them, or a value of one thread index bounded to [0, 1] with both reached."""
    writes = an.values.defs.get(parity, ())
    consts = {an.const(an.body[i].insn.a) if isinstance(an.body[i].insn, Mov) else None
              for i in writes}
    if writes and None not in consts:
        return {0, 1} <= {x & 1 for x in consts if x is not None}
    span = an.spans.of(parity)
    return span.root is None and span.ring is None and span.lo == 0 and span.hi == 1


def _both_parities(an: Analysis, op: Op, body: frozenset, waits: list[Op]) -> bool:
    """Is op's barrier (a known address) also waited for the other parity in the same loop?
    Its phase then advances twice per iteration: a ring unrolled over two laps (CUTLASS's
    epilogue, whose subtiles per tile are twice its stages, waits each stage for parity 0
    and then 1)."""
    key = an.key(op, "mbar")
    if key is not None and key[1] is not None:
        c = an.const(op.parity)
        for o in waits:
            other = an.key(o, "mbar") if o is not op and an.cfg.block_of(o.index) in body \
                else None
            if other is not None and other[0] is key[0] and other[1] == key[1] \
                    and an.const(o.parity) not in (None, c):
                return True
    # nvcc's form under a flag (`if (source_needed)`): the barrier's address and the parity
    # are known only on the path the flag's branch leaves to them (`assume`). Both waits
    # must lie under that same edge fact: then one iteration runs both or neither.
    fact = edge_fact(an, op.index)
    if fact is None:
        return False
    view = assuming(an, fact)
    mine, c = view.val(op.mbar), view.const(op.parity)
    if mine.kind is not Kind.addr or mine.offset is None or c is None:
        return False
    for o in waits:
        if o is op or an.cfg.block_of(o.index) not in body:
            continue
        theirs = edge_fact(an, o.index)
        if theirs is None or theirs[0] is not fact[0] or theirs[1] != fact[1]:
            continue
        v = view.val(o.mbar)
        if v.kind is Kind.addr and v.root is mine.root and v.offset == mine.offset \
                and view.const(o.parity) not in (None, c):
            return True
    return False


STRUCTURAL.append(parity_loops)
