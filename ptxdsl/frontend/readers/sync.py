"""Readers for `ptxdsl.instructions.sync` (bar/barrier .sync, .arrive, .red, bar.warp.sync)
and `membar` (`instructions.fence.Membar`). `barrier.cluster.*` is the cluster family's."""

from __future__ import annotations

from typing import Any

from ...instructions.base import Instruction
from ...instructions.fence import Membar, MembarLevel
from ...instructions.sync import Barrier, BarrierOp, BarrierRed, BarrierRedOp, WarpSync
from . import reader

_OP = {m.value: m for m in BarrierOp}
_RED = {m.value: m for m in BarrierRedOp}
_LEVEL = {m.value: m for m in MembarLevel}


@reader("bar", "barrier")
def barrier(parts: tuple[str, ...], ops: list[Any]) -> Instruction | None:
    """bar / barrier in their CTA forms (sync and arrive into `Barrier`, red into `BarrierRed`;
    `bar.*` is aligned without saying so) and `bar.warp.sync` into `WarpSync`; None for another
    form."""
    short = parts[0] == "bar"
    if len(parts) < 2:
        return None
    if parts[1] == "warp":
        if parts != ("bar", "warp", "sync") or len(ops) != 1:
            return None
        return WarpSync(ops[0])
    # bar.* is always aligned and never says so; barrier.* says it or is not.
    aligned = short or parts[-1] == "aligned" or (parts[1] == "red" and len(parts) == 5
                                                   and parts[3] == "aligned")
    op = _OP.get(parts[1])
    if op is not None:
        if len(parts) != 2 + (aligned and not short) or not 1 <= len(ops) <= 2:
            return None
        return Barrier(op, ops[0], ops[1] if len(ops) == 2 else None, aligned, short)
    red = _RED.get(parts[2]) if parts[1] == "red" and len(parts) > 3 else None
    if red is None or len(parts) != 4 + (aligned and not short) or not 3 <= len(ops) <= 4:
        return None
    # The type is the operation's (.u32 for popc, .pred otherwise): the rendering shows it.
    count = ops[2] if len(ops) == 4 else None
    return BarrierRed(red, ops[0], ops[1], ops[-1], count, aligned, short)


@reader("membar")
def membar(parts: tuple[str, ...], ops: list[Any]) -> Membar | None:
    """`membar.{cta,gl,sys}` into `Membar` (the sync family's reading); None for another form."""
    level = _LEVEL.get(parts[1]) if len(parts) == 2 and not ops else None
    return None if level is None else Membar(level)
