"""Warp-level data exchange and voting: shfl.sync, vote.sync, activemask, elect.sync
(PTX ISA §9.7.8.6, §9.7.13.3, §9.7.13.8, §9.7.13.9).
"""

from __future__ import annotations

import enum
from typing import cast

import attrs

from ..errors import OperandError
from ..operands import SINK, Imm, Operand, Reg, Sink
from ..types import BASE, req
from ..types import ScalarType as T
from .base import Instruction, check_dst, check_enum, check_pred, check_src, int_like

FULL_MASK = 0xFFFFFFFF
# The shfl `c` operand packs the clamp lane (bits 0-4) and the segment mask (bits 8-12).
_SHFL_C_BITS = 0x1F1F


def _b32_operand(insn, operand: str, value, ok, expected: str) -> Reg | Imm:
    """A 32-bit register, or an integer immediate accepted by `ok`."""
    if isinstance(value, Reg):
        return check_src(insn, operand, value, T.b32)
    if isinstance(value, Imm):
        value = value.value
    value = int_like(value)
    if isinstance(value, bool) or not isinstance(value, int) or not ok(value):
        raise OperandError(insn.name, operand, expected, repr(value))
    return Imm(value, T.b32)


@attrs.frozen
class MaskImm(Imm):
    """A 32-bit lane mask: `-1` for the whole warp (as nvcc writes it), else hex, so the lanes
    can be read off."""

    def render(self) -> str:
        """`-1` for the full mask (as nvcc writes it), the other masks as 8 hexadecimal digits."""
        return "-1" if self.value == FULL_MASK else f"0x{self.value:08X}"


def check_membermask(insn, value) -> Reg | Imm:
    """A warp member mask: a 32-bit register or a non-zero 32-bit immediate (-1 allowed).

    A zero mask names no thread, not even the one executing, which PTX leaves undefined.
    """
    m = _b32_operand(insn, "membermask", value, lambda v: -(1 << 31) <= v <= FULL_MASK and v != 0,
                     "a .b32 register or a non-zero 32-bit mask (0xffffffff for the whole warp)")
    return MaskImm(int(m.value) & FULL_MASK, T.b32) if isinstance(m, Imm) else m


class ShflMode(enum.Enum):
    up = "up"
    down = "down"
    bfly = "bfly"
    idx = "idx"


@attrs.frozen
class Shfl(Instruction):
    """`shfl.sync.mode.b32 d{|p}, a, b, c, membermask;`

    `b` is the source lane (idx), the lane offset (up/down) or the XOR mask (bfly), 0..31;
    `c` packs the clamp lane in bits 0-4 and the segment mask in bits 8-12. `p` is set when
    the source lane was in range.
    """

    MNEMONIC = "shfl.sync"
    REQUIRES = BASE  # PTX 6.0, sm_30
    mode: ShflMode
    d: Reg
    a: object
    b: object
    c: object
    membermask: object = -1
    p: Reg | None = None

    def __attrs_post_init__(self):
        self._set("mode", check_enum(self.MNEMONIC, "mode", self.mode, ShflMode))
        check_dst(self, "d", self.d, T.b32)
        if self.p is not None:
            check_pred(self, "p", self.p)
        self._set("a", check_src(self, "a", self.a, T.b32))
        self._set("b", _b32_operand(self, "b", self.b, lambda v: 0 <= v <= 31,
                                    "a 32-bit register or a lane number in [0, 31]"))
        self._set("c", _b32_operand(self, "c", self.c, lambda v: 0 <= v and not v & ~_SHFL_C_BITS,
                                    "a 32-bit register or an immediate using only bits 0-4 "
                                    "(clamp) and 8-12 (segment mask)"))
        self._set("membermask", check_membermask(self, self.membermask))

    def opcode(self) -> str:
        return f"shfl.sync.{self.mode.value}.b32"

    def render(self) -> str:
        dst = self.d.render() + (f"|{self.p.render()}" if self.p is not None else "")
        # the operands as __attrs_post_init__ checked them
        rest = ", ".join(cast(Operand, op).render()
                         for op in (self.a, self.b, self.c, self.membermask))
        return f"{self.opcode()} {dst}, {rest};"

    def operands(self):
        return (self.d, self.a, self.b, self.c, self.membermask)


class VoteMode(enum.Enum):
    all = "all"
    any = "any"
    uni = "uni"
    ballot = "ballot"


@attrs.frozen
class Vote(Instruction):
    """`vote.sync.{all,any,uni}.pred d, {!}a, membermask;` and
    `vote.sync.ballot.b32 d, {!}a, membermask;` (bit i of d is lane i's `a`)."""

    MNEMONIC = "vote.sync"
    REQUIRES = BASE  # PTX 6.0, sm_30
    mode: VoteMode
    d: Reg
    a: object
    membermask: object = -1

    def __attrs_post_init__(self):
        self._set("mode", check_enum(self.MNEMONIC, "mode", self.mode, VoteMode))
        check_dst(self, "d", self.d, self.type)
        check_pred(self, "a", self.a, negatable=True)
        self._set("membermask", check_membermask(self, self.membermask))

    @property
    def type(self) -> T:
        """The result's type: `.b32` for `.ballot` (a lane mask), `.pred` for the others."""
        return T.b32 if self.mode is VoteMode.ballot else T.pred

    def opcode(self) -> str:
        return f"vote.sync.{self.mode.value}.{self.type}"

    def operands(self):
        return (self.d, self.a, self.membermask)


@attrs.frozen
class Activemask(Instruction):
    """`activemask.b32 d;`: the mask of the warp's threads currently executing together."""

    MNEMONIC = "activemask"
    REQUIRES = BASE  # PTX 6.2, sm_30: below ptxdsl's floor
    d: Reg

    def __attrs_post_init__(self):
        check_dst(self, "d", self.d, T.b32)

    def opcode(self) -> str:
        return "activemask.b32"

    def operands(self):
        return (self.d,)


@attrs.frozen
class Elect(Instruction):
    """`elect.sync d|p, membermask;`: elects one leader thread among `membermask`; `p` is true
    in the leader only and `d` (or `_`) receives the leader's lane number."""

    MNEMONIC = "elect.sync"
    REQUIRES = req("8.0", 90)
    p: Reg
    d: Reg | Sink = SINK
    membermask: object = -1

    def __attrs_post_init__(self):
        if not isinstance(self.d, Sink):
            # .u32, not .b32: ptxas refuses an .f32 register here although it is 32 bits wide.
            check_dst(self, "d", self.d, T.u32)
        check_pred(self, "p", self.p)
        self._set("membermask", check_membermask(self, self.membermask))

    def opcode(self) -> str:
        return "elect.sync"

    def render(self) -> str:
        mask = cast(Operand, self.membermask)   # as __attrs_post_init__ checked it
        return f"elect.sync {self.d.render()}|{self.p.render()}, {mask.render()};"

    def operands(self):
        return (self.d, self.p, self.membermask)
