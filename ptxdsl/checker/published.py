"""mbarrier inits one group of threads publishes to the others through a CTA-wide barrier.

Triton's warp-specialized kernels split the CTA before anything else: the default partition
(`warp < 4`) initialises every mbarrier and then joins `barrier.sync 1` (all threads of the
CTA); the worker warps branch away at the start, join the same `barrier.sync 1`, and only then
read their partition's state and use the barriers. No path of a worker passes an init, so the
path-wise must-facts of `hazards_mbar` say "not initialised"; yet the init happens before it.

The argument, per barrier number X whose every use in the kernel is a full-CTA sync (`bar.sync
X`, `barrier.sync X`, `bar.red` with no thread count, or the `.reqntid` count): an instance
of barrier X completes only once every thread of the CTA has arrived, the threads that run
the init included. If those threads cannot reach an X barrier before the init (every path of
theirs from the kernel's entry to one passes the init; paths are those their conditions allow,
`Divergence.leaves`) and do reach one after it, then every completion of X follows the init,
and a use that every path from the entry reaches only through an X barrier comes after the
init. A barrier number used with a thread count anywhere (`bar.sync 0, 128`: one warpgroup),
by `bar.arrive`, or by a barrier instruction whose number is not a constant is not such an X.
Not seen: an `mbarrier.inval` between the init and the barrier (the init is taken as live).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from .analysis import Analysis, keys_match
from .ops import Role

_UNKNOWN = "unknown"   # a barrier whose number is not known: it may be any X


def _numbers(an: Analysis) -> dict[int, Any]:
    """Statement index -> the barrier number of each full-CTA sync whose number qualifies
    (see the module docstring), or _UNKNOWN for a barrier that may be any number."""
    hit = an.cache.get("published.numbers")
    if hit is not None:
        return hit
    nthreads = an.values.nthreads if getattr(an.kernel, "reqntid", None) else None
    found: dict[int, Any] = {}
    spoiled: set[Any] = set()
    for i, st in enumerate(an.body):
        insn: Any = getattr(st, "insn", None)
        name = type(insn).__name__
        if name not in ("Barrier", "BarrierRed"):
            continue
        x = an.const(insn.id)
        count = insn.count if insn.count is None else an.const(insn.count)
        sync = name == "BarrierRed" or getattr(insn.op, "value", insn.op) == "sync"
        if x is None:
            found[i] = _UNKNOWN
        elif sync and (insn.count is None or (count is not None and count == nthreads)):
            found[i] = x
        else:
            spoiled.add(x)
    # A CTA barrier the checker found in inline PTX or raw text: its number is not read.
    for op in an.ops:
        if op.role is Role.CTA_BARRIER and op.index not in found and \
                type(getattr(an.body[op.index], "insn", None)).__name__ not in (
                    "Barrier", "BarrierRed"):
            found[op.index] = _UNKNOWN
    out = {i: x for i, x in found.items() if x not in spoiled}
    an.cache["published.numbers"] = out
    return out


def _walk(an: Analysis, start_block: int, first: int, stop: int | None,
          allowed: Callable[[int, int], bool], numbers: dict[int, Any]) -> set[Any]:
    """The barrier numbers met on paths from statement `first` of `start_block` onwards,
    each path ending at the first barrier it meets or at statement `stop`; edges p -> b
    only where `allowed(p, b)`."""
    cfg = an.cfg
    met: set[Any] = set()
    seen: set[int] = set()
    todo: list[tuple[int, int]] = [(start_block, first)]
    while todo:
        b, at = todo.pop()
        if b >= len(cfg.blocks):
            continue
        ended = False
        for i in cfg.blocks[b].stmts:
            if i < at:
                continue
            if i == stop:
                ended = True
                break
            if i in numbers:
                met.add(numbers[i])
                ended = True
                break
        if ended:
            continue
        for s in cfg.succs(b):
            if s not in seen and allowed(b, s):
                seen.add(s)
                todo.append((s, -1))
    return met


def _published_by(an: Analysis, i: int) -> frozenset:
    """The barrier numbers X after whose every instance the init at statement i is done."""
    key = ("published.by", i)
    hit = an.cache.get(key)
    if hit is not None:
        return hit
    out: frozenset = frozenset()
    numbers = _numbers(an)
    if numbers and an.runs_somewhere(i) and an.cfg.blocks:
        def allowed(p: int, b: int) -> bool:
            return not an.div.leaves(i, p, b)
        before = _walk(an, 0, -1, i, allowed, numbers)
        if _UNKNOWN not in before:
            after = _walk(an, an.cfg.block_of(i), i + 1, None, allowed, numbers)
            out = frozenset(x for x in after - before if x != _UNKNOWN)
    an.cache[key] = out
    return out


def _behind(an: Analysis, use: int, xs: Iterable[Any]) -> bool:
    """Does every path from the kernel's entry to statement `use` pass a barrier numbered
    in xs?"""
    xs = set(xs)
    numbers = {i: x for i, x in _numbers(an).items() if x in xs}
    if not numbers:
        return False
    # Walk from the entry, each path ending at its first such barrier: `use` unmet is behind.
    reached = _walk(an, 0, -1, None, lambda p, b: True, {**numbers, use: "use"})
    return "use" not in reached


def published(an: Analysis, key: Any, use: int) -> bool:
    """Is some init of the mbarrier `key` done before statement `use` runs, through a
    CTA-wide barrier every path to the use passes (see the module docstring)?"""
    xs: set[Any] = set()
    for o in an.ops:
        if o.role is Role.MBAR_INIT and keys_match(an.key(o, "mbar"), key):
            xs |= _published_by(an, o.index)
    return bool(xs) and _behind(an, use, xs)
