"""Checker precision audit (issue 29): correct kernels written apart from the checker's own
corpora (tests/audit29_clean_kernels.py) check with zero errors and warnings, with their
tensor maps described (maps=) and without (then only notes may remain), and assemble for
sm_90a. Each fix that made one clean has buggy twins that are still found: the
FlashAttention kernel's early K and V releases (another ring's barrier is not this one's),
the inline-PTX wait loop's single try and wrong-stage release, the per-warpgroup double
buffer's wait_group.read 2, the W8A16 wgmma reading the int8 stage it released early."""

from __future__ import annotations

import inspect

import pytest

from ptxdsl.checker import Severity, check_module
from tests import audit29_clean_attention as attention
from tests import audit29_clean_cluster as cluster
from tests import audit29_clean_kernels as kernels
from tests.audit_support import assert_assembles, assert_clean, line_in

CLEAN = [kernels.ws_gemm_handwritten, kernels.ws_gemm_variants, kernels.fp8_scaled_gemm,
         kernels.w8a16_gemm, kernels.w8a16_early_release, attention.fa3_forward,
         attention.fa3_forward_o_in_q, attention.persistent_gemm_tma_store,
         attention.persistent_gemm_staged_epilogue, cluster.cluster2_multicast_gemm,
         cluster.cluster4_multicast_gemm, cluster.cluster4_release_by_rank_registers,
         cluster.cluster4_handwritten_ring, cluster.split_k_st_async,
         cluster.split_k_ld_cluster, cluster.split_k_red_async]


@pytest.mark.parametrize("build", CLEAN, ids=lambda b: b.__name__)
def test_correct_kernel_checks_clean_with_and_without_maps(build):
    assert_clean(build)


@pytest.mark.filterwarnings("ignore:.*'setmaxnreg' ignored")    # nvJitLink drops it (README)
@pytest.mark.parametrize("build", CLEAN, ids=lambda b: b.__name__)
def test_correct_kernel_assembles(build):
    assert_assembles(build)


def _line(text: str, module=kernels) -> int:
    """The line of a kernels module holding `text` (once)."""
    lines = inspect.getsource(module).splitlines()
    hits = [i + 1 for i, s in enumerate(lines) if text in s]
    assert len(hits) == 1, (text, hits)
    return hits[0]


def _released(bug: str) -> list:
    mod, maps = attention.fa3_forward(bug)
    found = [f for f in check_module(mod, maps=maps) if f.severity is not Severity.note]
    assert [f.id for f in found] == ["wgmma-smem-released"]
    return found


def _site_line(f, role: str) -> int:
    (site,) = [s for s in f.sites if s.role == role]
    return site.loc.line


def test_fa3_k_stage_released_before_s_next_retires_is_found():
    (f,) = _released("early_k")
    assert _site_line(f, "wgmma") == _line("ptx.wgmma_mma_async(k, dst, dq.k_step", attention)


def test_fa3_v_stage_released_before_its_pv_retires_is_found():
    (f,) = _released("early_v")
    pv = _line("ptx.wgmma_mma_async(k, o, p.a_operand(step)", attention)
    assert _site_line(f, "wgmma") == pv


def test_fa3_k_refilled_after_a_wait_on_v_barrier_is_found():
    # The producer guards K's refill with V's empty barrier: the consumers' release of V's
    # stage j - 1 with S_next (reading K) in flight now lets the producer overwrite K.
    (f,) = _released("k_on_v")
    assert _site_line(f, "wgmma") == _line("ptx.wgmma_mma_async(k, dst, dq.k_step", attention)


def _found(build, bug: str, hazard: str) -> list:
    mod, maps = build(bug)
    for context in ({"maps": maps}, {}):
        found = [f for f in check_module(mod, **context) if f.severity is not Severity.note]
        assert found and {f.id for f in found} == {hazard}, [f.format() for f in found]
    return found


def test_inline_ptx_wait_loop_then_release_of_the_stage_just_issued_is_found():
    # CUTLASS's try_wait loop in inline PTX is a wait; the ring is still followed.
    found = _found(kernels.ws_gemm_variants, "current", "wgmma-smem-released")
    # (the call starts one line above its barrier argument)
    assert _site_line(found[0], "arrive") == _line("k.add(empty0, k.shl(s if bug") - 1


def test_inline_ptx_single_try_wait_is_not_a_wait():
    # One try_wait whose result nobody loops on may return before the phase completes.
    found = _found(kernels.ws_gemm_variants, "once", "smem-read-before-wait")
    assert _site_line(found[0], "read") == line_in(kernels.ws_gemm_variants,
                                                    "ptx.wgmma_mma_async(")


def test_per_warpgroup_double_buffer_refilled_after_wait_group_read_2_is_found():
    # Each warpgroup's buffers are its own (smem + cw * 16384): told apart per thread; inside
    # one warpgroup's pair, wait_group.read 2 leaves the store that read this buffer running.
    found = _found(attention.persistent_gemm_tma_store, "read2", "bulk-src-overwrite")
    stmatrix = _line("k.stmatrix(k.add(row_addr, k.shl(chunk, 4))", attention)
    assert _site_line(found[0], "write") == stmatrix


def test_int8_stage_released_early_while_the_wgmma_reads_it_is_found():
    # The early release is clean while the wgmma reads the dequantised tile (the int8 ring's
    # copies never land there, with or without the box sizes); reading the int8 stage itself,
    # it hands back what the wgmma reads.
    found = _found(kernels.w8a16_early_release, "raw", "wgmma-smem-released")
    assert _site_line(found[0], "arrive") == _line("cwr.release()")
