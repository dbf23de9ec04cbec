"""Tensor-memory kernels for the checker's tests (tests/test_checker_tmem.py): a clean
kernel and, for each rule of `ptxdsl/checker/hazards_tmem.py`, the mistake made in it.

`CLEAN_PTX` is hand-written PTX read through the front end (it assembles for sm_100a): warp 0
allocates 32 columns and relinquishes the permit, every warp reads the address after a
barrier, thread 0 issues one mma and commits it to an mbarrier, all wait on it, load their
lanes, and warp 0 frees the columns after a second barrier. `PTX_BUGS` takes one step of it
out (or moves it): variant -> (edits, the hazards, the text of the line the first finding
names); `PTX_FIXED` adds steps that keep it correct.

Built with the builders: `tile` (the same kernel, `BUILT_BUGS`), `warp_specialized` (a
producer, an MMA thread and epilogue warps, `WS_BUGS`), `persistent` (one alloc per CTA or
per tile); with inline PTX: `inline_dealloc` (which exits need a dealloc) and `inline_mma`.
Their findings name the lines `LINES` marks (lines of this file)."""

from __future__ import annotations

import sys
from typing import Any

from ptxdsl import Kernel, ptx, t
from ptxdsl.checker import Hazard
from ptxdsl.pipeline import MbarrierRing

CLEAN_PTX = """\
.version 8.6
.target sm_100a
.address_size 64

.visible .entry tmem_clean(
	.param .u64 out,
	.param .u64 adesc,
	.param .u64 bdesc
)
.reqntid 128, 1, 1
{
	.reg .pred 	%p<8>;
	.reg .b32 	%r<32>;
	.reg .b64 	%rd<12>;
	.shared .align 8 .b8 slot[8];
	.shared .align 8 .b8 bar[8];

	ld.param.u64 	%rd1, [out];
	ld.param.u64 	%rd2, [adesc];
	ld.param.u64 	%rd3, [bdesc];
	cvta.to.global.u64 	%rd4, %rd1;
	mov.u32 	%r1, %tid.x;
	shr.u32 	%r2, %r1, 5;
	mov.u32 	%r3, slot;
	mov.u32 	%r4, bar;
	setp.eq.u32 	%p1, %r2, 0;
	setp.eq.u32 	%p2, %r1, 0;
	@!%p1 bra 	$L_alloc_done;
	tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [%r3], 32;
	tcgen05.relinquish_alloc_permit.cta_group::1.sync.aligned;
$L_alloc_done:
	@%p2 mbarrier.init.shared::cta.b64 [%r4], 1;
	bar.sync 	0;
	tcgen05.fence::after_thread_sync;
	ld.shared.b32 	%r5, [%r3];
	@!%p2 bra 	$L_mma_done;
	mov.b32 	%r6, 135268624;
	setp.ne.b32 	%p3, %r6, 0;
	tcgen05.mma.cta_group::1.kind::f16 [%r5], %rd2, %rd3, %r6, %p3;
	tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64 [%r4];
$L_mma_done:
	mov.b32 	%r7, 0;
$L_wait:
	mbarrier.try_wait.parity.shared::cta.b64 	%p4, [%r4], %r7;
	@!%p4 bra 	$L_wait;
	tcgen05.fence::after_thread_sync;
	shl.b32 	%r8, %r2, 21;
	add.s32 	%r9, %r5, %r8;
	tcgen05.ld.sync.aligned.32x32b.x2.b32 {%r10, %r11}, [%r9];
	tcgen05.wait::ld.sync.aligned;
	add.s32 	%r12, %r10, %r11;
	mul.wide.u32 	%rd5, %r1, 4;
	add.s64 	%rd6, %rd4, %rd5;
	st.global.u32 	[%rd6], %r12;
	tcgen05.fence::before_thread_sync;
	bar.sync 	0;
	@!%p1 bra 	$L_end;
	tcgen05.fence::after_thread_sync;
	tcgen05.dealloc.cta_group::1.sync.aligned.b32 %r5, 32;
$L_end:
	ret;
}
"""

_ALLOC = "\ttcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [%r3], 32;\n"
_RELINQUISH = "\ttcgen05.relinquish_alloc_permit.cta_group::1.sync.aligned;\n"
_DEALLOC = "\ttcgen05.dealloc.cta_group::1.sync.aligned.b32 %r5, 32;\n"
_COMMIT = ("\ttcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64 "
           "[%r4];\n")
_SPIN = ("$L_wait:\n\tmbarrier.try_wait.parity.shared::cta.b64 \t%p4, [%r4], %r7;\n"
         "\t@!%p4 bra \t$L_wait;\n")
_READ = "\tld.shared.b32 \t%r5, [%r3];\n"
_PUBLISH = "\tbar.sync \t0;\n\ttcgen05.fence::after_thread_sync;\n"
_LD = "tcgen05.ld.sync.aligned.32x32b.x2.b32"
_WAIT_LD = "\ttcgen05.wait::ld.sync.aligned;\n"
_ST = "\ttcgen05.st.sync.aligned.32x32b.x2.b32 [%r9], {%r10, %r11};\n"

PTX_BUGS: dict[str, tuple[list[tuple[str, str]], list[Hazard], str]] = {
    "no_alloc": ([(_ALLOC, "")], [Hazard.TMEM_USE_BEFORE_ALLOC], "tcgen05.mma"),
    # every warp reads the slot before the barrier that publishes the alloc's store
    "read_before_barrier": ([(_PUBLISH + _READ, _READ + _PUBLISH)],
                            [Hazard.TMEM_USE_BEFORE_ALLOC], "ld.shared.b32"),
    "no_dealloc": ([(_DEALLOC, "")], [Hazard.TMEM_NOT_DEALLOCATED], "tcgen05.alloc"),
    "no_relinquish": ([(_RELINQUISH, "")], [Hazard.TMEM_PERMIT_NOT_RELINQUISHED],
                      "tcgen05.alloc"),
    "alloc_after_relinquish": ([(_ALLOC + _RELINQUISH, _RELINQUISH + _ALLOC)],
                               [Hazard.TMEM_ALLOC_AFTER_RELINQUISH], "tcgen05.alloc"),
    # the ld and the dealloc both come too early
    "no_commit": ([(_COMMIT, "")], [Hazard.TMEM_READ_BEFORE_COMMIT_WAIT] * 2, _LD),
    "no_mbarrier_wait": ([(_SPIN, "")], [Hazard.TMEM_READ_BEFORE_COMMIT_WAIT] * 2, _LD),
    # the barrier hands the columns over, and warp 0 frees them, with its load in flight
    "no_wait_ld": ([(_WAIT_LD, "")],
                   [Hazard.TCGEN05_LD_NO_WAIT] * 2, "bar.sync"),
    "no_fence_before": ([("\ttcgen05.fence::before_thread_sync;\n", "")],
                        [Hazard.TCGEN05_FENCE_MISSING], "bar.sync"),
    "no_fence_after_wait": ([(_SPIN + "\ttcgen05.fence::after_thread_sync;\n", _SPIN)],
                            [Hazard.TCGEN05_FENCE_MISSING], _LD),
    # the mma on column 0 of lane 0 rather than on what the alloc returned
    "constant_taddr": ([("\ttcgen05.mma.cta_group::1.kind::f16 [%r5]",
                         "\tmov.b32 \t%r20, 0;\n\ttcgen05.mma.cta_group::1.kind::f16 [%r20]")],
                       [Hazard.TMEM_USE_BEFORE_ALLOC], "tcgen05.mma"),
    "mixed_cta_group": ([("tcgen05.mma.cta_group::1", "tcgen05.mma.cta_group::2")],
                        [Hazard.TCGEN05_CTA_GROUP_MIXED], "tcgen05.mma"),
    # each warp writes its lanes back and hands them over (and frees them) mid-store
    "st_no_wait": ([(_WAIT_LD, _WAIT_LD + _ST)], [Hazard.TCGEN05_ST_NO_WAIT] * 2, "bar.sync"),
}
# Correct edits: each checks clean (the twins of the variants above that add an instruction).
PTX_FIXED: dict[str, list[tuple[str, str]]] = {
    "st_waited": [(_WAIT_LD, _WAIT_LD + _ST + "\ttcgen05.wait::st.sync.aligned;\n")],
}


def ptx_variant(name: str) -> str:
    """`CLEAN_PTX` with variant `name`'s edits (`PTX_BUGS` or `PTX_FIXED`; each must apply)."""
    text = CLEAN_PTX
    for old, new in PTX_FIXED[name] if name in PTX_FIXED else PTX_BUGS[name][0]:
        assert text.count(old) == 1, (name, old)
        text = text.replace(old, new)
    return text


# -- inline PTX ------------------------------------------------------------------------------------
LINES: dict[str, int] = {}
_SM100 = ("8.6", "sm_100a")


def _mark(name: str) -> None:
    """Remember the caller's next line as `LINES[name]`."""
    LINES[name] = sys._getframe(1).f_lineno + 1


def inline_dealloc(variant: str) -> Kernel:
    """Warp 0 allocates with inline PTX (CUTLASS's TmemAllocator writes it so), every warp
    reads the address after a barrier, and one warp frees it: warp 0 (`ok`), warp 1
    (`other_warp`), warp 1 after warp 3 returned early (`early_return`), or nobody
    (`no_dealloc`); warp 0 returning first (`alloc_warp_returns`), or a dealloc only when a
    parameter says so (`if_param`), leave it allocated on some path."""
    k = Kernel(f"inline_{variant}", reqntid=128)
    slot = k.shared_array(t.b32, 1, align=8)
    warp = k.shr(k.tid.x, 5, type=t.u32)
    with k.if_(warp == 0):
        _mark(f"inline_{variant}")
        k.asm("tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [$0], 32;", ins=[slot],
              requires=_SM100)
        k.asm("tcgen05.relinquish_alloc_permit.cta_group::1.sync.aligned;", requires=_SM100)
    k.bar_sync(0)
    taddr = k.ld(slot, type=t.b32, space="shared")
    frees = {"ok": 0, "other_warp": 1, "early_return": 1, "alloc_warp_returns": 1,
             "if_param": 1}.get(variant)
    if variant in ("early_return", "alloc_warp_returns"):
        with k.if_(warp == (3 if variant == "early_return" else 0)):
            k.ret()
    if variant == "if_param":
        with k.if_(k.ld_param(k.param(t.u32, "go")) == 1):
            _dealloc(k, warp, frees, taddr)
    elif frees is not None:
        _dealloc(k, warp, frees, taddr)
    k.ret()
    return k


def _dealloc(k: Kernel, warp, which: int, taddr) -> None:
    with k.if_(warp == which):
        k.asm("tcgen05.dealloc.cta_group::1.sync.aligned.b32 $0, 32;", ins=[taddr],
              requires=_SM100)


# -- built with the tcgen05 builders ---------------------------------------------------------------
_IDESC = 0x08100490       # (any 32-bit value: the rules do not read it)


class Tile:
    """One CTA of 128 threads computing one accumulator tile, as `CLEAN_PTX` does, with the
    builders: warp 0 allocates, thread 0 issues the mma and commits it, everyone waits, loads
    its lanes and stores them, warp 0 frees the columns. Each step is a method, so a test's
    variant leaves one out or changes it."""

    def __init__(self, name: str):
        self.k = k = Kernel(name, reqntid=128)
        self.out = k.ld_param(k.param_ptr("out"))
        self.a = k.ld_param(k.param(t.u64, "adesc"))
        self.b = k.ld_param(k.param(t.u64, "bdesc"))
        self.slot = k.shared_array(t.b32, 1, align=8, name="slot")
        self.bar = k.shared_array(t.b64, 1, align=8, name="bar")
        self.warp = k.shr(k.tid.x, 5, type=t.u32)
        self.taddr = None

    def alloc(self, relinquish: bool = True) -> None:
        k = self.k
        with k.if_(self.warp == 0):
            _mark("alloc")
            ptx.tcgen05_alloc(k, ptx.cta_group_1, self.slot, 32)
            if relinquish:
                _mark("relinquish")
                ptx.tcgen05_relinquish_alloc_permit(k, ptx.cta_group_1)

    def publish(self, barrier: bool = True, fence: bool = True, init: bool = True) -> None:
        """The barrier that publishes the alloc's address (and the mbarrier's init)."""
        k = self.k
        if init:
            with k.if_(k.tid.x == 0):
                ptx.mbarrier_init(k, self.bar, 1)
        if barrier:
            k.bar_sync(0)
        if fence:
            ptx.tcgen05_fence_after_thread_sync(k)
        _mark("read_slot")
        self.taddr = k.ld(self.slot, type=t.u32, space="shared")

    def mma(self, commit: bool = True) -> None:
        k = self.k
        with k.if_(k.tid.x == 0):
            _mark("mma")
            ptx.tcgen05_mma(k, ptx.kind_f16, ptx.cta_group_1, self.taddr, self.a, self.b,
                            _IDESC, 0)
            if commit:
                _mark("commit")
                ptx.tcgen05_commit(k, ptx.cta_group_1, self.bar)

    def wait(self, wait: bool = True, fence: bool = True) -> None:
        k = self.k
        if wait:
            ptx.mbarrier_wait(k, self.bar, 0)
        if fence:
            ptx.tcgen05_fence_after_thread_sync(k)

    def load(self, wait: bool = True) -> Any:
        """Each warp loads its 32 lanes (warp w: lanes 32w.., address bits 16 up)."""
        k = self.k
        lanes = k.add(self.taddr, k.shl(self.warp, 21))
        _mark("ld")
        regs = ptx.tcgen05_ld_32x32b(k, 2, lanes, type=t.u32)
        if wait:
            ptx.tcgen05_wait_ld(k)
        total = k.add(regs[0], regs[1])
        k.st(k.add(self.out, k.mul(k.tid.x, 4, mode="wide")), total, type=t.u32,
             space="global")
        return lanes

    def free(self, fence: bool = True, barrier: bool = True, dealloc: bool = True) -> None:
        k = self.k
        if fence:
            ptx.tcgen05_fence_before_thread_sync(k)
        if barrier:
            _mark("free_barrier")
            k.bar_sync(0)
        with k.if_(self.warp == 0):
            ptx.tcgen05_fence_after_thread_sync(k)
            if dealloc:
                _mark("dealloc")
                ptx.tcgen05_dealloc(k, ptx.cta_group_1, self.taddr, 32)
        k.ret()


def tile(variant: str = "ok") -> Kernel:
    """`Tile`'s kernel, whole (`ok`) or with one mistake (`BUILT_BUGS`)."""
    s = Tile(f"tile_{variant}")
    s.alloc(relinquish=variant != "no_relinquish")
    s.publish(barrier=variant != "no_barrier", fence=variant != "no_fence_after_barrier",
              init=variant != "no_mbarrier_init")
    if variant == "constant_taddr":
        s.taddr = s.k.mov(0, type=t.u32)       # a guess at the alloc's address
    s.mma(commit=variant != "no_commit")
    s.wait(wait=variant != "no_mbarrier_wait", fence=variant != "no_fence_after_wait")
    lanes = s.load(wait=variant != "no_wait_ld")
    if variant.startswith("staged"):
        # a second chunk after the warps' own barrier (a staging buffer's, as an epilogue
        # storing through shared memory has): it hands no tensor memory over, so the loads
        # before it need no fence
        s.k.bar_sync(1, 128)
        s.load()
    if variant == "st_no_wait":
        # write the lanes back (zeroed), then hand them over with the store in flight
        _mark("st")
        ptx.tcgen05_st_32x32b(s.k, lanes, [s.k.mov(0, type=t.b32)] * 2)
    s.free(fence=variant not in ("no_fence_before", "staged_no_fence"),
           dealloc=variant != "no_dealloc")
    return s.k


# variant -> (the hazards, the mark of the line the first finding names)
BUILT_BUGS: dict[str, tuple[list[Hazard], str]] = {
    "no_relinquish": ([Hazard.TMEM_PERMIT_NOT_RELINQUISHED], "alloc"),
    # (the barrier published the mbarrier's init too)
    "no_barrier": ([Hazard.MBAR_INIT_UNSYNCED, Hazard.TMEM_USE_BEFORE_ALLOC], "read_slot"),
    "no_fence_after_barrier": ([Hazard.TCGEN05_FENCE_MISSING], "mma"),
    "no_commit": ([Hazard.TMEM_READ_BEFORE_COMMIT_WAIT] * 2, "ld"),
    "no_mbarrier_wait": ([Hazard.TMEM_READ_BEFORE_COMMIT_WAIT] * 2, "ld"),
    "no_fence_after_wait": ([Hazard.TCGEN05_FENCE_MISSING], "ld"),
    "no_wait_ld": ([Hazard.TCGEN05_LD_NO_WAIT] * 2, "free_barrier"),
    "st_no_wait": ([Hazard.TCGEN05_ST_NO_WAIT] * 2, "free_barrier"),
    "no_fence_before": ([Hazard.TCGEN05_FENCE_MISSING], "free_barrier"),
    "staged_no_fence": ([Hazard.TCGEN05_FENCE_MISSING], "free_barrier"),
    "no_dealloc": ([Hazard.TMEM_NOT_DEALLOCATED], "alloc"),
    # the commit's arrive and the wait both use the barrier no one initialised
    "no_mbarrier_init": ([Hazard.MBAR_UNINIT] * 2, "commit"),
    # the mma and the dealloc on a constant address
    "constant_taddr": ([Hazard.TMEM_USE_BEFORE_ALLOC] * 2, "mma"),
}


def warp_specialized(variant: str = "ok") -> Kernel:
    """A warp-specialised tile of 192 threads: thread 0 loads the K tiles with TMA into a ring
    of two stages; warp 1 allocates the accumulator, and its lane 0 issues one mma per stage,
    committing each to the stage's empty barrier and the last to `acc_bar`; warps 2-5 wait
    on `acc_bar`, load their lanes and store them; after a CTA barrier warp 1 frees the
    columns. Variants (`WS_BUGS`): the issuer's mma right after the full wait with no
    tcgen05.fence::after_thread_sync (`no_fence_after_full`), the epilogue's load without the
    wait on `acc_bar` (`no_acc_wait`), warp 1 freeing the columns without the barrier that
    orders the epilogue's wait and loads before it (`dealloc_unsynced`)."""
    k = Kernel(f"ws_{variant}", reqntid=192)
    out = k.ld_param(k.param_ptr("out"))
    tmap = k.param_tensormap("tmap", box=(64, 64), dtype=t.f16)
    maddr = k.tensormap_addr(tmap)
    k_tiles = k.ld_param(k.param(t.u32, "k_tiles"))
    tiles = k.shared_array(t.b8, 2 * 8192, align=1024, name="tiles")
    slot = k.shared_array(t.b32, 1, align=8, name="slot")
    acc_bar = k.shared_array(t.b64, 1, align=8, name="acc_bar")
    ring = MbarrierRing(k, 2)
    warp = k.shr(k.tid.x, 5, type=t.u32)
    with k.if_(k.tid.x == 0):
        ptx.mbarrier_init(k, acc_bar, 1)
    with k.if_(warp == 1):
        ptx.tcgen05_alloc(k, ptx.cta_group_1, slot, 64)
        ptx.tcgen05_relinquish_alloc_permit(k, ptx.cta_group_1)
    ring.init()                     # (thread 0's inits, fence.mbarrier_init, bar.sync)
    ptx.tcgen05_fence_after_thread_sync(k)
    taddr = k.ld(slot, type=t.u32, space="shared")
    with k.if_(k.tid.x == 0):
        p = ring.producer()
        with k.for_range(0, k_tiles) as i:
            p.wait_empty()
            p.arrive_expect_tx(8192)
            ptx.cp_async_bulk_tensor(k, "shared::cluster", "global", p.slot(tiles, 8192),
                                     maddr, (0, k.mul(i, 64)), p.full_barrier())
            p.advance()
    with k.if_(k.tid.x == 32):
        c = ring.consumer()
        with k.for_range(0, k_tiles) as i:
            c.wait_full()
            if variant != "no_fence_after_full":
                ptx.tcgen05_fence_after_thread_sync(k)
            desc = k.cvt(c.slot(tiles, 8192), t.u64)
            _mark("ws_mma")
            ptx.tcgen05_mma(k, ptx.kind_f16, ptx.cta_group_1, taddr, desc, desc, _IDESC,
                            k.setp("ne", i, 0))
            ptx.tcgen05_commit(k, ptx.cta_group_1, c.empty_barrier())
            c.advance()
        ptx.tcgen05_commit(k, ptx.cta_group_1, acc_bar)
    with k.if_(warp >= 2):
        if variant != "no_acc_wait":
            ptx.mbarrier_wait(k, acc_bar, 0)
        ptx.tcgen05_fence_after_thread_sync(k)
        quarter = k.and_(warp, 3, type=t.u32)      # warp 2..5 -> lanes 64, 96, 0, 32
        _mark("ws_ld")
        regs = ptx.tcgen05_ld_32x32b(k, 4, k.add(taddr, k.shl(quarter, 21)), type=t.u32)
        ptx.tcgen05_wait_ld(k)
        k.st(k.add(out, k.mul(k.tid.x, 4, mode="wide")), k.add(regs[0], regs[3]),
             type=t.u32, space="global")
        ptx.tcgen05_fence_before_thread_sync(k)
    if variant != "dealloc_unsynced":
        k.bar_sync(0)
    with k.if_(warp == 1):
        ptx.tcgen05_fence_after_thread_sync(k)
        _mark("ws_dealloc")
        ptx.tcgen05_dealloc(k, ptx.cta_group_1, taddr, 64)
    k.ret()
    return k


WS_BUGS: dict[str, tuple[list[Hazard], str]] = {
    "no_fence_after_full": ([Hazard.TCGEN05_FENCE_MISSING], "ws_mma"),
    "no_acc_wait": ([Hazard.TMEM_READ_BEFORE_COMMIT_WAIT] * 2, "ws_ld"),
    "dealloc_unsynced": ([Hazard.TMEM_READ_BEFORE_COMMIT_WAIT], "ws_dealloc"),
}


def persistent(variant: str = "ok") -> Kernel:
    """A persistent CTA looping over tiles, each zeroing its accumulator lanes with
    tcgen05.st: warp 0 allocates once before the loop and relinquishes the permit (`ok`), or
    allocates, relinquishes and frees once per tile (`per_tile`: the second tile's alloc
    follows the first tile's relinquish)."""
    k = Kernel(f"persistent_{variant}", reqntid=128)
    slot = k.shared_array(t.b32, 1, align=8, name="slot")
    tiles = k.ld_param(k.param(t.u32, "tiles"))
    warp = k.shr(k.tid.x, 5, type=t.u32)
    zero = k.mov(0, type=t.b32)

    def alloc() -> Any:
        with k.if_(warp == 0):
            _mark(f"persistent_{variant}")
            ptx.tcgen05_alloc(k, ptx.cta_group_1, slot, 128)
            ptx.tcgen05_relinquish_alloc_permit(k, ptx.cta_group_1)
        k.bar_sync(0)
        ptx.tcgen05_fence_after_thread_sync(k)
        return k.ld(slot, type=t.u32, space="shared")

    def free(taddr: Any) -> None:
        ptx.tcgen05_fence_before_thread_sync(k)
        k.bar_sync(0)
        with k.if_(warp == 0):
            ptx.tcgen05_fence_after_thread_sync(k)
            ptx.tcgen05_dealloc(k, ptx.cta_group_1, taddr, 128)

    taddr = alloc() if variant == "ok" else None
    with k.for_range(0, tiles):
        mine = alloc() if taddr is None else taddr
        ptx.tcgen05_st_32x32b(k, k.add(mine, k.shl(warp, 21)), [zero])
        ptx.tcgen05_wait_st(k)
        if taddr is None:
            free(mine)
    if taddr is not None:
        free(taddr)
    k.ret()
    return k


def inline_mma(wait: bool = True) -> Kernel:
    """`Tile`'s kernel with its mma and commit in one inline statement (as CUTLASS's
    `umma_arrive` follows the MMA atom's asm), the wait on the commit's barrier left out
    unless `wait`."""
    s = Tile(f"inline_mma_{wait}")
    s.alloc()
    s.publish()
    k = s.k
    with k.if_(k.tid.x == 0):
        k.asm("tcgen05.mma.cta_group::1.kind::f16 [$0], $1, $2, 135267472, 1;\n"
              "tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64 [$3];",
              ins=[s.taddr, s.a, s.b, s.bar], requires=_SM100)
    s.wait(wait=wait)
    s.load()
    s.free()
    return k
