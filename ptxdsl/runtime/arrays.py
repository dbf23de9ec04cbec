"""Device pointers and array layouts from foreign objects, without importing any framework.

Understands ptxdsl's DeviceBuffer (anything with an int `.ptr` and numpy `.dtype`/`.shape`),
`__cuda_array_interface__` (CuPy, PyTorch, Numba) and DLPack (`__dlpack__`).

A kernel argument's DLPack export goes through cuda.core's `StridedMemoryView` when cuda.core is
installed (about 10x cheaper than reading the capsule with ctypes, measured in
BENCHMARKS.md), with the launch stream as the consumer stream, as the DLPack protocol asks;
without cuda.core, or for `array_info`, the capsule is read with ctypes: versioned
("dltensor_versioned", DLPack 1.x: read-only exports are only possible this way) when the
producer takes `max_version`, else legacy. A capsule is only looked at, never consumed, so its
owner frees it.

`__cuda_array_interface__` v3 `stream`: an exporter's work on that stream may still be writing
the array, so before the launch the launch stream waits for it (cuEventRecord on the exporter's
stream + cuStreamWaitEvent on the launch stream), unless both are the same stream. (The CAI path
stays hand-written: it is a dict lookup, cheaper than any view object.)
"""

from __future__ import annotations

import ctypes
import logging
from typing import TYPE_CHECKING, overload

import attrs
import numpy as np

from ptxdsl.runtime.errors import DevicePointerError

if TYPE_CHECKING:  # pragma: no cover
    from numpy.typing import DTypeLike

log = logging.getLogger(__name__)

# DLPack DLDeviceType values that denote memory a kernel may dereference.
DL_CPU, DL_CUDA, DL_CUDA_HOST, DL_CUDA_MANAGED = 1, 2, 3, 13
_DEVICE_OK = {DL_CUDA, DL_CUDA_HOST, DL_CUDA_MANAGED}
_DL_NAMES = {1: "CPU", 2: "CUDA", 3: "CUDAHost", 4: "OpenCL", 7: "Vulkan", 8: "Metal",
             10: "ROCM", 13: "CUDAManaged"}


class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int), ("device_id", ctypes.c_int)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _DLDevice), ("ndim", ctypes.c_int),
                ("dtype", _DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


_get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_get_pointer.restype = ctypes.c_void_p
_get_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]

# DLPack dtype codes -> numpy kind letters (bfloat16 has no numpy kind: named by string).
_DL_KIND = {0: "i", 1: "u", 2: "f", 4: "bfloat", 6: "b"}


@attrs.frozen
class ArrayInfo:
    """Where an array lives and how it is laid out, in numpy order (outermost axis first).

    `dtype` is a numpy dtype, or the string 'bfloat16' when numpy has none.
    `byte_strides` is None when the producer said "C-contiguous" without giving strides.
    """

    ptr: int
    shape: tuple[int, ...]
    byte_strides: tuple[int, ...] | None
    dtype: DTypeLike   # a numpy dtype, or "bfloat16" (numpy has none)
    device_type: int = DL_CUDA
    source: str = ""

    @property
    def itemsize(self) -> int:
        return 2 if self.dtype == "bfloat16" else np.dtype(self.dtype).itemsize

    @property
    def on_device(self) -> bool:
        return self.device_type in _DEVICE_OK

    def strides_or_contiguous(self) -> tuple[int, ...]:
        if self.byte_strides is not None:
            return self.byte_strides
        out, acc = [], self.itemsize
        for n in reversed(self.shape):
            out.append(acc)
            acc *= n
        return tuple(reversed(out))


def _cai_pointer(cai, source: str) -> int:
    """`data[0]` of a `__cuda_array_interface__`: an integer address."""
    data = cai.get("data") if isinstance(cai, dict) else None
    ptr = data[0] if isinstance(data, tuple | list) and data else None
    if isinstance(ptr, bool | np.bool_) or not isinstance(ptr, int | np.integer) \
            or not 0 <= ptr < 1 << 64:
        raise DevicePointerError(f"{source}.__cuda_array_interface__ has no usable 'data' "
                                 f"(expected (address: int, read_only: bool)), got "
                                 f"{data!r}"[:200])
    return int(ptr)


def _cai_ints(cai: dict, key: str, source: str, lo: int | None) -> tuple[int, ...]:
    """`cai[key]` as a tuple of integers (each >= lo unless lo is None), or a
    DevicePointerError naming the field: `int()` would take 4.5 or "4" silently."""
    value = cai.get(key)
    if isinstance(value, tuple | list) and all(
            isinstance(n, int | np.integer) and not isinstance(n, bool | np.bool_) and
            (lo is None or n >= lo) for n in value):
        return tuple(int(n) for n in value)
    what = "non-negative integers" if lo == 0 else "integers"
    raise DevicePointerError(f"{source}.__cuda_array_interface__['{key}']: expected a tuple "
                             f"of {what}, got {type(value).__name__} {value!r}"[:300])


def _from_cai(cai: dict, source: str) -> ArrayInfo:
    ptr = _cai_pointer(cai, source)
    shape = _cai_ints(cai, "shape", source, 0)
    strides = cai.get("strides")
    byte_strides = _cai_ints(cai, "strides", source, None) if strides else None
    if byte_strides is not None and len(byte_strides) != len(shape):
        raise DevicePointerError(f"{source}.__cuda_array_interface__['strides']: expected "
                                 f"{len(shape)} entries (one per axis of shape {shape}), got "
                                 f"{strides!r}"[:300])
    typestr = cai.get("typestr")
    dtype: np.dtype | str | None = None
    if isinstance(typestr, str):
        if typestr.endswith("V2"):
            # '<V2' is how some producers spell bfloat16; keep it as a 2-byte opaque type.
            dtype = "bfloat16"
        else:
            try:
                dtype = np.dtype(typestr)
            except (TypeError, ValueError):
                pass
    # A GPU reads little-endian: big-endian data would be misread, not converted.
    if dtype is None or (isinstance(dtype, np.dtype) and dtype.byteorder == ">"):
        raise DevicePointerError(f"{source}.__cuda_array_interface__['typestr']: expected a "
                                 f"little-endian array-interface type string such as '<f4', "
                                 f"got {type(typestr).__name__} {typestr!r}"[:300])
    return ArrayInfo(ptr, shape, byte_strides, dtype, DL_CUDA, source)


def _dl_dtype(code: int, bits: int, lanes: int) -> np.dtype | str:
    if lanes != 1:
        raise TypeError(f"DLPack tensor with {lanes} vector lanes is not supported")
    kind = _DL_KIND.get(code)
    if kind == "bfloat":
        return "bfloat16"
    if kind is None:
        raise TypeError(f"DLPack dtype code {code} ({bits} bits) is not supported")
    if kind == "b":
        return np.dtype(np.bool_)
    return np.dtype(f"{kind}{bits // 8}")


# DLManagedTensorVersioned: {DLPackVersion (2 x u32), manager_ctx, deleter, u64 flags, DLTensor}
_VERSIONED_TENSOR_OFFSET = 8 + 8 + 8 + 8
_DL_FLAG_READ_ONLY = 1


def _capsule(obj):
    """(capsule, DLTensor address, read_only): versioned when the producer takes max_version."""
    try:
        capsule = obj.__dlpack__(max_version=(1, 0))
    except TypeError:     # a producer older than DLPack 1.0: no max_version keyword
        capsule = None
    if capsule is not None and _capsule_name(capsule) == b"dltensor_versioned":
        base = _get_pointer(capsule, b"dltensor_versioned")
        flags = ctypes.c_uint64.from_address(base + 24).value
        return capsule, base + _VERSIONED_TENSOR_OFFSET, bool(flags & _DL_FLAG_READ_ONLY)
    if capsule is None:
        capsule = obj.__dlpack__()
    # The DLTensor sits at the start of DLManagedTensor.
    return capsule, _get_pointer(capsule, b"dltensor"), False


_capsule_get_name = ctypes.pythonapi.PyCapsule_GetName
_capsule_get_name.restype = ctypes.c_char_p
_capsule_get_name.argtypes = [ctypes.py_object]


def _capsule_name(capsule) -> bytes | None:
    return _capsule_get_name(capsule)


def dlpack_info(obj, source: str = "") -> ArrayInfo:
    """Read an object's DLPack capsule with ctypes (versioned or legacy, see the module
    docstring)."""
    capsule, address, _read_only = _capsule(obj)
    # Read the DLTensor while `capsule` is alive.
    t = _DLTensor.from_address(address)
    ndim = t.ndim
    shape = tuple(t.shape[i] for i in range(ndim))
    itemsize_bits = t.dtype.bits
    dtype = _dl_dtype(t.dtype.code, itemsize_bits, t.dtype.lanes)
    strides = None
    if t.strides:
        strides = tuple(t.strides[i] * (itemsize_bits // 8) for i in range(ndim))
    ptr = (t.data or 0) + t.byte_offset
    info = ArrayInfo(ptr, shape, strides, dtype, t.device.device_type, source or "DLPack")
    del capsule
    return info


def array_info(obj) -> ArrayInfo:
    """Layout of a DeviceBuffer, a `__cuda_array_interface__` object or a DLPack producer.

    Raises TypeError when the object is none of those.
    """
    name = type(obj).__name__
    if isinstance(getattr(obj, "ptr", None), int) and hasattr(obj, "dtype") \
            and hasattr(obj, "shape") and not isinstance(obj, np.ndarray):
        dtype = obj.dtype
        strides = getattr(obj, "byte_strides", None)
        return ArrayInfo(obj.ptr, tuple(obj.shape), strides, np.dtype(dtype) if
                         dtype != "bfloat16" else dtype, DL_CUDA, name)
    cai = getattr(obj, "__cuda_array_interface__", None)
    if cai is not None:
        return _from_cai(cai, name)
    if hasattr(obj, "__dlpack__"):
        return dlpack_info(obj, name)
    raise DevicePointerError(f"{name} exposes no device array interface "
                             "(.ptr, __cuda_array_interface__ or __dlpack__)")


def device_name(device_type: int) -> str:
    return _DL_NAMES.get(device_type, f"device type {device_type}")


_SMV: list = []   # [cuda.core's StridedMemoryView or None], looked up on first use


def _strided_memory_view():
    if not _SMV:
        cls = None
        for mod in ("cuda.core.utils", "cuda.core.experimental.utils"):
            try:
                cls = __import__(mod, fromlist=["StridedMemoryView"]).StridedMemoryView
                break
            except (ImportError, AttributeError):
                continue
        if cls is None:
            log.info("cuda.core's StridedMemoryView is not available: DLPack arguments are "
                     "read with ctypes")
        _SMV.append(cls)
    return _SMV[0]


@overload
def _dlpack_stream(stream: int) -> int: ...
@overload
def _dlpack_stream(stream: None) -> None: ...
def _dlpack_stream(stream: int | None) -> int | None:
    """The consumer stream to hand `__dlpack__`: None outside a launch, 1 for the legacy default
    stream (the protocol reserves 0)."""
    if stream is None:
        return None
    return 1 if stream == 0 else stream


def _dlpack_pointer(obj, stream: int | None) -> int:
    smv = _strided_memory_view()
    if smv is not None:
        try:
            view = smv.from_dlpack(obj, -1 if stream is None else _dlpack_stream(stream))
        except Exception as exc:  # noqa: BLE001 - e.g. a dtype cuda.core does not map
            log.debug("StridedMemoryView refused %s (%s); reading the capsule with ctypes",
                      type(obj).__name__, exc)
        else:
            if not view.is_device_accessible:
                raise ValueError("the DLPack tensor lives in host memory, not on the GPU")
            return int(view.ptr)
    if stream is not None:
        # The ctypes reader asks for no stream; make the producer order its work first.
        info = _dlpack_info_on(obj, _dlpack_stream(stream))
    else:
        info = dlpack_info(obj)
    if not info.on_device:
        raise ValueError(f"the DLPack tensor lives in {device_name(info.device_type)} "
                         "memory, not on the GPU")
    return info.ptr


def _dlpack_info_on(obj, stream: int) -> ArrayInfo:
    class _OnStream:     # hands `stream` to the producer's __dlpack__
        def __dlpack__(self, **kw):
            return obj.__dlpack__(stream=stream, **kw)
    return dlpack_info(_OnStream(), type(obj).__name__)


def order_after(producer, consumer: int | None) -> None:
    """Make the launch stream `consumer` (a handle; 0/None: legacy default) wait for the work
    queued so far on a CAI exporter's stream `producer` (None: nothing to wait for)."""
    if producer is None:
        return
    if isinstance(producer, bool) or not isinstance(producer, int | np.integer) \
            or producer < 0:
        raise DevicePointerError(f"__cuda_array_interface__ 'stream' must be None or a stream "
                                 f"handle (int), got {producer!r}")
    # 0 is disallowed by the CAI spec; producers that send it mean the legacy default stream.
    p = int(producer) or 1
    c = consumer or 1
    if p == c:
        return
    from ptxdsl.runtime._driver import check, driver
    drv = driver()
    ev = check(drv.cuEventCreate(drv.CUevent_flags.CU_EVENT_DISABLE_TIMING), "cuEventCreate")
    try:
        check(drv.cuEventRecord(ev, drv.CUstream(p)), "cuEventRecord",
              "the __cuda_array_interface__ exporter's stream")
        check(drv.cuStreamWaitEvent(drv.CUstream(c), ev, 0), "cuStreamWaitEvent",
              "the launch stream on the exporter's stream")
    finally:
        drv.cuEventDestroy(ev)   # released once the wait is satisfied
    log.debug("launch stream %#x waits for CAI exporter stream %#x", c, p)


def device_pointer(obj, stream: int | None = None) -> int:
    """The device address an argument stands for; TypeError/ValueError explain a refusal.

    Accepts an int, an object with an int `.ptr` (DeviceBuffer, CuPy MemoryPointer, cuda.core
    Buffer), a cuda.bindings CUdeviceptr, `__cuda_array_interface__` and `__dlpack__` producers.
    Host memory (a numpy array, a CPU tensor) is refused with the reason.

    `stream` is the launch stream's handle (0: legacy default) when the pointer is read for a
    launch: a CAI exporter's `stream` is then ordered before it and a DLPack producer is told
    it; None (not a launch) orders nothing.
    """
    if isinstance(obj, (bool, np.bool_)):
        raise DevicePointerError("bool is not a device pointer")
    if isinstance(obj, (int, np.integer)):
        return int(obj)
    if isinstance(obj, np.ndarray):
        raise DevicePointerError("a numpy array lives in host memory; copy it to the device "
                                 "first (DeviceBuffer.from_numpy)")
    ptr = getattr(obj, "ptr", None)
    if isinstance(ptr, int):
        return ptr
    tname = type(obj).__name__
    if tname == "CUdeviceptr":
        return int(obj)
    if tname == "Buffer" and type(obj).__module__.startswith("cuda.core"):
        return int(obj.handle)     # cuda.core Buffer: .handle is the device pointer
    cai = getattr(obj, "__cuda_array_interface__", None)
    if cai is not None:
        ptr = _cai_pointer(cai, tname)
        if stream is not None:
            order_after(cai.get("stream"), stream)
        return ptr
    if hasattr(obj, "__dlpack__"):
        dev = obj.__dlpack_device__()[0] if hasattr(obj, "__dlpack_device__") else None
        if dev is not None and int(dev) not in _DEVICE_OK:
            raise ValueError(f"the DLPack tensor lives in {device_name(int(dev))} memory, not "
                             "on the GPU")
        return _dlpack_pointer(obj, stream)
    raise DevicePointerError(f"{tname} {obj!r}"[:80] + " is not a device "
                             "pointer (expected an int, a DeviceBuffer, or an object with "
                             "__cuda_array_interface__ or __dlpack__)")
