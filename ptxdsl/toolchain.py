"""Offline assembly through nvJitLink (PTX -> cubin with no GPU), with ptxas errors mapped back
to the PTX line and the Python line that built it."""

from __future__ import annotations

import re
import threading

from .errors import AssemblyError, PtxdslError, SourceLoc
from .types import Target

_PTX_LINE = re.compile(r"line (\d+); (error|fatal|warning)\s*:\s*(.*)")
_lock = threading.Lock()  # nvJitLink handles are independent, but keep logs tidy


def _nvjitlink():
    try:
        from cuda.bindings import nvjitlink
    except ImportError as e:  # pragma: no cover - depends on the install
        raise PtxdslError("nvJitLink is not available: install cuda-python and "
                          f"nvidia-nvjitlink ({e})", SourceLoc("<toolchain>", 0)) from e
    return nvjitlink


def toolchain_version() -> str:
    """The nvJitLink version, e.g. '13.5' (part of the cubin cache key)."""
    major, minor = _nvjitlink().version()
    return f"{major}.{minor}"


def _log(nvjitlink, handle, which: str) -> str:
    size = getattr(nvjitlink, f"get_{which}_log_size")(handle)
    if not size:
        return ""
    buf = bytearray(size)
    getattr(nvjitlink, f"get_{which}_log")(handle, buf)
    return buf.rstrip(b"\0").decode(errors="replace")


def assemble(ptx: str, arch: str | Target, *, locate=None, options: tuple[str, ...] = ()
             ) -> bytes:
    """Assemble PTX text to a cubin for `arch` (e.g. 'sm_90a').

    On failure raises `AssemblyError` quoting ptxas, the offending PTX line, and (when `locate`
    maps PTX lines to Python locations) the Python file:line that built it.
    """
    nvjitlink = _nvjitlink()
    arch = str(Target.parse(arch))
    data = ptx.encode()
    handle = nvjitlink.create(1, [f"-arch={arch}", *options])
    try:
        try:
            nvjitlink.add_data(handle, nvjitlink.InputType.PTX, data, len(data), "ptxdsl.ptx")
            nvjitlink.complete(handle)
        except nvjitlink.nvJitLinkError as e:
            log = _log(nvjitlink, handle, "error") or str(e)
            raise _assembly_error(log, ptx, arch, locate) from None
        size = nvjitlink.get_linked_cubin_size(handle)
        cubin = bytearray(size)
        nvjitlink.get_linked_cubin(handle, cubin)
        return bytes(cubin)
    finally:
        nvjitlink.destroy(handle)


def _assembly_error(log: str, ptx: str, arch: str, locate) -> AssemblyError:
    lines = ptx.splitlines()
    m = next((m for m in map(_PTX_LINE.search, log.splitlines()) if m and m.group(2) != "warning"),
             None)
    if m is None:
        return AssemblyError(f"ptxas rejected the module for {arch}:\n{log.strip()}", log)
    n = int(m.group(1))
    text = lines[n - 1].strip() if 1 <= n <= len(lines) else "?"
    loc = locate(n) if locate is not None else None
    where = f"built at {loc}" if loc is not None else "no Python source recorded"
    msg = (f"ptxas rejected PTX line {n} for {arch}: {m.group(3).strip()}\n"
           f"    {text}\n    ({where})")
    return AssemblyError(msg, log, n, text, loc)


def assemble_module(module, arch: str | Target | None = None) -> bytes:
    """Emit and assemble a `Module`; errors point at the Python line of the bad instruction."""
    ptx = module.emit()
    return assemble(ptx, arch or module.target, locate=module.locate)
