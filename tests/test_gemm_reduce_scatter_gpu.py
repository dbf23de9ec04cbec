"""samples/gemm_reduce_scatter.py under torchrun on 2 (and 4, where visible) Hopper GPUs:
torch's symmetric memory, the fused GEMM + reduce-scatter against torch's fp32 matmul and
`reduce_scatter_tensor`, each shape called twice (the signal pads reused). The debug build
(`--bounded`): a lost tile signal traps with an error record instead of hanging, and the
subprocess has a timeout. Skipped with the reason where the GPUs are not there."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.child_env import child_env

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "samples" / "gemm_reduce_scatter.py"
TIMEOUT_S = 600


@pytest.mark.gpu
@pytest.mark.parametrize("world", [2, 4])
def test_fused_layer_matches_torch_under_torchrun(world):
    from ptxdsl.runtime import multi_gpu_skip_reason
    reason = multi_gpu_skip_reason(world)
    if reason is not None:
        pytest.skip(f"needs {world} Hopper GPUs with peer access: {reason}")
    pytest.importorskip("torch.distributed._symmetric_memory")
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone",
           f"--nproc-per-node={world}", str(SAMPLE), "--bounded"]
    try:
        res = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, env=child_env(),
                             timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        pytest.fail(f"torchrun with {world} ranks did not finish within {TIMEOUT_S} s")
    out = res.stdout + res.stderr
    assert res.returncode == 0, out[-6000:]
    lines = [ln for ln in res.stdout.splitlines() if ln.strip().startswith(("ok", "FAIL"))]
    assert lines and all(ln.strip().startswith("ok") for ln in lines), out[-6000:]
    assert any("M=8192" in ln for ln in lines) and any("M=128 " in ln for ln in lines), out
