"""The fuzz oracle itself: it must catch each kind of disagreement, not only pass.

Hand-made cases whose verdict is known: an accepted instruction ptxas rejects, a refused one
ptxas accepts, a refusal the policy table covers, a builder crash, an accepted input with no
PTX spelling, a wrong renderer; plus the toolchain-crash isolation and the batching that must
attribute ptxas' errors to the right case.
"""

from __future__ import annotations

from ptxdsl import fuzz
from ptxdsl.fuzz import R, S, case, oracle, policy
from ptxdsl.fuzz.worker import CRASH, Assembler


def verdicts(*cases):
    return [o.verdict for o in fuzz.check(cases).outcomes]


def test_agreements():
    ok = case("t", "ptx.fence", ("acq_rel", "gpu"), text="fence.acq_rel.gpu;")
    refused = case("t", "ptx.fence", ("relaxed", "gpu"), text="fence.relaxed.gpu;")
    no_ptx = case("t", "ptx.fence_proxy_async", ("bogus-space",))
    assert verdicts(ok, refused, no_ptx) == ["accepted", "refused:ptxas", "refused:no-ptx"]


def test_accepted_but_rejected_by_ptxas_is_a_failure():
    # k.asm does not validate its template: ptxas is the only judge of this one.
    bad = case("t", "k.asm", ("fence.bogus.gpu;",), text="fence.bogus.gpu;")
    (o,) = fuzz.check([bad]).outcomes
    assert o.verdict == "accepted:rejected" and o.failed
    assert "Unknown modifier '.bogus'" in o.detail


def test_refused_but_accepted_by_ptxas_is_a_failure():
    # The builder refuses .relaxed; pretend its text were a valid spelling.
    wrong = case("t", "ptx.fence", ("relaxed", "gpu"), text="fence.sc.gpu;")
    (o,) = fuzz.check([wrong]).outcomes
    assert o.verdict == "refused:accepted" and "ptxas accepts `fence.sc.gpu;`" in o.detail


def test_policy_rule_covers_a_known_refusal():
    # ptxas accepts a zero membermask; the PTX ISA makes it undefined: policy, with a reason.
    zero = case("warp", "k.syncwarp", (0,), text="bar.warp.sync 0;")
    assert verdicts(zero) == ["refused:policy:zero-membermask"]
    rule = policy.match(zero, "bar.warp.sync: operand 'membermask': expected a .b32 register "
                        "or a non-zero 32-bit mask")
    assert rule is not None and "undefined" in rule.reason


def test_every_policy_rule_has_a_reason_and_a_valid_pattern():
    import re
    ids = [r.id for r in policy.RULES]
    assert len(ids) == len(set(ids))
    for r in policy.RULES:
        re.compile(r.pattern)
        assert len(r.reason) > 40, r.id
    assert "space-hint" in policy.table()


def test_builder_crash_and_accepted_input_without_ptx_are_failures():
    crash = case("t", "k.no_such_builder", (), text="ret;")
    junk = case("t", "ptx.fence", ("sc", "gpu"))           # valid, but marked unspellable
    out = fuzz.check([crash, junk]).outcomes
    assert [o.verdict for o in out] == ["crash", "accepted:no-ptx"]
    assert "AttributeError" in out[0].detail


def test_renderer_mismatch_is_reported():
    wrong_text = case("t", "ptx.fence", ("sc", "gpu"), text="fence.sc.bogus;")
    assert verdicts(wrong_text) == ["renderer"]


def test_batches_attribute_each_rejection():
    # Twelve cases in one assembly, refusals interleaved with a fatal parse error: each must
    # still get its own verdict.
    cases = []
    for _ in range(4):
        cases.append(case("t", "ptx.fence", ("sc", "cta"), text="fence.sc.cta;"))
        cases.append(case("t", "ptx.membar", ("gpu",), text="membar.gpu;"))
        cases.append(case("t", "ptx.fence", ("weak", "cta"), text="fence.weak.cta$$ (;"))
    assert verdicts(*cases) == ["accepted", "refused:ptxas", "refused:ptxas"] * 4


def test_tokens_declare_what_the_text_uses():
    c = case("t", "ptx.mbarrier_arrive", (S("bar"),), text="mbarrier.arrive.shared::cta.b64 "
             "%x_b64, [bar];")
    toks = c.tokens()
    assert S("bar") in toks and R("b64") in toks


def test_a_toolchain_crash_is_contained():
    # nvJitLink 13.x segfaults on st.param through a register inside a kernel.
    ptx = (f".version {oracle.newest_version()}\n.target sm_90a\n.address_size 64\n"
           ".visible .entry k()\n{\n.reg .u64 %a;\n.reg .u32 %v;\nst.param.u32 [%a], %v;\n"
           "ret;\n}\n")
    asm = Assembler()
    try:
        log = asm(ptx, "sm_90a")
        assert log is not None
        if log.startswith(CRASH):               # this toolchain crashes: contained
            assert asm.crashes == 1
        assert asm(".version 8.0\n.target sm_90\n.address_size 64\n", "sm_90") is None
    finally:
        asm.close()
