"""Reader for `ptxdsl.instructions.sfu`: ex2, lg2, rcp, sqrt, rsqrt, sin, cos, tanh."""

from __future__ import annotations

from typing import Any

from ...instructions.sfu import Sfu, SfuMode, SfuOp
from ...types import ScalarType
from . import reader

_TYPES = {t.value: t for t in ScalarType}
_MODES = {m.value: m for m in SfuMode}


@reader(*(op.value for op in SfuOp))
def sfu(parts: tuple[str, ...], ops: list[Any]) -> Sfu | None:
    """`op{.mode}{.ftz}.type d, a` into `Sfu` (a missing mode is the class's refusal); None
    for another form."""
    t = _TYPES.get(parts[-1])
    if t is None or len(ops) != 2 or not 2 <= len(parts) <= 4:
        return None
    quals = parts[1:-1]
    ftz = "ftz" in quals
    modes = [q for q in quals if q != "ftz"]
    if len(modes) > 1 or len(quals) != len(modes) + ftz:
        return None
    mode = _MODES.get(modes[0]) if modes else None
    if modes and mode is None:
        return None
    return Sfu(SfuOp(parts[0]), t, ops[0], ops[1], mode, ftz)
