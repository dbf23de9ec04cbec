"""samples/gemm_fp8_scaled.py on the CPU: the row-wise and per-128-block kernels check clean
(plain and bounded) and assemble, keep their setmaxnreg pair without spills or serialized
wgmma under a whole-program compile, emit the scaling they claim; the numpy reference
follows the formulas; the host picks the tiling and the scaling and refuses bad arguments,
one test per class. The GPU runs are in test_gemm_fp8_scaled_gpu.py and test_samples.py."""

from __future__ import annotations

import runpy
from pathlib import Path

import numpy as np
import pytest

from ptxdsl.testing import assemble_declared
from ptxdsl.toolchain import ptxas_path
from tests.whole_program import advisories, whole_program_report

SAMPLE = Path(__file__).resolve().parent.parent / "samples" / "gemm_fp8_scaled.py"
NS = runpy.run_path(str(SAMPLE), run_name="__ptxdsl_test__")


@pytest.fixture(scope="module")
def module():
    return NS["build_module"]()


def _entry(ptx: str, name: str) -> str:
    return ptx.split(f".entry {name}(")[1].split(".entry")[0]


@pytest.mark.parametrize("bounded", [False, True])
def test_builds_checks_clean_and_assembles(bounded):
    mod = NS["build_module"](bounded)
    assert [k.name for k in mod.kernels] == [
        "gemm_fp8_rowwise", "gemm_fp8_rowwise_n128", "gemm_fp8_rowwise_row",
        "gemm_fp8_blockwise"]
    for k in mod.kernels:
        assert k.check(strict=True) == [], k.name
    assemble_declared(mod.emit())


@pytest.mark.skipif(ptxas_path() is None, reason="no standalone ptxas here")
def test_whole_program_compile_keeps_setmaxnreg_without_spills(module):
    """Three 64 x 128 f32 accumulators (block-wise) and 64 column scales beside a 64 x 256
    accumulator (row-wise) fit the consumers' 232 registers: no spills, no serialized
    wgmma (C7512 and the other advisories)."""
    rep = whole_program_report(module)
    assert [r.registers for r in rep.kernels.values()] == [168] * 4, rep.log
    assert all(r.spill_stores == r.spill_loads == 0 for r in rep.kernels.values()), rep.log
    assert advisories(rep) == [], rep.log


def test_rowwise_ptx_shape(module):
    """gemm_hopper's main loop (peeled first stage), no per-tensor scale parameter, two row
    scales and bn column scales loaded per tile (the columns' before the last wait), two
    multiplies per value."""
    ptx = module.emit()
    for suffix, bn in (("", 256), ("_n128", 128), ("_row", 64)):
        body = _entry(ptx, f"gemm_fp8_rowwise{suffix}")
        head = ptx.split(f".entry gemm_fp8_rowwise{suffix}(")[1].split(")")[0]
        assert "scale_a" in head and "scale_b" in head and "_param_scale," not in head
        assert body.count(f"wgmma.mma_async.sync.aligned.m64n{bn}k32.f32.e4m3.e4m3") == 8
        assert body.count("ld.global.nc.f32") == 2 + bn // 4
        last_wait = body.rindex("wgmma.wait_group.sync.aligned 0;")
        assert body[:last_wait].count("ld.global.nc.f32") == 2 + bn // 4
        assert body.count("mul.f32") == bn          # 2 per value, bn / 2 values per thread
        assert "mad.rn.f32" not in body


def test_blockwise_ptx_shape(module):
    """Each k-block into one of two part accumulators (scale-d 0 on its first wgmma), issued
    once for block 0, twice in the loop's turn and once for an even count's last block; after
    each issue `wait_group 1` retires the previous block (never `wait_group 0` in the loop:
    that drains the tensor cores every k-block), then its stage is released and its part
    folded in (one fma per value); the scales loaded two k-blocks ahead (two blocks' worth
    before the loop, one per fold in it); 128 x 128 tiles with no cluster."""
    body = _entry(module.emit(), "gemm_fp8_blockwise")
    wgmma = "wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3"
    assert body.count(wgmma) == 16
    scale_d = [line.split("}, ")[1].split(", ")[2] for line in body.splitlines()
               if wgmma in line]
    assert scale_d == ["0", "1", "1", "1"] * 4, scale_d
    assert body.count("wgmma.wait_group.sync.aligned 1;") == 3
    assert body.count("wgmma.wait_group.sync.aligned 0;") == 2       # the tile's last block
    loop = body[body.index(wgmma):]
    first_wait = loop.index("wgmma.wait_group.sync.aligned")
    assert loop[first_wait:].startswith("wgmma.wait_group.sync.aligned 1;")
    # folds: two in the loop's turn, two where the count is even, one where it is odd
    assert body.count("mad.rn.f32") == 5 * 64
    assert body.count("mul.f32") == 2 * 5
    # 2 x 3 before the first wgmma, 3 in each of the three folds that have a next block
    assert body[:body.index(wgmma)].count("ld.global.nc.f32") == 6
    assert body.count("ld.global.nc.f32") == 6 + 3 * 3
    assert ".reqnctapercluster" not in body


def test_blockwise_refuses_tiles_across_scale_blocks():
    with pytest.raises(ValueError, match=r"a tile's columns inside one block of W .* bn=256"):
        NS["gh"].build_gemm(NS["VARIANTS"]["row"]["default"],
                            consumer=NS["ScaledConsumer"]("block"))


def test_consumer_refuses_an_unknown_scaling():
    with pytest.raises(ValueError, match="scaling must be one of .* got 'tensor'"):
        NS["ScaledConsumer"]("tensor")


def test_tiling_follows_gemm_hopper():
    gh = NS["gh"]
    for m in (1, 64, 65, 128, 129, 256, 257, 8192):
        assert NS["config_for"]("row", m).bn == gh.config_for("e4m3", m).bn
        assert NS["config_for"]("row", m).along == gh.config_for("e4m3", m).along
    assert [NS["variant_for"]("row", m) for m in (8192, 256, 128, 64)] == \
        ["default", "skinny", "row", "skinny"]
    # per 128-block: one tiling, 128 x 128 with no cluster, at every M
    assert {NS["config_for"]("block", m).name for m in (1, 128, 256, 8192)} == \
        {"gemm_fp8_blockwise"}
    cfg = NS["VARIANTS"]["block"]["default"]
    assert (cfg.bn, cfg.cluster, cfg.stages) == (128, 1, 6)


def test_build_kernel_refuses_a_tiling_the_scaling_lacks():
    with pytest.raises(ValueError, match=r"\(scaling, tiling\) must be one of .*"
                                         r"got \('block', 'row'\)"):
        NS["build_kernel"]("block", "row")


def test_scale_shapes():
    shapes = NS["scale_shapes"]
    assert shapes("row", 300, 520, 400) == ((300, 1), (1, 520))
    assert shapes("block", 300, 520, 400) == ((300, 4), (5, 4))
    assert shapes("block", 128, 256, 256) == ((128, 2), (2, 2))


def test_reference_follows_the_formulas():
    """The numpy reference against a loop over every output and K block, written from the
    module doc's formulas (tails in N and K: the last blocks are partial)."""
    rng = np.random.default_rng(3)
    m, n, kdim = 5, 130, 272
    x, w = rng.standard_normal((m, kdim)), rng.standard_normal((n, kdim))
    ref = NS["reference"]
    sa, sb = rng.random((m, 1)) + 0.5, rng.random((1, n)) + 0.5
    want = np.array([[sa[i, 0] * sb[0, j] * (x[i] @ w[j]) for j in range(n)]
                     for i in range(m)])
    np.testing.assert_allclose(ref(x, w, sa, sb), want, rtol=1e-12, atol=1e-12)
    kb = -(-kdim // 128)
    sa, sb = rng.random((m, kb)) + 0.5, rng.random((-(-n // 128), kb)) + 0.5
    want = np.zeros((m, n))
    for i in range(m):
        for j in range(n):
            for b in range(kb):
                ks = slice(128 * b, 128 * (b + 1))
                want[i, j] += sa[i, b] * sb[j // 128, b] * (x[i, ks] @ w[j, ks])
    np.testing.assert_allclose(ref(x, w, sa, sb), want, rtol=1e-12, atol=1e-12)
    with pytest.raises(ValueError, match="neither scaling's"):
        ref(x, w, sa[:, :1], sb)


def test_reference_inputs_are_exact_in_f32():
    """The run's inputs: the f32 result is the exact one, so only the bf16 rounding is left
    to compare bit for bit."""
    for scaling in ("row", "block"):
        a, b, sa, sb, want = NS["reference_inputs"](scaling, 129, 258, 1024)
        assert a.dtype == b.dtype == np.uint8 and sa.dtype == sb.dtype == np.float32
        x = np.round(np.abs(want.astype(np.float64)) * 16)     # scales >= 1/4: products
        assert (x < 2**24).all()                                # ... on a 1/16 grid fit f32


# -- the host's refusals: one per class of mistake ----------------------------------------------
torch = pytest.importorskip("torch")


def _args(m=256, n=384, kdim=512, scaling="block", **over):
    e4m3 = torch.float8_e4m3fn
    sa, sb = NS["scale_shapes"](scaling, m, n, kdim)
    args = {"a": torch.zeros(m, kdim, dtype=e4m3), "b": torch.zeros(n, kdim, dtype=e4m3),
            "scale_a": torch.ones(sa), "scale_b": torch.ones(sb)}
    args.update(over)
    return args


def test_check_tensors_takes_both_scalings():
    for scaling in ("row", "block"):
        assert NS["check_tensors"](**_args(scaling=scaling)) == (256, 384, 512, scaling)


@pytest.mark.parametrize("over,words", [
    ({"a": np.zeros((256, 512))}, r"a must be a torch.Tensor, got ndarray"),
    ({"b": torch.zeros(384, 512, dtype=torch.bfloat16)},
     r"b must be a torch.float8_e4m3fn tensor, got torch.bfloat16"),
    ({"scale_a": torch.ones(256, 4, dtype=torch.float64)},
     r"scale_a must be a torch.float32 tensor, got torch.float64"),
    ({"scale_b": torch.ones(12)}, r"scale_b must be 2-D, got shape \(12,\)"),
    ({"scale_a": torch.ones(4, 256).t()},
     r"scale_a must be contiguous \(row-major\), got strides \(1, 256\)"),
    ({"b": torch.zeros(384, 512, dtype=torch.float8_e4m3fn, device="meta")},
     r"b must be on cpu \(a's device\), got meta"),
    ({"b": torch.zeros(384, 256, dtype=torch.float8_e4m3fn)},
     r"b must be N x K with a's K = 512, got shape \(384, 256\)"),
    ({"scale_b": torch.ones(4, 3)},
     r"\(scale_a, scale_b\) must be row-wise \(\(256, 1\), \(1, 384\)\) or per 128-block "
     r"\(\(256, 4\), \(3, 4\)\), got shapes \(\(256, 4\), \(4, 3\)\)"),
    ({"out": torch.zeros(256, 383, dtype=torch.bfloat16)},
     r"out must be \(256, 384\), got shape \(256, 383\)"),
])
def test_check_tensors_refuses(over, words):
    with pytest.raises(ValueError, match=words):
        NS["check_tensors"](**_args(**over))


def test_shape_rules():
    check = NS["check_shape"]
    check(1, 2, 16)
    for shape in ((0, 2, 16), (1, 3, 16), (1, 2, 24)):
        with pytest.raises(ValueError, match="K a multiple of 16, N even"):
            check(*shape)
    with pytest.raises(ValueError, match="K a multiple of 16, N even; got M=256 N=384 K=520"):
        NS["check_tensors"](**_args(a=torch.zeros(256, 520, dtype=torch.float8_e4m3fn),
                                    b=torch.zeros(384, 520, dtype=torch.float8_e4m3fn)))


def test_scaled_mm_needs_a_cuda_device():
    with pytest.raises(ValueError, match="must be on a CUDA device, got cpu"):
        NS["scaled_mm"](None, **_args())


def test_launch_refuses_an_unknown_scaling():
    with pytest.raises(ValueError, match="scaling must be one of .* got 'col'"):
        NS["launch"](None, "col", 0, 0, 0, 0, 0, 128, 128, 128, sms=132)


@pytest.mark.parametrize("scaling", ["row", "block"])
def test_torch_reference_is_the_numpy_one(scaling):
    """The fp32 torch computation the GPU tests and the benchmark check against is the numpy
    reference's formula (on the CPU here), on tails in M, N and K."""
    m, n, kdim = 37, 260, 400
    x, w, sa, sb = NS["torch_inputs"](scaling, m, n, kdim, device="cpu", seed=1)
    assert sa.shape == NS["scale_shapes"](scaling, m, n, kdim)[0]
    assert float(sa.min()) >= 2.0**-9 and float(sa.max()) <= 2.0**-3
    want = NS["reference"](x.float().numpy(), w.float().numpy(), sa.numpy(), sb.numpy())
    got = NS["torch_reference"](x, w, sa, sb).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())


def test_torch_scales_are_in_scaled_mms_layouts():
    """Row-wise as given; per 128-block torch's (BlockWise1x128, BlockWise128x128) layouts:
    scale_a (M, KB) column-major, scale_b (KB, NB), the same values."""
    x, w, sa, sb = NS["torch_inputs"]("row", 40, 256, 512, device="cpu")
    assert NS["torch_scales"](x, w, sa, sb) == (sa, sb)
    x, w, sa, sb = NS["torch_inputs"]("block", 40, 256, 512, device="cpu")
    ta, tb = NS["torch_scales"](x, w, sa, sb)
    assert ta.shape == (40, 4) and ta.stride() == (1, 40) and bool((ta == sa).all())
    assert tb.shape == (4, 2) and bool((tb == sb.t()).all())
