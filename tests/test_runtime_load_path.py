"""Which image the loader hands the driver (no GPU: the driver calls are replaced).

A module using setmaxnreg is loaded from PTX through the driver JIT even with use_cubin=True:
nvJitLink drops setmaxnreg (ptxas advisory C7504), the driver JIT keeps it (README,
'setmaxnreg'). Everything else with use_cubin=True gets a cubin for the arch
`Module.assemble()` would pick on this GPU, so both share one cache entry."""

from __future__ import annotations

import contextlib
import sys

import pytest

from ptxdsl import AssemblyError, Kernel, Module
from ptxdsl.assembly_report import PtxdslAssemblerWarning
from ptxdsl.runtime import compat, device, loader
from ptxdsl.runtime.device import DeviceInfo

INFO = DeviceInfo(0, "Fake H100", (9, 0), 132, 1024, (1024, 1024, 64), (1, 1, 1), 49152,
                  232448, 233472, 80 << 30, 50 << 20, 32, True, 13000)
JIT_LOG = ("ptxas info    : 0 bytes gmem\n"
           "ptxas info    : Compiling entry function 'k' for 'sm_90a'\n"
           "ptxas info    : Function properties for k\n"
           "    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
           "ptxas info    : Used 240 registers, used 0 barriers\n")


@pytest.fixture
def fake_driver(monkeypatch):
    loads = []

    def cuda_load(image, ptx, name, locate):
        loads.append(image)
        log = "" if image.startswith(b"\x7fELF") else JIT_LOG
        return object(), log, 1.0

    monkeypatch.setattr(loader, "on_device", lambda d: contextlib.nullcontext())
    monkeypatch.setattr(loader, "device_info", lambda d: INFO)
    monkeypatch.setattr(loader, "_cuda_load", cuda_load)
    monkeypatch.setattr(device, "current_compute_capability", lambda: (9, 0))
    return loads


def _module(setmaxnreg: bool) -> Module:
    k = Kernel("k", maxntid=256, minnctapersm=1)
    if setmaxnreg:
        k.asm("setmaxnreg.inc.sync.aligned.u32 240;", requires=("8.0", "sm_90a"))
    k.ret()
    return Module([k])


def test_setmaxnreg_module_takes_the_driver_jit_even_with_use_cubin(fake_driver):
    with pytest.warns(PtxdslAssemblerWarning, match="setmaxnreg.*driver JIT") as rec:
        mod = loader.load_module(_module(True), use_cubin=True, cache=False)
    assert rec[0].filename == __file__   # the caller's line, not ptxdsl's
    (image,) = fake_driver
    assert not image.startswith(b"\x7fELF") and b"setmaxnreg.inc" in image
    assert mod.arch is None and mod.report.kernels["k"].registers == 240


def test_plain_module_gets_a_cubin_for_the_same_arch_as_module_assemble(fake_driver):
    m = _module(False)
    mod = loader.load_module(m, use_cubin=True, cache=False)
    (image,) = fake_driver
    assert image.startswith(b"\x7fELF")
    assert mod.arch == m.assemble().arch == compat.build_arch(m.target, (9, 0))[0] == "sm_90"
    assert mod.report is not None and "k" in mod.report.kernels


def test_cache_key_arch_is_the_module_assemble_arch(fake_driver, monkeypatch, tmp_path):
    seen = []
    real = loader.cached_assemble

    def spy(ptx, arch, *a, **kw):
        seen.append(arch)
        return real(ptx, arch, *a, **kw)

    monkeypatch.setattr(loader, "cached_assemble", spy)
    m = _module(False)
    loader.load_module(m, use_cubin=True, cache_dir=tmp_path)
    assert seen == [m.assemble().arch]


def test_assembler_options_reach_nvjitlink_and_the_cache_key(fake_driver, tmp_path):
    m = _module(False)
    plain = loader.load_module(m, use_cubin=True, cache_dir=tmp_path)
    capped = loader.load_module(m, use_cubin=True, cache_dir=tmp_path,
                                options=("-maxrregcount=32",))
    assert (plain.cache_hit, capped.cache_hit) == (False, False)   # two keys, two builds
    assert len(list(tmp_path.glob("*.cubin"))) == 2
    again = loader.load_module(m, use_cubin=True, cache_dir=tmp_path,
                               options=("-maxrregcount=32",))
    assert again.cache_hit is True
    with pytest.raises(AssemblyError, match="-bogus"):
        loader.load_module(m, use_cubin=True, cache=False, options=("-bogus",))


def test_driver_jit_warnings_become_python_warnings(fake_driver, monkeypatch):
    advisory = ("ptxas info    : (C7508) Potential Performance Loss: 'setmaxnreg' ignored; "
                "unable to determine register count at entry.\n")
    monkeypatch.setattr(loader, "_cuda_load",
                        lambda image, ptx, name, locate: (object(), advisory + JIT_LOG, 1.0))
    k = Kernel("k", maxntid=256)
    line = sys._getframe().f_lineno + 1
    k.asm("setmaxnreg.inc.sync.aligned.u32 240;", requires=("8.0", "sm_90a"))
    k.ret()
    with pytest.warns(PtxdslAssemblerWarning, match="C7508") as rec:
        loader.load_module(Module([k]))
    assert any((w.filename, w.lineno) == (__file__, line) for w in rec)


class _FakeDriver:
    """Just the calls `current_compute_capability` may make; no context calls allowed."""

    class CUdevice_attribute:
        CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = "major"
        CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = "minor"

    def __init__(self, count):
        self.count = count

    def cuDeviceGetCount(self):
        return (0, self.count)

    def cuDeviceGet(self, n):
        return (0, f"dev{n}")

    def cuDeviceGetAttribute(self, attr, dev):
        return (0, {"major": 9, "minor": 0}[attr])

    def __getattr__(self, name):   # cuDevicePrimaryCtxRetain, cuCtxCreate, ...
        raise AssertionError(f"current_compute_capability must not call {name}")


@pytest.mark.parametrize("count, want", [(1, (9, 0)), (0, None)])
def test_current_compute_capability_needs_no_context(monkeypatch, count, want):
    from ptxdsl.runtime import _driver
    monkeypatch.setattr(device, "_infos", {})
    monkeypatch.setattr(_driver, "init_error", lambda: None)
    monkeypatch.setattr(device, "driver", lambda: _FakeDriver(count))
    assert device.current_compute_capability() == want


def test_current_compute_capability_without_a_driver_is_none(monkeypatch):
    from ptxdsl.runtime import _driver
    monkeypatch.setattr(device, "_infos", {})
    monkeypatch.setattr(_driver, "init_error", lambda: "no CUDA driver")
    assert device.current_compute_capability() is None
