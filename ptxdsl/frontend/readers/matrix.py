"""Readers for `ptxdsl.instructions.matrix`: ldmatrix / stmatrix `.sync.aligned.m8n8.xN
{.trans}{.ss}.b16` (the sm_100 `.m16n16` / `.m8n16` forms are not modelled: they stay Raw)."""

from __future__ import annotations

from typing import Any

from ...instructions.matrix import LdMatrix, StMatrix
from ...operands import Vec
from ...types import StateSpace
from . import reader, respell

_HEAD = ("sync", "aligned", "m8n8")
_COUNTS = frozenset(("x1", "x2", "x4"))
_SPACES = {"shared": StateSpace.shared, "shared::cta": StateSpace.shared_cta}


@respell("ldmatrix", "stmatrix")
def _count_first(opcode: str) -> str:
    """CUTLASS writes the count before the shape (`.x4.m8n8`); ptxas reads either order."""
    parts = opcode.split(".")
    if len(parts) > 4 and parts[3] in _COUNTS and parts[4] == "m8n8":
        parts[3], parts[4] = parts[4], parts[3]
    return ".".join(parts)


def _shape(parts: tuple[str, ...]) -> tuple[bool, StateSpace] | None:
    """(trans, space) of `mnemonic.sync.aligned.m8n8.xN{.trans}{.ss}.b16`; the count is the
    register vector's, which the render check compares with `.xN`."""
    if parts[1:4] != _HEAD or len(parts) < 6 or parts[4] not in _COUNTS or parts[-1] != "b16":
        return None
    rest = parts[5:-1]
    trans = rest[:1] == ("trans",)
    rest = rest[1:] if trans else rest
    if not rest:
        return trans, StateSpace.generic
    space = _SPACES.get(rest[0]) if len(rest) == 1 else None
    return None if space is None else (trans, space)


@reader("ldmatrix")
def ldmatrix(parts: tuple[str, ...], ops: list[Any]) -> LdMatrix | None:
    """`ldmatrix.sync.aligned.m8n8.xN{.trans}{.shared{::cta}}.b16` into `LdMatrix`; None for another
    form."""
    got = _shape(parts)
    if got is None or len(ops) != 2 or not isinstance(ops[0], Vec):
        return None
    return LdMatrix(ops[0], ops[1], *got)


@reader("stmatrix")
def stmatrix(parts: tuple[str, ...], ops: list[Any]) -> StMatrix | None:
    """`stmatrix.sync.aligned.m8n8.xN{.trans}{.shared{::cta}}.b16` into `StMatrix`; None for another
    form."""
    got = _shape(parts)
    if got is None or len(ops) != 2 or not isinstance(ops[1], Vec):
        return None
    return StMatrix(ops[0], ops[1], *got)
