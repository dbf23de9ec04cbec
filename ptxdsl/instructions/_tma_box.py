"""The bytes one TMA box writes to shared memory, from what a kernel's author has at hand: a
box and an element type, or an `SmemLayout` (the box that fills one of its atom columns).

One reading of element types for `pipeline.tx_bytes` (expect_tx counts) and for the box
declarations the hazard checker reads (`Kernel.param_tensormap(box=...)`,
`MbarrierRing(loads=...)`).
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
    # element: only numbers (bool, int, uint, float, complex) count.
    if dtype is not None:
        try:
            import numpy as np
            dt = np.dtype(dtype)
            if dt.kind in "biufc":
                return int(dt.itemsize)
        except Exception:  # noqa: BLE001 - anything numpy cannot read is refused below
            pass
    raise OperandError(what, "dtype", "a ptxdsl type (t.f32) or a numpy dtype of numbers, "
                       "or a PTX or wgmma type name ('f16', 'e4m3')", _show(dtype))


def box_dims(what: str, box: Any, most: int | None = None) -> tuple[int, ...]:
    """1 to 5 positive box dimensions (at most `most` each, when given) from any iterable of
    them, or one int."""
    box = int_like(box)
    # Any iterable of dimensions (a tuple, list, numpy shape or array), but not text, and not
    # a set or mapping: a set drops repeated dimensions, (8, 8) would count 8 elements.
    dims: tuple[Any, ...] = (box,) if isinstance(box, int) else tuple(box) if isinstance(
        box, Iterable) and not isinstance(box, str | bytes | Set | Mapping) else ()
    dims = tuple(int_like(d) for d in dims)
    if not 1 <= len(dims) <= 5 or not all(
            isinstance(d, int) and not isinstance(d, bool) and 1 <= d <= (most or d)
            for d in dims):
        bound = f" of at most {most}" if most else ""
        raise OperandError(what, "box", f"1 to 5 positive box dimensions{bound}", _show(box))
    return dims


def box_bytes(what: str, box: Any, dtype: Any) -> int:
    """Bytes one box of `box` elements (any order) of `dtype` writes to shared memory."""
    return math.prod(box_dims(what, box)) * elem_bytes(what, dtype)


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
        inner, outer = box.tma_box
        return (inner * outer * box.bits // 8, 8 * box.swizzle.value or None,
                f"the TMA box of SmemLayout {box.describe()}")
    if dtype is None:
        raise OperandError(what, "dtype", "the element type of the box (t.bf16, 'f16', "
                           "np.float32), or box= an SmemLayout or TensorMap", "nothing")
    dims = box_dims(what, box, 256)     # TMA's boxDim limit (cuTensorMapEncodeTiled)
    n = math.prod(dims) * elem_bytes(what, dtype)
    repeat = None
    if swizzle is not None:
        try:
            repeat = 8 * SwizzleMode.coerce(swizzle).value or None
        except BuildError:
            raise OperandError(what, "swizzle", "none, 32B, 64B or 128B (or the runtime "
                               "Swizzle member)", _show(swizzle)) from None
    name = dtype.value if isinstance(dtype, ScalarType) else getattr(dtype, "__name__", dtype)
    return n, repeat, f"box {list(dims)} of {name}"
