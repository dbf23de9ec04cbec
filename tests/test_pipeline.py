"""MbarrierRing (ptxdsl/pipeline.py) without a GPU: the PTX it emits, goldens of the GPU test
kernels, every refusal, bounded waits, expect_tx sizing, and what the hazard checker says about
rings (recorded for the checker's run-time-indexed ring support)."""

from __future__ import annotations

import re

import numpy as np
import pytest

from ptxdsl import Addr, BuildError, Kernel, Module, OperandError, debug, ptx, t
from ptxdsl.pipeline import MbarrierRing, box_bytes, tx_bytes
from ptxdsl.runtime.tensormap_desc import TiledDesc
from tests import pipeline_kernels as PK


def _body(k: Kernel) -> str:
    return "\n".join(s.render() for s in k.statements())


def _ring_kernel(stages=3, **kw) -> tuple[Kernel, MbarrierRing]:
    k = Kernel("r", reqntid=96)
    return k, MbarrierRing(k, stages, **kw)


# -- goldens: the GPU kernels ---------------------------------------------------------------------
@pytest.mark.parametrize("stages", PK.RING_STAGES)
def test_ring_kernel_golden(golden, stages):
    golden(PK.ring_module(stages), f"pipeline/ring_{stages}")


def test_dynamic_ring_kernel_golden(golden):
    golden(PK.ring_module(7, dynamic=True), "pipeline/ring_7_dyn")


# -- the emitted shape -----------------------------------------------------------------------------
def test_init_counts_fence_and_sync():
    k, ring = _ring_kernel(3, full_count=1, empty_count=4)
    ring.init()
    body = _body(k)
    assert body.count("mbarrier.init.shared::cta.b64 [ring_full") == 3
    assert re.findall(r"mbarrier\.init\.shared::cta\.b64 \[ring_empty(?:\+\d+)?\], (\d+);",
                      body) == ["4", "4", "4"]
    assert "[ring_empty+16], 4;" in body and "[ring_full+16], 1;" in body
    assert body.index("fence.mbarrier_init.release.cluster;") < body.index("bar.sync 0;")
    assert ".shared .align 8 .b64 ring_full[3];" in Module([k]).emit()


def test_init_without_sync_and_with_own_election():
    k, ring = _ring_kernel(2)
    ring.init(elect=k.tid.x == 5, sync=False)
    body = _body(k)
    assert "setp.eq.u32 %p1, %r1, 5;" in body and "bar.sync" not in body


def test_views_start_at_stage_0_producer_parity_1():
    k, ring = _ring_kernel(2)
    p, c = ring.producer(), ring.consumer()
    body = _body(k)
    for line in ("mov.u32 %ring_p_stage, 0;", "mov.u32 %ring_p_phase, 1;",
                 "mov.u32 %ring_c_stage, 0;", "mov.u32 %ring_c_phase, 0;"):
        assert line in body
    assert (p.stage.name, c.phase.name) == ("ring_p_stage", "ring_c_phase")


def test_waits_use_the_current_stage_and_phase():
    k, ring = _ring_kernel(4)
    p, c = ring.producer(), ring.consumer()
    p.wait_empty()
    c.wait_full()
    body = _body(k)
    assert re.search(r"shl\.b32 (%r\d+), %ring_p_stage, 3;\n\tadd\.u32 (%r\d+), "
                     r"%ring_empty_base, \1;\n\$L__wait_\d+:|"
                     r"shl\.b32 (%r\d+), %ring_p_stage, 3;\nadd\.u32 (%r\d+), %ring_empty_base, "
                     r"\3;", body)
    assert re.search(r"mbarrier\.try_wait\.parity\.shared::cta\.b64 %p\d+, \[%r\d+\], "
                     r"%ring_p_phase;", body)
    assert re.search(r"mbarrier\.try_wait\.parity\.shared::cta\.b64 %p\d+, \[%r\d+\], "
                     r"%ring_c_phase;", body)


def test_advance_wraps_and_flips_without_a_branch():
    k, ring = _ring_kernel(7)
    c = ring.consumer()
    c.advance()
    lines = _body(k).splitlines()[-4:]
    assert lines[0] == "add.u32 %ring_c_stage, %ring_c_stage, 1;"
    assert re.fullmatch(r"setp\.eq\.u32 (%p\d+), %ring_c_stage, 7;", lines[1])
    p = lines[1].split()[1].rstrip(",")
    assert lines[2:] == [f"@{p} mov.u32 %ring_c_stage, 0;",
                         f"@{p} xor.b32 %ring_c_phase, %ring_c_phase, 1;"]


def test_producer_signals_full_barrier():
    k, ring = _ring_kernel(2)
    p = ring.producer()
    p.arrive_expect_tx(2048)
    p.expect_tx(64)
    p.arrive()
    body = _body(k)
    assert re.search(r"mbarrier\.arrive\.expect_tx\.release\.cta\.shared::cta\.b64 _, "
                     r"\[%r\d+\], 2048;", body)
    assert re.search(r"mbarrier\.expect_tx\.relaxed\.cta\.shared::cta\.b64 \[%r\d+\], 64;", body)
    assert re.search(r"mbarrier\.arrive\.shared::cta\.b64 _, \[%r\d+\];", body)
    assert len(re.findall(r"add\.u32 %r\d+, %ring_full_base", body)) == 3
    assert not re.search(r"add\.u32 %r\d+, %ring_empty_base", body)


def test_consumer_releases_local_empty_barrier():
    k, ring = _ring_kernel(2)
    ring.consumer().release()
    body = _body(k)
    assert re.search(r"add\.u32 (%r\d+), %ring_empty_base, %r\d+;\n"
                     r"mbarrier\.arrive\.shared::cta\.b64 _, \[\1\];", body)


def test_slot_address():
    k, ring = _ring_kernel(3)
    tiles = k.shared_array(t.b8, 3 * 512, align=128, name="tiles")
    ring.consumer().slot(tiles, 512)
    assert re.search(r"mov\.u32 (%r\d+), tiles;\nmul\.lo\.u32 (%r\d+), %ring_c_stage, 512;\n"
                     r"add\.u32 %r\d+, \1, \2;", _body(k))


def test_dynamic_storage():
    k = Kernel("r")
    dyn = k.extern_shared("dyn", align=1024)
    ring = MbarrierRing(k, 2, storage=Addr(dyn, 4096), empty_count=3)
    ring.init(sync=False)
    body = _body(k)
    assert re.search(r"mov\.u32 (%r\d+), dyn;\nadd\.u32 %ring_full_base, \1, 4096;\n"
                     r"add\.u32 %ring_empty_base, \1, 4112;", body)
    assert "mbarrier.init.shared::cta.b64 [dyn+4104], 1;" in body
    assert "mbarrier.init.shared::cta.b64 [dyn+4120], 3;" in body
    Module([k]).assemble()


def test_static_storage_of_a_given_array():
    k = Kernel("r")
    bars = k.shared_array(t.b64, 8, align=8, name="bars")
    ring = MbarrierRing(k, 4, storage=bars)
    assert ring.full_at(3) == Addr(bars, 24) and ring.empty_at(0) == Addr(bars, 32)


def test_bounded_waits_bound_ring_waits():
    k, ring = _ring_kernel(2)
    debug.bounded_waits(k, timeout_ns=1_000_000)
    ring.consumer().wait_full()
    ring.producer().wait_empty()
    body = _body(k)
    assert body.count("trap;") == 2 and body.count("%globaltimer") >= 4
    debug.module([k]).assemble()


def test_a_ring_assembles_at_its_inferred_target():
    mod = PK.ring_module(4)
    assert ".version 8.0\n.target sm_90\n" in mod.emit()
    mod.assemble()


# -- expect_tx sizes ----------------------------------------------------------------------------
def test_tx_bytes_from_maps_boxes_and_multicast():
    desc = TiledDesc.from_numpy_order(0x10000, (64, 32), np.float16, (8, 32))
    assert tx_bytes(desc) == 512
    assert tx_bytes(desc, ((4, 16), t.f32)) == 512 + 256
    assert tx_bytes(((4, 32), np.uint32), multicast=4) == 2048
    assert box_bytes((2, 3, 16), "uint8") == 96 and box_bytes(16, t.b64) == 128

    class Map:                        # a runtime TensorMap carries its TiledDesc
        pass
    m = Map()
    m.desc = desc
    assert tx_bytes(m, multicast=2) == 1024


@pytest.mark.parametrize("args, kw, words", [
    (("map",), {}, "a TensorMap, a TiledDesc or a .box, dtype. pair"),
    ((((8, 0), t.u32),), {}, "positive box dimensions"),
    ((((8, 8), t.pred),), {}, "a type of whole bytes"),
    ((((8, 8), "nonsense"),), {}, "a ptxdsl type .t.f32. or a numpy dtype"),
    ((((8, 8), t.u32),), {"multicast": 0}, r"a CTA count in \[1, 16\]"),
    ((((256, 256), t.u32),), {"multicast": 4}, r"at most 1048575 bytes per phase"),
])
def test_tx_bytes_refusals(args, kw, words):
    with pytest.raises(OperandError, match=words):
        tx_bytes(*args, **kw)


def test_tx_bytes_of_nothing():
    with pytest.raises(BuildError, match="give at least one tensor map"):
        tx_bytes()


# -- refusals -----------------------------------------------------------------------------------
@pytest.mark.parametrize("kw, words", [
    ({"stages": 0}, r"stages.*an integer in \[1, 64\]"),
    ({"stages": 65}, r"stages.*an integer in \[1, 64\]"),
    ({"stages": True}, r"stages.*an integer"),
    ({"stages": 2, "empty_count": 0}, r"empty_count.*an integer in \[1,"),
    ({"stages": 2, "full_count": 1 << 20}, r"full_count.*an integer in \[1, 1048575\]"),
    ({"stages": 2, "peers": 17}, r"peers.*an integer in \[1, 16\]"),
    ({"stages": 2, "peers": 16, "empty_count": 1 << 17}, r"empty_count.*\[1, 65535\]"),
])
def test_ring_refusals(kw, words):
    with pytest.raises(OperandError, match=words):
        MbarrierRing(Kernel("r"), **kw)


def test_peers_beyond_the_kernels_cluster():
    with pytest.raises(OperandError, match=r"at most the kernel's 2 CTAs per cluster"):
        MbarrierRing(Kernel("r", reqnctapercluster=2), 2, peers=4)


@pytest.mark.parametrize("make, words", [
    (lambda k: Addr(k.extern_shared("d"), 4), "an 8-byte aligned address"),
    (lambda k: k.extern_shared("d", align=4), "an 8-byte aligned address"),
    (lambda k: k.shared_array(t.b64, 3, align=8, name="b"), "32 bytes from offset 0"),
    (lambda k: k.param(t.u64, "p"), "a shared-memory symbol"),
])
def test_storage_refusals(make, words):
    k = Kernel("r")
    with pytest.raises(OperandError, match=words):
        MbarrierRing(k, 2, storage=make(k))


def test_view_refusals():
    k, ring = _ring_kernel(2)
    c = ring.consumer()
    with pytest.raises(OperandError, match="a positive byte count"):
        c.slot(k.shared_array(t.b8, 64, name="s"), 0)
    with pytest.raises(OperandError, match="a shared symbol or a 32-bit shared address"):
        c.slot(k.mov(0, type=t.u64), 64)
    with pytest.raises(OperandError, match=r"an int in \[0, 2\)"):
        ring.full_at(2)
    with pytest.raises(OperandError, match="at least one cluster rank"):
        c.release(ctas=[])
    with pytest.raises(OperandError, match="'cluster' or 'cta'"):
        c.release(ctas=[0], scope="gpu")
    with pytest.raises(OperandError, match=r"'ctas': expected cluster ranks of the ring's "
                       r"CTAs, in \[0, 1\) .*peers=N\)\), got 1"):
        c.release(ctas=[1])      # a ring of one CTA counts its own consumers only


@pytest.mark.parametrize("scope", ["cluster", "cta"])
def test_remote_release_scope(scope):
    """release(scope=) picks the remote arrive's scope; 'cta' is the form without the
    GPU-wide fence ptxas puts before a .release.cluster arrive."""
    k = Kernel("rel", reqntid=64, reqnctapercluster=(2, 1, 1))
    ring = MbarrierRing(k, 2, peers=2)
    ring.consumer().release(scope=scope)
    body = _body(k)
    arrives = re.findall(r"mbarrier\.arrive\.release\.(\w+)\.shared::cluster\.b64 _, "
                         r"\[%r\d+\];", body)
    assert arrives == [scope, scope]


# -- the hazard checker on rings ------------------------------------------------------------------
# What the checker reports for the correct ring kernels (recorded for the checker's run-time
# indexed ring support: a correct ring must stay free of findings).
RING_FINDINGS: dict[int, list[str]] = {n: [] for n in PK.RING_STAGES}


@pytest.mark.parametrize("stages", PK.RING_STAGES)
@pytest.mark.parametrize("dynamic", [False, True])
def test_checker_findings_on_correct_rings(stages, dynamic):
    found = [f.hazard.value for f in PK.build_ring(stages, dynamic=dynamic).check()]
    assert found == RING_FINDINGS[stages]


def _ring_with_expect_tx(nbytes: int) -> Kernel:
    k = Kernel("bad_tx", reqntid=64)
    tm = k.param_tensormap("tmap")
    tiles = k.shared_array(t.b8, 4 * PK.TILE_BYTES, align=128, name="tiles")
    ring = MbarrierRing(k, 4)
    ring.init()
    with k.if_(k.tid.x == 0):
        tmap = k.tensormap_addr(tm)
        p = ring.producer()
        with k.for_range(0, 100) as i:
            p.wait_empty()
            p.arrive_expect_tx(nbytes)
            ptx.cp_async_bulk_tensor(k, "shared::cluster", "global",
                                     p.slot(tiles, PK.TILE_BYTES), tmap, (0, i),
                                     p.full_barrier())
            p.advance()
    return k


_MAP = TiledDesc.from_numpy_order(0x10000, (800, PK.COLS), np.uint32, (PK.ROWS, PK.COLS))


def test_checker_is_silent_on_a_ring_with_the_right_expect_tx():
    assert _ring_with_expect_tx(PK.TILE_BYTES).check(maps={"tmap": _MAP}) == []


def test_checker_finds_a_wrong_expect_tx_on_a_ring():
    # Run-time indexed barriers (full_base + (stage << 3)): the producer's announced and
    # delivered bytes are compared at the end of each iteration.
    found = _ring_with_expect_tx(PK.TILE_BYTES // 2).check(maps={"tmap": _MAP})
    assert [f.hazard.value for f in found] == ["expect-tx-mismatch"]
    assert found[0].loc.line == _ring_with_expect_tx.__code__.co_firstlineno + 11


# -- bad-input probes: each refused by the helper, at the caller's line ------------------------
def _cluster_ring() -> tuple[Kernel, MbarrierRing]:
    k = Kernel("probe", maxntid=(128, 1, 1), reqnctapercluster=(2, 1, 1))
    return k, MbarrierRing(k, 2, peers=2)


@pytest.mark.parametrize("call, operand, expected", [
    (lambda k, r: MbarrierRing(k, 2, name="neg", storage=Addr(k.shared_array(t.b64, 8), -8)),
     "storage", "an address at or after the symbol's start"),
    (lambda k, r: r.consumer().slot(k.reg(t.f32), 1024), "buffer", "a shared symbol"),
    (lambda k, r: r.init(elect=k.reg(t.u32)), "elect", "a predicate of kernel 'probe'"),
    (lambda k, r: r.init(elect=Kernel("other").reg(t.pred)), "elect",
     "a predicate of kernel 'probe'"),
    (lambda k, r: r.consumer().release(ctas=["0"]), "ctas", "cluster ranks: ints or 32-bit"),
    (lambda k, r: r.consumer().release(ctas=[0.0]), "ctas", "cluster ranks: ints or 32-bit"),
    (lambda k, r: r.consumer().release(ctas=[k.reg(t.u64)]), "ctas",
     "cluster ranks: ints or 32-bit"),
    # a float register as a byte count: ptxas's "Arguments mismatch" otherwise
    (lambda k, r: r.producer().expect_tx(k.reg(t.f32)), "txCount",
     "a 32-bit integer register or an immediate count"),
    (lambda k, r: r.producer().arrive_expect_tx(k.reg(t.f32)), "txCount",
     "a 32-bit integer register or an immediate count"),
])
def test_probe_refusals_name_the_operand(call, operand, expected):
    k, ring = _cluster_ring()
    with pytest.raises(OperandError, match=f"operand '{operand}': expected {expected}") as e:
        call(k, ring)
    assert e.value.loc.file == __file__


def test_ranks_and_counts_that_fit_still_build():
    k, ring = _cluster_ring()
    ring.init(elect=~(k.tid.x != 0))
    p, c = ring.producer(), ring.consumer()
    p.expect_tx(k.mov(1024, type=t.u32))
    c.release(ctas=[np.int64(1), k.mov(0, type=t.u32)])
    assert "mapa.shared::cluster.u32" in _body(k)
