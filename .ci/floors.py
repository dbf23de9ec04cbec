"""Print `name==floor` for every direct dependency pyproject.toml declares, one a line.

    python3 .ci/floors.py [EXTRA ...]

The base dependencies and those of the named extras (an extra that names the project itself,
`ptxdsl[torch]`, is followed). `.ci/lowest` installs exactly these pins, so the lowest-versions
job tests the floors pyproject declares and cannot drift from them; tests/test_dependency_floors.py
compares them with the table in docs/CONTRIBUTING.md. Standard library only: it runs before the
job's virtual environment exists.
"""

from __future__ import annotations

import re
import sys
import tomllib
from pathlib import Path

PYPROJECT = Path(__file__).resolve().parent.parent / "pyproject.toml"
_REQ = re.compile(r"\s*(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[(?P<extras>[^\]]*)\])?"
                  r"\s*(?P<spec>[^;]*)(?:;.*)?$")


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def floors(extras: list[str], pyproject: Path = PYPROJECT) -> dict[str, str]:
    """{package: floor} in declaration order; SystemExit for a dependency without a `>=` floor
    (the job could not pin it) or one declared twice with different floors."""
    project = tomllib.loads(pyproject.read_text())["project"]
    self_name = _norm(project["name"])
    optional = project.get("optional-dependencies", {})
    out: dict[str, str] = {}
    todo = [("dependencies", r) for r in project.get("dependencies", [])]
    seen: set[str] = set()
    for extra in extras:
        if extra not in optional:
            raise SystemExit(f"floors.py: pyproject.toml has no extra {extra!r}")
        todo += [(f"[{extra}]", r) for r in optional[extra]]
        seen.add(extra)
    while todo:
        where, req = todo.pop(0)
        m = _REQ.match(req)
        if m is None:
            raise SystemExit(f"floors.py: cannot read requirement {req!r} in {where}")
        name = _norm(m["name"])
        if name == self_name:       # a self-reference pulls in the other extra's requirements
            for extra in (e.strip() for e in (m["extras"] or "").split(",") if e.strip()):
                if extra not in seen:
                    seen.add(extra)
                    todo += [(f"[{extra}]", r) for r in optional[extra]]
            continue
        lows = [s.strip()[2:].strip() for s in m["spec"].split(",") if s.strip().startswith(">=")]
        if len(lows) != 1:
            raise SystemExit(f"floors.py: {req!r} in {where} needs exactly one '>=' floor")
        if out.get(name, lows[0]) != lows[0]:
            raise SystemExit(f"floors.py: {name} has two floors, {out[name]} and {lows[0]}")
        out[name] = lows[0]
    return out


if __name__ == "__main__":
    for pkg, low in floors(sys.argv[1:]).items():
        print(f"{pkg}=={low}")
