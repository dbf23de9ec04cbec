"""An interaction of merged checker changes on Triton's warp-specialized kernels
(tl_attention_fwd_ws_bm64, tl_ws_matmul_desc): once raw `ld.shared.b8` reads count as shared
reads, each partition's read of its state byte looked like a read of the TMA ring before any
wait. Three bounds make it clean: the warp broadcast's range is its source's (`tid >> 5`), a
stage pointer stepped from another just-zeroed stepped register starts at that constant, and a
ring load of unknown box ends where the ring's next stage begins. Each kernel is parsed with
`parse_ptx`; a read that does fall in a stage is still reported."""

from __future__ import annotations

from tests.ptx_check_support import HEAD
from tests.ptx_check_support import check_text as _check


def _ws(read_at: int) -> str:
    """Triton's warp-specialized producer (tl_ws_matmul_desc): thread 0 fills two rings of
    three stages with TMA loads of unknown box, never waiting (the consumers do), then every
    warp reads its partition's state byte at `global_smem + read_at + warp` (the warp index
    broadcast by `shfl.sync.idx`, read by `ld.shared.b8` into a .b16 register: raw text).
    The B ring (16384-byte stages at 0) and the barrier ring are stepped from the A ring's
    start (`mov p_b, p_a` after `mov p_a, 0`), LLVM's strength-reduced `p - 3S * (k / 3)`;
    the A ring has 8192-byte stages at 49152, the barriers sit at 73728."""
    return f"""
.extern .shared .align 16 .b8 global_smem[];
.visible .entry k(.param .align 64 .b8 k_param_0[128], .param .align 64 .b8 k_param_1[128],
                  .param .u32 k_param_2)
.reqntid 384
{{
  .reg .pred %p<8>;
  .reg .b16 %rs<4>;
  .reg .b32 %r<40>;
  .reg .b64 %rd<12>;
  mov.u32 %r1, %tid.x;
  shr.u32 %r2, %r1, 5;
  shfl.sync.idx.b32 %r3, %r2, 0, 31, -1;
  setp.eq.s32 %p1, %r1, 0;
  mov.b32 %r9, global_smem;
  add.s32 %r30, %r9, 73728;
  @%p1 mbarrier.init.shared::cta.b64 [%r30], 1;
  @%p1 mbarrier.init.shared::cta.b64 [%r30+8], 1;
  @%p1 mbarrier.init.shared::cta.b64 [%r30+16], 1;
  fence.proxy.async.shared::cta;
  bar.sync 0;
  mov.u64 %rd4, k_param_0;
  cvta.param.u64 %rd1, %rd4;
  mov.u64 %rd7, k_param_1;
  cvta.param.u64 %rd6, %rd7;
  ld.param.u32 %r20, [k_param_2];
  setp.lt.s32 %p2, %r20, 1;
  @%p2 bra $L__DONE;
  mov.b64 %rd2, 0;
  mov.b32 %r21, 0;
  mov.b32 %r22, %r21;
  mov.b32 %r23, %r21;
  mov.b32 %r24, %r21;
$L__LOOP:
  mul.hi.u64 %rd3, %rd2, -6148914691236517205;
  shr.u64 %rd5, %rd3, 1;
  cvt.u32.u64 %r4, %rd5;
  mul.lo.s32 %r5, %r4, 24;
  sub.s32 %r6, %r23, %r5;
  add.s32 %r7, %r30, %r6;
  mul.lo.s32 %r8, %r4, 24576;
  sub.s32 %r10, %r21, %r8;
  mul.lo.s32 %r11, %r4, 49152;
  sub.s32 %r12, %r22, %r11;
  add.s32 %r13, %r9, %r10;
  add.s32 %r15, %r13, 49152;
  add.s32 %r14, %r9, %r12;
  @%p1 mbarrier.arrive.expect_tx.shared::cta.b64 _, [%r7], 24576;
  @%p1 cp.async.bulk.tensor.2d.shared::cta.global.mbarrier::complete_tx::bytes
      [%r15], [%rd1, {{%r24, %r24}}], [%r7];
  @%p1 cp.async.bulk.tensor.2d.shared::cta.global.mbarrier::complete_tx::bytes
      [%r14], [%rd6, {{%r24, %r24}}], [%r7];
  add.s64 %rd2, %rd2, 1;
  add.s32 %r21, %r21, 8192;
  add.s32 %r22, %r22, 16384;
  add.s32 %r23, %r23, 8;
  add.s32 %r24, %r24, 64;
  setp.lt.s32 %p3, %r24, %r20;
  @%p3 bra $L__LOOP;
$L__DONE:
  barrier.sync 1;
  add.s32 %r25, %r9, %r3;
  ld.shared.b8 %rs1, [%r25+{read_at}];
  setp.eq.b16 %p4, %rs1, 0;
  @%p4 bra $L__END;
  bar.sync 0;
$L__END:
  ret;
}}
"""


def _read_line(text: str) -> int:
    return next(i for i, line in enumerate((HEAD + text).splitlines(), 1)
                if "ld.shared.b8" in line)


def test_a_warp_state_byte_past_the_ring_stages_is_not_a_ring_read():
    assert _check(_ws(73760)) == []


def test_a_read_in_a_stage_of_the_ring_stepped_from_another_is_reported():
    text = _ws(16400)                     # stage 1 of the B ring: [16384, 32768)
    found = _check(text)
    assert [f.id for f in found] == ["smem-read-before-wait"], [f.format() for f in found]
    assert f"k.ptx:{_read_line(text)}:" in found[0].format()


def test_a_read_in_the_last_stage_of_a_ring_is_reported():
    # The A ring's third stage is [65536, 73728): a load of unknown box reaches its end.
    found = _check(_ws(73700))
    assert [f.id for f in found] == ["smem-read-before-wait"], [f.format() for f in found]
