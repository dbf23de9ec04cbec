"""Kernels of an independent recall audit of issue 29's classes (tests/test_checker_audit29.py),
written apart from the issue-29 tests: other stage counts (2/3/4), other thread layouts (an
elected producer lane in warp 0, two consumer warpgroups), selp-advanced stage registers by
hand, 4-CTA clusters, helper functions and run-time indices. Every builder takes `bug` (plant
the mistake, else build the corrected twin) and returns `(kernel_or_module, line, context)`:
`line` is the Python line the finding must name (None for a twin), `context` the keyword
arguments of check_kernel/check_module."""

from __future__ import annotations

import sys
from contextlib import nullcontext
from typing import Any

from ptxdsl import Addr, Kernel, Module, ptx, t
from ptxdsl.instructions.wgmma_desc import SmemLayout, descriptor
from ptxdsl.operands import Symbol
from ptxdsl.pipeline import MbarrierRing, cluster_sync

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


# -- C4: a wait on the other ring of one dynamic buffer ------------------------------------------
KV_MAPS = {"mk": {"box_bytes": TILE}, "mv": {"box_bytes": TILE}}


class KV:
    """An attention-style kernel: K and V rings of 2 stages in one dynamic buffer (barriers
    first, then the K tiles at 1024, the V tiles after them); warp 0's elected lane loads K
    and V of block j, warpgroup 1 reads K (ldmatrix or a wgmma) then V. `style`: "ring" (two
    MbarrierRings with storage=Addr(dyn, off)) or "hand" (offsets by hand)."""

    def __init__(self, style: str, consumer):
        k = self.k = Kernel("attn", reqntid=256)
        self.mk = k.tensormap_addr(k.param_tensormap("mk"))
        self.mv = k.tensormap_addr(k.param_tensormap("mv"))
        self.nb = k.ld_param(k.param(t.u32, "nblocks"))
        self.dyn = k.extern_shared("smem", align=1024)
        self.acc = k.fragment(t.f32, shape=(64, 64))
        if style == "ring":
            kr = MbarrierRing(k, 2, storage=Addr(self.dyn, 0), name="kr")
            vr = MbarrierRing(k, 2, storage=Addr(self.dyn, 64), name="vr")
            kr.init(sync=False)
            vr.init()
            self.bars = {"k": (kr.full_base, kr.empty_base), "v": (vr.full_base, vr.empty_base)}
        else:
            base = k.mov(self.dyn)
            with k.if_(k.tid.x == 0):
                for off in range(0, 64, 8):        # kfull, kempty, vfull, vempty: 2 each
                    ptx.mbarrier_init(k, Addr(self.dyn, off), 1)
                ptx.fence_mbarrier_init(k)
            k.bar_sync(0)
            self.bars = {"k": (base, k.add(base, 16)), "v": (k.add(base, 32), k.add(base, 48))}
        self.tiles = {"k": 1024, "v": 1024 + 2 * TILE}
        with k.if_(k.shr(k.tid.x, 7) == 0):
            with k.if_(k.shr(k.tid.x, 5) == 0), k.if_(k.elect_sync()):
                self.produce()
        with k.else_():
            self.result = consumer(self)
        k.ret()

    def bar(self, ring: str, which: str, s):
        full, empty = self.bars[ring]
        return self.k.add(full if which == "full" else empty, self.k.shl(s, 3))

    def slot(self, ring: str, s):
        k = self.k
        return k.add(k.add(k.mov(self.dyn), self.tiles[ring]), k.mul(s, TILE, type=t.u32))

    def produce(self) -> None:
        k = self.k
        with k.for_range(0, self.nb) as j:
            s = k.and_(j, 1)
            ph = k.xor(k.and_(k.shr(j, 1), 1), 1)
            for ring, tmap in (("k", self.mk), ("v", self.mv)):
                ptx.mbarrier_wait(k, self.bar(ring, "empty", s), ph)
                fb = self.bar(ring, "full", s)
                ptx.mbarrier_arrive_expect_tx(k, "release", "cta", "shared::cta", fb, TILE,
                                              dst="_")
                ptx.cp_async_bulk_tensor(k, "shared::cluster", "global", self.slot(ring, s),
                                         tmap, (0, j), fb)


def kv_wrong_ring_ldmatrix(bug: bool):
    """Two MbarrierRings in one dynamic buffer; the consumer's S = Q K^T part reads K with
    ldmatrix after waiting on the V ring's full barrier (the mistake) instead of the K ring's."""
    ln = Line(bug)

    def consumer(g: KV):
        k = g.k
        lane = k.shl(k.and_(k.tid.x, 31), 4)
        with k.for_range(0, g.nb) as j:
            s = k.and_(j, 1)
            ph = k.and_(k.shr(j, 1), 1)
            ptx.mbarrier_wait(k, g.bar("v" if bug else "k", "full", s), ph)
            ln.mark()
            k.ldmatrix(k.add(g.slot("k", s), lane), 4)
            with k.if_(k.and_(k.tid.x, 127) == 0):
                ptx.mbarrier_arrive(k, g.bar("k", "empty", s), dst="_")
            if not bug:
                ptx.mbarrier_wait(k, g.bar("v", "full", s), ph)
            k.ldmatrix(k.add(g.slot("v", s), lane), 4)
            with k.if_(k.and_(k.tid.x, 127) == 0):
                ptx.mbarrier_arrive(k, g.bar("v", "empty", s), dst="_")

    g = KV("ring", consumer)
    return g.k, ln.at, {"maps": KV_MAPS}


def _ready(g: KV, ring: str, s, ph) -> None:
    """A helper: wait until the given ring's stage s is full."""
    ptx.mbarrier_wait(g.k, g.bar(ring, "full", s), ph)


def kv_wrong_ring_wgmma(bug: bool):
    """Barriers placed by hand in the dynamic buffer; a wgmma reads K (both operands from the K
    stage, as a stand-in for Q K^T) after the helper waited on V (the mistake)."""
    ln = Line(bug)

    def consumer(g: KV):
        k = g.k
        with k.for_range(0, g.nb) as j:
            s = k.and_(j, 1)
            ph = k.and_(k.shr(j, 1), 1)
            _ready(g, "v" if bug else "k", s, ph)
            ks = g.slot("k", s)
            ptx.wgmma_fence(k)
            ln.mark()
            ptx.wgmma_mma_async(k, g.acc, descriptor(k, LAY, ks), descriptor(k, LAY, ks), 1,
                                atype="f16")
            ptx.wgmma_commit_group(k)
            ptx.wgmma_wait_group(k, 0)
            with k.if_(k.and_(k.tid.x, 127) == 0):
                ptx.mbarrier_arrive(k, g.bar("k", "empty", s), dst="_")
            if not bug:
                _ready(g, "v", s, ph)
            k.ldmatrix(k.add(g.slot("v", s), k.shl(k.and_(k.tid.x, 31), 4)), 4)
            with k.if_(k.and_(k.tid.x, 127) == 0):
                ptx.mbarrier_arrive(k, g.bar("v", "empty", s), dst="_")

    g = KV("hand", consumer)
    return g.k, ln.at, {"maps": KV_MAPS}


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


# -- C1a: a peer's shared memory read before the cluster barrier ---------------------------------
def allgather_barrier_before_write(bug: bool):
    """A 4-CTA cluster all-gathers one slice a CTA: each writes its slice, then reads the three
    peers' slices ((rank + r) & 3) through mapa. The mistake: the cluster barrier placed before
    the write (so it orders nothing), bar.sync after it."""
    ln = Line(bug)
    k = Kernel("gather4", reqntid=128, reqnctapercluster=(4, 1, 1))
    src = k.cvta(k.ld_param(k.param_ptr("src")), "global", to=True)
    dst = k.cvta(k.ld_param(k.param_ptr("dst")), "global", to=True)
    part = k.shared_array(t.u32, 128, align=16, name="part")
    rank = k.cluster_ctarank
    mine = k.add(k.mov(part), k.shl(k.tid.x, 2))
    v = k.ld(Addr(k.add(src, k.mul(k.mad(k.ctaid.x, 128, k.tid.x), 4, mode="wide"))),
             type=t.u32, space="global")
    if bug:
        cluster_sync(k)
    k.st(Addr(mine), v, type=t.u32, space="shared::cta")
    if bug:
        k.bar_sync(0)
    else:
        cluster_sync(k)
    total = k.mov(v)
    for r in range(1, 4):
        peer = ptx.mapa(k, "cluster", mine, k.and_(k.add(rank, r), 3))
        if r == 1:
            ln.mark()
        k.add(total, k.ld(Addr(peer), type=t.u32, space="shared::cluster"), dst=total)
    k.st(Addr(k.add(dst, k.mul(k.mad(k.ctaid.x, 128, k.tid.x), 4, mode="wide"))), total,
         type=t.u32, space="global")
    cluster_sync(k)          # the peers still read this CTA's slice
    k.ret()
    return k, ln.at, {}


def _histogram(k: Kernel, bins, n, data) -> None:
    """A helper: every thread adds its elements into CTA 0's bins (red.shared::cluster)."""
    with k.for_range(k.tid.x, n, 128) as i:
        x = k.ld(Addr(k.add(data, k.mul(i, 4, mode="wide"))), type=t.u32, space="global")
        b = k.add(k.mov(bins), k.shl(k.and_(x, 63), 2))
        k.red("add", Addr(ptx.mapa(k, "cluster", b, 0)), k.mov(1, type=t.u32), type=t.u32,
              space="shared::cluster")


def histogram_bar_sync(bug: bool):
    """A 2-CTA cluster builds one histogram in CTA 0's shared memory (red.shared::cluster from
    a helper, in a run-time loop); CTA 0 then reads its bins. The mistake: only bar.sync
    between the peers' reductions and CTA 0's reads."""
    ln = Line(bug)
    k = Kernel("hist", reqntid=128, reqnctapercluster=(2, 1, 1))
    data = k.cvta(k.ld_param(k.param_ptr("data")), "global", to=True)
    out = k.cvta(k.ld_param(k.param_ptr("out")), "global", to=True)
    n = k.ld_param(k.param(t.u32, "n"))
    bins = k.shared_array(t.u32, 64, align=16, name="bins")
    with k.if_(k.tid.x < 64):
        k.st(Addr(k.add(k.mov(bins), k.shl(k.tid.x, 2))), k.mov(0, type=t.u32), type=t.u32,
             space="shared::cta")
    cluster_sync(k)
    _histogram(k, bins, n, data)
    if bug:
        k.bar_sync(0)
    else:
        cluster_sync(k)
    with k.if_(k.cluster_ctarank == 0), k.if_(k.tid.x < 64):
        ln.mark()
        c = k.ld(Addr(k.add(k.mov(bins), k.shl(k.tid.x, 2))), type=t.u32, space="shared::cta")
        k.red("add", Addr(k.add(out, k.mul(k.tid.x, 4, mode="wide"))), c, type=t.u32,
              space="global")
    if bug:
        cluster_sync(k)      # CTA 1 stays until CTA 0 is done (not the missing barrier)
    k.ret()
    return k, ln.at, {}


# -- C1b: a CTA exits or reuses its shared memory while peers still access it --------------------
def ring_reduce_exit(bug: bool):
    """A 4-CTA cluster: each CTA publishes its tile, then adds its right neighbour's
    ((rank + 1) % 4, computed with rem) to its own. The mistake: no cluster barrier before the
    exit, so the left neighbour may still be reading this CTA's tile when it leaves."""
    ln = Line(bug)
    k = Kernel("ring4", reqntid=64, reqnctapercluster=(4, 1, 1))
    io = k.cvta(k.ld_param(k.param_ptr("io")), "global", to=True)
    tile = k.shared_array(t.f32, 64, align=16, name="tile")
    g = k.add(io, k.mul(k.mad(k.ctaid.x, 64, k.tid.x), 4, mode="wide"))
    x = k.ld(Addr(g), type=t.f32, space="global")
    mine = k.add(k.mov(tile), k.shl(k.tid.x, 2))
    k.st(Addr(mine), x, type=t.f32, space="shared::cta")
    cluster_sync(k)
    right = k.rem(k.add(k.cluster_ctarank, 1), 4, type=t.u32)
    ln.mark()
    y = k.ld(Addr(ptx.mapa(k, "cluster", mine, right)), type=t.f32, space="shared::cluster")
    k.st(Addr(g), k.add(x, y), type=t.f32, space="global")
    if not bug:
        cluster_sync(k)
    k.ret()
    return k, ln.at, {}


def _exchange_step(k: Kernel, mine, peer, acc, i) -> None:
    """A helper: publish this step's value, then add the peer's."""
    k.st(Addr(mine), i, type=t.u32, space="shared::cta")
    cluster_sync(k)
    k.add(acc, k.ld(Addr(peer), type=t.u32, space="shared::cluster"), dst=acc)


def exchange_reuse_loop(bug: bool):
    """A 2-CTA cluster exchanges one word a thread every step of a run-time loop through a
    single buffer (the helper stores, syncs, reads the peer's). The mistake: no cluster
    barrier after the read, so the next step's store overwrites what the peer may still be
    reading."""
    ln = Line(bug)
    k = Kernel("xchg", reqntid=32, reqnctapercluster=(2, 1, 1))
    n = k.ld_param(k.param(t.u32, "n"))
    out = k.cvta(k.ld_param(k.param_ptr("out")), "global", to=True)
    box = k.shared_array(t.u32, 32, align=16, name="box")
    mine = k.add(k.mov(box), k.shl(k.laneid, 2))
    peer = ptx.mapa(k, "cluster", mine, k.sub(1, k.cluster_ctarank))
    acc = k.mov(0, type=t.u32)
    with k.for_range(0, n) as i:
        if bug:
            ln.at = nxt()
        _exchange_step(k, mine, peer, acc, i)
        if not bug:
            cluster_sync(k)
    k.st(Addr(k.add(out, k.mul(k.mad(k.ctaid.x, 32, k.laneid), 4, mode="wide"))), acc,
         type=t.u32, space="global")
    cluster_sync(k)
    k.ret()
    return k, ln.at, {}


# -- C2a: a cluster consumer's release of only some CTAs' stage ----------------------------------
class ClusterPipe:
    """`ctas` CTAs, 256 threads each: warp 0's elected lane fills a ring of `stages` with TMA
    (each CTA its own tile), warpgroup 1 reads each stage with ldmatrix and releases it on
    every CTA whose producer waits for it (the empty barriers count every CTA's consumers).
    `style`: "ring" (MbarrierRing(peers=ctas)) or "hand"."""

    def __init__(self, style: str, ctas: int, stages: int, release, *, lanes: bool = False,
                 final: bool = True):
        k = self.k = Kernel("cpipe", reqntid=256, reqnctapercluster=(ctas, 1, 1))
        self.ctas, self.stages = ctas, stages
        tmap = k.tensormap_addr(k.param_tensormap("ma"))
        nk = k.ld_param(k.param(t.u32, "nk"))
        self.tiles = k.shared_array(t.b8, stages * TILE, align=1024, name="tiles")
        self.ring: MbarrierRing | None = None
        if style == "ring":
            self.ring = MbarrierRing(k, stages, empty_count=4, peers=ctas, name="cr")
            self.ring.init()
            full, empty = self.ring.full_base, self.ring.empty_base
        else:
            fa = k.shared_array(t.b64, stages, align=8, name="cfull")
            ea = k.shared_array(t.b64, stages, align=8, name="cempty")
            with k.if_(k.tid.x == 0):
                for s in range(stages):
                    ptx.mbarrier_init(k, Addr(fa, 8 * s), 1)
                    ptx.mbarrier_init(k, Addr(ea, 8 * s), 4 * ctas)   # a lane a warp, each CTA
                ptx.fence_mbarrier_init(k)
            cluster_sync(k)
            full, empty = k.mov(fa), k.mov(ea)
        self.full, self.empty = full, empty
        with k.if_(k.shr(k.tid.x, 7) == 0):
            with k.if_(k.shr(k.tid.x, 5) == 0), k.if_(k.elect_sync()):
                with k.for_range(0, nk) as kb:
                    s = k.rem(kb, stages, type=t.u32)
                    ph = k.xor(k.and_(k.div(kb, stages, type=t.u32), 1), 1)
                    ptx.mbarrier_wait(k, k.add(empty, k.shl(s, 3)), ph, sem="acquire",
                                      scope="cluster")
                    fb = k.add(full, k.shl(s, 3))
                    ptx.mbarrier_arrive_expect_tx(k, "release", "cta", "shared::cta", fb,
                                                  TILE, dst="_")
                    ptx.cp_async_bulk_tensor(k, "shared::cluster", "global",
                                             k.add(k.mov(self.tiles),
                                                   k.mul(s, TILE, type=t.u32)),
                                             tmap, (0, kb), fb)
        with k.else_():
            if self.ring is not None:
                c = self.ring.consumer()
                with k.for_range(0, nk):
                    c.wait_full()
                    k.ldmatrix(k.add(c.slot(self.tiles, TILE),
                                     k.shl(k.and_(k.tid.x, 31), 4)), 4)
                    with k.if_(k.laneid == 0):
                        self.line = release(self, c)
                    c.advance()
            else:
                with k.for_range(0, nk) as kb:
                    s = k.rem(kb, stages, type=t.u32)
                    ph = k.and_(k.div(kb, stages, type=t.u32), 1)
                    ptx.mbarrier_wait(k, k.add(full, k.shl(s, 3)), ph)
                    k.ldmatrix(k.add(k.add(k.mov(self.tiles), k.mul(s, TILE, type=t.u32)),
                                     k.shl(k.and_(k.tid.x, 31), 4)), 4)
                    # `lanes`: every lane runs `release` (CUTLASS's lane r releases CTA r)
                    with k.if_(k.laneid == 0) if not lanes else nullcontext():
                        self.line = release(self, k.add(empty, k.shl(s, 3)))
        if final:
            cluster_sync(k)   # no CTA leaves while peers still arrive on its barriers
        k.ret()


def cluster_release_stale_ranks(bug: bool):
    """MbarrierRing(peers=4) of 3 stages in a 4-CTA cluster; the consumer still releases the
    CTAs [0, 1] of the 2-CTA version (the mistake): CTAs 2 and 3's empty barriers never
    complete, so their producers hang."""
    def release(p: ClusterPipe, c):
        line = nxt()
        c.release(ctas=[0, 1]) if bug else c.release()
        return line

    p = ClusterPipe("ring", 4, 3, release)
    return p.k, p.line if bug else None, {"maps": {"ma": {"box_bytes": TILE}}}


def cluster_release_own_by_hand(bug: bool):
    """By hand, a 2-CTA cluster, 2 stages; each consumer warp's lane 0 releases through mapa
    the stage of its own CTA only (the mistake: the peer's producer waits for both CTAs'
    consumers), instead of a loop over both ranks."""
    def release(p: ClusterPipe, eb):
        k = p.k
        ranks = [k.cluster_ctarank] if bug else [0, 1]
        line = nxt() + 1
        for r in ranks:
            ptx.mbarrier_arrive(k, "release", "cluster", "cluster", ptx.mapa(k, "cluster", eb, r))
        return line

    p = ClusterPipe("hand", 2, 2, release)
    return p.k, p.line if bug else None, {"maps": {"ma": {"box_bytes": TILE}}}


# -- C2b: the bytes st.async / red.async deliver, in expect_tx ----------------------------------
def _send(k: Kernel, recv, cnt, bar, peer, value) -> None:
    """A helper: this thread's word into the peer's recv (st.async) and a count into its cnt
    (red.async), both completing on the peer's barrier."""
    off = k.shl(k.tid.x, 2)
    rbar = ptx.mapa(k, "cluster", k.mov(bar), peer)
    ptx.st_async(k, ptx.mapa(k, "cluster", k.add(k.mov(recv), off), peer), value, rbar)
    ptx.red_async(k, "add", ptx.mapa(k, "cluster", k.add(k.mov(cnt), off), peer),
                  k.mov(1, type=t.u32), rbar)


def _async_kernel(name: str, ctas: int):
    k = Kernel(name, reqntid=128, reqnctapercluster=(ctas, 1, 1))
    src = k.cvta(k.ld_param(k.param_ptr("src")), "global", to=True)
    g = k.add(src, k.mul(k.mad(k.ctaid.x, 128, k.tid.x), 4, mode="wide"))
    recv = k.shared_array(t.b32, 128, align=16, name="recv")
    cnt = k.shared_array(t.u32, 128, align=16, name="cnt")
    bar = k.shared_array(t.b64, 1, align=8, name="rbar")
    with k.if_(k.tid.x == 0):
        ptx.mbarrier_init(k, bar, 1)
        ptx.fence_mbarrier_init(k)
    cluster_sync(k)
    v = k.ld(Addr(g), type=t.b32, space="global")
    return k, g, recv, cnt, bar, v


def async_ring4(bug: bool):
    """A 4-CTA cluster passes one word a thread to its right neighbour ((rank + 1) & 3) with
    st.async and counts it with red.async; each CTA expects 512 + 512 bytes. The mistake:
    the expect_tx counts the st.async bytes only."""
    k, g, recv, cnt, bar, v = _async_kernel("pass4", 4)
    _send(k, recv, cnt, bar, k.and_(k.add(k.cluster_ctarank, 1), 3), v)
    with k.if_(k.tid.x == 0):
        line = nxt()
        ptx.mbarrier_arrive_expect_tx(k, "release", "cta", "shared::cta", bar,
                                      512 if bug else 1024, dst="_")
    ptx.mbarrier_wait(k, bar, 0)
    k.st(Addr(g), k.ld(Addr(k.add(k.mov(recv), k.shl(k.tid.x, 2))), type=t.b32,
                       space="shared::cta"), type=t.b32, space="global")
    k.ret()
    return k, line if bug else None, {}


def async_gather_rank0(bug: bool):
    """A 4-CTA cluster: ranks 1..3 send to rank 0 (each into its own quarter of recv/cnt,
    32 threads each), rank 0 expects 3 x (128 + 128) bytes. The mistake: 3 x 128, the red.async
    bytes forgotten."""
    k, g, recv, cnt, bar, v = _async_kernel("gather0", 4)
    rank = k.cluster_ctarank
    with k.if_(rank != 0), k.if_(k.tid.x < 32):
        off = k.shl(k.add(k.shl(k.sub(rank, 1), 5), k.tid.x), 2)
        rbar = ptx.mapa(k, "cluster", k.mov(bar), 0)
        ptx.st_async(k, ptx.mapa(k, "cluster", k.add(k.mov(recv), off), 0), v, rbar)
        ptx.red_async(k, "add", ptx.mapa(k, "cluster", k.add(k.mov(cnt), off), 0),
                      k.mov(1, type=t.u32), rbar)
    with k.if_(rank == 0):
        with k.if_(k.tid.x == 0):
            line = nxt()
            ptx.mbarrier_arrive_expect_tx(k, "release", "cta", "shared::cta", bar,
                                          384 if bug else 768, dst="_")
        ptx.mbarrier_wait(k, bar, 0)
        with k.if_(k.tid.x < 96):
            k.st(Addr(g), k.ld(Addr(k.add(k.mov(recv), k.shl(k.tid.x, 2))), type=t.b32,
                               space="shared::cta"), type=t.b32, space="global")
    k.ret()
    return k, line if bug else None, {}


# -- C7: %ntid.x arrivals under .reqntid --------------------------------------------------------
def ntid_count_warp_arrive(bug: bool):
    """A 192-thread CTA: a barrier initialised with %ntid.x (192 under .reqntid) that only lane
    0 of each warp arrives on (the mistake: 6 arrivals of 192); twin: %ntid.x / 32."""
    k = Kernel("ntid1", reqntid=192)
    bar = k.shared_array(t.b64, 1, align=8, name="done")
    with k.if_(k.tid.x == 0):
        cnt = k.mov(k.ntid.x) if bug else k.shr(k.ntid.x, 5)
        ptx.mbarrier_init(k, bar, cnt)
    k.bar_sync(0)
    with k.if_(k.laneid == 0):
        line = nxt()
        ptx.mbarrier_arrive(k, bar, dst="_")
    ptx.mbarrier_wait(k, bar, 0)
    k.ret()
    return k, line if bug else None, {}


def ntid_warps_every_thread(bug: bool):
    """A 2-D CTA (64 x 2): the barrier is initialised with the warp count %ntid.x * %ntid.y / 32
    (4) but every thread arrives, in a loop over phases (the mistake: 128 a phase, phases end
    early); twin: %ntid.x * %ntid.y arrivals."""
    k = Kernel("ntid2", reqntid=(64, 2, 1))
    bar = k.shared_array(t.b64, 1, align=8, name="step")
    n = k.ld_param(k.param(t.u32, "n"))
    with k.if_(k.tid.x == 0), k.if_(k.tid.y == 0):
        all_ = k.mul(k.ntid.x, k.ntid.y, type=t.u32)
        ptx.mbarrier_init(k, bar, k.shr(all_, 5) if bug else all_)
    k.bar_sync(0)
    with k.for_range(0, n) as i:
        line = nxt()
        ptx.mbarrier_arrive(k, bar, dst="_")
        ptx.mbarrier_wait(k, bar, k.and_(i, 1))
    k.ret()
    return k, line if bug else None, {}


# -- C8: a per-lane ragged-tail arrive mixing %tid and a loop counter ---------------------------
def ragged_tail_ws(bug: bool):
    """Warp-specialized, 256 threads: warpgroup 1 consumes chunks of 128 elements and each
    thread releases the chunk's barrier (count 128) when its element exists. The mistake:
    `(tid - 128) + kb * 128 < n` per lane, so the last chunk's phase gets fewer arrivals;
    twin: the whole warpgroup arrives while `kb * 128 < n`."""
    k = Kernel("tail1", reqntid=256)
    n = k.ld_param(k.param(t.u32, "n"))
    nk = k.ld_param(k.param(t.u32, "nk"))
    bar = k.shared_array(t.b64, 1, align=8, name="freed")
    with k.if_(k.tid.x == 0):
        ptx.mbarrier_init(k, bar, 128)
    k.bar_sync(0)
    with k.if_(k.tid.x >= 128):
        with k.for_range(0, nk) as kb:
            base = k.mul(kb, 128, type=t.u32)
            cond = k.add(k.sub(k.tid.x, 128), base) < n if bug else base < n
            with k.if_(cond):
                line = nxt()
                ptx.mbarrier_arrive(k, bar, dst="_")
    with k.else_():
        with k.for_range(0, nk) as kb:
            ptx.mbarrier_wait(k, bar, k.and_(kb, 1))
    k.ret()
    return k, line if bug else None, {}


def _tail_arrive(k: Kernel, bar, ok) -> int:
    """A helper: arrive when `ok` holds; returns the arrive's line."""
    with k.if_(ok):
        line = nxt()
        ptx.mbarrier_arrive(k, bar, dst="_")
    return line


def ragged_tail_lane(bug: bool):
    """All 128 threads, a loop over 32-element rows of a ragged block: lane l arrives when
    `l < n - r * 32` (the mistake: per lane, the count is 128); twin: `r * 32 < n` for all."""
    k = Kernel("tail2", reqntid=128)
    n = k.ld_param(k.param(t.u32, "n"))
    bar = k.shared_array(t.b64, 1, align=8, name="rowbar")
    with k.if_(k.tid.x == 0):
        ptx.mbarrier_init(k, bar, 128)
    k.bar_sync(0)
    rows = k.shr(k.add(n, 31), 5)
    with k.for_range(0, rows) as r:
        rem = k.sub(n, k.shl(r, 5))
        line = _tail_arrive(k, bar, k.laneid < rem if bug else k.mov(0, type=t.u32) < rem)
        ptx.mbarrier_wait(k, bar, k.and_(r, 1))
    k.ret()
    return k, line if bug else None, {}


# -- C9: two tensor maps in one per-CTA workspace slot -----------------------------------------
def workspace_wide_offsets(bug: bool):
    """Each CTA's 512-byte slot (`ws + ctaid.x * 512`, a wide multiply) holds map A at +0 and
    map B at +256; the kernel acquires B only (the mistake) and loads through A."""
    k = Kernel("ws1", reqntid=32)
    ws = k.ld_param(k.param_ptr("ws"))
    slot = k.add(ws, k.mul(k.ctaid.x, 512, mode="wide"))
    map_b = k.add(slot, 256)
    tile = k.shared_array(t.b8, TILE, align=1024, name="wtile")
    bar = k.shared_array(t.b64, 1, align=8, name="wbar")
    with k.if_(k.laneid == 0):
        ptx.mbarrier_init(k, bar, 1)
    k.syncwarp()
    ptx.fence_proxy_tensormap_generic(k, "acquire", "gpu", map_b)
    if not bug:
        ptx.fence_proxy_tensormap_generic(k, "acquire", "gpu", slot)
    with k.if_(k.laneid == 0):
        ptx.mbarrier_arrive_expect_tx(k, "release", "cta", "shared::cta", bar, TILE, dst="_")
        line = nxt()
        ptx.cp_async_bulk_tensor(k, "shared::cluster", "global", tile, slot, (0, 0), bar)
    ptx.mbarrier_wait(k, bar, 0)
    ptx.cp_async_bulk_prefetch_tensor(k, map_b, (0, 0))
    k.ret()
    return k, line if bug else None, {"maps": {"ws": {"box_bytes": TILE}}}


def _map_of(k: Kernel, ws, i: int):
    """A helper: map i of this CTA's three-map slot (384 bytes, indexed by the linear CTA id)."""
    cta = k.mad(k.ctaid.y, k.nctaid.x, k.ctaid.x)
    return k.add(k.add(ws, k.cvt(k.mul(cta, 384, type=t.u32), t.u64)), 128 * i)


def workspace_three_maps(bug: bool):
    """Three maps a slot, addresses from a helper; maps 0 and 1 acquired in a loop-free
    prologue, map 2 used by a prefetch with no acquire of its own (the mistake)."""
    k = Kernel("ws3", reqntid=32)
    ws = k.ld_param(k.param_ptr("ws"))
    for i in range(3 if not bug else 2):
        ptx.fence_proxy_tensormap_generic(k, "acquire", "gpu", _map_of(k, ws, i))
    ptx.cp_async_bulk_prefetch_tensor(k, _map_of(k, ws, 0), (0, 0))
    ptx.cp_async_bulk_prefetch_tensor(k, _map_of(k, ws, 1), (0, 0))
    line = nxt()
    ptx.cp_async_bulk_prefetch_tensor(k, _map_of(k, ws, 2), (0, 0))
    k.ret()
    return k, line if bug else None, {}


# -- C10: a .cta/.cluster release into a per-CTA slot that another kernel acquires ---------------
def percta_release_cluster_scope(bug: bool):
    """A writer kernel edits the box of its CTA's map in the workspace (slot by ctaid.y) with
    tensormap.replace and releases it at .cluster (the mistake) before a consumer kernel of
    the module acquires it at .gpu; twin: the release at .gpu."""
    w = Kernel("tune", reqntid=32)
    ws = w.ld_param(w.param_ptr("ws"))
    slot = w.cvta(w.add(ws, w.mul(w.ctaid.y, 128, mode="wide")), "global", to=True)
    with w.if_(w.laneid == 0):
        ptx.tensormap_replace_box_dim(w, "global", slot, 1, 32)
        ptx.tensormap_replace_box_dim(w, "global", slot, 0, 64)
        line = nxt()
        ptx.fence_proxy_tensormap_generic(w, "release", "cluster" if bug else "gpu")
    w.ret()
    r = Kernel("use", reqntid=32)
    ws = r.ld_param(r.param_ptr("ws"))
    slot = r.add(ws, r.mul(r.ctaid.y, 128, mode="wide"))
    ptx.fence_proxy_tensormap_generic(r, "acquire", "gpu", slot)
    ptx.cp_async_bulk_prefetch_tensor(r, slot, (0, 0))
    r.ret()
    return Module([w, r]), line if bug else None, {}


def percta_cp_fenceproxy_cta(bug: bool):
    """One kernel builds its CTA's map in shared memory and publishes it into the workspace
    with cp_fenceproxy at .cta (the mistake: a later launch acquires it); the kernel itself
    never uses the map. Twin: .gpu."""
    k = Kernel("publish", reqntid=32)
    ws = k.ld_param(k.param_ptr("ws"))
    tmpl = k.ld_param(k.param_ptr("tmpl"))
    smap = k.shared_array(t.b8, 128, align=128, name="smap")
    # the template map from global memory, one 4-byte word a lane
    word = k.ld(Addr(k.add(k.cvta(tmpl, "global", to=True), k.mul(k.laneid, 4, mode="wide"))),
                type=t.b32, space="global")
    k.st(Addr(k.add(k.mov(smap), k.shl(k.laneid, 2))), word, type=t.b32, space="shared::cta")
    k.syncwarp()
    with k.if_(k.laneid == 0):
        ptx.tensormap_replace_global_dim(k, "shared", smap, 0, k.ld_param(k.param(t.u32, "n")))
    k.syncwarp()
    slot = k.add(ws, k.cvt(k.shl(k.ctaid.x, 7), t.u64))
    line = nxt()
    ptx.tensormap_cp_fenceproxy(k, "release", "cta" if bug else "gpu", slot, smap, 128)
    k.ret()
    return k, line if bug else None, {}


# -- C1 in CUDA C++'s spelling: generic pointers from cluster.map_shared_rank -------------------
def generic_push(bug: bool):
    """A 2-CTA split-K as CUDA C++'s `cluster.map_shared_rank(inbox, rank ^ 1)` compiles it: a
    generic mapa of a generic pointer, a plain (generic) st into the peer's inbox; each CTA
    then reads its own inbox with ld.shared. The mistake: bar.sync instead of the cluster
    barrier between the peer's stores and the reads."""
    ln = Line(bug)
    k = Kernel("push_generic", reqntid=128, reqnctapercluster=(2, 1, 1))
    io = k.cvta(k.ld_param(k.param_ptr("io")), "global", to=True)
    inbox = k.shared_array(t.f32, 128, align=16, name="inbox")
    g = k.add(io, k.mul(k.mad(k.ctaid.x, 128, k.tid.x), 4, mode="wide"))
    x = k.ld(Addr(g), type=t.f32, space="global")
    mine = k.add(k.generic_addr(inbox), k.mul(k.tid.x, 4, mode="wide"))
    theirs = ptx.mapa(k, "generic", mine, k.xor(k.cluster_ctarank, 1))
    k.st(Addr(theirs), x, type=t.f32)
    if bug:
        k.bar_sync(0)
    else:
        cluster_sync(k)
    ln.mark()
    y = k.ld(Addr(k.add(k.mov(inbox), k.shl(k.tid.x, 2))), type=t.f32, space="shared::cta")
    k.st(Addr(g), k.add(x, y), type=t.f32, space="global")
    if bug:
        cluster_sync(k)      # the peer's stores land before this CTA leaves (not the mistake)
    k.ret()
    return k, ln.at, {}


def generic_pull_exit(bug: bool):
    """A 4-CTA cluster: each CTA reads the tile of CTA (rank + 2) & 3 through a generic
    pointer (generic mapa, generic ld) after the cluster barrier. The mistake: no cluster
    barrier before the exit."""
    ln = Line(bug)
    k = Kernel("pull_generic", reqntid=64, reqnctapercluster=(4, 1, 1))
    io = k.cvta(k.ld_param(k.param_ptr("io")), "global", to=True)
    tile = k.shared_array(t.u32, 64, align=16, name="gtile")
    g = k.add(io, k.mul(k.mad(k.ctaid.x, 64, k.tid.x), 4, mode="wide"))
    k.st(Addr(k.add(k.mov(tile), k.shl(k.tid.x, 2))), k.ld(Addr(g), type=t.u32,
                                                            space="global"),
         type=t.u32, space="shared::cta")
    cluster_sync(k)
    far = ptx.mapa(k, "generic", k.generic_addr(tile), k.and_(k.add(k.cluster_ctarank, 2), 3))
    ln.mark()
    v = k.ld(Addr(k.add(far, k.mul(k.tid.x, 4, mode="wide"))), type=t.u32, space="generic")
    k.st(Addr(g), v, type=t.u32, space="global")
    if not bug:
        cluster_sync(k)
    k.ret()
    return k, ln.at, {}


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


def workspace_mad_wide(bug: bool):
    """The per-CTA slot as one `mad.wide.u32 slot, ctaid.x, 256, ws`; maps at +0 and +128,
    only +0 acquired (the mistake), +128 prefetched. (A mad's result was not followed to the
    parameter at all, so the map went unchecked.)"""
    k = Kernel("wsmad", reqntid=32)
    ws = k.ld_param(k.param_ptr("ws"))
    slot = k.mad(k.ctaid.x, 256, ws, mode="wide")
    ptx.fence_proxy_tensormap_generic(k, "acquire", "gpu", slot)
    if not bug:
        ptx.fence_proxy_tensormap_generic(k, "acquire", "gpu", k.add(slot, 128))
    ptx.cp_async_bulk_prefetch_tensor(k, slot, (0, 0))
    line = nxt()
    ptx.cp_async_bulk_prefetch_tensor(k, k.add(slot, 128), (0, 0))
    k.ret()
    return k, line if bug else None, {}


# -- further spellings -----------------------------------------------------------------------
def cluster_release_lane_ranks(bug: bool):
    """CUTLASS's spelling, by hand in a 2-CTA cluster: lane r of each consumer warp releases
    CTA r's stage (`if lane < 2: arrive(mapa(empty, lane))`). The mistake: `lane == rank`,
    each warp releasing only its own CTA's stage."""
    def release(p: ClusterPipe, eb):
        k = p.k
        lane = k.laneid
        with k.if_(lane == k.cluster_ctarank if bug else lane < 2):
            line = nxt()
            ptx.mbarrier_arrive(k, "release", "cluster", "cluster", ptx.mapa(k, "cluster", eb,
                                                                             lane))
        return line

    p = ClusterPipe("hand", 2, 2, release, lanes=True)
    return p.k, p.line if bug else None, {"maps": {"ma": {"box_bytes": TILE}}}


def cluster_ring_no_final_barrier(bug: bool):
    """A 2-CTA MbarrierRing(peers=2) whose consumers release both CTAs' stages. The mistake:
    no cluster barrier before the exit (the last releases reach a peer that may have left)."""
    def release(p: ClusterPipe, c):
        line = nxt()
        c.release()
        return line

    p = ClusterPipe("ring", 2, 2, release, final=not bug)
    return p.k, p.line if bug else None, {"maps": {"ma": {"box_bytes": TILE}}}


def mbarrier_publish_before_write(bug: bool):
    """A 2-CTA exchange published through an mbarrier: each thread stores into the peer's recv
    and arrives (.release.cluster) on the peer's barrier; each CTA waits on its own, then
    reads recv. The mistake: the arrive before the store, so it publishes nothing."""
    ln = Line(bug)
    k = Kernel("mbpub", reqntid=128, reqnctapercluster=(2, 1, 1))
    recv = k.shared_array(t.f32, 128, align=16, name="mrecv")
    bar = k.shared_array(t.b64, 1, align=8, name="mbar")
    with k.if_(k.tid.x == 0):
        ptx.mbarrier_init(k, bar, 128)
        ptx.fence_mbarrier_init(k)
    cluster_sync(k)
    peer = k.xor(k.cluster_ctarank, 1)
    mine = k.add(k.mov(recv), k.shl(k.tid.x, 2))
    rb = ptx.mapa(k, "cluster", k.mov(bar), peer)
    if bug:
        ptx.mbarrier_arrive(k, "release", "cluster", "cluster", rb)
    k.st(Addr(ptx.mapa(k, "cluster", mine, peer)), k.cvt(k.tid.x, t.f32), type=t.f32,
         space="shared::cluster")
    if not bug:
        ptx.mbarrier_arrive(k, "release", "cluster", "cluster", rb)
    ptx.mbarrier_wait(k, bar, 0, sem="acquire", scope="cluster")
    ln.mark()
    v = k.ld(Addr(mine), type=t.f32, space="shared::cta")
    out = k.cvta(k.ld_param(k.param_ptr("out")), "global", to=True)
    k.st(Addr(k.add(out, k.mul(k.mad(k.ctaid.x, 128, k.tid.x), 4, mode="wide"))), v,
         type=t.f32, space="global")
    if bug:
        cluster_sync(k)      # the stores land before the peer leaves (not the mistake)
    k.ret()
    return k, ln.at, {}


def async_vector_bytes(bug: bool):
    """One warp sends 16 bytes a lane to the peer with st.async.v4 (512 bytes). The mistake:
    expect_tx counts 4 bytes a lane (128), as if the store were scalar."""
    k, g, recv, cnt, bar, v = _async_kernel("vec4", 2)
    peer = k.xor(k.cluster_ctarank, 1)
    with k.if_(k.tid.x < 32):
        off = k.shl(k.tid.x, 4)
        rbar = ptx.mapa(k, "cluster", k.mov(bar), peer)
        ptx.st_async(k, ptx.mapa(k, "cluster", k.add(k.mov(recv), off), peer), (v, v, v, v),
                     rbar)
    with k.if_(k.tid.x == 0):
        line = nxt()
        ptx.mbarrier_arrive_expect_tx(k, "release", "cta", "shared::cta", bar,
                                      128 if bug else 512, dst="_")
    ptx.mbarrier_wait(k, bar, 0)
    k.st(Addr(g), k.ld(Addr(k.add(k.mov(recv), k.shl(k.tid.x, 2))), type=t.b32,
                       space="shared::cta"), type=t.b32, space="global")
    k.ret()
    return k, line if bug else None, {}


def percta_store_copy_release(bug: bool):
    """Each CTA copies a template map into its workspace slot with plain st.global, edits the
    box in place, and releases at .cta (the mistake: a later kernel acquires the slot)."""
    k = Kernel("stcopy", reqntid=32)
    ws, tm = k.ld_param(k.param_ptr("ws")), k.ld_param(k.param_ptr("tmpl"))
    slot = k.add(k.cvta(ws, "global", to=True), k.mul(k.ctaid.x, 128, mode="wide"))
    lane4 = k.mul(k.laneid, 4, mode="wide")
    w = k.ld(Addr(k.add(k.cvta(tm, "global", to=True), lane4)), type=t.b32, space="global")
    k.st(Addr(k.add(slot, lane4)), w, type=t.b32, space="global")
    k.syncwarp()
    with k.if_(k.laneid == 0):
        ptx.tensormap_replace_box_dim(k, "global", slot, 0, 64)
    k.syncwarp()
    line = nxt()
    ptx.fence_proxy_tensormap_generic(k, "release", "cta" if bug else "gpu")
    k.ret()
    return k, line if bug else None, {}


def replace_lane0_release_warp(bug: bool):
    """Clean only (`bug` is ignored): lane 0 edits the CTA's map in its workspace slot with
    tensormap.replace, the warp syncs, and every lane releases, acquires and prefetches. The
    whole warp's release covers lane 0's write (it was taken for no release at all:
    tmap-replace-no-release at the acquire)."""
    k = Kernel("rel_warp", reqntid=32)
    ws = k.ld_param(k.param_ptr("ws"))
    slot = k.add(ws, k.mul(k.ctaid.x, 128, mode="wide"))
    with k.if_(k.laneid == 0):
        ptx.tensormap_replace_box_dim(k, "global", k.cvta(slot, "global", to=True), 0, 64)
    k.syncwarp()
    ptx.fence_proxy_tensormap_generic(k, "release", "gpu")
    ptx.fence_proxy_tensormap_generic(k, "acquire", "gpu", slot)
    ptx.cp_async_bulk_prefetch_tensor(k, slot, (0, 0))
    k.ret()
    return k, None, {}


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


# -- C1b: a per-CTA bounds check that lets one CTA of a cluster leave ---------------------------
def _leave_past(k: Kernel, n, per_cta: bool) -> None:
    """A helper: CTAs past the problem leave. The mistake (`per_cta`): the test on %ctaid.x,
    so with n odd one CTA of a 2-CTA cluster leaves and its peer stays; right: on the
    cluster (%clusterid.x * 2 >= n), every CTA of the cluster alike."""
    cond = k.ctaid.x >= n if per_cta else k.shl(k.clusterid.x, 1) >= n
    with k.if_(cond):
        k.ret()


def bounds_exit_pair(bug: bool):
    """A 2-CTA cluster exchanges tiles (rank ^ 1) between two cluster barriers; CTAs past n
    leave at the start (in a helper), CTAs that stay but lie past n skip their store."""
    k = Kernel("pair", reqntid=64, reqnctapercluster=(2, 1, 1))
    n = k.ld_param(k.param(t.u32, "n"))
    io = k.cvta(k.ld_param(k.param_ptr("io")), "global", to=True)
    tile = k.shared_array(t.u32, 64, align=16, name="ptile")
    line = nxt()
    _leave_past(k, n, bug)
    mine = k.add(k.mov(tile), k.shl(k.tid.x, 2))
    g = k.add(io, k.mul(k.mad(k.ctaid.x, 64, k.tid.x), 4, mode="wide"))
    k.st(Addr(mine), k.tid.x, type=t.u32, space="shared::cta")
    cluster_sync(k)
    v = k.ld(Addr(ptx.mapa(k, "cluster", mine, k.xor(k.cluster_ctarank, 1))), type=t.u32,
             space="shared::cluster")
    with k.if_(k.ctaid.x < n):
        k.st(Addr(g), v, type=t.u32, space="global")
    cluster_sync(k)
    k.ret()
    return k, line if bug else None, {}


def bounds_exit_after_publish(bug: bool):
    """A 4-CTA cluster: each CTA publishes its tile, then CTAs whose tile index is past the
    problem leave (the mistake: per CTA, on %ctaid.x, after the cluster barrier); the others
    read the right neighbour's tile ((rank + 1) % 4), which may have left. Twin: the
    staying CTAs keep everyone until the last cluster barrier (no exit; the store is
    predicated)."""
    k = Kernel("publish4", reqntid=64, reqnctapercluster=(4, 1, 1))
    n = k.ld_param(k.param(t.u32, "n"))
    io = k.cvta(k.ld_param(k.param_ptr("io")), "global", to=True)
    tile = k.shared_array(t.f32, 64, align=16, name="qtile")
    mine = k.add(k.mov(tile), k.shl(k.tid.x, 2))
    g = k.add(io, k.mul(k.mad(k.ctaid.x, 64, k.tid.x), 4, mode="wide"))
    k.st(Addr(mine), k.cvt(k.tid.x, t.f32), type=t.f32, space="shared::cta")
    cluster_sync(k)
    line = None
    if bug:
        with k.if_(k.ctaid.x >= n):
            line = nxt()
            k.ret()
    right = k.rem(k.add(k.cluster_ctarank, 1), 4, type=t.u32)
    v = k.ld(Addr(ptx.mapa(k, "cluster", mine, right)), type=t.f32, space="shared::cluster")
    with k.if_(k.ctaid.x < n):
        k.st(Addr(g), v, type=t.f32, space="global")
    cluster_sync(k)
    k.ret()
    return k, line, {}


# -- C3a, FlashAttention-3 style: two rings, two wgmma groups in flight --------------------------
def fa3_release_v_in_flight(bug: bool):
    """Intra-warpgroup overlap: each trip issues S = Q K[j+1]^T, then O += P V[j], and
    wait_group 1 (S retired, PV still running); K[j+1] is released there. The mistake:
    V[j] released there too, while its PV wgmma may still read it; twin: after
    wait_group 0. K and V are MbarrierRings of 2 in one dynamic buffer, Q after them."""
    ln = Line(bug)
    k = Kernel("fa3", reqntid=256)
    mk = k.tensormap_addr(k.param_tensormap("mk"))
    mv = k.tensormap_addr(k.param_tensormap("mv"))
    nb = k.ld_param(k.param(t.u32, "nb"))
    dyn = k.extern_shared("smem", align=1024)
    kr = MbarrierRing(k, 2, storage=Addr(dyn, 0), name="kr")
    vr = MbarrierRing(k, 2, storage=Addr(dyn, 32), name="vr")
    kr.init(sync=False)
    vr.init()
    kt, vt, qt = 1024, 1024 + 2 * TILE, 1024 + 4 * TILE
    with k.if_(k.tid.x == 0):
        kp, vp = kr.producer(), vr.producer()
        with k.for_range(0, nb) as j:
            for p, m, off in ((kp, mk, kt), (vp, mv, vt)):
                p.wait_empty()
                p.arrive_expect_tx(TILE)
                ptx.cp_async_bulk_tensor(k, "shared::cluster", "global",
                                         p.slot(Addr(dyn, off), TILE), m, (0, j),
                                         p.full_barrier())
                p.advance()
    with k.if_(k.tid.x >= 128):
        s_acc, o_acc = k.fragment(t.f32, shape=(64, 64)), k.fragment(t.f32, shape=(64, 64))
        q = k.add(k.mov(dyn), qt)
        kc, vc = kr.consumer(), vr.consumer()

        def mma(acc, b, scale: int) -> None:
            ptx.wgmma_fence(k)
            ptx.wgmma_mma_async(k, acc, descriptor(k, LAY, q), descriptor(k, LAY, b), scale,
                                atype="f16")
            ptx.wgmma_commit_group(k)

        kc.wait_full()
        mma(s_acc, kc.slot(Addr(dyn, kt), TILE), 0)
        ptx.wgmma_wait_group(k, 0)
        with k.if_(k.tid.x == 128):
            kc.release()
        kc.advance()
        with k.for_range(1, nb):
            kc.wait_full()
            mma(s_acc, kc.slot(Addr(dyn, kt), TILE), 0)       # S of block j + 1
            vc.wait_full()
            mma(o_acc, vc.slot(Addr(dyn, vt), TILE), 1)       # O += P V of block j
            ptx.wgmma_wait_group(k, 1)
            with k.if_(k.tid.x == 128):
                kc.release()
                if bug:
                    ln.mark()
                    vc.release()
            kc.advance()
            ptx.wgmma_wait_group(k, 0)
            if not bug:
                with k.if_(k.tid.x == 128):
                    vc.release()
            vc.advance()
        vc.wait_full()
        mma(o_acc, vc.slot(Addr(dyn, vt), TILE), 1)
        ptx.wgmma_wait_group(k, 0)
        with k.if_(k.tid.x == 128):
            vc.release()
    k.ret()
    return k, ln.at, {"maps": KV_MAPS}


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


def kv_views_wrong_ring(bug: bool):
    """K and V MbarrierRings in one dynamic buffer, both walked with their views; the
    consumer waits on the V view's full barrier and reads the K view's slot (the mistake)."""
    ln = Line(bug)
    k = Kernel("kvviews", reqntid=256)
    mk = k.tensormap_addr(k.param_tensormap("mk"))
    mv = k.tensormap_addr(k.param_tensormap("mv"))
    nb = k.ld_param(k.param(t.u32, "nb"))
    dyn = k.extern_shared("smem", align=1024)
    kr = MbarrierRing(k, 2, storage=Addr(dyn, 0), name="kr")
    vr = MbarrierRing(k, 2, storage=Addr(dyn, 32), name="vr")
    kr.init(sync=False)
    vr.init()
    with k.if_(k.tid.x == 0):
        kp, vp = kr.producer(), vr.producer()
        with k.for_range(0, nb) as j:
            for p, m, off in ((kp, mk, 1024), (vp, mv, 1024 + 2 * TILE)):
                p.wait_empty()
                p.arrive_expect_tx(TILE)
                ptx.cp_async_bulk_tensor(k, "shared::cluster", "global",
                                         p.slot(Addr(dyn, off), TILE), m, (0, j),
                                         p.full_barrier())
                p.advance()
    with k.if_(k.tid.x >= 128):
        kc, vc = kr.consumer(), vr.consumer()
        lane = k.shl(k.and_(k.tid.x, 31), 4)
        with k.for_range(0, nb):
            (vc if bug else kc).wait_full()
            ln.mark()
            k.ldmatrix(k.add(kc.slot(Addr(dyn, 1024), TILE), lane), 4)
            if not bug:
                vc.wait_full()
            k.ldmatrix(k.add(vc.slot(Addr(dyn, 1024 + 2 * TILE), TILE), lane), 4)
            with k.if_(k.tid.x == 128):
                kc.release()
                vc.release()
            kc.advance()
            vc.advance()
    k.ret()
    return k, ln.at, {"maps": KV_MAPS}


def ntid_minus_producer_warp(bug: bool):
    """160 threads, warp 0 waits for the 4 consumer warps: the count written %ntid.x - 32
    (128 under .reqntid, every consumer thread) while lane 0 of each consumer warp arrives
    (the mistake); twin: (%ntid.x - 32) / 32."""
    k = Kernel("ntid3", reqntid=160)
    bar = k.shared_array(t.b64, 1, align=8, name="cw")
    with k.if_(k.tid.x == 0):
        rest = k.sub(k.ntid.x, 32)
        ptx.mbarrier_init(k, bar, rest if bug else k.shr(rest, 5))
    k.bar_sync(0)
    with k.if_(k.tid.x >= 32), k.if_(k.laneid == 0):
        line = nxt()
        ptx.mbarrier_arrive(k, bar, dst="_")
    with k.if_(k.tid.x < 32):
        ptx.mbarrier_wait(k, bar, 0)
    k.ret()
    return k, line if bug else None, {}


def ragged_tail_min(bug: bool):
    """A tail written with min: `cnt = min(n - kb * 128, 128)`, and thread t arrives when
    `t < cnt` on a barrier expecting 128 (the mistake: per lane); twin: every thread
    arrives while the chunk exists."""
    k = Kernel("tail3", reqntid=128)
    n = k.ld_param(k.param(t.u32, "n"))
    bar = k.shared_array(t.b64, 1, align=8, name="mb3")
    with k.if_(k.tid.x == 0):
        ptx.mbarrier_init(k, bar, 128)
    k.bar_sync(0)
    nk = k.shr(k.add(n, 127), 7)
    with k.for_range(0, nk) as kb:
        cnt = k.min(k.sub(n, k.shl(kb, 7)), 128)
        with k.if_(k.tid.x < cnt if bug else kb < nk):
            line = nxt()
            ptx.mbarrier_arrive(k, bar, dst="_")
        ptx.mbarrier_wait(k, bar, k.and_(kb, 1))
    k.ret()
    return k, line if bug else None, {}
