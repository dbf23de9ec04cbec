"""`python -m ptxdsl`: demo, emit, forms, check, lift, fuzz.

- `demo`: build every sample in samples/, write its .ptx under out/, assemble it for its target
  with nvJitLink, and run it (checked against numpy) when a Hopper GPU is present.
- `emit FILE.py`: run a Python file and write every `Module` it defines (or its
  `build_module()`'s) as .ptx: `DIR/<stem>.<name>.ptx` (a `build_modules()` name must be an
  identifier), replacing only regular files, as `Module.write` does.
- `forms`: the table of instruction forms with the PTX ISA version and target each needs.
- `check FILE.py`: the static hazard checker over every module a file defines;
  `check FILE.ptx|DIR ...` over PTX from any compiler (`--format json|sarif`; exit 0 clean,
  1 hazards, 2 unreadable).
- `lift FILE.ptx [-o OUT.py]`: a Python program that rebuilds the PTX file through ptxdsl's
  classes (typed instructions by their constructors, the rest as PTX text), to take a
  compiler's output over and edit it in Python; exit 2 when the file cannot be read or parsed.
- `fuzz`: a property-based campaign of the builders against ptxas (the options of
  `python -m ptxdsl.fuzz`; needs the `fuzz` extra, hypothesis).

A file for `emit` or `check` that ends the run itself (`sys.exit` outside the `__main__`
guard) is an error, not a success; output piped into a reader that stops early ends the
command quietly with status 141.
"""

from __future__ import annotations

import argparse
import os
import re
import runpy
import sys
import time
import warnings
from collections.abc import Mapping
from pathlib import Path

from ._version import __version__
from .errors import OutputError, PtxdslError
from .module import Module
from .operands import _IDENT, _show

PACKAGE_DIR = Path(__file__).resolve().parent
# A wheel ships the samples inside the package (setup.py maps samples/ to ptxdsl.samples); a
# checkout, and an editable install of one, keeps them in samples/ beside the package.
SAMPLES_DIRS = (PACKAGE_DIR / "samples", PACKAGE_DIR.parent / "samples")
SAMPLES_DIR = next((d for d in SAMPLES_DIRS if d.is_dir()), SAMPLES_DIRS[0])


class _FileError(Exception):
    """A one-line reason a FILE argument cannot be used (printed without a traceback)."""


def modules_in(path: str | Path) -> dict[str, Module]:
    """Run a Python file and collect its modules: globals that are `Module` objects, plus what a
    `build_module()` (or `build_modules()` returning a dict) gives. A function returning
    anything else raises `_FileError` saying what it must return."""
    ns = runpy.run_path(str(path), run_name="__ptxdsl__")
    found = {name: v for name, v in ns.items() if isinstance(v, Module)}
    for name in found:
        # A global set through globals()['a\nb'] is no Python name: as a file name or report
        # line it would forge one, as a build_modules() name would (below).
        if not isinstance(name, str) or not name.isidentifier():
            raise _FileError(f"{path}: a module is a global named {name!r}, which is not a "
                             "Python identifier; module names name the output files")
    # What the functions return is checked here, naming the file and the contract: used
    # as it is, a wrong value fails later as a bare AttributeError/TypeError of ours.
    if callable(ns.get("build_module")):
        mod = ns["build_module"]()
        if not isinstance(mod, Module):
            raise _FileError(f"{path}: build_module() must return a ptxdsl Module, got "
                             f"{_show(mod)}")
        _add(found, "build_module", mod, path, "build_module()")
    if callable(ns.get("build_modules")):
        mods = ns["build_modules"]()
        what = "a dict of name -> ptxdsl Module"
        if not isinstance(mods, Mapping):
            raise _FileError(f"{path}: build_modules() must return {what}, got {_show(mods)}")
        for n, m in mods.items():
            if not isinstance(n, str) or not isinstance(m, Module):
                raise _FileError(f"{path}: build_modules() must return {what}; its entry "
                                 f"{_show(n)} is {_show(m)}")
            # The name becomes part of a file name (emit) and of report lines (check): one
            # with '/' or '..' would write outside -o DIR, one with a newline forge a line.
            if not _IDENT.match(n):
                raise _FileError(f"{path}: build_modules() names a module {n!r}; module names "
                                 "must be identifiers (letters, digits, '_' and '$', not "
                                 "starting with a digit), as they name the output files")
            _add(found, n, m, path, "build_modules()")
    return found


def _add(found: dict[str, Module], name: str, mod: Module, path: str | Path, src: str) -> None:
    """Collect `mod` as `name`; a name already taken by another module (a global of that
    name) is an error: keeping one of the two would leave the other unchecked, unsaid."""
    if found.get(name, mod) is not mod:
        raise _FileError(f"{path}: {src} gives a module named {name!r}, and a global of that "
                         "name is another module; rename one (each module is written and "
                         "checked under its name)")
    found[name] = mod


def cmd_emit(args) -> int:
    try:
        mods = _modules_of(args.file)
    except _FileError as e:
        print(f"ptxdsl emit: {e}", file=sys.stderr)
        return 2
    if not mods:
        print(f"ptxdsl emit: {_nothing_found(args.file)}", file=sys.stderr)
        return 1
    out = Path(args.output)
    if out.exists() and not out.is_dir():   # else every module would fail the same way
        print(f"ptxdsl emit: -o {args.output}: not a folder", file=sys.stderr)
        return 2
    stem = Path(args.file).stem
    failed = []
    for name, mod in mods.items():
        path = out / (f"{stem}.ptx" if len(mods) == 1 else f"{stem}.{name}.ptx")
        # Names are identifiers (modules_in) and the stem a file's own name, so this holds;
        # checked anyway, as nothing may be written outside -o DIR if that ever changes.
        if path.parent.resolve() != out.resolve():
            print(f"ptxdsl emit: {args.file}:{name}: output {str(path)!r} is not a file name "
                  f"inside {args.output}", file=sys.stderr)
            failed.append(name)
            continue
        # A Python file named like the output (m.ptx run with -o its own folder) is the
        # user's source: never replaced by what it built.
        if path.exists() and Path(args.file).exists() and path.samefile(args.file):
            print(f"ptxdsl emit: {args.file}:{name}: the output {str(path)!r} is the input "
                  "file itself; give -o another folder", file=sys.stderr)
            failed.append(name)
            continue
        # A module that cannot emit, write or assemble is reported as `check` reports it:
        # the ptxdsl error names the user's line, so a traceback of the CLI adds nothing.
        try:
            mod.write(path)
            print(f"wrote {path} (.version {mod.version}, .target {mod.target})")
            if args.assemble:
                t0 = time.perf_counter()
                cubin = mod.assemble()
                print(f"  assembled {len(cubin)} bytes of cubin for {cubin.arch} "
                      f"({cubin.report.arch_reason}) in "
                      f"{(time.perf_counter() - t0) * 1e3:.1f} ms")
                if cubin.report.basis:   # a setmaxnreg module: whose figures these are
                    print(f"  {cubin.report.basis}")
        except PtxdslError as e:
            print(f"ptxdsl emit: {args.file}:{name}: {_error_text(e)}", file=sys.stderr)
            failed.append(name)
    if failed:
        print(f"ptxdsl emit: {_count(len(failed), 'module')} failed: {', '.join(failed)}",
              file=sys.stderr)
        return 1
    return 0


def _error_text(e: PtxdslError) -> str:
    """A ptxdsl error for the command line: with its user's `file:line`, except an
    `OutputError` met by the CLI's own write, whose location would be the CLI's caller (the
    path it names is what matters)."""
    return e.message if isinstance(e, OutputError) else str(e)


def cmd_forms(args) -> int:
    from .forms import forms_table
    print(forms_table())
    return 0


_MAIN_GUARD = re.compile(r"^if\s+__name__\s*==\s*['\"]__main__['\"]\s*:", re.M)


def _modules_of(file: str) -> dict[str, Module]:
    path = Path(file)
    if not path.is_file():
        raise _FileError(f"{file}: no such file" if not path.exists()
                         else f"{file}: not a file")
    try:
        return modules_in(path)
    except _FileError:
        raise
    except PtxdslError as e:
        raise _FileError(f"{file}: building its modules failed: {e}") from None
    except SystemExit as e:
        # Typically a `sys.exit(main())` without the __main__ guard: left alone it would end
        # this command with the file's status (0) before anything was checked.
        raise _FileError(f"{file}: running it called sys.exit({e.code!r}) before its modules "
                         "were collected, so nothing was checked (put the call under "
                         "`if __name__ == \"__main__\":`)") from None
    except Exception as e:  # noqa: BLE001 - the user's file raised: say what, in one line
        raise _FileError(f"{file}: running it raised {type(e).__name__}: {e}") from None


def _nothing_found(file: str) -> str:
    msg = (f"{file}: defines no ptxdsl Module at top level, nor build_module() or "
           "build_modules(); nothing was checked")
    try:
        guarded = _MAIN_GUARD.search(Path(file).read_text(errors="replace")) is not None
    except OSError:
        guarded = False
    if guarded:
        msg += (". Its code under `if __name__ == \"__main__\":` does not run here (the file "
                "is run as a module named '__ptxdsl__'): build the modules at top level or "
                "in a build_module() function")
    return msg


def cmd_check(args) -> int:
    if len(args.file) > 1 or args.file[0].endswith(".ptx") or os.path.isdir(args.file[0]):
        return cmd_check_ptx(args)
    args.file = args.file[0]
    if args.format != "text":
        print("ptxdsl check: --format json/sarif is for PTX files; a Python file's modules "
              "are reported as text", file=sys.stderr)
        return 2
    from .checker import Severity, check_module
    try:
        mods = _modules_of(args.file)
    except _FileError as e:
        print(f"ptxdsl check: {e}", file=sys.stderr)
        return 2
    if not mods:
        print(f"ptxdsl check: {_nothing_found(args.file)}", file=sys.stderr)
        return 1
    worst, failed, kernels = 0, [], 0
    for name, mod in mods.items():
        try:
            with warnings.catch_warnings():   # emit's own hazard warnings: reported below
                warnings.simplefilter("ignore")
                mod.emit()
        except PtxdslError as e:
            print(f"{args.file}:{name}: cannot emit: {e}")
            failed.append(name)
            continue
        kernels += len(mod.kernels)
        findings = check_module(mod, notes=True)
        for f in findings:
            if f.severity is not Severity.note or args.notes:
                print(f.format())
            elif f.unchecked:   # a check a declaration would turn on: said in one line
                print(f"{f.loc or f'{args.file}:{name}'}: {f.unchecked}")
            if f.severity is not Severity.note:
                worst = max(worst, 2 if f.severity is Severity.error else 1)
        if not [f for f in findings if f.severity is not Severity.note]:
            print(f"{args.file}:{name}: no hazards found")
    checked = len(mods) - len(failed)
    print(f"checked {_count(checked, 'module')}, {_count(kernels, 'kernel')}"
          + (f"; {_count(len(failed), 'module')} could not emit: {', '.join(failed)}"
             if failed else ""))
    return 1 if failed or worst == 2 or (worst and args.strict) else 0


def cmd_check_ptx(args) -> int:
    from .check_report import REPORTS, check_ptx_file, exit_code, ptx_files
    missing = [f for f in args.file if not os.path.exists(f)]
    if missing:
        print(f"ptxdsl check: no such file or folder: {', '.join(missing)}", file=sys.stderr)
        return 2
    files = ptx_files(args.file)
    if not files:
        print(f"ptxdsl check: no .ptx files under {', '.join(args.file)}", file=sys.stderr)
        return 2
    results = [check_ptx_file(f, notes=args.notes) for f in files]
    print(REPORTS[args.format](results))
    return exit_code(results, args.strict)


def cmd_lift(args) -> int:
    from ._files import write_file
    from .frontend.lift import LiftError, lift_ptx
    path = Path(args.file)
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as e:
        why = "no such file" if isinstance(e, FileNotFoundError) else \
            "not a file" if isinstance(e, IsADirectoryError) else \
            f"cannot read: {getattr(e, 'strerror', None) or e}"
        print(f"ptxdsl lift: {args.file}: {why}", file=sys.stderr)
        return 2
    try:
        lifted = lift_ptx(text, file=args.file)
    except LiftError as e:   # ptxdsl's defect, not the file's: the file was read
        print(f"ptxdsl lift: {e.message}", file=sys.stderr)
        return 1
    except PtxdslError as e:   # a parse error: located at the PTX file and line
        print(f"ptxdsl lift: {e}", file=sys.stderr)
        return 2
    if lifted.as_text:
        names = sorted({name for name, _ in lifted.as_text})
        print(f"ptxdsl lift: {_count(len(lifted.as_text), 'typed instruction')} written as "
              f"text (the class does not take its own fields back): {', '.join(names)}",
              file=sys.stderr)
    if args.output is None:
        sys.stdout.write(lifted.source)
        return 0
    out = Path(args.output)
    if out.exists() and out.samefile(path):
        print(f"ptxdsl lift: -o {args.output} is the input file itself", file=sys.stderr)
        return 2
    try:
        write_file(out, lifted.source.encode(), "ptxdsl lift")
    except OutputError as e:   # its message begins with "ptxdsl lift: "
        print(e.message, file=sys.stderr)
        return 2
    print(f"wrote {out} ({_count(lifted.typed, 'instruction')} built by their classes)")
    return 0


def _count(n: int, what: str) -> str:
    return f"{n} {what}{'' if n == 1 else 's'}"


def sample_files() -> list[Path]:
    return sorted(p for p in SAMPLES_DIR.glob("*.py") if not p.name.startswith("_"))


def cmd_demo(args) -> int:
    if not SAMPLES_DIR.is_dir():
        print("ptxdsl demo: the samples are not installed with this ptxdsl (looked in "
              f"{' and '.join(map(str, SAMPLES_DIRS))}); reinstall it (pip install ptxdsl) "
              "or run the demo from a checkout (pip install -e .)", file=sys.stderr)
        return 1
    out = Path(args.output)
    if out.exists() and not out.is_dir():   # else every sample would fail the same way
        print(f"ptxdsl demo: -o {args.output}: not a folder", file=sys.stderr)
        return 2
    known = [p.stem for p in sample_files()]
    # A misspelt name would otherwise run nothing and still report success.
    unknown = [n for n in args.only if n not in known]
    if unknown:
        print(f"ptxdsl demo: no sample named {', '.join(map(repr, unknown))}; the samples "
              f"are: {', '.join(known)}", file=sys.stderr)
        return 2
    failures = []
    from . import sample_runner
    sample_runner._SAID.clear()    # this demo says why no GPU runs once, whatever ran before
    for path in sample_files():
        if args.only and path.stem not in args.only:
            continue
        print(f"=== {path.stem}")
        ns = runpy.run_path(str(path), run_name="__ptxdsl_demo__")
        main = ns.get("main")
        if not callable(main):
            print(f"  {path.name} has no main(argv)")
            failures.append(path.stem)
            continue
        # One call: it writes the PTX, then runs the sample (or assembles it without a GPU).
        if main(["--save-ptx", str(out / f"{path.stem}.ptx")]):
            failures.append(path.stem)
    print()
    if failures:
        print(f"demo: {len(failures)} sample(s) failed: {', '.join(failures)}")
        return 1
    from .runtime import gpu_skip_reason
    if gpu_skip_reason() is None:
        print("demo: all samples ran on the GPU and passed their checks")
    else:
        print("demo: all samples built and assembled (no Hopper GPU here, so none was run)")
    return 0


FUZZ_PROG = "python -m ptxdsl fuzz"


def cmd_fuzz(argv: list[str]) -> int:
    try:
        from .fuzz.__main__ import main as fuzz_main
    except ModuleNotFoundError as e:
        if e.name != "hypothesis":
            raise
        print(f"{FUZZ_PROG}: {e}", file=sys.stderr)
        return 2
    return fuzz_main(argv, prog=FUZZ_PROG)


def version_line() -> str:
    """`ptxdsl X.Y.Z`, and whether the optional C launch module was built at install (without
    it, launches go through cuda.bindings' cuLaunchKernelEx: the same result, slower)."""
    # Imported, as the runtime does (runtime.launch.c_launcher): a file that cannot load is
    # no launch path.
    try:
        from . import _launch_c  # noqa: F401
        state = "built"
    except ImportError:
        state = "not built; launches use cuda.bindings"
    return f"ptxdsl {__version__} (C launch path: {state})"


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m ptxdsl", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--version", action="version", version=version_line(),
                    help="print ptxdsl's version (and whether its C launch path is built) "
                    "and exit")
    sub = ap.add_subparsers(dest="cmd", required=True, metavar="COMMAND",
                            help="what to do (python -m ptxdsl COMMAND --help for its options)")
    p = sub.add_parser("demo", help="build, assemble and (on a Hopper GPU) run every sample")
    p.add_argument("-o", "--output", default="out",
                   help="folder for the .ptx files (default: %(default)s)")
    p.add_argument("only", nargs="*", help="run only these samples (file stems)")
    p.set_defaults(fn=cmd_demo)
    p = sub.add_parser("emit", help="write the modules a Python file defines as .ptx")
    p.add_argument("file", help="a Python file defining Modules at top level or in "
                   "build_module()/build_modules()")
    p.add_argument("-o", "--output", default=".",
                   help="folder for the .ptx files (default: the current one)")
    p.add_argument("--assemble", action="store_true", help="also assemble with nvJitLink")
    p.set_defaults(fn=cmd_emit)
    p = sub.add_parser("forms", help="instruction forms with their PTX ISA version and target")
    p.set_defaults(fn=cmd_forms)
    p = sub.add_parser("check", help="report async-proxy and tensor-map hazards")
    p.add_argument("file", nargs="+", help="a Python file defining Modules at top level or "
                   "in build_module()/build_modules(); or PTX files and folders of them "
                   "(any compiler's PTX: nvcc, Triton, ptxdsl)")
    p.add_argument("--format", choices=("text", "json", "sarif"), default="text",
                   help="report format for PTX files (default: %(default)s)")
    p.add_argument("--strict", action="store_true", help="exit non-zero on warnings too")
    p.add_argument("--notes", action="store_true",
                   help="also say which checks were skipped for lack of information")
    p.set_defaults(fn=cmd_check)
    p = sub.add_parser("lift", help="write a Python program that rebuilds a PTX file "
                       "through ptxdsl's classes, to edit it in Python")
    p.add_argument("file", help="a PTX file (any compiler's)")
    p.add_argument("-o", "--output", default=None,
                   help="the Python file to write (default: print the program)")
    p.set_defaults(fn=cmd_lift)
    # Parsed by ptxdsl.fuzz's own parser (so the options stay one list, and hypothesis is
    # imported only for this command): listed here for --help.
    sub.add_parser("fuzz", add_help=False, help="fuzz the builders against ptxas (the "
                   "options of python -m ptxdsl.fuzz; see python -m ptxdsl fuzz --help)")
    return ap


# What a shell reports for a command that SIGPIPE ended (128 + 13): a reader that closed the
# pipe early (`python -m ptxdsl forms | head`) ends ptxdsl as it ends other Unix tools.
EXIT_BROKEN_PIPE = 141


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    try:
        if argv[:1] == ["fuzz"]:
            rc = cmd_fuzz(argv[1:])
        else:
            args = parser().parse_args(argv)
            rc = args.fn(args)
        sys.stdout.flush()   # inside the try: a pipe closed early fails here, not at exit
    except BrokenPipeError:
        # The idiom of Python's signal docs ("Note on SIGPIPE"): stdout goes to devnull so
        # the interpreter's last flush at exit does not fail again with a traceback.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_BROKEN_PIPE
    return rc


if __name__ == "__main__":
    sys.exit(main())
