"""The documentation site's generated pages (docs/_ext/site_pages.py) and its way in: the
environment-variable page lists every knob of ptxdsl.settings, the command-line page every
subcommand of `python -m ptxdsl`, every sample has an example page, and the ten-minute tour's
code runs."""

from __future__ import annotations

import importlib
import importlib.util
import io
import posixpath
import re
import zlib
from pathlib import Path

import pytest

from ptxdsl import settings
from ptxdsl.__main__ import parser
from tests.test_tutorials import blocks, run_page

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
TOUR = DOCS / "tour.md"


def _site_pages():
    spec = importlib.util.spec_from_file_location("site_pages", DOCS / "_ext" / "site_pages.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


site_pages = _site_pages()


def test_cli_page_documents_every_subcommand():
    page = site_pages.cli_page()
    names = list(site_pages.subcommands(parser()))
    assert {"demo", "emit", "forms", "check", "lift", "fuzz"} <= set(names)
    for name in names:
        assert f"## `{name}`" in page, name
        assert f"usage: python -m ptxdsl {name}" in page or name == "fuzz", name
    # Each subcommand's options, as its parser has them.
    for name, (_, sub) in site_pages.subcommands(parser()).items():
        for action in sub._actions:
            for flag in action.option_strings:
                assert flag in page, (name, flag)


def test_cli_page_has_the_fuzz_options_from_the_fuzz_parser():
    pytest.importorskip("hypothesis")
    page = site_pages.cli_page()
    fuzz = page[page.index("## `fuzz`"):]
    assert "usage: python -m ptxdsl fuzz" in fuzz
    for flag in ("--examples", "--families", "--seed", "--no-progress"):
        assert flag in fuzz


def test_environment_page_documents_every_knob():
    page = site_pages.settings_page()
    for knob in settings.KNOBS:
        section = page[page.index(f"### `{knob.name}`"):]
        section = section[:section.find("\n### ", 1) if "\n### " in section[1:] else None]
        assert knob.doc in section and knob.expected in section, knob.name
        assert f"Default: {knob.shown_default}" in section, knob.name


def test_every_sample_has_an_example_page():
    pages = site_pages.examples_pages()
    samples = site_pages.sample_files()
    assert samples and {p.stem for p in pages} == {s.stem for s in samples}
    for path, text in pages.items():
        include = re.search(r"```\{literalinclude\} (\S+)", text)
        assert include, path
        assert (path.parent / include.group(1)).resolve() == \
            next(s for s in samples if s.stem == path.stem).resolve()


def test_the_index_has_a_way_in():
    index = (DOCS / "index.md").read_text()
    assert "README" not in index, "the README is not on the site"
    order = ["\ninstall\n", "\ntour\n", "\ntutorials/1_first_tma_kernel\n", "\nexamples\n",
             "\nwgmma\n", "\ninterop\n", "\n_generated/forms\n", "\n_generated/environment\n",
             "\n_generated/cli\n", "\nbenchmarks\n", "\nchangelog\n"]
    where = [index.find(entry) for entry in order]
    assert -1 not in where and where == sorted(where), dict(zip(order, where, strict=True))


def test_tour_cpu_blocks():
    assert any(gpu for _, gpu, _ in blocks(TOUR)), "the tour ends with a launch on the GPU"
    run_page(TOUR, gpu=False)


@pytest.mark.gpu
def test_tour_on_the_gpu():
    run_page(TOUR, gpu=True)


def _prose(text: str) -> str:
    """The page without its fenced blocks (commands and programs run from a checkout may
    name its files) and without the targets of its links."""
    text = re.sub(r"^(`{3,}).*?^\1", "", text, flags=re.M | re.S)
    return re.sub(r"\]\([^)]*\)", "]", text)


HAND_WRITTEN = sorted(p for p in DOCS.rglob("*.md") if p.name != "CONTRIBUTING.md"
                      and not p.relative_to(DOCS).parts[0].startswith(("_", "api")))


@pytest.mark.parametrize("page", HAND_WRITTEN, ids=lambda p: str(p.relative_to(DOCS)))
def test_repository_paths_are_links_or_plain_text(page):
    prose = _prose(page.read_text())
    # A sample has its example page, BENCHMARKS.md its page on the site: link them.
    unlinked = re.findall(r"(?<!\[`)(?<![\w/])samples/\w+\.py", prose)
    if page.name != "benchmarks.md":       # the page that is BENCHMARKS.md says so
        unlinked += re.findall(r"\S*BENCHMARKS\.md\S*", prose)
    # A test file has no page: plain text that says where it is, not code that looks like one.
    unlinked += re.findall(r"`tests/[^`]*`", prose)
    commands = re.findall(r"`python [^`]*`", prose)
    unlinked = [u for u in unlinked if not any(u in c for c in commands)]
    assert not unlinked, unlinked


def test_example_and_benchmark_links_resolve():
    for page in HAND_WRITTEN:
        for target in re.findall(r"\]\(([^)#]*(?:_generated/examples/\w+|benchmarks)\.md)",
                                 page.read_text()):
            path = (page.parent / target).resolve()
            if "_generated" in target:
                assert path.stem in {s.stem for s in site_pages.sample_files()}, (page, target)
            else:
                assert path.exists(), (page, target)


# -- intersphinx: inventories kept in git ---------------------------------------------------

def _inventories():
    spec = importlib.util.spec_from_file_location(
        "inventories", DOCS / "_intersphinx" / "inventories.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


inventories = _inventories()


def _load(project: str) -> dict:
    from sphinx.util.inventory import InventoryFile
    data = inventories.compile_text((DOCS / "_intersphinx" / f"{project}.txt").read_text())
    url = inventories.PROJECTS[project][0]
    inv = InventoryFile.load(io.BytesIO(data), url, posixpath.join)
    return {name: (role, item) for role, items in inv.items() for name, item in items.items()}


@pytest.mark.parametrize("project", list(inventories.PROJECTS))
def test_each_inventory_loads_and_has_what_it_keeps(project):
    pytest.importorskip("sphinx")
    entries = _load(project)
    url = inventories.PROJECTS[project][0]
    assert entries and all(item.uri.startswith(url + "/") for _, item in entries.values())
    want = inventories.KEEP.get(project, ("int", "str", "enum.Enum", "collections.abc.Callable",
                                         "pathlib.Path", "os.PathLike", "typing.Any"))
    assert set(want) <= set(entries), sorted(set(want) - set(entries))


def test_cross_references_to_other_projects_resolve():
    # Sphinx leaves an unresolved reference as plain text, without a warning: check them here.
    pytest.importorskip("sphinx")
    known = set()
    for project in inventories.PROJECTS:
        known |= set(_load(project))
    roles = re.compile(r"\{py:(?:class|func|meth|mod|data)\}`~?([\w.]+)`")
    for page in sorted(DOCS.rglob("*.md")):
        for name in roles.findall(page.read_text()):
            if name.split(".")[0] in ("numpy", "torch", "cuda", "os", "pathlib", "enum"):
                assert name in known, (page.name, name)


def test_kept_names_exist_in_the_installed_packages():
    for project in ("numpy", "cuda.core", "torch"):
        if project == "torch":
            pytest.importorskip("torch")
        for name in inventories.KEEP[project]:
            module, _, attr = name.rpartition(".")
            try:
                importlib.import_module(name)     # a module's own entry
            except ImportError:
                assert hasattr(importlib.import_module(module), attr), name


def test_refresh_keeps_the_listed_entries_of_a_real_inventory():
    body = "\n".join([
        "numpy.ndarray py:class 1 reference/generated/numpy.ndarray.html#$ -",
        "numpy.zeros py:function 1 reference/generated/numpy.zeros.html#$ -",
        "numpy.dtype py:class 1 reference/generated/numpy.dtype.html#$ -",
        "numpy.ndarray std:label -1 x.html -"]) + "\n"
    real = (inventories.HEADER.format(title="NumPy", version="9.9").encode()
            + zlib.compress(body.encode()))
    text, missing = inventories.excerpt("numpy", real)
    assert text.splitlines()[4:] == [
        "numpy.dtype py:class 1 reference/generated/numpy.dtype.html#$ -",
        "numpy.ndarray py:class 1 reference/generated/numpy.ndarray.html#$ -"]
    assert "numpy.random.Generator" in missing and "numpy.dtype" not in missing
    assert inventories.compile_text(text).startswith(b"# Sphinx inventory version 2\n")
