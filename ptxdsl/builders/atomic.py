"""The `Kernel` builder methods of `ptxdsl.instructions.atomic`'s instructions: `k.atom`,
`k.atom_cas`, `k.red`.

A mixin of `ptxdsl.kernel.Kernel`; the instruction classes it emits know nothing of the
kernel (docs/CONTRIBUTING.md, Layers).
"""

from __future__ import annotations

from ..instructions.atomic import Atom, AtomCas, Red, _space_of, _type_of
from ..kernel_host import KernelHost
from ..operands import Reg
from ..types import ScalarType as T


class AtomicOps(KernelHost):
    """Kernel builder methods for atom and red."""

    def atom(self, op, addr, b, *, type: T | None = None, space=None, sem=None, scope=None,
             dst: Reg | None = None) -> Reg:
        """`atom.op`: returns the old value. `space` defaults to the symbol's or the address
        register's known space; `type` to the value's type (bitwise ops, exch: its .bN)."""
        t = _type_of("atom", op, addr, (b, dst), type)
        d = dst if dst is not None else self.reg(t)
        self.emit(Atom(op, t, d, addr, b, _space_of("atom", addr, space), sem, scope))
        return d

    def atom_cas(self, addr, compare, value, *, type: T | None = None, space=None, sem=None,
                 scope=None, dst: Reg | None = None) -> Reg:
        """`atom.cas`: stores `value` where memory holds `compare`; returns the old value."""
        t = _type_of("atom", "cas", addr, (compare, value, dst), type)
        d = dst if dst is not None else self.reg(t)
        self.emit(AtomCas(t, d, addr, compare, value, _space_of("atom", addr, space), sem,
                          scope))
        return d

    def red(self, op, addr, b, *, type: T | None = None, space=None, sem=None,
            scope=None) -> None:
        """`red.op`: the reduction without a result (cheaper than atom when none is needed)."""
        t = _type_of("red", op, addr, (b,), type)
        self.emit(Red(op, t, addr, b, _space_of("red", addr, space), sem, scope))
