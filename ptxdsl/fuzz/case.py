"""What one fuzz example is: a call of a public builder, and the PTX text it stands for.

Operands are *tokens* (`R`, `S`, `A`, `N`, `M`, `F`) naming objects of a small environment: named
registers of each type, a few shared arrays, a tensor-map and a pointer parameter. The same
token becomes a real `Reg`/`Symbol`/`Addr` when the builder is called (`materialise`), and its
PTX spelling in the raw text (`txt`), so a refusal can be checked against ptxas with the text
the instruction would have rendered.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import attrs

from ..operands import Addr, NegPred, Reg
from ..types import ScalarType, StateSpace

# The shared and parameter symbols of the environment: name -> (PTX declaration, builder call).
SYMBOLS: dict[str, tuple[str, Callable]] = {
    "bar": (".shared .align 8 .b64 bar[1];",
            lambda k: k.shared_array(ScalarType.b64, 1, align=8, name="bar")),
    "smem": (".shared .align 128 .b8 smem[1024];",
             lambda k: k.shared_array(ScalarType.b8, 1024, align=128, name="smem")),
    "smem4": (".shared .align 4 .b8 smem4[64];",
              lambda k: k.shared_array(ScalarType.b8, 64, align=4, name="smem4")),
    "smap": (".shared .align 128 .b8 smap[128];",
             lambda k: k.shared_array(ScalarType.b8, 128, align=128, name="smap")),
    "tmap": (".param .align 64 .b8 tmap[128]", lambda k: k.param_tensormap("tmap")),
    "ptr": (".param .u64 ptr", lambda k: k.param_ptr("ptr")),
}
PARAMS = ("tmap", "ptr")


@attrs.frozen
class R:
    """A named register of `type` (a ScalarType value such as 'u32'); `hint` is the state space
    its `.space` hint says it points into (as `mov` of a symbol or `cvta` would set it); `idx`
    tells several registers of one type apart (vector operands)."""

    type: str
    hint: str | None = None
    idx: int = 0

    @property
    def name(self) -> str:
        """The register's name in the built kernel: its type, space hint and index
        (`x_u32_shared_cta_1`)."""
        hint = "_" + self.hint.replace("::", "_") if self.hint else ""
        return f"x_{self.type}{hint}" + (f"_{self.idx}" if self.idx else "")

    @property
    def txt(self) -> str:
        """The register as PTX writes it (`%` and its name)."""
        return "%" + self.name

    @property
    def bits(self) -> int:
        """The width of the register's type in bits."""
        return ScalarType(self.type).bits


@attrs.frozen
class S:
    """A symbol of the environment (a key of `SYMBOLS`)."""

    name: str

    @property
    def txt(self) -> str:
        """The symbol's name, as PTX writes it."""
        return self.name


@attrs.frozen
class A:
    """`[base+offset]` of a register or symbol token."""

    base: R | S
    offset: int = 0

    @property
    def txt(self) -> str:
        """The address as PTX writes it: `[base]` or `[base+offset]`."""
        return f"[{self.base.txt}+{self.offset}]" if self.offset else f"[{self.base.txt}]"


@attrs.frozen
class N:
    """A negated predicate register `!p`."""

    reg: R

    @property
    def txt(self) -> str:
        """The negated predicate as PTX writes it (`!%p`)."""
        return "!" + self.reg.txt


@attrs.frozen
class M:
    """A `MatrixDescriptor` of a tile (`SmemLayout(dtype, mn, k, major, swizzle)`) held in
    register `reg`: its PTX is the register's; the builder also knows the tile's layout."""

    reg: R
    dtype: str
    mn: int = 64
    k: int = 64
    major: str = "K"
    swizzle: int = 128

    @property
    def txt(self) -> str:
        """The descriptor's PTX: its register."""
        return self.reg.txt


@attrs.frozen
class F:
    """A register fragment over the registers `regs`: a wgmma accumulator `Fragment` of
    `dtype` and width `n`, or (n=0) the A fragment of an RS wgmma (`AFragment`) of `dtype`
    values. Its PTX is its registers'; the builder also knows what they hold."""

    regs: tuple[R, ...]
    dtype: str
    n: int = 0

    @property
    def txt(self) -> str:
        """The register list as PTX writes it (`{%r0, %r1, ...}`)."""
        return "{" + ", ".join(r.txt for r in self.regs) + "}"


TOKENS = (R, S, A, N, M, F)


def txt(value: Any) -> str:
    """The PTX spelling of a token or a plain integer operand."""
    if isinstance(value, TOKENS):
        return value.txt
    if isinstance(value, bool):
        return str(int(value))
    return str(value)


def addr(value: Any) -> str:
    """A token as a memory operand: `[x]` (an `A` already has its brackets)."""
    return value.txt if isinstance(value, A) else f"[{txt(value)}]"


def tokens_in(value: Any):
    """Every token in a value (recursing into tuples, lists and dicts)."""
    if isinstance(value, A):
        yield value
        yield from tokens_in(value.base)
    elif isinstance(value, M):
        yield value
        yield value.reg
    elif isinstance(value, F):
        yield value
        yield from value.regs
    elif isinstance(value, N):
        yield value
        yield value.reg
    elif isinstance(value, TOKENS):
        yield value
    elif isinstance(value, tuple | list):
        for v in value:
            yield from tokens_in(v)
    elif isinstance(value, dict):
        for v in value.values():
            yield from tokens_in(v)


@attrs.frozen
class Case:
    """One fuzz example.

    `call` names the public builder: 'ptx.<name>' (a `ptxdsl.ptx` function taking the kernel
    first) or 'k.<method>' (a kernel method). `text` is the PTX the call stands for, written
    with the environment's names; several alternatives when the builder's choice is not
    determined (a refusal must then be a ptxas rejection of each); None when the input has no
    PTX spelling at all (a Python-level mistake: the builder must refuse it). `facts` are the
    drawn choices, read by the policy table and shown in reports.
    """

    family: str
    call: str
    args: tuple = ()
    kwargs: tuple[tuple[str, Any], ...] = ()
    text: tuple[str, ...] | None = None
    facts: tuple[tuple[str, Any], ...] = ()

    def fact(self, key: str, default: Any = None) -> Any:
        """The fact `key` the strategy recorded about the case (what the oracle needs to judge it),
        or `default`."""
        return dict(self.facts).get(key, default)

    def tokens(self) -> list:
        """Every register and symbol the case uses, from its arguments and its expected PTX text, in
        first-use order (the kernel declares them in that order)."""
        seen: dict[Any, None] = {}
        for tok in tokens_in((self.args, dict(self.kwargs))):
            seen.setdefault(tok, None)
        for text in self.text or ():
            for m in _REG.finditer(text):
                hint = _HINTS.get(m.group(2) or "")
                seen.setdefault(R(m.group(1), hint, int(m.group(3) or 0)), None)
            for name in SYMBOLS:
                if _mentions(text, name):
                    seen.setdefault(S(name), None)
        return list(seen)

    def describe(self) -> str:
        """The call the case makes, as Python: `ptx.mbarrier_init(k, ...)`."""
        args = ", ".join(["k", *map(_show, self.args),
                          *(f"{k}={_show(v)}" for k, v in self.kwargs)])
        return f"{self.call}({args})"


_HINTS = {"": None} | {s.value.replace("::", "_"): s.value for s in StateSpace if s.value}
_REG = re.compile(r"%x_([a-z]+\d*(?:x2)?)(?:_(" + "|".join(sorted(_HINTS, key=len,
                  reverse=True)[:-1]) + r"))?(?:_(\d+))?\b")


def _mentions(text: str, name: str) -> bool:
    return re.search(rf"(?<![\w%$]){re.escape(name)}(?![\w$])", text) is not None


def _show(v: Any) -> str:
    if isinstance(v, R):
        return f"%{v.name}"
    if isinstance(v, F):
        kind = f"Fragment(.{v.dtype}, n={v.n})" if v.n else f"AFragment(.{v.dtype})"
        return f"{kind}{_show(v.regs)}"
    if isinstance(v, M):
        return (f"MatrixDescriptor(SmemLayout({v.dtype!r}, {v.mn}, {v.k}, major={v.major!r}, "
                f"swizzle={v.swizzle}), %{v.reg.name})")
    if isinstance(v, TOKENS):
        return v.txt
    if isinstance(v, tuple):
        return "(" + ", ".join(map(_show, v)) + ("," if len(v) == 1 else "") + ")"
    return repr(v)


def case(family: str, call: str, args=(), kwargs=None, text=None, **facts) -> Case:
    """Build a `Case`; `text` may be one string or a sequence of alternatives."""
    if isinstance(text, str):
        text = (text,)
    kw = tuple((k, v) for k, v in (kwargs or {}).items())
    return Case(family, call, tuple(args), kw, None if text is None else tuple(text),
                tuple(sorted(facts.items())))


class Env:
    """The environment of one kernel: tokens become registers and symbols on first use."""

    def __init__(self, k):
        self.k = k
        self._objs: dict[Any, Any] = {}

    def get(self, tok: Any) -> Any:
        """The kernel object for a token (registers and symbols made on first use, tuples and lists
        element by element); anything else as it is."""
        if isinstance(tok, tuple):
            return tuple(self.get(t) for t in tok)
        if isinstance(tok, list):
            return [self.get(t) for t in tok]
        if not isinstance(tok, TOKENS):
            return tok
        if tok not in self._objs:
            self._objs[tok] = self._make(tok)
        return self._objs[tok]

    def _make(self, tok: Any) -> Any:
        if isinstance(tok, R):
            r: Reg = self.k.reg(ScalarType(tok.type), tok.name)
            if tok.hint is not None:
                r.space = next(s for s in StateSpace if s.value == tok.hint)
            return r
        if isinstance(tok, S):
            return SYMBOLS[tok.name][1](self.k)
        if isinstance(tok, A):
            return Addr(self.get(tok.base), tok.offset)
        if isinstance(tok, F):
            from ..fragments import AFragment, Fragment
            regs = [self.get(r) for r in tok.regs]
            if tok.n:
                return Fragment(self.k, ScalarType(tok.dtype), tok.n, regs)
            return AFragment(self.k, tok.dtype, regs)
        if isinstance(tok, M):
            from ..instructions.wgmma_desc import MatrixDescriptor, SmemLayout
            return MatrixDescriptor(SmemLayout(tok.dtype, tok.mn, tok.k, major=tok.major,
                                               swizzle=tok.swizzle), self.get(tok.reg))
        return NegPred(self.get(tok.reg))


def declarations(tokens) -> tuple[list[str], list[str]]:
    """(parameter declarations, body declarations) of the registers and symbols used."""
    params: list[str] = []
    body: list[str] = []
    for tok in tokens:
        if isinstance(tok, R):
            decl = {"bf16": "b16", "bf16x2": "b32"}.get(tok.type, tok.type)  # no .bf16 regs
            body.append(f"\t.reg .{decl} {tok.txt};")
        elif isinstance(tok, S):
            decl = SYMBOLS[tok.name][0]
            (params if tok.name in PARAMS else body).append(decl if tok.name in PARAMS
                                                            else "\t" + decl)
    return params, body
