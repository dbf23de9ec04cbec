"""Readers for `ptxdsl.instructions.atomic`: atom (Atom, AtomCas) and red (Red).

`.noftz` is no field: the classes spell it on the half types, where ptxas wants it, so the
render check keeps a half-type reading only where the text has it, and a `.noftz` on any
other type Raw. A vector red (`.v2`/`.v4`/`.v8` and a braced source) reads as `Red` with the
source's items; a vector atom is no ptxdsl form (Raw)."""

from __future__ import annotations

from typing import Any

from ...instructions.atomic import Atom, AtomCas, AtomOp, Red
from ...types import StateSpace
from . import reader, respell
from .memory import SCOPES, SEMS, SPACES, TYPES, Table, order_first, qualifiers, vector

_ATOMIC: Table = {**SEMS, **SCOPES, **SPACES, **{op.value: ("op", op) for op in AtomOp},
                  "noftz": ("noftz", True), "v2": ("vec", 2), "v4": ("vec", 4),
                  "v8": ("vec", 8), "L2::cache_hint": ("hint", True)}


_OPS = frozenset(op.value for op in AtomOp)
_LEADING = frozenset({*SEMS, *SCOPES, *SPACES})


@respell("atom", "red")
def op_after_order(opcode: str) -> str:
    """The operation after the memory order, scope and space: nvcc's cuda::atomic_ref writes
    `atom.cas.release.gpu.b64` and `atom.add.release.gpu.u32`, which ptxas reads as
    `atom.release.gpu.cas.b64`."""
    parts = opcode.split(".")
    if len(parts) < 4 or parts[1] not in _OPS:
        return opcode
    n = 2
    while n < len(parts) - 1 and parts[n] in _LEADING:
        n += 1
    return ".".join([parts[0], *parts[2:n], parts[1], *parts[n:]])


respell("atom", "red")(order_first)   # after op_after_order: sorts the moved run too


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
    if "vec" in q or "hint" in q:
        return None
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
    """`red{.sem}{.scope}{.space}.op{.L2::cache_hint}{.vN}.type [a], b{, policy}` into `Red`;
    None for another form."""
    got = _read(parts)
    if got is None or len(ops) != 2 + ("hint" in got[0]):
        return None
    q, t = got
    b = vector(ops[1], q.get("vec"))
    if b is None:
        return None
    return Red(q["op"], t, ops[0], b, q.get("space", StateSpace.generic), q.get("sem"),
               q.get("scope"), ops[2] if "hint" in q else None)
