"""Builder bugs the ptxas fuzzer found (issue 7), one test each: what ptxas rejects is now
refused with the rule, and what ptxas accepts is accepted and assembles at the inferred
version and target."""

from __future__ import annotations

import pytest

from ptxdsl import BuildError, Kernel, Module, OperandError, ptx, t
from ptxdsl.testing import assemble_declared
from ptxdsl.types import StateSpace


def built(fn) -> str:
    """Build `fn(k)` in a fresh kernel; return the module's PTX after assembling it."""
    k = Kernel("k")
    fn(k)
    k.ret()
    text = Module([k], check=False).emit()
    assemble_declared(text)
    return text


def test_named_bf16_registers_are_declared_as_bits():
    # `.reg .bf16` is a ptxas syntax error: the builder declared named bf16 registers so.
    def body(k):
        h = k.reg(t.bf16, "hb")
        h2 = k.reg(t.bf16x2, "hb2")
        p = k.ld_param(k.param_ptr("p"))
        k.st(p, h, type=t.b16, space="generic")
        k.st(p, h2, type=t.b32, space="generic")
    text = built(body)
    assert ".reg .b16 %hb;" in text and ".reg .b32 %hb2;" in text


@pytest.mark.parametrize("type", [t.b8, t.u8, t.s8, t.f16, t.bf16, t.f16x2])
def test_mov_has_no_8_bit_or_half_types(type):
    k = Kernel("k")
    with pytest.raises(OperandError, match="no 8-bit or half-precision mov"):
        k.mov(k.reg(type), type=type)


@pytest.mark.parametrize(("dtype", "atype", "version", "target"), [
    (t.bf16, t.f32, "7.0", "sm_80"), (t.f32, t.bf16, "7.1", "sm_80"),
    (t.u32, t.bf16, "7.8", "sm_90"), (t.bf16, t.f16, "7.8", "sm_90"),
    (t.f64, t.bf16, "7.8", "sm_90")])
def test_cvt_bf16_needs_its_version_and_target(dtype, atype, version, target):
    text = built(lambda k: k.cvt(k.reg(atype), dtype, atype=atype))
    assert f".version {version}\n.target {target}\n" in text


def test_cvt_refusals_ptxas_makes():
    k = Kernel("k")
    with pytest.raises(OperandError, match=r"\.rna only rounds to \.tf32"):
        k.cvt(k.reg(t.f32), t.f64, rnd="rna")
    with pytest.raises(OperandError, match="every source value fits the destination"):
        k.cvt(k.reg(t.s32), t.s64, sat=True)
    with pytest.raises(OperandError, match=r"every \.bf16 conversion"):
        k.cvt(k.reg(t.u32), t.bf16, sat=True)
    with pytest.raises(OperandError, match="an integer rounding or none"):
        k.cvt(k.reg(t.f64), t.f64, rnd="rp")
    built(lambda k: k.cvt(k.reg(t.s32), t.u64, sat=True))     # can overflow: .sat is fine
    built(lambda k: k.cvt(k.reg(t.bf16), t.f16, rnd="rn"))      # f16 <-> bf16 may round
    with pytest.raises(OperandError, match="a float rounding .* or none"):
        k.cvt(k.reg(t.bf16), t.f16, rnd="rni")


def test_cvta_u32_is_refused_for_the_sm90_spaces():
    k = Kernel("k")
    with pytest.raises(OperandError, match="ptxas refuses 32-bit cvta"):
        k.cvta(k.reg(t.u32), "shared::cluster", to=True)
    built(lambda k: k.cvta(k.reg(t.u64), "shared::cluster", to=True))


def test_ld_st_have_no_f16_type():
    k = Kernel("k")
    with pytest.raises(OperandError, match="a memory type"):
        k.ld(k.reg(t.u64), type=t.f16, space="global")


def test_b128_access_needs_ptx_83():
    text = built(lambda k: k.st(k.reg(t.u64), 1, type=t.b128, space="shared::cta"))
    assert ".version 8.3\n" in text


def test_memory_orders_per_space():
    k = Kernel("k")
    with pytest.raises(OperandError, match="cannot be applied to that space"):
        k.ld(k.reg(t.u64), type=t.b32, space="local", sem="acquire", scope="gpu")
    with pytest.raises(OperandError, match="cannot be applied to that space"):
        k.ld(k.reg(t.u64), type=t.b32, space="const", sem="volatile")
    text = built(lambda k: k.st(k.reg(t.u64), 0.5, type=t.f32, space="shared",
                                sem="release", scope="cluster"))
    assert ".target sm_90\n" in text                      # .cluster scope needs sm_90
    text = built(lambda k: k.ld(k.reg(t.u64), type=t.b32, space="local", sem="volatile"))
    assert ".version 9.1\n" in text                       # ptxas 13: .local.volatile is 9.1


def test_unary_ops_take_immediates():
    # (a constant source alone is folded into a mov of the result: issue 32)
    text = built(lambda k: (k.not_(5, type=t.b32), k.abs(-1.0, type=t.f32),
                            k.neg(7, type=t.s32)))
    assert "mov.b32 %r1, 4294967290;" in text and "mov.f32 %f1, 0f3F800000;" in text
    assert "mov.s32 %r2, -7;" in text


def test_tensormap_replace_b32_field_refuses_a_float_register():
    k = Kernel("k")
    smap = k.shared_array(t.b8, 128, align=128, name="smap")
    with pytest.raises(OperandError, match="an integer or bit register of 32 bits"):
        ptx.tensormap_replace_box_dim(k, ptx.space_shared, smap, 0, k.reg(t.f32))
    built(lambda k: ptx.tensormap_replace_global_address(
        k, StateSpace.shared_cta, k.shared_array(t.b8, 128, align=128, name="smap"),
        k.reg(t.f64)))


# -- issue 28: what the wgmma / matrix / packed-cvt fuzz families found ---------------------------
HERE = __file__.rsplit("/", 1)[-1]


def test_matrix_vectors_of_mixed_register_types_are_refused():
    # ptxas: "Vector with elements of different types are not allowed in stmatrix instruction";
    # the builder checked each register against .b32 alone and emitted the mix.
    k = Kernel("k")
    smem = k.shared_array(t.b8, 1024, align=128, name="smem")
    mixed = (k.reg(t.u32, "u"), k.reg(t.f32, "f"))
    with pytest.raises(BuildError, match=r"registers other than \.bN ones must all have one "
                       r"type .* got \.u32, \.f32") as e:
        k.stmatrix(smem, mixed)
    assert HERE in str(e.value)
    with pytest.raises(BuildError, match="must all have one type"):
        k.ldmatrix(smem, 2, dst=mixed)
    # .b32 goes with any 32-bit type (ptxas agrees), and one type is fine
    built(lambda k: k.stmatrix(k.shared_array(t.b8, 64, align=16, name="s"),
                               (k.reg(t.b32, "b"), k.reg(t.f32, "g"))))


def test_wgmma_a_fragment_of_mixed_register_types_is_refused():
    k = Kernel("k")
    d = tuple(k.reg(t.s32) for _ in range(4))
    a = (k.reg(t.u32, "a0"), k.reg(t.f32, "a1"), k.reg(t.b32, "a2"), k.reg(t.b32, "a3"))
    with pytest.raises(BuildError, match="must all have one type") as e:
        ptx.wgmma_mma_async(k, d, a, k.reg(t.b64), 1, atype="s8", n=8)
    assert HERE in str(e.value)


def test_cvt_packed_needs_a_register_declared_with_the_bit_type():
    # ptxas checks the packed operands against the register's declaration: a named .u32 (or
    # .f16) register is rejected where an automatic one, declared .b32, is accepted.
    k = Kernel("k")
    with pytest.raises(OperandError, match=r"operand 'a': expected a register declared \.b32 "
                       r"or \.f16x2 .* got %nu, declared \.u32") as e:
        k.cvt_packed("e4m3x2", k.reg(t.u32, "nu"), src_type="f16x2")
    assert HERE in str(e.value)
    with pytest.raises(OperandError, match=r"operand 'd': expected a register declared \.b32"):
        k.cvt_packed("bf16x2", k.reg(t.f32), k.reg(t.f32), dst=k.reg(t.u32, "du"))
    with pytest.raises(OperandError, match=r"operand 'a': expected a register declared \.f32 "):
        k.cvt_packed("f16x2", k.reg(t.b32, "bits"), k.reg(t.f32))   # ptxas: .f32 only here
    built(lambda k: (k.cvt_packed("e4m3x2", k.reg(t.u32), src_type="f16x2"),
                     k.cvt_packed("f16x2", k.reg(t.u16), src_type="e5m2x2"),
                     k.cvt_packed("bf16x2", k.reg(t.b32, "hi"), k.reg(t.f32))))


def test_ldmatrix_num_that_disagrees_with_dst_is_refused():
    # k.ldmatrix(a, 4, dst=(r0, r1)) emitted .x2: the count was dropped without a word.
    k = Kernel("k")
    smem = k.shared_array(t.b8, 1024, align=128, name="smem")
    two = (k.reg(t.b32), k.reg(t.b32))
    with pytest.raises(BuildError, match=r"num=4 matrices but 2 dst registers") as e:
        k.ldmatrix(smem, 4, dst=two)
    assert HERE in str(e.value)
    text = built(lambda k: (k.ldmatrix(k.shared_array(t.b8, 64, align=16, name="s"),
                                       dst=(k.reg(t.b32), k.reg(t.b32))),
                            k.ldmatrix(k.shared_array(t.b8, 64, align=16, name="s2"))))
    assert ".x2.shared.b16" in text and ".x4.shared.b16" in text
