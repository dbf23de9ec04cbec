"""Audit corpus b (see tests/audit29b_clean_asm.py), clusters along y: GEMMs on 2- and 4-CTA
clusters stacked along N that share A by TMA multicast (rank from %cluster_ctaid.y, the
ctaMask built at run time from %cluster_nctaid.y, releases to every CTA's empty barrier in
inline PTX through mapa, the cluster barrier pair in inline PTX), and a split-K whose
non-leader CTAs add their int8 partials into the leader's shared memory with red.async,
completing bytes on the leader's mbarrier."""

from __future__ import annotations

from ptxdsl import Addr, Kernel, Module, ptx, t
from ptxdsl.instructions.wgmma_desc import SmemLayout, descriptor
from tests.audit29b_clean_asm import A64, A128, B128, SW, asm_wait, box, elect_one, stage_phase

_CLUSTER_SYNC = ("barrier.cluster.arrive.release.aligned;\n"
                 "barrier.cluster.wait.acquire.aligned;")


def cluster_y_gemm(cl: int = 2, stages: int = 3, cutlass: bool = False) -> tuple[Module, dict]:
    """`cl` CTAs along y (N) share A: CTA r loads rows r * 128 / cl of A and multicasts them;
    each empty barrier counts 2 consumer warpgroups x cl CTAs and each consumer warpgroup's
    leader releases the stage on every CTA (mapa + an inline remote arrive) after
    wgmma.wait_group 0. Full barriers expect the whole stage (A from every CTA, B own).
    `cutlass`: CUTLASS's ClusterBarrier::arrive(cta_id, pred) instead: lane r < cl of the
    warpgroup's first warp maps and arrives in one inline statement (a predicate, mapa and
    the remote arrive on an asm-local register)."""
    stage = A128.nbytes + B128.nbytes
    part = SmemLayout(t.bf16, 128 // cl, 64, "K", SW)
    k = Kernel(f"audit_b_cluster_y{cl}", reqntid=384, minnctapersm=1,
               reqnctapercluster=(1, cl, 1))
    tma, tmb = (k.tensormap_addr(k.param_tensormap(n)) for n in ("map_a", "map_b"))
    c_ptr = k.ld_param(k.param_ptr("c"))
    N = k.ld_param(k.param(t.u32, "n"))
    kblocks = k.ld_param(k.param(t.u32, "kblocks"))
    smem = k.extern_shared("smem", align=1024)
    full_off = stages * stage
    empty_off = full_off + 8 * stages
    tid = k.tid.x
    rank = k.mov(k.cluster_ctaid.y)
    with k.if_(tid == 0):
        for s in range(stages):
            ptx.mbarrier_init(k, Addr(smem, full_off + 8 * s), 1)
            ptx.mbarrier_init(k, Addr(smem, empty_off + 8 * s), 2 * cl)
        ptx.fence_mbarrier_init(k, "release", "cluster")
    # CUTLASS's split cluster barrier: arrive.relaxed after the init fence, the wait once
    # the CTA's own set-up is done (peers' barriers are initialised after it)
    k.asm("barrier.cluster.arrive.relaxed.aligned;")
    base = k.mov(smem)
    wg = k.shr(tid, 7)
    m0, n0 = k.mul(k.ctaid.x, 128), k.mul(k.ctaid.y, 128)
    k.asm("barrier.cluster.wait.aligned;")
    with k.if_(wg == 0):
        ptx.setmaxnreg_dec(k, 40)
        with k.if_(k.shr(tid, 5) == 0):
            with k.if_(elect_one(k) == 1):
                mask = k.sub(k.shl(k.mov(1, type=t.u32), ptx.get_sreg_cluster_nctaid_y(k)), 1)
                mask = k.cvt(mask, t.u16)
                mine = k.mul(rank, part.nbytes)
                a_row = k.mad(rank, 128 // cl, m0)
                with k.for_range(0, kblocks) as kb:
                    s, ph = stage_phase(k, kb, stages)
                    ptx.mbarrier_wait(k, k.mad(s, 8, k.add(base, empty_off)), k.xor(ph, 1),
                                      sem="acquire", scope="cluster")
                    fb = k.mad(s, 8, k.add(base, full_off))
                    ptx.mbarrier_arrive_expect_tx(k, "release", "cta", "shared::cta", fb,
                                                  stage, dst="_")
                    dst = k.mad(s, stage, base)
                    kc = k.mul(kb, 64)
                    ptx.cp_async_bulk_tensor(k, "shared::cluster", "global", k.add(dst, mine),
                                             tma, (kc, a_row), fb, mask)
                    ptx.cp_async_bulk_tensor(k, "shared::cluster", "global",
                                             k.add(dst, A128.nbytes), tmb, (kc, n0), fb)
    with k.else_():
        ptx.setmaxnreg_inc(k, 232)
        cw = k.sub(wg, 1)
        acc = k.fragment(t.f32, shape=(64, 128))
        with k.for_range(0, kblocks) as kb:
            s, ph = stage_phase(k, kb, stages)
            asm_wait(k, k.mad(s, 8, k.add(base, full_off)), ph)
            src = k.mad(s, stage, base)
            da = descriptor(k, A64, k.mad(cw, A64.nbytes, src))
            db = descriptor(k, B128, k.add(src, A128.nbytes))
            ptx.wgmma_fence(k)
            for kk in range(0, 64, 16):
                ptx.wgmma_mma_async(k, acc, da.k_step(k, kk), db.k_step(k, kk), atype="bf16")
            ptx.wgmma_commit_group(k)
            ptx.wgmma_wait_group(k, 0)
            if cutlass:
                lane = k.and_(tid, 31)
                k.asm("{\n .reg .pred p;\n .reg .b32 remAddr32;\n setp.eq.u32 p, $2, 1;\n"
                      " @p mapa.shared::cluster.u32 remAddr32, $0, $1;\n"
                      " @p mbarrier.arrive.shared::cluster.b64 _, [remAddr32];\n}",
                      ins=[k.mad(s, 8, k.add(base, empty_off)), lane,
                           k.selp(1, 0, k.and_(k.and_(tid, 127) < 32, lane < cl),
                                  type=t.u32)])
            else:
                with k.if_(k.and_(tid, 127) == 0):
                    mine_bar = k.mad(s, 8, k.add(base, empty_off))
                    for r in range(cl):
                        peer = ptx.mapa(k, "shared::cluster", mine_bar, r)
                        k.asm("mbarrier.arrive.release.cluster.shared::cluster.b64 _, [$0];",
                              ins=[peer])
        row0 = k.mad(cw, 64, m0)
        acc.store(k.add(c_ptr, k.mul(k.mad(row0, N, n0), 4, type=t.u32, mode="wide")), N)
    k.asm(_CLUSTER_SYNC)                                    # no peer still multicasts or arrives
    k.ret()
    return Module([k], target="sm_90a"), {"map_a": box(part), "map_b": box(B128)}


def cluster_y2_gemm() -> tuple[Module, dict]:
    return cluster_y_gemm(2, 3)


def cluster_y4_gemm() -> tuple[Module, dict]:
    return cluster_y_gemm(4, 2)


def cluster_y4_cutlass_arrive() -> tuple[Module, dict]:
    return cluster_y_gemm(4, 2, cutlass=True)


S8 = SmemLayout(t.s8, 64, 128, "K", SW)           # 64 rows of 128 int8: one k-block
PART = 64 * 64 * 4                                 # a 64 x 64 s32 partial tile


def split_k_y(cl: int = 4, bug: str | None = None, asm_rank: bool = False,
              asm_red: bool = False) -> tuple[Module, dict]:
    """An int8 64 x 64 tile whose K is split over a cluster of `cl` CTAs along y. One dynamic
    buffer holds A's and B's k-block, the leader's partial sums and the two barriers. The
    leader (cluster_ctaid.y == 0) zeroes the partials and announces (cl - 1) partials' bytes
    with an inline arrive.expect_tx; a cluster barrier publishes both; each other CTA runs
    its k-blocks and adds its partial into the leader's buffer with red.async (completing
    bytes on the leader's barrier) and the leader waits for them before adding its own.
    `bug="zero"`: the zeroing loop's rows start at the buffer, over A's and B's tiles;
    "bytes" announces one partial too few. `asm_rank`: the rank
    is read in inline PTX (CUTLASS's block_rank_in_cluster); `asm_red`: the red.async are
    inline PTX too."""
    k = Kernel(f"audit_b_split_k_y{cl}", reqntid=128, reqnctapercluster=(1, cl, 1))
    tma, tmb = (k.tensormap_addr(k.param_tensormap(n)) for n in ("map_a", "map_b"))
    c_ptr = k.ld_param(k.param_ptr("c"))
    N = k.ld_param(k.param(t.u32, "n"))
    per_cta = k.ld_param(k.param(t.u32, "kblocks_per_cta"))
    smem = k.extern_shared("smem", align=1024)
    part_off = 2 * S8.nbytes
    tiles_bar, part_bar = part_off + PART, part_off + PART + 8
    base = k.mov(smem)
    tid = k.tid.x
    if asm_rank:
        (rank,) = k.asm("mov.u32 $0, %cluster_ctarank;", outs=[t.u32])
    else:
        rank = k.mov(k.cluster_ctaid.y)
    row = k.mad(tid, 512, k.add(base, part_off))           # this thread's 512 partial bytes
    with k.if_(tid == 0):
        ptx.mbarrier_init(k, Addr(smem, tiles_bar), 1)
        ptx.mbarrier_init(k, Addr(smem, part_bar), 1)
        ptx.fence_mbarrier_init(k, "release", "cluster")
    with k.if_(rank == 0):
        zero = k.mad(tid, 512, base) if bug == "zero" else row
        with k.for_range(0, 32) as j:
            k.st(k.mad(j, 16, zero), (0, 0, 0, 0), type=t.s32, space="shared")
        with k.if_(tid == 0):
            k.asm("mbarrier.arrive.expect_tx.release.cta.shared::cta.b64 _, [$0], $1;",
                  ins=[k.add(base, part_bar), (cl - 2 if bug == "bytes" else cl - 1) * PART])
    k.asm(_CLUSTER_SYNC)
    m0, n0 = k.mul(k.ctaid.x, 64), k.mul(k.clusterid.y, 64)
    acc = k.fragment(t.s32, shape=(64, 64))
    da, db = descriptor(k, S8, base), descriptor(k, S8, k.add(base, S8.nbytes))
    first = k.mul(rank, per_cta)
    with k.for_range(0, per_cta) as i:
        with k.if_(tid == 0):
            bar = k.add(base, tiles_bar)
            ptx.mbarrier_arrive_expect_tx(k, "release", "cta", "shared::cta", bar,
                                          2 * S8.nbytes, dst="_")
            kc = k.shl(k.add(first, i), 7)
            ptx.cp_async_bulk_tensor(k, "shared::cluster", "global", base, tma, (kc, m0), bar)
            ptx.cp_async_bulk_tensor(k, "shared::cluster", "global", k.add(base, S8.nbytes),
                                     tmb, (kc, n0), bar)
        ptx.mbarrier_wait(k, k.add(base, tiles_bar), k.and_(i, 1))
        ptx.wgmma_fence(k)
        for kk in range(0, 128, 32):
            ptx.wgmma_mma_async(k, acc, da.k_step(k, kk), db.k_step(k, kk), atype="s8")
        ptx.wgmma_commit_group(k)
        ptx.wgmma_wait_group(k, 0)
        k.bar_sync(0)                                       # every warp done before a refill
    with k.if_(rank != 0):
        dst = ptx.mapa(k, "shared::cluster", row, 0)
        bar0 = ptx.mapa(k, "shared::cluster", k.add(base, part_bar), 0)
        for j, r in enumerate(acc):
            if asm_red:
                k.asm("red.async.relaxed.cluster.shared::cluster.mbarrier::complete_tx::bytes"
                      ".add.s32 [$0], $1, [$2];", ins=[k.add(dst, 4 * j), r, bar0],
                      requires=("8.1", "sm_90"))
            else:
                ptx.red_async(k, "add", k.add(dst, 4 * j), r, bar0, type=t.s32)
    with k.else_():
        asm_wait(k, k.add(base, part_bar), 0)
        for j in range(0, len(acc), 4):
            vals = k.ld(k.add(row, 4 * j), type=t.s32, space="shared", vec=4)
            for q, v in enumerate(vals):
                k.add(acc[j + q], v, type=t.s32, dst=acc[j + q])
        acc.store(k.add(c_ptr, k.mul(k.mad(m0, N, n0), 4, type=t.u32, mode="wide")), N)
    k.asm(_CLUSTER_SYNC)                                    # no red.async still lands in CTA 0
    k.ret()
    return Module([k], target="sm_90a"), {"map_a": box(S8), "map_b": box(S8)}


def split_k_y4() -> tuple[Module, dict]:
    return split_k_y(4)


def split_k_y2() -> tuple[Module, dict]:
    return split_k_y(2)


def split_k_y4_asm_rank() -> tuple[Module, dict]:
    return split_k_y(4, asm_rank=True)


def split_k_y4_asm_red() -> tuple[Module, dict]:
    return split_k_y(4, asm_rank=True, asm_red=True)
