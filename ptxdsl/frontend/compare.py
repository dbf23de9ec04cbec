"""Statements compared by meaning, for the round-trip promise: `parse_ptx(m.emit())` gives
back the statements `m` was built from.

Registers and symbols are compared by name and type (a parsed register is a new object),
labels by their rendered name, immediates by value and type, floats by their bits,
everything else by the instruction's attrs fields. Inline PTX (`k.asm`) is one built statement
whose text is several PTX statements (scope braces, `.reg` lines, labels, instructions): it
matches the run of parsed items its text renders to, token for token (numbers by value).
"""

from __future__ import annotations

import enum
import struct
from collections.abc import Iterable
from typing import Any

import attrs

from ..instructions.inline import InlineAsm
from ..operands import Imm, Label, Reg, SpecialReg, Symbol
from ..statements import LabelDef, Statement
from .items import Directive, Raw
from .lexer import Source, canon, tokenize


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
    """A statement as a comparable value: its instruction's and guard's keys (`key`: registers by
    name and width, immediates by their text), so two readings of one program compare equal."""
    return (key(st.insn), key(st.guard))


def _tokens(text: str) -> list:
    return canon(tokenize(Source(text)))


def _text(item: Any) -> str:
    """What a parsed body item reads as in the PTX (a label with its colon)."""
    return item.label.render() + ":" if type(item) is LabelDef else item.render()


def _is_instruction(item: Any) -> bool:
    return type(item) is Statement and type(item.insn) is not Directive


def _match_asm(x: Statement, body: list[Any], j: int) -> tuple[int, str | None]:
    """Consume from `body[j:]` the items a built inline-asm statement's text renders to;
    return the index after them, or why they differ."""
    want = _tokens(x.render())
    # What comes before the block and is no statement of the builder's (the kernel's own
    # declarations, .loc lines, label placements) is skipped, up to the block's first item.
    while j < len(body) and not _is_instruction(body[j]) and not (
            want[:1] == ["{"] and type(body[j]) is Statement and body[j].insn.render() == "{"):
        j += 1
    got: list = []
    k = j
    while len(got) < len(want) and k < len(body):
        got += _tokens(_text(body[k]))
        k += 1
    if got != want:
        seen = " ".join(_text(i) for i in body[j:k])
        return k, f"built inline asm {x.render()!r}, parsed {seen!r}"
    return k, None


def first_difference(built: Iterable[Any], parsed: Iterable[Any], *,
                     raw_ok: frozenset[str] | None = None) -> str | None:
    """Where two bodies' instructions differ, or None. A parsed `Raw` whose mnemonic is in
    `raw_ok` (no reader claims it yet) matches a built instruction of the same text; a built
    inline-asm statement matches the parsed items of its text."""
    a, b = instructions(built), list(parsed)
    j = 0
    for i, x in enumerate(a):
        if type(x.insn) is InlineAsm:
            j, why = _match_asm(x, b, j)
            if why is not None:
                return f"instruction {i}: {why}"
            continue
        while j < len(b) and not _is_instruction(b[j]):
            j += 1
        if j == len(b):
            return f"{len(a)} instructions built, {i} parsed"
        y = b[j]
        j += 1
        if type(y.insn) is Raw and raw_ok is not None and y.insn.op.split(".")[0] in raw_ok:
            if x.render() != y.render():
                return f"instruction {i}: built {x.render()!r}, parsed {y.render()!r}"
            continue
        if statement_key(x) != statement_key(y):
            why = f" ({y.insn.why})" if type(y.insn) is Raw and y.insn.why else ""
            return (f"instruction {i}: built {type(x.insn).__name__} {x.render()!r}, parsed "
                    f"{type(y.insn).__name__} {y.render()!r}{why}")
    extra = instructions(b[j:])
    if extra:
        return f"{len(a)} instructions built, {len(a) + len(extra)} parsed"
    return None
