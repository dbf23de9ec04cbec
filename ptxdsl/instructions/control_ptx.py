"""cuda::ptx-named entry points over the kernel's control and warp instructions: exit, trap
(cuda::ptx exit.h, trap.h) and elect.sync (PTX ISA §9.7.13.8, §9.7.13.9, §9.7.12.x). Its forms
table also lists the cuda::ptx headers left out because they need sm_100 or newer.

The instruction classes are `control.Exit`, `control.Trap` and `warp.Elect` (also reached as
`k.exit()`, `k.trap()`, `k.elect_sync()`); these builders only give them cuda::ptx's names.
"""

from __future__ import annotations

from ..operands import Reg
from ..types import Requires, req
from .control import Exit, Trap
from .warp import FULL_MASK

__all__ = ["exit", "trap", "elect_sync"]


def exit(k) -> None:  # noqa: A001 - cuda::ptx's name
    """`exit;` (cuda::ptx::exit)."""
    k.emit(Exit())


def trap(k) -> None:
    """`trap;` (cuda::ptx::trap): aborts the kernel; the host sees an illegal instruction."""
    k.emit(Trap())


def elect_sync(k, membermask=FULL_MASK) -> Reg:
    """`elect.sync _|p, membermask;` returns p, true in one elected thread of `membermask`."""
    return k.elect_sync(membermask)


# -- forms: (form, requires, note) — rendered by ptxdsl.forms ----------------------------------
FORMS: list[tuple[str, Requires, str]] = [
    ("exit", req("6.3"), "PTX 1.0 / sm_50 in cuda::ptx"),
    ("trap", req("6.3"), "PTX 1.0 / sm_50 in cuda::ptx"),
    ("elect.sync {d,_}|p, membermask", req("8.0", 90), "not in cuda::ptx 13.0"),
]
