"""setmaxnreg: move registers between a warpgroup and its CTA's register pool
(PTX ISA §9.7.19.5; PTX 8.0, sm_90a and the later arch/family-specific targets).

::

    setmaxnreg.dec.sync.aligned.u32 40;    // the producer warpgroup gives registers back
    setmaxnreg.inc.sync.aligned.u32 232;   // the consumer warpgroups take them (blocks until
                                            // the CTA's pool has enough)

The count is an immediate in [24, 256], a multiple of 8 [ptxas]. The per-kernel register
budget (the counts the warpgroups ask for against what the CTA holds) is checked when the
module is emitted: `ptxdsl.regbudget`.
"""

from __future__ import annotations

import enum

import attrs

from ..types import Requires, req
from .base import Instruction, check_enum, check_imm, refuse

__all__ = ["RegAction", "SetMaxNReg", "setmaxnreg_inc", "setmaxnreg_dec", "FORMS"]

# cuda::ptx: PTX ISA 80, SM_90a, SM_100a/f, SM_103a/f, SM_110a/f, SM_120a/f, SM_121a/f.
R_SETMAXNREG = req("8.0", 90, arch=(90, 100, 103, 110, 120, 121), family=True)
MIN_COUNT, MAX_COUNT = 24, 256


class RegAction(enum.Enum):
    """`.inc` asks the CTA pool for registers (and waits for them); `.dec` gives them back."""

    inc = "inc"
    dec = "dec"


@attrs.frozen
class SetMaxNReg(Instruction):
    """`setmaxnreg.action.sync.aligned.u32 count;` — the executing warpgroup's per-thread
    register count becomes `count` (24..256, a multiple of 8). Every warp of the warpgroup
    must execute the same instruction."""

    MNEMONIC = "setmaxnreg"
    action: RegAction
    count: int
    REQUIRES = R_SETMAXNREG

    def __attrs_post_init__(self):
        self._set("action", check_enum(self.MNEMONIC, "action", self.action, RegAction))
        n = check_imm(self, "count", self.count, MIN_COUNT, MAX_COUNT)
        if n % 8:
            refuse(self, f"the register count must be a multiple of 8 (ptxas), got {n}")
        self._set("count", n)

    def opcode(self) -> str:
        return f"setmaxnreg.{self.action.value}.sync.aligned.u32"

    def render(self) -> str:
        return f"{self.opcode()} {self.count};"


# -- builders (cuda::ptx names, kernel first) ------------------------------------------------------
def setmaxnreg_inc(k, count: int) -> SetMaxNReg:
    """`setmaxnreg.inc.sync.aligned.u32 count;` (the warpgroup takes registers from the pool)."""
    return k.emit(SetMaxNReg(RegAction.inc, count))


def setmaxnreg_dec(k, count: int) -> SetMaxNReg:
    """`setmaxnreg.dec.sync.aligned.u32 count;` (the warpgroup releases registers)."""
    return k.emit(SetMaxNReg(RegAction.dec, count))


FORMS: list[tuple[str, Requires, str]] = [
    ("setmaxnreg.{inc,dec}.sync.aligned.u32 count", R_SETMAXNREG,
     "count 24..256, multiple of 8; needs .maxnreg or .minnctapersm (else ptxas drops it)"),
]
