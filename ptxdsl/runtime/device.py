"""Devices and contexts: the primary context of each device, retained once and kept.

ptxdsl uses the same primary context as the CUDA runtime (PyTorch, CuPy), so memory and
streams move freely between them. Every entry point that works on device n runs its driver
calls inside `on_device(n)`: n's primary context is current for the call, and the context
that was current before (another device's, made current by PyTorch's `set_device`, say) is
current again after it, so the caller's current device is left alone. With no context
current before, n's stays current, as the CUDA runtime's first call leaves it. A launch
trusts the thread's record of the device ptxdsl last left current (a thread-local compare):
it switches, and switches back, only when that device is not the kernel's. `use_device(n)`
makes n's context current and leaves it so, for a caller that asks for that.
"""

from __future__ import annotations

import threading
from typing import Any

import attrs

from ptxdsl.operands import _show, as_int
from ptxdsl.runtime._driver import check, driver, driver_version
from ptxdsl.runtime.errors import DeviceOrdinalError

_lock = threading.Lock()
_contexts: dict[int, Any] = {}      # device -> its primary CUcontext
_infos: dict[int, DeviceInfo] = {}


class _ThreadState(threading.local):
    # The device whose primary context ptxdsl last made current on this thread. A class
    # default, so the launch's hot path reads it as a plain attribute (no getattr default).
    device: int | None = None


_tls = _ThreadState()


def device_ordinal(device) -> int:
    """A device ordinal from an int, a cuda.core `Device` (`.device_id`) or a torch.device
    (`.index`; 'cuda' alone is device 0); anything else is returned as given, for the caller's
    own check to refuse."""
    if type(device) is int:
        return device
    ordinal = getattr(device, "device_id", None)
    if isinstance(ordinal, int):
        return ordinal
    if getattr(device, "type", None) == "cuda":
        index = getattr(device, "index", None)
        return 0 if index is None else int(index)
    return device


def checked_ordinal(device: Any) -> int:
    """`device_ordinal`, refusing what names no device before the driver sees it: True would
    be device 1 (and find its cached context), a float or a string fail deep in a driver
    call. A numpy integer is taken."""
    n = as_int(device_ordinal(device))
    if n is None or n < 0:
        raise DeviceOrdinalError(f"device: expected a device ordinal (an int 0 or more, a "
                                 f"cuda.core Device or a torch.device), got {_show(device)}")
    return n


def primary_context(device: int = 0):
    """cuDevicePrimaryCtxRetain, once per device for the life of the process."""
    if type(device) is not int or device < 0:
        device = checked_ordinal(device)
    ctx = _contexts.get(device)
    if ctx is not None:
        return ctx
    drv = driver()
    with _lock:
        ctx = _contexts.get(device)
        if ctx is None:
            count = check(drv.cuDeviceGetCount(), "cuDeviceGetCount")
            if not device < count:
                raise DeviceOrdinalError(f"device {device} does not exist ({count} CUDA device"
                                         f"{'s' if count != 1 else ''} visible)")
            dev = check(drv.cuDeviceGet(device), "cuDeviceGet")
            ctx = check(drv.cuDevicePrimaryCtxRetain(dev), "cuDevicePrimaryCtxRetain",
                        f"device {device}")
            _contexts[device] = ctx
    return ctx


def use_device(device: int = 0):
    """Make `device`'s primary context current on this thread; return the context.

    The thread's record of the device ptxdsl last made current is checked against the
    driver's current context: another library (`torch.cuda.set_device`, CuPy's `Device.use`)
    may have made another context current since."""
    if _tls.device == device:
        ctx = _contexts[device]
        if int(check(driver().cuCtxGetCurrent(), "cuCtxGetCurrent")) == int(ctx):
            return ctx
    ctx = primary_context(device)
    check(driver().cuCtxSetCurrent(ctx), "cuCtxSetCurrent", f"device {device}")
    _tls.device = device
    return ctx


def _handle(ctx: Any) -> int:
    return 0 if ctx is None else int(ctx)


def enter_device(device: int) -> Any:
    """Make `device`'s primary context current (`on_device`); return the context that was
    current when it was another one, to give back with `leave_device`, else None."""
    ctx = primary_context(device)
    current = check(driver().cuCtxGetCurrent(), "cuCtxGetCurrent")
    if _handle(current) != int(ctx):
        check(driver().cuCtxSetCurrent(ctx), "cuCtxSetCurrent", f"device {device}")
    _tls.device = device
    return current if _handle(current) not in (0, int(ctx)) else None


def leave_device(saved: Any) -> None:
    """Make `saved` (`enter_device`'s answer) current again; the thread's record follows it
    (None for a context that is no device's primary one of ptxdsl's)."""
    check(driver().cuCtxSetCurrent(saved), "cuCtxSetCurrent")
    _tls.device = next((d for d, c in _contexts.items() if int(c) == int(saved)), None)


class on_device:     # noqa: N801 (used as a function: `with on_device(n):`)
    """`with on_device(n):` device n's primary context is current inside the block; after
    it, the context that was current before is again (see the module's text)."""

    __slots__ = ("device", "_saved")

    def __init__(self, device: int = 0):
        self.device = device if type(device) is int and device >= 0 else checked_ordinal(device)
        self._saved: Any = None

    def __enter__(self) -> Any:
        self._saved = enter_device(self.device)
        return _contexts[self.device]

    def __exit__(self, *exc: object) -> None:
        if self._saved is not None:
            leave_device(self._saved)


@attrs.frozen
class DeviceInfo:
    """What ptxdsl needs to know about a device (cuDeviceGetAttribute / cuDeviceGetName)."""

    ordinal: int
    name: str
    compute_capability: tuple[int, int]
    sm_count: int
    max_threads_per_block: int
    max_block_dim: tuple[int, int, int]
    max_grid_dim: tuple[int, int, int]
    max_shared_per_block: int
    max_shared_per_block_optin: int
    max_shared_per_sm: int
    total_memory: int
    l2_cache_bytes: int
    warp_size: int
    cluster_launch: bool
    driver_version: int

    @property
    def arch(self) -> str:
        """'sm_90' for compute capability 9.0."""
        return f"sm_{self.compute_capability[0]}{self.compute_capability[1]}"

    def __str__(self) -> str:
        cc = self.compute_capability
        return (f"device {self.ordinal}: {self.name} (compute capability {cc[0]}.{cc[1]}, "
                f"{self.sm_count} SMs, {self.total_memory >> 20} MiB)")


def device_info(device: int = 0) -> DeviceInfo:
    """Properties of `device`, read once and cached."""
    if type(device) is not int or device < 0:
        device = checked_ordinal(device)
    info = _infos.get(device)
    if info is not None:
        return info
    drv = driver()
    primary_context(device)
    dev = check(drv.cuDeviceGet(device), "cuDeviceGet")
    A = drv.CUdevice_attribute

    def attr(name: str) -> int:
        return int(check(drv.cuDeviceGetAttribute(getattr(A, name), dev),
                         f"cuDeviceGetAttribute({name})"))

    raw = check(drv.cuDeviceGetName(256, dev), "cuDeviceGetName")
    name = raw.split(b"\0", 1)[0].decode(errors="replace") if isinstance(raw, bytes) else raw
    p = "CU_DEVICE_ATTRIBUTE_"
    info = DeviceInfo(
        ordinal=device, name=name,
        compute_capability=(attr(p + "COMPUTE_CAPABILITY_MAJOR"),
                            attr(p + "COMPUTE_CAPABILITY_MINOR")),
        sm_count=attr(p + "MULTIPROCESSOR_COUNT"),
        max_threads_per_block=attr(p + "MAX_THREADS_PER_BLOCK"),
        max_block_dim=(attr(p + "MAX_BLOCK_DIM_X"), attr(p + "MAX_BLOCK_DIM_Y"),
                       attr(p + "MAX_BLOCK_DIM_Z")),
        max_grid_dim=(attr(p + "MAX_GRID_DIM_X"), attr(p + "MAX_GRID_DIM_Y"),
                      attr(p + "MAX_GRID_DIM_Z")),
        max_shared_per_block=attr(p + "MAX_SHARED_MEMORY_PER_BLOCK"),
        max_shared_per_block_optin=attr(p + "MAX_SHARED_MEMORY_PER_BLOCK_OPTIN"),
        max_shared_per_sm=attr(p + "MAX_SHARED_MEMORY_PER_MULTIPROCESSOR"),
        total_memory=int(check(drv.cuDeviceTotalMem(dev), "cuDeviceTotalMem")),
        l2_cache_bytes=attr(p + "L2_CACHE_SIZE"),
        warp_size=attr(p + "WARP_SIZE"),
        cluster_launch=bool(attr(p + "CLUSTER_LAUNCH")),
        driver_version=driver_version(),
    )
    _infos[device] = info
    return info


def device_count() -> int:
    """How many CUDA devices the driver sees (`cuDeviceGetCount`)."""
    return int(check(driver().cuDeviceGetCount(), "cuDeviceGetCount"))


def current_compute_capability() -> tuple[int, int] | None:
    """The compute capability of the device this thread uses (device 0 unless `use_device`
    chose another), or None where there is no usable driver or device. Never raises: callers
    use it to pick a default, and no GPU is a normal answer. Creates no context (an offline
    `Module.assemble()` should not allocate GPU memory): attributes need only cuInit."""
    from ptxdsl.runtime._driver import init_error
    ordinal = _tls.device or 0
    info = _infos.get(ordinal)
    if info is not None:
        return info.compute_capability
    try:
        if init_error() is not None or device_count() <= ordinal:
            return None
        drv = driver()
        dev = check(drv.cuDeviceGet(ordinal), "cuDeviceGet")
        A = drv.CUdevice_attribute
        major, minor = (int(check(drv.cuDeviceGetAttribute(getattr(A, a), dev), a)) for a in (
            "CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR",
            "CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR"))
        return major, minor
    except Exception:  # any driver failure means: no device to build for
        return None
