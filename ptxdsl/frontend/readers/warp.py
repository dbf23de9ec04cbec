"""Readers for `ptxdsl.instructions.warp`: shfl.sync, vote.sync, activemask, elect.sync (the
pre-sync `shfl`/`vote` spellings are not modelled and stay raw)."""

from __future__ import annotations

from typing import Any

from ...instructions.warp import Activemask, Elect, Shfl, ShflMode, Vote, VoteMode
from . import reader
from ._lookup import pair

_SHFL = {m.value: m for m in ShflMode}
_VOTE = {m.value: m for m in VoteMode}


@reader("shfl")
def shfl(parts: tuple[str, ...], ops: list[Any]) -> Shfl | None:
    """`shfl.sync.mode.b32 d{|p}, a, b, c, membermask` into `Shfl`; None for another form."""
    if len(parts) != 4 or parts[1] != "sync" or parts[3] != "b32" or len(ops) != 5:
        return None
    mode = _SHFL.get(parts[2])
    if mode is None:
        return None
    d, p = pair(ops[0])
    return Shfl(mode, d, ops[1], ops[2], ops[3], ops[4], p)


@reader("vote")
def vote(parts: tuple[str, ...], ops: list[Any]) -> Vote | None:
    """`vote.sync.mode.type d, a, membermask` into `Vote`; None for another form."""
    if len(parts) != 4 or parts[1] != "sync" or len(ops) != 3:
        return None
    mode = _VOTE.get(parts[2])
    # The result type follows from the mode (.b32 for ballot, .pred otherwise).
    if mode is None or parts[3] != ("b32" if mode is VoteMode.ballot else "pred"):
        return None
    return Vote(mode, ops[0], ops[1], ops[2])


@reader("activemask")
def activemask(parts: tuple[str, ...], ops: list[Any]) -> Activemask | None:
    """`activemask.b32 d` into `Activemask`; None for another form."""
    if parts != ("activemask", "b32") or len(ops) != 1:
        return None
    return Activemask(ops[0])


@reader("elect")
def elect(parts: tuple[str, ...], ops: list[Any]) -> Elect | None:
    """`elect.sync d|p, membermask` into `Elect`; None for another form."""
    if parts != ("elect", "sync") or len(ops) != 2:
        return None
    d, p = pair(ops[0])
    return None if p is None else Elect(p, d, ops[1])
