"""One grouped_gemm_moe case on the GPU, for `debug.isolated` (importable, module level): the
bounded-wait build (a hang traps with a record), poisoned Y and map workspace, the sample's
per-expert comparison. Returns (ok, report text)."""

from __future__ import annotations

import runpy
from pathlib import Path

SAMPLE = Path(__file__).resolve().parent.parent / "samples" / "grouped_gemm_moe.py"


def moe_case(sizes, N: int, K: int, grid: int | None = None, seed: int = 0,
             launches: int = 1):
    """`launches` > 1: launch again on the same buffers (Y re-poisoned in between), relying
    on the kernel to have left its work counters (and the split parts' counters) zero; every
    launch is compared, and the counters checked zero after each."""
    import numpy as np

    from ptxdsl import debug
    from ptxdsl.runtime import load_module
    from ptxdsl.sample_runner import POISON, Report
    s = runpy.run_path(str(SAMPLE), run_name="__ptxdsl_test__")
    loaded = load_module(s["build_module"](bounded=True))
    fn = loaded["moe_gemm"]
    prob = s["MoeProblem"](sizes, N, K, grid or s["persistent_grid"](fn), seed)
    prob.maps.memset(POISON)
    report = Report("grouped_gemm_moe")
    for n in range(launches):
        prob.dev_y.memset(POISON)
        with debug.Recorder() as rec:
            rec.attach(loaded)
            debug.run(fn, prob.grid, s["THREADS"], prob.args(), timeout=60, recorder=rec,
                      shared_mem=s["SHARED_BYTES"])
        s["compare"](report, prob, prob.dev_y.to_numpy(), f"launch {n + 1}: G={prob.G} N={N} "
                     f"K={K} grid={prob.grid}")
        counters = prob.sched.to_numpy()
        parts = prob.partials.to_numpy()[:prob.grid // s["CLUSTER"] * 16].view(np.uint32)
        report.check(f"launch {n + 1}: the work counters are zero again",
                     np.array_equal(counters, [0, 0]) and not parts.any(),
                     f"sched = {counters.tolist()}, split-part counters "
                     f"{parts[parts != 0].tolist()[:8]}")
    return report.ok, report.format()
