"""Cluster kernels of the issue-29 checker tests (tests/test_checker_29_cluster.py): a 2-CTA
split-K that reduces partial tiles through distributed shared memory (read from the peer
with `ld.shared::cluster`; pushed to it with `st.shared::cluster`, `red.shared::cluster` or
st.async / red.async), a cluster exchange in a loop, and a 2-CTA multicast TMA ring (with
MbarrierRing and by hand), each with switches that plant one hazard. The returned `lines`
record the Python line of the statement a finding must name."""

from __future__ import annotations

import sys
from contextlib import nullcontext

from ptxdsl import Addr, Kernel, ptx, t
from ptxdsl.pipeline import MbarrierRing, cluster_sync, tx_bytes

THREADS = 128
TILE = THREADS * 4          # one f32 partial per thread


def _line(lines: dict, name: str) -> None:
    """Record the caller's next line under `name`."""
    lines[name] = sys._getframe(1).f_lineno + 1


def splitk_ld(*, publish: str = "cluster", final: bool = True, reuse: bool | str = False
              ) -> tuple[Kernel, dict]:
    """CTA rank r of a 2-CTA cluster computes the partial tile of its half of K into
    `partial`; CTA 0 reads CTA 1's through mapa + ld.shared::cluster and writes the sum.
    `publish`: what orders CTA 1's writes before CTA 0's reads ("cluster": arrive.release +
    wait.acquire; "relaxed": arrive.relaxed + wait; "cta": bar.sync only). `final`: the
    cluster barrier that keeps CTA 1 alive until CTA 0 has read. `reuse`: every CTA writes
    the next partial into `partial` right after the reduction, with no cluster barrier (CTA
    1's is still being read); "rank0": only CTA 0 does, whose `partial` nobody reads."""
    lines: dict = {}
    k = Kernel("splitk_ld", reqntid=THREADS, reqnctapercluster=(2, 1, 1))
    a_p, out_p = k.param_ptr("a"), k.param_ptr("out")
    partial = k.shared_array(t.f32, THREADS, align=16, name="partial")
    a = k.cvta(k.ld_param(a_p), "global", to=True)
    out = k.cvta(k.ld_param(out_p), "global", to=True)
    tid = k.tid.x
    rank = k.cluster_ctarank
    off = k.shl(tid, 2)
    src = k.add(a, k.mul(k.mad(k.ctaid.x, THREADS, tid), 4, mode="wide"))
    acc = k.ld(Addr(src), type=t.f32, space="global")          # this CTA's partial sum
    mine = k.add(k.mov(partial), off)
    _line(lines, "write")
    k.st(Addr(mine), acc, type=t.f32, space="shared::cta")
    _publish(k, publish)
    with k.if_(rank == 0):
        peer = ptx.mapa(k, "cluster", mine, 1)
        _line(lines, "read")
        other = k.ld(Addr(peer), type=t.f32, space="shared::cluster")
        total = k.add(k.ld(Addr(mine), type=t.f32, space="shared::cta"), other)
        dst = k.add(out, k.mul(k.mad(k.clusterid.x, THREADS, tid), 4, mode="wide"))
        k.st(Addr(dst), total, type=t.f32, space="global")
    if reuse:
        with k.if_(rank == 0) if reuse == "rank0" else nullcontext():
            _line(lines, "reuse")
            k.st(Addr(mine), k.add(acc, acc), type=t.f32, space="shared::cta")
    if final:
        cluster_sync(k)
    k.ret()
    return k, lines


def _publish(k: Kernel, how: str) -> None:
    """What orders one CTA's shared writes before another CTA's reads (see splitk_ld)."""
    if how == "cluster":
        cluster_sync(k)
    elif how == "relaxed":
        ptx.barrier_cluster_arrive(k, "relaxed")
        ptx.barrier_cluster_wait(k)
    else:
        k.bar_sync(0)


def splitk_push(*, publish: str = "cluster") -> tuple[Kernel, dict]:
    """Each CTA of a 2-CTA cluster stores its partial tile into the other's `recv` with
    st.shared::cluster through mapa (rank ^ 1); after `publish` each reads what it received
    and writes its own sum. No remote access follows that barrier, so no final one is
    needed. `publish="mbarrier"`: instead of a cluster barrier, every thread arrives
    (.release.cluster) on the peer's barrier, and each CTA waits on its own."""
    lines: dict = {}
    k = Kernel("splitk_push", reqntid=THREADS, reqnctapercluster=(2, 1, 1))
    a_p, out_p = k.param_ptr("a"), k.param_ptr("out")
    recv = k.shared_array(t.f32, THREADS, align=16, name="recv")
    tid = k.tid.x
    a = k.cvta(k.ld_param(a_p), "global", to=True)
    acc = k.ld(Addr(k.add(a, k.mul(k.mad(k.ctaid.x, THREADS, tid), 4, mode="wide"))),
               type=t.f32, space="global")
    mine = k.add(k.mov(recv), k.shl(tid, 2))
    peer = k.xor(k.cluster_ctarank, 1)
    if publish.startswith("mbarrier"):   # every peer thread arrives on this CTA's barrier
        bar = k.shared_array(t.b64, 1, align=8, name="bar")
        with k.if_(tid == 0):
            ptx.mbarrier_init(k, bar, THREADS)
            ptx.fence_mbarrier_init(k)
        cluster_sync(k)
    k.st(Addr(ptx.mapa(k, "cluster", mine, peer)), acc, type=t.f32, space="shared::cluster")
    if publish.startswith("mbarrier"):
        # "mbarrier-relaxed": the arrive publishes nothing
        ptx.mbarrier_arrive(k, "relaxed" if publish.endswith("relaxed") else "release",
                            "cluster", "cluster", ptx.mapa(k, "cluster", k.mov(bar), peer))
        ptx.mbarrier_wait(k, bar, 0, sem="acquire", scope="cluster")
    else:
        _publish(k, publish)
    _line(lines, "read")
    got = k.ld(Addr(mine), type=t.f32, space="shared::cta")
    out = k.cvta(k.ld_param(out_p), "global", to=True)
    k.st(Addr(k.add(out, k.mul(k.mad(k.ctaid.x, THREADS, tid), 4, mode="wide"))),
         k.add(acc, got), type=t.f32, space="global")
    k.ret()
    return k, lines


def splitk_red(*, publish: str = "cluster") -> tuple[Kernel, dict]:
    """Each CTA of a 2-CTA cluster adds its partial tile into CTA 0's `acc` with
    red.shared::cluster.add through mapa; after `publish` CTA 0 reads the sums and writes
    them. No remote access follows that barrier, so no final one is needed."""
    lines: dict = {}
    k = Kernel("splitk_red", reqntid=THREADS, reqnctapercluster=(2, 1, 1))
    a_p, out_p = k.param_ptr("a"), k.param_ptr("out")
    acc = k.shared_array(t.f32, THREADS, align=16, name="acc")
    tid = k.tid.x
    mine = k.add(k.mov(acc), k.shl(tid, 2))
    with k.if_(k.cluster_ctarank == 0):
        k.st(Addr(mine), k.mov(0.0, type=t.f32), type=t.f32, space="shared::cta")
    cluster_sync(k)                      # CTA 0's zeros are in place before any red
    a = k.cvta(k.ld_param(a_p), "global", to=True)
    part = k.ld(Addr(k.add(a, k.mul(k.mad(k.ctaid.x, THREADS, tid), 4, mode="wide"))),
                type=t.f32, space="global")
    k.red("add", Addr(ptx.mapa(k, "cluster", mine, 0)), part, type=t.f32,
          space="shared::cluster")
    _publish(k, publish)
    with k.if_(k.cluster_ctarank == 0):
        _line(lines, "read")
        total = k.ld(Addr(mine), type=t.f32, space="shared::cta")
        out = k.cvta(k.ld_param(out_p), "global", to=True)
        k.st(Addr(k.add(out, k.mul(k.mad(k.clusterid.x, THREADS, tid), 4, mode="wide"))),
             total, type=t.f32, space="global")
    k.ret()
    return k, lines


def splitk_async(*, expect: str = "both", final: bool = True, exchange: bool = False
                 ) -> tuple[Kernel, dict]:
    """CTA 1 sends its partial tile to CTA 0 with st.async (4 bytes a thread) and counts its
    contributions into CTA 0's `seen` with red.async (4 bytes a thread), both completing on
    CTA 0's barrier; CTA 0 announces the bytes with expect_tx, waits, and writes the sum.
    `expect`: "both" (1024 bytes), "st" (512: the red.async bytes forgotten). `exchange`:
    both CTAs send to each other (rank ^ 1) and both reduce, with no branch on the rank."""
    lines: dict = {}
    k = Kernel("splitk_async", reqntid=THREADS, reqnctapercluster=(2, 1, 1))
    a_p, out_p = k.param_ptr("a"), k.param_ptr("out")
    recv = k.shared_array(t.f32, THREADS, align=16, name="recv")
    seen = k.shared_array(t.u32, THREADS, align=16, name="seen")
    bar = k.shared_array(t.b64, 1, align=8, name="bar")
    tid = k.tid.x
    rank = k.cluster_ctarank
    with k.if_(tid == 0):
        ptx.mbarrier_init(k, bar, 1)
        ptx.fence_mbarrier_init(k)
    cluster_sync(k)                      # CTA 0's barrier is ready before CTA 1 sends
    a = k.cvta(k.ld_param(a_p), "global", to=True)
    src = k.add(a, k.mul(k.mad(k.ctaid.x, THREADS, tid), 4, mode="wide"))
    acc = k.ld(Addr(src), type=t.f32, space="global")
    off = k.shl(tid, 2)

    def only(r):   # every CTA sends and receives in an exchange
        return nullcontext() if exchange else k.if_(rank == r)

    peer = k.xor(rank, 1) if exchange else 0
    with only(1):
        rbar = ptx.mapa(k, "cluster", k.mov(bar), peer)
        ptx.st_async(k, ptx.mapa(k, "cluster", k.add(k.mov(recv), off), peer), acc, rbar)
        ptx.red_async(k, "add", ptx.mapa(k, "cluster", k.add(k.mov(seen), off), peer),
                      k.mov(1, type=t.u32), rbar)
    with only(0):
        with k.if_(tid == 0):
            _line(lines, "expect")
            ptx.mbarrier_arrive_expect_tx(k, "release", "cta", "shared::cta", bar,
                                          2 * TILE if expect == "both" else TILE, dst="_")
        ptx.mbarrier_wait(k, bar, 0)
        got = k.ld(Addr(k.add(k.mov(recv), off)), type=t.f32, space="shared::cta")
        out = k.cvta(k.ld_param(out_p), "global", to=True)
        dst = k.add(out, k.mul(k.mad(k.clusterid.x, THREADS, tid), 4, mode="wide"))
        k.st(Addr(dst), k.add(acc, got), type=t.f32, space="global")
    if final:
        cluster_sync(k)
    k.ret()
    return k, lines


MC_THREADS = 160            # warp 0 produces, warps 1-4 consume
MC_ROWS, MC_COLS = 16, 32
MC_TILE = MC_ROWS * MC_COLS * 4


def multicast_ring(*, release: str = "all", final: bool = True, by_hand: bool = False
                   ) -> tuple[Kernel, dict]:
    """A 2-CTA cluster streams tiles through a 2-stage ring: each CTA loads its half of the
    tile and multicasts it to both; each consumer warp releases the stage on both CTAs
    (`release="all"`), or only on its own (`"own"`: the peer's empty barrier never
    completes). `by_hand`: the same ring written with mbarriers, mapa and arrives instead of
    MbarrierRing; with it, `"lanes"`: lane r of each consumer warp releases CTA r's stage,
    `"lane0"`: only lane 0 does (CTA 1's stage is never released)."""
    lines: dict = {}
    ctas = 2
    k = Kernel("mc_ring", reqntid=MC_THREADS, reqnctapercluster=(ctas, 1, 1))
    tmap_p = k.param_tensormap("tmap")
    n = k.ld_param(k.param(t.u32, "n"))
    tiles = k.shared_array(t.b8, 2 * MC_TILE, align=1024, name="tiles")
    rank = k.cluster_ctarank
    rows = MC_ROWS // ctas
    if by_hand:
        full = k.shared_array(t.b64, 2, align=8, name="full")
        empty = k.shared_array(t.b64, 2, align=8, name="empty")
        with k.if_(k.tid.x == 0):
            for s in range(2):
                ptx.mbarrier_init(k, Addr(full, 8 * s), 1)
                ptx.mbarrier_init(k, Addr(empty, 8 * s), 4 * ctas)
            ptx.fence_mbarrier_init(k)
        cluster_sync(k)
    else:
        ring = MbarrierRing(k, 2, empty_count=4, peers=ctas)
        ring.init()
    with k.if_(k.tid.x == 0):
        tmap = k.tensormap_addr(tmap_p)
        with k.for_range(0, n) as i:
            if by_hand:
                s = k.and_(i, 1, type=t.b32)
                ph = k.xor(k.and_(k.shr(i, 1, type=t.b32), 1, type=t.b32), 1, type=t.b32)
                ptx.mbarrier_wait(k, k.add(k.mov(empty), k.shl(s, 3)), ph)
                fb = k.add(k.mov(full), k.shl(s, 3))
                ptx.mbarrier_arrive_expect_tx(k, "release", "cta", "shared::cta", fb,
                                              MC_TILE, dst="_")
                slot = k.add(k.mov(tiles), k.mul(s, MC_TILE, type=t.u32))
            else:
                p = ring.producer()
                p.wait_empty()
                p.arrive_expect_tx(tx_bytes(((rows, MC_COLS), t.u32), multicast=ctas))
                fb, slot = p.full_barrier(), p.slot(tiles, MC_TILE)
            dst = k.add(slot, k.mul(rank, rows * MC_COLS * 4))
            ptx.cp_async_bulk_tensor(k, "shared::cluster", "global", dst, tmap,
                                     (0, k.mad(i, MC_ROWS, k.mul(rank, rows))), fb,
                                     cta_mask=(1 << ctas) - 1)
            if not by_hand:
                p.advance()
    with k.else_():
        with k.if_(k.tid.x >= 32):
            if not by_hand:
                c = ring.consumer()
            with k.for_range(0, n) as i:
                if by_hand:
                    s = k.and_(i, 1, type=t.b32)
                    ph = k.and_(k.shr(i, 1, type=t.b32), 1, type=t.b32)
                    ptx.mbarrier_wait(k, k.add(k.mov(full), k.shl(s, 3)), ph)
                    slot = k.add(k.mov(tiles), k.mul(s, MC_TILE, type=t.u32))
                else:
                    c.wait_full()
                    slot = c.slot(tiles, MC_TILE)
                k.ld(Addr(k.add(slot, k.shl(k.tid.x, 2))), type=t.u32, space="shared::cta")
                k.syncwarp()
                if by_hand:
                    _release_by_hand(k, lines, release, k.add(k.mov(empty), k.shl(s, 3)),
                                     rank, ctas)
                else:
                    with k.if_(k.and_(k.tid.x, 31) == 0):
                        _line(lines, "release")
                        c.release(ctas=[rank] if release == "own" else list(range(ctas)))
                if not by_hand:
                    c.advance()
    if final:
        _line(lines, "final")
        cluster_sync(k)
    k.ret()
    return k, lines


def _release_by_hand(k: Kernel, lines: dict, release: str, eb, rank, ctas: int) -> None:
    """A consumer warp's release of stage barrier `eb` (see multicast_ring)."""
    lane = k.and_(k.tid.x, 31)
    if release in ("lanes", "lane0"):   # CUTLASS-style: lane r releases CTA r's stage
        with k.if_(lane < (ctas if release == "lanes" else 1)):
            _line(lines, "release")
            ptx.mbarrier_arrive(k, "release", "cluster", "cluster",
                                ptx.mapa(k, "cluster", eb, lane))
        return
    with k.if_(lane == 0):
        for r in [rank] if release == "own" else range(ctas):
            _line(lines, "release")
            ptx.mbarrier_arrive(k, "release", "cluster", "cluster",
                                ptx.mapa(k, "cluster", eb, r))


def exchange_loop(*, sync: str = "builders", second: bool = True, double: bool = False
                  ) -> tuple[Kernel, dict]:
    """Every iteration each CTA writes its value into `buf`, a cluster barrier publishes it,
    and each CTA reads its peer's (rank ^ 1) through mapa. `sync`: the publishing barrier as
    builders or as inline PTX ("asm"). `second`: the cluster barrier after the read that keeps
    the next iteration's write from overwriting what the peer is still reading. `double`:
    `buf` has two halves used in turn (`i & 1`), so the next iteration writes the other half
    and the one barrier of the iteration after it orders the reuse."""
    lines: dict = {}
    k = Kernel("exchange_loop", reqntid=64, reqnctapercluster=(2, 1, 1))
    n = k.ld_param(k.param(t.u32, "n"))
    buf = k.shared_array(t.u32, 128 if double else 64, align=16, name="buf")
    total = k.mov(0, type=t.u32)
    with k.for_range(0, n) as i:
        half = k.shl(k.and_(i, 1, type=t.b32), 8) if double else 0
        mine = k.add(k.add(k.mov(buf), half), k.shl(k.tid.x, 2))
        peer = ptx.mapa(k, "cluster", mine, k.xor(k.cluster_ctarank, 1))
        _line(lines, "write")
        k.st(Addr(mine), i, type=t.u32, space="shared::cta")
        if sync == "asm":
            k.asm("barrier.cluster.arrive.release.aligned;\n"
                  "barrier.cluster.wait.acquire.aligned;", requires=("8.0", "sm_90"))
        else:
            cluster_sync(k)
        k.add(total, k.ld(Addr(peer), type=t.u32, space="shared::cluster"), dst=total)
        if second:
            cluster_sync(k)
    if not second:
        cluster_sync(k)
    k.ret()
    return k, lines


def splitk_gather(*, stay: bool = True) -> tuple[Kernel, dict]:
    """CTA 0 of a 2-CTA cluster gathers CTA 1's partial tile (ld.shared::cluster) and writes
    the sum; CTA 1 has nothing left to do and returns early, after (`stay`) a second cluster
    barrier that CTA 0 reaches only once it has read, or (not `stay`) at once, while CTA 0
    may still be reading its tile."""
    lines: dict = {}
    k = Kernel("splitk_gather", reqntid=THREADS, reqnctapercluster=(2, 1, 1))
    a_p, out_p = k.param_ptr("a"), k.param_ptr("out")
    partial = k.shared_array(t.f32, THREADS, align=16, name="partial")
    tid = k.tid.x
    a = k.cvta(k.ld_param(a_p), "global", to=True)
    acc = k.ld(Addr(k.add(a, k.mul(k.mad(k.ctaid.x, THREADS, tid), 4, mode="wide"))),
               type=t.f32, space="global")
    mine = k.add(k.mov(partial), k.shl(tid, 2))
    k.st(Addr(mine), acc, type=t.f32, space="shared::cta")
    cluster_sync(k)
    with k.if_(k.cluster_ctarank != 0):
        if stay:
            cluster_sync(k)             # CTA 0 arrives here only after its reads
        _line(lines, "exit")
        k.ret()
    other = k.ld(Addr(ptx.mapa(k, "cluster", mine, 1)), type=t.f32, space="shared::cluster")
    out = k.cvta(k.ld_param(out_p), "global", to=True)
    k.st(Addr(k.add(out, k.mul(k.mad(k.clusterid.x, THREADS, tid), 4, mode="wide"))),
         k.add(acc, other), type=t.f32, space="global")
    cluster_sync(k)
    k.ret()
    return k, lines
