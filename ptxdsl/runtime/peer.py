"""More than one device: peer access between primary contexts, copies between devices, and
host-pinned memory mapped into every device's address space.

Every device has its own primary context (`device.py`); a module, a buffer, a stream or an
event belongs to the device it was made on (`device=N`), and ptxdsl makes that device's context
current before each driver call that needs it. What crosses devices is explicit::

  can_access_peer(device, peer)        cuDeviceCanAccessPeer: may `device` map `peer`'s memory
  enable_peer_access(device, peer)     cuCtxEnablePeerAccess: kernels on `device` may read and
                                       write `peer`'s allocations (all of them, now and later)
  disable_peer_access(device, peer)    cuCtxDisablePeerAccess
  enable_all_peer_access(devices)      every ordered pair that the hardware allows
  copy_peer(dst, src, nbytes, stream)  cuMemcpyPeer(Async) between buffers on two devices
  HostBuffer(nbytes, ...)              cuMemHostAlloc(DEVICEMAP | PORTABLE): pinned host memory
                                       that every device addresses (`.ptr`), and numpy sees
  pointer_device(ptr)                  the ordinal of the device an address was allocated on
  multi_gpu_skip_reason(count)         why a test needing `count` Hopper GPUs with peer access
                                       cannot run here (None when it can)

Peer access is one-way: `enable_peer_access(1, 0)` lets kernels on device 1 dereference device
0's memory; device 0 reading device 1 needs `enable_peer_access(0, 1)` as well.
"""

from __future__ import annotations

import ctypes
import threading
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import numpy as np

from ptxdsl.runtime._driver import check, driver, error_for
from ptxdsl.runtime.device import (
    checked_ordinal,
    device_count,
    device_info,
    on_device,
    primary_context,
)
from ptxdsl.runtime.errors import PeerAccessError
from ptxdsl.runtime.memory import Owned, buffer_dtype, buffer_layout, stream_handle

if TYPE_CHECKING:  # pragma: no cover
    from numpy.typing import DTypeLike

    from ptxdsl.runtime.memory import DeviceBuffer

ALREADY_ENABLED = 704    # CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED
NOT_ENABLED = 705        # CUDA_ERROR_PEER_ACCESS_NOT_ENABLED
_lock = threading.Lock()
_enabled: set[tuple[int, int]] = set()


def _pair(device: int, peer: int, what: str) -> None:
    if device == peer:
        raise ValueError(f"{what}: device {device} and its peer are the same device (a device "
                         "always reaches its own memory)")


def can_access_peer(device: int, peer: int) -> bool:
    """cuDeviceCanAccessPeer: whether kernels on `device` can be given access to `peer`'s
    memory (False for device == peer)."""
    if device == peer:
        return False
    drv = driver()
    primary_context(device)   # validates both ordinals with a clear message
    primary_context(peer)
    dev = check(drv.cuDeviceGet(device), "cuDeviceGet")
    other = check(drv.cuDeviceGet(peer), "cuDeviceGet")
    return bool(check(drv.cuDeviceCanAccessPeer(dev, other), "cuDeviceCanAccessPeer",
                      f"devices {device} -> {peer}"))


def enable_peer_access(device: int, peer: int) -> None:
    """Let kernels (and copies) on `device` dereference allocations of `peer`'s context.
    Enabling a pair twice is not an error. Raises PeerAccessError when the hardware cannot."""
    _pair(device, peer, "enable_peer_access")
    if (device, peer) in _enabled:
        return
    if not can_access_peer(device, peer):
        raise PeerAccessError(
            f"device {device} cannot access device {peer}'s memory (cuDeviceCanAccessPeer is "
            "0: no NVLink or PCIe peer path between them); share data through host-pinned "
            "memory instead (HostBuffer)")
    drv = driver()
    with _lock:
        with on_device(device):
            (err,) = drv.cuCtxEnablePeerAccess(primary_context(peer), 0)
            if int(err) not in (0, ALREADY_ENABLED):
                raise PeerAccessError(str(error_for("cuCtxEnablePeerAccess", err,
                                                    f"devices {device} -> {peer}")))
            _enabled.add((device, peer))


def disable_peer_access(device: int, peer: int) -> None:
    """Withdraw `device`'s access to `peer`'s memory; a pair never enabled is left alone."""
    _pair(device, peer, "disable_peer_access")
    drv = driver()
    with _lock:
        with on_device(device):
            (err,) = drv.cuCtxDisablePeerAccess(primary_context(peer))
            if int(err) not in (0, NOT_ENABLED):
                raise PeerAccessError(str(error_for("cuCtxDisablePeerAccess", err,
                                                    f"devices {device} -> {peer}")))
            _enabled.discard((device, peer))


def peer_access_enabled(device: int, peer: int) -> bool:
    """Whether ptxdsl enabled `device` -> `peer` access in this process (and has not disabled
    it since)."""
    return (device, peer) in _enabled


def enable_all_peer_access(devices: Iterable[int] | None = None) -> list[tuple[int, int]]:
    """Enable every ordered pair of `devices` (default: all visible) that can access each other;
    returns the pairs now enabled."""
    devices = list(range(device_count())) if devices is None else list(devices)
    done = []
    for d in devices:
        for p in devices:
            if d != p and can_access_peer(d, p):
                enable_peer_access(d, p)
                done.append((d, p))
    return done


def copy_peer(dst: DeviceBuffer | HostBuffer, src: DeviceBuffer | HostBuffer,
              nbytes: int | None = None, *, stream: object = None) -> None:
    """Copy `nbytes` (default: all of `src`) from `src` to `dst`, buffers with `.ptr` and
    `.device` (DeviceBuffer) on any two devices; no peer access needed (the driver stages the
    copy when there is no direct path).

    With `stream=None` this is cuMemcpyPeer (ordered after all earlier work on both devices)
    and it returns when the copy is done; with a stream, cuMemcpyPeerAsync in that stream."""
    # int(1.5) was 1 (one byte copied, silently) and a negative count reached the driver
    if nbytes is not None and (isinstance(nbytes, bool) or not hasattr(nbytes, "__index__")
                               or nbytes.__index__() < 0):
        raise ValueError(f"copy_peer: nbytes must be None (all of src) or an int >= 0, got "
                         f"{nbytes!r}"[:200])
    n = int(src.nbytes if nbytes is None else nbytes)
    if n > dst.nbytes or n > src.nbytes:
        raise ValueError(f"copy_peer: {n} bytes do not fit (source {src.nbytes}, destination "
                         f"{dst.nbytes} bytes)")
    drv = driver()
    dctx, sctx = primary_context(dst.device), primary_context(src.device)
    where = f"copying {n} bytes from device {src.device} to device {dst.device}"
    if stream is None:
        with on_device(dst.device):
            check(drv.cuMemcpyPeer(dst.ptr, dctx, src.ptr, sctx, n), "cuMemcpyPeer", where)
            check(drv.cuCtxSynchronize(), "cuCtxSynchronize", where)
    else:
        sdev = getattr(stream, "device", dst.device)
        with on_device(sdev if isinstance(sdev, int) else dst.device):
            check(drv.cuMemcpyPeerAsync(dst.ptr, dctx, src.ptr, sctx, n, stream_handle(stream)),
                  "cuMemcpyPeerAsync", where)


def pointer_device(ptr) -> int:
    """The ordinal of the device whose context allocated `ptr` (an int or a buffer); for
    host-pinned memory, the device it was allocated through.

    Read through CU_POINTER_ATTRIBUTE_CONTEXT (matched against each device's primary context):
    some cuda.bindings releases read CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL back as 0 whatever the
    device (NVIDIA/cuda-python#2928), so that attribute is only the fallback, for memory of
    another context or none (virtual memory management allocations)."""
    drv = driver()
    addr = int(getattr(ptr, "ptr", ptr))
    attr = drv.CUpointer_attribute
    err, ctx = drv.cuPointerGetAttribute(attr.CU_POINTER_ATTRIBUTE_CONTEXT, addr)
    if int(err) == 0 and ctx is not None and int(ctx):
        for d in range(device_count()):
            if int(primary_context(d)) == int(ctx):
                return d
    return int(check(drv.cuPointerGetAttribute(attr.CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, addr),
                     "cuPointerGetAttribute", f"address 0x{addr:x}"))


class HostBuffer(Owned):
    """Page-locked host memory mapped into the address space of every device
    (cuMemHostAlloc with DEVICEMAP | PORTABLE): kernels on any GPU read and write it through
    `.ptr`, the host through `.array` (a numpy view, valid until `free()`).

    Passing it where a pointer is expected passes `.ptr`. GPU writes reach the host (and the
    other GPUs) over PCIe/C2C: fine for flags, tensor maps and other small shared state.
    """

    def __init__(self, nbytes: int, *, dtype=np.uint8, shape=None, device: int = 0,
                 write_combined: bool = False):
        dtype = buffer_dtype(dtype, "HostBuffer")
        device = checked_ordinal(device)
        nbytes, shape = buffer_layout("HostBuffer", nbytes, dtype, shape)
        if int(np.prod(shape)) * dtype.itemsize > nbytes:
            raise ValueError(f"shape {shape} of {dtype} needs more than {nbytes} bytes")
        drv = driver()
        self.nbytes, self.dtype, self.shape, self.device = int(nbytes), dtype, shape, device
        flags = int(drv.CU_MEMHOSTALLOC_DEVICEMAP) | int(drv.CU_MEMHOSTALLOC_PORTABLE)
        if write_combined:
            flags |= int(drv.CU_MEMHOSTALLOC_WRITECOMBINED)
        with on_device(device):
            host = int(check(drv.cuMemHostAlloc(max(self.nbytes, 1), flags),
                             "cuMemHostAlloc", f"allocating {self.nbytes} pinned bytes"))
            self._host: int | None = host
            self._dev: dict[int, int] = {}
            self.ptr = self.device_ptr(device)
            raw = (ctypes.c_uint8 * max(self.nbytes, 1)).from_address(host)
            self.array = np.frombuffer(memoryview(raw), np.uint8, self.nbytes).view(dtype)[
                :int(np.prod(shape))].reshape(shape)

    @classmethod
    def zeros(cls, shape: int | tuple[int, ...] | list[int], dtype: DTypeLike = np.uint8,
              **kwargs: Any) -> HostBuffer:
        """`HostBuffer(...)` of `shape` and `dtype`, set to zero bytes (keywords as the
        constructor's)."""
        dt = buffer_dtype(dtype, "HostBuffer.zeros")
        shape = buffer_layout("HostBuffer.zeros", 0, dt, shape)[1]     # (int(1.5),) was (1,)
        buf = cls(int(np.prod(shape)) * dt.itemsize, dtype=dtype, shape=shape, **kwargs)
        buf.array[...] = 0
        return buf

    def device_ptr(self, device: int) -> int:
        """The address kernels on `device` use (cuMemHostGetDevicePointer in its context; with
        unified addressing the same on every device)."""
        if self._host is None:
            raise ValueError("HostBuffer was freed")
        if device not in self._dev:
            with on_device(device):
                self._dev[device] = int(check(driver().cuMemHostGetDevicePointer(self._host, 0),
                                              "cuMemHostGetDevicePointer", f"device {device}"))
        return self._dev[device]

    @property
    def host_ptr(self) -> int | None:
        """The host address (None once freed)."""
        return self._host

    def free(self) -> None:
        if getattr(self, "_host", None) is not None:
            self.array = None
            with on_device(self.device):
                check(driver().cuMemFreeHost(self._host), "cuMemFreeHost")
                self._host = None

    def __repr__(self) -> str:
        where = f"0x{self._host:x}" if self._host is not None else "freed"
        return f"HostBuffer({self.nbytes} pinned bytes, {self.dtype}, shape={self.shape}, {where})"


_skip: dict[tuple[int, bool], str | None] = {}


def multi_gpu_skip_reason(count: int = 2, *, peer: bool = True) -> str | None:
    """None when devices 0..count-1 are Hopper GPUs (and, with `peer`, each can access every
    other's memory); otherwise why a multi-GPU test cannot run here. Computed once."""
    key = (count, peer)
    if key in _skip:
        return _skip[key]
    from ptxdsl.runtime import gpu_skip_reason
    reason = gpu_skip_reason()
    if reason is None:
        try:
            n = device_count()
            if n < count:
                reason = f"{n} CUDA device{'s' if n != 1 else ''} visible; this needs {count}"
            for d in range(count if reason is None else 0):
                cc = device_info(d).compute_capability
                if cc[0] != 9:
                    reason = (f"device {d} is {device_info(d).name} (compute capability "
                              f"{cc[0]}.{cc[1]}); this needs Hopper GPUs")
                    break
            if reason is None and peer:
                missing = [(a, b) for a in range(count) for b in range(count)
                           if a != b and not can_access_peer(a, b)]
                if missing:
                    reason = f"no peer access between devices {missing} (cuDeviceCanAccessPeer)"
        except Exception as exc:  # any driver failure means: cannot run
            reason = f"CUDA devices unusable ({type(exc).__name__}: {exc})"
    _skip[key] = reason
    return reason
