"""A one-warpgroup bf16 GEMM on the Hopper tensor cores, written with ptxdsl's builders only:
C (M x N, f32) = A (M x K, bf16) @ B^T, with B given N x K (both K-major, "TN").

Each CTA (128 threads, one warpgroup) computes a 64 x 128 tile of C. Per 64-wide K step,
thread 0 loads the A tile (64 x 64) and the B tile (128 x 64) with TMA, 128-byte swizzled,
onto one mbarrier; every thread waits for it, then the warpgroup issues four
`wgmma.mma_async.m64n128k16.f32.bf16.bf16`, its shared-memory descriptors advanced by the
+32-byte-per-k16 rule of the 128B swizzle (`MatrixDescriptor.k_step`), commits the group and
waits for it before the tiles are reused. The accumulator fragment (`k.fragment`) is stored
straight to global memory, predicated at the M and N edges (M=100, N=200 are not multiples of
the tile; TMA zero-fills the loads past them).

The layouts are `SmemLayout` objects: they give the descriptors, the TMA box and swizzle
(`tma_box`, `tma_swizzle`), and `check_tensormap` refuses a tensor map that would write
another layout. Inputs are multiples of 1/8 in [-1, 1], so the f32 result is exact and is
compared with numpy bit for bit.
"""

from __future__ import annotations

import numpy as np

from ptxdsl import Kernel, Module, ptx, t
from ptxdsl.instructions.wgmma_desc import SmemLayout, descriptor
from ptxdsl.sample_runner import POISON, Report, sample_main, sync

M, N, K = 100, 200, 256
BM, BN, BK = 64, 128, 64
LAYOUT_A = SmemLayout(t.bf16, BM, BK, "K", "128B")
LAYOUT_B = SmemLayout(t.bf16, BN, BK, "K", "128B")


def build_gemm() -> Kernel:
    k = Kernel("wgmma_gemm", reqntid=128)
    # box=: the box each map's TMA copy writes (one atom column), so the checker compares
    # the expect_tx count with the loads' bytes without being told the maps
    map_a = k.param_tensormap("map_a", box=LAYOUT_A)
    map_b = k.param_tensormap("map_b", box=LAYOUT_B)
    c_ptr = k.param_ptr("c")
    sa = k.shared_array(t.b8, LAYOUT_A.nbytes, align=LAYOUT_A.alignment, name="tile_a")
    sb = k.shared_array(t.b8, LAYOUT_B.nbytes, align=LAYOUT_B.alignment, name="tile_b")
    bar = k.shared_array(t.b64, 1, align=8, name="bar")
    tmap_a, tmap_b = k.tensormap_addr(map_a), k.tensormap_addr(map_b)
    is_first = k.tid.x == 0
    m0 = k.mul(k.ctaid.y, BM)
    n0 = k.mul(k.ctaid.x, BN)

    with k.if_(is_first):
        ptx.mbarrier_init(k, bar, 1)
        ptx.fence_proxy_async(k, "shared::cta")
    k.bar_sync(0)

    desc_a, desc_b = descriptor(k, LAYOUT_A, sa), descriptor(k, LAYOUT_B, sb)
    acc = k.fragment(t.f32, shape=(BM, BN))          # 64 registers per thread, zeroed
    for step, k0 in enumerate(range(0, K, BK)):
        with k.if_(is_first):
            ptx.cp_async_bulk_tensor(k, "shared::cluster", "global", sa, tmap_a, (k0, m0), bar)
            ptx.cp_async_bulk_tensor(k, "shared::cluster", "global", sb, tmap_b, (k0, n0), bar)
            ptx.mbarrier_arrive_expect_tx(k, "release", "cta", "shared::cta", bar,
                                          LAYOUT_A.nbytes + LAYOUT_B.nbytes, dst="_")
        ptx.mbarrier_wait(k, bar, step % 2)
        ptx.wgmma_fence(k)
        for kk in range(0, BK, 16):
            ptx.wgmma_mma_async(k, acc, desc_a.k_step(k, kk), desc_b.k_step(k, kk),
                                atype="bf16")
        ptx.wgmma_commit_group(k)
        ptx.wgmma_wait_group(k, 0)
        k.bar_sync(0)        # every warp is done reading the tiles before TMA overwrites them

    tile = k.add(k.ld_param(c_ptr), k.mul(k.mad(m0, N, n0), 4, type=t.u32, mode="wide"))
    acc.store(tile, N, rows=k.sub(M, m0, type=t.s32), cols=k.sub(N, n0, type=t.s32))
    k.ret()
    return k


def build_module() -> Module:
    return Module([build_gemm()], name="wgmma_gemm_simple")


def bf16_bits(x: np.ndarray) -> np.ndarray:
    """bf16 bit patterns of values exact in bf16 (the upper half of their f32 bits)."""
    return (x.astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)


def run() -> Report:
    from ptxdsl import runtime as rt
    report = Report("wgmma_gemm_simple")
    rng = np.random.default_rng(90)
    a = rng.integers(-8, 9, (M, K)) / 8.0
    b = rng.integers(-8, 9, (N, K)) / 8.0
    dev_a = rt.DeviceBuffer.from_numpy(bf16_bits(a))
    dev_b = rt.DeviceBuffer.from_numpy(bf16_bits(b))
    c = rt.DeviceBuffer.empty((M, N), np.float32)
    c.memset(POISON)
    maps = []
    for buf, rows, layout in ((dev_a, M, LAYOUT_A), (dev_b, N, LAYOUT_B)):
        tmap = rt.TensorMap.tiled(buf, (rows, K), "BFLOAT16", layout.tma_box[::-1],
                                  swizzle=layout.tma_swizzle)
        layout.check_tensormap(tmap)      # a map writing another layout would raise here
        maps.append(tmap)
    report.note(f"C[{M}x{N}] f32 = A[{M}x{K}] bf16 @ B[{N}x{K}]^T, {BM}x{BN} tiles, "
                f"K step {BK}, 128B swizzle")
    grid = (-(-N // BN), -(-M // BM))
    build_module().load()["wgmma_gemm"].launch(grid=grid, block=128, args=(*maps, c))
    sync()
    want = (a @ b.T).astype(np.float32)
    report.check_equal("C = A @ B^T (exact)", c.to_numpy(), want)
    return report


def main(argv: list[str] | None = None) -> int:
    return sample_main(argv, __doc__, build_module, run)


if __name__ == "__main__":
    raise SystemExit(main())
