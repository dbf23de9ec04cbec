"""The Sphinx API reference documents every public module and every public name of the
namespaces users type, with a docstring; every guide is reachable from the index. (The build
itself, with warnings as errors, is part of the README's test command.)"""

from __future__ import annotations

import enum
import importlib
import importlib.util
import inspect
import pkgutil
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
sys.path.insert(0, str(DOCS / "tools"))

import api_pages  # noqa: E402


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
    for page in (DOCS / "api").rglob("*.md"):
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


def _autodoc_targets(page: Path) -> set[str]:
    return set(re.findall(r"^\.\. auto(?:class|function|exception|data):: (\S+)$",
                          page.read_text(), re.M))


def _public_names(namespace: str) -> list[str]:
    mod = importlib.import_module(namespace)
    return [n for n in mod.__all__
            if not n.startswith("__") and not inspect.ismodule(getattr(mod, n))]


def test_curated_pages_list_every_public_name():
    """docs/api/<namespace>.md documents each name of the namespace's __all__ under the name
    users type (ptxdsl.runtime.Function, not ptxdsl.runtime.launch.Function)."""
    for ns in api_pages.CURATED_NAMESPACES:
        page = DOCS / "api" / f"{ns.rsplit('.', 1)[-1]}.md"
        missing = {f"{ns}.{n}" for n in _public_names(ns)} - _autodoc_targets(page)
        assert not missing, f"add to {page.relative_to(ROOT)}: {sorted(missing)}"


def test_ptx_reference_lists_every_name():
    """The generated ptxdsl.ptx pages hold every function and constant, whatever its family
    (a family no group names lands in 'other')."""
    import ptxdsl.ptx as ptx
    text = "\n".join(api_pages.ptx_pages().values())
    for name in ptx.__all__:
        obj = getattr(ptx, name)
        entry = (f".. data:: {name}" if isinstance(obj, enum.Enum) else
                 f".{name}`" if inspect.isclass(obj) else f".. autofunction:: ptxdsl.ptx.{name}")
        assert entry in text, name


def _members(obj) -> list[tuple[str, object]]:
    """A class's public methods and properties, as the curated page lists them."""
    out, seen = [], set()
    for cls in obj.__mro__:
        if not cls.__module__.startswith("ptxdsl") or issubclass(cls, enum.Enum):
            continue
        for name, value in vars(cls).items():
            if name.startswith("_") or name in seen:     # private, or overridden below
                continue
            seen.add(name)
            if isinstance(value, (staticmethod, classmethod)):
                value = value.__func__
            if inspect.isfunction(value) or isinstance(value, property):
                out.append((name, value))
    return out


def _undocumented(obj, name: str) -> list[str]:
    if isinstance(obj, property):
        return [] if obj.__doc__ else [name]
    missing = [] if inspect.getdoc(obj) else [name]
    if inspect.isclass(obj):
        for member, value in _members(obj):
            # autodoc takes a docstring from the base class's member of the same name, as
            # inspect.getdoc does for methods (not for properties)
            doc = any(getattr(vars(c).get(member), "__doc__", None) for c in obj.__mro__) if (
                isinstance(value, property)) else inspect.getdoc(getattr(obj, member))
            if not doc:
                missing.append(f"{name}.{member}")
    return missing


def test_curated_api_has_docstrings():
    """Every public class, function, method and property on the curated pages says what it
    is: the names of ptxdsl, ptxdsl.ptx (functions), ptxdsl.runtime, ptxdsl.checker,
    ptxdsl.frontend and ptxdsl.pipeline."""
    import ptxdsl.ptx as ptx
    names = [(ns, n) for ns in (*api_pages.CURATED_NAMESPACES, "ptxdsl.pipeline")
             for n in _public_names(ns)]
    names += [("ptxdsl.ptx", n) for n in ptx.__all__ if inspect.isfunction(getattr(ptx, n))]
    missing = set()
    for ns, name in names:
        obj = getattr(importlib.import_module(ns), name)
        if inspect.isclass(obj) or callable(obj):
            missing |= set(_undocumented(obj, f"{ns}.{name}"))
    assert not missing, sorted(missing)


# Packages whose every public class, function, method and property has a docstring.
_FULLY_DOCUMENTED = ("ptxdsl.instructions", "ptxdsl.checker", "ptxdsl.frontend", "ptxdsl.fuzz")


def _modules(package: str):
    pkg = importlib.import_module(package)
    yield pkg
    for info in pkgutil.walk_packages(pkg.__path__, package + "."):
        if not any(part.startswith("_") for part in info.name.split(".")):
            yield importlib.import_module(info.name)


def test_internals_have_docstrings():
    missing = []
    for package in _FULLY_DOCUMENTED:
        if package == "ptxdsl.fuzz" and importlib.util.find_spec("hypothesis") is None:
            continue                # the [fuzz] extra is not installed: nothing to import
        for mod in _modules(package):
            for name, obj in vars(mod).items():
                if (name.startswith("_") or not (inspect.isfunction(obj) or inspect.isclass(obj))
                        or inspect.unwrap(obj).__module__ != mod.__name__):
                    continue
                missing += _undocumented(obj, f"{mod.__name__}.{name}")
    assert not missing, missing
