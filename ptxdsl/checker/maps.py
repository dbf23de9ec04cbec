"""What a kernel's own tensormap.replace instructions say about its maps, and how a kernel
declares the box of the maps its parameters carry (`declare_box`).

`MapFacts` collects constant `tensormap.replace` values per map (flow-insensitive: a field
written with two different values is unknown) and which shared map each global map was copied
from by cp_fenceproxy, so a map encoded in the kernel has a known box size and swizzle (used
by the expect_tx and alignment checks).
"""

from __future__ import annotations

from typing import Any

from .context import ELEM_BYTES, MapInfo, swizzle_repeat_of_mode, swizzle_width_of_mode
from .ops import Role


def declare_box(param: Any, kernel: str) -> str:
    """The declarations that tell the checker the box of the maps a parameter carries (a
    by-value tensormap, or a pointer to maps in global memory), for notes on what it could
    not check without them."""
    p = param.name
    return (f"k.param_tensormap({p!r}, box=..., dtype=...) (or box= its SmemLayout or "
            f"TensorMap), " if param.kind == "tensormap" else "") + (
        f"MbarrierRing(..., loads={{{p}: box}}), or check_module(mod, maps={{{kernel!r}: "
        f"{{{p!r}: TensorMap or {{'box_bytes': N}}}}}})")


def replaced_fields(an: Any, by_publication: bool = False
                    ) -> dict[tuple[Any, int], dict[tuple, tuple[int, int] | None]]:
    """The constant tensormap.replace values per map address: (key, stretch) -> (field, ord)
    -> (value, the replace that wrote it), or None where the field is written with several
    values or a run-time one. `by_publication`: a stretch is the replaces between two
    `cp_fenceproxy` publications from that address, in statement order (Triton encodes every
    map in one shared scratch map); otherwise one stretch, 0, holds them all."""
    published: dict[Any, list[int]] = {}
    for op in an.ops if by_publication else ():
        if op.role is Role.CP_FENCEPROXY:
            key = an.key(op, "smem")
            if key is not None:
                published.setdefault(key, []).append(op.index)
    out: dict[tuple[Any, int], dict[tuple, tuple[int, int] | None]] = {}
    for op in an.ops:
        if op.role is not Role.TMAP_REPLACE or not op.field:
            continue
        key = an.key(op, "smem")
        if key is None:
            continue
        stretch = sum(1 for i in published.get(key, ()) if i < op.index)
        v = an.const(op.value)
        slot = (op.field, an.const(op.ord) if op.ord is not None else None)
        d = out.setdefault((key, stretch), {})
        got = None if v is None else (int(v), op.index)
        if slot in d:
            old = d[slot]
            got = got if old is not None and got is not None and old[0] == got[0] else None
        d[slot] = got
    return out


class MapFacts:
    """Constant field values written by tensormap.replace, per map (flow-insensitive: a field
    written with two different values is unknown), and which shared map each global map was
    copied from by cp_fenceproxy."""

    def __init__(self, an: Any):
        self.fields: dict[Any, dict[tuple, Any]] = {
            key: {slot: None if got is None else got[0] for slot, got in d.items()}
            for (key, _), d in replaced_fields(an).items()}
        self.copies: dict[Any, set] = {}
        for op in an.ops:
            if op.role is Role.CP_FENCEPROXY:
                dst, src = an.key(op, "map"), an.key(op, "smem")
                if dst is not None and src is not None:
                    self.copies.setdefault(dst, set()).add(src)

    def info(self, key: Any) -> MapInfo | None:
        """What the kernel's own writes say of map `key` (rank, element type, box, swizzle written
        by tensormap.replace, over the copy it was made from): a `MapInfo`, or None when nothing
        is known."""
        srcs = self.copies.get(key, set())
        f: dict[tuple, Any] = dict(self.fields.get(next(iter(srcs)), {})) if len(srcs) == 1 \
            else {}
        f.update(self.fields.get(key, {}))
        if not f:
            return None
        rank, elem = f.get(("rank", None)), f.get(("elemtype", None))
        box = None
        if rank is not None and elem in ELEM_BYTES:
            dims = [f.get(("box_dim", d)) for d in range(rank + 1)]
            known = [d for d in dims if d is not None]
            # A traversal stride s loads ceil(box / s) elements of that dimension (1 unless
            # written; a stride written with an unknown value leaves the size unknown).
            strides = [f.get(("element_stride", d), 1) for d in range(rank + 1)]
            if len(known) == len(dims) and None not in strides and all(s > 0 for s in strides):
                box = ELEM_BYTES[elem]
                for d, s in zip(known, strides, strict=True):
                    box *= -(-d // s)
        mode = f.get(("swizzle_mode", None))
        repeat = swizzle_repeat_of_mode(mode) if mode is not None else None
        width = swizzle_width_of_mode(mode) if mode is not None else None
        if box is None and width is None:
            return None
        return MapInfo(box, repeat, "constant tensormap.replace values", width)

