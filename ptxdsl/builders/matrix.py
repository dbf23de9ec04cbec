"""The `Kernel` builder methods of `ptxdsl.instructions.matrix`'s instructions: `k.ldmatrix`,
`k.stmatrix`.

A mixin of `ptxdsl.kernel.Kernel`; the instruction classes it emits know nothing of the
kernel (docs/CONTRIBUTING.md, Layers).
"""

from __future__ import annotations

from collections.abc import Sequence

from ..instructions.matrix import MatrixCount, ldmatrix, stmatrix
from ..kernel_host import KernelHost
from ..operands import AddrLike, Reg
from ..types import SpaceLike


class MatrixOps(KernelHost):
    """Kernel builder methods: `k.ldmatrix(addr, 4, trans=True)`, `k.stmatrix(addr, regs)`."""

    def ldmatrix(self, addr: AddrLike, num: int | MatrixCount | None = None, *,
                 trans: bool = False, space: SpaceLike | None = None,
                 dst: Sequence[Reg] | None = None) -> tuple[Reg, ...]:
        """Load `num` (1, 2, 4; default 4, or one per `dst` register) 8x8 b16 matrices: one
        .b32 register per matrix (returned). The space defaults to .shared (a generic
        register address: generic)."""
        return ldmatrix(self, addr, num, trans=trans, space=space, dst=dst)

    def stmatrix(self, addr: AddrLike, regs: Reg | Sequence[Reg], *, trans: bool = False,
                 space: SpaceLike | None = None) -> None:
        """Store 1, 2 or 4 8x8 b16 matrices, one .b32 register per matrix per thread."""
        stmatrix(self, addr, regs, trans=trans, space=space)
