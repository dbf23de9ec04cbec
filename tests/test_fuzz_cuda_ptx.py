"""The issue-15 cuda::ptx builders (bit manipulation, clusters and async stores, multimem)
fuzzed against ptxas, like the core and TMA families (see tests/test_fuzz_tma.py)."""

from __future__ import annotations

import pytest

from tests.test_fuzz_tma import fuzz_test

FAMILIES = ("bits", "cluster", "multimem")


@pytest.mark.parametrize("family", FAMILIES)
def test_builder_agrees_with_ptxas(family):
    fuzz_test(family)()
