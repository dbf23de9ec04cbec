"""Readers for `ptxdsl.instructions.tensormap`: tensormap.replace.tile.<field> (every field,
with and without ord) and tensormap.cp_fenceproxy.

::

    tensormap.replace.tile.<field>{.global,.shared::cta}.b1024.<b32|b64> [addr], {ord,} new_val;
    tensormap.cp_fenceproxy.global.shared::cta.tensormap::generic.release.<scope>.sync.aligned
        [dst], [src], 128;

The value type (`.b32`/`.b64`) follows from the field and cp_fenceproxy's fixed qualifiers
are the class's own: a text that spells them otherwise renders differently and stays raw.
"""

from __future__ import annotations

from typing import Any

from ...instructions.base import Instruction
from ...instructions.tensormap import (
    Field,
    TensormapCpFenceproxy,
    TensormapReplace,
    TensormapReplaceDim,
)
from ...types import StateSpace
from . import reader
from ._sync_qualifiers import SCOPES, SEMS, by_value

S = StateSpace
_FIELDS = by_value(Field)
_SPACES = {"global": S.global_, "shared::cta": S.shared_cta}


def _replace(parts: tuple[str, ...], ops: list[Any]) -> Instruction | None:
    """parts: ("tensormap", "replace", "tile", field, {space,} "b1024", type)."""
    if len(parts) not in (6, 7) or parts[2] != "tile":
        return None
    field = _FIELDS.get(parts[3])
    space = S.generic if len(parts) == 6 else _SPACES.get(parts[4])
    if field is None or space is None:
        return None
    if field.has_ord:
        return TensormapReplaceDim(field, space, ops[0], ops[1], ops[2]) if len(ops) == 3 \
            else None
    return TensormapReplace(field, space, ops[0], ops[1]) if len(ops) == 2 else None


def _cp_fenceproxy(parts: tuple[str, ...], ops: list[Any]) -> Instruction | None:
    """parts: (..., "tensormap::generic", sem, scope, "sync", "aligned")."""
    sem = SEMS.get(parts[5]) if len(parts) == 9 and len(ops) == 3 else None
    scope = SCOPES.get(parts[6]) if sem is not None else None
    if sem is None or scope is None:
        return None
    return TensormapCpFenceproxy(scope, ops[0], ops[1], ops[2], sem)


@reader("tensormap")
def tensormap(parts: tuple[str, ...], ops: list[Any]) -> Instruction | None:
    """`tensormap.replace.tile.<field>` (with or without ord) and `tensormap.cp_fenceproxy` into
    `TensormapReplace`, `TensormapReplaceDim` and `TensormapCpFenceproxy`; None for another form."""
    if len(parts) > 1 and parts[1] == "replace":
        return _replace(parts, ops)
    if len(parts) > 1 and parts[1] == "cp_fenceproxy":
        return _cp_fenceproxy(parts, ops)
    return None
