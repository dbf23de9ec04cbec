"""Warp-wide 8x8 matrix loads and stores between shared memory and registers:
ldmatrix (PTX ISA §9.7.14.5.15; PTX 6.5, sm_75) and stmatrix (§9.7.14.5.16; PTX 7.8, sm_90).

::

    ldmatrix.sync.aligned.m8n8.x4{.trans}{.shared{::cta}}.b16 {r0, r1, r2, r3}, [a];
    stmatrix.sync.aligned.m8n8.x4{.trans}{.shared{::cta}}.b16 [a], {r0, r1, r2, r3};

`.xN` moves N 8x8 matrices of 16-bit elements; each thread holds one .b32 register (two
elements of one row) per matrix, and threads 8i..8i+7 give the row addresses of matrix i
(each row 16 bytes, 16-byte aligned). `.trans` transposes each matrix on the way. The space
is .shared (32- or 64-bit shared address), .shared::cta (PTX 7.8), or generic (a 64-bit
generic address of shared memory). Every form was checked against ptxas 13.
"""

from __future__ import annotations

import enum
from typing import Any

import attrs

from ..operands import Addr, Reg, Symbol, Vec
from ..provenance import known_fit
from ..types import Requires, ScalarType, StateSpace, req
from ._tma_addr import symbol_fit
from .base import (
    Instruction,
    check_addr,
    check_dst,
    check_enum,
    check_one_type,
    check_src,
    refuse,
)

__all__ = ["MatrixCount", "LdMatrix", "StMatrix", "ldmatrix", "stmatrix", "FORMS"]

R_LDMATRIX = req("6.5", 75)
R_LDMATRIX_CTA = req("7.8", 75)     # .shared::cta [ptxas 13: accepted on sm_75 at 7.8]
R_STMATRIX = req("7.8", 90)
_SPACES = (StateSpace.shared, StateSpace.shared_cta, StateSpace.generic)
ROW_BYTES = 16


class MatrixCount(enum.Enum):
    """How many 8x8 matrices one instruction moves (one .b32 register per thread each)."""

    x1 = 1
    x2 = 2
    x4 = 4


def _regs(insn: Instruction, operand: str, value: Any, is_dst: bool) -> Vec:
    items = tuple(value.items if isinstance(value, Vec) else value
                  if isinstance(value, tuple | list) else (value,))
    if len(items) not in (1, 2, 4):
        refuse(insn, f"{operand} must hold 1, 2 or 4 .b32 registers (.x1/.x2/.x4), "
               f"got {len(items)}")
    check = check_dst if is_dst else lambda *a: check_src(*a, imm=False)
    regs = tuple(check(insn, f"{operand}[{i}]", v, ScalarType.b32)
                 for i, v in enumerate(items))
    check_one_type(insn, operand, regs)
    return Vec(regs)


def _row_address(insn: Instruction, value: Any, space: StateSpace) -> Addr:
    """The row address: 16-byte alignment is checked where it is known at build time."""
    a = check_addr(insn, "a", value, space)
    _row_fits(insn, a)
    known_fit(a, lambda at: _row_fits(insn, at))   # a register holding a symbol's address
    return a


def _row_fits(insn: Instruction, a: Addr) -> None:
    if a.offset % ROW_BYTES:
        refuse(insn, f"row addresses must be 16-byte aligned: offset {a.offset} is not a "
               "multiple of 16")
    if isinstance(a.base, Symbol) and a.base.align is not None and a.base.align < ROW_BYTES:
        refuse(insn, f"row addresses must be 16-byte aligned: {a.base.name} is only "
               f"{a.base.align}-byte aligned (declare it with align=16 or more)")
    if isinstance(a.base, Symbol) and not a.base.space.is_shared:
        refuse(insn, f"the matrix must be in shared memory, not .{a.base.space.value}")
    if isinstance(a.base, Symbol):
        symbol_fit(insn.name, "a", a, size=ROW_BYTES, what="a 16-byte matrix row")


def _check(insn: LdMatrix | StMatrix, regs_field: str, is_dst: bool) -> None:
    insn._set("space", check_enum(insn.MNEMONIC, "space", insn.space, StateSpace, _SPACES))
    insn._set(regs_field, _regs(insn, regs_field, getattr(insn, regs_field), is_dst))
    insn._set("a", _row_address(insn, insn.a, insn.space))


def _opcode(insn: LdMatrix | StMatrix, regs: Vec) -> str:
    return (f"{insn.MNEMONIC}.sync.aligned.m8n8.x{len(regs.items)}"
            f"{'.trans' if insn.trans else ''}{insn.space.ptx}.b16")


@attrs.frozen
class LdMatrix(Instruction):
    """`ldmatrix.sync.aligned.m8n8.xN{.trans}{.ss}.b16 d, [a];` — d: N .b32 registers."""

    MNEMONIC = "ldmatrix"
    d: Any
    a: Any
    trans: bool = False
    space: StateSpace = StateSpace.shared

    def __attrs_post_init__(self):
        _check(self, "d", True)

    @property
    def requires(self) -> Requires:
        return R_LDMATRIX_CTA if self.space is StateSpace.shared_cta else R_LDMATRIX

    def opcode(self) -> str:
        return _opcode(self, self.d)

    def operands(self):
        return (self.d, self.a)


@attrs.frozen
class StMatrix(Instruction):
    """`stmatrix.sync.aligned.m8n8.xN{.trans}{.ss}.b16 [a], b;` — b: N .b32 registers."""

    MNEMONIC = "stmatrix"
    a: Any
    b: Any
    trans: bool = False
    space: StateSpace = StateSpace.shared
    REQUIRES = R_STMATRIX

    def __attrs_post_init__(self):
        _check(self, "b", False)

    def opcode(self) -> str:
        return _opcode(self, self.b)

    def operands(self):
        return (self.a, self.b)


def _space(addr: Any, space: Any) -> Any:
    if space is not None:
        return space
    base = addr.base if isinstance(addr, Addr) else addr
    if isinstance(base, Reg) and base.space is StateSpace.generic:
        return StateSpace.generic
    return StateSpace.shared


def ldmatrix(k, addr, num: int | MatrixCount | None = None, *, trans: bool = False,
             space=None, dst=None) -> tuple[Reg, ...]:
    """Load `num` (1, 2, 4; default 4, or one per `dst` register) 8x8 b16 matrices; returns
    the .b32 registers (one per matrix)."""
    n = num.value if isinstance(num, MatrixCount) else num
    if dst is None:
        n = 4 if n is None else n
        if n not in (1, 2, 4):
            refuse("ldmatrix", f"num must be 1, 2 or 4 (.x1/.x2/.x4), got {n!r}")
        dst = tuple(k.reg(ScalarType.b32) for _ in range(n))
    elif n is not None and (not isinstance(dst, tuple | list) or len(dst) != n):
        # the registers set the count: a num that disagrees would be dropped silently
        count = len(dst) if isinstance(dst, tuple | list) else 1
        refuse("ldmatrix", f"num={n!r} matrices but {count} dst registers (one .b32 "
               "register per matrix; leave num out with dst)")
    k.emit(LdMatrix(tuple(dst), addr, trans, _space(addr, space)))
    return tuple(dst)


def stmatrix(k, addr, regs, *, trans: bool = False, space=None) -> None:
    """Store 1, 2 or 4 8x8 b16 matrices held one .b32 register per matrix per thread."""
    k.emit(StMatrix(addr, tuple(regs) if isinstance(regs, list | tuple) else (regs,), trans,
                    _space(addr, space)))


FORMS: list[tuple[str, Requires, str]] = [
    ("ldmatrix.sync.aligned.m8n8.{x1,x2,x4}{.trans}{,.shared}.b16", R_LDMATRIX,
     "generic or .shared address"),
    ("ldmatrix.sync.aligned.m8n8.{x1,x2,x4}{.trans}.shared::cta.b16", R_LDMATRIX_CTA, ""),
    ("stmatrix.sync.aligned.m8n8.{x1,x2,x4}{.trans}{,.shared,.shared::cta}.b16", R_STMATRIX,
     ""),
]
