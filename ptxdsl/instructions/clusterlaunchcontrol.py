"""Cluster launch control: clusterlaunchcontrol.try_cancel and .query_cancel (PTX ISA
§9.7.13.x "clusterlaunchcontrol"; cuda::ptx clusterlaunchcontrol.h), sm_100 on.

A running CTA asks to cancel the launch of a cluster that has not started yet; the 16-byte
opaque response lands in shared memory, tracked by an mbarrier (complete_tx of 16 bytes). After
the mbarrier wait, load the response into a `.b128` register (`k.ld(resp, type=t.b128)`) and
decode it with the query builders: whether the cluster was cancelled, and the ctaid of its first
CTA. cuda::ptx passes the response as a 16-byte value (two 64-bit halves packed with
`mov.b128`); ptxdsl has `.b128` registers, so the query takes one directly::

    ptx::clusterlaunchcontrol_try_cancel(&resp, &bar);
    ptx.clusterlaunchcontrol_try_cancel(k, resp, bar)
    bool ok = ptx::clusterlaunchcontrol_query_cancel_is_canceled(r);
    ok = ptx.clusterlaunchcontrol_query_cancel_is_canceled(k, r)

`is_canceled` returns a `.pred` register (cuda::ptx turns it into a bool with selp); the
get_first_ctaid builders return `.b32` registers (the v4 form a tuple of four).
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from typing import Any

import attrs

from ..errors import OperandError
from ..operands import Reg, Vec
from ..types import Requires, ScalarType, StateSpace, req
from . import _ptx_args as A
from ._tma_addr import mbar_addr, symbol_fit, tma_addr
from .base import Instruction, _given, check_dst

__all__ = [
    "clusterlaunchcontrol_try_cancel", "clusterlaunchcontrol_try_cancel_multicast",
    "clusterlaunchcontrol_query_cancel_is_canceled",
    "clusterlaunchcontrol_query_cancel_get_first_ctaid_x",
    "clusterlaunchcontrol_query_cancel_get_first_ctaid_y",
    "clusterlaunchcontrol_query_cancel_get_first_ctaid_z",
    "clusterlaunchcontrol_query_cancel_get_first_ctaid",
]

T = ScalarType
CTA = StateSpace.shared_cta
CLC = req("8.6", 100)
# cuda::ptx gates the multicast form to SM_100a/SM_101a (sm_101 is sm_110 from CUDA 13 on).
# ptxas 13 takes it on every 'a' and 'f' target from sm_100 (sm_100a, sm_103a, sm_110a,
# sm_120a, sm_121a; the 'f' ones from PTX 8.8) and refuses it on plain sm_100 and sm_120.
CLC_MULTICAST = req("8.6", 100, arch=(100, 101, 103, 110, 120, 121), family=True)

_TRY = "clusterlaunchcontrol.try_cancel.async.shared::cta.mbarrier::complete_tx::bytes"
RESPONSE = "the try_cancel response (16 bytes, 16-byte aligned)"


@attrs.frozen
class ClusterLaunchControlTryCancel(Instruction):
    """`clusterlaunchcontrol.try_cancel.async.shared::cta.mbarrier::complete_tx::bytes
    {.multicast::cluster::all}.b128 [addr], [smem_bar];`: `addr` is the 16-byte, 16-aligned
    response in .shared::cta, `smem_bar` the mbarrier its 16 bytes complete on. Multicast
    writes the response (and completes the mbarrier) at the same offsets in every CTA of the
    cluster."""

    MNEMONIC = "clusterlaunchcontrol.try_cancel"
    addr: Any
    smem_bar: Any
    multicast: bool = False

    def __attrs_post_init__(self):
        if type(self.multicast) is not bool:   # a truthy "no" must not change the text
            raise OperandError(self.MNEMONIC, "multicast", "True or False",
                               _given(self.multicast))
        name = self.opcode()
        addr = tma_addr(name, "addr", self.addr, CTA)
        symbol_fit(name, "addr", addr, align=16, size=16, what=RESPONSE)
        self._set("addr", addr)
        self._set("smem_bar", mbar_addr(name, "smem_bar", self.smem_bar, CTA))

    @property
    def requires(self) -> Requires:
        return CLC_MULTICAST if self.multicast else CLC

    def opcode(self) -> str:
        return _TRY + (".multicast::cluster::all" if self.multicast else "") + ".b128"

    def operands(self):
        return (self.addr, self.smem_bar)


class CancelQuery(enum.Enum):
    """What `clusterlaunchcontrol.query_cancel` reads from a response (the value is the
    opcode's qualifiers after `query_cancel.`)."""

    is_canceled = "is_canceled.pred"
    x = "get_first_ctaid::x.b32"
    y = "get_first_ctaid::y.b32"
    z = "get_first_ctaid::z.b32"
    v4 = "get_first_ctaid.v4.b32"


@attrs.frozen
class ClusterLaunchControlQueryCancel(Instruction):
    """`clusterlaunchcontrol.query_cancel.is_canceled.pred.b128 d, response;`,
    `clusterlaunchcontrol.query_cancel.get_first_ctaid::{x,y,z}.b32.b128 d, response;`,
    `clusterlaunchcontrol.query_cancel.get_first_ctaid.v4.b32.b128 {d0, d1, d2, d3},
    response;`: `response` is a `.b128` register holding what try_cancel wrote."""

    MNEMONIC = "clusterlaunchcontrol.query_cancel"
    REQUIRES = CLC
    query: CancelQuery
    d: Any
    response: Any

    def __attrs_post_init__(self):
        if type(self.query) is not CancelQuery:
            raise OperandError(self.MNEMONIC, "query", "one of " + ", ".join(
                f"CancelQuery.{q.name}" for q in CancelQuery), _given(self.query))
        name = self.opcode()
        if self.query is CancelQuery.v4:
            d = self.d.items if isinstance(self.d, Vec) else self.d
            if not isinstance(d, tuple | list) or len(d) != 4:
                raise OperandError(name, "d", "four .b32 registers (x, y, z and an unused "
                                   "fourth)", _given(d))
            self._set("d", Vec(tuple(check_dst(name, f"d[{i}]", r, T.b32)
                                     for i, r in enumerate(d))))
        else:
            want = T.pred if self.query is CancelQuery.is_canceled else T.b32
            self._set("d", check_dst(name, "d", self.d, want))
        r = self.response
        if not isinstance(r, Reg) or r.type is not T.b128:
            raise OperandError(name, "try_cancel_response", "a .b128 register holding the "
                               "response try_cancel wrote (after the mbarrier wait, load it "
                               "with k.ld(addr, type=t.b128))", _given(r))

    def opcode(self) -> str:
        return f"clusterlaunchcontrol.query_cancel.{self.query.value}.b128"

    def operands(self):
        return (self.d, self.response)


# -- builder functions (cuda::ptx names, kernel first) -----------------------------------------
def _try_cancel(k, addr, smem_bar, multicast: bool) -> None:
    name = _TRY + (".multicast::cluster::all" if multicast else "") + ".b128"
    addr = A.space_addr(k, name, addr, CTA)
    smem_bar = A.space_addr(k, name, smem_bar, CTA)
    k.emit(ClusterLaunchControlTryCancel(addr, smem_bar, multicast))


def clusterlaunchcontrol_try_cancel(k, addr, smem_bar) -> None:
    """`clusterlaunchcontrol.try_cancel.async.shared::cta.mbarrier::complete_tx::bytes.b128
    [addr], [smem_bar];` (cuda::ptx::clusterlaunchcontrol_try_cancel): ask to cancel a
    cluster not yet launched; the 16-byte response at `addr` completes on `smem_bar`."""
    _try_cancel(k, addr, smem_bar, False)


def clusterlaunchcontrol_try_cancel_multicast(k, addr, smem_bar) -> None:
    """`clusterlaunchcontrol.try_cancel.async.shared::cta.mbarrier::complete_tx::bytes
    .multicast::cluster::all.b128 [addr], [smem_bar];`
    (cuda::ptx::clusterlaunchcontrol_try_cancel_multicast): as try_cancel, the response
    written to `addr` of every CTA of the cluster, each completing its own `smem_bar`."""
    _try_cancel(k, addr, smem_bar, True)


def _query(k, query: CancelQuery, response, dst) -> Any:
    if dst is None:
        if query is CancelQuery.v4:
            dst = tuple(k.reg(T.b32) for _ in range(4))
        else:
            dst = k.reg(T.pred if query is CancelQuery.is_canceled else T.b32)
    insn = k.emit(ClusterLaunchControlQueryCancel(query, dst, response))
    return insn.d.items if query is CancelQuery.v4 else insn.d


def clusterlaunchcontrol_query_cancel_is_canceled(k, try_cancel_response: Reg, *,
                                                  dst: Reg | None = None) -> Reg:
    """`clusterlaunchcontrol.query_cancel.is_canceled.pred.b128 p, try_cancel_response;`
    returns `p`, true when the response says the cluster was cancelled (cuda::ptx returns it
    as a bool)."""
    return _query(k, CancelQuery.is_canceled, try_cancel_response, dst)


def clusterlaunchcontrol_query_cancel_get_first_ctaid_x(k, try_cancel_response: Reg, *,
                                                        dst: Reg | None = None) -> Reg:
    """`clusterlaunchcontrol.query_cancel.get_first_ctaid::x.b32.b128 d, try_cancel_response;`
    returns `d`, the x ctaid of the cancelled cluster's first CTA."""
    return _query(k, CancelQuery.x, try_cancel_response, dst)


def clusterlaunchcontrol_query_cancel_get_first_ctaid_y(k, try_cancel_response: Reg, *,
                                                        dst: Reg | None = None) -> Reg:
    """`clusterlaunchcontrol.query_cancel.get_first_ctaid::y.b32.b128 d, try_cancel_response;`
    returns `d`, the y ctaid of the cancelled cluster's first CTA."""
    return _query(k, CancelQuery.y, try_cancel_response, dst)


def clusterlaunchcontrol_query_cancel_get_first_ctaid_z(k, try_cancel_response: Reg, *,
                                                        dst: Reg | None = None) -> Reg:
    """`clusterlaunchcontrol.query_cancel.get_first_ctaid::z.b32.b128 d, try_cancel_response;`
    returns `d`, the z ctaid of the cancelled cluster's first CTA."""
    return _query(k, CancelQuery.z, try_cancel_response, dst)


def clusterlaunchcontrol_query_cancel_get_first_ctaid(
        k, try_cancel_response: Reg, *,
        dst: Sequence[Reg] | None = None) -> tuple[Reg, ...]:
    """`clusterlaunchcontrol.query_cancel.get_first_ctaid.v4.b32.b128 {x, y, z, w},
    try_cancel_response;` returns the four .b32 registers (cuda::ptx's `block_dim[4]`): the
    ctaid of the cancelled cluster's first CTA, the fourth unused."""
    return _query(k, CancelQuery.v4, try_cancel_response, dst)


# -- forms: (form, requires, note) — rendered by ptxdsl.forms ----------------------------------
FORMS: list[tuple[str, Requires, str]] = [
    (f"{_TRY}.b128 [addr], [smem_bar]", CLC, ""),
    (f"{_TRY}.multicast::cluster::all.b128 [addr], [smem_bar]", CLC_MULTICAST,
     "cuda::ptx: SM_100a, SM_101a; ptxas also takes sm_103a, sm_110a, sm_120a, sm_121a"),
    ("clusterlaunchcontrol.query_cancel.is_canceled.pred.b128 p, response", CLC, ""),
    ("clusterlaunchcontrol.query_cancel.get_first_ctaid{::x,::y,::z}.b32.b128 d, response",
     CLC, ""),
    ("clusterlaunchcontrol.query_cancel.get_first_ctaid.v4.b32.b128 {d0, d1, d2, d3}, "
     "response", CLC, ""),
]
