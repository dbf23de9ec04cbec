"""tcgen05 instructions as checker ops, read from their PTX opcode and operands.

The builders' classes (`instructions/tcgen05*.py`), parsed text the front end kept as `Raw`,
and inline PTX (`k.asm`) all come down to one opcode string and its operands in ISA order,
so one reader serves the three: `tcgen05_ops`. The rules live in `hazards_tmem`.
"""

from __future__ import annotations

import importlib
import pkgutil
import re
from pathlib import Path
from typing import Any

from ..instructions import base
from ..instructions.base import Instruction
from ..operands import Addr
from .ops import Op, Role

# The modules whose classes may be tcgen05 instructions: every `instructions/tcgen05*.py`
# (found by name, so a family split into another file is still read).
FAMILY_PREFIX = "tcgen05"
_ASYNC = frozenset({"mma", "cp", "shift", "ld", "st"})
# The operands (ISA order) that are shared-memory matrix descriptors, read through the async
# proxy (`hazards_proxy`): tcgen05.mma and .mma.ws `[d_tmem], a_desc|[a_tmem], b_desc, ...`
# (an A in tensor memory is skipped; the sparse metadata and block scales are TMEM
# addresses, later operands), tcgen05.cp `[taddr], s_desc`.
SMEM_DESCS = {"mma": (1, 2), "cp": (1,)}


def tcgen05_ops(opcode: str, operands: tuple, i: int,
                in_brackets: frozenset[int] = frozenset()) -> list[Op]:
    """The op of one tcgen05 instruction (`opcode` dotted, `operands` in ISA order); [] for
    any other opcode. `in_brackets`: the positions written `[...]` whose operand came without
    its Addr (an inline template's `[$1]`): tensor-memory addresses, not descriptors."""
    parts = opcode.split(".")
    if parts[0] != "tcgen05" or len(parts) < 2:
        return []
    what = parts[1]
    group = next((p[len("cta_group::"):] for p in parts if p.startswith("cta_group::")), "")
    cg = int(group) if group.isdigit() else None
    first = operands[0] if operands else None
    if what == "alloc":
        return [Op(Role.TC_ALLOC, i, smem=first, n=cg,
                   count=operands[1] if len(operands) > 1 else None)]
    if what == "dealloc":
        return [Op(Role.TC_DEALLOC, i, value=first, n=cg)]
    if what == "relinquish_alloc_permit":
        return [Op(Role.TC_RELINQUISH, i, n=cg)]
    if what.startswith("fence::"):
        return [Op(Role.TC_FENCE, i, field="before" if "before" in what else "after")]
    if what.startswith("wait::"):
        return [Op(Role.TC_WAIT, i, field=what[len("wait::"):])]
    if what == "commit":
        return [Op(Role.TC_COMMIT, i, mbar=first, n=cg,
                   multicast=any(p.startswith("multicast") for p in parts))]
    if what in _ASYNC:
        # (tcgen05.ld writes its registers first; every other form names TMEM first)
        taddr = first if what != "ld" else next(
            (o for o in operands if isinstance(o, Addr)),
            operands[1] if len(operands) > 1 else None)
        descs = tuple(operands[p] for p in SMEM_DESCS.get(what, ())
                      if p < len(operands) and p not in in_brackets
                      and not isinstance(operands[p], Addr))
        return [Op(Role.TC_ASYNC, i, field=what, value=taddr, n=cg, descs=descs)]
    return []


def typed(insn: Any, i: int) -> list[Op]:
    """The op of a builder's tcgen05 instruction (any instruction class of a tcgen05 module)."""
    return tcgen05_ops(insn.opcode(), tuple(insn.operands()), i)


def raw(insn: Any, i: int) -> list[Op]:
    """The op of a tcgen05 instruction the front end kept as text (`Raw`)."""
    op = getattr(insn, "op", None)
    if not isinstance(op, str) or not op.startswith("tcgen05."):
        return []
    return tcgen05_ops(op, tuple(insn.d) + tuple(insn.srcs), i)


def classes() -> dict[type, Any]:
    """Class -> extractor for every tcgen05 instruction class of the families importable now."""
    out: dict[type, Any] = {}
    package = base.__name__.rpartition(".")[0]
    for info in pkgutil.iter_modules([str(Path(base.__file__).parent)]):
        if not info.name.startswith(FAMILY_PREFIX):
            continue
        try:
            family = importlib.import_module(f"{package}.{info.name}")
        except ImportError:
            continue
        for name in dir(family):
            klass = getattr(family, name)
            if isinstance(klass, type) and issubclass(klass, Instruction) \
                    and klass.__module__ == family.__name__:
                out[klass] = typed
    return out


# One tcgen05 instruction of an inline template: its opcode and its operand text.
_INLINE = re.compile(r"(?<![\w.%])(tcgen05\.[\w:.]+)\s*([^;]*);")
_PRED = re.compile(r"@!?%?\w+\s*$")


def _operand(text: str, bound: Any) -> Any:
    """A template operand: `$N` or `[$N]` bound to an operand, a literal int, else None."""
    m = re.fullmatch(r"\s*(\[)?\s*\$(\d+)\s*\]?\s*", text)
    if m is not None:
        n = int(m.group(2))
        return bound[n] if n < len(bound) else None
    t = text.strip()
    return int(t, 0) if re.fullmatch(r"-?(0x[0-9a-fA-F]+|\d+)", t) else None


def inline(text: str, bound: Any, i: int) -> list[tuple[int, Op]]:
    """The unpredicated tcgen05 instructions of an inline statement, with their positions
    (a predicated one may not run: the rules then see less, never a wrong order)."""
    out = []
    for m in _INLINE.finditer(text):
        if _PRED.search(text[:m.start()]):
            continue
        args = [a for a in re.split(r",(?![^{]*\})", m.group(2)) if a.strip()]
        operands = tuple(_operand(a, bound) for a in args)
        brackets = frozenset(n for n, a in enumerate(args) if a.strip().startswith("["))
        out += [(m.start(), op) for op in tcgen05_ops(m.group(1), operands, i, brackets)]
    return out
