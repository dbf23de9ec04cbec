"""Kernels of the pipeline and cluster tests, built once here for both the CPU goldens
(tests/test_pipeline.py, tests/test_cluster_kernels.py) and the GPU runs
(tests/test_pipeline_gpu.py, tests/test_cluster_gpu.py), with the numpy references.

All data are uint32 tiles of ROWS x COLS (128-byte rows: TMA boxes with no padding); a
consumer writes `tile * 3 + iteration` to `out`, so a tile read twice, skipped, read before it
landed or in the wrong iteration shows up as a wrong value.
"""

from __future__ import annotations

import numpy as np

from ptxdsl import Addr, Kernel, Module, ptx, t
from ptxdsl.pipeline import MbarrierRing, tx_bytes

ROWS, COLS = 8, 32                    # one ring stage: 8 x 32 u32 = 1 KiB
TILE_ELEMS = ROWS * COLS
TILE_BYTES = TILE_ELEMS * 4
CONSUMER_WARPS = 2
THREADS = 32 * (1 + CONSUMER_WARPS)   # warp 0 produces, warps 1.. consume
RING_STAGES = (2, 3, 4, 7)


def _u32_index_store(k, out, index, value) -> None:
    """out[index] = value for a .u32 `index` into a generic .u32 array `out`."""
    k.st(Addr(k.add(out, k.mul(index, 4, mode="wide"))), value, type=t.u32, space="global")


def _consume(k, c, tiles, out, i, tile_elems: int, stride: int) -> None:
    """Every consumer thread: wait for the stage, write tile * 3 + i to out[i], release."""
    me = k.sub(k.tid.x, 32)
    c.wait_full()
    slot = c.slot(tiles, stride)
    for j in range(tile_elems // (32 * CONSUMER_WARPS)):
        e = k.add(me, 32 * CONSUMER_WARPS * j) if j else me
        v = k.ld(Addr(k.add(slot, k.shl(e, 2))), type=t.u32, space="shared::cta")
        _u32_index_store(k, out, k.mad(i, tile_elems, e), k.mad(v, 3, i))
    k.syncwarp()                                   # the warp's reads are done before release
    with k.if_(k.and_(k.tid.x, 31) == 0):
        c.release()
    c.advance()


def build_ring(stages: int) -> Kernel:
    """A warp-specialised N-stage TMA ring: lane 0 of warp 0 loads tile i (rows 8i..8i+7 of
    the map) into stage i % N; 2 consumer warps read it and release it; n_tiles at run time."""
    k = Kernel(f"ring_{stages}", reqntid=THREADS)
    tmap_p = k.param_tensormap("tmap")
    out_p = k.param_ptr("out")
    n_p = k.param(t.u32, "n_tiles")
    tiles = k.shared_array(t.b8, stages * TILE_BYTES, align=128, name="tiles")
    ring = MbarrierRing(k, stages, empty_count=CONSUMER_WARPS)
    ring.init()
    n = k.ld_param(n_p)
    with k.if_(k.tid.x == 0):
        tmap = k.tensormap_addr(tmap_p)
        p = ring.producer()
        with k.for_range(0, n) as i:
            p.wait_empty()
            p.arrive_expect_tx(tx_bytes(((ROWS, COLS), t.u32)))
            ptx.cp_async_bulk_tensor(k, "shared::cluster", "global", p.slot(tiles, TILE_BYTES),
                                     tmap, (0, k.mul(i, ROWS)), p.full_barrier())
            p.advance()
    with k.else_():
        with k.if_(k.tid.x >= 32):
            out = k.cvta(k.ld_param(out_p), "global", to=True)
            c = ring.consumer()
            with k.for_range(0, n) as i:
                _consume(k, c, tiles, out, i, TILE_ELEMS, TILE_BYTES)
    k.ret()
    return k


def ring_module(stages: int) -> Module:
    return Module([build_ring(stages)])


def ring_expected(src: np.ndarray, n_tiles: int) -> np.ndarray:
    """out for src of shape (n_tiles * ROWS, COLS): tile i * 3 + i, flattened per tile."""
    tiles = src[: n_tiles * ROWS].reshape(n_tiles, TILE_ELEMS).astype(np.uint64)
    return ((tiles * 3 + np.arange(n_tiles, dtype=np.uint64)[:, None]) % (1 << 32)).astype(
        np.uint32)
