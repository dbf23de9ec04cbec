"""Triton/Gluon idioms the checker reads from compiler PTX (tests/corpus/ptx/triton): each as
a small kernel parsed with `parse_ptx`, clean, beside its buggy twin where one exists."""

from __future__ import annotations

from ptxdsl.frontend import parse_ptx
from tests.ptx_check_support import HEAD
from tests.ptx_check_support import check_text as _check
from tests.ptx_check_support import ids as _ids


# -- tma-smem-align: Triton's dynamic buffer, declared .align 16, with no static .shared -------
def _tma_load(offset: int, static: bool) -> str:
    """One TMA load of a 128B-swizzled box into `global_smem + offset`, as Triton lays it out:
    `.extern .shared .align 16`, the barrier after the tiles in the same buffer."""
    return f"""
.extern .shared .align 16 .b8 global_smem[];
{".shared .align 8 .b8 flag[8];" if static else ""}
.visible .entry k(.param .align 64 .b8 k_param_0[128])
.reqntid 128
{{
  .reg .pred %p<4>;
  .reg .b32 %r<20>;
  .reg .b64 %rd<8>;
  mov.u32 %r1, %tid.x;
  setp.eq.s32 %p1, %r1, 0;
  mov.b32 %r9, global_smem;
  add.s32 %r17, %r9, 16384;
  @%p1 mbarrier.init.shared::cta.b64 [%r17], 1;
  fence.proxy.async.shared::cta;
  bar.sync 0;
  mov.u64 %rd4, k_param_0;
  cvta.param.u64 %rd1, %rd4;
  add.s32 %r3, %r9, {offset};
  mov.b32 %r10, 0;
  @%p1 mbarrier.arrive.expect_tx.shared::cta.b64 _, [%r17], 8192;
  @%p1 cp.async.bulk.tensor.2d.shared::cta.global.mbarrier::complete_tx::bytes
      [%r3], [%rd1, {{%r10, %r10}}], [%r17];
waitLoop:
  mbarrier.try_wait.parity.shared::cta.b64 %p2, [%r17], %r10;
  @!%p2 bra.uni waitLoop;
  ret;
}}
"""


MAP = {"k_param_0": {"box_bytes": 8192, "swizzle": "128B"}}


def test_dynamic_base_counts_as_1024_aligned_with_nothing_static_before_it():
    assert _check(_tma_load(1024, static=False), maps=MAP) == []
    assert _check(_tma_load(0, static=False), maps=MAP) == []


def test_offset_inside_the_dynamic_region_must_keep_the_swizzle_alignment():
    found = _check(_tma_load(1024 + 128, static=False), maps=MAP)
    assert _ids(found) == ["tma-smem-align"], [f.format() for f in found]
    assert "global_smem+1152, aligned to 128 bytes" in found[0].message
    assert "1024-byte repeat" in found[0].message


def test_static_shared_before_the_dynamic_region_still_leaves_16_bytes():
    found = _check(_tma_load(1024, static=True), maps=MAP)
    assert _ids(found) == ["tma-smem-align"], [f.format() for f in found]
    assert "aligned to 16 bytes" in found[0].message and "flag" in found[0].message


# -- mbar-uninit: a warp-specialized kernel's default partition initialises, the workers use ---
def _ws(order: str = "init, barrier", barrier: str = "barrier.sync 1;") -> str:
    """Triton's warp specialization: warps 0-3 (the default partition, `warp < 4` through
    the broadcast `shfl.sync.idx` of `tid >> 5`) initialise the barrier, and every warp meets
    at the CTA barrier before the workers (warps 4-7) wait on it."""
    init = "@%p2 mbarrier.init.shared::cta.b64 [%r17], 1;"
    default = {"init, barrier": f"{init}\n  bar.sync 0, 128;\n  {barrier}",
               "barrier, init": f"{barrier}\n  {init}\n  bar.sync 0, 128;"}[order]
    return f"""
.extern .shared .align 16 .b8 global_smem[];
.visible .entry ws()
.reqntid 256
{{
  .reg .pred %p<8>;
  .reg .b32 %r<20>;
  mov.u32 %r1, %tid.x;
  shr.u32 %r2, %r1, 5;
  shfl.sync.idx.b32 %r3, %r2, 0, 31, -1;
  setp.lt.u32 %p1, %r3, 4;
  mov.b32 %r9, global_smem;
  add.s32 %r17, %r9, 1024;
  @!%p1 bra $WORKER;
  setp.eq.b32 %p5, %r2, 0;
  elect.sync %r8|%p6, -1;
  and.pred %p2, %p5, %p6;
  {default}
  @%p2 mbarrier.arrive.shared::cta.b64 _, [%r17];
  bra.uni $DONE;
$WORKER:
  {barrier}
  mov.b32 %r10, 0;
$WAIT:
  mbarrier.try_wait.parity.shared::cta.b64 %p3, [%r17], %r10;
  @!%p3 bra.uni $WAIT;
$DONE:
  ret;
}}
"""


def test_init_published_to_other_partitions_by_a_cta_barrier():
    found = _check(_ws())
    assert found == [], [f.format() for f in found]


def test_init_after_the_cta_barrier_is_still_reported():
    found = _check(_ws("barrier, init"))
    assert _ids(found) == ["mbar-uninit"], [f.format() for f in found]
    assert "try_wait" in found[0].sites[0].ptx


def test_a_barrier_of_some_threads_only_does_not_publish():
    found = _check(_ws(barrier="bar.sync 1, 128;"))
    assert _ids(found) == ["mbar-uninit"], [f.format() for f in found]


# -- a register an unmodelled instruction writes (`Raw`) is defined there ----------------------
def _parity_loop(in_loop: bool) -> str:
    """One thread arrives, every thread waits, once per trip; the parity is bit 0 of the
    trip count taken with `bfe` (which the front end keeps as raw text, as Triton's
    `bfe.u32 %r50, %r52, 1, 1` for a ring's phase) in the loop, or once before it."""
    bfe = "bfe.u32 %r50, %r186, 0, 1;"
    return f"""
.extern .shared .align 16 .b8 global_smem[];
.visible .entry par(.param .u32 par_n)
.reqntid 128
{{
  .reg .pred %p<8>;
  .reg .b32 %r<200>;
  ld.param.u32 %r9, [par_n];
  mov.u32 %r1, %tid.x;
  setp.eq.s32 %p1, %r1, 0;
  mov.b32 %r48, global_smem;
  @%p1 mbarrier.init.shared::cta.b64 [%r48], 1;
  bar.sync 0;
  mov.b32 %r186, 0;
  {"" if in_loop else bfe}
$LOOP:
  @%p1 mbarrier.arrive.shared::cta.b64 _, [%r48];
  {bfe if in_loop else ""}
$WAIT:
  mbarrier.try_wait.parity.shared::cta.b64 %p2, [%r48], %r50;
  @!%p2 bra.uni $WAIT;
  bar.sync 0;
  add.s32 %r186, %r186, 1;
  setp.lt.u32 %p3, %r186, %r9;
  @%p3 bra $LOOP;
  ret;
}}
"""


def test_a_parity_an_unmodelled_instruction_computes_from_the_trip_is_not_constant():
    found = _check(_parity_loop(in_loop=True))
    assert found == [], [f.format() for f in found]


def test_a_parity_it_computes_once_before_the_loop_is_constant():
    found = _check(_parity_loop(in_loop=False))
    assert _ids(found) == ["wait-parity-constant"], [f.format() for f in found]


# -- fenceproxy-divergent: Triton's device-side descriptor, written by warp 0 of a warpgroup ----
def _device_desc(cond: str) -> str:
    """Lane 0 edits a tensor map in shared memory, the warp syncs, and the threads with
    `cond` (Triton: `(tid & 127) < 32`, warp 0 of each warpgroup) copy it out with the
    warp-collective cp_fenceproxy."""
    return f"""
.extern .shared .align 16 .b8 global_smem[];
.visible .entry desc(.param .u64 desc_ws)
.reqntid 256
{{
  .reg .pred %p<4>;
  .reg .b32 %r<20>;
  .reg .b64 %rd<20>;
  ld.param.u64 %rd2, [desc_ws];
  mov.u32 %r1, %tid.x;
  {cond}
  mov.b32 %r5, global_smem;
  setp.ne.b32 %p1, %r1, 0;
  @%p1 bra $SKIP;
  cvt.u64.u32 %rd3, %r5;
  tensormap.replace.tile.rank.shared::cta.b1024.b32 [%rd3], 1;
$SKIP:
  bar.warp.sync -1;
  cvt.u64.u32 %rd7, %r5;
  @%p2 tensormap.cp_fenceproxy.global.shared::cta.tensormap::generic.release.gpu.sync.aligned
      [%rd2], [%rd7], 128;
  ret;
}}
"""


def test_whole_warps_picked_through_a_mask_of_tid_run_the_collective_copy():
    for cond in ("and.b32 %r2, %r1, 127;\n  setp.lt.u32 %p2, %r2, 32;",
                 "rem.u32 %r2, %r1, 128;\n  setp.lt.u32 %p2, %r2, 64;"):
        found = _check(_device_desc(cond))
        assert found == [], [f.format() for f in found]


def test_part_of_a_warp_picked_through_a_mask_of_tid_is_divergent():
    for cond in ("and.b32 %r2, %r1, 127;\n  setp.lt.u32 %p2, %r2, 16;",
                 "and.b32 %r2, %r1, 63;\n  setp.lt.u32 %p2, %r2, 48;"):
        found = _check(_device_desc(cond))
        assert _ids(found) == ["fenceproxy-divergent"], [f.format() for f in found]


# -- expect-tx-mismatch: the box of a map Triton encodes on the device ------------------------
def _device_box_load(announced: int) -> str:
    """Lane 0 writes a 64 x 64 f16 box (8192 bytes) into a map in shared memory through the
    widened address Triton uses (`cvt.u64.u32` of global_smem), warp 0 releases it to global
    memory and acquires it, and thread 0 loads one box announcing `announced` bytes."""
    return f"""
.extern .shared .align 16 .b8 global_smem[];
.visible .entry dd(.param .u64 dd_ws, .param .u64 dd_a)
.reqntid 128
{{
  .reg .pred %p<8>;
  .reg .b32 %r<20>;
  .reg .b64 %rd<20>;
  ld.param.u64 %rd2, [dd_ws];
  ld.param.u64 %rd4, [dd_a];
  mov.u32 %r1, %tid.x;
  and.b32 %r2, %r1, 127;
  setp.lt.u32 %p2, %r2, 32;
  mov.b32 %r5, global_smem;
  setp.ne.b32 %p1, %r2, 0;
  @%p1 bra $SKIP;
  cvt.u64.u32 %rd3, %r5;
  tensormap.replace.tile.global_address.shared::cta.b1024.b64 [%rd3], %rd4;
  tensormap.replace.tile.rank.shared::cta.b1024.b32 [%rd3], 1;
  mov.b32 %r6, 64;
  tensormap.replace.tile.box_dim.shared::cta.b1024.b32 [%rd3], 0, %r6;
  tensormap.replace.tile.box_dim.shared::cta.b1024.b32 [%rd3], 1, %r6;
  tensormap.replace.tile.elemtype.shared::cta.b1024.b32 [%rd3], 6;
$SKIP:
  bar.warp.sync -1;
  cvt.u64.u32 %rd7, %r5;
  @%p2 tensormap.cp_fenceproxy.global.shared::cta.tensormap::generic.release.gpu.sync.aligned
      [%rd2], [%rd7], 128;
  @%p2 fence.proxy.tensormap::generic.acquire.gpu [%rd2], 128;
  bar.sync 0;
  setp.eq.b32 %p4, %r2, 0;
  add.s32 %r9, %r5, 16384;
  @%p4 mbarrier.init.shared::cta.b64 [%r9], 1;
  fence.proxy.async.shared::cta;
  bar.sync 0;
  @%p4 mbarrier.arrive.expect_tx.shared::cta.b64 _, [%r9], {announced};
  mov.b32 %r10, 0;
  add.s32 %r11, %r5, 1024;
  @%p4 cp.async.bulk.tensor.2d.shared::cta.global.mbarrier::complete_tx::bytes
      [%r11], [%rd2, {{%r10, %r10}}], [%r9];
$WAIT:
  mbarrier.try_wait.parity.shared::cta.b64 %p3, [%r9], %r10;
  @!%p3 bra.uni $WAIT;
  ret;
}}
"""


def test_box_of_a_map_encoded_through_a_widened_shared_address_is_known():
    found = parse_ptx(HEAD + _device_box_load(8192), file="k.ptx").check(notes=True)
    assert found == [], [f.format() for f in found]   # not even a note: the box is known
    found = _check(_device_box_load(4096))
    assert _ids(found) == ["expect-tx-mismatch"], [f.format() for f in found]
    assert "announces 4096 bytes" in found[0].message and "deliver 8192" in found[0].message


# -- bulk-src-overwrite: a persistent kernel's TMA-store epilogue beside the next tile's ring --
def _persistent(wrap_above: int, reduced: str = "", k_once: bool = False,
                pointer: bool = False) -> str:
    """Per output tile: a K loop loading stage s (16 KB each) of a ring whose stage register
    Triton advances as `t = s + 1; s = t > 2 ? 0 : t` (three stages, [0, 48 KB)), then an
    epilogue staging C at +48 KB and storing it with TMA; the next tile's loads start while
    that store may still read C (its wait_group.read comes before the next epilogue only).
    `wrap_above`: the constant of the wrap test (2: three stages; 3: four, the fourth over C).
    `reduced`: instead, the stage's offset as LLVM strength-reduces `16 KB * (k % N)`
    (Triton's tl_ws_matmul_desc): an offset stepped by 16 KB beside k, less `N * 16 KB *
    (k / N)` (this text computes k / N into %r27), added to global_smem. `k_once`: k starts
    once, before the tile loop, while the offset restarts every tile (not in step).
    `pointer`: the stepped register is the stage's address itself, starting at global_smem
    (Gluon's ws_gemm), not an offset added to it."""
    k0 = "mov.b32 %r151, 0;"
    stage = ("shl.b32 %r112, %r162, 14;\n  add.s32 %r86, %r21, %r112;" if not reduced else
             f"{reduced}\n  mul.lo.s32 %r28, %r27, {16384 * (4 if 'div' in reduced else 3)};"
             + ("\n  sub.s32 %r86, %r149, %r28;" if pointer else
                "\n  sub.s32 %r112, %r149, %r28;\n  add.s32 %r86, %r112, %r21;"))
    steps = ("add.s32 %r151, %r151, 1;\n  add.s32 %r149, %r149, 16384;" if reduced else "")
    return f"""
.extern .shared .align 16 .b8 global_smem[];
.visible .entry pm(.param .align 64 .b8 pm_map[128], .param .u32 pm_n)
.reqntid 128
{{
  .reg .pred %p<50>;
  .reg .b32 %r<240>;
  .reg .b64 %rd<10>;
  ld.param.u32 %r30, [pm_n];
  mov.u64 %rd1, pm_map;
  cvta.param.u64 %rd2, %rd1;
  mov.u32 %r1, %tid.x;
  setp.eq.s32 %p1, %r1, 0;
  mov.b32 %r21, global_smem;
  add.s32 %r9, %r21, 65536;
  @%p1 mbarrier.init.shared::cta.b64 [%r9], 1;
  fence.proxy.async.shared::cta;
  bar.sync 0;
  mov.b32 %r20, 0;
  mov.b32 %r25, 0;
  {k0 if k_once else ""}
$TILE:
  mov.b32 %r162, 0;
  mov.b32 %r227, 0;
  {"" if k_once else k0}
  mov.b32 %r149, {"%r21" if pointer else "0"};
$K:
  {stage}
  @%p1 mbarrier.arrive.expect_tx.shared::cta.b64 _, [%r9], 16384;
  @%p1 cp.async.bulk.tensor.2d.shared::cta.global.mbarrier::complete_tx::bytes
      [%r86], [%rd2, {{%r227, %r25}}], [%r9];
$W:
  mbarrier.try_wait.parity.shared::cta.b64 %p2, [%r9], %r20;
  @!%p2 bra.uni $W;
  xor.b32 %r20, %r20, 1;
  ld.shared.u32 %r5, [%r86];
  bar.sync 0;
  add.s32 %r109, %r162, 1;
  setp.gt.s32 %p33, %r109, {wrap_above};
  selp.b32 %r162, 0, %r109, %p33;
  {steps}
  add.s32 %r227, %r227, 64;
  setp.lt.s32 %p38, %r227, %r30;
  @%p38 bra $K;
  cp.async.bulk.wait_group.read 0;
  bar.sync 0;
  add.s32 %r117, %r21, 49152;
  st.shared.u32 [%r117], %r5;
  fence.proxy.async.shared::cta;
  bar.sync 0;
  @%p1 cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%rd2, {{%r25, %r25}}], [%r117];
  cp.async.bulk.commit_group;
  add.s32 %r25, %r25, 1;
  setp.lt.s32 %p48, %r25, %r30;
  @%p48 bra $TILE;
  cp.async.bulk.wait_group 0;
  ret;
}}
"""


def test_ring_loads_of_the_next_tile_stay_clear_of_the_stored_tile():
    found = _check(_persistent(2), maps={"pm_map": {"box_bytes": 16384}})
    assert found == [], [f.format() for f in found]


def test_a_ring_stage_over_the_stored_tile_is_overwritten_while_the_store_reads_it():
    found = _check(_persistent(3), maps={"pm_map": {"box_bytes": 16384}})
    assert _ids(found) == ["bulk-src-overwrite"], [f.format() for f in found]


_DIV3 = "mul.hi.u32 %r26, %r151, -1431655765;\n  shr.u32 %r27, %r26, 1;"   # k / 3, as LLVM
_DIV4 = "div.u32 %r27, %r151, 4;"


def test_a_strength_reduced_ring_offset_is_a_ring_of_its_stages():
    found = _check(_persistent(2, _DIV3), maps={"pm_map": {"box_bytes": 16384}})
    assert found == [], [f.format() for f in found]


def test_a_strength_reduced_ring_of_four_stages_reaches_the_stored_tile():
    found = _check(_persistent(2, _DIV4), maps={"pm_map": {"box_bytes": 16384}})
    assert _ids(found) == ["bulk-src-overwrite"], [f.format() for f in found]


def test_an_offset_not_stepped_with_its_counter_is_not_a_ring():
    found = _check(_persistent(2, _DIV3, k_once=True), maps={"pm_map": {"box_bytes": 16384}})
    assert _ids(found) == ["bulk-src-overwrite"], [f.format() for f in found]


# -- mbar-reinit: the init moved into the loop leaves the inval after it uninitialised ---------
def _init_in_loop(inval_in_loop: bool) -> str:
    """Gluon's tma_load_loop bug: each trip initialises the barrier, uses it, and (when
    `inval_in_loop`) invalidates it; after the loop, which may run no trip, thread 0
    invalidates it (or, with the loop's own inval, arrives on it)."""
    inval = "@%p1 mbarrier.inval.shared::cta.b64 [%r5];\n  bar.sync 0;"
    after = ("@%p1 mbarrier.arrive.shared::cta.b64 _, [%r5];" if inval_in_loop
             else "@%p1 mbarrier.inval.shared::cta.b64 [%r5];")
    return f"""
.extern .shared .align 16 .b8 global_smem[];
.visible .entry lp(.param .u32 lp_n)
.reqntid 128
{{
  .reg .pred %p<8>;
  .reg .b32 %r<20>;
  ld.param.u32 %r9, [lp_n];
  mov.u32 %r1, %tid.x;
  setp.eq.s32 %p1, %r1, 0;
  mov.b32 %r5, global_smem;
  mov.b32 %r6, 0;
  setp.lt.s32 %p4, %r9, 1;
  @%p4 bra $END;
$LOOP:
  @%p1 mbarrier.init.shared::cta.b64 [%r5], 1;
  bar.sync 0;
  @%p1 mbarrier.arrive.shared::cta.b64 _, [%r5];
$W:
  mbarrier.try_wait.parity.shared::cta.b64 %p2, [%r5], 0;
  @!%p2 bra.uni $W;
  bar.sync 0;
  {inval if inval_in_loop else ""}
  add.s32 %r6, %r6, 1;
  setp.lt.s32 %p3, %r6, %r9;
  @%p3 bra $LOOP;
$END:
  {after}
  ret;
}}
"""


def test_the_inval_after_a_loop_that_reinitialises_is_the_reinit_mistake():
    found = _check(_init_in_loop(inval_in_loop=False))
    assert _ids(found) == ["mbar-reinit"], [f.format() for f in found]


def test_a_use_after_a_loop_that_invalidates_is_still_uninitialised():
    found = _check(_init_in_loop(inval_in_loop=True))
    assert "mbar-uninit" in _ids(found) and "mbar-reinit" not in _ids(found), \
        [f.format() for f in found]


def test_a_strength_reduced_stage_pointer_is_an_address_in_the_ring():
    maps = {"pm_map": {"box_bytes": 16384}}
    found = _check(_persistent(2, _DIV3, pointer=True), maps=maps)
    assert found == [], [f.format() for f in found]
    found = _check(_persistent(2, _DIV4, pointer=True), maps=maps)
    assert _ids(found) == ["bulk-src-overwrite"], [f.format() for f in found]


# -- smem-read-before-wait: a K loop of no trip skips the copies as well as the wait ----------
def _zero_trip(copy_in_loop: bool) -> str:
    """Thread 0 loads a tile per trip of a loop of `n` trips that every thread waits in; the
    tile is read after the loop, whose no-trip path (n < 1) has no wait. With the copy in
    the loop that path issues no copy either; with one copy before the loop it does."""
    copy = """@%p1 mbarrier.arrive.expect_tx.shared::cta.b64 _, [%r8], 4096;
  @%p1 cp.async.bulk.tensor.2d.shared::cta.global.mbarrier::complete_tx::bytes
      [%r5], [%rd2, {%r6, %r6}], [%r8];"""
    return f"""
.extern .shared .align 16 .b8 global_smem[];
.visible .entry zt(.param .align 64 .b8 zt_map[128], .param .u32 zt_n)
.reqntid 128
{{
  .reg .pred %p<8>;
  .reg .b32 %r<20>;
  .reg .b64 %rd<8>;
  ld.param.u32 %r9, [zt_n];
  mov.u64 %rd1, zt_map;
  cvta.param.u64 %rd2, %rd1;
  mov.u32 %r1, %tid.x;
  setp.eq.s32 %p1, %r1, 0;
  mov.b32 %r5, global_smem;
  add.s32 %r8, %r5, 4096;
  @%p1 mbarrier.init.shared::cta.b64 [%r8], 1;
  fence.proxy.async.shared::cta;
  bar.sync 0;
  mov.b32 %r6, 0;
  mov.b32 %r7, 0;
  {"" if copy_in_loop else copy}
  setp.lt.s32 %p4, %r9, 1;
  @%p4 bra $SKIP;
$LOOP:
  {copy if copy_in_loop else ""}
$W:
  mbarrier.try_wait.parity.shared::cta.b64 %p2, [%r8], %r7;
  @!%p2 bra.uni $W;
  xor.b32 %r7, %r7, 1;
  bar.sync 0;
  add.s32 %r6, %r6, 1;
  setp.lt.s32 %p3, %r6, %r9;
  @%p3 bra $LOOP;
$SKIP:
  ld.shared.u32 %r10, [%r5];
  ret;
}}
"""


def test_a_read_after_a_loop_of_no_trip_that_also_skips_the_copies_is_clean():
    found = _check(_zero_trip(copy_in_loop=True), maps={"zt_map": {"box_bytes": 4096}})
    assert "smem-read-before-wait" not in _ids(found), [f.format() for f in found]


def test_a_read_after_a_loop_of_no_trip_with_a_copy_before_it_is_reported():
    found = _check(_zero_trip(copy_in_loop=False), maps={"zt_map": {"box_bytes": 4096}})
    assert "smem-read-before-wait" in _ids(found), [f.format() for f in found]
