"""Lifting PTX into a Python program that rebuilds it (`python -m ptxdsl lift FILE.ptx`).

The program builds the module with `ParsedModule`'s construction calls (`frontend.build`):
every typed instruction the parser read becomes a call of its class with keyword arguments
(registers as `r("%r1")`, addresses as `Addr(...)`, enums as `Enum.member`, immediates as
the numbers the class takes), so a field edited in Python is checked again by the class;
raw instructions, declarations and directives stay PTX text, read by the same parser.

The lifter proves what it writes as it goes: it runs each call on a module of its own and
compares the statement with the parsed one, and the whole module's PTX with the original's.
An instruction whose class does not take its own fields back (a field normalised into a
value its constructor refuses) is written as text, with a comment; `Lifted.as_text` lists
them.
"""

from __future__ import annotations

import enum
import importlib
import json
import math
import re
from typing import Any

import attrs

from ..errors import BuildError, PtxdslError
from ..operands import (
    SINK,
    Addr,
    Imm,
    Label,
    NegPred,
    Reg,
    Sink,
    SpecialReg,
    Symbol,
    Vec,
    _show,
)
from ..statements import LabelDef, Statement
from .build import FunctionBuilder, names_in
from .compare import key, statement_key
from .items import Directive, Raw
from .module import ParsedFunction, ParsedModule
from .parser import parse_ptx

# Statements per Python function of a long body's program (see `_Lifter._function`).
PART = 1000


class LiftError(PtxdslError):
    """The lifted program would not rebuild the module (a defect of the lifter: reported,
    never written)."""


@attrs.frozen
class Lifted:
    """A lifted program: its text, how many instructions it builds by class, and the typed
    instructions it had to write as text (`(class name, why)` each)."""

    source: str
    typed: int
    as_text: tuple[tuple[str, str], ...]


def lift_ptx(text: str, *, file: str = "<ptx>") -> Lifted:
    """Parse PTX text and lift it (`PtxParseError` names the file and line)."""
    return lift_module(parse_ptx(text, file=file))


def lift_module(module: ParsedModule) -> Lifted:
    """The Python program that rebuilds `module` (as `parse_ptx` gave it)."""
    if not isinstance(module, ParsedModule):
        raise BuildError(f"lift_module: expected a ParsedModule (parse_ptx's), got "
                         f"{_show(module)}")
    return _Lifter(module).run()


def _q(text: str) -> str:
    """A Python string literal: JSON's (its escapes are Python's), in single quotes when the
    text has double quotes and no single one (`'.file 1 "k.cu"'`)."""
    lit = json.dumps(text, ensure_ascii=False)
    if '"' not in text or "'" in text:
        return lit
    return "'" + _ESCAPE.sub(lambda m: '"' if m.group(1) == '"' else m.group(0), lit[1:-1]) + "'"


_ESCAPE = re.compile(r"\\(.)", re.S)


class _Unliftable(Exception):
    """A field value no Python expression of the lifter spells."""


class _Lifter:
    def __init__(self, module: ParsedModule):
        self.module = module
        self.shadow = ParsedModule(file=module.file)
        self.ns: dict[str, Any] = {}
        self.imports: dict[str, tuple[str, str]] = {}    # local name -> (module, name)
        self.lines: list[str] = []
        self.typed = 0
        self.as_text: list[tuple[str, str]] = []
        self.uses_r = False
        self.parts: dict[str, list[str]] = {}   # the functions of a long body's parts
        self.fb: FunctionBuilder | None = None
        self._import(ParsedModule, "ptxdsl.frontend")

    # -- the program ---------------------------------------------------------------------------
    def run(self) -> Lifted:
        for item in self.module.items:
            if isinstance(item, ParsedFunction) and not item.prototype:
                self._function(item)
            else:
                text = item.header if isinstance(item, ParsedFunction) else item.text
                self.lines.append(f"m.directive({_q(text)})")
                self._checked(item, self.shadow.directive, text)
        want, got = self.module.emit(), self.shadow.emit()
        if got != want:
            a, b = want.split("\n"), got.split("\n")
            line = next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y),
                        min(len(a), len(b))) + 1
            raise LiftError(f"{self.module.file}: the lifted program's PTX differs from the "
                            f"original's at its line {line}")
        return Lifted(self._program(), self.typed, tuple(self.as_text))

    def _program(self) -> str:
        name = self.module.file
        out = [f"# Lifted from {_q(name)} by `python -m ptxdsl lift`.",
               "# Running this file prints the module's PTX; build_module() returns the module "
               "to edit.",
               "# Typed instructions are built by their classes, so an edited field is checked "
               "again;",
               "# the rest is PTX text, read by ptxdsl's PTX parser.",
               "# ruff: noqa: E501",
               ""]
        out += self._import_lines()
        out += ["", "", "def build_module() -> ParsedModule:",
                f"    m = ParsedModule(file={_q(name)})"]
        out += [("    " + ln) if ln else "" for ln in self.lines]
        out += ["    return m"]
        for part in self.parts.values():
            out += part
        out += ["", "", 'if __name__ == "__main__":',
                '    print(build_module().emit(), end="")', ""]
        return "\n".join(out)

    def _import_lines(self) -> list[str]:
        by_module: dict[str, list[str]] = {}
        aliased: list[str] = []
        for local, (mod, name) in self.imports.items():
            if local == name:
                by_module.setdefault(mod, []).append(name)
            else:
                aliased.append(f"from {mod} import {name} as {local}")
        out = []
        for mod in sorted(by_module):
            # isort's order: CONSTANTS, Classes, then the rest.
            names = sorted(by_module[mod], key=lambda n: (
                0 if n.isupper() else 1 if n[:1].isupper() else 2, n.lower()))
            line = f"from {mod} import {', '.join(names)}"
            if len(line) > 100:
                line = f"from {mod} import (\n" + "".join(f"    {n},\n" for n in names) + ")"
            out.append(line)
        return out + sorted(aliased)

    def _import(self, obj: Any, module: str | None = None, name: str | None = None) -> str:
        """The local name under which the program imports `obj` (a class, or SINK)."""
        module = module or obj.__module__
        name = name or obj.__qualname__
        local = name
        n = 1
        while local in self.ns and self.ns[local] is not obj:
            n += 1
            local = f"{name}_{n}"
        if local not in self.ns:
            if "." in name or getattr(importlib.import_module(module), name, None) is not obj:
                raise _Unliftable(f"{name} cannot be imported from {module}")
            self.ns[local] = obj
            self.imports[local] = (module, name)
        return local

    # -- functions -----------------------------------------------------------------------------
    def _function(self, fn: ParsedFunction) -> None:
        make = self.shadow.entry if fn.kind == "entry" else self.shadow.func
        self.fb = fb = self._checked(fn, make, fn.header)
        self.ns["r"] = fb.r
        labels = _forward_labels(fn.body)
        body: list[tuple[str, bool]] = []   # (line, whether it calls r)
        if labels.get(0):
            body.append((self._labels(labels[0]), False))
        opened = 0
        self.spelling = fn.spelling
        for item in fn.body:
            line = self._checked(item, self._item, item, fb)
            body.append((line, self.uses_r))
            if line == "f.open()":
                opened += 1
                if labels.get(opened):
                    body.append((self._labels(labels[opened]), False))
        head = f"m.{fn.kind}({_q(fn.header)})"
        self.lines += ["", f"# .{fn.kind} {fn.name}", f"f = {head}" if body else head]
        if len(body) <= PART:
            self.lines += _with_r(body)
            return
        # A Python function finds the line of each call by scanning its line table from the
        # start (frame.f_lineno): one long function builds in quadratic time. Parts of PART
        # statements keep a 50,000-line kernel's program fast.
        stem = re.sub(r"\W", "_", fn.name).strip("_") or "function"
        for k in range(0, len(body), PART):
            name = f"_{stem}_{k // PART + 1}"
            while name in self.parts:
                name += "_"
            self.lines.append(f"{name}(f)")
            self.parts[name] = [
                "", "", f"def {name}(f: FunctionBuilder) -> None:",
                f'    """.{fn.kind} {_q(fn.name)[1:-1]}: lines {k + 1} to '
                f'{min(k + PART, len(body))} of its body."""',
                *("    " + ln for ln in _with_r(body[k:k + PART]))]
        self._import(FunctionBuilder, "ptxdsl.frontend.build")

    def _item(self, item: Any, fb: FunctionBuilder) -> str:
        """The program's line for one body item, made on the shadow module too."""
        n = len(fb.function.body)
        self.uses_r = False
        if type(item) is LabelDef:
            line = f"f.label({_q(item.label.render())})"
            fb.label(item.label.render())
        elif type(item.insn) is Directive and item.insn.kind == "{":
            line = "f.open()"
            fb.open()
        elif type(item.insn) is Directive and item.insn.kind == "}":
            line = "f.close()"
            fb.close()
        elif type(item.insn) is Directive:
            line = f"f.declare({_q(item.insn.text)})"
            fb.declare(item.insn.text)
        elif type(item.insn) is Raw or id(item.insn) in self.spelling:
            # A number the source spells otherwise than the class renders it (`0xFF`) is
            # kept as written: the statement is read from its text (typed all the same).
            spelled = self.spelling.get(id(item.insn))
            text = item.render() if spelled is None else (
                spelled[1] if item.guard is None else f"@{item.guard.render()} {spelled[1]}")
            line = f"f.ptx({_q(text)})"
            fb.ptx(text)
        else:
            line = self._typed(item, fb)
        self._same(item, fb.function.body[n:])
        return line

    def _checked(self, what: Any, fn: Any, *args: Any) -> Any:
        """`fn(*args)`; an error is the lifter's (the PTX was read): a `LiftError` naming the
        PTX line of `what`."""
        try:
            return fn(*args)
        except LiftError:
            raise
        except PtxdslError as e:
            line = what.loc.line if hasattr(what, "loc") else what.line
            raise LiftError(f"{self.module.file}:{line}: the lifted call fails: "
                            f"{e.message}") from e

    def _labels(self, names: list[str]) -> str:
        assert self.fb is not None
        self.fb.labels(*names)
        return f"f.labels({', '.join(_q(n) for n in names)})"

    def _same(self, item: Any, made: list[Any]) -> None:
        """The call just made appended one item equal to the parsed one."""
        ok = len(made) == 1 and type(made[0]) is type(item)
        if ok and type(item) is LabelDef:
            ok = made[0].label.render() == item.label.render()
        elif ok:
            ok = statement_key(made[0]) == statement_key(item) \
                and made[0].render() == item.render()
        if not ok:
            def show(x: Any) -> str:
                return x.label.render() + ":" if type(x) is LabelDef else x.render()
            raise LiftError(f"{self.module.file}:{item.loc.line}: the lifted call does not "
                            f"rebuild this statement: the PTX has {show(item)!r}, the call "
                            f"made {' '.join(show(x) for x in made)!r}")

    # -- typed instructions --------------------------------------------------------------------
    def _typed(self, st: Statement, fb: FunctionBuilder) -> str:
        code, why = self.rebuild(st.insn, st.guard)
        if code is not None:
            insn, guard = eval(f"({code[0]}, {code[1]})", self.ns)  # noqa: S307 - ours
            fb.emit(insn, guard)
            self.typed += 1
            return f"f.emit({code[0]}{', guard=' + code[1] if st.guard is not None else ''})"
        name = type(st.insn).__name__
        self.as_text.append((name, why))
        fb.ptx(st.render())
        short = " ".join(why.split())
        short = short if len(short) <= 60 else short[:57] + "..."
        return f"f.ptx({_q(st.render())})  # {name} kept as text: {short}"

    def rebuild(self, insn: Any, guard: Any = None) -> tuple[tuple[str, str] | None, str]:
        """Python expressions that build `insn` and `guard` by their classes (`r` in
        `self.ns` resolving names), proved by running them: `((insn, guard), "")`, or
        `(None, why not)`. Immediates are tried as plain numbers first, then as `Imm`."""
        why = ""
        for as_imm in (False, True):
            try:
                code = self._expr(insn, as_imm)
                gcode = self._expr(guard, as_imm)
            except _Unliftable as e:
                return None, str(e)
            try:
                got = eval(code, self.ns)   # noqa: S307 - the lifter's own expression
            except Exception as e:  # noqa: BLE001 - a class refusing its own fields: say why
                why = f"{type(e).__name__}: {e}"
                continue
            if key(got) == key(insn) and got.render() == insn.render():
                return (code, gcode), ""
            why = f"it rebuilds as {got.render()!r}"
        return None, why

    def _expr(self, v: Any, as_imm: bool) -> str:
        """A Python expression that makes `v` (as_imm: immediates as `Imm(value, type)`)."""
        if v is None or v is True or v is False:
            return repr(v)
        t = type(v)
        if isinstance(v, enum.Enum):
            cls = self._import(t)
            return f"{cls}.{v.name}" if v.name.isidentifier() else f"{cls}[{_q(v.name)}]"
        if t is int:
            return repr(v)
        if t is float:
            return repr(v) if math.isfinite(v) else f'float("{v}")'
        if t is str:
            return _q(v)
        if t is tuple:
            items = [self._expr(x, as_imm) for x in v]
            return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"
        if t is list:
            return "[" + ", ".join(self._expr(x, as_imm) for x in v) + "]"
        if isinstance(v, Reg | Symbol | Label | SpecialReg):
            self.uses_r = True
            return f"r({_q(v.render())})"
        if isinstance(v, Sink):
            return self._import(SINK, "ptxdsl.operands", "SINK")
        if isinstance(v, Imm):
            if not as_imm:
                return self._expr(v.value, as_imm)
            return f"{self._import(Imm)}({self._expr(v.value, as_imm)}, " \
                   f"{self._expr(v.type, as_imm)})"
        if isinstance(v, NegPred):
            return f"{self._import(NegPred)}({self._expr(v.reg, as_imm)})"
        if isinstance(v, Addr):
            base = self._expr(v.base, as_imm)
            off = f", {v.offset}" if v.offset else ""
            return f"{self._import(Addr)}({base}{off})"
        if isinstance(v, Vec):
            return f"{self._import(Vec)}({self._expr(list(v.items), as_imm)})"
        if attrs.has(t):
            return self._construct(v, as_imm)
        raise _Unliftable(f"no Python spelling for a {t.__name__} value")

    def _construct(self, v: Any, as_imm: bool) -> str:
        """`Class(field=..., ...)` for an attrs object: the fields its constructor takes,
        those equal to their default left out."""
        t = type(v)
        args = []
        for f in attrs.fields(t):
            if not f.init:
                continue
            value = getattr(v, f.name)
            default = f.default
            if callable(getattr(default, "factory", None)):   # attrs.Factory(...)
                default = attrs.NOTHING if default.takes_self else default.factory()
            if default is not attrs.NOTHING and _same_value(value, default):
                continue
            args.append(f"{f.alias}={self._expr(value, as_imm)}")
        return f"{self._import(t)}({', '.join(args)})"


def _with_r(body: list[tuple[str, bool]]) -> list[str]:
    """The lines, after `r = f.r` when one of them calls `r`."""
    lines = [line for line, _ in body]
    return ["r = f.r", *lines] if any(uses for _, uses in body) else lines


def _same_value(a: Any, b: Any) -> bool:
    try:
        return type(a) is type(b) and key(a) == key(b)
    except Exception:  # noqa: BLE001 - an odd value: spell it out rather than guess
        return False


def _forward_labels(body: list[Any]) -> dict[int, list[str]]:
    """The labels branched to before they are placed, by the scope they belong to (0 the
    function's, then each `{` in order): the program declares them where the scope opens."""
    placed: set[str] = set()
    early: set[str] = set()
    for item in body:
        if type(item) is LabelDef:
            placed.add(item.label.name)
        elif type(item.insn) is not Directive:
            early.update(x.name for x in names_in(item.insn)
                         if isinstance(x, Label) and x.name not in placed)
    out: dict[int, list[str]] = {}
    stack, opened = [0], 0
    for item in body:
        if type(item) is LabelDef:
            if item.label.name in early:
                out.setdefault(stack[-1], []).append(item.label.render())
        elif item.insn.kind == "{" if type(item.insn) is Directive else False:
            opened += 1
            stack.append(opened)
        elif type(item.insn) is Directive and item.insn.kind == "}":
            stack.pop()
    return out
