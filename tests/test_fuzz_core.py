"""The core instructions' builders fuzzed against ptxas (issue 7, item 1).

Each test draws $PTXDSL_FUZZ_EXAMPLES cases (default 300) of one family, `fuzz.BATCH` per
hypothesis example, calls the public builders and has `fuzz.check` judge every verdict with
ptxas through nvJitLink (see ptxdsl/fuzz/oracle.py); any disagreement fails the test with the
cases, the PTX and ptxas' words.
"""

from __future__ import annotations

import pytest

from tests.test_fuzz_tma import fuzz_test

FAMILIES = ("arith", "compare", "move", "memory", "atomic", "sync", "warp")


@pytest.mark.parametrize("family", FAMILIES)
def test_builder_agrees_with_ptxas(family):
    fuzz_test(family)()
