"""Device memory, streams, events, and synchronization that gives up after a timeout.

`synchronize(timeout=...)`, `Stream.synchronize` and `Event.synchronize` poll
cuStreamQuery / cuEventQuery against a deadline instead of blocking in the driver, so a hung
kernel raises `SyncTimeoutError` (Python stays responsive to signals too) rather than
freezing the process. With no timeout they block in the driver as usual.
"""

from __future__ import annotations

import time
import weakref
from typing import TYPE_CHECKING, Any, overload

import numpy as np

from ptxdsl.runtime._driver import check, driver, error_for
from ptxdsl.runtime.arrays import DL_CUDA, wait_stream
from ptxdsl.runtime.device import checked_ordinal, on_device
from ptxdsl.runtime.errors import (
    DevicePointerError,
    DLPackExportError,
    LaunchError,
    SyncTimeoutError,
)

if TYPE_CHECKING:  # pragma: no cover
    from numpy.typing import ArrayLike, DTypeLike

_NOT_READY = 600  # CUDA_ERROR_NOT_READY
_live_streams: weakref.WeakSet = weakref.WeakSet()


def _wait(query, call: str, what: str, timeout: float | None, blocking) -> None:
    """Poll `query()` (a CUresult) until success, error or `timeout` seconds."""
    if timeout is None:
        check(blocking(), call.replace("Query", "Synchronize"))
        return
    deadline = time.monotonic() + timeout
    delay = 0.0
    while True:
        (err,) = query()
        code = int(err)
        if code == 0:
            return
        if code != _NOT_READY:
            raise error_for(call, err, what)
        if time.monotonic() >= deadline:
            raise SyncTimeoutError(
                f"{what} not finished after {timeout:g} s (a kernel may be hung; it keeps "
                "running and the context stays busy until it ends or the process exits)")
        # Spin briefly for short kernels, then back off to at most 1 ms between polls.
        if delay:
            time.sleep(delay)
        delay = min(max(delay * 2, 2e-5), 1e-3)


class Stream:
    """A CUDA stream (cuStreamCreate). Blocking by default, so `synchronize()` with a timeout,
    which waits on the legacy default stream, covers it; `non_blocking=True` streams are
    tracked and waited on individually."""

    def __init__(self, *, non_blocking: bool = False, device: int = 0):
        device = checked_ordinal(device)   # an int, a cuda.core Device, a torch.device
        drv = driver()
        with on_device(device):
            flags = drv.CUstream_flags.CU_STREAM_NON_BLOCKING if non_blocking else \
                drv.CUstream_flags.CU_STREAM_DEFAULT
            self.device = device
            self.non_blocking = non_blocking
            self.handle = check(drv.cuStreamCreate(flags), "cuStreamCreate")
            _live_streams.add(self)

    @property
    def ptr(self) -> int:
        """The stream's handle (CUstream) as an int."""
        return int(self.handle)

    def __cuda_stream__(self) -> tuple[int, int]:
        """cuda.core's stream protocol (version 0, the CUstream as an int), so
        `cuda.core.Device().create_stream(s)` and other consumers of the protocol take it."""
        if self.handle is None:
            raise LaunchError("this ptxdsl Stream was closed; a closed stream cannot be handed "
                              "to another library")
        return (0, int(self.handle))

    def synchronize(self, timeout: float | None = None) -> None:
        """Wait until all work on the stream is done; with `timeout` (seconds), raise
        `SyncTimeoutError` instead of waiting longer (a hung kernel)."""
        drv = driver()
        with on_device(self.device):
            _wait(lambda: drv.cuStreamQuery(self.handle), "cuStreamQuery", "stream",
                  timeout, lambda: drv.cuStreamSynchronize(self.handle))

    def wait(self, event: Event) -> None:
        """Later work on this stream waits for `event` (cuStreamWaitEvent); the event may
        belong to another device, which orders work across GPUs without the host."""
        event.wait_in(self)

    def query(self) -> bool:
        """True when all work on the stream is done."""
        (err,) = driver().cuStreamQuery(self.handle)
        if int(err) == _NOT_READY:
            return False
        check((err,), "cuStreamQuery")
        return True

    def close(self) -> None:
        """Destroy the stream (cuStreamDestroy); closing twice does nothing."""
        if self.handle is not None:
            with on_device(self.device):
                check(driver().cuStreamDestroy(self.handle), "cuStreamDestroy")
                self.handle = None

    def __enter__(self) -> Stream:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def stream_key(stream) -> int:
    """The integer handle of a stream, as `stream_handle` would wrap it, without building a
    CUstream: the launch-configuration cache keys on it (a framework may hand out a new
    wrapper object for the same stream on every call, so `id()` would never hit)."""
    if stream is None:
        return 0
    if type(stream) is int:
        return stream
    if isinstance(stream, Stream):
        if stream.handle is None:
            raise ValueError("the ptxdsl Stream was closed; launch on an open stream")
        return int(stream.handle)
    cs = getattr(stream, "__cuda_stream__", None)
    if cs is not None:
        return int(cs()[1])
    for attr in ("cuda_stream", "ptr", "handle"):
        value = getattr(stream, attr, None)
        if value is not None:
            return int(value)
    return int(stream)


def stream_handle(stream) -> object:
    """A CUstream for a ptxdsl Stream, None/0 (legacy default stream), an int handle, or any
    object with `.handle`/`.ptr` or `__cuda_stream__` (cuda.core, CuPy, PyTorch streams)."""
    drv = driver()
    if stream is None:
        return drv.CUstream(0)
    if isinstance(stream, Stream):
        return stream.handle
    if isinstance(stream, drv.CUstream):
        return stream
    if hasattr(stream, "__cuda_stream__"):
        return drv.CUstream(int(stream.__cuda_stream__()[1]))
    for attr in ("cuda_stream", "ptr", "handle"):
        value = getattr(stream, attr, None)
        if value is not None:
            return drv.CUstream(int(value))
    return drv.CUstream(int(stream))


class Event:
    """A CUDA event (cuEventCreate) for ordering and timing."""

    def __init__(self, *, timing: bool = True, device: int = 0):
        device = checked_ordinal(device)   # an int, a cuda.core Device, a torch.device
        drv = driver()
        with on_device(device):
            flags = drv.CUevent_flags.CU_EVENT_DEFAULT if timing else \
                drv.CUevent_flags.CU_EVENT_DISABLE_TIMING
            self.device = device
            self.handle = check(drv.cuEventCreate(flags), "cuEventCreate")

    def record(self, stream: object = None) -> Event:
        """Record the event on `stream` (None: the legacy default stream)."""
        sdev = getattr(stream, "device", self.device)
        if isinstance(sdev, int) and sdev != self.device:
            raise ValueError(f"an event of device {self.device} cannot be recorded on a stream "
                             f"of device {sdev}")
        with on_device(self.device):
            check(driver().cuEventRecord(self.handle, stream_handle(stream)), "cuEventRecord")
            return self

    def wait_in(self, stream: object) -> None:
        """Later work on `stream` waits for this event (cuStreamWaitEvent): `Stream.wait` for
        any stream `stream_handle` takes (a torch or CuPy stream, an int handle, None for the
        legacy default stream), e.g. the current torch stream waiting for a side stream. The
        call is made on a ptxdsl Stream's device, else on the event's."""
        with on_device(stream.device if isinstance(stream, Stream) else self.device):
            check(driver().cuStreamWaitEvent(stream_handle(stream), self.handle, 0),
                  "cuStreamWaitEvent")

    def synchronize(self, timeout: float | None = None) -> None:
        """Wait until the event has completed; with `timeout` (seconds), raise
        `SyncTimeoutError` instead of waiting longer."""
        drv = driver()
        with on_device(self.device):
            _wait(lambda: drv.cuEventQuery(self.handle), "cuEventQuery", "event", timeout,
                  lambda: drv.cuEventSynchronize(self.handle))

    def query(self) -> bool:
        """True when the work the event recorded has completed."""
        (err,) = driver().cuEventQuery(self.handle)
        if int(err) == _NOT_READY:
            return False
        check((err,), "cuEventQuery")
        return True

    def elapsed_ms(self, end: Event) -> float:
        """Milliseconds between this event and `end` (cuEventElapsedTime); both recorded."""
        return float(check(driver().cuEventElapsedTime(self.handle, end.handle),
                           "cuEventElapsedTime"))

    def close(self) -> None:
        """Destroy the event (cuEventDestroy); closing twice does nothing."""
        if self.handle is not None:
            check(driver().cuEventDestroy(self.handle), "cuEventDestroy")
            self.handle = None


def synchronize(timeout: float | None = None, *, device: int = 0) -> None:
    """Wait for all work on `device` (cuCtxSynchronize); with `timeout` seconds, poll an
    event recorded on the legacy default stream (which follows every blocking stream) and
    each live non-blocking ptxdsl Stream, raising SyncTimeoutError past the deadline."""
    device = checked_ordinal(device)
    drv = driver()
    with on_device(device):
        if timeout is None:
            check(drv.cuCtxSynchronize(), "cuCtxSynchronize")
            return
        deadline = time.monotonic() + timeout
        ev = Event(timing=False, device=device)
        try:
            ev.record(None)
            ev.synchronize(timeout)
            for s in list(_live_streams):
                if s.non_blocking and s.handle is not None and s.device == device:
                    s.synchronize(max(deadline - time.monotonic(), 0.0))
        finally:
            ev.close()


class Owned:
    """`with` and finalizer plumbing for objects that own driver memory: `free()` runs on
    leaving the block, and at garbage collection if nobody called it."""

    def free(self) -> None:  # pragma: no cover - every subclass defines it
        """Release the memory now (also done on leaving a `with` block, or at garbage
        collection); freeing twice does nothing."""
        raise NotImplementedError

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.free()

    def __del__(self) -> None:
        try:
            self.free()
        except Exception:  # noqa: S110 - at interpreter exit the driver may already be gone
            pass


def buffer_dtype(dtype, who: str) -> np.dtype:
    """numpy's dtype of a buffer's `dtype`, refusing a string PTX reads otherwise: numpy takes
    'f16' as float128 and 'u8' as uint64, so a buffer meant for PTX's f16 got 8x the bytes."""
    if isinstance(dtype, str):
        from ptxdsl.errors import OperandError
        from ptxdsl.instructions.wgmma import ptx_type_named  # lazy: runtime layer
        if ptx_type_named(dtype) is not None:
            raise OperandError(who, "dtype", "a numpy dtype or its full name ('float16', "
                               "'uint8'): a PTX type name means another type to numpy",
                               f"{dtype!r} (numpy reads it as {_numpy_reading(dtype)})")
    return np.dtype(dtype)


def buffer_layout(who: str, nbytes: Any, dtype: np.dtype,
                  shape: Any) -> tuple[int, tuple[int, ...]]:
    """(nbytes, shape) of a buffer, both whole and non-negative: int() made 1.5 bytes one, and
    a negative count or extent allocated a 1-byte buffer that claimed a negative shape."""
    from ptxdsl.errors import OperandError
    from ptxdsl.operands import _show
    n = nbytes.__index__() if not isinstance(nbytes, bool) and hasattr(
        nbytes, "__index__") else None
    if n is None or n < 0:
        raise OperandError(who, "nbytes", "a byte count: an int >= 0", _show(nbytes))
    dims = (shape,) if not isinstance(shape, tuple | list) else tuple(shape)
    if shape is None:
        dims = (n // dtype.itemsize,)
    elif not all(not isinstance(d, bool) and hasattr(d, "__index__") and d.__index__() >= 0
                 for d in dims):
        raise OperandError(who, "shape", "extents that are ints >= 0", _show(shape))
    return n, tuple(d.__index__() for d in dims)


def _numpy_reading(name: str) -> str:
    try:
        return np.dtype(name).name
    except TypeError:
        return "no type"


class DeviceBuffer(Owned):
    """Device memory from cuMemAlloc, with a numpy dtype and shape for interop.

    `ptr` is the device address. Exposes `__cuda_array_interface__` (v3) and DLPack
    (`__dlpack__`/`__dlpack_device__`), so CuPy, PyTorch and Numba view it without a copy
    (`torch.from_dlpack(buf)`), and is a context manager that frees on exit. Memory a DLPack
    consumer still views is freed only when the last consumer lets it go, however early
    `free()` is called.
    """

    _leases = 0          # DLPack exports not yet released by their consumers
    _orphan: int | None = None   # memory free() released while a consumer still viewed it

    def __init__(self, nbytes: int, *, dtype=np.uint8, shape=None, device: int = 0):
        dtype = buffer_dtype(dtype, "DeviceBuffer")
        device = checked_ordinal(device)   # an int, a cuda.core Device, a torch.device
        nbytes, shape = buffer_layout("DeviceBuffer", nbytes, dtype, shape)
        if int(np.prod(shape)) * dtype.itemsize > nbytes:
            raise ValueError(f"shape {shape} of {dtype} needs more than {nbytes} bytes")
        self.nbytes = int(nbytes)
        self.dtype = dtype
        self.shape = shape
        self.device = device
        with on_device(device):
            self._ptr: int | None = int(check(driver().cuMemAlloc(max(self.nbytes, 1)),
                                              "cuMemAlloc", f"allocating {self.nbytes} bytes"))

    @classmethod
    def empty(cls, shape: int | tuple[int, ...] | list[int], dtype: DTypeLike = np.uint8,
              *, device: int = 0) -> DeviceBuffer:
        """An uninitialised buffer of `shape` elements of `dtype` on `device` (cuMemAlloc)."""
        dt = buffer_dtype(dtype, "DeviceBuffer.empty")
        shape = buffer_layout("DeviceBuffer.empty", 0, dt, shape)[1]   # (int(1.5),) was (1,)
        return cls(int(np.prod(shape)) * dt.itemsize, dtype=dtype, shape=shape, device=device)

    @classmethod
    def zeros(cls, shape: int | tuple[int, ...] | list[int], dtype: DTypeLike = np.uint8,
              *, device: int = 0) -> DeviceBuffer:
        """`empty(...)` set to zero bytes."""
        buf = cls.empty(shape, dtype, device=device)
        buf.memset(0)
        return buf

    @classmethod
    def from_numpy(cls, array: np.ndarray, *, device: int = 0) -> DeviceBuffer:
        """A new buffer on `device` holding a copy of `array` (made C-contiguous), with its
        dtype and shape."""
        array = np.ascontiguousarray(array)
        buf = cls(array.nbytes, dtype=array.dtype, shape=array.shape, device=device)
        buf.copy_from(array)
        return buf

    @property
    def ptr(self) -> int:
        """The device address; a `DevicePointerError` once the buffer was freed."""
        if self._ptr is None:
            raise DevicePointerError("DeviceBuffer was freed")
        return self._ptr

    def __dlpack_device__(self) -> tuple[int, int]:
        return (DL_CUDA, self.device)

    def __dlpack__(self, *, stream: int | None = None, max_version: tuple[int, int] | None = None,
                   dl_device: tuple[int, int] | None = None, copy: bool | None = None) -> object:
        """A DLPack capsule viewing this buffer (versioned, DLPack 1.x, when `max_version` is at
        least (1, 0); else legacy), made by cuda.core's StridedMemoryView. The capsule and
        what a consumer makes of it keep the memory alive.

        `stream` is the consumer's (the protocol's values: None or 1 the legacy default
        stream, 2 the per-thread default stream, a handle, -1 for no ordering): ptxdsl queues
        a buffer's copies and launches on the legacy default stream unless told otherwise,
        and blocking streams order with it, so another consumer stream waits for the work
        queued there so far (an event, not a host wait). Work queued on a non-blocking
        Stream must be ordered by the caller first. `copy=True` exports a new buffer, copied
        on the device."""
        ptr = self.ptr
        if dl_device is not None and tuple(dl_device) != (DL_CUDA, self.device):
            raise DLPackExportError(
                f"DeviceBuffer.__dlpack__: dl_device={dl_device!r} asks for another device than "
                f"the buffer's {(DL_CUDA, self.device)} (CUDA device {self.device}); copy it "
                "first (to_numpy() for the host)")
        if isinstance(stream, bool) or not (stream is None or isinstance(stream, int)) \
                or (stream is not None and stream < -1) or stream == 0:
            raise DLPackExportError(
                f"DeviceBuffer.__dlpack__: stream={stream!r}: expected None, -1, 1 (legacy "
                "default), 2 (per-thread default) or a stream handle; 0 is disallowed by the "
                "DLPack protocol for CUDA")
        with on_device(self.device):
            if copy:
                # A new buffer, filled on the legacy default stream (after this one's pending
                # work there), exported in its place: the capsule is its only owner.
                dup = DeviceBuffer(self.nbytes, dtype=self.dtype, shape=self.shape,
                                   device=self.device)
                dup.copy_from(self, stream=1)
                return dup.__dlpack__(stream=stream, max_version=max_version)
            if stream is not None and stream not in (-1, 1):
                wait_stream(stream, 1, "ordering a DLPack consumer's stream after the work queued "
                            "on the legacy default stream")
            lease = _Lease(self)
            try:
                return _export_capsule(ptr, self.nbytes, self.shape, self.dtype, lease, max_version)
            except Exception as exc:  # noqa: BLE001 - cuda.core refuses with BufferError & co
                raise DLPackExportError(f"DeviceBuffer.__dlpack__: cuda.core cannot export a "
                                        f"{self.dtype} buffer of shape {self.shape} ("
                                        f"{type(exc).__name__}: {exc})") from exc

    @property
    def __cuda_array_interface__(self) -> dict:
        return {"shape": self.shape, "typestr": self.dtype.str, "data": (self.ptr, False),
                "version": 3, "strides": None}

    def copy_from(self, src: DeviceBuffer | ArrayLike, stream: object = None) -> None:
        """Fill from a numpy array (host -> device) or another DeviceBuffer (device -> device;
        on another device: cuMemcpyPeer, see `peer.copy_peer`)."""
        drv = driver()
        with on_device(self.device):
            if isinstance(src, DeviceBuffer) and src.device != self.device:
                from ptxdsl.runtime.peer import copy_peer
                copy_peer(self, src, self._fit(src.nbytes), stream=stream)
                return
            if isinstance(src, DeviceBuffer):
                n = self._fit(src.nbytes)
                check(drv.cuMemcpyDtoDAsync(self.ptr, src.ptr, n, stream_handle(stream)),
                      "cuMemcpyDtoDAsync")
            else:
                host = np.ascontiguousarray(src)
                n = self._fit(host.nbytes)
                check(drv.cuMemcpyHtoDAsync(self.ptr, host.ctypes.data, n, stream_handle(stream)),
                      "cuMemcpyHtoDAsync")
            if stream is None:
                # The host array may be a temporary: finish the copy before it can be freed.
                check(drv.cuStreamSynchronize(stream_handle(None)), "cuStreamSynchronize")

    @overload
    def copy_to(self, dst: DeviceBuffer) -> DeviceBuffer: ...
    @overload
    def copy_to(self, dst: np.ndarray | None = None) -> np.ndarray: ...
    def copy_to(self, dst: np.ndarray | DeviceBuffer | None = None) -> np.ndarray | DeviceBuffer:
        """Copy into `dst` (a writable contiguous numpy array or a DeviceBuffer), or into a new
        numpy array of this buffer's dtype and shape; waits for the copy."""
        drv = driver()
        with on_device(self.device):
            if isinstance(dst, DeviceBuffer):
                dst.copy_from(self)
                return dst
            if dst is None:
                dst = np.empty(self.shape, self.dtype)
            if not dst.flags.c_contiguous or not dst.flags.writeable:
                raise ValueError("copy_to needs a writable C-contiguous numpy array")
            n = min(dst.nbytes, self.nbytes)
            check(drv.cuMemcpyDtoH(dst.ctypes.data, self.ptr, n), "cuMemcpyDtoH")
            return dst

    def to_numpy(self, dtype: DTypeLike | None = None,
                 shape: int | tuple[int, ...] | None = None) -> np.ndarray:
        """A host copy, as the buffer's dtype and shape or as `dtype` (and `shape`)."""
        dtype = self.dtype if dtype is None else buffer_dtype(dtype, "DeviceBuffer.to_numpy")
        shape = (self.nbytes // dtype.itemsize,) if shape is None and dtype != self.dtype \
            else (self.shape if shape is None else shape)
        return self.copy_to(np.empty(shape, dtype))

    def memset(self, value: int, stream: object = None) -> None:
        """Set every byte to `value` (cuMemsetD8Async)."""
        if not 0 <= int(value) <= 255:
            raise ValueError(f"memset value must be a byte (0..255), got {value}")
        drv = driver()
        with on_device(self.device):
            check(drv.cuMemsetD8Async(self.ptr, int(value), self.nbytes, stream_handle(stream)),
                  "cuMemsetD8Async")

    def _fit(self, n: int) -> int:
        if n > self.nbytes:
            raise ValueError(f"source of {n} bytes does not fit a {self.nbytes}-byte buffer")
        return n

    def free(self) -> None:
        if self._ptr is not None:
            ptr, self._ptr = self._ptr, None
            if self._leases:
                self._orphan = ptr     # _Lease frees it when the last consumer lets go
                return
            with on_device(self.device):
                check(driver().cuMemFree(ptr), "cuMemFree")

    def _release_lease(self) -> None:
        self._leases -= 1
        if not self._leases and self._orphan is not None:
            ptr, self._orphan = self._orphan, None
            with on_device(self.device):
                check(driver().cuMemFree(ptr), "cuMemFree")

    def __repr__(self) -> str:
        where = f"0x{self._ptr:x}" if self._ptr is not None else "freed"
        return f"DeviceBuffer({self.nbytes} bytes, {self.dtype}, shape={self.shape}, {where})"


class _Lease:
    """What a DLPack consumer holds through its capsule (the owner of the cuda.core Buffer
    the capsule's view wraps): it keeps the DeviceBuffer alive, and the memory too when the
    buffer is freed first."""

    def __init__(self, buffer: DeviceBuffer):
        self.buffer = buffer
        buffer._leases += 1

    def __del__(self) -> None:
        try:
            self.buffer._release_lease()
        except Exception:  # noqa: S110 - at interpreter exit the driver may already be gone
            pass


def _export_capsule(ptr: int, nbytes: int, shape: tuple[int, ...], dtype: np.dtype,
                    owner: object, max_version) -> object:
    # lazy: importing ptxdsl stays cheap
    from cuda.core import Buffer
    from cuda.core.utils import StridedMemoryView
    view = StridedMemoryView.from_buffer(Buffer.from_handle(ptr, nbytes, owner=owner), shape,
                                         dtype=dtype)
    return view.__dlpack__(max_version=max_version)
