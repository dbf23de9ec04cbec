"""Hypothesis strategies for the sm_100 families without tensor memory: cluster launch control
(clusterlaunchcontrol.try_cancel with and without multicast, query_cancel) and st.bulk.

Each draw calls the `ptxdsl.ptx` builder with cuda::ptx's arguments, sometimes wrong ones, and
writes the PTX the builder would emit. st.bulk's builder moves a shared symbol's address into a
register (ptxas takes no symbol there), so its text names an environment register instead.
"""

from __future__ import annotations

from hypothesis import strategies as st

from .case import A, R, S, addr, case, txt
from .tma import pick

ADDRS = (S("smem"), S("smap"), S("bar"), S("smem4"), A(S("smem"), 16), A(S("smem"), 8),
         R("u32"), R("u32", "shared::cta"), R("u64", "shared::cta"), R("u64"),
         R("u64", "global"), R("u64", "shared::cluster"), R("f32"))
BARS = (S("bar"), S("smem4"), A(S("smem"), 8), A(S("smem"), 4), R("u32"), R("u64", "global"))
RESPONSES = (R("b128"), R("b128"), R("b128"), R("b64"), R("u32"), 5)
_TRY = "clusterlaunchcontrol.try_cancel.async.shared::cta.mbarrier::complete_tx::bytes"
_QUERIES = {"is_canceled": ("is_canceled.pred", R("pred", idx=3)),
            "get_first_ctaid_x": ("get_first_ctaid::x.b32", R("b32", idx=3)),
            "get_first_ctaid_y": ("get_first_ctaid::y.b32", R("b32", idx=3)),
            "get_first_ctaid_z": ("get_first_ctaid::z.b32", R("b32", idx=3)),
            "get_first_ctaid": ("get_first_ctaid.v4.b32",
                                "{" + ", ".join(R("b32", idx=i).txt for i in (3, 4, 5, 6))
                                + "}")}


@st.composite
def clcs(draw):
    """Cases of the clusterlaunchcontrol family: try_cancel (and its multicast form) with
    response buffers and mbarriers of every kind, and the query_cancel builders with
    responses of other types (the query's fresh results stand for themselves)."""
    fam = "clusterlaunchcontrol"
    which = pick(draw, ("try", "multicast", "query", "query"))
    if which != "query":
        a, bar = pick(draw, ADDRS), pick(draw, BARS)
        mc = ".multicast::cluster::all" if which == "multicast" else ""
        fn = "ptx.clusterlaunchcontrol_try_cancel" + ("_multicast" if mc else "")
        return case(fam, fn, (a, bar), text=f"{_TRY}{mc}.b128 {addr(a)}, {addr(bar)};",
                    op=which, addr=a, bar=bar)
    q = pick(draw, tuple(_QUERIES))
    resp = pick(draw, RESPONSES)
    quals, dst = _QUERIES[q]
    return case(fam, f"ptx.clusterlaunchcontrol_query_cancel_{q}", (resp,),
                text=f"clusterlaunchcontrol.query_cancel.{quals}.b128 {txt(dst)}, {txt(resp)};",
                op=q, response=resp)


SIZES = (8, 64, 128, 1024, 0, 12, 4, 1 << 24, (1 << 24) + 8, R("u64"), R("b64"), R("u32"),
         R("s64"), R("u16"), R("f64"))


@st.composite
def st_bulks(draw):
    """Cases of st.bulk: addresses of every kind, sizes (immediates in and out of range or not
    multiples of 8, registers of every width) and initval values."""
    a = pick(draw, ADDRS)
    size = pick(draw, SIZES)
    init = pick(draw, (0, 0, 0, 1, R("u32")))
    shown = a
    if isinstance(a, S):          # the builder moves the symbol's address into a register
        shown = R("u32")
    elif isinstance(a, A) and isinstance(a.base, S):
        shown = A(R("u32"), a.offset)
    return case("st_bulk", "ptx.st_bulk", (a, size, init),
                text=f"st.bulk.weak.shared::cta {addr(shown)}, {txt(size)}, {txt(init)};",
                addr=a, size=size, initval=init)


STRATEGIES = {"clusterlaunchcontrol": clcs(), "st_bulk": st_bulks()}
