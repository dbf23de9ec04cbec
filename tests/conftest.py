"""pytest wiring: --update-golden, the golden fixture, and skipping GPU tests without a GPU."""

from __future__ import annotations

import functools
import os
from pathlib import Path

import pytest

from ptxdsl.testing import check_golden

from .child_env import in_wheel_job
from .frontend_support import assert_round_trip

GOLDEN_DIR = Path(__file__).parent / "golden"


def pytest_addoption(parser):
    parser.addoption("--update-golden", action="store_true", default=False,
                     help="rewrite golden .ptx files from the emitted PTX (review the diff!)")
    parser.addoption("--run-slow", action="store_true", default=False,
                     help="also run the long property tests marked slow")


@functools.cache
def _gpu_skip_reason() -> str | None:
    try:
        from ptxdsl.runtime import gpu_skip_reason
    except ImportError as e:  # runtime layer unavailable
        return f"ptxdsl.runtime unavailable: {e}"
    return gpu_skip_reason()


def pytest_configure(config):
    # .ci/wheel runs the suite against the installed wheel: a ptxdsl imported from the
    # checkout would test the sources again and call it the wheel. The variable stays set:
    # the tests' children import the wheel too (tests/child_env.py), a child pytest is
    # checked the same way.
    import ptxdsl
    source = Path(__file__).resolve().parents[1] / "ptxdsl"
    if in_wheel_job() and \
            Path(ptxdsl.__file__).resolve().parent == source:
        raise pytest.UsageError(f"PTXDSL_TEST_INSTALLED=1 but ptxdsl is imported from the "
                                f"checkout ({ptxdsl.__file__}), not the installed wheel")


def pytest_collection_modifyitems(config, items):
    if not (config.getoption("--run-slow") or os.environ.get("PTXDSL_SLOW")):
        skip = pytest.mark.skip(reason="long property test: run with --run-slow")
        for it in items:
            if "slow" in it.keywords:
                it.add_marker(skip)
    gpu_items = [it for it in items if "gpu" in it.keywords]
    if not gpu_items:
        return
    reason = _gpu_skip_reason()
    if reason is None:
        return
    marker = pytest.mark.skip(reason=f"needs a Hopper GPU: {reason}")
    for it in gpu_items:
        it.add_marker(marker)


def pytest_generate_tests(metafunc):
    """Parametrize the TMA form checks (`tests.tma_cases.FormChecks`) from the class's GROUPS."""
    cls = metafunc.cls
    if cls is None or not isinstance(getattr(cls, "GROUPS", None), dict):
        return
    values = {"group": lambda: sorted(cls.GROUPS), "case": cls.cases,
              "target_case": cls.below_target_cases, "version_case": cls.below_version_cases}
    for name, get in values.items():
        if name in metafunc.fixturenames:
            items = get()
            metafunc.parametrize(name, items, ids=[i if isinstance(i, str) else i.id
                                                   for i in items])


@pytest.fixture
def golden(request):
    """`golden(module_or_text, "family/name")` compares with tests/golden/family/name.ptx."""
    update = request.config.getoption("--update-golden")

    def check(module_or_text, name: str) -> str:
        text = check_golden(module_or_text, GOLDEN_DIR / f"{name}.ptx", update=update)
        if not isinstance(module_or_text, str):
            assert_round_trip(module_or_text, text, name)
        return text

    return check
