"""Checker (issue 29): rings whose stage and phase registers are advanced in place
(`MbarrierRing`, selp-advanced stages), waits on another ring's barriers in one dynamic
buffer, producer and consumer that disagree on the stage count, and a producer's first
empty-wait at the wrong parity with the usual tail release. Each mistake is written with
`MbarrierRing` and by hand (id and Python line asserted), each with a clean twin."""

from __future__ import annotations

import pytest

from ptxdsl import Kernel, ptx, t
from ptxdsl.checker import Hazard, check_kernel
from tests.checker_kernels import clean, here, only
from tests.ring_kernels import MAPS, S, WsRing, only_at


# -- 1a: the stage released after wgmma.wait_group 1 -------------------------------------------
def _release_current(g: WsRing) -> int:
    """The mistake: after wait_group 1 the wgmma just issued is still in flight, yet its
    own stage is released. Returns the line of the release."""
    k = g.k
    c = g.cursor("consumer")
    with k.for_range(0, g.kblocks) as kb:
        c.at(kb)
        c.wait()
        g.mma(c.slot())
        ptx.wgmma_wait_group(k, 1)
        line = here() + 1
        c.release()
        c.advance()
    ptx.wgmma_wait_group(k, 0)
    return line


def _release_previous(g: WsRing) -> None:
    """The right consumer: after wait_group 1 the previous stage's wgmma is done, so that
    stage is released; the last one after the loop. With MbarrierRing a second view trails
    the reading one by a stage (the first wgmma is peeled, as samples/gemm_hopper.py does);
    by hand, `(kb + S - 1) & (S - 1)` under `kb > 0`."""
    k = g.k
    if g.ring is not None:
        read, free = g.cursor("consumer"), g.cursor("consumer")
        read.wait()
        g.mma(read.slot(), first=True)
        read.advance()
        with k.for_range(1, g.kblocks):
            read.wait()
            g.mma(read.slot())
            read.advance()
            ptx.wgmma_wait_group(k, 1)
            free.release()
            free.advance()
        ptx.wgmma_wait_group(k, 0)
        free.release()
        return
    c, prev = g.cursor("consumer"), g.cursor("consumer")
    with k.for_range(0, g.kblocks) as kb:
        c.at(kb)
        c.wait()
        g.mma(c.slot())
        ptx.wgmma_wait_group(k, 1)
        with k.if_(kb > 0):
            prev.at(k.add(kb, S - 1))
            prev.release()
    ptx.wgmma_wait_group(k, 0)
    prev.at(k.add(g.kblocks, S - 1))
    prev.release()


@pytest.mark.parametrize("style", ["ring", "hand"])
def test_current_stage_released_after_wait_group_one(style):
    g = WsRing(style, _release_current)
    f = only_at(check_kernel(g.k, maps=MAPS), Hazard.WGMMA_SMEM_RELEASED, g.result)
    assert "reads the stage this arrive releases" in f.message
    clean(WsRing(style, _release_previous).k, maps=MAPS)


# -- 1b: a software-pipelined read of the next stage before its wait ---------------------------
def _pipelined(reader: str, wait_first: bool):
    """The consumer reads stage i+1 (ldmatrix, or a wgmma through its descriptor) while it
    still works on stage i; the read must follow the wait on stage i+1 (`wait_first`), not
    precede it (the mistake). Returns the consumer, which returns the read's line."""
    def consumer(g: WsRing) -> int:
        k = g.k
        lane16 = k.shl(k.and_(k.tid.x, 31), 4)
        ldm = reader == "ldmatrix"
        rd, free = g.cursor("consumer"), g.cursor("consumer")
        if g.ring is None:
            rd.at(k.mov(0, type=t.u32))
        rd.wait()
        k.ldmatrix(k.add(rd.slot(), lane16), 4) if ldm else g.mma(rd.slot())
        rd.advance()
        with k.for_range(1, g.kblocks) as kb:
            rd.at(kb)
            if wait_first:
                rd.wait()
            slot = rd.slot()
            line = here() + 1
            k.ldmatrix(k.add(slot, lane16), 4) if ldm else g.mma(slot)
            if not wait_first:
                rd.wait()
            if not ldm:
                ptx.wgmma_wait_group(k, 1)
            free.at(k.sub(kb, 1))
            free.release()
            free.advance()
            rd.advance()
        if not ldm:
            ptx.wgmma_wait_group(k, 0)
        free.at(k.sub(g.kblocks, 1))
        free.release()
        return line
    return consumer


@pytest.mark.parametrize("reader", ["ldmatrix", "wgmma"])
@pytest.mark.parametrize("style", ["ring", "hand"])
def test_next_stage_read_before_its_wait(style, reader):
    g = WsRing(style, _pipelined(reader, wait_first=False))
    f = only_at(check_kernel(g.k, maps=MAPS), Hazard.WAIT_WRONG_BARRIER, g.result)
    assert "another stage" in f.message
    clean(WsRing(style, _pipelined(reader, wait_first=True)).k, maps=MAPS)


def test_selp_advanced_stage_register():
    """A stage advanced with selp (`s = s + 1 == S ? 0 : s + 1`), the phase flipped with a
    selp-made bit: the stage rule follows it like MbarrierRing's guarded wrap."""
    def build(wait_first: bool) -> tuple[Kernel, int]:
        def consumer(g: WsRing) -> int:
            k = g.k
            s, ph = k.mov(0, type=t.u32), k.mov(0, type=t.b32)

            def slot():
                return k.add(k.mov(g.tiles), k.mul(s, 2 * 8192, type=t.u32))

            def wait():
                ptx.mbarrier_wait(k, k.add(k.mov(g.full), k.shl(s, 3)), ph)

            def advance():
                nxt = k.add(s, 1, type=t.u32)
                wrap = k.setp("eq", nxt, S, type=t.u32)
                k.selp(0, nxt, wrap, dst=s)
                k.xor(ph, k.selp(1, 0, wrap, type=t.b32), dst=ph)

            wait()
            k.ldmatrix(slot(), 4)
            with k.for_range(1, g.kblocks):
                advance()
                if wait_first:
                    wait()
                line = here() + 1
                k.ldmatrix(slot(), 4)
                if not wait_first:
                    wait()
            return line
        g = WsRing("hand", consumer)
        return g.k, g.result

    k, line = build(False)
    only(check_kernel(k, maps=MAPS), Hazard.WAIT_WRONG_BARRIER, line)
    clean(build(True)[0], maps=MAPS)
