"""A parsed PTX module: its top-level items in file order, and its functions' statements.

`ParsedModule.emit()` writes the program back: top-level directives and function headers as
they were written, body statements one per line (typed instructions rendered by their class,
everything else as read), so the text is the original modulo whitespace and comments
between statements. `ParsedModule.kernels` are the `.entry` functions with a body, which the
hazard checker reads as it reads built kernels: `body`, `name`, `shared` and the directives.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import attrs

from ..operands import Reg, Symbol
from ..statements import LabelDef, Param, Statement
from ..types import PtxVersion, Requires, Target
from .items import Directive, Raw

if TYPE_CHECKING:  # pragma: no cover
    from .build import FunctionBuilder


@attrs.define
class TopLevel:
    """A module-scope directive or variable, kept as written."""

    kind: str
    text: str
    line: int

    def emit(self) -> list[str]:
        """Its lines of PTX text: the directive as it was read."""
        return [self.text]


@attrs.define(eq=False)
class ParsedFunction:
    """An `.entry` or `.func`, with its parameters, directives and body statements."""

    kind: str                       # "entry" or "func"
    linkage: tuple[str, ...] = ()
    name: str = ""
    file: str = "<ptx>"
    line: int = 0
    header: str = ""                # the text from the linkage to the body's '{' as written
    params: list[Param] = attrs.Factory(list)
    returns: list[Param] = attrs.Factory(list)
    # The `.reg` parameters and returns of a `.func`, by name: the registers its body uses.
    reg_params: dict[str, Reg] = attrs.Factory(dict)
    directives: dict[str, tuple[int, ...]] = attrs.Factory(dict)
    body: list[Statement | LabelDef] = attrs.Factory(list)
    shared: list[Symbol] = attrs.Factory(list)
    prototype: bool = False          # a declaration without a body
    # Typed statements whose source spelled a number otherwise than the class renders it
    # (`0xFFFFFFFF` for 4294967295): id(insn) -> (insn, source text), emitted as written.
    spelling: dict[int, tuple[Any, str]] = attrs.Factory(dict)

    # The directives as the checker reads them off a built kernel.
    @property
    def reqntid(self) -> tuple[int, ...] | None:
        """The `.reqntid` CTA shape, or None when the function has none."""
        return self.directives.get("reqntid") or None

    @property
    def maxntid(self) -> tuple[int, ...] | None:
        """The `.maxntid` bound on the CTA shape, or None."""
        return self.directives.get("maxntid") or None

    @property
    def reqnctapercluster(self) -> tuple[int, ...] | None:
        """The `.reqnctapercluster` cluster shape, or None."""
        return self.directives.get("reqnctapercluster") or None

    @property
    def decl_locs(self) -> dict[str, Any]:
        """Where each shared variable is declared (the checker names the declaration)."""
        return {s.name: s.loc for s in self.shared if s.loc is not None}

    def statements(self) -> Iterator[Statement]:
        """The instructions of the body (typed and raw), without labels and directives."""
        for item in self.body:
            if type(item) is Statement and type(item.insn) is not Directive:
                yield item

    def raw(self) -> list[Statement]:
        """The statements kept as text (no typed reading)."""
        return [s for s in self.statements() if type(s.insn) is Raw]

    def emit(self) -> list[str]:
        """Its lines of PTX text: the header as written, the body one statement a line
        (numbers spelled as in the source), nested blocks indented."""
        if self.prototype:
            return [self.header]
        lines = [self.header, "{"]
        depth = 1
        for item in self.body:
            if type(item) is LabelDef:
                lines.append(item.label.render() + ":")
                continue
            insn = item.insn
            if type(insn) is Directive and insn.kind == "}":
                depth -= 1
            spelled = self.spelling.get(id(insn))
            if spelled is not None and spelled[0] is insn:
                text = spelled[1] if item.guard is None else (
                    f"@{item.guard.render()} {spelled[1]}")
            else:
                text = item.render()
            lines.append("\t" * depth + text)
            if type(insn) is Directive and insn.kind == "{":
                depth += 1
        lines.append("}")
        return lines


@attrs.define(eq=False)
class ParsedModule:
    """What `parse_ptx` returns."""

    file: str = "<ptx>"
    version: str = ""
    targets: tuple[str, ...] = ()
    address_size: int = 64
    items: list[Any] = attrs.Factory(list)
    variables: list[Symbol] = attrs.Factory(list)
    files: dict[int, str] = attrs.Factory(dict)

    @property
    def target(self) -> str:
        """The first `.target` (the SM, `sm_90a`); `targets` has them all."""
        return self.targets[0] if self.targets else ""

    @property
    def functions(self) -> list[ParsedFunction]:
        """Every `.entry` and `.func`, declarations included, in file order."""
        return [x for x in self.items if isinstance(x, ParsedFunction)]

    @property
    def kernels(self) -> list[ParsedFunction]:
        """The `.entry` functions with a body, as the checker sees them: calls to `.func`
        helpers of this module inlined (`frontend.calls`; the functions themselves, and what
        `emit()` writes, are unchanged)."""
        from .calls import analysis_body
        defined = {f.name: f for f in self.functions if not f.prototype and f.kind == "func"}
        out = []
        for f in self.functions:
            if f.kind != "entry" or f.prototype:
                continue
            body = analysis_body(f, defined) if defined else f.body
            out.append(f if len(body) == len(f.body) else attrs.evolve(f, body=body))
        return out

    def function(self, name: str) -> ParsedFunction:
        """The function named `name` that has a body (`KeyError` when there is none)."""
        for f in self.functions:
            if f.name == name and not f.prototype:
                return f
        raise KeyError(f"no function {name!r} in {self.file}")

    def emit(self) -> str:
        """The module as PTX text: each item as it was read, in file order (a module built
        with `frontend.build` is checked complete first)."""
        from .build import check_complete
        check_complete(self)
        out: list[str] = []
        for item in self.items:
            out.extend(item.emit())
            if isinstance(item, ParsedFunction):
                out.append("")
        return "\n".join(out).rstrip("\n") + "\n"

    def requirements(self) -> list[tuple[Statement, Requires]]:
        """Each typed statement with the PTX ISA version and target its form needs (raw ones
        are the text's own business: ptxas judges them)."""
        return [(st, st.insn.requires) for f in self.functions for st in f.statements()
                if type(st.insn) is not Raw]

    def version_problems(self) -> list[str]:
        """The typed statements whose form the file's `.version`/`.target` do not allow, as
        `file:line: ...` messages (what ptxas would refuse, said before it runs)."""
        try:
            have, target = PtxVersion.parse(self.version), Target.parse(self.target)
        except (ValueError, TypeError):
            return []    # no (or an unknown) .version/.target: nothing to compare with
        out = []
        for st, need in self.requirements():
            c = need.ceiling
            if c is not None and need.above_ceiling(target):   # the builder's rule and words
                out.append(f"{st.loc.file}:{st.loc.line}: {st.insn.opcode()}: operand "
                           f"'{c.operand}': expected {c.expected} on the file's .target "
                           f"{self.target}, got {c.given}")
            elif need.version > have or not need.satisfied_by(target):
                out.append(f"{st.loc.file}:{st.loc.line}: {st.insn.opcode()} needs "
                           f"{need.describe()}; the file declares .version {self.version}, "
                           f".target {self.target}")
        return out

    def check(self, *, notes: bool = False, **context: Any) -> list:
        """The hazard checker's findings (see `ptxdsl.checker.check_module`)."""
        from ..checker import check_module
        return check_module(self, notes=notes, **context)

    # -- building in Python (`ptxdsl.frontend.build`; what `python -m ptxdsl lift` writes) --
    def directive(self, text: str) -> None:
        """Append module-level PTX text: `.version`, `.target`, a variable, a prototype."""
        from .build import module_directive
        module_directive(self, text)

    def entry(self, header: str) -> FunctionBuilder:
        """Append an `.entry` from its header; add its body through the builder returned."""
        from .build import module_function
        return module_function(self, header, "entry")

    def func(self, header: str) -> FunctionBuilder:
        """Append a `.func` from its header; add its body through the builder returned."""
        from .build import module_function
        return module_function(self, header, "func")
