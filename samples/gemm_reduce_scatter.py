"""GEMM fused with reduce-scatter (a row-parallel linear layer) on symmetric memory, bf16.

Rank r of W holds X_r (M x K_r, K split across the ranks) and W_r (N x K_r: gemm_hopper's B,
the layout of `nn.Linear`'s weight); the layer's output is Y = sum_r X_r W_r^T (M x N), and
rank r keeps its row block, Y_shard_r = Y[r*M/W : (r+1)*M/W] (bf16, f32 accumulation).

One kernel per rank (issue 33):
- The GEMM is samples/gemm_hopper.py's persistent warp-specialised kernel (its `Output`
  hook), on P_r = X_r W_r^T, starting at the first tile row of the next rank's block and
  ending with its own, so the transfers overlap the math.
- Its epilogue sends each consumer warpgroup's 64 x bn rows to the rank that owns them: a
  TMA store through a tensor map over *that rank's* symmetric buffer (one map per rank, in
  global memory, acquired with `fence.proxy.tensormap::generic.acquire.sys`), into the slot
  of the sending rank. A rank's buffer holds W slots of PAD + M/W rows of N bf16 values; a
  64-row chunk that straddles two owners' blocks goes to both, its rows before the block
  landing in the slot's PAD leading rows (scratch, so no TMA coordinate is negative) and
  those after it clipped by the map. Before the warpgroup's next chunk (a tile's main loop
  later, so the stores have long landed) or at the end, `cp.async.bulk.wait_group 0` (the
  writes done, not only read) and `red.release.sys.global.add.u32` on each owner's tile
  counter.
- Last phase, both consumer warpgroups: one thread waits (`ld.acquire.sys`) until the
  counter has grown by the chunks every rank sends this one this call, then the CTAs sum
  the W slots (f32) into Y_shard, 16 bytes per thread per step. Each CTA then adds one to
  every rank's done counter (`.release.sys`) and waits until its own has grown by W x CTAs:
  no rank starts its next call (and writes into a buffer) before every rank has read its
  slots. The counters only grow (the host passes the values they reach this call,
  `Counters`), so the pads are never reset.

Partials travel in bf16, as the unfused path's (a bf16 matmul, then a bf16 reduce-scatter)
do: the same rounding, half the NVLink bytes of f32 partials. The sum of the W partials is
f32.

Run it under `torchrun --nproc-per-node N python samples/gemm_reduce_scatter.py`: each rank
compares Y_shard with torch (fp32 matmul of its X_r W_r^T, `reduce_scatter_tensor`, the
shard) at M = 8192 and a decode-like M = 128 (N = K = 8192), and at odd sizes. Without
torchrun it relaunches itself that way on 2 GPUs when 2 Hopper GPUs with peer access are
visible; otherwise `run()` runs the kernel on the GPUs it has in one process (ptxdsl's own
peer buffers; one GPU: W = 1) against numpy, and with no GPU the PTX is assembled offline.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ptxdsl import Addr, Kernel, Module, Reg, Symbol, debug, ptx, sample_runner, t
from ptxdsl.epilogue import TmaStoreEpilogue
from ptxdsl.fragments import Fragment
from ptxdsl.sample_runner import Report, multi_gpu_main, sibling_sample
from ptxdsl.signals import peer_pointer, signal_set, signal_wait

if TYPE_CHECKING:       # mypy reads the samples as the top-level modules they are as scripts
    import gemm_hopper as gh
else:                   # the GEMM this layer runs: one kernel, its tiles sent elsewhere
    gh = sibling_sample(__file__, "gemm_hopper")

PAD = 64                 # leading scratch rows of a slot: a straddling chunk's rows before it
COUNT, DONE = 0, 1       # signal-pad slots (u32): tiles received, ranks done reading
REDUCE_BAR = 3           # named barrier of the two consumer warpgroups (1, 2: their epilogues)
REDUCE_UNROLL = 4        # 16-byte vectors per thread in flight in the last phase's sums
CONSUMERS = 256
MAP_BYTES = 128
CONTEXT = {"peer_buffers": ["buffer_ptrs", "peer_maps"], "signal_pads": ["signal_pad_ptrs"]}
VARIANTS = {v: gh.Config("bf16", c.bn, c.cluster, c.stages, c.along, name=f"gemm_rs_{v}")
            for v, c in (("default", gh.CONFIGS["bf16"]), ("skinny", gh.SKINNY["bf16"]),
                         ("row", gh.ROW["bf16"]))}


def _stores_complete(k: Kernel) -> None:
    """The TMA stores into the peer are complete (written, not only read from shared memory):
    what the signal after it publishes. (A function of its own so the tests can break it.)"""
    ptx.cp_async_bulk_wait_group(k, 0)


class ReduceScatter:
    """gemm_hopper's `Output`: the parameters after the GEMM's and the epilogue sending
    tiles to their owners (module doc)."""

    def declare(self, k: Kernel) -> None:
        self.maps_p = k.param_ptr("peer_maps")          # W tensor maps, map o over rank o's buffer
        self.bufs_p = k.param_ptr("buffer_ptrs")        # buffer_ptrs_dev
        self.pads_p = k.param_ptr("signal_pad_ptrs")    # signal_pad_ptrs_dev
        self.y_p = k.param_ptr("y")                     # this rank's M/W x N output
        # the counters' values that mean "this call's tiles are all here" and "every rank
        # has read this call's slots" (`Counters`)
        self.rank_p, self.world_p, self.rows_p, self.count_p, self.done_p = (
            k.param(t.u32, n) for n in ("rank", "world", "rows", "count_target",
                                        "done_target"))

    def first_row(self, k: Kernel, cfg: gh.Config, tiles_m: Reg) -> Reg:
        """The cluster-tile row holding the next rank's first row: its tiles go first."""
        rank, world, rows = (k.ld_param(p) for p in (self.rank_p, self.world_p, self.rows_p))
        return k.div(k.mul(k.rem(k.add(rank, 1), world), rows), cfg.tile_m)

    def epilogue(self, k: Kernel, cfg: gh.Config, smem: Symbol, cw: Reg, M: Reg,
                 N: Reg) -> ScatterStore:
        return ScatterStore(self, k, cfg, smem, cw, N)


class ScatterStore:
    """One consumer warpgroup's tiles to their owners, then its share of the reduction."""

    def __init__(self, out: ReduceScatter, k: Kernel, cfg: gh.Config, smem: Symbol, cw: Reg,
                 N: Reg) -> None:
        self.k, self.cw, self.N = k, cw, N
        self.maps = k.ld_param(out.maps_p)
        self.bufs, self.pads = k.ld_param(out.bufs_p), k.ld_param(out.pads_p)
        self.y = k.ld_param(out.y_p)
        self.rank, self.world, self.rows, self.count, self.done = (
            k.ld_param(p) for p in (out.rank_p, out.world_p, out.rows_p, out.count_p,
                                    out.done_p))
        self.tmap = k.mov(self.maps)     # the owner's map, chosen per chunk
        buf = k.add(k.mov(smem), k.mad(cw, gh.EPI_BYTES, cfg.epi_off))
        self.staged = TmaStoreEpilogue(k, buf, self.tmap, k.add(cw, 1), rank=3)
        with k.if_(self.staged.leader):     # the host wrote the maps: acquire them (.sys)
            with k.for_range(0, self.world) as o:
                ptx.fence_proxy_tensormap_generic(k, "acquire", "sys", self._map(o))
        # the owners [first, end) of the chunks stored since the last signal, and how many:
        # each owner waits only for its whole block, so one signal per run of chunks with
        # the same owners (a .sys release costs microseconds) tells it as much as one each
        self.pend_first, self.pend_end = k.mov(1, type=t.u32), k.mov(0, type=t.u32)
        self.pend_count = k.mov(0, type=t.u32)

    def _map(self, owner: Reg) -> Reg:
        return self.k.mad(owner, MAP_BYTES, self.maps, type=t.u32, mode="wide")

    def _signal_pending(self) -> None:
        """The pending chunks' stores are complete (the last one's a tile's main loop ago,
        so the wait seldom waits): count them at their owners."""
        k = self.k
        with k.if_(self.staged.leader):
            _stores_complete(k)
            with k.for_range(self.pend_first, self.pend_end) as owner:
                signal_set(k, Addr(peer_pointer(k, self.pads, owner), 4 * COUNT),
                           self.pend_count, add=True)
        k.mov(0, dst=self.pend_count)

    def store(self, packed: Fragment, m0: Reg, n0: Reg) -> None:
        """Rows row0 .. row0 + 63 go to every owner whose block they meet (none past M)."""
        k = self.k
        row0 = k.mad(self.cw, 64, m0)
        first = k.div(row0, self.rows)
        end = k.add(k.min(k.div(k.add(row0, 63), self.rows), k.sub(self.world, 1)), 1)
        with k.if_((first != self.pend_first) | (end != self.pend_end)):
            self._signal_pending()      # other owners than the pending chunks': tell those
        with k.for_range(first, end) as owner:
            k.mad(owner, MAP_BYTES, self.maps, type=t.u32, mode="wide", dst=self.tmap)
            local = k.sub(k.add(row0, PAD), k.mul(owner, self.rows))
            self.staged.store(packed, local, n0, self.rank)      # into my slot of its buffer
        k.mov(first, dst=self.pend_first)
        k.mov(end, dst=self.pend_end)
        k.add(self.pend_count, 1, dst=self.pend_count)

    def finish(self) -> None:
        """Wait for every rank's chunks of my block, sum the slots into Y_shard, then meet
        every rank (the done counter) so that no next call overwrites a slot being read."""
        k = self.k
        self._signal_pending()
        lt = k.sub(k.mov(k.tid.x, type=t.u32), 128)      # 0 .. 255 over both warpgroups
        first = lt == 0
        own_pad = peer_pointer(k, self.pads, self.rank)
        with k.if_(first):
            signal_wait(k, Addr(own_pad, 4 * COUNT), self.count)
        k.bar_sync(REDUCE_BAR, CONSUMERS)
        self._reduce(lt)
        k.bar_sync(REDUCE_BAR, CONSUMERS)       # every thread's reads are done: release them
        with k.if_(first):
            _stores_complete(k)     # (this thread's were; said where the checker sees it)
            with k.for_range(0, self.world) as peer:
                signal_set(k, Addr(peer_pointer(k, self.pads, peer), 4 * DONE), 1, add=True)
            signal_wait(k, Addr(own_pad, 4 * DONE), self.done)

    def _reduce(self, lt: Reg) -> None:
        """Y_shard = sum of the W slots' rows PAD .., 8 bf16 (16 bytes) per vector, the CTAs'
        threads striding over the block, REDUCE_UNROLL vectors per thread and step: their
        loads in flight together (one at a time, the phase ran at a fraction of HBM's
        bandwidth, exposed after the GEMM)."""
        k = self.k
        row_bytes = k.shl(self.N, 1)
        self.slot = k.mul(k.add(self.rows, PAD), row_bytes, type=t.u32, mode="wide")
        own = k.cvta(peer_pointer(k, self.bufs, self.rank), "global", to=True)
        self.data = k.add(own, k.mul(row_bytes, PAD, type=t.u32, mode="wide"))
        self.yg = k.cvta(self.y, "global", to=True)
        total = k.shr(k.mul(self.rows, self.N), 3)              # 16-byte vectors
        v = k.mad(k.mov(k.ctaid.x, type=t.u32), CONSUMERS, lt)
        step = k.mul(k.mov(k.nctaid.x, type=t.u32), CONSUMERS)
        # v < last: vectors v, v + step, ... v + (REDUCE_UNROLL - 1) * step all exist
        last = k.sub(total, k.mul(step, REDUCE_UNROLL - 1))
        with k.while_(lambda: k.setp("lt", v, last, type=t.s32)):
            self._sum([v] + [k.mad(step, u, v) for u in range(1, REDUCE_UNROLL)])
            k.mad(step, REDUCE_UNROLL, v, dst=v)
        with k.while_(lambda: v < total):
            self._sum([v])
            k.add(v, step, dst=v)

    def _sum(self, vectors: list[Reg]) -> None:
        """The W slots' values of `vectors` summed in f32, stored to Y_shard as bf16."""
        k = self.k
        offs = [k.mul(v, 16, type=t.u32, mode="wide") for v in vectors]
        accs = [[k.mov(0.0, type=t.f32) for _ in range(8)] for _ in vectors]
        ats = [k.add(self.data, off) for off in offs]
        with k.for_range(0, self.world):
            words = [k.ld(Addr(at), type=t.b32, space="global", vec=4) for at in ats]
            for acc, ws in zip(accs, words, strict=True):
                for i, w in enumerate(ws):     # bf16 pair -> two f32: the high halves
                    k.add(acc[2 * i], k.shl(w, 16), type=t.f32, dst=acc[2 * i])
                    k.add(acc[2 * i + 1], k.and_(w, 0xFFFF0000), type=t.f32,
                          dst=acc[2 * i + 1])
            for at in ats:
                k.add(at, self.slot, dst=at)
        for acc, off in zip(accs, offs, strict=True):
            packed = [k.cvt_packed("bf16x2", acc[2 * i + 1], acc[2 * i]) for i in range(4)]
            k.st(Addr(k.add(self.yg, off)), packed, type=t.b32, space="global")

def build_kernel(variant: str = "default", bounded: bool = False) -> Kernel:
    return gh.build_gemm(VARIANTS[variant], bounded, output=ReduceScatter())


def build_module(bounded: bool = False) -> Module:
    """The three variants (gemm_hopper's default, skinny-M and one-row tilings), checked with
    the cross-GPU context; `bounded`: mbarrier and signal waits trap after 2 s with an error
    record (`ptxdsl.debug`)."""
    kernels = [build_kernel(v, bounded) for v in VARIANTS]
    if bounded:
        return debug.module(kernels, name="gemm_reduce_scatter", target="sm_90a",
                            check=CONTEXT)
    return Module(kernels, name="gemm_reduce_scatter", target="sm_90a", check=CONTEXT)


# -- host side ------------------------------------------------------------------------------
def variant_for(m: int, world: int) -> str:
    """gemm_hopper's choice for M rows (`config_for`), by name."""
    cfg = gh.config_for("bf16", m)
    return next(v for v, c in VARIANTS.items() if c.bn == cfg.bn and c.along == cfg.along
                and c.cluster == cfg.cluster)


def check_shape(m: int, n: int, k_local: int, world: int) -> None:
    """The shapes the fused kernel takes: M split evenly over the ranks (as reduce_scatter
    splits it), N a multiple of 8 (16-byte rows for TMA and the vector sums), K_r a multiple
    of 8 (TMA's pitch)."""
    if not 1 <= world <= 8:
        raise ValueError(f"gemm_reduce_scatter: world size must be 1 to 8, got {world}")
    if min(m, n, k_local) < 1 or m % world or n % 8 or k_local % 8:
        raise ValueError(f"gemm_reduce_scatter: M >= 1 a multiple of the world size {world}, "
                         f"N and K_r multiples of 8; got M={m} N={n} K_r={k_local}")


def buffer_bytes(m: int, n: int, world: int) -> int:
    """Each rank's symmetric buffer: W slots of PAD + M/W rows of N bf16 values."""
    return world * (PAD + m // world) * n * 2


def chunks_per_call(m: int, n: int, world: int, rank: int, variant: str) -> int:
    """The COUNT signals rank `rank` receives per call: from each rank, one per 64-row chunk
    meeting its block, per column tile (a cluster along N has one past N's edge too)."""
    cfg = VARIANTS[variant]
    rows = m // world
    chunks = ((rank + 1) * rows - 1) // 64 - rank * rows // 64 + 1
    cols = -(-n // cfg.tile_n) * (cfg.tile_n // cfg.bn)
    return world * chunks * cols


class Counters:
    """What this rank's two pad counters (COUNT, DONE) hold after the calls launched so far:
    one per pair of signal pads, shared by every layer on them (layers of several shapes
    add different amounts). The pads start zeroed; a u32 may not wrap."""

    def __init__(self) -> None:
        self.count = self.done = 0

    def advance(self, count: int, done: int) -> tuple[int, int]:
        if self.count + count >= 2**32 or self.done + done >= 2**32:
            raise RuntimeError("gemm_reduce_scatter: the signal pads' u32 counters are full "
                               f"({self.count} tiles, {self.done} CTAs counted); use new, "
                               "zeroed pads (a new SymmetricBuffers) with new Counters")
        self.count += count
        self.done += done
        return self.count, self.done


class GemmReduceScatter:
    """One rank's fused layer for one shape: the tensor maps over every rank's buffer (in
    this rank's memory), the pad counters' targets and the launch. `bufs`: a
    `SymmetricBuffers` whose buffers hold `buffer_bytes(m, n, world)` and whose pads start
    zeroed; `module`: `build_module()` loaded on this rank's device; `counters`: the pads'
    `Counters`, shared with the other layers on the same pads (every rank must call its
    layers in the same order)."""

    def __init__(self, module: Any, bufs: Any, m: int, n: int, k_local: int, *,
                 sms: int, counters: Counters | None = None) -> None:
        from ptxdsl import runtime as rt
        world, rank = bufs.world_size, bufs.rank
        check_shape(m, n, k_local, world)
        need = buffer_bytes(m, n, world)
        if bufs.buffer_size < need:
            raise ValueError(f"gemm_reduce_scatter: each rank's buffer needs {need} bytes "
                             f"(M={m}, N={n}, W={world}), the symmetric buffers have "
                             f"{bufs.buffer_size}")
        self.bufs, self.m, self.n, self.k_local = bufs, m, n, k_local
        self.variant = variant_for(m, world)
        self.cfg = VARIANTS[self.variant]
        self.fn = module[self.cfg.name]
        # Every CTA waits for the other ranks' tiles at the end, so all must be resident at
        # once (a CTA waiting for a launch slot would never come): at most one per SM, and
        # no more clusters than fit (cuOccupancyMaxActiveClusters). Every rank's GPU must
        # give the same grid (the done counter counts W x grid).
        self.grid = gh.grid_for(m, n, sms, self.cfg)
        cl = self.cfg.cluster
        fit = self.fn.max_active_clusters(gh.THREADS, shared_mem=self.cfg.smem_bytes,
                                          cluster=(cl, 1, 1)) if cl > 1 else None
        if fit:
            self.grid = min(self.grid, cl * fit)
        maps = bufs.tensor_maps((world, PAD + m // world, n), "BFLOAT16", (1, 64, 64),
                                swizzle="128B")
        TmaStoreEpilogue.check_tensormap(maps[0], rank=3)
        table = np.frombuffer(b"".join(bytes(mp) for mp in maps), np.uint8)
        self.maps = rt.DeviceBuffer.from_numpy(table, device=bufs.device)
        self.expect = chunks_per_call(m, n, world, rank, self.variant)
        self.counters = counters or Counters()
        self._inputs: tuple[tuple[Any, Any], Any] | None = None

    def forward(self, x: Any, w: Any, y: Any) -> None:
        """Y_shard (`y`, M/W x N bf16) of X (`x`, M x K_r) and W (`w`, N x K_r), bf16
        device pointers (torch tensors' data_ptr() or DeviceBuffers), on the rank's stream;
        no host sync."""
        b = self.bufs
        if self._inputs is None or self._inputs[0] != (x, w):     # encoded once per X, W
            self._inputs = ((x, w), gh.tensor_maps("bf16", x, w, self.m, self.n,
                                                   self.k_local, self.cfg))
        ma, mb = self._inputs[1]
        count, done = self.counters.advance(self.expect, b.world_size * self.grid)
        args = (ma, mb, self.m, self.n, self.k_local, self.maps, b.buffer_ptrs_dev,
                b.signal_pad_ptrs_dev, y, b.rank, b.world_size, self.m // b.world_size,
                count, done)
        cl = self.cfg.cluster
        b.launch(self.fn, self.grid, gh.THREADS, args, shared_mem=self.cfg.smem_bytes,
                 cluster=(cl, 1, 1) if cl > 1 else None)


def _ptr(t_: Any) -> int:
    return int(t_.data_ptr()) if hasattr(t_, "data_ptr") else t_


def forward(layer: GemmReduceScatter, x: Any, w: Any, y: Any) -> Any:
    """The benchmark's entry: `layer.forward` on torch tensors (returns `y`)."""
    layer.forward(_ptr(x), _ptr(w), _ptr(y))
    return y


def reference_path(x: Any, w: Any, group: Any = None) -> Any:
    """The unfused torch path: the local bf16 matmul, then NCCL's reduce-scatter (bf16)."""
    import torch
    import torch.distributed as dist
    partial = torch.matmul(x, w.t())
    out = partial.new_empty((partial.shape[0] // dist.get_world_size(group), partial.shape[1]))
    dist.reduce_scatter_tensor(out, partial, group=group)
    return out


# -- checks ---------------------------------------------------------------------------------
# (M, N, K): K is split over the ranks. Odd: M not a multiple of the tile, blocks of M/W
# rows that straddle 64-row chunks, N not a multiple of the column tile.
SHAPES = ((8192, 8192, 8192), (128, 8192, 8192), (200, 520, 448), (328, 264, 896))
TOLERANCE = 2.0 ** -7    # |Y - ref| <= TOLERANCE * max|ref|: bf16 partials and output


def _inputs(m: int, n: int, kdim: int, world: int, seed: int = 5) -> tuple[np.ndarray, ...]:
    """X (M x K) and W (N x K) as f32 values exact in bf16, and their bf16 bits."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((m, kdim), np.float32)
    w = rng.standard_normal((n, kdim), np.float32) / np.sqrt(kdim)
    bits = gh.bf16_round(x), gh.bf16_round(w)
    exact = [(b.astype(np.uint32) << 16).view(np.float32) for b in bits]
    return exact[0], exact[1], bits[0], bits[1]


def _compare(report: Report, name: str, got: np.ndarray, want: np.ndarray) -> None:
    err = float(np.max(np.abs(got - want))) if got.size else 0.0
    scale = float(np.max(np.abs(want))) or 1.0
    report.check(f"{name}: max |Y - ref| = {err:.3g} <= 2^-7 x {scale:.3g}",
                 bool(np.isfinite(got).all()) and err <= TOLERANCE * scale,
                 f"max error {err:.4g}")


def run(shapes: Iterable[tuple[int, int, int]] = SHAPES[2:], bounded: bool = True,
        calls: int = 2) -> Report:
    """In one process, on the visible Hopper GPUs with peer access (ptxdsl's own symmetric
    memory; one GPU: W = 1), each shape `calls` times (the pads reused), against numpy."""
    from ptxdsl import runtime as rt
    report = Report("gemm_reduce_scatter")
    world = 2 if rt.multi_gpu_skip_reason(2) is None else 1
    devices = list(range(world))
    report.note(f"W = {world} rank(s) in one process (ptxdsl's peer buffers)")
    # resolved before any launch: a lazily loaded kernel could wait for one already spinning
    mods = {d: m.preload() for d, m in rt.load_on_devices(build_module(bounded),
                                                             devices).items()}
    for m, n, kdim in shapes:
        if m % world or (kdim // world) % 8:
            continue
        k_local = kdim // world
        x, w, xb, wb = _inputs(m, n, kdim, world)
        bufs = rt.SymmetricBuffers.allocate(buffer_bytes(m, n, world), devices=devices)
        layers, outs, ins = [], [], []
        for r, d in enumerate(devices):
            sl = slice(r * k_local, (r + 1) * k_local)
            ins.append((rt.DeviceBuffer.from_numpy(np.ascontiguousarray(xb[:, sl]), device=d),
                        rt.DeviceBuffer.from_numpy(np.ascontiguousarray(wb[:, sl]), device=d)))
            outs.append(rt.DeviceBuffer.zeros((m // world, n), np.uint16, device=d))
            layers.append(GemmReduceScatter(mods[d], bufs[r], m, n, k_local,
                                            sms=rt.device_info(d).sm_count))
        want = x.astype(np.float64) @ w.T.astype(np.float64)
        for call in range(1, calls + 1):
            for r in range(world):
                outs[r].memset(0xFF)          # bf16 NaNs where nothing is written
                layers[r].forward(ins[r][0], ins[r][1], outs[r])
            for d in devices:
                rt.synchronize(sample_runner.SYNC_TIMEOUT_S, device=d)
            for r in range(world):
                got = (outs[r].to_numpy().astype(np.uint32) << 16).view(np.float32)
                rows = m // world
                _compare(report, f"{layers[r].cfg.name} M={m} N={n} K={kdim} W={world} rank "
                         f"{r} call {call}", got, want[r * rows:(r + 1) * rows])
    return report


def torchrun_main(shapes: Sequence[tuple[int, int, int]] = SHAPES, bounded: bool = False,
                  calls: int = 2) -> int:
    """Under torchrun: torch's symmetric memory (one buffer for every shape, its pads'
    `Counters` shared), the fused layer and torch's fp32 reference, on rank 0 one line per
    check; non-zero when a rank's result is off."""
    import torch
    import torch.distributed as dist
    import torch.distributed._symmetric_memory as symm_mem

    from ptxdsl import runtime as rt
    local = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local)
    dist.init_process_group("nccl", device_id=torch.device("cuda", local))
    rank, world = dist.get_rank(), dist.get_world_size()
    # resolved now: a kernel loaded lazily at its first launch could start late
    module = build_module(bounded).load(device=local).preload()
    recorder = debug.Recorder(local).attach(module) if bounded else None
    sms = rt.device_info(local).sm_count
    shapes = [(m, n, kd) for m, n, kd in shapes
              if m % world == 0 and kd % world == 0 and (kd // world) % 8 == 0]
    group = dist.group.WORLD
    assert group is not None        # (initialised above)
    buf = symm_mem.empty(max(buffer_bytes(m, n, world) for m, n, _ in shapes),
                         dtype=torch.uint8, device=torch.device("cuda", local))
    bufs = rt.SymmetricBuffers.from_torch(symm_mem.rendezvous(buf, group.group_name),
                                          world_size=world)
    counters = Counters()
    failed = 0
    gen = torch.Generator(device="cuda").manual_seed(1234)
    for m, n, kdim in shapes:
        k_local = kdim // world
        x = torch.randn((m, k_local), generator=gen, device="cuda").to(torch.bfloat16)
        w = (torch.randn((n, k_local), generator=gen, device="cuda") / kdim ** 0.5).to(
            torch.bfloat16)
        layer = GemmReduceScatter(module, bufs, m, n, k_local, sms=sms, counters=counters)
        ref = torch.empty((m // world, n), device="cuda")
        dist.reduce_scatter_tensor(ref, x.float() @ w.float().t())
        y = torch.empty((m // world, n), dtype=torch.bfloat16, device="cuda")
        for call in range(1, calls + 1):
            y.fill_(float("nan"))
            forward(layer, x, w, y)
            try:
                err = float((y.float() - ref).abs().max())
            except Exception:
                if recorder is not None:
                    print(f"  rank {rank}: error record: {recorder.record()}", flush=True)
                raise
            scale = float(ref.abs().max()) or 1.0
            ok = bool(torch.isfinite(y).all()) and err <= TOLERANCE * scale
            flags = torch.tensor([0 if ok else 1], device="cuda")
            dist.all_reduce(flags)
            bad = int(flags.item())
            failed += bad != 0
            if rank == 0:
                print(f"  {'ok  ' if bad == 0 else 'FAIL'} {layer.cfg.name} M={m} N={n} "
                      f"K={kdim} W={world} call {call}: rank 0 max |Y - ref| = {err:.3g} "
                      f"(tolerance 2^-7 x {scale:.3g}); {bad} rank(s) off", flush=True)
    dist.barrier()
    dist.destroy_process_group()
    return 1 if failed else 0


def main(argv: list[str] | None = None) -> int:
    """Under torchrun: this rank's checks. Otherwise relaunched under torchrun on 2 GPUs
    where they are there (`--bounded` passed on); with fewer, after saying why, `run` with
    W = 1 on one GPU, or offline assembly (`sample_runner.multi_gpu_main`)."""
    argv = sys.argv[1:] if argv is None else list(argv)
    return multi_gpu_main(argv, __doc__, build_module, run, sample=__file__,
                          rank_main=lambda: torchrun_main(bounded="--bounded" in argv),
                          one_gpu=lambda _why: run(bounded=True), flags=("--bounded",))


if __name__ == "__main__":
    raise SystemExit(main())
