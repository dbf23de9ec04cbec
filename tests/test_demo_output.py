"""A first run says each thing once: the demo's no-GPU reason, each sample's run (one call that
writes its PTX, then assembles or runs it), and a ptxas message repeated for every kernel of a
module."""

from __future__ import annotations

import runpy
import warnings
from collections import Counter
from pathlib import Path

import pytest

from ptxdsl.assembly_report import (
    AssemblerMessage,
    AssemblyReport,
    PtxdslAssemblerWarning,
    warn_about,
)
from ptxdsl.errors import SourceLoc

ROOT = Path(__file__).resolve().parent.parent


def test_a_ptxas_message_repeated_per_kernel_is_one_warning():
    loc = SourceLoc("k.py", 7)
    same = AssemblerMessage("(C7504) 'setmaxnreg' ignored", 74, loc, "C7504")
    other = AssemblerMessage("(C7504) 'setmaxnreg' ignored", 80, SourceLoc("k.py", 9), "C7504")
    report = AssemblyReport("sm_90a", warnings=(same,) * 6 + (other,))
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        warn_about(report)
    assert [(w.filename, w.lineno) for w in got] == [("k.py", 7), ("k.py", 9)]
    assert all(issubclass(w.category, PtxdslAssemblerWarning) for w in got)


def test_the_demo_runs_each_sample_once_and_says_why_no_gpu_runs_once(capsys, tmp_path):
    from ptxdsl.__main__ import main, sample_files
    from ptxdsl.runtime import gpu_skip_reason
    reason = gpu_skip_reason()
    if reason is None:
        pytest.skip("a Hopper GPU is usable here: the demo runs the samples instead")
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        assert main(["demo", "-o", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    samples = sample_files()
    # (gemm_blackwell says "no Blackwell GPU here": it wants compute capability 10.0)
    assert out.count(" GPU here (") == len(samples)
    assert out.count(" GPU here (as above)") == len(samples) - 1
    # multi_gpu_tensormap gives the same reason for its two GPUs: referred to, not repeated.
    assert out.count(reason) == 1
    for p in samples:
        # One call per sample writes its PTX, then assembles it (issue 31: the demo ran each
        # sample twice, and multi_gpu_tensormap's fallback wrote its file again).
        assert out.count(f"wrote {tmp_path / p.stem}.ptx") == 1, p.stem
    assert out.count("wrote ") == out.count("assembled offline with nvJitLink") == len(samples)
    dropped = [w for w in got if "setmaxnreg' ignored" in str(w.message)]
    # once per line of each module: gemm_reduce_scatter's, allgather_gemm's, gemm_fp8_scaled's
    # and gemm_decode's kernels are gemm_hopper's, built at the same lines, so those lines are
    # warned about by five modules
    modules = {"gemm_hopper.py": 5}
    per_line = Counter((w.filename, w.lineno) for w in dropped)
    assert dropped and all(n <= modules.get(Path(f).name, 1) for (f, _), n in per_line.items())


def test_save_ptx_that_cannot_be_written_names_the_option(capsys, tmp_path):
    """`--save-ptx PATH` (the demo's one call per sample) refuses a folder as `--ptx` does,
    naming its own option."""
    ns = runpy.run_path(str(ROOT / "samples" / "zero_template.py"), run_name="__ptxdsl_test__")
    assert ns["main"](["--save-ptx", str(tmp_path)]) == 1
    assert f"cannot write --save-ptx {tmp_path}: it is a folder" in capsys.readouterr().err
