"""Checker (issue 29): rings whose stage and phase registers are advanced in place
(`MbarrierRing`, selp-advanced stages), waits on another ring's barriers in one dynamic
buffer, producer and consumer that disagree on the stage count, and a producer's first
empty-wait at the wrong parity with the usual tail release. Each mistake is written with
`MbarrierRing` and by hand (id and Python line asserted), each with a clean twin."""

from __future__ import annotations

import pytest

from ptxdsl import Addr, Kernel, ptx, t
from ptxdsl.checker import Hazard, check_kernel
from ptxdsl.pipeline import MbarrierRing
from tests import ring_kernels
from tests.checker_kernels import clean, here, only
from tests.ring_kernels import MAPS, STAGE, L, S, WsRing, only_at


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


def _release_previous(g: WsRing, peeled: bool = False) -> None:
    """The right consumer: after wait_group 1 the previous stage's wgmma is done, so that
    stage is released (under `kb > 0`, or from a loop after a peeled first wgmma, as
    samples/gemm_hopper.py does); the last one after the loop. With MbarrierRing a second
    view trails the reading one by a stage; by hand, `(kb + S - 1) & (S - 1)`."""
    k = g.k
    read, free = g.cursor("consumer"), g.cursor("consumer")
    if peeled:
        read.at(k.mov(0, type=t.u32))
        read.wait()
        g.mma(read.slot(), first=True)
        read.advance()
    with k.for_range(1 if peeled else 0, g.kblocks) as kb:
        read.at(kb)
        read.wait()
        g.mma(read.slot())
        read.advance()
        ptx.wgmma_wait_group(k, 1)
        with k.if_(kb > 0):
            free.at(k.add(kb, S - 1))
            free.release()
            free.advance()
    ptx.wgmma_wait_group(k, 0)
    free.at(k.add(g.kblocks, S - 1))
    free.release()


@pytest.mark.parametrize("style", ["ring", "hand"])
def test_current_stage_released_after_wait_group_one(style):
    g = WsRing(style, _release_current)
    f = only_at(check_kernel(g.k, maps=MAPS), Hazard.WGMMA_SMEM_RELEASED, g.result)
    assert "reads the stage this arrive releases" in f.message
    clean(WsRing(style, _release_previous).k, maps=MAPS)
    clean(WsRing(style, lambda g: _release_previous(g, peeled=True)).k, maps=MAPS)


def test_trailing_view_that_never_trails():
    """Two MbarrierRing views, `free` meant to trail `read` by the stage in flight; without
    the peeled first wgmma (or `kb > 0`) they step in lockstep, so after wait_group 1 `free`
    releases the stage just issued, from the first trip (where nothing has retired) on."""
    def consumer(g: WsRing, peeled: bool) -> int:
        k = g.k
        read, free = g.ring.consumer(), g.ring.consumer()
        if peeled:
            read.wait_full()
            g.mma(read.slot(g.tiles, STAGE), first=True)
            read.advance()
        with k.for_range(1 if peeled else 0, g.kblocks):
            read.wait_full()
            g.mma(read.slot(g.tiles, STAGE))
            read.advance()
            ptx.wgmma_wait_group(k, 1)
            with k.if_(k.and_(k.tid.x, 127) == 0):
                line = here() + 1
                free.release()
            free.advance()
        ptx.wgmma_wait_group(k, 0)
        with k.if_(k.and_(k.tid.x, 127) == 0):
            free.release()                      # the last stage
        return line

    g = WsRing("ring", lambda g: consumer(g, False))
    f = only(check_kernel(g.k, maps=MAPS), Hazard.WGMMA_SMEM_RELEASED, g.result)
    assert "reads the stage this arrive releases" in f.message
    clean(WsRing("ring", lambda g: consumer(g, True)).k, maps=MAPS)


def _dequantising(on_stage: bool, same_buffer: bool):
    """A W8A16-style consumer: it reads its stage with ld.shared, writes the values into a
    tile of its own with st.shared, runs the wgmma on that tile (one group kept in flight)
    and releases the stage at once: the wgmma does not read it. The tile is its own array or
    lies after the ring's stages in the same buffer. The mistake (`on_stage`): the wgmma
    reads the stage itself, which the release hands back while it runs."""
    def consumer(g: WsRing) -> int:
        k = g.k
        base = k.add(k.mov(g.tiles), S * STAGE) if same_buffer else \
            k.mov(k.shared_array(t.b8, 2 * L.nbytes, align=1024, name="deq"))
        c = g.ring.consumer()
        lane16 = k.shl(k.and_(k.tid.x, 127), 4)
        with k.for_range(0, g.kblocks) as kb:
            c.wait_full()
            slot = c.slot(g.tiles, STAGE)
            v = k.ld(k.add(slot, lane16), type=t.u32, space="shared::cta")
            tile = k.add(base, k.mul(k.and_(kb, 1), L.nbytes, type=t.u32))
            k.st(k.add(tile, lane16), k.mul(v, 3, type=t.u32), type=t.u32, space="shared::cta")
            ptx.fence_proxy_async(k, "shared::cta")
            k.bar_sync(1, 128)
            g.mma(slot if on_stage else tile)
            with k.if_(k.and_(k.tid.x, 127) == 0):
                line = here() + 1
                c.release()
            c.advance()
            ptx.wgmma_wait_group(k, 1)
        ptx.wgmma_wait_group(k, 0)
        return line
    return consumer


@pytest.mark.parametrize("same_buffer", [False, True])
def test_release_of_a_stage_the_wgmma_does_not_read(same_buffer):
    extra = 2 * L.nbytes if same_buffer else 0
    g = WsRing("ring", _dequantising(True, same_buffer), extra=extra)
    f = only(check_kernel(g.k, maps=MAPS), Hazard.WGMMA_SMEM_RELEASED, g.result)
    assert "may still read it" in f.message
    clean(WsRing("ring", _dequantising(False, same_buffer), extra=extra).k, maps=MAPS)


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


def test_slot_taken_before_the_advance_is_the_waited_stage():
    """A consumer that takes the stage's slot and empty barrier, advances, then reads and
    releases: the addresses hold the stage before the advance, which it waited for."""
    def consumer(g: WsRing) -> None:
        k = g.k
        c = g.ring.consumer()
        with k.for_range(0, g.kblocks):
            c.wait_full()
            slot, empty = c.slot(g.tiles, STAGE), c.empty_barrier()
            c.advance()
            k.ldmatrix(k.add(slot, k.shl(k.and_(k.tid.x, 31), 4)), 4)
            g.mma(slot)
            ptx.wgmma_wait_group(k, 0)
            with k.if_(k.and_(k.tid.x, 127) == 0):
                ptx.mbarrier_arrive(k, empty, dst="_")
    clean(WsRing("ring", consumer).k, maps=MAPS)


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


# -- 3: producer and consumer count the ring's stages differently -------------------------------
def _consume(n: int):
    """A consumer walking the ring modulo n (the producer's is S = 4): kb % 3 against the
    producer's kb & 3 by hand; against an MbarrierRing of 4 stages, by hand modulo 3."""
    def consumer(g: WsRing) -> int:
        k = g.k
        c = g.cursor("consumer", n)
        with k.for_range(0, g.kblocks) as kb:
            c.at(kb)
            line = here() + 1
            c.wait()
            g.mma(c.slot())
            ptx.wgmma_wait_group(k, 0)
            c.release()
            c.advance()
        return line
    return consumer


@pytest.mark.parametrize("style", ["ring", "hand"])
def test_consumer_walks_the_ring_modulo_another_count(style):
    g = WsRing(style, _consume(3))
    f = only_at(check_kernel(g.k, maps=MAPS), Hazard.RING_STAGE_MISMATCH, g.result)
    assert "modulo 3, but the ring has 4 stages" in f.message
    clean(WsRing(style, _consume(S)).k, maps=MAPS)


def test_ldmatrix_reads_the_ring_buffer_modulo_another_count():
    """The barriers agree (kb & 3), the buffer read does not: tiles[kb % 3]."""
    def consumer(g: WsRing, n: int) -> int:
        k = g.k
        c, r = g.cursor("consumer"), g.cursor("consumer", n)
        with k.for_range(0, g.kblocks) as kb:
            c.at(kb)
            r.at(kb)
            c.wait()
            slot = r.slot()
            line = here() + 1
            k.ldmatrix(slot, 4)
            c.release()
        return line

    g = WsRing("hand", lambda g: consumer(g, 3))
    f = only(check_kernel(g.k, maps=MAPS), Hazard.RING_STAGE_MISMATCH, g.result)
    assert "ring of buffers" in f.message
    clean(WsRing("hand", lambda g: consumer(g, S)).k, maps=MAPS)


# -- 4: the producer's first empty-wait at parity 0, with a tail release after the loop ------
@pytest.mark.parametrize("style", ["ring", "hand"])
def test_producer_first_empty_wait_at_parity_zero_with_a_tail_release(style):
    """The consumer releases the previous stage in the loop and the last one after it (the
    loop may run no trip); the producer's first wait asks for parity 0, which a fresh empty
    barrier completes only when the consumers release it, after data it has yet to load."""
    g = WsRing(style, _release_previous, producer_start=0)
    f = check_kernel(g.k, maps=MAPS)
    assert [x.id for x in f] == [Hazard.WAIT_PARITY_FIRST_PHASE.value], [x.format() for x in f]
    assert "hangs" in f[0].message
    loc = f[0].loc
    assert (loc.file, loc.line) == (ring_kernels.__file__, g.wait_line) or \
        (loc.caller.file, loc.caller.line) == (ring_kernels.__file__, g.wait_line)
    clean(WsRing(style, _release_previous, producer_start=1).k, maps=MAPS)


# -- the first trip's parity through an advance that runs before the wait ----------------------
@pytest.mark.parametrize("style", ["ring", "selp"])
def test_advance_before_the_first_wait_flips_to_the_wrong_parity(style):
    """The consumer advances at the top of each trip, from stage S-1, so its first advance
    wraps to stage 0 and flips the phase: it must start at parity 1 to wait for parity 0.
    Starting at 0 (the mistake), the first wait asks for parity 1 and passes before the
    data lands. The first trip's parity is followed through MbarrierRing's guarded wrap and
    through a selp-advanced stage and phase."""
    def build(start: int) -> tuple[Kernel, int]:
        def consumer(g: WsRing) -> int:
            k = g.k
            if style == "ring":
                c = g.ring.consumer()
                k.mov(S - 1, dst=c.stage)
                k.mov(start, dst=c.phase)
                stage, advance = c.stage, c.advance
                wait = c.wait_full
            else:
                stage, ph = k.mov(S - 1, type=t.u32), k.mov(start, type=t.b32)

                def advance():
                    nxt = k.add(stage, 1, type=t.u32)
                    wrap = k.setp("eq", nxt, S, type=t.u32)
                    k.selp(0, nxt, wrap, dst=stage)
                    k.selp(k.xor(ph, 1, type=t.b32), ph, wrap, dst=ph)

                def wait():
                    ptx.mbarrier_wait(k, k.add(k.mov(g.full), k.shl(stage, 3)), ph)
            with k.for_range(0, g.kblocks):
                advance()
                line = here() + 1
                wait()
                k.ldmatrix(k.add(k.mov(g.tiles), k.mul(stage, STAGE, type=t.u32)), 4)
                with k.if_(k.and_(k.tid.x, 127) == 0):
                    ptx.mbarrier_arrive(k, k.add(k.mov(g.empty), k.shl(stage, 3)), dst="_")
            return line
        g = WsRing("ring" if style == "ring" else "hand", consumer)
        return g.k, g.result

    k, line = build(0)
    f = only_at(check_kernel(k, maps=MAPS), Hazard.WAIT_PARITY_FIRST_PHASE, line)
    assert "passes at once" in f.message
    clean(build(1)[0], maps=MAPS)


# -- 2: a wait on the other ring's barrier, both rings in one dynamic buffer -------------------
KV = 2            # stages of each ring
TILE = 8192       # one K or V tile
BARS = 2 * KV * TILE                     # the barriers after the K and V tiles


def _kv(style: str, wrong_ring: bool) -> tuple[Kernel, int]:
    """Warp 0 loads K and V tiles into two rings of one extern buffer (K tiles, V tiles,
    then the barriers: full/empty of K, full/empty of V); warpgroup 1 reads K after waiting
    on K's full barrier, or (the mistake) on V's. `style`: MbarrierRing views ("ring"), by
    hand ("hand"), or MbarrierRings with their own static barrier arrays ("ring-static",
    static tiles too). Returns the kernel and the K read's line."""
    k = Kernel("kv", reqntid=256)
    tk = k.tensormap_addr(k.param_tensormap("map_k"))
    tv = k.tensormap_addr(k.param_tensormap("map_v"))
    n = k.ld_param(k.param(t.u32, "n"))
    # (static barriers go with static tiles: an extern buffer after them loses its alignment)
    dyn = k.shared_array(t.b8, 2 * KV * TILE, align=1024, name="tiles") \
        if style == "ring-static" else k.extern_shared("dyn", align=1024)
    lane16 = k.shl(k.and_(k.tid.x, 31), 4)
    if style.startswith("ring"):
        static = style == "ring-static"          # each ring's barriers in their own arrays
        rk = MbarrierRing(k, KV, storage=None if static else Addr(dyn, BARS), name="k")
        rv = MbarrierRing(k, KV, storage=None if static else Addr(dyn, BARS + 16 * KV),
                          name="v")
        rk.init(sync=False)
        rv.init()
    else:
        with k.if_(k.tid.x == 0):
            for off in range(0, 32 * KV, 8):
                ptx.mbarrier_init(k, Addr(dyn, BARS + off), 1)
            ptx.fence_mbarrier_init(k)
        k.bar_sync(0)

    def bar(ring: int, which: int, s):          # ring 0: K, 1: V; which 0: full, 1: empty
        return k.add(k.mov(dyn), k.add(k.shl(s, 3), BARS + 16 * KV * ring + 8 * KV * which))

    def tile(ring: int, s):
        return k.add(k.mov(dyn), k.add(k.mul(s, TILE, type=t.u32), KV * TILE * ring))

    with k.if_(k.shr(k.tid.x, 5) == 0):
        with k.if_(k.tid.x == 0):
            views = [rk.producer(), rv.producer()] if style != "hand" else None
            with k.for_range(0, n) as j:
                s = k.and_(j, KV - 1, type=t.b32)
                ph = k.xor(k.and_(k.shr(j, 1), 1, type=t.b32), 1, type=t.b32)
                for r, tmap in ((0, tk), (1, tv)):
                    if views is not None:
                        p = views[r]
                        p.wait_empty()
                        full, dst = p.full_barrier(), k.add(p.slot(dyn, TILE), KV * TILE * r)
                    else:
                        ptx.mbarrier_wait(k, bar(r, 1, s), ph)
                        full, dst = bar(r, 0, s), tile(r, s)
                    ptx.mbarrier_arrive_expect_tx(k, "release", "cta", "shared::cta", full,
                                                  TILE, dst="_")
                    ptx.cp_async_bulk_tensor(k, "shared::cluster", "global", dst, tmap,
                                             (0, j), full)
                if views is not None:
                    views[0].advance()
                    views[1].advance()
    with k.if_(k.shr(k.tid.x, 7) == 1):
        views = [rk.consumer(), rv.consumer()] if style != "hand" else None
        with k.for_range(0, n) as j:
            s = k.and_(j, KV - 1, type=t.b32)
            ph = k.and_(k.shr(j, 1), 1, type=t.b32)

            def wait(r: int) -> None:
                if views is not None:
                    views[r].wait_full()
                else:
                    ptx.mbarrier_wait(k, bar(r, 0, s), ph)

            def at(r: int):
                if views is not None:
                    return k.add(views[r].slot(dyn, TILE), KV * TILE * r + 0)
                return tile(r, s)

            wait(1 if wrong_ring else 0)                # QK^T: K must have landed
            kt = at(0)
            line = here() + 1
            k.ldmatrix(k.add(kt, lane16), 4)
            wait(1)
            k.ldmatrix(k.add(at(1), lane16), 4)         # PV
            with k.if_(k.and_(k.tid.x, 127) == 0):
                for r in (0, 1):
                    if views is not None:
                        views[r].release()
                    else:
                        ptx.mbarrier_arrive(k, bar(r, 1, s), dst="_")
            if views is not None:
                views[0].advance()
                views[1].advance()
    k.ret()
    return k, line


KV_MAPS = {"map_k": {"box_bytes": TILE}, "map_v": {"box_bytes": TILE}}


@pytest.mark.parametrize("style", ["ring", "hand", "ring-static"])
def test_k_read_after_waiting_on_the_v_ring(style):
    k, line = _kv(style, wrong_ring=True)
    f = only(check_kernel(k, maps=KV_MAPS), Hazard.WAIT_WRONG_BARRIER, line)
    assert "another stage or ring" in f.message
    clean(_kv(style, wrong_ring=False)[0], maps=KV_MAPS)


# -- a rotated loop: the next stage's wait at the end of the previous trip ---------------------
@pytest.mark.parametrize("style", ["ring", "hand"])
def test_rotated_wait_under_a_condition(style):
    """All 128 threads consume (thread 0 also refills): stage 0 is waited before the loop,
    each later stage at the end of the trip before, under `if j + 1 < n` (the last trip has
    no next stage). The read at the top of the loop is covered on every path, by the wait
    before the loop on the first trip and by the conditional one after. With MbarrierRing's
    view both waits are on its stage register: clean. By hand, the first on the constant
    `full + 0` and the later ones on `full + 8 * ((j + 1) & 1)`: not judged (a note)."""
    k = Kernel("rotated", reqntid=128)
    tmap = k.tensormap_addr(k.param_tensormap("map_a"))
    n = k.ld_param(k.param(t.u32, "n"))
    tiles = k.shared_array(t.b8, 2 * STAGE, align=1024, name="tiles")
    ring = MbarrierRing(k, 2)
    ring.init()
    p, c = ring.producer(), ring.consumer()
    first = k.tid.x == 0

    def refill(j) -> None:
        with k.if_(first):
            p.wait_empty()
            p.arrive_expect_tx(L.nbytes)
            ptx.cp_async_bulk_tensor(k, "shared::cluster", "global", p.slot(tiles, STAGE),
                                     tmap, (0, j), p.full_barrier())
        p.advance()

    def at(base, stride, j):
        return k.add(k.mov(base), k.mul(k.and_(j, 1, type=t.b32), stride, type=t.u32))

    refill(0)
    refill(1)
    if style == "ring":
        c.wait_full()
    else:
        ptx.mbarrier_wait(k, Addr(ring.full, 0), 0)
    with k.for_range(0, n) as j:
        slot = c.slot(tiles, STAGE) if style == "ring" else at(tiles, STAGE, j)
        line = here() + 1
        k.ldmatrix(k.add(slot, k.shl(k.and_(k.tid.x, 31), 4)), 4)
        k.bar_sync(0)
        with k.if_(first):
            if style == "ring":
                c.release()
            else:
                ptx.mbarrier_arrive(k, at(ring.empty, 8, j), dst="_")
        c.advance()
        refill(k.add(j, 2))
        nxt = k.add(j, 1)
        with k.if_(nxt < n):
            if style == "ring":
                c.wait_full()
            else:
                ptx.mbarrier_wait(k, at(ring.full, 8, nxt),
                                  k.and_(k.shr(nxt, 1), 1, type=t.b32))
    k.ret()
    found = check_kernel(k, maps={"map_a": {"box_bytes": L.nbytes}}, notes=True)
    assert [f.id for f in found if f.severity.value != "note"] == [], [f.format() for f in found]
    note = [f for f in found if "runs on some paths only" in f.message]
    assert [f.loc.line for f in note] == ([line] if style == "hand" else []), \
        [f.format() for f in found]
