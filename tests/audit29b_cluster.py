"""Cluster kernels of the second recall audit of issue 29 (tests/test_checker_audit29b.py):
clusters of 2 and 4 CTAs along y, the rank read as %cluster_ctaid.y, cluster barriers written
in inline PTX (barrier.cluster.arrive.release.aligned / wait.acquire.aligned), releases and
arrivals in inline PTX on mapa'd barriers. Builders return `(kernel, line, context)`."""

from __future__ import annotations

from ptxdsl import Addr, Kernel, ptx, t
from tests.audit29b_rings import BOX, Plant, arrive, elect, spin

ONE = {"ta": {"box_bytes": BOX}}
SLICE = BOX // 4                                   # a CTA's multicast quarter


def csync(k: Kernel) -> None:
    k.asm("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;")


def _exchange(ctas: int, bug: str | None):
    """`ctas` CTAs along y each publish 64 words, then add a neighbour's (rank ^ 1 for 2,
    (rank + 1) & 3 for 4) read through mapa. `bug`: "early" puts the cluster barrier after
    the read (a barrier before the exit still holds); "exit" drops the barrier before exit."""
    pl = Plant(bug is not None)
    k = Kernel(f"xchg{ctas}", reqntid=64, reqnctapercluster=(1, ctas, 1))
    io = k.cvta(k.ld_param(k.param_ptr("io")), "global", to=True)
    buf = k.shared_array(t.u32, 64, align=16, name="xbuf")
    rank = k.cluster_ctaid.y
    g = k.add(io, k.mul(k.mad(k.ctaid.y, 64, k.tid.x), 4, mode="wide"))
    x = k.ld(Addr(g), type=t.u32, space="global")
    mine = k.add(k.mov(buf), k.shl(k.tid.x, 2))
    k.st(Addr(mine), x, type=t.u32, space="shared::cta")
    if bug != "early":
        csync(k)
    peer = k.xor(rank, 1) if ctas == 2 else k.and_(k.add(rank, 1), 3)
    if bug is not None:
        pl.here()
    y = k.ld(Addr(ptx.mapa(k, "cluster", mine, peer)), type=t.u32, space="shared::cluster")
    k.st(Addr(g), k.add(x, y), type=t.u32, space="global")
    if bug != "exit":
        csync(k)
    k.ret()
    return k, pl.at, {}


def dsmem_read_y2(bug: bool):
    return _exchange(2, "early" if bug else None)


def dsmem_exit_y4(bug: bool):
    return _exchange(4, "exit" if bug else None)


def _release(k: Kernel, empty, s, ctas: int, own_only: bool, pl: Plant,
             whole: bool = False) -> None:
    """A helper: hand stage s back to the producers of the CTAs that wait for it (every CTA's
    producer counts every CTA's consumer warps), one inline remote arrive each."""
    bar = k.add(empty, k.shl(s, 3))
    ranks = [k.cluster_ctaid.y] if own_only else list(range(ctas))
    for r in ranks:
        if whole:     # CUTLASS's ClusterBarrier::arrive(cta_id, pred): mapa inside the asm
            if own_only:
                pl.here()
            k.asm("{\n .reg .pred p;\n .reg .b32 remAddr32;\n setp.eq.u32 p, $2, 1;\n"
                  " @p mapa.shared::cluster.u32 remAddr32, $0, $1;\n"
                  " @p mbarrier.arrive.release.cluster.shared::cluster.b64 _, [remAddr32];\n}",
                  ins=[bar, (r, t.u32), (1, t.u32)])
            continue
        if own_only:
            pl.here()
        k.asm("mbarrier.arrive.release.cluster.shared::cluster.b64 _, [$0];",
              ins=[ptx.mapa(k, "cluster", bar, r)])


def _cluster_ring(bug: str | None, multicast: bool, whole: bool = False):
    """4 CTAs along y, a 3-stage ring per CTA; warpgroup 1's warps read each stage and lane 0
    of each releases it on every CTA (empty counts 4 warps x 4 CTAs). `multicast`: each CTA
    loads a quarter of the stage (box SLICE) and multicasts it to all four, so each full
    barrier receives four slices. `bug`: "own" releases only this CTA (%cluster_ctaid.y:
    the peers' producers hang); "tx" announces only this CTA's slice."""
    pl = Plant(bug is not None)
    ctas, stages = 4, 3
    k = Kernel("cyrel", reqntid=256, reqnctapercluster=(1, ctas, 1))
    ta = k.tensormap_addr(k.param_tensormap("ta"))
    nk = k.ld_param(k.param(t.u32, "nk"))
    tiles = k.shared_array(t.b8, stages * BOX, align=1024, name="ytiles")
    fa = k.shared_array(t.b64, stages, align=8, name="yfull")
    ea = k.shared_array(t.b64, stages, align=8, name="yempty")
    with k.if_(k.tid.x == 0):
        for s in range(stages):
            ptx.mbarrier_init(k, Addr(fa, 8 * s), 1)
            ptx.mbarrier_init(k, Addr(ea, 8 * s), 4 * ctas)
        ptx.fence_mbarrier_init(k)
    csync(k)
    full, empty = k.mov(fa), k.mov(ea)
    rank = k.cluster_ctaid.y
    with k.if_(k.tid.x < 128):
        with k.if_(k.shr(k.tid.x, 5) == 0), k.if_(elect(k)):
            with k.for_range(0, nk) as it:
                s = k.rem(it, stages, type=t.u32)
                ph = k.and_(k.div(it, stages, type=t.u32), 1)
                ptx.mbarrier_wait(k, k.add(empty, k.shl(s, 3)), k.xor(ph, 1), sem="acquire",
                                  scope="cluster")
                fb = k.add(full, k.shl(s, 3))
                if bug == "tx":
                    pl.here()
                k.asm("mbarrier.arrive.expect_tx.shared::cta.b64 _, [$0], $1;",
                      ins=[fb, (SLICE if bug == "tx" else BOX, t.u32)])
                dst = k.add(k.mov(tiles), k.mul(s, BOX, type=t.u32))
                if multicast:
                    ptx.cp_async_bulk_tensor(k, "shared::cluster", "global",
                                             k.add(dst, k.mul(rank, SLICE, type=t.u32)), ta,
                                             (0, k.mad(it, 4, rank)), fb, cta_mask=0xF)
                else:
                    ptx.cp_async_bulk_tensor(k, "shared::cluster", "global", dst, ta, (0, it),
                                             fb)
    with k.else_():
        with k.for_range(0, nk) as it:
            s = k.rem(it, stages, type=t.u32)
            ph = k.and_(k.div(it, stages, type=t.u32), 1)
            spin(k, k.add(full, k.shl(s, 3)), ph)
            k.ldmatrix(k.add(k.add(k.mov(tiles), k.mul(s, BOX, type=t.u32)),
                             k.shl(k.and_(k.tid.x, 31), 4)), 4)
            with k.if_(k.laneid == 0):
                _release(k, empty, s, ctas, bug == "own", pl, whole)
    csync(k)
    k.ret()
    return k, pl.at, {"maps": {"ta": {"box_bytes": SLICE if multicast else BOX}}}


def cluster_y_release_own(bug: bool):
    return _cluster_ring("own" if bug else None, False)


def cluster_y_release_own_asm(bug: bool):
    return _cluster_ring("own" if bug else None, False, whole=True)


def cluster_y_multicast_tx(bug: bool):
    return _cluster_ring("tx" if bug else None, True)


def divergent_warp_arrive(bug: bool):
    """A barrier counting one arrival per warp of the first three warps (init 3); each warp's
    inline-elected lane arrives (inline PTX). The mistake: the guard lets all four warps
    arrive (tid < 128 where 96 was meant), so a phase completes early."""
    pl = Plant(bug)
    k = Kernel("wbar", reqntid=128)
    ta = k.tensormap_addr(k.param_tensormap("ta"))
    tile = k.shared_array(t.b8, BOX, align=1024, name="wtile")
    bar = k.shared_array(t.b64, 1, align=8, name="wdone")
    with k.if_(k.tid.x == 0):
        ptx.mbarrier_init(k, Addr(bar), 3)
        ptx.fence_mbarrier_init(k)
    k.bar_sync(0)
    with k.if_(k.tid.x < (128 if bug else 96)):
        with k.if_(elect(k)):
            pl.here()
            arrive(k, k.mov(bar))
    with k.if_(k.tid.x == 0):
        spin(k, k.mov(bar), 0)
        ptx.cp_async_bulk_tensor(k, "global", "shared::cta", ta, (0, 0), k.mov(tile))
        k.asm("cp.async.bulk.commit_group;\ncp.async.bulk.wait_group 0;")
    k.ret()
    return k, pl.at, {"maps": ONE}


def split_phase_read(bug: bool):
    """ThunderKittens-style split cluster barrier, 2 CTAs along y: each CTA publishes its
    words, arrives (release) at once, does its own work, then waits (acquire) before
    reading the peer's (rank ^ 1). The mistake: the peer read between the arrive and the
    wait (the arrive orders nothing for this CTA's reads)."""
    pl = Plant(bug)
    k = Kernel("split2", reqntid=64, reqnctapercluster=(1, 2, 1))
    io = k.cvta(k.ld_param(k.param_ptr("io")), "global", to=True)
    buf = k.shared_array(t.f32, 64, align=16, name="sbuf")
    g = k.add(io, k.mul(k.mad(k.ctaid.y, 64, k.tid.x), 4, mode="wide"))
    x = k.ld(Addr(g), type=t.f32, space="global")
    mine = k.add(k.mov(buf), k.shl(k.tid.x, 2))
    k.st(Addr(mine), x, type=t.f32, space="shared::cta")
    k.asm("barrier.cluster.arrive.release.aligned;")
    peer = ptx.mapa(k, "cluster", mine, k.xor(k.cluster_ctaid.y, 1))
    sq = k.mul(x, x)
    if bug:
        pl.here()
        y = k.ld(Addr(peer), type=t.f32, space="shared::cluster")
    k.asm("barrier.cluster.wait.acquire.aligned;")
    if not bug:
        y = k.ld(Addr(peer), type=t.f32, space="shared::cluster")
    k.st(Addr(g), k.add(sq, y), type=t.f32, space="global")
    csync(k)
    k.ret()
    return k, pl.at, {}
