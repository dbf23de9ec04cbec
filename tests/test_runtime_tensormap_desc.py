"""Tensor-map enums, translation tables and the cuTensorMapEncodeTiled rules (no GPU)."""

from __future__ import annotations

import attrs
import numpy as np
import pytest

from ptxdsl.runtime.errors import TensorMapRuleError
from ptxdsl.runtime.tensormap import TensorMap
from ptxdsl.runtime.tensormap_desc import (
    PTX_ELEMTYPE_TO_DATATYPE,
    RULES,
    DataType,
    Interleave,
    OobFill,
    Swizzle,
    TiledDesc,
    check,
    data_type_of,
    validate,
)


def desc(**kw) -> TiledDesc:
    """A valid 2-D u32 map (64 x 32, box 16 x 8) with `kw` overriding fields."""
    base = dict(data_type=DataType.UINT32, global_address=0x10000, global_dim=(64, 32),
                global_strides=(256,), box_dim=(16, 8), element_strides=(1, 1))
    return TiledDesc(**(base | kw))


def desc5(**kw) -> TiledDesc:
    """A valid 5-D u8 map, for the interleave rules (rank >= 3)."""
    base = dict(data_type=DataType.UINT8, global_address=0x10000, global_dim=(32, 4, 4, 4, 2),
                global_strides=(32, 128, 512, 2048), box_dim=(32, 4, 4, 4, 2),
                element_strides=(1,) * 5)
    return TiledDesc(**(base | kw))


def test_numpy_order_becomes_driver_order():
    d = TiledDesc.from_numpy_order(0x1000, (32, 64), np.uint32, (8, 16))
    assert (d.global_dim, d.global_strides, d.box_dim) == ((64, 32), (256,), (16, 8))
    assert d.box_bytes == 512 and not validate(d)
    assert d.numpy_order()["shape"] == (32, 64)
    assert d.numpy_order()["byte_strides"] == (256, 4)


def test_strides_in_elements_or_bytes():
    a = TiledDesc.from_numpy_order(0, (4, 8, 16), "float16", (1, 8, 16), strides=(256, 32, 1))
    b = TiledDesc.from_numpy_order(0, (4, 8, 16), "FLOAT16", (1, 8, 16),
                                   byte_strides=(512, 64, 2))
    assert a == b and a.global_strides == (64, 512)
    with pytest.raises(ValueError, match="not both"):
        TiledDesc.from_numpy_order(0, (4, 8), np.uint8, (4, 8), strides=(8, 1),
                                   byte_strides=(8, 1))
    with pytest.raises(ValueError, match="innermost.*contiguous"):
        TiledDesc.from_numpy_order(0, (4, 8), np.uint32, (4, 8), strides=(16, 2))


def test_ptx_elemtype_differs_from_driver_value_only_for_f64_bf16_f32ftz():
    permuted = {DataType.FLOAT64: 9, DataType.BFLOAT16: 10, DataType.FLOAT32_FTZ: 8}
    for dt in DataType:
        assert dt.ptx_elemtype == permuted.get(dt, int(dt))
        assert PTX_ELEMTYPE_TO_DATATYPE[dt.ptx_elemtype] is dt
    assert DataType.BFLOAT16.ptx_name == ".bf16" and DataType.FLOAT64.ptx_name == ".f64"


def test_swizzle_mode_and_atomicity_pairs():
    pairs = {s: (s.ptx_swizzle_mode, s.ptx_swizzle_atomicity) for s in Swizzle}
    assert pairs == {Swizzle.NONE: (0, 0), Swizzle.B32: (1, 0), Swizzle.B64: (2, 0),
                     Swizzle.B128: (3, 0), Swizzle.B128_ATOM_32B: (3, 1),
                     Swizzle.B128_ATOM_32B_FLIP_8B: (3, 2), Swizzle.B128_ATOM_64B: (3, 3)}


def test_ptx_fields_of_a_description():
    d = desc(data_type="BFLOAT16", global_strides=(128,), box_dim=(64, 8), swizzle="128B",
             oob_fill="NAN_REQUEST_ZERO_FMA", interleave=0)
    f = d.ptx_fields
    assert (f["rank"], f["elemtype"], f["swizzle_mode"], f["fill_mode"]) == (1, 10, 3, 1)
    assert f["global_stride"] == (128,) and f["interleave_layout"] == 0


@pytest.mark.parametrize("cls,spelling,member", [
    (Swizzle, "128B", Swizzle.B128), (Swizzle, "CU_TENSOR_MAP_SWIZZLE_64B", Swizzle.B64),
    (Swizzle, "swizzle_128b_atom_32b", Swizzle.B128_ATOM_32B), (Swizzle, 1, Swizzle.B32),
    (Interleave, "INTERLEAVE_32B", Interleave.B32), (Interleave, "16B", Interleave.B16),
    (DataType, "16U4_ALIGN8B", DataType.U4X16_ALIGN8B), (DataType, "tfloat32", DataType.TFLOAT32),
    (OobFill, "NAN_REQUEST_ZERO_FMA", OobFill.NAN_REQUEST_ZERO_FMA),
])
def test_enum_spellings(cls, spelling, member):
    assert cls.coerce(spelling, "f") is member


def test_enum_accepts_cuda_bindings_members():
    from cuda.bindings import driver
    assert Swizzle.coerce(driver.CUtensorMapSwizzle.CU_TENSOR_MAP_SWIZZLE_128B, "s") \
        is Swizzle.B128


def test_enum_errors_list_the_choices():
    with pytest.raises(ValueError, match="unknown Swizzle '256B'.*128B_ATOM_64B"):
        Swizzle.coerce("256B", "swizzle")
    with pytest.raises(ValueError, match="not a Swizzle"):
        Swizzle.coerce(9, "swizzle")


def test_numpy_dtypes():
    assert data_type_of(np.float32) is DataType.FLOAT32
    assert data_type_of(np.int8) is DataType.UINT8
    assert data_type_of("bfloat16") is DataType.BFLOAT16
    with pytest.raises(ValueError, match="complex64 has no CUtensorMapDataType"):
        data_type_of(np.complex64)


# One case per rule of digest §7.2 (plus the device-dependent ones); each must break exactly
# that rule and no other, so a rule that fires too eagerly fails here as well.
CASES = {
    "rank": lambda: desc(global_dim=(2,) * 6, global_strides=(16,) * 5, box_dim=(4,) * 6,
                         element_strides=(1,) * 6),
    "interleave_rank": lambda: desc(interleave="16B"),
    "address_align": lambda: desc(global_address=0x10008),
    "global_dim_range": lambda: desc(global_dim=(64, 2**32 + 1)),
    "packed_dim0": lambda: TiledDesc("16U4_ALIGN16B", 0x10000, (200, 4), (128,), (128, 4),
                                     (1, 1)),
    "stride_count": lambda: desc(global_strides=(256, 8192)),
    "stride_multiple": lambda: desc(global_strides=(264,)),
    "stride_range": lambda: desc(global_strides=(2**40,)),
    "box_dim_range": lambda: desc(box_dim=(16, 257)),
    "box_count": lambda: desc(box_dim=(16,)),
    "box_inner_bytes": lambda: desc(box_dim=(6, 8)),
    "packed_box0": lambda: TiledDesc("16U6_ALIGN16B", 0x10000, (256, 4), (256,), (64, 4),
                                     (1, 1)),
    "element_stride_range": lambda: desc(element_strides=(1, 9)),
    "element_stride_count": lambda: desc(element_strides=(1, 1, 1)),
    "swizzle_span": lambda: desc(box_dim=(16, 8), swizzle="32B"),
    "interleave32_swizzle": lambda: desc5(interleave="32B", swizzle="64B"),
    "packed_swizzle": lambda: TiledDesc("16U6_ALIGN16B", 0x10000, (256, 4), (256,), (128, 4),
                                        (1, 1), swizzle="128B_ATOM_32B_FLIP_8B"),
    "oob_fill_type": lambda: desc(oob_fill="NAN_REQUEST_ZERO_FMA"),
    "box_bytes": lambda: TiledDesc("FLOAT16", 0x10000, (4096, 256, 256), (8192, 2097152),
                                   (64, 45, 45), (1, 1, 1)),
}
CC_CASES = {
    "swizzle_atomicity_cc": lambda: desc(box_dim=(32, 8), swizzle="128B_ATOM_32B"),
    "packed_cc": lambda: TiledDesc("16U4_ALIGN8B", 0x10000, (256, 4), (128,), (32, 4), (1, 1)),
}


def test_every_rule_has_a_case():
    assert set(CASES) | set(CC_CASES) == set(RULES)


@pytest.mark.parametrize("rule", sorted(CASES))
def test_rule(rule):
    violations = validate(CASES[rule]())
    assert [v.rule for v in violations] == [rule], violations


@pytest.mark.parametrize("rule", sorted(CC_CASES))
def test_device_rule(rule):
    d = CC_CASES[rule]()
    assert validate(d) == [] or rule == "packed_cc"
    assert rule in [v.rule for v in validate(d, (9, 0))]
    assert rule not in [v.rule for v in validate(d, (10, 0))]


def test_boundaries_are_accepted():
    # The largest legal values of each ranged field.
    ok = desc(global_dim=(64, 2**32), box_dim=(16, 256), element_strides=(8, 8),
              global_strides=(2**40 - 16,))
    assert validate(ok) == []
    assert validate(desc(box_dim=(32, 8), swizzle="128B")) == []  # 128 B inner == span
    assert validate(desc5(interleave="32B", swizzle="32B", global_address=0x10020,
                          global_strides=(32, 128, 512, 2048))) == []
    assert validate(desc(data_type="FLOAT32", oob_fill="NAN_REQUEST_ZERO_FMA")) == []
    assert validate(desc(global_strides=(0,))) == []  # broadcast rows: the driver takes it
    # 228 KiB of box exactly, and a larger box that element strides thin out (driver 580).
    big = dict(data_type="FLOAT16", global_address=0x10000, global_dim=(4096, 256, 256),
               global_strides=(8192, 2097152))
    assert validate(TiledDesc(**big, box_dim=(64, 32, 57), element_strides=(1, 1, 1))) == []
    assert validate(TiledDesc(**big, box_dim=(64, 64, 64), element_strides=(1, 2, 2))) == []
    assert validate(desc5(interleave="16B", box_dim=(16, 4, 4, 4, 2))) == []


def test_messages_name_the_values():
    (v,) = validate(desc(global_strides=(264,)))
    assert "multiples of 16" in v.message and "globalStrides[0]=264" in v.message
    (v,) = validate(desc(box_dim=(16, 8), swizzle="32B"))
    assert "64 bytes" in v.message and "span of 32 bytes" in v.message


def test_check_reports_every_broken_rule_at_once():
    bad = desc(global_address=0x10004, box_dim=(16, 300), element_strides=(0, 1))
    with pytest.raises(TensorMapRuleError) as info:
        check(bad)
    assert info.value.rules == ["address_align", "box_dim_range", "element_stride_range"]
    assert "3 rules broken" in str(info.value)
    assert check(desc()) == desc()


def test_describe_shows_description_fields_and_qwords():
    raw = bytes(range(128))
    d = desc(data_type="FLOAT64", global_strides=(512,), box_dim=(16, 8))
    text = TensorMap.from_bytes(raw, d).describe()
    assert "FLOAT64 (driver value 8, PTX .elemtype 9 .f64)" in text
    assert "shape (32, 64), byte strides (512, 8)" in text
    assert "globalDim [64, 32]" in text and "box bytes       1024" in text
    assert "[ 0] 0x0706050403020100" in text and "[15] 0x7f7e7d7c7b7a7978" in text
    assert "description unknown" in TensorMap.from_bytes(raw).describe()


def test_tensormap_field_accessors_and_size_check():
    tm = TensorMap.from_bytes(bytes(128), desc(data_type="FLOAT32_FTZ", swizzle="32B",
                                               box_dim=(8, 8)))
    assert (tm.ptx_elemtype, tm.swizzle_mode, tm.swizzle_atomicity) == (8, 1, 0)
    assert bytes(tm) == bytes(128)
    with pytest.raises(ValueError, match="raw bytes"):
        _ = TensorMap.from_bytes(bytes(128)).ptx_elemtype
    with pytest.raises(ValueError, match="128 bytes, got 64"):
        TensorMap.from_bytes(bytes(64))


def test_desc_is_frozen():
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        desc().box_dim = (1, 1)
