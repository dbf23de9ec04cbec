"""The harness every sample in `samples/` shares: its command line, GPU detection, the offline
fallback, and the report of checks against numpy.

A sample defines `build_module()` (its ptxdsl `Module`), `run()` (the GPU work, returning a
`Report`) and `main(argv=None)`, which is one call::

    def main(argv=None):
        return sample_main(argv, __doc__, build_module, run)

`main` then behaves the same from the shell (`python samples/x.py ...`) and from
`python -m ptxdsl demo`:

- `--ptx PATH`: write the module's PTX to PATH and return 0 (no GPU needed); a PATH that
  cannot be written is one line on stderr and 1;
- `--save-ptx PATH`: write it the same way, then go on as below (what `python -m ptxdsl demo`
  asks of each sample: one call that writes, then runs or assembles);
- on a Hopper GPU: run the sample, print one line per check and a verdict, return 0 or 1;
- with no usable GPU: say why, assemble the PTX offline with nvJitLink instead (printing the
  target, the cubin size and the time it took) and return 0.

A sample built on another (`allgather_gemm` on `gemm_hopper`) loads it with
`sibling_sample(__file__, "gemm_hopper")`.

A multi-GPU sample's `main` is `multi_gpu_main(...)`: under `torchrun` it runs its rank; run
plainly with 2 or more Hopper GPUs that reach each other's memory it relaunches itself under
`torchrun` with a timeout (`torchrun`); with fewer it says why once and goes on as above with
its one-GPU run (`not_run` when it has none), or offline without a GPU.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import subprocess
import sys
import time
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

import numpy as np

from .errors import OutputError
from .module import Module

if TYPE_CHECKING:
    from .debug import Recorder

# The folder for PTX a sample writes without being given a path (multi_gpu_tensormap writes
# its module before its single-GPU fallback; the demo gives it --save-ptx instead).
PTX_DIR = Path("out")
# How long a sample waits for the GPU before calling a kernel hung (seconds). A hang raises
# `SyncTimeoutError` instead of freezing the process.
SYNC_TIMEOUT_S = 30.0
# How long a multi-GPU sample's ranks may run under torchrun before the run counts as hung.
TORCHRUN_TIMEOUT_S = 600
# Output buffers are filled with this byte before every launch, so a result the kernel never
# wrote cannot pass for a correct one (no random data is 0xA5 everywhere).
POISON = 0xA5


class Report:
    """The checks a sample made on the GPU's results, in order.

    From the command line (`sample_main`) each line is printed as it is made (`live`), so a
    fault in a later launch still shows what passed before it; `format()` gives them all.
    """

    live = False   # set by sample_main while a sample runs

    def __init__(self, title: str):
        self.title = title
        self.checks: list[tuple[str, bool, str]] = []
        self.notes: list[str] = []

    @property
    def ok(self) -> bool:
        return bool(self.checks) and all(ok for _, ok, _ in self.checks)

    def check(self, name: str, ok: bool, detail: str = "") -> bool:
        self.checks.append((name, bool(ok), detail))
        if self.live:
            print(self._line(name, bool(ok), detail), flush=True)
        return bool(ok)

    def note(self, text: str) -> None:
        """A line of context printed before the checks (device, sizes, timings)."""
        self.notes.append(text)
        if self.live:
            print(f"  {text}", flush=True)

    @staticmethod
    def _line(name: str, ok: bool, detail: str) -> str:
        return f"  {'ok  ' if ok else 'FAIL'} {name}" + (f": {detail}" if detail else "")

    def check_equal(self, name: str, got, want) -> bool:
        """Compare every element of `got` with `want`, bit for bit (so NaNs and -0.0 are
        compared exactly too); the detail names the first mismatches."""
        got, want = np.asarray(got), np.asarray(want)
        if got.shape != want.shape or got.dtype != want.dtype:
            return self.check(name, False, f"got {got.dtype}{list(got.shape)}, expected "
                              f"{want.dtype}{list(want.shape)}")
        if got.size == 0:
            return self.check(name, True, "0 elements")
        gb = np.ascontiguousarray(got).view(np.uint8).reshape(got.size, -1)
        wb = np.ascontiguousarray(want).view(np.uint8).reshape(want.size, -1)
        bad = np.flatnonzero((gb != wb).any(axis=1))
        if not len(bad):
            return self.check(name, True, f"{got.size} elements equal")
        shown = []
        for flat in bad[:3]:
            idx = np.unravel_index(flat, got.shape)
            shown.append(f"[{', '.join(map(str, idx))}] got {got[idx].item()!r} expected "
                         f"{want[idx].item()!r}")
        return self.check(name, False, f"{len(bad)} of {got.size} elements differ; "
                          + "; ".join(shown))

    def verdict(self) -> str:
        passed = sum(ok for _, ok, _ in self.checks)
        return (f"{'PASS' if self.ok else 'FAIL'}: {self.title}: {passed}/{len(self.checks)} "
                "checks passed")

    def format(self) -> str:
        lines = [f"  {n}" for n in self.notes]
        lines += [self._line(*c) for c in self.checks]
        return "\n".join([*lines, self.verdict()])


# The no-GPU reasons already printed in this process (`python -m ptxdsl demo` runs every
# sample in one).
_SAID: set[str] = set()


def said_once(reason: str) -> str:
    """`reason` the first time this process says it, "as above" after that: a demo without a
    GPU gives the same reason for every sample."""
    shown = "as above" if reason in _SAID else reason
    _SAID.add(reason)
    return shown


def random_array(rng: np.random.Generator, shape, dtype) -> np.ndarray:
    """Random bits of any dtype (every byte uniform), so a copy is checked bit for bit."""
    dtype = np.dtype(dtype)
    n = int(np.prod(shape, dtype=np.int64))
    return rng.integers(0, 256, n * dtype.itemsize, dtype=np.uint8).view(dtype).reshape(shape)


def sync(timeout: float = SYNC_TIMEOUT_S, *, recorder: Recorder | None = None) -> None:
    """Wait for the GPU, raising `SyncTimeoutError` after `timeout` seconds (a hung kernel);
    with a `debug.Recorder` attached to the module, its error record (which wait trapped) is
    printed before the error goes on."""
    from .runtime import synchronize
    try:
        synchronize(timeout=timeout)
    except Exception:
        if recorder is not None:
            print(f"  error record: {recorder.record()}")
        raise


def _assemble_offline(module: Module) -> int:
    from .toolchain import toolchain_version
    t0 = time.perf_counter()
    cubin = module.assemble()
    ms = (time.perf_counter() - t0) * 1e3
    print(f"  assembled offline with nvJitLink {toolchain_version()}: .target "
          f"{module.target} (.version {module.version}), {len(cubin)} bytes of cubin for "
          f"{cubin.arch} ({cubin.report.arch_reason}) in {ms:.1f} ms")
    if cubin.report.basis:
        print(f"  {cubin.report.basis}")
    return 0


def _write(module: Module, option: str, path: str) -> bool:
    # A path that cannot be written is the command line's mistake, not the sample's: one line
    # naming it, where a traceback through this harness would say no more.
    if os.path.isdir(path):
        print(f"  cannot write {option} {path}: it is a folder", file=sys.stderr)
        return False
    try:
        module.write(path)
    except OutputError as e:   # no permission, a parent that is a file, a full disk, ...
        print(f"  {option}: {e.message}", file=sys.stderr)
        return False
    print(f"  wrote {path} (.version {module.version}, .target {module.target})")
    return True


def sample_main(argv: list[str] | None, doc: str | None, build_module: Callable[[], Module],
                run: Callable[[], Report], *,
                skip_reason: Callable[[], str | None] | None = None,
                needs: str = "Hopper GPU") -> int:
    """The `main(argv)` of a sample: see the module docstring. `skip_reason`: why the GPU
    here cannot run the sample, or None (default `runtime.gpu_skip_reason`, Hopper); `needs`
    names the GPU it wants in the line that says why it did not run (samples/gemm_blackwell.py
    wants compute capability 10.0)."""
    summary = (doc or "").strip().splitlines()[0] if doc else None
    ap = argparse.ArgumentParser(description=doc,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    paths = ap.add_mutually_exclusive_group()
    paths.add_argument("--ptx", metavar="PATH",
                       help="write the module's PTX to PATH and exit (no GPU needed)")
    paths.add_argument("--save-ptx", metavar="PATH",
                       help="write the module's PTX to PATH, then run it (or assemble it "
                       "offline) as without this option")
    args = ap.parse_args(argv)
    module = None
    if args.ptx or args.save_ptx:
        module = build_module()
        option, path = ("--ptx", args.ptx) if args.ptx else ("--save-ptx", args.save_ptx)
        if not _write(module, option, path):
            return 1
        if args.ptx:
            return 0

    from .runtime import device_info, gpu_skip_reason
    reason = (skip_reason or gpu_skip_reason)()
    if reason is not None:
        # One reason for the whole demo: the first sample says it, the others refer to it.
        print(f"  no {needs} here ({said_once(reason)}); assembling the PTX offline "
              "instead of running it")
        return _assemble_offline(module or build_module())

    print(f"  {device_info(0)}" + (f": {summary}" if summary else ""))
    t0 = time.perf_counter()
    Report.live = True
    try:
        report = run()
    except Exception:  # a sample that raises fails, with the reason printed
        traceback.print_exc(file=sys.stdout)
        print("FAIL: the sample raised an exception (above)")
        return 1
    finally:
        Report.live = False
    print(report.verdict())
    print(f"  ({time.perf_counter() - t0:.2f} s)")
    return 0 if report.ok else 1


def sibling_sample(anchor: str, name: str) -> ModuleType:
    """The sample `name`.py in the folder of `anchor` (a sample's `__file__`), loaded once per
    file: in a checkout the samples are scripts, not a package, so they are found beside each
    other rather than on sys.path (which this leaves alone). Keyed by the file's path, so a
    checkout's samples and an installed copy's do not stand in for each other."""
    path = Path(anchor).resolve().with_name(f"{name}.py")
    key = f"_ptxdsl_sample:{path}"
    mod = sys.modules.get(key)
    if mod is None:
        spec = importlib.util.spec_from_file_location(key, path)
        if spec is None or spec.loader is None or not path.is_file():
            raise FileNotFoundError(f"sibling_sample: no sample {name}.py beside {anchor}")
        mod = importlib.util.module_from_spec(spec)
        sys.modules[key] = mod
        spec.loader.exec_module(mod)
    return mod


# -- multi-GPU samples ---------------------------------------------------------------------
def torchrun_world(worlds: Sequence[int] = (2,)) -> tuple[int, str | None]:
    """(the largest of `worlds` the visible GPUs hold, or the smallest; None when that many
    Hopper GPUs with peer access are there, else why not)."""
    from .runtime import device_count, multi_gpu_skip_reason
    try:
        n = device_count()
    except Exception:      # no driver: multi_gpu_skip_reason says so
        n = 0
    world = max((w for w in worlds if w <= n), default=min(worlds))
    return world, multi_gpu_skip_reason(world)


def torchrun(sample: str, nproc: int, args: Sequence[str] = (), *, capture: bool = False,
             timeout_s: float = TORCHRUN_TIMEOUT_S) -> tuple[int, str]:
    """`sample` (a file) under `python -m torch.distributed.run --standalone
    --nproc-per-node nproc` with `args`, killed after `timeout_s` (a lost signal must not
    hang the caller): (its exit status, 1 on a timeout; its output when `capture`, else it
    goes to this process's)."""
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone",
           f"--nproc-per-node={nproc}", str(Path(sample).resolve()), *args]
    try:
        res = subprocess.run(cmd, capture_output=capture, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout if isinstance(exc.stdout, str) else (exc.stdout or b"").decode()
        why = f"FAIL: torchrun did not finish within {timeout_s:g} s"
        if not capture:
            print(why, flush=True)
        return 1, f"{out}\n{why}"
    return res.returncode, (res.stdout + res.stderr) if capture else ""


def not_run(title: str, reason: str, build: Callable[[], Module],
            what: str = "every kernel") -> Report:
    """The report of a multi-GPU sample with no one-GPU run: why it did not run, and its
    module built, checked and assembled."""
    report = Report(title)
    report.note(f"needs 2 Hopper GPUs with peer access ({reason}): not run")
    cubin = build().assemble("sm_90a")
    report.check(f"{what} built, checked clean and assembled", len(cubin) > 0,
                 f"{len(cubin)} bytes of cubin")
    return report


def _save_ptx_path(argv: Sequence[str]) -> str | None:
    for i, a in enumerate(argv):
        if a == "--save-ptx" and i + 1 < len(argv):
            return argv[i + 1]
        if a.startswith("--save-ptx="):
            return a.partition("=")[2]
    return None


def multi_gpu_main(argv: list[str] | None, doc: str | None,
                   build_module: Callable[[], Module], run: Callable[[], Report], *,
                   sample: str, rank_main: Callable[[], int],
                   one_gpu: Callable[[str], Report] | None = None,
                   worlds: Sequence[int] = (2,), flags: Sequence[str] = (),
                   keep_ptx: bool = False, timeout_s: float = TORCHRUN_TIMEOUT_S) -> int:
    """The `main(argv)` of a multi-GPU sample (file `sample`, its `__file__`):

    - `--ptx PATH` / `--help`: as `sample_main`;
    - under torchrun (RANK and WORLD_SIZE set): `rank_main()`, this rank's checks;
    - with the largest of `worlds` Hopper GPUs with peer access visible (2 at least): the
      PTX of `--save-ptx` written here, then the file relaunched under torchrun on that many
      (`torchrun`, killed after `timeout_s`, with `flags` given on the command line passed
      on to the ranks); its exit status. Without torch installed, `run()` in this process instead;
    - otherwise: why, said once, then `sample_main` with `one_gpu(reason)` as the run (on
      one GPU; default `not_run`: built, checked, assembled) or, with no GPU, offline
      assembly. `keep_ptx`: the module's PTX is kept in out/<sample>.ptx unless
      `--save-ptx` names a path."""
    argv = sys.argv[1:] if argv is None else list(argv)
    if any(a.startswith("--ptx") or a in ("-h", "--help") for a in argv):
        return sample_main(argv, doc, build_module, run)
    if "RANK" in os.environ and "WORLD_SIZE" in os.environ:
        return rank_main()
    name = Path(sample).stem
    passed = [a for a in argv if a in flags]
    argv = [a for a in argv if a not in flags]
    world, reason = torchrun_world(worlds)
    if reason is None:
        if importlib.util.find_spec("torch") is None:
            print("  no torch here: the ranks run in this process instead of under torchrun")
            return sample_main(argv, doc, build_module, run)
        path = _save_ptx_path(argv)    # (the demo's: written here, the ranks only run)
        if path and sample_main(["--ptx", path], doc, build_module, run):
            return 1
        print(f"  running {name} under torchrun on {world} GPUs", flush=True)
        return torchrun(sample, world, passed, timeout_s=timeout_s)[0]
    if keep_ptx and _save_ptx_path(argv) is None:
        argv += ["--save-ptx", str(PTX_DIR / f"{name}.ptx")]
    needs = f"  {name} needs 2 Hopper GPUs with peer access for torchrun: "
    from .runtime import gpu_skip_reason
    if gpu_skip_reason() is not None:
        # no GPU: sample_main says why in full (in the demo, once for every sample), then
        # this line refers to it
        code = sample_main(argv, doc, build_module, run)
        print(needs + said_once(reason))
        return code
    print(needs + said_once(reason))
    fallback = one_gpu or (lambda why: not_run(name, why, build_module))
    return sample_main(argv, doc, build_module, lambda: fallback(reason))
