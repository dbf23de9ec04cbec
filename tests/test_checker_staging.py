"""Checker: a TMA ring's stage area reused as staging once the ring is drained (as an
epilogue stages its tile through the Q/dO stages of samples/flash_attention_bwd.py: a
barrier, each thread's stores, a barrier, loads of other threads' bytes). The loads read the
threads' stores, not the copies, so the ring rules (`smem-read-before-wait`,
`wait-wrong-barrier`) leave them alone; each way of getting it wrong is still reported (id and
Python line asserted): no barrier between the stores and the loads, stores elsewhere in the
buffer, a persistent loop whose next tile loads into the stages during the staging, stores
over copies nobody waited for, and a copy issued over the stores."""

from __future__ import annotations

import pytest

from ptxdsl import Addr, Kernel, ptx, t
from ptxdsl.checker import Hazard, check_kernel
from ptxdsl.checker.context import Context
from ptxdsl.pipeline import MbarrierRing
from tests.checker_kernels import clean, here, only, produce_blocks, tiles_loop
from tests.parsed_check import differences

S, STAGE = 4, 1024
MAPS = {"map_q": {"box_bytes": STAGE}, "map_k": {"box_bytes": STAGE}}


def staging(mistake: str = "", *, k_first: bool = False) -> tuple[Kernel, int]:
    """256 threads: thread 0 fills an S-stage ring of `STAGE`-byte tiles with TMA (in
    `tiles`), warpgroup 1 sums its 4-byte column of each tile, then stages the sums through
    the stage area: a barrier of the warpgroup, a 16-byte store per thread at tid * 16, the
    barrier, a load of the neighbour's (tid ^ 1) bytes, a global store. `k_first`: a tile
    loaded once after the stages, waited before the loop (the backward's K and V: the waits
    before the staging are then on another barrier than the ring's). The mistakes: "nosync"
    (no barrier between the stores and the loads), "elsewhere" (the stores go to the last
    stage's top half while the loads read the first stage), "persistent" (both sides loop
    over tiles, and the next tile's first stages are refilled while this one stages),
    "unwaited" (the group stages without consuming the ring: the copies may land over the
    stores), "reloaded" (a thread of the group loads a tile over the stores before the
    barrier). Returns the kernel and the line of the staged load."""
    k = Kernel("staging", reqntid=256)
    ring = MbarrierRing(k, S)
    tiles = k.shared_array(t.b8, (S + 1) * STAGE, align=1024, name="tiles")
    once = k.shared_array(t.b64, 1, align=8, name="once")
    ring.init()
    with k.if_(k.tid.x == 0):
        ptx.mbarrier_init(k, once, 1)
        ptx.fence_mbarrier_init(k)
    k.bar_sync(0)
    tq = k.tensormap_addr(k.param_tensormap("map_q"))
    tk = k.tensormap_addr(k.param_tensormap("map_k"))
    blocks = k.ld_param(k.param(t.u32, "blocks"))
    ntiles = k.ld_param(k.param(t.u32, "ntiles")) if mistake == "persistent" else None
    out = k.ld_param(k.param_ptr("out"))
    with k.if_(k.tid.x == 0):
        if k_first:
            ptx.mbarrier_arrive_expect_tx(k, "release", "cta", "shared::cta", once, STAGE,
                                          dst="_")
            ptx.cp_async_bulk_tensor(k, "shared::cluster", "global",
                                     Addr(tiles, S * STAGE), tk, (0, 0), once)
        produce_blocks(k, ring, tiles, STAGE, tq, blocks, ntiles)
    with k.if_(k.shr(k.tid.x, 7) == 1):
        tid = k.and_(k.tid.x, 127)
        if k_first:
            ptx.mbarrier_wait(k, once, 0)
        c = ring.consumer()
        with tiles_loop(k, ntiles):
            acc = k.mov(0, type=t.u32)
            if mistake != "unwaited":
                with k.for_range(0, blocks):
                    c.wait_full()
                    v = k.ld(k.add(c.slot(tiles, STAGE), k.shl(tid, 2)), type=t.u32,
                             space="shared")
                    k.add(acc, v, dst=acc)
                    with k.if_(tid == 0):
                        c.release()
                    c.advance()
            base = k.mov(tiles)
            mine = k.shl(tid, 4)
            if mistake == "elsewhere":
                mine = k.add(mine, (S - 1) * STAGE + STAGE // 2)
            k.bar_sync(1, 128)          # every thread of the group past its last tile
            k.st(k.add(base, mine), [acc, acc, acc, acc], type=t.u32, space="shared")
            if mistake == "reloaded":
                with k.if_(tid == 0):
                    ptx.mbarrier_arrive_expect_tx(k, "release", "cta", "shared::cta", once,
                                                  STAGE, dst="_")
                    ptx.cp_async_bulk_tensor(k, "shared::cluster", "global", base, tq,
                                             (0, 0), once)
            if mistake != "nosync":
                k.bar_sync(1, 128)      # the group's stores before its loads
            line = here() + 1
            x = k.ld(k.add(base, k.shl(k.xor(tid, 1), 4)), type=t.u32, space="shared")
            k.st(Addr(k.add(out, k.cvt(k.shl(tid, 2), t.u64), type=t.u64)), x, type=t.u32,
                 space="global")
    k.ret()
    return k, line


@pytest.mark.parametrize("k_first", [False, True])
def test_staging_over_a_drained_ring_is_clean(k_first):
    clean(staging(k_first=k_first)[0], maps=MAPS)


@pytest.mark.parametrize("k_first", [False, True])
def test_loads_not_ordered_after_the_stores(k_first):
    """Without the barrier a thread reads its neighbour's bytes before the neighbour's store:
    it may see what the last copy left there."""
    k, line = staging("nosync", k_first=k_first)
    hazard = Hazard.WAIT_WRONG_BARRIER if k_first else Hazard.SMEM_READ_BEFORE_WAIT
    only(check_kernel(k, maps=MAPS), hazard, line)


@pytest.mark.parametrize("k_first", [False, True])
def test_stores_elsewhere_do_not_hide_the_copy(k_first):
    k, line = staging("elsewhere", k_first=k_first)
    hazard = Hazard.WAIT_WRONG_BARRIER if k_first else Hazard.SMEM_READ_BEFORE_WAIT
    f = only(check_kernel(k, maps=MAPS), hazard, line)
    assert "stored over" not in f.message      # the stores are not over the bytes read


@pytest.mark.parametrize("k_first", [False, True])
def test_persistent_refill_during_the_staging(k_first):
    """The consumer released every stage and waits on the ring again in its next tile: the
    producer may load that tile's first blocks into the stages while they hold the staging,
    so the loads may read a copy's data. (The staging of samples/flash_attention_bwd.py's
    persistent kernel, tried through the Q/dO stages, is this.)"""
    k, line = staging("persistent", k_first=k_first)
    hazard = Hazard.WAIT_WRONG_BARRIER if k_first else Hazard.SMEM_READ_BEFORE_WAIT
    f = only(check_kernel(k, maps=MAPS), hazard, line)
    assert "a wait on the copies' barrier can follow this read" in f.message
    assert [s.role for s in f.sites][-1] == "next wait"


@pytest.mark.parametrize("mistake", ["unwaited", "reloaded"])
def test_copies_that_may_land_over_the_stores(mistake):
    """Stores the copies may still land on (none of them waited for), or a copy issued after
    the stores: the loads may read a copy's data."""
    k, line = staging(mistake)
    only(check_kernel(k, maps=MAPS), Hazard.SMEM_READ_BEFORE_WAIT, line)


@pytest.mark.parametrize("mistake", ["", "nosync", "elsewhere", "persistent", "unwaited",
                                     "reloaded"])
def test_parsed_ptx_is_judged_alike(mistake):
    """The rule reads only instructions (stores, barriers, copies, waits): the kernel's PTX
    read back by the front end gives the same findings."""
    k, _ = staging(mistake, k_first=True)
    assert differences(k, Context.make(maps=MAPS)) == []
