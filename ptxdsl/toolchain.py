"""Offline assembly through nvJitLink (PTX -> cubin with no GPU), with ptxas errors mapped back
to the PTX line and the Python line that built it, and ptxas's resource report and warnings
returned with the cubin (`Cubin.report`, see `assembly_report`)."""

from __future__ import annotations

import functools
import logging
import os
import re
import shutil
import subprocess
import tempfile
import threading
import warnings
from pathlib import Path

import attrs

from .assembly_report import (
    SETMAXNREG_DROPPED,
    AssemblyReport,
    Cubin,
    PtxdslAssemblerWarning,
    parse_info_log,
    warn_about,
)
from .errors import AssemblyError, BuildError, PtxdslError, SourceLoc, user_loc
from .operands import _show
from .types import Target

_PTX_LINE = re.compile(r"line (\d+); (error|fatal|warning)\s*:\s*(.*)")
_UNKNOWN_PTXAS_OPTION = re.compile(r"ptxas fatal\s*:\s*Unknown option '([^']*)'")
_SETMAXNREG = re.compile(r"^\s*(?:@!?%\w+\s+)?setmaxnreg\.", re.M)
# ptxas -v: registers, spills, stack and shared use per kernel in the info log. Always on:
# it costs nothing measurable and the report is how spills stop being invisible.
VERBOSE = "-Xptxas=-v"
_lock = threading.Lock()  # nvJitLink handles are independent, but keep logs tidy
log = logging.getLogger("ptxdsl.toolchain")


# The oldest nvJitLink that assembles every golden (docs/CONTRIBUTING.md, "Dependency floors":
# 13.0 segfaults on a wgmma golden, 13.1 hits a ptxas internal error). pip keeps the installed
# package at or above it, but cuda.bindings uses whatever libnvJitLink the process loaded first
# (a CUDA 12 build of torch imported before ptxdsl's first assembly brings its own 12.x), and
# environments pin their own (a torch 2.11 CUDA 13 environment has 13.0.88). Older ones assemble
# most kernels correctly, so they are used, with one warning that says what to expect.
NVJITLINK_MIN = (13, 2)
_version_checked: list[bool] = []


def _nvjitlink():
    try:
        from cuda.bindings import nvjitlink
    except ImportError as e:  # pragma: no cover - depends on the install
        raise PtxdslError("nvJitLink is not available: install cuda-python and "
                          f"nvidia-nvjitlink ({e})", SourceLoc("<toolchain>", 0)) from e
    if not _version_checked:
        _version_checked.append(True)
        got = tuple(nvjitlink.version())
        if got < NVJITLINK_MIN:
            need = ".".join(map(str, NVJITLINK_MIN))
            whose = ("another library loaded its own libnvJitLink first (a CUDA 12 build of "
                     "torch does on import; use a CUDA 13 build, PyPI's torch>=2.13, or have "
                     "ptxdsl assemble before that import)" if got[0] < 13 else
                     f"upgrade it: pip install 'nvidia-nvjitlink>={need},<14'")
            loc = user_loc()
            warnings.warn_explicit(
                f"nvJitLink {'.'.join(map(str, got))} is the one loaded in this process, older "
                f"than the {need} ptxdsl is tested with: 13.0 crashes the process on some "
                "wgmma forms and 13.1 fails on them with a ptxas internal error (C7907); "
                f"{whose}", PtxdslAssemblerWarning, loc.file, loc.line)
    return nvjitlink


def toolchain_version() -> str:
    """The nvJitLink version, e.g. '13.5' (part of the cubin cache key)."""
    major, minor = _nvjitlink().version()
    return f"{major}.{minor}"


def toolchain_identity() -> str:
    """What built a cached cubin: nvJitLink's version and the installed packages' versions
    (nvJitLink reports only major.minor; a patch release of the library or of cuda-bindings
    can change the cubin, so the cache key carries those too)."""
    return "; ".join([f"nvJitLink {toolchain_version()}", *_package_versions()])


@functools.cache
def _package_versions() -> tuple[str, ...]:
    """The packages' versions, read once: the libraries this process loaded cannot change
    under it, and reading the metadata costs about 1.5 ms, more than a whole cache-hit load
    (BENCHMARKS.md section 2)."""
    from importlib import metadata
    parts = []
    for dist in ("nvidia-nvjitlink", "nvidia-nvjitlink-cu12", "cuda-bindings"):
        try:
            parts.append(f"{dist} {metadata.version(dist)}")
        except metadata.PackageNotFoundError:
            continue
    return tuple(parts)


def uses_setmaxnreg(ptx: str) -> bool:
    """Whether PTX text contains a setmaxnreg instruction (which nvJitLink drops: README)."""
    return _SETMAXNREG.search(ptx) is not None


def _log(nvjitlink, handle, which: str) -> str:
    size = getattr(nvjitlink, f"get_{which}_log_size")(handle)
    if not size:
        return ""
    buf = bytearray(size)
    getattr(nvjitlink, f"get_{which}_log")(handle, buf)
    return buf.rstrip(b"\0").decode(errors="replace")


def _options(options) -> list[str]:
    if isinstance(options, str):   # one option, not a sequence of one-letter options
        options = (options,)
    opts = list(options)
    bad = [o for o in opts if not isinstance(o, str) or not o.startswith("-") or "\0" in o]
    if bad:
        raise AssemblyError(f"nvJitLink options must be strings starting with '-', got "
                            f"{bad[0]!r}", "", loc=user_loc())
    return opts


def _create(nvjitlink, arch: str, opts: list[str]):
    try:
        return nvjitlink.create(len(opts) + 2, [f"-arch={arch}", VERBOSE, *opts])
    except nvjitlink.nvJitLinkError as e:
        # nvJitLink says only ERROR_UNRECOGNIZED_OPTION; try each alone to name the culprit.
        culprit = None
        for o in opts:
            try:
                nvjitlink.destroy(nvjitlink.create(2, [f"-arch={arch}", o]))
            except nvjitlink.nvJitLinkError:
                culprit = o
                break
        what = f"option {culprit!r}" if culprit else f"options {opts!r} (for -arch={arch})"
        raise AssemblyError(f"nvJitLink refused {what}: {e}; nvJitLink options are listed in "
                            "its documentation, ptxas options go through -Xptxas=...",
                            str(e), loc=user_loc()) from None


# The suffixed targets ptxas knows (nvJitLink 13.x: 'a' from sm_90, 'f' from sm_100; sm_101 is
# sm_110 from CUDA 13 on, so its ptxas refuses sm_101*, which older ones know).
_SUFFIX_FROM = {"a": 90, "f": 100}


def known_target(text) -> Target:
    """`Target.parse`, refusing a suffix the chip has no variant for (sm_89a, sm_90f): ptxas
    knows neither, and would fail only at assembly, far from the line that named it."""
    if not isinstance(text, str | Target):
        raise TypeError(f"expected a target name such as 'sm_90a', got {_show(text)}")
    t = Target.parse(text)
    low = _SUFFIX_FROM.get(t.suffix)
    if low is not None and t.sm < low:
        raise ValueError(f"unknown PTX target {str(t)!r}: the '{t.suffix}' variant exists "
                         f"from sm_{low} on (sm_90a, sm_100a, sm_100f, sm_120a, ...); for "
                         f"this chip write 'sm_{t.sm}'")
    return t


def assemble(ptx: str, arch: str | Target, *, locate=None, options=(), warn: bool = True,
             arch_reason: str = "") -> Cubin:
    """Assemble PTX text to a cubin for `arch` (e.g. 'sm_90a').

    `options` are nvJitLink options, every one passed on (e.g. `-maxrregcount=64`,
    `-Xptxas=-warn-spills`, `-lineinfo`); an option nvJitLink or ptxas does not know raises
    `AssemblyError` naming it. The result is a `Cubin` (a bytes subclass) whose `.report`
    holds each kernel's registers, spills, stack frame and shared memory, and every ptxas
    warning; with `warn` (default) each warning is also a `PtxdslAssemblerWarning` naming
    the Python line that built the PTX line it blames.

    On failure raises `AssemblyError` quoting ptxas, the offending PTX line, and (when `locate`
    maps PTX lines to Python locations) the Python `file:line` that built it.
    """
    try:
        arch = str(known_target(arch))
    except (ValueError, TypeError) as e:   # e.g. sm_89a: ptxas would only say "fatal"
        raise BuildError(f"assemble: {e}") from None
    nvjitlink = _nvjitlink()
    opts = _options(options)
    data = ptx.encode()
    handle = _create(nvjitlink, arch, opts)
    try:
        try:
            nvjitlink.add_data(handle, nvjitlink.InputType.PTX, data, len(data), "ptxdsl.ptx")
            nvjitlink.complete(handle)
        except nvjitlink.nvJitLinkError as e:
            err = _log(nvjitlink, handle, "error") or str(e)
            raise _assembly_error(err, ptx, arch, locate) from None
        size = nvjitlink.get_linked_cubin_size(handle)
        cubin = bytearray(size)
        nvjitlink.get_linked_cubin(handle, cubin)
        info = _log(nvjitlink, handle, "info")
    finally:
        nvjitlink.destroy(handle)
    log.debug("nvJitLink %s %s: %d-byte cubin; info log:\n%s", arch, " ".join(opts),
              len(cubin), info.strip())
    report = parse_info_log(info, arch, ptx, locate, arch_reason, bytes(cubin))
    if warn:
        warn_about(report, user_loc())
    return Cubin(bytes(cubin), report)


def _assembly_error(log: str, ptx: str, arch: str, locate) -> AssemblyError:
    unknown = _UNKNOWN_PTXAS_OPTION.search(log)
    if unknown is not None:
        return AssemblyError(f"ptxas does not know option '{unknown.group(1)}' (given through "
                             f"-Xptxas=...):\n{log.strip()}", log, loc=user_loc())
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


def package_binary(name: str) -> str | None:
    """A CUDA tool from NVIDIA's pip packages (`nvidia-cuda-nvcc` installs ptxas,
    `nvidia-cuda-nvdisasm` nvdisasm, under site-packages/nvidia/cu<N>/bin), the newest CUDA's
    where several are installed."""
    import importlib.util
    spec = importlib.util.find_spec("nvidia")
    found = [p for root in ((spec.submodule_search_locations or ()) if spec is not None else ())
             for p in Path(root).glob(f"*/bin/{name}") if os.access(p, os.X_OK)]
    def cuda_major(p: Path) -> int:   # the cu<N> folder
        return int(re.sub(r"\D", "", p.parent.parent.name) or 0)

    return str(max(found, key=cuda_major)) if found else None


def ptxas_path() -> str | None:
    """The standalone ptxas for the whole-program report of a module using setmaxnreg: the
    `nvidia-cuda-nvcc` package's (pip keeps it in step with nvJitLink), else one on PATH."""
    return package_binary("ptxas") or shutil.which("ptxas")


@functools.cache
def _ptxas_name(path: str) -> str:
    try:
        out = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return f"ptxas ({path})"
    m = re.search(r"\bV(\d+(?:\.\d+)+)", out.stdout)
    return f"ptxas {m.group(1) if m else '(unknown version)'} ({path})"


# nvJitLink options that have a ptxas spelling; the others (LTO's -ftz, -kernels-used, ...)
# change what nvJitLink does before ptxas, which a ptxas run cannot repeat.
_PTXAS_SAME = re.compile(r"-(?:maxrregcount=\d+|O\d|g|lineinfo)$")
PTXAS_TIMEOUT_S = 600


def _ptxas_options(options) -> list[str] | str:
    """The ptxas options for nvJitLink's `options`, or the first that has none."""
    out = []
    for o in _options(options):
        if o.startswith("-Xptxas="):
            out.append(o[len("-Xptxas="):])
        elif _PTXAS_SAME.match(o):
            out.append(o)
        else:
            return o
    return out


def whole_program_report(ptx: str, linked: AssemblyReport, *, locate=None,
                         options=()) -> AssemblyReport:
    """The report of a module whose setmaxnreg nvJitLink dropped (`linked`, its report): the
    figures of a whole-program `ptxas -arch=...` build (not `-c`), which keeps setmaxnreg as
    the driver JIT does, so they describe the code `Module.load()` runs; `linked` rides along.
    Without a ptxas to run (or one that cannot build the module), `linked` with a caveat that
    says its figures are artefacts of the drop, and why no whole-program build was made."""
    def caveat(why: str) -> AssemblyReport:
        return attrs.evolve(linked, caveat=f"{linked.caveat} ({why})")

    path = ptxas_path()
    if path is None:
        return caveat("no standalone ptxas for the figures of the code that runs: pip install "
                      "nvidia-cuda-nvcc")
    flags = _ptxas_options(options)
    if isinstance(flags, str):
        return caveat(f"no whole-program build: nvJitLink option {flags!r} has no ptxas "
                      "equivalent")
    name = _ptxas_name(path)
    with tempfile.TemporaryDirectory(prefix="ptxdsl-ptxas-") as tmp:
        src, out = Path(tmp, "module.ptx"), Path(tmp, "module.cubin")
        src.write_text(ptx)
        try:
            done = subprocess.run([path, f"-arch={linked.arch}", "-v", *flags, str(src), "-o",
                                   str(out)], capture_output=True, text=True,
                                  timeout=PTXAS_TIMEOUT_S)
        except (OSError, subprocess.SubprocessError) as e:
            return caveat(f"{name} did not run: {e}")
        if done.returncode != 0:
            said = (done.stderr + done.stdout).strip().splitlines()
            first = next((ln for ln in said if "error" in ln or "fatal" in ln),
                         said[0] if said else f"exit code {done.returncode}")
            return caveat(f"{name} could not build it whole: {first.strip()}")
        image = out.read_bytes()
    log.debug("%s whole program, %s: info log:\n%s", name, linked.arch, done.stderr.strip())
    report = parse_info_log(done.stderr + done.stdout, linked.arch, ptx, locate,
                            linked.arch_reason, image)
    # The cubin still lacks setmaxnreg: its advisory stays, with the whole-program warnings.
    dropped = tuple(w for w in linked.warnings if w.code == SETMAXNREG_DROPPED)
    return attrs.evolve(report, warnings=dropped + report.warnings, setmaxnreg_dropped=True,
                        whole_program=name, linked=linked, caveat="")


def assemble_module(module, arch: str | Target, *, options=(), warn: bool = True,
                    arch_reason: str = "asked for", loads: bool = True) -> Cubin:
    """Emit and assemble a `Module`; errors point at the Python line of the bad instruction.
    `arch_reason` says why `arch` was chosen (`Module.assemble` picks the GPU in use's arch when
    given none, `runtime.compat.build_arch`); `cubin.arch` and `cubin.report.arch_reason` say
    which target was built and why (also logged on the 'ptxdsl.toolchain' logger). `loads=False`
    (the cubin will not load on the GPU in use) warns. A module whose setmaxnreg nvJitLink
    drops gets the report of a whole-program ptxas build (`whole_program_report`)."""
    from .checker import emit_started, finishing
    # The hazard check runs in a worker thread while nvJitLink assembles without the GIL;
    # its warnings (or HazardError, strict) are given here, before the cubin is returned.
    ptx, finish_check = emit_started(module)
    cubin = finishing(finish_check, lambda: assemble(
        ptx, arch, locate=module.locate, options=options, warn=False, arch_reason=arch_reason))
    if cubin.report.setmaxnreg_dropped:
        # The cubin's figures describe code without setmaxnreg, which load() never runs.
        cubin = Cubin(bytes(cubin), whole_program_report(ptx, cubin.report,
                                                         locate=module.locate, options=options))
    if warn:
        warn_about(cubin.report, user_loc())
    log.info("assembled module %r for %s (%s)", getattr(module, "name", "?"), cubin.arch,
             arch_reason)
    if not loads:
        loc = user_loc()
        warnings.warn_explicit(f"cubin built for {cubin.arch}, {arch_reason}: pass arch= to build "
                               "for another GPU on purpose", PtxdslAssemblerWarning,
                               loc.file, loc.line)
    return cubin
