"""CTA barriers and warp synchronisation: bar/barrier.{sync,arrive,red}, bar.warp.sync
(PTX ISA §9.7.13.1, §9.7.13.2).

`bar.sync`/`bar.arrive`/`bar.red` are the historical spellings of the `.aligned` barrier forms
(ptxas refuses `.aligned` on them); `barrier.*` takes `.aligned` as an option, and without it
the barrier may be reached from divergent code.
"""

from __future__ import annotations

import enum

import attrs

from ..errors import OperandError
from ..operands import Imm, Reg
from ..types import BASE
from ..types import ScalarType as T
from .base import Instruction, check_dst, check_enum, check_imm, check_pred, check_src
from .warp import check_membermask

# A CTA has at most 1024 threads; ptxas wants counts in whole warps.
_MAX_THREADS = 1024
_BARRIERS = 16


def _barrier_id(insn, value) -> Reg | Imm:
    """Barrier number: a 32-bit register, or an immediate 0..15 (16 named barriers per CTA)."""
    if isinstance(value, Reg):
        return check_src(insn, "id", value, T.u32)
    return Imm(check_imm(insn, "id", value, 0, _BARRIERS - 1), T.u32)


def _thread_count(insn, value) -> Reg | Imm | None:
    """Participating threads: a 32-bit register, or an immediate multiple of 32 in [32, 1024]."""
    if value is None or isinstance(value, Reg):
        return value if value is None else check_src(insn, "count", value, T.u32)
    n = check_imm(insn, "count", value, 32, _MAX_THREADS)
    if n % 32:
        raise OperandError(insn.name, "count", "a thread count that is a multiple of the warp "
                           "size (32)", n)
    return Imm(n, T.u32)


def _check_spelling(insn, short: bool, aligned: bool) -> None:
    if short and not aligned:
        raise OperandError(insn.name, "aligned", "aligned=True for the bar.* spelling "
                           "(bar.* is always .aligned; use barrier.* with aligned=False)",
                           "aligned=False")


class BarrierOp(enum.Enum):
    sync = "sync"
    arrive = "arrive"


@attrs.frozen
class Barrier(Instruction):
    """`bar.sync a{, b};`, `bar.arrive a, b;`, `barrier.sync{.aligned} a{, b};`,
    `barrier.arrive{.aligned} a, b;`

    `a` is the barrier number, `b` the number of participating threads (all threads of the CTA
    when omitted; required by arrive).
    """

    MNEMONIC = "barrier"
    REQUIRES = BASE  # PTX 6.0 (barrier.*; bar.* older), sm_30: below ptxdsl's floor
    op: BarrierOp
    id: object
    count: object = None
    aligned: bool = True
    short: bool = False

    def __attrs_post_init__(self):
        self._set("op", check_enum(self.MNEMONIC, "op", self.op, BarrierOp))
        _check_spelling(self, self.short, self.aligned)
        self._set("id", _barrier_id(self, self.id))
        self._set("count", _thread_count(self, self.count))
        if self.op is BarrierOp.arrive and self.count is None:
            raise OperandError(self.name, "count", "a thread count (arrive needs one)", "None")

    def opcode(self) -> str:
        if self.short:
            return f"bar.{self.op.value}"
        return f"barrier.{self.op.value}{'.aligned' if self.aligned else ''}"

    def operands(self):
        return (self.id,) if self.count is None else (self.id, self.count)


class BarrierRedOp(enum.Enum):
    popc = "popc"
    and_ = "and"
    or_ = "or"


@attrs.frozen
class BarrierRed(Instruction):
    """`bar.red.popc.u32 d, a{, b}, {!}c;`, `bar.red.{and,or}.pred p, a{, b}, {!}c;` and the
    `barrier.red.op{.aligned}.type` spellings: a barrier that also reduces predicate `c` over the
    participating threads (popc counts the true ones into a .u32)."""

    MNEMONIC = "barrier.red"
    REQUIRES = BASE  # PTX 6.0, sm_30
    op: BarrierRedOp
    d: Reg
    id: object
    c: object
    count: object = None
    aligned: bool = True
    short: bool = False

    def __attrs_post_init__(self):
        self._set("op", check_enum(self.MNEMONIC, "op", self.op, BarrierRedOp))
        _check_spelling(self, self.short, self.aligned)
        check_dst(self, "d", self.d, self.type)
        self._set("id", _barrier_id(self, self.id))
        self._set("count", _thread_count(self, self.count))
        check_pred(self, "c", self.c, negatable=True)

    @property
    def type(self) -> T:
        """The result's type: `.u32` for `.popc` (a count), `.pred` for `.and`/`.or`."""
        return T.u32 if self.op is BarrierRedOp.popc else T.pred

    def opcode(self) -> str:
        if self.short:
            return f"bar.red.{self.op.value}.{self.type}"
        return f"barrier.red.{self.op.value}{'.aligned' if self.aligned else ''}.{self.type}"

    def operands(self):
        mid = (self.id,) if self.count is None else (self.id, self.count)
        return (self.d, *mid, self.c)


@attrs.frozen
class WarpSync(Instruction):
    """`bar.warp.sync membermask;` (`__syncwarp`): the threads of `membermask` wait for each other,
    and their memory accesses before it are ordered before those after it."""

    MNEMONIC = "bar.warp.sync"
    REQUIRES = BASE  # PTX 6.0, sm_30
    membermask: object = -1

    def __attrs_post_init__(self):
        self._set("membermask", check_membermask(self, self.membermask))

    def opcode(self) -> str:
        return "bar.warp.sync"

    def operands(self):
        return (self.membermask,)
