"""Control flow: bra, ret, exit, trap (PTX ISA §9.7.12)."""

from __future__ import annotations

import attrs

from ..errors import OperandError
from ..kernel_host import KernelHost
from ..operands import Label
from .base import Instruction


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


class ControlOps(KernelHost):
    """Kernel builder methods for control instructions."""

    def bra(self, target: Label, *, when=None, uni: bool = False) -> None:
        """`bra target;`, or `@p bra target;` with `when=p` (`when=~p` for `@!p`)."""
        if when is None:
            self.emit(Bra(target, uni))
        else:
            with self.guard(when):
                self.emit(Bra(target, uni))

    def ret(self) -> None:
        self.emit(Ret())

    def exit(self) -> None:
        self.emit(Exit())

    def trap(self) -> None:
        self.emit(Trap())
