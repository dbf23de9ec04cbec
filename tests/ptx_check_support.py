"""What the checker tests on parsed PTX share: a module header, and the errors and warnings a
kernel text gives (notes left out)."""

from __future__ import annotations

from ptxdsl.checker import Severity
from ptxdsl.frontend import parse_ptx

HEAD = ".version 8.7\n.target sm_90a\n.address_size 64\n"


def check_text(text: str, **context) -> list:
    """The errors and warnings of `HEAD + text` (a module of PTX kernels)."""
    found = parse_ptx(HEAD + text, file="k.ptx").check(**context)
    return [f for f in found if f.severity is not Severity.note]


def ids(found: list) -> list[str]:
    return sorted({f.id for f in found})
