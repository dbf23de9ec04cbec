"""More than one device: contexts per device, peer access, copies between devices, host-pinned
mapped memory, and the checker's cross-device scope rule.

CPU tests drive the runtime against a fake driver that records which context was current for
each call (so "allocated / launched / enabled in the right context" is checked without a GPU).
GPU tests (`gpu`) need two Hopper GPUs with peer access and skip with the reason otherwise.
"""

from __future__ import annotations

import ctypes
import gc
from types import SimpleNamespace

import numpy as np
import pytest

from ptxdsl import Kernel, ptx, t
from ptxdsl.checker import Hazard, check_kernel, check_module
from ptxdsl.runtime import (
    DeviceBuffer,
    Event,
    HostBuffer,
    LaunchError,
    PeerAccessError,
    Stream,
    _driver,
    can_access_peer,
    copy_peer,
    device,
    disable_peer_access,
    enable_peer_access,
    load_on_devices,
    load_ptx,
    loader,
    multi_gpu_skip_reason,
    peer,
    peer_access_enabled,
    pointer_device,
    synchronize,
)
from ptxdsl.runtime.launch import Function
from ptxdsl.testing import gpu_deadline
from tests import gpu_kernels_runtime as K


# -- a fake driver --------------------------------------------------------------------------------
class _Names:
    def __getattr__(self, name: str) -> str:
        return name


class Ctx(str):
    """A fake CUcontext: compares as 'ctx<N>', converts to a handle value with int()."""

    def __int__(self) -> int:
        return 0x100 + int(self[3:])


class FakeDriver:
    """Just enough of cuda.bindings.driver; `calls` lists (name, current context, args)."""

    CUfunction_attribute = CUevent_flags = CUstream_flags = CUpointer_attribute = _Names()
    CUresult = SimpleNamespace(CUDA_SUCCESS=0)
    CU_MEMHOSTALLOC_PORTABLE, CU_MEMHOSTALLOC_DEVICEMAP, CU_MEMHOSTALLOC_WRITECOMBINED = 1, 2, 4

    def __init__(self, n: int = 2, peers: bool = True, enable_result: int = 0):
        self.n, self.peers, self.enable_result = n, peers, enable_result
        self.current = None
        self.calls: list[tuple] = []
        self.next_ptr = 0x7000_0000
        self.host: list = []

    # Calls that only need to succeed (and be recorded).
    _PLAIN = frozenset({"cuCtxDisablePeerAccess", "cuMemFree", "cuMemcpyPeer", "cuMemFreeHost",
                        "cuMemcpyDtoDAsync", "cuCtxSynchronize", "cuStreamSynchronize",
                        "cuLaunchKernelEx"})

    def __getattr__(self, name):
        if name not in self._PLAIN:
            raise AttributeError(name)
        return lambda *args: self._log(name, *args) or (0,)

    def _log(self, name, *args):
        self.calls.append((name, self.current, args))

    def named(self, name):
        return [c for c in self.calls if c[0] == name]

    def cuGetErrorName(self, err):
        return 0, {704: b"CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED",
                   711: b"CUDA_ERROR_TOO_MANY_PEERS"}.get(int(err), b"CUDA_ERROR_X")

    def cuGetErrorString(self, err):
        return 0, b"fake"

    def cuDeviceGetCount(self):
        return 0, self.n

    def cuDeviceGet(self, i):
        return 0, i

    def cuDevicePrimaryCtxRetain(self, dev):
        return 0, Ctx(f"ctx{dev}")

    def cuCtxGetCurrent(self):
        return 0, self.current

    def cuCtxSetCurrent(self, ctx):
        self.current = ctx
        return (0,)

    def cuDeviceCanAccessPeer(self, a, b):
        return 0, int(self.peers)

    def cuCtxEnablePeerAccess(self, peer_ctx, flags):
        self._log("cuCtxEnablePeerAccess", peer_ctx)
        return (self.enable_result,)

    def cuMemAlloc(self, n):
        self.next_ptr += 0x1000
        self._log("cuMemAlloc", n, self.next_ptr)
        return 0, self.next_ptr

    def cuPointerGetAttribute(self, attr, addr):
        allocs = {c[2][1]: c[1] for c in self.named("cuMemAlloc")}
        if attr == "CU_POINTER_ATTRIBUTE_CONTEXT":
            return 0, allocs.get(addr, Ctx("ctx-256"))   # int() == 0: no context
        return 0, 0   # DEVICE_ORDINAL read back as 0, as some cuda.bindings releases do

    def CUstream(self, h=0):
        return h

    def cuMemHostAlloc(self, n, flags):
        buf = ctypes.create_string_buffer(n)
        self.host.append(buf)
        self._log("cuMemHostAlloc", n, flags)
        return 0, ctypes.addressof(buf)

    def cuMemHostGetDevicePointer(self, p, flags):
        self._log("cuMemHostGetDevicePointer", p)
        return 0, p

    def cuEventCreate(self, flags):
        return 0, "event"

    def cuFuncGetAttribute(self, attr, handle):
        return 0, 0


@pytest.fixture
def fake(monkeypatch):
    drv = FakeDriver()
    monkeypatch.setattr(_driver, "_driver", drv)
    monkeypatch.setattr(device, "_contexts", {})
    monkeypatch.setattr(device, "_tls", device._ThreadState())
    monkeypatch.setattr(peer, "_enabled", set())
    monkeypatch.setattr(peer, "_skip", {})
    import ptxdsl.runtime.launch as launch_mod
    monkeypatch.setattr(launch_mod, "_tls", device._tls)
    yield drv
    gc.collect()   # buffers of the test are freed through the fake, not the real driver


# -- CPU: contexts, peer access, copies, host memory ----------------------------------------------
def test_each_buffer_is_allocated_in_its_devices_context(fake):
    b1 = DeviceBuffer(64, device=1)
    b0 = DeviceBuffer(64, device=0)
    allocs = fake.named("cuMemAlloc")
    assert [(ctx, args[1]) for _, ctx, args in allocs] == [("ctx1", b1.ptr), ("ctx0", b0.ptr)]


def test_pointer_device_reads_the_allocating_context(fake):
    bufs = [DeviceBuffer(64, device=d) for d in (1, 0)]
    assert [pointer_device(b) for b in bufs] == [1, 0]
    assert pointer_device(0x1234) == 0          # no context: the ordinal attribute


def test_peer_access_is_enabled_from_the_accessing_context_once(fake):
    assert not peer_access_enabled(1, 0)
    enable_peer_access(1, 0)
    enable_peer_access(1, 0)                      # the second call is a no-op
    assert [(c, a[0]) for _, c, a in fake.named("cuCtxEnablePeerAccess")] == [("ctx1", "ctx0")]
    assert peer_access_enabled(1, 0) and not peer_access_enabled(0, 1)   # one-way
    disable_peer_access(1, 0)
    assert [(c, a[0]) for _, c, a in fake.named("cuCtxDisablePeerAccess")] == [("ctx1", "ctx0")]
    assert not peer_access_enabled(1, 0)


def test_access_enabled_elsewhere_is_accepted(fake):
    fake.enable_result = peer.ALREADY_ENABLED    # e.g. by PyTorch in the same process
    enable_peer_access(0, 1)
    assert peer_access_enabled(0, 1)


def test_driver_refusal_is_a_peer_access_error(fake):
    fake.enable_result = 711
    with pytest.raises(PeerAccessError, match="CUDA_ERROR_TOO_MANY_PEERS"):
        enable_peer_access(0, 1)
    assert not peer_access_enabled(0, 1)


def test_no_peer_path_says_what_to_use_instead(fake):
    fake.peers = False
    assert not can_access_peer(0, 1)
    with pytest.raises(PeerAccessError, match="cannot access device 1's memory.*HostBuffer"):
        enable_peer_access(0, 1)
    assert fake.named("cuCtxEnablePeerAccess") == []


def test_a_device_is_not_its_own_peer(fake):
    with pytest.raises(ValueError, match="same device"):
        enable_peer_access(1, 1)
    assert can_access_peer(1, 1) is False


def test_unknown_device_is_refused_with_the_count(fake):
    with pytest.raises(ValueError, match=r"device 2 does not exist \(2 CUDA devices visible\)"):
        DeviceBuffer(16, device=2)


def test_copy_between_devices_names_both_contexts(fake):
    src, dst = DeviceBuffer(256, device=0), DeviceBuffer(256, device=1)
    dst.copy_from(src)
    (_, ctx, args), = fake.named("cuMemcpyPeer")
    assert args == (dst.ptr, "ctx1", src.ptr, "ctx0", 256)
    same = DeviceBuffer(256, device=1)
    same.copy_from(dst)                                   # same device: plain DtoD
    assert len(fake.named("cuMemcpyPeer")) == 1 and fake.named("cuMemcpyDtoDAsync")
    with pytest.raises(ValueError, match="do not fit"):
        copy_peer(DeviceBuffer(16, device=0), src)


def test_host_buffer_is_mapped_portable_and_numpy_visible(fake):
    buf = HostBuffer(64, dtype=np.uint32, device=1)
    (_, ctx, (n, flags)), = fake.named("cuMemHostAlloc")
    assert ctx == "ctx1" and flags == FakeDriver.CU_MEMHOSTALLOC_DEVICEMAP | \
        FakeDriver.CU_MEMHOSTALLOC_PORTABLE
    assert buf.ptr == buf.device_ptr(1) == buf.device_ptr(0)
    assert [c for _, c, _ in fake.named("cuMemHostGetDevicePointer")] == ["ctx1", "ctx0"]
    buf.array[:] = np.arange(16)
    assert ctypes.c_uint32.from_address(buf.host_ptr + 12).value == 3
    buf.free()
    with pytest.raises(ValueError, match="freed"):
        buf.device_ptr(0)


def test_launch_refuses_a_stream_of_another_device(fake):
    fn = Function(SimpleNamespace(device=1), "k", "handle", ())
    with pytest.raises(LaunchError, match="loaded on device 1 but the stream belongs to "
                                          "device 0"):
        fn.launch(1, 32, (), stream=SimpleNamespace(device=0, handle=5))


def _launchable(fake, monkeypatch):
    """The fake driver's launch fails as the real one does for a kernel of another context
    (CUDA_ERROR_INVALID_HANDLE): function handle 'h<d>' belongs to 'ctx<d>'."""
    import ptxdsl.runtime.launch as launch_mod
    info = SimpleNamespace(max_threads_per_block=1024, max_block_dim=(1024, 1024, 64),
                           max_grid_dim=(2**31 - 1, 65535, 65535), name="fake",
                           max_shared_per_block_optin=232448, cluster_launch=True)
    monkeypatch.setattr(launch_mod, "device_info", lambda d: info)
    fake.cuFuncGetAttribute = lambda attr, handle: (
        0, 1024 if attr == "CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK" else 0)
    fake.CUstream = lambda h=0: h
    fake.CUlaunchConfig = SimpleNamespace

    def launch_ex(cfg, handle, params, extra):
        fake._log("cuLaunchKernelEx", handle)
        return (0,) if fake.current == f"ctx{handle[1:]}" else (400,)
    fake.cuLaunchKernelEx = launch_ex


def test_a_launch_makes_its_devices_context_current(fake, monkeypatch):
    """The per-launch device check is a thread-local compare, not a driver call: a launch after
    another device's context was made current (by a launch there or by use_device) switches
    to its own for the launch, then back to that one."""
    _launchable(fake, monkeypatch)
    switches = []
    set_current = fake.cuCtxSetCurrent
    fake.cuCtxSetCurrent = lambda ctx: switches.append(ctx) or set_current(ctx)
    k0, k1 = (Function(SimpleNamespace(device=d), f"k{d}", f"h{d}", ()) for d in (0, 1))
    k0.launch(1, 32)
    k1.launch(1, 32)
    k0.launch(1, 32)
    k0.launch(1, 32)
    device.use_device(1)
    k0.launch(1, 32)
    assert [ctx for _, ctx, _ in fake.named("cuLaunchKernelEx")] == ["ctx0", "ctx1", "ctx0",
                                                                     "ctx0", "ctx0"]
    # none between k0's launches; k1's and the last k0's give the context before back
    assert switches == ["ctx0", "ctx1", "ctx0", "ctx1", "ctx0", "ctx1"]
    assert fake.current == "ctx1"


def test_a_launch_after_another_library_switched_the_context(fake, monkeypatch):
    """torch.cuda.set_device(1) (or CuPy) makes device 1's context current behind ptxdsl's
    per-thread record: the launch of a device-0 kernel fails as the driver's invalid handle,
    ptxdsl sees the current context is not its device's, makes it current, launches again
    and gives the other library's context back (seen on 2 x H200: before this, the launch
    raised CUDA_ERROR_INVALID_HANDLE)."""
    _launchable(fake, monkeypatch)
    k0 = Function(SimpleNamespace(device=0), "k0", "h0", ())
    k0.launch(1, 32)
    fake.current = Ctx("ctx1")               # another library's cuCtxSetCurrent
    k0.launch(1, 32)
    assert [c[1] for c in fake.named("cuLaunchKernelEx")] == ["ctx0", "ctx1", "ctx0"]
    assert fake.current == "ctx1"
    k0.launch(1, 32)                         # the record is true again: no retry
    assert [c[1] for c in fake.named("cuLaunchKernelEx")][3:] == ["ctx0"]
    assert fake.current == "ctx1"


def test_a_launch_error_in_the_right_context_is_raised_not_retried(fake, monkeypatch):
    _launchable(fake, monkeypatch)
    bad = Function(SimpleNamespace(device=0), "bad", "h7", ())    # valid in no context
    with pytest.raises(_driver.DriverError, match="CUDA_ERROR_X"):
        bad.launch(1, 32)
    assert len(fake.named("cuLaunchKernelEx")) == 1


def test_use_device_checks_the_current_context_not_only_its_record(fake):
    """An allocation after another library switched contexts goes to the device asked for,
    and leaves that library's context current."""
    device.use_device(0)
    fake.current = Ctx("ctx1")
    buf = DeviceBuffer(256, device=0)
    assert fake.named("cuMemAlloc")[-1][1] == "ctx0" and fake.current == "ctx1"
    assert pointer_device(buf) == 0


def _counting(fake) -> list:
    """The names of the fake's context calls, as they are made."""
    made: list = []
    get, set_ = fake.cuCtxGetCurrent, fake.cuCtxSetCurrent
    fake.cuCtxGetCurrent = lambda: made.append("get") or get()
    fake.cuCtxSetCurrent = lambda ctx: made.append(f"set {ctx}") or set_(ctx)
    return made


def test_calls_on_another_device_give_the_callers_context_back(fake, monkeypatch):
    """PyTorch's current device is the current context's: work on device 1 while device 0's
    is current (torch.cuda.set_device(0)) runs in device 1's and leaves device 0's current."""
    _launchable(fake, monkeypatch)
    fake.current = device.primary_context(0)
    made = _counting(fake)
    buf = DeviceBuffer(64, device=1)
    k1 = Function(SimpleNamespace(device=1), "k1", "h1", ())
    k1.launch(1, 32, ())
    synchronize(device=1)
    buf.free()
    assert [c[1] for c in fake.calls if c[0] in ("cuMemAlloc", "cuLaunchKernelEx",
                                                  "cuMemFree")] == ["ctx1"] * 3
    assert fake.current == "ctx0" and made.count("set ctx0") == made.count("set ctx1") == 4


def test_a_launch_in_the_current_context_switches_nothing(fake, monkeypatch):
    """The hot path: with the kernel's context current (and no context before the first
    call: the device's stays current, as the CUDA runtime leaves it), launches make no context
    call at all."""
    _launchable(fake, monkeypatch)
    k0 = Function(SimpleNamespace(device=0), "k0", "h0", ())
    k0.launch(1, 32)
    assert fake.current == "ctx0"
    made = _counting(fake)
    for _ in range(3):
        k0.launch(1, 32)
    assert made == [] and fake.current == "ctx0"
    fake.current = device.primary_context(1)      # torch's device 1
    device._tls.device = None                     # (as after another thread's view)
    k1 = Function(SimpleNamespace(device=1), "k1", "h1", ())
    k1.launch(1, 32)
    k1.launch(1, 32)
    assert made == ["get"]                         # one look at the current context


def test_event_refuses_a_stream_of_another_device(fake):
    ev = Event(device=0)
    with pytest.raises(ValueError, match="event of device 0 .* stream of device 1"):
        ev.record(SimpleNamespace(device=1, handle=5))


def test_load_on_devices_loads_once_per_device(fake, monkeypatch):
    seen = []
    monkeypatch.setattr(loader, "load_module", lambda m, device, **kw: seen.append(device) or
                        f"mod{device}")
    assert load_on_devices("ptx") == {0: "mod0", 1: "mod1"}
    assert load_on_devices("ptx", [1]) == {1: "mod1"} and seen == [0, 1, 1]


def test_multi_gpu_skip_reason(fake, monkeypatch):
    import ptxdsl.runtime as rt
    monkeypatch.setattr(rt, "gpu_skip_reason", lambda: None)
    fake.n = 1
    assert multi_gpu_skip_reason(2) == "1 CUDA device visible; this needs 2"
    monkeypatch.setattr(peer, "_skip", {})
    monkeypatch.setattr(peer, "device_info", lambda d: SimpleNamespace(
        compute_capability=(9, 0), name="H200"))
    fake.n, fake.peers = 2, False
    assert "no peer access between devices [(0, 1), (1, 0)]" in multi_gpu_skip_reason(2)
    assert multi_gpu_skip_reason(2, peer=False) is None


# -- CPU: the checker's cross-device rule ---------------------------------------------------------
def _encode_and_consume(scope: str) -> Kernel:
    """A producer warp publishing a map and a thread acquiring a (possibly other) map."""
    k = Kernel("k", reqntid=32)
    out = k.param_ptr("tensor_map")
    smap = k.shared_array(t.b8, 128, align=128, name="smap")
    with k.if_(k.tid.x == 0):
        ptx.tensormap_replace_rank(k, ptx.space_shared, smap, rank=2)
    k.syncwarp()
    ptx.tensormap_cp_fenceproxy(k, ptx.sem_release, scope, out, smap, 128)
    with k.if_(k.tid.x == 0):
        ptx.fence_proxy_tensormap_generic(k, "acquire", scope, k.ld_param(out))
    k.ret()
    return k


def test_cross_device_map_at_gpu_scope_is_flagged():
    k = _encode_and_consume("gpu")
    assert check_kernel(k) == []     # without context the other side is unknown
    found = check_kernel(k, cross_device_maps=["tensor_map"])
    assert [f.hazard for f in found] == [Hazard.TMAP_CROSS_DEVICE_SCOPE] * 2
    text = "\n".join(f.format() for f in found)
    assert "releases (tensormap.cp_fenceproxy) it at .gpu" in text
    assert "acquires it at .gpu" in text and "needs .sys" in text


def test_cross_device_map_at_sys_scope_is_clean():
    assert check_kernel(_encode_and_consume("sys"), cross_device_maps=["tensor_map"]) == []


def test_the_sample_is_clean_with_its_maps_marked_cross_device():
    import runpy
    from pathlib import Path
    ns = runpy.run_path(str(Path(__file__).parent.parent / "samples" /
                            "multi_gpu_tensormap.py"), run_name="__test__")
    assert check_module(ns["build_module"](), cross_device_maps=["tensor_map", "out"]) == []


# -- GPU: two Hopper GPUs with peer access --------------------------------------------------------
TIMEOUT_S = 60


@pytest.fixture
def two_gpus():
    reason = multi_gpu_skip_reason(2)
    if reason is not None:
        pytest.skip(f"needs 2 Hopper GPUs with peer access: {reason}")
    with gpu_deadline(TIMEOUT_S):
        yield


def _vadd():
    return load_on_devices(K.VADD, [0, 1], name="vadd")


def _free_bytes(d: int) -> int:
    device.use_device(d)
    return int(_driver.check(_driver.driver().cuMemGetInfo(), "cuMemGetInfo")[0])


@pytest.mark.gpu
def test_buffers_live_on_their_device(two_gpus):
    """Ground truth from each device's free memory (cuMemGetInfo), not only pointer queries."""
    size = 256 << 20
    for d in (0, 1):
        before = [_free_bytes(e) for e in (0, 1)]
        buf = DeviceBuffer(size, device=d)
        after = [_free_bytes(e) for e in (0, 1)]
        assert before[d] - after[d] >= size and before[1 - d] - after[1 - d] < size // 2
        assert pointer_device(buf) == d
        buf.free()


@pytest.mark.gpu
def test_kernel_reads_and_writes_peer_memory(two_gpus):
    enable_peer_access(1, 0)
    assert peer_access_enabled(1, 0)
    n = 4096
    a, b = np.arange(n, dtype=np.float32), np.full(n, 0.5, np.float32)
    a0 = DeviceBuffer.from_numpy(a, device=0)           # read by device 1 over the peer link
    b1 = DeviceBuffer.from_numpy(b, device=1)
    c0 = DeviceBuffer.zeros((n,), np.float32, device=0)  # written by device 1 over the link
    fn = _vadd()[1]["vadd"]
    s1 = Stream(device=1)
    fn.launch(n // 256, 256, (a0, b1, c0, n), stream=s1)
    s1.synchronize(20)
    np.testing.assert_array_equal(c0.to_numpy(), a + b)
    with pytest.raises(LaunchError, match="belongs to device 0"):
        fn.launch(1, 256, (a0, b1, c0, n), stream=Stream(device=0))


@pytest.mark.gpu
def test_launch_and_allocation_after_another_library_switched_the_context(two_gpus):
    """What torch.cuda.set_device(1) does underneath (cuCtxSetCurrent of device 1's primary
    context), behind ptxdsl's back: a device-0 launch and a device-0 allocation still go to
    device 0."""
    drv = _driver.driver()
    n = 1024
    a = np.arange(n, dtype=np.float32)
    a0 = DeviceBuffer.from_numpy(a, device=0)
    c0 = DeviceBuffer.zeros((n,), np.float32, device=0)
    fn = _vadd()[0]["vadd"]
    _driver.check(drv.cuCtxSetCurrent(device.primary_context(1)), "cuCtxSetCurrent")
    fn.launch(n // 256, 256, (a0, a0, c0, n))
    synchronize()
    np.testing.assert_array_equal(c0.to_numpy(), 2 * a)
    _driver.check(drv.cuCtxSetCurrent(device.primary_context(1)), "cuCtxSetCurrent")
    buf = DeviceBuffer(1 << 20, device=0)
    assert pointer_device(buf) == 0
    buf.free()


@pytest.mark.gpu
def test_work_on_another_device_leaves_the_current_context(two_gpus):
    """With device 0's context current (torch.cuda.set_device(0)), loading, allocating and
    launching on device 1 leave it current: PyTorch's current device is still 0."""
    drv = _driver.driver()
    _driver.check(drv.cuCtxSetCurrent(device.primary_context(0)), "cuCtxSetCurrent")

    def current() -> int:
        return int(_driver.check(drv.cuCtxGetCurrent(), "cuCtxGetCurrent"))
    before = current()
    n = 1024
    a = np.arange(n, dtype=np.float32)
    fn = load_on_devices(K.VADD, [1], name="vadd")[1]["vadd"]
    assert current() == before
    a1 = DeviceBuffer.from_numpy(a, device=1)
    c1 = DeviceBuffer.zeros((n,), np.float32, device=1)
    assert current() == before
    fn.launch(n // 256, 256, (a1, a1, c1, n))
    assert current() == before
    synchronize(device=1)
    np.testing.assert_array_equal(c1.to_numpy(), 2 * a)
    assert current() == before


@pytest.mark.gpu
def test_copies_between_devices(two_gpus):
    data = np.random.default_rng(9).integers(0, 255, 1 << 20, dtype=np.uint8)
    src = DeviceBuffer.from_numpy(data, device=0)
    dst = DeviceBuffer.zeros(data.shape, np.uint8, device=1)
    dst.copy_from(src)                                   # cuMemcpyPeer, synchronous
    np.testing.assert_array_equal(dst.to_numpy(), data)
    back = DeviceBuffer.zeros(data.shape, np.uint8, device=0)
    s0 = Stream(device=0)
    copy_peer(back, dst, stream=s0)                      # cuMemcpyPeerAsync in s0
    s0.synchronize(20)
    np.testing.assert_array_equal(back.to_numpy(), data)


@pytest.mark.gpu
def test_host_buffer_is_written_by_both_devices(two_gpus):
    n = 1024
    host = HostBuffer.zeros((2, n), np.float32)
    ones = {d: DeviceBuffer.from_numpy(np.full(n, d + 1, np.float32), device=d) for d in (0, 1)}
    for d, mod in _vadd().items():
        dst = host.device_ptr(d) + d * n * 4
        mod["vadd"].launch(n // 256, 256, (ones[d], ones[d], dst, n))
        synchronize(20, device=d)
    np.testing.assert_array_equal(host.array, np.stack([np.full(n, 2.0), np.full(n, 4.0)])
                                  .astype(np.float32))


@pytest.mark.gpu
def test_stream_waits_for_an_event_of_the_other_device(two_gpus):
    enable_peer_access(1, 0)
    n = 1 << 16
    mods = _vadd()
    a0 = DeviceBuffer.from_numpy(np.ones(n, np.float32), device=0)
    mid = DeviceBuffer.zeros((n,), np.float32, device=0)
    out = DeviceBuffer.zeros((n,), np.float32, device=1)
    s0, s1 = Stream(device=0), Stream(device=1)
    mods[0]["vadd"].launch(n // 256, 256, (a0, a0, mid, n), stream=s0)     # mid = 2
    ev = Event(timing=False, device=0).record(s0)
    s1.wait(ev)
    mods[1]["vadd"].launch(n // 256, 256, (mid, mid, out, n), stream=s1)   # out = 4
    s1.synchronize(20)
    np.testing.assert_array_equal(out.to_numpy(), np.full(n, 4, np.float32))


@pytest.mark.gpu
def test_peer_access_can_be_disabled_and_enabled_again(two_gpus):
    enable_peer_access(0, 1)
    disable_peer_access(0, 1)
    assert not peer_access_enabled(0, 1)
    enable_peer_access(0, 1)
    assert peer_access_enabled(0, 1)
    assert load_ptx(K.VADD, name="vadd", device=1).device == 1


def test_a_recorder_attaches_only_to_modules_on_its_device(fake, monkeypatch):
    """debug.Recorder(0) on a module loaded on device 1 would write the record's address into
    the wrong context's view and leave device 0's context current (which PyTorch then takes
    for its current device): refused, naming the device to make it for."""
    from ptxdsl import debug
    from ptxdsl.errors import PtxdslError
    fake.CU_MEMHOSTREGISTER_DEVICEMAP = 2
    monkeypatch.setattr(FakeDriver, "cuMemHostRegister",
                        lambda self, p, n, flags: self._log("cuMemHostRegister", p) or (0,),
                        raising=False)
    monkeypatch.setattr(FakeDriver, "cuMemHostUnregister",
                        lambda self, p: (0,), raising=False)
    rec = debug.Recorder(0)
    loaded = SimpleNamespace(device=1, handle="mod1", kernels=["k"])
    with pytest.raises(PtxdslError, match=r"on device 0, the module is loaded on device 1: "
                                          r"make it with debug\.Recorder\(1\)"):
        rec.attach(loaded)
    assert rec.names == []
