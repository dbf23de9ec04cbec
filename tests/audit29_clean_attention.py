"""Audit corpus (see tests/audit29_clean_kernels.py), attention and epilogues: a
FlashAttention-3-style forward pass (K and V rings in one dynamic buffer, QK^T of block j + 1
issued before the softmax of block j, P @ V from registers; O staged in Q's tile for a TMA
store, or stored directly) and persistent GEMMs whose epilogues TMA-store from staging
buffers (a per-warpgroup double buffer picked by tile parity; TmaStoreEpilogue with a dynamic
tile scheduler)."""

from __future__ import annotations

from ptxdsl import Addr, Kernel, Module, ptx, t
from ptxdsl.epilogue import STAGING_BYTES, TmaStoreEpilogue
from ptxdsl.instructions.wgmma_desc import SmemLayout, descriptor
from ptxdsl.pipeline import MbarrierRing
from tests.audit29_clean_kernels import A64, A128, B128, K_BF16, SW, _box

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


def fa3_forward(bug: str | None = None, o_in_q: bool = False) -> tuple[Module, dict]:
    """O = softmax(Q K^T / sqrt(d)) V for 128 query rows per CTA (64 per consumer warpgroup),
    head dim 64, `n_kv` key/value blocks of 64. One dynamic buffer holds Q, the K ring (2
    stages), the V ring (2 stages) and then every barrier; both rings are written by hand
    (stage j & 1, parity (j >> 1) & 1). A consumer issues S_next = Q K_{j+1}^T, then runs the
    softmax of S_j in registers while that wgmma runs, then O += P_j V_j with P_j in registers
    (RS A operand); wait_group 1 after each issue retires the older group."""
    k = Kernel("audit_fa3_fwd_o_in_q" if o_in_q else "audit_fa3_fwd", reqntid=384,
               minnctapersm=1)
    tq, tk, tv = (k.tensormap_addr(k.param_tensormap(n)) for n in ("map_q", "map_k", "map_v"))
    to = k.tensormap_addr(k.param_tensormap("map_o")) if o_in_q else None
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
        if o_in_q:
            q_mine = k.add(base, k.add(k.mul(cw, TILE), q_off))   # read only by our wgmmas,
            _stage_tile(k, o.to_packed(t.bf16), q_mine, k.and_(tid, 127))   # all retired
            ptx.fence_proxy_async(k, "shared::cta")
            k.bar_sync(k.add(cw, 1), 128)
            with k.if_(leader):
                ptx.cp_async_bulk_tensor(k, "global", "shared::cta", to, (0, row0), q_mine)
                ptx.cp_async_bulk_commit_group(k)
                ptx.cp_async_bulk_wait_group_read(k, 0)
        else:
            o.store(k.add(k.ld_param(o_ptr), k.mul(row0, 64 * 4, type=t.u32, mode="wide")), 64)
    k.ret()
    maps = {"map_q": {"box_bytes": 2 * TILE, "swizzle": SW}, "map_k": _box(LQK),
            "map_v": _box(LV), "map_o": {"box_bytes": TILE, "swizzle": SW}}
    return Module([k], target="sm_90a"), maps


def fa3_forward_o_in_q() -> tuple[Module, dict]:
    return fa3_forward(o_in_q=True)


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
