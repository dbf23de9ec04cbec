"""FlashAttention forward on Hopper in ptxdsl builders: O = softmax(scale * Q K^T) V, with the
log-sum-exp of each row, for dense and variable-length (packed) batches.

Shapes and layouts (FlashAttention's): Q [B, Sq, Hq, D], K and V [B, Sk, Hkv, D], O like Q,
bf16 or fp16; the last dimension contiguous, every other stride free (a multiple of 8
elements: TMA's 16-byte rule), so torch's [B, H, S, D] tensors transposed to [B, S, H, D]
views are taken as they are. Hq = G * Hkv: grouped-query attention (G > 1), multi-query
(Hkv = 1) and ordinary multi-head (G = 1). LSE is f32 [B, Hq, Sq] (dense) or [Hq, total]
(varlen): the natural log of sum_j exp(scale * q.k_j) over the keys a row sees. Causal: key j
is visible to query i iff j <= i (torch SDPA's `is_causal`, aligned at the top left; for
Sq == Sk, as in every varlen sequence, the same as FlashAttention's bottom-right rule).

The kernel (`fa_fwd_<dtype>_d<D>`, one CTA per tile of 64 x n query rows of one head of one
sequence, n consumer warpgroups: `BLOCKS`):
- 128 (1 + n) threads. Warpgroup 0 is the producer (`setmaxnreg.dec 24`): one thread loads
  the tile's Q once and streams K and V blocks of `bn` keys through two `MbarrierRing`s, all
  in one dynamic shared buffer, each tile 128B-swizzled as wgmma reads it (`SmemLayout`):
  Q and K K-major, V as an MN-major B operand straight from its row-major [keys, D] tile.
- Warpgroups 1 .. n (`setmaxnreg.inc`: 240 for two, 160 for three) each own 64 query rows:
  S = Q K^T (an SS wgmma into an f32 `Fragment`), the online softmax in registers (row max
  and sum across the four threads of a row with `shfl.sync.bfly`, `ex2.approx` with the
  scale folded into one FMA, the running output rescaled when the max grows), P packed to
  bf16 in the registers the RS wgmma O += P V reads (`Fragment.to_packed(into=...)`, the
  same registers every block).
- The consumers take turns on the tensor cores (FlashAttention-3's ping-pong, round robin):
  named barriers `bar.sync`/`bar.arrive` order warpgroup c's GEMMs of block j before
  warpgroup c + 1's, so one warpgroup's softmax runs while the others' GEMMs do. n = 2 for
  D = 128 and 256 and for varlen; n = 3 for D = 64 (whose softmax is twice the share of the
  work), with a two-consumer kernel (`_m128`) for causal calls of fewer than SHORT_CAUSAL
  query rows.
- O goes out through TMA stores (`TmaStoreEpilogue`, a 4-D map clipping at Sq), staged in
  each consumer's own 64 rows of the tile's Q stage (loaded as one tile per consumer) where
  `Config` says so, which leaves room for longer key blocks (`LONG_KEYS`, `VARLEN_KEYS`);
  the stage goes back to the producer once the stores have read it.
- Tails: TMA zero-fills rows past Sq and Sk; keys past Sk (and above the diagonal, causal)
  are masked to -inf in the blocks that have any, found per warpgroup at run time; the LSE
  is stored with predicated stores clipped at Sq. Causal CTAs skip every block above
  their last row, and the grid runs the longest CTAs first.
- Variable length (`fa_fwd_<dtype>_d<D>_varlen`): packed Q/K/V [total, H, D] with cumulative
  offsets `cu_seqlens` (int32, nseq + 1). A first kernel (`fa_varlen_maps`, one warp per
  sequence) encodes each sequence's Q, K and V tensor maps on the device from host-made
  templates of the packed tensors: `tensormap.replace` of the global address (the
  sequence's first row) and the sequence length, published to a global workspace with
  `tensormap.cp_fenceproxy.release.gpu`; the attention kernel's producer acquires them
  (`fence.proxy.tensormap::generic.acquire.gpu`), so TMA clips every load at the sequence's
  end: no padding, nothing read from the next sequence. A second kernel
  (`fa_varlen_tiles`, one CTA) lists the live tiles, the longest sequences' first, which the
  attention kernel walks instead of every sequence's tiles laid out for the longest one.

`run()` checks every configuration against a float64 numpy reference.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

import numpy as np

from ptxdsl import Addr, Kernel, Module, Reg, debug, ptx, t
from ptxdsl.epilogue import BOX_COLS, STAGING_BYTES, TmaStoreEpilogue
from ptxdsl.fragments import Fragment
from ptxdsl.instructions.wgmma_desc import SmemLayout, descriptor
from ptxdsl.pipeline import ConsumerView, MbarrierRing, ProducerView
from ptxdsl.sample_runner import Report, sample_main, sync

SeqMaps = Callable[[Reg], list[Reg]]     # a sequence's tensor maps (varlen: acquired)

if TYPE_CHECKING:   # the runtime is imported when a GPU run needs it
    from ptxdsl.runtime import LoadedModule, TensorMap

BM = 128                         # query rows per CTA with two consumer warpgroups (varlen's)
PRODUCER_REGS, CONSUMER_REGS = 24, 240
MAP_BYTES = 128
TILE_THREADS = 256               # fa_varlen_tiles' one CTA
TILE_BINS = 4096                 # its sort's bins: exact for sequences below 512k tokens
TILES_HEADER = 16                # the varlen tile list: the count, then an entry per tile
TILE_ENTRY = 8
TILE_WORDS = 16                  # a claimed tile for the consumers: b, h | m << 16, start, length
NO_TILE = 0xFFFFFFFF             # its b when the list is done
SMEM = 227 * 1024 - 256         # dynamic shared memory per CTA, less the barriers
MAPS = ("q", "k", "v", "o")      # the tensor maps, in parameter and workspace order
LOG2E = 1.4426950408889634
LN2 = 0.6931471805599453
DTYPES = {"bf16": (t.bf16, "BFLOAT16"), "f16": (t.f16, "FLOAT16")}
# head dim -> (keys per block, ring stages, consumer warpgroups of 64 query rows each).
# D = 64 takes three (192-row tiles): its softmax is twice D = 128's share of the work, and a
# third warpgroup's softmax runs while the other two's products keep the tensor cores busy
# (BENCHMARKS.md section 8: 1.08-1.17x cuDNN against 1.00-1.04x with two, non-causal).
BLOCKS = {64: (128, 3, 3), 128: (128, 2, 2), 256: (64, 2, 2)}
# Causal with Sq below this, a head dim of three consumers takes its two-consumer kernel
# (`_m128`): 192-row tiles put more of a short sequence's work on the diagonal blocks and
# make fewer tiles to balance (0.87-0.90x cuDNN at S = 512, 1k against 0.95-0.99x).
SHORT_CAUSAL = 2048
# Longer key blocks (fewer softmax rounds and ping-pong turns per key), which fit only with
# O staged in Q (`Config`): head dim -> keys per block of the dense kernel taken from
# LONG_KEYS_FROM keys (non-causal) or SHORT_CAUSAL query rows (causal), and of the varlen
# kernel. On an H200, D = 256 with 80 keys: +3-11% non-causal from 1k keys, +2-10% causal
# from 2k, but -6% at 512 and causal 1k (its one Q stage waits for the stores); D = 128 varlen
# with 160 keys: +4% on section 8's ragged batch (dense D = 128: within 1% from 4k, slower
# below).
LONG_KEYS = {256: 80}
LONG_KEYS_FROM = 1024
VARLEN_KEYS = {128: 160}
# Head dims whose consumers stage O in their Q rows even where staging buffers of their own
# fit (`Config`), as measured on an H200 with two Q stages either way: D = 128 +2-4% from 1k
# rows; D = 64 1% slower at 512-2k rows (the same from 4k).
O_IN_Q = frozenset({128})


class Config:
    """The build-time constants of one kernel: element type, head dim, keys per block `bn`
    (BLOCKS' unless given), ring stages, consumer warpgroups (BLOCKS' unless `consumers` is
    given), and whether it reads per-sequence maps from the varlen workspace.

    Shared memory: the Q stages (each consumer's 64 rows a tile of their own), the K and V
    stages, a staging buffer per consumer for O's TMA stores, the barriers; two Q stages
    where they fit. A consumer stages its O in its own rows of the tile's Q stage instead,
    once its last S GEMM has read them (`o_in_q`), where the head dim is in O_IN_Q or the
    buffers do not fit. With two Q stages the stage goes back to the producer during the next
    tile, when the stores have long read it; with one, right after the stores' reads, as the
    next tile's Q waits for it."""

    def __init__(self, dtype: str, d: int, varlen: bool = False, consumers: int | None = None,
                 bn: int | None = None):
        if dtype not in DTYPES or d not in BLOCKS:
            raise ValueError(f"flash_attention: dtype in {sorted(DTYPES)}, head dim in "
                             f"{sorted(BLOCKS)}; got {dtype!r}, {d}")
        self.dtype, self.d, self.varlen = dtype, d, varlen
        self.wtype, self.tma_dtype = DTYPES[dtype]
        usual_bn, self.stages, usual = BLOCKS[d]
        if bn is not None and (isinstance(bn, bool) or not isinstance(bn, int)
                               or not 16 <= bn <= 256 or bn % 16):
            raise ValueError(f"flash_attention: keys per block a multiple of 16 from 16 to "
                             f"256 (P V's K steps; a TMA box's rows), got {bn!r}")
        self.bn = usual_bn if bn is None else bn
        if consumers is not None and (isinstance(consumers, bool) or consumers not in (2, 3)
                                      or not isinstance(consumers, int)):
            raise ValueError(f"flash_attention: 2 or 3 consumer warpgroups, got {consumers!r}")
        # varlen: two, as the tile list's row blocks are BM rows (`build_varlen_tiles`)
        self.consumers = BM // 64 if varlen else consumers or usual
        self.bm = 64 * self.consumers              # query rows per tile
        self.threads = 128 * (1 + self.consumers)
        # setmaxnreg: the producer's warpgroup gives its registers to the consumers (the
        # file's 64K less the producer's, split over the consumers, in steps of 8)
        self.consumer_regs = min(CONSUMER_REGS,
                                 (65536 // 128 - PRODUCER_REGS) // self.consumers // 8 * 8)
        # named barriers: 1 .. n the consumers' epilogues, n + 1 .. 2n their ping-pong turns
        self.ping = 1 + self.consumers
        self.layout_q = SmemLayout(self.wtype, 64, d, "K", "128B")     # one consumer's rows
        self.layout_k = SmemLayout(self.wtype, self.bn, d, "K", "128B")
        self.layout_v = SmemLayout(self.wtype, d, self.bn, "MN", "128B")
        self.o_box = SmemLayout(self.wtype, BOX_COLS, BOX_COLS, "K", "128B")  # one TMA store
        self.q_wg_bytes = self.layout_q.nbytes
        self.q_bytes = self.consumers * self.q_wg_bytes
        self.kv_bytes = self.layout_k.nbytes          # = layout_v.nbytes: the same boxes
        kv = 2 * self.stages * self.kv_bytes
        staging = self.consumers * STAGING_BYTES
        # (Q stages, O in Q) by preference: the first that fits
        prefs = [(2, True)] if d in O_IN_Q else []
        prefs += [(2, False), (1, False), (2, True), (1, True)]
        fits = [(n, in_q) for n, in_q in prefs
                if n * self.q_bytes + kv + (0 if in_q else staging) <= SMEM]
        if not fits:
            raise ValueError(f"flash_attention: {self.bn} keys per block at D={d}: Q and "
                             f"{self.stages} K and V stages need {self.q_bytes + kv} bytes of "
                             f"shared memory, more than the {SMEM} a CTA has")
        self.q_stages, self.o_in_q = fits[0]
        staging = 0 if self.o_in_q else staging
        self.q_off = 0
        self.k_off = self.q_stages * self.q_bytes
        self.v_off = self.k_off + self.stages * self.kv_bytes
        self.epi_off = self.v_off + self.stages * self.kv_bytes   # one staging buffer per WG
        self.bar_off = self.epi_off + staging
        self.smem_bytes = self.bar_off + 16 * (self.q_stages + 2 * self.stages)
        # varlen: each Q stage's tile index (`Claims`), in the dynamic region: a static
        # variable would move the dynamic buffer off its 1024-byte alignment
        self.words_off = self.smem_bytes
        self.smem_bytes += TILE_WORDS * self.q_stages if varlen else 0
        self.name = f"fa_fwd_{dtype}_d{d}" + ("_varlen" if varlen else "") + \
            ("" if varlen or self.consumers == usual else f"_m{self.bm}") + \
            ("" if self.bn == usual_bn else f"_n{self.bn}")


@functools.cache
def config(dtype: str, d: int, varlen: bool = False, consumers: int | None = None,
           bn: int | None = None) -> Config:
    """The Config of a kernel, made once (the host path runs on every call); a varlen one
    takes VARLEN_KEYS' keys per block where the head dim has them."""
    return Config(dtype, d, varlen, consumers, VARLEN_KEYS.get(d) if varlen and bn is None
                  else bn)


def dense_configs(dtype: str, d: int) -> list[Config]:
    """The dense kernels of a head dim: BLOCKS'; where that has three consumers, the
    two-consumer one short causal calls take; where LONG_KEYS has the head dim, the one with
    longer key blocks (`dense_config`)."""
    usual = config(dtype, d)
    return [usual] + ([config(dtype, d, consumers=2)] if usual.consumers != 2 else []) + \
        ([config(dtype, d, bn=LONG_KEYS[d])] if d in LONG_KEYS else [])


def dense_config(dtype: str, d: int, sq: int, causal: bool,
                 consumers: int | None = None, sk: int | None = None,
                 bn: int | None = None) -> Config:
    """The dense kernel a call of Sq query rows and Sk keys (Sq unless given) takes: BLOCKS';
    causal with Sq below SHORT_CAUSAL, the two-consumer one of a head dim of three; with
    LONG_KEYS' longer key blocks, from LONG_KEYS_FROM keys (non-causal) or SHORT_CAUSAL query
    rows (causal). With `consumers` and/or `bn`, the first of `dense_configs` with that many
    consumer warpgroups and keys per block instead."""
    configs = dense_configs(dtype, d)
    if consumers is None and bn is None:
        usual = configs[0]
        if causal and sq < SHORT_CAUSAL and usual.consumers != 2:
            return config(dtype, d, consumers=2)
        keys = sq if sk is None else sk
        if d in LONG_KEYS and (sq >= SHORT_CAUSAL if causal else keys >= LONG_KEYS_FROM):
            return config(dtype, d, bn=LONG_KEYS[d])
        return usual
    for cfg in configs:
        if consumers in (None, cfg.consumers) and bn in (None, cfg.bn):
            return cfg
    raise ValueError(f"flash_attention: consumers={consumers}, bn={bn} at D={d}: the dense "
                     f"kernels of that head dim have (consumers, keys per block) "
                     f"{[(c.consumers, c.bn) for c in configs]}")


def _ex2(k: Kernel, x: Reg, dst: Reg | None = None) -> Reg:
    return k.ex2(x, mode="approx", ftz=True, dst=dst)


def _quad_reduce(k: Kernel, x: Reg, op: str) -> Reg:
    """`op` (max or add) of x over the 4 threads holding one accumulator row."""
    for lanes in (1, 2):
        other = k.shfl_sync("bfly", x, lanes, dst=k.reg(t.f32))
        if op == "max":
            k.max(x, other, dst=x)
        else:
            k.add(x, other, dst=x)
    return x


class Tile:
    """One work item of the persistent loop: 128 query rows (`m0`) of head `h` of sequence
    `b`, with the sequence's lengths and the key blocks its rows see. Every role walks the
    same tiles in the same order (`tiles` in `build_forward`).

    The (sequence, head) pairs are taken in groups of `group_heads` (`launch_shape`: two waves
    of tiles per group), row block by row block inside a group: the CTAs running at any
    time work on a group's few heads and read their K and V from L2 (with every head's first
    row block first, 132 CTAs on 132 different heads of short sequences were bound by K/V
    reads from memory), and the causal row blocks of a group go from the last (the longest)
    to the first, so the snake order of the CTAs pairs long tiles with short ones. Heads
    sharing a K/V head (GQA) are adjacent. Varlen tiles come from a list made on the device
    in the same order over the live tiles only, the longest sequences first
    (`build_varlen_tiles`)."""

    def __init__(self, k: Kernel, cfg: Config, index: Reg | None, p: dict[str, Reg],
                 words: tuple[Reg, ...] | None = None) -> None:
        if words is not None:     # as the producer wrote it for the consumers (`Claims`)
            self.b, self.h, self.m0 = words[0], k.and_(words[1], 0xFFFF), \
                k.mul(k.shr(words[1], 16), cfg.bm)
            self.start, self.sq = words[2], words[3]
            self.sk = self.sq
        elif cfg.varlen:
            assert index is not None
            self._listed(k, cfg, index, p)
        else:
            assert index is not None
            self._ordered(k, cfg, index, p)
        self.live = self.m0 < self.sq     # varlen: rows past the sequence's end (or none)
        self.nblocks = k.div(k.add(self.sk, cfg.bn - 1), cfg.bn)
        with k.if_(p["causal"]):          # up to the block of the tile's last row
            last = k.sub(k.min(k.add(self.m0, cfg.bm), self.sq), 1)
            k.min(self.nblocks, k.add(k.div(last, cfg.bn), 1), dst=self.nblocks)

    def _listed(self, k: Kernel, cfg: Config, index: Reg, p: dict[str, Reg]) -> None:
        """Varlen: entry `index` of the list `fa_varlen_tiles` wrote (sequence, and the head
        in the low 16 bits and the row block in the high 16 of the second word)."""
        entry = k.ld(k.add(p["tile_list"], k.mul(index, TILE_ENTRY, mode="wide")),
                     type=t.u32, vec=2, space="global")
        self.b = entry[0]
        self.h = k.and_(entry[1], 0xFFFF)
        self.m0 = k.mul(k.shr(entry[1], 16), cfg.bm)
        cu = k.add(p["cu"], k.mul(self.b, 4, mode="wide"))
        self.start = k.ld(cu, type=t.u32, space="global")
        self.sq = self.sk = k.sub(k.ld(Addr(cu, 4), type=t.u32, space="global"), self.start)

    def _ordered(self, k: Kernel, cfg: Config, index: Reg, p: dict[str, Reg]) -> None:
        per_group = k.mul(p["group_heads"], p["mblocks"])
        grp = k.div(index, per_group)
        within = k.sub(index, k.mul(grp, per_group))
        first = k.mul(grp, p["group_heads"])          # the group's first (sequence, head)
        size = k.min(p["group_heads"], k.sub(k.mul(p["heads"], p["batch"]), first))
        mrank = k.div(within, size)
        hb = k.add(first, k.sub(within, k.mul(mrank, size)))
        self.b = k.div(hb, p["heads"])
        self.h = k.sub(hb, k.mul(self.b, p["heads"]))
        mblock = k.mov(mrank)
        with k.if_(p["causal"]):
            k.sub(k.sub(p["mblocks"], 1), mrank, dst=mblock)
        self.m0 = k.mul(mblock, cfg.bm)
        self.start = k.mov(0, type=t.u32)
        self.sq, self.sk = p["sq"], p["sk"]


class Claims:
    """Varlen causal's dynamic schedule: the producer thread claims the next entry of the tile list
    with a global atomic (longest tiles first, so each CTA takes the next tile when it is
    free: no ragged last wave as in a static order) one tile ahead, and hands the tile to
    the consumers in 16 bytes beside the Q stage it loads the tile's Q into (sequence, head
    and row block, the sequence's start and length), written before the stage's arrival
    (release) and read after its wait (acquire), so that the consumers load nothing from
    global memory between tiles. `NO_TILE` with a plain arrival ends both sides' loops.

    Causal tiles differ in length by the row block: claimed, on all SMs, they ran 14-16%
    faster than in the static order on an H100 (a ragged batch of 32 sequences, the same
    run). Non-causal ones, of one length per sequence, ran 3-9% slower claimed than in the
    static order, whose CTAs move through a head group's keys in step, and take that
    order."""

    def __init__(self, k: Kernel, cfg: Config, smem: Any, tiles_g: Reg, ntiles: Reg,
                 p: dict[str, Reg]) -> None:
        self.k, self.cfg, self.p, self.ntiles = k, cfg, p, ntiles
        self.counter = k.add(tiles_g, 4)      # zeroed by fa_varlen_tiles
        self.words = Addr(smem, cfg.words_off)

    def _claim(self, dst: Reg | None = None) -> Reg:
        return self.k.atom("add", self.counter, 1, type=t.u32, space="global", dst=dst)

    def produce(self, qp: ProducerView, body: Callable[[Tile], None]) -> None:
        """The producer's loop: `body` loads each claimed tile (its Q stage already free)."""
        k = self.k
        claim = self._claim()
        with k.loop():
            done = claim >= self.ntiles
            with k.if_(done):
                qp.wait_empty()
                k.st(qp.slot(self.words, TILE_WORDS), NO_TILE, type=t.u32, space="shared")
                qp.arrive()
            k.break_(when=done)
            tile = Tile(k, self.cfg, claim, self.p)
            self._claim(dst=claim)          # the next one, in flight during this tile
            qp.wait_empty()
            k.st(qp.slot(self.words, TILE_WORDS),
                 (tile.b, k.or_(tile.h, k.shl(k.div(tile.m0, self.cfg.bm), 16)), tile.start,
                  tile.sq),
                 space="shared")
            body(tile)

    def consume(self, qc: ConsumerView, body: Callable[[Tile], None]) -> None:
        """A consumer warpgroup's loop: `body` runs each tile after its Q stage's wait."""
        k = self.k
        with k.loop():
            qc.wait_full()
            words = k.ld(qc.slot(self.words, TILE_WORDS), type=t.u32, vec=4, space="shared")
            k.break_(when=words[0] == NO_TILE)
            body(Tile(k, self.cfg, None, self.p, words=words))


def build_forward(cfg: Config, bounded: bool = False) -> Kernel:
    """The attention kernel of `cfg`; `bounded`: waits trap after 2 s with an error record."""
    k = Kernel(cfg.name, reqntid=cfg.threads, minnctapersm=1)
    if bounded:
        debug.bounded_waits(k, timeout_ns=2_000_000_000)
    if cfg.varlen:
        # sequence 0's map of each tensor in the workspace (the next sequence's 512 bytes on):
        # one parameter per tensor, so that each ring can declare its loads' box
        cu_p = k.param_ptr("cu_seqlens")
        maps_p = [k.param_ptr(f"maps_{n}") for n in MAPS]
        tiles_p = k.param_ptr("tiles")
        loads = [{m: box} for m, box in zip(maps_p, (cfg.layout_q, cfg.layout_k,
                                                    cfg.layout_v), strict=False)]
    else:
        # declared boxes: the checker compares each load's bytes with its barrier's expect_tx
        maps_p = [k.param_tensormap(f"map_{n}", box=layout) for n, layout in
                  zip(MAPS, (cfg.layout_q, cfg.layout_k, cfg.layout_v, cfg.o_box), strict=True)]
        loads = [{}, {}, {}]
    lse_p = k.param_ptr("lse")
    names = ("sq", "sk", "heads", "batch", "mblocks", "group_heads", "group", "lse_sb",
             "lse_sh", "causal")
    params = {n: k.param(t.u32, n) for n in names}
    scale_p = k.param(t.f32, "scale_log2")
    smem = k.extern_shared("smem", align=cfg.layout_q.alignment)
    rings = [MbarrierRing(k, n, empty_count=cfg.consumers,
                          storage=Addr(smem, cfg.bar_off + off), name=nm, loads=box)
             for (nm, n, off), box in zip((("qr", cfg.q_stages, 0),
                                           ("kr", cfg.stages, 16 * cfg.q_stages),
                                           ("vr", cfg.stages, 16 * (cfg.q_stages + cfg.stages))),
                                          loads, strict=True)]
    for ring in rings[:-1]:
        ring.init(sync=False)
    rings[-1].init()                          # thread 0; ends with bar.sync 0
    p = {n: k.ld_param(params[n]) for n in ("sq", "sk", "heads", "batch", "mblocks",
                                             "group_heads", "group")}
    p["causal"] = k.ld_param(params["causal"]) != 0
    if cfg.varlen:
        p["cu"] = k.cvta(k.ld_param(cu_p), "global", to=True)
        tiles_g = k.cvta(k.ld_param(tiles_p), "global", to=True)
        ntiles = k.ld(tiles_g, type=t.u32, space="global")     # fa_varlen_tiles' count
        p["tile_list"] = k.add(tiles_g, TILES_HEADER)
        claims: Claims | None = Claims(k, cfg, smem, tiles_g, ntiles, p)
    else:
        claims = None
        ntiles = k.mul(k.mul(p["mblocks"], p["heads"]), p["batch"])
    tid = k.tid.x
    wg = k.shr(tid, 7)

    waves = k.div(k.add(ntiles, k.sub(k.nctaid.x, 1)), k.nctaid.x)
    mirror = k.sub(k.sub(k.nctaid.x, 1), k.ctaid.x)

    def tiles(body: Callable[[Tile], None]) -> None:
        """CTA i takes tile i of even waves and tile nctaid - 1 - i of odd ones (a snake):
        with the tiles in decreasing length inside a head group (`Tile`), its causal tiles
        pair a long one with a short one, instead of the first CTAs taking the longest of
        every wave."""
        with k.for_range(0, waves) as w:
            slot = k.selp(mirror, k.ctaid.x, k.and_(w, 1) == 1, type=t.u32)
            index = k.mad(w, k.nctaid.x, slot)
            with k.if_(index < ntiles):
                tile = Tile(k, cfg, index, p)
                with k.if_(tile.live):
                    body(tile)

    if cfg.varlen:
        firsts = [k.ld_param(m) for m in maps_p]

        def seq_maps(b: Reg) -> list[Reg]:
            """Sequence b's maps in the workspace, acquired: another kernel wrote them."""
            step = k.mul(b, len(MAPS) * MAP_BYTES, mode="wide")
            maps = [k.add(first, step) for first in firsts]
            for m in maps:
                ptx.fence_proxy_tensormap_generic(k, "acquire", "gpu", m)
            return maps
    else:
        def seq_maps(b: Reg) -> list[Reg]:
            return [k.tensormap_addr(m) for m in maps_p]

    with k.if_(wg == 0):
        ptx.setmaxnreg_dec(k, PRODUCER_REGS)
        with k.if_(tid == 0):
            _producer(k, cfg, smem, rings, seq_maps, p, tiles, claims)
    with k.else_():
        ptx.setmaxnreg_inc(k, cfg.consumer_regs)
        c = k.sub(wg, 1)
        consumer = Consumer(k, cfg, smem, rings, c, p["causal"], k.ld_param(scale_p))
        with k.if_(c == cfg.consumers - 1):   # consumer 0 issues its GEMMs first
            k.bar_arrive(cfg.ping, 256)

        out = Output(k, cfg, smem, c, lse_p, [params[n] for n in ("lse_sb", "lse_sh")],
                     seq_maps if cfg.varlen else None, None if cfg.varlen else maps_p[-1])

        def body(tile: Tile, claimed: bool = False) -> None:
            out.start(tile, consumer.row0(tile))
            consumer.tile(tile, out, q_waited=claimed)

        if claims is None:
            tiles(body)
        else:
            with k.if_(p["causal"]):
                claims.consume(consumer.qc, lambda tile: body(tile, claimed=True))
            with k.else_():
                tiles(body)
        out.finish()
        with k.if_(c == 0):                   # the last consumer's last arrive
            k.bar_sync(cfg.ping, 256)
    k.ret()
    return k


def _producer(k: Kernel, cfg: Config, smem: Any, rings: list[MbarrierRing], seq_maps: SeqMaps,
              p: dict[str, Reg], tiles: Callable[[Callable[[Tile], None]], None],
              claims: Claims | None) -> None:
    """One thread: per tile the Q tile, then K and V of each key block, through the rings
    (in the static order of `tiles`, or, varlen causal, claiming each tile: `Claims`)."""
    qp, kp, vp = (r.producer() for r in rings)
    kvh = k.reg(t.u32)

    def tile(tl: Tile, claimed: bool = False) -> None:
        qmap, kmap, vmap = seq_maps(tl.b)[:3]
        batch = k.mov(0, type=t.u32) if cfg.varlen else tl.b
        k.div(tl.h, p["group"], dst=kvh)
        # each consumer's 64 rows of Q a tile of their own
        rows = [(c * cfg.q_wg_bytes, k.add(tl.m0, 64 * c)) for c in range(cfg.consumers)]
        load(qp, qmap, cfg.q_off, cfg.q_bytes, cfg.layout_q, rows, (tl.h, batch),
             waited=claimed)
        with k.for_range(0, tl.nblocks) as j:
            key0 = [(0, k.mul(j, cfg.bn))]
            load(kp, kmap, cfg.k_off, cfg.kv_bytes, cfg.layout_k, key0, (kvh, batch))
            load(vp, vmap, cfg.v_off, cfg.kv_bytes, cfg.layout_v, key0, (kvh, batch))

    def load(pv: ProducerView, tmap: Reg, base: int, nbytes: int, layout: SmemLayout,
             rows: list[tuple[int, Reg]], at: tuple[Reg, ...], waited: bool = False) -> None:
        """The stage's tiles: `layout`'s boxes of each (offset in the stage, first row)."""
        if not waited:
            pv.wait_empty()
        pv.arrive_expect_tx(nbytes)
        slot = pv.slot(Addr(smem, base), nbytes)
        for start, row in rows:
            for off, col in layout.tma_copies():
                ptx.cp_async_bulk_tensor(k, "shared::cluster", "global",
                                         k.add(slot, start + off), tmap, (col, row, *at),
                                         pv.full_barrier())
        pv.advance()

    if claims is None:
        tiles(tile)
    else:
        with k.if_(p["causal"]):
            claims.produce(qp, lambda tl: tile(tl, claimed=True))
        with k.else_():
            tiles(tile)


class Consumer:
    """One consumer warpgroup's 64 query rows of each tile: S = Q K^T, the online softmax,
    O += P V, with the next block's S GEMM in flight during this block's softmax."""

    def __init__(self, k: Kernel, cfg: Config, smem: Any, rings: list[MbarrierRing], c: Reg,
                 causal: Reg, scale_log2: Reg) -> None:
        self.k, self.cfg, self.smem, self.c = k, cfg, smem, c
        self.causal, self.scale_log2 = causal, scale_log2
        self.qc, self.kc, self.vc = (r.consumer() for r in rings)
        self.defer = cfg.o_in_q and cfg.q_stages > 1
        if self.defer:
            # O is staged in the tile's Q stage, which goes back to the producer during the
            # next tile, once the stores have read it: a second cursor on the Q ring, a tile
            # behind, releases it (`owed`: whether one is due; the last tile's stage is not
            # released: no Q comes after it, and `Output.finish` waits for the stores). With
            # one Q stage the next tile's Q waits for it: released at once.
            self.q_behind = rings[0].consumer()
            self.owed = k.mov(0, type=t.u32)
        self.s = k.fragment(t.f32, shape=(64, cfg.bn), zero=False)
        self.o = k.fragment(t.f32, shape=(64, cfg.d), zero=False)
        # P: the same registers every block (the RS wgmma reads them while S_j is computed)
        self.p = k.fragment(t.f32, shape=(64, cfg.bn), packed=cfg.wtype, zero=False)
        self.m = [k.reg(t.f32) for _ in range(2)]     # running max of rows r, r + 8
        self.ell = [k.reg(t.f32) for _ in range(2)]   # this thread's partial row sums
        self.corr = [k.reg(t.f32) for _ in range(2)]
        self.r_origin, self.c_origin = self.s.origin()
        self.leader = k.and_(k.tid.x, 127) == 0
        # the ping-pong, round robin: wait for my turn, hand it to the next consumer
        self.mine = k.add(c, cfg.ping)
        nxt = k.add(c, 1)
        self.other = k.add(k.selp(0, nxt, nxt == cfg.consumers, type=t.u32), cfg.ping)
        self.q_rows = k.mul(c, cfg.q_wg_bytes)        # this warpgroup's rows of the Q tile

    def row0(self, tile: Tile) -> Reg:
        return self.k.mad(self.c, 64, tile.m0)

    def _release(self, view: ConsumerView) -> None:
        with self.k.if_(self.leader):
            view.release(scope="cta")
        view.advance()

    def settle(self, out: Output) -> None:
        """o_in_q: release the Q stage of the tile before, if one is owed, once the stores
        that staged O in it have read it."""
        k = self.k
        with k.if_(self.owed != 0):
            out.staged.wait_read()
            self._release(self.q_behind)
            k.mov(0, dst=self.owed)

    def tile(self, tile: Tile, out: Output, q_waited: bool = False) -> None:
        """One tile; `q_waited`: the Q stage's wait came first (`Claims.consume`)."""
        k, cfg = self.k, self.cfg
        row0 = self.row0(tile)
        my_row = k.add(row0, self.r_origin)
        self.o.zero()
        for h in (0, 1):
            k.mov(float("-inf"), type=t.f32, dst=self.m[h])
            k.mov(0.0, type=t.f32, dst=self.ell[h])
        if not q_waited:
            self.qc.wait_full()
        my_q = k.add(self.qc.slot(Addr(self.smem, cfg.q_off), cfg.q_bytes), self.q_rows)
        dq = descriptor(k, cfg.layout_q, my_q)

        def s_gemm() -> None:
            dk = descriptor(k, cfg.layout_k, self.kc.slot(Addr(self.smem, cfg.k_off),
                                                          cfg.kv_bytes))
            for kk in range(0, cfg.d, 16):
                ptx.wgmma_mma_async(k, self.s, dq.k_step(k, kk), dk.k_step(k, kk),
                                    0 if kk == 0 else 1, atype=cfg.wtype)
            ptx.wgmma_commit_group(k)

        def pv_gemm() -> None:
            dv = descriptor(k, cfg.layout_v, self.vc.slot(Addr(self.smem, cfg.v_off),
                                                          cfg.kv_bytes))
            for kk in range(0, cfg.bn, 16):
                ptx.wgmma_mma_async(k, self.o, self.p.a_operand(kk // 16), dv.k_step(k, kk),
                                    1, atype=cfg.wtype)
            ptx.wgmma_commit_group(k)

        def softmax(j: Reg) -> None:
            key0 = k.mul(j, cfg.bn)
            edge = k.add(key0, cfg.bn)
            # keys past Sk, or above the diagonal when causal: only in the blocks with any
            with k.if_(k.or_(edge > tile.sk, k.and_(self.causal, k.sub(edge, 1) > row0))):
                _mask(k, self.s, k.add(key0, self.c_origin), my_row, tile.sk, self.causal)
            _softmax(k, self.s, self.m, self.ell, self.corr, self.scale_log2)

        # block 0: S, softmax, P. Every mbarrier wait comes before the named barrier and
        # the wgmma fence: the .aligned instructions after it need the warp converged.
        self.kc.wait_full()
        k.bar_sync(self.mine, 256)
        ptx.wgmma_fence(k)
        s_gemm()
        k.bar_arrive(self.other, 256)
        ptx.wgmma_wait_group(k, 0)
        self._release(self.kc)
        if self.defer:          # the previous tile's Q stage: its stores are long done
            self.settle(out)
        softmax(k.mov(0, type=t.u32))
        self.s.to_packed(cfg.wtype, into=self.p)
        # block j: S_j and P_{j-1} V_{j-1} in flight together; softmax of S_j meanwhile.
        # O takes block j-1's factor while S_j runs, between the two products, so that only
        # the packing of P is left between P V's end and the next block's products.
        with k.for_range(1, tile.nblocks) as j:
            self.kc.wait_full()
            self.vc.wait_full()
            k.bar_sync(self.mine, 256)
            ptx.wgmma_fence(k)
            s_gemm()
            _rescale(k, self.o, self.corr)
            ptx.wgmma_fence(k)
            pv_gemm()
            k.bar_arrive(self.other, 256)
            ptx.wgmma_wait_group(k, 1)
            self._release(self.kc)
            softmax(j)
            ptx.wgmma_wait_group(k, 0)
            self._release(self.vc)
            self.s.to_packed(cfg.wtype, into=self.p)
        self.vc.wait_full()
        _rescale(k, self.o, self.corr)
        ptx.wgmma_fence(k)
        pv_gemm()
        ptx.wgmma_wait_group(k, 0)
        self._release(self.vc)
        if cfg.o_in_q:
            # O staged in this warpgroup's Q rows: the stage is released once the stores
            # have read it, by `settle` in the next tile (two Q stages) or here (one)
            out.store(self.o, self.m, self.ell, self.scale_log2, staging=my_q)
            if self.defer:
                self.qc.advance()
                k.mov(1, dst=self.owed)
            else:
                out.staged.wait_read()
                self._release(self.qc)
        else:
            self._release(self.qc)
            out.store(self.o, self.m, self.ell, self.scale_log2)


def _mask(k: Kernel, s: Fragment, col0: Reg, row: Reg, sk: Reg, causal: Reg) -> None:
    """-inf into the values whose key is past Sk or (causal) after the query's row."""
    neg_inf = k.mov(float("-inf"), type=t.f32)
    for i, r in enumerate(s):
        dr, dc = s.offsets(i)
        col = k.add(col0, dc)
        hide = col >= sk
        k.or_(hide, k.and_(causal, col > k.add(row, dr)), dst=hide)
        k.selp(neg_inf, r, hide, dst=r)


def _rows(frag: Fragment) -> list[list[int]]:
    """The value indices of a thread's two rows (r and r + 8) of an accumulator."""
    rows: list[list[int]] = [[], []]
    for i in range(len(frag)):
        rows[frag.offsets(i)[0] // 8].append(i)
    return rows


def _softmax(k: Kernel, s: Fragment, m: list[Reg], ell: list[Reg], corr: list[Reg],
             scale_log2: Reg) -> None:
    """One key block of the online softmax, in place: S becomes exp2(scale * (S - max)) (P
    before the division by the row sum); the running max m, the partial sums ell, and the
    factor `corr` by which the output so far is to be rescaled."""
    for half, idx in enumerate(_rows(s)):
        mx = k.mov(s[idx[0]], dst=k.reg(t.f32))
        for i in idx[1:]:
            k.max(mx, s[i], dst=mx)
        _quad_reduce(k, mx, "max")
        k.max(mx, m[half], dst=mx)                   # the new max (finite: key 0 is seen)
        _ex2(k, k.mul(k.sub(m[half], mx), scale_log2), dst=corr[half])
        k.mov(mx, dst=m[half])
        neg = k.neg(k.mul(mx, scale_log2))
        total = k.mov(0.0, type=t.f32)
        for i in idx:
            _ex2(k, k.mad(s[i], scale_log2, neg, type=t.f32), dst=s[i])
            k.add(total, s[i], dst=total)
        k.mad(ell[half], corr[half], total, type=t.f32, dst=ell[half])


def _rescale(k: Kernel, o: Fragment, corr: list[Reg]) -> None:
    for half, idx in enumerate(_rows(o)):
        for i in idx:
            k.mul(o[i], corr[half], dst=o[i])


class Output:
    """A consumer warpgroup's O rows of each tile, stored by TMA through the output's 4-D map
    (`TmaStoreEpilogue`: `stmatrix` into the warpgroup's staging buffer, then one store per
    64 x 64 box, clipped at Sq by the map, running on while the next tile starts), and their
    log-sum-exp (one predicated store per row)."""

    def __init__(self, k: Kernel, cfg: Config, smem: Any, c: Reg, lse_p: Any,
                 lse_strides: list[Any], seq_maps: SeqMaps | None, map_o: Any) -> None:
        self.k, self.cfg, self.seq_maps = k, cfg, seq_maps
        self.lse_base = k.cvta(k.ld_param(lse_p), "global", to=True)
        self.lsb, self.lsh = (k.ld_param(p) for p in lse_strides)
        self.tmap = k.tensormap_addr(map_o) if seq_maps is None else k.reg(t.u64)
        staging = k.add(k.mov(smem), k.mad(c, STAGING_BYTES, cfg.epi_off) if not cfg.o_in_q
                        else cfg.q_off)
        # named barrier c + 1: this warpgroup's own (the ping-pong's come after them)
        self.staged = TmaStoreEpilogue(k, staging, self.tmap, k.add(c, 1), rank=4)

    def start(self, tile: Tile, row0: Reg) -> None:
        """The tile's addresses: its sequence's output map (varlen) and LSE row."""
        k = self.k
        self.tile, self.row0 = tile, row0
        if self.seq_maps is not None:
            k.mov(self.seq_maps(tile.b)[3], dst=self.tmap)
        first = k.add(tile.start, row0)              # the warpgroup's first row in the tensor
        lse_elem = k.add(k.add(k.mul(tile.b, self.lsb, mode="wide"),
                               k.mul(tile.h, self.lsh, mode="wide")), k.cvt(first, t.u64))
        self.lse = k.add(self.lse_base, k.shl(lse_elem, 2))

    def store(self, o: Fragment, m: list[Reg], ell: list[Reg], scale_log2: Reg,
              staging: Reg | None = None) -> None:
        k, tile = self.k, self.tile
        rows_left = k.sub(tile.sq, self.row0, type=t.s32)
        inv = []
        for half in (0, 1):
            _quad_reduce(k, ell[half], "add")
            inv.append(k.rcp(ell[half], mode="approx", ftz=True))
        for i, r in enumerate(o):
            k.mul(r, inv[o.offsets(i)[0] // 8], dst=r)
        batch = k.mov(0, type=t.u32) if self.cfg.varlen else tile.b
        # staged in Q: the warpgroup's 64 rows of Q hold its whole 64 x D tile of O
        self.staged.store(o.to_packed(self.cfg.wtype), self.row0, 0, tile.h, batch,
                          staging=staging, whole=staging is not None)
        r_origin, c_origin = o.origin()
        with k.if_(c_origin == 0):                   # one thread of each row's four
            for half in (0, 1):
                row = k.add(r_origin, 8 * half)
                lse = k.mul(k.add(k.mul(m[half], scale_log2), k.lg2(ell[half], ftz=True)),
                            LN2)
                with k.if_(k.cvt(row, t.s32) < rows_left):
                    k.st(k.add(self.lse, k.mul(row, 4, mode="wide")), lse, space="global")

    def finish(self) -> None:
        """Before the warpgroup exits: its last TMA stores have read the staging buffer."""
        self.staged.finish()


# -- the varlen maps ---------------------------------------------------------------------------
def build_varlen_maps() -> Kernel:
    """One warp per sequence: its Q, K, V and O maps from the packed tensors' templates, with
    the sequence's first row as the address and its length as dimension 1."""
    k = Kernel("fa_varlen_maps", reqntid=32)
    templates = [k.param_tensormap(f"map_{n}") for n in MAPS]
    cu_p, ws_p = k.param_ptr("cu_seqlens"), k.param_ptr("maps")
    ptrs = [k.param(t.u64, f"{n}_ptr") for n in MAPS]
    strides = [k.param(t.u64, f"row_bytes_{n}") for n in MAPS]
    smaps = [k.shared_array(t.b8, MAP_BYTES, align=128, name=f"smap_{n}") for n in MAPS]
    seq = k.ctaid.x
    cu = k.add(k.cvta(k.ld_param(cu_p), "global", to=True), k.mul(seq, 4, mode="wide"))
    first = k.ld(cu, type=t.u32, space="global")
    length = k.sub(k.ld(Addr(cu, 4), type=t.u32, space="global"), first)
    base = k.add(k.ld_param(ws_p), k.mul(seq, len(MAPS) * MAP_BYTES, mode="wide"))
    with k.if_(length > 0):          # an empty sequence has no CTA that reads its maps
        with k.if_(k.tid.x == 0):
            for tmpl, smap, ptr, stride in zip(templates, smaps, ptrs, strides, strict=True):
                k.copy(smap, tmpl, MAP_BYTES)
                row = k.mul(k.cvt(first, t.u64), k.ld_param(stride))
                addr = k.add(k.ld_param(ptr), row)
                ptx.tensormap_replace_global_address(k, ptx.space_shared, smap, addr)
                ptx.tensormap_replace_global_dim(k, ptx.space_shared, smap, 1, length)
        k.syncwarp()
        for i, smap in enumerate(smaps):
            ptx.tensormap_cp_fenceproxy(k, ptx.sem_release, ptx.scope_gpu,
                                        k.add(base, i * MAP_BYTES), smap, MAP_BYTES)
    k.ret()
    return k


def build_varlen_tiles() -> Kernel:
    """One CTA: the varlen attention kernel's work list, the live tiles only, in `Tile`'s order
    over the (sequence, head) pairs sorted by length, longest first.

    With the tiles of every sequence laid out for the longest one, a grid-stride walk gave
    each CTA whatever mix of dead tiles (rows past a short sequence's end) and long and short
    ones fell to it: causal, some CTAs ran out of work while others had several long tiles
    left. Sorted, each wave of the walk takes tiles of about one length, and the snake order
    pairs a wave's long tiles with the next wave's shorter ones, as on a dense batch.

    The sort is a counting sort on the row-block count `nb` (a bin per count; counts of
    `TILE_BINS - 1` and more share the last bin): one 64-bit shared atomic per sequence adds
    (1, nb) to its bin and returns the sequence's place in the bin and the row blocks of
    the sequences before it there, so that after a suffix sum over the bins every sequence
    knows its rank and the tiles of all longer ones (`first`). A group of `group_heads` pairs
    then writes its tiles at H * first(rank) + h * nb, with no scan over the groups."""
    k = Kernel("fa_varlen_tiles", reqntid=TILE_THREADS)
    cu_p, scratch_p, tiles_p = (k.param_ptr(n) for n in ("cu_seqlens", "scratch", "tiles"))
    nseq, heads, group, nbins = (k.ld_param(k.param(t.u32, n))
                                 for n in ("nseq", "heads", "group_heads", "bins"))
    bins = k.shared_array(t.u64, TILE_BINS, align=16, name="bin_sums")
    cu = k.cvta(k.ld_param(cu_p), "global", to=True)
    placed = k.cvta(k.ld_param(scratch_p), "global", to=True)   # per sequence: place in bin
    # per rank: (sequence, nb, first, 0), 16-byte aligned for the vector stores
    ranked = k.add(placed, k.cvt(k.and_(k.add(k.mul(nseq, 8), 15), ~15 & 0xFFFFFFFF),
                                 t.u64))
    tiles = k.cvta(k.ld_param(tiles_p), "global", to=True)
    tid = k.tid.x

    def sequence(i: Reg) -> tuple[Reg, Reg]:
        at = k.add(cu, k.mul(i, 4, mode="wide"))
        length = k.sub(k.ld(Addr(at, 4), type=t.u32, space="global"),
                       k.ld(at, type=t.u32, space="global"))
        nb = k.div(k.add(length, BM - 1), BM)
        return nb, k.min(nb, TILE_BINS - 1)

    with k.for_range(tid, nbins, TILE_THREADS) as i:
        k.st(k.add(k.mov(bins), k.mul(i, 8)), 0, type=t.u64, space="shared")
    k.bar_sync(0)
    with k.for_range(tid, nseq, TILE_THREADS) as i:
        nb, key = sequence(i)
        one = k.or_(k.shl(k.mov(1, type=t.u64), 32), k.cvt(nb, t.u64))
        before = k.atom("add", k.add(k.mov(bins), k.mul(key, 8)), one, space="shared")
        k.st(k.add(placed, k.mul(i, 8, mode="wide")), before, space="global")
    k.bar_sync(0)
    with k.if_(tid == 0):              # suffix sums: (pairs, row blocks) in the longer bins
        total = k.mov(0, type=t.u64)
        with k.for_range(0, nbins) as j:
            at = k.add(k.mov(bins), k.mul(k.sub(k.sub(nbins, 1), j), 8))
            here = k.ld(at, type=t.u64, space="shared")
            k.st(at, total, space="shared")
            k.add(total, here, dst=total)
        # the tile count, and the attention kernel's claim counter from 0
        k.st(tiles, (k.mul(k.cvt(total, t.u32), heads), k.mov(0, type=t.u32)), space="global")
    k.bar_sync(0)
    with k.for_range(tid, nseq, TILE_THREADS) as i:
        nb, key = sequence(i)
        start = k.add(k.ld(k.add(k.mov(bins), k.mul(key, 8)), type=t.u64, space="shared"),
                      k.ld(k.add(placed, k.mul(i, 8, mode="wide")), type=t.u64,
                           space="global"))
        rank = k.cvt(k.shr(start, 32), t.u32)
        k.st(k.add(ranked, k.mul(rank, 16, mode="wide")), (i, nb, k.cvt(start, t.u32),
                                                          k.mov(0, type=t.u32)),
             space="global")
    k.bar_sync(0)
    pairs = k.mul(nseq, heads)
    with k.for_range(tid, k.div(k.add(pairs, k.sub(group, 1)), group), TILE_THREADS) as g:
        q0 = k.mul(g, group)
        q1 = k.min(pairs, k.add(q0, group))

        def pair(q: Reg) -> tuple[Reg, ...]:
            """(sequence, nb, first) of pair q's rank, and its head."""
            r = k.div(q, heads)
            entry = k.ld(k.add(ranked, k.mul(r, 16, mode="wide")), type=t.u32, vec=4,
                         space="global")
            return (*entry[:3], k.sub(q, k.mul(r, heads)))

        _, nb0, first0, h0 = pair(q0)
        slot = k.add(k.mul(first0, heads), k.mul(h0, nb0))
        most = k.mov(0, type=t.u32)      # the group's longest (the last bin is not sorted)
        with k.for_range(q0, q1) as q:
            k.max(most, pair(q)[1], dst=most)
        with k.for_range(0, most) as back:
            m = k.sub(k.sub(most, 1), back)
            with k.for_range(q0, q1) as q:
                seq, nb, _, h = pair(q)
                with k.if_(nb > m):
                    at = k.add(tiles, k.mad(slot, TILE_ENTRY, TILES_HEADER, mode="wide"))
                    k.st(at, (seq, k.or_(h, k.shl(m, 16))), space="global")
                    k.add(slot, 1, dst=slot)
    k.ret()
    return k


def build_module(dtypes: Iterable[str] = tuple(DTYPES), dims: Iterable[int] = tuple(BLOCKS),
                 bounded: bool = False) -> Module:
    """Every forward kernel of `dtypes` x `dims`, dense and varlen, and the maps kernel."""
    kernels = [build_forward(cfg, bounded) for dt in dtypes for d in dims
               for cfg in (*dense_configs(dt, d), config(dt, d, varlen=True))]
    kernels += [build_varlen_maps(), build_varlen_tiles()]
    if bounded:
        return debug.module(kernels, name="flash_attention", target="sm_90a")
    return Module(kernels, name="flash_attention", target="sm_90a")


# -- host side ---------------------------------------------------------------------------------
def _ptr(x: object) -> int:
    from ptxdsl.runtime.arrays import device_pointer
    return device_pointer(x)


def tensor_map(dtype: str, ptr: object, shape: tuple[int, int, int, int],
               strides: tuple[int, int, int], rows: int, cols: int = 64) -> TensorMap:
    """A 4-D map over a [B, S, H, D] tensor of `dtype` (a DTYPES name) at `ptr` (`shape`, and
    the (batch, seq, head) `strides` in elements; D contiguous) whose dimensions are (D, S, H,
    B), innermost first, so that a copy's coordinates are (column, row, head, batch); boxes
    of `rows` x `cols` elements (a swizzle atom column of a tile) in the 128B swizzle. The
    backward sample's maps too. Encoded once per distinct argument list when `ptr` is a plain
    address: a training loop passes the same buffers again and again, and encoding costs
    more than the launch (the key is the arguments, not the description, which alone cost
    35 us a map to build). A buffer object is encoded each call, the map keeping it alive."""
    from ptxdsl import runtime as rt
    b, s, h, d = shape
    sb, ss, sh = strides

    def encode() -> TensorMap:
        return rt.TensorMap.tiled(ptr, (b, h, s, d), DTYPES[dtype][1], (1, 1, rows, cols),
                                  strides=(sb, sh, ss, 1), swizzle="128B")

    if not isinstance(ptr, int):
        return encode()
    key = (dtype, ptr, shape, strides, rows, cols)
    tmap = _MAP_CACHE.get(key)
    if tmap is None:
        if len(_MAP_CACHE) >= 512:
            _MAP_CACHE.clear()
        tmap = _MAP_CACHE[key] = encode()
    return tmap


_MAP_CACHE: dict[tuple[Any, ...], TensorMap] = {}
_SMS: list[int] = []


def sm_count() -> int:
    """The GPU's SMs: at most one CTA each (one CTA fills an SM's shared memory), here and in
    the backward sample's persistent grid."""
    if not _SMS:
        from ptxdsl import runtime as rt
        _SMS.append(rt.device_info(0).sm_count)
    return _SMS[0]


def launch_shape(mblocks: int, pairs: int) -> tuple[int, int]:
    """(head pairs per group of the tile order, CTAs) for `mblocks` row blocks of `pairs`
    (sequence, head) pairs: a group of about two waves of tiles, and exactly two where the
    GPU allows (a grid of half a group's tiles, at most one CTA per SM), so that the snake
    order pairs each CTA's long causal tile of a group with a short one (and the group's K and
    V stay in L2: at most 33 heads of 1k tokens, 16 MiB, on 132 SMs)."""
    sms = sm_count()
    group = max(1, min(pairs, (2 * sms) // mblocks))
    if group == pairs:      # one group: as many CTAs as tiles, up to one per SM
        return group, max(1, min(mblocks * pairs, sms))
    return group, min(sms, -(-group * mblocks // 2))


def check_heads(hq: int, hkv: int, d: int) -> int:
    """The query heads per K/V head (Hq a multiple of Hkv), for a supported head dim."""
    if d not in BLOCKS or hq < 1 or hkv < 1 or hq % hkv:
        raise ValueError(f"flash_attention: head dim in {sorted(BLOCKS)} and Hq a multiple of "
                         f"Hkv; got D={d}, Hq={hq}, Hkv={hkv}")
    return hq // hkv


def _map_specs(cfg: Config, hq: int, hkv: int) -> list[tuple[str, int, int, int]]:
    """(tensor, heads, box rows, box columns) of each map, in MAPS order."""
    return [("q", hq, 64, 64), ("k", hkv, cfg.bn, 64), ("v", hkv, cfg.bn, 64),
            ("o", hq, BOX_COLS, BOX_COLS)]


def _check_call(what: str, shape: Any, strides: Any, causal: Any, scale: Any,
                n_strides: int, names: str) -> None:
    """The host arguments of `forward`/`forward_varlen`: a mistake was found only deep inside
    (a KeyError for a missing stride, Python's unpacking error for a short shape, a TypeError
    from int(None) for `causal`), or not at all (causal=0.5 ran a causal kernel)."""
    def whole(v: Any) -> bool:
        return isinstance(v, int | np.integer) and not isinstance(v, bool)
    if not isinstance(shape, tuple | list) or len(shape) != 6 or not all(map(whole, shape)):
        raise ValueError(f"{what}: shape must be 6 ints ({names}), got {shape!r}"[:300])
    if not isinstance(strides, dict) or not all(
            isinstance(strides.get(n), tuple | list) and len(strides[n]) == n_strides
            and all(map(whole, strides[n])) for n in MAPS):
        raise ValueError(f"{what}: strides must map each of {', '.join(MAPS)} to its "
                         f"{n_strides} strides in elements (ints), got {strides!r}"[:300])
    if type(causal) is not bool:
        raise ValueError(f"{what}: causal must be True or False, got {causal!r}"[:200])
    if scale is not None and (isinstance(scale, bool) or not isinstance(
            scale, int | float | np.integer | np.floating) or not math.isfinite(scale)):
        raise ValueError(f"{what}: scale must be None (1/sqrt(D)) or a finite number, got "
                         f"{scale!r}"[:200])


def forward(module: LoadedModule, q: object, k: object, v: object, o: object, lse: object, *,
            shape: tuple[int, int, int, int, int, int], strides: dict[str, tuple[int, int, int]],
            causal: bool, scale: float | None = None, dtype: str = "bf16",
            stream: object = None, consumers: int | None = None,
            bn: int | None = None) -> None:
    """O and LSE of a dense batch. `shape` = (B, Sq, Sk, Hq, Hkv, D); `strides["q"|"k"|"v"|"o"]`:
    the (batch, seq, head) strides in elements of each [B, S, H, D] tensor (D contiguous,
    the others multiples of 8); LSE is a contiguous f32 [B, Hq, Sq]. `scale`: default
    1/sqrt(D). `consumers`, `bn`: the kernel with that many consumer warpgroups and keys per
    block (one of `dense_configs`) instead of the one `dense_config` picks for the shape."""
    _check_call("flash_attention", shape, strides, causal, scale, 3, "B, Sq, Sk, Hq, Hkv, D")
    b, sq, sk, hq, hkv, d = shape
    group = check_heads(hq, hkv, d)
    if min(b, sq, sk) < 1:
        raise ValueError(f"flash_attention: B, Sq, Sk >= 1, got {b}, {sq}, {sk}")
    cfg = dense_config(dtype, d, sq, causal, consumers, sk=sk, bn=bn)
    scale = 1.0 / math.sqrt(d) if scale is None else scale
    tensors = {"q": (q, sq), "k": (k, sk), "v": (v, sk), "o": (o, sq)}
    maps = [tensor_map(cfg.dtype, _ptr(tensors[n][0]), (b, tensors[n][1], heads, d),
                       strides[n], rows, cols) for n, heads, rows, cols in _map_specs(cfg, hq, hkv)]
    mblocks = -(-sq // cfg.bm)
    groups, grid = launch_shape(mblocks, hq * b)
    args = (*maps, lse, sq, sk, hq, b, mblocks, groups, group,
            hq * sq, sq, int(causal), scale * LOG2E)
    module[cfg.name].launch(grid, cfg.threads, args, shared_mem=cfg.smem_bytes, stream=stream)


def forward_varlen(module: LoadedModule, q: object, k: object, v: object, o: object,
                   lse: object, cu_seqlens: object, workspace: object, *,
                   shape: tuple[int, int, int, int, int, int],
                   strides: dict[str, tuple[int, int]], causal: bool,
                   scale: float | None = None, dtype: str = "bf16",
                   stream: object = None) -> None:
    """O and LSE of packed sequences: Q, K, V, O are [total, H, D] with (seq, head) strides
    `strides[...]` in elements; `cu_seqlens` int32 [nseq + 1] on the device; LSE f32
    [Hq, total]; `workspace` device memory of `workspace_bytes(nseq, total, Hq)` for the
    per-sequence maps and the tile list. `shape` = (nseq, max_seqlen, total, Hq, Hkv, D)."""
    _check_call("flash_attention varlen", shape, strides, causal, scale, 2,
                "nseq, max_seqlen, total, Hq, Hkv, D")
    nseq, max_len, total, hq, hkv, d = shape
    group = check_heads(hq, hkv, d)
    cfg = config(dtype, d, varlen=True)
    scale = 1.0 / math.sqrt(d) if scale is None else scale
    if nseq < 1 or max_len < 1 or total < 1:
        return
    tensors = {"q": q, "k": k, "v": v, "o": o}
    specs = _map_specs(cfg, hq, hkv)
    templates = [tensor_map(cfg.dtype, _ptr(tensors[n]), (1, total, heads, d),
                            (total * strides[n][0], *strides[n]), rows, cols)
                 for n, heads, rows, cols in specs]
    ptrs = [_ptr(tensors[n]) for n in MAPS]
    row_bytes = [2 * strides[n][0] for n in MAPS]
    mblocks = -(-max_len // BM)
    if hq >= 1 << 16 or mblocks >= 1 << 16:
        raise ValueError(f"flash_attention varlen: fewer than 65536 heads and row blocks of "
                         f"{BM} (sequences below {BM << 16} tokens); got Hq={hq}, "
                         f"max_seqlen={max_len}")
    groups, grid = launch_shape(mblocks, hq * nseq)
    if causal:      # the CTAs claim tiles (`Claims`): one per SM
        grid = min(sm_count(), hq * (-(-total // BM) + nseq))
    ws = _ptr(workspace)
    scratch = ws + len(MAPS) * MAP_BYTES * nseq
    tiles = scratch + scratch_bytes(nseq)
    module["fa_varlen_maps"].launch(nseq, 32, (*templates, cu_seqlens, ws, *ptrs,
                                               *row_bytes), stream=stream)
    module["fa_varlen_tiles"].launch(1, TILE_THREADS, (cu_seqlens, scratch, tiles, nseq, hq,
                                                       groups, min(mblocks, TILE_BINS - 1) + 1),
                                     stream=stream)
    maps = [ws + i * MAP_BYTES for i in range(len(MAPS))]
    args = (cu_seqlens, *maps, tiles, lse, 0, 0, hq, nseq, mblocks, groups, group, 0, total,
            int(causal), scale * LOG2E)
    module[cfg.name].launch(grid, cfg.threads, args, shared_mem=cfg.smem_bytes, stream=stream)


def scratch_bytes(nseq: int) -> int:
    """fa_varlen_tiles' scratch: per sequence its place in its bin (8 bytes), then per rank
    the sequence, row blocks and tiles before it (16 bytes, 16-byte aligned)."""
    return -(-8 * nseq // 16) * 16 + 16 * nseq


def workspace_bytes(nseq: int, total: int, heads: int) -> int:
    """Bytes of the varlen workspace of `nseq` sequences of `total` tokens and `heads` query
    heads: four 128-byte maps per sequence, the tile sort's scratch, and the tile list (at
    most ceil(length / 128) tiles per sequence and head)."""
    most = heads * (-(-total // BM) + nseq)
    return len(MAPS) * MAP_BYTES * nseq + scratch_bytes(nseq) + TILES_HEADER + \
        TILE_ENTRY * most


# -- the reference and the run -----------------------------------------------------------------
def to_bits(x: np.ndarray, dtype: str) -> np.ndarray:
    """uint16 bits of x rounded to bf16 (nearest even) or fp16."""
    if dtype == "f16":
        return np.asarray(x, np.float16).view(np.uint16)
    u = np.ascontiguousarray(x, np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def from_bits(bits: np.ndarray, dtype: str) -> np.ndarray:
    if dtype == "f16":
        return bits.view(np.float16).astype(np.float64)
    return (bits.astype(np.uint32) << 16).view(np.float32).astype(np.float64)


def reference(q: np.ndarray, k: np.ndarray, v: np.ndarray, causal: bool,
              scale: float) -> tuple[np.ndarray, np.ndarray]:
    """(O, LSE) in float64 of one sequence: q [Sq, Hq, D], k and v [Sk, Hkv, D]; LSE [Hq, Sq]."""
    sq, hq, _ = q.shape
    sk, hkv, _ = k.shape
    group = hq // hkv
    o = np.zeros(q.shape)
    lse = np.zeros((hq, sq))
    for h in range(hq):
        s = scale * q[:, h] @ k[:, h // group].T
        if causal:
            s = np.where(np.arange(sk)[None, :] <= np.arange(sq)[:, None], s, -np.inf)
        mx = s.max(axis=1, keepdims=True)
        e = np.exp(s - mx)
        total = e.sum(axis=1, keepdims=True)
        o[:, h] = (e / total) @ v[:, h // group]
        lse[h] = (mx + np.log(total))[:, 0]
    return o, lse


TOL = {"bf16": 2e-2, "f16": 4e-3}     # O: max abs error against float64 (P is rounded too)
DENSE_CASES = ((2, 300, 300, 4, 2), (1, 1, 77, 2, 2), (2, 200, 1000, 4, 1), (1, 1, 1, 1, 1),
               (1, 513, 129, 8, 2))                   # (B, Sq, Sk, Hq, Hkv)
VARLEN_LENGTHS = (0, 1, 77, 300, 0, 1000, 129)
GROUPS_CASE = (5, 1024, 1024, 8, 2)


def _close(report: Report, name: str, got: np.ndarray, want: np.ndarray, tol: float) -> None:
    err = float(np.max(np.abs(got - want))) if got.size else 0.0
    report.check(name, bool(np.isfinite(got).all()) and err <= tol,
                 f"max abs error {err:.2e} (tolerance {tol:g})")


def run(dims: Iterable[int] = tuple(BLOCKS), dtypes: Iterable[str] = tuple(DTYPES),
        bounded: bool = False) -> Report:
    """Every kernel of `dims` x `dtypes` on the dense cases (causal and not, GQA/MQA, odd and
    unequal lengths) and a varlen batch with empty and one-token sequences, against float64."""
    from ptxdsl import runtime as rt
    report = Report("flash_attention")
    dims, dtypes = tuple(dims), tuple(dtypes)
    mod = build_module(dtypes, dims, bounded=bounded).load()
    rng = np.random.default_rng(5)
    for dt in dtypes:
        for d in dims:
            for cfg in dense_configs(dt, d):
                fn = mod[cfg.name]
                report.note(f"{cfg.name}: {fn.num_regs} registers at launch (setmaxnreg "
                            f"{PRODUCER_REGS}/{cfg.consumer_regs}), {cfg.smem_bytes} bytes of "
                            f"shared memory, {cfg.bm} query rows and {cfg.bn} keys per block, "
                            f"{cfg.stages} stages")
            for causal in (False, True):
                for b, sq, sk, hq, hkv in DENSE_CASES:
                    for cfg in dense_configs(dt, d):   # each kernel, whichever a shape picks
                        _dense_case(report, mod, rt, rng, dt, d, b, sq, sk, hq, hkv, causal,
                                    cfg)
                _varlen_case(report, mod, rt, rng, dt, d, VARLEN_LENGTHS, 4, 2, causal)
                if (dt, d) == (dtypes[0], dims[-1]):
                    # more tiles than two waves of the grid: several head groups in `Tile`'s
                    # order, the last one partial
                    _dense_case(report, mod, rt, rng, dt, d, *GROUPS_CASE, causal)
    return report


def _dense_case(report: Report, mod: LoadedModule, rt: Any, rng: np.random.Generator, dt: str,
                d: int, b: int, sq: int, sk: int, hq: int, hkv: int, causal: bool,
                cfg: Config | None = None) -> None:
    """One dense call, by the kernel the shape picks or by `cfg`'s."""
    qb = to_bits(rng.standard_normal((b, sq, hq, d)), dt)
    kb = to_bits(rng.standard_normal((b, sk, hkv, d)), dt)
    vb = to_bits(rng.standard_normal((b, sk, hkv, d)), dt)
    q, k, v = (rt.DeviceBuffer.from_numpy(x) for x in (qb, kb, vb))
    o = rt.DeviceBuffer.empty((b, sq, hq, d), np.uint16)
    lse = rt.DeviceBuffer.empty((b, hq, sq), np.float32)
    o.memset(0xFF)
    strides = {"q": (sq * hq * d, hq * d, d), "k": (sk * hkv * d, hkv * d, d),
               "v": (sk * hkv * d, hkv * d, d), "o": (sq * hq * d, hq * d, d)}
    scale = 1.0 / math.sqrt(d)
    forward(mod, q, k, v, o, lse, shape=(b, sq, sk, hq, hkv, d), strides=strides,
            causal=causal, scale=scale, dtype=dt, consumers=cfg.consumers if cfg else None,
            bn=cfg.bn if cfg else None)
    sync()
    got_o, got_lse = from_bits(o.to_numpy(), dt), lse.to_numpy()
    qf, kf, vf = (from_bits(x, dt) for x in (qb, kb, vb))
    errs_o, errs_l = [], []
    for i in range(b):
        want_o, want_lse = reference(qf[i], kf[i], vf[i], causal, scale)
        errs_o.append((got_o[i], want_o))
        errs_l.append((got_lse[i], want_lse))
    name = f"{cfg.name if cfg else f'fa_fwd_{dt}_d{d}'} B={b} Sq={sq} Sk={sk} Hq={hq} " \
        f"Hkv={hkv}" + (" causal" if causal else "")
    _close(report, name + " O", np.stack([g for g, _ in errs_o]),
           np.stack([w for _, w in errs_o]), TOL[dt])
    _close(report, name + " LSE", np.stack([g for g, _ in errs_l]),
           np.stack([w for _, w in errs_l]), 1e-3)


def _varlen_case(report: Report, mod: LoadedModule, rt: Any, rng: np.random.Generator, dt: str,
                 d: int, lengths: tuple[int, ...], hq: int, hkv: int, causal: bool) -> None:
    cu = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
    total, guard = int(cu[-1]), 64                       # rows after the last sequence
    qb = to_bits(rng.standard_normal((total, hq, d)), dt)
    kb = to_bits(rng.standard_normal((total, hkv, d)), dt)
    vb = to_bits(rng.standard_normal((total, hkv, d)), dt)
    q, k, v = (rt.DeviceBuffer.from_numpy(x) for x in (qb, kb, vb))
    o = rt.DeviceBuffer.empty((total + guard, hq, d), np.uint16)
    o.memset(0xFF)
    lse = rt.DeviceBuffer.empty((hq, total), np.float32)
    cu_dev = rt.DeviceBuffer.from_numpy(cu)
    ws = rt.DeviceBuffer.empty((workspace_bytes(len(lengths), total, hq),), np.uint8)
    strides = {"q": (hq * d, d), "k": (hkv * d, d), "v": (hkv * d, d), "o": (hq * d, d)}
    scale = 1.0 / math.sqrt(d)
    forward_varlen(mod, q, k, v, o, lse, cu_dev, ws,
                   shape=(len(lengths), max(lengths), total, hq, hkv, d), strides=strides,
                   causal=causal, scale=scale, dtype=dt)
    sync()
    o_bits = o.to_numpy()
    got_o, got_lse = from_bits(o_bits[:total], dt), lse.to_numpy()
    qf, kf, vf = (from_bits(x, dt) for x in (qb, kb, vb))
    want_o, want_lse = np.zeros_like(got_o), np.zeros_like(got_lse)
    for s0, s1 in zip(cu[:-1], cu[1:], strict=True):
        if s1 > s0:
            want_o[s0:s1], want_lse[:, s0:s1] = reference(qf[s0:s1], kf[s0:s1], vf[s0:s1],
                                                          causal, scale)
    name = f"fa_fwd_{dt}_d{d}_varlen lengths={list(lengths)} Hq={hq} Hkv={hkv}" + \
        (" causal" if causal else "")
    _close(report, name + " O", got_o, want_o, TOL[dt])
    _close(report, name + " LSE", got_lse, want_lse, 1e-3)
    report.check(name + " rows after the last sequence untouched",
                 bool((o_bits[total:] == 0xFFFF).all()))
    # the tile list: every live (sequence, head, row block) exactly once
    start = len(MAPS) * MAP_BYTES * len(lengths) + scratch_bytes(len(lengths))
    words = ws.to_numpy()[start:].view(np.uint32)
    listed = sorted((int(b), int(hm) & 0xFFFF, int(hm) >> 16)
                    for b, hm in words[TILES_HEADER // 4:].reshape(-1, 2)[:words[0]])
    live = sorted((b, h, m) for b, n in enumerate(lengths) for h in range(hq)
                  for m in range(-(-n // BM)))
    report.check(name + f" tile list: the {len(live)} live tiles once each", listed == live)


def main(argv: list[str] | None = None) -> int:
    return sample_main(argv, __doc__, build_module, run)


if __name__ == "__main__":
    raise SystemExit(main())
