"""Held-out hazard kernels, wave 3 (tests/test_checker_wave3.py): raw PTX text as nvcc and
hand-written CUTLASS-style kernels look, read by the front end. Registers are nvcc's %r/%rd/%p/%f,
rings are carved from one `.extern .shared` buffer at computed offsets, a ring's stage and
phase are recomputed each trip (`rem`/`div` of one counter) or carried and wrapped with `selp`,
producers are an `elect.sync` lane of one warp, roles split by `@%p bra`, and some work sits in
`.func`s. Each `Pair` builds its kernel from `bug`: the buggy twin differs by one mistake."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs

HEAD = ".version 8.7\n.target sm_90a\n.address_size 64\n"
REGS = """  .reg .pred %p<32>;
  .reg .b32 %r<96>;
  .reg .f32 %f<32>;
  .reg .b64 %rd<32>;
"""
BOX = 8192                                   # bytes of one box of every map below
MULTICAST_LOAD = ("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
                  ".multicast::cluster")


@attrs.frozen
class Pair:
    """A kernel with one planted mistake (`build(True)`) and its correct twin (`build(False)`)."""

    name: str
    hazard: str                      # the id the buggy twin must be reported with
    build: Callable[[bool], str]     # PTX module text
    context: dict[str, Any] = attrs.field(factory=dict)
    also: tuple[str, ...] = ()       # other ids the same mistake rightly causes


def _maps(kernel: str, *params: int, box: int = BOX, swizzle: str | None = None) -> dict:
    desc: dict[str, Any] = {"box_bytes": box}
    if swizzle:
        desc["swizzle"] = swizzle
    return {"maps": {kernel: {f"{kernel}_param_{i}": dict(desc) for i in params}}}


# -- a warp-specialized ring: warpgroup 0 consumes, warp 4's elected lane produces -------------
def ring(name: str, bug: bool, *, stages: int = 3, empty_count: int = 4, cwait: str = "%r35",
         pwait: bool = True, pparity: str = "%r16", cmod: int | None = None,
         read_early: bool = False, tx: int = 2 * BOX, top: bool = False) -> str:
    """A ring of `stages` A|B stages (A a 3-D box, B a 5-D box, 8 KiB each) at smem+0, its
    full barriers after the tiles and the empty ones after those, initialised in a loop
    (nvcc's bottom-tested form, or with `top` tested at its head by `setp.ge`). Keyword
    arguments are the knobs the buggy twins turn (each pair sets one, for `bug` only)."""
    s = stages
    head = f"""  setp.ge.u32 %p2, %r5, {s};
  @%p2 bra $L_INIT_END;
""" if top else ""
    tail = """  bra.uni $L_INIT;
$L_INIT_END:
""" if top else f"""  setp.lt.u32 %p2, %r5, {s};
  @%p2 bra $L_INIT;
"""
    cm = cmod if cmod is not None else s
    cread = """  mul.lo.s32 %r37, %r31, 16384;
  add.s32 %r38, %r2, %r37;
  shl.b32 %r39, %r1, 2;
  add.s32 %r40, %r38, %r39;
  ld.shared.f32 %f2, [%r40];
  ld.shared.f32 %f3, [%r40+8192];
"""
    pw = f"""$L_PWAIT:
  mbarrier.try_wait.parity.shared::cta.b64 %p7, [%r18], {pparity};
  @!%p7 bra $L_PWAIT;
""" if pwait else ""
    return HEAD + f"""
.extern .shared .align 1024 .b8 smem[];
.visible .entry {name}(.param .align 64 .b8 {name}_param_0[128],
    .param .align 64 .b8 {name}_param_1[128], .param .u32 {name}_param_2,
    .param .u64 {name}_param_3)
.reqntid 256
{{
{REGS}  mov.u32 %r1, %tid.x;
  mov.u32 %r2, smem;
  add.s32 %r3, %r2, {s * 2 * BOX};
  add.s32 %r4, %r3, {8 * s};
  setp.eq.s32 %p1, %r1, 0;
  @!%p1 bra $L_INIT_DONE;
  mov.b32 %r5, 0;
$L_INIT:
{head}  shl.b32 %r6, %r5, 3;
  add.s32 %r7, %r3, %r6;
  mbarrier.init.shared::cta.b64 [%r7], 1;
  add.s32 %r8, %r4, %r6;
  mbarrier.init.shared::cta.b64 [%r8], {empty_count};
  add.s32 %r5, %r5, 1;
{tail}  fence.mbarrier_init.release.cluster;
$L_INIT_DONE:
  bar.sync 0;
  ld.param.u32 %r9, [{name}_param_2];
  shr.u32 %r10, %r1, 5;
  setp.eq.s32 %p3, %r10, 4;
  @%p3 bra $L_PRODUCER;
  setp.lt.u32 %p4, %r1, 128;
  @%p4 bra $L_CONSUMER;
  bra.uni $L_EXIT;
$L_PRODUCER:
  elect.sync %r11|%p5, -1;
  @!%p5 bra $L_EXIT;
  mov.u64 %rd1, {name}_param_0;
  cvta.param.u64 %rd2, %rd1;
  mov.u64 %rd3, {name}_param_1;
  cvta.param.u64 %rd4, %rd3;
  mov.b32 %r12, 0;
$L_PLOOP:
  setp.ge.u32 %p6, %r12, %r9;
  @%p6 bra $L_EXIT;
  rem.u32 %r13, %r12, {s};
  div.u32 %r14, %r12, {s};
  and.b32 %r15, %r14, 1;
  xor.b32 %r16, %r15, 1;
  shl.b32 %r17, %r13, 3;
  add.s32 %r18, %r4, %r17;
  add.s32 %r19, %r3, %r17;
{pw}  mbarrier.arrive.expect_tx.shared::cta.b64 _, [%r19], {tx};
  mul.lo.s32 %r20, %r13, 16384;
  add.s32 %r21, %r2, %r20;
  add.s32 %r22, %r21, 8192;
  shl.b32 %r23, %r12, 6;
  mov.b32 %r24, 0;
  cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes
      [%r21], [%rd2, {{%r23, %r24, %r24}}], [%r19];
  cp.async.bulk.tensor.5d.shared::cluster.global.mbarrier::complete_tx::bytes
      [%r22], [%rd4, {{%r24, %r23, %r24, %r24, %r24}}], [%r19];
  add.s32 %r12, %r12, 1;
  bra.uni $L_PLOOP;
$L_CONSUMER:
  mov.f32 %f1, 0f00000000;
  mov.b32 %r30, 0;
$L_CLOOP:
  setp.ge.u32 %p8, %r30, %r9;
  @%p8 bra $L_STORE;
  rem.u32 %r31, %r30, {cm};
  div.u32 %r32, %r30, {cm};
  and.b32 %r33, %r32, 1;
  shl.b32 %r34, %r31, 3;
  add.s32 %r35, %r3, %r34;
  add.s32 %r36, %r4, %r34;
{cread if read_early else ""}$L_CWAIT:
  mbarrier.try_wait.parity.shared::cta.b64 %p9, [{cwait}], %r33;
  @!%p9 bra $L_CWAIT;
{"" if read_early else cread}  fma.rn.f32 %f1, %f2, %f3, %f1;
  and.b32 %r41, %r1, 31;
  setp.eq.s32 %p10, %r41, 0;
  bar.warp.sync -1;
  @%p10 mbarrier.arrive.shared::cta.b64 _, [%r36];
  add.s32 %r30, %r30, 1;
  bra.uni $L_CLOOP;
$L_STORE:
  ld.param.u64 %rd5, [{name}_param_3];
  cvta.to.global.u64 %rd6, %rd5;
  mul.wide.u32 %rd7, %r1, 4;
  add.s64 %rd8, %rd6, %rd7;
  st.global.f32 [%rd8], %f1;
$L_EXIT:
  ret;
}}
"""


def _ring_pair(name: str, hazard: str, fixed: dict | None = None, **knobs: Any) -> Pair:
    """A pair of `ring` kernels: `fixed` knobs in both, `knobs` in the buggy one only."""
    return Pair(name, hazard,
                lambda bug: ring(name, bug, **(fixed or {}), **(knobs if bug else {})),
                _maps(name, 0, 1))


RING_PAIRS = [
    # 128 consumer threads, but only lane 0 of each of the 4 warps arrives on `empty`
    _ring_pair("w3_warp_arrive_count", "mbar-arrive-count", empty_count=128),
    _ring_pair("w3_warp_arrive_count_top", "mbar-arrive-count", {"top": True, "stages": 4},
               empty_count=32),
    _ring_pair("w3_wait_empty_as_full", "wait-wrong-barrier", cwait="%r36"),
    # the same mistake on a 4-stage ring set up by a head-tested init loop
    _ring_pair("w3_wait_empty_as_full_top", "wait-wrong-barrier", {"top": True, "stages": 4},
               cwait="%r36"),
    _ring_pair("w3_refill_no_empty_wait", "ring-refill-unguarded", pwait=False),
    # the producer's empty wait must start at parity 1 (a fresh barrier's "previous" phase)
    _ring_pair("w3_empty_parity_first", "wait-parity-first-phase", pparity="%r15"),
    _ring_pair("w3_stage_mod_wrong", "ring-stage-mismatch", cmod=4),
    _ring_pair("w3_read_before_full", "smem-read-before-wait", read_early=True),
    # expect_tx counted A's 3-D box as 64x32 bf16 (forgot its third dim of 2)
    _ring_pair("w3_tx_3d_box", "expect-tx-mismatch", tx=BOX + BOX // 2),
    # a 5-stage ring whose expect_tx counted both boxes in elements (bf16), not bytes
    _ring_pair("w3_tx_5d_elems", "expect-tx-mismatch", tx=BOX, stages=5),
]


# -- mbarrier use outside rings ----------------------------------------------------------------
def trywait_once(bug: bool) -> str:
    """One TMA load, every thread waits with try_wait and reads its element."""
    loop = "" if bug else "  @!%p2 bra $L_WAIT;\n"
    return HEAD + f"""
.extern .shared .align 1024 .b8 smem[];
.visible .entry w3_trywait(.param .align 64 .b8 w3_trywait_param_0[128],
    .param .u64 w3_trywait_param_1)
.reqntid 128
{{
{REGS}  mov.u32 %r1, %tid.x;
  setp.eq.s32 %p1, %r1, 0;
  mov.u32 %r2, smem;
  add.s32 %r3, %r2, 8192;
  @%p1 mbarrier.init.shared::cta.b64 [%r3], 1;
  fence.mbarrier_init.release.cluster;
  bar.sync 0;
  mov.u64 %rd1, w3_trywait_param_0;
  cvta.param.u64 %rd2, %rd1;
  mov.b32 %r4, 0;
  @%p1 mbarrier.arrive.expect_tx.shared::cta.b64 _, [%r3], 8192;
  @%p1 cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes
      [%r2], [%rd2, {{%r4, %r4}}], [%r3];
  mov.b32 %r5, 0;
$L_WAIT:
  mbarrier.try_wait.parity.shared::cta.b64 %p2, [%r3], %r5;
{loop}  shl.b32 %r6, %r1, 2;
  add.s32 %r7, %r2, %r6;
  ld.shared.f32 %f1, [%r7];
  ld.param.u64 %rd3, [w3_trywait_param_1];
  cvta.to.global.u64 %rd4, %rd3;
  mul.wide.u32 %rd5, %r1, 4;
  add.s64 %rd6, %rd4, %rd5;
  st.global.f32 [%rd6], %f1;
  ret;
}}
"""


def single_stage_loop(bug: bool, *, after: bool = False) -> str:
    """One stage, refilled each trip by thread 0 after a `bar.sync` (every reader is done);
    the phase register flips each trip. `after`: one more tile is loaded after the loop and
    waited on with the phase the loop leaves (the buggy twin waits on parity 0 there);
    otherwise the buggy twin waits on parity 0 inside the loop."""
    name = "w3_tail_parity" if after else "w3_const_parity"
    inner = "0" if bug and not after else "%r5"
    tail = "0" if bug else "%r5"
    post = f"""  @%p1 mbarrier.arrive.expect_tx.shared::cta.b64 _, [%r3], 8192;
  @%p1 cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes
      [%r2], [%rd2, {{%r4, %r9}}], [%r3];
$L_TWAIT:
  mbarrier.try_wait.parity.shared::cta.b64 %p4, [%r3], {tail};
  @!%p4 bra $L_TWAIT;
  ld.shared.f32 %f3, [%r7];
  add.f32 %f1, %f1, %f3;
""" if after else ""
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
$L_LOOP:
  setp.ge.u32 %p3, %r4, %r9;
  @%p3 bra $L_DONE;
  @%p1 mbarrier.arrive.expect_tx.shared::cta.b64 _, [%r3], 8192;
  @%p1 cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes
      [%r2], [%rd2, {{%r4, %r4}}], [%r3];
$L_WAIT:
  mbarrier.try_wait.parity.shared::cta.b64 %p2, [%r3], {inner};
  @!%p2 bra $L_WAIT;
  ld.shared.f32 %f2, [%r7];
  add.f32 %f1, %f1, %f2;
  xor.b32 %r5, %r5, 1;
  add.s32 %r4, %r4, 1;
  bar.sync 0;
  bra.uni $L_LOOP;
$L_DONE:
{post}  ld.param.u64 %rd3, [{name}_param_2];
  cvta.to.global.u64 %rd4, %rd3;
  mul.wide.u32 %rd5, %r1, 4;
  add.s64 %rd6, %rd4, %rd5;
  st.global.f32 [%rd6], %f1;
  ret;
}}
"""


def phase_flip(bug: bool) -> str:
    """A 4-stage ring whose stage and phase are carried: stage += 1, wrapped to 0 at 4 with
    `selp`, and the phase flipped on the wrap. The buggy twin flips on stage == 2."""
    flip = "%p7" if bug else "%p6"
    return HEAD + f"""
.extern .shared .align 1024 .b8 smem[];
.visible .entry w3_phase_flip(.param .align 64 .b8 w3_phase_flip_param_0[128],
    .param .u32 w3_phase_flip_param_1, .param .u64 w3_phase_flip_param_2)
.reqntid 160
{{
{REGS}  mov.u32 %r1, %tid.x;
  mov.u32 %r2, smem;
  add.s32 %r3, %r2, 32768;
  add.s32 %r4, %r3, 32;
  setp.eq.s32 %p1, %r1, 0;
  @%p1 mbarrier.init.shared::cta.b64 [%r3], 1;
  @%p1 mbarrier.init.shared::cta.b64 [%r3+8], 1;
  @%p1 mbarrier.init.shared::cta.b64 [%r3+16], 1;
  @%p1 mbarrier.init.shared::cta.b64 [%r3+24], 1;
  @%p1 mbarrier.init.shared::cta.b64 [%r4], 128;
  @%p1 mbarrier.init.shared::cta.b64 [%r4+8], 128;
  @%p1 mbarrier.init.shared::cta.b64 [%r4+16], 128;
  @%p1 mbarrier.init.shared::cta.b64 [%r4+24], 128;
  fence.mbarrier_init.release.cluster;
  bar.sync 0;
  ld.param.u32 %r9, [w3_phase_flip_param_1];
  mov.b32 %r10, 0;
  mov.b32 %r11, 0;
  mov.b32 %r12, 0;
  setp.ge.u32 %p2, %r1, 128;
  @%p2 bra $L_PROD;
  mov.f32 %f1, 0f00000000;
$L_CLOOP:
  setp.ge.u32 %p3, %r12, %r9;
  @%p3 bra $L_OUT;
  shl.b32 %r13, %r10, 3;
  add.s32 %r14, %r3, %r13;
  add.s32 %r15, %r4, %r13;
$L_CWAIT:
  mbarrier.try_wait.parity.shared::cta.b64 %p4, [%r14], %r11;
  @!%p4 bra $L_CWAIT;
  shl.b32 %r16, %r10, 13;
  add.s32 %r17, %r2, %r16;
  shl.b32 %r18, %r1, 2;
  add.s32 %r19, %r17, %r18;
  ld.shared.f32 %f2, [%r19];
  add.f32 %f1, %f1, %f2;
  mbarrier.arrive.shared::cta.b64 _, [%r15];
  add.s32 %r10, %r10, 1;
  setp.eq.s32 %p6, %r10, 4;
  setp.eq.s32 %p7, %r10, 2;
  selp.b32 %r10, 0, %r10, %p6;
  xor.b32 %r20, %r11, 1;
  selp.b32 %r11, %r20, %r11, {flip};
  add.s32 %r12, %r12, 1;
  bra.uni $L_CLOOP;
$L_OUT:
  ld.param.u64 %rd3, [w3_phase_flip_param_2];
  cvta.to.global.u64 %rd4, %rd3;
  mul.wide.u32 %rd5, %r1, 4;
  add.s64 %rd6, %rd4, %rd5;
  st.global.f32 [%rd6], %f1;
  bra.uni $L_END;
$L_PROD:
  setp.ne.s32 %p8, %r1, 128;
  @%p8 bra $L_END;
  mov.u64 %rd1, w3_phase_flip_param_0;
  cvta.param.u64 %rd2, %rd1;
  mov.b32 %r21, 1;
$L_PLOOP:
  setp.ge.u32 %p9, %r12, %r9;
  @%p9 bra $L_END;
  shl.b32 %r13, %r10, 3;
  add.s32 %r14, %r3, %r13;
  add.s32 %r15, %r4, %r13;
$L_PWAIT:
  mbarrier.try_wait.parity.shared::cta.b64 %p10, [%r15], %r21;
  @!%p10 bra $L_PWAIT;
  mbarrier.arrive.expect_tx.shared::cta.b64 _, [%r14], 8192;
  shl.b32 %r16, %r10, 13;
  add.s32 %r17, %r2, %r16;
  cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes
      [%r17], [%rd2, {{%r12, %r12}}], [%r14];
  add.s32 %r10, %r10, 1;
  setp.eq.s32 %p11, %r10, 4;
  selp.b32 %r10, 0, %r10, %p11;
  xor.b32 %r22, %r21, 1;
  selp.b32 %r21, %r22, %r21, %p11;
  add.s32 %r12, %r12, 1;
  bra.uni $L_PLOOP;
$L_END:
  ret;
}}
"""


def two_rings(bug: bool) -> str:
    """Two rings in one buffer: A (3 stages of 8 KiB) at smem+0, B (2 stages) after it. The
    buggy twin places B at 2 stages of A instead of 3 (its regions overlap)."""
    boff = 16384 if bug else 24576
    return HEAD + f"""
.extern .shared .align 1024 .b8 smem[];
.visible .entry w3_two_rings(.param .align 64 .b8 w3_two_rings_param_0[128],
    .param .align 64 .b8 w3_two_rings_param_1[128], .param .u32 w3_two_rings_param_2)
.reqntid 128
{{
{REGS}  mov.u32 %r1, %tid.x;
  mov.u32 %r2, smem;
  add.s32 %r3, %r2, 40960;
  add.s32 %r4, %r2, {boff};
  setp.eq.s32 %p1, %r1, 0;
  @%p1 mbarrier.init.shared::cta.b64 [%r3], 1;
  @%p1 mbarrier.init.shared::cta.b64 [%r3+8], 1;
  @%p1 mbarrier.init.shared::cta.b64 [%r3+16], 1;
  fence.mbarrier_init.release.cluster;
  bar.sync 0;
  @!%p1 bra $L_END;
  mov.u64 %rd1, w3_two_rings_param_0;
  cvta.param.u64 %rd2, %rd1;
  mov.u64 %rd3, w3_two_rings_param_1;
  cvta.param.u64 %rd4, %rd3;
  ld.param.u32 %r9, [w3_two_rings_param_2];
  mov.b32 %r10, 0;
$L_LOOP:
  setp.ge.u32 %p2, %r10, 3;
  @%p2 bra $L_WAITALL;
  shl.b32 %r11, %r10, 3;
  add.s32 %r12, %r3, %r11;
  shl.b32 %r13, %r10, 13;
  add.s32 %r14, %r2, %r13;
  and.b32 %r15, %r10, 1;
  shl.b32 %r16, %r15, 13;
  add.s32 %r17, %r4, %r16;
  mbarrier.arrive.expect_tx.shared::cta.b64 _, [%r12], 16384;
  cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes
      [%r14], [%rd2, {{%r10, %r9}}], [%r12];
  cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes
      [%r17], [%rd4, {{%r10, %r9}}], [%r12];
  add.s32 %r10, %r10, 1;
  bra.uni $L_LOOP;
$L_WAITALL:
  mov.b32 %r20, 0;
$L_W0:
  mbarrier.try_wait.parity.shared::cta.b64 %p3, [%r3], %r20;
  @!%p3 bra $L_W0;
$L_W1:
  mbarrier.try_wait.parity.shared::cta.b64 %p4, [%r3+8], %r20;
  @!%p4 bra $L_W1;
$L_W2:
  mbarrier.try_wait.parity.shared::cta.b64 %p5, [%r3+16], %r20;
  @!%p5 bra $L_W2;
$L_END:
  ret;
}}
"""


# -- clusters ----------------------------------------------------------------------------------
def cluster_init(bug: bool) -> str:
    """A 2-CTA cluster: each CTA inits a barrier its peer arrives on remotely (mapa +
    mbarrier.arrive.shared::cluster). The buggy twin has no fence.mbarrier_init before the
    cluster barrier that publishes the init."""
    fence = "" if bug else "  @%p1 fence.mbarrier_init.release.cluster;\n"
    return HEAD + f"""
.extern .shared .align 16 .b8 smem[];
.visible .entry w3_cluster_init()
.reqntid 128
.explicitcluster
.reqnctapercluster 2, 1, 1
{{
{REGS}  mov.u32 %r1, %tid.x;
  mov.u32 %r2, smem;
  setp.eq.s32 %p1, %r1, 0;
  @%p1 mbarrier.init.shared::cta.b64 [%r2], 1;
{fence}  barrier.cluster.arrive.relaxed.aligned;
  barrier.cluster.wait.aligned;
  mov.u32 %r3, %cluster_ctarank;
  xor.b32 %r4, %r3, 1;
  mapa.shared::cluster.u32 %r5, %r2, %r4;
  @%p1 mbarrier.arrive.release.cluster.shared::cluster.b64 _, [%r5];
  mov.b32 %r6, 0;
$L_WAIT:
  mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 %p2, [%r2], %r6;
  @!%p2 bra $L_WAIT;
  barrier.cluster.arrive.release.aligned;
  barrier.cluster.wait.acquire.aligned;
  ret;
}}
"""


def dsmem_read(bug: bool) -> str:
    """A 2-CTA cluster: each CTA writes its smem, then a `.func` reads the peer's copy
    through `mapa` + `ld.shared::cluster`. The buggy twin calls the reader before the cluster
    barrier (arrive/wait), the correct one after; both sync again before exiting."""
    early = "  call.uni (%f1), peer_read, (%r2);\n" if bug else ""
    late = "" if bug else "  call.uni (%f1), peer_read, (%r2);\n"
    return HEAD + f"""
.extern .shared .align 16 .b8 smem[];
.func (.reg .f32 out) peer_read(.reg .b32 addr)
{{
  .reg .b32 %r<8>;
  mov.u32 %r1, %cluster_ctarank;
  xor.b32 %r2, %r1, 1;
  mapa.shared::cluster.u32 %r3, addr, %r2;
  ld.shared::cluster.f32 out, [%r3];
  ret;
}}
.visible .entry w3_dsmem_read(.param .u64 w3_dsmem_read_param_0)
.reqntid 128
.explicitcluster
.reqnctapercluster 2, 1, 1
{{
{REGS}  mov.u32 %r1, %tid.x;
  mov.u32 %r3, smem;
  shl.b32 %r4, %r1, 2;
  add.s32 %r2, %r3, %r4;
  cvt.rn.f32.u32 %f2, %r1;
  st.shared.f32 [%r2], %f2;
{early}  barrier.cluster.arrive.release.aligned;
  barrier.cluster.wait.acquire.aligned;
{late}  ld.param.u64 %rd1, [w3_dsmem_read_param_0];
  cvta.to.global.u64 %rd2, %rd1;
  mul.wide.u32 %rd3, %r1, 4;
  add.s64 %rd4, %rd2, %rd3;
  st.global.f32 [%rd4], %f1;
  barrier.cluster.arrive.release.aligned;
  barrier.cluster.wait.acquire.aligned;
  ret;
}}
"""


def dsmem_exit(bug: bool) -> str:
    """A 4-CTA cluster (along x): each CTA writes its value into the next rank's smem with
    `st.shared::cluster`, then ranks read what they were given after a cluster sync. The
    buggy twin's rank 0 leaves before that sync (`@%p bra` to the exit): a peer may still write
    into its shared memory."""
    leave = "  @%p3 bra $L_END;\n" if bug else ""
    return HEAD + f"""
.extern .shared .align 16 .b8 smem[];
.visible .entry w3_dsmem_exit(.param .u64 w3_dsmem_exit_param_0)
.reqntid 64
.explicitcluster
.reqnctapercluster 4, 1, 1
{{
{REGS}  mov.u32 %r1, %tid.x;
  mov.u32 %r2, smem;
  shl.b32 %r3, %r1, 2;
  add.s32 %r4, %r2, %r3;
  mov.u32 %r5, %cluster_ctarank;
  add.s32 %r6, %r5, 1;
  and.b32 %r7, %r6, 3;
  barrier.cluster.arrive.relaxed.aligned;
  barrier.cluster.wait.aligned;
  mapa.shared::cluster.u32 %r8, %r4, %r7;
  cvt.rn.f32.u32 %f1, %r5;
  st.shared::cluster.f32 [%r8], %f1;
  setp.eq.s32 %p3, %r5, 0;
{leave}  barrier.cluster.arrive.release.aligned;
  barrier.cluster.wait.acquire.aligned;
  ld.shared.f32 %f2, [%r4];
  ld.param.u64 %rd1, [w3_dsmem_exit_param_0];
  cvta.to.global.u64 %rd2, %rd1;
  mul.wide.u32 %rd3, %r5, 256;
  add.s64 %rd4, %rd2, %rd3;
  mul.wide.u32 %rd5, %r1, 4;
  add.s64 %rd6, %rd4, %rd5;
  st.global.f32 [%rd6], %f2;
$L_END:
  ret;
}}
"""


def multicast_tx(bug: bool) -> str:
    """A 2-CTA cluster: each rank loads its half of a tile with `.multicast::cluster` to both
    ranks (ctaMask 0b11), so each rank's barrier receives both halves. The buggy twin's
    expect_tx counts only the rank's own half."""
    tx = BOX if bug else 2 * BOX
    return HEAD + f"""
.extern .shared .align 1024 .b8 smem[];
.visible .entry w3_multicast(.param .align 64 .b8 w3_multicast_param_0[128])
.reqntid 128
.explicitcluster
.reqnctapercluster 2, 1, 1
{{
{REGS}  .reg .b16 %rs<4>;
  mov.u32 %r1, %tid.x;
  mov.u32 %r2, smem;
  add.s32 %r3, %r2, 16384;
  setp.eq.s32 %p1, %r1, 0;
  @%p1 mbarrier.init.shared::cta.b64 [%r3], 1;
  @%p1 fence.mbarrier_init.release.cluster;
  barrier.cluster.arrive.relaxed.aligned;
  barrier.cluster.wait.aligned;
  mov.u32 %r4, %cluster_ctarank;
  shl.b32 %r5, %r4, 13;
  add.s32 %r6, %r2, %r5;
  mov.u64 %rd1, w3_multicast_param_0;
  cvta.param.u64 %rd2, %rd1;
  mov.b16 %rs1, 3;
  @%p1 mbarrier.arrive.expect_tx.shared::cta.b64 _, [%r3], {tx};
  @%p1 {MULTICAST_LOAD}
      [%r6], [%rd2, {{%r5, %r4}}], [%r3], %rs1;
  mov.b32 %r7, 0;
$L_WAIT:
  mbarrier.try_wait.parity.shared::cta.b64 %p2, [%r3], %r7;
  @!%p2 bra $L_WAIT;
  barrier.cluster.arrive.release.aligned;
  barrier.cluster.wait.acquire.aligned;
  ret;
}}
"""


# -- bulk / TMA stores -------------------------------------------------------------------------
def store_loop(name: str, bug: str | None) -> str:
    """Each trip, every thread writes its element of a 4 KiB staging tile (`st.shared`), the
    CTA syncs, thread 0 fences, stores the tile with a TMA store and commits; before the next
    trip rewrites the tile thread 0 waits for the group's reads and the CTA syncs again. `bug`
    removes one step: 'wait' the wait_group.read, 'fence' the proxy fence, 'commit' the
    commit_group (the final wait then waits for nothing)."""
    wait = "" if bug == "wait" else "  @%p1 cp.async.bulk.wait_group.read 0;\n"
    fence = "" if bug == "fence" else "  fence.proxy.async.shared::cta;\n"
    commit = "" if bug == "commit" else "  @%p1 cp.async.bulk.commit_group;\n"
    return HEAD + f"""
.extern .shared .align 1024 .b8 smem[];
.visible .entry {name}(.param .align 64 .b8 {name}_param_0[128], .param .u32 {name}_param_1)
.reqntid 128
{{
{REGS}  mov.u32 %r1, %tid.x;
  setp.eq.s32 %p1, %r1, 0;
  mov.u32 %r2, smem;
  shl.b32 %r3, %r1, 5;
  add.s32 %r4, %r2, %r3;
  mov.u64 %rd1, {name}_param_0;
  cvta.param.u64 %rd2, %rd1;
  ld.param.u32 %r9, [{name}_param_1];
  mov.b32 %r10, 0;
$L_LOOP:
  setp.ge.u32 %p2, %r10, %r9;
  @%p2 bra $L_DONE;
  cvt.rn.f32.u32 %f1, %r10;
  st.shared.v4.f32 [%r4], {{%f1, %f1, %f1, %f1}};
  st.shared.v4.f32 [%r4+16], {{%f1, %f1, %f1, %f1}};
{fence}  bar.sync 0;
  @%p1 cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%rd2, {{%r10, %r10}}], [%r2];
{commit}{wait}  bar.sync 0;
  add.s32 %r10, %r10, 1;
  bra.uni $L_LOOP;
$L_DONE:
  @%p1 cp.async.bulk.wait_group 0;
  ret;
}}
"""


# -- wgmma -------------------------------------------------------------------------------------
def wgmma_kernel(name: str, bug: str | None) -> str:
    """One warpgroup: A and B tiles (64x16 and 8x16 bf16, no swizzle) are written by
    `st.shared` from global memory, fenced to the async proxy, and multiplied by one
    m64n8k16 wgmma into 4 f32 registers stored to global. `bug`: 'proxy' drops the proxy fence,
    'fence' the wgmma.fence before the first wgmma, 'wait' reads the accumulators before
    wgmma.wait_group; 'release' signals an mbarrier (the tiles' reuse) before the wait."""
    proxy = "" if bug == "proxy" else "  fence.proxy.async.shared::cta;\n"
    wfence = "" if bug == "fence" else "  wgmma.fence.sync.aligned;\n"
    use = """  ld.param.u64 %rd5, [@N_param_1];
  cvta.to.global.u64 %rd6, %rd5;
  mul.wide.u32 %rd7, %r1, 16;
  add.s64 %rd8, %rd6, %rd7;
  st.global.v4.f32 [%rd8], {%f1, %f2, %f3, %f4};
""".replace("@N", name)
    rel = "  mbarrier.arrive.shared::cta.b64 _, [%r20];\n"
    wait = "  wgmma.wait_group.sync.aligned 0;\n"
    if bug == "wait":
        tail = use + wait
    elif bug == "release":
        tail = rel + wait + use
    else:
        tail = wait + rel + use
    return HEAD + f"""
.extern .shared .align 1024 .b8 smem[];
.visible .entry {name}(.param .u64 {name}_param_0, .param .u64 {name}_param_1)
.reqntid 128
{{
{REGS}  mov.u32 %r1, %tid.x;
  mov.u32 %r2, smem;
  add.s32 %r20, %r2, 4096;
  setp.eq.s32 %p1, %r1, 0;
  @%p1 mbarrier.init.shared::cta.b64 [%r20], 128;
  ld.param.u64 %rd1, [{name}_param_0];
  cvta.to.global.u64 %rd2, %rd1;
  mul.wide.u32 %rd3, %r1, 16;
  add.s64 %rd4, %rd2, %rd3;
  ld.global.v4.u32 {{%r3, %r4, %r5, %r6}}, [%rd4];
  shl.b32 %r7, %r1, 4;
  add.s32 %r8, %r2, %r7;
  st.shared.v4.u32 [%r8], {{%r3, %r4, %r5, %r6}};
  ld.global.v4.u32 {{%r3, %r4, %r5, %r6}}, [%rd4+2048];
  st.shared.v4.u32 [%r8+2048], {{%r3, %r4, %r5, %r6}};
{proxy}  bar.sync 0;
  cvt.u64.u32 %rd10, %r2;
  shr.u64 %rd11, %rd10, 4;
  and.b64 %rd12, %rd11, 16383;
  or.b64 %rd13, %rd12, 549755813888;
  add.s64 %rd14, %rd13, 128;
  mov.f32 %f1, 0f00000000;
  mov.f32 %f2, 0f00000000;
  mov.f32 %f3, 0f00000000;
  mov.f32 %f4, 0f00000000;
  setp.ne.s32 %p2, 1, 0;
{wfence}  wgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16
      {{%f1, %f2, %f3, %f4}}, %rd13, %rd14, %p2, 1, 1, 0, 0;
  wgmma.commit_group.sync.aligned;
{tail}  ret;
}}
"""


# -- tensor maps -------------------------------------------------------------------------------
def tmap_replace(name: str, bug: str | None) -> str:
    """Thread 0's warp copies the tensor map parameter to a global workspace with
    `tensormap.cp_fenceproxy` after changing its global address in shared memory
    (`tensormap.replace`); then the warp acquires the workspace copy and loads through it.
    `bug`: 'acquire' drops the acquire fence (on the generic address), 'warpsync' the
    `bar.warp.sync` that orders thread 0's replace before the warp's collective copy. (A
    cp_fenceproxy or acquire of other than 128 bytes is refused by ptxas: not a hazard.)"""
    sync = "" if bug == "warpsync" else "  bar.warp.sync -1;\n"
    acq = "" if bug == "acquire" else \
        "  fence.proxy.tensormap::generic.acquire.gpu [%rd3], 128;\n"
    return HEAD + f"""
.extern .shared .align 128 .b8 smem[];
.visible .entry {name}(.param .align 64 .b8 {name}_param_0[128], .param .u64 {name}_param_1,
    .param .u64 {name}_param_2)
.reqntid 32
{{
{REGS}  mov.u32 %r1, %tid.x;
  mov.u32 %r2, smem;
  add.s32 %r3, %r2, 8192;
  add.s32 %r4, %r2, 9216;
  setp.eq.s32 %p1, %r1, 0;
  @%p1 mbarrier.init.shared::cta.b64 [%r3], 1;
  fence.mbarrier_init.release.cluster;
  bar.sync 0;
  mov.u64 %rd1, {name}_param_0;
  @%p1 ld.param.v2.u64 {{%rd10, %rd11}}, [{name}_param_0];
  @%p1 st.shared.v2.u64 [%r4], {{%rd10, %rd11}};
  @%p1 ld.param.v2.u64 {{%rd10, %rd11}}, [{name}_param_0+16];
  @%p1 st.shared.v2.u64 [%r4+16], {{%rd10, %rd11}};
  @%p1 ld.param.v2.u64 {{%rd10, %rd11}}, [{name}_param_0+32];
  @%p1 st.shared.v2.u64 [%r4+32], {{%rd10, %rd11}};
  @%p1 ld.param.v2.u64 {{%rd10, %rd11}}, [{name}_param_0+48];
  @%p1 st.shared.v2.u64 [%r4+48], {{%rd10, %rd11}};
  @%p1 ld.param.v2.u64 {{%rd10, %rd11}}, [{name}_param_0+64];
  @%p1 st.shared.v2.u64 [%r4+64], {{%rd10, %rd11}};
  @%p1 ld.param.v2.u64 {{%rd10, %rd11}}, [{name}_param_0+80];
  @%p1 st.shared.v2.u64 [%r4+80], {{%rd10, %rd11}};
  @%p1 ld.param.v2.u64 {{%rd10, %rd11}}, [{name}_param_0+96];
  @%p1 st.shared.v2.u64 [%r4+96], {{%rd10, %rd11}};
  @%p1 ld.param.v2.u64 {{%rd10, %rd11}}, [{name}_param_0+112];
  @%p1 st.shared.v2.u64 [%r4+112], {{%rd10, %rd11}};
  ld.param.u64 %rd2, [{name}_param_2];
  @%p1 tensormap.replace.tile.global_address.shared::cta.b1024.b64 [%r4], %rd2;
{sync}  ld.param.u64 %rd3, [{name}_param_1];
  cvta.to.global.u64 %rd4, %rd3;
  tensormap.cp_fenceproxy.global.shared::cta.tensormap::generic.release.gpu.sync.aligned
      [%rd4], [%r4], 128;
{acq}  mov.b32 %r5, 0;
  @%p1 mbarrier.arrive.expect_tx.shared::cta.b64 _, [%r3], 8192;
  @%p1 cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes
      [%r2], [%rd4, {{%r5, %r5}}], [%r3];
$L_WAIT:
  mbarrier.try_wait.parity.shared::cta.b64 %p2, [%r3], %r5;
  @!%p2 bra $L_WAIT;
  ret;
}}
"""


def swizzle_align(bug: bool) -> str:
    """Two 128B-swizzled loads into a buffer carved from `smem` after a 64-byte header of
    barriers: the correct twin rounds the tile start up to 1024 bytes, the buggy one puts the
    tile right after the header."""
    off = 64 if bug else 1024
    return HEAD + f"""
.extern .shared .align 1024 .b8 smem[];
.visible .entry w3_swizzle(.param .align 64 .b8 w3_swizzle_param_0[128])
.reqntid 128
{{
{REGS}  mov.u32 %r1, %tid.x;
  mov.u32 %r2, smem;
  add.s32 %r3, %r2, {off};
  setp.eq.s32 %p1, %r1, 0;
  @%p1 mbarrier.init.shared::cta.b64 [%r2], 1;
  fence.mbarrier_init.release.cluster;
  bar.sync 0;
  mov.u64 %rd1, w3_swizzle_param_0;
  cvta.param.u64 %rd2, %rd1;
  mov.b32 %r4, 0;
  mov.b32 %r5, 64;
  add.s32 %r6, %r3, 8192;
  @%p1 mbarrier.arrive.expect_tx.shared::cta.b64 _, [%r2], 16384;
  @%p1 cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes
      [%r3], [%rd2, {{%r4, %r4}}], [%r2];
  @%p1 cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes
      [%r6], [%rd2, {{%r5, %r4}}], [%r2];
$L_WAIT:
  mbarrier.try_wait.parity.shared::cta.b64 %p2, [%r2], %r4;
  @!%p2 bra $L_WAIT;
  ret;
}}
"""


def relay(bug: bool) -> str:
    """Warp 0 waits for a tile and its thread 0 arrives on a second barrier that every warp
    waits on before reading (a relay of the copy's completion); with `bug` thread 0 arrives
    on it without waiting for the tile."""
    wait = "" if bug else """$L_W0:
  mbarrier.try_wait.parity.shared::cta.b64 %p4, [%r3], %r5;
  @!%p4 bra $L_W0;
"""
    return HEAD + f"""
.extern .shared .align 1024 .b8 smem[];
.visible .entry relay(.param .align 64 .b8 relay_param_0[128])
.reqntid 128
{{
{REGS}  mov.u32 %r1, %tid.x;
  mov.u32 %r2, smem;
  add.s32 %r3, %r2, 8192;
  add.s32 %r4, %r2, 8200;
  setp.eq.s32 %p1, %r1, 0;
  @%p1 mbarrier.init.shared::cta.b64 [%r3], 1;
  @%p1 mbarrier.init.shared::cta.b64 [%r4], 1;
  fence.mbarrier_init.release.cluster;
  bar.sync 0;
  mov.u64 %rd1, relay_param_0;
  cvta.param.u64 %rd2, %rd1;
  mov.b32 %r5, 0;
  @%p1 mbarrier.arrive.expect_tx.shared::cta.b64 _, [%r3], 8192;
  @%p1 cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes
      [%r2], [%rd2, {{%r5, %r5}}], [%r3];
  shr.u32 %r6, %r1, 5;
  setp.eq.s32 %p2, %r6, 0;
  setp.eq.s32 %p3, %r1, 0;
  @!%p2 bra $L_OTHERS;
{wait}  @%p3 mbarrier.arrive.shared::cta.b64 _, [%r4];
$L_OTHERS:
$L_W1:
  mbarrier.try_wait.parity.shared::cta.b64 %p5, [%r4], %r5;
  @!%p5 bra $L_W1;
  shl.b32 %r7, %r1, 2;
  add.s32 %r8, %r2, %r7;
  ld.shared.f32 %f1, [%r8];
  ret;
}}
"""


PAIRS = RING_PAIRS + [
    Pair("w3_trywait", "try-wait-not-looped", trywait_once, _maps("w3_trywait", 0)),
    Pair("w3_const_parity", "wait-parity-constant", single_stage_loop,
         _maps("w3_const_parity", 0)),
    Pair("w3_tail_parity", "wait-parity-constant",
         lambda bug: single_stage_loop(bug, after=True), _maps("w3_tail_parity", 0)),
    Pair("w3_phase_flip", "ring-parity", phase_flip, _maps("w3_phase_flip", 0)),
    Pair("w3_two_rings", "tma-dst-overlap", two_rings, _maps("w3_two_rings", 0, 1)),
    Pair("w3_cluster_init", "mbar-init-unsynced", cluster_init),
    Pair("w3_dsmem_read", "dsmem-read-unsynced", dsmem_read),
    Pair("w3_dsmem_exit", "dsmem-released-early", dsmem_exit),
    Pair("w3_multicast", "expect-tx-mismatch", multicast_tx, _maps("w3_multicast", 0)),
    Pair("w3_store_wait", "bulk-src-overwrite",
         lambda bug: store_loop("w3_store_wait", "wait" if bug else None),
         _maps("w3_store_wait", 0, box=4096)),
    Pair("w3_store_fence", "smem-no-proxy-fence",
         lambda bug: store_loop("w3_store_fence", "fence" if bug else None),
         _maps("w3_store_fence", 0, box=4096)),
    Pair("w3_store_commit", "bulk-group-not-waited",
         lambda bug: store_loop("w3_store_commit", "commit" if bug else None),
         # (the wait_group.read then waits for no group: the next trip's stores overwrite
         # the tile the store may still read)
         _maps("w3_store_commit", 0, box=4096), also=("bulk-src-overwrite",)),
    Pair("w3_wg_proxy", "wgmma-smem-no-proxy-fence",
         lambda bug: wgmma_kernel("w3_wg_proxy", "proxy" if bug else None)),
    Pair("w3_wg_fence", "wgmma-no-fence",
         lambda bug: wgmma_kernel("w3_wg_fence", "fence" if bug else None)),
    Pair("w3_wg_acc", "wgmma-regs-in-flight",
         lambda bug: wgmma_kernel("w3_wg_acc", "wait" if bug else None)),
    Pair("w3_wg_release", "wgmma-smem-released",
         lambda bug: wgmma_kernel("w3_wg_release", "release" if bug else None)),
    Pair("w3_tm_acquire", "tmap-no-acquire",
         lambda bug: tmap_replace("w3_tm_acquire", "acquire" if bug else None),
         _maps("w3_tm_acquire", 1)),
    Pair("w3_tm_warpsync", "tmap-replace-no-warpsync",
         lambda bug: tmap_replace("w3_tm_warpsync", "warpsync" if bug else None),
         _maps("w3_tm_warpsync", 1)),
    Pair("w3_swizzle", "tma-smem-align", swizzle_align,
         _maps("w3_swizzle", 0, swizzle="128B")),
]
