"""Shared-memory matrix descriptors (`SmemLayout`, `descriptor`, `MatrixDescriptor`) and the
warpgroup fragments (`k.fragment`, `k.a_fragment`): host-side encodings, the code that builds
them (goldens), the K-step rule per swizzle/major/type, the TMA link, and the refusals. The
layouts are checked on the GPU by tests/test_wgmma_gpu.py (every swizzle, both majors)."""

from __future__ import annotations

import os
import re
import sys

import pytest

from ptxdsl import BuildError, Kernel, ptx, t
from ptxdsl.fragments import a_fragment_coords, fragment_coords
from ptxdsl.instructions.wgmma_desc import (
    SmemLayout,
    SwizzleMode,
    descriptor,
    encode_descriptor,
)
from ptxdsl.runtime.tensormap_desc import TiledDesc
from ptxdsl.testing import assemble_declared
from tests.tma_cases import unchecked_module


# -- the 64-bit encoding ---------------------------------------------------------------------------
def test_encode_fields():
    d = encode_descriptor(0x1230, 16, 1024, "128B", 0)
    assert d & 0x3FFF == 0x123                     # start >> 4, bits 0-13
    assert (d >> 16) & 0x3FFF == 1                 # LBO >> 4, bits 16-29
    assert (d >> 32) & 0x3FFF == 64                # SBO >> 4, bits 32-45
    assert (d >> 49) & 7 == 0 and d >> 62 == 1     # base offset, 128B swizzle = 1
    assert encode_descriptor(0, 0, 0, "64B", 5) == 5 << 49 | 2 << 62
    assert encode_descriptor(0, 0, 0, "32B") >> 62 == 3
    assert encode_descriptor(0, 0, 0, "none") == 0


@pytest.mark.parametrize("field,args", [
    ("start address", (8, 16, 16)), ("leading byte offset", (0, 1 << 18, 16)),
    ("stride byte offset", (0, 16, 24)), ("start address", (-16, 16, 16))])
def test_refuse_unencodable_fields(field, args):
    with pytest.raises(BuildError, match=f"{field} must be a multiple of 16 below 262144"):
        encode_descriptor(*args)


def test_refuse_base_offset():
    with pytest.raises(BuildError, match="base offset must be 0..7"):
        encode_descriptor(0, 16, 16, "128B", 8)


def test_refuse_swizzle_name():
    with pytest.raises(BuildError, match="swizzle must be one of none, 32B, 64B, 128B"):
        SwizzleMode.coerce("96B")


# -- layouts -----------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype,major,sw,mn,k,lbo,sbo", [
    (t.bf16, "K", "128B", 64, 64, 16, 1024),
    (t.bf16, "K", "64B", 128, 64, 16, 512),
    (t.f16, "K", "32B", 64, 32, 16, 256),
    (t.f16, "K", "none", 64, 32, 64 * 16, 128),
    (t.bf16, "MN", "128B", 256, 32, 32 * 128, 1024),
    (t.f16, "MN", "64B", 64, 32, 32 * 64, 512),
    (t.f16, "MN", "none", 16, 32, 128, 32 * 16),
    ("e4m3", "K", "128B", 64, 128, 16, 1024),
    ("tf32", "K", "32B", 64, 16, 16, 256),
])
def test_layout_offsets(dtype, major, sw, mn, k, lbo, sbo):
    lay = SmemLayout(dtype, mn, k, major, sw)
    assert (lay.lbo, lay.sbo) == (lbo, sbo)
    d = lay.encode(0)
    assert ((d >> 16) & 0x3FFF, (d >> 32) & 0x3FFF) == (lbo >> 4, sbo >> 4)
    assert lay.transpose == (major == "MN")


@pytest.mark.parametrize("dtype,major,sw,mn,k,steps", [
    # bf16 K-major 128B: +32 B per k16 inside the 128-byte row, then the next atom column
    (t.bf16, "K", "128B", 64, 128, {0: 0, 16: 32, 48: 96, 64: 64 * 128, 80: 64 * 128 + 32}),
    (t.bf16, "K", "64B", 64, 64, {16: 32, 32: 64 * 64, 48: 64 * 64 + 32}),
    (t.bf16, "K", "32B", 64, 64, {16: 64 * 32, 32: 2 * 64 * 32}),
    (t.bf16, "K", "none", 64, 32, {16: 2 * 64 * 16}),
    (t.bf16, "MN", "128B", 64, 64, {16: 16 * 128, 48: 48 * 128}),
    (t.f16, "MN", "none", 64, 32, {16: 16 * 16}),
    ("tf32", "K", "128B", 64, 32, {8: 32, 24: 96}),
    ("e5m2", "K", "128B", 64, 256, {32: 32, 128: 64 * 128}),
    ("s8", "K", "64B", 64, 128, {32: 32, 64: 64 * 64, 96: 64 * 64 + 32}),
])
def test_k_step_rule(dtype, major, sw, mn, k, steps):
    lay = SmemLayout(dtype, mn, k, major, sw)
    for kk, want in steps.items():
        assert lay.k_offset(kk) == want, kk


def test_k_step_refusals():
    lay = SmemLayout(t.bf16, 64, 64)
    with pytest.raises(BuildError, match="not a multiple of one wgmma's K"):
        lay.k_offset(8)
    with pytest.raises(BuildError, match=r"K index must be in \[0, 64\)"):
        lay.k_offset(64)


def test_swizzled_offset_is_the_tma_pattern():
    """128B: the 16-byte chunk index XORs with the row within the 8-row atom."""
    lay = SmemLayout(t.bf16, 64, 64, "K", "128B")
    assert lay.swizzled_offset(0, 8) == 16
    assert lay.swizzled_offset(1, 0) == 128 + 16
    assert lay.swizzled_offset(3, 8) == 3 * 128 + (1 ^ 3) * 16
    assert lay.swizzled_offset(9, 0) == 9 * 128 + 16
    none = SmemLayout(t.bf16, 64, 64, "K", "none")
    assert none.swizzled_offset(3, 9) == none.offset(3, 9) == 64 * 16 + 3 * 16 + 2


def test_refuse_layouts():
    with pytest.raises(BuildError, match="only 16-bit types .* may be MN-major"):
        SmemLayout("tf32", 64, 32, "MN", "128B")
    with pytest.raises(BuildError, match="must fill whole 128-byte swizzle atoms"):
        SmemLayout(t.bf16, 64, 32, "K", "128B")
    with pytest.raises(BuildError, match="mn must be a positive multiple of 8"):
        SmemLayout(t.bf16, 60, 64)
    with pytest.raises(BuildError, match="must start 1024-byte aligned"):
        SmemLayout(t.bf16, 64, 64).encode(512)


# -- the TMA side ---------------------------------------------------------------------------------
def _map(box, swizzle, dtype="BFLOAT16", shape=(256, 256)):
    return TiledDesc.from_numpy_order(1 << 20, shape, dtype, box, swizzle=swizzle)


def test_tma_box_and_copies():
    k_major = SmemLayout(t.bf16, 128, 128, "K", "64B")
    assert k_major.tma_box == (32, 128) and k_major.tma_swizzle == "B64"
    assert k_major.tma_copies() == [(j * 128 * 64, 32 * j) for j in range(4)]
    mn_major = SmemLayout(t.bf16, 128, 32, "MN", "128B")
    assert mn_major.tma_box == (64, 32)
    assert mn_major.tma_copies() == [(0, 0), (32 * 128, 64)]
    k_major.check_tensormap(_map((128, 32), "64B"))
    k_major.check_tensormap(_map((64, 32), "64B"))     # two boxes stacked along the rows


@pytest.mark.parametrize("box,swizzle,dtype,words", [
    ((128, 32), "128B", "BFLOAT16", "swizzle B128 (the layout needs B64)"),
    ((128, 64), "64B", "BFLOAT16", "boxDim[0]=64 (one 64-byte atom is 32 elements)"),
    ((128, 32), "64B", "FLOAT32", "32-bit elements (the layout has 16-bit)"),
    ((48, 32), "64B", "BFLOAT16", "the rows must divide 128"),
    ((4, 32), "64B", "BFLOAT16", "a swizzled box must hold whole 8-row atoms"),
])
def test_tensormap_mismatch_raises(box, swizzle, dtype, words):
    lay = SmemLayout(t.bf16, 128, 128, "K", "64B")
    with pytest.raises(BuildError, match=r"tensor map and wgmma layout disagree .*"
                       + re.escape(words)):
        lay.check_tensormap(_map(box, swizzle, dtype))


# -- descriptors in a kernel -------------------------------------------------------------------
def build_descriptors():
    m = unchecked_module(name="desc")
    k = Kernel("k")
    sa = k.shared_array(t.b8, 8192, align=1024, name="sa")
    sb = k.shared_array(t.b8, 16384, align=1024, name="sb")
    lay_a = SmemLayout(t.bf16, 64, 64, "K", "128B")
    lay_b = SmemLayout(t.bf16, 128, 64, "MN", "64B")
    da = descriptor(k, lay_a, sa)                           # mov, shr, mad.wide
    db = descriptor(k, lay_b, k.mov(sb, type=t.u64))        # 64-bit address: shr, or
    dc = descriptor(k, SmemLayout(t.bf16, 64, 64), 2048)   # folded to a constant
    acc = k.fragment(t.f32, shape=(64, 16))
    ptx.wgmma_fence(k)
    for kk in (0, 16):
        ptx.wgmma_mma_async(k, acc, da.k_step(k, kk), db.k_step(k, kk), atype="bf16",
                            tnspB=lay_b.transpose)
    ptx.wgmma_mma_async(k, acc, dc.k_step(k, 48), db, atype="bf16", tnspB=1)
    m.add(k)
    return m, da, dc


def test_descriptor_code_golden(golden):
    m, da, dc = build_descriptors()
    text = golden(m, "wgmma/descriptors")
    assert assemble_declared(text)[:4] == b"\x7fELF"
    assert dc.encode() == SmemLayout(t.bf16, 64, 64).encode(2048)
    assert dc.k_step(None, 48).encode() == dc.encode() + 96 // 16
    with pytest.raises(BuildError, match="only known at run time"):
        da.encode()


def test_descriptor_instruction_count():
    k = Kernel("k")
    sa = k.shared_array(t.b8, 8192, align=1024, name="sa")
    descriptor(k, SmemLayout(t.bf16, 64, 64), k.mov(sa))
    assert [s.insn.opcode() for s in k.statements()][1:] == ["shr.u32", "mad.wide.u32"]


def test_refuse_descriptor_alignment():
    k = Kernel("k")
    sa = k.shared_array(t.b8, 8192, align=128, name="sa")
    with pytest.raises(BuildError, match=r"must start 1024-byte aligned; sa is declared "
                       r"\.align 128"):
        descriptor(k, SmemLayout(t.bf16, 64, 64), sa)


def test_refuse_descriptor_address():
    k = Kernel("k")
    with pytest.raises(BuildError, match="the address must be a shared symbol"):
        descriptor(k, SmemLayout(t.bf16, 64, 64), k.reg(t.f32))
    g = k.param_ptr("g")
    with pytest.raises(BuildError, match="is not in shared memory"):
        descriptor(k, SmemLayout(t.bf16, 64, 64), g)
    with pytest.raises(BuildError, match=r"wgmma descriptor: operand 'addr': expected a "
                       r"shared-memory address.*which holds a generic address"):
        descriptor(k, SmemLayout(t.bf16, 64, 64), k.ld_param(g))


# -- fragments --------------------------------------------------------------------------------
def test_fragment_coords_cover_the_tile_once():
    for n in (8, 64, 256):
        seen = [rc for th in range(128) for rc in fragment_coords(n, th)]
        assert sorted(seen) == [(r, c) for r in range(64) for c in range(n)]
    assert fragment_coords(16, 37)[:4] == [(16 + 1, 2), (17, 3), (25, 2), (25, 3)]


def test_fragment_offsets_agree_with_coords():
    frag = Kernel("k").fragment(t.f32, shape=(64, 32), zero=False)
    for th in (0, 5, 37, 127):
        coords = fragment_coords(32, th)
        r0, c0 = coords[0]
        assert [(r0 + dr, c0 + dc) for dr, dc in map(frag.offsets, range(16))] == coords
    with pytest.raises(BuildError, match=r"value index must be in \[0, 16\)"):
        frag.offsets(16)


@pytest.mark.parametrize("bits", [16, 32, 8])
def test_a_fragment_coords_cover_the_tile_once(bits):
    kk = 256 // bits
    seen = [rc for th in range(128) for reg in a_fragment_coords(bits, th) for rc in reg]
    assert sorted(seen) == [(r, c) for r in range(64) for c in range(kk)]


def test_packed_accumulator_is_the_a_fragment():
    """Packing an m64n16 .f32 accumulator pairwise gives the k16 A fragment's registers."""
    for th in range(128):
        d = fragment_coords(16, th)
        a = a_fragment_coords(16, th)
        assert [[d[2 * j], d[2 * j + 1]] for j in range(4)] == a


def build_fragments():
    m = unchecked_module(name="frag")
    k = Kernel("k", reqntid=128)
    out, a_ptr = k.param_ptr("out"), k.param_ptr("a")
    rows, cols = k.param(t.s32, "rows"), k.param(t.s32, "cols")
    acc = k.fragment(t.f32, shape=(64, 16))
    half = k.fragment(t.f16, shape=(64, 16))
    ints = k.fragment(t.s32, shape=(64, 8), zero=False).fill(-7)
    af = k.a_fragment(t.bf16).load(a_ptr, 64, k0=16)
    ptx.wgmma_fence(k)
    ptx.wgmma_mma_async(k, acc, af, k.mov(0, type=t.u64), atype="bf16")
    packed = acc.to_packed(t.bf16)
    ptx.wgmma_mma_async(k, half, packed.a_operand(0), k.mov(0, type=t.u64), atype="f16")
    ptx.wgmma_commit_group(k)
    ptx.wgmma_wait_group(k, 0)
    acc.store(out, 64, rows=40, cols=12)
    half.store(out, k.ld_param(cols), rows=k.ld_param(rows))
    ints.store(out, 8)
    acc.to_packed("e5m2").store(out, 16, cols=10)
    packed.store_matrix(k.shared_array(t.b8, 64 * 24 * 2, align=16, name="c_tile"), 24)
    m.add(k)
    return m


def test_fragment_code_golden(golden):
    text = golden(build_fragments(), "wgmma/fragments")
    assert assemble_declared(text)[:4] == b"\x7fELF"
    assert "cvt.rn.bf16x2.f32 %r" in text
    assert text.count("st.global.f32") == 8     # N=16: 8 values, each below column 12
    assert "cvt.rn.satfinite.e5m2x2.f32 %rs" in text and text.count("st.global.b16") == 4
    assert text.count("stmatrix.sync.aligned.m8n8.x4.shared.b16") == 1


def test_fragment_stores_skip_what_is_out_of_bounds():
    k = Kernel("k", reqntid=128)
    out = k.param_ptr("out")
    acc = k.fragment(t.f32, shape=(64, 32))
    acc.store(out, 32, cols=9)   # a thread's columns 2*(lane%4) + {0, 1, 8, 9, 16, ...}:
    stores = [s for s in k.statements() if s.insn.opcode().startswith("st.")]
    # +0, +1 and +8 can be below 9 (two rows each), +9 and up never
    assert len(stores) == 6 and all(s.guard is not None for s in stores)


def test_fragment_global_access_refusals():
    """The direct-store epilogue and the RS fragment load take a global pointer and integer
    extents; anything else is refused in their own names, not an inner add/mad's."""
    k = Kernel("k", reqntid=128)
    out = k.param_ptr("out")
    acc = k.fragment(t.f32, shape=(64, 16))
    smem = k.shared_array(t.bf16, 64 * 64, align=16, name="tile")
    with pytest.raises(BuildError, match=r"fragment.store: ld must be a positive int.*got 1.5"):
        acc.store(out, 1.5)
    with pytest.raises(BuildError, match=r"fragment.store: rows must be a non-negative.*-1"):
        acc.store(out, 16, rows=-1)
    with pytest.raises(BuildError, match=r"fragment.store: ptr must be a 64-bit global "
                       r"address.*symbol tile in \.shared"):
        acc.store(smem, 16)
    with pytest.raises(BuildError, match=r"a_fragment.load: ptr must be a 64-bit global "
                       r"address.*symbol tile"):
        k.a_fragment(t.bf16).load(smem, 64)
    with pytest.raises(BuildError, match=r"a_fragment.load: ld must be a positive int"):
        k.a_fragment(t.bf16).load(out, k.reg(t.f32))


def test_fragment_refusals():
    k = Kernel("k")
    with pytest.raises(BuildError, match="64 rows per warpgroup"):
        k.fragment(t.f32, shape=(128, 64))
    with pytest.raises(BuildError, match="N must be 8..256 in steps of 8"):
        k.fragment(t.f32, shape=(64, 12))
    with pytest.raises(BuildError, match=r"accumulators are \.f32, \.s32 or \.f16"):
        k.fragment(t.f64, shape=(64, 8))
    with pytest.raises(BuildError, match=r"converts an \.f32 accumulator"):
        k.fragment(t.s32, shape=(64, 8)).to_packed(t.bf16)
    with pytest.raises(BuildError, match="convert with to_packed"):
        k.fragment(t.f32, shape=(64, 16)).a_operand(0)
    with pytest.raises(BuildError, match="one of bf16, f16, e4m3, e5m2"):
        k.fragment(t.f32, shape=(64, 16)).to_packed(t.f64)
    fp8 = k.fragment(t.f32, shape=(64, 16)).to_packed("e4m3")
    assert [r.type for r in fp8.regs] == [t.b16] * 4 and fp8.value_bits == 8
    with pytest.raises(BuildError, match="stmatrix stores 16-bit values"):
        fp8.store_matrix(k.shared_array(t.b8, 2048, name="s1"), 16)
    bf = k.fragment(t.f32, shape=(64, 16)).to_packed(t.bf16)
    with pytest.raises(BuildError, match=r"ld must be an int >= N=16 and a multiple of 8"):
        bf.store_matrix(k.shared_array(t.b8, 4096, name="s2"), 20)
    with pytest.raises(BuildError, match=r"ptr must be a 64-bit global address.*\(\.u32\)"):
        k.fragment(t.f32, shape=(64, 8)).store(k.reg(t.u32), 8)


# -- issue 32: the host path of a descriptor at a K step; packed fragments in place --------------
HERE = os.path.abspath(__file__)


def _next_line() -> int:
    """The line after the caller's: where the offending call is written."""
    return sys._getframe(1).f_lineno + 1


def _at(err, line: int) -> None:
    assert (os.path.abspath(err.value.loc.file), err.value.loc.line) == (HERE, line)


@pytest.mark.parametrize("layout,address", [
    (SmemLayout(t.bf16, 64, 128, "K", "128B"), 2048),
    (SmemLayout(t.bf16, 128, 64, "MN", "128B"), 1024),
    (SmemLayout(t.f16, 64, 64, "K", "64B"), 512),
    (SmemLayout("e4m3", 64, 128, "K", "32B"), 256),
    (SmemLayout("tf32", 64, 32, "K", "none"), 48),
])
def test_host_descriptor_at_a_k_step_is_the_device_value(layout, address):
    """`encode(address, k_step=kk)` is what `descriptor(...).k_step(k, kk)` holds, for every
    K step of the tile; with a register address the device adds the same K offset."""
    k = Kernel("k")
    step = 256 // layout.bits
    for kk in range(0, layout.k, step):
        device = descriptor(k, layout, address).k_step(k, kk).encode()
        assert layout.encode(address, k_step=kk) == device
        assert layout.encode(address, k_step=kk) - layout.encode(address) \
            == layout.k_offset(kk) >> 4
    with pytest.raises(BuildError, match="not a multiple of one wgmma's K"):
        layout.encode(address, k_step=step // 2)


def test_unaligned_encode_says_where_to_put_the_tile():
    with pytest.raises(BuildError, match=r"SmemLayout.encode: a 64x64 16-bit K-major, 128B "
                       r"swizzle tile must start 1024-byte aligned \(the 128B swizzle pattern "
                       r"repeats every 1024 bytes\), got address 0x410: place it at 0x800, "
                       r"the next multiple of 1024 .*or, .*give base_offset") as err:
        line = _next_line()
        SmemLayout(t.bf16, 64, 64).encode(0x410)
    _at(err, line)
    with pytest.raises(BuildError, match=r"16-byte core-matrix rows\), got address 0x28: "
                       r"place it at 0x30"):
        SmemLayout(t.bf16, 64, 64, "K", "none").encode(0x28)
    with pytest.raises(BuildError, match=r"operand 'address': expected a shared-memory "
                       r"address \(an int\)"):
        SmemLayout(t.bf16, 64, 64).encode(1.5)


def test_to_packed_into_converts_into_the_same_registers():
    """P made before a loop and again in it: both conversions write p's registers."""
    k = Kernel("k", reqntid=128)
    s = k.fragment(t.f32, shape=(64, 32))
    p = k.fragment(t.f32, shape=(64, 32), packed=t.bf16, zero=False)
    assert p.packed == "bf16" and [r.type for r in p.regs] == [t.b32] * 8
    assert s.to_packed(t.bf16, into=p) is p
    with k.for_range(0, 4):
        assert s.to_packed("bf16", into=p) is p
    cvts = [s.insn for s in k.statements() if s.insn.opcode() == "cvt.rn.bf16x2.f32"]
    assert [c.d for c in cvts] == p.regs * 2
    fp8 = k.fragment(t.f32, shape=(64, 32), packed="e4m3", zero=False)
    assert s.to_packed("e4m3", into=fp8) is fp8 and fp8.regs[0].type is t.b16


def test_to_packed_into_refusals():
    k, other = Kernel("k"), Kernel("other")
    s = k.fragment(t.f32, shape=(64, 32))
    with pytest.raises(BuildError, match=r"operand 'into': expected a packed bf16 fragment "
                       r"of N=32") as err:
        line = _next_line()
        s.to_packed(t.bf16, into=s.regs)
    _at(err, line)
    for into, given in ((k.fragment(t.f32, shape=(64, 64), packed=t.bf16), "packed bf16 "
                         "fragment of N=64"),
                        (k.fragment(t.f32, shape=(64, 32), packed=t.f16), "packed f16 "
                         "fragment of N=32"),
                        (k.fragment(t.f32, shape=(64, 32)), r"\.f32 accumulator fragment")):
        with pytest.raises(BuildError, match=r"into must be a packed bf16 fragment of N=32 "
                           rf"\(this conversion's\), got a {given}") as err:
            line = _next_line()
            s.to_packed(t.bf16, into=into)
        _at(err, line)
    with pytest.raises(BuildError, match=r"into belongs to another kernel \('other', not 'k'\)"):
        s.to_packed(t.bf16, into=other.fragment(t.f32, shape=(64, 32), packed=t.bf16))
    with pytest.raises(BuildError, match=r"fragment: packed names the copy of an \.f32 "
                       r"accumulator") as err:
        line = _next_line()
        k.fragment(t.f16, shape=(64, 32), packed=t.bf16)
    _at(err, line)
    with pytest.raises(BuildError, match="fragment: one of bf16, f16, e4m3, e5m2, got 'fp4'"):
        k.fragment(t.f32, shape=(64, 32), packed="fp4")
