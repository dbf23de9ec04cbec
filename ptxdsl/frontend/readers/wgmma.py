"""Readers for `ptxdsl.instructions.wgmma` and `wgmma_sp`: wgmma.mma_async dense and sparse
(A from a descriptor or from four registers), and wgmma.fence / commit_group / wait_group.

The immediates after scale-d are the ones the input type takes (`Kind`): imm-scale-a/b for
the floating-point types, imm-trans-a (descriptor A only) and imm-trans-b for f16/bf16 (the
class keeps a default value, scale 1 or no transpose, as left out, as a builder call without
it makes it).
"""

from __future__ import annotations

import re
from typing import Any

from ...instructions.base import Instruction
from ...instructions.wgmma import (
    KIND_OF,
    WgmmaCommitGroup,
    WgmmaFence,
    WgmmaMmaAsync,
    WgmmaType,
    WgmmaWaitGroup,
)
from ...instructions.wgmma_sp import WgmmaMmaAsyncSp
from ...operands import Vec
from ...types import ScalarType
from . import reader

_SHAPE = re.compile(r"m64n(\d+)k\d+\Z")
_WTYPES: dict[str, WgmmaType] = {w.value: w for w in WgmmaType}
_DTYPES: dict[str, ScalarType] = {t.value: t for t in (ScalarType.f16, ScalarType.f32,
                                                       ScalarType.s32)}
_SYNC = ("sync", "aligned")
_TAILS = {(): False, ("satfinite",): True, ("and", "popc"): False}


@reader("wgmma")
def wgmma(parts: tuple[str, ...], ops: list[Any]) -> Instruction | None:
    """wgmma.fence, wgmma.commit_group and wgmma.wait_group (`.sync.aligned`) into their classes,
    and wgmma.mma_async into `WgmmaMmaAsync`; None for another form."""
    if parts[1:2] == ("mma_async",):
        return _mma(parts, ops)
    if len(parts) != 4 or parts[2:] != _SYNC:
        return None
    if parts[1] == "fence" and not ops:
        return WgmmaFence()
    if parts[1] == "commit_group" and not ops:
        return WgmmaCommitGroup()
    if parts[1] == "wait_group" and len(ops) == 1 and isinstance(ops[0], int):
        return WgmmaWaitGroup(ops[0])
    return None


def _mma(parts: tuple[str, ...], ops: list[Any]) -> WgmmaMmaAsync | None:
    """`wgmma.mma_async{.sp}.sync.aligned.m64nNkK.dtype.atype.btype{.satfinite}{.and.popc}`"""
    sparse = parts[2:3] == ("sp",)
    q = parts[3:] if sparse else parts[2:]
    if q[:2] != _SYNC or len(q) < 6:
        return None
    shape = _SHAPE.match(q[2])
    dtype, atype, btype = _DTYPES.get(q[3]), _WTYPES.get(q[4]), _WTYPES.get(q[5])
    satfinite = _TAILS.get(q[6:])
    if shape is None or dtype is None or atype is None or btype is None or satfinite is None:
        return None
    fixed = 6 if sparse else 4       # d, a, b-desc{, sp-meta, sp-sel}, scale-d
    if len(ops) < fixed or not isinstance(ops[0], Vec):
        return None
    a = ops[1]
    rs = isinstance(a, Vec)
    if rs:
        a = a.items
    kind = KIND_OF[atype]
    names = []
    if kind.scale_ab:
        names += ["imm_scale_a", "imm_scale_b"]
        if kind.transpose:
            names += ["tnspB"] if rs else ["tnspA", "tnspB"]
    imms = ops[fixed:]
    if len(imms) != len(names) or not all(isinstance(v, int) for v in imms):
        return None
    given = dict(zip(names, imms, strict=True))
    n, b = int(shape.group(1)), ops[2]
    d: Any = ops[0].items            # operands; the constructor checks they are registers
    if sparse:
        return WgmmaMmaAsyncSp(n, dtype, atype, btype, d, a, b, ops[5], satfinite=satfinite,
                               sp_meta=ops[3], sp_sel=ops[4], **given)
    return WgmmaMmaAsync(n, dtype, atype, btype, d, a, b, ops[3], satfinite=satfinite, **given)
