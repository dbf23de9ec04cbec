"""Atomic read-modify-write and reductions on memory: atom, red (PTX ISA §9.7.13.5, §9.7.13.6).

Three operand shapes: `Atom` (d, [a], b), `AtomCas` (d, [a], b, c) and `Red` ([a], b). They share
the qualifier rules: `{.sem}{.scope}{.space}.op.type`, with the op/type table below (taken from
what ptxas accepts, which is narrower than "any type of the right width"). `Red` also takes a
vector `b` (`{b0, b1, ...}`: `.v2`/`.v4`/`.v8`, PTX 8.1, sm_90, global memory only) for the
op/type/width triples of `_VEC`.
"""

from __future__ import annotations

import enum
from typing import TYPE_CHECKING, Any, ClassVar

import attrs

from ..errors import BuildError, OperandError
from ..operands import Addr, Reg, Symbol, Vec
from ..types import BASE, Requires, Scope, Sem, StateSpace, req
from ..types import ScalarType as T
from .arith import as_bits
from .base import (
    Instruction,
    check_addr,
    check_dst,
    check_enum,
    check_src,
    infer_type,
    known_space,
)


class AtomOp(enum.Enum):
    add = "add"
    inc = "inc"
    dec = "dec"
    min = "min"
    max = "max"
    and_ = "and"
    or_ = "or"
    xor = "xor"
    exch = "exch"
    cas = "cas"


_TYPES: dict[AtomOp, tuple[T, ...]] = {
    AtomOp.add: (T.u32, T.s32, T.u64, T.f32, T.f64, T.f16, T.f16x2, T.bf16, T.bf16x2),
    AtomOp.inc: (T.u32,), AtomOp.dec: (T.u32,),
    AtomOp.min: (T.u32, T.s32, T.u64, T.s64), AtomOp.max: (T.u32, T.s32, T.u64, T.s64),
    AtomOp.and_: (T.b32, T.b64), AtomOp.or_: (T.b32, T.b64), AtomOp.xor: (T.b32, T.b64),
    AtomOp.exch: (T.b32, T.b64, T.b128), AtomOp.cas: (T.b16, T.b32, T.b64, T.b128),
}
_RED_OPS = tuple(op for op in AtomOp if op not in (AtomOp.exch, AtomOp.cas))
_ATOM_SEMS = (Sem.relaxed, Sem.acquire, Sem.release, Sem.acq_rel)
_RED_SEMS = (Sem.relaxed, Sem.release)
_SPACES = (StateSpace.generic, StateSpace.global_, StateSpace.shared, StateSpace.shared_cta,
           StateSpace.shared_cluster)
_HALF = (T.f16, T.f16x2, T.bf16, T.bf16x2)   # ptxas wants `.noftz` spelled out on these
_SM90 = req("7.8", 90)
_B128 = req("8.3", 90)
_VEC_REQ = req("8.1", 90)
_HINT_REQ = req("7.4", 80)      # .L2::cache_hint, as on ld/st
# Vector red (PTX ISA 8.1, sm_90): the widths each op/type pair takes, as ptxas 13 accepts them
# (every other combination, .f64 and the integer types included, it refuses); at most 128 bits.
_HALF_VEC = {T.f16: (2, 4, 8), T.bf16: (2, 4, 8), T.f16x2: (2, 4), T.bf16x2: (2, 4)}
_VEC: dict[AtomOp, dict[T, tuple[int, ...]]] = {
    AtomOp.add: {T.f32: (2, 4), **_HALF_VEC}, AtomOp.min: _HALF_VEC, AtomOp.max: _HALF_VEC,
}
# ptxas: vector red "can only be used with .global state space" (a generic address must
# point there).
_VEC_SPACES = (StateSpace.global_, StateSpace.generic)


def _ptx(t) -> str:
    return t.ptx if isinstance(t, T) else repr(t)


@attrs.frozen
class _Atomic(Instruction):
    """Qualifier handling shared by atom and red (no fields of its own)."""

    #: The `.sem` qualifiers the form takes (none written: PTX's default).
    SEMS: ClassVar[tuple[Sem, ...]] = _ATOM_SEMS
    #: The operations the form takes.
    OPS: ClassVar[tuple[AtomOp, ...]] = tuple(AtomOp)

    if TYPE_CHECKING:  # the fields every subclass defines (each in its own order)
        op: AtomOp
        type: T
        a: object
        space: StateSpace
        sem: Sem | None
        scope: Scope | None

    def _check_qualifiers(self) -> None:
        mn = self.MNEMONIC
        self._set("op", check_enum(mn, "op", self.op, AtomOp, self.OPS))
        self._set("space", check_enum(mn, "space", self.space, StateSpace, _SPACES))
        if self.sem is not None:
            self._set("sem", check_enum(mn, "sem", self.sem, Sem, self.SEMS))
        if self.scope is not None:
            self._set("scope", check_enum(mn, "scope", self.scope, Scope))
        allowed = _TYPES[self.op]
        if self.type not in allowed:
            raise OperandError(f"{mn}.{self.op.value}", "type",
                               "one of " + ", ".join(t.ptx for t in allowed), _ptx(self.type))

    def _check_memory(self, value_operands: tuple[str, ...]) -> None:
        """The address and the source operands (`b`, and `c` for cas)."""
        self._set("a", check_addr(self, "a", self.a, self.space))
        for name in value_operands:
            self._set(name, check_src(self, name, getattr(self, name), self.type,
                                      imm=self.type is not T.b128))

    def opcode(self) -> str:
        q = self.MNEMONIC
        if self.sem is not None:
            q += self.sem.ptx
        if self.scope is not None:
            q += self.scope.ptx
        q += self.space.ptx + "." + self.op.value
        if self.type in _HALF:
            q += ".noftz"
        return f"{q}.{self.type}"

    @property
    def requires(self) -> Requires:
        r = BASE
        if self.space in (StateSpace.shared_cta, StateSpace.shared_cluster) or (
                self.scope is Scope.cluster) or self.type in (T.bf16, T.bf16x2):
            r = _SM90
        return _B128 if self.type is T.b128 else r


@attrs.frozen
class Atom(_Atomic):
    """`atom{.sem}{.scope}{.space}.op{.noftz}.type d, [a], b;` (d = old value; op is not cas)."""

    MNEMONIC = "atom"
    OPS = tuple(op for op in AtomOp if op is not AtomOp.cas)
    op: AtomOp
    type: T
    d: Reg
    a: object
    b: object
    space: StateSpace = StateSpace.generic
    sem: Sem | None = None
    scope: Scope | None = None

    def __attrs_post_init__(self):
        self._check_qualifiers()
        check_dst(self, "d", self.d, self.type)
        self._check_memory(("b",))

    def operands(self):
        return (self.d, self.a, self.b)


@attrs.frozen
class AtomCas(_Atomic):
    """`atom{.sem}{.scope}{.space}.cas.type d, [a], b, c;`: stores c where [a] == b; d = old."""

    MNEMONIC = "atom"
    OPS = (AtomOp.cas,)
    type: T
    d: Reg
    a: object
    b: object
    c: object
    space: StateSpace = StateSpace.generic
    sem: Sem | None = None
    scope: Scope | None = None
    op: AtomOp = AtomOp.cas

    def __attrs_post_init__(self):
        self._check_qualifiers()
        check_dst(self, "d", self.d, self.type)
        self._check_memory(("b", "c"))

    def operands(self):
        return (self.d, self.a, self.b, self.c)


@attrs.frozen
class Red(_Atomic):
    """`red{.sem}{.scope}{.space}.op{.noftz}.type [a], b;`: atom without the old value.

    With `cache_policy` (a .b64 register from createpolicy; global memory only),
    `red{.sem}{.scope}{.space}.op{.noftz}.L2::cache_hint{.vN}.type [a], b, cache_policy;`.

    With a vector `b` (a tuple, list or `Vec` of 2, 4 or 8 values), the vector form
    `red{.sem}{.scope}{.global}.op{.noftz}.vN.type [a], {b0, ...};` (PTX 8.1, sm_90)::

        red.add.v2/.v4.f32
        red.{add,min,max}.noftz.v2/.v4/.v8.{f16,bf16}
        red.{add,min,max}.noftz.v2/.v4.{f16x2,bf16x2}

    on `.global` or a generic address of global memory.
    """

    MNEMONIC = "red"
    SEMS = _RED_SEMS
    OPS = _RED_OPS
    op: AtomOp
    type: T
    a: object
    b: object
    space: StateSpace = StateSpace.generic
    sem: Sem | None = None
    scope: Scope | None = None
    cache_policy: Reg | None = None

    def __attrs_post_init__(self):
        if not isinstance(self.b, tuple | list | Vec):
            self._check_qualifiers()
            self._check_memory(("b",))
        else:
            self._check_vector()
        if self.cache_policy is not None:
            self._set("cache_policy", check_src(self.opcode(), "cache_policy",
                                                self.cache_policy, T.b64, imm=False))
            # ptxas: "Modifier '.L2::cache_hint' cannot be applied to '.shared' space".
            if self.space not in _VEC_SPACES:
                raise OperandError(self.opcode(), "space", "global or generic (a cache hint "
                                   "applies to global memory only)", self.space.ptx)

    def _check_vector(self) -> None:
        b: Any = self.b
        items: tuple[object, ...] = tuple(b.items if isinstance(b, Vec) else b)
        self._set("op", check_enum("red", "op", self.op, AtomOp, self.OPS))
        self._set("space", check_enum("red", "space", self.space, StateSpace, _SPACES))
        if self.sem is not None:
            self._set("sem", check_enum("red", "sem", self.sem, Sem, self.SEMS))
        if self.scope is not None:
            self._set("scope", check_enum("red", "scope", self.scope, Scope))
        widths = _VEC.get(self.op, {})
        if self.type not in widths:
            raise OperandError(f"red.{self.op.value}", "type", "for a vector red, one of " + (
                ", ".join(t.ptx for t in widths) if widths else
                "none (vector red is add, min or max)"), _ptx(self.type))
        if len(items) not in widths[self.type]:
            raise OperandError(f"red.{self.op.value}.{self.type}", "b", "a vector of " + " or "
                               .join(map(str, widths[self.type])) + " values",
                               f"{len(items)} values")
        if self.space not in _VEC_SPACES:
            raise OperandError(f"red.{self.op.value}.v{len(items)}.{self.type}", "space",
                               "global or generic (vector red reaches global memory only)",
                               self.space.ptx or "generic")
        name = f"red.{self.op.value}.v{len(items)}.{self.type}"
        self._set("b", Vec(tuple(check_src(name, f"b[{i}]", v, self.type)
                                 for i, v in enumerate(items))))
        self._set("a", check_addr(self, "a", self.a, self.space))

    def opcode(self) -> str:
        head, _, tail = super().opcode().rpartition(".")
        if self.cache_policy is not None:
            head += ".L2::cache_hint"
        if isinstance(self.b, Vec):
            head += f".v{len(self.b.items)}"
        return f"{head}.{tail}"

    @property
    def requires(self) -> Requires:
        r = _VEC_REQ if isinstance(self.b, Vec) else super().requires
        return r.merge(_HINT_REQ) if self.cache_policy is not None else r

    def operands(self):
        if self.cache_policy is not None:
            return (self.a, self.b, self.cache_policy)
        return (self.a, self.b)


def _space_of(insn: str, addr, given) -> Any:
    """The space named by `space=` (as the user gave it: a StateSpace or its spelling), else
    the one the symbol or address register is known to point into (the instruction validates
    it)."""
    if given is not None:
        return given
    known = known_space(addr)
    if known is not None:
        return known
    raise BuildError(f"{insn}: cannot tell the state space of this address; pass space=... "
                     "('global', 'shared', 'shared::cta', 'shared::cluster' or 'generic')")


def _type_of(insn: str, op, addr, values, type) -> T:
    """`type=`, else the first typed value operand, else a one-element symbol's type; the
    bitwise ops, exch and cas take the bit type of that width."""
    if type is None:
        base = addr.base if isinstance(addr, Addr) else addr
        fallback = base.type if isinstance(base, Symbol) and base.count == 1 else None
        type = infer_type(insn, *values, default=fallback)
        if check_enum(insn, "op", op, AtomOp) in (AtomOp.and_, AtomOp.or_, AtomOp.xor,
                                                  AtomOp.exch, AtomOp.cas):
            type = as_bits(type)
    return type
