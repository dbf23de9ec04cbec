"""mov (immediates, special registers, symbol addresses), cvta in both directions for every
space, cvt with each rounding mode: goldens, version needs, refusals."""

from __future__ import annotations

import math
import sys

import pytest

from ptxdsl import Kernel, Module, OperandError, VersionError, t
from ptxdsl.kernel_core import special


def test_mov_golden(golden):
    m = Module(name="mov")
    table = m.global_array(t.u32, 4, name="table", align=4, init=[1, 2, 3, 4])
    k = Kernel("mov_forms")
    tm = k.param_tensormap("tmap")
    buf = k.shared_array(t.b8, 64, align=16, name="buf")
    r = k.mov(7, type=t.u32)
    k.mov(-7, type=t.s32)
    k.mov(65535, type=t.u16)
    k.mov(0xFFFF_FFFF_FFFF, type=t.u64)
    k.mov(1.0, type=t.f32)
    k.mov(-2.5, type=t.f64)
    k.mov(r)                                  # register to register
    k.mov(r, dst=k.reg(t.b32, "named"))       # into a named register
    k.mov(buf)                                # .shared symbol: 32-bit address
    k.mov(buf, type=t.u64)
    k.mov(table)                              # .global symbol: 64-bit address
    k.mov(tm, type=t.b64)                     # .param symbol
    k.addr_of(buf)
    for name in ("tid", "ntid", "ctaid", "nctaid"):
        for axis in "xyz":
            k.mov(special(f"{name}.{axis}"))
    for name in ("laneid", "warpid", "nwarpid", "smid", "clock", "clock64", "globaltimer",
                 "dynamic_smem_size", "total_smem_size"):
        k.mov(special(name))
    k.tid.x, k.ntid.y, k.ctaid.z, k.nctaid.x, k.laneid, k.warpid, k.clock64, k.globaltimer  # noqa: B018
    m.add(k)
    golden(m, "core/mov")


def test_mov_cluster_special_registers_golden(golden):
    k = Kernel("mov_cluster")
    for name in ("clusterid", "nclusterid", "cluster_ctaid", "cluster_nctaid"):
        for axis in "xyz":
            k.mov(special(f"{name}.{axis}"))
    k.mov(special("cluster_ctarank"))
    k.mov(special("cluster_nctarank"))
    k.mov(special("is_explicit_cluster"))
    k.clusterid.y, k.cluster_ctaid.x, k.cluster_ctarank  # noqa: B018
    m = Module([k])
    assert (str(m.version), str(m.target)) == ("7.8", "sm_90")
    golden(m, "core/mov_cluster")


def test_every_cluster_special_register_is_a_kernel_attribute():
    """`k.<name>.x/y/z` and `k.cluster_ctarank`/`k.cluster_nctarank` read each cluster
    special register (`k.cluster_nctaid.y` was listed as invariant but had no attribute)."""
    k = Kernel("attrs")
    regs = [getattr(getattr(k, name), axis)
            for name in ("clusterid", "nclusterid", "cluster_ctaid", "cluster_nctaid")
            for axis in "xyz"] + [k.cluster_ctarank, k.cluster_nctarank]
    assert k.cluster_nctaid.y is regs[10]          # invariant: read once per kernel
    text = Module([k]).emit()
    for name in ("clusterid", "nclusterid", "cluster_ctaid", "cluster_nctaid"):
        for axis in "xyz":
            assert f", %{name}.{axis};" in text
    assert ", %cluster_ctarank;" in text and ", %cluster_nctarank;" in text


def test_pinning_below_a_cluster_special_register_raises():
    k = Kernel("c")
    line = sys._getframe().f_lineno + 1
    k.cluster_ctarank  # noqa: B018
    with pytest.raises(VersionError, match=r"mov\.u32 needs PTX ISA 7\.8, sm_90\+, but the "
                       r"module is pinned to \.target sm_80") as e:
        Module([k], target="sm_80").emit()
    assert (e.value.loc.file, e.value.loc.line) == (__file__, line)


def test_cvta_golden(golden):
    """To and from generic for every space cvta accepts before sm_90 (.param needs PTX 7.7)."""
    k = Kernel("cvta_forms")
    tm = k.param_tensormap("tmap")
    ptr = k.ld_param(k.param_ptr("p"))
    buf = k.shared_array(t.b32, 16, align=16, name="buf")
    s64 = k.mov(buf, type=t.u64)
    s32 = k.mov(buf)
    for space in ("global", "shared", "const", "local"):
        k.cvta(ptr, space, to=True)
        k.cvta(ptr, space)
    k.cvta(s64, "shared")                     # symbol address -> generic
    k.cvta(s32, "shared")                     # 32-bit form: cvta.shared.u32
    k.tensormap_addr(tm)                      # mov.b64 + cvta.param.u64
    k.cvta(ptr, "param", to=True)
    m = Module([k])
    assert (str(m.version), str(m.target)) == ("7.7", "sm_75")
    golden(m, "core/cvta")


def test_cvta_cluster_golden(golden):
    k = Kernel("cvta_cluster")
    ptr = k.ld_param(k.param_ptr("p"))
    s64 = k.mov(k.shared_array(t.b32, 16, align=16, name="buf"), type=t.u64)
    k.cvta(s64, "shared::cta")
    k.cvta(ptr, "shared::cta", to=True)
    k.cvta(s64, "shared::cluster")
    k.cvta(ptr, "shared::cluster", to=True)
    m = Module([k])
    assert (str(m.version), str(m.target)) == ("7.8", "sm_90")
    golden(m, "core/cvta_cluster")


def test_pinning_below_cvta_param_raises():
    k = Kernel("c")
    k.tensormap_addr(k.param_tensormap("tm"))
    with pytest.raises(VersionError, match=r"cvta\.param\.u64 needs PTX ISA 7\.7, sm_75\+, but "
                       r"the module is pinned to \.version 7\.6") as e:
        Module([k], version="7.6").emit()
    assert e.value.loc.file == __file__


def test_cvt_golden(golden):
    k = Kernel("cvt_forms")
    f = k.ld_param(k.param(t.f32, "f"))
    d = k.ld_param(k.param(t.f64, "d"))
    i = k.ld_param(k.param(t.s32, "i"))
    u = k.ld_param(k.param(t.u64, "u"))
    h = k.ld_param(k.param(t.u16, "h"))
    k.cvt(f, t.s32)                           # float -> int: C truncation, .rzi
    for rnd in ("rni", "rzi", "rmi", "rpi"):
        k.cvt(f, t.u32, rnd=rnd)
    k.cvt(i, t.f32)                           # int -> float: .rn
    for rnd in ("rn", "rz", "rm", "rp"):
        k.cvt(u, t.f64, rnd=rnd)
        k.cvt(d, t.f32, rnd=rnd)              # narrowing float
    k.cvt(f, t.f64)                           # widening float: no rounding
    k.cvt(f, t.f32, rnd="rni")                # round to integral value, same type
    k.cvt(i, t.s64)                           # int widening
    k.cvt(u, t.u32)                           # int narrowing
    k.cvt(h, t.u32)
    k.cvt(i, t.u8, sat=True)
    k.cvt(d, t.f32, ftz=True, sat=True)
    k.cvt(f, t.f16)
    k.cvt(special("tid.x"), t.u64)            # cvt reads special registers too
    golden(Module([k]), "core/cvt")


def test_cvt_rounding_refusals():
    k = Kernel("c")
    f, i = k.reg(t.f32), k.reg(t.s32)
    with pytest.raises(OperandError, match=r"cvt\.s32\.f32: operand 'rnd': expected an integer "
                       r"rounding \(rni, rzi, rmi, rpi\), got rn"):
        k.cvt(f, t.s32, rnd="rn")
    with pytest.raises(OperandError, match=r"cvt\.f64\.f32: operand 'rnd': expected no rounding "
                       "mode for this conversion, got rn"):
        k.cvt(f, t.f64, rnd="rn")
    with pytest.raises(OperandError, match=r"cvt: operand 'rnd': expected one of 'rn', .*got "
                       "str 'nearest'"):
        k.cvt(i, t.f32, rnd="nearest")
    with pytest.raises(OperandError, match=r"cvt: operand 'dtype': expected an integer or float "
                       r"type, got \.b32"):
        k.cvt(i, t.b32)


def test_mov_refusals():
    k = Kernel("c")
    buf = k.shared_array(t.b8, 4)
    with pytest.raises(OperandError, match=r"mov\.f32: operand 'a': expected a \.u32/\.u64/\.b32/"
                       r"\.b64 mov to take a symbol's address, got symbol smem_1"):
        k.mov(buf, type=t.f32)
    with pytest.raises(OperandError, match=r"mov\.u32: operand 'a': expected an immediate in "
                       r"\[0, 4294967295\] for \.u32, got 4294967296"):
        k.mov(1 << 32, type=t.u32)
    with pytest.raises(OperandError, match=r"mov\.f32: operand 'a': expected a value "
                       r"representable as \.f32, got 1e\+39"):
        k.mov(1e39, type=t.f32)
    with pytest.raises(OperandError, match=r"mov\.u16: operand 'd': expected a register "
                       r"compatible with \.u16, got register %r\d+ of type \.u32"):
        k.mov(1, type=t.u16, dst=k.reg(t.u32))


def test_float_immediates_render_exactly(golden):
    k = Kernel("float_imm")
    for v in (1.0, -0.0, 0.1, 1 / 3, 3.4028234663852886e38, 1e-45, math.inf, -math.inf,
              math.nan):
        k.mov(v, type=t.f32)
    for v in (1.0, -0.0, 0.1, 1 / 3, 1.7976931348623157e308, 5e-324, math.inf, math.nan):
        k.mov(v, type=t.f64)
    text = golden(Module([k]), "core/float_imm")
    assert "mov.f32 %f1, 0f3F800000;" in text
    assert "mov.f32 %f3, 0f3DCCCCCD;" in text              # 0.1 rounded to nearest f32
    assert "mov.f64 %fd3, 0d3FB999999999999A;" in text
    assert "mov.f32 %f7, 0f7F800000;" in text               # +inf
