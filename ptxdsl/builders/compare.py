"""The `Kernel` builder methods of `ptxdsl.instructions.compare`'s instructions: `k.setp`,
`k.selp`.

A mixin of `ptxdsl.kernel.Kernel`; the instruction classes it emits know nothing of the
kernel (docs/CONTRIBUTING.md, Layers).
"""

from __future__ import annotations

from ..instructions.base import infer_type
from ..instructions.compare import Selp, Setp
from ..kernel_host import KernelHost
from ..operands import Predicate, Reg, Value
from ..types import ScalarType as T
from ..types import TypeLike, scalar_type


class CompareOps(KernelHost):
    def setp(self, cmp: str, a: Value, b: Value, *, type: TypeLike | None = None,
             bool_op: str | None = None, c: Predicate | None = None, ftz: bool = False,
             dst: Reg | None = None) -> Reg:
        """Compare into a fresh predicate: `k.setp('lt', i, n)`; also `i < n` on registers."""
        t = scalar_type(type) if type else infer_type("setp", a, b)
        p = dst if dst is not None else self.reg(T.pred)
        self.emit(Setp(cmp, t, p, a, b, bool_op, c, None, ftz))
        return p

    def selp(self, a: Value, b: Value, c: Reg, *, type: TypeLike | None = None,
             dst: Reg | None = None) -> Reg:
        """`c ? a : b`."""
        t = scalar_type(type) if type else infer_type("selp", a, b)
        d = dst if dst is not None else self.reg(t)
        self.emit(Selp(t, d, a, b, c))
        return d
