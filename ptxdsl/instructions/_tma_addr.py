"""Address checks shared by the TMA families (tensormap, fence, mbarrier).

`tma_addr` checks an address operand against the instruction's space, refusing a register
whose `.space` hint (set by `mov` of a symbol or by `cvta`) names another space. The builders
convert generic pointers first (`_ptx_args.space_addr`). `infer_space` (prefetch_tensormap
only) reads the space off the address: a symbol's own space, a register's hint, a 32-bit
register shared, an unhinted 64-bit register generic.
"""

from __future__ import annotations

from typing import Any

from ..errors import OperandError
from ..operands import Addr, Reg, Symbol
from ..provenance import known_fit
from ..types import StateSpace
from . import _ptx_args as A
from .base import _given, check_addr

S = StateSpace


def _base(addr: Any):
    return addr.base if isinstance(addr, Addr) else addr


def parse_space(insn: str, value: Any, allowed: tuple[StateSpace, ...]) -> StateSpace:
    """An explicit `space=` argument, spelled as `_ptx_args.space` takes it ('shared' is
    .shared::cta; the enum member StateSpace.shared is bare .shared where `allowed` has it)."""
    return A.space(insn, "space", value, allowed)


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


def resolve_space(insn: str, addr: Any, space: Any, allowed: tuple[StateSpace, ...]
                  ) -> StateSpace:
    """`space` if given (validated against `allowed`), else the inferred one."""
    if space is None:
        return infer_space(insn, addr, allowed)
    return parse_space(insn, space, allowed)


def hint_fits(hint: StateSpace, space: StateSpace) -> bool:
    """Whether a register whose hint is `hint` may be used as an address in `space`."""
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
    if isinstance(base, Reg) and base.space is not None and not hint_fits(base.space, space):
        raise OperandError(insn, operand, f"a .{space.value or 'generic'} address",
                           f"{_given(base)}, which holds a .{base.space.value or 'generic'} "
                           f"address ({cvta_advice(base.space, space)})")
    return addr


def cvta_advice(held: StateSpace, want: StateSpace) -> str:
    """How to turn an address in space `held` into one in `want`, for error messages."""
    if want is S.generic:
        return f"convert it to generic with k.cvta(reg, '{held.value}')"
    if held is S.generic:
        return (f"pass it to the ptx builder, which converts it, or convert it with "
                f"k.cvta(reg, '{want.value}', to=True)")
    return "an address in one space is not valid in another"


def symbol_align(sym: Symbol) -> int:
    """The alignment a symbol is known to have: its `.align`, else its type's natural one."""
    return sym.align or sym.type.bytes


def symbol_fit(insn: str, operand: str, value: Any, *, align: int = 1, size: int | None = None,
               what: str = "") -> None:
    """Refuse what a symbol base and a constant offset prove wrong: an address not
    `align`-byte aligned, or `size` bytes from it running outside the symbol (an unsized
    .extern array has no known end). A register base is checked against the symbol it is
    known to hold the address of (`provenance.known_fit`); other registers can't be. `what`
    names the object for the message, e.g. "an mbarrier (8 bytes, 8-byte aligned)"."""
    base = _base(value)
    if isinstance(base, Reg):
        known_fit(value, lambda at: symbol_fit(insn, operand, at, align=align, size=size,
                                               what=what))
        return
    if not isinstance(base, Symbol):
        return
    off = value.offset if isinstance(value, Addr) else 0
    at = f"{base.name}{off:+d}" if off else base.name
    have = symbol_align(base)
    if align > 1 and (have < align or off % align):
        raise OperandError(insn, operand, f"a {align}-byte aligned address"
                           + (f" for {what}" if what else "")
                           + f" (declare {base.name} with align={align} or more and use "
                           f"offsets that are multiples of {align})",
                           f"{at}, known to be aligned to {min(have, off & -off) if off else have}"
                           " bytes")
    if size is not None and base.count is not None and (off < 0 or off + size > base.size):
        raise OperandError(insn, operand, f"an access inside {base.name} ({base.size} bytes)"
                           + (f" for {what}" if what else ""),
                           f"bytes [{off}, {off + size}) of {base.name}")


MBARRIER = "an mbarrier (a .b64 object: 8 bytes, 8-byte aligned)"


def mbar_addr(insn: str, operand: str, value: Any, space: StateSpace) -> Addr:
    """`tma_addr` for an mbarrier operand, and a symbol base must hold 8 bytes, 8-aligned, at
    the offset (`shared_array(t.b64, n)` does)."""
    addr = tma_addr(insn, operand, value, space)
    symbol_fit(insn, operand, addr, align=8, size=8, what=MBARRIER)
    return addr


# Measured on an H200 (tensormap.replace in shared memory, cp_fenceproxy to global, a TMA load
# through the published map): the shared copy worked at 8-, 16-, 32- and 64-byte alignment; the
# global one worked at 64 and faulted (CUDA_ERROR_MISALIGNED_ADDRESS) at 16 and 32, in line with
# cuTensorMapEncodeTiled's 64-byte rule. 128 (CUtensorMap's alignas in CUDA 13) is the advice.
_TMAP_ALIGN = {StateSpace.global_: 64}


def tmap_buffer(insn: str, operand: str, value: Any, space: StateSpace) -> Addr:
    """`tma_addr` for a tensor map being edited or copied (tensormap.replace,
    tensormap.cp_fenceproxy): a symbol base must hold its 128 bytes at the offset, aligned to
    64 bytes in global memory and 8 in shared memory (128 recommended for both)."""
    addr = tma_addr(insn, operand, value, space)
    align = _TMAP_ALIGN.get(space, 8)
    symbol_fit(insn, operand, addr, align=align, size=128,
               what=f"a tensor map (128 bytes; {align}-byte aligned at least in "
                    f".{space.value}, 128 recommended, as CUDA 13's alignas(128) CUtensorMap)")
    return addr
