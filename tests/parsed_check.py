"""A pytest plugin that checks every kernel the checker tests check a second time, read back
from its PTX: `PTXDSL_PARSED_CHECK=report.jsonl pytest tests/test_checker*.py -p
tests.parsed_check`. Each kernel the checker sees is rendered, parsed with
`ptxdsl.frontend.parse_ptx`, and checked with the same context (parameters named instead of
passed); a kernel whose findings differ (hazard ids, kernel, and the PTX text of the site
where each bites) is written to the report, one JSON object a line.
"""

from __future__ import annotations

import json
import os
from collections import Counter

import pytest

import ptxdsl.checker as checker
from ptxdsl.checker.context import Context
from ptxdsl.frontend import ParsedFunction, parse_ptx

_REPORT = os.environ.get("PTXDSL_PARSED_CHECK", "")
STATS: Counter = Counter()


def _named(ctx: Context) -> Context:
    def name(k):
        return getattr(k, "name", k)
    return Context(frozenset(map(name, ctx.host_maps)),
                   tuple((name(k), v) for k, v in ctx.maps),
                   frozenset(map(name, ctx.cross_device_maps)))


def _picture(findings) -> list:
    return sorted((f.id, f.sites[0].ptx if f.sites else "") for f in findings)


def _text(kernel) -> str:
    lines = [".version 8.7", ".target sm_90a", ".address_size 64", ""]
    mod = getattr(kernel, "module", None)
    for sym in getattr(mod, "_symbols", {}).values() if mod is not None else ():
        decl = getattr(sym, "declaration", None)
        if callable(decl):
            lines.append(decl())
    lines += [text for text, _ in kernel.render()]
    return "\n".join(lines) + "\n"


@pytest.fixture(autouse=True)
def _parsed_check(monkeypatch):
    original = checker._check

    def both(kernel, ctx):
        found = original(kernel, ctx)
        if isinstance(kernel, ParsedFunction):
            return found
        STATS["kernels"] += 1
        try:
            text = _text(kernel)
            parsed = parse_ptx(text, file=f"{kernel.name}.ptx").function(kernel.name)
            again = original(parsed, _named(ctx))
        except Exception as e:  # noqa: BLE001 - recorded, the test goes on
            STATS["errors"] += 1
            _write({"kernel": kernel.name, "error": f"{type(e).__name__}: {e}"})
            return found
        a, b = _picture(found), _picture(again)
        if a != b:
            STATS["differ"] += 1
            _write({"kernel": kernel.name, "built": a, "parsed": b})
        return found

    monkeypatch.setattr(checker, "_check", both)
    yield


def _write(obj) -> None:
    if _REPORT:
        with open(_REPORT, "a") as f:
            f.write(json.dumps(obj) + "\n")


def pytest_terminal_summary(terminalreporter):
    terminalreporter.write_line(f"parsed check: {dict(STATS)}")
