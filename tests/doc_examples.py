"""The code users copy, as modules a type checker can read: each page's ```python blocks (of
README.md and docs/**/*.md) concatenated in order, as the tutorial tests run them, into one
module per page, each block at its Markdown line so a finding names the page's line.

`.ci/typecheck-examples` writes them with `python -m tests.doc_examples DIR` and runs
`mypy --strict` on them and on samples/*.py (config: `.ci/mypy-examples.ini`);
`tests/test_doc_examples.py` checks that the extraction keeps up with the pages.
"""

from __future__ import annotations

import sys
from pathlib import Path

from tests.test_tutorials import blocks

ROOT = Path(__file__).resolve().parent.parent

# Pages whose python blocks are not ptxdsl programs a reader could run as they stand, and why
# (`tests/test_doc_examples.py` checks each still has blocks; every other page is checked).
SKETCHES = {
    "docs/hazards.md": "each hazard's pattern, with `k`, `bar`, `tile` taken from context, "
                       "`tid0:` saying which thread runs a line and `...` for the rest",
    "docs/ptx_frontend.md": "a Triton Gluon kernel (Triton's source, not ptxdsl's) and one "
                            "line of a lifted program",
    "docs/torch.md": "the op's registration, with the kernel's PTX text and the tensors "
                     "left to the reader's program",
}


def pages() -> list[Path]:
    """README.md and every docs page, in a stable order (pages without python blocks too:
    `modules` drops them)."""
    docs = sorted(p for p in (ROOT / "docs").rglob("*.md")
                  if not p.relative_to(ROOT / "docs").parts[0].startswith("_"))
    return [ROOT / "README.md", *docs]


def module_name(page: Path) -> str:
    """`README.md` -> `README_md`, `docs/tutorials/1_x.md` -> `docs_tutorials_1_x_md`: an
    identifier, so mypy can name the module."""
    return "_".join(page.relative_to(ROOT).with_suffix("").parts) + "_md"


def page_source(page: Path) -> str:
    """The page's python blocks, GPU blocks included (they are user code too), each starting
    at its own line of the page."""
    out: list[str] = []
    for line, _gpu, code in blocks(page):
        out.append("\n" * (line - 1 - sum(s.count("\n") for s in out)))
        out.append(code)
    return "".join(out)


def modules() -> dict[str, str]:
    """Module name -> source, for every page that has python blocks."""
    return {module_name(p): page_source(p) for p in pages()
            if blocks(p) and str(p.relative_to(ROOT)) not in SKETCHES}


def write(dest: Path) -> list[Path]:
    dest.mkdir(parents=True, exist_ok=True)
    written = []
    for name, source in modules().items():
        path = dest / f"{name}.py"
        path.write_text(source)
        written.append(path)
    return written


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python -m tests.doc_examples DIR")
    for p in write(Path(sys.argv[1])):
        print(p)
