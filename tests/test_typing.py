"""Typing: the mypy configuration stays strict where it counts, CI runs mypy (once, through the
README's test command), and every `# type: ignore` is narrow and explained.

mypy itself runs in CI, not here: one run, one source of truth (see `tests/test_readme.py`).
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
MYPY = PYPROJECT["tool"]["mypy"]


def test_mypy_checks_the_package_for_the_supported_python():
    assert MYPY["packages"] == ["ptxdsl"]
    floor = re.fullmatch(r">=(\d+\.\d+)", PYPROJECT["project"]["requires-python"]).group(1)
    assert MYPY["python_version"] == floor
    for flag in ("check_untyped_defs", "warn_unused_ignores", "warn_redundant_casts"):
        assert MYPY.get(flag) is True, flag


def test_no_blanket_escapes():
    """Missing stubs are ignored per third-party module, never globally, and no ptxdsl module
    is exempt from checking."""
    assert "ignore_missing_imports" not in MYPY and "ignore_errors" not in MYPY
    for override in MYPY.get("overrides", []):
        modules = override["module"]
        modules = [modules] if isinstance(modules, str) else modules
        assert not any(m == "ptxdsl" or m.startswith("ptxdsl.") for m in modules), modules
        assert set(override) <= {"module", "ignore_missing_imports"}, override


def test_the_test_extra_installs_mypy():
    test_extra = PYPROJECT["project"]["optional-dependencies"]["test"]
    assert any(re.fullmatch(r"mypy>=\d+(\.\d+)*", d) for d in test_extra), test_extra


def test_type_ignores_name_their_code_and_say_why():
    bare, unexplained = [], []
    for path in sorted((ROOT / "ptxdsl").rglob("*.py")):
        lines = path.read_text().splitlines()
        for n, line in enumerate(lines):
            if "type: ignore" not in line:
                continue
            where = f"{path.relative_to(ROOT)}:{n + 1}"
            if not re.search(r"# type: ignore\[[a-z-]+(, ?[a-z-]+)*\]", line):
                bare.append(where)
            # The reason: a comment after the ignore, or a comment line just above it (or above
            # a run of ignores of one kind, like __eq__ and __ne__).
            above = n - 1
            while above >= 0 and "type: ignore" in lines[above]:
                above -= 1
            after = line.split("type: ignore", 1)[1]
            if "#" not in after and not (above >= 0 and lines[above].lstrip().startswith("#")):
                unexplained.append(where)
    assert not bare, f"a type: ignore without an error code: {bare}"
    assert not unexplained, f"a type: ignore without a comment saying why: {unexplained}"


def test_type_names_match_the_scalar_types():
    """`type="u32"` is typed as `types.TypeName` (".u32" as `DottedTypeName`): the same names
    as the enum, which the kernel's wrapper converts."""
    from typing import get_args

    from ptxdsl.types import DottedTypeName, ScalarType, TypeName
    names = [t.value for t in ScalarType]
    assert list(get_args(TypeName)) == names
    assert list(get_args(DottedTypeName)) == ["." + n for n in names]


def _public_signatures(cls: type):
    import inspect
    for name in sorted(dir(cls)):
        if name.startswith("_"):
            continue
        attr = inspect.getattr_static(cls, name)
        fn = attr.fget if isinstance(attr, property) else getattr(attr, "__func__", attr)
        fn = inspect.unwrap(fn) if callable(fn) else fn
        if inspect.isfunction(fn):
            yield name, inspect.signature(fn)


def _unannotated(cls: type) -> list[str]:
    import inspect
    missing = []
    for name, sig in _public_signatures(cls):
        missing += [f"{cls.__name__}.{name}({p})" for p in sig.parameters
                    if p not in ("self", "cls")
                    and sig.parameters[p].annotation is inspect.Parameter.empty]
        if sig.return_annotation is inspect.Signature.empty:
            missing.append(f"{cls.__name__}.{name} -> ?")
    return missing


def test_every_kernel_method_is_annotated():
    """IDEs and `mypy --strict` on user code see every `Kernel` parameter's and result's type
    (32% of the parameters were annotated before)."""
    from ptxdsl import Kernel
    assert len(list(_public_signatures(Kernel))) > 80
    assert not _unannotated(Kernel), _unannotated(Kernel)


def test_the_classes_users_call_are_annotated():
    """The same for the module, the pipeline helpers and the runtime objects the README and
    the docs use (their public methods; the runtime's constructors are internal)."""
    from ptxdsl import Module
    from ptxdsl.epilogue import TmaStoreEpilogue
    from ptxdsl.fragments import AFragment, Fragment
    from ptxdsl.pipeline import ConsumerView, MbarrierRing, ProducerView
    from ptxdsl.runtime import DeviceBuffer, Event, Function, LoadedModule, Stream, TensorMap
    classes = (Module, MbarrierRing, ProducerView, ConsumerView, TmaStoreEpilogue, Fragment,
               AFragment, TensorMap, DeviceBuffer, LoadedModule, Function, Stream, Event)
    missing = [m for cls in classes for m in _unannotated(cls)]
    assert not missing, missing


def test_module_load_takes_load_modules_keywords():
    """`Module.load` spells out `runtime.load_module`'s keywords (typed, for IDEs) and passes
    each on: the two lists must stay the same."""
    import inspect

    from ptxdsl import Module
    from ptxdsl.runtime import load_module
    ours = inspect.signature(inspect.unwrap(Module.load)).parameters
    theirs = inspect.signature(load_module).parameters
    assert [(p.name, p.default) for p in list(ours.values())[1:]] == \
        [(p.name, p.default) for p in theirs.values() if p.kind is p.KEYWORD_ONLY]
    assert all(p.kind is p.KEYWORD_ONLY for p in list(ours.values())[1:])
