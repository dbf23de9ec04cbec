"""Which statements write which registers, and which registers an instruction reads.

Instructions keep their results in fields named like `DEST_FIELDS` (`d`, `p`, `q`, `state`,
`pred`, inline PTX's `outs`); every other register operand is a source. `Defs` indexes the
writes of a whole kernel body in a few C-speed passes: it is the only part of the checker
whose cost grows with every instruction, and it runs at every emit of a TMA kernel.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Sequence
from typing import Any

import attrs

from ..instructions.base import DEST_FIELDS
from ..operands import Addr, NegPred, Reg, Vec

_FIELDS: dict[type, tuple[tuple[str, ...], tuple[str, ...]]] = {}


def _class_fields(cls: type) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(result fields, operand fields) of an instruction class (cached per class)."""
    names = _FIELDS.get(cls)
    if names is None:
        every = tuple(f.name for f in attrs.fields(cls))
        names = _FIELDS[cls] = (tuple(n for n in every if n in DEST_FIELDS),
                                tuple(n for n in every if n not in DEST_FIELDS))
    return names


def _fields(insn: Any) -> tuple[tuple[str, ...], tuple[str, ...]]:
    return _class_fields(type(insn))


def _regs(value: Any) -> Iterable[Reg]:
    if isinstance(value, Reg):
        yield value
    elif isinstance(value, NegPred):
        yield value.reg
    elif isinstance(value, Addr):
        if isinstance(value.base, Reg):
            yield value.base
    elif isinstance(value, Vec | tuple | list):
        for item in (value.items if isinstance(value, Vec) else value):
            yield from _regs(item)
    elif hasattr(value, "tensormap") and hasattr(value, "coords"):  # a [map, {coords}] operand
        yield from _regs(value.tensormap)
        yield from _regs(value.coords)


def dests(insn: Any) -> list[Reg]:
    """The registers an instruction writes."""
    out: list[Reg] = []
    for name in _fields(insn)[0]:
        v = getattr(insn, name)
        if isinstance(v, Reg):
            out.append(v)
        elif isinstance(v, Vec | tuple):
            out.extend(r for r in (v.items if isinstance(v, Vec) else v) if isinstance(r, Reg))
    return out


def sources(insn: Any) -> list[Reg]:
    """The registers an instruction reads (every register operand outside its results)."""
    out: list[Reg] = []
    for name in _fields(insn)[1]:
        v = getattr(insn, name)
        if isinstance(v, Reg):   # the common case, without a generator
            out.append(v)
        elif v is not None and not isinstance(v, int | str | enum.Enum):
            out.extend(_regs(v))
    return out


class Defs:
    """Which statements write each register, found in a few C-speed passes: this is the only
    work proportional to the whole body, and it runs at every emit of a TMA kernel.

    Most instructions write one `d`; those are gathered by one comprehension, and only the
    registers written more than once get a list built for them.
    """

    def __init__(self, insns: Sequence[Any]):
        classes = set(map(type, insns))
        classes.discard(type(None))
        names = {c: _class_fields(c)[0] for c in classes}
        only_d = {c for c, n in names.items() if n == ("d",)}
        other = {c for c, n in names.items() if n and n != ("d",)}
        at = [i for i, insn in enumerate(insns) if type(insn) in only_d]
        regs = [insns[i].d for i in at]
        for i in [i for i, insn in enumerate(insns) if type(insn) in other]:
            for r in dests(insns[i]):
                regs.append(r)
                at.append(i)
        self._last: dict[Any, int] = dict(zip(regs, at, strict=True))
        self._multi: dict[Any, list[int]] = {}
        if len(self._last) != len(regs):      # some register is written more than once
            last = self._last
            multi = {r for r, i in zip(regs, at, strict=True) if last[r] != i}
            for r, i in [(r, i) for r, i in zip(regs, at, strict=True) if r in multi]:
                self._multi.setdefault(r, []).append(i)
        if Vec in set(map(type, regs)):       # ld.v2/.v4 and friends write each lane
            for v, i in [(v, i) for v, i in zip(regs, at, strict=True) if type(v) is Vec]:
                self._last.pop(v, None)
                self._multi.pop(v, None)
                for item in v.items:
                    if type(item) is Reg:
                        self._add(item, i)

    def _add(self, reg: Reg, i: int) -> None:
        if reg in self._multi:
            self._multi[reg].append(i)
        elif reg in self._last:
            self._multi[reg] = [self._last.pop(reg), i]
        else:
            self._last[reg] = i

    def get(self, reg: Any, default: Sequence[int] = ()) -> Sequence[int]:
        hit = self._multi.get(reg)
        if hit is not None:
            return hit
        i = self._last.get(reg)
        return default if i is None else [i]
