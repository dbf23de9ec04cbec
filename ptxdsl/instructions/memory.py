"""Loads and stores: ld, st (PTX ISA §9.7.9.8, §9.7.9.10), and a small copy helper.

The cache qualifiers (`.L1::evict_*`, `.L1::no_allocate`, `.L2::cache_hint`, `.L2::64B/128B/256B`)
are fields of the same two classes; `ld_st.py` has the cuda::ptx-named builders over them.
"""

from __future__ import annotations

import enum

import attrs

from ..errors import BuildError, OperandError
from ..operands import Addr, Reg, Symbol, Vec
from ..provenance import known_fit
from ..types import BASE, Requires, ScalarType, Scope, Sem, StateSpace, req
from ._tma_addr import symbol_fit
from .base import (
    Instruction,
    _given,
    check_addr,
    check_dst,
    check_enum,
    check_src,
    known_space,
)

_SPACES = (StateSpace.generic, StateSpace.param, StateSpace.global_, StateSpace.shared,
           StateSpace.shared_cta, StateSpace.shared_cluster, StateSpace.const, StateSpace.local)
_MEM_TYPES = tuple(t for t in ScalarType if t not in (
    ScalarType.pred, ScalarType.f16x2, ScalarType.bf16x2, ScalarType.bf16, ScalarType.f16))
# ptxas has no .f16 ld/st ("Unexpected instruction types"): half values move as .b16.


class L1Eviction(enum.Enum):
    evict_normal = "evict_normal"
    evict_unchanged = "evict_unchanged"
    evict_first = "evict_first"
    evict_last = "evict_last"
    no_allocate = "no_allocate"


class L2Prefetch(enum.Enum):
    B64 = "64B"
    B128 = "128B"
    B256 = "256B"


# ptxas: "Modifier '.evict_last' cannot be applied to '.shared' space": the cache qualifiers
# exist for global memory only (a generic address may point there).
_CACHE_SPACES = (StateSpace.global_, StateSpace.generic)


def _check_cache(insn: Ld | St) -> None:
    """Validate l1 / prefetch / cache_policy: the spaces they apply to, no .volatile with an
    eviction priority or cache hint (ptxas: "cannot be combined with modifier '.volatile'"),
    and a 64-bit cache-policy register (from createpolicy)."""
    prefetch = getattr(insn, "prefetch", None)
    if insn.l1 is not None:
        insn._set("l1", check_enum(insn.MNEMONIC, "l1", insn.l1, L1Eviction))
    if prefetch is not None:
        insn._set("prefetch", check_enum(insn.MNEMONIC, "prefetch", prefetch, L2Prefetch))
    if insn.cache_policy is not None:
        insn._set("cache_policy", check_src(insn.opcode(), "cache_policy", insn.cache_policy,
                                            ScalarType.b64, imm=False))
    if insn.l1 is None and prefetch is None and insn.cache_policy is None:
        return
    if insn.space not in _CACHE_SPACES:
        raise OperandError(insn.opcode(), "space", "global or generic (the cache qualifiers "
                           "apply to global memory only)", f".{insn.space.value}")
    if insn.sem is Sem.volatile and (insn.l1 is not None or insn.cache_policy is not None):
        raise OperandError(insn.opcode(), "sem", "no .volatile with an eviction priority or "
                           "a cache hint (ptxas refuses the combination)", "'volatile'")


def _cache_qualifiers(insn: Ld | St) -> str:
    q = f".L1::{insn.l1.value}" if insn.l1 is not None else ""
    if insn.cache_policy is not None:
        q += ".L2::cache_hint"
    prefetch = getattr(insn, "prefetch", None)
    return q + (f".L2::{prefetch.value}" if prefetch is not None else "")


def _cache_requires(insn: Ld | St) -> Requires:
    """PTX 7.4 for every cache qualifier; sm_80 for a cache hint or 256-B prefetch (cuda::ptx's
    ld.h / st.h; the L1 priorities and 64/128-B prefetch are sm_70/75, below ptxdsl's floor)."""
    prefetch = getattr(insn, "prefetch", None)
    if insn.cache_policy is not None or prefetch is L2Prefetch.B256:
        return req("7.4", 80)
    if insn.l1 is not None or prefetch is not None:
        return req("7.4")
    return BASE


def _space_arg(value) -> StateSpace:
    return check_enum("ld/st", "space", value, StateSpace, _SPACES)


def _vector(insn: str, operand: str, value, t: ScalarType, is_dst: bool):
    """One register, or a tuple of 2 or 4 for .v2/.v4 (each lane checked)."""
    if isinstance(value, tuple | list | Vec):
        items = tuple(value.items if isinstance(value, Vec) else value)
        if len(items) not in (2, 4, 8):
            raise OperandError(insn, operand, "a vector of 2, 4 or 8 elements", f"{len(items)}")
        # .v8 exists for 32-bit types only (256 bits; ptxas 13 crashes on .v8 of 8/16-bit
        # types); otherwise at most 128 bits, or 256 as .v4 of a 64-bit type.
        n = len(items)
        if not (n * t.bits <= 128 and n != 8 or (n, t.bits) in ((8, 32), (4, 64))):
            raise OperandError(insn, operand, "at most 128 bits per vector access (256 as "
                               ".v8 of a 32-bit or .v4 of a 64-bit type)",
                               f"{len(items)} x .{t}")
        checked = tuple(check_dst(insn, f"{operand}[{i}]", v, t) if is_dst
                        else check_src(insn, f"{operand}[{i}]", v, t)
                        for i, v in enumerate(items))
        return Vec(checked)
    return check_dst(insn, operand, value, t) if is_dst else check_src(insn, operand, value, t)


def _sem_qualifiers(insn: str, sem, scope, allowed: tuple[Sem, ...]):
    if sem is None:
        if scope is not None:
            raise OperandError(insn, "scope", "no scope without a memory-order qualifier",
                               repr(scope))
        return None, None
    sem = check_enum(insn, "sem", sem, Sem, allowed)
    if sem in (Sem.relaxed, Sem.acquire, Sem.release):
        if scope is None:
            raise OperandError(insn, "scope", f"a scope for .{sem.value}", "None")
        scope = check_enum(insn, "scope", scope, Scope)
    elif scope is not None:
        raise OperandError(insn, "scope", f"no scope with .{sem.value}", repr(scope))
    return sem, scope


# Memory orders ptxas accepts per space (the others refuse scoped and volatile accesses).
_SPACE_SEMS = {StateSpace.local: (Sem.weak, Sem.volatile), StateSpace.const: (Sem.weak,),
               StateSpace.param: (Sem.weak,)}


def _check_access(insn: Ld | St, sems: tuple[Sem, ...]) -> None:
    """The checks ld and st share: space, type, and the memory-order qualifiers."""
    insn._set("space", _space_arg(insn.space))
    if insn.type not in _MEM_TYPES:
        raise OperandError(insn.MNEMONIC, "type", "a memory type", f".{insn.type}")
    sem, scope = _sem_qualifiers(insn.MNEMONIC, insn.sem, insn.scope, sems)
    only = _SPACE_SEMS.get(insn.space)
    if sem is not None and only is not None and sem not in only:
        raise OperandError(insn.MNEMONIC, "sem", " or ".join(f"'{s.value}'" for s in only)
                           + f" in .{insn.space.value} (ptxas: '.{sem.value}' cannot be "
                           "applied to that space)", f"'{sem.value}'")
    insn._set("sem", sem)
    insn._set("scope", scope)


def _access_opcode(insn: Ld | St, value: object, nc: bool = False) -> str:
    q = insn.MNEMONIC
    if insn.sem is not None:
        q += insn.sem.ptx + (insn.scope.ptx if insn.scope else "")
    q += insn.space.ptx
    if nc:
        q += ".nc"
    q += _cache_qualifiers(insn)
    if isinstance(value, Vec):
        q += f".v{len(value.items)}"
    return f"{q}.{insn.type}"


# 256-bit accesses (.v8.b32, .v4.b64): ptxas 13 "Feature '256 bit wide load/store' requires
# .target sm_100 or higher", PTX 8.8; .global or generic addresses only (ptxas: "global state
# space expected"; the ISA names .global only, ptxas also takes a generic address).
WIDE = req("8.8", 100)


def _check_symbol_access(insn: Ld | St, addr: object, value: object) -> None:
    """An access through a symbol base with a constant offset (or a register known to hold
    one, `provenance`) must stay inside the symbol and be aligned to its width as far as the
    symbol's declared alignment shows (a misaligned ld/st faults at run time; ptxas does not
    check either)."""
    base = addr.base if isinstance(addr, Addr) else None
    if isinstance(base, Reg):
        known_fit(addr, lambda at: _check_symbol_access(insn, at, value))
        return
    if not isinstance(base, Symbol):
        return
    n = len(value.items) if isinstance(value, Vec) else 1
    width = insn.type.bytes * n
    what = f"a {width}-byte {insn.MNEMONIC}"
    symbol_fit(insn.opcode(), "a", addr, size=width, what=what)
    if base.space is not StateSpace.param:   # a .param's .ptr alignment is its pointee's
        symbol_fit(insn.opcode(), "a", addr, align=width, what=what)


def _check_wide(insn: Ld | St, value: object) -> None:
    if isinstance(value, Vec) and len(value.items) * insn.type.bits > 128 \
            and insn.space not in (StateSpace.global_, StateSpace.generic):
        raise OperandError(insn.opcode(), "space", ".global or generic for a 256-bit access "
                           "(sm_100+; sm_90 has no 256-bit ld/st: use two .v4 accesses)",
                           f".{insn.space.value}")


def _access_requires(space: StateSpace, type: ScalarType | None = None, sem: Sem | None = None,
                     scope: Scope | None = None, value: object = None) -> Requires:
    r = BASE
    if space in (StateSpace.shared_cta, StateSpace.shared_cluster) or scope is Scope.cluster:
        r = req("7.8", 90)
    if isinstance(value, Vec) and type is not None and len(value.items) * type.bits > 128:
        r = r.merge(WIDE)
    if sem is Sem.volatile and space is StateSpace.local:
        r = r.merge(req("9.1"))   # ptxas 13: "ld/st with .local.volatile requires PTX ISA 9.1"
    # ptxas: "Instruction type .b128 for instruction st requires PTX ISA .version 8.3", and
    # "Feature '.b128 with .sys' requires PTX ISA .version 8.4" (found by the fuzzer).
    if type is ScalarType.b128:
        r = r.merge(req("8.4" if scope is Scope.sys else "8.3"))
    return r


@attrs.frozen
class Ld(Instruction):
    """`ld{.sem.scope}{.space}{.nc}{.L1::evict_*}{.L2::cache_hint}{.L2::64B/128B/256B}{.vN}.type
    d, [a]{, cache_policy};`"""

    MNEMONIC = "ld"
    space: StateSpace
    type: ScalarType
    d: object
    a: object
    sem: Sem | None = None
    scope: Scope | None = None
    nc: bool = False
    l1: L1Eviction | None = None
    prefetch: L2Prefetch | None = None
    cache_policy: Reg | None = None

    def __attrs_post_init__(self):
        _check_access(self, (Sem.weak, Sem.volatile, Sem.relaxed, Sem.acquire))
        if not isinstance(self.nc, bool):
            raise OperandError("ld", "nc", "True or False", _given(self.nc))
        _check_cache(self)
        if self.nc and (self.space is not StateSpace.global_ or self.sem is not None):
            raise OperandError("ld", "nc", "a plain ld.global", self.opcode())
        self._set("d", _vector(self.opcode(), "d", self.d, self.type, True))
        _check_wide(self, self.d)
        self._set("a", check_addr(self.opcode(), "a", self.a, self.space))
        _check_symbol_access(self, self.a, self.d)

    @property
    def requires(self) -> Requires:
        return _access_requires(self.space, self.type, self.sem, self.scope, self.d).merge(
            _cache_requires(self))

    def opcode(self) -> str:
        return _access_opcode(self, self.d, self.nc)

    def operands(self):
        if self.cache_policy is not None:
            return (self.d, self.a, self.cache_policy)
        return (self.d, self.a)


@attrs.frozen
class St(Instruction):
    """`st{.sem.scope}{.space}{.L1::evict_*}{.L2::cache_hint}{.vN}.type [a], b{, cache_policy};`"""

    MNEMONIC = "st"
    space: StateSpace
    type: ScalarType
    a: object
    b: object
    sem: Sem | None = None
    scope: Scope | None = None
    l1: L1Eviction | None = None
    cache_policy: Reg | None = None

    def __attrs_post_init__(self):
        _check_access(self, (Sem.weak, Sem.volatile, Sem.relaxed, Sem.release))
        _check_cache(self)
        if self.space in (StateSpace.param, StateSpace.const):
            raise OperandError("st", "space", "a writable space (global, shared, local, "
                               "generic)", f".{self.space.value}")
        self._set("b", _vector(self.opcode(), "b", self.b, self.type, False))
        _check_wide(self, self.b)
        self._set("a", check_addr(self.opcode(), "a", self.a, self.space))
        _check_symbol_access(self, self.a, self.b)

    @property
    def requires(self) -> Requires:
        return _access_requires(self.space, self.type, self.sem, self.scope, self.b).merge(
            _cache_requires(self))

    def opcode(self) -> str:
        return _access_opcode(self, self.b)

    def operands(self):
        if self.cache_policy is not None:
            return (self.a, self.b, self.cache_policy)
        return (self.a, self.b)


def _space_of(value, given) -> StateSpace:
    if given is not None:
        return _space_arg(given)
    known = known_space(value)
    if known is None:
        raise BuildError("cannot tell the state space of this address; pass space=...")
    return known
