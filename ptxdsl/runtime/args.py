"""Kernel argument packing, planned once per kernel signature.

`ArgPacker(kernel, params)` lays the parameters out in one aligned ctypes buffer, builds the
`void*[]` array that cuLaunchKernel(Ex) takes as kernelParams (pointing into that buffer), and
one converter closure per parameter. A launch then only runs the converters, which write
straight into the buffer, and hands the driver the array's address: no per-launch allocation.

Converters check types and ranges and raise `ArgumentError` naming the kernel, the parameter,
what was expected and what was given. The buffer is reused by every launch (the driver copies
the values during the launch call), so one packer must not be used by two threads at once:
`Function` holds a lock around pack + launch.
"""

from __future__ import annotations

import ctypes
import struct
from collections.abc import Callable, Mapping, Sequence

import numpy as np

from ptxdsl.runtime.arrays import device_pointer
from ptxdsl.runtime.errors import ArgumentError
from ptxdsl.types import ScalarType

_INT_FMT = {8: "B", 16: "H", 32: "I", 64: "Q"}
_FLOAT_FMT = {16: "e", 32: "f", 64: "d"}
TENSORMAP_BYTES = 128


def _given(v) -> str:
    text = repr(v)
    if len(text) > 60:
        text = text[:57] + "..."
    return f"{type(v).__name__} {text}"


def _int_range(t: ScalarType) -> tuple[int, int, str]:
    bits = t.bits
    if t.kind == "s":
        return -(1 << (bits - 1)), (1 << (bits - 1)) - 1, f"{t.ptx}"
    if t.kind == "b":
        # Bit types take either signedness: the bits are what the kernel reads.
        return -(1 << (bits - 1)), (1 << bits) - 1, f"{t.ptx}"
    return 0, (1 << bits) - 1, f"{t.ptx}"


def _as_int(v):
    """An int for Python ints and numpy integers / 0-d integer arrays; None otherwise."""
    if isinstance(v, (bool, np.bool_)):
        return None
    if isinstance(v, (int, np.integer)):
        return int(v)
    if isinstance(v, np.ndarray) and v.shape == () and v.dtype.kind in "iu":
        return int(v)
    return None


def _int_converter(kernel: str, p, mv: memoryview, off: int) -> Callable:
    lo, hi, spelled = _int_range(p.type)
    pack = struct.Struct("<" + _INT_FMT[p.type.bits]).pack_into
    mask = (1 << p.type.bits) - 1
    expected = f"an integer for {spelled} in {lo}..{hi}"
    accepts_pointer = p.type is ScalarType.u64
    is_bool = bool(getattr(p, "is_bool", False))
    if is_bool:
        # A .pred parameter travels as a .u32 holding 0 or 1.
        lo, hi, expected = 0, 1, "a bool (or 0/1) for a .pred parameter"

    def slow(v):
        iv = int(v) if is_bool and isinstance(v, (bool, np.bool_)) else _as_int(v)
        if iv is None and accepts_pointer and not isinstance(v, (float, np.floating)):
            # A .u64 is how most hand-written PTX declares a pointer: take a buffer too.
            try:
                iv = device_pointer(v)
            except (TypeError, ValueError):
                iv = None
        if iv is None:
            raise ArgumentError(kernel, p.name, expected, _given(v))
        if not lo <= iv <= hi:
            raise ArgumentError(kernel, p.name, expected, f"{iv} (out of range)")
        pack(mv, off, iv & mask)

    def convert(v):
        if type(v) is int and 0 <= v <= hi:
            pack(mv, off, v)
        else:
            slow(v)

    return convert


def _float_converter(kernel: str, p, mv: memoryview, off: int) -> Callable:
    bits = p.type.bits
    pack = struct.Struct("<" + _FLOAT_FMT[bits]).pack_into
    expected = f"a real number for {p.type.ptx}"

    def slow(v):
        if isinstance(v, (bool, np.bool_)) or not isinstance(
                v, (int, float, np.integer, np.floating)) and not (
                isinstance(v, np.ndarray) and v.shape == () and v.dtype.kind in "iuf"):
            raise ArgumentError(kernel, p.name, expected, _given(v))
        x = float(v)
        try:
            pack(mv, off, x)
        except (OverflowError, struct.error):
            raise ArgumentError(kernel, p.name, f"{expected} (finite values within its range)",
                                f"{x!r} (out of range)") from None

    def convert(v):
        if type(v) is float:
            try:
                pack(mv, off, v)
                return
            except (OverflowError, struct.error):
                pass
        slow(v)

    return convert


def _pointer_converter(kernel: str, p, mv: memoryview, off: int) -> Callable:
    pack = struct.Struct("<Q").pack_into
    expected = ("a device pointer (DeviceBuffer, int, or an object with "
                "__cuda_array_interface__ / __dlpack__)")

    def convert(v):
        try:
            ptr = v.ptr if type(v).__name__ == "DeviceBuffer" else device_pointer(v)
        except (TypeError, ValueError, AttributeError, RuntimeError) as exc:
            raise ArgumentError(kernel, p.name, expected, f"{_given(v)}: {exc}") from None
        if not 0 <= ptr < (1 << 64):
            raise ArgumentError(kernel, p.name, expected, f"address {ptr} (out of range)")
        pack(mv, off, ptr)

    return convert


def tensormap_bytes(v) -> bytes | None:
    """The 128 bytes of a tensor-map argument, or None when `v` is not one.

    Accepts ptxdsl's TensorMap, bytes/bytearray/memoryview, a numpy array of 128 bytes,
    cuda.bindings' CUtensorMap and cuda.core's TensorMapDescriptor.
    """
    if isinstance(v, (bytes, bytearray, memoryview)):
        return bytes(v)
    if isinstance(v, np.ndarray):
        return np.ascontiguousarray(v).tobytes()
    tname = type(v).__name__
    if tname == "TensorMap" and hasattr(v, "data"):
        return bytes(v.data)
    if tname == "CUtensorMap":
        return b"".join(int(q).to_bytes(8, "little") for q in v.opaque)
    if tname == "TensorMapDescriptor" and type(v).__module__.startswith("cuda.core"):
        from ptxdsl.runtime.tensormap import core_descriptor_bytes
        return core_descriptor_bytes(v)
    return None


def _blob_converter(kernel: str, p, mv: memoryview, off: int) -> Callable:
    size = p.size
    is_map = p.kind == "tensormap"
    expected = (f"a tensor map ({size} bytes: TensorMap, bytes, numpy array, CUtensorMap or "
                "cuda.core TensorMapDescriptor)" if is_map else
                f"{size} bytes (bytes-like or numpy array)")

    def convert(v):
        if is_map and type(v).__name__ == "TensorMap":
            data = v.data
        else:
            try:
                data = tensormap_bytes(v)
            except Exception as exc:
                raise ArgumentError(kernel, p.name, expected, f"{_given(v)}: {exc}") from None
        if data is None:
            raise ArgumentError(kernel, p.name, expected, _given(v))
        if len(data) != size:
            raise ArgumentError(kernel, p.name, expected, f"{type(v).__name__} of "
                                f"{len(data)} bytes")
        mv[off:off + size] = data

    return convert


def _converter(kernel: str, p, mv: memoryview, off: int) -> Callable:
    if p.kind == "pointer":
        return _pointer_converter(kernel, p, mv, off)
    if p.kind in ("tensormap", "bytes"):
        return _blob_converter(kernel, p, mv, off)
    if p.kind != "scalar":
        raise ValueError(f"kernel '{kernel}': parameter '{p.name}' has unknown kind {p.kind!r}")
    if p.type.is_float and p.type.bits in _FLOAT_FMT:
        return _float_converter(kernel, p, mv, off)
    if p.type.kind in "usb" and p.type.bits in _INT_FMT:
        return _int_converter(kernel, p, mv, off)
    raise ValueError(f"kernel '{kernel}': parameter '{p.name}' has unsupported type "
                     f"{p.type.ptx}")


def _describe(p) -> str:
    return f"{p.name}: {p.kind if p.kind != 'scalar' else p.type.ptx}"


class ArgPacker:
    """Packs the arguments of one kernel signature; see the module docstring."""

    def __init__(self, kernel: str, params: Sequence):
        self.kernel = kernel
        self.params = tuple(params)
        offsets, end = [], 0
        for p in self.params:
            align = max(1, int(getattr(p, "align", 0) or p.size))
            end = -(-end // align) * align
            offsets.append(end)
            end += p.size
        self.offsets = tuple(offsets)
        # Over-allocate so the base can sit on a 128-byte boundary (CUtensorMap is alignas(128)
        # in CUDA 13 headers; the driver reads the values from here during the launch call).
        self._storage = (ctypes.c_char * (max(end, 1) + 128))()
        base = ctypes.addressof(self._storage)
        shift = -base % 128
        self._mv = memoryview(self._storage).cast("B")[shift:shift + max(end, 1)]
        self.base = base + shift
        n = len(self.params)
        self._ptrs = (ctypes.c_void_p * max(n, 1))(*[self.base + o for o in offsets])
        self.address = ctypes.addressof(self._ptrs)
        self._convs = tuple(_converter(kernel, p, self._mv, o)
                            for p, o in zip(self.params, offsets, strict=True))
        self._names = {p.name: i for i, p in enumerate(self.params)}

    @property
    def buffer(self) -> bytes:
        """The packed argument bytes (after the last `pack`), for inspection and tests."""
        return bytes(self._mv)

    def signature(self) -> str:
        return f"{self.kernel}(" + ", ".join(_describe(p) for p in self.params) + ")"

    def _from_mapping(self, args: Mapping) -> list:
        unknown = [k for k in args if k not in self._names]
        missing = [p.name for p in self.params if p.name not in args]
        if unknown or missing:
            parts = []
            if missing:
                parts.append("missing " + ", ".join(missing))
            if unknown:
                parts.append("unknown " + ", ".join(map(str, unknown)))
            raise ArgumentError(self.kernel, "/".join(missing + list(map(str, unknown))),
                                f"arguments by name for {self.signature()}", "; ".join(parts))
        return [args[p.name] for p in self.params]

    def pack(self, args) -> int:
        """Convert `args` (a sequence in declaration order, or a mapping by parameter name)
        into the buffer; return the kernelParams address (a `void**`)."""
        if args is None:
            args = ()
        elif isinstance(args, Mapping):
            args = self._from_mapping(args)
        elif not isinstance(args, (tuple, list)):
            args = (args,)
        convs = self._convs
        if len(args) != len(convs):
            raise ArgumentError(
                self.kernel, "*", f"{len(convs)} argument{'s' if len(convs) != 1 else ''} "
                f"for {self.signature()}", f"{len(args)}")
        for conv, a in zip(convs, args, strict=True):
            conv(a)
        return self.address
