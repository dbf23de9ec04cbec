"""Which statements write which registers, and which registers an instruction reads.

Instructions keep their results in fields named like `DEST_FIELDS` (`d`, `p`, `q`, `state`,
`pred`, inline PTX's `outs`); every other register operand is a source. `Defs` indexes the
writes of a whole kernel body in a few C-speed passes: it is the only part of the checker
whose cost grows with every instruction, and it runs at every emit of a TMA kernel.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

# dests/sources live with DEST_FIELDS in instructions/base.py, below the checker: the builder
# and ptxdsl.warpgroups read them too.
from ..instructions.base import _class_fields, dests
from ..operands import Reg, Vec, registers_in


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
        kinds = set(map(type, regs))
        if Vec in kinds or tuple in kinds:    # ld.v2/.v4 and friends write each lane; the
            # front end's Raw statements keep what they write as a tuple in `d`, which may
            # itself hold a vector (`mov.b64 {%r1, %r2}, %rd1` unpacks into two registers) or
            # `p|q`: every register in it, at any depth, is written.
            for v, i in [(v, i) for v, i in zip(regs, at, strict=True)
                         if type(v) is Vec or type(v) is tuple]:
                self._last.pop(v, None)
                self._multi.pop(v, None)
                for item in registers_in(v):
                    self._add(item, i)

    def _add(self, reg: Reg, i: int) -> None:
        if reg in self._multi:
            self._multi[reg].append(i)
        elif reg in self._last:
            self._multi[reg] = [self._last.pop(reg), i]
        else:
            self._last[reg] = i

    def multi(self) -> list[Any]:
        """The registers written more than once."""
        return list(self._multi)

    def get(self, reg: Any, default: Sequence[int] = ()) -> Sequence[int]:
        """The statements that define register `reg` and reach the current point: every write of a
        register written more than once, else its last write, else `default`."""
        hit = self._multi.get(reg)
        if hit is not None:
            return hit
        i = self._last.get(reg)
        return default if i is None else [i]
