"""The launch-configuration cache keys on the stream's handle, not on the Python object.

A framework may hand out a new wrapper for the same stream on every call
(`torch.cuda.current_stream()` does): keyed by `id()` every launch missed and the cache pinned up
to 64 dead wrappers. Driven against a fake driver that records each cuLaunchKernelEx.
"""

from __future__ import annotations

import ctypes
import gc
import weakref
from types import SimpleNamespace

import pytest

from ptxdsl.runtime import _driver, device
from ptxdsl.runtime import launch as launch_mod
from ptxdsl.runtime.launch import Function
from ptxdsl.runtime.memory import stream_key
from ptxdsl.types import ScalarType


class _Names:
    def __getattr__(self, name: str) -> str:
        return name


class FakeDriver:
    CUfunction_attribute = _Names()
    CUresult = SimpleNamespace(CUDA_SUCCESS=0)

    def __init__(self):
        self.launches: list[tuple] = []

    def cuFuncGetAttribute(self, attr, handle):
        return 0, 1024 if attr == "CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK" else 0

    def CUstream(self, h=0):
        return ("CUstream", int(h))

    CUlaunchConfig = SimpleNamespace

    def cuLaunchKernelEx(self, cfg, handle, params, extra):
        self.launches.append((cfg, handle))
        return (0,)


class TorchLikeStream:
    """What torch.cuda.current_stream() returns: a fresh object naming the same handle."""

    def __init__(self, handle: int, device: int = 0):
        self.cuda_stream = handle
        self.device = device


class CoreLikeStream:
    """cuda.core's Stream protocol: `__cuda_stream__()` -> (version, handle)."""

    def __init__(self, handle: int):
        self.h = handle

    def __cuda_stream__(self):
        return (0, self.h)


def fake_function(monkeypatch, drv) -> Function:
    """A Function of kernel 'k' whose launches reach `drv` on a fake device 0."""
    monkeypatch.setattr(_driver, "_driver", drv)
    tls = SimpleNamespace(device=0)
    monkeypatch.setattr(device, "_tls", tls)
    monkeypatch.setattr(launch_mod, "_tls", tls)
    info = SimpleNamespace(max_threads_per_block=1024, max_block_dim=(1024, 1024, 64),
                           max_grid_dim=(2**31 - 1, 65535, 65535), name="fake",
                           max_shared_per_block_optin=232448, cluster_launch=True)
    monkeypatch.setattr(launch_mod, "device_info", lambda d: info)
    return Function(SimpleNamespace(device=0, ptx=""), "k", "fn-handle", ())


@pytest.fixture
def fn(monkeypatch):
    drv = FakeDriver()
    f = fake_function(monkeypatch, drv)
    misses = []
    real = f._config
    monkeypatch.setattr(f, "_config", lambda *a: misses.append(a[3] is None) or real(*a))
    return f, drv, misses


def test_a_new_wrapper_of_the_same_stream_hits_the_cache(fn):
    f, drv, misses = fn
    for _ in range(5):
        f.launch(1, 32, (), stream=TorchLikeStream(0xABC))
    assert len(misses) == 1
    assert [cfg.hStream for cfg, _ in drv.launches] == [("CUstream", 0xABC)] * 5
    f.launch(1, 32, (), stream=TorchLikeStream(0xDEF))              # another stream: a miss
    assert len(misses) == 2 and drv.launches[-1][0].hStream == ("CUstream", 0xDEF)


def test_the_cache_holds_no_reference_to_the_callers_stream(fn):
    f, drv, _ = fn
    s = TorchLikeStream(0x55)
    dead = weakref.ref(s)
    f.launch(1, 32, (), stream=s)
    del s
    gc.collect()
    assert dead() is None
    assert all(not isinstance(v, TorchLikeStream) for cfg in f._configs.values()
               for v in vars(cfg).values())


@pytest.mark.parametrize("stream, handle", [
    (None, 0), (7, 7), (TorchLikeStream(9), 9), (CoreLikeStream(11), 11),
    (SimpleNamespace(ptr=13), 13), (SimpleNamespace(handle=15), 15)])
def test_stream_key_reads_every_stream_spelling(stream, handle):
    assert stream_key(stream) == handle


def test_a_stream_of_another_device_is_still_refused(fn):
    f, _, _ = fn
    with pytest.raises(Exception, match="belongs to device 1"):
        f.launch(1, 32, (), stream=TorchLikeStream(0x77, device=1))


def test_a_cuda_core_stream_of_another_device_is_refused(fn):
    f, _, _ = fn
    core_like = SimpleNamespace(handle=0x99, device=SimpleNamespace(device_id=1))
    with pytest.raises(Exception, match="belongs to device 1"):
        f.launch(1, 32, (), stream=core_like)


def test_a_closed_ptxdsl_stream_is_named():
    from ptxdsl.runtime.memory import Stream
    closed = object.__new__(Stream)
    closed.handle = None
    with pytest.raises(ValueError, match="Stream was closed"):
        stream_key(closed)


def test_overlapping_launches_pack_into_separate_buffers(monkeypatch, fn):
    """No lock on the hot path: a launch that starts while another is between its pack and
    the driver's return (another thread, here simulated by re-entering from the driver call)
    takes its own packer, so the first launch's argument bytes are not overwritten."""
    f, drv, _ = fn
    f = Function(SimpleNamespace(device=0, ptx=""), "k", "fn-handle",
                 (SimpleNamespace(name="n", kind="scalar", type=ScalarType.u32, size=4),))
    seen = []

    def launch_ex(cfg, handle, params, extra):
        value = ctypes.c_uint32.from_address(ctypes.c_void_p.from_address(params).value)
        seen.append((params, value.value))
        if len(seen) == 1:
            f.launch(1, 32, (2,))             # starts while launch 1 is still in the driver
            seen.append((params, value.value))  # launch 1's bytes, after launch 2 packed
        return (0,)

    monkeypatch.setattr(f, "_launch_ex", launch_ex)
    f.launch(1, 32, (1,))
    (p1, v1), (p2, v2), (p1_again, v1_again) = seen
    assert (v1, v2, v1_again) == (1, 2, 1) and p1 == p1_again != p2
    assert len(f._free_packers) == 2           # both back for the next launches
    f.launch(1, 32, (3,))
    assert seen[-1][1] == 3


def test_a_ptxdsl_stream_offers_the_cuda_stream_protocol():
    from ptxdsl.errors import PtxdslError
    from ptxdsl.runtime.memory import Stream
    s = object.__new__(Stream)
    s.handle = 0x5A5A             # a CUstream converts with int(), as this does
    assert s.__cuda_stream__() == (0, 0x5A5A)
    assert stream_key(s) == 0x5A5A
    s.handle = None
    with pytest.raises(PtxdslError, match="Stream was closed; a closed stream cannot be handed"):
        s.__cuda_stream__()
