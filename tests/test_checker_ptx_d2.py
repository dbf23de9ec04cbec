"""Idioms of CUTLASS's grouped (pointer-array) GEMM that the checker reads from nvcc's PTX
(tests/corpus/ptx/nvcc_cutlass/cutlass_grouped_bf16.ptx): each as a small kernel parsed with
`parse_ptx`, clean, beside its buggy twin."""

from __future__ import annotations

import pytest

from ptxdsl.checker import Severity
from ptxdsl.checker.defs import Defs
from ptxdsl.frontend import parse_ptx

HEAD = ".version 8.7\n.target sm_90a\n.address_size 64\n"
WORKSPACE = 64384     # the tensor-map workspace: past the six 8 KiB stages at smem+0
MAP = {"k_param_0": {"box_bytes": 8192}}
TMA = "cp.async.bulk.tensor.2d.shared::cta.global.mbarrier::complete_tx::bytes"


def _check(text: str, **context) -> list:
    found = parse_ptx(HEAD + text, file="k.ptx").check(**context)
    return [f for f in found if f.severity is not Severity.note]


def _ids(found: list) -> list[str]:
    return sorted({f.id for f in found})


# -- a raw statement's vector result defines each register in it --------------------------------
def test_a_raw_vector_unpack_defines_each_register():
    text = """
.visible .entry k()
{
  .reg .b32 %r<4>;
  .reg .b64 %rd<4>;
  mov.u64 %rd1, 5;
  mov.b64 {%r1, %r2}, %rd1;
  mov.b64 %rd2, {%r1, %r2};
  ret;
}
"""
    body = parse_ptx(HEAD + text).kernels[0].body
    insns = [getattr(s, "insn", None) for s in body]
    at = next(i for i, x in enumerate(insns) if "{%r1, %r2}, %rd1" in getattr(x, "text", ""))
    r1, r2 = insns[at].d[0].items
    defs = Defs(insns)
    assert list(defs.get(r1)) == [at] and list(defs.get(r2)) == [at]


# -- wgmma-smem-no-proxy-fence: the descriptor's tile is known, the workspace write is not in it --

def _ring_wgmma(write_at: int = WORKSPACE, *, unpack: bool = False, deep: bool = False,
                shfl: bool = False, selp: bool = False) -> str:
    """CUTLASS's grouped GEMM mainloop, reduced: a 6-stage ring of TMA tiles at smem+0,
    its stage `(stage + k_tiles) % 6` by nvcc's magic-number division, a wgmma whose
    descriptor is the tile's address `(smem + warpgroup * 4096) >> 4 & 0x3FFF` plus the
    stage, and thread 0's generic store of a tensor-map word into a workspace far past the
    tiles (`write_at`), never fenced. `unpack`: the descriptor's halves come from a raw
    `mov.b64 {lo, hi}`; `deep`: k_tiles is a long chain of arithmetic on a parameter;
    `shfl`: the warpgroup index is broadcast from lane 0; `selp`: the workspace is picked
    by a run-time flag (`smem + (flag ? 128 : 0)`)."""
    chain = 14 if deep else 1
    steps = "\n".join(f"  add.s32 %r{41 + j}, %r{40 + j}, 1;" for j in range(chain))
    if shfl:
        warpgroup = """  shr.u32 %r59, %r1, 7;
  shfl.sync.idx.b32 %r60|%p5, %r59, 0, 31, -1;
  shl.b32 %r61, %r60, 12;"""
    else:
        warpgroup = "  mov.u32 %r61, 0;"
    if unpack:
        lo_hi = """  or.b64 %rd3, %rd2, 4611686293305360384;
  mov.b64 {%r7, %r8}, %rd3;"""
    else:
        lo_hi = """  cvt.u32.u64 %r7, %rd2;
  mov.u32 %r8, 1073741824;"""
    ws = ("ld.param.u32 %r71, [k_param_1];\n  setp.ne.s32 %p6, %r71, 1;\n"
          "  selp.b32 %r69, 128, 0, %p6;") if selp else "mov.u32 %r69, 0;"
    return f"""
.shared .align 1024 .b8 smem[65536];
.visible .entry k(.param .align 64 .b8 k_param_0[128], .param .u32 k_param_1,
                  .param .u64 k_param_2)
.reqntid 256
{{
  .reg .pred %p<8>;
  .reg .b32 %r<80>;
  .reg .b64 %rd<20>;
  .reg .f32 %f<8>;
  mov.u32 %r1, %tid.x;
  setp.eq.s32 %p1, %r1, 0;
  mov.u32 %r2, smem;
  add.s32 %r3, %r2, 65024;
  @%p1 mbarrier.init.shared::cta.b64 [%r3], 1;
  ld.param.u64 %rd9, [k_param_2];
  {ws}
  add.s32 %r70, %r2, %r69;
  @%p1 st.shared.u64 [%r70+{write_at}], %rd9;
  bar.sync 0;
  ld.param.u32 %r4, [k_param_1];
  ld.param.u32 %r40, [k_param_1];
{steps}
  mov.u32 %r9, %r{40 + chain};
  mov.u64 %rd12, k_param_0;
  cvta.param.u64 %rd1, %rd12;
{warpgroup}
  add.s32 %r62, %r2, %r61;
  shr.u32 %r5, %r62, 4;
  and.b32 %r6, %r5, 16383;
  cvt.u64.u32 %rd2, %r6;
{lo_hi}
  mov.u32 %r10, 0;
  mov.u32 %r11, 0;
  mov.u32 %r30, 0;
  mov.f32 %f1, 0f00000000;
  mov.f32 %f2, 0f00000000;
  mov.f32 %f3, 0f00000000;
  mov.f32 %f4, 0f00000000;
$L_loop:
  shl.b32 %r12, %r10, 13;
  add.s32 %r13, %r2, %r12;
  @%p1 mbarrier.arrive.expect_tx.shared::cta.b64 _, [%r3], 8192;
  @%p1 {TMA} [%r13], [%rd1, {{%r30, %r30}}], [%r3];
$L_wait:
  mbarrier.try_wait.parity.shared::cta.b64 %p2, [%r3], %r11;
  @!%p2 bra.uni $L_wait;
  xor.b32 %r11, %r11, 1;
  wgmma.fence.sync.aligned;
  shl.b32 %r14, %r10, 9;
  add.s32 %r15, %r7, %r14;
  mov.b64 %rd4, {{%r15, %r8}};
  setp.ne.s32 %p3, %r30, 0;
  wgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16 {{%f1, %f2, %f3, %f4}},
      %rd4, %rd4, %p3, 1, 1, 0, 0;
  wgmma.commit_group.sync.aligned;
  wgmma.wait_group.sync.aligned 0;
  bar.sync 0;
  add.s32 %r20, %r10, %r9;
  mul.wide.u32 %rd10, %r20, -1431655765;
  shr.u64 %rd11, %rd10, 34;
  cvt.u32.u64 %r21, %rd11;
  mul.lo.s32 %r22, %r21, 6;
  sub.s32 %r10, %r20, %r22;
  add.s32 %r30, %r30, 1;
  setp.lt.s32 %p4, %r30, %r4;
  @%p4 bra $L_loop;
  ret;
}}
"""


def test_stage_index_by_magic_division_bounds_the_ring():
    # `(stage + k) % 6` with mul.wide/shr.u64 by 34: the copies land in stages 0..5 only,
    # so the workspace store past them is not in any tile the wgmma reads.
    assert _check(_ring_wgmma(), maps=MAP) == []


@pytest.mark.parametrize("idiom", ["unpack", "deep", "shfl", "selp"])
def test_descriptor_traced_through_grouped_gemm_idioms(idiom):
    # No map sizes (the grouped kernel's maps are rewritten on the device): the tiles are
    # known by their start addresses, which the descriptor must be traced to.
    assert _check(_ring_wgmma(**{idiom: True})) == []


@pytest.mark.parametrize("maps", [MAP, None])
@pytest.mark.parametrize("idiom", ["", "unpack", "deep", "shfl", "selp"])
def test_a_generic_store_into_the_tile_is_still_reported(idiom, maps):
    # The store lands on the first tile's first bytes, which the wgmma reads whatever the
    # box size.
    kw = {idiom: True} if idiom else {}
    found = _check(_ring_wgmma(0, **kw), **({"maps": maps} if maps else {}))
    assert _ids(found) == ["wgmma-smem-no-proxy-fence"], [f.format() for f in found]
    assert "the address of symbol smem" in found[0].message
    assert "no fence.proxy.async.shared::cta follows it" in found[0].message


# -- smem-read-before-wait: a ring of copies of unknown size ends at the next buffer ------------
def _ring_read(read_at: int) -> str:
    """Triton's attention prologue, reduced: Q by a map of known box (8 KiB at smem+32768)
    and a 2-stage ring of K tiles at smem + (k & 1) * 8192 by a map whose box is not known,
    then a read of one byte at `read_at` before the wait."""
    return f"""
.shared .align 1024 .b8 smem[49152];
.visible .entry k(.param .align 64 .b8 k_param_0[128], .param .align 64 .b8 k_param_1[128],
                  .param .u32 k_param_2)
.reqntid 128
{{
  .reg .pred %p<8>;
  .reg .b16 %rs<4>;
  .reg .b32 %r<40>;
  .reg .b64 %rd<8>;
  mov.u32 %r1, %tid.x;
  setp.eq.s32 %p1, %r1, 0;
  mov.u32 %r2, smem;
  add.s32 %r3, %r2, 45056;
  @%p1 mbarrier.init.shared::cta.b64 [%r3], 1;
  bar.sync 0;
  mov.u64 %rd3, k_param_0;
  cvta.param.u64 %rd1, %rd3;
  mov.u64 %rd4, k_param_1;
  cvta.param.u64 %rd2, %rd4;
  ld.param.u32 %r5, [k_param_2];
  mov.u32 %r0, 0;
  add.s32 %r4, %r2, 32768;
  @%p1 mbarrier.arrive.expect_tx.shared::cta.b64 _, [%r3], 8192;
  @%p1 {TMA} [%r4], [%rd2, {{%r0, %r0}}], [%r3];
  mov.u32 %r30, 0;
  mov.u32 %r31, 0;
$L_loop:
  and.b32 %r10, %r30, 1;
  shl.b32 %r11, %r10, 13;
  add.s32 %r12, %r2, %r11;
  @%p1 {TMA} [%r12], [%rd1, {{%r30, %r0}}], [%r3];
  ld.shared.b8 %rs1, [%r2+{read_at}];
$L_wait:
  mbarrier.try_wait.parity.shared::cta.b64 %p2, [%r3], %r31;
  @!%p2 bra.uni $L_wait;
  xor.b32 %r31, %r31, 1;
  bar.sync 0;
  add.s32 %r30, %r30, 1;
  setp.lt.s32 %p4, %r30, %r5;
  @%p4 bra $L_loop;
  ret;
}}
"""


def test_a_ring_of_unknown_box_size_ends_at_the_next_buffer():
    # The ring's last stage starts at 8192; the next buffer (Q) at 32768 bounds it, and Q's
    # box ends at 40960: the byte at 40964 is no copy's destination.
    assert _check(_ring_read(40964), maps={"k_param_1": {"box_bytes": 8192}}) == []


def test_a_read_in_the_ring_before_its_wait_is_still_reported():
    found = _check(_ring_read(8196), maps={"k_param_1": {"box_bytes": 8192}})
    assert _ids(found) == ["smem-read-before-wait"], [f.format() for f in found]
    assert "smem+8196, which a TMA copy writes" in found[0].message


# -- wait-parity-constant: CUTLASS's epilogue laps under `if (source_needed)` --------------------
def _stage(n: int, addr: str, parity: str, skip: str) -> str:
    """One subtile's wait (after every thread's arrive), skipped by `@%p2 bra` when no
    source is needed."""
    return f"""  @%p2 bra {skip};
{addr}
  {parity}
  mbarrier.arrive.shared::cta.b64 %rd{n}, [%r{20 + n}];
$W{n}:
  mbarrier.try_wait.parity.shared::cta.b64 %p{20 + n}, [%r{20 + n}], %r{40 + n};
  @!%p{20 + n} bra.uni $W{n};
{skip}:"""


def _laps(second: str) -> str:
    """Two load stages at smem+64 and +72, four subtiles per tile: stage 0 then 1 for
    parity 0, again for the parity `second` sets (in %r{n}). nvcc spells the stage of a
    subtile under the flag p2 as `selp(0, k, p2)` and the second lap's parity as
    `selp(1, 0, p10)`, p10 the flag's negation: both known only on the path where p2 is
    false."""
    s0 = _stage(0, "  add.s32 %r20, %r2, 64;", "mov.u32 %r40, 0;", "$S0")
    s1 = _stage(1, """  selp.u16 %rs2, 1, 0, %p2;
  mul.wide.u16 %r5, %rs2, 8;
  xor.b32 %r6, %r5, 8;
  add.s32 %r7, %r2, %r6;
  add.s32 %r21, %r7, 64;""", "mov.u32 %r41, 0;", "$S1")
    s2 = _stage(2, """  selp.b32 %r8, 0, 0, %p2;
  shl.b32 %r9, %r8, 3;
  add.s32 %r11, %r2, %r9;
  add.s32 %r22, %r11, 64;""", second.format(n=42), "$S2")
    s3 = _stage(3, """  selp.b32 %r12, 0, 1, %p2;
  shl.b32 %r13, %r12, 3;
  add.s32 %r14, %r2, %r13;
  add.s32 %r23, %r14, 64;""", second.format(n=43), "$S3")
    return f"""
.shared .align 8 .b8 smem[128];
.visible .entry k(.param .u32 k_param_0, .param .u32 k_param_1)
.reqntid 128
{{
  .reg .pred %p<30>;
  .reg .b16 %rs<4>;
  .reg .b32 %r<50>;
  .reg .b64 %rd<8>;
  mov.u32 %r1, %tid.x;
  setp.eq.s32 %p1, %r1, 0;
  mov.u32 %r2, smem;
  @%p1 mbarrier.init.shared::cta.b64 [%r2+64], 128;
  @%p1 mbarrier.init.shared::cta.b64 [%r2+72], 128;
  bar.sync 0;
  ld.param.u32 %r3, [k_param_0];
  setp.ne.s32 %p3, %r3, 0;
  selp.u16 %rs1, 1, 0, %p3;
  ld.param.u32 %r4, [k_param_1];
  mov.u32 %r30, 0;
$L_tile:
  setp.eq.s16 %p2, %rs1, 0;
  setp.ne.s16 %p10, %rs1, 0;
{s0}
{s1}
{s2}
{s3}
  add.s32 %r30, %r30, 1;
  setp.lt.s32 %p4, %r30, %r4;
  @%p4 bra $L_tile;
  ret;
}}
"""


def test_both_laps_of_a_stage_under_the_flag_branch_are_seen():
    assert _check(_laps("selp.u32 %r{n}, 1, 0, %p10;")) == []


def test_a_stage_waited_for_parity_0_on_both_laps_is_still_reported():
    found = _check(_laps("mov.u32 %r{n}, 0;"))
    assert _ids(found) == ["wait-parity-constant"], [f.format() for f in found]
    assert "always waits for parity 0" in found[0].message
