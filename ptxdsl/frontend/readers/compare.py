"""Readers for `ptxdsl.instructions.compare`: setp (one or two predicate results, with or
without the boolean combine) and selp."""

from __future__ import annotations

from typing import Any

from ...instructions.compare import BOOL_OPS, Selp, Setp
from . import reader
from ._lookup import SCALAR, pair


@reader("setp")
def setp(parts: tuple[str, ...], ops: list[Any]) -> Setp | None:
    """`setp.cmp{.bool}{.ftz}.type p{|q}, a, b{, c}` into `Setp`; None for another form."""
    if not 3 <= len(parts) <= 5 or len(ops) not in (3, 4):
        return None
    t = SCALAR.get(parts[-1])
    if t is None:
        return None
    quals = parts[2:-1]
    ftz = bool(quals) and quals[-1] == "ftz"
    bool_op = quals[0] if quals and quals[0] in BOOL_OPS else None
    if len(quals) != ftz + (bool_op is not None):
        return None
    p, q = pair(ops[0])
    c = ops[3] if len(ops) == 4 else None
    return Setp(parts[1], t, p, ops[1], ops[2], bool_op, c, q, ftz)


@reader("selp")
def selp(parts: tuple[str, ...], ops: list[Any]) -> Selp | None:
    """`selp.type d, a, b, c` into `Selp`; None for another form."""
    t = SCALAR.get(parts[1]) if len(parts) == 2 else None
    if t is None or len(ops) != 4:
        return None
    return Selp(t, ops[0], ops[1], ops[2], ops[3])
