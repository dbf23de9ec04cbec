"""Where wave 3b's three classes stop (their pairs are in tests/wave3b_kernels.py, checked by
tests/test_checker_wave3.py): a tail wait after a loop of constant trips is judged on the
phase those trips leave; a phase flipped on a test equivalent to the stage's wrap is right
whatever its form; two rings built with `MbarrierRing` in one dynamic buffer are compared
stage by stage, and reported only where their stages overlap."""

from __future__ import annotations

import pytest

from ptxdsl import Addr, Kernel, ptx, t
from ptxdsl.checker import Hazard, Severity, check_kernel
from ptxdsl.frontend import parse_ptx
from ptxdsl.pipeline import MbarrierRing
from tests import wave3_kernels, wave3b_kernels
from tests.checker_kernels import ids


def _ids(text: str, name: str, *maps: int) -> list[str]:
    found = parse_ptx(text, file=f"{name}.ptx").check(**wave3_kernels._maps(name, *maps))
    return sorted(f.id for f in found if f.severity is not Severity.note)


@pytest.mark.parametrize("trips, parity, found", [
    (3, "1", False), (3, "0", True), (4, "0", False), (4, "1", True)])
def test_a_tail_wait_after_a_loop_of_constant_trips_is_judged_on_their_count(
        trips: int, parity: str, found: bool):
    """3 trips leave the barrier in the phase of parity 1, 4 in that of parity 0: a constant
    is right for one count and wrong for the other."""
    text = wave3b_kernels.tail_fixed(trips, parity)
    assert _ids(text, "w3b_tail_fixed", 0) == (["wait-parity-constant"] if found else [])


@pytest.mark.parametrize("test, found", [(0, False), (1, True), (3, True)])
def test_a_phase_flipped_on_the_wrapped_stage_is_judged_by_its_value(test: int, found: bool):
    """The correct 4-stage ring of w3_phase_flip, its phase flipped on `stage == test` read
    after the wrap: `stage == 0` there is the wrap itself (right, though it is not the wrap's
    predicate); 1 and 3 flip it on the wrong trips."""
    text = wave3_kernels.phase_flip(False)
    flip = "  selp.b32 %r11, %r20, %r11, %p6;\n"
    assert flip in text
    text = text.replace(flip, f"  setp.eq.s32 %p12, %r10, {test};\n"
                              "  selp.b32 %r11, %r20, %r11, %p12;\n")
    assert _ids(text, "w3_phase_flip", 0) == (["ring-parity"] if found else [])


STAGES, BOX = 2, 8192
MAPS = {"mk": {"box_bytes": BOX}, "mv": {"box_bytes": BOX}}


def _two_builder_rings(v_at: int) -> Kernel:
    """K and V rings (`MbarrierRing`, 2 stages of 8 KiB each) in one dynamic buffer: K's
    tiles at smem+0, V's at smem+v_at, the barriers after both; one elected producer lane
    fills both each trip after waiting for each stage's release, warpgroup 0 consumes."""
    k = Kernel("w3b_builder_rings", reqntid=160)
    mk, mv = k.param_tensormap("mk"), k.param_tensormap("mv")
    n = k.ld_param(k.param(t.u32, "n"))
    smem = k.extern_shared("smem", align=1024)
    bars = 4 * STAGES * BOX
    rk = MbarrierRing(k, STAGES, empty_count=128, storage=Addr(smem, bars), name="kr")
    rv = MbarrierRing(k, STAGES, empty_count=128, storage=Addr(smem, bars + 16 * STAGES),
                      name="vr")
    rk.init(sync=False)
    rv.init()
    warp = k.shr(k.tid.x, 5)
    with k.if_(warp == 4):
        with k.if_(k.elect_sync()):
            tk, tv = k.tensormap_addr(mk), k.tensormap_addr(mv)
            pk, pv = rk.producer(), rv.producer()
            with k.for_range(0, n) as i:
                for p, tm, at in ((pk, tk, 0), (pv, tv, v_at)):
                    p.wait_empty()
                    p.arrive_expect_tx(BOX)
                    ptx.cp_async_bulk_tensor(k, "shared::cluster", "global",
                                             p.slot(Addr(smem, at), BOX), tm, (i, 0),
                                             p.full_barrier())
                    p.advance()
    with k.if_(warp < 4):
        ck, cv = rk.consumer(), rv.consumer()
        with k.for_range(0, n):
            for c, at in ((ck, 0), (cv, v_at)):
                c.wait_full()
                k.ld(k.add(c.slot(Addr(smem, at), BOX), k.shl(k.tid.x, 2)), type=t.u32,
                     space="shared::cta")
                c.release()
                c.advance()
    k.ret()
    return k


@pytest.mark.parametrize("v_at, found", [
    (2 * BOX, False),      # V right after K's two stages
    (BOX, True),           # V's stage 0 is K's stage 1
    (3 * BOX, False),      # a gap between them
    (2 * BOX - 128, True),  # V's first 128 bytes are K's last
])
def test_two_builder_rings_in_one_buffer_overlap_only_where_their_stages_do(
        v_at: int, found: bool):
    findings = check_kernel(_two_builder_rings(v_at), maps=MAPS)
    assert ids(findings) == ([Hazard.TMA_DST_OVERLAP.value] if found else []), \
        [f.format() for f in findings]
