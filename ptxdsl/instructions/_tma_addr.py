"""State-space handling shared by the TMA families (tensormap, fence, mbarrier).

The convenience functions take an address as a symbol, a register or an `Addr`, and an
optional `space`. `space=None` means "infer it": a symbol's own space; a register's `.space`
hint (set by `mov` of a symbol or by `cvta`); a 32-bit register is a shared address, an
unhinted 64-bit register a generic one. `space="generic"` asks for the generic form explicitly.
"""

from __future__ import annotations

from typing import Any

from ..errors import OperandError
from ..operands import Addr, Reg, Symbol
from ..types import StateSpace
from .base import _given, check_addr, check_enum

S = StateSpace
GENERIC_NAMES = ("generic", "")


def _base(addr: Any):
    return addr.base if isinstance(addr, Addr) else addr


def parse_space(insn: str, value: Any, allowed: tuple[StateSpace, ...], *,
                bare_shared: bool = False) -> StateSpace:
    """An explicit `space=` argument: a StateSpace, its PTX spelling, or 'generic'."""
    if isinstance(value, str) and value.lstrip(".") in GENERIC_NAMES:
        value = S.generic
    sp = check_enum(insn, "space", value, StateSpace,
                    tuple(allowed) + ((S.shared,) if not bare_shared else ()))
    if sp is S.shared and not bare_shared:
        raise OperandError(insn, "space", "'shared::cta' (ptxas rejects bare .shared here)",
                           "'shared'")
    return sp


def infer_space(insn: str, addr: Any, allowed: tuple[StateSpace, ...]) -> StateSpace:
    """The space an address lives in, from a symbol or a register's hint (see module doc)."""
    base = _base(addr)
    sp: StateSpace | None = None
    if isinstance(base, Symbol):
        sp = base.space
    elif isinstance(base, Reg):
        hint = base.space
        if base.type.bits == 32:
            sp = hint if hint is not None and hint.is_shared else S.shared
        elif hint is None:
            sp = S.generic
        else:
            sp = hint
    if sp is S.shared and S.shared_cta in allowed:
        sp = S.shared_cta  # the canonical spelling; bare .shared only when asked for
    if sp is None or sp not in allowed:
        names = ", ".join(repr(a.value or "generic") for a in allowed)
        raise OperandError(insn, "addr", f"an address in one of {names} (pass space=... "
                           "when the address does not say which)", _given(base)
                           if sp is None else f"{_given(base)} (a .{sp.value or 'generic'} "
                           "address)")
    return sp


def resolve_space(insn: str, addr: Any, space: Any, allowed: tuple[StateSpace, ...], *,
                  bare_shared: bool = False) -> StateSpace:
    """`space` if given (validated against `allowed`), else the inferred one."""
    if space is None:
        return infer_space(insn, addr, allowed)
    return parse_space(insn, space, allowed, bare_shared=bare_shared)


def _hint_fits(hint: StateSpace, space: StateSpace) -> bool:
    if space is S.shared_cluster:
        return hint.is_shared            # the own CTA's shared::cta address is valid here
    if space.is_shared:
        return hint in (S.shared, S.shared_cta)
    return hint is space


def tma_addr(insn: str, operand: str, value: Any, space: StateSpace,
             widths: tuple[int, ...] | None = None) -> Addr:
    """`check_addr`, and a register whose `.space` hint names another space is refused (a
    wrong space still assembles but is undefined behaviour: digest pitfall 10)."""
    addr = check_addr(insn, operand, value, space, widths)
    base = addr.base
    if isinstance(base, Reg) and base.space is not None and not _hint_fits(base.space, space):
        raise OperandError(insn, operand, f"a .{space.value or 'generic'} address",
                           f"{_given(base)}, which holds a .{base.space.value or 'generic'} "
                           "address (convert it with cvta, or pass the right space=)")
    return addr
