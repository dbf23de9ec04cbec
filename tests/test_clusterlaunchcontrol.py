"""Cluster launch control (clusterlaunchcontrol.try_cancel / query_cancel) and st.bulk: goldens
at each inferred minimum (sm_100, sm_100a for the multicast form), pin-below tests, refusal
rules, the forms table, the read-back of every form, and every form of cuda::ptx's
clusterlaunchcontrol.h and st_bulk.h built literally and assembled."""

from __future__ import annotations

import os
import re

import pytest

from ptxdsl import Addr, BuildError, Kernel, Module, OperandError, VersionError, ptx, t
from ptxdsl.forms import all_forms
from ptxdsl.frontend import parse_ptx
from ptxdsl.instructions.clusterlaunchcontrol import (
    CLC,
    CLC_MULTICAST,
    CancelQuery,
    ClusterLaunchControlQueryCancel,
    ClusterLaunchControlTryCancel,
)
from ptxdsl.instructions.st_bulk import ST_BULK, ST_BULK_SIZE32, StBulk
from ptxdsl.testing import assemble_declared
from ptxdsl.types import req
from tests.cccl_forms import CCCL, asm_shapes, header_forms, needs_cccl, shape
from tests.tma_cases import Case, Env, FormChecks

HERE = os.path.abspath(__file__)


def _here(err) -> bool:
    return os.path.abspath(err.value.loc.file) == HERE


class ClcEnv(Env):
    """The operands of these forms: a 16-byte response buffer, its .b128 value, and a
    shared-memory region for st.bulk."""

    resp = property(lambda s: s._get("resp", lambda: s.k.shared_array(
        t.b8, 16, align=16, name="resp")))
    resp32 = property(lambda s: s._get("resp32", lambda: s.k.mov(s.resp)))
    resp64 = property(lambda s: s._get("resp64", lambda: s.k.mov(s.resp, type=t.u64)))
    q = property(lambda s: s._get("q", lambda: s.k.ld(s.resp, type=t.b128)))


def C(id, fn, version, target):
    return Case(id, fn, version, target)


def _size32(e):
    return e._get("size32", lambda: e.k.mov(64, type=t.u32))


GROUPS: dict[str, list[Case]] = {
    "clusterlaunchcontrol/try_cancel": [
        C("symbols", lambda e: ptx.clusterlaunchcontrol_try_cancel(e.k, e.resp, e.bar),
          "8.6", "sm_100"),
        C("regs32", lambda e: ptx.clusterlaunchcontrol_try_cancel(e.k, e.resp32, e.bar32),
          "8.6", "sm_100"),
        C("regs64", lambda e: ptx.clusterlaunchcontrol_try_cancel(e.k, e.resp64, e.bar64),
          "8.6", "sm_100"),
        C("generic", lambda e: ptx.clusterlaunchcontrol_try_cancel(
            e.k, e.k.generic_addr(e.resp), e.bar_generic), "8.6", "sm_100"),
    ],
    "clusterlaunchcontrol/try_cancel_multicast": [
        C("symbols", lambda e: ptx.clusterlaunchcontrol_try_cancel_multicast(
            e.k, e.resp, e.bar), "8.6", "sm_100a"),
        C("regs32", lambda e: ptx.clusterlaunchcontrol_try_cancel_multicast(
            e.k, e.resp32, e.bar32), "8.6", "sm_100a"),
    ],
    "clusterlaunchcontrol/query_cancel": [
        C("is_canceled", lambda e: ptx.clusterlaunchcontrol_query_cancel_is_canceled(e.k, e.q),
          "8.6", "sm_100"),
        *(C(f"first_ctaid_{d}", lambda e, d=d: getattr(
            ptx, f"clusterlaunchcontrol_query_cancel_get_first_ctaid_{d}")(e.k, e.q), "8.6",
            "sm_100") for d in "xyz"),
        C("first_ctaid_v4", lambda e: ptx.clusterlaunchcontrol_query_cancel_get_first_ctaid(
            e.k, e.q), "8.6", "sm_100"),
    ],
    "clusterlaunchcontrol/st_bulk": [
        C("symbol-imm", lambda e: ptx.st_bulk(e.k, e.smap, 128, 0), "8.6", "sm_100"),
        C("symbol-offset", lambda e: ptx.st_bulk(e.k, Addr(e.smap, 64), 64, 0), "8.6",
          "sm_100"),
        C("reg-reg64", lambda e: ptx.st_bulk(e.k, e.smap32, e.v64, 0), "8.6", "sm_100"),
        C("reg64-imm", lambda e: ptx.st_bulk(e.k, e.smap64, 8, 0), "8.6", "sm_100"),
        C("generic", lambda e: ptx.st_bulk(e.k, e.k.generic_addr(e.smap), 0, 0), "8.6",
          "sm_100"),
    ],
    "clusterlaunchcontrol/st_bulk_size32": [
        C("reg-reg32", lambda e: ptx.st_bulk(e.k, e.smap32, _size32(e), 0), "9.0", "sm_100"),
    ],
}


class TestForms(FormChecks):
    GROUPS = GROUPS
    ENV = ClcEnv


def _texts(e) -> list[str]:
    return [s.render() for s in e.k.statements()]


def test_text():
    e = ClcEnv()
    ptx.clusterlaunchcontrol_try_cancel(e.k, e.resp, e.bar)
    ptx.clusterlaunchcontrol_try_cancel_multicast(e.k, Addr(e.resp, 0), e.bar)
    p = ptx.clusterlaunchcontrol_query_cancel_is_canceled(e.k, e.q)
    x = ptx.clusterlaunchcontrol_query_cancel_get_first_ctaid_x(e.k, e.q)
    v = ptx.clusterlaunchcontrol_query_cancel_get_first_ctaid(e.k, e.q)
    ptx.st_bulk(e.k, Addr(e.smap, 8), 16, 0)
    assert p.type is t.pred and x.type is t.b32 and len(v) == 4
    assert all(r.type is t.b32 for r in v)
    assert _texts(e) == [
        "clusterlaunchcontrol.try_cancel.async.shared::cta.mbarrier::complete_tx::bytes.b128 "
        "[resp], [bar];",
        "clusterlaunchcontrol.try_cancel.async.shared::cta.mbarrier::complete_tx::bytes"
        ".multicast::cluster::all.b128 [resp], [bar];",
        "ld.shared.b128 %q1, [resp];",
        "clusterlaunchcontrol.query_cancel.is_canceled.pred.b128 %p1, %q1;",
        "clusterlaunchcontrol.query_cancel.get_first_ctaid::x.b32.b128 %r1, %q1;",
        "clusterlaunchcontrol.query_cancel.get_first_ctaid.v4.b32.b128 {%r2, %r3, %r4, %r5}, "
        "%q1;",
        "mov.u32 %r6, smap;",
        "st.bulk.weak.shared::cta [%r6+8], 16, 0;",
    ]


def test_dst_registers_are_used():
    e = ClcEnv()
    p, d = e.k.reg(t.pred), e.k.reg(t.u32)
    regs = [e.k.reg(t.b32) for _ in range(4)]
    assert ptx.clusterlaunchcontrol_query_cancel_is_canceled(e.k, e.q, dst=p) is p
    assert ptx.clusterlaunchcontrol_query_cancel_get_first_ctaid_y(e.k, e.q, dst=d) is d
    assert ptx.clusterlaunchcontrol_query_cancel_get_first_ctaid(e.k, e.q, dst=regs) == \
        tuple(regs)


def test_requirements():
    assert CLC == req("8.6", 100) and ST_BULK == req("8.6", 100)
    assert ST_BULK_SIZE32 == req("9.0", 100)
    assert CLC_MULTICAST.arch_specific >= {100, 103, 110} and CLC_MULTICAST.family_ok


@pytest.mark.parametrize("target", ["sm_103a", "sm_110a", "sm_120a", "sm_100f"])
def test_multicast_assembles_for_other_arch_targets(target):
    """ptxas takes the multicast form on these targets too (the forms table's note)."""
    e = ClcEnv(target=target, version="9.0")
    ptx.clusterlaunchcontrol_try_cancel_multicast(e.k, e.resp, e.bar)
    assert assemble_declared(e.module().emit())[:4] == b"\x7fELF"


# -- refusal rules ---------------------------------------------------------------------------------
def test_refuse_response_misaligned():
    e = ClcEnv()
    buf = e.k.shared_array(t.b8, 32, align=8, name="buf")
    with pytest.raises(OperandError, match="16-byte aligned address for the try_cancel "
                       "response") as ei:
        ptx.clusterlaunchcontrol_try_cancel(e.k, buf, e.bar)
    assert _here(ei)
    with pytest.raises(OperandError, match="16-byte aligned"):
        ptx.clusterlaunchcontrol_try_cancel(e.k, Addr(e.smap, 8), e.bar)


def test_refuse_response_outside_its_symbol():
    e = ClcEnv()
    small = e.k.shared_array(t.b64, 1, align=16, name="small")
    with pytest.raises(OperandError, match=r"an access inside small \(8 bytes\) for the "
                       "try_cancel response"):
        ptx.clusterlaunchcontrol_try_cancel(e.k, small, e.bar)


def test_refuse_try_cancel_mbarrier_misaligned():
    e = ClcEnv()
    with pytest.raises(OperandError, match=r"'smem_bar'.*8-byte aligned address for an "
                       "mbarrier") as ei:
        ptx.clusterlaunchcontrol_try_cancel_multicast(e.k, e.resp, Addr(e.smap, 4))
    assert _here(ei)


def test_refuse_try_cancel_other_space():
    e = ClcEnv()
    with pytest.raises(OperandError, match=r"'addr'.*a symbol in .shared::cta"):
        ptx.clusterlaunchcontrol_try_cancel(e.k, e.gsym, e.bar)
    remote = ptx.mapa(e.k, "cluster", e.resp, 1)     # another CTA's buffer
    with pytest.raises(OperandError, match=r"'addr'.*a .shared::cta address.*"
                       "holds a .shared::cluster address") as ei:
        ptx.clusterlaunchcontrol_try_cancel(e.k, remote, e.bar)
    assert _here(ei)


def test_refuse_try_cancel_multicast_not_bool():
    e = ClcEnv()
    with pytest.raises(OperandError, match="'multicast'.*True or False"):
        ClusterLaunchControlTryCancel(e.resp, e.bar, "no")


def test_refuse_multicast_below_arch_target():
    e = ClcEnv(target="sm_100")
    ptx.clusterlaunchcontrol_try_cancel_multicast(e.k, e.resp, e.bar)
    with pytest.raises(VersionError, match="sm_100a"):
        e.module().emit()


def test_refuse_query_response_not_b128():
    e = ClcEnv()
    with pytest.raises(OperandError, match=r"'try_cancel_response'.*a .b128 register holding "
                       r"the response.*k.ld\(addr, type=t.b128\).*\.u64") as ei:
        ptx.clusterlaunchcontrol_query_cancel_is_canceled(e.k, e.v64)
    assert _here(ei)
    with pytest.raises(OperandError, match="'try_cancel_response'.*a .b128 register"):
        ptx.clusterlaunchcontrol_query_cancel_get_first_ctaid_x(e.k, 5)
    with pytest.raises(OperandError, match="'try_cancel_response'.*a .b128 register"):
        ptx.clusterlaunchcontrol_query_cancel_get_first_ctaid(e.k, e.resp)


def test_refuse_query_dst_type():
    e = ClcEnv()
    with pytest.raises(OperandError, match=r"is_canceled.*'d'.*compatible with .pred") as ei:
        ptx.clusterlaunchcontrol_query_cancel_is_canceled(e.k, e.q, dst=e.k.reg(t.b32))
    assert _here(ei)
    with pytest.raises(OperandError, match=r"get_first_ctaid::z.*'d'.*compatible with .b32"):
        ptx.clusterlaunchcontrol_query_cancel_get_first_ctaid_z(e.k, e.q,
                                                                dst=e.k.reg(t.u64))


def test_refuse_query_v4_dst_count():
    e = ClcEnv()
    with pytest.raises(OperandError, match=r"'d'.*four .b32 registers") as ei:
        ptx.clusterlaunchcontrol_query_cancel_get_first_ctaid(
            e.k, e.q, dst=[e.k.reg(t.b32) for _ in range(3)])
    assert _here(ei)
    with pytest.raises(OperandError, match=r"'d\[2\]'.*\.b32"):
        ptx.clusterlaunchcontrol_query_cancel_get_first_ctaid(
            e.k, e.q, dst=[e.k.reg(t.b32), e.k.reg(t.b32), e.k.reg(t.f64), e.k.reg(t.b32)])


def test_refuse_query_kind():
    e = ClcEnv()
    with pytest.raises(OperandError, match="'query'.*CancelQuery.is_canceled"):
        ClusterLaunchControlQueryCancel("is_canceled", e.k.reg(t.pred), e.q)


def test_refuse_st_bulk_initval_not_zero():
    e = ClcEnv()
    with pytest.raises(OperandError, match="'initval'.*the immediate 0") as ei:
        ptx.st_bulk(e.k, e.smap, 16, 1)
    assert _here(ei)
    with pytest.raises(OperandError, match="'initval'.*the immediate 0"):
        ptx.st_bulk(e.k, e.smap, 16, e.v32)


def test_refuse_st_bulk_size():
    e = ClcEnv()
    with pytest.raises(OperandError, match="'size'.*a multiple of 8 bytes.*12") as ei:
        ptx.st_bulk(e.k, e.smap, 12, 0)
    assert _here(ei)
    with pytest.raises(OperandError, match=r"'size'.*\[0, 16777216\]"):
        ptx.st_bulk(e.k, e.smap32, 1 << 32, 0)
    with pytest.raises(OperandError, match="'size'.*64-bit integer register"):
        ptx.st_bulk(e.k, e.smap32, e.k.reg(t.b16), 0)
    with pytest.raises(OperandError, match="'size'.*64-bit integer register"):
        ptx.st_bulk(e.k, e.smap32, e.k.reg(t.f64), 0)


def test_refuse_st_bulk_outside_or_misaligned():
    e = ClcEnv()
    with pytest.raises(OperandError, match=r"an access inside smap \(128 bytes\)") as ei:
        ptx.st_bulk(e.k, Addr(e.smap, 64), 128, 0)
    assert _here(ei)
    with pytest.raises(OperandError, match="8-byte aligned"):
        ptx.st_bulk(e.k, Addr(e.smap, 4), 8, 0)
    with pytest.raises(OperandError, match="inside smap"):   # a register known to hold smap
        ptx.st_bulk(e.k, e.smap32, 256, 0)


def test_refuse_st_bulk_other_space():
    e = ClcEnv()
    with pytest.raises(OperandError, match=r"'addr'.*a .shared::cta address.*"
                       "holds a .global address") as ei:
        ptx.st_bulk(e.k, e.gglobal, 8, 0)
    assert _here(ei)
    with pytest.raises(OperandError, match=r"'addr'.*a symbol in .shared::cta"):
        ptx.st_bulk(e.k, e.gsym, 8, 0)


def test_refuse_st_bulk_symbol_in_the_class():
    """ptxas refuses a symbol as st.bulk's address; the builder moves it into a register."""
    e = ClcEnv()
    with pytest.raises(OperandError, match="ptxas refuses a symbol here"):
        StBulk(e.smap, 8, 0)


def test_refuse_st_bulk_weak_not_bool():
    e = ClcEnv()
    with pytest.raises(OperandError, match="'weak'.*True or False"):
        StBulk(e.smap32, 8, 0, weak=1)


def test_refused_call_adds_nothing():
    e = ClcEnv()
    before = len(_texts(e))
    with pytest.raises(BuildError):
        ptx.st_bulk(e.k, e.smap, 12, 0)   # the mov of smap's address is rolled back
    assert len(_texts(e)) == before


# -- reading back --------------------------------------------------------------------------------
def test_read_back_without_weak():
    """st.bulk without `.weak` (its only semantics) reads as the same instruction."""
    text = """.version 8.6
.target sm_100
.address_size 64
.visible .entry k()
{
.reg .b32 %r<2>;
.reg .b64 %rd<2>;
st.bulk.shared::cta [%r1], %rd1, 0;
st.bulk.weak.shared::cta [%r1+8], 8, 0;
}
"""
    insns = [s.insn for s in parse_ptx(text).kernels[0].statements()]
    assert [type(i) for i in insns] == [StBulk, StBulk]
    assert insns[0].weak is False and insns[1].weak is True
    assert [i.render() for i in insns] == ["st.bulk.shared::cta [%r1], %rd1, 0;",
                                           "st.bulk.weak.shared::cta [%r1+8], 8, 0;"]


def test_read_back_every_form():
    e = ClcEnv()
    for cases in GROUPS.values():
        for c in cases:
            c.build(e)
    want = [s.insn for s in e.k.statements()]
    got = [s.insn for s in parse_ptx(e.module().emit()).kernels[0].statements()]
    assert [i.render() for i in got] == [i.render() for i in want]
    assert {type(i) for i in got} >= {ClusterLaunchControlTryCancel,
                                      ClusterLaunchControlQueryCancel, StBulk}
    queries = {i.query for i in got if isinstance(i, ClusterLaunchControlQueryCancel)}
    assert queries == set(CancelQuery)


# -- the forms table -------------------------------------------------------------------------------
ROWS = all_forms(("clusterlaunchcontrol", "st_bulk"))
SAMPLES = {
    "try_cancel.async.shared::cta.mbarrier::complete_tx::bytes.b128":
        lambda e: ptx.clusterlaunchcontrol_try_cancel(e.k, e.resp, e.bar),
    "multicast": lambda e: ptx.clusterlaunchcontrol_try_cancel_multicast(e.k, e.resp, e.bar),
    "is_canceled": lambda e: ptx.clusterlaunchcontrol_query_cancel_is_canceled(e.k, e.q),
    "::z": lambda e: ptx.clusterlaunchcontrol_query_cancel_get_first_ctaid_x(e.k, e.q),
    ".v4": lambda e: ptx.clusterlaunchcontrol_query_cancel_get_first_ctaid(e.k, e.q),
    "size, initval": lambda e: ptx.st_bulk(e.k, e.smap, 8, 0),
    "size32": lambda e: ptx.st_bulk(e.k, e.smap32, _size32(e), 0),
}


def _sample(form: str):
    hits = [fn for key, fn in SAMPLES.items()
            if key in form and not (key.endswith("b128") and "multicast" in form)]
    assert len(hits) == 1, form
    return hits[0]


@pytest.mark.parametrize("row", ROWS, ids=lambda r: r.form)
def test_row_is_what_its_sample_needs(row):
    e = ClcEnv()
    _sample(row.form)(e)
    assert list(e.k.statements())[-1].insn.requires == row.requires


def test_control_ptx_no_longer_lists_them_as_not_built():
    rows = all_forms(("control_ptx",))
    assert not any("clusterlaunchcontrol" in r.form or "st.bulk" in r.form for r in rows)


# -- cuda::ptx's headers ---------------------------------------------------------------------------
HEADERS = ("clusterlaunchcontrol", "st_bulk")
HEADER_FORMS = header_forms(HEADERS)


def _header_sms() -> dict[str, str]:
    """function name -> the SM list of its PTX-form comment ('SM_100', 'SM_100a, SM_101a')."""
    out = {}
    for h in HEADERS:
        text = (CCCL / f"{h}.h").read_text()
        for sms, name in re.findall(r"PTX\s+ISA\s+\d+, (SM_[\w, ]+?)\s*(?:\n|template).*?"
                                    r"static inline [\w:<>]+ (\w+)\(", text, re.S):
            out[name] = sms
    return out


def _build(e, name: str):
    if name.startswith("clusterlaunchcontrol_try_cancel"):
        return getattr(ptx, name)(e.k, e.resp, e.bar)
    if name.startswith("clusterlaunchcontrol_query_cancel"):
        return getattr(ptx, name)(e.k, e.q)
    return ptx.st_bulk(e.k, e.smap32, e.v64, 0)


@needs_cccl
def test_header_forms_are_all_ours():
    assert len(HEADER_FORMS) == 7 + 1
    assert all(callable(getattr(ptx, name, None)) for _, name, _, _, _ in HEADER_FORMS)


@needs_cccl
def test_every_cuda_ptx_form():
    """Each form of the headers, called as cuda::ptx calls it, emits the header's text (and a
    statement of its asm() template) and needs the header's version and target; the batch
    assembles for sm_100a."""
    sms = _header_sms()
    e = ClcEnv()
    for form, name, _q, isa, sm in HEADER_FORMS:
        _build(e, name)
        insn = list(e.k.statements())[-1].insn
        # The header's form names the v4 result one operand (block_dim); its asm() braces it.
        assert re.sub(r"\{[^}]*\}", "%", shape(insn.render())) == shape(form + ";"), name
        header = "st_bulk" if name == "st_bulk" else "clusterlaunchcontrol"
        assert shape(insn.render()) in asm_shapes(header), name
        if sms[name] == "SM_100":
            assert insn.requires == req(isa, sm), name
        else:   # 'SM_100a, SM_101a': an arch-specific form
            arch = {int(n) for n in re.findall(r"SM_(\d+)a", sms[name])}
            assert insn.requires.version == req(isa).version, name
            assert arch <= insn.requires.arch_specific, name
    m = e.module()
    assert str(m.target) == "sm_100a"
    assert assemble_declared(m.emit())[:4] == b"\x7fELF"


def _clc_kernel(expect: int = 16, early_read: bool = False) -> Kernel:
    """The try_cancel step of a persistent kernel: init the mbarrier, expect 16 bytes, try,
    wait, load the response and decode it; a tile zeroed with st.bulk beside it."""
    k = Kernel("clc", reqntid=128)
    resp = k.shared_array(t.b8, 16, align=16, name="resp")
    bar = k.shared_array(t.b64, 1, align=8, name="bar")
    tile = k.shared_array(t.b8, 1024, align=128, name="tile")
    ptx.st_bulk(k, tile, 1024, 0)
    with k.if_(k.tid.x == 0):
        ptx.mbarrier_init(k, bar, 1)
        ptx.fence_mbarrier_init(k, "release", "cluster")
        ptx.mbarrier_arrive_expect_tx(k, "release", "cta", "shared", bar, expect)
        ptx.clusterlaunchcontrol_try_cancel(k, resp, bar)
        if early_read:
            k.ld(resp, type=t.b128)
        ptx.mbarrier_wait(k, bar, 0)
        q = k.ld(resp, type=t.b128)
        ok = ptx.clusterlaunchcontrol_query_cancel_is_canceled(k, q)
        x = ptx.clusterlaunchcontrol_query_cancel_get_first_ctaid_x(k, q)
        out = k.ld_param(k.param_ptr("out"))
        with k.if_(ok):
            k.st(k.cvta(out, "global", to=True), x, space="global")
    return k


def test_a_kernel_using_both_checks_clean_and_assembles():
    """The checker counts try_cancel's 16 bytes on its mbarrier (as a bulk copy's)."""
    k = _clc_kernel()
    assert k.check() == []
    assert assemble_declared(Module([k]).emit())[:4] == b"\x7fELF"


def test_checker_sees_the_response_bytes():
    """Its dirty twins: an expect_tx of 32 bytes for the 16 try_cancel completes, and the
    response read before the mbarrier wait."""
    assert [f.hazard.value for f in _clc_kernel(expect=32).check()] == ["expect-tx-mismatch"]
    assert [f.hazard.value for f in _clc_kernel(early_read=True).check()] == [
        "smem-read-before-wait"]


# -- fuzzed against ptxas ---------------------------------------------------------------------
@pytest.mark.parametrize("family", ["clusterlaunchcontrol", "st_bulk"])
def test_builder_agrees_with_ptxas(family):
    from tests.test_fuzz_tma import fuzz_test
    fuzz_test(family)()


@pytest.mark.parametrize("family,classes", [
    ("clusterlaunchcontrol", {"ClusterLaunchControlTryCancel", "ClusterLaunchControlQueryCancel"}),
    ("st_bulk", {"StBulk"})])
def test_fuzzed_builder_calls_read_back_typed(family, classes):
    """Every call the fuzz strategy makes that the builder accepts, emitted and parsed back,
    is the same typed statement (nothing left Raw)."""
    import collections

    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis import strategies as st

    from ptxdsl import fuzz
    from ptxdsl.frontend.compare import first_difference, instructions
    from ptxdsl.fuzz import oracle
    from tests.frontend_support import unread
    seen: collections.Counter = collections.Counter()

    @settings(max_examples=10, deadline=None, derandomize=True, database=None,
              suppress_health_check=list(HealthCheck), phases=(Phase.generate,))
    @given(st.lists(fuzz.strategies[family], min_size=40, max_size=40))
    def run(cases):
        kernels = [k for i, c in enumerate(cases) for k in [oracle.build(i, c)]
                   if isinstance(k, Kernel)]
        text = Module(kernels, check=False).emit()
        parsed = parse_ptx(text)
        for k in kernels:
            body = parsed.function(k.name).body
            assert first_difference(k.body, body, raw_ok=unread()) is None
            seen.update(type(s.insn).__name__ for s in instructions(body))

    run()
    assert all(seen[c] >= 20 for c in classes), dict(seen)


def test_an_immediate_response_is_a_policy_refusal(monkeypatch):
    # ptxas takes `query_cancel ... %p, 5`; an immediate is no response try_cancel wrote.
    from ptxdsl import fuzz
    from ptxdsl.fuzz import R, case, policy

    c = case("clusterlaunchcontrol", "ptx.clusterlaunchcontrol_query_cancel_is_canceled", (5,),
             text=f"clusterlaunchcontrol.query_cancel.is_canceled.pred.b128 {R('pred').txt}, 5;")
    assert [o.verdict for o in fuzz.check([c]).outcomes] == ["refused:policy:clc-response"]
    monkeypatch.setattr(policy, "RULES", [r for r in policy.RULES if r.id != "clc-response"])
    assert [o.verdict for o in fuzz.check([c]).outcomes] == ["refused:accepted"]
