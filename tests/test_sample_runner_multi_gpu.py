"""sample_runner's multi-GPU entry (`multi_gpu_main`, `torchrun`, `not_run`), shared by
samples/allreduce.py, allgather_gemm.py and gemm_reduce_scatter.py, and `sync` with a
debug recorder, on the CPU: the GPU count, the torchrun subprocess and the driver's
synchronize are stand-ins."""

from __future__ import annotations

import subprocess

import pytest

import ptxdsl.runtime as rt
from ptxdsl import Kernel, Module, sample_runner

SAMPLE = "/somewhere/samples/pair.py"


def _module() -> Module:
    k = Kernel("pair")
    k.ret()
    return Module([k], target="sm_90a")


def _main(argv, **kw) -> int:
    return sample_runner.multi_gpu_main(
        argv, "pair: a two-GPU sample", _module, lambda: sample_runner.Report("in process"),
        sample=SAMPLE, rank_main=lambda: 7, **kw)


@pytest.fixture
def gpus(monkeypatch):
    """Set how many peer-capable Hopper GPUs the helpers see; records torchrun's calls."""
    calls: list = []
    monkeypatch.setattr(sample_runner, "_SAID", set())
    monkeypatch.delenv("RANK", raising=False)
    monkeypatch.setattr(sample_runner, "torchrun",
                        lambda sample, n, args=(), **kw: calls.append((sample, n, args, kw))
                        or (0, ""))

    def see(n: int) -> list:
        monkeypatch.setattr(rt, "device_count", lambda: n)
        monkeypatch.setattr(rt, "multi_gpu_skip_reason",
                            lambda count=2, **kw: None if n >= count else
                            f"{n} CUDA devices visible; this needs {count}")
        return calls
    return see


def test_with_enough_gpus_it_relaunches_under_torchrun(gpus, tmp_path):
    calls = gpus(4)
    ptx = tmp_path / "pair.ptx"
    assert _main(["--save-ptx", str(ptx), "--fast"], worlds=(2, 4, 8), flags=("--fast",),
                 timeout_s=30) == 0
    assert calls == [(SAMPLE, 4, ["--fast"], {"timeout_s": 30})]   # the largest world that fits
    assert ".entry pair" in ptx.read_text()                        # written before the ranks


def test_with_one_gpu_it_says_why_once_and_runs_the_fallback(gpus, monkeypatch, capsys):
    calls = gpus(1)
    monkeypatch.setattr(rt, "gpu_skip_reason", lambda: None)
    monkeypatch.setattr(rt, "device_info", lambda d: "GPU 0: a stand-in")
    seen = []

    def one_gpu(reason):
        seen.append(reason)
        report = sample_runner.Report("pair on one GPU")
        report.check("ran", True)
        return report
    assert _main([], one_gpu=one_gpu) == 0
    assert _main([], one_gpu=one_gpu) == 0
    out = capsys.readouterr().out
    assert calls == [] and seen == ["1 CUDA devices visible; this needs 2"] * 2
    assert "pair needs 2 Hopper GPUs with peer access for torchrun: 1 CUDA devices visible; " \
           "this needs 2" in out
    assert "pair needs 2 Hopper GPUs with peer access for torchrun: as above" in out
    assert "PASS: pair on one GPU: 1/1 checks passed" in out


def test_without_a_one_gpu_run_it_reports_the_module_assembled(gpus, monkeypatch):
    gpus(1)
    assembled = []
    monkeypatch.setattr(Module, "assemble", lambda self, target=None: assembled.append(target)
                        or b"\x7fELF....")
    report = sample_runner.not_run("pair", "1 CUDA devices visible", _module, "both kernels")
    assert assembled == ["sm_90a"] and report.ok
    assert report.notes == ["needs 2 Hopper GPUs with peer access (1 CUDA devices visible): "
                            "not run"]
    assert report.checks[0][0] == "both kernels built, checked clean and assembled"


def test_the_fallback_keeps_the_ptx_where_asked(gpus, monkeypatch, tmp_path, capsys):
    gpus(0)
    monkeypatch.setattr(sample_runner, "PTX_DIR", tmp_path)
    monkeypatch.setattr(rt, "gpu_skip_reason", lambda: "no CUDA driver")
    monkeypatch.setattr(sample_runner, "_assemble_offline", lambda module: 0)
    assert _main(["--fast"], flags=("--fast",), keep_ptx=True) == 0   # (a rank flag is not
    assert (tmp_path / "pair.ptx").read_text() == _module().emit()    # sample_main's)
    assert "no Hopper GPU here" in capsys.readouterr().out


def test_under_torchrun_it_runs_the_rank(gpus, monkeypatch):
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "2")
    assert _main([]) == 7


def test_a_torchrun_past_its_timeout_fails(monkeypatch, capsys):
    def hang(cmd, **kw):
        assert cmd[1:5] == ["-m", "torch.distributed.run", "--standalone",
                            "--nproc-per-node=2"] and kw["timeout"] == 5
        raise subprocess.TimeoutExpired(cmd, 5, output="rank 0: waiting")
    monkeypatch.setattr(subprocess, "run", hang)
    code, out = sample_runner.torchrun(SAMPLE, 2, capture=True, timeout_s=5)
    assert code == 1 and out == "rank 0: waiting\nFAIL: torchrun did not finish within 5 s"
    assert sample_runner.torchrun(SAMPLE, 2, timeout_s=5)[0] == 1
    assert "FAIL: torchrun did not finish within 5 s" in capsys.readouterr().out


def test_sync_prints_the_recorders_error_record_then_raises(monkeypatch, capsys):
    from ptxdsl import runtime
    from ptxdsl.sample_runner import sync

    class Hung(RuntimeError):
        pass

    def synchronize(timeout):
        raise Hung(f"no answer in {timeout} s")

    class Recorder:
        def record(self):
            return "wait on full[2], parity 1"

    monkeypatch.setattr(runtime, "synchronize", synchronize)
    with pytest.raises(Hung, match="no answer in 3 s"):
        sync(3, recorder=Recorder())
    assert capsys.readouterr().out == "  error record: wait on full[2], parity 1\n"
    with pytest.raises(Hung):          # without a recorder: the error alone
        sync(3)
    assert capsys.readouterr().out == ""
