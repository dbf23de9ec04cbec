"""Checker: hazards it used to miss. Each kernel has the hazard (right id, right Python line)
and a corrected twin that checks clean."""

from __future__ import annotations

import pytest

from ptxdsl import Addr, Kernel, ptx, t
from ptxdsl.checker import Hazard, Severity, check_kernel
from tests.checker_kernels import clean, here, ids, only

TILE = {"tmap": {"box_bytes": 512}}




# -- expect_tx in warp-specialized kernels ---------------------------------------------------------
def ws_pipeline(tx: int = 512, prologue_tx: int | None = None, *, stages: int = 2,
                parity: str = "div", wait_ahead: int = 0, producer_waits: bool = True,
                consumer_waits: bool = True):
    """A producer warp (one elected lane) and consumer warps over a ring of `stages` stages;
    with `prologue_tx` the producer first fills every stage in a prologue. Returns the kernel
    and the line of the expect_tx in the loop (and in the prologue)."""
    k = Kernel("pipeline", reqntid=160)
    tmap = k.tensormap_addr(k.param_tensormap("tmap"))
    n = k.ld_param(k.param(t.u32, "n_tiles"))
    full = k.shared_array(t.b64, stages, align=8, name="full")
    empty = k.shared_array(t.b64, stages, align=8, name="empty")
    tiles = k.shared_array(t.b8, 512 * stages, align=1024, name="tiles")
    with k.if_(k.tid.x == 0):
        for s in range(stages):
            ptx.mbarrier_init(k, Addr(full, 8 * s), 1)
            ptx.mbarrier_init(k, Addr(empty, 8 * s), 128)
        ptx.fence_proxy_async(k, "shared::cta")
    k.bar_sync(0)
    warp = k.shr(k.tid.x, 5)
    lines = {}
    with k.if_(warp == 0):
        start = 0
        if prologue_tx is not None:
            start = stages
            with k.if_(k.elect_sync()):
                for s in range(stages):
                    bar = Addr(full, 8 * s)
                    lines["prologue"] = here() + 1
                    ptx.mbarrier_arrive_expect_tx(k, "release", "cta", "shared::cta", bar,
                                                  prologue_tx, dst="_")
                    ptx.cp_async_bulk_tensor(k, "shared::cluster", "global",
                                             Addr(tiles, 512 * s), tmap, (0, s), bar)
        with k.for_range(start, n) as i:
            s = k.rem(i, stages, type=t.u32)
            phase = k.and_(k.div(i, stages, type=t.u32), 1, type=t.b32)
            with k.if_(k.elect_sync()):
                if producer_waits:
                    ptx.mbarrier_wait(k, k.add(k.mov(empty), k.shl(s, 3)), k.xor(phase, 1))
                bar = k.add(k.mov(full), k.shl(s, 3))
                lines["loop"] = here() + 1
                ptx.mbarrier_arrive_expect_tx(k, "release", "cta", "shared::cta", bar, tx,
                                              dst="_")
                dst = k.add(k.mov(tiles), k.shl(s, 9))
                lines["load"] = here() + 1
                ptx.cp_async_bulk_tensor(k, "shared::cluster", "global", dst, tmap, (0, i), bar)
    with k.else_():
        flip = k.mov(0, type=t.b32)
        with k.for_range(0, n) as i:
            s = k.rem(i, stages, type=t.u32)
            phase = {"div": lambda: k.and_(k.div(i, stages, type=t.u32), 1, type=t.b32),
                     "xor": lambda: flip, "and": lambda: k.and_(i, 1, type=t.b32)}[parity]()
            ws = k.rem(k.add(i, wait_ahead), stages, type=t.u32) if wait_ahead else s
            if consumer_waits:
                lines["wait"] = here() + 1
                ptx.mbarrier_wait(k, k.add(k.mov(full), k.shl(ws, 3)), phase)
            lines["read"] = here() + 1
            k.ld(k.add(k.mov(tiles), k.shl(s, 9)), type=t.u32, space="shared::cta")
            ptx.mbarrier_arrive(k, k.add(k.mov(empty), k.shl(s, 3)), dst="_")
            if parity == "xor":
                lines["flip"] = here() + 1
                k.xor(flip, 1, dst=flip)
    k.ret()
    return k, lines


def test_warp_specialized_pipeline_with_a_wrong_expect_tx():
    k, lines = ws_pipeline(tx=256)
    f = only(check_kernel(k, **{"maps": TILE}), Hazard.EXPECT_TX_MISMATCH, lines["loop"])
    assert "announces 256" in f.message and "deliver 512" in f.message


@pytest.mark.parametrize("stages", [2, 3])
def test_warp_specialized_pipeline_with_the_right_expect_tx(stages):
    clean(ws_pipeline(tx=512, stages=stages)[0], maps=TILE)
    clean(ws_pipeline(tx=512, prologue_tx=512, stages=stages)[0], maps=TILE)


def test_expect_tx_wrong_only_in_the_prologue():
    k, lines = ws_pipeline(tx=512, prologue_tx=1024)
    found = check_kernel(k, maps=TILE)     # one per stage the prologue fills
    assert ids(found) == ["expect-tx-mismatch"] * 2, [f.format() for f in found]
    assert {(f.loc.line, "announces 1024" in f.message) for f in found} == {
        (lines["prologue"], True)}
    assert {f.sites[0].ptx for f in found} == {
        "mbarrier.arrive.expect_tx.release.cta.shared::cta.b64 _, [full], 1024;",
        "mbarrier.arrive.expect_tx.release.cta.shared::cta.b64 _, [full+8], 1024;"}


def _multicast(tx: int) -> tuple[Kernel, int]:
    """Two CTAs each load a 256-byte slice multicast to both: each barrier gets 512 bytes."""
    k = Kernel("k", reqntid=128)
    tmap = k.tensormap_addr(k.param_tensormap("tmap"))
    tile = k.shared_array(t.b8, 512, align=128, name="tile")
    bar = k.shared_array(t.b64, 1, align=8, name="bar")
    with k.if_(k.tid.x == 0):
        ptx.mbarrier_init(k, bar, 1)
        ptx.fence_mbarrier_init(k)
    k.bar_sync(0)
    k.asm("barrier.cluster.arrive.relaxed.aligned;\nbarrier.cluster.wait.aligned;",
          requires=("7.8", "sm_90"))
    with k.if_(k.tid.x == 0):
        line = here() + 1
        ptx.mbarrier_arrive_expect_tx(k, "release", "cta", "shared::cta", bar, tx, dst="_")
        ptx.cp_async_bulk_tensor(k, "shared::cluster", "global", tile, tmap, (0, 0), bar,
                                 cta_mask=0b11)
    ptx.mbarrier_wait(k, bar, 0)
    return k, line


def test_multicast_count_forgetting_the_other_ctas_slices():
    k, line = _multicast(256)
    f = only(check_kernel(k, maps={"tmap": {"box_bytes": 256}}), Hazard.EXPECT_TX_MISMATCH,
              line)
    assert "deliver 512" in f.message


def test_multicast_count_with_every_slice():
    clean(_multicast(512)[0], maps={"tmap": {"box_bytes": 256}})


def test_run_time_count_is_a_note():
    k = Kernel("k", reqntid=128)
    tmap = k.tensormap_addr(k.param_tensormap("tmap"))
    tx = k.ld_param(k.param(t.u32, "tx"))
    tile = k.shared_array(t.b8, 512, align=128, name="tile")
    bar = k.shared_array(t.b64, 1, align=8, name="bar")
    with k.if_(k.tid.x == 0):
        ptx.mbarrier_init(k, bar, 1)
        ptx.fence_proxy_async(k, "shared::cta")
        line = here() + 1
        ptx.mbarrier_arrive_expect_tx(k, "release", "cta", "shared::cta", bar, tx, dst="_")
        ptx.cp_async_bulk_tensor(k, "shared::cluster", "global", tile, tmap, (0, 0), bar)
    k.bar_sync(0)
    ptx.mbarrier_wait(k, bar, 0)
    assert check_kernel(k, maps=TILE) == []
    notes = check_kernel(k, maps=TILE, notes=True)
    f = only(notes, Hazard.CHECK_SKIPPED, line)
    assert f.severity is Severity.note and "run time" in f.message
    assert k.check(maps=TILE) == []


# -- arrive counts ---------------------------------------------------------------------------------
def _arrivals(count: int, who: str) -> tuple[Kernel, int]:
    """A 128-thread CTA (4 warps): a barrier initialised with `count`, arrived on by `who`."""
    k = Kernel("k", reqntid=128)
    bar = k.shared_array(t.b64, 1, align=8, name="bar")
    valid = k.ld_param(k.param(t.u32, "n_valid"))
    with k.if_(k.tid.x == 0):
        init = here() + 1
        ptx.mbarrier_init(k, bar, count)
    k.bar_sync(0)
    cond = {"all": None, "thread0": k.tid.x == 0, "lane0": k.laneid == 0,
            "elect": "elect", "valid": k.tid.x < valid}[who]
    if cond is None:
        line = here() + 1
        ptx.mbarrier_arrive(k, bar, dst="_")
    else:
        with k.if_(k.elect_sync() if isinstance(cond, str) else cond):
            line = here() + 1
            ptx.mbarrier_arrive(k, bar, dst="_")
    ptx.mbarrier_wait(k, bar, 0)
    del init
    return k, line


@pytest.mark.parametrize("count,who,got", [(128, "thread0", 1), (4, "all", 128),
                                           (4, "thread0", 1), (1, "lane0", 4)])
def test_arrive_count_the_arrivals_cannot_match(count, who, got):
    k, line = _arrivals(count, who)
    f = only(check_kernel(k), Hazard.MBAR_ARRIVE_COUNT, line)
    assert f"expect {count} arrivals" in f.message and f"{got} arrivals" in f.message
    assert [s.role for s in f.sites] == ["arrive", "init"]


@pytest.mark.parametrize("count,who", [(128, "all"), (1, "thread0"), (4, "lane0"),
                                       (4, "elect")])
def test_arrive_count_matching_the_arrivals(count, who):
    clean(_arrivals(count, who)[0])


def test_arrivals_under_a_per_lane_condition_on_a_barrier_expecting_every_thread():
    k, line = _arrivals(128, "valid")
    f = only(check_kernel(k), Hazard.MBAR_ARRIVE_COUNT, line)
    assert "differs between lanes" in f.message


def test_arrive_count_unknown_cta_shape_is_a_note():
    k = Kernel("k")
    bar = k.shared_array(t.b64, 1, align=8, name="bar")
    with k.if_(k.tid.x == 0):
        ptx.mbarrier_init(k, bar, 1)
    k.bar_sync(0)
    with k.if_(k.tid.x == 0):
        ptx.mbarrier_arrive(k, bar, dst="_")
    ptx.mbarrier_wait(k, bar, 0)
    assert check_kernel(k) == []
    assert ids(check_kernel(k, notes=True)) == ["check-skipped"]


# -- a live barrier re-initialised every iteration -------------------------------------------------
def _reinit(inside: bool) -> tuple[Kernel, int]:
    k = Kernel("k", reqntid=128)
    tmap = k.tensormap_addr(k.param_tensormap("tmap"))
    tile = k.shared_array(t.b8, 512, align=128, name="tile")
    bar = k.shared_array(t.b64, 1, align=8, name="bar")
    n = k.ld_param(k.param(t.u32, "n"))
    phase = k.mov(0, type=t.b32)

    def init() -> int:
        with k.if_(k.tid.x == 0):
            line = here() + 1
            ptx.mbarrier_init(k, bar, 1)
            ptx.fence_proxy_async(k, "shared::cta")
        k.bar_sync(0)
        return line

    line = None if inside else init()
    with k.for_range(0, n) as i:
        if inside:
            line = init()
        with k.if_(k.tid.x == 0):
            ptx.mbarrier_arrive_expect_tx(k, "release", "cta", "shared::cta", bar, 512, dst="_")
            ptx.cp_async_bulk_tensor(k, "shared::cluster", "global", tile, tmap, (0, i), bar)
        ptx.mbarrier_wait(k, bar, 0 if inside else phase)
        k.bar_sync(0)
        if not inside:
            k.xor(phase, 1, dst=phase)
    return k, line


def test_barrier_re_initialised_every_iteration():
    k, line = _reinit(inside=True)
    f = only(check_kernel(k, maps=TILE), Hazard.MBAR_REINIT, line)
    assert "every iteration" in f.message


def test_barrier_initialised_once_with_a_flipping_parity():
    clean(_reinit(inside=False)[0], maps=TILE)


# -- tensor maps -----------------------------------------------------------------------------------
def _two_maps(acquire_b: bool) -> tuple[Kernel, int]:
    """Two maps at offsets 0 and 128 of one workspace: acquiring A does not cover B."""
    k = Kernel("k", reqntid=32)
    ws = k.ld_param(k.param_ptr("workspace"))
    map_a, map_b = ws, k.add(ws, 128)
    ptx.fence_proxy_tensormap_generic(k, "acquire", "gpu", map_a)
    if acquire_b:
        ptx.fence_proxy_tensormap_generic(k, "acquire", "gpu", map_b)
    ptx.cp_async_bulk_prefetch_tensor(k, map_a, (0, 0))
    line = here() + 1
    ptx.cp_async_bulk_prefetch_tensor(k, map_b, (0, 0))
    return k, line


def test_two_maps_of_one_workspace_are_distinct():
    k, line = _two_maps(acquire_b=False)
    only(check_kernel(k), Hazard.TMAP_NO_ACQUIRE, line)
    clean(_two_maps(acquire_b=True)[0])


def _replace_in_place(release: bool) -> tuple[Kernel, int]:
    k = Kernel("k", reqntid=32)
    tmap = k.ld_param(k.param_ptr("tmap"))
    ptx.fence_proxy_tensormap_generic(k, "acquire", "gpu", tmap)
    ptx.tensormap_replace_box_dim(k, "global", k.cvta(tmap, "global", to=True), 0, 16)
    if release:
        ptx.fence_proxy_tensormap_generic(k, "release", "gpu")
    line = here() + 1
    ptx.fence_proxy_tensormap_generic(k, "acquire", "gpu", tmap)
    ptx.cp_async_bulk_prefetch_tensor(k, tmap, (0, 0))
    return k, line


def test_replace_in_global_memory_then_acquire_without_release():
    k, line = _replace_in_place(release=False)
    f = only(check_kernel(k), Hazard.TMAP_REPLACE_NO_RELEASE, line)
    assert [s.role for s in f.sites] == ["acquire", "replace"]
    clean(_replace_in_place(release=True)[0])


def _published(scope: str, *, per_cta: bool = False, acquire: str = "gpu") -> tuple[Kernel, int]:
    """Warp 0 encodes a map in shared memory and publishes it to global memory; all use it."""
    k = Kernel("k", reqntid=32)
    ws = k.ld_param(k.param_ptr("workspace"))
    out = k.add(ws, k.cvt(k.mul(k.ctaid.x, 128, type=t.u32), t.u64)) if per_cta else ws
    smap = k.shared_array(t.b8, 128, align=128, name="smap")
    with k.if_(k.laneid == 0):
        ptx.tensormap_replace_box_dim(k, "shared", smap, 0, 16)
    k.syncwarp()
    line = here() + 1
    ptx.tensormap_cp_fenceproxy(k, "release", scope, out, smap, 128)
    acq = here() + 1
    ptx.fence_proxy_tensormap_generic(k, "acquire", acquire, out)
    ptx.cp_async_bulk_prefetch_tensor(k, out, (0, 0))
    return k, line if acquire == "gpu" else acq


def test_map_published_at_cta_scope_to_a_shared_slot():
    k, line = _published("cta")
    f = only(check_kernel(k), Hazard.TMAP_SCOPE_TOO_NARROW, line)
    assert "released at .cta" in f.message


def test_map_published_at_gpu_scope_or_into_a_per_cta_slot():
    clean(_published("gpu")[0])
    clean(_published("cta", per_cta=True, acquire="cta")[0])


def test_map_written_elsewhere_acquired_at_cta_scope():
    k = Kernel("k", reqntid=32)
    tmap = k.ld_param(k.param_ptr("tmap"))
    line = here() + 1
    ptx.fence_proxy_tensormap_generic(k, "acquire", "cta", tmap)
    ptx.cp_async_bulk_prefetch_tensor(k, tmap, (0, 0))
    f = only(check_kernel(k), Hazard.TMAP_SCOPE_TOO_NARROW, line)
    assert "acquired at .cta" in f.message


# -- a TMA store whose start may be negative for some CTA ------------------------------------------
def _halo(h: int, *, load: bool = False) -> tuple[Kernel, int]:
    k = Kernel("k", reqntid=1)
    tmap = k.tensormap_addr(k.param_tensormap("tmap"))
    tile = k.shared_array(t.b8, 512, align=128, name="tile")
    x = k.sub(k.mul(k.ctaid.x, 64, type=t.u32), h, type=t.s32) if h else k.mul(k.ctaid.x, 64,
                                                                                type=t.u32)
    if load:
        bar = k.shared_array(t.b64, 1, align=8, name="bar")
        ptx.mbarrier_init(k, bar, 1)
        ptx.fence_proxy_async(k, "shared::cta")
        ptx.mbarrier_arrive_expect_tx(k, "release", "cta", "shared::cta", bar, 512, dst="_")
        ptx.cp_async_bulk_tensor(k, "shared::cluster", "global", tile, tmap, (x, 0), bar)
        ptx.mbarrier_wait(k, bar, 0)
    line = here() + 1
    ptx.cp_async_bulk_tensor(k, "global", "shared::cta", tmap, (x, 0), tile)
    ptx.cp_async_bulk_commit_group(k)
    ptx.cp_async_bulk_wait_group_read(k, 0)
    return k, line


def test_halo_store_starting_below_zero_in_the_first_cta():
    k, line = _halo(4)
    f = only(check_kernel(k, maps=TILE), Hazard.TMA_STORE_NEGATIVE_COORD, line)
    assert "as low as -4" in f.message


def test_halo_load_may_start_below_zero_and_the_store_starts_at_zero():
    clean(_halo(0, load=True)[0], maps=TILE)
    k, line = _halo(4, load=True)       # the load at -4 is fine; only the store is reported
    only(check_kernel(k, maps=TILE), Hazard.TMA_STORE_NEGATIVE_COORD, line)


# -- ring discipline -------------------------------------------------------------------------------
@pytest.mark.parametrize("parity", ["xor", "and"])
def test_parity_flipping_every_iteration_on_a_two_stage_ring(parity):
    k, lines = ws_pipeline(parity=parity)
    f = only(check_kernel(k, maps=TILE), Hazard.RING_PARITY, lines["wait"])
    assert "every 2 iterations" in f.message


def test_parity_flipping_every_iteration_is_right_for_one_stage():
    clean(ws_pipeline(parity="xor", stages=1)[0], maps=TILE)


def test_consumer_waiting_on_the_next_stage_barrier():
    k, lines = ws_pipeline(wait_ahead=1)
    f = only(check_kernel(k, maps=TILE), Hazard.WAIT_WRONG_BARRIER, lines["read"])
    assert [s.role for s in f.sites] == ["read", "wait", "copy"]


def test_producer_refilling_without_waiting_on_the_empty_barriers():
    k, lines = ws_pipeline(producer_waits=False)
    only(check_kernel(k, maps=TILE), Hazard.RING_REFILL_UNGUARDED, lines["load"])


def test_consumer_reading_before_any_wait():
    k, lines = ws_pipeline(consumer_waits=False)
    only(check_kernel(k, maps=TILE), Hazard.SMEM_READ_BEFORE_WAIT, lines["read"])


def _two_buffers(wait_slot: int, *, early_read: bool = False) -> tuple[Kernel, int]:
    """One thread loads two tiles on their own barriers, waits on `wait_slot`, reads tile 1."""
    k = Kernel("k", reqntid=1)
    tmap = k.tensormap_addr(k.param_tensormap("tmap"))
    tiles = k.shared_array(t.b8, 1024, align=1024, name="tiles")
    full = k.shared_array(t.b64, 2, align=8, name="full")
    for s in range(2):
        ptx.mbarrier_init(k, Addr(full, 8 * s), 1)
    ptx.fence_proxy_async(k, "shared::cta")
    for s in range(2):
        ptx.mbarrier_arrive_expect_tx(k, "release", "cta", "shared::cta", Addr(full, 8 * s),
                                      512, dst="_")
        ptx.cp_async_bulk_tensor(k, "shared::cluster", "global", Addr(tiles, 512 * s), tmap,
                                 (0, s), Addr(full, 8 * s))
    line = here() + 2
    if early_read:
        k.ld(Addr(tiles, 512), type=t.u32, space="shared::cta")
    ptx.mbarrier_wait(k, Addr(full, 8 * wait_slot), 0)
    if not early_read:
        line = here() + 1
        k.ld(Addr(tiles, 512), type=t.u32, space="shared::cta")
    ptx.mbarrier_wait(k, Addr(full, 8 * (1 - wait_slot)), 0)
    return k, line


def test_read_after_waiting_on_the_other_buffers_barrier():
    k, line = _two_buffers(0)
    only(check_kernel(k, maps=TILE), Hazard.WAIT_WRONG_BARRIER, line)
    clean(_two_buffers(1)[0], maps=TILE)


def test_read_of_a_tma_destination_before_the_wait():
    k, line = _two_buffers(1, early_read=True)
    only(check_kernel(k, maps=TILE), Hazard.SMEM_READ_BEFORE_WAIT, line)


def _try_once(loop: bool) -> tuple[Kernel, int]:
    k = Kernel("k", reqntid=1)
    bar = k.shared_array(t.b64, 1, align=8, name="bar")
    ptx.mbarrier_init(k, bar, 1)
    ptx.mbarrier_arrive(k, bar, dst="_")
    line = here() + 1
    (ptx.mbarrier_wait if loop else ptx.mbarrier_try_wait_parity)(k, bar, 0)
    return k, line


def test_try_wait_result_never_looped_on():
    k, line = _try_once(loop=False)
    only(check_kernel(k), Hazard.TRY_WAIT_NOT_LOOPED, line)
    clean(_try_once(loop=True)[0])


@pytest.mark.parametrize("empty_count", [1, 3])
def test_pipeline_ring_with_an_empty_count_its_consumers_do_not_reach(empty_count):
    # ptxdsl.pipeline's ring (run-time indexed barriers): 2 consumer warps release each stage.
    from tests import pipeline_kernels as PK
    assert PK.CONSUMER_WARPS == 2
    found = PK.build_ring(3, empty_count=empty_count).check()
    assert ids(found) == ["mbar-arrive-count"], [f.format() for f in found]
    assert f"expect {empty_count} arrivals" in found[0].message and "2 arrivals" in \
        found[0].message
    assert PK.build_ring(3).check() == []
