"""Wave 3: the breadth of ordinary Triton code, after Triton's tutorials (vector add, fused
softmax, layer norm forward and backward, low-memory dropout, grouped-order matmul) and the
language's other common pieces (atomic reductions, histogram, sort, int8 and fp8 dots on
pointers, cumsum with device_assert/device_print, libdevice and inline asm, gather/split/join/
trans, cache hints). No TMA,
no mbarriers: plain ld/st.global, shuffles and shared-memory reductions, atomics, a lock's
spin loop, philox's mul.hi/mad.lo chains, mma through shared memory. All clean."""

import triton
import triton.language as tl


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask),
             mask=mask)


@triton.jit
def softmax_kernel(out_ptr, in_ptr, in_stride, out_stride, n_rows, n_cols,
                   BLOCK: tl.constexpr, STAGES: tl.constexpr):
    # Persistent over rows, as the tutorial launches it.
    for row in tl.range(tl.program_id(0), n_rows, tl.num_programs(0), num_stages=STAGES):
        cols = tl.arange(0, BLOCK)
        x = tl.load(in_ptr + row * in_stride + cols, mask=cols < n_cols, other=-float("inf"))
        x = x - tl.max(x, axis=0)
        num = tl.exp(x)
        tl.store(out_ptr + row * out_stride + cols, num / tl.sum(num, axis=0),
                 mask=cols < n_cols)


@triton.jit
def layer_norm_fwd(X, Y, W, B, Mean, Rstd, stride, N, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    X += row * stride
    Y += row * stride
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for off in range(0, N, BLOCK):
        cols = off + tl.arange(0, BLOCK)
        acc += tl.load(X + cols, mask=cols < N, other=0.).to(tl.float32)
    mean = tl.sum(acc, axis=0) / N
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for off in range(0, N, BLOCK):
        cols = off + tl.arange(0, BLOCK)
        x = tl.load(X + cols, mask=cols < N, other=0.).to(tl.float32)
        x = tl.where(cols < N, x - mean, 0.)
        acc += x * x
    rstd = 1 / tl.sqrt(tl.sum(acc, axis=0) / N + eps)
    tl.store(Mean + row, mean)
    tl.store(Rstd + row, rstd)
    for off in range(0, N, BLOCK):
        cols = off + tl.arange(0, BLOCK)
        mask = cols < N
        x = tl.load(X + cols, mask=mask, other=0.).to(tl.float32)
        y = (x - mean) * rstd * tl.load(W + cols, mask=mask) + tl.load(B + cols, mask=mask)
        tl.store(Y + cols, y, mask=mask)


@triton.jit
def layer_norm_bwd_dx(DX, DY, DW, DB, X, W, Mean, Rstd, Lock, stride, N,
                      GROUP: tl.constexpr, BLOCK: tl.constexpr):
    # dW/dB partial sums of a group of rows are accumulated under a spin lock
    # (atomic_cas acquires, atomic_xchg releases; a counter says whether it is the first store).
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    X += row * stride
    DY += row * stride
    DX += row * stride
    lock_id = row % GROUP
    Lock += lock_id
    Count = Lock + GROUP
    DW = DW + lock_id * N + cols
    DB = DB + lock_id * N + cols
    x = tl.load(X + cols, mask=mask, other=0).to(tl.float32)
    dy = tl.load(DY + cols, mask=mask, other=0).to(tl.float32)
    w = tl.load(W + cols, mask=mask).to(tl.float32)
    mean = tl.load(Mean + row)
    rstd = tl.load(Rstd + row)
    xhat = tl.where(mask, (x - mean) * rstd, 0.)
    wdy = tl.where(mask, w * dy, 0.)
    c1 = tl.sum(xhat * wdy, axis=0) / N
    c2 = tl.sum(wdy, axis=0) / N
    tl.store(DX + cols, (wdy - (xhat * c1 + c2)) * rstd, mask=mask)
    partial_dw = (dy * xhat).to(w.dtype)
    partial_db = dy.to(w.dtype)
    while tl.atomic_cas(Lock, 0, 1) == 1:
        pass
    count = tl.load(Count)
    if count == 0:
        tl.atomic_xchg(Count, 1)
    else:
        partial_dw += tl.load(DW, mask=mask)
        partial_db += tl.load(DB, mask=mask)
    tl.store(DW, partial_dw, mask=mask)
    tl.store(DB, partial_db, mask=mask)
    tl.debug_barrier()
    tl.atomic_xchg(Lock, 0)


@triton.jit
def layer_norm_bwd_dwdb(DW, DB, FINAL_DW, FINAL_DB, M, N,
                        BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    cols = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    dw = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    db = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for i in range(0, M, BLOCK_M):
        rows = i + tl.arange(0, BLOCK_M)
        mask = (rows[:, None] < M) & (cols[None, :] < N)
        offs = rows[:, None] * N + cols[None, :]
        dw += tl.load(DW + offs, mask=mask, other=0.)
        db += tl.load(DB + offs, mask=mask, other=0.)
    tl.store(FINAL_DW + cols, tl.sum(dw, axis=0), mask=cols < N)
    tl.store(FINAL_DB + cols, tl.sum(db, axis=0), mask=cols < N)


@triton.jit
def seeded_dropout(x_ptr, out_ptr, n, p, seed, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    keep = tl.rand(seed, offs) > p
    tl.store(out_ptr + offs, tl.where(keep, x / (1 - p), 0.0), mask=mask)


@triton.jit
def grouped_matmul(a_ptr, b_ptr, c_ptr, M, N, K, sam, sak, sbk, sbn, scm, scn,
                   BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP_M: tl.constexpr,
                   ACT: tl.constexpr):
    pid = tl.program_id(0)
    num_m = tl.cdiv(M, BM)
    num_n = tl.cdiv(N, BN)
    in_group = GROUP_M * num_n
    first_m = (pid // in_group) * GROUP_M
    group_rows = min(num_m - first_m, GROUP_M)
    pid_m = first_m + ((pid % in_group) % group_rows)
    pid_n = (pid % in_group) // group_rows
    offs_m = (pid_m * BM + tl.arange(0, BM)) % M
    offs_n = (pid_n * BN + tl.arange(0, BN)) % N
    offs_k = tl.arange(0, BK)
    a_ptrs = a_ptr + offs_m[:, None] * sam + offs_k[None, :] * sak
    b_ptrs = b_ptr + offs_k[:, None] * sbk + offs_n[None, :] * sbn
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BK)):
        a = tl.load(a_ptrs, mask=offs_k[None, :] < K - k * BK, other=0.0)
        b = tl.load(b_ptrs, mask=offs_k[:, None] < K - k * BK, other=0.0)
        acc = tl.dot(a, b, acc)
        a_ptrs += BK * sak
        b_ptrs += BK * sbk
    if ACT:
        acc = tl.where(acc >= 0, acc, 0.01 * acc)
    cm = pid_m * BM + tl.arange(0, BM)
    cn = pid_n * BN + tl.arange(0, BN)
    tl.store(c_ptr + scm * cm[:, None] + scn * cn[None, :], acc,
             mask=(cm[:, None] < M) & (cn[None, :] < N))


@triton.jit
def atomic_sum(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
    tl.atomic_add(out_ptr, tl.sum(x, axis=0))
    # and an elementwise atomic per lane (red.global.add of a vector)
    tl.atomic_add(out_ptr + 1 + (offs % 16), x, mask=offs < n)


@triton.jit
def histogram_kernel(x_ptr, out_ptr, BLOCK: tl.constexpr, BINS: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    h = tl.histogram(tl.load(x_ptr + offs), BINS)
    tl.atomic_add(out_ptr + tl.arange(0, BINS), h)


@triton.jit
def sort_kernel(x_ptr, out_ptr, N: tl.constexpr):
    offs = tl.program_id(0) * N + tl.arange(0, N)
    tl.store(out_ptr + offs, tl.sort(tl.load(x_ptr + offs)))


@triton.jit
def int8_matmul(a_ptr, b_ptr, c_ptr, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.int32)
    for k in range(0, K, BK):
        a = tl.load(a_ptr + rm[:, None] * K + (k + rk)[None, :])
        b = tl.load(b_ptr + (k + rk)[:, None] * BN + rn[None, :])
        acc = tl.dot(a, b, acc)
    tl.store(c_ptr + rm[:, None] * BN + rn[None, :], acc)


_MM_SIG = {"a_ptr": "*fp16", "b_ptr": "*fp16", "c_ptr": "*fp32", **{
    k: "i32" for k in ("M", "N", "K", "sam", "sak", "sbk", "sbn", "scm", "scn")},
    "BM": "constexpr", "BN": "constexpr", "BK": "constexpr", "GROUP_M": "constexpr",
    "ACT": "constexpr"}
_LN_BWD_SIG = {"DX": "*fp16", "DY": "*fp16", "DW": "*fp16", "DB": "*fp16", "X": "*fp16",
               "W": "*fp16", "Mean": "*fp32", "Rstd": "*fp32", "Lock": "*i32", "stride": "i32",
               "N": "i32", "GROUP": "constexpr", "BLOCK": "constexpr"}

CORPUS = [
    dict(name="tl_vector_add", fn=add_kernel,
         signature={"x_ptr": "*fp32", "y_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32",
                    "BLOCK": "constexpr"}, constexprs={"BLOCK": 1024},
         options={"num_warps": 4}),
    dict(name="tl_fused_softmax", fn=softmax_kernel,
         signature={"out_ptr": "*fp32", "in_ptr": "*fp32", "in_stride": "i32",
                    "out_stride": "i32", "n_rows": "i32", "n_cols": "i32",
                    "BLOCK": "constexpr", "STAGES": "constexpr"},
         constexprs={"BLOCK": 1024, "STAGES": 2}, options={"num_warps": 8}),
    dict(name="tl_layer_norm_fwd", fn=layer_norm_fwd,
         signature={"X": "*fp16", "Y": "*fp16", "W": "*fp16", "B": "*fp16", "Mean": "*fp32",
                    "Rstd": "*fp32", "stride": "i32", "N": "i32", "eps": "fp32",
                    "BLOCK": "constexpr"}, constexprs={"BLOCK": 1024},
         options={"num_warps": 8}),
    dict(name="tl_layer_norm_bwd_dx", fn=layer_norm_bwd_dx, signature=_LN_BWD_SIG,
         constexprs={"GROUP": 64, "BLOCK": 1024}, options={"num_warps": 8}),
    dict(name="tl_layer_norm_bwd_dwdb", fn=layer_norm_bwd_dwdb,
         signature={"DW": "*fp16", "DB": "*fp16", "FINAL_DW": "*fp16", "FINAL_DB": "*fp16",
                    "M": "i32", "N": "i32", "BLOCK_M": "constexpr", "BLOCK_N": "constexpr"},
         constexprs={"BLOCK_M": 32, "BLOCK_N": 128}, options={"num_warps": 4}),
    dict(name="tl_seeded_dropout", fn=seeded_dropout,
         signature={"x_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32", "p": "fp32",
                    "seed": "i32", "BLOCK": "constexpr"}, constexprs={"BLOCK": 1024},
         options={"num_warps": 4}),
    dict(name="tl_grouped_matmul_leaky", fn=grouped_matmul, signature=_MM_SIG,
         constexprs={"BM": 128, "BN": 128, "BK": 64, "GROUP_M": 8, "ACT": True},
         options={"num_warps": 8, "num_stages": 3}),
    dict(name="tl_grouped_matmul_mma_v2", fn=grouped_matmul, signature=_MM_SIG,
         constexprs={"BM": 64, "BN": 32, "BK": 32, "GROUP_M": 8, "ACT": False},
         options={"num_warps": 2, "num_stages": 2}),
    dict(name="tl_atomic_sum", fn=atomic_sum,
         signature={"x_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32", "BLOCK": "constexpr"},
         constexprs={"BLOCK": 512}, options={"num_warps": 4}),
    dict(name="tl_histogram", fn=histogram_kernel,
         signature={"x_ptr": "*i32", "out_ptr": "*i32", "BLOCK": "constexpr",
                    "BINS": "constexpr"}, constexprs={"BLOCK": 1024, "BINS": 64},
         options={"num_warps": 4}),
    dict(name="tl_sort", fn=sort_kernel,
         signature={"x_ptr": "*fp32", "out_ptr": "*fp32", "N": "constexpr"},
         constexprs={"N": 256}, options={"num_warps": 4}),
    dict(name="tl_int8_matmul", fn=int8_matmul,
         signature={"a_ptr": "*i8", "b_ptr": "*i8", "c_ptr": "*i32", "K": "i32",
                    "BM": "constexpr", "BN": "constexpr", "BK": "constexpr"},
         constexprs={"BM": 128, "BN": 128, "BK": 64}, options={"num_warps": 8,
                                                              "num_stages": 3}),
]


@triton.jit
def scan_assert_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    # A running sum (tl.cumsum: an associative scan across lanes and warps), checked with
    # device_assert (an __assertfail call) and printed with device_print (vprintf).
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0)
    tl.device_assert(x >= 0, "negative input")
    s = tl.cumsum(x, axis=0)
    tl.device_print("block sum", tl.sum(x, axis=0))
    tl.store(out_ptr + offs, s, mask=offs < n)


@triton.jit
def gelu_inline_asm(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    # libdevice's erf and tanh (calls and polynomial chains), and an elementwise inline asm
    # Triton packs four bytes at a time.
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
    y = 0.5 * x * (1 + tl.extra.cuda.libdevice.erf(x * 0.7071067811865476))
    y = y + tl.extra.cuda.libdevice.tanh(x) * tl.extra.cuda.libdevice.pow(x, 2.0)
    b = tl.inline_asm_elementwise("prmt.b32 $0, $1, 0, 0x0123;", "=r,r", [x.to(tl.int32,
                                  bitcast=True)], dtype=tl.int32, is_pure=True, pack=1)
    tl.store(out_ptr + offs, y + b.to(tl.float32, bitcast=True) * 0.0, mask=offs < n)


CORPUS += [
    dict(name="tl_cumsum_assert_print", fn=scan_assert_kernel,
         signature={"x_ptr": "*i32", "out_ptr": "*i32", "n": "i32", "BLOCK": "constexpr"},
         constexprs={"BLOCK": 512}, options={"num_warps": 4, "debug": True}),
    dict(name="tl_gelu_libdevice_asm", fn=gelu_inline_asm,
         signature={"x_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32", "BLOCK": "constexpr"},
         constexprs={"BLOCK": 1024}, options={"num_warps": 4}),
]


@triton.jit
def fp8_dot(a_ptr, b_ptr, c_ptr, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    # FP8 e4m3 operands from plain pointer loads (no descriptors), fp32 accumulation.
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), tl.float32)
    for k in range(0, K, BK):
        a = tl.load(a_ptr + rm[:, None] * K + (k + rk)[None, :])
        b = tl.load(b_ptr + (k + rk)[:, None] * BN + rn[None, :])
        acc = tl.dot(a, b, acc)
    tl.store(c_ptr + rm[:, None] * BN + rn[None, :], acc)


@triton.jit
def shape_ops(x_ptr, idx_ptr, out_ptr, N: tl.constexpr):
    # Layout changes through shared memory: gather, split/join, reshape, trans, argmax.
    r = tl.arange(0, N)
    x = tl.load(x_ptr + r)
    g = tl.gather(x, tl.load(idx_ptr + r) % N, 0)
    a, b = tl.split(tl.reshape(x, (N // 2, 2)))
    j = tl.reshape(tl.join(a, b), (N,))
    s = tl.sum(tl.trans(tl.reshape(x, (N // 16, 16))), 0)
    tl.store(out_ptr + r, g + j)
    tl.store(out_ptr + N + tl.arange(0, N // 16), s)
    best = tl.argmax(tl.reshape(x, (N // 2, 2)), 1).to(tl.float32)
    tl.store(out_ptr + 2 * N + tl.arange(0, N // 2), best)


@triton.jit
def cache_hints_math(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    # 64-bit offsets, eviction and cache hints, the SFU and libdevice-free math, bf16
    # rounding, and atomics with explicit semantics and scope.
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0.0, eviction_policy="evict_first")
    y = tl.math.rsqrt(tl.abs(x) + 1) + tl.math.log2(tl.abs(x) + 1) + tl.math.sin(x) \
        + tl.math.div_rn(x, 3.0)
    y = tl.clamp(y, -1.0, 1.0).to(tl.bfloat16).to(tl.float32) + tl.math.fma(x, x, x)
    tl.store(out_ptr + offs, y, mask=offs < n, cache_modifier=".cs")
    tl.atomic_max(out_ptr + n, tl.max(y, 0))
    tl.atomic_min(out_ptr + n + 1, tl.min(y, 0), sem="relaxed", scope="cta")


CORPUS += [
    dict(name="tl_fp8_dot_pointers", fn=fp8_dot,
         signature={"a_ptr": "*fp8e4nv", "b_ptr": "*fp8e4nv", "c_ptr": "*fp32", "K": "i32",
                    "BM": "constexpr", "BN": "constexpr", "BK": "constexpr"},
         constexprs={"BM": 128, "BN": 128, "BK": 64}, options={"num_warps": 8}),
    dict(name="tl_shape_ops", fn=shape_ops,
         signature={"x_ptr": "*fp32", "idx_ptr": "*i32", "out_ptr": "*fp32", "N": "constexpr"},
         constexprs={"N": 256}, options={"num_warps": 4}),
    dict(name="tl_cache_hints_math", fn=cache_hints_math,
         signature={"x_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32", "BLOCK": "constexpr"},
         constexprs={"BLOCK": 1024}, options={"num_warps": 4}),
]
