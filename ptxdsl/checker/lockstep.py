"""Ring offsets LLVM strength-reduces: `p - (S * N) * (k / N)` with p stepped beside k.

Triton's pipelined loops index a ring of N stages as `base + S * (k % N)`; LLVM keeps a
pointer p that starts at `base` and moves by S on every trip, beside the trip counter k
(from 0, by 1), and subtracts `S * N` for every wrap::

    mov p, base;  mov k, 0;           ...  add p, p, S;  add k, k, 1;   (the latch)
    mul.hi.u32 h, k, 0xAAAAAAAB;  shr.u32 q, h, 1;                       (q = k / 3)
    mul.lo.s32 m, q, 3 * S;  sub.s32 a, p, m;                            (a = base + S * (k % 3))

(or `mad.lo a, q, -3 * S, p`). `lockstep_ring` reads that as `base + S * (k % N)`, a ring
index on k (`ranges.Span`). The division may be `div.u` or the multiply-high by a magic
constant and a shift that divides exactly for every value of the type. p and k must each be
written exactly twice (a start and a step), and on every path to the subtraction both were
last set to their starts (k to 0) and since stepped only together (a small dataflow over the
kernel's CFG). p's start may be another stepped register set to a constant just before
(`mov q, 0; mov p, q`): the base is then that constant.
"""

from __future__ import annotations

import weakref
from typing import Any

from ..instructions.arith import Binary, Mad
from ..instructions.base import dests
from ..instructions.control import Bra
from ..instructions.move import Cvt, Mov
from ..operands import Reg
from .cfg import CFG, solve


def _single(values: Any, reg: Any) -> Any:
    defs: Any = values.defs.get(reg, ()) if isinstance(reg, Reg) else ()
    if len(defs) != 1 or values.body[defs[0]].guard is not None:
        return None
    return values.body[defs[0]].insn


def _induction(values: Any, reg: Any) -> tuple[Any, int, int, int] | None:
    """(start operand, step, start statement, step statement) of a register written as
    `mov reg, start` once and `add reg, reg, step` once, both unguarded."""
    defs = sorted(values.defs.get(reg, ())) if isinstance(reg, Reg) else []
    if len(defs) != 2 or any(values.body[i].guard is not None for i in defs):
        return None
    a, b = (values.body[i].insn for i in defs)
    for (init, i0), (stp, i1) in (((a, defs[0]), (b, defs[1])), ((b, defs[1]), (a, defs[0]))):
        if isinstance(init, Mov) and isinstance(stp, Binary) and stp.op == "add" \
                and stp.a is reg:
            s = values.const(stp.b)
            if s is not None:
                return init.a, s, i0, i1
    return None


def _quotient(values: Any, q: Any) -> tuple[Any, int] | None:
    """(k, N) when q is computed once as k / N: `div.u`, or `shr(mul.hi(k, M), s)` (or
    `shr(mul.wide(k, M), 32 + s)`, nvcc's form) with a magic M that divides every value of
    the type exactly, through conversions."""
    for _ in range(4):
        insn = _single(values, q)
        if isinstance(insn, Cvt) and isinstance(insn.a, Reg):
            q = insn.a
            continue
        break
    insn = _single(values, q)
    if not isinstance(insn, Binary):
        return None
    if insn.op == "div" and getattr(insn.type, "kind", "") == "u":
        n = values.const(insn.b)
        return (insn.a, n) if n is not None and n > 0 else None
    if insn.op != "shr" or getattr(insn.type, "kind", "") not in ("u", "b"):
        return None
    s = values.const(insn.b)
    hi = _single(values, insn.a)
    if s is None or s < 0 or not isinstance(hi, Binary) or hi.op != "mul" \
            or getattr(hi, "mode", None) not in ("hi", "wide") \
            or getattr(hi.type, "kind", "") != "u":
        return None
    w = hi.type.bytes * 8
    m = values.const(hi.b)
    if m is None:
        return None
    m &= (1 << w) - 1
    # mul.hi keeps the product's high w bits, then shifts; mul.wide keeps all 2w bits and
    # the one shift does both (it must be of the 2w-bit value).
    if hi.mode == "wide":
        if insn.type.bytes * 8 != 2 * w:
            return None
        t = s
    else:
        t = w + s
    if not m:
        return None
    n = round((1 << t) / m)
    # floor(k * m / 2^t) == k // n for every k < 2^w when the error e = m*n - 2^t
    # satisfies 0 <= e and e * (2^w - 1) < 2^t (the round-up method).
    e = m * n - (1 << t)
    if n < 1 or e < 0 or e * ((1 << w) - 1) >= 1 << t:
        return None
    return hi.a, n


def remainder(values: Any, insn: Any) -> int | None:
    """N when insn computes `k - (k / N) * N` (`sub`, or `mad.lo` by -N) with the quotient
    `_quotient` reads: k % N, in [0, N) whatever k is."""
    if isinstance(insn, Binary) and insn.op == "sub":
        k, mul = insn.a, _single(values, insn.b)
        if not isinstance(mul, Binary) or mul.op != "mul" \
                or getattr(mul, "mode", None) not in (None, "lo"):
            return None
        pairs: tuple[tuple[Any, int | None], ...] = (
            (mul.a, values.const(mul.b)), (mul.b, values.const(mul.a)))
    elif isinstance(insn, Mad) and insn.mode in (None, "lo"):
        k = insn.c
        pairs = tuple((q, None if c is None else -c) for q, c in (
            (insn.a, values.const(insn.b)), (insn.b, values.const(insn.a))))
    else:
        return None
    for q, n in pairs:
        qk = _quotient(values, q) if n is not None and n > 0 else None
        if qk is not None and qk[0] is k and qk[1] == n:   # (`==` on a Reg builds a setp)
            return n
    return None


def modulus(values: Any, reg: Any) -> int | None:
    """N when every write of reg leaves an index in [0, N): a constant, `rem.u` by N, or a
    `remainder` by N (a stage index `k % 6`, whatever k was: nothing k was computed from is
    an address it carries)."""
    defs = values.defs.get(reg, ()) if isinstance(reg, Reg) else ()
    n = 0
    for i in defs:
        insn = getattr(values.body[i], "insn", None)
        if insn is None or len(dests(insn)) != 1:
            return None
        if isinstance(insn, Mov):
            c = values.const(insn.a)
            m = c + 1 if c is not None and c >= 0 else None
        elif isinstance(insn, Binary) and insn.op == "rem" and insn.type.kind == "u":
            m = values.const(insn.b)
        else:
            m = remainder(values, insn)
        if m is None or m <= 0:
            return None
        n = max(n, m)
    return n or None


def lockstep_ring(values: Any, i: int) -> tuple[Any, Reg, int, int] | None:
    """(base operand, k, N, S) when statement i computes `base + S * (k % N)` the
    strength-reduced way (see the module docstring); None otherwise."""
    insn = values.body[i].insn
    if isinstance(insn, Binary) and insn.op == "sub":
        p, m = insn.a, insn.b
        mul = _single(values, m)
        if not isinstance(mul, Binary) or mul.op != "mul" \
                or getattr(mul, "mode", None) not in (None, "lo"):
            return None
        c, q = values.const(mul.b), mul.a
        if c is None:
            c, q = values.const(mul.a), mul.b
    elif isinstance(insn, Mad) and insn.mode in (None, "lo"):
        p = insn.c
        c, q = values.const(insn.b), insn.a
        if c is None:
            c, q = values.const(insn.a), insn.b
        c = None if c is None else -c
    else:
        return None
    if c is None or c <= 0:
        return None
    pi, qk = _induction(values, p), _quotient(values, q)
    if pi is None or qk is None:
        return None
    base, step, p0, p1 = pi
    k, n = qk
    ki = _induction(values, k)
    if ki is None or ki[1] != 1 or step <= 0 or c != step * n \
            or _const_at(values, ki[0], ki[2]) != 0:
        return None
    if not _in_step(values, i, (p0, ki[2]), (p1, ki[3])):
        return None
    # p may start from another stepped register just set (`mov q, 0; mov p, q`: Triton's
    # second ring beside the first): its value there, not the register's (unknown) one.
    start = _const_at(values, base, p0)
    return base if start is None else start, k, n, step


def _const_at(values: Any, x: Any, i: int) -> int | None:
    """The constant operand x holds at statement i: a constant, or a register whose last
    write before i in straight-line code (no label or branch between) is `mov x, C`."""
    c = values.const(x)
    if c is not None or not isinstance(x, Reg):
        return c
    for j in range(i - 1, -1, -1):
        insn = getattr(values.body[j], "insn", None)
        if insn is None or isinstance(insn, Bra):
            return None
        if any(r is x for r in dests(insn)):
            return values.const(insn.a) if isinstance(insn, Mov) \
                and values.body[j].guard is None else None
    return None


_CFGS: weakref.WeakKeyDictionary[Any, CFG] = weakref.WeakKeyDictionary()
# (solve reads None as "not reached yet": "no" is the state that knows nothing)
_FRESH, _KEPT, _HALF, _P0, _K0, _NO = "fresh", "kept", "half", "p0", "k0", "no"


def _in_step(values: Any, use: int, inits: tuple[int, int], steps: tuple[int, int]) -> bool:
    """Does p - S * k equal p's start wherever statement `use` runs: on every path to it,
    p and k were last set to their starts (k to 0) and since stepped only together?"""
    cfg = _CFGS.get(values)
    if cfg is None:
        cfg = _CFGS[values] = CFG(values.body, values.guard_value)
    p0, k0 = inits
    first, second = sorted(steps)
    marks = {p0, k0, first, second}

    def at(i: int, st: Any) -> Any:
        if i == p0:
            return _FRESH if st in (_FRESH, _K0) else _P0
        if i == k0:
            return _FRESH if st in (_FRESH, _P0) else _K0
        if i == first:
            return _HALF if st in (_FRESH, _KEPT) else _NO
        if i == second:
            return _KEPT if st == _HALF else _NO
        return st

    def transfer(b: int, st: Any) -> Any:
        for i in cfg.blocks[b].stmts:
            if i in marks:
                st = at(i, st)
        return st

    def join(states: list, _united: list) -> Any:
        kinds = set(states)
        if len(kinds) == 1:
            return states[0]
        return _KEPT if kinds <= {_FRESH, _KEPT} else _NO

    ins = solve(cfg, _NO, transfer, join)
    b = cfg.block_of(use)
    st = ins[b] if 0 <= b < len(ins) else None
    for i in cfg.blocks[b].stmts if 0 <= b < len(ins) else ():
        if i == use:
            break
        if i in marks:
            st = at(i, st)
    return st in (_FRESH, _KEPT)
