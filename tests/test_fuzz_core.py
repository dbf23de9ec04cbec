"""The core instructions' builders fuzzed against ptxas (issue 7, item 1).

Each test draws $PTXDSL_FUZZ_EXAMPLES cases (default 300) of one family, `fuzz.BATCH` per
hypothesis example, calls the public builders and has `fuzz.check` judge every verdict with
ptxas through nvJitLink (see ptxdsl/fuzz/oracle.py); any disagreement fails the test with the
cases, the PTX and ptxas' words.
"""

from __future__ import annotations

import pytest

from tests.test_fuzz_tma import fuzz_test

FAMILIES = ("arith", "compare", "move", "memory", "atomic", "sync", "warp", "sfu")


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


def test_an_sfu_rule_loosened_or_a_policy_removed_is_a_disagreement(monkeypatch):
    from ptxdsl import fuzz
    from ptxdsl.fuzz import R, case, policy
    from ptxdsl.instructions import sfu

    def verdict(c):
        return [o.verdict for o in fuzz.check([c]).outcomes][0]

    tanh_ftz = case("sfu", "k.tanh", (R("f32"),), {"ftz": True},
                    "tanh.approx.ftz.f32 %x_f32_1, %x_f32;")
    assert verdict(tanh_ftz) == "refused:ptxas"
    loose = sfu._Form({sfu.SfuMode.approx: sfu.OPTIONAL}, sfu.R_HALF)
    monkeypatch.setitem(sfu._FORMS, (sfu.SfuOp.tanh, sfu.T.f32), loose)
    assert verdict(tanh_ftz) == "accepted:rejected"
    rcp_ftz = case("sfu", "k.rcp", (R("f64"),), {"ftz": True}, "rcp.rn.ftz.f64 %x_f64_1, %x_f64;")
    assert verdict(rcp_ftz) == "refused:policy:rcp-ftz-f64"
    monkeypatch.setattr(policy, "RULES", [r for r in policy.RULES if r.id != "rcp-ftz-f64"])
    assert verdict(rcp_ftz) == "refused:accepted"
