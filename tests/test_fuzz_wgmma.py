"""The wgmma, ldmatrix/stmatrix and packed-cvt builders fuzzed against ptxas (issue 28, "The
fuzzer covers the new surface"), like the core and TMA families (see tests/test_fuzz_tma.py),
and the oracle shown to catch a planted mistake in each: a builder check switched off, a
policy rule removed."""

from __future__ import annotations

import pytest
from hypothesis import seed

from ptxdsl import fuzz
from ptxdsl.fuzz import A, R, S, case, policy
from tests.test_fuzz_tma import fuzz_test

FAMILIES = ("wgmma", "matrix", "cvt_packed")


@pytest.mark.parametrize("family", FAMILIES)
def test_builder_agrees_with_ptxas(family):
    seed(28)(fuzz_test(family))()


def verdict(c) -> str:
    (o,) = fuzz.check([c]).outcomes
    return o.verdict


D40 = tuple(R("s32", idx=i) for i in range(20))          # m64n40 .s32 accumulators
N40_S8 = case("wgmma", "ptx.wgmma_mma_async", (D40, R("b64", idx=1), R("b64", idx=2),
                                               R("pred")),
              {"atype": "s8", "dtype": "s32", "n": 40},
              "wgmma.mma_async.sync.aligned.m64n40k32.s32.s8.s8 {"
              + ", ".join(r.txt for r in D40) + "}, %x_b64_1, %x_b64_2, %x_pred;")


def test_a_wgmma_check_switched_off_is_a_disagreement(monkeypatch):
    # Integer wgmma takes N = 8, 16, 24 and multiples of 16: with the builder's N table
    # widened to every multiple of 8, it emits an m64n40 s8 form ptxas rejects.
    import attrs

    from ptxdsl.instructions import wgmma
    assert verdict(N40_S8) == "refused:ptxas"
    for w in (wgmma.WgmmaType.s8, wgmma.WgmmaType.u8):
        monkeypatch.setitem(wgmma.KIND_OF, w, attrs.evolve(wgmma.KIND_OF[w], n=wgmma.ALL_N))
    assert verdict(N40_S8) == "accepted:rejected"


CVT_RZ_FP8 = case("cvt_packed", "k.cvt_packed", ("e4m3x2", R("f32"), R("f32", idx=1)),
                  {"rnd": "rz"}, "cvt.rz.satfinite.e4m3x2.f32 %x_b16_2, %x_f32, %x_f32_1;")


def test_a_packed_cvt_rounding_let_through_is_a_disagreement(monkeypatch):
    from ptxdsl.instructions import cvt_packed as cp
    assert verdict(CVT_RZ_FP8) == "refused:ptxas"       # fp8 conversions round .rn only
    forms = {key: cp._Form(f.sources, f.a_type, f.d_type, ("rn", "rz"), f.satfinite)
             for key, f in cp._FORMS.items()}
    monkeypatch.setattr(cp, "_FORMS", forms)
    assert verdict(CVT_RZ_FP8) == "accepted:rejected"


MISALIGNED_ROWS = case("matrix", "k.stmatrix", (A(S("smem"), 8), (R("b32"),)), {},
                       "stmatrix.sync.aligned.m8n8.x1.shared.b16 [smem+8], {%x_b32};")


def test_a_policy_rule_removed_is_a_disagreement(monkeypatch):
    # ptxas takes a misaligned row address; only the policy table says why ptxdsl refuses.
    assert verdict(MISALIGNED_ROWS) == "refused:policy:matrix-rows"
    monkeypatch.setattr(policy, "RULES", [r for r in policy.RULES if r.id != "matrix-rows"])
    assert verdict(MISALIGNED_ROWS) == "refused:accepted"
