"""A grouped (mixture-of-experts) bf16 GEMM in one persistent launch, with tensor maps encoded
on the device: out_g = X_g @ W_g^T for G experts, f32 accumulation, bf16 out.

Seed: CCCL's "How to initialize a tensor map on device" — a batch of tensors of various sizes in
one launch, where one `__grid_constant__` map per tensor cannot be passed.

Data: X (T x K bf16) holds the tokens sorted by expert, expert g owning rows offsets[g] ..
offsets[g+1]-1 (ragged M_g = offsets[g+1] - offsets[g], 0 allowed); W (G x N x K bf16) holds
each expert's weight K-major (N x K); Y (T x N bf16) receives the outputs. `offsets` (G + 1
u32) lives on the device; the host never loops over the experts.

`moe_gemm` (384 threads: a producer warpgroup and two consumer warpgroups; one CTA per SM, in
clusters of two):
- The work list is every (expert, tile pair) in expert order. A cluster computes two 128 x 256
  tiles of one expert that share an operand, so that operand is read from L2 once for both
  and multicast: M-pairs (m-tiles 2p and 2p + 1 of one n-tile: W_g's tile shared) and, when
  the expert's m_tiles = ceil(M_g / 128) is odd, the last m-tile's N-pairs (n-tiles 2q and
  2q + 1: X_g's tile shared; with an odd n-tile count rank 1's last one is past N and stores
  nothing). They go in blocks per n-tile pair q: the M-pairs of n-tile 2q, those of 2q + 1,
  the N-pair q, so every item reading a W_g tile is claimed with the others. Each role walks
  the experts from the device `offsets` (a running prefix sum of the per-expert item counts,
  `ExpertWalk`), so empty experts hold no items and no host-side list exists.
- Dynamic work queue: cluster c starts with item c and claims each further one with one
  `atom.add` on a global counter (`sched[0]`: item nclusters + claim), issued CLAIM_LEAD K
  steps before its current item's last load. So clusters claim in the order they free up,
  consecutive items start close together, items claimed together run side by side (the
  pairs sharing a W_g tile, and the items reading one X_g, meet in L2), and the end of the
  launch is balanced. The producer passes each item to both CTAs' consumers with the
  stage that carries its first data (a u32 per stage in shared memory: stored locally, and
  into rank 1's by `st.async`, which completes on that stage's full barrier), and a final
  stage with no data and END_ITEM tells them to stop. The last cluster to finish (an acq_rel
  count in `sched[1]`) zeroes both counters for the next launch.
- The last partial wave is split along K. With C clusters, the last `total % C` items would
  run alone while the other clusters wait a whole item (at G = 128 on an H100: 6 items for 73
  µs, 60 clusters idle, 3.5% of the launch). Every role builds the same `WorkList` (one warp
  sums the experts' item counts) and hands those items out as `parts` = min(C // rest,
  K steps // MIN_PART_STEPS, MAX_PARTS) consecutive items over K ranges. A part's consumer
  warpgroups store their f32 partial sums in the `partials` workspace (one slot per part) and
  count on the tile's counter (`atom.add.acq_rel.gpu` after a warpgroup barrier); the one that
  counts last zeroes the counter for the next launch, adds the slots up in part order (the
  same rounding whichever part ended last) and stores the tile. No part waits for another, so
  no claim order can hang. G = 128: 557 -> 572 TFLOP/s (H100 A/B); G = 8 and 32 (no partial
  wave to split, or one too large) unchanged.
- One producer per cluster, warp 0 of rank 0 (`setmaxnreg.dec 40`; rank 1's producer
  warpgroup only waits at the closing cluster barrier): when its item belongs to a new expert
  it rewrites two 128-byte maps in shared memory (`tensormap.replace` of X_g's global address
  and row count, and of W_g's address; every other field comes from the host-encoded
  templates), publishes them with `tensormap.cp_fenceproxy ... .release.gpu` into one of its
  STAGES + 1 global map slots (in turn), and acquires them with `fence.proxy.tensormap::generic
  .acquire.gpu` before its first TMA load through them. A slot is rewritten only right after
  a `wait_empty`: by then every load issued STAGES or more loads earlier has landed, and the
  slot's last use is at least STAGES + 1 loads back (each expert switch is >= 1 load), so no
  TMA load can still be reading the map being overwritten.
- Per 64-wide K step lane 0 fills the stage of both CTAs of a STAGES-deep `MbarrierRing`
  (128B swizzle): the shared tile (W_g's 256 x 64 or X_g's 128 x 64) multicast to both
  (ctaMask 3), each CTA's own tile to it alone (rank 1's through ctaMask 2), after an arrive
  with the stage's byte count on rank 0's full barrier and one remote arrive on rank 1's
  (which also expects the item's 4 bytes). Rank 0's empty barriers count both CTAs'
  consumers, so a stage is refilled only once both released it. Rows past M_g and columns
  past K arrive as zeros (the expert's map bounds), so no expert reads another's tokens. The
  templates ask for 256-byte L2 promotion: a load's L2 miss brings the next K step's bytes of
  the same rows too.
- Consumers (`setmaxnreg.inc 232`): warpgroup w issues four `wgmma m64n256k16` per stage on
  rows 64w..64w+63 (the first with scale-d 0: the tile starts from zero), waits for them
  (`wait_group 0`) and its leader releases the stage on rank 0's empty barrier at once (2
  arrivals per CTA per stage), so the loads have 3 of the 4 stages; after the tile's last
  stage it converts the accumulator to bf16.
- Epilogue: 64 rows that all belong to the expert go out through `TmaStoreEpilogue`
  (`stmatrix` into a 128B-swizzled staging buffer, TMA stores through Y's host-encoded map,
  running on while the warpgroup starts its next tile; N a multiple of 8). The rows of an
  expert's last partial 64 (and every row when N is not a multiple of 8) are stored directly,
  predicated on the expert's row count and N, so rows past M_g (another expert's) are never
  written.

`run()` checks every expert's rows against numpy (exact: inputs are multiples of 1/8, products
and sums of at most K terms stay exact in f32 and round to bf16 the same way) and that the
padding rows after the last expert keep their poison.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ptxdsl import Addr, Kernel, Module, Reg, Symbol, ptx, t
from ptxdsl.epilogue import BOX_COLS, BOX_ROWS, STAGING_BYTES, TmaStoreEpilogue
from ptxdsl.instructions.setmaxnreg import setmaxnreg_dec, setmaxnreg_inc
from ptxdsl.instructions.wgmma_desc import SmemLayout, descriptor
from ptxdsl.pipeline import MbarrierRing, cluster_sync, tx_bytes
from ptxdsl.sample_runner import POISON, Report, sample_main, sync
from ptxdsl.split_sum import ordered_split_sum

if TYPE_CHECKING:   # the runtime is imported when a GPU run needs it
    from ptxdsl.runtime import Function, LoadedModule, TensorMap

space_shared = ptx.space_shared

BM, BN, BK = 128, 256, 64           # CTA tile; each consumer warpgroup owns 64 of the BM rows
STAGES = 4
CLUSTER = 2                         # CTAs per cluster: a pair of tiles sharing one operand
MAP_SLOTS = STAGES + 1              # map slots per producer, rewritten in turn (see the docstring)
MAP_BYTES = 128
SLOT_BYTES = 2 * MAP_BYTES          # one slot: X_g's map, then W_g's
CONSUMERS = 2                       # consumer warpgroups
THREADS = 128 * (1 + CONSUMERS)
PRODUCER_REGS, CONSUMER_REGS = 40, 232
LAYOUT_X = SmemLayout(t.bf16, BM, BK, "K", "128B")        # the TMA box of one X stage
LAYOUT_XW = SmemLayout(t.bf16, 64, BK, "K", "128B")       # one warpgroup's rows of it
LAYOUT_W = SmemLayout(t.bf16, BN, BK, "K", "128B")
STAGE_X, STAGE_W = LAYOUT_X.nbytes, LAYOUT_W.nbytes       # 16 KiB, 32 KiB
STAGE_TX = tx_bytes(((BM, BK), t.bf16), ((BN, BK), t.bf16))
# Dynamic shared memory, all of it (static variables would push the tiles off their 1024-byte
# swizzle alignment): the tile ring, each consumer's epilogue staging buffer, the two shared
# maps, the ring's barriers.
TILES_BYTES = STAGES * (STAGE_X + STAGE_W)
EPI_OFF = TILES_BYTES
SMAP_OFF = EPI_OFF + CONSUMERS * STAGING_BYTES
RING_OFF = SMAP_OFF + 2 * MAP_BYTES
ITEMS_OFF = RING_OFF + 16 * STAGES      # per stage: the work item its data belongs to
SHARED_BYTES = ITEMS_OFF + 4 * STAGES
# An L2 miss of a TMA load fetches 256 bytes: a row's 128 bytes of this K step and of the next
# (rows are 256-byte aligned when K is a multiple of 128), so DRAM serves each row of a W_g or
# X_g tile in 256-byte pieces. Measured at G = 128 (H100): 538 -> 552 TFLOP/s, from W_g's map.
L2_PROMOTION = "L2_256B"
END_ITEM = 0xFFFFFFFF                   # the item of the stage that tells consumers to stop
# The last partial wave's items split along K (the docstring): into at most MAX_PARTS parts of
# at least MIN_PART_STEPS K steps. More parts made G = 128 no faster: the last part reads them
# all back (H100, parts 4 / 6 / 8: 567 / 569 / 560 TFLOP/s against 555 unsplit).
MAX_PARTS = 4
MIN_PART_STEPS = 8
# The producer claims its next item this many K steps before its current item's last load:
# late enough that clusters claim in the order they free up, early enough that the atomic's
# round trip hides behind the loads still to issue. Claimed at an item's start instead, the
# next item began a whole item later, after a current item whose length varies by +-8 us, so
# items claimed together started apart and read W_g and X_g tiles again from DRAM. Measured at
# G = 128 (H100, ncu): DRAM reads 4.45 -> 4.33 GB (X and every W_g once: 4.23), 1.66 -> 1.62
# ms; in A/B 564 -> 569-571 TFLOP/s, with leads of 2, 3, 4 and 8 steps alike.
CLAIM_LEAD = 4
PART_BYTES = 64 * BN * 4                # one warpgroup's f32 accumulator: a part's partial sum
WORKLIST_UNROLL = 4
EMPTY_ARRIVALS = CONSUMERS              # per CTA: each consumer warpgroup's leader
PEER = 1                                # the rank whose loads rank 0's producer issues
ITEM_TX = 4                             # the item's st.async into the peer's stage
BF16 = 2


def _cdiv(k: Kernel, a: Reg, b: int) -> Reg:
    return k.div(k.add(a, b - 1), b)


def _expert_items(k: Kernel, rows: Reg, n_tiles: Reg, n_pairs: Reg) -> Reg:
    """How many cluster items an expert of `rows` tokens has (the device side of
    `expert_items`): an M-pair per pair of m-tiles and n-tile, and when m_tiles is odd an
    N-pair of the last m-tile per pair of n-tiles (`n_pairs`)."""
    m_tiles = _cdiv(k, rows, BM)
    return k.mad(k.shr(m_tiles, 1), n_tiles, k.mul(k.and_(m_tiles, 1), n_pairs))


class WorkList:
    """The launch's items as one role sees them (the device side of `split_plan` and
    `decode`): the expert-ordered cluster items, except that the last `total % clusters`
    (the partial last wave, which would leave the other clusters idle for a whole item) are
    split along K into `parts` consecutive items each. Every role builds it with one full
    warp: each lane sums the item counts of every 32nd expert, a butterfly adds them up."""

    def __init__(self, k: Kernel, offsets: Reg, G: Reg, n_tiles: Reg, k_steps: Reg) -> None:
        self.k, self.k_steps = k, k_steps
        lane = k.and_(k.tid.x, 31)
        n_pairs = k.shr(k.add(n_tiles, 1), 1)
        total = k.mov(0, dst=k.reg(t.u32, "wl_total"))
        with k.for_range(lane, G, 32 * WORKLIST_UNROLL) as g0:
            rows = []
            for j in range(WORKLIST_UNROLL):     # these experts' loads in flight together
                g = k.add(g0, 32 * j)
                lo, hi = k.mov(0, type=t.u32), k.mov(0, type=t.u32)
                with k.guard(k.setp("lt", g, G, type=t.u32)):
                    at = k.add(offsets, k.mul(g, 4, mode="wide"))
                    k.ld(Addr(at), type=t.u32, space="global", dst=lo)
                    k.ld(Addr(at, 4), type=t.u32, space="global", dst=hi)
                rows.append((lo, hi))
            for lo, hi in rows:
                k.add(total, _expert_items(k, k.sub(hi, lo), n_tiles, n_pairs), dst=total)
        for lanes in (16, 8, 4, 2, 1):
            k.add(total, k.shfl_sync("bfly", total, lanes, 31), dst=total)
        # lane 0's copy: the same value, in a register the checker sees as warp-uniform
        self.total = k.shfl_sync("idx", total, 0, 31)
        self.clusters = clusters = k.read_special("nclusterid.x")
        rest = k.rem(self.total, clusters)
        parts = k.min(k.div(clusters, k.max(rest, 1, type=t.u32)),
                      k.min(k.div(k_steps, MIN_PART_STEPS), MAX_PARTS, type=t.u32),
                      type=t.u32)
        some = k.setp("gt", parts, 1, type=t.u32, bool_op="and",
                      c=k.setp("ne", rest, 0, type=t.u32))
        self.parts = k.selp(parts, 1, some, type=t.u32)
        self.split_base = k.sub(self.total, k.selp(rest, 0, some, type=t.u32))

    def decode(self, v: Reg) -> tuple[Reg, Reg, Reg, Reg, Reg]:
        """Item v: (its cluster item, "a part" predicate, its part's index among all parts
        (the slot of its partial sum), first and end K step)."""
        k = self.k
        split = k.setp("ge", v, self.split_base, type=t.u32)
        rel = k.sub(v, self.split_base)
        i = k.div(rel, self.parts)
        part = k.sub(rel, k.mul(i, self.parts))
        base = k.selp(k.add(self.split_base, i), v, split, type=t.u32)
        kb0 = k.selp(k.div(k.mul(part, self.k_steps), self.parts), 0, split, type=t.u32)
        kb1 = k.selp(k.div(k.mul(k.add(part, 1), self.k_steps), self.parts), self.k_steps,
                     split, type=t.u32)
        return base, split, rel, kb0, kb1


class ExpertWalk:
    """One role's walk over the experts (the device side of `simulate_walk`): registers g,
    m_lo/m_hi (the expert's token rows), first/end (its work items [first, end)). `seek(w)`
    moves on to the expert holding item w, skipping empty experts; afterwards g == G means
    w is past the last item."""

    def __init__(self, k: Kernel, offsets: Reg, G: Reg, n_tiles: Reg) -> None:
        self.k, self.offsets, self.G, self.n_tiles = k, offsets, G, n_tiles
        self.g = k.mov(0, dst=k.reg(t.u32, "walk_g"))
        self.m_lo = k.ld(Addr(offsets), type=t.u32, space="global",
                         dst=k.reg(t.u32, "walk_m_lo"))
        self.m_hi = k.ld(Addr(offsets, 4), type=t.u32, space="global",
                         dst=k.reg(t.u32, "walk_m_hi"))
        self.n_pairs = k.shr(k.add(n_tiles, 1), 1)
        self.first = k.mov(0, dst=k.reg(t.u32, "walk_first"))
        self.end = k.mov(self._items(), dst=k.reg(t.u32, "walk_end"))

    def _items(self) -> Reg:
        """The current expert's cluster item count (M-pairs share W_g's tile, N-pairs X_g's;
        their order: `tile`)."""
        return _expert_items(self.k, self.k.sub(self.m_hi, self.m_lo), self.n_tiles,
                             self.n_pairs)

    def seek(self, w: Reg) -> None:
        k = self.k
        with k.loop():
            k.break_(k.setp("lt", w, self.end, type=t.u32))
            k.add(self.g, 1, dst=self.g)
            k.break_(k.setp("ge", self.g, self.G, type=t.u32))
            k.mov(self.m_hi, dst=self.m_lo)
            nxt = k.add(self.offsets, k.mul(k.add(self.g, 1), 4, mode="wide"))
            k.ld(Addr(nxt), type=t.u32, space="global", dst=self.m_hi)
            k.mov(self.end, dst=self.first)
            k.add(self.first, self._items(), dst=self.end)

    def tile(self, w: Reg, rank: Reg | int) -> tuple[Reg, Reg, Reg]:
        """(m-tile, n-tile) of CTA `rank`'s tile of item w within the current expert, and the
        predicate "w is an M-pair" (W_g's tile shared, else X_g's). The items go in blocks,
        one per pair of n-tiles 2q, 2q + 1: the M-pairs of n-tile 2q (pair fastest), those of
        2q + 1, then (odd m_tiles) the N-pair of both. So everything that reads one W_g tile
        is claimed together and runs side by side, its loads meeting in L2."""
        k = self.k
        local = k.sub(w, self.first)
        m_tiles = _cdiv(k, k.sub(self.m_hi, self.m_lo), BM)
        pairs = k.shr(m_tiles, 1)
        block = k.mad(pairs, 2, k.and_(m_tiles, 1))   # >= 1 when the expert has items
        q = k.div(local, block)
        r = k.sub(local, k.mul(q, block))
        first = k.setp("lt", r, pairs, type=t.u32)            # an M-pair of n-tile 2q
        r2 = k.sub(r, pairs)                                  # wraps (large) when `first`
        has_2q1 = k.setp("lt", k.mad(q, 2, 1), self.n_tiles, type=t.u32)
        second = k.setp("lt", r2, pairs, type=t.u32, bool_op="and", c=has_2q1)
        mpair = k.or_(first, second, type=t.pred)
        mt_m = k.mad(k.selp(r, r2, first, type=t.u32), 2, rank)
        nt_m = k.add(k.shl(q, 1), k.selp(0, 1, first, type=t.u32))
        return (k.selp(mt_m, k.sub(m_tiles, 1), mpair, type=t.u32),
                k.selp(nt_m, k.mad(q, 2, rank), mpair, type=t.u32), mpair)


def build_moe_gemm(bounded: bool = False, encode_only: bool = False) -> Kernel:
    """`bounded`: every mbarrier wait traps after 2 s with an error record (the GPU tests).
    `encode_only` (`moe_encode_only`, for the benchmark's share of map encoding): the same
    walk and the same map publishes, no loads and no math."""
    k = Kernel("moe_encode_only" if encode_only else "moe_gemm", reqntid=THREADS,
               minnctapersm=1, reqnctapercluster=(CLUSTER, 1, 1))
    if bounded:
        from ptxdsl import debug
        debug.bounded_waits(k, timeout_ns=2_000_000_000)
    tmpl_x, tmpl_w = k.param_tensormap("tmpl_x"), k.param_tensormap("tmpl_w")
    map_y = k.param_tensormap("map_y")      # Y's own map (T x N, final: encoded on the host)
    x_p, w_p, y_p = k.param_ptr("x"), k.param_ptr("w"), k.param_ptr("y")
    offsets_p, maps_p = k.param_ptr("offsets"), k.param_ptr("maps")
    sched_p = k.param_ptr("sched")          # u32 [next item, finished clusters], zero at launch
    partials_p = k.param_ptr("partials")    # split parts' counters (zero at launch) and sums
    G_p, N_p, K_p = k.param(t.u32, "G"), k.param(t.u32, "N"), k.param(t.u32, "K")
    tiles = k.extern_shared("tiles", align=1024)
    smap_x, smap_w = Addr(tiles, SMAP_OFF), Addr(tiles, SMAP_OFF + MAP_BYTES)
    # Both CTAs' consumers release rank 0's empty barriers (its producer fills both CTAs);
    # init() ends with a cluster barrier, so no remote arrive or load meets an uninitialised one.
    ring = MbarrierRing(k, STAGES, empty_count=EMPTY_ARRIVALS, peers=CLUSTER,
                        storage=Addr(tiles, RING_OFF))
    ring.init()
    rank = k.read_special("cluster_ctarank")

    G, N, K = k.ld_param(G_p), k.ld_param(N_p), k.ld_param(K_p)
    offsets = k.cvta(k.ld_param(offsets_p), "global", to=True)
    n_tiles = _cdiv(k, N, BN)
    k_steps = _cdiv(k, K, BK)
    tiles_x = k.mov(tiles)
    tiles_w = k.add(tiles_x, STAGES * STAGE_X)
    warpgroup = k.shr(k.tid.x, 7)

    with k.if_(warpgroup == 0):
        setmaxnreg_dec(k, PRODUCER_REGS)
        # warp 0 of rank 0: the cluster's one producer
        with k.if_(k.setp("eq", k.or_(k.shr(k.tid.x, 5), rank), 0, type=t.u32)):
            _producer(k, ring, tiles_x, tiles_w, smap_x, smap_w, tmpl_x, tmpl_w,
                      (x_p, w_p, maps_p, sched_p), offsets, G, N, K, n_tiles, k_steps,
                      encode_only)
    with k.else_():
        setmaxnreg_inc(k, CONSUMER_REGS)
        if not encode_only:
            _consumer(k, ring, tiles_x, tiles_w, k.sub(warpgroup, 1), rank,
                      (y_p, map_y, partials_p), offsets, G, N, n_tiles, k_steps)
    cluster_sync(k)     # no CTA leaves while its peer may still load into it or release to it
    k.ret()
    return k


def _producer(k: Kernel, ring: MbarrierRing, tiles_x: Reg, tiles_w: Reg, smap_x: Addr,
              smap_w: Addr, tmpl_x: Symbol, tmpl_w: Symbol,
              ptrs: tuple[Symbol, Symbol, Symbol, Symbol], offsets: Reg, G: Reg, N: Reg,
              K: Reg, n_tiles: Reg, k_steps: Reg, encode_only: bool = False) -> None:
    """Warp 0: expert switches re-encode the maps (whole warp: cp_fenceproxy is .aligned);
    lane 0 issues the TMA loads."""
    x_p, w_p, maps_p, sched_p = ptrs
    lane0 = k.tid.x == 0
    x, w = k.ld_param(x_p), k.ld_param(w_p)
    row_bytes = k.mul(K, BF16)                               # X's and W's row pitch
    expert_bytes = k.mul(k.mul(N, K), BF16)                  # one W_g (< 4 GiB)
    my_slots = k.add(k.ld_param(maps_p), k.mul(k.ctaid.x, MAP_SLOTS * SLOT_BYTES, mode="wide"))
    with k.if_(lane0):    # the fields every expert shares come from the host's templates
        k.copy(smap_x, tmpl_x, MAP_BYTES)
        k.copy(smap_w, tmpl_w, MAP_BYTES)
    slot = k.mov(0, dst=k.reg(t.u32, "map_slot"))
    cur = k.mov(0xFFFFFFFF, dst=k.reg(t.u32, "map_expert"))   # the expert the slot holds
    map_x = k.mov(my_slots, dst=k.reg(t.u64, "map_x"))
    map_w = k.add(map_x, MAP_BYTES, dst=k.reg(t.u64, "map_w"))
    walk = ExpertWalk(k, offsets, G, n_tiles)
    p = ring.producer()
    items = k.add(tiles_x, ITEMS_OFF)

    def publish() -> None:
        """The expert's two maps: replace in shared memory, copy to the next slot with
        release, acquire (whole warp; lane 0 writes and acquires)."""
        k.syncwarp()         # the previous publish read the shared copies
        with k.if_(lane0):
            addr_x = k.add(x, k.mul(walk.m_lo, row_bytes, mode="wide"))
            ptx.tensormap_replace_global_address(k, space_shared, smap_x, addr_x)
            ptx.tensormap_replace_global_dim(k, space_shared, smap_x, 1,
                                             k.sub(walk.m_hi, walk.m_lo))
            addr_w = k.add(w, k.mul(walk.g, expert_bytes, mode="wide"))
            ptx.tensormap_replace_global_address(k, space_shared, smap_w, addr_w)
        k.syncwarp()
        k.add(my_slots, k.mul(slot, SLOT_BYTES, mode="wide"), dst=map_x)
        k.add(map_x, MAP_BYTES, dst=map_w)
        ptx.tensormap_cp_fenceproxy(k, ptx.sem_release, ptx.scope_gpu, map_x, smap_x,
                                    MAP_BYTES)
        ptx.tensormap_cp_fenceproxy(k, ptx.sem_release, ptx.scope_gpu, map_w, smap_w,
                                    MAP_BYTES)
        with k.if_(lane0):
            ptx.fence_proxy_tensormap_generic(k, "acquire", "gpu", map_x)
            ptx.fence_proxy_tensormap_generic(k, "acquire", "gpu", map_w)
        k.add(slot, 1, dst=slot)
        with k.guard(k.setp("eq", slot, MAP_SLOTS, type=t.u32)):
            k.mov(0, dst=slot)
        k.mov(walk.g, dst=cur)

    def hand_out(value: Reg | int, data_tx: int) -> Reg:
        """The current stage's item (a register, or END_ITEM) to both CTAs' consumers: stored
        here and released by this CTA's arrive (expecting `data_tx` bytes of loads, or plain
        when none follow), and stored into the peer's slot by st.async, whose 4 bytes the
        peer's full barrier expects with the loads'. Returns this CTA's full barrier."""
        item_at = k.add(items, k.shl(p.stage, 2))
        k.st(Addr(item_at), value, type=t.u32, space="shared")
        if data_tx:
            p.arrive_expect_tx(data_tx)
        else:
            p.arrive()
        bar = p.full_barrier()
        peer_bar = ptx.mapa(k, "shared::cluster", bar, PEER)
        ptx.mbarrier_arrive_expect_tx(k, "release", "cta", "shared::cluster", peer_bar,
                                      data_tx + ITEM_TX)
        if isinstance(value, int):
            value = k.mov(value, type=t.u32)
        ptx.st_async(k, ptx.mapa(k, "shared::cluster", item_at, PEER), value, peer_bar)
        return bar

    def load(slot: Reg, tmap: Reg, coords: tuple[Reg, Reg], bar: Reg, ctas: int) -> None:
        """One box into `slot` of the CTAs in the `ctas` mask (rank 0 alone: no multicast)."""
        if ctas == 1:
            ptx.cp_async_bulk_tensor(k, "shared::cluster", "global", slot, tmap, coords, bar)
        else:
            ptx.cp_async_bulk_tensor(k, "shared::cluster", "global", slot, tmap, coords, bar,
                                     cta_mask=ctas)

    def claim() -> None:
        """The cluster's next item: lane 0's `claimed` (read after the current item)."""
        with k.if_(lane0):
            k.atom("add", Addr(sched), 1, type=t.u32, space="global", dst=claimed)

    def body(item: Reg, tile_item: Reg, kb0: Reg, kb1: Reg) -> None:
        mt, nt, mpair = walk.tile(tile_item, 0)  # rank 0's tile; the peer's is the next m or n
        m0, n0 = k.mul(mt, BM), k.mul(nt, BN)
        switch = k.setp("ne", walk.g, cur, type=t.u32)
        if encode_only:
            claim()
            with k.if_(switch):
                publish()
            return
        # every item claims once: at K step `at`, or here if it has no K step to load
        at = k.max(k.sub(kb1, CLAIM_LEAD, type=t.s32), kb0, type=t.s32)
        with k.if_(k.setp("ge", kb0, kb1, type=t.u32)):
            claim()
        with k.for_range(kb0, kb1) as kb:
            with k.if_(k.setp("eq", kb, at, type=t.u32)):
                claim()
            p.wait_empty()        # both CTAs' consumers released this stage
            # After this wait a slot last used STAGES + 1 loads back is free (docstring).
            with k.if_(switch):
                publish()
                k.setp("ne", walk.g, cur, type=t.u32, dst=switch)   # false: once per expert
            with k.if_(lane0):
                # The item goes out with the stage: the loads below complete transaction bytes
                # on both CTAs' full barriers, which hand_out's arrives expect.
                bar = hand_out(item, STAGE_TX)
                k0 = k.mul(kb, BK)
                xs, ws = p.slot(tiles_x, STAGE_X), p.slot(tiles_w, STAGE_W)
                both, peer = 1 | 1 << PEER, 1 << PEER
                with k.if_(mpair):      # W_g's tile to both; each CTA its own X_g rows
                    load(ws, map_w, (k0, n0), bar, both)
                    load(xs, map_x, (k0, m0), bar, 1)
                    load(xs, map_x, (k0, k.add(m0, BM)), bar, peer)
                with k.else_():         # X_g's tile to both; each CTA its own W_g rows
                    load(xs, map_x, (k0, m0), bar, both)
                    load(ws, map_w, (k0, n0), bar, 1)
                    load(ws, map_w, (k0, k.add(n0, BN)), bar, peer)
            p.advance()

    sched = k.cvta(k.ld_param(sched_p), "global", to=True)
    grid = k.read_special("nclusterid.x")
    work = WorkList(k, offsets, G, n_tiles, k_steps)
    item = k.mov(k.read_special("clusterid.x"), dst=k.reg(t.u32, "item"))
    claimed = k.mov(0, dst=k.reg(t.u32, "claimed"))
    with k.loop():
        tile_item, _, _, kb0, kb1 = work.decode(item)
        walk.seek(tile_item)
        k.break_(k.setp("ge", walk.g, G, type=t.u32))
        body(item, tile_item, kb0, kb1)      # claims the next item near its end
        k.add(k.shfl_sync("idx", claimed, 0), grid, type=t.u32, dst=item)
    if not encode_only:       # a stage with no data whose item tells the consumers to stop
        p.wait_empty()
        with k.if_(lane0):
            hand_out(END_ITEM, 0)
        p.advance()
    # The last cluster to stop claiming zeroes the counters for the next launch: every other
    # cluster's last claim happens before its acq_rel increment of the finished count.
    with k.if_(lane0):
        done = k.atom("add", Addr(sched, 4), 1, type=t.u32, space="global", sem="acq_rel",
                      scope="gpu")
        with k.if_(k.setp("eq", done, k.sub(grid, 1), type=t.u32)):
            k.st(Addr(sched), 0, type=t.u32, space="global")
            k.st(Addr(sched, 4), 0, type=t.u32, space="global")


def _consumer(k: Kernel, ring: MbarrierRing, tiles_x: Reg, tiles_w: Reg, wg: Reg, rank: Reg,
              out: tuple[Symbol, Symbol, Symbol], offsets: Reg, G: Reg, N: Reg, n_tiles: Reg,
              k_steps: Reg) -> None:
    """Warpgroup wg (0, 1) of the consumers: rows 64wg.. of this CTA's tile of every item."""
    y_p, map_y, partials_p = out
    y = k.ld_param(y_p)
    x_rows = k.add(tiles_x, k.mul(wg, LAYOUT_XW.nbytes))     # this warpgroup's 64 rows
    staging = k.add(tiles_x, k.mad(wg, STAGING_BYTES, EPI_OFF))
    epi = TmaStoreEpilogue(k, staging, k.tensormap_addr(map_y), k.add(wg, 1))
    tma_ok = k.setp("eq", k.and_(N, 7), 0, type=t.u32)    # Y's row pitch fits TMA
    walk = ExpertWalk(k, offsets, G, n_tiles)
    read = ring.consumer()
    acc = k.fragment(t.f32, shape=(64, BN), zero=False)

    def step(first: bool) -> None:
        """One stage: its four wgmmas, then the stage back to rank 0's producer as soon as
        they have read it. Waiting for the group at once (not keeping it in flight across the
        next stage's wait) leaves 3 of the 4 stages to the loads, while the other warpgroup's
        wgmmas keep the tensor pipe busy: G = 128 went 548 -> 556 TFLOP/s, G = 8 and 32 were
        unchanged (H100 A/B)."""
        if not first:         # a tile's first stage was awaited for its item
            read.wait_full()
        da = descriptor(k, LAYOUT_XW, read.slot(x_rows, STAGE_X))
        db = descriptor(k, LAYOUT_W, read.slot(tiles_w, STAGE_W))
        ptx.wgmma_fence(k)
        for i, kk in enumerate(range(0, BK, 16)):
            ptx.wgmma_mma_async(k, acc, da.k_step(k, kk), db.k_step(k, kk),
                                0 if first and i == 0 else 1, atype="bf16")
        ptx.wgmma_commit_group(k)
        ptx.wgmma_wait_group(k, 0)
        # .cta: wgmma.wait_group already completed the reads
        with k.if_(epi.leader):
            read.release(ctas=[0], scope="cta")
        read.advance()

    work = WorkList(k, offsets, G, n_tiles, k_steps)
    partials = k.cvta(k.ld_param(partials_p), "global", to=True)
    tid = k.and_(k.tid.x, 127)

    def add_up_parts(rel: Reg) -> Reg:
        """A part's end: store this warpgroup's partial sum into its slot, count it on the
        tile's counter (acq_rel at gpu scope, after a barrier of the warpgroup: every thread's
        stores are published with it); the part that counts last resets the counter and sums
        every part's slot in part order into the accumulator (the same rounding whichever
        part finished last). Returns the predicate "this warpgroup holds the tile's sum"."""
        first = k.mul(k.div(rel, work.parts), work.parts)      # the tile's first part
        counter = k.add(partials, k.mul(k.mad(k.mad(first, 2, rank), 2, wg), 4, mode="wide"))
        slots = k.add(k.add(partials, k.mul(work.clusters, 16, mode="wide")),
                      k.cvt(k.mad(k.mad(rank, 2, wg), PART_BYTES, k.mul(tid, 16)), t.u64))
        return ordered_split_sum(
            k, acc, mine=k.add(slots, k.mul(rel, 4 * PART_BYTES, mode="wide")),
            first=k.add(slots, k.mul(first, 4 * PART_BYTES, mode="wide")),
            stride=4 * PART_BYTES, counter=counter, parts=work.parts, barrier=epi.barrier,
            leader=epi.leader)

    def body(item: Reg, is_part: Reg, rel: Reg, steps: Reg) -> None:
        # Every tile runs the whole mainloop, even the rows past M_g of an expert's last
        # tile: a warpgroup that skipped them would finish its tile early and pull away from
        # the other tiles reading the same W_g tile, whose loads then miss in L2 (measured
        # slower: BENCHMARKS.md section 6).
        mt, nt, _ = walk.tile(item, rank)
        step(first=True)
        with k.for_range(1, steps):
            step(first=False)
        store = k.not_(is_part)
        with k.if_(is_part):
            k.mov(add_up_parts(rel), dst=store)
        row0 = k.mad(wg, 64, k.mul(mt, BM))                   # within the expert
        rows = k.sub(k.sub(walk.m_hi, walk.m_lo), row0, type=t.s32)
        n0 = k.mul(nt, BN)     # past N for rank 1 of an odd n_tiles' last N-pair
        some = k.setp("gt", rows, 0, type=t.s32, bool_op="and",
                      c=k.setp("lt", n0, N, type=t.u32))
        k.and_(some, store, dst=some, type=t.pred)
        with k.if_(some):                   # some of the 64 rows are the expert's, within N
            packed = acc.to_packed(t.bf16)
            whole = k.setp("ge", rows, 64, type=t.s32, bool_op="and", c=tma_ok)
            with k.if_(whole):
                epi.store(packed, k.add(walk.m_lo, row0), n0)
            with k.else_():     # the expert's last rows: another expert's follow in Y
                first = k.mad(k.add(walk.m_lo, row0), N, n0)
                dst = k.add(y, k.mul(first, BF16, mode="wide"))
                packed.store(dst, N, rows=rows, cols=k.sub(N, n0, type=t.s32))

    items = k.add(tiles_x, ITEMS_OFF)
    with k.loop():            # the producer's items, in the order it claimed them
        read.wait_full()
        item = k.ld(Addr(k.add(items, k.shl(read.stage, 2))), type=t.u32, space="shared")
        tile_item, is_part, rel, kb0, kb1 = work.decode(item)
        walk.seek(tile_item)
        k.break_(k.setp("ge", walk.g, G, type=t.u32))     # END_ITEM
        body(tile_item, is_part, rel, k.sub(kb1, kb0))
    epi.finish()


def build_module(bounded: bool = False) -> Module:
    if bounded:
        from ptxdsl import debug
        return debug.module([build_moe_gemm(True)], name="grouped_gemm_moe_bounded")
    return Module([build_moe_gemm()], name="grouped_gemm_moe")


def build_encode_only_module() -> Module:
    """`moe_encode_only` alone (the benchmark's measure of the map-encoding share)."""
    return Module([build_moe_gemm(encode_only=True)], name="grouped_gemm_moe_encode")


# -- the work list on the host: the same walk, for tests and for the reference ----------------
def expert_items(rows: int, n_tiles: int) -> int:
    """Cluster items of an expert with `rows` tokens (`ExpertWalk._items`)."""
    m_tiles = -(-rows // BM)
    return m_tiles // 2 * n_tiles + (m_tiles & 1) * ((n_tiles + 1) // 2)


def total_items(offsets: Sequence[int] | np.ndarray, N: int) -> int:
    n_tiles = -(-N // BN)
    return sum(expert_items(int(m), n_tiles) for m in np.diff(np.asarray(offsets, np.int64)))


def claims(total: int, grid: int, rng: np.random.Generator | None = None) -> list[list[int]]:
    """Which items each cluster's producer takes (`grid` clusters): cluster c starts with item
    c; each cluster holding an item claims the next (`atom.add` on the counter: claim j is
    item grid + j) until it gets one >= total. The claims' order is the GPU's; here clusters
    claim in turn (rng None: cluster c then takes c, c + grid, ...) or in a random order (an
    np.random.Generator)."""
    out = [[c] if c < total else [] for c in range(grid)]
    active = [c for c in range(grid) if c < total]
    nxt = grid
    while active:
        for c in (list(active) if rng is None else [active[rng.integers(len(active))]]):
            out[c].append(nxt)
            if nxt >= total:
                active.remove(c)
            nxt += 1
    return [[w for w in items if w < total] for items in out]


def walk(offsets: Sequence[int] | np.ndarray, N: int, items: list[int],
         rank: int = 0) -> list[tuple[int, int, int]]:
    """(expert, m-tile, n-tile) of CTA `rank`'s tile of each of a cluster's increasing
    `items` (ExpertWalk's seek and tile, line by line); an n-tile may be past N (rank 1 of an
    odd n_tiles' last N-pair: nothing stored)."""
    offsets = [int(v) for v in offsets]
    G = len(offsets) - 1
    n_tiles = -(-N // BN)
    g, m_lo, m_hi, first = 0, offsets[0], offsets[1], 0
    end = expert_items(m_hi - m_lo, n_tiles)
    out = []
    for w in items:
        while True:                        # seek
            if w < end:
                break
            g += 1
            if g >= G:
                break
            m_lo, m_hi, first = m_hi, offsets[g + 1], end
            end = first + expert_items(m_hi - m_lo, n_tiles)
        if g >= G:
            break
        local, m_tiles = w - first, -(-(m_hi - m_lo) // BM)
        pairs = m_tiles // 2
        q, r = divmod(local, 2 * pairs + m_tiles % 2)
        if r < pairs:                      # M-pair of n-tile 2q: W_g's tile shared
            out.append((g, 2 * r + rank, 2 * q))
        elif r < 2 * pairs and 2 * q + 1 < n_tiles:        # M-pair of n-tile 2q + 1
            out.append((g, 2 * (r - pairs) + rank, 2 * q + 1))
        else:                              # N-pair of the last m-tile: X_g's tile shared
            out.append((g, m_tiles - 1, 2 * q + rank))
    return out


def split_plan(total: int, clusters: int, k_steps: int) -> tuple[int, int]:
    """WorkList's plan for `total` cluster items: (the first split item, parts per split
    item). The last total % clusters items are split along K into min(clusters // rest,
    k_steps // MIN_PART_STEPS, MAX_PARTS) parts each, when that is at least 2."""
    rest = total % clusters
    parts = max(1, min(clusters // max(rest, 1), k_steps // MIN_PART_STEPS, MAX_PARTS))
    return (total - rest, parts) if rest and parts > 1 else (total, 1)


def decode(v: int, plan: tuple[int, int], k_steps: int) -> tuple[int, int | None, int, int]:
    """WorkList.decode of item v: its cluster item, its part's index among all parts (None
    when v is a whole item), its first and end K step."""
    base, parts = plan
    if v < base:
        return v, None, 0, k_steps
    i, part = divmod(v - base, parts)
    return base + i, v - base, part * k_steps // parts, (part + 1) * k_steps // parts


def partials_bytes(grid: int) -> int:
    """The `partials` buffer for `grid` CTAs: a u32 counter per (part slot, rank, warpgroup)
    (zero before the first launch; every launch leaves them zero), then as many f32 partial
    sums of one warpgroup's 64 x BN (at most one split part per cluster)."""
    return grid // CLUSTER * (16 + CLUSTER * CONSUMERS * PART_BYTES)


def simulate_walk(offsets: Sequence[int] | np.ndarray, N: int, grid: int,
                  rng: np.random.Generator | None = None,
                  K: int | None = None) -> Sequence[Sequence[tuple[int, ...]]]:
    """What each CTA's roles compute, in Python, for a launch of `grid` CTAs (`grid` / 2
    clusters; CTA 2c + r is rank r of cluster c): per CTA the (expert, m-tile, n-tile) tiles
    it computes, in order, for the claim order of `claims`. Rank 0's list is also its
    cluster's item list (its tile is never past N). With K, the claims are WorkList's items
    (the last partial wave split along K: `split_plan`) and each entry is (expert, m-tile,
    n-tile, first K step, end K step); without, the cluster items unsplit."""
    if grid % CLUSTER:
        raise ValueError(f"grid must be a multiple of the cluster size {CLUSTER}, got {grid}")
    clusters, total = grid // CLUSTER, total_items(offsets, N)
    if K is None:
        return [walk(offsets, N, items, r) for items in claims(total, clusters, rng)
                for r in range(CLUSTER)]
    k_steps = -(-K // BK)
    plan = split_plan(total, clusters, k_steps)
    out = []
    for items in claims(plan[0] + (total - plan[0]) * plan[1], clusters, rng):
        parts = [decode(v, plan, k_steps) for v in items]
        for r in range(CLUSTER):
            tiles = walk(offsets, N, [p[0] for p in parts], r)
            out.append([(*tile, kb0, kb1)
                        for tile, (_, _, kb0, kb1) in zip(tiles, parts, strict=True)])
    return out


def map_switches(items: list[tuple[int, int, int]]) -> list[tuple[int, int]]:
    """(load index, map slot) at each expert switch of one CTA's producer, for K = one step per
    tile (the closest slot reuse): the check that a slot is rewritten only after its last load
    is STAGES + 1 loads back."""
    out, cur, slot = [], None, 0
    for i, (g, _, _) in enumerate(items):
        if g != cur:
            out.append((i, slot))
            slot, cur = (slot + 1) % MAP_SLOTS, g
    return out


def map_fields(offsets: Sequence[int] | np.ndarray, g: int, K: int, N: int, x_addr: int,
               w_addr: int) -> dict[str, int]:
    """The fields the producer writes for expert g (X_g's address and rows, W_g's address)."""
    return {"x_address": x_addr + int(offsets[g]) * K * BF16,
            "x_rows": int(offsets[g + 1]) - int(offsets[g]),
            "w_address": w_addr + g * N * K * BF16}


# -- host side -----------------------------------------------------------------------------------
def bf16_bits(x: np.ndarray) -> np.ndarray:
    """bf16 bit patterns of values exact in bf16."""
    return (x.astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)


def f32_to_bf16_bits(x: np.ndarray) -> np.ndarray:
    """Round-to-nearest-even f32 -> bf16 bits (cvt.rn.bf16x2.f32 for finite values)."""
    u = x.astype(np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def expert_sizes(G: int, tokens: int, seed: int = 0, zeros: int = 0) -> np.ndarray:
    """Ragged M_g summing to `tokens`: random proportions, `zeros` experts with none."""
    rng = np.random.default_rng(seed)
    weights = rng.uniform(0.2, 1.0, G)
    weights[rng.permutation(G)[:zeros]] = 0.0
    sizes: np.ndarray = np.floor(weights / weights.sum() * tokens).astype(np.int64)
    live = np.flatnonzero(weights)
    sizes[live[0]] += tokens - sizes.sum()
    return sizes


def templates(x: object, T: int, w: object, N: int, K: int) -> tuple[TensorMap, TensorMap]:
    """The host-encoded templates (x, w: device addresses or buffers): every field but X_g's
    address and row count and W_g's address is final; the layouts check box and swizzle."""
    from ptxdsl import runtime as rt
    tmpl_x = rt.TensorMap.tiled(x, (max(T, 1), K), "BFLOAT16", LAYOUT_X.tma_box[::-1],
                                swizzle=LAYOUT_X.tma_swizzle, l2_promotion=L2_PROMOTION)
    tmpl_w = rt.TensorMap.tiled(w, (N, K), "BFLOAT16", LAYOUT_W.tma_box[::-1],
                                swizzle=LAYOUT_W.tma_swizzle, l2_promotion=L2_PROMOTION)
    LAYOUT_X.check_tensormap(tmpl_x)
    LAYOUT_W.check_tensormap(tmpl_w)
    return tmpl_x, tmpl_w


def output_map(y: object, T: int, N: int, fallback: TensorMap) -> TensorMap:
    """Y's tensor map for the TMA-store epilogue (T x N, 64 x 64 boxes, 128B swizzle), or
    `fallback` (any map: the kernel then stores every row directly) when N * 2 bytes is not
    a multiple of 16, TMA's pitch rule."""
    from ptxdsl import runtime as rt
    if N % 8:
        return fallback
    tmap = rt.TensorMap.tiled(y, (max(T, 1), N), "BFLOAT16", (BOX_ROWS, BOX_COLS),
                              swizzle="128B")
    TmaStoreEpilogue.check_tensormap(tmap)
    return tmap


class MoeProblem:
    """X, W, offsets and a poisoned Y on the device (plus POISON padding rows after Y's T rows),
    the two templates, and the map and split-part workspaces for `grid` CTAs."""

    PAD_ROWS = 8

    def __init__(self, sizes: Sequence[int] | np.ndarray, N: int, K: int, grid: int,
                 seed: int = 0) -> None:
        from ptxdsl import runtime as rt
        if K % 8 or K < 8 or N % 2 or N < 2:
            raise ValueError(f"K must be a positive multiple of 8 (X's and W's 16-byte TMA row "
                             f"pitch) and N even (bf16 pairs are stored together); got N={N}, "
                             f"K={K}")
        self.sizes = np.asarray(sizes, np.int64)
        if not len(self.sizes) or (self.sizes < 0).any():
            raise ValueError("at least one expert, and no negative token counts")
        if grid < CLUSTER or grid % CLUSTER:
            raise ValueError(f"grid must be a positive multiple of the cluster size {CLUSTER} "
                             f"(CTA pairs), got {grid}")
        self.G, self.N, self.K, self.grid = len(self.sizes), N, K, grid
        self.offsets = np.concatenate([[0], np.cumsum(self.sizes)]).astype(np.uint32)
        self.T = int(self.offsets[-1])
        rng = np.random.default_rng(seed + 7)
        # float32 is exact here too (sums of at most K multiples of 1/64, each |.| <= 1).
        self.x = (rng.integers(-8, 9, (max(self.T, 1), K)) / 8.0).astype(np.float32)
        self.w = (rng.integers(-8, 9, (self.G, N, K)) / 8.0).astype(np.float32)
        self.dev_x = rt.DeviceBuffer.from_numpy(bf16_bits(self.x))
        self.dev_w = rt.DeviceBuffer.from_numpy(bf16_bits(self.w))
        self.dev_off = rt.DeviceBuffer.from_numpy(self.offsets)
        self.dev_y = rt.DeviceBuffer.empty((self.T + self.PAD_ROWS, N), np.uint16)
        self.maps = rt.DeviceBuffer.empty((grid * MAP_SLOTS * SLOT_BYTES,), np.uint8)
        self.partials = rt.DeviceBuffer.zeros((partials_bytes(grid),), np.uint8)
        # the work counters: zero once; every launch that runs to its end leaves them zero
        # (after a launch that did not, such as a bounded wait's trap, zero them again)
        self.sched = rt.DeviceBuffer.from_numpy(np.zeros(2, np.uint32))
        self.tmpl_x, self.tmpl_w = templates(self.dev_x, self.T, self.dev_w, N, K)
        self.map_y = output_map(self.dev_y, self.T, N, self.tmpl_x)

    def args(self) -> tuple[Any, ...]:
        return (self.tmpl_x, self.tmpl_w, self.map_y, self.dev_x, self.dev_w, self.dev_y,
                self.dev_off, self.maps, self.sched, self.partials, self.G, self.N, self.K)

    def launch(self, fn: Function) -> None:
        fn.launch(grid=self.grid, block=THREADS, args=self.args(), shared_mem=SHARED_BYTES)

    def expected(self) -> np.ndarray:
        """Y after a correct run: every expert's X_g @ W_g^T in bf16, poison after."""
        want = np.full((self.T + self.PAD_ROWS, self.N), POISON * 0x0101, np.uint16)
        for g in range(self.G):
            lo, hi = int(self.offsets[g]), int(self.offsets[g + 1])
            if hi > lo:
                want[lo:hi] = f32_to_bf16_bits(
                    (self.x[lo:hi] @ self.w[g].T).astype(np.float32))
        return want


def compare(report: Report, prob: MoeProblem, got: np.ndarray, what: str) -> bool:
    """Per expert: which experts differ, and for the first few which rows/columns."""
    want = prob.expected()
    bad = []
    for g in range(prob.G):
        lo, hi = int(prob.offsets[g]), int(prob.offsets[g + 1])
        diff = np.argwhere(got[lo:hi] != want[lo:hi])
        if len(diff):
            rows = np.unique(diff[:, 0])
            cols = np.unique(diff[:, 1])
            bad.append(f"expert {g} (M_g={hi - lo}, rows {lo}..{hi - 1}): {len(diff)} values "
                       f"in {len(rows)} rows (first local rows {rows[:6].tolist()}), columns "
                       f"{cols.min()}..{cols.max()}")
    pad = got[prob.T:]
    if not np.array_equal(pad, want[prob.T:]):
        bad.append(f"the {prob.PAD_ROWS} rows after the last expert were written")
    sizes = prob.sizes
    return report.check(f"{what}: every expert's rows equal numpy, nothing else written",
                        not bad, f"G={prob.G}, M_g {sizes.min()}..{sizes.max()}, N={prob.N}, "
                        f"K={prob.K}" if not bad else "; ".join(bad[:4]))


def sm_count() -> int:
    from ptxdsl.runtime import device_info
    return device_info().sm_count


def persistent_grid(fn: Function) -> int:
    """The persistent grid of the loaded `moe_gemm` (or `moe_encode_only`): as many clusters
    as fit on the GPU at once (cuOccupancyMaxActiveClusters; one CTA per SM, and a cluster's
    CTAs on one GPC), in CTAs. A cluster that did not fit would start its first item only
    when another finished the queue, at the very end."""
    clusters = fn.max_active_clusters(THREADS, shared_mem=SHARED_BYTES)
    return CLUSTER * (clusters if clusters else sm_count() // CLUSTER)


def run_case(sizes: Sequence[int] | np.ndarray, N: int, K: int, *, grid: int | None = None,
             seed: int = 0, report: Report | None = None,
             module: LoadedModule | None = None) -> Report:
    report = report or Report("grouped_gemm_moe")
    mod = module or build_module().load()
    prob = MoeProblem(sizes, N, K, grid or persistent_grid(mod["moe_gemm"]), seed)
    prob.dev_y.memset(POISON)
    prob.maps.memset(POISON)
    prob.launch(mod["moe_gemm"])
    sync()
    compare(report, prob, prob.dev_y.to_numpy(), f"G={prob.G} N={N} K={K} grid={prob.grid}")
    return report


def run() -> Report:
    """A short run (the demo's): ragged experts with an empty one, tails in M, N and K."""
    report = Report("grouped_gemm_moe")
    mod = build_module().load()
    report.note(f"tiles {BM}x{BN}x{BK}, {STAGES} stages, maps encoded on the device")
    run_case(expert_sizes(6, 1000, seed=1, zeros=1), 520, 200, report=report, module=mod)
    run_case([0, 0, 300, 0], 256, 40, grid=4, report=report, module=mod)
    return report


def main(argv: list[str] | None = None) -> int:
    return sample_main(argv, __doc__, build_module, run)


if __name__ == "__main__":
    raise SystemExit(main())
