"""Readers for `ptxdsl.instructions.memory`: ld and st, every qualifier their classes model.

A qualifier is looked up in one table that says which field it sets (`shared::cta` sets the
space, `L1::evict_last` the L1 priority, `v4` the vector width); a field set twice or a
qualifier the table lacks (`.unified`, `.async`, `.tensormap`) is not a form these classes
model. Qualifier order is left to the parser's render check, which keeps only the canonical
spelling typed.
"""

from __future__ import annotations

from typing import Any

from ...instructions.memory import L1Eviction, L2Prefetch, Ld, St
from ...operands import Vec
from ...types import ScalarType, Scope, Sem, StateSpace
from ..items import Braces
from . import reader, respell

Table = dict[str, tuple[str, Any]]

TYPES = {t.value: t for t in ScalarType}
SEMS: Table = {s.value: ("sem", s) for s in Sem}
SCOPES: Table = {s.value: ("scope", s) for s in Scope}
# Every space an instruction qualifier spells; an absent one means generic.
SPACES: Table = {s.value: ("space", s) for s in StateSpace if s.value and s is not StateSpace.reg}

_ACCESS: Table = {**SEMS, **SCOPES, **SPACES, "nc": ("nc", True),
                  **{f"L1::{e.value}": ("l1", e) for e in L1Eviction},
                  "L2::cache_hint": ("hint", True),
                  **{f"L2::{p.value}": ("prefetch", p) for p in L2Prefetch},
                  "v2": ("vec", 2), "v4": ("vec", 4), "v8": ("vec", 8)}


_ORDER = {**dict.fromkeys(SEMS, 0), **dict.fromkeys(SCOPES, 1), **dict.fromkeys(SPACES, 2)}


@respell("ld", "st")
def order_first(opcode: str) -> str:
    """The leading memory order, scope and space in ptxdsl's order: CUTLASS's semaphores
    write `ld.global.acquire.gpu.b32`, Triton's atomics `atom.global.gpu.acq_rel.add.f32`;
    ptxas reads them as `ld.acquire.gpu.global.b32`."""
    parts = opcode.split(".")
    n = 1
    while n < len(parts) - 1 and parts[n] in _ORDER:
        n += 1
    if n < 3:
        return opcode
    return ".".join([parts[0], *sorted(parts[1:n], key=_ORDER.__getitem__), *parts[n:]])


def qualifiers(quals: tuple[str, ...], table: Table) -> dict[str, Any] | None:
    """The fields `quals` set, or None when one is not in `table` or two set the same
    field."""
    out: dict[str, Any] = {}
    for q in quals:
        hit = table.get(q)
        if hit is None or hit[0] in out:
            return None
        out[hit[0]] = hit[1]
    return out


def vector(value: Any, n: int | None) -> Any:
    """A register operand, or the items of a `.vN` vector (`{...}` of registers, or with
    immediates as a store's source); None when the shape disagrees with the `.vN`. A scalar
    access may brace its one operand (`{ %r1 }`, as Triton writes it)."""
    if isinstance(value, Vec | Braces):
        items = tuple(value.items)
        if n is None and len(items) == 1:
            return items[0]
        return items if len(items) == n else None
    return None if n is not None else value


@reader("ld")
def ld(parts: tuple[str, ...], ops: list[Any]) -> Ld | None:
    """`ld{.weak,.volatile,.relaxed,.acquire}{.scope}{.space}{.nc}{cache qualifiers}{.vN}.type` into
    `Ld`; None for another form."""
    q = qualifiers(parts[1:-1], _ACCESS)
    t = TYPES.get(parts[-1])
    if q is None or t is None or len(ops) != (3 if "hint" in q else 2):
        return None
    d = vector(ops[0], q.get("vec"))
    if d is None:
        return None
    return Ld(q.get("space", StateSpace.generic), t, d, ops[1], q.get("sem"), q.get("scope"),
              q.get("nc", False), q.get("l1"), q.get("prefetch"),
              ops[2] if len(ops) == 3 else None)


@reader("st")
def st(parts: tuple[str, ...], ops: list[Any]) -> St | None:
    """`st{.weak,.volatile,.relaxed,.release}{.scope}{.space}{cache qualifiers}{.vN}.type` into
    `St`; None for another form."""
    q = qualifiers(parts[1:-1], _ACCESS)
    t = TYPES.get(parts[-1])
    if q is None or t is None or "nc" in q or "prefetch" in q \
            or len(ops) != (3 if "hint" in q else 2):
        return None
    b = vector(ops[1], q.get("vec"))
    if b is None:
        return None
    return St(q.get("space", StateSpace.generic), t, ops[0], b, q.get("sem"), q.get("scope"),
              q.get("l1"), ops[2] if len(ops) == 3 else None)
