"""Checker corpus, issue 29: complete correct kernels in today's styles that must check with
zero findings. This file: a persistent warp-specialized GEMM whose epilogue is double
buffered: the consumer warpgroup stages each 64 x 64 bf16 output tile with `stmatrix` into one
of two 8 KiB buffers in the 128B swizzle (16-byte chunk c of row r at c ^ (r % 8)) and TMA-
stores it from there, waiting only for the store of two tiles ago (`wait_group.read 1`)."""

from __future__ import annotations

import pytest

from ptxdsl import Addr, Kernel, ptx, t
from ptxdsl.checker import check_kernel
from ptxdsl.pipeline import MbarrierRing

STAGES = 4
TILE = 8192                  # one 64 x 64 bf16 operand tile, and one staging buffer
STAGE_BYTES = 2 * TILE       # A and B of one k-block
EPI = STAGES * STAGE_BYTES   # the two staging buffers, after the ring's stages
BARS = EPI + 2 * TILE        # the ring's barriers, after the staging buffers
MAPS = {"map_a": {"box_bytes": TILE, "swizzle": "128B"},
        "map_b": {"box_bytes": TILE, "swizzle": "128B"},
        "map_c": {"box_bytes": TILE, "swizzle": "128B"}}


def _desc(k: Kernel, addr):
    """A 128B-swizzled K-major descriptor of the tile at shared address `addr`."""
    enc = k.and_(k.shr(addr, 4), 0x3FFF)
    return k.or_(k.cvt(enc, t.u64), (1 << 62) | (64 << 32) | (1 << 16), type=t.b64)


def _epilogue(k: Kernel, acc, staging, tmap_c, s, it, tile, leader, select: str) -> None:
    """Stage the tile's packed accumulators in buffer `s` (swizzled) and TMA-store it. `it`
    counts this CTA's tiles (`tile & 1` would not alternate: the grid-stride step may be
    even)."""
    picks = {"toggle": lambda: s, "mask_xor": lambda: k.xor(k.and_(it, 1), 1),
             "tile_parity": lambda: k.and_(tile, 1)}
    stage = picks[select]()
    buf = k.add(staging, k.shl(stage, 13))
    with k.if_(leader):
        ptx.cp_async_bulk_wait_group_read(k, 1)     # the store of two tiles ago read this one
    k.bar_sync(1, 128)
    tw = k.and_(k.tid.x, 127)
    lane = k.and_(tw, 31)
    mat = k.shr(lane, 3)
    row = k.add(k.add(k.shl(k.shr(tw, 5), 4), k.shl(k.and_(mat, 1), 3)), k.and_(lane, 7))
    row_addr = k.add(buf, k.shl(row, 7))
    packed = acc.to_packed(t.bf16)
    for q in range(4):
        chunk = k.add(k.shr(mat, 1), 2 * q)
        k.stmatrix(k.add(row_addr, k.shl(k.xor(chunk, k.and_(row, 7)), 4)),
                   packed.regs[4 * q:4 * q + 4])
    ptx.fence_proxy_async(k, "shared::cta")
    k.bar_sync(1, 128)
    with k.if_(leader):
        ptx.cp_async_bulk_tensor(k, "global", "shared::cta", tmap_c, (0, k.shl(tile, 6)),
                                 buf)                                  # the TMA store
        ptx.cp_async_bulk_commit_group(k)


def persistent_gemm(select: str) -> Kernel:
    k = Kernel("persistent_gemm", reqntid=256)
    map_a, map_b, map_c = (k.param_tensormap(n) for n in ("map_a", "map_b", "map_c"))
    tiles = k.ld_param(k.param(t.u32, "tiles"))
    kblocks = k.ld_param(k.param(t.u32, "kblocks"))
    smem = k.extern_shared("smem", align=1024)
    ring = MbarrierRing(k, STAGES, storage=Addr(smem, BARS))
    ring.init()
    wg = k.shr(k.tid.x, 7)
    with k.if_(wg == 0):
        with k.if_(k.tid.x == 0):
            tmap_a, tmap_b = k.tensormap_addr(map_a), k.tensormap_addr(map_b)
            p = ring.producer()
            with k.for_range(k.ctaid.x, tiles, k.nctaid.x) as tile:
                with k.for_range(0, kblocks) as kb:
                    p.wait_empty()
                    p.arrive_expect_tx(STAGE_BYTES)
                    slot, full = p.slot(smem, STAGE_BYTES), p.full_barrier()
                    kc = k.shl(kb, 6)
                    ptx.cp_async_bulk_tensor(k, "shared::cluster", "global", slot, tmap_a,
                                             (kc, k.shl(tile, 6)), full)
                    ptx.cp_async_bulk_tensor(k, "shared::cluster", "global",
                                             k.add(slot, TILE), tmap_b, (kc, 0), full)
                    p.advance()
    with k.else_():
        tmap_c = k.tensormap_addr(map_c)
        leader = k.and_(k.tid.x, 127) == 0
        staging = k.add(k.mov(smem), EPI)
        acc = k.fragment(t.f32, shape=(64, 64))
        c = ring.consumer()
        s = k.mov(0, type=t.b32)
        it = k.mov(0, type=t.u32)
        with k.for_range(k.ctaid.x, tiles, k.nctaid.x) as tile:
            with k.for_range(0, kblocks):
                c.wait_full()
                slot = c.slot(smem, STAGE_BYTES)
                ptx.wgmma_fence(k)
                ptx.wgmma_mma_async(k, acc, _desc(k, slot), _desc(k, k.add(slot, TILE)),
                                    atype="bf16")
                ptx.wgmma_commit_group(k)
                ptx.wgmma_wait_group(k, 0)
                with k.if_(leader):
                    c.release(scope="cta")
                c.advance()
            _epilogue(k, acc, staging, tmap_c, s, it, tile, leader, select)
            k.xor(s, 1, dst=s)                      # `s ^= 1`: the next tile's buffer
            k.add(it, 1, dst=it)
        with k.if_(leader):
            ptx.cp_async_bulk_wait_group(k, 0)
    k.ret()
    return k


@pytest.mark.parametrize("select", ["toggle", "mask_xor"])
def test_persistent_gemm_with_double_buffered_swizzled_epilogue_is_clean(select):
    k = persistent_gemm(select)
    assert [f.format() for f in check_kernel(k, maps=MAPS, notes=True)] == []
    assert [f.format() for f in check_kernel(k)] == []


def test_buffer_picked_by_the_tile_index_parity_is_found():
    # A grid-stride loop steps the tile by nctaid.x: with an even grid, `tile & 1` picks the
    # same buffer every time, which the store of the previous tile may still be reading.
    found = check_kernel(persistent_gemm("tile_parity"), maps=MAPS)
    assert {f.id for f in found} == {"bulk-src-overwrite"}
    assert all(f.sites[1].loc.line == _STORE_LINE - 1 for f in found)


_STORE_LINE = next(n for n, text in enumerate(open(__file__), 1) if "# the TMA " + "store" in text)
