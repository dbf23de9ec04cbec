"""Sphinx configuration: the API reference from the docstrings, the guides and the tutorials
(Markdown, through MyST). Built in CI with warnings as errors:

    sphinx-build -W -q -b html docs docs/_build
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent
sys.path.insert(0, str(DOCS.parent))

import ptxdsl  # noqa: E402

project = "ptxdsl"
copyright = "the ptxdsl authors"
release = version = ptxdsl.__version__

extensions = ["sphinx.ext.autodoc", "myst_parser"]
source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
exclude_patterns = ["_build", "CONTRIBUTING.md"]
myst_heading_anchors = 3
# The docstrings write code as `x` (Markdown habit): render single backticks as code.
default_role = "code"
autodoc_member_order = "bysource"
# ptxdsl.torch needs the optional [torch] extra: its page documents it without importing torch.
autodoc_mock_imports = ["torch"]
# Each object once, in the module that defines it (packages re-export through __all__).
autodoc_default_options = {"members": True, "undoc-members": False, "show-inheritance": True,
                           "ignore-module-all": True}
# Builders take kernel-first positional arguments; their signatures are documentation enough
# without resolving every annotation to a cross-reference.
autodoc_typehints = "signature"
html_theme = "alabaster"
# 'type' and similar names are fields of many classes: an annotation naming the builtin finds
# several targets. That ambiguity is Sphinx's lookup, not a documentation error.
suppress_warnings = ["ref.python"]


_PLURAL_CODE = re.compile(r"(`[^`\n]+`)(s)\b")     # `Reg`s: reST wants `Reg`\ s


def _markdown_habits(app, what, name, obj, options, lines) -> None:
    """The docstrings follow the README's Markdown habits; adapt the three reST reads
    differently: a block indented under a paragraph (after a blank line, or right under a
    line ending in a colon) is code or a table (reST needs `::`), a list may start right
    under its paragraph (reST needs a blank line), and `Name`s is a plural (reST needs the
    backslash-space)."""
    out: list[str] = []
    for line in lines:
        line = _PLURAL_CODE.sub(r"\1\\ \2", line)
        prev = out[-1] if out else ""
        indented_block = (line.startswith("  ") and len(out) >= 2 and not prev.strip()
                          and out[-2].strip() and not out[-2].startswith(" ")
                          and not out[-2].lstrip().startswith("- ")
                          and not out[-2].endswith("::"))
        if indented_block:
            out[-1:] = ["", "::", ""]
        elif (line.startswith("  ") and prev.endswith(":") and not prev.endswith("::")
              and not prev.startswith(" ") and not prev.lstrip().startswith("- ")):
            out[-1:] = [prev + ":", ""]           # "Main entry points:" + a block under it
        elif (line.startswith("- ") and prev.strip() and not prev.startswith(("- ", " "))):
            out.append("")
        out.append(line)
    lines[:] = out


def _write_forms_table(app) -> None:
    """docs/_generated/forms.md: the table of `python -m ptxdsl forms`, from the code."""
    from ptxdsl.forms import forms_table
    out = DOCS / "_generated"
    out.mkdir(exist_ok=True)
    text = ("# Instruction forms: PTX ISA version and target\n\n"
            "Generated from each family's `FORMS` (the `Requires` objects the builders use "
            "to infer `.version`/`.target`); `python -m ptxdsl forms` prints the same.\n\n"
            + forms_table() + "\n")
    path = out / "forms.md"
    if not path.exists() or path.read_text() != text:
        path.write_text(text)


def setup(app):
    app.connect("builder-inited", _write_forms_table)
    app.connect("autodoc-process-docstring", _markdown_habits)


# -- the site's generated pages and links to other projects' docs ----------------------------
# docs/_ext/site_pages.py writes the environment-variable page (from ptxdsl.settings), the
# command-line reference (from the argparse parsers) and one page per sample at build time.
sys.path.insert(0, str(DOCS / "_ext"))
extensions += ["site_pages"]

# Links into Python's, NumPy's, cuda.core's and PyTorch's documentation, from inventories kept
# in git (docs/_intersphinx): the build needs no network.
sys.path.insert(0, str(DOCS / "_intersphinx"))
from inventories import compile_all  # noqa: E402

extensions += ["sphinx.ext.intersphinx"]
intersphinx_mapping = compile_all(DOCS / "_generated" / "intersphinx")
