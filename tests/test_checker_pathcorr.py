"""Branches on one predicate written more than once go the same way for a thread when it
reads the predicate as one value (checker/flags.py): settled (never written again once read),
or recomputed the same way (fixed branches and values, no cycle, no read a write can follow).

CUTLASS's storer flag `warp == 0 && elect_one_sync()` is written twice by nvcc (`mov.pred p,
0`, then `setp.ne p, elected, 0` in the block only warp 0 enters) before the tile loop, or,
in the grouped GEMM, recomputed for every tile; the `@!p` branches over the TMA store and over
the `cp.async.bulk.wait_group.read` before the next restaging must be known to go the same
way, or the store's bulk group seems pending (the corpus's nvcc_ptx/tma_store_epilogue_elect.ptx
and nvcc_cutlass/cutlass_grouped_bf16.ptx, in small). The buggy twins miss a wait on one path,
flip the flag in the loop, read it before it is recomputed, or make the storer depend on the
tile (none of those is one value for the thread: the store and the skipped wait are rightly
not correlated)."""

from __future__ import annotations

import pytest

from ptxdsl.checker import Severity
from ptxdsl.frontend import parse_ptx
from ptxdsl.toolchain import assemble

BASE = """\
.version 8.0
.target sm_90a
.address_size 64

.visible .entry epi(
\t.param .align 64 .b8 epi_param_0[128],
\t.param .u32 epi_param_1
)
.maxntid 128, 1, 1
{
\t.reg .pred \t%p<12>;
\t.reg .b32 \t%r<20>;
\t.reg .b64 \t%rd<4>;
\t.shared .align 128 .b8 staging[2048];

\tmov.b64 \t%rd1, epi_param_0;
\tld.param.u32 \t%r1, [epi_param_1];
\tmov.u32 \t%r2, %tid.x;
\tshr.u32 \t%r3, %r2, 5;
\tsetp.ne.s32 \t%p1, %r3, 0;
\tmov.pred \t%p2, 0;
\t@%p1 bra \t$L_flag;
\tmov.u32 \t%r4, -1;
\t{
\t.reg .pred P_OUT;
\telect.sync _|P_OUT, %r4;
\tselp.b32 %r5, 1, 0, P_OUT;
\t}
\tsetp.ne.s32 \t%p2, %r5, 0;
$L_flag:
\tsetp.lt.s32 \t%p4, %r1, 1;
\t@%p4 bra \t$L_done;
\tmov.u32 \t%r6, 0;
\tnot.pred \t%p5, %p2;
\tcvta.param.u64 \t%rd2, %rd1;
\tmov.u32 \t%r7, staging;
\tshl.b32 \t%r8, %r2, 4;
\tadd.s32 \t%r9, %r7, %r8;
$L_loop:
WAIT
$L_nowait:
\tbar.sync \t1, 128;
\tst.shared.v4.b32 \t[%r9], {%r6, %r6, %r6, %r6};
\tfence.proxy.async.shared::cta;
\tbar.sync \t1, 128;
\t@%p5 bra \t$L_skip;
\tmov.u32 \t%r10, %ctaid.x;
\tmad.lo.s32 \t%r11, %r10, %r1, %r6;
\tshl.b32 \t%r12, %r11, 5;
\tmov.u32 \t%r13, 0;
\tcp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group [%rd2, {%r13, %r12}], [%r7];
\tcp.async.bulk.commit_group;
$L_skip:
LATCH\tadd.s32 \t%r6, %r6, 1;
\tsetp.lt.s32 \t%p6, %r6, %r1;
\t@%p6 bra \t$L_loop;
\tnot.pred \t%p7, %p2;
\t@%p7 bra \t$L_done;
FINAL
$L_done:
\tret;
}
"""
# The wait before each restaging: skipped by the threads that do not store.
WAIT = "\t@%p5 bra \t$L_nowait;\n\tcp.async.bulk.wait_group.read 0;\n"
FINAL = "\tcp.async.bulk.wait_group.read 0;\n"
# Odd tiles skip the wait: the previous tile's store may still be reading the staging buffer.
ODD = "\tand.b32 \t%r14, %r6, 1;\n\tsetp.ne.s32 \t%p8, %r14, 0;\n\t@%p8 bra \t$L_nowait;\n"
# The flag flipped every tile: the thread that stored skips the next tile's wait.
FLIP_READ = "\tnot.pred \t%p5, %p2;\n"
FLIP = "\tnot.pred \t%p2, %p2;\n"

CASES = {
    # name: (in-loop wait, final wait, latch, expected hazards)
    "cutlass_storer_flag": (WAIT, FINAL, "", []),
    "no_wait_before_restaging": ("", FINAL, "", ["bulk-src-overwrite"]),
    "no_wait_at_exit": (WAIT, "", "", ["bulk-group-not-waited"]),
    "wait_skipped_on_odd_tiles": (ODD + WAIT, FINAL, "", ["bulk-src-overwrite"]),
    "flag_flipped_each_tile": (FLIP_READ + WAIT, FINAL, FLIP,
                               ["bulk-group-not-waited", "bulk-src-overwrite"]),
}


def kernel(wait: str, final: str, latch: str) -> str:
    return BASE.replace("WAIT\n", wait).replace("FINAL\n", final).replace("LATCH", latch)


@pytest.mark.parametrize("name", sorted(CASES))
def test_storer_flag_written_twice(name):
    wait, final, latch, want = CASES[name]
    _check(kernel(wait, final, latch), want)


def _check(text: str, want: list[str]) -> None:
    assemble(text, "sm_90a")
    got = sorted({f.hazard.value for f in parse_ptx(text).check()
                  if f.severity is not Severity.note})
    assert got == want, [f.format() for f in parse_ptx(text).check()]


# The flag recomputed for every tile, as CUTLASS's grouped GEMM does (`mov.u16 f, 0`, then
# `selp.u16 f, 1, 0, elected` under `warp == 0`; the corpus's
# nvcc_cutlass/cutlass_grouped_bf16.ptx, in small).
PER_TILE = """\
.version 8.0
.target sm_90a
.address_size 64

.visible .entry epi(
\t.param .align 64 .b8 epi_param_0[128],
\t.param .u32 epi_param_1
)
.maxntid 128, 1, 1
{
\t.reg .pred \t%p<12>;
\t.reg .b16 \t%rs<2>;
\t.reg .b32 \t%r<20>;
\t.reg .b64 \t%rd<4>;
\t.shared .align 128 .b8 staging[2048];

\tmov.b64 \t%rd1, epi_param_0;
\tld.param.u32 \t%r1, [epi_param_1];
\tmov.u32 \t%r2, %tid.x;
\tshr.u32 \t%r3, %r2, 5;
\tsetp.ne.s32 \t%p1, %r3, 0;
\tsetp.lt.s32 \t%p4, %r1, 1;
\t@%p4 bra \t$L_done;
\tmov.u32 \t%r6, 0;
\tcvta.param.u64 \t%rd2, %rd1;
\tmov.u32 \t%r7, staging;
$L_loop:
\tmov.u16 \t%rs1, 0;
EARLY\t@%p1 bra \t$L_flag;
\tmov.u32 \t%r4, -1;
\t{
\t.reg .pred P_OUT;
\telect.sync _|P_OUT, %r4;
\tselp.b32 %r5, 1, 0, P_OUT;
\t}
\tsetp.ne.s32 \t%p2, %r5, 0;
\tselp.u16 \t%rs1, 1, 0, %p2;
$L_flag:
\tshl.b32 \t%r8, %r2, 4;
\tadd.s32 \t%r9, %r7, %r8;
\tsetp.eq.s16 \t%p5, %rs1, 0;
WAIT$L_nowait:
\tbar.sync \t1, 128;
\tst.shared.v4.b32 \t[%r9], {%r6, %r6, %r6, %r6};
\tfence.proxy.async.shared::cta;
\tbar.sync \t1, 128;
\t@%p5 bra \t$L_skip;
\tmov.u32 \t%r10, %ctaid.x;
\tmad.lo.s32 \t%r11, %r10, %r1, %r6;
\tshl.b32 \t%r12, %r11, 5;
\tmov.u32 \t%r13, 0;
\tcp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group [%rd2, {%r13, %r12}], [%r7];
\tcp.async.bulk.commit_group;
$L_skip:
\tadd.s32 \t%r6, %r6, 1;
\tsetp.lt.s32 \t%p6, %r6, %r1;
\t@%p6 bra \t$L_loop;
\tsetp.eq.s16 \t%p7, %rs1, 0;
\t@%p7 bra \t$L_done;
\tcp.async.bulk.wait_group.read 0;
$L_done:
\tret;
}
"""
# The wait before the flag is recomputed: it reads the `mov 0`, so no thread ever waits.
EARLY_WAIT = ("\tsetp.eq.s16 \t%p8, %rs1, 0;\n\t@%p8 bra \t$L_nowait;\n"
              "\tcp.async.bulk.wait_group.read 0;\n$L_nowait:\n")
ODD_TILE = ("\tand.b32 \t%r14, %r6, 1;\n\tsetp.ne.s32 \t%p9, %r14, 0;\n"
            "\tor.pred \t%p1, %p1, %p9;\n")
# The storer is warp 0's elected thread on even tiles only: on an odd tile it skips the wait.
PARITY = ("\tand.b32 \t%r14, %r6, 1;\n\tsetp.ne.s32 \t%p9, %r14, 0;\n"
          "\tor.pred \t%p1, %p3, %p9;\n")

PER_TILE_CASES = {
    # name: (before the recomputation, after it, warp test, expected hazards)
    "cutlass_flag_per_tile": ("", WAIT, "%p1", []),
    "per_tile_no_wait": ("", "", "%p1", ["bulk-src-overwrite"]),
    "per_tile_wait_before_recompute": (EARLY_WAIT, "", "%p1",
                                       ["bulk-group-not-waited", "bulk-src-overwrite"]),
    "per_tile_storer_on_even_tiles": (PARITY, WAIT, "%p3",
                                      ["bulk-group-not-waited", "bulk-src-overwrite"]),
}


# cuda::ptx's elect_sync (a selp of the elected predicate), or CUTLASS's elect_one_sync(),
# whose flag is itself written twice in one block (`mov 0`, then `@px mov 1`) and read right
# after.
ELECT_PTX = """\t{
\t.reg .pred P_OUT;
\telect.sync _|P_OUT, %r4;
\tselp.b32 %r5, 1, 0, P_OUT;
\t}
"""
ELECT_CUTLASS = """\tmov.u32 \t%r15, 0;
\tmov.u32 \t%r5, %r15;
\t{
\t.reg .b32 %rx;
\t.reg .pred %px;
\telect.sync %rx|%px, %r4;
\t@%px mov.s32 %r5, 1;
\tmov.s32 %r15, %rx;
\t}
"""


@pytest.mark.parametrize("elect", [ELECT_PTX, ELECT_CUTLASS], ids=["cuda_ptx", "cutlass"])
@pytest.mark.parametrize("name", sorted(PER_TILE_CASES))
def test_storer_flag_recomputed_each_tile(name, elect):
    early, wait, warp, want = PER_TILE_CASES[name]
    text = PER_TILE.replace(ELECT_PTX, elect).replace("EARLY", early)
    if early:   # its own wait, and its label
        text = text.replace("WAIT$L_nowait:\n", "")
    text = text.replace("WAIT", wait)
    text = text.replace("\tsetp.ne.s32 \t%p1, %r3, 0;", f"\tsetp.ne.s32 \t{warp}, %r3, 0;")
    _check(text, want)
