"""Kernels and host-side data for the wgmma GPU tests (tests/test_wgmma_gpu.py).

Each case is one warpgroup computing D (64 x N) = A (64 x K) @ B (K x N): the host lays A and
B out byte for byte as the shared-memory image the `SmemLayout` describes (swizzle applied by
`swizzled_offset`), the kernel copies the images to shared memory with plain 16-byte
ld/st, `fence.proxy.async` hands them to the async proxy, the wgmma loop steps the
descriptors along K, and the fragment's direct-store epilogue writes D. The input values are
small multiples of 1/2 (exact in every input type, sums exact in .f16/.f32), so the check
against numpy is exact.
"""

from __future__ import annotations

import attrs
import numpy as np

from ptxdsl import Addr, Kernel, Module, ptx, t
from ptxdsl.instructions.wgmma import KIND_OF, WgmmaType, check_wtype
from ptxdsl.instructions.wgmma_desc import SmemLayout, descriptor

NP_ACC = {t.f32: np.float32, t.f16: np.float16, t.s32: np.int32}


@attrs.frozen
class GemmCase:
    name: str
    atype: str
    btype: str
    dtype: object
    n: int
    k: int
    a_major: str = "K"
    b_major: str = "K"
    swizzle_a: str = "128B"
    swizzle_b: str = "128B"
    rs: bool = False
    satfinite: bool = False
    init: int | None = None         # accumulators start here (scale-d = 1) instead of 0
    sparse: bool = False
    epilogue: str = "store"         # store | stmatrix | e4m3 | f16_tail | chain

    @property
    def a_layout(self) -> SmemLayout:
        ka = self.k // 2 if self.sparse else self.k
        return SmemLayout(self.atype, 64, ka, self.a_major, self.swizzle_a)

    @property
    def b_layout(self) -> SmemLayout:
        return SmemLayout(self.btype, self.n, self.k, self.b_major, self.swizzle_b)

    @property
    def step(self) -> int:
        kind = KIND_OF[check_wtype("case", "atype", self.atype)]
        return kind.k * (2 if self.sparse else 1)


# -- host-side element encodings ----------------------------------------------------------------
def _fp8(values: np.ndarray, exp_bits: int, man_bits: int) -> np.ndarray:
    """Encode exactly representable normal values (and 0) as e4m3/e5m2 bytes."""
    bias = (1 << (exp_bits - 1)) - 1
    out = np.zeros(values.shape, np.uint8)
    for idx, v in np.ndenumerate(values):
        if v == 0:
            continue
        sign = 0x80 if v < 0 else 0
        m, e = np.frexp(abs(float(v)))          # v = m * 2**e, m in [0.5, 1)
        e -= 1
        frac = int(round((m * 2 - 1) * (1 << man_bits)))
        assert 0 <= frac < (1 << man_bits) and (m * 2 - 1) * (1 << man_bits) == frac, v
        out[idx] = sign | ((e + bias) << man_bits) | frac
    return out


def encode(values: np.ndarray, wtype: WgmmaType) -> np.ndarray:
    """Element bytes (a uint8 array with a trailing byte axis) of exact values."""
    if wtype is WgmmaType.f16:
        raw = values.astype(np.float16).view(np.uint16)
    elif wtype is WgmmaType.bf16:
        raw = (values.astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)
    elif wtype is WgmmaType.tf32:
        raw = values.astype(np.float32)
    elif wtype is WgmmaType.e4m3:
        raw = _fp8(values, 4, 3)
    elif wtype is WgmmaType.e5m2:
        raw = _fp8(values, 5, 2)
    elif wtype is WgmmaType.s8:
        raw = values.astype(np.int8)
    else:
        raw = values.astype(np.uint8)
    return np.ascontiguousarray(raw).view(np.uint8).reshape(*values.shape, -1)


def random_values(rng, shape, wtype: WgmmaType) -> np.ndarray:
    if wtype in (WgmmaType.s8,):
        return rng.integers(-128, 128, shape).astype(np.float64)
    if wtype is WgmmaType.u8:
        return rng.integers(0, 256, shape).astype(np.float64)
    return rng.integers(-4, 5, shape) * 0.5


def smem_image(layout: SmemLayout, values: np.ndarray, wtype: WgmmaType) -> np.ndarray:
    """The shared-memory bytes of `values` (mn x k) in `layout`, swizzle applied."""
    data = encode(values, wtype)
    eb = data.shape[-1]
    img = np.zeros(layout.nbytes, np.uint8)
    for mn in range(layout.mn):
        for kk in range(layout.k):
            off = layout.swizzled_offset(mn, kk)
            img[off:off + eb] = data[mn, kk]
    return img


# -- 2:4 sparsity (A) -----------------------------------------------------------------------------
# Per group of 4 K elements, which two A keeps (the same for every row: the metadata word does
# not depend on which threads supply it). Groups cycle through four different pairs so the
# bit order inside the word is tested.
SPARSE_PAIRS = ((0, 1), (2, 3), (1, 3), (0, 2))


def sparse_meta_word(groups: int = 8) -> int:
    word = 0
    for g in range(groups):
        lo, hi = SPARSE_PAIRS[g % len(SPARSE_PAIRS)]
        word |= (lo | hi << 2) << (4 * g)
    return word


def sparse_expand(compressed: np.ndarray, k: int) -> np.ndarray:
    """The dense 64 x k A that the compressed 64 x k/2 A and the metadata describe."""
    dense = np.zeros((compressed.shape[0], k))
    for g in range(k // 4):
        lo, hi = SPARSE_PAIRS[(g % 8) % len(SPARSE_PAIRS)]
        dense[:, 4 * g + lo] = compressed[:, 2 * g]
        dense[:, 4 * g + hi] = compressed[:, 2 * g + 1]
    return dense


# -- the kernel --------------------------------------------------------------------------------
def _copy_to_shared(k, src_param, dst_sym, nbytes: int) -> None:
    """Every thread copies 16-byte chunks tid, tid+128, ... (plain ld.global / st.shared)."""
    src = k.ld_param(src_param)
    tid = k.tid.x
    off = k.mul(tid, 16, type=t.u32, mode="wide")
    g = k.add(src, off)
    s = k.add(k.mov(dst_sym), k.mul(tid, 16))
    full, rest = divmod(nbytes // 16, 128)
    for it in range(full):
        v = k.ld(Addr(g, it * 2048), type=t.b32, space="global", vec=4)
        k.st(Addr(s, it * 2048), v, type=t.b32, space="shared")
    if rest:
        with k.if_(k.setp("lt", tid, rest)):
            v = k.ld(Addr(g, full * 2048), type=t.b32, space="global", vec=4)
            k.st(Addr(s, full * 2048), v, type=t.b32, space="shared")


def build_kernel(c: GemmCase) -> Kernel:
    k = Kernel(c.name, reqntid=128)
    a_img, b_img, out = k.param_ptr("a_img"), k.param_ptr("b_img"), k.param_ptr("out")
    a_rows = k.param_ptr("a_rows")      # row-major A for the RS forms
    la, lb = (None if c.rs else c.a_layout), c.b_layout
    sb = k.shared_array(t.b8, lb.nbytes, align=1024, name="sb")
    sa = None if c.rs else k.shared_array(t.b8, la.nbytes, align=1024, name="sa")
    if sa is not None:
        _copy_to_shared(k, a_img, sa, la.nbytes)
    _copy_to_shared(k, b_img, sb, lb.nbytes)
    ptx.fence_proxy_async(k, "shared::cta")     # generic-proxy writes -> wgmma's async reads
    k.bar_sync(0)
    acc = k.fragment(c.dtype, shape=(64, c.n), zero=c.init is None)
    if c.init is not None:
        acc.fill(c.init)
    db = descriptor(k, lb, sb)
    da = None if c.rs else descriptor(k, la, sa)
    a_frags = []
    if c.rs:
        for kk in range(0, c.k, c.step):
            a_frags.append(k.a_fragment(c.atype).load(a_rows, c.k, k0=kk))
    meta = k.mov(sparse_meta_word(), type=t.b32) if c.sparse else None
    ptx.wgmma_fence(k)
    for i, kk in enumerate(range(0, c.k, c.step)):
        a = a_frags[i] if c.rs else da.k_step(k, kk // 2 if c.sparse else kk)
        extra = {}
        if KIND_OF[check_wtype("case", "atype", c.atype)].transpose:
            extra["tnspB"] = lb.transpose
            if not c.rs:
                extra["tnspA"] = la.transpose
        common = dict(atype=c.atype, btype=c.btype, satfinite=c.satfinite, **extra)
        if c.sparse:
            ptx.wgmma_mma_async_sp(k, acc, a, db.k_step(k, kk), meta, 0, 1, **common)
        else:
            ptx.wgmma_mma_async(k, acc, a, db.k_step(k, kk), 1, **common)
    ptx.wgmma_commit_group(k)
    ptx.wgmma_wait_group(k, 0)
    _epilogue(k, c, acc, out, b_img)
    k.ret()
    return k


TAIL = (50, 30)        # rows, cols the f16_tail epilogue stores (of 64 x N)
CHAIN_N = 32           # N of the second GEMM of the chain epilogue


def _epilogue(k, c: GemmCase, acc, out, b_img) -> None:
    """How the accumulator leaves: direct store; packed bf16 via stmatrix to shared memory
    and out with plain copies; packed e4m3 direct store; packed f16 with M/N tails; or packed
    bf16 as the A operand of a second (RS) wgmma, P @ B2, B2 read from after B's image."""
    if c.epilogue == "store":
        acc.store(out, c.n)
    elif c.epilogue == "stmatrix":
        tile = k.shared_array(t.b8, 64 * c.n * 2, align=128, name="c_tile")
        acc.to_packed(t.bf16).store_matrix(tile, c.n)
        k.bar_sync(0)
        dst = k.ld_param(out)
        tid = k.tid.x
        src = k.add(k.mov(tile), k.mul(tid, 16))
        g = k.add(dst, k.mul(tid, 16, type=t.u32, mode="wide"))
        for it in range(64 * c.n * 2 // 2048):
            v = k.ld(Addr(src, it * 2048), type=t.b32, space="shared", vec=4)
            k.st(Addr(g, it * 2048), v, type=t.b32, space="global")
    elif c.epilogue == "e4m3":
        acc.to_packed("e4m3").store(out, c.n)
    elif c.epilogue == "f16_tail":
        acc.to_packed(t.f16).store(out, c.n, rows=TAIL[0], cols=k.mov(TAIL[1], type=t.s32))
    elif c.epilogue == "chain":
        lb2 = SmemLayout(t.bf16, CHAIN_N, c.n, "K", "32B")
        sb2 = k.shared_array(t.b8, lb2.nbytes, align=1024, name="sb2")
        src = k.ld_param(b_img)
        tid = k.tid.x
        g = k.add(src, k.mul(tid, 16, type=t.u32, mode="wide"))
        s = k.add(k.mov(sb2), k.mul(tid, 16))
        off = c.b_layout.nbytes
        for it in range(lb2.nbytes // 2048):
            v = k.ld(Addr(g, off + it * 2048), type=t.b32, space="global", vec=4)
            k.st(Addr(s, it * 2048), v, type=t.b32, space="shared")
        ptx.fence_proxy_async(k, "shared::cta")
        k.bar_sync(0)
        p = acc.to_packed(t.bf16)
        d2 = k.fragment(t.f32, shape=(64, CHAIN_N))
        db2 = descriptor(k, lb2, sb2)
        ptx.wgmma_fence(k)
        for step in range(c.n // 16):
            ptx.wgmma_mma_async(k, d2, p.a_operand(step), db2.k_step(k, 16 * step),
                                atype="bf16")
        ptx.wgmma_commit_group(k)
        ptx.wgmma_wait_group(k, 0)
        d2.store(out, CHAIN_N)


def bf16_round(x: np.ndarray) -> np.ndarray:
    """float32 -> bf16 (round to nearest even), returned as the bf16 values in float64."""
    bits = x.astype(np.float32).view(np.uint32).astype(np.uint64)
    bits = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) << 16
    return bits.astype(np.uint32).view(np.float32).astype(np.float64)


def e4m3_round(x: np.ndarray) -> np.ndarray:
    """float -> e4m3 bytes, round to nearest even, saturating at +-448 (.satfinite)."""
    codes = np.arange(128)
    exp, man = codes >> 3, codes & 7
    vals = np.where(exp == 0, man / 8 * 2.0**-6, (1 + man / 8) * 2.0**(exp - 7))
    vals[127] = np.inf                                   # 0x7F is NaN: never chosen
    mag = np.minimum(np.abs(x), 448.0)
    diff = np.abs(mag[..., None] - vals)
    best = diff.min(axis=-1, keepdims=True)
    ties = diff == best
    even = ties & (codes % 2 == 0)
    pick = np.where(even.any(axis=-1), even.argmax(axis=-1), ties.argmax(axis=-1))
    return (pick | np.where(x < 0, 0x80, 0)).astype(np.uint8)


def build_module(cases) -> Module:
    return Module([build_kernel(c) for c in cases], name="wgmma_gpu")


def host_data(c: GemmCase, seed: int = 0):
    """(a image, b image, row-major A bytes, expected D) for a case."""
    rng = np.random.default_rng(seed)
    wa, wb = check_wtype("c", "a", c.atype), check_wtype("c", "b", c.btype)
    ka = c.k // 2 if c.sparse else c.k
    if c.satfinite or c.init is not None:
        a_vals = np.full((64, ka), 127.0)
        b_vals = np.full((c.n, c.k), 127.0)
    else:
        a_vals = random_values(rng, (64, ka), wa)
        b_vals = random_values(rng, (c.n, c.k), wb)      # B^T: n x k
    a_img = np.zeros(2048, np.uint8) if c.rs else smem_image(c.a_layout, a_vals, wa)
    b_img = smem_image(c.b_layout, b_vals, wb)
    if c.epilogue == "chain":
        b2 = random_values(rng, (CHAIN_N, c.n), wb)
        b_img = np.concatenate([b_img, smem_image(SmemLayout(t.bf16, CHAIN_N, c.n, "K",
                                                             "32B"), b2, wb)])
    a_rows = encode(a_vals, wa).reshape(-1)
    dense_a = sparse_expand(a_vals, c.k) if c.sparse else a_vals
    exact = dense_a @ b_vals.T
    if c.dtype is t.s32:
        total = exact + (c.init or 0)
        want = (np.clip(total, -2**31, 2**31 - 1) if c.satfinite
                else ((total + 2**31) % 2**32) - 2**31).astype(np.int64).astype(np.int32)
    else:
        want = exact.astype(NP_ACC[c.dtype])
    if c.epilogue == "stmatrix":
        want = encode(bf16_round(exact), WgmmaType.bf16).view(np.uint16)[..., 0]
    elif c.epilogue == "e4m3":
        want = e4m3_round(exact)
    elif c.epilogue == "f16_tail":
        want = np.full(exact.shape, 0xA5A5, np.uint16)
        inside = exact[:TAIL[0], :TAIL[1]].astype(np.float16).view(np.uint16)
        want[:TAIL[0], :TAIL[1]] = inside
    elif c.epilogue == "chain":
        want = (bf16_round(exact) @ b2.T).astype(np.float32)
    return a_img, b_img, a_rows, want


G = GemmCase
CASES = [
    G("bf16_k_sw128_n64", "bf16", "bf16", t.f32, 64, 64),
    G("bf16_k_sw64_n256", "bf16", "bf16", t.f32, 256, 64, swizzle_a="64B", swizzle_b="64B"),
    G("f16_f16acc_k_sw32_n128", "f16", "f16", t.f16, 128, 32, swizzle_a="32B",
      swizzle_b="32B"),
    G("f16_k_none_n64", "f16", "f16", t.f32, 64, 32, swizzle_a="none", swizzle_b="none"),
    G("bf16_mn_sw128_n64", "bf16", "bf16", t.f32, 64, 32, "MN", "MN"),
    G("f16_mn_sw64_n128", "f16", "f16", t.f32, 128, 32, "MN", "MN", "64B", "64B"),
    G("bf16_mnA_sw32_n32", "bf16", "bf16", t.f32, 32, 32, "MN", "K", "32B", "64B"),
    G("f16_mn_none_n16", "f16", "f16", t.f16, 16, 32, "MN", "MN", "none", "none"),
    G("tf32_k_sw128_n256", "tf32", "tf32", t.f32, 256, 32),
    G("tf32_k_sw32_n8", "tf32", "tf32", t.f32, 8, 16, swizzle_a="32B", swizzle_b="32B"),
    G("e4m3_e4m3_f32_n64", "e4m3", "e4m3", t.f32, 64, 128),
    G("e4m3_e5m2_f16_n32", "e4m3", "e5m2", t.f16, 32, 64, swizzle_a="64B", swizzle_b="64B"),
    G("e5m2_e4m3_f32_n128", "e5m2", "e4m3", t.f32, 128, 64, swizzle_a="32B",
      swizzle_b="32B"),
    G("e5m2_e5m2_f16_n16", "e5m2", "e5m2", t.f16, 16, 64, swizzle_a="none", swizzle_b="none"),
    G("s8_s8_n24", "s8", "s8", t.s32, 24, 128),
    G("u8_u8_n48", "u8", "u8", t.s32, 48, 64, swizzle_a="64B", swizzle_b="64B"),
    G("s8_u8_n256", "s8", "u8", t.s32, 256, 64, swizzle_a="none", swizzle_b="none"),
    G("u8_s8_n80", "u8", "s8", t.s32, 80, 32, swizzle_a="32B", swizzle_b="32B"),
    G("s8_satfinite", "s8", "s8", t.s32, 16, 32, swizzle_a="32B", swizzle_b="32B",
      satfinite=True, init=2147483000),
    G("s8_wraps_without_satfinite", "s8", "s8", t.s32, 16, 32, swizzle_a="32B",
      swizzle_b="32B", init=2147483000),
    G("rs_bf16_n128", "bf16", "bf16", t.f32, 128, 64, rs=True),
    G("rs_f16_mnB_n64", "f16", "f16", t.f16, 64, 32, b_major="MN", swizzle_b="64B", rs=True),
    G("sparse_f16_n64", "f16", "f16", t.f32, 64, 64, swizzle_a="64B", sparse=True),
    G("sparse_bf16_n32", "bf16", "bf16", t.f32, 32, 32, swizzle_a="32B", swizzle_b="64B",
      sparse=True),
    G("epilogue_stmatrix_bf16", "bf16", "bf16", t.f32, 64, 64, epilogue="stmatrix"),
    G("epilogue_packed_e4m3", "bf16", "bf16", t.f32, 32, 64, epilogue="e4m3"),
    G("epilogue_packed_f16_tails", "f16", "f16", t.f32, 64, 64, epilogue="f16_tail"),
    G("epilogue_chain_rs", "bf16", "bf16", t.f32, 32, 64, epilogue="chain"),
]
BY_NAME = {c.name: c for c in CASES}


def run_case(name: str) -> tuple[bool, str]:
    """Launch one case on the GPU; (ok, detail) from the exact comparison with numpy."""
    from ptxdsl import runtime as rt
    from ptxdsl.sample_runner import POISON, sync
    c = BY_NAME[name]
    mod = Module([build_kernel(c)], name=name).load()
    a_img, b_img, a_rows, want = host_data(c)
    bufs = [rt.DeviceBuffer.from_numpy(x) for x in (a_img, b_img)]
    out = rt.DeviceBuffer.empty(want.shape, want.dtype)
    out.memset(POISON)
    rows = rt.DeviceBuffer.from_numpy(a_rows)
    mod[name].launch(grid=1, block=128, args=(*bufs, out, rows))
    sync()
    got = out.to_numpy()
    bad = np.argwhere(got != want)
    if not len(bad):
        return True, f"{want.size} values equal"
    r, col = bad[0]
    return False, (f"{len(bad)}/{want.size} differ; first at ({r}, {col}): got {got[r, col]!r}"
                   f" want {want[r, col]!r}; rows with errors {sorted(set(bad[:, 0]))[:8]}, "
                   f"cols {sorted(set(bad[:, 1]))[:8]}")
