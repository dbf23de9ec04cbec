"""nvcc's `.param` calling convention, bound across an inlined call.

A non-inlined device function takes its arguments and gives its result through `.param`
space: the caller declares `.param .b64 param0;` (or a byte array, `.param .align 8 .b8
param0[16];`, for a struct), stores each argument with `st.param` just before `call.uni
(retval0), fn, (param0, ...)` and loads the result with `ld.param [retval0+0]` just after;
the callee loads its parameters with `ld.param [fn_param_0+8]` and stores its result with
`st.param [func_retval0+0]` before `ret`. `calls.py` splices the callee into the caller, so
each load of an element some store wrote can read the stored register instead: a `mov`. An
element is bound only where the load's offset and width match one store exactly and the
stored register still holds the value (no write between); anything else stays a load, whose
value the analysis does not know, as before.
"""

from __future__ import annotations

from typing import Any

from ..errors import PtxdslError
from ..instructions.control import Ret
from ..instructions.memory import Ld
from ..instructions.move import Mov
from ..operands import Addr, Reg, Vec
from ..statements import Statement
from ..types import ScalarType, StateSpace
from .items import Directive, Raw, RawOperand

# name -> offset -> (bytes, register): what the `.param` variable holds where it is known.
Elements = dict[str, dict[int, tuple[int, Reg]]]


def _name(addr: object) -> str | None:
    """The `.param` variable an address names (`[param0+8]`, `[fn_param_0]`)."""
    if not isinstance(addr, Addr) or not isinstance(addr.offset, int):
        return None
    return getattr(addr.base, "name", None)


def _items(value: object) -> tuple:
    return tuple(value.items) if isinstance(value, Vec) else (value,)


def _store(item: object) -> tuple[str, int, int, tuple] | None:
    """`st.param{.vN}.type [name+off], value` as (name, offset, element bytes, elements)."""
    if type(item) is not Statement or type(item.insn) is not Raw or item.guard is not None:
        return None
    insn = item.insn
    parts = insn.op.split(".")
    if parts[:2] != ["st", "param"] or len(insn.srcs) != 2:
        return None
    name = _name(insn.srcs[0])
    try:
        size = ScalarType(parts[-1]).bits // 8
    except ValueError:
        return None
    if name is None:
        return None
    return name, insn.srcs[0].offset, size, _items(insn.srcs[1])


def _is_directive(item: object) -> bool:
    return type(item) is Statement and type(item.insn) is Directive


def _is_call(item: object) -> bool:
    return type(item) is Statement and type(item.insn) is Raw and item.insn.op.startswith("call")


def _param_load(item: object) -> Ld | None:
    if type(item) is Statement and item.guard is None and isinstance(item.insn, Ld) and \
            item.insn.space is StateSpace.param:
        return item.insn
    return None


class ParamStores:
    """What the `.param` variables of one call sequence hold, as the statements go by."""

    def __init__(self, elements: Elements | None = None):
        self.elements: Elements = elements or {}

    def clear(self) -> None:
        """Forget every stored element."""
        self.elements = {}

    def forget(self, item: object) -> None:
        """Forget everything at a statement that is not a directive (the return values are
        read right after their call: a later call, even one not inlined, writes them anew)."""
        if not _is_directive(item):
            self.clear()

    def see(self, item: object) -> None:
        """Record a `st.param`; forget everything at any other statement that is not a
        directive or the call (a register stored may be written again, or paths join)."""
        got = _store(item)
        if got is not None:
            name, offset, size, values = got
            slots = self.elements.setdefault(name, {})
            for k, v in enumerate(values):
                if isinstance(v, Reg):
                    slots[offset + k * size] = (size, v)
                else:
                    slots.pop(offset + k * size, None)
        elif not (_is_directive(item) or _is_call(item)):
            self.clear()

    def bind(self, item: Any, renamed: dict[str, str] | None = None) -> list:
        """`item` as one `mov` per element from the stored registers where it is an
        `ld.param` of known elements (all of them, or it stays the load); `[item]`
        otherwise."""
        ld = _param_load(item)
        name = _name(ld.a) if ld is not None else None
        if ld is None or name is None or not isinstance(ld.a, Addr):
            return [item]
        slots = self.elements.get((renamed or {}).get(name, name), {})
        size = ld.type.bits // 8
        moves = []
        for k, d in enumerate(_items(ld.d)):
            got = slots.get(ld.a.offset + k * size)
            if got is None or got[0] != size or not isinstance(d, Reg):
                return [item]
            try:
                moves.append(Statement(Mov(ld.type, d, got[1]), None, item.loc))
            except PtxdslError:
                return [item]
        return moves


def _list_names(op: object) -> list[str]:
    if not isinstance(op, RawOperand):
        return []
    return [x.strip() for x in op.text.strip().strip("()").split(",") if x.strip()]


def _call_lists(call: Raw) -> tuple[list[str], list[str]]:
    """The names of a call's return list and argument list (`(retval0)`, `(param0, ...)`)."""
    rets = _list_names(call.d[0]) if call.d else []
    lists = [op for op in call.srcs if isinstance(op, RawOperand) and op.text.strip()
             .startswith("(")]
    return rets, (_list_names(lists[-1]) if lists else [])


def bind_arguments(callee: Any, body: list, call: Raw, args: ParamStores) -> list:
    """The callee's body (this call site's copy) with each `ld.param` of its prologue (before
    any other statement or label, as nvcc places them) that reads what the caller stored made
    a `mov` (the callee's registers are its own objects, distinct from the caller's). Every
    other load of one of its parameters becomes opaque (`_opaque`)."""
    names = _call_lists(call)[1]
    own = {p.name for p in callee.params}
    if not args.elements or len(names) != len(callee.params):
        return [_opaque(x, own) for x in body]
    renamed = {p.name: a for p, a in zip(callee.params, names, strict=True)}
    out: list = []
    for i, item in enumerate(body):
        ld = _param_load(item)
        if ld is None and not _is_directive(item):
            return out + [_opaque(x, own) for x in body[i:]]
        out.extend(_opaque(x, own) for x in args.bind(item, renamed))
    return out


def _opaque(item: Any, params: set[str]) -> Any:
    """A load of a `.func` parameter left unbound, as a statement whose result is unknown:
    read as a load it would be taken for a kernel parameter's value (a host pointer)."""
    insn = getattr(item, "insn", None)
    if type(item) is not Statement or not isinstance(insn, Ld) or \
            insn.space is not StateSpace.param or _name(insn.a) not in params:
        return item
    dests = tuple(r for r in _items(insn.d) if isinstance(r, Reg))
    return Statement(Raw(insn.render().rstrip(";"), insn.opcode(), dests, ()), item.guard,
                     item.loc)


def _is_ret(item: object) -> bool:
    if type(item) is not Statement:
        return False
    return isinstance(item.insn, Ret) or (type(item.insn) is Raw and
                                          item.insn.op.split(".")[0] == "ret")


def returned_values(callee: Any, body: list, call: Raw) -> ParamStores:
    """What the call's return parameters hold after it: the registers the callee stored into
    its `func_retval` parameters where it has one `ret` and the stores are the last
    statements before it (no label between, so every path that returns passes them)."""
    rets = _call_lists(call)[0]
    if not rets or len(rets) != len(callee.returns):
        return ParamStores()
    ends = [i for i, item in enumerate(body) if _is_ret(item)]
    if len(ends) != 1 or body[ends[0]].guard is not None:
        return ParamStores()
    renamed = {p.name: r for p, r in zip(callee.returns, rets, strict=True)}
    elements: Elements = {}
    for item in reversed(body[:ends[0]]):
        got = _store(item)
        if got is not None and got[0] in renamed:
            name, offset, size, values = got
            slots = elements.setdefault(renamed[name], {})
            for k, v in enumerate(values):
                # Walking backwards: a later store of the same element has already won.
                if isinstance(v, Reg):
                    slots.setdefault(offset + k * size, (size, v))
        elif not _is_directive(item):
            break
    return ParamStores(elements)


__all__ = ["ParamStores", "bind_arguments", "returned_values"]
