"""The TMA families' builders fuzzed against ptxas (issue 7, item 1).

Each test draws $PTXDSL_FUZZ_EXAMPLES cases (default 300) of one family, `fuzz.BATCH` per
hypothesis example, calls the public builders and has `fuzz.check` judge every verdict with
ptxas through nvJitLink (see ptxdsl/fuzz/oracle.py); any disagreement fails the test with the
cases, the PTX and ptxas' words.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from ptxdsl import fuzz

FAMILIES = ("fence", "tensormap", "mbarrier", "bulk", "bulk_tensor")


def fuzz_test(family: str):
    """A hypothesis test of `family` sized by $PTXDSL_FUZZ_EXAMPLES."""
    # No shrinking: a failure already names the one case and its PTX, and shrinking a batch
    # would re-assemble it hundreds of times.
    @settings(max_examples=max(1, -(-fuzz.examples() // fuzz.BATCH)), deadline=None,
              suppress_health_check=list(HealthCheck),
              phases=(Phase.explicit, Phase.reuse, Phase.generate))
    @given(st.lists(fuzz.strategies[family], min_size=fuzz.BATCH, max_size=fuzz.BATCH))
    def run(cases):
        report = fuzz.check(cases)
        assert not report.failures, "\n" + report.describe_failures()
    return run


@pytest.mark.parametrize("family", FAMILIES)
def test_builder_agrees_with_ptxas(family):
    fuzz_test(family)()
