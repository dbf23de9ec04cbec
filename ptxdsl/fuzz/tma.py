"""Hypothesis strategies for the TMA families: fence/membar/prefetch.tensormap,
tensormap.replace and cp_fenceproxy, and the mbarrier instructions.

Each strategy draws qualifiers and operands (valid ones and near misses), calls the public
`ptxdsl.ptx` builder and renders the PTX text the call stands for (see `case.Case`).
"""

from __future__ import annotations

from typing import Any, overload

from hypothesis import strategies as st

from .case import PARAMS, A, R, S, addr, case, txt

SCOPES = ("cta", "cluster", "gpu", "sys")
SEMS = ("sc", "acq_rel", "acquire", "release", "relaxed", "weak")


def pick(draw, values):
    """Draw one of `values`."""
    return draw(st.sampled_from(tuple(values)))


def maybe(draw, values, p_none: float = 0.3):
    """None about `p_none` of the time, else one of `values`."""
    return None if draw(st.integers(0, 99)) < p_none * 100 else pick(draw, values)


def dot(space: str | None) -> str:
    """A state space as a qualifier ('' for generic)."""
    return "" if space in (None, "", "generic") else "." + space


def inferred(tok, allowed: tuple[str, ...]) -> tuple[str, bool]:
    """The space the builders infer for an address token (`_tma_addr.infer_space`, restated)
    and whether it is allowed."""
    base = tok.base if isinstance(tok, A) else tok
    sp = "generic"
    if isinstance(base, S):
        sp = "param" if base.name in PARAMS else "shared"
    elif isinstance(base, R):
        if base.bits == 32:
            sp = base.hint if base.hint and base.hint.startswith("shared") else "shared"
        elif base.hint is not None:
            sp = base.hint
    if sp == "shared" and "shared::cta" in allowed:
        sp = "shared::cta"
    return sp, sp in allowed


# A state-space name means one thing in every cuda::ptx family (`_ptx_args.SPACE_NAMES`).
NAMED = {"shared": "shared::cta", "space_shared": "shared::cta", "cluster": "shared::cluster",
         "space_cluster": "shared::cluster", "space_global": "global", "": "generic"}


@overload
def named(space: str) -> str: ...
@overload
def named(space: None) -> None: ...
def named(space: str | None) -> str | None:
    """The PTX spelling of a space name ('shared' is shared::cta, 'cluster' shared::cluster)."""
    return None if space is None else NAMED.get(space, space)


def space_of(tok, explicit, allowed, default: str | None = None) -> tuple[str, bool]:
    """(spelling, builder accepts it) of an explicit space, else `default` (the space the
    cuda::ptx overload emits) or, without one, the inferred space."""
    if explicit is None:
        return (default, True) if default is not None else inferred(tok, allowed)
    sp = named(explicit)
    return sp, sp in allowed


# -- fences ----------------------------------------------------------------------------------
ADDR64 = (R("u64"), R("u64", "global"), R("u64", "shared::cta"), R("u32"), S("ptr"),
          R("b64"), R("f64"))


@st.composite
def fences(draw):
    """Cases of the fence family: membar, fences, proxy fences and the tensor-map prefetch, valid
    and invalid operands mixed, each with the PTX text it stands for, which ptxas judges (None
    for a Python-level mistake the builder must refuse)."""
    which = pick(draw, ("membar", "fence", "alias", "async", "tmap", "mbar_init",
                        "restrict", "restrict_async", "prefetch"))
    fam = "fence"
    if which == "membar":
        level = pick(draw, ("cta", "gl", "sys", "gpu", "cluster"))
        return case(fam, "ptx.membar", (level,), text=f"membar.{level};", level=level)
    if which == "fence":
        sem, scope = pick(draw, SEMS), pick(draw, SCOPES)
        return case(fam, "ptx.fence", (sem, scope), text=f"fence.{sem}.{scope};",
                    sem=sem, scope=scope)
    if which == "alias":
        return case(fam, "ptx.fence_proxy_alias", text="fence.proxy.alias;")
    if which == "async":
        sp = maybe(draw, ("global", "shared::cta", "shared::cluster", "shared", "cluster",
                          "space_shared", "generic", "local", "const", "param"))
        return case(fam, "ptx.fence_proxy_async", (sp,),
                    text=f"fence.proxy.async{dot(named(sp))};", space=sp)
    if which == "tmap":
        sem = pick(draw, ("release", "acquire", "acq_rel", "relaxed", "sc"))
        scope = pick(draw, SCOPES)
        a = maybe(draw, ADDR64 + (S("tmap"), S("smap")), 0.25)
        size = pick(draw, (128, 128, 64, 256, R("u32")))
        head = f"fence.proxy.tensormap::generic.{sem}.{scope}"
        text: str | None = f"{head};" if a is None else f"{head} {addr(_ptr(a))}, {txt(size)};"
        if sem == "release" and a is None and size != 128:
            text = None  # a size with nothing to apply it to: no PTX spelling
        return case(fam, "ptx.fence_proxy_tensormap_generic", (sem, scope, a, size),
                    text=text, sem=sem, scope=scope, addr=a, size=size)
    if which == "mbar_init":
        sem, scope = pick(draw, ("release", "acquire", "acq_rel", "relaxed")), \
            pick(draw, SCOPES)
        return case(fam, "ptx.fence_mbarrier_init", (sem, scope),
                    text=f"fence.mbarrier_init.{sem}.{scope};", sem=sem, scope=scope)
    if which in ("restrict", "restrict_async"):
        sem = pick(draw, ("acquire", "release", "acq_rel", "relaxed"))
        sp = maybe(draw, ("shared::cta", "shared::cluster", "shared", "cluster", "global"))
        scope = pick(draw, ("cluster", "cluster", "cta", "gpu"))
        proxy = ".proxy.async::generic" if which == "restrict_async" else ""
        spaces = [named(sp)] if sp is not None else {"acquire": ["shared::cluster"],
                                               "release": ["shared::cta"]}.get(
            sem, ["shared::cta", "shared::cluster"])
        fn = ("ptx.fence_sync_restrict" if not proxy
              else "ptx.fence_proxy_async_generic_sync_restrict")
        return case(fam, fn, (sem, sp, scope),
                    text=[f"fence{proxy}.{sem}.sync_restrict::{s}.{scope};" for s in spaces],
                    sem=sem, space=sp, scope=scope)
    a = pick(draw, (S("tmap"), S("tmap"), R("u64"), R("u64", "param"), R("u64", "global"),
                    R("u32"), S("smap"), S("ptr")))
    sp = maybe(draw, ("param", "const", "generic", "global", "shared::cta"), 0.6)
    spelled, _ = space_of(a, sp, ("generic", "param", "const"))
    return case(fam, "ptx.prefetch_tensormap", (a, sp),
                text=f"prefetch{dot(spelled)}.tensormap {addr(_ptr(a))};", addr=a, space=sp,
                spelled=spelled)


def _ptr(tok):
    """A pointer parameter is loaded into a .u64 register by the builders."""
    return R("u64") if tok == S("ptr") else tok


# -- tensormap.replace / cp_fenceproxy --------------------------------------------------------
FIELD_TYPES = {"global_address": "b64", "rank": "b32", "box_dim": "b32", "global_dim": "b32",
               "global_stride": "b64", "element_stride": "b32", "elemtype": "b32",
               "interleave_layout": "b32", "swizzle_mode": "b32", "swizzle_atomicity": "b32",
               "fill_mode": "b32"}
HAS_ORD = ("box_dim", "global_dim", "global_stride", "element_stride")
NAMES = {
    "elemtype": ("u8", "u16", "u32", "s32", "u64", "s64", "f16", "f32", "f32.ftz", "f64",
                 "bf16", "tf32", "tf32.ftz", "b4x16", "b4x16_p64", "b6x16_p32"),
    "interleave_layout": ("none", "16B", "32B"),
    "swizzle_mode": ("none", "32B", "64B", "128B", "96B"),
    "swizzle_atomicity": ("16B", "32B", "32B_flip_8B", "64B"),
    "fill_mode": ("zero", "nan"),
}
VALUES = {
    "global_address": (0, 16, 4096, 8, 2**64 - 16, R("u64"), R("b64"), R("u32"), R("f64")),
    "box_dim": (0, 1, 64, 256, 257, R("u32"), R("b32"), R("u64"), R("f32")),
    "global_dim": (0, 1, 1000, 2**32 - 1, 2**32, R("u32"), R("s32"), R("u64")),
    "global_stride": (0, 16, 48, 8, 2**40 - 16, 2**40, R("u64"), R("b64"), R("u32")),
    "element_stride": (0, 1, 2, 8, 9, R("u32"), R("u16")),
    "rank": (0, 1, 4, 5, R("u32"), R("b32"), R("u64")),
}
MAP_ADDRS = (S("smap"), S("smap"), R("u32"), R("u64"), R("u64", "global"),
             R("u64", "shared::cta"), A(S("smap"), 64), R("b64"), R("f32"), S("tmap"))


@st.composite
def tensormaps(draw):
    """Cases of the tensormap family: tensormap.replace of every field, and cp_fenceproxy, valid
    and invalid operands mixed, each with the PTX text it stands for, which ptxas judges (None
    for a Python-level mistake the builder must refuse)."""
    fam = "tensormap"
    if draw(st.integers(0, 5)) == 0:
        return draw(cp_fenceproxies())
    field = pick(draw, FIELD_TYPES)
    a = pick(draw, MAP_ADDRS)
    sp = pick(draw, ("global", "shared::cta", "generic", "shared", "space_shared",
                     "shared::cluster", "cluster"))
    spelled, _ = space_of(a, sp, ("generic", "global", "shared::cta"))
    args, kwargs = [sp, a], {}
    if field in HAS_ORD:
        o = pick(draw, (0, 1, 2, 3, 4, 5, -1, R("u32")))
        args.append(o)
    if field in NAMES:
        val = pick(draw, NAMES[field] + tuple(range(0, 18)) + (R("u32"), -1))
        code = NAMES[field].index(val) if isinstance(val, str) else val
        args.append(val)
        fn = f"ptx.tensormap_replace_{field}"
    elif field == "rank" and draw(st.booleans()):
        rank = pick(draw, (0, 1, 2, 5, 6, R("u32")))
        kwargs["rank"] = rank
        code = rank - 1 if isinstance(rank, int) else rank
        fn = "ptx.tensormap_replace_rank"
    else:
        val = pick(draw, VALUES[field])
        key = "new_val" if field == "rank" else None
        if key:
            kwargs[key] = val
        else:
            args.append(val)
        code = val
        fn = f"ptx.tensormap_replace_{field}"
    ops = [addr(_ptr(a))] + ([txt(args[2])] if field in HAS_ORD else []) + [txt(code)]
    text = (f"tensormap.replace.tile.{field}{dot(spelled)}.b1024.{FIELD_TYPES[field]} "
            + ", ".join(ops) + ";")
    return case(fam, fn, args, kwargs, text, field=field, addr=a, space=sp, spelled=spelled,
                value=code)


@st.composite
def cp_fenceproxies(draw):
    """Cases of the tensormap family: tensormap.cp_fenceproxy, valid and invalid operands mixed,
    each with the PTX text it stands for, which ptxas judges (None for a Python-level mistake
    the builder must refuse)."""
    dst = pick(draw, (R("u64"), R("u64", "global"), R("u64", "shared::cta"), S("ptr"),
                      R("u32"), S("smap"), A(R("u64", "global"), 128)))
    src = pick(draw, (S("smap"), S("smap"), R("u32"), R("u64"), R("u64", "global"),
                      A(S("smap"), 0)))
    sem = pick(draw, ("release", "release", "acquire", "relaxed", "acq_rel"))
    scope = pick(draw, SCOPES)
    size = pick(draw, (128, 128, 64, R("u32")))
    text = ("tensormap.cp_fenceproxy.global.shared::cta.tensormap::generic."
            f"{sem}.{scope}.sync.aligned {addr(_ptr(dst))}, {addr(src)}, {txt(size)};")
    return case("tensormap", "ptx.tensormap_cp_fenceproxy", (sem, scope, dst, src, size),
                text=text, dst=dst, src=src, sem=sem, scope=scope, size=size)


# -- mbarrier -----------------------------------------------------------------------------------
BARS = (S("bar"), S("bar"), R("u32"), R("u64"), R("u64", "shared::cta"),
        R("u64", "shared::cluster"), R("u64", "global"), A(S("bar"), 8), R("f32"), S("smem"))
MB_SPACES = ("shared::cta", "shared", "shared::cluster", "cluster", "generic", "global")
MB_ALLOWED = ("generic", "shared", "shared::cta", "shared::cluster")
LOCAL_ALLOWED = ("generic", "shared", "shared::cta")
COUNTS = (1, 2, 0, 2**20 - 1, 2**20, -1, R("u32"), R("b32"), R("u64"), R("u16"))


def _sem_scope(draw, sems, default_sem):
    sem = maybe(draw, sems, 0.4)
    scope = maybe(draw, ("cta", "cluster", "gpu"), 0.4)
    if sem is None and scope is None:
        return sem, scope, ""
    return sem, scope, f".{sem or default_sem}.{scope or 'cta'}"


@st.composite
def mbarriers(draw):
    """Cases of the mbarrier family: init, inval, arrive, expect_tx/complete_tx, waits and
    pending_count, valid and invalid operands mixed, each with the PTX text it stands for, which
    ptxas judges (None for a Python-level mistake the builder must refuse)."""
    fam = "mbarrier"
    which = pick(draw, ("init", "inval", "arrive", "arrive", "arrive", "tx", "wait", "wait",
                        "pending"))
    bar = pick(draw, BARS)
    sp = maybe(draw, MB_SPACES, 0.6)
    if which in ("init", "inval"):
        spelled, _ = space_of(bar, sp, LOCAL_ALLOWED, "shared" if which == "init"
                              else "shared::cta")
        if which == "inval":
            return case(fam, "ptx.mbarrier_inval", (bar,), {"space": sp},
                        f"mbarrier.inval{dot(spelled)}.b64 {addr(bar)};", bar=bar, space=sp)
        count = pick(draw, COUNTS)
        return case(fam, "ptx.mbarrier_init", (bar, count), {"space": sp},
                    f"mbarrier.init{dot(spelled)}.b64 {addr(bar)}, {txt(count)};", bar=bar,
                    space=sp, count=count)
    if which == "arrive":
        op = pick(draw, ("arrive", "arrive_drop"))
        kind = pick(draw, ("", "noComplete", "expect_tx"))
        sem, scope, q = _sem_scope(draw, ("release", "relaxed", "acquire", "acq_rel"), "release")
        count = maybe(draw, COUNTS, 0.4 if kind == "" else 0.1)
        dst = maybe(draw, ("_", R("b64"), R("u64"), R("u32")), 0.5)
        # cuda::ptx: arrive(addr) and noComplete emit bare .shared, the rest .shared::cta
        bare = kind != "expect_tx" and sem is None and scope is None and (
            count is None or kind == "noComplete")
        spelled, _ = space_of(bar, sp, MB_ALLOWED, "shared" if bare else "shared::cta")
        state = ("_" if spelled == "shared::cluster" else R("b64").txt) if dst is None \
            else txt(dst)
        suffix = "_no_complete" if kind == "noComplete" else ""
        base = f"ptx.mbarrier_{op}"
        if kind == "expect_tx":
            args: tuple[Any, ...]
            call, args, kw = base + "_expect_tx", (sem, scope, sp, bar, count), {"dst": dst}
        else:
            call, args = base + suffix, (bar,) if count is None else (bar, count)
            kw = {"sem": sem, "scope": scope, "space": sp, "dst": dst}
        text = (f"mbarrier.{op}{'.' + kind if kind else ''}{q}{dot(spelled)}.b64 {state}, "
                f"{addr(bar)}" + (f", {txt(count)}" if count is not None else "") + ";")
        return case(fam, call, args, kw, text, op=op, kind=kind, sem=sem, scope=scope,
                    space=sp, spelled=spelled, count=count, dst=dst, bar=bar)
    if which == "tx":
        op = pick(draw, ("expect_tx", "complete_tx"))
        sem, scope, q = _sem_scope(draw, ("relaxed", "release", "acquire"), "relaxed")
        spelled, _ = space_of(bar, sp, MB_ALLOWED, "shared::cta")
        tx = pick(draw, COUNTS)
        return case(fam, f"ptx.mbarrier_{op}", (sem, scope, sp, bar, tx),
                    text=f"mbarrier.{op}{q}{dot(spelled)}.b64 {addr(bar)}, {txt(tx)};",
                    op=op, sem=sem, scope=scope, space=sp, spelled=spelled, tx=tx, bar=bar)
    if which == "pending":
        state = pick(draw, (R("b64"), R("u64"), R("u32"), R("s64")))
        dst = maybe(draw, (R("u32"), R("b32"), R("u64")), 0.5)
        return case(fam, "ptx.mbarrier_pending_count", (state,), {"dst": dst},
                    f"mbarrier.pending_count.b64 {txt(dst or R('u32'))}, {txt(state)};",
                    state=state, dst=dst)
    op = pick(draw, ("test_wait", "try_wait"))
    parity = draw(st.booleans())
    sem, scope, q = _sem_scope(draw, ("acquire", "relaxed", "release"), "acquire")
    token = pick(draw, (0, 1, 2, R("u32"), R("b32"), R("u64")) if parity
                 else (R("b64"), R("u64"), R("u32"), 0))
    hint = maybe(draw, (1000, 0, R("u32"), R("u64")), 0.6) if op == "try_wait" else None
    dst = maybe(draw, (R("pred"), R("u32")), 0.6)
    bare = op == "test_wait" and sem is None and scope is None   # as cuda::ptx emits it
    spelled, _ = space_of(bar, sp, MB_ALLOWED, "shared" if bare else "shared::cta")
    fn = f"ptx.mbarrier_{op}" + ("_parity" if parity else "")
    args = (bar, token) + ((hint,) if op == "try_wait" else ())
    text = (f"mbarrier.{op}{'.parity' if parity else ''}{q}{dot(spelled)}.b64 "
            f"{txt(dst or R('pred'))}, {addr(bar)}, {txt(token)}"
            + (f", {txt(hint)}" if hint is not None else "") + ";")
    kw = {"sem": sem, "scope": scope, "space": sp, "dst": dst}
    return case(fam, fn, args, kw, text, op=op, parity=parity, sem=sem, scope=scope, space=sp,
                spelled=spelled, token=token, hint=hint, dst=dst, bar=bar)
