"""Operands: registers, predicates, immediates, special registers, symbols, addresses, vectors.

Registers compare by identity (`==` on a register builds a `setp`, see `Reg.__eq__`), so they
are plain attrs classes with `eq=False`.
"""

from __future__ import annotations

import math
import re
import struct
from typing import TYPE_CHECKING, Any

import attrs

from .errors import BuildError, OperandError
from .types import ScalarType, StateSpace

if TYPE_CHECKING:  # pragma: no cover
    from .kernel import Kernel

# PTX identifiers (ISA §4.4): followsym = [a-zA-Z0-9_$]; an identifier starts with a letter,
# or with _ $ % followed by at least one followsym. A leading % is refused here although PTX
# allows it: ptxdsl writes registers as '%' + name, and a user '%r1' or '%tid' would collide
# with an automatic register or a special register.
_IDENT = re.compile(r"(?:[a-zA-Z][a-zA-Z0-9_$]*|[_$][a-zA-Z0-9_$]+)\Z")
# Words that would be read as something else if used as a bare name.
_RESERVED = frozenset({"_", "WARP_SZ", "tid", "ntid", "ctaid", "nctaid", "laneid", "warpid"})


def check_identifier(name: str, what: str) -> str:
    """Refuse anything but a plain PTX identifier, so no user string is pasted into PTX as is."""
    if not isinstance(name, str) or not _IDENT.match(name) or name in _RESERVED:
        raise BuildError(f"{what} name {name!r} is not a valid PTX identifier "
                         "(letters, digits, '_' and '$'; starting with a letter, or with '_'/'$' "
                         "followed by at least one more character)")
    if len(name) > 1024:
        raise BuildError(f"{what} name is too long ({len(name)} characters)")
    return name


class Operand:
    """Anything that renders as PTX operand text."""

    def render(self) -> str:  # pragma: no cover - abstract
        raise NotImplementedError


@attrs.define(eq=False, repr=False)
class Reg(Operand):
    """A virtual register of one kernel.

    `space` is a hint about what the register holds when it is an address (set by `mov` of a
    symbol or by `cvta`); the static checker uses it, PTX does not see it.
    """

    type: ScalarType
    name: str
    kernel: Kernel | None = None
    space: StateSpace | None = None

    def render(self) -> str:
        return "%" + self.name

    def __repr__(self) -> str:
        return f"Reg(%{self.name}: {self.type.value})"

    # Arithmetic sugar: each operator emits exactly one instruction into the owning kernel.
    def _k(self) -> Kernel:
        if self.kernel is None:
            raise BuildError(f"register %{self.name} belongs to no kernel")
        return self.kernel

    def __add__(self, o): return self._k().add(self, o)
    def __radd__(self, o): return self._k().add(o, self, type=self.type)
    def __sub__(self, o): return self._k().sub(self, o)
    def __rsub__(self, o): return self._k().sub(o, self, type=self.type)
    def __mul__(self, o): return self._k().mul(self, o)
    def __rmul__(self, o): return self._k().mul(o, self, type=self.type)
    def __truediv__(self, o): return self._k().div(self, o)
    def __floordiv__(self, o): return self._k().div(self, o)
    def __mod__(self, o): return self._k().rem(self, o)
    def __and__(self, o): return self._k().and_(self, o)
    def __or__(self, o): return self._k().or_(self, o)
    def __xor__(self, o): return self._k().xor(self, o)
    def __lshift__(self, o): return self._k().shl(self, o)
    def __rshift__(self, o): return self._k().shr(self, o)
    def __neg__(self): return self._k().neg(self)

    def __invert__(self):
        if self.type is ScalarType.pred:
            return NegPred(self)
        return self._k().not_(self)

    def __lt__(self, o): return self._k().setp("lt", self, o)
    def __le__(self, o): return self._k().setp("le", self, o)
    def __gt__(self, o): return self._k().setp("gt", self, o)
    def __ge__(self, o): return self._k().setp("ge", self, o)
    def __eq__(self, o): return self._k().setp("eq", self, o)  # type: ignore[override]
    def __ne__(self, o): return self._k().setp("ne", self, o)  # type: ignore[override]
    __hash__ = object.__hash__

    def __bool__(self):
        raise BuildError(f"register %{self.name} has no Python truth value; use k.if_(...) "
                         "or a predicate to branch on it at run time")


@attrs.frozen
class NegPred(Operand):
    """`!p`: a negated predicate, usable as a guard (`@!p`) or where PTX allows `!p`."""

    reg: Reg

    def render(self) -> str:
        return "!" + self.reg.render()

    def __invert__(self) -> Reg:
        return self.reg


@attrs.frozen
class Imm(Operand):
    """An immediate of a given PTX type; floats render exactly as 0f/0d hex."""

    value: int | float
    type: ScalarType

    def render(self) -> str:
        if self.type is ScalarType.f32:
            return f"0f{struct.unpack('>I', struct.pack('>f', float(self.value)))[0]:08X}"
        if self.type is ScalarType.f64:
            return f"0d{struct.unpack('>Q', struct.pack('>d', float(self.value)))[0]:016X}"
        return str(int(self.value))


def int_range(t: ScalarType) -> tuple[int, int]:
    """Accepted immediate range: unsigned for u, signed for s, either spelling for b."""
    bits = t.bits
    if t.kind == "u":
        return 0, (1 << bits) - 1
    if t.kind == "s":
        return -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    return -(1 << (bits - 1)), (1 << bits) - 1


_RANGES: dict[ScalarType, tuple[int, int]] = {}
_IMM_CACHE: dict[tuple[int, ScalarType], Imm] = {}


def _nm(insn: Any) -> str:
    return insn if isinstance(insn, str) else getattr(insn, "name", str(insn))


def make_imm(insn: str, operand: str, value: Any, t: ScalarType) -> Imm:
    """Turn a Python number into an immediate of type `t`, range-checked."""
    if type(value) is int:  # the common case: small integer immediates, shared (immutable)
        hit = _IMM_CACHE.get((value, t))
        if hit is not None:
            return hit
        if t.is_int or t.kind == "b":
            lo, hi = _RANGES.get(t) or _RANGES.setdefault(t, int_range(t))
            if lo <= value <= hi:
                imm = Imm(value, t)
                if len(_IMM_CACHE) < 65536:
                    _IMM_CACHE[value, t] = imm
                return imm
    if isinstance(value, bool) or not isinstance(value, int | float):
        try:
            import numpy as np
            if isinstance(value, np.generic):
                value = value.item()
        except ImportError:  # pragma: no cover
            pass
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise OperandError(_nm(insn), operand, f"a register or immediate of type .{t.value}",
                           f"{type(value).__name__} {value!r}")
    if t.is_float:
        if t not in (ScalarType.f32, ScalarType.f64):
            raise OperandError(_nm(insn), operand,
                               "a register (PTX has no immediates of this type)",
                               f"immediate {value!r} for .{t.value}")
        if t is ScalarType.f32 and math.isfinite(value) and abs(value) > 3.4028234663852886e38:
            raise OperandError(_nm(insn), operand, "a value representable as .f32", repr(value))
        return Imm(float(value), t)
    if t is ScalarType.pred:
        raise OperandError(_nm(insn), operand, "a predicate register", f"immediate {value!r}")
    if isinstance(value, float):
        if not value.is_integer():
            raise OperandError(_nm(insn), operand, f"an integer immediate for .{t.value}",
                               repr(value))
        value = int(value)
    lo, hi = int_range(t)
    if not lo <= value <= hi:
        raise OperandError(_nm(insn), operand, f"an immediate in [{lo}, {hi}] for .{t.value}",
                           value)
    return Imm(value, t)


@attrs.frozen
class SpecialReg(Operand):
    """A read-only special register such as %tid.x; PTX only allows it as a mov/cvt source."""

    name: str
    type: ScalarType
    requires_sm: int = 75
    requires_version: str = "6.3"

    def render(self) -> str:
        return "%" + self.name


@attrs.frozen
class Sink(Operand):
    """The `_` sink destination."""

    def render(self) -> str:
        return "_"


SINK = Sink()


@attrs.define(eq=False)
class Symbol(Operand):
    """A named variable: kernel parameter, shared/global/const array, or a label-free symbol."""

    name: str
    space: StateSpace
    type: ScalarType
    count: int | None = 1          # elements; None for an unsized .extern array
    align: int | None = None
    kernel: Kernel | None = None  # None for module scope

    def render(self) -> str:
        return self.name

    @property
    def size(self) -> int:
        return self.type.bytes * (self.count or 0)

    def __repr__(self) -> str:
        return f"Symbol({self.space.value} {self.name})"


@attrs.frozen
class Label(Operand):
    name: str
    kernel: Any = attrs.field(eq=False, default=None)

    def render(self) -> str:
        return self.name


@attrs.frozen
class Addr(Operand):
    """`[base]` or `[base+offset]`; base is a register, a symbol or an absolute integer."""

    base: Reg | Symbol | int
    offset: int = 0

    def render(self) -> str:
        base = str(self.base) if isinstance(self.base, int) else self.base.render()
        if self.offset:
            # PTX spells a negative offset `[r+-16]`: ptxas refuses `[r-16]` as a syntax error.
            return f"[{base}+{self.offset}]"
        return f"[{base}]"

    def __add__(self, off: int) -> Addr:
        return Addr(self.base, self.offset + int(off))

    @property
    def width(self) -> int:
        """Bits of the address expression: 32/64 for registers, 0 when it depends on the space."""
        if isinstance(self.base, Reg):
            return self.base.type.bits
        return 0


@attrs.frozen
class Vec(Operand):
    """A brace-enclosed vector operand `{a, b, ...}` of registers or immediates."""

    items: tuple[Operand, ...]

    def render(self) -> str:
        return "{" + ", ".join(i.render() for i in self.items) + "}"


def registers_in(value: Any):
    """Every register mentioned by an operand value (recursing into addresses and vectors)."""
    if isinstance(value, Reg):
        yield value
    elif isinstance(value, NegPred):
        yield value.reg
    elif isinstance(value, Addr):
        yield from registers_in(value.base)
    elif isinstance(value, Vec):
        for item in value.items:
            yield from registers_in(item)
    elif isinstance(value, tuple | list):
        for item in value:
            yield from registers_in(item)
