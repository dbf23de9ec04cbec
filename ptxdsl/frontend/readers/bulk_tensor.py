"""Readers for `ptxdsl.instructions.bulk_tensor`: cp.async.bulk.tensor loads and stores,
cp.reduce.async.bulk.tensor and cp.async.bulk.prefetch.tensor, 1d-5d, every mode.

The tensor operand `[map, {c0, ...}]` arrives as the front end's `Bracket` of the map
register and the coordinates (a `Vec` of registers, or `Braces` when some are immediates).
The builder's classes always spell the load mode: a text that leaves `.tile` implied (as
CUTLASS and Triton write it) renders differently and stays raw, its `why` showing the
reading with `.tile` spelled.
"""

from __future__ import annotations

from typing import Any

import attrs

from ...instructions.base import Instruction
from ...instructions.bulk import CTA, GLOBAL, Completion, CtaGroup
from ...instructions.bulk_tensor import (
    CpAsyncBulkPrefetchTensor,
    CpAsyncBulkTensor,
    CpReduceAsyncBulkTensor,
    TensorMode,
)
from ...operands import Vec
from ..items import Braces, Bracket
from . import reader
from .bulk import COMPLETIONS, HINT, MULTICAST, RED_OPS, SPACES, take

MODES: dict[str, TensorMode] = {m.value: m for m in TensorMode}
CTA_GROUPS: dict[str, CtaGroup] = {g.value: g for g in CtaGroup}
DIMS = {f"{n}d": n for n in range(1, 6)}
_IM2COL = (TensorMode.im2col, TensorMode.im2col_w, TensorMode.im2col_w_128)


@reader("cp")
def bulk_tensor(parts: tuple[str, ...], ops: list[Any]) -> Instruction | None:
    """The tensor forms of `cp`: cp.async.bulk.tensor (loads and stores, with `.tile` written or
    implied), its prefetch, and cp.reduce.async.bulk.tensor, into the `instructions.bulk_tensor`
    classes; None for another form."""
    if parts[1:4] == ("async", "bulk", "tensor") and len(parts) > 6:
        return _implied(_copy, parts[4:], 3, ops)
    if parts[1:5] == ("async", "bulk", "prefetch", "tensor") and len(parts) > 7:
        return _implied(_prefetch, parts[5:], 3, ops)
    if parts[1:5] == ("reduce", "async", "bulk", "tensor") and len(parts) > 7:
        return _implied(_reduce, parts[5:], 4, ops)
    return None


def _implied(read: Any, q: tuple[str, ...], i: int, ops: list[Any]) -> Instruction | None:
    """Read with the load mode at `i`; where the text leaves `.tile` implied (CUTLASS's and
    Triton's spelling), the reading says so (`mode_implied=True`) and renders as written."""
    if i < len(q) and q[i] in MODES:
        return read(q, list(ops))
    insn = read(q[:i] + ("tile",) + q[i:], list(ops))
    return None if insn is None else attrs.evolve(insn, mode_implied=True)


def _tensor(value: Any) -> tuple[Any, tuple] | None:
    """`[map, {coords}]` as (map, coordinates), or None for another operand."""
    if type(value) is not Bracket or len(value.items) != 2:
        return None
    tmap, coords = value.items
    if not isinstance(coords, Vec | Braces):
        return None
    return tmap, coords.items


def _vector(value: Any) -> tuple | None:
    return value.items if isinstance(value, Vec | Braces) else None


def _copy(q: tuple[str, ...], ops: list[Any]) -> CpAsyncBulkTensor | None:
    """`.Nd.dst.src.mode.completion{.multicast::cluster}{.cta_group::k}{.L2::cache_hint}`"""
    if len(q) < 5:
        return None
    dim, dst, src, mode = DIMS.get(q[0]), SPACES.get(q[1]), SPACES.get(q[2]), MODES.get(q[3])
    completion = COMPLETIONS.get(q[4])
    if dim is None or dst is None or src is None or mode is None or completion is None:
        return None
    flags = set(q[5:])
    groups = [CTA_GROUPS[f] for f in flags if f in CTA_GROUPS]
    if len(groups) > 1 or len(flags) != len(groups) + (HINT in flags) + (MULTICAST in flags):
        return None
    store = dst is GLOBAL
    if len(ops) < (2 if store else 3):
        return None
    if store:
        ref, smem, mbar = _tensor(ops.pop(0)), ops.pop(0), None
    else:
        smem, ref, mbar = ops.pop(0), _tensor(ops.pop(0)), ops.pop(0)
    if ref is None:
        return None
    im2col = take(ops, mode in _IM2COL)
    mask = take(ops, MULTICAST in flags)
    policy = take(ops, HINT in flags)
    if ops or (im2col is not None and _vector(im2col) is None):
        return None
    return CpAsyncBulkTensor(dim, dst, src, smem, ref[0], ref[1], mbar, mode, completion,
                             _vector(im2col), MULTICAST in flags, mask,
                             groups[0] if groups else None, HINT in flags, policy)


def _reduce(q: tuple[str, ...], ops: list[Any]) -> CpReduceAsyncBulkTensor | None:
    """`.Nd.global.shared::cta.op.mode.bulk_group{.L2::cache_hint}`"""
    if len(q) < 6:
        return None
    dim, op, mode = DIMS.get(q[0]), RED_OPS.get(q[3]), MODES.get(q[4])
    if dim is None or op is None or mode is None or q[1:3] != (GLOBAL.value, CTA.value) \
            or q[5] != Completion.bulk_group.value or q[6:] not in ((), (HINT,)):
        return None
    hint = bool(q[6:])
    if len(ops) != 2 + hint:
        return None
    ref = _tensor(ops[0])
    if ref is None:
        return None
    return CpReduceAsyncBulkTensor(dim, op, ref[0], ref[1], ops[1], mode, hint,
                                   ops[2] if hint else None)


def _prefetch(q: tuple[str, ...], ops: list[Any]) -> CpAsyncBulkPrefetchTensor | None:
    """`.Nd.L2.global.mode{.L2::cache_hint}`"""
    dim, mode = DIMS.get(q[0]), MODES.get(q[3])
    if dim is None or mode is None or q[1:3] != ("L2", GLOBAL.value) \
            or q[4:] not in ((), (HINT,)) or not ops:
        return None
    hint = bool(q[4:])
    ref = _tensor(ops.pop(0))
    im2col = take(ops, mode in _IM2COL)
    policy = take(ops, hint)
    if ref is None or ops or (im2col is not None and _vector(im2col) is None):
        return None
    return CpAsyncBulkPrefetchTensor(dim, ref[0], ref[1], mode, _vector(im2col), hint, policy)
