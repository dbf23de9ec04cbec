"""PTX scalar types, state spaces, scopes, semantics, and version/target requirements.

Everything here is plain data: enums whose values are the PTX spellings, and small frozen
attrs classes. Nothing in this module emits PTX text by itself.
"""

from __future__ import annotations

import enum
import functools
from collections.abc import Iterable
from functools import total_ordering
from typing import Literal, TypeAlias

import attrs


class ScalarType(enum.Enum):
    """A PTX fundamental type; the value is its spelling without the leading dot."""

    b8 = "b8"
    b16 = "b16"
    b32 = "b32"
    b64 = "b64"
    b128 = "b128"
    u8 = "u8"
    u16 = "u16"
    u32 = "u32"
    u64 = "u64"
    s8 = "s8"
    s16 = "s16"
    s32 = "s32"
    s64 = "s64"
    f16 = "f16"
    f16x2 = "f16x2"
    bf16 = "bf16"
    bf16x2 = "bf16x2"
    f32 = "f32"
    f64 = "f64"
    pred = "pred"

    # bits/bytes/kind are read for every operand check: precomputed tables, not parsing.
    @property
    def bits(self) -> int:
        return _BITS[self]

    @property
    def bytes(self) -> int:
        return max(1, _BITS[self] // 8)

    @property
    def kind(self) -> str:
        """'b' (untyped bits), 'u', 's', 'f' or 'pred'."""
        return _KIND[self]

    @property
    def is_int(self) -> bool:
        return _KIND[self] in ("u", "s")

    @property
    def is_float(self) -> bool:
        return _KIND[self] == "f"

    @property
    def ptx(self) -> str:
        return _DOTTED[self]

    def __str__(self) -> str:
        return _SPELLING[self]

    # Enum's own __format__ and __hash__ are slow, and both run for every operand built
    # (and so is the `value` property: these read precomputed tables).
    def __format__(self, spec: str) -> str:
        return format(_SPELLING[self], spec) if spec else _SPELLING[self]

    __hash__ = object.__hash__


# The names a `Kernel` method's `type=`, `dtype=` and `atype=` also take for a ScalarType
# (`type="u32"` or `".u32"`), spelled out so a type checker knows them (tests/test_typing.py
# keeps them in step with the enum).
TypeName = Literal[
    "b8", "b16", "b32", "b64", "b128", "u8", "u16", "u32", "u64", "s8", "s16", "s32", "s64",
    "f16", "f16x2", "bf16", "bf16x2", "f32", "f64", "pred",
]
DottedTypeName = Literal[
    ".b8", ".b16", ".b32", ".b64", ".b128", ".u8", ".u16", ".u32", ".u64", ".s8", ".s16",
    ".s32", ".s64", ".f16", ".f16x2", ".bf16", ".bf16x2", ".f32", ".f64", ".pred",
]
TypeLike: TypeAlias = ScalarType | TypeName | DottedTypeName


def scalar_type(t: TypeLike) -> ScalarType:
    """`t` as a ScalarType. A `Kernel` method's wrapper has already checked a name and turned
    it into its member (`kernel._type_keywords`): inside one, this only tells the type checker."""
    return t if type(t) is ScalarType else ScalarType(str(t).lstrip("."))


def _parse_bits(t: ScalarType) -> int:
    if t is ScalarType.pred:
        return 1
    digits = "".join(c for c in t.value.split("x")[0] if c.isdigit())
    return int(digits) * (2 if t.value.endswith("x2") else 1)


_BITS = {t: _parse_bits(t) for t in ScalarType}
_SPELLING = {t: t.value for t in ScalarType}
_DOTTED = {t: "." + t.value for t in ScalarType}
_KIND = {t: "pred" if t is ScalarType.pred else "f" if t.value.startswith("bf") else t.value[0]
         for t in ScalarType}

b8, b16, b32, b64, b128 = (ScalarType.b8, ScalarType.b16, ScalarType.b32, ScalarType.b64,
                           ScalarType.b128)
u8, u16, u32, u64 = ScalarType.u8, ScalarType.u16, ScalarType.u32, ScalarType.u64
s8, s16, s32, s64 = ScalarType.s8, ScalarType.s16, ScalarType.s32, ScalarType.s64
f16, f16x2, bf16, bf16x2 = ScalarType.f16, ScalarType.f16x2, ScalarType.bf16, ScalarType.bf16x2
f32, f64, pred = ScalarType.f32, ScalarType.f64, ScalarType.pred


def compatible(reg_type: ScalarType, insn_type: ScalarType) -> bool:
    """PTX operand-type compatibility (ISA §6.4.2, relaxed the way ptxas applies it).

    A register may be used by an instruction of the same size when either side is a bit type,
    or when both are integers (signed and unsigned registers are interchangeable).
    Floats need the same float type or a bit type of the same width.
    """
    return _COMPATIBLE[reg_type, insn_type]


def _compatible(reg_type: ScalarType, insn_type: ScalarType) -> bool:
    if reg_type is insn_type:
        return True
    if ScalarType.pred in (reg_type, insn_type):
        return False
    if reg_type.bits != insn_type.bits:
        return False
    if reg_type.kind == "b" or insn_type.kind == "b":
        return True
    return reg_type.is_int and insn_type.is_int


_COMPATIBLE = {(a, b): _compatible(a, b) for a in ScalarType for b in ScalarType}


class StateSpace(enum.Enum):
    """A PTX state space as written in qualifiers; the value is the spelling after the dot."""

    reg = "reg"
    param = "param"
    const = "const"
    global_ = "global"
    local = "local"
    shared = "shared"
    shared_cta = "shared::cta"
    shared_cluster = "shared::cluster"
    generic = ""

    @property
    def ptx(self) -> str:
        return _SPACE_PTX[self]

    @property
    def is_shared(self) -> bool:
        return self in _SHARED_SPACES

    __hash__ = object.__hash__


_SPACE_PTX = {s: "." + s.value if s.value else "" for s in StateSpace}
_SHARED_SPACES = frozenset((StateSpace.shared, StateSpace.shared_cta, StateSpace.shared_cluster))

# A state space, scope or semantics argument: the enum member or one of its names ("shared",
# "shared::cta", "space_shared", "gpu", "release", ...); the builders check the spelling.
SpaceLike: TypeAlias = StateSpace | str


class Scope(enum.Enum):
    cta = "cta"
    cluster = "cluster"
    gpu = "gpu"
    sys = "sys"

    @property
    def ptx(self) -> str:
        return "." + self.value


class Sem(enum.Enum):
    sc = "sc"
    acq_rel = "acq_rel"
    acquire = "acquire"
    release = "release"
    relaxed = "relaxed"
    weak = "weak"
    volatile = "volatile"

    @property
    def ptx(self) -> str:
        return "." + self.value


ScopeLike: TypeAlias = Scope | str
SemLike: TypeAlias = Sem | str


@total_ordering
@attrs.frozen(order=False)
class PtxVersion:
    """A PTX ISA version such as 8.3."""

    major: int
    minor: int

    @classmethod
    def parse(cls, text: str | tuple[int, int] | PtxVersion) -> PtxVersion:
        if isinstance(text, PtxVersion):
            return text
        if isinstance(text, tuple):
            return cls(*text)
        major, _, minor = str(text).partition(".")
        if not (major.isdigit() and minor.isdigit()):
            raise ValueError(f"not a PTX ISA version: {text!r} (expected e.g. '8.3')")
        return cls(int(major), int(minor))

    def __lt__(self, other: PtxVersion) -> bool:
        return (self.major, self.minor) < (other.major, other.minor)

    def __str__(self) -> str:
        return f"{self.major}.{self.minor}"


# The most CTAs one cluster may hold on sm_90 (16 with the non-portable size opt-in, 8
# portable): a bound on cluster shapes, constant CTA ranks and multicast CTA counts.
MAX_CLUSTER_CTAS = 16

# Version that introduced each target (ISA §13 release history; digest §8.1).
TARGET_INTRODUCED: dict[int, PtxVersion] = {
    75: PtxVersion(6, 3), 80: PtxVersion(7, 0), 86: PtxVersion(7, 1), 87: PtxVersion(7, 4),
    89: PtxVersion(7, 8), 90: PtxVersion(7, 8), 100: PtxVersion(8, 6), 101: PtxVersion(8, 6),
    103: PtxVersion(8, 8), 110: PtxVersion(9, 0), 120: PtxVersion(8, 7), 121: PtxVersion(8, 8),
}
ARCH_SUFFIX_INTRODUCED = {"a": PtxVersion(8, 0), "f": PtxVersion(8, 8)}


@attrs.frozen
class Target:
    """A `.target` such as sm_90 or sm_90a.

    `suffix` is '' (portable), 'a' (arch-specific: runs only on that exact GPU) or 'f'
    (family-specific).
    """

    sm: int
    suffix: str = ""

    @classmethod
    def parse(cls, text: str | Target) -> Target:
        if isinstance(text, Target):
            return text
        s = str(text).strip()
        if s.startswith("compute_"):
            s = "sm_" + s[len("compute_"):]
        if not s.startswith("sm_"):
            raise ValueError(f"not a PTX target: {text!r} (expected e.g. 'sm_90a')")
        body = s[3:]
        suffix = body[-1] if body and body[-1] in "af" else ""
        digits = body[:-1] if suffix else body
        if not digits.isdigit() or int(digits) not in TARGET_INTRODUCED:
            known = ", ".join(f"sm_{n}" for n in sorted(TARGET_INTRODUCED))
            raise ValueError(f"unknown PTX target {text!r}; known: {known} (with 'a'/'f')")
        return cls(int(digits), suffix)

    @property
    def introduced(self) -> PtxVersion:
        base = TARGET_INTRODUCED[self.sm]
        return max(base, ARCH_SUFFIX_INTRODUCED.get(self.suffix, base))

    @property
    def compute_capability(self) -> tuple[int, int]:
        return divmod(self.sm, 10)

    def __str__(self) -> str:
        return f"sm_{self.sm}{self.suffix}"


# Named converters: the attrs plugin of mypy types a field's constructor argument from them.
def _parse_version(text: str | tuple[int, int] | PtxVersion) -> PtxVersion:
    return PtxVersion.parse(text)


def _sm_set(sms: Iterable[int]) -> frozenset[int]:
    return frozenset(sms)


@attrs.frozen
class Ceiling:
    """The last SM a form assembles for (ptxas refuses it on every later target), the operand
    that ties it there, what that operand is and what to write instead."""

    last_sm: int
    operand: str
    given: str
    expected: str


# The maximum-target rule, one for every form: ptxas (nvJitLink 13.x) refuses a 32-bit
# address on sm_90 and later, "32-Bit ABI (--machine 32 or 32-Bit addressing) is not
# supported on sm_90 or higher architectures", and takes it up to sm_89. Measured form by
# form for sm_80 and sm_90a (tests/test_max_target.py): cvta.<space>.u32 and
# cvta.to.<space>.u32 of every space; a generic or .global ld/st/atom/red/prefetch through a
# 32-bit register and `mov.u32` of a .global symbol's address, which ptxdsl refuses on every
# target; isspacep through a 32-bit register (isspacep.<space> of a .u32/.b32/.s32 `a`),
# which ptxas for sm_90a sometimes takes and sometimes crashes on (nvJitLink kills the process:
# `mov.u32 %r1, 0; isspacep.global %p, %r1;`), so ptxdsl never hands it over. .shared, .local,
# .const and .param accesses through 32 bits, and mov.u32 of their symbols, assemble on sm_90a.
ADDR32_LAST_SM = 89


def addr32(operand: str, given: str, expected: str) -> Ceiling:
    """The ceiling of a form whose `operand` (`given`) makes it use 32-bit addresses."""
    return Ceiling(ADDR32_LAST_SM, operand, given, f"{expected} (ptxas refuses 32-bit "
                   f"addresses on sm_{ADDR32_LAST_SM + 1} and later: '32-Bit ABI ... is not "
                   "supported')")


@attrs.frozen
class Requires:
    """The PTX ISA version and targets an instruction form needs.

    `arch_specific` lists the SM numbers whose 'a' target (or, from PTX 8.8, 'f' target)
    unlocks the form; when empty, any target with sm >= `sm` will do. `ceiling`, when set,
    is the last SM whose ptxas takes the form (`addr32`).
    """

    version: PtxVersion = attrs.field(converter=_parse_version, default=PtxVersion(6, 3))
    sm: int = 75
    arch_specific: frozenset[int] = attrs.field(converter=_sm_set, default=frozenset())
    family_ok: bool = False
    ceiling: Ceiling | None = None

    def above_ceiling(self, target: Target) -> bool:
        """Whether `target` is past the last SM whose ptxas takes the form."""
        return self.ceiling is not None and target.sm > self.ceiling.last_sm

    def satisfied_by(self, target: Target) -> bool:
        if self.above_ceiling(target):
            return False
        if self.arch_specific:
            if target.suffix == "a":
                return target.sm in self.arch_specific
            if target.suffix == "f" and self.family_ok:
                return target.sm in self.arch_specific
            return False
        return target.sm >= self.sm

    def min_target(self) -> Target:
        if self.arch_specific:
            # The least 'a' target that also meets `sm` (an arch-specific form merged with a
            # portable one of a higher sm: setmaxnreg with a sm_100 .v8 load is sm_100a).
            # When there is none, the least one: the module's check names the conflict.
            fits = [a for a in self.arch_specific if a >= self.sm]
            return Target(min(fits or self.arch_specific), "a")
        return Target(self.sm)

    def describe(self) -> str:
        if self.arch_specific:
            tgt = "/".join(f"sm_{n}a" for n in sorted(self.arch_specific))
        else:
            tgt = f"sm_{self.sm}+"
        if self.ceiling is not None:
            tgt = f"{tgt.rstrip('+')} to sm_{self.ceiling.last_sm}"
        return f"PTX ISA {self.version}, {tgt}"

    def merge(self, other: Requires) -> Requires:
        """The requirement of a form that needs both `self` and `other`."""
        if self.arch_specific and other.arch_specific:
            arch = self.arch_specific & other.arch_specific
            if not arch:
                raise ValueError(f"no target satisfies both {self.describe()} and "
                                 f"{other.describe()}")
            family = self.family_ok and other.family_ok
        else:
            arch = self.arch_specific or other.arch_specific
            # A portable requirement says nothing about family targets: keep the other side's.
            family = (self.family_ok if self.arch_specific else other.family_ok) and bool(arch)
        ceilings = [c for c in (self.ceiling, other.ceiling) if c is not None]
        ceiling = min(ceilings, key=lambda c: c.last_sm) if ceilings else None
        return Requires(max(self.version, other.version), max(self.sm, other.sm), arch, family,
                        ceiling)


def req(version: str, sm: int = 75, arch: tuple[int, ...] = (), family: bool = False,
        ceiling: Ceiling | None = None) -> Requires:
    """Shorthand used by the instruction tables: req('8.3', 90, arch=(90, 100)).

    Requirements are immutable, so equal calls share one object (instructions that compute
    theirs on the fly then hand the module's checks one object instead of many)."""
    try:
        return _req(version, sm, arch, family, ceiling)
    except TypeError:  # an unhashable argument (a list of archs): build it uncached
        return Requires(PtxVersion.parse(version), sm, frozenset(arch), family, ceiling)


@functools.lru_cache(maxsize=1024)
def _req(version, sm, arch, family, ceiling) -> Requires:
    return Requires(PtxVersion.parse(version), sm, frozenset(arch), family, ceiling)


# Common requirement constants.
BASE = req("6.3", 75)
SM90 = req("7.8", 90)
