"""Integer, float and bitwise arithmetic (PTX ISA §9.7.1-9.7.3, §9.7.8).

One class per operand shape: `Binary` (add, sub, mul, div, rem, min, max, and, or, xor, shl,
shr), `Unary` (abs, neg, not) and `Mad`. A table says which types and qualifiers each
operation accepts.
"""

from __future__ import annotations

import attrs

from ..errors import OperandError
from ..operands import Reg
from ..types import Requires, req
from ..types import ScalarType as T
from .base import Instruction, check_choice, check_dst, check_src

_INT = (T.u16, T.u32, T.u64, T.s16, T.s32, T.s64)
_FLOAT = (T.f32, T.f64)
# Half and bfloat16, scalar and packed pairs (add/sub/mul/min/max/abs/neg only): nvcc's
# __half2 / __nv_bfloat162 math and Triton's fp16 reductions write them.
_HALF = (T.f16, T.f16x2, T.bf16, T.bf16x2)
_FTZ = (T.f32, T.f16, T.f16x2)    # .ftz: f32 and f16 forms (bf16 has no denormal mode)
_BF16 = (T.bf16, T.bf16x2)
# (op group, half type) -> the PTX ISA version and target where the form appeared (ISA
# §9.7.4): min/max on halves and the bf16 unary forms at sm_80, bf16 add/sub/mul at sm_90.
_HALF_REQ = {"minmax": req("7.0", 80), "unary_bf16": req("7.0", 80),
             "unary_f16": req("6.5"), "arith_bf16": req("7.8", 90)}
_BITS = (T.b16, T.b32, T.b64, T.pred)
_FRND = ("rn", "rz", "rm", "rp")
# add.sat.u32 (unsigned, clamps at 2^32 - 1): PTX ISA 9.2, and only the sm_120/121 family's
# targets (nvJitLink 13.5's ptxas: "Feature 'add.sat' not supported on .target 'sm_90a'"; the
# same for sm_100a, 103a, 110a and the plain sm_120)
ADD_SAT_U32 = req("9.2", 120, arch=(120, 121), family=True)


def _half_requires(op: str, t: T) -> Requires | None:
    if t not in _HALF:
        return None
    if op in ("min", "max"):
        return _HALF_REQ["minmax"]
    if op in ("abs", "neg"):
        return _HALF_REQ["unary_bf16" if t in _BF16 else "unary_f16"]
    return _HALF_REQ["arith_bf16"] if t in _BF16 else None


# op -> accepted types
_TYPES: dict[str, tuple[T, ...]] = {
    "add": _INT + _FLOAT + _HALF, "sub": _INT + _FLOAT + _HALF, "mul": _INT + _FLOAT + _HALF,
    "div": _INT + _FLOAT, "rem": _INT, "min": _INT + _FLOAT + _HALF,
    "max": _INT + _FLOAT + _HALF,
    "and": _BITS, "or": _BITS, "xor": _BITS,
    "shl": (T.b16, T.b32, T.b64), "shr": (T.b16, T.b32, T.b64) + _INT,
    "abs": (T.s16, T.s32, T.s64) + _FLOAT + _HALF,
    "neg": (T.s16, T.s32, T.s64) + _FLOAT + _HALF,
    "not": _BITS,
}


_BINARY_OPS = tuple(k for k in _TYPES if k not in ("abs", "neg", "not"))
# (op, type, mode) -> the normalised mode, for combinations that passed the op/type/mode checks
# once (the checks are pure functions of the three, so the answer cannot change).
_BINARY_MODES: dict[tuple, str | None] = {}
_UNSEEN = object()


def as_bits(t: T) -> T:
    """Logic ops take bit types: u32/s32 registers are used with and.b32 and so on."""
    hit = _AS_BITS.get(t)
    if hit is not None:
        return hit
    if t is T.pred or t.kind == "b":
        return t
    return {16: T.b16, 32: T.b32, 64: T.b64}.get(t.bits, t)


_AS_BITS: dict[T, T] = {}
_AS_BITS.update((t, as_bits(t)) for t in T)
_LOGIC = frozenset(("and", "or", "xor", "shl"))
_MOVES_ADDRESS = frozenset(("add", "sub"))   # keep a known address known (ptxdsl.provenance)
_WIDE = {T.u16: T.u32, T.u32: T.u64, T.s16: T.s32, T.s32: T.s64}


def _check_type(op: str, t: T) -> None:
    if t not in _TYPES[op]:
        raise OperandError(op, "type", "one of " + ", ".join("." + x.value for x in _TYPES[op]),
                           f".{t.value}")


def _mode(op: str, t: T, mode: str | None) -> str | None:
    """The mandatory/optional qualifier of mul/mad/div/add on this type."""
    if op in ("mul", "mad") and t.is_int:
        mode = check_choice(f"{op}.{t}", "mode", mode or "lo", ("lo", "hi", "wide"))
        if mode == "wide" and t.bits == 64:
            raise OperandError(f"{op}.wide.{t}", "type", "a 16- or 32-bit type for .wide",
                               f".{t}")
        return mode
    if op == "div" and t.is_float:
        allowed = (*_FRND, "approx", "full") if t is T.f32 else _FRND
        return check_choice(f"div.{t}", "mode", mode or "rn", allowed)
    if op == "mad" and t.is_float:
        return check_choice(f"mad.{t}", "mode", mode or "rn", _FRND)
    if op in ("add", "sub", "mul") and t in _HALF:   # the half forms round only to nearest
        return None if mode is None else check_choice(f"{op}.{t}", "mode", mode, ("rn",))
    if op in ("add", "sub", "mul") and t.is_float:
        return None if mode is None else check_choice(f"{op}.{t}", "mode", mode, _FRND)
    if mode is not None:
        raise OperandError(f"{op}.{t}", "mode", "no qualifier", repr(mode))
    return None


@attrs.frozen
class Binary(Instruction):
    """`op{.mode}{.ftz}{.sat}.type d, a, b;` for the two-source arithmetic and logic ops."""

    MNEMONIC = "binary"
    op: str
    type: T
    d: Reg
    a: object
    b: object
    mode: str | None = None
    ftz: bool = False
    sat: bool = False

    def __attrs_post_init__(self):
        key = (self.op, self.type, self.mode)
        mode = _BINARY_MODES.get(key, _UNSEEN)
        if mode is _UNSEEN:  # first time for this (op, type, mode): the full checks
            check_choice("arith", "op", self.op, _BINARY_OPS)
            _check_type(self.op, self.type)
            mode = _BINARY_MODES[key] = _mode(self.op, self.type, self.mode)
        object.__setattr__(self, "mode", mode)
        name = self  # named lazily, only when a check fails
        if self.ftz and self.type not in _FTZ:
            raise OperandError(self.name, "ftz", "an .f32, .f16 or .f16x2 instruction",
                               f".{self.type}")
        if self.sat and not (self.type is T.s32 and self.op in ("add", "sub")
                             or self.type is T.u32 and self.op == "add"
                             or self.type is T.f32
                             or self.type in _FTZ and self.op in ("add", "sub", "mul")):
            raise OperandError(self.name, "sat", "add/sub.s32, add.u32 (PTX 9.2, sm_120f), an "
                               ".f32 op or add/sub/mul.f16", f".{self.type}")
        dtype = self.type
        if self.mode == "wide":
            dtype = {T.u16: T.u32, T.u32: T.u64, T.s16: T.s32, T.s32: T.s64}[self.type]
        check_dst(name, "d", self.d, dtype)
        self._set("a", check_src(name, "a", self.a, self.type))
        btype = T.u32 if self.op in ("shl", "shr") else self.type
        self._set("b", check_src(name, "b", self.b, btype))

    def opcode(self) -> str:
        q = self.op
        if self.mode:
            q += "." + self.mode
        if self.ftz:
            q += ".ftz"
        if self.sat:
            q += ".sat"
        return f"{q}.{self.type}"

    @property
    def requires(self) -> Requires:
        if self.sat and self.type is T.u32:
            return ADD_SAT_U32
        return _half_requires(self.op, self.type) or type(self).REQUIRES

    def operands(self):
        return (self.d, self.a, self.b)


@attrs.frozen
class Unary(Instruction):
    """`abs.type d, a;`, `neg.type d, a;`, `not.type d, a;`"""

    MNEMONIC = "unary"
    op: str
    type: T
    d: Reg
    a: object
    ftz: bool = False

    def __attrs_post_init__(self):
        check_choice("unary", "op", self.op, ("abs", "neg", "not"))
        _check_type(self.op, self.type)
        name = self.opcode()
        if self.ftz and (self.type not in _FTZ or self.op == "not"):
            raise OperandError(name, "ftz", "an .f32, .f16 or .f16x2 abs/neg", f".{self.type}")
        check_dst(name, "d", self.d, self.type)
        self._set("a", check_src(name, "a", self.a, self.type))

    def opcode(self) -> str:
        return f"{self.op}{'.ftz' if self.ftz else ''}.{self.type}"

    @property
    def requires(self) -> Requires:
        return _half_requires(self.op, self.type) or type(self).REQUIRES

    def operands(self):
        return (self.d, self.a)


@attrs.frozen
class Mad(Instruction):
    """`mad.{lo,hi,wide}.type d, a, b, c;` (integers) or `mad.rnd{.ftz}{.sat}.f32 d, a, b, c;`"""

    MNEMONIC = "mad"
    type: T
    d: Reg
    a: object
    b: object
    c: object
    mode: str | None = None
    ftz: bool = False

    def __attrs_post_init__(self):
        if self.type not in _INT + _FLOAT:
            raise OperandError("mad", "type", "an integer or .f32/.f64 type", f".{self.type}")
        self._set("mode", _mode("mad", self.type, self.mode))
        name = self.opcode()
        if self.ftz and self.type is not T.f32:
            raise OperandError(name, "ftz", "an .f32 instruction", f".{self.type}")
        wide = {T.u16: T.u32, T.u32: T.u64, T.s16: T.s32, T.s32: T.s64}
        dtype = wide[self.type] if self.mode == "wide" else self.type
        check_dst(name, "d", self.d, dtype)
        self._set("a", check_src(name, "a", self.a, self.type))
        self._set("b", check_src(name, "b", self.b, self.type))
        self._set("c", check_src(name, "c", self.c, dtype))

    def opcode(self) -> str:
        return f"mad.{self.mode}{'.ftz' if self.ftz else ''}.{self.type}"

    def operands(self):
        return (self.d, self.a, self.b, self.c)
