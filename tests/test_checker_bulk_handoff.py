"""Checker: a bulk store's retirement handed to other threads through an mbarrier. The thread
that TMA-stores a buffer retires the store (`cp.async.bulk.wait_group.read 0`) and then
arrives on an "empty" barrier; another warp waits on that barrier and writes the buffer
again (st.shared or the next TMA load): clean, as a warp-specialised kernel hands its
epilogue buffer back. The arrive carries the retirement only when it follows the wait, to
the threads that wait on the same barrier for a phase it completes; a store still pending
at the arrive stays pending for them. Each clean kernel checks clean while its mistake
does not, each mistake is reported at the write (or, for a copy that the arrive lets in,
at the arrive: `bulk-src-released`), and the kernels' PTX read back by the front end gives
the same findings."""

from __future__ import annotations

import pytest

from ptxdsl import Kernel, ptx, t
from ptxdsl.checker import Hazard, check_kernel
from ptxdsl.checker.context import Context
from ptxdsl.pipeline import MbarrierRing
from tests.checker_kernels import clean, here, only
from tests.parsed_check import differences

TILE, STAGE = 512, 256     # the bytes of `one_tile`'s tile; of a stage of `ring`'s ring
MAPS = {"tmap": {"box_bytes": TILE}, "map_in": {"box_bytes": STAGE},
        "map_out": {"box_bytes": STAGE}}


def _store(k: Kernel, tmap, src, coords) -> None:
    ptx.cp_async_bulk_tensor(k, "global", "shared::cta", tmap, coords, src)
    ptx.cp_async_bulk_commit_group(k)


def one_tile(how: str) -> tuple[Kernel, int]:
    """Every thread fills the tile, all meet at `bar.sync 0`; tid 32 TMA-stores it and
    arrives on `empty`; tid 0 waits on `empty` (parity 0) and writes the tile again with
    st.shared ("load_*": TMA-loads the next tile into it):

    - "read0", "load_read0": tid 32's `wait_group.read 0` before the arrive (clean);
    - "early", "load_early": the arrive before the `wait_group.read 0`;
    - "read1", "load_read1": tid 32 stores the tile twice (two groups) and arrives after
      `wait_group.read 1`, which leaves the second store in flight;
    - "other": the arrive is on `other`, a barrier tid 0 does not wait on;
    - "stranger": tid 33 arrives on `empty` (`@p mbarrier.arrive`), after tid 32's wait in
      program order but not ordered after it (no barrier between the two threads);
    - "parity1": tid 0's wait is for parity 1, which a fresh barrier counts as completed
      (the phase before the first): it passes at once, before the arrive.

    Returns the kernel and the line of the write a finding names."""
    k = Kernel("handoff", reqntid=64)
    tile = k.shared_array(t.b8, TILE, align=128, name="tile")
    empty = k.shared_array(t.b64, 1, align=8, name="empty")
    other = k.shared_array(t.b64, 1, align=8, name="other")
    full = k.shared_array(t.b64, 1, align=8, name="full")
    tmap = k.tensormap_addr(k.param_tensormap("tmap"))
    with k.if_(k.tid.x == 0):
        for bar in (empty, other, full):
            ptx.mbarrier_init(k, bar, 1)
    k.bar_sync(0)
    k.st(k.add(k.mov(tile), k.shl(k.tid.x, 2)), k.tid.x, type=t.u32, space="shared::cta")
    ptx.fence_proxy_async(k, "shared::cta")
    k.bar_sync(0)
    kind = how.removeprefix("load_")
    with k.if_(k.tid.x == 32):
        _store(k, tmap, tile, (0, 0))
        if kind == "read1":
            _store(k, tmap, tile, (0, 1))
        if kind == "early":
            ptx.mbarrier_arrive(k, empty, space="shared::cta", dst="_")
        ptx.cp_async_bulk_wait_group_read(k, 1 if kind == "read1" else 0)
        if kind not in ("early", "stranger"):
            ptx.mbarrier_arrive(k, other if kind == "other" else empty, space="shared::cta",
                                dst="_")
    if kind == "stranger":   # (a guard, not a branch: no path skips the arrive)
        with k.guard(k.setp("eq", k.tid.x, 33, type=t.u32)):
            ptx.mbarrier_arrive(k, empty, space="shared::cta", dst="_")
    with k.if_(k.tid.x == 0):
        ptx.mbarrier_wait(k, empty, 1 if kind == "parity1" else 0)
        if how.startswith("load_"):
            line = here() + 1
            ptx.cp_async_bulk_tensor(k, "shared::cluster", "global", tile, tmap, (1, 0), full)
            ptx.mbarrier_arrive_expect_tx(k, "release", "cta", "shared::cta", full, TILE,
                                          dst="_")
        else:
            line = here() + 1
            k.st(tile, 0, type=t.u32, space="shared::cta")     # the next tile's data
    with k.if_(k.tid.x == 32):
        ptx.cp_async_bulk_wait_group(k, 0)
    k.ret()
    return k, line


def ring(how: str) -> tuple[Kernel, int]:
    """One loop over the blocks, a ring of two stages: tid 0, the producer, waits for an
    empty stage and TMA-loads the block into it; tid 32, the consumer, waits for the full
    stage, TMA-stores it and releases it (arrives on its empty barrier). The producer's
    next trips refill the stages the consumer released:

    - "ring_read0": the consumer's `wait_group.read 0` before the release (clean);
    - "ring_early": the release before that wait;
    - "ring_read1": the release after `wait_group.read 1`, which leaves the store of the
      stage released in flight.

    Returns the kernel and the line of the producer's load."""
    k = Kernel("ring_handoff", reqntid=64)
    ring = MbarrierRing(k, 2)
    tiles = k.shared_array(t.b8, 2 * STAGE, align=1024, name="tiles")
    ring.init()
    tin = k.tensormap_addr(k.param_tensormap("map_in"))
    tout = k.tensormap_addr(k.param_tensormap("map_out"))
    blocks = k.ld_param(k.param(t.u32, "blocks"))
    p, c = ring.producer(), ring.consumer()
    kind = how.removeprefix("ring_")
    line = 0
    with k.for_range(0, blocks) as j:
        with k.if_(k.tid.x == 0):
            p.wait_empty()
            p.arrive_expect_tx(STAGE)
            slot = p.slot(tiles, STAGE)
            line = here() + 1
            ptx.cp_async_bulk_tensor(k, "shared::cluster", "global", slot, tin, (0, j),
                                     p.full_barrier())
            p.advance()
        with k.if_(k.tid.x == 32):
            c.wait_full()
            _store(k, tout, c.slot(tiles, STAGE), (0, j))
            if kind == "early":
                c.release()
            ptx.cp_async_bulk_wait_group_read(k, 1 if kind == "read1" else 0)
            if kind != "early":
                c.release()
            c.advance()
    with k.if_(k.tid.x == 32):
        ptx.cp_async_bulk_wait_group(k, 0)
    k.ret()
    return k, line


def build(how: str) -> tuple[Kernel, int]:
    return ring(how) if how.startswith("ring") else one_tile(how)


def _ids(how: str) -> list[str]:
    return [f.id for f in check_kernel(build(how)[0], maps=MAPS)]


# each clean kernel and a mistake it differs from by the one thing the hand-off needs
CLEAN = {"read0": "early", "load_read0": "load_early", "ring_read0": "ring_early"}
# mistake: (the rule, the role of the finding's third site: the wait_group.read whose
# retirement did not reach the writer, the arrive a pending store was handed on at; None:
# a copy the arrive lets in, reported at the arrive)
MISTAKES = {
    "early": ("bulk-src-overwrite", "wait"),          # retired after the arrive: not handed
    "load_early": ("bulk-src-released", None),
    "read1": ("bulk-src-overwrite", "arrive"),        # pending at the arrive: still pending
    "load_read1": ("bulk-src-released", None),
    "other": ("bulk-src-overwrite", "wait"),          # handed on a barrier tid 0 does not wait on
    "load_other": ("bulk-src-overwrite", "wait"),
    "stranger": ("bulk-src-overwrite", "wait"),       # the arrive is not the waiting thread's
    "parity1": ("bulk-src-overwrite", "wait"),        # a wait that sees no phase of the arrive
    "load_parity1": ("bulk-src-overwrite", "wait"),
    "ring_early": ("bulk-src-overwrite", "wait"),
    "ring_read1": ("bulk-src-released", None),
}


@pytest.mark.parametrize("how", CLEAN)
def test_write_after_a_handed_on_retirement_is_clean(how):
    clean(build(how)[0], maps=MAPS)
    assert CLEAN[how] in MISTAKES and _ids(CLEAN[how])     # (its twin is not)


@pytest.mark.parametrize("how", [h for h, (_, via) in MISTAKES.items() if via is not None])
def test_write_the_hand_off_does_not_cover_is_reported(how):
    rule, via = MISTAKES[how]
    k, line = build(how)
    found = check_kernel(k, maps=MAPS)
    if how == "ring_early":      # (the early release is reported too, at the arrive)
        assert [f.id for f in found] == ["bulk-src-overwrite", "bulk-src-released"]
        found = found[:1]
    f = only(found, Hazard(rule), line)
    assert [s.role for s in f.sites] == ["write", "store", via]
    assert f.sites[1].ptx.startswith("cp.async.bulk.tensor.2d.global.shared::cta")
    if via == "wait":
        assert f.sites[2].ptx == "cp.async.bulk.wait_group.read 0;"
        assert "did not wait for the earlier bulk store's read" in f.message
    else:
        assert f.sites[2].ptx.startswith("mbarrier.arrive")
        assert "at the mbarrier.arrive whose phase this thread waited for since: the " \
            "hand-off orders the write after the store's issue, not after its read" in f.message


@pytest.mark.parametrize("how", [h for h, (_, via) in MISTAKES.items() if via is None])
def test_copy_let_in_by_an_arrive_before_the_read_is_reported_at_the_arrive(how):
    found = check_kernel(build(how)[0], maps=MAPS)
    f = next(f for f in found if f.id == "bulk-src-released")
    assert [s.role for s in f.sites] == ["arrive", "store"]
    assert f.sites[0].ptx.startswith("mbarrier.arrive")


def test_a_wait_takes_only_what_an_arrive_on_its_barrier_handed_on():
    """The fact of a retirement names the arrives that handed it on, so a wait on one
    barrier does not take what only an arrive on another handed on (`other` against
    `read0`: the same kernel but for the barrier the store's thread arrives on)."""
    assert _ids("read0") == [] and _ids("other") == ["bulk-src-overwrite"]


@pytest.mark.parametrize("how", [*CLEAN, *MISTAKES])
def test_parsed_ptx_is_judged_alike(how):
    """The hand-off reads only instructions (stores, commits, waits, arrives, barrier
    waits, writes): the kernels' PTX read back by the front end gives the same findings."""
    assert differences(build(how)[0], Context.make(maps=MAPS)) == []
    assert bool(_ids(how)) == (how not in CLEAN)
