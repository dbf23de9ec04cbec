"""The `Kernel` builder methods of `ptxdsl.instructions.cvt_packed`'s instructions: `k.cvt_packed`.

A mixin of `ptxdsl.kernel.Kernel`; the instruction classes it emits know nothing of the
kernel (docs/CONTRIBUTING.md, Layers).
"""

from __future__ import annotations

from ..instructions.cvt_packed import cvt_packed
from ..kernel_host import KernelHost
from ..operands import Reg, Value
from ..types import ScalarType


class PackedCvtOps(KernelHost):
    """Kernel builder method `k.cvt_packed(dtype, a, b=None, ...)` (see `cvt_packed`)."""

    def cvt_packed(self, to: ScalarType | str, a: Value, b: Value | None = None, *,
                   src_type: ScalarType | str | None = None, rnd: str = "rn",
                   relu: bool = False, satfinite: bool | None = None,
                   dst: Reg | None = None) -> Reg:
        """Pack two .f32 (or one .f16x2) into f16x2/bf16x2/e4m3x2/e5m2x2, or unpack fp8 pairs
        to .f16x2: `k.cvt_packed("bf16x2", hi, lo)`, `k.cvt_packed("f16x2", q,
        src_type="e4m3x2")`. (The kernel's `type=`/`atype=` keywords take ptxdsl scalar types
        only; fp8 pairs have none, hence `to`/`src_type`.)"""
        return cvt_packed(self, to, a, b, atype=src_type, rnd=rnd, relu=relu,
                          satfinite=satfinite, dst=dst)
