"""The tutorials (docs/tutorials/*.md) and the debugging page run as tests.

Each page's ```python blocks run in order in one namespace, as a reader would paste them.
A block fenced as ```python gpu needs a Hopper GPU: the CPU test stops before the first one
(so no CPU block may depend on a GPU block), and the GPU test runs the whole page."""

from __future__ import annotations

import re
import warnings
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = sorted((ROOT / "docs" / "tutorials").glob("*.md")) + [ROOT / "docs" / "debugging.md"]
FENCE = re.compile(r"^```python( gpu)?\n(.*?)^```$", re.M | re.S)


def blocks(page: Path) -> list[tuple[int, bool, str]]:
    """(line of the block's first code line, needs a GPU, code) for each python block."""
    text = page.read_text()
    return [(text.count("\n", 0, m.start(2)) + 1, bool(m.group(1)), m.group(2))
            for m in FENCE.finditer(text)]


def run_page(page: Path, gpu: bool) -> dict:
    ns: dict = {"__name__": f"tutorial_{page.stem}"}
    with warnings.catch_warnings():
        # a tutorial's kernels are meant to be clean: a hazard warning fails the page,
        # except on the page about reading the checker's findings
        if page.stem != "5_hazards":
            warnings.simplefilter("error", category=_hazard_warning())
        for line, needs_gpu, code in blocks(page):
            if needs_gpu and not gpu:
                break
            # compiled at the page's line numbers, so a failure names the Markdown line
            exec(compile("\n" * (line - 1) + code, str(page), "exec"), ns)
    return ns


def _hazard_warning():
    from ptxdsl.checker.findings import PtxdslHazardWarning
    return PtxdslHazardWarning


def test_there_are_five_tutorials_and_each_is_linked():
    names = [p.stem for p in PAGES]
    assert len(names) == 6 and names[-1] == "debugging", names
    readme = (ROOT / "README.md").read_text()
    index = (ROOT / "docs" / "index.md").read_text()
    for page in PAGES:
        rel = page.relative_to(ROOT / "docs").with_suffix("")
        assert f"docs/{rel}.md" in readme, f"README does not link {rel}"
        assert f"\n{rel}\n" in index, f"docs/index.md's toctree lacks {rel}"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.stem)
def test_page_cpu_blocks(page):
    assert blocks(page), f"{page.name} has no python blocks"
    run_page(page, gpu=False)


@pytest.mark.gpu
@pytest.mark.parametrize("page", [p for p in PAGES if any(g for _, g, _ in blocks(p))],
                         ids=lambda p: p.stem)
def test_page_with_gpu_blocks(page):
    run_page(page, gpu=True)
