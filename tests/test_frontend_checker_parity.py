"""Issue 30: the checker gives the same findings on `parse_ptx(module.emit())` as on `module`,
notes included: the same hazard ids at the same PTX (a built inline-asm statement's finding
at one of its instructions). Kernels: every sample; the hazard audits' planted mistakes and
their corrected twins (tests/audit29*_*.py), with their contexts; their correct kernels,
with their maps and without; the pipeline ring kernels. Every golden is held to the same
promise by the `golden` fixture (tests/frontend_support.py). Run every checker test's kernels
through both paths with `PTXDSL_PARSED_CHECK=report.jsonl pytest -p tests.parsed_check
tests/test_checker*.py` (see tests/parsed_check.py).

Known differences are strict xfails, each with its reason."""

from __future__ import annotations

import json
import runpy
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

import pytest

from ptxdsl.__main__ import sample_files
from ptxdsl.checker.context import Context
from tests import pipeline_kernels, test_checker_audit29, test_checker_audit29b
from tests import test_checker_audit29_clean as clean_a
from tests import test_checker_audit29b_clean as clean_b
from tests.audit_support import build
from tests.child_env import child_env
from tests.parsed_check import differences

ROOT = Path(__file__).resolve().parent.parent

# builder -> why its parsed PTX is checked otherwise than the built kernel.
KNOWN: dict[str, str] = {
    "cluster_y_release_own_asm/bug": "the built kernel's remote arrive is inside one inline "
    "statement whose barrier a mapa in the same template computes (the built checker reads "
    "arrivals only on a bound operand: a known miss, test_checker_audit29b's xfail); the "
    "parsed PTX has the mapa and the arrive as instructions, and its mbar-arrive-count is found",
    "ws_gemm_variants/once": "one try_wait whose result nobody reads: the built checker leaves "
    "an inline try_wait with a dropped result out (smem-read-before-wait at the reads), the "
    "parsed kernel has the typed try_wait (try-wait-not-looped at the wait): both report the "
    "bug, with different ids",
}


def _param(key: str, *values):
    base = key.removesuffix("/no-maps")
    reason = KNOWN.get(key) or KNOWN.get(base)
    marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
    return pytest.param(*values, id=key, marks=marks)


def _assert_same(obj, context: Mapping | None = None) -> None:
    kernels = obj.kernels if hasattr(obj, "kernels") else [obj]
    own = getattr(obj, "check_on_emit", None)
    if context is None and isinstance(own, Mapping):
        context = own
    ctx = Context.make(**dict(context or {}))
    for k in kernels:
        assert differences(k, ctx) == [], k.name


@pytest.mark.parametrize("path", sample_files(), ids=lambda p: p.stem)
def test_sample(path):
    _assert_same(runpy.run_path(str(path), run_name="__ptxdsl_test__")["build_module"]())


AUDITS = [(test_checker_audit29.MODULES, c[1]) for c in test_checker_audit29.CASES] + \
    [(test_checker_audit29b.MODULES, c[1]) for c in test_checker_audit29b.CASES]


@pytest.mark.parametrize("modules,builder,bug", [
    _param(f"{b}/{'bug' if bug else 'twin'}", m, b, bug) for m, b in AUDITS
    for bug in (True, False)])
def test_audit_kernel(modules, builder, bug):
    obj, _line, ctx, _path = build(modules, builder, bug)
    _assert_same(obj, ctx)


@pytest.mark.parametrize("builder,maps", [
    _param(f"{b.__name__}{'' if maps else '/no-maps'}", b, maps)
    for b in clean_a.CLEAN + clean_b.CLEAN for maps in (True, False)])
def test_correct_kernel(builder, maps):
    mod, given = builder()
    _assert_same(mod, {"maps": given} if maps else {})


@pytest.mark.parametrize("builder,bug", [_param("ws_gemm_variants/once",
                                                clean_a.kernels.ws_gemm_variants, "once")])
def test_correct_kernel_buggy_twin(builder, bug):
    mod, given = builder(bug)
    _assert_same(mod, {"maps": given})


@pytest.mark.parametrize("stages", pipeline_kernels.RING_STAGES)
@pytest.mark.parametrize("bounded", [False, True])
def test_ring_kernel(stages, bounded):
    _assert_same(pipeline_kernels.ring_module(stages, bounded))


# The checker tests whose every checked kernel is checked again from its PTX (the audits'
# kernels are above, with their known differences).
PLUGIN_RUN = ["test_checker.py", "test_checker_29_cluster.py", "test_checker_29_cluster2.py",
              "test_checker_29_corpus_epilogue.py", "test_checker_29_corpus_rings.py",
              "test_checker_29_rings.py", "test_checker_29_values.py", "test_checker_bulk.py",
              "test_checker_clean.py", "test_checker_mbar.py", "test_checker_misses.py",
              "test_checker_misses2.py", "test_checker_misses3.py",
              "test_checker_precision.py", "test_checker_refill_loops.py",
              "test_checker_tmap.py", "test_checker_trywait.py", "test_checker_wgmma.py",
              "test_pipeline.py", "test_cluster_kernels.py"]


def test_checker_tests_kernels_check_alike_parsed(tmp_path):
    report = tmp_path / "parsed.jsonl"
    # The child takes the plugin and the test files from the checkout, ptxdsl from where
    # this run takes it (in the wheel job its conftest checks that it is the wheel).
    env = child_env(PTXDSL_PARSED_CHECK=str(report))
    res = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                          "-p", "tests.parsed_check", *(f"tests/{f}" for f in PLUGIN_RUN)],
                         capture_output=True, text=True, cwd=ROOT, env=env, timeout=900)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    assert "parsed check: {'kernels':" in res.stdout, res.stdout[-3000:]
    found = [json.loads(line) for line in report.read_text().splitlines()] \
        if report.exists() else []
    assert found == [], [(x["kernel"], x["test"], x.get("differ") or x.get("error"))
                         for x in found]
