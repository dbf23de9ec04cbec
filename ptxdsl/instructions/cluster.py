"""Thread-block clusters: barrier.cluster, mapa, getctarank (PTX ISA §9.7.13.3, §9.7.9.21,
§9.7.9.22; cuda::ptx barrier_cluster.h, getctarank.h).

Builder functions are named after `cuda::ptx` and take the kernel first, with cuda::ptx's
argument order::

    ptx::barrier_cluster_arrive(ptx::sem_release);   ptx.barrier_cluster_arrive(k, "release")
    ptx::getctarank(ptx::space_cluster, p);           ptx.getctarank(k, "cluster", p)

cuda::ptx has no `mapa`; `ptx.mapa(k, space, addr, target_cta)` follows getctarank's order
and the ISA's operand order. Spaces, scopes and semantics are named as in every cuda::ptx
builder (`_ptx_args`): 'cluster' (or `ptx.space_cluster`) is `.shared::cluster`. `.aligned`
(every thread of the warp executes the same barrier instruction) is a keyword, since cuda::ptx
never emits it.
"""

from __future__ import annotations

import enum

import attrs

from ..errors import OperandError
from ..operands import Addr, Reg, Symbol
from ..types import Requires, ScalarType, Sem, StateSpace, req
from . import _ptx_args as A
from .base import Instruction, _given, check_dst, check_enum, check_src

__all__ = ["barrier_cluster_arrive", "barrier_cluster_wait", "mapa", "getctarank"]

S = StateSpace
T = ScalarType
SM90_78 = req("7.8", 90)
SM90_80 = req("8.0", 90)
_SPACES = (S.shared_cluster, S.generic)


class ClusterBarrierOp(enum.Enum):
    arrive = "arrive"
    wait = "wait"


_BARRIER_SEMS = {ClusterBarrierOp.arrive: (Sem.release, Sem.relaxed),
                 ClusterBarrierOp.wait: (Sem.acquire,)}


@attrs.frozen
class BarrierCluster(Instruction):
    """`barrier.cluster.arrive{.release,.relaxed}{.aligned};`,
    `barrier.cluster.wait{.acquire}{.aligned};` (no sem: the default .release / .acquire)."""

    MNEMONIC = "barrier.cluster"
    op: ClusterBarrierOp
    sem: Sem | None = None
    aligned: bool = False

    def __attrs_post_init__(self):
        op = check_enum(self.MNEMONIC, "op", self.op, ClusterBarrierOp)
        self._set("op", op)
        if self.sem is not None:
            self._set("sem", A.sem(f"barrier.cluster.{op.value}", self.sem, _BARRIER_SEMS[op]))
        if not isinstance(self.aligned, bool):
            raise OperandError(f"barrier.cluster.{op.value}", "aligned", "True or False",
                               _given(self.aligned))

    @property
    def requires(self) -> Requires:
        return SM90_80 if self.sem is not None else SM90_78

    def opcode(self) -> str:
        sem = self.sem.ptx if self.sem is not None else ""
        return f"barrier.cluster.{self.op.value}{sem}" + (".aligned" if self.aligned else "")


def _space(insn: str, space) -> StateSpace:
    """'cluster' (cuda::ptx space_cluster, .shared::cluster) or 'generic'."""
    return A.space(insn, "space", space, _SPACES)


def _cluster_addr(insn: str, space: StateSpace, addr) -> tuple[Addr, ScalarType]:
    """The address operand and the instruction type its width gives (.u32 or .u64).

    A `.shared::cluster` address is a 32-bit register or a shared symbol (.u32) or a 64-bit
    register (.u64); a generic address is a 64-bit register. A register whose space hint
    says global (or local, const, param) is refused: mapa/getctarank only map shared memory.
    """
    widths = (32, 64) if space is S.shared_cluster else (64,)
    if isinstance(addr, Reg | Symbol) and not isinstance(addr, bool):
        addr = Addr(addr)
    if not isinstance(addr, Addr):
        raise OperandError(insn, "addr", "an address (register, symbol or Addr)",
                           _given(addr))
    if addr.offset:
        raise OperandError(insn, "addr", "an address without offset (mapa and getctarank "
                           "take a plain register or symbol)", addr.render())
    base = addr.base
    if isinstance(base, Symbol):
        if space is S.generic:   # ptxas takes the name; its value is a shared-window address
            raise OperandError(insn, "addr", "a .generic address", f"{_given(base)} (a "
                               "generic address is a 64-bit register: use k.generic_addr)")
        if not base.space.is_shared:
            raise OperandError(insn, "addr", "a shared symbol", _given(base))
        return addr, T.u32
    if not isinstance(base, Reg) or base.type.bits not in widths or base.type.is_float:
        want = " or ".join(f"{w}-bit" for w in widths)
        raise OperandError(insn, "addr", f"a {want} integer register holding a "
                           f"{space.value or 'generic'} address", _given(base))
    hint = base.space
    if hint is not None and not (hint.is_shared or hint is S.generic):
        raise OperandError(insn, "addr", "a shared (or generic) address",
                           f"{_given(base)}, which holds a .{hint.value} address")
    if space is S.shared_cluster and hint is S.generic:
        raise OperandError(insn, "addr", "a .shared::cluster address (the builders convert a "
                           "generic one with cvta; or pass space='generic')",
                           f"{_given(base)}, which holds a generic address")
    if space is S.generic and hint is not None and hint.is_shared:
        raise OperandError(insn, "addr", "a generic address (pass space='cluster' for a "
                           "shared one)", f"{_given(base)}, which holds a "
                           f".{hint.value} address")
    return addr, (T.u32 if base.type.bits == 32 else T.u64)


@attrs.frozen
class Mapa(Instruction):
    """`mapa{.shared::cluster}.type d, a, b;` with .type = .u32 | .u64: `d` is the address in
    CTA `b`'s shared memory that corresponds to `a` in this CTA's (generic: a generic
    address)."""

    MNEMONIC = "mapa"
    REQUIRES = SM90_78
    space: StateSpace
    d: Reg
    a: object
    b: object
    type: ScalarType = attrs.field(default=None)

    def __attrs_post_init__(self):
        self._set("space", _space(self.MNEMONIC, self.space))
        a, t = _cluster_addr(self.MNEMONIC, self.space, self.a)
        self._set("a", a.base)
        self._set("type", t)
        check_dst(self, "d", self.d, t)
        self._set("b", check_src(self, "b", self.b, T.u32))

    def opcode(self) -> str:
        return f"mapa{self.space.ptx}.{self.type.value}"

    def operands(self):
        return (self.d, self.a, self.b)


@attrs.frozen
class Getctarank(Instruction):
    """`getctarank{.shared::cluster}.type d, a;` with .type = .u32 | .u64 (the address width;
    `d` is a .u32 register): the rank of the CTA whose shared memory holds `a`."""

    MNEMONIC = "getctarank"
    REQUIRES = SM90_78
    space: StateSpace
    d: Reg
    a: object
    type: ScalarType = attrs.field(default=None)

    def __attrs_post_init__(self):
        self._set("space", _space(self.MNEMONIC, self.space))
        a, t = _cluster_addr(self.MNEMONIC, self.space, self.a)
        self._set("a", a.base)
        self._set("type", t)
        check_dst(self, "d", self.d, T.u32)

    def opcode(self) -> str:
        return f"getctarank{self.space.ptx}.{self.type.value}"

    def operands(self):
        return (self.d, self.a)


# -- builder functions (cuda::ptx names, kernel first) -----------------------------------------
def barrier_cluster_arrive(k, sem=None, *, aligned: bool = False) -> None:
    """`barrier.cluster.arrive{.release,.relaxed}{.aligned};`
    (cuda::ptx::barrier_cluster_arrive)."""
    k.emit(BarrierCluster(ClusterBarrierOp.arrive, sem, aligned))


def barrier_cluster_wait(k, sem=None, *, aligned: bool = False) -> None:
    """`barrier.cluster.wait{.acquire}{.aligned};` (cuda::ptx::barrier_cluster_wait)."""
    k.emit(BarrierCluster(ClusterBarrierOp.wait, sem, aligned))


def mapa(k, space, addr, target_cta) -> Reg:
    """`mapa{.shared::cluster}.{u32,u64} d, addr, target_cta;` returns `d`, the address of
    `addr`'s counterpart in CTA `target_cta` of the cluster (a .shared::cluster address for
    space='cluster', a generic one for space='generic'), hinted with its space for the
    instructions that use it. A generic pointer with space='cluster' is converted first."""
    sp = _space("mapa", space)
    addr = A.space_addr(k, "mapa", addr, sp)
    _, t = _cluster_addr("mapa", sp, addr)
    d = k.reg(t)
    insn = Mapa(sp, d, addr, target_cta)
    A.cluster_rank(k, insn.name, "target_cta", insn.b)
    k.emit(insn)
    d.space = sp
    return d


def getctarank(k, space, addr) -> Reg:
    """`getctarank{.shared::cluster}.{u32,u64} d, addr;` returns the .u32 rank of the CTA whose
    shared memory `addr` points into (cuda::ptx::getctarank)."""
    sp = _space("getctarank", space)
    d = k.reg(T.u32)
    k.emit(Getctarank(sp, d, A.space_addr(k, "getctarank", addr, sp)))
    return d


# -- forms: (form, requires, note) — rendered by ptxdsl.forms ----------------------------------
FORMS: list[tuple[str, Requires, str]] = [
    ("barrier.cluster.arrive{.aligned}", SM90_78, ""),
    ("barrier.cluster.arrive.{release,relaxed}{.aligned}", SM90_80, ""),
    ("barrier.cluster.wait{.aligned}", SM90_78, ""),
    ("barrier.cluster.wait.acquire{.aligned}", SM90_80, ""),
    ("mapa.shared::cluster.{u32,u64} d, a, b", SM90_78, "not in cuda::ptx 13.0"),
    ("mapa.{u32,u64} d, a, b", SM90_78, "generic; ptxdsl emits .u64 (64-bit addresses)"),
    ("getctarank.shared::cluster.{u32,u64} d, a", SM90_78, ""),
    ("getctarank.u64 d, a", SM90_78, "generic"),
]
