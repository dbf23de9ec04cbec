"""`wgmma-swizzle-mismatch`: a wgmma descriptor whose swizzle is not the one the TMA map wrote
its tile with. Found where both are known (a declared or passed map, a constant
`tensormap.replace ... swizzle_mode`; descriptors as ptxdsl, nvcc, CUTLASS and Triton build
them), silent where they agree or where the tile's writer is not known."""

from __future__ import annotations

from pathlib import Path

import pytest

import samples.wgmma_gemm_simple as simple
from ptxdsl import t
from ptxdsl.checker import check_kernel
from ptxdsl.checker import hazards_swizzle as hs
from ptxdsl.checker.analysis import Analysis
from ptxdsl.checker.context import swizzle_width
from ptxdsl.frontend import parse_ptx
from ptxdsl.instructions.wgmma_desc import SmemLayout

ID = "wgmma-swizzle-mismatch"
CORPUS = Path(__file__).parent / "corpus" / "ptx"


def _ids(found) -> list[str]:
    return [f.hazard.value for f in found]


@pytest.mark.parametrize("swizzle", ["none", "32B", "64B", "128B"])
def test_built_kernel_against_the_map_it_is_given(swizzle):
    """The sample's descriptors say 128B; a map said to be written otherwise is found once
    (not once per k-step), naming both sides."""
    found = check_kernel(simple.build_gemm(), maps={"map_b": {"swizzle": swizzle}})
    if swizzle == "128B":
        assert found == []
        return
    assert _ids(found) == [ID]
    msg = found[0].message
    assert "B descriptor" in msg and "tile_b" in msg and "128B swizzle (layout type 1)" in msg
    assert ("no swizzle" if swizzle == "none" else f"{swizzle} swizzle") in msg
    # the wgmma and the copy, each at the sample's line that built it
    assert len(found[0].sites) == 2
    assert all("wgmma_gemm_simple.py" in str(s.loc) for s in found[0].sites)


def test_declared_layouts_agree_and_a_64b_kernel_is_told_from_a_128b_map(monkeypatch):
    """A kernel whose layouts (descriptors and declared boxes) are all 64B has no swizzle
    finding (its one load per tile now moves half a tile: expect-tx-mismatch, another
    rule's); the same kernel given a 128B map is found: the descriptor side of the
    comparison."""
    for name, rows in (("LAYOUT_A", simple.BM), ("LAYOUT_B", simple.BN)):
        monkeypatch.setattr(simple, name, SmemLayout(t.bf16, rows, simple.BK, "K", "64B"))
    k = simple.build_gemm()
    assert ID not in _ids(check_kernel(k))
    found = [f for f in check_kernel(k, maps={"map_a": {"swizzle": "128B"}})
             if f.hazard.value == ID]
    assert len(found) == 1 and "64B swizzle (layout type 2)" in found[0].message


@pytest.mark.parametrize("rel,maps", [("nvcc_ptx/fa3_pingpong.ptx", 3),
                                      ("nvcc_ptx/wgmma_staged_a.ptx", 1),
                                      ("nvcc_ptx/cluster_ring_mc2.ptx", 2)])
@pytest.mark.parametrize("swizzle", ["128B", "64B", "none"])
def test_nvcc_kernels_with_their_maps_described(rel, maps, swizzle):
    """nvcc's descriptors (`and` before or after `shr 4`, `cvt.u64.u32`, `or.b64` of the
    fields) read against host maps described by `maps=`: the 128B the kernels were written
    for checks clean; any other swizzle is found once per map (Q, K and V; A and B)."""
    m = parse_ptx((CORPUS / rel).read_text(), file=rel)
    names = [p.name for p in m.kernels[0].params[:maps]]
    found = _ids(m.check(maps={n: {"swizzle": swizzle} for n in names}))
    assert found == ([] if swizzle == "128B" else [ID] * maps)


def _layouts(rel: str) -> list:
    """layout_of for every wgmma descriptor of a corpus file's first kernel."""
    got = []
    orig = hs.swizzle_mismatch

    def spy(an: Analysis) -> None:
        for op in an.ops:
            if op.role is hs.Role.WGMMA:
                insn = an.body[op.index].insn
                descs = [insn.b_desc] + ([] if isinstance(insn.a, tuple) else [insn.a])
                got.extend(hs.layout_of(an, d) for d in descs)
        orig(an)

    at = hs.STRUCTURAL.index(orig)
    hs.STRUCTURAL[at] = spy
    try:
        parse_ptx((CORPUS / rel).read_text(), file=rel).check()
    finally:
        hs.STRUCTURAL[at] = orig
    return got


@pytest.mark.parametrize("rel", ["nvcc_cutlass/cutlass_ws_bf16.ptx",
                                 "triton/tl_persistent_matmul_desc.ptx"])
def test_descriptors_read_as_cutlass_and_triton_build_them(rel):
    """CUTLASS's k-steps repack the descriptor from 32-bit halves (`mov.b64 {lo, hi}`);
    Triton masks the start field with `and 0x7FFF` or `bfe x, 4, 15`. Every wgmma operand's
    layout type is read (1: 128B) with the shared address it starts from."""
    got = _layouts(rel)
    assert got and all(g is not None and g[0] == 1 for g in got)


def test_maps_in_one_workspace_at_unknown_offsets_are_not_judged():
    """Triton's device-encoded maps live in one global workspace at offsets the checker
    cannot tell apart: one map's swizzle_mode changed to 64B makes the tile's writers
    disagree, which is not evidence of a mismatch (the rule stays silent rather than guess)."""
    rel = "triton/tl_persistent_matmul_desc.ptx"
    text = (CORPUS / rel).read_text()
    line = "tensormap.replace.tile.swizzle_mode.shared::cta.b1024.b32 [ %rd7 + 0 ], 0x3;"
    assert text.count(line) == 1
    assert ID not in _ids(parse_ptx(text.replace(line, line.replace("0x3", "0x2"))).check())


@pytest.mark.parametrize("given,width", [("none", 0), ("32B", 32), ("64B", 64), ("128B", 128),
                                         ("CU_TENSOR_MAP_SWIZZLE_128B", 128), (3, 128),
                                         ("128B_ATOM_32B", 128), (None, None), ("256B", None)])
def test_swizzle_width_of_a_description(given, width):
    """"none" is known (0), a missing swizzle is not (None): only the first can be compared."""
    assert swizzle_width(given) == width
