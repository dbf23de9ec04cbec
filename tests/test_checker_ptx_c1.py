"""Checker on parsed PTX: the wait idioms nvcc makes of `cuda::ptx` and CUTLASS.

nvcc compiles `while (!cuda::ptx::mbarrier_try_wait_parity(...))` into an inline-asm scope
that turns the wait's predicate into an integer (`selp.b32 r, 1, 0, P_OUT`), then tests that
integer outside (`setp.eq.s32 p, r, 0; @p bra retry`); `-G` and `__noinline__` helpers add
`cvt`, `not.pred` and a `.func` return parameter on the way. The checker must see the retry
loop (no `try-wait-not-looped`, and the loop is not a loop over phases:
no `wait-parity-constant`). Each clean form checks clean; each buggy twin (a test that does
not decide on the wait, an exit taken when the wait failed, a constant parity in the loop over
phases, a helper whose result is not the wait's) is still reported.
"""

from __future__ import annotations

import pytest

from ptxdsl.frontend import parse_ptx

HEAD = """
.version 8.0
.target sm_90a
.address_size 64

.shared .align 8 .b8 bar[8];
.shared .align 16 .b8 data[64];
"""

# One thread initialises the barrier; every thread then waits on phase `it & 1` of it in a
# loop over phases (PARITY), with the wait written as WAIT.
LOOP = HEAD + """
.visible .entry k(.param .u32 n)
{
  .reg .pred %p<8>;
  .reg .b32 %r<20>;
  .reg .b16 %rs<4>;
  .reg .b64 %rd<4>;
  mov.u32 %r1, bar;
  mov.u32 %r9, %tid.x;
  setp.ne.s32 %p5, %r9, 0;
  @%p5 bra $SKIP;
  mbarrier.init.shared::cta.b64 [%r1], 1;
  fence.mbarrier_init.release.cluster;
$SKIP:
  bar.sync 0;
  ld.param.u32 %r2, [n];
  mov.u32 %r3, 0;
$LOOP:
  PARITY
  mbarrier.arrive.shared::cta.b64 %rd1, [%r1];
$WAIT:
  {
  .reg .pred P_OUT;
  mbarrier.WAITOP.parity.shared::cta.b64 P_OUT, [%r1], %r4;
  SELP
  }
  TEST
  add.s32 %r3, %r3, 1;
  setp.lt.s32 %p2, %r3, %r2;
  @%p2 bra $LOOP;
  ret;
}
"""

NVCC_SELP = "selp.b32 %r5, 1, 0, P_OUT;"
NVCC_TEST = "setp.eq.s32 %p1, %r5, 0;\n  @%p1 bra $WAIT;"


def ids(text: str) -> list[str]:
    return sorted({f.id for f in parse_ptx(text, file="k.ptx").check()})


def loop(selp: str = NVCC_SELP, test: str = NVCC_TEST, parity: str = "and.b32 %r4, %r3, 1;",
         waitop: str = "try_wait") -> str:
    return LOOP.replace("PARITY", parity).replace("SELP", selp).replace("TEST", test) \
        .replace("WAITOP", waitop)


# The retry loop's test, the way compilers write it (each: what the wait's result becomes).
CLEAN = {
    "nvcc": {},                                   # selp 1/0, `== 0` retries
    "selp_0_1_ne": dict(selp="selp.b32 %r5, 0, 1, P_OUT;",
                        test="setp.ne.b32 %p1, %r5, 0;\n  @%p1 bra $WAIT;"),
    "constant_first": dict(test="setp.eq.s32 %p1, 0, %r5;\n  @%p1 bra $WAIT;"),
    "unsigned_lt": dict(test="setp.lt.u32 %p1, %r5, 1;\n  @%p1 bra $WAIT;"),
    "cvt_u16": dict(test="cvt.u16.u32 %rs1, %r5;\n  setp.eq.s16 %p1, %rs1, 0;\n"
                         "  @%p1 bra $WAIT;"),
    # nvcc -G: `!(!ok)` decides the exit, an unconditional branch retries
    "not_not": dict(test="setp.ne.s32 %p1, %r5, 0;\n  not.pred %p3, %p1;\n"
                         "  not.pred %p4, %p3;\n  @%p4 bra $DONE;\n  bra.uni $WAIT;\n$DONE:"),
    "and_exit": dict(test="setp.ne.s32 %p1, %r5, 0;\n  setp.ne.s32 %p3, %r2, 0;\n"
                          "  and.pred %p4, %p1, %p3;\n  @%p4 bra $DONE;\n  bra.uni $WAIT;\n"
                          "$DONE:"),
    "or_retry": dict(test="setp.eq.s32 %p1, %r5, 0;\n  setp.eq.s32 %p3, %r2, 0;\n"
                          "  or.pred %p4, %p1, %p3;\n  @%p4 bra $WAIT;"),
    "setp_p_q": dict(test="setp.ne.s32 %p1|%p3, %r5, 0;\n  @%p3 bra $WAIT;"),
    "test_wait": dict(waitop="test_wait"),
}


@pytest.mark.parametrize("form", sorted(CLEAN))
def test_retry_loop_on_the_waits_integer_is_clean(form):
    assert ids(loop(**CLEAN[form])) == []


BUGGY = {
    # the test is false whatever the wait returned: nothing retries
    "test_ignores_wait": dict(test="setp.eq.s32 %p1, %r5, 7;\n  @%p1 bra $WAIT;"),
    # retries while the wait succeeds, leaves when it failed
    "exit_when_false": dict(test="setp.ne.s32 %p1, %r5, 0;\n  @%p1 bra $WAIT;"),
    # leaves when the wait succeeded or on another condition
    "or_exit": dict(test="setp.ne.s32 %p1, %r5, 0;\n  setp.ne.s32 %p3, %r2, 0;\n"
                         "  or.pred %p4, %p1, %p3;\n  @%p4 bra $DONE;\n  bra.uni $WAIT;\n"
                         "$DONE:"),
}


@pytest.mark.parametrize("form", sorted(BUGGY))
def test_loop_not_decided_by_the_wait_is_reported(form):
    assert "try-wait-not-looped" in ids(loop(**BUGGY[form]))


def test_retry_loop_is_not_the_loop_over_phases():
    # The retry loop repeats one phase by design; the loop around it must change the parity.
    assert ids(loop(parity="mov.u32 %r4, 0;")) == ["wait-parity-constant"]


# A `__noinline__` helper returning the wait's bool through its return parameter.
HELPER = HEAD + """
.func (.param .b32 func_retval0) try_phase(.param .b32 try_phase_param_0,
                                          .param .b32 try_phase_param_1)
{
  .reg .pred %p<2>;
  .reg .b32 %r<5>;
  ld.param.u32 %r2, [try_phase_param_0];
  ld.param.u32 %r3, [try_phase_param_1];
  {
  .reg .pred P_OUT;
  mbarrier.try_wait.parity.shared::cta.b64 P_OUT, [%r2], %r3;
  selp.b32 %r1, 1, 0, P_OUT;
  }
  setp.ne.s32 %p1, %r1, 0;
  selp.u32 %r4, 1, 0, %p1;
  RESULT
  st.param.b32 [func_retval0+0], %r4;
  ret;
}

.visible .entry k(.param .u32 n)
{
  .reg .pred %p<8>;
  .reg .b32 %r<20>;
  .reg .b16 %rs<4>;
  .reg .b64 %rd<4>;
  mov.u32 %r1, bar;
  mov.u32 %r9, %tid.x;
  setp.ne.s32 %p5, %r9, 0;
  @%p5 bra $SKIP;
  mbarrier.init.shared::cta.b64 [%r1], 1;
  fence.mbarrier_init.release.cluster;
$SKIP:
  bar.sync 0;
  ld.param.u32 %r2, [n];
  mov.u32 %r3, 0;
$LOOP:
  and.b32 %r4, %r3, 1;
  mbarrier.arrive.shared::cta.b64 %rd1, [%r1];
$WAIT:
  {
  .param .b32 param0;
  st.param.b32 [param0+0], %r1;
  .param .b32 param1;
  st.param.b32 [param1+0], %r4;
  .param .b32 retval0;
  call.uni (retval0), try_phase, (param0, param1);
  ld.param.b32 %r5, [retval0+0];
  }
  cvt.u16.u32 %rs1, %r5;
  setp.eq.s16 %p1, %rs1, 0;
  @%p1 bra $WAIT;
  add.s32 %r3, %r3, 1;
  setp.lt.s32 %p2, %r3, %r2;
  @%p2 bra $LOOP;
  ret;
}
"""


def test_retry_loop_on_a_helpers_return_value_is_clean():
    assert ids(HELPER.replace("RESULT", "")) == []


def test_helper_returning_something_else_is_reported():
    assert ids(HELPER.replace("RESULT", "mov.u32 %r4, 1;")) == ["try-wait-not-looped"]


# nvcc -G: a helper with a `return` per branch (each its own store to the return parameter
# and `ret`), and the caller's bool normalised by `cvt.s32.s8` of a .b32 register (a form
# the Cvt class does not take: the statement stays raw).
def _two_returns(second: str) -> str:
    text = HELPER.replace("""  RESULT
  st.param.b32 [func_retval0+0], %r4;
  ret;""", f"""  @%p1 bra $YES;
  st.param.b32 [func_retval0+0], %r4;
  ret;
$YES:
  {second}
  st.param.b32 [func_retval0+0], %r4;
  ret;""")
    assert text != HELPER
    return text


def test_helper_with_a_return_per_branch_is_clean():
    assert ids(_two_returns("")) == []


def test_helper_with_one_return_of_something_else_is_reported():
    assert ids(_two_returns("mov.u32 %r4, 1;")) == ["try-wait-not-looped"]


def test_caller_normalising_the_bool_with_a_raw_cvt_is_clean():
    text = HELPER.replace("RESULT", "").replace("""  cvt.u16.u32 %rs1, %r5;
  setp.eq.s16 %p1, %rs1, 0;""", """  cvt.s32.s8 %r6, %r5;
  setp.eq.s32 %p1, %r6, 0;""")
    assert text != HELPER
    assert ids(text) == []
    # a truncation that loses the result (bit 8 of 0x100 / 0) is no test of it
    lossy = text.replace("selp.u32 %r4, 1, 0, %p1;", "selp.u32 %r4, 256, 0, %p1;")
    assert lossy != text
    assert ids(lossy) == ["try-wait-not-looped"]


# CUTLASS's consumer_try_wait (the token) and consumer_wait(state, token): skip the blocking
# ClusterBarrier::wait scope when the token is true.
TOKEN = HEAD + """
.visible .entry k(.param .u32 n, .param .u64 out)
{
  .reg .pred %p<8>;
  .reg .b32 %r<20>;
  .reg .f32 %f<4>;
  .reg .b64 %rd<4>;
  mov.u32 %r1, bar;
  mov.u32 %r9, %tid.x;
  setp.ne.s32 %p5, %r9, 0;
  @%p5 bra $SKIP;
  mbarrier.init.shared::cta.b64 [%r1], 1;
  fence.mbarrier_init.release.cluster;
$SKIP:
  bar.sync 0;
  ld.param.u32 %r2, [n];
  ld.param.u64 %rd2, [out];
  mov.u32 %r3, 0;
  mov.u32 %r6, 10000000;
  mov.f32 %f2, 0f00000000;
$LOOP:
  and.b32 %r4, %r3, 1;
  mbarrier.arrive.shared::cta.b64 %rd1, [%r1];
  {
  .reg .pred P1;
  mbarrier.try_wait.parity.shared::cta.b64 P1, [%r1], %r4;
  selp.b32 %r5, 1, 0, P1;
  }
  setp.ne.s32 %p1, %r5, 0;
  @%p1 bra $READY;
  BLOCKING
$READY:
  ld.shared.f32 %f1, [data];
  add.f32 %f2, %f2, %f1;
  add.s32 %r3, %r3, 1;
  setp.lt.s32 %p2, %r3, %r2;
  @%p2 bra $LOOP;
  st.global.f32 [%rd2], %f2;
  ret;
}
"""

CLUSTER_BARRIER_WAIT = """{
  .reg .pred P1;
  LAB_WAIT:
  mbarrier.try_wait.parity.shared::cta.b64 P1, [%r1], %r4, %r6;
  @P1 bra DONE;
  bra LAB_WAIT;
  DONE:
  }"""


def test_token_then_blocking_wait_is_clean():
    assert ids(TOKEN.replace("BLOCKING", CLUSTER_BARRIER_WAIT)) == []


def test_token_without_blocking_wait_is_reported():
    assert ids(TOKEN.replace("BLOCKING", "")) == ["try-wait-not-looped"]


# A tensor map encoded by warp 0 (`if (threadIdx.x < 32)`, lane 0 replaces, the warp copies it
# out with the .sync.aligned cp_fenceproxy), as nvcc compiles it under
# `__launch_bounds__(128)`: `.maxntid 128, 1, 1` bounds the CTA's size, not its shape.
ENCODE = """
.version 8.0
.target sm_90a
.address_size 64

.shared .align 128 .b8 smap[128];

.visible .entry k(.param .u64 ws, .param .u64 base)
SHAPE
{
  .reg .pred %p<4>;
  .reg .b32 %r<8>;
  .reg .b64 %rd<8>;
  ld.param.u64 %rd1, [ws];
  ld.param.u64 %rd2, [base];
  cvta.to.global.u64 %rd3, %rd1;
  mov.u32 %r1, %tid.x;
  setp.gt.u32 %p1, %r1, LAST;
  @%p1 bra $DONE;
  mov.u32 %r2, smap;
  setp.ne.s32 %p2, %r1, 0;
  @%p2 bra $SYNC;
  tensormap.replace.tile.global_address.shared::cta.b1024.b64 [%r2], %rd2;
$SYNC:
  bar.warp.sync -1;
  tensormap.cp_fenceproxy.global.shared::cta.tensormap::generic.release.gpu.sync.aligned \
 [%rd3], [%r2], 128;
$DONE:
  ret;
}
"""


def encode(shape: str, last: int) -> str:
    return ENCODE.replace("SHAPE", shape).replace("LAST", str(last))


@pytest.mark.parametrize("shape", [".maxntid 128, 1, 1", ""])
def test_fenceproxy_in_the_first_warp_of_an_unfixed_shape_is_clean(shape):
    # Without .reqntid the checker takes warps as rows of x (as `tid.x >> 5`, the warp
    # index, does): `tid.x < 32` is warp 0.
    assert ids(encode(shape, 31)) == []


@pytest.mark.parametrize("shape,last", [(".maxntid 128, 1, 1", 15), ("", 15),
                                        (".reqntid 48, 2", 31)])
def test_fenceproxy_under_a_condition_splitting_a_warp_is_reported(shape, last):
    # Half a warp; or a declared 48 x 2 CTA whose second warp holds x 32..47 and x 0..15.
    assert ids(encode(shape, last)) == ["fenceproxy-divergent"]


# Every thread fills a tile through a pointer nvcc steps in place (`for (j = tid; j < 1024;
# j += 128) tile[j] = ...` becomes `add r, r, 512`), then thread 0 stores it with TMA.
STORE = """
.version 8.0
.target sm_90a
.address_size 64

.visible .entry k(.param .align 64 .b8 tmap[128], .param .f32 scale)
.maxntid 128, 1, 1
{
  .reg .pred %p<4>;
  .reg .f32 %f<4>;
  .reg .b32 %r<12>;
  .reg .b64 %rd<4>;
  .shared .align 128 .b8 tile[4096];
  mov.b64 %rd1, tmap;
  ld.param.f32 %f1, [scale];
  mov.u32 %r1, %tid.x;
  shl.b32 %r2, %r1, 2;
  mov.u32 %r3, tile;
  add.s32 %r4, %r3, %r2;
  mov.u32 %r5, %r1;
$FILL:
  st.shared.f32 [%r4], %f1;
  add.s32 %r4, %r4, 512;
  add.s32 %r5, %r5, 128;
  setp.lt.s32 %p1, %r5, 1024;
  @%p1 bra $FILL;
  FENCE
  bar.sync 0;
  setp.ne.s32 %p2, %r1, 0;
  @%p2 bra $END;
  cvta.param.u64 %rd2, %rd1;
  mov.u32 %r6, 0;
  cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group [%rd2, {%r6, %r6}], [%r3];
  cp.async.bulk.commit_group;
  AFTER
  cp.async.bulk.wait_group.read 0;
$END:
  ret;
}
"""
FENCE = "fence.proxy.async.shared::cta;"
# Thread 0 writes the tile again, through a stepped pointer, while the store may read it.
REFILL = """mov.u32 %r7, %r3;
  add.s32 %r8, %r3, 4096;
$REFILL:
  st.shared.f32 [%r7], %f1;
  add.s32 %r7, %r7, 4;
  setp.lt.u32 %p3, %r7, %r8;
  @%p3 bra $REFILL;"""


def store(fence: str = FENCE, after: str = "") -> str:
    return STORE.replace("FENCE", fence).replace("AFTER", after)


def test_stepped_pointer_fill_fenced_then_stored_is_clean():
    assert ids(store()) == []


def test_stepped_pointer_fill_without_proxy_fence_is_reported():
    assert ids(store(fence="")) == ["smem-no-proxy-fence"]


def test_stepped_pointer_write_before_wait_group_read_is_reported():
    assert ids(store(after=REFILL)) == ["bulk-src-overwrite"]


def test_pointer_stepped_by_another_address_stays_unknown():
    # `r += other_buffer` is no step within one buffer: nothing is known of r.
    text = store(fence="").replace("add.s32 %r4, %r4, 512;", "add.s32 %r4, %r4, %r3;")
    assert ids(text) == []


# A 2-CTA cluster ring's empty barrier, which rank 0's producer waits on and thread 0 of
# every CTA releases through mapa, the way nvcc spells `cluster.map_shared_rank(&empty, 0)`
# for cuda::ptx: the 32-bit shared address widened (`cvt.u64.u32`), made generic, mapped,
# then made a 32-bit shared::cluster address again (`cvta.to.shared.u64`, `cvt.u32.u64`).
CLUSTER = """
.version 8.0
.target sm_90a
.address_size 64

.visible .entry k(.param .u32 n)
SHAPE
.explicitcluster
.reqnctapercluster 2, 1, 1
{
  .reg .pred %p<6>;
  .reg .b32 %r<20>;
  .reg .b64 %rd<12>;
  .shared .align 8 .b8 empty[8];
  mov.u32 %r1, %tid.x;
  mov.u32 %r2, %cluster_ctarank;
  ld.param.u32 %r3, [n];
  setp.ne.s32 %p1, %r1, 0;
  @%p1 bra $SYNC;
  mov.u32 %r4, empty;
  mbarrier.init.shared.b64 [%r4], COUNT;
  fence.mbarrier_init.release.cluster;
$SYNC:
  barrier.cluster.arrive.release;
  barrier.cluster.wait.acquire;
  mov.u32 %r5, 0;
$LOOP:
  and.b32 %r6, %r5, 1;
  xor.b32 %r7, %r6, 1;
  setp.ne.s32 %p2, %r2, 0;
  or.pred %p3, %p1, %p2;
  @%p3 bra $RELEASE;
  mov.u32 %r8, empty;
$WAIT:
  {
  .reg .pred P_OUT;
  mbarrier.try_wait.parity.shared::cta.b64 P_OUT, [%r8], %r7;
  selp.b32 %r9, 1, 0, P_OUT;
  }
  setp.eq.s32 %p4, %r9, 0;
  @%p4 bra $WAIT;
$RELEASE:
  bar.sync 0;
  @%p1 bra $NEXT;
  mov.u32 %r10, empty;
  {
  .reg .b64 %tmp;
  cvt.u64.u32 %tmp, %r10;
  cvta.shared.u64 %rd1, %tmp;
  }
  mapa.u64 %rd2, %rd1, 0;
  {
  .reg .b64 %tmp;
  cvta.to.shared.u64 %tmp, %rd2;
  cvt.u32.u64 %r11, %tmp;
  }
  mbarrier.arrive.release.cluster.shared::cluster.b64 _, [%r11];
$NEXT:
  add.s32 %r5, %r5, 1;
  setp.lt.s32 %p5, %r5, %r3;
  @%p5 bra $LOOP;
  barrier.cluster.arrive.release;
  barrier.cluster.wait.acquire;
  ret;
}
"""


def cluster(shape: str, count: int) -> str:
    return CLUSTER.replace("SHAPE", shape).replace("COUNT", str(count))


@pytest.mark.parametrize("count,found", [(2, []), (1, ["mbar-arrive-count"]),
                                         (3, ["mbar-arrive-count"])])
def test_remote_release_through_nvcc_address_conversions_is_counted(count, found):
    # Two CTAs release rank 0's barrier once each per phase: it expects 2.
    assert ids(cluster(".reqntid 128, 1, 1", count)) == found


@pytest.mark.parametrize("count,found", [(2, []), (1, ["mbar-arrive-count"]), (3, [])])
def test_remote_release_without_a_declared_cta_shape_is_a_lower_bound(count, found):
    # `__launch_bounds__(128)` is `.maxntid 128, 1, 1`: `tid.x == 0` may be several threads
    # (one per row), so thread 0 of each CTA, 2 arrivals, is a lower bound: above a count
    # of 1 in every shape, and no proof that 3 is too many.
    assert ids(cluster(".maxntid 128, 1, 1", count)) == found
