"""Readers for `ptxdsl.instructions.bulk`: 1-D cp.async.bulk in each direction, its L2
prefetch, cp.reduce.async.bulk, and the bulk async-group instructions.

The qualifiers are read as a set and the object is built from them; the parser's render
check then keeps it only where the text spelled them in the canonical order. The tensor forms
(`.tensor`) are `readers.bulk_tensor`'s, cp.async (non-bulk) another family's.
"""

from __future__ import annotations

from typing import Any

from ...instructions.base import Instruction
from ...instructions.bulk import (
    CLUSTER,
    CTA,
    GLOBAL,
    Completion,
    CpAsyncBulk,
    CpAsyncBulkCommitGroup,
    CpAsyncBulkPrefetch,
    CpAsyncBulkWaitGroup,
    CpReduceAsyncBulk,
    RedOp,
)
from ...types import ScalarType, StateSpace
from . import reader

SPACES: dict[str, StateSpace] = {s.value: s for s in (CLUSTER, CTA, GLOBAL)}
COMPLETIONS: dict[str, Completion] = {c.value: c for c in Completion}
RED_OPS: dict[str, RedOp] = {o.value: o for o in RedOp}
HINT, MULTICAST, CP_MASK = "L2::cache_hint", "multicast::cluster", "cp_mask"
_COPY_FLAGS = frozenset((HINT, MULTICAST, CP_MASK))


def take(ops: list[Any], want: bool) -> Any:
    """The next operand if the form has it (`want`), else None."""
    return ops.pop(0) if want and ops else None


@reader("cp")
def bulk(parts: tuple[str, ...], ops: list[Any]) -> Instruction | None:
    """The non-tensor bulk forms of `cp`: cp.async.bulk (copies, with their completion),
    cp.async.bulk.prefetch.L2, cp.async.bulk.commit_group / wait_group{.read} and
    cp.reduce.async.bulk, into the `instructions.bulk` classes; None for another form."""
    if parts[1:3] == ("async", "bulk") and len(parts) > 3:
        read = _ASYNC.get(parts[3], _copy)
        return read(parts[3:], list(ops))
    if parts[1:4] == ("reduce", "async", "bulk") and len(parts) > 4 and parts[4] != "tensor":
        return _reduce(parts[4:], list(ops))
    return None


def _copy(q: tuple[str, ...], ops: list[Any]) -> CpAsyncBulk | None:
    """`.dst.src.completion{.multicast::cluster}{.L2::cache_hint}{.cp_mask}`"""
    if len(q) < 3 or q[0] not in SPACES or q[1] not in SPACES or q[2] not in COMPLETIONS:
        return None
    flags = set(q[3:])
    if not flags <= _COPY_FLAGS or len(ops) < 3:
        return None
    completion = COMPLETIONS[q[2]]
    dst, src, size = ops.pop(0), ops.pop(0), ops.pop(0)
    mbar = take(ops, completion is Completion.mbarrier)
    mask = take(ops, MULTICAST in flags)
    policy = take(ops, HINT in flags)
    byte_mask = take(ops, CP_MASK in flags)
    if ops:
        return None
    return CpAsyncBulk(SPACES[q[0]], SPACES[q[1]], dst, src, size, mbar, completion,
                       MULTICAST in flags, mask, HINT in flags, policy, byte_mask)


def _prefetch(q: tuple[str, ...], ops: list[Any]) -> CpAsyncBulkPrefetch | None:
    """`.prefetch.L2.global{.L2::cache_hint} [src], size{, policy}`"""
    if q[1:3] != ("L2", "global") or q[3:] not in ((), (HINT,)) or len(ops) != 2 + len(q[3:]):
        return None
    return CpAsyncBulkPrefetch(ops[0], ops[1], bool(q[3:]), take(ops[2:], bool(q[3:])))


def _commit(q: tuple[str, ...], ops: list[Any]) -> CpAsyncBulkCommitGroup | None:
    return CpAsyncBulkCommitGroup() if len(q) == 1 and not ops else None


def _wait(q: tuple[str, ...], ops: list[Any]) -> CpAsyncBulkWaitGroup | None:
    if q[1:] not in ((), ("read",)) or len(ops) != 1 or not isinstance(ops[0], int):
        return None
    return CpAsyncBulkWaitGroup(ops[0], read=bool(q[1:]))


def _reduce(q: tuple[str, ...], ops: list[Any]) -> CpReduceAsyncBulk | None:
    """`.dst.shared::cta.completion{.L2::cache_hint}.op{.noftz}.type`"""
    if len(q) < 5 or q[0] not in SPACES or q[1] != CTA.value or q[2] not in COMPLETIONS:
        return None
    rest = list(q[3:])
    hint = rest[0] == HINT
    if hint:
        rest.pop(0)
    if rest[-2:-1] == ["noftz"]:
        del rest[-2]
    if len(rest) != 2 or rest[0] not in RED_OPS or rest[1] not in ScalarType._value2member_map_:
        return None
    completion = COMPLETIONS[q[2]]
    if len(ops) < 3:
        return None
    dst, src, size = ops.pop(0), ops.pop(0), ops.pop(0)
    mbar = take(ops, completion is Completion.mbarrier)
    policy = take(ops, hint)
    if ops:
        return None
    return CpReduceAsyncBulk(SPACES[q[0]], RED_OPS[rest[0]], ScalarType(rest[1]), dst, src, size,
                             mbar, completion, hint, policy)


# The word after `cp.async.bulk`: a named form, or (the default) a copy's destination space.
_ASYNC = {"prefetch": _prefetch, "commit_group": _commit, "wait_group": _wait,
          "tensor": lambda q, ops: None}
