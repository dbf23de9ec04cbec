"""All-gather fused with a GEMM: a column-parallel linear layer on symmetric memory (issue 33).

Each rank r of W holds X_r, its M/W x K row shard of X (bf16), and W_r, its N_r x K slice of
the weight (bf16, torch.nn.Linear's [out, in] layout: what samples/gemm_hopper.py takes as B),
and computes Y_r = all_gather(X) @ W_r^T, M x N_r (bf16, f32 accumulation).

One persistent kernel per rank, samples/gemm_hopper.py's warp-specialised GEMM with its
`Rows` hooks (no copy of its kernel):

- Warps 1-3 of the producer warpgroup (idle in the GEMM) push X_r into every other rank's
  symmetric buffer (slot r), 16 bytes per thread per load and store, one destination after
  another: first rank r - 1, which needs X_r second, then r - 2, and so on. After each
  destination (named barrier) one thread adds to slot r of that rank's signal pad with
  `red.release.sys` (`signals.signal_set(add=True)`); the CTAs' additions sum to
  SIGNAL_TOTAL per call whatever the grid, so rank q's rows are in this rank's buffer once
  slot q reaches epoch * SIGNAL_TOTAL.
- Or the host pushes (`launch(push="copy_engine")`, `push_for`'s choice for large shards):
  copy engines copy X_r into each peer's slot (`SymmetricBuffers.put`) and the same stream
  then sets that peer's counter to what the warps' additions would reach
  (`SymmetricBuffers.signal`: cuStreamWriteValue32, a system-scope fence first); the `push`
  parameter is 0 and the warps copy nothing. No SM time goes to the copy, and the copy
  engines move more: on four H200s at M = 8192, 400 us against 582 with the warps' push
  (BENCHMARKS.md section 10). The side stream starts after the previous call's kernel and the
  caller's stream waits for it, so the double buffering below holds for either push.
- At decode sizes (M <= gemm_decode.DECODE_M, `path_for`) the layer takes a split path
  instead: a gather kernel (`build_gather_kernel`: X_r into this rank's own slot and every
  peer's, the same signals, then CTA 0 waits for the peers' shards), then
  samples/gemm_decode.py's split-K kernel on the W slots of this rank's buffer half, which
  hold all_gather(X) row after row. There the fused kernel has too few output tiles for
  the SMs (M = 128 over 4 ranks: 2 x 16 tiles of 128 k-blocks each) while the decode kernel
  splits K over all of them: 35 us against 59 on four H200s (BENCHMARKS.md section 10).
- The producer thread loads A in 64-row boxes through one tensor map over this rank's own
  buffer (a box's third coordinate picks the half and the slot); this rank's own rows come
  from X_r itself (a map over the input), so its tiles start at once. Every peer row then
  crosses NVLink once, whatever the number of column tiles that read it: the first version
  pulled the rows from the owners' buffers through their tensor maps at each tile, and
  NVLink's bandwidth bound the whole GEMM (0.29x the sequential torch path at M = 8192,
  BENCHMARKS.md section 10). Before its first load of rank q's rows it waits for q's
  counter (`ld.acquire.sys` spin, bounded in the debug build), then
  `fence.proxy.async.global`: the copy wrote with generic stores and TMA reads through the
  async proxy, and the PTX memory model orders a generic write before an async-proxy read
  only through a proxy fence in the thread (CTA) that issues the async access, after the
  synchronisation (the acquire) - a release on the writer's side does not cover the other
  proxy.
- Tile order: the GEMM's row space is the ranks' shards one after another, starting with this
  rank's (rank r's tile rows first, then r+1, ...), so the first wave runs on local data while
  the peers copy. Each shard is padded to a multiple of 64 rows so that no 64-row box (one
  consumer warpgroup's rows) spans two ranks: TMA zero-fills the pad, and the output map is
  3-D (rank, row, column) so the stores clip at each shard's edge.
- Signals are counters that only grow (the target is the call's epoch, 1, 2, ..., times
  SIGNAL_TOTAL), so the pads are never reset; epochs past MAX_EPOCH need fresh (zeroed) pads.
- Every CTA of a launch must be resident at once (each one's copy counts towards the
  counters its peers wait for before their tiles): the persistent grid is capped by
  cuOccupancyMaxActiveClusters (`resident_ctas`), and work that holds SMs on the same GPU
  while the kernel starts can delay it until that work ends.
- Reuse across calls: double buffering. Call e pushes into half e % 2 of the peers' buffers.
  A rank at call e + 2 overwrites the half a peer read at call e only after its call e + 1
  saw that peer's call-(e + 1) signal, which the peer sets in its call-(e + 1) kernel, after
  its call-e kernel (every read of that half) ended on its stream. So no end-of-call barrier
  is needed (no cross-GPU round trip on the critical path); the cost is a buffer of
  2 x M x K bf16 per rank (two halves of W slots of M/W x K).

Shapes: M a multiple of W, K a multiple of 8 (TMA's 16-byte pitches), N_r even; W = 2, 4, 8.
`forward(...)` launches on the current stream (no host sync); `reference_path(...)` is torch's
unfused path (all_gather_into_tensor, then matmul) for benchmarks. Under `torchrun` the sample
checks the fused result against an fp32 torch matmul of the gathered X on every rank. Without
torchrun it relaunches itself under torchrun on 2 GPUs when it can; with fewer it says why,
and builds, checks and assembles its module (on one GPU too: two ranks sharing a GPU cannot
have every CTA of both kernels resident at once, which the protocol needs). `run()` runs the
ranks in one process on two GPUs, against numpy.
"""

from __future__ import annotations

import functools
import os
from typing import TYPE_CHECKING, Any

import numpy as np

from ptxdsl import Kernel, Module, Reg, Symbol, debug, ptx, sample_runner, t
from ptxdsl.epilogue import TmaStoreEpilogue
from ptxdsl.sample_runner import multi_gpu_main, not_run, sibling_sample
from ptxdsl.signals import peer_pointer, signal_set, signal_wait

if TYPE_CHECKING:       # mypy reads the samples as the top-level modules they are as scripts
    import gemm_decode as gd
    import gemm_hopper as gh
else:                   # the sibling samples this one builds on
    gh = sibling_sample(__file__, "gemm_hopper")
    gd = sibling_sample(__file__, "gemm_decode")

WORLDS = (2, 4, 8)
SUB = 64                 # rows of one A box: a consumer warpgroup's rows, never two ranks'
COPY_BARRIER = 3         # named barrier of the copying warps (the epilogue uses 1 and 2)
COPY_THREADS = 96        # warps 1-3 of the producer warpgroup
COPY_UNROLL = 4          # 16-byte loads in flight per copying thread
SIGNAL_TOTAL = 1024      # what one call adds to a ready counter (more than any grid)
MAX_EPOCH = (1 << 32) // SIGNAL_TOTAL - 1    # then the counters would wrap: new pads
SUBPROCESS_TIMEOUT_S = 600


GATHER_THREADS = 256     # the gather kernel's CTA
GATHER_BARRIER = 1


def context(kernels: list[Kernel]) -> dict[str, Any]:
    """The checker context of the kernels: the symmetric buffers (the pointer array and the
    map over this rank's own, which the peers write) and the signal pads, which the peers'
    hosts set too when their copy engines push (`launch`'s push)."""
    return {"peer_buffers": {k.name: ["buffer_ptrs", "map_gathered"] for k in kernels},
            "signal_pads": ["signal_pad_ptrs"], "host_signal_pads": ["signal_pad_ptrs"]}


class _GatherParams:
    """The gather kernel's parameters, as `_push_shard` reads them."""

    def __init__(self, k: Kernel, world: int) -> None:
        self.world = world
        self.x = k.ld_param(k.param_ptr("x"))
        self.chunks = k.ld_param(k.param(t.u32, "chunks"))
        self.own = k.ld_param(k.param_ptr("own_slot"))     # this rank's slot of its buffer
        self.bufs = k.ld_param(k.param_ptr("buffer_ptrs"))
        self.pads = k.ld_param(k.param_ptr("signal_pad_ptrs"))
        self.rank = k.ld_param(k.param(t.u32, "rank"))
        self.epoch = k.ld_param(k.param(t.u32, "epoch"))
        self.half = k.and_(self.epoch, 1)


def build_gather_kernel(world: int, bounded: bool = False, *, release: bool = True) -> Kernel:
    """The all-gather of the split path (`launch`'s path="gather"): every thread of every
    CTA copies X_r into this rank's own slot and then into each peer's (`_push_shard`, with
    its signals); then threads q < W (q != r) of CTA 0 wait for rank q's counter and fence
    the async proxy, so the GEMM launched after this kernel on the stream reads all of X
    from half epoch % 2 of this rank's buffer with TMA. Only CTA 0 waits, and nothing waits
    for it, so the grid need not be resident at once. (The reads are the next kernel's, which
    the checker does not see with this one: it checks the signals' release, not that the
    wait is there; the GPU checks do.) `release=False`: the checker's test."""
    k = Kernel(f"allgather_push_w{world}", reqntid=GATHER_THREADS)
    if bounded:
        debug.bounded_waits(k, timeout_ns=2_000_000_000)     # as gemm_hopper's kernels
    p = _GatherParams(k, world)
    tid = k.mov(k.tid.x, type=t.u32)
    _push_shard(k, p, tid, GATHER_THREADS, GATHER_BARRIER, tid == 0, release, own=p.own)
    pad = peer_pointer(k, p.pads, p.rank)
    with k.if_(k.ctaid.x == 0), k.if_(tid < world), k.if_(tid != p.rank):
        signal_wait(k, k.mad(tid, 4, pad, type=t.u32, mode="wide"),
                    k.mul(p.epoch, SIGNAL_TOTAL))
        ptx.fence_proxy_async(k, "global")      # generic writes -> the GEMM's TMA reads
    return k


class GatherRows(gh.Rows):
    """gemm_hopper's rows hooks for A = all_gather(X) read from every rank's buffer."""

    c_rank = 3       # C as (rank, row in the shard, column): stores clip at a shard's edge

    def __init__(self, world: int, release: bool = True, wait: bool = True) -> None:
        self.world, self.release, self.wait = world, release, wait

    def _box(self, k: Kernel, name: str, cfg: gh.Config) -> Symbol:
        return k.param_tensormap(name, box=(1, SUB, cfg.bk), dtype=t.bf16, swizzle="128B")

    def map_a(self, k: Kernel, cfg: gh.Config) -> Symbol:
        self.map_x = self._box(k, "map_x", cfg)      # this rank's X_r, (1, M/W, K)
        return self.map_x

    def params(self, k: Kernel, cfg: gh.Config) -> None:
        self.map_g = self._box(k, "map_gathered", cfg)    # own buffer, (2W, M/W, K)
        self.x = k.ld_param(k.param_ptr("x"))
        self.chunks = k.ld_param(k.param(t.u32, "chunks"))       # 16-byte chunks of X_r
        self.bufs = k.ld_param(k.param_ptr("buffer_ptrs"))
        self.pads = k.ld_param(k.param_ptr("signal_pad_ptrs"))
        self.rank = k.ld_param(k.param(t.u32, "rank"))
        self.epoch = k.ld_param(k.param(t.u32, "epoch"))
        self.rows = k.ld_param(k.param(t.u32, "rows"))           # M / W
        # 0: the host pushed X_r with copy engines and set the counters (`launch`'s push)
        self.push = k.ld_param(k.param(t.u32, "push"))
        self.padded = k.and_(k.add(self.rows, SUB - 1), -SUB & 0xFFFFFFFF)

    def side_warps(self, k: Kernel, cfg: gh.Config) -> None:
        tid = k.mov(k.tid.x, type=t.u32)
        self.half = k.and_(self.epoch, 1)
        with k.if_(tid >= 32), k.if_(self.push != 0):
            _push_shard(k, self, k.sub(tid, 32), COPY_THREADS, COPY_BARRIER, tid == 32,
                        self.release)
        self.waited = k.shl(k.mov(1, type=t.u32), self.rank, dst=k.reg(t.u32, "waited"))
        self.target = k.mul(self.epoch, SIGNAL_TOTAL)
        self.own_pad = peer_pointer(k, self.pads, self.rank)
        self.tmap_x = k.tensormap_addr(self.map_x)
        self.tmap_g = k.tensormap_addr(self.map_g)

    def _locate(self, k: Kernel, row: Reg) -> tuple[Reg, Reg]:
        """(owning rank, row in its shard) of row `row` of the padded row space, which starts
        with this rank's shard; rows past the last shard fall past the edge of the last one
        (TMA zero-fills them and clips their stores)."""
        slot = k.min(k.div(row, self.padded), self.world - 1)
        q = k.rem(k.add(slot, self.rank), self.world)
        return q, k.sub(row, k.mul(slot, self.padded))

    def begin_tile(self, k: Kernel, cfg: gh.Config, row: Reg) -> None:
        self.boxes = []
        for j in range(cfg.box_a.mn // SUB):
            q, local = self._locate(k, row if j == 0 else k.add(row, j * SUB))
            bit = k.shl(k.mov(1, type=t.u32), q)
            if self.wait:
                with k.if_(k.and_(self.waited, bit) == 0):
                    signal_wait(k, k.mad(q, 4, self.own_pad, type=t.u32, mode="wide"),
                                self.target)
                    ptx.fence_proxy_async(k, "global")     # generic writes -> TMA reads
                    k.or_(self.waited, bit, dst=self.waited)
            # one load per box: this rank's rows from X_r, a peer's from its slot here
            own = q == self.rank
            slot = k.mad(self.half, self.world, q, type=t.u32)
            self.boxes.append((k.selp(self.tmap_x, self.tmap_g, own), local,
                               k.selp(0, slot, own, type=t.u32)))

    def load_a(self, k: Kernel, load: gh.Load, tmap_a: Reg, dst: Reg, row: Reg,
               mask: int | None) -> None:
        for j, (tmap, local, half) in enumerate(self.boxes):
            load(dst if j == 0 else k.add(dst, j * SUB * gh.BK_BYTES), tmap, local, mask,
                 (half,))

    def c_place(self, k: Kernel, row0: Reg) -> tuple[Reg, tuple[Reg, ...], Reg, Reg | None]:
        q, local = self._locate(k, row0)
        return local, (q,), k.mad(q, self.rows, local), k.sub(self.rows, local, type=t.s32)


def _push_shard(k: Kernel, p: Any, lane: Reg, threads: int, barrier: int, leader: Any,
                release: bool = True, own: Reg | None = None) -> None:
    """X_r into slot (half epoch % 2, this rank) of every peer's buffer, the one that reads it
    soonest first (rank r - d reads X_r as its (d + 1)-th shard), by `threads` threads per CTA
    (`lane` of them, named barrier `barrier`), then `leader` adds to slot r of that peer's
    pad with `red.release.sys`: CTA 0 SIGNAL_TOTAL - (CTAs - 1), the others 1, so every call
    adds SIGNAL_TOTAL whatever its grid and calls of other shapes share the pads. `own`: an
    address to copy X_r to first (this rank's own slot, for a GEMM that reads all of X from
    one place). `p` holds the kernel's parameters (x, chunks, bufs, pads, rank, half)."""
    ctas = k.mov(k.nctaid.x, type=t.u32)
    amount = k.selp(k.sub(SIGNAL_TOTAL + 1, ctas), 1, k.ctaid.x == 0, type=t.u32)
    slot = k.mad(p.half, p.world, p.rank, type=t.u32)
    offset = k.shl(k.mul(slot, p.chunks, type=t.u32, mode="wide"), 4)
    if own is not None:
        _copy(k, p, own, lane, threads)
    for d in range(1, p.world):
        q = k.rem(k.add(p.rank, p.world - d), p.world)
        _copy(k, p, k.add(peer_pointer(k, p.bufs, q), offset), lane, threads)
        k.bar_sync(barrier, threads)
        with k.if_(leader):
            flag = k.mad(p.rank, 4, peer_pointer(k, p.pads, q), type=t.u32, mode="wide")
            if release:
                signal_set(k, flag, amount, add=True)
            else:      # the checker's test: a counter bump that releases nothing
                k.red("add", flag, amount, type=t.u32, space="global")


def _copy(k: Kernel, p: Any, dst0: Reg, lane: Reg, threads: int) -> None:
    """X_r (`p.x`, `p.chunks` 16-byte chunks) -> `dst0`, COPY_UNROLL chunks in flight per
    thread (the producer warpgroup has 40 registers)."""
    step = k.mul(k.mov(k.nctaid.x, type=t.u32), threads)
    i = k.mad(k.mov(k.ctaid.x, type=t.u32), threads, lane)

    def copy(count: int) -> None:
        at = [i] + [k.add(i, step) if u == 1 else k.mad(step, u, i) for u in range(1, count)]
        got = [k.ld(k.mad(a, 16, p.x, type=t.u32, mode="wide"), type=t.u32, vec=4,
                    space="global") for a in at]
        for a, v in zip(at, got, strict=True):
            k.st(k.mad(a, 16, dst0, type=t.u32, mode="wide"), v, type=t.u32, space="global")
        if count == 1:
            k.add(i, step, dst=i)
        else:
            k.mad(step, count, i, dst=i)

    # i < last: chunks i, i + step, ... i + (COPY_UNROLL - 1) * step all exist
    last = k.sub(p.chunks, k.mul(step, COPY_UNROLL - 1))
    with k.while_(lambda: k.setp("lt", i, last, type=t.s32)):
        copy(COPY_UNROLL)
    with k.while_(lambda: i < p.chunks):
        copy(1)


@functools.cache
def variant_configs(world: int) -> dict[str, gh.Config]:
    """gemm_hopper's three bf16 variants, named for this kernel and world size (made once
    per world size: a Config's construction costs more than the rest of a launch)."""
    return {v: gh.Config("bf16", bn=c.bn, cluster=c.cluster, stages=c.stages, along=c.along,
                         name=f"allgather_gemm_w{world}_{v}")
            for v, c in ((v, cfgs["bf16"]) for v, cfgs in gh.VARIANTS.items())}


def build_kernel(world: int, variant: str, bounded: bool = False, **hooks: bool) -> Kernel:
    """The kernel for `world` ranks and gemm_hopper variant `variant` ("default", "skinny",
    "row"); `hooks`: `release=False` / `wait=False` drop the signal's release or the wait
    (for the checker's tests)."""
    return gh.build_gemm(variant_configs(world)[variant], bounded,
                         rows=GatherRows(world, **hooks))


def build_module(bounded: bool = False, worlds: tuple[int, ...] = WORLDS) -> Module:
    kernels = [build_kernel(w, v, bounded) for w in worlds for v in gh.VARIANTS] + [
        build_gather_kernel(w, bounded) for w in worlds]
    if bounded:
        return debug.module(kernels, name="allgather_gemm", target="sm_90a",
                            check=context(kernels))
    return Module(kernels, name="allgather_gemm", target="sm_90a", check=context(kernels))


# -- host side ---------------------------------------------------------------------------------
def check_shape(m: int, n: int, kdim: int, world: int) -> int:
    """The rows of a shard, M / W, after checking the shapes the kernels take."""
    if world not in WORLDS:
        raise ValueError(f"allgather_gemm: the world size must be one of {WORLDS}, got {world}")
    gh.check_shape("bf16", m, n, kdim)
    if m % world:
        raise ValueError(f"allgather_gemm: M = {m} rows do not split evenly over {world} ranks")
    rows = m // world
    if rows * kdim // 8 >= 1 << 30:      # the copy's chunk index is compared as .s32
        raise ValueError(f"allgather_gemm: a shard of {rows} x {kdim} is too large (2^30 "
                         "16-byte chunks at most)")
    return rows


def buffer_bytes(m: int, kdim: int, world: int) -> int:
    """Bytes of each rank's symmetric buffer: two halves (double buffering: see the module
    doc) of W slots of M / W x K bf16."""
    return 2 * world * (m // world) * kdim * 2


def config_for(m: int, world: int) -> gh.Config:
    """The variant for M rows over `world` ranks: gemm_hopper's choice for the padded row
    space (every shard rounded up to a multiple of 64 rows)."""
    rows = m // world
    padded = world * -(-rows // SUB) * SUB
    chosen = gh.config_for("bf16", padded)
    variant = next(v for v, cfgs in gh.VARIANTS.items() if cfgs["bf16"] is chosen)
    return variant_configs(world)[variant]


def _ptr(obj: Any) -> int:
    """A device address from an int, a torch tensor or a ptxdsl DeviceBuffer."""
    if hasattr(obj, "data_ptr"):
        return int(obj.data_ptr())
    return int(getattr(obj, "ptr", obj))


_maps: dict[tuple[Any, ...], tuple[Any, ...]] = {}
MAP_CACHE = 256       # entries kept (a caller with new tensors every call starts over)


def _tensor_maps(bufs: Any, x: int, w: int, y: int, rows: int, n: int, kdim: int,
                 cfg: gh.Config) -> tuple[Any, ...]:
    """(map_x, map_b, map_c or None, map_gathered): the last once per buffer and shape, the
    others once per tensors."""
    from ptxdsl import runtime as rt
    box = (1, SUB, cfg.bk)
    peer_key = (bufs.buffer_ptrs[bufs.rank], bufs.device, bufs.world_size, rows, kdim, cfg.bk)
    key = (peer_key, x, w, y, n, cfg.name)
    if len(_maps) > MAP_CACHE:
        _maps.clear()
    if peer_key not in _maps:
        _maps[peer_key] = (rt.TensorMap.tiled(bufs.buffer_ptrs[bufs.rank],
                                              (2 * bufs.world_size, rows, kdim), "BFLOAT16",
                                              box, swizzle="128B", device=bufs.device),)
    if key not in _maps:
        world, dev = bufs.world_size, bufs.device
        map_x = rt.TensorMap.tiled(x, (1, rows, kdim), "BFLOAT16", box, swizzle="128B",
                                   device=dev)
        map_b = rt.TensorMap.tiled(w, (n, kdim), "BFLOAT16", cfg.box_b.tma_box[::-1],
                                   swizzle="128B", device=dev)
        cfg.box_b.check_tensormap(map_b)
        map_c = None
        if n % 8 == 0:       # TMA's 16-byte pitch; otherwise the kernel stores directly
            map_c = rt.TensorMap.tiled(y, (world, rows, n), "BFLOAT16", (1, 64, gh.EPI_COLS),
                                       swizzle="128B", device=dev)
            TmaStoreEpilogue.check_tensormap(map_c, rank=GatherRows.c_rank)
        _maps[key] = (map_x, map_b, map_c)
    return (*_maps[key], *_maps[peer_key])


_modules: dict[tuple[int, bool], Any] = {}


def load_module(device: int, bounded: bool = False) -> Any:
    """The module loaded on `device` (cached); `bounded`: the debug build."""
    if (device, bounded) not in _modules:
        # preloaded: a kernel resolved lazily while another runs may wait for it to end
        _modules[device, bounded] = build_module(bounded).load(device=device).preload()
    return _modules[device, bounded]


_resident: dict[tuple[int, str], int] = {}


def resident_ctas(fn: Any, cfg: gh.Config, sms: int) -> int:
    """How many CTAs of `fn` run at once on its GPU (one per SM for the shared memory they
    take; for a cluster kernel, cuOccupancyMaxActiveClusters's count of clusters): every CTA
    of a launch must be resident, since each one's copy adds to the counters its peers wait
    for before their tiles."""
    key = (fn.device, cfg.name)
    if key not in _resident:
        clusters = None
        if cfg.cluster > 1:
            clusters = fn.max_active_clusters(gh.THREADS, shared_mem=cfg.smem_bytes,
                                              cluster=(cfg.cluster, 1, 1))
        _resident[key] = cfg.cluster * clusters if clusters else sms
    return min(_resident[key], sms)


PUSHES = ("sm", "copy_engine")
#: Shards of at least this many bytes are pushed by copy engines (`push="auto"`): measured
#: in BENCHMARKS.md section 10's notes.
COPY_ENGINE_MIN_BYTES = 8 << 20


def push_for(m: int, kdim: int, world: int) -> str:
    """`launch`'s choice of who pushes X_r to the peers: "copy_engine" for large shards (no
    SM time and a copy engine's bandwidth; a few driver calls per call), "sm" for small ones
    (the kernel's spare warps: no host work, nothing to wait for before the first tile)."""
    return "copy_engine" if m // world * kdim * 2 >= COPY_ENGINE_MIN_BYTES else "sm"


PATHS = ("fused", "gather")


def path_for(m: int, world: int) -> str:
    """`launch`'s choice of kernels: "gather" (the gather kernel, then gemm_decode's split-K
    kernel on the gathered X) where M fits a decode kernel, "fused" (one kernel: the GEMM's
    tiles wait for each shard) above. At decode sizes the fused kernel has too few tiles for
    the SMs (M = 128, N_r = 2048: 32 output tiles of 128 k-blocks each, BENCHMARKS.md
    section 10), while the decode kernel splits K over all of them."""
    return "gather" if m <= gd.DECODE_M else "fused"


_decode: dict[tuple[int, bool], Any] = {}


def decode_for(device: int, bounded: bool = False) -> Any:
    """The split path's GEMM on `device`: gemm_decode's bf16 `Decode` (made once; one
    stream per rank, as its workspace serves one call at a time)."""
    if (device, bounded) not in _decode:
        _decode[device, bounded] = gd.Decode("bf16", device, bounded)
    return _decode[device, bounded]


def _slot_offset(m: int, kdim: int, world: int, epoch: int, rank: int) -> int:
    """Byte offset in a rank's buffer of slot `rank` of half epoch % 2 (M/W x K bf16 a
    slot, W slots a half): where call `epoch` puts rank `rank`'s shard."""
    return ((epoch % 2) * world + rank) * (m // world * kdim * 2)


def _gathered(bufs: Any, m: int, kdim: int, epoch: int) -> int:
    """The address of all_gather(X) (M x K) in this rank's buffer at call `epoch`: the W
    slots of half epoch % 2, from slot 0."""
    return int(bufs.buffer_ptrs[bufs.rank]) + _slot_offset(m, kdim, bufs.world_size, epoch, 0)


def prepare(bufs: Any, w: Any, m: int, n: int, kdim: int, sms: int,
            bounded: bool = False) -> None:
    """Do the gather path's host work for this shape now, for both buffer halves (its GEMM's
    module, plan, maps, workspace: `gemm_decode.Decode.ready`). Needed where one process
    drives every rank: with peer access enabled, allocating device memory waits for the
    kernels running on the peer GPUs, and a rank's gather kernel spins until the host
    launches the others'."""
    for epoch in (1, 2):
        decode_for(bufs.device, bounded).ready(_gathered(bufs, m, kdim, epoch), _ptr(w), m, n,
                                               kdim, sms)


def _launch_gather(module: Any, bufs: Any, xp: int, wp: int, yp: int, m: int, n: int,
                   kdim: int, epoch: int, sms: int, stream: Any, bounded: bool) -> None:
    """The split path: the gather kernel (X_r into this rank's slot and every peer's, then
    CTA 0 waits for the peers' shards), then gemm_decode on the W slots of half epoch % 2 of
    this rank's buffer, which are all_gather(X) row after row. The buffer halves alternate
    as the fused path's do, with the same argument (module doc)."""
    world, rank = bufs.world_size, bufs.rank
    gathered = _gathered(bufs, m, kdim, epoch)
    own = int(bufs.buffer_ptrs[rank]) + _slot_offset(m, kdim, world, epoch, rank)
    chunks = m // world * kdim * 2 // 16
    grid = max(1, min(sms, -(-chunks // (GATHER_THREADS * COPY_UNROLL))))
    gemm = decode_for(bufs.device, bounded).ready(gathered, wp, m, n, kdim, sms)
    fn = module[f"allgather_push_w{world}"]
    fn.launch(grid, GATHER_THREADS, (xp, chunks, own, bufs.buffer_ptrs_dev,
                                     bufs.signal_pad_ptrs_dev, rank, epoch), stream=stream)
    gemm(y=yp, stream=stream)


_side: dict[int, tuple[Any, Any, Any]] = {}


def _side_stream(device: int) -> tuple[Any, Any, Any]:
    """(stream, event before, event after) of the copy-engine push on `device`, made once."""
    if device not in _side:
        from ptxdsl import runtime as rt
        _side[device] = (rt.Stream(non_blocking=True, device=device),
                         rt.Event(timing=False, device=device),
                         rt.Event(timing=False, device=device))
    return _side[device]


def _push_copy_engine(bufs: Any, x: int, m: int, kdim: int, epoch: int, stream: Any) -> None:
    """X_r into slot (half epoch % 2, this rank) of every peer's buffer by copy engines on a
    side stream, each copy followed by its counter set to epoch * SIGNAL_TOTAL (what the
    kernels' pushes sum to, so the two kinds of call share the pads); peers in the order they
    read X_r, as the kernel's push. The side stream starts after this stream's earlier work
    (the previous call's kernel ended, which keeps the double-buffering argument of the
    module doc), and this stream's later work waits for it (x may be reused after the call)."""
    side, before, after = _side_stream(bufs.device)
    before.record(stream)
    side.wait(before)
    world, rank = bufs.world_size, bufs.rank
    offset, nbytes = _slot_offset(m, kdim, world, epoch, rank), m // world * kdim * 2
    for d in range(1, world):
        q = (rank + world - d) % world
        bufs.put(q, offset, x, nbytes, stream=side)
        bufs.signal(q, rank, epoch * SIGNAL_TOTAL, stream=side)
    after.record(side)


def launch(module: Any, bufs: Any, x: Any, w: Any, y: Any, m: int, n: int, kdim: int, *,
           epoch: int, sms: int, stream: Any = None, push: str = "auto", path: str = "auto",
           bounded: bool = False) -> None:
    """Y (M x N_r) = all_gather(X) @ W_r^T for this rank (`bufs.rank`) from device pointers
    (ints, torch tensors or DeviceBuffers) of its shard x (M/W x K), w (N_r x K) and y, with
    the kernel of `module` (loaded on the rank's device; None: `load_module`'s). `epoch`: 1
    for the first call on these pads, one more each call, the same on every rank; `sms`: the
    persistent grid's cap (each rank may use its own). `stream`: default `bufs.launch`'s
    (torch's current stream for torch memory). `push`: who copies X_r into the peers'
    buffers, "sm" (the kernel's spare warps), "copy_engine" (`_push_copy_engine`) or "auto"
    (`push_for`); `path`: "fused", "gather" (`_launch_gather`; the SM push) or "auto"
    (`path_for`); `bounded`: the split path's GEMM is gemm_decode's debug build (as `module`
    is the debug build of this sample's)."""
    world = bufs.world_size
    rows = check_shape(m, n, kdim, world)
    if buffer_bytes(m, kdim, world) > bufs.buffer_size:
        raise ValueError(f"allgather_gemm: the symmetric buffers have {bufs.buffer_size} "
                         f"bytes, this shape needs {buffer_bytes(m, kdim, world)} "
                         "(2 x M/W x K bf16)")
    if isinstance(epoch, bool) or not isinstance(epoch, int) or not 1 <= epoch <= MAX_EPOCH:
        raise ValueError(f"allgather_gemm: epoch must be an int in 1..{MAX_EPOCH} (one more "
                         f"per call), got {epoch!r}")
    if bufs.signal_pad_size < 4 * world:
        raise ValueError(f"allgather_gemm: the signal pads have {bufs.signal_pad_size} bytes, "
                         f"{4 * world} needed (one counter per rank)")
    if push != "auto" and push not in PUSHES:
        raise ValueError(f"allgather_gemm: push must be 'auto' or one of {PUSHES}, got "
                         f"{push!r}")
    if path != "auto" and path not in PATHS:
        raise ValueError(f"allgather_gemm: path must be 'auto' or one of {PATHS}, got "
                         f"{path!r}")
    if path == "auto":
        path = path_for(m, world)
    if path == "gather" and m > gd.DECODE_M:
        raise ValueError(f"allgather_gemm: the gather path's GEMM takes M up to "
                         f"{gd.DECODE_M}, got M = {m}")
    if path == "gather" and push == "copy_engine":
        raise ValueError("allgather_gemm: the gather path pushes with its own kernel; "
                         "push='copy_engine' is the fused path's")
    if push == "auto":
        push = push_for(m, kdim, world)
    module = module or load_module(bufs.device, bounded)
    xp, wp, yp = _ptr(x), _ptr(w), _ptr(y)
    if path == "gather":
        _launch_gather(module, bufs, xp, wp, yp, m, n, kdim, epoch, sms,
                       bufs.stream() if stream is None else stream, bounded)
        return
    cfg = config_for(m, world)
    map_x, map_b, map_c, map_g = _tensor_maps(bufs, xp, wp, yp, rows, n, kdim, cfg)
    padded = world * -(-rows // SUB) * SUB
    args = (map_x, map_b, map_c or map_x, yp, padded, n, kdim, int(map_c is not None),
            map_g, xp, rows * kdim // 8, bufs.buffer_ptrs_dev, bufs.signal_pad_ptrs_dev,
            bufs.rank, epoch, rows, int(push == "sm"))
    opts = {"shared_mem": cfg.smem_bytes,
            "cluster": (cfg.cluster, 1, 1) if cfg.cluster > 1 else None}
    fn = module[cfg.name]
    cap = resident_ctas(fn, cfg, sms) // cfg.cluster * cfg.cluster
    if not cfg.cluster <= cap <= SIGNAL_TOTAL:
        raise ValueError(f"allgather_gemm: {cap} resident CTAs for this rank; it needs "
                         f"{cfg.cluster} to {SIGNAL_TOTAL}")
    grid = gh.grid_for(padded, n, cap, cfg)
    on = bufs.stream() if stream is None else stream
    if push == "copy_engine":
        _push_copy_engine(bufs, xp, m, kdim, epoch, on)
    if stream is None:
        bufs.launch(fn, grid, gh.THREADS, args, **opts)
    else:
        fn.launch(grid, gh.THREADS, args, stream=stream, **opts)
    if push == "copy_engine":
        _side_stream(bufs.device)[2].wait_in(on)


def forward(x: Any, w: Any, bufs: Any, *, epoch: int, out: Any = None, module: Any = None,
            sms: int | None = None, push: str = "auto", path: str = "auto",
            bounded: bool = False) -> Any:
    """Y = all_gather(X) @ w^T on this rank, launched on the current torch stream (no host
    sync). `x`: this rank's M/W x K shard, `w`: its N_r x K weight slice (contiguous bf16
    torch tensors on the rank's device); `bufs`: the group's `SymmetricBuffers` (each buffer
    at least `buffer_bytes(M, K, W)` bytes); `epoch`: 1 for the first call on these pads,
    one more each call, the same on every rank; `sms`: the persistent grid's cap (default:
    the device's SM count); `push`, `path`, `bounded`: as `launch`'s. Returns `out` (M x N_r
    bf16, allocated when None). Not for CUDA graph capture as it is: the epoch (and so the
    buffer half) is a launch argument, which a graph would replay unchanged;
    `symmetric_buffers` makes `bufs` under torchrun."""
    import torch
    if not all(isinstance(v, torch.Tensor) and v.dtype == torch.bfloat16 and v.dim() == 2
               and v.is_contiguous() for v in (x, w)):
        raise ValueError("allgather_gemm.forward: x (M/W x K) and w (N_r x K) must be "
                         "contiguous 2-D bf16 torch tensors, got "
                         f"{getattr(x, 'shape', x)!r}, {getattr(w, 'shape', w)!r}")
    (rows, kdim), n = x.shape, w.shape[0]
    if w.shape[1] != kdim:
        raise ValueError(f"allgather_gemm.forward: w is {tuple(w.shape)}; its K must be x's "
                         f"{kdim}")
    m = rows * bufs.world_size
    if out is None:
        out = torch.empty((m, n), dtype=torch.bfloat16, device=x.device)
    elif tuple(out.shape) != (m, n) or out.dtype != torch.bfloat16 or not out.is_contiguous():
        raise ValueError(f"allgather_gemm.forward: out must be a contiguous {m} x {n} bf16 "
                         f"tensor, got {tuple(out.shape)} {out.dtype}")
    check_shape(m, n, kdim, bufs.world_size)     # before any GPU call
    on = torch.device("cuda", bufs.device)
    if any(v.device != on for v in (x, w, out)):
        raise ValueError(f"allgather_gemm.forward: x, w and out must be on the rank's device "
                         f"{on}, got {x.device}, {w.device}, {out.device}")
    if sms is None:
        from ptxdsl import runtime as rt
        sms = rt.device_info(bufs.device).sm_count
    launch(module, bufs, x, w, out, m, n, kdim, epoch=epoch, sms=sms, push=push, path=path,
           bounded=bounded)
    return out


def symmetric_buffers(m: int, kdim: int, group: Any = None) -> Any:
    """This rank's `SymmetricBuffers` for shapes up to M x K over `group` (default: the
    world), from torch's symmetric memory (`empty` + `rendezvous`; collective: every rank
    calls it). Its pads start at zero: the first `forward` on them takes epoch 1."""
    import torch
    import torch.distributed as dist
    import torch.distributed._symmetric_memory as symm_mem

    from ptxdsl.runtime import SymmetricBuffers
    group = group if group is not None else dist.group.WORLD
    assert group is not None, "torch.distributed is not initialised"
    world = dist.get_world_size(group)
    check_shape(m, 2, kdim, world)
    buf = symm_mem.empty(buffer_bytes(m, kdim, world) // 2, dtype=torch.bfloat16,
                         device=torch.device("cuda", torch.cuda.current_device()))
    return SymmetricBuffers.from_torch(symm_mem.rendezvous(buf, group.group_name),
                                       world_size=world)


def reference_path(x: Any, w: Any, group: Any = None) -> Any:
    """torch's unfused path: `dist.all_gather_into_tensor` of the shards, then matmul."""
    import torch
    import torch.distributed as dist
    world = dist.get_world_size(group)
    gathered = torch.empty((x.shape[0] * world, x.shape[1]), dtype=x.dtype, device=x.device)
    dist.all_gather_into_tensor(gathered, x, group=group)
    return torch.matmul(gathered, w.t())


# (M, N, K): N is split over the ranks. Odd shards (M = 300: 150 or 75 rows; 1000: 250 or
# 125), N_r not a multiple of 8 (the direct-store epilogue), K not a multiple of the k-block,
# each variant (M = 256: skinny; 128 over 2 ranks: one tile row), the decode-like M = 128 and
# the large case at N = K = 8192 (those two under torchrun only: numpy would take minutes).
SHAPES = ((300, 520, 208), (256, 528, 272), (1000, 1040, 520), (128, 1024, 1024),
          (128, 8192, 8192), (8192, 8192, 8192))
SMALL = 1 << 31       # the one-process run checks the shapes with M * N * K below this
CALLS = 3             # calls per shape: both buffer halves, then the first one again


def _mode_of(epoch: int, rank: int, m: int) -> tuple[str, str]:
    """(push, path) of a check's call: SMs and copy engines alternate from call to call, and
    so do the fused and gather paths where M allows both; every third call the ranks differ,
    so each kind of call follows the other on the same pads and a rank waits for every kind
    of sender in one call."""
    differ = rank if epoch % 3 == 0 else 0
    path = PATHS[(epoch // 2 + differ) % 2] if m <= gd.DECODE_M else "fused"
    return ("sm" if path == "gather" else PUSHES[(epoch + differ) % 2]), path


def run(shapes: tuple[tuple[int, int, int], ...] = SHAPES, bounded: bool = True,
        devices: tuple[int, ...] | None = None) -> Any:
    """The sample's checks. Under torchrun (torch.distributed initialised): this rank's,
    against an fp32 torch matmul of the gathered X (`_rank_checks`). Otherwise in this
    process, a rank per entry of `devices` (distinct GPUs with peer access; default (0, 1)
    where two are visible, else the module built, checked and assembled: `_not_run`), against
    numpy. Inputs are small integers, so the f32 sums
    are exact and the bf16 results must match bit for bit (tolerance 0); CALLS calls per
    shape with new inputs. `bounded`: the debug build (a wait past 2 s traps)."""
    try:
        import torch.distributed as dist
        if dist.is_available() and dist.is_initialized():
            return _rank_checks(shapes, bounded)
    except ImportError:
        pass
    from ptxdsl import runtime as rt
    if devices is None:
        reason = rt.multi_gpu_skip_reason(2)
        if reason is not None:
            return _not_run(reason)
        devices = (0, 1)
    return _process_checks(tuple(sh for sh in shapes if sh[0] * sh[1] * sh[2] < SMALL),
                           bounded, devices)


def _ranks_in_process(nbytes: int, devices: tuple[int, ...]) -> list[Any]:
    """One SymmetricBuffers per rank (rank r on devices[r], distinct GPUs)."""
    from ptxdsl import runtime as rt
    if len(set(devices)) != len(devices):
        raise ValueError(f"allgather_gemm: one rank per GPU, got devices {devices} (ranks "
                         "sharing a GPU cannot all be resident at once)")
    return list(rt.SymmetricBuffers.allocate(nbytes, devices=devices))


def _process_checks(shapes: tuple[tuple[int, int, int], ...], bounded: bool,
                    devices: tuple[int, ...]) -> Any:
    from ptxdsl import runtime as rt
    from ptxdsl.sample_runner import Report
    world = len(devices)
    report = Report(f"allgather_gemm, {world} ranks on GPUs {devices}")
    nbytes = max(buffer_bytes(m, kdim, world) for m, _, kdim in shapes)
    ranks = _ranks_in_process(nbytes, devices)
    loaded = rt.load_on_devices(build_module(bounded, worlds=(world,)), sorted(set(devices)))
    mods = {d: mod.preload() for d, mod in loaded.items()}
    recorders = {d: debug.Recorder(d).attach(mod) for d, mod in mods.items()} if bounded else {}
    sms = {d: rt.device_info(d).sm_count for d in set(devices)}
    rng = np.random.default_rng(33)
    epoch = 0
    for m, n_all, kdim in shapes:
        rows, n = m // world, n_all // world
        w_all = rng.integers(-4, 5, (n_all, kdim)).astype(np.float32)
        ws = [rt.DeviceBuffer.from_numpy(gh.bf16_round(w_all[r * n:(r + 1) * n]), device=d)
              for r, d in enumerate(devices)]
        ys = [rt.DeviceBuffer.empty((m, n), np.uint16, device=d) for d in devices]
        if m <= gd.DECODE_M:        # before any rank's kernel spins (see `prepare`)
            for r, d in enumerate(devices):
                prepare(ranks[r], ws[r], m, n, kdim, sms[d], bounded)
        for _ in range(CALLS):
            epoch += 1          # the pads carry on across shapes: counters, never reset
            x_all = rng.integers(-4, 5, (m, kdim)).astype(np.float32)
            xs = [rt.DeviceBuffer.from_numpy(gh.bf16_round(x_all[r * rows:(r + 1) * rows]),
                                             device=d) for r, d in enumerate(devices)]
            streams = [rt.Stream(device=d) for d in devices]
            name = f"W={world} M={m} N_r={n} K={kdim} epoch {epoch} (" + ", ".join(
                "/".join(_mode_of(epoch, r, m)) for r in range(world)) + ")"
            try:
                for r, d in enumerate(devices):   # all at once: each waits for the others
                    ys[r].memset(sample_runner.POISON)
                    push, path = _mode_of(epoch, r, m)
                    launch(mods[d], ranks[r], xs[r], ws[r], ys[r], m, n, kdim, epoch=epoch,
                           sms=sms[d], stream=streams[r], push=push, path=path,
                           bounded=bounded)
                for st in streams:
                    st.synchronize(20)
            except Exception as exc:   # a trapped wait: say where, and stop
                records = "; ".join(f"GPU {d}: {rec.record()}" for d, rec in recorders.items())
                report.check(f"{name} ({config_for(m, world).name})", False,
                             f"{type(exc).__name__}: {exc}" + (f" [{records}]" if records
                                                                 else ""))
                return report
            for r in range(world):
                want = gh.bf16_round(x_all @ w_all[r * n:(r + 1) * n].T)
                report.check_equal(f"{name} rank {r} ({config_for(m, world).name})",
                                   ys[r].to_numpy(), want)
    return report


def _rank_checks(shapes: tuple[tuple[int, int, int], ...], bounded: bool) -> Any:
    """This rank's checks under torchrun (see `run`); the buffers come from torch's
    symmetric memory."""
    import torch
    import torch.distributed as dist

    from ptxdsl.sample_runner import Report
    world, rank = dist.get_world_size(), dist.get_rank()
    dev = torch.cuda.current_device()
    report = Report(f"allgather_gemm rank {rank} of {world}")
    module = load_module(dev, bounded)
    recorder = debug.Recorder(dev).attach(module) if bounded else None
    shapes = tuple(sh for sh in shapes if not (sh[0] % world or sh[1] % (2 * world)))
    # one allocation for every shape: its pads' counters carry on (epochs) across them
    biggest = max(shapes, key=lambda sh: buffer_bytes(sh[0], sh[2], world))
    bufs = symmetric_buffers(biggest[0], biggest[2])
    epoch = 0
    for m, n_all, kdim in shapes:
        rows, n = m // world, n_all // world
        gen = torch.Generator(device="cuda").manual_seed(1234 + m)
        w_all = torch.randint(-4, 5, (n_all, kdim), generator=gen, device=dev)
        w = w_all[rank * n:(rank + 1) * n].to(torch.bfloat16).contiguous()
        for _ in range(CALLS):
            epoch += 1
            x_all = torch.randint(-4, 5, (m, kdim), generator=gen, device=dev)
            x = x_all[rank * rows:(rank + 1) * rows].to(torch.bfloat16).contiguous()
            push, path = _mode_of(epoch, rank, m)
            name = (f"W={world} M={m} N_r={n} K={kdim} epoch {epoch} "
                    f"({config_for(m, world).name}, {path} path, {push} push)")
            try:
                y = forward(x, w, bufs, epoch=epoch, module=module, push=push, path=path,
                            bounded=bounded)
                torch.cuda.synchronize()
            except Exception as exc:   # a trapped wait poisons this GPU: say where, then exit
                record = f" [{recorder.record()}]" if recorder is not None else ""
                report.check(name, False, f"{type(exc).__name__}: {exc}{record}")
                print(report.format(), flush=True)
                os._exit(1)     # torchrun ends the other ranks
            want = (x_all.float() @ w.float().t()).to(torch.bfloat16)
            bad = int((y.view(torch.int16) != want.view(torch.int16)).sum())
            report.check(name, bad == 0, f"{bad} of {y.numel()} values differ" if bad else "")
    torch.cuda.synchronize()
    dist.barrier()      # no rank frees its buffer while a peer may still read it
    return report


def _torchrun_main() -> int:
    import torch
    import torch.distributed as dist
    local = int(os.environ.get("LOCAL_RANK", os.environ["RANK"]))
    torch.cuda.set_device(local)
    dist.init_process_group("nccl", device_id=torch.device("cuda", local))
    try:
        report = run()
        failed = torch.tensor([0 if report.ok else 1], device="cuda")
        dist.all_reduce(failed)
        if dist.get_rank() == 0:
            print(report.format())
            print(f"{'FAIL' if failed.item() else 'PASS'}: allgather_gemm on "
                  f"{dist.get_world_size()} ranks ({int(failed.item())} ranks failing)")
        elif not report.ok:
            print(report.format())
        return 1 if failed.item() else 0
    finally:
        dist.destroy_process_group()


def main(argv: list[str] | None = None) -> int:
    """Under torchrun: the checks of every rank. Otherwise: relaunched under torchrun on 2
    GPUs where they are there (without torch, `run` in this process); with fewer, after
    saying why, the module built, checked and assembled (`sample_runner.multi_gpu_main`)."""
    return multi_gpu_main(argv, __doc__, build_module, run, sample=__file__,
                          rank_main=_torchrun_main, one_gpu=_not_run, keep_ptx=True,
                          timeout_s=SUBPROCESS_TIMEOUT_S)


def _not_run(reason: str) -> Any:
    """With fewer than two GPUs: the module built, checked and assembled, and why it did not
    run. (Both ranks on one GPU failed on an H100: every CTA of both ranks' kernels must be
    resident at once, which one GPU shared by two kernels does not guarantee.)"""
    return not_run("allgather_gemm", reason, build_module, "every variant")


if __name__ == "__main__":
    raise SystemExit(main())
