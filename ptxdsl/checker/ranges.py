"""Bounds on the offsets of shared-memory addresses, so writes through `buf + f(tid)` and
ring-indexed buffers are compared as byte ranges instead of "somewhere in buf".

A `Span` says an address (or integer) is `root + [lo, hi] + scale * (reg mod n)`: `root` the
symbol (None for a plain integer), `lo`/`hi` bounds on the rest (None: unbounded), and `ring`
the optional `(reg, n, scale)` term of a ring index (`i & (n-1)`, `i % n` on a loop counter).
Thread identities are bounded by the CTA shape (`.reqntid`/`.maxntid`), `x & m` by `m`. The
ring term is kept apart because two ring addresses built from one counter are disjoint when
the counter moved by a known amount that is not a multiple of n (the bulk hazards track how
far it moved since a store was issued); everywhere else it is folded into the bounds.
"""

from __future__ import annotations

from typing import Any

import attrs

from ..instructions.arith import Binary, Mad
from ..instructions.move import Cvt, Cvta, Mov
from ..operands import Addr, Imm, Reg, SpecialReg, Symbol
from .stages import wrap_count
from .values import Values


@attrs.frozen(eq=False)   # holds registers, whose `==` builds a setp
class Span:
    root: Any = None
    lo: int | None = None
    hi: int | None = None
    ring: tuple | None = None          # (counter register, n, scale)

    def folded(self) -> Span:
        """The same value with its ring term folded into the bounds."""
        if self.ring is None:
            return self
        _, n, scale = self.ring
        lo = None if self.lo is None else self.lo + min(0, scale * (n - 1))
        hi = None if self.hi is None else self.hi + max(0, scale * (n - 1))
        return Span(self.root, lo, hi, None)


UNKNOWN = Span()


def _const(c: int) -> Span:
    return Span(None, c, c)


def _add(a: Span, b: Span, sign: int = 1) -> Span:
    if sign < 0:
        if b.root is not None:
            return UNKNOWN
        b = b.folded()
        b = Span(None, None if b.hi is None else -b.hi, None if b.lo is None else -b.lo)
    if a.root is not None and b.root is not None:
        return UNKNOWN
    if a.ring is not None and b.ring is not None:
        # Keep the term that moves the address furthest (a stage of a ring) and fold the
        # other (a lane's row inside the stage, `(tid & 31) * 16`) into the bounds.
        if _ring_reach(a.ring) >= _ring_reach(b.ring):
            b = b.folded()
        else:
            a = a.folded()
    lo = None if a.lo is None or b.lo is None else a.lo + b.lo
    hi = None if a.hi is None or b.hi is None else a.hi + b.hi
    return Span(a.root if a.root is not None else b.root, lo, hi,
                a.ring if a.ring is not None else b.ring)


def _ring_reach(ring: tuple) -> int:
    return abs(ring[2]) * (ring[1] - 1)


def _scale(a: Span, f: int) -> Span:
    if a.root is not None or f < 0:
        return UNKNOWN
    ring = None if a.ring is None else (a.ring[0], a.ring[1], a.ring[2] * f)
    return Span(None, None if a.lo is None else a.lo * f, None if a.hi is None else a.hi * f,
                ring)


def _is_pow2(n: int) -> bool:
    return n > 0 and n & (n - 1) == 0


class Spans:
    """Demand-driven spans of the registers of one kernel (single definitions only: a
    register written several times is unknown unless every write is one constant, or it is
    a stage register a ring advances in place: `stages.wrap_count`)."""

    def __init__(self, values: Values, dims: tuple[int, ...] | None):
        self.values = values
        self.dims = tuple(dims or ())
        self._memo: dict[Reg, Span] = {}

    def of(self, op: Any, depth: int = 0) -> Span:
        if isinstance(op, bool):
            return UNKNOWN
        if isinstance(op, int):
            return _const(op)
        if isinstance(op, Imm):
            return _const(int(op.value)) if isinstance(op.value, int) else UNKNOWN
        if isinstance(op, Symbol):
            return Span(op, 0, 0)
        if isinstance(op, Addr):
            return _add(self.of(op.base, depth + 1), _const(op.offset))
        if not isinstance(op, Reg) or depth > 200:
            return UNKNOWN
        hit = self._memo.get(op)
        if hit is None:
            self._memo[op] = UNKNOWN          # a cycle through a loop: nothing is known
            hit = self._memo[op] = self._reg(op, depth)
        return hit

    def _reg(self, reg: Reg, depth: int) -> Span:
        c = self.values.const(reg)
        if c is not None:
            return _const(c)
        defs = self.values.defs.get(reg, ())
        if len(defs) != 1:
            return self._stage_register(reg)
        st = self.values.body[defs[0]]
        if st.guard is not None:
            return UNKNOWN
        insn = st.insn
        d = depth + 1
        if isinstance(insn, Mov):
            if isinstance(insn.a, SpecialReg):
                return self._special(insn.a.name)
            return self.of(insn.a, d)
        if isinstance(insn, Cvt | Cvta):
            s = self.of(insn.a, d)
            # A conversion keeps non-negative values (the offsets here); others are unknown.
            return s if s.root is not None or (s.lo is not None and s.lo >= 0) else UNKNOWN
        if isinstance(insn, Mad) and insn.mode in (None, "lo", "wide"):
            return _add(self._mul(insn.a, insn.b, d), self.of(insn.c, d))
        if not isinstance(insn, Binary):
            return UNKNOWN
        op = insn.op
        if op == "add":
            return _add(self.of(insn.a, d), self.of(insn.b, d))
        if op == "sub":
            return _add(self.of(insn.a, d), self.of(insn.b, d), -1)
        if op == "mul" and getattr(insn, "mode", None) in (None, "lo", "wide"):
            return self._mul(insn.a, insn.b, d)
        if op == "shl":
            b = self.values.const(insn.b)
            return _scale(self.of(insn.a, d), 1 << b) if b is not None and 0 <= b < 63 \
                else UNKNOWN
        if op in ("and", "rem"):
            return self._mask(insn, d)
        if op in ("shr", "div"):
            b = self.values.const(insn.b)
            a = self.of(insn.a, d).folded()
            if b is None or b < 0 or a.root is not None or a.lo is None or a.lo < 0:
                return UNKNOWN
            f = 1 << b if op == "shr" else b
            if f <= 0:
                return UNKNOWN
            return Span(None, a.lo // f, None if a.hi is None else a.hi // f)
        return UNKNOWN

    def _stage_register(self, reg: Reg) -> Span:
        """A register written several times: a ring index of N stages when it is a stage
        register advanced in place and wrapped at N (`stages.wrap_count`), else unknown."""
        n = wrap_count(self.values, reg)
        return UNKNOWN if n is None else Span(None, 0, 0, (reg, n, 1))

    def _mul(self, x: Any, y: Any, d: int) -> Span:
        cx, cy = self.values.const(x), self.values.const(y)
        if cy is not None:
            return _scale(self.of(x, d), cy)
        if cx is not None:
            return _scale(self.of(y, d), cx)
        a, b = self.of(x, d).folded(), self.of(y, d).folded()
        if a.root is None and b.root is None and a.lo is not None and a.hi is not None \
                and b.lo is not None and b.hi is not None and a.lo >= 0 and b.lo >= 0:
            return Span(None, a.lo * b.lo, a.hi * b.hi)
        return UNKNOWN

    def _mask(self, insn: Binary, d: int) -> Span:
        """`x & m` and `x % n`: a ring index when n is a power of two (or any n for rem),
        bounded by the mask either way."""
        a, b = insn.a, insn.b
        cb, ca = self.values.const(b), self.values.const(a)
        if cb is None and insn.op == "and" and ca is not None:
            a, b, cb = b, a, ca
        if cb is None or cb < 0:
            return UNKNOWN
        x = self.of(a, d).folded()
        if insn.op == "rem":
            if cb == 0 or (getattr(insn.type, "kind", "u") == "s" and (x.lo is None or x.lo < 0)):
                return UNKNOWN
            n = cb
        else:
            n = cb + 1
            if not _is_pow2(n):
                return Span(None, 0, cb if x.hi is None or x.lo is None or x.lo < 0
                            else min(cb, x.hi))
        if isinstance(a, Reg) and (x.lo is None or x.hi is None or x.hi - x.lo >= n or x.lo < 0):
            return Span(None, 0, 0, (a, n, 1))
        if x.lo is not None and x.hi is not None and 0 <= x.lo and x.hi < n:
            return x                           # the mask changes nothing
        return Span(None, 0, n - 1)

    def _special(self, name: str) -> Span:
        dims = self.dims
        axis = {"x": 0, "y": 1, "z": 2}.get(name[-1])
        if name.startswith("tid.") and axis is not None:
            cap = (1024, 1024, 64)[axis]
            return Span(None, 0, (dims[axis] if axis < len(dims) else 1) - 1 if dims else cap - 1)
        if name.startswith("ntid.") and axis is not None and dims:
            n = dims[axis] if axis < len(dims) else 1
            return _const(n)
        if name == "laneid":
            return Span(None, 0, 31)
        if name.startswith(("ctaid.", "nctaid.", "clusterid.", "cluster_ctaid.", "warpid")):
            return Span(None, 0, None)
        return UNKNOWN
