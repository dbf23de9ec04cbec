"""Checker: `ring-refill-unguarded` when one producer thread refills two rings in the same
loop (FlashAttention's K and V, both in one dynamic buffer, inside a persistent loop over
tiles). The wait on one ring's empty barrier does not guard the other ring's refills: with a
stage register per ring (`MbarrierRing` views) the wait's counter is the other ring's; with
one counter for both rings (by hand) the wait last ran on the stage before, a step of the
counter ago. Each mistake has its clean twin."""

from __future__ import annotations

import pytest

from ptxdsl import Addr, Kernel, ptx, t
from ptxdsl.checker import Hazard, check_kernel
from ptxdsl.pipeline import MbarrierRing
from tests.checker_kernels import clean, here, only

KV = 2                                   # stages of each ring
TILE = 8192                              # one K or V tile
BARS = 2 * KV * TILE                     # the barriers after the K and V tiles
MAPS = {"map_k": {"box_bytes": TILE}, "map_v": {"box_bytes": TILE}}


def _persistent_kv(style: str, drop: str | None = None) -> tuple[Kernel, dict[str, int]]:
    """Thread 0 walks the CTA's tiles (`for tile in range(ctaid, ntiles, nctaid)`) and, for
    each, `nblocks` key blocks: a K tile, then a V tile, each after a wait on its ring's
    empty barrier (`drop`: "K" or "V" leaves that wait out). Warpgroup 1 walks the same
    loops: waits on K's full barrier and reads K, then V, and releases both stages.
    `style`: "ring" (two `MbarrierRing`s with their barriers in the buffer, a stage register
    per view) or "hand" (one running counter `it` for both rings: stage `it & 1`). Returns
    the kernel and the lines of the K and V copies."""
    k = Kernel("persistent_kv", reqntid=256)
    maps = {"K": k.tensormap_addr(k.param_tensormap("map_k")),
            "V": k.tensormap_addr(k.param_tensormap("map_v"))}
    ntiles = k.ld_param(k.param(t.u32, "ntiles"))
    nblocks = k.ld_param(k.param(t.u32, "nblocks"))
    dyn = k.extern_shared("dyn", align=1024)
    at = {"K": 0, "V": KV * TILE}
    rings = {}
    if style == "ring":
        rings = {r: MbarrierRing(k, KV, storage=Addr(dyn, BARS + 16 * KV * i), name=r.lower())
                 for i, r in enumerate("KV")}
        rings["K"].init(sync=False)
        rings["V"].init()
    else:
        with k.if_(k.tid.x == 0):
            for off in range(0, 32 * KV, 8):
                ptx.mbarrier_init(k, Addr(dyn, BARS + off), 1)
            ptx.fence_mbarrier_init(k)
        k.bar_sync(0)

    def bar(r: str, which: str, it):
        """By hand: the full or empty barrier of ring r at the stage of counter `it`."""
        off = BARS + 16 * KV * "KV".index(r) + (8 * KV if which == "empty" else 0)
        return k.add(k.mov(dyn), k.add(k.shl(k.and_(it, KV - 1, type=t.b32), 3), off))

    def tile_at(r: str, it):
        stage = k.mul(k.and_(it, KV - 1, type=t.b32), TILE, type=t.u32)
        return k.add(k.mov(dyn), k.add(stage, at[r]))

    def parity(it, producer: bool):
        ph = k.and_(k.shr(it, 1), 1, type=t.b32)
        return k.xor(ph, 1, type=t.b32) if producer else ph

    lines: dict[str, int] = {}
    with k.if_(k.shr(k.tid.x, 5) == 0):
        with k.if_(k.tid.x == 0):
            views = {r: ring.producer() for r, ring in rings.items()}
            it = k.mov(0, type=t.u32)
            with k.for_range(k.ctaid.x, ntiles, k.nctaid.x) as tile:
                with k.for_range(0, nblocks) as j:
                    for r in "KV":
                        if views:
                            p = views[r]
                            if r != drop:
                                p.wait_empty()
                            full, dst = p.full_barrier(), k.add(p.slot(dyn, TILE), at[r])
                        else:
                            if r != drop:
                                ptx.mbarrier_wait(k, bar(r, "empty", it), parity(it, True))
                            full, dst = bar(r, "full", it), tile_at(r, it)
                        ptx.mbarrier_arrive_expect_tx(k, "release", "cta", "shared::cta",
                                                      full, TILE, dst="_")
                        lines[r] = here() + 1
                        ptx.cp_async_bulk_tensor(k, "shared::cluster", "global", dst, maps[r],
                                                 (0, j, tile), full)
                    for p in views.values():
                        p.advance()
                    if not views:
                        k.add(it, 1, dst=it)
    with k.if_(k.shr(k.tid.x, 7) == 1):
        views = {r: ring.consumer() for r, ring in rings.items()}
        it = k.mov(0, type=t.u32)
        lane16 = k.shl(k.and_(k.tid.x, 31), 4)
        with k.for_range(k.ctaid.x, ntiles, k.nctaid.x):
            with k.for_range(0, nblocks):
                for r in "KV":
                    if views:
                        views[r].wait_full()
                        src = k.add(views[r].slot(dyn, TILE), at[r])
                    else:
                        ptx.mbarrier_wait(k, bar(r, "full", it), parity(it, False))
                        src = tile_at(r, it)
                    k.ldmatrix(k.add(src, lane16), 4)
                with k.if_(k.and_(k.tid.x, 127) == 0):
                    for r in "KV":
                        if views:
                            views[r].release()
                        else:
                            ptx.mbarrier_arrive(k, bar(r, "empty", it), dst="_")
                for c in views.values():
                    c.advance()
                if not views:
                    k.add(it, 1, dst=it)
    k.ret()
    return k, lines


@pytest.mark.parametrize("style", ["ring", "hand"])
def test_both_rings_waited_is_clean(style):
    clean(_persistent_kv(style)[0], maps=MAPS)


@pytest.mark.parametrize("style,drop", [("ring", "K"), ("ring", "V"), ("hand", "K")])
def test_refill_guarded_only_by_the_other_rings_wait(style, drop):
    """The wait of one ring dropped: its copies are guarded only by the other ring's wait
    (the V ring's, on the same trip, for K; K's for V), which says nothing of this ring's
    stages, so the loop refills them while a consumer may still read them."""
    k, lines = _persistent_kv(style, drop)
    f = only(check_kernel(k, maps=MAPS), Hazard.RING_REFILL_UNGUARDED, lines[drop])
    assert "waits only on another ring's barriers, never for the consumers" in f.message
    assert [s.role for s in f.sites] == ["copy", "consumer", "other ring's wait"]
