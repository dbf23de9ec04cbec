"""The samples in samples/: their PTX as goldens, their command line on CPU (`--ptx PATH`, and
the offline fallback when no GPU is usable), and on a Hopper GPU their own checks.

Every sample is a runnable file with `build_module()`, `run()` (returns a
`ptxdsl.sample_runner.Report`) and `main(argv)`; `python -m ptxdsl demo` runs them all.
"""

from __future__ import annotations

import runpy
import subprocess
import sys
from pathlib import Path

import pytest

from ptxdsl.__main__ import sample_files
from ptxdsl.testing import assemble_declared, declared_target
from tests.child_env import child_env

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = sample_files()
IDS = [p.stem for p in SAMPLES]
# A sample's whole GPU run (module load, launches, numpy checks) takes about a second on an
# H100; the timeout only has to turn a hang into a failure.
GPU_TIMEOUT_S = 120
# Samples for another GPU than Hopper: (the GPU named when none is here, their .target).
OTHER_GPU = {"gemm_blackwell": ("Blackwell GPU", "sm_100a")}
EXPECTED = {"device_tensormap_init", "zero_template", "tma_tile_2d", "global_tensormap_sys",
            "ragged_batch", "wgmma_gemm_simple", "grouped_gemm_moe", "gemm_hopper",
            "flash_attention_bwd", "gemm_reduce_scatter"}


def _load(path: Path) -> dict:
    return runpy.run_path(str(path), run_name="__ptxdsl_test__")


def _run_cli(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, cwd=ROOT,
                          env=child_env(), timeout=timeout)


def _no_gpu() -> str | None:
    from ptxdsl.runtime import gpu_skip_reason
    return gpu_skip_reason()


def _run_sample_on_gpu(path: Path, **kwargs) -> str:
    """The sample's `run(**kwargs)` in a fresh process, killed after GPU_TIMEOUT_S: a fault
    poisons the CUDA context of the process that hit it, and a hung kernel never returns, so
    neither may reach the other tests. Returns the report; fails the test on a FAIL verdict."""
    code = (f"import runpy, sys\n"
            f"ns = runpy.run_path({str(path)!r}, run_name='__ptxdsl_test__')\n"
            f"report = ns['run'](**{kwargs!r})\n"
            f"print(report.format())\n"
            f"sys.exit(0 if report.ok else 1)\n")
    try:
        res = _run_cli("-c", code, timeout=GPU_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        pytest.fail(f"{path.name} run({kwargs}) did not finish within {GPU_TIMEOUT_S} s "
                    "(hung kernel?)")
    out = res.stdout + res.stderr
    assert res.returncode == 0, out
    assert "PASS:" in res.stdout, out
    return res.stdout


def test_every_seed_has_its_sample():
    assert EXPECTED <= set(IDS), f"missing samples: {sorted(EXPECTED - set(IDS))}"


@pytest.mark.parametrize("path", SAMPLES, ids=IDS)
def test_sample_golden(path, golden):
    """The PTX a sample builds is its golden (tests/golden/samples/<name>.ptx), byte for byte;
    test_goldens_assemble.py assembles it for its declared target."""
    ns = _load(path)
    for name in ("build_module", "run", "main"):
        assert callable(ns.get(name)), f"{path.name} has no {name}()"
    golden(ns["build_module"](), f"samples/{path.stem}")


@pytest.mark.parametrize("path", SAMPLES, ids=IDS)
def test_sample_writes_ptx(path, tmp_path):
    """`python samples/x.py --ptx PATH` writes the module's PTX (no GPU needed) and exits 0;
    the file assembles with nvJitLink for the target it declares."""
    out = tmp_path / "sub" / f"{path.stem}.ptx"
    res = _run_cli(str(path), "--ptx", str(out))
    assert res.returncode == 0, res.stdout + res.stderr
    assert out.is_file(), res.stdout + res.stderr
    ptx = out.read_text()
    assert ptx == _load(path)["build_module"]().emit()
    assert declared_target(ptx) in \
        ((OTHER_GPU[path.stem][1],) if path.stem in OTHER_GPU else ("sm_90", "sm_90a"))
    assert assemble_declared(ptx)[:4] == b"\x7fELF"


@pytest.mark.parametrize("path", SAMPLES, ids=IDS)
def test_sample_without_gpu_assembles_offline(path):
    """With no GPU and no --ptx, a sample says so, assembles its PTX offline, and exits 0."""
    if _no_gpu() is None:
        pytest.skip("a Hopper GPU is usable here: the sample would run instead")
    gpu, target = OTHER_GPU.get(path.stem, ("Hopper GPU", "sm_90"))
    res = _run_cli(str(path))
    assert res.returncode == 0, res.stdout + res.stderr
    assert f"no {gpu} here" in res.stdout, res.stdout
    assert "assembled offline with nvJitLink" in res.stdout, res.stdout
    assert f".target {target}" in res.stdout and "bytes of cubin" in res.stdout, res.stdout


def test_demo_writes_every_sample(tmp_path):
    """`python -m ptxdsl demo -o DIR` writes every sample's PTX and (without a GPU) assembles
    it; on a GPU it runs them."""
    if _no_gpu() is None:
        pytest.skip("on a GPU the demo runs the samples: see the gpu tests")
    res = _run_cli("-m", "ptxdsl", "demo", "-o", str(tmp_path))
    assert res.returncode == 0, res.stdout + res.stderr
    assert "demo: all samples built and assembled (no Hopper GPU here" in res.stdout
    assert sorted(p.stem for p in tmp_path.glob("*.ptx")) == sorted(IDS)


@pytest.mark.gpu
@pytest.mark.parametrize("path", SAMPLES, ids=IDS)
def test_sample_runs_on_gpu(path):
    """The sample's own run on a Hopper GPU: every check against numpy passes."""
    print(_run_sample_on_gpu(path))


@pytest.mark.gpu
@pytest.mark.parametrize("G", [256, 4096])
def test_ragged_batch_at_benchmark_sizes(G):
    """The ragged batch at the batch sizes the benchmarks use (16 is the sample's default)."""
    print(_run_sample_on_gpu(ROOT / "samples" / "ragged_batch.py", G=G))


def test_multi_gpu_sample_with_fewer_than_two_gpus():
    """multi_gpu_tensormap with fewer than two Hopper GPUs (with peer access): says so, writes
    out/multi_gpu_tensormap.ptx, assembles it and exits 0 (on one GPU after running the
    single-GPU part: producer and consumer on device 0)."""
    from ptxdsl.runtime import multi_gpu_skip_reason
    if multi_gpu_skip_reason(2) is None:
        pytest.skip("two Hopper GPUs with peer access here: the sample runs across them")
    path = ROOT / "samples" / "multi_gpu_tensormap.py"
    res = _run_cli(str(path))
    assert res.returncode == 0, res.stdout + res.stderr
    assert "needs 2 Hopper GPUs with peer access" in res.stdout, res.stdout
    assert "wrote out/multi_gpu_tensormap.ptx" in res.stdout, res.stdout
    assert "bytes of cubin" in res.stdout, res.stdout
    ptx = (ROOT / "out" / "multi_gpu_tensormap.ptx").read_text()
    assert ptx == _load(path)["build_module"]().emit()
    assert "tensormap.cp_fenceproxy.global.shared::cta.tensormap::generic.release.sys" in ptx
    assert "fence.proxy.tensormap::generic.acquire.sys" in ptx


def test_sibling_sample_loads_once_and_names_a_missing_one(tmp_path):
    """A sample built on another loads it from its own folder (not sys.path), once per file
    (a copy of the samples elsewhere is its own); a name with no file beside the anchor is
    refused with both named."""
    from ptxdsl.sample_runner import sibling_sample
    anchor = str(SAMPLES[0])
    gh = sibling_sample(anchor, "gemm_hopper")
    assert sibling_sample(anchor, "gemm_hopper") is gh
    assert Path(gh.__file__).resolve() == SAMPLES[0].with_name("gemm_hopper.py").resolve()
    copy = tmp_path / "gemm_hopper.py"
    copy.write_text("WHERE = 'copy'\n")
    other = sibling_sample(str(tmp_path / "x.py"), "gemm_hopper")
    assert other is not gh and other.WHERE == "copy"
    with pytest.raises(FileNotFoundError, match=r"no sample nope\.py beside .*"):
        sibling_sample(str(tmp_path / "x.py"), "nope")
