"""tcgen05's host-side helpers: the instruction descriptor of every kind (bit positions against
values worked out by hand from the PTX ISA's "Instruction descriptor" tables, round trips, one
refusal per mistake), the sm_100 shared-memory descriptor, tensor-memory allocation sizes and
accumulator layouts, and the tcgen05.ld/st fragment maps."""

from __future__ import annotations

import inspect
import itertools
import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ptxdsl import Addr, Kernel, OperandError, t
from ptxdsl.errors import BuildError, PtxdslError
from ptxdsl.instructions import tcgen05_desc as TD
from ptxdsl.instructions import tcgen05_tmem as TM
from ptxdsl.instructions.tcgen05_desc import InstrDesc, MmaKind, SmemDesc100, Swizzle100
from ptxdsl.instructions.tcgen05_tmem import (
    AccumulatorLayout,
    LdShape,
    check_alloc_columns,
    fragment_map,
    fragment_position,
    registers_per_thread,
    tmem_address,
    tmem_columns,
)
from ptxdsl.instructions.wgmma_desc import SmemLayout
from tests.junk import junk, positional

HERE = os.path.abspath(__file__)


def _here(err) -> bool:
    return os.path.abspath(err.value.loc.file) == HERE


# -- the instruction descriptor: bit positions ------------------------------------------------
# Each value is summed field by field from the ISA's tables ("Instruction descriptor format for
# .kind::tf32, .kind::f16, .kind::f8f6f4 and .kind::i8", "... for .kind::mxf8f6f4", "... for
# .kind::mxf4 and .kind::mxf4nvf4"); the comment gives the terms.
CASES = [
    # D f32 (1<<4), A bf16 (1<<7), B bf16 (1<<10), N 256>>3 (32<<17), M 128>>4 (8<<24)
    (dict(kind="f16", m=128, n=256, atype="bf16", btype="bf16"),
     0x10 + 0x80 + 0x400 + (32 << 17) + (8 << 24)),
    # D f32, A/B tf32 (2<<7, 2<<10), N 8 (1<<17), M 64 (4<<24)
    (dict(kind="tf32", m=64, n=8), 0x10 + (2 << 7) + (2 << 10) + (1 << 17) + (4 << 24)),
    # D f16 (0), A e4m3 (0), B e2m1 (5<<10), negate B (1<<14), transpose A (1<<15), N 16, M 128
    (dict(kind="f8f6f4", m=128, n=16, dtype="f16", atype="e4m3", btype="e2m1", negate_b=True,
          transpose_a=True), (5 << 10) + (1 << 14) + (1 << 15) + (2 << 17) + (8 << 24)),
    # selector 3, sparse (1<<2), saturate (1<<3), D s32 (2<<4), A s8 (1<<7), B u8 (0), N 32, M 128
    (dict(kind="i8", m=128, n=32, atype="s8", btype="u8", sparse=True, sparsity_selector=3,
          saturate=True), 3 + 4 + 8 + (2 << 4) + (1 << 7) + (4 << 17) + (8 << 24)),
    # .ws: D f32, A/B f16 (0), N 128 (16<<17), M 64 (4<<24), maximum shift 32 (3<<30)
    (dict(kind="f16", m=64, n=128, atype="f16", btype="f16", ws=True, max_shift=32),
     0x10 + (16 << 17) + (4 << 24) + (3 << 30)),
    # cta_group::2 M 256 (16<<24), N 256, D f32, A/B f16, transpose B (1<<16)
    (dict(kind="f16", m=256, n=256, atype="f16", btype="f16", cta_group=2, transpose_b=True),
     0x10 + (1 << 16) + (32 << 17) + (16 << 24)),
    # sparse (1<<2), B scale id 1 (1<<4), A e5m2 (1<<7), B e2m3 (3<<10), N 256, scale ue8m0
    # (1<<23), M 256>>7 (2<<27), A scale id 3 (3<<29)
    (dict(kind="mxf8f6f4", m=256, n=256, atype="e5m2", btype="e2m3", cta_group=2, sparse=True,
          scale_a_id=3, scale_b_id=1),
     4 + (1 << 4) + (1 << 7) + (3 << 10) + (32 << 17) + (1 << 23) + (2 << 27) + (3 << 29)),
    # A/B e2m1 (1<<7, 1<<10), N 8 (1<<17), ue8m0 (1<<23), M 128>>7 (1<<27)
    (dict(kind="mxf4", m=128, n=8), (1 << 7) + (1 << 10) + (1 << 17) + (1 << 23) + (1 << 27)),
    # A/B e2m1, N 256, ue4m3 (0), M 256>>7 (2<<27), A scale id 2 (2<<29), K 96 (1<<31)
    (dict(kind="mxf4nvf4", m=256, n=256, cta_group=2, scale_type="ue4m3", scale_a_id=2, k=96),
     (1 << 7) + (1 << 10) + (32 << 17) + (2 << 27) + (2 << 29) + (1 << 31)),
]


@pytest.mark.parametrize("fields,value", CASES, ids=lambda c: str(c) if isinstance(c, int)
                         else c["kind"])
def test_instruction_descriptor_bits(fields, value):
    fields = dict(fields)
    d = InstrDesc(fields.pop("kind"), fields.pop("m"), fields.pop("n"), **fields)
    assert d.value == value
    assert InstrDesc.decode(value, d.kind, cta_group=d.cta_group, ws=d.ws) == d


def test_the_dense_layout_is_cutlass_s():
    """The non-block-scaled fields sit where CUTLASS's UMMA::InstrDescriptor bitfields put
    them (cute/arch/mma_sm100_desc.hpp): one field set at a time."""
    base = InstrDesc("f16", 64, 8, atype="f16", btype="f16").value
    assert base == (1 << 4) | (1 << 17) | (4 << 24)      # c_format_ 4, n_dim_ 17, m_dim_ 24
    bits = {"negate_a": 13, "negate_b": 14, "transpose_a": 15, "transpose_b": 16}
    for field, bit in bits.items():
        assert InstrDesc("f16", 64, 8, atype="f16", btype="f16", **{field: True}).value \
            == base | 1 << bit


def test_k():
    assert InstrDesc("f16", 128, 64, atype="f16", btype="f16").mma_k == 16
    assert InstrDesc("i8", 128, 64, atype="s8", btype="u8", sparse=True).mma_k == 64
    given = InstrDesc("tf32", 128, 64, k=8)
    assert given == InstrDesc("tf32", 128, 64) and given.mma_k == 8 and given.k is None
    k96 = InstrDesc("mxf4", 256, 64, cta_group=2, k=96)
    assert k96.mma_k == 96 and InstrDesc("mxf4", 256, 64, cta_group=2).mma_k == 64


def test_kind_spellings():
    for spelling in ("f16", "kind::f16", ".kind::f16", "kind_f16", MmaKind.f16):
        assert InstrDesc(spelling, 128, 64, atype="f16", btype="f16").kind is MmaKind.f16
    assert InstrDesc("f16", 128, 64, atype=t.bf16, btype=t.bf16, dtype=t.f32).atype == "bf16"


def _configs():
    """A sweep of valid descriptors of every kind (shapes at their extremes, every option)."""
    for kind in MmaKind:
        ab = list(TD._KINDS[kind].ab)
        for cg, ws, sparse in itertools.product((1, 2), (False, True), (False, True)):
            if ws and (kind.block_scaled or cg == 2):
                continue
            ms = TD._m_choices(kind, cg, ws, sparse)
            ns = TD._n_choices(kind, cg, ws, sparse)[0]
            for m, n, a, b in itertools.product(ms, (ns[0], ns[-1]), ab[:2], ab[-1:]):
                if kind is MmaKind.f16 and a != b:
                    continue
                extra: dict = {}
                if kind.block_scaled:
                    extra = dict(scale_a_id=2, scale_b_id=0)
                elif sparse:
                    extra = dict(sparsity_selector=2)
                yield dict(kind=kind, m=m, n=n, atype=a, btype=b, cta_group=cg, ws=ws,
                           sparse=sparse, **extra)


def test_every_kind_round_trips():
    seen = 0
    for c in _configs():
        c = dict(c)
        d = InstrDesc(c.pop("kind"), c.pop("m"), c.pop("n"), **c)
        assert InstrDesc.decode(d.value, d.kind, cta_group=d.cta_group, ws=d.ws) == d
        assert 0 <= d.value < 1 << 32
        seen += 1
    assert seen > 100


# -- the instruction descriptor: refusals ------------------------------------------------------
REFUSALS = [
    (dict(kind="tf32", m=128, n=64, atype="f16"), r"'atype'.*kind::tf32: one of 'tf32'"),
    (dict(kind="i8", m=128, n=64, dtype="f32", atype="s8", btype="s8"),
     r"'dtype'.*kind::i8: one of 's32'"),
    (dict(kind="f8f6f4", m=128, n=64, atype="e4m3"), r"'btype'.*one of 'e4m3'"),
    (dict(kind="f16", m=128, n=64, atype="f16", btype="bf16"), "A and B of one type"),
    (dict(kind="f16", m=128, n=64, dtype="f16", atype="bf16", btype="bf16"),
     "an f16 D only with f16 inputs"),
    (dict(kind="f16", m=256, n=64, atype="f16", btype="f16"), r"'m'.*64 or 128"),
    (dict(kind="mxf4", m=64, n=64), r"'m'.*128 \(.kind::mxf4, cta_group::1\)"),
    (dict(kind="mxf8f6f4", m=128, n=64, atype="e4m3", btype="e4m3", cta_group=2,
          sparse=True), r"'m'.*256 \(.*sparse\)"),
    (dict(kind="i8", m=128, n=40, atype="s8", btype="s8"), r"'n'.*8, 16, 24, or a multiple"),
    (dict(kind="f16", m=128, n=24, atype="f16", btype="f16", cta_group=2),
     r"'n'.*a multiple of 16 from 16 to 256"),
    (dict(kind="tf32", m=64, n=256, ws=True, sparse=True), r"'n'.*64 or 128"),
    (dict(kind="f16", m=128, n=264, atype="f16", btype="f16"), r"'n'.*multiple of 8"),
    (dict(kind="f16", m=128, n=64, atype="f16", btype="f16", saturate=True),
     "saturate is for .kind::i8 only"),
    (dict(kind="i8", m=128, n=64, atype="s8", btype="s8", negate_a=True),
     "kind::i8 cannot negate"),
    (dict(kind="f8f6f4", m=128, n=64, atype="e4m3", btype="e3m2", transpose_b=True),
     "B of a 6- or 4-bit type must be K-major"),
    (dict(kind="mxf4nvf4", m=128, n=64, transpose_a=True), "has no transpose"),
    (dict(kind="f16", m=128, n=64, atype="f16", btype="f16", sparsity_selector=1),
     r"'sparsity_selector'.*with sparse=True"),
    (dict(kind="mxf8f6f4", m=128, n=64, atype="e4m3", btype="e4m3", sparse=True,
          sparsity_selector=1), r"'sparsity_selector'"),
    (dict(kind="f16", m=128, n=64, atype="f16", btype="f16", max_shift=8),
     r"'max_shift'.*non-zero only for .ws"),
    (dict(kind="f16", m=64, n=64, atype="f16", btype="f16", ws=True, max_shift=4),
     r"'max_shift'.*0, 8, 16 or 32"),
    (dict(kind="mxf4", m=128, n=64, ws=True), "mma.ws has no .kind::mxf4"),
    (dict(kind="f16", m=128, n=64, atype="f16", btype="f16", ws=True, cta_group=2),
     "no cta_group::2 form"),
    (dict(kind="f16", m=128, n=64, atype="f16", btype="f16", scale_a_id=1),
     "scale factor ids are for the block-scaled kinds"),
    (dict(kind="mxf4", m=128, n=64, scale_type="ue4m3"), r"'scale_type'.*'ue8m0'"),
    (dict(kind="mxf4", m=128, n=64, scale_b_id=1), r"'scale_b_id'.*\(0, 2\)"),
    (dict(kind="mxf4", m=128, n=64, k=96), r"'k'.*64 \(the K of this form; 96 only"),
    (dict(kind="tf32", m=128, n=64, sparse=1), r"'sparse'.*True or False"),
    (dict(kind="f32", m=128, n=64), r"'kind'.*'f16', 'tf32'"),
    (dict(kind="f16", m=128, n=64), r"'atype'.*the atype of .kind::f16"),
    (dict(kind="f16", m="128", n=64, atype="f16", btype="f16"), r"'m'.*an int"),
    (dict(kind="f16", m=128, n=64, atype="f16", btype="f16", cta_group=3), "'cta_group'"),
]


@pytest.mark.parametrize("fields,words", REFUSALS, ids=lambda x: x if isinstance(x, str)
                         else x["kind"])
def test_instruction_descriptor_refusals(fields, words):
    fields = dict(fields)
    with pytest.raises(PtxdslError, match=words) as ei:
        InstrDesc(fields.pop("kind"), fields.pop("m"), fields.pop("n"), **fields)
    assert _here(ei)


def test_decode_refuses_what_no_descriptor_holds():
    with pytest.raises(BuildError, match="reserved in .kind::f16") as ei:
        InstrDesc.decode(InstrDesc("f16", 64, 8, atype="f16", btype="f16").value | 1 << 23,
                         "f16")
    assert _here(ei)
    with pytest.raises(BuildError, match="atype code 3 has no meaning in .kind::f16"):
        InstrDesc.decode((3 << 7) | (1 << 4) | (1 << 17) | (4 << 24), "f16")
    with pytest.raises(BuildError, match="reserved in .kind::mxf4"):
        InstrDesc.decode(InstrDesc("mxf4", 128, 8).value | 1 << 12, "mxf4")
    with pytest.raises(OperandError, match="'value'.*a 32-bit descriptor"):
        InstrDesc.decode(1 << 32, "f16")
    with pytest.raises(OperandError, match="'m'"):     # a cta_group::2 shape read as ::1
        InstrDesc.decode(InstrDesc("f16", 256, 64, atype="f16", btype="f16",
                                   cta_group=2).value, "f16")


def test_descriptor_is_immutable():
    d = InstrDesc("tf32", 128, 64)
    with pytest.raises(BuildError, match="cannot be assigned"):
        d.n = 128


# -- the shared-memory descriptor --------------------------------------------------------------
def test_smem_descriptor_bits():
    # Table "Shared memory descriptor layout": start >> 4 at 0, LBO >> 4 at 16, SBO >> 4 at
    # 32, 0b001 at 46, base offset at 49, LBO mode at 52, swizzle at 61 (128B = 2).
    d = SmemDesc100(1024, 16, 1024, "128B", base_offset=3, lbo_absolute=True)
    assert d.value == (64 | 1 << 16 | 64 << 32 | 1 << 46 | 3 << 49 | 1 << 52 | 2 << 61)
    for mode, code in (("none", 0), ("128B_base32B", 1), ("128B", 2), ("64B", 4), ("32B", 6)):
        assert SmemDesc100(0, 0, 0, mode).value == 1 << 46 | code << 61
        assert Swizzle100.coerce(mode).value == code
    assert SmemDesc100.decode(d.value) == d


def test_smem_descriptor_from_a_layout():
    lay = SmemLayout(t.bf16, 128, 64)               # K-major, 128B swizzle: LBO 16, SBO 1024
    d = SmemDesc100.from_layout(lay, 2048, k_step=16)
    assert (d.start, d.lbo, d.sbo, d.swizzle) == (2048 + 32, 16, 1024, Swizzle100.b128)
    mn_lay = SmemLayout(t.f16, 64, 64, "MN", "64B")
    mn = SmemDesc100.from_layout(mn_lay)
    assert (mn.lbo, mn.sbo, mn.swizzle) == (mn_lay.lbo, mn_lay.sbo, Swizzle100.b64)
    with pytest.raises(BuildError, match="must start 1024-byte aligned") as ei:
        SmemDesc100.from_layout(lay, 512)
    assert _here(ei)


@pytest.mark.parametrize("args,words", [
    ((17, 16, 16), r"'start'.*a multiple of 16"),
    ((0, 1 << 18, 16), r"'lbo'.*\[0, 262144\)"),
    ((0, 16, -16), r"'sbo'"),
    ((0, 16, 16, "96B"), r"'swizzle'.*128B_base32B"),
    ((0, 16, 16, "none", 8), r"'base_offset'.*0..7"),
    ((0, 16, 16, "none", 0, 1), r"'lbo_absolute'.*True or False"),
])
def test_smem_descriptor_refusals(args, words):
    with pytest.raises(OperandError, match=words) as ei:
        SmemDesc100(*args)
    assert _here(ei)


def test_smem_decode_refuses_other_descriptors():
    good = SmemDesc100(0, 16, 1024, "64B").value
    with pytest.raises(BuildError, match="bits 46-48 must be 0b001") as ei:
        SmemDesc100.decode(good & ~(1 << 46))           # an sm_90 (wgmma) descriptor
    assert _here(ei)
    with pytest.raises(BuildError, match="bits 46-48 must be 0b001"):
        SmemDesc100.decode(good | 1 << 55)
    with pytest.raises(BuildError, match="swizzle code 3 is invalid"):
        SmemDesc100.decode((good & ~(7 << 61)) | 3 << 61)


def test_smem_descriptor_in_a_register():
    k = Kernel("k")
    tile = k.shared_array(t.b8, 32768, align=1024, name="tile")
    lay = SmemLayout(t.bf16, 128, 64)
    r = TD.smem_descriptor(k, lay, Addr(tile, 8192))
    known = TD.smem_descriptor(k, lay, 2048)
    constant = SmemDesc100(0, 16, 1024, "128B").value
    assert [s.render() for s in k.statements()] == [
        "mov.u32 %r1, tile;", "add.u32 %r2, %r1, 8192;", "shr.u32 %r3, %r2, 4;",
        f"mad.wide.u32 %rd1, %r3, 1, {constant};",
        f"mov.u64 %rd2, {SmemDesc100.from_layout(lay, 2048).value};"]
    assert r.type is known.type is t.u64
    step = lay.k_offset(16) >> 4                   # along K: one add, as the docstring says
    assert k.add(known, step).type is k.add(r, step).type is t.u64


def test_smem_descriptor_refusals_in_a_register():
    k = Kernel("k")
    small = k.shared_array(t.b8, 4096, align=1024, name="small")
    with pytest.raises(OperandError, match=r"smem_descriptor.*inside small") as ei:
        TD.smem_descriptor(k, SmemLayout(t.bf16, 128, 64), small)
    assert _here(ei)
    g = k.cvta(k.ld_param(k.param_ptr("p")), "global", to=True)
    with pytest.raises(OperandError, match=r"smem_descriptor.*a shared-memory address"):
        TD.smem_descriptor(k, SmemLayout(t.bf16, 64, 64), g)
    with pytest.raises(OperandError, match="'layout'.*an SmemLayout"):
        TD.smem_descriptor(k, "128B", small)


# -- tensor memory -----------------------------------------------------------------------------
def test_allocation_sizes():
    assert [check_alloc_columns(n) for n in (32, 64, 128, 256, 512)] == [32, 64, 128, 256, 512]
    assert [tmem_columns(n) for n in (1, 32, 33, 100, 256, 257, 512)] == [
        32, 32, 64, 128, 256, 512, 512]
    for n in (0, 16, 48, 1024):
        with pytest.raises(OperandError, match=r"'n_cols'.*a power of two from 32 to 512") \
                as ei:
            check_alloc_columns(n)
        assert _here(ei)
    with pytest.raises(OperandError, match=r"'needed'.*1 to 512"):
        tmem_columns(513)


def test_tmem_address():
    assert tmem_address(32, 8, base=64) == 32 << 16 | 72
    with pytest.raises(OperandError, match="'lane'.*0..127"):
        tmem_address(128, 0)
    with pytest.raises(OperandError, match="'column'.*base \\+ column in 0..511"):
        tmem_address(0, 500, base=16)
    with pytest.raises(OperandError, match="'base'.*an allocation's address"):
        tmem_address(0, 0, base=1 << 16)


# (m, n, cta_group, ws) -> columns, lanes used, and (row, col) -> (lane, column) examples:
# layouts D (M=128), F (M=64: lanes 0-15 of each subpartition), A (M=256 pair: 128 rows per
# CTA), B (M=128 pair: 64 rows, N folded in two), E (.ws M=64) and G (.ws M=32, N in four).
LAYOUTS = [
    ((128, 256, 1, False), 256, 128, {(0, 0): (0, 0), (127, 255): (127, 255)}),
    ((64, 64, 1, False), 64, 64, {(15, 3): (15, 3), (16, 0): (32, 0), (63, 63): (111, 63)}),
    ((256, 128, 2, False), 128, 128, {(127, 127): (127, 127)}),
    ((128, 128, 2, False), 64, 128, {(63, 63): (63, 63), (0, 64): (64, 0)}),
    ((64, 256, 1, True), 128, 128, {(5, 130): (69, 2)}),
    ((32, 256, 1, True), 64, 128, {(31, 255): (127, 63), (0, 64): (32, 0), (1, 128): (65, 0)}),
]


@pytest.mark.parametrize("args,columns,lanes,points", LAYOUTS, ids=lambda x: str(x))
def test_accumulator_layouts(args, columns, lanes, points):
    a = AccumulatorLayout(*args)
    assert a.columns == columns and len(a.lanes) == lanes
    assert a.alloc_columns == tmem_columns(columns)
    for rc, where in points.items():
        assert a.position(*rc) == where
    cells = {a.position(r, c) for r in range(a.rows) for c in range(a.n)}
    assert len(cells) == a.rows * a.n                       # one cell per element
    assert {c for _, c in cells} == set(range(a.columns))
    for r, c in itertools.product(range(a.rows), range(0, a.n, 7)):
        assert a.element(*a.position(r, c)) == (r, c)
    free = [(ln, 0) for ln in range(128) if ln not in a.lanes]
    assert all(a.element(*cell) is None for cell in free)


@pytest.mark.parametrize("args,words", [
    ((256, 64), r"'m'.*64 or 128 \(cta_group 1\)"), ((64, 64, 2), "'m'"),
    ((32, 64), "'m'"), ((128, 12), r"'n'.*a multiple of 8"),
    ((128, 136, 2), r"'n'.*a multiple of 16"), ((64, 64, 1, 1), r"'ws'.*True or False"),
])
def test_accumulator_layout_refusals(args, words):
    with pytest.raises(OperandError, match=words) as ei:
        AccumulatorLayout(*args)
    assert _here(ei)
    with pytest.raises(OperandError, match=r"'row, col'.*row in 0..127"):
        AccumulatorLayout(128, 64).position(128, 0)
    with pytest.raises(OperandError, match=r"'lane, column'.*column in 0..31"):
        AccumulatorLayout(128, 64, 2).element(0, 32)


def test_a_warp_s_load_of_the_accumulator():
    """Warp 1 of the warpgroup reads rows 32..63 of an M=128 accumulator with 32x32b.x8 at
    lane 32, column 8: thread t, register j holds element (32 + t, 8 + j)."""
    acc = AccumulatorLayout(128, 64)
    for t_, j in ((0, 0), (5, 7), (31, 3)):
        lane, col = fragment_position("32x32b", 8, t_, j)
        assert acc.element(32 + lane, 8 + col) == (32 + t_, 8 + j)


# -- tcgen05.ld / tcgen05.st fragments ---------------------------------------------------------
# (shape, num, thread) -> its registers' (lane, column). The same entries come out of CUTLASS's
# Copy_Traits<SM100_TMEM_LOAD_*> layouts for these shapes (cute/atom/copy_traits_sm100.hpp).
FRAGMENTS = [
    ("32x32b", 2, 7, [(7, 0), (7, 1)]),
    ("16x64b", 1, 0, [(0, 0)]), ("16x64b", 1, 1, [(8, 0)]), ("16x64b", 1, 2, [(0, 1)]),
    ("16x64b", 2, 5, [(9, 0), (9, 2)]),
    ("16x128b", 1, 6, [(1, 2), (9, 2)]), ("16x128b", 2, 3, [(0, 3), (8, 3), (0, 7), (8, 7)]),
    ("16x256b", 1, 5, [(1, 2), (1, 3), (9, 2), (9, 3)]),
    ("16x256b", 2, 0, [(0, 0), (0, 1), (8, 0), (8, 1), (0, 8), (0, 9), (8, 8), (8, 9)]),
    ("16x32bx2", 2, 3, [(3, 0), (3, 1)]), ("16x32bx2", 2, 19, [(3, 2), (3, 3)]),
]


@pytest.mark.parametrize("shape,num,thread,cells", FRAGMENTS, ids=str)
def test_fragment_entries(shape, num, thread, cells):
    split = num if shape == "16x32bx2" else None
    assert list(fragment_map(shape, num, half_split=split)[thread]) == cells
    assert [fragment_position(shape, num, thread, r, half_split=split)
            for r in range(len(cells))] == cells


@pytest.mark.parametrize("shape", list(LdShape))
def test_fragments_cover_their_block_once(shape):
    """Every .num: the warp's registers hit each (lane, column) of the shape's block once
    (32 lanes x num columns, or 16 lanes x bits/32 * num columns)."""
    lanes = 32 if shape is LdShape.s32x32b else 16
    for num in (1 << i for i in range(8)):
        try:
            regs = registers_per_thread(shape, num)
        except OperandError:
            break
        split = num if shape is LdShape.s16x32bx2 else None
        cells = [c for row in fragment_map(shape, num, half_split=split) for c in row]
        assert len(cells) == len(set(cells)) == 32 * regs
        assert {lane for lane, _ in cells} == set(range(lanes))
        assert max(c for _, c in cells) + 1 == 32 * regs // lanes


def test_register_counts():
    assert [registers_per_thread(s, 1) for s in LdShape] == [1, 1, 2, 4, 1]
    assert registers_per_thread("16x256b", 32) == registers_per_thread(".32x32b", 128) == 128


@pytest.mark.parametrize("call,words", [
    (lambda: registers_per_thread("16x256b", 64), r"'num'.*1 to 32 for .16x256b"),
    (lambda: registers_per_thread("32x32b", 3), r"'num'.*a power of two"),
    (lambda: fragment_map("32x16b", 1), r"'shape'.*'32x32b'"),
    (lambda: fragment_map("16x32bx2", 4), "needs half_split"),
    (lambda: fragment_map("16x64b", 4, half_split=4), "half_split is the .16x32bx2 offset"),
    (lambda: fragment_map("16x32bx2", 4, half_split=512), r"'half_split'.*0..511"),
    (lambda: fragment_position("32x32b", 1, 32, 0), r"'thread'.*0..31"),
    (lambda: fragment_position("16x128b", 1, 0, 2), r"'reg'.*0..1 \(.16x128b.x1\)"),
])
def test_fragment_refusals(call, words):
    with pytest.raises(PtxdslError, match=words) as ei:
        call()
    assert _here(ei)


# -- junk: no raw exception from any public helper ---------------------------------------------
FUNCTIONS = [getattr(TM, n) for n in TM.__all__ if inspect.isfunction(getattr(TM, n))] + [
    InstrDesc, InstrDesc.decode, SmemDesc100, SmemDesc100.decode, SmemDesc100.from_layout,
    MmaKind.coerce, Swizzle100.coerce, LdShape.coerce, AccumulatorLayout,
    AccumulatorLayout(128, 64).position, AccumulatorLayout(64, 64).element]


@pytest.mark.parametrize("fn", FUNCTIONS, ids=lambda f: getattr(f, "__qualname__", str(f)))
@settings(max_examples=40, deadline=None, database=None,
          suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_junk_gives_a_ptxdsl_error_or_a_result(fn, data):
    k, other = Kernel("k"), Kernel("other")
    values = st.one_of(junk(k, other), st.sampled_from(
        ["f16", "e4m3", "128B", "32x32b", 0, 16, 64, 128, 256, 2, t.bf16, MmaKind.i8]))
    req, _ = positional(fn)
    args = [data.draw(values) for _ in range(max(req, 1))]
    try:
        fn(*args)
    except PtxdslError:
        pass
