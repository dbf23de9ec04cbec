"""Run every comparison and write BENCHMARKS.md and benchmarks/results.json.

    python -m benchmarks                      # everything (a Hopper GPU for rows 1-4)
    python -m benchmarks --only emitter       # some sections
    python -m benchmarks --out-dir /tmp/x     # write the two files elsewhere

Sections: tma_copy, compile_latency, launch_overhead, ragged, emitter, moe, gemm, attention,
allreduce, tp_gemm.
Without a usable GPU the GPU sections are recorded as skipped (with the reason) and the emitter
still runs. A section that fails records its error and the run goes on; the exit status is 1 then.
Each section's start line counts the sections (`[3/7]`) and the time so far. Ctrl-C stops the
run, prints the summary of the sections finished so far and exits 130 without overwriting
BENCHMARKS.md and results.json (a partial run does not replace a whole one).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

# Every PTX load must really compile: the driver's JIT cache stays off for the whole run (it is
# read when the driver starts, so before anything imports ptxdsl's runtime).
os.environ.setdefault("CUDA_CACHE_DISABLE", "1")

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from benchmarks.common import Section, environment, guarded  # noqa: E402
from benchmarks.report import render  # noqa: E402

SECTIONS = {
    "tma_copy": ("1. TMA copy throughput (1 GiB fp32)", True),
    "compile_latency": ("2. Compile-to-first-launch latency (seed kernels: encode + consume)",
                        True),
    "launch_overhead": ("3. Launch overhead from Python (pointer, two scalars, CUtensorMap "
                        "by value)", True),
    "ragged": ("4. Ragged batch: device-side vs host-side tensor maps", True),
    "emitter": ("5. Emitter throughput (build + emit >= 100k instructions)", False),
    "moe": ("6. Grouped MoE GEMM: device-side tensor maps vs torch._grouped_mm and a "
            "per-expert matmul loop", True),
    "gemm": ("7. Dense GEMM: ptxdsl's persistent warp-specialized GEMM vs cuBLAS (bf16, fp8)",
             True),
    "attention": ("8. Attention: ptxdsl's FlashAttention-3-style forward (dense, varlen) and "
                  "backward vs torch SDPA (cuDNN, flash, efficient)", True),
    "allreduce": ("9. All-reduce across the GPUs of one host: ptxdsl on PyTorch symmetric "
                  "memory vs NCCL and torch's symmetric-memory kernels (bf16)", True),
    "tp_gemm": ("10. Tensor-parallel GEMMs fused with communication: GEMM + reduce-scatter and "
                "all-gather + GEMM on PyTorch symmetric memory vs torch (bf16)", True),
}


def _module_doc(name: str) -> str:
    import importlib
    doc = importlib.import_module(f"benchmarks.{name}").__doc__ or ""
    paragraphs = doc.strip().split("\n\n")[1:]
    out = []
    for p in paragraphs:   # keep "- " list items as Markdown list items
        items = ("\n" + p.strip()).split("\n- ")
        head = " ".join(items[0].split())
        out.append("\n".join(([head] if head else []) + ["- " + " ".join(i.split())
                                                          for i in items[1:]]))
    return "\n\n".join(out)


SECTION_TIMEOUT_S = 300


def run_section(name: str, gpu_reason: str | None, isolate: bool = True) -> Section:
    """Run one section, by default in a child process: a kernel fault poisons the CUDA
    context of its process, and must not take the other sections with it."""
    import importlib
    title, needs_gpu = SECTIONS[name]
    section = Section(name, title, _module_doc(name))
    if needs_gpu and gpu_reason is not None:
        section.error = f"skipped: {gpu_reason}"
        return section
    t0 = time.perf_counter()
    print(f"[{name}] running ...", flush=True)
    if isolate:
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "section.json")
            try:
                proc = subprocess.run([sys.executable, "-m", "benchmarks.run_all", "--child",
                                       name, out], timeout=SECTION_TIMEOUT_S, cwd=ROOT)
                if os.path.exists(out):
                    with open(out) as f:
                        data = json.load(f)
                    section.rows, section.targets = data["rows"], data["targets"]
                    section.notes, section.error = data["notes"], data["error"]
                else:
                    section.error = f"the section's process exited with status {proc.returncode}"
            except subprocess.TimeoutExpired:
                section.error = f"timed out after {SECTION_TIMEOUT_S} s"
    else:
        guarded(section, importlib.import_module(f"benchmarks.{name}").run)
    print(f"[{name}] done in {time.perf_counter() - t0:.1f} s", flush=True)
    return section


def _child(name: str, out: str) -> int:
    import importlib
    section = guarded(Section(name, SECTIONS[name][0]),
                      importlib.import_module(f"benchmarks.{name}").run)
    with open(out, "w") as f:
        json.dump(section.as_dict(), f)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", nargs="+", choices=list(SECTIONS), default=list(SECTIONS),
                        help="sections to run (default: all)")
    parser.add_argument("--out-dir", default=ROOT,
                        help="where BENCHMARKS.md and benchmarks/results.json go "
                             "(default: the repository root)")
    parser.add_argument("--in-process", action="store_true",
                        help="run the sections in this process instead of one child each")
    parser.add_argument("--child", nargs=2, metavar=("SECTION", "JSON"),
                        help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        return _child(*args.child)

    t0 = time.perf_counter()
    env = environment()
    print(f"GPU: {env.get('gpu') or env.get('gpu_skip_reason')}", flush=True)
    sections = []
    try:
        for i, name in enumerate(args.only, 1):
            print(f"[{i}/{len(args.only)}] {name} ({time.perf_counter() - t0:.0f} s so far)",
                  flush=True)
            sections.append(run_section(name, env.get("gpu_skip_reason"), not args.in_process))
    except KeyboardInterrupt:
        done = {"sections": [s.as_dict() for s in sections]}
        print(render_summary(done))
        print(f"\ninterrupted after {len(sections)} of {len(args.only)} sections "
              f"({time.perf_counter() - t0:.0f} s); BENCHMARKS.md and results.json left as "
              "they were")
        return 130
    results = {
        "command": "python -m benchmarks" + (f" --only {' '.join(args.only)}"
                                             if args.only != list(SECTIONS) else ""),
        "environment": env,
        "seconds": round(time.perf_counter() - t0, 1),
        "sections": [s.as_dict() for s in sections],
    }
    os.makedirs(os.path.join(args.out_dir, "benchmarks"), exist_ok=True)
    json_path = os.path.join(args.out_dir, "benchmarks", "results.json")
    md_path = os.path.join(args.out_dir, "BENCHMARKS.md")
    with open(json_path, "w") as f:
        json.dump(results, f, indent=1)
        f.write("\n")
    with open(md_path, "w") as f:
        f.write(render(results))
    print(render_summary(results))
    print(f"wrote {md_path} and {json_path} ({results['seconds']} s)")
    failed = [s for s in sections if s.error and not s.error.startswith("skipped")]
    return 1 if failed else 0


def render_summary(results: dict) -> str:
    """A short table of the targets for the end of the console output."""
    from benchmarks.report import fmt
    lines = ["", "target | value | goal | verdict"]
    for s in results["sections"]:
        if s.get("error"):
            lines.append(f"{s['id']}: {s['error']}")
        for t in s["targets"]:
            verdict = {True: "met", False: "MISSED", None: "n/a"}[t["met"]]
            lines.append(f"{t['name']} | {fmt(t['value'])} | {t['goal']} | {verdict}")
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
