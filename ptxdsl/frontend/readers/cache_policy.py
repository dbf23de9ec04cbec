"""Readers for `ptxdsl.instructions.cache_policy`: createpolicy.fractional, .range, .cvt."""

from __future__ import annotations

from typing import Any

from ...instructions.cache_policy import (
    CreatePolicyCvt,
    CreatePolicyFractional,
    CreatePolicyRange,
    L2Priority,
)
from ...types import StateSpace
from . import reader

_PRIORITIES = {p.value: p for p in L2Priority}


def _priorities(quals: tuple[str, ...]) -> tuple[L2Priority, L2Priority | None] | None:
    """`primary{.secondary}` (each `L2::evict_*`), or None."""
    if len(quals) not in (1, 2):
        return None
    primary = _PRIORITIES.get(quals[0])
    secondary = _PRIORITIES.get(quals[1]) if len(quals) == 2 else None
    if primary is None or len(quals) == 2 and secondary is None:
        return None
    return primary, secondary


@reader("createpolicy")
def createpolicy(parts: tuple[str, ...], ops: list[Any]
                 ) -> CreatePolicyFractional | CreatePolicyRange | CreatePolicyCvt | None:
    """`createpolicy.{fractional,range}...` and `createpolicy.cvt.L2.b64` into
    `CreatePolicyFractional`, `CreatePolicyRange` or `CreatePolicyCvt`; None for another form."""
    if len(parts) < 3 or parts[-1] != "b64":
        return None
    form, quals = parts[1], parts[2:-1]
    if form == "cvt":
        return CreatePolicyCvt(ops[0], ops[1]) if quals == ("L2",) and len(ops) == 2 else None
    space = StateSpace.generic
    if form == "range" and quals[:1] == ("global",):
        space, quals = StateSpace.global_, quals[1:]
    prio = _priorities(quals)
    if prio is None:
        return None
    if form == "fractional" and len(ops) in (1, 2):
        return CreatePolicyFractional(ops[0], *prio, ops[1] if len(ops) == 2 else None)
    if form == "range" and len(ops) == 4:
        return CreatePolicyRange(ops[0], ops[1], ops[2], ops[3], *prio, space)
    return None
