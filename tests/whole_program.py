"""The whole-program report of a warp-specialized module (what the driver JIT builds: setmaxnreg
kept), for the tests that check its registers and spills: `Module.assemble`'s own report,
which a standalone ptxas supplies (`toolchain.whole_program_report`)."""

from __future__ import annotations

import pytest

from ptxdsl.assembly_report import SETMAXNREG_DROPPED, AssemblyReport


def whole_program_report(module) -> AssemblyReport:
    """The report of `module`'s whole-program build for sm_90a; skipped where the ptxas found
    is older than the module's PTX ISA, failed where it could not build the module."""
    rep = module.assemble("sm_90a", warn=False).report
    if not rep.whole_program:
        if not rep.setmaxnreg_dropped and not rep.caveat:
            # this nvJitLink reported no drop (13.0, loaded by another library on the GPU
            # machines, says nothing): its own figures describe the code with setmaxnreg,
            # where it gave any (in a pytest session on those machines it gave none)
            if not rep.kernels:
                pytest.skip("the nvJitLink loaded in this process (another library's) "
                            "reported neither the setmaxnreg drop nor any kernel's figures")
            return rep
        if "Unsupported .version" in rep.caveat:
            pytest.skip(f"this ptxas is older than the module's PTX ISA: {rep.caveat}")
        pytest.fail(f"no whole-program build: {rep.caveat}")
    return rep


def advisories(rep: AssemblyReport) -> list[str]:
    """The whole-program build's own warnings (the cubin's setmaxnreg-dropped advisory, which
    rides along, left out)."""
    return [str(w) for w in rep.warnings if w.code != SETMAXNREG_DROPPED]
