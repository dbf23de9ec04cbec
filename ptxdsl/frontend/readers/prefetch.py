"""Readers for `ptxdsl.instructions.prefetch`: prefetch{.space}.level,
prefetch.global.L2::evict_*, prefetchu.L1 (`prefetch.tensormap` is fence.py's, not read
here)."""

from __future__ import annotations

from typing import Any

from ...instructions.prefetch import Prefetch, PrefetchEviction, PrefetchLevel, PrefetchU
from ...types import StateSpace
from . import reader
from .memory import SPACES, Table, qualifiers

# `L2::evict_*` stands where the level does: it names the level (L2) and the priority.
_PREFETCH: Table = {**SPACES, **{lv.value: ("level", (lv, None)) for lv in PrefetchLevel},
                    **{f"L2::{e.value}": ("level", (PrefetchLevel.L2, e))
                       for e in PrefetchEviction}}


@reader("prefetch")
def prefetch(parts: tuple[str, ...], ops: list[Any]) -> Prefetch | None:
    """`prefetch{.space}.level{.evict} [a]` into `Prefetch` (the tensor-map prefetch is `fence`'s
    reader); None for another form."""
    q = qualifiers(parts[1:], _PREFETCH)
    if q is None or "level" not in q or len(ops) != 1:
        return None
    level, evict = q["level"]
    return Prefetch(q.get("space", StateSpace.generic), level, ops[0], evict)


@reader("prefetchu")
def prefetchu(parts: tuple[str, ...], ops: list[Any]) -> PrefetchU | None:
    """`prefetchu.L1 [a]` into `PrefetchU`; None for another form."""
    return PrefetchU(ops[0]) if parts == ("prefetchu", "L1") and len(ops) == 1 else None
