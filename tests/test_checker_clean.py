"""Checker: correct kernels that once raised false alarms must check clean. Each pattern is
written in at least two shapes (straight-line and in a loop, or one-thread and CTA-wide)."""

from __future__ import annotations

import pytest

from ptxdsl import Addr, Kernel, ptx, t
from ptxdsl.checker import check_kernel
from tests.checker_kernels import Tma, clean, ids


def _fill(k: Kernel, buf, *, offset: int = 0) -> None:
    """Every thread writes 4 bytes of `buf` at `buf + offset + 4 * tid` (st.shared)."""
    base = k.add(k.mov(buf), offset) if offset else k.mov(buf)
    k.st(k.add(base, k.shl(k.tid.x, 2)), k.tid.x, type=t.u32, space="shared::cta")


# -- bulk async-groups belong to the thread that commits them --------------------------------------
def _store_then_wait_in_later_block(e: Tma) -> None:
    k = e.k
    _fill(k, e.tile)
    ptx.fence_proxy_async(k, "shared::cta")
    k.bar_sync(0)
    with k.if_(k.tid.x == 0):
        ptx.cp_async_bulk_tensor(k, "global", "shared::cta", e.tmap, (0, 0), e.tile)
        ptx.cp_async_bulk_commit_group(k)
    k.add(k.tid.x, 1)                          # other work between the two blocks
    with k.if_(k.tid.x == 0):
        ptx.cp_async_bulk_wait_group_read(k, 0)
    k.bar_sync(0)                              # publishes thread 0's completion to the CTA


def test_store_committed_and_waited_in_two_blocks_of_the_same_thread():
    e = Tma()
    _store_then_wait_in_later_block(e)
    _fill(e.k, e.tile)                         # the next tile's data, after the barrier
    clean(e.k, maps={"tmap": {"box_bytes": 512}})


def test_store_committed_and_waited_in_two_blocks_in_a_loop():
    e = Tma()
    k = e.k
    n = k.ld_param(k.param(t.u32, "n"))
    with k.for_range(0, n):
        _store_then_wait_in_later_block(e)
    clean(k, maps={"tmap": {"box_bytes": 512}})


def test_store_in_thread_0_waited_under_the_complementary_else():
    e = Tma()
    k = e.k
    _fill(k, e.tile)
    ptx.fence_proxy_async(k, "shared::cta")
    k.bar_sync(0)
    with k.if_(k.tid.x != 0):
        k.add(k.tid.x, 1)
    with k.else_():
        ptx.cp_async_bulk_tensor(k, "global", "shared::cta", e.tmap, (0, 0), e.tile)
        ptx.cp_async_bulk_commit_group(k)
    with k.if_(k.tid.x == 0):
        ptx.cp_async_bulk_wait_group_read(k, 0)
    clean(k)


# -- address ranges: distinct symbols, disjoint parts, bounded per-thread offsets ------------------
def _halves(write_offset: int, *, loop: bool) -> Kernel:
    k = Kernel("k", reqntid=128)
    tiles = k.shared_array(t.b8, 1024, align=1024, name="tiles")
    other = k.shared_array(t.b8, 512, align=128, name="other")
    tmap = k.tensormap_addr(k.param_tensormap("tmap"))
    n = k.ld_param(k.param(t.u32, "n"))

    def body():
        _fill(k, tiles)
        ptx.fence_proxy_async(k, "shared::cta")
        k.bar_sync(0)
        with k.if_(k.tid.x == 0):
            ptx.cp_async_bulk_tensor(k, "global", "shared::cta", tmap, (0, 0), tiles)
            ptx.cp_async_bulk_commit_group(k)
        _fill(k, tiles, offset=write_offset)   # the other half (0..511 + 512) while in flight
        _fill(k, other)                        # another symbol
        with k.if_(k.tid.x == 0):
            ptx.cp_async_bulk_wait_group_read(k, 0)
        k.bar_sync(0)

    if loop:
        with k.for_range(0, n):
            body()
    else:
        body()
    return k


@pytest.mark.parametrize("loop", [False, True])
def test_writes_to_the_other_half_and_another_symbol(loop):
    clean(_halves(512, loop=loop), maps={"tmap": {"box_bytes": 512}})


@pytest.mark.parametrize("loop", [False, True])
def test_write_into_the_half_being_stored_is_still_found(loop):
    k = _halves(256, loop=loop)
    assert ids(check_kernel(k, maps={"tmap": {"box_bytes": 512}})) == ["bulk-src-overwrite"]


def test_bulk_store_of_one_part_while_writing_another_part():
    k = Kernel("k", reqntid=1)
    buf = k.shared_array(t.b8, 2048, align=128, name="buf")
    dst = k.ld_param(k.param_ptr("dst"))
    ptx.fence_proxy_async(k, "shared::cta")
    ptx.cp_async_bulk(k, "global", "shared::cta", dst, Addr(buf, 1024), 1024)
    ptx.cp_async_bulk_commit_group(k)
    k.st(Addr(buf, 0), 0, type=t.u32, space="shared::cta")
    k.st(Addr(buf, 1020), 0, type=t.u32, space="shared::cta")
    ptx.cp_async_bulk_wait_group_read(k, 0)
    clean(k)


# -- a ring of two buffers with wait_group.read 1 --------------------------------------------------
def _ring_epilogue(threads: int, keep: int = 1) -> Kernel:
    k = Kernel("k", reqntid=threads)
    tiles = k.shared_array(t.b8, 1024, align=1024, name="tiles")
    tmap = k.tensormap_addr(k.param_tensormap("tmap"))
    n = k.ld_param(k.param(t.u32, "n"))
    with k.for_range(0, n) as i:
        stage = k.and_(i, 1, type=t.b32)
        buf = k.add(k.mov(tiles), k.shl(stage, 9))
        if threads > 1:
            k.st(k.add(buf, k.shl(k.tid.x, 2)), k.tid.x, type=t.u32,
                 space="shared::cta")
        else:
            k.st(buf, i, type=t.u32, space="shared::cta")
        ptx.fence_proxy_async(k, "shared::cta")
        k.bar_sync(0)
        with k.if_(k.tid.x == 0):
            ptx.cp_async_bulk_tensor(k, "global", "shared::cta", tmap, (0, i), buf)
            ptx.cp_async_bulk_commit_group(k)
            ptx.cp_async_bulk_wait_group_read(k, keep)
        k.bar_sync(0)
    with k.if_(k.tid.x == 0):
        ptx.cp_async_bulk_wait_group_read(k, 0)
    return k


@pytest.mark.parametrize("threads", [1, 128])
def test_double_buffered_epilogue_with_wait_group_read_1(threads):
    clean(_ring_epilogue(threads), maps={"tmap": {"box_bytes": 512}})


@pytest.mark.parametrize("threads", [1, 128])
def test_double_buffer_keeping_two_groups_overwrites_the_older_stage(threads):
    # wait_group.read 2 leaves the store of two iterations ago, on this very stage, in flight.
    k = _ring_epilogue(threads, keep=2)
    assert ids(check_kernel(k, maps={"tmap": {"box_bytes": 512}})) == ["bulk-src-overwrite"]


# -- a plain cp.async.bulk into this CTA's own .shared::cluster address ----------------------------
@pytest.mark.parametrize("loop", [False, True])
def test_plain_bulk_load_into_own_cta_is_not_cluster_use(loop):
    k = Kernel("k", reqntid=128)
    buf = k.shared_array(t.b8, 1024, align=128, name="buf")
    bar = k.shared_array(t.b64, 1, align=8, name="bar")
    src = k.ld_param(k.param_ptr("src"))
    with k.if_(k.tid.x == 0):
        ptx.mbarrier_init(k, bar, 1)
        ptx.fence_proxy_async(k, "shared::cta")
    k.bar_sync(0)

    def one(parity):
        with k.if_(k.tid.x == 0):
            ptx.mbarrier_arrive_expect_tx(k, "release", "cta", "shared::cta", bar, 1024,
                                          dst="_")
            ptx.cp_async_bulk(k, "shared::cluster", "global", buf, src, 1024, bar)
        ptx.mbarrier_wait(k, bar, parity)

    if loop:
        n = k.ld_param(k.param(t.u32, "n"))
        phase = k.mov(0, type=t.b32)
        with k.for_range(0, n):
            one(phase)
            k.bar_sync(0)
            k.xor(phase, 1, dst=phase)
    else:
        one(0)
    clean(k)


# -- a one-warp CTA publishes its init with bar.warp.sync ------------------------------------------
@pytest.mark.parametrize("loop", [False, True])
def test_one_warp_cta_publishes_init_with_warp_sync(loop):
    e = Tma(threads=32)
    k = e.k
    with k.if_(k.laneid == 0):
        ptx.mbarrier_init(k, e.bar, 1)
    k.syncwarp()
    if loop:
        n = k.ld_param(k.param(t.u32, "n"))
        phase = k.mov(0, type=t.b32)
        with k.for_range(0, n):
            e.load()
            ptx.mbarrier_wait(k, e.bar, phase)
            k.syncwarp()
            k.xor(phase, 1, dst=phase)
    else:
        e.load()
        ptx.mbarrier_wait(k, e.bar, 0)
    clean(k, maps={"tmap": {"box_bytes": 512}})


def test_warp_sync_in_a_larger_cta_does_not_publish_the_init():
    e = Tma(threads=64)
    k = e.k
    with k.if_(k.laneid == 0):
        ptx.mbarrier_init(k, e.bar, 1)
    k.syncwarp()
    ptx.mbarrier_wait(k, e.bar, 0)
    assert ids(check_kernel(k)) == ["mbar-init-unsynced"]


# -- a map re-targeted in place and released at .gpu by this thread, then acquired at .gpu ---------
@pytest.mark.parametrize("how", ["in_place", "cp_fenceproxy"])
def test_acquire_at_gpu_after_own_release_at_gpu(how):
    k = Kernel("k", reqntid=128)
    tmap = k.ld_param(k.param_ptr("tmap_ptr"))
    addr = k.ld_param(k.param(t.u64, "new_base"))
    bar = k.shared_array(t.b64, 1, align=8, name="bar")
    tile = k.shared_array(t.b8, 512, align=128, name="tile")
    with k.if_(k.tid.x == 0):
        ptx.fence_proxy_tensormap_generic(k, "acquire", "sys", tmap)   # the host's version
        ptx.mbarrier_init(k, bar, 1)
        ptx.fence_proxy_async(k, "shared::cta")
        if how == "in_place":
            ptx.tensormap_replace_global_address(k, "global", k.cvta(tmap, "global", to=True),
                                                 addr)
            ptx.fence_proxy_tensormap_generic(k, "release", "gpu")
    if how == "cp_fenceproxy":
        smap = k.shared_array(t.b8, 128, align=128, name="smap")
        with k.if_(k.tid.x == 0):
            ptx.tensormap_replace_global_address(k, "shared", smap, addr)
        k.syncwarp()
        with k.if_(k.shr(k.tid.x, 5) == 0):
            ptx.tensormap_cp_fenceproxy(k, "release", "gpu", tmap, smap, 128)
    k.bar_sync(0)
    with k.if_(k.tid.x == 0):
        ptx.fence_proxy_tensormap_generic(k, "acquire", "gpu", tmap)
        ptx.mbarrier_arrive_expect_tx(k, "release", "cta", "shared::cta", bar, 512, dst="_")
        ptx.cp_async_bulk_tensor(k, "shared::cluster", "global", tile, tmap, (0, 0), bar)
    ptx.mbarrier_wait(k, bar, 0)
    clean(k, host_maps=["tmap_ptr"], maps={"tmap_ptr": {"box_bytes": 512}})


# -- element_stride in the box size ----------------------------------------------------------------
@pytest.mark.parametrize("stride,tx", [(1, 512), (2, 256), (3, 24 * 8)])
def test_expect_tx_honours_element_stride(stride, tx):
    # Box 16 x 8 u32 with a traversal stride on dim 0: ceil(16 / stride) elements per row.
    k = Kernel("k", reqntid=32)
    out = k.ld_param(k.param_ptr("out"))
    smap = k.shared_array(t.b8, 128, align=128, name="smap")
    bar = k.shared_array(t.b64, 1, align=8, name="bar")
    tile = k.shared_array(t.b8, 512, align=128, name="tile")
    with k.if_(k.laneid == 0):
        ptx.tensormap_replace_rank(k, "shared", smap, rank=2)
        ptx.tensormap_replace_box_dim(k, "shared", smap, 0, 16)
        ptx.tensormap_replace_box_dim(k, "shared", smap, 1, 8)
        ptx.tensormap_replace_element_stride(k, "shared", smap, 0, stride)
        ptx.tensormap_replace_elemtype(k, "shared", smap, "u32")
        ptx.mbarrier_init(k, bar, 1)
    k.syncwarp()
    ptx.tensormap_cp_fenceproxy(k, "release", "gpu", out, smap, 128)
    k.bar_sync(0)
    with k.if_(k.laneid == 0):
        ptx.fence_proxy_tensormap_generic(k, "acquire", "gpu", out)
        ptx.cp_async_bulk_tensor(k, "shared::cluster", "global", tile, out, (0, 0), bar)
        ptx.mbarrier_arrive_expect_tx(k, "release", "cta", "shared::cta", bar, tx)
        ptx.mbarrier_wait(k, bar, 0)
    clean(k)


# -- bulk-group-not-waited counts stores -----------------------------------------------------------
def test_not_waited_counts_stores_not_ages():
    e = Tma()
    k = e.k
    n = k.ld_param(k.param(t.u32, "n"))
    with k.for_range(0, n):
        e.store(wait=None)
    f = check_kernel(k)
    assert ids(f) == ["bulk-group-not-waited"]
    assert "1 bulk store " in f[0].message, f[0].message


# -- rings indexed at run time: a wrapping stage counter -------------------------------------------
@pytest.mark.parametrize("stages", [2, 4])
def test_warp_specialized_ring_with_a_wrapping_stage_counter(stages):
    """stage = stage + 1, back to 0 (flipping the phase) when it reaches `stages`; barrier and
    tile addresses are base + stride * stage, computed at run time."""
    k = Kernel("ring", reqntid=160)
    tmap = k.tensormap_addr(k.param_tensormap("tmap"))
    n = k.ld_param(k.param(t.u32, "n_tiles"))
    full = k.shared_array(t.b64, stages, align=8, name="full")
    empty = k.shared_array(t.b64, stages, align=8, name="empty")
    tiles = k.shared_array(t.b8, 512 * stages, align=1024, name="tiles")
    with k.if_(k.tid.x == 0):
        for s in range(stages):
            ptx.mbarrier_init(k, Addr(full, 8 * s), 1)
            ptx.mbarrier_init(k, Addr(empty, 8 * s), 4)      # one arrive per consumer warp
        ptx.fence_proxy_async(k, "shared::cta")
    k.bar_sync(0)

    def advance(stage, phase):
        k.add(stage, 1, dst=stage)
        with k.if_(stage == stages):
            k.mov(0, dst=stage)
            k.xor(phase, 1, dst=phase)

    stage, phase = k.mov(0, type=t.u32), k.mov(0, type=t.b32)
    with k.if_(k.shr(k.tid.x, 5) == 0):
        with k.for_range(0, n) as i:
            with k.if_(k.elect_sync()):
                ptx.mbarrier_wait(k, k.add(k.mov(empty), k.shl(stage, 3)), k.xor(phase, 1))
                bar = k.add(k.mov(full), k.shl(stage, 3))
                ptx.mbarrier_arrive_expect_tx(k, "release", "cta", "shared::cta", bar, 512,
                                              dst="_")
                dst = k.add(k.mov(tiles), k.shl(stage, 9))
                ptx.cp_async_bulk_tensor(k, "shared::cluster", "global", dst, tmap, (0, i), bar)
            advance(stage, phase)
    with k.else_():
        with k.for_range(0, n):
            ptx.mbarrier_wait(k, k.add(k.mov(full), k.shl(stage, 3)), phase)
            k.ld(k.add(k.mov(tiles), k.shl(stage, 9)), type=t.u32, space="shared::cta")
            k.syncwarp()
            with k.if_(k.laneid == 0):
                ptx.mbarrier_arrive(k, k.add(k.mov(empty), k.shl(stage, 3)), dst="_")
            advance(stage, phase)
    k.ret()
    clean(k, maps={"tmap": {"box_bytes": 512}})


# -- shared memory read before a TMA load into it was issued ---------------------------------------
@pytest.mark.parametrize("loop", [False, True])
def test_tile_used_as_scratch_before_the_first_tma_load(loop):
    """Every thread zeroes and reads back the tile, then the producer fills it by TMA (in a
    fill loop of as many iterations as stages, which refills nothing)."""
    k = Kernel("k", reqntid=128)
    tmap = k.tensormap_addr(k.param_tensormap("tmap"))
    tiles = k.shared_array(t.b8, 1024, align=1024, name="tiles")
    full = k.shared_array(t.b64, 2, align=8, name="full")
    _fill(k, tiles)
    k.ld(k.add(k.mov(tiles), k.shl(k.tid.x, 2)), type=t.u32, space="shared::cta")
    with k.if_(k.tid.x == 0):
        for s in range(2):
            ptx.mbarrier_init(k, Addr(full, 8 * s), 1)
        ptx.fence_proxy_async(k, "shared::cta")
    k.bar_sync(0)
    with k.if_(k.shr(k.tid.x, 5) == 0):
        with k.if_(k.elect_sync()):
            if loop:
                with k.for_range(0, 2) as i:
                    s = k.and_(i, 1, type=t.b32)
                    bar = k.add(k.mov(full), k.shl(s, 3))
                    ptx.mbarrier_arrive_expect_tx(k, "release", "cta", "shared::cta", bar, 512,
                                                  dst="_")
                    ptx.cp_async_bulk_tensor(k, "shared::cluster", "global",
                                             k.add(k.mov(tiles), k.shl(s, 9)), tmap, (0, i), bar)
            else:
                for s in range(2):
                    ptx.mbarrier_arrive_expect_tx(k, "release", "cta", "shared::cta",
                                                  Addr(full, 8 * s), 512, dst="_")
                    ptx.cp_async_bulk_tensor(k, "shared::cluster", "global",
                                             Addr(tiles, 512 * s), tmap, (0, s),
                                             Addr(full, 8 * s))
    with k.else_():
        for s in range(2):
            ptx.mbarrier_wait(k, Addr(full, 8 * s), 0)
            k.ld(k.add(k.add(k.mov(tiles), 512 * s), k.shl(k.tid.x, 2)), type=t.u32,
                 space="shared::cta")
    clean(k, maps={"tmap": {"box_bytes": 512}})


# -- a single-thread double-buffered load loop that prefetches the next stage ----------------------
@pytest.mark.parametrize("threads", [1, 128])
def test_prefetching_double_buffer_with_stage_parity(threads):
    """Thread 0 loads tile 0, then each iteration issues tile i+1 into the other stage and
    waits for tile i (parity (i >> 1) & 1); with 128 threads the others read after a bar.sync."""
    k = Kernel("k", reqntid=threads)
    tmap = k.tensormap_addr(k.param_tensormap("tmap"))
    tiles = k.shared_array(t.b8, 1024, align=1024, name="tiles")
    full = k.shared_array(t.b64, 2, align=8, name="full")
    n = k.ld_param(k.param(t.u32, "n"))
    with k.if_(k.tid.x == 0):
        for s in range(2):
            ptx.mbarrier_init(k, Addr(full, 8 * s), 1)
        ptx.fence_proxy_async(k, "shared::cta")
        ptx.mbarrier_arrive_expect_tx(k, "release", "cta", "shared::cta", full, 512, dst="_")
        ptx.cp_async_bulk_tensor(k, "shared::cluster", "global", tiles, tmap, (0, 0), full)
    k.bar_sync(0)
    with k.for_range(0, n) as i:
        nxt = k.and_(k.add(i, 1), 1, type=t.b32)
        with k.if_(k.tid.x == 0):
            with k.if_(k.add(i, 1) < n):
                bar = k.add(k.mov(full), k.shl(nxt, 3))
                ptx.mbarrier_arrive_expect_tx(k, "release", "cta", "shared::cta", bar, 512,
                                              dst="_")
                ptx.cp_async_bulk_tensor(k, "shared::cluster", "global",
                                         k.add(k.mov(tiles), k.shl(nxt, 9)), tmap, (0, i), bar)
        s = k.and_(i, 1, type=t.b32)
        ptx.mbarrier_wait(k, k.add(k.mov(full), k.shl(s, 3)),
                          k.and_(k.shr(i, 1), 1, type=t.b32))
        k.ld(k.add(k.add(k.mov(tiles), k.shl(s, 9)), k.shl(k.tid.x, 2)), type=t.u32,
             space="shared::cta")
        k.bar_sync(0)                          # everyone is done with stage s before refill
    clean(k, maps={"tmap": {"box_bytes": 512}})
