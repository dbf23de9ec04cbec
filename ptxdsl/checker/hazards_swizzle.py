"""`wgmma-swizzle-mismatch`: a wgmma descriptor whose layout type (its swizzle) is not the
swizzle of the TMA loads that wrote the tile it reads.

TMA writes a tile permuted by its map's swizzle (the 16-byte chunks of each W-byte row moved
by the row's index); the tensor cores undo the permutation the descriptor's layout type
names. When the two differ, nothing faults and every product is computed from shuffled
operands: the classic host/device disagreement (`CU_TENSOR_MAP_SWIZZLE_NONE` on the host map,
`128B` in the descriptors; or a 64B map under 128B descriptors).

What the rule needs, and where it stays silent:

- the descriptor built as ptxdsl's `descriptor`, nvcc, CUTLASS or Triton build it
  (`layout_of`);
- the tile's start traced to a shared symbol (`read_extent`), and every TMA load of known box
  that overlaps it (`_load_extents`) with a known swizzle: a map declared with
  `swizzle=` / an `SmemLayout` / a `TensorMap`, `maps={...: {"swizzle": ...}}`, or a
  constant `tensormap.replace ... swizzle_mode` in the kernel;
- all those loads agreeing among themselves (two writers of one tile with different swizzles
  is not this rule's to judge: Triton's maps in one workspace at unknown offsets look like
  that), and no 1-D bulk copy or thread store overlapping the tile (bytes the kernel lays out
  itself: a P tile, an epilogue reusing the buffer).
"""

from __future__ import annotations

from typing import Any

from ..instructions.arith import Binary
from ..instructions.move import Cvt, Mov
from ..operands import Imm, Reg, Vec
from .analysis import STRUCTURAL, Analysis
from .findings import Hazard
from .guards import _WIDTH, _fields, _imm, _only_def
from .hazards_ring import _load_extents, read_extent
from .ops import Role

# The widest start-address mask: an 18-bit shared address (before `shr 4`; the field's 14
# bits and Triton's 15 after it fit too).
_MASK = 0x3FFFF


def _masking(an: Analysis, x: Any) -> Any:
    """The register a mask or a width change of `x` was taken from, else None."""
    insn = _only_def(an, x)
    if isinstance(insn, Cvt | Mov) and isinstance(insn.a, Reg):
        return insn.a
    if isinstance(insn, Binary) and insn.op == "and" and 0 < (_imm(insn.b) or 0) <= _MASK:
        return insn.a     # (nvcc narrows the mask by the bits it knows are zero: 0x3FC00)
    return None


def _unmasked(an: Analysis, x: Any) -> Any:
    """`x` before the masks and width changes applied to an address before its `shr 4`."""
    for _ in range(8):
        y = _masking(an, x)
        if y is None:
            return x
        x = y
    return x


def _address(an: Analysis, x: Any, depth: int = 0) -> Any:
    """The shared address a descriptor's start-address field was taken from: `x` followed
    back through the field's mask (`and 0x3FFF`, Triton's `bfe x, 4, 15`), widening or
    narrowing cvt/mov, an added offset (Triton's per-warpgroup half of the tile), to the
    `shr 4` of the address, in whichever order the compiler placed them. The offset is
    dropped: the address found is the tile's base, where its writers are looked up."""
    for _ in range(8):
        insn = _only_def(an, x)
        if _masking(an, x) is not None:
            x = _masking(an, x)
        elif isinstance(insn, Binary) and insn.op == "shr" and _imm(insn.b) == 4:
            return _unmasked(an, insn.a)
        elif isinstance(insn, Binary) and insn.op == "add" and depth < 2:
            found = [a for a in (insn.a, insn.b) if isinstance(a, Reg)
                     and _address(an, a, depth + 1) is not None]
            return _address(an, found[0], depth + 1) if len(found) == 1 else None
        elif str(getattr(insn, "op", "")).startswith("bfe.") and len(insn.srcs) == 3 and \
                _imm(insn.srcs[1]) == 4 and isinstance(insn.srcs[0], Reg):
            return _unmasked(an, insn.srcs[0])
        else:
            return None
    return None


def _unpacked(an: Analysis, half: Any) -> Any:
    """The 64-bit register whose high word `half` is (`mov.b64 {lo, half}, d`), or None."""
    insn = _only_def(an, half)
    if getattr(insn, "op", None) == "mov.b64" and len(insn.d) == 1 and \
            isinstance(insn.d[0], Vec) and len(insn.d[0].items) == 2 and \
            insn.d[0].items[1] is half and len(insn.srcs) == 1:
        return insn.srcs[0]
    return None


def layout_of(an: Analysis, desc: Any) -> tuple[int, Any] | None:
    """(layout type, shared address) of a wgmma descriptor register: as ptxdsl's
    `descriptor` builds it (`_fields`), as nvcc and CUTLASS do (`or.b64` of the constant
    fields onto the masked, widened `addr >> 4`, then k-steps added), or repacked from
    32-bit halves (`mov.b64 d, {lo + step, hi}` with hi the high word of such a descriptor:
    CUTLASS's k-steps). None for anything else."""
    got = _fields(an, desc)
    if got is not None:
        return (got[0] >> 62) & 3, got[2]
    for _ in range(64):
        insn = _only_def(an, desc)
        step = _imm(insn.b) if isinstance(insn, Binary) else None
        if isinstance(insn, Binary) and insn.op == "add" and step is not None and step >= 0:
            desc = insn.a
        elif isinstance(insn, Binary) and insn.op == "or" and step is not None:
            addr = _address(an, insn.a)
            return None if addr is None else ((step >> 62) & 3, addr)
        elif getattr(insn, "op", None) == "mov.b64" and len(insn.srcs) == 1 and \
                isinstance(insn.srcs[0], Vec) and len(insn.srcs[0].items) == 2:
            hi = insn.srcs[0].items[1]
            if isinstance(hi, Imm) and isinstance(hi.value, int):
                return None    # (a start address from the low word alone: not followed)
            desc = _unpacked(an, hi)
            if desc is None:
                return None
        else:
            return None
    return None


def _name(width: int) -> str:
    return "no swizzle" if width == 0 else f"the {width}B swizzle"


def _thread_writes(an: Analysis) -> list[tuple[Any, float, float] | None]:
    """The shared extents the kernel's stores write (None for one not traced), once per
    kernel: every wgmma operand compares its tile with them."""
    hit = an.cache.get("swizzle_thread_writes")
    if hit is None:
        hit = an.cache["swizzle_thread_writes"] = [
            read_extent(an, w.smem, 1) for w in an.ops if w.role is Role.SMEM_WRITE]
    return hit


def swizzle_mismatch(an: Analysis) -> None:
    """Report each wgmma operand whose descriptor's swizzle differs from the one swizzle of
    the TMA loads that write its tile."""
    extents = None
    for op in an.ops:
        if op.role is not Role.WGMMA:
            continue
        insn = an.body[op.index].insn
        descs = [("B", insn.b_desc)]
        if not isinstance(insn.a, tuple):
            descs.append(("A", insn.a))
        for side, desc in descs:
            got = layout_of(an, desc)
            if got is None:
                continue
            code, addr = got
            want = 0 if code == 0 else _WIDTH[code]     # (0: the map's "none")
            tile = read_extent(an, addr, 16)
            if tile is None:
                continue
            root, lo, hi = tile
            if extents is None:
                extents = _load_extents(an)
            writers = [(o, a, b) for o, a, b in extents.get(id(root), ()) if a < hi and lo < b]
            if not writers or any(o.role is not Role.TMA_LOAD or b == float("inf")
                                  for o, _, b in writers):
                continue
            if any(e is not None and e[0] is root and e[1] < hi and lo < e[2]
                   for e in _thread_writes(an)):
                continue   # threads write it too (a P tile, an epilogue reusing the buffer)
            infos = [an.map_info(o.map) for o, _, _ in writers]
            widths = {i.swizzle_width if i is not None else None for i in infos}
            if len(widths) != 1 or None in widths:
                continue
            (have,) = widths
            if have is None or have == want:
                continue
            o = writers[0][0]
            info = infos[0]
            assert info is not None
            where = getattr(root, "name", "its buffer") + (f"+{lo:g}" if lo else "")
            an.report(Hazard.WGMMA_SWIZZLE_MISMATCH,
                      f"this wgmma's {side} descriptor reads the tile at {where} with "
                      f"{_name(want)} (layout type {code}), but the TMA load that writes it "
                      f"lays it out with {_name(have)} ({info.source or 'its map'}): the "
                      "tensor cores read shuffled operands and every result is wrong, with "
                      "no fault",
                      [("wgmma", op.index), ("copy", o.index)],
                      dedupe=("swizzle", o.index, want))   # once per tile, not per k-step


STRUCTURAL.append(swizzle_mismatch)
