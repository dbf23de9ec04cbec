"""cuda::ptx's argument conventions, shared by every cuda::ptx-named builder.

The convention (docs/CONTRIBUTING.md, "cuda::ptx-named builders"):

- Positional arguments after the kernel are cuda::ptx's, in cuda::ptx's order and meaning, one
  overload at a time; the same arguments may be given by keyword (cuda::ptx's parameter names in
  snake_case: `tm_addr`, `new_val`, `tx_count`, `dst_mem`, `smem_bar`, ...). `bind()` picks the
  overload and says how to write the call when none fits.
- A name means the same in every family. As a state space: 'shared' (cuda::ptx `space_shared`)
  is the executing CTA's shared memory, `.shared::cta`; 'cluster' (`space_cluster`) is
  `.shared::cluster`; 'global' (`space_global`) is `.global`; 'generic' (a ptxdsl extension) is
  the generic form. Scopes 'cta', 'cluster', 'gpu', 'sys' (`scope_*`); semantics 'release',
  'acquire', 'relaxed', 'acq_rel', 'sc' (`sem_*`). cuda::ptx's tag spellings ('space_shared',
  'scope_gpu', 'sem_release', 'op_add', 'op_and_op', 'cta_group_1') and the PTX spellings
  ('shared::cta', '.gpu') are accepted too, as are the constants `ptxdsl.ptx` exports
  (`ptx.space_shared`, `ptx.scope_gpu`, `ptx.sem_release`, ...).
- Bare `.shared` is emitted only where cuda::ptx emits it (the overloads of mbarrier_init,
  mbarrier_arrive(addr), ... that take no space tag) or where the enum member
  `StateSpace.shared` (PTX's bare qualifier, not a name) is passed to a form that has it.
- Addresses (`space_addr`): a symbol or a register already in the instruction's space is used as
  it is; a generic address (a register from `cvta` to generic, a loaded pointer parameter, or the
  pointer parameter itself) is converted with `cvta.to.<space>` first, as cuda::ptx converts its
  C++ pointers; an address known to be in another space is refused. A register with no space
  hint is taken as generic for a .global operand (global addresses come from pointers) and as a
  window offset for a shared one (as `k.mov` of a shared symbol gives).
"""

from __future__ import annotations

import enum
import inspect
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from ..errors import BuildError, OperandError
from ..operands import Addr, Reg, Symbol
from ..types import MAX_CLUSTER_CTAS, Scope, Sem, StateSpace
from .base import _given, check_enum

S = StateSpace

# cuda::ptx's tag constants (re-exported by ptxdsl.ptx): `ptx.space_shared` etc.
space_shared, space_cluster, space_global = S.shared_cta, S.shared_cluster, S.global_
scope_cta, scope_cluster, scope_gpu, scope_sys = Scope.cta, Scope.cluster, Scope.gpu, Scope.sys
sem_release, sem_acquire, sem_relaxed = Sem.release, Sem.acquire, Sem.relaxed
sem_acq_rel, sem_sc = Sem.acq_rel, Sem.sc
TAGS = ("space_shared", "space_cluster", "space_global", "scope_cta", "scope_cluster",
        "scope_gpu", "scope_sys", "sem_release", "sem_acquire", "sem_relaxed", "sem_acq_rel",
        "sem_sc")

# -- names ----------------------------------------------------------------------------------------
SPACE_NAMES: dict[str, StateSpace] = {
    "shared": S.shared_cta, "shared::cta": S.shared_cta, "space_shared": S.shared_cta,
    "cluster": S.shared_cluster, "shared::cluster": S.shared_cluster,
    "space_cluster": S.shared_cluster,
    "global": S.global_, "space_global": S.global_,
    "generic": S.generic, "": S.generic,
    "param": S.param, "const": S.const, "local": S.local,
}

# The name a message suggests for each space (every suggestion is accepted by `space`).
SPACE_SPELLING: dict[StateSpace, str] = {
    S.shared_cta: "shared", S.shared: "shared", S.shared_cluster: "cluster",
    S.global_: "global", S.generic: "generic", S.param: "param", S.const: "const",
    S.local: "local",
}


def space_name(sp: StateSpace) -> str:
    """How to write `sp` as a builder argument, with its PTX spelling: "'shared' (.shared::cta)"."""
    ptx = sp.ptx if sp is not S.shared else ".shared::cta"
    return f"'{SPACE_SPELLING[sp]}' ({ptx or 'generic'})"


def space(insn: str, operand: str, value: Any, allowed: Sequence[StateSpace]) -> StateSpace:
    """A state-space argument in any accepted spelling (see the module doc), one of `allowed`.

    Names (strings, cuda::ptx tags, `ptx.space_shared`) never mean bare .shared; the enum
    member `StateSpace.shared` is PTX's bare qualifier, for the forms that have it.
    """
    sp: StateSpace | None = None
    if isinstance(value, StateSpace):
        sp = value
    elif isinstance(value, str):
        sp = SPACE_NAMES.get(value.lstrip("."))
    if sp is None or sp not in allowed:
        names = ", ".join(space_name(a) for a in dict.fromkeys(
            S.shared_cta if a is S.shared else a for a in allowed))
        raise OperandError(insn, operand, f"one of {names}", _given(value))
    return sp


def _tagged(prefix: str, cls: type[enum.Enum], value: Any) -> Any:
    if isinstance(value, str):
        text = value.lstrip(".")
        if text.startswith(prefix):
            text = text[len(prefix):]
        return text
    return value


def scope(insn: str, value: Any, allowed: Sequence[Scope] | None = None,
          operand: str = "scope") -> Scope:
    """'cta' | 'cluster' | 'gpu' | 'sys', or cuda::ptx's scope_* tag spelling, or a Scope."""
    return check_enum(insn, operand, _tagged("scope_", Scope, value), Scope,
                      tuple(allowed) if allowed is not None else None)


def sem(insn: str, value: Any, allowed: Sequence[Sem] | None = None,
        operand: str = "sem") -> Sem:
    """'release' | 'acquire' | 'relaxed' | ..., or cuda::ptx's sem_* tag spelling, or a Sem."""
    return check_enum(insn, operand, _tagged("sem_", Sem, value), Sem,
                      tuple(allowed) if allowed is not None else None)


def op(insn: str, value: Any, cls: type[enum.Enum], operand: str = "op") -> Any:
    """A reduction op: 'add', cuda::ptx's 'op_add' / 'op_and_op' spellings, or the enum."""
    if isinstance(value, str):
        text = value.lstrip(".")
        if text.startswith("op_"):
            text = text[3:]
        if text.endswith("_op"):       # cuda::ptx: op_and_op, op_or_op, op_xor_op
            text = text[:-3]
        value = text
    return check_enum(insn, operand, value, cls)


def is_space(value: Any) -> bool:
    """Whether `value` spells a state space (an enum member or one of SPACE_NAMES)."""
    return isinstance(value, StateSpace) or (isinstance(value, str)
                                             and value.lstrip(".") in SPACE_NAMES)


# -- overloads ------------------------------------------------------------------------------------
_F = TypeVar("_F", bound=Callable[..., Any])
OVERLOADS = "__ptx_overloads__"


def overloads(*table: Sequence[str], extra: Sequence[str] = ()) -> Callable[[_F], _F]:
    """Record a builder's overloads, for the typed stub `ptxdsl/ptx.pyi` (generated from them
    by `tools/ptx_stub.py`) and for `inspect.signature` and `help()` (`describe`).

    `table` is in `bind`'s notation ('*name': optional keyword-only), plus '=name' for a
    required keyword-only argument and '/name' for a positional-only one; `extra` is appended
    to every overload (a result register `*dst`, `*type`). A builder whose arguments bind()
    binds records bind's table (plus the forms of its own keywords, such as `rank=`):
    tests/test_ptx_types.py calls each overload the stub shows and checks that bind() takes
    its names.
    """
    def mark(fn: _F) -> _F:
        setattr(fn, OVERLOADS, tuple((*o, *extra) for o in table))
        return fn
    return mark


def signatures(fn: Callable[..., Any]) -> list[inspect.Signature] | None:
    """The overloads `overloads` recorded on `fn` as signatures (names, kinds, defaults and
    `fn`'s return annotation; the parameter types are in ptx.pyi), None when it has none."""
    table = getattr(fn, OVERLOADS, None)
    if table is None:
        return None
    P = inspect.Parameter
    kinds = {"*": P.KEYWORD_ONLY, "=": P.KEYWORD_ONLY, "/": P.POSITIONAL_ONLY}
    code = inspect.unwrap(fn).__code__     # the kernel's name (inspect.signature: slower)
    first = code.co_varnames[0]
    result = []
    for entry in table:
        params = []
        for spec in entry:
            mark, name = (spec[0], spec[1:]) if spec[0] in kinds else ("", spec)
            params.append(P(name, kinds.get(mark, P.POSITIONAL_OR_KEYWORD),
                            default=None if mark == "*" else P.empty))
        # the kernel comes first, by position when the others are
        k_kind = params[0].kind if params and params[0].kind is P.POSITIONAL_ONLY else \
            P.POSITIONAL_OR_KEYWORD
        result.append(inspect.Signature(
            [P(first, k_kind), *params],
            return_annotation=fn.__annotations__.get("return", inspect.Signature.empty)))
    return result


def describe(name: str, fn: Callable[..., Any]) -> None:
    """Show a builder's recorded overloads to `inspect` and `help()` (so to Sphinx too): one
    is its `__signature__`; several are its docstring's first lines, one signature each, the
    form autodoc reads as overloads."""
    forms = signatures(fn)
    if forms is None:
        return
    if len(forms) == 1:
        # inspect reads this attribute of any callable; typeshed's Callable does not declare it
        fn.__signature__ = forms[0]  # type: ignore[attr-defined]
    else:
        ret = forms[0].return_annotation     # as written, not quoted as repr() quotes it
        tail = "" if ret is inspect.Signature.empty else f" -> {ret}"
        lines = [f"{name}{s.replace(return_annotation=inspect.Signature.empty)}{tail}"
                 for s in forms]
        # cleaned first: its own first line is not indented, the rest is
        fn.__doc__ = "\n".join(lines) + "\n\n" + inspect.cleandoc(fn.__doc__ or "")


def _signature(names: Sequence[str]) -> str:
    shown = [n for n in names if not n.startswith("*")]
    extra = [n[1:] + "=" for n in names if n.startswith("*")]
    return "(" + ", ".join(["k", *shown, *extra]) + ")"


def bind(insn: str, args: Sequence[Any], kwargs: dict[str, Any],
         overloads: Sequence[Sequence[str]]) -> tuple[int, dict[str, Any]]:
    """Match a call against cuda::ptx's overloads; returns (overload index, {name: value}).

    Each overload is a tuple of parameter names in cuda::ptx's order; a name starting with '*'
    is an optional keyword-only ptxdsl extension; a keyword (or trailing positional) given as
    None counts as left out.
    As in Python, positional arguments fill the
    first names in order and keywords the rest. Exactly one overload must fit (one reached
    without extensions beats one that needs them); otherwise the error lists them all.
    """
    kwargs = {n: v for n, v in kwargs.items() if v is not None}   # None: not given
    args = list(args)
    while args and args[-1] is None:          # an optional trailing argument passed as None
        args.pop()
    fits: list[tuple[int, dict[str, Any]]] = []
    for i, names in enumerate(overloads):
        plain = [n for n in names if not n.startswith("*")]
        known = set(plain) | {n[1:] for n in names if n.startswith("*")}
        if not set(kwargs) <= known:
            continue
        head, rest = plain[:len(args)], plain[len(args):]
        if len(head) != len(args) or set(head) & set(kwargs) or not set(rest) <= set(kwargs):
            continue
        bound = dict(kwargs)
        bound.update(zip(head, args, strict=True))
        fits.append((i, bound))
    if len(fits) > 1:   # a cuda::ptx overload beats one reached through ptxdsl extensions
        least = min(sum(n.startswith("*") and n[1:] in kwargs for n in overloads[i])
                    for i, _ in fits)
        fits = [(i, b) for i, b in fits
                if sum(n.startswith("*") and n[1:] in kwargs for n in overloads[i]) == least]
    if len(fits) == 1:
        return fits[0]
    forms = "; ".join(insn.split(".")[0] + _signature(o) for o in overloads)
    given = ", ".join(["k", *("_" for _ in args), *(f"{n}=" for n in kwargs)])
    if not fits:
        raise BuildError(f"{insn}: no cuda::ptx overload takes ({given}); the overloads, "
                         f"in cuda::ptx's argument order, are: {forms}")
    raise BuildError(f"{insn}: ({given}) fits more than one overload; name the arguments by "
                     f"keyword: {forms}")


# -- addresses ------------------------------------------------------------------------------------
def _base(addr: Any) -> Any:
    return addr.base if isinstance(addr, Addr) else addr


def is_generic_pointer(addr: Any) -> bool:
    """A pointer parameter, or a register known to hold a generic address."""
    base = _base(addr)
    if isinstance(base, Symbol):
        return getattr(base, "kind", None) == "pointer"
    return isinstance(base, Reg) and base.space is S.generic


def space_addr(k, insn: str, addr: Any, sp: StateSpace) -> Any:
    """An address for an operand in space `sp` (see the module doc): a generic pointer is
    converted with `cvta.to.<sp>` (loaded first when it is a pointer parameter); anything else
    is returned as given, for the instruction's own check."""
    base = _base(addr)
    # Global addresses come from pointers, so an unhinted 64-bit register is taken as generic
    # (converting a global address again is harmless); a shared one is a window offset.
    unhinted_global = (sp is S.global_ and isinstance(base, Reg) and base.space is None
                       and base.type.bits == 64)
    if sp is S.generic or sp is S.param or not (is_generic_pointer(addr) or unhinted_global):
        return addr
    off = addr.offset if isinstance(addr, Addr) else 0
    if isinstance(base, Symbol):
        # `.ptr .shared p` says where p points: cvta.to.global of it would be another address
        pointee = getattr(base, "ptr_space", None)
        if pointee is not None and pointee is not sp and not (pointee.is_shared
                                                                and sp.is_shared):
            raise OperandError(insn, "addr", f"a pointer to .{sp.value} memory",
                               f"pointer parameter {base.name} declared .ptr .{pointee.value}")
        base = k.ld_param(base)
    if base.type.bits != 64:
        raise OperandError(insn, "addr", "a 64-bit register for a generic address",
                           _given(base))
    # cvta.to.shared (not ::cta) is what cuda::ptx's __as_ptr_smem compiles to.
    base = k.cvta(base, S.shared if sp is S.shared_cta else sp, to=True)
    return Addr(base, off) if off else base


def cluster_size(k: Any) -> int | None:
    """The number of CTAs in the kernel's cluster when it declares it (`.reqnctapercluster`, or
    the `.maxclusterrank` bound); None when only the launch decides."""
    dims = getattr(k, "reqnctapercluster", None)
    if dims:
        n = 1
        for d in dims:
            n *= d
        return n
    bound = getattr(k, "maxclusterrank", None)
    return bound if isinstance(bound, int) and bound > 0 else None


def _declared(k: Any) -> str:
    dims = getattr(k, "reqnctapercluster", None)
    return (f".reqnctapercluster {tuple(dims)}" if dims
            else f".maxclusterrank {getattr(k, 'maxclusterrank', None)}")


def cluster_rank(k: Any, insn: str, operand: str, value: Any) -> None:
    """A constant CTA rank must name a CTA of the kernel's declared cluster, or of any
    cluster (below 16) when the launch decides its size."""
    from ..operands import Imm
    n = cluster_size(k)
    v = value.value if isinstance(value, Imm) else value
    if type(v) is not int or 0 <= v < (n or MAX_CLUSTER_CTAS):
        return
    if n is None:
        raise OperandError(insn, operand, f"a CTA rank in [0, {MAX_CLUSTER_CTAS - 1}] (no "
                           f"cluster has more than {MAX_CLUSTER_CTAS} CTAs; declare the "
                           "kernel's cluster with reqnctapercluster to check against its size)",
                           v)
    raise OperandError(insn, operand, f"a CTA rank in [0, {n - 1}] (the kernel declares "
                       f"{_declared(k)}: {n} CTAs per cluster)", v)


def cluster_mask(k: Any, insn: str, operand: str, value: Any) -> None:
    """A constant ctaMask may only have bits for CTAs of the kernel's declared cluster."""
    from ..operands import Imm
    n = cluster_size(k)
    v = value.value if isinstance(value, Imm) else value
    if n is None or type(v) is not int or v >> n == 0:
        return
    raise OperandError(insn, operand, f"a mask of bits 0..{n - 1} (the kernel declares "
                       f"{_declared(k)}: {n} CTAs per cluster; bit i is the CTA of rank i)",
                       hex(v))
