"""Array arguments and cuda.core objects, without a GPU (issues 18, 31).

DLPack capsules are built here with ctypes (legacy and versioned, device type CUDA), so
cuda.core's StridedMemoryView, which reads every DLPack argument, is driven the way a CUDA
producer drives it; `__cuda_array_interface__` stream ordering runs against a fake driver that
records cuEventRecord / cuStreamWaitEvent.
"""

from __future__ import annotations

import ctypes
from types import SimpleNamespace

import numpy as np
import pytest

from ptxdsl import Addr, Kernel, Module, t
from ptxdsl.runtime import _driver
from ptxdsl.runtime.args import ArgPacker, tensormap_bytes
from ptxdsl.runtime.arrays import DL_CUDA, array_info, device_pointer, dlpack_info
from ptxdsl.runtime.device import device_ordinal
from ptxdsl.runtime.errors import ArgumentError, DevicePointerError

_new_capsule = ctypes.pythonapi.PyCapsule_New
_new_capsule.restype = ctypes.py_object
_new_capsule.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):     # DLPack's DLTensor, as a CUDA producer fills it
    _fields_ = [("data", ctypes.c_void_p), ("device", ctypes.c_int * 2), ("ndim", ctypes.c_int),
                ("dtype", _DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


class _Managed(ctypes.Structure):      # DLManagedTensor: what a legacy capsule holds
    _fields_ = [("tensor", _DLTensor), ("manager_ctx", ctypes.c_void_p),
                ("deleter", ctypes.c_void_p)]


class _Versioned(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32),
                ("manager_ctx", ctypes.c_void_p), ("deleter", ctypes.c_void_p),
                ("flags", ctypes.c_uint64), ("tensor", _DLTensor)]


class CudaProducer:
    """A DLPack producer of a CUDA tensor at `ptr` (what a CuPy/PyTorch tensor hands out).

    Versioned (DLPack 1.x) when asked with max_version and `versioned`; records each call's
    `stream` and `max_version`."""

    def __init__(self, ptr=0x7F00_0000, shape=(4, 8), *, versioned=True, read_only=False,
                 old_signature=False, dtype=(2, 32, 1)):
        self.addr, self.shape, self.versioned, self.read_only = ptr, shape, versioned, read_only
        self.dtype = dtype      # DLDataType (code, bits, lanes): float32 unless given
        self.calls: list[tuple] = []
        self._keep: list = []
        if old_signature:       # a pre-1.0 producer: no max_version keyword at all
            self.__dlpack__ = lambda stream=None: self._export(stream, None)

    def __dlpack_device__(self):
        return (DL_CUDA, 0)

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        return self._export(stream, max_version)

    def _export(self, stream, max_version):
        self.calls.append((stream, max_version))
        shape = (ctypes.c_int64 * len(self.shape))(*self.shape)
        t_ = _DLTensor(self.addr, (DL_CUDA, 0), len(self.shape), self.dtype, shape, None, 0)
        if self.versioned and max_version is not None and max_version >= (1, 0):
            m = _Versioned(1, 0, None, None, int(self.read_only), t_)
            name = b"dltensor_versioned"
        else:
            m, name = _Managed(t_, None, None), b"dltensor"
        self._keep += [shape, m]
        return _new_capsule(ctypes.addressof(m), name, None)


def test_versioned_read_only_capsule_is_read():
    p = CudaProducer(read_only=True)
    assert device_pointer(p) == 0x7F00_0000
    assert p.calls[-1][1] is not None and p.calls[-1][1] >= (1, 0)   # asked for DLPack 1.x


def test_a_producer_without_max_version_still_works():
    p = CudaProducer(old_signature=True)
    assert device_pointer(p) == 0x7F00_0000
    assert dlpack_info(p).shape == (4, 8)


def test_the_launch_stream_is_handed_to_the_producer():
    p = CudaProducer()
    device_pointer(p, 0x1234)
    device_pointer(p, 0)          # the legacy default stream is 1 in the DLPack protocol
    assert [c[0] for c in p.calls] == [0x1234, 1]


def test_dlpack_layout_and_read_only_numpy():
    info = dlpack_info(CudaProducer(shape=(3, 5), read_only=True))
    assert (info.ptr, info.shape, info.dtype, info.on_device) == (
        0x7F00_0000, (3, 5), np.dtype(np.float32), True)
    ro = np.arange(6, dtype=np.int16)
    ro.flags.writeable = False      # numpy exports this only as a versioned capsule
    info = dlpack_info(ro)
    assert info.ptr == ro.ctypes.data and info.shape == (6,) and not info.on_device


def test_host_dlpack_is_still_refused():
    with pytest.raises(ValueError, match="not on the GPU"):
        device_pointer(SimpleNamespace(__dlpack__=lambda **k: None,
                                       __dlpack_device__=lambda: (1, 0)))


# -- __cuda_array_interface__ 'stream' ------------------------------------------------------
class Recorder:
    class CUevent_flags:
        CU_EVENT_DISABLE_TIMING = 2

    def __init__(self):
        self.calls: list[tuple] = []

    def CUstream(self, h=0):
        return int(h)

    def cuEventCreate(self, flags):
        return 0, "ev"

    def cuEventRecord(self, ev, s):
        self.calls.append(("record", s))
        return (0,)

    def cuStreamWaitEvent(self, s, ev, flags):
        self.calls.append(("wait", s))
        return (0,)

    def cuEventDestroy(self, ev):
        return (0,)


class CaiArray:
    def __init__(self, stream, ptr=0x5000):
        self.__cuda_array_interface__ = {"data": (ptr, True), "shape": (4,), "typestr": "<f4",
                                         "version": 3, "stream": stream}


@pytest.fixture
def drv(monkeypatch):
    d = Recorder()
    monkeypatch.setattr(_driver, "_driver", d)
    return d


@pytest.mark.parametrize("producer, consumer, ordered", [
    (9, 5, True),            # two streams: the launch stream waits for the exporter's
    (5, 5, False),           # the same stream: nothing to do
    (None, 5, False),        # no stream given: the data is ready
    (1, 0, False),           # legacy default both ways (0 = launch with stream=None)
    (2, 0, True),            # per-thread default is another stream
    (9, None, False),        # not a launch (reading an address): no ordering
])
def test_cai_stream_is_ordered_before_the_launch(drv, producer, consumer, ordered):
    assert device_pointer(CaiArray(producer), consumer) == 0x5000   # read-only data is fine
    expected = [("record", producer), ("wait", consumer or 1)] if ordered else []
    assert drv.calls == expected


def test_a_bad_cai_stream_is_refused(drv):
    with pytest.raises(DevicePointerError, match="'stream' must be None or a stream handle"):
        device_pointer(CaiArray("s"), 5)


def test_the_packer_orders_on_the_stream_it_launches_on(drv):
    from ptxdsl.runtime.ptx_params import parse_entries
    (params,) = parse_entries(".visible .entry k(.param .u64 .ptr .global p){ret;}").values()
    packer = ArgPacker("k", params)
    packer.stream = 0x77
    packer.pack((CaiArray(0x66),))
    assert drv.calls == [("record", 0x66), ("wait", 0x77)]


# -- cuda.core objects --------------------------------------------------------------------
def test_cuda_core_buffer_is_a_pointer():
    core = pytest.importorskip("cuda.core")
    buf = core.Buffer.from_handle(0x7000, 64)
    assert device_pointer(buf) == 0x7000


@pytest.mark.parametrize("dev, ordinal", [
    (3, 3), (SimpleNamespace(device_id=2), 2), (SimpleNamespace(type="cuda", index=1), 1),
    (SimpleNamespace(type="cuda", index=None), 0)])
def test_device_ordinal_takes_cuda_core_and_torch_devices(dev, ordinal):
    assert device_ordinal(dev) == ordinal


def _module(setmaxnreg=False) -> Module:
    k = Kernel("echo", maxntid=256, minnctapersm=1)
    out = k.cvta(k.ld_param(k.param_ptr("out")), "global", to=True)
    if setmaxnreg:
        k.asm("setmaxnreg.inc.sync.aligned.u32 240;", requires=("8.0", "sm_90a"))
    k.st(Addr(out), k.tid.x, type=t.u32, space="global")
    k.ret()
    return Module([k], name="echo")


def test_module_hands_out_cuda_core_object_code():
    core = pytest.importorskip("cuda.core")
    m = _module()
    obj = m.to_cuda_core("sm_90a")
    assert isinstance(obj, core.ObjectCode) and obj.code_type == "cubin"
    assert bytes(obj.code) == bytes(m.assemble("sm_90a"))
    kept = _module(setmaxnreg=True).to_cuda_core("sm_90a")   # nvJitLink would drop it
    # as bytes: cuda.core takes a str for the path of a file
    assert kept.code_type == "ptx" and b"setmaxnreg.inc" in kept.code


class TensorMapDescriptor:      # as cuda.core 1.2 has it: no public way to its bytes
    __module__ = "cuda.core._tensor_map"


def test_cuda_core_tensor_map_descriptor_without_public_bytes_is_refused():
    with pytest.raises(TypeError, match="no public way"):
        tensormap_bytes(TensorMapDescriptor())


def test_cuda_core_tensor_map_descriptor_with_public_bytes_is_read():
    class Public(TensorMapDescriptor):
        __module__ = "cuda.core._tensor_map"

        def __bytes__(self):
            return bytes(range(128))
    Public.__name__ = "TensorMapDescriptor"
    assert tensormap_bytes(Public()) == bytes(range(128))


def test_argument_error_names_the_way_out():
    from ptxdsl.runtime.ptx_params import parse_entries
    (params,) = parse_entries(".visible .entry k(.param .align 64 .b8 m[128]){ret;}").values()
    with pytest.raises(ArgumentError, match="to_cuda_core"):
        ArgPacker("k", params).pack((TensorMapDescriptor(),))


def test_an_export_cuda_core_cannot_read_is_a_ptxdsl_error():
    class Broken(CudaProducer):
        def __dlpack__(self, **kw):
            raise BufferError("no export today")
    with pytest.raises(DevicePointerError, match=r"Broken.__dlpack__: cuda.core cannot read "
                       r"the export \(BufferError: no export today\)"):
        device_pointer(Broken(), 5)


def test_a_dtype_numpy_cannot_name_is_refused_by_name():
    with pytest.raises(DevicePointerError, match=r"CudaProducer.__dlpack__: its dtype has no "
                       r"numpy name .*vector"):
        array_info(CudaProducer(dtype=(2, 32, 4)))      # float32x4: vector lanes
    bf16 = array_info(CudaProducer(shape=(2, 8), dtype=(4, 16, 1)))
    assert (bf16.dtype, bf16.strides_or_contiguous()) == ("bfloat16", (16, 2))
