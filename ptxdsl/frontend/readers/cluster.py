"""Readers for `ptxdsl.instructions.cluster`, `st_async` and `setmaxnreg`: barrier.cluster,
mapa, getctarank, st.async, red.async, cp.async.mbarrier.arrive{.noinc} and setmaxnreg.

`barrier`, `st`, `red` and `cp` are shared with other families (barrier.sync, plain st/red,
cp.async, the bulk copies): these readers return None for forms that are not theirs.
mapa/getctarank take their `.u32`/`.u64` from the address width (the class derives it), and
st.async is read with or without `.weak` (CUTLASS and Triton leave it out).
"""

from __future__ import annotations

from typing import Any

from ...instructions.base import Instruction
from ...instructions.bulk import RedOp
from ...instructions.cluster import BarrierCluster, ClusterBarrierOp, Getctarank, Mapa
from ...instructions.setmaxnreg import RegAction, SetMaxNReg
from ...instructions.st_async import CpAsyncMbarrierArrive, RedAsync, StAsync
from ...types import ScalarType, StateSpace
from ..items import Braces
from . import reader
from ._sync_qualifiers import SEMS, by_value

S = StateSpace
_BARRIER_OPS = by_value(ClusterBarrierOp)
_CLUSTER_SPACES = {1: S.generic, 2: S.shared_cluster}   # by the number of qualifiers
_BAR_SPACES = {"shared": S.shared, "shared::cta": S.shared_cta}
_TYPES = by_value(ScalarType)
_RED_OPS = by_value(RedOp)
_ACTIONS = by_value(RegAction)


@reader("barrier")
def barrier_cluster(parts: tuple[str, ...], ops: list[Any]) -> Instruction | None:
    """`barrier.cluster.{arrive,wait}{.sem}{.aligned}`."""
    if len(parts) < 3 or parts[1] != "cluster" or ops or len(parts) > 5:
        return None
    op = _BARRIER_OPS.get(parts[2])
    if op is None:
        return None
    rest = parts[3:]
    aligned = bool(rest) and rest[-1] == "aligned"
    if aligned:
        rest = rest[:-1]
    sem = SEMS.get(rest[0]) if rest else None
    if rest and sem is None:
        return None
    return BarrierCluster(op, sem, aligned)


def _address_map(cls: type[Mapa] | type[Getctarank], n: int):
    def read(parts: tuple[str, ...], ops: list[Any]) -> Instruction | None:
        space = _CLUSTER_SPACES.get(len(parts) - 1)
        if space is None or len(ops) != n or (space is S.shared_cluster
                                              and parts[1] != "shared::cluster"):
            return None
        return cls(space, *ops)
    read.__doc__ = (f"`{cls.MNEMONIC}{{.shared::cluster}}.<u32|u64>` ({n} operands) into "
                    f"`{cls.__name__}`; None for another form.")
    return read


mapa = reader("mapa")(_address_map(Mapa, 3))
getctarank = reader("getctarank")(_address_map(Getctarank, 2))


@reader("st")
def st_async(parts: tuple[str, ...], ops: list[Any]) -> Instruction | None:
    """`st.async.weak.shared::cluster.mbarrier::complete_tx::bytes{.vN}.type`."""
    if len(parts) < 3 or parts[1] != "async" or len(ops) != 3:
        return None
    t = _TYPES.get(parts[-1])
    if t is None:
        return None
    value = ops[1]
    if isinstance(value, Braces):      # a vector holding immediates
        value = value.items
    return StAsync(t, ops[0], value, ops[2], weak=parts[2] == "weak")


@reader("red")
def red_async(parts: tuple[str, ...], ops: list[Any]) -> Instruction | None:
    """`red.async.relaxed.cluster.shared::cluster.mbarrier::complete_tx::bytes.op.type`."""
    if len(parts) < 4 or parts[1] != "async" or len(ops) != 3:
        return None
    op, t = _RED_OPS.get(parts[-2]), _TYPES.get(parts[-1])
    if op is None or t is None:
        return None
    return RedAsync(op, t, ops[0], ops[1], ops[2])


@reader("cp")
def cp_async_mbarrier_arrive(parts: tuple[str, ...], ops: list[Any]) -> Instruction | None:
    """`cp.async.mbarrier.arrive{.noinc}{.shared{::cta}}.b64 [addr]`."""
    if parts[1:4] != ("async", "mbarrier", "arrive") or parts[-1] != "b64" or len(ops) != 1:
        return None
    rest = parts[4:-1]
    noinc = bool(rest) and rest[0] == "noinc"
    if noinc:
        rest = rest[1:]
    space = _BAR_SPACES.get(rest[0]) if len(rest) == 1 else S.generic if not rest else None
    return CpAsyncMbarrierArrive(space, ops[0], noinc) if space is not None else None


@reader("setmaxnreg")
def setmaxnreg(parts: tuple[str, ...], ops: list[Any]) -> Instruction | None:
    """`setmaxnreg.{inc,dec}.sync.aligned.u32 count`."""
    action = _ACTIONS.get(parts[1]) if len(parts) > 1 else None
    if action is None or len(ops) != 1:
        return None
    return SetMaxNReg(action, ops[0])
