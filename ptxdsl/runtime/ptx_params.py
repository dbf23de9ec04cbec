"""Read what the loader needs from raw PTX text: `.version`, `.target`, and each `.entry`'s
parameter list (so `load_ptx` can pack arguments without a Module object).

Only the header and the kernel signatures are parsed; bodies are skipped.
"""

from __future__ import annotations

import re

import attrs

from ptxdsl.types import PtxVersion, ScalarType, Target

_COMMENTS = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)
_VERSION = re.compile(r"^\s*\.version\s+(\d+\.\d+)", re.M)
_TARGET = re.compile(r"^\s*\.target\s+([\w]+)", re.M)
_ENTRY = re.compile(r"\.entry\s+([A-Za-z_$%][\w$]*)\s*(\(([^)]*)\))?")
_PARAM = re.compile(
    r"\.param\s+(?P<pre>(?:\.align\s+\d+\s+)?)\.(?P<type>\w+)\s*"
    r"(?P<ptr>\.ptr(?:\s*\.(?:global|const|local|shared))?(?:\s*\.align\s+\d+)?)?\s*"
    r"(?P<name>[A-Za-z_$%][\w$]*)\s*(?:\[\s*(?P<count>\d+)\s*\])?$")
_ALIGN = re.compile(r"\.align\s+(\d+)")


@attrs.frozen
class PtxParam:
    """A kernel parameter read from PTX text; same shape as ptxdsl's `Param`.

    kind: 'scalar', 'pointer' (`.ptr` attribute), 'tensormap' (`.align >= 64 .b8 x[128]`) or
    'bytes' (any other `.b8`/typed array, passed by value).
    """

    name: str
    kind: str
    type: ScalarType
    size: int
    align: int


def strip_comments(text: str) -> str:
    return _COMMENTS.sub(" ", text)


def parse_version(text: str) -> PtxVersion | None:
    m = _VERSION.search(strip_comments(text))
    return PtxVersion.parse(m.group(1)) if m else None


def parse_target(text: str) -> Target | None:
    m = _TARGET.search(strip_comments(text))
    if not m:
        return None
    try:
        return Target.parse(m.group(1))
    except ValueError:
        return None


def _param(decl: str, kernel: str) -> PtxParam:
    decl = " ".join(decl.split())
    m = _PARAM.match(decl)
    if not m:
        raise ValueError(f"kernel '{kernel}': cannot parse parameter declaration {decl!r}")
    try:
        stype = ScalarType(m.group("type"))
    except ValueError:
        raise ValueError(f"kernel '{kernel}': unknown parameter type .{m.group('type')} in "
                         f"{decl!r}") from None
    aligns = [int(a) for a in _ALIGN.findall(m.group("pre") or "")]
    count = m.group("count")
    if count is not None:
        size = int(count) * stype.bytes
        align = aligns[0] if aligns else stype.bytes
        kind = "tensormap" if stype is ScalarType.b8 and size == 128 and align >= 64 else "bytes"
        return PtxParam(m.group("name"), kind, stype, size, align)
    kind = "pointer" if m.group("ptr") else "scalar"
    return PtxParam(m.group("name"), kind, stype, stype.bytes, aligns[0] if aligns else
                    stype.bytes)


def parse_entries(text: str) -> dict[str, tuple[PtxParam, ...]]:
    """Map each `.entry` name to its parameters, in declaration order."""
    out: dict[str, tuple[PtxParam, ...]] = {}
    for m in _ENTRY.finditer(strip_comments(text)):
        body = (m.group(3) or "").strip()
        decls = [d for d in body.split(",") if d.strip()]
        out[m.group(1)] = tuple(_param(d, m.group(1)) for d in decls)
    return out
