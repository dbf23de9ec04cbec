"""Readers for `ptxdsl.instructions.control`: bra{.uni}, ret, exit, trap, nanosleep."""

from __future__ import annotations

from typing import Any

from ...instructions.base import Instruction
from ...instructions.control import Bra, Exit, Nanosleep, Ret, Trap
from ...operands import Label
from . import reader

_BARE: dict[str, type[Instruction]] = {"ret": Ret, "exit": Exit, "trap": Trap}


@reader("bra")
def bra(parts: tuple[str, ...], ops: list[Any]) -> Bra | None:
    """`bra{.uni} label` into `Bra`; None for another form."""
    # A branch to a name no label of the function defines (a function, a later scope's
    # label) is not a Bra: its target is not a Label.
    if len(ops) != 1 or not isinstance(ops[0], Label) or parts not in (("bra",),
                                                                      ("bra", "uni")):
        return None
    return Bra(ops[0], len(parts) == 2)


@reader(*_BARE)
def bare(parts: tuple[str, ...], ops: list[Any]) -> Instruction | None:
    """ret, exit and trap (no qualifiers, no operands) into `Ret`, `Exit` and `Trap`; None for
    another form."""
    # `ret.uni` and `exit`'s sm_100 forms carry qualifiers ptxdsl does not model.
    if len(parts) != 1 or ops:
        return None
    return _BARE[parts[0]]()


@reader("nanosleep")
def nanosleep(parts: tuple[str, ...], ops: list[Any]) -> Nanosleep | None:
    """`nanosleep.u32 t` into `Nanosleep`; None for another form."""
    if parts != ("nanosleep", "u32") or len(ops) != 1:
        return None
    return Nanosleep(ops[0])
