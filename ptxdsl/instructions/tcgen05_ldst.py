"""tcgen05.ld and tcgen05.st: the warp's registers to and from tensor memory (PTX ISA §9.7.16;
cuda::ptx tcgen05_ld.h, tcgen05_st.h)::

    tcgen05.ld.sync.aligned.shape.num{.pack::16b}.b32 {r...}, [taddr]{, immHalfSplitoff};
    tcgen05.st.sync.aligned.shape.num{.unpack::16b}.b32 [taddr]{, immHalfSplitoff}, {r...};

    .shape = .32x32b | .16x64b | .16x128b | .16x256b | .16x32bx2   (lanes x bits per access)
    .num   = .x1 .x2 .x4 ... .x128 (.16x128b up to .x64, .16x256b up to .x32)

Each thread gives or gets `num` registers per access of 32 bits: 1 for .32x32b, .16x64b and
.16x32bx2, 2 for .16x128b, 4 for .16x256b; at most 128 in all. `immHalfSplitoff`, for
.16x32bx2 only, is the immediate column offset of the second access.

cuda::ptx has one function per shape (and .pack::16b / .unpack::16b) and chooses .xN by its
array's length; so do these builders: `out` (ld) is the array, given as its length (the
registers are made and returned) or as the registers to load into, and `values` (st) is the
registers to store. ptxdsl returns the loaded registers as a tuple::

    uint32_t out[8]; ptx::tcgen05_ld_16x128b(out, taddr);
    out = ptx.tcgen05_ld_16x128b(k, 8, taddr)          # .16x128b.x4: 8 registers
    ptx::tcgen05_st_16x32bx2(taddr, ptx::n32_t<16>{}, values);
    ptx.tcgen05_st_16x32bx2(k, taddr, 16, values)

The results may be read only after `tcgen05_wait_ld` (the registers are written
asynchronously), and a store is seen by a later tcgen05 operation after `tcgen05_wait_st`.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Sequence
from typing import Any

import attrs

from ..errors import OperandError
from ..operands import Addr, Imm, Reg, Vec
from ..types import Requires, ScalarType
from .base import (
    Instruction,
    _given,
    _n,
    as_tuple,
    check_enum,
    check_imm,
    check_one_type,
    int_like,
    refuse,
)
from .tcgen05 import TCGEN05, taddr_operand
from .wgmma import check_distinct

__all__ = [
    "tcgen05_ld_32x32b", "tcgen05_ld_16x64b", "tcgen05_ld_16x128b", "tcgen05_ld_16x256b",
    "tcgen05_ld_16x32bx2", "tcgen05_ld_32x32b_pack_16b", "tcgen05_ld_16x64b_pack_16b",
    "tcgen05_ld_16x128b_pack_16b", "tcgen05_ld_16x256b_pack_16b", "tcgen05_ld_16x32bx2_pack_16b",
    "tcgen05_st_32x32b", "tcgen05_st_16x64b", "tcgen05_st_16x128b", "tcgen05_st_16x256b",
    "tcgen05_st_16x32bx2", "tcgen05_st_32x32b_unpack_16b", "tcgen05_st_16x64b_unpack_16b",
    "tcgen05_st_16x128b_unpack_16b", "tcgen05_st_16x256b_unpack_16b",
    "tcgen05_st_16x32bx2_unpack_16b",
    "FORMS",
]

T = ScalarType


class TmemShape(enum.Enum):
    """The shape of one tcgen05.ld/st access: lanes x bits (`16x32bx2`: two 16x32b accesses)."""

    s32x32b = "32x32b"
    s16x64b = "16x64b"
    s16x128b = "16x128b"
    s16x256b = "16x256b"
    s16x32bx2 = "16x32bx2"


_S = TmemShape
#: 32-bit registers per thread for .x1 of each shape.
REGS_PER_NUM = {_S.s32x32b: 1, _S.s16x64b: 1, _S.s16x128b: 2, _S.s16x256b: 4, _S.s16x32bx2: 1}
#: The .xN each shape takes (ptxas: "Modifier .x128 not allowed ... with shape '.16x128b'").
NUMS = {s: tuple(1 << i for i in range(8) if (1 << i) * REGS_PER_NUM[s] <= 128) for s in _S}
# cuda::ptx's n32_t<int>: the offset is a non-negative int (ptxas takes any constant).
SPLITOFF_MAX = (1 << 31) - 1
# cuda::ptx takes any 4-byte B32; ptxas any 32-bit register (packed halves included)
_B32_TYPES = tuple(t for t in T if t.bits == 32)
_B32_NAMES = ", ".join(f".{t.value}" for t in _B32_TYPES)


def num_for(insn: Any, operand: str, shape: TmemShape, count: int) -> int:
    """The .xN whose access gives `count` registers per thread, or an OperandError listing the
    counts the shape takes."""
    per = REGS_PER_NUM[shape]
    if count % per == 0 and count // per in NUMS[shape]:
        return count // per
    counts = ", ".join(str(n * per) for n in NUMS[shape])
    raise OperandError(_n(insn), operand, f"the registers of one .{shape.value}.xN access: "
                       f"{counts} ({per} per .x1)", f"{count} registers")


def b32_regs(insn: Any, operand: str, values: Any) -> tuple[Reg, ...]:
    """A register array of tcgen05.ld/st: 32-bit registers (ptxas refuses other widths and
    immediates), one type (`check_one_type`)."""
    if not isinstance(values, Sequence) or isinstance(values, str):
        raise OperandError(_n(insn), operand, "a list or tuple of 32-bit registers", _given(values))
    for i, r in enumerate(values):
        if not isinstance(r, Reg) or r.type not in _B32_TYPES:
            raise OperandError(_n(insn), f"{operand}[{i}]", f"a 32-bit register ({_B32_NAMES})",
                               _given(r))
    regs = tuple(values)
    check_one_type(insn, operand, regs)
    return regs


def _check_shape_num(insn: Any, shape: Any, num: Any, regs: tuple[Reg, ...], operand: str,
                     splitoff: Any) -> tuple[TmemShape, int, int | None]:
    shape = check_enum(insn.MNEMONIC, "shape", shape, TmemShape)
    nums = NUMS[shape]
    num = check_imm(f"{insn.MNEMONIC}.{shape.value}", "num", num, 1, max(nums))
    if num not in nums:
        raise OperandError(f"{insn.MNEMONIC}.{shape.value}", "num", "one of " + ", ".join(
            f"{n} (.x{n})" for n in nums), num)
    if num_for(insn, operand, shape, len(regs)) != num:
        refuse(insn, f"{operand} has {len(regs)} registers; .{shape.value}.x{num} takes "
               f"{num * REGS_PER_NUM[shape]}")
    if shape is _S.s16x32bx2:
        if splitoff is None:
            refuse(insn, ".16x32bx2 needs the immediate immHalfSplitoff (imm_half_splitoff=)")
        splitoff = check_imm(insn, "imm_half_splitoff", splitoff, 0, SPLITOFF_MAX)
    elif splitoff is not None:
        refuse(insn, f"immHalfSplitoff is an operand of .16x32bx2 only, not .{shape.value}")
    return shape, num, splitoff


@attrs.frozen
class Tcgen05Ld(Instruction):
    """`tcgen05.ld.sync.aligned.shape.num{.pack::16b}.b32 d, [taddr]{, immHalfSplitoff};`
    loads `d` (num x 1, 2 or 4 registers) from the TMEM at taddr; `.pack::16b` packs two
    16-bit columns into each register."""

    MNEMONIC = "tcgen05.ld"
    REQUIRES = TCGEN05
    shape: TmemShape
    num: int
    d: tuple[Reg, ...] = attrs.field(converter=as_tuple)
    taddr: Addr
    imm_half_splitoff: int | None = None
    pack: bool = False

    def __attrs_post_init__(self):
        d = b32_regs(self, "d", self.d)
        shape, num, split = _check_shape_num(self, self.shape, self.num, d, "d",
                                             self.imm_half_splitoff)
        self._set("shape", shape)
        self._set("num", num)
        # ptxas: "intrinsic PREAD offset mismatch: out-of-order or overlapping reads"
        check_distinct(self.name, "d", d)
        self._set("imm_half_splitoff", split)
        self._set("taddr", taddr_operand(self, "taddr", self.taddr))
        if not isinstance(self.pack, bool):
            raise OperandError(self.MNEMONIC, "pack", "True or False", _given(self.pack))

    def opcode(self) -> str:
        pack = ".pack::16b" if self.pack else ""
        return f"tcgen05.ld.sync.aligned.{self.shape.value}.x{self.num}{pack}.b32"

    def operands(self):
        tail = () if self.imm_half_splitoff is None else (_imm(self.imm_half_splitoff),)
        return (Vec(self.d), self.taddr, *tail)


@attrs.frozen
class Tcgen05St(Instruction):
    """`tcgen05.st.sync.aligned.shape.num{.unpack::16b}.b32 [taddr]{, immHalfSplitoff}, values;`
    stores `values` (num x 1, 2 or 4 registers) to the TMEM at taddr; `.unpack::16b` splits
    each register into two 16-bit columns."""

    MNEMONIC = "tcgen05.st"
    REQUIRES = TCGEN05
    shape: TmemShape
    num: int
    taddr: Addr
    values: tuple[Reg, ...] = attrs.field(converter=as_tuple)
    imm_half_splitoff: int | None = None
    unpack: bool = False

    def __attrs_post_init__(self):
        values = b32_regs(self, "values", self.values)
        shape, num, split = _check_shape_num(self, self.shape, self.num, values, "values",
                                             self.imm_half_splitoff)
        self._set("shape", shape)
        self._set("num", num)
        self._set("imm_half_splitoff", split)
        self._set("taddr", taddr_operand(self, "taddr", self.taddr))
        if not isinstance(self.unpack, bool):
            raise OperandError(self.MNEMONIC, "unpack", "True or False", _given(self.unpack))

    def opcode(self) -> str:
        unpack = ".unpack::16b" if self.unpack else ""
        return f"tcgen05.st.sync.aligned.{self.shape.value}.x{self.num}{unpack}.b32"

    def operands(self):
        mid = () if self.imm_half_splitoff is None else (_imm(self.imm_half_splitoff),)
        return (self.taddr, *mid, Vec(self.values))


def _imm(value: int) -> Imm:
    return Imm(value, T.u32)


# -- builder functions (cuda::ptx names, kernel first) -----------------------------------------
def _out_regs(k, insn: str, shape: TmemShape, out: Any, ty: Any) -> tuple[Reg, ...]:
    """cuda::ptx's `out` array: its length (registers of type `ty`, .b32 by default, are made)
    or the registers themselves."""
    n = int_like(out)
    if type(n) is int:
        num_for(insn, "out", shape, n)
        ty = T.b32 if ty is None else ty
        if ty not in _B32_TYPES:
            raise OperandError(_n(insn), "type", f"a 32-bit type ({_B32_NAMES})", _given(ty))
        return tuple(k.reg(ty) for _ in range(n))
    if ty is not None:
        refuse(insn, "type= makes the registers of an `out` given as a count; the registers "
               "given have their own types")
    return b32_regs(insn, "out", out)


def _ld_builder(shape: TmemShape, pack: bool):
    """The cuda::ptx function of one tcgen05.ld shape, with or without .pack::16b."""
    suffix = "_pack_16b" if pack else ""
    name = f"tcgen05_ld_{shape.value}{suffix}"
    n = f"tcgen05.ld.sync.aligned.{shape.value}"
    counts = "/".join(str(x * REGS_PER_NUM[shape]) for x in NUMS[shape])

    def load(k, out, taddr, imm_half_splitoff, type) -> tuple[Reg, ...]:
        regs = _out_regs(k, n, shape, out, type)
        num = num_for(n, "out", shape, len(regs))
        k.emit(Tcgen05Ld(shape, num, regs, taddr, imm_half_splitoff, pack))
        return regs

    def split(k, out, taddr, imm_half_splitoff, *, type=None) -> tuple[Reg, ...]:
        return load(k, out, taddr, imm_half_splitoff, type)

    def plain(k, out, taddr, *, type=None) -> tuple[Reg, ...]:
        return load(k, out, taddr, None, type)

    form = f"{n}.num{'.pack::16b' if pack else ''}.b32 out, [taddr]"
    build: Callable[..., tuple[Reg, ...]] = split if shape is _S.s16x32bx2 else plain
    form += ", immHalfSplitoff" if build is split else ""
    build.__name__ = build.__qualname__ = name
    build.__doc__ = (f"`{form};` (cuda::ptx {name}): `out` is the number of registers "
                     f"({counts}: .xN follows, as cuda::ptx's array length) or the 32-bit "
                     "registers to load into; returns them. `type=` the type of the registers "
                     "made (.b32 by default). Read them after `tcgen05_wait_ld`.")
    return build


def _st_builder(shape: TmemShape, unpack: bool):
    """The cuda::ptx function of one tcgen05.st shape, with or without .unpack::16b."""
    suffix = "_unpack_16b" if unpack else ""
    name = f"tcgen05_st_{shape.value}{suffix}"
    n = f"tcgen05.st.sync.aligned.{shape.value}"
    counts = "/".join(str(x * REGS_PER_NUM[shape]) for x in NUMS[shape])

    def store(k, taddr, imm_half_splitoff, values) -> Tcgen05St:
        regs = b32_regs(n, "values", values)
        num = num_for(n, "values", shape, len(regs))
        return k.emit(Tcgen05St(shape, num, taddr, regs, imm_half_splitoff, unpack))

    def split(k, taddr, imm_half_splitoff, values) -> Tcgen05St:
        return store(k, taddr, imm_half_splitoff, values)

    def plain(k, taddr, values) -> Tcgen05St:
        return store(k, taddr, None, values)

    form = f"{n}.num{'.unpack::16b' if unpack else ''}.b32 [taddr]"
    build: Callable[..., Tcgen05St] = split if shape is _S.s16x32bx2 else plain
    form += ", immHalfSplitoff" if build is split else ""
    build.__name__ = build.__qualname__ = name
    build.__doc__ = (f"`{form}, values;` (cuda::ptx {name}): `values` the 32-bit registers "
                     f"to store ({counts}: .xN follows, as cuda::ptx's array length).")
    return build


tcgen05_ld_32x32b = _ld_builder(_S.s32x32b, False)
tcgen05_ld_16x64b = _ld_builder(_S.s16x64b, False)
tcgen05_ld_16x128b = _ld_builder(_S.s16x128b, False)
tcgen05_ld_16x256b = _ld_builder(_S.s16x256b, False)
tcgen05_ld_16x32bx2 = _ld_builder(_S.s16x32bx2, False)
tcgen05_ld_32x32b_pack_16b = _ld_builder(_S.s32x32b, True)
tcgen05_ld_16x64b_pack_16b = _ld_builder(_S.s16x64b, True)
tcgen05_ld_16x128b_pack_16b = _ld_builder(_S.s16x128b, True)
tcgen05_ld_16x256b_pack_16b = _ld_builder(_S.s16x256b, True)
tcgen05_ld_16x32bx2_pack_16b = _ld_builder(_S.s16x32bx2, True)
tcgen05_st_32x32b = _st_builder(_S.s32x32b, False)
tcgen05_st_16x64b = _st_builder(_S.s16x64b, False)
tcgen05_st_16x128b = _st_builder(_S.s16x128b, False)
tcgen05_st_16x256b = _st_builder(_S.s16x256b, False)
tcgen05_st_16x32bx2 = _st_builder(_S.s16x32bx2, False)
tcgen05_st_32x32b_unpack_16b = _st_builder(_S.s32x32b, True)
tcgen05_st_16x64b_unpack_16b = _st_builder(_S.s16x64b, True)
tcgen05_st_16x128b_unpack_16b = _st_builder(_S.s16x128b, True)
tcgen05_st_16x256b_unpack_16b = _st_builder(_S.s16x256b, True)
tcgen05_st_16x32bx2_unpack_16b = _st_builder(_S.s16x32bx2, True)


# -- forms: (form, requires, note) — rendered by ptxdsl.forms ----------------------------------
def _num_set(shape: TmemShape) -> str:
    return "{" + ",".join(f"x{n}" for n in NUMS[shape]) + "}"


FORMS: list[tuple[str, Requires, str]] = [
    *((f"tcgen05.ld.sync.aligned.{s.value}.{_num_set(s)}{{.pack::16b}}.b32 d, [taddr]"
       + (", immHalfSplitoff" if s is _S.s16x32bx2 else ""), TCGEN05,
       f"{REGS_PER_NUM[s]} register(s) per .x1") for s in _S),
    *((f"tcgen05.st.sync.aligned.{s.value}.{_num_set(s)}{{.unpack::16b}}.b32 [taddr]"
       + (", immHalfSplitoff" if s is _S.s16x32bx2 else "") + ", values", TCGEN05,
       f"{REGS_PER_NUM[s]} register(s) per .x1") for s in _S),
]
