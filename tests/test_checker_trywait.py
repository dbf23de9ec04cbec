"""Checker: try_wait forms. A try_wait counts as a wait where its result is known true (the exit
of `done = false; while (!done) done = try_wait(...)`, the rotated loop) and is not reported
when its false result leads to a wait on the same phase (CUTLASS's `consumer_try_wait` +
`consumer_wait(state, token)`). Each correct form checks clean, with an `ld.shared` and with a
wgmma consumer; each buggy twin is reported."""

from __future__ import annotations

import pytest

from ptxdsl import Addr, Kernel, ptx, t
from ptxdsl.checker import check_kernel
from ptxdsl.instructions.wgmma_desc import SmemLayout, descriptor
from ptxdsl.pipeline import MbarrierRing
from tests.checker_kernels import ids

TB = 512
HINT = 1000000
LA = SmemLayout(t.bf16, 64, 64, "K", "128B")
LB = SmemLayout(t.bf16, 128, 64, "K", "128B")


def _false(k: Kernel):
    return k.setp("ne", k.mov(0, type=t.u32), 0, type=t.u32, dst=k.reg(t.pred))


def wait(k: Kernel, bar, ph, form: str, tile=None) -> None:
    """Wait for phase `ph` of `bar` the way `form` says (`tile`: a buffer the copy fills)."""
    if form in ("while", "while_hint", "while_true"):
        done = k.setp("eq" if form == "while_true" else "ne", k.mov(0, type=t.u32), 0,
                      type=t.u32, dst=k.reg(t.pred))
        hint = (HINT,) if form == "while_hint" else ()
        with k.while_(lambda: ~done):
            ptx.mbarrier_try_wait_parity(k, bar, ph, *hint, dst=done)
    elif form == "rotated":
        done = ptx.mbarrier_try_wait_parity(k, bar, ph, HINT)
        with k.while_(lambda: ~done):
            ptx.mbarrier_try_wait_parity(k, bar, ph, HINT, dst=done)
    elif form == "token":
        tok = ptx.mbarrier_try_wait_parity(k, bar, ph, HINT)
        with k.if_(~tok):
            ptx.mbarrier_wait(k, bar, ph)
    elif form == "ignored":
        ptx.mbarrier_try_wait_parity(k, bar, ph)
    elif form == "token_no_wait":      # the false branch does something else
        tok = ptx.mbarrier_try_wait_parity(k, bar, ph)
        with k.if_(~tok):
            k.bar_sync(1)
    elif form == "token_one_path":     # only some threads look at the result
        tok = ptx.mbarrier_try_wait_parity(k, bar, ph)
        with k.if_(k.tid.x < 32), k.if_(~tok):
            ptx.mbarrier_wait(k, bar, ph)
    elif form == "token_read_first":   # reads the buffer where the try_wait failed
        tok = ptx.mbarrier_try_wait_parity(k, bar, ph)
        with k.if_(~tok):
            k.ld(Addr(k.mov(tile)), type=t.u32, space="shared::cta")
            ptx.mbarrier_wait(k, bar, ph)
    elif form == "token_other_parity":  # the blocking wait is for another phase
        tok = ptx.mbarrier_try_wait_parity(k, bar, ph)
        with k.if_(~tok):
            ptx.mbarrier_wait(k, bar, k.xor(ph, 1))
    elif form == "token_rewritten":    # the result is overwritten before the branch
        tok = ptx.mbarrier_try_wait_parity(k, bar, ph)
        k.setp("eq", k.mov(0, type=t.u32), 0, type=t.u32, dst=tok)
        with k.if_(~tok):
            ptx.mbarrier_wait(k, bar, ph)
    else:
        raise AssertionError(form)


def ld_kernel(form: str) -> Kernel:
    """One buffer refilled each iteration by thread 0's TMA copy; every thread waits, reads."""
    k = Kernel(f"tw_{form}", reqntid=128)
    tm = k.param_tensormap("tmap")
    n = k.ld_param(k.param(t.u32, "n"))
    out = k.ld_param(k.param_ptr("out"))
    tile = k.shared_array(t.b8, TB, align=128, name="tile")
    bar = k.shared_array(t.b64, 1, align=8, name="bar")
    with k.if_(k.tid.x == 0):
        ptx.mbarrier_init(k, bar, 1)
        ptx.fence_mbarrier_init(k)
    k.bar_sync(0)
    tmap = k.tensormap_addr(tm)
    ph = k.mov(0, dst=k.reg(t.u32, "phase"))
    with k.for_range(0, n) as i:
        with k.if_(k.tid.x == 0):
            ptx.mbarrier_arrive_expect_tx(k, "release", "cta", "shared::cta", bar, TB, dst="_")
            ptx.cp_async_bulk_tensor(k, "shared::cluster", "global", tile, tmap, (0, i), bar)
        wait(k, bar, ph, form, tile)
        v = k.ld(Addr(k.add(k.mov(tile), k.shl(k.tid.x, 2))), type=t.u32, space="shared::cta")
        k.st(Addr(k.add(out, k.mul(k.mad(i, 128, k.tid.x), 4, mode="wide"))), v, type=t.u32,
             space="global")
        k.bar_sync(0)
        k.xor(ph, 1, dst=ph)
    k.ret()
    return k


def wgmma_kernel(form: str) -> Kernel:
    """A warp-specialized ring: a producer thread, a consumer warpgroup whose wgmmas read the
    stage through descriptors after waiting on its full barrier the way `form` says."""
    stages, stage = 4, LA.nbytes + LB.nbytes
    k = Kernel(f"tw_wgmma_{form}", reqntid=256, minnctapersm=1)
    ma, mb = k.param_tensormap("ma"), k.param_tensormap("mb")
    n = k.ld_param(k.param(t.u32, "kblocks"))
    out = k.ld_param(k.param_ptr("out"))
    smem = k.extern_shared("smem", align=1024)
    ring = MbarrierRing(k, stages, empty_count=1, storage=Addr(smem, stages * stage))
    ring.init()
    with k.if_(k.shr(k.tid.x, 7) == 0):
        with k.if_(k.tid.x == 0):
            tma, tmb = k.tensormap_addr(ma), k.tensormap_addr(mb)
            p = ring.producer()
            with k.for_range(0, n) as kb:
                p.wait_empty()
                p.arrive_expect_tx(stage)
                slot, full = p.slot(smem, stage), p.full_barrier()
                ptx.cp_async_bulk_tensor(k, "shared::cluster", "global", slot, tma,
                                         (k.mul(kb, 64), 0), full)
                ptx.cp_async_bulk_tensor(k, "shared::cluster", "global",
                                         k.add(slot, LA.nbytes), tmb, (k.mul(kb, 64), 0), full)
                p.advance()
    with k.else_():
        acc = k.fragment(t.f32, shape=(64, 128), zero=False)
        c = ring.consumer()
        with k.for_range(0, n):
            wait(k, c.full_barrier(), c.phase, form, c.slot(smem, stage))
            slot = c.slot(smem, stage)
            da, db = descriptor(k, LA, slot), descriptor(k, LB, k.add(slot, LA.nbytes))
            ptx.wgmma_fence(k)
            for kk in range(0, 64, 16):
                ptx.wgmma_mma_async(k, acc, da.k_step(k, kk), db.k_step(k, kk), 1, atype="bf16")
            ptx.wgmma_commit_group(k)
            ptx.wgmma_wait_group(k, 0)
            with k.if_(k.tid.x == 128):
                c.release()
            c.advance()
        acc.store(out, 128)
    k.ret()
    return k


def check(consumer: str, form: str):
    if consumer == "ld":
        return check_kernel(ld_kernel(form), maps={"tmap": {"box_bytes": TB}})
    return check_kernel(wgmma_kernel(form), maps={"ma": {"box_bytes": LA.nbytes},
                                                  "mb": {"box_bytes": LB.nbytes}})


CONSUMERS = ["ld", "wgmma"]


@pytest.mark.parametrize("consumer", CONSUMERS)
@pytest.mark.parametrize("form", ["while", "while_hint", "rotated", "token"])
def test_correct_try_wait_forms_are_clean(consumer, form):
    found = check(consumer, form)
    assert found == [], [f.format() for f in found]


@pytest.mark.parametrize("consumer", CONSUMERS)
def test_while_loop_that_starts_done_reads_before_the_wait(consumer):
    # `done = true; while (!done) ...`: the loop may not run, so its exit is no wait.
    assert set(ids(check(consumer, "while_true"))) == {"smem-read-before-wait"}


@pytest.mark.parametrize("consumer", CONSUMERS)
@pytest.mark.parametrize("form", ["ignored", "token_no_wait", "token_one_path",
                                  "token_read_first", "token_other_parity",
                                  "token_rewritten"])
def test_try_wait_whose_false_result_is_not_waited_out(consumer, form):
    assert "try-wait-not-looped" in ids(check(consumer, form))
