"""Checker: the tensor-core hazards (`ptxdsl/checker/hazards_wgmma.py`). Each rule: a kernel
that has it (its id and Python line asserted), its corrected twin (clean), and the same
mistake written another way (in a loop, or behind a helper)."""

from __future__ import annotations

import contextlib

import pytest

from ptxdsl import Kernel, Module, ptx, t
from ptxdsl.checker import Hazard, check_kernel
from tests.checker_kernels import here, ids, only


class Gemm:
    """One warpgroup, A and B tiles in shared memory with descriptors built from their
    addresses, 32 f32 accumulators (m64n64), an empty/full mbarrier pair."""

    def __init__(self, name: str = "k", threads: int = 128, zero: bool = True):
        k = self.k = Kernel(name, reqntid=threads)
        self.A = k.shared_array(t.b8, 8192, align=1024, name="A")
        self.B = k.shared_array(t.b8, 8192, align=1024, name="B")
        self.C = k.shared_array(t.b8, 8192, align=128, name="C")
        self.full = k.shared_array(t.b64, 1, align=8, name="full")
        self.empty = k.shared_array(t.b64, 1, align=8, name="empty")
        self.acc = tuple(k.reg(t.f32) for _ in range(32))
        self.out = k.ld_param(k.param_ptr("out"))
        if zero:
            for r in self.acc:
                k.mov(0.0, dst=r, type=t.f32)
        self.da, self.db = self.desc(self.A), self.desc(self.B)

    def desc(self, sym):
        """A shared-memory matrix descriptor: the address >> 4 in bits 0-13 plus constants."""
        k = self.k
        enc = k.and_(k.shr(k.mov(sym), 4), 0x3FFF)
        return k.or_(k.cvt(enc, t.u64), 1 << 62, type=t.b64)

    def barriers(self):
        k = self.k
        with k.if_(k.tid.x == 0):
            ptx.mbarrier_init(k, self.full, 1)
            ptx.mbarrier_init(k, self.empty, 128)
        k.bar_sync(0)

    def mma(self, **kw):
        """The wgmma (a finding at it names this line: MMA_LINE)."""
        return ptx.wgmma_mma_async(self.k, self.acc, self.da, self.db, atype="f16", **kw)

    def epilogue(self):
        """Every thread stores its first accumulator (the store is at EPILOGUE_LINE)."""
        k = self.k
        addr = k.add(self.out, k.cvt(k.shl(k.tid.x, 2), t.u64))
        k.st(addr, self.acc[0], space="global")


MMA_LINE = Gemm.mma.__code__.co_firstlineno + 2
EPILOGUE_LINE = Gemm.epilogue.__code__.co_firstlineno + 4


# -- wgmma-regs-in-flight --------------------------------------------------------------------------
def test_accumulator_read_before_wait_group():
    g = Gemm()
    ptx.wgmma_fence(g.k)
    g.mma()
    ptx.wgmma_commit_group(g.k)
    line = here() + 1
    g.k.add(g.acc[3], 1.0)
    ptx.wgmma_wait_group(g.k, 0)
    f = only(check_kernel(g.k), Hazard.WGMMA_REGS_IN_FLIGHT, line)
    assert "%f4" in f.message and "no wgmma.wait_group has retired" in f.message
    assert f.sites[1].ptx.startswith("wgmma.mma_async")


def test_accumulator_read_after_wait_group_is_clean():
    g = Gemm()
    ptx.wgmma_fence(g.k)
    g.mma()
    ptx.wgmma_commit_group(g.k)
    ptx.wgmma_wait_group(g.k, 0)
    g.k.add(g.acc[3], 1.0)
    g.epilogue()
    assert check_kernel(g.k) == []


def test_wait_group_without_commit_does_not_retire():
    g = Gemm()
    ptx.wgmma_fence(g.k)
    g.mma()
    ptx.wgmma_wait_group(g.k, 0)
    g.epilogue()
    f = only(check_kernel(g.k), Hazard.WGMMA_REGS_IN_FLIGHT, EPILOGUE_LINE)
    assert "never committed" in f.message


def _mainloop(g: Gemm, wait_inside: int):
    k = g.k
    ptx.wgmma_fence(k)
    with k.for_range(0, k.ld_param(k.param(t.u32, "ktiles"))):
        g.mma()
        ptx.wgmma_commit_group(k)
        ptx.wgmma_wait_group(k, wait_inside)


def test_epilogue_after_loop_keeping_one_group_in_flight():
    """The k-loop keeps one group in flight (wait_group 1); the epilogue, behind a helper,
    reads the accumulators without draining it."""
    g = Gemm()
    _mainloop(g, 1)
    g.epilogue()
    only(check_kernel(g.k), Hazard.WGMMA_REGS_IN_FLIGHT, EPILOGUE_LINE)


def test_epilogue_after_loop_drained_is_clean():
    g = Gemm()
    _mainloop(g, 1)
    ptx.wgmma_wait_group(g.k, 0)
    g.epilogue()
    assert check_kernel(g.k) == []


def test_two_groups_in_flight_wait_one_retires_the_older():
    k_acc2 = Gemm()
    k = k_acc2.k
    acc2 = tuple(k.reg(t.f32) for _ in range(32))
    for r in acc2:
        k.mov(0.0, dst=r, type=t.f32)
    ptx.wgmma_fence(k)
    k_acc2.mma()
    ptx.wgmma_commit_group(k)
    ptx.wgmma_mma_async(k, acc2, k_acc2.da, k_acc2.db, atype="f16")
    ptx.wgmma_commit_group(k)
    ptx.wgmma_wait_group(k, 1)
    k.add(k_acc2.acc[0], 1.0)          # the first group is retired: fine
    line = here() + 1
    k.add(acc2[0], 1.0)                # the second is not
    ptx.wgmma_wait_group(k, 0)
    only(check_kernel(k), Hazard.WGMMA_REGS_IN_FLIGHT, line)


# -- wgmma-no-fence -------------------------------------------------------------------------------
def test_accumulators_zeroed_without_fence():
    g = Gemm()
    g.mma()
    ptx.wgmma_commit_group(g.k)
    ptx.wgmma_wait_group(g.k, 0)
    f = only(check_kernel(g.k), Hazard.WGMMA_NO_FENCE, MMA_LINE)
    assert "was accessed by another instruction" in f.message
    assert f.sites[1].ptx.startswith("mov.f32")


def test_no_fence_before_the_first_wgmma():
    g = Gemm(zero=False)
    g.mma(scale_d=0)
    ptx.wgmma_commit_group(g.k)
    ptx.wgmma_wait_group(g.k, 0)
    f = only(check_kernel(g.k), Hazard.WGMMA_NO_FENCE, MMA_LINE)
    assert "needed before the first" in f.message


def _tiles(g: Gemm, fence_each_tile: bool) -> None:
    """A persistent loop over output tiles: the epilogue reads the accumulators, then the
    next tile's wgmma overwrites them (scale-d 0)."""
    k = g.k
    ptx.wgmma_fence(k)
    with k.for_range(0, k.ld_param(k.param(t.u32, "tiles"))):
        if fence_each_tile:
            ptx.wgmma_fence(k)
        g.mma(scale_d=0)
        ptx.wgmma_commit_group(k)
        ptx.wgmma_wait_group(k, 0)
        g.epilogue()


def test_next_tile_without_fence_after_epilogue():
    g = Gemm(zero=False)
    _tiles(g, False)
    only(check_kernel(g.k), Hazard.WGMMA_NO_FENCE, MMA_LINE)


def test_next_tile_fenced_is_clean():
    g = Gemm(zero=False)
    _tiles(g, True)
    assert check_kernel(g.k) == []


# -- wgmma-smem-no-proxy-fence ---------------------------------------------------------------------
def _fill(g: Gemm, sym):
    k = g.k
    k.st(k.add(k.mov(sym), k.shl(k.tid.x, 2)), k.tid.x, type=t.u32, space="shared::cta")


def _mma_once(g: Gemm) -> int:
    ptx.wgmma_fence(g.k)
    g.mma()
    ptx.wgmma_commit_group(g.k)
    ptx.wgmma_wait_group(g.k, 0)
    return MMA_LINE


def test_generic_writes_read_by_wgmma_without_proxy_fence():
    g = Gemm()
    _fill(g, g.A)
    g.k.bar_sync(0)
    line = _mma_once(g)
    f = only(check_kernel(g.k), Hazard.WGMMA_SMEM_NO_PROXY_FENCE, line)
    assert "symbol A" in f.message and "no fence.proxy.async" in f.message


def test_generic_writes_fenced_without_barrier():
    g = Gemm()
    _fill(g, g.B)
    ptx.fence_proxy_async(g.k, "shared::cta")
    line = _mma_once(g)
    f = only(check_kernel(g.k), Hazard.WGMMA_SMEM_NO_PROXY_FENCE, line)
    assert "no barrier" in f.message


def test_generic_writes_fenced_and_synced_are_clean():
    g = Gemm()
    _fill(g, g.A)
    ptx.fence_proxy_async(g.k, "shared::cta")
    g.k.bar_sync(0)
    _mma_once(g)
    assert check_kernel(g.k) == []


@pytest.mark.parametrize("early", [False, True])
def test_generic_writes_fenced_and_handed_on_by_an_mbarrier(early):
    """The writers fence, then arrive on `empty` (count 128) and wait for its phase: the
    arrive releases the fenced writes to the wgmma after the wait (clean); arriving before
    the fence hands on nothing."""
    g = Gemm()
    g.barriers()
    _fill(g, g.A)
    if early:
        ptx.mbarrier_arrive(g.k, g.empty, space="shared::cta", dst="_")
    ptx.fence_proxy_async(g.k, "shared::cta")
    if not early:
        ptx.mbarrier_arrive(g.k, g.empty, space="shared::cta", dst="_")
    ptx.mbarrier_wait(g.k, g.empty, 0)
    line = _mma_once(g)
    if early:
        f = only(check_kernel(g.k), Hazard.WGMMA_SMEM_NO_PROXY_FENCE, line)
        assert "no barrier" in f.message
    else:
        assert check_kernel(g.k) == []


def test_writes_to_a_buffer_the_wgmma_does_not_read_are_clean():
    g = Gemm()
    _fill(g, g.C)              # the epilogue's staging buffer: no descriptor points at it
    g.k.bar_sync(0)
    _mma_once(g)
    assert check_kernel(g.k) == []


def test_stmatrix_into_a_tile_then_wgmma_in_a_loop():
    """The second way: a helper writes B with stmatrix at the end of each iteration, the
    next iteration's wgmma reads it."""
    g = Gemm()
    k = g.k

    def restage(regs):
        k.stmatrix(k.add(k.mov(g.B), k.shl(k.tid.x, 4)), regs)
        k.bar_sync(0)

    regs = tuple(k.reg(t.b32) for _ in range(4))
    for r in regs:
        k.mov(0, dst=r, type=t.b32)
    with k.for_range(0, 4):
        ptx.wgmma_fence(k)
        g.mma()
        ptx.wgmma_commit_group(k)
        ptx.wgmma_wait_group(k, 0)
        restage(regs)
    f = only(check_kernel(k), Hazard.WGMMA_SMEM_NO_PROXY_FENCE, MMA_LINE)
    assert f.sites[1].ptx.startswith("stmatrix")


# -- wgmma-smem-released --------------------------------------------------------------------------
def _consumer(g: Gemm, wait_before_release: bool) -> int:
    k = g.k
    g.barriers()
    ptx.mbarrier_wait(k, g.full, 0)          # the try_wait loop
    ptx.wgmma_fence(k)
    g.mma()
    ptx.wgmma_commit_group(k)
    if wait_before_release:
        ptx.wgmma_wait_group(k, 0)
    line = here() + 1
    ptx.mbarrier_arrive(k, g.empty)
    if not wait_before_release:
        ptx.wgmma_wait_group(k, 0)
    return line


def test_stage_released_before_wgmma_waited():
    g = Gemm()
    line = _consumer(g, False)
    f = only(check_kernel(g.k), Hazard.WGMMA_SMEM_RELEASED, line)
    assert "no wgmma.wait_group ran after it" in f.message


def test_stage_released_after_wait_group_is_clean():
    g = Gemm()
    _consumer(g, True)
    assert check_kernel(g.k) == []


def _pipelined(g: Gemm, release_first: bool) -> int:
    """A k-loop keeping one wgmma in flight; the previous stage is released after
    wait_group 1 (correct) or right after the commit (the mistake)."""
    k = g.k
    g.barriers()
    phase = k.mov(0, type=t.u32)
    with k.for_range(0, k.ld_param(k.param(t.u32, "ktiles"))):
        ptx.mbarrier_wait(k, g.full, phase)
        k.xor(phase, 1, dst=phase)
        ptx.wgmma_fence(k)
        g.mma()
        ptx.wgmma_commit_group(k)
        line = here() + 2
        if release_first:
            ptx.mbarrier_arrive(k, g.empty)
        ptx.wgmma_wait_group(k, 1)
        if not release_first:
            ptx.mbarrier_arrive(k, g.empty)
    ptx.wgmma_wait_group(k, 0)
    return line


def test_pipelined_release_before_wait():
    g = Gemm()
    line = _pipelined(g, True)
    only(check_kernel(g.k), Hazard.WGMMA_SMEM_RELEASED, line)


def test_pipelined_release_after_wait_one_is_clean():
    g = Gemm()
    _pipelined(g, False)
    assert check_kernel(g.k) == []


def test_producer_expect_tx_is_not_a_release():
    g = Gemm()
    k = g.k
    g.barriers()
    ptx.wgmma_fence(k)
    g.mma()
    ptx.wgmma_commit_group(k)
    with k.if_(k.tid.x == 0):
        ptx.mbarrier_arrive_expect_tx(k, "release", "cta", "shared::cta", g.full, 0, dst="_")
    ptx.wgmma_wait_group(k, 0)
    assert Hazard.WGMMA_SMEM_RELEASED.value not in ids(check_kernel(k))


# -- setmaxnreg-not-uniform ------------------------------------------------------------------------
def _ws(cond, threads: int = 256) -> tuple[Kernel, int]:
    k = Kernel("ws", reqntid=threads, maxnreg=168)
    with k.if_(cond(k)):
        line = here() + 1
        ptx.setmaxnreg_dec(k, 40)
    with k.else_():
        ptx.setmaxnreg_inc(k, 232)
    k.ret()
    return k, line


def test_setmaxnreg_under_a_per_thread_condition():
    k, line = _ws(lambda k: k.setp("lt", k.tid.x, 64))
    f = only(check_kernel(k), Hazard.SETMAXNREG_NOT_UNIFORM, line, count=2)   # dec and inc
    assert "warpgroup 0, thread 0 may run it but thread 64 never does" in f.message


def test_setmaxnreg_by_warpgroup_index_is_clean():
    k, _ = _ws(lambda k: k.setp("eq", k.div(k.tid.x, 128), 0))
    assert check_kernel(k) == []
    assert "setmaxnreg.dec" in Module([k]).emit()


def test_setmaxnreg_by_thread_range_of_whole_warpgroups_is_clean():
    k, _ = _ws(lambda k: k.setp("lt", k.tid.x, 128))     # per-thread, yet warpgroup-uniform
    assert check_kernel(k) == []


def test_setmaxnreg_by_warp_index_is_not_warpgroup_uniform():
    """tid / 32 is uniform in a warp, not in a warpgroup: the second way."""
    k, line = _ws(lambda k: k.setp("eq", k.shr(k.tid.x, 5), 1))
    f = only(check_kernel(k), Hazard.SETMAXNREG_NOT_UNIFORM, line, count=2)
    assert "thread 32 may run it but thread 0 never does" in f.message


def test_setmaxnreg_guarded_by_a_lane_predicate():
    """A per-lane predicate (elect.sync) on a guarded setmaxnreg: caught by the checker's
    divergence levels, whatever the CTA size."""
    k = Kernel("k", maxnreg=128)
    p = ptx.elect_sync(k) if hasattr(ptx, "elect_sync") else k.setp("eq", k.laneid, 0)
    with k.guard(p):
        line = here() + 1
        ptx.setmaxnreg_dec(k, 64)
    only(check_kernel(k), Hazard.SETMAXNREG_NOT_UNIFORM, line)


def _wgmma_under(cond, threads: int = 256) -> tuple[Kernel, int]:
    """A K step of wgmma (fence, two mma_async, commit, wait) under `cond`."""
    k = Kernel("mma", reqntid=threads)
    desc = k.ld_param(k.param(t.u64, "desc"))
    acc = k.fragment(t.f32, (64, 64))
    with k.if_(cond(k)) if cond is not None else contextlib.nullcontext():
        line = here() + 1
        ptx.wgmma_fence(k)
        for _ in range(2):
            ptx.wgmma_mma_async(k, acc, desc, desc, atype="bf16")
        ptx.wgmma_commit_group(k)
        ptx.wgmma_wait_group(k, 0)
    acc.store(k.param_ptr("out"), 64)
    k.ret()
    return k, line


def test_wgmma_under_a_per_thread_condition():
    k, line = _wgmma_under(lambda k: k.setp("lt", k.tid.x, 64))
    f = only(check_kernel(k), Hazard.WGMMA_NOT_WARPGROUP, line)
    assert f.message.startswith("wgmma.fence is not run by all 128 threads of its warpgroup: "
                                "in warpgroup 0, thread 0 may run it but thread 64 never does")
    assert "(4 more such instructions)" in f.message


def test_wgmma_in_a_cta_of_part_of_a_warpgroup():
    k, line = _wgmma_under(None, threads=96)
    f = only(check_kernel(k), Hazard.WGMMA_NOT_WARPGROUP, line)
    assert "warpgroup 0 has only 96 threads (the CTA has 96; give it a multiple of 128)" \
        in f.message


def test_wgmma_by_warpgroup_index_is_clean():
    k, _ = _wgmma_under(lambda k: k.setp("eq", k.div(k.tid.x, 128), 1))
    assert check_kernel(k) == []
    k, _ = _wgmma_under(None, threads=384)
    assert check_kernel(k) == []


def _ws_k_loop(consumer_cond) -> tuple[Kernel, int]:
    """384 threads: warpgroup 0 would produce, the consumers run a run-time K loop of wgmma
    under `consumer_cond` (inside the loop, as a per-iteration test)."""
    k = Kernel("ws_mma", reqntid=384)
    desc = k.ld_param(k.param(t.u64, "desc"))
    n = k.ld_param(k.param(t.u32, "k_tiles"))
    acc = k.fragment(t.f32, (64, 64))
    wg = k.shr(k.tid.x, 7)
    with k.if_(wg != 0):
        with k.for_range(0, n):
            with k.if_(consumer_cond(k, wg)):
                line = here() + 1
                ptx.wgmma_fence(k)
                ptx.wgmma_mma_async(k, acc, desc, desc, atype="bf16")
                ptx.wgmma_commit_group(k)
                ptx.wgmma_wait_group(k, 0)
        acc.store(k.param_ptr("out"), 64)
    k.ret()
    return k, line


def test_wgmma_in_a_warp_specialized_k_loop_under_a_lane_condition():
    k, line = _ws_k_loop(lambda k, wg: k.setp("lt", k.and_(k.tid.x, 31), 16))
    f = only(check_kernel(k), Hazard.WGMMA_NOT_WARPGROUP, line)
    assert ("in warpgroup 1, thread 128 may run it but thread 144 never does" in f.message
            and "(3 more such instructions)" in f.message)


def test_wgmma_in_a_warp_specialized_k_loop_by_warpgroup_is_clean():
    k, _ = _ws_k_loop(lambda k, wg: k.setp("le", wg, 2))
    assert check_kernel(k) == []
