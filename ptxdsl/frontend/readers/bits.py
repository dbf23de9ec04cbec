"""Readers for `ptxdsl.instructions.bits`: prmt (every mode), bfind{.shiftamt}, bmsk."""

from __future__ import annotations

from typing import Any

from ...instructions.bits import Bfind, Bmsk, BmskMode, Prmt, PrmtMode
from . import reader
from ._lookup import SCALAR

_PRMT = {m.value: m for m in PrmtMode if m.value}
_BMSK = {m.value: m for m in BmskMode}


@reader("prmt")
def prmt(parts: tuple[str, ...], ops: list[Any]) -> Prmt | None:
    """`prmt.b32{.mode} d, a, b, c` into `Prmt`; None for another form."""
    if len(ops) != 4 or len(parts) not in (2, 3) or parts[1] != "b32":
        return None
    mode = _PRMT.get(parts[2]) if len(parts) == 3 else PrmtMode.default
    if mode is None:
        return None
    return Prmt(mode, ops[0], ops[1], ops[2], ops[3])


@reader("bfind")
def bfind(parts: tuple[str, ...], ops: list[Any]) -> Bfind | None:
    """`bfind{.shiftamt}.type d, a` into `Bfind`; None for another form."""
    shiftamt = len(parts) == 3 and parts[1] == "shiftamt"
    t = SCALAR.get(parts[-1])
    if t is None or len(ops) != 2 or len(parts) != 2 + shiftamt:
        return None
    return Bfind(t, ops[0], ops[1], shiftamt)


@reader("bmsk")
def bmsk(parts: tuple[str, ...], ops: list[Any]) -> Bmsk | None:
    """`bmsk.{clamp,wrap}.b32 d, a, b` into `Bmsk`; None for another form."""
    mode = _BMSK.get(parts[1]) if len(parts) == 3 and parts[2] == "b32" else None
    if mode is None or len(ops) != 3:
        return None
    return Bmsk(mode, ops[0], ops[1], ops[2])
