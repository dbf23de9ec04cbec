"""`Kernel`: the builder a user writes kernels with.

The core (parameters, registers, shared memory, labels, guards, rendering) is in
`kernel_core`, structured control flow in `kernel_flow`; the instruction builder methods come
from the builder mixins in `ptxdsl/builders/` (one per instruction family).
"""

from __future__ import annotations

import inspect
from typing import TYPE_CHECKING

from .builders.arith import ArithOps
from .builders.atomic import AtomicOps
from .builders.compare import CompareOps
from .builders.control import ControlOps
from .builders.cvt_packed import PackedCvtOps
from .builders.inline import InlineOps
from .builders.matrix import MatrixOps
from .builders.memory import MemoryOps
from .builders.move import MoveOps
from .builders.prefetch import PrefetchOps
from .builders.sfu import SfuOps
from .builders.sync import SyncOps
from .builders.warp import WarpOps
from .errors import OperandError, fail_closed
from .fragments import FragmentOps
from .kernel_core import KernelCore
from .kernel_flow import StructuredFlow
from .operands import Arith, _show, as_int
from .statements import Param, Statement
from .types import ScalarType

__all__ = ["Kernel", "Param", "Statement"]


class Kernel(
    KernelCore, StructuredFlow, MoveOps, ArithOps, CompareOps, MemoryOps, PrefetchOps,
    ControlOps,
    SyncOps,
    AtomicOps,
    WarpOps,
    InlineOps,
    MatrixOps,
    PackedCvtOps,
    SfuOps,
    FragmentOps,
):
    """A `.visible .entry` function under construction.

    >>> k = Kernel("scale", reqntid=128)
    >>> out = k.param_ptr("out")
    """


# Introspection that never takes user operands, and `check`, whose context keywords are
# checked by the checker itself.
_UNGUARDED = frozenset({"check", "render", "statements", "requires", "distinct_requires",
                        "check_labels", "extern_shared_symbols"})
_TYPE_KEYWORDS = ("type", "dtype", "atype")
_TYPE_NAMES = frozenset(t.value for t in ScalarType)


def _check_addr_bits(kwargs) -> None:
    bits = kwargs.get("bits", 32)
    if as_int(bits) not in (32, 64):
        raise OperandError("k.addr_of", "bits", "32 (a shared or const window offset) or 64",
                           _show(bits))
    kwargs["bits"] = as_int(bits)


def _check_ld_vec(kwargs) -> None:
    vec = kwargs.get("vec", 1)
    n = as_int(vec)
    if n is None or not 1 <= n <= 8:   # 3, 5, ...: few registers; ld's own check names them
        raise OperandError("k.ld", "vec", "1, 2, 4 or 8 (ld.v2/.v4/.v8)", _show(vec))
    kwargs["vec"] = n


# Keyword arguments checked before the builder runs, where the builder would act on a bad
# value first: addr_of picks the address size with `bits == 32` (anything else silently meant
# 64), ld makes `vec` registers before the instruction refuses the count (vec=3_000_000 took
# seconds and left the registers declared).
_KEYWORD_CHECKS = {"addr_of": _check_addr_bits, "ld": _check_ld_vec}


def _type_keywords(name: str, typed: bool = True):
    extra = _KEYWORD_CHECKS.get(name.removeprefix("k."))

    def pre(kwargs) -> None:
        if extra is not None:
            extra(kwargs)
        if not typed:
            return
        for key in _TYPE_KEYWORDS:
            v = kwargs.get(key)
            if v is None or type(v) is ScalarType:
                continue
            if isinstance(v, str) and v.lstrip(".") in _TYPE_NAMES:  # "u32" / ".u32"
                kwargs[key] = ScalarType(v.lstrip("."))
                continue
            raise OperandError(name, key, "a ptxdsl type such as t.u32",
                               f"{type(v).__name__} {v!r}"[:100])
    return pre


for _name, _fn in list(inspect.getmembers(Kernel, inspect.isfunction)):
    if not _name.startswith("_") and _name not in _UNGUARDED:
        _typed = bool(set(_TYPE_KEYWORDS) & set(inspect.signature(_fn).parameters))
        setattr(Kernel, _name, fail_closed(
            f"k.{_name}", _fn, _type_keywords(f"k.{_name}", _typed)
            if _typed or _name in _KEYWORD_CHECKS else None))


if TYPE_CHECKING:  # pragma: no cover
    def _operators_find_their_builders(k: Kernel) -> Arith:
        """mypy checks here that `Kernel` has what a register's operators call (`Reg._k`)."""
        return k
