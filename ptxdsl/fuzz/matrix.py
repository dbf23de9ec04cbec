"""Hypothesis strategies for the warp matrix moves and the packed conversions: `k.ldmatrix` /
`k.stmatrix` (`.x1/.x2/.x4`, `.trans`, the .shared, .shared::cta and generic spaces) and
`k.cvt_packed` (f32 pairs to f16x2/bf16x2/e4m3x2/e5m2x2, f16x2 to fp8 pairs, fp8 pairs to
f16x2, with the rounding, .relu and .satfinite choices).

The space a builder infers when none is given, the destination registers it makes and the
saturation it defaults to for fp8 destinations are restated, so the text is determined by the
draw.
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from .case import A, R, S, addr, case, txt
from .tma import maybe, pick

# Row addresses: mostly valid (a 16-byte aligned shared symbol or offset, a shared register),
# sometimes not (8-byte offset, a 4-byte aligned symbol, a global or parameter address).
ROWS = (S("smem"),) * 4 + (A(S("smem"), 16), A(S("smem"), 512), R("u32"), R("u32"),
                           R("u64"), R("u64", "shared::cta"), A(S("smem"), 8), S("smem4"),
                           R("u64", "global"), S("ptr"), R("f32"))
SPACES = (None,) * 4 + ("shared", "shared::cta", "generic", "global", "shared::cluster")
REGS = ("b32",) * 12 + ("u32", "f32", "b64", "f16x2", "b16")


def _space(a: Any, space: str | None) -> str:
    """The space `ldmatrix`/`stmatrix` use: given, else .shared (`matrix._space`: generic only
    for a register known to hold a generic address, which the environment has not)."""
    return "shared" if space is None else space


def _dot(space: str) -> str:
    return "" if space == "generic" else "." + space


@st.composite
def matrices(draw):
    """Cases of the matrix family: ldmatrix and stmatrix, valid and invalid operands mixed, each
    with the PTX text it stands for, which ptxas judges (None for a Python-level mistake the
    builder must refuse)."""
    fam = "matrix"
    load = draw(st.booleans())
    a = pick(draw, ROWS)
    space = pick(draw, SPACES)
    trans = draw(st.booleans())
    num = pick(draw, (4, 2, 1, 4, 3))
    regs = tuple(R(pick(draw, REGS), idx=i) for i in range(num))
    sp = _space(a, space)
    q = f"m8n8.x{num}{'.trans' if trans else ''}{_dot(sp)}.b16"
    vec = "{" + ", ".join(txt(r) for r in regs) + "}"
    if load:
        dst = maybe(draw, (regs,), 0.5)
        if dst is None:      # the builder makes num fresh .b32 registers
            regs = tuple(R("b32", idx=i) for i in range(num))
            vec = "{" + ", ".join(txt(r) for r in regs) + "}"
        text: str | None = f"ldmatrix.sync.aligned.{q} {vec}, {addr(a)};"
        # with dst, num may be left out, or (a mistake) disagree with the registers
        count: Any = num if dst is None else pick(draw, (None, num, num, 4, 2, 1))
        if count is not None and count != num:
            text = None
        return case(fam, "k.ldmatrix", (a, count), {"trans": trans, "space": space,
                                                    "dst": dst},
                    text, op="ldmatrix", addr=a, space=space, num=count, trans=trans,
                    regs=regs)
    return case(fam, "k.stmatrix", (a, regs), {"trans": trans, "space": space},
                f"stmatrix.sync.aligned.{q} {addr(a)}, {vec};", op="stmatrix", addr=a,
                space=space, num=num, trans=trans, regs=regs)


# (to, from) -> (sources, source register type, destination register type)
PACKED = {**{(d, "f32"): (2, "f32", "b32") for d in ("f16x2", "bf16x2")},
          **{(d, "f32"): (2, "f32", "b16") for d in ("e4m3x2", "e5m2x2")},
          **{(d, "f16x2"): (1, "b32", "b16") for d in ("e4m3x2", "e5m2x2")},
          **{("f16x2", s): (1, "b16", "b32") for s in ("e4m3x2", "e5m2x2")}}
NAMES = ("f16x2", "bf16x2", "e4m3x2", "e5m2x2", "f32")


@st.composite
def cvt_packeds(draw):
    """Cases of the cvt_packed family: the packed conversions, valid and invalid operands mixed,
    each with the PTX text it stands for, which ptxas judges (None for a Python-level mistake
    the builder must refuse)."""
    fam = "cvt_packed"
    to, src = pick(draw, tuple(PACKED) * 4 + tuple((d, s) for d in NAMES for s in NAMES))
    sources, stype, dtype = PACKED.get((to, src), (2, "f32", "b32"))
    fp8_to = to in ("e4m3x2", "e5m2x2")
    a = pick(draw, (R(stype),) * 6 + (R("u32"), R("f16"), R("b64"), 1.0))
    b = pick(draw, (R(stype, idx=1),) * 6 + (None, R("u32", idx=1))) if sources == 2 \
        else maybe(draw, (R(stype, idx=1),), 0.9)
    rnd = pick(draw, ("rn",) * 4 + ("rz", "rm", "rni"))
    relu = draw(st.booleans())
    satfinite = pick(draw, (None,) * 3 + (True, False))
    dst = maybe(draw, (R(dtype, idx=2),) * 4 + (R("u32", idx=2), R("b16", idx=2)), 0.6)
    sat = fp8_to if satfinite is None else satfinite
    q = f"cvt.{rnd}" + (".satfinite" * sat + ".relu" * relu if fp8_to
                        else ".relu" * relu + ".satfinite" * sat)
    ops = [txt(dst or R(dtype, idx=2)), txt(a)] + ([txt(b)] if b is not None else [])
    # a float immediate has no packed spelling the builder could mean
    text = None if isinstance(a, float) else f"{q}.{to}.{src} {', '.join(ops)};"
    src_kw = None if src == "f32" and pick(draw, (True, False)) else src
    return case(fam, "k.cvt_packed", (to, a, b), {"src_type": src_kw, "rnd": rnd,
                                                  "relu": relu, "satfinite": satfinite,
                                                  "dst": dst},
                text, op="cvt_packed", to=to, src=src, a=a, b=b, rnd=rnd, relu=relu,
                satfinite=satfinite, dst=dst)


STRATEGIES = {"matrix": matrices(), "cvt_packed": cvt_packeds()}
