"""The package's layers (docs/CONTRIBUTING.md, "Layers (data flows one way)"): no module imports
one of a layer above its own, and no import circle crosses a layer boundary.

The graph is read from the source with `ast`: every import, at module level, inside functions and
under `if TYPE_CHECKING:` alike (a lazy or annotation-only import that runs back up is still a
dependency on the layer above), relative imports resolved against the importing file's package.
"""

from __future__ import annotations

import ast
import fnmatch
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# Lowest first. A module may import its own layer and the layers listed before it, except those
# its row names as `beside` it (neither imports the other). The patterns are module names
# (fnmatch): a package's own `__init__` is the package's name. ptxdsl/frontend (the PTX parser,
# issue 30) has its row before it lands, so that its first commit is checked too.
LAYERS: list[tuple[str, tuple[str, ...], tuple[str, ...]]] = [
    ("base", ("ptxdsl.errors", "ptxdsl.types", "ptxdsl._version", "ptxdsl._files",
              "ptxdsl.progress", "ptxdsl.assembly_report", "ptxdsl.settings"), ()),
    ("operands", ("ptxdsl.operands",), ()),
    ("instructions", ("ptxdsl.instructions.*", "ptxdsl.provenance"), ()),
    ("statements", ("ptxdsl.statements",), ()),
    ("warpgroups", ("ptxdsl.warpgroups",), ()),
    ("checker", ("ptxdsl.checker", "ptxdsl.checker.*"), ()),
    ("builder", ("ptxdsl.kernel_host", "ptxdsl.kernel_core", "ptxdsl.kernel_directives",
                 "ptxdsl.kernel_flow", "ptxdsl.fragments", "ptxdsl.builders.*", "ptxdsl.kernel",
                 "ptxdsl.ptx"), ()),
    # The front end reads PTX into statements and hands them to the checker
    # (`ParsedModule.check`), beside the builder that makes the same statements from Python.
    ("frontend", ("ptxdsl.frontend", "ptxdsl.frontend.*"), ("builder",)),
    ("pipelines", ("ptxdsl.pipeline", "ptxdsl.epilogue", "ptxdsl.signals", "ptxdsl.split_sum"),
     ()),
    ("toolchain", ("ptxdsl.toolchain",), ()),
    ("runtime", ("ptxdsl.runtime", "ptxdsl.runtime.*", "ptxdsl._launch_c"), ()),
    ("module", ("ptxdsl.module", "ptxdsl.regbudget"), ()),
    ("tools", ("ptxdsl.debug", "ptxdsl.testing", "ptxdsl.sample_runner", "ptxdsl.torch",
               "ptxdsl.forms", "ptxdsl.fuzz", "ptxdsl.fuzz.*", "ptxdsl.check_report"), ()),
    ("cli", ("ptxdsl", "ptxdsl.__main__"), ()),
]
RANK = {name: i for i, (name, _, _) in enumerate(LAYERS)}


def _module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules(root: Path = ROOT) -> dict[str, Path]:
    """Every module of the package, the C extension included (by its stub); a module with
    both (ptx.py and its generated ptx.pyi) by its source, whose imports are the real ones."""
    files = [*(root / "ptxdsl").rglob("*.py"), *(root / "ptxdsl").rglob("*.pyi")]
    files.sort(key=lambda p: (p.suffix == ".py", p))
    return {_module_name(p, root): p for p in files if "__pycache__" not in p.parts}


def layer_of(module: str) -> str | None:
    for name, patterns, _ in LAYERS:
        if any(fnmatch.fnmatchcase(module, pat) for pat in patterns):
            return name
    return None


def _resolve(name: str, modules: dict[str, Path]) -> str | None:
    """The module `name` imports: itself, or the package or module that defines the name."""
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def imports(path: Path, module: str, modules: dict[str, Path]) -> list[tuple[int, str]]:
    """(line, imported ptxdsl module) for every import in the file, wherever it sits."""
    package = module if path.stem == "__init__" else module.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = ".".join(package.split(".")[:len(package.split(".")) - node.level + 1]
                                + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            # `from pkg import sub` imports the submodule; `from mod import name`, the module.
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base
                       for a in node.names]
        else:
            continue
        for target in targets:
            if target == "ptxdsl" or target.startswith("ptxdsl."):
                hit = _resolve(target, modules)
                if hit is not None and hit != module and (node.lineno, hit) not in found:
                    found.append((node.lineno, hit))
    return found


def _graph(root: Path = ROOT):
    modules = _modules(root)
    edges = {m: imports(p, m, modules) for m, p in modules.items() if p.suffix == ".py"}
    return modules, edges


def upward_imports(root: Path = ROOT) -> list[str]:
    modules, edges = _graph(root)
    bad = []
    for module, found in edges.items():
        mine = layer_of(module)
        for line, target in found:
            theirs = layer_of(target)
            if mine is None or theirs is None or mine == theirs:
                continue
            beside = LAYERS[RANK[mine]][2]
            if RANK[theirs] > RANK[mine] or theirs in beside:
                where = "beside" if theirs in beside else "above"
                bad.append(f"{modules[module].relative_to(root)}:{line} imports {target}: layer "
                           f"'{mine}' may not import layer '{theirs}' ({where} it)")
    return bad


def cross_layer_cycles(root: Path = ROOT) -> list[list[str]]:
    """The import circles (strongly connected components) whose modules are of several layers."""
    _, edges = _graph(root)
    succ = {m: sorted({t for _, t in found}) for m, found in edges.items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out = []

    def visit(v: str) -> None:   # Tarjan's algorithm; the graph is ~150 modules deep at most
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in succ.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len({layer_of(m) for m in component}) > 1:
                out.append(sorted(component))

    for v in succ:
        if v not in index:
            visit(v)
    return out


def unknown_modules(root: Path = ROOT) -> list[str]:
    return sorted(m for m in _modules(root) if layer_of(m) is None)


def test_every_module_has_a_layer():
    unknown = unknown_modules()
    assert not unknown, (f"modules with no layer: {unknown}; add each to LAYERS in "
                         "tests/test_layers.py and to the table in docs/CONTRIBUTING.md "
                         "(Layers)")


def test_no_import_runs_up_a_layer():
    bad = upward_imports()
    assert not bad, "imports against the layers (docs/CONTRIBUTING.md, Layers):\n" + \
        "\n".join(bad)


def test_no_import_circle_crosses_layers():
    cycles = cross_layer_cycles()
    assert not cycles, "import circles across layers: " + "; ".join(
        " <-> ".join(f"{m} ({layer_of(m)})" for m in c) for c in cycles)


def _layers_section() -> str:
    text = (ROOT / "docs" / "CONTRIBUTING.md").read_text()
    return text.split("## Layers (data flows one way)", 1)[1].split("\n## ", 1)[0]


def test_contributing_states_these_layers_in_this_order():
    rows = [ln for ln in _layers_section().splitlines() if ln.startswith("| ")][1:]
    names = [ln.split("|")[1].strip() for ln in rows]
    assert names == [name for name, _, _ in LAYERS]
    for (name, patterns, _), row in zip(LAYERS, rows, strict=True):
        for pattern in patterns:
            home = pattern.replace(".", "/").removesuffix("/*") + ("/" if "*" in pattern else "")
            if pattern == "ptxdsl":
                home = "ptxdsl/__init__.py"
            assert home.rstrip("/") in row, f"the {name!r} row of CONTRIBUTING.md lacks {home}"


# The test on a package of its own: a rule it could not see would pass in silence.
def _package(tmp_path: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return tmp_path


@pytest.mark.parametrize("body, line", [
    ("from ..kernel import Kernel\n", 1),
    ("def f():\n    from ..kernel import Kernel\n", 2),
    ("from typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n    from ..kernel import Kernel\n", 4),
    ("import ptxdsl.kernel\n", 1),
], ids=["module level", "in a function", "for annotations only", "absolute"])
def test_an_import_up_a_layer_is_named_with_its_line_and_both_layers(tmp_path, body, line):
    root = _package(tmp_path, {"ptxdsl/kernel.py": "", "ptxdsl/instructions/arith.py": body})
    assert upward_imports(root) == [
        f"ptxdsl/instructions/arith.py:{line} imports ptxdsl.kernel: layer 'instructions' may "
        "not import layer 'builder' (above it)"]


def test_imports_down_and_within_a_layer_pass(tmp_path):
    root = _package(tmp_path, {"ptxdsl/operands.py": "", "ptxdsl/instructions/base.py": "",
                               "ptxdsl/instructions/arith.py": "from . import base\n"
                                                               "from ..operands import Reg\n"})
    assert upward_imports(root) == [] and cross_layer_cycles(root) == []


def test_the_frontend_and_the_builder_stand_beside_each_other(tmp_path):
    root = _package(tmp_path, {"ptxdsl/kernel.py": "", "ptxdsl/checker/__init__.py": "",
                               "ptxdsl/statements.py": "",
                               "ptxdsl/frontend/__init__.py": "from .. import checker\n"
                                                              "from ..statements import X\n",
                               "ptxdsl/frontend/parse.py": "import ptxdsl.kernel\n"})
    assert sorted(upward_imports(root)) == [
        "ptxdsl/frontend/parse.py:1 imports ptxdsl.kernel: layer 'frontend' may not import "
        "layer 'builder' (beside it)"]


def test_a_circle_across_layers_is_found(tmp_path):
    root = _package(tmp_path, {"ptxdsl/operands.py": "from .kernel_core import KernelCore\n",
                               "ptxdsl/kernel_core.py": "from . import operands\n"})
    assert cross_layer_cycles(root) == [["ptxdsl.kernel_core", "ptxdsl.operands"]]


def test_a_module_without_a_layer_is_named(tmp_path):
    root = _package(tmp_path, {"ptxdsl/parser.py": "", "ptxdsl/frontend/lexer.py": "",
                               "ptxdsl/builders/arith.py": ""})
    assert unknown_modules(root) == ["ptxdsl.parser"]
