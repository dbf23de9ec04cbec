"""Operands: registers, predicates, immediates, special registers, symbols, addresses, vectors.

Registers compare by identity (`==` on a register builds a `setp`, see `Reg.__eq__`), so they
are plain attrs classes with `eq=False`.
"""

from __future__ import annotations

import math
import operator
import re
import struct
from collections.abc import Iterator
from typing import Any, NoReturn, Protocol, SupportsFloat, SupportsIndex, TypeAlias, cast

import attrs

from .errors import BuildError, OperandError, refuse_assignment
from .types import Requires, ScalarType, StateSpace, req

# PTX identifiers (ISA §4.4): followsym = [a-zA-Z0-9_$]; an identifier starts with a letter,
# or with _ $ % followed by at least one followsym. A leading % is refused here although PTX
# allows it: ptxdsl writes registers as '%' + name, and a user '%r1' or '%tid' would collide
# with an automatic register or a special register.
_IDENT = re.compile(r"(?:[a-zA-Z][a-zA-Z0-9_$]*|[_$][a-zA-Z0-9_$]+)\Z")
# Words that would be read as something else if used as a bare name.
_RESERVED = frozenset({"_", "WARP_SZ", "tid", "ntid", "ctaid", "nctaid", "laneid", "warpid"})


def plain_str(value: Any) -> Any:
    """A `str` subclass's value as a plain `str` (a `class N(str, Enum)` member, a subclass with
    its own `__str__`/`__format__`/`__eq__`): names are checked and rendered as that value, so
    what the PTX says is what was checked. Anything else is returned as it is."""
    if type(value) is not str and isinstance(value, str):
        return str.__str__(value)   # the characters themselves: no method of the subclass runs
    return value


# Measured with nvJitLink 13: an entry named with 70,001 characters assembles, one with 100,001
# aborts the process (malloc: invalid size). nvcc's mangled CUTLASS kernel names pass 1,200.
MAX_NAME = 65536


def check_identifier(name: str, what: str) -> str:
    """Refuse anything but a plain PTX identifier, so no user string is pasted into PTX as is.
    Returns the name as a plain `str` (see `plain_str`): use the returned value."""
    name = plain_str(name)
    if not isinstance(name, str) or not _IDENT.match(name) or name in _RESERVED:
        raise BuildError(f"{what} name {name!r} is not a valid PTX identifier "
                         "(letters, digits, '_' and '$'; starting with a letter, or with '_'/'$' "
                         "followed by at least one more character)")
    if len(name) > MAX_NAME:
        raise BuildError(f"{what} name is too long ({len(name)} characters; at most "
                         f"{MAX_NAME}: past that nvJitLink 13 aborts the process)")
    return name


# Every PTX special register (ISA §10), without the '%'; `tid` stands for tid.x/.y/.z. The one
# list both the register namer (a named register renders as '%' + name, so one called `clock`
# would shadow %clock) and the inline-asm checker (which lets a template name these) use.
SPECIAL_REGISTER_NAMES = frozenset("""
    tid ntid ctaid nctaid clusterid nclusterid cluster_ctaid cluster_nctaid laneid warpid
    nwarpid smid nsmid gridid is_explicit_cluster cluster_ctarank cluster_nctarank lanemask_eq
    lanemask_le lanemask_lt lanemask_ge lanemask_gt clock clock_hi clock64 globaltimer
    globaltimer_lo globaltimer_hi total_smem_size aggr_smem_size dynamic_smem_size
    reserved_smem_offset_begin reserved_smem_offset_end reserved_smem_offset_cap
    reserved_smem_offset_0 reserved_smem_offset_1 current_graph_exec""".split()
    + [f"pm{i}{w}" for i in range(8) for w in ("", "_64")] + [f"envreg{i}" for i in range(32)])

# The special registers `k.read_special` reads: PTX name -> (type, requirement). Every key's
# base name (before '.x') is in SPECIAL_REGISTER_NAMES (a test keeps the two in step).
_SM90_SREG = req("7.8", 90)
READABLE_SPECIAL_REGISTERS: dict[str, tuple[ScalarType, Requires]] = {}
for _b in ("tid", "ntid", "ctaid", "nctaid"):
    for _a in "xyz":
        READABLE_SPECIAL_REGISTERS[f"{_b}.{_a}"] = (ScalarType.u32, req("6.3"))
for _b in ("clusterid", "nclusterid", "cluster_ctaid", "cluster_nctaid"):
    for _a in "xyz":
        READABLE_SPECIAL_REGISTERS[f"{_b}.{_a}"] = (ScalarType.u32, _SM90_SREG)
READABLE_SPECIAL_REGISTERS.update({
    "laneid": (ScalarType.u32, req("6.3")), "warpid": (ScalarType.u32, req("6.3")),
    "nwarpid": (ScalarType.u32, req("6.3")), "smid": (ScalarType.u32, req("6.3")),
    "clock": (ScalarType.u32, req("6.3")), "clock64": (ScalarType.u64, req("6.3")),
    "globaltimer": (ScalarType.u64, req("6.3")),
    "cluster_ctarank": (ScalarType.u32, _SM90_SREG),
    "cluster_nctarank": (ScalarType.u32, _SM90_SREG),
    "is_explicit_cluster": (ScalarType.pred, _SM90_SREG),
    "dynamic_smem_size": (ScalarType.u32, req("6.3")),
    "total_smem_size": (ScalarType.u32, req("6.3")),
    # The rest of cuda::ptx's get_sreg set (instructions/sreg.py has one builder per name).
    "nsmid": (ScalarType.u32, req("6.3")), "gridid": (ScalarType.u64, req("6.3")),
    "clock_hi": (ScalarType.u32, req("6.3")),
    "globaltimer_lo": (ScalarType.u32, req("6.3")),
    "globaltimer_hi": (ScalarType.u32, req("6.3")),
    **{f"lanemask_{_m}": (ScalarType.u32, req("6.3")) for _m in ("eq", "le", "lt", "ge", "gt")},
    "aggr_smem_size": (ScalarType.u32, req("8.1", 90)),
    "current_graph_exec": (ScalarType.u64, req("8.0")),
    # Read by library code rather than cuda::ptx: the driver's environment registers
    # (cooperative_groups' grid.sync() finds its grid barrier's workspace in %envreg1/2),
    # the performance counters, and the reserved shared-memory window.
    **{f"envreg{_i}": (ScalarType.b32, req("6.3")) for _i in range(32)},
    **{f"pm{_i}": (ScalarType.u32, req("6.3")) for _i in range(8)},
    **{f"pm{_i}_64": (ScalarType.u64, req("6.3")) for _i in range(8)},
    **{f"reserved_smem_offset_{_s}": (ScalarType.b32, req("7.6"))
       for _s in ("begin", "end", "cap", "0", "1")},
})


def check_register_name(name: str) -> str:
    """A register name: a PTX identifier that is not a special register's name (returned as a
    plain `str`)."""
    name = plain_str(name)
    if type(name) is str and name in SPECIAL_REGISTER_NAMES:
        raise BuildError(f"register name {name!r} is the name of the PTX special register "
                         f"%{name}: the register would shadow it; choose another name")
    return check_identifier(name, "register")


_DECL_TYPE = {ScalarType.bf16: "b16", ScalarType.bf16x2: "b32"}


def decl_type(t: ScalarType) -> str:
    """The type a variable of type `t` is declared with: PTX declares no .bf16/.bf16x2
    variables (a syntax error), so they take the bit type of their size."""
    return _DECL_TYPE.get(t) or t.value


# The registers a kernel names itself (%r12, %rs3, ...), declared per prefix (kernel_core).
AUTO_DECL = {"p": "pred", "rs": "b16", "r": "b32", "rd": "b64", "q": "b128", "h": "b16",
             "f": "f32", "fd": "f64", "rc": "b8"}
AUTO_NAME = re.compile(r"(?:p|rs|r|rd|q|h|f|fd|rc)\d+\Z")


def declared_type(r: Reg) -> str:
    """The type register `r` is declared with: an automatic register its prefix's (a bit type
    for integer and packed values), a named one its own (`decl_type`). Some operands ptxas
    checks against the declaration, not against the value's type."""
    if AUTO_NAME.match(r.name):
        return AUTO_DECL[r.name.rstrip("0123456789")]
    return decl_type(r.type)


def check_shared_type(what: str, name: Any, t: Any) -> None:
    """A type a memory variable can have (ptxas: .pred "can only be used to define scalar
    register variables")."""
    if type(t) is not ScalarType or t is ScalarType.pred:
        raise OperandError(what, name if isinstance(name, str) else "?",
                           "a data type such as t.u32 (not .pred)", _show(t))


def as_int(value: Any) -> int | None:
    """`value` as a Python int when it is an integer (a numpy integer included, bool not);
    None otherwise."""
    if type(value) is int:
        return value
    if isinstance(value, bool) or not hasattr(value, "__index__") \
            or type(value).__name__ == "bool_":
        return None
    try:
        return operator.index(value)
    except TypeError:
        return None



def _show(value: Any) -> str:
    try:
        text = repr(value)
    except Exception:  # noqa: BLE001 - a hostile __repr__ must not hide the real error
        text = "<unprintable>"
    return f"{type(value).__name__} {text[:80]}{'...' if len(text) > 80 else ''}"


def _fail(what: str, rule: str, given: Any) -> NoReturn:
    raise BuildError(f"{what}: {rule}, got {_show(given)}")


def _check_type(what: str, value: Any) -> None:
    if type(value) is not ScalarType:
        _fail(what, "the type must be a ptxdsl type such as t.u32", value)


def _check_space(what: str, value: Any, optional: bool = False) -> None:
    if not (type(value) is StateSpace or optional and value is None):
        _fail(what, "the state space must be a ptxdsl StateSpace", value)


_REG_NAMES_OK: set[str] = set()   # names already checked (automatic names recur per kernel)


def _check_reg_name(name: Any) -> str:
    if type(name) is str and name in _REG_NAMES_OK:
        return name
    name = check_register_name(name)
    if len(_REG_NAMES_OK) < 1 << 16:
        _REG_NAMES_OK.add(name)
    return name


# Address offsets: ptxas takes any 64-bit value in `[reg+imm]` (checked with ptxas 13.0:
# +2^63-1 and -2^63 assemble); anything beyond cannot be encoded.
OFFSET_RANGE = (-(1 << 63), (1 << 64) - 1)


class Operand:
    """Anything that renders as PTX operand text."""

    def render(self) -> str:  # pragma: no cover - abstract
        """The operand as PTX writes it (`%r1`, `0f3F800000`, `[%rd1+16]`, ...)."""
        raise NotImplementedError


def _renamed(obj: Any, _attribute: Any, name: str) -> str:
    """A rename (`r.name = ...`, after the converter checked the name) is claimed from the
    kernel or module that declared `obj`, as its first name was: two declarations of one name,
    or a renamed automatic register that no `.reg %r<N>` declares, are invalid PTX."""
    owner = obj.kernel if obj.kernel is not None else getattr(obj, "module", None)
    if owner is not None and name != obj.name:
        owner._rename(obj, obj.name, name)
    return name


def _fixed(obj: Any, attribute: Any, value: Any) -> Any:
    """What a declared register or variable is (its type, space, extent, alignment, kernel)
    was checked by every instruction built with it: changing it afterwards would emit what
    nothing checked (an automatic register retyped, a tile's array shrunk or realigned)."""
    if obj.kernel is not None or getattr(obj, "module", None) is not None:
        raise BuildError(f"{type(obj).__name__} {obj.name}: its .{attribute.name} cannot change "
                         "once it is declared (what was built with it was checked against "
                         "it); declare another")
    return value


def _declared(obj: Any, what: str, maker: str) -> None:
    """A register or variable that claims a kernel must be one the kernel declared (its
    builders claim the name first): one made directly (`Reg(t.u32, "x", k)`) passed the
    instructions' kernel checks and reached the PTX undeclared."""
    names = getattr(obj.kernel, "_names", None)
    if names is not None and obj.name not in names:
        raise BuildError(f"{what} {obj.name!r} of kernel {obj.kernel.name}: it is not declared "
                         f"in that kernel; make it with {maker}")


class Owner(Protocol):
    """The kernel that declared a register or symbol (a `KernelCore`), as far as operands need
    it: operands sit below the builder and import nothing of it (docs/CONTRIBUTING.md, Layers).
    """

    @property
    def name(self) -> str: ...


class Arith(Protocol):
    """The builders a register's operators call (`r + 1` is `k.add(r, 1)`); `Kernel` has them,
    which mypy checks in ptxdsl/kernel.py."""

    def add(self, a: Any, b: Any, *, type: ScalarType | None = None) -> Reg: ...
    def sub(self, a: Any, b: Any, *, type: ScalarType | None = None) -> Reg: ...
    def mul(self, a: Any, b: Any, *, type: ScalarType | None = None) -> Reg: ...
    def div(self, a: Any, b: Any) -> Reg: ...
    def rem(self, a: Any, b: Any) -> Reg: ...
    def and_(self, a: Any, b: Any) -> Reg: ...
    def or_(self, a: Any, b: Any) -> Reg: ...
    def xor(self, a: Any, b: Any) -> Reg: ...
    def shl(self, a: Any, b: Any) -> Reg: ...
    def shr(self, a: Any, b: Any) -> Reg: ...
    def neg(self, a: Any) -> Reg: ...
    def not_(self, a: Any) -> Reg: ...
    def setp(self, cmp: str, a: Any, b: Any) -> Reg: ...


@attrs.frozen(eq=False)
class Origin:
    """`symbol`'s address plus `offset` bytes, held by a register (`Reg.origin`; see
    `ptxdsl.provenance`); `labels`: the kernel's count of placed labels when the chain's first
    `mov` was emitted; `parent`: the register this one was computed from (with what it held
    then), which must keep it for the claim to hold."""

    symbol: Symbol
    offset: int
    labels: int
    parent: Reg | None = None
    parent_origin: Origin | None = None

    def describe(self) -> str:
        return f"{self.symbol.name}{self.offset:+d}" if self.offset else self.symbol.name


@attrs.define(eq=False, repr=False)
class Reg(Operand):
    """A virtual register of one kernel.

    `space` is a hint about what the register holds when it is an address (set by `mov` of a
    symbol or by `cvta`); the static checker uses it, PTX does not see it. `origin` says which
    symbol's address (plus a constant) it holds, while that is certain (`ptxdsl.provenance`).
    """

    type: ScalarType = attrs.field(validator=lambda _s, _a, v: _check_type("Reg", v),
                                   on_setattr=attrs.setters.pipe(_fixed, attrs.setters.validate))
    # A converter, not a validator: the name is kept as the plain str that was checked.
    name: str = attrs.field(converter=_check_reg_name,
                            on_setattr=attrs.setters.pipe(attrs.setters.convert, _renamed))
    kernel: Owner | None = attrs.field(default=None, on_setattr=_fixed)
    space: StateSpace | None = attrs.field(
        default=None, validator=lambda _s, _a, v: _check_space("Reg", v, optional=True))
    # Set by ptxdsl only (`provenance.establish`/`derive`), cleared by any write (`emit`).
    origin: Origin | None = attrs.field(default=None, init=False)

    def __attrs_post_init__(self) -> None:
        _declared(self, "register", "k.reg(type, name)")

    def render(self) -> str:
        return "%" + self.name

    @classmethod
    def _trusted(cls, type: ScalarType, name: str, kernel: Owner | None) -> Reg:
        """A register whose name and type the kernel made itself (an automatic `r12`), or
        the PTX front end read from a declaration (kernel None), built without re-checking
        them: one is made per instruction result."""
        r = object.__new__(cls)
        object.__setattr__(r, "type", type)
        object.__setattr__(r, "name", name)
        object.__setattr__(r, "kernel", kernel)
        object.__setattr__(r, "space", None)
        object.__setattr__(r, "origin", None)
        return r

    def __repr__(self) -> str:
        return f"Reg(%{self.name}: {self.type.value})"

    # Arithmetic sugar: each operator emits exactly one instruction into the owning kernel.
    def _k(self) -> Arith:
        if self.kernel is None:
            raise BuildError(f"register %{self.name} belongs to no kernel")
        # KernelCore is only ever built as part of a Kernel (registers are made by its `reg`),
        # and a Kernel has Arith's builders (mypy checks that in ptxdsl/kernel.py).
        return cast(Arith, self.kernel)

    def __add__(self, o: Any) -> Reg: return self._k().add(self, o)
    def __radd__(self, o: Any) -> Reg: return self._k().add(o, self, type=self.type)
    def __sub__(self, o: Any) -> Reg: return self._k().sub(self, o)
    def __rsub__(self, o: Any) -> Reg: return self._k().sub(o, self, type=self.type)
    def __mul__(self, o: Any) -> Reg: return self._k().mul(self, o)
    def __rmul__(self, o: Any) -> Reg: return self._k().mul(o, self, type=self.type)
    def __truediv__(self, o: Any) -> Reg: return self._k().div(self, o)
    def __floordiv__(self, o: Any) -> Reg: return self._k().div(self, o)
    def __mod__(self, o: Any) -> Reg: return self._k().rem(self, o)
    def __and__(self, o: Any) -> Reg: return self._k().and_(self, o)
    def __or__(self, o: Any) -> Reg: return self._k().or_(self, o)
    def __xor__(self, o: Any) -> Reg: return self._k().xor(self, o)
    def __lshift__(self, o: Any) -> Reg: return self._k().shl(self, o)
    def __rshift__(self, o: Any) -> Reg: return self._k().shr(self, o)
    def __neg__(self) -> Reg: return self._k().neg(self)

    def __invert__(self) -> Reg | NegPred:
        if self.type is ScalarType.pred:
            return NegPred(self)
        return self._k().not_(self)

    def __lt__(self, o: Any) -> Reg: return self._k().setp("lt", self, o)
    def __le__(self, o: Any) -> Reg: return self._k().setp("le", self, o)
    def __gt__(self, o: Any) -> Reg: return self._k().setp("gt", self, o)
    def __ge__(self, o: Any) -> Reg: return self._k().setp("ge", self, o)
    # `r == x` builds a predicate register, not a bool: unlike object.__eq__ (so ignore[override]).
    def __eq__(self, o: Any) -> Reg: return self._k().setp("eq", self, o)  # type: ignore[override]
    def __ne__(self, o: Any) -> Reg: return self._k().setp("ne", self, o)  # type: ignore[override]
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

    def __attrs_post_init__(self):
        # make_imm builds checked immediates; this refuses what a hand-built Imm(...) could
        # otherwise paste into PTX (a string, an out-of-range or non-finite-for-int value).
        t, v = self.type, self.value
        if type(v) is int and type(t) is ScalarType and (t.is_int or t.kind == "b"):
            lo, hi = _RANGES.get(t) or _RANGES.setdefault(t, int_range(t))
            if lo <= v <= hi:
                return
        _check_type("Imm", t)
        if type(v).__module__ == "numpy" and hasattr(v, "item"):   # numpy scalars
            v = v.item()
        n = as_int(v)
        if n is None and (isinstance(v, bool) or not isinstance(v, float)):
            _fail("Imm", "the value must be an int or a float", v)
        if t is ScalarType.pred:   # a 0/1 predicate immediate (wgmma's scale-d)
            if as_int(v) not in (0, 1):
                _fail("Imm", "a .pred immediate must be 0 or 1", v)
            object.__setattr__(self, "value", as_int(v))
            return
        if t.is_float and t not in (ScalarType.f32, ScalarType.f64):
            _fail("Imm", "PTX has no immediates of this type", t)
        if t.is_float:
            try:
                object.__setattr__(self, "value", float(v))
            except OverflowError:
                _fail("Imm", f"the value must be representable as .{t.value}", v)
            return
        if n is None:
            if not float(v).is_integer():
                _fail("Imm", f"an integer type (.{t.value}) needs an integral value", v)
            n = int(v)
        lo, hi = int_range(t)
        if not lo <= n <= hi:
            _fail("Imm", f"the value must be in [{lo}, {hi}] for .{t.value}", v)
        object.__setattr__(self, "value", n)

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


def _nm(insn: object) -> str:   # an instruction, or its name
    return insn if isinstance(insn, str) else getattr(insn, "name", str(insn))


def make_imm(insn: object, operand: str, value: Any, t: ScalarType) -> Imm:
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
                           _show(value))
    if t.is_float:
        if t not in (ScalarType.f32, ScalarType.f64):
            raise OperandError(_nm(insn), operand,
                               "a register (PTX has no immediates of this type)",
                               f"immediate {value!r} for .{t.value}")
        try:
            fv = float(value)
        except OverflowError:   # an int beyond the float range (e.g. 10**400)
            fv = math.inf
        if isinstance(value, int) and math.isinf(fv) or t is ScalarType.f32 \
                and math.isfinite(fv) and abs(fv) > 3.4028234663852886e38:
            raise OperandError(_nm(insn), operand, f"a value representable as .{t.value}",
                               f"an integer of {value.bit_length()} bits" if isinstance(value, int)
                               else repr(value))
        return Imm(fv, t)
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

    def __attrs_post_init__(self):
        if type(self.name) is not str or self.name.split(".")[0] not in SPECIAL_REGISTER_NAMES \
                or not re.fullmatch(r"[a-z_0-9]+(?:\.[xyz])?", self.name):
            _fail("SpecialReg", "the name must be a PTX special register such as 'tid.x'",
                  self.name)
        _check_type("SpecialReg", self.type)

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

    name: str = attrs.field(converter=lambda v: check_identifier(v, "symbol"),
                            on_setattr=attrs.setters.pipe(attrs.setters.convert, _renamed))
    space: StateSpace = attrs.field(validator=lambda _s, _a, v: _check_space("Symbol", v),
                                    on_setattr=attrs.setters.pipe(_fixed,
                                                                  attrs.setters.validate))
    type: ScalarType = attrs.field(validator=lambda _s, _a, v: _check_type("Symbol", v),
                                   on_setattr=attrs.setters.pipe(_fixed, attrs.setters.validate))
    count: int | None = attrs.field(  # elements; None for an unsized .extern array
        default=1, converter=lambda v: _count(v, "Symbol count"),
        on_setattr=attrs.setters.pipe(_fixed, attrs.setters.convert))
    align: int | None = attrs.field(default=None, converter=lambda v: _align(v, "Symbol"),
                                    on_setattr=attrs.setters.pipe(_fixed, attrs.setters.convert))
    kernel: Owner | None = attrs.field(default=None, on_setattr=_fixed)  # None: module
    loc: Any = attrs.field(default=None, kw_only=True)   # the Python line that declared it
    # The Module that declared a module-scope variable (None for a kernel's own symbols and
    # for free-standing ones, such as ptxdsl.debug's, declared by name in whichever module).
    module: Any = attrs.field(default=None, kw_only=True)

    def __attrs_post_init__(self) -> None:
        _declared(self, "variable", "k.shared_array, k.param, ...")

    def render(self) -> str:
        return self.name

    @property
    def size(self) -> int:
        """The variable's size in bytes: its element type's size times its element count."""
        return self.type.bytes * (self.count or 0)

    def __repr__(self) -> str:
        return f"Symbol({self.space.value} {self.name})"


@attrs.frozen
class Label(Operand):
    name: str = attrs.field(converter=lambda v: check_identifier(v, "label"))
    kernel: Any = attrs.field(eq=False, default=None)

    def render(self) -> str:
        return self.name


# Unlike a Reg or Symbol, a Label is compared by its name (branches and placements find it by
# that): renaming one would cut it from both.
refuse_assignment(Label, "a label is placed and branched to by its name: make another with "
                  "k.label(name)")


@attrs.frozen
class Addr(Operand):
    """`[base]` or `[base+offset]`; base is a register, a symbol or an absolute integer."""

    base: Reg | Symbol | int = attrs.field(converter=lambda v: _addr_base(v))
    offset: int = attrs.field(default=0, converter=lambda v: _offset(v))

    def render(self) -> str:
        base = str(self.base) if isinstance(self.base, int) else self.base.render()
        if self.offset:
            # PTX spells a negative offset `[r+-16]`: ptxas refuses `[r-16]` as a syntax error.
            return f"[{base}+{self.offset}]"
        return f"[{base}]"

    def __add__(self, off: int) -> Addr:
        n = as_int(off)
        if n is None:
            _fail("Addr + offset", "the offset must be an int", off)
        return Addr(self.base, self.offset + n)

    @property
    def width(self) -> int:
        """Bits of the address expression: 32/64 for registers, 0 when it depends on the space."""
        if isinstance(self.base, Reg):
            return self.base.type.bits
        return 0


@attrs.frozen
class Vec(Operand):
    """A brace-enclosed vector operand `{a, b, ...}` of registers or immediates."""

    items: tuple[Operand, ...] = attrs.field(converter=lambda v: _vec_items(v))

    def render(self) -> str:
        return "{" + ", ".join(i.render() for i in self.items) + "}"


# What the builders take, for annotations. Every operand is validated when the instruction is
# built; these admit every valid call (numpy scalars too: they have __index__ / __float__) so
# that a type checker catches the rest before the build does.
IntLike: TypeAlias = int | SupportsIndex
Number: TypeAlias = int | float | SupportsIndex | SupportsFloat
Value: TypeAlias = Reg | Imm | Number          # a source operand: a register or an immediate
Predicate: TypeAlias = Reg | NegPred           # a .pred register, or its negation `~p`
AddrLike: TypeAlias = Addr | Reg | Symbol | int   # an address operand (int: an absolute one)


def _count(value: Any, what: str) -> int | None:
    n = as_int(value)
    if value is None:
        return None
    if n is None or n < 1 or n >= 1 << 40:
        _fail(what, "a positive integer element count", value)
    return n


def _align(value: Any, what: str) -> int | None:
    n = as_int(value)
    if value is None:
        return None
    if n is None or n < 1 or n & (n - 1) or n > 1 << 20:
        _fail(what, "the alignment must be a power of two", value)
    return n


def _addr_base(value: Any):
    if isinstance(value, Reg | Symbol):
        return value
    n = as_int(value)
    if n is None or not 0 <= n < 1 << 64:
        _fail("Addr", "the base must be a register, a symbol or an absolute address in "
              "[0, 2^64)", value)
    return n


def _offset(value: Any) -> int:
    n = as_int(value)
    lo, hi = OFFSET_RANGE
    if n is None or not lo <= n <= hi:
        _fail("Addr", f"the offset must be an int in [{lo}, {hi}]", value)
    return n


def _vec_items(items: Any) -> tuple:
    items = tuple(items) if isinstance(items, tuple | list) else None
    if not items or not all(isinstance(i, Reg | Imm | Sink | SpecialReg) for i in items):
        _fail("Vec", "the items must be a non-empty tuple of registers and immediates", items)
    return items


def symbols_in(value: Any) -> Iterator[Symbol | Label]:
    """Every symbol and label an operand value names (recursing into addresses and tuples)."""
    if isinstance(value, Symbol | Label):
        yield value
    elif isinstance(value, Addr):
        if isinstance(value.base, Symbol):
            yield value.base
    elif isinstance(value, tuple | list):
        for item in value:
            yield from symbols_in(item)


def check_owned(what: str, k: Any, **operands: Any) -> None:
    """Each operand's registers and kernel symbols belong to kernel `k`: a helper refuses
    another kernel's by its own name and operand, not by the name of an instruction it builds
    from it (`mad.lo.u32: operand 'b'` for `acc.store(ptr, ld)`)."""
    for operand, value in operands.items():
        for r in registers_in(value):
            if r.kernel is not k:
                raise OperandError(what, operand, f"a register of kernel '{k.name}'",
                                   f"%{r.name} of kernel '{getattr(r.kernel, 'name', None)}'")
        for s in symbols_in(value):
            if s.kernel is not None and s.kernel is not k:
                raise OperandError(what, operand, f"a symbol of kernel '{k.name}' or a module "
                                   "variable", f"{s.name} of kernel '{s.kernel.name}'")


def registers_in(value: Any) -> Iterator[Reg]:
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
    elif isinstance(value, Operand) and hasattr(value, "inner"):
        # The front end's compound operands (`[map, {x, y}]`, `p|q`, a kept call list).
        yield from registers_in(value.inner())
