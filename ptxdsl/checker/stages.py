"""Stage registers that a ring advances in place, and how far a write moves a ring counter.

`MbarrierRing`'s views (and many hand-written rings) keep the stage in one register and
advance it where it is::

    add r, r, 1;  setp.eq p, r, N;  @p mov r, 0;          (MbarrierRing.advance)
    add r, r, 1;  if (r == N) { r = 0; ... }              (a branch instead of the guard)
    add t, r, 1;  setp.eq p, t, N;  selp r, 0, t, p;      (selp-advanced)
    setp.eq p, r, N-1;  add t, r, 1;  selp r, 0, t, p;    (the test before the step)
    add t, r, 1;  rem r, t, N;

Such a register holds a value in [0, N) wherever it is read outside the advance, and it is
`V mod N` of a virtual counter V that each advance moves by 1 (the wrap to 0 moves V by
nothing). `wrap_count` recognises one (`ranges` then treats it as a ring index of N stages);
`step` says how far one write moves a counter (an add, an advance or its wrap, or `s ^= c`
on an index below 2c: c modulo 2c), so the facts that remember "the stage this wait / wgmma
used" can follow it (`hazards_ring`, `hazards_wgmma`); `relate` / `relation` relate two
stage registers of one ring (two views).
"""

from __future__ import annotations

import weakref
from typing import Any

from ..instructions.arith import Binary
from ..instructions.compare import Selp, Setp
from ..instructions.control import Bra
from ..instructions.move import Mov
from ..operands import Imm, NegPred, Reg
from .values import Values

# One table per kernel's Values: reg -> N (None: not a wrapped stage register).
_WRAPS: weakref.WeakKeyDictionary[Values, dict[Reg, int | None]] = weakref.WeakKeyDictionary()
_EQ = ("eq",)
_REACHED = ("ge", "hs")      # `r >= N` is `r == N` right after a step of 1 from below N
_PAST = ("gt", "hi")         # `r > N - 1`: the same test
_WITHIN = ("le", "ls")       # `r <= N - 1`: its negation
_NOT_EQ = ("ne",)
_BELOW = ("lt", "lo")


def _const(values: Values, x: Any) -> int | None:
    if isinstance(x, Imm):
        return int(x.value) if isinstance(x.value, int) else None
    if isinstance(x, int) and not isinstance(x, bool):
        return x
    return values.const(x)


def _single(values: Values, reg: Any) -> Any:
    defs = values.defs.get(reg, ()) if isinstance(reg, Reg) else ()
    return values.body[defs[0]] if len(defs) == 1 else None


def _def_at(values: Values, reg: Any, at: int) -> int | None:
    """The write of `reg` that statement `at` reads: its only write, or else the last one
    before `at` with no label between (hand-written PTX reuses one predicate for the tests
    of several loops: the producer's wrap and the consumer's)."""
    defs = values.defs.get(reg, ()) if isinstance(reg, Reg) else ()
    if len(defs) < 2:
        return defs[0] if defs else None
    for j in range(at - 1, -1, -1):
        if j in defs:
            return j
        if getattr(values.body[j], "insn", None) is None:
            return None            # a label: other paths, with other writes, join here
    return None


def _wrap_test(values: Values, pred: Any, x: Reg, at: int) -> tuple[int, bool] | None:
    """(N, polarity) when predicate `pred`, as statement `at` reads it, is `x == N` (True)
    or `x != N` (False)."""
    j = _def_at(values, pred, at)
    st = None if j is None else values.body[j]
    if st is None or st.guard is not None or not isinstance(st.insn, Setp) \
            or st.insn.bool_op is not None:
        return None
    insn = st.insn
    cmp, a, b = insn.cmp, insn.a, insn.b
    if b is x and a is not x:     # N == x, N != x (the mirrored forms of ge/lt are left out)
        a, b = b, a
        if cmp not in _EQ + _NOT_EQ:
            return None
    if a is not x:
        return None
    n = _const(values, b)
    if n is not None and cmp in _PAST + _WITHIN:   # `x > N - 1` (Triton's `setp.gt t, 2`
        n += 1                                     # for N = 3), `x <= N - 1`
        cmp = "ge" if cmp in _PAST else "lt"
    if n is None or n < 1:
        return None
    if cmp in _EQ + _REACHED:
        return n, True
    if cmp in _NOT_EQ + _BELOW:
        return n, False
    return None


def _is_plus_one(values: Values, t: Any, reg: Reg, at: int) -> bool:
    """Is `t`, as statement `at` reads it, computed as `reg + 1`?"""
    j = _def_at(values, t, at)
    st = None if j is None else values.body[j]
    return st is not None and st.guard is None and isinstance(st.insn, Binary) \
        and st.insn.op == "add" and st.insn.a is reg and _const(values, st.insn.b) == 1


def _guarded_by(values: Values, i: int) -> tuple[Any, bool] | None:
    """(predicate, polarity) under which statement i runs: its guard, or the `@p bra L`
    right before it that jumps over it (no label in between, so nothing else enters)."""
    st = values.body[i]
    if st.guard is not None:
        g = st.guard
        return (g.reg, False) if isinstance(g, NegPred) else (g, True)
    j = i - 1
    while j >= 0:
        prev = values.body[j]
        insn = getattr(prev, "insn", None)
        if insn is None:
            return None            # a label: other paths join here
        if isinstance(insn, Bra):
            branch = prev.guard
            if branch is None:
                return None
            # The fallthrough (statement i) runs when the branch is not taken.
            return (branch.reg, True) if isinstance(branch, NegPred) else (branch, False)
        if getattr(insn, "d", None) is not None and isinstance(insn, Mov | Binary | Selp):
            j -= 1                 # the rest of the wrap (the phase flip) may precede it
            continue
        return None
    return None


def _wrap_of(values: Values, i: int, reg: Reg) -> int | None:
    """N when the write at i is `mov reg, 0` that runs only when reg == N."""
    st = values.body[i]
    if not (isinstance(st.insn, Mov) and _const(values, st.insn.a) == 0):
        return None
    cond = _guarded_by(values, i)
    if cond is None:
        return None
    test = _wrap_test(values, cond[0], reg, i)
    if test is None or test[1] != cond[1]:
        return None
    return test[0]


def _tested_at(values: Values, i: int) -> int | None:
    """The statement computing the wrap test of the write at i (its guard's, its branch's
    or its selp's predicate)."""
    insn = values.body[i].insn
    pred = insn.c if isinstance(insn, Selp) else (_guarded_by(values, i) or (None,))[0]
    return _def_at(values, pred, i)


def _selp_step(values: Values, i: int, reg: Reg) -> tuple[int, int] | None:
    """(N, move) of `selp reg, 0, t, (t == N)` (and its mirrored forms): move 1 when t is
    reg + 1, 0 when t is reg itself (a wrap after an add); i is the selp's statement."""
    insn = values.body[i].insn
    assert isinstance(insn, Selp)
    for zero, other, want in ((insn.a, insn.b, True), (insn.b, insn.a, False)):
        if _const(values, zero) != 0 or not isinstance(other, Reg):
            continue
        test = _wrap_test(values, insn.c, other, i)
        if test is not None and test[1] == want:
            if other is reg:
                return test[0], 0
            if _is_plus_one(values, other, reg, i):
                return test[0], 1
        # `selp reg, 0, reg + 1, (reg == N - 1)`: the test on the stage before the step.
        old = _wrap_test(values, insn.c, reg, i) if other is not reg else None
        if old is not None and old[1] == want and _is_plus_one(values, other, reg, i):
            return old[0] + 1, 1
    return None


def _kind(values: Values, i: int, reg: Reg) -> tuple[str, int | None, int]:
    """What the write at i does to `reg`: ('init', value, 0), ('step', None, k),
    ('wrap', N, 0), ('stepwrap', N, 1) or ('toggle', 2c, c) for `xor reg, reg, c`;
    ('other', None, 0) otherwise."""
    st = values.body[i]
    insn = st.insn
    if isinstance(insn, Mov):
        n = _wrap_of(values, i, reg)
        if n is not None:
            return "wrap", n, 0
        c = _const(values, insn.a)
        if c is not None and st.guard is None:
            return "init", c, 0
        return "other", None, 0
    if st.guard is not None:
        return "other", None, 0
    if isinstance(insn, Binary) and insn.op in ("add", "sub") and insn.a is reg:
        k = _const(values, insn.b)
        if k is not None:
            return "step", None, k if insn.op == "add" else -k
    if isinstance(insn, Binary) and insn.op == "xor" and insn.a is reg:
        # `s ^= c` (c a power of two) on an index in [0, 2c): a step of c modulo 2c.
        k = _const(values, insn.b)
        if k is not None and k > 0 and k & (k - 1) == 0:
            return "toggle", 2 * k, k
    if isinstance(insn, Binary) and insn.op == "rem" and _is_plus_one(values, insn.a, reg, i):
        n = _const(values, insn.b)
        if n is not None and n > 0:
            return "stepwrap", n, 1
    if isinstance(insn, Selp):
        hit = _selp_step(values, i, reg)
        if hit is not None:
            return ("stepwrap" if hit[1] else "wrap"), hit[0], hit[1]
    return "other", None, 0


def _reads_between(values: Values, lo: int, hi: int, reg: Reg) -> bool:
    """Does a statement strictly between lo and hi read `reg` other than through a setp
    (the wrap's test)?"""
    for j in range(lo + 1, hi):
        st = values.body[j]
        insn = getattr(st, "insn", None)
        if insn is None or isinstance(insn, Setp):
            continue
        # (by identity: `==` on a Reg builds a setp)
        if any(s is reg for s in values.sources_of(j)):
            return True
    return False


def wrap_count(values: Values, reg: Reg) -> int | None:
    """N when `reg` is a stage register advanced in place and wrapped at N (see the module
    doc): every write is a constant in [0, N), a step of 1 followed at once by its wrap, or
    a selp / rem advance. None otherwise."""
    table = _WRAPS.setdefault(values, {})
    if reg in table:
        return table[reg]
    table[reg] = None
    defs = sorted(values.defs.get(reg, ()))
    kinds = [(_kind(values, i, reg), i) for i in defs]
    ns = {kind[1] for kind, _ in kinds if kind[0] in ("wrap", "stepwrap")}
    if len(defs) < 2 or len(ns) != 1:
        return None
    n = ns.pop()
    assert n is not None
    for x, ((what, v, k), i) in enumerate(kinds):
        if what == "init" and v is not None and 0 <= v < n:
            continue
        if what in ("wrap", "stepwrap"):
            continue
        if what == "step" and k == 1 and x + 1 < len(kinds) \
                and kinds[x + 1][0][0] == "wrap" \
                and not _reads_between(values, i, kinds[x + 1][1], reg) \
                and i < (_tested_at(values, kinds[x + 1][1]) or -1):
            continue   # the wrap tests the stepped value, right after the step
        return None
    table[reg] = n
    return n


def step(values: Values, i: int, reg: Reg) -> tuple[int, int] | None:
    """How far the write at statement i moves the counter `reg`: (k, N), the virtual counter
    moving by k, exact modulo N (0: exact). None when the write is not a step (a reset, a
    load, ...). A ring of n stages on `reg` moves by k when N is 0 or a multiple of n."""
    n = wrap_count(values, reg)
    what, m, k = _kind(values, i, reg)
    if what == "step":
        return k, n or 0
    if what == "toggle" and m is not None:
        return k, m
    if what in ("wrap", "stepwrap") and n is not None:
        return k, n
    return None


def moved(values: Values, i: int, reg: Reg, n: int) -> int | None:
    """How far the write at i moves a ring of n stages on `reg` (None: unknown)."""
    s = step(values, i, reg)
    if s is None or (s[1] and s[1] % n):
        return None
    return s[0]


def base(values: Values, reg: Any) -> tuple[Any, int]:
    """(counter, c) with `reg` = counter + c, following single definitions `add x, y, c`,
    `sub x, y, c` and `mov x, y` back to a register written in place (or to the first
    value that is not such a sum)."""
    c = 0
    for _ in range(16):
        st = _single(values, reg)
        if st is None or st.guard is not None:
            break
        insn = st.insn
        if isinstance(insn, Mov) and isinstance(insn.a, Reg):
            reg = insn.a
            continue
        if isinstance(insn, Binary) and insn.op in ("add", "sub") and isinstance(insn.a, Reg):
            k = _const(values, insn.b)
            if k is None:
                break
            c += k if insn.op == "add" else -k
            reg = insn.a
            continue
        break
    return reg, c


# -- relations between counters ------------------------------------------------------------------
# Two views of one ring (MbarrierRing's `read` and `free`, stepped in the same loop) are two
# registers; what relates them is how far each stepped since both were set. These are
# per-thread facts, kept as may-facts (a thread came along one path, whatever other threads
# did): ("cval", id(r), v, N): stage register r (wrapped at N) may hold v, and ("crel",
# id(a), id(b), d, N) with id(a) < id(b): a - b may be d (mod N); None for "unknown". A
# relation is known where every path brings the same d: one that holds on the first trip of
# a loop and on the later ones survives the loop, one that differs between them (a view
# advanced under `if kb > 0`) does not.
_REL = ("cval", "crel")


def _values_of(may: frozenset, x: int) -> set:
    return {f[2] for f in may if f[0] == "cval" and f[1] == x}


def relate(values: Values, may: frozenset, i: int, reg: Reg) -> frozenset:
    """The counter facts of `may` after the write at statement i of counter `reg`."""
    x = id(reg)
    n = wrap_count(values, reg)
    mine = [f for f in may if f[0] in _REL and x in f[1:3]]
    if n is None:
        # Only stage registers are related: their values mod N are few, so the facts settle
        # in a few rounds (a plain counter's would grow on every trip).
        return frozenset(set(may) - set(mine)) if mine else may
    out = set(may) - set(mine)
    what, v, _ = _kind(values, i, reg)
    if what == "init" and v is not None:
        out.add(("cval", x, v % n, n))
        others = {f[1]: f[3] for f in may if f[0] == "cval" and f[1] != x}
        for y, ny in others.items():
            if ny != n:
                continue
            vals = _values_of(may, y)
            d = vals.pop() - v if len(vals) == 1 and None not in vals else None
            a, b, d = (x, y, None if d is None else -d) if x < y else (y, x, d)
            out.add(("crel", a, b, None if d is None else d % n, n))
        return frozenset(out)
    if not mine:
        return may
    s = step(values, i, reg)
    k = None if s is None or s[1] != n else s[0]
    for f in mine:
        if f[0] == "cval":
            val = None if k is None or f[2] is None else (f[2] + k) % n
            out.add(("cval", x, val, n))
            continue
        d = None if k is None or f[3] is None else (f[3] + (k if f[1] == x else -k)) % n
        out.add(("crel", f[1], f[2], d, n))
    return frozenset(out)


def relation(may: frozenset, a: Any, b: Any, n: int) -> int | None:
    """(a - b) mod n when every path relates a and b the same way (modulo a multiple of
    n), else None."""
    if not isinstance(a, Reg) or not isinstance(b, Reg):
        return None
    ia, ib = id(a), id(b)
    found = set()
    for f in may:
        if f[0] == "crel" and {f[1], f[2]} == {ia, ib}:
            if f[3] is None or not (f[4] == 0 or f[4] % n == 0):
                return None
            found.add((f[3] if f[1] == ia else -f[3]) % n)
    return found.pop() if len(found) == 1 else None
