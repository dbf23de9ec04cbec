"""The `Kernel` builder methods of `ptxdsl.instructions.move`'s instructions: `k.mov`, `k.addr_of`,
`k.isspacep`, `k.cvta`, `k.generic_addr`, `k.cvt`.

A mixin of `ptxdsl.kernel.Kernel`; the instruction classes it emits know nothing of the
kernel (docs/CONTRIBUTING.md, Layers).
"""

from __future__ import annotations

from ..errors import OperandError
from ..instructions.base import infer_type
from ..instructions.move import Cvt, Cvta, Isspacep, Mov, Rounding, SpaceWindow
from ..kernel_host import KernelHost
from ..operands import IntLike, Reg, SpecialReg, Symbol, Value
from ..provenance import establish
from ..types import ScalarType, SpaceLike, StateSpace, TypeLike, scalar_type


class MoveOps(KernelHost):
    """Kernel builder methods: mov, isspacep, cvta, cvt."""

    def mov(self, a: Value | Symbol | SpecialReg, *, type: TypeLike | None = None,
            dst: Reg | None = None) -> Reg:
        """`mov` into `dst` (a fresh register by default); a symbol gives its address."""
        if dst is not None and not isinstance(dst, Reg):
            raise OperandError("mov", "dst", "a register",
                               f"{dst.__class__.__name__} {dst!r}"[:100])
        if type is not None:
            type = scalar_type(type)
        if isinstance(a, Symbol):
            t = type or (ScalarType.u32 if a.space.is_shared else ScalarType.u64)
        else:
            t = type or (dst.type if dst is not None else infer_type("mov", a))
        d = dst if dst is not None else self.reg(t)
        self.emit(Mov(t, d, a))
        if isinstance(a, Symbol) and dst is None:
            d.space = a.space
            establish(self, d, a)   # a fresh register: it holds the symbol's address only
        return d

    def addr_of(self, sym: Symbol, *, bits: IntLike = 32) -> Reg:
        """The address of a symbol in its own space (32-bit for shared by default)."""
        return self.mov(sym, type=ScalarType.u32 if bits == 32 else ScalarType.u64)

    def cvta(self, a: Reg, space: SpaceLike, *, to: bool = False, dst: Reg | None = None) -> Reg:
        """`cvta.space.u64` (space -> generic) or, with to=True, `cvta.to.space.u64`; a 32-bit
        `a` gives the `.u32` form, which ptxas takes up to sm_89 only (`types.addr32`: a
        module built or assembled for sm_90 or later refuses it by its line)."""
        size = ScalarType.u32 if isinstance(a, Reg) and a.type.bits == 32 else ScalarType.u64
        d = dst if dst is not None else self.reg(ScalarType.u64 if size.bits == 64 else size)
        # Cvta takes the space by name too and checks it (its field is typed as the member).
        insn = self.emit(Cvta(space, to, d, a, size))  # type: ignore[arg-type]
        if dst is None:
            d.space = StateSpace.generic if not to else insn.space
        return d

    def isspacep(self, space: SpaceWindow | SpaceLike, addr: Reg) -> Reg:
        """`isspacep.space p, addr;`: a fresh predicate, true where generic address `addr` falls
        in the `space` window ("const", "global", "local", "shared", "shared::cta",
        "shared::cluster", "param", "param::entry"). A 32-bit `addr` is taken up to sm_89 only
        (`types.addr32`: a module built or assembled for sm_90 or later refuses it by its
        line)."""
        p = self.reg(ScalarType.pred)
        # Isspacep takes the space by name too and checks it (its field is typed as the member).
        self.emit(Isspacep(space, p, addr))  # type: ignore[arg-type]
        return p

    def generic_addr(self, sym: Symbol) -> Reg:
        """A 64-bit generic address of a symbol: `mov.u64` + `cvta.<space>.u64`."""
        if not isinstance(sym, Symbol):
            raise OperandError("generic_addr", "sym", "a symbol (a shared array, a module "
                               "variable, a parameter)", f"{type(sym).__name__} {sym!r}"[:100])
        a = self.mov(sym, type=ScalarType.u64)
        return self.cvta(a, sym.space)

    def cvt(self, a: Value | SpecialReg, dtype: ScalarType, *, atype: TypeLike | None = None,
            rnd: Rounding | str | None = None, ftz: bool = False, sat: bool = False,
            dst: Reg | None = None) -> Reg:
        """`cvt{.rnd}{.ftz}{.sat}.dtype.atype d, a;` (`atype` defaults to the source's type)."""
        at = scalar_type(atype) if atype else infer_type("cvt", a)
        d = dst if dst is not None else self.reg(dtype)
        # Cvt takes the rounding by name too and checks it (its field is typed as the member).
        self.emit(Cvt(dtype, at, d, a, rnd, ftz, sat))  # type: ignore[arg-type]
        return d
