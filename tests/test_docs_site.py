"""The documentation site's generated pages (docs/_ext/site_pages.py) and its way in: the
environment-variable page lists every knob of ptxdsl.settings, the command-line page every
subcommand of `python -m ptxdsl`, every sample has an example page, and the ten-minute tour's
code runs."""

from __future__ import annotations

import importlib.util
import re
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
