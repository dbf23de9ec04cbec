"""Kernels of the issue-29 recall audit: K and V rings in one dynamic buffer, and a
FlashAttention-3-style consumer (audit classes C4, C3); see tests/audit29_kernels.py for the
builders' contract."""

from __future__ import annotations

from ptxdsl import Addr, Kernel, ptx, t
from ptxdsl.instructions.wgmma_desc import descriptor
from ptxdsl.pipeline import MbarrierRing
from tests.audit29_kernels import LAY, TILE, Line

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
