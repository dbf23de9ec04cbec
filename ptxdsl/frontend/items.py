"""The statements a PTX file holds that no builder makes: kept as text, with what the
checker needs to know of them (the registers a raw instruction writes and reads).

`Raw` is an instruction ptxdsl does not model (or one whose typed reading would not render
back to the same text); `Directive` is a declaration, a scope brace, `.loc` or `.pragma`
inside a body. Both render exactly the text they were read from. `PlainReg` and
`ScopedLabel` keep the spelling of names that ptxdsl's own `Reg` and `Label` would render
differently (a register declared without `%`, a label repeated in sibling `{ }` scopes).
"""

from __future__ import annotations

from typing import Any

import attrs

from ..instructions.base import as_tuple
from ..instructions.raw import Directive, Raw  # noqa: F401 (re-exported: the front end's)
from ..operands import Label, Operand, Reg


@attrs.define(eq=False, repr=False)
class PlainReg(Reg):
    """A register declared without the `%` sigil (`.reg .pred P1;`, as cuda::ptx's inline
    assembly writes them)."""

    def render(self) -> str:
        """The name without `%`, as it was declared."""
        return self.name

    def __repr__(self) -> str:
        return f"Reg({self.name}: {self.type.value})"


@attrs.frozen
class ScopedLabel(Label):
    """A label of a nested `{ }` scope. PTX scopes labels like registers, so compilers repeat
    one name in sibling scopes (nvcc's inlined `LAB_WAIT`); the analysis needs one name per
    label, the text keeps the written one."""

    shown: str = attrs.field(default="", eq=False)

    def render(self) -> str:
        """The label as the source wrote it (its unique name is for the analysis only)."""
        return self.shown


@attrs.frozen
class RawOperand(Operand):
    """An operand kept as its text (a call's parenthesised list, an address expression no
    ptxdsl operand spells); `regs` are the registers it mentions."""

    text: str
    regs: tuple = attrs.field(default=(), converter=as_tuple)

    def render(self) -> str:
        """The operand's text, unchanged."""
        return self.text

    def inner(self) -> tuple:
        """What the operand holds, for `operands.registers_in` (which registers an
        instruction reads and writes): here the registers the text mentions."""
        return self.regs


@attrs.frozen
class Bracket(Operand):
    """`[a, b, ...]`: a bracketed operand list (a TMA tensor address `[map, {x, y}]`)."""

    items: tuple = attrs.field(converter=as_tuple)

    def render(self) -> str:
        """`[a, b]`, each item rendered."""
        return "[" + ", ".join(_render(i) for i in self.items) + "]"

    def inner(self) -> tuple:
        """The items (see `RawOperand.inner`)."""
        return self.items


@attrs.frozen
class Braces(Operand):
    """`{a, b, ...}` holding immediates or sinks (ptxdsl's `Vec` holds registers only):
    a vector source with constants, an initialiser."""

    items: tuple = attrs.field(converter=as_tuple)

    def render(self) -> str:
        """`{a, b}`, each item rendered."""
        return "{" + ", ".join(_render(i) for i in self.items) + "}"

    def inner(self) -> tuple:
        """The items (see `RawOperand.inner`)."""
        return self.items


@attrs.frozen
class PredPair(Operand):
    """`p|q`: the two predicate results of setp (and friends)."""

    p: Operand
    q: Operand

    def render(self) -> str:
        """`p|q`."""
        return f"{_render(self.p)}|{_render(self.q)}"

    def inner(self) -> tuple:
        """The two predicates (see `RawOperand.inner`)."""
        return (self.p, self.q)


def _render(x: Any) -> str:
    return x.render() if isinstance(x, Operand) else str(x)
