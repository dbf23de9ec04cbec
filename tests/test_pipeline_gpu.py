"""MbarrierRing on the GPU: a warp-specialised TMA ring (1 producer lane, 2 consumer warps) at
N = 2, 3, 4, 7 stages over hundreds of tiles with a run-time stage index, checked against
numpy. Each case runs in a child process with bounded waits (tests/gpu_pipeline_run.py)."""

from __future__ import annotations

import numpy as np
import pytest

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
