"""FlashAttention backward on Hopper in ptxdsl builders: dQ, dK, dV of softmax(scale Q K^T) V.

Q, O, dO, dQ are [B, Sq, Hq, D], K, V, dK, dV are [B, Sk, Hkv, D] (bf16 or f16; the last
dimension contiguous, the other strides any multiple of 8 elements), Hq = G * Hkv (G = 1:
multi-head, Hkv = 1: multi-query); LSE is f32 [B, Hq, Sq], the natural log of each query
row's softmax denominator from the forward pass. Causal masking is torch SDPA's is_causal
(top-left: key j is visible to query i iff j <= i). Head dims 64 and 128.

Three kernels per (dtype, head dim), launched by `backward`:

- `fa_bwd_pre_<dtype>_d<D>`: per query row D_i = sum_d dO[i, d] O[i, d], LSE in log2 units,
  both f32 [B, Hq, Sq_pad] (Sq_pad: Sq rounded up to the 64-row query block; padding rows get
  D = 0 and LSE = +inf, so their P = exp2(s - inf) = 0 with no mask), and the f32 dQ
  accumulator [B, Hq, Sq_pad, D] zeroed.
- `fa_bwd_<dtype>_d<D>`: FlashAttention-3's design, persistent: one CTA per SM, 384
  threads, walking tiles of (block of 128 keys, KV head, batch). Warpgroup 0 gives registers
  back (`setmaxnreg.dec 24`); its thread 0 loads a tile's K and V rows once (TMA, through a
  one-stage `MbarrierRing` that the consumers release after the tile's last products, so the
  next tile's K and V load while this one's dK and dV are stored) and streams, for each of
  the G query heads of the KV head and each 64-row query block that can see the keys, Q_i,
  dO_i and the block's 64 LSE and D values through a second `MbarrierRing`. Warpgroups 1
  and 2 (`setmaxnreg.inc 240`) each own 64 of the keys and keep their dK and dV (64 x D f32
  each) in registers for the whole tile.
- `fa_bwd_convert_<dtype>_d<D>`: dQ = accumulator * scale, to the output type and layout
  (the accumulator's 64 x D blocks are in the main kernel's fragment order, not row-major;
  the rows go out through shared memory in whole 16-byte chunks, `_store_rows`).

With the keys as wgmma's M dimension, every product that FlashAttention writes transposed is
a plain one (w: the consumer's 64 keys, i: the query block):

```text
S^T  = K_w Q_i^T       SS wgmma, m64n64, K = D
dP^T = V_w dO_i^T      SS wgmma, m64n64, K = D
P^T  = exp2(S^T scale log2(e) - LSE_i)      0 where masked (causal, keys >= Sk)
dS^T = P^T (dP^T - D_i)
dV  += P^T dO_i        RS wgmma: P^T packed to 16 bits is the A fragment as it is
dK  += dS^T Q_i        RS wgmma, B = Q_i read MN-major from the same tile
dQ_i += dS K          dS^T to shared memory (stmatrix, 128B swizzle), read as an MN-major
                       A; each warpgroup adds its share to the f32 accumulator
```

Each warpgroup writes its share of dQ_i to shared memory in the fragment's register
order and adds it to the accumulator's block with one bulk `cp.reduce.async.bulk .add.f32`
(FlashAttention-3's design): a first version that issued one `red.global.add.f32` per value
(64 per thread per block) stalled on the load/store unit's queue (ncu: lg_throttle) and ran
at a quarter of cuDNN's speed. At D = 128 each warpgroup computes half of dQ_i's columns over
all 128 keys (both warpgroups' dS^T, after a barrier of the two), so the two shares are
disjoint and the f32 traffic to L2 is halved; at D = 64 each adds a full 64 x 64 share over
its own keys. dS^T alternates between two buffers per warpgroup, so staging block i's never
waits for block i - 1's dQ products to have read theirs. At D = 128 dQ_i's products are
issued before dV's and dK's (`Config.dq_first`): the barrier of the two warpgroups before them
keeps both in step, so while both wait for their products the tensor cores are all that
works; with dQ_i first, its stores and bulk add overlap dV's and dK's products (ncu on an H200
before: the wait for all three groups was the warps' largest single stall; 10-15% faster).

Causal: a CTA starts at the first query block that sees its first key, so blocks
entirely above the diagonal are never loaded. Grouped-query attention: the CTA walks the G
query heads itself and accumulates dK/dV over them in registers, which needs no second
reduction (no f32 dK/dV buffers added to by G CTAs) for the same total work. The epilogue
scales dK, packs dK and dV to the output type and stores them directly, predicated at Sk.

Tails: TMA zero-fills rows past Sq/Sk and the LSE/D padding zeroes P for rows past Sq; keys
past Sk are masked before exp2; nothing is stored past Sq or Sk.

`run()` compares with a float64 numpy reference (`reference_backward`) on odd lengths, causal
and not, G = 1 and 4, head dims 64 and 128; `run(bounded=True)` builds the debug kernels (every
mbarrier wait traps after 2 s with a record naming the barrier).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING

import numpy as np

from ptxdsl import Addr, Kernel, Module, Reg, Symbol, debug, ptx, t
from ptxdsl.fragments import Fragment
from ptxdsl.instructions.wgmma_desc import SmemLayout, descriptor
from ptxdsl.pipeline import MbarrierRing
from ptxdsl.sample_runner import Report, sample_main, sibling_sample, sync
from ptxdsl.types import ScalarType

if TYPE_CHECKING:   # the runtime is imported when a GPU run needs it
    # mypy reads the samples as the top-level modules they are as scripts
    import flash_attention as fa

    from ptxdsl.runtime import DeviceBuffer, LoadedModule
else:               # the forward sample, whose host helpers (maps, SM count) this one shares
    fa = sibling_sample(__file__, "flash_attention")

BlockBody = Callable[[Reg, Reg], None]        # the work on query block (head hq, row q0)
BlockLoop = Callable[[Reg, Reg, BlockBody], None]   # runs it on each block of tile (j, h)
TileBody = Callable[[Reg, Reg, Reg], None]    # the work on tile (key block j, KV head h, b)
TileLoop = Callable[[TileBody], None]         # runs it on each tile of this CTA

LOG2E = 1.4426950408889634
BR, BC = 64, 128                 # query rows per block; keys per CTA (64 per consumer)
THREADS = 384
PRODUCER_REGS, CONSUMER_REGS = 24, 240
STAT_BYTES = 4 * BR              # one block's LSE (or D) values, f32
DS_BYTES = BR * 64 * 2           # a consumer's dS^T tile: 64 keys x 64 queries, 16-bit
DTYPES: dict[str, ScalarType] = {"bf16": t.bf16, "f16": t.f16}
NP_TYPES = {"bf16": np.uint16, "f16": np.float16}
HEAD_DIMS = (64, 128)
PRE_ROWS, CONVERT_THREADS = 8, 128   # pre: a warp per row, 8 per CTA; convert: a warpgroup


class Config:
    """The build-time constants of the backward kernel for one (dtype, head dim): the shared
    memory plan (every tile 1024-byte aligned for the 128B swizzle):

        K_w (2 tiles) | V_w (2 tiles) | dS^T (2 x 2 x 8 KiB) | dQ_i (2 x 64 x D/2 f32, or
        2 x 64 x D at D = 64) | stages x (Q_i, dO_i) | stages x (LSE, D) | bars
    """

    def __init__(self, dtype: str, d: int):
        if dtype not in DTYPES or d not in HEAD_DIMS:
            raise ValueError(f"flash_attention_bwd: dtype in {sorted(DTYPES)} and head dim in "
                             f"{HEAD_DIMS}, got {dtype!r}, {d!r}")
        self.dtype, self.d, self.wtype = dtype, d, DTYPES[dtype]
        w = self.wtype
        self.tile = SmemLayout(w, 64, d, "K", "128B")       # 64 rows x D (Q, dO, K_w, V_w)
        self.tile_mn = SmemLayout(w, d, 64, "MN", "128B")   # the same bytes as B (N = D)
        self.ds = SmemLayout(w, 64, 64, "MN", "128B")       # dS^T [key][query] as A of dQ
        self.k_cols = SmemLayout(w, 64, 64, "MN", "128B")   # 64 D-columns of K_w as B of dQ
        self.tile_bytes = self.tile.nbytes
        self.stages = 3 if d == 128 else 4
        self.k_off, self.v_off = 0, 2 * self.tile_bytes
        self.ds_off = 4 * self.tile_bytes
        # D >= 128: each warpgroup computes D/2 columns of dQ_i over all 128 keys (the other
        # warpgroup's dS^T too), so the two add disjoint halves: half the f32 traffic of each
        # adding a full 64 x D partial over its own 64 keys, which D = 64 still does (a 32-
        # column B operand would start mid-way through a 128-byte swizzle row).
        self.dq_split = d >= 128
        self.dq_cols = d // 2 if self.dq_split else d
        assert self.dq_cols == 64          # one m64n64 dQ_i product group (32 registers)
        # dQ_i's products issued before dV's and dK's, so that its stores and bulk add run
        # while the tensor cores work on dV and dK: at D = 128, where the barrier of both
        # warpgroups before dQ_i keeps them in step, 10-15% faster at every length, causal
        # and not (H200); at D = 64, each warpgroup on its own, 3-8% slower.
        self.dq_first = self.dq_split
        self.dq_bytes = BR * self.dq_cols * 4               # a warpgroup's f32 dQ_i share
        self.dq_off = self.ds_off + 4 * DS_BYTES           # dS^T: two per warpgroup
        self.stage_off = self.dq_off + 2 * self.dq_bytes
        self.stage_bytes = 2 * self.tile_bytes              # Q_i, dO_i
        # each stage's LSE and D (256 B each) apart from its tiles, whose 1024-byte alignment
        # would otherwise round them up to 1 KiB: what makes a third stage fit at D = 128
        self.stat_off = self.stage_off + self.stages * self.stage_bytes
        self.ring_off = self.stat_off + self.stages * 2 * STAT_BYTES
        self.kv_ring_off = self.ring_off + 16 * self.stages
        self.smem_bytes = self.kv_ring_off + 16
        self.name = f"fa_bwd_{dtype}_d{d}"
        self.pre_name = f"fa_bwd_pre_{dtype}_d{d}"
        self.convert_name = f"fa_bwd_convert_{dtype}_d{d}"


CONFIGS = {(dt, d): Config(dt, d) for dt in DTYPES for d in HEAD_DIMS}


def _ex2(k: Kernel, x: Reg) -> Reg:
    return k.ex2(x, mode="approx", ftz=True)


def _wide(k: Kernel, a: Reg, b: Reg | int) -> Reg:
    """a * b as a u64 (element offsets of tensors past 2^32 elements stay exact)."""
    return k.mul(a, b, type=t.u32, mode="wide")


def _tensor_base(k: Kernel, ptr: Reg, parts: Iterable[tuple[Reg, Reg]], ebytes: int) -> Reg:
    """ptr + ebytes * sum(index * stride), in 64 bits."""
    off = None
    for idx, stride in parts:
        term = _wide(k, idx, stride)
        off = term if off is None else k.add(off, term, type=t.u64)
    assert off is not None
    return k.add(ptr, k.mul(off, ebytes, type=t.u64), type=t.u64)


# -- 1. D = rowsum(dO * O), LSE in log2 units, dQ accumulator zeroed ------------------------------
def build_pre(cfg: Config) -> Kernel:
    d = cfg.d
    k = Kernel(cfg.pre_name, reqntid=32 * PRE_ROWS)
    o_p, do_p, lse_p = k.param_ptr("o"), k.param_ptr("do"), k.param_ptr("lse")
    lse2_p, dpsum_p, acc_p = k.param_ptr("lse2"), k.param_ptr("dpsum"), k.param_ptr("dq_acc")
    sq, sq_pad, hq_n = (k.ld_param(k.param(t.u32, n)) for n in ("sq", "sq_pad", "hq"))
    strides = {n: k.ld_param(k.param(t.u32, n)) for n in
               ("o_sb", "o_ss", "o_sh", "do_sb", "do_ss", "do_sh")}
    lane = k.and_(k.tid.x, 31)
    row = k.mad(k.ctaid.x, PRE_ROWS, k.shr(k.tid.x, 5))
    hq, b = k.ctaid.y, k.ctaid.z
    bh = k.mad(b, hq_n, hq)
    per = d // 32                                   # values per lane
    stat = k.mad(bh, sq_pad, row)                   # index into lse2 / dpsum
    acc = _tensor_base(k, k.ld_param(acc_p), [(stat, k.mov(d, type=t.u32))], 4)
    zero = k.mov(0.0, type=t.f32)
    k.st(Addr(k.add(acc, _wide(k, lane, 4 * per), type=t.u64)), [zero] * per,
         type=t.f32, space="global")
    lse2 = k.add(k.ld_param(lse2_p), _wide(k, stat, 4), type=t.u64)
    dpsum = k.add(k.ld_param(dpsum_p), _wide(k, stat, 4), type=t.u64)
    col = k.mul(lane, per)
    with k.if_(row < sq):
        total = k.mov(0.0, type=t.f32)
        vals = []
        for name, p in (("o", o_p), ("do", do_p)):
            base = _tensor_base(k, k.ld_param(p), [(b, strides[f"{name}_sb"]),
                                                   (row, strides[f"{name}_ss"]),
                                                   (hq, strides[f"{name}_sh"])], 2)
            v = k.ld(Addr(k.add(base, _wide(k, col, 2), type=t.u64)), type=t.b16,
                     space="global", vec=per)
            vals.append(v if isinstance(v, tuple) else (v,))
        for x, y in zip(*vals, strict=True):
            k.mad(k.cvt(x, t.f32, atype=cfg.wtype), k.cvt(y, t.f32, atype=cfg.wtype), total,
                  type=t.f32, dst=total)
        for lanes in (16, 8, 4, 2, 1):
            k.add(total, k.shfl_sync("bfly", total, lanes, 31), type=t.f32, dst=total)
        with k.if_(lane == 0):
            lse = k.ld(Addr(k.add(k.ld_param(lse_p), _wide(k, k.mad(bh, sq, row), 4),
                                  type=t.u64)), type=t.f32, space="global")
            k.st(Addr(lse2), k.mul(lse, LOG2E, type=t.f32), space="global")
            k.st(Addr(dpsum), total, space="global")
    with k.else_():
        with k.if_(lane == 0):                      # a padding row: P = exp2(s - inf) = 0
            k.st(Addr(lse2), k.mov(math.inf, type=t.f32), space="global")
            k.st(Addr(dpsum), k.mov(0.0, type=t.f32), space="global")
    k.ret()
    return k


# -- 2. the main kernel --------------------------------------------------------------------------
def build_bwd(cfg: Config, bounded: bool = False) -> Kernel:
    """`bounded`: every mbarrier wait traps after 2 s with an error record saying which
    barrier and parity it waited on (`ptxdsl.debug`)."""
    k = Kernel(cfg.name, reqntid=THREADS, minnctapersm=1)
    if bounded:
        debug.bounded_waits(k, timeout_ns=2_000_000_000)
    maps = {n: k.param_tensormap(f"map_{n}") for n in ("q", "k", "v", "do")}
    ptrs = {n: k.param_ptr(n) for n in ("dk", "dv", "lse2", "dpsum", "dq_acc")}
    u32 = {n: k.ld_param(k.param(t.u32, n)) for n in (
        "sq", "sk", "sq_pad", "hq", "group", "causal", "hkv", "batch",
        "dk_sb", "dk_ss", "dk_sh", "dv_sb", "dv_ss", "dv_sh")}
    f32 = {n: k.param(t.f32, n) for n in ("scale_log2", "scale")}
    smem = k.extern_shared("smem", align=1024)
    ring = MbarrierRing(k, cfg.stages, empty_count=2, storage=Addr(smem, cfg.ring_off),
                        name="qring")
    # K and V of a tile: a ring of one stage, released by both consumers after the tile's
    # last products, so the next tile's load overlaps this one's dK/dV epilogue
    kv = MbarrierRing(k, 1, empty_count=2, storage=Addr(smem, cfg.kv_ring_off), name="kvring")
    kv.init(sync=False)
    ring.init()                            # its fence and bar.sync publish kv's init too
    wg = k.shr(k.tid.x, 7)
    n_q = k.shr(u32["sq_pad"], 6)
    nj = k.shr(k.add(u32["sk"], BC - 1), BC.bit_length() - 1)
    ntiles = k.mul(k.mul(nj, u32["hkv"]), u32["batch"])
    waves = k.div(k.add(ntiles, k.sub(k.nctaid.x, 1)), k.nctaid.x)
    mirror = k.sub(k.sub(k.nctaid.x, 1), k.ctaid.x)

    def tiles(body: TileBody) -> None:
        """body(j, h, b) for each tile of this CTA, a persistent one (one per SM): CTA i
        takes tile i of even waves and nctaid - 1 - i of odd ones (a snake), so that with
        causal masking, where key block j's work falls with j, a CTA's tiles pair long ones
        with short ones. Key blocks are the fastest index: the CTAs at work together share
        their heads' Q and dO in L2."""
        with k.for_range(0, waves) as wv:
            slot = k.selp(mirror, k.ctaid.x, k.and_(wv, 1) == 1, type=t.u32)
            index = k.mad(wv, k.nctaid.x, slot)
            with k.if_(index < ntiles):
                rest = k.div(index, nj)
                body(k.rem(index, nj), k.rem(rest, u32["hkv"]), k.div(rest, u32["hkv"]))

    def blocks(j: Reg, h: Reg, body: BlockBody) -> None:
        """body(hq, q0) for each query head of KV head h and each query block that sees key
        block j (causal: from the first block that sees key j * BC; BR divides BC)."""
        i_start = k.selp(k.mul(j, BC // BR), 0, u32["causal"] != 0, type=t.u32)
        with k.for_range(0, u32["group"]) as g:
            hq = k.mad(h, u32["group"], g)
            with k.for_range(i_start, n_q) as i:
                body(hq, k.shl(i, 6))

    with k.if_(wg == 0):
        ptx.setmaxnreg_dec(k, PRODUCER_REGS)
        with k.if_(k.tid.x == 0):
            _producer(k, cfg, ring, kv, smem, maps, ptrs, u32, tiles, blocks)
    with k.else_():
        ptx.setmaxnreg_inc(k, CONSUMER_REGS)
        # the consumer's index, 0 or 1 (warpgroups 2 and 1): `& 1` rather than `- 1` bounds
        # it for the checker, which then tells the buffers indexed by it apart
        _consumer(k, cfg, ring, kv, smem, ptrs, u32, f32, k.and_(wg, 1), tiles, blocks)
    k.ret()
    return k


def _load_tile(k: Kernel, cfg: Config, dst: Reg, tmap: Reg, row: Reg, head: Reg, b: Reg,
               bar: Reg | Addr) -> None:
    """A 64 x D tile at (row, head, batch): one 64 x 64 box per 64 columns of D, each box an
    atom column of the K-major layout (`SmemLayout.tma_copies`)."""
    for off, col in cfg.tile.tma_copies():
        ptx.cp_async_bulk_tensor(k, "shared::cluster", "global", k.add(dst, off), tmap,
                                 (col, row, head, b), bar)


def _producer(k: Kernel, cfg: Config, ring: MbarrierRing, kv: MbarrierRing, smem: Symbol,
              maps: Mapping[str, Symbol], ptrs: Mapping[str, Symbol], u32: Mapping[str, Reg],
              tiles: TileLoop, blocks: BlockLoop) -> None:
    tm = {n: k.tensormap_addr(m) for n, m in maps.items()}
    base = k.mov(smem)
    lse2, dpsum = k.ld_param(ptrs["lse2"]), k.ld_param(ptrs["dpsum"])
    p, kvp = ring.producer(), kv.producer()

    def tile(j: Reg, h: Reg, b: Reg) -> None:
        kvp.wait_empty()
        kvp.arrive_expect_tx(4 * cfg.tile_bytes)
        key0 = k.mul(j, BC)
        for w in range(2):                 # each consumer's 64 keys: a tile of their own
            row = k.add(key0, 64 * w)
            for name, off in (("k", cfg.k_off), ("v", cfg.v_off)):
                _load_tile(k, cfg, k.add(base, off + w * cfg.tile_bytes), tm[name], row, h, b,
                           kvp.full_barrier())
        kvp.advance()

        def block(hq: Reg, q0: Reg) -> None:
            p.wait_empty()
            p.arrive_expect_tx(2 * cfg.tile_bytes + 2 * STAT_BYTES)
            slot, full = p.slot(Addr(smem, cfg.stage_off), cfg.stage_bytes), p.full_barrier()
            stats = p.slot(Addr(smem, cfg.stat_off), 2 * STAT_BYTES)
            _load_tile(k, cfg, slot, tm["q"], q0, hq, b, full)
            _load_tile(k, cfg, k.add(slot, cfg.tile_bytes), tm["do"], q0, hq, b, full)
            stat = _wide(k, k.mad(k.mad(b, u32["hq"], hq), u32["sq_pad"], q0), 4)
            for src, off in ((lse2, 0), (dpsum, STAT_BYTES)):
                ptx.cp_async_bulk(k, "shared::cluster", "global",
                                  k.add(stats, off),
                                  k.add(src, stat, type=t.u64), STAT_BYTES, full)
            p.advance()

        blocks(j, h, block)

    tiles(tile)


def _stage_swizzled(k: Kernel, packed: Fragment, buf: Reg) -> None:
    """stmatrix a warpgroup's packed 64 x 64 16-bit tile into `buf` as 64 rows of 128 bytes
    in the 128B swizzle (16-byte chunk c of row r at c ^ (r % 8)): what a 128B-swizzled
    wgmma operand of 64-element rows reads."""
    tid = k.and_(k.tid.x, 127)
    lane = k.and_(tid, 31)
    mat = k.shr(lane, 3)                  # lane L gives the address of row L % 8 of matrix L / 8
    row = k.add(k.add(k.shl(k.shr(tid, 5), 4), k.shl(k.and_(mat, 1), 3)), k.and_(lane, 7))
    y = k.xor(k.and_(lane, 7), k.shr(mat, 1))
    row_base = k.add(buf, k.shl(row, 7))
    for q in range(4):                    # columns 16q .. 16q + 15
        k.stmatrix(k.add(row_base, k.shl(k.xor(y, 2 * q), 4)), packed.regs[4 * q:4 * q + 4])


def _store_rows(k: Kernel, packed: Fragment, stage: Reg, sync: Callable[[], None],
                out: Reg, row_stride: Reg, rows: Reg) -> None:
    """A warpgroup's packed 64 x N tile to global rows `out` (row stride `row_stride`
    elements, rows from `rows` on not stored) through shared memory at `stage` (64 x (N + 8)
    16-bit values): stmatrix there, `sync()` (a barrier of the warpgroup), then each thread
    copies 16-byte chunks, a warp's 32 chunks whole rows. The fragment's own stores write its
    4-byte pairs 8 rows per warp instruction, half of each 32-byte sector, and fill the
    load/store unit's queue (ncu: lg_throttle); rows padded by 16 bytes put the 8 rows of an
    stmatrix on distinct banks."""
    n = packed.n
    ld = n + 8
    packed.store_matrix(stage, ld)
    sync()
    per_row = n // 8                       # 16-byte chunks in a row
    tid = k.and_(k.tid.x, 127)
    for i in range(64 * per_row // 128):
        chunk = k.add(tid, 128 * i)
        row, col = k.shr(chunk, per_row.bit_length() - 1), k.and_(chunk, per_row - 1)
        vals = k.ld(Addr(k.add(stage, k.shl(k.mad(row, ld // 8, col), 4))), type=t.b32,
                    space="shared", vec=4)
        with k.if_(k.setp("lt", row, rows, type=t.s32)):
            dst = k.add(out, k.add(_wide(k, row, k.shl(row_stride, 1)), _wide(k, col, 16),
                                   type=t.u64), type=t.u64)
            k.st(Addr(dst), vals, type=t.b32, space="global")


def _consumer(k: Kernel, cfg: Config, ring: MbarrierRing, kv: MbarrierRing, smem: Symbol,
              ptrs: Mapping[str, Symbol], u32: Mapping[str, Reg], f32: Mapping[str, Symbol],
              cw: Reg, tiles: TileLoop, blocks: BlockLoop) -> None:
    d, w = cfg.d, cfg.wtype
    base = k.mov(smem)
    kw = k.add(base, k.mad(cw, cfg.tile_bytes, cfg.k_off))
    vw = k.add(base, k.mad(cw, cfg.tile_bytes, cfg.v_off))
    # dS^T alternates between two buffers per warpgroup (`flip`: which one), so staging
    # block i's never waits for the dQ wgmmas of block i - 1 to have read theirs.
    flip = k.mov(0, type=t.u32)
    flip_off = k.mul(flip, DS_BYTES)
    ds_of = [k.add(base, cfg.ds_off + 2 * DS_BYTES * x) for x in range(2)]
    ds_mine = k.add(base, k.mad(cw, 2 * DS_BYTES, cfg.ds_off))
    # the dQ_i products: (dS^T buffer, K tile) pairs over the keys, and where in K's columns
    if cfg.dq_split:
        sources = [(ds_of[x], k.add(base, cfg.k_off + x * cfg.tile_bytes)) for x in range(2)]
        k_col0 = k.mul(cw, cfg.dq_cols // 64 * cfg.k_cols.nbytes)
        dq_share = _wide(k, cw, cfg.dq_bytes)
    else:
        sources, k_col0, dq_share = [(ds_mine, kw)], None, None
    dq_buf = k.add(base, k.mad(cw, cfg.dq_bytes, cfg.dq_off))
    # Where this thread's 4-value chunks of a dQ_i part go: chunk v at (128 v + tid) * 16, so
    # a warp's 16-byte stores are contiguous (no bank conflict); the accumulator keeps this
    # order, which the convert kernel reads back into the same fragment registers.
    my_chunks = k.add(dq_buf, k.shl(k.and_(k.tid.x, 127), 4))
    named = k.add(cw, 1)                               # named barriers: mine, both
    dq_ready = k.add(cw, 3)                            # consumers' (5), my dQ stores'
    warp0 = k.and_(k.tid.x, 127) < 32
    leader = k.and_(k.tid.x, 127) == 0
    scale_log2, scale = k.ld_param(f32["scale_log2"]), k.ld_param(f32["scale"])
    dq_acc = k.ld_param(ptrs["dq_acc"])
    dq_size = k.mov(cfg.dq_bytes, type=t.u32)
    dk = k.fragment(t.f32, shape=(64, d), zero=False)
    dv = k.fragment(t.f32, shape=(64, d), zero=False)
    s = k.fragment(t.f32, shape=(64, BR), zero=False)
    dp = k.fragment(t.f32, shape=(64, BR), zero=False)
    dq = k.fragment(t.f32, shape=(64, 64), zero=False)
    row0, col0 = s.origin()
    causal = u32["causal"] != 0
    c, kvc = ring.consumer(), kv.consumer()

    def tile(j: Reg, h: Reg, b: Reg) -> None:
        key_base = k.mad(j, BC, k.shl(cw, 6))
        # my two key rows, masked when past Sk
        past_sk = [k.add(key_base, k.add(row0, 8 * half)) >= u32["sk"] for half in range(2)]
        keys = [k.add(key_base, k.add(row0, 8 * half)) for half in range(2)]
        dk.zero()
        dv.zero()
        kvc.wait_full()
        blocks(j, h, lambda hq, q0: block(hq, q0, b, keys, past_sk))
        with k.if_(leader):                # both consumers' products of the tile are done
            kvc.release()
        kvc.advance()
        _epilogue(k, cfg, ptrs, u32, dk, dv, scale, h, b, key_base)

    def block(hq: Reg, q0: Reg, b: Reg, keys: list[Reg], past_sk: list[Reg]) -> None:
        c.wait_full()
        slot = c.slot(Addr(smem, cfg.stage_off), cfg.stage_bytes)
        q_tile, do_tile = slot, k.add(slot, cfg.tile_bytes)
        dk_ = descriptor(k, cfg.tile, kw)
        dv_ = descriptor(k, cfg.tile, vw)
        dq_ = descriptor(k, cfg.tile, q_tile)
        ddo = descriptor(k, cfg.tile, do_tile)
        ptx.wgmma_fence(k)
        for acc, a, bd in ((s, dk_, dq_), (dp, dv_, ddo)):   # two groups: P while dP^T runs
            for n, kk in enumerate(range(0, d, 16)):
                ptx.wgmma_mma_async(k, acc, a.k_step(k, kk), bd.k_step(k, kk),
                                    0 if n == 0 else 1, atype=w)
            ptx.wgmma_commit_group(k)
        # The mask per key row: value (row, c) is kept iff c >= limit (c: its column in the
        # block minus col0). Causal: key <= query; keys past Sk never.
        limits = []
        for half in range(2):
            diff = k.sub(k.sub(keys[half], q0, type=t.s32), col0, type=t.s32)
            lim = k.selp(diff, -1, causal, type=t.s32)
            limits.append(k.selp(64, lim, past_sk[half], type=t.s32))
        stats = k.add(c.slot(Addr(smem, cfg.stat_off), 2 * STAT_BYTES), k.shl(col0, 2))
        ptx.wgmma_wait_group(k, 1)                      # S^T
        for jj in range(BR // 8):                      # the thread's 2 columns of each 8
            lse = k.ld(Addr(stats, 32 * jj), type=t.f32, space="shared", vec=2)
            for i in range(4 * jj, 4 * jj + 4):
                half, e = (i // 2) % 2, i % 2
                keep = k.setp("le", limits[half], 8 * jj + e, type=t.s32)
                x = k.sub(k.mul(s[i], scale_log2, type=t.f32), lse[e], type=t.f32)
                k.mov(_ex2(k, k.selp(x, -math.inf, keep, type=t.f32)), dst=s[i])
        ptx.wgmma_wait_group(k, 0)                      # dP^T
        for jj in range(BR // 8):
            dps = k.ld(Addr(stats, STAT_BYTES + 32 * jj), type=t.f32, space="shared", vec=2)
            for i in range(4 * jj, 4 * jj + 4):
                k.mul(s[i], k.sub(dp[i], dps[i % 2], type=t.f32), type=t.f32, dst=dp[i])
        p_packed, ds_packed = s.to_packed(w), dp.to_packed(w)
        # dS^T to shared memory first: the RS wgmmas below own ds_packed until retired.
        with k.if_(leader):                # the previous block's bulk add has read dq_buf
            ptx.cp_async_bulk_wait_group_read(k, 0)
        _stage_swizzled(k, ds_packed, k.add(ds_mine, flip_off))
        ptx.fence_proxy_async(k, "shared::cta")         # stmatrix writes -> wgmma's reads
        if cfg.dq_split:                   # dQ_i reads both warpgroups' dS^T
            k.bar_sync(5, 256)
        else:
            k.bar_sync(named, 128)
        dq_block = k.add(dq_acc, _wide(k, k.mad(k.mad(b, u32["hq"], hq), u32["sq_pad"], q0),
                                       4 * d), type=t.u64)
        if dq_share is not None:
            dq_block = k.add(dq_block, dq_share, type=t.u64)

        def dkv_products() -> None:
            for acc, a_frag, tile in ((dv, p_packed, do_tile), (dk, ds_packed, q_tile)):
                bd = descriptor(k, cfg.tile_mn, tile)
                for step in range(BR // 16):
                    ptx.wgmma_mma_async(k, acc, a_frag.a_operand(step),
                                        bd.k_step(k, 16 * step), atype=w)
            ptx.wgmma_commit_group(k)

        def dq_products() -> None:       # 64 columns of dQ_i (32 registers)
            for x, (ds_x, k_x) in enumerate(sources):
                da = descriptor(k, cfg.ds, k.add(ds_x, flip_off))
                cols = k_x if k_col0 is None else k.add(k_x, k_col0)
                db = descriptor(k, cfg.k_cols, cols)
                for step in range(4):
                    ptx.wgmma_mma_async(k, dq, da.k_step(k, 16 * step),
                                        db.k_step(k, 16 * step),
                                        0 if x == step == 0 else 1, atype=w)
            ptx.wgmma_commit_group(k)

        def stage_dq() -> None:
            for v in range(len(dq) // 4):
                k.st(Addr(my_chunks, 16 * 128 * v), dq[4 * v:4 * v + 4], type=t.f32,
                     space="shared")
            ptx.fence_proxy_async(k, "shared::cta")     # st.shared -> the bulk copy's reads

        ptx.wgmma_fence(k)
        if cfg.dq_first:
            # dQ_i's products first, then dV's and dK's: dQ_i's stores to shared memory and
            # its bulk add run while the tensor cores still work on dV and dK.
            dq_products()
            dkv_products()
            ptx.wgmma_wait_group(k, 1)
            stage_dq()
        else:
            dkv_products()
            dq_products()
            ptx.wgmma_wait_group(k, 0)
            with k.if_(leader):            # dV, dK and S^T / dP^T read the stage: all done
                c.release()
            stage_dq()
        # Both warpgroups add their partial of dQ_i (their 64 keys' share) to the same
        # accumulator block: one bulk reduction each, which the LSU never sees. Only warp 0
        # (the leader's) waits for the others' stores; they go on to the next block.
        with k.if_(warp0):
            k.bar_sync(dq_ready, 128)
            with k.if_(leader):
                ptx.cp_reduce_async_bulk(k, "global", "shared::cta", "add", dq_block, dq_buf,
                                         dq_size, type=t.f32)
                ptx.cp_async_bulk_commit_group(k)
        with k.else_():
            k.bar_arrive(dq_ready, 128)
        if cfg.dq_first:
            ptx.wgmma_wait_group(k, 0)
            with k.if_(leader):            # dV, dK and S^T / dP^T read the stage: all done
                c.release()
        k.xor(flip, 1, dst=flip)
        k.mul(flip, DS_BYTES, dst=flip_off)
        c.advance()

    tiles(tile)
    with k.if_(leader):                    # the last reduction done before the CTA exits
        ptx.cp_async_bulk_wait_group(k, 0)


def _epilogue(k: Kernel, cfg: Config, ptrs: Mapping[str, Symbol], u32: Mapping[str, Reg],
              dk: Fragment, dv: Fragment, scale: Reg, h: Reg, b: Reg, key_base: Reg) -> None:
    """dK (scaled) and dV of a consumer's 64 keys, packed and stored directly, predicated at
    Sk. (Staging them through shared memory as the convert kernel does, `_store_rows`,
    measured within the run-to-run spread, -2% to +2%: it runs once per tile.)"""
    for r in dk:
        k.mul(r, scale, type=t.f32, dst=r)
    for name, acc in (("dk", dk), ("dv", dv)):
        out = _tensor_base(k, k.ld_param(ptrs[name]), [(b, u32[f"{name}_sb"]),
                                                       (h, u32[f"{name}_sh"]),
                                                       (key_base, u32[f"{name}_ss"])], 2)
        acc.to_packed(cfg.wtype).store(out, u32[f"{name}_ss"],
                                       rows=k.sub(u32["sk"], key_base, type=t.s32))


# -- 3. dQ = accumulator * scale in the output type ------------------------------------------------
def build_convert(cfg: Config) -> Kernel:
    """One warpgroup per 64-row query block: each thread loads back the chunks of the m64nD
    fragment it would hold (the main kernel's order: chunk v of thread t at (128 v + t) * 16
    bytes), scales them and stores them as dQ rows, predicated at Sq."""
    d = cfg.d
    k = Kernel(cfg.convert_name, reqntid=CONVERT_THREADS)
    acc_p, dq_p = k.param_ptr("dq_acc"), k.param_ptr("dq")
    sq, sq_pad, hq_n = (k.ld_param(k.param(t.u32, n)) for n in ("sq", "sq_pad", "hq"))
    sb, ss, sh = (k.ld_param(k.param(t.u32, n)) for n in ("dq_sb", "dq_ss", "dq_sh"))
    scale = k.ld_param(k.param(t.f32, "scale"))
    q0, hq, b = k.shl(k.ctaid.x, 6), k.ctaid.y, k.ctaid.z
    block = k.mad(k.mad(b, hq_n, hq), sq_pad, q0)
    src = k.add(k.ld_param(acc_p), _wide(k, k.mad(block, d, k.shl(k.tid.x, 2)), 4),
                type=t.u64)
    acc = k.fragment(t.f32, shape=(BR, d), zero=False)
    for v in range(len(acc) // 4):
        k.ld(Addr(src, 16 * 128 * v), type=t.f32, space="global", vec=4,
             dst=tuple(acc[4 * v:4 * v + 4]))
    for r in acc:
        k.mul(r, scale, type=t.f32, dst=r)
    tile = k.shared_array(t.b8, BR * (d + 8) * 2, align=16, name="dq_rows")
    out = _tensor_base(k, k.ld_param(dq_p), [(b, sb), (q0, ss), (hq, sh)], 2)
    _store_rows(k, acc.to_packed(cfg.wtype), k.mov(tile), lambda: k.bar_sync(0), out, ss,
                k.sub(sq, q0, type=t.s32))
    k.ret()
    return k


# What the host encodes (`fa.tensor_map` in `backward`), for the checker's expect-tx count at
# emit: every map has 64 x 64 boxes of 16-bit elements in the 128B swizzle.
MAP_CONTEXT = {"maps": {f"map_{n}": {"box_bytes": 64 * 64 * 2, "swizzle": "128B"}
                        for n in ("q", "k", "v", "do")}}


def build_module(bounded: bool = False,
                 configs: Iterable[Config] = tuple(CONFIGS.values())) -> Module:
    """The three kernels of each config; `bounded`: the debug build of the main kernels."""
    kernels = []
    for cfg in configs:
        kernels += [build_pre(cfg), build_bwd(cfg, bounded), build_convert(cfg)]
    make = debug.module if bounded else Module
    return make(kernels, name="flash_attention_bwd", target="sm_90a", check=MAP_CONTEXT)


# -- host side ---------------------------------------------------------------------------------
Strides = tuple[int, int, int]          # (batch, sequence, head) strides in elements
TENSORS = ("q", "k", "v", "o", "do", "dq", "dk", "dv")
MAX_U32 = (1 << 32) - 1


def padded(sq: int) -> int:
    """Sq rounded up to whole query blocks: the rows of the LSE, D and dQ-accumulator
    workspaces."""
    return -(-sq // BR) * BR


def contiguous(s: int, h: int, d: int) -> Strides:
    """The (batch, sequence, head) strides of a contiguous [B, S, H, D] tensor."""
    return s * h * d, h * d, d


def _f32_buffer(shape: tuple[int, ...]) -> object:
    from ptxdsl import runtime as rt
    return rt.DeviceBuffer.empty(shape, np.float32)


class Workspace:
    """The f32 buffers between the three kernels: LSE in log2 units and D, [B, Hq, Sq_pad],
    and the dQ accumulator [B, Hq, Sq_pad, D] (each 64-row block in the main kernel's fragment
    order). Reusable across calls of the same shape.
    `empty(shape)` makes each buffer (anything a launch takes as a pointer): by default a
    `DeviceBuffer`; the PyTorch op (`_flash_attention_op.py`) passes `torch.empty`, whose
    memory is freed in stream order after the kernels instead of by a synchronising free."""

    def __init__(self, B: int, Hq: int, Sq: int, D: int,
                 empty: Callable[[tuple[int, ...]], object] = _f32_buffer):
        self.shape = (B, Hq, padded(Sq), D)
        self.lse2 = empty(self.shape[:3])
        self.dpsum = empty(self.shape[:3])
        self.dq_acc = empty(self.shape)


def check_problem(dtype: str, B: int, Sq: int, Sk: int, Hq: int, Hkv: int, D: int,
                  strides: Mapping[str, Strides]) -> None:
    """What the kernels take: ValueError naming the rule otherwise."""
    if (dtype, D) not in CONFIGS:
        raise ValueError(f"flash_attention_bwd: dtype in {sorted(DTYPES)} and D in "
                         f"{HEAD_DIMS}, got {dtype!r}, D={D}")
    if min(B, Sq, Sk, Hq, Hkv) < 1 or Hq % Hkv or max(Hq, B) > 65535:
        raise ValueError(f"flash_attention_bwd: B, Sq, Sk, Hq, Hkv >= 1, Hkv dividing Hq, "
                         f"B and Hq at most 65535; got B={B} Sq={Sq} Sk={Sk} Hq={Hq} "
                         f"Hkv={Hkv}")
    if B * Hq * padded(Sq) * D > MAX_U32:
        raise ValueError("flash_attention_bwd: the dQ accumulator's B * Hq * Sq_pad * D "
                         "elements must stay below 2^32 (32-bit indices)")
    for name in TENSORS:
        st = strides[name]
        if len(st) != 3 or any(s % 8 or not 0 < s <= MAX_U32 for s in st) or st[1] > 1 << 24:
            raise ValueError(f"flash_attention_bwd: {name}'s (batch, sequence, head) strides "
                             f"must be positive multiples of 8 elements (TMA's 16 bytes) below "
                             f"2^32, the sequence stride at most 2^24; got {st}")


def backward(module: LoadedModule, q: object, k: object, v: object, o: object, do: object,
             lse: object, dq: object, dk: object, dv: object, *, B: int, Sq: int, Sk: int,
             Hq: int, Hkv: int, D: int, causal: bool, scale: float, dtype: str = "bf16",
             strides: Mapping[str, Strides] | None = None, stream: object = None,
             workspace: Workspace | None = None) -> Workspace:
    """dQ, dK, dV into `dq`, `dk`, `dv` (device pointers, ints or buffers) from Q, K, V, O, dO
    and the forward's LSE, with the three kernels of the loaded `module`. `strides`: per
    tensor name (q, k, v, o, do, dq, dk, dv) its (batch, sequence, head) strides in elements;
    missing ones are contiguous. Returns the workspace (pass it back to reuse it)."""
    st = {n: contiguous(Sq if n in ("q", "o", "do", "dq") else Sk,
                        Hq if n in ("q", "o", "do", "dq") else Hkv, D) for n in TENSORS}
    st.update(strides or {})
    check_problem(dtype, B, Sq, Sk, Hq, Hkv, D, st)
    cfg = CONFIGS[dtype, D]
    ws = workspace or Workspace(B, Hq, Sq, D)
    if ws.shape != (B, Hq, padded(Sq), D):
        raise ValueError(f"flash_attention_bwd: the workspace is for {ws.shape}, this call "
                         f"needs {(B, Hq, padded(Sq), D)}")
    sq_pad = padded(Sq)
    module[cfg.pre_name].launch(
        (sq_pad // PRE_ROWS, Hq, B), 32 * PRE_ROWS,
        (o, do, lse, ws.lse2, ws.dpsum, ws.dq_acc, Sq, sq_pad, Hq, *st["o"], *st["do"]),
        stream=stream)
    maps = [fa.tensor_map(dtype, ptr, (B, S, H, D), st[n], 64)
            for n, ptr, S, H in (("q", q, Sq, Hq), ("k", k, Sk, Hkv), ("v", v, Sk, Hkv),
                                 ("do", do, Sq, Hq))]
    ntiles = -(-Sk // BC) * Hkv * B
    module[cfg.name].launch(
        (min(ntiles, fa.sm_count()), 1, 1), THREADS,
        (*maps, dk, dv, ws.lse2, ws.dpsum, ws.dq_acc, Sq, Sk, sq_pad, Hq, Hq // Hkv,
         int(bool(causal)), Hkv, B, *st["dk"], *st["dv"], scale * LOG2E, scale),
        shared_mem=cfg.smem_bytes, stream=stream)
    module[cfg.convert_name].launch(
        (sq_pad // BR, Hq, B), CONVERT_THREADS,
        (ws.dq_acc, dq, Sq, sq_pad, Hq, *st["dq"], scale), stream=stream)
    return ws


# -- the numpy reference -------------------------------------------------------------------------
def _scores(q: np.ndarray, k: np.ndarray, causal: bool, scale: float) -> np.ndarray:
    """scale Q K^T per query head, [B, Hq, Sq, Sk], -inf where causal masking hides a key."""
    g = q.shape[2] // k.shape[2]
    s: np.ndarray = np.einsum("bqhd,bkhd->bhqk", q, np.repeat(k, g, axis=2),
                              optimize=True) * scale
    if causal:
        sq, sk = q.shape[1], k.shape[1]
        s[..., np.arange(sk)[None, :] > np.arange(sq)[:, None]] = -np.inf
    return s


def reference_forward(q: np.ndarray, k: np.ndarray, v: np.ndarray, causal: bool,
                      scale: float) -> tuple[np.ndarray, np.ndarray]:
    """(O [B, Sq, Hq, D], LSE [B, Hq, Sq]) in float64."""
    q, k, v = (np.asarray(x, np.float64) for x in (q, k, v))
    s = _scores(q, k, causal, scale)
    m = s.max(axis=-1, keepdims=True)
    lse = m + np.log(np.exp(s - m).sum(axis=-1, keepdims=True))
    g = q.shape[2] // k.shape[2]
    o = np.einsum("bhqk,bkhd->bqhd", np.exp(s - lse), np.repeat(v, g, axis=2),
                  optimize=True)
    return o, lse[..., 0]


def reference_backward(q: np.ndarray, k: np.ndarray, v: np.ndarray, do: np.ndarray,
                       causal: bool, scale: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(dQ, dK, dV) of O = softmax(scale Q K^T) V in float64 ([B, S, H, D] each; dK and dV
    summed over the G query heads of each KV head)."""
    q, k, v, do = (np.asarray(x, np.float64) for x in (q, k, v, do))
    B, Sk, Hkv, D = k.shape
    g = q.shape[2] // Hkv
    kk, vv = np.repeat(k, g, axis=2), np.repeat(v, g, axis=2)
    o, lse = reference_forward(q, k, v, causal, scale)
    p = np.exp(_scores(q, k, causal, scale) - lse[..., None])
    dp = np.einsum("bqhd,bkhd->bhqk", do, vv, optimize=True)
    ds = p * (dp - np.einsum("bqhd,bqhd->bhq", do, o, optimize=True)[..., None])
    dq = np.einsum("bhqk,bkhd->bqhd", ds, kk, optimize=True) * scale
    dk = np.einsum("bhqk,bqhd->bkhd", ds, q, optimize=True) * scale
    dv = np.einsum("bhqk,bqhd->bkhd", p, do, optimize=True)
    return (dq, dk.reshape(B, Sk, Hkv, g, D).sum(axis=3),
            dv.reshape(B, Sk, Hkv, g, D).sum(axis=3))


def to_bits(x: np.ndarray, dtype: str) -> np.ndarray:
    """The 16-bit patterns of `x` in `dtype`, rounded to nearest even."""
    if dtype == "f16":
        return np.asarray(x, np.float16)
    u = np.ascontiguousarray(x, np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def from_bits(bits: np.ndarray, dtype: str) -> np.ndarray:
    if dtype == "f16":
        return np.asarray(bits, np.float16).astype(np.float64)
    wide = np.asarray(bits, np.uint16).astype(np.uint32) << 16
    out: np.ndarray = wide.view(np.float32).astype(np.float64)
    return out


# (Sq, Sk, Hkv, G, causal): odd lengths, one token, Sq != Sk both ways, GQA
CASES = ((1, 1, 2, 1, False), (1, 1, 1, 4, True), (77, 77, 2, 1, True), (77, 77, 1, 4, False),
         (200, 200, 2, 4, True), (200, 77, 2, 1, True), (77, 200, 2, 1, False),
         (1000, 1000, 1, 4, True), (1000, 1000, 2, 1, False))
STRIDED_CASE = (200, 200, 2, 4, True)
TOLERANCE = {"bf16": 2e-2, "f16": 5e-3}   # max |error| / max |reference|


def run_case(mod: LoadedModule, report: Report, dtype: str, D: int, Sq: int, Sk: int,
             Hkv: int, G: int, causal: bool, B: int = 2, strided: bool = False,
             seed: int = 5) -> None:
    """One problem on the GPU against `reference_backward`; `strided`: Q, dO and dQ live as
    [B, H, S, D] (head-major) buffers, passed by their strides."""
    from ptxdsl import runtime as rt
    rng = np.random.default_rng(seed)
    Hq, scale = Hkv * G, 1 / math.sqrt(D)
    q, do = (rng.standard_normal((B, Sq, Hq, D)) for _ in range(2))
    k, v = (rng.standard_normal((B, Sk, Hkv, D)) for _ in range(2))
    q, k, v, do = (from_bits(to_bits(x, dtype), dtype) for x in (q, k, v, do))
    o, lse = reference_forward(q, k, v, causal, scale)
    want = reference_backward(q, k, v, do, causal, scale)
    strides: dict[str, Strides] = {}

    def upload(name: str, x: np.ndarray) -> DeviceBuffer:
        if strided and name in ("q", "do", "dq"):
            strides[name] = (Hq * Sq * D, D, Sq * D)
            x = x.transpose(0, 2, 1, 3)
        return rt.DeviceBuffer.from_numpy(np.ascontiguousarray(to_bits(x, dtype)))

    bufs = {n: upload(n, x) for n, x in (("q", q), ("k", k), ("v", v), ("o", o), ("do", do))}
    out = {n: upload(n, np.zeros(shape)) for n, shape in (
        ("dq", q.shape), ("dk", k.shape), ("dv", v.shape))}
    for buf in out.values():
        buf.memset(0xFF)                   # NaN in both types: an element never stored fails
    lse_buf = rt.DeviceBuffer.from_numpy(lse.astype(np.float32))
    backward(mod, bufs["q"], bufs["k"], bufs["v"], bufs["o"], bufs["do"], lse_buf,
             out["dq"], out["dk"], out["dv"], B=B, Sq=Sq, Sk=Sk, Hq=Hq, Hkv=Hkv, D=D,
             causal=causal, scale=scale, dtype=dtype, strides=strides)
    sync()
    for name, ref in zip(("dq", "dk", "dv"), want, strict=True):
        got = from_bits(out[name].to_numpy(NP_TYPES[dtype]), dtype)
        if strided and name == "dq":
            got = got.reshape(B, Hq, Sq, D).transpose(0, 2, 1, 3)
        got = got.reshape(ref.shape)
        err = float(np.max(np.abs(got - ref))) if got.size else 0.0
        # a gradient that is zero (one key: softmax is 1 whatever S is) is rounding noise
        # on both sides: compare it against a floor of 1e-2 (inputs are of unit scale)
        top = max(float(np.max(np.abs(ref))), 1e-2)
        ok = bool(np.isfinite(got).all()) and err <= TOLERANCE[dtype] * top
        report.check(f"{dtype} d{D} B={B} Sq={Sq} Sk={Sk} Hkv={Hkv} G={G} "
                     f"causal={causal}{' strided' if strided else ''} {name}", ok,
                     f"max error {err:.3g}, {err / top:.3g} of max |{name}| {top:.3g}")


def run(cases: Iterable[tuple[int, int, int, int, bool]] = CASES,
        head_dims: Iterable[int] = HEAD_DIMS, dtypes: Iterable[str] = ("bf16",),
        bounded: bool = True) -> Report:
    """Every case of `cases` ((Sq, Sk, Hkv, G, causal)) for each head dim and dtype, plus
    STRIDED_CASE with head-major Q, dO and dQ, against the float64 reference. `bounded`: the
    debug build, where a wait that hangs traps after 2 s and the error record printed names
    its barrier and parity; the default until these kernels have been seen to run, so that a
    hang fails the demo instead of blocking it."""
    report = Report("flash_attention_bwd")
    mod = build_module(bounded=bounded).load()
    recorder = debug.Recorder().attach(mod) if bounded else None
    for dtype in dtypes:
        for D in head_dims:
            cfg = CONFIGS[dtype, D]
            report.note(f"{cfg.name}: {mod[cfg.name].num_regs} registers per thread at launch "
                        f"(setmaxnreg {PRODUCER_REGS}/{CONSUMER_REGS}), {cfg.smem_bytes} bytes "
                        "of dynamic shared memory")
            for case, strided in [(c, False) for c in cases] + [(STRIDED_CASE, True)]:
                try:
                    run_case(mod, report, dtype, D, *case, strided=strided)
                except Exception:
                    if recorder is not None:
                        print(f"  error record: {recorder.record()}")
                    raise
    return report


def main(argv: list[str] | None = None) -> int:
    return sample_main(argv, __doc__, build_module, run)


if __name__ == "__main__":
    raise SystemExit(main())
