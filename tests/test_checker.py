"""Checker framework and API: CFG, value tracking, divergence, findings, Module.emit()'s
warnings and strict mode, `python -m ptxdsl check`, the samples and README checking clean,
and the emit-time cost on a 100k-instruction kernel."""

from __future__ import annotations

import re
import runpy
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from ptxdsl import Addr, Kernel, Module, ptx, t
from ptxdsl.__main__ import sample_files
from ptxdsl.checker import (
    Hazard,
    HazardError,
    PtxdslHazardWarning,
    Severity,
    check_kernel,
    check_module,
)
from ptxdsl.checker.cfg import CFG, natural_loops
from ptxdsl.checker.divergence import Divergence
from ptxdsl.checker.values import Kind, Values
from ptxdsl.kernel_core import Statement
from ptxdsl.types import StateSpace
from tests.checker_kernels import Tma, here, ids
from tests.child_env import child_env

ROOT = Path(__file__).resolve().parent.parent


def _index(k: Kernel, opcode_prefix: str) -> int:
    return next(i for i, s in enumerate(k.body)
                if isinstance(s, Statement) and s.insn.opcode().startswith(opcode_prefix))


# -- the control-flow graph ------------------------------------------------------------------------
def test_cfg_if_else_and_reconvergence():
    k = Kernel("k")
    p = k.ld_param(k.param(t.pred, "p"))
    with k.if_(p):
        k.add(k.mov(1, type=t.u32), 1)
    with k.else_():
        k.add(k.mov(2, type=t.u32), 2)
    k.ret()
    cfg = CFG(k.body)
    entry = cfg.blocks[0]
    assert entry.branch is not None and len(entry.succs) == 2
    then, other = cfg.block_of(_index(k, "mov.u32")), entry.taken
    assert then == entry.fall and then != other
    join = cfg.ipdom[0]
    assert join == cfg.ipdom[then] == cfg.ipdom[other] and cfg.blocks[join].exits
    assert cfg.blocks[join].exit_stmt == len(k.body) - 1


def test_cfg_guarded_ret_and_loops():
    k = Kernel("k")
    n = k.ld_param(k.param(t.u32, "n"))
    with k.guard(n == 0):
        k.ret()
    with k.for_range(0, n):
        k.add(n, 1)
    cfg = CFG(k.body)
    ret_block = cfg.blocks[cfg.block_of(_index(k, "ret"))]
    assert ret_block.exits and cfg.exit in ret_block.succs and len(ret_block.succs) == 2
    loops = natural_loops(cfg)
    assert len(loops) == 1
    header, body = loops[0]
    assert cfg.block_of(_index(k, "add.u32")) in body and header in body


def test_cfg_constant_guard_in_a_one_thread_cta():
    # With .reqntid 1, %tid.x is 0: `if tid.x != 0` never runs its body.
    k = Kernel("k", reqntid=1)
    with k.if_(k.tid.x != 0):
        k.trap()
    values = Values(k.body, 1)
    cfg = CFG(k.body, values.guard_value)
    assert len(cfg.blocks[0].succs) == 1
    assert values.const(k.body[1].insn.p) == 0


# -- values: constants, provenance, divergence ----------------------------------------------------
def test_address_provenance_through_mov_cvta_add():
    k = Kernel("k")
    smem = k.shared_array(t.b8, 256, align=128, name="buf")
    ptr = k.param_ptr("out")
    a = k.mov(smem)
    g = k.cvta(k.mov(smem, type=t.u64), "shared")
    b = k.add(a, 64)
    c = k.add(b, k.ld_param(k.param(t.u32, "off")))
    p = k.ld_param(ptr)
    q = k.cvta(k.add(p, 128), "global", to=True)
    v = Values(k.body)
    assert (v.val(a).kind, v.val(a).root, v.val(a).offset, v.val(a).space) == (
        Kind.addr, smem, 0, StateSpace.shared)
    assert v.val(g).space is StateSpace.generic and v.val(g).root is smem
    assert v.val(b).key == (smem, 64) and v.val(c).key == (smem, None)
    assert v.val(p).kind is Kind.value and v.val(p).root is ptr
    assert v.val(q).key == (ptr, 128) and v.val(q).space is StateSpace.global_


def test_constants_fold_and_multiple_writes():
    k = Kernel("k")
    x = k.mov(6, type=t.u32)
    y = k.shl(k.add(x, 2), 1)
    z = k.mov(1, type=t.u32)
    k.xor(z, 1, dst=z)        # written twice, not one constant
    w = k.mov(3, type=t.u32)
    k.mov(3, dst=w)           # written twice with the same constant
    v = Values(k.body)
    assert v.const(y) == 16 and v.const(z) is None and v.const(w) == 3


def test_divergence_levels():
    k = Kernel("k")
    tid = k.tid.x
    lane_pred = tid == 0
    warp = k.shr(tid, 5)
    warp_pred = warp == 1
    block = k.ctaid.x == 0
    lane, warpid = k.laneid, k.warpid
    v = Values(k.body)
    assert v.level(lane_pred) == 2 and v.level(lane) == 2
    assert v.level(warp) == 1 and v.level(warp_pred) == 1 and v.level(warpid) == 1
    assert v.level(block) == 0
    assert Values(k.body, nthreads=32).level(warpid) == 0


def test_shfl_broadcast_is_warp_uniform():
    """shfl.sync.idx from a lane that is the same in every lane of the warp (a constant, a
    parameter, the warp index) gives every lane one value; other modes, a per-lane source
    lane, a partial member mask or a split segment stay per-lane."""
    k = Kernel("k")
    mine = k.mov(k.tid.x)
    src = k.ld_param(k.param(t.u32, "src"))
    warp = k.shr(k.tid.x, 5)
    cases = {"bcast": k.shfl_sync("idx", mine, 0), "bcast7": k.shfl_sync("idx", mine, 7),
             "param_lane": k.shfl_sync("idx", mine, src),
             "warp_lane": k.shfl_sync("idx", mine, warp),
             "down": k.shfl_sync("down", mine, 1), "lane_reg": k.shfl_sync("idx", mine, mine),
             "half_mask": k.shfl_sync("idx", mine, 0, mask=0xFFFF),
             "segments": k.shfl_sync("idx", mine, 0, 0x81F)}
    v = Values(k.body)
    assert {n: v.level(r) for n, r in cases.items()} == {
        "bcast": 1, "bcast7": 1, "param_lane": 1, "warp_lane": 1, "down": 2, "lane_reg": 2,
        "half_mask": 2, "segments": 2}


def test_divergent_region_tokens():
    k = Kernel("k")
    with k.if_(k.tid.x == 0):
        k.mov(1, type=t.u32)
        with k.if_(k.ld_param(k.param(t.pred, "p"))):   # uniform: adds no condition
            k.mov(2, type=t.u32)
    with k.if_(k.tid.x == 0):
        k.mov(3, type=t.u32)
    k.mov(4, type=t.u32)
    values = Values(k.body)
    div = Divergence(CFG(k.body), values)
    at = {s.insn.a.value: i for i, s in enumerate(k.body)
          if isinstance(s, Statement) and s.insn.opcode() == "mov.u32"
          and hasattr(s.insn.a, "value")}
    assert div.stmt_tokens(at[1]) == div.stmt_tokens(at[2]) == div.stmt_tokens(at[3])
    assert div.stmt_tokens(at[4]) == frozenset() and div.stmt_level(at[1]) == 2
    assert div.same_threads(at[1], at[3]) and not div.same_threads(at[1], at[4])
    assert div.same_threads(at[4], at[1])


# -- findings --------------------------------------------------------------------------------------
def test_every_hazard_has_a_severity_title_and_fix():
    for h in Hazard:   # the fix names its source: a digest section or the guide
        assert isinstance(h.severity, Severity) and h.title and re.search(r"\[.+\]$", h.fix)
    assert len({h.value for h in Hazard}) == len(Hazard)


def _unacquired() -> tuple[Kernel, int]:
    k = Kernel("k", reqntid=32)
    tmap = k.ld_param(k.param_ptr("tmap_ptr"))
    line = here() + 1
    ptx.cp_async_bulk_prefetch_tensor(k, tmap, (0, 0))
    return k, line


def test_finding_text_names_hazard_instructions_lines_and_fix():
    call = here() + 1
    k, line = _unacquired()
    (f,) = check_kernel(k)
    text = f.format()
    assert text.startswith(f"{__file__}:{line}: error[tmap-no-acquire] kernel 'k': ")
    assert "cp.async.bulk.prefetch.tensor.2d.L2.global.tile [%rd1, {0, 0}];" in text
    # Built inside a helper: the site also names the user's call of that helper.
    assert f"({__file__}:{line}, called from {__file__}:{call})" in text
    assert f.loc.caller.line == call and "\n    fix: run `fence.proxy.tensormap" in text
    assert f.id == "tmap-no-acquire" and f.severity is Severity.error and str(f) == text


def test_every_hazard_id_is_documented():
    # docs/hazards.md: a section per id with an example, the fix and what the checker misses.
    doc = (ROOT / "docs" / "hazards.md").read_text()
    documented = set(re.findall(r"^### `([a-z0-9-]+)`$", doc, re.M))
    assert {h.value for h in Hazard} - documented == set()
    assert documented - {h.value for h in Hazard} == set()


def test_notes_only_on_request():
    k = Kernel("k", reqntid=128)
    tmap = k.tensormap_addr(k.param_tensormap("tmap"))
    tile = k.shared_array(t.b8, 512, align=128, name="tile")
    bar = k.shared_array(t.b64, 1, align=8, name="bar")
    with k.if_(k.tid.x == 0):
        ptx.mbarrier_init(k, bar, 1)
        ptx.fence_proxy_async(k, "shared::cta")
        ptx.mbarrier_arrive_expect_tx(k, "release", "cta", "shared::cta", bar, 512, dst="_")
        ptx.cp_async_bulk_tensor(k, "shared::cluster", "global", tile, tmap, (0, 0), bar)
    k.bar_sync(0)
    ptx.mbarrier_wait(k, bar, 0)
    assert check_kernel(k) == []                       # the box size is unknown: no finding
    (note,) = check_kernel(k, notes=True)
    assert note.severity is Severity.note and note.id == "check-skipped"
    assert note.message.startswith("expect-tx: expect_tx bytes of k: not checked, no box "
                                   "size known for tmap") and note.format().startswith(
        f"{__file__}:")
    mod = Module(target="sm_90a")
    mod.add(k)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        mod.emit()                                     # notes never warn


def test_unknown_context_is_refused():
    with pytest.raises(TypeError, match="unknown checker context"):
        check_kernel(Kernel("k"), host_map=["x"])


# -- Module.emit(), Kernel.check(), Module.check() -------------------------------------------------
def test_emit_warns_at_the_hazard_line():
    k, line = _unacquired()
    with pytest.warns(PtxdslHazardWarning) as rec:
        Module([k]).emit()
    (w,) = [r for r in rec if r.category is PtxdslHazardWarning]
    assert (w.filename, w.lineno) == (__file__, line)
    assert "error[tmap-no-acquire]" in str(w.message)


def test_emit_checks_once_per_module_shape():
    k, _ = _unacquired()
    mod = Module([k])
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        mod.emit()
        mod.emit()
    assert len([r for r in rec if r.category is PtxdslHazardWarning]) == 1


def test_emit_strict_raises_and_check_false_is_silent(monkeypatch):
    k, line = _unacquired()
    with pytest.raises(HazardError, match="tmap-no-acquire") as err:
        Module([k], strict=True).emit()
    assert err.value.loc.line == line and len(err.value.findings) == 1
    monkeypatch.setenv("PTXDSL_STRICT", "1")
    with pytest.raises(HazardError):
        Module([k]).emit()
    with pytest.warns(PtxdslHazardWarning):          # an explicit strict=False wins
        Module([k], strict=False).emit()
    monkeypatch.delenv("PTXDSL_STRICT")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        Module([k], check=False).emit()


def test_emit_passes_context_to_the_checker():
    e = Tma(map="global", scope="gpu")
    e.setup()
    e.load()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        Module([e.k]).emit()                       # .gpu is fine without context
    with pytest.raises(HazardError, match="tmap-acquire-scope"):
        Module([e.k], check={"host_maps": ["tmap_ptr"]}, strict=True).emit()


def test_module_check_uses_the_emit_context():
    e = Tma(map="global", scope="gpu")
    e.setup()
    e.load()
    mod = Module([e.k], check={"host_maps": ["tmap_ptr"]})
    assert ids(mod.check()) == ids(check_module(mod)) == ["tmap-acquire-scope"]
    assert mod.check(host_maps=[]) == []           # explicit context wins


def test_kernel_and_module_check_methods():
    k, _ = _unacquired()
    assert ids(k.check()) == ids(Module([k]).check()) == ["tmap-no-acquire"]
    with pytest.raises(HazardError):
        k.check(strict=True)
    with pytest.raises(HazardError):
        Module([k], check=False).check(strict=True)
    clean = Kernel("clean")
    clean.ret()
    assert clean.check(strict=True) == [] and check_module(Module([clean])) == []


# -- the command line ------------------------------------------------------------------------------
def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = child_env()
    env.pop("PTXDSL_STRICT", None)
    return subprocess.run([sys.executable, "-m", "ptxdsl", "check", *args], capture_output=True,
                          text=True, cwd=cwd, env=env, timeout=300)


HAZARDOUS = '''\
from ptxdsl import Addr, Kernel, Module, ptx, t

k = Kernel("consume", reqntid=32)
tmap = k.ld_param(k.param_ptr("tmap_ptr"))
ptx.cp_async_bulk_prefetch_tensor(k, tmap, (0, 0))
mod = Module([k])
'''


def test_cli_check_prints_the_finding_with_its_python_line(tmp_path):
    src = tmp_path / "hazard.py"
    src.write_text(HAZARDOUS)
    res = _cli(str(src), cwd=tmp_path)
    assert res.returncode == 1, res.stderr
    assert f"{src}:5: error[tmap-no-acquire] kernel 'consume'" in res.stdout
    assert "fix: run `fence.proxy.tensormap::generic.acquire" in res.stdout


def test_cli_check_clean_file_and_strict_warnings(tmp_path):
    src = tmp_path / "clean.py"
    src.write_text(HAZARDOUS.replace(
        "ptx.cp_async", "ptx.fence_proxy_tensormap_generic(k, 'acquire', 'gpu', tmap)\n"
        "ptx.cp_async"))
    res = _cli(str(src), cwd=tmp_path)
    assert res.returncode == 0 and "mod: no hazards found" in res.stdout, res.stdout
    warn = tmp_path / "warn.py"   # a warning-severity hazard: an under-aligned TMA buffer
    warn.write_text(HAZARDOUS.replace(
        "ptx.cp_async_bulk_prefetch_tensor(k, tmap, (0, 0))",
        "ptx.fence_proxy_tensormap_generic(k, 'acquire', 'gpu', tmap)\n"
        "bar = k.shared_array(t.b64, 1, align=8, name='bar')\n"
        "tile = k.shared_array(t.b8, 512, align=32, name='tile')\n"
        "ptx.mbarrier_init(k, bar, 1)\n"
        "ptx.fence_proxy_async(k, 'shared::cta')\n"
        "ptx.cp_async_bulk_tensor(k, 'shared::cluster', 'global', tile, tmap, (0, 0), bar)\n"
        "ptx.mbarrier_arrive_expect_tx(k, None, None, None, bar, 512)\n"
        "ptx.mbarrier_wait(k, bar, 0)").replace('reqntid=32', 'reqntid=1'))
    res = _cli(str(warn), cwd=tmp_path)
    assert res.returncode == 0 and "warning[tma-smem-align]" in res.stdout, res.stdout
    assert _cli("--strict", str(warn), cwd=tmp_path).returncode == 1
    noted = tmp_path / "noted.py"  # clean, but the box size is unknown: a note on request only
    noted.write_text(warn.read_text().replace("align=32", "align=128"))
    res = _cli("--strict", str(noted), cwd=tmp_path)
    assert res.returncode == 0 and "note[" not in res.stdout, res.stdout
    res = _cli("--strict", "--notes", str(noted), cwd=tmp_path)
    assert res.returncode == 0 and "note[check-skipped]" in res.stdout, res.stdout
    assert "mod: no hazards found" in res.stdout


# -- the samples and the README check clean --------------------------------------------------------
@pytest.mark.parametrize("path", sample_files(), ids=lambda p: p.stem)
def test_samples_check_clean(path):
    ns = runpy.run_path(str(path), run_name="__ptxdsl_test__")
    mod = ns["build_module"]()
    assert [f.format() for f in mod.check()] == []


def test_readme_examples_check_clean(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    # The README's blocks continue one another; the ones marked for a GPU are skipped here.
    blocks = re.findall(r"```python\n(.*?)\n```", (ROOT / "README.md").read_text(), re.S)
    cpu_blocks = [b for b in blocks if not b.startswith("# on a Hopper GPU")]
    assert cpu_blocks
    ns: dict = {}
    for code in cpu_blocks:
        exec(compile(code, "README.md", "exec"), ns)
    mods = [v for v in ns.values() if isinstance(v, Module)]
    kernels = [v for v in ns.values() if isinstance(v, Kernel)]
    assert mods and kernels
    for m in mods:
        assert [f.format() for f in m.check()] == []
    for k in kernels:
        assert [f.format() for f in k.check()] == []


def _pipeline(consumer_parity=None) -> Kernel:
    """Two stages, a producer warp (one elected lane issues the TMA) and consumer warps; the
    stage and its phase parity are computed at run time, so are the barrier addresses."""
    k = Kernel("pipeline", reqntid=160)
    tmap = k.tensormap_addr(k.param_tensormap("tmap"))
    n = k.ld_param(k.param(t.u32, "n_tiles"))
    full = k.shared_array(t.b64, 2, align=8, name="full")
    empty = k.shared_array(t.b64, 2, align=8, name="empty")
    tiles = k.shared_array(t.b8, 1024, align=1024, name="tiles")
    with k.if_(k.tid.x == 0):
        for s in range(2):
            ptx.mbarrier_init(k, Addr(full, 8 * s), 1)
            ptx.mbarrier_init(k, Addr(empty, 8 * s), 128)
        ptx.fence_proxy_async(k, "shared::cta")
    k.bar_sync(0)
    warp = k.shr(k.tid.x, 5)

    def stage_of(i):
        return k.and_(i, 1, type=t.b32), k.and_(k.shr(i, 1), 1, type=t.b32)

    with k.if_(warp == 0):
        with k.for_range(0, n) as i:
            s, phase = stage_of(i)
            with k.if_(k.elect_sync()):
                ptx.mbarrier_wait(k, k.add(k.mov(empty), k.shl(s, 3)), k.xor(phase, 1))
                bar = k.add(k.mov(full), k.shl(s, 3))
                ptx.mbarrier_arrive_expect_tx(k, "release", "cta", "shared::cta", bar, 512,
                                              dst="_")
                dst = k.add(k.mov(tiles), k.shl(s, 9))
                ptx.cp_async_bulk_tensor(k, "shared::cluster", "global", dst, tmap, (0, i), bar)
    with k.else_():
        with k.for_range(0, n) as i:
            s, phase = stage_of(i)
            parity = phase if consumer_parity is None else consumer_parity
            ptx.mbarrier_wait(k, k.add(k.mov(full), k.shl(s, 3)), parity)
            k.ld(k.add(k.mov(tiles), k.shl(s, 9)), type=t.u32, space="shared::cta")
            ptx.mbarrier_arrive(k, k.add(k.mov(empty), k.shl(s, 3)), dst="_")
    k.ret()
    return k


def test_warp_specialized_pipeline_checks_clean():
    k = _pipeline()
    assert [f.format() for f in check_kernel(k, maps={"tmap": {"box_bytes": 512}})] == []


def test_pipeline_consumer_waiting_on_a_constant_parity():
    k = _pipeline(consumer_parity=0)   # the ring of barriers comes round again: phase 1, 0, ...
    assert ids(check_kernel(k, maps={"tmap": {"box_bytes": 512}})) == ["wait-parity-constant"]
