"""Readers for `ptxdsl.instructions.atomic`: atom (Atom, AtomCas) and red (Red).

`.noftz` is no field: the classes spell it on the half types, where ptxas wants it, so the
render check keeps a half-type reading only where the text has it, and a `.noftz` on any
other type Raw."""

from __future__ import annotations

from typing import Any

from ...instructions.atomic import Atom, AtomCas, AtomOp, Red
from ...types import StateSpace
from . import reader, respell
from .memory import SCOPES, SEMS, SPACES, TYPES, Table, order_first, qualifiers

_ATOMIC: Table = {**SEMS, **SCOPES, **SPACES, **{op.value: ("op", op) for op in AtomOp},
                  "noftz": ("noftz", True)}


respell("atom", "red")(order_first)


def _read(parts: tuple[str, ...]) -> tuple[dict[str, Any], Any] | None:
    q = qualifiers(parts[1:-1], _ATOMIC)
    t = TYPES.get(parts[-1])
    if q is None or t is None or "op" not in q:
        return None
    return q, t


@reader("atom")
def atom(parts: tuple[str, ...], ops: list[Any]) -> Atom | AtomCas | None:
    """`atom{.sem}{.scope}{.space}.op.type` into `Atom` (`AtomCas` for `.cas`); None for another
    form."""
    got = _read(parts)
    if got is None:
        return None
    q, t = got
    space, sem, scope = q.get("space", StateSpace.generic), q.get("sem"), q.get("scope")
    if q["op"] is AtomOp.cas:
        if len(ops) != 4:
            return None
        return AtomCas(t, ops[0], ops[1], ops[2], ops[3], space, sem, scope)
    if len(ops) != 3:
        return None
    return Atom(q["op"], t, ops[0], ops[1], ops[2], space, sem, scope)


@reader("red")
def red(parts: tuple[str, ...], ops: list[Any]) -> Red | None:
    """`red{.sem}{.scope}{.space}.op.type [a], b` into `Red`; None for another form."""
    got = _read(parts)
    if got is None or len(ops) != 2:
        return None
    q, t = got
    return Red(q["op"], t, ops[0], ops[1], q.get("space", StateSpace.generic), q.get("sem"),
               q.get("scope"))
