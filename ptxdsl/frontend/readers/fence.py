"""Readers for `ptxdsl.instructions.fence`: membar, fence.sem.scope, fence.proxy.alias,
fence.proxy.async{.space}, fence.proxy.tensormap::generic.{release,acquire},
fence.mbarrier_init, the sync_restrict fences and prefetch{.space}.tensormap.

The classes that always spell one qualifier (fence.mbarrier_init's `.release.cluster`) are
given what the text says, so a text with another value stays raw (the class refuses it, or
renders its own spelling, which the parser compares)."""

from __future__ import annotations

from typing import Any

from ...instructions.base import Instruction
from ...instructions.fence import (
    Fence,
    FenceMbarrierInit,
    FenceProxyAlias,
    FenceProxyAsync,
    FenceProxyTensormapAcquire,
    FenceProxyTensormapRelease,
    FenceSyncRestrict,
    Membar,
    MembarLevel,
    PrefetchTensormap,
)
from ...types import StateSpace
from . import reader
from ._sync_qualifiers import SCOPES, SEMS, by_value

S = StateSpace
_LEVELS = by_value(MembarLevel)
_SPACES = {s.value: s for s in S if s.value}
_RESTRICT = "sync_restrict::"


@reader("membar")
def membar(parts: tuple[str, ...], ops: list[Any]) -> Instruction | None:
    """`membar.{cta,gl,sys}` into `Membar`; None for another form."""
    level = _LEVELS.get(parts[1]) if len(parts) == 2 and not ops else None
    return Membar(level) if level is not None else None


def _restrict(parts: tuple[str, ...], proxy_async: bool) -> Instruction | None:
    """`fence{.proxy.async::generic}.sem.sync_restrict::space.scope` (parts from .sem on)."""
    if len(parts) != 3 or not parts[1].startswith(_RESTRICT):
        return None
    sem, space, scope = SEMS.get(parts[0]), _SPACES.get(parts[1][len(_RESTRICT):]), \
        SCOPES.get(parts[2])
    if sem is None or space is None or scope is None:
        return None
    return FenceSyncRestrict(sem, space, scope, proxy_async=proxy_async)


def _proxy(parts: tuple[str, ...], ops: list[Any]) -> Instruction | None:
    """`fence.proxy.<kind>...` (parts from the kind on)."""
    kind, rest = parts[0], parts[1:]
    if kind == "alias":
        return FenceProxyAlias() if not rest and not ops else None
    if kind == "async":
        if ops or len(rest) > 1:
            return None
        space = _SPACES.get(rest[0]) if rest else S.generic
        return FenceProxyAsync(space) if space is not None else None
    if kind == "async::generic":
        return None if ops else _restrict(rest, proxy_async=True)
    scope = SCOPES.get(rest[1]) if kind == "tensormap::generic" and len(rest) == 2 else None
    if scope is not None:
        if rest[0] == "release":
            return FenceProxyTensormapRelease(scope) if not ops else None
        if rest[0] == "acquire" and len(ops) == 2:
            return FenceProxyTensormapAcquire(scope, ops[0], ops[1])
    return None


@reader("fence")
def fence(parts: tuple[str, ...], ops: list[Any]) -> Instruction | None:
    """fence: `fence.sem.scope`, `fence.mbarrier_init.sem.scope`, the proxy fences and the
    restricted forms, into the `instructions.fence` classes; None for another form."""
    if len(parts) < 2:
        return None
    head = parts[1]
    if head == "proxy":
        return _proxy(parts[2:], ops) if len(parts) > 2 else None
    if ops:
        return None
    if len(parts) == 3 or head == "mbarrier_init" and len(parts) == 4:
        sem, scope = SEMS.get(parts[-2]), SCOPES.get(parts[-1])
        if sem is None or scope is None:
            return None
        return FenceMbarrierInit(sem, scope) if head == "mbarrier_init" else Fence(sem, scope)
    return _restrict(parts[1:], proxy_async=False)


@reader("prefetch")
def prefetch_tensormap(parts: tuple[str, ...], ops: list[Any]) -> Instruction | None:
    """`prefetch{.param,.const}.tensormap [addr]` (the other prefetches are not this one's)."""
    if parts[-1] != "tensormap" or len(parts) > 3 or len(ops) != 1:
        return None
    space = S.generic if len(parts) == 2 else _SPACES.get(parts[1])
    return PrefetchTensormap(space, ops[0]) if space is not None else None
