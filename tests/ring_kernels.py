"""Warp-specialized ring kernels for the ring/barrier checker tests (tests/test_checker_29_*):
one builder, two spellings of the ring (`MbarrierRing` or a hand-written `kb & 3` ring), and
a consumer chosen by the test, so each test shows only the lines of its mistake."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from ptxdsl import Addr, Kernel, ptx, t
from ptxdsl.instructions.wgmma_desc import SmemLayout, descriptor
from ptxdsl.pipeline import MbarrierRing

S = 4                                        # stages
L = SmemLayout(t.bf16, 64, 64, "K", "128B")  # one operand tile (8 KiB)
STAGE = 2 * L.nbytes                         # A and B side by side
MAPS = {"map_a": {"box_bytes": L.nbytes}, "map_b": {"box_bytes": L.nbytes}}


def only_at(findings, hazard, line: int):
    """The findings are one of `hazard`, built at `line` of the calling test file: the
    finding's own line, or the line that called the helper (a Cursor or WsRing method) that
    built it. Returns the finding."""
    assert [f.id for f in findings] == [hazard.value], [f.format() for f in findings]
    f = findings[0]
    caller = sys._getframe(1).f_code.co_filename
    loc = f.loc
    while loc is not None and not (loc.file == caller and loc.line == line):
        loc = loc.caller
    assert loc is not None, (line, f.format())
    return f


class Cursor:
    """One side's walk over the ring: `MbarrierRing` views, or by hand from a loop counter
    (`kb & (S-1)`, parity `(kb / S) & 1`, xor 1 for the producer) with the stage count `n`."""

    def __init__(self, g: WsRing, role: str, n: int = S, start: int | None = None):
        self.g, self.role, self.n = g, role, n
        self.start = (1 if role == "producer" else 0) if start is None else start
        self.view: Any = None
        # A count other than the ring's: written by hand on its barrier arrays.
        if g.ring is not None and n == g.ring.stages:
            self.view = g.ring.producer() if role == "producer" else g.ring.consumer()
            if self.start != (1 if role == "producer" else 0):   # a planted starting parity
                g.k.mov(self.start, dst=self.view.phase)
        self.kb: Any = None

    def at(self, kb) -> None:
        """Hand-written rings: the loop counter of this iteration."""
        self.kb = kb

    def _stage(self):
        k = self.g.k
        return k.and_(self.kb, self.n - 1, type=t.b32) if self.n & (self.n - 1) == 0 \
            else k.rem(self.kb, self.n, type=t.u32)

    def _parity(self):
        k = self.g.k
        ph = k.and_(k.div(self.kb, self.n, type=t.u32), 1, type=t.b32)
        return k.xor(ph, 1, type=t.b32) if self.start else ph

    def bar(self, which: str):
        if self.view is not None:
            return self.view.full_barrier() if which == "full" else self.view.empty_barrier()
        k = self.g.k
        return k.add(k.mov(getattr(self.g, which)), k.shl(self._stage(), 3))

    def slot(self):
        if self.view is not None:
            return self.view.slot(self.g.tiles, STAGE)
        k = self.g.k
        return k.add(k.mov(self.g.tiles), k.mul(self._stage(), STAGE, type=t.u32))

    def wait(self) -> None:
        if self.view is not None:
            if self.role == "producer":
                self.view.wait_empty()
            else:
                self.view.wait_full()
            return
        which = "empty" if self.role == "producer" else "full"
        ptx.mbarrier_wait(self.g.k, self.bar(which), self._parity())

    def release(self) -> None:
        k = self.g.k
        with k.if_(k.and_(k.tid.x, 127) == 0):
            if self.view is not None:
                self.view.release()
            else:
                ptx.mbarrier_arrive(k, self.bar("empty"), dst="_")

    def advance(self) -> None:
        if self.view is not None:
            self.view.advance()


class WsRing:
    """256 threads: thread 0 of warpgroup 0 fills an S-stage ring of A/B tiles with TMA,
    warpgroup 1 runs `consumer(g)`. `style`: "ring" (MbarrierRing) or "hand"."""

    def __init__(self, style: str, consumer: Callable[[WsRing], Any],
                 producer_stages: int = S, producer_start: int = 1, extra: int = 0):
        k = self.k = Kernel("ws", reqntid=256)
        self.style = style
        self.ta = k.tensormap_addr(k.param_tensormap("map_a"))
        self.tb = k.tensormap_addr(k.param_tensormap("map_b"))
        self.kblocks = k.ld_param(k.param(t.u32, "kblocks"))
        # (`extra` bytes after the ring's stages, for the consumer's own tiles)
        self.tiles = k.shared_array(t.b8, S * STAGE + extra, align=1024, name="tiles")
        self.ring: MbarrierRing | None = None
        if style == "ring":
            self.ring = MbarrierRing(k, S)
            self.ring.init()
            self.full, self.empty = self.ring.full, self.ring.empty
        else:
            self.full = k.shared_array(t.b64, S, align=8, name="full")
            self.empty = k.shared_array(t.b64, S, align=8, name="empty")
            with k.if_(k.tid.x == 0):
                for s in range(S):
                    ptx.mbarrier_init(k, Addr(self.full, 8 * s), 1)
                    ptx.mbarrier_init(k, Addr(self.empty, 8 * s), 1)
                ptx.fence_mbarrier_init(k)
            k.bar_sync(0)
        self.acc = k.fragment(t.f32, shape=(64, 64))
        with k.if_(k.shr(k.tid.x, 7) == 0):
            with k.if_(k.tid.x == 0):
                self.produce(producer_stages, producer_start)
        with k.else_():
            self.result = consumer(self)
        k.ret()

    def cursor(self, role: str, n: int = S, start: int | None = None) -> Cursor:
        return Cursor(self, role, n, start)

    def produce(self, n: int, start: int) -> None:
        """The producer: its first empty-wait asks for parity `start` (1 is right: the stages
        start empty); `wait_line` is the line of that wait here."""
        k = self.k
        p = self.cursor("producer", n, start)
        with k.for_range(0, self.kblocks) as kb:
            p.at(kb)
            self.wait_line = sys._getframe().f_lineno + 1
            p.wait()
            full = p.bar("full")
            ptx.mbarrier_arrive_expect_tx(k, "release", "cta", "shared::cta", full, STAGE,
                                          dst="_")
            slot = p.slot()
            ptx.cp_async_bulk_tensor(k, "shared::cluster", "global", slot, self.ta, (0, kb),
                                     full)
            ptx.cp_async_bulk_tensor(k, "shared::cluster", "global", k.add(slot, L.nbytes),
                                     self.tb, (0, kb), full)
            p.advance()

    def mma(self, slot, first: bool = False) -> None:
        """One wgmma of the stage at `slot` (A, then B after it), committed."""
        k = self.k
        ptx.wgmma_fence(k)
        ptx.wgmma_mma_async(k, self.acc, descriptor(k, L, slot),
                            descriptor(k, L, k.add(slot, L.nbytes)), 0 if first else 1,
                            atype="bf16")
        ptx.wgmma_commit_group(k)
