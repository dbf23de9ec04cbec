"""A persistent, warp-specialized Hopper GEMM in ptxdsl builders: C = A @ B^T, bf16 or fp8.

A is M x K and B is N x K, both row-major (K-major, "TN"); C is M x N bf16, accumulated in
f32. `gemm_hopper_bf16` takes bf16 inputs; `gemm_hopper_e4m3` takes e4m3 inputs and scales the
f32 accumulator by `scale` (the product of the per-tensor scales of A and B) before rounding.

- CTA: 384 threads. Warpgroup 0 is the producer: it gives registers back (`setmaxnreg.dec
  40`) and one thread issues the TMA loads. Warpgroups 1 and 2 are the consumers
  (`setmaxnreg.inc 232`): each computes 64 x 256 of the CTA's 128 x 256 tile with
  `wgmma.m64n256k16` (bf16) or `m64n256k32` (e4m3), one k-block of 128 bytes per row.
- A 4-stage full/empty `MbarrierRing` in dynamic shared memory; each stage holds a 128 x 128
  byte tile of A and a 256 x 128 byte tile of B, 128B-swizzled (`SmemLayout`); with the
  epilogue's staging buffers, 229,440 bytes per CTA.
- Cluster of 2 CTAs along M: they share the B tile, so each CTA loads half of it and
  multicasts it to both (the ring's empty barriers count both CTAs' consumers); each CTA
  loads its own A tile.
- Persistent tile scheduler: the grid holds at most one cluster per two SMs; cluster c walks
  the 256 x 256 cluster tiles c, c + clusters, ... in grouped order (GROUP cluster rows per
  band, column by column inside a band), so the tiles in flight share A rows and B columns
  in L2. The producer runs ahead across tiles, so the next tile's loads overlap the
  consumers' epilogue.
- Epilogue: each consumer converts its accumulators to bf16 pairs and, when N is a multiple
  of 8, writes them with `stmatrix` into a 128B-swizzled staging buffer (16 KiB per
  warpgroup, half its tile at a time) and TMA-stores 64 x 64 boxes from there; the stores
  run on while the warpgroup starts its next tile, and only the next refill of the buffer
  waits for them to have read it (`cp.async.bulk.wait_group.read`). Other even N: the
  pairs are stored directly, predicated on the M and N edges (a launch parameter picks).
- Skinny M (M <= 256, `launch`'s choice; kernels `gemm_hopper_<dtype>_n128`): the same roles
  on 128 x 128 tiles, without a cluster, with 6 stages, so that a short A still spreads over
  twice as many SMs and no CTA works on rows past M alone.
- One tile row (64 < M <= 128, `launch`'s choice with N; kernels
  `gemm_hopper_<dtype>_row_fit`): 128 x 64 tiles, 8 stages, no cluster, A's TMA box as tall
  as M (`Config(fit="a")`: TMA's zero fill of rows past M costs more than loading them),
  A evict-last and B evict-first: twice the CTAs of the 128 x 128 tiles. Without N (the GEMMs
  built on this one), the same tiles in clusters of 2 along N that share the A tile (each CTA
  loads half of it and multicasts it; kernels `gemm_hopper_<dtype>_row`).
- Tails: TMA zero-fills rows and columns outside A and B (so K need not be a multiple of the
  k-block, and a K smaller than one stage is one partial stage) and clips the stores at the
  edges of C. TMA needs 16-byte row pitches (K a multiple of 8 for bf16, 16 for e4m3).

- Hooks: `build_gemm(cfg, rows=...)` takes a `Rows` that says where A's rows come from and
  C's go (A's map and the coordinates of each box, further parameters, code for the producer
  warpgroup's idle warps, C's coordinates and edges); samples/allgather_gemm.py reads A from
  every GPU's symmetric buffer with it. `build_gemm(cfg, output=...)` takes an `Output` that
  says where the tiles go instead of C; samples/gemm_reduce_scatter.py sends each tile to the
  GPU that owns its rows with it. `Config(split_k=True)` walks (tile, split) units, K cut
  into splits of a `kper` parameter, and hands each unit's f32 accumulator and `KSpan` to the
  `Output`'s epilogue (an `AccStore`); `staging=False` leaves out the epilogue's buffers;
  `hints="a"` loads A evict-first and B evict-last ("b" the other way round); `bm=64`
  (split-K only) makes A's tile 64 rows, the two consumers each on half of B's tile.
  samples/gemm_decode.py builds its decode-shape GEMM (Y = X W^T, M <= 128, split-K) from
  these. `build_gemm(cfg, consumer=...)` takes a `Consumer`, the consumer warpgroups' main
  loop and scaling; samples/gemm_fp8_scaled.py scales e4m3 by rows and by 128-wide K blocks
  with it.

The run checks both kernels against numpy on tails in every dimension and a K smaller than
one stage (inputs are small integers times a power of two, so the f32 sums are exact and
only the final bf16 rounding differs: compared bit for bit with numpy's round-to-nearest).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Protocol, runtime_checkable

import numpy as np

from ptxdsl import Addr, Kernel, Module, Reg, Symbol, debug, ptx, t
from ptxdsl.epilogue import BOX_COLS, STAGING_BYTES, TmaStoreEpilogue
from ptxdsl.fragments import Fragment
from ptxdsl.instructions.wgmma_desc import SmemLayout, descriptor
from ptxdsl.pipeline import MbarrierRing, cluster_sync
from ptxdsl.sample_runner import POISON, Report, sample_main, sync
from ptxdsl.types import ScalarType

if TYPE_CHECKING:   # the runtime is imported when a GPU run needs it
    from ptxdsl.runtime import LoadedModule, TensorMap

TileBody = Callable[[Reg, Reg, "KSpan"], None]  # the work on the tile at (m0, n0)
TileLoop = Callable[[TileBody], None]           # runs it on each tile of this CTA

BM, BN, BK_BYTES = 128, 256, 128     # CTA tile rows, columns; k-block bytes per row
CLUSTER = 2                          # CTAs per cluster, along M; B is multicast
STAGES = 4
GROUP = 8                            # cluster-tile rows per band of the raster order
THREADS = 384
PRODUCER_REGS, CONSUMER_REGS = 40, 232
EPI_COLS = BOX_COLS                  # the TMA-store box: 64 rows x 64 bf16 (128B swizzle)
EPI_BYTES = STAGING_BYTES            # a consumer's staging buffer: two boxes (half its tile)
# name -> (wgmma type, K per wgmma)
DTYPES: dict[str, tuple[ScalarType | str, int]] = {"bf16": (t.bf16, 16), "e4m3": ("e4m3", 32)}


class Config:
    """The build-time constants of one variant: input type, CTA tile columns `bn`, CTAs per
    cluster, the cluster's direction (`along="m"`: its CTAs stack along M and share the B
    tile; "n": they sit side by side along N and share the A tile), ring stages and CTA tile
    rows `bm`."""

    def __init__(self, dtype: str, bn: int = BN, cluster: int = CLUSTER, stages: int = STAGES,
                 along: str = "m", name: str | None = None, *, split_k: bool = False,
                 staging: bool = True, hints: str | None = None, bm: int = BM,
                 fit: str | None = None):
        if along not in ("m", "n"):
            raise ValueError(f"Config: along must be 'm' (CTAs share B) or 'n' (they share A), "
                             f"got {along!r}")
        # bm = 64: A's tile is one wgmma M, so the two consumer warpgroups take the B tile's
        # halves (bn / 2 columns each) instead of 64 rows each; only a split-K Output places
        # such tiles (C's epilogue stores 64-row halves)
        if bm not in (BM, 64) or (bm == 64 and (not split_k or bn % 16)):
            raise ValueError(f"Config: bm must be {BM}, or 64 with split_k=True and bn a "
                             f"multiple of 16 (each consumer's half a wgmma N), got bm={bm!r} "
                             f"split_k={split_k} bn={bn}")
        if hints not in (None, "a", "b"):
            raise ValueError(f"Config: hints must be None, 'a' (A streamed once: evict-first, B "
                             f"evict-last) or 'b' (the other way round), got {hints!r}")
        # fit: one tile row (or column) whose A (B) box is as tall as M (N) (below)
        if fit not in (None, "a", "b"):
            raise ValueError(f"Config: fit must be None, 'a' (A's box as tall as M) or 'b' (B's "
                             f"as tall as N), got {fit!r}")
        if fit is not None and cluster != 1:
            raise ValueError(f"Config: fit={fit!r} takes one CTA per cluster (a box that is not "
                             f"shared), got cluster={cluster}")
        self.dtype, self.bn, self.cluster, self.stages = dtype, bn, cluster, stages
        self.along = along
        # split_k: the kernel takes `kper` (k-blocks per split) and walks (tile, split) units;
        # its `Output` must take the f32 accumulator (`AccStore`), as only it can add the
        # splits up. staging: room for the TMA-store epilogue's buffers. hints: the operand
        # streamed once ("a" or "b"), loaded evict-first, the other evict-last (read by every
        # CTA). fit="a": M <= bm only (one tile row): A's box is min(M, bm) rows rounded up to
        # 8 (`boxes_for`) and the stage's expect_tx is counted from M at run time, because TMA
        # fills a box's rows past M with zeros far slower than it loads rows (on an H200, at
        # M = 72, N = K = 8192, bf16: 57.5 us with the 128-row box, 40.9 us with A padded to
        # 128 rows in memory). The rows past M in shared memory are stale; they only reach
        # C's rows past M, which no epilogue stores. fit="b": the same for B's rows and N.
        self.split_k, self.staging, self.hints, self.fit = split_k, staging, hints, fit
        self.bm = bm
        self.wg_n = bn if bm == BM else bn // 2       # a consumer warpgroup's wgmma N
        self.wtype, self.kstep = DTYPES[dtype]
        self.elem = 2 if dtype == "bf16" else 1
        self.bk = BK_BYTES // self.elem                # k-block in elements
        self._layouts: dict[int, SmemLayout] = {}        # rows_of's, by row count
        self.layout_a, self.layout_b = self.rows_of(bm), self.rows_of(bn)
        self.layout_b_wg = self.rows_of(self.wg_n)
        # the shared operand's tensor-map box: each CTA of a cluster loads 1/cluster of it
        rows_a, rows_b = (bm // cluster, bn) if along == "n" else (bm, bn // cluster)
        self.box_a, self.box_b = self.rows_of(rows_a), self.rows_of(rows_b)
        self.tile_m = bm * (cluster if along == "m" else 1)    # a cluster tile's rows
        self.tile_n = bn * (cluster if along == "n" else 1)    # and columns
        self.a_bytes, self.b_bytes = self.layout_a.nbytes, self.layout_b.nbytes
        self.stage_bytes = self.a_bytes + self.b_bytes
        self.epi_off = stages * self.stage_bytes         # 2 x 16 KiB: one per consumer
        self.ring_off = self.epi_off + (2 * EPI_BYTES if staging else 0)
        self.smem_bytes = self.ring_off + 16 * stages
        self.name = name or f"gemm_hopper_{dtype}" + ("" if bn == BN else f"_n{bn}")

    def rows_of(self, rows: int) -> SmemLayout:
        """`rows` rows of one k-block of the input type, K-major, 128B-swizzled: the layout of
        every operand tile and TMA box of this kernel. Made once per row count: a fitted
        launch asks for its box on every call (`boxes_for`), and making a layout took 10-30 us
        of host time (an H200's host and this project's CI machine), about as long as an
        e4m3 one-row kernel runs."""
        if rows not in self._layouts:
            self._layouts[rows] = SmemLayout(self.wtype, rows, self.bk, "K", "128B")
        return self._layouts[rows]

    def boxes_for(self, m: int, n: int) -> tuple[SmemLayout, SmemLayout]:
        """A's and B's tensor-map boxes for M x N: `box_a` and `box_b`, but with `fit` the
        fitted one min(M, bm) (min(N, bn)) rows rounded up to 8. A fitted side takes one tile
        row (column): M <= bm (N <= bn), else ValueError."""
        box_a, box_b = self.box_a, self.box_b
        if self.fit is not None:
            what, rows, top = ("A", "M", self.bm) if self.fit == "a" else ("B", "N", self.bn)
            size = m if self.fit == "a" else n
            if size > top:
                raise ValueError(f"{self.name}: its {what} box is as tall as {rows} (Config.fit="
                                 f"{self.fit!r}): {rows} must be at most {top}, got "
                                 f"{rows}={size}")
            fitted = self.rows_of(-(-size // 8) * 8)
            box_a, box_b = (fitted, box_b) if self.fit == "a" else (box_a, fitted)
        return box_a, box_b

    def stage_tx(self, k: Kernel, M: Reg, N: Reg) -> Reg | int:
        """The bytes a stage's loads bring: `stage_bytes`, or with `fit` counted from M (N)
        at run time as `boxes_for` fits the box."""
        if self.fit is None:
            return self.stage_bytes
        size, top, other = (M, self.bm, self.b_bytes) if self.fit == "a" else \
            (N, self.bn, self.a_bytes)
        rows = k.min(k.and_(k.add(size, 7), 0xFFFFFFF8), top)
        return k.mad(rows, BK_BYTES, other)


CONFIGS = {name: Config(name) for name in DTYPES}
# Skinny M (at most SKINNY_M rows): 128 x 128 tiles, no cluster, 6 stages. The default's
# 256 x 256 cluster tiles leave most SMs idle there (M = 256, N = 8192: 64 CTAs on 132 SMs)
# and at M <= 128 put half of each cluster on rows past M (BENCHMARKS.md section 7).
SKINNY = {name: Config(name, bn=128, cluster=1, stages=6) for name in DTYPES}
SKINNY_M = 256
# Small outputs (M x N up to SMALL_MN, any M): the 128 x 128 tiles too. The 256 x 256 cluster
# tiles leave too few tiles per SM to hide a tile's pipeline fill and epilogue: on an H200,
# in one process, 128 x 128 ran 7.7% faster at bf16 2048^3, 19% at 3072^3, 1.2% at 4096^3
# (e4m3: 12%, 19%, 1.3%), and within 0.5% of the default from 8192 x 4096 up.
SMALL_MN = 4096 * 4096
# Among those, 128 x 192 tiles where they fill their waves better than 128 x 128 ones: fewer
# waves times a tile's width (`_wave_cost`). On an H200, in one process against cuBLAS: bf16
# 3072^3 1.073 with them against 0.967 (e4m3 against torch._scaled_mm: 1.231 against 1.134;
# 576 tiles of 128 x 128 are 4.4 waves of 132, 384 of 128 x 192 are 2.9), 1536 x 6144 x 8192
# 1.047 against 0.939; 4096^3 keeps 128 x 128 (0.897 with 192 columns, 5.3 waves). The count
# of SMs the choice assumes is fixed (an H100's or H200's), so that maps made before a launch
# (`tensor_maps`) and the launch agree on the variant without asking the device.
WIDE = {name: Config(name, bn=192, cluster=1, stages=4) for name in DTYPES}
WAVE_SMS = 132
# One tile row (ROW_M < M <= BM): 128 x 64 tiles in pairs along N that share (multicast) the
# A tile, 8 stages. Twice the CTAs of the 128 x 128 tiles (M = 128, N = 8192: 128 instead of
# 64), each loading half of A and its own B, so a memory-bound short GEMM pulls from twice
# the SMs while the L2 reads stay those of the 128 x 128 tiles. At M <= ROW_M the smaller
# stages' per-stage costs outweigh that (measured: BENCHMARKS.md section 7). With N given,
# the 128 x 128 tiles where their waves cost no more (`_wave_cost`): at M = 128, N = 14336
# (224 CTAs of 128 x 64 are two waves, 112 of 128 x 128 one) they ran 1.024x cuBLAS against
# 0.915 (e4m3: 1.109 against 0.990), at N = 28672 1.075 against 0.998 (1.147 against 1.051),
# in one process on an H200; at N = 8192 and 4096 the 128 x 64 pairs keep their lead.
ROW = {name: Config(name, bn=64, cluster=2, stages=8, along="n",
                    name=f"gemm_hopper_{name}_row") for name in DTYPES}
ROW_M = 64
# gemm_hopper's own one-row tiles (`launch`, config_for with N): 128 x 64 tiles without a
# cluster, A's box as tall as M (`Config(fit="a")`), A loaded evict-last and B evict-first (A is
# read by every CTA, B once). In one process on an H200 against cuBLAS, bf16 N = K = 8192
# (the pairs above / the pairs with A padded to 128 rows in memory / these without fit):
# M = 72 0.671 / 0.936 / 0.609, M = 96 0.813 / 0.917 / 0.760, M = 128 0.942 / - / 0.993; at
# M = 128, N = 4096 0.833 / - / 1.019, K = 4096 0.982 / - / 1.090. The GEMMs built on this one
# (VARIANTS) keep the pairs: their A maps are their own.
ROW_FIT = {name: Config(name, bn=64, cluster=1, stages=8, hints="b", fit="a",
                        name=f"gemm_hopper_{name}_row_fit") for name in DTYPES}
VARIANTS = {"default": CONFIGS, "skinny": SKINNY, "row": ROW}      # name -> dtype -> Config
# ... and the wide and fitted one-row tiles, which only gemm_hopper's own `launch` picks
# (config_for with N)
ALL_VARIANTS = {**VARIANTS, "wide": WIDE, "row_fit": ROW_FIT}


def _wave_cost(m: int, n: int, cfg: Config) -> int:
    """The waves of `cfg`'s CTAs (a cluster tile's `cluster` each) over WAVE_SMS SMs times a
    CTA tile's columns: the time of a launch, in units of one 128 x 1 column strip's work."""
    ctas = -(-m // cfg.tile_m) * -(-n // cfg.tile_n) * cfg.cluster
    return -(-ctas // WAVE_SMS) * cfg.bn * cfg.bm // BM


def config_for(dtype: str, m: int, n: int | None = None) -> Config:
    """The variant `launch` uses for M rows (and N columns, where given: SMALL_MN, WIDE, and
    for one tile row ROW_FIT against SKINNY by their waves; without N, ROW)."""
    if ROW_M < m <= BM:
        if n is None:
            return ROW[dtype]
        if _wave_cost(m, n, SKINNY[dtype]) <= _wave_cost(m, n, ROW_FIT[dtype]):
            return SKINNY[dtype]
        return ROW_FIT[dtype]
    if not (m <= SKINNY_M or (n is not None and m * n <= SMALL_MN)):
        return CONFIGS[dtype]
    if n is not None and _wave_cost(m, n, WIDE[dtype]) < _wave_cost(m, n, SKINNY[dtype]):
        return WIDE[dtype]
    return SKINNY[dtype]


def _raster(k: Kernel, tile: Reg, tiles_m: Reg, tiles_n: Reg) -> tuple[Reg, Reg]:
    """(cluster row, column) of cluster tile `tile` in grouped order: bands of GROUP rows,
    column-major inside a band (the last band may be shorter)."""
    band = k.mul(tiles_n, GROUP)
    g = k.div(tile, band)
    first = k.mul(g, GROUP)
    rows = k.min(k.sub(tiles_m, first), GROUP)
    r = k.sub(tile, k.mul(g, band))
    return k.add(first, k.rem(r, rows)), k.div(r, rows)


class KSpan:
    """The k-blocks [start, stop) of the work unit at hand (`count` of them). Without split-K
    a unit is a whole tile (0 to all k-blocks); with `Config.split_k` it is split `split` of
    `splits` of the tile numbered `tile` (its index in the raster order, which a split-K
    `Output` uses to find the tile's partial sums)."""

    def __init__(self, start: Reg | int, stop: Reg, count: Reg, tile: Reg | None = None,
                 split: Reg | None = None, splits: Reg | None = None) -> None:
        self.start, self.stop, self.count = start, stop, count
        self.tile, self.split, self.splits = tile, split, splits


class Output(Protocol):
    """Where a kernel's tiles go instead of C (samples/gemm_reduce_scatter.py sends each to
    the rank that owns its rows). `build_gemm` calls `declare` after the GEMM's own
    parameters (then A's and B's maps, M, N, K and the scale: no C, map_c or tma_store),
    `first_row` once per tile loop (the cluster-tile row to start from, or None for 0; the
    rows after it follow, wrapping round), and `epilogue` in each consumer warpgroup, whose
    `store` then takes every tile and whose `finish` ends the warpgroup's work."""

    def declare(self, k: Kernel) -> None: ...

    def first_row(self, k: Kernel, cfg: Config, tiles_m: Reg) -> Reg | None: ...

    def epilogue(self, k: Kernel, cfg: Config, smem: Symbol, cw: Reg, M: Reg,
                 N: Reg) -> TileStore: ...


class TileStore(Protocol):
    """A consumer warpgroup's epilogue: `cw` the warpgroup (0 or 1: its 64 rows of a tile;
    with `Config(bm=64)` its half of the tile's columns, `Config.wg_n` of them),
    `store` its packed 64 x bn rows of the tile at (m0, n0), `finish` after its last tile."""

    cw: Reg

    def store(self, packed: Fragment, m0: Reg, n0: Reg) -> None: ...

    def finish(self) -> None: ...


class Consumer(Protocol):
    """The consumer warpgroups' work in place of the GEMM's own main loop and scaling
    (samples/gemm_fp8_scaled.py scales by rows and by 128-wide K blocks with it). `build_gemm`
    calls `declare` after every other parameter (the kernel then has no per-tensor `scale`),
    and `run` in each consumer warpgroup after its `setmaxnreg.inc`: it runs `tile_loop`
    over its tiles, reading each k-block's stage from `ring` (the stage at `smem` + slot
    offset: A's 128 x bk tile, then B's bn x bk; `kblocks` per tile), releasing it to the
    producer, handing `epi.store` the packed tile, and calls `epi.finish()` at the end."""

    def declare(self, k: Kernel) -> None: ...

    def run(self, k: Kernel, cfg: Config, ring: MbarrierRing, smem: Symbol, kblocks: Reg,
            epi: TileStore, tile_loop: TileLoop, M: Reg, N: Reg) -> None: ...


@runtime_checkable
class AccStore(TileStore, Protocol):
    """The epilogue of a split-K `Output` (`Config.split_k`): `store_acc` takes each unit's
    f32 accumulator (scaled, for e4m3) and its `KSpan`, in place of `store`."""

    def store_acc(self, acc: Fragment, m0: Reg, n0: Reg, span: KSpan) -> None: ...


Load = Callable[..., None]       # (dst, tmap, row, mask=None, outer=()): one TMA load


class Rows:
    """Where the kernel reads A's rows and writes C's: by default one map of A in (k, row)
    coordinates and a row-major C of M rows. A subclass changes that without a copy of the
    kernel (samples/allgather_gemm.py reads each 64-row block of A through the map of the GPU
    that owns it). The hooks run while the kernel is built, in the order they are listed."""

    c_rank = 2      # the output map's dimensions (TmaStoreEpilogue's rank)

    def map_a(self, k: Kernel, cfg: Config) -> Symbol:
        """A's tensor-map parameter (the first parameter)."""
        return k.param_tensormap("map_a", box=cfg.box_a)

    def params(self, k: Kernel, cfg: Config) -> None:
        """Further parameters, after the GEMM's (launch appends their arguments)."""

    def side_warps(self, k: Kernel, cfg: Config) -> None:
        """Code for the producer warpgroup after its `setmaxnreg.dec`, before its thread 0
        starts loading (warps 1 to 3 are otherwise idle)."""

    def begin_tile(self, k: Kernel, cfg: Config, row: Reg) -> None:
        """The producer thread, before the loads of a tile whose A rows (this CTA's box)
        start at `row`."""

    def load_a(self, k: Kernel, load: Load, tmap_a: Reg, dst: Reg, row: Reg,
               mask: int | None) -> None:
        """Load this CTA's A box at `row` into `dst` (`load(dst, tmap, row, mask, outer)`
        issues one TMA load at (k-block, row, *outer) completing on the stage's barrier)."""
        load(dst, tmap_a, row, mask)

    def c_place(self, k: Kernel, row0: Reg) -> tuple[Reg, tuple[Reg, ...], Reg, Reg | None]:
        """Where a consumer's 64 rows from `row0` go: (the output map's row, its further
        coordinates, the row of the pointer store path, the rows left before its edge or
        None for M - row)."""
        return row0, (), row0, None


DEFAULT_ROWS = Rows()


def build_gemm(cfg: Config, bounded: bool = False, *, output: Output | None = None,
               rows: Rows = DEFAULT_ROWS, consumer: Consumer | None = None) -> Kernel:
    """The kernel of `cfg`; `bounded`: every mbarrier wait traps after 2 s with an error
    record saying which barrier and parity it waited on (`ptxdsl.debug`), for debugging;
    `output`: where the tiles go instead of C (`Output`); `rows`: where A's rows come from
    and C's go (`Rows`); `consumer`: the consumers' main loop and scaling (`Consumer`)."""
    cl = cfg.cluster
    if cfg.split_k and output is None:
        raise ValueError(f"build_gemm: {cfg.name} is split-K (Config.split_k): it needs an "
                         "output= whose epilogue adds the splits up (an AccStore); C's own "
                         "epilogue stores whole tiles")
    if cfg.split_k and consumer is not None:
        raise ValueError(f"build_gemm: {cfg.name} is split-K (Config.split_k); a consumer= "
                         "runs whole tiles")
    k = Kernel(cfg.name, reqntid=THREADS, minnctapersm=1,
               reqnctapercluster=(cl, 1, 1) if cl > 1 else None)
    if bounded:
        debug.bounded_waits(k, timeout_ns=2_000_000_000)
    # the boxes the loads bring (a CTA's slice in a cluster): the checker compares them with
    # the stage's expect_tx
    map_a = rows.map_a(k, cfg)
    map_b = k.param_tensormap("map_b", box=cfg.box_b)
    map_c = k.param_tensormap("map_c") if output is None else None
    c_p = k.param_ptr("c") if output is None else None
    m_p, n_p, k_p = (k.param(t.u32, n) for n in ("m", "n", "k"))
    tma_p = k.param(t.u32, "tma_store") if output is None else None
    scale_p = k.param(t.f32, "scale") if cfg.dtype != "bf16" and consumer is None else None
    kper_p = k.param(t.u32, "kper") if cfg.split_k else None
    if output is not None:
        output.declare(k)
    rows.params(k, cfg)
    if consumer is not None:
        consumer.declare(k)
    smem = k.extern_shared("smem", align=cfg.layout_a.alignment)
    ring = MbarrierRing(k, cfg.stages, empty_count=2, peers=cl,
                        storage=Addr(smem, cfg.ring_off))
    ring.init()                               # thread 0; ends with a (cluster) barrier
    tid = k.tid.x
    wg = k.shr(tid, 7)
    rank = k.read_special("cluster_ctarank") if cl > 1 else None
    M, N, K = (k.ld_param(p) for p in (m_p, n_p, k_p))
    tiles_m = k.div(k.add(M, cfg.tile_m - 1), cfg.tile_m)
    tiles_n = k.div(k.add(N, cfg.tile_n - 1), cfg.tile_n)
    tiles = k.mul(tiles_m, tiles_n)
    kblocks = k.div(k.add(K, cfg.bk - 1), cfg.bk)
    first_tile = k.read_special("clusterid.x" if cl > 1 else "ctaid.x")
    clusters = k.read_special("nclusterid.x" if cl > 1 else "nctaid.x")
    whole = KSpan(0, kblocks, kblocks)
    if kper_p is not None:      # units: split s of every tile, then split s + 1 ...
        kper = k.ld_param(kper_p)
        splits = k.div(k.add(kblocks, k.sub(kper, 1)), kper)     # none of them empty
        units = k.mul(tiles, splits)

    def tile_loop(body: TileBody) -> None:
        start = output.first_row(k, cfg, tiles_m) if output is not None else None
        tile = k.mov(first_tile, dst=k.reg(t.u32, "tile"))
        with k.while_(lambda: tile < (tiles if kper_p is None else units)):
            span = whole
            at = tile
            if kper_p is not None:
                s = k.div(tile, tiles)
                at = k.sub(tile, k.mul(s, tiles))
                kb0 = k.mul(s, kper)
                kb1 = k.min(k.add(kb0, kper), kblocks)
                span = KSpan(kb0, kb1, k.sub(kb1, kb0), at, s, splits)
            mb, nb = _raster(k, at, tiles_m, tiles_n)
            if start is not None:
                mb = k.rem(k.add(mb, start), tiles_m)
            m0, n0 = k.mul(mb, cfg.tile_m), k.mul(nb, cfg.tile_n)
            if rank is not None and cfg.along == "m":    # rank: in a cluster
                m0 = k.mad(rank, cfg.bm, m0)
            elif rank is not None:
                n0 = k.mad(rank, cfg.bn, n0)
            body(m0, n0, span)
            k.add(tile, clusters, dst=tile)

    with k.if_(wg == 0):
        ptx.setmaxnreg_dec(k, PRODUCER_REGS)
        rows.side_warps(k, cfg)
        with k.if_(tid == 0):
            _producer(k, cfg, ring, smem, map_a, map_b, rank, tile_loop,
                      cfg.stage_tx(k, M, N), rows)
    with k.else_():
        ptx.setmaxnreg_inc(k, CONSUMER_REGS)
        epi: TileStore
        if output is not None:
            epi = output.epilogue(k, cfg, smem, k.sub(wg, 1), M, N)
        else:
            assert map_c is not None and c_p is not None and tma_p is not None
            epi = Epilogue(k, cfg, smem, map_c, c_p, k.ld_param(tma_p), k.sub(wg, 1), M, N,
                           rows)
        if consumer is not None:
            consumer.run(k, cfg, ring, smem, kblocks, epi, tile_loop, M, N)
        else:
            _consumer(k, cfg, ring, smem, scale_p, epi, tile_loop)
    if cl > 1:
        cluster_sync(k)      # no CTA leaves while its peer may still multicast or release to it
    k.ret()
    return k


def _producer(k: Kernel, cfg: Config, ring: MbarrierRing, smem: Symbol, map_a: Symbol,
              map_b: Symbol, rank: Reg | None, tile_loop: TileLoop, stage_tx: Reg | int,
              rows: Rows = DEFAULT_ROWS) -> None:
    """One thread: per k-block its own tile of one operand and its 1/cluster slice of the
    shared one, multicast to the cluster (the whole of both without a cluster)."""
    tmap_a, tmap_b = k.tensormap_addr(map_a), k.tensormap_addr(map_b)
    cl = cfg.cluster
    cta_mask = (1 << cl) - 1 if cl > 1 else None     # the cluster's CTAs, for a multicast
    shared_b = cfg.along == "m"
    slice_rows = cfg.box_b.mn if shared_b else cfg.box_a.mn         # rows of my slice
    # my slice's offset in the stage, after A when it is B's
    mine = k.mad(rank, slice_rows * BK_BYTES, cfg.a_bytes if shared_b else 0) \
        if rank is not None else None     # rank: in a cluster (cl > 1)
    p = ring.producer()
    # L2 policies (cfg.hints): the operand streamed once evict-first, the other (read again by
    # every CTA) evict-last
    pol_a = pol_b = None
    if cfg.hints is not None:
        first = ptx.createpolicy_fractional(k, "evict_first")
        last = ptx.createpolicy_fractional(k, "evict_last")
        pol_a, pol_b = (first, last) if cfg.hints == "a" else (last, first)

    def tile(m0: Reg, n0: Reg, span: KSpan) -> None:
        # my slice of the shared tile (whose origin the CTAs have in common)
        at = k.mad(rank, slice_rows, n0 if shared_b else m0) if rank is not None else None
        rows.begin_tile(k, cfg, m0 if at is None or shared_b else at)
        with k.for_range(span.start, span.stop) as kb:
            kc = k.mul(kb, cfg.bk)
            p.wait_empty()
            p.arrive_expect_tx(stage_tx)
            slot, full = p.slot(smem, cfg.stage_bytes), p.full_barrier()

            def load(dst: Reg, tmap: Reg, row: Reg, mask: int | None = None,
                     outer: tuple[Reg | int, ...] = (), policy: Reg | None = pol_b) -> None:
                if mask is None:
                    ptx.cp_async_bulk_tensor(k, "shared::cluster", "global", dst, tmap,
                                             (kc, row, *outer), full, cache_policy=policy)
                else:
                    ptx.cp_async_bulk_tensor(k, "shared::cluster", "global", dst, tmap,
                                             (kc, row, *outer), full, cta_mask=mask,
                                             cache_policy=policy)

            def load_a(dst: Reg, tmap: Reg, row: Reg, mask: int | None = None,
                       outer: tuple[Reg | int, ...] = ()) -> None:
                load(dst, tmap, row, mask, outer, pol_a)
            if mine is None or at is None:      # no cluster
                rows.load_a(k, load_a, tmap_a, slot, m0, None)
                load(k.add(slot, cfg.a_bytes), tmap_b, n0)
            elif shared_b:
                rows.load_a(k, load_a, tmap_a, slot, m0, None)
                load(k.add(slot, mine), tmap_b, at, cta_mask)
            else:
                rows.load_a(k, load_a, tmap_a, k.add(slot, mine), at, cta_mask)
                load(k.add(slot, cfg.a_bytes), tmap_b, n0)
            p.advance()

    tile_loop(tile)


class Stages:
    """A consumer warpgroup's side of the ring: the wgmmas of one stage into an accumulator,
    and the release of the stage that `free` trails `read` by (the GEMM's consumers and
    samples/gemm_fp8_scaled.py's)."""

    def __init__(self, k: Kernel, cfg: Config, ring: MbarrierRing, smem: Symbol,
                 cw: Reg) -> None:
        self.k, self.cfg, self.smem = k, cfg, smem
        self.read, self.free = ring.consumer(), ring.consumer()
        self.leader = k.and_(k.tid.x, 127) == 0
        # this warpgroup's 64 rows of A (bm = 128), or its bn / 2 rows of B (bm = 64)
        self.a_rows = k.mul(cw, 64 * BK_BYTES) if cfg.bm == BM else None
        self.b_off = cfg.a_bytes if cfg.bm == BM else k.mad(cw, cfg.wg_n * BK_BYTES,
                                                            cfg.a_bytes)

    def mma(self, acc: Fragment, first: bool) -> None:
        """The stage's wgmmas into `acc`, the first with scale-d 0 when `first` (the
        accumulator starts from zero), committed as one group."""
        k, cfg = self.k, self.cfg
        self.read.wait_full()
        slot = self.read.slot(self.smem, cfg.stage_bytes)
        da = descriptor(k, cfg.layout_a, slot if self.a_rows is None else
                        k.add(slot, self.a_rows))
        db = descriptor(k, cfg.layout_b_wg, k.add(slot, self.b_off))
        ptx.wgmma_fence(k)
        for i, kk in enumerate(range(0, cfg.bk, cfg.kstep)):
            ptx.wgmma_mma_async(k, acc, da.k_step(k, kk), db.k_step(k, kk),
                                0 if first and i == 0 else 1, atype=cfg.wtype)
        ptx.wgmma_commit_group(k)
        self.read.advance()

    def release(self) -> None:
        with self.k.if_(self.leader):
            self.free.release(scope="cta")    # .release.cluster costs a MEMBAR.ALL.GPU per stage
        self.free.advance()


def _consumer(k: Kernel, cfg: Config, ring: MbarrierRing, smem: Symbol, scale_p: Symbol | None,
              epi: TileStore, tile_loop: TileLoop) -> None:
    acc = k.fragment(t.f32, shape=(64, cfg.wg_n), zero=False)
    stages = Stages(k, cfg, ring, smem, epi.cw)
    scale = k.ld_param(scale_p) if scale_p is not None else None

    def tile(m0: Reg, n0: Reg, span: KSpan) -> None:
        stages.mma(acc, first=True)                    # scale-d 0: the tile starts from zero
        with k.for_range(1, span.count):
            stages.mma(acc, first=False)
            ptx.wgmma_wait_group(k, 1)                 # the previous stage is read: free it
            stages.release()
        ptx.wgmma_wait_group(k, 0)
        stages.release()
        if scale is not None:
            for r in acc:
                k.mul(r, scale, type=t.f32, dst=r)
        if cfg.split_k:
            if not isinstance(epi, AccStore):
                raise ValueError(f"build_gemm: {cfg.name} is split-K: its Output's epilogue "
                                 "must take the f32 accumulator (AccStore.store_acc), got "
                                 f"{type(epi).__name__}")
            epi.store_acc(acc, m0, n0, span)
        else:
            epi.store(acc.to_packed(t.bf16), m0, n0)

    tile_loop(tile)
    epi.finish()


class Epilogue:
    """A consumer warpgroup's bf16 output of its 64 x 256 rows. With `tma_store` (N a
    multiple of 8): `TmaStoreEpilogue` (`stmatrix` into a 128B-swizzled staging buffer, half
    the tile at a time, then TMA stores clipped at the M and N edges by the tensor map, which
    run on while the warpgroup goes on to the next tile). Otherwise: predicated 32-bit stores
    of bf16 pairs."""

    def __init__(self, k: Kernel, cfg: Config, smem: Symbol, map_c: Symbol, c_p: Symbol,
                 tma_store: Reg, cw: Reg, M: Reg, N: Reg, rows: Rows = DEFAULT_ROWS) -> None:
        self.k, self.cw, self.M, self.N, self.rows = k, cw, M, N, rows
        self.tma = tma_store != 0
        self.c_base = k.ld_param(c_p)
        buf = k.add(k.mov(smem), k.mad(cw, EPI_BYTES, cfg.epi_off))
        # named barrier 1 or 2: this warpgroup's
        self.staged = TmaStoreEpilogue(k, buf, k.tensormap_addr(map_c), k.add(cw, 1),
                                       rank=rows.c_rank)

    def store(self, packed: Fragment, m0: Reg, n0: Reg) -> None:
        k = self.k
        row0 = k.mad(self.cw, 64, m0)
        map_row, outer, flat, left = self.rows.c_place(k, row0)
        with k.if_(self.tma):
            self.staged.store(packed, map_row, n0, *outer)
        with k.else_():
            M, N = self.M, self.N
            out = k.add(self.c_base, k.add(k.mul(flat, k.shl(N, 1), type=t.u32, mode="wide"),
                                           k.mul(n0, 2, type=t.u32, mode="wide")))
            packed.store(out, N, rows=k.sub(M, flat, type=t.s32) if left is None else left,
                         cols=k.sub(N, n0, type=t.s32))

    def finish(self) -> None:
        self.staged.finish()


def build_module(dtypes: Iterable[str] = tuple(DTYPES), bounded: bool = False) -> Module:
    """Every variant of `dtypes`: the default, the skinny-M, the one-row and the wide kernel
    of each. (The GEMMs built on this one, samples/allgather_gemm.py and
    samples/gemm_reduce_scatter.py, take the VARIANTS alone: they never ask for WIDE.)"""
    kernels = [build_gemm(cfg[d], bounded) for cfg in ALL_VARIANTS.values() for d in dtypes]
    if bounded:
        return debug.module(kernels, name="gemm_hopper", target="sm_90a")
    return Module(kernels, name="gemm_hopper", target="sm_90a")


# -- host side ---------------------------------------------------------------------------------
def check_shape(dtype: str, m: int, n: int, kdim: int) -> None:
    """The shapes the kernels take (TMA's 16-byte pitches, paired bf16 stores)."""
    cfg = CONFIGS[dtype]
    if min(m, n, kdim) < 1 or (kdim * cfg.elem) % 16 or n % 2:
        raise ValueError(f"{cfg.name}: M, N, K >= 1, K * {cfg.elem} bytes a multiple of 16, "
                         f"N even; got M={m} N={n} K={kdim}")


def tensor_maps(dtype: str, a: object, b: object, m: int, n: int, kdim: int,
                cfg: Config | None = None) -> tuple[TensorMap, TensorMap]:
    """The tensor maps of A (M x K) and B (N x K) for device buffers `a`, `b` (any pointer),
    for variant `cfg` (default: `config_for(dtype, m, n)`)."""
    from ptxdsl import runtime as rt
    cfg = cfg or config_for(dtype, m, n)
    tma = "BFLOAT16" if dtype == "bf16" else "UINT8"
    box_a, box_b = cfg.boxes_for(m, n)
    ma = rt.TensorMap.tiled(a, (m, kdim), tma, box_a.tma_box[::-1], swizzle="128B")
    mb = rt.TensorMap.tiled(b, (n, kdim), tma, box_b.tma_box[::-1], swizzle="128B")
    box_a.check_tensormap(ma)
    box_b.check_tensormap(mb)
    return ma, mb


def check_boxes(cfg: Config, m: int, n: int, ma: TensorMap, mb: TensorMap,
                names: str = "AB") -> None:
    """Refuse maps of A and B (`names`: what the caller calls them) made for another variant
    than `cfg`: the kernel's stage byte counts would not match their boxes, and its waits
    would never end. (boxes_for also refuses a fitted kernel more than one tile row or
    column, as tensor_maps does when it makes the maps.)"""
    for name, tmap, box in zip(names, (ma, mb), cfg.boxes_for(m, n), strict=True):
        desc = getattr(tmap, "desc", None)      # None: raw bytes, nothing to compare
        if desc is not None and tuple(desc.box_dim) != tuple(box.tma_box):
            raise ValueError(f"{cfg.name}: {name}'s tensor map must have this variant's "
                             f"boxDim {list(box.tma_box)} (tensor_maps(..., cfg) for the "
                             f"same cfg), got {list(desc.box_dim)}")


def output_map(c: object, m: int, n: int) -> TensorMap | None:
    """C's tensor map for the TMA-store epilogue, or None when N * 2 bytes is not a multiple
    of 16 (TMA's pitch rule; the kernel then stores directly)."""
    from ptxdsl import runtime as rt
    if n % 8:
        return None
    return rt.TensorMap.tiled(c, (m, n), "BFLOAT16", (64, EPI_COLS), swizzle="128B")


def grid_for(m: int, n: int, sms: int, cfg: Config = CONFIGS["bf16"]) -> int:
    """CTAs of a persistent launch of `cfg`: one cluster per cluster tile, at most one CTA
    per SM."""
    cl = cfg.cluster
    tiles = -(-m // cfg.tile_m) * -(-n // cfg.tile_n)
    return cl * max(1, min(tiles, sms // cl))


def launch(module: LoadedModule, dtype: str, a: object, b: object, c: object, m: int, n: int,
           kdim: int, scale: float = 1.0, *, sms: int, stream: object = None,
           maps: tuple[TensorMap, TensorMap, TensorMap | None] | None = None,
           cfg: Config | None = None) -> None:
    """C = A @ B^T on the GPU with the kernel of variant `cfg` (default `config_for(dtype,
    m, n)`) from the loaded `module`; `maps`: the three maps from `tensor_maps` (for the same
    variant) + `output_map`, to skip encoding them per call."""
    check_shape(dtype, m, n, kdim)
    cfg = cfg or config_for(dtype, m, n)
    ma, mb, mc = maps or (*tensor_maps(dtype, a, b, m, n, kdim, cfg), output_map(c, m, n))
    if maps:
        check_boxes(cfg, m, n, ma, mb)
    args = (ma, mb, mc or ma, c, m, n, kdim, int(mc is not None)) + \
        ((scale,) if dtype != "bf16" else ())
    module[cfg.name].launch(grid_for(m, n, sms, cfg), THREADS, args,
                            shared_mem=cfg.smem_bytes, stream=stream,
                            cluster=(cfg.cluster, 1, 1) if cfg.cluster > 1 else None)


def bf16_round(x: np.ndarray) -> np.ndarray:
    """bf16 bit patterns of f32 values, rounded to nearest even (NaN-free inputs)."""
    u = np.ascontiguousarray(x, np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def e4m3_bits(x: np.ndarray) -> np.ndarray:
    """e4m3 bit patterns of small integers (|x| <= 16: exact in e4m3)."""
    x = np.asarray(x, np.int64)
    mag = np.abs(x)
    out = np.zeros(x.shape, np.uint8)
    nz = mag > 0
    e = np.floor(np.log2(np.where(nz, mag, 1))).astype(np.int64)
    mant = np.where(nz, (mag * 8 >> e) - 8, 0)      # 3 mantissa bits (exact for |x| <= 16)
    out[nz] = ((e[nz] + 7) << 3 | mant[nz]).astype(np.uint8)
    return out | np.where(x < 0, 0x80, 0).astype(np.uint8)


def reference_inputs(dtype: str, m: int, n: int, kdim: int,
                     seed: int = 17) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
    """(a bits, b bits, exact f32 A @ B^T * scale, scale): integer-valued inputs whose sums
    are exact in f32 for the K used here, so only the final rounding to bf16 remains."""
    rng = np.random.default_rng(seed)
    lim = 4 if dtype == "bf16" else 3
    a = rng.integers(-lim, lim + 1, (m, kdim))
    b = rng.integers(-lim, lim + 1, (n, kdim))
    scale = 1.0 if dtype == "bf16" else 0.375
    want = (a.astype(np.float64) @ b.T.astype(np.float64)) * scale
    if dtype == "bf16":
        bits = (bf16_round(a.astype(np.float32)), bf16_round(b.astype(np.float32)))
    else:
        bits = (e4m3_bits(a), e4m3_bits(b))
    return bits[0], bits[1], want.astype(np.float32), scale


# tails in M, N, K; K < a stage; one tile row (A's box 104 rows for the fitted kernel)
SHAPES = ((300, 520, 208), (129, 258, 48), (512, 256, 1024), (100, 392, 144))


def run(shapes: Iterable[tuple[int, int, int]] = SHAPES, dtypes: Iterable[str] = tuple(DTYPES),
        sms: int | None = None, bounded: bool = False,
        variants: Iterable[str] = tuple(ALL_VARIANTS)) -> Report:
    """Each kernel of `dtypes` and `variants` ("default", "skinny", "row", "wide",
    "row_fit") on each (M, N, K) of `shapes` (the fitted one-row kernel where M <= BM);
    `sms` caps the persistent grid (default: the GPU's SM count); `bounded`: the debug build
    (a hung wait raises `WaitTimeoutError` naming its barrier)."""
    from ptxdsl import runtime as rt
    report = Report("gemm_hopper")
    mod = build_module(bounded=bounded).load()
    recorder = debug.Recorder().attach(mod) if bounded else None
    sms = sms or rt.device_info(0).sm_count
    for cfg in (ALL_VARIANTS[v][d] for v in variants for d in dtypes):
        fn = mod[cfg.name]
        report.note(f"{cfg.name}: {fn.num_regs} registers per thread at launch (setmaxnreg "
                    f"{PRODUCER_REGS}/{CONSUMER_REGS}), {cfg.smem_bytes} bytes of dynamic "
                    "shared memory")
        for m, n, kdim in shapes:
            if cfg.fit == "a" and m > cfg.bm:
                continue
            a, b, want, scale = reference_inputs(cfg.dtype, m, n, kdim)
            dev_a, dev_b = rt.DeviceBuffer.from_numpy(a), rt.DeviceBuffer.from_numpy(b)
            c = rt.DeviceBuffer.empty((m, n), np.uint16)
            c.memset(POISON)
            launch(mod, cfg.dtype, dev_a, dev_b, c, m, n, kdim, scale, sms=sms, cfg=cfg)
            sync(recorder=recorder)
            report.check_equal(f"{cfg.name} M={m} N={n} K={kdim}", c.to_numpy(),
                               bf16_round(want))
    return report


def main(argv: list[str] | None = None) -> int:
    return sample_main(argv, __doc__, build_module, run)


if __name__ == "__main__":
    raise SystemExit(main())
