"""Blackwell tensor-core MMA: `tcgen05.mma` and `tcgen05.mma.ws` (PTX ISA §9.7.16.10; sm_100a
class targets only). The accumulator D lives in tensor memory (TMEM); A comes from a
shared-memory descriptor or from TMEM, B from a descriptor; the instruction descriptor
`idesc` (a 32-bit value) gives the shapes and types.

::

    tcgen05.mma.cta_group.kind{.block_scale{.scale_vec::NX}}{.collector::a::usage}
        [d_tmem], a_desc|[a_tmem], b_desc, idesc,
        {disable_output_lane,} {[scale_A_tmem], [scale_B_tmem],} enable_input_d
        {, scale_input_d};
    tcgen05.mma.ws.cta_group::1.kind{.collector::bN::usage}
        [d_tmem], a_desc|[a_tmem], b_desc, idesc, enable_input_d {, zero_column_mask_desc};

One class per instruction (`Tcgen05Mma`, `Tcgen05MmaWs`), its qualifiers validated against
`KINDS`, the table of what each `.kind` allows. Every rule below was checked against ptxas 13
through nvJitLink; where cuda::ptx 13.0's headers and ptxas differ, ptxas wins:

- `.kind::mxf4nvf4` needs PTX 8.7 (the headers say 8.6; ptxas refuses it at 8.6).
- `scale_input_d` (f16/tf32 only) is refused on sm_110a/f: its forms need sm_100a/sm_103a
  (or their `f` family), where the others also take sm_110a.

The cuda::ptx functions (`tcgen05_mma`, `tcgen05_mma_tmem_a`,
`tcgen05_mma_block_scale_vec_1x_collector_a_fill`, `tcgen05_mma_ws_tmem_a_collector_b3_use`,
...) are generated from `FUNCTIONS`, each with cuda::ptx's name and argument order (kind before
cta_group in tcgen05.mma, after it in tcgen05.mma.ws). As in cuda::ptx, a bool
`enable_input_d` (or a 32-bit register holding one) becomes a predicate through
`setp.ne.b32 p, value, 0;` before the instruction; a predicate register is used as it is.
cuda::ptx 13.0's block-scale `*_tmem_a*` functions take and emit a descriptor for A (their asm
has no `[a_tmem]`); ptxdsl's functions of those names do the same. The instruction classes take
A from TMEM in every form (`a_tmem=`).
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Sequence
from typing import Any

import attrs

from ..errors import OperandError
from ..operands import Addr, Imm, NegPred, Reg, Vec, make_imm
from ..types import Requires, ScalarType, req
from . import _ptx_args as A
from .base import Instruction, _given, check_enum, check_imm, int_like, refuse
from .bulk import BLACKWELL, CtaGroup, cta_group_arg
from .tcgen05 import one_cta_group, taddr_operand
from .wgmma import check_desc

__all__ = ["Kind", "ScaleVec", "Collector", "Tcgen05Mma", "Tcgen05MmaWs", "FORMS",
           "kind_f16", "kind_tf32", "kind_f8f6f4", "kind_i8", "kind_mxf8f6f4", "kind_mxf4",
           "kind_mxf4nvf4"]

T = ScalarType
TCGEN05_MMA = BLACKWELL
# ptxas 13: "Feature 'argument scale-inp-d-imm' not supported on .target 'sm_110a'"
SCALE_INPUT_D = req("8.6", 100, arch=(100, 103), family=True)
# ptxas 13: "Feature '.kind::mxf4nvf4' requires PTX ISA .version 8.7 or later"
MXF4NVF4 = req("8.7", 100)


class Kind(enum.Enum):
    """`.kind::*` of tcgen05.mma: the family of A/B element types (`ptx.kind_f16`, ...)."""

    f16 = "kind::f16"
    tf32 = "kind::tf32"
    f8f6f4 = "kind::f8f6f4"
    i8 = "kind::i8"
    mxf8f6f4 = "kind::mxf8f6f4"
    mxf4 = "kind::mxf4"
    mxf4nvf4 = "kind::mxf4nvf4"


class ScaleVec(enum.Enum):
    """`.scale_vec::NX` of the block-scaled kinds: scale factors per row of A / column of B."""

    x1 = "scale_vec::1X"
    x2 = "scale_vec::2X"
    x4 = "scale_vec::4X"


class Collector(enum.Enum):
    """How a collector buffer is used: `fill` loads it for reuse, `use` reads it, `lastuse`
    reads it for the last time, `discard` drops it."""

    fill = "fill"
    use = "use"
    lastuse = "lastuse"
    discard = "discard"


# cuda::ptx's tags (re-exported by ptxdsl.ptx): ptx.kind_f16, ...
kind_f16, kind_tf32, kind_f8f6f4, kind_i8 = Kind.f16, Kind.tf32, Kind.f8f6f4, Kind.i8
kind_mxf8f6f4, kind_mxf4, kind_mxf4nvf4 = Kind.mxf8f6f4, Kind.mxf4, Kind.mxf4nvf4
TAGS = ("kind_f16", "kind_tf32", "kind_f8f6f4", "kind_i8", "kind_mxf8f6f4", "kind_mxf4",
        "kind_mxf4nvf4")


@attrs.frozen
class KindRule:
    """What one `.kind` allows (ISA tcgen05.mma, confirmed with ptxas)."""

    block_scale: bool                     # the kind exists only with .block_scale
    scale_vecs: tuple[ScaleVec, ...]      # the scale_vec sizes of the block-scaled kinds
    default_vec: bool                     # .block_scale may leave .scale_vec out
    scale_input_d: bool                   # takes the scale_input_d immediate
    ws: bool                              # has a tcgen05.mma.ws form


K, V = Kind, ScaleVec
KINDS: dict[Kind, KindRule] = {
    K.f16: KindRule(False, (), False, True, True),
    K.tf32: KindRule(False, (), False, True, True),
    K.f8f6f4: KindRule(False, (), False, False, True),
    K.i8: KindRule(False, (), False, False, True),
    K.mxf8f6f4: KindRule(True, (V.x1,), True, False, False),
    K.mxf4: KindRule(True, (V.x2,), True, False, False),
    K.mxf4nvf4: KindRule(True, (V.x2, V.x4), False, False, False),
}


def _names(kinds) -> str:
    return ", ".join(f".{k.value}" for k in kinds)


# -- operand checks -------------------------------------------------------------------------------
def kind_arg(insn: Any, value: Any) -> Kind:
    """A `.kind`: a Kind, cuda::ptx's tag spelling ('kind_f16'), 'kind::f16' or 'f16'."""
    if isinstance(value, str):
        text = value.lstrip(".")
        text = text[5:] if text.startswith(("kind_", "kind:")) else text
        value = "kind::" + text.lstrip(":")
        value = Kind._value2member_map_.get(value, value)
    return check_enum(insn, "kind", value, Kind)


def u32_arg(insn: Any, operand: str, value: Any) -> Reg | Imm:
    """A 32-bit operand: a .b32/.u32/.s32 register or an immediate in the u32 range."""
    if isinstance(value, Reg):
        if value.type.bits != 32 or value.type.kind not in "bus":
            raise OperandError(insn, operand, "a 32-bit register (.b32/.u32) or an immediate",
                               _given(value))
        return value
    if isinstance(value, Imm):
        value = value.value
    value = int_like(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise OperandError(insn, operand, "a 32-bit register (.b32/.u32) or an immediate",
                           _given(value))
    return make_imm(insn, operand, value, T.u32)


def idesc_arg(insn: Any, value: Any, kind: Kind) -> Reg | Imm:
    """The instruction descriptor: a 32-bit register, an int, or a descriptor object with
    `.value` (and `.kind`, which must be the instruction's)."""
    given_kind = getattr(value, "kind", None)
    if isinstance(given_kind, Kind) and given_kind is not kind:
        raise OperandError(insn, "idesc", f"an instruction descriptor of .{kind.value}",
                           f"one of .{given_kind.value}")
    if hasattr(value, "value") and not isinstance(value, Reg | Imm | enum.Enum):
        value = value.value
    return u32_arg(insn, "idesc", value)


def enable_arg(insn: Any, value: Any) -> Reg | NegPred | Imm:
    """enable_input_d (D = A*B + D when true, A*B when false): a predicate, its negation, or
    the immediate 0/1 (ptxas takes all three)."""
    if isinstance(value, Reg | NegPred):
        if isinstance(value, NegPred) or value.type is T.pred:
            return value
    else:
        v = value.value if isinstance(value, Imm) else int_like(value)
        if isinstance(v, bool | int) and v in (0, 1):
            return Imm(int(v), T.pred)
    raise OperandError(insn, "enable_input_d", "a .pred register, its negation, or a bool",
                       _given(value))


def lanes_arg(insn: Any, value: Any, cta_group: CtaGroup) -> tuple[Reg | Imm, ...]:
    """disable_output_lane: 4 (cta_group::1) or 8 (cta_group::2) 32-bit lane masks."""
    n = 4 if cta_group is CtaGroup.one else 8
    want = f"{n} 32-bit registers or immediates (.{cta_group.value})"
    if isinstance(value, Vec):
        value = value.items
    if not isinstance(value, Sequence) or isinstance(value, str):
        raise OperandError(insn, "disable_output_lane", want, _given(value))
    if len(value) != n:
        raise OperandError(insn, "disable_output_lane", want, f"{len(value)} values")
    return tuple(u32_arg(insn, f"disable_output_lane[{i}]", v) for i, v in enumerate(value))


def collector_arg(insn: Any, operand: str, value: Any) -> Collector:
    """A collector usage: a Collector or its name ('fill', 'use', 'lastuse', 'discard')."""
    if isinstance(value, str):
        value = Collector._value2member_map_.get(value.lstrip("."), value)
    return check_enum(insn, operand, value, Collector)


def scale_vec_arg(insn: Any, value: Any) -> ScaleVec:
    """`.scale_vec::NX`: a ScaleVec, 1/2/4, '2X' or 'scale_vec::2X'."""
    if isinstance(value, str):
        text = value.lstrip(".").removeprefix("scale_vec::").upper().removesuffix("X")
        value = int(text) if text.isdigit() else value
    v = int_like(value)
    if isinstance(v, int) and not isinstance(v, bool):
        value = {1: V.x1, 2: V.x2, 4: V.x4}.get(v, value)
    return check_enum(insn, "scale_vec", value, ScaleVec)


# -- the instructions -----------------------------------------------------------------------------
@attrs.frozen(kw_only=True)
class _Tcgen05MmaBase(Instruction):
    """What tcgen05.mma and tcgen05.mma.ws share: D in TMEM, A from a descriptor or TMEM, B
    from a descriptor, the instruction descriptor and enable_input_d."""

    kind: Kind
    cta_group: CtaGroup = CtaGroup.one
    d_tmem: Addr
    a_desc: Reg | Imm | None = None
    a_tmem: Addr | None = None
    b_desc: Reg | Imm
    idesc: Reg | Imm
    enable_input_d: Reg | NegPred | Imm

    def _check_common(self) -> KindRule:
        kind = kind_arg(self.MNEMONIC, self.kind)
        self._set("kind", kind)
        self._set("cta_group", cta_group_arg(self.MNEMONIC, self.cta_group))
        name = self.name
        self._set("d_tmem", taddr_operand(name, "d_tmem", self.d_tmem))
        if (self.a_desc is None) == (self.a_tmem is None):
            refuse(name, "A comes from a descriptor (a_desc) or from tensor memory (a_tmem): "
                   "give exactly one")
        if self.a_tmem is not None:
            self._set("a_tmem", taddr_operand(name, "a_tmem", self.a_tmem))
        else:
            self._set("a_desc", check_desc(name, "a_desc", self.a_desc))
        self._set("b_desc", check_desc(name, "b_desc", self.b_desc))
        self._set("idesc", idesc_arg(name, self.idesc, kind))
        self._set("enable_input_d", enable_arg(name, self.enable_input_d))
        return KINDS[kind]

    def _a(self) -> Reg | Imm | Addr:
        a = self.a_tmem if self.a_tmem is not None else self.a_desc
        assert a is not None, "checked: exactly one of a_desc / a_tmem"
        return a


@attrs.frozen(kw_only=True)
class Tcgen05Mma(_Tcgen05MmaBase):
    """`tcgen05.mma.cta_group.kind{.block_scale{.scale_vec::NX}}{.collector::a::usage}
    [d_tmem], a_desc|[a_tmem], b_desc, idesc, {disable_output_lane,}
    {[scale_A_tmem], [scale_B_tmem],} enable_input_d{, scale_input_d};`

    The block-scaled kinds (mxf8f6f4, mxf4, mxf4nvf4) take `.block_scale` and the scale
    factors' TMEM addresses, and nothing else does; `disable_output_lane` (4 masks for
    cta_group::1, 8 for ::2) and `scale_input_d` (0..15, f16/tf32) are for the others.
    """

    MNEMONIC = "tcgen05.mma"
    disable_output_lane: tuple[Reg | Imm, ...] | None = None
    scale_input_d: int | None = None
    scale_vec: ScaleVec | None = None
    scale_A_tmem: Addr | None = None
    scale_B_tmem: Addr | None = None
    collector: Collector | None = None

    def __attrs_post_init__(self):
        rule = self._check_common()
        name = self.name
        kind = self.kind
        # `is None`, never `in`/`==`: a register's == builds a setp
        scaled = [x is not None for x in (self.scale_A_tmem, self.scale_B_tmem)]
        if rule.block_scale:
            if not all(scaled):
                refuse(name, f".{kind.value} is block-scaled: give scale_A_tmem and "
                       "scale_B_tmem (the scale factors' tensor-memory addresses)")
            self._set("scale_A_tmem", taddr_operand(name, "scale_A_tmem", self.scale_A_tmem))
            self._set("scale_B_tmem", taddr_operand(name, "scale_B_tmem", self.scale_B_tmem))
            if self.scale_vec is None:
                if not rule.default_vec:
                    refuse(name, f".{kind.value} needs a scale_vec ("
                           f"{_names(rule.scale_vecs)}; ptxas has no default for it)")
            else:
                vec = scale_vec_arg(name, self.scale_vec)
                if vec not in rule.scale_vecs:
                    refuse(name, f".{kind.value} takes {_names(rule.scale_vecs)} only "
                           f"(got .{vec.value})")
                self._set("scale_vec", vec)
            if self.disable_output_lane is not None:
                refuse(name, "the block-scaled kinds take no disable_output_lane")
        else:
            if any(scaled) or self.scale_vec is not None:
                refuse(name, f".block_scale (scale_vec, scale_A_tmem, scale_B_tmem) is for "
                       f"the kinds {_names(k for k in KINDS if KINDS[k].block_scale)} only "
                       f"(got .{kind.value})")
            if self.disable_output_lane is not None:
                self._set("disable_output_lane",
                          lanes_arg(name, self.disable_output_lane, self.cta_group))
        if self.scale_input_d is not None:
            if not rule.scale_input_d:
                refuse(name, f"scale_input_d is for .kind::f16 and .kind::tf32 only "
                       f"(got .{kind.value})")
            self._set("scale_input_d", check_imm(name, "scale_input_d", self.scale_input_d,
                                                 0, 15))
        if self.collector is not None:
            self._set("collector", collector_arg(name, "collector", self.collector))

    @property
    def block_scale(self) -> bool:
        """The form is block-scaled (`.block_scale`, with the scale factors' operands)."""
        return self.scale_A_tmem is not None

    @property
    def requires(self) -> Requires:
        r = TCGEN05_MMA
        if self.scale_input_d is not None:
            r = r.merge(SCALE_INPUT_D)
        if self.kind is Kind.mxf4nvf4:
            r = r.merge(MXF4NVF4)
        return r

    def opcode(self) -> str:
        text = f"tcgen05.mma.{self.cta_group.value}.{self.kind.value}"
        if self.block_scale:
            text += ".block_scale"
            if self.scale_vec is not None:
                text += "." + self.scale_vec.value
        if self.collector is not None:
            text += ".collector::a::" + self.collector.value
        return text

    def operands(self):
        ops: list[Any] = [self.d_tmem, self._a(), self.b_desc, self.idesc]
        if self.disable_output_lane is not None:
            ops.append(Vec(self.disable_output_lane))
        if self.block_scale:
            ops += [self.scale_A_tmem, self.scale_B_tmem]
        ops.append(self.enable_input_d)
        if self.scale_input_d is not None:
            ops.append(Imm(self.scale_input_d, T.u32))
        return tuple(ops)


@attrs.frozen(kw_only=True)
class Tcgen05MmaWs(_Tcgen05MmaBase):
    """`tcgen05.mma.ws.cta_group::1.kind{.collector::bN::usage}
    [d_tmem], a_desc|[a_tmem], b_desc, idesc, enable_input_d{, zero_column_mask_desc};`

    The weight-stationary form: cta_group::1, the kinds f16, tf32, f8f6f4 and i8, one of the
    four B collector buffers (`collector_b` 0..3 with a `collector` usage), and an optional
    64-bit zero-column mask descriptor.
    """

    MNEMONIC = "tcgen05.mma.ws"
    REQUIRES = TCGEN05_MMA
    collector_b: int | None = None
    collector: Collector | None = None
    zero_column_mask_desc: Reg | Imm | None = None

    def __attrs_post_init__(self):
        rule = self._check_common()
        name = self.name
        if self.cta_group is not CtaGroup.one:
            refuse(name, "tcgen05.mma.ws has .cta_group::1 only")
        if not rule.ws:
            refuse(name, f"tcgen05.mma.ws takes {_names(k for k in KINDS if KINDS[k].ws)} "
                   f"only (got .{self.kind.value})")
        if (self.collector_b is None) != (self.collector is None):
            refuse(name, "a B collector buffer (collector_b 0..3) goes with its usage "
                   "(collector 'fill', 'use', 'lastuse' or 'discard'): give both or neither")
        if self.collector is not None:
            self._set("collector_b", check_imm(name, "collector_b", self.collector_b, 0, 3))
            self._set("collector", collector_arg(name, "collector", self.collector))
        if self.zero_column_mask_desc is not None:
            self._set("zero_column_mask_desc", check_desc(name, "zero_column_mask_desc",
                                                          self.zero_column_mask_desc))

    def opcode(self) -> str:
        text = f"tcgen05.mma.ws.{self.cta_group.value}.{self.kind.value}"
        if self.collector is not None:
            text += f".collector::b{self.collector_b}::{self.collector.value}"
        return text

    def operands(self):
        ops: list[Any] = [self.d_tmem, self._a(), self.b_desc, self.idesc, self.enable_input_d]
        if self.zero_column_mask_desc is not None:
            ops.append(self.zero_column_mask_desc)
        return tuple(ops)


# -- the cuda::ptx functions ----------------------------------------------------------------------
def enable_pred(k: Any, insn: str, value: Any) -> Reg | NegPred | Imm:
    """enable_input_d as cuda::ptx passes it: a bool (or a 32-bit register holding one) is
    turned into a predicate with `setp.ne.b32 p, value, 0;`, the asm cuda::ptx wraps around
    the instruction; a predicate (or its negation) is used as it is."""
    if isinstance(value, NegPred) or isinstance(value, Reg) and value.type is T.pred:
        return value
    if isinstance(value, Reg):
        if value.type.bits != 32 or value.type.kind not in "bus":
            raise OperandError(insn, "enable_input_d", "a .pred register, a bool, or a 32-bit "
                               "register holding one", _given(value))
        return k.setp("ne", value, 0, type=T.b32)
    v = value.value if isinstance(value, Imm) else int_like(value)
    if not isinstance(v, bool | int) or v not in (0, 1):
        raise OperandError(insn, "enable_input_d", "a .pred register, a bool, or a 32-bit "
                           "register holding one", _given(value))
    return k.setp("ne", Imm(int(v), T.b32), 0, type=T.b32)


@attrs.frozen
class Function:
    """One cuda::ptx function: its name, its overloads (argument names in cuda::ptx's order)
    and the fixed qualifiers of its forms."""

    name: str
    overloads: tuple[tuple[str, ...], ...]
    ws: bool = False
    scale_vec: ScaleVec | None = None     # a block-scale function
    kinds: tuple[Kind, ...] = ()          # the kinds cuda::ptx's function takes
    collector: Collector | None = None
    collector_b: int | None = None
    note: str = ""


_KIND_CG = ("kind", "cta_group", "d_tmem")


def _mma_overloads(a: str) -> tuple[tuple[str, ...], ...]:
    head = (*_KIND_CG, a, "b_desc", "idesc")
    return ((*head, "disable_output_lane", "enable_input_d", "scale_input_d"),
            (*head, "disable_output_lane", "enable_input_d"),
            (*head, "enable_input_d", "scale_input_d"),
            (*head, "enable_input_d"))


_BS = ((*_KIND_CG, "a_desc", "b_desc", "idesc", "scale_A_tmem", "scale_B_tmem",
        "enable_input_d"),)


def _ws_overloads(a: str) -> tuple[tuple[str, ...], ...]:
    head = ("cta_group", "kind", "d_tmem", a, "b_desc", "idesc", "enable_input_d")
    return ((*head, "zero_column_mask_desc"), head)


_DENSE = (K.f16, K.tf32, K.f8f6f4, K.i8)
_VEC_KINDS = {V.x1: (K.mxf8f6f4,), V.x2: (K.mxf4, K.mxf4nvf4), V.x4: (K.mxf4nvf4,)}
_TMEM_A_NOTE = ("cuda::ptx 13.0's function of this name takes a descriptor for A (a_desc, a "
                "64-bit value) and emits the descriptor form, as ptxdsl does")


def _functions() -> list[Function]:
    out = [Function("tcgen05_mma", _mma_overloads("a_desc"), kinds=_DENSE),
           Function("tcgen05_mma_tmem_a", _mma_overloads("a_tmem"), kinds=_DENSE)]
    for vec in ScaleVec:
        n = vec.value[-2]
        # cuda::ptx spells the 2X TMEM-A functions `..._vec_2_tmem_a...` (no x)
        for tmem, mid in (("", f"{n}x"), ("_tmem_a", f"{n}" if n == "2" else f"{n}x")):
            for usage in (None, *Collector):
                tail = f"_collector_a_{usage.value}" if usage else ""
                out.append(Function(f"tcgen05_mma_block_scale_vec_{mid}{tmem}{tail}", _BS,
                                    scale_vec=vec, kinds=_VEC_KINDS[vec], collector=usage,
                                    note=_TMEM_A_NOTE if tmem else ""))
    for tmem, a in (("", "a_desc"), ("_tmem_a", "a_tmem")):
        for b in range(4):
            for usage in Collector:
                out.append(Function(f"tcgen05_mma_ws{tmem}_collector_b{b}_{usage.value}",
                                    _ws_overloads(a), ws=True, kinds=_DENSE,
                                    collector=usage, collector_b=b))
    return out


FUNCTIONS: tuple[Function, ...] = tuple(_functions())


def _pick(fn: Function, args: tuple, kwargs: dict) -> tuple[tuple[str, ...], ...]:
    """tcgen05_mma(k, kind, cg, d, a, b, idesc, x, y): x is disable_output_lane when it is a
    list of masks, else enable_input_d (cuda::ptx's overloads tell them apart by type)."""
    if fn.ws or fn.scale_vec is not None or len(args) != 8:
        return fn.overloads
    lanes = isinstance(args[6], Sequence | Vec) and not isinstance(args[6], str)
    return tuple(o for o in fn.overloads if ("disable_output_lane" in o) == lanes)


def _make(fn: Function) -> Callable[..., Any]:
    insn = "tcgen05.mma.ws" if fn.ws else "tcgen05.mma"

    def build(k, *args, **kwargs):
        _, a = A.bind(insn, args, kwargs, _pick(fn, args, kwargs))
        kind = kind_arg(insn, a["kind"])
        if kind not in fn.kinds:
            raise OperandError(fn.name, "kind", f"one of {_names(fn.kinds)}",
                               f".{kind.value}")
        cta_group = cta_group_arg(insn, a["cta_group"])
        if fn.ws and cta_group is not CtaGroup.one:
            raise OperandError(fn.name, "cta_group", "cta_group_1 (.cta_group::1)",
                               f".{cta_group.value}")
        common = dict(kind=kind, cta_group=cta_group, d_tmem=a["d_tmem"], b_desc=a["b_desc"],
                      idesc=a["idesc"], a_desc=a.get("a_desc"), a_tmem=a.get("a_tmem"),
                      collector=fn.collector)
        if fn.ws:
            made: Instruction = Tcgen05MmaWs(
                **common, collector_b=fn.collector_b,
                zero_column_mask_desc=a.get("zero_column_mask_desc"),
                enable_input_d=enable_pred(k, insn, a["enable_input_d"]))
        else:
            made = Tcgen05Mma(
                **common, disable_output_lane=a.get("disable_output_lane"),
                scale_input_d=a.get("scale_input_d"), scale_vec=fn.scale_vec,
                scale_A_tmem=a.get("scale_A_tmem"), scale_B_tmem=a.get("scale_B_tmem"),
                enable_input_d=enable_pred(k, insn, a["enable_input_d"]))
        return k.emit(one_cta_group(k, made))

    build.__name__ = build.__qualname__ = fn.name
    form = _form_text(fn)
    build.__doc__ = (f"cuda::ptx's `{fn.name}`: `{form}`, for the kinds {_names(fn.kinds)}."
                     + (f"\n\n{fn.note[0].upper()}{fn.note[1:]}." if fn.note else ""))
    build.__annotations__ = {"return": "Tcgen05MmaWs" if fn.ws else "Tcgen05Mma"}
    return A.overloads(*fn.overloads)(build)


def _form_text(fn: Function) -> str:
    if fn.ws:
        coll = f".collector::b{fn.collector_b}::{fn.collector.value}" if fn.collector else ""
        a = "[a_tmem]" if "a_tmem" in fn.overloads[0] else "a_desc"
        return (f"tcgen05.mma.ws.cta_group::1.kind{coll} [d_tmem], {a}, b_desc, idesc, "
                "enable_input_d{, zero_column_mask_desc}")
    if fn.scale_vec is not None:
        coll = f".collector::a::{fn.collector.value}" if fn.collector else ""
        return (f"tcgen05.mma.cta_group.kind.block_scale.{fn.scale_vec.value}{coll} [d_tmem], "
                "a_desc, b_desc, idesc, [scale_A_tmem], [scale_B_tmem], enable_input_d")
    a = "[a_tmem]" if fn.name.endswith("tmem_a") else "a_desc"
    return (f"tcgen05.mma.cta_group.kind [d_tmem], {a}, b_desc, idesc, {{disable_output_lane,}} "
            "enable_input_d{, scale_input_d}")


for _fn in FUNCTIONS:
    globals()[_fn.name] = _make(_fn)
    __all__.append(_fn.name)


# -- forms: (form, requires, note) — rendered by ptxdsl.forms -------------------------------------
_OPS = "[d_tmem], a_desc|[a_tmem], b_desc, idesc"
FORMS: list[tuple[str, Requires, str]] = [
    ("tcgen05.mma.cta_group::{1,2}.kind::{f16,tf32,f8f6f4,i8}{.collector::a::*} " + _OPS
     + "{, disable_output_lane}, enable_input_d", TCGEN05_MMA,
     "disable_output_lane: 4 masks (::1) or 8 (::2)"),
    ("tcgen05.mma.cta_group::{1,2}.kind::{f16,tf32}{.collector::a::*} " + _OPS
     + "{, disable_output_lane}, enable_input_d, scale_input_d", SCALE_INPUT_D,
     "scale_input_d 0..15; ptxas refuses it on sm_110a/f"),
    ("tcgen05.mma.cta_group::{1,2}.kind::{mxf8f6f4,mxf4}.block_scale{.scale_vec::{1X,2X}}"
     "{.collector::a::*} " + _OPS + ", [scale_A_tmem], [scale_B_tmem], enable_input_d",
     TCGEN05_MMA, "mxf8f6f4: 1X; mxf4: 2X"),
    ("tcgen05.mma.cta_group::{1,2}.kind::mxf4nvf4.block_scale.scale_vec::{2X,4X}"
     "{.collector::a::*} " + _OPS + ", [scale_A_tmem], [scale_B_tmem], enable_input_d",
     TCGEN05_MMA.merge(MXF4NVF4), "PTX 8.7 (ptxas; cuda::ptx 13.0 says 8.6)"),
    ("tcgen05.mma.ws.cta_group::1.kind::{f16,tf32,f8f6f4,i8}{.collector::b{0..3}::*} " + _OPS
     + ", enable_input_d{, zero_column_mask_desc}", TCGEN05_MMA, ""),
]
