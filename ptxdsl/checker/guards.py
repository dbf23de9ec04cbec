"""Which barriers guard a copy: the mbarrier waits a producer passes, on every trip of the
copy's loop, before a TMA or bulk copy overwrites its destination.

A consumer's release (a plain `mbarrier.arrive` on an empty barrier) hands a buffer back only
if the producer waits on that barrier before it refills the buffer. Two rings in one dynamic
buffer (FlashAttention's K and V rings) often share their stage counter, so a release of V's
stage j - 1 and a wgmma still reading K's stage j + 1 are "the same stage" by index alone;
what tells them apart is that every copy into the K tiles waits on K's empty barriers and
never on V's (`released_elsewhere`).
"""

from __future__ import annotations

from typing import Any

from ..instructions.arith import Binary, Mad
from ..operands import Imm, Reg
from .analysis import Analysis
from .cfg import dominates, dominators
from .hazards_ring import _apart, _load_extents, _loads, _reach, read_extent
from .ops import Op, Role

# Descriptor layout_type (bits 62-63) -> the swizzle width in bytes (16: no swizzle, whose
# core matrices are 8 rows of 16 bytes).
_WIDTH = {0: 16, 1: 128, 2: 64, 3: 32}
_K_BYTES = 32        # every wgmma form reads 32 bytes of K per row (k16 x 2 B, k32 x 1 B, ...)


def _idom(an: Analysis) -> list:
    hit = an.cache.get("guards_idom")
    if hit is None:
        hit = an.cache["guards_idom"] = dominators(an.cfg)
    return hit


def trip_guards(an: Analysis, o: Op) -> list[Op]:
    """The waits that run before the copy `o` on every path to it and, when `o` is in a loop,
    on every trip of its innermost loop (a wait before the loop guards only the first trip;
    a wait after `o` in the loop body guards the next trip only on some paths)."""
    table = an.cache.setdefault("trip_guards", {})
    if o.index in table:
        return table[o.index]
    cfg, idom = an.cfg, _idom(an)
    b = cfg.block_of(o.index)
    inner = min((body for _, body in an.loops if b in body), key=len, default=None)
    out = []
    for w in an.ops:
        if w.role is not Role.MBAR_WAIT:
            continue
        wb = cfg.block_of(w.index)
        if inner is not None and wb not in inner:
            continue
        if (wb == b and w.index < o.index) or (wb != b and dominates(idom, wb, b)):
            out.append(w)
    table[o.index] = out
    return out


def _not_enabled(an: Analysis, o: Op, arrive: Op) -> bool:
    """Does the copy `o` run without the release `arrive` letting it: on every trip it
    waits only on barriers `arrive` cannot reach, or no wait that may be on the released
    barrier comes before it (a Q tile loaded once, before the loop whose waits are V's)?"""
    guards = trip_guards(an, o)
    if guards and all(_apart(an, g, arrive) for g in guards):
        return True
    b = an.cfg.block_of(o.index)
    for w in an.ops:
        if w.role is Role.MBAR_WAIT and not _apart(an, w, arrive):
            wb = an.cfg.block_of(w.index)
            if (wb == b and w.index < o.index) or b in _reach(an, wb):
                return False
    return True


def enables_no_copy(an: Analysis, arrive: Op) -> bool:
    """Does no TMA or bulk copy of the kernel wait on `arrive`'s barrier before it runs? The
    arrive then hands no buffer to a producer: it orders threads, as CUTLASS's
    OrderedSequenceBarrier does between ping-pong warpgroups (one's arrive lets the other
    start its MMAs)."""
    table = an.cache.setdefault("enables_no_copy", {})
    hit = table.get(arrive.index)
    if hit is None:
        loads = _loads(an)
        hit = table[arrive.index] = bool(loads) and all(_not_enabled(an, o, arrive)
                                                        for o in loads)
    return hit


def _imm(x: Any) -> int | None:
    if isinstance(x, Imm) and isinstance(x.value, int):
        return x.value
    return x if isinstance(x, int) and not isinstance(x, bool) else None


def _only_def(an: Analysis, reg: Any) -> Any:
    defs = an.values.defs.get(reg, ()) if isinstance(reg, Reg) else ()
    return an.body[defs[0]].insn if len(defs) == 1 else None


def _fields(an: Analysis, desc: Any) -> tuple[int, int, Any] | None:
    """(constant fields, 16-byte steps added since, the shared address) of a descriptor
    register as `wgmma_desc.descriptor` builds it (`mad.wide (addr >> 4), 1, C` or
    `or (addr >> 4), C`) and `k_step` advances it (`add d, delta`, delta >= 0); None for any
    other arithmetic."""
    steps = 0
    for _ in range(64):
        insn = _only_def(an, desc)
        if not isinstance(insn, Binary | Mad):
            return None
        step = _imm(insn.b)
        if isinstance(insn, Binary) and insn.op == "add" and step is not None and step >= 0:
            steps, desc = steps + step, insn.a
            continue
        if isinstance(insn, Mad) and step == 1:
            bits = _imm(insn.c)
        elif isinstance(insn, Binary) and insn.op == "or":
            bits = step
        else:
            return None
        field = _only_def(an, insn.a)
        ok = isinstance(field, Binary) and field.op == "shr" and _imm(field.b) == 4
        if not ok or bits is None:
            return None
        assert isinstance(field, Binary)
        return bits, steps, field.a
    return None


def tile_spans(an: Analysis, i: int) -> list[tuple[Any, float, float]] | None:
    """Byte extents `(root, lo, hi)` that bound what the wgmma at statement i reads, from its
    descriptors' constant fields: A's 64 rows or B's N rows by 32 bytes of K, as swizzle
    atoms (8 rows of the swizzle width W) at most max(LBO, SBO) apart, K-major or MN-major
    (the imm-trans flag); the swizzle keeps each access in its W-byte row, so the read runs
    from the W-aligned row holding the start to the last atom's end. None when a descriptor
    is not built as `descriptor` and `k_step` build it."""
    from .hazards_ring import _slot
    insn = an.body[i].insn
    out: list = []
    kbytes = 2 * _K_BYTES if getattr(insn, "SPARSE", False) else _K_BYTES   # (.sp: K doubles)
    operands = [(insn.b_desc, insn.n, insn.btype, insn.tnspB)]
    if not isinstance(insn.a, tuple):
        operands.append((insn.a, 64, insn.atype, insn.tnspA))
    for desc, rows, wtype, tnsp in operands:
        got = _fields(an, desc)
        if got is None:
            return None
        bits, steps, addr = got
        width = _WIDTH[(bits >> 62) & 3]
        stride = max((bits >> 16) & 0x3FFF, (bits >> 32) & 0x3FFF) << 4
        eb = max(1, wtype.bits // 8)
        if tnsp == 1:       # MN-major: W bytes of M/N per atom row, 8 K per atom
            atoms = -(-rows * eb // width) + max(1, kbytes // eb // 8)
        else:               # K-major: 8 rows per atom, K's 32 bytes in ceil(32 / W) atoms
            atoms = rows // 8 + -(-kbytes // width)
        span = (16 * steps) // width * width + (atoms - 2) * stride + 8 * width
        # (the address the descriptor encodes itself, not a register its arithmetic started
        # from: one whose offsets the ranges cannot follow leaves the extent unknown)
        ext = read_extent(an, addr, span)
        if ext is None:
            return None
        root, lo, hi = ext
        slot = _slot(an, addr)[1]
        aligned = slot is not None and lo % width == 0 and (
            slot[0] == "const" or (slot[0] == "ring" and slot[3] % width == 0))
        out.append((root, lo if aligned else lo - width + 16, hi))
    return out


def _assumed(an: Analysis, o: Op, a: float, b: float) -> tuple[float, float]:
    """A copy's extent with an unknown box taken to stay inside its ring stage (the stride)
    instead of running to the symbol's end."""
    from .hazards_bulk import _size, _start
    if b != float("inf") or _size(an, o) is not None:
        return a, b
    start = _start(an, o.smem)
    if start is None or start[2] is None or start[3] is None:
        return a, b
    _, n, scale, _ = start[3]
    return a, start[2] + max(0, scale * (n - 1)) + abs(scale)


def released_elsewhere(an: Analysis, tiles: list, arrive: Op, *, assume: bool = False) -> bool:
    """Positive evidence that the release `arrive` does not hand back the byte extents
    `tiles` ((root, lo, hi), a wgmma's tiles): no copy that writes them waits for it first
    (`_not_enabled`), and every copy's extent is known (a copy of unknown destination might
    write them after a wait on that barrier). `assume`: a ring copy of unknown box size is
    taken to stay in its stage (what a note then says the check assumed)."""
    if len(_loads(an)) != sum(len(v) for v in _load_extents(an).values()):
        return False
    hit = False
    for root, lo, hi in tiles:
        for o, a, b in _load_extents(an).get(id(root), ()):
            if assume:
                a, b = _assumed(an, o, a, b)
            if a < hi and lo < b:
                if not _not_enabled(an, o, arrive):
                    return False
                hit = True
    return hit
