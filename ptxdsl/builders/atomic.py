"""The `Kernel` builder methods of `ptxdsl.instructions.atomic`'s instructions: `k.atom`,
`k.atom_cas`, `k.red`.

A mixin of `ptxdsl.kernel.Kernel`; the instruction classes it emits know nothing of the
kernel (docs/CONTRIBUTING.md, Layers).
"""

from __future__ import annotations

from collections.abc import Sequence

from ..instructions.atomic import Atom, AtomCas, AtomOp, Red, _space_of, _type_of
from ..kernel_host import KernelHost
from ..operands import AddrLike, Reg, Value
from ..types import ScopeLike, SemLike, SpaceLike, TypeLike


class AtomicOps(KernelHost):
    """Kernel builder methods for atom and red."""

    def atom(self, op: AtomOp | str, addr: AddrLike, b: Value, *, type: TypeLike | None = None,
             space: SpaceLike | None = None, sem: SemLike | None = None,
             scope: ScopeLike | None = None, dst: Reg | None = None) -> Reg:
        """`atom.op`: returns the old value. `space` defaults to the symbol's or the address
        register's known space; `type` to the value's type (bitwise ops, exch: its .bN)."""
        t = _type_of("atom", op, addr, (b, dst), type)
        d = dst if dst is not None else self.reg(t)
        sp = _space_of("atom", addr, space)
        # The instruction takes op, sem and scope by name too and checks them (its fields are
        # typed as the members it makes of them).
        self.emit(Atom(op, t, d, addr, b, sp, sem, scope))  # type: ignore[arg-type]
        return d

    def atom_cas(self, addr: AddrLike, compare: Value, value: Value, *,
                 type: TypeLike | None = None, space: SpaceLike | None = None,
                 sem: SemLike | None = None, scope: ScopeLike | None = None,
                 dst: Reg | None = None) -> Reg:
        """`atom.cas`: stores `value` where memory holds `compare`; returns the old value."""
        t = _type_of("atom", "cas", addr, (compare, value, dst), type)
        d = dst if dst is not None else self.reg(t)
        sp = _space_of("atom", addr, space)
        # As in atom: sem and scope by name.
        self.emit(AtomCas(t, d, addr, compare, value, sp, sem, scope))  # type: ignore[arg-type]
        return d

    def red(self, op: AtomOp | str, addr: AddrLike, b: Value | Sequence[Value], *,
            type: TypeLike | None = None, space: SpaceLike | None = None,
            sem: SemLike | None = None, scope: ScopeLike | None = None,
            cache_policy: Reg | None = None) -> None:
        """`red.op`: the reduction without a result (cheaper than atom when none is needed).

        `b` a tuple or list of 2, 4 or 8 values is the vector form (`red.global.add.v4.f32
        [a], {b0, b1, b2, b3};`, PTX 8.1, sm_90; see `Red` for the op/type/width table).
        `cache_policy=` (a createpolicy register) adds `.L2::cache_hint`."""
        vector = isinstance(b, tuple | list)
        items = tuple(b) if isinstance(b, tuple | list) else (b,)
        t = _type_of("red", op, addr, items, type)
        sp = _space_of("red", addr, space)
        value = items if vector else b
        # As in atom: op, sem and scope by name.
        self.emit(Red(op, t, addr, value, sp, sem, scope,  # type: ignore[arg-type]
                      cache_policy))
