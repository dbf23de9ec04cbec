"""One grouped_gemm_moe case on the GPU, for `debug.isolated` (importable, module level): the
bounded-wait build (a hang traps with a record), poisoned Y and map workspace, the sample's
per-expert comparison. Returns (ok, report text)."""

from __future__ import annotations

import runpy
from pathlib import Path

SAMPLE = Path(__file__).resolve().parent.parent / "samples" / "grouped_gemm_moe.py"


def moe_case(sizes, N: int, K: int, grid: int | None = None, seed: int = 0):
    from ptxdsl import debug
    from ptxdsl.runtime import load_module
    from ptxdsl.sample_runner import POISON, Report
    s = runpy.run_path(str(SAMPLE), run_name="__ptxdsl_test__")
    loaded = load_module(s["build_module"](bounded=True))
    fn = loaded["moe_gemm"]
    prob = s["MoeProblem"](sizes, N, K, grid or s["sm_count"](), seed)
    prob.dev_y.memset(POISON)
    prob.maps.memset(POISON)
    with debug.Recorder() as rec:
        rec.attach(loaded)
        debug.run(fn, prob.grid, s["THREADS"], prob.args(), timeout=60, recorder=rec,
                  shared_mem=s["SHARED_BYTES"])
    report = Report("grouped_gemm_moe")
    s["compare"](report, prob, prob.dev_y.to_numpy(), f"G={prob.G} N={N} K={K} "
                 f"grid={prob.grid}")
    return report.ok, report.format()
