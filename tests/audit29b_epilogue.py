"""Epilogue and one-warpgroup prefetch kernels of the second recall audit of issue 29
(tests/test_checker_audit29b.py): a persistent kernel whose tile id comes from an atomic tile
scheduler through a shared word, staging its tile with st.shared and storing it with TMA,
fences and bulk waits in inline PTX; and a prefetch loop (no warp specialization) whose
prologue fills S-1 stages and whose stage/phase are carried as `phase ^= (stage == S-1)`.
Builders return `(kernel, line, context)` like tests/audit29b_rings.py's."""

from __future__ import annotations

from ptxdsl import Kernel, ptx, t
from tests.audit29b_rings import BOX, MAPS, Plant, Ring, arrive, elect, leader, load, mma, spin

OUT = 64 * 64 * 2                                  # one 64x64 bf16 output tile
EPI_MAPS = {"tc": {"box_bytes": OUT}}


def fence_async(k: Kernel) -> None:
    k.asm("fence.proxy.async.shared::cta;")


def wait_read(k: Kernel, n: int) -> None:
    k.asm(f"cp.async.bulk.wait_group.read {n};")


def bulk_commit(k: Kernel) -> None:
    k.asm("cp.async.bulk.commit_group;")


def next_tile(k: Kernel, counter, word):
    """Thread 0 takes a tile from the global counter into a shared word; everyone reads it."""
    with k.if_(k.tid.x == 0):
        k.st(word, k.atom("add", counter, 1, type=t.u32, space="global"), type=t.u32,
             space="shared")
    k.bar_sync(1, 128)
    tile = k.ld(word, type=t.u32, space="shared")
    k.bar_sync(1, 128)
    return tile


def stage_out(k: Kernel, buf, tile) -> None:
    """Each thread writes its 16 bytes of the tile (a stand-in for packed accumulators)."""
    off = k.add(buf, k.shl(k.tid.x, 4))
    for j in range(4):
        k.st(k.add(off, 4 * j), tile, type=t.u32, space="shared")


def persistent_epilogue(bug: str | None):
    """`bug`: "fence" drops the proxy fence before the store; "read" writes the staging
    buffer of two tiles ago before waiting for the store that reads it (wait_group.read 1
    moved after the writes)."""
    pl = Plant(bug is not None)
    k = Kernel("b29epi", reqntid=128)
    tc = k.tensormap_addr(k.param_tensormap("tc"))
    counter = k.ld_param(k.param_ptr("counter"))
    ntiles = k.ld_param(k.param(t.u32, "ntiles"))
    stagebuf = k.shared_array(t.b8, 2 * OUT, align=1024, name="stagebuf")
    word = k.shared_array(t.u32, 1, align=4, name="tileword")
    wa = k.mov(word)
    with k.for_range(0, ntiles) as j:
        tile = next_tile(k, counter, wa)
        buf = k.add(k.mov(stagebuf), k.mul(k.and_(j, 1), OUT, type=t.u32))
        if bug != "read":
            with k.if_(k.tid.x == 0):
                wait_read(k, 1)
        k.bar_sync(2, 128)
        if bug == "read":
            pl.here()
        stage_out(k, buf, tile)
        if bug == "read":
            with k.if_(k.tid.x == 0):
                wait_read(k, 1)
        if bug != "fence":
            fence_async(k)
        k.bar_sync(2, 128)
        with k.if_(k.tid.x == 0):
            if bug == "fence":
                pl.here()
            ptx.cp_async_bulk_tensor(k, "global", "shared::cta", tc, (0, k.shl(tile, 6)), buf)
            bulk_commit(k)
    with k.if_(k.tid.x == 0):
        k.asm("cp.async.bulk.wait_group 0;")
    k.ret()
    return k, pl.at, {"maps": EPI_MAPS}


def epilogue_no_fence(bug: bool):
    return persistent_epilogue("fence" if bug else None)


def epilogue_overwrite(bug: bool):
    return persistent_epilogue("read" if bug else None)


def prefetch(stages: int, bug: str | None):
    """One warpgroup; thread 0 loads, everyone consumes. The prologue fills stages 0..S-2;
    trip `it` refills stage (it + S - 1) % S after waiting on its empty barrier, then waits
    on full[stage] with the carried phase. `bug`: "parity" waits empty at ((n / S) & 1)
    without the xor; "count" wraps the carried stage at S - 1 (a 5-stage ring walked as 4);
    "read" issues the wgmma before the full wait."""
    pl = Plant(bug is not None)
    k = Kernel("b29pf", reqntid=128)
    ta = k.tensormap_addr(k.param_tensormap("ta"))
    tb = k.tensormap_addr(k.param_tensormap("tb"))
    nk = k.ld_param(k.param(t.u32, "nk"))
    acc = k.fragment(t.f32, shape=(64, 64))
    r = Ring(k, stages)
    with k.if_(k.tid.x == 0):
        for i in range(stages - 1):
            load(k, r, k.mov(i, type=t.u32), k.mov(i, type=t.u32), ta, tb)
    stage = k.mov(0, type=t.u32)
    phase = k.mov(0, type=t.u32)
    wrap = stages - 2 if bug == "count" else stages - 1
    with k.for_range(0, nk) as it:
        nxt = k.add(it, stages - 1)
        with k.if_(k.setp("lt", nxt, nk, type=t.u32)), k.if_(k.tid.x == 0):
            s2, ph2 = r.stage(nxt)
            if bug == "parity":
                pl.here()
            if bug != "refill":
                spin(k, r.bar(r.empty, s2), ph2 if bug == "parity" else k.xor(ph2, 1))
            else:
                pl.here()
            load(k, r, s2, nxt, ta, tb)
        if bug == "read":
            pl.here()
            mma(k, acc, r.slot(stage))
        if bug == "count":
            pl.here()
        spin(k, r.bar(r.full, stage), phase)
        if bug != "read":
            mma(k, acc, r.slot(stage))
        ptx.wgmma_wait_group(k, 0)
        with leader(k):
            arrive(k, r.bar(r.empty, stage))
        last = k.setp("eq", stage, wrap, type=t.u32)
        k.xor(phase, k.selp(1, 0, last, type=t.u32), dst=phase)
        k.selp(0, k.add(stage, 1), last, type=t.u32, dst=stage)
    k.ret()
    return k, pl.at, {"maps": MAPS}


def prefetch_parity0(bug: bool):
    return prefetch(3, "parity" if bug else None)


def prefetch_stage_count(bug: bool):
    return prefetch(5, "count" if bug else None)


def prefetch_refill_unguarded(bug: bool):
    return prefetch(6, "refill" if bug else None)


def prefetch_read_early(bug: bool):
    return prefetch(2, "read" if bug else None)


assert BOX


def kv_one_buffer(bug: bool):
    """FA3-style K and V rings of 2 stages (2 x 8 KiB tiles a stage each) in one dynamic
    buffer with their barriers after them; the producer (inline-elected) loads K then V for
    each block; the consumer's S = QK^T waits (inline loop) on the V ring's full barrier
    before reading K (the mistake), then waits on V for PV."""
    pl = Plant(bug)
    k = Kernel("b29kv", reqntid=256)
    ta = k.tensormap_addr(k.param_tensormap("ta"))
    tb = k.tensormap_addr(k.param_tensormap("tb"))
    nk = k.ld_param(k.param(t.u32, "nk"))
    acc = k.fragment(t.f32, shape=(64, 64))
    smem = k.extern_shared("smem", align=1024)
    ring_bytes = 2 * 2 * BOX                       # one ring: 2 stages of 2 tiles
    bars = 2 * ring_bytes
    base = k.mov(smem)
    kfull, vfull, kempty, vempty = (k.add(base, bars + 16 * j) for j in range(4))
    with k.if_(k.tid.x == 0):
        for b, n in ((kfull, 1), (vfull, 1), (kempty, 1), (vempty, 1)):
            for s in range(2):
                ptx.mbarrier_init(k, k.add(b, 8 * s), n)
        ptx.fence_mbarrier_init(k)
    k.bar_sync(0)

    def bar(b, s):
        return k.add(b, k.shl(s, 3))

    def slot(ring: int, s):
        return k.add(base, k.add(k.mul(s, 2 * BOX, type=t.u32), ring * ring_bytes))

    with k.if_(k.tid.x < 128):
        with k.if_(k.shr(k.tid.x, 5) == 0), k.if_(elect(k)):
            with k.for_range(0, nk) as it:
                s, ph = k.and_(it, 1), k.and_(k.shr(it, 1), 1)
                for ring, full, empty in ((0, kfull, kempty), (1, vfull, vempty)):
                    spin(k, bar(empty, s), k.xor(ph, 1))
                    fb = bar(full, s)
                    k.asm("mbarrier.arrive.expect_tx.shared::cta.b64 _, [$0], $1;",
                          ins=[fb, (2 * BOX, t.u32)])
                    dst = slot(ring, s)
                    ptx.cp_async_bulk_tensor(k, "shared::cluster", "global", dst, ta, (0, it),
                                             fb)
                    ptx.cp_async_bulk_tensor(k, "shared::cluster", "global",
                                             k.add(dst, BOX), tb, (0, it), fb)
    with k.else_():
        with k.for_range(0, nk) as it:
            s, ph = k.and_(it, 1), k.and_(k.shr(it, 1), 1)
            spin(k, bar(vfull if bug else kfull, s), ph)
            pl.here()
            mma(k, acc, slot(0, s))
            ptx.wgmma_wait_group(k, 0)
            with leader(k):
                arrive(k, bar(kempty, s))
            spin(k, bar(vfull, s), ph)
            mma(k, acc, slot(1, s))
            ptx.wgmma_wait_group(k, 0)
            with leader(k):
                arrive(k, bar(vempty, s))
    k.ret()
    return k, pl.at, {"maps": MAPS}


def _tile_mainloop(k: Kernel, r: Ring, acc, g, nk, bug: bool, pl: Plant) -> None:
    """A helper: one tile's k-blocks through the ring, `g` the stage counter carried across
    tiles (stage g % S, phase (g / S) & 1). The mistake: the wait skipped on the tile's
    first block (a peeled first iteration that lost its wait)."""
    with k.for_range(0, nk) as kb:
        s, ph = r.stage(g)
        if bug:
            with k.if_(kb > 0):
                spin(k, r.bar(r.full, s), ph)
        else:
            spin(k, r.bar(r.full, s), ph)
        if bug:
            pl.here()
        mma(k, acc, r.slot(s))
        ptx.wgmma_wait_group(k, 0)
        with leader(k):
            arrive(k, r.bar(r.empty, s))
        k.add(g, 1, dst=g)


def scheduled_tiles(bug: bool):
    """Persistent, warp-specialized: the producer thread takes tiles from a global counter
    (atom.add) and publishes each id in a shared word behind a named barrier; both sides
    run nk k-blocks a tile through a 3-stage ring whose stage counter runs across tiles."""
    pl = Plant(bug)
    k = Kernel("b29sched", reqntid=256)
    ta = k.tensormap_addr(k.param_tensormap("ta"))
    tb = k.tensormap_addr(k.param_tensormap("tb"))
    counter = k.ld_param(k.param_ptr("counter"))
    ntiles = k.ld_param(k.param(t.u32, "ntiles"))
    nk = k.ld_param(k.param(t.u32, "nk"))
    acc = k.fragment(t.f32, shape=(64, 64))
    r = Ring(k, 3)
    word = k.mov(k.shared_array(t.u32, 1, align=4, name="sched"))
    g = k.mov(0, type=t.u32)
    with k.for_range(0, ntiles):
        with k.if_(k.tid.x == 0):
            k.st(word, k.atom("add", counter, 1, type=t.u32, space="global"), type=t.u32,
                 space="shared")
        k.bar_sync(1, 256)
        tile = k.ld(word, type=t.u32, space="shared")
        k.bar_sync(1, 256)
        with k.if_(k.tid.x < 128):
            with k.if_(k.shr(k.tid.x, 5) == 0), k.if_(elect(k)):
                with k.for_range(0, nk) as kb:
                    s, ph = r.stage(g)
                    spin(k, r.bar(r.empty, s), k.xor(ph, 1))
                    load(k, r, s, k.add(k.mul(tile, nk), kb), ta, tb)
                    k.add(g, 1, dst=g)
        with k.else_():
            _tile_mainloop(k, r, acc, g, nk, bug, pl)
    k.ret()
    return k, pl.at, {"maps": MAPS}
