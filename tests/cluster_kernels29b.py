"""Cluster kernels of tests/test_checker_29_cluster2.py: the bytes of an mbarrier phase that
come from several CTAs, where the waiting thread's own path does not show them all. A
warp-specialized exchange whose producer warp announces the st.async / red.async bytes its
peer sends (by hand, 2 or 4 CTAs; and on an MbarrierRing, in a loop), multicast loads only
some ranks issue, a MoE-style hand-out whose producer announces the peer's bytes with an
expect_tx through mapa; and a gather through the generic forms of mapa, ld and st. The
returned `lines` record the Python line a finding must name."""

from __future__ import annotations

import sys

from ptxdsl import Addr, Kernel, ptx, t
from ptxdsl.pipeline import MbarrierRing, cluster_sync

BOX = 256                      # bytes of one TMA box (maps=MAPS)
MAPS = {"tmap": {"box_bytes": BOX}}


def _line(lines: dict, name: str) -> None:
    """Record the caller's next line under `name`."""
    lines[name] = sys._getframe(1).f_lineno + 1


def _peer(k: Kernel, ctas: int):
    """The rank this CTA sends to: its pair (rank ^ 1), or the next around the ring."""
    rank = k.cluster_ctarank
    return k.xor(rank, 1) if ctas == 2 else k.and_(k.add(rank, 1), ctas - 1)


def _init(k: Kernel, bar, count: int = 1) -> None:
    with k.if_(k.tid.x == 0):
        ptx.mbarrier_init(k, bar, count)
        ptx.fence_mbarrier_init(k)
    cluster_sync(k)


def exchange(*, ctas: int = 2, tx: int = 256) -> tuple[Kernel, dict]:
    """Warp 0 of every CTA sends one f32 per lane into the peer's `recv` (st.async) and
    counts it into the peer's `seen` (red.async), both completing on the peer's barrier;
    lane 0 announces on this CTA's barrier the bytes its own peer sends it (32 x 8 = 256);
    warp 1 waits and reads. `tx=128`: the red.async bytes forgotten."""
    lines: dict = {}
    k = Kernel("exchange", reqntid=64, reqnctapercluster=(ctas, 1, 1))
    recv = k.shared_array(t.f32, 32, align=16, name="recv")
    seen = k.shared_array(t.u32, 32, align=16, name="seen")
    bar = k.shared_array(t.b64, 1, align=8, name="bar")
    _init(k, bar)
    off = k.shl(k.and_(k.tid.x, 31), 2)
    with k.if_(k.tid.x < 32):
        peer = _peer(k, ctas)
        rbar = ptx.mapa(k, "cluster", k.mov(bar), peer)
        ptx.st_async(k, ptx.mapa(k, "cluster", k.add(k.mov(recv), off), peer),
                     k.mov(1.0, type=t.f32), rbar)
        ptx.red_async(k, "add", ptx.mapa(k, "cluster", k.add(k.mov(seen), off), peer),
                      k.mov(1, type=t.u32), rbar)
        with k.if_(k.tid.x == 0):
            _line(lines, "expect")
            ptx.mbarrier_arrive_expect_tx(k, "release", "cta", "shared::cta", bar, tx, dst="_")
    with k.else_():
        ptx.mbarrier_wait(k, bar, 0)
        k.ld(Addr(k.add(k.mov(recv), off)), type=t.f32, space="shared::cta")
    cluster_sync(k)
    k.ret()
    return k, lines


SLOT = 256                     # one stage: 32 lanes x (st.async f32 + red.async u32) = 32 x 8


def push_ring(*, tx: int = 256) -> tuple[Kernel, dict]:
    """A 2-CTA push ring on an MbarrierRing: every iteration warp 0 of each CTA fills a stage
    of its peer's ring (st.async of the values, red.async of a count, both on the peer's
    full barrier) after its own empty-wait, which the peer's consumers release remotely;
    lane 0 announces on its own full barrier the bytes the peer pushes into it. Warp 1 waits,
    reads, and releases the stage on the CTA that filled it. `tx=128`: the red.async bytes
    forgotten."""
    lines: dict = {}
    k = Kernel("push_ring", reqntid=64, reqnctapercluster=(2, 1, 1))
    n = k.ld_param(k.param(t.u32, "n"))
    data = k.shared_array(t.b8, 2 * SLOT, align=16, name="data")
    ring = MbarrierRing(k, 2)
    ring.init(sync=False)
    cluster_sync(k)
    peer = k.xor(k.cluster_ctarank, 1)
    lane = k.and_(k.tid.x, 31)
    with k.if_(k.tid.x < 32):
        p = ring.producer()
        with k.for_range(0, n):
            p.wait_empty()
            with k.if_(lane == 0):
                _line(lines, "expect")
                p.arrive_expect_tx(tx)
            rbar = ptx.mapa(k, "cluster", p.full_barrier(), peer)
            at = k.add(p.slot(data, SLOT), k.shl(lane, 3))
            ptx.st_async(k, ptx.mapa(k, "cluster", at, peer), k.mov(1.0, type=t.f32), rbar)
            ptx.red_async(k, "add", ptx.mapa(k, "cluster", k.add(at, 4), peer),
                          k.mov(1, type=t.u32), rbar)
            p.advance()
    with k.else_():
        c = ring.consumer()
        with k.for_range(0, n):
            c.wait_full()
            k.ld(Addr(k.add(c.slot(data, SLOT), k.shl(lane, 3))), type=t.f32,
                 space="shared::cta")
            k.syncwarp()
            with k.if_(lane == 0):
                c.release(ctas=[peer])
            c.advance()
    cluster_sync(k)
    k.ret()
    return k, lines


def rank_multicast(*, ctas: int = 2, wrong: bool = False) -> tuple[Kernel, dict]:
    """Multicast loads that only some ranks issue. 2 CTAs: CTA 0 multicasts its box to both
    and CTA 1 loads one of its own, so CTA 1 receives two boxes (`wrong`: CTA 1 announces
    one). 4 CTAs: ranks 0 and 1 each multicast a box to every CTA, which all announce two
    (`wrong`: the mask 0b0011 leaves ranks 2 and 3 without theirs)."""
    lines: dict = {}
    k = Kernel("rank_multicast", reqntid=64, reqnctapercluster=(ctas, 1, 1))
    tmap = k.tensormap_addr(k.param_tensormap("tmap"))
    tile = k.shared_array(t.b8, 2 * BOX, align=128, name="tile")
    bar = k.shared_array(t.b64, 1, align=8, name="bar")
    _init(k, bar)
    rank = k.cluster_ctarank
    with k.if_(k.tid.x == 0):
        if ctas == 2:
            with k.if_(rank == 0):
                _line(lines, "expect0")
                ptx.mbarrier_arrive_expect_tx(k, "release", "cta", "shared::cta", bar, BOX,
                                              dst="_")
                ptx.cp_async_bulk_tensor(k, "shared::cluster", "global", tile, tmap, (0, 0),
                                         bar, cta_mask=0b11)
            with k.else_():
                _line(lines, "expect")
                ptx.mbarrier_arrive_expect_tx(k, "release", "cta", "shared::cta", bar,
                                              BOX if wrong else 2 * BOX, dst="_")
                ptx.cp_async_bulk_tensor(k, "shared::cluster", "global", Addr(tile, BOX),
                                         tmap, (0, 1), bar)
        else:
            _line(lines, "expect")
            ptx.mbarrier_arrive_expect_tx(k, "release", "cta", "shared::cta", bar, 2 * BOX,
                                          dst="_")
            with k.if_(k.and_(rank, 2) == 0):
                dst = k.add(k.mov(tile), k.mul(rank, BOX))
                ptx.cp_async_bulk_tensor(k, "shared::cluster", "global", dst, tmap, (0, rank),
                                         bar, cta_mask=0b0011 if wrong else 0b1111)
    ptx.mbarrier_wait(k, bar, 0)
    cluster_sync(k)
    k.ret()
    return k, lines


ITEM = 4                       # the st.async'd work item that goes out with each stage


def hand_out(*, ring: bool = False, item: bool = True, rank_of_peer: str = "const"
             ) -> tuple[Kernel, dict]:
    """The MoE sample's hand-out in a 2-CTA cluster: rank 0's producer alone loads for
    both CTAs (box A multicast to both, box B for itself, box B' for the peer through a mask
    of the peer only), st.async's a work item into the peer, and announces the peer's bytes
    with an arrive.expect_tx through mapa (its own with a local one). Both CTAs' consumers
    wait. `item=False`: the peer's announcement forgets the item's 4 bytes. `ring`: the same
    in a loop on an MbarrierRing whose stages both CTAs' consumers release (else by hand,
    once). `rank_of_peer`: the peer's rank as a constant 1 ("const") or `rank ^ 1`."""
    lines: dict = {}
    k = Kernel("hand_out", reqntid=64, reqnctapercluster=(2, 1, 1))
    tmap = k.tensormap_addr(k.param_tensormap("tmap"))
    n = k.ld_param(k.param(t.u32, "n"))
    tiles = k.shared_array(t.b8, 2 * 2 * BOX, align=128, name="tiles")
    items = k.shared_array(t.u32, 2, align=8, name="items")
    rank = k.cluster_ctarank
    peer = 1 if rank_of_peer == "const" else k.xor(rank, 1)
    if ring:
        r = MbarrierRing(k, 2, empty_count=1, peers=2)
        r.init()
    else:
        bar = k.shared_array(t.b64, 1, align=8, name="bar")
        _init(k, bar)

    def produce(fb, slot, item_at):
        ptx.mbarrier_arrive_expect_tx(k, "release", "cta", "shared::cta", fb, 2 * BOX,
                                      dst="_")
        peer_bar = ptx.mapa(k, "shared::cluster", fb, peer)
        _line(lines, "expect")
        ptx.mbarrier_arrive_expect_tx(k, "release", "cta", "shared::cluster", peer_bar,
                                      2 * BOX + (ITEM if item else 0))
        ptx.st_async(k, ptx.mapa(k, "shared::cluster", item_at, peer),
                     k.mov(7, type=t.u32), peer_bar)
        ptx.cp_async_bulk_tensor(k, "shared::cluster", "global", slot, tmap, (0, 0), fb,
                                 cta_mask=0b11)
        ptx.cp_async_bulk_tensor(k, "shared::cluster", "global", k.add(slot, BOX), tmap,
                                 (0, 1), fb)
        ptx.cp_async_bulk_tensor(k, "shared::cluster", "global", k.add(slot, BOX), tmap,
                                 (0, 2), fb, cta_mask=0b10)

    lane = k.and_(k.tid.x, 31)
    with k.if_(k.tid.x < 32):
        with k.if_(k.setp("eq", k.or_(k.tid.x, rank), 0, type=t.u32)):
            if ring:
                p = r.producer()
                with k.for_range(0, n):
                    p.wait_empty()
                    produce(p.full_barrier(), p.slot(tiles, 2 * BOX),
                            k.add(k.mov(items), k.shl(p.stage, 2)))
                    p.advance()
            else:
                produce(k.mov(bar), k.mov(tiles), k.mov(items))
    with k.else_():
        if ring:
            c = r.consumer()
            with k.for_range(0, n):
                c.wait_full()
                k.ld(Addr(k.add(c.slot(tiles, 2 * BOX), k.shl(lane, 2))), type=t.u32,
                     space="shared::cta")
                k.syncwarp()
                with k.if_(lane == 0):
                    c.release()
                c.advance()
        else:
            ptx.mbarrier_wait(k, bar, 0)
            k.ld(Addr(k.add(k.mov(tiles), k.shl(lane, 2))), type=t.u32, space="shared::cta")
    cluster_sync(k)
    k.ret()
    return k, lines


def generic_gather(*, ctas: int = 2, publish: str = "cluster", final: bool = True,
                   push: bool = False) -> tuple[Kernel, dict]:
    """Each CTA writes its partial into `partial` with st.shared; then, through the generic
    forms (`mapa` of a generic address, a generic ld), CTA 0 reads CTA 1's (2 CTAs), or every
    CTA reads the next one's (4 CTAs: `(rank + 1) & 3`, the offset added after the mapa).
    `push`: instead, every CTA stores into the next one's `partial` with a generic st and
    reads its own. `publish`: "cluster" (arrive.release + wait.acquire) or "relaxed"
    (orders nothing); `final`: the cluster barrier that keeps a CTA alive while it is read."""
    lines: dict = {}
    k = Kernel("generic_gather", reqntid=128, reqnctapercluster=(ctas, 1, 1))
    partial = k.shared_array(t.f32, 128, align=16, name="partial")
    off = k.shl(k.tid.x, 2)
    mine = k.add(k.mov(partial), off)
    if push:
        there = k.add(ptx.mapa(k, "generic", k.generic_addr(partial), _peer(k, ctas)),
                      k.cvt(off, t.u64))
        _line(lines, "write")
        k.st(Addr(there), k.mov(1.0, type=t.f32), type=t.f32, space="generic")
    else:
        _line(lines, "write")
        k.st(Addr(mine), k.mov(1.0, type=t.f32), type=t.f32, space="shared::cta")
    if publish == "cluster":
        cluster_sync(k)
    else:
        ptx.barrier_cluster_arrive(k, "relaxed")
        ptx.barrier_cluster_wait(k)
    if push:
        _line(lines, "read")
        k.ld(Addr(mine), type=t.f32, space="shared::cta")
    elif ctas == 2:
        with k.if_(k.cluster_ctarank == 0):
            peer = ptx.mapa(k, "generic", k.add(k.generic_addr(partial), k.cvt(off, t.u64)), 1)
            _line(lines, "read")
            k.ld(Addr(peer), type=t.f32, space="generic")
    else:
        peer = ptx.mapa(k, "generic", k.generic_addr(partial), _peer(k, ctas))
        _line(lines, "read")
        k.ld(Addr(k.add(peer, k.cvt(off, t.u64))), type=t.f32, space="generic")
    if final:
        cluster_sync(k)
    k.ret()
    return k, lines


def either_order(*, expect: int = 2 * BOX, short: bool = False) -> tuple[Kernel, dict]:
    """CTA 0 multicasts two boxes to both CTAs, in one order or the other by a run-time
    flag (the MoE producer's `if mpair` picks which operand goes to both): each CTA
    receives 512 bytes whichever branch runs, and announces `expect`. `short`: the else arm
    loads one box only (right or wrong by the flag)."""
    lines: dict = {}
    k = Kernel("either_order", reqntid=64, reqnctapercluster=(2, 1, 1))
    tmap = k.tensormap_addr(k.param_tensormap("tmap"))
    flag = k.setp("ne", k.ld_param(k.param(t.u32, "flag")), 0, type=t.u32)
    tile = k.shared_array(t.b8, 2 * BOX, align=128, name="tile")
    bar = k.shared_array(t.b64, 1, align=8, name="bar")
    _init(k, bar)

    def load(box: int) -> None:
        ptx.cp_async_bulk_tensor(k, "shared::cluster", "global", Addr(tile, box * BOX), tmap,
                                 (0, box), bar, cta_mask=0b11)

    with k.if_(k.tid.x == 0):
        _line(lines, "expect")
        ptx.mbarrier_arrive_expect_tx(k, "release", "cta", "shared::cta", bar, expect, dst="_")
        with k.if_(k.cluster_ctarank == 0):
            with k.if_(flag):
                load(0)
                load(1)
            with k.else_():
                load(1)
                if not short:
                    load(0)
    ptx.mbarrier_wait(k, bar, 0)
    cluster_sync(k)
    k.ret()
    return k, lines


def announced_by_peer(*, tx: int = BOX) -> tuple[Kernel, dict]:
    """CTA 1 loads a box into its own tile with a bulk copy on its own barrier, and CTA 0
    announces those bytes for it with an arrive.expect_tx through mapa (rank 1): CTA 1's path
    shows the bytes, CTA 0's path the announcement. `tx=128`: half the box announced."""
    lines: dict = {}
    k = Kernel("announced_by_peer", reqntid=32, reqnctapercluster=(2, 1, 1))
    src = k.cvta(k.ld_param(k.param_ptr("src")), "global", to=True)
    tile = k.shared_array(t.b8, BOX, align=128, name="tile")
    bar = k.shared_array(t.b64, 1, align=8, name="bar")
    _init(k, bar)
    rank = k.cluster_ctarank
    with k.if_(k.tid.x == 0):
        with k.if_(rank == 0):
            _line(lines, "expect")
            ptx.mbarrier_arrive_expect_tx(k, "release", "cta", "shared::cluster",
                                          ptx.mapa(k, "shared::cluster", k.mov(bar), 1), tx)
        with k.else_():
            ptx.cp_async_bulk(k, "shared::cluster", "global", tile, src, BOX, bar)
    with k.if_(rank == 1):
        ptx.mbarrier_wait(k, bar, 0)
    cluster_sync(k)
    k.ret()
    return k, lines
