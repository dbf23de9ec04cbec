"""`python -m ptxdsl check` over PTX files: read each with the front end, run the hazard
checker, and report as text, JSON or SARIF 2.1.0 (what code-scanning tools read).

Exit codes, for CI: 0 when no file has an error (warnings too with `--strict`), 1 when one
has, 2 when a file cannot be read or parsed (the parse error names its file and line).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ._version import __version__
from .checker import Finding, Hazard, Severity, check_module
from .errors import PtxdslError, SourceLoc
from .frontend import parse_ptx

SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"


def ptx_files(paths: Iterable[str]) -> list[Path]:
    """The .ptx files named, and those under the folders named (sorted, recursively)."""
    out: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir():
            out.extend(sorted(x for x in p.rglob("*.ptx") if x.is_file()))
        else:
            out.append(p)
    return out


class Result:
    """One file's outcome: its findings, or why it could not be checked."""

    def __init__(self, path: str, findings: list[Finding] | None = None, error: str = "",
                 kernels: int = 0, versions: list[str] | None = None):
        self.path, self.findings, self.error, self.kernels = path, findings or [], error, kernels
        # Typed statements whose form the file's .version/.target do not allow (ptxas would
        # refuse the file): errors too.
        self.versions = versions or []

    def worst(self, strict: bool) -> int:
        if self.error:
            return 2
        sev = {f.severity for f in self.findings}
        if self.versions or Severity.error in sev or (strict and Severity.warning in sev):
            return 1
        return 0


def check_ptx_file(path: Path, *, notes: bool = False, context: dict | None = None) -> Result:
    name = os.fspath(path)
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as e:
        return Result(name, error=f"{name}: cannot read: {e}")
    try:
        mod = parse_ptx(text, file=name)
        findings = check_module(mod, notes=notes, **(context or {}))
    except PtxdslError as e:
        return Result(name, error=str(e))
    return Result(name, findings, kernels=len(mod.kernels), versions=mod.version_problems())


def exit_code(results: list[Result], strict: bool) -> int:
    codes = [r.worst(strict) for r in results]
    if 2 in codes:
        return 2
    return 1 if 1 in codes else 0


def text_report(results: list[Result]) -> str:
    lines: list[str] = []
    for r in results:
        if r.error:
            lines.append(f"{r.path}: cannot check: {r.error}")
            continue
        lines.extend(f"{v.split(': ', 1)[0]}: error[ptx-version] {v.split(': ', 1)[1]}"
                     for v in r.versions)
        lines.extend(f.format() for f in r.findings)
        if not r.versions and not [f for f in r.findings if f.severity is not Severity.note]:
            lines.append(f"{r.path}: no hazards found ({r.kernels} kernels)")
    n = len(results)
    bad = sum(1 for r in results if r.error)
    lines.append(f"checked {n - bad} PTX file{'s' * (n - bad != 1)}"
                 + (f"; {bad} could not be read" if bad else ""))
    return "\n".join(lines)


def _where(loc: SourceLoc | None) -> dict[str, Any] | None:
    if loc is None:
        return None
    out: dict[str, Any] = {"file": loc.file, "line": loc.line}
    if loc.caller is not None and loc.caller.function == ".loc":
        out["source"] = {"file": loc.caller.file, "line": loc.caller.line}
    return out


def json_report(results: list[Result]) -> str:
    files = []
    for r in results:
        files.append({
            "file": r.path, "error": r.error or None, "kernels": r.kernels,
            "version_problems": r.versions,
            "findings": [{
                "id": f.id, "severity": f.severity.value, "kernel": f.kernel,
                "title": f.hazard.title, "message": f.message, "fix": f.fix,
                "location": _where(f.loc),
                "sites": [{"role": s.role, "ptx": s.ptx, "location": _where(s.loc)}
                          for s in f.sites],
            } for f in r.findings]})
    return json.dumps({"tool": "ptxdsl", "version": __version__, "files": files}, indent=2)


_LEVEL = {Severity.error: "error", Severity.warning: "warning", Severity.note: "note"}


def _sarif_location(loc: SourceLoc, message: str | None = None) -> dict[str, Any]:
    phys: dict[str, Any] = {"artifactLocation": {"uri": Path(loc.file).as_posix()}}
    if loc.line > 0:
        phys["region"] = {"startLine": loc.line}
    out: dict[str, Any] = {"physicalLocation": phys}
    if message:
        out["message"] = {"text": message}
    return out


def sarif_report(results: list[Result]) -> str:
    used = sorted({f.hazard for r in results for f in r.findings}, key=lambda h: h.value)
    rules = [{"id": h.value, "shortDescription": {"text": h.title},
              "help": {"text": h.fix},
              "defaultConfiguration": {"level": _LEVEL[h.severity]}} for h in used]
    if any(r.versions for r in results):
        rules.append({"id": "ptx-version", "shortDescription": {
            "text": "an instruction needs a newer .version or another .target"},
            "help": {"text": "raise the file's .version/.target to what the instruction needs "
                             "(ptxas refuses the file as it is)"},
            "defaultConfiguration": {"level": "error"}})
    index = {h: i for i, h in enumerate(used)}
    out: list[dict[str, Any]] = []
    notifications: list[dict[str, Any]] = []
    for r in results:
        if r.error:
            notifications.append({"level": "error", "message": {"text": r.error},
                                  "locations": [_sarif_location(SourceLoc(r.path, 0))]})
        for v in r.versions:
            where, what = v.split(": ", 1)
            file, _, line = where.rpartition(":")
            out.append({"ruleId": "ptx-version", "ruleIndex": len(rules) - 1, "level": "error",
                        "message": {"text": what},
                        "locations": [_sarif_location(SourceLoc(file, int(line)))]})
        for f in r.findings:
            res: dict[str, Any] = {
                "ruleId": f.id, "ruleIndex": index[f.hazard], "level": _LEVEL[f.severity],
                "message": {"text": f"kernel '{f.kernel}': {f.message}"}}
            if f.loc is not None:
                res["locations"] = [_sarif_location(f.loc)]
                src = f.loc.caller
                if src is not None and src.function == ".loc":
                    res["relatedLocations"] = [_sarif_location(src, "source line")]
            sites = [s for s in f.sites if s.loc is not None]
            if sites:
                res.setdefault("relatedLocations", []).extend(
                    _sarif_location(s.loc, f"{s.role} {s.ptx}") for s in sites
                    if s.loc is not None)
                for i, rel in enumerate(res["relatedLocations"]):
                    rel["id"] = i
            out.append(res)
    run: dict[str, Any] = {
        "tool": {"driver": {"name": "ptxdsl", "version": __version__,
                            "rules": rules}},
        "results": out}
    if notifications:
        run["invocations"] = [{"executionSuccessful": False,
                               "toolExecutionNotifications": notifications}]
    return json.dumps({"version": "2.1.0", "$schema": SARIF_SCHEMA, "runs": [run]}, indent=2)


REPORTS = {"text": text_report, "json": json_report, "sarif": sarif_report}
__all__ = ["ptx_files", "check_ptx_file", "exit_code", "REPORTS", "Result", "Hazard"]
