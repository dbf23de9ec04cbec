"""The test helpers themselves: golden comparison and the GPU-test deadline."""

from __future__ import annotations

import time

import pytest

from ptxdsl.testing import GoldenMismatch, check_golden, declared_target, gpu_deadline


def test_deadline_turns_a_stuck_test_into_a_timeout():
    t0 = time.monotonic()
    with pytest.raises(TimeoutError, match="exceeded 1 s"):
        with gpu_deadline(1):
            time.sleep(5)
    assert time.monotonic() - t0 < 3


def test_deadline_is_disarmed_afterwards():
    with gpu_deadline(1):
        pass
    time.sleep(1.2)   # no alarm may fire after the block


def test_golden_mismatch_shows_a_diff(tmp_path):
    path = tmp_path / "g.ptx"
    with pytest.raises(GoldenMismatch, match="does not exist"):
        check_golden("a\n", path)
    check_golden("a\n", path, update=True)
    assert check_golden("a\n", path) == "a\n"
    with pytest.raises(GoldenMismatch, match=r"-a\n\+b"):
        check_golden("b\n", path)


def test_declared_target():
    assert declared_target(".version 8.3\n.target sm_90a\n") == "sm_90a"
