"""cuda::ptx's PTX forms, read from the CCCL headers' comments: each overload's comment gives
the PTX form with placeholders (`.sem`, `.scope`, `.op`, `.space`), the values each takes
(`// .sem = { .relaxed, .acquire }`), the PTX ISA version and SM; the next declaration names
the function. The tests expand them into concrete forms, build each with ptxdsl's builder of
the same name and compare. Absent headers (a CI machine without the CUDA toolkit) skip."""

from __future__ import annotations

import itertools
import re
from collections import defaultdict
from pathlib import Path

import pytest

from ptxdsl.types import PtxVersion

CCCL = Path("/usr/local/cuda-13.0/include/cccl/cuda/__ptx/instructions/generated")
needs_cccl = pytest.mark.skipif(not CCCL.is_dir(), reason=f"CCCL headers not found at {CCCL}")

# The "// PTX ISA 81, SM_90" tail may wrap onto the next line in the longer forms.
_BLOCK = re.compile(r"^/\*\n// (?P<form>[^;]+);\s*//[^*]{0,60}?PTX\s+ISA\s+(?P<isa>\d+),\s+"
                    r"SM_(?P<sm>\d+)[^\n]*\n(?P<body>.*?)^\*/", re.M | re.S)
_QUAL = re.compile(r"^// \.(\w+)\s*= \{ ([^}]*) \}", re.M)
_NAME = re.compile(r"static inline [\w:<>]+ (\w+)\(")
_PLACEHOLDER = re.compile(r"(\.|::)(sem|scope|op|space|type|cta_group|kind)(?=[.\s]|$)")


def header_forms(headers) -> list[tuple[str, str, dict, str, int]]:
    """(PTX form, function, qualifier values, version, SM) per overload and qualifier value."""
    out = []
    if not CCCL.is_dir():
        return out
    for header in headers:
        for m in _BLOCK.finditer((CCCL / f"{header}.h").read_text()):
            quals = {q: [v.strip().lstrip(".") for v in vals.split(",")]
                     for q, vals in _QUAL.findall(m.group("body"))}
            name = _NAME.search(m.group("body")).group(1)
            isa = m.group("isa")
            for values in itertools.product(*quals.values()):
                chosen = dict(zip(quals, values, strict=True))
                form = _PLACEHOLDER.sub(lambda q, c=chosen: q.group(1) + c[q.group(2)],
                                        m.group("form"))
                out.append((form, name, chosen, f"{isa[:-1]}.{isa[-1]}", int(m.group("sm"))))
    return out


def by_requirement(forms) -> dict[tuple[PtxVersion, int], list[tuple[str, str, dict]]]:
    """Forms grouped by what ptxdsl should infer: the header's version and SM, raised to
    ptxdsl's floor (PTX 6.3, sm_75)."""
    groups = defaultdict(list)
    for form, name, q, isa, sm in forms:
        groups[max(PtxVersion.parse(isa), PtxVersion(6, 3)), max(sm, 75)].append((form, name, q))
    return dict(groups)


# -- the exact text cuda::ptx emits: the asm() strings of the headers -----------------------------
_ASM = re.compile(r'asm(?:\s+volatile)?\(\s*((?:"(?:[^"\\]|\\.)*"\s*)+)')
_LITERAL = re.compile(r'"((?:[^"\\]|\\.)*)"')
_OPERAND = re.compile(r"%\w+|\b(?!_\b)[A-Za-z_$][\w$]*|0[fFdDxX][0-9a-fA-F]+|-?\b\d+\b")


def shape(statement: str) -> str:
    """A PTX statement with every operand replaced by `%` (the sink `_` kept), whitespace and
    comments dropped: 'mbarrier.arrive.shared.b64 %rd1, [bar];' -> 'mbarrier.arrive.shared.b64
    %, [%];'. cuda::ptx's templates and ptxdsl's rendering compare equal this way."""
    statement = re.sub(r"//[^\n]*", "", statement).strip().rstrip(";").strip()
    opcode, _, ops = statement.partition(" ")
    ops = re.sub(r"\s*,\s*", ", ", _OPERAND.sub("%", " ".join(ops.split())))
    return f"{opcode} {ops};" if ops else f"{opcode};"


def asm_shapes(*headers: str) -> set[str]:
    """The shape of every PTX statement cuda::ptx's functions in `headers` emit (the asm()
    templates, with the `{ .reg .pred P_OUT; ... selp ... }` wrappers of the waits removed)."""
    out: set[str] = set()
    for header in headers:
        for m in _ASM.finditer((CCCL / f"{header}.h").read_text()):
            text = "".join(_LITERAL.findall(m.group(1))).replace("\\n", "\n").replace("\\t", " ")
            for stmt in re.split(r";\s*(?://[^\n]*)?", re.sub(r"//[^\n]*", "", text)):
                # the braces of a `{ .reg ...; }` wrapper, not a vector operand's
                stmt = stmt.strip(" \n").lstrip("{ \n")
                while stmt.endswith("}") and stmt.count("}") > stmt.count("{"):
                    stmt = stmt[:-1].rstrip()
                if stmt and not stmt.startswith((".reg", "selp", "}")):
                    out.add(shape(stmt))
    return out
