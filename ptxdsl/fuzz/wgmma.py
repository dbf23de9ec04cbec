"""Hypothesis strategies for the warpgroup MMA builders: `wgmma_mma_async` (dense, SS and RS
forms), `wgmma_mma_async_sp` (sparse), `wgmma_fence`, `wgmma_commit_group` and
`wgmma_wait_group`.

Each draw picks the input types, accumulator type, N, the A operand (a descriptor register or
value for SS, four registers for RS), scale-d and the optional immediates (scale, transpose),
mostly from what the type's row of the ISA table allows and sometimes not: a wrong N or
accumulator, mixed input types, an immediate the type does not take, the wrong number or type of
accumulator registers, one register given twice (two accumulators or A values), a
MatrixDescriptor of a tile of another width or major-ness. N and the accumulator type are
passed explicitly, so the PTX text is determined by the draw; the immediates the builder fills
in (scale 1, transpose 0) are restated.
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from ..instructions.wgmma import ALL_N, KIND_OF, WgmmaType, d_count, d_register_type
from ..types import ScalarType
from .case import F, M, N, R, case, txt
from .tma import maybe, pick

TYPES = tuple(w.value for w in WgmmaType)
DTYPES = ("f32", "f16", "s32")
# Mostly the N a type allows (smaller ones more often: they make shorter kernels), sometimes not.
NS = (8, 8, 16, 16, 24, 32, 48, 64, 64, 128, 256, 40, 56, 264, 12, 0)
DESCS = (R("b64", idx=1),) * 4 + (R("u64", idx=1), 0x4000004000010040, R("u32"), -1, R("f64"))
B_DESCS = (R("b64", idx=2),) * 4 + (R("u64", idx=2), 0x4000004000010080, R("b32"))
SCALE_D = (R("pred"), R("pred"), N(R("pred")), 1, 0, 2)


def _kind(atype: str):
    w = next((w for w in WgmmaType if w.value == atype), None)
    return None if w is None else KIND_OF[w]


LAYOUT_TYPES = ("f16", "bf16", "tf32", "e4m3", "s8")


def _desc(draw, wtype: str, idx: int, plain: tuple):
    """A descriptor operand: mostly a plain register or value, sometimes a MatrixDescriptor
    of a tile of the input's width (or, now and then, of another width; 16-bit tiles are
    K- or MN-major, which sets the transpose flag)."""
    if pick(draw, (True, True, False)):
        return pick(draw, plain)
    bits = {"tf32": 32, "e4m3": 8, "e5m2": 8, "s8": 8, "u8": 8, "f16": 16, "bf16": 16}
    same = tuple(t for t in LAYOUT_TYPES if bits[t] == bits.get(wtype))
    dtype = pick(draw, same * 6 + LAYOUT_TYPES if same else LAYOUT_TYPES)
    major = "MN" if bits[dtype] == 16 and pick(draw, (False, True)) else "K"
    return M(R("b64", idx=idx), dtype, 64, 256 // bits[dtype] * 4, major,
             pick(draw, (128, 64, 32, 0)))


def _vec(regs) -> str:
    return regs.txt if isinstance(regs, F) else "{" + ", ".join(txt(r) for r in regs) + "}"


def _trans(value, tnsp):
    """The transpose immediate the builder emits: given, else the descriptor's (MN-major: 1)."""
    if tnsp is not None:
        return tnsp
    return 1 if isinstance(value, M) and value.major == "MN" else 0


def _d_regs(draw, n: int, dtype: str) -> tuple:
    dt = ScalarType(dtype)
    count = d_count(n, dt) if n > 0 else 1
    rtype = d_register_type(dt).value
    count = pick(draw, (count,) * 8 + (count + 1, max(count - 1, 1)))
    rtype = pick(draw, (rtype,) * 10 + ("b32", "f32", "u32"))
    odd = pick(draw, (rtype,) * 8 + ("b32", "u32", "s32", "f32"))   # the last one's type
    return _repeat(draw, tuple(R(rtype if i < count - 1 else odd, idx=i) for i in range(count)))


def _repeat(draw, regs: tuple) -> tuple:
    """Now and then one register twice (ptxas takes it; two accumulators become one)."""
    if len(regs) > 1 and pick(draw, (False,) * 11 + (True,)):
        return (regs[0], regs[0], *regs[2:])
    return regs


@st.composite
def wgmmas(draw):
    """Cases of the wgmma family: dense and sparse mma_async over every shape and type, fence,
    commit_group and wait_group, valid and invalid operands mixed, each with the PTX text it
    stands for, which ptxas judges (None for a Python-level mistake the builder must refuse)."""
    fam = "wgmma"
    which = pick(draw, ("mma",) * 6 + ("sp", "sp", "fence", "commit", "wait"))
    if which == "fence":
        return case(fam, "ptx.wgmma_fence", text="wgmma.fence.sync.aligned;", op=which)
    if which == "commit":
        return case(fam, "ptx.wgmma_commit_group", text="wgmma.commit_group.sync.aligned;",
                    op=which)
    if which == "wait":
        n = pick(draw, (0, 1, 7, 8, -1, R("u32")))
        return case(fam, "ptx.wgmma_wait_group", (n,),
                    text=f"wgmma.wait_group.sync.aligned {txt(n)};", op=which, n=n)
    sparse = which == "sp"
    atype = pick(draw, TYPES)
    kind = _kind(atype)
    assert kind is not None
    same = tuple(w.value for w in kind.types)
    btype = pick(draw, same * 16 + TYPES)
    dtype = pick(draw, tuple(t.value for t in kind.dtypes) * 6 + DTYPES)
    n = pick(draw, tuple(x for x in NS if x in kind.n) * 3 + NS + ALL_N)   # ALL_N: each N
    d: Any = _d_regs(draw, n, dtype)
    # (a fragment's registers are distinct: k.fragment makes them)
    if dtype in ("f32", "s32", "f16") and len({r.type for r in d}) == 1 and \
            len(set(d)) == len(d) and \
            len(d) == d_count(n, ScalarType(dtype)) and pick(draw, (False, True)):
        d = F(d, dtype, n)            # the accumulators as k.fragment(...)
    rs = pick(draw, (False, False, False, True))
    a: Any = _repeat(draw, tuple(R(pick(draw, ("b32",) * 30 + ("f32", "u32", "f16x2")),
                                   idx=10 + i) for i in range(4))) if rs else \
        _desc(draw, atype, 1, DESCS)
    if rs and all(r.type == "b32" for r in a) and len(set(a)) == 4 and pick(draw, (False, True)):
        # k.a_fragment(t): its values' type must be atype (or, now and then, is not)
        a = F(a, pick(draw, (atype,) * 4 + ("bf16", "f16", "tf32", "e4m3", "s8")))
    b = _desc(draw, btype, 2, B_DESCS)
    scale_d = pick(draw, SCALE_D)
    # the immediates the type takes, mostly valid; the others now and then
    scales = (1, -1) * 6 + (0, 2) if kind.scale_ab else (1, -1, 0)
    imm_a = maybe(draw, scales, 0.5 if kind.scale_ab else 0.93)
    imm_b = maybe(draw, scales, 0.5 if kind.scale_ab else 0.93)
    trans = kind.transpose and kind.scale_ab
    tnsp_a = maybe(draw, (0, 1) * 6 + (2,) if trans and not rs else (0, 1),
                   0.5 if trans and not rs else 0.93)
    tnsp_b = maybe(draw, (0, 1) * 6 + (2,) if trans else (0, 1), 0.5 if trans else 0.93)
    # a descriptor of an MN-major tile sets the flag the builder emits
    mn_major = any(isinstance(v, M) and v.major == "MN" for v in (a, b))
    satfinite = pick(draw, (False, True) if atype in ("s8", "u8") else (False,) * 15 + (True,))
    shape = f"m64n{n}k{kind.k * (2 if sparse else 1)}"
    q = (f"wgmma.mma_async{'.sp' if sparse else ''}.sync.aligned.{shape}.{dtype}.{atype}."
         f"{btype}" + (".satfinite" if satfinite else "") + (".and.popc" if atype == "b1"
                                                              else ""))
    tail = [txt(scale_d)]
    if kind.scale_ab or imm_a is not None or imm_b is not None:
        tail += [txt(1 if imm_a is None else imm_a), txt(1 if imm_b is None else imm_b)]
    if trans or tnsp_a is not None or tnsp_b is not None or mn_major:
        if not rs or tnsp_a is not None:
            tail.append(txt(_trans(a, tnsp_a)))
        tail.append(txt(_trans(b, tnsp_b)))
    ops = [_vec(d), _vec(a) if rs else txt(a), txt(b)]
    kw: dict[str, Any] = {"atype": atype, "btype": btype, "dtype": dtype, "n": n,
                          "satfinite": satfinite}
    lead: tuple = (d, a, b)
    dregs = d.regs if isinstance(d, F) else d
    facts = dict(op=which, atype=atype, btype=btype, dtype=dtype, n=n, rs=rs,
                 ndregs=len(dregs), dreg=dregs[0].type, scale_d=scale_d, imm_scale_a=imm_a,
                 imm_scale_b=imm_b, tnspA=tnsp_a, tnspB=tnsp_b, satfinite=satfinite)
    text: str | None
    if sparse:
        meta = maybe(draw, (R("b32", idx=3),) * 4 + (R("u32", idx=3), R("b64", idx=3)), 0.1)
        sel = pick(draw, (0, 0, 1, 2, -1))
        lead += (meta, sel)
        ops += [txt(meta), txt(sel)] if meta is not None else []
        text = f"{q} {', '.join(ops + tail)};" if meta is not None else None
        facts |= {"sp_meta": meta, "sp_sel": sel}
    else:
        text = f"{q} {', '.join(ops + tail)};"
    args = (*lead, scale_d, imm_a, imm_b, tnsp_a, tnsp_b)
    call = "ptx.wgmma_mma_async_sp" if sparse else "ptx.wgmma_mma_async"
    return case(fam, call, args, kw, text, **facts)


STRATEGIES = {"wgmma": wgmmas()}
