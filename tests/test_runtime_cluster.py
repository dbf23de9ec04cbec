"""Cluster launch checks without a GPU: the shape rules (`runtime.cluster.check_cluster`), the
non-portable attribute and the occupancy query against a fake driver, and `Function`'s use of
them (a Function built around the fake driver and a fake device)."""

from __future__ import annotations

import contextlib
from types import SimpleNamespace

import pytest

from ptxdsl import BuildError, Kernel
from ptxdsl.runtime import LaunchError
from ptxdsl.runtime import cluster as C
from ptxdsl.runtime import launch as L


# -- the shape rules ------------------------------------------------------------------------------
@pytest.mark.parametrize("grid, cluster, kw, want", [
    ((4, 1, 1), None, {}, None),
    ((4, 1, 1), 2, {}, (2, 1, 1)),
    ((4, 2, 1), (2, 2), {}, (2, 2, 1)),
    ((8, 1, 1), None, {"required": (4, 1, 1)}, (4, 1, 1)),
    ((8, 1, 1), (4, 1, 1), {"required": (4, 1, 1)}, (4, 1, 1)),
    ((8, 1, 1), None, {"required": (0, 0, 0)}, None),      # the driver's "no requirement"
    ((16, 1, 1), 16, {}, (16, 1, 1)),                     # non-portable, still launchable
    ((4, 1, 1), 4, {"max_rank": 4}, (4, 1, 1)),
    ((4, 1, 1), 2, {"must_be_set": True}, (2, 1, 1)),
])
def test_accepted_shapes(grid, cluster, kw, want):
    assert C.check_cluster("k", grid, cluster, **kw) == want


@pytest.mark.parametrize("grid, cluster, kw, words", [
    ((4, 1, 1), None, {"must_be_set": True}, "explicitcluster: launch it with cluster="),
    ((8, 1, 1), 2, {"required": (4, 1, 1)}, "declares .reqnctapercluster 4, 1, 1"),
    ((6, 1, 1), 4, {}, "not a whole number of clusters"),
    ((6, 1, 1), None, {"required": (4, 1, 1)}, "not a whole number of clusters"),
    ((4, 3, 1), (1, 2), {}, "not a whole number of clusters"),
    ((32, 1, 1), 32, {}, "exceeds the hardware limit of 16"),
    ((8, 4, 1), (8, 4), {}, "exceeds the hardware limit of 16"),
    ((8, 1, 1), 8, {"max_rank": 4}, "declares .maxclusterrank 4"),
    ((4, 1, 1), 2, {"cluster_launch": False, "device": "Old GPU"}, "Old GPU cannot launch"),
    ((4, 1, 1), (0, 1), {}, "cluster must be a positive int"),
    ((4, 1, 1), (1, 1, 1, 1), {}, "cluster must be a positive int"),
    ((4, 1, 1), True, {}, "cluster must be a positive int"),
])
def test_refused_shapes(grid, cluster, kw, words):
    with pytest.raises(LaunchError, match=words.replace(".", r"\.").replace("(", r"\(")):
        C.check_cluster("k", grid, cluster, **kw)


def test_max_cluster_rank_is_read_from_the_entry_directives():
    ptx = (".visible .entry a(\n\t.param .u64 p\n)\n.maxntid 128\n.maxclusterrank 4\n{\n\tret;\n}\n"
           ".visible .entry b()\n.maxclusterrank 2\n{\n\tret;\n}\n"
           ".visible .entry c()\n{\n\tret;\n}\n")
    assert C.max_cluster_rank(ptx, "a") == 4
    assert C.max_cluster_rank(ptx, "b") == 2
    assert C.max_cluster_rank(ptx, "c") is None
    assert C.max_cluster_rank(ptx, "missing") is None


def test_kernel_refuses_a_required_cluster_no_gpu_launches():
    with pytest.raises(BuildError, match="32 CTAs per cluster; no GPU launches more than 16"):
        Kernel("k", reqnctapercluster=(8, 2, 2))
    assert Kernel("k", reqnctapercluster=(4, 4)).reqnctapercluster == (4, 4)


# -- a fake driver ----------------------------------------------------------------------------
class FakeDriver:
    """The few cuda.bindings.driver names the cluster launch path uses."""

    def __init__(self, active=2, set_attr_ok=True, has_query=True):
        self.calls: list = []
        self.active, self.set_attr_ok = active, set_attr_ok
        self.CUfunction_attribute = SimpleNamespace(
            CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED="NON_PORTABLE")
        self.CUlaunchAttributeID = SimpleNamespace(
            CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION="CLUSTER_DIMENSION")
        self.CUresult = SimpleNamespace(CUDA_SUCCESS=0)
        if not has_query:
            self.cuOccupancyMaxActiveClusters = None

    @staticmethod
    def CUstream(h=0):
        return h

    @staticmethod
    def CUlaunchConfig():
        return SimpleNamespace()

    @staticmethod
    def CUlaunchAttribute():
        return SimpleNamespace(value=SimpleNamespace(clusterDim=SimpleNamespace()))

    def cuFuncSetAttribute(self, handle, attr, value):
        self.calls.append(("set", attr, value))
        return (0 if self.set_attr_ok else 1,)

    def cuOccupancyMaxActiveClusters(self, handle, cfg):
        cd = cfg.attrs[0].value.clusterDim
        self.calls.append(("occupancy", (cd.x, cd.y, cd.z), cfg.sharedMemBytes))
        return (0, self.active)

    def cuLaunchKernelEx(self, cfg, handle, params, extra):
        if cfg.numAttrs == 0:
            self.calls.append(("launch",))        # no attribute: a plain launch
        else:
            self.calls.append(("launchEx", (cfg.attrs[0].value.clusterDim.x,)))
        return (0,)


def test_non_portable_attribute():
    drv = FakeDriver()
    C.allow_non_portable(drv, "h", "k", 16)
    assert drv.calls == [("set", "NON_PORTABLE", 1)]
    with pytest.raises(LaunchError, match="above the portable 8 and this driver/device does "
                       "not allow non-portable"):
        C.allow_non_portable(FakeDriver(set_attr_ok=False), "h", "k", 12)


def test_occupancy_query():
    drv = FakeDriver(active=3)
    assert C.max_active_clusters(drv, "h", "k", (8, 1, 1), (128, 1, 1), 4096, 0,
                                 (4, 1, 1)) == 3
    assert drv.calls == [("occupancy", (4, 1, 1), 4096)]
    with pytest.raises(LaunchError, match=r"no cluster of 16 CTAs \(16, 1, 1\) with 1024 "
                       r"threads and 200000 bytes .* fits"):
        C.max_active_clusters(FakeDriver(active=0), "h", "k", (16, 1, 1), (1024, 1, 1), 200000,
                              0, (16, 1, 1))
    assert C.max_active_clusters(FakeDriver(has_query=False), "h", "k", (2, 1, 1), (32, 1, 1),
                                 0, 0, (2, 1, 1)) is None


# -- Function on the fake driver ------------------------------------------------------------
def _function(monkeypatch, drv, *, required=(0, 0, 0), must=False, ptx=""):
    info = SimpleNamespace(max_threads_per_block=1024, max_block_dim=(1024, 1024, 64),
                           max_grid_dim=(1 << 31 - 1, 65535, 65535), cluster_launch=True,
                           name="Fake H100", max_shared_per_block_optin=227 * 1024)
    monkeypatch.setattr(L, "driver", lambda: drv)
    monkeypatch.setattr(L, "device_info", lambda device: info)
    monkeypatch.setattr(L, "enter_device", lambda device: None)    # (nothing to give back)
    monkeypatch.setattr(L, "on_device", lambda device: contextlib.nullcontext())
    fn = object.__new__(L.Function)
    fn.name, fn.handle, fn.device = "k", "h", 0
    fn.max_threads_per_block, fn.static_shared_bytes, fn._dyn_limit = 1024, 0, 48 * 1024
    fn.required_cluster, fn.cluster_must_be_set = required, must
    fn.max_cluster_rank = C.max_cluster_rank(ptx, "k")
    fn._non_portable, fn._configs, fn._pinned, fn._success = False, {}, [], 0
    fn._free_packers = [SimpleNamespace(pack=lambda args: 0)]
    fn._launch_ex, fn._c_launch, fn._c_spec = drv.cuLaunchKernelEx, None, None
    import threading
    fn._config_lock = threading.Lock()
    return fn


def test_function_sets_non_portable_once_and_checks_occupancy(monkeypatch):
    drv = FakeDriver()
    fn = _function(monkeypatch, drv)
    fn.launch(32, 128, cluster=16)
    fn.launch(32, 64, cluster=16)        # a new configuration: the attribute is already set
    sets = [c for c in drv.calls if c[0] == "set"]
    assert sets == [("set", "NON_PORTABLE", 1)]
    assert [c for c in drv.calls if c[0] == "occupancy"] == [
        ("occupancy", (16, 1, 1), 0), ("occupancy", (16, 1, 1), 0)]
    assert [c[0] for c in drv.calls if c[0].startswith("launch")] == ["launchEx", "launchEx"]


def test_function_portable_cluster_needs_no_attribute(monkeypatch):
    drv = FakeDriver()
    _function(monkeypatch, drv).launch(8, 32, cluster=(8, 1, 1))
    assert not [c for c in drv.calls if c[0] == "set"]


def test_function_refuses_before_the_driver(monkeypatch):
    drv = FakeDriver(active=0)
    fn = _function(monkeypatch, drv)
    with pytest.raises(LaunchError, match="cuOccupancyMaxActiveClusters = 0"):
        fn.launch(8, 1024, cluster=8)
    assert not [c for c in drv.calls if c[0].startswith("launch")]
    fn = _function(monkeypatch, FakeDriver(), ptx=".entry k()\n.maxclusterrank 2\n{\n}\n")
    with pytest.raises(LaunchError, match="maxclusterrank 2"):
        fn.launch(8, 32, cluster=4)


def test_function_required_cluster_launches_plainly(monkeypatch):
    drv = FakeDriver()
    fn = _function(monkeypatch, drv, required=(2, 1, 1))
    fn.launch(4, 32)                     # the kernel carries its shape: no attribute
    assert [c[0] for c in drv.calls] == ["occupancy", "launch"]
    with pytest.raises(LaunchError, match="not a whole number of clusters"):
        fn.launch(3, 32)


def test_function_max_active_clusters(monkeypatch):
    """The persistent grid of a cluster kernel: the kernel's required shape by default, or the
    one given; refused without either."""
    drv = FakeDriver(active=33)
    fn = _function(monkeypatch, drv, required=(4, 1, 1))
    assert fn.max_active_clusters(384, shared_mem=4096) == 33
    assert drv.calls == [("occupancy", (4, 1, 1), 4096)]
    fn = _function(monkeypatch, FakeDriver(active=5))
    assert fn.max_active_clusters((128, 1, 1), cluster=2) == 5
    with pytest.raises(LaunchError, match="needs a cluster shape"):
        fn.max_active_clusters(128)
    with pytest.raises(LaunchError, match="cuOccupancyMaxActiveClusters = 0"):
        _function(monkeypatch, FakeDriver(active=0)).max_active_clusters(1024, cluster=8)
