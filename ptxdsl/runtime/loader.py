"""Load a module into the driver (cuModuleLoadDataEx) as PTX for the JIT or as a cubin.

PTX path: the text goes to cuModuleLoadDataEx with JIT info/error log buffers and
CU_JIT_WALL_TIME. A JIT failure raises `JitError` with the log, the first PTX line the log
blames, that line's text, and the Python `file:line` that built it (`module.locate`).

Cubin path (`use_cubin=True`): the text is assembled by nvJitLink (`ptxdsl.toolchain.assemble`)
for this device's arch (`compat.build_arch`, the rule `Module.assemble()` also uses) through
the on-disk cache (`cache.py`) and the cubin is loaded. Except for a module that uses
setmaxnreg: nvJitLink (like the driver's cuLink* linker) assembles its input as a separately
linkable unit and drops setmaxnreg there (ptxas advisory C7504), while the driver JIT of the
PTX text compiles it as a whole program and keeps it, so such a module always takes the
driver JIT (with a `PtxdslAssemblerWarning` when `use_cubin=True` asked otherwise).

The JIT runs verbose: `LoadedModule.report` holds ptxas's per-kernel registers, spills and
shared memory, and its warnings become `PtxdslAssemblerWarning` warnings naming the Python line.

Either way the module's `.version` and `.target` are first checked against the driver and
the device (`compat.py`), so a mismatch says what to change instead of failing in the JIT.

`load_object_code` takes code made elsewhere, a cuda.core `ObjectCode` (`Program.compile`,
`ObjectCode.from_cubin`, `Module.to_cuda_core`): PTX goes the PTX path above; a cubin or
fatbin is loaded as it is, with its kernels' parameters read from the PTX it was built from
(a cubin holds only their sizes, and packing a Python float as a 4-byte integer would be
silently wrong).
"""

from __future__ import annotations

import logging
import os
import re
import time
import warnings
from collections.abc import Callable

from ptxdsl.assembly_report import PtxdslAssemblerWarning, parse_info_log, warn_about
from ptxdsl.errors import SourceLoc, user_loc
from ptxdsl.runtime._driver import check, driver, error_for
from ptxdsl.runtime.cache import cached_assemble
from ptxdsl.runtime.compat import build_arch, check_module_compat, cubin_arch
from ptxdsl.runtime.device import checked_ordinal, device_info, on_device
from ptxdsl.runtime.errors import JitError, KernelNotFoundError, ObjectCodeError
from ptxdsl.runtime.launch import Function
from ptxdsl.runtime.ptx_params import parse_entries, parse_target, parse_version

_LOG_BYTES = 1 << 16
log = logging.getLogger(__name__)
# ptxas (driver JIT and nvJitLink alike): "ptxas application ptx input, line 42; error   : ..."
_LOC = re.compile(r"^\s*\.loc\s", re.M)
_LOG_LINE = re.compile(r"line (\d+); (error|warning)\s*:\s*(.*)")
_JIT_FAILURES = {"CUDA_ERROR_INVALID_PTX", "CUDA_ERROR_UNSUPPORTED_PTX_VERSION",
                 "CUDA_ERROR_INVALID_IMAGE", "CUDA_ERROR_NO_BINARY_FOR_GPU",
                 "CUDA_ERROR_JIT_COMPILER_NOT_FOUND", "CUDA_ERROR_SHARED_OBJECT_SYMBOL_NOT_FOUND"}


def parse_jit_log(log: str) -> list[tuple[int, str, str]]:
    """(ptx line, 'error'|'warning', message) for each line of a ptxas log that names one."""
    return [(int(m.group(1)), m.group(2), m.group(3).strip()) for m in _LOG_LINE.finditer(log)]


def jit_error(log: str, ptx: str, name: str, locate: Callable | None, result: str,
              info_log: str = "") -> JitError:
    """Build the JitError for a failed load: blame the first error line of the log."""
    entries = parse_jit_log(log)
    errors = [e for e in entries if e[1] == "error"] or entries
    line = errors[0][0] if errors else None
    detail = errors[0][2] if errors else (log.strip().splitlines() or [result])[0]
    lines = ptx.splitlines()
    text = lines[line - 1] if line is not None and 0 < line <= len(lines) else None
    loc = None
    if line is not None and locate is not None:
        try:
            loc = locate(line)
        except Exception:  # a locate bug must not hide the JIT error itself
            loc = None
    if loc is None:
        loc = SourceLoc(f"<ptx:{name}>", line or 0)
    where = f"PTX line {line}: `{text.strip()}`: " if text is not None else ""
    message = (f"the CUDA driver JIT rejected module '{name}' ({result}): {where}{detail}\n"
               f"--- JIT error log ---\n{log.rstrip()}")
    return JitError(message, log, line, text, loc, info_log, result)


class LoadedModule:
    """A module resident on a device. `mod["kernel"]` (or `.function`) gives a `Function`.

    `info_log` and `jit_wall_ms` come from the load (wall time measured around the call),
    `arch` is the cubin arch when a cubin was loaded (None: the driver JIT compiled the PTX),
    `cache_hit` says whether the cubin came from the cache (None when not cached), and
    `report` is ptxas's `AssemblyReport` (kernels' resources, warnings) when one was made
    (the driver JIT's log, or the nvJitLink build; None for a cubin from the cache).
    """

    report = None
    code_type: str | None = None   # set for a foreign ObjectCode: "ptx", "cubin" or "fatbin"

    def __init__(self, handle, device: int, ptx: str, kernels: dict, name: str, info_log: str,
                 jit_wall_ms: float, arch: str | None, cache_hit: bool | None, source=None):
        self.handle = handle
        self.device = device
        self.ptx = ptx
        self.kernels = kernels
        self.name = name
        self.info_log = info_log
        self.jit_wall_ms = jit_wall_ms
        self.arch = arch
        self.cache_hit = cache_hit
        self.source = source
        self._functions: dict[str, Function] = {}

    @property
    def names(self) -> tuple[str, ...]:
        """The names of the module's kernels (its `.entry` functions), in declaration order."""
        return tuple(self.kernels)

    def function(self, name: str) -> Function:
        """cuModuleGetFunction for `.entry name`, wrapped with its argument packer (cached)."""
        fn = self._functions.get(name)
        if fn is not None:
            return fn
        if self.handle is None:
            raise KernelNotFoundError(f"module '{self.name}' was unloaded")
        if name not in self.kernels:
            raise KernelNotFoundError(f"module '{self.name}' has no kernel '{name}'; it has: "
                                      f"{', '.join(self.kernels) or '(none)'}")
        with on_device(self.device):
            handle = check(driver().cuModuleGetFunction(self.handle, name.encode()),
                           "cuModuleGetFunction", f"kernel '{name}'")
            fn = Function(self, name, handle, self.kernels[name])
            self._functions[name] = fn
            return fn

    __getitem__ = function

    def preload(self) -> LoadedModule:
        """Resolve every kernel now (cuModuleGetFunction). With CUDA's lazy loading a kernel is
        loaded onto the device when first resolved, which can wait for kernels already running
        there: kernels meant to run at the same time (one waiting for the other) must be
        preloaded before the first is launched, or they may serialize or deadlock."""
        for name in self.kernels:
            self.function(name)
        return self

    def __contains__(self, name: str) -> bool:
        return name in self.kernels

    def unload(self) -> None:
        """Unload the module from its context (`cuModuleUnload`); its Functions can no longer be
        launched. Unloading twice does nothing."""
        if self.handle is not None:
            with on_device(self.device):
                check(driver().cuModuleUnload(self.handle), "cuModuleUnload")
                self.handle = None
                self._functions.clear()

    def __enter__(self) -> LoadedModule:
        return self

    def __exit__(self, *exc) -> None:
        self.unload()

    def __repr__(self) -> str:
        how = f"cubin {self.arch}" if self.arch else (
            f"cuda.core {self.code_type}" if self.code_type else "PTX JIT")
        return f"<LoadedModule '{self.name}' ({how}) kernels={list(self.kernels)}>"


def has_lineinfo(ptx: str) -> bool:
    """Whether PTX carries `.loc` line information (Module(..., lineinfo=True))."""
    return _LOC.search(ptx) is not None


def _cuda_load(image: bytes, ptx: str, name: str, locate) -> tuple[object, str, float]:
    drv = driver()
    opt = drv.CUjit_option
    info, err = bytearray(_LOG_BYTES), bytearray(_LOG_BYTES)
    # Verbose: the info log then carries ptxas's resource report (LoadedModule.report).
    opts = [opt.CU_JIT_INFO_LOG_BUFFER, opt.CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES,
            opt.CU_JIT_ERROR_LOG_BUFFER, opt.CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
            opt.CU_JIT_WALL_TIME, opt.CU_JIT_LOG_VERBOSE]
    vals = [info, _LOG_BYTES, err, _LOG_BYTES, 0.0, 1]
    if not image.startswith(b"\x7fELF") and has_lineinfo(ptx):
        # The JIT keeps the .loc line table only when asked (compute-sanitizer, cuda-gdb
        # and profilers then name the Python lines that built each instruction).
        opts.append(opt.CU_JIT_GENERATE_LINE_INFO)
        vals.append(1)
    t0 = time.perf_counter()
    result = drv.cuModuleLoadDataEx(image, len(opts), opts, vals)
    wall_ms = (time.perf_counter() - t0) * 1e3
    info_log = bytes(info).split(b"\0", 1)[0].decode(errors="replace")
    err_log = bytes(err).split(b"\0", 1)[0].decode(errors="replace")
    log.debug("cuModuleLoadDataEx %r (%s) %.2f ms; info log:\n%s", name,
              "cubin" if image.startswith(b"\x7fELF") else "PTX JIT", wall_ms, info_log.strip())
    code = result[0]
    if int(code) != 0:
        exc = error_for("cuModuleLoadDataEx", code, f"loading module '{name}'")
        if exc.name in _JIT_FAILURES or err_log.strip():
            raise jit_error(err_log, ptx, name, locate, exc.name, info_log) from exc
        raise exc
    return result[1], info_log, wall_ms


def _default_toolchain() -> tuple[Callable[[str, str], bytes], str]:
    try:
        from ptxdsl import toolchain
    except ImportError as exc:
        raise ImportError(f"use_cubin=True needs ptxdsl.toolchain (nvJitLink): {exc}") from exc
    return toolchain.assemble, toolchain.toolchain_identity()


def load_module(module_or_text, *, device: int = 0, use_cubin: bool = False, cache: bool = True,
                cache_dir=None, name: str | None = None, locate: Callable | None = None,
                assemble: Callable[[str, str], bytes] | None = None,
                toolchain_version: str | None = None, options=()) -> LoadedModule:
    """Load a ptxdsl Module (anything with emit()/kernels/version/target/locate) or raw PTX.

    `use_cubin`: assemble with nvJitLink for this device (cached on disk unless `cache=False`
    or PTXDSL_CACHE=0; `cache_dir` overrides the directory) instead of the driver JIT.
    `assemble`/`toolchain_version` replace ptxdsl.toolchain's (tests, other assemblers).
    `options`: nvJitLink options for `use_cubin` (e.g. `-maxrregcount=64`), part of the cache
    key.
    """
    from ptxdsl.checker import emit_started, finishing, nothing_pending
    device = checked_ordinal(device)
    finish_check: Callable[[], object] = nothing_pending   # raw PTX: nothing to check
    if isinstance(module_or_text, str):
        ptx, source = module_or_text, None
        kernels = parse_entries(ptx)
        version, target = parse_version(ptx), parse_target(ptx)
        name = name or "<ptx>"
    else:
        source = module_or_text
        # A ptxdsl Module's hazard check runs in a worker thread while nvJitLink assembles
        # (which releases the GIL); its warnings, or its HazardError, come before the load.
        if use_cubin:
            ptx, finish_check = emit_started(source)
        else:
            ptx = source.emit()
        kernels = {k.name: tuple(k.params) for k in source.kernels}
        version, target = source.version, source.target
        locate = locate or getattr(source, "locate", None)
        name = name or getattr(source, "name", None) or "+".join(kernels) or "<module>"
    with on_device(device):      # the module goes into the device's context
        image, arch, report, hit = finishing(finish_check, lambda: _image(
            ptx, target, version, device, name, use_cubin, cache, cache_dir, assemble,
            toolchain_version, options))
        handle, info_log, wall_ms = _cuda_load(image, ptx, name, locate)
    if arch is None:
        info = device_info(device)
        report = parse_info_log(info_log, cubin_arch(target, info.compute_capability), ptx,
                                locate, "driver JIT of the PTX for the GPU in use")
        warn_about(report, user_loc())
    loaded = LoadedModule(handle, device, ptx, kernels, name, info_log, wall_ms, arch, hit,
                          source)
    loaded.report = report
    return loaded


def _image(ptx, target, version, device, name, use_cubin, cache, cache_dir, assemble,
           toolchain_version, options):
    """What `load_module` hands the driver: (image, arch or None, assembly report, cache hit);
    a cubin from nvJitLink (`use_cubin`, cached), else the PTX for the driver's JIT."""
    info = device_info(device)
    check_module_compat(version, target, info.driver_version, info.compute_capability,
                        f"device {device} ({info.name})")
    arch, hit, report = None, None, None
    if use_cubin and _uses_setmaxnreg(ptx):
        use_cubin = False
        log.info("module %r uses setmaxnreg: loading it through the driver JIT instead of a "
                 "cubin", name)
        loc = user_loc()
        warnings.warn_explicit(
            f"module '{name}' uses setmaxnreg, which nvJitLink drops from a cubin; loading it "
            "through the driver JIT instead, which keeps it (use_cubin=True ignored)",
            PtxdslAssemblerWarning, loc.file, loc.line)
    if use_cubin:
        # The same rule as Module.assemble() without arch (so one cache entry serves both).
        arch = (build_arch(target, info.compute_capability)[0] if target is not None
                else cubin_arch(None, info.compute_capability))
        if assemble is None:
            assemble, tv = _default_toolchain()
            toolchain_version = toolchain_version or tv
        elif toolchain_version is None:
            toolchain_version = f"custom:{assemble.__module__}.{assemble.__qualname__}"
        image, hit = cached_assemble(ptx, arch, assemble, toolchain_version,
                                     info.driver_version, cache=cache, cache_dir=cache_dir,
                                     options=options)
        report = getattr(image, "report", None)
    else:
        image = ptx.encode() + b"\0"
    return image, arch, report, hit


def _uses_setmaxnreg(ptx: str) -> bool:
    from ptxdsl.toolchain import uses_setmaxnreg
    return uses_setmaxnreg(ptx)


def load_ptx(text: str, *, name: str = "<ptx>", **kwargs) -> LoadedModule:
    """Load raw PTX text; parameters are read from each `.entry` signature."""
    return load_module(text, name=name, **kwargs)


def load_on_devices(module_or_text, devices=None, **kwargs) -> dict[int, LoadedModule]:
    """Load the same module on each of `devices` (default: every visible device), one
    LoadedModule per device: a kernel runs on the device its module was loaded on (see
    `LoadedModule.preload` for kernels that must run concurrently)."""
    from ptxdsl.runtime.device import device_count
    devices = range(device_count()) if devices is None else devices
    return {d: load_module(module_or_text, device=d, **kwargs) for d in devices}


# What cuModuleLoadDataEx takes; LTO IR, relocatable objects and libraries must be linked first.
_LOADABLE = ("ptx", "cubin", "fatbin")


def load_object_code(obj, *, ptx=None, device: int = 0, name: str | None = None,
                     **kwargs) -> LoadedModule:
    """Load a cuda.core `ObjectCode` (`cuda.core.Program(...).compile("cubin")`,
    `ObjectCode.from_cubin(...)`, `Module.to_cuda_core()`) on `device`.

    PTX takes the path of `load_ptx` (its signatures are in the text; `kwargs` go to
    `load_module`, e.g. `use_cubin=True`). A cubin or fatbin is loaded as it is and needs
    `ptx=`: the PTX text (or ptxdsl Module) it was built from, whose `.entry` signatures say
    how each argument is packed and whose `.version`/`.target` are checked against the device.
    LTO IR, object code and libraries are refused: link them into a cubin first
    (`cuda.core.Linker`).
    """
    code_type = getattr(obj, "code_type", None)
    if not isinstance(code_type, str) or not hasattr(obj, "code"):
        raise ObjectCodeError(f"load_object_code: expected a cuda.core ObjectCode (with "
                              f"'code_type' and 'code'), got {type(obj).__name__}")
    name = name or getattr(obj, "name", None) or f"<cuda.core {code_type}>"
    if code_type not in _LOADABLE:
        raise ObjectCodeError(
            f"load_object_code: '{name}' is {code_type!r} code, which the driver does not "
            f"load; link it into a cubin first (cuda.core.Linker(...).link('cubin')) and load "
            f"that (loadable: {', '.join(_LOADABLE)})")
    image = _code_bytes(obj.code, name)
    if code_type == "ptx":
        loaded = load_module(_text(image, name, "PTX"), device=device, name=name, **kwargs)
        loaded.code_type = code_type
        return loaded
    if kwargs:
        raise ObjectCodeError(f"load_object_code: '{name}' is a {code_type}, loaded as it is: "
                              f"{', '.join(sorted(kwargs))} only apply to PTX")
    if ptx is None:
        raise ObjectCodeError(
            f"load_object_code: '{name}' is a {code_type}, which records its kernels' parameter "
            "sizes but not their types; pass ptx= (the PTX text or ptxdsl Module it was built "
            "from), or load the PTX itself (Program.compile('ptx'))")
    if code_type == "cubin" and not image.startswith(b"\x7fELF"):
        raise ObjectCodeError(f"load_object_code: '{name}' says 'cubin' but is not an ELF "
                              f"image (starts with {image[:4]!r})")
    source = None if isinstance(ptx, str) else ptx
    text = ptx if isinstance(ptx, str) else getattr(ptx, "emit", lambda: None)()
    if not isinstance(text, str):
        raise ObjectCodeError(f"load_object_code: ptx= must be PTX text or a ptxdsl Module, "
                              f"got {type(ptx).__name__}")
    device = checked_ordinal(device)
    with on_device(device):
        info = device_info(device)
        check_module_compat(parse_version(text), parse_target(text), info.driver_version,
                            info.compute_capability, f"device {device} ({info.name})")
        locate = getattr(source, "locate", None)
        handle, info_log, wall_ms = _cuda_load(image, text, name, locate)
        loaded = LoadedModule(handle, device, text, parse_entries(text), name, info_log, wall_ms,
                              None, None, source if source is not None else obj)
        loaded.code_type = code_type
        return loaded


def _code_bytes(code, name: str) -> bytes:
    """An ObjectCode's code: bytes in memory, or (cuda.core's reading of a str) a file path."""
    if isinstance(code, bytes | bytearray | memoryview):
        return bytes(code)
    if isinstance(code, str | os.PathLike):
        try:
            with open(code, "rb") as f:
                return f.read()
        except OSError as exc:
            raise ObjectCodeError(f"load_object_code: '{name}' names the file {str(code)!r} "
                                  f"(cuda.core reads a str code as a path), which cannot be "
                                  f"read: {exc.strerror or exc}") from exc
    raise ObjectCodeError(f"load_object_code: '{name}' holds code of type "
                          f"{type(code).__name__}; expected bytes or a file path")


def _text(image: bytes, name: str, what: str) -> str:
    try:
        return image.rstrip(b"\0").decode()
    except UnicodeDecodeError as exc:
        raise ObjectCodeError(f"load_object_code: '{name}' is not {what} text (not UTF-8 at "
                              f"byte {exc.start})") from exc
