"""The `Kernel` builder methods of `ptxdsl.instructions.prefetch`'s instructions: `k.prefetch`,
`k.prefetchu`.

A mixin of `ptxdsl.kernel.Kernel`; the instruction classes it emits know nothing of the
kernel (docs/CONTRIBUTING.md, Layers).
"""

from __future__ import annotations

from ..instructions.prefetch import Prefetch, PrefetchU, _space
from ..kernel_host import KernelHost


class PrefetchOps(KernelHost):
    def prefetch(self, addr, level="L2", *, space=None, evict=None) -> None:
        """`prefetch{.space}.level [addr];`: the line holding `addr` into L1 or L2 (`level`).
        `evict="last"` / `"normal"` (a .global address, level L2) gives it that L2 eviction
        priority: `prefetch.global.L2::evict_last [addr];` (PTX 7.4, sm_80)."""
        self.emit(Prefetch(_space("prefetch", addr, space), level, addr, evict))

    def prefetchu(self, addr) -> None:
        """`prefetchu.L1 [addr];`: the line into the uniform cache (a generic address)."""
        self.emit(PrefetchU(addr))
