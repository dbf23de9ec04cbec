"""The checker on parsed PTX against the checker on the built kernel (issue 30: "the same
findings on `parse_ptx(module.emit())` as on `module`").

`differences(kernel, ctx)` renders a built kernel, parses it with `ptxdsl.frontend.parse_ptx`,
checks both with the same context (parameters named instead of passed) and returns the
findings, notes included, that only one side reports. Findings are the same when they have
the same hazard id and bite at the same PTX: the same statement text, or, for a built
inline-asm statement, one of the instructions of its text (the parsed kernel sees them one
by one). tests/test_frontend_checker_parity.py and the golden fixture use it.

As a pytest plugin it checks every kernel the checker tests check a second time:
`PTXDSL_PARSED_CHECK=report.jsonl pytest -p tests.parsed_check tests/test_checker*.py`
writes each kernel whose findings differ (ids, the PTX of the sites where they bite, the
test, the kernel's PTX) to the report, one JSON object a line.
"""

from __future__ import annotations

import json
import os
import re
import warnings
from collections import Counter
from typing import Any

import pytest

import ptxdsl.checker as checker
from ptxdsl.checker.context import Context
from ptxdsl.errors import PtxdslError
from ptxdsl.frontend import ParsedFunction, parse_ptx

_REPORT = os.environ.get("PTXDSL_PARSED_CHECK", "")
STATS: Counter = Counter()
_SPACE = re.compile(r"\s+")


def named(ctx: Context, kernel: Any) -> Context:
    """`ctx` with parameters (and kernels) named: a parsed kernel's parameters are other
    objects (a context keeps a `Param` passed in host_maps by its id). The boxes the kernel
    declares (`Kernel.map_boxes`), which its PTX does not carry, follow the caller's maps, as
    the checker ranks them."""
    names = {id(p): p.name for p in getattr(kernel, "params", ())}

    def name(k):
        return names.get(k, k) if isinstance(k, int) else getattr(k, "name", k)
    declared = tuple((p.name, v) for p, v in getattr(kernel, "map_boxes", {}).items())
    return Context(frozenset(map(name, ctx.host_maps)),
                   tuple((name(k), v) for k, v in ctx.maps) + declared,
                   frozenset(map(name, ctx.cross_device_maps)),
                   tuple((name(k), tuple((name(p), v) for p, v in pairs))
                         for k, pairs in ctx.kernel_maps),
                   tuple((name(k), frozenset(map(name, keys))) for k, keys in ctx.peer_buffers),
                   tuple((name(k), frozenset(map(name, keys))) for k, keys in ctx.signal_pads),
                   tuple((name(k), frozenset(map(name, keys)))
                         for k, keys in ctx.host_signal_pads))


def ptx_text(kernel: Any) -> str:
    """The PTX of a built kernel: its module's emitted text (the checker that emit runs
    silenced), or for a kernel in no module its module-scope variables and its lines."""
    mod = getattr(kernel, "module", None)
    if mod is not None and kernel in getattr(mod, "kernels", ()):
        saved = mod.check_on_emit
        mod.check_on_emit = False
        try:
            return mod.emit()
        except PtxdslError:   # a module that does not emit yet: the kernel alone
            pass
        finally:
            mod.check_on_emit = saved
    lines = [".version 8.7", ".target sm_90a", ".address_size 64", ""]
    for sym in getattr(mod, "_symbols", {}).values() if mod is not None else ():
        decl = getattr(sym, "declaration", None)
        if callable(decl):
            lines.append(decl())
    lines += [text for text, _ in kernel.render()]
    return "\n".join(lines) + "\n"


def parsed_twin(kernel: Any, text: str | None = None) -> ParsedFunction:
    text = ptx_text(kernel) if text is None else text
    return parse_ptx(text, file=f"{kernel.name}.ptx").function(kernel.name)


def _site(f: Any) -> str:
    return _SPACE.sub(" ", f.sites[0].ptx).strip() if f.sites else ""


def _same(built: Any, parsed: Any) -> bool:
    if built.id != parsed.id:
        return False
    a, b = _site(built), _site(parsed)
    # A built inline-asm statement renders as its whole text, several PTX statements.
    return a == b or (a.count(";") > 1 and b.endswith(";") and f" {b} " in f" {a} ")


def compare(built: list, parsed: list) -> list[str]:
    """The findings only one side has, as `built|parsed: id at PTX`."""
    rest = list(parsed)
    only: list[str] = []
    for f in built:
        hit = next((g for g in rest if _same(f, g)), None)
        if hit is None:
            only.append(f"built: {f.id} at {_site(f)[:160]}")
        else:
            rest.remove(hit)
    return only + [f"parsed: {g.id} at {_site(g)[:160]}" for g in rest]


def differences(kernel: Any, ctx: Context | None = None, text: str | None = None) -> list[str]:
    """Findings (notes included) that the built kernel and its parsed PTX do not share."""
    ctx = Context.make() if ctx is None else ctx
    check = getattr(checker._check, "__wrapped__", checker._check)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return compare(check(kernel, ctx), check(parsed_twin(kernel, text), named(ctx, kernel)))


@pytest.fixture(autouse=True)
def _parsed_check(monkeypatch):
    original = checker._check

    def both(kernel, ctx):
        found = original(kernel, ctx)
        if isinstance(kernel, ParsedFunction):
            return found
        STATS["kernels"] += 1
        try:
            text = ptx_text(kernel)
            again = original(parsed_twin(kernel, text), named(ctx, kernel))
        except Exception as e:  # noqa: BLE001 - recorded, the test goes on
            STATS["errors"] += 1
            _write({"kernel": kernel.name, "error": f"{type(e).__name__}: {e}"})
            return found
        diff = compare(found, again)
        if diff:
            STATS["differ"] += 1
            _write({"kernel": kernel.name, "differ": diff,
                    "test": os.environ.get("PYTEST_CURRENT_TEST", ""), "ctx": repr(ctx),
                    "ptx": text})
        return found

    both.__wrapped__ = original  # type: ignore[attr-defined]
    monkeypatch.setattr(checker, "_check", both)
    yield


def _write(obj) -> None:
    if _REPORT:
        with open(_REPORT, "a") as f:
            f.write(json.dumps(obj) + "\n")


def pytest_terminal_summary(terminalreporter):
    terminalreporter.write_line(f"parsed check: {dict(STATS)}")
