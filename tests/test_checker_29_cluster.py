"""Checker, issue 29: clusters and distributed shared memory (reads of a peer CTA's shared
memory before a cluster barrier, a CTA leaving while its peers still use its shared memory,
arrivals and bytes other CTAs deliver), and tensor maps in a per-CTA workspace (two maps of
one slot, a .cta release nobody in the kernel acquires). Each hazard is found with its id at
the user's line, written two ways; each corrected twin checks clean. The split-K and
multicast-ring kernels are in tests/cluster_kernels29.py."""

from __future__ import annotations

import pytest

from ptxdsl import Addr, Kernel, Module, ptx, t
from ptxdsl.checker import Hazard, check_kernel, check_module
from ptxdsl.pipeline import cluster_sync
from ptxdsl.testing import assemble_declared
from tests import cluster_kernels29 as CK
from tests.checker_kernels import clean, here, only

MAP = {"tmap": {"box_bytes": CK.MC_TILE // 2}}


def _only(kl, hazard: Hazard, at: str, **ctx):
    """The kernel's findings are one `hazard`, at the line recorded as `at`."""
    k, lines = kl
    found = check_kernel(k, **ctx)
    assert [f.id for f in found] == [hazard.value], [f.format() for f in found]
    assert found[0].loc.line == lines[at], found[0].format()
    return found[0]


# -- the clean corpus: split-K through distributed shared memory, a 2-CTA multicast ring -----------
@pytest.mark.parametrize("build", [
    lambda: CK.splitk_ld(), lambda: CK.splitk_push(),
    lambda: CK.splitk_push(publish="mbarrier"), lambda: CK.splitk_red(),
    lambda: CK.splitk_async(),
    lambda: CK.splitk_async(exchange=True), lambda: CK.multicast_ring(),
    lambda: CK.multicast_ring(by_hand=True),
    lambda: CK.multicast_ring(by_hand=True, release="lanes"), lambda: CK.exchange_loop(),
    lambda: CK.exchange_loop(sync="asm"), lambda: CK.exchange_loop(second=False, double=True),
    lambda: CK.splitk_gather()],
    ids=["ld.shared::cluster", "st.shared::cluster", "st.shared::cluster+mbarrier",
         "red.shared::cluster", "st.async+red.async", "exchange",
         "MbarrierRing", "by-hand-ring", "lane-ranks", "loop", "loop-inline-ptx",
         "loop-double-buffer", "gather"])
def test_clean_cluster_kernels(build):
    k, _ = build()
    clean(k, maps=MAP)
    # real kernels: the PTX assembles for sm_90a
    assert assemble_declared(Module([k], target="sm_90a", check=False).emit())[:4] == b"\x7fELF"


# -- reading a peer CTA's shared memory before the cluster barrier ---------------------------------
@pytest.mark.parametrize("publish", ["cta", "relaxed"])
def test_peer_read_before_cluster_barrier(publish):
    """CTA 0 reads CTA 1's partial tile through mapa + ld.shared::cluster after only bar.sync
    (or a .relaxed cluster arrive, which orders no memory): CTA 1 may not have written it."""
    f = _only(CK.splitk_ld(publish=publish), Hazard.DSMEM_READ_UNSYNCED, "read")
    assert "partial" in f.message and [s.role for s in f.sites] == ["read", "write"]


@pytest.mark.parametrize("build", [CK.splitk_push, CK.splitk_red], ids=["st", "red"])
def test_pushed_tile_read_before_cluster_barrier(build):
    """The second spelling: each CTA stores (st.shared::cluster) or adds (red.shared::cluster)
    into another CTA's buffer, which reads it after a relaxed cluster barrier."""
    f = _only(build(publish="relaxed"), Hazard.DSMEM_READ_UNSYNCED, "read")
    assert "write into it through mapa" in f.message


def test_pushed_tile_published_by_a_relaxed_remote_arrive():
    """The stores into the peer are followed by an arrive on its barrier, which the peer
    waits on: a .relaxed arrive publishes nothing (and does not keep the peer from leaving
    before the stores landed)."""
    k, lines = CK.splitk_push(publish="mbarrier-relaxed")
    found = check_kernel(k)
    assert sorted(f.id for f in found) == ["dsmem-read-unsynced", "dsmem-released-early"]
    read = next(f for f in found if f.hazard is Hazard.DSMEM_READ_UNSYNCED)
    assert read.loc.line == lines["read"]


# -- a CTA leaving (or reusing its shared memory) while peers still use it ------------------------
def test_cta_exits_while_its_peer_reads_its_partial_tile():
    f = _only(CK.splitk_ld(final=False), Hazard.DSMEM_RELEASED_EARLY, "read")
    assert "may exit" in f.message


@pytest.mark.parametrize("by_hand", [False, True], ids=["MbarrierRing", "by-hand"])
def test_ring_without_the_final_cluster_barrier(by_hand):
    """Consumers release the stage on both CTAs until the last tile: a CTA that exits right
    after its loop leaves its peer arriving on a barrier that no longer exists."""
    f = _only(CK.multicast_ring(final=False, by_hand=by_hand), Hazard.DSMEM_RELEASED_EARLY,
              "release", maps=MAP)
    assert "mbarrier.arrive" in f.message


def test_peer_returns_early_while_cta0_gathers_its_tile():
    """CTA 1 returns right after publishing its partial tile (`if rank != 0: ret`) while CTA
    0 reads it: found at CTA 1's exit, on a path of its own (CTA 0's path ends with a
    cluster barrier)."""
    f = _only(CK.splitk_gather(stay=False), Hazard.DSMEM_RELEASED_EARLY, "exit")
    assert "CTA 1 may exit here" in f.message
    clean(CK.splitk_gather()[0])


def test_partial_tile_overwritten_while_the_peer_reads_it():
    f = _only(CK.splitk_ld(reuse=True), Hazard.DSMEM_RELEASED_EARLY, "reuse")
    assert "overwrites" in f.message
    # The CTAs are told apart by rank: only CTA 1's partial is read, CTA 0 may reuse its own.
    clean(CK.splitk_ld(reuse="rank0")[0])


def test_buffer_overwritten_in_the_next_iteration_while_the_peer_reads_it():
    """In a loop: with no cluster barrier after the remote read, the next iteration's write
    races with the peer's read of the previous value."""
    f = _only(CK.exchange_loop(second=False), Hazard.DSMEM_RELEASED_EARLY, "write")
    assert "a peer may still be reading the old data" in f.message


def test_red_async_into_a_barrier_nobody_waits_on():
    """A count kept with red.async in the peer's shared memory: its barrier is never waited
    on, so nothing keeps the peer alive until the update landed."""
    def build(final: bool) -> tuple[Kernel, int]:
        k = Kernel("k", reqntid=32, reqnctapercluster=2)
        count = k.shared_array(t.u32, 1, align=4, name="count")
        bar = k.shared_array(t.b64, 1, align=8, name="bar")
        with k.if_(k.tid.x == 0):
            ptx.mbarrier_init(k, bar, 1)
            ptx.fence_mbarrier_init(k)
        ptx.barrier_cluster_arrive(k)
        ptx.barrier_cluster_wait(k)
        peer = k.xor(k.cluster_ctarank, 1)
        line = here() + 1
        ptx.red_async(k, "add", ptx.mapa(k, "cluster", count, peer), k.mov(1, type=t.u32),
                      ptx.mapa(k, "cluster", bar, peer))
        if final:
            ptx.barrier_cluster_arrive(k)
            ptx.barrier_cluster_wait(k)
        k.ret()
        return k, line

    k, line = build(False)
    only(check_kernel(k), Hazard.DSMEM_RELEASED_EARLY, line)
    clean(build(True)[0])


# -- arrivals other CTAs make ----------------------------------------------------------------------
@pytest.mark.parametrize("by_hand", [False, True], ids=["MbarrierRing", "by-hand"])
def test_cluster_consumer_releases_only_its_own_stage(by_hand):
    """empty[s] expects the 4 consumer warps of both CTAs; releasing only the own CTA's stage
    (ctas=[rank]) gives each barrier 4 arrivals a phase: the producers hang."""
    f = _only(CK.multicast_ring(release="own", by_hand=by_hand), Hazard.MBAR_ARRIVE_COUNT,
              "release", maps=MAP)
    assert "expect 8 arrivals" in f.message and "receives 4" in f.message


def test_cluster_release_by_lane_rank_misses_a_cta():
    """CUTLASS-style, lane r of each consumer warp releases CTA r's stage; with `lane < 1`
    instead of `lane < 2` CTA 1's stage is never released."""
    f = _only(CK.multicast_ring(release="lane0", by_hand=True), Hazard.MBAR_ARRIVE_COUNT,
              "release", maps=MAP)
    assert "CTA 1 receives 0" in f.message


def test_remote_arrivals_to_one_constant_rank():
    """Every CTA arrives on CTA 0's barrier only: CTA 0 gets twice its count, CTA 1 none."""
    def build(rank) -> tuple[Kernel, int]:
        k = Kernel("k", reqntid=32, reqnctapercluster=2)
        bar = k.shared_array(t.b64, 1, align=8, name="bar")
        with k.if_(k.tid.x == 0):
            ptx.mbarrier_init(k, bar, 1)
            ptx.fence_mbarrier_init(k)
        ptx.barrier_cluster_arrive(k)
        ptx.barrier_cluster_wait(k)
        with k.if_(k.tid.x == 0):
            line = here() + 1
            ptx.mbarrier_arrive(k, "release", "cluster", "cluster",
                                ptx.mapa(k, "cluster", bar, rank(k)))
        ptx.mbarrier_wait(k, bar, 0)
        ptx.barrier_cluster_arrive(k)
        ptx.barrier_cluster_wait(k)
        return k, line

    k, line = build(lambda k: 0)
    f = only(check_kernel(k), Hazard.MBAR_ARRIVE_COUNT, line)
    assert "CTA 0 receives 2" in f.message
    clean(build(lambda k: k.xor(k.cluster_ctarank, 1))[0])


# -- bytes other CTAs deliver ----------------------------------------------------------------------
@pytest.mark.parametrize("exchange", [False, True], ids=["rank-1-to-0", "exchange"])
def test_expect_tx_forgets_the_red_async_bytes(exchange):
    f = _only(CK.splitk_async(expect="st", exchange=exchange), Hazard.EXPECT_TX_MISMATCH,
              "expect")
    assert "announces 512 bytes" in f.message and "deliver 1024 bytes" in f.message
    assert "st.async / red.async" in f.message


def _multicast_by_rank(ctas: int, tx: int) -> tuple[Kernel, int]:
    """Every CTA loads a 256-byte slice and multicasts it with a ctaMask computed from its
    rank: 2 CTAs, to the peer only (`1 << (rank ^ 1)`: one slice a CTA); 4 CTAs, to its
    pair (`0b11 << (rank & 2)`: two slices a CTA)."""
    k = Kernel("k", reqntid=128, reqnctapercluster=(ctas, 1, 1))
    tmap = k.tensormap_addr(k.param_tensormap("tmap"))
    tile = k.shared_array(t.b8, 1024, align=128, name="tile")
    bar = k.shared_array(t.b64, 1, align=8, name="bar")
    rank = k.cluster_ctarank
    with k.if_(k.tid.x == 0):
        ptx.mbarrier_init(k, bar, 1)
        ptx.fence_mbarrier_init(k)
    cluster_sync(k)
    with k.if_(k.tid.x == 0):
        line = here() + 1
        ptx.mbarrier_arrive_expect_tx(k, "release", "cta", "shared::cta", bar, tx, dst="_")
        if ctas == 2:
            mask = k.shl(k.mov(1, type=t.u32), k.xor(rank, 1))
        else:
            mask = k.shl(k.mov(3, type=t.u32), k.and_(rank, 2))
        dst = Addr(tile, 0) if ctas == 2 else k.add(k.mov(tile), k.shl(k.and_(rank, 1), 8))
        ptx.cp_async_bulk_tensor(k, "shared::cluster", "global", dst, tmap, (0, 0), bar,
                                 cta_mask=k.cvt(mask, t.u16))
    ptx.mbarrier_wait(k, bar, 0)
    cluster_sync(k)
    return k, line


@pytest.mark.parametrize("ctas,right", [(2, 256), (4, 512)])
def test_multicast_mask_computed_from_the_rank(ctas, right):
    """The slices a CTA receives are counted per rank: an expect_tx of the own slice only
    (4 CTAs) or of two (2 CTAs, where only the peer's arrives) is wrong."""
    maps = {"tmap": {"box_bytes": 256}}
    k, line = _multicast_by_rank(ctas, 768 - right)
    f = only(check_kernel(k, maps=maps), Hazard.EXPECT_TX_MISMATCH, line)
    assert f"deliver {right} bytes" in f.message
    clean(_multicast_by_rank(ctas, right)[0], maps=maps)


# -- tensor maps in a per-CTA workspace ------------------------------------------------------------
def _workspace(acquire_b: bool, style: str) -> tuple[Kernel, int]:
    """Two maps in this CTA's 256-byte slot of a workspace, at +0 and +128; only the first is
    acquired unless `acquire_b`. `style`: the second map's address from the slot register
    ("add") or from the workspace pointer again ("again")."""
    k = Kernel("k", reqntid=32)
    ws = k.ld_param(k.param_ptr("workspace"))
    slot = k.add(ws, k.cvt(k.mul(k.ctaid.x, 256, type=t.u32), t.u64))
    if style == "add":
        map_b = k.add(slot, 128)
    else:
        map_b = k.add(k.add(ws, k.cvt(k.mul(k.ctaid.x, 256, type=t.u32), t.u64)), 128)
    ptx.fence_proxy_tensormap_generic(k, "acquire", "gpu", slot)
    if acquire_b:
        ptx.fence_proxy_tensormap_generic(k, "acquire", "gpu", map_b)
    ptx.cp_async_bulk_prefetch_tensor(k, slot, (0, 0))
    line = here() + 1
    ptx.cp_async_bulk_prefetch_tensor(k, map_b, (0, 0))
    return k, line


@pytest.mark.parametrize("style", ["add", "again"])
def test_two_maps_of_one_per_cta_slot_are_distinct(style):
    k, line = _workspace(False, style)
    f = only(check_kernel(k), Hazard.TMAP_NO_ACQUIRE, line)
    assert "never acquired" in f.message
    clean(_workspace(True, style)[0])


def _per_cta_publish(scope: str, how: str) -> tuple[Module, int]:
    """A writer kernel publishes a map into its CTA's slot of a workspace (`how`:
    "cp_fenceproxy", or tensormap.replace in place + a tensormap release); a reader kernel
    acquires it at .gpu scope and uses it."""
    w = Kernel("writer", reqntid=32)
    ws = w.ld_param(w.param_ptr("workspace"))
    slot = w.add(ws, w.cvt(w.mul(w.ctaid.x, 128, type=t.u32), t.u64))
    if how == "cp_fenceproxy":
        smap = w.shared_array(t.b8, 128, align=128, name="smap")
        with w.if_(w.laneid == 0):
            ptx.tensormap_replace_box_dim(w, "shared", smap, 0, 16)
        w.syncwarp()
        line = here() + 1
        ptx.tensormap_cp_fenceproxy(w, "release", scope, slot, smap, 128)
    else:
        ptx.tensormap_replace_box_dim(w, "global", w.cvta(slot, "global", to=True), 0, 16)
        line = here() + 1
        ptx.fence_proxy_tensormap_generic(w, "release", scope)
    r = Kernel("reader", reqntid=32)
    ws = r.ld_param(r.param_ptr("workspace"))
    slot = r.add(ws, r.cvt(r.mul(r.ctaid.x, 128, type=t.u32), t.u64))
    ptx.fence_proxy_tensormap_generic(r, "acquire", "gpu", slot)
    ptx.cp_async_bulk_prefetch_tensor(r, slot, (0, 0))
    return Module([w, r]), line


@pytest.mark.parametrize("how", ["cp_fenceproxy", "replace"])
def test_cta_release_into_a_per_cta_slot_another_kernel_acquires(how):
    mod, line = _per_cta_publish("cta", how)
    f = only(check_module(mod), Hazard.TMAP_SCOPE_TOO_NARROW, line)
    assert "never acquires it" in f.message and f.kernel == "writer"
    assert check_module(_per_cta_publish("gpu", how)[0]) == []
