"""createpolicy: the 64-bit L2 cache policies that `.L2::cache_hint` forms take
(PTX ISA §9.7.9.17; PTX 7.4, sm_80).

Every form was checked against ptxas 13 through nvJitLink.
"""

from __future__ import annotations

import enum
from typing import Any

import attrs

from ..errors import OperandError
from ..operands import Imm, Reg, make_imm
from ..types import Requires, ScalarType, StateSpace, req
from .base import Instruction, check_addr, check_dst, check_enum, check_imm, refuse

__all__ = [
    "L2Priority", "CreatePolicyFractional", "CreatePolicyRange", "CreatePolicyCvt",
    "createpolicy_fractional", "createpolicy_range", "createpolicy_cvt", "FORMS",
]

R_POLICY = req("7.4", 80)
GLOBAL = StateSpace.global_
T = ScalarType


class L2Priority(enum.Enum):
    """Eviction priorities of createpolicy."""

    evict_last = "L2::evict_last"
    evict_normal = "L2::evict_normal"
    evict_first = "L2::evict_first"
    evict_unchanged = "L2::evict_unchanged"


_SECONDARY = (L2Priority.evict_first, L2Priority.evict_unchanged)


def _priorities(insn: str, primary, secondary) -> tuple[L2Priority, L2Priority | None]:
    p = check_enum(insn, "primary", primary, L2Priority)
    s = None if secondary is None else check_enum(insn, "secondary", secondary, L2Priority,
                                                  _SECONDARY)
    return p, s


def _prio_text(p: L2Priority, s: L2Priority | None) -> str:
    return f".{p.value}" + (f".{s.value}" if s is not None else "")


@attrs.frozen
class CreatePolicyFractional(Instruction):
    """`createpolicy.fractional.primary{.secondary}.b64 d{, fraction};` (PTX 7.4, sm_80).

    primary: L2::evict_last/evict_normal/evict_first/evict_unchanged; secondary:
    L2::evict_first/evict_unchanged; fraction: an .f32 register or immediate in (0, 1].
    """

    MNEMONIC = "createpolicy.fractional"
    d: Reg
    primary: L2Priority = L2Priority.evict_last
    secondary: L2Priority | None = None
    fraction: Any = 1.0
    REQUIRES = R_POLICY

    def __attrs_post_init__(self):
        p, s = _priorities(self.MNEMONIC, self.primary, self.secondary)
        self._set("primary", p)
        self._set("secondary", s)
        n = self.opcode()
        check_dst(n, "d", self.d, ScalarType.b64)
        f = self.fraction
        if isinstance(f, Reg):
            check_dst(n, "fraction", f, ScalarType.f32)
        elif f is not None:
            f = make_imm(n, "fraction", f.value if isinstance(f, Imm) else f, ScalarType.f32)
            if not 0.0 < f.value <= 1.0:
                raise OperandError(n, "fraction", "a fraction in (0, 1]", f.value)
            self._set("fraction", f)

    def opcode(self) -> str:
        return f"createpolicy.fractional{_prio_text(self.primary, self.secondary)}.b64"

    def operands(self):
        return [self.d] + ([self.fraction] if self.fraction is not None else [])


@attrs.frozen
class CreatePolicyRange(Instruction):
    """`createpolicy.range{.global}.primary{.secondary}.b64 d, [a], primary_size, total_size;`
    (PTX 7.4, sm_80); the sizes are .b32 registers or immediates (bytes)."""

    MNEMONIC = "createpolicy.range"
    d: Reg
    a: Any
    primary_size: Any
    total_size: Any
    primary: L2Priority = L2Priority.evict_last
    secondary: L2Priority | None = None
    space: StateSpace = StateSpace.generic
    REQUIRES = R_POLICY

    def __attrs_post_init__(self):
        p, s = _priorities(self.MNEMONIC, self.primary, self.secondary)
        self._set("primary", p)
        self._set("secondary", s)
        self._set("space", check_enum(self.MNEMONIC, "space", self.space, StateSpace,
                                      (StateSpace.generic, GLOBAL)))
        n = self.opcode()
        check_dst(n, "d", self.d, ScalarType.b64)
        self._set("a", check_addr(n, "a", self.a, self.space))
        sizes = []
        for what in ("primary_size", "total_size"):
            v = getattr(self, what)
            v = check_dst(n, what, v, T.b32) if isinstance(v, Reg) else Imm(
                check_imm(n, what, v, 0, 0xFFFFFFFF), T.u32)
            self._set(what, v)
            sizes.append(v)
        primary, total = sizes
        if isinstance(primary, Imm) and isinstance(total, Imm) and primary.value > total.value:
            refuse(n, f"primary_size ({primary.value}) exceeds total_size ({total.value})")

    def opcode(self) -> str:
        return (f"createpolicy.range{self.space.ptx}{_prio_text(self.primary, self.secondary)}"
                ".b64")

    def operands(self):
        return [self.d, self.a, self.primary_size, self.total_size]


@attrs.frozen
class CreatePolicyCvt(Instruction):
    """`createpolicy.cvt.L2.b64 d, access_property;` (PTX 7.4, sm_80): a CUDA
    cudaAccessProperty value (64-bit register or immediate) turned into a cache policy."""

    MNEMONIC = "createpolicy.cvt.L2.b64"
    d: Reg
    access_property: Any
    REQUIRES = R_POLICY

    def __attrs_post_init__(self):
        check_dst(self.MNEMONIC, "d", self.d, T.b64)
        a = self.access_property
        if isinstance(a, Reg):
            check_dst(self.MNEMONIC, "access_property", a, T.b64)
        else:
            self._set("access_property", make_imm(self.MNEMONIC, "access_property",
                                                  a.value if isinstance(a, Imm) else a, T.b64))

    def opcode(self) -> str:
        return self.MNEMONIC

    def operands(self):
        return [self.d, self.access_property]


# -- builders (cuda::ptx names, kernel first) ------------------------------------------------------
def createpolicy_fractional(k, primary="evict_last", secondary=None, fraction=1.0, *,
                            dst: Reg | None = None) -> Reg:
    """A fresh 64-bit cache policy: `createpolicy.fractional.L2::evict_last.b64 d, 1.0`."""
    d = dst if dst is not None else k.reg(T.b64)
    k.emit(CreatePolicyFractional(d, primary, secondary, fraction))
    return d


def createpolicy_range(k, addr, primary_size, total_size, primary="evict_last", secondary=None,
                       *, space=StateSpace.generic, dst: Reg | None = None) -> Reg:
    """`createpolicy.range{.global}.primary{.secondary}.b64 d, [addr], primary_size, total_size`."""
    d = dst if dst is not None else k.reg(T.b64)
    k.emit(CreatePolicyRange(d, addr, primary_size, total_size, primary, secondary, space))
    return d


def createpolicy_cvt(k, access_property, *, dst: Reg | None = None) -> Reg:
    """`createpolicy.cvt.L2.b64 d, access_property`."""
    d = dst if dst is not None else k.reg(T.b64)
    k.emit(CreatePolicyCvt(d, access_property))
    return d


FORMS: list[tuple[str, Requires, str]] = [
    ("createpolicy.fractional", CreatePolicyFractional.REQUIRES, "fraction in (0, 1]"),
    ("createpolicy.range", CreatePolicyRange.REQUIRES, "{.global}"),
    ("createpolicy.cvt.L2", CreatePolicyCvt.REQUIRES, ""),
]
