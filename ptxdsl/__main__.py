"""`python -m ptxdsl`: demo, emit, forms, check.

- `demo`: build every sample in samples/, write its .ptx under out/, assemble it for its target
  with nvJitLink, and run it (checked against numpy) when a Hopper GPU is present.
- `emit FILE.py`: run a Python file and write every `Module` it defines (or its
  `build_module()`'s) as .ptx.
- `forms`: the table of instruction forms with the PTX ISA version and target each needs.
- `check FILE.py`: the static hazard checker over every module a file defines.
"""

from __future__ import annotations

import argparse
import runpy
import sys
import time
from pathlib import Path

from .module import Module

REPO_ROOT = Path(__file__).resolve().parent.parent
SAMPLES_DIR = REPO_ROOT / "samples"


def modules_in(path: str | Path) -> dict[str, Module]:
    """Run a Python file and collect its modules: globals that are `Module`s, plus what a
    `build_module()` (or `build_modules()` returning a dict) gives."""
    ns = runpy.run_path(str(path), run_name="__ptxdsl__")
    found = {name: v for name, v in ns.items() if isinstance(v, Module)}
    if callable(ns.get("build_module")):
        found["build_module"] = ns["build_module"]()
    if callable(ns.get("build_modules")):
        found.update(ns["build_modules"]())
    return found


def cmd_emit(args) -> int:
    mods = modules_in(args.file)
    if not mods:
        print(f"{args.file}: defines no ptxdsl Module (nor build_module())", file=sys.stderr)
        return 1
    out = Path(args.output)
    stem = Path(args.file).stem
    for name, mod in mods.items():
        path = out / (f"{stem}.ptx" if len(mods) == 1 else f"{stem}.{name}.ptx")
        mod.write(path)
        print(f"wrote {path} (.version {mod.version}, .target {mod.target})")
        if args.assemble:
            t0 = time.perf_counter()
            cubin = mod.assemble()
            print(f"  assembled {len(cubin)} bytes of cubin for {cubin.arch} "
                  f"({cubin.report.arch_reason}) in {(time.perf_counter() - t0) * 1e3:.1f} ms")
    return 0


def cmd_forms(args) -> int:
    from .forms import forms_table
    print(forms_table())
    return 0


def cmd_check(args) -> int:
    from .checker import Severity, check_module
    mods = modules_in(args.file)
    worst = 0
    for name, mod in mods.items():
        findings = check_module(mod)
        for f in findings:
            print(f.format())
            worst = max(worst, 2 if f.severity is Severity.error else 1)
        if not findings:
            print(f"{args.file}:{name}: no hazards found")
    return 1 if worst == 2 or (worst and args.strict) else 0


def sample_files() -> list[Path]:
    return sorted(p for p in SAMPLES_DIR.glob("*.py") if not p.name.startswith("_"))


def cmd_demo(args) -> int:
    if not SAMPLES_DIR.is_dir():
        print(f"samples/ not found next to the ptxdsl package ({SAMPLES_DIR}); run the demo "
              "from a checkout (pip install -e .)", file=sys.stderr)
        return 1
    out = Path(args.output)
    failures = []
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
        rc = main(["--ptx", str(out / f"{path.stem}.ptx")])
        rc = rc or main([])
        if rc:
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


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m ptxdsl", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("demo", help="build, assemble and (on a Hopper GPU) run every sample")
    p.add_argument("-o", "--output", default="out", help="folder for the .ptx files")
    p.add_argument("only", nargs="*", help="run only these samples (file stems)")
    p.set_defaults(fn=cmd_demo)
    p = sub.add_parser("emit", help="write the modules a Python file defines as .ptx")
    p.add_argument("file")
    p.add_argument("-o", "--output", default=".")
    p.add_argument("--assemble", action="store_true", help="also assemble with nvJitLink")
    p.set_defaults(fn=cmd_emit)
    p = sub.add_parser("forms", help="instruction forms with their PTX ISA version and target")
    p.set_defaults(fn=cmd_forms)
    p = sub.add_parser("check", help="report async-proxy and tensor-map hazards")
    p.add_argument("file")
    p.add_argument("--strict", action="store_true", help="exit non-zero on warnings too")
    p.set_defaults(fn=cmd_check)
    args = ap.parse_args(argv)
    return args.fn(args)


if __name__ == "__main__":
    sys.exit(main())
