"""Shared-memory and bulk-group hazards around TMA stores: st.shared data stored without a
proxy fence and a barrier, source buffers overwritten before wait_group.read, groups never
waited for, negative store coordinates, and under-aligned TMA buffers.

`smem-no-proxy-fence` judges a store against generic-proxy writes not fenced ("smem_dirty";
a third field: the named barrier of other threads it was carried from unfenced,
`hazards_bulk_namedbar.unfenced`) and writes other threads fenced ("smem_fenced", write,
via, arrives) with no CTA barrier since: `barred` finds one on every path the storing threads
take from the write (the path of threads that skip a `bar.sync id, n` keeps the fact); an
mbarrier arrive of every writing thread after the fence, whose phase the storer waited for,
takes the fact off the waiting path (`hazards_bulk_release.hand_on` and `acquire`); a
partner's `bar.sync` drops it as a CTA barrier does, and a `bar.arrive` of the other side
gets it carried from the writers' named barrier (via: that statement,
`hazards_bulk_namedbar.fenced_to_arrives`: the pair the wrong way round).

Shared buffers are compared as byte ranges of one symbol: `smem+off` for `size` bytes (the
box size when the map is known, the bulk size, or up to the next buffer offset that a copy of
that symbol uses, for a load also a ring stage of loads above it; a ring load's, in every
stage up to the next load's start, within the stage). An unknown offset overlaps everything
in the symbol.

`bulk-src-overwrite` judges a write against the stores pending in its own thread ("bulk"),
retired only in another thread with no CTA barrier since ("bulk_done"), and pending in
their issuing threads at a CTA barrier since ("bulk_seen", built at each barrier by
`hazards_bulk_release.barrier`), or at a named barrier's `bar.arrive` whose partners'
`bar.sync` on another branch precedes the write (`hazards_bulk_namedbar`, which also tells
those partners of a retirement before the arrive: `told`): that barrier orders the write
after the store's issue, not after its read. An mbarrier hands both on as a CTA barrier
does, to the threads that wait on it (`hazards_bulk_release.hand_on` and `acquire`): the
waiting thread's arrive after its wait_group marks the "bulk_done" fact (its last field:
those arrives), a wait on the same barrier for a phase the arrive completes drops it; a
store pending in the arriving thread becomes "bulk_seen" past such a wait. "bulk_seen" is
judged for writes by threads that do not include every issuing one (the issuers' own facts
judge theirs), with each side's bytes bounded over the threads that run it
(`extent_where_run`); a TMA or bulk copy let in by a release (it waits on an empty barrier a
consumer arrives on) is left to
`bulk-src-released`, which judges that release. Not seen: a copy let in by a release the
release rule cannot see (made by other threads before the barrier, with none between the
store and it). Still reported: a write by some of a store's issuing threads into the bytes
of their own part only, while the other issuers' parts are pending (the store's bytes are
bounded over all its issuers).
"""

from __future__ import annotations

import bisect
from typing import Any

from ..instructions.control import Exit, Ret
from ..operands import Addr, Symbol, Vec
from ..statements import Param
from . import blocks, stages
from .analysis import EXIT_CHECKS, OWNED, PREPARE, Analysis, handles
from .findings import Hazard
from .hazards_bulk_namedbar import told
from .maps import declare_box
from .ops import Op, Role
from .ranges import Span, Spans, extern_align
from .residue import residue
from .state import State
from .values import Kind

_AGE_CAP = 16   # groups newer than this all count as "16 or more": keeps the lattice finite
_COPIES = (Role.TMA_LOAD, Role.TMA_STORE, Role.BULK_LOAD, Role.BULK_STORE)
Range = tuple[Any, "int | None", "int | None", "tuple | None"]
# Tags of the facts (tag, store, x, moved, ...) whose `moved` counts the steps of the store's
# ring counter since the store (`ring_step`); other rules add theirs.
MOVED: set[str] = {"bulk", "bulk_done"}


def _offsets(an: Analysis, root: Any) -> list[int]:
    """The constant offsets into `root` at which copies start (buffer boundaries)."""
    table = an.cache.get("offsets")
    if table is None:
        table = {}
        for o in an.ops:
            if o.role in _COPIES:
                v = an.val(o.smem)
                if v.kind is Kind.addr and v.offset is not None:
                    table.setdefault(v.root, set()).add(v.offset)
        table = an.cache["offsets"] = {k: sorted(v) for k, v in table.items()}
    return table.get(root, [])


def _load_starts(an: Analysis, root: Any) -> list[int]:
    """Every offset into `root` at which a load may start: the constant ones and each stage's
    start of a load into a ring stage. (Not the stores': an epilogue's staging tile may
    share the mainloop's bytes, a union of the two phases, and end no load.)"""
    table = an.cache.get("load_starts")
    if table is None:
        table = {}
        for o in an.ops:
            if o.role in (Role.TMA_LOAD, Role.BULK_LOAD):
                start = _start(an, o.smem)
                if start is None or start[1] is None or start[1] != start[2]:
                    continue
                n, stride = (1, 0) if start[3] is None else start[3][1:3]
                table.setdefault(start[0], set()).update(start[1] + stride * j
                                                         for j in range(n))
        table = an.cache["load_starts"] = {k: sorted(v) for k, v in table.items()}
    return table.get(root, [])


def _stage_end(an: Analysis, root: Any, hi: int, ring: tuple) -> int:
    """The end (without the ring's reach) of a load of unknown size into a ring stage, its
    first byte at most at hi: inside its stage, so within a stride of its start, and, in
    every stage, before the next load's start above it (a Q stage filled by two boxes: the
    first ends where the second begins, the second where the next stage or ring begins).
    This keeps the symbol's other buffers out of the load's range, where a wait on the
    load's barrier would cover their reads."""
    _, n, stride = ring[:3]
    starts = _load_starts(an, root)
    end = hi + stride
    for j in range(n):
        at = bisect.bisect_right(starts, hi + stride * j)
        if at < len(starts):
            end = min(end, starts[at] - stride * j)
    return end


def _size(an: Analysis, op: Op) -> int | None:
    """The bytes one op touches, when known."""
    if op.role in (Role.SMEM_WRITE, Role.SMEM_READ):
        insn = an.body[op.index].insn
        width = getattr(getattr(insn, "type", None), "bytes", None)
        value = getattr(insn, "b" if op.role is Role.SMEM_WRITE else "d", None)
        lanes = len(value.items) if isinstance(value, Vec) else 1
        return width * lanes if isinstance(width, int) and width > 0 else 16
    if op.role in (Role.TMA_LOAD, Role.TMA_STORE):
        info = an.map_info(op.map)
        return info.box_bytes if info is not None else None
    return an.const(op.count)


def _range(an: Analysis, op: Op) -> Range | None:
    """The shared bytes an op touches, or None when it is not a known shared symbol:
    (symbol, first byte, end, ring) with first/end bounds on the part outside the ring term
    (see `ranges.Span`; None: unbounded)."""
    key = ("range", op.index)
    if key in an.cache:
        return an.cache[key]
    start = _start(an, op.smem)
    if start is None and op.role is Role.SMEM_WRITE:
        start = _stepped(an, op.smem)
    out: Range | None = None
    if start is not None:
        root, lo, hi, ring = start
        size = _size(an, op)
        if size is None and op.role is Role.TMA_LOAD and ring is not None and ring[2] > 0 \
                and lo is not None and hi is not None:
            end: int | None = _stage_end(an, root, hi, ring)
        elif lo is not None and hi is not None and size is None and lo == hi \
                and (ring is None or ring[2] > 0):
            offs = _offsets(an, root)    # a copy of unknown size ends at the next buffer
            # (above the last stage of a ring; the end is kept without the ring's reach,
            # which `_extent` adds back)
            reach = 0 if ring is None else ring[2] * (ring[1] - 1)
            j = bisect.bisect_right(offs, lo + reach)
            end = offs[j] - reach if j < len(offs) else None
            if ring is None and op.role in (Role.TMA_LOAD, Role.BULK_LOAD):
                # and before the first stage of a ring of loads above it (K and V tiles
                # loaded once, below a Q ring)
                starts = _load_starts(an, root)
                j = bisect.bisect_right(starts, lo)
                if j < len(starts) and (end is None or starts[j] < end):
                    end = starts[j]
        else:
            end = None if hi is None or size is None else hi + size
        out = (root, lo, end, ring)
    an.cache[key] = out
    return out


def _stepped(an: Analysis, operand: Any) -> tuple | None:
    """A write through a pointer a loop steps in place (`Values.stepped`): anywhere in its
    buffer (nvcc's `for (j = tid; j < n; j += 128) tile[j] = ...`)."""
    v = an.values.stepped(operand.base if isinstance(operand, Addr) else operand)
    if v.kind is Kind.addr and isinstance(v.root, Symbol) and v.root.space.is_shared:
        return (v.root, None, None, None)
    return None


def _definite(an: Analysis, op: Op) -> Range | None:
    """The part of an op's range it touches whatever its unknown size: its first byte when
    the size is unknown (a TMA copy whose map's box the checker was not told), else all of
    it. An overlap only the unknown size makes is a note, not a finding."""
    r = _range(an, op)
    if r is None or _size(an, op) is not None:
        return r
    root, lo, hi, ring = _start(an, op.smem) or (None,) * 4
    return (root, lo, None if hi is None else hi + 1, ring)


def first_byte_read(an: Analysis, copy: Op, smem: Any) -> bool:
    """Does a read at `smem` reach a byte the copy writes whatever the copy's size: the
    copy's first byte, in some stage of either's ring? True for a copy of known size (its
    whole range is known) and where either address is unbounded. Only the read's first
    byte is taken: False leaves the read to the copy's estimated end."""
    if _size(an, copy) is not None:
        return True
    mine, theirs = _start(an, smem), _start(an, copy.smem)
    if mine is None or theirs is None or None in (*mine[1:3], *theirs[1:3]):
        return True

    def firsts(start: tuple) -> list[tuple[int, int]]:
        _, lo, hi, ring = start
        n, stride = (1, 0) if ring is None else ring[1:3]
        return [(lo + stride * j, hi + 1 + stride * j) for j in range(n)]

    return any(a0 < b1 and b0 < a1 for a0, a1 in firsts(mine) for b0, b1 in firsts(theirs))


def size_how(an: Analysis, copy: Op) -> str:
    """What gives the checker a copy's size, for a note on a check its unknown size left
    undecided: the declaration of its map's box, naming the parameter."""
    if copy.map is None:
        return "a constant byte count"
    root = an.classify_map(copy.map)[2]
    if isinstance(root, Param):
        return f"declare the box of {root.name}: {declare_box(root, an.kernel.name)}"
    return ("a map the checker knows the box of: a parameter with a declared box, or "
            "constant tensormap.replace values")


def _size_note(an: Analysis, store: int, write: int, check: str = "bulk-src-overwrite"
               ) -> None:
    op = an.op_at[store]
    kind, _, root = an.classify_map(op.map) if op.map is not None else (None, None, None)
    name = getattr(root, "name", None)
    how = (f"pass its box, e.g. check_module(mod, maps={{'{name}': TiledDesc or "
           "{'box_bytes': N}})" if kind in ("param", "param_raw", "global") and name else
           "pass its box with maps={...}") + ", or encode the map in the kernel with " \
        "constant tensormap.replace values"
    an.note(check, f"the size of the {op.role.value} from "
            f"{an.describe(op.smem)} is unknown: writes past its first byte are not compared "
            f"with it ({how})", [("store", store), ("write", write)])


def _start(an: Analysis, operand: Any) -> tuple | None:
    """(symbol, lowest, highest start offset, ring) of a shared address, or None. `[r+off]`
    reuses r's bounds (many accesses share one base register)."""
    off = 0
    if isinstance(operand, Addr) and not isinstance(operand.base, Symbol):
        operand, off = operand.base, operand.offset
    key = ("start", id(operand))
    hit = an.cache.get(key, key)
    if hit is key:
        v = an.val(operand)
        hit = None
        if v.kind is Kind.addr and isinstance(v.root, Symbol) and v.root.space.is_shared:
            if v.offset is not None:
                hit = (v.root, v.offset, v.offset, None)
            else:
                span = an.spans.of(operand)
                if span.root is not v.root:
                    span = Span(v.root)
                hit = (v.root, span.lo, span.hi, span.ring)
        an.cache[key] = hit   # operands live as long as the kernel: ids are safe
    if hit is None or not off:
        return hit
    root, lo, hi, ring = hit
    return (root, None if lo is None else lo + off, None if hi is None else hi + off, ring)


def _extent(a: Range) -> tuple[float, float]:
    """The byte interval of a range with its ring term folded in, clamped to the symbol."""
    root, lo, end, ring = a
    if ring is not None:
        _, n, scale, _ = ring
        if lo is not None:
            lo += min(0, scale * (n - 1))
        if end is not None:
            end += max(0, scale * (n - 1))
    size = root.size if getattr(root, "count", None) else 0
    return (0 if lo is None else max(lo, 0),
            end if end is not None else (size if size else float("inf")))


def extent_of(an: Analysis, op: Op) -> tuple[Any, float, float] | None:
    """`(root, lo, hi)`: the root and `_extent` of an op's range, cached (None: not a known
    shared symbol)."""
    key = ("extent", op.index)
    hit = an.cache.get(key, key)
    if hit is key:
        r = _range(an, op)
        hit = an.cache[key] = (r[0], *_extent(r)) if r is not None else None
    return hit


def extent_where_run(an: Analysis, op: Op, first: bool) -> tuple[Any, float, float] | None:
    """`extent_of` (`first`: of `_definite`, the bytes touched whatever an unknown size),
    over the threads that run the op (`spans_where_run`): a consumer's `smem + (wg - 1) *
    size` starts at the buffer of warpgroup 1 there, not below it as in warpgroup 0."""
    key = ("extent_where_run", op.index, first)
    if key not in an.cache:
        an.cache[key] = _extent_where_run(an, op, first)
    return an.cache[key]


def _extent_where_run(an: Analysis, op: Op, first: bool) -> tuple[Any, float, float] | None:
    r = _definite(an, op) if first else _range(an, op)
    if r is None:
        return None
    lo, hi = _extent(r)
    start, spans = _start(an, op.smem), spans_where_run(an, op.index)
    if start is not None and spans is not None and spans is not an.spans \
            and start[1] is not None and start[2] is not None:
        smem, off = op.smem, 0
        if isinstance(smem, Addr) and not isinstance(smem.base, Symbol):
            off = smem.offset   # (`[r+off]`: r's bounds, as `_start` takes them)
            smem = smem.base
        sp = spans.of(smem)
        ring = start[3]
        same_ring = sp.ring is None if ring is None else (
            sp.ring is not None and sp.ring[0] is ring[0] and sp.ring[1:] == ring[1:])
        if sp.root is start[0] and same_ring and sp.lo is not None and sp.hi is not None:
            lo += max(0, sp.lo + off - start[1])
            hi -= max(0, start[2] - (sp.hi + off))
    return (r[0], lo, hi)


def _overlap(a: Range | None, b: Range | None, moved: int | None = None) -> bool:
    """May two ranges share a byte? `moved`: how far b's ring counter advanced since b's
    address was taken (None: unknown), for two ranges on one ring."""
    if a is None or b is None or a[0] is not b[0]:
        return False
    # (Registers compare by identity: `==` on a Reg builds a setp.)
    _, a_lo, a_hi, a_ring = a
    _, b_lo, b_hi, b_ring = b
    if (a_ring is not None and b_ring is not None and a_ring[0] is b_ring[0]
            and a_ring[1:3] == b_ring[1:3] and moved is not None
            and (moved + a_ring[3] - b_ring[3]) % a_ring[1]
            and a_lo is not None and a_hi is not None and b_lo is not None and b_hi is not None):
        # Different stages of one ring: disjoint when both fit inside one stage's stride.
        first = min(a_lo, b_lo)
        if max(a_hi, b_hi) - first <= a_ring[2]:
            return False
    a0, a1 = _extent(a)
    b0, b1 = _extent(b)
    return a0 < b1 and b0 < a1


def _overwrite_check(an: Analysis, state: State, op: Op) -> None:
    if not any(f[0] in ("bulk", "bulk_done", "bulk_seen") for f in state.may):
        return
    mine = _range(an, op)
    for s, age, moved in an.pending(state, "bulk"):
        theirs = _range(an, an.op_at[s])
        if not _overlap(mine, theirs, moved) or blocks.apart(an, op, an.op_at[s], mine, theirs,
                                                             moved):
            continue
        firsts = _definite(an, op), _definite(an, an.op_at[s])
        if not _overlap(*firsts, moved) or blocks.apart(an, op, an.op_at[s], *firsts, moved):
            _size_note(an, s, op.index)
        else:
            how = ("it was never committed" if age is None else
                   "no cp.async.bulk.wait_group.read has covered its group yet")
            an.report(Hazard.BULK_SRC_OVERWRITE, f"{op.role.value} writes "
                      f"{an.describe(op.smem)} while an earlier bulk store may still be "
                      f"reading it ({how})", [("write", op.index), ("store", s)])
            return
    for s, w, moved, _ in an.pending(state, "bulk_done"):
        if not _overlap(mine, _range(an, an.op_at[s]), moved) \
                or an.div.same_single_threads(w, op.index) or told(an, state, s, w, op.index):
            continue
        if not _overlap(_definite(an, op), _definite(an, an.op_at[s]), moved):
            _size_note(an, s, op.index)
        else:
            an.report(Hazard.BULK_SRC_OVERWRITE, f"{op.role.value} writes "
                      f"{an.describe(op.smem)} in threads that did not wait for the earlier "
                      "bulk store's read, with no CTA barrier after that wait",
                      [("write", op.index), ("store", s), ("wait", w)])
            return
    _seen_check(an, state, op, mine)


def _seen_check(an: Analysis, state: State, op: Op, mine: Range | None) -> None:
    """The write `op` against the stores pending in their issuing threads at a CTA barrier
    since ("bulk_seen", `hazards_bulk_release.barrier`): the barrier orders the write after
    the store's issue, not after its read. Writes by threads that include every issuing
    one are left to those threads' own "bulk" and "bulk_done" facts. Each side's bytes are
    bounded over the threads that run it (`extent_where_run`): a warpgroup writing its own
    rows of a stage while another's store reads that one's rows is clean."""
    # (both import this module)
    from .hazards_bulk_release import crossed, let_in_by_release
    from .overwrites import _uniform
    for s, b, moved, _ in an.pending(state, "bulk_seen"):
        store = an.op_at[s]
        # (a condition the same in every thread may skip the write, not change who runs it)
        if an.div.same_threads(op.index, s, _uniform(an)) \
                or not _meets(an, op, store, mine, _range(an, store), moved, False) \
                or let_in_by_release(an, op):
            continue
        if not _meets(an, op, store, _definite(an, op), _definite(an, store), moved, True):
            _size_note(an, s, op.index)
            continue
        role, where, what = crossed(an, b, "this thread")
        an.report(Hazard.BULK_SRC_OVERWRITE, f"{op.role.value} writes "
                  f"{an.describe(op.smem)} while a bulk store that other threads issued may "
                  "still be reading it (no cp.async.bulk.wait_group.read had retired its "
                  f"group at {where} since: the {what} orders the write after the "
                  "store's issue, not after its read)",
                  [("write", op.index), ("store", s), (role, b)])
        return


def _meets(an: Analysis, write: Op, store: Op, a: Range | None, b: Range | None,
           moved: int | None, first: bool) -> bool:
    """May the ranges a (of `write`) and b (of `store`) share a byte, in any stage and over
    the threads that run each?"""
    if not _overlap(a, b, moved) or blocks.apart(an, write, store, a, b, moved):
        return False
    x, y = extent_where_run(an, write, first), extent_where_run(an, store, first)
    return x is None or y is None or (x[1] < y[2] and y[1] < x[2])


def _align_check(an: Analysis, op: Op) -> None:
    v = an.val(op.smem)
    sym = v.root
    if v.kind is not Kind.addr or not isinstance(sym, Symbol) or not sym.space.is_shared:
        return
    info = an.map_info(op.map)
    repeat = info.swizzle_repeat if info is not None else None
    need = max(128, repeat or 0)
    have = sym.align or sym.type.bytes
    after_static = ""
    statics = any(s.count is not None for s in an.kernel.shared)
    if sym.count is None:
        # Seen on an H100: dynamic shared memory starts right after the kernel's static
        # .shared variables, so an .extern array's own .align is not honoured past 16 bytes;
        # with none, it starts at the 1024-aligned start of the window (`extern_align`).
        have = extern_align(have, statics)
    if sym.count is None and statics:
        static = [s.name for s in an.kernel.shared if s.count is not None]
        listed = ", ".join(static[:4]) + (", ..." if len(static) > 4 else "")
        after_static = (" (dynamic shared memory starts after this kernel's static .shared "
                        f"variables {listed}, so its .align is not honoured: move those "
                        "variables into the dynamic region, after the buffer, e.g. "
                        "MbarrierRing(..., storage=Addr(dyn, offset)) for a ring's barriers)")
    if v.offset:   # an offset keeps only the alignment its lowest set bit allows
        have = min(have, v.offset & -v.offset)
    past = residue(an.spans, op.smem, need) if v.offset is None else None
    if past:       # a run-time part (a ring's stage) a multiple of `need`, a constant not
        have = min(have, past & -past)
    if have < need:
        why = (f"the {repeat}-byte repeat of its swizzle ({info.source})"
               if info is not None and repeat and repeat > 128 else "128 bytes")
        # The declaration leads: its align= is what to change.
        decl = getattr(an.kernel, "decl_locs", {}).get(sym.name)
        text = (f".{'extern .' if sym.count is None else ''}shared .align {sym.align or '-'} "
                f".{sym.type.value} {sym.name}[{sym.count or ''}]")
        at = f"{v.offset:+d}" if v.offset else f" at {past} past a multiple of {need}" \
            if past else ""
        an.report(Hazard.TMA_SMEM_ALIGN, f"{op.role.value} uses shared buffer {sym.name}"
                  f"{at}, aligned to {have} bytes; TMA "
                  f"buffers need {why}{after_static}",
                  ([("buffer", (text, decl))] if decl is not None else [])
                  + [("copy", op.index)], dedupe=(sym, v.offset, need))


@handles(Role.TMA_STORE, Role.BULK_STORE)
def store(an: Analysis, state: State, op: Op, report: bool) -> State:
    """A TMA or bulk store: `tma-store-negative-coord` for a coordinate known (or bounded) to be
    below zero; records the store as pending in the bulk group being built."""
    if report:
        for n, c in enumerate(op.coords):
            value = an.const(c)
            if value is not None and value < 0:
                an.report(Hazard.TMA_STORE_NEGATIVE_COORD, f"coordinate {n} of the store is "
                          f"{value}: stores must start inside the tensor",
                          [("store", op.index), ("coordinate", an.def_site(c))])
                break
            # TMA reads coordinates as .s32: u32 arithmetic below zero is negative too.
            low = an.spans.of(c).folded().lo if value is None else None
            if low is not None and low < 0:
                low = _lowest_where_run(an, op.index, c, low)
            if low is not None and low < 0:
                an.report(Hazard.TMA_STORE_NEGATIVE_COORD, f"coordinate {n} of the store "
                          f"can be as low as {low} (in the first CTAs or threads, e.g. a halo "
                          "at ctaid * w - h): stores must start inside the tensor",
                          [("store", op.index), ("coordinate", an.def_site(c))])
                break
        if op.role is Role.TMA_STORE:
            _align_check(an, op)
        _fence_check(an, state, op)
    return State(state.must, state.may | {("bulk", op.index, None, 0)}, state.tx)


class _Within(Spans):
    """Spans with the thread identities bounded to the threads that run one statement."""

    def __init__(self, an: Analysis, bounds: dict[str, tuple[int, int]]):
        super().__init__(an.values, an.spans.dims, an.spans.statics)
        self.bounds = bounds

    def _special(self, name: str) -> Span:
        if name in self.bounds:
            return Span(None, *self.bounds[name])
        return super()._special(name)


def _lowest_where_run(an: Analysis, i: int, operand: Any, low: int) -> int | None:
    """The lower bound of `operand` over the threads that run statement i (None: no thread
    runs it), when the CTA shape lets the conditions guarding i be evaluated per thread: a
    consumer branch's `wg - 1` is >= 0 there although it is -1 in warpgroup 0. Conditions
    that cannot be evaluated are left out (more threads: a bound no higher); `low` (the
    CTA-wide bound) when nothing is known."""
    spans = spans_where_run(an, i)
    if spans is None:
        return None
    return low if spans is an.spans else spans.of(operand).folded().lo


def spans_where_run(an: Analysis, i: int) -> Spans | None:
    """`an.spans` with the thread identities bounded to the threads that run statement i
    (see `_lowest_where_run`): `an.spans` itself when that is every thread or cannot be
    told, None when no thread runs it."""
    sets = an.div.threads
    if sets is None:
        return an.spans
    masks = sets.conj(an.div.stmt_tokens(i), partial=True)
    assert masks is not None   # (partial: never None)
    run = 0
    for m in masks:   # any elected lane
        run |= m
    if run == sets.all:
        return an.spans
    if not run:
        return None
    bounds = sets.id_bounds(run)
    key = ("within", tuple(sorted(bounds.items())))
    spans = an.cache.get(key)
    if spans is None:
        spans = an.cache[key] = _Within(an, bounds)
    return spans


def _fence_check(an: Analysis, state: State, op: Op) -> None:
    if not any(f[0] in ("smem_dirty", "smem_fenced") for f in state.may):
        return
    mine = _range(an, op)
    for s, *at in an.pending(state, "smem_dirty"):
        if not _overlap(mine, _range(an, an.op_at[s])):
            continue
        if not _overlap(_definite(an, op), _range(an, an.op_at[s])):
            _size_note(an, op.index, s, "smem-no-proxy-fence")
        else:
            # (at: the named barrier's statement the write was carried from, unfenced)
            where = (f"before the {op.role.value} reads it" if not at else "before the "
                     "writing threads' named barrier (bar.arrive, or bar.sync with a thread "
                     f"count) that this thread's bar.sync waits on; the {op.role.value} "
                     "reads it")
            an.report(Hazard.SMEM_NO_PROXY_FENCE, f"{an.describe(op.smem)} was written with a "
                      f"generic-proxy store and no fence.proxy.async.shared::cta follows it "
                      f"{where} through the async proxy",
                      [("store", op.index), ("write", s), *[("barrier", a) for a in at]],
                      dedupe=(op.index, "fence"))
            return
    for s, via, _ in an.pending(state, "smem_fenced"):
        if not _overlap(mine, _range(an, an.op_at[s])) or an.div.same_single_threads(
                s, op.index) or via is None and barred(an, s, op.index):
            continue
        if not _overlap(_definite(an, op), _range(an, an.op_at[s])):
            _size_note(an, op.index, s, "smem-no-proxy-fence")
        else:
            how = (f"with no CTA barrier between those writes and the {op.role.value} (nor an "
                   "mbarrier.arrive of the writing threads after their fence whose phase this "
                   "thread waited for)" if via is None else "at a named barrier this thread "
                   "only arrives at (bar.arrive does not wait: the writers must arrive and "
                   "the storing threads sync)")
            an.report(Hazard.SMEM_NO_PROXY_FENCE, f"{an.describe(op.smem)} was written (and "
                      f"fenced) by other threads, {how}",
                      [("store", op.index), ("write", s)]
                      + ([("barrier", via)] if via is not None else []),
                      dedupe=(op.index, "barrier"))
            return


def barred(an: Analysis, write: int, read: int) -> bool:
    """Does an unguarded CTA barrier lie on every path from the write to the read that the
    reading threads can take (`Divergence.leaves`), with some such path? A fenced write
    reaches a read by `if (wg < 2) bar.sync 1, 256;` the way the other threads skip the
    barrier; the reading thread, in warpgroup 0, took the barrier."""
    key = ("barred", write, read)
    if key in an.cache:
        return an.cache[key]
    cfg = an.cfg
    bars = an.cache.get("barred.bars")
    if bars is None:
        bars = an.cache["barred.bars"] = sorted(
            {o.index for o in an.ops if o.role in (Role.CTA_BARRIER, Role.CLUSTER_BARRIER)
             and an.body[o.index].guard is None})

    def between(lo: int, hi: int) -> bool:   # a barrier among statements lo..hi-1
        at = bisect.bisect_left(bars, lo)
        return at < len(bars) and bars[at] < hi

    home, end = cfg.block_of(write), cfg.block_of(read)
    if home == end and write < read:
        out = between(write + 1, read)
    else:
        # (block, crossed a barrier): the read reached along a path with no barrier is
        # False; reached only past barriers, True; never reached (a fact carried across
        # branches), False
        out, reached = True, False
        crossed = between(write + 1, cfg.blocks[home].stmts.stop)
        seen: set[tuple[int, bool]] = set()
        todo = [(home, b, crossed) for b in cfg.succs(home)]
        while todo:
            p, b, crossed = todo.pop()
            if (b, crossed) in seen or b >= len(cfg.blocks) or an.div.leaves(read, p, b):
                continue
            seen.add((b, crossed))
            stmts = cfg.blocks[b].stmts
            if b == end:
                reached = True
                if not crossed and not between(stmts.start, read):
                    out = False
                    break
            crossed = crossed or between(stmts.start, stmts.stop)
            todo += [(b, c, crossed) for c in cfg.succs(b)]
        out = out and reached
    an.cache[key] = out
    return out


@handles(Role.TMA_LOAD, Role.BULK_LOAD)
def load_into(an: Analysis, state: State, op: Op, report: bool) -> State:
    """A TMA or bulk load into shared memory: `bulk-src-overwrite` when it overwrites the source of
    a store still reading it, and `tma-smem-align` for an under-aligned TMA destination."""
    if report:
        _overwrite_check(an, state, op)
        if op.role is Role.TMA_LOAD:
            _align_check(an, op)
    return state


@handles(Role.SMEM_WRITE)
def write(an: Analysis, state: State, op: Op, report: bool) -> State:
    """A shared-memory write in a kernel with bulk stores: `bulk-src-overwrite` when it hits a
    store's source before the store's group is waited for; records the write as not yet fenced
    for the async proxy."""
    if not an.roles & {Role.TMA_STORE, Role.BULK_STORE} or _range(an, op) is None:
        return state
    if report:
        _overwrite_check(an, state, op)
    return State(state.must, state.may | {("smem_dirty", op.index)}, state.tx)


@handles(Role.COMMIT)
def commit(an: Analysis, state: State, op: Op, report: bool) -> State:
    """cp.async.bulk.commit_group: the pending bulk stores become the newest group."""
    return state.commit_group("bulk", _AGE_CAP)


@handles(Role.WAIT_GROUP)
def wait_group(an: Analysis, state: State, op: Op, report: bool) -> State:
    """cp.async.bulk.wait_group N: the groups older than the N most recent are retired (their
    sources free for this thread; for the others after a CTA barrier)."""
    # wait_group N lets the N most recent groups stay pending; uncommitted ops stay too.
    # A retired store is remembered until a CTA barrier: the waiting thread knows the
    # source is free, other threads learn it only through that barrier, or through an
    # mbarrier the waiting thread arrives on after the wait (the last field: those arrives,
    # `hazards_bulk_release.hand_on`) once they wait on it (`hazards_bulk_release.acquire`).
    done = {f for f in state.may if f[0] == "bulk" and f[2] is not None and f[2] >= op.n}
    if not done:
        return state
    retired = {("bulk_done", f[1], op.index, f[3], frozenset[int]()) for f in done}
    return State(state.must, (state.may - done) | retired, state.tx)


def at_exit(an: Analysis, state: State, at: int | None) -> None:
    """`bulk-group-not-waited`: bulk stores still pending (never committed, or committed and not
    waited for) where the kernel exits."""
    pend = an.pending(state, "bulk")
    if not pend:
        return
    stores = sorted({s for s, _, _ in pend})
    never = sorted({s for s, age, _ in pend if age is None})
    how = ("never committed" if len(never) == len(stores) else
           "committed but not waited for" if not never else "not committed or not waited for")
    ends = at is not None and isinstance(an.body[at].insn, Ret | Exit)
    an.report(Hazard.BULK_GROUP_NOT_WAITED, f"{len(stores)} bulk store"
              f"{'' if len(stores) == 1 else 's'} {how} may still read shared memory when the "
              "kernel exits here",
              [("exit" if ends else "last", at)] + [("store", s) for s in stores[:3]],
              dedupe=frozenset(stores))


EXIT_CHECKS.append(at_exit)
OWNED.add("bulk")   # a bulk async-group belongs to the thread that committed it


def _ring_steps(an: Analysis) -> None:
    """A synthetic RING_STEP op at every write of a counter that indexes a ring of store
    sources, so the facts can count how far the ring moved since each store."""
    if not an.roles & {Role.TMA_STORE, Role.BULK_STORE}:
        return
    counters = {}
    for op in an.ops:
        if op.role in (Role.TMA_STORE, Role.BULK_STORE):
            r = _range(an, op)
            if r is not None and r[3] is not None:
                counters[r[3][0]] = r[3][1]
    an.add_ring_steps(counters)


PREPARE.append(_ring_steps)


def ring_step_amount(an: Analysis, op: Op, n: int) -> int | None:
    """How far a RING_STEP moves its counter on a ring of n stages (`add c, c, k`: k;
    `xor c, c, n/2`, an index toggled in place, is x + n/2 modulo n when n is a power of
    two), None for any other write."""
    reg, insn = op.value, an.body[op.index].insn
    kind = getattr(insn, "op", None)
    if kind not in ("add", "sub", "xor") or insn.a is not reg or an.body[op.index].guard \
            is not None:
        return None
    k = an.const(insn.b)
    if k is None:
        return None
    if kind == "xor":
        return k if n & (n - 1) == 0 and k == n // 2 else None
    return -k if kind == "sub" else k


@handles(Role.RING_STEP)
def ring_step(an: Analysis, state: State, op: Op, report: bool) -> State:
    """`add c, c, k` moves the stores' ring positions by k, and `xor c, c, n/2` (an index
    toggled in place) by n/2, as does a stage register's advance and wrap (`stages.moved`:
    `MbarrierRing`'s views, which `bulk-src-released` compares with the stage an arrive
    releases); any other write of c loses them."""
    reg = op.value
    changed = False
    may = set()
    for f in state.may:
        if f[0] in MOVED and f[3] is not None:
            ring = (_range(an, an.op_at[f[1]]) or (None,) * 4)[3]
            if ring is not None and ring[0] is reg:
                n = ring[1]
                moves = ring_step_amount(an, op, n)
                if moves is None:
                    moves = stages.moved(an.values, op.index, reg, n)
                f = (*f[:3], None if moves is None else (f[3] + moves) % n, *f[4:])
                changed = True
        may.add(f)
    return State(state.must, frozenset(may), state.tx) if changed else state
