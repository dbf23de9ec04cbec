"""Checker tests on parsed PTX: a bulk-store issuer picked by `elect.sync` and a warp
condition, in a CTA whose shape only `.maxntid` bounds (nvcc's `__launch_bounds__`), so the
store and its `cp.async.bulk.wait_group.read` are correlated by their conditions alone: an
election with one constant membermask is fixed for the life of a thread, and `not.pred q, p`
is the condition p negated (tests/corpus: nvcc_ptx/tma_store_epilogue.ptx)."""

from __future__ import annotations

import pytest

from tests.ptx_check_support import check_text, ids


def _epilogue(storer: str, wait: bool = True, skip: str = "@%p9 bra") -> str:
    """A persistent epilogue of 256 threads: every thread stages into `staging`, a CTA
    barrier, the storer (`storer` sets %p1) issues the TMA store and commits; before the next
    tile's writes the storer waits for the store's read (`wait`). The store and the waits
    are skipped with `skip` (on %p9 = not %p1, or directly on %p1)."""
    wait_read = f"  {skip} $NOWAIT;\n  cp.async.bulk.wait_group.read 0;\n$NOWAIT:\n" \
        if wait else ""
    return f"""
.visible .entry epi(.param .align 64 .b8 epi_map[128], .param .u32 epi_n)
.maxntid 256, 1, 1
{{
  .reg .pred %p<16>;
  .reg .b32 %r<40>;
  .reg .b64 %rd<8>;
  .shared .align 128 .b8 staging[2048];
  mov.b64 %rd2, epi_map;
  cvta.param.u64 %rd1, %rd2;
  ld.param.u32 %r14, [epi_n];
  mov.u32 %r1, %tid.x;
  shr.u32 %r2, %r1, 5;
  setp.eq.s32 %p4, %r2, 4;
{storer}
  not.pred %p9, %p1;
  mov.u32 %r30, 0;
$LOOP:
{wait_read}  bar.sync 1, 256;
  mov.u32 %r20, staging;
  shl.b32 %r21, %r1, 2;
  add.s32 %r22, %r20, %r21;
  st.shared.u32 [%r22], %r30;
  fence.proxy.async.shared::cta;
  bar.sync 1, 256;
  {skip} $NOSTORE;
  cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group [%rd1, {{%r30, %r30}}], [%r20];
  cp.async.bulk.commit_group;
$NOSTORE:
  add.s32 %r30, %r30, 1;
  setp.lt.s32 %p11, %r30, %r14;
  @%p11 bra $LOOP;
  {skip} $DONE;
  cp.async.bulk.wait_group.read 0;
$DONE:
  ret;
}}
"""


# cuda::ptx's elect_sync(): the election in a scoped predicate, returned as 0/1 with selp.
_ELECT_CCCL = """  {
  .reg .pred P_OUT;
  elect.sync _|P_OUT, -1;
  selp.b32 %r24, 1, 0, P_OUT;
  }
  setp.ne.s32 %p5, %r24, 0;
  and.pred %p1, %p4, %p5;"""
# The plain instruction, its predicate used directly.
_ELECT_PLAIN = """  elect.sync %r24|%p5, -1;
  and.pred %p1, %p4, %p5;"""
# One thread by its id, for the `not.pred` alone.
_TID = """  setp.eq.s32 %p1, %r1, 128;"""


@pytest.mark.parametrize("storer", [_ELECT_CCCL, _ELECT_PLAIN, _TID],
                         ids=["cccl-elect", "elect", "tid"])
@pytest.mark.parametrize("skip", ["@%p9 bra", "@!%p1 bra"], ids=["not.pred", "negated"])
def test_the_storer_that_waits_for_its_own_store_is_clean(storer, skip):
    found = check_text(_epilogue(storer, skip=skip))
    assert found == [], [f.format() for f in found]


@pytest.mark.parametrize("storer", [_ELECT_CCCL, _ELECT_PLAIN, _TID],
                         ids=["cccl-elect", "elect", "tid"])
def test_restaging_before_the_storer_waits_is_still_reported(storer):
    assert ids(check_text(_epilogue(storer, wait=False))) == ["bulk-src-overwrite"]


def test_an_election_whose_mask_is_no_constant_is_not_taken_as_fixed():
    # Only a constant membermask is modelled (as for the per-thread evaluation of
    # elections): with a run-time mask the store's and the waits' conditions stay unrelated.
    storer = _ELECT_PLAIN.replace("elect.sync %r24|%p5, -1;", "elect.sync %r24|%p5, %r14;")
    assert "bulk-src-overwrite" in ids(check_text(_epilogue(storer)))
