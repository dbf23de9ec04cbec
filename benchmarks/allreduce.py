"""Row 9: all-reduce (sum, bf16) across the GPUs of one host: ptxdsl's one-shot and two-shot
kernels on PyTorch symmetric memory (samples/allreduce.py) against NCCL (`dist.all_reduce`) and
torch's symmetric-memory kernels (`torch.ops.symm_mem.one_shot_all_reduce` and
`two_shot_all_reduce_`), at 8 KiB ... 32 MiB, on 2 GPUs and, where visible, 4.

Each world size runs in its own `torchrun` (one process per GPU, `--standalone`). Every
candidate's result is compared with NCCL's before it is timed (bf16: the largest difference
over the largest value below 2e-2). Without CUDA graphs a sample is the mean time per call of
CALLS back-to-back calls (CUDA events on each rank's stream; the host's issue time included,
as a caller sees it); with graphs, CALLS calls captured in one graph and replayed. All ranks
start each sample together (a `dist.barrier`), the candidates take turns, and a sample's time
is the slowest rank's. Medians of REPS samples. Algorithm bandwidth is the message size over
the time; the NVLink share is of 450 GB/s, an H100 SXM's NVLink bandwidth in each direction.
ptxdsl's row is `AllReduce`'s own choice of algorithm on any tensor (copied into the symmetric
buffer inside the kernel, or sent from where it is, as NCCL takes any tensor); the one-shot,
two-shot and Lamport rows force one. The "bound" rows are the same choice through
`AllReduce.bind(x, out)`, checked once and then launched per call (as torch's symmetric-memory
ops run on buffers registered once): without CUDA graphs a small message costs its host time,
which they measure without the per-call checks.
The "symmetric input" rows take x already in the symmetric buffer (`AllReduce.symmetric_input`,
the two-shot reducing it in place), as torch's symmetric-memory kernels do. Two targets per
row: the best torch path over ptxdsl on any tensor, and over ptxdsl's faster symmetric-input
kernel.
"""

from __future__ import annotations

import sys

from benchmarks.common import Section, rank_worker, repeat, run_worlds, slowest_rank_us

SIZES = (8 << 10, 64 << 10, 512 << 10, 4 << 20, 32 << 20)       # bytes
CALLS, REPS = 50, 9
NVLINK_GBS = 450.0
GOAL_SMALL, GOAL_LARGE = 1.20, 1.00
WORKER_TIMEOUT_S = 240


def _label(nbytes: int) -> str:
    return f"{nbytes >> 20} MiB" if nbytes >= 1 << 20 else f"{nbytes >> 10} KiB"


def run(section: Section, worlds=(2, 4)) -> None:
    run_worlds(section, "benchmarks.allreduce", worlds, WORKER_TIMEOUT_S, _record)


def _record(section: Section, world: int, data: dict) -> None:
    for note in data["notes"]:
        section.note(f"W={world}: {note}")
    for nbytes in SIZES:
        for graphs in (False, True):
            mode = "CUDA graph" if graphs else "eager"
            label = f"W={world} {_label(nbytes)} {mode}"
            rows = data["rows"].get(f"{nbytes} {int(graphs)}", {})
            meds = {}
            for name, info in rows.items():
                if "error" in info:
                    section.skip(f"{label}: {name}", info["error"])
                    continue
                us = info["us"]
                r = section.row(f"{label}: {name}", us, "us", _note(nbytes, us, info))
                meds[name] = r["median"]
            theirs = {n: m for n, m in meds.items() if not n.startswith("ptxdsl")}
            if not theirs:
                continue
            best = min(theirs, key=lambda n: theirs[n])
            goal = GOAL_LARGE if nbytes >= 32 << 20 else GOAL_SMALL
            for what, names in (("ptxdsl", ["ptxdsl", "ptxdsl bound"]),
                                ("ptxdsl, symmetric input", [n for n in meds if
                                                             n.startswith("ptxdsl symmetric")])):
                ours = {n: meds[n] for n in names if n in meds}
                if not ours:
                    continue
                mine = min(ours, key=lambda n: ours[n])
                ratio = theirs[best] / ours[mine]
                section.target(f"{label}: best of NCCL and torch symm-mem / {what}",
                               round(ratio, 3), f">= {goal:.2f}", ratio >= goal,
                               f"best: {best}; ours: {mine}")


def _note(nbytes: int, us: list[float], info: dict) -> str:
    med = sorted(us)[len(us) // 2]
    gbs = nbytes / (med * 1e-6) / 1e9
    extra = f"; {info['note']}" if info.get("note") else ""
    return (f"algorithm bandwidth {gbs:.1f} GB/s ({gbs / NVLINK_GBS:.0%} of NVLink's "
            f"{NVLINK_GBS:.0f} GB/s){extra}")


# -- the worker (one per rank, under torchrun) ---------------------------------------------------
def _worker(out: str) -> int:
    return rank_worker(out, _rows)


def _rows(dev, rank: int, world: int) -> tuple[dict, list[str]]:
    import torch
    import torch.distributed as dist
    import torch.distributed._symmetric_memory as symm_mem

    from benchmarks.compile_latency import load_sample
    group = dist.group.WORLD.group_name
    sample = load_sample("allreduce")
    numel = max(SIZES) // 2
    # Lamport slots for every size, so that its forced rows show where it wins; `AllReduce`'s
    # own choice still takes it only up to LAMPORT_MAX_BYTES
    ar = sample.AllReduce(numel, "bf16", lamport_bytes=max(SIZES))
    symm = symm_mem.empty(numel, dtype=torch.bfloat16, device=dev)
    symm_mem.rendezvous(symm, group)
    rows: dict[str, dict] = {}
    notes = [f"rank 0 on {torch.cuda.get_device_name(dev)}"]
    env = (torch, dist, torch.ops.symm_mem, ar, sample, symm, group, dev, rank, world)
    for nbytes in SIZES:
        rows.update(_size_rows(env, nbytes))
    return rows, notes


def _size_rows(env: tuple, nbytes: int) -> dict[str, dict]:
    """Every candidate at one message size, eager and graph-captured: {"<bytes> <graphs>":
    {name: {"us": [...], "note": ...} or {"error": why}}}."""
    torch, dist, ops, ar, sample, symm, group, dev, rank, world = env
    n = nbytes // 2
    gen = torch.Generator(device=dev).manual_seed(rank + 1)
    x = torch.randn(n, generator=gen, device=dev, dtype=torch.bfloat16)
    want = x.clone()
    dist.all_reduce(want)
    nccl_buf = x.clone()
    out_t = torch.empty_like(x)
    sx = symm[:n]

    def torch_symm(alg: str, copy: bool):
        def call():
            if copy:
                sx.copy_(x)
            if alg == "one_shot":
                return ops.one_shot_all_reduce(sx, "sum", group)
            ops.two_shot_all_reduce_(sx, "sum", group)
            return sx
        return call

    def ours(alg: str | None):
        return lambda: ar(x, out_t, algorithm=alg)

    xs = ar.symmetric_input(n)

    def ours_sym(alg: str, copy: bool):
        def call():
            if copy:
                xs.copy_(x)
            return ar(xs, out_t if alg == "one_shot" else xs, algorithm=alg)   # in place
        return call

    bound_sym = ar.bind(xs, out_t)
    cands = {"ptxdsl": ours(None), "ptxdsl bound": ar.bind(x, out_t),
             "ptxdsl one-shot": ours("one_shot"),
             "ptxdsl two-shot": ours("two_shot"), "ptxdsl Lamport": ours("lamport"),
             "ptxdsl Lamport two-shot": ours("lamport_two_shot"),
             "ptxdsl symmetric input one-shot": ours_sym("one_shot", False),
             "ptxdsl symmetric input two-shot (in place)": ours_sym("two_shot", False),
             "ptxdsl symmetric input Lamport (in place)": ours_sym("lamport", False),
             "ptxdsl symmetric input bound": bound_sym,
             "NCCL": lambda: dist.all_reduce(nccl_buf),
             "torch symm-mem one-shot": torch_symm("one_shot", False),
             "torch symm-mem two-shot": torch_symm("two_shot", False)}
    checks = {name: fn for name, fn in cands.items() if name.startswith("ptxdsl")}
    checks.update({"ptxdsl symmetric input one-shot": ours_sym("one_shot", True),
                   "ptxdsl symmetric input two-shot (in place)": ours_sym("two_shot", True),
                   "ptxdsl symmetric input Lamport (in place)": ours_sym("lamport", True),
                   "ptxdsl symmetric input bound": lambda: (xs.copy_(x), bound_sym())[1],
                   "torch symm-mem one-shot": torch_symm("one_shot", True),
                   "torch symm-mem two-shot": torch_symm("two_shot", True)})
    bad: dict[str, str] = {}
    scale = float(want.float().abs().max())
    for name, fn in checks.items():
        try:
            got = fn()
            got = out_t if got is None else got
            err = float((got.float() - want.float()).abs().max()) / scale
        except Exception as exc:  # a baseline this torch refuses: its row says why
            bad[name] = f"{type(exc).__name__}: {exc}"[:300]
            continue
        if not err < 2e-2:
            bad[name] = f"differs from NCCL by {err:.2e} of the largest value"
    sx.copy_(x)
    xs.copy_(x)
    rows: dict[str, dict] = {}
    for graphs in (False, True):
        key = f"{nbytes} {int(graphs)}"
        rows[key] = {name: {"error": why} for name, why in bad.items()}
        timers = {}
        for name, fn in cands.items():
            if name in bad:
                continue
            try:
                timers[name] = _graph_timer(torch, fn) if graphs else _eager_timer(fn)
                timers[name]()
            except Exception as exc:
                rows[key][name] = {"error": f"{type(exc).__name__}: {exc}"[:300]}
                timers.pop(name, None)
        samples: dict[str, list[float]] = {name: [] for name in timers}
        for _ in range(REPS):
            for name, timer in timers.items():
                samples[name].append(slowest_rank_us(dev, CALLS, timer))
        for name, us in samples.items():
            rows[key][name] = {"us": us}
            if name == "ptxdsl":
                alg = sample.choose(nbytes, world, ar.lamport_bytes,
                                    ar.lamport2_bytes).replace("_", "-")
                rows[key][name]["note"] = f"chose {alg}"
    return rows


def _eager_timer(fn):
    return lambda: repeat(fn, CALLS)


def _graph_timer(torch, fn):
    fn()
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(CALLS):
            fn()
    return graph.replay


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--worker":
        raise SystemExit(_worker(sys.argv[2]))
    raise SystemExit("usage: python -m benchmarks.allreduce --worker OUT.json (under torchrun)")
