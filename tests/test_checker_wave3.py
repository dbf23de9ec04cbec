"""Held-out hazard kernels, wave 3 (tests/wave3_kernels.py): raw PTX as outside engineers write
it, read by the front end. Each planted mistake is found with its id; each correct twin checks
with no error or warning; every text assembles for sm_90a. Pairs the checker still misses are
strict xfails that say what it would need."""

from __future__ import annotations

import pytest

from ptxdsl.checker import Severity
from ptxdsl.frontend import parse_ptx
from ptxdsl.instructions.move import Mov
from ptxdsl.operands import Reg
from tests import wave3_kernels
from tests.wave3_kernels import PAIRS, Pair
from tests.wave3b_kernels import PAIRS as PAIRS_B
from tests.wave_harness import assert_clean, assert_found, assert_twins_assemble, param

ALL = PAIRS + PAIRS_B    # wave 3 and the classes of its three misses written more ways

XFAIL: dict[str, str] = {}


@pytest.mark.parametrize("pair", [param(p, XFAIL.get(p.name)) for p in ALL])
def test_planted_mistake_is_found_with_its_id(pair: Pair):
    assert_found(pair)


@pytest.mark.parametrize("pair", [param(p) for p in ALL])
def test_correct_twin_is_clean(pair: Pair):
    assert_clean(pair)


def test_the_wave_is_large_and_mostly_raw_ptx():
    assert len(PAIRS) >= 24
    assert len({p.name for p in ALL}) == len(ALL)


@pytest.mark.parametrize("pair", [param(p) for p in ALL])
def test_both_twins_assemble(pair: Pair):
    assert_twins_assemble(pair)


# -- the rules the wave made: each one's boundary -----------------------------------------------
def _cluster_init(fence: bool, sync: bool) -> str:
    text = wave3_kernels.cluster_init(not fence)
    if not sync:   # the first cluster barrier (the one publishing the init) left out
        text = text.replace("  barrier.cluster.arrive.relaxed.aligned;\n"
                            "  barrier.cluster.wait.aligned;\n", "", 1)
    return text


def test_a_remote_arrive_after_a_fenced_init_needs_the_cluster_barrier_too():
    found = parse_ptx(_cluster_init(fence=True, sync=False), file="c.ptx").check()
    assert {f.id for f in found} == {"mbar-init-unsynced"}, [f.format() for f in found]
    # (the local waiters lack their bar.sync too: a finding of its own)
    remote = [f for f in found if "another CTA's mbarrier" in f.message]
    assert len(remote) == 1 and "cluster barrier after fence.mbarrier_init" in \
        remote[0].message, [f.format() for f in found]


def test_a_func_reads_the_register_its_call_passes():
    """The .func's `.reg` parameter is the caller's `%r2` (a shared address): without the
    binding its mapa'd read was unknown, and the early read was missed; the binding also
    returns `out` into `%f1`, which the caller stores."""
    mod = parse_ptx(wave3_kernels.dsmem_read(True), file="d.ptx")
    movs = [(s.insn.d.name, s.insn.a.name) for s in mod.kernels[0].body
            if isinstance(getattr(s, "insn", None), Mov) and isinstance(s.insn.a, Reg)
            and {s.insn.d.name, s.insn.a.name} & {"addr", "out"}]
    assert movs == [("addr", "r2"), ("f1", "out")], movs
    # The function itself, and the module's text, are unchanged.
    assert mod.emit() == parse_ptx(mod.emit(), file="e.ptx").emit()


def test_a_wait_on_a_relay_barrier_is_not_a_wrong_barrier():
    """A barrier arrived on after a wait for the tile relays the copy's completion (no
    finding); arrived on with no wait for the tile before it, it relays nothing, and a read
    after waiting on it alone is `wait-wrong-barrier`."""
    ctx = {"maps": {"relay_param_0": {"box_bytes": 8192}}}
    ok = [f for f in parse_ptx(wave3_kernels.relay(False), file="r.ptx").check(**ctx)
          if f.severity is not Severity.note]
    assert ok == [], [f.format() for f in ok]
    bad = parse_ptx(wave3_kernels.relay(True), file="r.ptx").check(**ctx)
    assert "wait-wrong-barrier" in {f.id for f in bad}, [f.format() for f in bad]


def test_an_opcode_continued_on_the_next_line_keeps_its_qualifiers():
    """ptxas reads `...::bytes` then `.multicast::cluster` on the next line as one opcode: the
    copy is still multicast (each rank's barrier gets both halves), so the correct twin's
    expect_tx of both halves is right."""
    one_line = wave3_kernels.multicast_tx(False)
    text = one_line.replace("::bytes.multicast::cluster", "::bytes\n      .multicast::cluster")
    assert text != one_line
    mod = parse_ptx(text, file="m.ptx")
    ctx = wave3_kernels._maps("w3_multicast", 0)
    assert [f for f in mod.check(**ctx) if f.severity is not Severity.note] == []
    assert mod.emit() == parse_ptx(one_line, file="m.ptx").emit()
