"""The parts of the API reference that are generated from the code when the docs build.

- `ptx_pages()`: the `ptxdsl.ptx` reference, a page per group of families (docs/api/ptx.md
  includes their table of contents and cuda::ptx's tag constants): each family's description,
  its forms with the PTX ISA version and target (the `FORMS` the builders infer
  `.version`/`.target` from), every function and the instruction classes it exports. A new
  function or family appears without an edit.
- `curated_objects()`: the objects the curated pages document under the name users type
  (`ptxdsl.Kernel`, `ptxdsl.ptx.mbarrier_init`); the internals pages skip them, so each is
  described once.
"""

from __future__ import annotations

import enum
import importlib
import inspect

# Namespaces whose `__all__` the curated pages document name by name (tests/test_docs.py checks
# every name is there).
CURATED_NAMESPACES = ("ptxdsl", "ptxdsl.runtime", "ptxdsl.checker", "ptxdsl.frontend")


def curated_objects() -> set[int]:
    """ids of the objects documented on the curated pages (and of what they wrap); the
    modules documented whole there (`ptxdsl.pipeline`, ...) are not internals at all."""
    import ptxdsl
    import ptxdsl.ptx as ptx
    # Kernel's page lists its inherited methods: the core and the builder mixins are there.
    ids = {id(cls) for cls in ptxdsl.Kernel.__mro__ if cls.__module__.startswith("ptxdsl.")}
    names = [(ptx, n) for n in ptx.__all__ if inspect.isfunction(getattr(ptx, n))]
    for ns in CURATED_NAMESPACES:
        mod = importlib.import_module(ns)
        names += [(mod, n) for n in mod.__all__ if not n.startswith("__")]
    for mod, name in names:
        obj = getattr(mod, name)
        if inspect.ismodule(obj):
            continue
        ids.add(id(obj))
        ids.add(id(inspect.unwrap(obj)))
    return ids


def _forms_table(family: str) -> str:
    from ptxdsl.forms import FAMILIES, all_forms
    if family not in FAMILIES:
        return ""
    lines = ["| Form | PTX | Target | Notes |", "|---|---|---|---|"]
    for row in all_forms((family,)):
        form = row.form.replace("|", "\\|")
        lines.append(f"| `{form}` | {row.ptx} | {row.target} | {row.note} |")
    return "\n".join(lines) + "\n"


def _rst(text: str) -> str:
    return "```{eval-rst}\n" + text.rstrip() + "\n```\n"


# The ptx reference's pages, by family; a family not named here goes to "other".
PTX_GROUPS: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("tma", "TMA: tensor maps, bulk copies, cache policies, fences",
     ("tensormap", "tensormap_values", "bulk_tensor", "bulk", "cache_policy", "fence")),
    ("sync", "mbarriers, clusters and asynchronous stores",
     ("mbarrier", "mbarrier_wait", "cluster", "st_async", "setmaxnreg", "control_ptx")),
    ("memory", "Loads and stores (ld, st, multimem)", ("ld_st", "multimem")),
    ("registers", "Special registers and bit manipulation", ("sreg", "bits")),
    ("wgmma", "Warpgroup MMA", ("wgmma", "wgmma_sp")),
    ("tcgen05", "Blackwell tensor memory (tcgen05)", ("tcgen05", "tcgen05_ldst")),
    ("tcgen05_mma", "Blackwell MMA (tcgen05.mma, tcgen05.mma.ws)",
     ("tcgen05_mma", "tcgen05_mma_ptx")),
)


def _ptx_names():
    import ptxdsl.ptx as ptx
    functions: dict[str, list[str]] = {}
    classes: dict[str, list[str]] = {}
    constants = []
    for name in ptx.__all__:
        obj = getattr(ptx, name)
        if isinstance(obj, enum.Enum):
            constants.append(name)
            continue
        family = inspect.unwrap(obj).__module__.rsplit(".", 1)[-1]
        (classes if inspect.isclass(obj) else functions).setdefault(family, []).append(name)
    return functions, classes, constants


def _family(family: str, functions: list[str], classes: list[str]) -> str:
    module = importlib.import_module(f"ptxdsl.instructions.{family}")
    doc = inspect.cleandoc(module.__doc__ or "")
    out = [f"## `{family}`\n", _rst(f".. currentmodule:: ptxdsl.ptx\n\n{doc}")]
    table = _forms_table(family)
    if table:
        out.append("Forms, with the PTX ISA version and target each needs "
                   "(what `.version`/`.target` inference uses):\n\n" + table)
    if functions:
        out.append(_rst("\n".join(f".. autofunction:: ptxdsl.ptx.{n}" for n in functions)))
    if classes:
        links = ", ".join(f":class:`~ptxdsl.instructions.{family}.{n}`" for n in classes)
        out.append(_rst(f"Classes (also as ``ptx.<name>``; see the internals): {links}."))
    return "\n".join(out)


def ptx_pages() -> dict[str, str]:
    """{file name: Markdown (with reST blocks)}: `ptx_index.md`, which docs/api/ptx.md
    includes (the table of contents and the tag constants), and one page per group."""
    import ptxdsl.ptx as ptx
    functions, classes, constants = _ptx_names()
    families = set(functions) | set(classes)
    grouped = [g for _, _, fams in PTX_GROUPS for g in fams]
    groups = [(slug, title, [f for f in fams if f in families]) for slug, title, fams in PTX_GROUPS]
    groups.append(("other", "Other families", sorted(families - set(grouped))))
    pages, toc = {}, []
    for slug, title, fams in groups:
        if not fams:
            continue
        n = sum(len(functions.get(f, [])) for f in fams)
        pages[f"ptx/{slug}.md"] = (f"# `ptxdsl.ptx`: {title}\n\n{n} functions, generated from "
                                   "the code when the docs are built.\n\n"
                                   + "\n".join(_family(f, functions.get(f, []),
                                                        classes.get(f, [])) for f in fams))
        toc.append(f"/_generated/ptx/{slug}")
    index = [f"`ptxdsl.ptx` has {sum(map(len, functions.values()))} functions in "
             f"{len(families)} families, and {len(constants)} constants "
             "([cuda::ptx's tags](#tag-constants)).\n",
             "```{toctree}\n:maxdepth: 2\n\n" + "\n".join(toc) + "\n```\n",
             "## Tag constants\n",
             "cuda::ptx's tag values; the functions take them, their names as strings "
             "(`\"space_shared\"`) or the short names (`\"shared\"`).\n",
             _rst(".. currentmodule:: ptxdsl.ptx\n\n" + "\n".join(
                 f".. data:: {n}\n   :value: {type(getattr(ptx, n)).__name__}."
                 f"{getattr(ptx, n).name}\n" for n in constants))]
    pages["ptx_index.md"] = "\n".join(index)
    return pages
