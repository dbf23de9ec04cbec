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
from ..instructions.arith_fold import folded, result_type
from ..instructions.base import infer_type
from ..instructions.move import Mov
from ..kernel_host import KernelHost
from ..operands import Reg, SpecialReg, Value
from ..provenance import derive
from ..types import ScalarType as T
from ..types import TypeLike, scalar_type


class ArithOps(KernelHost):
    """Kernel builder methods for arithmetic; each returns the destination register.

    When every source is a constant (`k.mul(0, 128, type=t.u32)`), the instruction is checked
    as written and then folded into one `mov` of the value the hardware computes (integers
    wrap, shifts clamp, .sat saturates); where that is not one exact value (a division by
    zero, an overflowing signed quotient, a float result that needs rounding, an approximate
    division, a zero whose sign depends on the rounding mode, a subnormal .ftz flushes) the
    call is a `BuildError` at your line."""

    def _binary(self, op, a, b, type, dst, mode=None, ftz=False, sat=False) -> Reg:
        if type is not None:
            t = type
        else:  # infer_type's answer, with the common case (a register first) inline
            t = a.type if a.__class__ is Reg else infer_type(op, a, b)
        if op in _LOGIC:
            if dst is None:  # the register keeps the operands' type; the op uses bits
                dst = self.reg(a.type if a.__class__ is Reg else infer_type(op, a, b, default=t))
            t = _AS_BITS.get(t) or as_bits(t)
        elif dst is None:
            dst = self.reg(_WIDE.get(t, t) if op == "mul" and mode == "wide" else t)
            if op in _MOVES_ADDRESS and mode is None and not sat \
                    and (a.__class__ is Reg and a.origin is not None
                         or b.__class__ is Reg and b.origin is not None):
                insn = self.emit(Binary(op, t, dst, a, b, mode, ftz, sat))
                derive(self, op, dst, insn.a, insn.b)   # a known address plus a constant
                return dst
        if a.__class__ is not Reg and b.__class__ is not Reg and _constants(a, b):
            return self._fold(Binary(op, t, dst, a, b, mode, ftz, sat))
        self.emit(Binary(op, t, dst, a, b, mode, ftz, sat))
        return dst

    def _fold(self, insn: Binary | Mad | Unary) -> Reg:
        """One `mov` of the value an instruction with only immediate sources computes (checked
        as that instruction first), so the PTX holds the constant, not the arithmetic."""
        self.emit(Mov(result_type(insn), insn.d, folded(insn)))
        return insn.d

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
        if _constants(a):
            return self._fold(Unary(op, t, d, a, ftz))
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
        if _constants(a, b, c):
            return self._fold(Mad(t, d, a, b, c, mode, ftz))
        self.emit(Mad(t, d, a, b, c, mode, ftz))
        return d


def _constants(*values: object) -> bool:
    """Whether every source is an immediate (no register or special register)."""
    return not any(isinstance(v, Reg | SpecialReg) for v in values)
