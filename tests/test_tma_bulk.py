"""cp.async.bulk (1-D), cp.async.bulk.prefetch.L2, cp.reduce.async.bulk, bulk async-groups and
createpolicy: goldens at each inferred minimum, pin-below tests per form, refusal rules."""

from __future__ import annotations

import attrs
import pytest

from ptxdsl import Addr, BuildError, Kernel, Module, OperandError, VersionError, t
from ptxdsl.instructions.bulk import (
    FORMS,
    RED_TYPES,
    CpAsyncBulk,
    CpAsyncBulkWaitGroup,
    RedOp,
    cp_async_bulk,
    cp_async_bulk_commit_group,
    cp_async_bulk_prefetch,
    cp_async_bulk_wait_group,
    cp_async_bulk_wait_group_read,
    cp_reduce_async_bulk,
)
from ptxdsl.instructions.cache_policy import FORMS as POLICY_FORMS
from ptxdsl.instructions.cache_policy import (
    CreatePolicyFractional,
    createpolicy_cvt,
    createpolicy_fractional,
    createpolicy_range,
)
from ptxdsl.toolchain import assemble
from ptxdsl.types import Requires, StateSpace
from tests.tma_cases import FormChecks


class Env:
    """A kernel with a global pointer, a byte count, two TMA-aligned shared buffers and an
    mbarrier. 16-bit masks and the cache policy are made on first use."""

    def __init__(self, name: str = "k"):
        k = self.k = Kernel(name)
        # converted once here: the builders would convert a generic pointer at each call
        self.gptr = k.cvta(k.ld_param(k.param_ptr("gptr")), "global", to=True)
        self.n = k.ld_param(k.param(t.u32, "nbytes"))
        self.smem = k.shared_array(t.b8, 4096, align=128, name="smem")
        self.remote = k.shared_array(t.b8, 4096, align=128, name="remote")
        self.bar = k.shared_array(t.b64, 1, align=8, name="bar")
        self._mask = None
        self._policy = None

    @property
    def mask(self):
        if self._mask is None:
            self._mask = self.k.ld_param(self.k.param(t.u16, "mask"))
        return self._mask

    @property
    def policy(self):
        if self._policy is None:
            self._policy = createpolicy_fractional(self.k, "evict_first", "evict_unchanged", 0.5)
        return self._policy


@attrs.frozen
class Case:
    id: str
    build: object
    version: str
    target: str


def C(id, build, version="8.0", target="sm_90"):
    return Case(id, build, version, target)


CL, CTA, G = "shared::cluster", "shared::cta", "global"
_RED = sorted(RED_TYPES.items(), key=lambda kv: (kv[0][0].value, list(RedOp).index(kv[0][1])))
GROUPS: dict[str, list[Case]] = {
    "bulk/copy": [
        C("g2cluster-imm", lambda e: cp_async_bulk(e.k, CL, G, e.smem, e.gptr, 4096, e.bar)),
        C("g2cluster-reg", lambda e: cp_async_bulk(e.k, CL, G, e.smem, e.gptr, e.n, e.bar)),
        C("g2cluster-multicast", lambda e: cp_async_bulk(e.k, CL, G, e.smem, e.gptr, e.n, e.bar,
                                                         cta_mask=e.mask)),
        C("g2cluster-multicast-imm", lambda e: cp_async_bulk(
            e.k, "cluster", G, e.smem, e.gptr, 256, e.bar, cta_mask=0b1011)),
        C("g2cluster-cache_hint", lambda e: cp_async_bulk(e.k, CL, G, e.smem, e.gptr, e.n, e.bar,
                                                          cache_policy=e.policy)),
        C("g2cluster-multicast-cache_hint", lambda e: cp_async_bulk(
            e.k, CL, G, e.smem, e.gptr, e.n, e.bar, cta_mask=e.mask,
            cache_policy=e.policy)),
        C("cta2cluster", lambda e: cp_async_bulk(e.k, CL, CTA, e.remote, e.smem, e.n, e.bar)),
        C("cta2g", lambda e: cp_async_bulk(e.k, G, CTA, e.gptr, e.smem, e.n)),
        C("cta2g-offsets", lambda e: cp_async_bulk(e.k, G, "shared", Addr(e.gptr, 256),
                                                   Addr(e.smem, 512), 1024)),
        C("cta2g-cache_hint", lambda e: cp_async_bulk(e.k, G, CTA, e.gptr, e.smem, e.n,
                                                      cache_policy=e.policy)),
        C("prefetch", lambda e: cp_async_bulk_prefetch(e.k, e.gptr, e.n)),
        C("prefetch-cache_hint", lambda e: cp_async_bulk_prefetch(e.k, e.gptr, 2048, e.policy)),
        C("commit_group", lambda e: cp_async_bulk_commit_group(e.k)),
        C("wait_group", lambda e: cp_async_bulk_wait_group(e.k, 0)),
        C("wait_group_read", lambda e: cp_async_bulk_wait_group_read(e.k, 2)),
    ],
    "bulk/copy_cta": [
        C("g2cta", lambda e: cp_async_bulk(e.k, CTA, G, e.smem, e.gptr, e.n, e.bar), "8.6"),
        C("g2cta-cache_hint", lambda e: cp_async_bulk(e.k, "shared", G, e.smem, e.gptr, 512,
                                                      e.bar, cache_policy=e.policy), "8.6"),
    ],
    "bulk/copy_cp_mask": [
        C("cta2g-cp_mask", lambda e: cp_async_bulk(e.k, G, CTA, e.gptr, e.smem, e.n,
                                                   byte_mask=0x00FF), "8.6", "sm_100"),
        C("cta2g-cache_hint-cp_mask", lambda e: cp_async_bulk(
            e.k, G, CTA, e.gptr, e.smem, e.n, cache_policy=e.policy, byte_mask=e.mask),
          "8.6", "sm_100"),
    ],
    "bulk/reduce": [
        *(C(f"reduce-{dst.value}-{op.value}-{ty.value}",
            lambda e, dst=dst, op=op, ty=ty: cp_reduce_async_bulk(
                e.k, dst, CTA, op, e.remote if dst is StateSpace.shared_cluster else e.gptr,
                e.smem, e.n, e.bar if dst is StateSpace.shared_cluster else None, type=ty))
          for (dst, op), types in _RED for ty in types),
        C("reduce-global-add-f32-cache_hint", lambda e: cp_reduce_async_bulk(
            e.k, G, CTA, "add", e.gptr, e.smem, 256, type=t.f32, cache_policy=e.policy)),
        C("reduce-type-from-symbol", lambda e: cp_reduce_async_bulk(
            e.k, G, CTA, "min", e.gptr, e.k.shared_array(t.s32, 64, align=16, name="ints"),
            256)),
    ],
    "bulk/createpolicy": [
        *(C(f"fractional-{p}", lambda e, p=p: createpolicy_fractional(e.k, p, None, 0.25),
            "7.4", "sm_80")
          for p in ("evict_last", "evict_normal", "evict_first", "evict_unchanged")),
        *(C(f"fractional-evict_last-{s}", lambda e, s=s: createpolicy_fractional(
            e.k, "L2::evict_last", s), "7.4", "sm_80") for s in ("evict_unchanged",
                                                                   "evict_first")),
        C("fractional-no-fraction", lambda e: createpolicy_fractional(e.k, fraction=None),
          "7.4", "sm_80"),
        C("fractional-reg-fraction", lambda e: createpolicy_fractional(
            e.k, fraction=e.k.ld_param(e.k.param(t.f32, "frac"))), "7.4", "sm_80"),
        C("range-generic", lambda e: createpolicy_range(e.k, e.gptr, 1024, 4096), "7.4",
          "sm_80"),
        C("range-global-secondary", lambda e: createpolicy_range(
            e.k, e.gptr, e.n, e.n, "evict_last", "evict_first", space="global"), "7.4", "sm_80"),
        C("cvt-reg", lambda e: createpolicy_cvt(e.k, e.k.ld_param(e.k.param(t.u64, "prop"))),
          "7.4", "sm_80"),
        C("cvt-imm", lambda e: createpolicy_cvt(e.k, 1), "7.4", "sm_80"),
    ],
}
CASES = [c for cs in GROUPS.values() for c in cs]


def build_group(cases, name="k", **pins) -> Module:
    e = Env(name)
    for c in cases:
        c.build(e)
    return Module([e.k], **pins)


class TestForms(FormChecks):
    GROUPS = GROUPS

    def build(self, cases, **pins) -> Module:
        return build_group(cases, **pins)


def test_reduce_noftz_and_text():
    e = Env()
    cp_reduce_async_bulk(e.k, G, CTA, "add", e.gptr, e.smem, 64, type=t.bf16)
    cp_reduce_async_bulk(e.k, G, CTA, "max", e.gptr, e.smem, 64, type=t.f16)
    cp_reduce_async_bulk(e.k, CL, CTA, "and", e.remote, e.smem, 64, e.bar, type=t.b32)
    lines = [s.render() for s in list(e.k.statements())[-3:]]
    assert lines == [
        "cp.reduce.async.bulk.global.shared::cta.bulk_group.add.noftz.bf16 [%rd2], [smem], 64;",
        "cp.reduce.async.bulk.global.shared::cta.bulk_group.max.f16 [%rd2], [smem], 64;",
        "cp.reduce.async.bulk.shared::cluster.shared::cta.mbarrier::complete_tx::bytes.and.b32 "
        "[remote], [smem], 64, [bar];"]


def test_copy_operand_order():
    e = Env()
    cp_async_bulk(e.k, CL, G, e.smem, e.gptr, e.n, e.bar, cta_mask=e.mask,
                  cache_policy=e.policy)
    assert e.k.body[-1].render() == (
        "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster"
        ".L2::cache_hint [smem], [%rd2], %r1, [bar], %rs1, %rd3;")


def test_generic_pointer_is_converted_like_cuda_ptx():
    """cuda::ptx passes a C++ (generic) pointer through __as_ptr_gmem: cvta.to.global."""
    k = Kernel("k")
    p = k.ld_param(k.param_ptr("p"))
    smem = k.shared_array(t.b8, 256, align=128, name="smem")
    cp_async_bulk(k, G, CTA, p, smem, 256)
    cp_async_bulk(k, G, CTA, k.param_ptr("q"), smem, 256)     # a pointer parameter: loaded
    assert [s.render() for s in k.statements()] == [
        "ld.param.u64 %rd1, [p];", "cvta.to.global.u64 %rd2, %rd1;",
        "cp.async.bulk.global.shared::cta.bulk_group [%rd2], [smem], 256;",
        "ld.param.u64 %rd3, [q];", "cvta.to.global.u64 %rd4, %rd3;",
        "cp.async.bulk.global.shared::cta.bulk_group [%rd4], [smem], 256;"]


def test_forms_table():
    names = [f[0] for f in FORMS + POLICY_FORMS]
    assert len(names) == len(set(names))
    assert all(isinstance(r, Requires) for _, r, _ in FORMS + POLICY_FORMS)
    assert {"cp.async.bulk.commit_group", "createpolicy.fractional"} <= set(names)


# -- refusal rules ---------------------------------------------------------------------------------
@pytest.mark.parametrize("make", [
    lambda e: cp_async_bulk(e.k, CL, G, e.smem, e.gptr, 4095, e.bar),
    lambda e: cp_async_bulk(e.k, G, CTA, e.gptr, e.smem, 100),
    lambda e: cp_async_bulk_prefetch(e.k, e.gptr, 24),
    lambda e: cp_reduce_async_bulk(e.k, G, CTA, "add", e.gptr, e.smem, 8, type=t.u32),
], ids=["load", "store", "prefetch", "reduce"])
def test_refuse_size_not_multiple_of_16(make):
    with pytest.raises(OperandError, match="size.*multiple of 16"):
        make(Env())


def test_refuse_wait_group_count_register():
    e = Env()
    with pytest.raises(OperandError, match="a register is not allowed here"):
        cp_async_bulk_wait_group_read(e.k, e.n)


def test_refuse_wait_group_negative_count():
    with pytest.raises(OperandError, match="N"):
        CpAsyncBulkWaitGroup(-1)


@pytest.mark.parametrize("dst,op,ty,hint", [
    (G, "add", t.s64, "use .u64"), (G, "and", t.u32, "bitwise reductions take .b32"),
    (G, "inc", t.s32, ""), (G, "min", t.f32, ""), (G, "add", t.b32, "arithmetic"),
    (G, "xor", t.f64, ""), (CL, "and", t.b64, ""), (CL, "min", t.u64, ""),
    (CL, "add", t.f32, ""), (CL, "max", t.f16, ""), (CL, "add", t.s64, "use .u64"),
])
def test_refuse_impossible_reduction_type(dst, op, ty, hint):
    e = Env()
    rdst, bar = (e.remote, e.bar) if dst == CL else (e.gptr, None)
    with pytest.raises(BuildError, match=rf"\.{op} into \.{dst} takes .*not \.{ty.value}.*{hint}"):
        cp_reduce_async_bulk(e.k, dst, CTA, op, rdst, e.smem, 64, bar, type=ty)


def test_refuse_reduction_without_type():
    e = Env()
    with pytest.raises(BuildError, match=r"pass type=\.\.\."):
        cp_reduce_async_bulk(e.k, G, CTA, "add", e.gptr, e.smem, 64)


def test_refuse_reduction_cache_hint_into_cluster():
    e = Env()
    with pytest.raises(BuildError, match=r"cache_hint exists only on the reduction into \.global"):
        cp_reduce_async_bulk(e.k, CL, CTA, "add", e.remote, e.smem, 64, e.bar, type=t.u32,
                             cache_policy=e.policy)


def test_refuse_shared_cta_destination_below_ptx_86():
    m = build_group([GROUPS["bulk/copy_cta"][0]])
    with pytest.raises(VersionError, match="needs PTX ISA 8.6.*pinned to .version 8.5"):
        Module(m.kernels, version="8.5", target="sm_90a").emit()


def test_refuse_32bit_cta_mask():
    e = Env()
    with pytest.raises(OperandError, match="cta_mask.*16-bit"):
        cp_async_bulk(e.k, CL, G, e.smem, e.gptr, e.n, e.bar, cta_mask=e.n)


def test_refuse_multicast_without_mask():
    e = Env()
    with pytest.raises(BuildError, match="needs a 16-bit ctaMask operand"):
        CpAsyncBulk(CL, G, e.smem, e.gptr, e.n, e.bar, multicast=True)


@pytest.mark.parametrize("src", [G, CTA])
def test_refuse_multicast_outside_global_to_cluster(src):
    e = Env()
    dst = CTA if src == G else CL
    with pytest.raises(BuildError, match="multicast::cluster needs a"):
        cp_async_bulk(e.k, dst, src, e.remote, e.gptr if src == G else e.smem, e.n, e.bar,
                      cta_mask=1)


def test_refuse_cache_hint_without_policy():
    e = Env()
    with pytest.raises(BuildError, match="needs a 64-bit cache-policy register"):
        CpAsyncBulk(G, CTA, e.gptr, e.smem, e.n, cache_hint=True)


@pytest.mark.parametrize("policy", ["n", 7], ids=["32-bit register", "immediate"])
def test_refuse_cache_policy_not_64bit_register(policy):
    e = Env()
    with pytest.raises(OperandError, match="cache_policy.*64-bit register"):
        cp_async_bulk_prefetch(e.k, e.gptr, 64, e.n if policy == "n" else policy)


def test_refuse_cache_hint_on_shared_to_cluster_copy():
    e = Env()
    with pytest.raises(BuildError, match="cache_hint is not allowed"):
        cp_async_bulk(e.k, CL, CTA, e.remote, e.smem, e.n, e.bar, cache_policy=e.policy)


def test_refuse_byte_mask_on_load():
    e = Env()
    with pytest.raises(BuildError, match=r"cp_async_bulk\(k, dst_space, src_space, dst_mem, "
                                         r"src_mem, size, cache_policy=, byte_mask=\)"):
        cp_async_bulk(e.k, CL, G, e.smem, e.gptr, e.n, e.bar, byte_mask=0xFF)
    with pytest.raises(BuildError, match="cp_mask"):
        CpAsyncBulk(CL, G, e.smem, e.gptr, e.n, e.bar, byte_mask=0xFF)


def test_refuse_mbarrier_completion_on_store():
    e = Env()
    with pytest.raises(BuildError, match="mbarrier completion on a store is not allowed"):
        cp_async_bulk(e.k, G, CTA, e.gptr, e.smem, e.n, e.bar)


def test_refuse_load_without_mbarrier():
    e = Env()
    with pytest.raises(BuildError, match="needs the mbarrier's shared address"):
        cp_async_bulk(e.k, CL, G, e.smem, e.gptr, e.n)


def test_refuse_unknown_direction():
    e = Env()
    with pytest.raises(BuildError, match=r"no \.global\.global direction"):
        cp_async_bulk(e.k, G, G, e.gptr, e.gptr, e.n)


def test_refuse_32bit_global_address():
    e = Env()
    with pytest.raises(OperandError, match="64-bit"):
        cp_async_bulk(e.k, G, CTA, e.n, e.smem, 64)


def test_refuse_misaligned_mbarrier():
    e = Env()
    b = e.k.shared_array(t.b32, 2)
    with pytest.raises(OperandError, match="mbar.*8-byte aligned"):
        cp_async_bulk(e.k, CL, G, e.smem, e.gptr, 64, b)


@pytest.mark.parametrize("fraction", [0.0, 1.5, -0.5])
def test_refuse_policy_fraction_out_of_range(fraction):
    e = Env()
    with pytest.raises(OperandError, match=r"fraction in \(0, 1\]"):
        createpolicy_fractional(e.k, fraction=fraction)


def test_refuse_policy_secondary_priority():
    e = Env()
    with pytest.raises(OperandError, match="secondary"):
        createpolicy_fractional(e.k, "evict_first", "evict_last")


def test_refuse_policy_32bit_destination():
    e = Env()
    with pytest.raises(OperandError, match="'d'"):
        CreatePolicyFractional(e.n)


def test_refuse_policy_range_primary_above_total():
    e = Env()
    with pytest.raises(BuildError, match="primary_size .8192. exceeds total_size .4096."):
        createpolicy_range(e.k, e.gptr, 8192, 4096)


_HDR = (".version {v}\n.target {t}\n.address_size 64\n.visible .entry k()\n{{\n"
        "\t.reg .b16 %rs<4>;\n\t.reg .b32 %r<8>;\n\t.reg .b64 %rd<4>;\n\t{line}\n}}\n")
PTXAS_REJECTS = [
    ("size 4095", "8.0", "sm_90", "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::"
     "bytes [%r1], [%rd1], 4095, [%r2];"),
    ("wait_group register", "8.0", "sm_90", "cp.async.bulk.wait_group.read %r1;"),
    ("and.b64 into cluster", "8.0", "sm_90", "cp.reduce.async.bulk.shared::cluster.shared::cta."
     "mbarrier::complete_tx::bytes.and.b64 [%r1], [%r2], 64, [%r3];"),
    ("add.s64", "8.0", "sm_90", "cp.reduce.async.bulk.global.shared::cta.bulk_group.add.s64 "
     "[%rd1], [%r2], 64;"),
    ("add.f16 without noftz", "8.0", "sm_90", "cp.reduce.async.bulk.global.shared::cta."
     "bulk_group.add.f16 [%rd1], [%r2], 64;"),
    ("multicast into cta", "8.6", "sm_90", "cp.async.bulk.shared::cta.global.mbarrier::"
     "complete_tx::bytes.multicast::cluster [%r1], [%rd1], 64, [%r2], %rs1;"),
    ("cache_hint cta->cluster", "8.0", "sm_90", "cp.async.bulk.shared::cluster.shared::cta."
     "mbarrier::complete_tx::bytes.L2::cache_hint [%r1], [%r2], 64, [%r3], %rd1;"),
    ("32-bit ctaMask", "8.0", "sm_90", "cp.async.bulk.shared::cluster.global.mbarrier::"
     "complete_tx::bytes.multicast::cluster [%r1], [%rd1], 64, [%r2], %r3;"),
    ("fraction 0", "7.4", "sm_80", "createpolicy.fractional.L2::evict_last.b64 %rd1, "
     "0f00000000;"),
    ("cp_mask on sm_90", "8.6", "sm_90a", "cp.async.bulk.global.shared::cta.bulk_group.cp_mask "
     "[%rd1], [%r1], 64, %rs1;"),
]


@pytest.mark.parametrize("what,v,tgt,line", PTXAS_REJECTS, ids=[p[0] for p in PTXAS_REJECTS])
def test_ptxas_agrees_with_refusal(what, v, tgt, line):
    with pytest.raises(Exception, match="ptxas rejected"):
        assemble(_HDR.format(v=v, t=tgt, line=line), tgt)
