"""A GEMM for decode shapes: Y = X W^T with few rows in X (M <= DECODE_M), bf16 or fp8.

X is M x K and W is N x K (`nn.Linear`'s weight), both row-major (K-major); Y is M x N bf16,
accumulated in f32 (e4m3: times `scale`, the product of the per-tensor scales). At decode
time M is a batch of tokens (1 to 128) while W is large (N, K in the thousands), so the
kernel's time is the time to read W once from HBM: the design keeps every SM streaming W.

It is samples/gemm_hopper.py's persistent warp-specialised kernel (no copy of it), built
from its `Config` with three of its options and its `Output` hook:

- Swapped operands: the GEMM computes Y^T = W X^T, so W's rows fill the wgmma M side (128
  per CTA tile, 64 per consumer warpgroup) and X's M rows are the wgmma N (`bn` = 8, 16, 32,
  64 or 128: one kernel per width, `launch` takes the narrowest that holds M; TMA zero-fills
  X's rows past M). A W tile of 128 x 128 bytes is 16 KiB, an X tile `bn` x 128 bytes.
- Split-K (`Config.split_k`): the N / 128 W tiles are too few for the SMs (64 at N = 8192
  on 132 SMs), so K is cut into splits of `kper` k-blocks, chosen on the host (`split_for`)
  so that tiles x splits fill the SMs in as few waves as the per-unit overhead allows. Each
  (tile, split) unit stores its f32 partial sum to a workspace and counts it on the tile's
  ticket (`atom.add.acq_rel.gpu`, after a barrier of the warpgroup); the unit that counts
  last resets the ticket for the next call and adds the partials up in split order, so the
  sum, and Y, are the same bit for bit whichever CTA finishes last. With one split the
  accumulator is stored as it is.
- Shared X (widths from CLUSTER_BN = 128): clusters of 2 CTAs on adjacent W tiles, each
  loading half of the X tile and multicasting it to both, so X's bytes come out of L2 once
  per pair (at M = 64 every CTA would otherwise read half as many bytes of X as of W).
- Deep ring (no epilogue staging: `Config(staging=False)`): as many stages as 227 KiB of
  shared memory holds (13 at bn = 8, 7 at bn = 128), so enough bytes of W are in flight.
- X's box as tall as M (`Config(fit="b")`, widths below CLUSTER_BN): TMA's zero fill of X's
  rows past M cost more than loading them (on an H200, bf16 N = K = 8192: M = 33 and 40 ran
  at 44.6 and 42.8 us on the 64-wide kernel, M = 48 and 64 at 38.3 and 39.5); the stage's
  expect_tx is counted from M at run time, and the stale rows past M only reach Y^T's
  columns past M, which the epilogue never stores.
- L2 hints (`Config.hints`): W is loaded evict-first (read once), X evict-last (read by
  every CTA).
- Pairs (`PAIR`, `pair_for`): 128 W rows x 64 X rows per CTA, two CTAs side by side along
  X's rows sharing the W tile (each loads half of it and multicasts it to both), the
  orientation of cuBLAS's kernel at M = 128. `Linear` (and `plan` by default) takes them for
  bf16 at 104 < M <= 128 where gemm_hopper would take its one-row tiles and K is long or
  those tiles leave SMs idle (measured: the comment at PAIR).
- Transposed epilogue: the tile of Y^T (W rows x X rows) is written into Y with 16-bit
  stores, each lane's 8 consecutive W rows making 16 contiguous bytes of a row of Y,
  predicated on the M and N edges (Y is M x N: 1 MiB at M = 64, N = 8192, against 128 MiB
  of W, so its stores' cost is small and they need no TMA map; N may be odd).

Host side: `Linear(dtype)` is the one call for any M: `Linear("bf16")(x, w, y, m, n, k)` runs
this kernel for M <= LINEAR_DECODE_M and for the pairs' shapes, gemm_hopper's otherwise
(`kernel_for` says which), with its own workspace (`Decode`: the decode kernels with each
shape's plan and maps made once); `Linear(dtype, bounded=True)` is the debug build.
Underneath, `launch` takes the loaded module, the pointers of X, W, Y and a `Workspace`
(tickets + partials, `workspace_bytes`; zeroed once by `Workspace.allocate`, and left zeroed
by every call: one per stream, as two calls running at once must not share the tickets).
`config_for`, `split_for` and `plan` are the choices it makes, on the CPU. TMA needs K a
multiple of 8 (bf16) or 16 (e4m3).

W tiles of 64 rows (`W64`, `gemm_hopper.Config(bm=64)`; widths 16, 32, 64) at 8 < M <= 64,
the two consumer warpgroups on the same 64 W rows and each on half of the X tile: N = 8192
makes 128 tiles instead of 64, so one split fills 128 of 132 SMs where the 128-row tiles
needed two splits (and their partial sums' traffic). Measured on an H100 in one process
(BENCHMARKS.md section 7, N = K = 8192): 48.5-49.0 us at M = 16, 32, 64, 1.02-1.05x cuBLAS
and 92.5-93.2% of the HBM roofline, against 50.6-52.3 us, 0.95-0.99x and 87.3-89.2% with
the 128-row tiles. M <= 8 keeps those (a 64-row tile's half of 8 X rows is no wgmma N).
`plan`/`launch`/`run` also take `w_rows=` (64 or 128: that tiling, where it exists) and
`splits=` (that many splits instead of `split_for`'s; the ticketed sum takes any count, in
split order) to measure the alternatives.

The run checks every kernel against numpy (integer-valued inputs, so the f32 sums are exact
and only the bf16 rounding remains: compared bit for bit) at M at each width's edges, odd N,
K tails and small grids (several units per CTA), and that two calls give identical bits.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from ptxdsl import Addr, Kernel, Module, Reg, Symbol, debug, t
from ptxdsl.fragments import Fragment
from ptxdsl.sample_runner import POISON, Report, sample_main, sibling_sample, sync
from ptxdsl.split_sum import ordered_split_sum

if TYPE_CHECKING:       # mypy reads the samples as the top-level modules they are as scripts
    import gemm_hopper as gh

    from ptxdsl.runtime import LoadedModule, TensorMap
else:                   # the GEMM this one is built from
    gh = sibling_sample(__file__, "gemm_hopper")

DECODE_M = 128                      # launch takes M up to this (the widest kernel's bn)
MAP_CACHE = 256                     # Linear's tensor maps kept (then it starts over)
# `Linear` runs this sample's kernel up to here and gemm_hopper's above. Measured on an H100
# (BENCHMARKS.md section 7, N = K = 8192): at M = 64 the decode kernel ran at 0.93x cuBLAS
# against 0.79x for gemm_hopper's `_n128`; at M = 128 at 0.89x against 0.99x for its `_row`.
LINEAR_DECODE_M = 64
WIDTHS = (8, 16, 32, 64, 128)       # X rows per tile: the wgmma N of each kernel
SMEM_LIMIT = 227 * 1024             # dynamic shared memory per CTA on sm_90
MAX_SPLITS = 16
# A unit's cost beyond its k-blocks (filling the ring, the epilogue, the reduction), in
# k-blocks: what keeps split_for from cutting K finer than the waves gain. Fitted on an H100
# (2026-11-28, bf16 M = 16, N = 14336, K = 4096, 64-row tiles, 224 of them: 1 / 2 / 3 / 4
# splits took 44.8 / 49.6 / 53.1 / 52.6 us, cuBLAS 47.0): about 8; at 2 the model took 4
# splits, 0.89x cuBLAS where 1 split is 1.05x. The same run's other shapes (M = 1 and 64 at
# N = 14336, K = 4096; M = 16 at 8192 x 8192 and 4096 x 14336) keep the split it measured best.
UNIT_OVERHEAD = 8
TICKET_ALIGN = 16                   # the partials start 16-byte aligned (v4 stores)
# Widths from this one up run in clusters of 2 CTAs along W's rows that share the X tile (each
# loads half of it and multicasts it): every CTA reads all of X's K range from L2, and sharing
# it halves that traffic. Measured on an H100 (N = K = 8192, one process, cuBLAS alongside):
# without clusters M = 32 ran at 0.987x cuBLAS and M = 64 at 0.981x, with them at 0.962x and
# 0.961x, so only the widest kernel (M > 64, which `Linear` leaves to gemm_hopper) pairs up.
CLUSTER_BN = 128


def _config(dtype: str, bn: int, w_rows: int = gh.BM, pair: bool = False) -> gh.Config:
    stage = w_rows * gh.BK_BYTES + bn * gh.BK_BYTES     # a W tile and an X tile
    stages = SMEM_LIMIT // (stage + 16)                 # + a full and an empty mbarrier
    name = f"gemm_decode_{dtype}_n{bn}" + ("" if w_rows == gh.BM else f"_w{w_rows}") + \
        ("_pair" if pair else "")
    if pair:        # two CTAs side by side along X's rows, sharing (multicasting) the W tile
        return gh.Config(dtype, bn=bn, cluster=2, stages=stages, along="n", name=name,
                         split_k=True, staging=False, hints="a", bm=w_rows)
    cluster = 2 if bn >= CLUSTER_BN else 1
    return gh.Config(dtype, bn=bn, cluster=cluster, stages=stages, along="m", name=name,
                     split_k=True, staging=False, hints="a", bm=w_rows,
                     fit="b" if cluster == 1 else None)


VARIANTS = {d: {bn: _config(d, bn) for bn in WIDTHS} for d in gh.DTYPES}   # dtype -> bn -> cfg
# 64-row W tiles, `launch`'s choice for W64_FROM < M <= 64 (module doc): twice the tiles
# (N = 8192: 128 units at one split for 132 SMs), each consumer warpgroup on half of the X
# tile's rows (`gh.Config(bm=64)`).
W64_WIDTHS = (16, 32, 64)
W64_FROM = 8
# e4m3 too since 2026-11-29: on an H200, bit for bit against numpy, then in one process against
# torch._scaled_mm at N = K = 8192, M = 16 / 32 / 64: 1.030 / 1.047 / 1.132 against 0.991 /
# 0.972 / 1.013 with the 128-row tiles (at M = 64, N = 14336, K = 4096 1.051 against 1.083)
W64_DTYPES = ("bf16", "e4m3")
W64 = {d: {bn: _config(d, bn, 64) for bn in W64_WIDTHS} for d in gh.DTYPES}
W_ROWS = {gh.BM: (WIDTHS, VARIANTS), 64: (W64_WIDTHS, W64)}
# Pairs of 128 x 64 tiles sharing the W tile (experiment, M = 65 .. 128)
# Pairs (module doc): 128 W rows x 64 X rows per CTA, two CTAs side by side along X's rows
# sharing the W tile; `Linear` takes them for bf16 where `pair_for` says (measured on an
# H200 in one process against cuBLAS, N = K = 8192: M = 112 / 120 / 128 1.035 / 1.015 /
# 1.030 against 1.022 / 0.986 / 0.977 for gemm_hopper's one-row tiles, but M = 104 0.947
# against 1.004, as the second CTA's X tile is mostly rows past M; M = 128, N = 4096, K = 8192
# 1.075 against 0.934, N = 2048 1.023 against 0.720, K = 16384 1.008 against 0.951; and
# N = 8192 with K = 4096 / 6144 0.999 / 1.006 against 1.011 / 1.027, where the one-row
# tiles fill the SMs and a tile is short). e4m3 keeps gemm_hopper's one-row tiles there
# (1.028 against 1.073 at M = 128, N = K = 8192).
PAIR_BN = 64
PAIR = {d: _config(d, PAIR_BN, pair=True) for d in gh.DTYPES}
PAIR_DTYPES = ("bf16",)
PAIR_FROM = 104                 # pairs for PAIR_FROM < M <= 2 * PAIR_BN ...
PAIR_K = 8192                   # ... where K is at least this long, or the one-row tiles
PAIR_CTAS = gh.WAVE_SMS * 3 // 4    # would leave a quarter of the SMs idle


def pair_for(dtype: str, m: int, n: int, kdim: int) -> bool:
    """Whether `Linear` (and `plan` by default) takes the pairs (PAIR) for M x N x K: bf16,
    PAIR_FROM < M <= 128, where gemm_hopper would take its one-row tiles (`config_for`
    with N: not where its 128 x 128 tiles fill their waves as well) and K >= PAIR_K or those
    tiles' CTAs are at most PAIR_CTAS."""
    if dtype not in PAIR_DTYPES or not PAIR_FROM < m <= 2 * PAIR_BN:
        return False
    if gh.config_for(dtype, m, n) is not gh.ROW_FIT[dtype]:
        return False
    return kdim >= PAIR_K or -(-n // gh.ROW_FIT[dtype].bn) <= PAIR_CTAS


def w_rows_for(dtype: str, m: int) -> int:
    """The W rows per tile `launch` takes for M rows of X: 64 with W64_FROM < M <= 64 (for the
    dtypes of W64_DTYPES), else 128 (module doc)."""
    return 64 if dtype in W64_DTYPES and isinstance(m, int | np.integer) and \
        W64_FROM < m <= W64_WIDTHS[-1] else gh.BM


def config_for(dtype: str, m: int, w_rows: int | None = None, *,
               pair: bool = False) -> gh.Config:
    """The kernel for M rows of X: the narrowest width that holds them, of the W tiles of
    `w_rows` rows (default `w_rows_for(dtype, m)`); `pair`: the pairs (PAIR, M up to 128,
    128-row W tiles)."""
    if dtype not in VARIANTS:
        raise ValueError(f"gemm_decode: dtype must be one of {', '.join(VARIANTS)}, got "
                         f"{dtype!r}")
    if not isinstance(pair, bool):
        raise ValueError(f"gemm_decode: pair must be a bool, got {pair!r}")
    if pair:
        if w_rows not in (None, gh.BM) or isinstance(w_rows, bool):
            raise ValueError(f"gemm_decode: the pairs (pair=True) have {gh.BM}-row W tiles, "
                             f"got w_rows={w_rows!r}")
        config_for(dtype, m, gh.BM)         # M: 1 to DECODE_M
        return PAIR[dtype]
    if w_rows is None:
        w_rows = w_rows_for(dtype, m)
    if isinstance(w_rows, bool) or w_rows not in W_ROWS:
        raise ValueError(f"gemm_decode: w_rows (W rows per tile) must be one of "
                         f"{', '.join(map(str, W_ROWS))}, got {w_rows!r}")
    widths, variants = W_ROWS[w_rows]
    top = widths[-1]
    if isinstance(m, bool) or not isinstance(m, int | np.integer) or not 1 <= m <= top:
        if w_rows != gh.BM:
            raise ValueError(f"gemm_decode: M must be 1 to {top} with w_rows={w_rows} (X's "
                             f"rows; the {gh.BM}-row tiles take up to DECODE_M = "
                             f"{DECODE_M}), got M={m!r}")
        raise ValueError(f"gemm_decode: M must be 1 to DECODE_M = {DECODE_M} (X's rows; "
                         f"larger M: gemm_hopper.launch), got M={m!r}")
    return variants[dtype][next(bn for bn in widths if bn >= m)]


def split_for(tiles: int, kblocks: int, slots: int) -> int:
    """k-blocks per split (`kper`) for `tiles` output tiles (cluster tiles) of `kblocks`
    k-blocks, `slots` of which run at once (SMs, or clusters): the split count S minimising
    waves x (k-blocks per unit + UNIT_OVERHEAD), the fewest splits on a tie (each split adds
    a partial sum's traffic)."""
    best: tuple[int, int] | None = None
    for s in range(1, min(MAX_SPLITS, kblocks) + 1):
        kper = -(-kblocks // s)
        cost = -(-tiles * s // slots) * (kper + UNIT_OVERHEAD)
        if best is None or cost < best[0]:
            best = (cost, kper)
    assert best is not None       # kblocks >= 1
    return best[1]


class Plan(NamedTuple):
    """What `launch` runs for one shape: the variant, its CTA tiles (a cluster tile is one per
    CTA of the cluster), k-blocks per split and the splits that makes, the persistent grid
    (whole clusters) and the workspace bytes it needs."""

    cfg: gh.Config
    tiles: int
    kper: int
    splits: int
    grid: int
    workspace: int


def check_shape(dtype: str, m: int, n: int, kdim: int, w_rows: int | None = None) -> None:
    """The shapes the kernels take: 1 <= M <= DECODE_M (64 with `w_rows=64`), N >= 1, K *
    element bytes a multiple of 16 (TMA's row pitch)."""
    config_for(dtype, m, w_rows)
    elem = gh.CONFIGS[dtype].elem
    for what, v in (("M", m), ("N", n), ("K", kdim)):
        if isinstance(v, bool) or not isinstance(v, int | np.integer):
            raise ValueError(f"gemm_decode: {what} must be an int, got {v!r}")
    if n < 1 or kdim < 1 or (kdim * elem) % 16:
        raise ValueError(f"gemm_decode: N >= 1 and K >= 1 with K * {elem} bytes a multiple "
                         f"of 16 ({dtype}), got M={m} N={n} K={kdim}")


def plan(dtype: str, m: int, n: int, kdim: int, sms: int, *, splits: int | None = None,
         w_rows: int | None = None, pair: bool | None = None) -> Plan:
    """The launch of Y = X W^T at M x N x K on `sms` SMs. `splits`: cut K into that many
    splits instead of `split_for`'s count (fewer when K has fewer k-blocks: splits of
    ceil(k-blocks / splits), none empty); `w_rows`: the W tiles of that many rows instead of
    `w_rows_for(dtype, m)`'s; `pair`: the pairs (PAIR) or not, instead of `pair_for`'s
    choice (which `w_rows` turns off)."""
    check_shape(dtype, m, n, kdim, w_rows)
    if pair is None:
        pair = w_rows is None and pair_for(dtype, m, n, kdim)
    if isinstance(sms, bool) or not isinstance(sms, int) or sms < 1:
        raise ValueError(f"gemm_decode: sms must be a positive int, got {sms!r}")
    if splits is not None and (isinstance(splits, bool) or not isinstance(splits, int)
                               or not 1 <= splits <= MAX_SPLITS):
        raise ValueError(f"gemm_decode: splits must be None (split_for's choice) or an int "
                         f"from 1 to MAX_SPLITS = {MAX_SPLITS}, got {splits!r}")
    cfg = config_for(dtype, m, w_rows, pair=pair)
    cl = cfg.cluster
    cluster_tiles = -(-n // cfg.tile_m) * -(-m // cfg.tile_n)
    kblocks = -(-kdim // cfg.bk)
    clusters = max(1, sms // cl)
    kper = split_for(cluster_tiles, kblocks, clusters) if splits is None else \
        -(-kblocks // splits)
    splits = -(-kblocks // kper)
    return Plan(cfg, cluster_tiles * cl, kper, splits,
                cl * min(cluster_tiles * splits, clusters),
                workspace_bytes(cfg, cluster_tiles * cl, splits))


def _part_bytes(cfg: gh.Config) -> int:
    return 64 * cfg.wg_n * 4         # one consumer warpgroup's f32 accumulator


def _tickets_bytes(tiles: int) -> int:
    return -(-tiles * 2 * 4 // TICKET_ALIGN) * TICKET_ALIGN     # a u32 per tile and warpgroup


def workspace_bytes(cfg: gh.Config, tiles: int, splits: int) -> int:
    """Tickets, then (with splits) each unit's two partial sums."""
    return _tickets_bytes(tiles) + (tiles * splits * 2 * _part_bytes(cfg) if splits > 1 else 0)


class Workspace:
    """Split-K scratch in device memory at `ptr` (`nbytes` long): the tickets must be zero
    before the first call (`allocate` zeroes them; each call leaves them zero). One per
    stream: two calls in flight at once must not share it."""

    def __init__(self, ptr: object, nbytes: int) -> None:
        self.ptr, self.nbytes = ptr, nbytes     # ptr: an int, or a buffer kept alive here

    @classmethod
    def allocate(cls, nbytes: int, device: int = 0) -> Workspace:
        from ptxdsl import runtime as rt
        size = max(nbytes, TICKET_ALIGN)
        return cls(rt.DeviceBuffer.zeros(size, device=device), size)


# -- the kernel's output: split-K sums, transposed into Y ------------------------------------
class DecodeOut:
    """gemm_hopper's `Output`: Y's pointer and the workspace after the GEMM's parameters
    (whose M is W's rows, N, and whose N is X's rows, M)."""

    def declare(self, k: Kernel) -> None:
        self.y_p = k.param_ptr("y")
        self.ws_p = k.param_ptr("workspace")

    def first_row(self, k: Kernel, cfg: gh.Config, tiles_m: Reg) -> None:
        return None

    def epilogue(self, k: Kernel, cfg: gh.Config, smem: Symbol, cw: Reg, M: Reg,
                 N: Reg) -> DecodeStore:
        return DecodeStore(self, k, cfg, cw, M, N)


class DecodeStore:
    """One consumer warpgroup's units: its 64 W rows x bn X rows of the tile's Y^T."""

    def __init__(self, out: DecodeOut, k: Kernel, cfg: gh.Config, cw: Reg, w_rows: Reg,
                 x_rows: Reg) -> None:
        self.k, self.cfg, self.cw, self.w_rows, self.x_rows = k, cfg, cw, w_rows, x_rows
        self.y = k.cvta(k.ld_param(out.y_p), "global", to=True)
        ws = k.cvta(k.ld_param(out.ws_p), "global", to=True)
        tid = k.and_(k.tid.x, 127)
        self.leader = tid == 0
        self.barrier = k.add(cw, 1)       # named barrier 1 or 2: this warpgroup's
        cl = cfg.cluster
        # in a cluster each CTA has its own tiles' tickets and partials: cluster tile t's
        # CTA r keys them as t * cl + r
        self.rank = k.read_special("cluster_ctarank") if cl > 1 else None
        tiles = k.mul(k.mul(k.div(k.add(w_rows, cfg.tile_m - 1), cfg.tile_m), cl),
                      k.div(k.add(x_rows, cfg.tile_n - 1), cfg.tile_n))
        self.tickets = ws
        tickets_bytes = k.and_(k.add(k.mul(tiles, 8), TICKET_ALIGN - 1), -TICKET_ALIGN,
                               type=t.b32)
        # this thread's 16 bytes of each quad of the partials (a partial is stored quad-major,
        # so each v4 store of the warpgroup is 2 KiB contiguous)
        self.parts = k.add(k.add(ws, k.cvt(tickets_bytes, t.u64)),
                           k.cvt(k.mul(tid, 16), t.u64))

    def store(self, packed: Fragment, m0: Reg, n0: Reg) -> None:
        raise ValueError("gemm_decode: the split-K kernel stores f32 accumulators "
                         "(store_acc), not packed tiles")

    def store_acc(self, acc: Fragment, m0: Reg, n0: Reg, span: gh.KSpan) -> None:
        k = self.k
        assert span.splits is not None and span.tile is not None and span.split is not None
        tile = span.tile if self.rank is None else k.mad(span.tile, self.cfg.cluster, self.rank)
        holds = span.splits == 1
        with k.if_(span.splits != 1):
            k.mov(self._add_up(acc, tile, span.split, span.splits), dst=holds)
        with k.if_(holds):
            self._store_transposed(acc, m0, n0)

    def _add_up(self, acc: Fragment, tile: Reg, split: Reg, splits: Reg) -> Reg:
        """Store this unit's partial, count it on the tile's ticket; the unit that counts last
        resets the ticket and sums the tile's partials in split order into `acc`. Returns
        "this warpgroup holds the tile's sum"."""
        k = self.k
        part = _part_bytes(self.cfg)
        first = k.mad(k.mul(tile, splits), 2, self.cw)          # the tile's split 0
        counter = k.add(self.tickets, k.mul(k.mad(tile, 2, self.cw), 4, type=t.u32,
                                            mode="wide"))
        return ordered_split_sum(
            k, acc, mine=k.add(self.parts, k.mul(k.mad(split, 2, first), part, type=t.u32,
                                                 mode="wide")),
            first=k.add(self.parts, k.mul(first, part, type=t.u32, mode="wide")),
            stride=2 * part, counter=counter, parts=splits, barrier=self.barrier,
            leader=self.leader)

    def _store_transposed(self, acc: Fragment, m0: Reg, n0: Reg) -> None:
        """Value (w, x) of the tile goes to Y[x, w]: bf16, predicated on x < M and w < N."""
        k, cfg = self.k, self.cfg
        row0, col0 = acc.origin()
        if cfg.bm == gh.BM:         # the warpgroup's 64 W rows, all the tile's X rows
            w = k.add(k.mad(self.cw, 64, m0), row0)        # W row: Y's column
            x = k.add(n0, col0)                            # X row: Y's row
        else:                       # all the tile's 64 W rows, its half of the X rows
            w = k.add(m0, row0)
            x = k.add(k.mad(self.cw, cfg.wg_n, n0), col0)
        base = k.add(self.y, k.mul(k.mad(x, self.w_rows, w), 2, type=t.u32, mode="wide"))
        pitch = k.shl(self.w_rows, 1)
        w_ok = {dr: k.add(w, dr) < self.w_rows for dr in (0, 8)}
        cols: dict[int, tuple[Reg, Reg]] = {}
        for i, r in enumerate(acc.regs):
            dr, dc = acc.offsets(i)
            if dc not in cols:
                at = base if dc == 0 else k.add(base, k.mul(pitch, dc, type=t.u32, mode="wide"))
                cols[dc] = (at, k.add(x, dc))
            at, xdc = cols[dc]
            ok = k.setp("lt", xdc, self.x_rows, type=t.u32, bool_op="and", c=w_ok[dr])
            v = k.cvt(r, t.bf16, rnd="rn")
            with k.guard(ok):
                k.st(Addr(at, 2 * dr), v, type=t.b16, space="global")

    def finish(self) -> None:
        """Nothing in flight: the stores are plain."""


def build_kernel(dtype: str = "bf16", bn: int = 64, bounded: bool = False,
                 w_rows: int = gh.BM) -> Kernel:
    return gh.build_gemm(W_ROWS[w_rows][1][dtype][bn], bounded, output=DecodeOut())


def build_module(dtypes: Iterable[str] = tuple(gh.DTYPES), bounded: bool = False, *,
                 w64: bool = True) -> Module:
    """Every width of `dtypes`, and with `w64` the 64-row W tiles' too (`W64`, which
    `launch` takes for 8 < M <= 64: leave them out only for the other tiling's A/B); `bounded`:
    every mbarrier wait traps after 2 s with a record of the barrier it waited on
    (`ptxdsl.debug`)."""
    dtypes = tuple(dtypes)
    kernels = [build_kernel(d, bn, bounded) for d in dtypes for bn in WIDTHS]
    if w64:
        kernels += [build_kernel(d, bn, bounded, 64) for d in dtypes for bn in W64_WIDTHS]
    kernels += [gh.build_gemm(PAIR[d], bounded, output=DecodeOut()) for d in dtypes]
    if bounded:
        return debug.module(kernels, name="gemm_decode", target="sm_90a")
    return Module(kernels, name="gemm_decode", target="sm_90a")


# -- host side ---------------------------------------------------------------------------------
def tensor_maps(dtype: str, x: object, w: object, m: int, n: int, kdim: int,
                cfg: gh.Config | None = None) -> tuple[TensorMap, TensorMap]:
    """The maps of W (the GEMM's A: N x K) and X (its B: M x K) with the boxes of `cfg`
    (default: the kernel `plan` takes by default, `config_for(dtype, m, pair=pair_for(...))`)."""
    cfg = cfg or config_for(dtype, m, pair=pair_for(dtype, m, n, kdim))
    return gh.tensor_maps(dtype, w, x, n, m, kdim, cfg)


def launch(module: LoadedModule, dtype: str, x: object, w: object, y: object, m: int, n: int,
           kdim: int, scale: float = 1.0, *, sms: int, workspace: Workspace,
           stream: object = None, maps: tuple[TensorMap, TensorMap] | None = None,
           splits: int | None = None, w_rows: int | None = None, pair: bool | None = None,
           made: Plan | None = None) -> Plan:
    """Y = X W^T (X: M x K, W: N x K, Y: M x N bf16) with the decode kernel `plan` picks from
    the loaded `module`; `workspace`: at least `plan(...).workspace` bytes (`Workspace`);
    `maps`: `tensor_maps`' pair (of `plan(...).cfg`), to skip encoding them per call;
    `splits`, `w_rows`, `pair`: `plan`'s alternatives to its choice; `made`: the plan of these
    arguments, made once by the caller (making it costs about 10 us of host time, as much as
    the launch). Returns the plan."""
    p = made or plan(dtype, m, n, kdim, sms, splits=splits, w_rows=w_rows, pair=pair)
    if not isinstance(workspace, Workspace):
        raise ValueError(f"gemm_decode.launch: workspace must be a Workspace (Workspace."
                         f"allocate(plan(...).workspace)), got {type(workspace).__name__}")
    if workspace.nbytes < p.workspace:
        raise ValueError(f"gemm_decode.launch: the workspace has {workspace.nbytes} bytes, "
                         f"M={m} N={n} K={kdim} on {sms} SMs needs {p.workspace} "
                         f"({p.tiles} tiles x {p.splits} splits)")
    if maps:            # W is the GEMM's A (N rows), X its B (M rows)
        gh.check_boxes(p.cfg, n, m, *maps, names="WX")
    mw, mx = maps or tensor_maps(dtype, x, w, m, n, kdim, p.cfg)
    args = (mw, mx, n, m, kdim) + ((scale,) if dtype != "bf16" else ()) + \
        (p.kper, y, workspace.ptr)
    module[p.cfg.name].launch(p.grid, gh.THREADS, args, shared_mem=p.cfg.smem_bytes,
                              stream=stream)
    return p


def kernel_for(dtype: str, m: int, n: int | None = None, kdim: int | None = None) -> str:
    """The kernel `Linear` runs for M rows (and N columns and K, where given): this sample's
    up to LINEAR_DECODE_M, gemm_hopper's (`gemm_hopper.config_for`) above, except this
    sample's pairs where `pair_for` takes them (with N and K)."""
    if isinstance(m, int | np.integer) and not isinstance(m, bool) and m > LINEAR_DECODE_M:
        config_for(dtype, 1)                 # the dtype (N, K are checked per call)
        if n is not None and kdim is not None and pair_for(dtype, m, n, kdim):
            return PAIR[dtype].name
        return gh.config_for(dtype, m, n).name
    return config_for(dtype, m).name


class Decode:
    """The decode kernels of `dtype` loaded on `device`, with each shape's host work made once:
    its plan and tensor maps (a plan costs about 10 us of host time, as much as the launch;
    encoding the maps of a call cost about 300 us on an H100 host, six times the kernel at M
    = 64), and a split-K workspace grown as shapes need. One per stream: the workspace's
    tickets serve one call at a time."""

    def __init__(self, dtype: str = "bf16", device: int = 0, bounded: bool = False) -> None:
        config_for(dtype, 1)        # the dtype
        self.dtype, self.device = dtype, device
        # preloaded: a kernel resolved lazily while another runs may wait for it to end
        self.module = build_module([dtype], bounded).load(device=device).preload()
        self.workspace = Workspace.allocate(0, device)
        self.retired: list[Workspace] = []      # outgrown, kept for calls still in flight
        self.made: dict[tuple[int, ...], tuple[Plan, tuple[TensorMap, TensorMap]]] = {}

    def ready(self, x: object, w: object, m: int, n: int, kdim: int,
              sms: int) -> Callable[..., Plan]:
        """`launch` of Y = X W^T on the device pointers `x`, `w` with all its host work done
        first (the plan, the maps, the workspace): call what it returns with `y=` (and
        `scale=`, `stream=`). Doing the work first matters where one process drives several
        GPUs that wait for each other: allocating device memory with peer access enabled
        waits for the kernels running on the peers."""
        from ptxdsl.runtime.arrays import device_pointer
        key = (device_pointer(x), device_pointer(w), m, n, kdim, sms)
        if key not in self.made:
            if len(self.made) >= MAP_CACHE:
                self.made.clear()
            p = plan(self.dtype, m, n, kdim, sms)
            self.made[key] = (p, tensor_maps(self.dtype, x, w, m, n, kdim, p.cfg))
        made, maps = self.made[key]
        if made.workspace > self.workspace.nbytes:
            self.retired.append(self.workspace)
            self.workspace = Workspace.allocate(made.workspace, self.device)
        return functools.partial(launch, self.module, self.dtype, x, w, m=m, n=n, kdim=kdim,
                                 sms=sms, workspace=self.workspace, maps=maps, made=made)


class Linear:
    """Y = X W^T (X: M x K, W: N x K, Y: M x N bf16; e4m3: times `scale`) at any M: the
    decode kernel up to LINEAR_DECODE_M and its pairs where `pair_for` takes them,
    gemm_hopper's kernels otherwise (`kernel_for`). Builds and
    loads both modules once (`bounded=True`: the debug build, whose hung waits raise
    `WaitTimeoutError` naming the barrier) and keeps a workspace, grown as shapes need; one
    `Linear` per stream (its workspace's tickets serve one call at a time)."""

    def __init__(self, dtype: str = "bf16", *, bounded: bool = False, sms: int | None = None,
                 device: int = 0) -> None:
        from ptxdsl import runtime as rt
        config_for(dtype, 1)        # the dtype
        self.dtype, self.device = dtype, device
        self.sms = sms or rt.device_info(device).sm_count
        self.decode = Decode(dtype, device, bounded)
        big = [gh.build_gemm(cfg[dtype], bounded) for cfg in gh.ALL_VARIANTS.values()]
        self.gemm = (debug.module(big, name="gemm_hopper", target="sm_90a") if bounded
                     else Module(big, name="gemm_hopper", target="sm_90a")).load(device=device)
        # gemm_hopper's tensor maps by operand addresses and shape (`Decode` keeps its own)
        self._maps: dict[tuple[object, ...], Any] = {}

    def __call__(self, x: object, w: object, y: object, m: int, n: int, kdim: int,
                 scale: float = 1.0, *, stream: object = None) -> str:
        """Y = X W^T on the device pointers `x`, `w`, `y`; returns the kernel's name."""
        from ptxdsl.runtime.arrays import device_pointer
        name = kernel_for(self.dtype, m, n, kdim)
        if not name.startswith("gemm_hopper"):
            go = self.decode.ready(x, w, m, n, kdim, self.sms)
            return go(y=y, scale=scale, stream=stream).cfg.name
        key = (name, device_pointer(x), device_pointer(w), device_pointer(y), m, n, kdim)
        if len(self._maps) >= MAP_CACHE:
            self._maps.clear()
        if key not in self._maps:    # the variant for M and N (`name`) and maps with its boxes
            cfg = gh.config_for(self.dtype, m, n)
            self._maps[key] = (cfg, (*gh.tensor_maps(self.dtype, x, w, m, n, kdim, cfg),
                                     gh.output_map(y, m, n)))
        cfg, maps = self._maps[key]
        gh.launch(self.gemm, self.dtype, x, w, y, m, n, kdim, scale, sms=self.sms,
                  stream=stream, maps=maps, cfg=cfg)
        return name


# each width, odd N, K tails, deep splits; the last two take the pairs in bf16 (`pair_for`)
SHAPES = ((1, 520, 208), (7, 1000, 4096), (8, 4104, 1040), (33, 256, 8192), (64, 1032, 2000),
          (100, 520, 4096), (128, 777, 512), (105, 1000, 8192))


def run(shapes: Iterable[tuple[int, int, int]] = SHAPES, dtypes: Iterable[str] = tuple(gh.DTYPES),
        sms: int | None = None, bounded: bool = False, *, splits: int | None = None,
        w_rows: int | None = None, pair: bool | None = None) -> Report:
    """Each shape's kernel (the one `launch` picks, or with `splits`/`w_rows`/`pair` that
    variant) of `dtypes` against numpy, twice (the two results must be identical); `sms`
    caps the persistent grid (more units per CTA)."""
    from ptxdsl import runtime as rt
    report = Report("gemm_decode")
    mod = build_module(bounded=bounded).load()
    recorder = debug.Recorder().attach(mod) if bounded else None
    sms = sms or rt.device_info(0).sm_count
    for dtype in dtypes:
        for m, n, kdim in shapes:
            x, w, want, scale = gh.reference_inputs(dtype, m, n, kdim)
            p = plan(dtype, m, n, kdim, sms, splits=splits, w_rows=w_rows, pair=pair)
            dev_x, dev_w = rt.DeviceBuffer.from_numpy(x), rt.DeviceBuffer.from_numpy(w)
            ws = Workspace.allocate(p.workspace)
            got = []
            for _ in range(2):
                y = rt.DeviceBuffer.empty((m, n), np.uint16)
                y.memset(POISON)
                launch(mod, dtype, dev_x, dev_w, y, m, n, kdim, scale, sms=sms, workspace=ws,
                       made=p)
                sync(recorder=recorder)
                got.append(y.to_numpy())
            name = f"{p.cfg.name} M={m} N={n} K={kdim} ({p.splits} splits of {p.kper})"
            report.check_equal(name, got[0], gh.bf16_round(want))
            report.check(f"{name}: two calls, the same bits", bool((got[0] == got[1]).all()))
    return report


def main(argv: list[str] | None = None) -> int:
    return sample_main(argv, __doc__, build_module, run)


if __name__ == "__main__":
    raise SystemExit(main())
