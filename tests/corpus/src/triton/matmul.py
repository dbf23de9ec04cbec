"""Triton matmuls as users write them: a tiled fp16 GEMM over pointers (Triton pipelines it
with cp.async and wgmma on sm_90), a persistent GEMM over device-side tensor descriptors
(tl.make_tensor_descriptor: tensormap.replace in a global workspace + cp_fenceproxy +
acquire), and a warp-specialized K loop (tl.range(..., warp_specialize=True)). All clean."""

import triton
import triton.language as tl


@triton.jit
def tiled_matmul(a, b, c, M, N, K, lda, ldb, ldc,
                 BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, SWIZZLE: tl.constexpr):
    # Row-major A (M x K), B (K x N), C (M x N); tiles visited in groups of SWIZZLE rows so
    # neighbouring programs share B tiles in L2.
    pid = tl.program_id(0)
    tiles_m = tl.cdiv(M, BM)
    tiles_n = tl.cdiv(N, BN)
    group = pid // (SWIZZLE * tiles_n)
    first_m = group * SWIZZLE
    rows = tl.minimum(tiles_m - first_m, SWIZZLE)
    tm = first_m + (pid % rows)
    tn = (pid % (SWIZZLE * tiles_n)) // rows

    om = tm * BM + tl.arange(0, BM)
    on = tn * BN + tl.arange(0, BN)
    ok = tl.arange(0, BK)
    pa = a + om[:, None] * lda + ok[None, :]
    pb = b + ok[:, None] * ldb + on[None, :]
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, K, BK):
        ta = tl.load(pa, mask=(om[:, None] < M) & (ok[None, :] + k0 < K), other=0.0)
        tb = tl.load(pb, mask=(ok[:, None] + k0 < K) & (on[None, :] < N), other=0.0)
        acc = tl.dot(ta, tb, acc)
        pa += BK
        pb += BK * ldb
    pc = c + om[:, None] * ldc + on[None, :]
    tl.store(pc, acc.to(tl.float16), mask=(om[:, None] < M) & (on[None, :] < N))


@triton.jit
def persistent_matmul_desc(a, b, c, M, N, K,
                           BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
                           NUM_SMS: tl.constexpr):
    # A (M x K) and B (N x K) K-major, C (M x N); the descriptors are built on the device.
    da = tl.make_tensor_descriptor(a, shape=[M, K], strides=[K, 1], block_shape=[BM, BK])
    db = tl.make_tensor_descriptor(b, shape=[N, K], strides=[K, 1], block_shape=[BN, BK])
    dc = tl.make_tensor_descriptor(c, shape=[M, N], strides=[N, 1], block_shape=[BM, BN])
    tiles_n = tl.cdiv(N, BN)
    tiles = tl.cdiv(M, BM) * tiles_n
    for t in tl.range(tl.program_id(0), tiles, NUM_SMS):
        m0 = (t // tiles_n) * BM
        n0 = (t % tiles_n) * BN
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for k0 in tl.range(0, K, BK, num_stages=3):
            acc = tl.dot(da.load([m0, k0]), db.load([n0, k0]).T, acc)
        dc.store([m0, n0], acc.to(tl.float16))


@triton.jit
def ws_matmul_desc(a, b, c, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    # One output tile per program; Triton splits the K loop into a TMA producer partition
    # and a wgmma consumer partition.
    da = tl.make_tensor_descriptor(a, shape=[M, K], strides=[K, 1], block_shape=[BM, BK])
    db = tl.make_tensor_descriptor(b, shape=[N, K], strides=[K, 1], block_shape=[BN, BK])
    dc = tl.make_tensor_descriptor(c, shape=[M, N], strides=[N, 1], block_shape=[BM, BN])
    m0 = tl.program_id(0) * BM
    n0 = tl.program_id(1) * BN
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in tl.range(0, K, BK, num_stages=3, warp_specialize=True):
        acc = tl.dot(da.load([m0, k0]), db.load([n0, k0]).T, acc)
    dc.store([m0, n0], acc.to(tl.float16))


# Argument attributes as Triton's launcher specialises them: 16-byte aligned pointers, and
# (for the tiled matmul) sizes and strides divisible by 16, which lets it use cp.async; with
# only the pointers aligned it pipelines through registers (ld.global + st.shared).
_ALIGNED = {(i,): [["tt.divisibility", 16]] for i in range(3)}
_DESC_SIG = {"a": "*fp16", "b": "*fp16", "c": "*fp16", "M": "i32", "N": "i32", "K": "i32"}
_TILED = dict(fn=tiled_matmul,
              signature={"a": "*fp16", "b": "*fp16", "c": "*fp16", "M": "i32", "N": "i32",
                         "K": "i32", "lda": "i32", "ldb": "i32", "ldc": "i32",
                         "BM": "constexpr", "BN": "constexpr", "BK": "constexpr",
                         "SWIZZLE": "constexpr"},
              constexprs={"BM": 128, "BN": 128, "BK": 64, "SWIZZLE": 8},
              options={"num_warps": 8, "num_stages": 3})

CORPUS = [
    dict(name="tl_tiled_matmul", attrs={(i,): [["tt.divisibility", 16]] for i in range(9)},
         **_TILED),
    dict(name="tl_tiled_matmul_unaligned_sizes", attrs=_ALIGNED, **_TILED),
    dict(name="tl_persistent_matmul_desc", fn=persistent_matmul_desc,
         signature={**_DESC_SIG, "BM": "constexpr", "BN": "constexpr", "BK": "constexpr",
                    "NUM_SMS": "constexpr"},
         constexprs={"BM": 128, "BN": 128, "BK": 64, "NUM_SMS": 132}, attrs=_ALIGNED,
         options={"num_warps": 8}),
    dict(name="tl_persistent_matmul_desc_fp8", fn=persistent_matmul_desc,
         signature={**_DESC_SIG, "a": "*fp8e4nv", "b": "*fp8e4nv", "BM": "constexpr",
                    "BN": "constexpr", "BK": "constexpr", "NUM_SMS": "constexpr"},
         constexprs={"BM": 128, "BN": 128, "BK": 128, "NUM_SMS": 132}, attrs=_ALIGNED,
         options={"num_warps": 8}),
    dict(name="tl_persistent_matmul_desc_cluster2", fn=persistent_matmul_desc,
         signature={**_DESC_SIG, "BM": "constexpr", "BN": "constexpr", "BK": "constexpr",
                    "NUM_SMS": "constexpr"},
         constexprs={"BM": 128, "BN": 128, "BK": 64, "NUM_SMS": 132}, attrs=_ALIGNED,
         options={"num_warps": 8, "num_ctas": 2}),
    dict(name="tl_ws_matmul_desc", fn=ws_matmul_desc,
         signature={**_DESC_SIG, "BM": "constexpr", "BN": "constexpr", "BK": "constexpr"},
         constexprs={"BM": 128, "BN": 128, "BK": 64}, attrs=_ALIGNED,
         options={"num_warps": 4}),
]
