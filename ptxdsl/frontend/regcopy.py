"""Fresh registers for each inlined copy of a `.func` body.

The checker treats a register written once as one value (checker/values.py); a callee's
registers, spliced at every call site, would be written once per site and so known at none.
PTX gives each function its own registers, so each spliced copy gets its own: every `Reg` of
the copy replaced by a new register of the same name and type (registers compare by identity),
the same one throughout the copy. The caller's registers and the program are untouched.
"""

from __future__ import annotations

import copy
from typing import Any

import attrs

from ..errors import PtxdslError
from ..operands import Reg
from ..statements import Statement


class RegCopy:
    """One call site's renaming: each callee register to its copy."""

    def __init__(self) -> None:
        self.regs: dict[int, tuple[Reg, Reg]] = {}

    def reg(self, r: Reg) -> Reg:
        """The copy of callee register `r` (made on first use)."""
        got = self.regs.get(id(r))
        if got is None:
            # Kept with its original so the id stays that object's for the copy's lifetime.
            got = self.regs[id(r)] = (r, copy.copy(r))
        return got[1]

    def operand(self, x: Any) -> Any:
        """`x` (an operand, instruction or tuple of them) with the copies of its registers,
        rebuilt only where one changed."""
        if isinstance(x, Reg):
            return self.reg(x)
        if isinstance(x, tuple):
            new = tuple(self.operand(i) for i in x)
            return x if all(a is b for a, b in zip(new, x, strict=True)) else new
        if attrs.has(type(x)):
            changed = {}
            for f in attrs.fields(type(x)):
                if not f.init:
                    continue
                v = getattr(x, f.name)
                w = self.operand(v)
                if w is not v:
                    changed[f.name.lstrip("_")] = w
            return attrs.evolve(x, **changed) if changed else x
        return x

    def statement(self, item: Any) -> Any:
        """`item` with the copy's registers (unchanged where it cannot be rebuilt, so that
        statement keeps reading the shared register, as every copy did before)."""
        if type(item) is not Statement:
            return item
        try:
            return Statement(self.operand(item.insn), self.operand(item.guard), item.loc)
        except (PtxdslError, TypeError, ValueError):
            return item


__all__ = ["RegCopy"]
