"""Readers for `ptxdsl.instructions.tcgen05_mma`: tcgen05.mma (every kind, A from a descriptor
or from tensor memory, disable_output_lane, scale_input_d, block_scale with or without
scale_vec / blockN, collector::a usage) and tcgen05.mma.ws (collector::bN usage,
zero_column_mask_desc), each dense or sparse (`.sp`: A's metadata address after b_desc).

A in tensor memory is written `[a_tmem]`, an address (`Addr`); a descriptor is a register or
an immediate. disable_output_lane is the only brace operand: a `Vec` of registers, or the front
end's `Braces` when it holds immediates.
"""

from __future__ import annotations

from typing import Any

from ...instructions.base import Instruction
from ...instructions.bulk import CtaGroup
from ...instructions.tcgen05_mma import Collector, Kind, ScaleVec, Tcgen05Mma, Tcgen05MmaWs
from ...operands import Addr, Vec
from ..items import Braces
from . import reader

CTA_GROUPS: dict[str, CtaGroup] = {g.value: g for g in CtaGroup}
KINDS: dict[str, Kind] = {k.value: k for k in Kind}
SCALE_VECS: dict[str, ScaleVec] = {v.value: v for v in ScaleVec}
COLLECTOR_A: dict[str, Collector] = {f"collector::a::{u.value}": u for u in Collector}
COLLECTOR_B: dict[str, tuple[int, Collector]] = {f"collector::b{n}::{u.value}": (n, u)
                                                  for n in range(4) for u in Collector}


@reader("tcgen05")
def tcgen05_mma(parts: tuple[str, ...], ops: list[Any]) -> Instruction | None:
    """tcgen05.mma and tcgen05.mma.ws into `Tcgen05Mma` / `Tcgen05MmaWs`; None for another
    tcgen05 instruction or form."""
    if parts[1:2] != ("mma",) or len(ops) < 5:
        return None
    ws = parts[2:3] == ("ws",)
    q = parts[2 + ws:]
    sparse = q[:1] == ("sp",)
    if sparse:     # the metadata's [address] between b_desc and idesc
        meta, ops = ops[3], ops[:3] + ops[4:]
        if len(ops) < 5 or not isinstance(meta, Addr):
            return None
    extra = {"sp_meta_tmem": meta} if sparse else {}
    return (_ws if ws else _mma)(q[sparse:], ops, extra)


def _a(value: Any) -> dict[str, Any]:
    return {"a_tmem": value} if isinstance(value, Addr) else {"a_desc": value}


def _mma(q: tuple[str, ...], ops: list[Any], extra: dict[str, Any]) -> Tcgen05Mma | None:
    """`.cta_group.kind{.block_scale{.scale_vec::NX}}{.collector::a::usage}`"""
    if len(q) < 2 or q[0] not in CTA_GROUPS or q[1] not in KINDS:
        return None
    rest, i = q[2:], 0
    block_scale = rest[:1] == ("block_scale",)
    i += block_scale
    scale_vec = SCALE_VECS.get(rest[i]) if block_scale and i < len(rest) else None
    i += scale_vec is not None
    collector = None
    if i < len(rest):
        collector = COLLECTOR_A.get(rest[i])
        i += 1
        if collector is None or i != len(rest):
            return None
    given: dict[str, Any] = dict(kind=KINDS[q[1]], cta_group=CTA_GROUPS[q[0]], d_tmem=ops[0],
                                 b_desc=ops[2], idesc=ops[3], collector=collector, **_a(ops[1]),
                                 **extra)
    tail = ops[4:]
    if block_scale:
        if len(tail) != 3:
            return None
        given.update(scale_vec=scale_vec, scale_A_tmem=tail[0], scale_B_tmem=tail[1])
        return Tcgen05Mma(**given, enable_input_d=tail[2])
    if isinstance(tail[0], Vec | Braces):
        given["disable_output_lane"] = tail.pop(0).items
    if not 1 <= len(tail) <= 2:
        return None
    return Tcgen05Mma(**given, enable_input_d=tail[0],
                      scale_input_d=tail[1] if len(tail) == 2 else None)


def _ws(q: tuple[str, ...], ops: list[Any], extra: dict[str, Any]) -> Tcgen05MmaWs | None:
    """`.cta_group.kind{.collector::bN::usage}`"""
    if not 2 <= len(q) <= 3 or q[0] not in CTA_GROUPS or q[1] not in KINDS or len(ops) > 6:
        return None
    b, usage = COLLECTOR_B.get(q[2], (-1, None)) if len(q) == 3 else (None, None)
    if len(q) == 3 and usage is None:
        return None
    return Tcgen05MmaWs(kind=KINDS[q[1]], cta_group=CTA_GROUPS[q[0]], d_tmem=ops[0],
                        b_desc=ops[2], idesc=ops[3], enable_input_d=ops[4],
                        zero_column_mask_desc=ops[5] if len(ops) == 6 else None,
                        collector_b=b, collector=usage, **_a(ops[1]), **extra)
