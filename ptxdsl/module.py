"""`Module`: kernels plus module-scope declarations, `.version`/`.target` inference, emission."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

import attrs

from ._files import output_target, write_file
from ._version import __version__
from .assembly_report import Cubin
from .errors import (
    BuildError,
    OperandError,
    SourceLoc,
    VersionError,
    fail_closed,
    user_loc,
)
from .instructions.base import b128_imm
from .kernel import Kernel
from .kernel_core import MAX_STATIC_SHARED, shared_limit_error, static_shared_limit
from .operands import (
    Imm,
    Symbol,
    _show,
    as_int,
    check_identifier,
    check_shared_type,
    decl_type,
    make_imm,
)
from .regbudget import check_kernel_budget
from .runtime.errors import KernelNotFoundError
from .toolchain import assemble_module, known_target, uses_setmaxnreg
from .types import PtxVersion, Requires, ScalarType, StateSpace, Target, req

if TYPE_CHECKING:  # pragma: no cover
    from .checker.findings import Finding
    from .runtime.loader import LoadedModule


class CudaCoreObjectCode(Protocol):
    """What `Module.to_cuda_core()` returns, as a type checker sees it: a cuda.core
    `ObjectCode` (cuda.core ships no type information mypy reads here)."""

    def get_kernel(self, name: str) -> Any:
        """The cuda.core `Kernel` of `.entry name`, for `cuda.core.launch`."""


# Nothing older than this is assembled by the CUDA 13 toolchain (sm_75 is its oldest target).
FLOOR = req("6.3", 75)


def _nothing() -> None:
    """The check to finish when the module is emitted unchecked."""


def _file_name(path: str) -> str:
    """A Python file name as `.file` string text: ptxas takes ASCII only (a non-ASCII
    character is a fatal error) and has no escapes we can rely on, so every byte outside
    printable ASCII, and '"', '\\' and '%', is written %XX (URL style) from its UTF-8 bytes;
    line numbers still match, and the name reads back with urllib.parse.unquote."""
    if path.isascii() and path.isprintable() and not any(c in path for c in '"\\%'):
        return path
    return "".join(c if c.isascii() and c.isprintable() and c not in '"\\%' else
                   "".join(f"%{b:02X}" for b in c.encode("utf-8", "surrogatepass"))
                   for c in path)


# ptxas's limit on a module's .const data (nvJitLink 13: "too much global constant data").
CONST_LIMIT = 64 * 1024

def _cannot_build(target: Target, arch: Target) -> str:
    """Why ptxas refuses PTX of `.target target` for `-arch=arch` ('' when it builds it):
    sm_XX builds for sm_XX and later archs; sm_XXa only for sm_XXa; sm_XXf for the archs of
    the same major family at or above XX (nvJitLink 13)."""
    if target.suffix == "a":
        return "" if arch == target else f"which only arch {target} builds"
    if target.suffix == "f":
        if arch.sm // 10 == target.sm // 10 and arch.sm >= target.sm:
            return ""
        return (f"which only archs of its family from sm_{target.sm} on (sm_{target.sm // 10}x) "
                "build")
    return "" if arch.sm >= target.sm else f"which needs arch sm_{target.sm} or later"


# The last minor of each PTX ISA major that is complete (ISA release history); 9.x and later
# are open-ended: what the installed toolchain knows (ptxas's refusal of one names the
# Module(...) line, which emit() maps the pinned .version line to).
_LAST_MINOR = {1: 4, 2: 3, 3: 2, 4: 3, 5: 0, 6: 5, 7: 8, 8: 8}


def _known_version(v: PtxVersion) -> bool:
    last = _LAST_MINOR.get(v.major)
    return v.minor <= last if last is not None else v.major >= 9


def _check_context_keys(what: str, context: Mapping, extra: tuple[str, ...],
                        loc: SourceLoc) -> None:
    """Refuse checker context keys the checker does not take, at the user's line: the
    checker's own TypeError would come from deep inside emit() with no line of theirs."""
    from .checker.context import Context
    valid = [f.name for f in attrs.fields(Context)] + list(extra)
    unknown = [k for k in context if k not in valid]
    if unknown:
        raise BuildError(f"{what}: unknown checker context {', '.join(map(repr, unknown))}; "
                         f"the checker takes {', '.join(valid)}", loc)


class Module:
    """A PTX module: `.version`, `.target`, `.address_size 64`, declarations, entries.

    `version` and `target` are inferred as the minimum covering every instruction used; pin them
    with `Module(..., version="8.3", target="sm_90a")`, and a pin below what an instruction needs
    raises `VersionError` naming that instruction and the line that built it.

    `emit()` runs the hazard checker (`ptxdsl.checker`): findings become `PtxdslHazardWarning`
    warnings, or raise `HazardError` with `strict=True` (default: the PTXDSL_STRICT environment
    variable).
    `check=False` turns it off; a mapping passes it context, e.g. `check={"host_maps": [...]}`.
    """

    def __init__(self, kernels: Iterable[Kernel] = (), *, version: str | None = None,
                 target: str | None = None, name: str = "module", lineinfo: bool = False,
                 check: bool | Mapping[str, Any] = True, strict: bool | None = None):
        self.loc = user_loc()
        # A truthy string such as "no" must not turn an option on: options are real bools.
        if type(lineinfo) is not bool:
            raise BuildError(f"Module: lineinfo must be True or False, got {_show(lineinfo)}",
                             self.loc)
        if strict is not None and type(strict) is not bool:
            raise BuildError(f"Module: strict must be True, False or None, got {_show(strict)}",
                             self.loc)
        if type(check) is not bool and not isinstance(check, Mapping):
            raise BuildError("Module: check must be True, False or a mapping of checker "
                             f"context, got {_show(check)}", self.loc)
        if isinstance(check, Mapping):
            _check_context_keys("Module(check=...)", check, (), self.loc)
        self.check_on_emit = check
        self.strict = strict
        self.lineinfo = lineinfo
        self.name = name
        self.kernels: list[Kernel] = []
        self.globals: list[tuple[Symbol, tuple[Imm, ...] | None]] = []
        self._names: set[str] = set()   # module variables
        try:
            self._pinned_version = PtxVersion.parse(version) if version is not None else None
            self._pinned_target = known_target(target) if target is not None else None
        except (ValueError, TypeError) as e:
            raise BuildError(f"Module: {e}", self.loc) from None
        if self._pinned_version is not None and not _known_version(self._pinned_version):
            raise BuildError(f"Module: .version {self._pinned_version} is not a PTX ISA "
                             "version (..., 6.0-6.5, 7.0-7.8, 8.0-8.8, 9.x): ptxas refuses it",
                             self.loc)
        self._line_locs: list[SourceLoc | None] = []
        if isinstance(kernels, Kernel | str) or not isinstance(kernels, Iterable):
            raise BuildError("Module: kernels must be a list of Kernels (Module([k])), got "
                             f"{_show(kernels)}", self.loc)
        for k in kernels:
            self.add(k)

    def add(self, kernel: Kernel) -> Kernel:
        """Add `kernel` to the module (its name unique in it) and return it."""
        if not isinstance(kernel, Kernel):
            raise BuildError(f"Module.add expects a Kernel, got {type(kernel).__name__}")
        if kernel.name in self._names or any(k.name == kernel.name for k in self.kernels):
            raise BuildError(f"module already has a kernel or symbol named {kernel.name!r}")
        self.kernels.append(kernel)
        return kernel

    def _check_names(self) -> None:
        """Kernel names are checked when added, but a kernel can be renamed after (`k.name =
        ...`): two `.entry` directives of one name, or an entry named like a module variable,
        would be refused by ptxas (or resolve to the other)."""
        seen: dict[str, Kernel] = {}
        for k in self.kernels:
            other = seen.setdefault(k.name, k)
            if other is not k or k.name in self._names:
                what = "another kernel" if other is not k else "a module variable"
                raise BuildError(f"module has {what} named {k.name!r} too (kernel renamed "
                                 "after Module.add?); each .entry needs its own name", k.loc)

    def _rename(self, sym: Any, old: str, new: str) -> None:
        """A module variable renamed (`operands._renamed`): claimed as `_declare` claims."""
        if new in self._names or any(k.name == new for k in self.kernels):
            raise BuildError(f"module already has a symbol named {new!r}")
        self._names.discard(old)
        self._names.add(new)

    def kernel(self, name: str) -> Kernel:
        """The kernel named `name` (KernelNotFoundError, a KeyError, when there is none)."""
        for k in self.kernels:
            if k.name == name:
                return k
        raise KernelNotFoundError(f"Module.kernel: no kernel named {name!r} in module "
                                  f"'{self.name}'; it has: "
                                  f"{', '.join(k.name for k in self.kernels) or 'none'}")

    def _declare(self, space: StateSpace, type: ScalarType, count: int, align: int | None,
                 name: str, init: Iterable[float] | None) -> Symbol:
        name = check_identifier(name, "module variable")
        check_shared_type(f".{space.value}", name, type)
        if name in self._names or any(k.name == name for k in self.kernels):
            raise BuildError(f"module already has a symbol named {name!r}")
        n = as_int(count)
        if n is None or n < 1 or n >= 1 << 40:
            raise BuildError(f"module variable {name}: expected a positive count, got "
                             f"{_show(count)}")
        count = n
        values = None
        if init is not None:
            if space is StateSpace.shared:
                raise BuildError(f"module variable {name}: .shared variables cannot be "
                                 "initialised")
            # Typed, range-checked immediates: floats must be written as floats (0f.../0d...),
            # ptxas refuses `.f32 x[2] = {0, 1}` with "Initial value type mismatch".
            # .b128 data takes only what ptxas encodes as written (b128_imm says why).
            check = b128_imm if type is ScalarType.b128 else None
            values = tuple(check(f".{space.value} {name}", f"init[{i}]", v) if check else
                           make_imm(f".{space.value} {name}", f"init[{i}]", v, type)
                           for i, v in enumerate(init))
            if len(values) != count:
                raise BuildError(f"module variable {name}: {len(values)} initial values for "
                                 f"{count} elements")
        sym = Symbol(name, space, type, count, align, None, loc=user_loc(), module=self)
        if space is StateSpace.shared and sym.size > MAX_STATIC_SHARED:
            raise shared_limit_error(f"module variable {name}", sym.size, MAX_STATIC_SHARED,
                                     sym)
        if space is StateSpace.const:
            total = sum(s.size for s, _ in self.globals if s.space is StateSpace.const)
            if total + sym.size > CONST_LIMIT:
                raise BuildError(f"module variable {name}: .const data reaches "
                                 f"{total + sym.size} bytes with {name} ({sym.size} bytes), "
                                 f"above the {CONST_LIMIT} bytes (64 KiB) ptxas allows in one "
                                 "module; put large tables in .global memory "
                                 "(Module.global_array)", sym.loc)
        self._names.add(name)
        self.globals.append((sym, values))
        return sym

    def global_array(self, type: ScalarType, count: int, *, name: str, align: int | None = None,
                     init: Iterable[float] | None = None) -> Symbol:
        """`.visible .global .align A .type name[count] = {...};`"""
        return self._declare(StateSpace.global_, type, count, align, name, init)

    def const_array(self, type: ScalarType, count: int, *, name: str, align: int | None = None,
                    init: Iterable[float] | None = None) -> Symbol:
        """`.visible .const .align A .type name[count] = {...};`"""
        return self._declare(StateSpace.const, type, count, align, name, init)

    def shared_array(self, type: ScalarType, count: int, *, name: str,
                     align: int | None = None) -> Symbol:
        """`.shared .align A .type name[count];` at module scope (visible to every kernel)."""
        return self._declare(StateSpace.shared, type, count, align, name, None)

    # -- version and target ----------------------------------------------------------------------
    def requires(self) -> Requires:
        """The PTX ISA version and target every kernel and declaration needs."""
        # Cached per module shape: emit() asks several times and kernels can be large.
        key = tuple(len(k.body) for k in self.kernels)
        if getattr(self, "_req_key", None) != key:
            r = FLOOR
            for k in self.kernels:
                r = r.merge(k.requires())
            self._req_key, self._req = key, r
        return self._req

    @property
    def target(self) -> Target:
        """The `.target`: the pinned one, else the lowest that builds every instruction."""
        if self._pinned_target is not None:
            return self._pinned_target
        r = self.requires()
        t = r.min_target()
        return t if r.arch_specific else Target(max(t.sm, FLOOR.sm))

    @property
    def version(self) -> PtxVersion:
        """The `.version`: the pinned one, else the lowest covering every instruction and
        the target."""
        if self._pinned_version is not None:
            return self._pinned_version
        return max(self.requires().version, self.target.introduced)

    def _check_arch(self, arch: Target) -> None:
        """Refuse a form ptxas takes only up to an SM below `arch` (`types.Ceiling`: a 32-bit
        cvta on sm_90 and later), naming its instruction, operand and line."""
        for k in self.kernels:
            if not any(r.above_ceiling(arch) for r in k.distinct_requires()):
                continue
            for st in k.statements():
                r = st.insn.requires
                c = r.ceiling
                if c is not None and r.above_ceiling(arch):
                    raise OperandError(st.insn.opcode(), c.operand, f"{c.expected} on {arch} "
                                       f"({self._target_origin(arch)})", c.given, st.loc)

    def check_pins(self) -> None:
        """Refuse a pinned version/target below what the target or any instruction needs,
        and a form ptxas refuses on the target (a `Requires.ceiling`, such as a 32-bit cvta)."""
        version, target = self.version, self.target
        self._check_arch(target)
        if version < target.introduced:
            raise VersionError(f"module pinned to .version {version} but .target {target} "
                               f"needs PTX ISA {target.introduced} or later", self.loc)
        for k in self.kernels:
            kr = req("7.8", 90) if (k.reqnctapercluster or k.explicitcluster
                                    or k.maxclusterrank) else None
            if kr is not None and not (kr.satisfied_by(target) and kr.version <= version):
                raise VersionError(f"kernel {k.name}: cluster directives need "
                                   f"{kr.describe()}; module is .version {version} "
                                   f".target {target}", k.loc)
            if k.declares_b128 and version < PtxVersion(8, 3):
                raise VersionError(f"kernel {k.name}: .b128 registers need PTX ISA 8.3; module "
                                   f"is pinned to .version {version}", k.loc)
            # Check each distinct requirement once; only when one fails, find the first
            # statement that needs it (for the error's instruction and line).
            if all(r.satisfied_by(target) and not r.version > version
                   for r in k.distinct_requires()):
                continue
            for st in k.statements():
                r = st.insn.requires
                if not r.satisfied_by(target):
                    raise VersionError(f"{st.insn.name} needs {r.describe()}, but "
                                       f"{self._target_origin()}", st.loc)
                if r.version > version:
                    raise VersionError(f"{st.insn.name} needs {r.describe()}, but the module "
                                       f"is pinned to .version {version}", st.loc)

    def _target_origin(self, arch: Target | None = None) -> str:
        """Where `.target` came from, for an error about an instruction it cannot hold: the
        user's pin, or the first statement whose requirement chose it; or, for an `arch`
        other than the target, that it is the arch being built."""
        target = self.target
        if arch is not None and arch != target:
            return f"the arch being built; the module's .target is {target}"
        if self._pinned_target is not None:
            return f"the module is pinned to .target {target} (Module(target=...) at {self.loc})"
        for k in self.kernels:
            for st in k.statements():
                r = st.insn.requires
                # An 'a' target comes from an arch-specific form; a portable one from the
                # form of the highest sm (the target is the least that every form accepts).
                if (r.arch_specific and target.sm in r.arch_specific) if target.suffix \
                        else (not r.arch_specific and r.sm == target.sm):
                    return (f"the module's .target {target} was inferred from {st.insn.name} "
                            f"at {st.loc.describe()} ({r.describe()}), and no target has "
                            "both forms (no target was pinned)")
        return (f"the module's .target {target} was inferred from its kernels' directives; "
                "no target was pinned")

    # -- emission ----------------------------------------------------------------------------------
    def _check_extern_shared(self) -> None:
        """Kernels declare `.extern .shared` at module scope (ptxas refuses it in a body): one
        name there must have one type and must not be a kernel's or module variable's name."""
        seen: dict[str, tuple[str, ScalarType]] = {}
        for k in self.kernels:
            for s in k.extern_shared_symbols():
                first = seen.setdefault(s.name, (k.name, s.type))
                if s.name in self._names or first[1] is not s.type \
                        or any(other.name == s.name for other in self.kernels):
                    raise BuildError(f"kernel {k.name}: dynamic shared array {s.name!r} clashes "
                                     f"with a module-scope name (kernel {first[0]} declares it "
                                     f"as .{first[1].value}, or a kernel or module variable "
                                     "has that name)", k.loc)

    def _check_module_symbols(self) -> None:
        """A module variable is declared in its own module's PTX only: used by a kernel of
        another module it would name nothing there (or another variable of that name)."""
        for k in self.kernels:
            for sym, (insn, operand, loc) in k._module_syms.items():
                if sym.module is not self:
                    raise OperandError(insn, operand, "a module variable of this kernel's "
                                       f"module '{self.name}'", f"{sym.space.value} variable "
                                       f"{sym.name} of module '{sym.module.name}' (declare it "
                                       "in this module)", loc)

    def _check_static_shared(self) -> None:
        """Each entry's static shared memory (its own arrays, then the module-scope ones it
        uses, which ptxas counts against it) within ptxas's limit for the module's target;
        the error names the array that crosses it."""
        limit = static_shared_limit(self.target)
        for k in self.kernels:
            total = 0
            module_shared = [s for s in k._module_syms if s.space is StateSpace.shared]
            for sym in (*k.shared, *module_shared):
                total += sym.size
                if total > limit:
                    raise shared_limit_error(f"kernel {k.name}", total, limit, sym, self.target)

    def _global_lines(self) -> list[tuple[str, SourceLoc]]:
        out = []
        for sym, init in self.globals:
            vis = "" if sym.space is StateSpace.shared else ".visible "
            align = f" .align {sym.align}" if sym.align else ""
            text = (f"{vis}.{sym.space.value}{align} .{decl_type(sym.type)} "
                    f"{sym.name}[{sym.count}]")
            if init is not None:
                text += " = {" + ", ".join(v.render() for v in init) + "}"
            out.append((text + ";", sym.loc or self.loc))
        return out

    def emit(self) -> str:
        """The module's PTX text. Also records which Python line produced each PTX line."""
        text, finish_check = self.emit_deferred(thread=False)
        finish_check()
        return text

    def emit_deferred(self, *, thread: bool = True) -> tuple[str, Callable[[], object]]:
        """`emit()` with its hazard check left running (in a worker thread, `thread`): the
        text, and a call that waits for the check and warns (or raises, strict) as `emit()`
        does. `load_module(..., use_cubin=True)` assembles while the checker runs."""
        self.check_pins()
        if not self.kernels:
            raise BuildError("module has no kernels", self.loc)
        self._check_names()
        self._check_extern_shared()
        self._check_module_symbols()
        debug = sys.modules.get("ptxdsl.debug")
        if debug is not None:   # only its bounded waits use its record variables
            debug.check_declared(self)
        self._check_static_shared()
        lines: list[tuple[str, SourceLoc | None]] = [
            ("//", None), (f"// Generated by ptxdsl {__version__}", None), ("//", None),
            # A pinned .version/.target maps to the Module(...) line: ptxas's refusal of
            # one (a version it does not know) then names that line.
            ("", None),
            (f".version {self.version}", self.loc if self._pinned_version else None),
            (f".target {self.target}", self.loc if self._pinned_target else None),
            (".address_size 64", None), ("", None)]
        decls = self._global_lines()
        if decls:
            lines += decls + [("", None)]
        body: list[tuple[str, SourceLoc | None]] = []
        for i, k in enumerate(self.kernels):
            if i:
                body.append(("", None))
            body += k.render()
            check_kernel_budget(k)    # setmaxnreg's register budget (no-op without it)
        finish_check: Callable[[], object] = _nothing
        if self.check_on_emit is not False:   # after render: labels are known to be placed
            from .checker import emit_check_started
            finish_check = emit_check_started(
                self, strict=self.strict, thread=thread, context=self.check_on_emit
                if isinstance(self.check_on_emit, Mapping) else None)
        if self.lineinfo:
            lines, body = self._with_lineinfo(lines, body)
        lines += body
        self._line_locs = [loc for _, loc in lines]
        return "\n".join(text for text, _ in lines) + "\n", finish_check

    def check(self, strict: bool = False, **context: Any) -> list[Finding]:
        """The hazard checker's findings for every kernel (`ptxdsl.checker.check_module`);
        `strict=True` raises `HazardError` when there is any. Context: `host_maps=`, `maps=`."""
        from .checker import check_module, report
        _check_context_keys("Module.check", context, ("notes",), user_loc())
        if type(strict) is not bool:   # a truthy "no" must not make the check strict
            raise OperandError("Module.check", "strict", "True or False", _show(strict))
        findings = check_module(self, **context)
        if strict:
            report(findings, strict=True)
        return findings

    @staticmethod
    def _with_lineinfo(head, body):
        """Add `.file`/`.loc` directives so ptxas line tables (and so compute-sanitizer,
        cuda-gdb and profilers) name the Python lines that built each instruction."""
        files: dict[str, int] = {}
        out: list[tuple[str, SourceLoc | None]] = []
        last = None
        for text, loc in body:
            is_insn = text.startswith("\t") and not text.startswith("\t.") and text.strip()
            if loc is not None and is_insn and (loc.file, loc.line) != last:
                idx = files.setdefault(_file_name(loc.file), len(files) + 1)
                out.append((f"\t.loc {idx} {loc.line} 0", loc))
                last = (loc.file, loc.line)
            out.append((text, loc))
        head = head + [(f'.file {i} "{f}"', None) for f, i in files.items()]
        if files:
            head.append(("", None))
        return head, out

    def locate(self, ptx_line: int) -> SourceLoc | None:
        """The Python location that built 1-based line `ptx_line` of the last `emit()`."""
        if as_int(ptx_line) is None:
            raise BuildError(f"Module.locate: expected a PTX line number, got {_show(ptx_line)}")
        if not self._line_locs:
            self.emit()
        if 1 <= ptx_line <= len(self._line_locs):
            return self._line_locs[ptx_line - 1]
        return None

    def write(self, path: str | os.PathLike) -> str:
        """Write the PTX to `path` (parent folders created) and return the text.

        The text goes to a temporary file in the same folder first and replaces `path` only
        once it is whole, so a failure (emit, encoding, disk) leaves an existing file intact.
        `path` must be a regular file or a new name: a folder, a device node, a FIFO or a
        socket there is refused with an `OutputError` (never replaced: run as root,
        `write("/dev/null")` would replace the system's /dev/null). A symbolic link is
        written through to the file it points to, which must be a regular file or new, and
        stays a link (a symlinked golden stays one).
        """
        if not isinstance(path, str | os.PathLike) or not os.fspath(path) \
                or os.path.isdir(path):
            raise BuildError(f"Module.write: expected the path of a file, got {_show(path)}")
        output_target(os.fspath(path), "Module.write")   # refused before emit() runs
        text = self.emit()
        data = text.encode("ascii")   # fails here, before anything on disk is touched
        write_file(os.path.abspath(os.fspath(path)), data, "Module.write")
        return text

    def assemble(self, arch: str | None = None, *, options: Sequence[str] = (),
                 warn: bool = True) -> Cubin:
        """A cubin through nvJitLink (no GPU needed), as a `Cubin`: bytes, plus `.arch` (the
        target built) and `.report` (registers, spills, stack, shared memory per kernel, and
        every ptxas warning; see `ptxdsl.assembly_report`). ptxas warnings also become
        `PtxdslAssemblerWarning` warnings naming the Python line (unless `warn=False`).

        `arch` defaults to the arch of the GPU in use when there is one (so the cubin loads
        there; never below the module's target), else the module's target. `options` are
        nvJitLink options, all passed on. A module using setmaxnreg: nvJitLink drops it (a
        warning says so); `load()` takes the driver JIT, which keeps it (README)."""
        if arch is None:   # the GPU in use's arch when there is one, else the module's target
            from .runtime.compat import build_arch
            from .runtime.device import current_compute_capability
            built, reason, loads = build_arch(self.target, current_compute_capability())
            self._check_arch(known_target(built))
            return assemble_module(self, built, options=options, warn=warn, arch_reason=reason,
                                   loads=loads)
        try:
            target = known_target(arch)
        except (ValueError, TypeError) as e:
            raise BuildError(f"Module.assemble: {e}") from None
        # ptxas refuses these with a fatal error and no line ("SM version specified by
        # .target is higher ..."): say it here, at the caller's line.
        why = _cannot_build(self.target, target)
        if why:
            raise BuildError(f"Module.assemble: arch {target} cannot build this module: "
                             f"its .target is {self.target}, {why}")
        self._check_arch(target)
        return assemble_module(self, target, options=options, warn=warn)

    def to_cuda_core(self, arch: str | None = None, *, options: Sequence[str] = (),
                     warn: bool = True) -> CudaCoreObjectCode:
        """This module as a cuda.core `ObjectCode`, so its kernels drop into a cuda.core
        program: `Module.to_cuda_core().get_kernel("name")` is a cuda.core `Kernel` for
        `cuda.core.launch`. The code is the cubin of `assemble(arch, options=...)`; a module
        using setmaxnreg (which nvJitLink drops) is handed over as PTX, for the driver JIT.
        cuda.core loads it on the device current when a kernel is first taken from it."""
        try:
            from cuda.core import ObjectCode
        except ImportError:
            try:
                from cuda.core.experimental import ObjectCode
            except ImportError as exc:
                raise ImportError(f"Module.to_cuda_core() needs cuda.core: {exc}") from None
        ptx = self.emit()
        name = getattr(self, "name", None) or "+".join(k.name for k in self.kernels)
        code: CudaCoreObjectCode
        if uses_setmaxnreg(ptx):
            # bytes: cuda.core reads a str as the path of a file to load
            code = ObjectCode.from_ptx(ptx.encode(), name=name)
        else:
            code = ObjectCode.from_cubin(bytes(self.assemble(arch, options=options, warn=warn)),
                                         name=name)
        return code

    def load(self, *, device: int = 0, use_cubin: bool = False, cache: bool = True,
             cache_dir: str | os.PathLike[str] | None = None, name: str | None = None,
             locate: Callable[[int], SourceLoc | None] | None = None,
             assemble: Callable[[str, str], bytes] | None = None,
             toolchain_version: str | None = None,
             options: Sequence[str] = ()) -> LoadedModule:
        """Load on GPU `device` through the CUDA driver: `ptxdsl.runtime.load_module`, whose
        keywords these are (tests/test_typing.py keeps the two in step)."""
        from .runtime import load_module
        return load_module(self, device=device, use_cubin=use_cubin, cache=cache,
                           cache_dir=cache_dir, name=name, locate=locate, assemble=assemble,
                           toolchain_version=toolchain_version, options=options)


# The same safety net as the Kernel builders (errors.fail_closed): a raw TypeError/ValueError
# from junk handed to a public Module method becomes a BuildError naming the user's line.
# `kernel(name)` is left out: its KeyError for a missing name is the lookup's answer.
for _name in ("__init__", "add", "global_array", "const_array", "shared_array", "locate",
              "write", "assemble", "to_cuda_core", "load"):
    setattr(Module, _name, fail_closed(f"Module.{_name.strip('_')}", getattr(Module, _name)))
