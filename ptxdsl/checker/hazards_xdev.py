"""Tensor maps shared between GPUs: the release and the acquire must both use `.sys` scope.

The caller names the pointer parameters whose maps cross devices
(`check_module(mod, cross_device_maps=["tensor_map"])`): maps one GPU writes and another uses,
through peer or host-mapped memory. A `tensormap.cp_fenceproxy ... .release.<scope>` into such
a map, or a `fence.proxy.tensormap::generic.acquire.<scope>` of one, below `.sys` is reported
(CUDA Programming Guide §10.30.2: "If the threads are on different devices, the .sys scope
must be used").
"""

from __future__ import annotations

from ..types import Scope
from .analysis import Analysis, handles
from .findings import Hazard
from .ops import Op, Role
from .state import State

_WHAT = {Role.TMAP_ACQUIRE: ("acquire", "acquires"),
         Role.CP_FENCEPROXY: ("release", "releases (tensormap.cp_fenceproxy)")}


@handles(Role.TMAP_ACQUIRE, Role.CP_FENCEPROXY)
def cross_device_scope(an: Analysis, state: State, op: Op, report: bool) -> State:
    """`tmap-cross-device-scope`: an acquire or cp_fenceproxy of a map shared with another GPU
    (`cross_device_maps`) at a scope narrower than .sys."""
    if not report or op.scope is None or op.scope is Scope.sys:
        return state
    kind, _key, root = an.classify_map(op.map)
    if kind == "global" and an.ctx.is_cross_device_map(root):
        site, verb = _WHAT[op.role]
        an.report(Hazard.TMAP_CROSS_DEVICE_SCOPE, f"the map behind parameter {root.name} is "
                  f"shared with another GPU, but this thread {verb} it at .{op.scope.value} "
                  "scope (needs .sys)", [(site, op.index)])
    return state
