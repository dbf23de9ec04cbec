"""Checker: tensor-map hazards, one kernel with the hazard and its corrected twin each."""

from __future__ import annotations

from ptxdsl import Addr, Kernel, ptx, t
from ptxdsl.checker import Hazard, check_kernel
from tests.checker_kernels import TILE_DESC, Tma, encode_map, here, ids, only


def _only(findings, hazard: Hazard, line: int):
    """`only`, and the formatted finding names the id and this file's line."""
    f = only(findings, hazard, line)
    assert hazard.value in f.format() and f"{__file__}:{line}" in f.format()
    return f


# -- acquire missing / not on every path / not shared with the other threads ------------------
def test_global_map_without_acquire():
    e = Tma(map="global", acquire=False)
    e.setup()
    k = e.k
    with k.if_(k.tid.x == 0):
        line = here() + 1
        ptx.cp_async_bulk_tensor(k, "shared::cluster", "global", e.tile, e.tmap, (0, 0), e.bar)
        ptx.mbarrier_arrive_expect_tx(k, "release", "cta", "shared::cta", e.bar, 512)
    f = _only(check_kernel(k), Hazard.TMAP_NO_ACQUIRE, line)
    assert "never acquired" in f.message and "tmap_ptr" in f.message


def test_global_map_acquired():
    e = Tma(map="global")
    e.setup()
    e.load()
    e.k.ret()
    assert check_kernel(e.k) == []


def test_acquire_on_one_path_only():
    e = Tma(map="global", acquire=False)
    k = e.k
    flag = k.ld_param(k.param(t.pred, "fresh"))   # the same in every thread: a uniform branch
    with k.if_(flag):
        ptx.fence_proxy_tensormap_generic(k, "acquire", "gpu", e.tmap)
    e.setup()
    line = here() + 1
    ptx.cp_async_bulk_prefetch_tensor(k, e.tmap, (0, 0))
    f = _only(check_kernel(k), Hazard.TMAP_NO_ACQUIRE, line)
    assert "not acquired on every path" in f.message


def test_modification_voids_the_acquire():
    k = Kernel("k", reqntid=32)
    out = k.ld_param(k.param_ptr("out"))
    ptx.fence_proxy_tensormap_generic(k, "acquire", "gpu", out)
    ptx.cp_async_bulk_prefetch_tensor(k, out, (0, 0))                 # fine: acquired
    ptx.tensormap_replace_rank(k, "generic", out, rank=2)           # modified in place ...
    line = here() + 1
    ptx.cp_async_bulk_prefetch_tensor(k, out, (0, 0))                 # ... and not re-acquired
    _only(check_kernel(k), Hazard.TMAP_NO_ACQUIRE, line)
    ptx.fence_proxy_tensormap_generic(k, "release", "gpu")           # the in-place write ...
    ptx.fence_proxy_tensormap_generic(k, "acquire", "gpu", out)       # ... re-acquired
    ptx.cp_async_bulk_prefetch_tensor(k, out, (0, 0))
    assert ids(check_kernel(k)) == [Hazard.TMAP_NO_ACQUIRE.value]     # only the earlier use


def test_acquire_by_thread0_used_by_all_without_barrier():
    e = Tma(map="global", acquire=False)
    k = e.k
    with k.if_(k.tid.x == 0):
        acq = here() + 1
        ptx.fence_proxy_tensormap_generic(k, "acquire", "gpu", e.tmap)
    line = here() + 1
    ptx.cp_async_bulk_prefetch_tensor(k, e.tmap, (0, k.tid.x))
    f = _only(check_kernel(k), Hazard.TMAP_ACQUIRE_UNSYNCED, line)
    assert f.sites[1].role == "acquire" and f.sites[1].loc.line == acq


def test_acquire_by_thread0_then_barrier():
    e = Tma(map="global", acquire=False)
    k = e.k
    with k.if_(k.tid.x == 0):
        ptx.fence_proxy_tensormap_generic(k, "acquire", "gpu", e.tmap)
    k.bar_sync(0)
    ptx.cp_async_bulk_prefetch_tensor(k, e.tmap, (0, k.tid.x))
    assert check_kernel(k) == []


# -- acquire size, address space, scope ---------------------------------------------------------
def test_acquire_size_other_than_128():
    # The builder refuses a size other than 128; raw PTX through k.asm is checked as well.
    k = Kernel("k", reqntid=32)
    tmap = k.ld_param(k.param_ptr("tmap_ptr"))
    line = here() + 1
    k.asm("fence.proxy.tensormap::generic.acquire.gpu [$0], 64;", ins=[tmap])
    ptx.cp_async_bulk_prefetch_tensor(k, tmap, (0, 0))
    _only(check_kernel(k), Hazard.TMAP_ACQUIRE_SIZE, line)


def test_acquire_size_128_in_inline_ptx():
    k = Kernel("k", reqntid=32)
    tmap = k.ld_param(k.param_ptr("tmap_ptr"))
    k.asm("fence.proxy.tensormap::generic.acquire.gpu [$0], 128;", ins=[tmap])
    ptx.cp_async_bulk_prefetch_tensor(k, tmap, (0, 0))
    assert check_kernel(k) == []


def _map_array(k: Kernel, *, to_global: bool):
    """The address of map number `i` in an array of maps in global memory."""
    maps = k.ld_param(k.param_ptr("maps"))
    if to_global:   # the mistake: cvta.to.global makes a .global address, the fence wants generic
        maps = k.cvta(maps, "global", to=True)
    i = k.ld_param(k.param(t.u64, "i"))
    return k.add(maps, k.mul(i, 128))


def test_acquire_on_global_space_address():
    k = Kernel("k", reqntid=32)
    m = _map_array(k, to_global=True)
    line = here() + 1
    ptx.fence_proxy_tensormap_generic(k, "acquire", "gpu", m)
    f = _only(check_kernel(k), Hazard.TMAP_ACQUIRE_SPACE, line)
    assert ".global address" in f.message and "maps" in f.message


def test_acquire_on_generic_address():
    k = Kernel("k", reqntid=32)
    ptx.fence_proxy_tensormap_generic(k, "acquire", "gpu", _map_array(k, to_global=False))
    assert check_kernel(k) == []


def test_host_written_map_acquired_at_gpu_scope():
    e = Tma(map="global", acquire=False)
    k = e.k
    with k.if_(k.tid.x == 0):
        line = here() + 1
        ptx.fence_proxy_tensormap_generic(k, "acquire", "gpu", e.tmap)
    k.bar_sync(0)
    e.setup()
    e.load()
    assert check_kernel(k) == []   # without context the writer is unknown: .gpu may be right
    _only(check_kernel(k, host_maps=["tmap_ptr"]), Hazard.TMAP_ACQUIRE_SCOPE, line)
    _only(check_kernel(k, host_maps=[e.tmap_param]), Hazard.TMAP_ACQUIRE_SCOPE, line)


def test_host_written_map_acquired_at_sys_scope():
    e = Tma(map="global", scope="sys")
    e.setup()
    e.load()
    assert check_kernel(e.k, host_maps=["tmap_ptr"]) == []


# -- by-value maps --------------------------------------------------------------------------------
def test_param_map_without_cvta_param():
    k = Kernel("k", reqntid=32)
    tm = k.param_tensormap("tmap")
    raw = k.mov(tm, type=t.b64)              # the param-space address ...
    addr = k.add(raw, 0, type=t.u64)         # ... which loses its hint here, so the builder
    line = here() + 1                        # cannot tell; the checker can
    ptx.cp_async_bulk_prefetch_tensor(k, addr, (0, 0))
    f = _only(check_kernel(k), Hazard.TMAP_PARAM_NO_CVTA, line)
    assert f.sites[1].ptx == "mov.b64 %rd1, tmap;"


def test_param_map_through_cvta_param():
    k = Kernel("k", reqntid=32)
    addr = k.add(k.tensormap_addr(k.param_tensormap("tmap")), 0, type=t.u64)
    ptx.cp_async_bulk_prefetch_tensor(k, addr, (0, 0))
    assert check_kernel(k) == []


# -- tensormap.replace -> cp_fenceproxy ------------------------------------------------------------
def test_replace_then_fenceproxy_without_warp_sync():
    k = Kernel("encode", reqntid=32)
    smap = k.shared_array(t.b8, 128, align=128, name="smap")
    with k.if_(k.tid.x == 0):
        replace = here() + 1
        ptx.tensormap_replace_rank(k, ptx.space_shared, smap, rank=2)
    line = here() + 1
    ptx.tensormap_cp_fenceproxy(k, "release", "gpu", k.param_ptr("out"), smap, 128)
    f = _only(check_kernel(k), Hazard.TMAP_REPLACE_NO_WARPSYNC, line)
    assert [(s.role, s.loc.line) for s in f.sites] == [("copy", line), ("replace", replace)]


def test_replace_then_warp_sync_then_fenceproxy():
    k = Kernel("encode", reqntid=32)
    encode_map(k, k.param_ptr("out"))
    assert check_kernel(k) == []


def test_fenceproxy_under_lane_condition():
    k = Kernel("encode", reqntid=32)
    smap = k.shared_array(t.b8, 128, align=128, name="smap")
    out = k.param_ptr("out")
    with k.if_(k.tid.x == 0):
        ptx.tensormap_replace_rank(k, ptx.space_shared, smap, rank=2)
        line = here() + 1
        ptx.tensormap_cp_fenceproxy(k, "release", "gpu", out, smap, 128)
    f = _only(check_kernel(k), Hazard.FENCEPROXY_DIVERGENT, line)
    assert f.sites[1].role == "condition" and f.sites[1].ptx.startswith("@")


def test_fenceproxy_under_guard_on_lane():
    k = Kernel("encode", reqntid=64)
    smap = k.shared_array(t.b8, 128, align=128, name="smap")
    out = k.ld_param(k.param_ptr("out"))
    with k.guard(k.laneid < 16):
        line = here() + 1
        ptx.tensormap_cp_fenceproxy(k, "release", "gpu", out, smap, 128)
    _only(check_kernel(k), Hazard.FENCEPROXY_DIVERGENT, line)


def test_fenceproxy_under_warp_uniform_condition():
    # Warp 0 encodes: the condition differs between warps, never between lanes of one warp.
    k = Kernel("encode", reqntid=128)
    with k.if_(k.shr(k.tid.x, 5) == 0):
        encode_map(k, k.param_ptr("out"), lane_cond=k.laneid == 0)
    assert check_kernel(k) == []


def test_fenceproxy_under_tid_x_below_a_warp_multiple():
    # `tid.x < 32` selects whole warps when .reqntid makes each warp one row of 32 x-threads
    # (here a 1-D CTA of 384 and a 2-D one of 64 x 2): the copy is warp-uniform.
    for dims in ((384,), (64, 2)):
        k = Kernel("encode", reqntid=dims)
        with k.if_(k.tid.x < 32):
            encode_map(k, k.param_ptr("out"), lane_cond=k.laneid == 0)
        assert check_kernel(k) == [], dims


def test_fenceproxy_under_tid_x_splitting_a_warp():
    # The twins that do split warps: a bound that is not a multiple of 32, and a 48 x 2 CTA
    # whose second warp holds x 32..47 of row 0 and x 0..15 of row 1.
    for dims, bound in (((384,), 16), ((48, 2), 32)):
        k = Kernel("encode", reqntid=dims)
        smap = k.shared_array(t.b8, 128, align=128, name="smap")
        out = k.ld_param(k.param_ptr("out"))
        with k.if_(k.tid.x < bound):
            line = here() + 1
            ptx.tensormap_cp_fenceproxy(k, "release", "gpu", out, smap, 128)
        _only(check_kernel(k), Hazard.FENCEPROXY_DIVERGENT, line)


# -- a producer warp's work loop whose next item comes from lane 0 ---------------------------------
def _claiming_encoder(next_item, *, helper: bool = False) -> tuple[Kernel, int]:
    """Warp 0 of a warp-specialized CTA encodes one map per work item; lane 0 claims the next
    item with an atomic and `next_item(k, claimed)` hands it to the warp. The loop's exit
    (and so the cp_fenceproxy under it) is warp-uniform only if that hand-over is a
    broadcast. `helper`: the edit and publish come from the shared `encode_map`."""
    k = Kernel("encode", reqntid=256)
    out = k.ld_param(k.param_ptr("out"))
    counter = k.cvta(k.ld_param(k.param_ptr("counter")), "global", to=True)
    n = k.ld_param(k.param(t.u32, "n"))
    smap = None if helper else k.shared_array(t.b8, 128, align=128, name="smap")
    line = 0
    with k.if_(k.shr(k.tid.x, 5) == 0):
        item = k.mov(k.ctaid.x, dst=k.reg(t.u32, "item"))
        claimed = k.mov(0, dst=k.reg(t.u32, "claimed"))
        with k.loop():
            k.break_(k.setp("ge", item, n, type=t.u32))
            with k.if_(k.laneid == 0):
                k.atom("add", Addr(counter), 1, type=t.u32, space="global", dst=claimed)
            if helper:
                encode_map(k, out, lane_cond=k.laneid == 0)
            else:
                with k.if_(k.laneid == 0):
                    ptx.tensormap_replace_rank(k, ptx.space_shared, smap, rank=2)
                k.syncwarp()
                line = here() + 1
                ptx.tensormap_cp_fenceproxy(k, "release", "gpu", out, smap, 128)
            k.add(next_item(k, claimed), k.read_special("nctaid.x"), type=t.u32, dst=item)
    return k, line


def test_fenceproxy_in_a_loop_fed_by_a_broadcast_is_clean():
    """The item broadcast from lane 0 (a constant source lane, or one the kernel reads from a
    parameter): every lane leaves the loop together."""
    for next_item in (lambda k, v: k.shfl_sync("idx", v, 0),
                      lambda k, v: k.shfl_sync("idx", v, k.ld_param(k.param(t.u32, "src")))):
        for helper in (False, True):
            assert check_kernel(_claiming_encoder(next_item, helper=helper)[0]) == []


def test_fenceproxy_in_a_loop_fed_per_lane_is_divergent():
    """The twins: the claimed value used as it is (only lane 0 wrote it), or shuffled down
    (each lane reads its neighbour's): lanes may leave the loop at different items."""
    for next_item in (lambda k, v: v, lambda k, v: k.shfl_sync("down", v, 1),
                      lambda k, v: k.shfl_sync("idx", v, k.laneid)):
        k, line = _claiming_encoder(next_item)
        _only(check_kernel(k), Hazard.FENCEPROXY_DIVERGENT, line)
        k, _ = _claiming_encoder(next_item, helper=True)
        assert ids(check_kernel(k)) == [Hazard.FENCEPROXY_DIVERGENT.value]


# -- modifying a map that copies may still read ----------------------------------------------------
def _modify_after_load(wait: bool) -> tuple[Kernel, int]:
    e = Tma(map="global")
    k = e.k
    e.setup()
    e.load()
    if wait:
        ptx.mbarrier_wait(k, e.bar, 0)
    with k.if_(k.tid.x == 0):
        line = here() + 1
        ptx.tensormap_replace_box_dim(k, "generic", e.tmap, 0, 32)
    return k, line


def test_map_modified_while_a_load_reads_it():
    k, line = _modify_after_load(wait=False)
    f = _only(check_kernel(k, maps={"tmap_ptr": TILE_DESC}), Hazard.TMAP_MODIFIED_IN_FLIGHT,
              line)
    assert f.sites[1].role == "reader" and "cp.async.bulk.tensor" in f.sites[1].ptx


def test_map_modified_after_the_load_completed():
    k, _ = _modify_after_load(wait=True)
    assert check_kernel(k, maps={"tmap_ptr": TILE_DESC}) == []


def test_map_modified_while_a_store_reads_it():
    e = Tma(map="global")
    e.store(wait=None)                           # committed, no wait_group.read yet
    k = e.k
    with k.if_(k.tid.x == 0):
        line = here() + 1
        ptx.tensormap_cp_fenceproxy(k, "release", "gpu", e.tmap,
                                    k.shared_array(t.b8, 128, align=128), 128)
        ptx.cp_async_bulk_wait_group_read(k, 0)
    found = check_kernel(k)
    assert Hazard.TMAP_MODIFIED_IN_FLIGHT.value in ids(found)
    assert next(f for f in found if f.hazard is Hazard.TMAP_MODIFIED_IN_FLIGHT).loc.line == line
