"""Readers for `ptxdsl.instructions.move`: mov, isspacep, cvta and the scalar cvt (the packed cvt
forms are `cvt_packed`'s)."""

from __future__ import annotations

import struct
from typing import Any

from ...instructions.move import Cvt, Cvta, Isspacep, Mov, Rounding, SpaceWindow
from ...operands import Vec
from ..items import Braces
from . import reader
from ._lookup import SCALAR, SPACE

_RND = {r.value: r for r in Rounding}
# A float literal moved into a bit type (`mov.b32 %r1, 0f3F800000`: libdevice's and Triton's
# constants) moves its IEEE bits: read as that integer, so the value the checker tracks is the
# one the register holds (the parser emits the source's spelling).
_BITS = {"b32": ">f", "b64": ">d"}


def float_bits(value: float, fmt: str) -> int | None:
    """The IEEE bits of `value` in the format ('>f' or '>d'), None when it does not fit."""
    try:
        return int.from_bytes(struct.pack(fmt, value), "big")
    except OverflowError:
        return None
_WINDOW = {w.value: w for w in SpaceWindow}


@reader("mov")
def mov(parts: tuple[str, ...], ops: list[Any]) -> Mov | None:
    """`mov.type d, a` (registers, immediates, symbols, special registers) into `Mov`; None for
    another form."""
    # `mov.b64 d, {lo, hi}` packs a vector and `mov.b64 {lo, hi}, a` unpacks one: forms Mov
    # does not model.
    if len(parts) != 2 or len(ops) != 2 or isinstance(ops[0], Vec) or \
            isinstance(ops[1], Vec | Braces):
        return None
    t = SCALAR.get(parts[1])
    if t is None:
        return None
    a = ops[1]
    if type(a) is float and parts[1] in _BITS:
        a = float_bits(a, _BITS[parts[1]])
        if a is None:
            return None
    return Mov(t, ops[0], a)


@reader("isspacep")
def isspacep(parts: tuple[str, ...], ops: list[Any]) -> Isspacep | None:
    """`isspacep.space p, a` into `Isspacep`; None for another form."""
    space = _WINDOW.get(parts[1]) if len(parts) == 2 else None
    if space is None or len(ops) != 2:
        return None
    return Isspacep(space, ops[0], ops[1])


@reader("cvta")
def cvta(parts: tuple[str, ...], ops: list[Any]) -> Cvta | None:
    """`cvta{.to}.space.size d, a` into `Cvta`; None for another form."""
    to = len(parts) == 4 and parts[1] == "to"
    if len(ops) != 2 or len(parts) != 3 + to:
        return None
    space, size = SPACE.get(parts[-2]), SCALAR.get(parts[-1])
    if space is None or size is None:
        return None
    return Cvta(space, to, ops[0], ops[1], size)


@reader("cvt")
def cvt(parts: tuple[str, ...], ops: list[Any]) -> Cvt | None:
    """The scalar forms of cvt (`cvt{.rnd}{.ftz}{.sat}.dtype.atype d, a`) into `Cvt`; None for
    another form."""
    if len(ops) != 2 or len(parts) < 3:
        return None
    dtype, atype = SCALAR.get(parts[-2]), SCALAR.get(parts[-1])
    if dtype is None or atype is None or dtype.value.endswith("x2") or \
            atype.value.endswith("x2"):
        return None
    rnd, ftz, sat = None, False, False
    for q in parts[1:-2]:
        if q == "ftz":
            ftz = True
        elif q == "sat":
            sat = True
        elif q in _RND and rnd is None:
            rnd = _RND[q]
        else:
            return None
    return Cvt(dtype, atype, ops[0], ops[1], rnd, ftz, sat)
