"""Held-out hazard kernels, wave 4, continued (tests/test_checker_wave4.py): FA3's
named-barrier ping-pong of two consumer warpgroups in a persistent loop, tensor maps encoded
on the device (`tensormap.replace` in global or shared memory), a ring of 128B-swizzled
stages after a header of the dynamic buffer, and a wgmma whose descriptors name another
swizzle than the maps that wrote its tiles. Each `Pair`'s buggy twin differs by one mistake."""

from __future__ import annotations

from tests.wave3_kernels import HEAD, REGS, Pair, _maps
from tests.wave4_kernels import LOAD, _loop, _store_result, _wait


# -- FA3's ping-pong of two consumer warpgroups, in a persistent loop over tiles ---------------
def pingpong(name: str, bug: str | None, form: str) -> str:
    """384 threads: warpgroup 0 idles (the producer's place), warpgroups 1 and 2 own named
    barriers 1 and 2 (256 threads each phase). For each tile, warpgroup 2 pre-arrives on
    barrier 1; each k-block each group syncs on its own barrier, runs its GEMM (an `fma`
    here) and arrives on the other's; after the k-blocks warpgroup 1 syncs on barrier 1 and
    arrives on 2, warpgroup 2 syncs on 2: every phase of both barriers is consumed within the
    tile. `bug`: 'count' gives every use a count of 128 (each group's arrive completes a
    phase alone), 'final' drops warpgroup 2's sync after the k-blocks (a phase of barrier 2
    is left over into the next tile), 'both' has warpgroup 1 pre-arrive on barrier 2 too."""
    c = 128 if bug == "count" else 256
    final2 = "" if bug == "final" else f"  @%p5 bar.sync 2, {c};\n"
    both = f"  @%p4 bar.arrive 2, {c};\n" if bug == "both" else ""
    body = f"""  bar.sync %r3, {c};
  fma.rn.f32 %f1, %f1, %f2, %f3;
  bar.arrive %r4, {c};
"""
    inner = _loop(name + "_K", form, "%r20", "%r9", "%r21", "%r22", 0, body)
    return HEAD + f"""
.visible .entry {name}(.param .u32 {name}_param_0, .param .u32 {name}_param_1,
    .param .u64 {name}_param_2)
.reqntid 384
{{
{REGS}  mov.u32 %r1, %tid.x;
  shr.u32 %r3, %r1, 7;
  setp.eq.s32 %p1, %r3, 0;
  @%p1 bra $L_END;
  sub.s32 %r4, 3, %r3;
  setp.eq.s32 %p4, %r3, 1;
  setp.eq.s32 %p5, %r3, 2;
  ld.param.u32 %r8, [{name}_param_0];
  ld.param.u32 %r9, [{name}_param_1];
  mov.f32 %f1, 0f00000000;
  cvt.rn.f32.u32 %f2, %r1;
  mov.f32 %f3, 0f3F800000;
  mov.u32 %r10, %ctaid.x;
$L_TILE:
  setp.ge.u32 %p2, %r10, %r8;
  @%p2 bra $L_OUT;
  @%p5 bar.arrive 1, {c};
{both}{inner}  @%p4 bar.sync 1, {c};
  @%p4 bar.arrive 2, {c};
{final2}  mov.u32 %r11, %nctaid.x;
  add.s32 %r10, %r10, %r11;
  bra.uni $L_TILE;
$L_OUT:
{_store_result(name, 2)}$L_END:
  ret;
}}
"""


def _pp_pair(name: str, hazard: str, bug: str, form: str,
             also: tuple[str, ...] = ()) -> Pair:
    return Pair(name, hazard, lambda b: pingpong(name, bug if b else None, form), {}, also)


# -- a tensor map encoded on the device -------------------------------------------------------
def _map_to(at: str, name: str, space: str) -> str:
    """Lane 0 copies the map parameter's 128 bytes to `at` (a shared or global address)."""
    return "".join(f"  @%p1 ld.param.v2.u64 {{%rd10, %rd11}}, [{name}_param_0+{o}];\n"
                   f"  @%p1 st.{space}.v2.u64 [{at}+{o}], {{%rd10, %rd11}};\n"
                   for o in range(0, 128, 16))


def tmap_global(name: str, bug: str | None) -> str:
    """Lane 0 writes the template map into a global workspace, points it at another tensor
    (`tensormap.replace ... .global`), releases its writes to the tensor-map proxy, and the
    warp acquires the workspace map and loads a tile through it. `bug`: 'acquire' drops the
    acquire, 'late' replaces the global address again after the release."""
    acq = "" if bug == "acquire" else \
        "  fence.proxy.tensormap::generic.acquire.gpu [%rd3], 128;\n"
    late = "  @%p1 tensormap.replace.tile.global_address.global.b1024.b64 [%rd4], %rd6;\n" \
        if bug == "late" else ""
    return HEAD + f"""
.extern .shared .align 1024 .b8 smem[];
.visible .entry {name}(.param .align 64 .b8 {name}_param_0[128], .param .u64 {name}_param_1,
    .param .u64 {name}_param_2, .param .u64 {name}_param_3)
.reqntid 32
{{
{REGS}  mov.u32 %r1, %tid.x;
  mov.u32 %r2, smem;
  add.s32 %r3, %r2, 8192;
  setp.eq.s32 %p1, %r1, 0;
  @%p1 mbarrier.init.shared::cta.b64 [%r3], 1;
  fence.mbarrier_init.release.cluster;
  bar.warp.sync -1;
  ld.param.u64 %rd3, [{name}_param_1];
  cvta.to.global.u64 %rd4, %rd3;
{_map_to("%rd4", name, "global")}  ld.param.u64 %rd5, [{name}_param_2];
  ld.param.u64 %rd6, [{name}_param_3];
  @%p1 tensormap.replace.tile.global_address.global.b1024.b64 [%rd4], %rd5;
  fence.proxy.tensormap::generic.release.gpu;
{late}{acq}  mov.b32 %r5, 0;
  @%p1 mbarrier.arrive.expect_tx.shared::cta.b64 _, [%r3], 8192;
  @%p1 {LOAD}
      [%r2], [%rd3, {{%r5, %r5}}], [%r3];
{_wait(name + "_W", "%r3", "%r5", "%p2")}  shl.b32 %r6, %r1, 2;
  add.s32 %r7, %r2, %r6;
  ld.shared.f32 %f1, [%r7];
{_store_result(name, 2)}  ret;
}}
"""


def tmap_shared(name: str, bug: str | None) -> str:
    """Lane 0 copies the template map into shared memory, points it at another tensor there;
    the warp syncs, publishes it to a per-CTA global slot (`ws + 128 * ctaid`) with
    `tensormap.cp_fenceproxy`, acquires the slot and loads through it. `bug`: 'space' gives
    the acquire the `cvta.to.global` address, 'lane' publishes from lane 0 alone (the copy
    is `.sync.aligned`: the whole warp runs it), 'acquire' drops the acquire."""
    acq = {"space": "  fence.proxy.tensormap::generic.acquire.gpu [%rd4], 128;\n",
           "acquire": ""}.get(bug or "",
                              "  fence.proxy.tensormap::generic.acquire.gpu [%rd7], 128;\n")
    lane = "@%p1 " if bug == "lane" else ""
    return HEAD + f"""
.extern .shared .align 1024 .b8 smem[];
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
{_map_to("%r4", name, "shared")}  ld.param.u64 %rd5, [{name}_param_2];
  @%p1 tensormap.replace.tile.global_address.shared::cta.b1024.b64 [%r4], %rd5;
  bar.warp.sync -1;
  ld.param.u64 %rd3, [{name}_param_1];
  mov.u32 %r8, %ctaid.x;
  mul.wide.u32 %rd6, %r8, 128;
  add.s64 %rd7, %rd3, %rd6;
  cvta.to.global.u64 %rd4, %rd7;
  {lane}tensormap.cp_fenceproxy.global.shared::cta.tensormap::generic.release.gpu.sync.aligned
      [%rd4], [%r4], 128;
{acq}  mov.b32 %r5, 0;
  @%p1 mbarrier.arrive.expect_tx.shared::cta.b64 _, [%r3], 8192;
  @%p1 {LOAD}
      [%r2], [%rd7, {{%r5, %r5}}], [%r3];
{_wait(name + "_W", "%r3", "%r5", "%p2")}  shl.b32 %r6, %r1, 2;
  add.s32 %r7, %r2, %r6;
  ld.shared.f32 %f1, [%r7];
  ret;
}}
"""


def _tm_pair(name: str, hazard: str, build, bug: str) -> Pair:
    return Pair(name, hazard, lambda b: build(name, bug if b else None), {})


def ring_align(name: str, bug: bool) -> str:
    """A 2-stage ring of 128B-swizzled 16 KiB tiles after a 2 KiB header of the dynamic
    buffer (its barriers and flags), written as nvcc lowers `tiles + (i & 1) * 16384`
    (`and`, `mul.lo`, a 64-bit `cvta` of the base): every thread waits for stage `i & 1`,
    reads it, and the CTA syncs before thread 0 refills it. The buggy twin's header is 2176
    bytes, so every stage starts 128 bytes past the swizzle's 1024-byte phase."""
    header = 2176 if bug else 2048
    return HEAD + f"""
.extern .shared .align 1024 .b8 smem[];
.visible .entry {name}(.param .align 64 .b8 {name}_param_0[128], .param .u32 {name}_param_1,
    .param .u64 {name}_param_2)
.reqntid 128
{{
{REGS}  mov.u32 %r1, %tid.x;
  setp.eq.s32 %p1, %r1, 0;
  mov.u64 %rd1, smem;
  cvta.shared.u64 %rd2, %rd1;
  add.s64 %rd3, %rd2, {header};
  cvta.to.shared.u64 %rd4, %rd3;
  cvt.u32.u64 %r2, %rd4;
  mov.u32 %r3, smem;
  @%p1 mbarrier.init.shared::cta.b64 [%r3], 1;
  @%p1 mbarrier.init.shared::cta.b64 [%r3+8], 1;
  fence.mbarrier_init.release.cluster;
  bar.sync 0;
  mov.u64 %rd5, {name}_param_0;
  cvta.param.u64 %rd6, %rd5;
  ld.param.u32 %r9, [{name}_param_1];
  shl.b32 %r10, %r1, 2;
  mov.f32 %f1, 0f00000000;
  mov.b32 %r4, 0;
$L_LOOP:
  setp.ge.u32 %p2, %r4, %r9;
  @%p2 bra $L_DONE;
  and.b32 %r5, %r4, 1;
  mul.lo.s32 %r6, %r5, 16384;
  add.s32 %r7, %r2, %r6;
  shl.b32 %r8, %r5, 3;
  add.s32 %r11, %r3, %r8;
  shr.u32 %r12, %r4, 1;
  and.b32 %r13, %r12, 1;
  shl.b32 %r14, %r4, 7;
  @%p1 mbarrier.arrive.expect_tx.shared::cta.b64 _, [%r11], 16384;
  @%p1 {LOAD}
      [%r7], [%rd6, {{%r14, %r14}}], [%r11];
{_wait(name + "_W", "%r11", "%r13", "%p3")}  add.s32 %r15, %r7, %r10;
  ld.shared.f32 %f2, [%r15];
  add.f32 %f1, %f1, %f2;
  bar.sync 0;
  add.s32 %r4, %r4, 1;
  bra.uni $L_LOOP;
$L_DONE:
{_store_result(name, 2)}  ret;
}}
"""


def wgmma_swizzle(name: str, bug: bool) -> str:
    """Thread 0 loads a 64x64 bf16 A tile (8 KiB) and an 8x64 B tile (1 KiB), both through
    128B-swizzled maps, on one barrier; the warpgroup waits and runs one m64n8k16 wgmma on
    them, its K-major descriptors built as nvcc lowers CUTLASS's `make_gmma_desc`
    (`(addr >> 4) & 0x3FFF` or'ed with a constant holding LBO, SBO = 1024 bytes and the
    layout type). The buggy twin's constant says the 64B swizzle (layout type 2)."""
    desc = 0x8000004000010000 if bug else 0x4000004000010000
    return HEAD + f"""
.extern .shared .align 1024 .b8 smem[];
.visible .entry {name}(.param .align 64 .b8 {name}_param_0[128],
    .param .align 64 .b8 {name}_param_1[128], .param .u64 {name}_param_2)
.reqntid 128
{{
{REGS}  mov.u32 %r1, %tid.x;
  mov.u32 %r2, smem;
  add.s32 %r3, %r2, 9216;
  setp.eq.s32 %p1, %r1, 0;
  @%p1 mbarrier.init.shared::cta.b64 [%r3], 1;
  fence.mbarrier_init.release.cluster;
  bar.sync 0;
  mov.b32 %r4, 0;
  @!%p1 bra $L_LOADED;
  mov.u64 %rd1, {name}_param_0;
  cvta.param.u64 %rd2, %rd1;
  mov.u64 %rd3, {name}_param_1;
  cvta.param.u64 %rd4, %rd3;
  mbarrier.arrive.expect_tx.shared::cta.b64 _, [%r3], 9216;
  {LOAD}
      [%r2], [%rd2, {{%r4, %r4}}], [%r3];
  {LOAD}
      [%r2+8192], [%rd4, {{%r4, %r4}}], [%r3];
$L_LOADED:
{_wait(name + "_W", "%r3", "%r4", "%p2")}  cvt.u64.u32 %rd10, %r2;
  shr.u64 %rd11, %rd10, 4;
  and.b64 %rd12, %rd11, 16383;
  or.b64 %rd13, %rd12, {desc:#x};
  add.s64 %rd14, %rd13, 512;
  mov.f32 %f1, 0f00000000;
  mov.f32 %f2, 0f00000000;
  mov.f32 %f3, 0f00000000;
  mov.f32 %f4, 0f00000000;
  wgmma.fence.sync.aligned;
  wgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16
      {{%f1, %f2, %f3, %f4}}, %rd13, %rd14, 1, 1, 1, 0, 0;
  wgmma.commit_group.sync.aligned;
  wgmma.wait_group.sync.aligned 0;
  ld.param.u64 %rd5, [{name}_param_2];
  cvta.to.global.u64 %rd6, %rd5;
  mul.wide.u32 %rd7, %r1, 16;
  add.s64 %rd8, %rd6, %rd7;
  st.global.v4.f32 [%rd8], {{%f1, %f2, %f3, %f4}};
  ret;
}}
"""


def _swizzle_maps(name: str) -> dict:
    return {"maps": {name: {f"{name}_param_0": {"box_bytes": 8192, "swizzle": "128B"},
                            f"{name}_param_1": {"box_bytes": 1024, "swizzle": "128B"}}}}


PAIRS: list[Pair] = [
    Pair("w4_ring_align", "tma-smem-align", lambda b: ring_align("w4_ring_align", b),
         _maps("w4_ring_align", 0, box=16384, swizzle="128B")),
    Pair("w4_wgmma_swizzle", "wgmma-swizzle-mismatch",
         lambda b: wgmma_swizzle("w4_wgmma_swizzle", b), _swizzle_maps("w4_wgmma_swizzle")),
    _pp_pair("w4_pp_count", "named-barrier-surplus", "count", "rem"),
    _pp_pair("w4_pp_final", "named-barrier-surplus", "final", "wrap"),
    _pp_pair("w4_pp_both", "named-barrier-surplus", "both", "rem"),
    _tm_pair("w4_tm_acquire", "tmap-no-acquire", tmap_global, "acquire"),
    _tm_pair("w4_tm_late", "tmap-replace-no-release", tmap_global, "late"),
    _tm_pair("w4_tm_space", "tmap-acquire-space", tmap_shared, "space"),
    _tm_pair("w4_tm_slot_acquire", "tmap-no-acquire", tmap_shared, "acquire"),
    _tm_pair("w4_tm_lane", "fenceproxy-divergent", tmap_shared, "lane"),
]

