"""Readers for `ptxdsl.instructions.clusterlaunchcontrol` and `st_bulk`: try_cancel (with or
without multicast), the query_cancel forms, and st.bulk (with or without `.weak`, the only
semantics; the plain `st` forms are another family's, so st.bulk's reader returns None for
them)."""

from __future__ import annotations

from typing import Any

from ...instructions.base import Instruction
from ...instructions.clusterlaunchcontrol import (
    CancelQuery,
    ClusterLaunchControlQueryCancel,
    ClusterLaunchControlTryCancel,
)
from ...instructions.st_bulk import StBulk
from ..items import Braces
from . import reader

_TRY = ("try_cancel", "async", "shared::cta", "mbarrier::complete_tx::bytes")
_QUERIES = {tuple(f"query_cancel.{q.value}.b128".split(".")): q for q in CancelQuery}


@reader("clusterlaunchcontrol")
def clusterlaunchcontrol(parts: tuple[str, ...], ops: list[Any]) -> Instruction | None:
    """`clusterlaunchcontrol.try_cancel...{.multicast::cluster::all}.b128 [addr], [bar]` and
    `clusterlaunchcontrol.query_cancel.<query>.b128 d, response`."""
    if len(ops) != 2:
        return None
    if parts[1:5] == _TRY and parts[-1] == "b128":
        rest = parts[5:-1]
        if rest not in ((), ("multicast::cluster::all",)):
            return None
        return ClusterLaunchControlTryCancel(ops[0], ops[1], bool(rest))
    query = _QUERIES.get(parts[1:])
    if query is None:
        return None
    d = ops[0]
    if isinstance(d, Braces):      # a vector holding a sink or an immediate: not a result
        return None
    return ClusterLaunchControlQueryCancel(query, d, ops[1])


@reader("st")
def st_bulk(parts: tuple[str, ...], ops: list[Any]) -> Instruction | None:
    """`st.bulk{.weak}.shared::cta [addr], size, initval`."""
    if len(parts) < 3 or parts[1] != "bulk" or len(ops) != 3:
        return None
    weak = parts[2:] == ("weak", "shared::cta")
    if not weak and parts[2:] != ("shared::cta",):
        return None
    return StBulk(ops[0], ops[1], ops[2], weak=weak)
