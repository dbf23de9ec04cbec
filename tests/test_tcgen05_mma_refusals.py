"""tcgen05.mma and tcgen05.mma.ws: the refusal rules, one test per class of mistake (each
asserting the rule's words and the user's line), and the host descriptors (InstrDesc,
SmemDesc100) checked against the instruction."""

from __future__ import annotations

import enum
import os

import pytest

from ptxdsl import PtxdslError, ptx, t
from ptxdsl.instructions.bulk import CtaGroup
from ptxdsl.instructions.tcgen05_mma import Kind, Tcgen05Mma, Tcgen05MmaWs
from ptxdsl.instructions.wgmma import WgmmaType
from tests.tcgen05_mma_cases import MmaEnv

HERE = os.path.abspath(__file__)


def _here(err) -> bool:
    return os.path.abspath(err.value.loc.file) == HERE


# -- refusal rules: one per class of mistake ------------------------------------------------------
def _refused(call, match: str, exc=PtxdslError):
    with pytest.raises(exc, match=match) as err:
        call(MmaEnv())
    assert _here(err)


def test_refuse_kind_of_another_function():
    _refused(lambda e: ptx.tcgen05_mma(e.k, ptx.kind_mxf4, ptx.cta_group_1, e.d, e.a, e.b,
                                       e.i, True),
             r"tcgen05_mma: operand 'kind': expected one of \.kind::f16, \.kind::tf32, "
             r"\.kind::f8f6f4, \.kind::i8, got \.kind::mxf4")
    _refused(lambda e: ptx.tcgen05_mma_block_scale_vec_4x(
        e.k, ptx.kind_mxf4, ptx.cta_group_1, e.d, e.a, e.b, e.i, e.sa, e.sb, True),
             r"'kind': expected one of \.kind::mxf4nvf4, got \.kind::mxf4")


def test_refuse_kind_name():
    _refused(lambda e: ptx.tcgen05_mma(e.k, "kind_f64", 1, e.d, e.a, e.b, e.i, True),
             r"'kind'.*one of")


def _scaled(e, kind, vec=None, scales=True, cg=1):
    """A block-scaled tcgen05.mma built here (its refusal names this file's line)."""
    more = dict(scale_A_tmem=e.sa, scale_B_tmem=e.sb) if scales else {}
    return Tcgen05Mma(kind=kind, cta_group=cg, d_tmem=e.d, a_desc=e.a, b_desc=e.b, idesc=e.i,
                      enable_input_d=e.p, scale_vec=vec, **more)


def test_refuse_scale_vec_of_another_kind():
    _refused(lambda e: _scaled(e, "mxf8f6f4", "2X"),
             r"\.kind::mxf8f6f4 takes \.scale_vec::1X, \.block32 only \(got \.scale_vec::2X\)")


def test_refuse_block_scale_without_scale_vec_for_mxf4nvf4():
    _refused(lambda e: _scaled(e, "mxf4nvf4"),
             r"\.kind::mxf4nvf4 needs a scale_vec \(\.scale_vec::2X, \.scale_vec::4X")


def test_refuse_block_scaled_kind_without_scales():
    _refused(lambda e: _scaled(e, "mxf8f6f4", scales=False, cg=2),
             r"block-scaled: give scale_A_tmem and scale_B_tmem")


def test_refuse_block_scale_on_a_dense_kind():
    _refused(lambda e: _scaled(e, "i8", "1X"),
             r"\.block_scale .* is for the kinds \.kind::mxf8f6f4, .* only \(got \.kind::i8\)")


def test_refuse_disable_output_lane_count():
    _refused(lambda e: ptx.tcgen05_mma(e.k, ptx.kind_f16, ptx.cta_group_1, e.d, e.a, e.b, e.i,
                                       e.lanes(8), True),
             r"'disable_output_lane': expected 4 32-bit registers or immediates "
             r"\(\.cta_group::1\), got 8 values")
    _refused(lambda e: ptx.tcgen05_mma(e.k, ptx.kind_f16, ptx.cta_group_2, e.d, e.a, e.b, e.i,
                                       e.lanes(4), True),
             r"expected 8 32-bit registers .*\(\.cta_group::2\), got 4 values")


def test_refuse_disable_output_lane_type():
    _refused(lambda e: ptx.tcgen05_mma(e.k, ptx.kind_f16, ptx.cta_group_1, e.d, e.a, e.b, e.i,
                                       [e.a] * 4, True),
             r"'disable_output_lane\[0\]': expected a 32-bit register")


def test_refuse_disable_output_lane_with_block_scale():
    _refused(lambda e: Tcgen05Mma(kind="mxf8f6f4", d_tmem=e.d, a_desc=e.a, b_desc=e.b,
                                  idesc=e.i, enable_input_d=e.p, scale_A_tmem=e.sa,
                                  scale_B_tmem=e.sb, disable_output_lane=e.lanes(4)),
             "the block-scaled kinds take no disable_output_lane")


def test_refuse_scale_input_d_out_of_range():
    _refused(lambda e: ptx.tcgen05_mma(e.k, ptx.kind_f16, ptx.cta_group_1, e.d, e.a, e.b, e.i,
                                       True, 16),
             r"'scale_input_d': expected an integer immediate in \[0, 15\], got")


def test_refuse_scale_input_d_on_another_kind():
    _refused(lambda e: ptx.tcgen05_mma(e.k, ptx.kind_f8f6f4, ptx.cta_group_1, e.d, e.a, e.b,
                                       e.i, True, 1),
             r"scale_input_d is for \.kind::f16 and \.kind::tf32 only \(got \.kind::f8f6f4\)")


def test_refuse_cta_group_2_for_ws():
    _refused(lambda e: ptx.tcgen05_mma_ws_collector_b1_use(e.k, ptx.cta_group_2, ptx.kind_f16,
                                                           e.d, e.a, e.b, e.i, True),
             r"'cta_group': expected cta_group_1 \(\.cta_group::1\), got \.cta_group::2")
    _refused(lambda e: Tcgen05MmaWs(kind="f16", cta_group=2, d_tmem=e.d, a_desc=e.a,
                                    b_desc=e.b, idesc=e.i, enable_input_d=e.p),
             r"tcgen05.mma.ws has \.cta_group::1 only")


def test_refuse_cta_group_3():
    _refused(lambda e: ptx.tcgen05_mma(e.k, ptx.kind_f16, 3, e.d, e.a, e.b, e.i, True),
             r"'cta_group'")


def test_refuse_a_tmem_not_u32():
    _refused(lambda e: ptx.tcgen05_mma_tmem_a(e.k, ptx.kind_f16, ptx.cta_group_1, e.d, e.a,
                                              e.b, e.i, True),
             r"'a_tmem': expected a 32-bit integer register \(\.b32/\.u32\) holding a "
             r"tensor-memory address .*got register %rd\d+ of type \.u64")


def test_refuse_tmem_address_declared_u32():
    """tcgen05.mma takes a TMEM address only in a register declared .b32 (ptxas: "Arguments
    mismatch" for .u32 and .s32; tcgen05.ld/st take them); automatic registers are .b32."""
    def named(e):
        taddr = e.k.reg(t.u32, "taddr")
        e.k.mov(0, dst=taddr)
        ptx.tcgen05_mma(e.k, ptx.kind_f16, ptx.cta_group_1, taddr, e.a, e.b, e.i, True)
    _refused(named, r"'d_tmem': expected a tensor-memory address in a register declared \.b32 "
             r".*got %taddr, declared \.u32")
    e = MmaEnv()
    taddr = e.k.reg(t.b32, "taddr")
    e.k.mov(0, dst=taddr)
    insn = ptx.tcgen05_mma_tmem_a(e.k, ptx.kind_f16, ptx.cta_group_1, taddr, e.d, e.b, e.i,
                                  True)
    assert insn.render().startswith("tcgen05.mma.cta_group::1.kind::f16 [%taddr], [%r1]")


def test_refuse_sp_meta_tmem():
    def meta(e, value):
        return Tcgen05Mma(kind="f16", d_tmem=e.d, a_desc=e.a, b_desc=e.b, sp_meta_tmem=value,
                          idesc=e.i, enable_input_d=e.p)
    _refused(lambda e: meta(e, e.a), r"'sp_meta_tmem': expected a 32-bit integer register")
    _refused(lambda e: meta(e, e.k.reg(t.u32, "m")),
             r"'sp_meta_tmem': expected a tensor-memory address in a register declared \.b32")


def test_refuse_dense_idesc_for_a_sparse_form():
    _refused(lambda e: Tcgen05MmaWs(kind="f16", d_tmem=e.d, a_desc=e.a, b_desc=e.b,
                                    sp_meta_tmem=e.meta, idesc=_Desc(ws=True),
                                    enable_input_d=e.p),
             r"'idesc': expected an instruction descriptor for \.kind::f16\.ws, cta_group::1, "
             r"sparse, got one made for \.kind::f16\.ws, cta_group::1")


def test_refuse_d_tmem_not_a_register():
    _refused(lambda e: ptx.tcgen05_mma(e.k, ptx.kind_f16, ptx.cta_group_1, 0, e.a, e.b, e.i,
                                       True),
             r"'d_tmem': expected a 32-bit integer register \(\.b32/\.u32\) holding a "
             r"tensor-memory address")


def test_refuse_a_desc_not_u64():
    """cuda::ptx's block-scale `_tmem_a` functions take a descriptor (u64) for A: a TMEM
    address given there is refused, not emitted as a descriptor."""
    _refused(lambda e: ptx.tcgen05_mma_block_scale_vec_1x_tmem_a(
        e.k, ptx.kind_mxf8f6f4, ptx.cta_group_1, e.d, e.a_tmem, e.b, e.i, e.sa, e.sb, True),
             r"'a_desc': expected a 64-bit register \(\.b64/\.u64\) holding a descriptor")


def test_refuse_both_or_neither_a():
    _refused(lambda e: Tcgen05Mma(kind="f16", d_tmem=e.d, a_desc=e.a, a_tmem=e.a_tmem,
                                  b_desc=e.b, idesc=e.i, enable_input_d=e.p),
             r"a_desc\) or from tensor memory \(a_tmem\): give exactly one")


def test_refuse_idesc():
    _refused(lambda e: ptx.tcgen05_mma(e.k, ptx.kind_f16, ptx.cta_group_1, e.d, e.a, e.b, e.a,
                                       True),
             r"'idesc': expected a 32-bit register \(\.b32/\.u32\) or an immediate")
    _refused(lambda e: ptx.tcgen05_mma(e.k, ptx.kind_f16, ptx.cta_group_1, e.d, e.a, e.b,
                                       1 << 32, True),
             r"'idesc'")


class _Desc:
    """What tcgen05.mma reads of an instruction descriptor object (h3's `InstrDesc`): its
    32-bit `.value` and what it was made for."""

    def __init__(self, kind="kind::f16", cta_group=1, ws=False, sparse=False):
        self.kind, self.cta_group, self.ws, self.sparse = kind, cta_group, ws, sparse
        self.value = 0x10


def test_idesc_object_gives_its_value():
    e = MmaEnv()
    insn = ptx.tcgen05_mma(e.k, ptx.kind_f16, ptx.cta_group_1, e.d, e.a, e.b, _Desc(), True)
    assert insn.idesc.value == 0x10
    insn = ptx.tcgen05_mma_ws_collector_b0_use(e.k, ptx.cta_group_1, ptx.kind_i8, e.d, e.a,
                                               e.b, _Desc(Kind.i8, ws=True), True)
    assert insn.idesc.value == 0x10


@pytest.mark.parametrize("desc,made", [
    (_Desc(kind=Kind.tf32), r"\.kind::tf32, cta_group::1"),
    (_Desc(cta_group=2), r"\.kind::f16, cta_group::2"),
    (_Desc(ws=True), r"\.kind::f16\.ws, cta_group::1"),
    (_Desc(kind="tf32", sparse=True), r"\.kind::tf32, cta_group::1, sparse")])
def test_refuse_idesc_made_for_another_form(desc, made):
    _refused(lambda e: ptx.tcgen05_mma(e.k, ptx.kind_f16, ptx.cta_group_1, e.d, e.a, e.b,
                                       desc, True),
             r"'idesc': expected an instruction descriptor for \.kind::f16, cta_group::1, got "
             r"one made for " + made)


def test_host_descriptors():
    """tcgen05_desc's InstrDesc and SmemDesc100 give their values; a descriptor made for
    another kind or CTA group, and wgmma's sm_90 MatrixDescriptor, are refused."""
    from ptxdsl.instructions.tcgen05_desc import InstrDesc, SmemDesc100
    from ptxdsl.instructions.wgmma_desc import SmemLayout, descriptor

    e = MmaEnv()
    idesc = InstrDesc("f16", 128, 256, dtype="f32", atype="bf16", btype="bf16")
    layout = SmemLayout(t.bf16, 128, 64)
    a, b = SmemDesc100.from_layout(layout, 0), SmemDesc100.from_layout(layout, 16384)
    insn = ptx.tcgen05_mma(e.k, ptx.kind_f16, ptx.cta_group_1, e.d, a, b, idesc, True)
    assert (insn.a_desc.value, insn.b_desc.value, insn.idesc.value) == (a.value, b.value,
                                                                        idesc.value)
    pair = InstrDesc("f16", 256, 256, dtype="f32", atype="bf16", btype="bf16", cta_group=2)
    _refused(lambda e: ptx.tcgen05_mma(e.k, ptx.kind_f16, ptx.cta_group_1, e.d, e.a, e.b,
                                       pair, True),
             r"'idesc': expected an instruction descriptor for \.kind::f16, cta_group::1, got "
             r"one made for \.kind::f16, cta_group::2")
    _refused(lambda e: ptx.tcgen05_mma(e.k, ptx.kind_tf32, ptx.cta_group_1, e.d, e.a, e.b,
                                       idesc, True),
             r"one made for \.kind::f16, cta_group::1")
    _refused(lambda e: ptx.tcgen05_mma(e.k, ptx.kind_f16, ptx.cta_group_1, e.d,
                                       descriptor(e.k, layout, 0), e.b, idesc, True),
             r"'a_desc': .*SmemDesc100 \(wgmma's descriptor lacks sm_100's version bits.*got "
             r"a wgmma MatrixDescriptor")


def test_refuse_enable_input_d():
    _refused(lambda e: ptx.tcgen05_mma(e.k, ptx.kind_f16, ptx.cta_group_1, e.d, e.a, e.b, e.i,
                                       2),
             r"'enable_input_d': expected a \.pred register, a bool, or a 32-bit register")
    _refused(lambda e: ptx.tcgen05_mma(e.k, ptx.kind_f16, ptx.cta_group_1, e.d, e.a, e.b, e.i,
                                       e.a),
             r"'enable_input_d'.*got register %rd\d+ of type \.u64")


def test_refuse_collector_b():
    _refused(lambda e: Tcgen05MmaWs(kind="f16", d_tmem=e.d, a_desc=e.a, b_desc=e.b,
                                    idesc=e.i, enable_input_d=e.p, collector_b=4,
                                    collector="fill"),
             r"'collector_b': expected an integer immediate in \[0, 3\]")
    _refused(lambda e: Tcgen05MmaWs(kind="f16", d_tmem=e.d, a_desc=e.a, b_desc=e.b,
                                    idesc=e.i, enable_input_d=e.p, collector_b=1),
             r"give both or neither")
    _refused(lambda e: Tcgen05Mma(kind="f16", d_tmem=e.d, a_desc=e.a, b_desc=e.b,
                                  idesc=e.i, enable_input_d=e.p, collector="keep"),
             r"'collector'")


def test_refuse_zero_column_mask_desc():
    _refused(lambda e: ptx.tcgen05_mma_ws_collector_b0_fill(
        e.k, ptx.cta_group_1, ptx.kind_f16, e.d, e.a, e.b, e.i, True, e.i),
             r"'zero_column_mask_desc': expected a 64-bit register \(\.b64/\.u64\)")


def test_refuse_overload_that_does_not_exist():
    _refused(lambda e: ptx.tcgen05_mma(e.k, ptx.kind_f16, ptx.cta_group_1, e.d, e.a, e.b),
             r"no cuda::ptx overload takes")


def test_a_refused_call_adds_nothing():
    """The setp made for a bool enable_input_d is rolled back with the refused instruction."""
    e = MmaEnv()
    e.d, e.a, e.b, e.i   # noqa: B018 - make the operands first
    before = len(list(e.k.statements()))
    with pytest.raises(PtxdslError):
        ptx.tcgen05_mma(e.k, ptx.kind_f8f6f4, ptx.cta_group_1, e.d, e.a, e.b, e.i, True, 1)
    assert len(list(e.k.statements())) == before


def test_refuse_cta_groups_mixed_in_a_kernel():
    """ptxas refuses a kernel with both .cta_group::1 and ::2 tcgen05 instructions (so the
    batches above split by group); the builder refuses the second group."""
    def mixed(e):
        ptx.tcgen05_mma(e.k, ptx.kind_f16, ptx.cta_group_1, e.d, e.a, e.b, e.i, True)
        ptx.tcgen05_mma_block_scale_vec_1x(e.k, ptx.kind_mxf8f6f4, ptx.cta_group_2, e.d, e.a,
                                           e.b, e.i, e.sa, e.sb, True)
    _refused(mixed, r"\.cta_group::2 in a kernel whose tcgen05\.mma\.cta_group::1\.kind::f16 "
             r"\(line .*\) uses \.cta_group::1: ptxas refuses a function that mixes")


@pytest.mark.parametrize("kind", [t.f16, WgmmaType.tf32])
def test_refuse_an_element_type_as_the_kind(kind):
    # t.f16's value 'f16' is the kind's name: it was read as .kind::f16
    _refused(lambda e: ptx.tcgen05_mma(e.k, kind, ptx.cta_group_1, e.d, e.a, e.b, e.i, e.p),
             r"tcgen05\.mma: operand 'kind': expected one of 'kind::f16', .*, got "
             r"(ScalarType\.f16|WgmmaType\.tf32)")


def test_kind_and_cta_group_spellings_agree():
    """cuda::ptx's tags, the PTX spellings, the enums, the ints, and a member of another
    enum spelled as a kind (tcgen05_desc's MmaKind) name the same form."""
    class OtherKind(enum.Enum):
        f16 = "kind::f16"
        tag = "kind_f16"

    e = MmaEnv()
    texts = {ptx.tcgen05_mma(e.k, kind, cg, e.d, e.a, e.b, e.i, e.p).render()
             for kind, cg in (("kind::f16", 1), (Kind.f16, CtaGroup.one), ("f16", "cta_group_1"),
                              (OtherKind.f16, ptx.cta_group_1), ("kind_f16", ".cta_group::1"),
                              (OtherKind.tag, 1))}
    assert len(texts) == 1

