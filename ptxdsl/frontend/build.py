"""Building a `ParsedModule` in Python, statement by statement: what a lifted PTX file
(`python -m ptxdsl lift`) runs, and a way to add to a compiler's output by hand.

::

    m = ParsedModule(file="k.ptx")
    m.directive(".version 8.5")
    m.directive(".target sm_90a")
    f = m.entry(".visible .entry k(.param .u64 k_param_0)")
    r = f.r
    f.declare(".reg .b32 %r<4>;")
    f.emit(Binary(op="add", type=ScalarType.s32, d=r("%r1"), a=r("%r2"), b=5))
    f.ptx("ret;")

Text goes through the parser's own code (`frontend.parser`), read in the scope the builder
is in, so a raw statement knows the registers it writes and reads, a declaration names its
registers for `f.r`, and a statement the parser would refuse is refused here, at the
caller's line. Typed instructions are built by their classes, which check them.
"""

from __future__ import annotations

import weakref
from typing import Any

import attrs

from ..errors import BuildError, SourceLoc, fail_closed, fail_closed_methods, user_loc
from ..instructions.base import Instruction, check_pred
from ..operands import Label, NegPred, Reg, Symbol, _show
from ..statements import LabelDef, Statement
from ..types import ScalarType, StateSpace
from .items import Directive, Raw, RawOperand, ScopedLabel
from .lexer import PtxParseError, Source, tokenize
from .module import ParsedFunction, ParsedModule
from .parser import _Parser, _Scope


@attrs.define(eq=False)
class _Names:
    """What a module's snippets share: its variables, its functions, its `.file` table."""

    globals: _Scope
    functions: dict[str, Symbol]
    files: dict[int, str]
    builders: list[FunctionBuilder] = attrs.Factory(list)


_STATE: weakref.WeakKeyDictionary[ParsedModule, _Names] = weakref.WeakKeyDictionary()


def _names(m: ParsedModule) -> _Names:
    """The module's names; a parsed module starts from its variables and functions, so a
    function added to it may use them."""
    st = _STATE.get(m)
    if st is None:
        scope = _Scope(None, 0)
        scope.syms.update((s.name, s) for s in m.variables)
        funcs = {f.name: Symbol(f.name, StateSpace.global_, ScalarType.b8, 1)
                 for f in m.functions}
        st = _STATE[m] = _Names(scope, funcs, m.files)
    return st


class _Snippet(_Parser):
    """The parser over one piece of text, sharing the module's names. `what` names the call
    in messages."""

    def __init__(self, names: _Names, text: Any, what: str):
        if not isinstance(text, str):
            raise BuildError(f"{what}: expected the PTX text as a str, got {_show(text)}")
        self.what = what
        src = Source(text, what)
        try:
            toks = tokenize(src)
        except PtxParseError as e:
            raise self._rephrase(e) from None
        super().__init__(src, toks)
        self.globals, self.functions, self.files = names.globals, names.functions, names.files
        self.body_scope: _Scope | None = None

    def _body(self, fn: ParsedFunction, top: _Scope, a: int, b: int) -> None:
        # A header is read with an empty body: keep the function's scope (its parameters)
        # for the statements the builder adds.
        self.body_scope = top

    def _rephrase(self, e: PtxParseError) -> BuildError:
        """The parser names `<snippet>:<line>`; the caller's line says where, the call what."""
        rule = e.message.split(": ", 1)[1] if e.message.startswith(self.what + ":") \
            else e.message
        return BuildError(f"{self.what}: {rule}")

    def run(self, fn: Any, *args: Any) -> Any:
        try:
            return fn(*args)
        except PtxParseError as e:
            raise self._rephrase(e) from None

    def one_statement(self) -> tuple[int, int]:
        """The token range of the one statement the text holds (through its ';')."""
        if not self.toks:
            raise BuildError(f"{self.what}: the text holds no statement")
        pieces = self.run(self._split, 0, len(self.toks))
        if len(pieces) != 1 or pieces[0][0] != "stmt":
            what = ("a label" if pieces[0][0] == "label" else "a scope brace") \
                if len(pieces) == 1 else f"{len(pieces)} statements"
            raise BuildError(f"{self.what}: expected one statement ending in ';', got {what} "
                             "(one call per statement; labels and scopes have their own "
                             "methods: f.label, f.open, f.close)")
        return pieces[0][1], pieces[0][2]


def _module_directive(m: ParsedModule, text: Any) -> None:
    """`m.directive(text)`: module-scope PTX (`.version`, `.target`, a variable, a prototype) parsed
    and appended to the module; the module's shared variables are visible to the functions it
    declares."""
    names = _names(m)
    sub = _Snippet(names, text, "m.directive")
    part = sub.run(sub.module)
    shared = [s for s in m.variables if s.space.is_shared]
    for item in part.items:
        if isinstance(item, ParsedFunction):   # the module's variables declared before it
            item.shared[:0] = shared
        m.items.append(item)
        kind = getattr(item, "kind", "")
        if kind == ".version":
            m.version = part.version
        elif kind == ".target":
            m.targets = part.targets
        elif kind == ".address_size":
            m.address_size = part.address_size
    m.variables.extend(part.variables)
    m.files.update(part.files)


def _module_function(m: ParsedModule, header: Any, kind: str) -> FunctionBuilder:
    """`m.entry(header)` / `m.func(header)`: a function header without its body, parsed, appended to
    the module, and returned as the `FunctionBuilder` that adds its statements; a `BuildError`
    for a body, a prototype or anything but one header."""
    names = _names(m)
    what = f"m.{kind}"
    words = [t[1] for t in _Snippet(names, header, what).toks]
    if not words or "{" in words or words[-1] == ";":
        raise BuildError(f"{what}: expected a function header without its body (the text "
                         f"before the body's '{{'; a prototype goes through m.directive), got "
                         f"{_show(header)}")
    sub = _Snippet(names, header + "\n{\n}", what)
    fn = sub.run(sub._declaration_or_function, m)
    if not isinstance(fn, ParsedFunction) or fn.kind != kind or sub.i != len(sub.toks):
        raise BuildError(f"{what}: expected one .{kind} header, got {header!r}")
    assert sub.body_scope is not None, "a function with a body has its scope"
    fn.header = header
    # Its statements will name the Python lines that add them; the function names this one.
    u = user_loc()
    fn.file, fn.line = u.file, u.line
    m.items.append(fn)
    b = FunctionBuilder(fn, sub.body_scope, names)
    names.builders.append(b)
    return b


class FunctionBuilder:
    """Adds statements to one function's body (`m.entry(...)`/`m.func(...)` make one).

    `r(name)` is what a name means at this point of the body: a register, a variable or
    parameter, a label, a special register, a function.
    """

    def __init__(self, function: ParsedFunction, scope: _Scope, names: _Names):
        self.function = function
        self._names = names
        self._scope = scope
        self._next_scope = 2
        self._unplaced: dict[int, dict[str, Label]] = {}   # scope id -> declared, not placed
        self._cur_loc: SourceLoc | None = None
        self._resolver = _Snippet(names, "", "f.r")

    # -- names -------------------------------------------------------------------------------
    def r(self, name: str) -> Any:
        """The register, variable, label, special register or function `name` names here."""
        if not isinstance(name, str) or not name:
            raise BuildError(f"f.r: expected a name such as '%r1', got {_show(name)}")
        res = self._resolver
        got = res.run(res._name, self._scope, name, 0)
        if isinstance(got, RawOperand) and not name.startswith("%"):
            raise BuildError(f"f.r: {name!r} names nothing declared so far in function "
                             f"{self.function.name} (declare it first: f.declare('.reg ...'), "
                             "f.labels(...))")
        return got

    def labels(self, *names: str) -> None:
        """Declare labels of the current scope before they are placed, so statements before
        their `f.label(...)` may branch to them."""
        for name in names:
            self._declare_label(name, "f.labels")

    def _declare_label(self, name: Any, what: str) -> Label:
        sc = self._scope
        if not isinstance(name, str):
            raise BuildError(f"{what}: expected a label name, got {_show(name)}")
        if name in sc.labels:
            placed = name not in self._unplaced.get(sc.id, {})
            raise BuildError(f"{what}: label {name} is already "
                             f"{'placed' if placed else 'declared'} in this scope")
        # PTX scopes labels like registers; a nested scope's label gets a name of its own
        # for the analysis (its text is kept), as the parser gives one.
        lab = Label(name) if sc.id == 1 else ScopedLabel(f"{name}$s{sc.id}", shown=name)
        sc.labels[name] = lab
        self._unplaced.setdefault(sc.id, {})[name] = lab
        return lab

    # -- statements --------------------------------------------------------------------------
    def _loc(self) -> SourceLoc:
        u = user_loc(2)
        return SourceLoc(u.file, u.line, self.function.name, self._cur_loc)

    def label(self, name: str) -> Label:
        """Place a label here (declared by `f.labels` earlier in this scope, or now)."""
        sid = self._scope.id
        if not (isinstance(name, str) and name in self._unplaced.get(sid, {})):
            self._declare_label(name, "f.label")
        lab = self._unplaced[sid].pop(name)
        self.function.body.append(LabelDef(lab, self._loc()))
        return lab

    def emit(self, insn: Instruction, guard: Reg | NegPred | None = None) -> Statement:
        """Append a typed instruction (built by its class), guarded by `guard` when given."""
        if not isinstance(insn, Instruction) or isinstance(insn, Raw | Directive):
            raise BuildError(f"f.emit: expected a ptxdsl instruction object such as "
                             f"Binary(...), got {_show(insn)} (PTX text goes through f.ptx, "
                             "declarations through f.declare)")
        if guard is not None:
            pred = check_pred("f.emit", "guard", guard.reg if isinstance(guard, NegPred)
                              else guard)
            assert isinstance(pred, Reg), "check_pred without negatable gives a register"
            self._check_declared("f.emit: guard", pred)
        who = f"f.emit: {insn.name}"
        for x in names_in(insn):
            if isinstance(x, Reg):
                self._check_declared(who, x)
            else:
                self._check_known(who, x)
        st = Statement(insn, guard, self._loc())
        self.function.body.append(st)
        return st

    def _check_declared(self, who: str, reg: Reg) -> None:
        """A register of a typed instruction must be one this scope declares, of its size:
        else the PTX would name an undeclared register, or one of another width."""
        mine = self._resolver._reg(self._scope, reg.render(), 0)
        if mine is None:
            raise BuildError(f"{who}: register {reg.render()} is not declared in function "
                             f"{self.function.name} at this point (f.declare('.reg ...') "
                             "first)")
        if mine.type.bits != reg.type.bits or (mine.type is ScalarType.pred) != (
                reg.type is ScalarType.pred):
            raise BuildError(f"{who}: register {reg.render()} is declared .{mine.type.value}, "
                             f"the instruction uses it as .{reg.type.value}")

    def _check_known(self, who: str, x: Symbol | Label) -> None:
        """A label or variable of a typed instruction must be the one its name means here
        (a nested scope's label is its own: take it from `f.r`)."""
        what = "label" if isinstance(x, Label) else "variable"
        try:
            mine = self._resolver._name(self._scope, x.render(), 0)
        except PtxParseError:
            mine = None
        if isinstance(x, Label):
            ok = isinstance(mine, Label) and mine.name == x.name
        else:
            ok = isinstance(mine, Symbol) and mine.name == x.name \
                and mine.space is x.space
        if not ok:
            raise BuildError(f"{who}: {what} {x.render()} is not the one declared under that "
                             f"name at this point of function {self.function.name} (declare "
                             "it first, and take it from f.r)")

    def ptx(self, text: str) -> Statement:
        """Append one instruction written as PTX text (`"@%p1 bra $L__BB0_2;"`): typed when a
        reader knows its form, kept as text (with the registers it writes and reads)
        otherwise, exactly as `parse_ptx` reads it."""
        sub = _Snippet(self._names, text, "f.ptx")
        s, e = sub.one_statement()
        if sub.toks[s][1].startswith("."):
            raise BuildError(f"f.ptx: {sub.toks[s][1]} is a declaration or directive: it goes "
                             "through f.declare")
        st = sub.run(sub._instruction, self._scope, s, e, self._loc())
        for insn, text in sub.spelled:     # a number spelled otherwise is emitted as written
            self.function.spelling[id(insn)] = (insn, text)
        self.function.body.append(st)
        return st

    def declare(self, text: str) -> Statement:
        """Append a declaration or directive (`.reg`, `.shared`, `.local`, `.param`, `.loc`,
        `.pragma`): the names it declares are known to the statements after it."""
        sub = _Snippet(self._names, text, "f.declare")
        loc = self._loc()
        fn = self.function
        if sub.toks and sub.toks[0][1] == ".loc" and sub.toks[-1][1] != ";":
            # `.loc` ends at its line, without a ';'.
            self._cur_loc = sub._loc(0, len(sub.toks), fn.name)
            st = Statement(Directive(".loc", sub.slice(0, len(sub.toks))), None,
                           loc._replace(caller=self._cur_loc))
            fn.body.append(st)
            return st
        s, e = sub.one_statement()
        if not sub.toks[s][1].startswith("."):
            raise BuildError(f"f.declare: expected a directive such as '.reg .b32 %r<4>;', "
                             f"got {text!r} (instructions go through f.ptx or f.emit)")
        if sub.toks[s][1] == ".loc":
            self._cur_loc = sub._loc(s, e, fn.name)
            loc = loc._replace(caller=self._cur_loc)
        sub.run(sub._body_directive, fn, self._scope, s, e, loc)
        last = fn.body[-1]
        assert type(last) is Statement, "_body_directive appends the directive's statement"
        return last

    def open(self) -> None:
        """`{`: a nested scope (its declarations and labels end at `close`)."""
        self._scope = _Scope(self._scope, self._next_scope)
        self._next_scope += 1
        self.function.body.append(Statement(Directive("{", "{"), None, self._loc()))

    def close(self) -> None:
        """`}`: end the innermost scope `open` began."""
        sc = self._scope
        if sc.parent is None or sc.id == 1:
            raise BuildError(f"f.close: function {self.function.name} has no open scope")
        self._check_placed(sc.id, "f.close")
        self._scope = sc.parent
        self.function.body.append(Statement(Directive("}", "}"), None, self._loc()))

    def _check_placed(self, sid: int, what: str) -> None:
        left = self._unplaced.get(sid)
        if left:
            raise BuildError(f"{what}: function {self.function.name}: label(s) "
                             f"{', '.join(left)} declared but never placed (f.label)")

    def check_complete(self) -> None:
        """Every scope closed and every declared label placed."""
        if self._scope.id != 1:
            raise BuildError(f"function {self.function.name}: a scope opened with f.open() "
                             "is not closed (f.close())")
        self._check_placed(1, "emit")


def names_in(value: Any) -> list[Reg | Symbol | Label]:
    """Every register, variable and label a statement's fields mention (in operands, in
    tuples, in nested objects such as the front end's `[map, {x, y}]`)."""
    out: list[Reg | Symbol | Label] = []
    todo = [value]
    for v in todo:   # in field order: the first operand named is the first wrong one
        if isinstance(v, Reg | Symbol | Label):
            out.append(v)
        elif isinstance(v, tuple | list):
            todo.extend(v)
        elif attrs.has(type(v)):
            todo.extend(getattr(v, f.name) for f in attrs.fields(type(v)))
    return out


def check_complete(m: ParsedModule) -> None:
    """What `ParsedModule.emit` runs first: the functions built in Python are complete (a
    scope left open or a label declared and never placed would be invalid PTX)."""
    st = _STATE.get(m)
    if st is not None:
        for b in st.builders:
            b.check_complete()


fail_closed_methods(FunctionBuilder, "FunctionBuilder")
module_directive = fail_closed("m.directive", _module_directive)
module_function = fail_closed("ParsedModule.entry/func", _module_function)
