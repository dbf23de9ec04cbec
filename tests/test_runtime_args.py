"""Argument packing against stand-in parameter lists (no GPU)."""

from __future__ import annotations

import ctypes
import struct

import attrs
import numpy as np
import pytest

from ptxdsl.runtime.args import ArgPacker
from ptxdsl.runtime.errors import ArgumentError
from ptxdsl.runtime.ptx_params import parse_entries
from ptxdsl.runtime.tensormap import TensorMap
from ptxdsl.types import ScalarType as T
from tests.gpu_kernels_runtime import ARGS_ECHO


@attrs.frozen
class P:
    name: str
    kind: str
    type: T
    size: int
    align: int | None = None
    is_bool: bool = False


def scalar(name, t, **kw):
    return P(name, "scalar", t, t.bytes, **kw)


PTR = P("out", "pointer", T.u64, 8)
TMAP = P("tmap", "tensormap", T.b8, 128, 64)


class FakeBuffer:
    """Quacks like ptxdsl's DeviceBuffer for the pointer path."""

    def __init__(self, ptr):
        self.ptr = ptr


class Cai:
    def __init__(self, ptr):
        self.__cuda_array_interface__ = {"data": (ptr, False), "shape": (4,), "typestr": "<f4",
                                         "version": 3}


class HostDLPack:
    """Only the DLPack protocol, over host memory."""

    def __init__(self, arr):
        self.arr = arr

    def __dlpack__(self, **kw):
        return self.arr.__dlpack__(**kw)

    def __dlpack_device__(self):
        return self.arr.__dlpack_device__()


def unpack(packer, fmt, index):
    return struct.unpack_from("<" + fmt, packer.buffer, packer.offsets[index])[0]


def test_layout_aligns_each_param_and_the_base():
    packer = ArgPacker("k", [scalar("a", T.u16), scalar("b", T.u32), TMAP, PTR])
    assert packer.offsets == (0, 4, 64, 192)
    assert packer.base % 128 == 0
    # kernelParams is a void*[] whose slots point at base + offset.
    slots = (ctypes.c_void_p * 4).from_address(packer.address)
    assert [s - packer.base for s in slots] == [0, 4, 64, 192]


def test_every_scalar_kind_is_written_at_its_offset():
    params = [scalar("a", T.u16), scalar("b", T.u32), scalar("c", T.s32), scalar("d", T.u64),
              scalar("e", T.s64), scalar("f", T.f32), scalar("g", T.f64), PTR]
    packer = ArgPacker("k", params)
    packer.pack((65535, 4_000_000_000, -5, 2**64 - 1, -2**63, 1.5, -2.25, FakeBuffer(0xABC0)))
    got = [unpack(packer, f, i) for i, f in enumerate("HIiQqfdQ")]
    assert got == [65535, 4_000_000_000, -5, 2**64 - 1, -2**63, 1.5, -2.25, 0xABC0]


def test_numpy_scalars_are_accepted():
    packer = ArgPacker("k", [scalar("a", T.u16), scalar("f", T.f32), scalar("d", T.f64)])
    packer.pack((np.uint16(7), np.float32(0.5), np.array(3.0)))
    assert [unpack(packer, f, i) for i, f in enumerate("Hfd")] == [7, 0.5, 3.0]


@pytest.mark.parametrize("t,value,expected", [
    (T.u16, 65536, "0..65535"), (T.u16, -1, "0..65535"), (T.u32, 2**32, "0..4294967295"),
    (T.s32, 2**31, "-2147483648..2147483647"), (T.s64, 2**63, "..9223372036854775807"),
    (T.u64, -1, "0..18446744073709551615"), (T.u16, np.int64(70000), "0..65535"),
])
def test_integer_range_errors_name_kernel_param_and_range(t, value, expected):
    packer = ArgPacker("my_kernel", [scalar("n", t)])
    with pytest.raises(ArgumentError) as info:
        packer.pack((value,))
    msg = str(info.value)
    assert "kernel 'my_kernel'" in msg and "parameter 'n'" in msg
    assert expected in msg and str(int(value)) in msg


@pytest.mark.parametrize("value", [3.0, "3", None, True, np.float32(1.0), [1]])
def test_integer_params_refuse_non_integers(value):
    packer = ArgPacker("k", [scalar("n", T.u32)])
    with pytest.raises(ArgumentError, match="parameter 'n': expected an integer"):
        packer.pack((value,))


def test_float_params_check_type_and_range():
    packer = ArgPacker("k", [scalar("x", T.f32)])
    packer.pack((3,))  # an int is a fine real number
    assert unpack(packer, "f", 0) == 3.0
    with pytest.raises(ArgumentError, match="out of range"):
        packer.pack((1e39,))
    with pytest.raises(ArgumentError, match="a real number for .f32"):
        packer.pack(("1.0",))
    with pytest.raises(ArgumentError, match="a real number"):
        packer.pack((True,))


def test_pred_param_takes_bools():
    packer = ArgPacker("k", [scalar("flag", T.u32, is_bool=True)])
    packer.pack((True,))
    assert unpack(packer, "I", 0) == 1
    packer.pack((np.bool_(False),))
    assert unpack(packer, "I", 0) == 0
    with pytest.raises(ArgumentError, match="a bool"):
        packer.pack((2,))


def test_count_mismatch_shows_the_signature():
    packer = ArgPacker("k", [scalar("n", T.u32), PTR])
    with pytest.raises(ArgumentError) as info:
        packer.pack((1,))
    msg = str(info.value)
    assert "2 arguments for k(n: .u32, out: pointer)" in msg and "got 1" in msg


def test_arguments_by_name():
    packer = ArgPacker("k", [scalar("n", T.u32), PTR])
    packer.pack({"out": 0x1000, "n": 9})
    assert unpack(packer, "I", 0) == 9 and unpack(packer, "Q", 1) == 0x1000
    with pytest.raises(ArgumentError, match="missing out; unknown nn"):
        packer.pack({"n": 1, "nn": 2})


def test_pointer_sources():
    from cuda.bindings import driver

    packer = ArgPacker("k", [PTR])
    for value, expected in [(FakeBuffer(0x1230), 0x1230), (0x4560, 0x4560),
                            (Cai(0x7890), 0x7890), (driver.CUdeviceptr(0x2220), 0x2220)]:
        packer.pack((value,))
        assert unpack(packer, "Q", 0) == expected


@pytest.mark.parametrize("value,reason", [
    (np.zeros(4, np.float32), "host memory"),
    (HostDLPack(np.zeros(4, np.float32)), "CPU memory"),
    (-8, "out of range"),
    ("0x100", "not a device pointer"),
])
def test_pointer_refusals_say_why(value, reason):
    packer = ArgPacker("k", [PTR])
    with pytest.raises(ArgumentError, match="parameter 'out': expected a device pointer") as e:
        packer.pack((value,))
    assert reason in str(e.value)


def test_device_buffer_fast_path_and_freed_buffer():
    from ptxdsl.runtime.memory import DeviceBuffer

    buf = object.__new__(DeviceBuffer)  # no driver here: fake the allocation
    buf.nbytes, buf.dtype, buf.shape, buf.device, buf._ptr = 4, np.dtype(np.uint8), (4,), 0, 0x7000
    packer = ArgPacker("k", [PTR])
    packer.pack((buf,))
    assert unpack(packer, "Q", 0) == 0x7000
    buf._ptr = None
    with pytest.raises(ArgumentError, match="DeviceBuffer was freed"):
        packer.pack((buf,))


def test_u64_scalar_also_takes_a_buffer():
    # Hand-written PTX often declares pointers as plain .u64.
    packer = ArgPacker("k", [scalar("p", T.u64)])
    packer.pack((FakeBuffer(0x5550),))
    assert unpack(packer, "Q", 0) == 0x5550


def test_tensormap_sources():
    from cuda.bindings import driver

    raw = bytes(range(128))
    cu = driver.CUtensorMap()
    cu.opaque = [driver.cuuint64_t(int.from_bytes(raw[i:i + 8], "little"))
                 for i in range(0, 128, 8)]
    packer = ArgPacker("k", [scalar("n", T.u32), TMAP])
    for value in (raw, bytearray(raw), np.frombuffer(raw, np.uint8),
                  np.frombuffer(raw, np.uint64), TensorMap.from_bytes(raw), cu):
        packer.pack((1, value))
        assert packer.buffer[64:192] == raw, type(value)


@pytest.mark.parametrize("value,given", [(bytes(127), "127 bytes"), ("x" * 128, "str")])
def test_tensormap_refusals(value, given):
    packer = ArgPacker("k", [TMAP])
    with pytest.raises(ArgumentError, match="parameter 'tmap': expected a tensor map") as e:
        packer.pack((value,))
    assert given in str(e.value)


def test_packer_from_parsed_ptx_params():
    params = parse_entries(ARGS_ECHO)["args_echo"]
    packer = ArgPacker("args_echo", params)
    packer.pack((1, 2, -3, 4, -5, 6.0, 7.0, 0x100))
    assert unpack(packer, "i", 2) == -3 and unpack(packer, "Q", 7) == 0x100


def test_unknown_kind_is_refused_at_plan_time():
    with pytest.raises(ValueError, match="unknown kind 'weird'"):
        ArgPacker("k", [P("x", "weird", T.u32, 4)])
