"""The hazard check of `Module.assemble` / `load_module(use_cubin=True)` runs in a worker thread
while nvJitLink assembles (which releases the GIL), so the checker's time hides behind ptxas's.
What the user sees is unchanged: the same warnings, in the caller's thread, and under strict
mode the HazardError before any cubin is returned."""

from __future__ import annotations

import threading
import warnings
from types import SimpleNamespace

import pytest

from ptxdsl import Kernel, Module, checker, ptx, toolchain
from ptxdsl.assembly_report import AssemblyReport
from ptxdsl.checker import HazardError, PtxdslHazardWarning

# what the stand-in assembler returns: an arch and an empty report (no setmaxnreg dropped)
CUBIN = SimpleNamespace(arch="sm_90a", report=AssemblyReport(arch="sm_90a", log="", kernels={}))


def _hazardous_module(**kw) -> Module:
    """A tensor map read through a pointer with no tensormap acquire fence (tmap-no-acquire)."""
    k = Kernel("k", reqntid=32)
    tmap = k.ld_param(k.param_ptr("tmap_ptr"))
    ptx.cp_async_bulk_prefetch_tensor(k, tmap, (0, 0))
    k.ret()
    return Module([k], **kw)


def _probe(monkeypatch, wait_s: float = 5.0):
    """check_module waits (up to `wait_s`) for the assembler to start: it can only see it
    start when the two run at the same time."""
    assembling = threading.Event()
    seen: dict = {}
    real_check = checker.check_module

    def check_module(module, **context):
        seen["check_thread"] = threading.current_thread().name
        seen["overlapped"] = assembling.wait(wait_s)
        return real_check(module, **context)

    def assemble(ptx, arch, **kw):
        assembling.set()
        seen["assemble_thread"] = threading.current_thread().name
        return CUBIN
    monkeypatch.setattr(checker, "check_module", check_module)
    monkeypatch.setattr(toolchain, "assemble", assemble)
    return seen


def test_module_assemble_checks_while_it_assembles(monkeypatch):
    seen = _probe(monkeypatch)
    module = _hazardous_module()
    with pytest.warns(PtxdslHazardWarning) as record:
        assert module.assemble("sm_90a") is CUBIN
    assert seen["overlapped"] is True
    assert seen["check_thread"] == "ptxdsl-hazard-check"
    assert seen["assemble_thread"] == threading.current_thread().name
    assert any("tmap-no-acquire" in str(w.message) for w in record)


def test_strict_raises_the_hazard_error_not_a_cubin(monkeypatch):
    _probe(monkeypatch)
    with pytest.raises(HazardError):
        _hazardous_module(strict=True).assemble("sm_90a")


def test_the_hazard_error_comes_first_when_assembly_fails_too(monkeypatch):
    seen = _probe(monkeypatch)
    probe_assemble = toolchain.assemble

    def failing(ptx, arch, **kw):
        probe_assemble(ptx, arch)
        seen["assembled"] = True
        raise RuntimeError("ptxas said no")
    monkeypatch.setattr(toolchain, "assemble", failing)
    with pytest.raises(HazardError) as info:
        _hazardous_module(strict=True).assemble("sm_90a")
    assert seen["assembled"] is True
    assert isinstance(info.value.__context__, RuntimeError)


def test_emit_still_checks_in_the_callers_thread(monkeypatch):
    seen = _probe(monkeypatch, wait_s=0.2)
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        _hazardous_module().emit()
    assert seen["check_thread"] == threading.current_thread().name
    assert seen["overlapped"] is False      # nothing assembled: emit alone waited it out
    assert any(issubclass(w.category, PtxdslHazardWarning) for w in record)
