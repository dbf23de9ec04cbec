"""cuda::ptx's tcgen05.mma functions (`tcgen05_mma.h`, `tcgen05_mma_ws.h`): 64 names, each
with cuda::ptx's overloads and argument order (kind before cta_group in tcgen05.mma, after it
in tcgen05.mma.ws), generated from the table `FUNCTIONS` and building the classes of
`tcgen05_mma`.

As in cuda::ptx, a bool `enable_input_d` (or a 32-bit register holding one) becomes a predicate
through `setp.ne.b32 p, value, 0;` before the instruction, the asm cuda::ptx wraps around it; a
predicate register (or its negation) is used as it is. cuda::ptx 13.0's block-scale `*_tmem_a*`
functions (the 2X ones spelled `..._vec_2_tmem_a...`) take and emit a descriptor for A: their
asm has no `[a_tmem]`, and ptxdsl's functions of those names do the same. A kernel's tcgen05
instructions use one CTA group (`tcgen05.one_cta_group`), as ptxas requires.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import attrs

from ..errors import OperandError
from ..operands import Imm, NegPred, Reg, Vec
from ..types import ScalarType
from . import _ptx_args as A
from .base import Instruction, _given, int_like
from .bulk import CtaGroup, cta_group_arg
from .tcgen05 import one_cta_group
from .tcgen05_mma import (
    Collector,
    Kind,
    ScaleVec,
    Tcgen05Mma,
    Tcgen05MmaWs,
    _names,
    kind_arg,
)

__all__: list[str] = []

T = ScalarType
K, V = Kind, ScaleVec


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
    for vec in (V.x1, V.x2, V.x4):
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
        _, a = A.bind(fn.name, args, kwargs, _pick(fn, args, kwargs))
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
