"""Data movement between registers: mov, isspacep, cvta, cvt (PTX ISA §9.7.9.1, §9.7.9.19,
§9.7.9.20, §9.7.9.21)."""

from __future__ import annotations

import enum

import attrs

from ..errors import OperandError
from ..operands import Imm, Reg, SpecialReg, Symbol
from ..types import BASE, Requires, ScalarType, StateSpace, addr32, req
from .base import Instruction, _given, check_dst, check_enum, check_src

_NO_MOV = frozenset({ScalarType.b8, ScalarType.u8, ScalarType.s8, ScalarType.f16,
                     ScalarType.bf16, ScalarType.f16x2, ScalarType.bf16x2})


@attrs.frozen
class Mov(Instruction):
    """`mov.type d, a;` — a register, immediate, special register, or the address of a symbol."""

    MNEMONIC = "mov"
    type: ScalarType
    d: Reg
    a: object

    def __attrs_post_init__(self):
        name = f"mov.{self.type}"
        if self.type in _NO_MOV:
            raise OperandError("mov", "type", "a .b/.u/.s type of 16 to 128 bits, .f32, .f64 "
                               "or .pred (ptxas has no 8-bit or half-precision mov: move "
                               "halves as .b16/.b32)", f".{self.type}")
        check_dst(name, "d", self.d, self.type)
        if isinstance(self.a, Symbol):
            if self.type.bits not in (32, 64) or self.type.is_float:
                raise OperandError(name, "a", "a .u32/.u64/.b32/.b64 mov to take a symbol's "
                                   "address", f"symbol {self.a.name}")
            if self.type.bits == 32 and not self.a.space.is_shared:
                raise OperandError(name, "a", "a 64-bit mov for a non-shared symbol's address",
                                   f"symbol {self.a.name} in .{self.a.space.value}")
            return
        self._set("a", check_src(name, "a", self.a, self.type, special=True))

    @property
    def requires(self) -> Requires:
        if isinstance(self.a, SpecialReg):
            return req(self.a.requires_version, self.a.requires_sm)
        return BASE

    def opcode(self) -> str:
        return f"mov.{self.type}"

    def operands(self):
        return (self.d, self.a)


_CVTA_32 = addr32("size", ".u32", ".u64")
_CVTA_SPACES = (StateSpace.global_, StateSpace.shared, StateSpace.shared_cta,
                StateSpace.shared_cluster, StateSpace.const, StateSpace.local, StateSpace.param)


@attrs.frozen
class Cvta(Instruction):
    """`cvta.space.size d, a;` (to generic) or `cvta.to.space.size d, a;` (from generic)."""

    MNEMONIC = "cvta"
    space: StateSpace
    to: bool
    d: Reg
    a: object
    size: ScalarType = ScalarType.u64

    def __attrs_post_init__(self):
        self._set("space", check_enum("cvta", "space", self.space, StateSpace, _CVTA_SPACES))
        if self.size not in (ScalarType.u32, ScalarType.u64):
            raise OperandError("cvta", "size", ".u32 or .u64", f".{self.size}")
        name = self.opcode()
        if self.size is ScalarType.u32 and self.space in (StateSpace.shared_cta,
                                                          StateSpace.shared_cluster):
            raise OperandError(name, "size", "the .u64 form: the ::cta/::cluster spaces need "
                               "sm_90, where ptxas refuses 32-bit cvta (no 32-bit addressing)",
                               ".u32")
        check_dst(name, "d", self.d, self.size)
        if isinstance(self.a, Symbol):
            raise OperandError(name, "a", "a register (mov the symbol's address first)",
                               f"symbol {self.a.name}")
        self._set("a", check_src(name, "a", self.a, self.size))

    @property
    def requires(self) -> Requires:
        if self.space in (StateSpace.shared_cta, StateSpace.shared_cluster):
            return req("7.8", 90)
        version = "7.7" if self.space is StateSpace.param else "6.3"
        if self.size is ScalarType.u32:
            return req(version, 75, ceiling=_CVTA_32)
        return req(version, 75) if self.space is StateSpace.param else BASE

    def opcode(self) -> str:
        return f"cvta{'.to' if self.to else ''}{self.space.ptx}.{self.size}"

    def operands(self):
        return (self.d, self.a)


class SpaceWindow(enum.Enum):
    """The state space window `isspacep` tests a generic address against (its `.space`):
    bare `.shared` is `::cta` and bare `.param` is `::entry` (PTX ISA §9.7.9.19)."""

    const = "const"
    global_ = "global"
    local = "local"
    shared = "shared"
    shared_cta = "shared::cta"
    shared_cluster = "shared::cluster"
    param = "param"
    param_entry = "param::entry"


# PTX ISA §9.7.9.19, confirmed with ptxas 13 (each below its version refused: "Feature '::cta'
# requires PTX ISA .version 7.8"); ::cluster needs sm_90, .param sm_70 (below ptxdsl's floor).
_WINDOW_REQUIRES = {
    SpaceWindow.const: BASE, SpaceWindow.global_: BASE, SpaceWindow.local: BASE,
    SpaceWindow.shared: BASE, SpaceWindow.shared_cta: req("7.8"),
    SpaceWindow.shared_cluster: req("7.8", 90), SpaceWindow.param: req("7.7"),
    SpaceWindow.param_entry: req("8.3"),
}
_WINDOW_NAMES = frozenset(w.value for w in SpaceWindow)
_ADDR_TYPES = (ScalarType.u32, ScalarType.u64, ScalarType.b32, ScalarType.b64, ScalarType.s32,
               ScalarType.s64)
# The 32-bit address forms stop at sm_89; ptxas for sm_90a does not always refuse them but may
# crash (nvJitLink killed the process on `mov.u32 %r1, 0; isspacep.global %p, %r1;`), so they
# must never reach it.
_ISSPACEP_32 = addr32("a", "a 32-bit register", "a 64-bit register (.u64, .b64 or .s64)")


@attrs.frozen
class Isspacep(Instruction):
    """`isspacep.space p, a;`: p is whether generic address `a` falls in the `.space` window.

    ``.space = { .const, .global, .local, .shared{::cta, ::cluster}, .param{::entry} }``; `a` a
    32- or 64-bit integer register (the 32-bit form only up to sm_89, `types.addr32`).
    """

    MNEMONIC = "isspacep"
    space: SpaceWindow
    p: Reg
    a: Reg

    def __attrs_post_init__(self):
        space = self.space
        if isinstance(space, StateSpace) and space.value in _WINDOW_NAMES:
            space = space.value                    # StateSpace.shared is the .shared window
        self._set("space", check_enum("isspacep", "space", space, SpaceWindow))
        name = self.opcode()
        check_dst(name, "p", self.p, ScalarType.pred)
        a = self.a
        if not isinstance(a, Reg) or a.type not in _ADDR_TYPES:
            hint = ("; take a symbol's generic address with k.generic_addr"
                    if isinstance(a, Symbol) else "; a constant address has nothing to ask"
                    if isinstance(a, int | float | Imm) else "")
            raise OperandError(name, "a", "a .u32/.u64 register (.b and .s of those sizes "
                               f"too): a generic address{hint}", _given(a))
        if a.type.bits == 32 and self.space is SpaceWindow.shared_cluster:
            raise OperandError(name, "a", "a 64-bit register: ::cluster needs sm_90, where "
                               "ptxas refuses 32-bit addresses", _given(a))

    @property
    def requires(self) -> Requires:
        need = _WINDOW_REQUIRES[self.space]
        return need if self.a.type.bits == 64 else _addr32_req(need)

    def opcode(self) -> str:
        return f"isspacep.{self.space.value}"

    def operands(self):
        return (self.p, self.a)


def _addr32_req(need: Requires) -> Requires:
    return req(str(need.version), need.sm, ceiling=_ISSPACEP_32)


def _isspacep_forms() -> list[tuple[str, Requires, str]]:
    """The forms table's isspacep rows: one per requirement, 64- and 32-bit `a`."""
    rows = []
    for need in dict.fromkeys(_WINDOW_REQUIRES.values()):
        spaces = [w.value for w, r in _WINDOW_REQUIRES.items() if r is need]
        form = "isspacep." + (spaces[0] if len(spaces) == 1 else "{" + ",".join(spaces) + "}")
        rows.append((form + " p, a", need, "a .u64/.b64/.s64 register"))
        if need.sm < 90:
            rows.append((form + " p, a32", _addr32_req(need), "a .u32/.b32/.s32 register: "
                         "ptxas refuses 32-bit addresses from sm_90 on (nvJitLink may crash)"))
    return rows


#: The forms table's rows for this family (`ptxdsl.forms`): isspacep's.
FORMS = _isspacep_forms()


class Rounding(enum.Enum):
    rn = "rn"
    rz = "rz"
    rm = "rm"
    rp = "rp"
    rna = "rna"
    rni = "rni"
    rzi = "rzi"
    rmi = "rmi"
    rpi = "rpi"

    @property
    def is_int(self) -> bool:
        """Whether the mode rounds to an integer value (`.rni`, `.rzi`, `.rmi`, `.rpi`:
        float-to-float and float-to-int conversions) rather than to the destination's precision."""
        return self.value.endswith("i")


_CVT_TYPES = tuple(t for t in ScalarType if t not in (
    ScalarType.pred, ScalarType.b128, ScalarType.f16x2, ScalarType.bf16x2))


@attrs.frozen
class Cvt(Instruction):
    """`cvt{.rnd}{.ftz}{.sat}.dtype.atype d, a;`

    The rounding mode is required by PTX for float->int (an integer rounding: rni/rzi/rmi/rpi),
    int->float and narrowing float->float (rn/rz/rm/rp); it is refused on widening float
    conversions and int->int. Left as None, ptxdsl picks C's semantics (rzi, rn).
    """

    MNEMONIC = "cvt"
    dtype: ScalarType
    atype: ScalarType
    d: Reg
    a: object
    rnd: Rounding | None = None
    ftz: bool = False
    sat: bool = False

    def __attrs_post_init__(self):
        for what, t in (("dtype", self.dtype), ("atype", self.atype)):
            if t not in _CVT_TYPES or t.kind == "b":
                raise OperandError("cvt", what, "an integer or float type", f".{t}")
        d_f, a_f = self.dtype.is_float, self.atype.is_float
        need: str | None
        if a_f and not d_f:
            need = "int"
        elif d_f and not a_f:
            need = "float"
        elif d_f and a_f:
            # f16 <-> bf16 changes the format at one width: a float rounding, or none [ptxas]
            need = ("float" if self.dtype.bits < self.atype.bits else None
                    if self.dtype.bits > self.atype.bits else "int-optional"
                    if self.dtype is self.atype else "float-optional")
        else:
            need = None
        rnd = self.rnd
        if rnd is not None:
            rnd = check_enum("cvt", "rnd", rnd, Rounding)
            if rnd is Rounding.rna:   # ptxas: "Illegal rounding modifier" but for .tf32
                raise OperandError(f"cvt.{self.dtype}.{self.atype}", "rnd", "rn, rz, rm, rp or "
                                   "an integer rounding (.rna only rounds to .tf32)", "rna")
        if rnd is None:
            rnd = {"int": Rounding.rzi, "float": Rounding.rn}.get(need or "")
        elif need is None or (need in ("int", "int-optional") and not rnd.is_int) or (
                need in ("float", "float-optional") and rnd.is_int):
            expected = {"int": "an integer rounding (rni, rzi, rmi, rpi)",
                        "float": "a float rounding (rn, rz, rm, rp)",
                        "int-optional": "an integer rounding or none",
                        "float-optional": "a float rounding (rn, rz, rm, rp) or none",
                        None: "no rounding mode for this conversion"}[need]
            raise OperandError(f"cvt.{self.dtype}.{self.atype}", "rnd", expected, rnd.value)
        self._set("rnd", rnd)
        if self.sat and ScalarType.bf16 in (self.dtype, self.atype):
            raise OperandError(f"cvt.{self.dtype}.{self.atype}", "sat", "no .sat (ptxas refuses "
                               "it on every .bf16 conversion)", "sat=True")
        if self.sat and not (d_f or a_f) and _holds(self.dtype, self.atype):
            raise OperandError(f"cvt.{self.dtype}.{self.atype}", "sat", "an integer conversion "
                               "that can overflow (ptxas refuses .sat when every source value "
                               "fits the destination)", "sat=True")
        name = self.opcode()
        if self.ftz and not (self.atype is ScalarType.f32 or self.dtype is ScalarType.f32):
            raise OperandError(name, "ftz", "an .f32 source or destination", "ftz=True")
        check_dst(name, "d", self.d, self.dtype)
        self._set("a", check_src(name, "a", self.a, self.atype, special=True))

    @property
    def requires(self) -> Requires:
        """bf16 conversions: to bf16 from f32 PTX 7.0 / sm_80, f32 from bf16 PTX 7.1 / sm_80
        (without .ftz), every other bf16 conversion PTX 7.8 / sm_90 [ptxas 13]."""
        bf16 = ScalarType.bf16
        if bf16 not in (self.dtype, self.atype):
            return BASE
        pair = (self.dtype, self.atype)
        if pair == (bf16, ScalarType.f32):
            return req("7.0", 80)
        if pair == (ScalarType.f32, bf16) and not self.ftz:
            return req("7.1", 80)
        return req("7.8", 90)

    def opcode(self) -> str:
        q = "cvt"
        if self.rnd is not None:
            q += "." + self.rnd.value
        if self.ftz:
            q += ".ftz"
        if self.sat:
            q += ".sat"
        return f"{q}.{self.dtype}.{self.atype}"

    def operands(self):
        return (self.d, self.a)


def _holds(dst: ScalarType, src: ScalarType) -> bool:
    """Whether integer type `dst` represents every value of integer type `src`."""
    if src.kind == "s":
        return dst.kind == "s" and dst.bits >= src.bits
    return dst.bits > src.bits or dst.kind != "s" and dst.bits == src.bits
