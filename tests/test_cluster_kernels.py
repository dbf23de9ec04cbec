"""The cluster and cache-hint GPU test kernels without a GPU: goldens (assembled at their
declared targets by test_goldens_assemble), the PTX shape of a cluster ring, and what the hazard
checker reports on these correct kernels (recorded for the checker's ring/cluster work)."""

from __future__ import annotations

import re

import pytest

from ptxdsl import Kernel, OperandError
from ptxdsl.pipeline import MbarrierRing
from tests import pipeline_kernels as PK


@pytest.mark.parametrize("ctas", PK.CLUSTER_SIZES)
def test_multicast_golden(golden, ctas):
    golden(PK.multicast_module(ctas), f"pipeline/multicast_{ctas}")


@pytest.mark.parametrize("ctas", PK.CLUSTER_SIZES)
def test_dsmem_golden(golden, ctas):
    golden(PK.module(PK.build_dsmem(ctas)), f"pipeline/dsmem_{ctas}")


def test_l2_hint_golden(golden):
    golden(PK.module(PK.build_l2_hint()), "pipeline/l2_hint")


def test_cluster_ring_shape():
    text = PK.multicast_module(4).emit()
    # empty barriers count 2 consumer warps x 4 CTAs; init ends with a cluster barrier
    assert text.count("mbarrier.init.shared::cta.b64 [ring_empty") == 2
    assert "[ring_empty+8], 8;" in text and "[ring_full+8], 1;" in text
    assert re.search(r"fence\.mbarrier_init\.release\.cluster;\n\$L__else_1:\n\t"
                     r"barrier\.cluster\.arrive\.release;\n\tbarrier\.cluster\.wait\.acquire;",
                     text)
    # each consumer warp releases the stage on all 4 CTAs through mapa
    for rank in range(4):
        assert re.search(rf"mapa\.shared::cluster\.u32 (%r\d+), %r\d+, {rank};\n\t"
                         r"mbarrier\.arrive\.release\.cluster\.shared::cluster\.b64 _, \[\1\];",
                         text)
    assert text.count("try_wait.parity.acquire.cluster.shared::cta") == 2
    # the full barrier expects the whole tile: 4 slices of 4 x 32 u32
    assert "mbarrier.arrive.expect_tx.release.cta.shared::cta.b64 _, [%r" in text
    assert re.search(r"expect_tx\.release\.cta\.shared::cta\.b64 _, \[%r\d+\], 2048;", text)
    assert ".multicast::cluster [%r" in text and "], 15;" in text


def test_release_to_chosen_ctas_and_run_time_ranks():
    k = Kernel("r", reqnctapercluster=(4, 1, 1))
    ring = MbarrierRing(k, 2, peers=4)
    c = ring.consumer()
    rank = k.read_special("cluster_ctarank")
    c.release(ctas=[rank, 3])
    body = "\n".join(s.render() for s in k.statements())
    assert re.search(rf"mapa\.shared::cluster\.u32 %r\d+, %r\d+, %{rank.name};", body)
    assert body.count("mbarrier.arrive.release.cluster.shared::cluster.b64 _,") == 2
    with pytest.raises(OperandError, match=r"cluster ranks of the ring's CTAs, in \[0, 4\)"):
        c.release(ctas=[4])


# What the checker reports on these correct kernels: nothing. dsmem: the bytes arrive from
# another CTA's st.async (through a mapa'd barrier address); the wait counts them per CTA rank
# (hazards_remote), and the comparison where a thread's part of a phase ends without a wait
# of its own is skipped with a note (see the next test).
KERNEL_FINDINGS = {
    "multicast_2": [], "multicast_4": [], "dsmem_2": [], "dsmem_4": [], "l2_hint": [],
}


@pytest.mark.parametrize("name", sorted(KERNEL_FINDINGS))
def test_checker_findings_recorded(name):
    kind, _, n = name.partition("_")
    k = {"multicast": lambda: PK.build_multicast(int(n)),
         "dsmem": lambda: PK.build_dsmem(int(n)),
         "l2": PK.build_l2_hint}[kind]()
    assert [f.hazard.value for f in k.check()] == KERNEL_FINDINGS[name]


def test_dsmem_byte_count_is_a_note_not_a_finding():
    from ptxdsl.checker import check_kernel
    found = check_kernel(PK.build_dsmem(2), notes=True)
    assert [f.hazard.value for f in found] == ["check-skipped"]
    assert "other CTAs" in found[0].message
