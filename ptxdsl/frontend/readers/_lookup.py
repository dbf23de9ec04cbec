"""Look-ups the readers share: qualifier words to ptxdsl's enums by table (a reader does O(1)
work per statement: no `Enum(value)` with its exception on every miss), and a `p|q` operand
to its two parts."""

from __future__ import annotations

from typing import Any

from ...types import ScalarType, StateSpace
from ..items import PredPair

SCALAR: dict[str, ScalarType] = {t.value: t for t in ScalarType}
SPACE: dict[str, StateSpace] = {s.value: s for s in StateSpace if s.value}


def pair(op: Any) -> tuple[Any, Any]:
    """`(p, q)` of a `p|q` operand, `(op, None)` of any other (the instruction's constructor
    checks what each part is)."""
    return (op.p, op.q) if isinstance(op, PredPair) else (op, None)
