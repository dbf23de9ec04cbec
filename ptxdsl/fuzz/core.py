"""Hypothesis strategies for the core instructions: arithmetic, setp/selp, mov/cvt/cvta,
ld/st, atom/red, barriers, and the warp-level instructions (shfl, vote, activemask, elect).

Types, destinations and modes are passed explicitly where the builder takes them, so the PTX
text of a call is determined by the draw (the builder's documented defaults are restated:
`mul.lo`/`mad.lo` for integers, `div.rn`/`mad.rn` for floats, the cvt rounding mode).
"""

from __future__ import annotations

from hypothesis import strategies as st

from ..operands import Imm
from ..types import ScalarType
from .case import A, N, R, S, addr, case, txt
from .tma import maybe, pick

INT = ("u16", "u32", "u64", "s16", "s32", "s64")
FLT = ("f32", "f64")
BIT = ("b16", "b32", "b64")
TYPES = INT + FLT + BIT + ("pred", "f16", "u8", "s8", "b8")
REGTYPES = INT + FLT + BIT + ("pred", "f16", "bf16", "b8", "u8", "f16x2")
WIDE = {"u16": "u32", "u32": "u64", "s16": "s32", "s32": "s64"}
BITS_OF = {"u16": "b16", "s16": "b16", "u32": "b32", "s32": "b32", "u64": "b64", "s64": "b64",
           "f32": "b32", "f64": "b64", "f16": "b16"}


def _bits(t: str) -> str:
    return t if t == "pred" or t.startswith("b") else BITS_OF.get(t, t)


def imm_text(v, t: str) -> str:
    """How ptxdsl spells an immediate of PTX type `t` (floats as exact 0f/0d hex)."""
    if isinstance(v, int | float) and not isinstance(v, bool) and t in FLT:
        return Imm(float(v), ScalarType(t)).render()
    return txt(v)


def operand(draw, t: str, *, imm: bool = True):
    """A source for an instruction of type `t`: mostly a matching register or an immediate,
    sometimes a register of another type or an out-of-range immediate."""
    choices: list[R | int | float] = [R(t), R(t)] if t in REGTYPES else []
    if imm and t != "pred":
        choices += [1, 0, -1, 70000, 2**32, 1.5] if t not in FLT else [1.0, 0.5, 2]
    choices += [R(pick(draw, REGTYPES))]
    return pick(draw, choices)


def dest(draw, t: str, idx: int = 0):
    """A destination register of type `t` (index `idx`), now and then of another register type, so
    the builders' type checks are exercised."""
    return pick(draw, (R(t, idx=idx), R(t, idx=idx), R(t, idx=idx), R(pick(draw, REGTYPES))))


# -- arithmetic ------------------------------------------------------------------------------
BINARY = ("add", "sub", "mul", "div", "rem", "min", "max", "and", "or", "xor", "shl", "shr")
MODE_KW = {"add": ("mode", "ftz", "sat"), "sub": ("mode", "ftz", "sat"), "mul": ("mode", "ftz"),
           "div": ("mode",)}


@st.composite
def ariths(draw):
    """Cases of the arith family: binary and unary arithmetic and mad, over every type and mode,
    valid and invalid operands mixed, each with the PTX text it stands for, which ptxas judges
    (None for a Python-level mistake the builder must refuse)."""
    fam = "arith"
    kind = pick(draw, ("binary", "binary", "binary", "unary", "mad"))
    t = pick(draw, TYPES)
    if kind == "binary":
        op = pick(draw, BINARY)
        allowed = MODE_KW.get(op, ())
        mode = maybe(draw, ("lo", "hi", "wide", "rn", "rz", "approx", "full"), 0.5) \
            if "mode" in allowed else None
        ftz = "ftz" in allowed and draw(st.integers(0, 4)) == 0
        sat = "sat" in allowed and draw(st.integers(0, 4)) == 0
        qt = _bits(t) if op in ("and", "or", "xor", "shl") else t
        mode_t: str | None
        if mode is None and op in ("mul",) and t in INT:
            mode_t = "lo"
        elif mode is None and op == "div" and t in FLT:
            mode_t = "rn"
        else:
            mode_t = mode
        dt = WIDE.get(qt, qt) if mode == "wide" else qt
        d, a = dest(draw, dt), operand(draw, qt)
        b = operand(draw, "u32" if op in ("shl", "shr") else qt)
        kw = {"type": ScalarType(t), "dst": d} | ({"mode": mode} if "mode" in allowed else {})
        kw |= ({"ftz": ftz} if "ftz" in allowed else {}) | ({"sat": sat} if "sat" in allowed
                                                           else {})
        method = {"and": "and_", "or": "or_", "not": "not_"}.get(op, op)
        q = op + (f".{mode_t}" if mode_t else "") + (".ftz" if ftz else "") + (
            ".sat" if sat else "")
        bt = "u32" if op in ("shl", "shr") else qt
        text = f"{q}.{qt} {txt(d)}, {imm_text(a, qt)}, {imm_text(b, bt)};"
        return case(fam, f"k.{method}", (a, b), kw, text, op=op, type=t, mode=mode, ftz=ftz,
                    sat=sat, d=d, a=a, b=b)
    if kind == "unary":
        op = pick(draw, ("abs", "neg", "not"))
        qt = _bits(t) if op == "not" else t
        ftz = op != "not" and draw(st.integers(0, 4)) == 0
        d, a = dest(draw, qt), operand(draw, qt)
        kw = {"type": ScalarType(t), "dst": d} | ({"ftz": ftz} if op != "not" else {})
        return case(fam, f"k.{op}_" if op == "not" else f"k.{op}", (a,), kw,
                    f"{op}{'.ftz' if ftz else ''}.{qt} {txt(d)}, {imm_text(a, qt)};", op=op,
                    type=t, ftz=ftz, d=d, a=a)
    mode = maybe(draw, ("lo", "hi", "wide", "rn", "rz", "rm"), 0.5)
    ftz = draw(st.integers(0, 4)) == 0
    mode_t = mode or ("lo" if t in INT else "rn" if t in FLT else None)
    dt = WIDE.get(t, t) if mode == "wide" else t
    d, a, b, c = dest(draw, dt), operand(draw, t), operand(draw, t), operand(draw, dt)
    text = (f"mad{'.' + mode_t if mode_t else ''}{'.ftz' if ftz else ''}.{t} {txt(d)}, "
            f"{imm_text(a, t)}, {imm_text(b, t)}, {imm_text(c, dt)};")
    return case(fam, "k.mad", (a, b, c), {"type": ScalarType(t), "dst": d, "mode": mode,
                                          "ftz": ftz}, text, op="mad", type=t, mode=mode,
                ftz=ftz, d=d)


CMPS = ("eq", "ne", "lt", "le", "gt", "ge", "lo", "ls", "hi", "hs", "equ", "neu", "ltu", "leu",
        "gtu", "geu", "num", "nan")


@st.composite
def compares(draw):
    """Cases of the compare family: setp and selp, valid and invalid operands mixed, each with the
    PTX text it stands for, which ptxas judges (None for a Python-level mistake the builder must
    refuse)."""
    fam = "compare"
    t = pick(draw, TYPES)
    if draw(st.integers(0, 3)) == 0:
        d, a, b = dest(draw, t), operand(draw, t), operand(draw, t)
        c = pick(draw, (R("pred"), R("pred"), N(R("pred")), R("u32")))
        return case(fam, "k.selp", (a, b, c), {"type": ScalarType(t), "dst": d},
                    f"selp.{t} {txt(d)}, {imm_text(a, t)}, {imm_text(b, t)}, {txt(c)};",
                    op="selp", type=t, d=d, a=a, b=b, c=c)
    cmp = pick(draw, CMPS)
    bool_op = maybe(draw, ("and", "or", "xor", "nand"), 0.7)
    c = maybe(draw, (R("pred", idx=1), N(R("pred", idx=1)), R("u32")), 0.7)
    ftz = draw(st.integers(0, 5)) == 0
    p = pick(draw, (R("pred"), R("pred"), R("u32")))
    a, b = operand(draw, t), operand(draw, t)
    q = f"setp.{cmp}" + (f".{bool_op}" if bool_op else "") + (".ftz" if ftz else "")
    text = f"{q}.{t} {txt(p)}, {imm_text(a, t)}, {imm_text(b, t)}" + (
        f", {txt(c)}" if c is not None else "") + ";"
    return case(fam, "k.setp", (cmp, a, b), {"type": ScalarType(t), "bool_op": bool_op,
                                             "c": c, "ftz": ftz, "dst": p}, text, op="setp",
                cmp=cmp, type=t, bool_op=bool_op, c=c, ftz=ftz, p=p, a=a, b=b)


# -- data movement -----------------------------------------------------------------------------
RNDS = ("rn", "rz", "rm", "rp", "rna", "rni", "rzi", "rmi", "rpi")
CVT_TYPES = INT + FLT + ("u8", "s8", "f16", "bf16", "b32")
CVTA_SPACES = ("global", "shared", "shared::cta", "shared::cluster", "const", "local", "param",
               "generic")


def cvt_default(dt: str, at: str) -> str | None:
    """The rounding mode ptxdsl picks when none is given (C semantics)."""
    d_f, a_f = dt in FLT + ("f16", "bf16"), at in FLT + ("f16", "bf16")
    bits = {"f16": 16, "bf16": 16, "f32": 32, "f64": 64}
    if a_f and not d_f:
        return "rzi"
    if d_f and (not a_f or bits[dt] < bits[at]):
        return "rn"
    return None


@st.composite
def moves(draw):
    """Cases of the move family: mov, cvt and cvta, valid and invalid operands mixed, each with the
    PTX text it stands for, which ptxas judges (None for a Python-level mistake the builder must
    refuse)."""
    fam = "move"
    kind = pick(draw, ("mov", "cvt", "cvt", "cvta"))
    if kind == "mov":
        t = pick(draw, TYPES)
        d = dest(draw, t)
        a = pick(draw, (R(t), 1, -1, 2**40, 1.5, S("smem"), S("bar"), R(pick(draw, REGTYPES)))
                 if t != "pred" else (R("pred"), R("u32"), 1))
        return case(fam, "k.mov", (a,), {"type": ScalarType(t), "dst": d},
                    f"mov.{t} {txt(d)}, {imm_text(a, t)};", op="mov", type=t, d=d, a=a)
    if kind == "cvt":
        dt, at = pick(draw, CVT_TYPES), pick(draw, CVT_TYPES)
        rnd = maybe(draw, RNDS, 0.6)
        ftz, sat = draw(st.integers(0, 4)) == 0, draw(st.integers(0, 4)) == 0
        d, a = dest(draw, dt), pick(draw, (R(at), R(at), 1, R(pick(draw, REGTYPES))))
        r = rnd or cvt_default(dt, at)
        q = "cvt" + (f".{r}" if r else "") + (".ftz" if ftz else "") + (".sat" if sat else "")
        return case(fam, "k.cvt", (a, ScalarType(dt)), {"atype": ScalarType(at), "rnd": rnd,
                                                        "ftz": ftz, "sat": sat, "dst": d},
                    f"{q}.{dt}.{at} {txt(d)}, {imm_text(a, at)};", op="cvt", dtype=dt,
                    atype=at, rnd=rnd, ftz=ftz, sat=sat, d=d, a=a)
    a = pick(draw, (R("u64"), R("u64"), R("u32"), R("b64"), R("s64"), R("f64"), S("smem")))
    sp, to = pick(draw, CVTA_SPACES), draw(st.booleans())
    size = "u32" if isinstance(a, R) and a.bits == 32 else "u64"
    d = maybe(draw, (R(size), R("u32"), R("b64")), 0.5)
    return case(fam, "k.cvta", (a, sp), {"to": to, "dst": d},
                f"cvta{'.to' if to else ''}.{sp}.{size} {txt(d or R(size))}, {txt(a)};",
                op="cvta", space=sp, to=to, a=a, d=d)


L1 = ("evict_normal", "evict_unchanged", "evict_first", "evict_last", "no_allocate")
MEM_SPACES = ("global", "shared", "shared::cta", "shared::cluster", "local", "const", "param",
              "generic")
ADDRS = (R("u64"), R("u64"), R("u32"), S("smem"), A(R("u64"), 16), A(S("smem"), 4),
         R("u64", "global"), S("ptr"))


@st.composite
def memories(draw):
    """Cases of the memory family: ld and st in every space, semantics, vector width and cache
    qualifier, valid and invalid operands mixed, each with the PTX text it stands for, which
    ptxas judges (None for a Python-level mistake the builder must refuse)."""
    fam = "memory"
    load = draw(st.booleans())
    t = pick(draw, TYPES + ("b128", "f16x2"))
    sp = pick(draw, MEM_SPACES)
    a = pick(draw, ADDRS)
    vec = pick(draw, (1, 1, 1, 2, 4, 3))
    sems = ("weak", "volatile", "relaxed", "acquire", "release", "acq_rel")
    sem = maybe(draw, sems, 0.7)
    scope = maybe(draw, ("cta", "cluster", "gpu", "sys"), 0.5 if sem else 0.9)
    q = (f".{sem}" if sem else "") + (f".{scope}" if scope else "") + (
        f".{sp}" if sp != "generic" else "")
    regs = tuple(dest(draw, t, i) for i in range(vec))
    val = regs[0] if vec == 1 else regs
    vq = f".v{vec}" if vec > 1 else ""
    vtext = txt(regs[0]) if vec == 1 else "{" + ", ".join(txt(r) for r in regs) + "}"
    # The cache qualifiers (cuda::ptx ld.h / st.h): L1 eviction priority, L2 cache hint (a
    # createpolicy register, sometimes of the wrong type), L2 prefetch size (loads only).
    l1 = maybe(draw, L1, 0.7)
    policy = maybe(draw, (R("b64"), R("b64"), R("u64"), R("b32")), 0.8)
    prefetch = maybe(draw, ("64B", "128B", "256B"), 0.8) if load else None
    cq = (f".L1::{l1}" if l1 else "") + (".L2::cache_hint" if policy else "") + (
        f".L2::{prefetch}" if prefetch else "")
    ptext = f", {txt(policy)}" if policy else ""
    cache = {"l1": l1, "cache_policy": policy}
    if load:
        nc = sp == "global" and draw(st.integers(0, 3)) == 0
        q += ".nc" if nc else ""
        return case(fam, "k.ld", (a,), {"type": ScalarType(t), "space": sp, "vec": vec,
                                        "dst": val, "sem": sem, "scope": scope, "nc": nc,
                                        "prefetch": prefetch, **cache},
                    f"ld{q}{cq}{vq}.{t} {vtext}, {addr(a)}{ptext};", op="ld", type=t, space=sp,
                    vec=vec, sem=sem, scope=scope, nc=nc, addr=a, regs=regs, l1=l1,
                    policy=policy, prefetch=prefetch)
    if vec == 1 and draw(st.booleans()):
        val = operand(draw, t)
        vtext = imm_text(val, t)
    return case(fam, "k.st", (a, val), {"type": ScalarType(t), "space": sp, "sem": sem,
                                        "scope": scope, **cache},
                f"st{q}{cq}{vq}.{t} {addr(a)}, {vtext}{ptext};", op="st", type=t, space=sp,
                vec=vec, sem=sem, scope=scope, addr=a, value=val, l1=l1, policy=policy)


# -- atomics -----------------------------------------------------------------------------------
ATOM_OPS = ("add", "inc", "dec", "min", "max", "and", "or", "xor", "exch", "cas")
ATOM_TYPES = ("u32", "s32", "u64", "s64", "f32", "f64", "f16", "f16x2", "bf16", "bf16x2", "b16",
              "b32", "b64", "b128", "u16")
ATOM_SPACES = ("global", "shared", "shared::cta", "shared::cluster", "generic", "local")


@st.composite
def atomics(draw):
    """Cases of the atomic family: atom and red, valid and invalid operands mixed, each with the
    PTX text it stands for, which ptxas judges (None for a Python-level mistake the builder must
    refuse)."""
    fam = "atomic"
    op, t, sp = pick(draw, ATOM_OPS), pick(draw, ATOM_TYPES), pick(draw, ATOM_SPACES)
    if op == "cas" and draw(st.booleans()):
        # half of the cas draws take a type cas has (.b16/.b32/.b64/.b128): at 4 of the 15
        # types the accepted ones were too few for the read-back tests under some hypothesis
        # versions' fixed draws
        t = pick(draw, ("b16", "b32", "b64", "b128"))
    red = op != "cas" and op != "exch" and draw(st.integers(0, 2)) == 0
    sem = maybe(draw, ("relaxed", "acquire", "release", "acq_rel", "sc", "weak"), 0.6)
    scope = maybe(draw, ("cta", "cluster", "gpu", "sys"), 0.6)
    a = pick(draw, ADDRS)
    q = (f".{sem}" if sem else "") + (f".{scope}" if scope else "") + (
        f".{sp}" if sp != "generic" else "")
    noftz = ".noftz" if t in ("f16", "f16x2", "bf16", "bf16x2") else ""
    b = operand(draw, t, imm=t != "b128")
    kw = {"type": ScalarType(t), "space": sp, "sem": sem, "scope": scope}
    facts = dict(op=op, type=t, space=sp, sem=sem, scope=scope, addr=a, b=b)
    if red and draw(st.integers(0, 3)) == 0:      # the vector form: ptxas judges the width
        # Mostly the op/type pairs it has (the scalar draw's would nearly all be refused).
        op = pick(draw, ("add", "add", "min", "max", "and"))
        t = pick(draw, ("f32", "f32", "f16", "bf16", "f16x2", "bf16x2", "u32"))
        n = pick(draw, (2, 4, 4, 8, 3))
        noftz = ".noftz" if t in ("f16", "f16x2", "bf16", "bf16x2") else ""
        lanes = tuple(operand(draw, t) for _ in range(n))
        text = ", ".join(imm_text(v, t) for v in lanes)
        kw["type"] = ScalarType(t)
        return case(fam, "k.red", (op, a, lanes), kw,
                    f"red{q}.{op}{noftz}.v{n}.{t} {addr(a)}, {{{text}}};", red=True,
                    **{**facts, "op": op, "type": t, "b": lanes})
    if red:
        return case(fam, "k.red", (op, a, b), kw,
                    f"red{q}.{op}{noftz}.{t} {addr(a)}, {imm_text(b, t)};", red=True, **facts)
    d = dest(draw, t)
    kw["dst"] = d
    if op == "cas":
        c = operand(draw, t, imm=t != "b128")
        return case(fam, "k.atom_cas", (a, b, c), kw,
                    f"atom{q}.cas.{t} {txt(d)}, {addr(a)}, {imm_text(b, t)}, {imm_text(c, t)};",
                    red=False, c=c, d=d, **facts)
    return case(fam, "k.atom", (op, a, b), kw,
                f"atom{q}.{op}{noftz}.{t} {txt(d)}, {addr(a)}, {imm_text(b, t)};", red=False,
                d=d, **facts)


# -- barriers and warps ----------------------------------------------------------------------------
IDS = (0, 1, 15, 16, -1, R("u32"), R("u16"))
COUNTS = (None, 32, 64, 1024, 33, 0, 2048, R("u32"))
MASKS = (-1, 0xFFFFFFFF, 1, 0, 0x1_0000_0000, R("u32"), R("b32"), R("u64"))


@st.composite
def syncs(draw):
    """Cases of the sync family: bar/barrier sync, arrive and red, and bar.warp.sync, valid and
    invalid operands mixed, each with the PTX text it stands for, which ptxas judges (None for a
    Python-level mistake the builder must refuse)."""
    fam = "sync"
    kind = pick(draw, ("sync", "arrive", "red", "warp"))
    if kind == "warp":
        m = pick(draw, MASKS)
        return case(fam, "k.syncwarp", (m,), text=f"bar.warp.sync {txt(m)};", op="syncwarp",
                    mask=m)
    short = draw(st.booleans())
    aligned = True if short else draw(st.booleans())
    i, n = pick(draw, IDS), pick(draw, COUNTS)
    name = ("bar" if short else "barrier") + ("" if short or not aligned else "")
    al = ".aligned" if aligned and not short else ""
    tail = f"{txt(i)}" + (f", {txt(n)}" if n is not None else "")
    kw = {} if short else {"aligned": aligned}
    if kind in ("sync", "arrive"):
        return case(fam, f"k.{name}_{kind}", (i, n), kw, f"{name}.{kind}{al} {tail};",
                    op=kind, short=short, aligned=aligned, id=i, count=n)
    op = pick(draw, ("popc", "and", "or", "xor"))
    p = pick(draw, (R("pred"), N(R("pred")), R("u32")))
    rt = "u32" if op == "popc" else "pred"
    d = pick(draw, (R(rt, idx=2), R(rt, idx=2), R("pred" if op == "popc" else "u32", idx=2)))
    return case(fam, f"k.{name}_red", (op, p, i, n), kw | {"dst": d},
                f"{name}.red.{op}{al}.{rt} {txt(d)}, {tail}, {txt(p)};", op="red", red=op,
                short=short, aligned=aligned, id=i, count=n, pred=p, d=d)


@st.composite
def warps(draw):
    """Cases of the warp family: shfl, vote, activemask and elect, valid and invalid operands
    mixed, each with the PTX text it stands for, which ptxas judges (None for a Python-level
    mistake the builder must refuse)."""
    fam = "warp"
    kind = pick(draw, ("shfl", "shfl", "vote", "activemask", "elect"))
    m = pick(draw, MASKS[:2] * 3 + MASKS)
    if kind == "shfl":
        mode = pick(draw, ("up", "down", "bfly", "idx", "xor"))
        a = pick(draw, (R("b32"), R("u32"), R("f32"), 7, R("u64")))
        b = pick(draw, (1, 0, 31, 32, R("u32"), R("u16")))
        c = maybe(draw, (0, 31, 0x1F1F, 0x2000, R("u32")), 0.5)
        want_p = draw(st.booleans())
        d = pick(draw, (R("b32"), R("b32"), R("f32"), R("u64")))
        ct = c if c is not None else (0 if mode == "up" else 31)
        dtext = txt(d) + ("|" + R("pred").txt if want_p else "")
        return case(fam, "k.shfl_sync", (mode, a, b, c), {"mask": m, "pred": want_p,
                                                          "dst": d},
                    f"shfl.sync.{mode}.b32 {dtext}, {txt(a)}, {txt(b)}, {txt(ct)}, {txt(m)};",
                    op="shfl", mode=mode, a=a, b=b, c=c, mask=m, d=d)
    if kind == "vote":
        mode = pick(draw, ("all", "any", "uni", "ballot", "eq"))
        p = pick(draw, (R("pred"), N(R("pred")), R("u32")))
        rt = "b32" if mode == "ballot" else "pred"
        d = pick(draw, (R(rt, idx=2), R(rt, idx=2), R("u32" if rt == "pred" else "pred",
                                                      idx=2)))
        return case(fam, "k.vote_sync", (mode, p), {"mask": m, "dst": d},
                    f"vote.sync.{mode}.{rt} {txt(d)}, {txt(p)}, {txt(m)};", op="vote",
                    mode=mode, pred=p, mask=m, d=d)
    if kind == "activemask":
        d = pick(draw, (R("b32"), R("u32"), R("f32"), R("u64")))
        return case(fam, "k.activemask", (), {"dst": d}, f"activemask.b32 {txt(d)};",
                    op="activemask", d=d)
    leader = draw(st.booleans())
    d = R("b32").txt if leader else "_"
    return case(fam, "k.elect_sync", (m,), {"leader": leader},
                f"elect.sync {d}|{R('pred').txt}, {txt(m)};", op="elect", mask=m)


STRATEGIES = {"arith": ariths(), "compare": compares(), "move": moves(), "memory": memories(),
              "atomic": atomics(), "sync": syncs(), "warp": warps()}
