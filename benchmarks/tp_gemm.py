"""Row 10: tensor-parallel linear layers across the GPUs of one host, the GEMM fused with its
communication (bf16): ptxdsl's GEMM + reduce-scatter (samples/gemm_reduce_scatter.py, a
row-parallel layer, K split over the ranks) and all-gather + GEMM (samples/allgather_gemm.py,
a column-parallel layer, N split over the ranks), on PyTorch symmetric memory, against the
sequential torch path (`torch.matmul`, then NCCL's `reduce_scatter_tensor`; NCCL's
`all_gather_into_tensor`, then `torch.matmul`) and torch's fused symmetric-memory ops
(`torch.ops.symm_mem.fused_matmul_reduce_scatter`, `fused_all_gather_matmul`).

Shapes: M = 8192 and the decode-like M = 128, N = K = 8192 before the split (a rank multiplies
M x K/W by K/W x N, or M x K by K x N/W). Each world size runs in its own `torchrun` (one
process per GPU). Every candidate's result is compared with the sequential path's before it
is timed (bf16: the largest difference over the largest value below 2e-2). A sample is the
mean time per call of CALLS back-to-back calls, without CUDA graphs (ptxdsl's fused layers
take a per-call counter target or epoch as a launch argument, which a graph would replay
unchanged), timed with CUDA events on each rank's stream; all ranks start a sample together
(a `dist.barrier`), the candidates take turns, and a sample's time is the slowest rank's.
Medians of REPS samples. "matmul alone" is the rank's local GEMM with no communication: the
time a perfect overlap would reach. TFLOP/s are per rank (2 x M x N x K / W); the
communication bandwidth is the bytes a rank sends (GEMM + RS: (W-1)/W of its M x N partial;
AG + GEMM: its shard to W-1 peers) over the time, with its share of 450 GB/s, an H100 SXM's
NVLink bandwidth in each direction. Targets: ptxdsl over the sequential path >= 1.15 and over
torch's fused op >= 1.00.
"""

from __future__ import annotations

import sys

from benchmarks.common import Section, rank_worker, repeat, run_worlds, slowest_rank_us

SHAPES = ((8192, 8192, 8192), (128, 8192, 8192))        # (M, N, K) before the split
OPS = ("gemm_rs", "ag_gemm")
TITLES = {"gemm_rs": "GEMM + reduce-scatter", "ag_gemm": "all-gather + GEMM"}
CALLS = {8192: 10, 128: 50}
REPS = 9
NVLINK_GBS = 450.0
GOAL_SEQUENTIAL, GOAL_FUSED = 1.15, 1.00
WORKER_TIMEOUT_S = 420
OURS, SEQUENTIAL, FUSED, ALONE = ("ptxdsl fused", "torch sequential", "torch symm-mem fused",
                                  "matmul alone")
# all-gather + GEMM with each (push, path) forced; OURS is `launch`'s choice (`push_for`,
# `path_for`)
FORCED = {"ptxdsl, fused, SM push": ("sm", "fused"),
          "ptxdsl, fused, copy-engine push": ("copy_engine", "fused"),
          "ptxdsl, gather kernel + decode GEMM": ("sm", "gather")}


def run(section: Section, worlds=(2, 4)) -> None:
    run_worlds(section, "benchmarks.tp_gemm", worlds, WORKER_TIMEOUT_S, _record)


def _record(section: Section, world: int, data: dict) -> None:
    for note in data["notes"]:
        section.note(f"W={world}: {note}")
    for op in OPS:
        for m, n, kdim in SHAPES:
            label = f"W={world} {TITLES[op]} M={m} N={n} K={kdim}"
            meds = {}
            for name, info in data["rows"].get(f"{op} {m}", {}).items():
                if "error" in info:
                    section.skip(f"{label}: {name}", info["error"])
                    continue
                r = section.row(f"{label}: {name}", info["us"], "us",
                                _note(op, world, m, n, kdim, info["us"], name != ALONE))
                meds[name] = r["median"]
            if OURS not in meds:
                continue
            for base, goal in ((SEQUENTIAL, GOAL_SEQUENTIAL), (FUSED, GOAL_FUSED)):
                if base in meds:
                    ratio = meds[base] / meds[OURS]
                    section.target(f"{label}: {base} / ptxdsl", round(ratio, 3),
                                   f">= {goal:.2f}", ratio >= goal, "medians")


def _note(op: str, world: int, m: int, n: int, kdim: int, us: list[float],
          communicates: bool) -> str:
    med = sorted(us)[len(us) // 2]
    tflops = 2 * m * n * kdim / world / (med * 1e-6) / 1e12
    sent = (world - 1) * m * (n if op == "gemm_rs" else kdim) * 2 / world
    gbs = sent / (med * 1e-6) / 1e9
    parts = [f"{tflops:.0f} TFLOP/s per rank"]
    if communicates:
        parts.append(f"sends {sent / 2**20:.1f} MiB per rank: {gbs:.0f} GB/s "
                     f"({gbs / NVLINK_GBS:.0%} of NVLink's {NVLINK_GBS:.0f} GB/s)")
    return "; ".join(parts)


# -- the worker (one per rank, under torchrun) ---------------------------------------------------
def _worker(out: str) -> int:
    return rank_worker(out, _rows)


def _rows(dev, rank: int, world: int) -> tuple[dict, list[str]]:
    import torch
    rows: dict[str, dict] = {}
    notes = [f"rank 0 on {torch.cuda.get_device_name(dev)}"]
    for op in OPS:
        rows.update(_op_rows(op, dev, rank, world, notes))
    return rows, notes


def _op_rows(op: str, dev, rank: int, world: int, notes: list[str]) -> dict[str, dict]:
    """Every candidate of one layer at each shape: {"<op> <M>": {name: {"us": [...]} or
    {"error": why}}}."""
    import torch
    import torch.distributed as dist
    import torch.distributed._symmetric_memory as symm_mem

    from benchmarks.compile_latency import load_sample
    from ptxdsl import runtime as rt
    group = dist.group.WORLD
    sms = rt.device_info(dev.index).sm_count
    rows: dict[str, dict] = {}
    if op == "gemm_rs":
        sample = load_sample("gemm_reduce_scatter")
        module = sample.build_module().load(device=dev.index).preload()
        nbytes = max(sample.buffer_bytes(m, n, world) for m, n, _ in SHAPES)
        buf = symm_mem.empty(nbytes, dtype=torch.uint8, device=dev)
        bufs = rt.SymmetricBuffers.from_torch(symm_mem.rendezvous(buf, group.group_name),
                                              world_size=world)
        state = {"counters": sample.Counters()}
    else:
        sample = load_sample("allgather_gemm")
        module = sample.load_module(dev.index)
        big = max(SHAPES, key=lambda sh: sample.buffer_bytes(sh[0], sh[2], world))
        bufs = sample.symmetric_buffers(big[0], big[2])
        state = {"epoch": 0}
    state.update(sample=sample, module=module, bufs=bufs, sms=sms, dev=dev, rank=rank,
                 world=world, group=group.group_name, notes=notes)
    for m, n, kdim in SHAPES:
        make = _gemm_rs if op == "gemm_rs" else _ag_gemm
        rows[f"{op} {m}"] = _time(make(state, m, n, kdim), m, dev)
    torch.cuda.synchronize()
    dist.barrier()          # no rank frees its buffers while a peer may still read them
    return rows


def _gemm_rs(state: dict, m: int, n: int, kdim: int) -> dict:
    """The candidates of GEMM + reduce-scatter at one shape: Y_shard = RS(X_r W_r^T)."""
    import torch
    sample, dev, world = state["sample"], state["dev"], state["world"]
    gen = torch.Generator(device=dev).manual_seed(100 * state["rank"] + m)
    k_r = kdim // world
    x = torch.randn((m, k_r), generator=gen, device=dev).to(torch.bfloat16)
    w = (torch.randn((n, k_r), generator=gen, device=dev) / kdim ** 0.5).to(torch.bfloat16)
    layer = sample.GemmReduceScatter(state["module"], state["bufs"], m, n, k_r,
                                     sms=state["sms"], counters=state["counters"])
    y = torch.empty((m // world, n), dtype=torch.bfloat16, device=dev)
    state["notes"].append(f"GEMM + RS M={m}: ptxdsl ran {layer.cfg.name} on {layer.grid} CTAs")
    ops, group = torch.ops.symm_mem, state["group"]
    return {OURS: lambda: sample.forward(layer, x, w, y),
            SEQUENTIAL: lambda: sample.reference_path(x, w),
            FUSED: lambda: ops.fused_matmul_reduce_scatter(x, w.t(), "sum", 0, group),
            ALONE: lambda: torch.matmul(x, w.t())}


def _ag_gemm(state: dict, m: int, n: int, kdim: int) -> dict:
    """The candidates of all-gather + GEMM at one shape: Y_r = AG(X) W_r^T."""
    import torch
    import torch.distributed as dist
    sample, dev, world = state["sample"], state["dev"], state["world"]
    gen = torch.Generator(device=dev).manual_seed(100 * state["rank"] + m)
    x = torch.randn((m // world, kdim), generator=gen, device=dev).to(torch.bfloat16)
    w = (torch.randn((n // world, kdim), generator=gen, device=dev) / kdim ** 0.5).to(
        torch.bfloat16)
    out = torch.empty((m, n // world), dtype=torch.bfloat16, device=dev)
    x_all = torch.empty((m, kdim), dtype=torch.bfloat16, device=dev)
    dist.all_gather_into_tensor(x_all, x)
    path = sample.path_for(m, world)
    ran = (f"{sample.config_for(m, world).name}, pushed by {sample.push_for(m, kdim, world)}"
           if path == "fused" else f"allgather_push_w{world}, then gemm_decode's kernel")
    state["notes"].append(f"AG + GEMM M={m}: ptxdsl ran the {path} path: {ran}")

    def ours(push="auto", path="auto"):
        state["epoch"] += 1         # one more per call, the same on every rank
        return sample.forward(x, w, state["bufs"], epoch=state["epoch"], out=out,
                              module=state["module"], sms=state["sms"], push=push, path=path)
    forced = {name: (lambda mode=mode: ours(*mode)) for name, mode in FORCED.items()
              if mode[1] == "fused" or m <= sample.gd.DECODE_M}
    ops, group = torch.ops.symm_mem, state["group"]
    return {OURS: ours, **forced,
            SEQUENTIAL: lambda: sample.reference_path(x, w),
            FUSED: lambda: ops.fused_all_gather_matmul(x, [w.t()], 0, group,
                                                       return_A=False)[1][0],
            ALONE: lambda: torch.matmul(x_all, w.t())}


def _time(cands: dict, m: int, dev) -> dict[str, dict]:
    import torch
    import torch.distributed as dist
    want = cands[SEQUENTIAL]().float()
    scale = float(want.abs().max()) or 1.0
    result: dict[str, dict] = {}
    live = {}
    for name, fn in cands.items():
        if name in (SEQUENTIAL, ALONE):
            live[name] = fn
            continue
        try:
            err = max(float((fn().float() - want).abs().max()) / scale
                      for _ in range(2))        # twice: a second call reuses the pads
        except Exception as exc:  # a baseline this torch refuses: its row says why
            result[name] = {"error": f"{type(exc).__name__}: {exc}"[:300]}
            continue
        # every rank must agree, or the ranks would time different candidates
        bad = torch.tensor([0 if err < 2e-2 else 1], device=dev)
        dist.all_reduce(bad)
        if bad.item():
            result[name] = {"error": f"differs from the sequential path (rank's error "
                            f"{err:.2e} of the largest value)"}
            continue
        live[name] = fn
    calls = CALLS[m]
    samples: dict[str, list[float]] = {name: [] for name in live}
    for rep in range(REPS + 1):
        for name, fn in live.items():
            t = slowest_rank_us(dev, calls, lambda fn=fn: repeat(fn, calls))
            if rep:                     # the first round warms up
                samples[name].append(t)
    result.update({name: {"us": us} for name, us in samples.items()})
    return result


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--worker":
        raise SystemExit(_worker(sys.argv[2]))
    raise SystemExit("usage: python -m benchmarks.tp_gemm --worker OUT.json (under torchrun)")
