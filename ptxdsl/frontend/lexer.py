"""PTX tokens: one compiled pattern over the whole text, comments and whitespace skipped.

A token is `(kind, text, offset)` with kind one of `id` (identifiers, directives, dotted
opcodes, registers: `.shared::cta`, `%tid.x`, `mbarrier.try_wait.parity.b64`), `num`, `str`
and `p` (punctuation). Line numbers are computed from offsets only where one is reported.
"""

from __future__ import annotations

import bisect
import re
import struct

from ..errors import BuildError, SourceLoc

# One match per token: the whitespace and comments before it are part of the match, the
# token is group 1 (its kind told by its first character), so a 50,000-line file makes one
# match object per token and none for the space between.
_TOKEN = re.compile(r"""
    (?:[ \t\r\n\f\v]+|//[^\n]*|/\*.*?\*/)*
    (   "(?:[^"\\\n]|\\.)*"
      | 0[fF][0-9a-fA-F]{8}(?![\w$])
      | 0[dD][0-9a-fA-F]{16}(?![\w$])
      | 0[xX][0-9a-fA-F]+U?(?![\w$])
      | 0[bB][01]+U?(?![\w$])
      | [0-9]+\.[0-9]*(?:[eE][+-]?[0-9]+)?(?![\w$])
      | [0-9]+[eE][+-]?[0-9]+(?![\w$])
      | [0-9]+U?(?![\w$])
      | [%.]?[A-Za-z_$][\w$]*(?:(?:\.|::)[\w$]+)*
      | /\*
      | [{}()\[\],;:@!<>+\-|=*/~&^?%]
      | .
      | $ )
""", re.S | re.X)
_KIND = {c: "num" for c in "0123456789"} | {'"': "str"} | {
    c: "id" for c in "%.$_abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"}
_PUNCT_CHARS = frozenset("{}()[],;:@!<>+-|=*/~&^?%")

Token = tuple[str, str, int]


class PtxParseError(BuildError):
    """PTX text the front end cannot read; its location is the PTX file and line."""


class Source:
    """A PTX text, its name for messages, and the offsets of its lines."""

    def __init__(self, text: str, file: str = "<ptx>"):
        self.text, self.file = text, file
        self._starts = [0] + [m.end() for m in re.finditer("\n", text)]

    def line(self, offset: int) -> int:
        """The 1-based line number of character `offset`."""
        return bisect.bisect_right(self._starts, offset)

    def fail(self, offset: int, rule: str) -> PtxParseError:
        """A parse error naming the PTX file and line (raise what this returns)."""
        return PtxParseError(rule, SourceLoc(self.file, self.line(offset)))


def tokenize(src: Source) -> list[Token]:
    """The tokens of the source's text, comments and whitespace skipped; a `PtxParseError` at an
    unterminated comment or a character PTX has no token for."""
    out: list[Token] = []
    append = out.append
    kinds, punct = _KIND, _PUNCT_CHARS
    for m in _TOKEN.finditer(src.text):
        text = m.group(1)
        if not text:
            break                  # the end of the text (after trailing space or comments)
        start = m.start(1)
        c = text[0]
        kind = kinds.get(c)
        if kind is None or (kind == "id" and len(text) == 1 and c in punct):
            if text == "/*":
                raise src.fail(start, "unterminated /* comment")
            if c not in punct:
                raise src.fail(start, f"unexpected character {text!r}")
            kind = "p"
        elif kind == "id" and len(text) == 1 and c in "%.$":
            if c == "$":
                raise src.fail(start, "unexpected character '$'")
            kind = "p"
        append((kind, text, start))
    return out


def number(text: str) -> int | float:
    """The value of a PTX numeric literal (hex floats `0f`/`0d` as their IEEE bits say)."""
    t = text.rstrip("U")
    c = t[:2].lower()
    if c == "0f":
        return struct.unpack(">f", bytes.fromhex(t[2:]))[0]
    if c == "0d":
        return struct.unpack(">d", bytes.fromhex(t[2:]))[0]
    if c == "0x":
        return int(t[2:], 16)
    if c == "0b":
        return int(t[2:], 2)
    if "." in t or "e" in t or "E" in t:
        return float(t)
    if len(t) > 1 and t[0] == "0":
        return int(t, 8)   # PTX, like C, reads a leading 0 as octal
    return int(t)


def canon(tokens: list[Token]) -> list:
    """Tokens compared by meaning: numbers by value (and, for floats, by bits), an address's
    `+0` offset as none, a one-element `{ x }` as `x`, the rest as written."""
    out: list = []
    neg = False
    for kind, text, _ in tokens:
        if kind == "num":
            v = number(text)
            if neg:   # `-1`: one signed number, as `0xFFFFFFFF` is one
                out.pop()
                v = -v
            out.append(("num", repr(v) if isinstance(v, float) else v))
        elif text == "]" and out[-2:] == ["+", ("num", 0)]:
            # Triton writes every address `[ %r1 + 0 ]` (nvcc `[retval0+0]`); ptxdsl's Addr
            # renders a zero offset as nothing, so a typed reading would never match.
            out[-2:] = ["]"]
        elif text == "}" and len(out) > 1 and out[-2] == "{" and out[-1] not in _PUNCT:
            # Triton's scalar ld/st name their one register `{ %r1 }`: the same operand.
            out[-2:] = out[-1:]
        else:
            out.append(text)
        neg = text == "-" and (len(out) < 2 or out[-2] in (",", "+", "[", "{", "(", "="))
    return out


_PUNCT = frozenset("{}[](),;:|")
