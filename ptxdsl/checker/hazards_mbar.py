"""mbarrier hazards: use before init, use without publishing the init, expect_tx byte counts
that differ from what TMA delivers, wait loops whose parity never changes, and waits on a
.shared::cluster address.
"""

from __future__ import annotations

from ..operands import Addr, Reg, Symbol
from ..types import StateSpace
from .analysis import STRUCTURAL, Analysis, handles, keys_match
from .cfg import natural_loops
from .findings import Hazard
from .ops import Op, Role
from .state import State, add_tx

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
        return   # a barrier passed in or computed (e.g. another CTA's): its init is elsewhere
    i = op.index
    if not any(f[0] == "init" and keys_match(f[1], key) for f in state.must):
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
    key = an.key(op, "mbar")
    if report:
        _use(an, state, op, "thread")
    must = frozenset(f for f in state.must if not (f[0] == "init" and keys_match(f[1], key)))
    return State(must, state.may, state.tx)


@handles(Role.MBAR_ARRIVE, Role.MBAR_EXPECT_TX, Role.MBAR_COMPLETE_TX)
def arrive(an: Analysis, state: State, op: Op, report: bool) -> State:
    if report:
        _use(an, state, op, "cluster" if op.space is CLUSTER else "thread")
    key = an.key(op, "mbar")
    if key is None or op.count is None:
        return state
    n = an.const(op.count)
    got = add_tx(state.tx_get(key), op.index, *((0, n) if op.role is Role.MBAR_COMPLETE_TX
                                                else (n, 0)))
    return state.tx_set(key, got)


@handles(Role.TMA_LOAD, Role.BULK_LOAD)
def load(an: Analysis, state: State, op: Op, report: bool) -> State:
    if report:
        remote = op.space is CLUSTER or an.val(op.mbar).space is CLUSTER
        _use(an, state, op, "cluster" if op.multicast or remote else "tma")
    key = an.key(op, "mbar")
    if key is None:
        return state
    if op.multicast:   # each CTA's barrier also receives the other CTAs' slices
        n = None
    elif op.role is Role.TMA_LOAD:
        info = an.map_info(op.map)
        n = info.box_bytes if info is not None else None
    else:
        n = an.const(op.count)
    return state.tx_set(key, add_tx(state.tx_get(key), op.index, 0, n))


@handles(Role.MBAR_WAIT)
def wait(an: Analysis, state: State, op: Op, report: bool) -> State:
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
    if tx is not None:
        if report and None not in tx[:2] and tx[0] != tx[1]:
            _mismatch(an, op, tx)
        state = state.tx_set(key, (tx[0], tx[1], tx[2], True))
    gone = {f for f in state.may if f[0] == "inflight"
            and keys_match(an.key(an.op_at[f[1]], "mbar"), key)}
    return State(state.must, state.may - gone, state.tx) if gone else state


def _mismatch(an: Analysis, op: Op, tx) -> None:
    exp, got, sites, _ = tx
    effect = ("the wait can pass before all the data has landed" if exp < got else
              "the phase never completes and the wait hangs")
    announced, delivered = [], []
    for s in sorted(sites):
        o = an.op_at.get(s)
        if o is not None and o.role in (Role.TMA_LOAD, Role.BULK_LOAD, Role.MBAR_COMPLETE_TX):
            delivered.append(("load" if o.role is not Role.MBAR_COMPLETE_TX else "complete_tx",
                              s))
        else:
            announced.append(("expect_tx", s))
    # The expect_tx leads: it is the count to fix (or, with none at all, the first load).
    an.report(Hazard.EXPECT_TX_MISMATCH, f"expect_tx announces {exp} bytes on the mbarrier at "
              f"{an.describe(op.mbar)}, but the copies completing on it in this phase deliver "
              f"{got} bytes: {effect}", announced + delivered + [("wait", op.index)],
              dedupe=(op.index, frozenset(sites)))


def _varies(an: Analysis, operand, body: frozenset) -> bool:
    """Is `operand` (a register, or an address on one) written inside the loop `body`?"""
    reg = operand.base if isinstance(operand, Addr) else operand
    if not isinstance(reg, Reg):
        return False
    return any(an.cfg.block_of(i) in body for i in an.values.defs.get(reg, ()))


def _spins(an: Analysis, op: Op, header: int, body: frozenset) -> bool:
    """Is this loop the wait's own retry loop (left or repeated on the wait's predicate)?"""
    vn = an.values.vn(op.result)
    for b in body:
        blk = an.cfg.blocks[b]
        if blk.branch is None:
            continue
        guard = an.cfg.body[blk.branch].guard
        pred = guard.reg if hasattr(guard, "reg") else guard
        if pred is op.result or an.values.vn(pred) == vn:
            if blk.taken == header or blk.taken not in body or blk.fall not in body:
                return True
    return False


def parity_loops(an: Analysis) -> None:
    waits = [o for o in an.ops if o.role is Role.MBAR_WAIT and o.parity is not None]
    if not waits:
        return
    loops_of: dict[int, list[tuple[int, frozenset]]] = {}
    for header, body in natural_loops(an.cfg):
        for b in body:
            loops_of.setdefault(b, []).append((header, body))
    for op in waits:
        for header, body in loops_of.get(an.cfg.block_of(op.index), ()):
            if _spins(an, op, header, body):
                continue
            c = an.const(op.parity)
            if c is None and _varies(an, op.parity, body):
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


STRUCTURAL.append(parity_loops)
