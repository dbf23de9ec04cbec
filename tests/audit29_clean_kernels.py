"""Correct kernels written for an independent precision audit of the hazard checker (issue 29):
each is a whole kernel in a style Hopper kernels are written in, some with ptxdsl's helpers
and some with hand-written rings. This module: warp-specialized GEMMs (a hand-written ring;
CUTLASS's idioms: elect.sync, inline-PTX wait loops, selp wraps), a DeepGEMM-style fp8 GEMM and
two W8A16 kernels; tests/audit29_clean_attention.py and tests/audit29_clean_cluster.py hold
the rest. Each builder returns (Module, maps): the module and the host descriptions of its
tensor maps (`check_module(mod, maps=maps)`); some take `bug=` to plant a mistake for a twin.
tests/test_checker_audit29_clean.py checks that each has no finding and assembles."""

from __future__ import annotations

from ptxdsl import Addr, Kernel, Module, ptx, t
from ptxdsl.instructions.wgmma_desc import SmemLayout, descriptor
from ptxdsl.pipeline import MbarrierRing

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
