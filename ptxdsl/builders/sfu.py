"""The `Kernel` builder methods of `ptxdsl.instructions.sfu`'s instruction: `k.ex2`, `k.lg2`,
`k.rcp`, `k.sqrt`, `k.rsqrt`, `k.sin`, `k.cos`, `k.tanh`.

A mixin of `ptxdsl.kernel.Kernel`; the instruction class it emits knows nothing of the
kernel (docs/CONTRIBUTING.md, Layers).
"""

from __future__ import annotations

from ..instructions.base import check_enum, infer_type
from ..instructions.sfu import Sfu, SfuMode, SfuOp, default_ftz, default_mode
from ..kernel_host import KernelHost
from ..operands import Reg, Value
from ..types import TypeLike, scalar_type


class SfuOps(KernelHost):
    """Kernel builder methods for the special functions; each returns the destination register
    (a fresh one of the instruction's type unless `dst=` names one).

    The type comes from `a`'s register, else `dst`'s (`type=` for an immediate, a bit-typed
    register or a packed pair); `mode=` defaults to `'approx'`, or `'rn'` for `rcp` and
    `sqrt` (IEEE, as `k.div` rounds); `ftz=` defaults to the form's requirement (`ex2` on
    `.bf16` flushes)."""

    def _sfu(self, op: SfuOp, a: Value, type: TypeLike | None, dst: Reg | None,
             mode: SfuMode | str | None, ftz: bool | None) -> Reg:
        t = scalar_type(type) if type is not None else infer_type(op.value, a, dst)
        m = default_mode(op, t) if mode is None else \
            check_enum(f"{op.value}.{t.value}", "mode", mode, SfuMode)
        f = default_ftz(op, t, m) if ftz is None else ftz
        d = dst if dst is not None else self.reg(t)
        self.emit(Sfu(op, t, d, a, m, f))
        return d

    def ex2(self, a: Value, *, type: TypeLike | None = None, dst: Reg | None = None,
            mode: SfuMode | str | None = None, ftz: bool | None = None) -> Reg:
        """`ex2.approx{.ftz}.type d, a;`: 2^a (.f32, .f16, .f16x2, .bf16, .bf16x2)."""
        return self._sfu(SfuOp.ex2, a, type, dst, mode, ftz)

    def lg2(self, a: Value, *, type: TypeLike | None = None, dst: Reg | None = None,
            mode: SfuMode | str | None = None, ftz: bool | None = None) -> Reg:
        """`lg2.approx{.ftz}.f32 d, a;`: log2(a)."""
        return self._sfu(SfuOp.lg2, a, type, dst, mode, ftz)

    def rcp(self, a: Value, *, type: TypeLike | None = None, dst: Reg | None = None,
            mode: SfuMode | str | None = None, ftz: bool | None = None) -> Reg:
        """`rcp.{rn,rz,rm,rp,approx}{.ftz}.f32 d, a;` or `.f64`: 1/a (`.rn` by default)."""
        return self._sfu(SfuOp.rcp, a, type, dst, mode, ftz)

    def sqrt(self, a: Value, *, type: TypeLike | None = None, dst: Reg | None = None,
             mode: SfuMode | str | None = None, ftz: bool | None = None) -> Reg:
        """`sqrt.{rn,rz,rm,rp,approx}{.ftz}.f32 d, a;` or `.f64`: sqrt(a) (`.rn` by default)."""
        return self._sfu(SfuOp.sqrt, a, type, dst, mode, ftz)

    def rsqrt(self, a: Value, *, type: TypeLike | None = None, dst: Reg | None = None,
              mode: SfuMode | str | None = None, ftz: bool | None = None) -> Reg:
        """`rsqrt.approx{.ftz}.type d, a;`: 1/sqrt(a) (.f32, .f64)."""
        return self._sfu(SfuOp.rsqrt, a, type, dst, mode, ftz)

    def sin(self, a: Value, *, type: TypeLike | None = None, dst: Reg | None = None,
            mode: SfuMode | str | None = None, ftz: bool | None = None) -> Reg:
        """`sin.approx{.ftz}.f32 d, a;`: sin(a), a in radians."""
        return self._sfu(SfuOp.sin, a, type, dst, mode, ftz)

    def cos(self, a: Value, *, type: TypeLike | None = None, dst: Reg | None = None,
            mode: SfuMode | str | None = None, ftz: bool | None = None) -> Reg:
        """`cos.approx{.ftz}.f32 d, a;`: cos(a), a in radians."""
        return self._sfu(SfuOp.cos, a, type, dst, mode, ftz)

    def tanh(self, a: Value, *, type: TypeLike | None = None, dst: Reg | None = None,
             mode: SfuMode | str | None = None, ftz: bool | None = None) -> Reg:
        """`tanh.approx.type d, a;`: tanh(a) (.f32, .f16, .f16x2, .bf16, .bf16x2)."""
        return self._sfu(SfuOp.tanh, a, type, dst, mode, ftz)
