"""Checker (issue 29): complete, correct ring kernels that must check with zero findings (errors
and warnings; notes allowed): a FlashAttention-3-style forward pass (K and V rings in one
dynamic shared buffer, a warp-specialized producer, two consumer warpgroups that issue the
QK^T of block j+1 before the softmax of block j), a persistent warp-specialized GEMM whose
ring is an `MbarrierRing`, and a DeepGEMM-style fp8 GEMM with the scales in the stage. Each
is also emitted (the PTX builds)."""

from __future__ import annotations

import pytest

from ptxdsl import Addr, Kernel, Module, ptx, t
from ptxdsl.checker import Severity, check_kernel
from ptxdsl.instructions.wgmma_desc import SmemLayout, descriptor
from ptxdsl.pipeline import MbarrierRing

LK = SmemLayout(t.bf16, 64, 64, "K", "128B")     # Q, K (and GEMM A/B) tiles: d contiguous
LV = SmemLayout(t.bf16, 64, 64, "MN", "128B")    # V as the B of P @ V: d (N) contiguous
TILE = LK.nbytes                                 # 8 KiB
STEPS = range(0, 64, 16)                         # the k16 steps of one 64-wide tile


def _clean(k: Kernel, maps: dict) -> None:
    found = check_kernel(k, notes=True, maps=maps)
    assert [f.format() for f in found if f.severity is not Severity.note] == []
    Module([k], target="sm_90a").emit()


# -- FlashAttention-3-style forward pass ------------------------------------------------------
def fa3_forward(stages: int = 2) -> Kernel:
    """One CTA: 128 query rows (64 per consumer warpgroup) against `n_kv` key/value blocks of
    64. Dynamic shared memory: Q (2 tiles), the K ring, the V ring, then the barriers (Q's,
    then each ring's full/empty pairs: `MbarrierRing(storage=Addr(dyn, off))`)."""
    k = Kernel("fa3_fwd", reqntid=384, minnctapersm=1)
    tq, tk, tv = (k.tensormap_addr(k.param_tensormap(n)) for n in ("map_q", "map_k", "map_v"))
    out = k.ld_param(k.param_ptr("o"))
    n_kv = k.ld_param(k.param(t.u32, "n_kv"))
    dyn = k.extern_shared("smem", align=1024)
    k_off, v_off = 2 * TILE, (2 + stages) * TILE
    bars = (2 + 2 * stages) * TILE
    q_bar = Addr(dyn, bars)
    kr = MbarrierRing(k, stages, empty_count=2, storage=Addr(dyn, bars + 8), name="kr")
    vr = MbarrierRing(k, stages, empty_count=2, storage=Addr(dyn, bars + 8 + 16 * stages),
                      name="vr")
    tid = k.tid.x
    with k.if_(tid == 0):
        ptx.mbarrier_init(k, q_bar, 1)
    kr.init(sync=False)
    vr.init()
    wg = k.shr(tid, 7)
    base = k.mov(dyn)
    with k.if_(wg == 0):
        ptx.setmaxnreg_dec(k, 40)
        with k.if_(tid == 0):
            ptx.mbarrier_arrive_expect_tx(k, "release", "cta", "shared::cta", q_bar,
                                          2 * TILE, dst="_")
            for h in range(2):
                ptx.cp_async_bulk_tensor(k, "shared::cluster", "global", Addr(dyn, h * TILE),
                                         tq, (0, 64 * h), q_bar)
            kp, vp = kr.producer(), vr.producer()
            with k.for_range(0, n_kv) as j:
                row = k.mul(j, 64)
                for p, tmap, off in ((kp, tk, k_off), (vp, tv, v_off)):
                    p.wait_empty()
                    p.arrive_expect_tx(TILE)
                    ptx.cp_async_bulk_tensor(k, "shared::cluster", "global",
                                             p.slot(k.add(base, off), TILE), tmap, (0, row),
                                             p.full_barrier())
                    p.advance()
    with k.else_():
        ptx.setmaxnreg_inc(k, 232)
        _fa3_consumer(k, base, q_bar, kr, vr, k_off, v_off, n_kv, out, k.sub(wg, 1))
    k.ret()
    return k


def _fa3_consumer(k, base, q_bar, kr, vr, k_off, v_off, n_kv, out, cw) -> None:
    leader = k.and_(k.tid.x, 127) == 0
    ptx.mbarrier_wait(k, q_bar, 0)
    qd = descriptor(k, LK, k.add(base, k.mul(cw, TILE)))
    kc, vc = kr.consumer(), vr.consumer()
    s_cur = k.fragment(t.f32, shape=(64, 64), zero=False)
    s_next = k.fragment(t.f32, shape=(64, 64), zero=False)
    o = k.fragment(t.f32, shape=(64, 64))
    row_max = k.mov(-1e30, type=t.f32)
    row_sum = k.mov(0.0, type=t.f32)

    def qk(s) -> None:                     # S = Q K_j^T, one group
        kc.wait_full()
        kd = descriptor(k, LK, kc.slot(k.add(base, k_off), TILE))
        ptx.wgmma_fence(k)
        for i, kk in enumerate(STEPS):
            ptx.wgmma_mma_async(k, s, qd.k_step(k, kk), kd.k_step(k, kk), 0 if i == 0 else 1,
                                atype="bf16")
        ptx.wgmma_commit_group(k)

    def softmax(s):                        # the running max / sum and O's correction
        m = row_max
        for r in s:
            m = k.max(m, r, type=t.f32)
        corr = k.sub(row_max, m, type=t.f32)
        k.mov(m, dst=row_max)
        for r in s:
            k.sub(r, m, dst=r, type=t.f32)
            k.add(row_sum, r, dst=row_sum, type=t.f32)
        for r in o:
            k.mul(r, corr, dst=r, type=t.f32)
        return s.to_packed(t.bf16)

    def pv(p) -> None:                     # O += P V_j, P from registers (RS), one group
        vc.wait_full()
        vd = descriptor(k, LV, vc.slot(k.add(base, v_off), TILE))
        ptx.wgmma_fence(k)
        for i, kk in enumerate(STEPS):
            ptx.wgmma_mma_async(k, o, p.a_operand(i), vd.k_step(k, kk), tnspB=1,
                                atype="bf16")
        ptx.wgmma_commit_group(k)

    def release(view) -> None:
        with k.if_(leader):
            view.release()
        view.advance()

    qk(s_cur)
    ptx.wgmma_wait_group(k, 0)
    release(kc)
    with k.for_range(1, n_kv):
        qk(s_next)                         # QK^T of block j before the softmax of block j-1
        pv(softmax(s_cur))
        ptx.wgmma_wait_group(k, 1)         # S_j is done (P V_{j-1} may still run)
        release(kc)
        for a, b in zip(s_cur, s_next, strict=True):
            k.mov(b, dst=a, type=t.f32)
        ptx.wgmma_wait_group(k, 0)
        release(vc)
    pv(softmax(s_cur))
    ptx.wgmma_wait_group(k, 0)
    release(vc)
    o.store(k.add(out, k.cvt(k.mul(cw, 64 * 64 * 4), t.u64)), 64)


FA3_MAPS = {"map_q": {"box_bytes": TILE}, "map_k": {"box_bytes": TILE},
            "map_v": {"box_bytes": TILE}}


@pytest.mark.parametrize("stages", [2, 3])
def test_fa3_forward_checks_clean(stages):
    _clean(fa3_forward(stages), FA3_MAPS)


# -- a persistent warp-specialized GEMM on an MbarrierRing -------------------------------------
def ws_gemm(stages: int = 4) -> Kernel:
    """128 x 64 output tiles, persistent over `tiles` (grid-stride); warpgroup 0's thread 0
    loads A (two 64-row boxes) and B per k-block into the ring, warpgroups 1 and 2 each
    multiply their 64 rows, keep one wgmma group in flight and release the previous stage
    (a second consumer view trails the reading one); the ring's views run on across tiles."""
    k = Kernel("ws_gemm", reqntid=384)
    ta, tb = k.tensormap_addr(k.param_tensormap("map_a")), \
        k.tensormap_addr(k.param_tensormap("map_b"))
    out = k.ld_param(k.param_ptr("c"))
    tiles = k.ld_param(k.param(t.u32, "tiles"))
    kblocks = k.ld_param(k.param(t.u32, "kblocks"))
    stage = 3 * TILE
    smem = k.shared_array(t.b8, stages * stage, align=1024, name="smem")
    ring = MbarrierRing(k, stages, empty_count=2)
    ring.init()
    tid = k.tid.x
    wg = k.shr(tid, 7)

    def tile_loop(body) -> None:
        tile = k.mov(k.read_special("ctaid.x"), type=t.u32)
        with k.while_(lambda: tile < tiles):
            body(tile)
            k.add(tile, k.read_special("nctaid.x"), dst=tile)

    with k.if_(wg == 0):
        with k.if_(tid == 0):
            p = ring.producer()

            def produce(tile) -> None:
                with k.for_range(0, kblocks) as kb:
                    col = k.mul(kb, 64)
                    p.wait_empty()
                    p.arrive_expect_tx(stage)
                    slot, full = p.slot(smem, stage), p.full_barrier()
                    for h in range(2):
                        ptx.cp_async_bulk_tensor(k, "shared::cluster", "global",
                                                 k.add(slot, h * TILE), ta,
                                                 (col, k.mad(tile, 128, 64 * h)), full)
                    ptx.cp_async_bulk_tensor(k, "shared::cluster", "global",
                                             k.add(slot, 2 * TILE), tb, (col, 0), full)
                    p.advance()
            tile_loop(produce)
    with k.else_():
        cw = k.sub(wg, 1)
        acc = k.fragment(t.f32, shape=(64, 64), zero=False)
        read, free = ring.consumer(), ring.consumer()
        leader = k.and_(tid, 127) == 0
        a_rows = k.mul(cw, TILE)

        def mma(first: bool) -> None:
            read.wait_full()
            slot = read.slot(smem, stage)
            da = descriptor(k, LK, k.add(slot, a_rows))
            db = descriptor(k, LK, k.add(slot, 2 * TILE))
            ptx.wgmma_fence(k)
            for i, kk in enumerate(STEPS):
                ptx.wgmma_mma_async(k, acc, da.k_step(k, kk), db.k_step(k, kk),
                                    0 if first and i == 0 else 1, atype="bf16")
            ptx.wgmma_commit_group(k)
            read.advance()

        def release() -> None:
            with k.if_(leader):
                free.release()
            free.advance()

        def consume(tile) -> None:
            mma(first=True)
            with k.for_range(1, kblocks):
                mma(first=False)
                ptx.wgmma_wait_group(k, 1)
                release()
            ptx.wgmma_wait_group(k, 0)
            release()
            row = k.mad(tile, 128, k.mul(cw, 64))
            acc.store(k.add(out, k.mul(row, 64 * 4, type=t.u32, mode="wide")), 64)
        tile_loop(consume)
    k.ret()
    return k


GEMM_MAPS = {"map_a": {"box_bytes": TILE}, "map_b": {"box_bytes": TILE}}


@pytest.mark.parametrize("stages", [2, 4])
def test_ws_gemm_on_an_mbarrier_ring_checks_clean(stages):
    _clean(ws_gemm(stages), GEMM_MAPS)


# -- DeepGEMM-style fp8 with the scales in the stage ----------------------------------------
LF8 = SmemLayout("e4m3", 64, 128, "K", "128B")   # 64 rows x 128 k of fp8: 8 KiB


def fp8_gemm(stages: int = 3) -> Kernel:
    """Thread 0 fills each stage with an fp8 A and B tile (TMA) and the A rows' scales (a
    1-D bulk copy of 256 bytes from global memory), all on the stage's full barrier; the
    consumer warpgroup runs the four k32 wgmmas of the stage into a fresh accumulator, reads
    its rows' scales from the stage with ld.shared, waits for the group and promotes the
    partial sums into the running fp32 total, then releases the stage."""
    k = Kernel("fp8_gemm", reqntid=256)
    ta, tb = k.tensormap_addr(k.param_tensormap("map_a")), \
        k.tensormap_addr(k.param_tensormap("map_b"))
    scales = k.ld_param(k.param_ptr("scales"))
    out = k.ld_param(k.param_ptr("c"))
    kblocks = k.ld_param(k.param(t.u32, "kblocks"))
    stage = 2 * LF8.nbytes + 256
    stride = (stage + 1023) // 1024 * 1024
    smem = k.shared_array(t.b8, stages * stride, align=1024, name="smem")
    ring = MbarrierRing(k, stages)
    ring.init()
    tid = k.tid.x
    with k.if_(k.shr(tid, 7) == 0):
        with k.if_(tid == 0):
            p = ring.producer()
            with k.for_range(0, kblocks) as kb:
                p.wait_empty()
                p.arrive_expect_tx(stage)
                slot, full = p.slot(smem, stride), p.full_barrier()
                col = k.mul(kb, 128)
                ptx.cp_async_bulk_tensor(k, "shared::cluster", "global", slot, ta, (col, 0),
                                         full)
                ptx.cp_async_bulk_tensor(k, "shared::cluster", "global",
                                         k.add(slot, LF8.nbytes), tb, (col, 0), full)
                ptx.cp_async_bulk(k, "shared::cluster", "global", k.add(slot, 2 * LF8.nbytes),
                                  k.add(scales, k.mul(kb, 256, type=t.u32, mode="wide")), 256,
                                  full)
                p.advance()
    with k.else_():
        total = k.fragment(t.f32, shape=(64, 64))
        part = k.fragment(t.f32, shape=(64, 64), zero=False)
        c = ring.consumer()
        row = k.shr(k.and_(tid, 127), 2)
        with k.for_range(0, kblocks):
            c.wait_full()
            slot = c.slot(smem, stride)
            da, db = descriptor(k, LF8, slot), descriptor(k, LF8, k.add(slot, LF8.nbytes))
            ptx.wgmma_fence(k)
            for i, kk in enumerate(range(0, 128, 32)):
                ptx.wgmma_mma_async(k, part, da.k_step(k, kk), db.k_step(k, kk),
                                    0 if i == 0 else 1, atype="e4m3")
            ptx.wgmma_commit_group(k)
            s = k.ld(k.add(k.add(slot, 2 * LF8.nbytes), k.shl(row, 2)), type=t.f32,
                     space="shared::cta")
            ptx.wgmma_wait_group(k, 0)
            for a, b in zip(total, part, strict=True):
                k.mad(b, s, a, dst=a, type=t.f32)
            with k.if_(k.and_(tid, 127) == 0):
                c.release()
            c.advance()
        total.store(out, 64)
    k.ret()
    return k


@pytest.mark.parametrize("stages", [3, 4])
def test_fp8_gemm_with_scales_in_the_stage_checks_clean(stages):
    _clean(fp8_gemm(stages), {"map_a": {"box_bytes": LF8.nbytes},
                              "map_b": {"box_bytes": LF8.nbytes}})
