"""ptxdsl._launch_c, the launch's driver call from C, without a GPU: a ctypes function stands in
for the driver's cuLaunchKernelEx entry point, so the test sees exactly the addresses and the
result that cross the C boundary. Each case runs in a child process: the entry point is
process-wide state, which a GPU test in this process must not find replaced. The GPU side is
every launch of the GPU tests (`Function.launch_path` is "C" there when the module is built)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

try:
    import ptxdsl._launch_c  # noqa: F401
    BUILT = True
except ImportError:
    BUILT = False

pytestmark = pytest.mark.skipif(not BUILT, reason="ptxdsl._launch_c is not built here (it "
                                "needs a C compiler at install; launches then go through "
                                "cuda.bindings)")

PRELUDE = """
import ctypes
from types import SimpleNamespace
ENTRY = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
                         ctypes.c_void_p)
seen = []
def driver_entry(cfg, f, params, extra):
    seen.append((cfg, f, params, extra))
    return RESULT
entry = ENTRY(driver_entry)
address = ctypes.cast(entry, ctypes.c_void_p).value
"""


def _child(code: str) -> str:
    res = subprocess.run([sys.executable, "-c", PRELUDE + textwrap.dedent(code)],
                         capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert res.returncode == 0, res.stdout + res.stderr
    return res.stdout


def test_the_call_passes_the_addresses_and_returns_the_result():
    out = _child("""
        RESULT = 0
        from ptxdsl import _launch_c as c
        try:
            c.launch_ex(1, 2, 3)
        except RuntimeError as e:
            print("unset:", e)
        c.set_entry(address)
        RESULT = 719
        print("result:", c.launch_ex(0x1000, 0x2000, 0x3000))
        print("seen:", seen)
        for bad in ((1, 2), (1, 2, 3, 4), (1, 2, "x"), (0, 2, 3), (1, 0, 3), (-1, 2, 3)):
            try:
                c.launch_ex(*bad)
            except (TypeError, ValueError, OverflowError) as e:
                print("refused:", type(e).__name__)
        print("calls:", len(seen))
    """)
    assert "unset: launch_ex: set_entry() was not called" in out
    assert "result: 719" in out
    assert "seen: [(4096, 8192, 12288, None)]" in out     # no `extra`
    assert out.count("refused:") == 6 and "calls: 1" in out


def test_function_launch_goes_through_it_and_names_a_driver_error():
    """`c_launcher` takes the entry from cuGetProcAddress (the CUDA version cuda.bindings was
    built for, the legacy default stream), and Function.launch calls it with the cached
    config's struct address, the function handle and the packed parameters; a failing result
    becomes the DriverError a cuda.bindings call would give."""
    out = _child("""
        RESULT = 0
        import ptxdsl.runtime.launch as L
        from ptxdsl.runtime import _driver
        from ptxdsl.runtime.args import ArgPacker
        from ptxdsl.types import ScalarType
        class Result(int):
            name = "CUDA_ERROR_INVALID_VALUE"
        drv = SimpleNamespace(
            CUDA_VERSION=13050,
            CUdriverProcAddress_flags=SimpleNamespace(
                CU_GET_PROC_ADDRESS_LEGACY_STREAM="legacy",
                CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM="per-thread"),
            cuDriverGetVersion=lambda: (0, 13000),
            cuGetProcAddress=lambda sym, ver, flags: (print("lookup:", sym, ver, flags)
                                                      or (0, address, 0)),
            CUresult=Result)
        launch = L.c_launcher(drv)
        print("launcher:", launch is not None)
        fn = object.__new__(L.Function)
        fn.name, fn.device, fn.handle, fn._func = "k", 0, "h", 0xF00
        fn.params = (SimpleNamespace(name="n", kind="scalar", type=ScalarType.u32, size=4),)
        fn._packer = ArgPacker("k", fn.params)
        fn._free_packers = [fn._packer]
        fn._configs = {(1, 32, 0, None, None): 0xC0F}
        fn._c_launch = launch
        L._tls.device = 0
        fn.launch(1, 32, (7,))
        cfg, f, params, extra = seen[-1]
        value = ctypes.c_uint32.from_address(ctypes.c_void_p.from_address(params).value).value
        print("call:", hex(cfg), hex(f), value, extra, fn.launch_path)
        twin = fn._through_bindings()
        print("twin:", twin.launch_path, twin._configs, twin._func, fn.launch_path,
              len(fn._configs))
        RESULT = 1
        _driver._driver = None
        L.driver = lambda: drv
        try:
            fn.launch(1, 32, (8,))
        except _driver.DriverError as e:
            print("error:", e)
    """)
    assert "lookup: b'cuLaunchKernelEx' 13000 legacy" in out
    assert "launcher: True" in out
    assert "call: 0xc0f 0xf00 7 None C" in out
    assert "twin: cuda.bindings {} h C 1" in out      # the benchmark's bindings-path copy
    assert "error:" in out and "cuLaunchKernelEx" in out and "CUDA_ERROR_INVALID_VALUE" in out


def test_switched_off_by_the_environment():
    out = _child("""
        RESULT = 0
        import os
        os.environ["PTXDSL_C_LAUNCH"] = "0"
        import ptxdsl.runtime.launch as L
        drv = SimpleNamespace(cuGetProcAddress=lambda *a: (0, address, 0))
        print("launcher:", L.c_launcher(drv))
    """)
    assert "launcher: None" in out
