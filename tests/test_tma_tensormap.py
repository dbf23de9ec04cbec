"""tensormap.replace.tile (every field, space, value kind) and tensormap.cp_fenceproxy: goldens
at each inferred minimum, pin-below tests per form, refusal rules, and the seed 002 encoder."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from ptxdsl import Addr, BuildError, Kernel, Module, OperandError, VersionError, ptx, t
from ptxdsl.instructions.tensormap import (
    Field,
    TensormapCpFenceproxy,
    TensormapReplace,
    TensormapReplaceDim,
)
from ptxdsl.instructions.tensormap_values import Elemtype, elemtype_from_driver
from ptxdsl.testing import assemble_declared
from tests.tma_cases import Case, Env, FormChecks

SS, GL, GEN = "shared::cta", "global", "generic"


def C(id, fn, version="8.3", target="sm_90a"):
    return Case(id, fn, version, target)


def _addr(e, where):
    return getattr(e, {"sym": "smap", "r32": "smap32", "r64": "smap64", GL: "gglobal",
                       GEN: "gptr"}[where])


def _space(where):
    return {"sym": SS, "r32": SS, "r64": SS, GL: GL, GEN: GEN}[where]


def field_cases(where):
    """One instruction per field (and per value kind) with the map at `where`."""
    a = lambda e: _addr(e, where)   # noqa: E731
    sp = _space(where)
    return [
        C(f"{where}-global_address-reg", lambda e: ptx.tensormap_replace_global_address(
            e.k, sp, a(e), e.v64)),
        C(f"{where}-global_address-imm", lambda e: ptx.tensormap_replace_global_address(
            e.k, sp, a(e), 0x10000)),
        C(f"{where}-rank", lambda e: ptx.tensormap_replace_rank(e.k, sp, a(e), rank=2)),
        C(f"{where}-rank-reg", lambda e: ptx.tensormap_replace_rank(e.k, sp, a(e), e.v32)),
        C(f"{where}-box_dim", lambda e: ptx.tensormap_replace_box_dim(e.k, sp, a(e), 1, 64)),
        C(f"{where}-global_dim", lambda e: ptx.tensormap_replace_global_dim(
            e.k, sp, a(e), 2, e.v32)),
        C(f"{where}-global_stride", lambda e: ptx.tensormap_replace_global_stride(
            e.k, sp, a(e), 3, e.v64)),
        C(f"{where}-element_stride", lambda e: ptx.tensormap_replace_element_stride(
            e.k, sp, a(e), 4, 2)),
        C(f"{where}-elemtype", lambda e: ptx.tensormap_replace_elemtype(
            e.k, sp, a(e), "bf16")),
        C(f"{where}-interleave_layout", lambda e: ptx.tensormap_replace_interleave_layout(
            e.k, sp, a(e), "16B")),
        C(f"{where}-swizzle_mode", lambda e: ptx.tensormap_replace_swizzle_mode(
            e.k, sp, a(e), "128B")),
        C(f"{where}-fill_mode", lambda e: ptx.tensormap_replace_fill_mode(
            e.k, sp, a(e), "nan")),
    ]


def _each_ord(fn_name, value):
    fn = getattr(ptx, fn_name)
    hi = 4 if fn_name != "tensormap_replace_global_stride" else 3
    return [C(f"{fn_name[18:]}-ord{o}", lambda e, o=o: fn(e.k, SS, e.smap, o, value))
            for o in range(hi + 1)]


def _value_cases(fn_name, values):
    fn = getattr(ptx, fn_name)
    return [C(f"{fn_name[18:]}-{v!s}", lambda e, v=v: fn(e.k, SS, e.smap, v)) for v in values]


def _driver(e, name):
    ptx.tensormap_replace_elemtype(e.k, SS, e.smap, driver_dtype=name)


GROUPS: dict[str, list[Case]] = {
    "tensormap/replace_shared_cta": [
        *field_cases("sym"), *field_cases("r32"), *field_cases("r64"),
        C("element_size-alias", lambda e: ptx.tensormap_replace_element_size(
            e.k, SS, e.smap, 0, 1)),
        C("addr-offset", lambda e: ptx.tensormap_replace_fill_mode(e.k, SS, Addr(e.smap32, 0),
                                                                   0)),
        *(C(f"rank-{r}", lambda e, r=r: ptx.tensormap_replace_rank(e.k, SS, e.smap, rank=r))
          for r in range(1, 6)),
        *_each_ord("tensormap_replace_box_dim", 256),
        *_each_ord("tensormap_replace_global_dim", (1 << 32) - 1),
        *_each_ord("tensormap_replace_global_stride", (1 << 40) - 16),
        *_each_ord("tensormap_replace_element_stride", 8),
    ],
    "tensormap/replace_global": field_cases(GL),
    "tensormap/replace_generic": [*field_cases(GEN), *(
        C(f"explicit-{c.id}", lambda e, c=c: ptx.tensormap_replace_fill_mode(
            e.k, GEN, e.gptr, 0)) for c in field_cases(GEN)[:1])],
    "tensormap/replace_values": [
        *_value_cases("tensormap_replace_elemtype", [e.ptx_name for e in Elemtype][:13]),
        *(C(f"elemtype-numpy-{d}", lambda e, d=d: ptx.tensormap_replace_elemtype(
            e.k, SS, e.smap, np.dtype(d))) for d in ("uint8", "int32", "float64", "float16")),
        *(C(f"elemtype-driver-{d}", lambda e, d=d: _driver(e, d))
          for d in ("FLOAT64", "CU_TENSOR_MAP_DATA_TYPE_BFLOAT16", 10, "TFLOAT32_FTZ")),
        *_value_cases("tensormap_replace_interleave_layout", ["none", "16B", "32B"]),
        *_value_cases("tensormap_replace_swizzle_mode", ["none", "32B", "64B", "128B"]),
        *_value_cases("tensormap_replace_fill_mode", ["zero", "nan"]),
    ],
    "tensormap/replace_swizzle_atomicity": [
        *(C(f"atomicity-{v}", lambda e, v=v: ptx.tensormap_replace_swizzle_atomicity(
            e.k, SS, e.smap, v), "8.6", "sm_100a") for v in ("16B", "32B", "32B_flip_8B", "64B")),
        C("atomicity-global", lambda e: ptx.tensormap_replace_swizzle_atomicity(
            e.k, GL, e.gglobal, 3), "8.6", "sm_100a"),
        C("atomicity-generic", lambda e: ptx.tensormap_replace_swizzle_atomicity(
            e.k, GEN, e.gptr, 1), "8.6", "sm_100a"),
    ],
    "tensormap/replace_packed_elemtype": [
        *(C(f"elemtype-{v}", lambda e, v=v: ptx.tensormap_replace_elemtype(e.k, SS, e.smap, v),
            "8.7", "sm_100a") for v in ("b4x16", "b4x16_p64", "b6x16_p32", "b6p2x16")),
        C("elemtype-driver-16U6", lambda e: _driver(e, "16U6_ALIGN16B"), "8.7", "sm_100a"),
    ],
    "tensormap/replace_swizzle_96b": [
        C(f"swizzle-96B-{w}", lambda e, w=w: ptx.tensormap_replace_swizzle_mode(
            e.k, _space(w), _addr(e, w), "96B"), "8.8", "sm_103a") for w in ("sym", GL, GEN)],
    "tensormap/cp_fenceproxy": [
        *(C(f"cp-{s}", lambda e, s=s: ptx.tensormap_cp_fenceproxy(e.k, "release", s, e.gglobal,
                                                                   e.smap, 128), "8.3", "sm_90")
          for s in ("cta", "cluster", "gpu", "sys")),
        C("cp-param-ptr", lambda e: ptx.tensormap_cp_fenceproxy(
            e.k, "release", "gpu", e.gptr_param, e.smap32),
          "8.3", "sm_90"),
        C("cp-generic-reg", lambda e: ptx.tensormap_cp_fenceproxy(
            e.k, "release", "sys", Addr(e.gptr, 128), e.smap64, 128), "8.3", "sm_90"),
        C("cp-global-symbol", lambda e: ptx.tensormap_cp_fenceproxy(
            e.k, "release", "gpu", e.gsym, e.smap),
          "8.3", "sm_90"),
    ],
}


class TestForms(FormChecks):
    GROUPS = GROUPS

    def version_for_target_pin(self, case, low):
        # Arch-specific targets newer than sm_80 need a recent .version to be named at all.
        return "9.0" if low != "sm_80" else case.version


def test_text_and_translation():
    e = Env()
    ptx.tensormap_replace_rank(e.k, SS, e.smap, rank=2)
    ptx.tensormap_replace_global_stride(e.k, SS, e.smap32, 0, 256)
    ptx.tensormap_replace_elemtype(e.k, SS, e.smap, driver_dtype="FLOAT32_FTZ")
    ptx.tensormap_cp_fenceproxy(e.k, "sem_release", "scope_gpu", e.gptr_param, e.smap)
    lines = [s.render() for s in e.k.statements()]
    assert lines == [
        "tensormap.replace.tile.rank.shared::cta.b1024.b32 [smap], 1;",
        "mov.u32 %r1, smap;",
        "tensormap.replace.tile.global_stride.shared::cta.b1024.b64 [%r1], 0, 256;",
        "tensormap.replace.tile.elemtype.shared::cta.b1024.b32 [smap], 8;",
        "ld.param.u64 %rd1, [gmap];",
        "cvta.to.global.u64 %rd2, %rd1;",
        "tensormap.cp_fenceproxy.global.shared::cta.tensormap::generic.release.gpu.sync.aligned"
        " [%rd2], [smap], 128;"]


@pytest.mark.parametrize("driver,ptx_code", [
    ("UINT8", 0), ("INT32", 3), ("FLOAT32", 7), ("FLOAT64", 9), ("BFLOAT16", 10),
    ("FLOAT32_FTZ", 8), ("TFLOAT32", 11), ("16U4_ALIGN8B", 13), ("U4X16_ALIGN16B", 14),
    (8, 9), (9, 10), (10, 8)])
def test_driver_dtype_translation(driver, ptx_code):
    assert elemtype_from_driver("t", driver) == ptx_code


def test_driver_dtype_enum_members():
    from cuda.bindings import driver as drv
    dt = drv.CUtensorMapDataType
    assert elemtype_from_driver("t", dt.CU_TENSOR_MAP_DATA_TYPE_FLOAT64) is Elemtype.f64
    assert elemtype_from_driver("t", dt.CU_TENSOR_MAP_DATA_TYPE_BFLOAT16) is Elemtype.bf16


# -- the seed 002 encoder (CUDA Programming Guide 10.30.1), line by line -----------------------
def encode_tensor_map() -> Module:
    k = Kernel("encode_tensor_map", maxntid=32)            # __launch_bounds__(32)
    template_tensor_map = k.param_tensormap("template_tensor_map")
    p_global_address = k.param(t.u64, "p_global_address")  # tensormap_params p, by field
    p_rank = k.param(t.u32, "p_rank")
    p_box_dim = [k.param(t.u32, f"p_box_dim{i}") for i in range(5)]
    p_global_dim = [k.param(t.u64, f"p_global_dim{i}") for i in range(5)]
    p_global_stride = [k.param(t.u64, f"p_global_stride{i}") for i in range(4)]
    p_element_stride = [k.param(t.u32, f"p_element_stride{i}") for i in range(5)]
    out = k.param_ptr("out")
    smem_tmap = k.shared_array(t.b8, 128, align=128, name="smem_tmap")
    with k.if_(k.tid.x == 0):
        k.copy(smem_tmap, template_tensor_map, 128)         # smem_tmap = template_tensor_map;
        space_shared = ptx.space_shared                     # const auto space_shared = ...
        ptx.tensormap_replace_global_address(k, space_shared, smem_tmap,
                                             k.ld_param(p_global_address))
        rank = k.ld_param(p_rank)
        ptx.tensormap_replace_rank(k, space_shared, smem_tmap, rank - 1)
        for i in range(5):
            with k.if_(rank > i):
                ptx.tensormap_replace_box_dim(k, space_shared, smem_tmap, i,
                                              k.ld_param(p_box_dim[i]))
        for i in range(5):
            with k.if_(rank > i):
                ptx.tensormap_replace_global_dim(
                    k, space_shared, smem_tmap, i, k.cvt(k.ld_param(p_global_dim[i]), t.u32))
        for i in range(4):
            with k.if_(rank > i + 1):
                ptx.tensormap_replace_global_stride(k, space_shared, smem_tmap, i,
                                                    k.ld_param(p_global_stride[i]))
        for i in range(5):
            with k.if_(rank > i):
                ptx.tensormap_replace_element_size(k, space_shared, smem_tmap, i,
                                                   k.ld_param(p_element_stride[i]))
        u8_elem_type = 0
        ptx.tensormap_replace_elemtype(k, space_shared, smem_tmap, u8_elem_type)
        no_interleave = 0
        ptx.tensormap_replace_interleave_layout(k, space_shared, smem_tmap, no_interleave)
        no_swizzle = 0
        ptx.tensormap_replace_swizzle_mode(k, space_shared, smem_tmap, no_swizzle)
        zero_fill = 0
        ptx.tensormap_replace_fill_mode(k, space_shared, smem_tmap, zero_fill)
    k.syncwarp()                                            # __syncwarp();
    bytes_128 = 128
    ptx.tensormap_cp_fenceproxy(k, ptx.sem_release, ptx.scope_gpu, out, smem_tmap, bytes_128)
    return Module([k])


def test_seed_encode_golden(golden):
    with warnings.catch_warnings():
        warnings.simplefilter("error")               # the hazard checker finds nothing
        m = encode_tensor_map()
        text = m.emit()
    assert (str(m.version), str(m.target)) == ("8.3", "sm_90a")
    assert assemble_declared(golden(text, "tensormap/seed_encode"))[:4] == b"\x7fELF"


# -- refusal rules ---------------------------------------------------------------------------------
def test_refuse_ord_out_of_range():
    e = Env()
    with pytest.raises(OperandError, match=r"'ord'.*\[0, 4\].*got 5"):
        ptx.tensormap_replace_box_dim(e.k, SS, e.smap, 5, 16)


def test_refuse_global_stride_ord_4():
    e = Env()
    with pytest.raises(BuildError, match="stride of dimension 5.*ord must be 0..3"):
        ptx.tensormap_replace_global_stride(e.k, SS, e.smap, 4, 256)


def test_refuse_ord_register():
    e = Env()
    with pytest.raises(OperandError, match="'ord'.*a register is not allowed here"):
        ptx.tensormap_replace_global_dim(e.k, SS, e.smap, e.v32, 16)


@pytest.mark.parametrize("fn", ["elemtype", "interleave_layout", "swizzle_mode",
                                "swizzle_atomicity", "fill_mode"])
def test_refuse_register_for_immediate_field(fn):
    e = Env()
    with pytest.raises(OperandError, match="ptxas rejects a register for this field"):
        getattr(ptx, f"tensormap_replace_{fn}")(e.k, SS, e.smap, e.v32)


def test_shared_means_shared_cta():
    """'shared' (cuda::ptx's space_shared) is .shared::cta here as in every family."""
    for spelling in ("shared", "space_shared", "shared::cta", ptx.space_shared):
        e = Env()
        ptx.tensormap_replace_rank(e.k, spelling, e.smap, rank=1)
        assert [s.render() for s in e.k.statements()] == [
            "tensormap.replace.tile.rank.shared::cta.b1024.b32 [smap], 0;"]


def test_rank_is_the_raw_field_value_like_cuda_ptx():
    """cuda::ptx's `tensormap_replace_rank(space_shared, &smap, 1)` writes 1 (a 2-d tensor)."""
    e = Env()
    ptx.tensormap_replace_rank(e.k, SS, e.smap, 1)
    ptx.tensormap_replace_rank(e.k, SS, e.smap, new_val=1)
    ptx.tensormap_replace_rank(e.k, SS, e.smap, rank=2)
    assert {s.render() for s in e.k.statements()} == {
        "tensormap.replace.tile.rank.shared::cta.b1024.b32 [smap], 1;"}


@pytest.mark.parametrize("fn, args", [
    ("rank", (1,)), ("box_dim", (0, 64)), ("global_address", (0x10000,)),
    ("elemtype", ("u8",)), ("fill_mode", ("zero",))])
def test_refuse_the_old_address_first_order(fn, args):
    """`tensormap_replace_rank(k, smap, 1)` (space left out) fails and shows cuda::ptx's
    order instead of writing something else."""
    e = Env()
    with pytest.raises(BuildError, match=r"no cuda::ptx overload.*\(k, space, tm_addr"):
        getattr(ptx, f"tensormap_replace_{fn}")(e.k, e.smap, *args)


@pytest.mark.parametrize("fn,ord,value,rule", [
    ("box_dim", 0, 0, "1..256"), ("box_dim", 0, 257, "1..256"),
    ("element_stride", 1, 9, "1..8"), ("element_stride", 1, 0, "1..8"),
    ("global_stride", 0, 24, "multiple of 16"), ("global_stride", 0, 1 << 40, "below 2\\^40"),
    ("global_dim", 0, 0, "1..2\\^32-1"), ("global_address", None, 0x1008, "16-byte aligned"),
])
def test_refuse_value_out_of_range(fn, ord, value, rule):
    e = Env()
    args = (value,) if ord is None else (ord, value)
    with pytest.raises(OperandError, match=f"new_val.*{rule}"):
        getattr(ptx, f"tensormap_replace_{fn}")(e.k, SS, e.smap, *args)


@pytest.mark.parametrize("rank", [0, 6])
def test_refuse_rank_out_of_range(rank):
    e = Env()
    with pytest.raises(OperandError, match=r"'rank'.*\[1, 5\]"):
        ptx.tensormap_replace_rank(e.k, SS, e.smap, rank=rank)


def test_refuse_raw_rank_value_out_of_range():
    e = Env()
    with pytest.raises(OperandError, match=r"rank - 1 .*\[0, 4\]"):
        ptx.tensormap_replace_rank(e.k, SS, e.smap, new_val=5)


def test_refuse_rank_register_as_rank():
    e = Env()
    with pytest.raises(OperandError, match="pass it as new_val"):
        ptx.tensormap_replace_rank(e.k, SS, e.smap, rank=e.v32)


def test_refuse_rank_both_spellings():
    e = Env()
    with pytest.raises(BuildError, match="or rank=.*not both"):
        ptx.tensormap_replace_rank(e.k, SS, e.smap, rank=2, new_val=1)


@pytest.mark.parametrize("fn,value", [
    ("elemtype", 16), ("elemtype", "f8"), ("interleave_layout", 3), ("swizzle_mode", 5),
    ("swizzle_mode", "256B"), ("swizzle_atomicity", 4), ("fill_mode", 2), ("fill_mode", True)])
def test_refuse_value_outside_table(fn, value):
    e = Env()
    with pytest.raises(OperandError, match="new_val.*one of"):
        getattr(ptx, f"tensormap_replace_{fn}")(e.k, SS, e.smap, value)


def test_refuse_numpy_dtype_without_elemtype():
    e = Env()
    with pytest.raises(OperandError, match="new_val"):
        ptx.tensormap_replace_elemtype(e.k, SS, e.smap, np.dtype("int8"))


def test_refuse_unknown_driver_dtype():
    e = Env()
    with pytest.raises(OperandError, match="driver_dtype.*CUtensorMapDataType"):
        ptx.tensormap_replace_elemtype(e.k, SS, e.smap, driver_dtype="FLOAT8")


def test_refuse_driver_combined_swizzle():
    e = Env()
    with pytest.raises(OperandError, match="set two fields.*swizzle_atomicity"):
        ptx.tensormap_replace_swizzle_mode(e.k, SS, e.smap, "CU_TENSOR_MAP_SWIZZLE_128B_ATOM_32B")


@pytest.mark.parametrize("fn,value,target", [
    ("swizzle_atomicity", "32B", "sm_90a"), ("elemtype", "b4x16", "sm_90a"),
    ("swizzle_mode", "96B", "sm_100a"), ("swizzle_mode", "96B", "sm_103f"),
    ("rank", None, "sm_90"), ("rank", None, "sm_100")])
def test_refuse_value_not_valid_for_target(fn, value, target):
    e = Env(version="9.0", target=target)
    if fn == "rank":
        ptx.tensormap_replace_rank(e.k, SS, e.smap, rank=3)
    else:
        getattr(ptx, f"tensormap_replace_{fn}")(e.k, SS, e.smap, value)
    with pytest.raises(VersionError, match=f"needs PTX ISA .*pinned to .target {target}"):
        e.module().emit()


def test_family_target_accepts_replace():
    e = Env(target="sm_100f")
    ptx.tensormap_replace_swizzle_atomicity(e.k, SS, e.smap, "64B")
    assert assemble_declared(e.module().emit())[:4] == b"\x7fELF"


@pytest.mark.parametrize("fn,args,want", [
    ("global_address", (lambda e: e.v32,), ".b64"), ("box_dim", (0, lambda e: e.v64), ".b32"),
    ("global_stride", (0, lambda e: e.v32), ".b64")])
def test_refuse_wrong_value_width(fn, args, want):
    e = Env()
    args = tuple(a(e) if callable(a) else a for a in args)
    with pytest.raises(OperandError, match=f"new_val.*compatible with \\{want}"):
        getattr(ptx, f"tensormap_replace_{fn}")(e.k, SS, e.smap, *args)


def test_refuse_generic_32bit_address():
    e = Env()
    with pytest.raises(OperandError, match="64-bit integer register holding a generic"):
        ptx.tensormap_replace_fill_mode(e.k, GEN, e.v32, 0)


def test_refuse_field_shape_mismatch():
    with pytest.raises(BuildError, match="takes an ord operand"):
        TensormapReplace(Field.box_dim, "shared::cta", Env().smap, 1)
    with pytest.raises(BuildError, match="takes no ord operand"):
        TensormapReplaceDim(Field.rank, "shared::cta", Env().smap, 0, 1)


def test_refuse_cp_fenceproxy_size():
    e = Env()
    with pytest.raises(BuildError, match="size must be the immediate 128"):
        ptx.tensormap_cp_fenceproxy(e.k, "release", "gpu", e.gglobal, e.smap, size=64)


def test_refuse_cp_fenceproxy_acquire():
    e = Env()
    with pytest.raises(BuildError, match=r"\.acquire is rejected: cp_fenceproxy only releases"):
        ptx.tensormap_cp_fenceproxy(e.k, "acquire", "gpu", e.gptr_param, e.smap)
    assert list(e.k.statements()) == []      # nothing emitted before the refusal


def test_refuse_cp_fenceproxy_generic_dst():
    e = Env()
    with pytest.raises(OperandError,
                       match="'dst'.*a .global address.*holds a .generic address.*cvta"):
        TensormapCpFenceproxy("gpu", e.gptr, e.smap)


def test_refuse_cp_fenceproxy_src_not_shared():
    e = Env()
    with pytest.raises(OperandError, match="'src'.*shared::cta"):
        ptx.tensormap_cp_fenceproxy(e.k, "release", "gpu", e.gglobal, e.gglobal)


def test_refuse_cp_fenceproxy_on_sm80():
    e = Env(target="sm_80", version="8.3")
    ptx.tensormap_cp_fenceproxy(e.k, "release", "gpu", e.gglobal, e.smap)
    with pytest.raises(VersionError, match="tensormap.cp_fenceproxy.*pinned to .target sm_80"):
        e.module().emit()
