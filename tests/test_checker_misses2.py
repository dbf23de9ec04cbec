"""Checker: more hazards it used to miss (wgmma and ldmatrix reads of TMA destinations, stages
released by a wait_group that does not retire their wgmma, arrive counts of barriers in
dynamic shared memory, a plain arrive instead of arrive.expect_tx in a warp-specialized
ring) and findings it used to repeat. Each kernel has the hazard (right id, right Python
line) and a corrected twin that checks clean."""

from __future__ import annotations

import pytest

from ptxdsl import Addr, Kernel, ptx, t
from ptxdsl.checker import Hazard, Severity, check_kernel
from ptxdsl.instructions.wgmma_desc import SmemLayout, descriptor
from tests import pipeline_kernels as PK
from tests.checker_kernels import clean, here, ids, only

L = SmemLayout(t.bf16, 64, 64, "K", "128B")
MAPS = {"map_a": {"box_bytes": L.nbytes}, "map_b": {"box_bytes": L.nbytes}}




# -- wgmma / ldmatrix reading a TMA destination before the full wait -------------------------------
def _tile_reader(reader: str, wait_first: bool) -> tuple[Kernel, int]:
    """Thread 0 loads tiles sa and sb with TMA; the warpgroup reads them with `reader` before
    (the mistake) or after the mbarrier wait. Returns the kernel and the reader's line."""
    k = Kernel("k", reqntid=128)
    ta = k.tensormap_addr(k.param_tensormap("map_a"))
    tb = k.tensormap_addr(k.param_tensormap("map_b"))
    sa = k.shared_array(t.b8, L.nbytes, align=1024, name="sa")
    sb = k.shared_array(t.b8, L.nbytes, align=1024, name="sb")
    bar = k.shared_array(t.b64, 1, align=8, name="bar")
    with k.if_(k.tid.x == 0):
        ptx.mbarrier_init(k, bar, 1)
        ptx.fence_proxy_async(k, "shared::cta")
    k.bar_sync(0)
    with k.if_(k.tid.x == 0):
        ptx.mbarrier_arrive_expect_tx(k, "release", "cta", "shared::cta", bar, 2 * L.nbytes,
                                      dst="_")
        ptx.cp_async_bulk_tensor(k, "shared::cluster", "global", sa, ta, (0, 0), bar)
        ptx.cp_async_bulk_tensor(k, "shared::cluster", "global", sb, tb, (0, 0), bar)
    if wait_first:
        ptx.mbarrier_wait(k, bar, 0)
    if reader == "wgmma":
        acc = k.fragment(t.f32, shape=(64, 64))
        da, db = descriptor(k, L, sa), descriptor(k, L, sb)
        ptx.wgmma_fence(k)
        line = here() + 1
        ptx.wgmma_mma_async(k, acc, da, db, atype="bf16")
        ptx.wgmma_commit_group(k)
        ptx.wgmma_wait_group(k, 0)
    else:
        addr = k.add(k.mov(sa), k.shl(k.and_(k.tid.x, 31), 4))
        line = here() + 1
        k.ldmatrix(addr, 4)
    if not wait_first:
        ptx.mbarrier_wait(k, bar, 0)
    k.ret()
    return k, line


def test_wgmma_reads_a_tma_destination_before_the_wait():
    k, line = _tile_reader("wgmma", wait_first=False)
    f = only(check_kernel(k, maps=MAPS), Hazard.SMEM_READ_BEFORE_WAIT, line)
    assert "wgmma.mma_async (through its descriptor) reads the address of symbol sa" \
        in f.message
    clean(_tile_reader("wgmma", wait_first=True)[0], maps=MAPS)


def test_ldmatrix_reads_a_tma_destination_before_the_wait():
    k, line = _tile_reader("ldmatrix", wait_first=False)
    f = only(check_kernel(k, maps=MAPS), Hazard.SMEM_READ_BEFORE_WAIT, line)
    assert f.message.startswith("this ldmatrix reads")
    clean(_tile_reader("ldmatrix", wait_first=True)[0], maps=MAPS)


# -- a stage released after a wait_group that leaves its wgmma in flight ---------------------------
S = 3


def _released(case: str, n_wait: int) -> tuple[Kernel, int]:
    """One warpgroup over a ring of S stages (A and B of a stage side by side in `tiles`):
    `single` runs one wgmma on stage 0 and releases it after wait_group n_wait; `previous`
    is the k-loop that keeps groups in flight and releases the previous stage after
    wait_group n_wait (1 is right); `current` releases the stage it just read."""
    k = Kernel("k", reqntid=128)
    tiles = k.shared_array(t.b8, S * 2 * L.nbytes, align=1024, name="tiles")
    full = k.shared_array(t.b64, S, align=8, name="full")
    empty = k.shared_array(t.b64, S, align=8, name="empty")
    with k.if_(k.tid.x == 0):
        for s in range(S):
            ptx.mbarrier_init(k, Addr(full, 8 * s), 1)
            ptx.mbarrier_init(k, Addr(empty, 8 * s), 4)
    k.bar_sync(0)
    acc = k.fragment(t.f32, shape=(64, 64))

    def mma(s):
        slot = k.add(k.mov(tiles), k.mul(s, 2 * L.nbytes, type=t.u32))
        ptx.wgmma_fence(k)
        ptx.wgmma_mma_async(k, acc, descriptor(k, L, slot),
                            descriptor(k, L, k.add(slot, L.nbytes)), atype="bf16")
        ptx.wgmma_commit_group(k)

    def release(s) -> int:
        bar = k.add(k.mov(empty), k.shl(s, 3))
        with k.if_(k.laneid == 0):
            line = here() + 1
            ptx.mbarrier_arrive(k, bar, dst="_")
        return line

    if case == "single":
        ptx.mbarrier_wait(k, full, 0)
        mma(k.mov(0, type=t.u32))
        ptx.wgmma_wait_group(k, n_wait)
        line = release(k.mov(0, type=t.u32))
    else:
        with k.for_range(0, k.ld_param(k.param(t.u32, "kblocks"))) as i:
            s = k.rem(i, S, type=t.u32)
            ptx.mbarrier_wait(k, k.add(k.mov(full), k.shl(s, 3)),
                              k.and_(k.div(i, S, type=t.u32), 1, type=t.b32))
            mma(s)
            if case == "previous":
                with k.if_(i > 0):
                    ptx.wgmma_wait_group(k, n_wait)
                    line = release(k.rem(k.add(i, S - 1), S, type=t.u32))
            else:
                ptx.wgmma_wait_group(k, n_wait)
                line = release(s)
    ptx.wgmma_wait_group(k, 0)
    k.ret()
    return k, line


@pytest.mark.parametrize("case, right, wrong", [("single", 0, 1), ("previous", 1, 2),
                                                ("current", 0, 1)])
def test_stage_released_while_its_wgmma_group_is_in_flight(case, right, wrong):
    k, line = _released(case, wrong)
    f = only(check_kernel(k), Hazard.WGMMA_SMEM_RELEASED, line)
    assert ("retires no group" if case == "single" else "leaves its group in flight") \
        in f.message
    clean(_released(case, right)[0])


# -- arrive counts of barriers in dynamic shared memory --------------------------------------------
def test_arrive_count_of_a_ring_in_dynamic_shared_memory():
    # Full and empty barriers live in one extern buffer after the tiles (storage=Addr(...)).
    found = PK.build_ring(3, empty_count=1, dynamic=True).check()
    assert ids(found) == ["mbar-arrive-count"], [f.format() for f in found]
    assert "expect 1 arrivals" in found[0].message and "2 arrivals" in found[0].message
    assert PK.build_ring(3, dynamic=True).check() == []


def test_several_arrive_sites_on_one_barrier_is_a_note():
    """Releasing the previous stage in the loop and the last one after it: two arrive sites
    on the empty barriers, whose phases the checker cannot apportion: a note, not silence."""
    k = Kernel("k", reqntid=64)
    n = k.ld_param(k.param(t.u32, "n"))
    empty = k.shared_array(t.b64, 2, align=8, name="empty")
    with k.if_(k.tid.x == 0):
        for s in range(2):
            ptx.mbarrier_init(k, Addr(empty, 8 * s), 2)
    k.bar_sync(0)

    def release(i):
        with k.if_(k.laneid == 0):
            ptx.mbarrier_arrive(k, k.add(k.mov(empty), k.shl(k.and_(i, 1, type=t.b32), 3)),
                                dst="_")

    with k.for_range(0, n) as i:
        with k.if_(i > 0):
            release(k.sub(i, 1))
    release(k.sub(n, 1))
    k.ret()
    assert check_kernel(k) == []
    notes = check_kernel(k, notes=True)
    assert [(f.severity, f.message.split(":")[0]) for f in notes] == \
        [(Severity.note, "arrive-count")], [f.format() for f in notes]


# -- a plain arrive instead of arrive.expect_tx in a warp-specialized ring -------------------------
def _ws_ring(plain: bool) -> tuple[Kernel, int]:
    """A producer warp (one elected lane) fills a 2-stage ring, consumer warps wait on the
    full barriers; the producer announces the bytes (right) or arrives plainly (the
    mistake). Returns the kernel and the line of the copy (where the finding leads: no
    expect_tx site to name)."""
    k = Kernel("ring", reqntid=160)
    tmap = k.tensormap_addr(k.param_tensormap("tmap"))
    n = k.ld_param(k.param(t.u32, "n"))
    full = k.shared_array(t.b64, 2, align=8, name="full")
    empty = k.shared_array(t.b64, 2, align=8, name="empty")
    tiles = k.shared_array(t.b8, 1024, align=1024, name="tiles")
    with k.if_(k.tid.x == 0):
        for s in range(2):
            ptx.mbarrier_init(k, Addr(full, 8 * s), 1)
            ptx.mbarrier_init(k, Addr(empty, 8 * s), 4)
        ptx.fence_mbarrier_init(k)
    k.bar_sync(0)
    with k.if_(k.shr(k.tid.x, 5) == 0):
        with k.for_range(0, n) as i:
            s = k.rem(i, 2, type=t.u32)
            ph = k.and_(k.div(i, 2, type=t.u32), 1, type=t.b32)
            with k.if_(k.elect_sync()):
                ptx.mbarrier_wait(k, k.add(k.mov(empty), k.shl(s, 3)), k.xor(ph, 1, type=t.b32))
                bar = k.add(k.mov(full), k.shl(s, 3))
                if plain:
                    ptx.mbarrier_arrive(k, bar, dst="_")
                else:
                    ptx.mbarrier_arrive_expect_tx(k, "release", "cta", "shared::cta", bar, 512,
                                                  dst="_")
                dst = k.add(k.mov(tiles), k.shl(s, 9))
                line = here() + 1
                ptx.cp_async_bulk_tensor(k, "shared::cluster", "global", dst, tmap, (0, i), bar)
    with k.else_():
        with k.for_range(0, n) as i:
            s = k.rem(i, 2, type=t.u32)
            ptx.mbarrier_wait(k, k.add(k.mov(full), k.shl(s, 3)),
                              k.and_(k.div(i, 2, type=t.u32), 1, type=t.b32))
            k.ld(k.add(k.mov(tiles), k.shl(s, 9)), type=t.u32, space="shared::cta")
            k.syncwarp()
            with k.if_(k.laneid == 0):
                ptx.mbarrier_arrive(k, k.add(k.mov(empty), k.shl(s, 3)), dst="_")
    k.ret()
    return k, line


def test_warp_specialized_producer_arriving_without_expect_tx():
    k, line = _ws_ring(plain=True)
    f = only(check_kernel(k, maps={"tmap": {"box_bytes": 512}}), Hazard.EXPECT_TX_MISMATCH,
              line)
    assert "announces 0 bytes" in f.message and "arrivals alone" in f.message
    clean(_ws_ring(plain=False)[0], maps={"tmap": {"box_bytes": 512}})


# -- one finding per wgmma, not per register or per instruction ------------------------------------
def _epilogue(wait: bool, fence: bool) -> tuple[Kernel, int, int]:
    """Two wgmmas (k-steps) into one m64n64 f32 fragment, one group; the epilogue stores all
    32 accumulators. Returns the kernel, the first wgmma's line and the epilogue's line."""
    k = Kernel("k", reqntid=128)
    sa = k.shared_array(t.b8, L.nbytes, align=1024, name="sa")
    sb = k.shared_array(t.b8, L.nbytes, align=1024, name="sb")
    acc = k.fragment(t.f32, shape=(64, 64))
    da, db = descriptor(k, L, sa), descriptor(k, L, sb)
    if fence:
        ptx.wgmma_fence(k)
    mma_line = here() + 1
    ptx.wgmma_mma_async(k, acc, da, db, atype="bf16", scale_d=0)
    ptx.wgmma_mma_async(k, acc, da, db, atype="bf16")
    ptx.wgmma_commit_group(k)
    if wait:
        ptx.wgmma_wait_group(k, 0)
    out = k.ld_param(k.param_ptr("out"))
    store_line = here() + 1
    acc.store(out, 64)
    ptx.wgmma_wait_group(k, 0)
    return k, mma_line, store_line


def test_accumulators_read_in_flight_is_one_finding():
    k, _, line = _epilogue(wait=False, fence=True)
    f = only(check_kernel(k), Hazard.WGMMA_REGS_IN_FLIGHT, line)
    assert "(32 registers) are accessed by" in f.message and ".." in f.message
    clean(_epilogue(wait=True, fence=True)[0])


def test_missing_fence_is_one_finding_per_group():
    k, line, _ = _epilogue(wait=True, fence=False)
    only(check_kernel(k), Hazard.WGMMA_NO_FENCE, line)
    clean(_epilogue(wait=True, fence=True)[0])


# -- tma-smem-align: name the static variables in front of the dynamic buffer ----------------------
def test_dynamic_buffer_behind_static_barriers_names_them():
    def build(dynamic_ring: bool) -> Kernel:
        from ptxdsl.pipeline import MbarrierRing
        k = Kernel("k", reqntid=128)
        tmap = k.tensormap_addr(k.param_tensormap("tmap"))
        dyn = k.extern_shared("dyn", align=1024)
        ring = MbarrierRing(k, 1, storage=Addr(dyn, 1024) if dynamic_ring else None)
        ring.init()
        with k.if_(k.tid.x == 0):
            ptx.mbarrier_arrive_expect_tx(k, "release", "cta", "shared::cta",
                                          ring.full_at(0), 512, dst="_")
            ptx.cp_async_bulk_tensor(k, "shared::cluster", "global", dyn, tmap, (0, 0),
                                     ring.full_at(0))
        ptx.mbarrier_wait(k, ring.full_at(0), 0)
        k.ret()
        return k

    found = check_kernel(build(False), maps={"tmap": {"box_bytes": 512}})
    assert ids(found) == ["tma-smem-align"], [f.format() for f in found]
    f = found[0]
    assert "ring_full, ring_empty" in f.message and "storage=Addr" in f.fix
    assert "digest" not in f.fix and "[docs/hazards.md: tma-smem-align]" in f.fix
    clean(build(True), maps={"tmap": {"box_bytes": 512}})
