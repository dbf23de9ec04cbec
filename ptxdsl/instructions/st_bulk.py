"""st.bulk: initialise a region of shared memory (PTX ISA §9.7.9.x "st.bulk"; cuda::ptx
st_bulk.h), sm_100 on.

`st.bulk.weak.shared::cta [addr], size, initval;` sets `size` bytes from `addr` to `initval`,
which must be 0 (ptxas: "expected to be zero"). `size` is a multiple of 8 (an immediate in [0,
2^24], or a 64-bit register; a 32-bit one needs PTX 9.0). cuda::ptx::st_bulk(addr, size,
n32_t<0>{}) translates as `ptx.st_bulk(k, addr, size, 0)`.

ptxas refuses a symbol as st.bulk's address (an internal "Argument 1 of instruction 'add':
must be register", with or without an offset): the builder moves a shared symbol's address
into a register first, as cuda::ptx's `__as_ptr_smem` does.
"""

from __future__ import annotations

from typing import Any, SupportsIndex

import attrs

from ..errors import OperandError
from ..operands import Addr, Imm, Reg, Symbol
from ..types import Requires, ScalarType, StateSpace, req
from . import _ptx_args as A
from ._tma_addr import symbol_fit, tma_addr
from .base import Instruction, _given, check_imm, int_like

__all__ = ["st_bulk"]

T = ScalarType
CTA = StateSpace.shared_cta
ST_BULK = req("8.6", 100)
# ptxas 13: "Feature 'st.bulk with 32-bit size argument' requires PTX ISA .version 9.0".
ST_BULK_SIZE32 = req("9.0", 100)
MAX_SIZE = 1 << 24          # ptxas: an immediate size "expected to be in range [0..16777216]"
_NAME = "st.bulk.weak.shared::cta"


@attrs.frozen
class StBulk(Instruction):
    """`st.bulk{.weak}.shared::cta [addr], size, initval;`: `size` bytes (a multiple of 8)
    from the 8-byte aligned `addr` set to `initval` (0). `.weak` is the only semantics and
    the default: cuda::ptx writes it; `weak=False` is the same instruction without it."""

    MNEMONIC = "st.bulk"
    REQUIRES = ST_BULK
    addr: Any
    size: Any
    initval: Any = 0
    weak: bool = attrs.field(default=True, kw_only=True, eq=False)

    def __attrs_post_init__(self):
        if type(self.weak) is not bool:   # a truthy "no" must not change the text
            raise OperandError(self.MNEMONIC, "weak", "True or False", _given(self.weak))
        name = self.opcode()
        base = self.addr.base if isinstance(self.addr, Addr) else self.addr
        if isinstance(base, Symbol):
            raise OperandError(name, "addr", "a register holding a .shared::cta address "
                               "(ptxas refuses a symbol here; k.mov(sym) gives its address, "
                               "ptx.st_bulk does it)", _given(base))
        addr = tma_addr(name, "addr", self.addr, CTA)
        self._set("addr", addr)
        size = int_like(self.size)
        if isinstance(size, Imm):
            size = size.value
        if isinstance(size, Reg):
            if size.type.bits not in (32, 64) or not (size.type.is_int or size.type.kind == "b"):
                raise OperandError(name, "size", "a 64-bit integer register (or 32-bit, PTX "
                                   "9.0) or an immediate", _given(size))
        else:
            size = check_imm(name, "size", size, 0, MAX_SIZE)
            if size % 8:
                raise OperandError(name, "size", "a multiple of 8 bytes", size)
            symbol_fit(name, "addr", addr, align=8, size=size, what=f"{size} bytes")
            size = Imm(size, T.b64)
        if isinstance(size, Reg):
            symbol_fit(name, "addr", addr, align=8)
        self._set("size", size)
        init = int_like(self.initval)
        if isinstance(init, Imm):
            init = init.value
        if type(init) is not int or init != 0:
            raise OperandError(name, "initval", "the immediate 0 (the only value st.bulk "
                               "takes)", _given(init))
        self._set("initval", Imm(0, T.b32))

    @property
    def requires(self) -> Requires:
        if isinstance(self.size, Reg) and self.size.type.bits == 32:
            return ST_BULK_SIZE32
        return ST_BULK

    def opcode(self) -> str:
        return f"st.bulk{'.weak' if self.weak else ''}.shared::cta"

    def operands(self):
        return (self.addr, self.size, self.initval)


def st_bulk(k, addr, size, initval: int | SupportsIndex | Imm) -> None:
    """`st.bulk.weak.shared::cta [addr], size, initval;` (cuda::ptx::st_bulk): set `size`
    bytes (a multiple of 8) from `addr` (8-byte aligned, .shared::cta) to `initval`, which
    must be 0. A shared symbol (or symbol + offset) is moved into a register first, and a
    generic pointer converted with cvta, as cuda::ptx does."""
    addr = A.space_addr(k, _NAME, addr, CTA)
    base = addr.base if isinstance(addr, Addr) else addr
    if isinstance(base, Symbol):
        # Checked here, before the mov, so a refused symbol leaves no register behind
        # (fail_closed rolls back either way) and the message names the symbol.
        at = tma_addr(_NAME, "addr", addr, CTA)
        reg = k.mov(base)
        addr = Addr(reg, at.offset) if at.offset else reg
    k.emit(StBulk(addr, size, initval))


# -- forms: (form, requires, note) — rendered by ptxdsl.forms ----------------------------------
FORMS: list[tuple[str, Requires, str]] = [
    ("st.bulk.weak.shared::cta [addr], size, initval", ST_BULK,
     "size: immediate or 64-bit register; initval 0"),
    ("st.bulk.weak.shared::cta [addr], size32, initval", ST_BULK_SIZE32,
     "a 32-bit size register (not in cuda::ptx 13.0)"),
]
