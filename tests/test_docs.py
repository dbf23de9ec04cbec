"""The Sphinx API reference documents every public module, and every guide is reachable from
the index. (The build itself, with warnings as errors, is part of the README's test command.)"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"


def _public_modules() -> set[str]:
    mods = set()
    for path in (ROOT / "ptxdsl").rglob("*.py"):
        parts = path.relative_to(ROOT).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        if parts[-1] == "__main__" or any(p.startswith("_") for p in parts[1:]):
            continue
        mods.add(".".join(parts))
    return mods


def _toctree_entries() -> set[str]:
    text = (DOCS / "index.md").read_text()
    entries = set()
    for block in re.findall(r"```\{toctree\}\n(.*?)```", text, re.S):
        entries |= {ln.strip() for ln in block.splitlines()
                    if ln.strip() and not ln.startswith(":")}
    return entries


def test_api_reference_covers_every_public_module():
    documented = set()
    for page in (DOCS / "api").glob("*.md"):
        documented |= set(re.findall(r"^\.\. automodule:: (\S+)$", page.read_text(), re.M))
    missing = sorted(_public_modules() - documented)
    assert not missing, f"add these modules to a page under docs/api/: {missing}"
    assert not documented - _public_modules(), "docs/api names a module that does not exist"


def test_every_page_is_in_the_index():
    pages = {str(p.relative_to(DOCS).with_suffix("")) for p in DOCS.rglob("*.md")
             if p.name != "CONTRIBUTING.md" and not p.relative_to(DOCS).parts[0].startswith("_")}
    assert pages - {"index"} <= _toctree_entries(), sorted(pages - _toctree_entries())
    assert "_generated/forms" in _toctree_entries()


def test_docstrings_are_rest():
    """The docs build reads docstrings as reST with no shim: docs/tools/rest_docstrings.py
    --check finds no Markdown habit left (a code block without `::`, a list glued to its
    paragraph, a bare file:line, a code span followed by a letter)."""
    tool = DOCS / "tools" / "rest_docstrings.py"
    result = subprocess.run([sys.executable, str(tool), "--check"], capture_output=True,
                            text=True)
    assert result.returncode == 0, ("run python docs/tools/rest_docstrings.py, reword what it "
                                    "lists:\n" + result.stdout)
