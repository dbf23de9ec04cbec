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


def test_a_constant_that_cannot_fold_is_a_policy_refusal(monkeypatch):
    # ptxas takes `div.u32 d, 1, 0`; ptxdsl folds constants and refuses what has no exact value.
    from ptxdsl import fuzz
    from ptxdsl.fuzz import R, case, policy
    from ptxdsl.types import ScalarType

    c = case("arith", "k.div", (1, 0), {"type": ScalarType.u32, "dst": R("u32")},
             "div.u32 %x_u32, 1, 0;")
    assert [o.verdict for o in fuzz.check([c]).outcomes] == ["refused:policy:constant-fold"]
    monkeypatch.setattr(policy, "RULES", [r for r in policy.RULES if r.id != "constant-fold"])
    assert [o.verdict for o in fuzz.check([c]).outcomes] == ["refused:accepted"]
