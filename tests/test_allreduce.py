"""samples/allreduce.py on the CPU: its kernels check clean under the cross-GPU protocol rules
and the checker sees a broken protocol in them; the grid and algorithm choices. Its run on
two or more GPUs (under torchrun) is tests/test_samples.py's GPU test of every sample, and
tests/test_allreduce_gpu.py's."""

from __future__ import annotations

import runpy
from pathlib import Path

import pytest

import ptxdsl.signals as signals
from ptxdsl.checker import Hazard, check_module

SAMPLE = Path(__file__).resolve().parents[1] / "samples" / "allreduce.py"
S = runpy.run_path(str(SAMPLE))


def _ids(module) -> set[Hazard]:
    return {f.hazard for f in check_module(module, notes=True)}


@pytest.mark.parametrize("bounded", [False, True])
def test_every_kernel_checks_clean(bounded):
    module = S["build_module"](S["WORLDS"], bounded=bounded)
    assert len(module.kernels) == 2 * 2 * len(S["WORLDS"])
    assert check_module(module, notes=True) == []


def test_a_gpu_scope_signal_is_reported(monkeypatch):
    """The barrier's flags released at .gpu scope: the peers' reads of the buffer are no
    longer ordered after this rank's copy into it."""
    real = signals.signal_set
    monkeypatch.setattr(signals, "signal_set",
                        lambda k, addr, value=1, **kw: real(k, addr, value, scope="gpu"))
    assert Hazard.PEER_PUBLISH_NO_SYS_RELEASE in _ids(S["build_module"]((2,)))


def test_a_gpu_scope_wait_is_reported(monkeypatch):
    """The spin on its own pad acquiring at .gpu scope: the reads of the peers' buffers after
    it are not ordered after their writes."""
    real = signals.signal_wait
    monkeypatch.setattr(signals, "signal_wait",
                        lambda k, addr, expected, **kw: real(k, addr, expected,
                                                             **{**kw, "scope": "gpu"}))
    assert Hazard.PEER_CONSUME_NO_SYS_ACQUIRE in _ids(S["build_module"]((2,)))


def test_reads_without_the_barrier_are_reported(monkeypatch):
    """No barrier at all: every rank reads the peers' buffers before they copied into them
    (no wait on any path, which the acquire rule alone does not see), and nothing announces
    the (weak) copies into the buffer."""
    monkeypatch.setitem(S["build_one_shot"].__globals__, "barrier_all_ranks",
                        lambda *a, **kw: None)
    assert _ids(S["build_module"]((2,))) == {Hazard.PEER_READ_UNSYNCHRONIZED,
                                             Hazard.PEER_WRITE_UNPUBLISHED}


@pytest.mark.parametrize("alg, nvec, world, pad, want", [
    ("one_shot", 0, 2, 9216, 1),              # a tail only: CTA 0 sums it
    ("one_shot", 512, 2, 9216, 1),            # 8 KiB: one CTA
    ("one_shot", 1 << 21, 2, 9216, 132),      # 32 MiB: one CTA per SM
    ("two_shot", 1 << 21, 8, 9216, 132),
    ("two_shot", 4096, 4, 9216, 2),           # a chunk is 1024 vectors
    ("one_shot", 1 << 21, 8, 2048, 64),       # a 2 KiB pad holds 8 x 64 slots
])
def test_grid(alg, nvec, world, pad, want):
    assert S["ctas"](alg, nvec, world, pad) == want


def test_choice_by_size():
    choose = S["choose"]
    assert choose(32 << 20, 2) == "one_shot"          # two ranks: the same peer reads
    assert choose(64 << 10, 8) == "one_shot"
    assert choose(4 << 20, 4) == "two_shot"
    assert choose(512 << 10, 4) == "one_shot"         # measured: 12.2 against 16.6 us
    assert choose((1 << 20) + 2, 4) == "two_shot"
