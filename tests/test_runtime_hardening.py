"""Runtime hardening on the host side (no GPU needed): element strides in the box size, a bad
PTXDSL_CACHE_MAX_MB, tensor-map bytes and array interfaces, enum coercion, the rule check
before the driver, the launch-config cache and tensor-map arguments. Each refusal is a ptxdsl
error naming this file's line."""

from __future__ import annotations

import logging
from types import SimpleNamespace

import numpy as np
import pytest

from ptxdsl import Kernel, ptx, t
from ptxdsl.checker import check_kernel
from ptxdsl.errors import PtxdslError
from ptxdsl.pipeline import tx_bytes
from ptxdsl.runtime import cache as cache_mod
from ptxdsl.runtime import tensormap as tensormap_mod
from ptxdsl.runtime.args import ArgPacker
from ptxdsl.runtime.cache import max_cache_bytes
from ptxdsl.runtime.errors import (
    ArgumentError,
    DevicePointerError,
    LaunchError,
    TensorMapRuleError,
)
from ptxdsl.runtime.tensormap import TensorMap
from ptxdsl.runtime.tensormap_desc import MAX_BOX_BYTES, Swizzle, TiledDesc, validate
from ptxdsl.types import ScalarType as T
from tests.test_runtime_args import TMAP, P
from tests.test_runtime_streams_cpu import FakeDriver, fake_function

HERE = __file__
A = 1 << 20


def numpy_desc(**kw):
    args = dict(address=A, shape=(64, 64), dtype=np.float32, box=(8, 8))
    args.update(kw)
    return TiledDesc.from_numpy_order(args.pop("address"), args.pop("shape"), args.pop("dtype"),
                                      args.pop("box"), **args)


def refused(exc_type, rule_or_match, fn):
    """`fn()` raises `exc_type` at this file's line; a TensorMapRuleError names `rule`."""
    with pytest.raises(exc_type, match=None if exc_type is TensorMapRuleError
                       else rule_or_match) as e:
        fn()
    if exc_type is TensorMapRuleError:
        assert e.value.rules == [rule_or_match], e.value
    assert isinstance(e.value, PtxdslError) and e.value.loc.file == HERE, e.value.loc
    return e.value


# -- 1. element strides in the box size (digest §7.2) ----------------------------------------------
def test_box_bytes_counts_ceil_of_box_over_element_stride():
    # 8 rows x 8 f32, every 2nd row: TMA delivers ceil(8 / 2) = 4 rows.
    d = numpy_desc(element_strides=(2, 1))
    assert d.box_elements == (8, 4) and d.box_bytes == 4 * 8 * 4 == 128
    assert tx_bytes(d) == 128 and tx_bytes(TensorMap.from_bytes(bytes(128), d)) == 128
    assert numpy_desc(shape=(64, 64), box=(7, 8), element_strides=(2, 1)).box_bytes == 128
    assert "box bytes       128" in TensorMap.from_bytes(bytes(128), d).describe()


def test_dimension_0_stride_is_ignored_without_interleave_and_counted_with_it():
    # Interleave NONE: elementStrides[0] does not stride dimension 0.
    assert numpy_desc(element_strides=(1, 2)).box_bytes == 8 * 8 * 4
    # An interleaved layout strides dimension 0 too: ceil(8 / 3) = 3 elements.
    d = TiledDesc("FLOAT32", A, (64, 64, 64), (256, 256 * 64), (8, 2, 2), (3, 1, 1),
                  interleave="16B")
    assert d.box_elements == (3, 2, 2) and d.box_bytes == 3 * 4 * 2 * 2


def test_shared_memory_size_rule_follows_the_driver_not_box_bytes():
    # The driver (580 on an H100, 13000 on an H200) refuses by the floor count,
    # boxDim[i] // elementStrides[i] over every dimension; tests/test_reliability_cpu.py holds
    # its verdicts. These two it encodes, though TMA delivers more than 228 KiB: 4 planes of
    # ceil(7 / 2), and dimension 0 whole (its stride is ignored with interleave NONE).
    for box, es in (((64, 256, 7), (1, 1, 2)), ((64, 256, 4), (2, 1, 1))):
        d = TiledDesc("FLOAT32", A, (4096, 4096, 4096), (16384, 16384 * 4096), box, es)
        assert d.box_bytes == 64 * 4 * 256 * 4 > MAX_BOX_BYTES and validate(d) == []
    big = TiledDesc("FLOAT32", A, (4096, 4096, 4096), (16384, 16384 * 4096), (64, 256, 8),
                    (1, 1, 2))
    assert [x.rule for x in validate(big)] == ["box_bytes"]


def _strided_load_kernel(expect: int) -> Kernel:
    k = Kernel("k", reqntid=32)
    tm = k.param_tensormap("tensor_map")
    tile = k.shared_array(t.f32, 64, align=128, name="tile")
    bar = k.shared_array(t.b64, 1, align=8, name="bar")
    tmap = k.tensormap_addr(tm)
    with k.if_(k.tid.x == 0):
        ptx.mbarrier_init(k, bar, 1)
        ptx.fence_proxy_async(k, "shared::cta")
    k.bar_sync(0)
    with k.if_(k.tid.x == 0):
        ptx.cp_async_bulk_tensor(k, "shared::cluster", "global", tile, tmap, (0, 0), bar)
        ptx.mbarrier_arrive_expect_tx(k, "release", "cta", "shared::cta", bar, expect)
    ptx.mbarrier_wait(k, bar, 0)
    k.ret()
    return k


def test_checker_maps_use_the_strided_box_size():
    d = numpy_desc(element_strides=(2, 1))
    for source in (d, TensorMap.from_bytes(bytes(128), d)):
        assert not check_kernel(_strided_load_kernel(128), maps={"tensor_map": source})
        f = check_kernel(_strided_load_kernel(256), maps={"tensor_map": source})
        assert [x.id for x in f] == ["expect-tx-mismatch"] and "deliver 128 bytes" in \
            f[0].message


# -- 2. PTXDSL_CACHE_MAX_MB ------------------------------------------------------------------------
@pytest.mark.parametrize("raw", ["nan", "inf", "-inf", "1e400", "1e300", "NaN"])
def test_non_finite_or_huge_cache_cap_warns_and_uses_the_default(raw, monkeypatch, caplog):
    monkeypatch.setenv("PTXDSL_CACHE_MAX_MB", raw)
    monkeypatch.setattr(cache_mod, "_warned", set())
    with caplog.at_level(logging.WARNING, logger="ptxdsl"), \
            pytest.warns(cache_mod.PtxdslCacheWarning, match="PTXDSL_CACHE_MAX_MB"):
        assert max_cache_bytes() == 1024 * 1024 * 1024
    assert any(f"PTXDSL_CACHE_MAX_MB={raw!r}" in r.getMessage() and r.levelname == "WARNING"
               for r in caplog.records)


def test_a_large_finite_cache_cap_is_kept(monkeypatch, caplog):
    monkeypatch.setenv("PTXDSL_CACHE_MAX_MB", "1e6")
    with caplog.at_level(logging.WARNING, logger="ptxdsl"):
        assert max_cache_bytes() == 10**6 * 1024 * 1024
    assert not caplog.records


# -- 3. tensor-map bytes, descriptions and array interfaces ---------------------------------------
@pytest.mark.parametrize("data,given", [
    ("x" * 128, "got str"), (128, "got int"), (b"\0" * 127, "got 127 bytes"),
    (np.zeros(16), "got ndarray of dtype float64"), (None, "got NoneType"),
    (list(range(128)), "got list")])
def test_from_bytes_takes_only_128_bytes(data, given):
    e = refused(TensorMapRuleError, "map_bytes", lambda: TensorMap.from_bytes(data))
    assert "a CUtensorMap is 128 bytes" in str(e) and given in str(e)


def test_from_bytes_accepts_bytes_like_and_qword_arrays():
    raw = bytes(range(128))
    for data in (raw, bytearray(raw), memoryview(raw), np.frombuffer(raw, np.uint8),
                 np.frombuffer(raw, np.uint64)):
        assert bytes(TensorMap.from_bytes(data)) == raw


def test_from_bytes_refuses_a_desc_that_is_not_a_tiled_desc():
    e = refused(TensorMapRuleError, "map_desc",
                lambda: TensorMap.from_bytes(bytes(128), desc="nope"))
    assert "expected a TiledDesc or None, got str 'nope'" in str(e)
    e = refused(TensorMapRuleError, "map_desc", lambda: TensorMap.from_bytes(bytes(128))
                .swizzle_mode)
    assert "raw bytes" in str(e)


class Cai:
    def __init__(self, **kw):
        d = {"data": (A, False), "shape": (64, 64), "typestr": "<f4", "version": 3}
        d.update(kw)
        self.__cuda_array_interface__ = {k: v for k, v in d.items() if v is not None}


@pytest.mark.parametrize("cai,match", [
    (Cai(shape=None), r"\['shape'\]: expected a tuple of non-negative integers, got NoneType"),
    (Cai(shape=(64.0, 64)), r"\['shape'\]: expected a tuple of non-negative integers"),
    (Cai(shape=(-1, 64)), r"\['shape'\]"),
    (Cai(typestr="zz"), r"\['typestr'\]: expected a little-endian array-interface type "
     r"string such as '<f4', got str 'zz'"),
    (Cai(typestr=None), r"\['typestr'\].*got NoneType"),
    (Cai(typestr=">f4"), r"\['typestr'\].*got str '>f4'"),
    (Cai(strides=(256,)), r"\['strides'\]: expected 2 entries"),
    (Cai(strides=(256.0, 4)), r"\['strides'\]: expected a tuple of integers"),
])
def test_a_malformed_cuda_array_interface_is_refused_by_name(cai, match):
    refused(DevicePointerError, match, lambda: TensorMap.from_array(cai, (8, 8)))


def test_from_array_of_host_memory_is_a_ptxdsl_error():
    refused(DevicePointerError, "lives in CPU memory",
            lambda: TensorMap.from_array(np.zeros((64, 64), np.float32), (8, 8)))


# -- 4. enum coercion ------------------------------------------------------------------------------
@pytest.mark.parametrize("field,bad", [
    ("swizzle", 1.5), ("swizzle", 1.0), ("swizzle", True), ("swizzle", np.True_),
    ("swizzle", np.float32(1)), ("interleave", False), ("l2_promotion", 2.0),
    ("oob_fill", True), ("swizzle", None)])
def test_enums_refuse_floats_bools_and_none(field, bad):
    e = refused(TensorMapRuleError, "enum", lambda: numpy_desc(**{field: bad}))
    assert f"{field}: expected a" in str(e) and type(bad).__name__ in str(e)


def test_enums_take_members_names_and_integers():
    for v in (Swizzle.B32, "32B", "SWIZZLE_32B", 1, np.int64(1), np.uint8(1)):
        assert numpy_desc(swizzle=v).swizzle is Swizzle.B32
    e = refused(TensorMapRuleError, "enum", lambda: numpy_desc(swizzle=9))
    assert "9 is not a Swizzle (0..6)" in str(e)


@pytest.mark.parametrize("bad", [None, True, np.True_])
def test_dtype_none_or_bool_is_refused(bad):
    e = refused(TensorMapRuleError, "enum", lambda: numpy_desc(dtype=bad))
    assert "dtype: expected a numpy dtype or a CUtensorMapDataType name" in str(e)


# -- 5. the rules are checked before the driver is touched -----------------------------------------
def test_tiled_checks_the_rules_before_the_driver(monkeypatch):
    def no_driver(*a, **k):
        raise AssertionError("the driver was asked before the rule check")

    monkeypatch.setattr(tensormap_mod, "device_info", no_driver)
    monkeypatch.setattr(tensormap_mod, "_encode", no_driver)
    e = refused(TensorMapRuleError, "box_dim_range",
                lambda: TensorMap.tiled(A, (64, 64), np.float32, (8, 300)))
    assert "boxDim[0]=300" in str(e)
    refused(TensorMapRuleError, "box_dim_range",
            lambda: TensorMap.from_desc(numpy_desc(box=(8, 300))))


# -- 6. the launch-config cache does not stand in for the checks ----------------------------------
class ClusterDriver(FakeDriver):
    """FakeDriver plus the launch attribute a cluster launch sets."""

    CUlaunchAttributeID = SimpleNamespace(CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION=4)

    def CUlaunchAttribute(self):
        return SimpleNamespace(id=None, value=SimpleNamespace(
            clusterDim=SimpleNamespace(x=0, y=0, z=0)))


@pytest.fixture
def fn(monkeypatch):
    drv = ClusterDriver()
    return fake_function(monkeypatch, drv), drv


BAD_LAUNCHES = [
    (dict(grid=1.0), "grid must be a positive int"), (dict(grid=True), "grid must be"),
    (dict(grid=(1.0, 1)), "grid must be"), (dict(grid=np.float64(1)), "grid must be"),
    (dict(block=32.0), "block must be"), (dict(block=(True, 32)), "block must be"),
    (dict(shared_mem=0.0), "shared_mem must be a non-negative int"),
    (dict(shared_mem=False), "shared_mem must be"), (dict(cluster=1.0), "cluster must be"),
]


@pytest.mark.parametrize("bad,match", BAD_LAUNCHES)
def test_bad_launch_shapes_are_refused_before_and_after_a_cached_launch(fn, bad, match):
    f, drv = fn
    good = dict(grid=1, block=32, shared_mem=0)
    with pytest.raises(LaunchError, match=match):      # first launch: nothing cached
        f.launch(args=(), **(good | bad))
    f.launch(good["grid"], good["block"], (), shared_mem=0,
             cluster=1 if "cluster" in bad else None)
    f.launch((1,), [32], (), shared_mem=0)
    with pytest.raises(LaunchError, match=match) as e:  # an equal int config is cached now
        f.launch(args=(), **(good | bad))
    assert e.value.loc.file == HERE
    assert len(drv.launches) == 2


def test_numpy_integer_shapes_still_hit_the_cache(fn, monkeypatch):
    f, drv = fn
    misses = []
    real = f._config
    monkeypatch.setattr(f, "_config", lambda *a: misses.append(a) or real(*a))
    f.launch(2, 32, (), shared_mem=0)
    for _ in range(3):
        f.launch(np.int64(2), (np.int32(32),), (), shared_mem=np.int64(0))
    assert len(misses) == 1 + 1 and len(drv.launches) == 4   # one new key: the 1-tuple block


# -- 7. tensor-map arguments -----------------------------------------------------------------------
@pytest.mark.parametrize("value,given", [
    (np.zeros(16), "numpy array of float64"), (np.zeros(32, np.float32), "of float32"),
    (np.zeros(128, np.int8), "of int8"), (np.zeros(16, ">u8"), "of >u8")])
def test_a_tensor_map_argument_is_not_any_128_byte_array(value, given):
    packer = ArgPacker("k", [TMAP])
    with pytest.raises(ArgumentError, match="parameter 'tmap': expected a tensor map") as e:
        packer.pack((value,))
    assert given in str(e.value) and e.value.loc.file == HERE


def test_a_plain_bytes_parameter_still_takes_any_array():
    packer = ArgPacker("k", [P("blob", "bytes", T.b8, 8, 8)])
    packer.pack((np.ones(1),))
    assert bytes(packer.buffer[:8]) == np.ones(1).tobytes()


@pytest.mark.parametrize("kw, words", [
    (dict(strides=(64, 1), byte_strides=(256, 4)), "not both"),
    (dict(strides=(1, 64)), "innermost) axis must be contiguous"),
    (dict(strides=(64,)), "1 entries for a rank-2 shape"),
])
def test_numpy_order_strides_are_rule_errors(kw, words):
    e = refused(TensorMapRuleError, "strides", lambda: TiledDesc.from_numpy_order(
        1 << 20, (64, 64), np.float32, (8, 8), **kw))
    assert words in str(e) and isinstance(e, ValueError)
