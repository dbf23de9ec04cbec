"""Kernels of the pipeline and cluster tests, built once here for both the CPU goldens
(tests/test_pipeline.py, tests/test_cluster_kernels.py) and the GPU runs
(tests/test_pipeline_gpu.py, tests/test_cluster_gpu.py), with the numpy references.

All data are uint32 tiles of ROWS x COLS (128-byte rows: TMA boxes with no padding); a
consumer writes `tile * 3 + iteration` to `out`, so a tile read twice, skipped, read before it
landed or in the wrong iteration shows up as a wrong value.
"""

from __future__ import annotations

import numpy as np

from ptxdsl import Addr, Kernel, Module, debug, ptx, t
from ptxdsl.pipeline import MbarrierRing, cluster_sync, tx_bytes

ROWS, COLS = 8, 32                    # one ring stage: 8 x 32 u32 = 1 KiB
TILE_ELEMS = ROWS * COLS
TILE_BYTES = TILE_ELEMS * 4
CONSUMER_WARPS = 2
THREADS = 32 * (1 + CONSUMER_WARPS)   # warp 0 produces, warps 1.. consume
RING_STAGES = (2, 3, 4, 7)


def _u32_index_store(k, out, index, value) -> None:
    """out[index] = value for a .u32 `index` into a generic .u32 array `out`."""
    k.st(Addr(k.add(out, k.mul(index, 4, mode="wide"))), value, type=t.u32, space="global")


def _consume(k, c, tiles, out, i, out_tile, tile_elems: int, stride: int) -> None:
    """Every consumer thread: wait for the stage, write tile * 3 + i to out tile `out_tile`,
    release the stage (a cluster ring: on every peer CTA)."""
    me = k.sub(k.tid.x, 32)
    c.wait_full()
    slot = c.slot(tiles, stride)
    for j in range(tile_elems // (32 * CONSUMER_WARPS)):
        e = k.add(me, 32 * CONSUMER_WARPS * j) if j else me
        v = k.ld(Addr(k.add(slot, k.shl(e, 2))), type=t.u32, space="shared::cta")
        _u32_index_store(k, out, k.mad(out_tile, tile_elems, e), k.mad(v, 3, i))
    k.syncwarp()                                   # the warp's reads are done before release
    with k.if_(k.and_(k.tid.x, 31) == 0):
        c.release()
    c.advance()


def _kernel(name: str, bounded: bool, **kw) -> Kernel:
    """A kernel; `bounded`: every mbarrier wait traps after 2 s with an error record (the GPU
    tests build these, so a hang is reported instead of stalling the run)."""
    k = Kernel(name, **kw)
    if bounded:
        debug.bounded_waits(k, timeout_ns=2_000_000_000)
    return k


def module(k: Kernel, bounded: bool = False, target: str | None = None) -> Module:
    """`k`'s module (with the debug record variables when `bounded`); `target` pins it (the
    multicast kernels: ptxas advises sm_90a for .multicast::cluster)."""
    return debug.module([k], target=target) if bounded else Module([k], target=target)


def build_ring(stages: int, bounded: bool | str = False, *,
               empty_count: int = CONSUMER_WARPS, name: str | None = None,
               dynamic: bool = False) -> Kernel:
    """A warp-specialised N-stage TMA ring: lane 0 of warp 0 loads tile i (rows 8i..8i+7 of
    the map) into stage i % N; 2 consumer warps read it and release it; n_tiles at run time.
    `bounded="producer"` bounds the producer's waits only; `empty_count` other than the 2
    consumer warps makes a broken ring (the producer's second pass never sees the stage
    empty). `dynamic`: tiles and barriers live in dynamic shared memory (launch with
    `ring_shared_bytes(stages)`), the barriers right after the tiles."""
    k = _kernel(name or f"ring_{stages}", bounded is True, reqntid=THREADS)
    tmap_p = k.param_tensormap("tmap")
    out_p = k.param_ptr("out")
    n_p = k.param(t.u32, "n_tiles")
    if dynamic:
        tiles = k.extern_shared("dyn_smem", align=128)
        ring = MbarrierRing(k, stages, empty_count=empty_count,
                            storage=Addr(tiles, stages * TILE_BYTES))
    else:
        tiles = k.shared_array(t.b8, stages * TILE_BYTES, align=128, name="tiles")
        ring = MbarrierRing(k, stages, empty_count=empty_count)
    ring.init()
    n = k.ld_param(n_p)
    with k.if_(k.tid.x == 0):
        if bounded == "producer":
            debug.bounded_waits(k, timeout_ns=2_000_000_000)
        tmap = k.tensormap_addr(tmap_p)
        p = ring.producer()
        with k.for_range(0, n) as i:
            p.wait_empty()
            p.arrive_expect_tx(tx_bytes(((ROWS, COLS), t.u32)))
            ptx.cp_async_bulk_tensor(k, "shared::cluster", "global", p.slot(tiles, TILE_BYTES),
                                     tmap, (0, k.mul(i, ROWS)), p.full_barrier())
            p.advance()
    if bounded == "producer":
        k.wait_timeout = None
    with k.else_():
        with k.if_(k.tid.x >= 32):
            out = k.cvta(k.ld_param(out_p), "global", to=True)
            c = ring.consumer()
            with k.for_range(0, n) as i:
                _consume(k, c, tiles, out, i, i, TILE_ELEMS, TILE_BYTES)
    k.ret()
    return k


def ring_module(stages: int, bounded: bool = False, dynamic: bool = False) -> Module:
    return module(build_ring(stages, bounded, dynamic=dynamic,
                             name=f"ring_{stages}_dyn" if dynamic else None), bounded)


def ring_shared_bytes(stages: int) -> int:
    """Dynamic shared memory of a `dynamic` ring kernel: the tiles, then 2 x stages barriers."""
    return stages * TILE_BYTES + 16 * stages


def ring_expected(src: np.ndarray, n_tiles: int) -> np.ndarray:
    """out for src of shape (n_tiles * ROWS, COLS): tile i * 3 + i, flattened per tile."""
    tiles = src[: n_tiles * ROWS].reshape(n_tiles, TILE_ELEMS).astype(np.uint64)
    return ((tiles * 3 + np.arange(n_tiles, dtype=np.uint64)[:, None]) % (1 << 32)).astype(
        np.uint32)


# -- clusters: TMA multicast through a cluster ring ------------------------------------------------
MC_ROWS = 16                          # a multicast tile: 16 x 32 u32 = 2 KiB, one slice per CTA
MC_TILE_ELEMS = MC_ROWS * COLS
MC_TILE_BYTES = MC_TILE_ELEMS * 4
MC_STAGES = 2
CLUSTER_SIZES = (2, 4)


def build_multicast(ctas: int, bounded: bool = False) -> Kernel:
    """A cluster of `ctas` CTAs streams n_tiles tiles through a 2-stage cluster ring: for tile i
    each CTA loads its 16/ctas-row slice of the cluster's tile (clusterid.x * n + i) and
    multicasts it to every CTA of the cluster, so each CTA's full barrier expects the whole
    tile; every CTA's consumers release the stage on every CTA (empty counts 2 * ctas
    arrivals). Every CTA writes its view of each tile to out[ctaid.x * n + i]."""
    rows = MC_ROWS // ctas
    k = _kernel(f"multicast_{ctas}", bounded, reqntid=THREADS, reqnctapercluster=(ctas, 1, 1))
    tmap_p = k.param_tensormap("tmap")
    out_p = k.param_ptr("out")
    n_p = k.param(t.u32, "n_tiles")
    tiles = k.shared_array(t.b8, MC_STAGES * MC_TILE_BYTES, align=128, name="tiles")
    ring = MbarrierRing(k, MC_STAGES, empty_count=CONSUMER_WARPS, peers=ctas)
    ring.init()                                   # ends with a cluster barrier
    n = k.ld_param(n_p)
    rank = k.read_special("cluster_ctarank")
    first = k.mul(k.read_special("clusterid.x"), n)     # the cluster's first tile
    with k.if_(k.tid.x == 0):
        tmap = k.tensormap_addr(tmap_p)
        p = ring.producer()
        my_rows = k.mul(rank, rows)
        my_bytes = k.mul(rank, rows * COLS * 4)
        with k.for_range(0, n) as i:
            p.wait_empty()
            p.arrive_expect_tx(tx_bytes(((rows, COLS), t.u32), multicast=ctas))
            dst = k.add(p.slot(tiles, MC_TILE_BYTES), my_bytes)
            y = k.mad(k.add(first, i), MC_ROWS, my_rows)
            ptx.cp_async_bulk_tensor(k, "shared::cluster", "global", dst, tmap, (0, y),
                                     p.full_barrier(), cta_mask=(1 << ctas) - 1)
            p.advance()
    with k.else_():
        with k.if_(k.tid.x >= 32):
            out = k.cvta(k.ld_param(out_p), "global", to=True)
            mine = k.mul(k.ctaid.x, n)
            c = ring.consumer()
            with k.for_range(0, n) as i:
                _consume(k, c, tiles, out, i, k.add(mine, i), MC_TILE_ELEMS, MC_TILE_BYTES)
    cluster_sync(k)          # no CTA leaves while a peer may still arrive on its barriers
    k.ret()
    return k


def multicast_module(ctas: int, bounded: bool = False) -> Module:
    return module(build_multicast(ctas, bounded), bounded, target="sm_90a")


def multicast_expected(src: np.ndarray, ctas: int, clusters: int, n_tiles: int) -> np.ndarray:
    """out of shape (ctas * clusters * n_tiles, MC_TILE_ELEMS): CTA b's tile i is its
    cluster's tile (b // ctas) * n + i, times 3, plus i."""
    tiles = src.reshape(-1, MC_TILE_ELEMS).astype(np.uint64)
    out = np.empty((ctas * clusters, n_tiles, MC_TILE_ELEMS), np.uint64)
    for b in range(ctas * clusters):
        first = (b // ctas) * n_tiles
        out[b] = tiles[first:first + n_tiles] * 3 + np.arange(n_tiles)[:, None]
    return (out % (1 << 32)).astype(np.uint32).reshape(-1, MC_TILE_ELEMS)


# -- clusters: distributed shared memory, mapa + st.async ---------------------------------------
DSMEM_THREADS = 64


def build_dsmem(ctas: int, bounded: bool = False) -> Kernel:
    """Each thread t of CTA rank r stores ctaid.x * 1000 + t with st.async into buf[t] of the
    next CTA of the cluster (rank (r + 1) % ctas, through mapa), completing on that CTA's
    mbarrier; each CTA waits for its 256 bytes on its own barrier and copies buf to
    out[ctaid.x]."""
    from ptxdsl.instructions.cluster import mapa
    from ptxdsl.instructions.st_async import st_async
    k = _kernel(f"dsmem_{ctas}", bounded, reqntid=DSMEM_THREADS,
                reqnctapercluster=(ctas, 1, 1))
    out_p = k.param_ptr("out")
    buf = k.shared_array(t.u32, DSMEM_THREADS, align=16, name="buf")
    bar = k.shared_array(t.b64, 1, align=8, name="bar")
    tid = k.tid.x
    with k.if_(tid == 0):
        ptx.mbarrier_init(k, bar, 1)
        ptx.fence_mbarrier_init(k)
    cluster_sync(k)                     # every CTA's barrier is ready before any st.async
    with k.if_(tid == 0):
        ptx.mbarrier_arrive_expect_tx(k, "release", "cta", "shared::cta", bar,
                                      DSMEM_THREADS * 4, dst="_")
    rank = k.read_special("cluster_ctarank")
    peer = k.rem(k.add(rank, 1), ctas)
    mine = k.add(k.mov(buf), k.shl(tid, 2))
    remote = mapa(k, "shared::cluster", mine, peer)
    remote_bar = mapa(k, "shared::cluster", k.mov(bar), peer)
    st_async(k, remote, k.mad(k.ctaid.x, 1000, tid), remote_bar)
    ptx.mbarrier_wait(k, bar, 0)
    v = k.ld(Addr(mine), type=t.u32, space="shared::cta")
    out = k.cvta(k.ld_param(out_p), "global", to=True)
    _u32_index_store(k, out, k.mad(k.ctaid.x, DSMEM_THREADS, tid), v)
    cluster_sync(k)                     # no CTA leaves while its peer still stores into it
    k.ret()
    return k


def dsmem_expected(ctas: int, clusters: int) -> np.ndarray:
    blocks = np.arange(ctas * clusters)
    sender = blocks - blocks % ctas + (blocks % ctas - 1) % ctas
    return (sender[:, None] * 1000 + np.arange(DSMEM_THREADS)).astype(np.uint32)


# -- ld with an L2 cache-hint policy ------------------------------------------------------------
L2_THREADS = 128


def build_l2_hint(bounded: bool = False) -> Kernel:
    """out[i] = a[i] * 7 + b[i] for i < n (grid-stride), `a` read through
    `ld.global.L2::cache_hint` with an evict_last policy (createpolicy.fractional 1.0) and `b`
    through cuda::ptx's ld_L1_evict_first_L2_cache_hint with an evict_first/0.5 policy."""
    k = _kernel("l2_hint", bounded, reqntid=L2_THREADS)
    a_p, b_p, out_p = k.param_ptr("a"), k.param_ptr("b"), k.param_ptr("out")
    n = k.ld_param(k.param(t.u32, "n"))
    keep = ptx.createpolicy_fractional(k, "evict_last", None, 1.0)
    stream = ptx.createpolicy_fractional(k, "evict_first", None, 0.5)
    a, b, out = (k.cvta(k.ld_param(p), "global", to=True) for p in (a_p, b_p, out_p))
    i = k.mad(k.ctaid.x, L2_THREADS, k.tid.x)
    step = k.mul(k.nctaid.x, L2_THREADS)
    with k.while_(lambda: i < n):
        off = k.mul(i, 4, mode="wide")
        va = k.ld(Addr(k.add(a, off)), type=t.u32, space="global", cache_policy=keep)
        vb = ptx.ld_L1_evict_first_L2_cache_hint(k, "global", k.add(b, off), stream,
                                                 type=t.b32)
        k.st(Addr(k.add(out, off)), k.mad(va, 7, vb, type=t.u32), type=t.u32,
             space="global")
        k.add(i, step, dst=i)
    k.ret()
    return k
