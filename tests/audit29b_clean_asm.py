"""Second, independent precision audit of the hazard checker (issue 29): correct kernels in
spellings the first audit's corpus (tests/audit29_clean_*.py) does not use. This module:
warp-specialized GEMMs whose synchronisation is inline PTX as CUTLASS, ThunderKittens and
FlashAttention-3 write it (elect.sync, try_wait loops with their own labels, arrive.expect_tx,
the cluster barrier pair) mixed with builder calls, on rings of 2, 3, 5 and 6 stages whose
stage and phase are recomputed from one counter each trip; and a non-specialized prefetch
loop (prologue fills S-1 stages, steady state, drain). Each builder returns (Module, maps).
tests/test_checker_audit29b_clean.py checks that each has no finding and assembles."""

from __future__ import annotations

from ptxdsl import Addr, Kernel, Module, ptx, t
from ptxdsl.instructions.wgmma_desc import SmemLayout, descriptor

SW = "128B"
A64 = SmemLayout(t.bf16, 64, 64, "K", SW)
A128 = SmemLayout(t.bf16, 128, 64, "K", SW)
B128 = SmemLayout(t.bf16, 128, 64, "K", SW)


def box(layout: SmemLayout, swizzle: str = SW) -> dict:
    return {"box_bytes": layout.nbytes, "swizzle": swizzle}


def elect_one(k):
    """ThunderKittens/CUTLASS `elect_one_sync()`: elect.sync in inline PTX, as a u32 flag."""
    (flag,) = k.asm("{\n .reg .pred E;\n .reg .b32 L;\n elect.sync L|E, 0xffffffff;\n"
                    " selp.u32 $0, 1, 0, E;\n}", outs=[t.u32])
    return flag


def asm_wait(k, bar, parity):
    """FA3's wait: a try_wait.parity with a suspend-time hint, retried from a local label."""
    k.asm("{\n .reg .pred done;\n LAB_WAIT:\n"
          " mbarrier.try_wait.parity.shared::cta.b64 done, [$0], $1, 0x989680;\n"
          " @done bra DONE;\n bra LAB_WAIT;\n DONE:\n}", ins=[bar, parity])


def loop_wait(k, bar, parity, once: bool = False, selp: bool = False):
    """CUTLASS's `while (!barrier.try_wait(phase))`: an inline try_wait returning its
    predicate (`selp`: as a 0/1 u32, ClusterBarrier::try_wait's spelling), the retry loop
    in the kernel's own control flow; `once`: no loop (a bug)."""
    def attempt():
        if selp:
            (ok,) = k.asm("{\n .reg .pred P1;\n"
                          " mbarrier.try_wait.parity.shared::cta.b64 P1, [$1], $2;\n"
                          " selp.b32 $0, 1, 0, P1;\n}", outs=[t.u32], ins=[bar, parity])
            return ok != 0
        (ok,) = k.asm("mbarrier.try_wait.parity.shared::cta.b64 $0, [$1], $2;", outs=[t.pred],
                      ins=[bar, parity])
        return ok

    if once:
        attempt()
        return
    with k.loop():
        k.break_(when=attempt())


def asm_arrive_expect(k, bar, nbytes: int, state: bool = False):
    """`state`: the arrival state goes to an output register (older CUTLASS) instead of _."""
    if state:
        k.asm("mbarrier.arrive.expect_tx.shared::cta.b64 $0, [$1], $2;", outs=[t.b64],
              ins=[bar, nbytes])
        return
    k.asm("mbarrier.arrive.expect_tx.shared::cta.b64 _, [$0], $1;", ins=[bar, nbytes])


def asm_arrive(k, bar, lane0: bool = False):
    """`lane0`: only lane 0 of the warp arrives, the others branch around it in the
    template."""
    if lane0:
        k.asm("{\n .reg .pred p;\n setp.ne.u32 p, $1, 0;\n @p bra SKIP;\n"
              " mbarrier.arrive.release.cta.shared::cta.b64 _, [$0];\n SKIP:\n}",
              ins=[bar, k.and_(k.tid.x, 31)])
        return
    k.asm("mbarrier.arrive.release.cta.shared::cta.b64 _, [$0];", ins=[bar])


def wg_arrive(k):
    """CUTLASS's warpgroup_arrive / warpgroup_commit_batch / warpgroup_wait<N>, inline."""
    k.asm("wgmma.fence.sync.aligned;")


def wg_commit(k):
    k.asm("wgmma.commit_group.sync.aligned;")


def wg_wait(k, n: int):
    k.asm("wgmma.wait_group.sync.aligned $0;", ins=[n])


def stage_phase(k, it, stages: int):
    """One counter, recomputed every trip: stage it % S, phase (it / S) & 1."""
    return k.rem(it, stages), k.and_(k.div(it, stages), 1)


# -- (1) warp-specialized GEMM, synchronisation in inline PTX ------------------------------------
def asm_ws_gemm(stages: int = 3, bug: str | None = None, bits: bool = False,
                asm_init: bool = False, kernel_loop: str | None = None
                ) -> tuple[Module, dict]:
    """C = A @ B^T, a 128 x 128 tile per CTA; warpgroup 0 produces (its elected lane of warp 0
    waits with an inline try_wait loop, announces the stage's bytes with an inline
    arrive.expect_tx, issues the TMA loads through the builders); warpgroups 1 and 2 wait
    with the same loop, multiply, and after wgmma.wait_group 0 every thread arrives on the
    stage's empty barrier (count 256) in inline PTX; the wgmma fence, commit and wait are
    inline PTX too. Stage and phase come from the k-block
    counter each trip (kb % S, (kb / S) & 1). Barriers are initialised after an inline
    elect.sync and the kernel ends with an inline cluster barrier (a 2-CTA cluster along y
    whose CTAs do not share data but launch together). `bug="bytes"` announces A's bytes
    only, "lanes" has every lane of warp 0 produce (no elect), "count" initialises the empty
    barriers to 2 arrivals (one per consumer warpgroup) while every consumer thread arrives,
    "wait1" releases the stage after wgmma.wait_group 1 (its wgmma may still read it).
    `bits`: the consumers keep ThunderKittens' phase bit vector instead (parity of stage s is
    bit s, flipped after each wait on it). `asm_init`: the barriers are initialised in inline
    PTX (and the producer's arrive keeps its state in a register). `kernel_loop` ("pred" or
    "selp"): the consumers' waits retry in the kernel's own loop (`loop_wait`; `bug="once"`:
    no loop); with "selp" lane 0 of each consumer warp releases (empty barriers count 8)."""
    stage = A128.nbytes + B128.nbytes
    k = Kernel(f"audit_b_asm_ws_gemm{stages}", reqntid=384, minnctapersm=1,
               reqnctapercluster=(1, 2, 1))
    tma, tmb = (k.tensormap_addr(k.param_tensormap(n)) for n in ("map_a", "map_b"))
    c_ptr = k.ld_param(k.param_ptr("c"))
    N = k.ld_param(k.param(t.u32, "n"))
    kblocks = k.ld_param(k.param(t.u32, "kblocks"))
    smem = k.extern_shared("smem", align=1024)
    full_off = stages * stage
    empty_off = full_off + 8 * stages
    tid = k.tid.x
    warp = k.shr(tid, 5)
    with k.if_(warp == 0):
        with k.if_(elect_one(k) == 1):
            for s in range(stages):
                empty = 2 if bug == "count" else 8 if kernel_loop == "selp" else 256
                for off, count in ((full_off, 1), (empty_off, empty)):
                    if asm_init:    # CUTLASS's ClusterBarrier::init
                        k.asm("mbarrier.init.shared::cta.b64 [$0], $1;",
                              ins=[k.add(k.mov(smem), off + 8 * s), (count, t.u32)])
                    else:
                        ptx.mbarrier_init(k, Addr(smem, off + 8 * s), count)
            k.asm("fence.mbarrier_init.release.cluster;")
    k.bar_sync(0)
    base = k.mov(smem)
    fulls, empties = k.add(base, full_off), k.add(base, empty_off)
    m0, n0 = k.mul(k.ctaid.y, 128), k.mul(k.ctaid.x, 128)
    wg = k.shr(tid, 7)
    with k.if_(wg == 0):
        ptx.setmaxnreg_dec(k, 40)
        with k.if_(warp == 0):
            with k.if_(elect_one(k) == 1 if bug != "lanes" else k.shr(tid, 5) == 0):
                with k.for_range(0, kblocks) as kb:
                    s, ph = stage_phase(k, kb, stages)
                    asm_wait(k, k.mad(s, 8, empties), k.xor(ph, 1))
                    fb = k.mad(s, 8, fulls)
                    asm_arrive_expect(k, fb, A128.nbytes if bug == "bytes" else stage,
                                      state=asm_init)
                    dst = k.mad(s, stage, base)
                    kc = k.shl(kb, 6)
                    ptx.cp_async_bulk_tensor(k, "shared::cluster", "global", dst, tma,
                                             (kc, m0), fb)
                    ptx.cp_async_bulk_tensor(k, "shared::cluster", "global",
                                             k.add(dst, A128.nbytes), tmb, (kc, n0), fb)
    with k.else_():
        ptx.setmaxnreg_inc(k, 232)
        cw = k.sub(wg, 1)
        acc = k.fragment(t.f32, shape=(64, 128))
        phasebits = k.mov(0, dst=k.reg(t.u32, "phasebits"))
        with k.for_range(0, kblocks) as kb:
            s, ph = stage_phase(k, kb, stages)
            if bits:
                ph = k.and_(k.shr(phasebits, s), 1)
                asm_wait(k, k.mad(s, 8, fulls), ph)
                k.xor(phasebits, k.shl(k.mov(1, type=t.u32), s), dst=phasebits)
            elif kernel_loop:
                loop_wait(k, k.mad(s, 8, fulls), ph, once=bug == "once",
                          selp=kernel_loop == "selp")
            else:
                asm_wait(k, k.mad(s, 8, fulls), ph)
            src = k.mad(s, stage, base)
            da = descriptor(k, A64, k.mad(cw, A64.nbytes, src))
            db = descriptor(k, B128, k.add(src, A128.nbytes))
            wg_arrive(k)
            for kk in range(0, 64, 16):
                ptx.wgmma_mma_async(k, acc, da.k_step(k, kk), db.k_step(k, kk), atype="bf16")
            wg_commit(k)
            wg_wait(k, 1 if bug == "wait1" else 0)
            asm_arrive(k, k.mad(s, 8, empties), lane0=kernel_loop == "selp")
        row0 = k.mad(cw, 64, m0)
        acc.store(k.add(c_ptr, k.mul(k.mad(row0, N, n0), 4, type=t.u32, mode="wide")), N)
    k.asm("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;")
    k.ret()
    return Module([k], target="sm_90a"), {"map_a": box(A128), "map_b": box(B128)}


def asm_ws_gemm2() -> tuple[Module, dict]:
    return asm_ws_gemm(2)


def asm_ws_gemm5() -> tuple[Module, dict]:
    return asm_ws_gemm(5)


def asm_ws_gemm6_phasebits() -> tuple[Module, dict]:
    return asm_ws_gemm(6, bits=True)


def asm_ws_gemm5_asm_init() -> tuple[Module, dict]:
    return asm_ws_gemm(5, asm_init=True)


def asm_ws_gemm3_kernel_loop() -> tuple[Module, dict]:
    return asm_ws_gemm(3, kernel_loop="pred")


def asm_ws_gemm2_kernel_loop_selp() -> tuple[Module, dict]:
    return asm_ws_gemm(2, kernel_loop="selp")
