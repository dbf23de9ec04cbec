"""DeviceBuffer as a DLPack producer, without a GPU (issue 31): the protocol's arguments, the
stream ordering it asks of a producer, and the lifetime of memory a consumer still views.

The capsule itself is made by cuda.core from device memory, which needs a driver: here a stand-in
records what it was asked to export; tests/test_interop_both_ways_gpu.py makes real ones for
torch and CuPy."""

from __future__ import annotations

import contextlib
import gc
import weakref
from types import SimpleNamespace

import numpy as np
import pytest

from ptxdsl.errors import PtxdslError
from ptxdsl.runtime import _driver, memory
from ptxdsl.runtime.memory import DeviceBuffer
from tests.test_runtime_interop_cpu import Recorder


class Driver(Recorder):
    """The event calls of test_runtime_interop_cpu's recorder, plus memory."""

    class CUstream(int):     # a type, as cuda.bindings' is (stream_handle checks isinstance)
        pass

    def cuMemAlloc(self, n):
        self.calls.append(("alloc", n))
        return 0, 0x9000_0000

    def cuMemcpyDtoDAsync(self, dst, src, n, stream):
        self.calls.append(("copy", dst, src, n, stream))
        return (0,)

    def cuMemFree(self, ptr):
        self.calls.append(("free", ptr))
        return (0,)


@pytest.fixture
def drv(monkeypatch):
    gc.collect()        # earlier tests' buffers free themselves before this driver records
    d = Driver()
    monkeypatch.setattr(_driver, "_driver", d)
    monkeypatch.setattr(memory, "on_device", lambda device: contextlib.nullcontext())
    exports: list = []

    def export(ptr, nbytes, shape, dtype, owner, max_version):
        exports.append(SimpleNamespace(ptr=ptr, shape=shape, dtype=dtype,
                                       max_version=max_version))
        return SimpleNamespace(owner=owner)      # the capsule: it holds the owner
    monkeypatch.setattr(memory, "_export_capsule", export)
    d.exports = exports
    return d


def _buffer(ptr=0x7000_0000, shape=(4, 8), dtype=np.float32, device=0) -> DeviceBuffer:
    buf = object.__new__(DeviceBuffer)      # a real one needs cuMemAlloc
    buf._ptr, buf.shape, buf.dtype, buf.device = ptr, shape, np.dtype(dtype), device
    buf.nbytes = int(np.prod(shape)) * buf.dtype.itemsize
    return buf


def test_the_buffer_says_where_it_lives():
    assert _buffer(device=1).__dlpack_device__() == (2, 1)      # kDLCUDA, device 1


def test_the_export_views_the_buffer_as_laid_out(drv):
    _buffer().__dlpack__(max_version=(1, 1))
    (e,) = drv.exports
    assert (e.ptr, e.shape, e.dtype, e.max_version) == (0x7000_0000, (4, 8), np.float32, (1, 1))


@pytest.mark.parametrize("stream, calls", [
    (None, []),                                      # the protocol's legacy default stream
    (1, []),                                         # the stream ptxdsl's own work is on
    (-1, []),                                        # the consumer asks for no ordering
    (2, [("record", 1), ("wait", 2)]),               # per-thread default: another stream
    (0x1234, [("record", 1), ("wait", 0x1234)]),     # a consumer's stream handle
])
def test_a_consumer_stream_waits_for_the_legacy_stream(drv, stream, calls):
    buf = _buffer()
    capsule = buf.__dlpack__(stream=stream)
    assert drv.calls == calls and capsule.owner.buffer is buf


@pytest.mark.parametrize("kw, match", [
    (dict(stream=0), r"stream=0: expected None, -1, 1 .* 0 is disallowed by the DLPack "
                     r"protocol for CUDA"),
    (dict(stream=-7), r"stream=-7: expected"),
    (dict(stream="s"), r"stream='s': expected"),
    (dict(stream=True), r"stream=True: expected"),
    (dict(dl_device=(1, 0)), r"dl_device=\(1, 0\) asks for another device than the buffer's "
                             r"\(2, 0\).*to_numpy\(\) for the host"),
    (dict(dl_device=(2, 1)), r"another device"),
])
def test_what_the_buffer_cannot_export_is_a_buffer_error(drv, kw, match):
    with pytest.raises(PtxdslError, match=match) as e:
        _buffer().__dlpack__(**kw)
    assert isinstance(e.value, BufferError) and not isinstance(e.value, TypeError)
    assert e.value.loc.file == __file__
    assert drv.exports == [] and drv.calls == []


def test_a_freed_buffer_is_not_exported(drv):
    buf = _buffer()
    buf.free()
    with pytest.raises(PtxdslError, match="DeviceBuffer was freed"):
        buf.__dlpack__()


def test_memory_a_consumer_views_outlives_free(drv):
    buf = _buffer()
    first, second = buf.__dlpack__(), buf.__dlpack__()
    buf.free()                           # e.g. leaving `with DeviceBuffer(...) as buf:`
    assert drv.calls == []               # still viewed: not freed under the consumers
    with pytest.raises(PtxdslError, match="freed"):
        buf.__dlpack__()
    del first
    gc.collect()
    assert drv.calls == []
    del second                           # the last consumer lets go
    gc.collect()
    assert drv.calls == [("free", 0x7000_0000)]


def test_a_buffer_nobody_views_is_freed_at_once(drv):
    buf = _buffer()
    capsule = buf.__dlpack__()
    del capsule
    gc.collect()
    buf.free()
    assert drv.calls == [("free", 0x7000_0000)]


def test_a_dtype_cuda_core_cannot_export_is_named(drv, monkeypatch):
    def refuse(*a):
        raise BufferError("Unsupported dtype for DLPack export: datetime64[s]")
    monkeypatch.setattr(memory, "_export_capsule", refuse)
    with pytest.raises(PtxdslError, match=r"cuda.core cannot export a datetime64\[s\] buffer of "
                       r"shape \(4, 8\) \(BufferError: Unsupported dtype"):
        _buffer(dtype="datetime64[s]").__dlpack__()


def test_copy_true_exports_a_copy_made_on_the_device(drv):
    buf = _buffer()
    capsule = buf.__dlpack__(copy=True, stream=0x55, max_version=(1, 0))
    assert drv.calls == [("alloc", 128), ("copy", 0x9000_0000, 0x7000_0000, 128, 1),
                         ("record", 1), ("wait", 0x55)]
    (e,) = drv.exports
    assert (e.ptr, e.shape, e.dtype) == (0x9000_0000, (4, 8), np.float32)
    copy = weakref.ref(capsule.owner.buffer)
    del capsule
    gc.collect()                    # the capsule was the copy's only owner
    assert copy() is None and drv.calls[-1] == ("free", 0x9000_0000) and buf._ptr


def test_the_buffer_reads_as_what_it_holds_and_where():
    """A merge once left DeviceBuffer's __repr__ nested, unreachable, inside a module
    function below the class: the buffer printed as a bare object."""
    buf = _buffer(ptr=0x7000_0000, shape=(4, 8))
    assert repr(buf) == "DeviceBuffer(128 bytes, float32, shape=(4, 8), 0x70000000)"
    buf._ptr = None
    assert repr(buf).endswith(", freed)")
