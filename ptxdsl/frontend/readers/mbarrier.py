"""Readers for `ptxdsl.instructions.mbarrier` / `mbarrier_wait`: init, inval, arrive,
arrive_drop (+ .noComplete, .expect_tx), expect_tx, complete_tx, test_wait, try_wait
(+ .parity, suspend-time hint) and pending_count.

Every qualifier between the operation and `.b64` goes to the slot it names (semantics,
scope, state space, `.parity`, the arrive kind), whatever its position: the parser keeps
the object only when its canonical rendering gives back the written tokens, so a spelling
in another order stays raw instead of being reordered.
"""

from __future__ import annotations

from typing import Any

from ...instructions.base import Instruction
from ...instructions.mbarrier import (
    ArriveKind,
    ArriveOp,
    MbarrierArrive,
    MbarrierInit,
    MbarrierInval,
    MbarrierTx,
    TxOp,
)
from ...instructions.mbarrier_wait import MbarrierPendingCount, MbarrierWait, WaitOp
from ...types import Scope, Sem, StateSpace
from . import reader

S = StateSpace
# qualifier -> (slot, value); `.shared` is PTX's bare qualifier (StateSpace.shared).
QUALIFIERS: dict[str, tuple[str, Any]] = {
    "shared": ("space", S.shared), "shared::cta": ("space", S.shared_cta),
    "shared::cluster": ("space", S.shared_cluster),
    **{s.value: ("sem", s) for s in Sem}, **{s.value: ("scope", s) for s in Scope},
    "parity": ("parity", True), "noComplete": ("kind", ArriveKind.no_complete),
    "expect_tx": ("kind", ArriveKind.expect_tx),
}


def qualifiers(parts: tuple[str, ...]) -> dict[str, Any] | None:
    """The slots of `parts[2:-1]` (None when one is unknown or given twice, or the opcode
    does not end in `.b64`)."""
    if len(parts) < 3 or parts[-1] != "b64":
        return None
    got: dict[str, Any] = {}
    for q in parts[2:-1]:
        slot = QUALIFIERS.get(q)
        if slot is None or slot[0] in got:
            return None
        got[slot[0]] = slot[1]
    return got


def _init(q: dict, ops: list) -> Instruction | None:
    if len(ops) != 2:
        return None
    return MbarrierInit(q.get("space", S.generic), ops[0], ops[1])


def _inval(q: dict, ops: list) -> Instruction | None:
    if len(ops) != 1:
        return None
    return MbarrierInval(q.get("space", S.generic), ops[0])


def _arrive(op: ArriveOp):
    def read(q: dict, ops: list) -> Instruction | None:
        if len(ops) not in (2, 3):
            return None
        return MbarrierArrive(op, q.get("kind", ArriveKind.plain), q.get("space", S.generic),
                              ops[0], ops[1], ops[2] if len(ops) == 3 else None,
                              q.get("sem"), q.get("scope"))
    return read


def _tx(op: TxOp):
    def read(q: dict, ops: list) -> Instruction | None:
        if len(ops) != 2:
            return None
        return MbarrierTx(op, q.get("space", S.generic), ops[0], ops[1], q.get("sem"),
                          q.get("scope"))
    return read


def _wait(op: WaitOp):
    def read(q: dict, ops: list) -> Instruction | None:
        if len(ops) not in (3, 4):
            return None
        return MbarrierWait(op, q.get("parity", False), q.get("space", S.generic), ops[0],
                            ops[1], ops[2], ops[3] if len(ops) == 4 else None, q.get("sem"),
                            q.get("scope"))
    return read


def _pending(q: dict, ops: list) -> Instruction | None:
    if q or len(ops) != 2:
        return None
    return MbarrierPendingCount(ops[0], ops[1])


_OPS = {"init": _init, "inval": _inval, "arrive": _arrive(ArriveOp.arrive),
        "arrive_drop": _arrive(ArriveOp.arrive_drop), "expect_tx": _tx(TxOp.expect_tx),
        "complete_tx": _tx(TxOp.complete_tx), "test_wait": _wait(WaitOp.test_wait),
        "try_wait": _wait(WaitOp.try_wait), "pending_count": _pending}


@reader("mbarrier")
def mbarrier(parts: tuple[str, ...], ops: list[Any]) -> Instruction | None:
    """Every mbarrier form (init, inval, arrive / arrive_drop with their variants, expect_tx /
    complete_tx, test_wait / try_wait {.parity}, pending_count) into the `instructions.mbarrier`
    and `mbarrier_wait` classes; None for another form."""
    read = _OPS.get(parts[1]) if len(parts) > 2 else None
    q = qualifiers(parts) if read is not None else None
    if read is None or q is None:
        return None
    return read(q, ops)
