"""`KernelHost`: what the builder mixins use of the kernel they are mixed into.

`ptxdsl.kernel.Kernel` puts `KernelCore`, `StructuredFlow` and the builder mixins
(`ptxdsl/builders/`, one per instruction family) together. A mixin's methods call the core
(`emit`, `reg`, `guard`, ...) and a few builders of other families (`mov`, `setp`, ...). Each
mixin derives from `KernelHost`, which declares those for the type checker only: at run time
it is an empty class, and mypy checks every declaration here against the definition `Kernel`
inherits, so the two cannot drift apart.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:  # pragma: no cover
    from .errors import SourceLoc
    from .instructions.base import Instruction
    from .kernel_core import _Guard
    from .operands import Label, NegPred, Reg, Symbol
    from .statements import LabelDef, Param, Statement
    from .types import ScalarType, StateSpace

    _I = TypeVar("_I", bound=Instruction)


class KernelHost:
    """Base of the builder mixins (declarations only; `KernelCore` and the families define
    them)."""

    if TYPE_CHECKING:  # pragma: no cover
        name: str
        params: list[Param]
        shared: list[Symbol]
        body: list[Statement | LabelDef]
        _named_regs: list[Reg]
        _labels: dict[str, Label]
        _placed: dict[str, SourceLoc]
        _used_labels: dict[str, SourceLoc]
        _guard: Reg | NegPred | None
        _loops: list[tuple[Label, Label]]
        _last_if: tuple[int, Label, SourceLoc] | None
        _n_entry: int
        _origin_regs: set[Reg]
        _labels_placed: int
        _pending_fits: list

        def emit(self, insn: _I) -> _I: ...
        def reg(self, type: ScalarType, name: str | None = None) -> Reg: ...
        def guard(self, pred: Reg | NegPred) -> _Guard: ...
        def fresh_label(self, hint: str = "L") -> Label: ...
        def place(self, label: Label) -> None: ...

        # Builders of other families that some mixins build on.
        def mov(self, a: Any, *, type: ScalarType | None = None,
                dst: Reg | None = None) -> Reg: ...
        def cvta(self, a: Reg, space: StateSpace | str, *, to: bool = False,
                 dst: Reg | None = None) -> Reg: ...
        def add(self, a: Any, b: Any, *, type: ScalarType | None = None, dst: Reg | None = None,
                mode: str | None = None, ftz: bool = False, sat: bool = False) -> Reg: ...
        def sub(self, a: Any, b: Any, *, type: ScalarType | None = None, dst: Reg | None = None,
                mode: str | None = None, ftz: bool = False, sat: bool = False) -> Reg: ...
        def setp(self, cmp: str, a: Any, b: Any, *, type: ScalarType | None = None,
                 bool_op: str | None = None, c: Any = None, ftz: bool = False,
                 dst: Reg | None = None) -> Reg: ...
