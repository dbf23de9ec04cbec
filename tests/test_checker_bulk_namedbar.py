"""Checker: `bulk-src-overwrite` and `bulk-src-released` across a named barrier's
`bar.arrive` and its partners' `bar.sync` on another branch (the warp-specialized epilogue:
warpgroup 0 TMA-stores a buffer and arrives without waiting, warpgroup 1 syncs and then
writes the buffer or releases its ring stage). The pair orders warpgroup 1's write after the
store's issue, not after its read. Each mistake is reported at the write or release (id
and Python line asserted, the arrive among the sites), each clean twin checks clean while
its mistake does not, and the kernels' PTX read back by the front end gives the same
findings."""

from __future__ import annotations

import pytest

from ptxdsl import Kernel, ptx, t
from ptxdsl.checker import Hazard, check_kernel
from ptxdsl.checker.context import Context
from ptxdsl.pipeline import MbarrierRing
from tests.checker_kernels import Tma, clean, here, only
from tests.parsed_check import differences

STAGE = 256   # the bytes of a ring stage (and of the looped kernels' tile)


def _store(k: Kernel, tmap, src, coords=(0, 0), *, read0: bool = False) -> None:
    """Thread 0 TMA-stores `src` and commits (with `read0`: waits for the store's read)."""
    with k.if_(k.tid.x == 0):
        ptx.cp_async_bulk_tensor(k, "global", "shared::cta", tmap, coords, src)
        ptx.cp_async_bulk_commit_group(k)
        if read0:
            ptx.cp_async_bulk_wait_group_read(k, 0)


def _drain(k: Kernel) -> None:
    with k.if_(k.tid.x == 0):
        ptx.cp_async_bulk_wait_group(k, 0)
    k.ret()


def handoff(how: str) -> tuple[Kernel, int]:
    """Warpgroup 0's thread 0 TMA-stores the 512-byte tile, and warpgroup 0 `bar.arrive 1,
    256`; in the other branch warpgroup 1 `bar.sync 1, 256`, then its thread 128 writes:

    - "unwaited": st.shared into the tile (the store waits for its read only at the end);
    - "load": a TMA load into the tile;
    - "read0", "load_read0": the same after `wait_group.read 0` before the arrive (clean);
    - "sibling_read0": as "read0", and thread 32 of warpgroup 0 writes the tile after the
      arrive (reported: the retirement is handed to the partners' sync, not to the
      waiting thread's siblings, which the arrive does not order);
    - "other_buffer": st.shared into another buffer (clean: disjoint bytes);
    - "other_id": `bar.sync 2, 256`, no partner of the arrive (no pairing: the model
      reports both barriers, which never complete, and no store is pending at the sync).

    Returns the kernel and the line of the write a finding names."""
    e = Tma(threads=256)
    k = e.k
    other = k.shared_array(t.b8, 512, align=128, name="other")
    e.setup()
    e.fill()
    ptx.fence_proxy_async(k, "shared::cta")
    k.bar_sync(0)
    wg = k.shr(k.tid.x, 7)
    with k.if_(wg == 0):
        _store(k, e.tmap, e.tile, read0=how.endswith("read0"))
        k.bar_arrive(1, 256)
        if how == "sibling_read0":
            with k.if_(k.tid.x == 32):
                sibling = here() + 1
                k.st(e.tile, 0, type=t.u32, space="shared::cta")
    with k.else_():
        k.bar_sync(2 if how == "other_id" else 1, 256)
        with k.if_(k.tid.x == 128):
            if how.startswith("load"):
                line = here() + 1
                ptx.cp_async_bulk_tensor(k, "shared::cluster", "global", e.tile, e.tmap,
                                         (0, 1), e.bar)
                ptx.mbarrier_arrive_expect_tx(k, "release", "cta", "shared::cta", e.bar,
                                              512, dst="_")
            else:
                line = here() + 1
                k.st(other if how == "other_buffer" else e.tile, 0, type=t.u32,
                     space="shared::cta")
    _drain(k)
    return (k, sibling) if how == "sibling_read0" else (k, line)


def _turns(k: Kernel, wg, mine, theirs) -> None:
    """The ping-pong's turns (FA3's): warpgroup 0 waits for its turn on barrier 2 and, with
    `mine` (the store), hands the turn on barrier 1 without waiting; warpgroup 1 waits on
    barrier 1, runs `theirs` and hands the turn back on barrier 2 (pre-arrived once before
    the loop, so warpgroup 0 goes first)."""
    with k.if_(wg == 0):
        k.bar_sync(2, 256)
        mine()
        k.bar_arrive(1, 256)
    with k.else_():
        k.bar_sync(1, 256)
        theirs()
        k.bar_arrive(2, 256)


def pingpong(how: str) -> tuple[Kernel, int]:
    """A loop of ping-pong turns (`_turns`): warpgroup 0's thread 0 TMA-stores the tile,
    warpgroup 1's thread 128 refills it, so the next trip's store reads the new data:

    - "loop_unwaited": the store waits for its read only after the loop;
    - "loop_read0": `wait_group.read 0` before each arrive (clean)."""
    k = Kernel("pingpong", reqntid=256)
    tile = k.shared_array(t.b8, STAGE, align=128, name="tile")
    tmap = k.tensormap_addr(k.param_tensormap("tmap"))
    n = k.ld_param(k.param(t.u32, "n"))
    wg = k.shr(k.tid.x, 7)
    with k.if_(wg == 1):
        k.bar_arrive(2, 256)
    line = 0
    with k.for_range(0, n) as j:

        def refill() -> None:
            nonlocal line
            with k.if_(k.tid.x == 128):
                line = here() + 1
                k.st(tile, j, type=t.u32, space="shared::cta")
            ptx.fence_proxy_async(k, "shared::cta")

        _turns(k, wg, lambda: _store(k, tmap, tile, (0, j), read0=how == "loop_read0"),
               refill)
    _drain(k)
    return k, line


def released(how: str) -> tuple[Kernel, int]:
    """A loop over a two-stage ring: thread 255 waits for an empty stage and TMA-loads block j
    into it; all wait for it; in ping-pong turns (`_turns`) warpgroup 0's thread 0
    TMA-stores the stage, then warpgroup 1's thread 128 releases it (a count-less arrive on
    its empty barrier):

    - "ring_unwaited": the store waits for its read only after the loop;
    - "ring_read0": `wait_group.read 0` before the arrive (clean)."""
    k = Kernel("released", reqntid=256)
    ring = MbarrierRing(k, 2)
    tiles = k.shared_array(t.b8, 2 * STAGE, align=1024, name="tiles")
    ring.init()
    tin = k.tensormap_addr(k.param_tensormap("map_in"))
    tout = k.tensormap_addr(k.param_tensormap("tmap"))
    blocks = k.ld_param(k.param(t.u32, "blocks"))
    p, c = ring.producer(), ring.consumer()
    wg = k.shr(k.tid.x, 7)
    with k.if_(wg == 1):
        k.bar_arrive(2, 256)
    line = 0
    with k.for_range(0, blocks) as j:
        with k.if_(k.tid.x == 255):
            p.wait_empty()
            p.arrive_expect_tx(STAGE)
            ptx.cp_async_bulk_tensor(k, "shared::cluster", "global", p.slot(tiles, STAGE),
                                     tin, (0, j), p.full_barrier())
            p.advance()
        c.wait_full()

        def release() -> None:
            nonlocal line
            with k.if_(k.tid.x == 128):
                line = here() + 1
                c.release()

        _turns(k, wg, lambda: _store(k, tout, c.slot(tiles, STAGE), (0, j),
                                     read0=how == "ring_read0"), release)
        c.advance()
    _drain(k)
    return k, line


def build(how: str) -> tuple[Kernel, int]:
    if how.startswith("loop"):
        return pingpong(how)
    return released(how) if how.startswith("ring") else handoff(how)


def maps(how: str) -> dict:
    """The checker's context: the box of each kernel's maps (what one copy moves)."""
    if how.startswith("ring"):
        return {"tmap": {"box_bytes": STAGE}, "map_in": {"box_bytes": STAGE}}
    return {"tmap": {"box_bytes": STAGE if how.startswith("loop") else 512}}


# the rule each mistake breaks
MISTAKES = {"unwaited": Hazard.BULK_SRC_OVERWRITE, "load": Hazard.BULK_SRC_OVERWRITE,
            "loop_unwaited": Hazard.BULK_SRC_OVERWRITE,
            "ring_unwaited": Hazard.BULK_SRC_RELEASED}
# each clean kernel and the mistake it differs from by the one thing the rule judges
CLEAN = {"read0": "unwaited", "load_read0": "load", "other_buffer": "unwaited",
         "loop_read0": "loop_unwaited", "ring_read0": "ring_unwaited"}


def _ids(how: str) -> list[str]:
    return [f.id for f in check_kernel(build(how)[0], maps=maps(how))]


@pytest.mark.parametrize("how", MISTAKES)
def test_write_after_the_partners_sync_while_the_store_reads(how):
    k, line = build(how)
    f = only(check_kernel(k, maps=maps(how)), MISTAKES[how], line)
    roles = ["arrive", "store", "barrier"] if how.startswith("ring") else \
        ["write", "store", "barrier"]
    assert [s.role for s in f.sites] == roles
    assert f.sites[1].ptx.startswith("cp.async.bulk.tensor.2d.global.shared::cta")
    assert f.sites[2].ptx.startswith("bar.arrive 1, 256")
    assert "other threads issued" in f.message
    # (the barrier named by its kind: the arrive, not a CTA barrier)
    who = "these threads" if how.startswith("ring") else "this thread"
    assert "at the named barrier's bar.arrive 1 (whose partner bar.sync " \
        f"{who} ran) since: the named barrier orders the " in f.message
    assert "CTA barrier since" not in f.message


@pytest.mark.parametrize("how", CLEAN)
def test_store_retired_before_the_arrive_or_other_bytes_is_clean(how):
    clean(build(how)[0], maps=maps(how))
    assert _ids(CLEAN[how]) == [MISTAKES[CLEAN[how]].value]     # (its twin is not)


def test_retirement_is_told_to_the_partners_only():
    """The wait before the arrive frees the tile for warpgroup 1 (past its sync), not for
    the waiting thread's siblings after the arrive, which does not wait."""
    k, line = build("sibling_read0")
    f = only(check_kernel(k, maps=maps("sibling_read0")), Hazard.BULK_SRC_OVERWRITE, line)
    assert [s.role for s in f.sites] == ["write", "store", "wait"]


def test_a_sync_on_another_id_is_no_partner():
    """`bar.sync 2` after `bar.arrive 1`: the model pairs them with nothing, so the arrive
    carries no store to the sync; what it reports is the barriers themselves (each id has
    only one warpgroup's arrivals for its 256 threads: neither completes)."""
    found = check_kernel(build("other_id")[0], maps=maps("other_id"))
    assert [(f.id, f.sites[0].ptx) for f in found] == [
        ("named-barrier-count", "bar.arrive 1, 256;"),
        ("named-barrier-count", "bar.sync 2, 256;")], [f.format() for f in found]


@pytest.mark.parametrize("how", [*MISTAKES, *CLEAN, "other_id", "sibling_read0"])
def test_parsed_ptx_is_judged_alike(how):
    """The rules read only instructions (stores, commits, waits, barriers, writes): the
    kernel's PTX read back by the front end gives the same findings."""
    assert differences(build(how)[0], Context.make(maps=maps(how))) == []
