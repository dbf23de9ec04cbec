"""Cluster kernels of the issue-29 recall audit: distributed shared memory, remote arrivals, and
st.async / red.async bytes (audit classes C1, C2); see tests/audit29_kernels.py for the
builders' contract."""

from __future__ import annotations

from contextlib import nullcontext

from ptxdsl import Addr, Kernel, ptx, t
from ptxdsl.pipeline import MbarrierRing, cluster_sync
from tests.audit29_kernels import TILE, Line, nxt


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
