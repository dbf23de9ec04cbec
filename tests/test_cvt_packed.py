"""Packed conversions (cvt to/from f16x2, bf16x2, e4m3x2, e5m2x2): every form assembled at its
inferred minimum, goldens, pins below, refusals; and the 256-bit vector ld/st rule."""

from __future__ import annotations

import itertools

import pytest

from ptxdsl import BuildError, Kernel, Module, OperandError, VersionError, t
from ptxdsl.instructions.cvt_packed import FORMS, CvtPacked
from tests.tma_cases import Case, Env, FormChecks


class CEnv(Env):
    f1 = property(lambda s: s._get("f1", lambda: s.k.ld_param(s.k.param(t.f32, "x"))))
    f2 = property(lambda s: s._get("f2", lambda: s.k.ld_param(s.k.param(t.f32, "y"))))
    h2 = property(lambda s: s._get("h2", lambda: s.k.ld_param(s.k.param(t.b32, "h2"))))
    q = property(lambda s: s._get("q", lambda: s.k.cvt(s.k.ld_param(s.k.param(
        t.u16, "q")), t.u16)))


HALF, FP8 = ("f16x2", "bf16x2"), ("e4m3x2", "e5m2x2")
RELU = (False, True)


def _pack(d, rnd, relu, sat):
    return lambda e: e.k.cvt_packed(d, e.f1, e.f2, rnd=rnd, relu=relu, satfinite=sat)


def _from_h2(d, relu):
    return lambda e: e.k.cvt_packed(d, e.h2, src_type="f16x2", relu=relu)


def _unpack(a, relu):
    return lambda e: e.k.cvt_packed("f16x2", e.q, src_type=a, relu=relu)


def _flags(relu, sat=False):
    return "-relu" * relu + "-satfinite" * sat


GROUPS = {
    "cvt_packed/half": [Case(f"{d}.f32-{rnd}{_flags(relu)}", _pack(d, rnd, relu, False), "7.0",
                             "sm_80")
                        for d, rnd, relu in itertools.product(HALF, ("rn", "rz"), RELU)],
    "cvt_packed/half_satfinite": [
        Case(f"{d}.f32-{rnd}{_flags(relu, True)}", _pack(d, rnd, relu, True), "8.1", "sm_80")
        for d, rnd, relu in itertools.product(HALF, ("rn", "rz"), RELU)],
    "cvt_packed/fp8": [
        *(Case(f"{d}.f32{_flags(relu, True)}", _pack(d, "rn", relu, True), "7.8", "sm_90")
          for d, relu in itertools.product(FP8, RELU)),
        *(Case(f"{d}.f16x2{_flags(relu, True)}", _from_h2(d, relu), "7.8", "sm_90")
          for d, relu in itertools.product(FP8, RELU)),
        *(Case(f"f16x2.{a}{_flags(relu)}", _unpack(a, relu), "7.8", "sm_90")
          for a, relu in itertools.product(FP8, RELU)),
    ],
}


class TestForms(FormChecks):
    GROUPS = GROUPS
    ENV = CEnv


def test_text_and_register_types():
    e = CEnv()
    d = e.k.cvt_packed("e4m3x2", e.f1, e.f2, relu=True)
    w = e.k.cvt_packed("f16x2", d, src_type="e4m3x2")
    assert d.type is t.b16 and w.type is t.b32
    text = e.module().emit()
    assert "cvt.rn.satfinite.relu.e4m3x2.f32 %rs1, %f1, %f2;" in text
    assert "cvt.rn.f16x2.e4m3x2 %r1, %rs1;" in text


def test_forms_rows_match_code():
    reqs = [r for _, r, _ in FORMS]
    e = CEnv()
    k = e.k
    assert CvtPacked("bf16x2", "f32", k.reg(t.b32), e.f1, e.f2).requires == reqs[0]
    assert CvtPacked("f16x2", "f32", k.reg(t.b32), e.f1, e.f2,
                     satfinite=True).requires == reqs[1]
    assert CvtPacked("e5m2x2", "f32", k.reg(t.b16), e.f1, e.f2,
                     satfinite=True).requires == reqs[2]
    assert CvtPacked("e4m3x2", "f16x2", k.reg(t.b16), e.h2, satfinite=True).requires == reqs[3]
    assert CvtPacked("f16x2", "e5m2x2", k.reg(t.b32), e.q).requires == reqs[4]


# -- refusals --------------------------------------------------------------------------------------
def test_refuse_fp8_without_satfinite():
    e = CEnv()
    with pytest.raises(BuildError, match="must saturate"):
        e.k.cvt_packed("e4m3x2", e.f1, e.f2, satfinite=False)


@pytest.mark.parametrize("d, a, rnd", [("e4m3x2", "f32", "rz"), ("f16x2", "f32", "rm"),
                                       ("f16x2", "e5m2x2", "rz")])
def test_refuse_rounding(d, a, rnd):
    e = CEnv()
    src = (e.f1, e.f2) if a == "f32" else (e.q,)
    with pytest.raises(BuildError, match="the rounding must be"):
        e.k.cvt_packed(d, *src, src_type=a, rnd=rnd)


def test_refuse_satfinite_on_widening():
    e = CEnv()
    with pytest.raises(BuildError, match="no .satfinite when widening"):
        e.k.cvt_packed("f16x2", e.q, src_type="e4m3x2", satfinite=True)


@pytest.mark.parametrize("d, a", [("bf16x2", "f16x2"), ("e4m3x2", "bf16x2"),
                                  ("f32", "f16x2"), ("e4m3x2", "e5m2x2")])
def test_refuse_pair(d, a):
    e = CEnv()
    with pytest.raises(BuildError, match="not a packed conversion"):
        e.k.cvt_packed(d, e.h2, src_type=a)


def test_refuse_source_count():
    e = CEnv()
    with pytest.raises(BuildError, match="two .f32 sources"):
        e.k.cvt_packed("bf16x2", e.f1)
    with pytest.raises(BuildError, match="one source"):
        e.k.cvt_packed("e4m3x2", e.h2, e.h2, src_type="f16x2")


def test_refuse_register_types():
    e = CEnv()
    with pytest.raises(OperandError, match=r"operand 'd'.*\.b16"):
        CvtPacked("e4m3x2", "f32", e.k.reg(t.b32), e.f1, e.f2, satfinite=True)
    with pytest.raises(OperandError, match=r"operand 'a'.*\.f32"):
        CvtPacked("bf16x2", "f32", e.k.reg(t.b32), e.q, e.f2)
    with pytest.raises(OperandError, match=r"operand 'b'.*\.f32 register"):
        CvtPacked("bf16x2", "f32", e.k.reg(t.b32), e.f1, 1.0)


# -- vector ld/st for epilogues --------------------------------------------------------------------
VECTORS = [(n, ty, sp) for n in (2, 4) for ty in (t.b16, t.b32, t.b64, t.f32, t.u32, t.f64)
           for sp in ("global", "shared") if n * ty.bits <= 128]


@pytest.mark.parametrize("n, ty, space", VECTORS, ids=[f"v{n}.{ty}.{sp}" for n, ty, sp in
                                                       VECTORS])
def test_vector_ld_st_assembles(n, ty, space):
    k = Kernel("k")
    addr = k.ld_param(k.param_ptr("p")) if space == "global" else k.mov(
        k.shared_array(ty, 64, align=16, name="s"))
    v = k.ld(addr, type=ty, space=space, vec=n)
    k.st(addr, v, type=ty, space=space)
    m = Module([k])
    text = m.emit()
    assert f"st.{space}.v{n}.{ty}" in text and f"ld.{space}.v{n}.{ty}" in text
    assert str(m.target) == "sm_75" and m.assemble()[:4] == b"\x7fELF"


@pytest.mark.parametrize("n, ty", [(8, t.b32), (8, t.f32), (8, t.u32), (4, t.b64), (4, t.f64)])
def test_256bit_vectors_need_sm100(n, ty, golden):
    k = Kernel("k")
    p = k.ld_param(k.param_ptr("p"))
    k.st(p, k.ld(p, type=ty, space="global", vec=n), type=ty, space="global")
    m = Module([k])
    assert (str(m.version), str(m.target)) == ("8.8", "sm_100")
    assert m.assemble()[:4] == b"\x7fELF"
    with pytest.raises(VersionError, match=rf"ld.global.v{n}.{ty} needs PTX ISA 8.8, sm_100\+"
                                           r".*pinned to .target sm_90a"):
        Module([k], target="sm_90a").emit()


def test_256bit_vector_golden(golden):
    k = Kernel("k")
    p = k.ld_param(k.param_ptr("p"))
    k.st(p, k.ld(p, type=t.f32, space="global", vec=8), space="global")
    golden(Module([k]), "cvt_packed/v8_global")


@pytest.mark.parametrize("space", ["shared", "shared::cta", "local"])
def test_refuse_256bit_outside_global(space):
    k = Kernel("k")
    a = k.mov(k.shared_array(t.b32, 64, align=32, name="s"))
    with pytest.raises(OperandError, match=r"\.global or generic for a 256-bit access.*sm_90 "
                                           r"has no 256-bit"):
        k.ld(a, type=t.b32, space=space, vec=8)


def test_256bit_generic_address_assembles():
    k = Kernel("k")
    p = k.ld_param(k.param_ptr("p"))
    k.ld(p, type=t.b64, space="generic", vec=4)
    assert Module([k]).assemble()[:4] == b"\x7fELF"


@pytest.mark.parametrize("n, ty", [(8, t.b16), (8, t.b64), (4, t.b128), (3, t.b32)])
def test_refuse_vector_shape(n, ty):
    k = Kernel("k")
    p = k.ld_param(k.param_ptr("p"))
    with pytest.raises(OperandError, match="vector"):
        k.ld(p, type=ty, space="global", vec=n)
