"""Correct kernels written for an independent precision audit of the hazard checker (issue 29):
each is a whole kernel in a style Hopper kernels are written in (warp-specialized GEMM,
FlashAttention-3-style forward, DeepGEMM-style fp8 GEMM, W8A16, cluster multicast rings,
split-K through distributed shared memory, a persistent GEMM with a TMA-store epilogue), some
with ptxdsl's helpers and some with hand-written rings. Each builder returns (Module, maps):
the module and the host descriptions of its tensor maps (`check_module(mod, maps=maps)`).
tests/test_checker_audit29_clean.py checks that each has no finding and assembles."""

from __future__ import annotations

from ptxdsl import Addr, Kernel, Module, ptx, t
from ptxdsl.epilogue import STAGING_BYTES, TmaStoreEpilogue
from ptxdsl.instructions.wgmma_desc import SmemLayout, descriptor
from ptxdsl.pipeline import MbarrierRing, cluster_sync

SW = "128B"
K_BF16 = 64                                        # one k-block: 64 bf16 = 128 bytes a row
A64 = SmemLayout(t.bf16, 64, K_BF16, "K", SW)      # a warpgroup's 64 rows of A
A128 = SmemLayout(t.bf16, 128, K_BF16, "K", SW)    # a CTA's 128 rows of A (one TMA box)
B128 = SmemLayout(t.bf16, 128, K_BF16, "K", SW)
B256 = SmemLayout(t.bf16, 256, K_BF16, "K", SW)


def _box(layout: SmemLayout) -> dict:
    return {"box_bytes": layout.nbytes, "swizzle": SW}


# -- (1) warp-specialized GEMM, hand-written 4-stage ring ----------------------------------------
def ws_gemm_handwritten() -> tuple[Module, dict]:
    """C (f32) = A @ B^T, one 128 x 128 tile per CTA. Warpgroup 0 produces (one thread issues
    the TMA loads), warpgroups 1 and 2 each multiply 64 rows. The ring is written out: stage
    kb & 3, parity (kb >> 2) & 1, full/empty barriers in static arrays, the producer's empty
    wait at the flipped parity; a consumer releases stage kb - 1 once wait_group 1 says the
    wgmma of kb - 1 is done."""
    stages = 4
    stage_bytes = A128.nbytes + B128.nbytes
    k = Kernel("audit_ws_gemm", reqntid=384, minnctapersm=1)
    map_a, map_b = k.param_tensormap("map_a"), k.param_tensormap("map_b")
    c_ptr = k.param_ptr("c")
    n_dim = k.ld_param(k.param(t.u32, "n"))
    kblocks = k.ld_param(k.param(t.u32, "kblocks"))
    smem = k.extern_shared("smem", align=1024)
    # the barriers after the stages: a static .shared array would move the dynamic region,
    # and the 128B swizzle needs its 1024-byte alignment (tma-smem-align)
    full, empty = stages * stage_bytes, stages * stage_bytes + 8 * stages
    tid = k.tid.x
    with k.if_(tid == 0):
        for s in range(stages):
            ptx.mbarrier_init(k, Addr(smem, full + 8 * s), 1)
            ptx.mbarrier_init(k, Addr(smem, empty + 8 * s), 2)   # one arrive per consumer WG
        ptx.fence_mbarrier_init(k, "release", "cluster")
    k.bar_sync(0)
    tiles = k.mov(smem)
    full_base, empty_base = k.add(tiles, full), k.add(tiles, empty)
    m0, n0 = k.mul(k.ctaid.y, 128), k.mul(k.ctaid.x, 128)
    wg = k.shr(tid, 7)

    def stage_of(kb):
        s = k.and_(kb, stages - 1)
        return s, k.and_(k.shr(kb, 2), 1)

    with k.if_(wg == 0):
        ptx.setmaxnreg_dec(k, 40)
        with k.if_(tid == 0):
            tma, tmb = k.tensormap_addr(map_a), k.tensormap_addr(map_b)
            with k.for_range(0, kblocks) as kb:
                s, ph = stage_of(kb)
                ptx.mbarrier_wait(k, k.add(empty_base, k.shl(s, 3)), k.xor(ph, 1))
                fb = k.add(full_base, k.shl(s, 3))
                ptx.mbarrier_arrive_expect_tx(k, "release", "cta", "shared::cta", fb,
                                              stage_bytes, dst="_")
                slot = k.add(tiles, k.mul(s, stage_bytes))
                kc = k.mul(kb, K_BF16)
                ptx.cp_async_bulk_tensor(k, "shared::cluster", "global", slot, tma, (kc, m0), fb)
                ptx.cp_async_bulk_tensor(k, "shared::cluster", "global",
                                         k.add(slot, A128.nbytes), tmb, (kc, n0), fb)
    with k.else_():
        ptx.setmaxnreg_inc(k, 232)
        cw = k.sub(wg, 1)
        acc = k.fragment(t.f32, shape=(64, 128))
        leader = k.and_(tid, 127) == 0
        with k.for_range(0, kblocks) as kb:
            s, ph = stage_of(kb)
            ptx.mbarrier_wait(k, k.add(full_base, k.shl(s, 3)), ph)
            slot = k.add(tiles, k.mul(s, stage_bytes))
            da = descriptor(k, A64, k.add(slot, k.mul(cw, A64.nbytes)))
            db = descriptor(k, B128, k.add(slot, A128.nbytes))
            ptx.wgmma_fence(k)
            for kk in range(0, K_BF16, 16):
                ptx.wgmma_mma_async(k, acc, da.k_step(k, kk), db.k_step(k, kk), atype="bf16")
            ptx.wgmma_commit_group(k)
            ptx.wgmma_wait_group(k, 1)
            with k.if_(kb > 0):
                prev = k.and_(k.sub(kb, 1), stages - 1)
                with k.if_(leader):
                    ptx.mbarrier_arrive(k, "release", "cta", "shared::cta",
                                        k.add(empty_base, k.shl(prev, 3)), dst="_")
        ptx.wgmma_wait_group(k, 0)
        with k.if_(kblocks > 0):
            last = k.and_(k.sub(kblocks, 1), stages - 1)
            with k.if_(leader):
                ptx.mbarrier_arrive(k, "release", "cta", "shared::cta",
                                    k.add(empty_base, k.shl(last, 3)), dst="_")
        row0 = k.mad(cw, 64, m0)
        out = k.add(k.ld_param(c_ptr),
                    k.mul(k.mad(row0, n_dim, n0), 4, type=t.u32, mode="wide"))
        acc.store(out, n_dim)
    k.ret()
    return Module([k], target="sm_90a"), {"map_a": _box(A128), "map_b": _box(B128)}


# -- (2) FlashAttention-3-style forward -----------------------------------------------------------
LQK = SmemLayout(t.bf16, 64, 64, "K", SW)        # Q rows / K rows, head dim 64 contiguous
LV = SmemLayout(t.bf16, 64, 64, "MN", SW)        # V as the B of P @ V: head dim (N) contiguous
TILE = LQK.nbytes                                # 8 KiB
LOG2E = 1.4426950408889634


def _ex2(k, x):
    (y,) = k.asm("ex2.approx.ftz.f32 $0, $1;", outs=[t.f32], ins=[x])
    return y


def _quad_max(k, x):
    """The max over the 4 threads of a quad (the threads holding one accumulator row)."""
    for lane in (1, 2):
        k.max(x, k.shfl_sync("bfly", x, lane), type=t.f32, dst=x)
    return x


def _quad_sum(k, x):
    for lane in (1, 2):
        k.add(x, k.shfl_sync("bfly", x, lane), type=t.f32, dst=x)
    return x


def fa3_forward(bug: str | None = None) -> tuple[Module, dict]:
    """O = softmax(Q K^T / sqrt(d)) V for 128 query rows per CTA (64 per consumer warpgroup),
    head dim 64, `n_kv` key/value blocks of 64. One dynamic buffer holds Q, the K ring (2
    stages), the V ring (2 stages) and then every barrier; both rings are written by hand
    (stage j & 1, parity (j >> 1) & 1). A consumer issues S_next = Q K_{j+1}^T, then runs the
    softmax of S_j in registers while that wgmma runs, then O += P_j V_j with P_j in registers
    (RS A operand); wait_group 1 after each issue retires the older group."""
    k = Kernel("audit_fa3_fwd", reqntid=384, minnctapersm=1)
    tq, tk, tv = (k.tensormap_addr(k.param_tensormap(n)) for n in ("map_q", "map_k", "map_v"))
    o_ptr = k.param_ptr("o")
    n_kv = k.ld_param(k.param(t.u32, "n_kv"))
    smem = k.extern_shared("smem", align=1024)
    q_off, k_off, v_off = 0, 2 * TILE, 4 * TILE
    bar_off = 6 * TILE
    q_bar = Addr(smem, bar_off)
    kfull, kempty, vfull, vempty = (bar_off + 8 + 16 * i for i in range(4))
    tid = k.tid.x
    with k.if_(tid == 0):
        ptx.mbarrier_init(k, q_bar, 1)
        for s in range(2):
            for off, count in ((kfull, 1), (vfull, 1), (kempty, 2), (vempty, 2)):
                ptx.mbarrier_init(k, Addr(smem, off + 8 * s), count)
        ptx.fence_mbarrier_init(k, "release", "cluster")
    k.bar_sync(0)
    base = k.mov(smem)
    q_row0 = k.mul(k.ctaid.x, 128)
    wg = k.shr(tid, 7)

    def bar(off, s):
        return k.add(base, k.add(k.shl(s, 3), off))

    def slot(off, s):
        return k.add(base, k.mad(s, TILE, off))

    with k.if_(wg == 0):
        ptx.setmaxnreg_dec(k, 24)
        with k.if_(tid == 0):
            ptx.mbarrier_arrive_expect_tx(k, "release", "cta", "shared::cta", q_bar, 2 * TILE,
                                          dst="_")
            ptx.cp_async_bulk_tensor(k, "shared::cluster", "global", Addr(smem, q_off), tq,
                                     (0, q_row0), q_bar)
            with k.for_range(0, n_kv) as j:
                s, ph = k.and_(j, 1), k.and_(k.shr(j, 1), 1)
                kv_row = k.mul(j, 64)
                k_guard = vempty if bug == "k_on_v" else kempty
                for full, empty_, off, tmap in ((kfull, k_guard, k_off, tk),
                                                (vfull, vempty, v_off, tv)):
                    ptx.mbarrier_wait(k, bar(empty_, s), k.xor(ph, 1))
                    fb = bar(full, s)
                    ptx.mbarrier_arrive_expect_tx(k, "release", "cta", "shared::cta", fb, TILE,
                                                  dst="_")
                    ptx.cp_async_bulk_tensor(k, "shared::cluster", "global", slot(off, s),
                                             tmap, (0, kv_row), fb)
    with k.else_():
        ptx.setmaxnreg_inc(k, 240)
        cw = k.sub(wg, 1)
        leader = k.and_(tid, 127) == 0
        scale = 0.125 * LOG2E                                   # 1/sqrt(64), in log2 units
        dq = descriptor(k, LQK, k.add(base, k.mad(cw, TILE, q_off)))
        o = k.fragment(t.f32, shape=(64, 64))
        s_cur = k.fragment(t.f32, shape=(64, 64), zero=False)
        s_next = k.fragment(t.f32, shape=(64, 64), zero=False)
        row_max = [k.mov(-1e30, type=t.f32) for _ in range(2)]
        row_sum = [k.mov(0.0, type=t.f32) for _ in range(2)]

        def qk(dst, s):
            dk = descriptor(k, LQK, slot(k_off, s))
            ptx.wgmma_fence(k)
            for kk in range(0, 64, 16):
                ptx.wgmma_mma_async(k, dst, dq.k_step(k, kk), dk.k_step(k, kk),
                                    0 if kk == 0 else 1, atype="bf16")
            ptx.wgmma_commit_group(k)

        def release(empty_, s):
            with k.if_(leader):
                ptx.mbarrier_arrive(k, "release", "cta", "shared::cta", bar(empty_, s), dst="_")

        def softmax():
            """Online softmax of s_cur's two rows per thread; rescales o and the sums."""
            for h in range(2):
                vals = [i for i in range(len(s_cur)) if (i // 2) % 2 == h]
                m = k.mov(row_max[h])
                for i in vals:
                    k.max(m, k.mul(s_cur[i], scale, type=t.f32), type=t.f32, dst=m)
                _quad_max(k, m)
                corr = _ex2(k, k.sub(row_max[h], m, type=t.f32))
                k.mov(m, dst=row_max[h])
                total = k.mov(0.0, type=t.f32)
                for i in vals:
                    p = _ex2(k, k.sub(k.mul(s_cur[i], scale, type=t.f32), m, type=t.f32))
                    k.mov(p, dst=s_cur[i])
                    k.add(total, p, type=t.f32, dst=total)
                k.mad(row_sum[h], corr, total, type=t.f32, dst=row_sum[h])
                for i in vals:
                    k.mul(o[i], corr, type=t.f32, dst=o[i])

        ptx.mbarrier_wait(k, q_bar, 0)
        zero = k.mov(0, type=t.u32)
        ptx.mbarrier_wait(k, bar(kfull, zero), 0)
        qk(s_cur, zero)
        ptx.wgmma_wait_group(k, 0)
        release(kempty, zero)
        with k.for_range(0, n_kv) as j:
            s, ph = k.and_(j, 1), k.and_(k.shr(j, 1), 1)
            nxt = k.add(j, 1)
            has_next = nxt < n_kv
            with k.if_(has_next):
                sn = k.and_(nxt, 1)
                ptx.mbarrier_wait(k, bar(kfull, sn), k.and_(k.shr(nxt, 1), 1))
                qk(s_next, sn)
                if bug == "early_k":
                    release(kempty, sn)
                if bug == "early_v":
                    with k.if_(j > 0):
                        release(vempty, k.and_(k.sub(j, 1), 1))
                ptx.wgmma_wait_group(k, 1)          # retires P_{j-1} V_{j-1}, not S_next
            with k.else_():
                ptx.wgmma_wait_group(k, 0)
            if bug != "early_v":
                with k.if_(j > 0):
                    release(vempty, k.and_(k.sub(j, 1), 1))
            softmax()
            p = s_cur.to_packed(t.bf16)
            ptx.mbarrier_wait(k, bar(vfull, s), ph)
            dv = descriptor(k, LV, slot(v_off, s))
            ptx.wgmma_fence(k)
            for step in range(4):
                ptx.wgmma_mma_async(k, o, p.a_operand(step), dv.k_step(k, 16 * step),
                                    atype="bf16")
            ptx.wgmma_commit_group(k)
            with k.if_(has_next):
                ptx.wgmma_wait_group(k, 1)          # S_next is done (P_j V_j may still run)
                if bug != "early_k":
                    release(kempty, k.and_(nxt, 1))
                for a, b in zip(s_cur, s_next, strict=True):
                    k.mov(b, dst=a)
        ptx.wgmma_wait_group(k, 0)
        with k.if_(n_kv > 0):
            release(vempty, k.and_(k.sub(n_kv, 1), 1))
        for i in range(len(o)):
            inv = k.asm("rcp.approx.ftz.f32 $0, $1;", outs=[t.f32],
                        ins=[row_sum[(i // 2) % 2]])[0]
            k.mul(o[i], inv, type=t.f32, dst=o[i])
        row0 = k.add(q_row0, k.mul(cw, 64))
        o.store(k.add(k.ld_param(o_ptr), k.mul(row0, 64 * 4, type=t.u32, mode="wide")), 64)
    k.ret()
    maps = {"map_q": {"box_bytes": 2 * TILE, "swizzle": SW}, "map_k": _box(LQK),
            "map_v": _box(LV)}
    return Module([k], target="sm_90a"), maps


# -- (3) DeepGEMM-style fp8 GEMM: per-block scales in the stage, promoted accumulation -----------
FA8 = SmemLayout("e4m3", 64, 128, "K", SW)       # a warpgroup's 64 rows x 128 e4m3 (k-block)
FB8 = SmemLayout("e4m3", 128, 128, "K", SW)
FP8_A = 2 * FA8.nbytes                           # the CTA's 128 rows of A
FP8_SCALES = 128 * 4                             # A's 1 x 128 scales of the k-block (f32)
FP8_STAGE = 34 * 1024                            # A, B, scales; 1024-aligned for the swizzle


def fp8_scaled_gemm() -> tuple[Module, dict]:
    """C = (A * sa) @ (B * sb)^T with e4m3 A, B, per-row-per-k-block scales sa (1 x 128) that
    a bulk copy puts in the stage next to the tiles (one arrive.expect_tx for tiles + scales),
    and one scale sb per 128 x 128 block of B read from global. Each k-block is multiplied
    into a scratch accumulator, which is then scaled and added to the f32 total (promotion
    against fp8's short accumulation). MbarrierRing of 4 stages, 2 consumer warpgroups."""
    stages = 4
    k = Kernel("audit_fp8_scaled", reqntid=384, minnctapersm=1)
    tma, tmb = (k.tensormap_addr(k.param_tensormap(n)) for n in ("map_a", "map_b"))
    sa_ptr, sb_ptr, c_ptr = (k.ld_param(k.param_ptr(n)) for n in ("sa", "sb", "c"))
    M, N = k.ld_param(k.param(t.u32, "m")), k.ld_param(k.param(t.u32, "n"))
    kblocks = k.ld_param(k.param(t.u32, "kblocks"))
    smem = k.extern_shared("smem", align=1024)
    ring = MbarrierRing(k, stages, empty_count=2, storage=Addr(smem, stages * FP8_STAGE))
    ring.init()
    tid = k.tid.x
    wg = k.shr(tid, 7)
    m0, n0 = k.mul(k.ctaid.y, 128), k.mul(k.ctaid.x, 128)
    with k.if_(wg == 0):
        ptx.setmaxnreg_dec(k, 40)
        with k.if_(tid == 0):
            p = ring.producer()
            with k.for_range(0, kblocks) as kb:
                p.wait_empty()
                p.arrive_expect_tx(FP8_A + FB8.nbytes + FP8_SCALES)
                slot, full = p.slot(smem, FP8_STAGE), p.full_barrier()
                kc = k.mul(kb, 128)
                ptx.cp_async_bulk_tensor(k, "shared::cluster", "global", slot, tma, (kc, m0),
                                         full)
                ptx.cp_async_bulk_tensor(k, "shared::cluster", "global", k.add(slot, FP8_A),
                                         tmb, (kc, n0), full)
                # sa is stored k-block major: M floats per k-block, this tile's 128 of them
                src = k.add(sa_ptr, k.mul(k.mad(kb, M, m0), 4, type=t.u32, mode="wide"))
                ptx.cp_async_bulk(k, "shared::cluster", "global",
                                  k.add(slot, FP8_A + FB8.nbytes), src, FP8_SCALES, full)
                p.advance()
    with k.else_():
        ptx.setmaxnreg_inc(k, 232)
        cw = k.sub(wg, 1)
        c = ring.consumer()
        total = k.fragment(t.f32, shape=(64, 128))
        part = k.fragment(t.f32, shape=(64, 128), zero=False)
        lane_t = k.and_(tid, 127)
        # the two rows this thread holds: 16 * warp + lane / 4 and 8 below it
        my_row = k.add(k.mul(cw, 64), k.add(k.mul(k.shr(lane_t, 5), 16),
                                            k.shr(k.and_(lane_t, 31), 2)))
        leader = lane_t == 0
        sb_row = k.add(sb_ptr, k.mul(k.mul(k.ctaid.x, kblocks), 4, type=t.u32, mode="wide"))
        with k.for_range(0, kblocks) as kb:
            c.wait_full()
            slot = c.slot(smem, FP8_STAGE)
            da = descriptor(k, FA8, k.add(slot, k.mul(cw, FA8.nbytes)))
            db = descriptor(k, FB8, k.add(slot, FP8_A))
            ptx.wgmma_fence(k)
            for i, kk in enumerate(range(0, 128, 32)):
                ptx.wgmma_mma_async(k, part, da.k_step(k, kk), db.k_step(k, kk),
                                    0 if i == 0 else 1, atype="e4m3")
            ptx.wgmma_commit_group(k)
            scales = k.add(slot, FP8_A + FB8.nbytes)
            sa_lo = k.ld(k.add(scales, k.shl(my_row, 2)), type=t.f32, space="shared")
            sa_hi = k.ld(k.add(scales, k.shl(k.add(my_row, 8), 2)), type=t.f32,
                         space="shared")
            sb = k.ld(k.add(sb_row, k.mul(kb, 4, type=t.u32, mode="wide")), type=t.f32,
                      space="global")
            ptx.wgmma_wait_group(k, 0)
            with k.if_(leader):
                c.release()
            c.advance()
            lo, hi = k.mul(sa_lo, sb, type=t.f32), k.mul(sa_hi, sb, type=t.f32)
            for i, r in enumerate(part):
                k.mad(r, hi if (i // 2) % 2 else lo, total[i], type=t.f32, dst=total[i])
        row0 = k.mad(cw, 64, m0)
        out = k.add(c_ptr, k.mul(k.mad(row0, N, n0), 4, type=t.u32, mode="wide"))
        total.store(out, N, rows=k.sub(M, row0, type=t.s32), cols=k.sub(N, n0, type=t.s32))
    k.ret()
    maps = {"map_a": {"box_bytes": FP8_A, "swizzle": SW}, "map_b": _box(FB8)}
    return Module([k], target="sm_90a"), maps


# -- (4) W8A16: int8 weights by TMA, dequantised by the consumers into a bf16 tile ---------------
W_INT8 = 128 * 64                                # 128 rows (N) x 64 int8 (k-block), no swizzle
W_STAGE = A64.nbytes + W_INT8                    # activations (64 x 64 bf16) + the int8 weights


def w8a16_gemm() -> tuple[Module, dict]:
    """C = A @ dequant(W)^T: A bf16 (64 rows per CTA), W int8 with one f32 scale per column.
    Each stage holds A's k-block (TMA, 128B swizzle) and W's (TMA, plain rows). The consumer
    warpgroup reads the int8 rows with ld.shared, scales them, and writes bf16 with st.shared
    into one 128B-swizzled B tile, then fence.proxy.async + a named barrier before the wgmma
    reads it. A scheduler word (the tile index, fetched with an atomic by one thread) sits
    after the barriers in the same dynamic buffer."""
    stages = 3
    k = Kernel("audit_w8a16", reqntid=256)
    tma, tmw = (k.tensormap_addr(k.param_tensormap(n)) for n in ("map_a", "map_w"))
    scale_ptr, c_ptr, counter = (k.ld_param(k.param_ptr(n)) for n in ("scale", "c", "counter"))
    N = k.ld_param(k.param(t.u32, "n"))
    kblocks = k.ld_param(k.param(t.u32, "kblocks"))
    tiles_n = k.ld_param(k.param(t.u32, "tiles_n"))
    smem = k.extern_shared("smem", align=1024)
    deq_off = stages * W_STAGE                   # the bf16 B tile (16 KiB, 1024-aligned)
    bar_off = deq_off + B128.nbytes
    sched_off = bar_off + 16 * stages
    ring = MbarrierRing(k, stages, empty_count=1, storage=Addr(smem, bar_off))
    tid = k.tid.x
    with k.if_(tid == 0):
        tile = k.atom("add", counter, 1, type=t.u32, space="global")
        k.st(Addr(smem, sched_off), tile, type=t.u32)
    ring.init()                                  # its bar.sync also publishes the word
    tile = k.ld(Addr(smem, sched_off), type=t.u32)
    mb, nb = k.div(tile, tiles_n), k.rem(tile, tiles_n)
    m0, n0 = k.mul(mb, 64), k.mul(nb, 128)
    with k.if_(tid == 0):
        p = ring.producer()
        with k.for_range(0, kblocks) as kb:
            p.wait_empty()
            p.arrive_expect_tx(W_STAGE)
            slot, full = p.slot(smem, W_STAGE), p.full_barrier()
            kc = k.mul(kb, 64)
            ptx.cp_async_bulk_tensor(k, "shared::cluster", "global", slot, tma, (kc, m0), full)
            ptx.cp_async_bulk_tensor(k, "shared::cluster", "global", k.add(slot, A64.nbytes),
                                     tmw, (kc, n0), full)
            p.advance()
    with k.if_(tid >= 128):
        c = ring.consumer()
        row = k.sub(tid, 128)                    # this thread dequantises row `row` of W
        col_scale = k.ld(k.add(scale_ptr, k.mul(k.add(n0, row), 4, type=t.u32, mode="wide")),
                         type=t.f32, space="global")
        deq = k.add(k.mov(smem), deq_off)
        # 16-byte chunk j of row r of a 128B-swizzled tile: row r at 128 * r, chunk j ^ (r % 8)
        deq_row = k.add(deq, k.shl(row, 7))
        swz = k.and_(row, 7)
        acc = k.fragment(t.f32, shape=(64, 128))
        leader = row == 0
        with k.for_range(0, kblocks):
            c.wait_full()
            slot = c.slot(smem, W_STAGE)
            src = k.add(k.add(slot, A64.nbytes), k.shl(row, 6))
            ptx.wgmma_wait_group(k, 0)           # the last wgmma has read the bf16 tile
            for q in range(4):                   # 16 int8 -> two 16-byte chunks of bf16
                words = k.ld(Addr(src, 16 * q), type=t.b32, space="shared", vec=4)
                packed = []
                for w in words:
                    vals = []
                    for byte in range(4):
                        (v,) = k.asm(f"bfe.s32 $0, $1, {8 * byte}, 8;", outs=[t.s32],
                                     ins=[(w, t.b32)])
                        vals.append(k.mul(k.cvt(v, t.f32, rnd="rn"), col_scale, type=t.f32))
                    packed += [k.cvt_packed("bf16x2", vals[1], vals[0]),
                               k.cvt_packed("bf16x2", vals[3], vals[2])]
                for h in range(2):
                    chunk = k.xor(swz, 2 * q + h)
                    k.st(k.add(deq_row, k.shl(chunk, 4)), tuple(packed[4 * h:4 * h + 4]),
                         type=t.b32, space="shared")
            ptx.fence_proxy_async(k, "shared::cta")
            k.bar_sync(1, 128)
            da = descriptor(k, A64, slot)
            db = descriptor(k, B128, deq)
            ptx.wgmma_fence(k)
            for kk in range(0, 64, 16):
                ptx.wgmma_mma_async(k, acc, da.k_step(k, kk), db.k_step(k, kk), atype="bf16")
            ptx.wgmma_commit_group(k)
            ptx.wgmma_wait_group(k, 0)           # A's k-block is read: the stage goes back
            with k.if_(leader):
                c.release()
            c.advance()
        out = k.add(c_ptr, k.mul(k.mad(m0, N, n0), 4, type=t.u32, mode="wide"))
        acc.store(out, N)
    k.ret()
    maps = {"map_a": _box(A64), "map_w": {"box_bytes": W_INT8, "swizzle": "NONE"}}
    return Module([k], target="sm_90a"), maps


# -- (5) cluster rings with TMA multicast -------------------------------------------------------
def cluster_multicast_gemm(cluster: int = 2) -> tuple[Module, dict]:
    """`cluster` CTAs stacked along M share the B tile: each loads B's 1/cluster slice of
    every stage and multicasts it to all of them, and its own A. The ring (MbarrierRing,
    peers=cluster) counts every CTA's two consumer warpgroups on each empty barrier; a
    consumer releases the stage on every CTA's barrier (mapa + shared::cluster arrive) once
    wait_group 1 retired the wgmma that read it. A final cluster barrier keeps every CTA alive
    until no peer can multicast into it or arrive on its barriers."""
    stages = 4
    a_bytes, b_bytes = A128.nbytes, B256.nbytes
    stage = a_bytes + b_bytes
    slice_rows = 256 // cluster
    box_b = SmemLayout(t.bf16, slice_rows, K_BF16, "K", SW)
    k = Kernel(f"audit_cluster{cluster}_gemm", reqntid=384, minnctapersm=1,
               reqnctapercluster=(cluster, 1, 1))
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

        def release():
            with k.if_(leader):
                free.release()                            # every CTA's empty[stage]
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


# -- (7) persistent GEMM, double-buffered TMA-store epilogue ------------------------------------
BOX_C = 64 * 64 * 2                              # one 64 x 64 bf16 box of C (128B swizzle)


def _stage_tile(k, packed, buf, tid):
    """stmatrix a warpgroup's packed 64 x 64 bf16 tile into `buf`, 128-byte rows with the
    128B swizzle (16-byte chunk c of row r at c ^ (r % 8)), as the TMA store reads it."""
    lane = k.and_(tid, 31)
    mat = k.shr(lane, 3)                         # lane L addresses a row of matrix L / 8
    row = k.add(k.mul(k.shr(tid, 5), 16), k.add(k.shl(k.and_(mat, 1), 3), k.and_(lane, 7)))
    row_addr = k.add(buf, k.shl(row, 7))
    for q in range(4):                           # columns 16q .. 16q + 15
        chunk = k.xor(k.add(2 * q, k.shr(mat, 1)), k.and_(lane, 7))
        k.stmatrix(k.add(row_addr, k.shl(chunk, 4)), packed.regs[4 * q:4 * q + 4])


def persistent_gemm_tma_store(bug: str | None = None) -> tuple[Module, dict]:
    """A persistent warp-specialized GEMM (C bf16 = A @ B^T, 128 x 64 tiles): every CTA walks
    tiles ctaid.x, ctaid.x + nctaid.x, ...; the producer runs ahead across tiles on a 4-stage
    MbarrierRing. Each consumer warpgroup stages its 64 x 64 result in one of two 8 KiB
    buffers, picked by the parity of its tile count, and TMA-stores it; before refilling a
    buffer it waits (cp.async.bulk.wait_group.read 1) only for the store that read that
    buffer, so the other buffer's store overlaps the next tile. `bug="read2"` waits with
    wait_group.read 2 (the store that read the buffer may still run), "shared" gives both
    warpgroups the same two buffers."""
    stages = 4
    a_bytes, b_bytes = A128.nbytes, A64.nbytes
    stage = a_bytes + b_bytes
    k = Kernel("audit_persistent_tma_store", reqntid=384, minnctapersm=1)
    tma, tmb, tmc = (k.tensormap_addr(k.param_tensormap(n))
                     for n in ("map_a", "map_b", "map_c"))
    tiles_m = k.ld_param(k.param(t.u32, "tiles_m"))
    tiles_n = k.ld_param(k.param(t.u32, "tiles_n"))
    kblocks = k.ld_param(k.param(t.u32, "kblocks"))
    tiles = k.mul(tiles_m, tiles_n)
    smem = k.extern_shared("smem", align=1024)
    epi_off = stages * stage                     # 2 warpgroups x 2 buffers x 8 KiB
    ring = MbarrierRing(k, stages, empty_count=2, storage=Addr(smem, epi_off + 4 * BOX_C))
    ring.init()
    tid = k.tid.x
    wg = k.shr(tid, 7)

    def tile_loop(body):
        tile = k.mov(k.ctaid.x, dst=k.reg(t.u32, "tile"))
        with k.while_(lambda: tile < tiles):
            body(k.mul(k.div(tile, tiles_n), 128), k.mul(k.rem(tile, tiles_n), 64))
            k.add(tile, k.nctaid.x, dst=tile)

    with k.if_(wg == 0):
        ptx.setmaxnreg_dec(k, 40)
        with k.if_(tid == 0):
            p = ring.producer()

            def produce(m0, n0):
                with k.for_range(0, kblocks) as kb:
                    p.wait_empty()
                    p.arrive_expect_tx(stage)
                    slot, full = p.slot(smem, stage), p.full_barrier()
                    kc = k.mul(kb, K_BF16)
                    ptx.cp_async_bulk_tensor(k, "shared::cluster", "global", slot, tma,
                                             (kc, m0), full)
                    ptx.cp_async_bulk_tensor(k, "shared::cluster", "global",
                                             k.add(slot, a_bytes), tmb, (kc, n0), full)
                    p.advance()
            tile_loop(produce)
    with k.else_():
        ptx.setmaxnreg_inc(k, 232)
        cw = k.sub(wg, 1)
        wtid = k.and_(tid, 127)
        leader = wtid == 0
        named = k.add(cw, 1)                     # this warpgroup's named barrier
        staging = k.add(k.mov(smem), k.mad(cw, 2 * BOX_C, epi_off))
        done = k.mov(0, dst=k.reg(t.u32, "done"))
        c = ring.consumer()
        acc = k.fragment(t.f32, shape=(64, 64), zero=False)

        def consume(m0, n0):
            with k.for_range(0, kblocks) as kb:
                c.wait_full()
                slot = c.slot(smem, stage)
                da = descriptor(k, A64, k.add(slot, k.mul(cw, A64.nbytes)))
                db = descriptor(k, A64, k.add(slot, a_bytes))
                ptx.wgmma_fence(k)
                for kk in range(0, K_BF16, 16):
                    first = k.setp("eq", kb, 0) if kk == 0 else None
                    ptx.wgmma_mma_async(k, acc, da.k_step(k, kk), db.k_step(k, kk),
                                        ~first if first is not None else 1, atype="bf16")
                ptx.wgmma_commit_group(k)
                ptx.wgmma_wait_group(k, 0)
                with k.if_(leader):
                    c.release()
                c.advance()
            packed = acc.to_packed(t.bf16)
            buf = k.add(staging, k.mul(k.and_(done, 1), BOX_C))
            with k.if_(leader):
                # the store that read buf is done
                ptx.cp_async_bulk_wait_group_read(k, 2 if bug == "read2" else 1)
            k.bar_sync(named, 128)
            _stage_tile(k, packed, buf, wtid)
            ptx.fence_proxy_async(k, "shared::cta")
            k.bar_sync(named, 128)
            with k.if_(leader):
                ptx.cp_async_bulk_tensor(k, "global", "shared::cta", tmc,
                                         (n0, k.mad(cw, 64, m0)), buf)
                ptx.cp_async_bulk_commit_group(k)
            k.add(done, 1, dst=done)
        tile_loop(consume)
        with k.if_(leader):
            ptx.cp_async_bulk_wait_group(k, 0)
    k.ret()
    maps = {"map_a": _box(A128), "map_b": _box(A64), "map_c": {"box_bytes": BOX_C,
                                                               "swizzle": SW}}
    return Module([k], target="sm_90a"), maps


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


def persistent_gemm_staged_epilogue() -> tuple[Module, dict]:
    """The persistent GEMM with ptxdsl's helpers throughout and a dynamic tile scheduler:
    one producer thread takes tiles from a global work counter (atom.add) and hands each to
    the consumers through a 2-entry MbarrierRing of tile words in the same dynamic buffer
    (st.shared + arrive; the consumers read it after their wait, and release it after a
    named barrier says the whole warpgroup read it); the tiles' k-blocks go through a
    4-stage MbarrierRing (a `free` view trailing `read` by the stage in flight, wait_group
    1); each consumer warpgroup stores 64 x 128 bf16 per tile with its TmaStoreEpilogue."""
    stages = 4
    stage = A128.nbytes + B128.nbytes
    k = Kernel("audit_persistent_staged", reqntid=384, minnctapersm=1)
    tma, tmb, tmc = (k.tensormap_addr(k.param_tensormap(n))
                     for n in ("map_a", "map_b", "map_c"))
    counter = k.ld_param(k.param_ptr("counter"))
    tiles_n = k.ld_param(k.param(t.u32, "tiles_n"))
    tiles = k.ld_param(k.param(t.u32, "tiles"))
    kblocks = k.ld_param(k.param(t.u32, "kblocks"))
    smem = k.extern_shared("smem", align=1024)
    epi_off = stages * stage
    bar_off = epi_off + 2 * STAGING_BYTES
    words_off = bar_off + 16 * stages + 32
    ring = MbarrierRing(k, stages, empty_count=2, storage=Addr(smem, bar_off))
    sched = MbarrierRing(k, 2, empty_count=2, storage=Addr(smem, bar_off + 16 * stages),
                         name="sched")
    ring.init(sync=False)
    sched.init()
    tid = k.tid.x
    wg = k.shr(tid, 7)
    with k.if_(wg == 0):
        ptx.setmaxnreg_dec(k, 40)
        with k.if_(tid == 0):
            p, ps = ring.producer(), sched.producer()
            with k.loop():
                tile = k.atom("add", counter, 1, type=t.u32, space="global")
                ps.wait_empty()
                k.st(ps.slot(Addr(smem, words_off), 4), tile, type=t.u32, space="shared")
                ps.arrive()
                ps.advance()
                k.break_(tile >= tiles)
                m0 = k.mul(k.div(tile, tiles_n), 128)
                n0 = k.mul(k.rem(tile, tiles_n), 128)
                with k.for_range(0, kblocks) as kb:
                    p.wait_empty()
                    p.arrive_expect_tx(stage)
                    slot, full = p.slot(smem, stage), p.full_barrier()
                    kc = k.mul(kb, K_BF16)
                    ptx.cp_async_bulk_tensor(k, "shared::cluster", "global", slot, tma,
                                             (kc, m0), full)
                    ptx.cp_async_bulk_tensor(k, "shared::cluster", "global",
                                             k.add(slot, A128.nbytes), tmb, (kc, n0), full)
                    p.advance()
    with k.else_():
        ptx.setmaxnreg_inc(k, 232)
        cw = k.sub(wg, 1)
        named = k.add(cw, 1)
        epi = TmaStoreEpilogue(k, k.add(k.mov(smem), k.mad(cw, STAGING_BYTES, epi_off)),
                               tmc, named)
        read, free, cs = ring.consumer(), ring.consumer(), sched.consumer()
        leader = k.and_(tid, 127) == 0
        acc = k.fragment(t.f32, shape=(64, 128), zero=False)

        def mma(first: bool) -> None:
            read.wait_full()
            slot = read.slot(smem, stage)
            da = descriptor(k, A64, k.add(slot, k.mul(cw, A64.nbytes)))
            db = descriptor(k, B128, k.add(slot, A128.nbytes))
            ptx.wgmma_fence(k)
            for kk in range(0, K_BF16, 16):
                ptx.wgmma_mma_async(k, acc, da.k_step(k, kk), db.k_step(k, kk),
                                    0 if first and kk == 0 else 1, atype="bf16")
            ptx.wgmma_commit_group(k)
            read.advance()

        def release() -> None:
            with k.if_(leader):
                free.release()
            free.advance()

        with k.loop():
            cs.wait_full()
            tile = k.ld(cs.slot(Addr(smem, words_off), 4), type=t.u32, space="shared")
            k.bar_sync(named, 128)               # the whole warpgroup has read the word
            with k.if_(leader):
                cs.release()
            cs.advance()
            k.break_(tile >= tiles)
            m0 = k.mul(k.div(tile, tiles_n), 128)
            n0 = k.mul(k.rem(tile, tiles_n), 128)
            with k.if_(kblocks > 0):
                mma(first=True)
                with k.for_range(1, kblocks):
                    mma(first=False)
                    ptx.wgmma_wait_group(k, 1)
                    release()
                ptx.wgmma_wait_group(k, 0)
                release()
            epi.store(acc.to_packed(t.bf16), k.mad(cw, 64, m0), n0)
        epi.finish()
    k.ret()
    maps = {"map_a": _box(A128), "map_b": _box(B128),
            "map_c": {"box_bytes": BOX_C, "swizzle": SW}}
    return Module([k], target="sm_90a"), maps


# -- variants of the warp-specialized GEMM: idioms from CUTLASS and hand-written kernels --------
def _asm_wait(k, bar, parity, once: bool = False):
    """CUTLASS's wait loop as inline PTX (try_wait.parity with a retry branch); `once`: a
    single try_wait whose result is dropped (a bug: it may return before the phase)."""
    if once:
        k.asm("{\n .reg .pred P1;\n mbarrier.try_wait.parity.shared::cta.b64 P1, [$0], $1;\n}",
              ins=[bar, parity])
        return
    k.asm("{\n .reg .pred P1;\n WAIT:\n"
          " mbarrier.try_wait.parity.shared::cta.b64 P1, [$0], $1;\n"
          " @!P1 bra WAIT;\n}", ins=[bar, parity])


def ws_gemm_variants(bug: str | None = None) -> tuple[Module, dict]:
    """The warp-specialized GEMM as others write it: the producer is the thread elect.sync
    picks in warp 0; the waits are inline-PTX try_wait loops; the stage register wraps with
    selp and the phase flips with xor; the producer announces A's bytes with
    arrive.expect_tx and B's with a separate expect_tx; loads carry an L2 evict-last hint;
    every consumer thread releases (empty barriers count 256 arrivals) after wait_group 1.
    `bug="current"` releases the stage just issued instead of the previous one, "once" has
    the consumers try the full barrier once instead of looping."""
    stages = 3
    stage = A128.nbytes + B128.nbytes
    k = Kernel("audit_ws_gemm_variants", reqntid=384, minnctapersm=1)
    tma, tmb = (k.tensormap_addr(k.param_tensormap(n)) for n in ("map_a", "map_b"))
    c_ptr = k.ld_param(k.param_ptr("c"))
    N = k.ld_param(k.param(t.u32, "n"))
    kblocks = k.ld_param(k.param(t.u32, "kblocks"))
    smem = k.extern_shared("smem", align=1024)
    bars = stages * stage                        # full[], then empty[], after the stages
    tid = k.tid.x
    warp = k.shr(tid, 5)
    with k.if_(warp == 0):
        with k.if_(ptx.elect_sync(k)):
            for s in range(stages):
                ptx.mbarrier_init(k, Addr(smem, bars + 8 * s), 1)
                ptx.mbarrier_init(k, Addr(smem, bars + 8 * (stages + s)), 256)
            ptx.fence_mbarrier_init(k, "release", "cluster")
    k.bar_sync(0)
    tiles = k.mov(smem)
    full0, empty0 = k.add(tiles, bars), k.add(tiles, bars + 8 * stages)
    m0, n0 = k.mul(k.ctaid.y, 128), k.mul(k.ctaid.x, 128)
    wg = k.shr(tid, 7)

    def step(s, ph):
        """s = s + 1 == stages ? 0 : s + 1; the phase flips on the wrap."""
        nxt = k.add(s, 1)
        wrap = nxt == stages
        k.selp(0, nxt, wrap, type=t.u32, dst=s)
        k.xor(ph, k.selp(1, 0, wrap, type=t.u32), dst=ph)

    with k.if_(wg == 0):
        ptx.setmaxnreg_dec(k, 40)
        with k.if_(warp == 0):
            with k.if_(ptx.elect_sync(k)):
                policy = ptx.createpolicy_fractional(k, "evict_last")
                s = k.mov(0, dst=k.reg(t.u32, "ps"))
                ph = k.mov(1, dst=k.reg(t.u32, "pph"))
                with k.for_range(0, kblocks) as kb:
                    _asm_wait(k, k.add(empty0, k.shl(s, 3)), ph)
                    fb = k.add(full0, k.shl(s, 3))
                    ptx.mbarrier_arrive_expect_tx(k, "release", "cta", "shared::cta", fb,
                                                  A128.nbytes, dst="_")
                    slot = k.add(tiles, k.mul(s, stage))
                    kc = k.mul(kb, K_BF16)
                    ptx.cp_async_bulk_tensor(k, "shared::cluster", "global", slot, tma,
                                             (kc, m0), fb, cache_policy=policy)
                    ptx.mbarrier_expect_tx(k, "relaxed", "cta", "shared::cta", fb,
                                           B128.nbytes)
                    ptx.cp_async_bulk_tensor(k, "shared::cluster", "global",
                                             k.add(slot, A128.nbytes), tmb, (kc, n0), fb,
                                             cache_policy=policy)
                    step(s, ph)
    with k.else_():
        ptx.setmaxnreg_inc(k, 232)
        cw = k.sub(wg, 1)
        acc = k.fragment(t.f32, shape=(64, 128))
        s = k.mov(0, dst=k.reg(t.u32, "cs"))
        ph = k.mov(0, dst=k.reg(t.u32, "cph"))
        prev = k.mov(0, dst=k.reg(t.u32, "prev"))
        with k.for_range(0, kblocks) as kb:
            _asm_wait(k, k.add(full0, k.shl(s, 3)), ph, once=bug == "once")
            slot = k.add(tiles, k.mul(s, stage))
            da = descriptor(k, A64, k.add(slot, k.mul(cw, A64.nbytes)))
            db = descriptor(k, B128, k.add(slot, A128.nbytes))
            ptx.wgmma_fence(k)
            for kk in range(0, K_BF16, 16):
                ptx.wgmma_mma_async(k, acc, da.k_step(k, kk), db.k_step(k, kk), atype="bf16")
            ptx.wgmma_commit_group(k)
            ptx.wgmma_wait_group(k, 1)
            with k.if_(kb > 0):
                ptx.mbarrier_arrive(k, "release", "cta", "shared::cta",
                                    k.add(empty0, k.shl(s if bug == "current" else prev, 3)),
                                    dst="_")
            k.mov(s, dst=prev)
            step(s, ph)
        ptx.wgmma_wait_group(k, 0)
        with k.if_(kblocks > 0):
            ptx.mbarrier_arrive(k, "release", "cta", "shared::cta",
                                k.add(empty0, k.shl(prev, 3)), dst="_")
        row0 = k.mad(cw, 64, m0)
        acc.store(k.add(c_ptr, k.mul(k.mad(row0, N, n0), 4, type=t.u32, mode="wide")), N)
    k.ret()
    return Module([k], target="sm_90a"), {"map_a": _box(A128), "map_b": _box(B128)}


def w8a16_early_release(bug: str | None = None) -> tuple[Module, dict]:
    """W8A16 with two rings in one dynamic buffer: activations (bf16, read by the wgmma) and
    int8 weights (read by the consumers' ld.shared only). Two consumer warpgroups split the
    dequantisation of each weight stage (64 rows each) into a double-buffered bf16 tile and
    hand the int8 stage back as soon as their loads are done, before the wgmma; the
    activation stage goes back after wait_group 1 retired the wgmma that read it, and the
    bf16 buffer is rewritten only after the wgmma of two k-blocks ago is retired.
    `bug="raw"` points the wgmma's B descriptor at the int8 stage itself, which the early
    release then hands back while the wgmma reads it."""
    stages = 4
    k = Kernel("audit_w8a16_early", reqntid=384, minnctapersm=1)
    tma, tmw = (k.tensormap_addr(k.param_tensormap(n)) for n in ("map_a", "map_w"))
    c_ptr = k.ld_param(k.param_ptr("c"))
    N = k.ld_param(k.param(t.u32, "n"))
    kblocks = k.ld_param(k.param(t.u32, "kblocks"))
    smem = k.extern_shared("smem", align=1024)
    a_off, w_off = 0, stages * A128.nbytes
    deq_off = w_off + stages * W_INT8            # two bf16 B tiles (2 x 16 KiB)
    bar_off = deq_off + 2 * B128.nbytes
    ar = MbarrierRing(k, stages, empty_count=2, storage=Addr(smem, bar_off), name="ar")
    wr = MbarrierRing(k, stages, empty_count=256, storage=Addr(smem, bar_off + 16 * stages),
                      name="wr")
    ar.init(sync=False)
    wr.init()
    tid = k.tid.x
    wg = k.shr(tid, 7)
    m0, n0 = k.mul(k.ctaid.y, 128), k.mul(k.ctaid.x, 128)
    with k.if_(wg == 0):
        ptx.setmaxnreg_dec(k, 40)
        with k.if_(tid == 0):
            pa, pw = ar.producer(), wr.producer()
            with k.for_range(0, kblocks) as kb:
                kc = k.mul(kb, 64)
                pa.wait_empty()
                pa.arrive_expect_tx(A128.nbytes)
                ptx.cp_async_bulk_tensor(k, "shared::cluster", "global",
                                         pa.slot(Addr(smem, a_off), A128.nbytes), tma,
                                         (kc, m0), pa.full_barrier())
                pa.advance()
                pw.wait_empty()
                pw.arrive_expect_tx(W_INT8)
                ptx.cp_async_bulk_tensor(k, "shared::cluster", "global",
                                         pw.slot(Addr(smem, w_off), W_INT8), tmw, (kc, n0),
                                         pw.full_barrier())
                pw.advance()
    with k.else_():
        ptx.setmaxnreg_inc(k, 232)
        cw = k.sub(wg, 1)
        ctid = k.sub(tid, 128)                   # 0..255: this thread dequantises row ctid / 2
        row, half = k.shr(ctid, 1), k.and_(ctid, 1)
        ca, free, cwr = ar.consumer(), ar.consumer(), wr.consumer()
        acc = k.fragment(t.f32, shape=(64, 128))
        leader = k.and_(tid, 127) == 0
        base = k.mov(smem)
        with k.for_range(0, kblocks) as kb:
            deq = k.add(base, k.add(k.mul(k.and_(kb, 1), B128.nbytes), deq_off))
            cwr.wait_full()
            src = k.add(cwr.slot(Addr(smem, w_off), W_INT8), k.add(k.shl(row, 6),
                                                                    k.shl(half, 5)))
            words = [k.ld(Addr(src, 16 * q), type=t.b32, space="shared", vec=4)
                     for q in range(2)]
            cwr.release()                        # every thread: its int8 bytes are in registers
            cwr.advance()
            # the wgmma of k-block kb - 2 read this bf16 buffer: wait_group 1 after kb - 1's
            # issue retired it (the previous iteration), so it can be rewritten
            deq_row = k.add(deq, k.shl(row, 7))
            swz = k.and_(row, 7)
            for q in range(2):
                packed = []
                for w in words[q]:
                    vals = []
                    for byte in range(4):
                        (v,) = k.asm(f"bfe.s32 $0, $1, {8 * byte}, 8;", outs=[t.s32],
                                     ins=[(w, t.b32)])
                        vals.append(k.cvt(v, t.f32, rnd="rn"))
                    packed += [k.cvt_packed("bf16x2", vals[1], vals[0]),
                               k.cvt_packed("bf16x2", vals[3], vals[2])]
                for h in range(2):
                    chunk = k.xor(swz, k.add(k.shl(half, 2), 2 * q + h))
                    k.st(k.add(deq_row, k.shl(chunk, 4)), tuple(packed[4 * h:4 * h + 4]),
                         type=t.b32, space="shared")
            ptx.fence_proxy_async(k, "shared::cta")
            k.bar_sync(1, 256)                   # both warpgroups' halves are written
            ca.wait_full()
            a_slot = ca.slot(Addr(smem, a_off), A128.nbytes)
            ca.advance()
            da = descriptor(k, A64, k.add(a_slot, k.mul(cw, A64.nbytes)))
            db = descriptor(k, B128, k.add(src, 0) if bug == "raw" else deq)
            ptx.wgmma_fence(k)
            for kk in range(0, 64, 16):
                ptx.wgmma_mma_async(k, acc, da.k_step(k, kk), db.k_step(k, kk), atype="bf16")
            ptx.wgmma_commit_group(k)
            ptx.wgmma_wait_group(k, 1)
            with k.if_(kb > 0):
                with k.if_(leader):
                    free.release()               # the activations of k-block kb - 1
                free.advance()
            # every thread of both warpgroups retired kb - 1's wgmma before anyone
            # rewrites its bf16 buffer in the next iteration
            k.bar_sync(1, 256)
        ptx.wgmma_wait_group(k, 0)
        with k.if_(kblocks > 0):
            with k.if_(leader):
                free.release()
        row0 = k.add(m0, k.mul(cw, 64))
        acc.store(k.add(c_ptr, k.mul(k.mad(row0, N, n0), 4, type=t.u32, mode="wide")), N)
    k.ret()
    maps = {"map_a": _box(A128), "map_w": {"box_bytes": W_INT8, "swizzle": "NONE"}}
    return Module([k], target="sm_90a"), maps
