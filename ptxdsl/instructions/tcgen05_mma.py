"""Blackwell tensor-core MMA: `tcgen05.mma` and `tcgen05.mma.ws` (PTX ISA §9.7.16.10; sm_100a
class targets only). The accumulator D lives in tensor memory (TMEM); A comes from a
shared-memory descriptor or from TMEM, B from a descriptor; the instruction descriptor
`idesc` (a 32-bit value) gives the shapes and types.

::

    tcgen05.mma{.sp}.cta_group.kind{.block_scale{.scale_vec::NX|.block16|.block32}}
        {.collector::a::usage} [d_tmem], a_desc|[a_tmem], b_desc, {[sp_meta_tmem],} idesc,
        {disable_output_lane,} {[scale_A_tmem], [scale_B_tmem],} enable_input_d
        {, scale_input_d};
    tcgen05.mma.ws{.sp}.cta_group::1.kind{.collector::bN::usage}
        [d_tmem], a_desc|[a_tmem], b_desc, {[sp_meta_tmem],} idesc, enable_input_d
        {, zero_column_mask_desc};

One class per instruction (`Tcgen05Mma`, `Tcgen05MmaWs`), its qualifiers validated against
`KINDS`, the table of what each `.kind` allows. Every rule below was checked against ptxas 13
through nvJitLink; where cuda::ptx 13.0's headers and ptxas differ, ptxas wins:

- `.kind::mxf4nvf4` needs PTX 8.7 (the headers say 8.6; ptxas refuses it at 8.6).
- `scale_input_d` (f16/tf32 only) is refused on sm_110a/f: its forms need sm_100a/sm_103a
  (or their `f` family), where the others also take sm_110a.
- `.kind::i8` is refused on sm_103a and on every `f` target, `.scale_vec::NX` on every `f`
  target (`.block_scale` without it, or with PTX 8.8's `.block16`/`.block32`, is taken
  there), `.sp` with `.kind::mxf4`/`mxf4nvf4` too.
- A TMEM address is in a register declared .b32 (ptxas refuses .u32 and .s32 here), and a
  kernel's tcgen05 instructions use one CTA group (`tcgen05.one_cta_group`).

The sparse forms (`.sp`, A's metadata in TMEM) and `.block16`/`.block32` have no cuda::ptx
function (cuda::ptx 13.0 has none): build them with the classes (`k.emit(Tcgen05Mma(...,
sp_meta_tmem=...))`).

cuda::ptx's functions (`tcgen05_mma`, `tcgen05_mma_tmem_a`, the block-scale and .ws collector
variants) are in `tcgen05_mma_ptx`. The instruction classes take A from TMEM in every form
(`a_tmem=`), where cuda::ptx 13.0's block-scale `*_tmem_a*` functions take a descriptor.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from typing import Any, ClassVar

import attrs

from ..errors import OperandError
from ..operands import Addr, Imm, NegPred, Reg, Vec, declared_type, make_imm
from ..types import Requires, ScalarType, req
from .base import Instruction, _given, check_enum, check_imm, int_like, refuse
from .bulk import BLACKWELL, CtaGroup, cta_group_arg
from .tcgen05 import taddr_operand
from .tcgen05_desc import Kind, SmemDesc100, foreign_kind
from .wgmma_desc import MatrixDescriptor

__all__ = ["Kind", "ScaleVec", "Collector", "Tcgen05Mma", "Tcgen05MmaWs", "FORMS",
           "kind_f16", "kind_tf32", "kind_f8f6f4", "kind_i8", "kind_mxf8f6f4", "kind_mxf4",
           "kind_mxf4nvf4"]

T = ScalarType
TCGEN05_MMA = BLACKWELL
# ptxas 13: "Feature 'argument scale-inp-d-imm' not supported on .target 'sm_110a'"
SCALE_INPUT_D = req("8.6", 100, arch=(100, 103), family=True)
# ptxas 13: "Feature '.kind::mxf4nvf4' requires PTX ISA .version 8.7 or later"
MXF4NVF4 = req("8.7", 100)
# ptxas 13: "Feature '.kind::i8' not supported on .target 'sm_103a'" (nor on any f target)
KIND_I8 = req("8.6", 100, arch=(100, 101, 110))
# ptxas 13: "Feature '.scale_vec::2X' not supported on .target 'sm_100f'" (every f target)
SCALE_VEC = req("8.6", 100, arch=(100, 101, 103, 110))
# ptxas 13: "Feature '.block32' requires PTX ISA .version 8.8 or later" (f targets take it)
BLOCK_N = req("8.8", 100, arch=(100, 101, 103, 110), family=True)
# ptxas 13: "Feature '.kind::mxf4 with .sp modifier' not supported on .target 'sm_100f'"
SPARSE_MXF4 = req("8.6", 100, arch=(100, 101, 103, 110))


class ScaleVec(enum.Enum):
    """`.scale_vec::NX` of the block-scaled kinds: scale factors per row of A / column of B;
    or (PTX 8.8) `.block32` / `.block16`: one scale factor per 32 / 16 elements of K."""

    x1 = "scale_vec::1X"
    x2 = "scale_vec::2X"
    x4 = "scale_vec::4X"
    block16 = "block16"
    block32 = "block32"


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
    K.mxf8f6f4: KindRule(True, (V.x1, V.block32), True, False, False),
    K.mxf4: KindRule(True, (V.x2, V.block32), True, False, False),
    K.mxf4nvf4: KindRule(True, (V.x2, V.x4, V.block16, V.block32), False, False, False),
}


def _kind_requires(kind: Kind) -> Requires:
    if kind is Kind.i8:
        return TCGEN05_MMA.merge(KIND_I8)
    return TCGEN05_MMA.merge(MXF4NVF4) if kind is Kind.mxf4nvf4 else TCGEN05_MMA


def _names(kinds) -> str:
    return ", ".join(f".{k.value}" for k in kinds)


# -- operand checks -------------------------------------------------------------------------------
def kind_arg(insn: Any, value: Any) -> Kind:
    """A `.kind`: a Kind, cuda::ptx's tag spelling ('kind_f16'), 'kind::f16' or 'f16', or a
    member of another enum whose value is 'kind::f16' or 'kind_f16' (`tcgen05_desc.MmaKind`)."""
    if isinstance(value, enum.Enum) and not isinstance(value, Kind):
        value = foreign_kind(value)
    if isinstance(value, str):
        text = value.lstrip(".")
        text = text[5:] if text.startswith(("kind_", "kind:")) else text
        value = Kind._value2member_map_.get("kind::" + text.lstrip(":"), value)
    return check_enum(insn, "kind", value, Kind)


def tmem_arg(insn: str, operand: str, value: Any) -> Addr:
    """A tensor-memory address operand (tcgen05's `taddr_operand`) in a register declared
    .b32: tcgen05.mma refuses one declared .u32 or .s32 ("Arguments mismatch", ptxas 13),
    where tcgen05.ld/st/cp take it. An automatic register is declared .b32 whatever its type."""
    addr = taddr_operand(insn, operand, value)
    reg = addr.base
    assert isinstance(reg, Reg), "taddr_operand: a register base"
    if declared_type(reg) != "b32":
        raise OperandError(insn, operand, "a tensor-memory address in a register declared .b32 "
                           "(an automatic register, or one named with t.b32: ptxas refuses "
                           ".u32 and .s32 here)", f"%{reg.name}, declared .{declared_type(reg)}")
    return addr


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


def desc_arg(insn: str, operand: str, value: Any) -> Reg | Imm:
    """A 64-bit descriptor: a .b64/.u64 register, an int, or an `SmemDesc100` (its value).
    wgmma's `MatrixDescriptor` is sm_90's layout, without the version bits (46-48 = 0b001)
    an sm_100 descriptor carries: refused."""
    want = ("a 64-bit register (.b64/.u64) holding a descriptor, its value (an int), or a "
            "tcgen05_desc.SmemDesc100")
    if isinstance(value, MatrixDescriptor):
        raise OperandError(insn, operand, want + " (wgmma's descriptor lacks sm_100's version "
                           "bits; SmemDesc100.from_layout takes its layout)",
                           "a wgmma MatrixDescriptor")
    if isinstance(value, SmemDesc100):
        value = value.value
    if isinstance(value, Reg):
        if value.type.bits != 64 or value.type.kind not in "bus":
            raise OperandError(insn, operand, want, _given(value))
        return value
    v = int_like(value.value if isinstance(value, Imm) else value)
    if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v < 1 << 64:
        raise OperandError(insn, operand, want, _given(value))
    return Imm(v, T.u64)


def _describe(kind: Any, cta_group: Any, ws: Any, sparse: Any) -> str:
    return (f".{kind}{'.ws' if ws else ''}, cta_group::{cta_group}"
            f"{', sparse' if sparse else ''}")


def idesc_arg(insn: Any, value: Any, kind: Kind, cta_group: CtaGroup, ws: bool,
              sparse: bool) -> Reg | Imm:
    """The instruction descriptor: a 32-bit register, an int, or a descriptor object with
    `.value` (`tcgen05_desc.InstrDesc`), whose `kind`, `cta_group`, `ws` and `sparse` (those
    it has) must be the instruction's: its M and N were checked for them."""
    if isinstance(value, Reg | Imm | enum.Enum) or not hasattr(value, "value"):
        return u32_arg(insn, "idesc", value)
    want: tuple[Any, ...] = (kind.value, 1 if cta_group is CtaGroup.one else 2, ws, sparse)
    given_kind = getattr(value, "kind", None)
    given_kind = str(given_kind.value if isinstance(given_kind, enum.Enum) else
                     given_kind if isinstance(given_kind, str) else kind.value)
    given_cg: Any = getattr(value, "cta_group", want[1])
    made = ("kind::" + given_kind.removeprefix("kind::"),
            2 if given_cg in (2, CtaGroup.two) else 1,
            getattr(value, "ws", ws) is True, getattr(value, "sparse", False) is True)
    if made != want:
        raise OperandError(insn, "idesc", f"an instruction descriptor for {_describe(*want)}",
                           f"one made for {_describe(*made)}")
    return u32_arg(insn, "idesc", value.value)


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
    """`.scale_vec::NX`: a ScaleVec, 1/2/4, '2X' or 'scale_vec::2X'; 'block16', 'block32'."""
    if isinstance(value, str):
        text = value.lstrip(".")
        key = text if text in ("block16", "block32") else \
            "scale_vec::" + text.removeprefix("scale_vec::").upper()
        value = ScaleVec._value2member_map_.get(key, value)
    v = int_like(value)
    if isinstance(v, int) and not isinstance(v, bool):
        value = {1: V.x1, 2: V.x2, 4: V.x4}.get(v, value)
    return check_enum(insn, "scale_vec", value, ScaleVec)


# -- the instructions -----------------------------------------------------------------------------
@attrs.frozen(kw_only=True)
class _Tcgen05MmaBase(Instruction):
    """What tcgen05.mma and tcgen05.mma.ws share: D in TMEM, A from a descriptor or TMEM, B
    from a descriptor, the instruction descriptor and enable_input_d."""

    #: The weight-stationary form (tcgen05.mma.ws).
    WS: ClassVar[bool] = False
    kind: Kind
    cta_group: CtaGroup = CtaGroup.one
    d_tmem: Addr
    a_desc: Reg | Imm | None = None
    a_tmem: Addr | None = None
    b_desc: Reg | Imm
    #: The sparse form (`.sp`): the TMEM address of A's sparsity metadata.
    sp_meta_tmem: Addr | None = None
    idesc: Reg | Imm
    enable_input_d: Reg | NegPred | Imm

    def _check_common(self) -> KindRule:
        kind = kind_arg(self.MNEMONIC, self.kind)
        self._set("kind", kind)
        self._set("cta_group", cta_group_arg(self.MNEMONIC, self.cta_group))
        name = self.name
        self._set("d_tmem", tmem_arg(name, "d_tmem", self.d_tmem))
        if (self.a_desc is None) == (self.a_tmem is None):
            refuse(name, "A comes from a descriptor (a_desc) or from tensor memory (a_tmem): "
                   "give exactly one")
        if self.a_tmem is not None:
            self._set("a_tmem", tmem_arg(name, "a_tmem", self.a_tmem))
        else:
            self._set("a_desc", desc_arg(name, "a_desc", self.a_desc))
        self._set("b_desc", desc_arg(name, "b_desc", self.b_desc))
        if self.sp_meta_tmem is not None:
            self._set("sp_meta_tmem", tmem_arg(name, "sp_meta_tmem", self.sp_meta_tmem))
        self._set("idesc", idesc_arg(name, self.idesc, kind, self.cta_group, self.WS,
                                     self.sparse))
        self._set("enable_input_d", enable_arg(name, self.enable_input_d))
        return KINDS[kind]

    @property
    def sparse(self) -> bool:
        """The sparse form (`.sp`), with A's sparsity metadata in TMEM."""
        return self.sp_meta_tmem is not None

    def _head(self) -> list[Any]:
        """[d_tmem], A, b_desc{, [sp_meta_tmem]}, idesc"""
        a = self.a_tmem if self.a_tmem is not None else self.a_desc
        assert a is not None, "checked: exactly one of a_desc / a_tmem"
        meta = [self.sp_meta_tmem] if self.sp_meta_tmem is not None else []
        return [self.d_tmem, a, self.b_desc, *meta, self.idesc]


@attrs.frozen(kw_only=True)
class Tcgen05Mma(_Tcgen05MmaBase):
    """`tcgen05.mma{.sp}.cta_group.kind{.block_scale{.scale_vec::NX|.blockN}}
    {.collector::a::usage} [d_tmem], a_desc|[a_tmem], b_desc, {[sp_meta_tmem],} idesc,
    {disable_output_lane,} {[scale_A_tmem], [scale_B_tmem],} enable_input_d{, scale_input_d};`

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
            self._set("scale_A_tmem", tmem_arg(name, "scale_A_tmem", self.scale_A_tmem))
            self._set("scale_B_tmem", tmem_arg(name, "scale_B_tmem", self.scale_B_tmem))
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
        r = _kind_requires(self.kind)
        if self.scale_input_d is not None:
            r = r.merge(SCALE_INPUT_D)
        if self.scale_vec is not None:
            r = r.merge(BLOCK_N if self.scale_vec in (V.block16, V.block32) else SCALE_VEC)
        if self.sparse and self.kind in (K.mxf4, K.mxf4nvf4):
            r = r.merge(SPARSE_MXF4)
        return r

    def opcode(self) -> str:
        sp = ".sp" if self.sparse else ""
        text = f"tcgen05.mma{sp}.{self.cta_group.value}.{self.kind.value}"
        if self.block_scale:
            text += ".block_scale"
            if self.scale_vec is not None:
                text += "." + self.scale_vec.value
        if self.collector is not None:
            text += ".collector::a::" + self.collector.value
        return text

    def operands(self):
        ops = self._head()
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
    """`tcgen05.mma.ws{.sp}.cta_group::1.kind{.collector::bN::usage}
    [d_tmem], a_desc|[a_tmem], b_desc, {[sp_meta_tmem],} idesc, enable_input_d
    {, zero_column_mask_desc};`

    The weight-stationary form: cta_group::1, the kinds f16, tf32, f8f6f4 and i8, one of the
    four B collector buffers (`collector_b` 0..3 with a `collector` usage), and an optional
    64-bit zero-column mask descriptor.
    """

    MNEMONIC = "tcgen05.mma.ws"
    WS = True
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
            self._set("zero_column_mask_desc", desc_arg(name, "zero_column_mask_desc",
                                                          self.zero_column_mask_desc))

    @property
    def requires(self) -> Requires:
        return _kind_requires(self.kind)

    def opcode(self) -> str:
        sp = ".sp" if self.sparse else ""
        text = f"tcgen05.mma.ws{sp}.{self.cta_group.value}.{self.kind.value}"
        if self.collector is not None:
            text += f".collector::b{self.collector_b}::{self.collector.value}"
        return text

    def operands(self):
        ops = [*self._head(), self.enable_input_d]
        if self.zero_column_mask_desc is not None:
            ops.append(self.zero_column_mask_desc)
        return tuple(ops)


# -- forms: (form, requires, note) — rendered by ptxdsl.forms -------------------------------------
_OPS = "[d_tmem], a_desc|[a_tmem], b_desc, idesc"
FORMS: list[tuple[str, Requires, str]] = [
    ("tcgen05.mma.cta_group::{1,2}.kind::{f16,tf32,f8f6f4}{.collector::a::*} " + _OPS
     + "{, disable_output_lane}, enable_input_d", TCGEN05_MMA,
     "disable_output_lane: 4 masks (::1) or 8 (::2)"),
    ("tcgen05.mma.cta_group::{1,2}.kind::i8{.collector::a::*} " + _OPS
     + "{, disable_output_lane}, enable_input_d", TCGEN05_MMA.merge(KIND_I8),
     "ptxas refuses .kind::i8 on sm_103a and the f targets"),
    ("tcgen05.mma.cta_group::{1,2}.kind::{f16,tf32}{.collector::a::*} " + _OPS
     + "{, disable_output_lane}, enable_input_d, scale_input_d", SCALE_INPUT_D,
     "scale_input_d 0..15; ptxas refuses it on sm_110a/f"),
    ("tcgen05.mma.cta_group::{1,2}.kind::{mxf8f6f4,mxf4}.block_scale"
     "{.collector::a::*} " + _OPS + ", [scale_A_tmem], [scale_B_tmem], enable_input_d",
     TCGEN05_MMA, ""),
    ("tcgen05.mma.cta_group::{1,2}.kind::{mxf8f6f4,mxf4}.block_scale.scale_vec::{1X,2X}"
     "{.collector::a::*} " + _OPS + ", [scale_A_tmem], [scale_B_tmem], enable_input_d",
     SCALE_VEC, "mxf8f6f4: 1X; mxf4: 2X; ptxas refuses .scale_vec on the f targets"),
    ("tcgen05.mma.cta_group::{1,2}.kind::mxf4nvf4.block_scale.scale_vec::{2X,4X}"
     "{.collector::a::*} " + _OPS + ", [scale_A_tmem], [scale_B_tmem], enable_input_d",
     SCALE_VEC.merge(MXF4NVF4), "PTX 8.7 (ptxas; cuda::ptx 13.0 says 8.6)"),
    ("tcgen05.mma.cta_group::{1,2}.kind::{mxf8f6f4,mxf4,mxf4nvf4}.block_scale."
     "{block32,block16}{.collector::a::*} " + _OPS + ", [scale_A_tmem], [scale_B_tmem], "
     "enable_input_d", BLOCK_N, "block16: mxf4nvf4 only; no cuda::ptx function (the class)"),
    ("tcgen05.mma{.ws}.sp.cta_group.kind... [d_tmem], a_desc|[a_tmem], b_desc, "
     "[sp_meta_tmem], idesc, ...", TCGEN05_MMA, "every form above with A's sparsity "
     "metadata; .sp with mxf4/mxf4nvf4 needs an a target; no cuda::ptx function (the class)"),
    ("tcgen05.mma.ws.cta_group::1.kind::{f16,tf32,f8f6f4}{.collector::b{0..3}::*} " + _OPS
     + ", enable_input_d{, zero_column_mask_desc}", TCGEN05_MMA, ""),
    ("tcgen05.mma.ws.cta_group::1.kind::i8{.collector::b{0..3}::*} " + _OPS
     + ", enable_input_d{, zero_column_mask_desc}", TCGEN05_MMA.merge(KIND_I8),
     "ptxas refuses .kind::i8 on sm_103a and the f targets"),
]
