"""What the checker audits' test files share (tests/test_checker_audit29*.py): building a
planted kernel by name, checking a kernel or a module, the lines a finding names, the
findings that are not notes, the line of a kernel builder that holds some text, and the two
verdicts on a correct kernel (clean with and without its maps; assembles)."""

from __future__ import annotations

import inspect
from typing import Any

from ptxdsl.checker import Severity, check_kernel, check_module


def build(modules: list, builder: str, bug: bool) -> tuple:
    """(kernel or module, line, context, the file that holds the builder) of the builder
    named `builder` in one of `modules`."""
    mod = next(m for m in modules if hasattr(m, builder))
    return (*getattr(mod, builder)(bug), mod.__file__)


def check(obj: Any, ctx: dict) -> list:
    return check_module(obj, **ctx) if hasattr(obj, "kernels") else check_kernel(obj, **ctx)


def lines(f: Any) -> list[tuple[str, int]]:
    """The finding's line and the lines of the helper calls that built it."""
    out, loc = [], f.loc
    while loc is not None:
        out.append((loc.file, loc.line))
        loc = loc.caller
    return out


def errors(findings: list) -> list[str]:
    """The findings that are not notes, formatted."""
    return [f.format() for f in findings if f.severity is not Severity.note]


def line_in(fn: Any, text: str) -> int:
    """The line of function `fn` holding `text` (once)."""
    src, first = inspect.getsourcelines(fn)
    hits = [first + i for i, s in enumerate(src) if text in s]
    assert len(hits) == 1, (text, hits)
    return hits[0]


def assert_clean(build: Any) -> None:
    """A correct kernel's module has no error or warning, with its tensor maps described
    (maps=) and without them (then only notes may remain)."""
    mod, maps = build()
    assert errors(check_module(mod, maps=maps, notes=True)) == []
    assert errors(check_module(mod, notes=True)) == []


def assert_assembles(build: Any) -> None:
    """A correct kernel's module assembles for sm_90a with nvJitLink."""
    mod, _ = build()
    cubin = mod.assemble(arch="sm_90a")
    assert cubin.arch == "sm_90a" and len(cubin) > 0
