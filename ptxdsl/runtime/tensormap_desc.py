"""Tensor-map descriptions and the cuTensorMapEncodeTiled rule checker (no driver needed).

No cuda.bindings import: device-side encoding code, static checkers and CPU tests use it on
machines without a driver. The enums and PTX translation tables live in `tensormap_enums` and
are re-exported here.

`TiledDesc` holds a description in driver order (dimension 0 innermost). Build it from
numpy order (outermost first) with `TiledDesc.from_numpy_order`, then `validate(desc)`
lists every broken rule of digest §7.2, one `Violation` per rule, naming the values.
"""

from __future__ import annotations

import attrs
import numpy as np

from ptxdsl.instructions._tma_box import MAX_BOX_DIM, box_dim_ok, inner_problems
from ptxdsl.runtime.errors import TensorMapRuleError
from ptxdsl.runtime.tensormap_enums import (
    PTX_ELEMTYPE_TO_DATATYPE,
    DataType,
    Dims,
    Interleave,
    InterleaveLike,
    L2Promotion,
    L2PromotionLike,
    OobFill,
    OobFillLike,
    Swizzle,
    SwizzleLike,
    TmaDType,
    data_type_of,
)

__all__ = ["PTX_ELEMTYPE_TO_DATATYPE", "RULES", "DataType", "Interleave", "L2Promotion",
           "OobFill", "Swizzle", "TiledDesc", "Violation", "check", "data_type_of", "validate"]


def _int(v) -> int | None:
    """An int for a Python or numpy integer (bool excluded), else None: `int()` would turn
    64.7 into 64 and "64" into 64 silently."""
    if isinstance(v, bool | np.bool_) or not isinstance(v, int | np.integer):
        return None
    return int(v)


def _ints(values, field: str) -> tuple[int, ...]:
    one = _int(values)
    if one is not None:
        return (one,)
    if not isinstance(values, tuple | list | np.ndarray):
        return _bad(field, values)
    items = [_int(v) for v in (values.tolist() if isinstance(values, np.ndarray) else values)]
    out = tuple(v for v in items if v is not None)
    if len(out) != len(items):
        return _bad(field, values)
    return out


def _address(value) -> int:
    n = _int(value)
    if n is None or not 0 <= n < 1 << 64:
        raise TensorMapRuleError([Violation(
            "integral", f"global_address: expected an integer device address in [0, 2^64), "
            f"got {type(value).__name__} {value!r}")])
    return n


def _strides_error(message: str):
    """A numpy-order stride description the driver's form cannot take (still a ValueError)."""
    raise TensorMapRuleError([Violation("strides", message)])


def _prod(values) -> int:
    n = 1
    for v in values:
        n *= v
    return n


def _bad(field, values):
    raise TensorMapRuleError([Violation(
        "integral", f"{field}: expected integers (Python or numpy), got "
        f"{type(values).__name__} {values!r}"[:300])])


@attrs.frozen
class TiledDesc:
    """Everything cuTensorMapEncodeTiled takes, in driver order (index 0 = innermost)."""

    data_type: DataType = attrs.field(converter=lambda v: DataType.coerce(v, "data_type"))
    global_address: int = attrs.field(converter=_address)
    global_dim: tuple[int, ...] = attrs.field(converter=lambda v: _ints(v, "global_dim"))
    global_strides: tuple[int, ...] = attrs.field(
        converter=lambda v: _ints(v, "global_strides"))
    box_dim: tuple[int, ...] = attrs.field(converter=lambda v: _ints(v, "box_dim"))
    element_strides: tuple[int, ...] = attrs.field(
        converter=lambda v: _ints(v, "element_strides"))
    interleave: Interleave = attrs.field(default=Interleave.NONE,
                                         converter=lambda v: Interleave.coerce(v, "interleave"))
    swizzle: Swizzle = attrs.field(default=Swizzle.NONE,
                                   converter=lambda v: Swizzle.coerce(v, "swizzle"))
    l2_promotion: L2Promotion = attrs.field(
        default=L2Promotion.NONE, converter=lambda v: L2Promotion.coerce(v, "l2_promotion"))
    oob_fill: OobFill = attrs.field(default=OobFill.NONE,
                                    converter=lambda v: OobFill.coerce(v, "oob_fill"))

    @property
    def rank(self) -> int:
        """The number of dimensions of the tensor (1 to 5)."""
        return len(self.global_dim)

    @property
    def box_elements(self) -> tuple[int, ...]:
        """Elements one box delivers per dimension (driver order): ceil(boxDim[i] /
        elementStrides[i]), except dimension 0 with interleave NONE, whose stride TMA ignores
        (digest §7.2). A stride that is missing or below 1 (a description `validate` refuses)
        counts as 1."""
        out = []
        for i, b in enumerate(self.box_dim):
            e = self.element_strides[i] if i < len(self.element_strides) else 1
            if e < 1 or (i == 0 and self.interleave is Interleave.NONE):
                e = 1
            out.append(-(-b // e))
        return tuple(out)

    @property
    def box_bytes(self) -> int:
        """Shared-memory bytes one box fills: also the mbarrier expect_tx count. Counts the
        elements TMA delivers (`box_elements`), not boxDim: with elementStrides[i] = s it loads
        ceil(boxDim[i] / s) along dimension i."""
        n = self.box_elements
        if not n:
            return 0
        return self.data_type.inner_bytes(n[0]) * _prod(n[1:])

    @classmethod
    def from_numpy_order(cls, address: int, shape: Dims, dtype: TmaDType, box: Dims, *,
                         strides: Dims | None = None, byte_strides: Dims | None = None,
                         element_strides: Dims | None = None,
                         interleave: InterleaveLike = Interleave.NONE,
                         swizzle: SwizzleLike = Swizzle.NONE,
                         l2_promotion: L2PromotionLike = L2Promotion.NONE,
                         oob_fill: OobFillLike = OobFill.NONE) -> TiledDesc:
        """From a numpy-ordered description (axis 0 outermost; the last axis is contiguous).

        `strides` are in elements, `byte_strides` in bytes (give at most one; neither means
        C-contiguous). The last axis' stride must be one element: TMA reads dimension 0
        contiguously and the driver takes no stride for it.
        """
        dt = data_type_of(dtype)
        shape = _ints(shape, "shape")
        box = _ints(box, "box")
        if strides is not None and byte_strides is not None:
            _strides_error("give strides (in elements) or byte_strides, not both")
        if strides is not None:
            byte_strides = tuple(dt.inner_bytes(s) for s in _ints(strides, "strides"))
        elif byte_strides is not None:
            byte_strides = _ints(byte_strides, "byte_strides")
        else:
            byte_strides = tuple(dt.inner_bytes(_prod(shape[i + 1:])) for i in range(len(shape)))
        if len(byte_strides) != len(shape):
            _strides_error(f"strides: {len(byte_strides)} entries for a rank-{len(shape)} "
                           f"shape {shape}")
        if len(shape) and byte_strides[-1] != dt.inner_bytes(1) and dt.bits >= 8:
            _strides_error(
                f"strides: the last (innermost) axis must be contiguous (stride "
                f"{dt.inner_bytes(1)} bytes for {dt.driver_name}), got {byte_strides[-1]} "
                "bytes; TMA cannot stride dimension 0")
        es = (1,) * len(shape) if element_strides is None else _ints(element_strides,
                                                                      "element_strides")
        return cls(dt, _address(address), shape[::-1], byte_strides[-2::-1], box[::-1], es[::-1],
                   interleave, swizzle, l2_promotion, oob_fill)

    def numpy_order(self) -> dict:
        """The description back in numpy order (outermost first), strides in bytes."""
        elem = max(self.data_type.bits // 8, 1)
        return {"shape": self.global_dim[::-1], "byte_strides": self.global_strides[::-1] +
                (elem,), "box": self.box_dim[::-1], "element_strides":
                self.element_strides[::-1], "dtype": self.data_type.driver_name}

    # -- PTX tensormap.replace field values (device-side encoding) --
    @property
    def ptx_fields(self) -> dict[str, object]:
        """The map's fields as `tensormap.replace` takes them (`rank` as rank - 1,
        global_address, global_dim, box_dim, ...), for building the same map on the device."""
        return {
            "rank": self.rank - 1,  # .rank takes rank - 1 (digest §1.4)
            "global_address": self.global_address, "global_dim": self.global_dim,
            "global_stride": self.global_strides, "box_dim": self.box_dim,
            "element_stride": self.element_strides, "elemtype": self.data_type.ptx_elemtype,
            "interleave_layout": self.interleave.ptx_interleave_layout,
            "swizzle_mode": self.swizzle.ptx_swizzle_mode,
            "swizzle_atomicity": self.swizzle.ptx_swizzle_atomicity,
            "fill_mode": self.oob_fill.ptx_fill_mode,
        }


@attrs.frozen
class Violation:
    """One tensor-map rule a description breaks: the rule's id and what is wrong."""

    rule: str
    message: str


# Rule ids, in the order of digest §7.2's table; the docs and tests refer to them. Two more
# rules, "integral" (every dimension, stride, box size and the address is an integer) and
# "enum" (the data type, interleave, swizzle, L2 promotion and OOB fill are members, names or
# integer values of their enums), are checked when a TiledDesc is built: a TensorMapRuleError
# naming them, before `validate` runs.
RULES = ("rank", "interleave_rank", "address_align", "global_dim_range", "packed_dim0",
         "stride_count", "stride_multiple", "stride_range", "box_dim_range", "box_count",
         "box_inner_bytes", "packed_box0", "element_stride_range", "element_stride_count",
         "swizzle_span", "interleave32_swizzle", "packed_swizzle", "oob_fill_type",
         "swizzle_atomicity_cc", "packed_cc", "box_bytes")

# Driver 580 (CUDA 13) on an H100 refuses a box whose traversed bytes — the product over
# dimensions of boxDim[i] // elementStrides[i], times the element size — exceed 228 KiB, the
# shared memory of an SM (not in cuda.h; found by tests/gpu_tensormap_fuzz.py: 0 mismatches
# over 10,674 descriptions the other rules accept; an H200 with driver 13000 floors the same
# way, dimension 0 included). This rule follows the driver (tests/test_reliability_cpu.py
# replays its recorded verdicts), so it is not `TiledDesc.box_bytes`, the bytes TMA delivers
# (ceil, dimension 0 whole with interleave NONE): a box whose delivered bytes exceed 228 KiB
# while its floor count fits is encoded by the driver and passes here, though no shared-memory
# destination can hold it.
MAX_BOX_BYTES = 228 * 1024

_ALIGN16_PACKED = (DataType.U4X16_ALIGN16B, DataType.U6X16_ALIGN16B)
_PACKED_SWIZZLES = {
    DataType.U6X16_ALIGN16B: (Swizzle.NONE, Swizzle.B128, Swizzle.B128_ATOM_32B,
                              Swizzle.B128_ATOM_64B),
    DataType.U4X16_ALIGN16B: (Swizzle.NONE, Swizzle.B128, Swizzle.B128_ATOM_32B),
}


def validate(d: TiledDesc, compute_capability: tuple[int, int] | None = None) -> list[Violation]:
    """Every cuTensorMapEncodeTiled rule (digest §7.2) that `d` breaks; empty when valid.

    With `compute_capability`, also the rules that depend on the GPU (the 128B atomicity
    swizzles and the packed 4/6-bit types need compute capability 10.0 or newer).
    """
    out: list[Violation] = []

    def bad(rule: str, message: str) -> None:
        out.append(Violation(rule, message))

    dt, rank = d.data_type, d.rank
    name = dt.driver_name
    if not 1 <= rank <= 5:
        bad("rank", f"tensorRank must be 1..5, got {rank} (global_dim {d.global_dim})")
    if d.interleave is not Interleave.NONE and rank < 3:
        bad("interleave_rank", f"tensorRank must be >= 3 with interleave "
            f"{d.interleave.driver_name}, got {rank}")
    align = 32 if d.interleave is Interleave.B32 or dt in _ALIGN16_PACKED else 16
    if d.global_address % align:
        why = "INTERLEAVE_32B" if d.interleave is Interleave.B32 else (
            name if align == 32 else "TMA")
        bad("address_align", f"globalAddress must be {align}-byte aligned for {why}, got "
            f"0x{d.global_address:x} (address % {align} = {d.global_address % align})")
    dims_bad = [(i, n) for i, n in enumerate(d.global_dim) if not 1 <= n <= 1 << 32]
    if dims_bad:
        bad("global_dim_range", "globalDim[i] must be 1..2^32, got " + ", ".join(
            f"globalDim[{i}]={n}" for i, n in dims_bad))
    if rank and dt in _ALIGN16_PACKED and d.global_dim[0] % 128:
        bad("packed_dim0", f"globalDim[0] must be a multiple of 128 for {name}, got "
            f"{d.global_dim[0]}")
    if rank and dt is DataType.U4X16_ALIGN8B and d.global_dim[0] % 2:
        bad("packed_dim0", f"globalDim[0] must be even for {name}, got {d.global_dim[0]}")
    if len(d.global_strides) != max(rank - 1, 0):
        bad("stride_count", f"globalStrides needs rank-1 = {max(rank - 1, 0)} entries (bytes, "
            f"for dims 1..rank-1), got {len(d.global_strides)}: {d.global_strides}")
    mult = 32 if d.interleave is Interleave.B32 or dt in _ALIGN16_PACKED else 16
    off = [(i, s) for i, s in enumerate(d.global_strides) if s % mult]
    if off:
        bad("stride_multiple", f"globalStrides must be multiples of {mult} bytes, got " +
            ", ".join(f"globalStrides[{i}]={s}" for i, s in off))
    # 0 is legal (the driver accepts it: every index of that dimension reads the same data).
    big = [(i, s) for i, s in enumerate(d.global_strides) if not 0 <= s < 1 << 40]
    if big:
        bad("stride_range", "globalStrides must be in 0..2^40-1 bytes, got " +
            ", ".join(f"globalStrides[{i}]={s}" for i, s in big))
    boxes_bad = [(i, b) for i, b in enumerate(d.box_dim) if not box_dim_ok(b)]
    if boxes_bad:
        bad("box_dim_range", f"boxDim[i] must be 1..{MAX_BOX_DIM}, got " + ", ".join(
            f"boxDim[{i}]={b}" for i, b in boxes_bad))
    if len(d.box_dim) != rank:
        bad("box_count", f"boxDim needs {rank} entries (one per dimension), got "
            f"{len(d.box_dim)}: {d.box_dim}")
    inner = dt.inner_bytes(d.box_dim[0]) if d.box_dim else 0
    # The helpers' rule too (`instructions._tma_box`, one copy). The span bounds the inner
    # extent with interleave NONE only.
    span = d.swizzle.span_bytes if d.interleave is Interleave.NONE else None
    inner_rules = inner_problems(inner, span) if d.box_dim else ()
    # cuda.h states this for interleave NONE; the driver applies it to the interleaved
    # layouts too (found by tests/gpu_tensormap_fuzz.py on an H100, driver 580).
    if "box_inner_bytes" in inner_rules:
        bad("box_inner_bytes", f"boxDim[0] * elementSize must be a multiple of 16 bytes, got "
            f"{d.box_dim[0]} * {name} = {inner} bytes")
    if d.box_dim and len(d.element_strides) == len(d.box_dim) and all(
            e >= 1 for e in d.element_strides):
        n = [b // e for b, e in zip(d.box_dim, d.element_strides, strict=True)]
        nbytes = dt.inner_bytes(n[0]) * _prod(n[1:])
        if nbytes > MAX_BOX_BYTES:
            bad("box_bytes", f"the box must fit an SM's shared memory: the product of "
                f"boxDim[i] // elementStrides[i] times the element size is {nbytes} bytes, "
                f"more than {MAX_BOX_BYTES} (228 KiB)")
    if d.box_dim and dt in _ALIGN16_PACKED and d.box_dim[0] != 128:
        bad("packed_box0", f"boxDim[0] must be 128 for {name}, got {d.box_dim[0]}")
    es_bad = [(i, e) for i, e in enumerate(d.element_strides) if not 1 <= e <= 8]
    if es_bad:
        bad("element_stride_range", "elementStrides[i] must be 1..8, got " + ", ".join(
            f"elementStrides[{i}]={e}" for i, e in es_bad))
    if len(d.element_strides) != rank:
        bad("element_stride_count", f"elementStrides needs {rank} entries, got "
            f"{len(d.element_strides)}: {d.element_strides}")
    if "swizzle_span" in inner_rules:
        bad("swizzle_span", f"with swizzle {d.swizzle.driver_name} the inner box extent "
            f"(boxDim[0] * elementSize = {d.box_dim[0]} * {name} = {inner} bytes) must not "
            f"exceed the swizzle span of {span} bytes")
    # Documented in cuda.h; driver 580 (CUDA 13.0) encodes the map anyway, but TMA behaviour
    # for the combination is unspecified, so it is refused here.
    if d.interleave is Interleave.B32 and d.swizzle is not Swizzle.B32:
        bad("interleave32_swizzle", f"interleave 32B requires swizzle 32B, got "
            f"{d.swizzle.driver_name}")
    if dt in _PACKED_SWIZZLES:
        allowed = _PACKED_SWIZZLES[dt]
        if d.interleave is not Interleave.NONE or d.swizzle not in allowed:
            bad("packed_swizzle", f"{name} requires interleave NONE and swizzle in "
                f"{{{', '.join(s.driver_name for s in allowed)}}}, got interleave "
                f"{d.interleave.driver_name}, swizzle {d.swizzle.driver_name}")
    if d.oob_fill is OobFill.NAN_REQUEST_ZERO_FMA and (not dt.is_float or dt.is_packed):
        bad("oob_fill_type", f"oobFill NAN_REQUEST_ZERO_FMA needs a floating-point data type, "
            f"got {name}")
    if compute_capability is not None and compute_capability < (10, 0):
        cc = f"{compute_capability[0]}.{compute_capability[1]}"
        if d.swizzle.needs_atomicity:
            bad("swizzle_atomicity_cc", f"swizzle {d.swizzle.driver_name} needs compute "
                f"capability 10.0+ (swizzle atomicity), device is {cc}")
        if dt.is_packed:
            bad("packed_cc", f"data type {name} needs compute capability 10.0+, device is {cc}")
    return out


def check(d: TiledDesc, compute_capability: tuple[int, int] | None = None) -> TiledDesc:
    """Raise TensorMapRuleError listing every broken rule; return `d` when valid."""
    violations = validate(d, compute_capability)
    if violations:
        raise TensorMapRuleError(violations)
    return d
