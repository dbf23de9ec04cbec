"""Hypothesis strategies for the tcgen05 builders other than the MMA: alloc, dealloc,
relinquish_alloc_permit, the fences, commit (and its multicast form), the waits, shift, the cp
forms, and the ld/st shapes.

Each draw takes a builder of the family and its operands, mostly valid and sometimes not: a
CTA group other than 1 and 2, a column count that is no power of two in 32..512 (or a register
of another type), a TMEM address that is an immediate, a register of another width or type, or
one known to hold a shared address (the slot, not the address in it), a slot or mbarrier
symbol too small or misaligned, a ctaMask of another width, a descriptor of another width,
an ld/st register list of the wrong length, type or with a register twice, a register or
negative immHalfSplitoff. Each case carries the PTX text it stands for, which ptxas judges.
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from ..instructions.tcgen05_ldst import NUMS, REGS_PER_NUM, TmemShape
from .case import A, R, S, case, txt
from .tma import pick

GROUPS = (1, 2) * 6 + (3,)
TADDRS = (R("b32", idx=1),) * 6 + (R("u32", idx=1), R("s32", idx=1), R("f32", idx=1),
                                   R("b64", idx=1), R("u32", "shared::cta", 1), 0)
N_COLS = (32, 64, 128, 256, 512) * 2 + (R("u32", idx=2), R("s32", idx=2), 48, 16, 1024, 0,
                                         R("f32", idx=2), R("u64", idx=2))
SLOTS = (S("smem4"),) * 4 + (A(S("smem4"), 8), A(S("smem4"), 2), A(S("smem4"), 64),
                             R("u32", "shared::cta", 3), R("u32", idx=3), S("bar"))
BARS = (S("bar"),) * 4 + (R("u32", "shared::cta", 3), R("u64", "shared::cluster", 3),
                          A(S("bar"), 4), S("smem4"), A(S("smem"), 8))
MASKS = (3, 0xFFFF, R("b16", idx=4), R("u16", idx=4), R("u32", idx=4), 0x10000)
DESCS = (R("b64", idx=5),) * 4 + (R("u64", idx=5), 0x4000004000010040, R("u32", idx=5), -1,
                                  R("f64", idx=5))
CP = (("128x256b", ""), ("4x256b", ""), ("128x128b", ""), ("64x128b", "warpx2::02_13"),
      ("64x128b", "warpx2::01_23"), ("32x128b", "warpx4"))
FMTS = ("", "", "b6x16_p32", "b4x16_p64")
REG_TYPES = ("b32",) * 12 + ("u32", "f32", "s32", "b64", "f16x2")
SPLITS = (0, 16, 64, 64, 256, -1, R("u32", idx=6))


def _cg(g: Any) -> str:
    return f"cta_group::{g}"


def _regs(draw, shape: TmemShape) -> tuple:
    """The register list of one access: mostly of a valid count, one type, distinct."""
    per = REGS_PER_NUM[shape]
    num = pick(draw, NUMS[shape][:5])       # the large ones make slow kernels
    count = pick(draw, (num * per,) * 10 + (num * per + 1, max(num * per - 1, 1)))
    rtype = pick(draw, REG_TYPES)
    odd = pick(draw, (rtype,) * 10 + ("u32", "s32", "f32"))
    regs = tuple(R(rtype if i < count - 1 else odd, idx=10 + i) for i in range(count))
    if count > 1 and pick(draw, (False,) * 11 + (True,)):
        regs = (regs[0], regs[0], *regs[2:])
    return regs


def _ld_st(draw, fam: str, op: str) -> Any:
    shape = pick(draw, tuple(TmemShape))
    packed = pick(draw, (False, True))
    regs = _regs(draw, shape)
    taddr = pick(draw, TADDRS)
    per = REGS_PER_NUM[shape]
    num = max(len(regs) // per, 1)
    split: tuple = (pick(draw, SPLITS),) if shape is TmemShape.s16x32bx2 else ()
    tail = "".join(f", {txt(s)}" for s in split)
    vec = "{" + ", ".join(txt(r) for r in regs) + "}"
    facts = dict(op=op, shape=shape.value, nregs=len(regs), reg=regs[0].type,
                 taddr=taddr, split=split)
    if op == "ld":
        q = f"tcgen05.ld.sync.aligned.{shape.value}.x{num}{'.pack::16b' if packed else ''}.b32"
        return case(fam, f"ptx.tcgen05_ld_{shape.value}{'_pack_16b' if packed else ''}",
                    (regs, taddr, *split), text=f"{q} {vec}, [{txt(taddr)}]{tail};", **facts)
    if pick(draw, (False,) * 12 + (True,)):
        regs = (5, *regs[1:])                # an immediate value
        vec = "{" + ", ".join(txt(r) for r in regs) + "}"
    q = f"tcgen05.st.sync.aligned.{shape.value}.x{num}{'.unpack::16b' if packed else ''}.b32"
    return case(fam, f"ptx.tcgen05_st_{shape.value}{'_unpack_16b' if packed else ''}",
                (taddr, *split, regs), text=f"{q} [{txt(taddr)}]{tail}, {vec};", **facts)


@st.composite
def tcgen05s(draw):
    """Cases of the tcgen05 builders other than the MMA, valid and invalid operands mixed, each
    with the PTX text it stands for."""
    fam = "tcgen05"
    op = pick(draw, ("alloc", "dealloc", "relinquish", "fence", "wait", "commit", "commit",
                     "shift", "cp", "cp", "ld", "ld", "ld", "st", "st", "st"))
    g = pick(draw, GROUPS)
    if op in ("ld", "st"):
        return _ld_st(draw, fam, op)
    if op == "fence":
        side = pick(draw, ("before", "after"))
        return case(fam, f"ptx.tcgen05_fence_{side}_thread_sync",
                    text=f"tcgen05.fence::{side}_thread_sync;", op=op)
    if op == "wait":
        what = pick(draw, ("ld", "st"))
        return case(fam, f"ptx.tcgen05_wait_{what}", text=f"tcgen05.wait::{what}.sync.aligned;",
                    op=op)
    if op == "relinquish":
        return case(fam, "ptx.tcgen05_relinquish_alloc_permit", (g,),
                    text=f"tcgen05.relinquish_alloc_permit.{_cg(g)}.sync.aligned;", op=op, g=g)
    if op == "alloc":
        dst, n = pick(draw, SLOTS), pick(draw, N_COLS)
        dtxt = dst.txt if isinstance(dst, A) else f"[{txt(dst)}]"
        return case(fam, "ptx.tcgen05_alloc", (g, dst, n),
                    text=f"tcgen05.alloc.{_cg(g)}.sync.aligned.shared::cta.b32 {dtxt}, {txt(n)};",
                    op=op, g=g, dst=dst, n_cols=n)
    taddr = pick(draw, TADDRS)
    if op == "dealloc":
        n = pick(draw, N_COLS)
        return case(fam, "ptx.tcgen05_dealloc", (g, taddr, n),
                    text=f"tcgen05.dealloc.{_cg(g)}.sync.aligned.b32 {txt(taddr)}, {txt(n)};",
                    op=op, g=g, taddr=taddr, n_cols=n)
    if op == "shift":
        return case(fam, "ptx.tcgen05_shift_down", (g, taddr),
                    text=f"tcgen05.shift.{_cg(g)}.down [{txt(taddr)}];", op=op, g=g, taddr=taddr)
    if op == "commit":
        bar = pick(draw, BARS)
        btxt = bar.txt if isinstance(bar, A) else f"[{txt(bar)}]"
        q = f"tcgen05.commit.{_cg(g)}.mbarrier::arrive::one.shared::cluster"
        if pick(draw, (False, True)):
            mask = pick(draw, MASKS)
            text = f"{q}.multicast::cluster.b64 {btxt}, {txt(mask)};"
            if isinstance(mask, int) and mask <= 0xFFFF:
                # as the builder emits it: ptxas before 13.5 takes the mask from a register only
                reg = R("b16", idx=9)
                text = f"mov.b16 {reg.txt}, {mask};\n{q}.multicast::cluster.b64 {btxt}, {reg.txt};"
            return case(fam, "ptx.tcgen05_commit_multicast", (g, bar, mask), text=text, op=op,
                        g=g, bar=bar, mask=mask)
        return case(fam, "ptx.tcgen05_commit", (g, bar), text=f"{q}.b64 {btxt};", op=op, g=g,
                    bar=bar)
    shape, mc = pick(draw, CP)
    fmt = pick(draw, FMTS)
    desc = pick(draw, DESCS)
    quals = shape + (f".{mc}" if mc else "") + (f".b8x16.{fmt}" if fmt else "")
    name = "tcgen05_cp_" + quals.replace(".", "_").replace("::", "_")
    return case(fam, f"ptx.{name}", (g, taddr, desc),
                text=f"tcgen05.cp.{_cg(g)}.{quals} [{txt(taddr)}], {txt(desc)};", op=op, g=g,
                taddr=taddr, desc=desc)


STRATEGIES = {"tcgen05": tcgen05s()}
