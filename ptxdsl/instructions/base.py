"""The instruction base class and the operand checks every family shares.

An instruction is a frozen attrs object. Its `__attrs_post_init__` validates and normalises its
operands (Python numbers become typed immediates, symbols become addresses), so an object that
exists is an instruction ptxas will accept. `opcode()` gives the dotted mnemonic in NVIDIA's
canonical qualifier order, `operands()` the operand list, `requires` the minimum PTX ISA version
and target.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Sequence
from typing import Any, ClassVar, Literal, NoReturn, TypeVar, cast, overload

import attrs

from ..errors import BuildError, OperandError
from ..operands import (
    Addr,
    Imm,
    NegPred,
    Operand,
    Reg,
    SpecialReg,
    Symbol,
    Vec,
    make_imm,
    registers_in,
)
from ..types import _COMPATIBLE, BASE, Requires, ScalarType, StateSpace, compatible

E = TypeVar("E", bound=enum.Enum)


# The fields an instruction keeps its results in (`d`, `p`, `q`, `state`, `pred`, inline PTX's
# `outs`, ...); every other register operand is a source. Read by the checker's `defs` and by
# `provenance`, which must both know what an instruction writes.
DEST_FIELDS = ("d", "p", "q", "state", "outs", "wait_complete", "pred", "result")


def as_tuple(items: Iterable[Any]) -> tuple[Any, ...]:
    """`tuple(items)`, as a named function: an attrs converter mypy's attrs plugin can type."""
    return tuple(items)


@attrs.frozen
class Instruction:
    """Base of every PTX instruction form.

    A subclass is one operand shape: its fields are the operands and qualifiers, validated by
    `__attrs_post_init__` when it is made (so an object that exists renders valid PTX), and its
    docstring gives the PTX form.
    """

    MNEMONIC: ClassVar[str] = "?"
    #: The PTX ISA version and target of the form; `requires` refines it per object.
    REQUIRES: ClassVar[Requires] = BASE

    def opcode(self) -> str:
        """The dotted mnemonic with its qualifiers, in the order cuda::ptx writes them
        (`mbarrier.arrive.expect_tx.release.cta.shared::cta.b64`)."""
        raise NotImplementedError

    def operands(self) -> Sequence[Operand]:
        """The operands in the ISA's order, as operand objects that render themselves."""
        return ()

    @property
    def requires(self) -> Requires:
        """The minimum PTX ISA version and target of this object's form: what the module's
        `.version`/`.target` inference takes the maximum of."""
        return type(self).REQUIRES

    def render(self) -> str:
        """The PTX statement: `opcode operand, ...;`."""
        ops = self.operands()
        if ops:
            return f"{self.opcode()} {', '.join([op.render() for op in ops])};"
        return self.opcode() + ";"

    def registers(self) -> list[Reg]:
        """Every register this instruction mentions (for ownership checks and analyses)."""
        out: list[Reg] = []
        for field in attrs.fields(type(self)):
            out.extend(registers_in(getattr(self, field.name)))
        return out

    # -- helpers for subclasses ------------------------------------------------------------
    def _set(self, name: str, value: Any) -> None:
        object.__setattr__(self, name, value)

    @property
    def name(self) -> str:
        """The mnemonic for error messages, as complete as validation so far allows."""
        try:
            return self.opcode()
        except Exception:  # noqa: BLE001 - fields may still be raw while validating
            return self.MNEMONIC


# What a check names in its message: the instruction itself (its name is only built when an
# error is raised) or a builder's name.
Who = str | Instruction


def _n(insn: Who) -> str:
    """The instruction name for a message; checks may pass the instruction itself so the name
    is only built when an error is raised."""
    return insn.name if isinstance(insn, Instruction) else insn


def _given(value: Any) -> str:
    if isinstance(value, Reg):
        return f"register %{value.name} of type .{value.type.value}"
    if isinstance(value, Imm):
        return f"immediate {value.render()} (.{value.type.value})"
    if isinstance(value, SpecialReg):
        return f"special register %{value.name}"
    if isinstance(value, Symbol):
        return f"symbol {value.name} in .{value.space.value or 'generic'}"
    if isinstance(value, enum.Enum):
        return f"{type(value).__name__}.{value.name}"
    return f"{type(value).__name__} {value!r}"


def check_dst(insn: Who, operand: str, value: Any, t: ScalarType) -> Reg:
    """A destination register compatible with instruction type `t`."""
    if type(value) is Reg and _COMPATIBLE[value.type, t]:
        return value  # the common case (compatible() already says no for a .pred mismatch)
    if not isinstance(value, Reg) or value.type is ScalarType.pred and t is not ScalarType.pred:
        raise OperandError(_n(insn), operand, f"a .{t.value} register", _given(value))
    if not compatible(value.type, t):
        raise OperandError(_n(insn), operand, f"a register compatible with .{t.value}",
                           _given(value))
    return value


@overload
def check_src(insn: Who, operand: str, value: Any, t: ScalarType, *, imm: bool = True,
              special: Literal[False] = False) -> Reg | Imm: ...
@overload
def check_src(insn: Who, operand: str, value: Any, t: ScalarType, *, imm: bool = True,
              special: bool) -> Reg | Imm | SpecialReg: ...
def check_src(insn: Who, operand: str, value: Any, t: ScalarType, *, imm: bool = True,
              special: bool = False) -> Reg | Imm | SpecialReg:
    """A source: a compatible register, or (when allowed) an immediate converted to `t`."""
    if type(value) is Reg:
        if _COMPATIBLE[value.type, t]:
            return value
        return check_dst(insn, operand, value, t)
    if type(value) is int and imm:
        if t is ScalarType.b128:
            return b128_imm(insn, operand, value)
        return make_imm(insn, operand, value, t)
    if isinstance(value, Reg):
        return check_dst(insn, operand, value, t)
    if isinstance(value, SpecialReg):
        if not special:
            raise OperandError(_n(insn), operand, "a register or immediate (special registers can "
                               "only be read with mov/cvt; use k.mov)", _given(value))
        if not compatible(value.type, t):
            raise OperandError(_n(insn), operand, f"a source compatible with .{t.value}",
                               _given(value))
        return value
    if isinstance(value, Imm):
        value = value.value
    if not imm:
        raise OperandError(_n(insn), operand, f"a .{t.value} register", _given(value))
    if t is ScalarType.b128:
        return b128_imm(insn, operand, value)
    return make_imm(insn, operand, value, t)


# ptxas 13 reads a .b128 immediate (mov, st, initialisers) as a 64-bit constant: the high half
# is always 0, 2^64 assembles as 0, -1 as 2^64-1, and above ~2^100 "Constant overflow".
B128_IMM_RANGE = (0, (1 << 64) - 1)


def check_one_type(insn: Who, operand: str, regs: Sequence[Any]) -> None:
    """The registers of a vector operand share one type, .b32/.b64 ones aside (a bit type goes
    with any type of its size). ptxas rejects a vector of mixed types ("Vector with elements
    of different types are not allowed") comparing only neighbours, so its verdict on a mix
    depends on the order; ptxdsl refuses every mix."""
    types = list(dict.fromkeys(r.type for r in regs if isinstance(r, Reg)
                               and r.type.kind != "b"))
    if len(types) > 1:
        refuse(insn, f"{operand} registers other than .bN ones must all have one type (a "
               "vector of mixed types), got " + ", ".join(f".{t.value}" for t in types))


def b128_imm(insn: Who, operand: str, value: Any) -> Imm:
    """A .b128 immediate in [0, 2^64): the values ptxas encodes as written."""
    imm = make_imm(insn, operand, value, ScalarType.b128)
    lo, hi = B128_IMM_RANGE
    if not lo <= imm.value <= hi:
        raise OperandError(_n(insn), operand, "a .b128 immediate in [0, 2^64) (ptxas encodes "
                           "a .b128 immediate as a 64-bit constant with a zero high half: a "
                           "wider or negative value would silently change); build a wider "
                           "value from its two 64-bit halves, e.g. two .b64 stores "
                           "(st.v2.b64 [a], {lo, hi}) or inline PTX `mov.b128 %q, {lo, hi};`",
                           imm.value)
    return imm


def check_pred(insn: Who, operand: str, value: Any, *, negatable: bool = False) -> Reg | NegPred:
    """A predicate operand: a `.pred` register, or also its negation `~p` where `negatable`
    (a guard, setp's `c`, wgmma's `scale_d`); anything else is an `OperandError`."""
    if isinstance(value, NegPred) and negatable:
        return value
    if not isinstance(value, Reg) or value.type is not ScalarType.pred:
        raise OperandError(_n(insn), operand, "a .pred register", _given(value))
    return value


def check_imm(insn: Who, operand: str, value: Any, lo: int, hi: int) -> int:
    """An integer that must be an immediate (ptxas rejects a register here)."""
    if isinstance(value, Imm):
        value = value.value
    if isinstance(value, Reg):
        raise OperandError(_n(insn), operand, f"an integer immediate in [{lo}, {hi}] "
                           "(a register is not allowed here)", _given(value))
    if isinstance(value, bool) or not isinstance(value, int):
        try:
            import numpy as np
            if isinstance(value, np.integer):
                value = int(value)
        except ImportError:  # pragma: no cover
            pass
    if isinstance(value, bool) or not isinstance(value, int):
        raise OperandError(_n(insn), operand, f"an integer immediate in [{lo}, {hi}]",
                           _given(value))
    if not lo <= value <= hi:
        raise OperandError(_n(insn), operand, f"an integer immediate in [{lo}, {hi}]", value)
    return value


_SPELLED: dict[tuple[type, str], enum.Enum] = {}   # (enum class, spelling) -> member


def check_enum(insn: Who, operand: str, value: Any, cls: type[E],
               allowed: Iterable[E] | None = None) -> E:
    """An enum member, given as the member or its PTX spelling (e.g. 'gpu' or Scope.gpu)."""
    member: E | None = None
    if type(value) is cls:
        if allowed is None or type(allowed) is tuple and value in allowed:
            return value  # the common case, without building the list of choices
        member = value
    elif isinstance(value, cls):
        member = value
    elif isinstance(value, str):
        # The cache is keyed by the enum class, so a hit is a member of `cls`.
        member = cast("E | None", _SPELLED.get((cls, value)))
        if member is not None and (allowed is None or type(allowed) is tuple
                                   and member in allowed):
            return member
        if member is None:
            text = value.lstrip(".")
            for m in cls:
                if m.value == text or m.name == text or m.name.rstrip("_") == text:
                    member = _SPELLED[cls, value] = m
                    break
    choices = list(allowed) if allowed is not None else list(cls)
    if member is None or member not in choices:
        names = ", ".join(repr(m.value or m.name) for m in choices)
        raise OperandError(_n(insn), operand, f"one of {names}", _given(value))
    return member


def known_space(addr: Any) -> StateSpace | None:
    """The state space an address is known to be in: its symbol's, or the space its register
    was marked as pointing into (a pointer parameter: generic; `k.cvta(p, "global",
    to=True)`: global); None when nothing says."""
    base = addr.base if isinstance(addr, Addr) else addr
    return base.space if isinstance(base, Symbol | Reg) else None


def check_addr(insn: Who, operand: str, value: Any, space: StateSpace,
               widths: tuple[int, ...] | None = None) -> Addr:
    """An address operand for an access in `space` (the instruction's qualifier).

    Registers must be 64-bit for generic and global addresses; shared and local addresses
    may be 32-bit (both windows are: Triton's `st.local [%SPL]` on a `.b32` stack pointer).
    A symbol must live in the space the instruction names (a generic access may name a
    global/shared symbol only through a register, since ptxas wants a generic address).
    """
    if widths is None:
        if space in (StateSpace.shared, StateSpace.shared_cta, StateSpace.shared_cluster,
                     StateSpace.local):
            widths = (32, 64)
        else:
            widths = (64,)
    if isinstance(value, Reg | Symbol | int) and not isinstance(value, bool):
        value = Addr(value)
    if not isinstance(value, Addr):
        raise OperandError(_n(insn), operand, "an address (register, symbol or Addr)",
                           _given(value))
    base = value.base
    if isinstance(base, int) and space is not StateSpace.local:
        # ptxas: "Immediate addresses allowed only for .local state space".
        raise OperandError(_n(insn), operand, "a register or symbol address (an absolute "
                           "address is only allowed in .local)", f"absolute address {base}")
    if isinstance(base, Reg):
        if base.type.bits not in widths or not (base.type.is_int or base.type.kind == "b"):
            want = " or ".join(f"{w}-bit" for w in widths)
            raise OperandError(_n(insn), operand, f"a {want} integer register holding a "
                               f"{space.value or 'generic'} address", _given(base))
    elif isinstance(base, Symbol):
        ok = base.space is space or (base.space.is_shared and space.is_shared
                                     and space is not StateSpace.shared_cluster)
        ok = ok or (space is StateSpace.shared_cluster and base.space.is_shared)
        if not ok:
            raise OperandError(_n(insn), operand, f"a symbol in .{space.value or 'generic'} "
                               "(convert the address with cvta first)", _given(base))
    return value


def check_choice(insn: Who, operand: str, value: Any, choices: Sequence[Any]) -> Any:
    """`value` itself when it is one of `choices`, else an `OperandError` listing them."""
    if value not in choices:
        raise OperandError(_n(insn), operand, "one of " + ", ".join(map(repr, choices)),
                           _given(value))
    return value


def refuse(insn: Who, rule: str) -> NoReturn:
    """Raise a build error naming the instruction and the rule broken."""
    raise BuildError(f"{_n(insn)}: {rule}")


def infer_type(insn: Who, *values: Any, default: ScalarType | None = None) -> ScalarType:
    """The instruction type taken from the first typed operand, for `k.add(a, 1)` style calls."""
    for v in values:
        if isinstance(v, Reg | SpecialReg | Imm):
            return v.type
    if default is not None:
        return default
    raise BuildError(f"{insn}: cannot infer the operand type from immediates alone; "
                     "pass type=... (e.g. type=t.u32)")


def int_like(value: Any) -> Any:
    """A numpy (or other `__index__`) integer as a Python int, so that every check that takes
    an int takes it; anything else (bool included) unchanged."""
    if type(value) is int:
        return value
    from ..operands import as_int
    n = as_int(value)
    return value if n is None else n


# Which registers an instruction writes and reads, from its fields (DEST_FIELDS): read by the
# checker, by the builder (`KernelCore`) and by `ptxdsl.warpgroups`, so it lives down here.
_FIELDS: dict[type, tuple[tuple[str, ...], tuple[str, ...]]] = {}


def _class_fields(cls: type) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(result fields, operand fields) of an instruction class (cached per class)."""
    names = _FIELDS.get(cls)
    if names is None:
        every = tuple(f.name for f in attrs.fields(cls))
        names = _FIELDS[cls] = (tuple(n for n in every if n in DEST_FIELDS),
                                tuple(n for n in every if n not in DEST_FIELDS))
    return names


def _fields(insn: Any) -> tuple[tuple[str, ...], tuple[str, ...]]:
    return _class_fields(type(insn))


def _regs(value: Any) -> Iterable[Reg]:
    if isinstance(value, Reg):
        yield value
    elif isinstance(value, NegPred):
        yield value.reg
    elif isinstance(value, Addr):
        if isinstance(value.base, Reg):
            yield value.base
    elif isinstance(value, Vec | tuple | list):
        for item in (value.items if isinstance(value, Vec) else value):
            yield from _regs(item)
    elif hasattr(value, "tensormap") and hasattr(value, "coords"):  # a [map, {coords}] operand
        yield from _regs(value.tensormap)
        yield from _regs(value.coords)


def dests(insn: Any) -> list[Reg]:
    """The registers an instruction writes."""
    out: list[Reg] = []
    for name in _fields(insn)[0]:
        v = getattr(insn, name)
        if isinstance(v, Reg):
            out.append(v)
        elif isinstance(v, Vec | tuple):
            # A parsed statement's results may nest (`{%r1, %r2}` or `p|q` inside its tuple).
            out.extend(registers_in(v))
    return out


def sources(insn: Any) -> list[Reg]:
    """The registers an instruction reads (every register operand outside its results)."""
    out: list[Reg] = []
    for name in _fields(insn)[1]:
        v = getattr(insn, name)
        if isinstance(v, Reg):   # the common case, without a generator
            out.append(v)
        elif v is not None and not isinstance(v, int | str | enum.Enum):
            out.extend(_regs(v))
    return out
