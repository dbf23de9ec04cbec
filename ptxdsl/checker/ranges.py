"""Bounds on the offsets of shared-memory addresses, so writes through `buf + f(tid)` and
ring-indexed buffers are compared as byte ranges instead of "somewhere in buf".

A `Span` says an address (or integer) is `root + [lo, hi] + scale * ((reg + shift) mod n)`:
`root` the symbol (None for a plain integer), `lo`/`hi` bounds on the rest (None: unbounded),
and `ring` the optional `(reg, n, scale, shift)` term of a ring index (`i & (n-1)`, `i % n` on
a loop counter, `(i & 1) ^ 1`, or an index toggled in place by `s ^= 1`). Thread identities
are bounded by the CTA shape (`.reqntid`/`.maxntid`), `x & m` by `m`, `x ^ m` by the aligned
block of x that m's bits can reach (swizzled addresses), bitwise results also by the bits that
may be set in them (`ones`), and `a - (a & m)` (nvcc's signed remainder) by `~m`. A value of one
thread index alone is bounded exactly, by evaluating it for every index (`threadwise`).
The ring term is kept apart because two ring addresses built from one counter are disjoint
when the counter moved by a known amount that is not a multiple of n (the bulk hazards track
how far it moved since a store was issued); everywhere else it is folded into the bounds. Of
two ring terms added together, the one with the wider stride (the stage) is kept and the other
(a lane's chunk) folded.
"""

from __future__ import annotations

import math
from typing import Any

import attrs

from ..instructions.arith import Binary, Mad
from ..instructions.base import dests, sources
from ..instructions.compare import Selp, Setp
from ..instructions.control import Bra
from ..instructions.inline import InlineAsm
from ..instructions.move import Cvt, Cvta, Mov
from ..instructions.warp import Shfl
from ..operands import Addr, Imm, NegPred, Reg, SpecialReg, Symbol
from ..statements import LabelDef, Statement
from .lockstep import lockstep_ring, remainder
from .stages import wrap_count
from .threadwise import Threadwise
from .values import Values


@attrs.frozen(eq=False)   # holds registers, whose `==` builds a setp
class Span:
    """A bounded value: `root` (a symbol, or None for a plain integer) plus a value in [`lo`, `hi`]
    (None: unbounded), plus the optional ring term `(counter, n, scale, shift)` of a stage index."""

    root: Any = None
    lo: int | None = None
    hi: int | None = None
    ring: tuple | None = None          # (counter register, n, scale, shift)

    def folded(self) -> Span:
        """The same value with its ring term folded into the bounds."""
        if self.ring is None:
            return self
        _, n, scale, _ = self.ring
        lo = None if self.lo is None else self.lo + min(0, scale * (n - 1))
        hi = None if self.hi is None else self.hi + max(0, scale * (n - 1))
        return Span(self.root, lo, hi, None)


UNKNOWN = Span()


def _while_below(guard: Any, test: Setp) -> bool | None:
    """Whether a branch under `guard` is taken exactly while the counted loop's `test`
    (`setp.lt p, i, C` or `setp.ge p, i, C`) says i < C (True), exactly while it does not
    (False), or neither (None)."""
    if test.cmp not in ("lt", "ge"):
        return None
    if guard is test.p:
        return test.cmp == "lt"
    if isinstance(guard, NegPred) and guard.reg is test.p:
        return test.cmp == "ge"
    return None


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
        # Keep the stage (the wider stride): `stage * 8192 + (lane & 7) * 16` stays a ring.
        if abs(a.ring[2]) >= abs(b.ring[2]):
            b = b.folded()
        else:
            a = a.folded()
    lo = None if a.lo is None or b.lo is None else a.lo + b.lo
    hi = None if a.hi is None or b.hi is None else a.hi + b.hi
    return Span(a.root if a.root is not None else b.root, lo, hi,
                a.ring if a.ring is not None else b.ring)


def _either(a: Span, b: Span) -> Span:
    """A value that is one of a and b (selp, or a register's several writes)."""
    a, b = a.folded(), b.folded()
    if a.root is not b.root or a.lo is None or b.lo is None or a.hi is None or b.hi is None:
        return UNKNOWN
    return Span(a.root, min(a.lo, b.lo), max(a.hi, b.hi))


def _scale(a: Span, f: int) -> Span:
    if a.root is not None or f < 0:
        return UNKNOWN
    ring = None if a.ring is None else (a.ring[0], a.ring[1], a.ring[2] * f, a.ring[3])
    return Span(None, None if a.lo is None else a.lo * f, None if a.hi is None else a.hi * f,
                ring)


def _is_pow2(n: int) -> bool:
    return n > 0 and n & (n - 1) == 0


def _tz(c: int) -> int:
    """The known zero low bits of a constant (at most 16)."""
    return 16 if not c else min(16, (c & -c).bit_length() - 1)


def _rank(s: Span) -> tuple[int, int]:
    """Which operand of an XOR is the mask: a constant first, then the smaller bounded
    value (the lower rank)."""
    if s.ring is None and s.root is None and s.lo is not None and s.lo == s.hi:
        return (0, 0)
    return (1, s.folded().hi or 0) if _mask_like(s) else (2, 0)


def _mask_like(s: Span) -> bool:
    """A plain non-negative bounded integer (what may be XORed into an address)."""
    f = s.folded()
    return f.root is None and f.lo is not None and f.hi is not None and f.lo >= 0


# With no static .shared variable in front of it, dynamic shared memory starts where the CTA's
# shared window does: 0x400 on sm_80+ (the 1 KB the driver reserves comes first), so its base
# is 1024-aligned whatever the .extern declares. No CUDA document promises it; Triton
# (`.extern .shared .align 16 .b8 global_smem[]`) and CUTLASS (`.align 16 ... smem[]`) place
# 128B-swizzled TMA tiles at multiples of 1024 from that base and rely on it (docs/hazards.md,
# tma-smem-align). Behind static variables it starts right after them: 16 bytes is all that holds.
DYNAMIC_BASE_ALIGN = 1024


def extern_align(declared: int, statics: bool) -> int:
    """The alignment of an `.extern .shared` array's base, declared `.align declared`, in a
    kernel with (`statics`) or without static `.shared` variables."""
    return min(declared, 16) if statics else max(declared, DYNAMIC_BASE_ALIGN)


class Spans:
    """Demand-driven spans of the registers of one kernel (single definitions only: a
    register written several times is unknown unless every write is one constant, or it is
    an index toggled in place, `_toggled`, or a stage register a ring advances in place,
    `stages.wrap_count`)."""

    def __init__(self, values: Values, dims: tuple[int, ...] | None, statics: bool = False):
        self.values = values
        self.dims = tuple(dims or ())
        # Dynamic shared memory starts after the static variables: its .align holds only to
        # 16 bytes then (see hazards_bulk._align_check).
        self.statics = statics
        self._memo: dict[Reg, Span] = {}
        self._ones: dict[Reg, int | None] = {}
        self._threadwise = Threadwise(values, self._special)
        self._counters: set[Reg] = set()   # counted-loop registers given bounds (`_counted`)
        self._jump_list: list[tuple[int, Any]] | None = None

    def of(self, op: Any, depth: int = 0) -> Span:
        """The `Span` of an operand: constants exactly, a symbol's address as its root, registers
        through their defining statements (memoised; unknown past a depth limit)."""
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
        exact = self._threadwise.bounds(reg)
        if exact is not None:
            return Span(*exact)
        defs = self.values.defs.get(reg, ())
        if len(defs) != 1:
            span = self._counted(reg, defs)
            if span is not UNKNOWN:
                return span
            span = self._toggled(reg, defs)
            if span is UNKNOWN:
                span = self._stage_register(reg)
            return self._any_write(defs, depth + 1) if span is UNKNOWN else span
        st = self.values.body[defs[0]]
        if st.guard is not None:
            return UNKNOWN
        return self._write(defs[0], reg, depth + 1)

    def _any_write(self, defs: Any, d: int) -> Span:
        """A register written several times holds what one of its writes wrote: a plain
        integer bounded by every write's bounds (`i = (i + n) % 6` after `i = 0`), else
        unknown. A write that reads the register itself sees it unknown (`of`'s cycle
        guard), so only writes bounded whatever they read bound it."""
        out: Span | None = None
        for i in defs:
            st = self.values.body[i]
            span = self._write(i, None, d) if isinstance(st, Statement) \
                and len(dests(st.insn)) == 1 else UNKNOWN
            if span.root is not None:
                return UNKNOWN
            out = span if out is None else _either(out, span)
        return UNKNOWN if out is None else out

    def _write(self, i: int, reg: Reg | None, d: int) -> Span:
        """The span of what statement i writes (its one result; `reg` that result where it
        is the register's only write, for the bit-mask bounds `ones` gives)."""
        insn = self.values.body[i].insn
        ring = lockstep_ring(self.values, i)
        if ring is not None:   # LLVM's strength-reduced `base + S * (k % N)`
            base, k, n, step = ring
            return _add(self.of(base, d), Span(None, 0, 0, (k, n, step, 0)))
        rem = remainder(self.values, insn)
        if rem is not None:
            return Span(None, 0, rem - 1)
        if isinstance(insn, Shfl) and (reg is None or reg is insn.d) \
                and self.values.const(insn.membermask) == 0xFFFFFFFF:
            # Every lane reads some lane's `a` (its own when the source is out of range).
            return self.of(insn.a, d)
        if isinstance(insn, Selp):
            return _either(self.of(insn.a, d), self.of(insn.b, d))
        if isinstance(insn, Mov):
            if isinstance(insn.a, SpecialReg):
                return self._special(insn.a.name)
            return self.of(insn.a, d)
        shared = self.values.broadcast_source(reg, insn)
        if shared is not None:   # a warp broadcast of what every lane holds: Values' rule
            return self.of(shared, d)
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
            low = self._low_bits(insn, d)
            if low is not None:
                return low
            return _add(self.of(insn.a, d), self.of(insn.b, d), -1)
        if op == "mul" and getattr(insn, "mode", None) in (None, "lo", "wide"):
            return self._mul(insn.a, insn.b, d)
        if op == "shl":
            b = self.values.const(insn.b)
            return _scale(self.of(insn.a, d), 1 << b) if b is not None and 0 <= b < 63 \
                else UNKNOWN
        if op in ("and", "rem"):
            return self._within_ones(reg, self._mask(insn, d))
        if op == "xor":
            return self._within_ones(reg, self._xor(insn, d))
        if op == "or":
            x, y = self.of(insn.a, d).folded(), self.of(insn.b, d).folded()
            least = max(x.lo, y.lo) if x.lo is not None and y.lo is not None \
                and x.lo >= 0 and y.lo >= 0 and x.root is None and y.root is None else 0
            return self._within_ones(reg, Span(None, least, None))
        if op in ("shr", "div"):
            b = self.values.const(insn.b)
            a = self.of(insn.a, d).folded()
            if b is None or b < 0 or a.root is not None or a.lo is None or a.lo < 0:
                return UNKNOWN
            f = 1 << b if op == "shr" else b
            if f <= 0:
                return UNKNOWN
            if op == "shr" and insn.type.kind == "s" and b >= insn.type.bits - 1:
                return _const(0)   # the sign of a non-negative value (nvcc's `a >> 31`)
            return Span(None, a.lo // f, None if a.hi is None else a.hi // f)
        return UNKNOWN

    def _within_ones(self, reg: Reg | None, span: Span) -> Span:
        """A bitwise result bounded by the bits that may be set in it (`ones`): a swizzle's
        `(row & 192 | k & 8) ^ (row & 192) >> 3` has at most bits 3, 4, 6 and 7 set."""
        mask = None if reg is None else self.ones(reg)
        if mask is None or span.root is not None or span.ring is not None:
            return span
        if span.lo is not None and span.lo >= 0 and span.hi is not None and span.hi <= mask:
            return span
        return Span(None, span.lo if span.lo is not None and span.lo >= 0 else 0,
                    mask if span.hi is None else min(span.hi, mask))

    def _low_bits(self, insn: Binary, d: int) -> Span | None:
        """`a - (a & m)`, which is `a & ~m` (the bits m keeps are subtracted back out, with
        no borrow): nvcc's signed `a % 2**k` of a value it cannot prove non-negative,
        `a - ((a + bias) & -2**k)`, whose bias (`(a >> 31) >>> (32 - k)`) is 0 when a is.
        None when insn is not that shape."""
        low = self._low_mask(insn)
        if low is None:
            return None
        a = self.of(insn.a, d).folded()
        if a.root is None and a.lo is not None and a.lo >= 0 and a.hi is not None:
            mask = self.ones(insn.a)
            top = (1 << a.hi.bit_length()) - 1 if mask is None else mask
            return Span(None, 0, min(a.hi, top & low))
        return Span(None, 0, low) if low < 1 << (insn.type.bits - 1) else UNKNOWN

    def _low_mask(self, insn: Binary) -> int | None:
        """The mask `~m` (as an unsigned value of insn's width) when insn is `sub d, a, t`
        with `t = (a + 0) & m`, m a constant; else None."""
        t = insn.b
        defs = self.values.defs.get(t, ()) if isinstance(t, Reg) else ()
        if len(defs) != 1 or self.values.body[defs[0]].guard is not None:
            return None
        st = self.values.body[defs[0]].insn
        if not isinstance(st, Binary) or st.op != "and":
            return None
        m, x = self.values.const(st.b), st.a
        if m is None:
            m, x = self.values.const(st.a), st.b
        if m is None or not self._plus_zero(x, insn.a):
            return None
        return ~m & ((1 << insn.type.bits) - 1)

    def _plus_zero(self, x: Any, a: Any) -> bool:
        """Is x the value a: a itself, or `add x, a, z` with z known to be 0?"""
        if x is a:
            return True
        defs = self.values.defs.get(x, ()) if isinstance(x, Reg) else ()
        if len(defs) != 1 or self.values.body[defs[0]].guard is not None:
            return False
        st = self.values.body[defs[0]].insn
        if not isinstance(st, Binary) or st.op != "add":
            return False
        z = st.b if st.a is a else st.a if st.b is a else None
        if z is None:
            return False
        zs = self.of(z).folded()
        return zs.root is None and zs.lo == 0 and zs.hi == 0

    def ones(self, op: Any, depth: int = 0) -> int | None:
        """A mask of the bits that may be set in a non-negative integer (None: unknown, or
        possibly negative). Follows and/or/xor/shifts bit by bit, where the span of a sum
        or an `or` would add up the operands' bounds."""
        if isinstance(op, Imm):
            op = op.value
        if isinstance(op, int) and not isinstance(op, bool):
            return op if op >= 0 else None
        if not isinstance(op, Reg) or depth > 64:
            return None
        if op in self._ones:
            return self._ones[op]
        self._ones[op] = None                 # a cycle: unknown
        hit = self._ones[op] = self._reg_ones(op, depth + 1)
        return hit

    def _reg_ones(self, reg: Reg, d: int) -> int | None:
        c = self.values.const(reg)
        if c is not None:
            return c if c >= 0 else None
        defs = self.values.defs.get(reg, ())
        insn = self.values.body[defs[0]].insn if len(defs) == 1 \
            and self.values.body[defs[0]].guard is None else None
        out: int | None = None
        if isinstance(insn, Mov) and not isinstance(insn.a, SpecialReg):
            out = self.ones(insn.a, d)
        elif isinstance(insn, Binary):
            out = self._binary_ones(insn, d)
        if out is None:
            s = self.of(reg).folded()
            if s.root is None and s.lo is not None and s.lo >= 0 and s.hi is not None:
                out = (1 << s.hi.bit_length()) - 1
        return out

    def _binary_ones(self, insn: Binary, d: int) -> int | None:
        op, bits = insn.op, insn.type.bits
        if op == "and":
            raw = [self.values.const(x) for x in (insn.a, insn.b)]
            raw = [r if r is not None else self.ones(x, d) for r, x in zip(
                raw, (insn.a, insn.b), strict=True)]
            known = [r for r in raw if r is not None]
            out = -1
            for r in known:
                out &= r
            return out if known and out >= 0 else None
        if op == "sub":
            low = self._low_mask(insn)
            a = self.ones(insn.a, d) if low is not None else None
            return None if low is None else a & low if a is not None else (
                low if low < 1 << (bits - 1) else None)
        a, b = self.ones(insn.a, d), self.ones(insn.b, d)
        if op in ("or", "xor") or (op == "add" and a is not None and b is not None
                                   and not a & b):   # (a sum without carries)
            return None if a is None or b is None else a | b
        k = self.values.const(insn.b)
        if a is None or k is None or not 0 <= k < bits:
            return None
        if op == "shl":
            return a << k if (a << k).bit_length() <= bits else None
        return a >> k if op == "shr" else None

    def _stage_register(self, reg: Reg) -> Span:
        """A register written several times: a ring index of N stages when it is a stage
        register advanced in place and wrapped at N (`stages.wrap_count`), else unknown."""
        n = wrap_count(self.values, reg)
        return UNKNOWN if n is None else Span(None, 0, 0, (reg, n, 1, 0))

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
        if isinstance(a, Reg) and (x.lo is None or x.hi is None or a in self._counters):
            # An unbounded value (a loop counter): a ring index. A bounded one (`lane & 7`)
            # is only bounded, so that it does not displace a stage's ring term.
            return Span(None, 0, 0, (a, n, 1, 0))
        if x.lo is not None and x.hi is not None and 0 <= x.lo and x.hi < n:
            return x                           # the mask changes nothing
        return Span(None, 0, n - 1)

    def _xor(self, insn: Binary, d: int) -> Span:
        """`x ^ m`, m a bounded non-negative integer below 2**k: only x's low k bits change,
        so the result stays in the 2**k-aligned block holding x. `ring ^ scale * n/2` (the
        other buffer of `s ^ 1`) moves the ring by n/2."""
        a, b = self.of(insn.a, d), self.of(insn.b, d)
        if _rank(a) < _rank(b):
            a, b = b, a
        if not _mask_like(b):
            return UNKNOWN
        m = b.folded()
        assert m.hi is not None   # (_mask_like)
        block = 1 << m.hi.bit_length()
        ring = a.ring
        if ring is not None and a.root is None and a.lo == a.hi == 0 and m.lo == m.hi:
            _, n, scale, shift = ring
            if n > 1 and _is_pow2(n) and _is_pow2(scale) and m.lo == scale * (n // 2):
                return Span(None, 0, 0, (ring[0], n, scale, (shift + n // 2) % n))
        if ring is not None and ring[2] % block:
            a, ring = a.folded(), None
        if a.lo is None or a.hi is None:
            return Span(a.root, None, None, ring)
        # Bits below both operands' known zero bits stay zero: a 16-byte chunk XORed with
        # a multiple of 16 stays a 16-byte chunk (its last start is 16 below the block's end).
        step = 1 << min(self.zeros(insn.a), self.zeros(insn.b))
        if a.root is None or self._align(a.root) % block == 0:
            if a.lo < 0:
                return UNKNOWN
            return Span(a.root, a.lo & -block, (a.hi | (block - 1)) & -step, ring)
        return Span(a.root, a.lo - (block - 1), a.hi + (block - 1), ring)

    def zeros(self, op: Any, depth: int = 0) -> int:
        """How many low bits of a value are known to be zero (at most 16)."""
        if isinstance(op, Imm):
            return _tz(op.value) if isinstance(op.value, int) else 0
        if isinstance(op, int) and not isinstance(op, bool):
            return _tz(op)
        if isinstance(op, Symbol):
            return min(16, self._align(op).bit_length() - 1)
        if not isinstance(op, Reg) or depth > 32:
            return 0
        c = self.values.const(op)
        if c is not None:
            return _tz(c)
        defs = self.values.defs.get(op, ())
        if len(defs) != 1:
            return 0
        insn = self.values.body[defs[0]].insn
        d = depth + 1
        if isinstance(insn, Mov | Cvt | Cvta):
            return self.zeros(insn.a, d) if not isinstance(insn.a, SpecialReg) else 0
        if isinstance(insn, Mad) and insn.mode in (None, "lo", "wide"):
            # (a * b + c: the product's zero bits, then the sum's, as for mul and add)
            return min(16, self.zeros(insn.a, d) + self.zeros(insn.b, d), self.zeros(insn.c, d))
        if not isinstance(insn, Binary):
            return 0
        if insn.op in ("add", "sub", "xor", "or"):
            return min(self.zeros(insn.a, d), self.zeros(insn.b, d))
        if insn.op == "and":
            return min(16, max(self.zeros(insn.a, d), self.zeros(insn.b, d)))
        b = self.values.const(insn.b)
        if insn.op == "shl" and b is not None and 0 <= b < 32:
            return min(16, self.zeros(insn.a, d) + b)
        if insn.op == "mul" and getattr(insn, "mode", None) in (None, "lo", "wide"):
            return min(16, self.zeros(insn.a, d) + self.zeros(insn.b, d))
        return 0

    def _align(self, sym: Any) -> int:
        """The alignment of a symbol's address."""
        have: int = getattr(sym, "align", None) or getattr(getattr(sym, "type", None),
                                                            "bytes", None) or 1
        if getattr(sym, "count", 1) is None:
            have = extern_align(have, self.statics)
        return have

    def _counted(self, reg: Reg, defs: Any) -> Span:
        """The induction register of a counted loop with constant bounds: `mov i, c0`, then
        either the head `L: setp.lt p, i, C; @!p bra E` (or `setp.ge p, i, C; @p bra E`),
        the body, `add i, i, s; bra L; E:` (`for_range(c0, C)` as the builders lay it out),
        or nvcc's bottom-tested form `L:`, the body, `add i, i, s; setp.lt p, i, C; @p bra
        L` (or `setp.ge` and `@!p`; a loop whose first trip needs no
        test); and no branch from outside into the body. Each step follows a passed test, so
        i stays in [c0, max(c0, C - 1 + s)] (the last value, after the loop, is the first
        that fails). Unknown for any other shape."""
        body: Any = self.values.body   # statements and labels
        const = self.values.const
        if len(defs) != 2:
            return UNKNOWN
        i0, i1 = sorted(defs)
        if i1 + 2 >= len(body) or i0 + 2 >= i1:
            return UNKNOWN
        init, stp, head = body[i0], body[i1], body[i0 + 1]
        top = self._top_tested(body, i0, i1)
        test, back = (body[i0 + 2], body[i1 + 1]) if top else (body[i1 + 1], body[i1 + 2])
        if not all(isinstance(x, Statement) and x.guard is None for x in (init, stp, test)) \
                or not isinstance(head, LabelDef):
            return UNKNOWN
        c0 = const(init.insn.a) if isinstance(init.insn, Mov) else None
        ins, ti = stp.insn, test.insn
        s = const(ins.b) if isinstance(ins, Binary) and ins.op == "add" and ins.a is reg \
            else None
        c = const(ti.b) if isinstance(ti, Setp) and ti.cmp in ("lt", "ge") and ti.a is reg \
            and ti.bool_op is None and ti.q is None else None
        if c0 is None or s is None or c is None or c0 < 0 or s <= 0 or c > 1 << 30:
            return UNKNOWN
        if not (isinstance(back, Statement) and isinstance(back.insn, Bra)
                and back.insn.target is head.label
                and (back.guard is None if top else _while_below(back.guard, ti) is True)) \
                or len(self.values.defs.get(ti.p, ())) != 1:
            return UNKNOWN
        last = i1 + 1 if top else i1 + 2
        inside = {x.label.name for x in body[i0 + (2 if top else 1):i1 + 1]
                  if isinstance(x, LabelDef)}
        for n, target in self._jumps():
            if not i0 + 1 <= n <= last and (target in inside if isinstance(target, str)
                                            else any(lb in target for lb in inside)):
                return UNKNOWN
        self._counters.add(reg)
        # Read only inside the loop (besides its step and test), i never holds its exit
        # value where it is read: a stage array of C barriers initialised in the loop is
        # C barriers, not C + 1.
        tested = i0 + 2 if top else i1 + 1
        outside = any(any(r is reg for r in sources(x.insn)) for n, x in enumerate(body)
                      if isinstance(x, Statement) and n not in (i1, tested)
                      and not i0 + 1 < n < i1)
        return Span(None, c0, max(c0, c - 1 + (s if outside else 0)))

    def _top_tested(self, body: Any, i0: int, i1: int) -> bool:
        """Whether the loop of `_counted` leaves at its head (`@!p bra E` right after the
        test, E right after the back branch), as `for_range` lays it out."""
        leave, end, test = body[i0 + 3], body[i1 + 2], body[i0 + 2]
        return isinstance(leave, Statement) and isinstance(leave.insn, Bra) \
            and isinstance(end, LabelDef) and isinstance(test, Statement) \
            and isinstance(test.insn, Setp) and _while_below(leave.guard, test.insn) is False \
            and leave.insn.target is end.label

    def _jumps(self) -> list[tuple[int, Any]]:
        """Each branch's statement and target label name, and each inline statement's with
        its template (which may name a kernel label), once per kernel."""
        if self._jump_list is None:
            self._jump_list = [
                (n, x.insn.target.name if isinstance(x.insn, Bra) else x.insn.template)
                for n, x in enumerate(self.values.body)
                if isinstance(x, Statement) and isinstance(x.insn, Bra | InlineAsm)]
        return self._jump_list

    def _toggled(self, reg: Reg, defs: Any) -> Span:
        """A register written several times, each time with a constant or `r ^= c` (an index
        toggled in place): its values lie in [0, n), n the power of two above every constant;
        a ring of n on itself (`r ^= n/2` steps it by n/2)."""
        consts, flips = [], []
        for i in defs:
            st = self.values.body[i]
            insn = st.insn
            if isinstance(insn, Mov):
                c = self.values.const(insn.a)
            elif isinstance(insn, Binary) and insn.op == "xor" and insn.a is reg:
                c = self.values.const(insn.b)
                flips.append(c)
            else:
                return UNKNOWN
            if c is None or c < 0 or c >= 1 << 16:
                return UNKNOWN
            consts.append(c)
        if not flips:
            return UNKNOWN
        n = 1 << max(consts).bit_length()
        return Span(None, 0, 0, (reg, n, 1, 0)) if n > 1 else _const(0)

    def _special(self, name: str) -> Span:
        dims = self.dims
        axis = {"x": 0, "y": 1, "z": 2}.get(name[-1])
        if name.startswith("tid.") and axis is not None:
            cap = (1024, 1024, 64)[axis]
            if dims and not self.values.ntid:   # .maxntid: a bound on the product only
                return Span(None, 0, min(cap, math.prod(dims)) - 1)
            return Span(None, 0, (dims[axis] if axis < len(dims) else 1) - 1 if dims else cap - 1)
        if name.startswith("ntid.") and axis is not None and dims:
            # (.reqntid's exact sizes are constants already: see Values.ntid. .maxntid
            # bounds the product of the sizes, not each one.)
            return Span(None, 1, math.prod(dims))
        if name == "laneid":
            return Span(None, 0, 31)
        if name.startswith(("ctaid.", "nctaid.", "clusterid.", "cluster_ctaid.", "warpid")):
            return Span(None, 0, None)
        return UNKNOWN
