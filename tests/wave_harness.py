"""The checks every wave of held-out hazard pairs gets (tests/test_checker_wave3.py,
tests/test_checker_wave4.py): the buggy twin is found with its id (and only ids its mistake
rightly causes), the correct twin has no error or warning, both assemble for sm_90a."""

from __future__ import annotations

import pytest

from ptxdsl.checker import Severity
from ptxdsl.frontend import parse_ptx
from tests.wave3_kernels import Pair


def findings(p: Pair, bug: bool) -> list:
    """The errors and warnings (notes left out) of one twin, read as raw PTX."""
    found = parse_ptx(p.build(bug), file=f"{p.name}.ptx").check(**p.context)
    return [f for f in found if f.severity is not Severity.note]


def param(p: Pair, reason: str | None = None):
    """`p` as a test parameter, a strict xfail saying `reason` where one is given."""
    marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
    return pytest.param(p, id=p.name, marks=marks)


def assert_found(p: Pair) -> None:
    found = findings(p, True)
    ids = {f.id for f in found}
    assert p.hazard in ids, [f.format() for f in found]
    assert ids <= {p.hazard, *p.also}, [f.format() for f in found]


def assert_clean(p: Pair) -> None:
    found = findings(p, False)
    assert found == [], [f.format() for f in found]


def assert_twins_assemble(p: Pair) -> None:
    toolchain = pytest.importorskip("ptxdsl.toolchain")
    try:
        toolchain._nvjitlink()
    except Exception as e:   # no nvJitLink on this machine
        pytest.skip(f"nvJitLink unavailable: {e}")
    for bug in (True, False):
        assert len(toolchain.assemble(p.build(bug), "sm_90a", warn=False)) > 0
