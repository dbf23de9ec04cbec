"""PTX text into a `ParsedModule`: top-level directives, functions, and their bodies as
ptxdsl statements.

Two passes over a body: the first splits it into statements, labels and scope braces (so a
branch may name a label defined later in its scope), the second resolves names through the
scope chain and reads each instruction: typed where a reader in `frontend.readers` knows the
form and its rendering gives back the same tokens, `Raw` otherwise. Nothing is dropped or
reordered; what the parser cannot read is a `PtxParseError` naming the file and line.
"""

from __future__ import annotations

import re
from typing import Any

from ..errors import SourceLoc
from ..operands import (
    READABLE_SPECIAL_REGISTERS,
    SINK,
    SPECIAL_REGISTER_NAMES,
    Addr,
    Label,
    NegPred,
    Reg,
    SpecialReg,
    Symbol,
    Vec,
)
from ..statements import LabelDef, Param, Statement
from ..types import ScalarType, StateSpace
from .items import Braces, Bracket, Directive, PlainReg, PredPair, Raw, RawOperand, ScopedLabel
from .lexer import PtxParseError, Source, Token, canon, number, tokenize
from .module import ParsedFunction, ParsedModule, TopLevel
from .readers import READERS, RESPELL
from .readers.move import float_bits

_SPACES = {".shared": StateSpace.shared, ".global": StateSpace.global_,
           ".const": StateSpace.const, ".local": StateSpace.local, ".param": StateSpace.param}
_LINKAGE = (".visible", ".extern", ".weak", ".common")
_RANGE = re.compile(r"(.*?)(\d+)\Z")
# Opcodes whose first operand is not a result (the rest write their first operand).
_NO_DEST = frozenset("""st red bar barrier membar fence bra brx ret exit trap prefetch prefetchu
    cp setmaxnreg tensormap griddepcontrol stmatrix nanosleep pmevent discard applypriority
    brkpt st.async red.async st.bulk wgmma.fence wgmma.commit_group wgmma.wait_group
    mbarrier.init mbarrier.inval mbarrier.expect_tx mbarrier.complete_tx multimem.st
    multimem.red clusterlaunchcontrol.try_cancel tcgen05.alloc tcgen05.dealloc tcgen05.st
    tcgen05.mma tcgen05.cp tcgen05.shift tcgen05.commit tcgen05.fence tcgen05.wait
    tcgen05.relinquish_alloc_permit cp.async.bulk.tensor""".split())
_SPECIAL = {f"%{n}": t for n, (t, _) in READABLE_SPECIAL_REGISTERS.items()}


def parse_ptx(text: str, *, file: str = "<ptx>") -> ParsedModule:
    """Read a PTX module. `file` names it in errors and in the statements' locations."""
    if not isinstance(text, str):
        raise PtxParseError(f"parse_ptx: expected the PTX text as a str, got "
                            f"{type(text).__name__}")   # located at the caller's line
    src = Source(text, file)
    return _Parser(src, tokenize(src)).module()


class _Scope:
    __slots__ = ("parent", "regs", "ranges", "syms", "labels", "id")

    def __init__(self, parent: _Scope | None, sid: int):
        self.parent, self.id = parent, sid
        self.regs: dict[str, Reg] = {}
        self.ranges: dict[str, tuple[int, ScalarType]] = {}
        self.syms: dict[str, Symbol] = {}
        self.labels: dict[str, Label] = {}


class _Parser:
    def __init__(self, src: Source, toks: list[Token]):
        self.src, self.toks, self.i = src, toks, 0
        self.globals = _Scope(None, 0)
        self.functions: dict[str, Symbol] = {}
        self.files: dict[int, str] = {}
        # `.loc` (file, line, column) -> where that code was inlined (`inlined_at`).
        self.inlined: dict[tuple[int, int, int], tuple[int, int, int]] = {}
        # Typed statements whose source spells a number otherwise: (insn, source text).
        self.spelled: list[tuple[Any, str]] = []

    # -- token helpers ------------------------------------------------------------------
    def fail(self, at: int, rule: str) -> PtxParseError:
        off = self.toks[min(at, len(self.toks) - 1)][2] if self.toks else 0
        return self.src.fail(off, rule)

    def peek(self, k: int = 0) -> str:
        j = self.i + k
        return self.toks[j][1] if j < len(self.toks) else ""

    def take(self) -> Token:
        if self.i >= len(self.toks):
            raise self.fail(self.i, "unexpected end of file")
        t = self.toks[self.i]
        self.i += 1
        return t

    def expect(self, text: str) -> Token:
        t = self.take()
        if t[1] != text:
            raise self.fail(self.i - 1, f"expected {text!r}, got {t[1]!r}")
        return t

    def until(self, end: str) -> int:
        """The index of the next `end` at bracket depth 0 (not consumed)."""
        depth, j, toks = 0, self.i, self.toks
        while j < len(toks):
            t = toks[j][1]
            if t == end and depth == 0:
                return j
            if t in "([{":
                depth += 1
            elif t in ")]}":
                depth -= 1
            j += 1
        raise self.fail(self.i, f"missing {end!r}")

    def slice(self, a: int, b: int) -> str:
        """The source text of tokens a..b-1 as written (comments inside kept)."""
        if a >= b:
            return ""
        end = self.toks[b - 1]
        return self.src.text[self.toks[a][2]:end[2] + len(end[1])]

    def line(self, j: int) -> int:
        return self.src.line(self.toks[j][2])

    # -- module ---------------------------------------------------------------------------
    def module(self) -> ParsedModule:
        mod = ParsedModule(file=self.src.file)
        toks = self.toks
        # nvcc -G writes the `.file` table after the functions whose `.loc` lines use it.
        for j, tok in enumerate(toks):
            if tok[1] == ".file" and j + 2 < len(toks) and toks[j + 1][0] == "num" \
                    and toks[j + 2][0] == "str":
                self.files[int(number(toks[j + 1][1]))] = toks[j + 2][1][1:-1]
        while self.i < len(toks):
            start, t = self.i, toks[self.i][1]
            if t in (".version", ".target", ".address_size"):
                end = self._line_end()
                words = [x[1] for x in toks[start + 1:end] if x[1] != ","]
                if t == ".version":
                    mod.version = words[0] if words else ""
                elif t == ".target":
                    mod.targets = tuple(words)
                else:
                    mod.address_size = int(words[0]) if words else 64
                self.i = end
                mod.items.append(TopLevel(t, self.slice(start, end), self.line(start)))
            elif t == ".file":
                end = self._line_end()
                self.i = end
                mod.items.append(TopLevel(t, self.slice(start, end), self.line(start)))
            elif t == ".section":
                self.i += 2
                self.expect("{")
                self.i = self.until("}") + 1
                mod.items.append(TopLevel(t, self.slice(start, self.i), self.line(start)))
            elif t == ".pragma":
                self.i = self.until(";") + 1
                mod.items.append(TopLevel(t, self.slice(start, self.i), self.line(start)))
            else:
                mod.items.append(self._declaration_or_function(mod))
        mod.files = dict(self.files)
        return mod

    def _line_end(self) -> int:
        """Directives like `.version 8.5` end at their line's end (no ';')."""
        line = self.line(self.i)
        j = self.i + 1
        while j < len(self.toks) and self.line(j) == line and self.toks[j][1] != ";":
            j += 1
        return j

    def _declaration_or_function(self, mod: ParsedModule) -> Any:
        start = self.i
        j = start
        while self.peek(j - start) in _LINKAGE:
            j += 1
        kind = self.toks[j][1] if j < len(self.toks) else ""
        if kind in (".entry", ".func"):
            return self._function(mod, start, j)
        if kind in _SPACES or kind in (".tex", ".surf", ".samplerref", ".texref"):
            end = self.until(";")
            sym = self._variable(start, end, self.globals, module=True)
            self.i = end + 1
            item = TopLevel(kind, self.slice(start, self.i), self.line(start))
            if sym is not None:
                mod.variables.append(sym)
            return item
        if kind in (".alias", ".pragma"):
            self.i = self.until(";") + 1
            return TopLevel(kind, self.slice(start, self.i), self.line(start))
        raise self.fail(j, f"expected a directive, a variable or a function, got {kind!r}")

    # -- declarations -------------------------------------------------------------------
    def _variable(self, a: int, b: int, scope: _Scope, module: bool = False) -> Symbol | None:
        """`[linkage] .space [.align N] [.vN] .type name[[n]]* [= init]` (tokens a..b)."""
        toks = self.toks
        space, align, t, vec = None, None, None, 1
        j = a
        while j < b and toks[j][1].startswith("."):
            w = toks[j][1]
            if w in _SPACES:
                space = _SPACES[w]
            elif w == ".align":
                j += 1
                align = int(number(toks[j][1]))
            elif w in (".v2", ".v4", ".v8"):
                vec = int(w[2:])
            elif w in (".ptr",) or w in _LINKAGE:
                pass
            else:
                try:
                    t = ScalarType(w[1:])
                except ValueError:
                    if w.startswith((".tex", ".surf", ".sampler")):
                        return None
                    raise self.fail(j, f"unknown type {w!r} in a declaration") from None
            j += 1
        if space is None or t is None or j >= b or toks[j][0] != "id":
            raise self.fail(a, "a declaration needs a state space, a type and a name")
        name = toks[j][1]
        count: int | None = vec
        j += 1
        dims: list[int | None] = []
        while j < b and toks[j][1] == "[":
            if toks[j + 1][1] == "]":
                dims.append(None)
                j += 2
            else:
                dims.append(int(number(toks[j + 1][1])))
                j += 3
        if dims:
            count = None if None in dims else vec
            for d in dims:
                if d is not None and count is not None:
                    count *= d
        sym = Symbol(name, space, t, count, align, loc=SourceLoc(self.src.file, self.line(a)))
        scope.syms[name] = sym
        return sym

    def _registers(self, a: int, b: int, scope: _Scope) -> None:
        """`.reg [.vN] .type name[<n>] [, name[<n>]]*`."""
        toks = self.toks
        j, t = a + 1, None
        while j < b and toks[j][1].startswith("."):
            w = toks[j][1]
            if w not in (".v2", ".v4", ".v8"):
                try:
                    t = ScalarType(w[1:])
                except ValueError:
                    raise self.fail(j, f"unknown register type {w!r}") from None
            j += 1
        if t is None:
            raise self.fail(a, ".reg needs a type")
        while j < b:
            name = toks[j][1]
            if toks[j][0] != "id":
                raise self.fail(j, f"expected a register name, got {name!r}")
            j += 1
            if j < b and toks[j][1] == "<":
                scope.ranges[name] = (int(number(toks[j + 1][1])), t)
                j += 3
            else:
                scope.regs[name] = _make_reg(t, name)
            if j < b and toks[j][1] == ",":
                j += 1

    # -- functions ------------------------------------------------------------------------
    def _function(self, mod: ParsedModule, start: int, j: int) -> ParsedFunction:
        toks = self.toks
        linkage = tuple(t[1] for t in toks[start:j])
        kind = toks[j][1]
        self.i = j + 1
        fn = ParsedFunction(kind=kind[1:], linkage=linkage, file=self.src.file)
        scope = _Scope(self.globals, 1)
        if kind == ".func" and self.peek() == "(":
            fn.returns = self._params(scope)
        name_tok = self.take()
        if name_tok[0] != "id":
            raise self.fail(self.i - 1, f"expected the function's name, got {name_tok[1]!r}")
        fn.name, fn.line = name_tok[1], self.line(self.i - 1)
        self.functions[fn.name] = Symbol(fn.name, StateSpace.global_, ScalarType.b8, 1)
        if self.peek() == "(":
            fn.params = self._params(scope)
        fn.reg_params = {p.name: scope.regs[p.name] for p in (*fn.returns, *fn.params)
                         if p.name in scope.regs}
        while self.peek() not in ("{", ";", ""):
            self._performance_directive(fn)
        if self.peek() == ";":
            self.i += 1
            fn.header = self.slice(start, self.i)
            fn.prototype = True
            return fn
        fn.header = self.slice(start, self.i)
        body_start = self.i
        self.expect("{")
        self.i = self.until("}") + 1
        fn.shared = [s for s in mod.variables if s.space.is_shared]
        self._body(fn, scope, body_start + 1, self.i - 1)
        fn.spelling = {id(insn): (insn, text) for insn, text in self.spelled}
        return fn

    def _params(self, scope: _Scope) -> list[Param]:
        self.expect("(")
        out: list[Param] = []
        while self.peek() != ")":
            a = self.i
            b = min(self.until(","), self.until(")")) if self._has_comma() else self.until(")")
            out.append(self._param(a, b, scope))
            self.i = b
            if self.peek() == ",":
                self.i += 1
        self.expect(")")
        return out

    def _has_comma(self) -> bool:
        try:
            return self.until(",") < self.until(")")
        except PtxParseError:
            return False

    def _param(self, a: int, b: int, scope: _Scope) -> Param:
        toks = self.toks
        t, align, ptr, ptr_space, ptr_align = None, None, False, None, None
        j = a
        is_reg = False
        while j < b and toks[j][1].startswith("."):
            w = toks[j][1]
            is_reg = is_reg or w == ".reg"
            if w == ".align":
                j += 1
                if ptr:
                    ptr_align = int(number(toks[j][1]))
                else:
                    align = int(number(toks[j][1]))
            elif w == ".ptr":
                ptr = True
            elif ptr and w in (".global", ".shared", ".const", ".local"):
                ptr_space = _SPACES[w]
            elif w not in (".param", ".reg"):
                try:
                    t = ScalarType(w[1:])
                except ValueError:
                    raise self.fail(j, f"unknown parameter type {w!r}") from None
            j += 1
        if t is None or j >= b:
            raise self.fail(a, "a parameter needs a type and a name")
        name = toks[j][1]
        count: int | None = 1
        if j + 1 < b and toks[j + 1][1] == "[":
            count = int(number(toks[j + 2][1])) if toks[j + 2][1] != "]" else None
        kind = "pointer" if ptr else "scalar"
        if t is ScalarType.b8 and count == 128 and (align or 0) >= 64:
            kind = "tensormap"
        p = Param(name, StateSpace.param, t, count, align, kind=kind, ptr_space=ptr_space,
                  ptr_align=ptr_align)
        scope.syms[name] = p
        if is_reg:
            # A `.func`'s `.reg` parameter is a register of its body (read by the instruction
            # readers as one); `frontend.calls` moves the call's argument into it.
            scope.regs[name] = _make_reg(t, name)
        return p

    def _performance_directive(self, fn: ParsedFunction) -> None:
        w = self.take()[1]
        values: list[int] = []
        while self.peek() and self.toks[self.i][0] == "num":
            values.append(int(number(self.take()[1])))
            if self.peek() == ",":
                self.i += 1
        key = w.lstrip(".")
        if key in ("maxntid", "reqntid", "reqnctapercluster", "maxclusterrank", "minnctapersm",
                   "maxnreg", "maxnctapersm"):
            fn.directives[key] = tuple(values)
        elif key in ("explicitcluster", "noreturn", "blocksareclusters"):
            fn.directives[key] = ()
        elif key == "pragma":
            self.i = self.until(";") + 1
        else:
            raise self.fail(self.i - 1, f"unknown function directive {w!r}")

    # -- bodies -----------------------------------------------------------------------------
    def _body(self, fn: ParsedFunction, top: _Scope, a: int, b: int) -> None:
        pieces = self._split(a, b)
        scopes = {1: top}
        # Labels of nested scopes: a name defined in more than one scope gets a unique
        # analysis name (its text is kept).
        seen: dict[str, int] = {}
        for p in pieces:
            if p[0] == "label":
                seen[p[1]] = seen.get(p[1], 0) + 1
        parents: dict[int, int] = {}
        for p in pieces:
            if p[0] == "open":
                parents[p[3]] = p[4]
        for sid in parents:
            scopes[sid] = _Scope(None, sid)
        for sid, parent in parents.items():
            scopes[sid].parent = scopes[parent]
        for p in pieces:
            if p[0] == "label":
                name, sid = p[1], p[3]
                scopes[sid].labels[name] = (Label(name) if seen[name] == 1 or sid == 1
                                            else ScopedLabel(f"{name}$s{sid}", shown=name))
        body = fn.body
        self.spelled = []
        cur_loc: SourceLoc | None = None
        fname = self.src.file
        for p in pieces:
            kind = p[0]
            at = p[1] if kind in ("stmt", "loc") else p[2]
            loc = SourceLoc(fname, self.line(at), fn.name, cur_loc)
            if kind == "open":
                body.append(Statement(Directive("{", "{"), None, loc))
            elif kind == "close":
                body.append(Statement(Directive("}", "}"), None, loc))
            elif kind == "label":
                body.append(LabelDef(scopes[p[3]].labels[p[1]], loc))
            elif kind == "loc":
                cur_loc = self._loc(p[1], p[2], fn.name)
                loc = SourceLoc(fname, self.line(at), fn.name, cur_loc)
                body.append(Statement(Directive(".loc", self.slice(p[1], p[2])), None, loc))
            else:
                s, e, sid = p[1], p[2], p[3]
                scope = scopes[sid]
                head = self.toks[s][1]
                if head.startswith("."):
                    self._body_directive(fn, scope, s, e, loc)
                else:
                    body.append(self._instruction(scope, s, e, loc))

    def _split(self, a: int, b: int) -> list[tuple]:
        """Statements (`("stmt", start, end, scope)`, end at the ';'), labels, braces."""
        toks = self.toks
        out: list[tuple] = []
        stack, next_id = [1], 2
        j = a
        while j < b:
            t = toks[j][1]
            if t == "{":
                out.append(("open", None, j, next_id, stack[-1]))
                stack.append(next_id)
                next_id += 1
                j += 1
            elif t == "}":
                if len(stack) == 1:
                    raise self.fail(j, "'}' closes no scope")
                stack.pop()
                out.append(("close", None, j, stack[-1]))
                j += 1
            elif t == ".loc":   # ends at its line's end: PTX gives it no ';'
                line, k = self.line(j), j + 1
                while k < b and self.line(k) == line:   # with `, inlined_at 1 2 3`
                    k += 1
                out.append(("loc", j, k, stack[-1]))
                j = k
            elif toks[j][0] == "id" and j + 1 < b and toks[j + 1][1] == ":" \
                    and not t.startswith("."):
                out.append(("label", t, j, stack[-1]))
                j += 2
            else:
                depth, k = 0, j
                while k < b:
                    x = toks[k][1]
                    if x in "([{":
                        depth += 1
                    elif x in ")]}":
                        depth -= 1
                        if depth < 0:
                            raise self.fail(k, f"unbalanced {x!r}")
                    elif x == ";" and depth == 0:
                        break
                    k += 1
                if k >= b:
                    raise self.fail(j, "statement without ';'")
                out.append(("stmt", j, k, stack[-1]))
                j = k + 1
        if len(stack) != 1:
            raise self.fail(b, "'{' without its '}'")
        return out

    def _loc(self, s: int, e: int, fname: str) -> SourceLoc | None:
        """The source line a `.loc` names: for code inlined from a header (`.loc 7 18 3,
        function_name ..., inlined_at 6 15 3`), the line of the outermost caller, the user's
        own code, by the chain of `inlined_at` the function's earlier `.loc` lines gave."""
        toks = self.toks
        words = [toks[k][1] for k in range(s + 1, e)]
        here = _triple(words[:3])
        if here is None:
            return None
        if "inlined_at" in words:
            at = _triple(words[words.index("inlined_at") + 1:][:3])
            if at is not None:
                self.inlined[here] = at
                seen = {here}
                while at in self.inlined and at not in seen and len(seen) < 64:
                    seen.add(at)
                    at = self.inlined[at]
                here = at
        f = self.files.get(here[0])
        if f is None or here[1] == 0:
            return None
        return SourceLoc(f, here[1], ".loc")

    def _body_directive(self, fn: ParsedFunction, scope: _Scope, s: int, e: int,
                        loc: SourceLoc) -> None:
        head = self.toks[s][1]
        text = self.slice(s, e + 1)
        if head == ".reg":
            self._registers(s, e, scope)
        elif head in _SPACES:
            sym = self._variable(s, e, scope)
            if sym is not None and sym.space.is_shared:
                fn.shared.append(sym)
        fn.body.append(Statement(Directive(head, text), None, loc))

    def _instruction(self, scope: _Scope, s: int, e: int, loc: SourceLoc) -> Statement:
        toks = self.toks
        guard: Reg | NegPred | None = None
        j = s
        if toks[j][1] == "@":
            neg = toks[j + 1][1] == "!"
            j += 2 if neg else 1
            reg = self._reg(scope, toks[j][1], j)
            if reg is None or reg.type is not ScalarType.pred:
                raise self.fail(j, f"a guard must be a .pred register, got {toks[j][1]!r}")
            guard = NegPred(reg) if neg else reg
            j += 1
        if toks[j][0] != "id":
            raise self.fail(j, f"expected an instruction, got {toks[j][1]!r}")
        opcode = toks[j][1]
        while j + 1 < e and toks[j + 1][0] == "id" and toks[j + 1][1].startswith("."):
            # A qualifier on the next line (`...::bytes` / `.multicast::cluster`): ptxas
            # reads the opcode on; no operand starts with a dot.
            opcode += toks[j + 1][1]
            j += 1
            toks[j] = (toks[j][0], opcode, toks[j - 1][2])
        written = opcode
        respell = RESPELL.get(opcode.split(".", 1)[0])
        if respell is not None:
            # The same opcode in the qualifier order ptxdsl renders: read and compared as
            # that (the text keeps the written one).
            opcode = respell(opcode)
            toks[j] = (toks[j][0], opcode, toks[j][2])
        ops = [self._operand(scope, a, b) for a, b in self._commas(j + 1, e)]
        parts = tuple(opcode.split("."))
        insn = self._typed(parts, ops, j, e)
        if insn is None or isinstance(insn, str):
            insn = _raw(self.slice(j, e), written, parts, ops, insn or "")
        return Statement(insn, guard, loc)

    def _typed(self, parts: tuple[str, ...], ops: list, a: int, b: int) -> Any:
        readers = READERS.get(parts[0])
        if not readers:
            return None
        why = ""
        # ptxas reads a negative literal for an unsigned or bit type as its two's complement
        # (`mov.u32 %r1, -1;`, which nvcc and Triton write); ptxdsl's classes take the
        # unsigned value. Such operands are tried wrapped at 64 bits, then at 32: a 64-bit
        # type takes the first, a 32-bit one only the second.
        tries: list[tuple[list, int]] = [(ops, 0)]
        if any(type(o) is int and o < 0 for o in ops):
            tries += [([o + (1 << w) if type(o) is int and o < 0 else o for o in ops], w)
                      for w in (64, 32)]
        for read in readers:
            for args, wrap in tries:
                try:
                    insn = read(parts, args)
                except Exception as e:  # noqa: BLE001 - a builder's refusal: keep the text
                    if not wrap:   # the refusal without the parser's own Python line
                        why = f"{type(e).__name__}: {getattr(e, 'message', e)}"
                    continue
                if insn is None:
                    break
                mine = insn.render()
                # Most statements come back exactly as written, whitespace aside; the rest
                # are compared token by token, numbers by value (`0x10` and `16`).
                if not wrap:
                    src = self.slice(a, b) + ";"
                    if mine == src or _squeeze(mine) == _squeeze(src):
                        return insn
                if _same(canon(tokenize(Source(mine))), canon(self.toks[a:b]) + [";"], wrap):
                    # The same instruction, a number spelled otherwise (`0xFFFFFFFF`, `-1`):
                    # the function emits the source's spelling.
                    self.spelled.append((insn, self.slice(a, b) + ";"))
                    return insn
                why = f"a typed reading rendered {mine!r}"
                break
        return why

    def _commas(self, a: int, b: int) -> list[tuple[int, int]]:
        out, depth, start = [], 0, a
        toks = self.toks
        for k in range(a, b):
            x = toks[k][1]
            if x in "([{":
                depth += 1
            elif x in ")]}":
                depth -= 1
            elif x == "," and depth == 0:
                out.append((start, k))
                start = k + 1
        if start < b:
            out.append((start, b))
        return out

    # -- operands --------------------------------------------------------------------------
    def _reg(self, scope: _Scope, name: str, at: int) -> Reg | None:
        sc: _Scope | None = scope
        while sc is not None:
            r = sc.regs.get(name)
            if r is not None:
                return r
            if sc.ranges:
                m = _RANGE.match(name)
                if m is not None:
                    rng = sc.ranges.get(m.group(1))
                    if rng is not None and int(m.group(2)) < rng[0] and \
                            (m.group(2) == "0" or m.group(2)[0] != "0"):
                        r = sc.regs[name] = _make_reg(rng[1], name)
                        return r
            sc = sc.parent
        return None

    def _name(self, scope: _Scope, name: str, at: int) -> Any:
        r = self._reg(scope, name, at)
        if r is not None:
            return r
        if name.startswith("%"):
            t = _SPECIAL.get(name)
            if t is not None:
                return SpecialReg(name[1:], t)
            if name[1:].split(".")[0] in SPECIAL_REGISTER_NAMES:
                return RawOperand(name)
            raise self.fail(at, f"register {name} is not declared")
        sc: _Scope | None = scope
        while sc is not None:
            sym = sc.syms.get(name)
            if sym is not None:
                return sym
            lab = sc.labels.get(name)
            if lab is not None:
                return lab
            sc = sc.parent
        if name in self.functions:
            return self.functions[name]
        if name == "_":
            return SINK
        return RawOperand(name)   # a function or label declared later in the file

    def _operand(self, scope: _Scope, a: int, b: int) -> Any:
        toks = self.toks
        first = toks[a]
        n = b - a
        if n == 1:
            if first[0] == "id":
                return self._name(scope, first[1], a)
            if first[0] == "num":
                return number(first[1])
        if first[1] == "-" and n == 2 and toks[a + 1][0] == "num":
            return -number(toks[a + 1][1])
        if first[1] == "!" and n == 2:
            r = self._name(scope, toks[a + 1][1], a + 1)
            if isinstance(r, Reg):
                return NegPred(r)
        if first[1] == "{" and toks[b - 1][1] == "}":
            items = [self._operand(scope, x, y) for x, y in self._commas(a + 1, b - 1)]
            if items and all(isinstance(x, Reg | SpecialReg) for x in items):
                return Vec(items)
            return Braces(items)
        if first[1] == "[" and toks[b - 1][1] == "]":
            parts = self._commas(a + 1, b - 1)
            if len(parts) > 1:
                return Bracket([self._operand(scope, x, y) for x, y in parts])
            addr = self._address(scope, a + 1, b - 1)
            if addr is not None:
                return addr
        if n == 3 and toks[a + 1][1] == "|":
            return PredPair(self._name(scope, first[1], a), self._name(scope, toks[a + 2][1],
                                                                     a + 2))
        regs = [r for k in range(a, b) if toks[k][0] == "id"
                for r in [self._reg(scope, toks[k][1], k)] if r is not None]
        for k in range(a, b):
            w = toks[k][1]
            if toks[k][0] == "id" and w.startswith("%") and self._reg(scope, w, k) is None \
                    and w[1:].split(".")[0] not in SPECIAL_REGISTER_NAMES:
                raise self.fail(k, f"register {w} is not declared")
        return RawOperand(self.slice(a, b), regs)

    def _address(self, scope: _Scope, a: int, b: int) -> Addr | None:
        toks = self.toks
        if a >= b:
            return None
        if b - a == 1 and toks[a][0] == "num":
            return Addr(int(number(toks[a][1])))
        base = self._name(scope, toks[a][1], a) if toks[a][0] == "id" else None
        if not isinstance(base, Reg | Symbol) or isinstance(base, RawOperand):
            return None
        if b - a == 1:
            return Addr(base)
        if toks[a + 1][1] != "+":
            return None
        rest = toks[a + 2:b]
        if len(rest) == 1 and rest[0][0] == "num":
            off = number(rest[0][1])
        elif len(rest) == 2 and rest[0][1] == "-" and rest[1][0] == "num":
            off = -number(rest[1][1])
        else:
            return None
        return Addr(base, off) if isinstance(off, int) else None


_SPACE = re.compile(r"\s+")


def _same(mine: list, theirs: list, wrap: int) -> bool:
    """Token lists equal, integers congruent modulo 2**wrap when a negative literal was
    wrapped (exactly equal otherwise, except a 32-bit number the class renders negative,
    as lane masks render `0xFFFFFFFF`: `-1`, where the source spells its unsigned value)."""
    if mine == theirs:
        return True
    if len(mine) != len(theirs):
        return False
    m = (1 << wrap) - 1
    for x, y in zip(mine, theirs, strict=True):
        if x == y:
            continue
        if type(x) is tuple and type(y) is tuple and type(x[1]) is int and \
                type(y[1]) is str and _is_bits_of(x[1], y[1]):
            continue   # a float literal moved as bits (`mov.b32 %r1, 0f3F800000`)
        if not (type(x) is tuple and type(y) is tuple and type(x[1]) is int
                and type(y[1]) is int):
            return False
        if wrap:
            if x[1] & m != y[1] & m:
                return False
        elif not (-(1 << 31) <= x[1] < 0 and y[1] == x[1] + (1 << 32)):
            return False
    return True


def _is_bits_of(bits: int, literal: str) -> bool:
    """Is `bits` the IEEE single or double encoding of the float `canon` spelled `literal`?"""
    try:
        value = float(literal)
    except ValueError:
        return False
    return bits in (float_bits(value, ">f"), float_bits(value, ">d"))


def _squeeze(text: str) -> str:
    return _SPACE.sub("", text)


def _triple(words: list[str]) -> tuple[int, int, int] | None:
    """(file, line, column) of a `.loc`'s numbers."""
    try:
        f, line, col = (int(number(w)) for w in words)
    except (ValueError, TypeError):
        return None
    return f, line, col


def _make_reg(t: ScalarType, name: str) -> Reg:
    """A declared register (the lexer matched the PTX identifier rule): one is made per
    declared name, on the parser's hot path."""
    if name.startswith("%"):
        return Reg._trusted(t, name[1:], None)
    return PlainReg._trusted(t, name, None)


def _raw(text: str, opcode: str, parts: tuple[str, ...], ops: list, why: str) -> Raw:
    if parts[0] == "call":
        dests = ops[0] if ops and isinstance(ops[0], RawOperand) and \
            ops[0].text.startswith("(") and len(ops) > 2 else None
        return Raw(text, opcode, (dests,) if dests is not None else (),
                   ops[1:] if dests is not None else ops, why)
    head2 = ".".join(parts[:2])
    if not ops or parts[0] in _NO_DEST or head2 in _NO_DEST or opcode.startswith(
            "cp.async.bulk.tensor") or ".".join(parts[:3]) in _NO_DEST:
        return Raw(text, opcode, (), ops, why)
    return Raw(text, opcode, ops[:1], ops[1:], why)
