"""The directives of a kernel's `.entry` header (`.maxntid`, `.reqntid`, `.reqnctapercluster`,
`.maxclusterrank`, `.minnctapersm`, `.maxnreg`, `.explicitcluster`, `.visible`): one check per
directive, and the property `KernelCore` exposes each one as.

Each reaches the PTX as text, so each is checked on every assignment, `Kernel(...,
maxntid=128)` and `k.maxntid = 128` alike (the constructor assigns through the same
properties), with the rules between two directives checked by whichever is assigned second.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol, TypeAlias, TypeVar

from .errors import BuildError, OperandError
from .instructions.sync import Barrier, BarrierRed
from .operands import IntLike, _show, as_int
from .types import MAX_CLUSTER_CTAS

if TYPE_CHECKING:  # pragma: no cover
    from .kernel_core import KernelCore

# `maxntid=`, `reqntid=`, `reqnctapercluster=`: 1 to 3 dimensions, one int for (n,).
Dims: TypeAlias = IntLike | tuple[IntLike, ...] | list[IntLike]

_Get = TypeVar("_Get", covariant=True)
_Set = TypeVar("_Set", contravariant=True)


class Directive(Protocol[_Get, _Set]):
    """How a type checker sees a directive property: read back as `_Get` (the checked
    value), assigned a `_Set` (what the check takes)."""

    def __get__(self, obj: Any, owner: Any = None) -> _Get: ...
    def __set__(self, obj: Any, value: _Set) -> None: ...


def _dims(value, what: str) -> tuple[int, ...] | None:
    if value is None:
        return None
    one = as_int(value)
    dims = (one,) if one is not None else tuple(value) if isinstance(value, tuple | list) \
        else ()
    dims = tuple(as_int(d) for d in dims)
    if not 1 <= len(dims) <= 3 or not all(d is not None and 1 <= d < 1 << 31 for d in dims):
        raise BuildError(f"kernel directive {what}: expected 1 to 3 positive integers, "
                         f"got {value!r}")
    return dims


def _repr(value) -> str:
    try:
        return repr(value)
    except Exception:  # noqa: BLE001 - a hostile __repr__ must not replace the real error
        return _show(value)


def _number(what: str, value, lo: int, hi: int) -> int | None:
    n = as_int(value)
    if value is not None and (n is None or not lo <= n <= hi):
        raise BuildError(f"kernel directive {what}: expected an integer in [{lo}, {hi}], got "
                         f"{_repr(value)}")
    return n


# One check per directive: it takes the kernel (for the rules between directives) and the
# value, and returns what is kept.
def _flag(what: str):
    def check(k: KernelCore, value) -> bool:
        # Real bools only: a truthy "no" or 0.0-like object must not silently turn one on.
        if type(value) is not bool:
            raise BuildError(f"kernel {k.name}: {what} must be True or False, got "
                             f"{_show(value)}")
        return value
    return check


MAX_CTA_THREADS = 1024   # every CUDA GPU's threads per CTA


def _threads(what: str, other: str):
    def check(k: KernelCore, value) -> tuple[int, ...] | None:
        dims = _dims(value, f".{what}")
        # ptxas only warns ("out of range ... will be ignored") and drops the directive with
        # .minnctapersm: the kernel would build without what it asked for.
        if dims and math.prod(dims) > MAX_CTA_THREADS:
            raise BuildError(f"kernel {k.name}: .{what} {', '.join(map(str, dims))} is "
                             f"{math.prod(dims)} threads per CTA; no GPU runs more than "
                             f"{MAX_CTA_THREADS} (ptxas would ignore the directive)")
        if dims:
            _barriers_fit(k, dims, what)
        if dims and getattr(k, other):
            raise BuildError(f"kernel {k.name}: .maxntid and .reqntid cannot be combined "
                             "(ptxas refuses both on one kernel); keep one")
        if dims is None and k.minnctapersm is not None and not getattr(k, other):
            raise BuildError(f"kernel {k.name}: .minnctapersm needs .maxntid or .reqntid "
                             "(set k.minnctapersm = None first)")
        return dims
    return check


def cta_threads(k: KernelCore) -> tuple[int, str] | None:
    """The most threads a CTA of `k` can have by its directives, and the directive saying
    so (None: not declared)."""
    for what in ("reqntid", "maxntid"):
        dims = getattr(k, what)
        if dims:
            return math.prod(dims), f".{what} {', '.join(map(str, dims))}"
    return None


def barrier_count_fits(insn: Any, threads: int, directive: str, loc: Any = None) -> None:
    """A named barrier waiting for more threads than the CTA has never completes (the
    checker's named-barrier-count, refused here where the builder knows both numbers)."""
    count = getattr(insn, "count", None)
    n = getattr(count, "value", None)
    if isinstance(n, int) and n > threads:
        raise OperandError(insn.name, "count", f"at most the CTA's {threads} threads "
                           f"({directive}: a barrier waiting for more never completes)", n, loc)


def _barriers_fit(k: KernelCore, dims: tuple[int, ...], what: str) -> None:
    """A CTA size set after the barriers were built must still hold their thread counts."""
    directive = f".{what} {', '.join(map(str, dims))}"
    for st in getattr(k, "body", ()):
        if isinstance(getattr(st, "insn", None), (Barrier, BarrierRed)):
            try:
                barrier_count_fits(st.insn, math.prod(dims), directive, st.loc)
            except OperandError as e:
                raise BuildError(f"kernel {k.name}: {directive} is {math.prod(dims)} threads "
                                 f"per CTA, but {st.insn.name} at {st.loc} waits for "
                                 f"{e.given}: it would never complete") from None


def cluster_limit(k: KernelCore) -> int | None:
    """The most CTAs a cluster of `k` can have by its directives (None: not declared)."""
    return math.prod(k.reqnctapercluster) if k.reqnctapercluster else k.maxclusterrank


def _cluster_fits(k: KernelCore, ctas: int, directive: str) -> None:
    """A helper built for a larger cluster would wait for arrivals that never come."""
    for need, who in k._cluster_needs:
        if need > ctas:
            raise BuildError(f"kernel {k.name}: {directive} allows {ctas} CTAs per cluster, "
                             f"but {who} needs {need}")


def _cluster_dims(k: KernelCore, value) -> tuple[int, ...] | None:
    dims = _dims(value, ".reqnctapercluster")
    if dims:
        _cluster_fits(k, math.prod(dims), ".reqnctapercluster")
    if dims and math.prod(dims) > MAX_CLUSTER_CTAS:
        raise BuildError(f"kernel {k.name}: .reqnctapercluster {_repr(value)} asks for "
                         f"{math.prod(dims)} CTAs per cluster; no GPU launches more than "
                         f"{MAX_CLUSTER_CTAS} (8 portable)")
    if dims and k.maxclusterrank is not None:
        raise BuildError(f"kernel {k.name}: .reqnctapercluster and .maxclusterrank cannot be "
                         "combined (ptxas refuses both on one kernel)")
    return dims


def _cluster_rank(k: KernelCore, value) -> int | None:
    if value is not None and k.reqnctapercluster:
        raise BuildError(f"kernel {k.name}: .reqnctapercluster and .maxclusterrank cannot be "
                         "combined (ptxas refuses both on one kernel)")
    n = _number(".maxclusterrank", value, 1, 1 << 16)
    if n is not None:
        _cluster_fits(k, n, ".maxclusterrank")
    return n


def _min_ctas(k: KernelCore, value) -> int | None:
    n = _number(".minnctapersm", value, 1, 1 << 16)
    if n is not None and not (k.maxntid or k.reqntid):
        raise BuildError(f"kernel {k.name}: .minnctapersm needs .maxntid or .reqntid")
    return n


DIRECTIVES: dict[str, Callable] = {
    "visible": _flag("visible"), "explicitcluster": _flag("explicitcluster"),
    "maxntid": _threads("maxntid", "reqntid"), "reqntid": _threads("reqntid", "maxntid"),
    "reqnctapercluster": _cluster_dims, "maxclusterrank": _cluster_rank,
    "minnctapersm": _min_ctas,
    "maxnreg": lambda _k, v: _number(".maxnreg", v, 1, 255),
}
FLAGS = ("visible", "explicitcluster")


def directive_property(attr: str) -> property:
    check, slot = DIRECTIVES[attr], "_" + attr

    def set_(self: KernelCore, value) -> None:
        setattr(self, slot, check(self, value))
    return property(operator.attrgetter(slot), set_,
                    doc=f"The kernel's `.{attr}` directive, checked on assignment.")
