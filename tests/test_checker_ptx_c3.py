"""CUTLASS 3 Hopper idioms the checker reads from compiler PTX (tests/corpus/ptx/nvcc_cutlass):
each as a small kernel parsed with `parse_ptx`, clean, beside its buggy twin."""

from __future__ import annotations

import pytest

from ptxdsl.checker import Severity
from ptxdsl.frontend import parse_ptx

HEAD = ".version 8.7\n.target sm_90a\n.address_size 64\n"


def _check(text: str, **context) -> list:
    found = parse_ptx(HEAD + text, file="k.ptx").check(**context)
    return [f for f in found if f.severity is not Severity.note]


def _ids(found: list) -> list[str]:
    return sorted({f.id for f in found})


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
