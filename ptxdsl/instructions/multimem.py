"""Multimem accesses: one access that reaches every GPU mapping a multicast memory object
(PTX ISA §9.7.9.16; cuda::ptx multimem_ld_reduce.h, multimem_st.h, multimem_red.h). Assembled
and golden-tested only: the project's tests never create multicast objects.

cuda::ptx's argument order, kernel first; the `.weak` forms have no scope argument:

    ptx::multimem_ld_reduce(ptx::sem_weak, ptx::op_min, p);        ptx.multimem_ld_reduce(k, "weak", "min", p, type=t.u32)
    ptx::multimem_ld_reduce(sem_relaxed, scope_gpu, op_add, p);    ptx.multimem_ld_reduce(k, "relaxed", "gpu", "add", p, type=t.u32)
    ptx::multimem_st(sem_release, scope_sys, p, v);                ptx.multimem_st(k, "release", "sys", p, v)
    ptx::multimem_red(sem_relaxed, scope_gpu, op_add, p, v);       ptx.multimem_red(k, "relaxed", "gpu", "add", p, v)

The integer forms cuda::ptx has are built (min/max .u32 .u64 .s32 .s64, add .u32 .u64 .s32,
and/or/xor .b32 .b64); the ISA's floating-point and vector forms are not.
"""  # noqa: E501

from __future__ import annotations

import enum

import attrs

from ..errors import BuildError, OperandError
from ..operands import Imm, Reg
from ..types import Requires, ScalarType, Scope, Sem, StateSpace, req
from .base import Instruction, check_addr, check_dst, check_enum, check_src

__all__ = ["multimem_ld_reduce", "multimem_st", "multimem_red"]

T = ScalarType
SM90_81 = req("8.1", 90)


class MultimemKind(enum.Enum):
    ld_reduce = "ld_reduce"
    st = "st"
    red = "red"


class MultimemOp(enum.Enum):
    min = "min"
    max = "max"
    add = "add"
    and_ = "and"
    or_ = "or"
    xor = "xor"


_OP_TYPES = {
    MultimemOp.min: (T.u32, T.u64, T.s32, T.s64), MultimemOp.max: (T.u32, T.u64, T.s32, T.s64),
    MultimemOp.add: (T.u32, T.u64, T.s32),
    MultimemOp.and_: (T.b32, T.b64), MultimemOp.or_: (T.b32, T.b64),
    MultimemOp.xor: (T.b32, T.b64),
}
# The memory orders each kind takes; .weak has no scope, the others need one.
_SEMS = {MultimemKind.ld_reduce: (Sem.weak, Sem.relaxed, Sem.acquire),
         MultimemKind.st: (Sem.weak, Sem.relaxed, Sem.release),
         MultimemKind.red: (Sem.relaxed, Sem.release)}


@attrs.frozen
class Multimem(Instruction):
    """`multimem.ld_reduce.sem{.scope}.global.op.type d, [a];`,
    `multimem.st.sem{.scope}.global.type [a], b;` (.b32, .b64),
    `multimem.red.sem.scope.global.op.type [a], b;` — `a` a 64-bit multicast address."""

    MNEMONIC = "multimem"
    REQUIRES = SM90_81
    kind: MultimemKind
    sem: Sem
    scope: Scope | None
    op: MultimemOp | None
    type: ScalarType
    a: object
    b: object            # ld_reduce: the destination register; st/red: the value

    def __attrs_post_init__(self):
        kind = check_enum(self.MNEMONIC, "kind", self.kind, MultimemKind)
        self._set("kind", kind)
        insn = f"multimem.{kind.value}"
        sem = check_enum(insn, "sem", self.sem, Sem, _SEMS[kind])
        self._set("sem", sem)
        if sem is Sem.weak:
            if self.scope is not None:
                raise OperandError(insn, "scope", "no scope with .weak", repr(self.scope))
        else:
            if self.scope is None:
                raise OperandError(insn, "scope", f"a scope for .{sem.value}", "None")
            self._set("scope", check_enum(insn, "scope", self.scope, Scope))
        if kind is MultimemKind.st:
            if self.op is not None:
                raise OperandError(insn, "op", "no reduction operation for multimem.st",
                                   repr(self.op))
            types = (T.b32, T.b64)
        else:
            op = check_enum(insn, "op", self.op, MultimemOp)
            self._set("op", op)
            types = _OP_TYPES[op]
        self._set("type", check_enum(self.opcode(), "type", self.type, T, types))
        name = self.opcode()
        self._set("a", check_addr(name, "a", self.a, StateSpace.global_, (64,)))
        if kind is MultimemKind.ld_reduce:
            check_dst(name, "d", self.b, self.type)
        else:
            self._set("b", check_src(name, "b", self.b, self.type))

    def opcode(self) -> str:
        q = f"multimem.{self.kind.value}{self.sem.ptx}"
        q += self.scope.ptx if isinstance(self.scope, Scope) else ""
        q += ".global"
        if isinstance(self.op, MultimemOp):
            q += f".{self.op.value}"
        return q + (f".{self.type.value}" if isinstance(self.type, T) else "")

    def operands(self):
        if self.kind is MultimemKind.ld_reduce:
            return (self.b, self.a)
        return (self.a, self.b)


def _split(name: str, sem, args, n: int, scope):
    """cuda::ptx's positional arguments after `sem`: `.weak` forms have no scope argument."""
    sem = check_enum(name, "sem", sem, Sem)
    if sem is not Sem.weak and scope is None:
        if not args or not isinstance(args[0], str | Scope):
            raise BuildError(f"{name}: .{sem.value} needs a scope: "
                             f"{name}(k, '{sem.value}', scope, ...)")
        scope, args = args[0], args[1:]
    if len(args) != n:
        raise BuildError(f"{name}: expected {n} arguments after sem"
                         f"{'' if sem is Sem.weak else ' and scope'}, got {len(args)}")
    return sem, scope, args


def _value_type(name: str, op: MultimemOp | None, value, type) -> ScalarType:
    """The type from `type=`, else cuda::ptx's overload for the value: .bN for st and the
    bit operations, the register's own .uN/.sN for min/max/add."""
    if type is not None:
        return type
    if not isinstance(value, Reg | Imm):
        raise BuildError(f"{name}: pass type=... (the value does not say its type)")
    t = value.type
    if op is None or op in (MultimemOp.and_, MultimemOp.or_, MultimemOp.xor):
        return {32: T.b32, 64: T.b64}.get(t.bits, t)
    if t.kind == "b":
        return {32: T.u32, 64: T.u64}.get(t.bits, t)
    return t


def multimem_ld_reduce(k, sem, *args, scope=None, type=None):
    """`multimem.ld_reduce.sem{.scope}.global.op.type d, [addr];` returns d:
    `(k, "weak", op, addr)` or `(k, sem, scope, op, addr)`; `type=` (cuda::ptx: the pointer's)."""
    sem, scope, (op, addr) = _split("multimem_ld_reduce", sem, args, 2, scope)
    if type is None:
        raise BuildError("multimem_ld_reduce: pass type=... (t.u32, t.s64, t.b32, ...): "
                         "cuda::ptx takes it from the pointer's type")
    t = check_enum("multimem.ld_reduce", "type", type, T)
    d = k.reg(t)
    k.emit(Multimem(MultimemKind.ld_reduce, sem, scope, op, t, addr, d))
    return d


def multimem_st(k, sem, *args, scope=None, type=None) -> None:
    """`multimem.st.sem{.scope}.global.{b32,b64} [addr], val;`: `(k, "weak", addr, val)` or
    `(k, sem, scope, addr, val)`."""
    sem, scope, (addr, val) = _split("multimem_st", sem, args, 2, scope)
    k.emit(Multimem(MultimemKind.st, sem, scope, None,
                    _value_type("multimem_st", None, val, type), addr, val))


def multimem_red(k, sem, *args, scope=None, type=None) -> None:
    """`multimem.red.sem.scope.global.op.type [addr], val;`: `(k, sem, scope, op, addr, val)`."""
    sem, scope, (op, addr, val) = _split("multimem_red", sem, args, 3, scope)
    op = check_enum("multimem.red", "op", op, MultimemOp)
    k.emit(Multimem(MultimemKind.red, sem, scope, op,
                    _value_type("multimem_red", op, val, type), addr, val))


# -- forms: (form, requires, note) — rendered by ptxdsl.forms ----------------------------------
_NOTE = "assembled only (no GPU test); integer forms of cuda::ptx"
FORMS: list[tuple[str, Requires, str]] = [
    ("multimem.ld_reduce.{weak,{relaxed,acquire}.<scope>}.global.{min,max}.{u32,u64,s32,s64}",
     SM90_81, _NOTE),
    ("multimem.ld_reduce.{weak,{relaxed,acquire}.<scope>}.global.add.{u32,u64,s32}", SM90_81,
     _NOTE),
    ("multimem.ld_reduce.{weak,{relaxed,acquire}.<scope>}.global.{and,or,xor}.{b32,b64}",
     SM90_81, _NOTE),
    ("multimem.st.{weak,{relaxed,release}.<scope>}.global.{b32,b64}", SM90_81, _NOTE),
    ("multimem.red.{relaxed,release}.<scope>.global.{min,max,add,and,or,xor}.<type>", SM90_81,
     _NOTE + "; the ld_reduce op/type pairs"),
]
