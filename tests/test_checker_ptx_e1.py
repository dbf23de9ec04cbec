"""Checker tests on parsed PTX (helper e1): the level of a register written more than once,
as each read sees it (the writes that reach the read)."""

from __future__ import annotations

from tests.ptx_check_support import check_text, ids


# -- fenceproxy-divergent: CUTLASS's group search, then a warp-wide broadcast -------------------
def _group_search(skip_to: str, guard: str = "") -> str:
    """Each lane searches its own candidate group (a per-lane loop on %r10), lane 0's result
    is broadcast into the same register (`shfl.sync.idx` over the whole warp), and a
    comparison of it decides whether the warp copies a tensor map out with the
    warp-collective cp_fenceproxy. A uniform flag jumps to `skip_to`: `$BCAST` still
    broadcasts, `$JOIN` skips the broadcast, so the per-lane candidate reaches the branch;
    so does it past a broadcast under a `guard` (which may not run)."""
    return f"""
.extern .shared .align 128 .b8 global_smem[];
.visible .entry gs(.param .u64 gs_ws, .param .u32 gs_n, .param .u32 gs_f)
.reqntid 128
{{
  .reg .pred %p<8>;
  .reg .b32 %r<20>;
  .reg .b64 %rd<20>;
  ld.param.u64 %rd2, [gs_ws];
  ld.param.u32 %r9, [gs_n];
  ld.param.u32 %r8, [gs_f];
  mov.b32 %r5, global_smem;
  cvt.u64.u32 %rd7, %r5;
  mov.u32 %r1, %tid.x;
  and.b32 %r2, %r1, 31;
  mov.u32 %r10, %r2;
$SEARCH:
  setp.ge.u32 %p1, %r10, %r9;
  @%p1 bra $FOUND;
  add.s32 %r10, %r10, 32;
  bra.uni $SEARCH;
$FOUND:
  setp.eq.s32 %p4, %r8, 0;
  @%p4 bra {skip_to};
  add.s32 %r11, %r9, 1;
$BCAST:
  {guard}shfl.sync.idx.b32 %r10, %r10, 0, 31, -1;
$JOIN:
  setp.eq.s32 %p2, %r10, %r9;
  @%p2 bra $SKIP;
  tensormap.cp_fenceproxy.global.shared::cta.tensormap::generic.release.gpu.sync.aligned
      [%rd2], [%rd7], 128;
$SKIP:
  ret;
}}
"""


def test_a_register_broadcast_over_its_per_lane_candidates_is_warp_uniform_where_read():
    found = check_text(_group_search("$BCAST"))
    assert found == [], [f.format() for f in found]


def test_a_per_lane_candidate_reaching_the_read_on_one_path_keeps_it_per_lane():
    found = check_text(_group_search("$JOIN"))
    assert ids(found) == ["fenceproxy-divergent"], [f.format() for f in found]



def test_a_per_lane_candidate_reaching_the_read_past_a_guarded_broadcast_keeps_it_per_lane():
    found = check_text(_group_search("$BCAST", guard="@!%p4 "))
    assert ids(found) == ["fenceproxy-divergent"], [f.format() for f in found]
