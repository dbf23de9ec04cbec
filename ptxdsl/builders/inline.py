"""The `Kernel` builder methods of `ptxdsl.instructions.inline`'s instructions: `k.asm`.

A mixin of `ptxdsl.kernel.Kernel`; the instruction classes it emits know nothing of the
kernel (docs/CONTRIBUTING.md, Layers).
"""

from __future__ import annotations

from collections.abc import Sequence

from ..errors import BuildError, OperandError
from ..instructions.base import _given
from ..instructions.inline import INSN, InlineAsm
from ..kernel_host import KernelHost
from ..operands import Addr, Imm, NegPred, Number, Predicate, Reg, SpecialReg, Symbol
from ..types import Requires, ScalarType

# What `ins=` takes: an operand, or `(value, type)` to check a register's type or type a number.
AsmIn = Reg | NegPred | Imm | Addr | Symbol | SpecialReg | Number | tuple[Reg | Number, ScalarType]


class InlineOps(KernelHost):
    """Kernel builder method `k.asm` (inline PTX)."""

    def asm(self, template: str, *,
            outs: ScalarType | Reg | Sequence[ScalarType | Reg] = (),
            ins: AsmIn | Sequence[AsmIn] = (),
            requires: Requires | str | tuple[str, str] | None = None,
            when: Predicate | None = None) -> tuple[Reg, ...]:
        """Emit raw PTX; return the output registers (a tuple, in `outs` order).

        `outs`: types (a fresh register each) or existing registers (read-write); `ins`:
        registers, predicates, ints, `Imm`, `Addr`, `Symbol`, special registers, or
        `(value, type)` to check a register's type or type a number. `requires`: the PTX ISA
        version and target the template needs, e.g. `("7.8", "sm_90")`. `when=p` guards a
        single-instruction template (`@p insn`), like `with k.guard(p):`.

        >>> (d,) = k.asm("prmt.b32 $0, $1, $2, $3;", outs=[t.b32], ins=[a, b, 0x3210])
        """
        if not isinstance(outs, ScalarType | Reg | list | tuple):
            raise OperandError(INSN, "outs", "a list of output registers or types",
                               _given(outs))
        out_specs = (outs,) if isinstance(outs, ScalarType | Reg) else tuple(outs)
        in_ops = tuple(ins) if isinstance(ins, list | tuple) else (ins,)
        regs = tuple(self.reg(o) if isinstance(o, ScalarType) else o for o in out_specs)
        insn = InlineAsm(template, regs, in_ops, requires)
        for i, op in enumerate(insn.bound):
            owner = op.base if isinstance(op, Addr) else op
            if isinstance(owner, Reg | Symbol) and owner.kernel not in (None, self) or (
                    isinstance(owner, Reg) and owner.kernel is None):
                raise OperandError(INSN, f"${i}", f"an operand of kernel '{self.name}'",
                                   _given(owner))
        mine = {"%" + r.name for r in self._named_regs} | set(self._labels) | {
            s.name for s in (*self.params, *self.shared)}
        clash = sorted(insn.declared & mine)
        if clash:
            raise BuildError(f"{INSN}: the template declares {clash[0]}, which shadows a name "
                             f"of kernel '{self.name}'; choose another name")
        if when is not None:
            with self.guard(when):
                return self._emit_asm(insn)
        return self._emit_asm(insn)

    def _emit_asm(self, insn: InlineAsm) -> tuple[Reg, ...]:
        if self._guard is not None and not insn.guardable:
            raise BuildError(f"{INSN}: a guard predicates exactly one instruction; this "
                             "template is a block, has several statements or its own @guard "
                             "(use `with k.if_(p):`, or a guard placeholder @$N inside it)")
        self.emit(insn)
        return insn.outs
