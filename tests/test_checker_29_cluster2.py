"""Checker, issue 29 (remote arrivals and bytes, continued): the bytes of an mbarrier phase
counted per CTA rank where the waiting thread's own path does not show them all (a producer
warp announces what the peer's st.async / red.async deliver; multicast loads only some ranks
issue; an expect_tx through mapa announcing a peer's bytes), and a peer's shared memory read
or written through the generic forms of mapa, ld and st. Each hazard is found with its id
at the user's line, written two ways; each corrected twin checks clean. The kernels are in
tests/cluster_kernels29b.py."""

from __future__ import annotations

import pytest

from ptxdsl import Module
from ptxdsl.checker import Hazard, check_kernel
from ptxdsl.testing import assemble_declared
from tests import cluster_kernels29b as CK
from tests.checker_kernels import clean


def _only(kl, hazard: Hazard, at: str, **ctx):
    """The kernel's findings are one `hazard`, at the line recorded as `at`."""
    k, lines = kl
    found = check_kernel(k, **ctx)
    assert [f.id for f in found] == [hazard.value], [f.format() for f in found]
    assert found[0].loc.line == lines[at], found[0].format()
    return found[0]


def _clean(kl, **ctx) -> None:
    """Zero findings, and the kernel is real: its PTX assembles for sm_90a."""
    k, _ = kl
    clean(k, **ctx)
    assert assemble_declared(Module([k], target="sm_90a", check=False).emit())[:4] == b"\x7fELF"


# -- a producer warp announces the bytes the peer's st.async / red.async deliver ---------------
@pytest.mark.parametrize("build", [lambda **kw: CK.exchange(**kw),
                                   lambda **kw: CK.exchange(ctas=4, **kw),
                                   lambda **kw: CK.push_ring(**kw)],
                         ids=["by-hand-2-CTA", "by-hand-4-CTA-ring", "MbarrierRing"])
def test_producer_warp_forgets_the_red_async_bytes(build):
    """Warp 0 announces 128 bytes (the st.async ones) on the barrier warp 1 waits on; the
    peer also sends 128 bytes of red.async to it: the wait passes before those land."""
    f = _only(build(tx=128), Hazard.EXPECT_TX_MISMATCH, "expect")
    assert "announces 128 bytes" in f.message and "deliver 256 bytes" in f.message
    assert [s.role for s in f.sites] == ["expect_tx", "peer store", "peer store", "wait"]
    _clean(build())


def test_producer_warp_counts_a_peer_twice():
    """Counting the peer's bytes wrongly (both CTAs' 256, as if this CTA received from
    both) leaves the phase open: it never completes."""
    f = _only(CK.exchange(tx=512), Hazard.EXPECT_TX_MISMATCH, "expect")
    assert "deliver 256 bytes: the phase never completes" in f.message


# -- multicast loads behind a branch on the rank -----------------------------------------------
@pytest.mark.parametrize("ctas,rank,announced,delivered", [(2, 1, 256, 512), (4, 2, 512, 0)])
def test_multicast_behind_a_rank_branch(ctas, rank, announced, delivered):
    """2 CTAs: CTA 0 multicasts its box to both, CTA 1 loads one of its own and announces
    one box (CTA 0's slice forgotten). 4 CTAs: ranks 0 and 1 multicast with the mask 0b0011,
    so ranks 2 and 3 get none of the two boxes they announce. The paths of the rank branch
    disagree where they join (once silent); counted per rank."""
    f = _only(CK.rank_multicast(ctas=ctas, wrong=True), Hazard.EXPECT_TX_MISMATCH, "expect",
              maps=CK.MAPS)
    assert f"in CTA {rank} of the {ctas}-CTA cluster" in f.message
    assert f"announces {announced} bytes" in f.message
    assert f"deliver {delivered} bytes" in f.message
    _clean(CK.rank_multicast(ctas=ctas), maps=CK.MAPS)


def test_multicast_behind_a_run_time_branch():
    """A run-time flag picks the order of CTA 0's two multicast boxes (the MoE producer's
    `if mpair`): counted once per arm, never both arms at once (1024 bytes, a false alarm).
    One box announced is wrong either way: found. An arm that loads one box only is right
    one way and wrong the other: a note."""
    _clean(CK.either_order(), maps=CK.MAPS)
    f = _only(CK.either_order(expect=CK.BOX), Hazard.EXPECT_TX_MISMATCH, "expect", maps=CK.MAPS)
    assert "announces 256 bytes" in f.message and "deliver 512 bytes" in f.message
    k, _ = CK.either_order(short=True)
    notes = check_kernel(k, maps=CK.MAPS, notes=True)
    assert [f.message.split(":")[0] for f in notes] == ["expect-tx"], [str(f) for f in notes]


# -- an expect_tx through mapa announcing a peer's bytes (the MoE sample's hand-out) -----------
@pytest.mark.parametrize("ring", [False, True], ids=["by-hand", "MbarrierRing"])
@pytest.mark.parametrize("rank_of_peer", ["const", "xor"])
def test_remote_expect_tx_forgets_the_item(ring, rank_of_peer):
    """Rank 0's producer announces the peer's phase through mapa with the loads' bytes but
    not the 4 bytes of the work item it st.async's with them: CTA 1's wait passes early."""
    build = lambda **kw: CK.hand_out(ring=ring, rank_of_peer=rank_of_peer, **kw)  # noqa: E731
    f = _only(build(item=False), Hazard.EXPECT_TX_MISMATCH, "expect", maps=CK.MAPS)
    assert "in CTA 1 of the 2-CTA cluster" in f.message
    assert "announces 512 bytes" in f.message and "deliver 516 bytes" in f.message
    _clean(build(), maps=CK.MAPS)


def test_a_peer_announces_the_bytes_this_cta_loads():
    """CTA 0 announces through mapa the box CTA 1 loads on its own barrier: CTA 1's path
    alone shows 0 bytes announced (once a false expect-tx-mismatch); counted per rank it is
    clean, and half the box announced is found at CTA 0's expect_tx."""
    _clean(CK.announced_by_peer())
    f = _only(CK.announced_by_peer(tx=128), Hazard.EXPECT_TX_MISMATCH, "expect")
    assert "in CTA 1 of the 2-CTA cluster" in f.message and "deliver 256 bytes" in f.message


# -- the generic forms of mapa, ld and st ------------------------------------------------------
@pytest.mark.parametrize("ctas", [2, 4], ids=["rank-1", "next-rank"])
def test_generic_mapa_ld_before_the_cluster_barrier(ctas):
    """A generic ld of a generic mapa's address reads the peer's shared memory: after a
    relaxed cluster barrier it is not ordered after the peer's write."""
    f = _only(CK.generic_gather(ctas=ctas, publish="relaxed"), Hazard.DSMEM_READ_UNSYNCED,
              "read")
    assert "partial" in f.message
    _clean(CK.generic_gather(ctas=ctas))


@pytest.mark.parametrize("ctas", [2, 4], ids=["rank-1", "next-rank"])
def test_generic_mapa_ld_without_the_final_cluster_barrier(ctas):
    f = _only(CK.generic_gather(ctas=ctas, final=False), Hazard.DSMEM_RELEASED_EARLY, "read")
    assert "may exit" in f.message


@pytest.mark.parametrize("ctas", [2, 4])
def test_generic_mapa_st_read_before_the_cluster_barrier(ctas):
    """The push spelling: a generic st through a generic mapa writes the peer's buffer,
    which reads it after a relaxed cluster barrier."""
    f = _only(CK.generic_gather(ctas=ctas, push=True, publish="relaxed"),
              Hazard.DSMEM_READ_UNSYNCED, "read")
    assert "write into it through mapa" in f.message
    _clean(CK.generic_gather(ctas=ctas, push=True))
