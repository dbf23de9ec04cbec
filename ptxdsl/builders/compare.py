"""The `Kernel` builder methods of `ptxdsl.instructions.compare`'s instructions: `k.setp`,
`k.selp`.

A mixin of `ptxdsl.kernel.Kernel`; the instruction classes it emits know nothing of the
kernel (docs/CONTRIBUTING.md, Layers).
"""

from __future__ import annotations

from ..instructions.base import infer_type
from ..instructions.compare import Selp, Setp
from ..kernel_host import KernelHost
from ..operands import Reg
from ..types import ScalarType as T


class CompareOps(KernelHost):
    def setp(self, cmp: str, a, b, *, type=None, bool_op=None, c=None, ftz=False,
             dst=None) -> Reg:
        """Compare into a fresh predicate: `k.setp('lt', i, n)`; also `i < n` on registers."""
        t = type or infer_type("setp", a, b)
        p = dst if dst is not None else self.reg(T.pred)
        self.emit(Setp(cmp, t, p, a, b, bool_op, c, None, ftz))
        return p

    def selp(self, a, b, c: Reg, *, type=None, dst=None) -> Reg:
        """`c ? a : b`."""
        t = type or infer_type("selp", a, b)
        d = dst if dst is not None else self.reg(t)
        self.emit(Selp(t, d, a, b, c))
        return d
