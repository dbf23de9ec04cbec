"""samples/gemm_blackwell.py: the bf16 tcgen05 GEMM for sm_100a (one CTA, and a CTA pair).

CPU: both kernels build, the hazard checker finds nothing, nvJitLink assembles them for
sm_100a, their PTX is the goldens' and has the shape the design says (who allocates, which
cta_group, the commits, the epilogue's loads); the descriptors are the PTX ISA's fields; off
Blackwell the sample says why and assembles instead of running. Blackwell GPU (compute
capability 10.0; none here): the sample's own run, in a fresh process.
"""

from __future__ import annotations

import re
import runpy
import subprocess
import sys
from pathlib import Path

import pytest

from ptxdsl.testing import assemble_declared, declared_target
from tests.child_env import child_env

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "samples" / "gemm_blackwell.py"
NS = runpy.run_path(str(SAMPLE), run_name="__ptxdsl_test__")
CONFIGS = NS["CONFIGS"]
GPU_TIMEOUT_S = 120


@pytest.fixture(scope="module")
def module():
    return NS["build_module"]()


def _entry(ptx: str, name: str) -> str:
    return ptx.split(f".entry {name}(")[1].split(".entry")[0]


def test_checker_finds_nothing(module):
    for k in module.kernels:
        assert k.check(strict=True) == [], k.name


@pytest.mark.parametrize("variant", sorted(CONFIGS))
def test_golden_and_assembles_for_sm_100a(variant, golden):
    """Each kernel alone (tests/golden/samples/gemm_blackwell.ptx holds both, as the sample
    writes them); test_goldens_assemble.py assembles the goldens too."""
    ptx = golden(NS["build_module"]([variant]), f"gemm_blackwell/{variant}")
    assert declared_target(ptx) == "sm_100a"
    assert ".version 8.6" in ptx
    assert assemble_declared(ptx)[:4] == b"\x7fELF"


def test_ptxas_reports_no_warning_and_no_spill(module):
    cubin = module.assemble("sm_100a")
    assert cubin.report.warnings == ()
    assert set(cubin.report.kernels) == {cfg.name for cfg in CONFIGS.values()}
    for res in cubin.report.kernels.values():
        assert (res.spill_stores, res.spill_loads, res.stack_frame) == (0, 0, 0), res


def _count(body: str, text: str) -> int:
    return body.count(text)


@pytest.mark.parametrize("variant", sorted(CONFIGS))
def test_ptx_shape(module, variant):
    """One alloc (with its permit given back) and one dealloc of 256 columns, all of the
    kernel's cta_group; four K = 16 MMAs per k-block with the variant's descriptor; a commit
    per stage and one for the accumulator (multicast to both CTAs in the pair); the
    epilogue's 32x32b.x32 loads each waited for; the fences around each thread sync."""
    cfg = CONFIGS[variant]
    body = _entry(module.emit(), cfg.name)
    cg, other = ("cta_group::2", "cta_group::1") if cfg.pair else ("cta_group::1", "cta_group::2")
    assert other not in body
    assert _count(body, f"tcgen05.alloc.{cg}.sync.aligned.shared::cta.b32") == 1
    assert _count(body, f"tcgen05.relinquish_alloc_permit.{cg}.sync.aligned;") == 1
    assert re.search(rf"tcgen05\.dealloc\.{cg}\.sync\.aligned\.b32 %\w+, 256;", body)
    assert re.search(rf"tcgen05\.alloc\.{cg}\.sync\.aligned\.shared::cta\.b32 \[[^]]+\], 256;",
                     body)
    idesc = NS["instr_desc"](cfg).value
    mmas = re.findall(rf"tcgen05\.mma\.{cg}\.kind::f16 \[%\w+\], %\w+, %\w+, (\d+), %\w+;",
                      body)
    assert mmas == [str(idesc)] * 4
    commit = f"tcgen05.commit.{cg}.mbarrier::arrive::one.shared::cluster"
    assert _count(body, commit) == 2
    assert _count(body, commit + ".multicast::cluster.b64") == (2 if cfg.pair else 0)
    assert _count(body, "tcgen05.ld.sync.aligned.32x32b.x32.b32") == 1
    assert _count(body, "tcgen05.wait::ld.sync.aligned;") == 1
    assert _count(body, "tcgen05.fence::before_thread_sync;") == 2
    assert _count(body, "tcgen05.fence::after_thread_sync;") == 4
    tma = "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
    assert _count(body, tma) == 2
    assert _count(body, tma + ".cta_group::2") == (2 if cfg.pair else 0)
    assert _count(body, "barrier.cluster.arrive") == (2 if cfg.pair else 0)
    assert (".reqnctapercluster 2, 1, 1" in body) is cfg.pair


def test_instruction_descriptors():
    """kind::f16 (PTX ISA, "Instruction descriptor"): dtype F32 = 1 at bits 4-5, atype and
    btype BF16 = 1 at 7-9 and 10-12, K-major (no transpose) at 15 and 16, N >> 3 at 17-22,
    M >> 4 at 24-28."""
    common = 1 << 4 | 1 << 7 | 1 << 10 | (256 >> 3) << 17
    assert NS["instr_desc"](CONFIGS["cta1"]).value == common | (128 >> 4) << 24 == 0x08400490
    assert NS["instr_desc"](CONFIGS["pair"]).value == common | (256 >> 4) << 24 == 0x10400490


@pytest.mark.parametrize("variant", sorted(CONFIGS))
def test_epilogue_reads_each_accumulator_element_once_where_it_stores_it(module, variant):
    """The epilogue's mapping against the ISA's data-path layout and .32x32b fragment
    (tcgen05_tmem's models): thread tid of warps 0-3 loads, at lane 32 * (tid // 32) and
    column col, LD_COLS registers; register j must hold accumulator element (tid, col + j) of
    this CTA's rows, which the epilogue stores to C[m0 + tid, n0 + col + j]."""
    from ptxdsl.instructions.tcgen05_tmem import AccumulatorLayout, fragment_position
    cfg, cols = CONFIGS[variant], NS["LD_COLS"]
    assert f"tcgen05.ld.sync.aligned.32x32b.x{cols}.b32" in _entry(module.emit(), cfg.name)
    acc = AccumulatorLayout(cfg.mma_m, NS["BN"], cfg.ctas)
    assert acc.rows == NS["BM"] and acc.columns == NS["BN"]
    seen = set()
    for tid in range(128):
        for col in range(0, NS["BN"], cols):
            for j in range(cols):
                lane, column = fragment_position("32x32b", cols, tid % 32, j)
                got = acc.element(32 * (tid // 32) + lane, col + column)
                assert got == (tid, col + j), (tid, col, j, got)
                seen.add(got)
    assert len(seen) == acc.rows * acc.n


def test_shared_memory_descriptor_fields(module):
    """The sm_100 descriptor's constant part (PTX ISA, "Shared memory descriptor"): LBO 16
    bytes (unused by K-major swizzled tiles) at bits 16-29, SBO 1024 bytes (8 rows of 128
    bytes) at 32-45, 0b001 at 46-48, swizzle 2 (128-byte) at 61-63; the start address >> 4
    is added on the device, and each K = 16 step adds 32 bytes (2 in the field)."""
    want = (16 >> 4) << 16 | (1024 >> 4) << 32 | 1 << 46 | 2 << 61
    body = _entry(module.emit(), CONFIGS["cta1"].name)
    assert body.count(f", 1, {want};") == 2       # A's and B's, per k-block
    steps = re.findall(r"add\.u64 %rd\d+, %rd\d+, (\d+);", body)
    assert sorted(set(steps)) == ["2", "4", "6"]


def test_debug_build_checks_clean_and_assembles():
    """`bounded=True` (`run(bounded=True)`, for a first run on a new GPU): every mbarrier
    wait bounded by %globaltimer, still clean, assembled for sm_100a."""
    built = NS["build_module"](bounded=True)
    for k in built.kernels:
        assert k.check(strict=True) == [], k.name
    ptx = built.emit()
    # per kernel: the producer's wait for an empty stage, the MMA thread's for a full one,
    # the epilogue's for the accumulator
    assert ptx.count("mbarrier.try_wait") == ptx.count("trap;") == 2 * 3
    assert assemble_declared(ptx)[:4] == b"\x7fELF"


def test_shared_memory_fits_and_is_aligned():
    for cfg in CONFIGS.values():
        assert cfg.smem_bytes <= 232448, cfg.name        # sm_100's dynamic shared memory
        assert cfg.stage_bytes % 1024 == 0 and cfg.a_bytes % 1024 == 0   # 128B swizzle atoms
        assert cfg.tx_bytes < 1 << 20                    # the mbarrier's tx-count
        assert cfg.tmem_cols in (32, 64, 128, 256, 512)


def test_check_shape_refuses_what_the_kernels_cannot_take():
    check = NS["check_shape"]
    check(300, 520, 208)
    for shape in ((0, 8, 8), (8, 7, 8), (8, 8, 12)):
        with pytest.raises(ValueError, match="K a multiple of 8, N even"):
            check(*shape)


@pytest.mark.parametrize("cc, words", [
    (None, "the runtime's reason"),
    ((9, 0), "compute capability 9.0; sm_100a code runs on compute capability 10.0"),
    ((10, 3), "compute capability 10.3"),
    ((10, 0), None),
])
def test_skip_reason(monkeypatch, cc, words):
    import ptxdsl.runtime as runtime
    import ptxdsl.runtime.device as device
    monkeypatch.setattr(device, "current_compute_capability", lambda: cc)
    monkeypatch.setattr(runtime, "gpu_skip_reason", lambda: "the runtime's reason")
    reason = NS["blackwell_skip_reason"]()
    if words is None:
        assert reason is None
    else:
        assert words in reason


def test_run_off_blackwell_says_why_and_assembles(monkeypatch):
    """`run()` on a GPU that is not a Blackwell one (the sample test of test_samples.py on a
    Hopper calls it): no launch, a note saying why, and the module assembled as the check."""
    import ptxdsl.runtime.device as device
    monkeypatch.setattr(device, "current_compute_capability", lambda: (9, 0))
    report = NS["run"]()
    assert report.ok
    assert any("needs a Blackwell GPU (device 0 is compute capability 9.0" in n
               and "not run" in n for n in report.notes)
    assert [name for name, _, _ in report.checks] == \
        ["the kernels built, checked clean and assembled for sm_100a"]


def test_main_without_blackwell_assembles_offline():
    """`python samples/gemm_blackwell.py` where no Blackwell GPU is: why, then the offline
    assembly for sm_100a, exit 0."""
    if NS["blackwell_skip_reason"]() is None:
        pytest.skip("a Blackwell GPU is usable here: the sample would run instead")
    res = subprocess.run([sys.executable, str(SAMPLE)], capture_output=True, text=True,
                         cwd=ROOT, env=child_env(), timeout=300)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "no Blackwell GPU here (" in res.stdout, res.stdout
    assert "assembled offline with nvJitLink" in res.stdout, res.stdout
    assert ".target sm_100a" in res.stdout, res.stdout


@pytest.mark.skipif(NS["blackwell_skip_reason"]() is not None,
                    reason=f"needs a Blackwell GPU: {NS['blackwell_skip_reason']()}")
def test_runs_on_blackwell():
    """The sample's own checks against numpy, in a fresh process (a fault or a hang stays
    there)."""
    code = (f"import runpy, sys\n"
            f"ns = runpy.run_path({str(SAMPLE)!r}, run_name='__ptxdsl_test__')\n"
            f"report = ns['run']()\n"
            f"print(report.format())\n"
            f"sys.exit(0 if report.ok else 1)\n")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=ROOT, env=child_env(), timeout=GPU_TIMEOUT_S)
    assert res.returncode == 0 and "PASS:" in res.stdout, res.stdout + res.stderr
