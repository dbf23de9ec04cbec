"""The `Kernel` builder methods of `ptxdsl.instructions.control`'s instructions: `k.bra`, `k.ret`,
`k.exit`, `k.trap`, `k.nanosleep`.

A mixin of `ptxdsl.kernel.Kernel`; the instruction classes it emits know nothing of the
kernel (docs/CONTRIBUTING.md, Layers).
"""

from __future__ import annotations

from ..instructions.control import Bra, Exit, Nanosleep, Ret, Trap
from ..kernel_host import KernelHost
from ..operands import IntLike, Label, Predicate, Reg


class ControlOps(KernelHost):
    """Kernel builder methods for control instructions."""

    def bra(self, target: Label, *, when: Predicate | None = None, uni: bool = False) -> None:
        """`bra target;`, or `@p bra target;` with `when=p` (`when=~p` for `@!p`)."""
        if when is None:
            self.emit(Bra(target, uni))
        else:
            with self.guard(when):
                self.emit(Bra(target, uni))

    def ret(self) -> None:
        """`ret;`"""
        self.emit(Ret())

    def exit(self) -> None:
        """`exit;`: this thread ends."""
        self.emit(Exit())

    def trap(self) -> None:
        """`trap;`: aborts the kernel (a launch error on the host)."""
        self.emit(Trap())

    def nanosleep(self, t: Reg | IntLike) -> None:
        """`nanosleep.u32 t;` (a .u32 register or an integer 0..2^32-1): a spin loop's
        back-off."""
        self.emit(Nanosleep(t))
