"""The one place that imports `cuda.bindings.driver`, lazily, and turns CUresults into errors.

Nothing here runs at import time, so `import ptxdsl` works on a machine without a driver.
"""

from __future__ import annotations

import threading

from ptxdsl.runtime.errors import DriverError, NoDriverError

_lock = threading.Lock()
_driver = None
_init_error: str | None = None


def _import_driver():
    from cuda.bindings import driver as drv
    return drv


def _load():
    global _driver, _init_error
    try:
        drv = _import_driver()
    except ImportError as exc:
        _init_error = f"cuda.bindings is not installed ({exc})"
        return
    try:
        (err,) = drv.cuInit(0)
    # cuda.pathfinder raises DynamicLibNotFoundError (a RuntimeError) when libcuda.so is absent;
    # other versions raise OSError or RuntimeError: any failure here means "no usable driver".
    except Exception as exc:
        _init_error = f"no CUDA driver ({type(exc).__name__}: {exc})"
        return
    if int(err) != 0:
        _init_error = f"cuInit failed: {_name(drv, err)}"
        return
    _driver = drv


def driver():
    """The initialised `cuda.bindings.driver` module (cuInit(0) done once)."""
    if _driver is not None:
        return _driver
    with _lock:
        if _driver is None and _init_error is None:
            _load()
    if _driver is None:
        raise NoDriverError(_init_error or "CUDA driver unavailable")
    return _driver


def init_error() -> str | None:
    """Why the driver cannot be used, or None when it can (initialises it)."""
    try:
        driver()
    except NoDriverError:
        return _init_error
    return None


def _name(drv, err) -> str:
    try:
        e, name = drv.cuGetErrorName(err)
        if int(e) == 0 and name:
            return name.decode() if isinstance(name, bytes) else str(name)
    except Exception:  # noqa: S110 - a name lookup failure must not hide the real error
        pass
    return getattr(err, "name", str(err))


def _description(drv, err) -> str:
    try:
        e, text = drv.cuGetErrorString(err)
        if int(e) == 0 and text:
            return text.decode() if isinstance(text, bytes) else str(text)
    except Exception:  # noqa: S110
        pass
    return ""


def error_for(call: str, err, context: str = "") -> DriverError:
    """A DriverError for CUresult `err`, with the driver's name and text when it can give them."""
    drv = _driver
    if drv is None:
        return DriverError(call, int(err), getattr(err, "name", str(err)), "", context)
    return DriverError(call, int(err), _name(drv, err), _description(drv, err), context)


def check(result, call: str, context: str = ""):
    """Unpack a cuda.bindings result tuple `(CUresult, *values)`; raise DriverError on failure.

    Returns None, the single value, or a tuple of values.
    """
    err = result[0]
    if int(err) != 0:
        raise error_for(call, err, context)
    if len(result) == 1:
        return None
    if len(result) == 2:
        return result[1]
    return result[1:]


def driver_version() -> int:
    """cuDriverGetVersion: 1000*major + 10*minor (e.g. 13000 for CUDA 13.0)."""
    return int(check(driver().cuDriverGetVersion(), "cuDriverGetVersion"))
