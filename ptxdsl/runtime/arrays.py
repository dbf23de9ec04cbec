"""Device pointers and array layouts from foreign objects, without importing any framework.

Understands ptxdsl's DeviceBuffer (anything with an int `.ptr` and numpy `.dtype`/`.shape`),
`__cuda_array_interface__` (CuPy, PyTorch, Numba) and DLPack (`__dlpack__`).

DLPack is read through cuda.core's `StridedMemoryView` (no hand-written capsule reader): it
asks for a versioned capsule ("dltensor_versioned", DLPack 1.x; read-only exports exist only
there) and falls back to a legacy one for producers without `max_version`. For a kernel
argument the launch stream is the consumer stream handed to `__dlpack__`, as the protocol asks,
so the producer orders its pending writes before the launch.

`__cuda_array_interface__` v3 `stream`: an exporter's work on that stream may still be writing
the array, so before the launch the launch stream waits for it (cuEventRecord on the exporter's
stream + cuStreamWaitEvent on the launch stream), unless both are the same stream. (The CAI path
stays hand-written: it is a dict lookup, cheaper than any view object.)
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

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


def _view(obj, stream: int):
    """cuda.core's StridedMemoryView of a DLPack producer (`stream`: the consumer stream
    handed to `__dlpack__`, -1 for none). It asks for a versioned (DLPack 1.x) capsule, so
    read-only exports work, and falls back to a legacy one for producers without
    `max_version`; the capsule is released with the view."""
    try:
        return _strided_memory_view().from_dlpack(obj, stream)
    except Exception as exc:  # noqa: BLE001 - cuda.core raises BufferError, TypeError, ...
        raise DevicePointerError(f"{type(obj).__name__}.__dlpack__: cuda.core cannot read "
                                 f"the export ({type(exc).__name__}: {exc})"[:300]) from exc


def _view_dtype(view, source: str) -> np.dtype | str:
    try:
        dtype = view.dtype
    except NotImplementedError as exc:
        # Without ml_dtypes cuda.core names no 2-byte bfloat16; ptxdsl's maps take the string.
        if "bfloat16" in str(exc):
            return "bfloat16"
        raise DevicePointerError(f"{source}.__dlpack__: its dtype has no numpy name ({exc}); "
                                 "view it as one that has (e.g. tensor.view(torch.uint8)) "
                                 "first") from exc
    return "bfloat16" if dtype.name == "bfloat16" else dtype


def dlpack_info(obj, source: str = "") -> ArrayInfo:
    """Layout of a DLPack producer (device or host memory), read through StridedMemoryView."""
    source = source or type(obj).__name__
    view = _view(obj, -1)
    dtype = _view_dtype(view, source)
    itemsize = 2 if dtype == "bfloat16" else np.dtype(dtype).itemsize
    strides = view.strides
    byte_strides = None if strides is None else tuple(s * itemsize for s in strides)
    return ArrayInfo(int(view.ptr), tuple(view.shape), byte_strides, dtype,
                     int(view.__dlpack_device__()[0]), source)


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


_SMV: list = []   # [cuda.core's StridedMemoryView], imported on first use


def _strided_memory_view():
    if not _SMV:
        # lazy: importing ptxdsl stays cheap
        from cuda.core.utils import StridedMemoryView
        _SMV.append(StridedMemoryView)
    return _SMV[0]


def _dlpack_pointer(obj, stream: int | None) -> int:
    # The launch stream as the consumer stream (the protocol's 1 for the legacy default
    # stream, which it keeps 0 apart from); -1 outside a launch: nothing to order.
    view = _view(obj, -1 if stream is None else (stream or 1))
    if not view.is_device_accessible:
        raise DevicePointerError("the DLPack tensor lives in host memory, not on the GPU")
    return int(view.ptr)


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
    if p != c:
        wait_stream(c, p, "ordering the launch after the __cuda_array_interface__ exporter's "
                    "stream")
        log.debug("launch stream %#x waits for CAI exporter stream %#x", c, p)


def wait_stream(consumer: int, producer: int, why: str) -> None:
    """Make stream `consumer` wait for the work queued so far on stream `producer` (handles;
    1 is the legacy default stream, 2 the per-thread one): an event recorded on the one,
    waited for by the other, without the host waiting."""
    from ptxdsl.runtime._driver import check, driver
    drv = driver()
    ev = check(drv.cuEventCreate(drv.CUevent_flags.CU_EVENT_DISABLE_TIMING), "cuEventCreate")
    try:
        check(drv.cuEventRecord(ev, drv.CUstream(producer)), "cuEventRecord", why)
        check(drv.cuStreamWaitEvent(drv.CUstream(consumer), ev, 0), "cuStreamWaitEvent", why)
    finally:
        drv.cuEventDestroy(ev)   # released once the wait is satisfied


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
            raise DevicePointerError(f"the DLPack tensor lives in {device_name(int(dev))} "
                                     "memory, not on the GPU")
        return _dlpack_pointer(obj, stream)
    raise DevicePointerError(f"{tname} {obj!r}"[:80] + " is not a device "
                             "pointer (expected an int, a DeviceBuffer, or an object with "
                             "__cuda_array_interface__ or __dlpack__)")
