"""Readers for `ptxdsl.instructions.arith`: two-source ops, abs/neg/not, mad."""

from __future__ import annotations

from typing import Any

from ...instructions.arith import _BINARY_OPS, Binary, Mad, Unary
from ...types import ScalarType
from . import reader

_FLAGS = ("ftz", "sat")


def _split(parts: tuple[str, ...]) -> tuple[list[str], ScalarType] | None:
    """The qualifiers between the mnemonic and the type, and the type."""
    try:
        return list(parts[1:-1]), ScalarType(parts[-1])
    except ValueError:
        return None


@reader(*_BINARY_OPS)
def binary(parts: tuple[str, ...], ops: list[Any]) -> Binary | None:
    """add, sub, mul, div, rem, min, max and the bitwise and shift operations
    (`op{.mode}{.ftz}{.sat}.type d, a, b`) into `Binary`; None for another form."""
    got = _split(parts)
    if got is None or len(ops) != 3:
        return None
    quals, t = got
    flags = {f: f in quals for f in _FLAGS}
    modes = [q for q in quals if q not in _FLAGS]
    if len(modes) > 1:
        return None
    return Binary(parts[0], t, ops[0], ops[1], ops[2], modes[0] if modes else None, **flags)


@reader("abs", "neg", "not")
def unary(parts: tuple[str, ...], ops: list[Any]) -> Unary | None:
    """abs, neg and not (`op{.ftz}.type d, a`) into `Unary`; None for another form."""
    got = _split(parts)
    if got is None or len(ops) != 2 or got[0] not in ([], ["ftz"]):
        return None
    return Unary(parts[0], got[1], ops[0], ops[1], ftz=got[0] == ["ftz"])


@reader("mad")
def mad(parts: tuple[str, ...], ops: list[Any]) -> Mad | None:
    """`mad{.lo,.hi,.wide,.rnd}{.ftz}.type d, a, b, c` into `Mad`; None for another form."""
    got = _split(parts)
    if got is None or len(ops) != 4:
        return None
    quals, t = got
    ftz = "ftz" in quals
    modes = [q for q in quals if q != "ftz"]
    if len(modes) > 1:
        return None
    return Mad(t, ops[0], ops[1], ops[2], ops[3], modes[0] if modes else None, ftz=ftz)
