"""Asynchronous stores and reductions into a (remote) CTA's shared memory that complete on that
CTA's mbarrier, and the cp.async arrive-on (PTX ISA §9.7.9.12, §9.7.9.13, §9.7.9.25.3.4;
cuda::ptx st_async.h, red_async.h, cp_async_mbarrier_arrive{,_noinc}.h).

::

    ptx::st_async(remote_addr, value, remote_bar);   ptx.st_async(k, remote_addr, value, remote_bar)
    ptx::red_async(ptx::op_add, dest, value, bar);   ptx.red_async(k, "add", dest, value, bar)
    ptx::cp_async_mbarrier_arrive(bar);              ptx.cp_async_mbarrier_arrive(k, bar)

`addr`/`dest` and `remote_bar` are `.shared::cluster` addresses: a 32-bit register from
`ptx.mapa(k, "shared::cluster", ...)`, a 64-bit one holding such an address, or (this CTA's)
shared symbol. Each store completes `sizeof(value)` bytes of transaction count on the mbarrier
in the CTA that holds `addr`.
"""

from __future__ import annotations

import attrs

from ..errors import OperandError
from ..operands import Addr, Imm, Reg, Vec, _show
from ..types import Requires, ScalarType, StateSpace, req
from . import _ptx_args as A
from ._tma_addr import infer_space, mbar_addr, tma_addr
from .base import Instruction, _given, check_enum, check_src, refuse
from .bulk import RedOp

__all__ = ["st_async", "red_async", "cp_async_mbarrier_arrive", "cp_async_mbarrier_arrive_noinc"]

S = StateSpace
T = ScalarType
SM90_81 = req("8.1", 90)
_COMPLETE = ".shared::cluster.mbarrier::complete_tx::bytes"
_ST_TYPES = (T.b32, T.b64, T.u32, T.u64, T.s32, T.s64, T.f32, T.f64)


def _value(insn: str, value, t: ScalarType):
    """One source, or 2 (any type) or 4 (32-bit types) of them for .v2/.v4 (128 bits at most:
    ptxas 'Vector type too large, exceeds 128 bit limit')."""
    if isinstance(value, tuple | list | Vec):
        items = tuple(value.items if isinstance(value, Vec) else value)
        if len(items) not in (2, 4) or len(items) * t.bits > 128:
            raise OperandError(insn, "value", "1 value, or a vector of 2 (or, for 32-bit "
                               "types, 4) values: at most 128 bits",
                               f"{len(items)} values of .{t.value}")
        return Vec(tuple(check_src(insn, f"value[{i}]", v, t) for i, v in enumerate(items)))
    return check_src(insn, "value", value, t)


def _bits_type(insn: str, value) -> ScalarType:
    """cuda::ptx's type for a value: .b32 / .b64 by the register's width."""
    items = value.items if isinstance(value, Vec) else value
    items = items if isinstance(items, tuple | list) else (items,)
    for v in items:
        if isinstance(v, Reg | Imm) and v.type.bits in (32, 64):
            return T.b32 if v.type.bits == 32 else T.b64
        if isinstance(v, Reg):
            raise OperandError(insn, "value", "a 32- or 64-bit register (st.async stores "
                               ".b32/.b64/.u32/.s32/.f32/... values; widen smaller ones first)",
                               f"register %{v.name} of type .{v.type.value}")
    refuse(insn, "cannot tell the value's width from immediates alone; pass type=... "
           "(e.g. type=t.b32)")


@attrs.frozen
class StAsync(Instruction):
    """`st.async{.weak}.shared::cluster.mbarrier::complete_tx::bytes{.v2,.v4}.type [addr],
    value, [remote_bar];` with .type = .b32 .b64 .u32 .u64 .s32 .s64 .f32 .f64 (.v4: 32-bit
    types). `.weak` is the default semantics: cuda::ptx writes it, CUTLASS and Triton leave it
    out (`weak=False`); the two are the same instruction."""

    MNEMONIC = "st.async"
    REQUIRES = SM90_81
    type: ScalarType
    addr: object
    value: object
    remote_bar: object
    weak: bool = attrs.field(default=True, kw_only=True)

    def __attrs_post_init__(self):
        self._set("type", check_enum(self.MNEMONIC, "type", self.type, T, _ST_TYPES))
        if type(self.weak) is not bool:   # a truthy "no" must not change the text
            raise OperandError(self.MNEMONIC, "weak", "True or False", _show(self.weak))
        self._set("value", _value(self.MNEMONIC, self.value, self.type))
        name = self.opcode()
        self._set("addr", tma_addr(name, "addr", self.addr, S.shared_cluster))
        self._set("remote_bar", mbar_addr(name, "remote_bar", self.remote_bar, S.shared_cluster))

    def opcode(self) -> str:
        vec = f".v{len(self.value.items)}" if isinstance(self.value, Vec) else ""
        return f"st.async{'.weak' if self.weak else ''}{_COMPLETE}{vec}.{self.type.value}"

    def operands(self):
        return (self.addr, self.value, self.remote_bar)


# The types ptxas accepts per operation ("Incorrect type '.u64' for operation '.min'").
# The op names (and `ptx.op_*` constants) are those of cp.reduce.async.bulk: one meaning.
_RED_TYPES = {
    RedOp.inc: (T.u32,), RedOp.dec: (T.u32,),
    RedOp.min: (T.u32, T.s32), RedOp.max: (T.u32, T.s32),
    RedOp.add: (T.u32, T.s32, T.u64),
    RedOp.and_: (T.b32,), RedOp.or_: (T.b32,), RedOp.xor: (T.b32,),
}


@attrs.frozen
class RedAsync(Instruction):
    """`red.async.relaxed.cluster.shared::cluster.mbarrier::complete_tx::bytes.op.type [dest],
    value, [remote_bar];` with op/type: .inc/.dec .u32; .min/.max .u32 .s32;
    .add .u32 .s32 .u64; .and/.or/.xor .b32."""

    MNEMONIC = "red.async"
    REQUIRES = SM90_81
    op: RedOp
    type: ScalarType
    dest: object
    value: object
    remote_bar: object

    def __attrs_post_init__(self):
        op = A.op(self.MNEMONIC, self.op, RedOp)
        self._set("op", op)
        self._set("type", check_enum(f"red.async.{op.value}", "type", self.type, T,
                                     _RED_TYPES[op]))
        name = self.opcode()
        self._set("value", check_src(name, "value", self.value, self.type))
        self._set("dest", tma_addr(name, "dest", self.dest, S.shared_cluster))
        self._set("remote_bar", mbar_addr(name, "remote_bar", self.remote_bar, S.shared_cluster))

    def opcode(self) -> str:
        return f"red.async.relaxed.cluster{_COMPLETE}.{self.op.value}.{self.type.value}"

    def operands(self):
        return (self.dest, self.value, self.remote_bar)


_BAR_SPACES = (S.generic, S.shared, S.shared_cta)


@attrs.frozen
class CpAsyncMbarrierArrive(Instruction):
    """`cp.async.mbarrier.arrive{.noinc}{.shared{::cta}}.b64 [addr];`: the mbarrier gets an
    arrive-on when this thread's prior cp.async operations complete."""

    MNEMONIC = "cp.async.mbarrier.arrive"
    space: StateSpace
    addr: Addr
    noinc: bool = False

    def __attrs_post_init__(self):
        self._set("space", check_enum(self.MNEMONIC, "space", self.space, S, _BAR_SPACES))
        if not isinstance(self.noinc, bool):
            raise OperandError(self.MNEMONIC, "noinc", "True or False", _given(self.noinc))
        self._set("addr", tma_addr(self.opcode(), "addr", self.addr, self.space))

    @property
    def requires(self) -> Requires:
        return req("7.8", 80) if self.space is S.shared_cta else req("7.0", 80)

    def opcode(self) -> str:
        return ("cp.async.mbarrier.arrive" + (".noinc" if self.noinc else "")
                + self.space.ptx + ".b64")

    def operands(self):
        return (self.addr,)


# -- builder functions (cuda::ptx names, kernel first) -----------------------------------------
def _cluster(k, insn: str, addr):
    return A.space_addr(k, insn, addr, S.shared_cluster)


def st_async(k, addr, value, remote_bar, *, type=None) -> None:
    """`st.async...complete_tx::bytes{.v2,.v4}.type [addr], value, [remote_bar];` — value is
    one register/immediate or a tuple of 2 or 4; the type defaults to cuda::ptx's .b32/.b64
    by the value's width."""
    if type is None:
        type = _bits_type("st.async", value)
    addr, remote_bar = _cluster(k, "st.async", addr), _cluster(k, "st.async", remote_bar)
    k.emit(StAsync(type, addr, tuple(value) if isinstance(value, list) else value, remote_bar))


def _red_type(op: RedOp, value) -> ScalarType:
    """cuda::ptx's overload for the value: .b32 for the bit ops, .u64 for any 64-bit add (its
    int64_t overload emits .u64 too), else the register's own type."""
    allowed = _RED_TYPES[op]
    if len(allowed) == 1:
        return allowed[0]
    if isinstance(value, Reg | Imm):
        t = value.type
        if t.bits == 64:
            return T.u64
        if t in allowed:
            return t
        if t.bits == 32 and t.kind == "b":
            return T.u32
    refuse(f"red.async.{op.value}", "cannot tell the value's type (u32 or s32); pass type=...")


def red_async(k, op, dest, value, remote_bar, *, type=None) -> None:
    """`red.async.relaxed.cluster.shared::cluster.mbarrier::complete_tx::bytes.op.type [dest],
    value, [remote_bar];` (cuda::ptx::red_async; op: 'inc' 'dec' 'min' 'max' 'add' 'and' 'or'
    'xor', or cuda::ptx's op_* spellings and `ptx.op_*` constants). Generic pointers are
    converted to .shared::cluster addresses first."""
    op = A.op("red.async", op, RedOp)
    dest, remote_bar = _cluster(k, "red.async", dest), _cluster(k, "red.async", remote_bar)
    k.emit(RedAsync(op, type if type is not None else _red_type(op, value), dest, value,
                    remote_bar))


def _arrive(k, addr, space, noinc):
    name = "cp.async.mbarrier.arrive" + (".noinc" if noinc else "")
    spaces = (S.generic, S.shared_cta)
    sp = infer_space(name, addr, spaces) if space is None else A.space(name, "space", space,
                                                                        spaces)
    k.emit(CpAsyncMbarrierArrive(sp, A.space_addr(k, name, addr, sp), noinc))


def cp_async_mbarrier_arrive(k, addr, *, space=None) -> None:
    """`cp.async.mbarrier.arrive.shared::cta.b64 [addr];` for a shared symbol or 32-bit
    address, the generic form for a 64-bit generic one (`space=` 'shared' or 'generic' to
    choose). cuda::ptx writes the generic form with a 32-bit shared address; ptxdsl names the
    space (PTX 7.8), which ptxas reads the same way."""
    _arrive(k, addr, space, False)


def cp_async_mbarrier_arrive_noinc(k, addr, *, space=None) -> None:
    """`cp.async.mbarrier.arrive.noinc.shared::cta.b64 [addr];` (as cp_async_mbarrier_arrive)."""
    _arrive(k, addr, space, True)


# -- forms: (form, requires, note) — rendered by ptxdsl.forms ----------------------------------
FORMS: list[tuple[str, Requires, str]] = [
    ("st.async.weak.shared::cluster.mbarrier::complete_tx::bytes{,.v2}.{b,u,s,f}{32,64}",
     SM90_81, ""),
    ("st.async.weak.shared::cluster.mbarrier::complete_tx::bytes.v4.{b32,u32,s32,f32}",
     SM90_81, ""),
    ("red.async.relaxed.cluster.shared::cluster.mbarrier::complete_tx::bytes.{inc,dec}.u32",
     SM90_81, ""),
    ("red.async.relaxed.cluster.shared::cluster.mbarrier::complete_tx::bytes.{min,max}"
     ".{u32,s32}", SM90_81, ""),
    ("red.async.relaxed.cluster.shared::cluster.mbarrier::complete_tx::bytes.add"
     ".{u32,s32,u64}", SM90_81, "int64 values use .u64, as cuda::ptx does"),
    ("red.async.relaxed.cluster.shared::cluster.mbarrier::complete_tx::bytes.{and,or,xor}.b32",
     SM90_81, ""),
    ("cp.async.mbarrier.arrive{.noinc}{,.shared}.b64 [addr]", req("7.0", 80),
     "bare .shared: the CpAsyncMbarrierArrive class only"),
    ("cp.async.mbarrier.arrive{.noinc}.shared::cta.b64 [addr]", req("7.8", 80),
     "cuda::ptx emits the generic form with a 32-bit shared address"),
]
