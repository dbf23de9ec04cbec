"""Checker precision: correct kernels the checker once flagged (a consumer branch's store
coordinate, one leader thread written two ways, a producer that skips its first wait on each
stage), each next to the real bug of the same shape, which must still be reported."""

from __future__ import annotations

import pytest

from ptxdsl import Addr, Kernel, ptx, t
from ptxdsl.checker import Hazard, check_kernel
from tests.checker_kernels import here, ids, only


# -- a store coordinate taken under the branch that runs the store ---------------------------------
def _consumer_store(first: int, *, in_producer: bool = False) -> tuple[Kernel, int]:
    """Warpgroup 0 produces, warpgroups 1.. consume; consumer warpgroup `wg - first` stores
    its 64 rows from its leader thread (or the producer branch does, with the same row)."""
    k = Kernel("k", reqntid=256)
    tmap = k.tensormap_addr(k.param_tensormap("map_c"))
    stg = k.shared_array(t.b8, 4096, align=128, name="stg")
    wg = k.shr(k.tid.x, 7)
    line = 0

    def store():
        nonlocal line
        row = k.mul(k.sub(wg, first), 64)
        with k.if_(k.and_(k.tid.x, 127) == 0):
            line = here() + 1
            ptx.cp_async_bulk_tensor(k, "global", "shared::cta", tmap, (0, row), stg)
            ptx.cp_async_bulk_commit_group(k)
            ptx.cp_async_bulk_wait_group(k, 0)

    with k.if_(wg == 0):
        if in_producer:
            store()
    with k.else_():
        if not in_producer:
            store()
    return k, line


def test_store_coordinate_non_negative_in_the_threads_that_store():
    k, _ = _consumer_store(1)             # wg >= 1 in the else branch: wg - 1 >= 0
    assert check_kernel(k, maps={"map_c": {"box_bytes": 4096}}) == []


def test_store_coordinate_negative_in_the_threads_that_store():
    k, line = _consumer_store(2)          # warpgroup 1 stores at row -64
    f = only(check_kernel(k, maps={"map_c": {"box_bytes": 4096}}),
              Hazard.TMA_STORE_NEGATIVE_COORD, line)
    assert "as low as -64" in f.message


def test_store_coordinate_negative_in_the_branch_that_stores():
    k, line = _consumer_store(1, in_producer=True)   # warpgroup 0: wg - 1 = -1
    f = only(check_kernel(k, maps={"map_c": {"box_bytes": 4096}}),
              Hazard.TMA_STORE_NEGATIVE_COORD, line)
    assert "as low as -64" in f.message


# -- one leader thread, two spellings --------------------------------------------------------------
def _lead(k: Kernel, how: str, body) -> None:
    """Run `body` in one thread of the 256-thread CTA, chosen by `how`."""
    tid = k.tid.x
    if how == "elect":                     # CUTLASS's elect_one_sync in warp 0
        with k.if_(k.shr(tid, 5) == 0):
            with k.if_(k.elect_sync()):
                body()
        return
    cond = {"tid0": lambda: tid == 0,
            "tid32": lambda: tid == 32,
            "warp0_lane0": lambda: k.and_(k.shr(tid, 5) == 0, k.laneid == 0),
            "and127": lambda: k.and_(tid, 127) == 0,
            "rem128": lambda: k.rem(tid, 128) == 0,
            "warp_elect": lambda: k.and_(k.shr(tid, 5) == 0, k.elect_sync())}[how]()
    with k.if_(cond):
        body()


def _epilogue(store_lead: str, wait_lead: str) -> tuple[Kernel, dict[str, int]]:
    """A persistent epilogue: every thread writes the staging tile, one leader stores it
    and commits; the next tile's writes come after `wait_lead` waits for the read and a
    bar.sync, and `wait_lead` waits for the last store before the exit."""
    k = Kernel("k", reqntid=256)
    tmap = k.tensormap_addr(k.param_tensormap("map_c"))
    n = k.ld_param(k.param(t.u32, "n"))
    stg = k.shared_array(t.b8, 1024, align=128, name="stg")
    lines = {}
    with k.for_range(0, n) as i:
        _lead(k, wait_lead, lambda: ptx.cp_async_bulk_wait_group_read(k, 0))
        k.bar_sync(0)
        lines["write"] = here() + 1
        k.st(k.add(k.mov(stg), k.shl(k.tid.x, 2)), i, type=t.u32, space="shared::cta")
        ptx.fence_proxy_async(k, "shared::cta")
        k.bar_sync(0)

        def store():
            lines["store"] = here() + 1
            ptx.cp_async_bulk_tensor(k, "global", "shared::cta", tmap, (0, i), stg)
            ptx.cp_async_bulk_commit_group(k)
        _lead(k, store_lead, store)
    _lead(k, wait_lead, lambda: ptx.cp_async_bulk_wait_group(k, 0))
    return k, lines


@pytest.mark.parametrize("store_lead, wait_lead", [
    ("tid0", "warp0_lane0"), ("warp0_lane0", "tid0"), ("elect", "elect"),
    ("elect", "warp_elect"), ("and127", "rem128")])
def test_one_leader_spelled_two_ways_owns_its_bulk_groups(store_lead, wait_lead):
    # and127/rem128 pick threads 0 and 128 both times: each waits for its own groups.
    k, _ = _epilogue(store_lead, wait_lead)
    assert check_kernel(k, maps={"map_c": {"box_bytes": 1024}}) == []


def test_another_thread_waiting_does_not_retire_the_leaders_groups():
    k, lines = _epilogue("tid0", "tid32")
    found = check_kernel(k, maps={"map_c": {"box_bytes": 1024}})
    assert ids(found) == ["bulk-group-not-waited", "bulk-src-overwrite"], \
        [f.format() for f in found]
    over = next(f for f in found if f.id == "bulk-src-overwrite")
    assert over.loc.line == lines["write"]


def test_elected_lane_is_not_assumed_to_be_lane_0():
    # The PTX ISA promises only that one membermask elects the same lane every time, not
    # which lane: thread 0's wait_group does not provably cover the elected thread's groups.
    k, _ = _epilogue("elect", "tid0")
    assert ids(check_kernel(k, maps={"map_c": {"box_bytes": 1024}})) == [
        "bulk-group-not-waited", "bulk-src-overwrite"]


# -- a producer that skips its first wait on each stage ------------------------------------------
def _ring(skip: str = "i>=S", stages: int = 2, outer: bool = False) -> tuple[Kernel, int]:
    """Thread 0 refills a ring of `stages` TMA stages, waiting on the stage's empty barrier
    only `if <skip>`; warp 1 consumes. `outer`: a second loop around the producer's that
    starts its counter at 0 again. Returns the kernel and the load's line."""
    k = Kernel("k", reqntid=64)
    tmap = k.tensormap_addr(k.param_tensormap("tmap"))
    n = k.ld_param(k.param(t.u32, "n"))
    full = k.shared_array(t.b64, stages, align=8, name="full")
    empty = k.shared_array(t.b64, stages, align=8, name="empty")
    tiles = k.shared_array(t.b8, 512 * stages, align=1024, name="tiles")
    with k.if_(k.tid.x == 0):
        for s in range(stages):
            ptx.mbarrier_init(k, Addr(full, 8 * s), 1)
            ptx.mbarrier_init(k, Addr(empty, 8 * s), 1)
    k.bar_sync(0)

    def stage(i):
        return k.rem(i, stages, type=t.u32)

    def phase(i):
        return k.and_(k.div(i, stages, type=t.u32), 1, type=t.b32)

    line = 0

    def produce():
        nonlocal line
        with k.for_range(0, n) as i:
            s = stage(i)
            cond = {"i>=S": lambda: i >= stages, "S<=i": lambda: k.setp("le", stages, i),
                    "i>S-1": lambda: i > stages - 1, "i>=S+1": lambda: i >= stages + 1,
                    "i==1": lambda: i == 1}[skip]()
            with k.if_(cond):
                ptx.mbarrier_wait(k, k.add(k.mov(empty), k.shl(s, 3)), k.xor(phase(i), 1))
            bar = k.add(k.mov(full), k.shl(s, 3))
            ptx.mbarrier_arrive_expect_tx(k, "release", "cta", "shared::cta", bar, 512, dst="_")
            line = here() + 1
            ptx.cp_async_bulk_tensor(k, "shared::cluster", "global",
                                     k.add(k.mov(tiles), k.shl(s, 9)), tmap, (0, i), bar)

    with k.if_(k.tid.x == 0):
        if outer:
            with k.for_range(0, n):
                produce()
        else:
            produce()
    with k.else_():
        with k.if_(k.tid.x >= 32):
            with k.for_range(0, n) as i:
                s = stage(i)
                ptx.mbarrier_wait(k, k.add(k.mov(full), k.shl(s, 3)), phase(i))
                k.ld(k.add(k.mov(tiles), k.add(k.shl(s, 9), k.shl(k.laneid, 2))),
                     type=t.u32, space="shared::cta")
                k.syncwarp()
                with k.if_(k.laneid == 0):
                    ptx.mbarrier_arrive(k, k.add(k.mov(empty), k.shl(s, 3)), dst="_")
    return k, line


@pytest.mark.parametrize("skip, stages", [("i>=S", 2), ("i>=S", 3), ("S<=i", 2),
                                          ("i>S-1", 2)])
def test_wait_skipped_on_the_first_pass_guards_the_refill(skip, stages):
    k, _ = _ring(skip, stages)
    assert check_kernel(k, maps={"tmap": {"box_bytes": 512}}) == []


@pytest.mark.parametrize("skip, outer", [("i>=S+1", False), ("i==1", False), ("i>=S", True)])
def test_wait_skipped_beyond_the_first_pass_leaves_the_refill_unguarded(skip, outer):
    # i >= S+1 refills stage 0 at i = S unguarded; i == 1 is no ring pass at all; an outer
    # loop restarting the counter skips the wait on stages still in use.
    k, line = _ring(skip, outer=outer)
    only(check_kernel(k, maps={"tmap": {"box_bytes": 512}}), Hazard.RING_REFILL_UNGUARDED, line)
