"""membar, fence (every sem and scope), the proxy fences (alias, async, tensormap::generic),
fence.mbarrier_init, the sync_restrict fences and prefetch.tensormap: goldens at each inferred
minimum, pin-below tests per form, refusal rules."""

from __future__ import annotations

import pytest

from ptxdsl import Addr, BuildError, OperandError, VersionError, ptx, t
from ptxdsl.instructions.fence import Fence, FenceSyncRestrict
from ptxdsl.types import StateSpace
from tests.tma_cases import Case, Env, FormChecks, build

SCOPES = ("cta", "cluster", "gpu", "sys")


def C(id, fn, version, target):
    return Case(id, fn, version, target)


GROUPS: dict[str, list[Case]] = {
    "fence/membar_fence": [
        *(C(f"membar-{lv}", lambda e, lv=lv: ptx.membar(e.k, lv), "6.3", "sm_75")
          for lv in ("cta", "gl", "sys")),
        *(C(f"fence-{sem}-{s}", lambda e, sem=sem, s=s: ptx.fence(e.k, sem, s), "6.3", "sm_75")
          for sem in ("sc", "acq_rel") for s in ("cta", "gpu", "sys")),
    ],
    "fence/fence_cluster": [
        C(f"fence-{sem}-cluster", lambda e, sem=sem: ptx.fence(e.k, sem, "cluster"), "7.8",
          "sm_90") for sem in ("sc", "acq_rel")],
    "fence/fence_acquire_release": [
        C(f"fence-{sem}-{s}", lambda e, sem=sem, s=s: ptx.fence(e.k, sem, s), "8.6", "sm_90")
        for sem in ("acquire", "release") for s in SCOPES],
    "fence/proxy_alias": [C("proxy-alias", lambda e: ptx.fence_proxy_alias(e.k), "7.5",
                            "sm_75")],
    "fence/proxy_async": [
        C("proxy-async", lambda e: ptx.fence_proxy_async(e.k), "8.0", "sm_90"),
        *(C(f"proxy-async-{sp}", lambda e, sp=sp: ptx.fence_proxy_async(e.k, sp), "8.0",
            "sm_90") for sp in ("global", "shared::cta", "shared::cluster")),
        C("mbarrier-init", lambda e: ptx.fence_mbarrier_init(e.k), "8.0", "sm_90"),
        C("mbarrier-init-explicit", lambda e: ptx.fence_mbarrier_init(e.k, "release",
                                                                      "cluster"), "8.0", "sm_90"),
        C("prefetch-param", lambda e: ptx.prefetch_tensormap(e.k, e.tmap_param), "8.0", "sm_90"),
        C("prefetch-const", lambda e: ptx.prefetch_tensormap(e.k, e.csym), "8.0", "sm_90"),
        C("prefetch-generic", lambda e: ptx.prefetch_tensormap(e.k, e.gptr), "8.0", "sm_90"),
        C("prefetch-generic-param-map", lambda e: ptx.prefetch_tensormap(
            e.k, e.k.tensormap_addr(e.tmap_param)), "8.0", "sm_90"),
        C("prefetch-param-reg", lambda e: ptx.prefetch_tensormap(
            e.k, e.k.mov(e.tmap_param, type=t.u64)), "8.0", "sm_90"),
    ],
    "fence/proxy_tensormap": [
        *(C(f"tensormap-release-{s}", lambda e, s=s: ptx.fence_proxy_tensormap_generic(
            e.k, "release", s), "8.3", "sm_90") for s in SCOPES),
        *(C(f"tensormap-acquire-{s}", lambda e, s=s: ptx.fence_proxy_tensormap_generic(
            e.k, "acquire", s, e.gptr, 128), "8.3", "sm_90") for s in SCOPES),
        C("tensormap-acquire-param-ptr", lambda e: ptx.fence_proxy_tensormap_generic(
            e.k, "acquire", "sys", e.gptr_param), "8.3", "sm_90"),
        C("tensormap-acquire-offset", lambda e: ptx.fence_proxy_tensormap_generic(
            e.k, "acquire", "gpu", Addr(e.gptr, 256)), "8.3", "sm_90"),
    ],
    "fence/sync_restrict": [
        C("restrict-acquire", lambda e: ptx.fence_sync_restrict(e.k, "acquire"), "8.6", "sm_90"),
        C("restrict-release", lambda e: ptx.fence_sync_restrict(e.k, "release", "shared::cta",
                                                                "cluster"), "8.6", "sm_90"),
        C("proxy-restrict-acquire", lambda e: ptx.fence_proxy_async_generic_sync_restrict(
            e.k, "acquire", "shared::cluster"), "8.6", "sm_90"),
        C("proxy-restrict-release", lambda e: ptx.fence_proxy_async_generic_sync_restrict(
            e.k, "release"), "8.6", "sm_90"),
    ],
}


class TestForms(FormChecks):
    GROUPS = GROUPS

    @classmethod
    def below_target_cases(cls):
        return [c for c in cls.cases() if c.target != "sm_75"]   # nothing is below sm_75


def test_fence_proxy_alias_below_its_version():
    m = build(GROUPS["fence/proxy_alias"], version="7.4", target="sm_75")
    with pytest.raises(VersionError, match="fence.proxy.alias needs PTX ISA 7.5"):
        m.emit()


def test_text():
    e = Env()
    ptx.fence_proxy_tensormap_generic(e.k, "acquire", "sys", e.gptr_param)
    ptx.fence_proxy_async(e.k, "shared::cta")
    ptx.fence_sync_restrict(e.k, "release")
    assert [s.render() for s in e.k.statements()] == [
        "ld.param.u64 %rd1, [gmap];",
        "fence.proxy.tensormap::generic.acquire.sys [%rd1], 128;",
        "fence.proxy.async.shared::cta;",
        "fence.release.sync_restrict::shared::cta.cluster;"]


# -- refusal rules ---------------------------------------------------------------------------------
def test_shared_is_shared_cta_in_fences():
    """'shared' / space_shared is .shared::cta and 'cluster' / space_cluster .shared::cluster,
    as in every family (ptxas rejects bare .shared on these fences, so it is never emitted)."""
    e = Env()
    ptx.fence_proxy_async(e.k, "shared")
    ptx.fence_proxy_async(e.k, ptx.space_cluster)
    ptx.fence_sync_restrict(e.k, "sem_acquire", "cluster", "scope_cluster")
    ptx.fence_sync_restrict(e.k, ptx.sem_release, ptx.space_shared, ptx.scope_cluster)
    assert [s.render() for s in e.k.statements()] == [
        "fence.proxy.async.shared::cta;", "fence.proxy.async.shared::cluster;",
        "fence.acquire.sync_restrict::shared::cluster.cluster;",
        "fence.release.sync_restrict::shared::cta.cluster;"]


def test_refuse_bare_shared_enum_on_fence():
    e = Env()
    with pytest.raises(OperandError, match=r"one of 'shared' \(.shared::cta\)"):
        ptx.fence_proxy_async(e.k, StateSpace.shared)


def test_refuse_tensormap_acquire_size_not_128():
    e = Env()
    with pytest.raises(BuildError, match="size must be the immediate 128"):
        ptx.fence_proxy_tensormap_generic(e.k, "acquire", "gpu", e.gptr, 64)


def test_refuse_tensormap_acquire_size_register():
    e = Env()
    with pytest.raises(OperandError, match="'size'.*128 .a register is not allowed here"):
        ptx.fence_proxy_tensormap_generic(e.k, "acquire", "gpu", e.gptr, e.v32)


def test_refuse_tensormap_release_with_operands():
    e = Env()
    with pytest.raises(BuildError, match="release form takes no operands"):
        ptx.fence_proxy_tensormap_generic(e.k, "release", "gpu", e.gptr)


def test_refuse_tensormap_acquire_without_address():
    e = Env()
    with pytest.raises(BuildError, match="acquire form needs the tensor map's address"):
        ptx.fence_proxy_tensormap_generic(e.k, "acquire", "gpu")


def test_refuse_tensormap_acquire_global_space_address():
    e = Env()
    with pytest.raises(OperandError, match="'addr'.*a .generic address.*holds a .global"):
        ptx.fence_proxy_tensormap_generic(e.k, "acquire", "gpu", e.gglobal)


def test_refuse_tensormap_acquire_32bit_address():
    e = Env()
    with pytest.raises(OperandError, match="64-bit integer register holding a generic"):
        ptx.fence_proxy_tensormap_generic(e.k, "acquire", "gpu", e.v32)


def test_refuse_tensormap_acquire_symbol():
    e = Env()
    with pytest.raises(OperandError, match="convert the address with cvta first"):
        ptx.fence_proxy_tensormap_generic(e.k, "acquire", "gpu", e.gsym)


@pytest.mark.parametrize("sem,scope", [("acquire", "cluster"), ("release", "cta")])
def test_refuse_mbarrier_init_fence_spelling(sem, scope):
    e = Env()
    with pytest.raises(OperandError, match="fence.mbarrier_init"):
        ptx.fence_mbarrier_init(e.k, sem, scope)


def test_refuse_sync_restrict_wrong_pairing():
    e = Env()
    with pytest.raises(BuildError, match=r"\.acquire pairs with sync_restrict::shared::cluster"):
        ptx.fence_sync_restrict(e.k, "acquire", "shared::cta")


def test_refuse_sync_restrict_scope():
    with pytest.raises(OperandError, match="'scope'.*'cluster'"):
        FenceSyncRestrict("release", None, "gpu", True)


@pytest.mark.parametrize("sem", ["relaxed", "weak"])
def test_refuse_fence_sem(sem):
    with pytest.raises(OperandError, match="'sem'.*one of 'sc', 'acq_rel'"):
        Fence(sem, "gpu")


def test_refuse_membar_level():
    e = Env()
    with pytest.raises(OperandError, match="'level'"):
        ptx.membar(e.k, "cluster")


def test_refuse_prefetch_shared_symbol():
    e = Env()
    with pytest.raises(OperandError, match="prefetch.tensormap.*pass space="):
        ptx.prefetch_tensormap(e.k, e.smap)


def test_refuse_prefetch_global_register_without_space():
    e = Env()
    with pytest.raises(OperandError, match="pass space=.*a .global address"):
        ptx.prefetch_tensormap(e.k, e.gglobal)


def test_prefetch_pointer_parameter_is_loaded():
    e = Env()
    ptx.prefetch_tensormap(e.k, e.gptr_param)
    assert [s.render() for s in e.k.statements()] == ["ld.param.u64 %rd1, [gmap];",
                                                      "prefetch.tensormap [%rd1];"]


def test_refuse_prefetch_scalar_parameter():
    e = Env()
    with pytest.raises(OperandError, match="a tensor map .*parameter v32"):
        ptx.prefetch_tensormap(e.k, e.k.param(t.u32, "v32"))
