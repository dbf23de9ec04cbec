"""Kernel argument packing, planned once per kernel signature.

`ArgPacker(kernel, params)` lays the parameters out in one aligned ctypes buffer, builds the
`void*[]` array that cuLaunchKernel(Ex) takes as kernelParams (pointing into that buffer), one
`struct.Struct` whose format reproduces that layout, and one converter closure per parameter.
A launch runs the converters (each returns the value to store, after its type and range
checks) and one `pack_into` into the buffer, then hands the driver the array's address: no
per-launch allocation.

Converters raise `ArgumentError` naming the kernel, the parameter, what was expected and what
was given. The buffer is reused by every launch (the driver copies the values during the
launch call), so one packer must not be used by two threads at once: `Function` keeps a pool
of packers and takes one per launch.

`pack` is generated once per signature (see `_compile_pack`): the common argument types
(an int in range, a float, a DeviceBuffer, a ptxdsl TensorMap) are accepted inline without a
converter call, everything else goes through the parameter's converter, so the checks are the
same either way. Where the C launch module is built, the same common cases are packed in C
by the launch call itself, into a buffer on its own stack (`c_spec`,
`ptxdsl._launch_c.launch_packed`); anything else returns to the Python `pack`, so what is
accepted, refused and written is the same on both paths (tests/test_launch_c.py compares
the bytes).
"""

from __future__ import annotations

import ctypes
import os
import struct
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from ptxdsl.runtime.arrays import device_pointer
from ptxdsl.runtime.errors import ArgumentError
from ptxdsl.runtime.memory import DeviceBuffer
from ptxdsl.runtime.tensormap import MAP_ARRAY_DTYPES, TensorMap
from ptxdsl.types import ScalarType

_launch_c: Any
try:
    from ptxdsl import _launch_c
except ImportError:     # built at install only where a compiler was found
    _launch_c = None
else:
    _launch_c.set_types(DeviceBuffer, TensorMap)

# A parameter's kind in a C packing spec (the K_* values of ptxdsl/_launch_c.c).
C_SLOW, C_PTR, C_UINT, C_SINT, C_F32, C_F64, C_MAP = range(7)

_UINT_FMT = {8: "B", 16: "H", 32: "I", 64: "Q"}
_SINT_FMT = {8: "b", 16: "h", 32: "i", 64: "q"}
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


def _int_converter(kernel: str, p, packer) -> tuple[str, Callable]:
    lo, hi, spelled = _int_range(p.type)
    signed = p.type.kind == "s"
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
                iv = device_pointer(v, packer.stream)
            except (TypeError, ValueError):
                iv = None
        if iv is None:
            raise ArgumentError(kernel, p.name, expected, _given(v))
        if not lo <= iv <= hi:
            raise ArgumentError(kernel, p.name, expected, f"{iv} (out of range)")
        return iv if signed else iv & mask

    fast_lo = lo if signed else 0

    def convert(v):
        if type(v) is int and fast_lo <= v <= hi:
            return v
        return slow(v)

    return (_SINT_FMT if signed else _UINT_FMT)[p.type.bits], convert


def _float_converter(kernel: str, p) -> tuple[str, Callable]:
    fmt = _FLOAT_FMT[p.type.bits]
    one = struct.Struct("<" + fmt).pack
    expected = f"a real number for {p.type.ptx}"

    def check(x: float) -> float:
        try:
            one(x)
        except (OverflowError, struct.error):
            raise ArgumentError(kernel, p.name, f"{expected} (finite values within its range)",
                                f"{x!r} (out of range)") from None
        return x

    def convert(v):
        if type(v) is float:
            return v  # a range overflow surfaces in pack_into; ArgPacker.pack re-checks then
        if isinstance(v, (bool, np.bool_)) or not isinstance(
                v, (int, float, np.integer, np.floating)) and not (
                isinstance(v, np.ndarray) and v.shape == () and v.dtype.kind in "iuf"):
            raise ArgumentError(kernel, p.name, expected, _given(v))
        try:
            x = float(v)
        except OverflowError:   # an int beyond any float (10**400)
            raise ArgumentError(kernel, p.name, f"{expected} (finite values within its "
                                "range)", f"an integer of {int(v).bit_length()} bits") from None
        return check(x)

    # The fast converter carries its range check for pack's error path; a function type
    # declares no attributes.
    convert.check = check  # type: ignore[attr-defined]
    return fmt, convert


def _pointer_converter(kernel: str, p, packer) -> tuple[str, Callable]:
    expected = ("a device pointer (DeviceBuffer, int, or an object with "
                "__cuda_array_interface__ / __dlpack__)")

    def convert(v):
        if type(v) is DeviceBuffer:
            ptr = v._ptr
            if ptr is not None:
                return ptr
        try:
            ptr = device_pointer(v, packer.stream)
        except (TypeError, ValueError, AttributeError, RuntimeError) as exc:
            # the message alone: a ptxdsl error's str() repeats its location and the value
            why = getattr(exc, "message", str(exc))
            raise ArgumentError(kernel, p.name, expected, f"{_given(v)}: {why}") from None
        if not 0 <= ptr < (1 << 64):
            raise ArgumentError(kernel, p.name, expected, f"address {ptr} (out of range)")
        return ptr

    return "Q", convert


def tensormap_bytes(v) -> bytes | None:
    """The 128 bytes of a tensor-map argument, or None when `v` is not one.

    Accepts ptxdsl's TensorMap, bytes/bytearray/memoryview, a numpy array of 128 bytes (a
    tensor-map parameter takes only uint8 or uint64 arrays: `_blob_converter`),
    cuda.bindings' CUtensorMap, and cuda.core's TensorMapDescriptor only where it exposes its
    bytes publicly (`_core_descriptor_bytes`).
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
        return _core_descriptor_bytes(v)
    return None


def _core_descriptor_bytes(v) -> bytes:
    """A cuda.core TensorMapDescriptor's bytes through a public interface (the buffer protocol
    or `__bytes__`), which cuda.core does not offer as of 1.2: then a TypeError saying what to
    do. (ptxdsl once read a private cuda.core field; it moved between releases.)"""
    try:
        return bytes(memoryview(v))
    except TypeError:
        pass
    if hasattr(type(v), "__bytes__"):
        return bytes(v)
    raise TypeError("cuda.core offers no public way to read a TensorMapDescriptor's 128 bytes; "
                    "build the map with ptxdsl (TensorMap.from_array), or launch through "
                    "cuda.core with Module.to_cuda_core().get_kernel(name), which takes the "
                    "descriptor as it is")


def _blob_converter(kernel: str, p) -> tuple[str, Callable]:
    size = p.size
    is_map = p.kind == "tensormap"
    expected = (f"a tensor map ({size} bytes: TensorMap, bytes, numpy array of uint8 or "
                f"uint64, or CUtensorMap)" if is_map else
                f"{size} bytes (bytes-like or numpy array)")

    def convert(v):
        # A map's bytes or its qwords; an array of another type (np.zeros(16) is float64 and
        # also 128 bytes) is data passed by mistake. A plain "bytes" parameter takes any array.
        if is_map and isinstance(v, np.ndarray) and v.dtype not in MAP_ARRAY_DTYPES:
            raise ArgumentError(kernel, p.name, expected, f"numpy array of {v.dtype}")
        try:
            data = tensormap_bytes(v)
        except Exception as exc:
            # the message alone: a ptxdsl error's str() repeats its location and the value
            why = getattr(exc, "message", str(exc))
            raise ArgumentError(kernel, p.name, expected, f"{_given(v)}: {why}") from None
        if data is None:
            raise ArgumentError(kernel, p.name, expected, _given(v))
        if len(data) != size:  # struct's 's' would silently pad or cut
            raise ArgumentError(kernel, p.name, expected, f"{type(v).__name__} of "
                                f"{len(data)} bytes")
        return data

    return f"{size}s", convert


def _converter(kernel: str, p, packer) -> tuple[str, Callable]:
    if p.kind == "pointer":
        return _pointer_converter(kernel, p, packer)
    if p.kind in ("tensormap", "bytes"):
        return _blob_converter(kernel, p)
    if p.kind != "scalar":
        raise ValueError(f"kernel '{kernel}': parameter '{p.name}' has unknown kind {p.kind!r}")
    if p.type.is_float and p.type.bits in _FLOAT_FMT:
        return _float_converter(kernel, p)
    if p.type.kind in "usb" and p.type.bits in _UINT_FMT:
        return _int_converter(kernel, p, packer)
    raise ValueError(f"kernel '{kernel}': parameter '{p.name}' has unsupported type "
                     f"{p.type.ptx}")


def _describe(p) -> str:
    return f"{p.name}: {p.kind if p.kind != 'scalar' else p.type.ptx}"


class ArgPacker:
    """Packs the arguments of one kernel signature; see the module docstring."""

    def __init__(self, kernel: str, params: Sequence):
        self.kernel = kernel
        self.params = tuple(params)
        # The launch stream's handle while a launch packs (0: legacy default), else None:
        # array arguments order their producers' streams before it (arrays.device_pointer).
        self.stream: int | None = None
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
        fmt, pos = "<", 0
        convs = []
        for p, off in zip(self.params, offsets, strict=True):
            code, conv = _converter(kernel, p, self)
            fmt += "x" * (off - pos) + code
            pos = off + p.size
            convs.append(conv)
        self._convs = tuple(convs)
        self._struct = struct.Struct(fmt)
        assert self._struct.size == pos, (fmt, pos)
        self._names = {p.name: i for i, p in enumerate(self.params)}
        # This instance's generated specialization of the `pack` method below.
        self.pack = self._compile_pack()  # type: ignore[method-assign]
        # The C module's spec of this layout (`ptxdsl._launch_c.launch_packed` packs into a
        # buffer of its own), or None when the module is absent or a parameter has no inline
        # case (it then always packs in Python).
        kinds = [_c_kind(p, off) for p, off in zip(self.params, offsets, strict=True)]
        self.c_spec = (_launch_c.make_spec(max(end, 1), tuple(kinds))
                       if _launch_c is not None and C_SLOW not in (k[0] for k in kinds)
                       else None)

    @property
    def buffer(self) -> bytes:
        """The packed argument bytes (after the last `pack`), for inspection and tests."""
        return bytes(self._mv)

    def signature(self) -> str:
        """The kernel's parameters as `name(p: kind, ...)`, as argument errors spell them."""
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

    def _normalize(self, args) -> tuple | list:
        if args is None:
            return ()
        if isinstance(args, Mapping):
            return self._from_mapping(args)
        if isinstance(args, list):
            return args
        return (args,)

    def pack(self, args) -> int:
        """Convert `args` (a sequence in declaration order, or a mapping by parameter name)
        into the buffer; return the kernelParams address (a `void**`).

        (Replaced per instance by the generated equivalent from `_compile_pack`.)"""
        return self._pack_generic(args)

    def _bad_count(self, args) -> None:
        n = len(self._convs)
        raise ArgumentError(self.kernel, "*", f"{n} argument{'s' if n != 1 else ''} for "
                            f"{self.signature()}", f"{len(args)}")

    def _pack_values(self, values) -> None:
        try:
            self._struct.pack_into(self._mv, 0, *values)
        except (OverflowError, struct.error):
            # Only a Python float beyond an f32/f16 range gets here (every other value was
            # range-checked by its converter): find which parameter and say so.
            for conv, v in zip(self._convs, values, strict=True):
                if hasattr(conv, "check"):
                    conv.check(v)
            raise

    def _pack_generic(self, args) -> int:
        if type(args) is not tuple:
            args = self._normalize(args)
        convs = self._convs
        if len(args) != len(convs):
            self._bad_count(args)
        self._pack_values([conv(a) for conv, a in zip(convs, args, strict=False)])
        return self.address

    def _compile_pack(self):
        """A `pack` for this signature with each argument's common case inline.

        For `(ptr, n: u32, x: f32, map)` it reads, in effect::

            def pack(args):
                if type(args) is not tuple: args = normalize(args)
                if len(args) != 4: bad_count(args)
                a0, a1, a2, a3 = args
                v0 = (a0._ptr if type(a0) is DeviceBuffer and a0._ptr is not None else
                      a0 if type(a0) is int and 0 <= a0 <= 18446744073709551615 else c0(a0))
                v1 = a1 if type(a1) is int and 0 <= a1 <= 4294967295 else c1(a1)
                v2 = a2 if type(a2) is float else c2(a2)
                v3 = a3.data if type(a3) is TensorMap else c3(a3)
                try: pack_into(buffer, 0, v0, v1, v2, v3)
                except (OverflowError, struct.error): pack_values((v0, v1, v2, v3))
                return address

        where each inline test accepts exactly what its converter `c<i>` would return unchanged.
        """
        n = len(self.params)
        if n == 0:
            return self._pack_generic
        ns = {"normalize": self._normalize, "bad_count": self._bad_count,
              "pack_into": self._struct.pack_into, "buffer": self._mv,
              "pack_values": self._pack_values, "address": self.address,
              "DeviceBuffer": DeviceBuffer, "TensorMap": TensorMap, "OverflowError": OverflowError,
              "struct_error": struct.error}
        names = [f"a{i}" for i in range(n)]
        values = [f"v{i}" for i in range(n)]
        lines = ["def pack(args):",
                 "    if type(args) is not tuple:",
                 "        args = normalize(args)",
                 f"    if len(args) != {n}:",
                 "        bad_count(args)",
                 f"    {', '.join(names)}, = args"]
        for i, (p, conv) in enumerate(zip(self.params, self._convs, strict=True)):
            ns[f"c{i}"] = conv
            a, v = names[i], values[i]
            chain = "".join(f"{value} if {test} else " for test, value in _inline_tests(p, a))
            lines.append(f"    {v} = {chain}c{i}({a})")
        lines += ["    try:",
                  f"        pack_into(buffer, 0, {', '.join(values)})",
                  "    except (OverflowError, struct_error):",
                  f"        pack_values(({', '.join(values)},))",
                  "    return address"]
        # The pseudo-file lives in this package's folder, so an ArgumentError raised from the
        # generated code names the caller's line, not "<ArgPacker k>:7".
        where = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                             f"<ArgPacker {self.kernel}>")
        exec(compile("\n".join(lines), where, "exec"), ns)  # noqa: S102
        return ns["pack"]


def _c_kind(p, offset: int) -> tuple[int, int, int, int, int]:
    """(kind, bits, offset, lo, hi) of parameter `p`: which common arguments it takes without
    its converter, for the C packer and for the generated Python `pack` (`_inline_tests`),
    so the two take exactly the same values."""
    if p.kind == "pointer":
        return (C_PTR, 64, offset, 0, (1 << 64) - 1)
    if p.kind == "tensormap" and p.size == 128:
        return (C_MAP, 0, offset, 0, 0)
    if p.kind == "scalar" and p.type.is_float and p.type.bits in (32, 64):
        return (C_F32 if p.type.bits == 32 else C_F64, p.type.bits, offset, 0, 0)
    if (p.kind == "scalar" and not p.type.is_float and p.type.kind in "usb"
            and p.type.bits in _UINT_FMT and not getattr(p, "is_bool", False)):
        lo, hi, _ = _int_range(p.type)
        if p.type.kind == "s":
            return (C_SINT, p.type.bits, offset, lo, hi)
        # negative values of bit types are converted (masked) by the converter
        return (C_UINT, p.type.bits, offset, 0, hi)
    return (C_SLOW, 0, offset, 0, 0)


def _inline_tests(p, a: str) -> list[tuple[str, str]]:
    """[(test, value)] accepting the common arguments of parameter `p` without its converter
    (tried in order), or []. A test only admits values the converter would return unchanged."""
    kind, _, _, lo, hi = _c_kind(p, 0)
    if kind == C_PTR:
        # A live DeviceBuffer, or an address as an int in range (what torch's data_ptr() gives).
        return [(f"type({a}) is DeviceBuffer and {a}._ptr is not None", f"{a}._ptr"),
                (f"type({a}) is int and {lo} <= {a} <= {hi}", a)]
    if kind == C_MAP:
        return [(f"type({a}) is TensorMap", f"{a}.data")]
    if kind in (C_F32, C_F64):
        return [(f"type({a}) is float", a)]
    if kind in (C_UINT, C_SINT):
        return [(f"type({a}) is int and {lo} <= {a} <= {hi}", a)]
    return []
