"""Warpgroup tensor-core MMA: `wgmma.mma_async` (dense) and its fence / commit / wait
instructions (PTX ISA §9.7.15; sm_90a only). The sparse form is in `wgmma_sp.py`.

::

    wgmma.mma_async.sync.aligned.m64nNkK.dtype.atype.btype  d, a-desc|{a}, b-desc, scale-d
        {, imm-scale-a, imm-scale-b {, imm-trans-a}, imm-trans-b};

One class serves every shape and type: the table `KINDS` says, per input type, the K of one
instruction, the accumulator types, the legal N, and which of the immediates the type takes.
The rules come from the ISA and were each confirmed against ptxas 13.0 (where they differ the
tools win: `.bf16` inputs take only `.f32` accumulators; mixed `.s8`/`.u8` pairs need PTX 8.4).

Builders take the kernel first: `wgmma_mma_async(k, d, a, b_desc, scale_d, ...)`,
`wgmma_fence(k)`, `wgmma_commit_group(k)`, `wgmma_wait_group(k, n)`. `d` may be a tuple of
registers or a `Fragment` (`k.fragment(...)`), whose registers and type it uses.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from typing import Any

import attrs

from ..errors import OperandError
from ..operands import Imm, NegPred, Reg, Vec, make_imm
from ..types import Requires, ScalarType, req
from .base import (
    Instruction,
    _given,
    check_dst,
    check_imm,
    check_one_type,
    check_pred,
    refuse,
)
from .wgmma_desc import MatrixDescriptor

__all__ = ["wgmma_mma_async", "wgmma_fence", "wgmma_commit_group", "wgmma_wait_group"]

T = ScalarType
WGMMA = req("8.0", 90, arch=(90,))
WGMMA_MIXED_INT = req("8.4", 90, arch=(90,))


class WgmmaType(enum.Enum):
    """A wgmma input (multiplicand) type; the value is its PTX spelling."""

    f16 = "f16"
    bf16 = "bf16"
    tf32 = "tf32"
    e4m3 = "e4m3"
    e5m2 = "e5m2"
    s8 = "s8"
    u8 = "u8"
    b1 = "b1"

    @property
    def bits(self) -> int:
        """The element's width in bits."""
        return _BITS[self]


_BITS = {WgmmaType.f16: 16, WgmmaType.bf16: 16, WgmmaType.tf32: 32, WgmmaType.e4m3: 8,
         WgmmaType.e5m2: 8, WgmmaType.s8: 8, WgmmaType.u8: 8, WgmmaType.b1: 1}

def ptx_type_named(name: str) -> ScalarType | WgmmaType | None:
    """The PTX or wgmma type a spelling names ('f16', '.u8', 'e4m3', 'tf32'), else None.

    The one reading of a type string as PTX: numpy reads 'f16' as float128 and 'u8' as uint64,
    so a dtype string is tried here before numpy sees it (expect_tx bytes, tensor-map types).
    """
    name = name.strip().lstrip(".")
    if name in ScalarType._value2member_map_:
        return ScalarType(name)
    return WgmmaType(name) if name in WgmmaType._value2member_map_ else None


def layout_type(dtype: Any) -> WgmmaType | None:
    """The wgmma type an `SmemLayout`'s dtype names (t.bf16, 'e4m3', WgmmaType.s8), None for
    a bare width (16, t.b16, t.f32 for tf32 data)."""
    text = dtype.value if isinstance(dtype, ScalarType | WgmmaType) else dtype
    if not isinstance(text, str):
        return None
    # the enum's value map is typed as holding Enum members; every member is a WgmmaType
    return WgmmaType._value2member_map_.get(text.strip().lstrip("."))  # type: ignore[return-value]


def numpy_code(value: Any) -> str | None:
    """numpy's full name for `value` when it is a string numpy reads only as a code ('f8' is
    float64 to numpy, an 8-bit float to a PTX reader; 'u4' uint32, not 4 bits; '<u2', 'float'):
    callers refuse those as ambiguous and take full names ('float16', 'uint8') and PTX names."""
    if not isinstance(value, str) or ptx_type_named(value) is not None:
        return None
    import numpy as np
    try:
        name = np.dtype(value).name
    except (TypeError, ValueError):
        return None
    return None if value.strip().lower() == name else name


# The N the integer and b1 forms allow (ISA: 8, 16, 24 and the multiples of 16 up to 256).
INT_N = (8, 16, 24, *range(32, 257, 16))
ALL_N = tuple(range(8, 257, 8))


@attrs.frozen
class Kind:
    """What one family of input types allows (a row of the ISA's wgmma type table)."""

    types: tuple[WgmmaType, ...]      # atype and btype both from here
    k: int                            # K of one dense instruction (sparse: twice this)
    dtypes: tuple[ScalarType, ...]
    n: tuple[int, ...]
    scale_ab: bool                    # takes imm-scale-a / imm-scale-b
    transpose: bool                   # takes imm-trans-a / imm-trans-b
    same_types: bool                  # atype must equal btype
    sel: tuple[int, ...]              # legal sparsity selectors (wgmma.mma_async.sp)
    name: str


W = WgmmaType
KINDS: tuple[Kind, ...] = (
    Kind((W.f16,), 16, (T.f16, T.f32), ALL_N, True, True, True, (0, 1), "f16"),
    Kind((W.bf16,), 16, (T.f32,), ALL_N, True, True, True, (0, 1), "bf16"),
    Kind((W.tf32,), 8, (T.f32,), ALL_N, True, False, True, (0, 1), "tf32"),
    Kind((W.e4m3, W.e5m2), 32, (T.f16, T.f32), ALL_N, True, False, False, (0,), "fp8"),
    Kind((W.s8, W.u8), 32, (T.s32,), INT_N, False, False, False, (0,), "integer"),
    Kind((W.b1,), 256, (T.s32,), INT_N, False, False, True, (), "b1"),
)
KIND_OF = {ty: kind for kind in KINDS for ty in kind.types}


def check_wtype(insn: Any, operand: str, value: Any) -> WgmmaType:
    """A wgmma input type: WgmmaType, its spelling ('bf16', '.e4m3') or a ptxdsl type (t.bf16)."""
    if isinstance(value, WgmmaType):
        return value
    text = value.value if isinstance(value, ScalarType) else value
    if isinstance(text, str):
        for w in WgmmaType:
            if w.value == text.lstrip("."):
                return w
    names = ", ".join(repr(w.value) for w in WgmmaType)
    raise OperandError(insn, operand, f"one of {names}", _given(value))


def d_register_type(dtype: ScalarType) -> ScalarType:
    """The register type of one accumulator register: .f16 accumulators come packed in pairs."""
    return T.f16x2 if dtype is T.f16 else dtype


def d_count(n: int, dtype: ScalarType) -> int:
    """Accumulator registers per thread for m64nN: 64*N/128 values, two .f16 to a register."""
    return n // 4 if dtype is T.f16 else n // 2


def check_desc(insn: Any, operand: str, value: Any) -> Reg | Imm:
    """A matrix descriptor: a 64-bit register, or a descriptor known at build time (an int)."""
    if isinstance(value, Reg):
        if value.type.bits != 64 or value.type.kind not in "bus":
            raise OperandError(insn, operand, "a 64-bit register holding a matrix descriptor "
                               "(.b64/.u64)", _given(value))
        return value
    if isinstance(value, MatrixDescriptor):
        return check_desc(insn, operand, value.value)   # its register or folded constant
    if isinstance(value, int) and not isinstance(value, bool):
        return make_imm(insn, operand, value, T.u64)
    if isinstance(value, Imm):
        return make_imm(insn, operand, value.value, T.u64)
    raise OperandError(insn, operand, "a 64-bit register holding a matrix descriptor, or a "
                       "descriptor value (an int, e.g. MatrixDescriptor.encode())", _given(value))


def check_scale_d(insn: Any, value: Any) -> Reg | NegPred | Imm:
    """scale-d: a predicate (or its negation) or the immediate 0 (D = A*B) / 1 (D += A*B)."""
    if isinstance(value, bool):
        value = int(value)
    if isinstance(value, int | Imm):
        return Imm(check_imm(insn, "scale_d", value, 0, 1), T.pred)
    return check_pred(insn, "scale_d", value, negatable=True)


def check_regs(insn: Any, operand: str, values: Any, count: int, t: ScalarType,
               what: str) -> tuple[Reg, ...]:
    """A register list operand of wgmma: exactly `count` distinct registers of type `t` (a
    `Fragment` gives its registers); `what` names them in the error."""
    values = getattr(values, "regs", values)   # a Fragment passes its registers
    if not isinstance(values, Sequence) or isinstance(values, str):
        raise OperandError(insn, operand, f"{count} {what}", _given(values))
    if len(values) != count:
        raise OperandError(insn, operand, f"{count} {what}", f"{len(values)} registers")
    regs = tuple(check_dst(insn, f"{operand}[{i}]", r, t) for i, r in enumerate(values))
    check_one_type(insn, operand, regs)
    check_distinct(insn, operand, regs)
    return regs


def check_distinct(insn: Any, operand: str, regs: Sequence[Reg]) -> None:
    """Registers that each hold their own value (accumulators, a fragment): one given twice
    collapses two values into one; ptxas takes it and the results are silently wrong."""
    seen: dict[str, int] = {}   # by name: Reg's == builds a setp
    for i, r in enumerate(regs):
        if r.name in seen:
            raise OperandError(insn, operand, f"{len(regs)} distinct registers", f"%{r.name} "
                               f"as {operand}[{seen[r.name]}] and {operand}[{i}]")
        seen[r.name] = i


def _imm(value: int) -> Imm:
    return Imm(value, T.s32)


@attrs.frozen
class WgmmaMmaAsync(Instruction):
    """`wgmma.mma_async.sync.aligned.m64nNkK.dtype.atype.btype{.satfinite}{.and.popc}
    d, a-desc|{a0..a3}, b-desc, scale-d{, imm-scale-a, imm-scale-b{, imm-trans-a}, imm-trans-b};`

    `a` is a descriptor (64-bit register or int) for A in shared memory (SS), or a tuple of 4
    .b32 registers for A in registers (RS). `d` holds the accumulators (read and written).
    """

    MNEMONIC = "wgmma.mma_async"
    #: Whether the form is the sparse `.sp` one (twice the K; `WgmmaMmaAsyncSp`).
    SPARSE = False
    n: int
    dtype: ScalarType
    atype: WgmmaType
    btype: WgmmaType
    d: tuple[Reg, ...]
    a: Reg | Imm | tuple[Reg, ...]
    b_desc: Reg | Imm
    scale_d: Reg | NegPred | Imm = attrs.field(factory=lambda: Imm(1, T.pred))
    imm_scale_a: int | None = None
    imm_scale_b: int | None = None
    tnspA: int | None = None
    tnspB: int | None = None
    satfinite: bool = False

    def __attrs_post_init__(self):
        insn = self.MNEMONIC
        atype = check_wtype(insn, "atype", self.atype)
        btype = check_wtype(insn, "btype", self.btype)
        self._set("atype", atype)
        self._set("btype", btype)
        kind = KIND_OF[atype]
        if btype not in kind.types or kind.same_types and btype is not atype:
            want = " or ".join(f".{w.value}" for w in (kind.types if not kind.same_types
                                                      else (atype,)))
            refuse(insn, f"atype .{atype.value} pairs with btype {want} only "
                   f"(got .{btype.value})")
        if self.SPARSE and atype is W.b1:
            refuse(insn + ".sp", "b1 has no sparse form (wgmma.mma_async.sp takes f16, bf16, "
                   "tf32, e4m3/e5m2 and s8/u8 inputs)")
        dtype = self.dtype
        if isinstance(dtype, str):
            dtype = next((t for t in T if t.value == dtype.lstrip(".")), dtype)
        if dtype not in kind.dtypes:
            given = "." + dtype.value if isinstance(dtype, T) else _given(dtype)
            refuse(insn, f".{atype.value} inputs accumulate in "
                   + " or ".join(f".{t.value}" for t in kind.dtypes) + f" only (got {given})")
        self._set("dtype", dtype)
        n = self.n
        if isinstance(n, bool) or not isinstance(n, int) or n not in kind.n:
            allowed = ("8..256 in steps of 8" if kind.n == ALL_N
                       else "8, 16, 24 or a multiple of 16 up to 256")
            refuse(insn, f"N must be {allowed} for {kind.name} inputs (got {n!r})")
        name = self.name
        self._set("d", check_regs(name, "d", self.d, d_count(n, dtype), d_register_type(dtype),
                                  f"accumulator registers of .{d_register_type(dtype).value} "
                                  f"(m64n{n}, .{dtype.value})"))
        rs = not isinstance(self.a, Reg | Imm | int | MatrixDescriptor)
        self._check_layouts(name, atype, btype)
        if rs:
            self._check_a_fragment(name, atype)
            a = check_regs(name, "a", self.a, 4, T.b32,
                           "32-bit registers holding A's fragment (m64 x k of one instruction)")
            if kind.name != "integer" and any(r.type is T.f32 for r in a):
                # ptxas 13.0 refuses .f32 registers here, even for tf32 values.
                raise OperandError(name, "a", "4 .b32 (or .u32/.s32/.f16x2/.bf16x2) registers "
                                   "holding A's fragment; move .f32 values in with mov.b32",
                                   "a .f32 register")
            self._set("a", a)
        else:
            self._set("a", check_desc(name, "a", self.a))
        self._set("b_desc", check_desc(name, "b_desc", self.b_desc))
        self._set("scale_d", check_scale_d(name, self.scale_d))
        self._check_immediates(name, kind, rs)
        if self.satfinite and atype not in (W.s8, W.u8):
            refuse(name, ".satfinite applies to the s8/u8 forms only "
                   f"(not .{atype.value})")
        self._check_extra(name, kind)

    def _check_layouts(self, name: str, atype: WgmmaType, btype: WgmmaType) -> None:
        """A MatrixDescriptor knows its tile: its element width must be the input type's (and
        its element type, when the layout names one: a bf16 tile read as .f16 is other
        numbers), it must hold what one instruction reads (A: 64 rows, B: N rows, both a
        whole number of the instruction's K: wgmma reads past a smaller tile), and its
        major-ness sets the transpose flag (MN-major: 1), which a contradicting tnspA / tnspB
        may not override. Bare descriptor values (registers, ints) say nothing."""
        # the sparse form's A holds half of K (its compressed values)
        for operand, value, wtype, flag, rows, k in (
                ("a", self.a, atype, "tnspA", 64, self.kind.k),
                ("b_desc", self.b_desc, btype, "tnspB", self.n, self.k)):
            if not isinstance(value, MatrixDescriptor):
                continue
            layout = value.layout
            if layout.bits != wtype.bits:
                raise OperandError(name, operand, f"a descriptor of a tile of {wtype.bits}-bit "
                                   f"elements (.{wtype.value} inputs)",
                                   f"a descriptor of a {layout.describe()} tile")
            named = layout_type(layout.dtype)
            if named not in (None, wtype):
                raise OperandError(name, operand, f"a descriptor of a tile of .{wtype.value} "
                                   "elements (or of a bare width: SmemLayout(16, ...))",
                                   f"a descriptor of a {layout.describe()} tile of "
                                   f".{named.value}")
            if layout.mn < rows or layout.k % k:
                raise OperandError(name, operand, f"a descriptor of a tile of at least {rows} "
                                   f"rows (m64n{self.n}k{self.k}) and a multiple of {k} "
                                   "along K (what one instruction reads)",
                                   f"a descriptor of a {layout.describe()} tile")
            given = getattr(self, flag)
            if given is None and layout.transpose:
                self._set(flag, 1)
            elif given is not None and not isinstance(given, bool) and given in (0, 1) \
                    and given != layout.transpose:
                raise OperandError(name, flag, f"{layout.transpose} for a descriptor of a "
                                   f"{layout.describe()} tile (or leave it out)", given)

    def _check_a_fragment(self, name: str, atype: WgmmaType) -> None:
        """A fragment (`k.a_fragment(dtype)`, or a packed accumulator) holds values of one type,
        which must be the instruction's atype."""
        values = getattr(self.a, "packed", None) or getattr(self.a, "dtype", None)
        if values is None:
            return
        spelled = str(getattr(values, "value", values)).lstrip(".")
        if spelled != atype.value:
            raise OperandError(name, "a", f"A's fragment of .{atype.value} values (atype)",
                               f"a fragment of .{spelled} values")

    def _check_extra(self, name: str, kind: Kind) -> None:
        """Hook for the sparse form's metadata operands."""

    def _check_immediates(self, name: str, kind: Kind, rs: bool) -> None:
        for field, ok, lo_hi, why in (
                ("imm_scale_a", kind.scale_ab, (-1, 1), f"{kind.name} inputs take no "
                 "imm-scale-a/imm-scale-b (only the floating-point forms negate A or B)"),
                ("imm_scale_b", kind.scale_ab, (-1, 1), f"{kind.name} inputs take no "
                 "imm-scale-a/imm-scale-b (only the floating-point forms negate A or B)"),
                ("tnspA", kind.transpose and not rs, (0, 1),
                 "A from registers takes no imm-trans-a (the fragment's layout is fixed)"
                 if rs and kind.transpose else f"{kind.name} inputs take no transpose "
                 "(imm-trans-a/imm-trans-b exist for .f16/.bf16 only; use a K-major layout)"),
                ("tnspB", kind.transpose, (0, 1), f"{kind.name} inputs take no transpose "
                 "(imm-trans-a/imm-trans-b exist for .f16/.bf16 only; use a K-major layout)")):
            value = getattr(self, field)
            if value is None:
                continue
            if not ok:
                refuse(name, why)
            value = check_imm(name, field, value, *lo_hi)
            if field.startswith("imm_scale") and value == 0:
                refuse(name, f"{field.replace('_', '-')} must be 1 or -1 (got 0)")
            # The default (scale 1, no transpose) is kept as left out: the PTX is the same, so
            # an instruction given it explicitly equals one built or read without it.
            self._set(field, None if value == (1 if field.startswith("imm") else 0) else value)

    @property
    def kind(self) -> Kind:
        """The family of the A/B element type (f16/bf16, tf32, fp8, integer), which fixes K and the
        allowed accumulator types."""
        return KIND_OF[self.atype]

    @property
    def k(self) -> int:
        """The K of the shape: the kind's K, doubled for the sparse form."""
        return self.kind.k * (2 if self.SPARSE else 1)

    @property
    def shape(self) -> str:
        """The shape qualifier, `m64nNkK`."""
        return f"m64n{self.n}k{self.k}"

    @property
    def rs(self) -> bool:
        """A comes from registers."""
        return isinstance(self.a, tuple)

    @property
    def requires(self) -> Requires:
        if self.atype is not self.btype and self.atype in (W.s8, W.u8):
            return WGMMA_MIXED_INT
        return WGMMA

    def opcode(self) -> str:
        sp = ".sp" if self.SPARSE else ""
        text = (f"wgmma.mma_async{sp}.sync.aligned.{self.shape}.{self.dtype.value}"
                f".{self.atype.value}.{self.btype.value}")
        if self.satfinite:
            text += ".satfinite"
        if self.atype is W.b1:
            text += ".and.popc"
        return text

    def _tail(self) -> list:
        """scale-d and the immediates the type takes (defaults filled in)."""
        kind = self.kind
        ops: list = [self.scale_d]
        if kind.scale_ab:
            ops += [_imm(1 if self.imm_scale_a is None else self.imm_scale_a),
                    _imm(1 if self.imm_scale_b is None else self.imm_scale_b)]
        if kind.transpose and kind.scale_ab:
            if not self.rs:
                ops.append(_imm(self.tnspA or 0))
            ops.append(_imm(self.tnspB or 0))
        return ops

    def _a_operand(self):
        return Vec(self.a) if self.rs else self.a

    def operands(self):
        return (Vec(self.d), self._a_operand(), self.b_desc, *self._tail())


@attrs.frozen
class WgmmaFence(Instruction):
    """`wgmma.fence.sync.aligned;` — orders register accesses before the next wgmma.mma_async
    (needed before the first one and after any write of its accumulators or A registers)."""

    MNEMONIC = "wgmma.fence"
    REQUIRES = WGMMA

    def opcode(self) -> str:
        return "wgmma.fence.sync.aligned"


@attrs.frozen
class WgmmaCommitGroup(Instruction):
    """`wgmma.commit_group.sync.aligned;` — closes the group of the uncommitted wgmma ops."""

    MNEMONIC = "wgmma.commit_group"
    REQUIRES = WGMMA

    def opcode(self) -> str:
        return "wgmma.commit_group.sync.aligned"


@attrs.frozen
class WgmmaWaitGroup(Instruction):
    """`wgmma.wait_group.sync.aligned N;` — waits until at most N groups are pending (0..7)."""

    MNEMONIC = "wgmma.wait_group"
    REQUIRES = WGMMA
    n: int

    def __attrs_post_init__(self):
        # ptxas 13.0 also takes 8 and up; ptxdsl keeps to the 0..7 that CUTLASS's
        # warpgroup_wait allows (the range): waiting on more groups than can be in
        # flight is a mistake, not a wait.
        self._set("n", check_imm(self.MNEMONIC, "n", self.n, 0, 7))

    def opcode(self) -> str:
        return "wgmma.wait_group.sync.aligned"

    def operands(self):
        return (_imm(self.n),)


# -- builder functions (PTX names, kernel first) ----------------------------------------------
def _dtype_of(d: Any, dtype: Any) -> Any:
    """The accumulator type: given, or the fragment's, or read off the registers (.f32/.s32;
    packed .f16x2 registers mean .f16 accumulators)."""
    if dtype is not None:
        return dtype
    frag = getattr(d, "dtype", None)
    if frag is not None:
        return frag
    regs = getattr(d, "regs", d)
    if isinstance(regs, Sequence) and regs and isinstance(regs[0], Reg):
        t = regs[0].type
        return {T.f16x2: T.f16, T.s32: T.s32, T.u32: T.s32, T.f32: T.f32}.get(t, t)
    return T.f32


def _n_of(d: Any, dtype: Any, n: int | None) -> Any:
    if n is not None:
        return n
    regs = getattr(d, "regs", d)
    if isinstance(regs, Sequence) and not isinstance(regs, str):
        per = 4 if dtype is T.f16 or dtype == "f16" else 2
        if len(regs) * per not in ALL_N:
            # Say it in the user's terms: they gave registers, not an N.
            raise OperandError("wgmma.mma_async", "d", f"the accumulator registers of an m64nN "
                               f"tile, N/{per} of them for N = 8..256 in steps of 8 (or pass "
                               "n=)", f"{len(regs)} registers")
        return len(regs) * per
    return None


def wgmma_mma_async(k, d, a, b_desc, scale_d=1, imm_scale_a=None, imm_scale_b=None,
                    tnspA=None, tnspB=None, *, atype, btype=None, dtype=None, n=None,
                    satfinite=False) -> WgmmaMmaAsync:
    """`wgmma.mma_async.sync.aligned.m64nNkK.dtype.atype.btype d, a, b-desc, scale-d, ...;`

    `d`: the accumulators (a Fragment or a tuple of registers; N and the accumulator type are
    read from it unless given); `a`: a descriptor (register, int or MatrixDescriptor) or 4
    registers (RS); `b_desc`: a descriptor. Immediates the type does not take are refused.
    """
    btype = atype if btype is None else btype
    dtype = _dtype_of(d, dtype)
    return k.emit(WgmmaMmaAsync(_n_of(d, dtype, n), dtype, atype, btype, d, a, b_desc,
                                scale_d, imm_scale_a, imm_scale_b, tnspA, tnspB, satfinite))


def wgmma_fence(k) -> WgmmaFence:
    """`wgmma.fence.sync.aligned;`"""
    return k.emit(WgmmaFence())


def wgmma_commit_group(k) -> WgmmaCommitGroup:
    """`wgmma.commit_group.sync.aligned;`"""
    return k.emit(WgmmaCommitGroup())


def wgmma_wait_group(k, n) -> WgmmaWaitGroup:
    """`wgmma.wait_group.sync.aligned N;` (N in 0..7)."""
    return k.emit(WgmmaWaitGroup(n))


# -- forms: (form, requires, note) — rendered by ptxdsl.forms ----------------------------------
_TAIL = "d, a-desc|{a}, b-desc, scale-d"
FORMS: list[tuple[str, Requires, str]] = [
    ("wgmma.mma_async.sync.aligned.m64nNk16.{f16,f32}.f16.f16 " + _TAIL
     + ", ±1, ±1{, tA}, tB", WGMMA, "N = 8..256 step 8; RS form takes no tA"),
    ("wgmma.mma_async.sync.aligned.m64nNk16.f32.bf16.bf16 " + _TAIL + ", ±1, ±1{, tA}, tB",
     WGMMA, "ptxas refuses .f16 accumulators for bf16"),
    ("wgmma.mma_async.sync.aligned.m64nNk8.f32.tf32.tf32 " + _TAIL + ", ±1, ±1", WGMMA,
     "no transpose"),
    ("wgmma.mma_async.sync.aligned.m64nNk32.{f16,f32}.{e4m3,e5m2}.{e4m3,e5m2} " + _TAIL
     + ", ±1, ±1", WGMMA, "no transpose"),
    ("wgmma.mma_async.sync.aligned.m64nNk32.s32.{s8.s8,u8.u8}{.satfinite} " + _TAIL, WGMMA,
     "N = 8, 16, 24, 32..256 step 16"),
    ("wgmma.mma_async.sync.aligned.m64nNk32.s32.{s8.u8,u8.s8}{.satfinite} " + _TAIL,
     WGMMA_MIXED_INT, "mixed signedness: PTX 8.4 (ptxas)"),
    ("wgmma.mma_async.sync.aligned.m64nNk256.s32.b1.b1.and.popc " + _TAIL, WGMMA,
     "N = 8, 16, 24, 32..256 step 16"),
    ("wgmma.fence.sync.aligned", WGMMA, ""),
    ("wgmma.commit_group.sync.aligned", WGMMA, ""),
    ("wgmma.wait_group.sync.aligned N", WGMMA, "N in 0..7"),
]
