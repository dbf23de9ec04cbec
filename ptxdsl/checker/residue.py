"""An address modulo a power of two where only its constant part decides it.

`tma-smem-align` judges a TMA buffer by the alignment its address is known to have. An
address with a run-time part (a ring's stage, `V + 8192 * s`) has no exact offset, but its
residue modulo the alignment a swizzle needs is still known when every run-time term is a
multiple of it: `smem + 25088 + 8192 * s` is 512 past a multiple of 1024 in every stage.
Anything not so decided (a term with unknown low bits) is None: the rule stays silent."""

from __future__ import annotations

from typing import Any

from ..instructions.arith import Binary
from ..instructions.move import Cvt, Cvta, Mov
from ..operands import Addr, Imm, Reg, SpecialReg
from .ranges import Spans


def residue(spans: Spans, op: Any, m: int, depth: int = 0) -> int | None:
    """`op` modulo m (a power of two), or None where a term's low bits are not known."""
    if isinstance(op, Addr):
        r = residue(spans, op.base, m, depth + 1)
        return None if r is None else (r + op.offset) % m
    if spans.zeros(op) >= m.bit_length() - 1:
        return 0            # (a symbol aligned to m, a stage's `s << 13`, ...)
    if isinstance(op, Imm):
        return op.value % m if isinstance(op.value, int) else None
    if not isinstance(op, Reg) or depth > 32:
        return None
    c = spans.values.const(op)
    if c is not None:
        return c % m
    defs = spans.values.defs.get(op, ())
    if len(defs) != 1 or spans.values.body[defs[0]].guard is not None:
        return None
    insn = spans.values.body[defs[0]].insn
    if isinstance(insn, Mov | Cvt | Cvta) and not isinstance(insn.a, SpecialReg):
        return residue(spans, insn.a, m, depth + 1)     # (conversions keep the low bits)
    if isinstance(insn, Binary) and insn.op in ("add", "sub"):
        a, b = residue(spans, insn.a, m, depth + 1), residue(spans, insn.b, m, depth + 1)
        if a is None or b is None:
            return None
        return (a + b if insn.op == "add" else a - b) % m
    return None
