"""Kernels of an independent recall audit of issue 29's classes (tests/test_checker_audit29.py),
written apart from the issue-29 tests: other stage counts (2/3/4), other thread layouts (an
elected producer lane in warp 0, two consumer warpgroups), selp-advanced stage registers by
hand, 4-CTA clusters, helper functions and run-time indices. Every builder takes `bug` (plant
the mistake, else build the corrected twin) and returns `(kernel_or_module, line, context)`:
`line` is the Python line the finding must name (None for a twin), `context` the keyword
arguments of check_kernel/check_module.

This module holds the shared skeletons (a warp-specialized GEMM, a selp stage stepper) and
the ring kernels (classes C3, C5, C6); tests/audit29_attention.py the K/V ring kernels (C4,
C3 in FlashAttention-3 style), tests/audit29_cluster.py the cluster kernels (C1, C2),
tests/audit29_values.py the %ntid, ragged-tail and tensor-map workspace kernels (C7-C10)."""

from __future__ import annotations

import sys
from typing import Any

from ptxdsl import Addr, Kernel, ptx, t
from ptxdsl.instructions.wgmma_desc import SmemLayout, descriptor
from ptxdsl.operands import Symbol
from ptxdsl.pipeline import MbarrierRing

LAY = SmemLayout(t.f16, 64, 64, "K", "128B")    # one 8 KiB operand tile
TILE = LAY.nbytes
MAPS = {"ma": {"box_bytes": TILE}, "mb": {"box_bytes": TILE}}


def nxt() -> int:
    """The caller's next line."""
    return sys._getframe(1).f_lineno + 1


class Line:
    """Collects the line of the planted statement (only when `bug`)."""

    def __init__(self, bug: bool):
        self.bug, self.at = bug, None

    def mark(self) -> None:
        if self.bug:
            self.at = sys._getframe(1).f_lineno + 1


# -- a warp-specialized GEMM skeleton: warp 0's elected lane loads, warpgroups 1.. consume -------
class Gemm:
    """`stages` stages of A|B tiles (2 * TILE each) in `tiles`; the producer (elect.sync in
    warp 0) waits on empty, announces, loads A and B. `ring`: an MbarrierRing (style "ring")
    or the barrier arrays by hand ("hand": the producer walks a stage register advanced with
    selp, the phase flipped on the wrap). `consumers` warpgroups follow warpgroup 0; each
    releases the stage from its first thread, so empty counts `consumers`."""

    def __init__(self, style: str, stages: int, consumer, *, consumers: int = 1,
                 producer_phase: int = 1, producer_stages: int | None = None,
                 dyn: bool = False, counter_parity: bool = False):
        self.stages, self.counter_parity = stages, counter_parity
        k = self.k = Kernel("audit", reqntid=128 * (consumers + 1))
        self.ma = k.tensormap_addr(k.param_tensormap("ma"))
        self.mb = k.tensormap_addr(k.param_tensormap("mb"))
        self.nk = k.ld_param(k.param(t.u32, "nk"))
        self.acc = k.fragment(t.f32, shape=(64, 64))
        if dyn:
            self.dyn = k.extern_shared("smem", align=1024)
        else:
            self.tiles = k.shared_array(t.b8, stages * 2 * TILE, align=1024, name="tiles")
        self.ring: MbarrierRing | None = None
        if style == "ring":
            self.ring = MbarrierRing(k, stages, empty_count=consumers, name="pipe")
            self.ring.init()
            self.full_base, self.empty_base = self.ring.full_base, self.ring.empty_base
        else:
            full = k.shared_array(t.b64, stages, align=8, name="fullb")
            empty = k.shared_array(t.b64, stages, align=8, name="emptyb")
            with k.if_(k.tid.x == 0):
                for s in range(stages):
                    ptx.mbarrier_init(k, Addr(full, 8 * s), 1)
                    ptx.mbarrier_init(k, Addr(empty, 8 * s), consumers)
                ptx.fence_mbarrier_init(k)
            k.bar_sync(0)
            self.full_base, self.empty_base = k.mov(full), k.mov(empty)
        wg = k.shr(k.tid.x, 7)
        self.result: Any = None
        with k.if_(wg == 0):
            with k.if_(k.shr(k.tid.x, 5) == 0):
                with k.if_(k.elect_sync()):
                    self.produce(producer_stages or stages, producer_phase)
        with k.else_():
            self.result = consumer(self)
        k.ret()

    def base(self):
        return self.tiles if not hasattr(self, "dyn") else self.dyn

    def stepper(self, n: int | None = None, phase: int = 0):
        return Stepper(self.k, n or self.stages, phase)

    def produce(self, n: int, phase: int) -> None:
        k = self.k
        st = self.stepper(n, phase)
        with k.for_range(0, self.nk) as kb:
            ph = st.ph
            if self.counter_parity:      # (kb / n) & 1, xor 1 when the producer starts at 1
                ph = k.and_(k.div(kb, n, type=t.u32), 1)
                ph = k.xor(ph, 1) if phase else ph
            self.wait_line = nxt()
            ptx.mbarrier_wait(k, st.bar(self.empty_base), ph)
            fb = st.bar(self.full_base)
            ptx.mbarrier_arrive_expect_tx(k, "release", "cta", "shared::cta", fb, 2 * TILE,
                                          dst="_")
            slot = st.slot(self.base(), 2 * TILE)
            ptx.cp_async_bulk_tensor(k, "shared::cluster", "global", slot, self.ma, (0, kb), fb)
            ptx.cp_async_bulk_tensor(k, "shared::cluster", "global", k.add(slot, TILE),
                                     self.mb, (0, kb), fb)
            st.advance()

    def mma(self, slot, scale: int = 1) -> None:
        k = self.k
        ptx.wgmma_fence(k)
        ptx.wgmma_mma_async(k, self.acc, descriptor(k, LAY, slot),
                            descriptor(k, LAY, k.add(slot, TILE)), scale, atype="f16")
        ptx.wgmma_commit_group(k)

    def leader(self):
        """The first thread of this warpgroup (the one that releases)."""
        k = self.k
        return k.if_(k.and_(k.tid.x, 127) == 0)


class Stepper:
    """A hand-written stage/phase pair: `s` advanced by selp (s + 1 == n ? 0 : s + 1), the
    phase flipped by an xor with a selp'd 1 on the wrap."""

    def __init__(self, k: Kernel, n: int, phase: int):
        self.k, self.n = k, n
        self.s = k.mov(0, type=t.u32)
        self.ph = k.mov(phase, type=t.u32)

    def bar(self, base):
        return self.k.add(base, self.k.shl(self.s, 3))

    def slot(self, base, stride: int):
        k = self.k
        return k.add(k.mov(base) if isinstance(base, Symbol) else base,
                     k.mul(self.s, stride, type=t.u32))

    def advance(self) -> None:
        k = self.k
        s1 = k.add(self.s, 1)
        w = k.setp("eq", s1, self.n, type=t.u32)
        k.selp(0, s1, w, type=t.u32, dst=self.s)
        k.xor(self.ph, k.selp(1, 0, w, type=t.u32), dst=self.ph)


# -- C3a: the stage just issued released after wgmma.wait_group 1 --------------------------------
def release_issued_two_wg(bug: bool):
    """MbarrierRing of 3 stages, two consumer warpgroups reading each stage (empty counts 2).
    The mistake: wait_group 1 then release the stage just issued. Twin: wait_group 0 first."""
    ln = Line(bug)

    def consumer(g: Gemm):
        k = g.k
        c = g.ring.consumer()
        with k.for_range(0, g.nk):
            c.wait_full()
            g.mma(c.slot(g.tiles, 2 * TILE))
            ptx.wgmma_wait_group(k, 1 if bug else 0)
            with g.leader():
                ln.mark()
                c.release()
            c.advance()
        ptx.wgmma_wait_group(k, 0)

    g = Gemm("ring", 3, consumer, consumers=2)
    return g.k, ln.at, {"maps": MAPS}


def _retire(g: Gemm, st: Stepper, kb, ln: Line, bug: bool) -> None:
    """A helper: hand back a stage after wait_group 1. The right stage is the previous one
    (s + 1 mod 2 on a 2-stage ring), from the second trip; the mistake releases `s`."""
    k = g.k
    ptx.wgmma_wait_group(k, 1)
    if bug:
        with g.leader():
            ln.mark()
            ptx.mbarrier_arrive(k, st.bar(g.empty_base), dst="_")
        return
    with k.if_(kb > 0), g.leader():
        prev = k.add(g.empty_base, k.shl(k.xor(st.s, 1), 3))
        ptx.mbarrier_arrive(k, prev, dst="_")


def release_issued_selp(bug: bool):
    """By hand, 2 stages, a selp-advanced stage register; the release in a helper function."""
    ln = Line(bug)

    def consumer(g: Gemm):
        k = g.k
        st = g.stepper()
        with k.for_range(0, g.nk) as kb:
            ptx.mbarrier_wait(k, st.bar(g.full_base), st.ph)
            g.mma(st.slot(g.tiles, 2 * TILE))
            _retire(g, st, kb, ln, bug)
            st.advance()
        ptx.wgmma_wait_group(k, 0)
        if not bug:          # the last stage, after the loop
            with g.leader():
                prev = k.add(g.empty_base, k.shl(k.xor(st.s, 1), 3))
                ptx.mbarrier_arrive(k, prev, dst="_")

    g = Gemm("hand", 2, consumer)
    return g.k, ln.at, {"maps": MAPS}


# -- C3b: a pipelined read of stage i+1 before its wait -------------------------------------------
def next_read_ldmatrix(bug: bool):
    """MbarrierRing of 2 stages, a rotated consumer loop: stage 0 is waited and read (ldmatrix)
    before the loop; each trip advances and reads the next stage. The mistake: ldmatrix of the
    next stage, then its wait. A second view releases the stage read (ldmatrix is synchronous)."""
    ln = Line(bug)

    def consumer(g: Gemm):
        k = g.k
        rd, fr = g.ring.consumer(), g.ring.consumer()
        lane = k.shl(k.and_(k.tid.x, 31), 4)
        rd.wait_full()
        k.ldmatrix(k.add(rd.slot(g.tiles, 2 * TILE), lane), 4)
        with k.for_range(1, g.nk):
            with g.leader():
                fr.release()
            fr.advance()
            rd.advance()
            if not bug:
                rd.wait_full()
            ln.mark()
            k.ldmatrix(k.add(rd.slot(g.tiles, 2 * TILE), lane), 4)
            if bug:
                rd.wait_full()
        with g.leader():
            fr.release()

    g = Gemm("ring", 2, consumer)
    return g.k, ln.at, {"maps": MAPS}


def next_read_wgmma_selp(bug: bool):
    """By hand, 3 stages, selp-advanced: the wgmma of the next stage issued before its wait
    (the mistake) while the previous one runs; the previous stage released after wait_group 1
    by a second, trailing stepper (peeled first trip)."""
    ln = Line(bug)

    def consumer(g: Gemm):
        k = g.k
        rd, fr = g.stepper(), g.stepper()
        ptx.mbarrier_wait(k, rd.bar(g.full_base), rd.ph)
        g.mma(rd.slot(g.tiles, 2 * TILE), scale=0)
        rd.advance()
        with k.for_range(1, g.nk):
            if not bug:
                ptx.mbarrier_wait(k, rd.bar(g.full_base), rd.ph)
            slot = rd.slot(g.tiles, 2 * TILE)
            ln.mark()
            g.mma(slot)
            if bug:
                ptx.mbarrier_wait(k, rd.bar(g.full_base), rd.ph)
            ptx.wgmma_wait_group(k, 1)
            with g.leader():
                ptx.mbarrier_arrive(k, fr.bar(g.empty_base), dst="_")
            fr.advance()
            rd.advance()
        ptx.wgmma_wait_group(k, 0)
        with g.leader():
            ptx.mbarrier_arrive(k, fr.bar(g.empty_base), dst="_")

    g = Gemm("hand", 3, consumer)
    return g.k, ln.at, {"maps": MAPS}


# -- C5: producer and consumer count the stages differently --------------------------------------
def stage_count_ring_vs_selp(bug: bool):
    """A 4-stage MbarrierRing the consumer walks with its view; the producer's stage register
    (selp-advanced, by hand) still wraps at 3 after a half-finished change (the mistake)."""
    def consumer(g: Gemm):
        k = g.k
        c = g.ring.consumer()
        with k.for_range(0, g.nk):
            c.wait_full()
            g.mma(c.slot(g.tiles, 2 * TILE))
            ptx.wgmma_wait_group(k, 0)
            with g.leader():
                c.release()
            c.advance()

    g = Gemm("ring", 4, consumer, producer_stages=3 if bug else 4)
    return g.k, g.wait_line if bug else None, {"maps": MAPS}


def stage_count_mod_vs_and(bug: bool):
    """By hand, barrier arrays of 3: the producer indexes kb % 3 (through its selp stepper of
    3), the consumer still `kb & 1` from when the ring had 2 stages (the mistake)."""
    ln = Line(bug)

    def consumer(g: Gemm):
        k = g.k
        with k.for_range(0, g.nk) as kb:
            if bug:
                s = k.and_(kb, 1)
                ph = k.and_(k.shr(kb, 1), 1)
            else:
                s = k.rem(kb, 3, type=t.u32)
                ph = k.and_(k.div(kb, 3, type=t.u32), 1)
            ln.mark()     # the counter's first use
            ptx.mbarrier_wait(k, k.add(g.full_base, k.shl(s, 3)), ph)
            g.mma(k.add(k.mov(g.tiles), k.mul(s, 2 * TILE, type=t.u32)))
            ptx.wgmma_wait_group(k, 0)
            with g.leader():
                ptx.mbarrier_arrive(k, k.add(g.empty_base, k.shl(s, 3)), dst="_")

    g = Gemm("hand", 3, consumer)
    return g.k, ln.at, {"maps": MAPS}


# -- C6: the producer's first empty-wait at parity 0, with a tail release ------------------------
def _peeled_consumer(g: Gemm) -> None:
    """A consumer that peels its first wgmma, releases the previous stage after wait_group 1
    in the loop, and the last stage after it (the tail release)."""
    k = g.k
    if g.ring is not None:
        rd, fr = g.ring.consumer(), g.ring.consumer()

        def wait():
            rd.wait_full()

        def slot():
            return rd.slot(g.tiles, 2 * TILE)

        def release():
            fr.release()
    else:
        rd, fr = g.stepper(), g.stepper()

        def wait():
            ptx.mbarrier_wait(k, rd.bar(g.full_base), rd.ph)

        def slot():
            return rd.slot(g.tiles, 2 * TILE)

        def release():
            ptx.mbarrier_arrive(k, fr.bar(g.empty_base), dst="_")
    wait()
    g.mma(slot(), scale=0)
    rd.advance()
    with k.for_range(1, g.nk):
        wait()
        g.mma(slot())
        ptx.wgmma_wait_group(k, 1)
        with g.leader():
            release()
        fr.advance()
        rd.advance()
    ptx.wgmma_wait_group(k, 0)
    with g.leader():
        release()


def producer_parity_zero_selp(bug: bool):
    """By hand, 2 stages: the producer's phase register starts at 0 (the mistake: the first
    empty-wait blocks until the consumers release, which they do only after data it never
    loads). The consumer releases the last stage after its loop."""
    g = Gemm("hand", 2, _peeled_consumer, producer_phase=0 if bug else 1)
    return g.k, g.wait_line if bug else None, {"maps": MAPS}


def producer_parity_counter_ring(bug: bool):
    """An MbarrierRing of 4 stages; the producer (by hand on the ring's barriers) computes
    its parity from the loop counter, (kb / 4) & 1, without the xor 1 (the mistake)."""
    g = Gemm("ring", 4, _peeled_consumer, producer_phase=0 if bug else 1,
             counter_parity=True)
    return g.k, g.wait_line if bug else None, {"maps": MAPS}


# -- found on the way: a box loop inside a stage that rewrites one box --------------------------
def box_loop_same_box(bug: bool):
    """A producer fills stage kb % 4 of a 4-stage ring (MbarrierRing storage, offsets by hand:
    `tiles + st * 2 * TILE`), operand A as two boxes in a run-time loop over h. The mistake:
    both trips load into the stage's first box (the h * TILE term forgotten) with no wait in
    between, a refill of bytes the consumers may be reading. (A 2-trip loop over a ring of 4
    was taken for a fill loop over fresh stages, though the ring's counter is the outer
    loop's.)"""
    k = Kernel("boxes", reqntid=160)
    ma = k.tensormap_addr(k.param_tensormap("ma"))
    n = k.ld_param(k.param(t.u32, "nk"))
    tiles = k.shared_array(t.b8, 4 * 2 * TILE, align=1024, name="btiles")
    ring = MbarrierRing(k, 4, empty_count=4, name="br")
    ring.init()
    line = None
    with k.if_(k.shr(k.tid.x, 5) == 0), k.if_(k.elect_sync()):
        with k.for_range(0, n) as kb:
            st = k.and_(kb, 3)
            ph = k.xor(k.and_(k.shr(kb, 2), 1), 1)
            ptx.mbarrier_wait(k, k.add(ring.empty_base, k.shl(st, 3)), ph)
            full = k.add(ring.full_base, k.shl(st, 3))
            ptx.mbarrier_arrive_expect_tx(k, "release", "cta", "shared::cta", full, 2 * TILE,
                                          dst="_")
            sa = k.add(k.mov(tiles), k.mul(st, 2 * TILE, type=t.u32))
            with k.for_range(0, 2) as h:
                dst = sa if bug else k.add(sa, k.mul(h, TILE, type=t.u32))
                line = nxt()
                ptx.cp_async_bulk_tensor(k, "shared::cluster", "global", dst, ma,
                                         (k.mul(h, 64), kb), full)
    with k.else_():
        c = ring.consumer()
        with k.for_range(0, n):
            c.wait_full()
            k.ld(k.add(c.slot(tiles, 2 * TILE), k.shl(k.tid.x, 2)), type=t.u32,
                 space="shared::cta")
            k.syncwarp()
            with k.if_(k.laneid == 0):
                c.release()
            c.advance()
    k.ret()
    return k, line if bug else None, {"maps": {"ma": {"box_bytes": TILE}}}


def stage_count_dyn_ring(bug: bool):
    """A 4-stage MbarrierRing in dynamic shared memory (after 4 tiles); the consumer walks it
    with its view, the producer by hand with a selp stepper that still wraps at 3 (the
    mistake). The ring's count comes from its barriers' layout (4 initialised 8 bytes apart
    before the empty ring), not from the producer's copies (which say 3)."""
    k = Kernel("dynring", reqntid=256)
    ma = k.tensormap_addr(k.param_tensormap("ma"))
    nk = k.ld_param(k.param(t.u32, "nk"))
    dyn = k.extern_shared("smem", align=1024)
    ring = MbarrierRing(k, 4, storage=Addr(dyn, 4 * TILE))
    ring.init()
    line = None
    with k.if_(k.tid.x == 0):
        st = Stepper(k, 3 if bug else 4, 1)
        with k.for_range(0, nk) as kb:
            line = nxt()
            ptx.mbarrier_wait(k, st.bar(ring.empty_base), st.ph)
            fb = st.bar(ring.full_base)
            ptx.mbarrier_arrive_expect_tx(k, "release", "cta", "shared::cta", fb, TILE, dst="_")
            ptx.cp_async_bulk_tensor(k, "shared::cluster", "global", st.slot(k.mov(dyn), TILE),
                                     ma, (0, kb), fb)
            st.advance()
    with k.if_(k.tid.x >= 128):
        c = ring.consumer()
        with k.for_range(0, nk):
            c.wait_full()
            k.ldmatrix(k.add(c.slot(dyn, TILE), k.shl(k.and_(k.tid.x, 31), 4)), 4)
            with k.if_(k.tid.x == 128):
                c.release()
            c.advance()
    k.ret()
    return k, line if bug else None, {"maps": {"ma": {"box_bytes": TILE}}}


def producer_parity_kb_release(bug: bool):
    """An MbarrierRing of 4; the consumer keeps one wgmma in flight and releases the previous
    stage under `kb > 0` (a trailing view advanced only there), the last after the loop.
    The mistake: the producer's parity from the counter without the xor 1."""
    def consumer(g: Gemm) -> None:
        k = g.k
        rd, fr = g.ring.consumer(), g.ring.consumer()
        with k.for_range(0, g.nk) as kb:
            rd.wait_full()
            g.mma(rd.slot(g.tiles, 2 * TILE))
            rd.advance()
            ptx.wgmma_wait_group(k, 1)
            with k.if_(kb > 0):
                with g.leader():
                    fr.release()
                fr.advance()
        ptx.wgmma_wait_group(k, 0)
        with g.leader():
            fr.release()

    g = Gemm("ring", 4, consumer, producer_phase=0 if bug else 1, counter_parity=True)
    return g.k, g.wait_line if bug else None, {"maps": MAPS}


def release_issued_after_first(bug: bool):
    """MbarrierRing of 3: the release moved under `kb > 0` (meant to skip the first trip, as
    a trailing release does) but still of the reading view's stage, after wait_group 1 (the
    mistake); twin: a trailing view advanced under the same `kb > 0`, the last after the
    loop."""
    ln = Line(bug)

    def consumer(g: Gemm) -> None:
        k = g.k
        c, fr = g.ring.consumer(), g.ring.consumer()
        with k.for_range(0, g.nk) as kb:
            c.wait_full()
            g.mma(c.slot(g.tiles, 2 * TILE))
            ptx.wgmma_wait_group(k, 1)
            with k.if_(kb > 0):
                with g.leader():
                    ln.mark()
                    (c if bug else fr).release()
                if not bug:
                    fr.advance()
            c.advance()
        ptx.wgmma_wait_group(k, 0)
        if not bug:
            with g.leader():
                fr.release()

    g = Gemm("ring", 3, consumer)
    return g.k, ln.at, {"maps": MAPS}


def next_read_not_specialized(bug: bool):
    """Not warp-specialized: 128 threads, thread 0 loads (an MbarrierRing of 3, two stages
    ahead), every thread reads each stage with ldmatrix. After a bar.sync (stage kb - 2 is
    read by all) thread 0 refills, then the loop advances its view to stage kb. The mistake:
    ldmatrix of stage kb, then its wait."""
    ln = Line(bug)
    k = Kernel("nonws", reqntid=128)
    ma = k.tensormap_addr(k.param_tensormap("ma"))
    nk = k.ld_param(k.param(t.u32, "nk"))
    tiles = k.shared_array(t.b8, 3 * TILE, align=1024, name="nt")
    ring = MbarrierRing(k, 3, name="nr")
    ring.init()
    p, rd = ring.producer(), ring.consumer()
    lane = k.shl(k.and_(k.tid.x, 31), 4)

    def load(kb) -> None:
        with k.if_(k.tid.x == 0):
            p.arrive_expect_tx(TILE)
            ptx.cp_async_bulk_tensor(k, "shared::cluster", "global", p.slot(tiles, TILE), ma,
                                     (0, kb), p.full_barrier())
        p.advance()

    load(k.mov(0, type=t.u32))
    load(k.mov(1, type=t.u32))
    rd.wait_full()
    k.ldmatrix(k.add(rd.slot(tiles, TILE), lane), 4)
    with k.for_range(1, nk) as kb:
        k.bar_sync(0)
        with k.if_(k.add(kb, 1) < nk):
            load(k.add(kb, 1))
        rd.advance()
        if not bug:
            rd.wait_full()
        ln.mark()
        k.ldmatrix(k.add(rd.slot(tiles, TILE), lane), 4)
        if bug:
            rd.wait_full()
    k.ret()
    return k, ln.at, {"maps": {"ma": {"box_bytes": TILE}}}
