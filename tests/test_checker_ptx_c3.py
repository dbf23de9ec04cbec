"""CUTLASS 3 Hopper idioms the checker reads from compiler PTX (tests/corpus/ptx/nvcc_cutlass):
each as a small kernel parsed with `parse_ptx`, clean, beside its buggy twin."""

from __future__ import annotations

import pytest

from ptxdsl.frontend import parse_ptx
from tests.ptx_check_support import HEAD
from tests.ptx_check_support import check_text as _check
from tests.ptx_check_support import ids as _ids


# -- bulk-src-overwrite: the TMA-store epilogue's ring of staging buffers ----------------------
def _epilogue(offset: str, second: int) -> str:
    """CUTLASS's TMA-store epilogue on a ring of two 4 KiB buffers: every thread writes 16
    bytes at `buffer + %r20` (`offset` computes %r20 from %r1 = %tid.x), thread 0 stores the
    buffer, commits, and waits with `wait_group.read 1` (one store stays in flight), then the
    threads write the buffer at `second` (4096: the other one; 0: the one still being read)."""
    return f"""
.extern .shared .align 1024 .b8 smem[];
.visible .entry k(.param .align 64 .b8 k_tmap[128])
.reqntid 128
{{
  .reg .pred %p<4>;
  .reg .b32 %r<40>;
  .reg .b64 %rd<4>;
  mov.u64 %rd2, k_tmap;
  cvta.param.u64 %rd1, %rd2;
  mov.u32 %r1, %tid.x;
  setp.eq.s32 %p1, %r1, 0;
  mov.u32 %r2, smem;
{offset}
  add.s32 %r21, %r2, %r20;
  st.shared.v4.b32 [%r21], {{%r1, %r1, %r1, %r1}};
  fence.proxy.async.shared::cta;
  bar.sync 0;
  @%p1 cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%rd1, {{%r1, %r1}}], [%r2];
  @%p1 cp.async.bulk.commit_group;
  @%p1 cp.async.bulk.wait_group.read 1;
  bar.sync 0;
  add.s32 %r22, %r21, {second};
  st.shared.v4.b32 [%r22], {{%r1, %r1, %r1, %r1}};
  fence.proxy.async.shared::cta;
  bar.sync 0;
  add.s32 %r23, %r2, 4096;
  @%p1 cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%rd1, {{%r1, %r1}}], [%r23];
  @%p1 cp.async.bulk.commit_group;
  @%p1 cp.async.bulk.wait_group.read 0;
  ret;
}}
"""


# `(ctaid * 128 + tid) % 128` as nvcc writes a signed int's remainder when it cannot prove
# the value non-negative: a - ((a + ((a >> 31) >>> 25)) & -128). The bias is 0 for a >= 0,
# and a - (a & -128) keeps a's low 7 bits: a row of [0, 127], 32 bytes each.
SIGNED_REM = """
  mov.u32 %r8, %ctaid.x;
  shl.b32 %r9, %r8, 7;
  add.s32 %r10, %r9, %r1;
  shr.s32 %r3, %r10, 31;
  shr.u32 %r4, %r3, 25;
  add.s32 %r5, %r10, %r4;
  and.b32 %r6, %r5, -128;
  sub.s32 %r7, %r10, %r6;
  shl.b32 %r20, %r7, 5;"""

# CUTLASS's 128B swizzle of a row index: (r & 192 | r & 8) ^ (r & 192) >> 3 sets only bits 3, 4,
# 6 and 7 (at most 216; the bounds of an `or` and an `xor` would add up to 255). Here the row
# is a value no thread index bounds (the CTA's), times 16 bytes: at most 3456.
SWIZZLE_BITS = """
  mov.u32 %r8, %ctaid.x;
  and.b32 %r3, %r8, 192;
  and.b32 %r4, %r8, 8;
  or.b32 %r5, %r3, %r4;
  shr.u32 %r6, %r3, 3;
  xor.b32 %r7, %r5, %r6;
  shl.b32 %r20, %r7, 4;"""

# A row offset of +16 or -16 bytes picked by one bit of the thread index (the second
# stmatrix of CUTLASS's swizzled epilogue, `selp 16, -16`): the odd threads that step back
# 16 bytes started 16 bytes in, so no thread leaves [0, 4048]; the bounds of the two terms
# alone reach -16, into the buffer before.
SELECTED_STEP = """
  and.b32 %r3, %r1, 1;
  shl.b32 %r4, %r3, 4;
  setp.eq.s32 %p2, %r3, 0;
  selp.b32 %r5, 16, -16, %p2;
  add.s32 %r6, %r4, %r5;
  shr.u32 %r7, %r1, 1;
  shl.b32 %r8, %r7, 6;
  add.s32 %r20, %r8, %r6;"""

OFFSETS = {"signed_rem": SIGNED_REM, "swizzle_bits": SWIZZLE_BITS,
           "selected_step": SELECTED_STEP}


@pytest.mark.parametrize("offset", sorted(OFFSETS))
def test_epilogue_ring_writes_the_other_buffer_while_a_store_is_in_flight(offset):
    assert _check(_epilogue(OFFSETS[offset], 4096)) == []


@pytest.mark.parametrize("offset", sorted(OFFSETS))
def test_epilogue_writing_the_buffer_still_read_is_found(offset):
    found = _check(_epilogue(OFFSETS[offset], 0))
    assert _ids(found) == ["bulk-src-overwrite"], [f.format() for f in found]
    assert found[0].sites[0].ptx.startswith("st.shared.v4.b32 [%r22]")   # the second write


# -- wait-parity-constant: constant parities that are right ------------------------------------
def _laps(parities: tuple[int, ...]) -> str:
    """A loop over tiles waiting on a ring of two full barriers unrolled over two laps, as
    CUTLASS's epilogue does when a tile has twice as many subtiles as the ring has stages:
    stage 0, stage 1, stage 0, stage 1, with the constant parities given. Each wait is
    CUTLASS's ClusterBarrier::wait retry loop; thread 0 arrives before each wait."""
    steps = []
    for n, parity in enumerate(parities):
        bar = "%r2" if n % 2 == 0 else "%r3"
        steps.append(f"""  @%p1 mbarrier.arrive.shared::cta.b64 _, [{bar}];
  {{
  .reg .pred P1;
  LAB_WAIT:
  mbarrier.try_wait.parity.shared::cta.b64 P1, [{bar}], {parity};
  @P1 bra DONE;
  bra LAB_WAIT;
  DONE:
  }}""")
    body = "\n".join(steps)
    return f"""
.shared .align 8 .b8 bars[16];
.visible .entry k(.param .u32 k_n)
.reqntid 128
{{
  .reg .pred %p<4>;
  .reg .b32 %r<20>;
  ld.param.u32 %r5, [k_n];
  mov.u32 %r1, %tid.x;
  setp.eq.s32 %p1, %r1, 0;
  mov.u32 %r2, bars;
  add.s32 %r3, %r2, 8;
  @%p1 mbarrier.init.shared::cta.b64 [%r2], 1;
  @%p1 mbarrier.init.shared::cta.b64 [%r3], 1;
  bar.sync 0;
  mov.u32 %r6, 0;
$L_tile:
{body}
  add.s32 %r6, %r6, 1;
  setp.lt.u32 %p2, %r6, %r5;
  @%p2 bra $L_tile;
  ret;
}}
"""


def test_ring_unrolled_over_two_laps_waits_each_stage_for_both_parities():
    assert _check(_laps((0, 0, 1, 1))) == []


def test_ring_unrolled_over_two_laps_with_one_parity_is_found():
    found = _check(_laps((0, 0, 0, 0)))
    assert _ids(found) == ["wait-parity-constant"], [f.format() for f in found]


def _turns(condition: str, picked: int = 1) -> str:
    """CUTLASS's ping-pong consumers: the two math warpgroups take turns on one barrier,
    each tile loop waiting for a parity fixed per warpgroup (`condition` picks 1; from
    %tid.x it differs between warpgroups, from a parameter it is one value for the CTA)."""
    return f"""
.shared .align 8 .b8 bars[8];
.visible .entry k(.param .u32 k_n)
.reqntid 256
{{
  .reg .pred %p<4>;
  .reg .b32 %r<20>;
  ld.param.u32 %r5, [k_n];
  mov.u32 %r1, %tid.x;
  setp.eq.s32 %p1, %r1, 0;
  mov.u32 %r2, bars;
  @%p1 mbarrier.init.shared::cta.b64 [%r2], 256;
  bar.sync 0;
  {condition}
  mov.u32 %r7, 0;
  @!%p3 bra $L_go;
  mov.u32 %r7, {picked};
$L_go:
  mov.u32 %r6, 0;
$L_tile:
  mbarrier.arrive.shared::cta.b64 _, [%r2];
  {{
  .reg .pred P1;
  LAB_WAIT:
  mbarrier.try_wait.parity.shared::cta.b64 P1, [%r2], %r7;
  @P1 bra DONE;
  bra LAB_WAIT;
  DONE:
  }}
  add.s32 %r6, %r6, 1;
  setp.lt.u32 %p2, %r6, %r5;
  @%p2 bra $L_tile;
  ret;
}}
"""


def test_warpgroups_taking_turns_with_their_own_parity_are_a_note():
    text = _turns("shr.u32 %r8, %r1, 7;\n  setp.eq.s32 %p3, %r8, 1;")
    assert _check(text) == []
    notes = parse_ptx(HEAD + text, file="k.ptx").check(notes=True)
    assert any("differs between warps" in f.message for f in notes)


def test_one_parity_for_the_whole_cta_is_still_found():
    found = _check(_turns("setp.eq.s32 %p3, %r5, 7;"))
    assert _ids(found) == ["wait-parity-constant"], [f.format() for f in found]


def test_warpgroups_that_all_wait_for_one_parity_are_still_found():
    # Chosen per warpgroup, but 0 (or 2) in each: no group waits for the other phase.
    found = _check(_turns("shr.u32 %r8, %r1, 7;\n  setp.eq.s32 %p3, %r8, 1;", picked=2))
    assert _ids(found) == ["wait-parity-constant"], [f.format() for f in found]


# -- wgmma-smem-released: an ordering barrier is no release ------------------------------------
_WAIT = """  {{
  .reg .pred P1;
  LAB_WAIT:
  mbarrier.try_wait.parity.shared::cta.b64 P1, [{bar}], {parity};
  @P1 bra DONE;
  bra LAB_WAIT;
  DONE:
  }}"""


_LOAD = "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
_MMA = "wgmma.mma_async.sync.aligned.m64n16k16.f32.bf16.bf16"


def _ordered(early: str) -> str:
    """A producer thread (warpgroup 0) refills one 8 KiB stage by TMA after the empty
    barrier's wait; the consumer warpgroup waits for the full barrier, multiplies from the
    stage with wgmma, arrives on `early` while the wgmma may still run, then waits for it and
    releases the stage on the empty barrier. `early` is CUTLASS's ping-pong order barrier
    (%r9: no producer waits on it) or the empty barrier itself (%r4: the stage handed back
    too soon)."""
    return f"""
.extern .shared .align 1024 .b8 smem[];
.visible .entry k(.param .align 64 .b8 k_tmap[128], .param .u32 k_n)
.reqntid 256
{{
  .reg .pred %p<8>;
  .reg .b32 %r<40>;
  .reg .b64 %rd<20>;
  .reg .f32 %f<9>;
  ld.param.u32 %r5, [k_n];
  mov.u64 %rd2, k_tmap;
  cvta.param.u64 %rd1, %rd2;
  mov.u32 %r1, %tid.x;
  mov.u32 %r2, smem;
  add.s32 %r3, %r2, 8192;
  add.s32 %r4, %r2, 8200;
  add.s32 %r9, %r2, 8208;
  setp.eq.s32 %p1, %r1, 0;
  @%p1 mbarrier.init.shared::cta.b64 [%r3], 1;
  @%p1 mbarrier.init.shared::cta.b64 [%r4], 128;
  @%p1 mbarrier.init.shared::cta.b64 [%r9], 128;
  fence.mbarrier_init.release.cluster;
  bar.sync 0;
  mov.u32 %r6, 0;
  mov.u32 %r7, 0;
  setp.lt.u32 %p2, %r1, 128;
  @!%p2 bra $L_consumer;
  @!%p1 bra $L_end;
$L_prod:
  xor.b32 %r8, %r7, 1;
{_WAIT.format(bar="%r4", parity="%r8")}
  mbarrier.arrive.expect_tx.shared::cta.b64 _, [%r3], 8192;
  {_LOAD} [%r2], [%rd1, {{%r6, %r6}}], [%r3];
  xor.b32 %r7, %r7, 1;
  add.s32 %r6, %r6, 1;
  setp.lt.u32 %p3, %r6, %r5;
  @%p3 bra $L_prod;
  bra.uni $L_end;
$L_consumer:
  shr.u32 %r20, %r2, 4;
  cvt.u64.u32 %rd3, %r20;
  or.b64 %rd4, %rd3, 4611686018427387904;
  mov.f32 %f1, 0f00000000;
  mov.f32 %f2, 0f00000000;
  mov.f32 %f3, 0f00000000;
  mov.f32 %f4, 0f00000000;
  mov.f32 %f5, 0f00000000;
  mov.f32 %f6, 0f00000000;
  mov.f32 %f7, 0f00000000;
  mov.f32 %f8, 0f00000000;
$L_cons:
{_WAIT.format(bar="%r3", parity="%r7")}
  wgmma.fence.sync.aligned;
  {_MMA} {{%f1, %f2, %f3, %f4, %f5, %f6, %f7, %f8}}, %rd4, %rd4, 1, 1, 1, 0, 1;
  wgmma.commit_group.sync.aligned;
  mbarrier.arrive.shared::cta.b64 _, [{early}];
  wgmma.wait_group.sync.aligned 0;
  mbarrier.arrive.shared::cta.b64 _, [%r4];
  xor.b32 %r7, %r7, 1;
  add.s32 %r6, %r6, 1;
  setp.lt.u32 %p3, %r6, %r5;
  @%p3 bra $L_cons;
$L_end:
  ret;
}}
"""


def test_arrive_on_a_barrier_no_producer_waits_for_releases_nothing():
    assert _check(_ordered("%r9")) == []


def test_arrive_on_the_empty_barrier_before_the_wgmma_finished_is_found():
    found = _check(_ordered("%r4"))
    assert _ids(found) == ["wgmma-smem-released"], [f.format() for f in found]
    assert found[0].sites[0].ptx == "mbarrier.arrive.shared::cta.b64 _, [%r4];"


# -- bulk-group-not-waited: the "did any tile run" flag before the epilogue's last wait --------
def _tail(latch_flag: int) -> str:
    """A persistent loop over tiles storing each by TMA (one store kept in flight), and
    nvcc's flag for "a tile ran": `mov.pred %p4, -1` before the loop, `mov.pred %p4,
    latch_flag` in its latch, and `@%p4 bra` past the final wait_group (CUTLASS's
    store_tail, which only a CTA that stored needs)."""
    return f"""
.extern .shared .align 1024 .b8 smem[];
.visible .entry k(.param .align 64 .b8 k_tmap[128], .param .u32 k_n)
.reqntid 128
{{
  .reg .pred %p<8>;
  .reg .b32 %r<20>;
  .reg .b64 %rd<4>;
  ld.param.u32 %r5, [k_n];
  mov.u64 %rd2, k_tmap;
  cvta.param.u64 %rd1, %rd2;
  mov.u32 %r1, %tid.x;
  setp.eq.s32 %p1, %r1, 0;
  mov.u32 %r2, smem;
  mov.u32 %r6, %ctaid.x;
  mov.u32 %r7, %nctaid.x;
  setp.ge.u32 %p2, %r6, %r5;
  mov.pred %p4, -1;
  @%p2 bra $L_after;
$L_tile:
  bar.sync 0;
  @%p1 cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%rd1, {{%r6, %r6}}], [%r2];
  @%p1 cp.async.bulk.commit_group;
  @%p1 cp.async.bulk.wait_group.read 1;
  add.s32 %r6, %r6, %r7;
  setp.lt.u32 %p3, %r6, %r5;
  mov.pred %p4, {latch_flag};
  @%p3 bra $L_tile;
$L_after:
  @%p4 bra $L_end;
  cp.async.bulk.wait_group.read 0;
$L_end:
  ret;
}}
"""


def test_flag_that_skips_the_last_wait_only_when_no_tile_ran():
    assert _check(_tail(0)) == []


def test_flag_that_skips_the_last_wait_after_tiles_ran_is_found():
    found = _check(_tail(-1))
    assert _ids(found) == ["bulk-group-not-waited"], [f.format() for f in found]
