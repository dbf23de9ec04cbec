"""What every benchmark shares: statistics over repeated runs, host and GPU timers, the result
record each section fills, and the environment description.

A section's result is plain data (JSON-ready):

    {"id": ..., "title": ..., "what": ..., "rows": [row, ...], "targets": [target, ...],
     "notes": [...], "error": None}
    row    = {"name", "unit", "median", "min", "max", "n", "note"}
    target = {"name", "value", "goal", "met", "note"}

Host latencies come from `time.perf_counter` around many calls after a warm-up; GPU times
from CUDA events around the work on one stream.
"""

from __future__ import annotations

import datetime
import os
import platform
import statistics
import subprocess
import sys
import time
import traceback
from collections.abc import Callable, Sequence


def summarize(samples: Sequence[float]) -> dict:
    """median, min, max and the count of `samples`."""
    values = [float(v) for v in samples]
    if not values:
        raise ValueError("no samples")
    return {"median": statistics.median(values), "min": min(values), "max": max(values),
            "n": len(values)}


class Section:
    """One comparison: its rows (each a measured quantity over repeated runs) and targets."""

    def __init__(self, id: str, title: str, what: str = ""):
        self.id, self.title, self.what = id, title, what
        self.rows: list[dict] = []
        self.targets: list[dict] = []
        self.notes: list[str] = []
        self.error: str | None = None

    def row(self, name: str, samples: Sequence[float], unit: str, note: str = "") -> dict:
        r = {"name": name, "unit": unit, **summarize(samples), "note": note}
        self.rows.append(r)
        return r

    def skip(self, name: str, why: str) -> None:
        """A row that could not be measured here, and why."""
        self.rows.append({"name": name, "unit": "", "median": None, "min": None, "max": None,
                          "n": 0, "note": f"not measured: {why}"})

    def target(self, name: str, value: float | None, goal: str, met: bool | None,
               note: str = "") -> None:
        self.targets.append({"name": name, "value": value, "goal": goal,
                             "met": None if met is None else bool(met), "note": note})

    def note(self, text: str) -> None:
        self.notes.append(text)

    def find(self, name: str) -> dict | None:
        return next((r for r in self.rows if r["name"] == name and r["median"] is not None),
                    None)

    def as_dict(self) -> dict:
        return {"id": self.id, "title": self.title, "what": self.what, "rows": self.rows,
                "targets": self.targets, "notes": self.notes, "error": self.error}


def guarded(section: Section, body: Callable[[Section], None]) -> Section:
    """Run `body(section)`; an exception is recorded in the section instead of ending the run."""
    try:
        body(section)
    except Exception as exc:  # noqa: BLE001 - a failing row must not hide the others
        section.error = f"{type(exc).__name__}: {exc}"
        section.note("traceback (last lines): " + " | ".join(
            line.strip() for line in traceback.format_exc().strip().splitlines()[-6:]))
        print(f"[{section.id}] FAILED: {section.error}", file=sys.stderr, flush=True)
    return section


# -- multi-GPU sections --------------------------------------------------------------------------
def run_worlds(section: Section, module: str, worlds: Sequence[int], timeout_s: float,
               record: Callable[[Section, int, dict], None]) -> None:
    """A multi-GPU section: for each world size, `module`'s worker under torchrun
    (`torchrun_worker`), its data given to `record(section, world, data)`."""
    try:
        import torch
    except ImportError as exc:
        section.error = f"skipped: the baselines need torch ({exc})"
        return
    try:
        nccl = ".".join(map(str, torch.cuda.nccl.version()))
    except (AttributeError, RuntimeError):      # a torch built without CUDA
        nccl = "not built in"
    section.note(f"torch {torch.__version__}, NCCL {nccl}")
    for world in worlds:
        data = torchrun_worker(section, module, world, timeout_s)
        if data is not None:
            record(section, world, data)


def rank_worker(out: str, body: Callable[..., tuple[dict, list[str]]]) -> int:
    """One rank of a multi-GPU section's worker, under torchrun: its device and process group
    (NCCL), then `body(dev, rank, world)` -> (rows, notes), which rank 0 writes to `out` as
    JSON; every rank meets the others before the group ends (no rank frees its buffers while
    a peer may still read them)."""
    import json

    import torch
    import torch.distributed as dist
    local = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local)
    dev = torch.device("cuda", local)
    dist.init_process_group("nccl", device_id=dev)
    rank, world = dist.get_rank(), dist.get_world_size()
    rows, notes = body(dev, rank, world)
    if rank == 0:
        with open(out, "w") as f:
            json.dump({"rows": rows, "notes": notes}, f)
    dist.barrier()
    dist.destroy_process_group()
    return 0


def repeat(fn: Callable[[], object], calls: int) -> None:
    """`calls` calls of `fn`, back to back (their results dropped as they come)."""
    for _ in range(calls):
        fn()


def slowest_rank_us(dev, calls: int, run: Callable[[], object]) -> float:
    """One sample: all ranks start together (a barrier), `run()` makes `calls` calls timed
    with CUDA events on the rank's current stream, and the slowest rank's time per call in
    microseconds is every rank's result."""
    import torch
    import torch.distributed as dist
    dist.barrier()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(True), torch.cuda.Event(True)
    start.record()
    run()
    end.record()
    end.synchronize()
    t = torch.tensor([start.elapsed_time(end) * 1e3 / calls], device=dev)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return float(t)


def torchrun_worker(section: Section, module: str, world: int, timeout_s: float) -> dict | None:
    """`python -m <module> --worker OUT.json` under `torchrun --standalone` with `world`
    processes (one per GPU), and the JSON rank 0 wrote; None, with a skipped row "W=<world>"
    saying why, where the host has too few GPUs or the run failed or timed out."""
    import json
    import tempfile

    from ptxdsl.runtime import multi_gpu_skip_reason
    label = f"W={world}"
    reason = multi_gpu_skip_reason(world)
    if reason is not None:
        section.skip(label, f"needs {world} Hopper GPUs with peer access: {reason}")
        return None
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "rows.json")
        cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone",
               f"--nproc-per-node={world}", "-m", module, "--worker", out]
        try:
            res = subprocess.run(cmd, cwd=root, capture_output=True, text=True,
                                 timeout=timeout_s)
        except subprocess.TimeoutExpired:
            section.skip(label, f"the torchrun timed out after {timeout_s:.0f} s")
            return None
        if res.returncode != 0 or not os.path.exists(out):
            section.skip(label, f"the torchrun failed ({res.returncode}): "
                         + (res.stdout + res.stderr)[-1500:])
            return None
        with open(out) as f:
            return json.load(f)


# -- timers ------------------------------------------------------------------------------------
def host_us_per_call(fn: Callable[[], object], *, calls: int, reps: int, warmup: int = 1,
                     after: Callable[[], object] | None = None) -> list[float]:
    """Microseconds per call of `fn`: `reps` samples, each the mean over `calls` calls timed
    with perf_counter (`after`, e.g. a synchronize, runs outside the timed region)."""
    return host_us_interleaved({"fn": fn}, calls=calls, reps=reps, warmup=warmup,
                               after=after)["fn"]


def host_us_interleaved(fns: dict[str, Callable[[], object]], *, calls: int, reps: int,
                        warmup: int = 2, after: Callable[[], object] | None = None
                        ) -> dict[str, list[float]]:
    """`host_us_per_call` for several contenders at once, their samples taken in turn (rep 1
    of each, then rep 2 of each, ...): a contender timed first would otherwise meet a colder
    CPU (clock ramp, caches) than one timed last, and the ratio would say when it ran."""
    names = list(fns)
    for _ in range(warmup):
        for name in names:
            for _ in range(calls):
                fns[name]()
            if after is not None:
                after()
    out: dict[str, list[float]] = {name: [] for name in names}
    for _ in range(reps):
        for name in names:
            f = fns[name]
            t0 = time.perf_counter()
            for _ in range(calls):
                f()
            t1 = time.perf_counter()
            if after is not None:
                after()
            out[name].append((t1 - t0) / calls * 1e6)
    return out


def checker_note(module, reps: int = 5) -> str:
    """The hazard checker's time on a built module (median of `reps` runs of
    `check_module`, the module built once before) and what it found, for a section's notes."""
    from ptxdsl.checker import check_module
    findings = check_module(module)
    times = host_ms(lambda: check_module(module), reps=reps)
    kernels = ", ".join(k.name for k in module.kernels)
    return (f"hazard checker on {module.name} ({kernels}): {statistics.median(times):.0f} ms "
            f"median of {reps}, {len(findings)} findings")


def host_ms(fn: Callable[[], object], *, reps: int, warmup: int = 1) -> list[float]:
    """Milliseconds of one call of `fn` (perf_counter), `reps` samples after `warmup` calls."""
    for _ in range(warmup):
        fn()
    out = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t0) * 1e3)
    return out


def gpu_ms(fn: Callable[[], object], *, reps: int, warmup: int = 2, stream=None) -> list[float]:
    """Milliseconds of the GPU work `fn` enqueues on `stream`, from CUDA events recorded around
    it (one pair per sample)."""
    from ptxdsl.runtime import Event
    for _ in range(warmup):
        fn()
    start, end = Event(), Event()
    out = []
    for _ in range(reps):
        start.record(stream)
        fn()
        end.record(stream)
        end.synchronize()
        out.append(start.elapsed_ms(end))
    start.close()
    end.close()
    return out


# The host's time to issue one launch, at most (a PyTorch op through its dispatcher on a slow
# host, or ptxdsl's launch with tensor maps built in Python): what a held burst allows for.
ISSUE_US = 60.0
# ... and the longest hold: enough for 40-launch bursts of kernels 12 us shorter than their
# host time (section 7's shortest: e4m3 one-row kernels of 14 us against 20-27 us)
HOLD_MAX_US = 500.0
_held: dict[str, object] = {}


def _hold_function():
    """`bench_hold(ns)`: one thread that spins on %globaltimer until `ns` nanoseconds have
    passed; loaded once per process."""
    if "fn" not in _held:
        from ptxdsl import Kernel, Module, t
        k = Kernel("bench_hold", reqntid=32)
        until = k.add(k.globaltimer, k.ld_param(k.param(t.u64, "ns")))
        with k.while_(lambda: k.globaltimer < until):
            k.nanosleep(1000)
        _held["module"] = Module([k], name="bench_hold", target="sm_90a").load()
        _held["fn"] = _held["module"]["bench_hold"]
    return _held["fn"]


def hold_gpu(us: float, stream=None) -> None:
    """Keep `stream` busy for `us` microseconds from when this launch starts, so that the
    launches issued after it queue up behind it instead of starting one by one as the host
    issues them."""
    _hold_function().launch(1, 32, (int(us * 1000),), stream=stream)


def interleaved_gpu_ms(launches: dict[str, Callable[[], object]], *, reps: int,
                       warmup: int = 2, stream=None, burst: int = 1,
                       settle_s: float = 0.0, hold: bool = False) -> dict[str, list[float]]:
    """CUDA-event milliseconds of each launch in `launches`, the candidates taking turns
    (ABC, CBA, ABC, ...), so a slow drift of clocks or temperature weighs on all alike.

    Each sample is the mean over `burst` launches back to back. With one, the GPU is idle
    when the start event is recorded, so the sample includes the host's time to issue the
    launch: tens of µs for a PyTorch op on a slow host, against a few for ptxdsl's. A burst
    keeps the GPU busy while the host issues the next launch, so that only the first
    launch's issue time is counted, `1 / burst` of it per launch. That holds only while a
    launch runs longer than the host takes to issue the next one; for kernels of a few tens
    of µs it may not (a PyTorch op's dispatch, a launch that builds tensor maps in Python),
    and then the sample is the host's issue rate. With `hold`, a spinning kernel (`hold_gpu`)
    keeps the stream busy before the start event for ISSUE_US per launch of the burst, at most
    HOLD_MAX_US, so the host stays ahead of the GPU through the burst and the sample is the
    GPU's time alone, for every candidate.

    With `settle_s`, the candidates first take turns untimed for that many seconds, so that
    the samples see the clocks a sustained load runs at: a GPU at its power limit lowers its
    clock within a second of load, and a kernel that waits on DRAM loses less to that than
    one that waits on its tensor pipes, so timing from an idle GPU favours the latter."""
    from ptxdsl.runtime import Event
    for fn in launches.values():
        for _ in range(warmup):
            fn()
    start, end = Event(), Event()
    out: dict[str, list[float]] = {label: [] for label in launches}
    order = list(launches)
    until = time.perf_counter() + settle_s
    while time.perf_counter() < until:
        for label in order:
            for _ in range(burst):
                launches[label]()
        end.record(stream)
        end.synchronize()
    for i in range(reps):
        for label in order if i % 2 == 0 else order[::-1]:
            if hold:
                hold_gpu(min(ISSUE_US * burst, HOLD_MAX_US), stream)
            start.record(stream)
            for _ in range(burst):
                launches[label]()
            end.record(stream)
            end.synchronize()
            out[label].append(start.elapsed_ms(end) / burst)
    start.close()
    end.close()
    return out


# -- environment -------------------------------------------------------------------------------
def _version(module: str) -> str | None:
    try:
        from importlib.metadata import version
        return version(module)
    except Exception:  # noqa: BLE001 - not installed
        return None


def _command(args: list[str]) -> str | None:
    try:
        out = subprocess.run(args, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def nvcc_path() -> str | None:
    """nvcc on PATH, or in CUDA_HOME / /usr/local/cuda."""
    import shutil
    found = shutil.which("nvcc")
    if found:
        return found
    for home in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        if home and os.path.exists(os.path.join(home, "bin", "nvcc")):
            return os.path.join(home, "bin", "nvcc")
    return None


def cuda_include_dirs() -> list[str]:
    """Include folders holding <cuda.h> and <cuda/ptx> (CCCL), for NVRTC."""
    nvcc = nvcc_path()
    homes = [os.path.dirname(os.path.dirname(os.path.realpath(nvcc)))] if nvcc else []
    homes += [h for h in (os.environ.get("CUDA_HOME"), "/usr/local/cuda") if h]
    out = []
    for home in homes:
        for sub in ("include", "include/cccl", "targets/x86_64-linux/include",
                    "targets/x86_64-linux/include/cccl"):
            path = os.path.join(home, sub)
            if os.path.isdir(path) and path not in out:
                out.append(path)
    return out


def environment() -> dict:
    """GPU, driver, CUDA and tool versions, host, date."""
    env: dict = {
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "python": platform.python_version(),
        "host": platform.node(),
        "cpu": _cpu_name(),
        "packages": {name: _version(name) for name in (
            "cuda-bindings", "cuda-core", "cupy-cuda13x", "cupy-cuda12x", "cupy", "numpy",
            "nvidia-nvjitlink", "attrs", "torch")},
    }
    env["packages"] = {k: v for k, v in env["packages"].items() if v}
    nvcc = nvcc_path()
    if nvcc:
        out = _command([nvcc, "--version"]) or ""
        env["nvcc"] = out.splitlines()[-1] if out else None
    smi = _command(["nvidia-smi", "--query-gpu=name,driver_version,memory.total,clocks.max.sm,"
                    "clocks.max.mem", "--format=csv,noheader"])
    if smi:
        env["nvidia_smi"] = smi.splitlines()[0]
    try:
        from ptxdsl import toolchain
        env["nvjitlink"] = toolchain.toolchain_version()
    except Exception:  # noqa: BLE001
        env["nvjitlink"] = None
    try:
        from ptxdsl.runtime import device_info, gpu_skip_reason
        reason = gpu_skip_reason()
        env["gpu_skip_reason"] = reason
        if reason is None:
            info = device_info(0)
            v = info.driver_version
            env.update(gpu=info.name, compute_capability=".".join(map(str,
                       info.compute_capability)), sm_count=info.sm_count,
                       memory_gib=round(info.total_memory / 2**30, 1),
                       l2_mib=round(info.l2_cache_bytes / 2**20, 1),
                       cuda_driver_api=f"{v // 1000}.{v % 1000 // 10}")
    except Exception as exc:  # noqa: BLE001
        env["gpu_skip_reason"] = f"{type(exc).__name__}: {exc}"
    return env


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return f"{line.split(':', 1)[1].strip()} ({os.cpu_count()} CPUs)"
    except OSError:
        pass
    return platform.processor() or "?"
