"""What a kernel body is made of: statements, label placements and parameters.

The common currency of the layers: the builder (`ptxdsl.kernel_core`) appends these, the PTX
front end (`ptxdsl.frontend`) reads them from text, and the checker and the emitter take them,
never the builder. Imports only operands, errors and the instruction base class.
"""

from __future__ import annotations

from typing import NamedTuple, final

import attrs

from .errors import BuildError, SourceLoc
from .instructions.base import Instruction
from .operands import Label, NegPred, Reg, Symbol, _align, _check_space, _show
from .types import StateSpace


def _param_kind(kind) -> None:
    if kind not in ("scalar", "pointer", "tensormap"):
        raise BuildError(f"Param: kind must be 'scalar', 'pointer' or 'tensormap', got "
                         f"{_show(kind)}")


@attrs.define(eq=False)
class Param(Symbol):
    """A kernel parameter. `kind` is 'scalar', 'pointer' or 'tensormap'."""

    kind: str = attrs.field(default="scalar", validator=lambda _s, _a, v: _param_kind(v))
    ptr_space: StateSpace | None = attrs.field(
        default=None, validator=lambda _s, _a, v: _check_space("Param", v, optional=True))
    ptr_align: int | None = attrs.field(default=None,
                                        converter=lambda v: _align(v, "Param .ptr"))
    is_bool: bool = False

    def declaration(self) -> str:
        if self.kind == "tensormap":
            return f".param .align {self.align} .b8 {self.name}[{self.count}]"
        text = f".param .{self.type.value}"
        if self.kind == "pointer":
            text += " .ptr"
            if self.ptr_space is not None:
                text += f" .{self.ptr_space.value}"
            if self.ptr_align is not None:
                text += f" .align {self.ptr_align}"
        return f"{text} {self.name}"


class Statement(NamedTuple):
    """One instruction in a kernel body, its guard, and the Python line that built it.

    A NamedTuple rather than an attrs class: one is made per instruction, on the hot path.
    """

    insn: Instruction
    guard: Reg | NegPred | None
    loc: SourceLoc

    def render(self) -> str:
        text = self.insn.render()
        if self.guard is not None:
            text = f"@{self.guard.render()} {text}"
        return text




@final   # so that `type(item) is LabelDef` tells a type checker what else `item` is
@attrs.frozen
class LabelDef:
    label: Label
    loc: SourceLoc
