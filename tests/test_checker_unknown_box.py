"""The ring-read rules with TMA loads whose box the checker is not told (maps read from a
global workspace through a pointer parameter, no `loads=` nor `maps=`): a load of unknown size
ends where the next load begins (in every stage of a ring), so a wait on another ring's
barrier, or on tiles loaded once below the ring, does not cover a read of this ring; where
only such an estimated end decides, the read is a note naming the map and the declaration
that would let it be judged, never silently passed. Each: the hazard (id and line), a clean
twin."""

from __future__ import annotations

import pytest

import samples.flash_attention as fa
import samples.flash_attention_bwd as fb
from ptxdsl import Addr, Kernel, Module, ptx, t
from ptxdsl.checker import Hazard, check_kernel, check_module
from ptxdsl.pipeline import ConsumerView, MbarrierRing
from tests.checker_kernels import here, ids, only

BOX = 1024                      # bytes of one box (never told to the checker)
STAGE = 2 * BOX                 # a stage: two boxes, as FlashAttention's Q and K tiles
A_OFF, B_OFF = 0, 2 * STAGE     # ring a's two stages, then ring b's
BARS = 4 * STAGE


def _errors(findings) -> list[str]:
    return [f.format() for f in findings if f.id != Hazard.CHECK_SKIPPED.value]


def two_rings(bug: str | None, *, prologue: bool = False):
    """Rings a and b (two stages each) in one dynamic buffer, each stage filled by two boxes
    through maps another kernel wrote in a global workspace; the consumers wait for a stage
    of each and read both with ld.shared. `bug`: "no-wait" (b's wait left out) or
    "next-stage" (b's slot read after the advance, its wait on the stage before).
    `prologue`: a box loop (`tile + h * BOX`) fills a buffer below the rings once before the
    loop, and the consumers wait for it there. Returns the kernel and the line of b's
    read."""
    k = Kernel("unknown_box", reqntid=256)
    ws = k.ld_param(k.param_ptr("maps"))           # two 128-byte maps
    nb = k.ld_param(k.param(t.u32, "nb"))
    dyn = k.extern_shared("smem", align=1024)
    base = 2 * BOX if prologue else 0
    bars = base + BARS
    ra = MbarrierRing(k, 2, storage=Addr(dyn, bars), name="ra")
    rb = MbarrierRing(k, 2, storage=Addr(dyn, bars + 32), name="rb")
    pro = Addr(dyn, bars + 64)
    ra.init(sync=False)
    if prologue:
        with k.if_(k.tid.x == 0):
            ptx.mbarrier_init(k, pro, 1)
    rb.init()
    maps = [k.add(ws, 128 * i) for i in range(2)]
    lane = k.shl(k.and_(k.tid.x, 31), 4)
    with k.if_(k.tid.x == 0):
        for m in maps:
            ptx.fence_proxy_tensormap_generic(k, "acquire", "gpu", m)
        if prologue:
            ptx.mbarrier_arrive_expect_tx(k, "release", "cta", "shared::cta", pro, 2 * BOX,
                                          dst="_")
            with k.for_range(0, 2) as h:
                ptx.cp_async_bulk_tensor(k, "shared::cluster", "global",
                                         k.add(k.mov(dyn), k.mul(h, BOX)), maps[0], (0, h),
                                         pro)
        pa, pb = ra.producer(), rb.producer()
        with k.for_range(0, nb) as j:
            for p, m, off in ((pa, maps[0], base + A_OFF), (pb, maps[1], base + B_OFF)):
                p.wait_empty()
                p.arrive_expect_tx(STAGE)
                slot = p.slot(Addr(dyn, off), STAGE)
                for box in range(2):
                    ptx.cp_async_bulk_tensor(k, "shared::cluster", "global",
                                             k.add(slot, box * BOX), m, (64 * box, j),
                                             p.full_barrier())
                p.advance()
    line = 0
    with k.if_(k.tid.x >= 128):
        if prologue:
            ptx.mbarrier_wait(k, pro, 0)
            k.ld(k.add(k.mov(dyn), lane), type=t.u32, space="shared::cta")
        ca, cb = ra.consumer(), rb.consumer()
        with k.for_range(0, nb):
            ca.wait_full()
            k.ld(k.add(ca.slot(Addr(dyn, base + A_OFF), STAGE), lane), type=t.u32,
                 space="shared::cta")
            if bug == "next-stage":
                cb.advance()
            elif bug != "no-wait":
                cb.wait_full()
            line = here() + 1
            k.ld(k.add(cb.slot(Addr(dyn, base + B_OFF), STAGE), lane), type=t.u32,
                 space="shared::cta")
            if bug == "next-stage":
                cb.wait_full()
            k.bar_sync(1, 128)
            with k.if_(k.tid.x == 128):
                ca.release()
                cb.release()
            ca.advance()
            if bug != "next-stage":
                cb.advance()
    k.ret()
    return k, line


def test_clean_rings_are_clean():
    k, _ = two_rings(None)
    assert _errors(check_kernel(k, notes=True)) == []
    assert not [f for f in check_kernel(k, notes=True) if "wait-wrong-barrier" in f.message]


@pytest.mark.parametrize("bug", ["no-wait", "next-stage"])
def test_read_of_the_next_ring_is_reported(bug):
    # Ring a's second box starts 1 KiB into a's stage: taken to run to a's next stage,
    # it reached into ring b's first box, and the wait on a covered b's read.
    k, line = two_rings(bug)
    f = only(check_kernel(k), Hazard.WAIT_WRONG_BARRIER, line)
    assert "another stage or ring" in f.message


def test_clean_rings_with_a_box_loop_prologue_are_clean():
    k, _ = two_rings(None, prologue=True)
    assert _errors(check_kernel(k, notes=True)) == []


def test_read_decided_by_an_estimated_end_is_a_note():
    # The prologue's box loop starts at dyn + 0..1024: its size unknown, nothing bounds its
    # end, so it may reach ring b, and its wait (before the loop) is on every path to b's
    # read. b's own load starts at the bytes read and no wait is on its barrier: not
    # judged, and said, with the declaration that would decide it.
    k, line = two_rings("no-wait", prologue=True)
    found = check_kernel(k, notes=True)
    assert _errors(found) == []
    notes = [f for f in found if "wait-wrong-barrier" in f.message]
    assert len(notes) == 1 and notes[0].loc.line == line, [f.format() for f in found]
    assert "whose size is unknown" in notes[0].message
    assert "declare the box of maps: MbarrierRing(..., loads={maps: box})" in notes[0].message
    assert "check_module(mod, maps={'unknown_box': {'maps':" in notes[0].message


# -- samples/flash_attention.py's varlen kernel with its boxes undeclared ------------------------
def _varlen(monkeypatch, skip: str | None):
    """The sample's varlen forward kernel built as it was before its maps' boxes were
    declared (every `MbarrierRing(..., loads=)` dropped), with the consumers' `wait_full`
    of ring `skip` left out."""
    init, wait = MbarrierRing.__init__, ConsumerView.wait_full

    def undeclared(self, *args, **kw):
        kw.pop("loads", None)
        init(self, *args, **kw)

    def maybe_wait(self):
        return None if self.ring.name == skip else wait(self)

    monkeypatch.setattr(MbarrierRing, "__init__", undeclared)
    monkeypatch.setattr(ConsumerView, "wait_full", maybe_wait)
    module = Module([fa.build_forward(fa.config("bf16", 128, True))], target="sm_90a")
    return check_module(module, notes=True)


def test_varlen_attention_without_boxes_is_clean(monkeypatch):
    found = _varlen(monkeypatch, None)
    assert _errors(found) == []
    assert any("no box size known" in f.message for f in found)   # the boxes are unknown


@pytest.mark.parametrize("ring", ["kr", "vr"])
def test_varlen_attention_missing_wait_without_boxes_is_reported(monkeypatch, ring):
    found = _varlen(monkeypatch, ring)
    errors = [f for f in found if f.id != Hazard.CHECK_SKIPPED.value]
    assert errors and set(ids(errors)) == {Hazard.WAIT_WRONG_BARRIER.value}, _errors(found)
    assert all(f.loc.file == fa.__file__ for f in errors)


# -- samples/flash_attention_bwd.py without its map context --------------------------------------
def _bwd(monkeypatch, skip: bool):
    """The backward kernel checked without `maps=` (its boxes unknown), with the consumers'
    wait on the Q/dO ring left out when `skip`: K and V (a one-stage ring of their own, at
    constant offsets) end below the Q/dO ring, so their wait does not cover its reads."""
    wait = ConsumerView.wait_full
    monkeypatch.setattr(ConsumerView, "wait_full",
                        lambda self: None if skip and self.ring.name == "qring" else wait(self))
    kernel = fb.build_bwd(fb.CONFIGS[("bf16", 128)])
    return check_module(Module([kernel], target="sm_90a"), notes=True)


def test_attention_backward_without_boxes_is_clean(monkeypatch):
    found = _bwd(monkeypatch, False)
    assert _errors(found) == []
    assert any("no box size known" in f.message for f in found)


def test_attention_backward_missing_wait_without_boxes_is_reported(monkeypatch):
    errors = [f for f in _bwd(monkeypatch, True) if f.id != Hazard.CHECK_SKIPPED.value]
    assert errors and set(ids(errors)) == {Hazard.WAIT_WRONG_BARRIER.value}
    assert all(f.loc.file == fb.__file__ for f in errors)
