"""Clusters: barrier.cluster, mapa, getctarank, the get_sreg special registers, st.async,
red.async and cp.async.mbarrier.arrive — goldens at each inferred minimum, pin-below tests,
refusal rules, and every get_sreg builder against cuda::ptx's get_sreg.h."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from ptxdsl import Addr, BuildError, Module, OperandError, ptx, t
from ptxdsl.instructions.cluster import BarrierCluster, Mapa
from ptxdsl.instructions.sreg import CUDA_PTX_SREGS, builder_name
from ptxdsl.instructions.st_async import StAsync
from ptxdsl.kernel_core import SPECIAL_REGISTERS
from ptxdsl.testing import assemble_declared
from ptxdsl.types import PtxVersion, req
from tests.cccl_forms import CCCL, by_requirement, header_forms, needs_cccl
from tests.tma_cases import Case, Env, FormChecks


def C(id, fn, version, target):
    return Case(id, fn, version, target)


def _remote(e):
    """A .shared::cluster address of this CTA's `bar` in CTA 1 (mapa's result)."""
    return e._get("rbar", lambda: ptx.mapa(e.k, "shared::cluster", e.bar, 1))


def _rbuf(e):
    return e._get("rbuf", lambda: ptx.mapa(e.k, "shared::cluster", e.smap, 1))


def _f32(e):
    return e._get("f32", lambda: e.k.mov(1.5, type=t.f32))


def _sreg_case(name, version, target):
    return C(f"sreg-{name}", lambda e, n=name: getattr(ptx, builder_name(n))(e.k), version,
             target)


_SREG_90 = [n for n in CUDA_PTX_SREGS if "cluster" in n]
_SREG_75 = [n for n in CUDA_PTX_SREGS if n not in _SREG_90
            and n not in ("aggr_smem_size", "current_graph_exec")]

GROUPS: dict[str, list[Case]] = {
    "cluster/barrier": [
        C(f"{op}{'-aligned' if al else ''}", lambda e, op=op, al=al: getattr(
            ptx, f"barrier_cluster_{op}")(e.k, aligned=al), "7.8", "sm_90")
        for op in ("arrive", "wait") for al in (False, True)],
    "cluster/barrier_sem": [
        *(C(f"arrive-{sem}{'-aligned' if al else ''}", lambda e, sem=sem, al=al:
            ptx.barrier_cluster_arrive(e.k, sem, aligned=al), "8.0", "sm_90")
          for sem in ("release", "relaxed") for al in (False, True)),
        C("wait-acquire", lambda e: ptx.barrier_cluster_wait(e.k, "acquire"), "8.0", "sm_90"),
        C("wait-acquire-aligned", lambda e: ptx.barrier_cluster_wait(e.k, "acquire",
                                                                     aligned=True), "8.0",
          "sm_90"),
    ],
    "cluster/mapa_getctarank": [
        C("mapa-symbol", lambda e: ptx.mapa(e.k, "shared::cluster", e.bar, 1), "7.8", "sm_90"),
        C("mapa-u32-reg", lambda e: ptx.mapa(e.k, "cluster", e.smap32, e.v32), "7.8", "sm_90"),
        C("mapa-u64-reg", lambda e: ptx.mapa(e.k, "shared::cluster", e.smap64, 3), "7.8",
          "sm_90"),
        C("mapa-generic", lambda e: ptx.mapa(e.k, "generic", e.bar_generic, e.v32), "7.8",
          "sm_90"),
        C("getctarank-symbol", lambda e: ptx.getctarank(e.k, "shared::cluster", e.bar), "7.8",
          "sm_90"),
        C("getctarank-mapa", lambda e: ptx.getctarank(e.k, "cluster", _remote(e)), "7.8",
          "sm_90"),
        C("getctarank-u64", lambda e: ptx.getctarank(e.k, "shared::cluster", e.smap64), "7.8",
          "sm_90"),
        C("getctarank-generic", lambda e: ptx.getctarank(e.k, "generic", e.bar_generic), "7.8",
          "sm_90"),
    ],
    "cluster/sreg": [_sreg_case(n, "6.3", "sm_75") for n in _SREG_75],
    "cluster/sreg_cluster": [_sreg_case(n, "7.8", "sm_90") for n in _SREG_90],
    "cluster/sreg_graph": [_sreg_case("current_graph_exec", "8.0", "sm_75")],
    "cluster/st_async": [
        _sreg_case("aggr_smem_size", "8.1", "sm_90"),
        C("st-b32", lambda e: ptx.st_async(e.k, _rbuf(e), e.v32, _remote(e)), "8.1", "sm_90"),
        C("st-b64", lambda e: ptx.st_async(e.k, _rbuf(e), e.v64, _remote(e)), "8.1", "sm_90"),
        C("st-v2-b32", lambda e: ptx.st_async(e.k, _rbuf(e), (e.v32, 7), _remote(e)), "8.1",
          "sm_90"),
        C("st-v2-b64", lambda e: ptx.st_async(e.k, _rbuf(e), [e.v64, e.v64], _remote(e)),
          "8.1", "sm_90"),
        C("st-v4-b32", lambda e: ptx.st_async(e.k, _rbuf(e), (e.v32,) * 4, _remote(e)), "8.1",
          "sm_90"),
        C("st-v4-f32", lambda e: ptx.st_async(e.k, Addr(_rbuf(e), 16), (_f32(e),) * 4,
                                              _remote(e), type=t.f32), "8.1", "sm_90"),
        C("st-local-symbols", lambda e: ptx.st_async(e.k, e.smap, 5, e.bar, type=t.s32), "8.1",
          "sm_90"),
        C("st-no-weak", lambda e: e.k.emit(StAsync(t.u32, _rbuf(e), e.v32, _remote(e),
                                                   weak=False)), "8.1", "sm_90"),
        *(C(f"red-{op}-{ty}", lambda e, op=op, ty=ty: ptx.red_async(
            e.k, op, _rbuf(e), e.v64 if ty == "u64" else e.v32, _remote(e),
            type=None if ty in ("u32", "u64", "b32") else ty), "8.1", "sm_90")
          for op, ty in (("inc", "u32"), ("dec", "u32"), ("min", "u32"), ("min", "s32"),
                         ("max", "u32"), ("max", "s32"), ("add", "u32"), ("add", "s32"),
                         ("add", "u64"), ("and", "b32"), ("or", "b32"), ("xor", "b32"))),
    ],
    "cluster/cp_async_arrive": [
        C("arrive-generic", lambda e: ptx.cp_async_mbarrier_arrive(e.k, e.bar_generic), "7.0",
          "sm_80"),
        C("arrive-noinc-generic", lambda e: ptx.cp_async_mbarrier_arrive_noinc(
            e.k, e.bar_generic), "7.0", "sm_80"),
    ],
    "cluster/cp_async_arrive_cta": [
        C("arrive", lambda e: ptx.cp_async_mbarrier_arrive(e.k, e.bar), "7.8", "sm_80"),
        C("arrive-noinc", lambda e: ptx.cp_async_mbarrier_arrive_noinc(e.k, e.bar32), "7.8",
          "sm_80"),
        C("arrive-shared", lambda e: ptx.cp_async_mbarrier_arrive(e.k, e.bar_generic,
                                                                 space="shared"), "7.8",
          "sm_80"),
    ],
}


class TestForms(FormChecks):
    GROUPS = GROUPS

    @classmethod
    def below_target_cases(cls):
        return [c for c in cls.cases() if c.target != "sm_75"]   # nothing is below sm_75


def _texts(e) -> list[str]:
    return [s.render() for s in e.k.statements()]


def test_text():
    e = Env()
    v32, v64 = e.v32, e.v64
    r = ptx.mapa(e.k, "shared::cluster", e.bar, 1)
    ptx.st_async(e.k, r, (v32, v32), r)
    ptx.red_async(e.k, "add", r, v64, r)
    ptx.barrier_cluster_arrive(e.k, "relaxed", aligned=True)
    assert _texts(e)[-4:] == [
        "mapa.shared::cluster.u32 %r2, bar, 1;",
        "st.async.weak.shared::cluster.mbarrier::complete_tx::bytes.v2.b32 [%r2], {%r1, %r1}, "
        "[%r2];",
        "red.async.relaxed.cluster.shared::cluster.mbarrier::complete_tx::bytes.add.u64 [%r2], "
        "%rd1, [%r2];",
        "barrier.cluster.arrive.relaxed.aligned;"]
    assert r.space.value == "shared::cluster"


def test_mapa_generic_returns_generic_address():
    e = Env()
    d = ptx.mapa(e.k, "generic", e.bar_generic, 2)
    assert d.type is t.u64 and _texts(e)[-1] == "mapa.u64 %rd3, %rd2, 2;"


# cuda::ptx's headers for these families and the fences (fence.py), built literally.
HEADERS = ("barrier_cluster", "getctarank", "cp_async_mbarrier_arrive",
           "cp_async_mbarrier_arrive_noinc", "fence", "fence_mbarrier_init", "fence_proxy_alias",
           "fence_proxy_async", "fence_sync_restrict", "fence_proxy_async_generic_sync_restrict",
           "fence_proxy_tensormap_generic", "st_async", "red_async")
HEADER_FORMS = header_forms(HEADERS)
_ARGS = {   # cuda::ptx function -> its arguments, from the form's qualifier values
    "getctarank": lambda e, q: (q["space"], e.bar),
    "cp_async_mbarrier_arrive": lambda e, q: (e.bar_generic,),
    "cp_async_mbarrier_arrive_noinc": lambda e, q: (e.bar_generic,),
    "fence_proxy_tensormap_generic": lambda e, q: (q["sem"], q["scope"]) + (
        (e.gptr, 128) if q["sem"] == "acquire" else ()),
}


def _async_form(e, form: str, name: str, q: dict) -> str:
    """st.async / red.async: the value's type and vector width come from the form."""
    head, _, operands = form.partition(" ")
    ty = getattr(t, head.rsplit(".", 1)[-1])
    v = e._get(f"val-{ty.value}", lambda: e.k.reg(ty))
    n = int(head.split(".v")[1][0]) if ".v" in head else 1
    value = (v,) * n if n > 1 else v
    if name == "st_async":
        ptx.st_async(e.k, _rbuf(e), value, _remote(e))
    else:
        ptx.red_async(e.k, q["op"], _rbuf(e), value, _remote(e))
    rendered = "{" + ", ".join([v.render()] * n) + "}" if n > 1 else v.render()
    for key, text in (("[addr]", f"[{_rbuf(e).render()}]"), ("[dest]", f"[{_rbuf(e).render()}]"),
                      ("[remote_bar]", f"[{_remote(e).render()}]"), ("value", rendered)):
        operands = operands.replace(key, text)
    return f"{head} {operands.strip()};"     # the header writes two spaces in red.async


def _build_header_form(e, form: str, name: str, q: dict) -> str:
    if name in ("st_async", "red_async"):
        return _async_form(e, form, name, q)
    args = _ARGS.get(name, lambda e, q: tuple(q[x] for x in ("sem", "space", "scope")
                                              if x in q))(e, q)
    d = getattr(ptx, name)(e.k, *args)
    addr = next((a.render() for a in args if not isinstance(a, str | int)), "")
    head, _, operands = form.partition(" ")
    for key, value in (("dest", d.render() if d is not None else ""), ("[addr]", f"[{addr}]"),
                       ("addr", addr), ("size", "128")):
        operands = operands.replace(key, value)
    return f"{head} {operands};" if operands else f"{head};"


@needs_cccl
def test_header_forms_count():
    # barrier.cluster: arrive, wait, arrive.release/.relaxed, wait.acquire; fence: sc/acq_rel x
    # 4 scopes + acquire/release x 4; fence.proxy.async: bare + 3 spaces; tensormap: 2 x 4.
    counts = {"barrier_cluster": 5, "getctarank": 1, "cp_async_mbarrier_arrive": 1,
              "cp_async_mbarrier_arrive_noinc": 1, "fence": 16, "fence_mbarrier_init": 1,
              "fence_proxy_alias": 1, "fence_proxy_async": 4, "fence_sync_restrict": 2,
              "fence_proxy_async_generic_sync_restrict": 2, "fence_proxy_tensormap_generic": 8,
              "st_async": 5, "red_async": 13}
    assert {h: len(header_forms([h])) for h in HEADERS} == counts


@needs_cccl
@pytest.mark.parametrize("key", sorted(by_requirement(HEADER_FORMS)),
                         ids=lambda k: f"{k[0]}-sm_{k[1]}")
def test_every_cuda_ptx_form(key):
    """Each form of the headers, called as cuda::ptx calls it, emits the header's text and
    needs the header's version/SM (or ptxdsl's floor); each batch assembles."""
    version, sm = key
    e = Env()
    for form, name, q in by_requirement(HEADER_FORMS)[key]:
        want = _build_header_form(e, form, name, q)
        stmt = list(e.k.statements())[-1]
        assert stmt.render() == want, (name, q)
        assert stmt.insn.requires == req(str(version), sm), (name, q)
    m = e.module()
    assert (m.version, str(m.target)) == (version, f"sm_{sm}")
    assert assemble_declared(m.emit())[:4] == b"\x7fELF"


def _header_sregs():
    text = (CCCL / "get_sreg.h").read_text()
    forms = re.findall(r"^// (mov\.\w+ sreg_value, %%([\w.]+);) // PTX ISA (\d+)", text, re.M)
    names = re.findall(r"static inline \w+ (get_sreg_\w+)\(", text)
    return forms, names


@needs_cccl
def test_every_cuda_ptx_get_sreg():
    """Every get_sreg_* of cuda::ptx exists, emits the header's mov form and needs the header's
    PTX ISA version (or ptxdsl's 6.3 floor)."""
    forms, names = _header_sregs()
    assert len(forms) == len(CUDA_PTX_SREGS) == len(set(names))
    for (form, sreg, isa), name in zip(forms, dict.fromkeys(names), strict=True):
        e = Env()
        d = getattr(ptx, name)(e.k)
        want = form.replace("sreg_value", d.render()).replace("%%", "%")
        assert name == builder_name(sreg) and _texts(e) == [want]
        version = SPECIAL_REGISTERS[sreg][1].version
        assert version == max(PtxVersion.parse(f"{isa[:-1]}.{isa[-1]}"), PtxVersion(6, 3))


# -- refusal rules ---------------------------------------------------------------------------------
@pytest.mark.parametrize("op,sem", [("arrive", "acquire"), ("wait", "release"),
                                    ("wait", "relaxed"), ("arrive", "acq_rel")])
def test_refuse_barrier_cluster_sem(op, sem):
    with pytest.raises(OperandError, match=f"barrier.cluster.{op}.*'sem'"):
        BarrierCluster(op, sem)


def test_cuda_ptx_tag_spellings():
    e = Env()
    ptx.barrier_cluster_arrive(e.k, ptx.sem_release)
    ptx.barrier_cluster_wait(e.k, "sem_acquire")
    ptx.getctarank(e.k, ptx.space_cluster, e.bar)
    ptx.red_async(e.k, ptx.op_and_op, e.bar, e.v32, e.bar)
    ptx.red_async(e.k, "op_add", e.bar, e.v32, e.bar)
    assert [x.split(" ")[0].rstrip(";") for x in _texts(e) if not x.startswith("ld.")] == [
        "barrier.cluster.arrive.release", "barrier.cluster.wait.acquire",
        "getctarank.shared::cluster.u32",
        "red.async.relaxed.cluster.shared::cluster.mbarrier::complete_tx::bytes.and.b32",
        "red.async.relaxed.cluster.shared::cluster.mbarrier::complete_tx::bytes.add.u32"]


def test_refuse_barrier_cluster_aligned_not_bool():
    e = Env()
    with pytest.raises(OperandError, match="'aligned'.*True or False"):
        ptx.barrier_cluster_wait(e.k, aligned="yes")


def test_refuse_mapa_space():
    e = Env()
    with pytest.raises(OperandError, match="mapa.*'space'"):
        ptx.mapa(e.k, "global", e.gptr, 1)


def test_refuse_mapa_global_address():
    e = Env()
    with pytest.raises(OperandError, match="'addr'.*a shared .or generic. address.*.global"):
        ptx.mapa(e.k, "generic", e.gglobal, 1)


def test_mapa_converts_a_generic_pointer():
    e = Env()
    ptx.mapa(e.k, "cluster", e.bar_generic, 1)
    assert _texts(e)[-2:] == ["cvta.to.shared::cluster.u64 %rd3, %rd2;",
                              "mapa.shared::cluster.u64 %rd4, %rd3, 1;"]


def test_refuse_mapa_class_generic_register_as_shared():
    e = Env()
    with pytest.raises(OperandError, match="builders convert a generic one with cvta"):
        Mapa("cluster", e.k.reg(t.u64), e.bar_generic, 1)


def test_refuse_mapa_shared_register_as_generic():
    e = Env()
    with pytest.raises(OperandError, match="pass space='cluster'"):
        ptx.mapa(e.k, "generic", e.smap64, 1)


def test_refuse_mapa_shared_cta_space():
    e = Env()
    with pytest.raises(OperandError, match="'space'.*'cluster' \\(.shared::cluster\\)"):
        ptx.mapa(e.k, "shared", e.bar, 1)


def test_refuse_mapa_generic_symbol():
    e = Env()
    with pytest.raises(OperandError, match="a .generic address, got symbol bar.*k.generic_addr"):
        ptx.mapa(e.k, "generic", e.bar, 1)


def test_refuse_mapa_generic_32bit_register():
    e = Env()
    with pytest.raises(OperandError, match="64-bit integer register holding a generic"):
        ptx.mapa(e.k, "generic", e.v32, 1)


@pytest.mark.parametrize("base", ["smap32", "smap"])
def test_refuse_mapa_offset(base):
    e = Env()
    with pytest.raises(OperandError, match="without offset"):
        ptx.mapa(e.k, "shared::cluster", Addr(getattr(e, base), 8), 1)


def test_refuse_mapa_cta_rank_64bit():
    e = Env()
    with pytest.raises(OperandError, match="'b'.*u32"):
        ptx.mapa(e.k, "shared::cluster", e.smap32, e.v64)


def test_refuse_getctarank_float_register():
    e = Env()
    with pytest.raises(OperandError, match="getctarank.*'addr'.*integer register"):
        ptx.getctarank(e.k, "shared::cluster", _f32(e))


def test_refuse_st_async_vector_over_128_bits():
    e = Env()
    with pytest.raises(OperandError, match="at most 128 bits"):
        ptx.st_async(e.k, _rbuf(e), (e.v64,) * 4, _remote(e))


def test_refuse_st_async_three_values():
    e = Env()
    with pytest.raises(OperandError, match="'value'.*3 values"):
        ptx.st_async(e.k, _rbuf(e), (e.v32,) * 3, _remote(e))


def test_refuse_st_async_type():
    e = Env()
    with pytest.raises(OperandError, match="st.async.*'type'"):
        ptx.st_async(e.k, _rbuf(e), e.v32, _remote(e), type=t.u16)


def test_st_async_without_weak_is_the_same_instruction_spelled_as_compilers_do():
    e = Env()
    plain = StAsync(t.u32, _rbuf(e), e.v32, _remote(e), weak=False)
    assert plain.render().startswith("st.async.shared::cluster.mbarrier::complete_tx::bytes.u32")
    with pytest.raises(OperandError, match="st.async.*'weak'.*True or False"):
        StAsync(t.u32, _rbuf(e), e.v32, _remote(e), weak="no")


def test_refuse_st_async_immediates_without_type():
    e = Env()
    with pytest.raises(BuildError, match="cannot tell the value's width"):
        ptx.st_async(e.k, _rbuf(e), 5, _remote(e))


def test_refuse_st_async_narrow_register():
    e = Env()
    with pytest.raises(OperandError, match=r"st.async: operand 'value': expected a 32- or "
                       r"64-bit register.*got register %\w+ of type \.u16"):
        ptx.st_async(e.k, _rbuf(e), e.k.reg(t.u16), _remote(e))


def test_refuse_st_async_global_address():
    e = Env()
    with pytest.raises(OperandError, match="'addr'.*shared::cluster"):
        ptx.st_async(e.k, e.gglobal, e.v32, _remote(e))


def test_st_async_converts_a_generic_barrier():
    e = Env()
    ptx.st_async(e.k, e.smap32, e.v32, e.bar_generic)
    assert _texts(e)[-2:] == [
        "cvta.to.shared::cluster.u64 %rd3, %rd2;",
        "st.async.weak.shared::cluster.mbarrier::complete_tx::bytes.b32 [%r1], %r2, [%rd3];"]


def test_refuse_st_async_class_generic_barrier():
    e = Env()
    with pytest.raises(OperandError, match="'remote_bar'.*holds a .generic address"):
        StAsync("b32", _rbuf(e), e.v32, e.bar_generic)


@pytest.mark.parametrize("op,ty", [("min", "u64"), ("inc", "s32"), ("and", "u32"),
                                   ("add", "f32")])
def test_refuse_red_async_type(op, ty):
    e = Env()
    with pytest.raises(OperandError, match=f"red.async.{op}.*'type'"):
        ptx.red_async(e.k, op, _rbuf(e), e.v32, _remote(e), type=ty)


def test_refuse_red_async_op():
    e = Env()
    with pytest.raises(OperandError, match="red.async.*'op'"):
        ptx.red_async(e.k, "mul", _rbuf(e), e.v32, _remote(e))


def test_refuse_red_async_signedness_unknown():
    e = Env()
    with pytest.raises(BuildError, match="u32 or s32"):
        ptx.red_async(e.k, "min", _rbuf(e), 3, _remote(e))


def test_refuse_cp_async_arrive_cluster_space():
    e = Env()
    with pytest.raises(OperandError, match="cp.async.mbarrier.arrive.*'space'"):
        ptx.cp_async_mbarrier_arrive(e.k, e.bar, space="shared::cluster")


def test_readme_example_builds_and_assembles():
    """The README's cluster example (section 'The rest of cuda::ptx') runs as written."""
    text = (Path(__file__).resolve().parent.parent / "README.md").read_text()
    section = text[text.index("## The rest of cuda::ptx"):]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    ns: dict = {}
    exec(code, ns)
    ptx_text = Module([ns["k"]]).emit()
    assert "st.async.weak.shared::cluster" in ptx_text
    assert assemble_declared(ptx_text)[:4] == b"\x7fELF"
