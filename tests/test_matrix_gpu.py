"""On the GPU, against numpy: ldmatrix/stmatrix (x1/x2/x4, with and without .trans), the packed
conversions (bf16x2/f16x2 from f32 with .relu/.satfinite, e4m3x2/e5m2x2 from f32 and f16x2,
and back), and a warp-specialized setmaxnreg kernel whose budget ptxdsl accepted runs to the
end. The kernels are built by functions the CPU tests also assemble (tests/test_matrix.py)."""

from __future__ import annotations

import numpy as np
import pytest

from ptxdsl import Kernel, Module, ptx, t
from ptxdsl.testing import gpu_deadline

WARP = 32


# -- kernels -------------------------------------------------------------------------------------
def _global_at(k, ptr, index, nbytes):
    off = k.cvt(k.mul(index, nbytes), t.u64)
    return k.add(ptr, off)


def matrix_kernel(num: int, load_trans: bool, store_trans: bool) -> Module:
    """One warp: a 32x8 b16 tile (4 8x8 matrices) from global into shared; ldmatrix.x`num`
    (row address of row tid), each thread's registers to `regs`; stmatrix of those registers
    into a second tile, copied to `back`."""
    k = Kernel(f"mat_x{num}_{int(load_trans)}{int(store_trans)}", reqntid=WARP)
    src, regs_out, back = (k.ld_param(k.param_ptr(n)) for n in ("src", "regs", "back"))
    tile = k.shared_array(t.b16, 32 * 8, align=128, name="tile")
    tile2 = k.shared_array(t.b16, 32 * 8, align=128, name="tile2")
    tid = k.tid.x
    row = k.ld(_global_at(k, src, tid, 16), type=t.b32, space="global", vec=4)
    base, base2 = k.mov(tile), k.mov(tile2)
    my_row = k.add(base, k.mul(tid, 16))
    k.st(my_row, row, type=t.b32, space="shared")
    k.bar_sync(0)
    regs = k.ldmatrix(my_row, num, trans=load_trans)
    for i, r in enumerate(regs):
        k.st(_global_at(k, regs_out, k.add(k.mul(tid, 4), i), 4), r, space="global")
    my_row2 = k.add(base2, k.mul(tid, 16))
    k.st(my_row2, (0, 0, 0, 0), type=t.b32, space="shared")
    k.bar_sync(0)
    k.stmatrix(my_row2, regs, trans=store_trans)
    k.bar_sync(0)
    out = k.ld(my_row2, type=t.b32, space="shared", vec=4)
    k.st(_global_at(k, back, tid, 16), out, type=t.b32, space="global")
    k.ret()
    return Module([k])


CVT_OUTS = ("bf16", "bf16_relu_sat", "f16", "f16_rz_relu", "e4m3", "e4m3_relu", "e5m2",
            "e4m3_from_h2", "e5m2_relu_from_h2", "h2_from_e4m3", "h2_relu_from_e5m2")


def cvt_kernel() -> Module:
    """Thread i converts (x[2i], x[2i+1]) every packed way; results as u32 words."""
    k = Kernel("cvt_packed", reqntid=WARP)
    x, out = k.ld_param(k.param_ptr("x")), k.ld_param(k.param_ptr("out"))
    tid = k.tid.x
    a = k.ld(_global_at(k, x, k.mul(tid, 2), 4), type=t.f32, space="global")
    b = k.ld(_global_at(k, x, k.add(k.mul(tid, 2), 1), 4), type=t.f32, space="global")
    c = k.cvt_packed
    f16 = c("f16x2", a, b)
    e4 = c("e4m3x2", a, b)
    e5r = c("e5m2x2", f16, src_type="f16x2", relu=True)
    results = [c("bf16x2", a, b), c("bf16x2", a, b, relu=True, satfinite=True), f16,
               c("f16x2", a, b, rnd="rz", relu=True), e4, c("e4m3x2", a, b, relu=True),
               c("e5m2x2", a, b), c("e4m3x2", f16, src_type="f16x2"), e5r,
               c("f16x2", e4, src_type="e4m3x2"), c("f16x2", e5r, src_type="e5m2x2", relu=True)]
    for j, r in enumerate(results):
        word = r if r.type.bits == 32 else k.cvt(r, t.u32, atype=t.u16)
        k.st(_global_at(k, out, k.add(k.mul(tid, len(CVT_OUTS)), j), 4), word, type=t.b32,
             space="global")
    k.ret()
    return Module([k])


def setmaxnreg_kernel() -> Module:
    """384 threads: warpgroup 0 gives registers back (dec 40), the two others take 232 each
    (40 + 2 x 232 = 3 x 168: exactly the pool). Every thread then writes its warpgroup."""
    k = Kernel("ws", reqntid=384, minnctapersm=1)
    out = k.ld_param(k.param_ptr("out"))
    tid = k.tid.x
    wg = k.shr(tid, 7)
    with k.if_(k.setp("eq", wg, 0)):
        ptx.setmaxnreg_dec(k, 40)
    with k.else_():
        ptx.setmaxnreg_inc(k, 232)
    k.st(_global_at(k, out, tid, 4), k.add(wg, 100), space="global")
    k.ret()
    return Module([k])


# -- numpy references ------------------------------------------------------------------------------
def bf16_bits(x: np.ndarray) -> np.ndarray:
    """f32 -> bf16 bits, round to nearest even (finite inputs)."""
    u = x.astype(np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint32)


def fp8_table(exp_bits: int, man_bits: int, bias: int) -> tuple[np.ndarray, float]:
    """Values of the 128 non-negative codes (NaN where none) and the largest finite value."""
    vals = np.full(128, np.nan)
    for code in range(128):
        e, m = code >> man_bits, code & ((1 << man_bits) - 1)
        if exp_bits == 4 and code == 0x7F or exp_bits == 5 and e == 31:
            continue            # e4m3: only S.1111.111 is NaN; e5m2: IEEE-like inf/NaN
        vals[code] = (m / (1 << man_bits)) * 2.0 ** (1 - bias) if e == 0 else \
            (1 + m / (1 << man_bits)) * 2.0 ** (e - bias)
    return vals, np.nanmax(vals)


E4M3, E5M2 = fp8_table(4, 3, 7), fp8_table(5, 2, 15)


def fp8_bits(x: np.ndarray, fmt, relu: bool) -> np.ndarray:
    """Round to nearest (ties to an even code), saturate to the largest finite value."""
    vals, top = fmt
    out = np.zeros(x.shape, np.uint32)
    for idx, v in np.ndenumerate(x.astype(np.float64)):
        if relu and v < 0:
            v = 0.0
        sign = 0x80 if np.signbit(v) and not relu else 0
        mag = min(abs(v), top)
        err = np.abs(vals - mag)
        best = np.flatnonzero(err == np.nanmin(err))
        code = int(best[0] if len(best) == 1 else [b for b in best if b % 2 == 0][0])
        out[idx] = sign | code
    return out


def fp8_value(code: np.ndarray, fmt) -> np.ndarray:
    vals, _ = fmt
    v = vals[code & 0x7F]
    return np.where(code & 0x80, -v, v)


def pack(hi: np.ndarray, lo: np.ndarray, bits: int) -> np.ndarray:
    return (hi.astype(np.uint32) << bits) | lo.astype(np.uint32)


def f16_bits(x: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore"):      # f32 beyond 65504 becomes inf, as cvt.rn does
        return x.astype(np.float16).view(np.uint16).astype(np.uint32)


# -- the tests ------------------------------------------------------------------------------------
@pytest.mark.gpu
@pytest.mark.parametrize("num", [1, 2, 4])
@pytest.mark.parametrize("load_trans, store_trans", [(False, False), (True, False),
                                                      (True, True)])
def test_ldmatrix_stmatrix(num, load_trans, store_trans):
    from ptxdsl.runtime import DeviceBuffer, synchronize
    tile = np.arange(32 * 8, dtype=np.uint16).reshape(32, 8) * 7 + 3
    with gpu_deadline(60), DeviceBuffer.from_numpy(tile) as src, \
            DeviceBuffer.zeros((32, 4), np.uint32) as regs, \
            DeviceBuffer.zeros((32, 8), np.uint16) as back:
        fn = matrix_kernel(num, load_trans, store_trans).load()[
            f"mat_x{num}_{int(load_trans)}{int(store_trans)}"]
        fn.launch(1, WARP, (src, regs, back))
        synchronize(timeout=20)
        got_regs, got_back = regs.to_numpy(), back.to_numpy()
    tid = np.arange(32)
    for i in range(num):
        m = tile[8 * i:8 * i + 8]
        if load_trans:
            m = m.T
        lo, hi = m[tid // 4, 2 * (tid % 4)], m[tid // 4, 2 * (tid % 4) + 1]
        np.testing.assert_array_equal(got_regs[:, i], pack(hi, lo, 16), err_msg=f"matrix {i}")
    expect = np.zeros((32, 8), np.uint16)
    for i in range(num):
        m = tile[8 * i:8 * i + 8]
        # a transposed load stored transposed again is the original; stored plainly, the
        # transpose
        expect[8 * i:8 * i + 8] = m.T if load_trans != store_trans else m
    np.testing.assert_array_equal(got_back, expect)


@pytest.mark.gpu
def test_packed_conversions():
    from ptxdsl.runtime import DeviceBuffer, synchronize
    rng = np.random.default_rng(7)
    x = np.concatenate([
        np.array([1.0, -1.0, 0.5, 3.0e5, -3.0e5, 1e-3, 448.0, 500.0, -60000.0, 1.0e9,
                  0.0, 0.25, 2.0 ** -9, 2.0 ** -17, 240.0, 232.0]),
        rng.normal(0, 4, 48)]).astype(np.float32)
    with gpu_deadline(60), DeviceBuffer.from_numpy(x) as dx, \
            DeviceBuffer.zeros((32, len(CVT_OUTS)), np.uint32) as dout:
        cvt_kernel().load()["cvt_packed"].launch(1, WARP, (dx, dout))
        synchronize(timeout=20)
        got = dict(zip(CVT_OUTS, dout.to_numpy().T, strict=True))
    a, b = x[0::2], x[1::2]
    relu_a, relu_b = np.maximum(a, 0), np.maximum(b, 0)
    with np.errstate(over="ignore"):
        h_a, h_b = a.astype(np.float16), b.astype(np.float16)
    bf_max = np.float32(3.3895313892515355e38)
    expect = {
        "bf16": pack(bf16_bits(a), bf16_bits(b), 16),
        "bf16_relu_sat": pack(bf16_bits(np.minimum(relu_a, bf_max)),
                              bf16_bits(np.minimum(relu_b, bf_max)), 16),
        "f16": pack(f16_bits(a), f16_bits(b), 16),
        "e4m3": pack(fp8_bits(a, E4M3, False), fp8_bits(b, E4M3, False), 8),
        "e4m3_relu": pack(fp8_bits(a, E4M3, True), fp8_bits(b, E4M3, True), 8),
        "e5m2": pack(fp8_bits(a, E5M2, False), fp8_bits(b, E5M2, False), 8),
        "e4m3_from_h2": pack(fp8_bits(h_a, E4M3, False), fp8_bits(h_b, E4M3, False), 8),
    }
    for name, want in expect.items():
        np.testing.assert_array_equal(got[name], want, err_msg=name)
    # .rz.relu to f16: truncation toward zero of the non-negative part; overflow stays finite
    rz = got["f16_rz_relu"]
    for word, va, vb in zip(rz, relu_a, relu_b, strict=True):
        for half, v in ((word >> 16, va), (word & 0xFFFF, vb)):
            h = np.uint16(half).view(np.float16)
            assert np.isfinite(h) and h <= v, (v, h)
            assert h == np.float16(65504) or np.nextafter(h, np.float16(np.inf)) > v, (v, h)
    # e5m2 with relu from the f16 pair, then widened back: each value is the fp8 value
    e5r = got["e5m2_relu_from_h2"]
    np.testing.assert_array_equal(e5r, pack(fp8_bits(h_a, E5M2, True),
                                            fp8_bits(h_b, E5M2, True), 8))
    for name, src, fmt, relu in (("h2_from_e4m3", got["e4m3"], E4M3, False),
                                 ("h2_relu_from_e5m2", e5r, E5M2, True)):
        hi, lo = fp8_value(src >> 8, fmt), fp8_value(src & 0xFF, fmt)
        if relu:
            hi, lo = np.maximum(hi, 0), np.maximum(lo, 0)
        np.testing.assert_array_equal(got[name], pack(f16_bits(hi), f16_bits(lo), 16),
                                      err_msg=name)


@pytest.mark.gpu
def test_setmaxnreg_budget_runs():
    from ptxdsl.runtime import DeviceBuffer, synchronize
    with gpu_deadline(60), DeviceBuffer.zeros(384, np.uint32) as out:
        mod = setmaxnreg_kernel().load()
        mod["ws"].launch(1, 384, (out,))
        synchronize(timeout=20)
        got = out.to_numpy()
    np.testing.assert_array_equal(got, 100 + np.arange(384) // 128)
