"""Hypothesis strategies for the tcgen05.mma builders: the cuda::ptx functions of
`instructions.tcgen05_mma` (tcgen05_mma{,_tmem_a}, the block-scale functions, the .ws collector
functions), called as cuda::ptx calls them.

Each draw picks a function, a kind, a CTA group and the operands, mostly what the function and
kind allow and sometimes not: a kind of another function (a block-scale one on a dense MMA, an
mx kind on .ws), the wrong number of disable_output_lane masks, scale_input_d out of range or on
a kind without it, cta_group::2 on .ws, operands of the wrong width. enable_input_d is a
predicate, its negation, or (as cuda::ptx passes it) a bool or a 32-bit register, which the
builder turns into a predicate with setp: the text then holds the setp too.
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from ..instructions.tcgen05_mma import Kind
from ..instructions.tcgen05_mma_ptx import FUNCTIONS
from .case import N, R, case, txt
from .tma import pick

KINDS = tuple(k.value for k in Kind)
# Mostly valid; a TMEM address in a register declared .u32 is refused by ptxas in tcgen05.mma.
D_TMEM = (R("b32", idx=1),) * 12 + (R("u32", idx=1), R("b64", idx=1))
A_TMEM = (R("b32", idx=2),) * 12 + (R("u32", idx=2), R("b64", idx=2))
A_DESC = (R("b64", idx=3),) * 6 + (R("u64", idx=3), 0x4000004000010040, R("b32", idx=3))
B_DESC = (R("b64", idx=4),) * 6 + (R("u64", idx=4), 0x4000004000010080, R("u32", idx=4))
IDESC = (R("b32", idx=5),) * 6 + (R("u32", idx=5), 0x08100490, R("b64", idx=5))
SCALES = (R("b32", idx=6),) * 12 + (R("u32", idx=6), R("b64", idx=6))
ZERO_MASK = (R("b64", idx=7),) * 4 + (0, R("b32", idx=7))
# A predicate register as is; a bool or a 32-bit register through setp (cuda::ptx's asm).
ENABLE = (R("pred"),) * 4 + (N(R("pred")), True, False, R("b32", idx=8), R("f32", idx=8))
SETP_PRED = R("pred", idx=9)


def _enable(value: Any) -> tuple[str, str]:
    """(the setp before the instruction or '', the operand the instruction reads)."""
    if isinstance(value, bool) or isinstance(value, R) and value.type == "b32":
        return f"setp.ne.b32 {SETP_PRED.txt}, {txt(value)}, 0;\n", SETP_PRED.txt
    return "", txt(value)


@st.composite
def tcgen05_mmas(draw):
    """Cases of the tcgen05_mma family, valid and invalid operands mixed, each with the PTX
    text it stands for, which ptxas judges."""
    fn = pick(draw, FUNCTIONS)
    kind = pick(draw, tuple(k.value for k in fn.kinds) * 6 + KINDS)
    cg = pick(draw, (1, 1, 2) if not fn.ws else (1,) * 8 + (2,))
    tags = [f"cta_group_{cg}", kind.replace("::", "_")]
    if not fn.ws:
        tags.reverse()
    names = pick(draw, fn.overloads)
    values: dict[str, Any] = {
        "d_tmem": pick(draw, D_TMEM), "a_tmem": pick(draw, A_TMEM),
        "a_desc": pick(draw, A_DESC), "b_desc": pick(draw, B_DESC),
        "idesc": pick(draw, IDESC), "enable_input_d": pick(draw, ENABLE),
        "scale_A_tmem": pick(draw, SCALES), "scale_B_tmem": pick(draw, SCALES),
        "zero_column_mask_desc": pick(draw, ZERO_MASK),
        "scale_input_d": pick(draw, tuple(range(16)) + (16,)),
        "disable_output_lane": tuple(R("b32", idx=20 + i) for i in range(
            pick(draw, (4 * cg,) * 6 + (4, 8)))),
    }
    setp, enable = _enable(values["enable_input_d"])
    ops = []
    for n in names[2:]:
        v = values[n]
        if n == "enable_input_d":
            ops.append(enable)
        elif n == "disable_output_lane":
            ops.append("{" + ", ".join(r.txt for r in v) + "}")
        elif n in ("d_tmem", "a_tmem", "scale_A_tmem", "scale_B_tmem"):
            ops.append(f"[{txt(v)}]")
        else:
            ops.append(txt(v))
    q = f"tcgen05.mma{'.ws' if fn.ws else ''}.cta_group::{cg}.{kind}"
    if fn.scale_vec is not None:
        q += f".block_scale.{fn.scale_vec.value}"
    if fn.collector is not None:
        q += (f".collector::b{fn.collector_b}::" if fn.ws else ".collector::a::") \
            + fn.collector.value
    text = f"{setp}{q} {', '.join(ops)};"
    args = (*tags, *(values[n] for n in names[2:]))
    facts = dict(function=fn.name, kind=kind, cta_group=cg, operands=names[2:],
                 enable_input_d=values["enable_input_d"])
    return case("tcgen05_mma", f"ptx.{fn.name}", args, None, text, **facts)


STRATEGIES = {"tcgen05_mma": tcgen05_mmas()}
