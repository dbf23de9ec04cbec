"""samples/allgather_gemm.py on Hopper GPUs: under torchrun on 2 ranks (and 4 where four GPUs
are visible), its checks against torch (bit-exact: integer inputs) all pass; in one process,
two ranks on two GPUs pass against numpy. Each run is a
subprocess with a timeout, so a hung wait fails the test instead of the session (the sample
uses its debug build: a signal wait past 2 s traps with a record of what it waited for)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from ptxdsl.runtime import multi_gpu_skip_reason
from tests.child_env import child_env

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "samples" / "allgather_gemm.py"
TIMEOUT_S = 600

pytestmark = pytest.mark.gpu


def _run(args: list[str]) -> str:
    try:
        res = subprocess.run([sys.executable, *args], capture_output=True, text=True,
                             cwd=ROOT, env=child_env(), timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        pytest.fail(f"{' '.join(args)} did not finish within {TIMEOUT_S} s (a hung wait?)")
    out = res.stdout + res.stderr
    assert res.returncode == 0, out
    return res.stdout


def _torch_distributed():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("this torch has no CUDA")
    pytest.importorskip("torch.distributed._symmetric_memory")


@pytest.mark.parametrize("world", [2, 4])
def test_torchrun(world):
    reason = multi_gpu_skip_reason(world)
    if reason is not None:
        pytest.skip(f"needs {world} Hopper GPUs with peer access: {reason}")
    _torch_distributed()
    out = _run(["-m", "torch.distributed.run", "--nproc-per-node", str(world), str(SAMPLE)])
    assert f"PASS: allgather_gemm on {world} ranks (0 ranks failing)" in out, out
    assert "FAIL" not in out, out


def _in_process(devices: tuple[int, ...]) -> str:
    code = (f"import runpy, sys\n"
            f"ns = runpy.run_path({str(SAMPLE)!r}, run_name='__ptxdsl_test__')\n"
            f"report = ns['run'](devices={devices!r})\n"
            f"print(report.format())\n"
            f"sys.exit(0 if report.ok else 1)\n")
    out = _run(["-c", code])
    assert "PASS:" in out, out
    return out


def test_two_ranks_on_two_gpus_in_one_process():
    reason = multi_gpu_skip_reason(2)
    if reason is not None:
        pytest.skip(f"needs 2 Hopper GPUs with peer access: {reason}")
    print(_in_process((0, 1)))
