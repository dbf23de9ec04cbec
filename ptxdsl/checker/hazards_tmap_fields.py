"""`tmap-encoded-invalid`: a tensor map the kernel encodes with `tensormap.replace` into one
that the driver's encoder would refuse.

`cuTensorMapEncodeTiled` checks a map's fields against each other on the host; a map
encoded on the device is checked by nobody: ptxas checks no `tensormap.replace` value, and
the builders check an immediate against its own field only. The copies that use such a map
fault or move other bytes than the kernel expects (on an H200, a load through a map encoded
with an 8-byte inner box stopped the kernel with CUDA_ERROR_ILLEGAL_INSTRUCTION; the driver
refuses every combination below with CUDA_ERROR_INVALID_VALUE). Judged per encoding (the
replaces of one map address between two of its `cp_fenceproxy` publications: one shared
scratch map may encode several), from the values the kernel writes that are constants
(immediates, or registers that hold one):

- each value in its field's range, for values that reach the replace through a register
  (Triton writes `mov.b32 %r, 1` then the register): box extents 1..256, traversal strides
  1..8, tensor extents 1..2^32-1, byte strides multiples of 16 below 2^40, rank 1..5;
- the box's inner extent in bytes (box_dim[0] times the element size), without interleave,
  a multiple of 16 bytes and, with a swizzle written, at most its span (32, 64, 96 or 128
  bytes);
- a 32B interleave only with the 32B swizzle.

A field the kernel does not write comes from the map it copied (a host template): the
interleave is then taken as none (what every tiled map for a GEMM or attention kernel has),
and the other fields as unknown, so nothing is judged from them.
"""

from __future__ import annotations

from ..instructions._tma_box import MAX_BOX_DIM, MAX_RANK
from .analysis import STRUCTURAL, Analysis
from .context import ELEM_BYTES, swizzle_width_of_mode
from .findings import Hazard
from .maps import replaced_fields

_RANGES = {
    "box_dim": (1, MAX_BOX_DIM, 1, f"a box extent of 1..{MAX_BOX_DIM} elements"),
    "element_stride": (1, 8, 1, "a traversal stride of 1..8"),
    "global_dim": (1, (1 << 32) - 1, 1, "a tensor extent of 1..2^32-1 elements"),
    "global_stride": (0, (1 << 40) - 1, 16, "a byte stride, a multiple of 16 below 2^40"),
    "rank": (0, MAX_RANK - 1, 1, f"rank - 1, 0..{MAX_RANK - 1}"),
}


def _report(an: Analysis, at: int, what: str, others: list[int]) -> None:
    an.report(Hazard.TMAP_ENCODED_INVALID, f"the tensor map this tensormap.replace writes "
              f"{what}: the driver's encoder refuses that map, and no tool checks one "
              "encoded on the device; TMA copies through it fault or move other bytes",
              [("replace", at)] + [("replace", i) for i in others if i != at],
              dedupe=("tmap-fields", at, what))


def encoded_invalid(an: Analysis) -> None:
    """Report each encoding whose constant fields the driver's encoder would refuse."""
    for fields in replaced_fields(an, by_publication=True).values():
        for (field, ord_), got in fields.items():
            rng = _RANGES.get(field)
            if rng is None or got is None:
                continue
            lo, hi, step, rule = rng
            if not (lo <= got[0] <= hi and got[0] % step == 0):
                where = f"[{ord_}]" if ord_ is not None else ""
                _report(an, got[1], f"has {field}{where} = {got[0]}, not {rule}", [])
        swz, inner, elem = (fields.get(("swizzle_mode", None)), fields.get(("box_dim", 0)),
                            fields.get(("elemtype", None)))
        ilv = fields.get(("interleave_layout", None), (0, -1))
        if ilv is None:
            continue
        if ilv[0] == 2 and swz is not None and swz[0] != 1:
            _report(an, swz[1], f"has the 32B interleave with swizzle_mode {swz[0]} (a 32B "
                    "interleave needs the 32B swizzle, mode 1)", [ilv[1]])
        if inner is None or elem is None or elem[0] not in ELEM_BYTES or ilv[0] != 0:
            continue
        size = ELEM_BYTES[elem[0]]
        nbytes = inner[0] * size
        span = swizzle_width_of_mode(swz[0]) if swz is not None else None
        if span and nbytes > span:
            assert swz is not None
            _report(an, inner[1], f"has a box {inner[0]} elements of {size} bytes wide "
                    f"({nbytes} bytes) under the {span}B swizzle (mode {swz[0]}): the inner "
                    f"extent may be at most the swizzle's span, {span} bytes",
                    [swz[1], elem[1]])
        elif nbytes % 16:
            _report(an, inner[1], f"has a box {inner[0]} elements of {size} bytes wide "
                    f"({nbytes} bytes): without interleave the inner extent must be a "
                    "multiple of 16 bytes", [elem[1]])


STRUCTURAL.append(encoded_invalid)
