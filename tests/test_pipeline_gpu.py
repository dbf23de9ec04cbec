"""MbarrierRing on the GPU: a warp-specialised TMA ring (1 producer lane, 2 consumer warps) at
N = 2, 3, 4, 7 stages over hundreds of tiles with a run-time stage index, checked against
numpy. Each case runs in a child process with bounded waits (tests/gpu_pipeline_run.py)."""

from __future__ import annotations

import numpy as np
import pytest

from ptxdsl import debug
from tests import pipeline_kernels as PK
from tests.gpu_pipeline_run import run_isolated

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("stages", PK.RING_STAGES)
@pytest.mark.parametrize("n_tiles", [1, 301])
def test_ring_streams_every_tile_in_order(stages, n_tiles):
    rng = np.random.default_rng(stages * 1000 + n_tiles)
    src = rng.integers(0, 2**32, size=(320 * PK.ROWS, PK.COLS), dtype=np.uint32)
    (out,) = run_isolated(PK.ring_module(stages, bounded=True), f"ring_{stages}", 1,
                          PK.THREADS, [("map", src, (PK.ROWS, PK.COLS)),
                                       ("out", (n_tiles, PK.TILE_ELEMS), np.uint32), n_tiles])
    np.testing.assert_array_equal(out, PK.ring_expected(src, n_tiles))


@pytest.mark.parametrize("stages", [3, 7])
def test_ring_in_dynamic_shared_memory(stages):
    n_tiles = 257
    src = np.random.default_rng(stages).integers(0, 2**32, size=(n_tiles * PK.ROWS, PK.COLS),
                                                 dtype=np.uint32)
    (out,) = run_isolated(PK.ring_module(stages, bounded=True, dynamic=True),
                          f"ring_{stages}_dyn", 1, PK.THREADS,
                          [("map", src, (PK.ROWS, PK.COLS)),
                           ("out", (n_tiles, PK.TILE_ELEMS), np.uint32), n_tiles],
                          shared_mem=PK.ring_shared_bytes(stages))
    np.testing.assert_array_equal(out, PK.ring_expected(src, n_tiles))


def test_a_broken_ring_times_out_with_a_record_instead_of_hanging():
    """empty barriers initialised for 3 releases while only 2 consumer warps release: the
    producer's first wait of the second pass (empty[0], parity 0 after the wrap) never
    completes; its bounded wait writes the record and traps."""
    k = PK.build_ring(2, "producer", empty_count=3, name="broken_ring")
    src = np.zeros((16 * PK.ROWS, PK.COLS), np.uint32)
    with pytest.raises(debug.WaitTimeoutError) as err:
        run_isolated(PK.module(k, bounded=True), "broken_ring", 1, PK.THREADS,
                     [("map", src, (PK.ROWS, PK.COLS)), ("out", (16, PK.TILE_ELEMS), np.uint32),
                      16])
    r = err.value.record
    assert (r.kernel, r.space, r.parity) == ("broken_ring", "shared::cta", 0)
    assert r.block == (0, 0, 0) and r.thread == (0, 0, 0) and r.barrier % 8 == 0
