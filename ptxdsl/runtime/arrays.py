"""Device pointers and array layouts from foreign objects, without importing any framework.

Understands ptxdsl's DeviceBuffer (anything with an int `.ptr` and numpy `.dtype`/`.shape`),
`__cuda_array_interface__` (CuPy, PyTorch, Numba) and DLPack capsules (`__dlpack__`), which
are read with ctypes: the capsule is only looked at, never consumed, so its owner frees it.
"""

from __future__ import annotations

import ctypes

import attrs
import numpy as np

from ptxdsl.runtime.errors import DevicePointerError

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
    dtype: object
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


def _from_cai(cai: dict, source: str) -> ArrayInfo:
    ptr = _cai_pointer(cai, source)
    shape = tuple(int(n) for n in cai["shape"])
    strides = cai.get("strides")
    typestr = cai["typestr"]
    # '<V2' is how some producers spell bfloat16; keep it as a 2-byte opaque type.
    dtype = np.dtype(typestr) if not typestr.endswith("V2") else "bfloat16"
    return ArrayInfo(ptr, shape, tuple(int(s) for s in strides) if strides else None, dtype,
                     DL_CUDA, source)


def _dl_dtype(code: int, bits: int, lanes: int) -> object:
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


def dlpack_info(obj, source: str = "") -> ArrayInfo:
    """Read an object's DLPack capsule (legacy, unversioned "dltensor") with ctypes."""
    capsule = obj.__dlpack__()
    address = _get_pointer(capsule, b"dltensor")
    # The DLTensor sits at the start of DLManagedTensor; read it while `capsule` is alive.
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


def device_pointer(obj) -> int:
    """The device address an argument stands for; TypeError/ValueError explain a refusal.

    Accepts an int, an object with an int `.ptr` (DeviceBuffer, CuPy MemoryPointer), a
    cuda.bindings CUdeviceptr, `__cuda_array_interface__` and `__dlpack__` producers.
    Host memory (a numpy array, a CPU tensor) is refused with the reason.
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
    if type(obj).__name__ == "CUdeviceptr":
        return int(obj)
    cai = getattr(obj, "__cuda_array_interface__", None)
    if cai is not None:
        return _cai_pointer(cai, type(obj).__name__)
    if hasattr(obj, "__dlpack__"):
        dev = obj.__dlpack_device__()[0] if hasattr(obj, "__dlpack_device__") else None
        if dev is not None and int(dev) not in _DEVICE_OK:
            raise ValueError(f"the DLPack tensor lives in {device_name(int(dev))} memory, not "
                             "on the GPU")
        info = dlpack_info(obj)
        if not info.on_device:
            raise ValueError(f"the DLPack tensor lives in {device_name(info.device_type)} "
                             "memory, not on the GPU")
        return info.ptr
    raise DevicePointerError(f"{type(obj).__name__} {obj!r}"[:80] + " is not a device "
                             "pointer (expected an int, a DeviceBuffer, or an object with "
                             "__cuda_array_interface__ or __dlpack__)")
