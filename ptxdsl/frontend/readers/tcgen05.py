"""Readers for `ptxdsl.instructions.tcgen05` and `tcgen05_ldst`: tcgen05.alloc, dealloc,
relinquish_alloc_permit, fence, commit (and its multicast form), wait, shift, cp, ld and st.

The mnemonic `tcgen05` is shared with the MMA family (`tcgen05.mma{.ws}`, read by its own
module): these readers look the second component up in a table and return None for the forms
they do not know.
"""

from __future__ import annotations

import re
from typing import Any

from ...instructions.base import Instruction
from ...instructions.bulk import CtaGroup
from ...instructions.tcgen05 import (
    CpMulticast,
    CpShape,
    CpSrcFmt,
    Tcgen05Alloc,
    Tcgen05Commit,
    Tcgen05Cp,
    Tcgen05Dealloc,
    Tcgen05Fence,
    Tcgen05FenceKind,
    Tcgen05RelinquishAllocPermit,
    Tcgen05Shift,
    Tcgen05Wait,
    Tcgen05WaitKind,
)
from ...instructions.tcgen05_ldst import Tcgen05Ld, Tcgen05St, TmemShape
from ...operands import Vec
from . import reader
from ._sync_qualifiers import by_value

_SYNC = ("sync", "aligned")
_GROUPS = by_value(CtaGroup)
_FENCES = {f"fence::{k.value}": k for k in Tcgen05FenceKind}
_WAITS = {f"wait::{k.value}": k for k in Tcgen05WaitKind}
_CP_SHAPES = by_value(CpShape)
_CP_MULTICAST = by_value(CpMulticast)
_SRC_FMTS = by_value(CpSrcFmt)
_SHAPES = by_value(TmemShape)
_NUM = re.compile(r"x(\d+)\Z")
_COMMIT = ("mbarrier::arrive::one", "shared::cluster")


def _alloc(parts: tuple[str, ...], ops: list[Any]) -> Instruction | None:
    """`alloc.cta_group.sync.aligned.shared::cta.b32 [dst], nCols`"""
    group = _GROUPS.get(parts[2])
    if group and parts[3:] == (*_SYNC, "shared::cta", "b32") and len(ops) == 2:
        return Tcgen05Alloc(group, *ops)
    return None


def _dealloc(parts: tuple[str, ...], ops: list[Any]) -> Instruction | None:
    """`dealloc.cta_group.sync.aligned.b32 taddr, nCols`"""
    group = _GROUPS.get(parts[2])
    if group and parts[3:] == (*_SYNC, "b32") and len(ops) == 2:
        return Tcgen05Dealloc(group, *ops)
    return None


def _relinquish(parts: tuple[str, ...], ops: list[Any]) -> Instruction | None:
    """`relinquish_alloc_permit.cta_group.sync.aligned`"""
    group = _GROUPS.get(parts[2])
    if group and parts[3:] == _SYNC and not ops:
        return Tcgen05RelinquishAllocPermit(group)
    return None


def _commit(parts: tuple[str, ...], ops: list[Any]) -> Instruction | None:
    """`commit.cta_group.mbarrier::arrive::one.shared::cluster{.multicast::cluster}.b64`"""
    group = _GROUPS.get(parts[2])
    if group is None or parts[3:5] != _COMMIT or parts[-1] != "b64":
        return None
    mc = parts[5:-1]
    if mc == () and len(ops) == 1:
        return Tcgen05Commit(group, ops[0])
    if mc == ("multicast::cluster",) and len(ops) == 2:
        return Tcgen05Commit(group, ops[0], ops[1])
    return None


def _shift(parts: tuple[str, ...], ops: list[Any]) -> Instruction | None:
    """`shift.cta_group.down [taddr]`"""
    group = _GROUPS.get(parts[2])
    if group and parts[3:] == ("down",) and len(ops) == 1:
        return Tcgen05Shift(group, ops[0])
    return None


def _cp(parts: tuple[str, ...], ops: list[Any]) -> Instruction | None:
    """`cp.cta_group.shape{.multicast}{.b8x16.src_fmt} [taddr], s_desc`"""
    group, shape = _GROUPS.get(parts[2]), _CP_SHAPES.get(parts[3])
    if group is None or shape is None or len(ops) != 2:
        return None
    rest = parts[4:]
    multicast = _CP_MULTICAST.get(rest[0]) if rest else None
    if multicast is not None:
        rest = rest[1:]
    src_fmt = None
    if rest:
        src_fmt = _SRC_FMTS.get(rest[1]) if len(rest) == 2 and rest[0] == "b8x16" else None
        if src_fmt is None:
            return None
    return Tcgen05Cp(group, shape, ops[0], ops[1], multicast, src_fmt)


def _ld_st(parts: tuple[str, ...], ops: list[Any]) -> Instruction | None:
    """`ld.sync.aligned.shape.num{.pack::16b}.b32 {d}, [taddr]{, imm}` and
    `st.sync.aligned.shape.num{.unpack::16b}.b32 [taddr]{, imm}, {values}`"""
    is_ld = parts[1] == "ld"
    if parts[2:4] != _SYNC or parts[-1] != "b32" or len(parts) not in (7, 8):
        return None
    shape, num = _SHAPES.get(parts[4]), _NUM.match(parts[5])
    packed = len(parts) == 8
    if shape is None or num is None or packed and parts[6] != (
            "pack::16b" if is_ld else "unpack::16b"):
        return None
    split = shape is TmemShape.s16x32bx2
    if len(ops) != 2 + split:
        return None
    if is_ld:
        d, taddr = ops[0], ops[1]
        imm = ops[2] if split else None
        if not isinstance(d, Vec):
            return None
        return Tcgen05Ld(shape, int(num.group(1)), d.items, taddr, imm, packed)
    taddr, values = ops[0], ops[-1]
    imm = ops[1] if split else None
    if not isinstance(values, Vec):
        return None
    return Tcgen05St(shape, int(num.group(1)), taddr, values.items, imm, packed)


_BY_NAME = {"alloc": _alloc, "dealloc": _dealloc, "relinquish_alloc_permit": _relinquish,
            "commit": _commit, "shift": _shift, "cp": _cp, "ld": _ld_st, "st": _ld_st}


@reader("tcgen05")
def tcgen05(parts: tuple[str, ...], ops: list[Any]) -> Instruction | None:
    """Every tcgen05 form but the MMA into its class; None for another form."""
    if len(parts) < 2:
        return None
    fence = _FENCES.get(parts[1])
    if fence is not None:
        return Tcgen05Fence(fence) if len(parts) == 2 and not ops else None
    wait = _WAITS.get(parts[1])
    if wait is not None:
        return Tcgen05Wait(wait) if parts[2:] == _SYNC and not ops else None
    read = _BY_NAME.get(parts[1])
    return read(parts, ops) if read is not None and len(parts) >= 4 else None
