"""Checker: tensor memory (`ptxdsl/checker/hazards_tmem.py`, issue 35). A clean kernel checks
clean and each rule's mistake, made in it, is reported with its hazard at the line that makes
it: hand-written PTX read through the front end (tests/tmem_kernels.py's `CLEAN_PTX`), inline
PTX, and kernels built with the tcgen05 builders."""

from __future__ import annotations

import pytest

from ptxdsl import Module
from ptxdsl.checker import Hazard, check_kernel, check_module
from ptxdsl.frontend import parse_ptx
from ptxdsl.testing import assemble_declared
from tests import tmem_kernels as tk
from tests.checker_kernels import clean, ids


def _findings(text: str):
    return check_module(parse_ptx(text), notes=True)


def _line_of(text: str, line: int) -> str:
    return text.splitlines()[line - 1].strip()


def _at(found, hazard: Hazard, mark: str, count: int = 1):
    """The findings are `count` of `hazard`; the first names tests/tmem_kernels.py's line
    `LINES[mark]`. Returns it."""
    assert ids(found) == [hazard.value] * count, [f.format() for f in found]
    f = min(found, key=lambda f: f.loc.line)
    assert (f.loc.file, f.loc.line) == (tk.__file__, tk.LINES[mark]), f.format()
    return f


@pytest.mark.parametrize("variant", [None, *sorted(tk.PTX_FIXED)])
def test_clean_ptx_checks_clean_and_assembles(variant):
    text = tk.CLEAN_PTX if variant is None else tk.ptx_variant(variant)
    assert [f.format() for f in _findings(text)] == []
    assert assemble_declared(text)[:4] == b"\x7fELF"


@pytest.mark.parametrize("variant", sorted(tk.PTX_BUGS))
def test_ptx_variant_is_reported(variant):
    _edits, hazards, where = tk.PTX_BUGS[variant]
    text = tk.ptx_variant(variant)
    found = _findings(text)
    assert ids(found) == sorted(h.value for h in hazards), [f.format() for f in found]
    first = min(found, key=lambda f: f.loc.line)
    assert _line_of(text, first.loc.line).startswith(where), first.format()


@pytest.mark.parametrize("variant", sorted(set(tk.PTX_BUGS) - {"mixed_cta_group"}))
def test_ptxas_takes_each_mistake(variant):
    # What the rules are for: ptxas assembles every one of them (mixing CTA groups it refuses)
    assert assemble_declared(tk.ptx_variant(variant))[:4] == b"\x7fELF"


@pytest.mark.parametrize("variant, words", [
    ("no_alloc", "no tcgen05.alloc runs in this kernel"),
    ("constant_taddr", "uses the constant tensor-memory address 0x0, not the one"),
    ("read_before_barrier", "in threads that did not run the alloc, with no barrier"),
    ("no_dealloc", "is not deallocated (tcgen05.dealloc) before the kernel exits"),
    ("no_relinquish", "no tcgen05.relinquish_alloc_permit follows it before the kernel exits"),
    ("alloc_after_relinquish", "after the CTA gave up its right to allocate"),
    ("no_commit", "it was never committed (tcgen05.commit)"),
    ("no_mbarrier_wait", "no mbarrier wait on its tcgen05.commit's barrier"),
    ("no_wait_ld", "may still be reading tensor memory (no tcgen05.wait::ld since)"),
    ("no_fence_before", "no tcgen05.fence::before_thread_sync between them"),
    ("no_fence_after_wait", "no tcgen05.fence::after_thread_sync between them"),
    ("mixed_cta_group", "names .cta_group::2 while the kernel's others name .cta_group::1"),
    ("st_no_wait", "may still be writing tensor memory (no tcgen05.wait::st since)")])
def test_messages_say_what_is_wrong(variant, words):
    found = _findings(tk.ptx_variant(variant))
    assert any(words in f.message for f in found), [f.message for f in found]


def test_permit_warning_is_a_warning():
    (f,) = _findings(tk.ptx_variant("no_relinquish"))
    assert f.severity.value == "warning"


@pytest.mark.parametrize("variant, bug", [
    ("ok", False), ("other_warp", False), ("early_return", False),
    ("no_dealloc", True), ("alloc_warp_returns", True), ("if_param", True)])
def test_every_exit_of_the_allocating_warp_needs_a_dealloc(variant, bug):
    k = tk.inline_dealloc(variant)
    found = check_kernel(k)
    if not bug:
        assert [f.format() for f in found] == []
        return
    f = _at(found, Hazard.TMEM_NOT_DEALLOCATED, f"inline_{variant}")
    assert [s.role for s in f.sites] == ["alloc", "exit"]
    assert ids(check_module(parse_ptx(Module([k]).emit()))) == ids(found)


def _parsed_ids(k) -> list[str]:
    return ids(check_module(parse_ptx(Module([k]).emit())))


@pytest.mark.parametrize("variant", ["ok", "staged"])
def test_built_tile_checks_clean_and_assembles(variant):
    k = tk.tile(variant)
    clean(k)
    assert _parsed_ids(k) == []
    Module([k]).assemble()


@pytest.mark.parametrize("variant", sorted(tk.BUILT_BUGS))
def test_built_variant_is_reported_at_its_line(variant):
    hazards, mark = tk.BUILT_BUGS[variant]
    k = tk.tile(variant)
    found = check_kernel(k)
    assert ids(found) == sorted(h.value for h in hazards), [f.format() for f in found]
    first = min(found, key=lambda f: f.loc.line)
    assert (first.loc.file, first.loc.line) == (tk.__file__, tk.LINES[mark]), first.format()
    assert _parsed_ids(k) == ids(found)


def test_warp_specialized_tile_checks_clean_and_assembles():
    # The mma's completion reaches the epilogue warps through their wait on acc_bar, and
    # warp 1's dealloc through the CTA barrier after that wait.
    k = tk.warp_specialized()
    clean(k)
    assert _parsed_ids(k) == []
    Module([k]).assemble()


@pytest.mark.parametrize("variant", sorted(tk.WS_BUGS))
def test_warp_specialized_variant_is_reported(variant):
    hazards, mark = tk.WS_BUGS[variant]
    k = tk.warp_specialized(variant)
    found = check_kernel(k)
    assert ids(found) == sorted(h.value for h in hazards), [f.format() for f in found]
    first = min(found, key=lambda f: f.loc.line)
    assert (first.loc.file, first.loc.line) == (tk.__file__, tk.LINES[mark]), first.format()
    assert _parsed_ids(k) == ids(found)


def test_an_epilogue_that_waits_on_no_commit_barrier_is_told_so():
    f = min(check_kernel(tk.warp_specialized("no_acc_wait")), key=lambda f: f.loc.line)
    assert "waited on no tcgen05.commit's mbarrier" in f.message


def test_alloc_once_per_persistent_cta_checks_clean():
    k = tk.persistent()
    clean(k)
    Module([k]).assemble()


def test_an_alloc_per_tile_after_the_relinquish_is_reported():
    k = tk.persistent("per_tile")
    f = _at(check_kernel(k), Hazard.TMEM_ALLOC_AFTER_RELINQUISH, "persistent_per_tile")
    assert [s.role for s in f.sites] == ["alloc", "relinquish"]
    assert _parsed_ids(k) == [Hazard.TMEM_ALLOC_AFTER_RELINQUISH.value]


def test_an_inline_mma_and_its_commit_are_read_in_order():
    k = tk.inline_mma()
    clean(k)
    Module([k]).assemble()
    _at(check_kernel(tk.inline_mma(wait=False)), Hazard.TMEM_READ_BEFORE_COMMIT_WAIT, "ld", 2)
