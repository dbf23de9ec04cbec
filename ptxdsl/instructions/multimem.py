"""Multimem accesses: one access that reaches every GPU mapping a multicast memory object
(PTX ISA §9.7.9.16; cuda::ptx multimem_ld_reduce.h, multimem_st.h, multimem_red.h). Assembled
and golden-tested only: the project's tests never create multicast objects.

cuda::ptx's argument order, kernel first; the `.weak` forms have no scope argument::

    ptx::multimem_ld_reduce(ptx::sem_weak, ptx::op_min, p);        ptx.multimem_ld_reduce(k, "weak", "min", p, type=t.u32)
    ptx::multimem_ld_reduce(sem_relaxed, scope_gpu, op_add, p);    ptx.multimem_ld_reduce(k, "relaxed", "gpu", "add", p, type=t.u32)
    ptx::multimem_st(sem_release, scope_sys, p, v);                ptx.multimem_st(k, "release", "sys", p, v)
    ptx::multimem_red(sem_relaxed, scope_gpu, op_add, p, v);       ptx.multimem_red(k, "relaxed", "gpu", "add", p, v)

The forms cuda::ptx has are built (min/max .u32 .u64 .s32 .s64, add .u32 .u64 .s32, and/or/xor
.b32 .b64; st .b32 .b64), plus the scalar ones the ISA adds (add .f32 .f64; st of any 32/64-bit
type) and its vector forms, the table `_VEC` (`.v2/.v4.f32` for add and st, `.v2/.v4/.v8` of
f16/bf16 and `.v2/.v4` of f16x2/bf16x2 for add, min, max and st: a tuple `val` for st and red,
a tuple `d` of `Multimem` for ld_reduce); the scalar half-precision and `.acc::f32` forms are
not.
"""  # noqa: E501

from __future__ import annotations

import enum
from typing import Any

import attrs

from ..errors import BuildError, OperandError
from ..operands import Imm, Reg, Vec
from ..types import Requires, ScalarType, Scope, Sem, StateSpace, req
from . import _ptx_args as A
from .base import Instruction, check_addr, check_dst, check_enum, check_src
from .bulk import RedOp

__all__ = ["multimem_ld_reduce", "multimem_st", "multimem_red"]

T = ScalarType
SM90_81 = req("8.1", 90)


class MultimemKind(enum.Enum):
    ld_reduce = "ld_reduce"
    st = "st"
    red = "red"


# The op names (and `ptx.op_*` constants) are cp.reduce.async.bulk's: one meaning everywhere.
_OP_TYPES = {
    RedOp.min: (T.u32, T.u64, T.s32, T.s64), RedOp.max: (T.u32, T.u64, T.s32, T.s64),
    RedOp.add: (T.u32, T.u64, T.s32, T.f32, T.f64),    # float add: ptxas and the ISA, not cuda::ptx
    RedOp.and_: (T.b32, T.b64), RedOp.or_: (T.b32, T.b64), RedOp.xor: (T.b32, T.b64),
}
# multimem.st: cuda::ptx has .b32/.b64; the ISA (and ptxas) also take these same-size types.
_ST_TYPES: tuple[T, ...] = (T.b32, T.b64, T.u32, T.u64, T.s32, T.s64, T.f32, T.f64)
# The vector forms ptxas 13 takes at PTX 8.1 / sm_90 (each op, None for st: type -> widths),
# lanes of the type itself (.f16/.bf16 lanes in 16-bit registers); at most 128 bits.
_HALF_VEC = {T.f16: (2, 4, 8), T.bf16: (2, 4, 8), T.f16x2: (2, 4), T.bf16x2: (2, 4)}
_VEC: dict[RedOp | None, dict[T, tuple[int, ...]]] = {
    RedOp.add: {T.f32: (2, 4), **_HALF_VEC}, RedOp.min: _HALF_VEC, RedOp.max: _HALF_VEC,
    None: {T.f32: (2, 4), **_HALF_VEC},
}
# The memory orders each kind takes; .weak has no scope, the others need one.
_SEMS = {MultimemKind.ld_reduce: (Sem.weak, Sem.relaxed, Sem.acquire),
         MultimemKind.st: (Sem.weak, Sem.relaxed, Sem.release),
         MultimemKind.red: (Sem.relaxed, Sem.release)}


@attrs.frozen
class Multimem(Instruction):
    """`multimem.ld_reduce.sem{.scope}.global.op{.vN}.type d, [a];`,
    `multimem.st.sem{.scope}.global{.vN}.type [a], b;` (.b32 .b64 .u32 .u64 .s32 .s64 .f32 .f64),
    `multimem.red.sem.scope.global.op{.vN}.type [a], b;` — `a` a 64-bit multicast address;
    `b` (the destination or the value) a tuple for the vector forms::

        multimem.{ld_reduce,red}...add.v2/.v4.f32, multimem.st...v2/.v4.f32
        multimem.{ld_reduce,red}...{add,min,max}.v2/.v4/.v8.{f16,bf16}, st too
        multimem.{ld_reduce,red}...{add,min,max}.v2/.v4.{f16x2,bf16x2}, st too
    """

    MNEMONIC = "multimem"
    REQUIRES = SM90_81
    kind: MultimemKind
    sem: Sem
    scope: Scope | None
    op: RedOp | None
    type: ScalarType
    a: object
    b: object            # ld_reduce: the destination register; st/red: the value

    def __attrs_post_init__(self):
        kind = check_enum(self.MNEMONIC, "kind", self.kind, MultimemKind)
        self._set("kind", kind)
        insn = f"multimem.{kind.value}"
        sem = A.sem(insn, self.sem, _SEMS[kind])
        self._set("sem", sem)
        if sem is Sem.weak:
            if self.scope is not None:
                raise OperandError(insn, "scope", "no scope with .weak", repr(self.scope))
        else:
            if self.scope is None:
                raise OperandError(insn, "scope", f"a scope for .{sem.value}", "None")
            self._set("scope", A.scope(insn, self.scope))
        if kind is MultimemKind.st:
            if self.op is not None:
                raise OperandError(insn, "op", "no reduction operation for multimem.st",
                                   repr(self.op))
            op = None
            types = _ST_TYPES
        else:
            op = A.op(insn, self.op, RedOp)
            if op not in _OP_TYPES:
                raise OperandError(insn, "op", "one of 'min', 'max', 'add', 'and', 'or', 'xor'",
                                   f"'{op.value}'")
            self._set("op", op)
            types = _OP_TYPES[op]
        if isinstance(self.b, tuple | list | Vec):
            self._check_vector(insn, op)
            return
        self._set("type", check_enum(self.opcode(), "type", self.type, T, types))
        name = self.opcode()
        self._set("a", check_addr(name, "a", self.a, StateSpace.global_, (64,)))
        if kind is MultimemKind.ld_reduce:
            check_dst(name, "d", self.b, self.type)
        else:
            self._set("b", check_src(name, "b", self.b, self.type))

    def _check_vector(self, insn: str, op: RedOp | None) -> None:
        b: Any = self.b
        items: tuple[object, ...] = tuple(b.items if isinstance(b, Vec) else b)
        widths = _VEC.get(op, {})
        what = f"{insn}.{op.value}" if op is not None else insn
        self._set("type", check_enum(what, "type", self.type, T))
        if self.type not in widths:
            raise OperandError(what, "type", "for a vector form, one of " + (
                ", ".join(t.ptx for t in widths) if widths else
                "none (the vector forms are add, min, max and st)"),
                self.type.ptx if isinstance(self.type, T) else repr(self.type))
        if len(items) not in widths[self.type]:
            raise OperandError(f"{what}.{self.type.value}", "b", "a vector of " + " or ".join(
                map(str, widths[self.type])) + " values", f"{len(items)} values")
        name = f"{what}.v{len(items)}.{self.type.value}"
        self._set("a", check_addr(name, "a", self.a, StateSpace.global_, (64,)))
        dst = self.kind is MultimemKind.ld_reduce
        self._set("b", Vec(tuple(
            check_dst(name, f"d[{i}]", v, self.type) if dst else
            check_src(name, f"b[{i}]", v, self.type) for i, v in enumerate(items))))

    def opcode(self) -> str:
        q = f"multimem.{self.kind.value}{self.sem.ptx}"
        q += self.scope.ptx if isinstance(self.scope, Scope) else ""
        q += ".global"
        if isinstance(self.op, RedOp):
            q += f".{self.op.value}"
        if isinstance(self.b, Vec):
            q += f".v{len(self.b.items)}"
        return q + (f".{self.type.value}" if isinstance(self.type, T) else "")

    def operands(self):
        if self.kind is MultimemKind.ld_reduce:
            return (self.b, self.a)
        return (self.a, self.b)


# cuda::ptx's overloads: the .weak forms have no scope argument.
_LD_REDUCE = (("sem", "op", "addr"), ("sem", "scope", "op", "addr"))
_ST = (("sem", "addr", "val"), ("sem", "scope", "addr", "val"))
_RED = (("sem", "scope", "op", "addr", "val"),)


def _global(k, insn: str, addr):
    """A generic pointer becomes a .global address (cvta.to.global), as cuda::ptx converts."""
    return A.space_addr(k, insn, addr, StateSpace.global_)


def _value_type(name: str, op: RedOp | None, value, type) -> ScalarType:
    """The type from `type=`, else cuda::ptx's overload for the value: .bN for st and the
    bit operations, the register's own .uN/.sN for min/max/add."""
    if type is not None:
        return type
    if isinstance(value, tuple | list) and value and isinstance(value[0], Reg | Imm):
        return value[0].type          # a vector form: the lanes' own type
    if not isinstance(value, Reg | Imm):
        raise BuildError(f"{name}: pass type=... (the value does not say its type)")
    t = value.type
    if op is None or op in (RedOp.and_, RedOp.or_, RedOp.xor):
        return {32: T.b32, 64: T.b64}.get(t.bits, t)
    if t.kind == "b":
        return {32: T.u32, 64: T.u64}.get(t.bits, t)
    return t


@A.overloads(*_LD_REDUCE, extra=("=type",))
def multimem_ld_reduce(k, *args, type=None, **kwargs) -> Reg:
    """`multimem.ld_reduce.sem{.scope}.global.op.type d, [addr];` returns d:
    `(k, "weak", op, addr)` or `(k, sem, scope, op, addr)`; `type=` (cuda::ptx: the pointer's).
    The vector forms are the class's: `k.emit(Multimem(MultimemKind.ld_reduce, sem, scope, op,
    type, addr, (d0, d1, d2, d3)))` (a `vec=` here would make the result's type depend on
    it, which the generated stub cannot say)."""
    _, a = A.bind("multimem_ld_reduce", args, kwargs, _LD_REDUCE)
    if type is None:
        raise BuildError("multimem_ld_reduce: pass type=... (t.u32, t.s64, t.b32, ...): "
                         "cuda::ptx takes it from the pointer's type")
    t = check_enum("multimem.ld_reduce", "type", type, T)
    addr = _global(k, "multimem.ld_reduce", a["addr"])
    d = k.reg(t)
    k.emit(Multimem(MultimemKind.ld_reduce, a["sem"], a.get("scope"), a["op"], t, addr, d))
    return d


@A.overloads(*_ST, extra=("*type",))
def multimem_st(k, *args, type=None, **kwargs) -> None:
    """`multimem.st.sem{.scope}.global.{b32,b64} [addr], val;`: `(k, "weak", addr, val)` or
    `(k, sem, scope, addr, val)`; `val` a tuple is the vector form (`.v4.f32`, `.v8.bf16`)."""
    _, a = A.bind("multimem_st", args, kwargs, _ST)
    k.emit(Multimem(MultimemKind.st, a["sem"], a.get("scope"), None,
                    _value_type("multimem_st", None, a["val"], type),
                    _global(k, "multimem.st", a["addr"]), a["val"]))


@A.overloads(*_RED, extra=("*type",))
def multimem_red(k, *args, type=None, **kwargs) -> None:
    """`multimem.red.sem.scope.global.op.type [addr], val;`: `(k, sem, scope, op, addr, val)`;
    `val` a tuple is the vector form (`.v4.f32`, `.v8.bf16`)."""
    _, a = A.bind("multimem_red", args, kwargs, _RED)
    A.sem("multimem.red", a["sem"], _SEMS[MultimemKind.red])   # before the op: names the rule
    op = A.op("multimem.red", a["op"], RedOp)
    k.emit(Multimem(MultimemKind.red, a["sem"], a["scope"], op,
                    _value_type("multimem_red", op, a["val"], type),
                    _global(k, "multimem.red", a["addr"]), a["val"]))


# -- forms: (form, requires, note) — rendered by ptxdsl.forms ----------------------------------
_NOTE = "assembled only (no GPU test)"
FORMS: list[tuple[str, Requires, str]] = [
    ("multimem.ld_reduce.{weak,{relaxed,acquire}.<scope>}.global.{min,max}.{u32,u64,s32,s64}",
     SM90_81, _NOTE),
    ("multimem.ld_reduce.{weak,{relaxed,acquire}.<scope>}.global.add.{u32,u64,s32,f32,f64}",
     SM90_81, _NOTE + "; .f32/.f64 from the ISA"),
    ("multimem.ld_reduce.{weak,{relaxed,acquire}.<scope>}.global.{and,or,xor}.{b32,b64}",
     SM90_81, _NOTE),
    ("multimem.st.{weak,{relaxed,release}.<scope>}.global.{b,u,s,f}{32,64}", SM90_81,
     _NOTE + "; .u/.s/.f from the ISA"),
    ("multimem.red.{relaxed,release}.<scope>.global.{min,max,add,and,or,xor}.<type>", SM90_81,
     _NOTE + "; the ld_reduce op/type pairs"),
    ("multimem.{ld_reduce,red}.<sem>.global.add.{v2,v4}.f32, multimem.st.<sem>.global.{v2,v4}"
     ".f32", SM90_81, _NOTE + "; vector forms from the ISA"),
    ("multimem.{ld_reduce,red}.<sem>.global.{add,min,max}.{v2,v4,v8}.{f16,bf16}, "
     "{v2,v4}.{f16x2,bf16x2}; multimem.st of the same", SM90_81,
     _NOTE + "; vector forms from the ISA"),
]
