"""setmaxnreg survives only a whole-program compile (README, 'setmaxnreg').

Measured on an H100 (driver 13.0) for this very kernel shape: the driver JIT of the PTX gives
the function 240 registers (CU_FUNC_ATTRIBUTE_NUM_REGS) like a standalone-ptxas cubin whose
SASS holds USETMAXREG; the nvJitLink and cuLink* cubins have 8 registers and no USETMAXREG
(ptxas advisory C7504). The CPU test pins the same split with the tools at hand; the GPU test
checks that `Module.load()` takes the path that keeps it, even with use_cubin=True.
"""

from __future__ import annotations

import os
import runpy
import subprocess
from pathlib import Path

import numpy as np
import pytest

from ptxdsl import Addr, Kernel, Module, t, toolchain
from ptxdsl.__main__ import main
from ptxdsl.assembly_report import (
    ARTEFACT_CAVEAT,
    PtxdslAssemblerWarning,
    parse_info_log,
    warn_about,
)
from ptxdsl.testing import gpu_deadline

SM90A = ("8.0", "sm_90a")
GEMM = Path(__file__).resolve().parent.parent / "samples" / "gemm_hopper.py"


def warp_specialized() -> Module:
    """256 threads: warpgroup 0 gives registers back (dec 40), warpgroup 1 takes them (inc
    240); each thread then writes its index. `maxntid` + `minnctapersm` fix the register count
    at entry, without which even a whole-program compile drops setmaxnreg (advisory C7508)."""
    k = Kernel("warp_specialized", maxntid=256, minnctapersm=1)
    out = k.cvta(k.ld_param(k.param_ptr("out")), "global", to=True)
    tid = k.tid.x
    with k.if_(tid < 128):
        k.asm("setmaxnreg.dec.sync.aligned.u32 40;", requires=SM90A)
    with k.else_():
        k.asm("setmaxnreg.inc.sync.aligned.u32 240;", requires=SM90A)
    k.st(Addr(k.add(out, k.mul(tid, 4, mode="wide"))), tid, type=t.u32, space="global")
    k.ret()
    return Module([k], name="warp_specialized")


def _ptxas() -> str | None:
    for cand in (os.environ.get("PTXDSL_PTXAS"), toolchain.ptxas_path(),
                 "/usr/local/cuda/bin/ptxas"):
        if cand and os.path.isfile(cand) and os.access(cand, os.X_OK):
            return cand
    return None


def test_nvjitlink_drops_setmaxnreg_and_says_so():
    with pytest.warns(PtxdslAssemblerWarning, match="C7504.*setmaxnreg"):
        cubin = warp_specialized().assemble("sm_90a")
    rep = cubin.report
    # With a standalone ptxas the report is its whole-program build's; `linked` is the cubin's.
    assert rep.setmaxnreg_dropped and (rep.linked or rep)["warp_specialized"].registers < 40


@pytest.mark.skipif(_ptxas() is None, reason="no standalone ptxas here")
def test_whole_program_ptxas_keeps_setmaxnreg(tmp_path):
    src = tmp_path / "ws.ptx"
    warp_specialized().write(src)
    res = subprocess.run([_ptxas(), "-arch=sm_90a", "-v", str(src), "-o",
                          str(tmp_path / "ws.cubin")], capture_output=True, text=True,
                         timeout=120)
    if res.returncode != 0 and "Unsupported .version" in res.stderr:
        pytest.skip(f"this ptxas is older than the module's PTX ISA: {res.stderr.strip()}")
    assert res.returncode == 0, res.stderr
    rep = parse_info_log(res.stderr + res.stdout, "sm_90a")
    # The register count at entry is the allocation setmaxnreg.inc 240 needs: it was kept.
    assert rep["warp_specialized"].registers == 240 and not rep.warnings


@pytest.mark.gpu
def test_load_keeps_setmaxnreg_on_the_device():
    with gpu_deadline(120):
        from ptxdsl.runtime import DeviceBuffer, synchronize
        m = warp_specialized()
        with pytest.warns(PtxdslAssemblerWarning, match="driver JIT"):
            mod = m.load(use_cubin=True)
        assert mod.arch is None   # the driver JIT compiled the PTX
        fn = mod["warp_specialized"]
        assert fn.num_regs == 240, mod.info_log
        assert mod.report["warp_specialized"].registers == 240
        with DeviceBuffer.zeros(256, np.uint32) as out:
            fn.launch(1, 256, (out,))
            synchronize(timeout=30)
            assert (out.to_numpy() == np.arange(256, dtype=np.uint32)).all()


# -- the report of Module.assemble for a module using setmaxnreg (issue 32) -----------------------
def _gemm() -> Module:
    """samples/gemm_hopper.py's bf16 kernels: 384 threads, setmaxnreg.dec 40 / inc 232."""
    return runpy.run_path(str(GEMM), run_name="__ptxdsl_test__")["build_module"](("bf16",))


@pytest.mark.skipif(toolchain.ptxas_path() is None,
                    reason="no standalone ptxas here (pip install nvidia-cuda-nvcc)")
def test_setmaxnreg_sample_is_reported_as_its_whole_program_build():
    with pytest.warns(PtxdslAssemblerWarning, match="C7504"):
        rep = _gemm().assemble("sm_90a").report
    assert rep.whole_program.startswith("ptxas ") and not rep.caveat
    assert "figures from a whole-program build by ptxas" in rep.summary().splitlines()[1]
    # setmaxnreg kept: the entry allocation is what 384 threads may hold (65536 / 384, to a
    # multiple of 8), the pool the consumers' inc 232 draws on; nvJitLink's build fits the
    # whole kernel in fewer, as if no warpgroup would ever get more.
    name = "gemm_hopper_bf16"
    assert rep[name].registers == 168 and not rep[name].spills
    assert rep.linked is not None and rep.linked[name].registers < 168
    assert {w.code for w in rep.warnings} == {"C7504"}   # the cubin itself still lacks it


def test_setmaxnreg_report_without_ptxas_marks_its_figures(monkeypatch):
    monkeypatch.setattr(toolchain, "ptxas_path", lambda: None)
    with pytest.warns(PtxdslAssemblerWarning, match="C7504"):
        rep = _gemm().assemble("sm_90a").report
    assert not rep.whole_program and rep.linked is None
    assert rep.caveat == (f"{ARTEFACT_CAVEAT} (no standalone ptxas for the figures of the code "
                          "that runs: pip install nvidia-cuda-nvcc)")
    assert rep.summary().splitlines()[1] == f"  note: {rep.caveat}"


def test_setmaxnreg_report_says_why_ptxas_could_not_build_it(tmp_path, monkeypatch):
    fake = tmp_path / "ptxas"
    fake.write_text("#!/bin/sh\n"
                    'if [ "$1" = --version ]; then echo "Cuda compilation tools, release '
                    '12.0, V12.0.76"; exit 0; fi\n'
                    "echo \"ptxas fatal   : Unsupported .version 8.0; current version is "
                    "'7.8'\" >&2\nexit 255\n")
    fake.chmod(0o755)
    monkeypatch.setattr(toolchain, "ptxas_path", lambda: str(fake))
    with pytest.warns(PtxdslAssemblerWarning, match="C7504"):
        rep = warp_specialized().assemble("sm_90a").report
    assert rep.caveat == (f"{ARTEFACT_CAVEAT} (ptxas 12.0.76 ({fake}) could not build it "
                          "whole: ptxas fatal   : Unsupported .version 8.0; current version "
                          "is '7.8')")
    assert rep["warp_specialized"].registers < 40   # the cubin's figures, so marked


def test_setmaxnreg_report_with_an_option_ptxas_cannot_repeat(monkeypatch):
    monkeypatch.setattr(toolchain, "ptxas_path", lambda: "/nonexistent/ptxas")
    with pytest.warns(PtxdslAssemblerWarning, match="C7504"):
        rep = warp_specialized().assemble("sm_90a", options=["-ftz=1"]).report
    assert rep.caveat.endswith("(no whole-program build: nvJitLink option '-ftz=1' has no "
                               "ptxas equivalent)")
    assert toolchain._ptxas_options(["-Xptxas=-warn-spills", "-maxrregcount=64", "-O3",
                                     "-lineinfo", "-g"]) == [
        "-warn-spills", "-maxrregcount=64", "-O3", "-lineinfo", "-g"]


# nvJitLink's info log for a warp-specialized wgmma kernel whose setmaxnreg it dropped.
DROPPED_LOG = """\
ptxas info    : (C7504) Potential Performance Loss: 'setmaxnreg' ignored to maintain \
compatibility across compilation units.
ptxas info    : Compiling entry function 'k' for 'sm_90a'
ptxas info    : (C7512) Potential Performance Loss: wgmma.mma_async instructions are \
serialized due to insufficient register resources for the wgmma pipeline in the function 'k'
ptxas info    : Function properties for k
    512 bytes stack frame, 512 bytes spill stores, 512 bytes spill loads
ptxas info    : Used 168 registers, used 1 barriers
"""


def test_advisories_of_a_build_without_setmaxnreg_are_marked_as_artefacts():
    rep = parse_info_log(DROPPED_LOG, "sm_90a")
    assert rep.caveat == ARTEFACT_CAVEAT and rep["k"].spills
    with pytest.warns(PtxdslAssemblerWarning) as rec:
        warn_about(rep)
    said = {w.message.args[0].split(")")[0]: w.message.args[0] for w in rec}
    assert "an artefact of nvJitLink's build without setmaxnreg" in said["ptxas: (C7512"]
    assert "artefact" not in said["ptxas: (C7504"]
    # Without the drop, C7512 is the code's own.
    plain = parse_info_log(DROPPED_LOG.split("\n", 1)[1], "sm_90a")
    with pytest.warns(PtxdslAssemblerWarning) as rec:
        warn_about(plain)
    assert not plain.caveat and "artefact" not in str(rec[0].message)


def test_cli_emit_assemble_says_whose_figures_these_are(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(toolchain, "ptxas_path", lambda: None)
    with pytest.warns(PtxdslAssemblerWarning, match="C7504"):
        assert main(["emit", str(GEMM), "-o", str(tmp_path), "--assemble"]) == 0
    out = capsys.readouterr().out
    assert f"  note: {ARTEFACT_CAVEAT} (no standalone ptxas" in out
