"""Checker precision audit b (issue 29): a second, independent corpus of correct kernels in
spellings the first audit's (tests/test_checker_audit29_clean.py) does not use, each checked
with its tensor maps described (maps=) and without (only notes may remain), and assembled for
sm_90a. Each fix that made one clean has buggy twins that are still found: inline-PTX inits,
arrives and arrive.expect_tx with wrong counts or bytes, every lane producing where an inline
elect.sync picked one, an inline-PTX wgmma.wait_group 1 before the release, an inline
wait_group.read 2 on a double buffer, a counted loop's stores reaching the wgmma tiles, a
swizzled staging write 4 bytes past its buffer, too few red.async bytes announced with the
rank read in inline PTX or from %cluster_ctaid.y; and, with no fix needed, the varlen
backward kernel's second per-CTA map used without its acquire and its dQ buffer rewritten
before the bulk add read it."""

from __future__ import annotations

import pytest

from ptxdsl.checker import Severity, check_module
from tests import audit29b_clean_asm as asm
from tests import audit29b_clean_backward as backward
from tests import audit29b_clean_cluster as cluster
from tests import audit29b_clean_epilogue as epilogue
from tests import audit29b_clean_rings as rings
from tests.audit_support import assert_assembles, assert_clean, line_in

CLEAN = [asm.asm_ws_gemm, asm.asm_ws_gemm2, asm.asm_ws_gemm5, asm.asm_ws_gemm6_phasebits,
         asm.asm_ws_gemm5_asm_init, asm.asm_ws_gemm3_kernel_loop,
         asm.asm_ws_gemm2_kernel_loop_selp,
         rings.prefetch_gemm3, rings.prefetch_gemm6, rings.persistent_scheduler_gemm,
         rings.bulk_stream_ring4, rings.prefetch_gemm5_guarded_wrap,
         cluster.cluster_y2_gemm, cluster.cluster_y4_gemm, cluster.cluster_y4_cutlass_arrive,
         cluster.split_k_y2, cluster.split_k_y4, cluster.split_k_y4_asm_rank,
         cluster.split_k_y4_asm_red,
         epilogue.swizzled_epilogue128,
         epilogue.swizzled_epilogue64, epilogue.swizzled_epilogue32,
         epilogue.swizzled_epilogue64_asm_groups, backward.varlen_backward,
         backward.varlen_backward_bulk_dq]


@pytest.mark.parametrize("build", CLEAN, ids=lambda b: b.__name__)
def test_correct_kernel_checks_clean_with_and_without_maps(build):
    assert_clean(build)


@pytest.mark.filterwarnings("ignore:.*'setmaxnreg' ignored")    # nvJitLink drops it (README)
@pytest.mark.parametrize("build", CLEAN, ids=lambda b: b.__name__)
def test_correct_kernel_assembles(build):
    assert_assembles(build)


def _found(build, bug: str, hazard: str, maps_only: bool = False) -> list:
    mod, maps = build(bug=bug)
    for context in ({"maps": maps},) + (() if maps_only else ({},)):
        found = [f for f in check_module(mod, **context) if f.severity is not Severity.note]
        assert found and {f.id for f in found} == {hazard}, [f.format() for f in found]
    return found


def _site_line(f, role: str) -> int:
    (site,) = [s for s in f.sites if s.role == role]
    return site.loc.line


@pytest.mark.parametrize("asm_init", [False, True])
def test_inline_ptx_arrive_expect_tx_of_too_few_bytes_is_found(asm_init):
    # The bytes an inline arrive.expect_tx announces are counted (with the boxes known),
    # whether its state goes to _ or to an output register.
    def build(bug):
        return asm.asm_ws_gemm(bug=bug, asm_init=asm_init)
    (f,) = _found(build, "bytes", "expect-tx-mismatch", maps_only=True)
    spelling = '$0, [$1], $2;"' if asm_init else '_, [$0], $1;"'
    assert _site_line(f, "expect_tx") == line_in(asm.asm_arrive_expect, spelling)


def test_every_lane_running_an_inline_arrive_expect_tx_is_found():
    # Without the inline elect.sync the whole warp arrives on a barrier expecting one.
    (f,) = _found(asm.asm_ws_gemm, "lanes", "mbar-arrive-count")
    assert f.loc.line == line_in(asm.asm_arrive_expect, '_, [$0], $1;"')


def test_inline_ptx_arrives_counted_against_the_barrier_init():
    (f,) = _found(asm.asm_ws_gemm, "count", "mbar-arrive-count")
    assert f.loc.line == line_in(asm.asm_arrive, "ins=[bar])")


def test_counted_loop_stores_over_the_wgmma_tiles_are_found():
    # A for_range counter is bounded by its loop's constant stop: the partials' zeroing
    # stays clear of the tiles, and the same loop over the tiles is still reported.
    found = _found(cluster.split_k_y, "zero", "wgmma-smem-no-proxy-fence")
    assert {_site_line(f, "write") for f in found} == {
        line_in(cluster.split_k_y, "k.st(k.mad(j, 16, zero)")}


@pytest.mark.parametrize("bug", ["spill", "read2"])
def test_swizzled_staging_write_into_the_buffer_in_flight_is_found(bug):
    # `a * b + c` keeps the zero low bits of both terms: the XOR-swizzled 4-byte stores of
    # the last box end at the buffer's end, so the other buffer (its store in flight after
    # wait_group.read 1) is apart; 4 bytes further, or with read 2, it is not.
    found = _found(epilogue.swizzled_epilogue_gemm, bug, "bulk-src-overwrite")
    assert {_site_line(f, "write") for f in found} == {
        line_in(epilogue.swizzled_epilogue_gemm, "k.st(k.add(k.add(staging")}


def test_second_workspace_map_used_without_its_acquire_is_found():
    # Q's and dO's maps are 128 bytes apart in the CTA's workspace slot: Q's acquire does
    # not cover dO's.
    found = _found(backward.varlen_backward, "acquire", "tmap-no-acquire")
    line = line_in(backward.varlen_backward, "k.mad(s, T64.nbytes, k.add(base, ring)), tm,") - 1
    assert {f.loc.line for f in found} == {line}


def test_dq_buffer_rewritten_before_the_bulk_add_read_it_is_found():
    def build(bug):
        return backward.varlen_backward(bug=bug, bulk=True)
    found = _found(build, "reuse", "bulk-src-overwrite")
    assert {_site_line(f, "write") for f in found} == {
        line_in(backward._dq_bulk, "k.st(Addr(mine,")}


def _asm_init(bug):
    return asm.asm_ws_gemm(5, bug=bug, asm_init=True)


def test_inline_ptx_init_count_is_compared_with_the_arrivals():
    # CUTLASS's ClusterBarrier::init in inline PTX is an init (not mbar-uninit at every
    # use), and its count is the one the arrivals are compared with.
    (f,) = _found(_asm_init, "count", "mbar-arrive-count")
    assert f.loc.line == line_in(asm.asm_arrive, "ins=[bar])")


def test_inline_ptx_bulk_wait_group_read_2_is_found():
    # CUTLASS's tma_store_wait<N> in inline PTX is a wait_group.read N (with 1 the
    # double buffer checks clean; with 2 the store that read the buffer may still run).
    def build(bug):
        return epilogue.swizzled_epilogue_gemm(64, bug=bug, asm_groups=True)
    found = _found(build, "read2", "bulk-src-overwrite")
    assert {_site_line(f, "write") for f in found} == {
        line_in(epilogue.swizzled_epilogue_gemm, "k.st(k.add(k.add(staging")}


def test_inline_ptx_wgmma_wait_group_1_before_the_release_is_found():
    # CUTLASS's warpgroup_wait<N> in inline PTX is a wgmma.wait_group N: after wait 1 the
    # stage's own wgmma may still read it (and the accumulator may still be written).
    mod, maps = asm.asm_ws_gemm(bug="wait1")
    for context in ({"maps": maps}, {}):
        found = [f for f in check_module(mod, **context) if f.severity is not Severity.note]
        assert {f.id for f in found} == {"wgmma-smem-released", "wgmma-regs-in-flight"}
        (f,) = [f for f in found if f.id == "wgmma-smem-released"]
        assert _site_line(f, "arrive") == line_in(asm.asm_arrive, "ins=[bar])")


def test_inline_ptx_rank_is_the_rank_and_too_many_partial_bytes_are_found():
    # `mov.u32 $0, %cluster_ctarank;` in inline PTX is the CTA's rank (uniform in the CTA,
    # the one the per-rank byte balance follows), and an inline red.async delivers its
    # bytes: one partial too few announced is found, as with the builders.
    for asm_rank, asm_red in ((False, False), (True, False), (True, True)):
        def build(bug, asm_rank=asm_rank, asm_red=asm_red):
            return cluster.split_k_y(4, bug=bug, asm_rank=asm_rank, asm_red=asm_red)
        found = _found(build, "bytes", "expect-tx-mismatch")
        assert _site_line(found[0], "expect_tx") == line_in(cluster.split_k_y, "k.asm(\"mbarrier")


@pytest.mark.parametrize("spelling", ["pred", "selp"])
def test_inline_try_wait_result_not_looped_on_is_found(spelling):
    # An inline try_wait returning its predicate (or that predicate as 0/1) is a try_wait:
    # looped on by the kernel (clean) it is a wait; its result dropped, it is not.
    def build(bug):
        return asm.asm_ws_gemm(3, bug=bug, kernel_loop=spelling)
    found = _found(build, "once", "try-wait-not-looped")
    text = "(ok,) = k.asm(\"{" if spelling == "selp" else "(ok,) = k.asm(\"mbarrier"
    assert {f.loc.line for f in found} == {line_in(asm.loop_wait, text)}
