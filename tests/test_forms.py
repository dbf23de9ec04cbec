"""The forms table (`python -m ptxdsl forms`): every row of the tensormap, fence and mbarrier
families is backed by the code (a sample instruction of the row needs exactly the row's
Requires), and the rows agree with the digest's §0.1 matrix except where ptxas says otherwise.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from ptxdsl import Addr, ptx
from ptxdsl.forms import FAMILIES, all_forms, forms_table, target_text
from ptxdsl.instructions.tensormap_values import REPLACE
from ptxdsl.operands import SINK
from tests.tma_cases import Env

MINE = ("tensormap", "fence", "mbarrier", "mbarrier_wait")
ROWS = {r.form: r for r in all_forms(MINE)}
SS, CL, GL, GEN = "shared::cta", "shared::cluster", "global", "generic"
A, AD = ptx.mbarrier_arrive, ptx.mbarrier_arrive_drop
TW, TWP = ptx.mbarrier_test_wait, ptx.mbarrier_test_wait_parity
YW, YWP = ptx.mbarrier_try_wait, ptx.mbarrier_try_wait_parity

# form row -> instructions that are instances of it (each must need exactly the row's Requires)
SAMPLES = {
    "tensormap.replace.tile.{global_address,rank}{.global,.shared::cta}.b1024.{b64,b32} [a], v": [
        lambda e: ptx.tensormap_replace_global_address(e.k, SS, e.smap, e.v64),
        lambda e: ptx.tensormap_replace_rank(e.k, GL, e.gglobal, rank=3),
        lambda e: ptx.tensormap_replace_rank(e.k, GEN, e.gptr, new_val=e.v32)],
    "tensormap.replace.tile.{box_dim,global_dim,element_stride}{.ss}.b1024.b32 [a], ord, v": [
        lambda e: ptx.tensormap_replace_box_dim(e.k, SS, e.smap, 4, 8),
        lambda e: ptx.tensormap_replace_global_dim(e.k, GL, e.gglobal, 0, e.v32),
        lambda e: ptx.tensormap_replace_element_stride(e.k, GEN, e.gptr, 2, 1)],
    "tensormap.replace.tile.global_stride{.ss}.b1024.b64 [a], ord, v": [
        lambda e: ptx.tensormap_replace_global_stride(e.k, SS, e.smap, 3, 4096)],
    "tensormap.replace.tile.{elemtype,interleave_layout,swizzle_mode,fill_mode}{.ss}.b1024.b32"
    " [a], imm": [
        lambda e: ptx.tensormap_replace_elemtype(e.k, SS, e.smap, "tf32.ftz"),
        lambda e: ptx.tensormap_replace_interleave_layout(e.k, SS, e.smap, "32B"),
        lambda e: ptx.tensormap_replace_swizzle_mode(e.k, GL, e.gglobal, "64B"),
        lambda e: ptx.tensormap_replace_fill_mode(e.k, GEN, e.gptr, "zero")],
    "tensormap.replace.tile.swizzle_atomicity{.ss}.b1024.b32 [a], imm": [
        lambda e, v=v: ptx.tensormap_replace_swizzle_atomicity(e.k, SS, e.smap, v)
        for v in range(4)],
    "tensormap.replace.tile.elemtype{.ss}.b1024.b32 [a], 13..15": [
        lambda e, v=v: ptx.tensormap_replace_elemtype(e.k, SS, e.smap, v) for v in (13, 14, 15)],
    "tensormap.replace.tile.swizzle_mode{.ss}.b1024.b32 [a], 4": [
        lambda e: ptx.tensormap_replace_swizzle_mode(e.k, SS, e.smap, "96B")],
    "tensormap.cp_fenceproxy.global.shared::cta.tensormap::generic.release.{cta,cluster,gpu,sys}"
    ".sync.aligned [d], [s], 128": [
        lambda e, s=s: ptx.tensormap_cp_fenceproxy(e.k, "release", s, e.gglobal, e.smap, 128)
        for s in ("cta", "cluster", "gpu", "sys")],
    "membar.{cta,gl,sys}": [lambda e, lv=lv: ptx.membar(e.k, lv) for lv in ("cta", "gl", "sys")],
    "fence.{sc,acq_rel}.{cta,gpu,sys}": [
        lambda e, s=s, sc=sc: ptx.fence(e.k, s, sc) for s in ("sc", "acq_rel")
        for sc in ("cta", "gpu", "sys")],
    "fence.{sc,acq_rel}.cluster": [lambda e, s=s: ptx.fence(e.k, s, "cluster")
                                   for s in ("sc", "acq_rel")],
    "fence.{acquire,release}.{cta,cluster,gpu,sys}": [
        lambda e, s=s, sc=sc: ptx.fence(e.k, s, sc) for s in ("acquire", "release")
        for sc in ("cta", "cluster", "gpu", "sys")],
    "fence.proxy.alias": [lambda e: ptx.fence_proxy_alias(e.k)],
    "fence.proxy.async{,.global,.shared::cta,.shared::cluster}": [
        lambda e, s=s: ptx.fence_proxy_async(e.k, s) for s in (None, "global", SS, CL)],
    "fence.proxy.tensormap::generic.release.{cta,cluster,gpu,sys}": [
        lambda e, s=s: ptx.fence_proxy_tensormap_generic(e.k, "release", s)
        for s in ("cta", "cluster", "gpu", "sys")],
    "fence.proxy.tensormap::generic.acquire.{cta,cluster,gpu,sys} [addr], 128": [
        lambda e, s=s: ptx.fence_proxy_tensormap_generic(e.k, "acquire", s, e.gptr)
        for s in ("cta", "cluster", "gpu", "sys")],
    "fence.mbarrier_init.release.cluster": [lambda e: ptx.fence_mbarrier_init(e.k)],
    "fence.proxy.async::generic.{acquire,release}.sync_restrict::<space>.cluster": [
        lambda e, s=s: ptx.fence_proxy_async_generic_sync_restrict(e.k, s)
        for s in ("acquire", "release")],
    "fence.{acquire,release}.sync_restrict::<space>.cluster": [
        lambda e, s=s: ptx.fence_sync_restrict(e.k, s) for s in ("acquire", "release")],
    "prefetch{,.param,.const}.tensormap": [
        lambda e: ptx.prefetch_tensormap(e.k, e.tmap_param),
        lambda e: ptx.prefetch_tensormap(e.k, e.csym),
        lambda e: ptx.prefetch_tensormap(e.k, e.gptr)],
    "mbarrier.{init,inval}{.shared}.b64": [
        lambda e: ptx.mbarrier_init(e.k, e.bar, 1),
        lambda e: ptx.mbarrier_inval(e.k, e.bar_generic, space=GEN)],
    "mbarrier.{init,inval}.shared::cta.b64": [
        lambda e: ptx.mbarrier_init(e.k, e.bar, 1, space="shared"),
        lambda e: ptx.mbarrier_inval(e.k, e.bar)],
    "mbarrier.{arrive,arrive_drop}{.shared}.b64 state, [a]": [
        lambda e: A(e.k, e.bar), lambda e: AD(e.k, e.bar_generic, space=GEN),
        lambda e: AD(e.k, e.bar, dst=SINK)],
    "mbarrier.arrive{.shared}.b64 _, [a]": [
        lambda e: A(e.k, e.bar, dst="_"),
        lambda e: A(e.k, e.bar_generic, space=GEN, dst="_")],
    "mbarrier.{arrive,arrive_drop}.noComplete{.shared}.b64 state, [a], count": [
        lambda e: ptx.mbarrier_arrive_no_complete(e.k, e.bar_generic, 1, space=GEN),
        lambda e: ptx.mbarrier_arrive_drop_no_complete(e.k, e.bar, 1)],
    "mbarrier.{arrive,arrive_drop}.shared::cta.b64": [
        lambda e: A(e.k, e.bar, space="shared"), lambda e: AD(e.k, e.bar32, space=SS, dst="_"),
        lambda e: ptx.mbarrier_arrive_no_complete(e.k, e.bar, 1, space=SS)],
    "mbarrier.{arrive,arrive_drop}.b64 state, [a], count": [
        lambda e: A(e.k, e.bar_generic, 2, space=GEN), lambda e: AD(e.k, e.bar, 2)],
    "mbarrier.{arrive,arrive_drop}{.noComplete}.release.cta.b64": [
        lambda e: A(e.k, e.bar, sem="release", scope="cta"),
        lambda e: ptx.mbarrier_arrive_drop_no_complete(e.k, e.bar, 1, sem="release",
                                                       scope="cta")],
    "mbarrier.{arrive,arrive_drop}.release.cluster.b64": [
        lambda e: A(e.k, e.bar, sem="release", scope="cluster"),
        lambda e: AD(e.k, e.bar_generic, sem="release", scope="cluster", space=GEN)],
    "mbarrier.{arrive,arrive_drop}.shared::cluster.b64 _, [a]": [
        lambda e: A(e.k, e.remote, space=CL), lambda e: AD(e.k, e.remote, 3, space=CL)],
    "mbarrier.{arrive,arrive_drop}.expect_tx{.release.scope}.b64 state, [a], txCount": [
        lambda e: ptx.mbarrier_arrive_expect_tx(e.k, None, None, None, e.bar, 16),
        lambda e: ptx.mbarrier_arrive_drop_expect_tx(e.k, "release", "cluster", CL, e.remote,
                                                     16)],
    "mbarrier.{arrive,arrive_drop}{.expect_tx}.relaxed.{cta,cluster}.b64": [
        lambda e: A(e.k, e.bar, sem="relaxed", scope="cta"),
        lambda e: ptx.mbarrier_arrive_drop_expect_tx(e.k, "relaxed", "cluster", SS, e.bar, 16)],
    "mbarrier.{expect_tx,complete_tx}{.relaxed.scope}.b64 [a], txCount": [
        lambda e: ptx.mbarrier_expect_tx(e.k, "relaxed", "cta", SS, e.bar, 16),
        lambda e: ptx.mbarrier_complete_tx(e.k, None, None, CL, e.remote, 16)],
    "mbarrier.test_wait{.shared}.b64 p, [a], state": [
        lambda e: TW(e.k, e.bar, e.state),
        lambda e: TW(e.k, e.bar_generic, e.state, space=GEN)],
    "mbarrier.test_wait.parity{.shared}.b64 p, [a], parity": [
        lambda e: TWP(e.k, e.bar, 0)],
    "mbarrier.test_wait{.parity}.acquire.cta.b64": [
        lambda e: TW(e.k, e.bar, e.state, sem="acquire", scope="cta"),
        lambda e: TWP(e.k, e.bar, 1, sem="acquire", scope="cta")],
    "mbarrier.{test_wait,try_wait}{.parity}.acquire.cluster.b64": [
        lambda e: TW(e.k, e.bar, e.state, sem="acquire", scope="cluster"),
        lambda e: YWP(e.k, e.bar, 1, sem="acquire", scope="cluster")],
    "mbarrier.try_wait{.parity}.b64 p, [a], state|parity{, hint}": [
        lambda e: YW(e.k, e.bar, e.state), lambda e: YWP(e.k, e.bar_generic, 0, 1000, space=GEN)],
    "mbarrier.{test_wait,try_wait}{.parity}.relaxed.{cta,cluster}.b64": [
        lambda e: TWP(e.k, e.bar, 0, sem="relaxed", scope="cta"),
        lambda e: YW(e.k, e.bar, e.state, sem="relaxed", scope="cluster")],
    "mbarrier.pending_count.b64 count, state": [
        lambda e: ptx.mbarrier_pending_count(e.k, e.state)],
}


def test_every_row_has_samples():
    assert set(SAMPLES) == set(ROWS)


@pytest.mark.parametrize("form", sorted(SAMPLES))
def test_row_requires_match_the_code(form):
    for make in SAMPLES[form]:
        e = Env()
        make(e)
        insn = list(e.k.statements())[-1].insn
        assert insn.requires == ROWS[form].requires, insn.render()


def test_table_renders_every_family():
    table = forms_table()
    lines = table.splitlines()
    assert lines[0] == "| Instruction / variant | PTX | Target | Notes |"
    assert len(lines) == 2 + len(all_forms())
    assert set(MINE) <= set(FAMILIES)
    assert ("| `tensormap.replace.tile.swizzle_atomicity{.ss}.b1024.b32 [a], imm` | 8.6 | "
            "sm_100a, sm_101a, sm_103a, sm_110a, sm_120a, sm_121a; (f) from 8.8 |") in table
    assert "| `fence.mbarrier_init.release.cluster` | 8.0 | sm_90 |" in table


def test_target_text():
    assert target_text(REPLACE).startswith("sm_90a, sm_100a")
    assert target_text(ROWS["fence.proxy.alias"].requires) == "sm_75"


# -- the digest's §0.1 rows for these families ---------------------------------------------------
# digest row (first cell, verbatim) -> (PTX, minimum target) as the digest states them
DIGEST = {
    "`tensormap.replace.tile.*` (all fields except below)": ("8.3", "sm_90a"),
    "`tensormap.replace` `.swizzle_atomicity`": ("8.6", "sm_100a"),
    "`tensormap.replace` `.elemtype` 13..15": ("8.7", "sm_100a"),
    "`tensormap.replace` `.swizzle_mode` 4 (96B)": ("8.8", "sm_103a"),
    "`tensormap.cp_fenceproxy`": ("8.3", "sm_90"),
    "`fence.proxy.tensormap::generic.{release,acquire}`": ("8.3", "sm_90"),
    "`fence.proxy.async{.global,.shared::cta,.shared::cluster}`": ("8.0", "sm_90"),
    "`fence.mbarrier_init.release.cluster`": ("8.0", "sm_90"),
    "`fence.proxy.alias`": ("7.5", "sm_70"),
    "`fence{.proxy.async::generic}.{acquire,release}.sync_restrict::…`": ("8.6", "sm_90"),
    "`prefetch{.const,.param}.tensormap`": ("8.0", "sm_90"),
    "`mbarrier.init / inval / arrive / arrive_drop / test_wait / pending_count`":
        ("7.0", "sm_80"),
    "mbarrier `count` without `.noComplete`": ("7.8", "sm_90"),
    "mbarrier `.sem/.scope` (`.release`/`.acquire`, `.cta`/`.cluster`)": ("8.0", "sm_90"),
    "mbarrier `.shared::cluster`, `.expect_tx`, `expect_tx`, `complete_tx`": ("8.0", "sm_90"),
    "`mbarrier.try_wait{.parity}`": ("7.8", "sm_90"),
    "mbarrier `.relaxed`": ("8.6", "sm_90"),
}
_T = "tensormap.replace.tile."
_MB = "mbarrier.{arrive,arrive_drop}"
MAPPING = {
    "`tensormap.replace.tile.*` (all fields except below)": [
        r for r in ROWS if r.startswith(_T) and ROWS[r].requires == REPLACE],
    "`tensormap.replace` `.swizzle_atomicity`": [
        _T + "swizzle_atomicity{.ss}.b1024.b32 [a], imm"],
    "`tensormap.replace` `.elemtype` 13..15": [_T + "elemtype{.ss}.b1024.b32 [a], 13..15"],
    "`tensormap.replace` `.swizzle_mode` 4 (96B)": [_T + "swizzle_mode{.ss}.b1024.b32 [a], 4"],
    "`tensormap.cp_fenceproxy`": [r for r in ROWS if r.startswith("tensormap.cp_fenceproxy")],
    "`fence.proxy.tensormap::generic.{release,acquire}`": [
        r for r in ROWS if r.startswith("fence.proxy.tensormap")],
    "`fence.proxy.async{.global,.shared::cta,.shared::cluster}`": [
        "fence.proxy.async{,.global,.shared::cta,.shared::cluster}"],
    "`fence.mbarrier_init.release.cluster`": ["fence.mbarrier_init.release.cluster"],
    "`fence.proxy.alias`": ["fence.proxy.alias"],
    "`fence{.proxy.async::generic}.{acquire,release}.sync_restrict::…`": [
        r for r in ROWS if "sync_restrict" in r],
    "`prefetch{.const,.param}.tensormap`": ["prefetch{,.param,.const}.tensormap"],
    "`mbarrier.init / inval / arrive / arrive_drop / test_wait / pending_count`": [
        "mbarrier.{init,inval}{.shared}.b64", _MB + "{.shared}.b64 state, [a]",
        _MB + ".noComplete{.shared}.b64 state, [a], count",
        "mbarrier.test_wait{.shared}.b64 p, [a], state",
        "mbarrier.pending_count.b64 count, state"],
    "mbarrier `count` without `.noComplete`": [_MB + ".b64 state, [a], count"],
    "mbarrier `.sem/.scope` (`.release`/`.acquire`, `.cta`/`.cluster`)": [
        _MB + ".release.cluster.b64",
        "mbarrier.{test_wait,try_wait}{.parity}.acquire.cluster.b64"],
    "mbarrier `.shared::cluster`, `.expect_tx`, `expect_tx`, `complete_tx`": [
        _MB + ".shared::cluster.b64 _, [a]",
        _MB + ".expect_tx{.release.scope}.b64 state, [a], txCount",
        "mbarrier.{expect_tx,complete_tx}{.relaxed.scope}.b64 [a], txCount"],
    "`mbarrier.try_wait{.parity}`": ["mbarrier.try_wait{.parity}.b64 p, [a], state|parity{, hint}"],
    "mbarrier `.relaxed`": [_MB + "{.expect_tx}.relaxed.{cta,cluster}.b64",
                            "mbarrier.{test_wait,try_wait}{.parity}.relaxed.{cta,cluster}.b64"],
}
# Rows that differ from the digest's matrix line, and why (the code follows ptxas or the floor).
EXPECTED_DIFFERENCES = {
    "fence.proxy.alias": ("7.5", "sm_75", "ptxdsl's floor is sm_75 (the CUDA 13 toolchain's "
                                          "oldest target); the ISA says sm_70"),
}
# Rows the digest's notes column refines (`.parity` 7.1, `::cta` 7.8, `.cta` scope on sm_80).
REFINED = {
    "mbarrier.test_wait.parity{.shared}.b64 p, [a], parity": ("7.1", "sm_80"),
    "mbarrier.{init,inval}.shared::cta.b64": ("7.8", "sm_80"),
    _MB + ".shared::cta.b64": ("7.8", "sm_80"),
    "mbarrier.arrive{.shared}.b64 _, [a]": ("7.1", "sm_80"),
    _MB + "{.noComplete}.release.cta.b64": ("8.0", "sm_80"),
    "mbarrier.test_wait{.parity}.acquire.cta.b64": ("8.0", "sm_80"),
}


def _min_target(r) -> str:
    return str(r.requires.min_target())


def test_mapping_covers_every_row():
    mapped = {f for forms in MAPPING.values() for f in forms}
    plain_fences = {"membar.{cta,gl,sys}", "fence.{sc,acq_rel}.{cta,gpu,sys}",
                    "fence.{sc,acq_rel}.cluster", "fence.{acquire,release}.{cta,cluster,gpu,sys}"}
    assert mapped | set(REFINED) | plain_fences == set(ROWS)
    assert all(MAPPING[label] for label in DIGEST)


@pytest.mark.parametrize("label", sorted(DIGEST))
def test_rows_match_digest(label):
    version, target = DIGEST[label]
    for form in MAPPING[label]:
        row = ROWS[form]
        if form in EXPECTED_DIFFERENCES:
            version_, target_, _why = EXPECTED_DIFFERENCES[form]
            assert (row.ptx, _min_target(row)) == (version_, target_)
            continue
        assert (row.ptx, _min_target(row)) == (version, target), form


def test_expect_tx_relaxed_follows_ptxas():
    """The digest's `.relaxed` row says 8.6; ptxas 13 accepts expect_tx/complete_tx.relaxed
    from PTX 8.0 (its §4.5 list of 8.6 forms does not name them), and so does the code."""
    row = ROWS["mbarrier.{expect_tx,complete_tx}{.relaxed.scope}.b64 [a], txCount"]
    assert (row.ptx, _min_target(row)) == ("8.0", "sm_90")


@pytest.mark.parametrize("form", sorted(REFINED))
def test_refined_rows(form):
    assert (ROWS[form].ptx, _min_target(ROWS[form])) == REFINED[form]


DIGEST_PATH = Path(__file__).resolve().parents[2] / "shared" / "docs" / "ptx-isa-digest.md"


def _digest_rows() -> dict[str, tuple[str, str]]:
    text = DIGEST_PATH.read_text(encoding="utf-8")
    section = text.split("### 0.1", 1)[1].split("\n---", 1)[0]
    rows = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 3 and re.fullmatch(r"\d+\.\d+", cells[1]):
            rows[cells[0]] = (cells[1], cells[2])
    return rows


@pytest.mark.skipif(not DIGEST_PATH.exists(), reason="the shared PTX digest is not checked out")
def test_digest_still_says_so():
    rows = _digest_rows()
    for label, (version, target) in DIGEST.items():
        assert label in rows, label
        assert rows[label][0] == version, label
        assert target in rows[label][1].replace("*", ""), label


def test_ptx_module_exports_match_families():
    assert "tensormap_replace_element_size" in ptx.__all__
    assert "FORMS" not in ptx.__all__ and not hasattr(ptx, "FORMS")
    assert ptx.fence.__module__ == "ptxdsl.instructions.fence"
    e = Env()
    ptx.tensormap_replace_box_dim(e.k, ptx.space_shared, Addr(e.smap, 0), 0, 1)
