"""Reader for `ptxdsl.instructions.cvt_packed`: the packed cvt forms (two values in one
register: .f16x2, .bf16x2, .e4m3x2, .e5m2x2)."""

from __future__ import annotations

from typing import Any

from ...instructions.cvt_packed import CvtPacked, Packed
from . import reader

_PACKED = {p.value: p for p in Packed}


@reader("cvt")
def cvt_packed(parts: tuple[str, ...], ops: list[Any]) -> CvtPacked | None:
    """The packed forms of cvt (`cvt.rnd{.relu}{.satfinite}.<pair>.f32 d, a, b` and the fp8 pairs)
    into `CvtPacked`; None for another form."""
    if len(parts) < 4 or len(ops) not in (2, 3):
        return None
    dtype, atype = _PACKED.get(parts[-2]), _PACKED.get(parts[-1])
    if dtype is None or atype is None or dtype is atype is Packed.f32:
        return None
    quals = parts[2:-2]
    relu, satfinite = "relu" in quals, "satfinite" in quals
    if len(quals) != relu + satfinite:
        return None
    return CvtPacked(dtype, atype, ops[0], ops[1], ops[2] if len(ops) == 3 else None, parts[1],
                     relu, satfinite)
