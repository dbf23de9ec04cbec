"""Tensor-map hazards: acquire fences (missing, unsynchronised, wrong size/space/scope), raw
param-space map addresses, tensormap.replace / cp_fenceproxy ordering and divergence, and maps
modified while copies may still read them.
"""

from __future__ import annotations

from typing import Any

from ..instructions.arith import Binary
from ..instructions.move import Cvt, Mov
from ..operands import Reg
from ..types import Scope, StateSpace
from .analysis import Analysis, handles, keys_match
from .findings import Hazard
from .ops import Op, Role
from .state import State

_SHARED = (StateSpace.shared, StateSpace.shared_cta)


@handles(Role.TMA_LOAD, Role.TMA_STORE, Role.TMA_PREFETCH)
def use_map(an: Analysis, state: State, op: Op, report: bool) -> State:
    """A TMA copy or prefetch reading a tensor map: `tmap-param-no-cvta` for a raw .param address;
    for a global map, `tmap-no-acquire` / `tmap-acquire-unsynced` when it was modified without an
    acquire fence this thread is ordered after; a load keeps reading the map until its barrier's
    phase completes."""
    kind, key, root = an.classify_map(op.map)
    if report and kind == "param_raw":
        an.report(Hazard.TMAP_PARAM_NO_CVTA, f"{op.role.value} reads the tensor map through "
                  f"{an.describe(op.map)}, a .param-space address (no cvta.param); it "
                  "assembles, then faults with 'misaligned address'",
                  [("use", op.index), ("address", an.origin_site(op.map))])
    if kind != "global":
        return state
    if report:
        _check_acquired(an, state, op, key)
    if op.role is Role.TMA_LOAD:   # reads the map until its mbarrier phase completes
        return State(state.must, state.may | {("inflight", op.index)}, state.tx)
    return state


def map_key(an: Analysis, operand: Any) -> Any:
    """The key of a map in global memory: `classify_map`'s, and where its offset is unknown
    (a per-CTA workspace, `maps + ctaid*256`) a third part, (run-time terms, constant): the
    address as a sum, through add, mov and cvt, of the value numbers of its run-time terms
    and a constant. Two maps at `base` and `base + 128` (or `ws + cvt(off)` and `ws +
    cvt(off + 128)`) are then told apart; maps whose run-time terms differ may still be
    one."""
    key = an.classify_map(operand)[1]
    if key is None or key[1] is not None:
        return key
    terms: dict[Any, int] = {}
    c = getattr(operand, "offset", 0)
    todo, budget = [getattr(operand, "base", operand)], 32
    while todo:
        x = todo.pop()
        k = an.const(x)
        if k is not None:
            c += k
            continue
        defs = an.values.defs.get(x, ()) if isinstance(x, Reg) else ()
        insn = an.body[defs[0]].insn if len(defs) == 1 and \
            an.body[defs[0]].guard is None else None
        budget -= 1
        if budget > 0 and isinstance(insn, Binary) and insn.op == "add":
            todo += [insn.a, insn.b]
        elif budget > 0 and isinstance(insn, Mov | Cvt) and isinstance(insn.a, Reg):
            todo.append(insn.a)
        else:
            vn = an.values.vn(x)
            terms[vn] = terms.get(vn, 0) + 1
    return (key[0], None, (frozenset(terms.items()), c))


def same_map(a: Any, b: Any) -> bool:
    """May two map keys (see `map_key`) name the same map?"""
    if not keys_match(a, b):
        return False
    return not (len(a) > 2 and len(b) > 2 and a[2][0] == b[2][0] and a[2][1] != b[2][1])


def _check_acquired(an: Analysis, state: State, op: Op, key: Any) -> None:
    key = map_key(an, op.map)
    acquired = any(f[0] == "acq" and (f[1] is None or same_map(f[1], key))
                   for f in state.must)
    what = an.describe(op.map)
    if not acquired:
        acqs = [o.index for o in an.ops if o.role is Role.TMAP_ACQUIRE
                and same_map(map_key(an, o.map) or (None, None), key)]
        why = ("is never acquired in this kernel" if not acqs else
               "is not acquired on every path to this use (or was modified since)")
        an.report(Hazard.TMAP_NO_ACQUIRE, f"{op.role.value} reads a tensor map in global memory "
                  f"({what}) that {why}", [("use", op.index)] + [("acquire", s)
                                                                for s in acqs[:1]])
        return
    for (s,) in an.pending(state, "acq_nosync"):
        if keys_match(an.key(an.op_at[s], "map"), key) and not an.div.same_threads(s, op.index):
            an.report(Hazard.TMAP_ACQUIRE_UNSYNCED, f"the tensor map at {what} was acquired by "
                      "other threads and no CTA barrier separates that fence from this use",
                      [("use", op.index), ("acquire", s)])
            return


@handles(Role.TMAP_ACQUIRE)
def acquire(an: Analysis, state: State, op: Op, report: bool) -> State:
    """fence.proxy.tensormap::generic.acquire: `tmap-acquire-size` (not 128 bytes),
    `tmap-acquire-space` (not a generic address of a global map), `tmap-acquire-scope` (a
    host-written map acquired below .sys); records the acquire."""
    v = an.val(op.map)
    kind, key, root = an.classify_map(op.map)
    if report:
        size = an.const(op.count)
        if size is not None and size != 128:
            an.report(Hazard.TMAP_ACQUIRE_SIZE, f"the acquire fence covers {size} bytes; a "
                      "tensor map is 128", [("acquire", op.index)])
        if v.space not in (None, StateSpace.generic) or kind in ("param", "param_raw", "const"):
            where = (f"a .{v.space.value} address" if v.space not in (None, StateSpace.generic)
                     else f"a {(kind or '').split('_')[0]}-space map")
            an.report(Hazard.TMAP_ACQUIRE_SPACE, f"the acquire fence is given {an.describe(op.map)}"
                      f", {where}; it needs the generic address of a map in global memory",
                      [("acquire", op.index), ("address", an.origin_site(op.map))])
        if (kind == "global" and an.ctx.is_host_map(root) and op.scope is not None
                and op.scope is not Scope.sys and not _released(state, key, op.scope)):
            an.report(Hazard.TMAP_ACQUIRE_SCOPE, f"the map behind parameter {root.name} is "
                      f"written by the host, but the acquire uses .{op.scope.value} scope "
                      "(needs .sys)", [("acquire", op.index)])
        if kind == "global":
            _acquire_order(an, state, op, key, root)
    may = {("acq_nosync", op.index)} if an.div.stmt_tokens(op.index) else set()
    if key is not None:
        key = map_key(an, op.map)
    must = state.must | {("acq", key)} if an.runs_somewhere(op.index) else state.must
    return State(must, state.may | may, state.tx)


_NARROW = (Scope.cta, Scope.cluster)


def _per_cta(an: Analysis, operand: Any) -> bool:
    """Is the map's address different in every CTA (a per-CTA slot, indexed by %ctaid)?
    Then its only users are this CTA, and .cta scope is enough."""
    def depends(vn: Any) -> bool:
        if not isinstance(vn, tuple) or not vn:
            return False
        if vn[0] == "sreg":
            return str(vn[1]).startswith(("ctaid", "cluster_ctarank", "clusterid"))
        return any(depends(x) for x in vn[1:] if isinstance(x, tuple))
    return depends(an.values.vn(getattr(operand, "base", operand)))


def _acquire_order(an: Analysis, state: State, op: Op, key: Any, root: Any) -> None:
    """An acquire of a map this kernel wrote in place needs the writer's release first, and
    one of a map other CTAs or kernels wrote needs .gpu scope at least."""
    for (s,) in an.pending(state, "unreleased"):
        if keys_match(an.key(an.op_at[s], "smem"), key):
            if an.op_at[s].role is Role.GLOBAL_WRITE:
                an.report(Hazard.TMAP_REPLACE_NO_RELEASE, f"the tensor map at "
                          f"{an.describe(op.map)} was written with plain st.global (a "
                          "generic-proxy copy, not tensormap.cp_fenceproxy) and no "
                          "fence.proxy.tensormap::generic.release orders that write before "
                          "this acquire: TMA may read the old map",
                          [("acquire", op.index), ("store", s)])
                return
            an.report(Hazard.TMAP_REPLACE_NO_RELEASE, f"the tensor map at "
                      f"{an.describe(op.map)} was modified in global memory by "
                      "tensormap.replace and no fence.proxy.tensormap::generic.release "
                      "orders that write before this acquire",
                      [("acquire", op.index), ("replace", s)])
            return
    if op.scope in _NARROW and not an.ctx.is_host_map(root) and not (
            _released(state, key, op.scope) and _per_cta(an, op.map)):
        an.report(Hazard.TMAP_SCOPE_TOO_NARROW, f"the tensor map at {an.describe(op.map)} "
                  f"is acquired at .{op.scope.value} scope, but it lives in global memory "
                  "and was written by another CTA, kernel or the host (not released by this "
                  "CTA into a per-CTA slot)", [("acquire", op.index)])


def _narrow_release(an: Analysis, op: Op, operand: Any, scope: Any, report: bool) -> None:
    if not report or scope not in _NARROW:
        return
    if not _per_cta(an, operand):
        an.report(Hazard.TMAP_SCOPE_TOO_NARROW, f"the tensor map at {an.describe(operand)} "
                  f"is released at .{scope.value} scope, but it lives in global memory at an "
                  "address every CTA shares: other CTAs (and later kernels) acquiring it are "
                  "not ordered after this write", [("release", op.index)])
        return
    # A per-CTA slot needs no wider scope only when this CTA acquires it again.
    key = map_key(an, operand)
    if key is not None and not any(o.role is Role.TMAP_ACQUIRE and same_map(
            map_key(an, o.map) or (None, None), key) for o in an.ops):
        an.report(Hazard.TMAP_SCOPE_TOO_NARROW, f"the tensor map at {an.describe(operand)} "
                  f"is released at .{scope.value} scope into a per-CTA slot, but this kernel "
                  "never acquires it: the kernel (or later launch) that does is not ordered "
                  f"after this write at .{scope.value} scope", [("release", op.index)])


def _modified(an: Analysis, state: State, op: Op, key: Any, report: bool) -> State:
    """A write to the global map `key`: copies still reading it are a hazard, and every
    earlier acquire of it is void."""
    if key is None:
        return state
    if report:
        readers = [s for (s,) in an.pending(state, "inflight")]
        readers += [s for (s, _age, _moved) in an.pending(state, "bulk")
                    if an.op_at[s].role is Role.TMA_STORE]
        for s in readers:
            if keys_match(an.classify_map(an.op_at[s].map)[1], key):
                an.report(Hazard.TMAP_MODIFIED_IN_FLIGHT, f"{op.role.value} writes the tensor "
                          f"map at {an.describe(op.map if op.map is not None else op.smem)} "
                          "while a copy issued earlier may still be reading it",
                          [("modify", op.index), ("reader", s)])
                break
    must = frozenset(f for f in state.must if not (f[0] == "acq" and keys_match(f[1], key)))
    return State(must, state.may, state.tx)


_WIDE = {Scope.gpu: (Scope.gpu, Scope.sys), Scope.sys: (Scope.sys,),
         Scope.cluster: (Scope.cluster, Scope.gpu, Scope.sys),
         Scope.cta: (Scope.cta, Scope.cluster, Scope.gpu, Scope.sys)}


def _released(state: State, key: Any, scope: Scope) -> bool:
    """Was the map's latest version written by this kernel and released at a scope that an
    acquire at `scope` pairs with? Then the host's writes no longer matter: .gpu suffices."""
    return any(f[0] == "released" and keys_match(f[1], key) and f[2] in _WIDE[scope]
               for f in state.must)


def _forget_release(state: State, key: Any) -> frozenset:
    return frozenset(f for f in state.must if not (f[0] == "released" and keys_match(f[1], key)))


@handles(Role.TMAP_REPLACE)
def replace(an: Analysis, state: State, op: Op, report: bool) -> State:
    """tensormap.replace: in shared memory, records a write by only some lanes (cp_fenceproxy then
    needs a warp sync); in global memory, the map is modified in place (`tmap-modified-in-flight`
    against copies still reading it) and needs a release."""
    space = op.space if isinstance(op.space, StateSpace) else None
    v = an.val(op.smem)
    if space in _SHARED or (space in (None, StateSpace.generic) and v.space in _SHARED):
        if an.div.stmt_tokens(op.index):   # written by some lanes: the rest must sync
            return State(state.must, state.may | {("replace_nosync", op.index)}, state.tx)
        return state
    state = _modified(an, state, op, v.key, report)
    if v.key is None:
        return state
    # Written in place through the generic proxy: a tensormap release must follow.
    return State(_forget_release(state, v.key), state.may | {("unreleased", op.index)},
                 state.tx)


def _map_roots(an: Analysis) -> set[int]:
    """The roots (by id) of the maps in global memory this kernel hands to TMA or acquires."""
    hit = an.cache.get("map_roots")
    if hit is None:
        hit = an.cache["map_roots"] = {
            id(key[0]) for o in an.ops if o.map is not None and o.role in (
                Role.TMA_LOAD, Role.TMA_STORE, Role.TMA_PREFETCH, Role.TMAP_ACQUIRE)
            for kind, key, _ in [an.classify_map(o.map)] if kind == "global" and key is not None}
    return hit


@handles(Role.GLOBAL_WRITE)
def global_write(an: Analysis, state: State, op: Op, report: bool) -> State:
    """A plain st.global into a map TMA uses (a shared map copied out with generic stores
    instead of tensormap.cp_fenceproxy): like tensormap.replace in place, the write is in
    the generic proxy and needs fence.proxy.tensormap::generic.release before the acquire."""
    if not any(o.role is Role.TMAP_REPLACE for o in an.ops):
        return state   # only a kernel that edits maps copies them around
    key = an.val(op.smem).key
    if key is None or id(key[0]) not in _map_roots(an):
        return state
    state = _modified(an, state, op, key, report)
    return State(_forget_release(state, key), state.may | {("unreleased", op.index)},
                 state.tx)


@handles(Role.TMAP_RELEASE)
def release(an: Analysis, state: State, op: Op, report: bool) -> State:
    """fence.proxy.tensormap::generic.release releases this thread's in-place writes: those
    of the threads that run it (lane 0's tensormap.replace, then the whole warp's release
    after bar.warp.sync, covers lane 0's write), or (as before) a write of every thread that
    runs it."""
    mine = {f for f in state.may if f[0] == "unreleased"
            and (an.div.same_threads(f[1], op.index) or an.div.same_threads(op.index, f[1]))}
    if not mine:
        return state
    must = set(state.must)
    for f in mine:
        must.add(("released", an.key(an.op_at[f[1]], "smem"), op.scope))
        _narrow_release(an, op, an.op_at[f[1]].smem, op.scope, report)
    return State(frozenset(must), state.may - mine, state.tx)


@handles(Role.CP_FENCEPROXY)
def fenceproxy(an: Analysis, state: State, op: Op, report: bool) -> State:
    """tensormap.cp_fenceproxy: `fenceproxy-divergent` under a lane-divergent condition,
    `tmap-replace-no-warpsync` when its shared source was replaced by some lanes with no warp
    sync since; the global map is then modified and released."""
    i = op.index
    if report:
        if an.div.stmt_level(i) >= 2:
            ctrl = an.div.controlling(i)
            an.report(Hazard.FENCEPROXY_DIVERGENT, "the warp-collective (.sync.aligned) copy "
                      "runs under a condition that differs between lanes of the warp",
                      [("copy", i)] + [("condition", c) for c in ctrl[:1]])
        src = an.key(op, "smem")
        for (s,) in an.pending(state, "replace_nosync"):
            if keys_match(an.key(an.op_at[s], "smem"), src) and not an.div.same_threads(s, i):
                an.report(Hazard.TMAP_REPLACE_NO_WARPSYNC, f"the shared map at "
                          f"{an.describe(op.smem)} was modified by some lanes with no "
                          "bar.warp.sync before the warp copies it",
                          [("copy", i), ("replace", s)])
                break
    state = _modified(an, state, op, an.key(op, "map"), report)
    key = an.key(op, "map")
    if key is None or op.scope is None:
        return state
    scope = op.scope if isinstance(op.scope, Scope) else Scope(getattr(op.scope, "value",
                                                                       op.scope))
    if an.classify_map(op.map)[0] == "global":
        _narrow_release(an, op, op.map, scope, report)
    return State(_forget_release(state, key) | {("released", key, scope)}, state.may, state.tx)
