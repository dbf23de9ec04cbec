"""The examples CI type-checks (`.ci/typecheck-examples`: `mypy --strict` on the README's and
the docs' python blocks and on samples/*.py) are extracted from the pages as they are now."""

from __future__ import annotations

from pathlib import Path

from tests.doc_examples import ROOT, SKETCHES, module_name, modules, page_source, pages
from tests.test_tutorials import blocks


def test_every_page_with_python_blocks_is_extracted():
    with_code = {module_name(p) for p in pages() if blocks(p)}
    sketches = {module_name(ROOT / s) for s in SKETCHES}
    assert "README_md" in modules() and "docs_tutorials_1_first_tma_kernel_md" in modules()
    assert set(modules()) == with_code - sketches
    for name, source in modules().items():
        compile(source, name, "exec")   # a page that stops compiling is caught here


def test_pages_left_out_say_why_and_still_have_code():
    for rel, why in SKETCHES.items():
        assert blocks(ROOT / rel), f"{rel} has no python blocks now: remove it from SKETCHES"
        assert len(why) > 20, rel


def test_blocks_keep_their_markdown_lines():
    """mypy's findings name the page's lines: each block starts at its line of the page."""
    for page in pages():
        if not blocks(page):
            continue
        lines = page_source(page).splitlines()
        for line, _gpu, code in blocks(page):
            first = code.splitlines()[0]
            assert lines[line - 1] == first, (page, line)
            assert page.read_text().splitlines()[line - 1] == first


def test_ci_type_checks_the_examples_after_the_readme_command():
    run = (ROOT / ".ci" / "run").read_text().splitlines()
    readme_cmd = next(i for i, ln in enumerate(run) if "python -m pytest -q" in ln)
    assert ".ci/typecheck-examples" in run[readme_cmd + 1:]
    script = (ROOT / ".ci" / "typecheck-examples").read_text()
    assert "python -m tests.doc_examples" in script and "samples/*.py" in script
    assert "--config-file .ci/mypy-examples.ini" in script
    assert Path(ROOT / ".ci" / "typecheck-examples").stat().st_mode & 0o111


def test_the_examples_config_is_strict():
    text = (ROOT / ".ci" / "mypy-examples.ini").read_text()
    assert "\nstrict = True\n" in text
    assert "ignore_errors" not in text and "disallow" not in text
