"""Checker: `bulk-src-overwrite` across a CTA barrier. A bulk store still pending in the
thread that issued it at a `bar.sync` may still read its source after the barrier: the
barrier orders the other threads' later writes after the store's issue, not after its read.
Each mistake is reported at the write (id and Python line asserted, the barrier among the
sites), each clean twin checks clean while its mistake does not, and the kernels' PTX read
back by the front end gives the same findings."""

from __future__ import annotations

import pytest

from ptxdsl import Kernel, ptx, t
from ptxdsl.checker import Hazard, check_kernel
from ptxdsl.checker.context import Context
from ptxdsl.pipeline import MbarrierRing
from tests.checker_kernels import Tma, clean, here, only
from tests.parsed_check import differences

SLICE, STAGE = 128, 256    # the bytes a warp stores in `slices`; a buffer of `ring`


def _store(k: Kernel, tmap, src, coords=(0, 0)) -> None:
    ptx.cp_async_bulk_tensor(k, "global", "shared::cta", tmap, coords, src)
    ptx.cp_async_bulk_commit_group(k)


def one_tile(how: str) -> tuple[Kernel, int]:
    """Every thread fills the 512-byte tile, tid 32 TMA-stores it, all meet at `bar.sync 0`,
    then thread 0 writes the tile again:

    - "unwaited": tid 32 waits for the store's read only at the end (`wait_group 0`);
    - "read0": tid 32's `wait_group.read 0` before the barrier (clean);
    - "load": tid 0's write is the next tile's TMA load into the tile (no wait_group);
    - "load_read0": the same with tid 32's `wait_group.read 0` before the barrier (clean).

    Returns the kernel and the line of the write a finding names."""
    e = Tma()
    k = e.k
    e.setup()
    e.fill()
    ptx.fence_proxy_async(k, "shared::cta")
    k.bar_sync(0)
    with k.if_(k.tid.x == 32):
        _store(k, e.tmap, e.tile)
        if how.endswith("read0"):
            ptx.cp_async_bulk_wait_group_read(k, 0)
    k.bar_sync(0)
    with k.if_(k.tid.x == 0):
        if how.startswith("load"):
            line = here() + 1
            ptx.cp_async_bulk_tensor(k, "shared::cluster", "global", e.tile, e.tmap, (0, 1),
                                     e.bar)
            ptx.mbarrier_arrive_expect_tx(k, "release", "cta", "shared::cta", e.bar, 512,
                                          dst="_")
        else:
            line = here() + 1
            k.st(e.tile, 0, type=t.u32, space="shared::cta")      # the next tile's data
    with k.if_(k.tid.x == 32):
        ptx.cp_async_bulk_wait_group(k, 0)
    k.ret()
    return k, line


def ring(how: str) -> tuple[Kernel, int]:
    """A loop over a ring of two 256-byte buffers: warp 0 fills buffer `cur`, all meet at
    `bar.sync 0`, tid 32 TMA-stores it, all meet again, and `cur` toggles, so warp 0 fills
    the other buffer next:

    - "ring_unwaited": tid 32 waits for its stores only after the loop: at the second
      barrier the previous trip's store, from the buffer warp 0 fills next, may still read;
    - "ring_read1": tid 32's `wait_group.read 1` before that barrier retires the previous
      trip's store (clean: warp 0 fills the buffer the barrier's pending store does not
      read)."""
    k = Kernel("ring", reqntid=64)
    buf = k.shared_array(t.b8, 2 * STAGE, align=128, name="buf")
    tmap = k.tensormap_addr(k.param_tensormap("tmap"))
    n = k.ld_param(k.param(t.u32, "n"))
    cur = k.mov(0, type=t.u32)
    line = 0
    with k.for_range(0, n) as j:
        stage = k.add(k.mov(buf), k.mul(cur, STAGE))
        with k.if_(k.tid.x < 32):
            line = here() + 1
            k.st(k.add(stage, k.shl(k.tid.x, 2)), j, type=t.u32, space="shared::cta")
        ptx.fence_proxy_async(k, "shared::cta")
        k.bar_sync(0)
        with k.if_(k.tid.x == 32):
            _store(k, tmap, stage, (0, j))
            if how == "ring_read1":
                ptx.cp_async_bulk_wait_group_read(k, 1)
        k.bar_sync(0)
        k.xor(cur, 1, dst=cur)
    with k.if_(k.tid.x == 32):
        ptx.cp_async_bulk_wait_group(k, 0)
    k.ret()
    return k, line


def slices(how: str) -> tuple[Kernel, int]:
    """Warp w's slice of the tile is `tile + w * 128`: tid 32 (warp 1) TMA-stores its slice
    and waits only at the end, all meet at `bar.sync 0`, then warp 0 writes a slice:

    - "own_slice": its own (clean: the store's bytes over the thread that runs it, warp 1's
      slice, and the write's over warp 0, its slice, are disjoint, although over the whole
      CTA both addresses reach the whole tile);
    - "other_slice": warp 1's, which the store may still read."""
    e = Tma()
    k = e.k
    warp, lane = k.shr(k.tid.x, 5), k.and_(k.tid.x, 31)
    own = k.add(k.mov(e.tile), k.mul(warp, SLICE))
    with k.if_(k.tid.x == 32):
        _store(k, e.tmap, own)
    k.bar_sync(0)
    with k.if_(warp == 0):
        at = own if how == "own_slice" else k.add(own, SLICE)
        line = here() + 1
        k.st(k.add(at, k.shl(lane, 2)), 0, type=t.u32, space="shared::cta")
    with k.if_(k.tid.x == 32):
        ptx.cp_async_bulk_wait_group(k, 0)
    k.ret()
    return k, line


def build(how: str) -> tuple[Kernel, int]:
    if how.startswith("ring"):
        return ring(how)
    return slices(how) if how.endswith("slice") else one_tile(how)


def maps(how: str) -> dict:
    """The checker's context: the box of each kernel's map (what one store reads)."""
    box = SLICE if how.endswith("slice") else STAGE if how.startswith("ring") else 512
    return {"tmap": {"box_bytes": box}}


# each clean kernel and the mistake it differs from by the one thing the rule judges
CLEAN = {"read0": "unwaited", "load_read0": "load", "ring_read1": "ring_unwaited",
         "own_slice": "other_slice"}
MISTAKES = ["unwaited", "load", "ring_unwaited", "other_slice"]


def _ids(how: str) -> list[str]:
    return [f.id for f in check_kernel(build(how)[0], maps=maps(how))]


@pytest.mark.parametrize("how", CLEAN)
def test_write_after_the_store_read_or_elsewhere_is_clean(how):
    clean(build(how)[0], maps=maps(how))
    assert _ids(CLEAN[how]) == ["bulk-src-overwrite"]     # (its twin is not)


@pytest.mark.parametrize("how", MISTAKES)
def test_write_after_a_barrier_the_store_was_pending_at(how):
    k, line = build(how)
    f = only(check_kernel(k, maps=maps(how)), Hazard.BULK_SRC_OVERWRITE, line)
    assert [s.role for s in f.sites] == ["write", "store", "barrier"]
    assert f.sites[0].ptx.startswith("cp.async.bulk.tensor" if how == "load" else "st.shared")
    assert f.sites[1].ptx.startswith("cp.async.bulk.tensor.2d.global.shared::cta")
    assert f.sites[2].ptx.startswith("bar.sync")
    assert "other threads issued" in f.message and "retired its group at the CTA barrier " \
        "since: the barrier orders the write after the store's issue, not after its read" \
        in f.message


def test_the_barrier_named_is_the_one_the_store_was_pending_at():
    """In the ring the store of one trip is pending at the barrier that follows it; the
    finding names that barrier (the second of the loop), not the one before the store."""
    k, _ = ring("ring_unwaited")
    f = check_kernel(k, maps=maps("ring_unwaited"))[0]
    bars = [s.loc.line for s in f.sites if s.role == "barrier"]
    store = next(s.loc.line for s in f.sites if s.role == "store")
    assert len(bars) == 1 and bars[0] > store


@pytest.mark.parametrize("how", [*CLEAN, *MISTAKES])
def test_parsed_ptx_is_judged_alike(how):
    """The rule reads only instructions (stores, commits, waits, barriers, writes): the
    kernel's PTX read back by the front end gives the same findings."""
    assert differences(build(how)[0], Context.make(maps=maps(how))) == []
    assert _ids(how) == ([] if how in CLEAN else ["bulk-src-overwrite"])



def piped(wait: bool) -> Kernel:
    """One loop over a two-stage ring in every thread of the CTA: tid 0 waits for an empty
    stage and TMA-loads block j into it, all wait for it, tid 32 stores it (`wait_group.read
    1` after, with `wait`), all meet at `bar.sync 0`, and tid 64 releases the previous
    stage through a cursor a block behind (the first block peeled). The producer's copies
    are let in by those releases: a store still pending at the barrier is judged at the
    release (`bulk-src-released`), not again at the copy, whose stage the checker cannot
    relate to the store's (the producer's and the consumers' cursors)."""
    k = Kernel("piped", reqntid=128)
    ring = MbarrierRing(k, 2)
    tiles = k.shared_array(t.b8, 2 * STAGE, align=1024, name="tiles")
    ring.init()
    tin = k.tensormap_addr(k.param_tensormap("map_in"))
    tout = k.tensormap_addr(k.param_tensormap("tmap"))
    blocks = k.ld_param(k.param(t.u32, "blocks"))
    p, c, behind = ring.producer(), ring.consumer(), ring.consumer()

    def block(j, *, first: bool) -> None:
        with k.if_(k.tid.x == 0):
            p.wait_empty()
            p.arrive_expect_tx(STAGE)
            ptx.cp_async_bulk_tensor(k, "shared::cluster", "global", p.slot(tiles, STAGE),
                                     tin, (0, j), p.full_barrier())
            p.advance()
        c.wait_full()
        with k.if_(k.tid.x == 32):
            _store(k, tout, c.slot(tiles, STAGE), (0, j))
            if wait and not first:
                ptx.cp_async_bulk_wait_group_read(k, 1)
        c.advance()

    block(0, first=True)
    with k.for_range(1, blocks) as j:
        block(j, first=False)
        k.bar_sync(0)
        with k.if_(k.tid.x == 64):
            behind.release()
        behind.advance()
    with k.if_(k.tid.x == 32):
        ptx.cp_async_bulk_wait_group(k, 0)
    k.ret()
    return k


def test_copy_let_in_by_a_release_is_judged_at_the_release():
    context = {"maps": {"map_in": {"box_bytes": STAGE}, "tmap": {"box_bytes": STAGE}}}
    clean(piped(wait=True), **context)
    assert differences(piped(wait=True), Context.make(**context)) == []
    found = check_kernel(piped(wait=False), **context)
    assert [f.id for f in found] == ["bulk-src-released"], [f.format() for f in found]
    assert [s.role for s in found[0].sites] == ["arrive", "store", "barrier"]
