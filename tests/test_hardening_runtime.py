"""Issue 13 on the host side (no GPU needed): tensor-map descriptions refuse non-integral
values with the rule's name, device pointers refuse None/NaN and a bad
`__cuda_array_interface__` with a ptxdsl error, argument packing names the caller's line and
turns an overflowing number into an ArgumentError, launch shapes take numpy integers."""

from __future__ import annotations

import attrs
import numpy as np
import pytest

from ptxdsl.errors import PtxdslError
from ptxdsl.runtime.args import ArgPacker
from ptxdsl.runtime.arrays import array_info, device_pointer
from ptxdsl.runtime.cluster import dim3 as _dim3
from ptxdsl.runtime.errors import ArgumentError, LaunchError, TensorMapRuleError
from ptxdsl.runtime.launch import _shared_bytes
from ptxdsl.runtime.tensormap_desc import TiledDesc
from ptxdsl.types import ScalarType as T
from tests.test_runtime_args import P  # the parameter records ArgPacker reads

HERE = __file__


def numpy_desc(**kw):
    args = dict(address=0x10000, shape=(64, 64), dtype=np.float32, box=(8, 8))
    args.update(kw)
    return TiledDesc.from_numpy_order(args.pop("address"), args.pop("shape"), args.pop("dtype"),
                                      args.pop("box"), **args)


@pytest.mark.parametrize("field", ["shape", "box", "strides", "element_strides"])
@pytest.mark.parametrize("bad", [64.7, 64.0, "64", True, None, float("nan"), np.float32(8)])
def test_non_integral_shape_stride_box_refused_with_rule_name(field, bad):
    value = (64, bad) if field != "strides" else (bad, 1)
    with pytest.raises(TensorMapRuleError, match=rf"\[integral\] {field}: expected integers") \
            as e:
        numpy_desc(**{field: value})
    assert e.value.rules == ["integral"]
    assert isinstance(e.value, PtxdslError) and e.value.loc.file == HERE


def test_numpy_integers_accepted_in_descriptions():
    d = numpy_desc(shape=np.array([64, 32]), box=(np.int64(8), np.int32(8)),
                   address=np.uint64(0x10000), element_strides=[np.int16(1)] * 2)
    assert d.global_dim == (32, 64) and d.box_dim == (8, 8) and d.global_address == 0x10000
    assert all(type(x) is int for x in d.global_dim + d.box_dim)


@pytest.mark.parametrize("address", [None, float("nan"), 65536.0, "65536", True, -16, 1 << 64])
def test_bad_global_address_refused_with_rule_name(address):
    with pytest.raises(TensorMapRuleError, match=r"\[integral\] global_address: expected an "
                       "integer device address"):
        numpy_desc(address=address)
    with pytest.raises(TensorMapRuleError, match=r"\[integral\] global_address"):
        attrs.evolve(numpy_desc(), global_address=address)


@pytest.mark.parametrize("obj", [None, float("nan"), 1.5, "0x1000", object()])
def test_device_pointer_refusals_are_ptxdsl_errors(obj):
    with pytest.raises(PtxdslError, match="is not a device pointer"):
        device_pointer(obj)


@pytest.mark.parametrize("cai", [{"shape": (4,), "typestr": "<f4", "data": None, "version": 3},
                                 {"shape": (4,), "typestr": "<f4", "version": 3},
                                 {"shape": (4,), "typestr": "<f4", "data": (None, False)},
                                 {"shape": (4,), "typestr": "<f4", "data": ("1", False)}])
def test_cuda_array_interface_without_usable_data_is_a_ptxdsl_error(cai):
    class Arr:
        __cuda_array_interface__ = cai

    for call in (device_pointer, array_info):
        with pytest.raises(PtxdslError, match=r"Arr.__cuda_array_interface__ has no usable "
                           "'data'"):
            call(Arr())


def test_argument_errors_name_the_callers_line():
    packer = ArgPacker("k", [P("n", "scalar", T.u32, 4), P("x", "scalar", T.f32, 4)])
    with pytest.raises(ArgumentError) as e:
        packer.pack(("seven", 1.0))      # through the generated packer
    assert e.value.loc.file == HERE and "<ArgPacker" not in str(e.value)


@pytest.mark.parametrize("t", [T.f32, T.f64])
def test_huge_int_for_float_parameter_is_an_argument_error(t):
    packer = ArgPacker("k", [P("x", "scalar", t, t.bytes)])
    with pytest.raises(ArgumentError, match=r"parameter 'x': expected a real number .*got an "
                       "integer of 1329 bits"):
        packer.pack((10 ** 400,))


def test_launch_shapes_take_numpy_integers():
    assert _dim3(np.int64(4), "grid", "k") == (4, 1, 1)
    assert _dim3((np.int32(2), 3), "block", "k") == (2, 3, 1)
    assert _shared_bytes(np.uint32(1024), "k") == 1024 and type(_shared_bytes(
        np.int64(8), "k")) is int
    for bad in (0, 1.5, "4", None, True, (1, 2, 3, 4)):
        with pytest.raises(LaunchError, match="must be a positive int"):
            _dim3(bad, "grid", "k")
    with pytest.raises(LaunchError, match="shared_mem must be a non-negative int"):
        _shared_bytes(-1, "k")


@pytest.mark.parametrize("address, shape, match", [
    (None, (64, 64), "is not a device pointer"),
    (float("nan"), (64, 64), "is not a device pointer"),
    (0x10000, (64, 64.7), r"\[integral\] shape"),
    (0x10000, ("64", 64), r"\[integral\] shape"),
])
def test_tensormap_tiled_refuses_before_touching_the_driver(address, shape, match):
    from ptxdsl.runtime.tensormap import TensorMap
    with pytest.raises(PtxdslError, match=match):
        TensorMap.tiled(address, shape, np.float32, (8, 8))
