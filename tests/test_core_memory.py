"""ld/st for each state space, vectors, memory-order qualifiers; k.copy: goldens, refusals."""

from __future__ import annotations

import sys

import pytest

from ptxdsl import Addr, BuildError, Kernel, Module, OperandError, VersionError, t


def test_ld_st_golden(golden):
    m = Module(name="ldst")
    cst = m.const_array(t.f32, 4, name="coeffs", align=16, init=[0, 1, 2, 3])
    k = Kernel("ld_st")
    n = k.param(t.u32, "n")
    out = k.param_ptr("out", align=16)
    tile = k.shared_array(t.f32, 256, align=16, name="tile")
    nv = k.ld_param(n)                                   # ld.param.u32
    ptr = k.ld_param(out)                                # ld.param.u64 (a generic pointer)
    g = k.cvta(ptr, "global", to=True)
    x = k.ld(g, type=t.f32)                              # ld.global.f32
    k.ld(Addr(g, 16), type=t.u32, space="global", nc=True)
    v2 = k.ld(Addr(g, 8), type=t.f32, vec=2)
    v4 = k.ld(Addr(g, -16), type=t.u32, vec=4)
    k.ld(ptr, type=t.u64)                                # generic
    k.ld(ptr, type=t.b64, vec=2)
    k.ld(tile, type=t.f32)                               # .shared symbol
    ts = k.mov(tile)
    k.ld(Addr(tile, 8), type=t.f32, vec=2)
    k.ld(ts, type=t.b32, vec=4, space="shared")          # 32-bit shared address register
    k.ld(cst, type=t.f32, vec=4, space="const")
    k.ld(g, type=t.u32, sem="relaxed", scope="gpu")
    k.ld(g, type=t.u32, sem="acquire", scope="sys")
    k.ld(g, type=t.u32, sem="volatile")
    k.ld(ptr, type=t.u8)
    k.st(g, x)                                           # st.global.f32
    k.st(Addr(g, 4), nv, space="global")
    k.st(Addr(g, 8), v2)                                 # st.global.v2.f32
    k.st(g, v4, space="global")
    k.st(ptr, 1.0, type=t.f32)                           # generic, float immediate
    k.st(tile, x)
    k.st(Addr(ts, 4), nv, space="shared")
    k.st(ts, v4, space="shared")
    k.st(g, nv, sem="release", scope="gpu")
    k.st(g, nv, sem="relaxed", scope="cta")
    k.st(g, nv, sem="volatile")
    k.st(ptr, (nv, nv), type=t.u32)                      # .v2 from a tuple
    m.add(k)
    golden(m, "core/ld_st")


def test_ld_st_cluster_golden(golden):
    k = Kernel("ld_st_cluster")
    buf = k.shared_array(t.u32, 8, align=16, name="buf")
    a = k.mov(buf)
    x = k.ld(a, type=t.u32, space="shared::cta")
    k.ld(a, type=t.u32, space="shared::cluster")
    k.st(a, x, space="shared::cta")
    k.st(Addr(a, 4), x, space="shared::cluster")
    k.ld(buf, type=t.u32, space="shared::cta", vec=2)
    m = Module([k])
    assert (str(m.version), str(m.target)) == ("7.8", "sm_90")
    golden(m, "core/ld_st_cluster")


def test_pinning_below_shared_cluster_raises():
    k = Kernel("c")
    a = k.mov(k.shared_array(t.u32, 8))
    line = sys._getframe().f_lineno + 1
    k.ld(a, type=t.u32, space="shared::cluster")
    with pytest.raises(VersionError, match=r"ld\.shared::cluster\.u32 needs PTX ISA 7\.8, sm_90"
                       r"\+, but the module is pinned to \.target sm_89") as e:
        Module([k], target="sm_89").emit()
    assert (e.value.loc.file, e.value.loc.line) == (__file__, line)


def test_copy_golden(golden):
    """k.copy: a 128-byte tensor map from a parameter into shared memory, and a vector copy."""
    k = Kernel("copy")
    tm = k.param_tensormap("tmap")
    smap = k.shared_array(t.b8, 128, align=128, name="smap")
    stage = k.shared_array(t.b8, 64, align=16, name="stage")
    k.copy(smap, tm, 128)
    k.copy(stage, Addr(smap, 64), 64, width=16)
    k.copy(stage, smap, 8, width=4)
    golden(Module([k]), "core/copy")


def test_ld_st_refusals():
    k = Kernel("bad")
    ptr = k.ld_param(k.param_ptr("p"))
    r32 = k.reg(t.u32)
    with pytest.raises(OperandError, match=r"ld\.global\.u32: operand 'a': expected a 64-bit "
                       r"integer register holding a global address, got register %r1 of type "
                       r"\.u32"):
        k.ld(r32, type=t.u32, space="global")
    with pytest.raises(OperandError, match=r"ld/st: operand 'space': expected one of .*got str "
                       "'texture'"):
        k.ld(ptr, type=t.u32, space="texture")
    with pytest.raises(OperandError, match=r"st: operand 'space': expected a writable space"):
        k.st(k.param(t.u32, "x"), r32)
    with pytest.raises(OperandError, match=r"ld\.v3\.u32|ld\.u32: operand 'd': expected a "
                       "vector of 2, 4 or 8 elements, got 3"):
        k.ld(ptr, type=t.u32, vec=3)
    with pytest.raises(OperandError, match=r"ld\.global\.f32: operand 'a': expected a symbol in "
                       r"\.global \(convert the address with cvta first\), got symbol s in "
                       r"\.shared"):
        k.ld(k.shared_array(t.f32, 4, name="s"), type=t.f32, space="global")
    with pytest.raises(OperandError, match=r"ld: operand 'scope': expected a scope for "
                       r"\.acquire, got None"):
        k.ld(ptr, type=t.u32, sem="acquire")
    with pytest.raises(OperandError, match=r"st: operand 'sem': expected one of 'weak', "
                       "'volatile', 'relaxed', 'release', got str 'acquire'"):
        k.st(ptr, r32, sem="acquire", scope="gpu")
    with pytest.raises(BuildError, match="cannot tell the state space of this address"):
        k.ld(k.reg(t.u64), type=t.u32)
    with pytest.raises(OperandError, match=r"copy: operand 'nbytes': expected a multiple of "
                       r"width=8 from 0 to \d+ \(the copy is unrolled.*got int 12"):
        k.copy(k.shared_array(t.b8, 16), k.shared_array(t.b8, 16), 12)
