"""The `Kernel` builder methods of `ptxdsl.instructions.prefetch`'s instructions: `k.prefetch`,
`k.prefetchu`.

A mixin of `ptxdsl.kernel.Kernel`; the instruction classes it emits know nothing of the
kernel (docs/CONTRIBUTING.md, Layers).
"""

from __future__ import annotations

from ..instructions.prefetch import Prefetch, PrefetchU, _space
from ..kernel_host import KernelHost
from ..operands import AddrLike
from ..types import SpaceLike


class PrefetchOps(KernelHost):
    def prefetch(self, addr: AddrLike, level: str = "L2", *, space: SpaceLike | None = None,
                 evict: str | None = None) -> None:
        """`prefetch{.space}.level [addr];`: the line holding `addr` into L1 or L2 (`level`).
        `evict="last"` / `"normal"` (a .global address, level L2) gives it that L2 eviction
        priority: `prefetch.global.L2::evict_last [addr];` (PTX 7.4, sm_80)."""
        sp = _space("prefetch", addr, space)
        # The instruction takes the level and eviction by name and checks them (its fields are
        # typed as the members it makes of them).
        self.emit(Prefetch(sp, level, addr, evict))  # type: ignore[arg-type]

    def prefetchu(self, addr: AddrLike) -> None:
        """`prefetchu.L1 [addr];`: the line into the uniform cache (a generic address)."""
        self.emit(PrefetchU(addr))
