"""Exact bounds of values computed from one thread index, by running the computation for
every thread.

Compilers lay out shared-memory tiles with swizzles and signed divisions of `%tid.x`
(CUTLASS's `thread_idx % 128`, `(row & 192) ^ (row & 192) >> 3`, a row offset of
`selp 16, -16` chosen by one bit of the row): interval bounds of each step add up the worst
cases of operands that are correlated, and a write that stays inside its 4 KiB stage looks as
if it might reach the next one. When a value depends on a single thread index (`%tid.x/y/z`
or `%laneid`), constants and at most one shared symbol's address (added, never scaled), and
the CTA shape bounds that index, evaluating it for every index gives its exact range.
Anything else (a load, `%ctaid`, a register written twice, a guarded write) is not
evaluated: `ranges.Spans` bounds it by intervals as before.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..instructions.arith import Binary, Mad
from ..instructions.compare import Selp, Setp
from ..instructions.move import Cvt, Mov
from ..operands import Imm, Reg, SpecialReg, Symbol

# A value for every thread index: (root symbol or None, the special register it depends on
# or None, one integer per index). Unrooted values are the unsigned bit patterns of their
# width; rooted ones are byte offsets from the symbol.
Vec = tuple[Any, str | None, tuple]
_MAX_THREADS = 1024


def _u(x: int, w: int) -> int:
    return x & ((1 << w) - 1)


def _s(x: int, w: int) -> int:
    x = _u(x, w)
    return x - (1 << w) if x >> (w - 1) else x


def _tdiv(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return q if (a < 0) == (b < 0) else -q


_CMP = {"eq": lambda a, b: a == b, "ne": lambda a, b: a != b, "lt": lambda a, b: a < b,
        "le": lambda a, b: a <= b, "gt": lambda a, b: a > b, "ge": lambda a, b: a >= b,
        "lo": lambda a, b: a < b, "ls": lambda a, b: a <= b, "hi": lambda a, b: a > b,
        "hs": lambda a, b: a >= b}


class Threadwise:
    """Per-thread values of the registers of one kernel, on demand and memoised."""

    def __init__(self, values: Any, special: Callable[[str], Any]):
        self.values = values
        self.special = special   # the bounds of a special register, as a `ranges.Span`
        self._memo: dict[Reg, Vec | None] = {}

    def bounds(self, reg: Reg) -> tuple[Any, int, int] | None:
        """(root, lowest, highest) of a register over every thread index (signed values of
        its width), or None when it is not a function of one thread index."""
        v = self._reg(reg, 0)
        if v is None or v[1] is None:    # a constant: Values already knows it
            return None
        root, _, xs = v
        if root is None:
            bits = getattr(getattr(reg, "type", None), "bits", None)
            if bits not in (8, 16, 32, 64):
                return None
            xs = tuple(_s(x, bits) for x in xs)
        return root, min(xs), max(xs)

    def _indices(self, name: str) -> tuple | None:
        """Every value of a thread-index special register (None: not one, or unbounded)."""
        if not name.startswith(("tid.", "laneid")):
            return None
        span = self.special(name)
        if span.lo is None or span.hi is None or span.hi - span.lo >= _MAX_THREADS:
            return None
        return tuple(range(span.lo, span.hi + 1))

    def _operand(self, x: Any, d: int) -> Vec | None:
        if isinstance(x, Imm):
            x = x.value
        if isinstance(x, bool):
            return None
        if isinstance(x, int):
            return None, None, (x,)
        if isinstance(x, Symbol):
            return x, None, (0,)
        if isinstance(x, Reg):
            return self._reg(x, d + 1)
        return None

    def _reg(self, reg: Reg, d: int) -> Vec | None:
        if reg in self._memo:
            return self._memo[reg]
        self._memo[reg] = None   # (a cycle through a loop: not evaluated)
        out = self._memo[reg] = self._eval(reg, d) if d < 200 else None
        return out

    def _eval(self, reg: Reg, d: int) -> Vec | None:
        c = self.values.const(reg)
        if c is not None:
            return None, None, (c,)
        defs = self.values.defs.get(reg, ())
        if len(defs) != 1:
            return None
        st = self.values.body[defs[0]]
        if st.guard is not None:
            return None
        insn = st.insn
        if isinstance(insn, Mov):
            if isinstance(insn.a, SpecialReg):
                xs = self._indices(insn.a.name)
                return None if xs is None else (None, insn.a.name, xs)
            return self._operand(insn.a, d)
        if isinstance(insn, Cvt):
            return self._cvt(insn, d)
        if isinstance(insn, Binary | Mad | Selp | Setp):
            return self._apply(insn, d)
        return None

    def _cvt(self, insn: Cvt, d: int) -> Vec | None:
        a = self._operand(insn.a, d)
        if a is None or a[0] is not None or insn.atype.is_float or insn.dtype.is_float:
            return None
        aw, dw = insn.atype.bits, insn.dtype.bits
        conv = _s if insn.atype.kind == "s" else _u
        return None, a[1], tuple(_u(conv(x, aw), dw) for x in a[2])

    def _apply(self, insn: Any, d: int) -> Vec | None:
        names = ("a", "b", "c") if isinstance(insn, Mad | Selp) else ("a", "b")
        args = [self._operand(getattr(insn, n), d) for n in names]
        if any(a is None for a in args):
            return None
        specials = {a[1] for a in args if a is not None and a[1] is not None}
        roots = [a[0] for a in args if a is not None and a[0] is not None]
        if len(specials) > 1 or len(roots) > 1:
            return None
        n = max(len(a[2]) for a in args if a is not None)
        cols = [a[2] * n if len(a[2]) == 1 else a[2] for a in args if a is not None]
        t = insn.type
        if t.is_float:
            return None
        w, signed = t.bits, t.kind == "s"
        if roots:
            fn = self._offset(insn, w, args[0] is not None and args[0][0] is not None)
        else:
            fn = self._fn(insn, w, signed)
        if fn is None:
            return None
        try:
            out = tuple(fn(*xs) for xs in zip(*cols, strict=True))
        except ZeroDivisionError:
            return None
        return (roots[0] if roots else None), (specials.pop() if specials else None), out

    @staticmethod
    def _offset(insn: Any, w: int, first: bool) -> Any:
        """A symbol's address may only be offset: `add` (either way) or `sub` from it."""
        if not isinstance(insn, Binary) or insn.op not in ("add", "sub") \
                or (insn.op == "sub" and not first):
            return None
        if insn.op == "sub":
            return lambda a, b: a - _s(b, w)
        return (lambda a, b: a + _s(b, w)) if first else (lambda a, b: _s(a, w) + b)

    @staticmethod
    def _fn(insn: Any, w: int, signed: bool) -> Any:
        """The per-thread function of an instruction on bit patterns (None: not evaluated)."""
        conv = _s if signed else _u
        if isinstance(insn, Setp):
            cmp = _CMP.get(insn.cmp)
            if cmp is None or insn.bool_op is not None or insn.q is not None:
                return None
            return lambda a, b: cmp(conv(a, w), conv(b, w))
        if isinstance(insn, Selp):
            return lambda a, b, p: _u(a if p else b, w)
        if isinstance(insn, Mad):
            return None if insn.mode not in (None, "lo") else (
                lambda a, b, c: _u(a * b + c, w))
        if insn.op == "add":
            return lambda a, b: _u(a + b, w)
        if insn.op == "sub":
            return lambda a, b: _u(a - b, w)
        make = _INT_OPS.get(insn.op)
        return None if make is None else make(w, conv, getattr(insn, "mode", None))


def _shr(w: int, conv: Any, mode: Any) -> Any:
    return lambda a, b: _u(conv(a, w) >> min(_u(b, w), w), w)


_INT_OPS = {
    "mul": lambda w, conv, mode: (lambda a, b: _u(a * b, w)) if mode in (None, "lo") else None,
    "shl": lambda w, conv, mode: lambda a, b: _u(a << min(_u(b, w), w), w),
    "shr": _shr,
    "and": lambda w, conv, mode: lambda a, b: _u(a & b, w),
    "or": lambda w, conv, mode: lambda a, b: _u(a | b, w),
    "xor": lambda w, conv, mode: lambda a, b: _u(a ^ b, w),
    "min": lambda w, conv, mode: lambda a, b: _u(min(conv(a, w), conv(b, w)), w),
    "max": lambda w, conv, mode: lambda a, b: _u(max(conv(a, w), conv(b, w)), w),
    "div": lambda w, conv, mode: lambda a, b: _u(_tdiv(conv(a, w), conv(b, w)), w),
    "rem": lambda w, conv, mode: lambda a, b: _u(
        conv(a, w) - conv(b, w) * _tdiv(conv(a, w), conv(b, w)), w),
}
