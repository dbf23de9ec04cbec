"""The `Kernel` builder methods of `ptxdsl.instructions.memory`'s instructions: `k.ld`,
`k.ld_param`, `k.st`, `k.tensormap_addr`, `k.copy`.

A mixin of `ptxdsl.kernel.Kernel`; the instruction classes it emits know nothing of the
kernel (docs/CONTRIBUTING.md, Layers).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, overload

from ..errors import BuildError, OperandError
from ..instructions.base import _given, infer_type, int_like
from ..instructions.memory import Ld, St, _space_of
from ..kernel_core import MAX_STATIC_SHARED
from ..kernel_host import KernelHost
from ..operands import Addr, AddrLike, IntLike, Reg, Symbol, Value, check_owned
from ..types import ScalarType, ScopeLike, SemLike, SpaceLike, StateSpace, TypeLike, scalar_type


class MemoryOps(KernelHost):
    """Kernel builder methods for loads, stores and copies."""

    @overload
    def ld(self, addr: AddrLike, *, type: TypeLike | None = None,
           space: SpaceLike | None = None, vec: Literal[1] = 1,
           dst: Reg | None = None, sem: SemLike | None = None,
           scope: ScopeLike | None = None, nc: bool = False, l1: str | None = None,
           prefetch: str | None = None, cache_policy: Reg | None = None) -> Reg: ...
    @overload
    def ld(self, addr: AddrLike, *, type: TypeLike | None = None,
           space: SpaceLike | None = None, vec: Literal[2, 4, 8],
           dst: tuple[Reg, ...] | list[Reg] | None = None, sem: SemLike | None = None,
           scope: ScopeLike | None = None, nc: bool = False, l1: str | None = None,
           prefetch: str | None = None, cache_policy: Reg | None = None) -> tuple[Reg, ...]: ...
    @overload
    def ld(self, addr: AddrLike, *, type: TypeLike | None = None,
           space: SpaceLike | None = None, vec: IntLike,
           dst: Reg | tuple[Reg, ...] | list[Reg] | None = None, sem: SemLike | None = None,
           scope: ScopeLike | None = None, nc: bool = False, l1: str | None = None,
           prefetch: str | None = None,
           cache_policy: Reg | None = None) -> Reg | tuple[Reg, ...]: ...

    def ld(self, addr: AddrLike, *, type: TypeLike | None = None, space: SpaceLike | None = None,
           vec: IntLike = 1, dst: Reg | tuple[Reg, ...] | list[Reg] | None = None,
           sem: SemLike | None = None, scope: ScopeLike | None = None, nc: bool = False,
           l1: str | None = None, prefetch: str | None = None,
           cache_policy: Reg | None = None) -> Reg | tuple[Reg, ...]:
        """Load from `addr`; the space defaults to the symbol's (or the register's known one).

        `vec=2/4/8` returns a tuple of registers (`ld.v2`/`ld.v4`; `.v8` of a 32-bit type
        and `.v4` of a 64-bit type are 256-bit loads: .global only, PTX 8.8, sm_100+).
        `l1='evict_last'` etc., `prefetch='128B'`, `cache_policy=` (a createpolicy register)
        add the cache qualifiers (global or generic addresses only).
        """
        sp = _space_of(addr, space)
        t = scalar_type(type) if type is not None else None
        if t is None:
            base = addr.base if isinstance(addr, Addr) else addr
            t = base.type if isinstance(base, Symbol) and base.count == 1 else None
        if t is None:
            raise BuildError("ld: pass type=... (the address does not say what it holds)")
        if dst is None:
            # vec is an int here: the kernel's wrapper has checked it (kernel._check_ld_vec)
            dst = self.reg(t) if vec == 1 else tuple(self.reg(t) for _ in range(int(vec)))
        elif isinstance(dst, list):
            dst = tuple(dst)
        # Ld takes sem, scope, l1 and prefetch by name too and checks them (its fields are
        # typed as the members it makes of them).
        self.emit(Ld(sp, t, dst, addr, sem, scope, nc, l1, prefetch,  # type: ignore[arg-type]
                     cache_policy))
        return dst

    def ld_param(self, p: Symbol) -> Reg:
        """Read a kernel parameter (`ld.param.type`); a .pred parameter becomes a predicate."""
        if not isinstance(p, Symbol) or p.space is not StateSpace.param:
            raise OperandError("ld_param", "p", "a kernel parameter (k.param(...), "
                               "k.param_ptr(...))", _given(p))
        if getattr(p, "kind", "scalar") == "tensormap":
            raise BuildError(f"parameter {p.name} is a tensor map: take its address with "
                             "k.tensormap_addr(...) instead of loading it")
        r = self.ld(p, type=p.type, space=StateSpace.param)
        if getattr(p, "is_bool", False):
            return self.setp("ne", r, 0)
        if getattr(p, "kind", "") == "pointer":
            r.space = StateSpace.generic  # cudaMalloc pointers are generic addresses
        return r

    def st(self, addr: AddrLike, value: Value | Sequence[Value], *, type: TypeLike | None = None,
           space: SpaceLike | None = None, sem: SemLike | None = None,
           scope: ScopeLike | None = None, l1: str | None = None,
           cache_policy: Reg | None = None) -> None:
        """Store `value` (a tuple for .v2/.v4) to `addr`; `l1=` and `cache_policy=` as for ld."""
        sp = _space_of(addr, space)
        items = tuple(value) if isinstance(value, tuple | list) else (value,)
        t = scalar_type(type) if type else infer_type("st", *items)
        v = items if len(items) > 1 else items[0]
        # St takes sem, scope and l1 by name too and checks them (as Ld does).
        self.emit(St(sp, t, addr, v, sem, scope, l1, cache_policy))  # type: ignore[arg-type]

    def tensormap_addr(self, p: Symbol) -> Reg:
        """The generic address of a by-value tensor-map parameter: `mov.b64` + `cvta.param.u64`.

        A raw param-space address assembles but faults at run time (digest pitfall 11).
        """
        if getattr(p, "kind", None) != "tensormap":
            raise OperandError("tensormap_addr", "p", "a parameter from k.param_tensormap()",
                               repr(p))
        check_owned("tensormap_addr", self, p=p)
        raw = self.mov(p, type=ScalarType.b64)
        return self.cvta(raw, StateSpace.param)

    def copy(self, dst: AddrLike, src: AddrLike, nbytes: IntLike, *,
             dst_space: SpaceLike | None = None, src_space: SpaceLike | None = None,
             width: IntLike = 8) -> None:
        """Copy `nbytes` with ld/st pairs of `width` bytes (e.g. a 128-B tensor map from a
        parameter into shared memory: 16 x ld.param.b64 + st.shared.b64), unrolled: `nbytes`
        at most the largest shared memory (227 KiB)."""
        w, n = int_like(width), int_like(nbytes)
        t = {4: ScalarType.b32, 8: ScalarType.b64, 16: ScalarType.b64}.get(w) \
            if type(w) is int else None
        if t is None:
            raise OperandError("copy", "width", "4, 8 or 16 (bytes per ld/st)", _given(width))
        # one ld/st pair per `width` bytes, unrolled: a count past the largest shared memory
        # is a slip (10**9 would build instructions for minutes), not a copy to unroll
        if type(n) is not int or n < 0 or n % w or n > MAX_STATIC_SHARED:
            raise OperandError("copy", "nbytes", f"a multiple of width={w} from 0 to "
                               f"{MAX_STATIC_SHARED} (the copy is unrolled into ld/st pairs)",
                               _given(nbytes))
        ssp, dsp = _space_of(src, src_space), _space_of(dst, dst_space)
        src_a = src if isinstance(src, Addr) else Addr(src)
        dst_a = dst if isinstance(dst, Addr) else Addr(dst)
        vec = 2 if w == 16 else 1
        for off in range(0, n, w):
            r = self.ld(src_a + off, type=t, space=ssp, vec=vec)
            self.st(dst_a + off, r, type=t, space=dsp)
