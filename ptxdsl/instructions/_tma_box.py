"""The bytes one TMA box writes to shared memory, from what a kernel's author has at hand: a
box and an element type, or an `SmemLayout` (the box that fills one of its atom columns).

One reading of element types for `pipeline.tx_bytes` (expect_tx counts) and for the box
declarations the hazard checker reads (`Kernel.param_tensormap(box=...)`,
`MbarrierRing(loads=...)`), and TMA's box rules, the one copy every helper, the
`tensormap.replace .box_dim` form and `runtime.tensormap_desc.validate` apply: 1 to 5
dimensions of 1..256 elements, the innermost a multiple of 16 bytes and within the swizzle
span. A box written as a tuple is in numpy order (outermost first), as `TensorMap.tiled`
takes it; a `TiledDesc`'s `box_dim` is in driver order (innermost first).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Set
from typing import Any

from ..errors import BuildError, OperandError
from ..operands import _show, plain_str
from ..types import ScalarType
from .base import int_like


def _ptx_type_bits(name: str) -> int | None:
    """Bits of a PTX or wgmma type spelling ('f16', '.u8', 'e4m3', 'tf32'), else None."""
    from .wgmma import ptx_type_named
    named = ptx_type_named(name)
    return None if named is None else named.bits


def elem_bytes(what: str, dtype: Any) -> int:
    """Bytes of one element of `dtype`: a ptxdsl type, a PTX or wgmma type name (PTX's
    meaning) or a numpy dtype of numbers."""
    dtype = plain_str(dtype)
    # A PTX spelling means the PTX type: numpy reads 'f16' as float128 and 'u8' as uint64,
    # which made an expect_tx 8 times the bytes the copy delivers (the wait never ends).
    bits = dtype.bits if isinstance(dtype, ScalarType) else \
        _ptx_type_bits(dtype) if isinstance(dtype, str) else None
    if bits is not None:
        if bits % 8:
            raise OperandError(what, "dtype", "a type of whole bytes", _show(dtype))
        return bits // 8
    from .wgmma import numpy_code
    code = numpy_code(dtype)
    if code is not None:
        raise OperandError(what, "dtype", f"a PTX type name or numpy's full name "
                           f"({code!r}): numpy's codes read otherwise in PTX", repr(dtype))
    # numpy reads None as float64 and takes object/str/void dtypes, none of them a tensor
    # element: only numbers TMA has a data type for count (bool, int, uint, float of 1 to 8
    # bytes); complex numbers and float128 have none (TensorMap.tiled refuses them), and
    # counted as 16-byte elements made an expect_tx no copy delivers.
    dt = None
    if dtype is not None:
        try:
            import numpy as np
            dt = np.dtype(dtype)
        except Exception:  # noqa: BLE001 - anything numpy cannot read is refused below
            pass
    if dt is not None and dt.kind in "biuf" and dt.itemsize <= 8:
        return int(dt.itemsize)
    if dt is not None and dt.kind in "fc":
        raise OperandError(what, "dtype", "an element type TMA copies (1 to 8 bytes: no "
                           "complex numbers, no float128)", f"numpy {dt.name}")
    raise OperandError(what, "dtype", "a ptxdsl type (t.f32) or a numpy dtype of numbers, "
                       "or a PTX or wgmma type name ('f16', 'e4m3')", _show(dtype))


MAX_RANK = 5            # tensor maps (and so boxes) of 1 to 5 dimensions
MAX_BOX_DIM = 256       # boxDim[i] (cuTensorMapEncodeTiled; tensormap.replace .box_dim)
INNER_MULTIPLE = 16     # boxDim[0] * element size: whole 16-byte units (cuTensorMapEncodeTiled)
BOX_RULE = f"1 to {MAX_RANK} positive box dimensions of at most {MAX_BOX_DIM}"


def box_dim_ok(n: Any) -> bool:
    """One box extent TMA takes: an int (not a bool) of 1..256."""
    return isinstance(n, int) and not isinstance(n, bool) and 1 <= n <= MAX_BOX_DIM


def inner_problems(inner_bytes: int, span: int | None) -> tuple[str, ...]:
    """The rules a box's innermost extent of `inner_bytes` breaks under a swizzle whose span
    is `span` bytes (None: no swizzle, or an interleaved map, where the span does not bound
    it), as `runtime.tensormap_desc.RULES` ids: 'box_inner_bytes', 'swizzle_span'."""
    return (("box_inner_bytes",) if inner_bytes % INNER_MULTIPLE else ()) + (
        ("swizzle_span",) if span is not None and inner_bytes > span else ())


def box_dims(what: str, box: Any) -> tuple[int, ...]:
    """1 to 5 box extents of 1..256 from any iterable of them, or one int."""
    box = int_like(box)
    # Any iterable of dimensions (a tuple, list, numpy shape or array), but not text, and not
    # a set or mapping: a set drops repeated dimensions, (8, 8) would count 8 elements.
    dims: tuple[Any, ...] = (box,) if isinstance(box, int) else tuple(box) if isinstance(
        box, Iterable) and not isinstance(box, str | bytes | Set | Mapping) else ()
    dims = tuple(int_like(d) for d in dims)
    if not 1 <= len(dims) <= MAX_RANK or not all(box_dim_ok(d) for d in dims):
        raise OperandError(what, "box", f"{BOX_RULE} (integers: TMA's boxDim limits)", _show(box))
    return dims


def check_inner(what: str, box: Any, inner_bytes: int, span: int | None, how: str) -> None:
    """Refuse a box whose innermost extent (`how` it counts, e.g. '64 x 2 bytes') TMA
    cannot copy (see `inner_problems`)."""
    rules = inner_problems(inner_bytes, span)
    if "box_inner_bytes" in rules:
        raise OperandError(what, "box", f"an innermost extent of a multiple of "
                           f"{INNER_MULTIPLE} bytes (TMA's boxDim[0] rule)",
                           f"{_show(box)}: {how} = {inner_bytes} bytes")
    if "swizzle_span" in rules:
        raise OperandError(what, "box", f"an innermost extent of at most the swizzle's "
                           f"{span} bytes", f"{_show(box)}: {how} = {inner_bytes} bytes")


def numpy_box(what: str, box: Any, dtype: Any,
              span: int | None = None) -> tuple[tuple[int, ...], int]:
    """(box dimensions, element bytes) of a box in numpy order (innermost last) that TMA
    can copy with a swizzle of `span` bytes (None: none)."""
    dims = box_dims(what, box)
    size = elem_bytes(what, dtype)
    check_inner(what, box, dims[-1] * size, span,
                f"the last (innermost) extent {dims[-1]} x {size} bytes")
    return dims, size


def desc_box(what: str, desc: Any) -> None:
    """Refuse a tensor-map description (a `TiledDesc`: box in driver order) whose box TMA
    cannot copy, by the rules `runtime.tensormap_desc.validate` applies to it."""
    box = getattr(desc, "box_dim", None)
    dims = box_dims(what, box)
    interleaved = getattr(getattr(desc, "interleave", None), "name", "NONE") != "NONE"
    span = None if interleaved else getattr(getattr(desc, "swizzle", None), "span_bytes", None)
    bits = getattr(getattr(desc, "data_type", None), "bits", None)
    if isinstance(bits, int):
        check_inner(what, box, dims[0] * bits // 8, span,
                    f"boxDim[0] (innermost) {dims[0]} x {bits} bits")


def box_bytes(what: str, box: Any, dtype: Any) -> int:
    """Bytes one box of `box` elements (numpy order) of `dtype` writes to shared memory."""
    dims, size = numpy_box(what, box, dtype)
    return math.prod(dims) * size


def declared_width(box: Any, swizzle: Any) -> int | None:
    """The swizzle row width in bytes (0: none) a declaration that `declared_box` accepted
    states: an `SmemLayout`'s own, or `swizzle` when given; None for a box and dtype without
    one (the swizzle is then not known, not "none")."""
    from .wgmma_desc import SmemLayout, SwizzleMode
    if isinstance(box, SmemLayout):
        return box.swizzle.value
    return None if swizzle is None else SwizzleMode.coerce(swizzle).value


def declared_box(what: str, box: Any, dtype: Any, swizzle: Any) -> tuple[int, int | None, str]:
    """(box bytes, swizzle repeat in bytes or None, how it was given) of a declaration: `box`
    an `SmemLayout` (its `tma_box`, element type and swizzle; `dtype` and `swizzle` left
    out) or box dimensions with `dtype` (and optionally `swizzle`: none, 32B, 64B, 128B)."""
    from .wgmma_desc import SmemLayout, SwizzleMode
    if isinstance(box, SmemLayout):
        if dtype is not None or swizzle is not None:
            raise OperandError(what, "dtype, swizzle", "nothing beside an SmemLayout (its "
                               "element type and swizzle are the box's)",
                               f"{_show(dtype)}, {_show(swizzle)}")
        inner, outer = box.atom_elems, box.outer
        box_dims(what, (outer, inner))
        return (inner * outer * box.bits // 8, 8 * box.swizzle.value or None,
                f"the TMA box of SmemLayout {box.describe()}")
    if dtype is None:
        raise OperandError(what, "dtype", "the element type of the box (t.bf16, 'f16', "
                           "np.float32), or box= an SmemLayout or TensorMap", "nothing")
    span = None
    if swizzle is not None:
        try:
            span = SwizzleMode.coerce(swizzle).value or None
        except BuildError:
            raise OperandError(what, "swizzle", "none, 32B, 64B or 128B (or the runtime "
                               "Swizzle member)", _show(swizzle)) from None
    dims, size = numpy_box(what, box, dtype, span)
    n = math.prod(dims) * size
    repeat = 8 * span if span else None
    name = dtype.value if isinstance(dtype, ScalarType) else getattr(dtype, "__name__", dtype)
    return n, repeat, f"box {list(dims)} of {name}"
