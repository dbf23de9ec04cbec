"""tcgen05.ld `.pack::16b` / tcgen05.st `.unpack::16b` fragment maps
(`ptxdsl/instructions/tcgen05_tmem.py`, issue 35). The ISA: the qualifier packs two 16-bit
elements from adjacent columns into one 32-bit register (and unpacks them again), with the
register count of the unpacked `.shape.x<num>`; the lower column's element is the low half."""

from __future__ import annotations

import pytest

from ptxdsl import Kernel, Module, ptx, t
from ptxdsl.errors import PtxdslError
from ptxdsl.instructions.tcgen05_tmem import (
    LdShape,
    fragment_map,
    fragment_position,
    registers_per_thread,
)


def _split(shape: LdShape, num: int) -> int | None:
    return 4 * num if shape is LdShape.s16x32bx2 else None


def _nums(shape: LdShape):
    """The .num values a packed load of `shape` can take with x<2 num> still valid."""
    n = 1
    while True:
        try:
            registers_per_thread(shape, 2 * n)
        except PtxdslError:
            return
        yield n
        n *= 2


@pytest.mark.parametrize("shape, num, thread, regs", [
    # 32x32b.x2: lane t, register 0 columns 0-1, register 1 columns 2-3
    ("32x32b", 2, 7, [((7, 0), (7, 1)), ((7, 2), (7, 3))]),
    # 16x64b.x1: thread 1 has lane 8 (unpacked column 0), so columns 0-1 packed
    ("16x64b", 1, 1, [((8, 0), (8, 1))]),
    ("16x64b", 1, 2, [((0, 2), (0, 3))]),
    # .16x32bx2: the second half (threads 16-31) starts half_split columns on, not twice that
    ("16x32bx2", 2, 19, [((3, 4), (3, 5)), ((3, 6), (3, 7))]),
])
def test_packed_entries(shape, num, thread, regs):
    split = 4 if shape == "16x32bx2" else None
    assert list(fragment_map(shape, num, half_split=split, pack16b=True)[thread]) == regs
    assert [(fragment_position(shape, num, thread, r, half_split=split, half=0),
             fragment_position(shape, num, thread, r, half_split=split, half=1))
            for r in range(len(regs))] == regs


@pytest.mark.parametrize("shape", list(LdShape))
def test_a_register_packs_two_adjacent_columns_of_its_unpacked_column(shape):
    """Same register count; register r's unpacked column c becomes columns 2c (low half) and
    2c + 1 (high half) of the same lane."""
    for num in _nums(shape):
        split = _split(shape, num)
        plain = fragment_map(shape, num, half_split=split)
        packed = fragment_map(shape, num, half_split=split, pack16b=True)
        assert [len(row) for row in packed] == [len(row) for row in plain]
        for t_ in range(32):
            for (lane, col), (lo, hi) in zip(plain[t_], packed[t_], strict=True):
                off = split if shape is LdShape.s16x32bx2 and t_ >= 16 else 0
                assert lo == (lane, 2 * (col - off) + off)
                assert hi == (lane, lo[1] + 1)


@pytest.mark.parametrize("shape", list(LdShape))
def test_packed_x_num_covers_the_block_of_unpacked_x_2num_once(shape):
    for num in _nums(shape):
        split = _split(shape, num)
        halves = [h for row in fragment_map(shape, num, half_split=split, pack16b=True)
                  for reg in row for h in reg]
        wide = [c for row in fragment_map(shape, 2 * num, half_split=split) for c in row]
        assert len(halves) == len(set(halves)) == 2 * 32 * registers_per_thread(shape, num)
        assert set(halves) == set(wide)


def test_packed_builders_take_the_unpacked_register_count():
    # cuda::ptx's tcgen05_ld_32x32b_pack_16b fills B32 (&)[2] for .x2, as the unpacked one
    k = Kernel("k", reqntid=32)
    regs = ptx.tcgen05_ld_32x32b_pack_16b(k, 2, k.mov(0, type=t.u32), type=t.u32)
    assert len(regs) == 2 and len(fragment_map("32x32b", 2, pack16b=True)[0]) == 2
    assert "tcgen05.ld.sync.aligned.32x32b.x2.pack::16b.b32" in Module([k]).emit()


@pytest.mark.parametrize("call, words", [
    (lambda: fragment_position("32x32b", 2, 0, 0, half=2), r"'half'.*0 \(the low 16 bits\)"),
    (lambda: fragment_position("32x32b", 2, 0, 0, half=True), r"'half'.*got bool"),
    (lambda: fragment_map("16x64b", 1, pack16b="yes"), r"'pack16b'.*True"),
])
def test_packed_refusals(call, words):
    with pytest.raises(PtxdslError, match=words) as ei:
        call()
    assert ei.value.loc is not None and ei.value.loc.file == __file__
