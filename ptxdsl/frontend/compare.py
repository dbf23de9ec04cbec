"""Statements compared by meaning, for the round-trip promise: `parse_ptx(m.emit())` gives
back the statements `m` was built from.

Registers and symbols are compared by name and type (a parsed register is a new object),
labels by their rendered name, immediates by value and type, floats by their bits,
everything else by the instruction's attrs fields.
"""

from __future__ import annotations

import enum
import struct
from collections.abc import Iterable
from typing import Any

import attrs

from ..operands import Imm, Label, Reg, SpecialReg, Symbol
from ..statements import Statement
from .items import Directive, Raw


def key(value: Any) -> Any:
    """A comparable, hashable picture of an operand or instruction."""
    if isinstance(value, Reg):
        # A builder register keeps its value type (.u32), the PTX declares its bits (.b32).
        return ("reg", value.render(), value.type.bits)
    if isinstance(value, Symbol):
        return ("sym", value.name, value.space.value)
    if isinstance(value, Label):
        return ("label", value.render())
    if isinstance(value, Imm):
        return ("imm", value.render(), value.type.value)
    if isinstance(value, SpecialReg):
        return ("sreg", value.name)
    if isinstance(value, enum.Enum):
        return (type(value).__name__, value.value)
    if type(value) is float:
        # By bits: a NaN (as `0f7FC00000` reads) equals itself, -0.0 differs from 0.0.
        return ("float", struct.pack(">d", value))
    if isinstance(value, tuple | list):
        return tuple(key(v) for v in value)
    if attrs.has(type(value)):
        return (type(value).__name__,) + tuple(
            (f.name, key(getattr(value, f.name))) for f in attrs.fields(type(value)) if f.eq)
    return value


def instructions(body: Iterable[Any]) -> list[Statement]:
    """The instruction statements of a body (labels and directives left out)."""
    return [s for s in body if type(s) is Statement and type(s.insn) is not Directive]


def statement_key(st: Statement) -> Any:
    return (key(st.insn), key(st.guard))


def first_difference(built: Iterable[Any], parsed: Iterable[Any], *,
                     raw_ok: frozenset[str] | None = None) -> str | None:
    """Where two bodies' instructions differ, or None. A parsed `Raw` whose mnemonic is in
    `raw_ok` (no reader claims it yet) matches a built instruction of the same text."""
    a, b = instructions(built), instructions(parsed)
    if len(a) != len(b):
        return f"{len(a)} instructions built, {len(b)} parsed"
    for i, (x, y) in enumerate(zip(a, b, strict=True)):
        if type(y.insn) is Raw and raw_ok is not None and y.insn.op.split(".")[0] in raw_ok:
            if x.render() != y.render():
                return f"instruction {i}: built {x.render()!r}, parsed {y.render()!r}"
            continue
        if statement_key(x) != statement_key(y):
            why = f" ({y.insn.why})" if type(y.insn) is Raw and y.insn.why else ""
            return (f"instruction {i}: built {type(x.insn).__name__} {x.render()!r}, parsed "
                    f"{type(y.insn).__name__} {y.render()!r}{why}")
    return None
