"""Held-out hazard kernels, wave 3b (tests/test_checker_wave3.py parametrizes them with wave 3's):
each of the three classes wave 3 found the checker missing, written two more ways.

- The phase after a loop: a wait after a loop whose phase the loop advanced a run-time
  number of times, with a constant parity (`wait-parity-constant`): a bottom-tested loop
  flipping the phase by `1 - p`, and a phase recomputed from the counter (`i & 1`).
- The phase of a ring flipped at the wrong stage (`ring-parity`): a stage computed with `rem`
  and a phase flipped under a guard, and a stage register wrapped in place by a bottom-tested
  producer loop whose phase `selp` tests the stage after its increment.
- Copies in flight together on overlapping bytes (`tma-dst-overlap`): Q, K and V rings in one
  dynamic buffer with V placed over K's second stage, and one ring whose stages are 128
  bytes closer than its box.
"""

from __future__ import annotations

from tests.wave3_kernels import HEAD, REGS, Pair, _maps

LOAD = "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"


def _single(name: str, loop: str, tail: str) -> str:
    """One 8 KiB stage at smem+0, its barrier at smem+8192, refilled each trip by thread 0
    after a `bar.sync`; one more tile loaded after the loop, waited on with `tail`."""
    return HEAD + f"""
.extern .shared .align 1024 .b8 smem[];
.visible .entry {name}(.param .align 64 .b8 {name}_param_0[128], .param .u32 {name}_param_1,
    .param .u64 {name}_param_2)
.reqntid 128
{{
{REGS}  mov.u32 %r1, %tid.x;
  setp.eq.s32 %p1, %r1, 0;
  mov.u32 %r2, smem;
  add.s32 %r3, %r2, 8192;
  @%p1 mbarrier.init.shared::cta.b64 [%r3], 1;
  fence.mbarrier_init.release.cluster;
  bar.sync 0;
  mov.u64 %rd1, {name}_param_0;
  cvta.param.u64 %rd2, %rd1;
  ld.param.u32 %r9, [{name}_param_1];
  shl.b32 %r6, %r1, 2;
  add.s32 %r7, %r2, %r6;
  mov.f32 %f1, 0f00000000;
  mov.b32 %r4, 0;
  mov.b32 %r5, 0;
{loop}  @%p1 mbarrier.arrive.expect_tx.shared::cta.b64 _, [%r3], 8192;
  @%p1 {LOAD}
      [%r2], [%rd2, {{%r4, %r9}}], [%r3];
$L_TWAIT:
  mbarrier.try_wait.parity.shared::cta.b64 %p4, [%r3], {tail};
  @!%p4 bra $L_TWAIT;
  ld.shared.f32 %f3, [%r7];
  add.f32 %f1, %f1, %f3;
  ld.param.u64 %rd3, [{name}_param_2];
  cvta.to.global.u64 %rd4, %rd3;
  mul.wide.u32 %rd5, %r1, 4;
  add.s64 %rd6, %rd4, %rd5;
  st.global.f32 [%rd6], %f1;
  ret;
}}
"""


_TRIP = f"""  @%p1 mbarrier.arrive.expect_tx.shared::cta.b64 _, [%r3], 8192;
  @%p1 {LOAD}
      [%r2], [%rd2, {{%r4, %r4}}], [%r3];
$L_WAIT:
  mbarrier.try_wait.parity.shared::cta.b64 %p2, [%r3], %r5;
  @!%p2 bra $L_WAIT;
  ld.shared.f32 %f2, [%r7];
  add.f32 %f1, %f1, %f2;
"""


def tail_bottom(bug: bool) -> str:
    """nvcc's bottom-tested form (the trip count checked non-zero first), the phase flipped
    by `sub 1, p`; the buggy twin waits after the loop on parity 1 (right only after an odd
    number of trips)."""
    loop = f"""  setp.eq.s32 %p5, %r9, 0;
  @%p5 bra $L_DONE;
$L_LOOP:
{_TRIP}  sub.s32 %r5, 1, %r5;
  add.s32 %r4, %r4, 1;
  bar.sync 0;
  setp.lt.u32 %p3, %r4, %r9;
  @%p3 bra $L_LOOP;
$L_DONE:
"""
    return _single("w3b_tail_bottom", loop, "1" if bug else "%r5")


def tail_counter(bug: bool) -> str:
    """A head-tested loop whose phase is recomputed from the counter each trip (`i & 1`);
    the correct twin waits after the loop on the trip count's parity (`n & 1`), the buggy
    one on parity 0."""
    loop = f"""$L_LOOP:
  setp.ge.u32 %p3, %r4, %r9;
  @%p3 bra $L_DONE;
  and.b32 %r5, %r4, 1;
{_TRIP}  add.s32 %r4, %r4, 1;
  bar.sync 0;
  bra.uni $L_LOOP;
$L_DONE:
  and.b32 %r20, %r9, 1;
"""
    return _single("w3b_tail_counter", loop, "0" if bug else "%r20")


def _ws_ring(name: str, stages: int, consumer: str, producer: str, stride: int = 8192) -> str:
    """Warpgroup 0 consumes a ring of `stages` 8 KiB stages at smem+0 (full barriers at
    smem+32768, empty ones at smem+32800, each 8 bytes apart), thread 128 produces; the
    loops (`consumer`, `producer`) compute the stage in %r10, its full barrier in %r14, its
    empty one in %r15 and its tile (`stride` bytes a stage) in %r17."""
    inits = "".join(f"  @%p1 mbarrier.init.shared::cta.b64 [%r3+{8 * s}], 1;\n"
                    f"  @%p1 mbarrier.init.shared::cta.b64 [%r4+{8 * s}], 128;\n"
                    for s in range(stages))
    return HEAD + f"""
.extern .shared .align 1024 .b8 smem[];
.visible .entry {name}(.param .align 64 .b8 {name}_param_0[128],
    .param .u32 {name}_param_1, .param .u64 {name}_param_2)
.reqntid 160
{{
{REGS}  mov.u32 %r1, %tid.x;
  mov.u32 %r2, smem;
  add.s32 %r3, %r2, 32768;
  add.s32 %r4, %r3, 32;
  setp.eq.s32 %p1, %r1, 0;
{inits}  fence.mbarrier_init.release.cluster;
  bar.sync 0;
  ld.param.u32 %r9, [{name}_param_1];
  mov.b32 %r12, 0;
  setp.ge.u32 %p2, %r1, 128;
  @%p2 bra $L_PROD;
  mov.f32 %f1, 0f00000000;
  mov.b32 %r10, 0;
  mov.b32 %r11, 0;
{consumer}$L_OUT:
  ld.param.u64 %rd3, [{name}_param_2];
  cvta.to.global.u64 %rd4, %rd3;
  mul.wide.u32 %rd5, %r1, 4;
  add.s64 %rd6, %rd4, %rd5;
  st.global.f32 [%rd6], %f1;
  bra.uni $L_END;
$L_PROD:
  setp.ne.s32 %p8, %r1, 128;
  @%p8 bra $L_END;
  mov.u64 %rd1, {name}_param_0;
  cvta.param.u64 %rd2, %rd1;
  mov.b32 %r10, 0;
  mov.b32 %r21, 1;
{producer}$L_END:
  ret;
}}
""".replace("STRIDE", str(stride))


_SLOT = """  shl.b32 %r13, %r10, 3;
  add.s32 %r14, %r3, %r13;
  add.s32 %r15, %r4, %r13;
  mul.lo.s32 %r16, %r10, STRIDE;
  add.s32 %r17, %r2, %r16;
"""
_CONSUME = """$L_CWAIT:
  mbarrier.try_wait.parity.shared::cta.b64 %p4, [%r14], %r11;
  @!%p4 bra $L_CWAIT;
  shl.b32 %r18, %r1, 2;
  add.s32 %r19, %r17, %r18;
  ld.shared.f32 %f2, [%r19];
  add.f32 %f1, %f1, %f2;
  mbarrier.arrive.shared::cta.b64 _, [%r15];
"""
_PRODUCE = f"""$L_PWAIT:
  mbarrier.try_wait.parity.shared::cta.b64 %p10, [%r15], %r21;
  @!%p10 bra $L_PWAIT;
  mbarrier.arrive.expect_tx.shared::cta.b64 _, [%r14], 8192;
  {LOAD}
      [%r17], [%rd2, {{%r12, %r12}}], [%r14];
"""


def flip_rem(bug: bool) -> str:
    """A 3-stage ring, the stage `i % 3` of the trip counter, the phase flipped under a guard
    after the trip that used the last stage (`@p xor`); the buggy consumer flips it after
    stage 1."""
    def loop(tag: str, phase: str, work: str, last: int) -> str:
        return f"""$L_{tag}LOOP:
  setp.ge.u32 %p3, %r12, %r9;
  @%p3 bra $L_{tag}DONE;
  rem.u32 %r10, %r12, 3;
{_SLOT}{work}  setp.eq.s32 %p6, %r10, {last};
  @%p6 xor.b32 {phase}, {phase}, 1;
  add.s32 %r12, %r12, 1;
  bra.uni $L_{tag}LOOP;
$L_{tag}DONE:
"""
    consumer = loop("C", "%r11", _CONSUME, 1 if bug else 2) + "  bra.uni $L_OUT;\n"
    producer = loop("P", "%r21", _PRODUCE, 2)
    return _ws_ring("w3b_flip_rem", 3, consumer, producer)


def flip_inplace(bug: bool) -> str:
    """A 2-stage ring run by bottom-tested loops (the trip count checked non-zero first), the
    stage register advanced in place (`s += 1; s = s == 2 ? 0 : s`) and the phase flipped by
    `selp` on the wrap's predicate; the buggy producer's `selp` tests `s == 1` after the
    increment instead (it flips after stage 0)."""
    def loop(tag: str, phase: str, work: str, flip: str) -> str:
        return f"""  setp.eq.s32 %p3, %r9, 0;
  @%p3 bra $L_{tag}DONE;
$L_{tag}LOOP:
{_SLOT}{work}  add.s32 %r10, %r10, 1;
  setp.eq.s32 %p6, %r10, 2;
  setp.eq.s32 %p7, %r10, 1;
  selp.b32 %r10, 0, %r10, %p6;
  xor.b32 %r20, {phase}, 1;
  selp.b32 {phase}, %r20, {phase}, {flip};
  add.s32 %r12, %r12, 1;
  setp.lt.u32 %p9, %r12, %r9;
  @%p9 bra $L_{tag}LOOP;
$L_{tag}DONE:
"""
    consumer = loop("C", "%r11", _CONSUME, "%p6") + "  bra.uni $L_OUT;\n"
    producer = loop("P", "%r21", _PRODUCE, "%p7" if bug else "%p6")
    return _ws_ring("w3b_flip_inplace", 2, consumer, producer)


def ring_stride(bug: bool) -> str:
    """A 3-stage ring (stage `i % 3`, phase `(i / 3) & 1`) whose producer waits for each
    stage's release before refilling it; the buggy twin's stages are 8064 bytes apart, 128
    bytes less than the 8 KiB box, so each copy overwrites the end of the stage below it,
    which may still be in flight."""
    def loop(tag: str, phase: str, flip: str, work: str) -> str:
        return f"""$L_{tag}LOOP:
  setp.ge.u32 %p3, %r12, %r9;
  @%p3 bra $L_{tag}DONE;
  rem.u32 %r10, %r12, 3;
  div.u32 %r22, %r12, 3;
  and.b32 %r23, %r22, 1;
  {flip}
{_SLOT}{work}  add.s32 %r12, %r12, 1;
  bra.uni $L_{tag}LOOP;
$L_{tag}DONE:
"""
    consumer = loop("C", "%r11", "mov.b32 %r11, %r23;", _CONSUME) + "  bra.uni $L_OUT;\n"
    producer = loop("P", "%r21", "xor.b32 %r21, %r23, 1;", _PRODUCE)
    return _ws_ring("w3b_ring_stride", 3, consumer, producer, 8064 if bug else 8192)


def qkv_rings(bug: bool) -> str:
    """FA3's layout: Q (one 8 KiB stage), K and V (two stages each) in one dynamic buffer at
    computed offsets, Q loaded once, K and V by one producer loop that waits for each stage's
    release before refilling it. The buggy twin places V one K stage on instead of two: V's
    first stage is K's second, and the two are in flight together on their own barriers."""
    name = "w3b_qkv_rings"
    v_at = 8192 if bug else 16384
    return HEAD + f"""
.extern .shared .align 1024 .b8 smem[];
.visible .entry {name}(.param .align 64 .b8 {name}_param_0[128],
    .param .align 64 .b8 {name}_param_1[128], .param .align 64 .b8 {name}_param_2[128],
    .param .u32 {name}_param_3, .param .u64 {name}_param_4)
.reqntid 160
{{
{REGS}  mov.u32 %r1, %tid.x;
  mov.u32 %r2, smem;
  add.s32 %r3, %r2, 8192;
  add.s32 %r4, %r3, {v_at};
  add.s32 %r5, %r2, 49152;
  setp.eq.s32 %p1, %r1, 0;
  @%p1 mbarrier.init.shared::cta.b64 [%r5], 1;
  @%p1 mbarrier.init.shared::cta.b64 [%r5+8], 1;
  @%p1 mbarrier.init.shared::cta.b64 [%r5+16], 1;
  @%p1 mbarrier.init.shared::cta.b64 [%r5+24], 128;
  @%p1 mbarrier.init.shared::cta.b64 [%r5+32], 128;
  @%p1 mbarrier.init.shared::cta.b64 [%r5+40], 1;
  @%p1 mbarrier.init.shared::cta.b64 [%r5+48], 1;
  @%p1 mbarrier.init.shared::cta.b64 [%r5+56], 128;
  @%p1 mbarrier.init.shared::cta.b64 [%r5+64], 128;
  fence.mbarrier_init.release.cluster;
  bar.sync 0;
  ld.param.u32 %r9, [{name}_param_3];
  mov.b32 %r12, 0;
  setp.ge.u32 %p2, %r1, 128;
  @%p2 bra $L_PROD;
  mov.f32 %f1, 0f00000000;
  shl.b32 %r18, %r1, 2;
$L_QWAIT:
  mbarrier.try_wait.parity.shared::cta.b64 %p4, [%r5], 0;
  @!%p4 bra $L_QWAIT;
  add.s32 %r19, %r2, %r18;
  ld.shared.f32 %f1, [%r19];
$L_CLOOP:
  setp.ge.u32 %p3, %r12, %r9;
  @%p3 bra $L_OUT;
  and.b32 %r10, %r12, 1;
  shr.u32 %r22, %r12, 1;
  and.b32 %r11, %r22, 1;
  shl.b32 %r13, %r10, 3;
  add.s32 %r14, %r5, %r13;
  shl.b32 %r16, %r10, 13;
$L_KWAIT:
  mbarrier.try_wait.parity.shared::cta.b64 %p5, [%r14+8], %r11;
  @!%p5 bra $L_KWAIT;
  add.s32 %r17, %r3, %r16;
  add.s32 %r19, %r17, %r18;
  ld.shared.f32 %f2, [%r19];
  add.f32 %f1, %f1, %f2;
  mbarrier.arrive.shared::cta.b64 _, [%r14+24];
$L_VWAIT:
  mbarrier.try_wait.parity.shared::cta.b64 %p6, [%r14+40], %r11;
  @!%p6 bra $L_VWAIT;
  add.s32 %r17, %r4, %r16;
  add.s32 %r19, %r17, %r18;
  ld.shared.f32 %f2, [%r19];
  add.f32 %f1, %f1, %f2;
  mbarrier.arrive.shared::cta.b64 _, [%r14+56];
  add.s32 %r12, %r12, 1;
  bra.uni $L_CLOOP;
$L_OUT:
  ld.param.u64 %rd7, [{name}_param_4];
  cvta.to.global.u64 %rd8, %rd7;
  mul.wide.u32 %rd9, %r1, 4;
  add.s64 %rd10, %rd8, %rd9;
  st.global.f32 [%rd10], %f1;
  bra.uni $L_END;
$L_PROD:
  setp.ne.s32 %p8, %r1, 128;
  @%p8 bra $L_END;
  mov.u64 %rd1, {name}_param_0;
  cvta.param.u64 %rd2, %rd1;
  mov.u64 %rd3, {name}_param_1;
  cvta.param.u64 %rd4, %rd3;
  mov.u64 %rd5, {name}_param_2;
  cvta.param.u64 %rd6, %rd5;
  mbarrier.arrive.expect_tx.shared::cta.b64 _, [%r5], 8192;
  {LOAD}
      [%r2], [%rd2, {{%r9, %r9}}], [%r5];
$L_PLOOP:
  setp.ge.u32 %p9, %r12, %r9;
  @%p9 bra $L_END;
  and.b32 %r10, %r12, 1;
  shr.u32 %r22, %r12, 1;
  and.b32 %r23, %r22, 1;
  xor.b32 %r21, %r23, 1;
  shl.b32 %r13, %r10, 3;
  add.s32 %r14, %r5, %r13;
  shl.b32 %r16, %r10, 13;
$L_KEMPTY:
  mbarrier.try_wait.parity.shared::cta.b64 %p10, [%r14+24], %r21;
  @!%p10 bra $L_KEMPTY;
  mbarrier.arrive.expect_tx.shared::cta.b64 _, [%r14+8], 8192;
  add.s32 %r17, %r3, %r16;
  {LOAD}
      [%r17], [%rd4, {{%r12, %r9}}], [%r14+8];
$L_VEMPTY:
  mbarrier.try_wait.parity.shared::cta.b64 %p11, [%r14+56], %r21;
  @!%p11 bra $L_VEMPTY;
  mbarrier.arrive.expect_tx.shared::cta.b64 _, [%r14+40], 8192;
  add.s32 %r17, %r4, %r16;
  {LOAD}
      [%r17], [%rd6, {{%r12, %r9}}], [%r14+40];
  add.s32 %r12, %r12, 1;
  bra.uni $L_PLOOP;
$L_END:
  ret;
}}
"""


def tail_fixed(trips: int, tail: str) -> str:
    """A head-tested loop of a constant `trips`, the phase flipped by `xor` each trip, and the
    tail wait on `tail` (for the boundary tests: no pair)."""
    loop = f"""$L_LOOP:
  setp.ge.u32 %p3, %r4, {trips};
  @%p3 bra $L_DONE;
{_TRIP}  xor.b32 %r5, %r5, 1;
  add.s32 %r4, %r4, 1;
  bar.sync 0;
  bra.uni $L_LOOP;
$L_DONE:
"""
    return _single("w3b_tail_fixed", loop, tail)


PAIRS = [
    Pair("w3b_tail_bottom", "wait-parity-constant", tail_bottom, _maps("w3b_tail_bottom", 0)),
    Pair("w3b_tail_counter", "wait-parity-constant", tail_counter,
         _maps("w3b_tail_counter", 0)),
    Pair("w3b_flip_rem", "ring-parity", flip_rem, _maps("w3b_flip_rem", 0)),
    Pair("w3b_flip_inplace", "ring-parity", flip_inplace, _maps("w3b_flip_inplace", 0)),
    Pair("w3b_ring_stride", "tma-dst-overlap", ring_stride, _maps("w3b_ring_stride", 0)),
    Pair("w3b_qkv_rings", "tma-dst-overlap", qkv_rings, _maps("w3b_qkv_rings", 0, 1, 2)),
]
