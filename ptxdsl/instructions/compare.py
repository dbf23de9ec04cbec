"""Comparison and selection: setp, selp (PTX ISA §9.7.7)."""

from __future__ import annotations

from typing import cast

import attrs

from ..errors import OperandError
from ..operands import NegPred, Operand, Reg
from ..types import ScalarType as T
from .base import Instruction, check_choice, check_dst, check_pred, check_src

INT_CMP = ("eq", "ne", "lt", "le", "gt", "ge")
UNSIGNED_CMP = ("lo", "ls", "hi", "hs")
FLOAT_CMP = ("equ", "neu", "ltu", "leu", "gtu", "geu", "num", "nan")
BOOL_OPS = ("and", "or", "xor")
_SETP_TYPES = (T.b16, T.b32, T.b64, T.u16, T.u32, T.u64, T.s16, T.s32, T.s64, T.f32, T.f64)


def cmp_ops_for(t: T) -> tuple[str, ...]:
    """The comparison operators `setp` takes for type `t`: eq/ne for `.bN`, the ordered ones for
    integers (plus lo/ls/hi/hs for unsigned), and the unordered and NaN tests for floats."""
    if t.kind == "b":
        return ("eq", "ne")
    if t.kind == "u":
        return INT_CMP + UNSIGNED_CMP
    if t.kind == "s":
        return INT_CMP
    return INT_CMP + FLOAT_CMP


@attrs.frozen
class Setp(Instruction):
    """`setp.cmp{.bool}{.ftz}.type p{|q}, a, b{, {!}c};`"""

    MNEMONIC = "setp"
    cmp: str
    type: T
    p: Reg
    a: object
    b: object
    bool_op: str | None = None
    c: Reg | NegPred | None = None
    q: Reg | None = None
    ftz: bool = False

    def __attrs_post_init__(self):
        if self.type not in _SETP_TYPES:
            raise OperandError("setp", "type", "an integer, bit or .f32/.f64 type",
                               f".{self.type}")
        check_choice(f"setp.{self.type}", "cmp", self.cmp, cmp_ops_for(self.type))
        name = self.opcode()
        if self.ftz and self.type is not T.f32:
            raise OperandError(name, "ftz", "an .f32 comparison", f".{self.type}")
        check_pred(name, "p", self.p)
        if self.q is not None:
            check_pred(name, "q", self.q)
        if (self.bool_op is None) != (self.c is None):
            raise OperandError(name, "c", "a predicate exactly when bool_op is given",
                               repr(self.c))
        if self.bool_op is not None:
            check_choice(name, "bool_op", self.bool_op, BOOL_OPS)
            check_pred(name, "c", self.c, negatable=True)
        self._set("a", check_src(name, "a", self.a, self.type))
        self._set("b", check_src(name, "b", self.b, self.type))

    def opcode(self) -> str:
        q = f"setp.{self.cmp}"
        if self.bool_op:
            q += "." + self.bool_op
        if self.ftz:
            q += ".ftz"
        return f"{q}.{self.type}"

    def render(self) -> str:
        dst = self.p.render() + (f"|{self.q.render()}" if self.q is not None else "")
        # a and b hold operands once __attrs_post_init__ has checked them.
        ops = [dst, cast(Operand, self.a).render(), cast(Operand, self.b).render()]
        if self.c is not None:
            ops.append(self.c.render())
        return f"{self.opcode()} {', '.join(ops)};"

    def operands(self):
        return (self.p, self.a, self.b) + ((self.c,) if self.c is not None else ())


@attrs.frozen
class Selp(Instruction):
    """`selp.type d, a, b, c;` — d = c ? a : b."""

    MNEMONIC = "selp"
    type: T
    d: Reg
    a: object
    b: object
    c: Reg

    def __attrs_post_init__(self):
        if self.type not in _SETP_TYPES:
            raise OperandError("selp", "type", "an integer, bit or .f32/.f64 type",
                               f".{self.type}")
        name = self.opcode()
        check_dst(name, "d", self.d, self.type)
        self._set("a", check_src(name, "a", self.a, self.type))
        self._set("b", check_src(name, "b", self.b, self.type))
        check_pred(name, "c", self.c)

    def opcode(self) -> str:
        return f"selp.{self.type}"

    def operands(self):
        return (self.d, self.a, self.b, self.c)
