"""Special registers read the way cuda::ptx's get_sreg.h does: `ptx.get_sreg_<name>(k)` emits
`mov.<type> d, %<name>;` and returns `d` (PTX ISA §10; %is_explicit_cluster gives a
predicate).

::

    uint32_t r = ptx::get_sreg_cluster_ctarank();    r = ptx.get_sreg_cluster_ctarank(k)

The names, types and requirements come from `operands.READABLE_SPECIAL_REGISTERS`, the one
table the kernel's `read_special` uses too; this module only lists which of them cuda::ptx
names and makes one builder per name (`get_sreg_tid_x` reads `%tid.x`).
"""

from __future__ import annotations

from ..operands import READABLE_SPECIAL_REGISTERS as SPECIAL_REGISTERS
from ..operands import Reg
from ..types import Requires

# cuda::ptx's get_sreg set, in get_sreg.h's order.
CUDA_PTX_SREGS: tuple[str, ...] = (
    *(f"{b}.{a}" for b in ("tid", "ntid") for a in "xyz"),
    "laneid", "warpid", "nwarpid",
    *(f"{b}.{a}" for b in ("ctaid", "nctaid") for a in "xyz"),
    "smid", "nsmid", "gridid", "is_explicit_cluster",
    *(f"{b}.{a}" for b in ("clusterid", "nclusterid", "cluster_ctaid", "cluster_nctaid")
      for a in "xyz"),
    "cluster_ctarank", "cluster_nctarank",
    *(f"lanemask_{m}" for m in ("eq", "le", "lt", "ge", "gt")),
    "clock", "clock_hi", "clock64", "globaltimer", "globaltimer_lo", "globaltimer_hi",
    "total_smem_size", "aggr_smem_size", "dynamic_smem_size", "current_graph_exec",
)


def builder_name(sreg: str) -> str:
    """The cuda::ptx name of the builder reading special register `sreg`: `get_sreg_<name>` with
    dots as underscores (`nctaid.x` -> `get_sreg_nctaid_x`)."""
    return "get_sreg_" + sreg.replace(".", "_")


def _make(sreg: str):
    def get_sreg(k) -> Reg:
        return k.read_special(sreg)

    t = SPECIAL_REGISTERS[sreg][0]
    get_sreg.__name__ = get_sreg.__qualname__ = builder_name(sreg)
    get_sreg.__doc__ = f"`mov.{t.value} d, %{sreg};` returns d (cuda::ptx::{builder_name(sreg)})."
    return get_sreg


__all__ = [builder_name(s) for s in CUDA_PTX_SREGS]
globals().update({builder_name(s): _make(s) for s in CUDA_PTX_SREGS})


def _forms() -> list[tuple[str, Requires, str]]:
    """One row per distinct (type, requirement), the registers listed in the form."""
    groups: dict[tuple, list[str]] = {}
    for name in CUDA_PTX_SREGS:
        t, r = SPECIAL_REGISTERS[name]
        groups.setdefault((t.value, r), []).append(name)
    rows = []
    for (t, r), names in groups.items():
        rows.append((f"mov.{t} d, %{{{','.join(names)}}}", r, "ptx.get_sreg_<name>(k)"))
    return rows


FORMS: list[tuple[str, Requires, str]] = _forms()
