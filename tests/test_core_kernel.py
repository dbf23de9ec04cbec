"""Kernel-level features: parameters of every kind, directives, static and dynamic shared
memory, register naming, several kernels in one module."""

from __future__ import annotations

import sys

import pytest

from ptxdsl import BuildError, Kernel, Module, VersionError, t


def test_params_golden(golden):
    k = Kernel("params")
    scalars = [k.param(ty, f"p_{ty.value}") for ty in
               (t.u16, t.u32, t.s32, t.u64, t.s64, t.f32, t.f64)]
    flag = k.param(t.pred, "flag")                        # travels as .u32
    raw = k.param_ptr("raw", space=None)                  # plain .u64, no .ptr
    glob = k.param_ptr("glob")                            # .ptr .global
    aligned = k.param_ptr("aligned", align=16)            # .ptr .global .align 16
    generic = k.param_ptr("generic", space=None, align=8)  # .ptr .align 8
    tmap = k.param_tensormap("tmap")                      # .param .align 64 .b8 tmap[128]
    for p in scalars:
        k.ld_param(p)
    with k.if_(k.ld_param(flag)):                         # ld.param.u32 + setp.ne
        for p in (raw, glob, aligned, generic):
            k.ld_param(p)
    k.tensormap_addr(tmap)                                # mov.b64 + cvta.param.u64
    golden(Module([k]), "core/params")


def test_directives_golden(golden):
    kernels = [
        Kernel("maxntid_1d", maxntid=256),
        Kernel("maxntid_3d", maxntid=(32, 4, 2), minnctapersm=2),
        Kernel("reqntid_2d", reqntid=(128, 2), maxnreg=64),
        Kernel("reqntid_min", reqntid=128, minnctapersm=4, maxnreg=128),
        Kernel("hidden", visible=False),                  # .entry without .visible
    ]
    for k in kernels:
        k.ret()
    golden(Module(kernels), "core/directives")


def test_cluster_directives_golden(golden):
    kernels = [
        Kernel("cluster_2x1", reqnctapercluster=(2, 1, 1)),
        Kernel("cluster_explicit", explicitcluster=True, maxclusterrank=8),
        Kernel("cluster_all", reqntid=128, reqnctapercluster=4, explicitcluster=True),
    ]
    for k in kernels:
        k.ret()
    m = Module(kernels)
    assert (str(m.version), str(m.target)) == ("7.8", "sm_90")
    golden(m, "core/cluster_directives")


def test_pinning_below_cluster_directives_raises():
    line = sys._getframe().f_lineno + 1
    k = Kernel("c", maxclusterrank=2)
    with pytest.raises(VersionError, match=r"kernel c: cluster directives need PTX ISA 7\.8, "
                       r"sm_90\+; module is \.version 7\.8 \.target sm_89") as e:
        Module([k], target="sm_89").emit()
    assert (e.value.loc.file, e.value.loc.line) == (__file__, line)


def test_shared_memory_golden(golden):
    """Static arrays with alignment, module-scope .shared, and .extern .shared dynamic memory
    (hoisted to module scope: ptxas refuses `.extern` inside a function body)."""
    m = Module(name="smem")
    common = m.shared_array(t.b32, 32, name="common", align=16)
    k = Kernel("smem")
    tile = k.shared_array(t.b8, 1024, align=1024, name="tile")
    bars = k.shared_array(t.b64, 4, align=8, name="bars")
    auto = k.shared_array(t.f32, 8)                       # automatic name, natural alignment
    dyn = k.extern_shared("dyn", align=1024)
    for sym in (tile, bars, auto, dyn, common):
        k.mov(sym)
    k.generic_addr(dyn)
    k2 = Kernel("smem_too")
    k2.mov(k2.extern_shared("dyn", align=16))             # same array, as in CUDA
    m.add(k)
    m.add(k2)
    text = golden(m, "core/shared")
    assert text.count(".extern .shared") == 2


def test_extern_shared_must_agree_across_kernels():
    a, b = Kernel("a"), Kernel("b")
    a.extern_shared("dyn")
    b.extern_shared("dyn", type=t.b32)
    with pytest.raises(BuildError, match="kernel b: dynamic shared array 'dyn' clashes with a "
                       r"module-scope name \(kernel a declares it as \.b8"):
        Module([a, b]).emit()
    c = Kernel("c")
    c.extern_shared("table")
    m = Module([c])
    m.global_array(t.u32, 4, name="table")
    with pytest.raises(BuildError, match="dynamic shared array 'table' clashes"):
        m.emit()


def test_one_extern_shared_per_kernel():
    k = Kernel("k")
    k.extern_shared("a")
    with pytest.raises(BuildError, match="dynamic shared memory is already declared"):
        k.extern_shared("b")


def test_registers_golden(golden):
    """Automatic names by kind, hoisted declarations, named registers made unique."""
    k = Kernel("registers")
    for ty in (t.pred, t.b8, t.u16, t.f16, t.u32, t.f16x2, t.f32, t.u64, t.f64, t.b128):
        k.reg(ty)
    k.reg(t.u32, "count")
    k.reg(t.u32, "count")                                 # becomes count_2
    k.reg(t.f32, "acc")
    golden(Module([k]), "core/registers")


def test_directive_refusals():
    with pytest.raises(BuildError, match=r"kernel k: \.maxntid and \.reqntid cannot be combined"):
        Kernel("k", maxntid=128, reqntid=128)
    with pytest.raises(BuildError, match=r"kernel k: \.reqnctapercluster and \.maxclusterrank "
                       "cannot be combined"):
        Kernel("k", reqnctapercluster=2, maxclusterrank=4)
    with pytest.raises(BuildError, match=r"kernel directive \.maxntid: expected 1 to 3 positive "
                       r"integers, got \(1, 2, 3, 4\)"):
        Kernel("k", maxntid=(1, 2, 3, 4))
    with pytest.raises(BuildError, match=r"kernel directive \.maxnreg: expected an integer in "
                       r"\[1, 255\], got 256"):
        Kernel("k", maxnreg=256)
    with pytest.raises(BuildError, match=r"kernel k: \.minnctapersm needs \.maxntid or "
                       r"\.reqntid"):
        Kernel("k", minnctapersm=2)
