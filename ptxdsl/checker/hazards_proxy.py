"""Shared memory read through the async proxy by the tensor cores: `wgmma-smem-no-proxy-fence`
(wgmma.mma_async) and `tcgen05-smem-no-proxy-fence` (tcgen05.mma, tcgen05.mma.ws, tcgen05.cp).

These instructions read shared memory through matrix descriptors, in the async proxy (PTX ISA:
wgmma §9.7.15.6; tcgen05 "Memory Consistency Model for 5th generation of TensorCore
operations", and the "Async Proxy" section both refer to). A generic-proxy write (st.shared,
atom/red, stmatrix) they read needs a `fence.proxy.async[.shared::cta]` by the writing
threads and, for writes of other threads, a barrier before the reader. Which operands are
descriptors is the op's `descs` (one table per family, where the ops are read: `ops` for
wgmma's `a` unless registers and `b_desc`, `tmem_ops.SMEM_DESCS` for tcgen05.mma/.mma.ws's A
unless in tensor memory and B, and tcgen05.cp's source); the sparse metadata and the block
scales come from tensor memory.

The buffer a descriptor names is traced back to a shared symbol when its arithmetic starts
from one; otherwise the reader may read any shared write. When every descriptor's start lies
in a TMA/bulk load's destination, the reader reads those boxes, and writes elsewhere in the
symbol (a scheduler word past the tiles) are not compared (`_tiles`).

Facts: shared writes are `smem_dirty` until a fence.proxy.async, then `smem_fenced` until a
CTA barrier (`sync`), or, for the threads past a wait on an mbarrier the writers arrived on
after their fence, until that wait (`hazards_bulk_release.hand_on` and `acquire`); unfenced
writes of other threads at a named barrier are carried to its partner syncs
(`hazards_bulk_namedbar.unfenced`).
"""

from __future__ import annotations

from typing import Any

from ..operands import Reg, Symbol
from ..types import StateSpace
from .analysis import Analysis, handles
from .findings import Hazard
from .hazards_bulk import _size, extent_of
from .hazards_ring import _load_extents, read_extent
from .lockstep import modulus
from .ops import Op, Role
from .state import State
from .values import Kind

_TRACE_DEPTH = 16   # how far back a descriptor's arithmetic is followed to its symbol
_SHARED = (StateSpace.generic, StateSpace.shared, StateSpace.shared_cta,
           StateSpace.shared_cluster)   # the spaces whose writes may land in shared memory


def _reader(op: Op) -> tuple[Hazard, str]:
    """The hazard a reader reports (wgmma got its own id first; tcgen05's readers share one)
    and its name in messages."""
    if op.role is Role.WGMMA:
        return Hazard.WGMMA_SMEM_NO_PROXY_FENCE, "wgmma.mma_async"
    return Hazard.TCGEN05_SMEM_NO_PROXY_FENCE, f"tcgen05.{op.field}"


def _table(an: Analysis) -> dict[int, list]:
    """Statement -> the descriptors its readers read (an inline statement may hold several)."""
    table = an.cache.get("px_descs")
    if table is None:
        table = an.cache["px_descs"] = {}
        for op in an.ops:
            if op.descs:
                table.setdefault(op.index, []).extend(op.descs)
    return table


def descriptors(an: Analysis, i: int) -> list:
    """The shared-memory matrix descriptors the instructions at statement i read."""
    return _table(an).get(i, [])


def _roots(an: Analysis, i: int) -> frozenset | None:
    """The shared symbols the reader at statement i may read (None: unknown, any)."""
    key = ("px_roots", i)
    if key not in an.cache:
        addrs = traced(an, i)
        an.cache[key] = None if addrs is None else frozenset(an.val(r).root for r in addrs)
    return an.cache[key]


def addresses(an: Analysis, i: int) -> list[Reg]:
    """The shared addresses the reader at statement i's descriptors are built from (those
    that could be traced)."""
    key = ("px_addrs", i)
    if key not in an.cache:
        out: list[Reg] = []
        for desc in descriptors(an, i):
            out += sorted(_trace(an, desc) or (), key=lambda r: r.name)
        an.cache[key] = out
    return an.cache[key]


def traced(an: Analysis, i: int) -> set | None:
    """The address registers of every descriptor of the reader at i (None: one is unknown,
    or it has none the op could name: an inline operand that is no register)."""
    found: set = set()
    for desc in descriptors(an, i):
        regs = _trace(an, desc)
        if regs is None:
            return None
        found |= regs
    return found


def _trace(an: Analysis, desc: Any) -> set | None:
    """The registers holding shared-symbol addresses that feed a descriptor's arithmetic
    (the first such register on each path back; None: none found)."""
    if not isinstance(desc, Reg):
        return None
    found: set = set()
    seen, todo = {desc}, [(desc, 0)]
    while todo:
        r, depth = todo.pop()
        v = an.val(r)
        if v.kind is Kind.addr and isinstance(v.root, Symbol) and v.root.space.is_shared:
            found.add(r)
            continue
        if depth >= _TRACE_DEPTH:
            return None
        if modulus(an.values, r) is not None:
            continue   # a stage index (`k % 6`): what k was computed from is no address here
        for d in an.values.defs.get(r, ()):
            for s in an.values.sources_of(d):
                if s not in seen:
                    seen.add(s)
                    todo.append((s, depth + 1))
    return found or None


def _written_root(an: Analysis, i: int) -> Any:
    v = an.val(an.op_at[i].smem)
    return v.root if v.kind is Kind.addr and isinstance(v.root, Symbol) else None


def _tiles(an: Analysis, i: int) -> tuple[list, list, bool] | None:
    """The byte extents `(root, lo, hi)` the reader at statement i may read: for each of its
    descriptors, the run of copies (TMA or bulk loads) that holds its start address, grown
    over every copy it touches (a B tile loaded as several boxes, a ring's stages); those
    start addresses' first 16 bytes (what it reads whatever the copies' sizes); and whether a
    copy's size is unknown (its extent then runs to the next buffer or the end). None when a
    descriptor's address cannot be followed or lands in no copy (a tile the threads wrote
    themselves): then its symbol is all that is known."""
    key = ("px_tiles", i)
    if key in an.cache:
        return an.cache[key]
    out: tuple[list, list, bool] | None = None
    addrs = traced(an, i)
    if addrs:
        runs: list = []
        firsts: list = []
        unknown = False
        for r in sorted(addrs, key=lambda r: r.name):
            first = read_extent(an, r, 16)
            copies = _load_extents(an).get(id(first[0]), []) if first is not None else []
            hit = [e for e in copies if first is not None and e[1] < first[2]
                   and first[1] < e[2]]
            if first is None or not hit:
                runs = []
                break
            lo, hi = min(e[1] for e in hit), max(e[2] for e in hit)
            grown = True
            while grown:
                grown = False
                for _, a, b in copies:
                    if a <= hi and b >= lo and (a < lo or b > hi):
                        lo, hi, grown = min(lo, a), max(hi, b), True
            unknown = unknown or any(_size(an, o) is None for o, a, b in copies
                                     if a < hi and lo < b)
            runs.append((first[0], lo, hi))
            firsts.append(first)
        if runs:
            out = (runs, firsts, unknown)
    an.cache[key] = out
    return out


def _apart(ext: tuple | None, tiles: list) -> bool:
    """Is a write's extent clear of every one of these extents?"""
    return ext is not None and all(
        t[0] is not ext[0] or not (t[1] < ext[2] and ext[1] < t[2]) for t in tiles)


def smem_check(an: Analysis, state: State, op: Op) -> None:
    """`wgmma-smem-no-proxy-fence` / `tcgen05-smem-no-proxy-fence` for the reader `op`: a
    generic write it may read with no fence since (`smem_dirty`), or fenced by other threads
    with no barrier since (`smem_fenced`)."""
    hazard, name = _reader(op)
    site = "wgmma" if op.role is Role.WGMMA else op.field or "tcgen05"
    roots = _roots(an, op.index)
    spans = _tiles(an, op.index)
    for tag, why in (("smem_dirty", "no fence.proxy.async.shared::cta follows it"),
                     ("smem_fenced", "it was fenced, but no barrier orders it before the "
                                     f"{name} (other threads wrote it)")):
        for (s, *_) in an.pending(state, tag):
            if an.op_at.get(s) is None or an.op_at[s].role is not Role.SMEM_WRITE:
                continue
            root = _written_root(an, s)
            if roots is not None and root is not None and root not in roots:
                continue
            if spans is not None:
                # Compare byte ranges, as the bulk rules do: a scheduler word past the
                # tiles in the same buffer is not read by the reader.
                ext = extent_of(an, an.op_at[s])
                if _apart(ext, spans[0]):
                    continue
                if _apart(ext, spans[1]) and spans[2]:
                    an.note(hazard.value, "the write at "
                            f"{an.describe(an.op_at[s].smem)} may lie in a tile this {name} "
                            "reads only because the box size of the TMA loads that fill the "
                            "tiles is unknown (pass maps={...} or encode the maps with "
                            "constant tensormap.replace values)",
                            [(site, op.index), ("write", s)])
                    continue
            if tag == "smem_fenced" and an.div.same_single_threads(s, op.index):
                continue
            an.report(hazard, f"{an.describe(an.op_at[s].smem)} was written through the "
                      f"generic proxy and {why}; the {name} reads shared memory through the "
                      "async proxy", [(site, op.index), ("write", s)], dedupe=(op.index, tag))
            return


@handles(Role.TC_ASYNC)
def tcgen05_read(an: Analysis, state: State, op: Op, report: bool) -> State:
    """tcgen05.mma, .mma.ws and cp: `tcgen05-smem-no-proxy-fence` for the shared memory their
    descriptors name (the other tcgen05 rules are `hazards_tmem`'s)."""
    if report and op.descs:
        smem_check(an, state, op)
    return state


@handles(Role.SMEM_WRITE)
def shared_write(an: Analysis, state: State, op: Op, report: bool) -> State:
    """A shared-memory write in a kernel with a descriptor reader (wgmma, tcgen05.mma/cp):
    recorded as not yet fenced for the async proxy."""
    if op.space not in _SHARED or not _table(an):
        return state
    return State(state.must, state.may | {("smem_dirty", op.index)}, state.tx)
