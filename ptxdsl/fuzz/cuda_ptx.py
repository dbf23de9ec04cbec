"""Hypothesis strategies for the issue-15 cuda::ptx builders: bit manipulation (prmt, bfind,
bmsk, shl, shr), clusters (barrier.cluster, mapa, getctarank, st.async, red.async) and multimem.

Each draw calls the `ptxdsl.ptx` builder with cuda::ptx's arguments, sometimes wrong ones, and
writes the PTX the builder would emit (its type choice restated: `.bN` for shl and cuda::ptx's
B-typed values, the register's own type for bfind and shr of a signed value).
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from .case import A, R, S, addr, case, txt
from .tma import maybe, pick

VALUES = (R("u32"), R("s32"), R("b32"), R("f32"), R("u64"), R("s64"), R("b64"), R("f64"),
          R("u16"), R("s16"), R("b16"), R("pred"), R("u8"), 5, -1)
_BITS: dict[int | None, str] = {8: "b8", 16: "b16", 32: "b32", 64: "b64"}


def _bits(tok) -> int | None:
    return tok.bits if isinstance(tok, R) else None


@st.composite
def bits(draw):
    """Cases of the bits family: prmt, bfind, bmsk, shl and shr through their cuda::ptx builders,
    valid and invalid operands mixed, each with the PTX text it stands for, which ptxas judges
    (None for a Python-level mistake the builder must refuse)."""
    fam = "bits"
    which = pick(draw, ("prmt", "bfind", "bmsk", "shl", "shr"))
    if which == "prmt":
        mode = pick(draw, ("", "f4e", "b4e", "rc8", "ecl", "ecr", "rc16"))
        a, b, c = (pick(draw, VALUES) for _ in range(3))
        q = f".{mode}" if mode else ""
        return case(fam, f"ptx.prmt{'_' + mode if mode else ''}", (a, b, c),
                    text=f"prmt.b32{q} {R('b32', idx=3).txt}, {txt(a)}, {txt(b)}, {txt(c)};",
                    op="prmt", mode=mode, a=a, b=b, c=c)
    a = pick(draw, VALUES)
    t = a.type if isinstance(a, R) else None
    if which == "bfind":
        shiftamt = draw(st.booleans())
        if t in ("b32", "b64"):
            t = "u" + t[1:]
        fn = "ptx.bfind_shiftamt" if shiftamt else "ptx.bfind"
        q = ".shiftamt" if shiftamt else ""
        text = None if t is None else f"bfind{q}.{t} {R('u32', idx=3).txt}, {txt(a)};"
        return case(fam, fn, (a,), text=text, op="bfind", a=a)
    b = pick(draw, (1, 31, 64, R("u32"), R("b32"), R("u64"), R("s32")))
    if which == "bmsk":
        mode = pick(draw, ("clamp", "wrap"))
        return case(fam, f"ptx.bmsk_{mode}", (a, b),
                    text=f"bmsk.{mode}.b32 {R('b32', idx=3).txt}, {txt(a)}, {txt(b)};",
                    op="bmsk", a=a, b=b)
    if t is None:
        text = None                           # no register: no type to shift
    else:
        it = t if which == "shr" and t.startswith("s") else _BITS.get(_bits(a), t)
        text = f"{which}.{it} {R(t, idx=3).txt}, {txt(a)}, {txt(b)};"
    return case(fam, f"ptx.{which}", (a, b), text=text, op=which, a=a, b=b)


# -- clusters ------------------------------------------------------------------------------------
CLUSTER_ADDRS = (R("u32"), R("u32", "shared::cluster"), R("u64", "shared::cluster"), S("bar"),
                 S("smem"), R("u64"), R("u64", "global"), A(R("u32"), 8), R("f32"))
SPACES = ("cluster", "shared::cluster", "generic", "shared", "global")


def _cluster_space(space: str) -> str:
    """The qualifier a space name stands for ('shared' is .shared::cta in every family)."""
    return {"generic": "", "cluster": ".shared::cluster", "shared": ".shared::cta"}.get(
        space, "." + space)


@st.composite
def clusters(draw):
    """Cases of the cluster family: barrier.cluster, mapa, getctarank, st.async and red.async,
    valid and invalid operands mixed, each with the PTX text it stands for, which ptxas judges
    (None for a Python-level mistake the builder must refuse)."""
    fam = "cluster"
    which = pick(draw, ("arrive", "wait", "mapa", "getctarank", "st_async", "red_async"))
    if which in ("arrive", "wait"):
        sem = maybe(draw, ("release", "relaxed", "acquire", "acq_rel"), 0.4)
        aligned = draw(st.booleans())
        q = (f".{sem}" if sem else "") + (".aligned" if aligned else "")
        return case(fam, f"ptx.barrier_cluster_{which}", (sem,), {"aligned": aligned},
                    f"barrier.cluster.{which}{q};", op=which, sem=sem)
    if which in ("mapa", "getctarank"):
        sp = pick(draw, SPACES)
        a = pick(draw, CLUSTER_ADDRS)
        w = "u64" if isinstance(a, R) and a.bits == 64 else "u32"
        head = f"{which}{_cluster_space(sp)}.{w}"
        if which == "mapa":
            cta = pick(draw, (1, 0, R("u32"), R("u64")))
            text = f"{head} {R(w, idx=3).txt}, {txt(a)}, {txt(cta)};"
            args: tuple[Any, ...] = (sp, a, cta)
        else:
            text = f"{head} {R('u32', idx=3).txt}, {txt(a)};"
            args = (sp, a)
        return case(fam, f"ptx.{which}", args, text=text, op=which, space=sp, addr=a)
    a = pick(draw, CLUSTER_ADDRS)
    bar = pick(draw, CLUSTER_ADDRS)
    head = ".shared::cluster.mbarrier::complete_tx::bytes"
    if which == "st_async":
        t = pick(draw, ("b32", "b64", "u32", "s64", "f32", "f64", "b16", "u8"))
        n = pick(draw, (1, 1, 2, 4, 3))
        vals = tuple(R(t, idx=i) for i in range(n))
        value = vals[0] if n == 1 else vals
        vtext = vals[0].txt if n == 1 else "{" + ", ".join(v.txt for v in vals) + "}"
        vq = f".v{n}" if n > 1 else ""
        return case(fam, "ptx.st_async", (a, value, bar), {"type": t},
                    f"st.async.weak{head}{vq}.{t} {addr(a)}, {vtext}, {addr(bar)};", op=which,
                    type=t, n=n)
    op = pick(draw, ("inc", "dec", "min", "max", "add", "and", "or", "xor", "exch"))
    t = pick(draw, ("u32", "s32", "u64", "s64", "b32", "b64", "f32"))
    v = pick(draw, (R(t), R(t), 3, R("u16")))
    return case(fam, "ptx.red_async", (op, a, v, bar), {"type": t},
                f"red.async.relaxed.cluster{head}.{op}.{t} {addr(a)}, {txt(v)}, {addr(bar)};",
                op=which, red=op, type=t)


# -- multimem ------------------------------------------------------------------------------------
@st.composite
def multimems(draw):
    """Cases of the multimem family: multimem.ld_reduce, st and red, valid and invalid operands
    mixed, each with the PTX text it stands for, which ptxas judges (None for a Python-level
    mistake the builder must refuse)."""
    fam = "multimem"
    kind = pick(draw, ("ld_reduce", "st", "red"))
    sem = pick(draw, ("weak", "relaxed", "acquire", "release", "acq_rel"))
    scope = None if sem == "weak" and draw(st.integers(0, 4)) else pick(
        draw, ("cta", "cluster", "gpu", "sys"))
    a = pick(draw, (R("u64", "global"), R("u64", "global"), R("u32"), R("u64", "shared::cta")))
    t = pick(draw, ("u32", "s32", "u64", "s64", "b32", "b64", "f32", "u16"))
    q = f".{sem}" + (f".{scope}" if scope else "") + ".global"
    lead = (sem, scope) if scope else (sem,)
    if kind != "ld_reduce" and draw(st.integers(0, 3)) == 0:   # a vector form (st, red)
        t = pick(draw, ("f32", "f16", "bf16", "f16x2", "bf16x2", "u32", "f64"))
        n = pick(draw, (2, 4, 8, 3))
        lanes = tuple(R(t) for _ in range(n))
        vop = () if kind == "st" else (pick(draw, ("min", "max", "add", "and")),)
        text = ", ".join(txt(x) for x in lanes)
        head = f"multimem.{kind}{q}" + "".join(f".{o}" for o in vop)
        return case(fam, f"ptx.multimem_{kind}", (*lead, *vop, a, lanes), {"type": t},
                    f"{head}.v{n}.{t} [{txt(a)}], {{{text}}};", op=kind, sem=sem,
                    red=vop[0] if vop else None, type=t)
    if kind == "st":
        v = R(t)
        return case(fam, "ptx.multimem_st", (*lead, a, v), {"type": t},
                    f"multimem.st{q}.{t} [{txt(a)}], {txt(v)};", op=kind, sem=sem, type=t)
    op = pick(draw, ("min", "max", "add", "and", "or", "xor", "inc"))
    if kind == "ld_reduce":
        return case(fam, "ptx.multimem_ld_reduce", (*lead, op, a), {"type": t},
                    f"multimem.ld_reduce{q}.{op}.{t} {R(t, idx=3).txt}, [{txt(a)}];",
                    op=kind, sem=sem, red=op, type=t)
    v = R(t)
    return case(fam, "ptx.multimem_red", (*lead, op, a, v), {"type": t},
                f"multimem.red{q}.{op}.{t} [{txt(a)}], {txt(v)};", op=kind, sem=sem, red=op,
                type=t)


STRATEGIES = {"bits": bits(), "cluster": clusters(), "multimem": multimems()}
