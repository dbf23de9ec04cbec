"""setmaxnreg survives only a whole-program compile (README, 'setmaxnreg').

Measured on an H100 (driver 13.0) for this very kernel shape: the driver JIT of the PTX gives
the function 240 registers (CU_FUNC_ATTRIBUTE_NUM_REGS) like a standalone-ptxas cubin whose
SASS holds USETMAXREG; the nvJitLink and cuLink* cubins have 8 registers and no USETMAXREG
(ptxas advisory C7504). The CPU test pins the same split with the tools at hand; the GPU test
checks that `Module.load()` takes the path that keeps it, even with use_cubin=True.
"""

from __future__ import annotations

import os
import shutil
import subprocess

import numpy as np
import pytest

from ptxdsl import Addr, Kernel, Module, t
from ptxdsl.assembly_report import PtxdslAssemblerWarning, parse_info_log
from ptxdsl.testing import gpu_deadline

SM90A = ("8.0", "sm_90a")


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
    for cand in (os.environ.get("PTXDSL_PTXAS"), shutil.which("ptxas"),
                 "/usr/local/cuda/bin/ptxas"):
        if cand and os.path.isfile(cand) and os.access(cand, os.X_OK):
            return cand
    return None


def test_nvjitlink_drops_setmaxnreg_and_says_so():
    with pytest.warns(PtxdslAssemblerWarning, match="C7504.*setmaxnreg"):
        cubin = warp_specialized().assemble("sm_90a")
    rep = cubin.report
    assert rep.setmaxnreg_dropped and rep["warp_specialized"].registers < 40


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
