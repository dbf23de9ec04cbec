"""The table of instruction forms with the PTX ISA version and target each needs.

Each instruction family module declares `FORMS`, a list of `(form, Requires, note)`; this
module renders them as markdown (`python -m ptxdsl forms`). The `Requires` objects are the
ones the instruction classes use to drive `.version`/`.target` inference, so the table is
generated from the code. Adding a family is one more name in `FAMILIES`.
"""

from __future__ import annotations

import importlib

import attrs

from .types import Requires

FAMILIES: tuple[str, ...] = (
    "tensormap",
    "fence",
    "mbarrier",
    "mbarrier_wait",
    "bulk_tensor",
    "bulk",
    "cache_policy",
    "cluster",
    "sreg",
    "st_async",
    "ld_st",
    "prefetch",
    "control",
    "multimem",
    "bits",
    "control_ptx",
    "wgmma",
    "wgmma_sp",
    "setmaxnreg",
    "matrix",
    "cvt_packed",
    "sfu",
    "tcgen05",
    "tcgen05_ldst",
    "tcgen05_mma",
    "clusterlaunchcontrol",
    "st_bulk",
    "move",
)


@attrs.frozen
class FormRow:
    family: str
    form: str
    requires: Requires
    note: str = ""

    @property
    def ptx(self) -> str:
        return str(self.requires.version)

    @property
    def target(self) -> str:
        return target_text(self.requires)


def target_text(r: Requires) -> str:
    """'sm_90' (that SM or newer), 'sm_75 to sm_89' (a form with a ceiling, `types.addr32`),
    or the arch-specific targets: 'sm_90a, sm_100a; (f) 8.8'."""
    if not r.arch_specific:
        return f"sm_{r.sm}" + (f" to sm_{r.ceiling.last_sm}" if r.ceiling is not None else "")
    text = ", ".join(f"sm_{n}a" for n in sorted(r.arch_specific))
    return text + ("; (f) from 8.8" if r.family_ok else "")


def all_forms(families: tuple[str, ...] = FAMILIES) -> list[FormRow]:
    rows = []
    for fam in families:
        module = importlib.import_module(f"ptxdsl.instructions.{fam}")
        for form, requires, note in module.FORMS:
            rows.append(FormRow(fam, form, requires, note))
    return rows


def forms_table(families: tuple[str, ...] = FAMILIES) -> str:
    """A markdown table: `| Instruction / variant | PTX | Target | Notes |`."""
    lines = ["| Instruction / variant | PTX | Target | Notes |", "|---|---|---|---|"]
    for row in all_forms(families):
        form = row.form.replace("|", "\\|")
        lines.append(f"| `{form}` | {row.ptx} | {row.target} | {row.note} |")
    return "\n".join(lines) + "\n"
