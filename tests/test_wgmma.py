"""wgmma.mma_async (dense and sparse), wgmma.fence/commit_group/wait_group: goldens per family
and operand kind at the inferred minimum, pin-below tests, every legal sm_90a form assembled
with nvJitLink, and one refusal test per rule."""

from __future__ import annotations

import collections

import pytest

from ptxdsl import BuildError, Kernel, OperandError, VersionError, ptx, t
from ptxdsl.instructions.wgmma import INT_N, WgmmaMmaAsync
from ptxdsl.instructions.wgmma_desc import SmemLayout, descriptor
from ptxdsl.testing import assemble_declared
from tests.tma_cases import Case, FormChecks, build
from tests.wgmma_cases import WEnv, all_forms

SM = "sm_90a"


def C(id, fn, version="8.0"):
    return Case(id, fn, version, SM)


def mma(**kw):
    """A dense wgmma case builder: SS unless a='rs'; d from the env's accumulators."""
    def build(e, kw=kw):
        kw = dict(kw)
        n, dtype = kw.pop("n", 8), kw.pop("dtype", t.f32)
        a = e.a_regs if kw.pop("a", "ss") == "rs" else e.desc_a
        scale_d = kw.pop("scale_d", e.p)
        if isinstance(scale_d, str):
            scale_d = ~e.p
        return ptx.wgmma_mma_async(e.k, e.acc(n, dtype), a, e.desc_b, scale_d, **kw)
    return build


def mma_sp(**kw):
    def build(e, kw=kw):
        kw = dict(kw)
        n, dtype = kw.pop("n", 8), kw.pop("dtype", t.f32)
        a = e.a_regs if kw.pop("a", "ss") == "rs" else e.desc_a
        sel = kw.pop("sp_sel", 0)
        return ptx.wgmma_mma_async_sp(e.k, e.acc(n, dtype), a, e.desc_b, e.meta, sel, e.p,
                                      **kw)
    return build


GROUPS: dict[str, list[Case]] = {
    "wgmma/ss_f16_bf16": [
        C("f16-f16acc", mma(atype="f16", dtype=t.f16)),
        C("f16-f32acc-trans", mma(atype="f16", tnspA=1, tnspB=1)),
        C("f16-negate", mma(atype="f16", imm_scale_a=-1, imm_scale_b=-1)),
        C("bf16-n64", mma(atype="bf16", n=64)),
        C("bf16-n256", mma(atype="bf16", n=256)),
        C("bf16-scale-d-0", mma(atype="bf16", scale_d=0)),
        C("bf16-scale-d-not-p", mma(atype="bf16", scale_d="~p")),
    ],
    "wgmma/rs": [
        C("rs-f16", mma(a="rs", atype="f16", dtype=t.f16, tnspB=1)),
        C("rs-bf16", mma(a="rs", atype="bf16", n=16, imm_scale_a=-1)),
        C("rs-tf32", mma(a="rs", atype="tf32")),
        C("rs-e5m2", mma(a="rs", atype="e5m2", btype="e4m3", dtype=t.f16)),
        C("rs-s8", mma(a="rs", atype="s8", dtype=t.s32)),
        C("rs-b1", mma(a="rs", atype="b1", dtype=t.s32)),
    ],
    "wgmma/tf32_fp8": [
        C("tf32", mma(atype="tf32", n=24, imm_scale_b=-1)),
        *(C(f"{a}.{b}-{d.value}", mma(atype=a, btype=b, dtype=d))
          for a in ("e4m3", "e5m2") for b in ("e4m3", "e5m2") for d in (t.f16, t.f32)),
    ],
    "wgmma/integer": [
        C("s8", mma(atype="s8", dtype=t.s32)),
        C("u8-sat", mma(atype="u8", dtype=t.s32, satfinite=True, n=24)),
        C("b1", mma(atype="b1", dtype=t.s32, n=256)),
    ],
    "wgmma/integer_mixed": [
        C("s8.u8", mma(atype="s8", btype="u8", dtype=t.s32), "8.4"),
        C("u8.s8-sat", mma(atype="u8", btype="s8", dtype=t.s32, satfinite=True), "8.4"),
        C("sp-u8.s8", mma_sp(atype="u8", btype="s8", dtype=t.s32), "8.4"),
    ],
    "wgmma/sparse": [
        C("sp-f16", mma_sp(atype="f16", sp_sel=1, tnspA=1), "8.2"),
        C("sp-bf16-rs", mma_sp(a="rs", atype="bf16", tnspB=1), "8.2"),
        C("sp-tf32", mma_sp(atype="tf32", sp_sel=1), "8.2"),
        C("sp-e4m3", mma_sp(atype="e4m3", btype="e5m2", dtype=t.f16), "8.2"),
        C("sp-s8-sat", mma_sp(atype="s8", dtype=t.s32, satfinite=True), "8.2"),
    ],
    "wgmma/sync": [
        C("fence", lambda e: ptx.wgmma_fence(e.k)),
        C("commit", lambda e: ptx.wgmma_commit_group(e.k)),
        *(C(f"wait-{n}", lambda e, n=n: ptx.wgmma_wait_group(e.k, n)) for n in range(8)),
    ],
}


class TestForms(FormChecks):
    GROUPS = GROUPS
    ENV = WEnv


def test_text():
    e = WEnv()
    ptx.wgmma_fence(e.k)
    ptx.wgmma_mma_async(e.k, e.acc(8), e.desc_a, e.desc_b, atype="bf16")
    ptx.wgmma_mma_async(e.k, e.acc(16, t.f16), e.a_regs, e.desc_b, 0, -1, 1, None, 1,
                        atype="f16")
    ptx.wgmma_commit_group(e.k)
    ptx.wgmma_wait_group(e.k, 1)
    got = [s.render() for s in e.k.statements() if s.render().startswith("wgmma")]
    assert got == [
        "wgmma.fence.sync.aligned;",
        "wgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16 {%f1, %f2, %f3, %f4}, %rd1, %rd2,"
        " 1, 1, 1, 0, 0;",
        "wgmma.mma_async.sync.aligned.m64n16k16.f16.f16.f16 {%r1, %r2, %r3, %r4}, "
        "{%r65, %r66, %r67, %r68}, %rd2, 0, -1, 1, 1;",
        "wgmma.commit_group.sync.aligned;",
        "wgmma.wait_group.sync.aligned 1;"]


def test_shape_and_fields():
    e = WEnv()
    i = ptx.wgmma_mma_async(e.k, e.acc(128), e.desc_a, e.desc_b, atype="bf16")
    assert isinstance(i, WgmmaMmaAsync)
    assert (i.shape, i.n, i.k, i.rs, len(i.d)) == ("m64n128k16", 128, 16, False, 64)
    s = ptx.wgmma_mma_async_sp(e.k, e.acc(64, t.s32), e.desc_a, e.desc_b, e.meta,
                               atype="s8")
    assert (s.shape, s.dtype) == ("m64n64k64", t.s32)
    descriptor = 0x4000_0040_0040_0001
    c = ptx.wgmma_mma_async(e.k, e.acc(8), descriptor, descriptor, atype="tf32")
    assert c.render().endswith(f"{descriptor}, {descriptor}, 1, 1, 1;")


# -- every legal form, assembled -----------------------------------------------------------------
FORMS = list(all_forms())


def test_form_census():
    """The enumeration is the ISA's: 32 N values (16-bit, tf32, fp8), 18 for integer and b1."""
    count = collections.Counter((f.sparse, f.atype.value) for f in FORMS)
    assert count[False, "f16"] == 32 * 2 * 2
    assert count[False, "bf16"] == count[False, "tf32"] == 32 * 2
    assert count[False, "e4m3"] == 2 * 2 * 32 * 2
    assert count[False, "s8"] == 2 * 18 * 2 * 2 and len(INT_N) == 18
    assert count[False, "b1"] == 18 * 2 and (True, "b1") not in count
    assert len(FORMS) == 2148


def test_every_form_assembles():
    """Every form at its inferred minimum version, one module per version, for nvJitLink."""
    by_version = collections.defaultdict(list)
    for f in FORMS:
        e = WEnv()
        by_version[str(f.build(e).requires.version)].append(f)
    assert sorted(by_version) == ["8.0", "8.2", "8.4"]
    for version, forms in by_version.items():
        e = WEnv(f"all_{version.replace('.', '_')}")
        for f in forms:
            f.build(e)
        m = e.module()
        assert (str(m.version), str(m.target)) == (version, SM)
        assert assemble_declared(m.emit())[:4] == b"\x7fELF", version


@pytest.mark.parametrize("form", [f for f in FORMS if f.n in (8, 256)], ids=lambda f: f.id)
def test_each_form_renders_its_qualifiers(form):
    e = WEnv()
    insn = form.build(e)
    head = insn.render().split(" ", 1)[0]
    sp = ".sp" if form.sparse else ""
    k = {"f16": 16, "bf16": 16, "tf32": 8, "b1": 256}.get(form.atype.value, 32)
    k *= 2 if form.sparse else 1
    assert head.startswith(f"wgmma.mma_async{sp}.sync.aligned.m64n{form.n}k{k}."
                           f"{form.dtype.value}.{form.atype.value}.{form.btype.value}")


def test_pin_below_wgmma_target():
    m = build([GROUPS["wgmma/sync"][0]], env=WEnv, version="8.6", target="sm_100a")
    with pytest.raises(VersionError, match="pinned to .target sm_100a"):
        m.emit()


# -- refusals: one per rule -----------------------------------------------------------------------
def refused(exc, match, **kw):
    with pytest.raises(exc, match=match):
        mma(**kw)(WEnv())


def test_refuse_bf16_f16_accumulator():
    refused(BuildError, r"\.bf16 inputs accumulate in \.f32 only \(got \.f16\)", atype="bf16",
            dtype=t.f16)


def test_refuse_integer_float_accumulator():
    refused(BuildError, r"\.s8 inputs accumulate in \.s32 only", atype="s8", dtype=t.f32)


def test_refuse_n_not_multiple_of_8():
    with pytest.raises(BuildError, match=r"N must be 8..256 in steps of 8 for f16 inputs"):
        e = WEnv()
        ptx.wgmma_mma_async(e.k, e.acc(8), e.desc_a, e.desc_b, atype="f16", n=12)


@pytest.mark.parametrize("atype", ["s8", "b1"])
def test_refuse_integer_n(atype):
    refused(BuildError, r"N must be 8, 16, 24 or a multiple of 16 up to 256 for "
            r"(integer|b1) inputs \(got 40\)", atype=atype, dtype=t.s32, n=40)


def test_refuse_wrong_accumulator_count():
    e = WEnv()
    with pytest.raises(OperandError, match=r"expected 8 accumulator registers of \.f32 "
                       r"\(m64n16, \.f32\), got 4 registers"):
        ptx.wgmma_mma_async(e.k, e.acc(8), e.desc_a, e.desc_b, atype="bf16", n=16)


def test_refuse_accumulator_type():
    e = WEnv()
    with pytest.raises(OperandError, match=r"d\[0\].*a register compatible with \.f32"):
        ptx.wgmma_mma_async(e.k, e.acc(8, t.s32), e.desc_a, e.desc_b, atype="bf16",
                            dtype=t.f32)


@pytest.mark.parametrize("atype,dtype", [("tf32", t.f32), ("e4m3", t.f32), ("s8", t.s32),
                                         ("b1", t.s32)])
def test_refuse_transpose(atype, dtype):
    refused(BuildError, r"inputs take no transpose \(imm-trans-a/imm-trans-b exist for "
            r"\.f16/\.bf16 only", atype=atype, dtype=dtype, tnspB=1)


@pytest.mark.parametrize("atype", ["s8", "u8", "b1"])
def test_refuse_scale_on_integer_types(atype):
    refused(BuildError, r"inputs take no imm-scale-a/imm-scale-b", atype=atype, dtype=t.s32,
            imm_scale_a=-1)


def test_refuse_rs_with_transposed_a():
    refused(BuildError, r"A from registers takes no imm-trans-a", a="rs", atype="bf16", tnspA=1)


def test_refuse_scale_not_plus_minus_one():
    refused(BuildError, r"imm-scale-b must be 1 or -1", atype="f16", imm_scale_b=0)
    refused(OperandError, r"imm_scale_a.*an integer immediate in \[-1, 1\]", atype="f16",
            imm_scale_a=2)


def test_refuse_transpose_not_bit():
    refused(OperandError, r"tnspA.*an integer immediate in \[0, 1\]", atype="f16", tnspA=2)


def test_refuse_satfinite_on_float():
    refused(BuildError, r"\.satfinite applies to the s8/u8 forms only", atype="e4m3",
            satfinite=True)


def test_refuse_mixed_float_pair():
    refused(BuildError, r"atype \.f16 pairs with btype \.f16 only \(got \.bf16\)", atype="f16",
            btype="bf16")
    refused(BuildError, r"atype \.e4m3 pairs with btype \.e4m3 or \.e5m2 only", atype="e4m3",
            btype="s8")


def test_refuse_unknown_type():
    refused(OperandError, r"atype.*one of 'f16', 'bf16'", atype="f64")


def test_refuse_scale_d_not_predicate():
    e = WEnv()
    with pytest.raises(OperandError, match=r"scale_d.*a \.pred register"):
        ptx.wgmma_mma_async(e.k, e.acc(8), e.desc_a, e.desc_b, e.meta, atype="bf16")
    with pytest.raises(OperandError, match=r"scale_d.*an integer immediate in \[0, 1\]"):
        ptx.wgmma_mma_async(e.k, e.acc(8), e.desc_a, e.desc_b, 2, atype="bf16")


def test_refuse_descriptor_not_64_bit():
    e = WEnv()
    with pytest.raises(OperandError, match=r"b_desc.*a 64-bit register holding a matrix "
                       r"descriptor"):
        ptx.wgmma_mma_async(e.k, e.acc(8), e.desc_a, e.meta, atype="bf16")
    with pytest.raises(OperandError, match=r"'a'.*a 64-bit register"):
        ptx.wgmma_mma_async(e.k, e.acc(8), e.meta, e.desc_b, atype="bf16")


def test_refuse_a_fragment_size():
    e = WEnv()
    with pytest.raises(OperandError, match=r"expected 4 32-bit registers holding A's fragment"):
        ptx.wgmma_mma_async(e.k, e.acc(8), e.a_regs[:2], e.desc_b, atype="bf16")


def test_refuse_rs_float_registers():
    """ptxas 13.0 refuses .f32 registers as A's fragment of every floating-point type (tf32
    too); the integer forms take them."""
    e = WEnv()
    f32 = [e.k.reg(t.f32) for _ in range(4)]
    for atype in ("f16", "bf16", "tf32", "e4m3"):
        with pytest.raises(OperandError, match=r"operand 'a'.*move \.f32 values in with "
                           r"mov\.b32, got a \.f32 register"):
            ptx.wgmma_mma_async(e.k, e.acc(8), f32, e.desc_b, atype=atype)
    ptx.wgmma_mma_async(e.k, e.acc(8, t.s32), f32, e.desc_b, atype="s8")


def test_refuse_accumulator_count_of_no_tile():
    e = WEnv()
    regs = [e.k.reg(t.f16x2) for _ in range(15)]
    with pytest.raises(OperandError, match=r"operand 'd'.*N/4 of them.*got 15 registers"):
        ptx.wgmma_mma_async(e.k, regs, e.desc_a, e.desc_b, atype="f16", dtype=t.f16)


def _tiles(k, a_major="K", b_major="K", dtype=t.f16):
    sa = k.shared_array(t.b8, 8192, align=1024, name="sa")
    sb = k.shared_array(t.b8, 8192, align=1024, name="sb")
    return (descriptor(k, SmemLayout(dtype, 64, 64, a_major), sa),
            descriptor(k, SmemLayout(dtype, 64, 64, b_major), sb))


def test_descriptor_layout_sets_the_transpose():
    """An MN-major MatrixDescriptor means imm-trans 1; left out, the flag follows the layout."""
    k = Kernel("k")
    da, db = _tiles(k, "MN", "MN")
    acc = k.fragment(t.f32, (64, 64))
    insn = ptx.wgmma_mma_async(k, acc, da, db, atype="f16")
    assert (insn.tnspA, insn.tnspB) == (1, 1)
    assert insn.render().endswith(", 1, 1, 1, 1, 1;")
    k = Kernel("k2")
    da, db = _tiles(k, "K", "MN", dtype=t.bf16)    # an f16 tile read as bf16 is refused
    insn = ptx.wgmma_mma_async(k, k.fragment(t.f32, (64, 64)), da, db, atype="bf16")
    assert (insn.tnspA, insn.tnspB) == (None, 1)
    assert insn.render().endswith(", 1, 1, 1, 0, 1;")


def test_refuse_transpose_against_the_layout():
    k = Kernel("k")
    da, db = _tiles(k, "K", "MN")
    acc = k.fragment(t.f32, (64, 64))
    with pytest.raises(OperandError, match=r"operand 'tnspB': expected 1 for a descriptor of "
                       r"a 64x64 16-bit MN-major.*got 0"):
        ptx.wgmma_mma_async(k, acc, da, db, tnspB=0, atype="f16")
    with pytest.raises(OperandError, match=r"operand 'tnspA': expected 0 .*K-major.*got 1"):
        ptx.wgmma_mma_async(k, acc, da, db, tnspA=1, atype="f16")


def test_refuse_descriptor_of_another_width():
    k = Kernel("k")
    da, db = _tiles(k)
    acc = k.fragment(t.f32, (64, 64))
    with pytest.raises(OperandError, match=r"operand 'a': expected a descriptor of a tile of "
                       r"8-bit elements \(\.e4m3 inputs\), got a descriptor of a 64x64 16-bit"):
        ptx.wgmma_mma_async(k, acc, da, db, atype="e4m3")
    with pytest.raises(OperandError, match=r"operand 'b_desc': .*32-bit elements"):
        ptx.wgmma_mma_async(k, acc, k.ld_param(k.param(t.u64, "bare")), db, atype="tf32")


def test_refuse_a_fragment_of_another_type():
    k = Kernel("k")
    _, db = _tiles(k)
    acc = k.fragment(t.f32, (64, 64))
    with pytest.raises(OperandError, match=r"operand 'a': expected A's fragment of \.f16 "
                       r"values \(atype\), got a fragment of \.bf16 values"):
        ptx.wgmma_mma_async(k, acc, k.a_fragment(t.bf16), db, atype="f16")
    packed = k.fragment(t.f32, (64, 16)).to_packed(t.bf16)
    ptx.wgmma_mma_async(k, acc, k.a_fragment(t.f16), db, atype="f16")
    db16 = descriptor(k, SmemLayout(t.bf16, 64, 64), k.shared_array(t.b8, 8192, align=1024))
    ptx.wgmma_mma_async(k, acc, packed.a_operand(0), db16, atype="bf16")


def test_refuse_wait_group_out_of_range():
    e = WEnv()
    with pytest.raises(OperandError, match=r"an integer immediate in \[0, 7\]"):
        ptx.wgmma_wait_group(e.k, 8)
    with pytest.raises(OperandError, match=r"a register is not allowed here"):
        ptx.wgmma_wait_group(e.k, e.meta)


def test_refuse_sparse_b1():
    e = WEnv()
    with pytest.raises(BuildError, match=r"b1 has no sparse form"):
        ptx.wgmma_mma_async_sp(e.k, e.acc(8, t.s32), e.desc_a, e.desc_b, e.meta, atype="b1")


@pytest.mark.parametrize("atype,dtype,hi", [("bf16", t.f32, 1), ("tf32", t.f32, 1),
                                            ("e4m3", t.f32, 0), ("s8", t.s32, 0)])
def test_refuse_sparse_selector(atype, dtype, hi):
    e = WEnv()
    with pytest.raises(OperandError, match=rf"sp_sel.*an integer immediate in \[0, {hi}\]"):
        ptx.wgmma_mma_async_sp(e.k, e.acc(8, dtype), e.desc_a, e.desc_b, e.meta, hi + 1,
                               atype=atype)


def test_refuse_sparse_meta_immediate():
    e = WEnv()
    with pytest.raises(OperandError, match=r"sp_meta.*a \.b32 register"):
        ptx.wgmma_mma_async_sp(e.k, e.acc(8), e.desc_a, e.desc_b, 0, atype="bf16")


# -- the forms table rows are backed by the code -------------------------------------------------
def _row_samples():
    from ptxdsl.instructions import wgmma, wgmma_sp
    s8 = dict(atype="s8", dtype=t.s32)
    samples = [
        mma(atype="f16", dtype=t.f16), mma(atype="bf16"), mma(atype="tf32"),
        mma(atype="e5m2", btype="e4m3"), mma(satfinite=True, **s8),
        mma(atype="u8", btype="s8", dtype=t.s32), mma(atype="b1", dtype=t.s32),
        lambda e: ptx.wgmma_fence(e.k), lambda e: ptx.wgmma_commit_group(e.k),
        lambda e: ptx.wgmma_wait_group(e.k, 3),
        mma_sp(atype="f16", sp_sel=1), mma_sp(atype="bf16"), mma_sp(atype="tf32"),
        mma_sp(atype="e4m3"), mma_sp(**s8), mma_sp(atype="s8", btype="u8", dtype=t.s32)]
    rows = [*wgmma.FORMS, *wgmma_sp.FORMS]
    assert len(rows) == len(samples)
    return list(zip(rows, samples, strict=True))


@pytest.mark.parametrize("row,make", _row_samples(), ids=lambda v: v[0][:60]
                         if isinstance(v, tuple) else "")
def test_forms_rows_match_the_code(row, make):
    form, requires, _note = row
    e = WEnv()
    insn = make(e)
    assert insn.requires == requires, form
    head = form.split(" ", 1)[0]
    assert insn.opcode().split(".m64n")[0] == head.split(".m64n")[0]
