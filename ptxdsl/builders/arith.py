"""The `Kernel` builder methods of `ptxdsl.instructions.arith`'s instructions: `k.add`, `k.sub`,
`k.mul`, `k.div`, `k.rem`, `k.min`, `k.max`, `k.and_`, `k.or_`, `k.xor`, `k.shl`, `k.shr`,
`k.abs`, `k.neg`, `k.not_`, `k.mad`.

A mixin of `ptxdsl.kernel.Kernel`; the instruction classes it emits know nothing of the
kernel (docs/CONTRIBUTING.md, Layers).
"""

from __future__ import annotations

from ..instructions.arith import (
    _AS_BITS,
    _LOGIC,
    _MOVES_ADDRESS,
    _WIDE,
    Binary,
    Mad,
    Unary,
    as_bits,
)
from ..instructions.base import infer_type
from ..kernel_host import KernelHost
from ..operands import Reg, Value
from ..provenance import derive
from ..types import ScalarType as T
from ..types import TypeLike, scalar_type


class ArithOps(KernelHost):
    """Kernel builder methods for arithmetic; each returns the destination register."""

    def _binary(self, op, a, b, type, dst, mode=None, ftz=False, sat=False) -> Reg:
        if type is not None:
            t = type
        else:  # infer_type's answer, with the common case (a register first) inline
            t = a.type if a.__class__ is Reg else infer_type(op, a, b)
        if op in _LOGIC:
            if dst is None:  # the register keeps the operands' type; the op uses bits
                dst = self.reg(a.type if a.__class__ is Reg else infer_type(op, a, b))
            t = _AS_BITS.get(t) or as_bits(t)
        elif dst is None:
            dst = self.reg(_WIDE.get(t, t) if op == "mul" and mode == "wide" else t)
            if op in _MOVES_ADDRESS and mode is None and not sat \
                    and (a.__class__ is Reg and a.origin is not None
                         or b.__class__ is Reg and b.origin is not None):
                insn = self.emit(Binary(op, t, dst, a, b, mode, ftz, sat))
                derive(self, op, dst, insn.a, insn.b)   # a known address plus a constant
                return dst
        self.emit(Binary(op, t, dst, a, b, mode, ftz, sat))
        return dst

    def add(self, a: Value, b: Value, *, type: TypeLike | None = None, dst: Reg | None = None,
            mode: str | None = None, ftz: bool = False, sat: bool = False) -> Reg:
        """`add{.rnd}{.ftz}{.sat}.type d, a, b;` (`mode=` the rounding of a float add)."""
        return self._binary("add", a, b, type, dst, mode, ftz, sat)

    def sub(self, a: Value, b: Value, *, type: TypeLike | None = None, dst: Reg | None = None,
            mode: str | None = None, ftz: bool = False, sat: bool = False) -> Reg:
        """`sub{.rnd}{.ftz}{.sat}.type d, a, b;`"""
        return self._binary("sub", a, b, type, dst, mode, ftz, sat)

    def mul(self, a: Value, b: Value, *, type: TypeLike | None = None, dst: Reg | None = None,
            mode: str | None = None, ftz: bool = False) -> Reg:
        """`mul.lo` by default for integers; mode='hi' or 'wide' (double-width result)."""
        return self._binary("mul", a, b, type, dst, mode, ftz)

    def div(self, a: Value, b: Value, *, type: TypeLike | None = None, dst: Reg | None = None,
            mode: str | None = None) -> Reg:
        """`div.type d, a, b;` (`mode='approx'`/`'full'`/`'rn'`... for floats)."""
        return self._binary("div", a, b, type, dst, mode)

    def rem(self, a: Value, b: Value, *, type: TypeLike | None = None,
            dst: Reg | None = None) -> Reg:
        """`rem.type d, a, b;`"""
        return self._binary("rem", a, b, type, dst)

    def min(self, a: Value, b: Value, *, type: TypeLike | None = None,
            dst: Reg | None = None) -> Reg:
        """`min.type d, a, b;`"""
        return self._binary("min", a, b, type, dst)

    def max(self, a: Value, b: Value, *, type: TypeLike | None = None,
            dst: Reg | None = None) -> Reg:
        """`max.type d, a, b;`"""
        return self._binary("max", a, b, type, dst)

    def and_(self, a: Value, b: Value, *, type: TypeLike | None = None,
             dst: Reg | None = None) -> Reg:
        """`and.bN d, a, b;` (the register keeps the operands' type)"""
        return self._binary("and", a, b, type, dst)

    def or_(self, a: Value, b: Value, *, type: TypeLike | None = None,
            dst: Reg | None = None) -> Reg:
        """`or.bN d, a, b;`"""
        return self._binary("or", a, b, type, dst)

    def xor(self, a: Value, b: Value, *, type: TypeLike | None = None,
            dst: Reg | None = None) -> Reg:
        """`xor.bN d, a, b;`"""
        return self._binary("xor", a, b, type, dst)

    def shl(self, a: Value, b: Value, *, type: TypeLike | None = None,
            dst: Reg | None = None) -> Reg:
        """`shl.bN d, a, b;`"""
        return self._binary("shl", a, b, type, dst)

    def shr(self, a: Value, b: Value, *, type: TypeLike | None = None,
            dst: Reg | None = None) -> Reg:
        """`shr.u32`/`shr.s32` (logical/arithmetic by the register's signedness)."""
        t = type or infer_type("shr", a)
        return self._binary("shr", a, b, t, dst)

    def _unary(self, op, a, type, dst, ftz=False) -> Reg:
        t = type or infer_type(op, a)
        if op == "not":
            t = as_bits(t)
        d = dst if dst is not None else self.reg(infer_type(op, a, default=t) if op == "not"
                                                 else t)
        self.emit(Unary(op, t, d, a, ftz))
        return d

    def abs(self, a: Value, *, type: TypeLike | None = None, dst: Reg | None = None,
            ftz: bool = False) -> Reg:
        """`abs{.ftz}.type d, a;`"""
        return self._unary("abs", a, type, dst, ftz)

    def neg(self, a: Value, *, type: TypeLike | None = None, dst: Reg | None = None,
            ftz: bool = False) -> Reg:
        """`neg{.ftz}.type d, a;`"""
        return self._unary("neg", a, type, dst, ftz)

    def not_(self, a: Value, *, type: TypeLike | None = None, dst: Reg | None = None) -> Reg:
        """`not.bN d, a;`"""
        return self._unary("not", a, type, dst)

    def mad(self, a: Value, b: Value, c: Value, *, type: TypeLike | None = None,
            dst: Reg | None = None, mode: str | None = None, ftz: bool = False) -> Reg:
        """`mad.lo` for integers (mode='hi'/'wide' too), `mad.rn` for floats."""
        t = scalar_type(type) if type else infer_type("mad", a, b, c)
        wide = {T.u16: T.u32, T.u32: T.u64, T.s16: T.s32, T.s32: T.s64}
        d = dst if dst is not None else self.reg(wide.get(t, t) if mode == "wide" else t)
        self.emit(Mad(t, d, a, b, c, mode, ftz))
        return d
