"""samples/gemm_hopper.py: the persistent warp-specialized GEMM (bf16 and e4m3).

CPU: the kernels pass the hazard checker with no finding, keep their setmaxnreg pair under a
whole-program compile without spilling, the host helpers encode what they claim, and bad
shapes are refused. GPU (`gpu`-marked, each shape in its own process, so a fault or a hang
cannot reach the other tests): tails in M, N and K, K smaller than one stage, more tiles than
clusters (the persistent loop), checked bit for bit against numpy.
"""

from __future__ import annotations

import re
import runpy
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from ptxdsl.toolchain import ptxas_path
from tests.child_env import child_env
from tests.whole_program import advisories, whole_program_report

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "samples" / "gemm_hopper.py"
NS = runpy.run_path(str(SAMPLE), run_name="__ptxdsl_test__")


@pytest.fixture(scope="module")
def module():
    return NS["build_module"]()


def test_checker_finds_nothing(module):
    for k in module.kernels:
        assert k.check(strict=True) == [], k.name


def _entry(ptx: str, name: str) -> str:
    return ptx.split(f".entry {name}(")[1].split(".entry")[0]


def test_ptx_shape(module):
    """Both default kernels: the warp-specialized register split, the multicast B load, the
    cluster ring's remote releases and the wgmma of each type."""
    ptx = module.emit()
    for name, wgmma in (("bf16", "m64n256k16.f32.bf16.bf16"),
                        ("e4m3", "m64n256k32.f32.e4m3.e4m3")):
        body = _entry(ptx, f"gemm_hopper_{name}")
        assert ".reqntid 384" in body and ".reqnctapercluster 2, 1, 1" in body
        assert body.count("setmaxnreg.dec.sync.aligned.u32 40;") == 1
        assert body.count("setmaxnreg.inc.sync.aligned.u32 232;") == 1
        assert body.count(".multicast::cluster") == 1
        assert body.count(f"wgmma.mma_async.sync.aligned.{wgmma}") == 8   # peeled + loop
        # 2 releases (in the loop, after it) x 2 CTAs
        assert body.count("mbarrier.arrive.release.cta.shared::cluster.b64") == 4
        assert ".release.cluster.shared::cluster" not in body   # no MEMBAR.ALL.GPU per stage
        assert "cvt.rn.bf16x2.f32" in body
        # the epilogue: 16 stmatrix.x4 and 4 TMA-store boxes per tile, or the direct stores
        assert body.count("stmatrix.sync.aligned.m8n8.x4.shared.b16") == 16
        assert body.count("cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group") == 4
        assert body.count("cp.async.bulk.wait_group.read 0;") == 2
        assert body.count("st.global.b32") == 64
    assert _entry(ptx, "gemm_hopper_e4m3").count("mul.f32") == 128   # the scale, per value
    assert "mul.f32" not in _entry(ptx, "gemm_hopper_bf16")


def test_skinny_ptx_shape(module):
    """The skinny-M kernels: no cluster (no multicast, local releases), 128 x 128 tiles
    (m64n128 wgmma, one 128-column staging pass), 6 stages."""
    ptx = module.emit()
    for name, wgmma in (("bf16", "m64n128k16.f32.bf16.bf16"),
                        ("e4m3", "m64n128k32.f32.e4m3.e4m3")):
        body = _entry(ptx, f"gemm_hopper_{name}_n128")
        assert ".reqnctapercluster" not in body and "multicast" not in body
        assert "barrier.cluster" not in body and "mapa" not in body
        assert body.count(f"wgmma.mma_async.sync.aligned.{wgmma}") == 8
        assert "m64n256" not in body
        assert body.count("mbarrier.arrive.shared::cta.b64") == 2
        assert body.count("mbarrier.init.shared::cta.b64") == 12         # 6 stages x 2
        assert body.count("stmatrix.sync.aligned.m8n8.x4.shared.b16") == 8
        assert body.count("cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group") == 2
        assert body.count("st.global.b32") == 32
        assert "%nctaid.x" in body and "%nclusterid" not in body


def test_row_ptx_shape(module):
    """The one-row kernels: clusters of 2 along N; per stage one multicast load (the CTA's
    half of the A tile, 64 rows) and one local load (its own 64 x 128-byte B tile); 128 x 64
    tiles (m64n64 wgmma, one 64-column staging pass: 4 stmatrix, one box), 8 stages, both
    CTAs' consumers releasing every stage."""
    ptx = module.emit()
    for name, wgmma in (("bf16", "m64n64k16.f32.bf16.bf16"),
                        ("e4m3", "m64n64k32.f32.e4m3.e4m3")):
        body = _entry(ptx, f"gemm_hopper_{name}_row")
        assert ".reqnctapercluster 2, 1, 1" in body and "%nclusterid.x" in body
        load = "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
        assert body.count(load + ".multicast::cluster") == 1 and body.count(load + " [") == 1
        assert body.count(f"wgmma.mma_async.sync.aligned.{wgmma}") == 8
        assert "m64n128" not in body and "m64n256" not in body
        assert body.count("mbarrier.init.shared::cta.b64") == 16         # 8 stages x 2
        assert body.count("mbarrier.arrive.release.cta.shared::cluster.b64") == 4
        assert body.count("stmatrix.sync.aligned.m8n8.x4.shared.b16") == 4
        assert body.count("cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group") == 1


def test_row_fit_ptx_shape(module):
    """The fitted one-row kernels: no cluster; both operands loaded by the CTA itself with L2
    policies (A evict-last, B evict-first); the stage's expect_tx a register counted from M
    (min(M rounded up to 8, 128) rows of 128 bytes, plus B's 8 KiB), not a constant."""
    ptx = module.emit()
    for name in ("bf16", "e4m3"):
        body = _entry(ptx, f"gemm_hopper_{name}_row_fit")
        assert ".reqnctapercluster" not in body and "%nclusterid" not in body
        load = "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
        assert body.count(load + ".L2::cache_hint [") == 2 and ".multicast" not in body
        assert "createpolicy.fractional.L2::evict_first" in body
        assert "createpolicy.fractional.L2::evict_last" in body
        # rows = min((M + 7) & ~7, 128); bytes = rows * 128 + B's 64 x 128
        rows = re.search(r"and\.b32 (%r\d+), %r\d+, 4294967288;\s+min\.u32 (%r\d+), \1, 128;"
                         r"\s+mad\.lo\.u32 (%r\d+), \2, 128, 8192;", body)
        assert rows is not None
        arrive = re.findall(r"mbarrier\.arrive\.expect_tx\S* _, \[%r\d+\], (\S+);", body)
        assert arrive == [rows.group(3)]
        assert body.count("mbarrier.init.shared::cta.b64") == 16         # 8 stages x 2


def test_row_fit_boxes_and_refusals():
    """A fitted kernel's box follows M (N for B), rounded up to 8, at most a tile; it takes
    one tile row (column) only, and only without a cluster."""
    fit = NS["ROW_FIT"]["bf16"]
    assert [fit.boxes_for(m, 8192)[0].mn for m in (1, 65, 72, 73, 127, 128)] == \
        [8, 72, 72, 80, 128, 128]
    assert fit.boxes_for(72, 8192)[1] is fit.box_b
    row = NS["ROW"]["bf16"]
    assert row.boxes_for(72, 100) == (row.box_a, row.box_b)
    fit_b = NS["Config"]("bf16", bn=64, cluster=1, fit="b")
    assert fit_b.boxes_for(4096, 33)[1].mn == 40 and fit_b.boxes_for(4096, 33)[0] is fit_b.box_a
    with pytest.raises(ValueError, match="N must be at most 64, got N=65"):
        fit_b.boxes_for(128, 65)
    with pytest.raises(ValueError, match="M must be at most 128, got M=129"):
        NS["tensor_maps"]("bf16", 0, 0, 129, 8192, 64, fit)
    with pytest.raises(ValueError, match="M must be at most 128, got M=200"):
        NS["launch"](None, "bf16", 0, 0, 0, 200, 8192, 64, sms=132, cfg=fit)
    raw = SimpleNamespace(desc=None)      # maps given (raw bytes: no box to compare)
    with pytest.raises(ValueError, match="M must be at most 128, got M=200"):
        NS["launch"](None, "bf16", 0, 0, 0, 200, 8192, 64, sms=132, cfg=fit,
                     maps=(raw, raw, None))
    with pytest.raises(ValueError, match="takes one CTA per cluster"):
        NS["Config"]("bf16", bn=64, cluster=2, fit="a")
    with pytest.raises(ValueError, match="fit must be None, 'a'"):
        NS["Config"]("bf16", fit=True)
    with pytest.raises(ValueError, match="hints must be None, 'a'"):
        NS["Config"]("bf16", hints=True)


def test_config_choice_and_shared_memory():
    pick, skinny, default, row = NS["config_for"], NS["SKINNY"], NS["CONFIGS"], NS["ROW"]
    fit = NS["ROW_FIT"]
    for dtype in ("bf16", "e4m3"):
        assert pick(dtype, 1) is pick(dtype, NS["ROW_M"]) is skinny[dtype]
        # one tile row without N (the GEMMs built on this one): the pairs; with N: fitted
        assert pick(dtype, NS["ROW_M"] + 1) is pick(dtype, NS["BM"]) is row[dtype]
        assert pick(dtype, NS["BM"] + 1) is pick(dtype, NS["SKINNY_M"]) is skinny[dtype]
        assert pick(dtype, NS["SKINNY_M"] + 1) is default[dtype]
        # with N: small outputs take the 128 x 128 tiles at any M
        small = NS["SMALL_MN"]
        assert pick(dtype, 2048, 2048) is pick(dtype, 4096, small // 4096) is skinny[dtype]
        assert pick(dtype, 4096, small // 4096 + 2) is pick(dtype, 8192, 8192) is default[dtype]
        assert pick(dtype, 96, 1 << 20) is fit[dtype]
        # one tile row with N: the fitted 128 x 64 tiles unless the 128 x 128 tiles take no
        # more waves: N = 8192 is one wave of 128 CTAs against one of 64 twice as wide;
        # N = 14336 two waves of 224 against one of 112; 28672 four against two
        assert pick(dtype, 128, 8192) is pick(dtype, 65, 4096) is fit[dtype]
        assert pick(dtype, 128, 14336) is pick(dtype, 100, 28672) is skinny[dtype]
        # ... or 128 x 192 where those fill their waves better: 3072^2 is 576 tiles of 128 x
        # 128 (5 waves of 132 SMs) but 384 of 128 x 192 (3 waves); 4096^2 is 8 waves against
        # 6 of 1.5 times the width; one wave either way keeps the narrower tiles
        wide = NS["WIDE"][dtype]
        assert pick(dtype, 3072, 3072) is pick(dtype, 1536, 6144) is wide
        assert pick(dtype, 4096, 4096) is pick(dtype, 256, 8192) is skinny[dtype]
        assert pick(dtype, 3072) is default[dtype]          # without N: by M alone
        assert wide.bn == 192 and wide.cluster == 1
        for cfg in (skinny[dtype], default[dtype], row[dtype], wide, fit[dtype]):
            assert cfg.smem_bytes <= 227 * 1024 and cfg.epi_off % 1024 == 0
    with pytest.raises(ValueError, match="along must be 'm'"):
        NS["Config"]("bf16", along="k")


def test_launch_refuses_maps_of_another_variant():
    """Maps made for one variant (their boxes) passed to a launch that picks another: the
    kernel's expect-tx counts would not match what the loads deliver (a hang), so launch
    names the variant, the box it needs and the one given."""
    from types import SimpleNamespace as NSp
    launched = []
    module = {name: NSp(launch=lambda *a, **kw: launched.append(a)) for name in
              (NS["WIDE"]["bf16"].name, NS["SKINNY"]["bf16"].name)}

    def tmap(rows):
        return NSp(desc=NSp(box_dim=(64, rows)))
    with pytest.raises(ValueError, match=r"gemm_hopper_bf16_n192: B's tensor map must have "
                                         r"this variant's boxDim \[64, 192\].*got \[64, 128\]"):
        NS["launch"](module, "bf16", 0, 0, 0, 3072, 3072, 3072, sms=132,
                     maps=(tmap(128), tmap(128), None))
    assert launched == []
    NS["launch"](module, "bf16", 0, 0, 0, 3072, 3072, 3072, sms=132,
                 maps=(tmap(128), tmap(192), None))
    assert len(launched) == 1
    # maps of raw bytes carry no box to compare: taken as given
    NS["launch"](module, "bf16", 0, 0, 0, 3072, 3072, 3072, sms=132,
                 maps=(NSp(desc=None), NSp(desc=None), None))
    assert len(launched) == 2


@pytest.mark.skipif(ptxas_path() is None, reason="no standalone ptxas here")
def test_whole_program_compile_keeps_setmaxnreg_without_spills(module):
    """What the driver JIT does on load: setmaxnreg kept (the entry count is the 168 that
    384 threads x minnctapersm 1 allow), no spills, no serialized wgmma."""
    rep = whole_program_report(module)
    assert [r.registers for r in rep.kernels.values()] == [168] * 10, rep.log
    assert all(r.spill_stores == r.spill_loads == 0 for r in rep.kernels.values()), rep.log
    assert advisories(rep) == [], rep.log


def test_shape_rules():
    check = NS["check_shape"]
    check("bf16", 1, 2, 8)
    check("e4m3", 1, 2, 16)
    for dtype, shape in (("bf16", (0, 2, 8)), ("bf16", (1, 3, 8)), ("bf16", (1, 2, 12)),
                         ("e4m3", (1, 2, 8))):
        with pytest.raises(ValueError, match="multiple of 16"):
            check(dtype, *shape)


def test_grid_is_whole_clusters_and_persistent():
    grid = NS["grid_for"]
    assert grid(256, 256, 132) == 2                 # one cluster tile
    assert grid(8192, 8192, 132) == 132             # 1024 tiles on 66 clusters
    assert grid(8192, 8192, 131) == 130             # whole clusters only
    assert grid(1, 2, 132) == 2
    skinny = NS["SKINNY"]["bf16"]
    assert grid(128, 8192, 132, skinny) == 64       # one CTA per 128 x 128 tile
    assert grid(100, 300, 132, skinny) == 3
    assert grid(1024, 8192, 131, skinny) == 131     # persistent: at most one CTA per SM
    row = NS["ROW"]["bf16"]
    assert grid(128, 8192, 132, row) == 128         # a pair per 128 x 128 cluster tile
    assert grid(100, 300, 132, row) == 6
    assert grid(128, 8192, 101, row) == 100         # persistent, in whole clusters


def test_host_encodings():
    x = np.array([0.0, 1.0, -2.5, 3.0, 1.0 + 2**-8, 1.0 + 3 * 2**-8], np.float32)
    assert list(NS["bf16_round"](x)) == [0x0000, 0x3F80, 0xC020, 0x4040, 0x3F80, 0x3F82]
    bits = NS["e4m3_bits"](np.arange(-16, 17))
    sign = np.where(bits & 0x80, -1.0, 1.0)
    e, m = (bits >> 3) & 15, bits & 7
    value = sign * np.where(e > 0, (1 + m / 8) * 2.0 ** (e.astype(int) - 7), m / 8 * 2.0 ** -6)
    assert (value == np.arange(-16, 17)).all()
    assert bits[16] == 0 and bits[17] == 0x38        # 0 and 1.0


GPU_SHAPES = [                   # N % 8 == 0: TMA-store epilogue; other even N: direct stores
    ("bf16", 300, 520, 200),      # tails everywhere
    ("bf16", 129, 258, 40),       # K smaller than one stage, one row past a tile
    ("bf16", 64, 8, 8),           # far smaller than one tile
    ("bf16", 2048, 1536, 512),    # 48 cluster tiles: several per cluster on small grids
    ("bf16", 1000, 776, 1000),
    ("bf16", 3072, 3000, 520),    # where launch takes the wide tiles (a partial last column)
    ("e4m3", 300, 520, 208),
    ("e4m3", 129, 258, 48),
    ("e4m3", 2048, 1536, 512),
    ("bf16", 128, 8192, 1024),    # one tile row: the fitted row kernel (launch's choice)
    ("bf16", 73, 1000, 200),      # ... A's box 80 rows: 7 past M; N and K tails
    ("e4m3", 72, 8200, 4096),     # ... a box of exactly M rows
    ("bf16", 64, 4104, 64),       # skinny M: the n128 kernel (launch's choice)
    ("e4m3", 100, 1032, 208),
]


def _run_in_child(run_args: str, checks: int | None = None) -> None:
    """The sample's `run(<run_args>)` in a fresh process, so a fault or a hang reaches no
    other test; its report must pass (with `checks` checks, when given)."""
    code = ("import runpy, sys\n"
            f"ns = runpy.run_path({str(SAMPLE)!r}, run_name='__ptxdsl_test__')\n"
            f"r = ns['run']({run_args})\n"
            + (f"assert len(r.checks) == {checks}, r.format()\n" if checks is not None else "")
            + "print(r.format())\nsys.exit(0 if r.ok else 1)\n")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=ROOT, env=child_env(), timeout=180)
    print(res.stdout)
    assert res.returncode == 0, res.stdout + res.stderr


@pytest.mark.gpu
@pytest.mark.parametrize("dtype,m,n,k", GPU_SHAPES)
def test_gemm_on_gpu(dtype, m, n, k):
    """Every variant (default, skinny, one row, wide, and the fitted one row where M <= 128)
    on the shape."""
    _run_in_child(f"shapes=[({m}, {n}, {k})], dtypes=[{dtype!r}]", checks=4 + (m <= 128))


@pytest.mark.gpu
def test_persistent_loop_on_a_small_grid():
    """Two clusters walk 48 cluster tiles each: the ring's stages and parities carry across
    tiles, and every tile is written once."""
    _run_in_child("shapes=[(3000, 1800, 336)], sms=4")
