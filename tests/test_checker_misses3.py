"""Checker: hazards it used to miss (a first wait whose parity is off by one phase, two copies
of one barrier phase landing on the same bytes, a tensor map copied to global memory with
plain stores and no tensormap release). Each kernel has the hazard (right id, right Python
line) and a corrected twin that checks clean."""

from __future__ import annotations

import pytest

from ptxdsl import Addr, Kernel, ptx, t
from ptxdsl.checker import Hazard, check_kernel
from tests.checker_kernels import clean, here, ids, only

MAP = {"tmap": {"box_bytes": 512}}




# -- the first phase of a fresh barrier ------------------------------------------------------------
def _ring(S: int, style: str, producer_start: int, consumer_start: int
          ) -> tuple[Kernel, int, int]:
    """Warp 0 produces into an S-stage ring, warps 1-4 consume. The parity starts at
    `producer_start` / `consumer_start`: computed from the counter (`style="div"`: (i / S) & 1,
    xor 1 for a start of 1) or a phase variable flipped when the stage wraps ("wrap").
    Returns the kernel and the lines of the producer's and the consumer's waits."""
    k = Kernel("ring", reqntid=160)
    tmap = k.tensormap_addr(k.param_tensormap("tmap"))
    n = k.ld_param(k.param(t.u32, "n"))
    full = k.shared_array(t.b64, S, align=8, name="full")
    empty = k.shared_array(t.b64, S, align=8, name="empty")
    tiles = k.shared_array(t.b8, 512 * S, align=1024, name="tiles")
    with k.if_(k.tid.x == 0):
        for s in range(S):
            ptx.mbarrier_init(k, Addr(full, 8 * s), 1)
            ptx.mbarrier_init(k, Addr(empty, 8 * s), 4)
        ptx.fence_mbarrier_init(k)
    k.bar_sync(0)

    def cursor(start):
        if style == "div":
            def at(i):
                ph = k.and_(k.div(i, S, type=t.u32), 1, type=t.b32)
                return k.rem(i, S, type=t.u32), (k.xor(ph, 1, type=t.b32) if start else ph)
            return at, lambda: None
        st, ph = k.mov(0, type=t.u32), k.mov(start, type=t.b32)

        def adv():
            k.add(st, 1, dst=st)
            with k.if_(st == S):
                k.mov(0, dst=st)
                k.xor(ph, 1, dst=ph)
        return (lambda i: (st, ph)), adv

    with k.if_(k.shr(k.tid.x, 5) == 0):
        at, adv = cursor(producer_start)
        with k.for_range(0, n) as i:
            s, ph = at(i)
            with k.if_(k.elect_sync()):
                line_p = here() + 1
                ptx.mbarrier_wait(k, k.add(k.mov(empty), k.shl(s, 3)), ph)
                bar = k.add(k.mov(full), k.shl(s, 3))
                ptx.mbarrier_arrive_expect_tx(k, "release", "cta", "shared::cta", bar, 512,
                                              dst="_")
                ptx.cp_async_bulk_tensor(k, "shared::cluster", "global",
                                         k.add(k.mov(tiles), k.shl(s, 9)), tmap, (0, i), bar)
            adv()
    with k.else_():
        at, adv = cursor(consumer_start)
        with k.for_range(0, n) as i:
            s, ph = at(i)
            line_c = here() + 1
            ptx.mbarrier_wait(k, k.add(k.mov(full), k.shl(s, 3)), ph)
            k.ld(k.add(k.mov(tiles), k.shl(s, 9)), type=t.u32, space="shared::cta")
            k.syncwarp()
            with k.if_(k.laneid == 0):
                ptx.mbarrier_arrive(k, k.add(k.mov(empty), k.shl(s, 3)), dst="_")
            adv()
    k.ret()
    return k, line_p, line_c


@pytest.mark.parametrize("style", ["div", "wrap"])
def test_consumer_first_wait_for_parity_one_reads_before_the_data(style):
    k, _, line = _ring(3, style, producer_start=1, consumer_start=1)
    f = only(check_kernel(k, maps=MAP), Hazard.WAIT_PARITY_FIRST_PHASE, line)
    assert "passes at once" in f.message
    clean(_ring(3, style, producer_start=1, consumer_start=0)[0], maps=MAP)


@pytest.mark.parametrize("style", ["div", "wrap"])
def test_producer_first_wait_for_parity_zero_hangs(style):
    k, line, _ = _ring(2, style, producer_start=0, consumer_start=0)
    f = only(check_kernel(k, maps=MAP), Hazard.WAIT_PARITY_FIRST_PHASE, line)
    assert "hangs" in f.message


def test_single_load_waited_for_parity_one():
    def build(parity: int) -> tuple[Kernel, int]:
        k = Kernel("k", reqntid=32)
        tmap = k.tensormap_addr(k.param_tensormap("tmap"))
        tile = k.shared_array(t.b8, 512, align=128, name="tile")
        bar = k.shared_array(t.b64, 1, align=8, name="bar")
        with k.if_(k.tid.x == 0):
            ptx.mbarrier_init(k, bar, 1)
            ptx.fence_proxy_async(k, "shared::cta")
            ptx.mbarrier_arrive_expect_tx(k, "release", "cta", "shared::cta", bar, 512, dst="_")
            ptx.cp_async_bulk_tensor(k, "shared::cluster", "global", tile, tmap, (0, 0), bar)
        k.syncwarp()
        line = here() + 1
        ptx.mbarrier_wait(k, bar, parity)
        k.ld(tile, type=t.u32, space="shared::cta")
        k.ret()
        return k, line

    k, line = build(1)
    only(check_kernel(k, maps=MAP), Hazard.WAIT_PARITY_FIRST_PHASE, line)
    clean(build(0)[0], maps=MAP)


# -- two copies of one phase on the same bytes ----------------------------------------------------
def _split(same_slot: bool) -> tuple[Kernel, int]:
    """Warps 0 and 1 each load one operand of stage s into its half of the stage (full[s]
    counts 2 arrivals); the mistake: both load A into the first half."""
    S = 3
    k = Kernel("split", reqntid=192)
    ta = k.tensormap_addr(k.param_tensormap("map_a"))
    tb = k.tensormap_addr(k.param_tensormap("map_b"))
    n = k.ld_param(k.param(t.u32, "n"))
    full = k.shared_array(t.b64, S, align=8, name="full")
    empty = k.shared_array(t.b64, S, align=8, name="empty")
    tiles = k.shared_array(t.b8, 1024 * S, align=1024, name="tiles")
    with k.if_(k.tid.x == 0):
        for s in range(S):
            ptx.mbarrier_init(k, Addr(full, 8 * s), 2)
            ptx.mbarrier_init(k, Addr(empty, 8 * s), 4)
        ptx.fence_mbarrier_init(k)
    k.bar_sync(0)
    warp = k.shr(k.tid.x, 5)
    line = 0
    with k.if_(warp < 2):
        with k.for_range(0, n) as i:
            s = k.rem(i, S, type=t.u32)
            with k.if_(k.elect_sync()):
                par = k.xor(k.and_(k.div(i, S, type=t.u32), 1, type=t.b32), 1, type=t.b32)
                ptx.mbarrier_wait(k, k.add(k.mov(empty), k.shl(s, 3)), par)
                bar = k.add(k.mov(full), k.shl(s, 3))
                ptx.mbarrier_arrive_expect_tx(k, "release", "cta", "shared::cta", bar, 512,
                                              dst="_")
                slot = k.add(k.mov(tiles), k.shl(s, 10))
                if same_slot:
                    line = here() + 1
                    ptx.cp_async_bulk_tensor(k, "shared::cluster", "global", slot, ta, (0, i), bar)
                else:
                    with k.if_(k.and_(warp, 1) == 0):
                        ptx.cp_async_bulk_tensor(k, "shared::cluster", "global", slot, ta,
                                                 (0, i), bar)
                    with k.else_():
                        ptx.cp_async_bulk_tensor(k, "shared::cluster", "global",
                                                 k.add(slot, 512), tb, (0, i), bar)
    with k.else_():
        with k.for_range(0, n) as i:
            s = k.rem(i, S, type=t.u32)
            ptx.mbarrier_wait(k, k.add(k.mov(full), k.shl(s, 3)),
                              k.and_(k.div(i, S, type=t.u32), 1, type=t.b32))
            k.ld(k.add(k.mov(tiles), k.add(k.shl(s, 10), k.shl(k.and_(k.tid.x, 255), 2))),
                 type=t.u32, space="shared::cta")
            k.syncwarp()
            with k.if_(k.laneid == 0):
                ptx.mbarrier_arrive(k, k.add(k.mov(empty), k.shl(s, 3)), dst="_")
    k.ret()
    return k, line


SPLIT_MAPS = {"map_a": {"box_bytes": 512}, "map_b": {"box_bytes": 512}}


def test_two_producers_load_into_the_same_slot():
    k, line = _split(same_slot=True)
    f = only(check_kernel(k, maps=SPLIT_MAPS), Hazard.TMA_DST_OVERLAP, line)
    assert "2 threads" in f.message
    clean(_split(same_slot=False)[0], maps=SPLIT_MAPS)


def test_two_loads_of_one_phase_into_overlapping_offsets():
    def build(second: int) -> tuple[Kernel, int]:
        k = Kernel("k", reqntid=32)
        ta = k.tensormap_addr(k.param_tensormap("map_a"))
        tb = k.tensormap_addr(k.param_tensormap("map_b"))
        tile = k.shared_array(t.b8, 1024, align=128, name="tile")
        bar = k.shared_array(t.b64, 1, align=8, name="bar")
        with k.if_(k.tid.x == 0):
            ptx.mbarrier_init(k, bar, 1)
            ptx.fence_proxy_async(k, "shared::cta")
            ptx.mbarrier_arrive_expect_tx(k, "release", "cta", "shared::cta", bar, 1024, dst="_")
            ptx.cp_async_bulk_tensor(k, "shared::cluster", "global", tile, ta, (0, 0), bar)
            line = here() + 1
            ptx.cp_async_bulk_tensor(k, "shared::cluster", "global", Addr(tile, second), tb,
                                     (0, 0), bar)
        k.syncwarp()
        ptx.mbarrier_wait(k, bar, 0)
        k.ld(tile, type=t.u32, space="shared::cta")
        k.ret()
        return k, line

    k, line = build(256)
    only(check_kernel(k, maps=SPLIT_MAPS), Hazard.TMA_DST_OVERLAP, line)
    clean(build(512)[0], maps=SPLIT_MAPS)


# -- a shared tensor map published with plain stores ----------------------------------------------
def _publish(how: str) -> tuple[Kernel, int]:
    """One warp edits a shared copy of the map, publishes it to the global workspace
    (`how`: "cp_fenceproxy", "stores" with ld.shared/st.global, or "stores+release" with
    the tensormap release after them), acquires and loads through it."""
    k = Kernel("enc", reqntid=32)
    ws = k.ld_param(k.param_ptr("workspace"))
    src = k.ld_param(k.param(t.u64, "base"))
    smap = k.shared_array(t.b8, 128, align=128, name="smap")
    tile = k.shared_array(t.b8, 512, align=128, name="tile")
    bar = k.shared_array(t.b64, 1, align=8, name="bar")
    with k.if_(k.laneid == 0):
        ptx.mbarrier_init(k, bar, 1)
        ptx.fence_proxy_async(k, "shared::cta")
    k.syncwarp()
    ptx.fence_proxy_tensormap_generic(k, "acquire", "gpu", ws)
    gmap = k.cvta(ws, "global", to=True)
    lane4 = k.shl(k.laneid, 2)
    w = k.ld(k.add(gmap, k.cvt(lane4, t.u64)), type=t.u32, space="global")
    k.st(k.add(k.mov(smap), lane4), w, type=t.u32, space="shared::cta")
    k.syncwarp()
    with k.if_(k.laneid == 0):
        ptx.tensormap_replace_global_address(k, "shared", smap, src)
    k.syncwarp()
    if how == "cp_fenceproxy":
        ptx.tensormap_cp_fenceproxy(k, "release", "gpu", ws, smap, 128)
    else:
        x = k.ld(k.add(k.mov(smap), lane4), type=t.u32, space="shared::cta")
        k.st(k.add(gmap, k.cvt(lane4, t.u64)), x, type=t.u32, space="global")
        if how == "stores+release":
            ptx.fence_proxy_tensormap_generic(k, "release", "gpu")
    line = here() + 1
    ptx.fence_proxy_tensormap_generic(k, "acquire", "gpu", ws)
    with k.if_(k.laneid == 0):
        ptx.mbarrier_arrive_expect_tx(k, "release", "cta", "shared::cta", bar, 512, dst="_")
        ptx.cp_async_bulk_tensor(k, "shared::cluster", "global", tile, ws, (0, 0), bar)
    ptx.mbarrier_wait(k, bar, 0)
    k.ret()
    return k, line


def test_shared_map_published_with_plain_stores_needs_a_release():
    maps = {"workspace": {"box_bytes": 512}}
    k, line = _publish("stores")
    f = only(check_kernel(k, maps=maps), Hazard.TMAP_REPLACE_NO_RELEASE, line)
    assert "st.global" in f.message
    clean(_publish("cp_fenceproxy")[0], maps=maps)
    clean(_publish("stores+release")[0], maps=maps)


# -- st.async on another barrier does not silence the byte count of this one ---------------------
def test_st_async_to_another_barrier_keeps_the_expect_tx_check():
    def build(announced: int) -> tuple[Kernel, int]:
        k = Kernel("k", reqntid=32, reqnctapercluster=2)
        tmap = k.tensormap_addr(k.param_tensormap("tmap"))
        tile = k.shared_array(t.b8, 512, align=128, name="tile")
        box = k.shared_array(t.b32, 1, align=4, name="box")
        bar = k.shared_array(t.b64, 1, align=8, name="bar")
        rbar = k.shared_array(t.b64, 1, align=8, name="rbar")
        with k.if_(k.tid.x == 0):
            ptx.mbarrier_init(k, bar, 1)
            ptx.mbarrier_init(k, rbar, 1)
            ptx.fence_mbarrier_init(k)
        ptx.barrier_cluster_arrive(k)
        ptx.barrier_cluster_wait(k)
        with k.if_(k.tid.x == 0):
            peer = k.xor(k.cluster_ctarank, 1)
            ptx.st_async(k, ptx.mapa(k, "cluster", box, peer), k.tid.x,
                         ptx.mapa(k, "cluster", rbar, peer))
            line = here() + 1
            ptx.mbarrier_arrive_expect_tx(k, "release", "cta", "shared::cta", bar, announced,
                                          dst="_")
            ptx.cp_async_bulk_tensor(k, "shared::cluster", "global", tile, tmap, (0, 0), bar)
        ptx.mbarrier_wait(k, bar, 0)
        k.ld(tile, type=t.u32, space="shared::cta")
        ptx.barrier_cluster_arrive(k)
        ptx.barrier_cluster_wait(k)
        k.ret()
        return k, line

    k, line = build(1024)
    only(check_kernel(k, maps=MAP), Hazard.EXPECT_TX_MISMATCH, line)
    clean(build(512)[0], maps=MAP)


def _multicast_in_cluster(mask: int, tx: int) -> tuple[Kernel, int]:
    """Every CTA of a declared 2-CTA cluster loads a 256-byte slice multicast to `mask`."""
    k = Kernel("k", reqntid=128, reqnctapercluster=(2, 1, 1))
    tmap = k.tensormap_addr(k.param_tensormap("tmap"))
    tile = k.shared_array(t.b8, 512, align=128, name="tile")
    bar = k.shared_array(t.b64, 1, align=8, name="bar")
    with k.if_(k.tid.x == 0):
        ptx.mbarrier_init(k, bar, 1)
        ptx.fence_mbarrier_init(k)
    k.bar_sync(0)
    ptx.barrier_cluster_arrive(k, "relaxed")
    ptx.barrier_cluster_wait(k)
    with k.if_(k.tid.x == 0):
        ptx.mbarrier_arrive_expect_tx(k, "release", "cta", "shared::cta", bar, tx, dst="_")
        line = here() + 1
        ptx.cp_async_bulk_tensor(k, "shared::cluster", "global", tile, tmap, (0, 0), bar,
                                 cta_mask=mask)
    ptx.mbarrier_wait(k, bar, 0)
    return k, line


def test_multicast_mask_leaving_out_a_cta_of_the_cluster():
    """With 0b01 both CTAs' loads land in CTA 0 (512 bytes) and none in CTA 1, whose wait
    never ends: whatever the count, one CTA is wrong."""
    for tx in (256, 512):
        k, line = _multicast_in_cluster(0b01, tx)
        found = check_kernel(k, maps={"tmap": {"box_bytes": 256}})
        assert ids(found) == ["expect-tx-mismatch"], [f.format() for f in found]
        assert found[0].loc.line == line
        assert "leaves out CTA 1: that CTA's barrier gets none" in found[0].message
    k, _ = _multicast_in_cluster(0b11, 512)
    assert check_kernel(k, maps={"tmap": {"box_bytes": 256}}) == []
