"""Render the results of one run (the dict written to `benchmarks/results.json`) as Markdown."""

from __future__ import annotations

import math

_GOAL_MARK = {True: "met", False: "**missed**", None: "n/a"}


def fmt(value: float | None, unit: str = "") -> str:
    """A number with 3-4 significant digits (no unit)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "—"
    a = abs(value)
    if a == 0:
        return "0"
    if a >= 1000:
        return f"{value:,.0f}"
    if a >= 100:
        return f"{value:.1f}"
    if a >= 10:
        return f"{value:.2f}"
    if a >= 1:
        return f"{value:.3f}"
    # below 1, as many digits as keep it below 1: a ratio of 0.9999 under a goal of 1.00 reads
    # "0.9999", not "1"
    digits = 3
    while abs(float(f"{value:.{digits}g}")) >= 1 and digits < 12:
        digits += 1
    return f"{value:.{digits}g}"


def _cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def render_section(section: dict) -> list[str]:
    out = [f"## {section['title']}", ""]
    if section.get("what"):
        out += [section["what"], ""]
    if section.get("error"):
        out += [f"**This section failed:** `{_cell(section['error'])}`", ""]
    rows = section.get("rows") or []
    if rows:
        out += ["| what | median | min | max | unit | runs | note |",
                "|---|---:|---:|---:|---|---:|---|"]
        for r in rows:
            out.append(f"| {_cell(r['name'])} | {fmt(r['median'])} | {fmt(r['min'])} | "
                       f"{fmt(r['max'])} | {r['unit']} | {r['n']} | {_cell(r.get('note', ''))} |")
        out.append("")
    targets = section.get("targets") or []
    if targets:
        out += ["| target | value | goal | verdict | note |", "|---|---:|---|---|---|"]
        for t in targets:
            out.append(f"| {_cell(t['name'])} | {fmt(t['value'])} | {_cell(t['goal'])} | "
                       f"{_GOAL_MARK[t['met']]} | {_cell(t.get('note', ''))} |")
        out.append("")
    for note in section.get("notes") or []:
        out.append(f"- {note}")
    if section.get("notes"):
        out.append("")
    return out


def render(results: dict) -> str:
    """The whole BENCHMARKS.md."""
    env = results.get("environment", {})
    out = ["# Benchmarks", "",
           "ptxdsl against the alternatives, every row from one run of "
           f"`{results.get('command', 'python -m benchmarks')}` "
           "(the raw numbers are in `benchmarks/results.json`). Each row gives the median, "
           "min and max over repeated runs; GPU times come from CUDA events, host latencies "
           "from `time.perf_counter` over many calls after a warm-up.", ""]
    facts = [("GPU", env.get("gpu")), ("compute capability", env.get("compute_capability")),
             ("SMs", env.get("sm_count")), ("nvidia-smi", env.get("nvidia_smi")),
             ("CUDA driver API", env.get("cuda_driver_api")), ("nvcc", env.get("nvcc")),
             ("nvJitLink", env.get("nvjitlink")), ("CPU", env.get("cpu")),
             ("Python", env.get("python")), ("date", env.get("date"))]
    pkgs = env.get("packages") or {}
    if pkgs:
        facts.append(("packages", ", ".join(f"{k} {v}" for k, v in sorted(pkgs.items()))))
    if env.get("gpu_skip_reason"):
        facts.append(("GPU unavailable", env["gpu_skip_reason"]))
    out += ["| | |", "|---|---|"]
    out += [f"| {k} | {_cell(v)} |" for k, v in facts if v not in (None, "")]
    out.append("")
    summary = [t | {"section": s["title"]} for s in results.get("sections", [])
               for t in s.get("targets", [])]
    if summary:
        out += ["## Targets at a glance", "", "| section | target | value | goal | verdict |",
                "|---|---|---:|---|---|"]
        for t in summary:
            out.append(f"| {_cell(t['section'])} | {_cell(t['name'])} | {fmt(t['value'])} | "
                       f"{_cell(t['goal'])} | {_GOAL_MARK[t['met']]} |")
        out.append("")
    for section in results.get("sections", []):
        out += render_section(section)
    for note in results.get("notes", []):
        out.append(note)
        out.append("")
    return "\n".join(out).rstrip() + "\n"
