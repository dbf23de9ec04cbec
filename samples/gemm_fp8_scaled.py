"""fp8 e4m3 GEMM with DeepSeek-style scales: Y = X W^T in bf16 (f32 accumulation), X and W
scaled by rows or by 128-wide blocks of K.

X is M x K and W is N x K, both row-major e4m3 (gemm_hopper's A and B); the scales are f32:

- Row-wise (`torch._scaled_mm`'s row-wise mode): scale_a (M, 1), one per row of X, and
  scale_b (1, N), one per row of W; Y[m, n] = scale_a[m] scale_b[n] sum_k X[m, k] W[n, k].
- Per 128-block (DeepSeek-V3's fp8 recipe): scale_a (M, KB) per row of X and 128-wide K
  block, scale_b (NB, KB) per 128 x 128 block of W, KB = ceil(K / 128), NB = ceil(N / 128);
  Y[m, n] = sum_kb scale_a[m, kb] scale_b[n / 128, kb] sum_{k in kb} X[m, k] W[n, k].

Both are samples/gemm_hopper.py's persistent warp-specialised kernel (producer warpgroup,
TMA ring, clusters, raster, TMA-store epilogue) with their own consumer main loop
(gemm_hopper's `Consumer` hook). One k-block of the ring is 128 bytes of K, so for e4m3 it is
exactly one scale block.

- Row-wise: gemm_hopper's main loop (one wgmma group in flight); each thread loads the
  scales of its two rows at the start of a tile and those of its columns just before the
  last wait (so the L2 reads overlap the last k-block's wgmmas), and scales the f32
  accumulator by both before rounding to bf16. Tiles as gemm_hopper's e4m3 kernels, chosen
  by M as there (128 x 256 in clusters of 2 along M; 128 x 128 for skinny M; 128 x 64 pairs
  along N for one tile row).
- Per 128-block: the scale changes every k-block, so each k-block's wgmmas go into a part
  accumulator started from zero (scale-d 0 on its first wgmma), two parts in turn: block
  kb's wgmmas are issued into one, `wgmma.wait_group 1` retires block kb - 1's (the other
  part), its stage is released, and that part is added into the main accumulator times
  scale_a[row, kb - 1] scale_b[n0 / 128, kb - 1] (one fma per value) while block kb's run.
  So each warpgroup always has a group queued on the tensor cores; retiring every block with
  `wait_group 0` instead drained them at every k-block (the two consumer warpgroups wait on
  the same stage, so they drain together): 1003 against 1077 TFLOP/s at 8192^3 on an H200.
  Three 64 x N f32 accumulators per thread bound the tile: N = 128 (192 registers of 232),
  and a tile's columns then lie in one block of W. One tiling at every M: 128 x 128, no
  cluster, 6 stages (`TILINGS`). The consumers read the scales from global memory (L2):
  three loads per thread and k-block, issued two k-blocks ahead of their use (one ahead
  left their latency exposed: 1077 -> 1168 TFLOP/s at 8192^3), so the producer's ring and
  its stage bytes stay gemm_hopper's. (DeepGEMM, the reference design for this scaling,
  TMA-loads the X scales with each stage instead, which needs them K-major, (KB, M); here
  they stay in the (M, KB) layout the formula above and `torch._scaled_mm`'s block-wise API
  are given.)

Rows past M and columns past N (tails, and a cluster's CTA past the edge) read the scales of
the last row or column: their results are clipped by the epilogue.

Host: `launch` (device pointers) and `scaled_mm` (torch tensors; the scales' shapes pick the
scaling, as `torch._scaled_mm`'s do). The run checks every kernel against numpy on tails in
M, N and K (inputs small integers and scales powers of two, so the f32 result is exact and
only the bf16 rounding remains: compared bit for bit).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import numpy as np

from ptxdsl import Addr, Kernel, Module, Reg, Symbol, debug, ptx, t
from ptxdsl.fragments import Fragment
from ptxdsl.pipeline import MbarrierRing
from ptxdsl.sample_runner import POISON, Report, sample_main, sibling_sample, sync

if TYPE_CHECKING:   # mypy reads the samples as the top-level modules they are as scripts
    import gemm_hopper as gh

    from ptxdsl.runtime import LoadedModule, TensorMap
else:               # the GEMM these kernels are: its producer, ring, tiles and epilogue
    gh = sibling_sample(__file__, "gemm_hopper")

BLOCK = 128                  # the scale blocks' extent along K (X and W) and along N (W)
SCALINGS = ("row", "block")
# Row-wise: gemm_hopper's three tilings, chosen by M as there (`variant_for`). Per 128-block:
# 128 x 128 tiles at every M (two part accumulators and the main one, 64 x N f32 each, must
# fit the consumers' 232 registers), gemm_hopper's skinny tiling: no cluster, 6 stages. On an
# H200 they beat clusters of 2 along M (1127 against 1015 TFLOP/s at 8192^3), 128 x 192 tiles
# with one part, and at M = 128 the one-row tiling (docs/wgmma.md has the figures).
TILINGS = {"row": ("default", "skinny", "row"), "block": ("default",)}
_SUFFIX = {"default": "", "skinny": "_n128", "row": "_row"}


def _variants(scaling: str) -> dict[str, gh.Config]:
    base = ({v: gh.VARIANTS[v]["e4m3"] for v in TILINGS[scaling]} if scaling == "row"
            else {"default": gh.SKINNY["e4m3"]})
    return {v: gh.Config("e4m3", c.bn, c.cluster, c.stages, c.along,
                         name=f"gemm_fp8_{scaling}wise{_SUFFIX[v]}") for v, c in base.items()}


VARIANTS = {s: _variants(s) for s in SCALINGS}         # scaling -> tiling -> Config


def _load_f32(k: Kernel, base: Reg, index: Reg, dst: Reg | None = None) -> Reg:
    """base[index] of an f32 array in global memory (read-only while the kernel runs)."""
    return k.ld(Addr(k.mad(index, 4, base, type=t.u32, mode="wide")), type=t.f32,
                space="global", nc=True, dst=dst)


class ScaledConsumer:
    """gemm_hopper's `Consumer` for `scaling` ("row" or "block"): the parameters scale_a and
    scale_b (global f32 pointers, after the GEMM's) and the main loop that applies them."""

    def __init__(self, scaling: str) -> None:
        if scaling not in SCALINGS:
            raise ValueError(f"ScaledConsumer: scaling must be one of {SCALINGS}, "
                             f"got {scaling!r}")
        self.scaling = scaling

    def declare(self, k: Kernel) -> None:
        self.sa_p, self.sb_p = k.param_ptr("scale_a"), k.param_ptr("scale_b")

    def run(self, k: Kernel, cfg: gh.Config, ring: MbarrierRing, smem: Symbol, kblocks: Reg,
            epi: gh.TileStore, tile_loop: gh.TileLoop, M: Reg, N: Reg) -> None:
        stages = gh.Stages(k, cfg, ring, smem, epi.cw)
        acc = k.fragment(t.f32, shape=(64, cfg.bn), zero=False)
        sa, sb = (k.cvta(k.ld_param(p), "global", to=True) for p in (self.sa_p, self.sb_p))
        row_in, col_in = acc.origin()             # the thread's first value in the 64 x bn
        row_in = k.mad(epi.cw, 64, row_in)        # ... and in the CTA's 128 x bn tile
        last_row = k.sub(M, 1)

        def rows(m0: Reg) -> tuple[Reg, Reg]:
            """The thread's two rows of the tile (+0 and +8), those past M as M - 1."""
            r = k.add(m0, row_in)
            return k.min(r, last_row), k.min(k.add(r, 8), last_row)

        if self.scaling == "row":
            _rowwise(k, cfg, stages, acc, epi, tile_loop, kblocks, sa, sb, rows, col_in, N)
        else:
            _blockwise(k, cfg, stages, acc, epi, tile_loop, kblocks, sa, sb, rows, N)
        epi.finish()


def _rowwise(k: Kernel, cfg: gh.Config, stages: gh.Stages, acc: Fragment, epi: gh.TileStore,
             tile_loop: gh.TileLoop, kblocks: Reg, sa: Reg, sb: Reg, rows: Any, col_in: Reg,
             N: Reg) -> None:
    last_pair = k.sub(N, 2)      # N is even: a column pair past N reads the last pair

    def tile(m0: Reg, n0: Reg, span: gh.KSpan) -> None:     # (whole: no split-K)
        r0, r1 = rows(m0)
        s_rows = (_load_f32(k, sa, r0), _load_f32(k, sa, r1))   # used after the main loop
        stages.mma(acc, first=True)
        with k.for_range(1, kblocks):
            stages.mma(acc, first=False)
            ptx.wgmma_wait_group(k, 1)            # the previous stage is read: free it
            stages.release()
        # the columns' scales, loaded while the last stage's wgmmas run
        first = k.add(n0, col_in)
        s_cols: dict[int, Reg] = {}
        for j in range(0, cfg.bn, 8):
            pair = k.min(k.add(first, j), last_pair)
            s_cols[j] = _load_f32(k, sb, pair)
            s_cols[j + 1] = _load_f32(k, sb, k.add(pair, 1))
        ptx.wgmma_wait_group(k, 0)
        stages.release()
        for i, r in enumerate(acc):
            dr, dc = acc.offsets(i)
            k.mul(r, s_cols[dc], type=t.f32, dst=r)
            k.mul(r, s_rows[dr // 8], type=t.f32, dst=r)
        epi.store(acc.to_packed(t.bf16), m0, n0)

    tile_loop(tile)


def _blockwise(k: Kernel, cfg: gh.Config, stages: gh.Stages, acc: Fragment, epi: gh.TileStore,
               tile_loop: gh.TileLoop, kblocks: Reg, sa: Reg, sb: Reg, rows: Any,
               N: Reg) -> None:
    if BLOCK % cfg.bn or cfg.bk != BLOCK:
        raise ValueError(f"{cfg.name}: per-128-block scales need a tile's columns inside one "
                         f"block of W (bn dividing {BLOCK}) and {BLOCK}-wide k-blocks; got "
                         f"bn={cfg.bn}, bk={cfg.bk}")
    # one k-block's products, two of them: block kb's wgmmas run into one while block
    # kb - 1's, retired by `wait_group 1`, is scaled into the accumulator from the other
    parts = [k.fragment(t.f32, shape=(64, cfg.bn), zero=False) for _ in range(2)]
    last_nb = k.sub(k.div(k.add(N, BLOCK - 1), BLOCK), 1)
    last_kb = k.sub(kblocks, 1)

    def tile(m0: Reg, n0: Reg, span: gh.KSpan) -> None:     # (whole: no split-K)
        r0, r1 = rows(m0)
        # the scale rows this thread reads along K: X's two rows and the tile's block of W
        bases = (k.mul(r0, kblocks), k.mul(r1, kblocks),
                 k.mul(k.min(k.div(n0, BLOCK), last_nb), kblocks))
        held = [[k.reg(t.f32) for _ in range(3)] for _ in range(2)]   # each part's scales

        def load(x: int, kb: Reg | int) -> None:
            """k-block kb's three scales into held[x] (kb past the last: the last's)."""
            kb = k.min(kb, last_kb)
            for arr, b, d in zip((sa, sa, sb), bases, held[x], strict=True):
                _load_f32(k, arr, k.add(b, kb), dst=d)

        def fold(x: int, kb_next: Reg | None = None) -> None:
            """parts[x], retired, into the accumulator times its scales; then, with
            `kb_next`, that k-block's scales loaded into held[x] (two k-blocks ahead of
            their use: one ahead left their L2 latency exposed, 8-9% at 8192^3)."""
            sc = held[x]
            f = (k.mul(sc[0], sc[2], type=t.f32), k.mul(sc[1], sc[2], type=t.f32))
            if kb_next is not None:
                load(x, kb_next)
            for i, r in enumerate(parts[x]):
                k.mad(r, f[acc.offsets(i)[0] // 8], acc[i], type=t.f32, dst=acc[i])

        def step(kb: Reg, x: int) -> None:
            """k-block kb into parts[x]; block kb - 1's part, retired, into the
            accumulator and its stage released."""
            stages.mma(parts[x], first=True)
            ptx.wgmma_wait_group(k, 1)
            stages.release()
            fold(1 - x, k.add(kb, 1))

        def last(x: int) -> None:
            ptx.wgmma_wait_group(k, 0)
            stages.release()
            fold(x)

        acc.zero()
        load(0, 0)
        load(1, 1)
        stages.mma(parts[0], first=True)
        with k.for_range(1, k.sub(kblocks, 1), 2) as kb:   # k-blocks 2j + 1 and 2j + 2
            step(kb, 1)
            step(k.add(kb, 1), 0)
        even = k.and_(kblocks, 1) == 0                      # then the last k-block is odd
        with k.if_(even):
            step(k.sub(kblocks, 1), 1)
            last(1)
        with k.else_():
            last(0)
        epi.store(acc.to_packed(t.bf16), m0, n0)

    tile_loop(tile)


def build_kernel(scaling: str, tiling: str = "default", bounded: bool = False) -> Kernel:
    """The kernel of `scaling` ("row", "block") on `tiling` (one of `TILINGS[scaling]`);
    `bounded`: every mbarrier wait traps after 2 s with an error record (`ptxdsl.debug`)."""
    if scaling not in SCALINGS or tiling not in TILINGS[scaling]:
        raise ValueError(f"gemm_fp8_scaled.build_kernel: (scaling, tiling) must be one of "
                         f"{[(s, v) for s in SCALINGS for v in TILINGS[s]]}, got "
                         f"{(scaling, tiling)!r}")
    return gh.build_gemm(VARIANTS[scaling][tiling], bounded, consumer=ScaledConsumer(scaling))


def build_module(bounded: bool = False) -> Module:
    """Each scaling on each of its tilings (`TILINGS`)."""
    kernels = [build_kernel(s, v, bounded) for s in SCALINGS for v in TILINGS[s]]
    if bounded:
        return debug.module(kernels, name="gemm_fp8_scaled", target="sm_90a")
    return Module(kernels, name="gemm_fp8_scaled", target="sm_90a")


# -- host side ---------------------------------------------------------------------------------
def variant_for(scaling: str, m: int) -> str:
    """The tiling for M rows: per 128-block the one there is, row-wise gemm_hopper's
    thresholds (`config_for`)."""
    if scaling == "block":
        return "default"
    if gh.ROW_M < m <= gh.BM:
        return "row"
    return "skinny" if m <= gh.SKINNY_M else "default"


def config_for(scaling: str, m: int) -> gh.Config:
    return VARIANTS[scaling][variant_for(scaling, m)]


def scale_shapes(scaling: str, m: int, n: int, kdim: int) -> tuple[tuple[int, int],
                                                                   tuple[int, int]]:
    """The shapes of scale_a and scale_b for `scaling` (module doc)."""
    if scaling == "row":
        return (m, 1), (1, n)
    kb = -(-kdim // BLOCK)
    return (m, kb), (-(-n // BLOCK), kb)


def check_shape(m: int, n: int, kdim: int) -> None:
    """The shapes the kernels take (gemm_hopper's e4m3 rules: TMA's 16-byte pitches, paired
    bf16 stores)."""
    if min(m, n, kdim) < 1 or kdim % 16 or n % 2:
        raise ValueError(f"gemm_fp8_scaled: M, N, K >= 1, K a multiple of 16, N even; got "
                         f"M={m} N={n} K={kdim}")


def launch(module: LoadedModule, scaling: str, a: object, b: object, c: object,
           scale_a: object, scale_b: object, m: int, n: int, kdim: int, *, sms: int,
           stream: object = None,
           maps: tuple[TensorMap, TensorMap, TensorMap | None] | None = None,
           cfg: gh.Config | None = None) -> None:
    """Y = (X W^T) scaled, on device pointers: `a` X (M x K e4m3), `b` W (N x K e4m3), `c`
    Y (M x N bf16), the f32 scales in `scale_shapes(scaling, ...)`'s shapes (row-major),
    with the kernel of `cfg` (default `config_for(scaling, m)`); `maps`: gemm_hopper's
    `tensor_maps` (for the same tiling) + `output_map`, to skip encoding them per call."""
    if scaling not in SCALINGS:
        raise ValueError(f"gemm_fp8_scaled: scaling must be one of {SCALINGS}, got "
                         f"{scaling!r}")
    check_shape(m, n, kdim)
    cfg = cfg or config_for(scaling, m)
    ma, mb, mc = maps or (*gh.tensor_maps("e4m3", a, b, m, n, kdim, cfg),
                          gh.output_map(c, m, n))
    args = (ma, mb, mc or ma, c, m, n, kdim, int(mc is not None), scale_a, scale_b)
    module[cfg.name].launch(gh.grid_for(m, n, sms, cfg), gh.THREADS, args,
                            shared_mem=cfg.smem_bytes, stream=stream,
                            cluster=(cfg.cluster, 1, 1) if cfg.cluster > 1 else None)


def scaled_mm(module: LoadedModule, a: Any, b: Any, scale_a: Any, scale_b: Any, *,
              out: Any = None, sms: int | None = None) -> Any:
    """torch entry point, as `torch._scaled_mm(a, b.t(), scale_a, scale_b,
    out_dtype=torch.bfloat16)`: `a` X (M x K) and `b` W (N x K), contiguous
    `torch.float8_e4m3fn` on one CUDA device; the scales contiguous float32, row-wise
    ((M, 1), (1, N)) or per 128-block ((M, KB), (NB, KB)), which their shapes pick; `out`
    an M x N contiguous bfloat16 tensor to write (default: a new one). Runs on the current
    stream; returns Y."""
    import torch

    from ptxdsl import runtime as rt
    m, n, kdim, scaling = check_tensors(a, b, scale_a, scale_b, out)
    if a.device.type != "cuda":
        raise ValueError(f"gemm_fp8_scaled: the tensors must be on a CUDA device, got "
                         f"{a.device}")
    if out is None:
        out = torch.empty((m, n), dtype=torch.bfloat16, device=a.device)
    launch(module, scaling, a.data_ptr(), b.data_ptr(), out.data_ptr(), scale_a.data_ptr(),
           scale_b.data_ptr(), m, n, kdim, sms=sms or rt.device_info(a.device.index).sm_count,
           stream=torch.cuda.current_stream(a.device).cuda_stream)
    return out


def check_tensors(a: Any, b: Any, scale_a: Any, scale_b: Any,
                  out: Any = None) -> tuple[int, int, int, str]:
    """(M, N, K, scaling) of `scaled_mm`'s arguments, or a ValueError naming the argument,
    what it must be and what it is."""
    import torch

    def fail(what: str, must: str, got: object) -> None:
        raise ValueError(f"gemm_fp8_scaled: {what} must be {must}, got {got}")

    named = {"a": a, "b": b, "scale_a": scale_a, "scale_b": scale_b}
    if out is not None:
        named["out"] = out
    want = {"a": torch.float8_e4m3fn, "b": torch.float8_e4m3fn, "scale_a": torch.float32,
            "scale_b": torch.float32, "out": torch.bfloat16}
    for name, x in named.items():
        if not isinstance(x, torch.Tensor):
            fail(name, "a torch.Tensor", type(x).__name__)
        if x.dtype != want[name]:
            fail(name, f"a {want[name]} tensor", x.dtype)
        if x.dim() != 2:
            fail(name, "2-D", f"shape {tuple(x.shape)}")
        if not x.is_contiguous():
            fail(name, "contiguous (row-major)", f"strides {x.stride()}")
        if x.device != a.device:
            fail(name, f"on {a.device} (a's device)", x.device)
    (m, kdim), (n, kb) = a.shape, b.shape
    if kb != kdim:
        fail("b", f"N x K with a's K = {kdim}", f"shape {tuple(b.shape)}")
    check_shape(m, n, kdim)
    if out is not None and tuple(out.shape) != (m, n):
        fail("out", f"({m}, {n})", f"shape {tuple(out.shape)}")
    got = (tuple(scale_a.shape), tuple(scale_b.shape))
    for scaling in SCALINGS:
        if got == scale_shapes(scaling, m, n, kdim):
            return m, n, kdim, scaling
    row, block = (scale_shapes(s, m, n, kdim) for s in SCALINGS)
    fail("(scale_a, scale_b)", f"row-wise {row} or per 128-block {block}", f"shapes {got}")
    raise AssertionError("unreachable")   # fail raised


# -- the numpy reference -----------------------------------------------------------------------
def reference(x: np.ndarray, w: np.ndarray, scale_a: np.ndarray,
              scale_b: np.ndarray) -> np.ndarray:
    """Y of the module doc in float64, from the values of X (M x K) and W (N x K) and the
    scales in either scaling's shapes (which they pick, as for `scaled_mm`)."""
    x, w = np.asarray(x, np.float64), np.asarray(w, np.float64)
    sa, sb = np.asarray(scale_a, np.float64), np.asarray(scale_b, np.float64)
    (m, kdim), n = x.shape, w.shape[0]
    if (sa.shape, sb.shape) == scale_shapes("row", m, n, kdim):
        return np.asarray((x @ w.T) * sa * sb)
    if (sa.shape, sb.shape) != scale_shapes("block", m, n, kdim):
        raise ValueError(f"reference: scale shapes {sa.shape}, {sb.shape} are neither "
                         f"scaling's for M={m} N={n} K={kdim}")
    y = np.zeros((m, n))
    for kb in range(sa.shape[1]):
        ks = slice(kb * BLOCK, (kb + 1) * BLOCK)
        y += sa[:, kb:kb + 1] * np.repeat(sb[:, kb], BLOCK)[:n] * (x[:, ks] @ w[:, ks].T)
    return y


def reference_inputs(scaling: str, m: int, n: int, kdim: int, seed: int = 23
                     ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(X bits, W bits, scale_a, scale_b, Y as f32): integers in [-3, 3] and powers of two
    from 1/4 to 4, so every product and (for K <= 1024) every f32 sum is exact."""
    rng = np.random.default_rng(seed)
    x = rng.integers(-3, 4, (m, kdim))
    w = rng.integers(-3, 4, (n, kdim))
    sa_shape, sb_shape = scale_shapes(scaling, m, n, kdim)
    sa = np.exp2(rng.integers(-2, 3, sa_shape)).astype(np.float32)
    sb = np.exp2(rng.integers(-2, 3, sb_shape)).astype(np.float32)
    want = reference(x, w, sa, sb)
    return gh.e4m3_bits(x), gh.e4m3_bits(w), sa, sb, want.astype(np.float32)


# -- torch: inputs, the fp32 computation of the formulas, torch._scaled_mm ---------------------
def torch_inputs(scaling: str, m: int, n: int, kdim: int, *, device: Any = "cuda",
                 seed: int = 0) -> tuple[Any, Any, Any, Any]:
    """(X, W, scale_a, scale_b) on `device`: X and W random normal times 64 rounded to e4m3,
    the scales log-uniform over [1/512, 1/8] (not powers of two, and different enough from
    row to row and block to block that a scale applied to the wrong values shows)."""
    import torch
    g = torch.Generator(device=device).manual_seed(seed)
    x, w = ((torch.randn(r, kdim, device=device, generator=g) * 64).to(torch.float8_e4m3fn)
            for r in (m, n))
    sa_shape, sb_shape = scale_shapes(scaling, m, n, kdim)
    sa, sb = (torch.exp2(torch.rand(s, device=device, generator=g) * 6 - 9)
              for s in (sa_shape, sb_shape))
    return x, w, sa, sb


def torch_reference(x: Any, w: Any, scale_a: Any, scale_b: Any) -> Any:
    """Y of the module doc in fp32 torch (full-precision matmuls, no TF32), from e4m3 X and
    W and the scales in either scaling's shapes."""
    import torch
    (m, kdim), n = x.shape, w.shape[0]
    xf, wf = x.float(), w.float()
    with _no_tf32(torch):
        if (tuple(scale_a.shape), tuple(scale_b.shape)) == scale_shapes("row", m, n, kdim):
            return (xf @ wf.T) * scale_a * scale_b
        y = torch.zeros(m, n, device=x.device)
        for kb in range(scale_a.shape[1]):
            ks = slice(kb * BLOCK, (kb + 1) * BLOCK)
            cols = scale_b[:, kb].repeat_interleave(BLOCK)[:n]
            y += scale_a[:, kb:kb + 1] * cols * (xf[:, ks] @ wf[:, ks].T)
        return y


class _no_tf32:
    """fp32 matmuls in full precision while the block runs (the caller's setting after)."""

    def __init__(self, torch: Any) -> None:
        self.flags = torch.backends.cuda.matmul

    def __enter__(self) -> None:
        self.saved = self.flags.allow_tf32
        self.flags.allow_tf32 = False

    def __exit__(self, *exc: object) -> None:
        self.flags.allow_tf32 = self.saved


def torch_scales(x: Any, w: Any, scale_a: Any, scale_b: Any) -> tuple[Any, Any]:
    """The scales in the layouts `torch._scaled_mm(x, w.t(), ...)` takes: row-wise as they
    are; per 128-block its (BlockWise1x128, BlockWise128x128) layouts, scale_a column-major
    (M, KB) and scale_b transposed to (KB, NB)."""
    (m, kdim), n = x.shape, w.shape[0]
    if (tuple(scale_a.shape), tuple(scale_b.shape)) == scale_shapes("row", m, n, kdim):
        return scale_a, scale_b
    return scale_a.t().contiguous().t(), scale_b.t()


def torch_scaled_mm(x: Any, w: Any, scale_a: Any, scale_b: Any) -> Any:
    """`torch._scaled_mm` on the same operands, bf16 out (`torch_scales`); its block-wise
    mode needs cuBLAS 12.9+ on sm_90 (torch raises otherwise)."""
    import torch
    sa, sb = torch_scales(x, w, scale_a, scale_b)
    return torch._scaled_mm(x, w.t(), scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16)


def rel_error(got: Any, want: Any) -> float:
    """Relative Frobenius error of `got` against `want` (torch tensors)."""
    return float((got.float() - want.float()).norm() / want.float().norm())


def compare_with_torch(module: LoadedModule, scaling: str, m: int, n: int, kdim: int, *,
                       sms: int | None = None, seed: int = 0) -> dict[str, float | str]:
    """`scaled_mm` on `torch_inputs` against the fp32 reference ("fp32") and against
    `torch._scaled_mm` ("_scaled_mm": its error, or why torch could not run it): relative
    Frobenius errors."""
    import torch
    x, w, sa, sb = torch_inputs(scaling, m, n, kdim, seed=seed)
    out = torch.full((m, n), float("nan"), dtype=torch.bfloat16, device=x.device)
    scaled_mm(module, x, w, sa, sb, out=out, sms=sms)
    got: dict[str, float | str] = {"fp32": rel_error(out, torch_reference(x, w, sa, sb))}
    try:
        theirs = torch_scaled_mm(x, w, sa, sb)
    except (RuntimeError, NotImplementedError, ValueError) as e:   # torch's refusals
        got["_scaled_mm"] = f"{type(e).__name__}: {str(e).splitlines()[0][:200]}"
    else:
        got["_scaled_mm"] = rel_error(out, theirs)
    torch.cuda.synchronize()
    return got


SHAPES = ((300, 520, 400), (129, 258, 48), (512, 384, 1024))   # tails in M, N, K; K < BLOCK


def run(shapes: Iterable[tuple[int, int, int]] = SHAPES, scalings: Iterable[str] = SCALINGS,
        tilings: Iterable[str] | None = None, sms: int | None = None,
        bounded: bool = False) -> Report:
    """Each kernel of `scalings` (on each of its tilings, or those of them in `tilings`) on
    each (M, N, K) of `shapes`, against numpy; `sms` caps the persistent grid; `bounded`:
    the debug build."""
    from ptxdsl import runtime as rt
    report = Report("gemm_fp8_scaled")
    mod = build_module(bounded=bounded).load()
    sms = sms or rt.device_info(0).sm_count
    picked = [(VARIANTS[s][v], s) for s in scalings for v in TILINGS[s]
              if tilings is None or v in tilings]
    for cfg, scaling in picked:
        fn = mod[cfg.name]
        report.note(f"{cfg.name}: {fn.num_regs} registers per thread at launch, "
                    f"{cfg.smem_bytes} bytes of dynamic shared memory")
        for m, n, kdim in shapes:
            a, b, sa, sb, want = reference_inputs(scaling, m, n, kdim)
            dev_a, dev_b, dev_sa, dev_sb = (rt.DeviceBuffer.from_numpy(x) for x in (a, b, sa, sb))
            c = rt.DeviceBuffer.empty((m, n), np.uint16)
            c.memset(POISON)
            launch(mod, scaling, dev_a, dev_b, c, dev_sa, dev_sb, m, n, kdim, sms=sms, cfg=cfg)
            sync()
            report.check_equal(f"{cfg.name} M={m} N={n} K={kdim}", c.to_numpy(),
                               gh.bf16_round(want))
    return report


def main(argv: list[str] | None = None) -> int:
    return sample_main(argv, __doc__, build_module, run)


if __name__ == "__main__":
    raise SystemExit(main())
