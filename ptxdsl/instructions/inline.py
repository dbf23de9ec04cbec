"""Inline raw PTX with typed operand binding: `k.asm(template, outs=..., ins=...)`.

The counterpart of CUDA's `asm volatile(...)`, for PTX that ptxdsl has no builder for. The
template is PTX text with numbered placeholders `$0`, `$1`, ... (outputs first, then inputs);
each is replaced by the operand bound to it. The text is otherwise kept as written: leading
indentation is redone by scope depth, blank lines are dropped, comments are kept. See
`docs/inline_asm.md` for the rules checked at build time.
"""

from __future__ import annotations

import numbers
import re
from typing import Any, NoReturn

import attrs

from ..errors import BuildError, OperandError
from ..operands import (
    SPECIAL_REGISTER_NAMES,
    Addr,
    Imm,
    NegPred,
    Reg,
    SpecialReg,
    Symbol,
    make_imm,
)
from ..types import BASE, PtxVersion, Requires, ScalarType, Target
from .base import Instruction, _given, as_tuple, check_src

INSN = "inline asm"
_PLACEHOLDER = re.compile(r"(?<![\w$])\$(\d+)")
_LABEL = re.compile(r"[A-Za-z_$][\w$]*")
_PERCENT = re.compile(r"(?<![\w$%])%([A-Za-z_$][\w$]*|\d+)")
_NOISE = re.compile(r'//[^\n]*|/\*.*?\*/|"[^"\n]*"', re.S)   # comments, strings
_GUARD = re.compile(r"@!?\s*(\S+)\s+")
_REG_NAME = re.compile(r"(%?[A-Za-z_$][\w$]*)(?:<(\d+)>)?(?:\[\d+\])?")
# ptxdsl's automatic register names (kernel_core._AUTO_NAME), also as a `%r<N>` declaration.
_AUTO_NAME = re.compile(r"%(?:p|rs|r|rd|q|h|f|fd|rc)(?:\d+|<\d+>)\Z")
# Special registers a template may name directly: the one list the register namer uses too.
SPECIAL_REGISTERS = SPECIAL_REGISTER_NAMES


def _fail(code: str, pos: int, rule: str) -> NoReturn:
    raise BuildError(f"{INSN} (template line {code.count(chr(10), 0, pos) + 1}): {rule}")


def _mask(text: str) -> str:
    """`text` with comments and string literals blanked out (same length, newlines kept)."""
    code = _NOISE.sub(lambda m: re.sub(r"[^\n]", " ", m.group()), text)
    for token, rule in (("/*", "unterminated /* comment"), ('"', "unterminated string literal")):
        if token in code:
            _fail(code, code.index(token), rule)
    return code


@attrs.frozen
class _Stmt:
    start: int                  # offset of the statement in the (normalised) template
    text: str                   # masked code, without the ';'
    chain: tuple[int, ...]      # ids of the enclosing scoped blocks, outermost first
    label: bool = False


def _scan(code: str) -> tuple[list[_Stmt], list[tuple[int, int]]]:
    """Split masked code into statements and labels; return them and the scope-brace events
    (offset, +1 for a block's '{' or -1 for its '}')."""
    stmts: list[_Stmt] = []
    events: list[tuple[int, int]] = []
    chain: list[int] = []       # the open blocks, each named by the offset of its '{'
    start: int | None = None
    depth = {"[": 0, "{": 0, "(": 0}
    closing = {"]": "[", "}": "{", ")": "("}
    pct = code.find("%%")
    if pct >= 0:   # ptxas: "Parsing error near '%'"
        _fail(code, pct, "'%%' is CUDA's escaped register syntax (asm(\"mov.b32 %%r1, ...\")); "
              "a ptxdsl template is plain PTX: write %r1")
    for i, c in enumerate(code):
        if c == "#":
            _fail(code, i, "preprocessor directives (#define, #include, ...) are not allowed")
        if start is None:
            if c.isspace():
                continue
            if c == ";":   # ptxas: "Parsing error near ';': syntax error"
                _fail(code, i, "empty statement: a ';' with no instruction before it (';;', "
                      "'{ ;', '};' or 'label: ;'); ptxas rejects it as a syntax error")
            if c == "}" and not chain:
                _fail(code, i, "unbalanced '}' (no scoped block is open)")
            if c in "{}":
                events.append((i, 1 if c == "{" else -1))
                if c == "{":
                    chain.append(i)
                else:
                    chain.pop()
                continue
            start, depth = i, dict.fromkeys(depth, 0)
        if c in depth:
            depth[c] += 1
        elif c in closing:
            depth[closing[c]] -= 1
            if depth[closing[c]] < 0:
                if c == "}":
                    _fail(code, start, "a statement before '}' is not terminated with ';'")
                _fail(code, i, f"unbalanced '{c}'")
        elif c == ";":
            if any(depth.values()):
                bad = next(k for k, v in depth.items() if v)
                _fail(code, i, f"unbalanced '{bad}' in a statement")
            stmts.append(_Stmt(start, code[start:i], tuple(chain)))
            start = None
        elif (c == ":" and not any(depth.values()) and code[i + 1:i + 2] != ":"
              and _LABEL.fullmatch(code[start:i].strip())):
            name = code[start:i].strip()
            if _PLACEHOLDER.fullmatch(name):
                _fail(code, i, f"placeholder {name} cannot be a label")
            stmts.append(_Stmt(start, name, tuple(chain), label=True))
            start = None
    if start is not None:
        _fail(code, start, "statement not terminated with ';'")
    if chain:
        _fail(code, chain[-1], "unbalanced '{' (scoped block never closed)")
    if not stmts:
        _fail(code, 0, "the template has no statements")
    return stmts, events


def _split_operands(text: str, base: int) -> list[tuple[int, int]]:
    """Spans (start, end), as template offsets, of the top-level comma-separated operands."""
    spans, level, s = [], 0, 0
    for i, c in enumerate(text):
        if c in "[{(":
            level += 1
        elif c in "]})":
            level -= 1
        elif c == "," and level == 0:
            spans.append((base + s, base + i))
            s = i + 1
    if text.strip():
        spans.append((base + s, base + len(text)))
    return spans


def _stated(spec: Any) -> Requires:
    """`requires=`: None, a `Requires` (`types.req(...)`), a version, or (version, target)."""
    if spec is None or isinstance(spec, Requires):
        return spec or BASE
    parts = (spec,) if isinstance(spec, str) else spec
    if not isinstance(parts, tuple | list) or not 1 <= len(parts) <= 2:
        raise BuildError(f"{INSN}: requires= expects ('8.0', 'sm_90a'), a version string or "
                         f"types.req(...), got {spec!r}")
    try:
        version = PtxVersion.parse(parts[0])
        target = Target.parse(parts[1]) if len(parts) == 2 else Target(75)
    except ValueError as e:
        raise BuildError(f"{INSN}: requires=: {e}") from None
    arch = frozenset({target.sm}) if target.suffix else frozenset()
    return Requires(version, target.sm, arch, target.suffix == "f")


def _bind_in(i: int, spec: Any):
    """An input operand: a register, predicate, typed immediate, address, symbol or special
    register; `(value, type)` checks a register or converts a number to that type."""
    what = f"${i}"
    if isinstance(spec, tuple) and len(spec) == 2 and isinstance(spec[1], ScalarType):
        value, t = spec
        if isinstance(value, Addr | Symbol | NegPred):
            raise OperandError(INSN, what, "a register or number with a type spec",
                               _given(value))
        return check_src(INSN, what, value, t, special=True)
    if isinstance(spec, Imm):
        return make_imm(INSN, what, spec.value, spec.type)
    if isinstance(spec, Reg | Addr | Symbol | SpecialReg):
        return spec
    if isinstance(spec, NegPred):
        raise OperandError(INSN, what, "a predicate register (write the negation in the "
                           f"template: @!{what})", f"!%{spec.reg.name}")
    if isinstance(spec, numbers.Integral) and not isinstance(spec, bool):
        return make_imm(INSN, what, spec, ScalarType.b64)
    if isinstance(spec, ScalarType):
        raise OperandError(INSN, what, "an operand (a type spec is written as a pair: "
                           "ins=[(value, t.u32)])", _given(spec))
    if isinstance(spec, float):
        raise OperandError(INSN, what, "a typed float immediate: (x, t.f32) or Imm(x, t.f32)",
                           repr(spec))
    raise OperandError(INSN, what, "a register, (value, type), Imm, Addr or Symbol",
                       _given(spec))




@attrs.frozen
class InlineAsm(Instruction):
    """Raw PTX: `<template with $0, $1, ...>` (a scoped `{ .reg ...; ... }` block allowed).

    `outs` are registers the template writes (`$0..`), `ins` the operands it reads (numbered
    after the outputs); `stated` is the PTX ISA version and target the author says it needs.
    """

    MNEMONIC = "asm"
    template: str
    outs: tuple = attrs.field(converter=as_tuple, default=())
    ins: tuple = attrs.field(converter=as_tuple, default=())
    stated: Requires = attrs.field(converter=_stated, default=None)
    lines: tuple = attrs.field(init=False, default=(), repr=False, eq=False)
    declared: frozenset = attrs.field(init=False, default=frozenset(), repr=False, eq=False)
    first: str = attrs.field(init=False, default="", repr=False, eq=False)
    guardable: bool = attrs.field(init=False, default=False, repr=False, eq=False)

    def __attrs_post_init__(self):
        if not isinstance(self.template, str):
            raise BuildError(f"{INSN}: the template must be a str, got "
                             f"{type(self.template).__name__}")
        outs = tuple(_bind_in(i, o) if isinstance(o, tuple) else o
                     for i, o in enumerate(self.outs))
        for i, r in enumerate(outs):
            if not isinstance(r, Reg) or any(r is o for o in outs[:i]):
                raise OperandError(INSN, f"${i}", "an output register (or a type), each once",
                                   _given(r) + (" again" if isinstance(r, Reg) else ""))
        self._set("outs", outs)
        self._set("ins", tuple(_bind_in(len(outs) + i, v) for i, v in enumerate(self.ins)))
        text = "\n".join(ln.strip() for ln in self.template.replace("\r\n", "\n").split("\n"))
        bad = next((i for i, c in enumerate(text)
                    if not (c.isascii() and (c.isprintable() or c in "\t\n"))), None)
        if bad is not None:   # ptxas: "Unexpected non-ASCII character", at no useful line
            _fail(text, bad, f"character {text[bad]!r} is not printable ASCII (ptxas reads "
                  "ASCII only, comments included)")
        code = _mask(text)
        stmts, events = _scan(code)
        roles = self._check_statements(code, stmts)
        self._check_uses(code, roles)
        label_at = {s.start for s in stmts if s.label}
        self._set("lines", self._layout(text, code, events, roles, label_at))
        self._set("guardable", len(stmts) == 1 and not stmts[0].chain and not stmts[0].label
                  and not stmts[0].text.lstrip().startswith("@"))

    # -- checks -----------------------------------------------------------------------------
    def _check_statements(self, code: str, stmts: list[_Stmt]) -> dict[int, tuple[int, str]]:
        """Check every statement; return each placeholder's offset -> (index, role)."""
        labels = {(s.text, s.chain[-1]) for s in stmts if s.label and s.chain}
        decls: set[tuple[str, int]] = set()     # (declared register name, scope id)
        roles: dict[int, tuple[int, str]] = {}
        defined: set[tuple[str, int]] = set()
        for s in stmts:
            if s.label:
                if not s.chain:
                    _fail(code, s.start, f"label {s.text}: at the top level it would clash with "
                          "the kernel's labels; put it inside a scoped block { ... }")
                if (s.text, s.chain[-1]) in defined:   # ptxas: "Duplicate definition of label"
                    _fail(code, s.start, f"label {s.text} is defined twice in one scoped block "
                          "(ptxas: duplicate definition); rename one")
                defined.add((s.text, s.chain[-1]))
                if s.text.startswith("$L__"):
                    _fail(code, s.start, f"label {s.text} looks like ptxdsl's generated labels")
                continue
            body = s.text.lstrip()
            pos = s.start + len(s.text) - len(body)
            guard = _GUARD.match(body) if body.startswith("@") else None
            if body.startswith("@") and guard is None:
                _fail(code, pos, "a guard @p must be followed by an instruction")
            op_at = pos + (guard.end() if guard else 0)
            end = s.start + len(s.text)
            words = code[op_at:end].split(None, 1)
            if not words:  # e.g. "@$1 ;": a guard with nothing to guard
                _fail(code, pos, "a guard @p must be followed by an instruction")
            opcode = words[0]
            if opcode.startswith("."):
                self._directive(code, s, op_at, opcode, decls)
                continue
            if _PLACEHOLDER.search(opcode):
                _fail(code, op_at, f"a placeholder cannot stand for an opcode ({opcode})")
            if not self.first:
                self._set("first", opcode)
            rest = op_at + len(opcode)
            spans = _split_operands(code[rest:end], rest)
            for m in _PLACEHOLDER.finditer(code, s.start, end):
                a = m.start()
                role = ("guard" if a < op_at else
                        "addr" if code.count("[", s.start, a) > code.count("]", s.start, a) else
                        "dest" if spans and spans[0][0] <= a < spans[0][1] else "src")
                roles[a] = (int(m.group(1)), role)
            if opcode.split(".")[0] == "bra" and spans:
                target = code[spans[0][0]:spans[0][1]].strip()
                if not any((target, sc) in labels for sc in s.chain):
                    _fail(code, s.start, f"bra target {target!r} is not a label of this "
                          "template's scoped block; branch to kernel labels with k.bra()")
            for m in _PERCENT.finditer(code, s.start, end):
                self._check_reference(code, m, s, decls)
        self._set("declared", frozenset(name for name, _ in decls | labels))
        return roles

    def _directive(self, code, s: _Stmt, at: int, opcode: str, decls) -> None:
        if not s.chain:
            hint = ("; declare registers in a scoped block { .reg ...; ... } or bind ptxdsl "
                    "registers as operands" if opcode == ".reg" else "")
            _fail(code, at, f"directive {opcode} is not allowed at the top level of a "
                  f"template{hint}")
        if opcode != ".reg":
            _fail(code, at, f"directive {opcode} is not allowed in a template (only .reg "
                  "declarations, inside a scoped block)")
        if _PLACEHOLDER.search(s.text):
            _fail(code, at, "a placeholder cannot appear in a .reg declaration")
        m = re.fullmatch(r"\s*\.reg((?:\s*\.\w+)+)\s+(.+)", s.text, re.S)
        bound = {o.render(): i for i, o in enumerate(self.bound) if isinstance(o, Reg)}
        bound.update({o.name: i for i, o in enumerate(self.bound) if isinstance(o, Symbol)})
        bound.update({o.base.render(): i for i, o in enumerate(self.bound)
                      if isinstance(o, Addr) and isinstance(o.base, Reg | Symbol)})
        for item in (m.group(2).split(",") if m else [""]):
            d = _REG_NAME.fullmatch(item.strip())
            if d is None or d.group(2) and int(d.group(2)) > 1 << 16:
                _fail(code, at, f"cannot read the .reg declaration {s.text.strip()!r}")
            name, count = d.group(1), d.group(2)
            if _AUTO_NAME.match(name + (f"<{count}>" if count else "")):
                _fail(code, at, f"register {name}{f'<{count}>' if count else ''} would shadow "
                      "ptxdsl's automatic register names (%r<N>, %rd<N>, %p<N>, %f<N>, ...); "
                      "choose another name")
            if name in bound:
                _fail(code, at, f"register {name} would shadow operand ${bound[name]} "
                      "bound to the same name")
            if name.lstrip("%") in SPECIAL_REGISTER_NAMES:
                _fail(code, at, f"register {name} would shadow the special register of that "
                      "name; choose another name")
            names = [f"{name}{i}" for i in range(int(count))] if count else [name]
            decls.update((n, s.chain[-1]) for n in names)

    @staticmethod
    def _check_reference(code: str, m: re.Match, s: _Stmt, decls) -> None:
        name = m.group(1)
        if name.isdigit():
            _fail(code, m.start(), f"%{name} is CUDA's placeholder syntax; ptxdsl templates "
                  f"use ${name}")
        if name not in SPECIAL_REGISTERS and not any(("%" + name, sc) in decls
                                                     for sc in s.chain):
            _fail(code, m.start(), f"%{name} is not declared in the template's scoped block "
                  "and is not a bound operand; bind kernel registers as operands ($N)")

    def _check_uses(self, code: str, roles: dict[int, tuple[int, str]]) -> None:
        n, seen = len(self.bound), set()
        for at, (i, role) in sorted(roles.items()):
            if re.match(r"\$\d+[A-Za-z_$]", code[at:]):
                _fail(code, at, f"placeholder ${i} runs into the text after it")
            if i >= n:
                _fail(code, at, f"placeholder ${i} has no operand ({n} bound: outputs "
                      f"{len(self.outs)}, inputs {len(self.ins)})")
            seen.add((i, role))
            op = self.bound[i]
            if role == "guard" and not (isinstance(op, Reg) and op.type is ScalarType.pred):
                raise OperandError(INSN, f"${i}", "a .pred register for a guard @$N",
                                   _given(op))
            if role == "addr" and (isinstance(op, Addr) or isinstance(op, Reg)
                                   and op.type is ScalarType.pred):
                raise OperandError(INSN, f"${i}", "an operand that can stand inside [...] "
                                   "(an Addr brings its own brackets: write $N, not [$N])",
                                   _given(op))
        used = {i for i, _ in seen}
        for i, op in enumerate(self.bound):
            if i not in used:
                kind = "output" if i < len(self.outs) else "input"
                raise BuildError(f"{INSN}: {kind} operand ${i} ({_given(op)}) is never used "
                                 "in the template")
            if i < len(self.outs) and (i, "dest") not in seen:
                raise BuildError(f"{INSN}: output ${i} (%{op.name}) is never written: use it "
                                 "as the destination (first operand) of an instruction")

    @staticmethod
    def _layout(text: str, code: str, events, roles, label_at) -> tuple:
        """Per line: (indent, parts); a part is literal text or (index, bare). The indent is
        the scope depth, one less for a line that closes a block or starts with a label."""
        out, start = [], 0
        closes = {at for at, d in events if d < 0}
        level, ev = 0, 0        # the scope depth before `start`, from the (ordered) events
        for line in text.split("\n"):
            end = start + len(line)
            while ev < len(events) and events[ev][0] < start:
                level += events[ev][1]
                ev += 1
            depth = level
            if start in label_at or start in closes:
                depth -= 1
            parts: list = []
            last = start
            for m in _PLACEHOLDER.finditer(code, start, end):
                parts.append(text[last:m.start()])
                parts.append((int(m.group(1)), roles[m.start()][1] == "addr"))
                last = m.end()
            parts.append(text[last:end])
            if line:  # blank lines are dropped
                out.append((depth, tuple(p for p in parts if p != "")))
            start = end + 1
        return tuple(out)

    # -- Instruction interface --------------------------------------------------------------
    @property
    def bound(self) -> tuple:
        """The operands bound to the template's placeholders, outputs first (`%0`, `%1`, ... in that
        order)."""
        return self.outs + self.ins

    @property
    def requires(self) -> Requires:
        r = self.stated
        for op in self.ins:
            if isinstance(op, SpecialReg):
                r = r.merge(Requires(op.requires_version, op.requires_sm))
        return r

    @property
    def name(self) -> str:
        return f"{INSN} `{self.first or '...'}`"

    def opcode(self) -> str:
        return self.MNEMONIC

    def operands(self):
        return self.bound

    def _operand_text(self, i: int, bare: bool) -> str:
        op = self.bound[i]
        if isinstance(op, Symbol):
            return op.name if bare else Addr(op).render()
        return op.render()

    def render(self) -> str:
        return "\n".join("\t" * depth + "".join(
            p if isinstance(p, str) else self._operand_text(*p) for p in parts)
            for depth, parts in self.lines)
