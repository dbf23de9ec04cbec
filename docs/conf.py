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
sys.path.insert(0, str(DOCS / "tools"))

import api_pages  # noqa: E402

import ptxdsl  # noqa: E402

project = "ptxdsl"
copyright = "the ptxdsl authors"
release = version = ptxdsl.__version__

extensions = ["sphinx.ext.autodoc", "myst_parser"]
source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
# _generated/ptx_index.md is a part of docs/api/ptx.md (an include), not a page.
exclude_patterns = ["_build", "CONTRIBUTING.md", "_generated/ptx_index.md"]
myst_heading_anchors = 3
# Docstrings are reST (docs/CONTRIBUTING.md, "Documentation"; docs/tools/rest_docstrings.py
# rewrites the Markdown habits they grew up with). Single backticks hold a name or a piece of
# code: see _name_or_code.
default_role = "name-or-code"
autodoc_member_order = "bysource"
# ptxdsl.torch needs the optional [torch] extra: its page documents it without importing torch.
autodoc_mock_imports = ["torch"]
# Each object once: the curated pages (docs/api/*.md) document the public names where users
# find them (`ptxdsl.Kernel`, `ptxdsl.runtime.Function`); the internals pages document each
# module's own definitions (packages re-export through __all__), less those (_skip_member).
autodoc_default_options = {"members": True, "undoc-members": False, "show-inheritance": True,
                           "ignore-module-all": True}
# Builders take kernel-first positional arguments; their signatures are documentation enough
# without resolving every annotation to a cross-reference.
autodoc_typehints = "signature"
html_theme = "alabaster"
# 'type' and similar names are fields of many classes: an annotation naming the builtin finds
# several targets. That ambiguity is Sphinx's lookup, not a documentation error.
suppress_warnings = ["ref.python"]


_NAME = re.compile(r"[A-Za-z_][\w.]*(\(\))?")
# Names worth a search of the whole API: a class (Kernel, MbarrierRing.advance), or a name
# given with its namespace (ptx.mbarrier_init). A bare lower-case word (k, name, type) would
# find whatever attribute happens to share it.
_SEARCHED = re.compile(r"[A-Z]|ptx\.|ptxdsl\.")


def _name_or_code(name, rawtext, text, lineno, inliner, options=None, content=()):
    """`x` in a docstring: a Python name is a cross-reference (code when nothing is found),
    anything else (PTX text, an expression, `~p`, `<initial>`) is code as written: the py:obj
    role would read `~`, `!` and `<...>` as its own syntax."""
    from docutils import nodes, utils
    from sphinx.domains.python import PyXRefRole
    plain = utils.unescape(text)
    if not _NAME.fullmatch(plain):
        return [nodes.literal(rawtext, plain, classes=["code"])], []
    target = plain.removesuffix("()")          # `emit()` names the method emit
    if _SEARCHED.match(plain):
        target = "." + target                   # the py domain's search by name suffix
    return PyXRefRole()("py:obj", rawtext, f"{plain} <{target}>", lineno, inliner,
                        options or {}, content)


_CURATED = api_pages.curated_objects()


def _skip_member(app, what, name, obj, skip, options):
    if what == "module" and id(obj) in _CURATED:
        return True
    # An attrs class's fields are its constructor's parameters, shown in its signature and
    # described by its docstring; listed again one by one they would say nothing more (so
    # describe a field in the class docstring: a `#:` comment on it would be hidden too).
    if what in ("class", "exception") and (
            repr(obj) in ("SLOTS_ATTR", "INSTANCE_ATTR") or any(obj is s for s in _FIELDS)):
        return True
    return None


def _field_sentinels() -> tuple:
    """What autodoc passes for a slot or an annotation-only attribute: Sphinx 9 passes
    sentinels named SLOTS_ATTR / INSTANCE_ATTR, older versions (down to the floor in
    pyproject's docs extra) the objects sphinx.ext.autodoc exports as SLOTSATTR/INSTANCEATTR."""
    from sphinx.ext import autodoc
    return tuple(x for x in (getattr(autodoc, n, None) for n in ("SLOTSATTR", "INSTANCEATTR"))
                 if x is not None)


_FIELDS = _field_sentinels()


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.exists() or path.read_text() != text:
        path.write_text(text)


def _write_ptx_pages(app) -> None:
    """docs/_generated/ptx/*.md: every `ptxdsl.ptx` family, from the code."""
    for name, text in api_pages.ptx_pages().items():
        _write(DOCS / "_generated" / name, text)


def _write_forms_table(app) -> None:
    """docs/_generated/forms.md: the table of `python -m ptxdsl forms`, from the code."""
    from ptxdsl.forms import forms_table
    text = ("# Instruction forms: PTX ISA version and target\n\n"
            "Generated from each family's `FORMS` (the `Requires` objects the builders use "
            "to infer `.version`/`.target`); `python -m ptxdsl forms` prints the same.\n\n"
            + forms_table() + "\n")
    _write(DOCS / "_generated" / "forms.md", text)


def setup(app):
    app.connect("autodoc-skip-member", _skip_member)
    app.connect("builder-inited", _write_ptx_pages)
    app.add_role("name-or-code", _name_or_code)
    app.connect("builder-inited", _write_forms_table)


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
