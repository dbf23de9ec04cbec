"""Build-time address provenance: the registers known to hold a symbol's address.

`k.mov(sym)` / `k.addr_of(sym)` into a fresh register records on it (`Reg.origin`) that it
holds the address of `sym`; adding or subtracting an integer constant to such a register into
a fresh one records `sym + offset` on the result. The checks that know a symbol's extent and
alignment (`_tma_addr.symbol_fit` and the helpers' own) then check such a register as they
check `Addr(sym, offset)` (`known_fit`): a buffer passed as `base = k.mov(smem)` is checked too.

Provenance is a claim about every value the register can hold, so it is only made where it is
certain and dropped wherever it may stop being true:

- `KernelCore.emit` clears it on every register an instruction writes (an in-place
  `k.add(r, 1, dst=r)`, a `mov`/`ld` into it, an inline-asm output): it only ever describes a
  register written once so far. A register made under a guard, a parameter's, one made by
  `k.reg()` or one a `mov` writes into (`dst=`) has none.
- Written once *so far* is not enough in a loop: a write later in the body reaches an earlier
  use on the next iteration. So a use is checked at once only when no label was placed since
  the chain's first `mov` (no branch can land in between, so the only way to the use is the
  straight line from the `mov`). Otherwise the check waits until the kernel is rendered, and
  runs only if the register, and each register it was computed from, was never written again:
  then it holds that one value or was never set.

An error from a checked register names the register and what it holds; one found at
rendering names the line that used the register.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol, cast

import attrs

from .errors import PtxdslError, SourceLoc, user_loc
from .instructions.base import DEST_FIELDS
from .operands import Addr, Imm, NegPred, Origin, Reg, Symbol, Vec, as_int
from .types import StateSpace


class Tracker(Protocol):
    """What provenance keeps on a kernel (a `KernelCore`; `KernelHost` declares the same): a
    Protocol, so that this module, read by the instruction classes' checks, imports nothing of
    the builder above it (docs/CONTRIBUTING.md, Layers)."""

    _guard: Reg | NegPred | None
    _labels_placed: int
    _origin_regs: set[Reg]
    _pending_fits: list


def _claim(k: Tracker, reg: Reg, origin: Origin) -> None:
    reg.origin = origin
    k._origin_regs.add(reg)


def establish(k: Tracker, reg: Reg, sym: Symbol) -> None:
    """`reg` (fresh, just written by `mov reg, sym`) holds `sym`'s address. A parameter's
    address is not tracked (its .param window is read by ld.param only)."""
    if k._guard is None and sym.space is not StateSpace.param and reg.type.kind in "bus":
        _claim(k, reg, Origin(sym, 0, k._labels_placed))


def derive(k: Tracker, op: str, d: Reg, a: Any, b: Any) -> None:
    """After `add`/`sub` of an integer constant into the fresh register `d`: `d` holds the
    register operand's symbol plus the offset moved by the constant."""
    if k._guard is not None or d.type.kind not in "bus":
        return
    if type(a) is Reg and a.origin is not None:
        reg, other, sign = a, b, 1 if op == "add" else -1
    elif op == "add" and type(b) is Reg and b.origin is not None:
        reg, other, sign = b, a, 1
    else:
        return
    n = other.value if type(other) is Imm else as_int(other)
    bits, o = reg.type.bits, reg.origin
    if type(n) is not int or bits != d.type.bits or o is None:
        return
    # The add wraps at the register's width: 0xFFFFFFF0 on a 32-bit address is -16.
    n = (n + (1 << (bits - 1))) % (1 << bits) - (1 << (bits - 1))
    _claim(k, d, Origin(o.symbol, o.offset + sign * n, o.labels, reg, o))


_RESULTS: dict[type, tuple[str, ...]] = {}   # instruction class -> its result fields


def forget_written(k: Tracker, insn: Any) -> None:
    """Drop the provenance of every register `insn` writes (see the module doc). Runs at
    every emit of a kernel that has such a register: the fields are looked up once a class."""
    names = _RESULTS.get(type(insn))
    if names is None:
        names = _RESULTS[type(insn)] = tuple(
            f.name for f in attrs.fields(type(insn)) if f.name in DEST_FIELDS)
    for name in names:
        v = getattr(insn, name)
        if type(v) is Reg:
            if v.origin is not None:
                _drop(k, v)
        elif isinstance(v, Vec | tuple):   # vector results, inline asm's outputs
            for r in v.items if isinstance(v, Vec) else v:
                if type(r) is Reg and r.origin is not None:
                    _drop(k, r)


def _drop(k: Tracker, reg: Reg) -> None:
    reg.origin = None
    k._origin_regs.discard(reg)


def _intact(reg: Reg, origin: Origin) -> bool:
    """Whether `reg` and every register its value was computed from were never rewritten."""
    while reg.origin is origin:
        if origin.parent is None or origin.parent_origin is None:
            return True
        reg, origin = origin.parent, origin.parent_origin
    return False


def known_fit(value: Any, check: Callable[[Addr], None]) -> None:
    """Run `check(Addr(symbol, offset))` for the symbol a register base of `value` (a Reg or
    Addr(Reg, offset)) is known to point into: at once where nothing can have changed the
    register, else when the kernel is rendered if it still holds what it did (module doc).
    Nothing happens for a register without provenance. Errors name the register."""
    base = value.base if isinstance(value, Addr) else value
    if type(base) is not Reg or base.origin is None or base.kernel is None:
        return
    origin, k = base.origin, cast(Tracker, base.kernel)   # a register's kernel: a KernelCore
    at = Addr(origin.symbol, origin.offset + (value.offset if isinstance(value, Addr) else 0))
    if k._labels_placed == origin.labels:
        _run(check, at, base, origin, None)
    else:
        k._pending_fits.append((base, origin, check, at, user_loc()))


def _run(check: Callable[[Addr], None], at: Addr, reg: Reg, origin: Origin,
         loc: SourceLoc | None) -> None:
    try:
        check(at)
    except PtxdslError as e:
        # The check speaks of the symbol; say which register it was given (and, when it ran
        # at rendering, the line that used the register).
        e.message += f" (%{reg.name} holds the address of {origin.describe()})"
        if loc is not None:
            e.loc = loc
        e.args = (f"{e.loc}: {e.message}",)
        raise


def check_pending(k: Tracker) -> None:
    """The checks `known_fit` put off, for the registers that kept their provenance."""
    for reg, origin, check, at, loc in k._pending_fits:
        if _intact(reg, origin):
            _run(check, at, reg, origin, loc)
    k._pending_fits.clear()   # all passed; provenance can only be lost, never regained
