"""Audit corpus b (see tests/audit29b_clean_asm.py), FlashAttention-3-style backward pieces
for a variable-length batch: each CTA encodes its sequence's Q and dO tensor maps on the
device (a template copied into shared memory, tensormap.replace of the base and the row
count, tensormap.cp_fenceproxy into the CTA's two 128-byte slots of a global workspace, an
inline-PTX acquire by the producer), streams Q and dO through two 2-stage operand rings into
dK / dV wgmma accumulators, and adds each Q block's dQ partial into a global f32 buffer with
red.global.add."""

from __future__ import annotations

from ptxdsl import Addr, Kernel, Module, ptx, t
from ptxdsl.instructions.wgmma_desc import SmemLayout, descriptor
from tests.audit29b_clean_asm import SW, asm_wait, box

T64 = SmemLayout(t.bf16, 64, 64, "K", SW)          # a 64 x 64 bf16 tile (8 KiB)


def varlen_backward(bug: str | None = None, bulk: bool = False) -> tuple[Module, dict]:
    """dK, dV (64 x 64 each) of key block ctaid.x of sequence ctaid.y, and dQ partials.
    Warpgroup 0: warp 0 builds the two per-sequence maps (lanes 0-15 copy the templates, lane
    0 replaces base and row count, the warp copies them out with cp_fenceproxy); its lane 0
    then acquires them and produces: K once, then Q and dO block by block, each through its
    own 2-stage ring (stage mb & 1, phase (mb >> 1) & 1). Warpgroup 1 multiplies and releases
    each stage after wait_group 0, then adds its dQ block into dq_accum. `bug="acquire"`
    drops the producer's acquire of the dO map. `bulk`: FA3's dQ path instead: the partial
    goes to a shared buffer (generic stores, a proxy fence, a named barrier) and one thread
    adds it to dq_accum with cp.reduce.async.bulk .add.f32; the buffer is written again only
    after that thread's wait_group.read 0 and the barrier after it. `bug="reuse"` leaves
    that wait out."""
    k = Kernel("audit_b_varlen_bwd", reqntid=256, minnctapersm=1)
    map_k = k.tensormap_addr(k.param_tensormap("map_k"))
    tmpl = k.ld_param(k.param_ptr("templates"))            # Q's then dO's map, 256 bytes
    ws = k.ld_param(k.param_ptr("workspace"))               # 256 bytes per CTA
    cu = k.ld_param(k.param_ptr("cu_seqlens"))
    q_ptr = k.ld_param(k.param_ptr("q"))
    do_ptr = k.ld_param(k.param_ptr("d_o"))
    dq = k.ld_param(k.param_ptr("dq_accum"))
    smem = k.extern_shared("smem", align=1024)
    # K | Q ring (2) | dO ring (2) | two 128-byte maps | barriers
    q_off, do_off = T64.nbytes, 3 * T64.nbytes
    maps_off = 5 * T64.nbytes
    bars = maps_off + 256
    kbar, qfull, qempty, dfull, dempty = (bars + 8 * i for i in (0, 1, 3, 5, 7))
    tid = k.tid.x
    lane, warp = k.and_(tid, 31), k.shr(tid, 5)
    seq = k.ctaid.y
    start = k.ld(k.mad(seq, 4, cu, type=t.u32, mode="wide"), type=t.u32, space="global")
    end = k.ld(k.mad(seq, 4, k.add(cu, 4), type=t.u32, mode="wide"), type=t.u32,
               space="global")
    seqlen = k.sub(end, start)
    mblocks = k.shr(k.add(seqlen, 63), 6)
    base = k.mov(smem)
    slot = k.mad(k.mad(seq, k.nctaid.x, k.ctaid.x), 256, ws, type=t.u32, mode="wide")
    with k.if_(tid == 0):
        ptx.mbarrier_init(k, Addr(smem, kbar), 1)
        for s in range(2):
            for off, count in ((qfull, 1), (qempty, 1), (dfull, 1), (dempty, 1)):
                ptx.mbarrier_init(k, Addr(smem, off + 8 * s), count)
        ptx.fence_mbarrier_init(k, "release", "cluster")
    with k.if_(warp == 0):
        with k.if_(lane < 16):                              # 16 x 16 bytes: both templates
            words = k.ld(k.mad(lane, 16, tmpl, type=t.u32, mode="wide"), type=t.b32,
                         space="global", vec=4)
            k.st(k.mad(lane, 16, k.add(base, maps_off)), words, type=t.b32, space="shared")
        k.syncwarp()
        with k.if_(lane == 0):
            for i, ptr in enumerate((q_ptr, do_ptr)):
                smap = k.add(base, maps_off + 128 * i)
                row0 = k.mul(start, 128, type=t.u32, mode="wide")   # 64 bf16 a row
                ptx.tensormap_replace_global_address(k, "shared", smap, k.add(ptr, row0))
                ptx.tensormap_replace_global_dim(k, "shared", smap, 1, seqlen)
        k.syncwarp()
        for i in range(2):
            ptx.tensormap_cp_fenceproxy(k, "release", "gpu", k.add(slot, 128 * i),
                                        k.add(base, maps_off + 128 * i), 128)
    k.bar_sync(0)
    n0 = k.mul(k.ctaid.x, 64)
    with k.if_(warp == 0):
        with k.if_(lane == 0):
            map_q, map_do = slot, k.add(slot, 128)
            k.asm("fence.proxy.tensormap::generic.acquire.gpu [$0], 128;", ins=[map_q])
            if bug != "acquire":
                k.asm("fence.proxy.tensormap::generic.acquire.gpu [$0], 128;", ins=[map_do])
            ptx.mbarrier_arrive_expect_tx(k, "release", "cta", "shared::cta",
                                          Addr(smem, kbar), T64.nbytes, dst="_")
            ptx.cp_async_bulk_tensor(k, "shared::cluster", "global", base, map_k,
                                     (0, k.add(start, n0)), Addr(smem, kbar))
            with k.for_range(0, mblocks) as mb:
                s, ph = k.and_(mb, 1), k.and_(k.shr(mb, 1), 1)
                for tm, ring, full, empty in ((map_q, q_off, qfull, qempty),
                                              (map_do, do_off, dfull, dempty)):
                    asm_wait(k, k.mad(s, 8, k.add(base, empty)), k.xor(ph, 1))
                    fb = k.mad(s, 8, k.add(base, full))
                    ptx.mbarrier_arrive_expect_tx(k, "release", "cta", "shared::cta", fb,
                                                  T64.nbytes, dst="_")
                    ptx.cp_async_bulk_tensor(k, "shared::cluster", "global",
                                             k.mad(s, T64.nbytes, k.add(base, ring)), tm,
                                             (0, k.shl(mb, 6)), fb)
    with k.if_(k.shr(tid, 7) == 1):
        dk = k.fragment(t.f32, shape=(64, 64))
        dv = k.fragment(t.f32, shape=(64, 64))
        ptx.mbarrier_wait(k, Addr(smem, kbar), 0)
        d_k = descriptor(k, T64, base)
        with k.for_range(0, mblocks) as mb:
            s, ph = k.and_(mb, 1), k.and_(k.shr(mb, 1), 1)
            ptx.mbarrier_wait(k, k.mad(s, 8, k.add(base, qfull)), ph)
            ptx.mbarrier_wait(k, k.mad(s, 8, k.add(base, dfull)), ph)
            d_q = descriptor(k, T64, k.mad(s, T64.nbytes, k.add(base, q_off)))
            d_do = descriptor(k, T64, k.mad(s, T64.nbytes, k.add(base, do_off)))
            dqp = k.fragment(t.f32, shape=(64, 64))
            ptx.wgmma_fence(k)
            for kk in range(0, 64, 16):
                ptx.wgmma_mma_async(k, dv, d_do.k_step(k, kk), d_q.k_step(k, kk), atype="bf16")
                ptx.wgmma_mma_async(k, dk, d_q.k_step(k, kk), d_do.k_step(k, kk), atype="bf16")
                ptx.wgmma_mma_async(k, dqp, d_q.k_step(k, kk), d_k.k_step(k, kk),
                                    atype="bf16")
            ptx.wgmma_commit_group(k)
            ptx.wgmma_wait_group(k, 0)
            with k.if_(k.and_(tid, 127) == 0):
                for empty in (qempty, dempty):
                    ptx.mbarrier_arrive(k, "release", "cta", "shared::cta",
                                        k.mad(s, 8, k.add(base, empty)), dst="_")
            # this thread's first value: row warp * 16 + lane / 4, column (lane % 4) * 2
            if bulk:
                _dq_bulk(k, dqp, k.add(base, 6 * T64.nbytes), tid,
                         k.mad(k.add(start, k.shl(mb, 6)), 256, dq, type=t.u32, mode="wide"),
                         bug)
            else:
                rows = k.add(k.add(start, k.shl(mb, 6)), k.mad(k.and_(warp, 3), 16,
                                                                k.shr(lane, 2)))
                mine = k.mad(rows, 256, k.mad(k.and_(lane, 3), 8, dq, type=t.u32,
                                              mode="wide"), type=t.u32, mode="wide")
                for j, r in enumerate(dqp):                         # 64 f32 a row
                    at = (j // 2 % 2) * 8 * 256 + (j // 4) * 32 + (j % 2) * 4
                    k.red("add", Addr(mine, at), r, type=t.f32, space="global")
        if bulk:
            with k.if_(k.and_(tid, 127) == 0):
                ptx.cp_async_bulk_wait_group(k, 0)
        dkv = k.ld_param(k.param_ptr("dkv"))
        dk.store(k.mad(k.add(start, n0), 512, dkv, type=t.u32, mode="wide"), 128)
        dv.store(k.mad(k.add(start, n0), 512, k.add(dkv, 256), type=t.u32, mode="wide"), 128)
    k.ret()
    return Module([k], target="sm_90a"), {"map_k": box(T64)}


def _dq_bulk(k, dqp, buf, tid, dst, bug):
    """dQ's 64 x 64 f32 partial through shared memory into global, added by the bulk copy."""
    lead = k.and_(tid, 127) == 0
    with k.if_(lead):
        if bug != "reuse":
            ptx.cp_async_bulk_wait_group_read(k, 0)         # the last add read the buffer
    k.bar_sync(1, 128)
    lane, w = k.and_(tid, 31), k.and_(k.shr(tid, 5), 3)
    mine = k.mad(k.mad(w, 16, k.shr(lane, 2)), 256, k.mad(k.and_(lane, 3), 8, buf))
    for j, r in enumerate(dqp):
        k.st(Addr(mine, (j // 2 % 2) * 8 * 256 + (j // 4) * 32 + (j % 2) * 4), r,
             type=t.f32, space="shared")
    ptx.fence_proxy_async(k, "shared::cta")
    k.bar_sync(1, 128)
    with k.if_(lead):
        ptx.cp_reduce_async_bulk(k, "global", "shared::cta", "add", dst, buf, 64 * 64 * 4,
                                 type=t.f32)
        ptx.cp_async_bulk_commit_group(k)


def varlen_backward_bulk_dq() -> tuple[Module, dict]:
    return varlen_backward(bulk=True)
