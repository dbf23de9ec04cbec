"""What ptxas says about a module it assembled: per-kernel resources and its warnings.

nvJitLink runs ptxas with `-v` (ptxdsl always asks for it), and the info log then holds, per
function, lines like

::

    ptxas info    : Compiling entry function 'k' for 'sm_90a'
    ptxas info    : Function properties for k
    ptxas         .     416 bytes stack frame, 416 bytes spill stores, 416 bytes spill loads
    ptxas info    : Used 24 registers, used 1 barriers, 8200 bytes smem, 360 bytes cmem[0]

plus warnings (`... line 27; warning : Advisory: ...`) and performance advisories
(`ptxas info : (C7504) Potential Performance Loss: 'setmaxnreg' ignored ...`). The same format
comes back from the driver JIT's info log. `parse_info_log` turns it into an `AssemblyReport`;
`warn_about` turns its warnings into `PtxdslAssemblerWarning` warnings naming the Python line that
built the PTX line they blame.
"""

from __future__ import annotations

import re
import struct
import warnings
from collections.abc import Callable

import attrs

from .errors import SourceLoc

_FUNC = re.compile(r"(?:Compiling (?:entry )?function '([^']+)'|Function properties for (\S+))")
_FRAME = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_USED = re.compile(r"Used (\d+) registers")
_BARRIERS = re.compile(r"used (\d+) barriers")
_SMEM = re.compile(r"(\d+) bytes smem")
_CMEM = re.compile(r"(\d+) bytes cmem\[(\d+)\]")
_GMEM = re.compile(r"ptxas info\s*:\s*(\d+) bytes gmem")
_LINE_WARNING = re.compile(r"line (\d+); warning\s*:\s*(.*)")
_BARE_WARNING = re.compile(r"ptxas warning\s*:\s*(.*)")
_ADVISORY = re.compile(r"ptxas info\s*:\s*(\(C\d+\).*)")
_QUOTED = re.compile(r"'([a-z][a-z0-9_]*)'")
_ON_LINE = re.compile(r"on line '(\d+)'")

# ptxas's advisory when a linker (nvJitLink, cuLink*) assembles a module using setmaxnreg:
# it compiles every input as a separately linkable unit, where ptxas drops the instruction.
SETMAXNREG_DROPPED = "C7504"
# What the figures of such a build are worth: without setmaxnreg ptxas fits every warpgroup
# into the entry allocation, so it spills and serializes wgmma (C7512) where the driver JIT's
# code, which keeps setmaxnreg, does not.
ARTEFACT_CAVEAT = ("registers/spills/C7512 below come from a build without setmaxnreg; the "
                   "driver JIT keeps it")


class PtxdslAssemblerWarning(UserWarning):
    """A warning or performance advisory from ptxas (nvJitLink or the driver JIT)."""


@attrs.frozen
class KernelResources:
    """One function's resource use as ptxas reports it (`-v`); None where it said nothing."""

    name: str
    registers: int | None = None
    barriers: int | None = None
    stack_frame: int | None = None
    spill_stores: int | None = None
    spill_loads: int | None = None
    shared: int = 0
    const: dict = attrs.field(factory=dict)  # bank -> bytes (from the cubin: constant_banks)

    @property
    def spills(self) -> bool:
        return bool(self.spill_stores or self.spill_loads)


@attrs.frozen
class AssemblerMessage:
    """A ptxas warning or advisory: the PTX line it blames (if any) and that line's Python
    source (if the module recorded one)."""

    text: str
    ptx_line: int | None = None
    loc: SourceLoc | None = None
    code: str | None = None

    def __str__(self) -> str:
        where = f" (PTX line {self.ptx_line})" if self.ptx_line is not None else ""
        return f"ptxas{where}: {self.text}"


@attrs.frozen
class AssemblyReport:
    """What one assembly produced besides the code: the target it was built for, how that was
    chosen, the raw info log, each kernel's resources and every ptxas warning."""

    arch: str
    log: str = ""
    kernels: dict = attrs.field(factory=dict)   # name -> KernelResources
    warnings: tuple = ()                        # AssemblerMessage
    gmem: int | None = None
    arch_reason: str = ""
    const: dict = attrs.field(factory=dict)    # module-wide bank -> bytes (bank 3: .const)
    setmaxnreg_dropped: bool = False           # the cubin lacks setmaxnreg (C7504)
    # For a module whose setmaxnreg the cubin lacks, one of two: `whole_program` names the
    # ptxas whose whole-program build gave the figures (the code the driver JIT makes, which
    # keeps setmaxnreg) and `linked` is the report of the cubin itself; or `caveat` says the
    # figures are the cubin's, artefacts of the drop, and why no whole-program build was made.
    whole_program: str = ""
    linked: AssemblyReport | None = None
    caveat: str = ""

    def __getitem__(self, name: str) -> KernelResources:
        return self.kernels[name]

    @property
    def basis(self) -> str:
        """Where the figures come from, when that is not the cubin's own build (else "")."""
        if self.whole_program:
            return (f"figures from a whole-program build by {self.whole_program}, as the "
                    "driver JIT builds the code that runs (setmaxnreg kept); the cubin is "
                    "nvJitLink's, without setmaxnreg")
        return f"note: {self.caveat}" if self.caveat else ""

    def summary(self) -> str:
        lines = [f"built for {self.arch}" + (f" ({self.arch_reason})" if self.arch_reason
                                             else "")]
        if self.basis:
            lines.append(f"  {self.basis}")
        for k in self.kernels.values():
            lines.append(f"  {k.name}: {k.registers} registers, {k.stack_frame} bytes stack, "
                         f"spills {k.spill_stores}/{k.spill_loads} bytes (stores/loads), "
                         f"{k.shared} bytes shared")
        lines += [f"  {w}" for w in self.warnings]
        return "\n".join(lines)


class Cubin(bytes):
    """A cubin (bytes, so every caller that wants bytes still works) carrying its
    `AssemblyReport` as `.report`; `.arch` is the target it was built for."""

    report: AssemblyReport

    def __new__(cls, data: bytes, report: AssemblyReport):
        self = super().__new__(cls, data)
        self.report = report
        return self

    @property
    def arch(self) -> str:
        return self.report.arch

    @property
    def info(self) -> AssemblyReport:
        return self.report

    def __reduce__(self):
        return (Cubin, (bytes(self), self.report))


_CONST_SECTION = re.compile(r"\.nv\.constant(\d+)(?:\.(.+))?$")


def elf_sections(image: bytes) -> dict[str, int]:
    """{section name: size} of an ELF64 little-endian image (a cubin); {} for anything else."""
    if len(image) < 64 or image[:4] != b"\x7fELF" or image[4] != 2 or image[5] != 1:
        return {}
    try:
        shoff, = struct.unpack_from("<Q", image, 0x28)
        shentsize, shnum, shstrndx = struct.unpack_from("<HHH", image, 0x3A)
        headers = [struct.unpack_from("<IIQQQQ", image, shoff + i * shentsize)
                   for i in range(shnum)]
        names_at = headers[shstrndx][4]
        out = {}
        for name_off, _type, _flags, _addr, _offset, size in headers:
            start = names_at + name_off
            out[image[start:image.index(b"\0", start)].decode(errors="replace")] = size
        return out
    except (struct.error, IndexError, ValueError):
        return {}


def constant_banks(image: bytes) -> tuple[dict[str, dict[int, int]], dict[int, int]]:
    """Constant-bank sizes from a cubin's `.nv.constantN[.kernel]` sections: per kernel (bank
    0 holds the kernel's parameters and the driver's reserved words) and module-wide (bank 3:
    the module's `.const` variables). ptxas 13 no longer prints `cmem[N]` with -v."""
    per_kernel: dict[str, dict[int, int]] = {}
    module: dict[int, int] = {}
    for name, size in elf_sections(image).items():
        m = _CONST_SECTION.match(name)
        if m is None:
            continue
        if m.group(2):
            per_kernel.setdefault(m.group(2), {})[int(m.group(1))] = size
        else:
            module[int(m.group(1))] = size
    return per_kernel, module


def _blamed_line(text: str, ptx_lines: list[str]) -> int | None:
    """For an advisory without a line number that quotes an opcode ('setmaxnreg'), the first
    PTX line using it, so the warning can still name the Python line."""
    for word in _QUOTED.findall(text):
        for i, line in enumerate(ptx_lines, 1):
            stripped = line.strip()
            if stripped.startswith("@"):
                stripped = stripped.split(None, 1)[-1]
            if stripped.startswith(word + ".") or stripped.startswith(word + " "):
                return i
    return None


def parse_info_log(log: str, arch: str, ptx: str = "", locate: Callable | None = None,
                   arch_reason: str = "", cubin: bytes = b"") -> AssemblyReport:
    """An `AssemblyReport` from a ptxas `-v` info log (and, given the `cubin`, the constant
    banks its sections show where the log says nothing about them)."""
    kernels: dict[str, dict] = {}
    current: dict | None = None
    found: list[AssemblerMessage] = []
    gmem = None
    ptx_lines = ptx.splitlines()
    for line in log.splitlines():
        m = _FUNC.search(line)
        if m:
            name = m.group(1) or m.group(2)
            current = kernels.setdefault(name, {"name": name})
            continue
        if (m := _GMEM.search(line)) is not None:
            gmem = int(m.group(1))
            continue
        if (m := _LINE_WARNING.search(line)) is not None:
            found.append(_message(m.group(2), int(m.group(1)), locate))
            continue
        if (m := _BARE_WARNING.search(line)) is not None:
            n = _ON_LINE.search(m.group(1))
            found.append(_message(m.group(1), int(n.group(1)) if n else None, locate))
            continue
        if (m := _ADVISORY.search(line)) is not None:
            text = m.group(1)
            found.append(_message(text, _blamed_line(text, ptx_lines), locate))
            continue
        if current is None:
            continue
        if (m := _FRAME.search(line)) is not None:
            current.update(stack_frame=int(m.group(1)), spill_stores=int(m.group(2)),
                           spill_loads=int(m.group(3)))
        if (m := _USED.search(line)) is not None:
            current["registers"] = int(m.group(1))
            if (b := _BARRIERS.search(line)) is not None:
                current["barriers"] = int(b.group(1))
            if (s := _SMEM.search(line)) is not None:
                current["shared"] = int(s.group(1))
            current["const"] = {int(b): int(n) for n, b in _CMEM.findall(line)}
    banks, module_const = constant_banks(cubin) if cubin else ({}, {})
    for name, kw in kernels.items():
        if not kw.get("const") and name in banks:
            kw["const"] = banks[name]
    dropped = any(w.code == SETMAXNREG_DROPPED for w in found)
    return AssemblyReport(
        arch=arch, log=log, kernels={n: KernelResources(**kw) for n, kw in kernels.items()},
        warnings=tuple(found), gmem=gmem, arch_reason=arch_reason, const=module_const,
        setmaxnreg_dropped=dropped, caveat=ARTEFACT_CAVEAT if dropped else "")


def _message(text: str, ptx_line: int | None, locate: Callable | None) -> AssemblerMessage:
    loc = None
    if ptx_line is not None and locate is not None:
        try:
            loc = locate(ptx_line)
        except Exception:  # a locate bug must not hide the warning itself
            loc = None
    code = re.match(r"\((C\d+)\)", text.strip())
    return AssemblerMessage(text.strip(), ptx_line, loc, code.group(1) if code else None)


_SETMAXNREG_NOTE = (" -- nvJitLink (like every linker) assembles each module as a separately "
                    "linkable unit and drops setmaxnreg there, so this cubin does not contain "
                    "it; Module.load() and load_module() load a module that uses setmaxnreg "
                    "through the driver JIT, which keeps it (see README, 'setmaxnreg')")


# A code-generation advisory (C7512, ...) of a build that dropped setmaxnreg: it describes
# code that never runs through Module.load().
_ARTEFACT_NOTE = ("an artefact of nvJitLink's build without setmaxnreg: the driver JIT keeps "
                  "setmaxnreg, and its code may not have this (see the report's caveat)")


# The module's target is inferred as the lowest that takes every instruction, and ptxas takes
# .multicast::cluster on sm_90; it only advises the arch-specific target.
_ARCH_SPECIFIC_NOTE = (" -- ptxdsl infers the lowest target that accepts every instruction; "
                       "pin Module(..., target='sm_90a') to build the arch-specific Hopper "
                       "target")


def warn_about(report: AssemblyReport, stacklevel_loc: SourceLoc | None = None) -> None:
    """One `PtxdslAssemblerWarning` per ptxas warning, attributed to the Python line that built
    the PTX line it blames (else to `stacklevel_loc`, the caller's line)."""
    said: set[tuple[str, str, int]] = set()
    for w in report.warnings:
        loc = w.loc or stacklevel_loc or SourceLoc("<ptxas>", 0)
        text = str(w) + (_SETMAXNREG_NOTE if w.code == SETMAXNREG_DROPPED else "")
        if report.caveat and w.code not in (None, SETMAXNREG_DROPPED):
            text += f" -- {_ARTEFACT_NOTE}"
        if "should be used on .target 'sm_90a" in text:
            text += _ARCH_SPECIFIC_NOTE
        # ptxas repeats a message per kernel (setmaxnreg dropped in each of a module's six
        # kernels, from one PTX and one Python line): say it once.
        if (text, loc.file, loc.line) in said:
            continue
        said.add((text, loc.file, loc.line))
        warnings.warn_explicit(text, PtxdslAssemblerWarning, loc.file, loc.line)
