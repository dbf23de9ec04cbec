"""Ring kernels of the second recall audit of issue 29 (tests/test_checker_audit29b.py),
written the way CUTLASS / ThunderKittens / FA3 write them: synchronisation in inline PTX
(`k.asm`: a labelled mbarrier.try_wait loop, elect.sync, mbarrier.arrive[.expect_tx]) mixed
with builder calls, a ring's stage and phase recomputed each trip from one packed counter
(`it % S`, `(it / S) & 1`), rings of 2, 3, 5 and 6 stages, and producer and consumer in one
warp (a prefetch loop whose prologue fills S-1 stages). Every builder takes `bug` and
returns `(kernel, line, context)` like tests/audit29_kernels.py's."""

from __future__ import annotations

import sys

from ptxdsl import Kernel, ptx, t
from ptxdsl.instructions.wgmma_desc import SmemLayout, descriptor

LAY = SmemLayout(t.bf16, 64, 64, "K", "128B")
BOX = LAY.nbytes                                  # 8 KiB: one 64x64 bf16 box
MAPS = {"ta": {"box_bytes": BOX}, "tb": {"box_bytes": BOX}}


class Plant:
    """Records the line after the call to `here()` when the mistake is planted."""

    def __init__(self, bug: bool):
        self.bug, self.at = bug, None

    def here(self) -> None:
        if self.bug:
            self.at = sys._getframe(1).f_lineno + 1


def spin(k: Kernel, bar, parity) -> None:
    """CUTLASS's ClusterBarrier::wait, as inline PTX."""
    k.asm("{\n .reg .pred P1;\n LAB_WAIT:\n"
          " mbarrier.try_wait.parity.shared::cta.b64 P1, [$0], $1;\n"
          " @P1 bra DONE;\n bra LAB_WAIT;\n DONE:\n}", ins=[bar, parity])


def elect(k: Kernel):
    (p,) = k.asm("{\n .reg .b32 %rx;\n elect.sync %rx|$0, 0xffffffff;\n}", outs=[t.pred])
    return p


def arrive_tx(k: Kernel, bar, nbytes: int) -> None:
    k.asm("mbarrier.arrive.expect_tx.shared::cta.b64 _, [$0], $1;", ins=[bar, (nbytes, t.u32)])


def arrive(k: Kernel, bar) -> None:
    k.asm("mbarrier.arrive.shared::cta.b64 _, [$0];", ins=[bar])


class Ring:
    """`stages` A|B stages and their full/empty barrier arrays, packed-counter indexed."""

    def __init__(self, k: Kernel, stages: int, empty_count: int = 1, name: str = "r"):
        self.k, self.n = k, stages
        self.tiles = k.shared_array(t.b8, stages * 2 * BOX, align=1024, name=f"{name}_tiles")
        self.full = k.shared_array(t.b64, stages, align=8, name=f"{name}_full")
        self.empty = k.shared_array(t.b64, stages, align=8, name=f"{name}_empty")
        with k.if_(k.tid.x == 0):
            for s in range(stages):
                ptx.mbarrier_init(k, self.full.at(8 * s) if hasattr(self.full, "at")
                                  else _a(self.full, 8 * s), 1)
                ptx.mbarrier_init(k, _a(self.empty, 8 * s), empty_count)
            ptx.fence_mbarrier_init(k)
        k.bar_sync(0)

    def stage(self, it, n: int | None = None):
        """(stage, phase) of trip `it`: it % S and (it / S) & 1."""
        k, n = self.k, n or self.n
        return k.rem(it, n, type=t.u32), k.and_(k.div(it, n, type=t.u32), 1)

    def bar(self, arr, s):
        k = self.k
        return k.add(k.mov(arr), k.shl(s, 3))

    def slot(self, s):
        k = self.k
        return k.add(k.mov(self.tiles), k.mul(s, 2 * BOX, type=t.u32))


def _a(sym, off: int):
    from ptxdsl import Addr
    return Addr(sym, off)


def load(k: Kernel, r: Ring, s, it, ta, tb, nbytes: int = 2 * BOX) -> None:
    fb = r.bar(r.full, s)
    arrive_tx(k, fb, nbytes)
    slot = r.slot(s)
    ptx.cp_async_bulk_tensor(k, "shared::cluster", "global", slot, ta, (0, it), fb)
    ptx.cp_async_bulk_tensor(k, "shared::cluster", "global", k.add(slot, BOX), tb, (0, it), fb)


def mma(k: Kernel, acc, slot) -> None:
    ptx.wgmma_fence(k)
    ptx.wgmma_mma_async(k, acc, descriptor(k, LAY, slot), descriptor(k, LAY, k.add(slot, BOX)),
                        1, atype="bf16")
    ptx.wgmma_commit_group(k)


def ws_gemm(stages: int, consumer, producer=None):
    """Warp-specialized: warpgroup 0's warp 0 elects (inline elect.sync) a producer lane;
    warpgroup 1 consumes with `consumer(k, ring, acc, nk)`."""
    k = Kernel("b29ws", reqntid=256)
    ta = k.tensormap_addr(k.param_tensormap("ta"))
    tb = k.tensormap_addr(k.param_tensormap("tb"))
    nk = k.ld_param(k.param(t.u32, "nk"))
    acc = k.fragment(t.f32, shape=(64, 64))
    r = Ring(k, stages)
    with k.if_(k.tid.x < 128):
        with k.if_(k.shr(k.tid.x, 5) == 0):
            with k.if_(elect(k)):
                (producer or produce)(k, r, nk, ta, tb)
    with k.else_():
        consumer(k, r, acc, nk)
    k.ret()
    return k


def produce(k: Kernel, r: Ring, nk, ta, tb, *, parity_flip: bool = True, wait: bool = True,
            nbytes: int = 2 * BOX, n: int | None = None) -> None:
    with k.for_range(0, nk) as it:
        s, ph = r.stage(it, n)
        if wait:
            spin(k, r.bar(r.empty, s), k.xor(ph, 1) if parity_flip else ph)
        load(k, r, s, it, ta, tb, nbytes)


def leader(k: Kernel):
    return k.if_(k.and_(k.tid.x, 127) == 0)


def consume(k: Kernel, r: Ring, acc, nk) -> None:
    with k.for_range(0, nk) as it:
        s, ph = r.stage(it)
        spin(k, r.bar(r.full, s), ph)
        mma(k, acc, r.slot(s))
        ptx.wgmma_wait_group(k, 0)
        with leader(k):
            arrive(k, r.bar(r.empty, s))


# -- smem read before its full wait: the wait in a helper called after the mma ----------------
def asm_read_before_wait(bug: bool):
    """5 stages; the consumer's wait (inline loop) moved after its wgmma (the mistake)."""
    pl = Plant(bug)

    def consumer(k, r, acc, nk):
        with k.for_range(0, nk) as it:
            s, ph = r.stage(it)
            if not bug:
                spin(k, r.bar(r.full, s), ph)
            pl.here()
            mma(k, acc, r.slot(s))
            if bug:
                spin(k, r.bar(r.full, s), ph)
            ptx.wgmma_wait_group(k, 0)
            with leader(k):
                arrive(k, r.bar(r.empty, s))

    return ws_gemm(5, consumer), pl.at, {"maps": MAPS}


# -- release of a stage still read by the in-flight wgmma ------------------------------------
def asm_release_in_flight(bug: bool):
    """6 stages, packed counter; after wait_group 1 the consumer arrives (inline PTX) on the
    stage it just issued (the mistake) instead of the previous one."""
    pl = Plant(bug)

    def consumer(k, r, acc, nk):
        with k.for_range(0, nk) as it:
            s, ph = r.stage(it)
            spin(k, r.bar(r.full, s), ph)
            mma(k, acc, r.slot(s))
            ptx.wgmma_wait_group(k, 1)
            if bug:
                with leader(k):
                    pl.here()
                    arrive(k, r.bar(r.empty, s))
            else:
                with k.if_(it > 0), leader(k):
                    prev, _ = r.stage(k.sub(it, 1))
                    arrive(k, r.bar(r.empty, prev))
        ptx.wgmma_wait_group(k, 0)
        if not bug:
            with leader(k):
                last, _ = r.stage(k.sub(nk, 1))
                arrive(k, r.bar(r.empty, last))

    return ws_gemm(6, consumer), pl.at, {"maps": MAPS}


# -- producer refill without its empty wait --------------------------------------------------
def asm_refill_unguarded(bug: bool):
    """3 stages; the producer's inline empty wait dropped (the mistake)."""
    pl = Plant(bug)

    def producer(k, r, nk, ta, tb):
        with k.for_range(0, nk) as it:
            s, ph = r.stage(it)
            if not bug:
                spin(k, r.bar(r.empty, s), k.xor(ph, 1))
            pl.here()
            load(k, r, s, it, ta, tb)

    return ws_gemm(3, consume, producer), pl.at, {"maps": MAPS}


# -- the producer's first empty wait at parity 0 ---------------------------------------------
def asm_first_empty_parity0(bug: bool):
    """2 stages; the producer waits empty at (it / 2) & 1 (the mistake) instead of its xor 1."""
    pl = Plant(bug)

    def producer(k, r, nk, ta, tb):
        with k.for_range(0, nk) as it:
            s, ph = r.stage(it)
            pl.here()
            spin(k, r.bar(r.empty, s), ph if bug else k.xor(ph, 1))
            load(k, r, s, it, ta, tb)

    return ws_gemm(2, consume, producer), pl.at, {"maps": MAPS}


# -- expect_tx: the inline arrive.expect_tx counts one box of two ----------------------------
def asm_expect_tx_one_box(bug: bool):
    """3 stages; the inline arrive.expect_tx announces BOX bytes while two boxes land."""
    pl = Plant(bug)

    def producer(k, r, nk, ta, tb):
        with k.for_range(0, nk) as it:
            s, ph = r.stage(it)
            spin(k, r.bar(r.empty, s), k.xor(ph, 1))
            fb = r.bar(r.full, s)
            pl.here()
            arrive_tx(k, fb, BOX if bug else 2 * BOX)
            slot = r.slot(s)
            ptx.cp_async_bulk_tensor(k, "shared::cluster", "global", slot, ta, (0, it), fb)
            ptx.cp_async_bulk_tensor(k, "shared::cluster", "global", k.add(slot, BOX), tb,
                                     (0, it), fb)

    return ws_gemm(3, consume, producer), pl.at, {"maps": MAPS}


# -- stage count: the producer wraps at 5, the consumer at 6 ---------------------------------
def asm_stage_count_5_6(bug: bool):
    """Barrier arrays of 6; the producer still computes it % 5 (the mistake)."""
    pl = Plant(bug)

    def producer(k, r, nk, ta, tb):
        with k.for_range(0, nk) as it:
            s, ph = r.stage(it, 5 if bug else 6)
            pl.here()
            spin(k, r.bar(r.empty, s), k.xor(ph, 1))
            load(k, r, s, it, ta, tb)

    return ws_gemm(6, consume, producer), pl.at, {"maps": MAPS}


def elect_one_sync(k: Kernel):
    """CUTLASS's cute::elect_one_sync() verbatim: the lane in $0, 1 in $1 where elected."""
    flag = k.mov(0, type=t.u32)
    k.asm("{\n .reg .b32 %rx;\n .reg .pred %px;\n elect.sync %rx|%px, $2;\n"
          " @%px mov.s32 $1, 1;\n mov.u32 $0, %rx;\n}", outs=[t.u32, flag],
          ins=[(0xFFFFFFFF, t.u32)])
    return k.setp("ne", flag, 0, type=t.u32)


def tx_split_barrier(bug: bool):
    """3 stages; the producer elected by CUTLASS's elect_one_sync announces the bytes with
    ClusterTransactionBarrier's split form (mbarrier.expect_tx, then a plain arrive), the
    expect counting one box of the two (the mistake)."""
    pl = Plant(bug)

    def producer(k, r, nk, ta, tb):
        with k.for_range(0, nk) as it:
            s, ph = r.stage(it)
            spin(k, r.bar(r.empty, s), k.xor(ph, 1))
            fb = r.bar(r.full, s)
            pl.here()
            k.asm("mbarrier.expect_tx.relaxed.cta.shared::cta.b64 [$0], $1;",
                  ins=[fb, (BOX if bug else 2 * BOX, t.u32)])
            arrive(k, fb)
            slot = r.slot(s)
            ptx.cp_async_bulk_tensor(k, "shared::cluster", "global", slot, ta, (0, it), fb)
            ptx.cp_async_bulk_tensor(k, "shared::cluster", "global", k.add(slot, BOX), tb,
                                     (0, it), fb)

    k = Kernel("b29tx", reqntid=256)
    ta = k.tensormap_addr(k.param_tensormap("ta"))
    tb = k.tensormap_addr(k.param_tensormap("tb"))
    nk = k.ld_param(k.param(t.u32, "nk"))
    acc = k.fragment(t.f32, shape=(64, 64))
    r = Ring(k, 3)
    with k.if_(k.tid.x < 128):
        with k.if_(k.shr(k.tid.x, 5) == 0):
            with k.if_(elect_one_sync(k)):
                producer(k, r, nk, ta, tb)
    with k.else_():
        consume(k, r, acc, nk)
    k.ret()
    return k, pl.at, {"maps": MAPS}


class Carried:
    """A stage and phase carried across trips: after each trip `phase ^= (stage == S-1)`
    (a selp'd 1 xor'd in) and `stage = stage == S-1 ? 0 : stage + 1`."""

    def __init__(self, k: Kernel, n: int, phase: int):
        self.k, self.n = k, n
        self.stage, self.phase = k.mov(0, type=t.u32), k.mov(phase, type=t.u32)

    def step(self) -> None:
        k = self.k
        last = k.setp("eq", self.stage, self.n - 1, type=t.u32)
        k.xor(self.phase, k.selp(1, 0, last, type=t.u32), dst=self.phase)
        k.selp(0, k.add(self.stage, 1), last, type=t.u32, dst=self.stage)


def carried_first_empty_parity(bug: bool):
    """6 stages; the producer's carried phase starts at 0 (the mistake) instead of 1."""
    pl = Plant(bug)

    def producer(k, r, nk, ta, tb):
        c = Carried(k, 6, 0 if bug else 1)
        with k.for_range(0, nk) as it:
            pl.here()
            spin(k, r.bar(r.empty, c.stage), c.phase)
            load(k, r, c.stage, it, ta, tb)
            c.step()

    return ws_gemm(6, consume, producer), pl.at, {"maps": MAPS}


def carried_release_in_flight(bug: bool):
    """2 stages, carried stage; after wait_group 1 the consumer hands back `prev` (the stage
    of the trip before, kept in a register) from the second trip; the mistake hands back the
    stage just issued."""
    pl = Plant(bug)

    def consumer(k, r, acc, nk):
        c = Carried(k, 2, 0)
        prev = k.mov(0, type=t.u32)
        with k.for_range(0, nk) as it:
            spin(k, r.bar(r.full, c.stage), c.phase)
            mma(k, acc, r.slot(c.stage))
            ptx.wgmma_wait_group(k, 1)
            if bug:
                with leader(k):
                    pl.here()
                    arrive(k, r.bar(r.empty, c.stage))
            else:
                with k.if_(it > 0), leader(k):
                    arrive(k, r.bar(r.empty, prev))
            k.mov(c.stage, dst=prev)
            c.step()
        ptx.wgmma_wait_group(k, 0)
        if not bug:
            with leader(k):
                arrive(k, r.bar(r.empty, prev))

    return ws_gemm(2, consumer), pl.at, {"maps": MAPS}
