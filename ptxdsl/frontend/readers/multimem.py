"""Readers for `ptxdsl.instructions.multimem`: multimem.ld_reduce / st / red, the scalar and
`.vN` forms (the `.acc::f32` forms are not modelled: they stay Raw)."""

from __future__ import annotations

from typing import Any

from ...instructions.bulk import RedOp
from ...instructions.multimem import Multimem, MultimemKind
from . import reader
from .memory import SCOPES, SEMS, SPACES, TYPES, Table, qualifiers, vector

_KINDS = {k.value: k for k in MultimemKind}
_QUALS: Table = {**SEMS, **SCOPES, "global": SPACES["global"],
                 **{op.value: ("op", op) for op in RedOp},
                 "v2": ("vec", 2), "v4": ("vec", 4), "v8": ("vec", 8)}


@reader("multimem")
def multimem(parts: tuple[str, ...], ops: list[Any]) -> Multimem | None:
    """multimem.ld_reduce, multimem.st and multimem.red into `Multimem`; None for another form."""
    kind = _KINDS.get(parts[1]) if len(parts) > 2 else None
    q = qualifiers(parts[2:-1], _QUALS)
    t = TYPES.get(parts[-1])
    if kind is None or q is None or t is None or "space" not in q or "sem" not in q \
            or len(ops) != 2:
        return None
    if kind is MultimemKind.ld_reduce:
        d, a = ops
    else:
        a, d = ops
    d = vector(d, q.get("vec"))
    if d is None:
        return None
    return Multimem(kind, q["sem"], q.get("scope"), q.get("op"), t, a, d)
