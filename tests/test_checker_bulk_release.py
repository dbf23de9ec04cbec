"""Checker: `bulk-src-released`, a ring stage handed back to its producer (a count-less
`mbarrier.arrive` on its empty barrier) while a TMA store still reads it (as
samples/flash_attention.py stages O in the tile's Q stage and releases the stage only after
`TmaStoreEpilogue.wait_read`). Each kernel: thread 0 TMA-loads `blocks` tiles into an S-stage
ring; a consumer thread of warpgroup 1 waits for each tile and TMA-stores it back out from
its stage, then releases the stage. Each mistake is reported at the release (id and Python
line asserted), each clean twin checks clean, and the kernels' PTX read back by the front end
gives the same findings."""

from __future__ import annotations

import pytest

import samples.flash_attention as fa
from ptxdsl import Addr, Kernel, Module, ptx, t
from ptxdsl.checker import Hazard, check_kernel, check_module
from ptxdsl.checker.context import Context
from ptxdsl.pipeline import MbarrierRing
from tests.checker_kernels import clean, here, only, produce_blocks
from tests.parsed_check import differences

S, STAGE = 2, 1024
MAPS = {"map_in": {"box_bytes": STAGE}, "map_out": {"box_bytes": STAGE}}


def _store(k: Kernel, tout, src, j) -> None:
    ptx.cp_async_bulk_tensor(k, "global", "shared::cta", tout, (0, j), src)


def ring_store(how: str) -> tuple[Kernel, int]:
    """The consumer (tid 128) stores each tile from its stage and releases the stage:

    - "read0": after `cp.async.bulk.wait_group.read 0` (clean);
    - "early": before any wait (the store may still read the stage);
    - "uncommitted": before the store's group is even committed (committed and waited for
      after the release);
    - "read1": after `wait_group.read 1`, which leaves the newest group (this store's) in
      flight;
    - "previous": pipelined, clean: a second view trailing by one stage (the first block
      peeled) releases the previous stage after `wait_group.read 1`;
    - "other": the stores read a buffer past the ring that no copy fills, released before
      any wait (clean);
    - "other_thread": tid 128 stores and waits, tid 160 releases with no barrier after
      the wait;
    - "other_thread_sync": the same with `bar.sync 1, 128` between (clean);
    - "unwaited_sync": tid 128 stores and never waits in the loop, `bar.sync 1, 128`, tid
      160 releases (the barrier orders the release after the store's issue, not its read);
    - "wait_after_sync": the same with tid 128's `wait_group.read 0` after the barrier;
    - "self_after_sync": the same, the release by tid 128 after its wait (clean);
    - "previous_sync": pipelined across threads, clean: tid 128 stores (the first block
      peeled) and waits with `wait_group.read 1`, and after the barrier tid 160 releases
      the previous stage through a second view; "read1_sync": tid 160 releases the
      current one, whose store the barrier left in flight;
    - "cta_unwaited", "cta_read0": `cta_store`'s kernels (a `bar.sync 0` of the whole CTA).

    Returns the kernel and the line of the release a finding names."""
    if how.startswith("cta_"):
        return cta_store(how)
    k = Kernel("ring_store", reqntid=256)
    ring = MbarrierRing(k, S)
    tiles = k.shared_array(t.b8, (S + 1) * STAGE, align=1024, name="tiles")
    ring.init()
    tin = k.tensormap_addr(k.param_tensormap("map_in"))
    tout = k.tensormap_addr(k.param_tensormap("map_out"))
    blocks = k.ld_param(k.param(t.u32, "blocks"))
    with k.if_(k.tid.x == 0):
        produce_blocks(k, ring, tiles, STAGE, tin, blocks)
    line = 0
    if how in ("other_thread", "other_thread_sync", *SYNCED):
        with k.if_(k.shr(k.tid.x, 7) == 1):
            c = behind = ring.consumer()
            piped = how in ("previous_sync", "read1_sync")
            if piped:
                behind = ring.consumer() if how == "previous_sync" else c
                c.wait_full()
                with k.if_(k.tid.x == 128):
                    _store(k, tout, c.slot(tiles, STAGE), 0)
                    ptx.cp_async_bulk_commit_group(k)
                c.advance()
            with k.for_range(1 if piped else 0, blocks) as j:
                c.wait_full()
                with k.if_(k.tid.x == 128):
                    _store(k, tout, c.slot(tiles, STAGE), j)
                    ptx.cp_async_bulk_commit_group(k)
                    if how.startswith("other"):
                        ptx.cp_async_bulk_wait_group_read(k, 0)
                    elif piped:
                        ptx.cp_async_bulk_wait_group_read(k, 1)
                if how != "other_thread":
                    k.bar_sync(1, 128)
                if how in ("wait_after_sync", "self_after_sync"):
                    with k.if_(k.tid.x == 128):
                        ptx.cp_async_bulk_wait_group_read(k, 0)
                with k.if_(k.tid.x == (128 if how == "self_after_sync" else 160)):
                    line = here() + 1
                    behind.release()
                if behind is not c:
                    behind.advance()
                c.advance()
            with k.if_(k.tid.x == 128):
                ptx.cp_async_bulk_wait_group(k, 0)
        k.ret()
        return k, line
    with k.if_(k.tid.x == 128):
        c = ring.consumer()
        if how == "previous":
            behind = ring.consumer()
            c.wait_full()
            _store(k, tout, c.slot(tiles, STAGE), 0)
            ptx.cp_async_bulk_commit_group(k)
            c.advance()
        with k.for_range(1 if how == "previous" else 0, blocks) as j:
            c.wait_full()
            src = Addr(tiles, S * STAGE) if how == "other" else c.slot(tiles, STAGE)
            _store(k, tout, src, j)
            if how != "uncommitted":
                ptx.cp_async_bulk_commit_group(k)
            if how == "read0":
                ptx.cp_async_bulk_wait_group_read(k, 0)
            elif how in ("read1", "previous"):
                ptx.cp_async_bulk_wait_group_read(k, 1)
            line = here() + 1
            (behind if how == "previous" else c).release()
            if how == "uncommitted":
                ptx.cp_async_bulk_commit_group(k)
                ptx.cp_async_bulk_wait_group_read(k, 0)
            if how == "previous":
                behind.advance()
            c.advance()
        ptx.cp_async_bulk_wait_group(k, 0)
    k.ret()
    return k, line


SYNCED = ("unwaited_sync", "wait_after_sync", "self_after_sync", "previous_sync",
          "read1_sync")


def cta_store(how: str) -> tuple[Kernel, int]:
    """One loop over the ring in every thread of a 128-thread CTA: tid 0 loads each block
    into its stage, every thread waits for it, tid 32 TMA-stores it from the stage, all meet
    at `bar.sync 0`, and tid 64 releases the stage: "cta_unwaited" with no wait_group
    before the barrier (tid 32 waits only after the loop), "cta_read0" with tid 32's
    `wait_group.read 0` before it (clean: the barrier orders the release after the wait)."""
    k = Kernel("cta_store", reqntid=128)
    ring = MbarrierRing(k, S)
    tiles = k.shared_array(t.b8, S * STAGE, align=1024, name="tiles")
    ring.init()
    tin = k.tensormap_addr(k.param_tensormap("map_in"))
    tout = k.tensormap_addr(k.param_tensormap("map_out"))
    blocks = k.ld_param(k.param(t.u32, "blocks"))
    p, c = ring.producer(), ring.consumer()
    line = 0
    with k.for_range(0, blocks) as j:
        with k.if_(k.tid.x == 0):
            p.wait_empty()
            p.arrive_expect_tx(STAGE)
            ptx.cp_async_bulk_tensor(k, "shared::cluster", "global", p.slot(tiles, STAGE),
                                     tin, (0, j), p.full_barrier())
            p.advance()
        c.wait_full()
        with k.if_(k.tid.x == 32):
            _store(k, tout, c.slot(tiles, STAGE), j)
            ptx.cp_async_bulk_commit_group(k)
            if how == "cta_read0":
                ptx.cp_async_bulk_wait_group_read(k, 0)
        k.bar_sync(0)
        with k.if_(k.tid.x == 64):
            line = here() + 1
            c.release()
        c.advance()
    with k.if_(k.tid.x == 32):
        ptx.cp_async_bulk_wait_group(k, 0)
    k.ret()
    return k, line


# each clean kernel and the mistake it differs from by the one thing the rule judges
CLEAN = {"read0": "early", "previous": "read1", "other": "early",
         "other_thread_sync": "other_thread", "self_after_sync": "wait_after_sync",
         "previous_sync": "read1_sync", "cta_read0": "cta_unwaited"}
MISTAKES = ["early", "uncommitted", "read1", "other_thread", "unwaited_sync",
            "wait_after_sync", "read1_sync", "cta_unwaited"]


def _ids(how: str) -> list[str]:
    return [f.id for f in check_kernel(ring_store(how)[0], maps=MAPS)]


@pytest.mark.parametrize("how", CLEAN)
def test_release_after_the_store_read_it_is_clean(how):
    clean(ring_store(how)[0], maps=MAPS)
    assert _ids(CLEAN[how]) == ["bulk-src-released"]     # (its twin is not)


@pytest.mark.parametrize("how", MISTAKES)
def test_release_while_the_store_reads_the_stage(how):
    k, line = ring_store(how)
    f = only(check_kernel(k, maps=MAPS), Hazard.BULK_SRC_RELEASED, line)
    assert [s.role for s in f.sites][:2] == ["arrive", "store"]
    if how == "uncommitted":
        assert "never committed" in f.message
    elif how in ("other_thread", "wait_after_sync"):
        assert "not among the threads that arrive" in f.message
    elif how in ("unwaited_sync", "read1_sync", "cta_unwaited"):
        # (pending in the issuing thread at the barrier, which the release follows)
        assert "other threads issued it" in f.message
        assert [s.role for s in f.sites] == ["arrive", "store", "barrier"]
        assert f.sites[2].ptx.startswith("bar.sync")
    else:
        assert "wait_group" in f.message


@pytest.mark.parametrize("how", [*CLEAN, *MISTAKES])
def test_parsed_ptx_is_judged_alike(how):
    """The rule reads only instructions (stores, commits, waits, arrives, copies): the
    kernel's PTX read back by the front end gives the same findings."""
    for variant in (how, CLEAN.get(how)):   # (a clean kernel with its twin)
        if variant is not None:
            assert differences(ring_store(variant)[0], Context.make(maps=MAPS)) == []
            assert _ids(variant) == ([] if variant in CLEAN else ["bulk-src-released"])


# -- samples/flash_attention.py: O staged in the Q stage ---------------------------------------
CONFIGS = [(128, {}), (256, {"bn": 80})]   # two Q stages (released a tile later); one


@pytest.mark.parametrize(("d", "kw"), CONFIGS)
def test_flash_attention_o_staged_in_q(d, kw, monkeypatch):
    """O staged in the Q stage checks clean; without the leader's
    `cp.async.bulk.wait_group.read 0` (`TmaStoreEpilogue.wait_read`) the Q stage goes back to
    the producer while the O stores may still read it."""
    from ptxdsl.epilogue import TmaStoreEpilogue
    assert fa.config("bf16", d, **kw).o_in_q
    k = fa.build_forward(fa.config("bf16", d, **kw))
    assert check_module(Module([k], target="sm_90a")) == []
    monkeypatch.setattr(TmaStoreEpilogue, "wait_read", lambda self: None)
    k = fa.build_forward(fa.config("bf16", d, **kw))
    found = check_module(Module([k], target="sm_90a"))
    assert [f.id for f in found] == ["bulk-src-released"], [f.format() for f in found]
    assert [s.role for s in found[0].sites] == ["arrive", "store"]
    assert found[0].loc.file.endswith("flash_attention.py")
