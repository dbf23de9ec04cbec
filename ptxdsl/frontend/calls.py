"""Calls to `.func` helpers, inlined for the analysis.

The checker reasons about one body; a helper that waits on an mbarrier or issues a TMA copy
must count at its call sites. `analysis_body` splices each called function's body (defined in
the same module) after its `call` statement: the callee's labels and registers get one copy
per call site (`regcopy.py`: a register written at every site would be known at none),
its `ret` becomes a branch to the end of the spliced body, and a guarded call is skipped
around by a branch on the negated guard. A callee's `.reg` parameters (`.func (.reg .f32 out)
f(.reg .b32 addr)`, as hand-written helpers take them) are registers of its body: the spliced
body starts with a `mov` of each register argument of the call into its parameter and ends
with a `mov` of each returned register into the call's destination, so what the helper reads
through `addr` (a `mapa` of a shared address) and what it returns are known at the call.
nvcc's `.param` arguments are bound the same way (`params.py`): each `ld.param` of the callee's
prologue that reads an element the caller stored with `st.param` just before the call becomes
a `mov` from the stored register, and each `ld.param` of the call's return value a `mov` from
the register the callee stored into its `func_retval` before its single `ret`; an element
whose offset or width does not match one stored stays a load (unknown, never guessed).
Recursion and calls through pointers stay calls. The emitted program is never changed: this
is the checker's view only.
"""

from __future__ import annotations

import itertools
from typing import Any, cast

import attrs

from ..errors import PtxdslError
from ..instructions.control import Bra, Ret
from ..instructions.move import Mov
from ..operands import Label, NegPred, Reg, Symbol
from ..statements import LabelDef, Statement
from .items import Raw, RawOperand, ScopedLabel
from .params import ParamStores, bind_arguments, returned_values
from .regcopy import RegCopy

MAX_DEPTH = 8


def callee_name(insn: Raw) -> str | None:
    """The function a `call` names (None for a call through a register)."""
    for op in insn.srcs:
        if isinstance(op, Symbol):
            return op.name
        if isinstance(op, RawOperand) and op.text.isidentifier():
            return op.text
    return None


def analysis_body(fn: Any, functions: dict[str, Any]) -> list:
    """`fn.body` with the calls to `functions` (name -> ParsedFunction) inlined."""
    counter = itertools.count()
    return _inline(fn.body, functions, (fn.name,), counter)


def _inline(body: list, functions: dict[str, Any], stack: tuple[str, ...], counter) -> list:
    out: list = []
    args = ParamStores()
    returned = ParamStores()
    for item in body:
        bound = returned.bind(item)
        if bound != [item]:
            out.extend(bound)
            args.clear()
            continue
        returned.forget(item)
        out.append(item)
        args.see(item)
        if type(item) is not Statement or type(item.insn) is not Raw or \
                not item.insn.op.startswith("call"):
            continue
        callee = functions.get(callee_name(item.insn) or "")
        if callee is None or callee.name in stack or len(stack) > MAX_DEPTH:
            args.clear()
            continue
        n = next(counter)
        end = ScopedLabel(f"{callee.name}$ret{n}", shown=f"{callee.name}$ret")
        if item.guard is not None:
            skip = item.guard.reg if isinstance(item.guard, NegPred) else NegPred(item.guard)
            out.append(Statement(Bra(end), skip, item.loc))
        regs = RegCopy()
        own = [regs.statement(x) for x in callee.body]
        inner = _inline(bind_arguments(callee, own, item.insn, args), functions,
                        stack + (callee.name,), counter)
        returned = returned_values(callee, own, item.insn)
        args.clear()
        ins, outs = _moves(item, callee, regs)
        out.extend(ins)
        out.extend(_rename(inner, n, end))
        out.append(LabelDef(end, item.loc))
        out.extend(outs)
    return out


def _moves(call: Statement, callee: Any, copies: RegCopy) -> tuple[list, list]:
    """The `mov` statements that pass a call's register arguments into the callee's `.reg`
    parameters, and its `.reg` returns back into the call's destinations (none where a list
    is not all registers, as nvcc's `.param` arguments are, or a register's type does not
    fit)."""
    insn = cast(Raw, call.insn)
    lists = [op for op in (*insn.d, *insn.srcs) if isinstance(op, RawOperand)]
    rets = lists[0] if insn.d and lists else None
    args = lists[-1] if lists and lists[-1] is not rets else None
    moves: tuple[list, list] = ([], [])
    for side, params, given in ((0, callee.params, args), (1, callee.returns, rets)):
        if given is None:
            continue
        regs = [r for r in given.regs if isinstance(r, Reg)]
        if not regs or len(regs) != len(params) or \
                len(regs) != len(given.text.strip("()").split(",")):
            continue
        for p, r in zip(params, regs, strict=True):
            own = callee.reg_params.get(p.name)
            if own is None:
                continue
            own = copies.reg(own)
            d, a = (own, r) if side == 0 else (r, own)
            try:
                moves[side].append(Statement(Mov(p.type, d, a), None, call.loc))
            except PtxdslError:
                continue
    return moves


def _rename(body: list, n: int, end: Label) -> list:
    """The callee's labels renamed for this call site; `ret` jumps to `end`."""
    names: dict[str, Label] = {}

    def fresh(label: Label) -> Label:
        new = names.get(label.name)
        if new is None:
            new = names[label.name] = ScopedLabel(f"{label.name}$c{n}", shown=label.render())
        return new

    out: list = []
    for item in body:
        if type(item) is LabelDef:
            out.append(LabelDef(fresh(item.label), item.loc))
            continue
        insn = item.insn
        if isinstance(insn, Ret):
            out.append(Statement(Bra(end), item.guard, item.loc))
        elif isinstance(insn, Bra):
            out.append(Statement(attrs.evolve(insn, target=fresh(insn.target)), item.guard,
                                 item.loc))
        elif type(insn) is Raw and insn.op.split(".")[0] in ("ret", "bra"):
            # Without the control-flow readers a raw branch is opaque: keep it (the analysis
            # sees no edge), as it would in the caller.
            out.append(item)
        else:
            out.append(item)
    return out


__all__ = ["analysis_body", "callee_name"]
