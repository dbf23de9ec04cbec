"""samples/gemm_decode.py: Y = X W^T at decode shapes (swapped operands, split-K, deep ring).

CPU: the kernels pass the hazard checker, have the PTX the design says (wgmma N = the width,
L2 hints, the ticket and the ordered sum), the host's choices (width, splits, grid,
workspace) cover every k-block of every tile exactly once, and bad input is refused with a
message naming it. GPU (`gpu`-marked, each in its own process): bit-exact against numpy at
M = 1 .. 128 with odd N and K tails, two calls identical.

`launch` takes the 64-row W tiles (`W64`) for 8 < M <= 64, the pairs (`PAIR`) where
`pair_for` says (bf16, 104 < M <= 128) and the 128-row ones otherwise; the alternatives it
can be told to take (`w_rows=`, `pair=`, a forced split count `splits=`) get the same
checks.
"""

from __future__ import annotations

import re
import runpy
import subprocess
import sys
from pathlib import Path

import pytest

from ptxdsl.testing import assemble_declared
from ptxdsl.toolchain import ptxas_path
from tests.child_env import child_env
from tests.whole_program import advisories, whole_program_report

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "samples" / "gemm_decode.py"
NS = runpy.run_path(str(SAMPLE), run_name="__ptxdsl_test__")
GH = NS["gh"]


@pytest.fixture(scope="module")
def module():
    return NS["build_module"]()


@pytest.fixture(scope="module")
def w64_module():
    """The 64-row W tiles' kernels alone."""
    from ptxdsl import Module
    return Module([NS["build_kernel"](d, bn, False, 64) for d in ("bf16", "e4m3")
                   for bn in NS["W64_WIDTHS"]], name="gemm_decode_w64", target="sm_90a")


def _configs():
    """(dtype, config) of every kernel: the widths `launch` picks, the 64-row W tiles, the
    pairs."""
    return [(d, cfg) for table in ("VARIANTS", "W64") for d in ("bf16", "e4m3")
            for cfg in NS[table][d].values()] + [(d, NS["PAIR"][d]) for d in ("bf16", "e4m3")]


def _entry(ptx: str, name: str) -> str:
    return ptx.split(f".entry {name}(")[1].split(".entry")[0]


def test_checker_finds_nothing(module, w64_module):
    for k in module.kernels + w64_module.kernels:
        assert k.check(strict=True) == [], k.name


def test_the_module_holds_both_tilings():
    built = NS["build_module"](["bf16"])
    assert [k.name for k in built.kernels] == [f"gemm_decode_bf16_n{bn}" for bn in NS["WIDTHS"]] \
        + [f"gemm_decode_bf16_n{bn}_w64" for bn in NS["W64_WIDTHS"]] \
        + ["gemm_decode_bf16_n64_pair"]
    assert assemble_declared(built.emit())[:4] == b"\x7fELF"
    assert [k.name for k in NS["build_module"](["bf16"], w64=False).kernels] == \
        [f"gemm_decode_bf16_n{bn}" for bn in NS["WIDTHS"]] + ["gemm_decode_bf16_n64_pair"]


def test_debug_build_checks_clean_and_assembles():
    """`bounded=True` (what `Linear(bounded=True)` loads): every wait bounded, still clean."""
    built = NS["build_module"](["bf16"], bounded=True)
    for k in built.kernels:
        assert k.check(strict=True) == [], k.name
    ptx = built.emit()
    assert ptx.count("%globaltimer") >= 2 * len(NS["WIDTHS"])
    assert assemble_declared(ptx)[:4] == b"\x7fELF"


@pytest.mark.parametrize("dtype,cfg", _configs(), ids=lambda v: getattr(v, "name", v))
def test_ptx_shape(module, w64_module, dtype, cfg):
    """Swapped operands (W's rows on the wgmma M side, X's rows its N), evict-first W and
    evict-last X, no TMA-store epilogue, the acq_rel ticket and the warpgroup's vote on it,
    16-bit transposed stores. 64-row W tiles: both warpgroups on the same 64 W rows, each
    on its half of the X tile (wgmma N = bn / 2, B read from the stage's A bytes + cw times
    the half's bytes), so half the stores each. Pairs: clusters of 2 along X's rows, each
    CTA loading its 64-row half of the W tile and multicasting it to both, and its own X
    tile (W's offset in the stage: the CTA's rank times 64 rows of 128 bytes)."""
    kind = {"bf16": "k16.f32.bf16.bf16", "e4m3": "k32.f32.e4m3.e4m3"}[dtype]
    bn, w64, pair = cfg.bn, cfg.bm == 64, cfg.along == "n"
    assert cfg.name == f"gemm_decode_{dtype}_n{bn}" + ("_w64" if w64 else "") + \
        ("_pair" if pair else "")
    body = _entry((w64_module if w64 else module).emit(), cfg.name)
    wn = bn // 2 if w64 else bn
    assert body.count(f"wgmma.mma_async.sync.aligned.m64n{wn}{kind}") == 8
    assert ".param .u32 kper" in body
    # from CLUSTER_BN up: pairs along W's rows, X's tile multicast; PAIR: W's tile multicast
    paired = bn >= NS["CLUSTER_BN"] or pair
    assert (".reqnctapercluster 2, 1, 1" in body) is paired
    assert body.count(".multicast::cluster") == int(paired)
    assert (re.search(r"mad\.lo\.u32 %r\d+, %r\d+, 8192, 0;", body) is not None) is pair
    assert "createpolicy.fractional.L2::evict_first.b64" in body
    assert "createpolicy.fractional.L2::evict_last.b64" in body
    assert body.count(".L2::cache_hint") == 2
    assert "stmatrix" not in body and "bulk_group" not in body
    assert body.count("atom.acq_rel.gpu.global.add.u32") == 1
    assert "bar.red.or.pred" in body
    assert body.count("st.global.b16") == wn // 2
    assert body.count("mbarrier.init.shared::cta.b64") == 2 * cfg.stages
    # the warpgroup's half of the X tile: cw * (bn / 2) rows of 128 bytes after W's tile
    half = f", {wn * 128}, {64 * 128};"
    assert (half in body) is w64, half
    # below CLUSTER_BN X's box is as tall as M (fit="b"): the stage's expect_tx counts
    # min((M + 7) & ~7, bn) rows of 128 bytes after W's tile, at run time
    fitted = re.search(rf"and\.b32 (%r\d+), %r\d+, 4294967288;\s+min\.u32 (%r\d+), \1, {bn};"
                       rf"\s+mad\.lo\.u32 (%r\d+), \2, 128, {cfg.a_bytes};", body)
    arrive = re.findall(r"mbarrier\.arrive\.expect_tx\S* _, \[%r\d+\], (\S+);", body)
    assert (fitted is not None) is (not paired) and len(arrive) == 1
    assert arrive[0] == (fitted.group(3) if fitted else str(cfg.stage_bytes))


@pytest.mark.skipif(ptxas_path() is None, reason="no standalone ptxas here")
def test_whole_program_compile_keeps_setmaxnreg_without_spills(module):
    """What the driver JIT builds: setmaxnreg kept (168 registers at entry), no spills (the
    ordered sum holds a partial's quad beside the accumulator), no serialized wgmma."""
    rep = whole_program_report(module)
    assert [r.registers for r in rep.kernels.values()] == [168] * 18, rep.log
    assert all(r.spill_stores == r.spill_loads == 0 for r in rep.kernels.values()), rep.log
    assert advisories(rep) == [], rep.log


@pytest.mark.skipif(ptxas_path() is None, reason="no standalone ptxas here")
def test_w64_whole_program_compile_keeps_setmaxnreg_without_spills(w64_module):
    rep = whole_program_report(w64_module)
    assert [r.registers for r in rep.kernels.values()] == [168] * 6, rep.log
    assert all(r.spill_stores == r.spill_loads == 0 for r in rep.kernels.values()), rep.log
    assert advisories(rep) == [], rep.log


def test_variants_fill_shared_memory():
    for _, cfg in _configs():
        assert cfg.smem_bytes <= NS["SMEM_LIMIT"]
        assert cfg.smem_bytes + cfg.stage_bytes + 16 > NS["SMEM_LIMIT"]   # no stage more
        assert cfg.stage_bytes % 1024 == 0
        assert cfg.stage_bytes == (cfg.bm + cfg.bn) * 128
        # a cluster tile: the cluster's CTAs along W's rows (X shared), or X's for the pairs
        assert (cfg.tile_m, cfg.tile_n) == ((cfg.bm, cfg.bn * cfg.cluster) if cfg.along == "n"
                                            else (cfg.bm * cfg.cluster, cfg.bn))
    assert NS["VARIANTS"]["bf16"][8].stages == 13 and NS["VARIANTS"]["bf16"][128].stages == 7
    assert NS["PAIR"]["bf16"].stages == 9
    # 64-row W tiles: more, smaller stages (8 KiB of W each)
    assert [NS["W64"]["bf16"][bn].stages for bn in NS["W64_WIDTHS"]] == [22, 18, 14]
    assert list(NS["W64"]["bf16"]) == [16, 32, 64]


def test_w64_config_is_refused_where_it_cannot_work():
    """bm = 64 needs a split-K Output (C's epilogue stores 64-row halves) and halves of the X
    tile that are a wgmma N (bn a multiple of 16)."""
    with pytest.raises(ValueError, match=r"bm must be 128, or 64 with split_k=True .* got "
                       r"bm=64 split_k=False bn=64"):
        GH.Config("bf16", bn=64, cluster=1, bm=64)
    with pytest.raises(ValueError, match=r"got bm=64 split_k=True bn=8"):
        GH.Config("bf16", bn=8, cluster=1, split_k=True, bm=64)
    with pytest.raises(ValueError, match=r"got bm=96 "):
        GH.Config("bf16", bn=64, cluster=1, split_k=True, bm=96)


def test_width_choice():
    """The narrowest width holding M; 64-row W tiles for 8 < M <= 64 (measured: BENCHMARKS.md
    section 7, and W64_DTYPES' comment for e4m3), 128-row ones at M <= 8 (half of 8 X rows is
    no wgmma N) and above 64."""
    pick = NS["config_for"]
    for m, bn, rows in ((1, 8, 128), (8, 8, 128), (9, 16, 64), (16, 16, 64), (17, 32, 64),
                        (33, 64, 64), (64, 64, 64), (65, 128, 128), (128, 128, 128)):
        assert (pick("bf16", m).bn, pick("bf16", m).bm) == (bn, rows)
        assert NS["w_rows_for"]("bf16", m) == rows
        assert (pick("e4m3", m).bn, pick("e4m3", m).bm) == (bn, rows)
        assert NS["w_rows_for"]("e4m3", m) == rows
    assert NS["DECODE_M"] == max(NS["WIDTHS"])
    for m, bn in ((1, 16), (16, 16), (17, 32), (33, 64), (64, 64)):
        cfg = pick("bf16", m, w_rows=64)
        assert (cfg.bn, cfg.bm, cfg.tile_m) == (bn, 64, 64)
        assert pick("bf16", m, 128).bm == 128
    with pytest.raises(ValueError, match=r"M must be 1 to 64 with w_rows=64 .* got M=65"):
        pick("bf16", 65, w_rows=64)
    with pytest.raises(ValueError, match=r"w_rows \(W rows per tile\) must be one of 128, 64, "
                       r"got 32"):
        pick("bf16", 8, w_rows=32)


def test_kernel_choice_across_the_bound():
    """`Linear` runs the decode kernel up to LINEAR_DECODE_M (64, measured) and gemm_hopper's
    variants above (M = 128: its one-row variant)."""
    pick = NS["kernel_for"]
    assert pick("bf16", 1) == "gemm_decode_bf16_n8"
    assert NS["LINEAR_DECODE_M"] == 64
    assert pick("bf16", 64) == "gemm_decode_bf16_n64_w64"
    assert pick("e4m3", 64) == "gemm_decode_e4m3_n64_w64"
    assert pick("bf16", 65) == GH.config_for("bf16", 65).name == "gemm_hopper_bf16_row"
    assert pick("bf16", 128) == "gemm_hopper_bf16_row"
    assert pick("bf16", 4096) == "gemm_hopper_bf16"
    # with N, as `Linear` asks: gemm_hopper's choice for small outputs (SMALL_MN, WIDE)
    assert pick("bf16", 3072, 3072) == GH.config_for("bf16", 3072, 3072).name \
        == "gemm_hopper_bf16_n192"
    assert pick("bf16", 4096, 4096) == "gemm_hopper_bf16_n128"
    with pytest.raises(ValueError, match="M must be 1 to DECODE_M"):
        pick("bf16", 0)
    with pytest.raises(ValueError, match="dtype must be one of bf16, e4m3, got 'f16'"):
        pick("f16", 300)


def test_pair_choice():
    """The pairs where they were measured to win (module doc, PAIR): bf16, 104 < M <= 128,
    where gemm_hopper takes its one-row tiles, with K >= 8192 or those tiles' CTAs at most 3/4
    of the SMs; `kernel_for` (what `Linear` runs) and `plan`'s default agree with it."""
    pair_for, pick = NS["pair_for"], NS["kernel_for"]
    takes = [(128, 8192, 8192), (112, 8192, 8192), (105, 8192, 8192), (128, 8192, 16384),
             (128, 4096, 8192), (128, 2048, 8192), (128, 4096, 14336), (128, 4096, 4096),
             (128, 777, 520)]
    leaves = [(104, 8192, 8192), (96, 8192, 8192), (128, 8192, 4096), (128, 8192, 6144),
              (128, 14336, 4096), (128, 16384, 8192), (129, 8192, 8192), (64, 8192, 8192)]
    for m, n, k in takes + leaves:
        want = (m, n, k) in takes
        assert pair_for("bf16", m, n, k) is want, (m, n, k)
        assert not pair_for("e4m3", m, n, k)        # its one-row tiles ran faster
        name = pick("bf16", m, n, k)
        assert (name == "gemm_decode_bf16_n64_pair") is want, (m, n, k, name)
        if not want and m > NS["LINEAR_DECODE_M"]:
            assert name == GH.config_for("bf16", m, n).name
        if m <= NS["DECODE_M"]:
            assert (NS["plan"]("bf16", m, n, k, 132).cfg is NS["PAIR"]["bf16"]) is want
    # without N and K, by M alone as before
    assert pick("bf16", 128) == "gemm_hopper_bf16_row"
    # the pairs at N = K = 8192: 64 cluster tiles of 128 W rows x 128 X rows, one split,
    # 128 CTAs; told not to, the 128-row W tiles with X shared (2 splits)
    p = NS["plan"]("bf16", 128, 8192, 8192, 132)
    assert (p.cfg.name, p.tiles, p.splits, p.grid) == ("gemm_decode_bf16_n64_pair", 128, 1, 128)
    assert NS["plan"]("bf16", 128, 8192, 8192, 132, pair=False).cfg.name == \
        "gemm_decode_bf16_n128"
    # w_rows names a tiling: no pairs unless asked for
    assert NS["plan"]("bf16", 128, 8192, 8192, 132, w_rows=128).cfg.name == \
        "gemm_decode_bf16_n128"
    p = NS["plan"]("e4m3", 100, 8192, 8192, 132, pair=True)
    assert (p.cfg.name, p.cfg.cluster, p.cfg.along, p.tiles) == (
        "gemm_decode_e4m3_n64_pair", 2, "n", 128)


def test_pair_bad_input_is_refused():
    cfg = NS["config_for"]
    with pytest.raises(ValueError, match=r"the pairs \(pair=True\) have 128-row W tiles, "
                                         r"got w_rows=64"):
        cfg("bf16", 16, 64, pair=True)
    with pytest.raises(ValueError, match="pair must be a bool, got 1"):
        cfg("bf16", 16, pair=1)
    with pytest.raises(ValueError, match="M must be 1 to DECODE_M = 128 .* got M=129"):
        NS["plan"]("bf16", 129, 8192, 8192, 132, pair=True)


def test_launch_refuses_maps_of_another_variant():
    """Maps made for the 128-row W tiles (W's whole 128-row box, X's 64-row half) given to a
    launch of the pairs (64-row halves of W, X's own 64 rows): the stage's byte count would
    not match (a hang), so launch names the map, the box it needs and the one given."""
    from types import SimpleNamespace as NSp
    launched = []
    module = {NS["PAIR"]["bf16"].name: NSp(launch=lambda *a, **kw: launched.append(a))}
    ws = NS["Workspace"](0, 1 << 20)

    def tmap(rows):
        return NSp(desc=NSp(box_dim=(64, rows)))
    with pytest.raises(ValueError, match=r"gemm_decode_bf16_n64_pair: W's tensor map must "
                                         r"have this variant's boxDim \[64, 64\].*got "
                                         r"\[64, 128\]"):
        NS["launch"](module, "bf16", 0, 0, 0, 128, 8192, 8192, sms=132, workspace=ws,
                     maps=(tmap(128), tmap(64)))
    assert launched == []
    NS["launch"](module, "bf16", 0, 0, 0, 128, 8192, 8192, sms=132, workspace=ws,
                 maps=(tmap(64), tmap(64)))
    assert len(launched) == 1


def test_split_choice():
    split = NS["split_for"]
    assert split(64, 128, 132) == 64           # N = K = 8192: 2 splits, 128 CTAs
    assert split(112, 128, 132) == 128         # N = 14336: one split, 112 CTAs in one wave
    assert split(224, 64, 132) == 64           # 64-row tiles at N = 14336, K = 4096: one split
                                               # (measured 1.05x cuBLAS; 4 splits 0.89x)
    assert split(32, 224, 132) == 56           # N = 4096, K = 14336: 4 splits
    assert split(1, 1, 132) == 1
    assert split(1, 1000, 132) == -(-1000 // NS["MAX_SPLITS"])


@pytest.mark.parametrize("m", [16, 32, 64])
def test_variant_plans_at_8192(m):
    """N = K = 8192 (128 k-blocks) on 132 SMs: `launch`'s 64-row W tiles, 128 tiles and
    split_for's one split (128 units); `w_rows=128`: 64 tiles x 2 splits = 128 units;
    `splits=3`: 384 units of 43, 43, 42 k-blocks; 256 units at `splits=2`."""
    plan = NS["plan"]
    p = plan("bf16", m, 8192, 8192, 132)
    assert (p.cfg.name, p.tiles, p.splits, p.kper, p.grid) == (
        f"gemm_decode_bf16_n{m}_w64", 128, 1, 128, 128)
    assert plan("bf16", m, 8192, 8192, 132, w_rows=64) == p
    p = plan("bf16", m, 8192, 8192, 132, w_rows=128)
    assert (p.cfg.name, p.tiles, p.splits, p.kper, p.grid) == (
        f"gemm_decode_bf16_n{m}", 64, 2, 64, 128)
    p = plan("bf16", m, 8192, 8192, 132, splits=3)
    assert (p.tiles, p.splits, p.kper, p.grid) == (128, 3, 43, 132)
    p = plan("bf16", m, 8192, 8192, 132, splits=2, w_rows=64)
    assert (p.tiles * p.splits, p.kper, p.grid) == (256, 64, 132)
    # fewer k-blocks than the splits asked for: none empty
    assert plan("bf16", m, 8192, 256, 132, splits=3).splits == 2


VARIANT_ARGS = [{}, {"splits": 3}, {"w_rows": 64}, {"w_rows": 128}, {"w_rows": 64, "splits": 2},
                {"w_rows": 64, "splits": 3}, {"pair": True}, {"pair": True, "splits": 3},
                {"pair": False}]


@pytest.mark.parametrize("variant", VARIANT_ARGS, ids=str)
@pytest.mark.parametrize("m,n,kdim,sms", [(1, 8192, 8192, 132), (64, 8192, 8192, 132),
                                          (7, 1000, 4096, 132), (33, 256, 8192, 5),
                                          (128, 777, 520, 3), (16, 28672, 8192, 132),
                                          (64, 28672, 8192, 132), (100, 300, 4096, 1)])
def test_units_cover_every_kblock_once(m, n, kdim, sms, variant):
    """The kernel's walk (units split-major, CTA c taking c, c + grid, ...; split s of a tile
    covering k-blocks [s kper, min((s + 1) kper, kblocks))), replayed on the host: every
    k-block of every tile is read by exactly one unit, no unit is empty, every unit runs,
    and the workspace holds every unit's two partials after the tickets. In clusters of
    `cl`, cluster c walks the cluster tiles and its CTA r keys tile t as t * cl + r."""
    if m > 64 and variant.get("w_rows") == 64:
        pytest.skip("the 64-row W tiles take M <= 64")
    p = NS["plan"]("bf16", m, n, kdim, sms, **variant)
    cl = p.cfg.cluster
    kblocks = -(-kdim // p.cfg.bk)
    cluster_tiles, clusters = p.tiles // cl, p.grid // cl
    seen: dict[tuple[int, int], int] = {}
    units = 0
    for c in range(clusters):
        for u in range(c, cluster_tiles * p.splits, clusters):
            s, tile = divmod(u, cluster_tiles)
            lo, hi = s * p.kper, min((s + 1) * p.kper, kblocks)
            assert hi > lo
            for rank in range(cl):
                for kb in range(lo, hi):
                    key = (tile * cl + rank, kb)
                    seen[key] = seen.get(key, 0) + 1
            units += 1
    assert units == cluster_tiles * p.splits
    assert seen == {(tile, kb): 1 for tile in range(p.tiles) for kb in range(kblocks)}
    assert p.grid <= max(sms, cl) and p.grid % cl == 0
    assert p.tiles == -(-n // p.cfg.tile_m) * -(-m // p.cfg.tile_n) * cl
    tickets = -(-p.tiles * 8 // 16) * 16
    parts = p.tiles * p.splits * 2 * 64 * p.cfg.wg_n * 4 if p.splits > 1 else 0
    assert p.workspace == tickets + parts


@pytest.mark.parametrize("m,n,kdim,variant", [
    (1, 8192, 8192, {}), (64, 1000, 4096, {}), (128, 777, 520, {}),
    (32, 8192, 8192, {"splits": 3}), (64, 1000, 4096, {"w_rows": 64}),
    (16, 8192, 8192, {"w_rows": 64, "splits": 2}), (64, 777, 8192, {"w_rows": 64})])
def test_workspace_holds_every_partial_apart(m, n, kdim, variant):
    """The kernel's addressing (DecodeStore: the ticket of key t at 4 (2t + cw); the v4 of
    thread i, quad q of unit (t, split) at tickets + 16 i + 2048 q + part ((t splits +
    split) 2 + cw), t = cluster tile * cl + rank) gives every 16 bytes of every partial a
    place of its own, after the tickets and inside `workspace`."""
    import numpy as np
    p = NS["plan"]("bf16", m, n, kdim, 132, **variant)
    assert p.splits > 1               # (with one split nothing is stored there)
    part = 64 * p.cfg.wg_n * 4
    tickets = -(-p.tiles * 8 // 16) * 16
    keys = np.arange(p.tiles)
    assert ((keys * 2 + 1) * 4 + 4).max() <= tickets
    unit = (keys[:, None] * p.splits + np.arange(p.splits)[None, :]) * 2
    slot = (unit[..., None] + np.arange(2)).ravel()[:, None, None] * part
    at = tickets + slot + 16 * np.arange(128)[None, :, None] + \
        2048 * np.arange(p.cfg.wg_n // 8)[None, None, :]
    assert len(np.unique(at)) == at.size and at.max() + 16 <= p.workspace


def test_bad_input_is_refused():
    plan, launch, ws = NS["plan"], NS["launch"], NS["Workspace"]
    with pytest.raises(ValueError, match=r"M must be 1 to DECODE_M = 128 .* got M=0"):
        plan("bf16", 0, 64, 64, 132)
    with pytest.raises(ValueError, match=r"larger M: gemm_hopper.launch\), got M=129"):
        plan("bf16", 129, 64, 64, 132)
    with pytest.raises(ValueError, match=r"K \* 2 bytes a multiple of 16 \(bf16\), got M=4 "
                       r"N=64 K=12"):
        plan("bf16", 4, 64, 12, 132)
    with pytest.raises(ValueError, match=r"K \* 1 bytes a multiple of 16 \(e4m3\)"):
        plan("e4m3", 4, 64, 8, 132)
    with pytest.raises(ValueError, match="N >= 1"):
        plan("bf16", 4, 0, 64, 132)
    with pytest.raises(ValueError, match="dtype must be one of bf16, e4m3, got 'f16'"):
        plan("f16", 4, 64, 64, 132)
    with pytest.raises(ValueError, match="M must be 1 to DECODE_M = 128 .* got M='4'"):
        plan("bf16", "4", 64, 64, 132)
    with pytest.raises(ValueError, match="K must be an int, got 64.0"):
        plan("bf16", 4, 64, 64.0, 132)
    with pytest.raises(ValueError, match="sms must be a positive int, got 0"):
        plan("bf16", 4, 64, 64, 0)
    for bad in (0, 17, 2.0, True):
        with pytest.raises(ValueError, match=r"splits must be None \(split_for's choice\) or an "
                           rf"int from 1 to MAX_SPLITS = 16, got {bad!r}"):
            plan("bf16", 4, 64, 64, 132, splits=bad)
    # the workspace is checked before anything touches the GPU
    with pytest.raises(ValueError, match="workspace must be a Workspace"):
        launch(None, "bf16", 0, 0, 0, 4, 8192, 8192, sms=132, workspace=0)
    with pytest.raises(ValueError, match=r"has 16 bytes, M=4 N=8192 K=8192 on 132 SMs needs "
                       r"524800 \(64 tiles x 2 splits\)"):
        launch(None, "bf16", 0, 0, 0, 4, 8192, 8192, sms=132, workspace=ws(0, 16))


def test_split_k_needs_an_accumulator_output():
    cfg = NS["VARIANTS"]["bf16"][8]
    with pytest.raises(ValueError, match="split-K .* needs an output= whose epilogue adds"):
        GH.build_gemm(cfg)

    class Packed:          # an Output whose epilogue takes packed tiles only
        def declare(self, k):
            pass

        def first_row(self, k, cfg, tiles_m):
            return None

        def epilogue(self, k, cfg, smem, cw, M, N):
            class Store:
                def __init__(self):
                    self.cw = cw

                def store(self, packed, m0, n0):
                    pass

                def finish(self):
                    pass
            return Store()
    with pytest.raises(ValueError, match="must take the f32 accumulator .*got Store"):
        GH.build_gemm(cfg, output=Packed())


def _run_in_child(run_args: str) -> None:
    code = ("import runpy, sys\n"
            f"ns = runpy.run_path({str(SAMPLE)!r}, run_name='__ptxdsl_test__')\n"
            f"r = ns['run']({run_args})\n"
            "print(r.format())\nsys.exit(0 if r.ok else 1)\n")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=ROOT, env=child_env(), timeout=300)
    print(res.stdout)
    assert res.returncode == 0, res.stdout + res.stderr


GPU_SHAPES = [(m, n, k) for m in (1, 7, 16, 33, 64, 100, 128)
              for n, k in ((4096, 8192), (8192, 4096), (1032, 14336))]
# odd N, K tails (K a multiple of 8 for bf16, 16 for e4m3: TMA's pitch), K under a stage
TAILS = {"bf16": [(1, 777, 200), (33, 1001, 4104), (128, 130, 72)],
         "e4m3": [(1, 777, 208), (33, 1001, 4112), (128, 130, 80)]}


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["bf16", "e4m3"])
def test_decode_on_gpu(dtype):
    """Every width and shape class, bit for bit against numpy, two calls identical."""
    _run_in_child(f"shapes={GPU_SHAPES + TAILS[dtype]!r}, dtypes=[{dtype!r}]")


@pytest.mark.gpu
@pytest.mark.parametrize("bounded", [False, True])
def test_linear_on_gpu(bounded):
    """`Linear` on both sides of DECODE_M (and its debug build), against numpy, with a
    workspace grown from one shape to the next; the last shape takes gemm_hopper's wide tiles,
    whose maps `Linear` must make with their boxes."""
    code = ("import runpy, sys, numpy as np\n"
            f"ns = runpy.run_path({str(SAMPLE)!r}, run_name='__ptxdsl_test__')\n"
            "from ptxdsl import runtime as rt\n"
            "gh = ns['gh']\n"
            f"lin = ns['Linear']('bf16', bounded={bounded})\n"
            "for m, n, k in ((3, 520, 208), (64, 4104, 4096), (200, 520, 208),"
            " (128, 1000, 8192), (3072, 3000, 136)):\n"
            "    x, w, want, _ = gh.reference_inputs('bf16', m, n, k)\n"
            "    y = rt.DeviceBuffer.empty((m, n), np.uint16)\n"
            "    name = lin(rt.DeviceBuffer.from_numpy(x), rt.DeviceBuffer.from_numpy(w), y,"
            " m, n, k)\n"
            "    rt.synchronize()\n"
            "    assert name == ns['kernel_for']('bf16', m, n, k), name\n"
            "    assert (y.to_numpy() == gh.bf16_round(want)).all(), (m, n, k)\n"
            "print('ok')\n")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=ROOT, env=child_env(), timeout=300)
    assert res.returncode == 0 and "ok" in res.stdout, res.stdout + res.stderr


# the pairs: one row of X in the second CTA's tile (65), none (64, 1), the edges of M and N
PAIR_SHAPES = [(m, n, k) for m in (1, 64, 65, 105, 128) for n, k in ((4096, 8192), (1032, 4112))] \
    + [(128, 8192, 8192), (127, 130, 80), (112, 1001, 4112)]
W64_SHAPES = [(m, n, k) for m in (1, 16, 17, 33, 64) for n, k in ((4096, 8192), (1032, 14336))] \
    + [(33, 1001, 4112), (64, 130, 80), (64, 8192, 8192)]     # K: e4m3 takes multiples of 16


@pytest.mark.gpu
@pytest.mark.parametrize("variant", ["splits=3", "w_rows=64", "w_rows=64, splits=2",
                                     "w_rows=64, sms=3", "pair=True", "pair=True, sms=4",
                                     "pair=True, splits=3"])
def test_decode_variants_on_gpu(variant):
    """The variants under measurement, bit for bit against numpy, two calls identical."""
    shapes = W64_SHAPES if "w_rows" in variant else PAIR_SHAPES if "pair" in variant \
        else GPU_SHAPES
    _run_in_child(f"shapes={shapes!r}, dtypes=['bf16', 'e4m3'], {variant}")


@pytest.mark.gpu
def test_decode_on_a_small_grid():
    """3 CTAs walk many units each (the tickets, the ring and the parities across units)."""
    _run_in_child("shapes=[(16, 4104, 8192), (128, 520, 4096)], sms=3")


def test_benchmark_decode_row_on_the_cpu(monkeypatch):
    """benchmarks/gemm.py's decode row end to end on the CPU: the plan and workspace it
    makes, its check against torch and of two calls' bits, its notes (the kernel, splits, the
    fraction of the HBM roofline), with a stand-in launch that computes Y through the
    pointers it is given (two calls that differ are reported)."""
    torch = pytest.importorskip("torch")
    import ctypes
    from types import SimpleNamespace

    import numpy as np

    from benchmarks import gemm as G
    from benchmarks.common import Section

    def view(ptr, count):
        return np.ctypeslib.as_array((ctypes.c_uint16 * count).from_address(ptr))

    calls = []

    def launch(mod, dtype, x, w, y, m, n, kdim, scale, *, sms, workspace, maps):
        assert workspace.nbytes >= NS["plan"](dtype, m, n, kdim, sms).workspace
        f32 = [(view(p, r * kdim).astype(np.uint32) << 16).view(np.float32).reshape(r, kdim)
               for p, r in ((x, m), (w, n))]
        out = torch.from_numpy(f32[0] @ f32[1].T).bfloat16().view(torch.int16).numpy()
        calls.append(1)
        view(y, m * n)[:] = out.view(np.uint16).ravel() + (len(calls) == bad)
    dec = SimpleNamespace(plan=NS["plan"], Workspace=NS["Workspace"], launch=launch,
                          tensor_maps=lambda *a: (None, None))
    monkeypatch.setattr(G, "interleaved_gpu_ms", lambda launches, **kw: {
        who: [0.05 if who == "ptxdsl" else 0.1] * 3 for who in launches})
    section = Section("gemm", "7")
    bad = 0
    G._row(section, torch, None, None, "bf16", 16, 520, 208, 132, 1e12,
           decode=(dec, None), dev="cpu")
    note = section.find("bf16 M=16 N=520 K=208 decode: ptxdsl")["note"]
    moved = (16 * 208 + 520 * 208) * 2 + 16 * 520 * 2
    assert f"{100 * moved / 0.05e-3 / 1e12:.0f}% of the HBM roofline" in note
    assert "kernel gemm_decode_bf16_n16_w64, 4 splits of 1 k-blocks" in note
    ratio = section.find("bf16 M=16 N=520 K=208 decode: ptxdsl / torch.matmul")
    assert ratio["median"] == 2.0
    # every row is held to parity; the decode goals (1.10x and the roofline) are for
    # N = K = 8192
    assert [(t["name"], t["goal"], t["met"]) for t in section.targets] == [
        ("bf16 M=16 N=520 K=208 decode: ptxdsl / torch.matmul", ">= 1.00", True)]
    section.targets.clear()
    monkeypatch.setattr(G, "DECODE_TARGET_NK", 512)     # (8192 in the benchmark)
    G._row(section, torch, None, None, "bf16", 8, 512, 512, 132, 1e9,
           decode=(dec, None), dev="cpu")
    moved = (8 * 512 + 512 * 512) * 2 + 8 * 512 * 2
    assert [(t["name"], t["goal"], t["met"]) for t in section.targets] == [
        ("bf16 M=8 N=512 K=512 decode: fraction of the HBM roofline", ">= 0.85",
         moved / 0.05e-3 / 1e9 >= 0.85),
        ("bf16 M=8 N=512 K=512 decode: ptxdsl / torch.matmul", ">= 1.10", True)]
    # with `Linear`'s kernel given, a row of another kernel compares and carries no target
    section.targets.clear()
    G._row(section, torch, None, None, "bf16", 16, 520, 208, 132, 1e12,
           decode=(dec, None), dev="cpu", linear="gemm_hopper_bf16_n128")
    assert section.targets == []
    assert section.rows[-1]["note"] == ("medians; no target: at this shape `Linear` runs "
                                        "gemm_hopper_bf16_n128")
    # ... and a row of the kernel it runs, under the gemm rows' name (`tag=""`), its targets
    G._row(section, torch, None, None, "bf16", 16, 520, 208, 132, 1e12,
           decode=(dec, None), dev="cpu", linear="gemm_decode_bf16_n16_w64", tag="")
    assert [(t["name"], t["goal"]) for t in section.targets] == [
        ("bf16 M=16 N=520 K=208: ptxdsl / torch.matmul", ">= 1.00")]
    bad = len(calls) + 2            # the second checked call differs in its last bit
    with pytest.raises(AssertionError, match="two calls of gemm_decode_bf16_n16_w64, 4 splits "
                       "of 1 k-blocks differ"):
        G._row(section, torch, None, None, "bf16", 16, 520, 208, 132, 1e12,
               decode=(dec, None), dev="cpu")
