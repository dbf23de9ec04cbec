"""prefetch and prefetchu: bring the cache line holding an address into a cache level, with
no result and no fault (PTX ISA §9.7.9.15).

::

    prefetch.global.L2 [a];                 k.prefetch(a)          (a: a .global address)
    prefetch.L2 [a];                        k.prefetch(p)          (p: a generic pointer)
    prefetch.local.L1 [a];                  k.prefetch(a, "L1", space="local")
    prefetch.global.L2::evict_last [a];     k.prefetch(a, evict="last")     PTX 7.4, sm_80
    prefetchu.L1 [a];                       k.prefetchu(p)         (uniform cache, generic)

As for `k.ld`, the state space is the address's (a symbol's, or a register's known one: a
pointer parameter is generic, `k.cvta(p, "global", to=True)` global) unless `space=` names
it. A generic prefetch of a shared address does nothing, so an address known to be shared is
refused. The eviction-priority form exists for `.global` `.L2` only.

`prefetch.tensormap` is `ptx.prefetch_tensormap` (fence.py); TMA's L2 prefetches are
`ptx.cp_async_bulk_prefetch` and `ptx.cp_async_bulk_prefetch_tensor`.
"""

from __future__ import annotations

import enum
from typing import Any

import attrs

from ..errors import BuildError, OperandError
from ..types import BASE, Requires, StateSpace, req
from .base import Instruction, check_addr, check_enum, known_space

__all__ = ["PrefetchLevel", "PrefetchEviction", "Prefetch", "PrefetchU", "FORMS"]

S = StateSpace
EVICT = req("7.4", 80)
_SPACES = (S.generic, S.global_, S.local)


class PrefetchLevel(enum.Enum):
    L1 = "L1"
    L2 = "L2"


class PrefetchEviction(enum.Enum):
    """The eviction priority the prefetched line gets in L2."""

    last = "evict_last"
    normal = "evict_normal"


# 'last' / 'normal', besides the PTX spellings 'evict_last' / 'evict_normal' check_enum takes
_EVICTION_NAMES = {"last": PrefetchEviction.last, "normal": PrefetchEviction.normal}


def _spelled_eviction(value: Any) -> Any:
    return _EVICTION_NAMES.get(value, value) if isinstance(value, str) else value


@attrs.frozen
class Prefetch(Instruction):
    """`prefetch{.space}.level [a];` (.space = .global .local, none for a generic address;
    .level = .L1 .L2) and `prefetch.global.L2::evict_last [a];` /
    `prefetch.global.L2::evict_normal [a];`."""

    MNEMONIC = "prefetch"
    space: StateSpace
    level: PrefetchLevel
    a: Any
    evict: PrefetchEviction | None = None

    def __attrs_post_init__(self):
        self._set("space", check_enum(self.MNEMONIC, "space", self.space, StateSpace, _SPACES))
        self._set("level", check_enum(self.MNEMONIC, "level", self.level, PrefetchLevel))
        if self.evict is not None:
            self._set("evict", check_enum(self.MNEMONIC, "evict", _spelled_eviction(self.evict),
                                          PrefetchEviction))
            if self.space is not S.global_ or self.level is not PrefetchLevel.L2:
                where = f".{self.space.value}" if self.space.value else "a generic address"
                raise OperandError(self.MNEMONIC, "evict", "no eviction priority here: it "
                                   "exists for .global .L2 only (convert a generic pointer "
                                   "with k.cvta(p, 'global', to=True))",
                                   f"{self.evict.value} with .{self.level.value} and {where}")
        self._set("a", check_addr(self.opcode(), "a", self.a, self.space))

    def opcode(self) -> str:
        sp = f".{self.space.value}" if self.space is not S.generic else ""
        if self.evict is not None:
            return f"prefetch{sp}.L2::{self.evict.value}"
        return f"prefetch{sp}.{self.level.value}"

    def operands(self):
        return (self.a,)

    @property
    def requires(self) -> Requires:
        return EVICT if self.evict is not None else BASE


@attrs.frozen
class PrefetchU(Instruction):
    """`prefetchu.L1 [a];` — into the uniform cache; `a` is a generic address (the prefetch
    does nothing where it maps to const, local or shared memory)."""

    MNEMONIC = "prefetchu"
    a: Any

    def __attrs_post_init__(self):
        known = known_space(self.a)
        if known not in (None, S.generic):
            raise OperandError(self.MNEMONIC, "a", "a generic address (convert it with "
                               f"k.cvta(a, '{known.value}'))", f"an address in .{known.value}")
        self._set("a", check_addr(self.MNEMONIC, "a", self.a, S.generic))

    def opcode(self) -> str:
        return "prefetchu.L1"

    def operands(self):
        return (self.a,)


def _space(insn: str, addr: Any, given: Any) -> Any:
    """The prefetch's space: `given` (Prefetch validates it), else the address's, which must
    be one of generic, global, local."""
    if given is not None:
        return given
    known = known_space(addr)
    if known is None:
        raise BuildError(f"{insn}: cannot tell the state space of this address; pass "
                         "space='global', 'local' or 'generic'")
    if known not in _SPACES:
        raise OperandError(insn, "a", "a global, local or generic address (a prefetch of "
                           "shared memory does nothing; of const or param memory, use "
                           "ptx.prefetch_tensormap for a tensor map)",
                           f"an address in .{known.value}")
    return known


FORMS: list[tuple[str, Requires, str]] = [
    ("prefetch{.global,.local}.{L1,L2} [a]", BASE, "no .space: a generic address"),
    ("prefetch.global.L2::{evict_last,evict_normal} [a]", EVICT, ""),
    ("prefetchu.L1 [a]", BASE, "a generic address"),
]
