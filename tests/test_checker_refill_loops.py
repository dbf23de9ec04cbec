"""Checker: `ring-refill-unguarded` with loops inside the producer's stage loop. A run-time
loop over the boxes of one stage writes other bytes on every trip, so the stage loop around
it (and its wait on the empty barrier) is what guards the refill; a loop rewriting the same
bytes, or a producer that never waits in its loops, is still reported."""

from __future__ import annotations

from ptxdsl import Addr, Kernel, ptx, t
from ptxdsl.checker import Hazard, check_kernel
from ptxdsl.pipeline import MbarrierRing
from tests.checker_kernels import here, ids

STAGES, A_BOX, B_BOX = 3, 8192, 16384
STAGE = 2 * A_BOX + B_BOX
MAPS = {"ma": {"box_bytes": A_BOX}, "mb": {"box_bytes": B_BOX}}


def _producer_with_box_loop(*, empty_wait: str = "loop", inner: str = "boxes"):
    """One elected producer lane fills stage kb % 3 of a ring (its offsets computed by hand):
    it waits on empty[kb % 3] (`empty_wait="loop"`; "before": once, before the stage loop;
    "none": never), expects 32768 bytes, loads operand A's two boxes in a run-time loop
    `for h in range(0, 2)` and operand B after it. `inner` picks the A destination: "boxes"
    `sa + h * 8192`, "same" `sa` on both trips, "overlap" `sa + h * 4096` (half a box).
    Consumer warps read each stage. Returns the kernel and the lines of the two copies."""
    k = Kernel("refill_loops", reqntid=160)
    ma, mb = k.param_tensormap("ma"), k.param_tensormap("mb")
    n = k.ld_param(k.param(t.u32, "kblocks"))
    smem = k.extern_shared("smem", align=1024)
    ring = MbarrierRing(k, STAGES, empty_count=4, storage=Addr(smem, STAGES * STAGE))
    ring.init()
    warp = k.shr(k.tid.x, 5)
    lines = {}
    with k.if_(warp == 0):
        with k.if_(k.elect_sync()):
            tma, tmb = k.tensormap_addr(ma), k.tensormap_addr(mb)
            base = k.mov(smem)
            if empty_wait == "before":
                ptx.mbarrier_wait(k, ring.empty_base, 1)
            with k.for_range(0, n) as kb:
                st = k.rem(kb, STAGES)
                if empty_wait == "loop":
                    ph = k.xor(k.and_(k.div(kb, STAGES), 1), 1)
                    ptx.mbarrier_wait(k, k.add(ring.empty_base, k.shl(st, 3)), ph)
                full = k.add(ring.full_base, k.shl(st, 3))
                ptx.mbarrier_arrive_expect_tx(k, "release", "cta", "shared::cta", full, STAGE,
                                              dst="_")
                sa = k.mad(st, STAGE, base)
                kc = k.mul(kb, 64)
                with k.for_range(0, 2) as h:
                    dst = {"boxes": lambda: k.mad(h, A_BOX, sa), "same": lambda: sa,
                           "overlap": lambda: k.mad(h, A_BOX // 2, sa)}[inner]()
                    lines["a"] = here() + 1
                    ptx.cp_async_bulk_tensor(k, "shared::cluster", "global", dst, tma,
                                             (kc, k.mul(h, 64)), full)
                lines["b"] = here() + 1
                ptx.cp_async_bulk_tensor(k, "shared::cluster", "global", k.add(sa, 2 * A_BOX),
                                         tmb, (kc, 0), full)
    with k.else_():
        c = ring.consumer()
        with k.for_range(0, n):
            c.wait_full()
            slot = c.slot(smem, STAGE)
            k.ld(k.add(slot, k.shl(k.tid.x, 2)), type=t.u32, space="shared::cta")
            k.syncwarp()
            with k.if_(k.laneid == 0):
                c.release()
            c.advance()
    k.ret()
    return k, lines


def _refill_lines(findings) -> list[int]:
    return sorted(f.loc.line for f in findings if f.id == Hazard.RING_REFILL_UNGUARDED.value)


def test_box_loop_inside_a_guarded_stage_loop_is_clean():
    k, _ = _producer_with_box_loop()
    assert [f.format() for f in check_kernel(k, maps=MAPS)] == []


def test_box_loop_without_the_empty_wait_is_reported():
    # Both copies refill the ring unguarded: A's box loop is judged by the stage loop too.
    k, lines = _producer_with_box_loop(empty_wait="none")
    findings = check_kernel(k, maps=MAPS)
    assert ids(findings) == [Hazard.RING_REFILL_UNGUARDED.value] * 2, \
        [f.format() for f in findings]
    assert _refill_lines(findings) == sorted([lines["a"], lines["b"]])


def test_wait_outside_every_loop_does_not_guard_the_refills():
    k, lines = _producer_with_box_loop(empty_wait="before")
    findings = check_kernel(k, maps=MAPS)
    assert ids(findings) == [Hazard.RING_REFILL_UNGUARDED.value] * 2, \
        [f.format() for f in findings]
    assert _refill_lines(findings) == sorted([lines["a"], lines["b"]])


def test_inner_loop_writing_the_same_box_twice_is_reported():
    # The stage loop waits, but nothing waits between the inner loop's two writes of `sa`.
    k, lines = _producer_with_box_loop(inner="same")
    findings = check_kernel(k, maps=MAPS)
    assert ids(findings) == [Hazard.RING_REFILL_UNGUARDED.value], [f.format() for f in findings]
    assert _refill_lines(findings) == [lines["a"]]


def test_inner_loop_moving_by_less_than_its_box_is_reported():
    # Half a box a trip: the second box rewrites the first one's upper half.
    k, lines = _producer_with_box_loop(inner="overlap")
    findings = check_kernel(k, maps=MAPS)
    assert ids(findings) == [Hazard.RING_REFILL_UNGUARDED.value], [f.format() for f in findings]
    assert _refill_lines(findings) == [lines["a"]]
