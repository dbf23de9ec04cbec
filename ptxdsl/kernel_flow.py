"""Structured control flow for the kernel builder: if_/else_, for_range, while_, loop,
break_/continue_, each lowered to labels and (guarded) branches.

A mixin of `ptxdsl.kernel.Kernel`; it relies on the core's `emit`, `place`, `fresh_label`,
`reg` and the instruction mixins' `mov`/`add`/`sub`/`setp`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

from .errors import BuildError, OperandError, user_loc
from .instructions.base import check_pred
from .instructions.control import Bra
from .kernel_core import Statement
from .operands import Label, NegPred, Reg
from .types import ScalarType


class StructuredFlow:
    """`with k.if_(p):`, `with k.else_():`, `with k.for_range(0, n) as i:`, `with
    k.while_(lambda: i < n):`, `with k.loop():` + `k.break_(when=p)`."""


    def _branch(self, target: Label, when: Reg | NegPred | None = None) -> None:
        if self._guard is not None:
            raise BuildError("structured control flow cannot be used inside a guard block")
        insn = Bra(target)
        if when is None:
            self.emit(insn)
            return
        self._guard = when
        try:
            self.emit(insn)
        finally:
            self._guard = None

    @staticmethod
    def _negate(p: Reg | NegPred) -> Reg | NegPred:
        return p.reg if isinstance(p, NegPred) else NegPred(p)

    @contextlib.contextmanager
    def if_(self, cond: Reg | NegPred) -> Iterator[None]:
        """Run the body when `cond` holds: `@!p bra ELSE; body; ELSE:`."""
        cond = check_pred("if_", "cond", cond, negatable=True)
        else_ = self.fresh_label("else")
        self._branch(else_, self._negate(cond))
        yield
        index = len(self.body)
        self.place(else_)
        self._last_if = (index, else_, user_loc())

    @contextlib.contextmanager
    def else_(self) -> Iterator[None]:
        """The other branch of the `if_` block that ends right before this one."""
        if self._last_if is None:
            raise BuildError("else_() must directly follow an if_() block")
        index, _else_label, _ = self._last_if
        end = self.fresh_label("endif")
        loc = user_loc()
        self.body.insert(index, Statement(Bra(end), None, loc))
        self._used_labels.setdefault(end.name, loc)
        self._last_if = None
        yield
        self.place(end)

    @contextlib.contextmanager
    def for_range(self, start, stop, step: int = 1, *,
                  type: ScalarType = ScalarType.u32) -> Iterator[Reg]:
        """A counted loop; yields the induction register. `stop` may be a register."""
        if not isinstance(step, int) or step == 0:
            raise OperandError("for_range", "step", "a non-zero integer", step)
        i = self.reg(type)
        self.mov(start, dst=i)  # type: ignore[attr-defined]
        head, cont, end = (self.fresh_label(h) for h in ("loop", "next", "endloop"))
        self.place(head)
        cmp_type = type
        if step < 0 and type.kind == "u":
            # Counting down past zero (range(10, 0, -3) ends at 1, then 1 - 3) wraps an unsigned
            # counter to a huge value that still compares greater: compare signed instead.
            cmp_type = {16: ScalarType.s16, 32: ScalarType.s32, 64: ScalarType.s64}[type.bits]
        p = self.setp("lt" if step > 0 else "gt", i, stop,  # type: ignore[attr-defined]
                      type=cmp_type)
        self._branch(end, NegPred(p))
        self._loops.append((cont, end))
        try:
            yield i
        finally:
            self._loops.pop()
        self.place(cont)
        if step > 0:
            self.add(i, step, dst=i)  # type: ignore[attr-defined]
        else:  # an unsigned counter cannot take a negative immediate
            self.sub(i, -step, dst=i)  # type: ignore[attr-defined]
        self._branch(head)
        self.place(end)

    @contextlib.contextmanager
    def while_(self, cond: Callable[[], Reg | NegPred]) -> Iterator[None]:
        """`while cond(): body`; `cond` is called once to emit the test at the loop head."""
        head, end = self.fresh_label("while"), self.fresh_label("endwhile")
        self.place(head)
        p = check_pred("while_", "cond", cond(), negatable=True)
        self._branch(end, self._negate(p))
        self._loops.append((head, end))
        try:
            yield
        finally:
            self._loops.pop()
        self._branch(head)
        self.place(end)

    @contextlib.contextmanager
    def loop(self) -> Iterator[None]:
        """An endless loop left with `break_()`."""
        head, end = self.fresh_label("loop"), self.fresh_label("endloop")
        self.place(head)
        self._loops.append((head, end))
        try:
            yield
        finally:
            self._loops.pop()
        self._branch(head)
        self.place(end)

    def break_(self, when: Reg | NegPred | None = None) -> None:
        if not self._loops:
            raise BuildError("break_() outside a loop")
        self._branch(self._loops[-1][1], when)

    def continue_(self, when: Reg | NegPred | None = None) -> None:
        if not self._loops:
            raise BuildError("continue_() outside a loop")
        self._branch(self._loops[-1][0], when)

