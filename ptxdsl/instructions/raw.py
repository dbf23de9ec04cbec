"""Statements kept as PTX text: what a parsed PTX file holds that no class models.

`Raw` is an instruction ptxdsl has no class for (or one whose typed reading would not render
back to the same text); `Directive` is a declaration, a scope brace, `.loc` or `.pragma`
inside a body. Both render exactly the text they were read from. They live with the
instruction classes so that the checker (which sits below the front end) can read them: a raw
`st.shared` is still a shared-memory write.
"""

from __future__ import annotations

import attrs

from .base import Instruction, as_tuple


@attrs.frozen
class Raw(Instruction):
    """Any PTX instruction, as its text: `<opcode> <operands>;`.

    `d` holds the operands it writes (the checker's definitions), `srcs` those it reads;
    `why` says why no typed reading was kept (empty when ptxdsl has no model of the opcode).
    """

    MNEMONIC = "raw"

    text: str
    op: str
    d: tuple = attrs.field(default=(), converter=as_tuple)
    srcs: tuple = attrs.field(default=(), converter=as_tuple)
    why: str = attrs.field(default="", eq=False)

    def opcode(self) -> str:
        return self.op

    def operands(self) -> tuple:
        return self.d + self.srcs

    def render(self) -> str:
        return self.text + ";"


@attrs.frozen
class Directive(Instruction):
    """A declaration (`.reg`, `.shared`, `.local`, `.param`), `.loc`, `.pragma`, a call
    prototype, or a scope brace inside a body; `kind` is its first token."""

    MNEMONIC = "directive"

    kind: str
    text: str

    def opcode(self) -> str:
        return self.kind

    def render(self) -> str:
        return self.text
