"""Hypothesis strategies for the bulk-copy families: cp.async.bulk (1-D), its prefetch and
reduction, bulk groups, createpolicy, and the tensor forms (cp.async.bulk.tensor loads and
stores, cp.reduce.async.bulk.tensor, cp.async.bulk.prefetch.tensor)."""

from __future__ import annotations

from hypothesis import strategies as st

from ..operands import Imm
from ..types import ScalarType
from .case import A, R, S, addr, case, txt
from .tma import maybe, pick

MB = "mbarrier::complete_tx::bytes"
SPACES = ("shared::cluster", "shared::cta", "global")
SHARED = (S("smem"), S("smem"), R("u32"), A(S("smem"), 16), A(S("smem"), 8), S("smem4"),
          R("u64", "global"))
GLOBAL = (R("u64"), R("u64"), R("u64", "global"), R("u32"), R("u64", "shared::cta"))
SIZES = (16, 1024, 8, 0, R("u32"), R("u64"))
MASKS = (0xFFFF, 3, R("u16"), R("b16"), R("u32"), 0x10000)
POLICIES = (R("b64"), R("u64"), R("u32"))
RED_OPS = ("add", "min", "max", "inc", "dec", "and", "or", "xor")
RED_TYPES = ("u32", "s32", "u64", "s64", "f16", "bf16", "f32", "f64", "b32", "b64", "u16")
PRIOS = ("evict_last", "evict_normal", "evict_first", "evict_unchanged")


def _space_text(sp: str) -> str:
    return {"cluster": "shared::cluster", "shared": "shared::cta"}.get(sp, sp)


def _operand(draw, space: str):
    return pick(draw, SHARED if space.startswith("shared") else GLOBAL)


@st.composite
def bulks(draw):
    """Cases of the bulk family: cp.async.bulk copies, prefetches, reductions, commit/wait groups
    and cache policies, valid and invalid operands mixed, each with the PTX text it stands for,
    which ptxas judges (None for a Python-level mistake the builder must refuse)."""
    which = pick(draw, ("copy", "copy", "copy", "prefetch", "reduce", "reduce", "group",
                        "policy"))
    fam = "bulk"
    if which == "copy":
        d, s = pick(draw, SPACES + ("shared",)), pick(draw, SPACES)
        dt, st_ = _space_text(d), _space_text(s)
        dst, src = _operand(draw, dt), _operand(draw, st_)
        size = pick(draw, SIZES)
        store = dt == "global"
        bar = maybe(draw, (S("bar"), R("u32"), A(S("bar"), 4)), 0.7 if store else 0.15)
        mask = maybe(draw, MASKS, 0.8)
        pol = maybe(draw, POLICIES, 0.7)
        bmask = maybe(draw, MASKS, 0.85)
        completion = MB if bar is not None or not store else "bulk_group"
        q = (f"cp.async.bulk.{dt}.{st_}.{completion}" + (".multicast::cluster" if mask
             is not None else "") + (".L2::cache_hint" if pol is not None else "")
             + (".cp_mask" if bmask is not None else ""))
        ops = [addr(dst), addr(src), txt(size)] + [addr(bar)] * (bar is not None) + [
            txt(v) for v in (mask, pol, bmask) if v is not None]
        return case(fam, "ptx.cp_async_bulk", (d, s, dst, src, size, bar),
                    {"cta_mask": mask, "cache_policy": pol, "byte_mask": bmask},
                    f"{q} {', '.join(ops)};", dst_space=dt, src_space=st_, dst=dst, src=src,
                    size=size, bar=bar, mask=mask, policy=pol, byte_mask=bmask)
    if which == "prefetch":
        src, size, pol = pick(draw, GLOBAL + (S("smem"),)), pick(draw, SIZES), \
            maybe(draw, POLICIES, 0.6)
        text = (f"cp.async.bulk.prefetch.L2.global{'.L2::cache_hint' if pol else ''} "
                f"{addr(src)}, {txt(size)}" + (f", {txt(pol)}" if pol else "") + ";")
        return case(fam, "ptx.cp_async_bulk_prefetch", (src, size, pol), text=text, src=src,
                    size=size, policy=pol)
    if which == "reduce":
        d = pick(draw, ("shared::cluster", "global", "global", "shared::cta"))
        op, ty = pick(draw, RED_OPS), pick(draw, RED_TYPES)
        dst, src = _operand(draw, d), pick(draw, SHARED)
        size = pick(draw, SIZES)
        bar = maybe(draw, (S("bar"), R("u32")), 0.8 if d == "global" else 0.15)
        pol = maybe(draw, POLICIES, 0.7)
        completion = "bulk_group" if d == "global" and bar is None else MB
        noftz = ".noftz" if op == "add" and ty in ("f16", "bf16") else ""
        q = (f"cp.reduce.async.bulk.{d}.shared::cta.{completion}"
             + (".L2::cache_hint" if pol else "") + f".{op}{noftz}.{ty}")
        ops = [addr(dst), addr(src), txt(size)] + [addr(bar)] * (bar is not None) + (
            [txt(pol)] if pol else [])
        return case(fam, "ptx.cp_reduce_async_bulk", (d, "shared::cta", op, dst, src, size,
                                                      bar),
                    {"type": ScalarType(ty), "cache_policy": pol}, f"{q} {', '.join(ops)};",
                    dst_space=d, op=op, type=ty, dst=dst, size=size, bar=bar, policy=pol)
    if which == "group":
        if draw(st.booleans()):
            return case(fam, "ptx.cp_async_bulk_commit_group", text="cp.async.bulk.commit_group;")
        n, read = pick(draw, (0, 1, 7, 63, -1, R("u32"))), draw(st.booleans())
        fn = "ptx.cp_async_bulk_wait_group" + ("_read" if read else "")
        return case(fam, fn, (n,), text=f"cp.async.bulk.wait_group{'.read' if read else ''} "
                    f"{txt(n)};", n=n, read=read)
    return draw(policies())


def _frac(v) -> str:
    return Imm(float(v), ScalarType.f32).render() if isinstance(v, float | int) else txt(v)


@st.composite
def policies(draw):
    """Cases of the bulk family: createpolicy (fractional, range, cvt), valid and invalid operands
    mixed, each with the PTX text it stands for, which ptxas judges (None for a Python-level
    mistake the builder must refuse)."""
    fam, kind = "bulk", pick(draw, ("fractional", "fractional", "range", "cvt"))
    dst = maybe(draw, (R("b64"), R("u64"), R("u32")), 0.5)
    d = txt(dst or R("b64"))
    if kind == "cvt":
        ap = pick(draw, (0, 1, R("b64"), R("u64"), R("u32")))
        return case(fam, "ptx.createpolicy_cvt", (ap,), {"dst": dst},
                    f"createpolicy.cvt.L2.b64 {d}, {txt(ap)};", ap=ap, dst=dst)
    p = pick(draw, PRIOS)
    s = maybe(draw, PRIOS, 0.5)
    prio = f".L2::{p}" + (f".L2::{s}" if s else "")
    if kind == "fractional":
        f = pick(draw, (1.0, 0.5, 0.0, 1.5, -0.5, None, R("f32"), R("u32")))
        text = f"createpolicy.fractional{prio}.b64 {d}" + (f", {_frac(f)}" if f is not None
                                                           else "") + ";"
        return case(fam, "ptx.createpolicy_fractional", (p, s, f), {"dst": dst}, text,
                    primary=p, secondary=s, fraction=f, dst=dst)
    a = pick(draw, (R("u64"), R("u64", "global"), R("u32"), S("smem")))
    sp = pick(draw, ("generic", "global", "shared"))
    ps, ts = pick(draw, (0, 1024, 4096, R("u32"), R("u64"))), pick(draw, (1024, 4096, 0,
                                                                         R("u32")))
    text = (f"createpolicy.range{'' if sp == 'generic' else '.' + sp}{prio}.b64 {d}, "
            f"{addr(a)}, {txt(ps)}, {txt(ts)};")
    return case(fam, "ptx.createpolicy_range", (a, ps, ts, p, s), {"space": sp, "dst": dst},
                text, primary=p, secondary=s, space=sp, addr=a, primary_size=ps, total_size=ts,
                dst=dst)


# -- tensor forms ------------------------------------------------------------------------------
LOAD_MODES = ("tile", "tile::gather4", "im2col", "im2col::w", "im2col::w::128")
STORE_MODES = ("tile", "tile::scatter4", "im2col_no_offs")
# Weighted towards valid operands, so enough tensor forms get through to the assembly check.
TMAPS = (R("u64"),) * 6 + (R("u64", "param"), S("tmap"), R("u32"), R("u64", "shared::cta"))
COORDS = (R("s32"), R("u32"), R("b32"), 0, 5) * 4 + (-1, R("u64"), R("f32"))
TSHARED = (S("smem"),) * 6 + SHARED


@st.composite
def bulk_tensors(draw):
    """Cases of the bulk_tensor family: tensor copies in every mode and dimension, stores,
    reductions and prefetches, valid and invalid operands mixed, each with the PTX text it
    stands for, which ptxas judges (None for a Python-level mistake the builder must refuse)."""
    fam = "bulk_tensor"
    which = pick(draw, ("load", "load", "store", "reduce", "prefetch"))
    modes = LOAD_MODES if which in ("load", "prefetch") else STORE_MODES
    mode = pick(draw, ("tile",) * 4 + modes * 2 + LOAD_MODES + STORE_MODES)
    four = mode in ("tile::gather4", "tile::scatter4")
    dim = pick(draw, (1, 2, 3, 4, 5)) if not four else 2
    explicit = maybe(draw, (dim, 0, 6, 3), 0.9)
    n = 5 if four else max(dim if explicit is None else explicit, 0)
    n = pick(draw, (n,) * 8 + (n + 1, max(n - 1, 0)))
    coords = tuple(pick(draw, COORDS) for _ in range(n))
    # the builders take the dimension from the coordinate count unless dim= is given
    dim = explicit if explicit is not None else 2 if four else n
    tmap = pick(draw, TMAPS)
    pol = maybe(draw, POLICIES[:1] * 4 + POLICIES, 0.7)
    ref = f"[{txt(tmap)}, {{{', '.join(txt(c) for c in coords)}}}]"
    im2col = None
    if which in ("load", "prefetch") and mode.startswith("im2col") or draw(
            st.integers(0, 20)) == 0:
        want = (dim - 2 if mode == "im2col" else 2) if dim else 1
        want = pick(draw, (want, want, want + 1))
        im2col = tuple(pick(draw, (R("u16"), R("b16"), 0, 3, R("u32"))) for _ in range(want))
    i2c = [f"{{{', '.join(txt(v) for v in im2col)}}}"] if im2col is not None else []
    hint = ".L2::cache_hint" if pol is not None else ""
    polop = [txt(pol)] if pol is not None else []
    kw = {"mode": mode, "cache_policy": pol, "dim": explicit}
    facts = dict(kind=which, mode=mode, dim=dim, ncoords=n, coords=coords, tmap=tmap,
                 policy=pol, im2col=im2col)
    if which == "load":
        dsp = pick(draw, ("shared::cluster", "shared::cta", "shared::cta"))
        smem = pick(draw, TSHARED)
        bar = maybe(draw, (S("bar"),) * 4 + (R("u32"), A(S("bar"), 4)), 0.1)
        mask = maybe(draw, MASKS, 0.8)
        group = maybe(draw, (1, 2), 0.85)
        q = (f"cp.async.bulk.tensor.{dim}d.{dsp}.global.{mode}.{MB}"
             + (".multicast::cluster" if mask is not None else "")
             + (f".cta_group::{group}" if group else "") + hint)
        ops = [addr(smem), ref] + [addr(bar)] * (bar is not None) + i2c + (
            [txt(mask)] if mask is not None else []) + polop
        kw |= {"cta_mask": mask, "im2col": im2col, "cta_group": group}
        return case(fam, "ptx.cp_async_bulk_tensor", (dsp, "global", smem, tmap, coords, bar),
                    kw, f"{q} {', '.join(ops)};", dst_space=dsp, smem=smem, bar=bar, mask=mask,
                    cta_group=group, **facts)
    if which == "store":
        src = pick(draw, TSHARED)
        q = f"cp.async.bulk.tensor.{dim}d.global.shared::cta.{mode}.bulk_group{hint}"
        kw["im2col"] = im2col
        return case(fam, "ptx.cp_async_bulk_tensor", ("global", "shared::cta", tmap, coords,
                                                      src), kw,
                    f"{q} {', '.join([ref, addr(src)] + i2c + polop)};", src=src, **facts)
    if which == "reduce":
        op, src = pick(draw, RED_OPS), pick(draw, TSHARED)
        q = f"cp.reduce.async.bulk.tensor.{dim}d.global.shared::cta.{op}.{mode}.bulk_group{hint}"
        return case(fam, "ptx.cp_reduce_async_bulk_tensor", (op, tmap, coords, src), kw,
                    f"{q} {', '.join([ref, addr(src)] + polop)};", op=op, src=src, **facts)
    q = f"cp.async.bulk.prefetch.tensor.{dim}d.L2.global.{mode}{hint}"
    kw["im2col"] = im2col
    return case(fam, "ptx.cp_async_bulk_prefetch_tensor", (tmap, coords), kw,
                f"{q} {', '.join([ref] + i2c + polop)};", **facts)
