"""tcgen05.mma and tcgen05.mma.ws: every cuda::ptx form (expanded from the headers' comments,
built as cuda::ptx calls it, compared with the header's asm text and requirement, assembled),
the kind x cta_group x variant table without the headers (the sparse and blockN forms too),
goldens with their pins, the round trip through the front end and the fuzz strategy judged by
ptxas. The refusal rules are in test_tcgen05_mma_refusals.py."""

from __future__ import annotations

import itertools
import os
import re
from collections import defaultdict

import pytest

from ptxdsl import PtxdslError, VersionError, ptx
from ptxdsl.frontend import parse_ptx
from ptxdsl.instructions.tcgen05_mma import (
    Collector,
    Kind,
    ScaleVec,
    Tcgen05Mma,
    Tcgen05MmaWs,
)
from ptxdsl.instructions.tcgen05_mma_ptx import FUNCTIONS
from ptxdsl.testing import assemble_declared
from tests.cccl_forms import asm_shapes, header_forms, needs_cccl, shape
from tests.tcgen05_mma_cases import (
    DENSE,
    VECS,
    MmaEnv,
    expected_requirement,
    mma_insn,
    round_trip,
    vec_name,
    vec_text,
)
from tests.tma_cases import Case, FormChecks, unchecked_module

HERE = os.path.abspath(__file__)
HEADERS = ("tcgen05_mma", "tcgen05_mma_ws")
FORMS = header_forms(HEADERS)


def _here(err) -> bool:
    return os.path.abspath(err.value.loc.file) == HERE



def _tag(prefix: str, spelled: str):
    """cuda::ptx's tag for a header qualifier: 'kind::f16' -> ptx.kind_f16."""
    return getattr(ptx, f"{prefix}_{spelled.split('::')[1]}")


def build_form(e: MmaEnv, form: str, name: str, q: dict) -> tuple[str, str]:
    """Call `name` as cuda::ptx calls it for this header form (enable_input_d a bool); return
    the header's text of the instruction and of the setp before it, with our operands."""
    head, _, operands = " ".join(form.split()).partition(" ")
    lanes = e.lanes(4 if q["cta_group"].endswith("1") else 8)
    values = {"[d_tmem]": e.d, "a_desc": e.a, "[a_tmem]": e.a_tmem, "b_desc": e.b,
              "idesc": e.i, "disable_output_lane": lanes, "enable_input_d": True,
              "scale_input_d": 3, "[scale_A_tmem]": e.sa, "[scale_B_tmem]": e.sb,
              "zero_column_mask_desc": e.z}
    names = [n.strip() for n in operands.split(",")]
    kind, cg = _tag("kind", q["kind"]), _tag("cta_group", q["cta_group"])
    tags = [cg, kind] if ".ws." in head else [kind, cg]
    getattr(ptx, name)(e.k, *tags, *(values[n] for n in names))
    setp = list(e.k.statements())[-2].insn
    text = {"[d_tmem]": f"[{e.d.render()}]", "[a_tmem]": f"[{e.a_tmem.render()}]",
            "[scale_A_tmem]": f"[{e.sa.render()}]", "[scale_B_tmem]": f"[{e.sb.render()}]",
            "disable_output_lane": "{" + ", ".join(r.render() for r in lanes) + "}",
            "enable_input_d": setp.p.render(), "scale_input_d": "3"}
    ops = [text.get(n) or values[n].render() for n in names]
    return f"{head} {', '.join(ops)};", f"setp.ne.b32 {setp.p.render()}, 1, 0;"


def _batches():
    """Header forms by (requirement, cta_group): ptxas refuses a kernel that mixes
    .cta_group::1 and ::2, so each group is a kernel of its own."""
    groups: dict = defaultdict(lambda: defaultdict(list))
    for form, name, q, _, _ in FORMS:
        groups[expected_requirement(form)][q["cta_group"]].append((form, name, q))
    return groups


def _req_id(r) -> str:
    return f"{r.version}-" + "-".join(f"sm_{a}" for a in sorted(r.arch_specific))


@needs_cccl
def test_header_forms_are_all_ours():
    """cuda::ptx 13.0: 128 tcgen05.mma forms and 256 tcgen05.mma.ws forms, one function of
    ptxdsl.ptx for each of the headers' 64 names."""
    assert len([f for f in FORMS if ".ws." not in f[0]]) == 128
    assert len([f for f in FORMS if ".ws." in f[0]]) == 256
    assert {name for _, name, _, _, _ in FORMS} == {f.name for f in FUNCTIONS}
    assert all(callable(getattr(ptx, f.name, None)) for f in FUNCTIONS)


@needs_cccl
@pytest.mark.parametrize("key", sorted(_batches(), key=_req_id), ids=_req_id)
def test_every_cuda_ptx_form(key):
    """Each header form emits cuda::ptx's text (the setp of enable_input_d, then the
    instruction; both of the asm templates' shapes) and needs what ptxas needs; each batch
    assembles at exactly that requirement."""
    shapes = asm_shapes(*HEADERS)
    kernels = []
    for cg, forms in sorted(_batches()[key].items()):
        e = MmaEnv(f"k_{cg[-1]}")
        for form, name, q in forms:
            want, want_setp = build_form(e, form, name, q)
            *_, setp, stmt = e.k.statements()
            assert (stmt.render(), setp.render()) == (want, want_setp), (name, q)
            assert shape(stmt.render()) in shapes and shape(setp.render()) in shapes
            assert stmt.insn.requires == key, (name, q)
        kernels.append(e.k)
    m = unchecked_module(kernels)
    text = m.emit()
    assert (m.version, m.target) == (key.version, key.min_target())
    assert assemble_declared(text)[:4] == b"\x7fELF"
    round_trip(kernels, text)


@needs_cccl
def test_every_overload_by_keyword():
    """Each overload of each function called with cuda::ptx's parameter names as keywords
    emits what the positional call emits."""
    e = MmaEnv()
    values = {"d_tmem": e.d, "a_desc": e.a, "a_tmem": e.a_tmem, "b_desc": e.b, "idesc": e.i,
              "disable_output_lane": e.lanes(4), "enable_input_d": e.p, "scale_input_d": 1,
              "scale_A_tmem": e.sa, "scale_B_tmem": e.sb, "zero_column_mask_desc": e.z,
              "cta_group": ptx.cta_group_1}
    for f in FUNCTIONS:
        fn = getattr(ptx, f.name)
        for names in f.overloads:
            args = {n: values.get(n, f.kinds[0]) for n in names}
            by_position = fn(e.k, *args.values()).render()
            assert fn(e.k, **args).render() == by_position, (f.name, names)



# -- the table, without the headers ---------------------------------------------------------------
def _legal_table():
    """(kind, cta_group, A, variant, argument, sparse, opcode) of every legal tcgen05.mma form
    (a collector usage shown for the dense kinds; it combines with every form)."""
    rows = []
    for cg, a, sp in itertools.product((1, 2), ("desc", "tmem"), (False, True)):
        head = f"tcgen05.mma{'.sp' if sp else ''}.cta_group::{cg}.kind::"
        for kind in DENSE:
            rows += [(kind, cg, a, "plain", None, sp, head + kind),
                     (kind, cg, a, "lanes", None, sp, head + kind)]
            rows += [(kind, cg, a, "collector", u, sp, f"{head}{kind}.collector::a::{u}")
                     for u in ("fill", "use", "lastuse", "discard")]
            if kind in ("f16", "tf32"):
                rows.append((kind, cg, a, "scale", None, sp, head + kind))
        for kind, vecs in VECS.items():
            rows += [(kind, cg, a, "block_scale", v, sp,
                      f"{head}{kind}.block_scale{vec_text(v)}") for v in vecs]
    return rows


LEGAL = _legal_table()


def _form(row) -> str:
    """The row's form as expected_requirement reads it."""
    return row[-1] + (" scale_input_d" if row[3] == "scale" else "")


@pytest.mark.parametrize("row", LEGAL, ids=lambda r: "-".join(str(x) for x in r[:6]))
def test_table_form_builds(row):
    kind, cg, a, variant, arg, sparse, opcode = row
    insn = mma_insn(MmaEnv(), kind, cg, a, variant, arg, sparse)
    assert insn.opcode() == opcode
    assert insn.requires == expected_requirement(_form(row))


@pytest.mark.parametrize("kind,vec", [(k, v) for k in Kind for v in (*ScaleVec, None)
                                      if k.name in DENSE or v is None
                                      or vec_name(v) not in VECS[k.name]])
def test_table_block_scale_refused(kind, vec):
    """A scale vector size the kind does not take, block scaling on a dense kind, or an mx
    kind without it (mxf4nvf4 has no default scale_vec either)."""
    e = MmaEnv()
    with pytest.raises(PtxdslError, match=r"block_scale|block-scaled|takes \.scale_vec|needs a "
                       r"scale_vec"):
        if kind.name in DENSE:
            mma_insn(e, kind.name, 1, "desc", "block_scale", vec)
        elif vec is None and kind is not Kind.mxf4nvf4:
            mma_insn(e, kind.name, 1, "desc", "plain")
        else:
            mma_insn(e, kind.name, 1, "desc", "block_scale", vec)


@pytest.mark.parametrize("kind", list(Kind), ids=lambda k: k.name)
@pytest.mark.parametrize("a", ("desc", "tmem"))
@pytest.mark.parametrize("sparse", (False, True))
def test_table_ws(kind, a, sparse):
    e = MmaEnv()
    kw = dict(kind=kind, d_tmem=e.d, b_desc=e.b, idesc=e.i, enable_input_d=e.p)
    kw.update({"a_desc": e.a} if a == "desc" else {"a_tmem": e.a_tmem})
    if sparse:
        kw["sp_meta_tmem"] = e.meta
    if kind.name not in DENSE:
        with pytest.raises(PtxdslError, match=r"tcgen05.mma.ws takes .*only"):
            Tcgen05MmaWs(**kw)
        return
    head = f"tcgen05.mma.ws{'.sp' if sparse else ''}.cta_group::1.kind::{kind.name}"
    for b, usage in itertools.product(range(4), Collector):
        insn = Tcgen05MmaWs(**kw, collector_b=b, collector=usage, zero_column_mask_desc=e.z)
        assert insn.opcode() == f"{head}.collector::b{b}::{usage.value}"
        assert insn.requires == expected_requirement(head)
    assert Tcgen05MmaWs(**kw).opcode() == head


def test_table_forms_assemble():
    """Every legal row of the table and the .ws forms (dense and sparse), one kernel per
    cta_group and one module per requirement, assembled and read back."""
    by_req: dict = defaultdict(lambda: defaultdict(list))
    for row in LEGAL:
        by_req[expected_requirement(_form(row))][row[1]].append(row)
    base = expected_requirement("tcgen05.mma.cta_group::1.kind::f16")
    for key, groups in by_req.items():
        kernels = []
        for cg, rows in sorted(groups.items()):
            e = MmaEnv(f"k{cg}")
            for kind, _, a, variant, arg, sparse, _ in rows:
                e.k.emit(mma_insn(e, kind, cg, a, variant, arg, sparse))
            if cg == 1 and key == base:
                for kind, sparse in itertools.product(("f16", "tf32", "f8f6f4"), (False, True)):
                    e.k.emit(Tcgen05MmaWs(kind=kind, d_tmem=e.d, a_tmem=e.a_tmem, b_desc=e.b,
                                          idesc=e.i, enable_input_d=~e.p, collector_b=2,
                                          collector="lastuse", zero_column_mask_desc=e.z,
                                          sp_meta_tmem=e.meta if sparse else None))
            kernels.append(e.k)
        m = unchecked_module(kernels)
        text = m.emit()
        assert (m.version, m.target) == (key.version, key.min_target())
        assert assemble_declared(text)[:4] == b"\x7fELF", key
        round_trip(kernels, text)


# -- the front end --------------------------------------------------------------------------------
def test_reader_takes_immediates_and_negation():
    """Text a compiler may write: immediate descriptors, idesc and lane masks, a negated or
    immediate enable_input_d, an offset TMEM address, no scale_vec, the sparse forms."""
    text = """.version 8.7
.target sm_100a
.address_size 64
.visible .entry k(.param .u32 p)
{
.reg .b32 %r<4>; .reg .b64 %rd<3>; .reg .pred %p<2>;
ld.param.u32 %r1, [p];
setp.ne.b32 %p1, %r1, 0;
tcgen05.mma.cta_group::1.kind::f16 [%r1], 4096, 8192, 12345, {0, 1, %r1, 2}, !%p1, 15;
tcgen05.mma.cta_group::1.kind::mxf4.block_scale.collector::a::use [%r1+16], [%r1], 64, %r1,
    [%r1], [%r1], 1;
tcgen05.mma.ws.cta_group::1.kind::i8 [%r1], [%r1], 64, %r1, %p1, 0;
tcgen05.mma.sp.cta_group::1.kind::tf32 [%r1], 128, 64, [%r1+8], %r1, %p1;
tcgen05.mma.ws.sp.cta_group::1.kind::f16.collector::b0::fill [%r1], [%r1], 64, [%r1], %r1, %p1;
ret;
}
"""
    body = parse_ptx(text).function("k").body
    insns = [s.insn for s in body if type(getattr(s, "insn", None)) in (Tcgen05Mma,
                                                                         Tcgen05MmaWs)]
    assert len(insns) == 5
    assert insns[0].scale_input_d == 15 and insns[1].scale_vec is None
    assert [i.sparse for i in insns] == [False, False, False, True, True]
    assert [i.render() for i in insns] == [" ".join(m.split())
                                           for m in re.findall(r"^tcgen05\.mma[^;]*;", text,
                                                               re.M)]
    assert assemble_declared(text)[:4] == b"\x7fELF"


# -- goldens and pins -----------------------------------------------------------------------------
def C(id, fn, version="8.6", target="sm_100a"):
    return Case(id, fn, version, target)


def _emit(e, insn):
    return e.k.emit(insn)


def _vec2_tmem_a_fill(e):
    """cuda::ptx's 2X TMEM-A name, which has no x (and a descriptor for A)."""
    fn = ptx.tcgen05_mma_block_scale_vec_2_tmem_a_collector_a_fill
    return fn(e.k, ptx.kind_mxf4, ptx.cta_group_1, e.d, e.a, e.b, e.i, e.sa, e.sb, True)


GROUPS: dict[str, list[Case]] = {
    "tcgen05_mma/mma": [
        C("f16-desc", lambda e: ptx.tcgen05_mma(e.k, ptx.kind_f16, ptx.cta_group_1, e.d, e.a,
                                                e.b, e.i, True)),
        C("tf32-lanes", lambda e: ptx.tcgen05_mma(e.k, ptx.kind_tf32, ptx.cta_group_1, e.d,
                                                  e.a, e.b, e.i, e.lanes(4), e.p)),
        C("i8-tmem-a", lambda e: ptx.tcgen05_mma_tmem_a(e.k, "kind_i8", 1, e.d, e.a_tmem, e.b,
                                                        e.i, ~e.p)),
        C("f8f6f4-collector", lambda e: _emit(e, Tcgen05Mma(
            kind="f8f6f4", d_tmem=e.d, a_desc=e.a, b_desc=e.b, idesc=0x1234, enable_input_d=0,
            collector="fill"))),
        C("enable-from-u32", lambda e: ptx.tcgen05_mma(e.k, ptx.kind_f16, ptx.cta_group_1,
                                                       e.d, e.a, e.b, e.i, e.i)),
    ],
    "tcgen05_mma/cta_group_2": [
        C("f16-lanes8", lambda e: ptx.tcgen05_mma(e.k, ptx.kind_f16, ptx.cta_group_2, e.d, e.a,
                                                  e.b, e.i, e.lanes(8), False)),
        C("f8f6f4-tmem-a", lambda e: ptx.tcgen05_mma_tmem_a(e.k, ptx.kind_f8f6f4,
                                                            ptx.cta_group_2, e.d, e.a_tmem,
                                                            e.b, e.i, True)),
        C("mxf8f6f4-1x-use", lambda e: ptx.tcgen05_mma_block_scale_vec_1x_collector_a_use(
            e.k, ptx.kind_mxf8f6f4, ptx.cta_group_2, e.d, e.a, e.b, e.i, e.sa, e.sb, e.p)),
    ],
    "tcgen05_mma/scale_input_d": [
        C("f16-lanes-scale", lambda e: ptx.tcgen05_mma(e.k, ptx.kind_f16, ptx.cta_group_1,
                                                       e.d, e.a, e.b, e.i, e.lanes(4), True,
                                                       15)),
        C("tf32-tmem-a-scale", lambda e: ptx.tcgen05_mma_tmem_a(
            e.k, ptx.kind_tf32, ptx.cta_group_1, e.d, e.a_tmem, e.b, e.i, e.p, 0)),
    ],
    "tcgen05_mma/block_scale": [
        C("mxf8f6f4-1x", lambda e: ptx.tcgen05_mma_block_scale_vec_1x(
            e.k, ptx.kind_mxf8f6f4, ptx.cta_group_1, e.d, e.a, e.b, e.i, e.sa, e.sb, True)),
        C("mxf4-2x-tmem-a-name", lambda e: _vec2_tmem_a_fill(e)),
        C("mxf4-default-vec-tmem-a", lambda e: _emit(e, Tcgen05Mma(
            kind=Kind.mxf4, d_tmem=e.d, a_tmem=e.a_tmem, b_desc=e.b, idesc=e.i,
            enable_input_d=e.p, scale_A_tmem=e.sa, scale_B_tmem=e.sb))),
    ],
    "tcgen05_mma/mxf4nvf4": [
        C("2x", lambda e: ptx.tcgen05_mma_block_scale_vec_2x(
            e.k, ptx.kind_mxf4nvf4, ptx.cta_group_1, e.d, e.a, e.b, e.i, e.sa, e.sb, e.p),
          "8.7"),
        C("4x-lastuse", lambda e: ptx.tcgen05_mma_block_scale_vec_4x_collector_a_lastuse(
            e.k, ptx.kind_mxf4nvf4, ptx.cta_group_1, e.d, e.a, e.b, e.i, e.sa, e.sb, True),
          "8.7"),
    ],
    "tcgen05_mma/ws": [
        C("b0-fill-zero-mask", lambda e: ptx.tcgen05_mma_ws_collector_b0_fill(
            e.k, ptx.cta_group_1, ptx.kind_f16, e.d, e.a, e.b, e.i, True, e.z)),
        C("tmem-a-b3-discard", lambda e: ptx.tcgen05_mma_ws_tmem_a_collector_b3_discard(
            e.k, ptx.cta_group_1, ptx.kind_i8, e.d, e.a_tmem, e.b, e.i, e.p)),
        C("no-collector", lambda e: _emit(e, Tcgen05MmaWs(
            kind="tf32", d_tmem=e.d, a_desc=e.a, b_desc=e.b, idesc=e.i, enable_input_d=e.p))),
    ],
    "tcgen05_mma/sparse": [
        C("f16-lanes", lambda e: _emit(e, Tcgen05Mma(
            kind="f16", d_tmem=e.d, a_desc=e.a, b_desc=e.b, sp_meta_tmem=e.meta, idesc=e.i,
            enable_input_d=e.p, disable_output_lane=e.lanes(4)))),
        C("mxf8f6f4-tmem-a", lambda e: _emit(e, Tcgen05Mma(
            kind="mxf8f6f4", d_tmem=e.d, a_tmem=e.a_tmem, b_desc=e.b, sp_meta_tmem=e.meta,
            idesc=e.i, enable_input_d=e.p, scale_A_tmem=e.sa, scale_B_tmem=e.sb,
            collector="lastuse"))),
        C("ws-i8-b1-use", lambda e: _emit(e, Tcgen05MmaWs(
            kind="i8", d_tmem=e.d, a_desc=e.a, b_desc=e.b, sp_meta_tmem=e.meta, idesc=e.i,
            enable_input_d=e.p, collector_b=1, collector="use", zero_column_mask_desc=e.z))),
    ],
    "tcgen05_mma/block_n": [
        C("mxf4nvf4-block16", lambda e: _emit(e, Tcgen05Mma(
            kind="mxf4nvf4", d_tmem=e.d, a_desc=e.a, b_desc=e.b, idesc=e.i, enable_input_d=e.p,
            scale_vec="block16", scale_A_tmem=e.sa, scale_B_tmem=e.sb)), "8.8"),
        C("mxf4-block32-sparse-fill", lambda e: _emit(e, Tcgen05Mma(
            kind="mxf4", d_tmem=e.d, a_desc=e.a, b_desc=e.b, sp_meta_tmem=e.meta, idesc=e.i,
            enable_input_d=e.p, scale_vec=ScaleVec.block32, scale_A_tmem=e.sa,
            scale_B_tmem=e.sb, collector=Collector.fill)), "8.8"),
    ],
}


class TestForms(FormChecks):
    GROUPS = GROUPS
    ENV = MmaEnv


@pytest.mark.parametrize("target,version,call", [
    ("sm_103a", "8.8", lambda e: ptx.tcgen05_mma(e.k, ptx.kind_i8, 1, e.d, e.a, e.b, e.i, e.p)),
    ("sm_100f", "8.8", lambda e: ptx.tcgen05_mma_ws_collector_b0_use(
        e.k, 1, ptx.kind_i8, e.d, e.a, e.b, e.i, e.p)),
    ("sm_110f", "9.0", lambda e: ptx.tcgen05_mma_block_scale_vec_2x(
        e.k, ptx.kind_mxf4, 1, e.d, e.a, e.b, e.i, e.sa, e.sb, e.p)),
    ("sm_103f", "8.8", lambda e: e.k.emit(Tcgen05Mma(
        kind="mxf4", d_tmem=e.d, a_desc=e.a, b_desc=e.b, sp_meta_tmem=e.meta, idesc=e.i,
        enable_input_d=e.p, scale_A_tmem=e.sa, scale_B_tmem=e.sb)))])
def test_target_refused_by_ptxas(target, version, call):
    """.kind::i8 needs an sm_100a/sm_110a target; .scale_vec, and .sp with mxf4/mxf4nvf4, an
    a target, not an f one."""
    e = MmaEnv(target=target, version=version)
    call(e)
    with pytest.raises(VersionError, match=f"pinned to .target {target}"):
        e.module().emit()


@pytest.mark.parametrize("target,version", [("sm_100f", "8.8"), ("sm_103a", "8.8"),
                                            ("sm_110f", "9.0")])
def test_family_targets_take_the_other_forms(target, version):
    e = MmaEnv(target=target, version=version)
    ptx.tcgen05_mma(e.k, ptx.kind_f8f6f4, 1, e.d, e.a, e.b, e.i, e.p)
    e.k.emit(Tcgen05Mma(kind="mxf4", d_tmem=e.d, a_desc=e.a, b_desc=e.b, idesc=e.i,
                        enable_input_d=e.p, scale_A_tmem=e.sa, scale_B_tmem=e.sb))
    ptx.tcgen05_mma_ws_tmem_a_collector_b2_lastuse(e.k, 1, ptx.kind_tf32, e.d, e.a_tmem, e.b,
                                                   e.i, e.p, e.z)
    e.k.emit(Tcgen05Mma(kind="mxf4nvf4", d_tmem=e.d, a_desc=e.a, b_desc=e.b, idesc=e.i,
                        enable_input_d=e.p, scale_vec="block32", scale_A_tmem=e.sa,
                        scale_B_tmem=e.sb, sp_meta_tmem=None))
    e.k.emit(Tcgen05Mma(kind="f8f6f4", d_tmem=e.d, a_desc=e.a, b_desc=e.b, idesc=e.i,
                        enable_input_d=e.p, sp_meta_tmem=e.meta))
    assert assemble_declared(e.module().emit())[:4] == b"\x7fELF"


def test_scale_input_d_is_refused_on_sm_110a():
    e = MmaEnv(target="sm_110a", version="9.0")
    ptx.tcgen05_mma(e.k, ptx.kind_f16, ptx.cta_group_1, e.d, e.a, e.b, e.i, True, 1)
    with pytest.raises(VersionError, match="pinned to .target sm_110a"):
        e.module().emit()


def test_a_kernel_may_take_sm_110a_without_scale_input_d():
    e = MmaEnv(target="sm_110a", version="9.0")
    ptx.tcgen05_mma(e.k, ptx.kind_f16, ptx.cta_group_1, e.d, e.a, e.b, e.i, True)
    assert assemble_declared(e.module().emit())[:4] == b"\x7fELF"


# -- fuzzed against ptxas -------------------------------------------------------------------------
def test_builder_agrees_with_ptxas():
    from hypothesis import seed

    from tests.test_fuzz_tma import fuzz_test
    seed(35)(fuzz_test("tcgen05_mma"))()


def test_a_tmem_check_switched_off_is_a_disagreement(monkeypatch):
    """The oracle catches the declared-.b32 rule of the TMEM operands switched off."""
    from ptxdsl import fuzz
    from ptxdsl.fuzz import R, case
    from ptxdsl.instructions import tcgen05_mma

    c = case("tcgen05_mma", "ptx.tcgen05_mma", ("kind_f16", "cta_group_1", R("u32", idx=1),
                                                  R("b64", idx=3), R("b64", idx=4),
                                                  R("b32", idx=5), R("pred")), None,
             "tcgen05.mma.cta_group::1.kind::f16 [%x_u32_1], %x_b64_3, %x_b64_4, %x_b32_5, "
             "%x_pred;")
    assert [o.verdict for o in fuzz.check([c]).outcomes] == ["refused:ptxas"]
    monkeypatch.setattr(tcgen05_mma, "declared_type", lambda r: "b32")
    assert [o.verdict for o in fuzz.check([c]).outcomes] == ["accepted:rejected"]


def test_fuzz_draws_read_back():
    """Every call the fuzz strategy draws that the builder accepts reads back typed."""
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    from ptxdsl import Kernel, fuzz
    from ptxdsl.fuzz.oracle import build

    seen = []

    @settings(max_examples=20, derandomize=True, deadline=None,
              suppress_health_check=list(HealthCheck))
    @given(st.lists(fuzz.strategies["tcgen05_mma"], min_size=20, max_size=20))
    def run(cases):
        kernels = [k for i, c in enumerate(cases) if isinstance(k := build(i, c), Kernel)]
        if kernels:
            round_trip(kernels, unchecked_module(kernels).emit())
            seen.extend(kernels)

    run()
    assert len(seen) > 100
