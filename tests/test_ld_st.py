"""ld / st with cuda::ptx's cache qualifiers: every form of cuda::ptx's ld.h and st.h, read
from the header's PTX-form comments, built with the builder of the same name, compared with the
header's text and requirement, and assembled (batched: one module per requirement); goldens per
qualifier kind, pin-below tests and refusal rules."""

from __future__ import annotations

import re

import pytest

from ptxdsl import BuildError, OperandError, VersionError, ptx, t
from ptxdsl.instructions import ld_st
from ptxdsl.testing import assemble_declared
from ptxdsl.types import req
from tests.cccl_forms import by_requirement, header_forms, needs_cccl
from tests.tma_cases import Case, Env, FormChecks

FORMS = header_forms(("ld", "st"))


def _policy(e):
    return e._get("policy", lambda: ptx.createpolicy_fractional(e.k, "evict_last"))


def build_form(e, form: str, name: str) -> str:
    """Build one header form with its builder; return the header's text for our operands."""
    bits = int(re.search(r"\.b(\d+) ", form).group(1))
    ty = getattr(t, f"b{bits}")
    fn = getattr(ptx, name)
    hint = "cache_policy" in form
    args = (_policy(e),) if hint else ()
    if form.startswith("ld"):
        d = fn(e.k, "global", e.gglobal, *args, type=ty)
        ops = {"dest": d.render()}
    else:
        v = e._get(f"v{bits}", lambda: e.k.reg(ty))
        fn(e.k, "global", e.gglobal, v, *args)
        ops = {"src": v.render()}
    ops.update({"[addr]": f"[{e.gglobal.render()}]", "cache_policy": _policy(e).render() if hint
                else "cache_policy"})
    head, _, operands = form.partition(" ")
    for key, value in ops.items():
        operands = operands.replace(key, value)
    return f"{head} {operands};"


@needs_cccl
def test_header_forms_are_all_ours():
    assert len(FORMS) == 540                     # cuda::ptx 13.0: 480 ld + 60 st forms
    assert {name for _, name, _, _, _ in FORMS} == set(ld_st.__all__)


def _groups():
    return by_requirement(FORMS)


@needs_cccl
@pytest.mark.parametrize("key", sorted(_groups()), ids=lambda k: f"{k[0]}-sm_{k[1]}")
def test_every_cuda_ptx_form(key):
    """Each form emits the header's text and needs the header's version/SM (ptxdsl's floor:
    6.3 / sm_75); the batch assembles at exactly that requirement."""
    version, sm = key
    e = Env()
    for form, name, _ in _groups()[key]:
        want = build_form(e, form, name)
        stmt = list(e.k.statements())[-1]
        assert stmt.render() == want, name
        assert stmt.insn.requires == req(str(version), sm), name
    m = e.module()
    assert (m.version, str(m.target)) == (version, f"sm_{sm}")
    assert assemble_declared(m.emit())[:4] == b"\x7fELF"


# -- goldens and pins: one per qualifier kind --------------------------------------------------
def C(id, fn, version, target):
    return Case(id, fn, version, target)


def _v32(e):
    return e._get("f", lambda: e.k.mov(1.5, type=t.f32))


GROUPS: dict[str, list[Case]] = {
    "ld_st/l1_prefetch": [
        C("ld-l1", lambda e: ptx.ld_L1_evict_first(e.k, "global", e.gptr, type=t.b32), "7.4",
          "sm_75"),
        C("ld-nc-l1-64B", lambda e: ptx.ld_nc_L1_no_allocate_L2_64B(e.k, "global", e.gptr,
                                                                     type=t.f32), "7.4", "sm_75"),
        C("ld-128B", lambda e: ptx.ld_L2_128B(e.k, "global", e.gptr, type=t.b16), "7.4",
          "sm_75"),
        C("st-l1", lambda e: ptx.st_L1_evict_unchanged(e.k, "global", e.gptr, _v32(e)), "7.4",
          "sm_75"),
        C("k-ld-v4-generic", lambda e: e.k.ld(e.gptr, type=t.u32, space="generic", vec=4,
                                              l1="evict_last", prefetch="128B"), "7.4", "sm_75"),
        C("k-st-v2-relaxed", lambda e: e.k.st(e.gptr, (_v32(e), _v32(e)), space="global",
                                              sem="relaxed", scope="gpu", l1="evict_normal"),
          "7.4", "sm_75"),
    ],
    "ld_st/cache_hint": [
        C("ld-hint", lambda e: ptx.ld_L2_cache_hint(e.k, "global", e.gptr, _policy(e),
                                                    type=t.b64), "7.4", "sm_80"),
        C("ld-256B", lambda e: ptx.ld_nc_L2_256B(e.k, "global", e.gptr, type=t.b8), "7.4",
          "sm_80"),
        C("ld-all", lambda e: ptx.ld_nc_L1_evict_last_L2_cache_hint_L2_256B(
            e.k, "global", e.gptr, cache_policy=_policy(e), type=t.u32), "7.4", "sm_80"),
        C("st-hint", lambda e: ptx.st_L1_evict_first_L2_cache_hint(e.k, "global", e.gptr,
                                                                   _v32(e), _policy(e)), "7.4",
          "sm_80"),
        C("k-ld-acquire-hint", lambda e: e.k.ld(e.gptr, type=t.b32, space="global",
                                                sem="acquire", scope="gpu",
                                                cache_policy=_policy(e)), "7.4", "sm_80"),
    ],
    "ld_st/b128": [
        C("ld-b128-hint", lambda e: ptx.ld_L1_evict_last_L2_cache_hint_L2_128B(
            e.k, "global", e.gptr, _policy(e), type=t.b128), "8.3", "sm_80"),
        C("st-b128", lambda e: ptx.st(e.k, "global", e.gptr, e._get(
            "q", lambda: e.k.reg(t.b128))), "8.3", "sm_75"),
    ],
}


class TestForms(FormChecks):
    GROUPS = GROUPS

    @classmethod
    def below_target_cases(cls):
        return [c for c in cls.cases() if c.target != "sm_75"]

    @classmethod
    def below_version_cases(cls):   # the .b128 register itself says it needs 8.3: see below
        return [c for c in super().below_version_cases() if "b128" not in c.id]


@pytest.mark.parametrize("case", GROUPS["ld_st/b128"], ids=lambda c: c.id)
def test_b128_below_its_version(case):
    m = TestForms().build([case], version="8.2", target=case.target)
    with pytest.raises(VersionError, match="need PTX ISA 8.3.*pinned to .version 8.2"):
        m.emit()


# -- refusal rules ---------------------------------------------------------------------------------
@pytest.mark.parametrize("space", ["shared::cta", "local", "param", "const"])
def test_refuse_cache_qualifier_outside_global(space):
    e = Env()
    with pytest.raises(OperandError, match="'space'.*global or generic"):
        e.k.ld(e.smap32 if space == "shared::cta" else e.gptr, type=t.b32, space=space,
               l1="evict_last")


def test_refuse_shared_cache_hint_store():
    e = Env()
    with pytest.raises(OperandError, match="'space'.*global or generic"):
        e.k.st(e.smap32, _v32(e), space="shared::cta", cache_policy=_policy(e))


@pytest.mark.parametrize("kw", [{"l1": "evict_last"}, {"cache_policy": "policy"}])
def test_refuse_volatile_with_eviction_or_hint(kw):
    e = Env()
    kw = {k: _policy(e) if v == "policy" else v for k, v in kw.items()}
    with pytest.raises(OperandError, match="no .volatile with an eviction priority"):
        e.k.ld(e.gptr, type=t.b32, space="global", sem="volatile", **kw)


def test_volatile_with_prefetch_is_allowed():
    e = Env()
    e.k.ld(e.gptr, type=t.b32, space="global", sem="volatile", prefetch="64B")
    assert list(e.k.statements())[-1].render().startswith("ld.volatile.global.L2::64B.b32")


def test_refuse_unknown_l1():
    e = Env()
    with pytest.raises(OperandError, match="'l1'.*evict_first"):
        e.k.ld(e.gptr, type=t.b32, space="global", l1="evict_sometimes")


def test_refuse_prefetch_size():
    e = Env()
    with pytest.raises(OperandError, match="'prefetch'.*'128B'"):
        e.k.ld(e.gptr, type=t.b32, space="global", prefetch="32B")


def test_refuse_32bit_cache_policy():
    e = Env()
    with pytest.raises(OperandError, match="'cache_policy'.*b64"):
        ptx.ld_L2_cache_hint(e.k, "global", e.gptr, e.v32, type=t.b32)


def test_refuse_immediate_cache_policy():
    e = Env()
    with pytest.raises(OperandError, match="'cache_policy'.*register"):
        ptx.st_L2_cache_hint(e.k, "global", e.gptr, _v32(e), 5)


def test_refuse_hint_builder_without_policy():
    e = Env()
    with pytest.raises(BuildError, match="needs the cache policy"):
        ptx.ld_L2_cache_hint(e.k, "global", e.gptr, type=t.b32)


def test_refuse_policy_on_unhinted_builder():
    e = Env()
    with pytest.raises(BuildError, match="cache-hinted form is ld_L1_evict_last_L2_cache_hint"):
        ptx.ld_L1_evict_last(e.k, "global", e.gptr, _policy(e), type=t.b32)


def test_refuse_ld_builder_without_type():
    e = Env()
    with pytest.raises(BuildError, match="pass type="):
        ptx.ld_nc(e.k, "global", e.gptr)


def test_refuse_ld_builder_odd_width():
    e = Env()
    with pytest.raises(BuildError, match="8, 16, 32, 64 or 128 bits"):
        ptx.ld(e.k, "global", e.gptr, type=t.pred)


def test_refuse_nc_not_bool():
    e = Env()
    with pytest.raises(OperandError, match="'nc'.*True or False"):
        e.k.ld(e.gptr, type=t.b32, space="global", nc="yes")


def test_cuda_ptx_spellings_and_pointer_conversion():
    """ptx.space_global / 'space_global' mean .global; a loaded pointer is converted with
    cvta.to.global first (as cuda::ptx converts its pointer), a .global register is not."""
    e = Env()
    ptx.ld(e.k, ptx.space_global, e.gptr, type=t.b32)
    ptx.st_L1_no_allocate(e.k, "space_global", e.gglobal, e.v32)
    assert [s.render() for s in e.k.statements()] == [
        "ld.param.u64 %rd1, [gmap];", "cvta.to.global.u64 %rd2, %rd1;",
        "ld.global.b32 %r1, [%rd2];", "cvta.to.global.u64 %rd3, %rd1;",
        "ld.param.u32 %r2, [v32];", "st.global.L1::no_allocate.b32 [%rd3], %r2;"]


def test_refuse_ld_builder_shared_space():
    e = Env()
    with pytest.raises(OperandError, match="ld_L1_evict_last.*'space'.*'global'"):
        ptx.ld_L1_evict_last(e.k, "shared", e.smap32, type=t.b32)


@pytest.mark.parametrize("op", ["ld", "st"])
def test_b128_with_sys_scope_needs_ptx_84(op):
    """ptxas: "Feature '.b128 with .sys' requires PTX ISA .version 8.4" (.gpu and below: 8.3)."""
    e = Env()
    q = e.k.reg(t.b128)
    for scope in ("gpu", "sys"):
        if op == "ld":
            e.k.ld(e.gglobal, type=t.b128, space="global", sem="acquire", scope=scope, dst=q)
        else:
            e.k.st(e.gglobal, q, space="global", sem="release", scope=scope)
    reqs = [str(s.insn.requires.version) for s in e.k.statements()][-2:]
    assert reqs == ["8.3", "8.4"]
    assert assemble_declared(e.module().emit())[:4] == b"\x7fELF"
