"""Checker, issue 29: the value and range side. XOR in addresses (a buffer picked by `s ^ 1`,
an index toggled in place, 128B-swizzled staging addresses) and a second mask term no longer
make a write cover every buffer; a TMA store of unknown size is a note, not an error; the
wgmma proxy-fence rule compares byte ranges; `%ntid` folds to `.reqntid`; per-lane conditions
on `%tid` and a loop counter are per-lane. Each: the hazard (id and line), a clean twin, and
a second spelling."""

from __future__ import annotations

import inspect

import pytest

from ptxdsl import Addr, Kernel, ptx, t
from ptxdsl.checker import Hazard, check_kernel
from ptxdsl.pipeline import MbarrierRing
from tests import checker_29_values as cv
from tests.checker_kernels import clean, here, ids, only

SELECTS = ["toggle", "mask", "mask_xor"]
SWIZZLES = ["index", "address"]


def _builder_line(marker: str) -> int:
    """The line of tests/checker_29_values.py that holds `marker` (a finding there is the
    staging write's)."""
    lines, _ = inspect.getsourcelines(cv)
    return 1 + next(n for n, text in enumerate(lines) if marker in text)


def _at_builder(findings, hazard: Hazard, marker: str, count: int):
    assert ids(findings) == [hazard.value] * count, [f.format() for f in findings]
    f = findings[0]
    assert f.loc.file == cv.__file__ and f.loc.line == _builder_line(marker), f.format()
    return f


# -- XOR: double buffers picked by `s ^ 1`, toggled indices, swizzled staging addresses ------------
@pytest.mark.parametrize("stmatrix", [False, True])
@pytest.mark.parametrize("swizzle", SWIZZLES)
@pytest.mark.parametrize("select", SELECTS)
def test_double_buffered_swizzled_epilogue_is_clean(select, swizzle, stmatrix):
    k = cv.persistent_epilogue(select, swizzle, stmatrix=stmatrix)
    clean(k, maps={"out": cv.BOX})
    assert [f.id for f in check_kernel(k, maps={"out": cv.BOX}, notes=True)] == []


@pytest.mark.parametrize("swizzle", SWIZZLES)
@pytest.mark.parametrize("select", SELECTS)
def test_double_buffer_keeping_two_stores_overwrites_the_buffer_being_read(select, swizzle):
    # wait_group.read 2 leaves the store of two tiles ago, from this very buffer, in flight.
    k = cv.persistent_epilogue(select, swizzle, keep=2)
    f = _at_builder(check_kernel(k, maps={"out": cv.BOX}), Hazard.BULK_SRC_OVERWRITE,
                    "the staging write", 4)
    assert "wait_group.read" in f.message


def test_single_buffer_with_wait_group_read_1_is_found_with_stmatrix():
    k = cv.persistent_epilogue("same", "address", keep=1, stmatrix=True)
    _at_builder(check_kernel(k, maps={"out": cv.BOX}), Hazard.BULK_SRC_OVERWRITE,
                "# stmatrix: x4", 4)


def _lane_chunks(keep: int) -> tuple[Kernel, int]:
    """A 2 KiB stage per tile picked by `it & 1`; thread t writes 16 bytes at row t / 8,
    chunk t & 7: the second mask term (`t & 7`) sits next to the ring index."""
    k = Kernel("k", reqntid=128)
    tiles = k.shared_array(t.b8, 4096, align=1024, name="tiles")
    tmap = k.tensormap_addr(k.param_tensormap("tmap"))
    n = k.ld_param(k.param(t.u32, "n"))
    base = k.mov(tiles)
    with k.for_range(0, n) as it:
        buf = k.add(base, k.shl(k.and_(it, 1), 11))
        with k.if_(k.tid.x == 0):
            ptx.cp_async_bulk_wait_group_read(k, keep)
        k.bar_sync(0)
        addr = k.add(k.add(buf, k.shl(k.shr(k.tid.x, 3), 7)), k.shl(k.and_(k.tid.x, 7), 4))
        line = here() + 1
        k.st(addr, [it] * 4, type=t.b32, space="shared::cta")
        ptx.fence_proxy_async(k, "shared::cta")
        k.bar_sync(0)
        with k.if_(k.tid.x == 0):
            ptx.cp_async_bulk_tensor(k, "global", "shared::cta", tmap, (0, it), buf)
            ptx.cp_async_bulk_commit_group(k)
    with k.if_(k.tid.x == 0):
        ptx.cp_async_bulk_wait_group(k, 0)
    return k, line


def test_a_second_mask_term_keeps_the_ring_index():
    k, _ = _lane_chunks(keep=1)
    clean(k, maps={"tmap": {"box_bytes": 2048}})


def test_a_second_mask_term_still_finds_the_overwrite():
    k, line = _lane_chunks(keep=2)
    only(check_kernel(k, maps={"tmap": {"box_bytes": 2048}}), Hazard.BULK_SRC_OVERWRITE, line)


def test_an_xor_swizzle_stays_inside_its_1024_byte_block():
    # The swizzle moves a chunk inside its 128-byte row: a write to the next buffer's first
    # row (offset 1024 + row * 128 ^ ...) is clear of the 1 KiB being stored.
    k = Kernel("k", reqntid=8)
    buf = k.shared_array(t.b8, 2048, align=1024, name="buf")
    tmap = k.tensormap_addr(k.param_tensormap("tmap"))
    with k.if_(k.tid.x == 0):
        ptx.fence_proxy_async(k, "shared::cta")
        ptx.cp_async_bulk_tensor(k, "global", "shared::cta", tmap, (0, 0), buf)
        ptx.cp_async_bulk_commit_group(k)
    row = k.add(k.mov(buf), k.shl(k.tid.x, 7))
    for off in (1024, 896):
        line = here() + 1
        k.st(k.xor(k.add(row, off), k.shl(k.tid.x, 4)), 0, type=t.u32, space="shared::cta")
    with k.if_(k.tid.x == 0):
        ptx.cp_async_bulk_wait_group(k, 0)
    # offset 896 + 7 * 128 lands in the stored KiB; 1024 + ... never does
    only(check_kernel(k, maps={"tmap": {"box_bytes": 1024}}), Hazard.BULK_SRC_OVERWRITE, line)


# -- a TMA store of unknown size ---------------------------------------------------------------
@pytest.mark.parametrize("select", SELECTS)
def test_store_of_unknown_size_is_a_note_naming_the_context(select):
    k = cv.persistent_epilogue(select, "index")
    assert check_kernel(k) == []
    notes = check_kernel(k, notes=True)
    assert ids(notes) == [Hazard.CHECK_SKIPPED.value]
    assert "size of the tma store" in notes[0].message and "maps={'out'" in notes[0].message


def test_store_box_from_a_map_encoded_in_the_kernel():
    k = cv.persistent_epilogue("toggle", "index", encoded=True)
    assert check_kernel(k, notes=True) == []
    k = cv.persistent_epilogue("toggle", "index", keep=2, encoded=True)
    _at_builder(check_kernel(k), Hazard.BULK_SRC_OVERWRITE, "the staging write", 4)


def test_store_of_unknown_size_over_its_first_byte_is_still_found():
    # Rewriting the buffer a store of unknown size starts at is a hazard whatever its size.
    # Only the first of the four chunk writes reaches the store's first byte (thread 0's
    # chunk 0; the others start 16 bytes or more in, by the exact per-thread offsets):
    # those are compared only with a known size, and say so in a note.
    k = cv.persistent_epilogue("same", "index", keep=1)
    _at_builder(check_kernel(k), Hazard.BULK_SRC_OVERWRITE, "the staging write", 1)
    assert any("writes past its first byte are not compared" in f.message
               for f in check_kernel(k, notes=True))


# -- wgmma-smem-no-proxy-fence: byte ranges ------------------------------------------------------
def _desc(k: Kernel, addr):
    enc = k.and_(k.shr(addr, 4), 0x3FFF)
    return k.or_(k.cvt(enc, t.u64), 1 << 62, type=t.b64)


def _scheduler_gemm(word: int, loop: bool) -> tuple[Kernel, int]:
    """A and B tiles (8 KiB each) loaded by TMA into one dynamic buffer, two stages of them
    on `i & 1` in the loop form; thread 0 writes a scheduler word at dyn + `word` with
    st.shared; the wgmma reads the tiles. Returns the kernel and the wgmma's line."""
    k = Kernel("k", reqntid=128)
    dyn = k.extern_shared("dyn", align=1024)
    tmap = k.tensormap_addr(k.param_tensormap("tmap"))
    acc = tuple(k.reg(t.f32) for _ in range(32))
    for r in acc:
        k.mov(0.0, dst=r, type=t.f32)
    bars = 4 * 8192
    with k.if_(k.tid.x == 0):
        for s in range(2):
            ptx.mbarrier_init(k, Addr(dyn, bars + 8 * s), 1)
        ptx.fence_proxy_async(k, "shared::cta")
    k.bar_sync(0)
    base = k.mov(dyn)
    ptx.wgmma_fence(k)

    def tile(i, stage, parity):
        a = k.add(base, k.shl(stage, 14)) if stage is not None else base
        b = k.add(a, 8192)
        bar = k.add(k.add(base, bars), k.shl(stage, 3)) if stage is not None \
            else Addr(dyn, bars)
        with k.if_(k.tid.x == 0):
            k.st(Addr(dyn, word), i, type=t.u32, space="shared::cta")
            ptx.mbarrier_arrive_expect_tx(k, "release", "cta", "shared::cta", bar, 16384,
                                          dst="_")
            ptx.cp_async_bulk_tensor(k, "shared::cluster", "global", a, tmap, (0, i), bar)
            ptx.cp_async_bulk_tensor(k, "shared::cluster", "global", b, tmap, (64, i), bar)
        k.bar_sync(0)
        ptx.mbarrier_wait(k, bar, parity)
        lines.append(here() + 1)
        ptx.wgmma_mma_async(k, acc, _desc(k, a), _desc(k, b), atype="f16")
        ptx.wgmma_commit_group(k)
        ptx.wgmma_wait_group(k, 0)
        k.bar_sync(0)

    lines: list[int] = []
    if loop:
        with k.for_range(0, k.ld_param(k.param(t.u32, "n"))) as i:
            tile(i, k.and_(i, 1), k.and_(k.shr(i, 1), 1))
    else:
        tile(k.mov(0, type=t.u32), None, 0)
    return k, lines[0]


MAPS = {"maps": {"tmap": {"box_bytes": 8192}}}


@pytest.mark.parametrize("loop", [False, True])
def test_scheduler_word_past_the_tiles_is_not_read_by_the_wgmma(loop):
    k, _ = _scheduler_gemm(4 * 8192 + 16, loop)
    assert check_kernel(k, notes=True, **MAPS) == []


def test_scheduler_word_with_tiles_of_unknown_size_is_a_note():
    k, _ = _scheduler_gemm(4 * 8192 + 16, False)
    assert Hazard.WGMMA_SMEM_NO_PROXY_FENCE.value not in ids(check_kernel(k, notes=True))
    assert any("wgmma-smem-no-proxy-fence" in f.message
               for f in check_kernel(k, notes=True))


def test_scheduler_word_past_a_ring_of_tiles_of_unknown_size_is_not_read():
    # In the ring, B of stage 0 ends where A of stage 1 begins: each box is at most 8 KiB
    # whatever its map, so the last stage's B ends before the word.
    k, _ = _scheduler_gemm(4 * 8192 + 16, True)
    assert not [f.format() for f in check_kernel(k, notes=True)
                if "wgmma-smem-no-proxy-fence" in f.message]


@pytest.mark.parametrize("loop", [False, True])
def test_word_inside_a_tile_is_still_found(loop):
    k, line = _scheduler_gemm(8192 + 100, loop)     # inside B (of stage 0)
    f = only(check_kernel(k, **MAPS), Hazard.WGMMA_SMEM_NO_PROXY_FENCE, line)
    assert "dyn+8292" in f.message


def test_write_into_the_second_box_of_a_tile_is_found():
    # B (n128) arrives as two 8 KiB boxes; its descriptor starts in the first, the wgmma
    # reads both: a write into the second is in its tile.
    k = Kernel("k", reqntid=128)
    dyn = k.extern_shared("dyn", align=1024)
    tmap = k.tensormap_addr(k.param_tensormap("tmap"))
    acc = tuple(k.reg(t.f32) for _ in range(64))
    for r in acc:
        k.mov(0.0, dst=r, type=t.f32)
    bar = Addr(dyn, 3 * 8192)
    with k.if_(k.tid.x == 0):
        ptx.mbarrier_init(k, bar, 1)
        ptx.fence_proxy_async(k, "shared::cta")
    k.bar_sync(0)
    base = k.mov(dyn)
    with k.if_(k.tid.x == 0):
        ptx.mbarrier_arrive_expect_tx(k, "release", "cta", "shared::cta", bar, 3 * 8192,
                                      dst="_")
        for box in range(3):
            ptx.cp_async_bulk_tensor(k, "shared::cluster", "global", k.add(base, box * 8192),
                                     tmap, (0, 64 * box), bar)
    ptx.mbarrier_wait(k, bar, 0)
    k.st(Addr(dyn, 2 * 8192 + 100), 0, type=t.u32, space="shared::cta")
    k.st(Addr(dyn, 3 * 8192 + 64), 0, type=t.u32, space="shared::cta")   # past every tile
    k.bar_sync(0)
    ptx.wgmma_fence(k)
    line = here() + 1
    ptx.wgmma_mma_async(k, acc, _desc(k, base), _desc(k, k.add(base, 8192)), atype="f16")
    ptx.wgmma_commit_group(k)
    ptx.wgmma_wait_group(k, 0)
    f = only(check_kernel(k, **MAPS), Hazard.WGMMA_SMEM_NO_PROXY_FENCE, line)
    assert "dyn+16484" in f.message


def test_tile_written_by_the_threads_is_compared_by_symbol():
    # A tile no copy fills (a dequantised W tile): any write into its symbol counts.
    k = Kernel("k", reqntid=128)
    w = k.shared_array(t.b8, 8192, align=1024, name="w")
    acc = tuple(k.reg(t.f32) for _ in range(32))
    for r in acc:
        k.mov(0.0, dst=r, type=t.f32)
    k.st(Addr(w, 4096), 0, type=t.u32, space="shared::cta")
    k.bar_sync(0)
    ptx.wgmma_fence(k)
    line = here() + 1
    ptx.wgmma_mma_async(k, acc, _desc(k, k.mov(w)), _desc(k, k.mov(w)), atype="f16")
    ptx.wgmma_commit_group(k)
    ptx.wgmma_wait_group(k, 0)
    only(check_kernel(k), Hazard.WGMMA_SMEM_NO_PROXY_FENCE, line)


# -- %ntid under .reqntid ------------------------------------------------------------------------
def _ntid_barrier(dims, count, arrive) -> tuple[Kernel, int]:
    k = Kernel("k", reqntid=dims)
    bar = k.shared_array(t.b64, 1, align=8, name="bar")
    with k.if_(k.tid.x == 0):
        with k.if_(k.tid.y == 0):
            ptx.mbarrier_init(k, bar, count(k))
    k.bar_sync(0)
    line = arrive(k, bar)
    ptx.mbarrier_wait(k, bar, 0)
    return k, line


def _lane0_arrives(k, bar) -> int:
    with k.if_(k.laneid == 0):
        line = here() + 1
        ptx.mbarrier_arrive(k, bar, dst="_")
    return line


def _elected_arrives(k, bar) -> int:
    with k.if_(k.elect_sync()):
        line = here() + 1
        ptx.mbarrier_arrive(k, bar, dst="_")
    return line


def test_ntid_count_with_one_arrival_per_warp():
    k, line = _ntid_barrier(128, lambda k: k.ntid.x, _lane0_arrives)
    f = only(check_kernel(k), Hazard.MBAR_ARRIVE_COUNT, line)
    assert "expect 128 arrivals" in f.message and "4 threads" in f.message


def test_ntid_product_in_two_dimensions_with_elected_lanes():
    k, line = _ntid_barrier((64, 2), lambda k: k.mul(k.ntid.x, k.ntid.y), _elected_arrives)
    only(check_kernel(k), Hazard.MBAR_ARRIVE_COUNT, line)


def test_ntid_warp_count_with_one_arrival_per_warp_is_clean():
    k, _ = _ntid_barrier(128, lambda k: k.shr(k.ntid.x, 5), _lane0_arrives)
    assert check_kernel(k, notes=True) == []


@pytest.mark.parametrize("count", ["cluster_nctarank", "cluster_nctaid.x"])
def test_cluster_size_under_reqnctapercluster_is_a_constant(count):
    # A barrier expecting one arrival per CTA of the cluster that only this CTA's thread 0
    # arrives on (no remote arrive anywhere): the peer's arrival never comes.
    k = Kernel("k", reqntid=128, reqnctapercluster=2)
    bar = k.shared_array(t.b64, 1, align=8, name="bar")
    with k.if_(k.tid.x == 0):
        ptx.mbarrier_init(k, bar, k.read_special(count))
    k.bar_sync(0)
    with k.if_(k.tid.x == 0):
        line = here() + 1
        ptx.mbarrier_arrive(k, bar, dst="_")
    ptx.mbarrier_wait(k, bar, 0)
    f = only(check_kernel(k), Hazard.MBAR_ARRIVE_COUNT, line)
    assert "expect 2 arrivals" in f.message


def test_ntid_under_maxntid_is_not_a_constant():
    k = Kernel("k", maxntid=128)
    bar = k.shared_array(t.b64, 1, align=8, name="bar")
    with k.if_(k.tid.x == 0):
        ptx.mbarrier_init(k, bar, k.ntid.x)
    k.bar_sync(0)
    _lane0_arrives(k, bar)
    ptx.mbarrier_wait(k, bar, 0)
    assert check_kernel(k) == []


def test_tid_under_maxntid_is_bounded_by_the_product():
    # .maxntid (32, 4) bounds the CTA's size, not %tid.x alone: a launch of 128 x 1 threads
    # writes tile + 4 * tid.x up to byte 511, into the half a store is reading.
    k = Kernel("k", maxntid=(32, 4))
    tile = k.shared_array(t.b8, 512, align=128, name="tile")
    tmap = k.tensormap_addr(k.param_tensormap("tmap"))
    with k.if_(k.tid.x == 0):
        with k.if_(k.tid.y == 0):
            ptx.fence_proxy_async(k, "shared::cta")
            ptx.cp_async_bulk_tensor(k, "global", "shared::cta", tmap, (0, 0), Addr(tile, 256))
            ptx.cp_async_bulk_commit_group(k)
    line = here() + 1
    k.st(k.add(k.mov(tile), k.shl(k.tid.x, 2)), 0, type=t.u32, space="shared::cta")
    with k.if_(k.tid.x == 0):
        with k.if_(k.tid.y == 0):
            ptx.cp_async_bulk_wait_group(k, 0)
    only(check_kernel(k, maps={"tmap": {"box_bytes": 256}}), Hazard.BULK_SRC_OVERWRITE, line)


# -- per-lane conditions on %tid and a loop counter ------------------------------------------------
def _ragged(cond, count: int = 128) -> tuple[Kernel, int]:
    """Warpgroup 1 of a 256-thread CTA releases a barrier expecting `count` arrivals, one per
    thread, in a loop over k-blocks, under `cond(k, t, kb, n)` (t: the thread in the
    warpgroup)."""
    k = Kernel("k", reqntid=256)
    bar = k.shared_array(t.b64, 1, align=8, name="bar")
    n = k.ld_param(k.param(t.u32, "n"))
    nk = k.ld_param(k.param(t.u32, "nk"))
    with k.if_(k.tid.x == 0):
        ptx.mbarrier_init(k, bar, count)
    k.bar_sync(0)
    with k.if_(k.shr(k.tid.x, 7) == 1):
        tw = k.and_(k.tid.x, 127)
        phase = k.mov(0, type=t.b32)
        with k.for_range(0, nk) as kb:
            with k.if_(cond(k, tw, kb, n)):
                line = here() + 1
                ptx.mbarrier_arrive(k, bar, dst="_")
            ptx.mbarrier_wait(k, bar, phase)
            k.xor(phase, 1, dst=phase)
    return k, line


def test_ragged_tail_on_thread_and_k_block_is_per_lane():
    k, line = _ragged(lambda k, tw, kb, n: k.add(tw, k.mul(kb, 128)) < n)
    f = only(check_kernel(k), Hazard.MBAR_ARRIVE_COUNT, line)
    assert "differs between lanes" in f.message and "128 threads" in f.message


def test_lane_below_the_remainder_is_per_lane():
    k, line = _ragged(lambda k, tw, kb, n: k.laneid < k.sub(n, k.mul(kb, 32)))
    only(check_kernel(k), Hazard.MBAR_ARRIVE_COUNT, line)


def test_k_block_condition_stays_uniform():
    k, _ = _ragged(lambda k, tw, kb, n: k.mul(kb, 128) < n)
    assert check_kernel(k, notes=True) == []


def test_warp_and_k_block_condition_stays_warp_uniform():
    # One arrive per lane, but whole warps pass or fail together: not a per-lane finding.
    k, _ = _ragged(lambda k, tw, kb, n: k.add(k.shr(tw, 5), kb) < n)
    assert check_kernel(k) == []
    k, _ = _ragged(lambda k, tw, kb, n: k.add(k.shr(tw, 5), kb) < n, count=4)
    assert check_kernel(k) == []


def test_flag_set_under_a_warp_branch_is_not_uniform():
    # x is 1 in warp 0 only: an arrive under `x == 1` is not run by every thread (its count
    # is unknown: a note), although x's writes are constants.
    k = Kernel("k", reqntid=128)
    bar = k.shared_array(t.b64, 1, align=8, name="bar")
    with k.if_(k.tid.x == 0):
        ptx.mbarrier_init(k, bar, 128)
    k.bar_sync(0)
    x = k.mov(0, type=t.u32)
    with k.if_(k.shr(k.tid.x, 5) == 0):
        k.mov(1, dst=x)
    with k.if_(x == 1):
        ptx.mbarrier_arrive(k, bar, dst="_")
    ptx.mbarrier_wait(k, bar, 0)
    notes = check_kernel(k, notes=True)
    assert ids(notes) == [Hazard.CHECK_SKIPPED.value] and "arrive-count" in notes[0].message


def _ring_consumers(cond) -> tuple[Kernel, int]:
    """The same with MbarrierRing: every thread of the consumer warpgroup releases the stage
    it read (empty_count=128), under `cond(k, t, kb, n)`."""
    k = Kernel("k", reqntid=256)
    tiles = k.shared_array(t.b8, 2 * 4096, align=1024, name="tiles")
    tmap = k.tensormap_addr(k.param_tensormap("tmap"))
    n = k.ld_param(k.param(t.u32, "n"))
    nk = k.ld_param(k.param(t.u32, "nk"))
    ring = MbarrierRing(k, 2, empty_count=128)
    ring.init()
    with k.if_(k.shr(k.tid.x, 7) == 0):
        with k.if_(k.tid.x == 0):
            p = ring.producer()
            with k.for_range(0, nk) as kb:
                p.wait_empty()
                p.arrive_expect_tx(4096)
                ptx.cp_async_bulk_tensor(k, "shared::cluster", "global", p.slot(tiles, 4096),
                                         tmap, (0, kb), p.full_barrier())
                p.advance()
    with k.else_():
        c = ring.consumer()
        tw = k.and_(k.tid.x, 127)
        with k.for_range(0, nk) as kb:
            c.wait_full()
            k.ld(k.add(c.slot(tiles, 4096), k.shl(tw, 2)), type=t.u32, space="shared::cta")
            with k.if_(cond(k, tw, kb, n)):
                line = here() + 1
                c.release(scope="cta")
            c.advance()
    return k, line


def test_ring_release_in_a_ragged_tail_is_per_lane():
    k, line = _ring_consumers(lambda k, tw, kb, n: k.add(tw, k.mul(kb, 128)) < n)
    only(check_kernel(k, maps={"tmap": {"box_bytes": 4096}}), Hazard.MBAR_ARRIVE_COUNT, line)


def test_ring_release_on_the_k_block_alone_is_clean():
    k, _ = _ring_consumers(lambda k, tw, kb, n: k.mul(kb, 128) < n)
    assert check_kernel(k, maps={"tmap": {"box_bytes": 4096}}, notes=True) == []
