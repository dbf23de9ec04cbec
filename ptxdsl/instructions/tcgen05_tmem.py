"""Host-side tensor-memory helpers: allocation sizes (PTX ISA §9.7.16.7.1, "Tensor Memory
Allocation"), where an MxN accumulator of tcgen05.mma lies in tensor memory (§9.7.16.10.5,
"Data path layout organization", layouts A to G) and which (lane, column) each register of
each thread holds for a tcgen05.ld / tcgen05.st shape (§9.7.16.2.3.1, "Matrix fragments").

Tensor memory is 128 lanes of 512 32-bit columns per CTA; an address is `lane << 16 |
column` (`tmem_address`). tcgen05.alloc takes a power of two of columns from 32 to 512
(`check_alloc_columns`; `tmem_columns(n)` is the least such allocation holding n columns).

`AccumulatorLayout(m, n, cta_group, ws=...)` says which lanes and columns of each CTA an f32
accumulator occupies and where element (row, col) of the CTA's part is; `fragment_map(shape,
num)` gives, for every thread of a warp and every register of a `.shape.xnum` load or store,
the (lane, column) relative to the instruction's address. A warp reaches the 32 lanes of its
subpartition only (warp w % 4 of the warpgroup: lanes 32 * (w % 4) ...).

`.pack::16b` (tcgen05.ld) and `.unpack::16b` (tcgen05.st) keep the register count of
`.shape.x<num>` but move 16-bit data: each 32-bit register holds two 16-bit elements from two
adjacent columns (each in the low half of its column), the lower column's in the register's low
16 bits. So the register that covers column c unpacked covers columns 2c (low half) and 2c + 1
(high half) packed: the block read or written is that of `.x<2 num>` unpacked (for .16x32bx2
each half's columns double; the `half_split` offset between the halves does not).
`fragment_position(..., half=0 or 1)` and `fragment_map(..., pack16b=True)` give these
positions.

The ISA gives the fragment maps and data-path layouts as figures; the maps here were checked,
for every shape and .num, against CUTLASS's `Copy_Traits` of the `SM100_TMEM_LOAD_*` atoms
and its `tmem_frg` layouts (cute/atom/copy_traits_sm100.hpp, mma_traits_sm100_frag.hpp).
"""

from __future__ import annotations

import enum
from typing import Any

import attrs

from ..errors import BuildError, OperandError, fail_closed, fail_closed_methods, refuse_assignment
from .base import _given, int_like
from .bulk import CtaGroup, cta_group_arg

__all__ = ["TMEM_LANES", "TMEM_COLUMNS", "check_alloc_columns", "tmem_columns",
           "tmem_address", "AccumulatorLayout", "LdShape", "registers_per_thread",
           "fragment_map", "fragment_position"]

TMEM_LANES = 128
TMEM_COLUMNS = 512
MIN_ALLOC = 32


def _int(who: str, what: str, value: Any) -> int:
    n = int_like(value)
    if isinstance(n, bool) or not isinstance(n, int):
        raise OperandError(who, what, "an int", _given(value))
    return n


def check_alloc_columns(n: Any) -> int:
    """`n` when tcgen05.alloc can take it: a power of two from 32 to 512."""
    v = _int("tcgen05.alloc", "n_cols", n)
    if not MIN_ALLOC <= v <= TMEM_COLUMNS or v & (v - 1):
        raise OperandError("tcgen05.alloc", "n_cols", "a power of two from 32 to 512 "
                           f"(tmem_columns({v}) gives the allocation that holds {v})"
                           if 0 < v <= TMEM_COLUMNS else "a power of two from 32 to 512", v)
    return v


def tmem_columns(needed: Any) -> int:
    """The least allocation tcgen05.alloc takes that holds `needed` columns (1 to 512)."""
    v = _int("tmem_columns", "needed", needed)
    if not 1 <= v <= TMEM_COLUMNS:
        raise OperandError("tmem_columns", "needed", f"1 to {TMEM_COLUMNS} columns (a CTA "
                           "has 512)", v)
    return max(MIN_ALLOC, 1 << (v - 1).bit_length())


def tmem_address(lane: Any, column: Any, base: Any = 0) -> int:
    """`base` (an allocation's address, lane 0) moved to `lane` and `column`: bits 31-16 the
    lane, 15-0 the column."""
    b = _int("tmem_address", "base", base)
    # Each part on its own: a base past column 511 or a negative column must not be
    # rescued by the other (base 600, column -100 is no address of an allocation).
    if not 0 <= b < TMEM_COLUMNS:
        raise OperandError("tmem_address", "base", "an allocation's address (lane 0, column "
                           f"0..{TMEM_COLUMNS - 1})", b)
    lane_, col = _int("tmem_address", "lane", lane), _int("tmem_address", "column", column)
    if not 0 <= lane_ < TMEM_LANES:
        raise OperandError("tmem_address", "lane", f"0..{TMEM_LANES - 1}", lane_)
    if not 0 <= col < TMEM_COLUMNS - b:
        raise OperandError("tmem_address", "column", f"a column of the allocation, 0 to "
                           f"{TMEM_COLUMNS - 1 - b} (base + column in 0..{TMEM_COLUMNS - 1})",
                           col)
    return lane_ << 16 | (b + col)


def _m_ok(m: int, cta_group: int, ws: bool) -> bool:
    if ws:
        return cta_group == 1 and m in (32, 64, 128)
    return m in ((64, 128) if cta_group == 1 else (128, 256))


@attrs.frozen
class AccumulatorLayout:
    """Where the `m` x `n` 32-bit accumulator of one tcgen05.mma (M of the whole CTA pair with
    cta_group=2; `ws` for tcgen05.mma.ws) lies in each CTA's tensor memory, from its
    allocation's address (lane 0, its first column)."""

    m: int
    n: int
    cta_group: int = 1
    ws: bool = False

    def __attrs_post_init__(self):
        cg = cta_group_arg("AccumulatorLayout", self.cta_group)
        object.__setattr__(self, "cta_group", 1 if cg is CtaGroup.one else 2)
        if type(self.ws) is not bool:
            raise OperandError("AccumulatorLayout", "ws", "True or False", _given(self.ws))
        m, n = (_int("AccumulatorLayout", w, getattr(self, w)) for w in ("m", "n"))
        object.__setattr__(self, "m", m)
        object.__setattr__(self, "n", n)
        if not _m_ok(m, self.cta_group, self.ws):
            raise OperandError("AccumulatorLayout", "m", "64 or 128 (cta_group 1), 128 or 256 "
                               "(cta_group 2), 32, 64 or 128 (.ws, cta_group 1)", m)
        if not 8 <= n <= 256 or n % 8 or self.folds and n % (8 * self.folds):
            raise OperandError("AccumulatorLayout", "n", f"a multiple of {8 * self.folds} "
                               "from 8 to 256", n)

    @property
    def rows(self) -> int:
        """The accumulator rows one CTA holds (half of M with cta_group=2)."""
        return self.m // self.cta_group

    @property
    def folds(self) -> int:
        """How many parts of N sit side by side in the lanes (layouts B, E: 2; G: 4)."""
        return 1 if self.rows >= 128 or not self.ws and self.cta_group == 1 else 128 // self.rows

    @property
    def columns(self) -> int:
        """The tensor-memory columns the accumulator takes in each CTA."""
        return self.n // self.folds

    @property
    def alloc_columns(self) -> int:
        """The tcgen05.alloc size that holds it."""
        return tmem_columns(self.columns)

    @property
    def lanes(self) -> tuple[int, ...]:
        """The lanes it occupies (M = 64 without .ws: lanes 0-15 of each 32-lane subpartition,
        layout F)."""
        return tuple(sorted({self.position(r, c)[0] for r in range(self.rows)
                             for c in range(0, self.n, self.columns)}))

    def position(self, row: Any, col: Any) -> tuple[int, int]:
        """(lane, column) of element (`row`, `col`) of this CTA's rows."""
        r, c = _int("AccumulatorLayout.position", "row", row), _int(
            "AccumulatorLayout.position", "col", col)
        if not 0 <= r < self.rows or not 0 <= c < self.n:
            raise OperandError("AccumulatorLayout.position", "row, col", f"row in "
                               f"0..{self.rows - 1}, col in 0..{self.n - 1}", (r, c))
        if self.rows == 64 and self.folds == 1:     # layout F: half of each subpartition
            return 32 * (r // 16) + r % 16, c
        part, c = divmod(c, self.columns)          # layouts B, E, G fold N into the lanes
        return r + self.rows * part, c


    def element(self, lane: Any, column: Any) -> tuple[int, int] | None:
        """`position`'s inverse: the (row, col) this CTA's part of the accumulator keeps at
        (`lane`, `column`), None for a cell it leaves free (layout F's lanes 16-31 of each
        subpartition) -- what a tcgen05.ld's register holds, with `fragment_map`."""
        ln = _int("AccumulatorLayout.element", "lane", lane)
        c = _int("AccumulatorLayout.element", "column", column)
        if not 0 <= ln < TMEM_LANES or not 0 <= c < self.columns:
            raise OperandError("AccumulatorLayout.element", "lane, column", f"lane in 0..127, "
                               f"column in 0..{self.columns - 1}", (ln, c))
        if self.rows == 64 and self.folds == 1:
            return None if ln % 32 >= 16 else (16 * (ln // 32) + ln % 16, c)
        part, r = divmod(ln, self.rows)
        return r, part * self.columns + c


class LdShape(enum.Enum):
    """A tcgen05.ld / tcgen05.st shape: lanes x bits per lane (16x32bx2: two 16-lane halves,
    the second `half_split` columns on)."""

    s32x32b = "32x32b"
    s16x64b = "16x64b"
    s16x128b = "16x128b"
    s16x256b = "16x256b"
    s16x32bx2 = "16x32bx2"

    @classmethod
    def coerce(cls, value: Any) -> LdShape:
        """A shape from a member or its spelling ('32x32b', '.16x256b')."""
        if isinstance(value, cls):
            return value
        text = value.value if isinstance(value, enum.Enum) else value
        if isinstance(text, str):
            for s in cls:
                if s.value == text.strip().lstrip("."):
                    return s
        raise OperandError("tcgen05.ld/st", "shape", "one of " + ", ".join(
            repr(s.value) for s in cls), _given(value))


_REGS_PER_NUM = {LdShape.s32x32b: 1, LdShape.s16x64b: 1, LdShape.s16x128b: 2,
                 LdShape.s16x256b: 4, LdShape.s16x32bx2: 1}


def registers_per_thread(shape: Any, num: Any) -> int:
    """The .b32 registers each thread holds for `.shape.x<num>` (num a power of two up to
    128 registers a thread)."""
    s = LdShape.coerce(shape)
    n = _int("tcgen05.ld/st", "num", num)
    per = _REGS_PER_NUM[s]
    top = 128 // per
    if not 1 <= n <= top or n & (n - 1):
        raise OperandError("tcgen05.ld/st", "num", f"a power of two from 1 to {top} for "
                           f".{s.value} (x1 ... x{top})", n)
    return n * per


def _position(s: LdShape, num: int, t: int, r: int, split: int) -> tuple[int, int]:
    if s is LdShape.s32x32b:
        return t, r
    if s is LdShape.s16x64b:
        return 8 * (t % 2) + t // 4, 2 * r + (t // 2) % 2
    if s is LdShape.s16x128b:
        return t // 4 + 8 * (r % 2), t % 4 + 4 * (r // 2)
    if s is LdShape.s16x256b:
        return t // 4 + 8 * ((r // 2) % 2), 2 * (t % 4) + r % 2 + 8 * (r // 4)
    return t % 16, r + (t // 16) * split


def _split(s: LdShape, num: int, half_split: Any) -> int:
    if s is not LdShape.s16x32bx2:
        if half_split is not None:
            raise BuildError(f"tcgen05.ld/st: half_split is the .16x32bx2 offset, not "
                             f".{s.value}'s")
        return 0
    if half_split is None:
        raise BuildError("tcgen05.ld/st: .16x32bx2 needs half_split (its immHalfSplitoff: "
                         "the columns from the first half's address to the second's)")
    v = _int("tcgen05.ld/st", "half_split", half_split)
    if not 0 <= v < TMEM_COLUMNS:
        raise OperandError("tcgen05.ld/st", "half_split", f"a column offset, "
                           f"0..{TMEM_COLUMNS - 1}", v)
    return v


def _packed(s: LdShape, num: int, t: int, r: int, split: int, half: int
            ) -> tuple[int, int]:
    """The (lane, column) of 16-bit half `half` of register r under .pack::16b/.unpack::16b:
    the unpacked column c becomes 2c + half; .16x32bx2's second half still starts `split`
    columns on."""
    lane, col = _position(s, num, t, r, 0)
    return lane, 2 * col + half + (split if s is LdShape.s16x32bx2 and t >= 16 else 0)


def _half(value: Any) -> int | None:
    if value is None:
        return None
    v = int_like(value)
    if isinstance(v, bool) or not isinstance(v, int) or v not in (0, 1):   # 1.0 is no half
        raise OperandError("fragment_position", "half", "0 (the low 16 bits) or 1 (the high "
                           "16 bits) for .pack::16b / .unpack::16b, or None (unpacked)",
                           _given(value))
    return v


def fragment_position(shape: Any, num: Any, thread: Any, reg: Any, *,
                      half_split: Any = None, half: Any = None) -> tuple[int, int]:
    """(lane, column), relative to the instruction's address, of register `reg` of lane
    `thread` of the warp for `.shape.x<num>`; with `half` (0: low 16 bits, 1: high), of that
    half of the register under .pack::16b (ld) / .unpack::16b (st)."""
    s = LdShape.coerce(shape)
    regs = registers_per_thread(s, num)
    n = _int("tcgen05.ld/st", "num", num)
    t, r = _int("fragment_position", "thread", thread), _int("fragment_position", "reg", reg)
    if not 0 <= t < 32:
        raise OperandError("fragment_position", "thread", "a lane of the warp, 0..31", t)
    if not 0 <= r < regs:
        raise OperandError("fragment_position", "reg", f"0..{regs - 1} (.{s.value}.x{n})", r)
    h = _half(half)
    split = _split(s, n, half_split)
    return _position(s, n, t, r, split) if h is None else _packed(s, n, t, r, split, h)


def fragment_map(shape: Any, num: Any, *, half_split: Any = None, pack16b: Any = False
                 ) -> tuple[tuple[Any, ...], ...]:
    """For each thread of the warp, the (lane, column) of each of its registers (relative to
    the instruction's address) for `.shape.x<num>`: `fragment_map(...)[thread][reg]`. With
    `pack16b=True` (.pack::16b / .unpack::16b) each register's entry is the pair of its low and
    high 16-bit halves' (lane, column)."""
    s = LdShape.coerce(shape)
    regs = registers_per_thread(s, num)
    n = _int("tcgen05.ld/st", "num", num)
    split = _split(s, n, half_split)
    if not isinstance(pack16b, bool):
        raise OperandError("fragment_map", "pack16b", "True (.pack::16b / .unpack::16b) or "
                           "False", _given(pack16b))
    if pack16b:
        return tuple(tuple((_packed(s, n, t, r, split, 0), _packed(s, n, t, r, split, 1))
                           for r in range(regs)) for t in range(32))
    return tuple(tuple(_position(s, n, t, r, split) for r in range(regs)) for t in range(32))


fail_closed_methods(AccumulatorLayout, "AccumulatorLayout")
fail_closed_methods(LdShape, "LdShape")
refuse_assignment(AccumulatorLayout, "make another AccumulatorLayout")
check_alloc_columns = fail_closed("check_alloc_columns", check_alloc_columns)
tmem_columns = fail_closed("tmem_columns", tmem_columns)
tmem_address = fail_closed("tmem_address", tmem_address)
registers_per_thread = fail_closed("registers_per_thread", registers_per_thread)
fragment_position = fail_closed("fragment_position", fragment_position)
fragment_map = fail_closed("fragment_map", fragment_map)
