"""A bf16 GEMM on the Blackwell tensor cores (sm_100a) in ptxdsl builders: C = A @ B^T.

A is M x K and B is N x K, both row-major (K-major, "TN"); C is M x N bf16, accumulated in
f32 in tensor memory (TMEM). Two kernels:

- `gemm_blackwell_cta1`: one CTA per 128 x 256 tile of C, every tcgen05 op `.cta_group::1`.
- `gemm_blackwell_pair`: a cluster of 2 CTAs per 256 x 256 tile, every tcgen05 op
  `.cta_group::2`: the pair's MMA is M = 256, issued by the even CTA (rank 0) alone, reading
  A's 128 rows and B's 128 rows that each CTA loaded into its own shared memory and writing
  each CTA's 128 rows of the accumulator into that CTA's TMEM.

The CTA (192 threads, six warps, one tile each; not persistent):

- Warp 0 allocates the accumulator's TMEM columns (`tcgen05.alloc`: 256 f32 columns, one
  per column of the tile; lane i of TMEM is row i of the CTA's 128 rows), gives the
  allocation permit back at once (`tcgen05.relinquish_alloc_permit`: this CTA allocates
  nothing more) and, at the end, frees them (`tcgen05.dealloc`). The address it wrote to
  shared memory is read by every thread after `tcgen05.fence::before_thread_sync`, the CTA
  (pair: cluster) barrier and `tcgen05.fence::after_thread_sync`.
- Warp 4, one thread, is the producer: per 64-wide k-block it waits for a stage of the
  `MbarrierRing` to be empty and loads A's 128 x 64 tile and B's tile (256 x 64; pair: its
  128 x 64 half) with TMA, 128B-swizzled, onto the stage's full barrier. In the pair both
  CTAs' loads complete on the even CTA's full barrier (`.cta_group::2` loads, the barrier
  address from `mapa`), whose one arrival expects the bytes of both.
- Warp 5, one thread (pair: of the even CTA only), is the MMA issuer: per k-block it waits
  for the full barrier, issues four `tcgen05.mma.kind::f16` (K = 16 each; the descriptors'
  start address advanced 32 bytes per step inside the 128-byte swizzle atom; the first of
  the tile with enable-input-d false, so the accumulator starts from zero) and
  `tcgen05.commit`s them to the stage's empty barrier, which frees the slot once those MMAs
  have read it (pair: `.multicast::cluster` to both CTAs' empty barriers, since each CTA's
  producer refills its own half). After the last k-block one more commit signals the
  accumulator barrier (pair: in both CTAs).
- Warps 0-3 are the epilogue: they wait for the accumulator barrier, then warp w reads TMEM
  lanes 32w..32w+31 (`tcgen05.ld.sync.aligned.32x32b.x32`: 32 columns of its row per
  thread), `tcgen05.wait::ld`, converts pairs to bf16 and stores them to C, predicated on
  the M and N edges (TMA zero-fills A and B past M, N and K, so K need only give 16-byte
  row pitches: a multiple of 8).

Descriptors (PTX ISA "Shared memory descriptor" and "Instruction descriptor", built with
`ptxdsl.instructions.tcgen05_desc`): the sm_100 shared-memory descriptor of a K-major
128B-swizzled tile has SBO = 1024 bytes (8 rows of 128 bytes), LBO unused (16), the fixed
0b001 at bits 46-48 and swizzle code 2 at bits 61-63; the kind::f16 instruction descriptor
says f32 D, bf16 A and B, both K-major, N >> 3 and M >> 4.

What is verified here and what is not: no Blackwell GPU was available when this was
written. Verified without one: the kernels build, the hazard checker finds nothing, ptxas
(through nvJitLink) assembles them for sm_100a, their PTX is pinned by goldens, the
descriptors' values equal the ones derived by hand from the PTX ISA's tables (and CUTLASS's
`UMMA::InstrDescriptor` bit fields), and the epilogue's (lane, column) reads cover the
accumulator once, each element stored where it belongs, by `tcgen05_tmem`'s models of the
ISA's data-path layout and `.32x32b` fragment (tests/test_gemm_blackwell.py). Not verified:
a run (results, timing, the pair's cross-CTA barrier traffic, the hardware's reading of the
descriptors). On a GPU that is not compute capability 10.0 the sample says why it did not
run and assembles the kernels instead; on a B200-class GPU it runs both kernels on shapes
with tails in every dimension and compares C bit for bit with numpy (integer inputs: exact
f32 sums, one bf16 rounding); `run(bounded=True)` makes a hung wait trap with a record of
its barrier.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

import numpy as np

from ptxdsl import Addr, Kernel, Module, Reg, Symbol, debug, ptx, t
from ptxdsl.instructions.tcgen05_desc import InstrDesc, smem_descriptor
from ptxdsl.instructions.tcgen05_tmem import AccumulatorLayout
from ptxdsl.instructions.wgmma_desc import SmemLayout
from ptxdsl.pipeline import MbarrierRing, cluster_sync
from ptxdsl.sample_runner import POISON, Report, sample_main, sibling_sample, sync

if TYPE_CHECKING:   # the runtime is imported when a GPU run needs it
    from ptxdsl.runtime import LoadedModule, TensorMap

BM = 128            # rows of C per CTA: the 128 TMEM lanes
BN = 256            # columns of the tile: 256 f32 TMEM columns
BK = 64             # k-block: 64 bf16 = 128 bytes per row, one 128B swizzle atom
UMMA_K = 16         # K of one tcgen05.mma.kind::f16
THREADS = 192       # warps 0-3: epilogue (warp 0 allocates TMEM); warp 4: TMA; warp 5: MMA
PRODUCER, ISSUER = 128, 160     # the threads (lane 0 of warps 4 and 5)
LD_COLS = 32        # TMEM columns per tcgen05.ld.32x32b.x32
TARGET = "sm_100a"


class Config:
    """One kernel's build-time constants: `pair` (a cluster of 2 CTAs, `.cta_group::2`, an
    M = 256 MMA) or not, and the ring's stages."""

    def __init__(self, pair: bool, stages: int, name: str) -> None:
        self.pair, self.stages, self.name = pair, stages, name
        self.ctas = 2 if pair else 1
        self.cta_group = ptx.cta_group_2 if pair else ptx.cta_group_1
        self.mma_m = BM * self.ctas          # the MMA's M: the rows of a cluster tile
        self.b_rows = BN // self.ctas        # the rows of B one CTA loads
        self.layout_a = SmemLayout(t.bf16, BM, BK, "K", "128B")
        self.layout_b = SmemLayout(t.bf16, self.b_rows, BK, "K", "128B")
        self.a_bytes, self.b_bytes = self.layout_a.nbytes, self.layout_b.nbytes
        self.stage_bytes = self.a_bytes + self.b_bytes
        # the (even CTA's) full barrier's one arrival expects every CTA's loads of the stage
        self.tx_bytes = self.stage_bytes * self.ctas
        self.ring_off = stages * self.stage_bytes
        self.acc_off = self.ring_off + 16 * stages     # the accumulator-ready barrier
        self.tmem_off = self.acc_off + 8               # where tcgen05.alloc writes the address
        self.smem_bytes = self.tmem_off + 8
        # lane i = row i of the CTA's rows, column j = column j: BN f32 columns (layout D of
        # the ISA's data-path layouts for M = 128 with cta_group::1 and 256 with ::2)
        self.acc = AccumulatorLayout(self.mma_m, BN, self.ctas)
        self.tmem_cols = self.acc.alloc_columns


CTA1 = Config(pair=False, stages=4, name="gemm_blackwell_cta1")
PAIR = Config(pair=True, stages=6, name="gemm_blackwell_pair")
CONFIGS = {"cta1": CTA1, "pair": PAIR}


# -- descriptors (PTX ISA: "Instruction descriptor", "Shared memory descriptor") -------------
def instr_desc(cfg: Config) -> InstrDesc:
    """kind::f16's instruction descriptor: f32 D, bf16 A and B, both K-major (no transpose),
    the MMA's M (the pair's 256 rows with cta_group::2) x BN. Given to tcgen05_mma as the
    object, which checks that its kind and CTA group are the instruction's."""
    return InstrDesc("f16", cfg.mma_m, BN, dtype="f32", atype="bf16", btype="bf16",
                     cta_group=cfg.ctas)


def build_gemm(cfg: Config, bounded: bool = False) -> Kernel:
    """The kernel of `cfg` (see the module docstring for its roles); `bounded`: every
    mbarrier wait traps after 2 s with an error record naming its barrier and parity
    (`ptxdsl.debug`), for a first run on a new GPU."""
    cg = cfg.cta_group
    k = Kernel(cfg.name, reqntid=THREADS, minnctapersm=1,
               reqnctapercluster=(2, 1, 1) if cfg.pair else None)
    if bounded:
        debug.bounded_waits(k, timeout_ns=2_000_000_000)
    map_a = k.param_tensormap("map_a", box=cfg.layout_a)
    map_b = k.param_tensormap("map_b", box=cfg.layout_b)
    c_p = k.param_ptr("c")
    m_p, n_p, k_p = (k.param(t.u32, n) for n in ("m", "n", "k"))
    smem = k.extern_shared("smem", align=cfg.layout_a.alignment)
    ring = MbarrierRing(k, cfg.stages, storage=Addr(smem, cfg.ring_off))
    acc_bar, tmem_slot = Addr(smem, cfg.acc_off), Addr(smem, cfg.tmem_off)
    tid = k.tid.x
    warp = k.shr(tid, 5)
    with k.if_(tid == 0):
        ptx.mbarrier_init(k, acc_bar, 1)     # one arrival: the last commit
    ring.init(sync=False)                    # thread 0; its fence.mbarrier_init covers acc_bar
    with k.if_(warp == 0):
        ptx.tcgen05_alloc(k, cg, tmem_slot, cfg.tmem_cols)
        ptx.tcgen05_relinquish_alloc_permit(k, cg)
        ptx.tcgen05_fence_before_thread_sync(k)
    # every barrier initialised and the TMEM address written, in both CTAs of a pair, before
    # any load, commit or MMA reaches them
    _cta_sync(k, cfg)
    ptx.tcgen05_fence_after_thread_sync(k)
    taddr = k.ld(tmem_slot, type=t.u32)

    M, N, K = (k.ld_param(p) for p in (m_p, n_p, k_p))
    rank = k.read_special("cluster_ctarank") if cfg.pair else None
    tile = k.read_special("clusterid.x" if cfg.pair else "ctaid.x")
    tiles_m = k.div(k.add(M, cfg.mma_m - 1), cfg.mma_m)
    mb = k.rem(tile, tiles_m)
    m0 = k.mul(mb, cfg.mma_m)                         # the cluster tile's first row
    n0 = k.mul(k.div(tile, tiles_m), BN)
    if rank is not None:                              # this CTA's rows of A, C and of B
        m0 = k.mad(rank, BM, m0)
        b0 = k.mad(rank, cfg.b_rows, n0)
    else:
        b0 = n0
    kblocks = k.div(k.add(K, BK - 1), BK)

    with k.if_(tid == PRODUCER):
        _producer(k, cfg, ring, smem, map_a, map_b, m0, b0, kblocks, rank)
    with k.if_(tid == ISSUER):
        if rank is None:
            _issuer(k, cfg, ring, smem, taddr, acc_bar, kblocks)
        else:
            with k.if_(rank == 0):           # the pair's MMA: the even CTA issues it
                _issuer(k, cfg, ring, smem, taddr, acc_bar, kblocks)
    with k.if_(tid < 128):
        _epilogue(k, cfg, taddr, acc_bar, k.ld_param(c_p), m0, n0, M, N)

    # every TMEM read done (and, in a pair, the peer's too: the MMA wrote both CTAs' TMEM)
    # before warp 0 frees the columns; no CTA of a pair leaves while its peer may still
    # signal its barriers
    ptx.tcgen05_fence_before_thread_sync(k)
    _cta_sync(k, cfg)
    with k.if_(warp == 0):
        ptx.tcgen05_fence_after_thread_sync(k)
        ptx.tcgen05_dealloc(k, cg, taddr, cfg.tmem_cols)
    k.ret()
    return k


def _cta_sync(k: Kernel, cfg: Config) -> None:
    if cfg.pair:
        cluster_sync(k)
    else:
        k.bar_sync(0)


def _producer(k: Kernel, cfg: Config, ring: MbarrierRing, smem: Symbol, map_a: Symbol,
              map_b: Symbol, m0: Reg, b0: Reg, kblocks: Reg, rank: Reg | None) -> None:
    """One thread: per k-block, A's 128 x 64 tile and this CTA's B rows into the stage."""
    tmap_a, tmap_b = k.tensormap_addr(map_a), k.tensormap_addr(map_b)
    p = ring.producer()
    with k.for_range(0, kblocks) as kb:
        kc = k.mul(kb, BK)
        p.wait_empty()
        slot = p.slot(smem, cfg.stage_bytes)
        if rank is None:
            p.arrive_expect_tx(cfg.tx_bytes)
            full = p.full_barrier()
            ptx.cp_async_bulk_tensor(k, "shared::cluster", "global", slot, tmap_a, (kc, m0),
                                     full)
            ptx.cp_async_bulk_tensor(k, "shared::cluster", "global", k.add(slot, cfg.a_bytes),
                                     tmap_b, (kc, b0), full)
        else:
            with k.if_(rank == 0):
                p.arrive_expect_tx(cfg.tx_bytes)     # the bytes of both CTAs' loads
            # both CTAs' loads complete on the even CTA's full barrier, where its MMA waits
            full = ptx.mapa(k, "shared::cluster", p.full_barrier(), 0)
            ptx.cp_async_bulk_tensor(k, "shared::cluster", "global", cfg.cta_group, slot,
                                     tmap_a, (kc, m0), full)
            ptx.cp_async_bulk_tensor(k, "shared::cluster", "global", cfg.cta_group,
                                     k.add(slot, cfg.a_bytes), tmap_b, (kc, b0), full)
        p.advance()


def _issuer(k: Kernel, cfg: Config, ring: MbarrierRing, smem: Symbol, taddr: Reg,
            acc_bar: Addr, kblocks: Reg) -> None:
    """One thread: per k-block, wait for the stage, four MMAs into TMEM, commit them to the
    stage's empty barrier; at the end, commit to the accumulator barrier."""
    cg = cfg.cta_group
    idesc = instr_desc(cfg)
    c = ring.consumer()
    with k.for_range(0, kblocks) as kb:
        c.wait_full()
        ptx.tcgen05_fence_after_thread_sync(k)      # the MMAs after the wait that saw the data
        slot = c.slot(smem, cfg.stage_bytes)
        da = smem_descriptor(k, cfg.layout_a, slot)
        db = smem_descriptor(k, cfg.layout_b, k.add(slot, cfg.a_bytes))
        first = k.setp("ne", kb, 0)                 # false once: D = A B on the first k16
        for j, kk in enumerate(range(0, BK, UMMA_K)):
            # +32 bytes per K = 16 inside the 128-byte atom (A's and B's rows alike), in the
            # descriptor's 16-byte units
            step = cfg.layout_a.k_offset(kk) >> 4
            ptx.tcgen05_mma(k, ptx.kind_f16, cg, taddr, _advance(k, da, step),
                            _advance(k, db, step), idesc, first if j == 0 else True)
        _commit(k, cfg, c.empty_barrier())          # the slot is free once these MMAs read it
        c.advance()
    _commit(k, cfg, acc_bar)                        # the accumulator is complete


def _advance(k: Kernel, desc: Reg, step: int) -> Reg:
    return k.add(desc, step) if step else desc


def _commit(k: Kernel, cfg: Config, bar: Reg | Addr) -> None:
    """`tcgen05.commit` of this thread's MMAs so far to `bar`: an arrival once they are done
    (pair: on the barrier at the same offset in both CTAs)."""
    if cfg.pair:
        ptx.tcgen05_commit_multicast(k, cfg.cta_group, bar, 0b11)
    else:
        ptx.tcgen05_commit(k, cfg.cta_group, bar)


def _epilogue(k: Kernel, cfg: Config, taddr: Reg, acc_bar: Addr, c_base: Reg, m0: Reg,
              n0: Reg, M: Reg, N: Reg) -> None:
    """Warps 0-3: thread `tid` holds row m0 + tid (TMEM lane tid: warp w may read lanes
    32w..32w+31 only); 32 columns at a time into registers, to bf16 pairs, to C."""
    ptx.mbarrier_wait(k, acc_bar, 0)                 # the tile's one accumulator phase
    ptx.tcgen05_fence_after_thread_sync(k)
    tid = k.tid.x
    lanes = k.shl(k.and_(tid, ~31 & 0xFFFFFFFF), 16)   # the warp's first lane, bits 31-16
    row = k.add(m0, tid)
    in_m = row < M
    c_glob = k.cvta(c_base, "global", to=True)
    row_ptr = k.add(c_glob, k.mul(k.mad(row, N, n0), 2, type=t.u32, mode="wide"))
    # tcgen05.ld is .sync.aligned: the whole warp loads, rows past M included; only the
    # stores are predicated
    with k.for_range(0, BN, LD_COLS) as col:
        vals = ptx.tcgen05_ld_32x32b(k, LD_COLS, k.add(taddr, k.add(lanes, col)), type=t.f32)
        ptx.tcgen05_wait_ld(k)
        left = k.sub(k.sub(N, n0), col, type=t.s32)     # this row's columns from col on
        ptr = k.add(row_ptr, k.mul(col, 2, type=t.u32, mode="wide"))
        for j in range(0, LD_COLS, 2):
            pair = k.cvt_packed("bf16x2", vals[j + 1], vals[j])
            # N is even: column j inside means j + 1 is too
            ok = k.setp("gt", left, j, type=t.s32, bool_op="and", c=in_m)
            with k.guard(ok):
                k.st(Addr(ptr, 2 * j), pair, space="global")


def build_module(names: Iterable[str] = tuple(CONFIGS), bounded: bool = False) -> Module:
    """The kernels of `names` ("cta1", "pair"); `bounded`: the debug build (`build_gemm`)."""
    kernels = [build_gemm(CONFIGS[n], bounded) for n in names]
    if bounded:
        return debug.module(kernels, name="gemm_blackwell", target=TARGET)
    return Module(kernels, name="gemm_blackwell", target=TARGET)


# -- host side ---------------------------------------------------------------------------------
def check_shape(m: int, n: int, kdim: int) -> None:
    """The shapes the kernels take: TMA's 16-byte row pitches (K a multiple of 8), bf16 pairs
    stored whole (N even)."""
    if min(m, n, kdim) < 1 or kdim % 8 or n % 2:
        raise ValueError(f"gemm_blackwell: M, N, K >= 1, K a multiple of 8, N even; got "
                         f"M={m} N={n} K={kdim}")


def tensor_maps(cfg: Config, a: object, b: object, m: int, n: int,
                kdim: int) -> tuple[TensorMap, TensorMap]:
    """The tensor maps of A (M x K) and B (N x K) for device buffers `a`, `b`: one CTA's
    box of each, 128B-swizzled."""
    from ptxdsl import runtime as rt
    ma = rt.TensorMap.tiled(a, (m, kdim), "BFLOAT16", cfg.layout_a.tma_box[::-1],
                            swizzle="128B")
    mb = rt.TensorMap.tiled(b, (n, kdim), "BFLOAT16", cfg.layout_b.tma_box[::-1],
                            swizzle="128B")
    cfg.layout_a.check_tensormap(ma)
    cfg.layout_b.check_tensormap(mb)
    return ma, mb


def grid_for(cfg: Config, m: int, n: int) -> int:
    """CTAs of a launch: one (pair: two) per tile."""
    return cfg.ctas * -(-m // cfg.mma_m) * -(-n // BN)


def launch(module: LoadedModule, cfg: Config, a: object, b: object, c: object, m: int, n: int,
           kdim: int, *, stream: object = None) -> None:
    """C = A @ B^T (bf16 device buffers) with the kernel of `cfg` from the loaded `module`."""
    check_shape(m, n, kdim)
    ma, mb = tensor_maps(cfg, a, b, m, n, kdim)
    module[cfg.name].launch(grid_for(cfg, m, n), THREADS, (ma, mb, c, m, n, kdim),
                            shared_mem=cfg.smem_bytes, stream=stream,
                            cluster=(2, 1, 1) if cfg.pair else None)


def blackwell_skip_reason() -> str | None:
    """None when device 0 runs sm_100a code (compute capability 10.0), else why not."""
    from ptxdsl.runtime import gpu_skip_reason
    from ptxdsl.runtime.device import current_compute_capability
    cc = current_compute_capability()
    if cc is None:      # the runtime's words (no driver, no device): said once in the demo
        return gpu_skip_reason() or "no usable CUDA device"
    if cc != (10, 0):
        return (f"device 0 is compute capability {cc[0]}.{cc[1]}; sm_100a code runs on "
                "compute capability 10.0 (B200, GB200) only")
    return None


SHAPES = ((300, 520, 208), (129, 258, 48), (512, 256, 1024))   # tails in M, N, K; K < a stage


def run(shapes: Iterable[tuple[int, int, int]] = SHAPES,
        names: Iterable[str] = tuple(CONFIGS), bounded: bool = False) -> Report:
    """Each kernel of `names` on each (M, N, K) of `shapes`, compared with numpy bit for bit;
    on a GPU that cannot run sm_100a, why not, and the module assembled instead. `bounded`:
    the debug build (a hung wait raises `WaitTimeoutError` naming its barrier)."""
    report = Report("gemm_blackwell")
    names = tuple(names)
    reason = blackwell_skip_reason()
    if reason is not None:
        report.note(f"needs a Blackwell GPU ({reason}): not run")
        cubin = build_module(names, bounded).assemble(TARGET)
        report.check("the kernels built, checked clean and assembled for sm_100a",
                     len(cubin) > 0, f"{len(cubin)} bytes of cubin")
        return report
    from ptxdsl import runtime as rt
    gh = sibling_sample(__file__, "gemm_hopper")    # its integer inputs and bf16 rounding
    mod = build_module(names, bounded).load()
    recorder = debug.Recorder().attach(mod) if bounded else None
    for cfg in (CONFIGS[n] for n in names):
        report.note(f"{cfg.name}: {cfg.mma_m} x {BN} tiles, {cfg.stages} stages, "
                    f"{cfg.smem_bytes} bytes of dynamic shared memory")
        for m, n, kdim in shapes:
            a, b, want, _ = gh.reference_inputs("bf16", m, n, kdim)
            dev_a, dev_b = rt.DeviceBuffer.from_numpy(a), rt.DeviceBuffer.from_numpy(b)
            c = rt.DeviceBuffer.empty((m, n), np.uint16)
            c.memset(POISON)
            launch(mod, cfg, dev_a, dev_b, c, m, n, kdim)
            sync(recorder=recorder)
            report.check_equal(f"{cfg.name} M={m} N={n} K={kdim}", c.to_numpy(),
                               gh.bf16_round(want))
    return report


def main(argv: list[str] | None = None) -> int:
    return sample_main(argv, __doc__, build_module, run, skip_reason=blackwell_skip_reason,
                       needs="Blackwell GPU")


if __name__ == "__main__":
    raise SystemExit(main())
