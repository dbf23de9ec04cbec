"""Checker: mbarrier hazards (init, publication, expect_tx bytes, wait parity, wait space),
one kernel with the hazard and its corrected twin each; and the seed 004 bug."""

from __future__ import annotations

from ptxdsl import Kernel, ptx, t
from ptxdsl.checker import Hazard, check_kernel
from ptxdsl.runtime.tensormap_desc import TiledDesc
from tests.checker_kernels import TILE_DESC, Tma, here, ids, only


# -- use before init -------------------------------------------------------------------------------
def test_barrier_never_initialised():
    e = Tma()
    k = e.k
    with k.if_(k.tid.x == 0):
        line = here() + 1
        ptx.mbarrier_arrive(k, e.bar, dst="_")
    f = only(check_kernel(k), Hazard.MBAR_UNINIT, line)
    assert "never initialised" in f.message


def test_barrier_initialised_on_one_path_only():
    e = Tma()
    k = e.k
    with k.if_(k.ld_param(k.param(t.pred, "first"))):
        ptx.mbarrier_init(k, e.bar, 128)
    line = here() + 1
    ptx.mbarrier_arrive(k, e.bar, dst="_")
    f = only(check_kernel(k), Hazard.MBAR_UNINIT, line)
    assert "some path" in f.message


def test_barrier_initialised_by_thread0_then_barrier():
    e = Tma()
    k = e.k
    with k.if_(k.tid.x == 0):
        ptx.mbarrier_init(k, e.bar, 128)
    k.bar_sync(0)
    ptx.mbarrier_arrive(k, e.bar, dst="_")
    ptx.mbarrier_wait(k, e.bar, 0)
    assert check_kernel(k) == []


# -- init not published ----------------------------------------------------------------------------
def test_other_threads_wait_without_barrier_after_init():
    # CUDA Programming Guide §10.30.2 (seed 000): thread 0 initialises, everyone waits at once.
    e = Tma()
    k = e.k
    with k.if_(k.tid.x == 0):
        init = here() + 1
        ptx.mbarrier_init(k, e.bar, 1)
        ptx.fence_proxy_async(k, "shared::cta")
        ptx.cp_async_bulk_tensor(k, "shared::cluster", "global", e.tile, e.tmap, (0, 0), e.bar)
        ptx.mbarrier_arrive_expect_tx(k, "release", "cta", "shared::cta", e.bar, 512, dst="_")
    line = here() + 1
    ptx.mbarrier_wait(k, e.bar, 0)
    f = only(check_kernel(k, maps={"tmap": TILE_DESC}), Hazard.MBAR_INIT_UNSYNCED, line)
    assert f.sites[1].role == "init" and f.sites[1].loc.line == init
    assert "did not initialise it" in f.message


def test_tma_right_after_init_in_the_same_thread():
    e = Tma()
    k = e.k
    with k.if_(k.tid.x == 0):
        ptx.mbarrier_init(k, e.bar, 1)
        line = here() + 1
        ptx.cp_async_bulk_tensor(k, "shared::cluster", "global", e.tile, e.tmap, (0, 0), e.bar)
        ptx.mbarrier_arrive_expect_tx(k, "release", "cta", "shared::cta", e.bar, 512, dst="_")
        ptx.mbarrier_wait(k, e.bar, 0)
    f = only(check_kernel(k, maps={"tmap": TILE_DESC}), Hazard.MBAR_INIT_UNSYNCED, line)
    assert "TMA unit" in f.message


def test_tma_after_init_and_proxy_fence_in_the_same_thread():
    e = Tma()
    k = e.k
    with k.if_(k.tid.x == 0):
        ptx.mbarrier_init(k, e.bar, 1)
        ptx.fence_proxy_async(k, "shared::cta")
        ptx.cp_async_bulk_tensor(k, "shared::cluster", "global", e.tile, e.tmap, (0, 0), e.bar)
        ptx.mbarrier_arrive_expect_tx(k, "release", "cta", "shared::cta", e.bar, 512, dst="_")
        ptx.mbarrier_wait(k, e.bar, 0)
    assert check_kernel(k, maps={"tmap": TILE_DESC}) == []


def _multicast(fence_cluster: bool, barrier: str = "asm") -> tuple[Kernel, int]:
    e = Tma()
    k = e.k
    with k.if_(k.tid.x == 0):
        ptx.mbarrier_init(k, e.bar, 1)
        if fence_cluster:
            ptx.fence_mbarrier_init(k)
    k.bar_sync(0)
    if fence_cluster and barrier == "asm":
        k.asm("barrier.cluster.arrive.relaxed.aligned;\nbarrier.cluster.wait.aligned;",
              requires=("7.8", "sm_90"))
    elif fence_cluster:
        ptx.barrier_cluster_arrive(k, "relaxed", aligned=True)
        if barrier == "builders":
            ptx.barrier_cluster_wait(k, aligned=True)
    with k.if_(k.tid.x == 0):
        line = here() + 1
        ptx.cp_async_bulk_tensor(k, "shared::cluster", "global", e.tile, e.tmap, (0, 0), e.bar,
                                 cta_mask=0b11)
    return k, line


def test_multicast_without_cluster_publication():
    k, line = _multicast(fence_cluster=False)
    f = only(check_kernel(k), Hazard.MBAR_INIT_UNSYNCED, line)
    assert "cluster" in f.message


def test_multicast_after_mbarrier_init_fence_and_cluster_barrier():
    k, _ = _multicast(fence_cluster=True)
    assert check_kernel(k) == []


def test_multicast_after_cluster_barrier_builders():
    k, _ = _multicast(fence_cluster=True, barrier="builders")
    assert check_kernel(k) == []


def test_multicast_after_cluster_arrive_without_wait():
    k, line = _multicast(fence_cluster=True, barrier="arrive only")
    only(check_kernel(k), Hazard.MBAR_INIT_UNSYNCED, line)


# -- expect_tx bytes -------------------------------------------------------------------------------
def seed_004(tx_bytes: int, *, sync: bool) -> tuple[Kernel, int]:
    """The consumer of NVIDIA's device-side tensor-map example (seed 004 includes it): a 4 x 128
    u8 box = 512 bytes, arriving with `tx_bytes`. (`sync`: the bar.sync the original lacks.)"""
    k = Kernel("consume_tensor_map", reqntid=128)
    tensor_map = k.ld_param(k.param_ptr("tensor_map"))
    with k.if_(k.tid.x == 0):
        ptx.fence_proxy_tensormap_generic(k, "acquire", "sys", tensor_map)
    bar = k.shared_array(t.b64, 1, align=8, name="bar")
    smem_buf = k.shared_array(t.b8, 4 * 128, align=128, name="smem_buf")
    with k.if_(k.tid.x == 0):
        ptx.mbarrier_init(k, bar, 1)
        ptx.fence_proxy_async(k, "shared::cta")
    if sync:
        k.bar_sync(0)
    with k.if_(k.tid.x == 0):
        ptx.cp_async_bulk_tensor(k, "shared::cluster", "global", smem_buf, tensor_map, (0, 0),
                                 bar)
        line = here() + 1
        ptx.mbarrier_arrive_expect_tx(k, "release", "cta", "shared::cta", bar, tx_bytes)
    ptx.mbarrier_wait(k, bar, 0)
    return k, line


HOST_MAP = TiledDesc.from_numpy_order(0x10000, (64, 256), "uint8", (4, 128))


def test_seed_004_expect_tx_0_for_a_512_byte_load():
    assert HOST_MAP.box_bytes == 512
    k, line = seed_004(0, sync=True)
    context = {"host_maps": ["tensor_map"], "maps": {"tensor_map": HOST_MAP}}
    f = only(check_kernel(k, **context), Hazard.EXPECT_TX_MISMATCH, line)
    assert "announces 0 bytes" in f.message and "deliver 512 bytes" in f.message
    assert [s.role for s in f.sites] == ["expect_tx", "load", "wait"]
    # As published, the kernel also waits without a bar.sync after thread 0's init.
    k, _ = seed_004(0, sync=False)
    assert ids(check_kernel(k, **context)) == ["expect-tx-mismatch", "mbar-init-unsynced"]


def test_seed_004_corrected():
    k, _ = seed_004(512, sync=True)
    assert check_kernel(k, host_maps=["tensor_map"], maps={"tensor_map": HOST_MAP}) == []


def _encoded_then_loaded(tx_bytes: int) -> tuple[Kernel, int]:
    """Box 16 x 8 u32 written with constant tensormap.replace values, published to global
    memory, acquired, loaded: 512 bytes that no host description had to tell."""
    k = Kernel("k", reqntid=32)
    out = k.ld_param(k.param_ptr("out"))
    smap = k.shared_array(t.b8, 128, align=128, name="smap")
    bar = k.shared_array(t.b64, 1, align=8, name="bar")
    tile = k.shared_array(t.b8, 512, align=128, name="tile")
    with k.if_(k.laneid == 0):
        ptx.tensormap_replace_rank(k, ptx.space_shared, smap, rank=2)
        ptx.tensormap_replace_box_dim(k, ptx.space_shared, smap, 0, 16)
        ptx.tensormap_replace_box_dim(k, ptx.space_shared, smap, 1, 8)
        ptx.tensormap_replace_elemtype(k, ptx.space_shared, smap, "u32")
        ptx.mbarrier_init(k, bar, 1)
    k.syncwarp()
    ptx.tensormap_cp_fenceproxy(k, "release", "gpu", out, smap, 128)
    k.bar_sync(0)
    with k.if_(k.laneid == 0):
        ptx.fence_proxy_tensormap_generic(k, "acquire", "gpu", out)
        ptx.cp_async_bulk_tensor(k, "shared::cluster", "global", tile, out, (0, 0), bar)
        line = here() + 1
        ptx.mbarrier_arrive_expect_tx(k, "release", "cta", "shared::cta", bar, tx_bytes)
        ptx.mbarrier_wait(k, bar, 0)
    return k, line


def test_expect_tx_against_constant_replace_values():
    k, line = _encoded_then_loaded(1024)
    f = only(check_kernel(k), Hazard.EXPECT_TX_MISMATCH, line)
    assert "deliver 512 bytes" in f.message and "hangs" in f.message
    assert "can pass" in check_kernel(_encoded_then_loaded(256)[0])[0].message


def test_expect_tx_matching_constant_replace_values():
    k, _ = _encoded_then_loaded(512)
    assert check_kernel(k) == []


def test_unknown_box_size_is_not_guessed():
    e = Tma()
    e.setup()
    e.load(tx=64)
    ptx.mbarrier_wait(e.k, e.bar, 0)
    assert check_kernel(e.k) == []          # no description: the box size is unknown
    assert ids(check_kernel(e.k, maps={"tmap": TILE_DESC})) == ["expect-tx-mismatch"]


# -- wait parity -----------------------------------------------------------------------------------
def _pipeline(flip: bool) -> tuple[Kernel, int]:
    e = Tma()
    k = e.k
    e.setup()
    phase = ptx.MbarrierPhase(k, e.bar)
    with k.for_range(0, k.ld_param(k.param(t.u32, "tiles"))) as i:
        e.load(coords=(0, i))
        if flip:
            phase.wait()
        else:
            line = here() + 1
            ptx.mbarrier_wait(k, e.bar, 0)
        k.bar_sync(0)
    return k, line if not flip else 0


def test_wait_loop_with_constant_parity():
    k, line = _pipeline(flip=False)
    f = only(check_kernel(k, maps={"tmap": TILE_DESC}), Hazard.WAIT_PARITY_CONSTANT, line)
    assert "parity 0" in f.message and [s.role for s in f.sites] == ["wait", "loop"]


def test_wait_loop_flipping_parity():
    k, _ = _pipeline(flip=True)
    assert check_kernel(k, maps={"tmap": TILE_DESC}) == []


# -- waiting on a cluster address ------------------------------------------------------------------
def _wait_on(k: Kernel, bar, through_cluster: bool) -> int:
    addr = k.mov(bar)
    if through_cluster:   # e.g. a neighbour's barrier: a .shared::cluster window address ...
        generic = k.cvta(k.mov(bar, type=t.u64), "shared::cta")
        addr = k.cvta(generic, "shared::cluster", to=True)
        addr = k.add(addr, 0)          # ... in a register the builder knows nothing about
    line = here() + 1
    ptx.mbarrier_wait(k, addr, 0)      # the try_wait loop
    return line


def test_try_wait_on_shared_cluster_address():
    e = Tma()
    e.setup()
    line = _wait_on(e.k, e.bar, through_cluster=True)
    found = check_kernel(e.k)
    assert Hazard.WAIT_CLUSTER_SPACE.value in ids(found)
    f = next(f for f in found if f.hazard is Hazard.WAIT_CLUSTER_SPACE)
    assert f.loc.line == line and f.sites[1].ptx.startswith("cvta.to.shared::cluster")


def test_try_wait_on_local_address():
    e = Tma()
    e.setup()
    _wait_on(e.k, e.bar, through_cluster=False)
    assert check_kernel(e.k) == []


def test_init_under_a_uniform_guard_may_not_run():
    e = Tma()
    k = e.k
    with k.guard(k.ld_param(k.param(t.pred, "first"))):   # the same in every thread
        ptx.mbarrier_init(k, e.bar, 128)
    line = here() + 1
    ptx.mbarrier_arrive(k, e.bar, dst="_")
    f = only(check_kernel(k), Hazard.MBAR_UNINIT, line)
    assert "some path" in f.message
