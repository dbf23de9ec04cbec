"""The checker's context without `maps=`: box sizes a kernel declares (`param_tensormap(box=)`,
`MbarrierRing(loads=)`), the per-kernel `maps=` form, and the line the command line prints
when an expect_tx count could not be checked (docs/hazards.md, "Context")."""

from __future__ import annotations

import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from ptxdsl import Addr, Kernel, Module, PtxdslError, ptx, t
from ptxdsl.checker import PtxdslHazardWarning, check_kernel, check_module
from ptxdsl.instructions.wgmma_desc import SmemLayout
from ptxdsl.pipeline import MbarrierRing
from ptxdsl.runtime.tensormap_desc import TiledDesc

ROOT = Path(__file__).resolve().parents[1]
LAYOUT = SmemLayout(t.bf16, 64, 64, "K", "128B")     # one atom column: 64 x 64 bf16, 8192 B


def _load(k: Kernel, param, nbytes: int, tile_bytes: int = 8192) -> None:
    """Thread 0 announces `nbytes` and loads one box through `param` onto one barrier; every
    thread waits."""
    tmap = k.tensormap_addr(param)
    tile = k.shared_array(t.b8, tile_bytes, align=1024, name="tile")
    bar = k.shared_array(t.b64, 1, align=8, name="bar")
    with k.if_(k.tid.x == 0):
        ptx.mbarrier_init(k, bar, 1)
        ptx.fence_proxy_async(k, "shared::cta")
        ptx.mbarrier_arrive_expect_tx(k, "release", "cta", "shared::cta", bar, nbytes, dst="_")
        ptx.cp_async_bulk_tensor(k, "shared::cluster", "global", tile, tmap, (0, 0), bar)
    k.bar_sync(0)
    ptx.mbarrier_wait(k, bar, 0)


def _ids(findings) -> list[str]:
    return [f.id for f in findings]


def _mismatch(findings, announced: int, delivered: int) -> None:
    (f,) = findings
    assert f.id == "expect-tx-mismatch", f.format()
    assert f"announces {announced} bytes" in f.message and f"deliver {delivered} bytes" in \
        f.message, f.message


# -- what the kernel declares ----------------------------------------------------------------------
def test_a_declared_box_finds_a_wrong_count_without_context():
    k = Kernel("k", reqntid=128)
    _load(k, k.param_tensormap("tmap", box=(16, 8), dtype=t.f32), 256)
    _mismatch(check_kernel(k), 256, 512)
    mod = Module([k], target="sm_90a")
    with pytest.warns(PtxdslHazardWarning, match="expect_tx announces 256 bytes"):
        mod.emit()


def test_a_declared_box_that_matches_is_clean_and_checked():
    k = Kernel("k", reqntid=128)
    p = k.param_tensormap("tmap", box=(16, 8), dtype="f32", swizzle="32B")
    _load(k, p, 512)
    assert check_kernel(k, notes=True) == []         # checked: no note that it was skipped
    assert k.map_boxes[p].box_bytes == 512 and k.map_boxes[p].swizzle_repeat == 256


def test_a_layout_declares_its_atom_column_box():
    k = Kernel("k", reqntid=128)
    _load(k, k.param_tensormap("tmap", box=LAYOUT), 4096)
    _mismatch(check_kernel(k), 4096, 8192)
    k2 = Kernel("k", reqntid=128)
    wide = SmemLayout(t.bf16, 64, 128, "K", "128B")    # two atom columns: a box is one
    _load(k2, k2.param_tensormap("tmap", box=wide), wide.nbytes // 2, wide.nbytes)
    assert check_kernel(k2, notes=True) == []


def test_a_tiled_desc_declares_its_box():
    desc = TiledDesc.from_numpy_order(1 << 20, (256, 256), "float32", (8, 32), swizzle="128B")
    k = Kernel("k", reqntid=128)
    _load(k, k.param_tensormap("tmap", box=desc), 512)
    _mismatch(check_kernel(k), 512, 1024)


def test_a_ring_told_its_loads_declares_their_boxes():
    def build(nbytes: int) -> Kernel:
        k = Kernel("k", reqntid=128)
        m = k.param_tensormap("tmap")
        ring = MbarrierRing(k, 2, loads={m: ((64, 32), t.bf16)})   # 4096 bytes a box
        tiles = k.shared_array(t.b8, 2 * 4096, align=128, name="tiles")
        tmap = k.tensormap_addr(m)
        ring.init()
        with k.if_(k.tid.x == 0):
            p = ring.producer()
            with k.for_range(0, 8):
                p.wait_empty()
                p.arrive_expect_tx(nbytes)
                ptx.cp_async_bulk_tensor(k, "shared::cluster", "global", p.slot(tiles, 4096),
                                         tmap, (0, 0), p.full_barrier())
                p.advance()
        with k.else_():
            c = ring.consumer()
            with k.for_range(0, 8):
                c.wait_full()
                with k.if_(k.and_(k.tid.x, 31) == 0):
                    c.release()
                c.advance()
        return k
    k = build(4096)
    assert k.map_boxes[k.params[0]].box_bytes == 4096
    assert "expect-tx" not in " ".join(f.message for f in check_kernel(k, notes=True))
    assert "expect-tx-mismatch" in _ids(check_kernel(build(2048)))


def test_the_callers_context_overrides_a_declaration():
    k = Kernel("k", reqntid=128)
    _load(k, k.param_tensormap("tmap", box=(16, 8), dtype=t.f32), 1024)
    _mismatch(check_kernel(k), 1024, 512)
    assert check_kernel(k, maps={"tmap": {"box_bytes": 1024}}) == []
    assert check_kernel(k, maps={"k": {"tmap": {"box_bytes": 1024}}}) == []


# -- the context, per kernel -----------------------------------------------------------------------
def _two_kernels(**module) -> Module:
    """Two kernels with a parameter of one name whose maps have different boxes."""
    k1, k2 = Kernel("copy_small", reqntid=128), Kernel("copy_big", reqntid=128)
    _load(k1, k1.param_tensormap("tmap"), 512)
    _load(k2, k2.param_tensormap("tmap"), 1024)
    return Module([k1, k2], target="sm_90a", **module)


def test_maps_per_kernel_tell_same_named_parameters_apart():
    mod = _two_kernels()
    assert check_module(mod, maps={"copy_small": {"tmap": {"box_bytes": 512}},
                                   "copy_big": {"tmap": {"box_bytes": 1024}}}) == []
    swapped = check_module(mod, maps={"copy_small": {"tmap": {"box_bytes": 1024}},
                                      "copy_big": {"tmap": {"box_bytes": 512}}})
    assert sorted(f.kernel for f in swapped) == ["copy_big", "copy_small"]
    assert set(_ids(swapped)) == {"expect-tx-mismatch"}
    # a kernel's own entry first, then the module-wide one (the old form)
    mixed = {"tmap": {"box_bytes": 512}, "copy_big": {"tmap": {"box_bytes": 1024}}}
    assert check_module(mod, maps=mixed) == []
    by_kernel = {mod.kernels[1]: {"tmap": LAYOUT}, "tmap": {"box_bytes": 512}}
    _mismatch(check_module(mod, maps=by_kernel), 1024, 8192)


def test_a_modules_emit_time_context_may_be_per_kernel():
    mod = _two_kernels(check={"maps": {"copy_small": {"tmap": {"box_bytes": 512}},
                                       "copy_big": {"tmap": {"box_bytes": 1024}}}})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        mod.emit()
    swapped = _two_kernels(check={"maps": {"copy_small": {"tmap": {"box_bytes": 1024}}}})
    with pytest.warns(PtxdslHazardWarning, match="announces 512 bytes"):
        swapped.emit()


def test_the_old_module_wide_form_still_applies_to_every_kernel():
    mod = _two_kernels()
    (f,) = check_module(mod, maps={"tmap": {"box_bytes": 512}})
    assert f.kernel == "copy_big" and f.id == "expect-tx-mismatch"
    assert mod.check(maps={"tmap": {"box_bytes": 512}}) == [f]


# -- saying what was not checked -------------------------------------------------------------------
NOT_CHECKED = "expect_tx bytes of k: not checked, no box size known for tmap; declare it"


def test_an_unknown_box_is_a_note_naming_the_map_and_the_declaration():
    k = Kernel("k", reqntid=128)
    _load(k, k.param_tensormap("tmap"), 512)
    assert check_kernel(k) == []
    (note,) = check_kernel(k, notes=True)
    assert note.unchecked.startswith(NOT_CHECKED) and "k.param_tensormap('tmap', box=" in \
        note.unchecked and note.message == f"expect-tx: {note.unchecked}"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        Module([k], target="sm_90a").emit()          # emit() stays silent


def test_the_command_line_says_which_counts_it_did_not_check(tmp_path):
    src = tmp_path / "unchecked.py"
    src.write_text(
        "from ptxdsl import Kernel, Module, ptx, t\n"
        "k = Kernel('k', reqntid=1)\n"
        "tmap = k.tensormap_addr(k.param_tensormap('tmap'))\n"
        "bar = k.shared_array(t.b64, 1, align=8, name='bar')\n"
        "tile = k.shared_array(t.b8, 512, align=128, name='tile')\n"
        "ptx.mbarrier_init(k, bar, 1)\n"
        "ptx.fence_proxy_async(k, 'shared::cta')\n"
        "ptx.cp_async_bulk_tensor(k, 'shared::cluster', 'global', tile, tmap, (0, 0), bar)\n"
        "ptx.mbarrier_arrive_expect_tx(k, None, None, None, bar, 512)\n"
        "ptx.mbarrier_wait(k, bar, 0)\n"
        "mod = Module([k], target='sm_90a')\n")
    res = subprocess.run([sys.executable, "-m", "ptxdsl", "check", str(src)], cwd=tmp_path,
                         capture_output=True, text=True, env={"PYTHONPATH": str(ROOT)})
    assert res.returncode == 0, res.stdout + res.stderr
    assert f"{src}:8: {NOT_CHECKED}" in res.stdout and "note[" not in res.stdout, res.stdout
    assert "mod: no hazards found" in res.stdout
    declared = tmp_path / "declared.py"
    declared.write_text(src.read_text().replace(
        "k.param_tensormap('tmap')", "k.param_tensormap('tmap', box=(16, 32), dtype='u8')"))
    res = subprocess.run([sys.executable, "-m", "ptxdsl", "check", str(declared)],
                         cwd=tmp_path, capture_output=True, text=True,
                         env={"PYTHONPATH": str(ROOT)})
    assert res.returncode == 0 and "not checked" not in res.stdout, res.stdout


# -- refusals --------------------------------------------------------------------------------------
def _refused(match: str, call) -> None:
    with pytest.raises(PtxdslError, match=match) as e:
        call()
    assert e.value.loc is not None and e.value.loc.file == __file__, e.value


def test_a_box_without_its_element_type_is_refused():
    k = Kernel("k")
    _refused(r"param_tensormap: operand 'dtype': expected the element type of the box",
             lambda: k.param_tensormap("m", box=(64, 64)))
    _refused(r"param_tensormap: operand 'box': expected the box dimensions",
             lambda: k.param_tensormap("m", dtype=t.bf16))
    assert k.params == [] and dict(k.map_boxes) == {}     # a refused call adds nothing


def test_a_box_past_tmas_limits_or_a_bad_swizzle_is_refused():
    k = Kernel("k")
    _refused(r"operand 'box': expected 1 to 5 positive box dimensions of at most 256",
             lambda: k.param_tensormap("m", box=(512, 2), dtype=t.f32))
    _refused(r"operand 'swizzle': expected none, 32B, 64B or 128B",
             lambda: k.param_tensormap("m", box=(8, 8), dtype=t.f32, swizzle="256B"))
    _refused(r"operand 'dtype, swizzle': expected nothing beside an SmemLayout",
             lambda: k.param_tensormap("m", box=LAYOUT, dtype=t.bf16))


def test_a_ring_load_that_is_not_a_map_parameter_is_refused():
    k = Kernel("k")
    m = k.param_tensormap("m")
    _refused(r"MbarrierRing: operand 'loads': expected this kernel's tensor-map parameters",
             lambda: MbarrierRing(k, 2, loads={k.tensormap_addr(m): LAYOUT}))
    other = Kernel("other").param_tensormap("m")
    _refused(r"operand 'loads': expected this kernel's tensor-map parameters",
             lambda: MbarrierRing(k, 2, loads={other: LAYOUT}))
    _refused(r"operand 'loads': expected a dict from tensor-map parameters",
             lambda: MbarrierRing(k, 2, loads=[m]))
    assert dict(k.map_boxes) == {} and k.shared == []
    # a ring refused after its loads were declared takes its declarations back with it
    _refused(r"MbarrierRing: operand 'storage'",
             lambda: MbarrierRing(k, 2, loads={m: LAYOUT}, storage=Addr(k.extern_shared(
                 "dyn", align=16), 4)))
    assert dict(k.map_boxes) == {}


def test_a_second_different_box_for_one_map_is_refused():
    k = Kernel("k")
    m = k.param_tensormap("m", box=LAYOUT)
    MbarrierRing(k, 2, loads={m: ((64, 64), t.bf16)}, name="same")    # the same 8192 bytes
    _refused(r"operand 'loads': expected the box already declared for m \(the TMA box of "
             r"SmemLayout .*: 8192 bytes, swizzle repeat 1024\), got box \[64, 32\] of bf16: "
             r"4096 bytes",
             lambda: MbarrierRing(k, 2, loads={m: ((64, 32), "bf16")}, name="other"))
    assert k.map_boxes[m].box_bytes == 8192


def test_a_malformed_maps_entry_is_refused():
    k = Kernel("k", reqntid=128)
    _load(k, k.param_tensormap("tmap"), 512)
    _refused(r"check_module: operand 'maps\['tmap'\]': expected a description \{'box_bytes'",
             lambda: check_kernel(k, maps={"tmap": {"box": 512}}))
    _refused(r"operand 'maps\['k'\]': expected a description",
             lambda: check_kernel(k, maps={"k": {"tmap": 512}}))
    _refused(r"operand 'maps\['tmap'\]': expected a TiledDesc, a TensorMap",
             lambda: check_kernel(k, maps={"k": {"tmap": [512]}}))
    _refused(r"operand 'maps': expected a dict from a parameter's name",
             lambda: check_kernel(k, maps=[("tmap", 512)]))
