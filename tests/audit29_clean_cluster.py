"""Audit corpus (see tests/audit29_clean_kernels.py), clusters: GEMMs on 2- and 4-CTA
cluster rings with TMA multicast (MbarrierRing with peers=, releases to constant or computed
ranks, and a hand-written ring whose lane r releases CTA r), and split-K through distributed
shared memory (st.async into CTA 0 on its mbarrier, ld.shared::cluster between cluster
barriers, red.async.add of int8 partials from three peers)."""

from __future__ import annotations

from ptxdsl import Addr, Kernel, Module, ptx, t
from ptxdsl.instructions.wgmma_desc import SmemLayout, descriptor
from ptxdsl.pipeline import MbarrierRing, cluster_sync
from tests.audit29_clean_kernels import A64, A128, B128, B256, K_BF16, SW, _box


# -- (5) cluster rings with TMA multicast -------------------------------------------------------
def cluster_multicast_gemm(cluster: int = 2, ranks: bool = False) -> tuple[Module, dict]:
    """`cluster` CTAs stacked along M share the B tile: each loads B's 1/cluster slice of
    every stage and multicasts it to all of them, and its own A. The ring (MbarrierRing,
    peers=cluster) counts every CTA's two consumer warpgroups on each empty barrier; a
    consumer releases the stage on every CTA's barrier (mapa + shared::cluster arrive) once
    wait_group 1 retired the wgmma that read it. A final cluster barrier keeps every CTA alive
    until no peer can multicast into it or arrive on its barriers. `ranks`: the release names
    the CTAs as registers computed from the rank (its own, then the others by xor)."""
    stages = 4
    a_bytes, b_bytes = A128.nbytes, B256.nbytes
    stage = a_bytes + b_bytes
    slice_rows = 256 // cluster
    box_b = SmemLayout(t.bf16, slice_rows, K_BF16, "K", SW)
    k = Kernel(f"audit_cluster{cluster}_gemm" + ("_ranks" if ranks else ""), reqntid=384,
               minnctapersm=1, reqnctapercluster=(cluster, 1, 1))
    tma, tmb = (k.tensormap_addr(k.param_tensormap(n)) for n in ("map_a", "map_b"))
    c_ptr = k.ld_param(k.param_ptr("c"))
    N = k.ld_param(k.param(t.u32, "n"))
    kblocks = k.ld_param(k.param(t.u32, "kblocks"))
    smem = k.extern_shared("smem", align=1024)
    ring = MbarrierRing(k, stages, empty_count=2, peers=cluster,
                        storage=Addr(smem, stages * stage))
    ring.init()
    rank = ptx.get_sreg_cluster_ctarank(k)
    tid = k.tid.x
    wg = k.shr(tid, 7)
    m0 = k.mul(k.ctaid.x, 128)
    n0 = k.mul(k.ctaid.y, 256)
    with k.if_(wg == 0):
        ptx.setmaxnreg_dec(k, 40)
        with k.if_(tid == 0):
            p = ring.producer()
            mine = k.mad(rank, box_b.nbytes, a_bytes)     # my slice's offset in the stage
            b_row = k.mad(rank, slice_rows, n0)
            with k.for_range(0, kblocks) as kb:
                p.wait_empty()
                p.arrive_expect_tx(a_bytes + b_bytes)     # A + every CTA's slice of B
                slot, full = p.slot(smem, stage), p.full_barrier()
                kc = k.mul(kb, K_BF16)
                ptx.cp_async_bulk_tensor(k, "shared::cluster", "global", slot, tma, (kc, m0),
                                         full)
                ptx.cp_async_bulk_tensor(k, "shared::cluster", "global", k.add(slot, mine),
                                         tmb, (kc, b_row), full, (1 << cluster) - 1)
                p.advance()
    with k.else_():
        ptx.setmaxnreg_inc(k, 232)
        cw = k.sub(wg, 1)
        acc = k.fragment(t.f32, shape=(64, 256))
        read, free = ring.consumer(), ring.consumer()
        leader = k.and_(tid, 127) == 0

        def issue():
            read.wait_full()
            slot = read.slot(smem, stage)
            da = descriptor(k, A64, k.add(slot, k.mul(cw, A64.nbytes)))
            db = descriptor(k, B256, k.add(slot, a_bytes))
            ptx.wgmma_fence(k)
            for kk in range(0, K_BF16, 16):
                ptx.wgmma_mma_async(k, acc, da.k_step(k, kk), db.k_step(k, kk), atype="bf16")
            ptx.wgmma_commit_group(k)
            read.advance()

        peers = [rank] + [k.xor(rank, d) for d in range(1, cluster)] if ranks else None

        def release():
            with k.if_(leader):
                free.release(ctas=peers)                  # every CTA's empty[stage]
            free.advance()

        with k.if_(kblocks > 0):
            issue()
            with k.for_range(1, kblocks):
                issue()
                ptx.wgmma_wait_group(k, 1)
                release()
            ptx.wgmma_wait_group(k, 0)
            release()
        row0 = k.mad(cw, 64, m0)
        acc.store(k.add(c_ptr, k.mul(k.mad(row0, N, n0), 4, type=t.u32, mode="wide")), N)
    cluster_sync(k)
    k.ret()
    maps = {"map_a": _box(A128), "map_b": _box(box_b)}
    return Module([k], target="sm_90a"), maps


def cluster2_multicast_gemm() -> tuple[Module, dict]:
    return cluster_multicast_gemm(2)


def cluster4_multicast_gemm() -> tuple[Module, dict]:
    return cluster_multicast_gemm(4)


def cluster4_release_by_rank_registers() -> tuple[Module, dict]:
    return cluster_multicast_gemm(4, ranks=True)


def cluster4_handwritten_ring() -> tuple[Module, dict]:
    """A 4-CTA cluster along N sharing A, with the ring written out (CUTLASS-style): each CTA
    loads a quarter of A's 128 rows and multicasts it (ctaMask 0b1111) and its own B; each
    empty barrier counts 2 consumer warpgroups x 4 CTAs; lane r of a consumer warpgroup's
    first warp releases CTA r's empty barrier (mapa + mbarrier.arrive.release.cluster on
    shared::cluster) once wait_group 1 retired the stage's wgmma. Waits are acquire.cluster;
    a cluster barrier ends the kernel."""
    stages, cl = 4, 4
    stage = A128.nbytes + B128.nbytes
    quarter = SmemLayout(t.bf16, 128 // cl, K_BF16, "K", SW)
    k = Kernel("audit_cluster4_hand", reqntid=384, minnctapersm=1, reqnctapercluster=(cl, 1, 1))
    tma, tmb = (k.tensormap_addr(k.param_tensormap(n)) for n in ("map_a", "map_b"))
    c_ptr = k.ld_param(k.param_ptr("c"))
    N = k.ld_param(k.param(t.u32, "n"))
    kblocks = k.ld_param(k.param(t.u32, "kblocks"))
    smem = k.extern_shared("smem", align=1024)
    full, empty = stages * stage, stages * stage + 8 * stages      # after the stages
    tid = k.tid.x
    with k.if_(tid == 0):
        for s in range(stages):
            ptx.mbarrier_init(k, Addr(smem, full + 8 * s), 1)
            ptx.mbarrier_init(k, Addr(smem, empty + 8 * s), 2 * cl)
        ptx.fence_mbarrier_init(k, "release", "cluster")
    ptx.barrier_cluster_arrive(k, "release", aligned=True)
    ptx.barrier_cluster_wait(k, "acquire", aligned=True)
    rank = ptx.get_sreg_cluster_ctarank(k)
    tiles = k.mov(smem)
    full_base, empty_base = k.add(tiles, full), k.add(tiles, empty)
    m0 = k.mul(k.clusterid.y, 128)
    n0 = k.mul(k.ctaid.x, 128)
    wg = k.shr(tid, 7)

    def bar(base, s):
        return k.add(base, k.shl(s, 3))

    with k.if_(wg == 0):
        ptx.setmaxnreg_dec(k, 40)
        with k.if_(tid == 0):
            mine = k.mul(rank, quarter.nbytes)
            a_row = k.mad(rank, 128 // cl, m0)
            with k.for_range(0, kblocks) as kb:
                s, ph = k.and_(kb, stages - 1), k.and_(k.shr(kb, 2), 1)
                ptx.mbarrier_wait(k, bar(empty_base, s), k.xor(ph, 1), sem="acquire",
                                  scope="cluster")
                fb = bar(full_base, s)
                ptx.mbarrier_arrive_expect_tx(k, "release", "cta", "shared::cta", fb, stage,
                                              dst="_")
                slot = k.add(tiles, k.mul(s, stage))
                kc = k.mul(kb, K_BF16)
                ptx.cp_async_bulk_tensor(k, "shared::cluster", "global", k.add(slot, mine),
                                         tma, (kc, a_row), fb, (1 << cl) - 1)
                ptx.cp_async_bulk_tensor(k, "shared::cluster", "global",
                                         k.add(slot, A128.nbytes), tmb, (kc, n0), fb)
    with k.else_():
        ptx.setmaxnreg_inc(k, 232)
        cw = k.sub(wg, 1)
        wtid = k.and_(tid, 127)
        releaser = wtid < cl                     # lane r of the first warp: CTA r's barrier
        acc = k.fragment(t.f32, shape=(64, 128))

        def release(kb):
            with k.if_(releaser):
                remote = ptx.mapa(k, "shared::cluster",
                                  bar(empty_base, k.and_(kb, stages - 1)), wtid)
                ptx.mbarrier_arrive(k, "release", "cluster", "shared::cluster", remote)

        with k.for_range(0, kblocks) as kb:
            s, ph = k.and_(kb, stages - 1), k.and_(k.shr(kb, 2), 1)
            ptx.mbarrier_wait(k, bar(full_base, s), ph, sem="acquire", scope="cluster")
            slot = k.add(tiles, k.mul(s, stage))
            da = descriptor(k, A64, k.add(slot, k.mul(cw, A64.nbytes)))
            db = descriptor(k, B128, k.add(slot, A128.nbytes))
            ptx.wgmma_fence(k)
            for kk in range(0, K_BF16, 16):
                ptx.wgmma_mma_async(k, acc, da.k_step(k, kk), db.k_step(k, kk), atype="bf16")
            ptx.wgmma_commit_group(k)
            ptx.wgmma_wait_group(k, 1)
            with k.if_(kb > 0):
                release(k.sub(kb, 1))
        ptx.wgmma_wait_group(k, 0)
        with k.if_(kblocks > 0):
            release(k.sub(kblocks, 1))
        row0 = k.mad(cw, 64, m0)
        acc.store(k.add(c_ptr, k.mul(k.mad(row0, N, n0), 4, type=t.u32, mode="wide")), N)
    ptx.barrier_cluster_arrive(k, "release", aligned=True)
    ptx.barrier_cluster_wait(k, "acquire", aligned=True)
    k.ret()
    return Module([k], target="sm_90a"), {"map_a": _box(quarter), "map_b": _box(B128)}


# -- (6) split-K through distributed shared memory ----------------------------------------------
RED_BYTES = 128 * 32 * 4                         # a 64 x 64 f32 partial: 32 values a thread


def split_k_dsmem(how: str = "st_async") -> tuple[Module, dict]:
    """A 2-CTA cluster splits K of one 64 x 64 tile: each CTA multiplies its half (a
    single-buffered TMA + wgmma loop), then CTA 1's partial reaches CTA 0, which adds it and
    stores the tile. `how="st_async"`: CTA 1 writes it into CTA 0's buffer with st.async,
    completing bytes on CTA 0's mbarrier, which CTA 0 waits on. `how="ld_cluster"`: CTA 1
    stores it into its own buffer, a cluster barrier publishes it, CTA 0 reads it with
    ld.shared::cluster, and a second cluster barrier keeps CTA 1 alive until then."""
    k = Kernel(f"audit_split_k_{how}", reqntid=128, reqnctapercluster=(2, 1, 1))
    tma, tmb = (k.tensormap_addr(k.param_tensormap(n)) for n in ("map_a", "map_b"))
    c_ptr = k.ld_param(k.param_ptr("c"))
    N = k.ld_param(k.param(t.u32, "n"))
    half = k.ld_param(k.param(t.u32, "kblocks_per_cta"))
    sa = k.shared_array(t.b8, A64.nbytes, align=1024, name="tile_a")
    sb = k.shared_array(t.b8, A64.nbytes, align=1024, name="tile_b")
    red = k.shared_array(t.f32, RED_BYTES // 4, align=16, name="partial")
    bars = k.shared_array(t.b64, 2, align=8, name="bars")      # [0]: tiles, [1]: partial
    tid = k.tid.x
    rank = ptx.get_sreg_cluster_ctarank(k)
    with k.if_(tid == 0):
        ptx.mbarrier_init(k, Addr(bars, 0), 1)
        ptx.mbarrier_init(k, Addr(bars, 8), 1)
        ptx.fence_mbarrier_init(k, "release", "cluster")
    # every CTA's barriers are initialised before a peer's st.async can reach them
    ptx.barrier_cluster_arrive(k, "release", aligned=True)
    ptx.barrier_cluster_wait(k, "acquire", aligned=True)
    m0, n0 = k.mul(k.ctaid.y, 64), k.mul(k.clusterid.x, 64)
    first = k.mul(rank, half)
    acc = k.fragment(t.f32, shape=(64, 64))
    da, db = descriptor(k, A64, sa), descriptor(k, A64, sb)
    with k.for_range(0, half) as i:
        with k.if_(tid == 0):
            ptx.mbarrier_arrive_expect_tx(k, "release", "cta", "shared::cta", Addr(bars, 0),
                                          2 * A64.nbytes, dst="_")
            kc = k.mul(k.add(first, i), K_BF16)
            ptx.cp_async_bulk_tensor(k, "shared::cluster", "global", sa, tma, (kc, m0),
                                     Addr(bars, 0))
            ptx.cp_async_bulk_tensor(k, "shared::cluster", "global", sb, tmb, (kc, n0),
                                     Addr(bars, 0))
        ptx.mbarrier_wait(k, Addr(bars, 0), k.and_(i, 1))
        ptx.wgmma_fence(k)
        for kk in range(0, K_BF16, 16):
            ptx.wgmma_mma_async(k, acc, da.k_step(k, kk), db.k_step(k, kk), atype="bf16")
        ptx.wgmma_commit_group(k)
        ptx.wgmma_wait_group(k, 0)
        k.bar_sync(0)                    # every thread's wgmma is done before the next load
    mine = k.add(k.mov(red), k.mul(tid, 128))
    if how == "st_async":
        with k.if_(rank == 0):
            with k.if_(tid == 0):
                ptx.mbarrier_arrive_expect_tx(k, "release", "cta", "shared::cta",
                                              Addr(bars, 8), RED_BYTES, dst="_")
        with k.else_():
            dst = ptx.mapa(k, "shared::cluster", mine, 0)
            peer_bar = ptx.mapa(k, "shared::cluster", k.add(k.mov(bars), 8), 0)
            for j in range(8):
                ptx.st_async(k, k.add(dst, 16 * j), tuple(acc[4 * j:4 * j + 4]), peer_bar,
                             type=t.b32)
        with k.if_(rank == 0):
            ptx.mbarrier_wait(k, Addr(bars, 8), 0, sem="acquire", scope="cluster")
    else:
        with k.if_(rank == 1):
            for j in range(8):
                k.st(Addr(mine, 16 * j), tuple(acc[4 * j:4 * j + 4]), type=t.f32, space="shared")
        ptx.barrier_cluster_arrive(k, "release", aligned=True)
        ptx.barrier_cluster_wait(k, "acquire", aligned=True)
    with k.if_(rank == 0):
        src = mine if how == "st_async" else ptx.mapa(k, "shared::cluster", mine, 1)
        space = "shared" if how == "st_async" else "shared::cluster"
        for j in range(8):
            vals = k.ld(Addr(src, 16 * j), type=t.f32, space=space, vec=4)
            for q, v in enumerate(vals):
                k.add(acc[4 * j + q], v, type=t.f32, dst=acc[4 * j + q])
        acc.store(k.add(c_ptr, k.mul(k.mad(m0, N, n0), 4, type=t.u32, mode="wide")), N)
    if how == "ld_cluster":
        # CTA 1's partial is read by CTA 0 until here
        ptx.barrier_cluster_arrive(k, "release", aligned=True)
        ptx.barrier_cluster_wait(k, "acquire", aligned=True)
    k.ret()
    return Module([k], target="sm_90a"), {"map_a": _box(A64), "map_b": _box(A64)}


def split_k_st_async() -> tuple[Module, dict]:
    return split_k_dsmem("st_async")


def split_k_ld_cluster() -> tuple[Module, dict]:
    return split_k_dsmem("ld_cluster")


S8 = SmemLayout(t.s8, 64, 128, "K", SW)          # 64 rows x 128 int8 (one k-block)


def split_k_red_async() -> tuple[Module, dict]:
    """An int8 GEMM tile (s32 accumulators) split over the K of a 4-CTA cluster: CTA 0 zeroes
    a reduction buffer and expects 3 partials' bytes on its mbarrier; after a cluster barrier
    (buffer zeroed, barrier initialised) CTAs 1-3 add their partials into it with
    red.async.add.s32 (completing bytes on CTA 0's barrier); CTA 0 waits, adds its own
    partial and stores the tile."""
    cl = 4
    k = Kernel("audit_split_k_red", reqntid=128, reqnctapercluster=(cl, 1, 1))
    tma, tmb = (k.tensormap_addr(k.param_tensormap(n)) for n in ("map_a", "map_b"))
    c_ptr = k.ld_param(k.param_ptr("c"))
    N = k.ld_param(k.param(t.u32, "n"))
    per_cta = k.ld_param(k.param(t.u32, "kblocks_per_cta"))
    sa = k.shared_array(t.b8, S8.nbytes, align=1024, name="tile_a")
    sb = k.shared_array(t.b8, S8.nbytes, align=1024, name="tile_b")
    red = k.shared_array(t.s32, RED_BYTES // 4, align=16, name="partials")
    bars = k.shared_array(t.b64, 2, align=8, name="bars")      # [0]: tiles, [1]: partials
    tid = k.tid.x
    rank = ptx.get_sreg_cluster_ctarank(k)
    mine = k.add(k.mov(red), k.mul(tid, 128))
    with k.if_(tid == 0):
        ptx.mbarrier_init(k, Addr(bars, 0), 1)
        ptx.mbarrier_init(k, Addr(bars, 8), 1)
        ptx.fence_mbarrier_init(k, "release", "cluster")
    with k.if_(rank == 0):
        for j in range(8):
            k.st(Addr(mine, 16 * j), (0, 0, 0, 0), type=t.s32, space="shared")
        with k.if_(tid == 0):
            ptx.mbarrier_arrive_expect_tx(k, "release", "cta", "shared::cta", Addr(bars, 8),
                                          (cl - 1) * RED_BYTES, dst="_")
    ptx.barrier_cluster_arrive(k, "release", aligned=True)
    ptx.barrier_cluster_wait(k, "acquire", aligned=True)
    m0, n0 = k.mul(k.ctaid.y, 64), k.mul(k.clusterid.x, 64)
    first = k.mul(rank, per_cta)
    acc = k.fragment(t.s32, shape=(64, 64))
    da, db = descriptor(k, S8, sa), descriptor(k, S8, sb)
    with k.for_range(0, per_cta) as i:
        with k.if_(tid == 0):
            ptx.mbarrier_arrive_expect_tx(k, "release", "cta", "shared::cta", Addr(bars, 0),
                                          2 * S8.nbytes, dst="_")
            kc = k.mul(k.add(first, i), 128)
            ptx.cp_async_bulk_tensor(k, "shared::cluster", "global", sa, tma, (kc, m0),
                                     Addr(bars, 0))
            ptx.cp_async_bulk_tensor(k, "shared::cluster", "global", sb, tmb, (kc, n0),
                                     Addr(bars, 0))
        ptx.mbarrier_wait(k, Addr(bars, 0), k.and_(i, 1))
        ptx.wgmma_fence(k)
        for kk in range(0, 128, 32):
            ptx.wgmma_mma_async(k, acc, da.k_step(k, kk), db.k_step(k, kk), atype="s8")
        ptx.wgmma_commit_group(k)
        ptx.wgmma_wait_group(k, 0)
        k.bar_sync(0)
    with k.if_(rank != 0):
        dst = ptx.mapa(k, "shared::cluster", mine, 0)
        peer_bar = ptx.mapa(k, "shared::cluster", k.add(k.mov(bars), 8), 0)
        for j, r in enumerate(acc):
            ptx.red_async(k, "add", k.add(dst, 4 * j), r, peer_bar, type=t.s32)
    with k.else_():
        ptx.mbarrier_wait(k, Addr(bars, 8), 0, sem="acquire", scope="cluster")
        for j in range(8):
            vals = k.ld(Addr(mine, 16 * j), type=t.s32, space="shared", vec=4)
            for q, v in enumerate(vals):
                k.add(acc[4 * j + q], v, type=t.s32, dst=acc[4 * j + q])
        acc.store(k.add(c_ptr, k.mul(k.mad(m0, N, n0), 4, type=t.u32, mode="wide")), N)
    k.ret()
    return Module([k], target="sm_90a"), {"map_a": _box(S8), "map_b": _box(S8)}
