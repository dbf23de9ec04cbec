"""wgmma on the GPU, each case checked exactly against numpy: every input type (f16, bf16,
tf32, e4m3, e5m2, s8, u8) with the accumulators it allows, K- and MN-major operands, every
swizzle mode, N from 8 to 256, SS and RS, sparse A, and `.satfinite` saturating where the
plain form wraps. Each case runs in its own process (a fault poisons its CUDA context)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from ptxdsl.testing import assemble_declared
from tests.child_env import child_env
from tests.wgmma_gpu_kernels import CASES, build_module, host_data

ROOT = Path(__file__).resolve().parent.parent


def test_cases_cover_the_issue():
    types = {c.atype for c in CASES} | {c.btype for c in CASES}
    assert types == {"f16", "bf16", "tf32", "e4m3", "e5m2", "s8", "u8"}
    assert {str(c.dtype) for c in CASES} == {"f16", "f32", "s32"}
    assert {c.swizzle_a for c in CASES} | {c.swizzle_b for c in CASES} == {
        "none", "32B", "64B", "128B"}
    assert {"MN"} <= {c.a_major for c in CASES} and {"MN"} <= {c.b_major for c in CASES}
    assert 256 in {c.n for c in CASES} and len({c.n for c in CASES}) >= 3
    assert any(c.rs for c in CASES) and any(c.sparse for c in CASES)
    assert any(c.satfinite for c in CASES)


def test_cases_assemble_and_expectations_differ_where_they_should():
    """On the CPU: every case kernel assembles, and the .satfinite expectation differs from
    the wrapping one (so the GPU check can tell them apart)."""
    assert assemble_declared(build_module(CASES).emit())[:4] == b"\x7fELF"
    sat = host_data(next(c for c in CASES if c.satfinite))[3]
    wrap = host_data(next(c for c in CASES if c.init is not None and not c.satfinite))[3]
    assert (sat == 2**31 - 1).all() and (wrap < 0).all()


@pytest.mark.gpu
@pytest.mark.parametrize("name", [c.name for c in CASES])
def test_wgmma_on_gpu(name):
    # The kernels are the checkout's tests.wgmma_gpu_kernels; ptxdsl is this run's.
    code = ("import sys\nfrom tests.wgmma_gpu_kernels import run_case\n"
            f"ok, detail = run_case({name!r})\nprint(detail)\nsys.exit(0 if ok else 1)\n")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=ROOT, env=child_env(), timeout=120)
    print(res.stdout)
    assert res.returncode == 0, res.stdout + res.stderr
