"""Checker: named barriers (issue 32). A FlashAttention-3-style ping-pong of two consumer
warpgroups checks clean; each broken variant (both warpgroups pre-arriving, a thread count
of 128 where 256 arrive, a partner's arrive skipped on the last iterations, the final sync
or the final arrive dropped, the pre-arrive dropped, an epilogue reusing the ping-pong's ids)
is reported with its hazard; counts no set of warps can meet and a `bar.sync 0` only one
warpgroup reaches too.
The same findings come from the parsed PTX of each kernel."""

from __future__ import annotations

import pytest

from ptxdsl import Kernel, Module, t
from ptxdsl.checker import Hazard, check_kernel
from ptxdsl.epilogue import STAGING_BYTES, TmaStoreEpilogue
from ptxdsl.frontend.parser import parse_ptx
from tests import namedbar_kernels as nb
from tests.checker_kernels import clean, here, only

KERNEL_FILE = nb.__file__

# variant -> (builder arguments, hazard, findings, the statement the first one names)
VARIANTS = {
    # a whole phase of barrier 1 before the loop: warpgroup 1's first GEMM is not ordered
    "both_prearrive": ({}, Hazard.NAMEDBAR_SURPLUS, 1, "prearrive"),
    # 128: each warpgroup's arrive completes a phase of the other's barrier alone
    "count128": ({"count": 128}, Hazard.NAMEDBAR_SURPLUS, 2, "loop_arrive"),
    # the last iterations' sync waits for an arrive that never comes
    "arrive_skipped": ({}, Hazard.NAMEDBAR_UNPAIRED, 2, "loop_sync"),
    "arrive_guarded": ({}, Hazard.NAMEDBAR_UNPAIRED, 2, "loop_sync"),
    # the peeled GEMM's arrive completes a phase nobody waits for
    "final_sync_dropped": ({}, Hazard.NAMEDBAR_SURPLUS, 1, "prearrive"),
    # warpgroup 2's final sync waits forever
    "final_arrive_dropped": ({}, Hazard.NAMEDBAR_UNPAIRED, 1, "final_sync"),
    # TmaStoreEpilogue's per-warpgroup ids 1/2 (128 threads) on the ping-pong's barriers
    "epilogue_collides": ({"epilogue_ids": (1, 2)}, Hazard.NAMEDBAR_COLLISION, 2, "epilogue"),
}


def _ids(findings) -> list[str]:
    return sorted(f.id for f in findings)


def test_pingpong_checks_clean():
    clean(nb.pingpong())


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_pingpong_variant_is_reported(variant):
    kwargs, hazard, n, where = VARIANTS[variant]
    k = nb.pingpong(variant, **kwargs)
    found = check_kernel(k)
    assert _ids(found) == [hazard.value] * n, [f.format() for f in found]
    f = found[0]
    assert f.loc.file == KERNEL_FILE and f.loc.line == nb.LINES[where], f.format()


def test_pingpong_without_the_prearrive_deadlocks():
    # Every phase still gets its 256 arrivals: only the order shows the deadlock.
    found = check_kernel(nb.pingpong("no_prearrive"))
    assert _ids(found) == [Hazard.NAMEDBAR_DEADLOCK.value], [f.format() for f in found]
    f = found[0]
    assert f.loc.file == KERNEL_FILE and f.loc.line == nb.LINES["loop_sync"], f.format()
    assert "warps 4-7 wait here on barrier 1 forever" in f.message
    assert "the warps whose arrive it needs wait at barrier 2 first" in f.message


def test_branches_around_other_work_leave_the_counts_alone():
    # Only branches with a use of the barrier inside are tried both ways (2^n paths).
    clean(nb.pingpong(extra_branches=8))
    found = check_kernel(nb.pingpong("arrive_skipped", extra_branches=8))
    assert _ids(found) == [Hazard.NAMEDBAR_UNPAIRED.value] * 2, [f.format() for f in found]


def test_pingpong_messages_say_what_happens():
    surplus = check_kernel(nb.pingpong("both_prearrive"))[0].message
    assert "outside loops, barrier 1 gets 512 threads' arrivals" in surplus
    assert "a phase completes with nobody waiting" in surplus
    short = check_kernel(nb.pingpong("count128", count=128))[0].message
    assert "in an iteration of this loop" in short and "(128 per phase)" in short
    unpaired = check_kernel(nb.pingpong("arrive_skipped"))[0].message
    assert "on some path in an iteration of this loop, barrier 1 gets 128 threads'" in unpaired
    assert "waits forever" in unpaired
    dropped = check_kernel(nb.pingpong("final_arrive_dropped"))[0].message
    assert "outside loops, barrier 2 gets 128 threads' arrivals but a sync waits for 256" \
        in dropped
    collide = check_kernel(nb.pingpong("epilogue_collides", epilogue_ids=(1, 2)))[0]
    assert "barrier 1 is used with 128 threads by warps 4-7 and with 256 threads by warps " \
        "4-11" in collide.message
    assert [s.role for s in collide.sites] == ["barrier", "other use"]


@pytest.mark.parametrize("variant", ["ok", "no_prearrive", *sorted(VARIANTS)])
def test_parsed_ptx_gives_the_same_findings(variant):
    kwargs = VARIANTS[variant][0] if variant in VARIANTS else {}
    k = nb.pingpong(variant, **kwargs)
    parsed = parse_ptx(Module([k], check=False).emit())
    assert _ids(parsed.check()) == _ids(check_kernel(k))


def _pingpong_with_epilogues(first_id: int) -> Kernel:
    """The ping-pong (barriers 1 and 2, 256 threads) with each consumer warpgroup's tile
    stored by a TmaStoreEpilogue on barrier `first_id - 1 + wg`."""
    k = Kernel("pp_epi", reqntid=384)
    out = k.param_tensormap("out")
    staging = k.extern_shared("smem", align=1024)
    nk = k.ld_param(k.param(t.u32, "nk"))
    wg = k.shr(k.tid.x, 7)
    with k.if_(wg != 0):
        other = k.sub(3, wg)
        with k.if_(wg == 2):
            k.bar_arrive(1, 256)
        acc = k.fragment(t.f32, shape=(64, 128))
        with k.for_range(0, nk):
            k.bar_sync(wg, 256)
            k.bar_arrive(other, 256)
        buf = k.add(k.mov(staging), k.mul(k.sub(wg, 1), STAGING_BYTES))
        epi = TmaStoreEpilogue(k, buf, k.tensormap_addr(out), k.add(wg, first_id - 1))
        epi.store(acc.to_packed(t.bf16), k.mul(k.ctaid.y, 64), k.mul(k.ctaid.x, 128))
        epi.finish()
    return k


def test_tma_store_epilogue_beside_a_pingpong():
    clean(_pingpong_with_epilogues(3))
    found = check_kernel(_pingpong_with_epilogues(1))
    assert _ids(found) == [Hazard.NAMEDBAR_COLLISION.value] * 2, [f.format() for f in found]
    assert "barrier 1 is used with 128 threads by warps 4-7 and with 256 threads" \
        in found[0].message


# -- thread counts ----------------------------------------------------------------------------
def _two_warpgroups() -> tuple[Kernel, object]:
    k = Kernel("k", reqntid=256)
    return k, k.shr(k.tid.x, 7)


def test_count_not_a_multiple_of_the_warp_size():
    k, _ = _two_warpgroups()
    n = k.mov(100, dst=k.reg(t.u32, "n"))
    line = here() + 1
    k.bar_sync(1, n)
    f = only(check_kernel(k), Hazard.NAMEDBAR_COUNT, line)
    assert "the thread count is 100: it must be a positive multiple of the warp size" \
        in f.message


def test_count_larger_than_the_cta():
    # In a register: an immediate count above .reqntid is refused when built (the builder
    # knows both numbers; tests/test_helpers_bad_input_s14.py), one computed is the checker's.
    k, _ = _two_warpgroups()
    n = k.mov(512, dst=k.reg(t.u32, "n"))
    line = here() + 1
    k.bar_sync(1, n)
    f = only(check_kernel(k), Hazard.NAMEDBAR_COUNT, line)
    assert "the thread count is 512, but the CTA has only 256 threads" in f.message


def test_count_no_set_of_arriving_warps_meets():
    # Only warpgroup 1 ever reaches barrier 1, which waits for two warpgroups: a hang.
    k, wg = _two_warpgroups()
    with k.if_(wg == 1):
        line = here() + 1
        k.bar_sync(1, 256)
    f = only(check_kernel(k), Hazard.NAMEDBAR_COUNT, line)
    assert "barrier 1 waits for 256 threads, but only warps 4-7 (128 threads) ever arrive" \
        in f.message


def test_count_met_by_the_warpgroup_that_syncs():
    k, wg = _two_warpgroups()
    with k.if_(wg == 1):
        k.bar_sync(1, 128)
    clean(k)


def test_pingpong_count_above_the_consumers_is_reported_once():
    k = nb.pingpong("ok", count=384)
    found = check_kernel(k)
    assert _ids(found) == [Hazard.NAMEDBAR_COUNT.value] * 2, [f.format() for f in found]
    assert "only warps 4-11 (256 threads) ever arrive on it" in found[0].message


# -- a CTA-wide barrier in one warpgroup's branch -----------------------------------------------
def test_cta_barrier_in_one_warpgroups_branch():
    k, wg = _two_warpgroups()
    with k.if_(wg == 0):
        line = here() + 1
        k.bar_sync(0)
    with k.else_():
        k.bar_sync(2, 128)
    f = only(check_kernel(k), Hazard.CTA_BARRIER_DIVERGENT, line)
    assert "only warps 0-3 reach barrier 0; warps 4-7 never do, and wait at other " \
        "barriers instead" in f.message


def test_cta_barrier_every_warp_reaches_in_its_own_branch():
    # Triton's warp-specialized partitions join `barrier.sync 1` each in its own code.
    k, wg = _two_warpgroups()
    with k.if_(wg == 0):
        k.bar_sync(1)
    with k.else_():
        k.bar_sync(2, 128)
        k.bar_sync(1)
    clean(k)


def test_cta_barrier_after_other_warps_exit():
    # Warps that leave the kernel are not waited for: an early return is not divergence.
    k, wg = _two_warpgroups()
    with k.if_(wg == 0):
        k.bar_sync(2, 128)
        k.bar_sync(0)
    clean(k)


# -- what the model leaves alone ------------------------------------------------------------------
def test_producer_and_consumer_loops_are_not_paired():
    # FA3's producer warp arrives on a barrier the consumer warpgroup syncs on, each in a
    # loop of its own: the iterations of two loops are not counted against each other.
    k = Kernel("k", reqntid=256)
    warp, n = k.shr(k.tid.x, 5), k.ld_param(k.param(t.u32, "n"))
    with k.if_(warp == 0):
        with k.for_range(0, n):
            k.bar_arrive(5, 160)
    with k.if_(warp >= 4):
        with k.for_range(0, n):
            k.bar_sync(5, 160)
    clean(k)


def test_unknown_cta_size_is_a_note():
    k = Kernel("k")
    line = here() + 1
    k.bar_arrive(1, 64)
    k.bar_sync(1, 64)
    assert check_kernel(k) == []
    (note,) = check_kernel(k, notes=True)
    assert note.id == "check-skipped" and note.loc.line == line
    assert "the CTA's size is unknown" in note.message


def test_warp_index_broadcast_by_shfl():
    # Triton and CUTLASS take the warp (or warpgroup) index from lane 0 with shfl.sync.idx:
    # per thread it is still `tid >> 5`, so only warps 0-3 reach the barrier.
    k = Kernel("k", reqntid=256)
    warp = k.shfl_sync("idx", k.shr(k.tid.x, 5), 0)
    with k.if_(warp < 4):
        line = here() + 1
        k.bar_sync(1, 256)
    f = only(check_kernel(k), Hazard.NAMEDBAR_COUNT, line)
    assert "only warps 0-3 (128 threads) ever arrive" in f.message


def test_shfl_from_a_lane_that_differs_is_not_a_warp_index():
    # Lane 31's `tid & 31` is 31 in every warp: the broadcast is that, not a warp index.
    k = Kernel("k", reqntid=256)
    v = k.shfl_sync("idx", k.and_(k.tid.x, 31), 31)
    with k.if_(v == 31):
        k.bar_sync(1, 256)
    clean(k)
