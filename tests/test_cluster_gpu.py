"""Thread-block clusters on the GPU: TMA multicast over 2- and 4-CTA clusters through a cluster
MbarrierRing (cluster barriers, remote empty-barrier arrivals through mapa), distributed shared
memory with mapa + st.async completing on the receiving CTA's mbarrier, and the launch checks
(non-portable 16-CTA clusters, occupancy, a wrong cluster shape refused before the driver).
Kernels run in child processes with bounded waits (tests/gpu_pipeline_run.py)."""

from __future__ import annotations

import numpy as np
import pytest

from ptxdsl.runtime import DeviceBuffer, LaunchError, load_module, load_ptx, synchronize
from ptxdsl.runtime import cluster as C
from ptxdsl.runtime._driver import driver
from ptxdsl.testing import gpu_deadline
from tests import gpu_kernels_runtime as K
from tests import pipeline_kernels as PK
from tests.gpu_pipeline_run import run_isolated

pytestmark = pytest.mark.gpu
CLUSTERS = 3


@pytest.fixture(autouse=True)
def _timeout():
    with gpu_deadline(120):
        yield


@pytest.mark.parametrize("ctas", PK.CLUSTER_SIZES)
@pytest.mark.parametrize("n_tiles", [1, 40])
def test_multicast_ring_every_cta_gets_every_tile(ctas, n_tiles):
    rng = np.random.default_rng(ctas * 100 + n_tiles)
    src = rng.integers(0, 2**32, size=(CLUSTERS * n_tiles * PK.MC_ROWS, PK.COLS),
                       dtype=np.uint32)
    blocks = ctas * CLUSTERS
    (out,) = run_isolated(
        PK.multicast_module(ctas, bounded=True), f"multicast_{ctas}",
        blocks, PK.THREADS,
        [("map", src, (PK.MC_ROWS // ctas, PK.COLS)),
         ("out", (blocks * n_tiles, PK.MC_TILE_ELEMS), np.uint32), n_tiles],
        cluster=(ctas, 1, 1))
    np.testing.assert_array_equal(out, PK.multicast_expected(src, ctas, CLUSTERS, n_tiles))


@pytest.mark.parametrize("ctas", PK.CLUSTER_SIZES)
def test_dsmem_st_async_completes_on_the_remote_barrier(ctas):
    blocks = ctas * CLUSTERS
    (out,) = run_isolated(PK.module(PK.build_dsmem(ctas, bounded=True), bounded=True),
                          f"dsmem_{ctas}", blocks, PK.DSMEM_THREADS,
                          [("out", (blocks, PK.DSMEM_THREADS), np.uint32)])
    np.testing.assert_array_equal(out, PK.dsmem_expected(ctas, CLUSTERS))


def test_a_wrong_cluster_shape_is_refused_before_the_driver():
    fn = load_module(PK.multicast_module(4))["multicast_4"]
    assert fn.required_cluster == (4, 1, 1)
    with pytest.raises(LaunchError, match="declares .reqnctapercluster 4, 1, 1"):
        fn.launch(8, PK.THREADS, (None, None, 1), cluster=2)
    with pytest.raises(LaunchError, match="not a whole number of clusters"):
        fn.launch(6, PK.THREADS, (None, None, 1))


def test_non_portable_16_cta_cluster_launches():
    fn = load_ptx(K.cluster_ids(".explicitcluster"))["cluster_ids"]
    with DeviceBuffer.zeros(64, np.uint32) as out:
        fn.launch(32, 32, (out,), cluster=16)        # sets NON_PORTABLE_CLUSTER_SIZE_ALLOWED
        synchronize(timeout=20)
        ids = out.to_numpy().reshape(32, 2)
        assert ids[:, 0].tolist() == list(range(16)) * 2 and set(ids[:, 1]) == {16}
    assert fn._non_portable
    n = C.max_active_clusters(driver(), fn.handle, "cluster_ids", (32, 1, 1), (32, 1, 1), 0, 0,
                              (16, 1, 1))
    assert n is None or n >= 1
    with pytest.raises(LaunchError, match="exceeds the hardware limit of 16"):
        fn.launch(32, 32, (out,), cluster=32)


def test_ld_with_l2_cache_hint_policies():
    rng = np.random.default_rng(7)
    n = 100_003
    a = rng.integers(0, 2**32, size=n, dtype=np.uint32)
    b = rng.integers(0, 2**32, size=n, dtype=np.uint32)
    (out,) = run_isolated(PK.module(PK.build_l2_hint(bounded=True), bounded=True), "l2_hint",
                          64, PK.L2_THREADS, [("in", a), ("in", b), ("out", n, np.uint32), n])
    want = (a.astype(np.uint64) * 7 + b) % (1 << 32)
    np.testing.assert_array_equal(out, want.astype(np.uint32))
