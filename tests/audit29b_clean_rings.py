"""Audit corpus b (see tests/audit29b_clean_asm.py), rings: a non-specialized prefetch loop
(one warpgroup loads and multiplies: a prologue fills S-1 stages, the steady state refills
the stage the previous k-block read once wgmma.wait_group 1 retired it, a drain after), its
read stage advanced with selp and its phase flipped with `phase ^= (stage == S-1)`; and a
persistent warp-specialized GEMM whose producer takes tiles from a global atomic counter and
hands each tile id to the consumers through a two-slot scheduler ring in shared memory (the
words next to the tiles and barriers in one dynamic buffer)."""

from __future__ import annotations

from ptxdsl import Addr, Kernel, Module, ptx, t
from ptxdsl.instructions.wgmma_desc import descriptor
from tests.audit29b_clean_asm import A64, A128, B128, asm_wait, box, elect_one, stage_phase


def _wrap(k, s, ph, stages: int, flip: bool = True, guarded: bool = False):
    """s = s == S-1 ? 0 : s + 1, and phase ^= (s == S-1), both with selp; `guarded`: as
    CUTLASS's `++pipeline_state` compiles, s += 1, then `@p xor phase` and `@p mov s, 0`."""
    if guarded:
        k.add(s, 1, dst=s)
        with k.guard(s == stages):
            if flip:
                k.xor(ph, 1, dst=ph)
            k.mov(0, dst=s)
        return
    last = s == stages - 1
    if flip:
        k.xor(ph, k.selp(1, 0, last, type=t.u32), dst=ph)
    k.selp(0, k.add(s, 1), last, type=t.u32, dst=s)


# -- (2) non-specialized prefetch loop -----------------------------------------------------------
def prefetch_gemm(stages: int = 6, guarded: bool = False) -> tuple[Module, dict]:
    """C = A @ B^T for a 64 x 128 tile with one warpgroup: thread 0 issues the TMA loads, all
    128 threads wait on the stage's full barrier and run the wgmma. There is no empty barrier:
    a stage is refilled by the loop trip after the one that read it, once wait_group 1 has
    retired that read in every warp (the bar.sync after it)."""
    stage = A64.nbytes + B128.nbytes
    k = Kernel(f"audit_b_prefetch{stages}", reqntid=128)
    tma, tmb = (k.tensormap_addr(k.param_tensormap(n)) for n in ("map_a", "map_b"))
    c_ptr = k.ld_param(k.param_ptr("c"))
    N = k.ld_param(k.param(t.u32, "n"))
    kblocks = k.ld_param(k.param(t.u32, "kblocks"))
    smem = k.extern_shared("smem", align=1024)
    bars = stages * stage
    tid = k.tid.x
    with k.if_(tid == 0):
        for s in range(stages):
            ptx.mbarrier_init(k, Addr(smem, bars + 8 * s), 1)
        ptx.fence_mbarrier_init(k, "release", "cluster")
    k.bar_sync(0)
    base = k.mov(smem)
    m0, n0 = k.mul(k.ctaid.y, 64), k.mul(k.ctaid.x, 128)

    def load(kb, s):
        fb = k.mad(s, 8, k.add(base, bars))
        ptx.mbarrier_arrive_expect_tx(k, "release", "cta", "shared::cta", fb, stage, dst="_")
        dst = k.mad(s, stage, base)
        kc = k.mul(kb, 64)
        ptx.cp_async_bulk_tensor(k, "shared::cluster", "global", dst, tma, (kc, m0), fb)
        ptx.cp_async_bulk_tensor(k, "shared::cluster", "global", k.add(dst, A64.nbytes), tmb,
                                 (kc, n0), fb)

    with k.if_(tid == 0):                                   # prologue: stages 0 .. S-2
        for s in range(stages - 1):
            with k.if_(kblocks > s):
                load(k.mov(s, type=t.u32), k.mov(s, type=t.u32))
    acc = k.fragment(t.f32, shape=(64, 128))
    rs = k.mov(0, dst=k.reg(t.u32, "rs"))
    rph = k.mov(0, dst=k.reg(t.u32, "rph"))
    ws = k.mov(stages - 1, dst=k.reg(t.u32, "ws"))
    with k.for_range(0, kblocks) as kb:
        ptx.mbarrier_wait(k, k.mad(rs, 8, k.add(base, bars)), rph)
        src = k.mad(rs, stage, base)
        da, db = descriptor(k, A64, src), descriptor(k, B128, k.add(src, A64.nbytes))
        ptx.wgmma_fence(k)
        for kk in range(0, 64, 16):
            ptx.wgmma_mma_async(k, acc, da.k_step(k, kk), db.k_step(k, kk), atype="bf16")
        ptx.wgmma_commit_group(k)
        ptx.wgmma_wait_group(k, 1)                          # kb - 1's read has retired
        k.bar_sync(1, 128)
        ahead = k.add(kb, stages - 1)
        with k.if_(k.and_(ahead < kblocks, tid == 0)):
            load(ahead, ws)                                 # the stage kb - 1 read
        _wrap(k, rs, rph, stages, guarded=guarded)
        _wrap(k, ws, rph, stages, flip=False, guarded=guarded)
    ptx.wgmma_wait_group(k, 0)                              # drain
    acc.store(k.add(c_ptr, k.mul(k.mad(m0, N, n0), 4, type=t.u32, mode="wide")), N)
    k.ret()
    return Module([k], target="sm_90a"), {"map_a": box(A64), "map_b": box(B128)}


def prefetch_gemm6() -> tuple[Module, dict]:
    return prefetch_gemm(6)


def prefetch_gemm3() -> tuple[Module, dict]:
    return prefetch_gemm(3)


def prefetch_gemm5_guarded_wrap() -> tuple[Module, dict]:
    return prefetch_gemm(5, guarded=True)


# -- (3) persistent GEMM with an atomic tile scheduler in shared memory --------------------------
def persistent_scheduler_gemm(stages: int = 5) -> tuple[Module, dict]:
    """Persistent C = A @ B^T over 128 x 128 tiles. The producer (warp 0's elected lane) takes
    its first tile from %ctaid.x and each next one from a global atomic counter; it writes the
    tile id (or -1 to stop) into one of two scheduler words in shared memory and arrives on
    that word's full barrier, once both consumer warpgroups have released the word (its empty
    barrier, 2 arrivals). The k-block ring (5 stages) counts k-blocks across tiles: stage
    it % 5, phase (it / 5) & 1, recomputed each trip. Consumers wait on the word's full
    barrier, read it, release it, then run the tile's k-blocks and store C."""
    stage = A128.nbytes + B128.nbytes
    k = Kernel(f"audit_b_persistent{stages}", reqntid=384, minnctapersm=1)
    tma, tmb = (k.tensormap_addr(k.param_tensormap(n)) for n in ("map_a", "map_b"))
    c_ptr = k.ld_param(k.param_ptr("c"))
    counter = k.ld_param(k.param_ptr("tile_counter"))
    N = k.ld_param(k.param(t.u32, "n"))
    tiles_n = k.ld_param(k.param(t.u32, "tiles_n"))        # tiles along N
    ntiles = k.ld_param(k.param(t.u32, "ntiles"))
    kblocks = k.ld_param(k.param(t.u32, "kblocks"))
    smem = k.extern_shared("smem", align=1024)
    full_off = stages * stage
    empty_off = full_off + 8 * stages
    sfull_off = empty_off + 8 * stages                      # the scheduler's two words' barriers
    sempty_off = sfull_off + 16
    words_off = sempty_off + 16                             # the two tile-id words
    tid = k.tid.x
    with k.if_(tid == 0):
        for s in range(stages):
            ptx.mbarrier_init(k, Addr(smem, full_off + 8 * s), 1)
            ptx.mbarrier_init(k, Addr(smem, empty_off + 8 * s), 2)
        for s in range(2):
            ptx.mbarrier_init(k, Addr(smem, sfull_off + 8 * s), 1)
            ptx.mbarrier_init(k, Addr(smem, sempty_off + 8 * s), 2)
        ptx.fence_mbarrier_init(k, "release", "cluster")
    k.bar_sync(0)
    base = k.mov(smem)
    wg = k.shr(tid, 7)

    def sched(n):
        ss = k.and_(n, 1)
        return (ss, k.and_(k.shr(n, 1), 1), k.mad(ss, 4, k.add(base, words_off)),
                k.mad(ss, 8, k.add(base, sfull_off)), k.mad(ss, 8, k.add(base, sempty_off)))

    with k.if_(wg == 0):
        ptx.setmaxnreg_dec(k, 40)
        with k.if_(k.shr(tid, 5) == 0):
            with k.if_(elect_one(k) == 1):
                it = k.mov(0, dst=k.reg(t.u32, "pit"))
                n = k.mov(0, dst=k.reg(t.u32, "pn"))
                tile = k.mov(k.ctaid.x, dst=k.reg(t.u32, "ptile"))
                with k.loop():
                    _ss, sph, word, sfull, sempty = sched(n)
                    ptx.mbarrier_wait(k, sempty, k.xor(sph, 1))
                    done = tile >= ntiles
                    k.st(word, k.selp(0xFFFFFFFF, tile, done, type=t.u32), space="shared")
                    ptx.mbarrier_arrive(k, "release", "cta", "shared::cta", sfull, dst="_")
                    k.break_(when=done)
                    m0 = k.mul(k.div(tile, tiles_n), 128)
                    n0 = k.mul(k.rem(tile, tiles_n), 128)
                    with k.for_range(0, kblocks) as kb:
                        s, ph = stage_phase(k, it, stages)
                        asm_wait(k, k.mad(s, 8, k.add(base, empty_off)), k.xor(ph, 1))
                        fb = k.mad(s, 8, k.add(base, full_off))
                        ptx.mbarrier_arrive_expect_tx(k, "release", "cta", "shared::cta", fb,
                                                      stage, dst="_")
                        dst = k.mad(s, stage, base)
                        kc = k.mul(kb, 64)
                        ptx.cp_async_bulk_tensor(k, "shared::cluster", "global", dst, tma,
                                                 (kc, m0), fb)
                        ptx.cp_async_bulk_tensor(k, "shared::cluster", "global",
                                                 k.add(dst, A128.nbytes), tmb, (kc, n0), fb)
                        k.add(it, 1, dst=it)
                    nxt = k.atom("add", counter, 1, type=t.u32, space="global")
                    k.add(nxt, k.nctaid.x, dst=tile)
                    k.add(n, 1, dst=n)
    with k.else_():
        ptx.setmaxnreg_inc(k, 232)
        cw = k.sub(wg, 1)
        leader = k.and_(tid, 127) == 0
        it = k.mov(0, dst=k.reg(t.u32, "cit"))
        n = k.mov(0, dst=k.reg(t.u32, "cn"))
        with k.loop():
            _ss, sph, word, sfull, sempty = sched(n)
            ptx.mbarrier_wait(k, sfull, sph)
            tile = k.ld(word, type=t.u32, space="shared")
            k.bar_sync(1 + cw, 128)                         # every thread of mine has read it
            with k.if_(leader):
                ptx.mbarrier_arrive(k, "release", "cta", "shared::cta", sempty, dst="_")
            k.break_(when=tile == 0xFFFFFFFF)
            m0 = k.mul(k.div(tile, tiles_n), 128)
            n0 = k.mul(k.rem(tile, tiles_n), 128)
            acc = k.fragment(t.f32, shape=(64, 128)).zero()
            with k.for_range(0, kblocks):
                s, ph = stage_phase(k, it, stages)
                ptx.mbarrier_wait(k, k.mad(s, 8, k.add(base, full_off)), ph)
                src = k.mad(s, stage, base)
                da = descriptor(k, A64, k.mad(cw, A64.nbytes, src))
                db = descriptor(k, B128, k.add(src, A128.nbytes))
                ptx.wgmma_fence(k)
                for kk in range(0, 64, 16):
                    ptx.wgmma_mma_async(k, acc, da.k_step(k, kk), db.k_step(k, kk),
                                        atype="bf16")
                ptx.wgmma_commit_group(k)
                ptx.wgmma_wait_group(k, 0)
                with k.if_(leader):
                    ptx.mbarrier_arrive(k, "release", "cta", "shared::cta",
                                        k.mad(s, 8, k.add(base, empty_off)), dst="_")
                k.add(it, 1, dst=it)
            row0 = k.mad(cw, 64, m0)
            acc.store(k.add(c_ptr, k.mul(k.mad(row0, N, n0), 4, type=t.u32, mode="wide")), N)
            k.add(n, 1, dst=n)
    k.ret()
    return Module([k], target="sm_90a"), {"map_a": box(A128), "map_b": box(B128)}


# -- (4) a 1-D bulk-copy ring with run-time sizes ------------------------------------------------
def bulk_stream_ring(stages: int = 4, bug: str | None = None) -> tuple[Module, dict]:
    """Sums a float vector: warp 0's lane 0 streams it through a `stages`-deep ring of 16 KiB
    chunks with 1-D cp.async.bulk, each chunk's size (the last one shorter) computed at run
    time and announced with the same register; warps 1-4 wait on the full barrier, read the
    chunk with ld.shared and release it (one arrive per warp, elected lane 0). Stage kb % S,
    phase (kb / S) & 1. `bug="size"` announces a full chunk for the short last one."""
    chunk = 16384
    k = Kernel(f"audit_b_bulk_stream{stages}", reqntid=160)
    src = k.ld_param(k.param_ptr("x"))
    out = k.ld_param(k.param_ptr("out"))
    total = k.ld_param(k.param(t.u32, "nbytes"))             # a multiple of 16
    smem = k.extern_shared("smem", align=128)
    full_off = stages * chunk
    empty_off = full_off + 8 * stages
    tid = k.tid.x
    warp = k.shr(tid, 5)
    with k.if_(tid == 0):
        for s in range(stages):
            ptx.mbarrier_init(k, Addr(smem, full_off + 8 * s), 1)
            ptx.mbarrier_init(k, Addr(smem, empty_off + 8 * s), 4)
        ptx.fence_mbarrier_init(k, "release", "cluster")
    k.bar_sync(0)
    base = k.mov(smem)
    nchunks = k.div(k.add(total, chunk - 1), chunk)
    with k.if_(tid == 0):
        with k.for_range(0, nchunks) as kb:
            s, ph = stage_phase(k, kb, stages)
            ptx.mbarrier_wait(k, k.mad(s, 8, k.add(base, empty_off)), k.xor(ph, 1))
            off = k.mul(kb, chunk)
            size = k.min(k.sub(total, off), chunk)
            fb = k.mad(s, 8, k.add(base, full_off))
            ptx.mbarrier_arrive_expect_tx(k, "release", "cta", "shared::cta", fb,
                                          chunk if bug == "size" else size, dst="_")
            ptx.cp_async_bulk(k, "shared", "global", k.mad(s, chunk, base),
                              k.add(src, k.cvt(off, t.u64)), size, fb)
    with k.if_(warp > 0):
        part = k.mov(0.0, type=t.f32)
        me = k.sub(tid, 32)
        with k.for_range(0, nchunks) as kb:
            s, ph = stage_phase(k, kb, stages)
            ptx.mbarrier_wait(k, k.mad(s, 8, k.add(base, full_off)), ph)
            size = k.min(k.sub(total, k.mul(kb, chunk)), chunk)
            stage = k.mad(s, chunk, base)
            with k.for_range(k.shl(me, 2), size, 512) as at:
                k.add(part, k.ld(k.add(stage, at), type=t.f32, space="shared"), dst=part)
            k.syncwarp()
            with k.if_(k.and_(tid, 31) == 0):
                ptx.mbarrier_arrive(k, "release", "cta", "shared::cta",
                                    k.mad(s, 8, k.add(base, empty_off)), dst="_")
        k.red("add", out, part, type=t.f32, space="global")
    k.ret()
    return Module([k], target="sm_90a"), {}


def bulk_stream_ring4() -> tuple[Module, dict]:
    return bulk_stream_ring(4)
