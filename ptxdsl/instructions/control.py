"""Control flow: bra, ret, exit, trap (PTX ISA §9.7.12), and nanosleep (§9.7.13.12), which
suspends the thread for about the given number of nanoseconds (at most about 1 ms): a
back-off for a spin loop on memory another thread updates.

::

    nanosleep.u32 t;                        k.nanosleep(t)    (t: a .u32 register or 0..2^32-1)
"""

from __future__ import annotations

from typing import Any

import attrs

from ..errors import OperandError
from ..operands import Label, _show
from ..types import BASE, Requires, ScalarType
from .base import Instruction, check_src

__all__ = ["Bra", "Ret", "Exit", "Trap", "Nanosleep", "FORMS"]


@attrs.frozen
class Bra(Instruction):
    """`bra{.uni} target;` (guard it with `@p`/`@!p` for a conditional branch)."""

    MNEMONIC = "bra"
    target: Label
    uni: bool = False

    def __attrs_post_init__(self):
        if not isinstance(self.target, Label):
            raise OperandError("bra", "target", "a label (k.label / k.fresh_label)",
                               repr(self.target))
        if type(self.uni) is not bool:   # a truthy "no" must not add .uni (a divergence claim)
            raise OperandError("bra", "uni", "True or False", _show(self.uni))

    def opcode(self) -> str:
        return "bra.uni" if self.uni else "bra"

    def operands(self):
        return (self.target,)


@attrs.frozen
class Ret(Instruction):
    """`ret;`"""

    MNEMONIC = "ret"

    def opcode(self) -> str:
        return "ret"


@attrs.frozen
class Exit(Instruction):
    """`exit;`"""

    MNEMONIC = "exit"

    def opcode(self) -> str:
        return "exit"


@attrs.frozen
class Trap(Instruction):
    """`trap;` — aborts the kernel with an error the host sees as an illegal instruction."""

    MNEMONIC = "trap"

    def opcode(self) -> str:
        return "trap"


@attrs.frozen
class Nanosleep(Instruction):
    """`nanosleep.u32 t;` — the thread sleeps for a time in [0, 2t] ns (at most about 1 ms)."""

    MNEMONIC = "nanosleep"
    t: Any

    def __attrs_post_init__(self):
        self._set("t", check_src(self.MNEMONIC, "t", self.t, ScalarType.u32))

    def opcode(self) -> str:
        return "nanosleep.u32"

    def operands(self):
        return (self.t,)


FORMS: list[tuple[str, Requires, str]] = [
    ("bra{.uni} target", BASE, "guarded by @p / @!p: conditional"),
    ("ret", BASE, ""),
    ("exit", BASE, ""),
    ("trap", BASE, ""),
    ("nanosleep.u32 t", BASE, "t: .u32 register or immediate"),
]
