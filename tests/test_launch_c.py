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
def stand_in(cuda_version, lookup, **more):
    # a driver whose cuGetProcAddress is lookup(sym, ver, flags): built for CUDA
    # cuda_version, running 13.0
    return SimpleNamespace(
        CUDA_VERSION=cuda_version,
        CUdriverProcAddress_flags=SimpleNamespace(
            CU_GET_PROC_ADDRESS_LEGACY_STREAM="legacy",
            CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM="per-thread"),
        cuDriverGetVersion=lambda: (0, 13000), cuGetProcAddress=lookup, **more)
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
        drv = stand_in(13050, lambda sym, ver, flags: (print("lookup:", sym, ver, flags)
                                                       or (0, address, 0)), CUresult=Result)
        launch = L.c_launcher(drv)
        print("launcher:", launch is not None)
        fn = object.__new__(L.Function)
        fn.name, fn.device, fn.handle, fn._func = "k", 0, "h", 0xF00
        fn.params = (SimpleNamespace(name="n", kind="scalar", type=ScalarType.u32, size=4),)
        fn._packer = ArgPacker("k", fn.params)
        fn._free_packers = [fn._packer]
        fn._configs = {(1, 32, 0, None, None): 0xC0F}
        from ptxdsl import _launch_c
        fn._c_launch, fn._c_packed = launch, _launch_c.launch_packed
        fn._c_spec = fn._packer.c_spec
        L._tls.device = 0
        import numpy as np
        for arg in (7, np.uint32(9)):     # packed in C; converted in Python, then the C call
            fn.launch(1, 32, (arg,))
            cfg, f, params, extra = seen[-1]
            value = ctypes.c_uint32.from_address(ctypes.c_void_p.from_address(params).value).value
            print("call:", hex(cfg), hex(f), value, extra, fn.launch_path, len(seen))
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
    assert "call: 0xc0f 0xf00 7 None C 1" in out
    assert "call: 0xc0f 0xf00 9 None C 2" in out
    assert "twin: cuda.bindings {} h C 1" in out      # the benchmark's bindings-path copy
    assert "error:" in out and "cuLaunchKernelEx" in out and "CUDA_ERROR_INVALID_VALUE" in out


def test_only_the_driver_it_was_looked_up_for_gets_the_c_call():
    """Once a real driver's entry is set (a GPU test earlier in the session), a stand-in
    driver (a CPU test's, whose handles are names, not the driver's) and any other driver get
    cuda.bindings' call: the C call would hand the stand-in's handles to the real entry."""
    out = _child("""
        RESULT = 0
        import ptxdsl.runtime.launch as L
        real = stand_in(13000, lambda *a: (print("lookup") or (0, address, 0)))
        print("real:", L.c_launcher(real) is not None)
        print("again:", L.c_launcher(real) is not None)
        print("stand-in:", L.c_launcher(SimpleNamespace()))
        print("other:", L.c_launcher(SimpleNamespace(cuGetProcAddress=real.cuGetProcAddress)))
    """)
    assert out.count("lookup") == 1
    assert "real: True" in out and "again: True" in out
    assert "stand-in: None" in out and "other: None" in out


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


# -- packing in C (launch_packed's first half): the same bytes as the Python pack, or "not here"

def _packer():
    from ptxdsl.runtime.args import ArgPacker
    from ptxdsl.types import ScalarType as T
    from tests.test_runtime_args import PTR, TMAP, scalar
    params = [scalar("a", T.u8), scalar("b", T.s16), PTR, scalar("c", T.u32),
              scalar("f", T.f32), TMAP, scalar("d", T.f64), scalar("q", T.s64),
              scalar("w", T.b32), scalar("u", T.u64)]
    return ArgPacker("k", params)


def _c_pack(packer, args):
    """(packed?, bytes) of the C packer on `args`, into a buffer of the layout's size that
    starts as 0xEE bytes (so padding left unwritten would show)."""
    import ctypes

    from ptxdsl import _launch_c
    size = len(packer.buffer)
    buf = (ctypes.c_char * size)(*([b"\xee"] * size))
    ok = _launch_c.pack(packer.c_spec, args, ctypes.addressof(buf))
    return ok, bytes(buf)


def _device_buffer(ptr):
    from ptxdsl.runtime.memory import DeviceBuffer
    buf = object.__new__(DeviceBuffer)      # no driver here: fake the allocation
    buf._ptr = ptr
    return buf


def _tmap(fill):
    from ptxdsl.runtime.tensormap import TensorMap
    return TensorMap(bytes([fill]) * 128)


def test_c_pack_writes_the_bytes_the_python_pack_writes():
    packer = _packer()
    assert packer.c_spec is not None
    cases = [
        (0, -32768, 0, 0, 0.0, _tmap(0), 0.0, -(1 << 63), 0, 0),
        (255, 32767, (1 << 64) - 1, (1 << 32) - 1, 3.4e38, _tmap(0xA5), -1e308, (1 << 63) - 1,
         (1 << 32) - 1, (1 << 64) - 1),
        (7, -1, _device_buffer(0x7F00_0000_1000), 12345, float("inf"), _tmap(1), float("nan"),
         -5, 17, 1 << 40),
        (1, 2, 0x1000, 3, 1.1, _tmap(2), 1.1, 4, 5, 6),
    ]
    for args in cases:
        ok, packed = _c_pack(packer, args)
        assert ok is True, args
        packer.pack(args)
        assert packed == packer.buffer, args


@pytest.mark.parametrize("index,value", [
    (0, 256), (0, -1), (0, True), (0, 1.0), (1, 32768), (1, -32769),      # u8, s16 ranges
    (2, -1), (2, 1 << 64), (2, "0x10"),                                    # pointer
    (3, 1 << 32), (3, 2**100), (4, 1e39), (4, 1), (5, b"\0" * 128),        # u32, f32, map
    (6, 1), (7, 1 << 63), (8, -1), (9, 2**64),                             # f64, s64, b32, u64
])
def test_c_pack_leaves_to_python_what_python_converts_or_refuses(index, value):
    """Whatever the generated Python pack sends to a converter (to convert it: a negative .b32,
    a bytes map; or to refuse it) is not packed in C, so the checks and messages stay one."""
    args = [1, 2, 0x1000, 3, 1.5, _tmap(0), 2.5, 4, 5, 6]
    args[index] = value
    assert _c_pack(_packer(), tuple(args))[0] is False


def test_c_pack_takes_only_an_exact_tuple_of_the_right_length():
    packer = _packer()
    args = [1, 2, 0x1000, 3, 1.5, _tmap(0), 2.5, 4, 5, 6]
    assert _c_pack(packer, args)[0] is False          # a list: Python normalizes it
    assert _c_pack(packer, tuple(args[:-1]))[0] is False
    assert _c_pack(packer, tuple(args))[0] is True


def test_a_freed_device_buffer_is_left_to_python():
    args = (1, 2, _device_buffer(None), 3, 1.5, _tmap(0), 2.5, 4, 5, 6)
    assert _c_pack(_packer(), args)[0] is False


def test_no_c_spec_for_a_signature_with_a_parameter_python_always_converts():
    from ptxdsl.runtime.args import ArgPacker
    from ptxdsl.types import ScalarType as T
    from tests.test_runtime_args import PTR, scalar
    assert ArgPacker("k", [PTR, scalar("h", T.f16)]).c_spec is None
    assert ArgPacker("k", [PTR, scalar("p", T.u32, is_bool=True)]).c_spec is None
    assert ArgPacker("k", [PTR, scalar("x", T.f32)]).c_spec is not None


def test_launch_packed_launches_only_what_it_packed():
    out = _child("""
        RESULT = 0
        from ptxdsl import _launch_c as c
        from ptxdsl.runtime.args import ArgPacker
        from ptxdsl.types import ScalarType as T
        from types import SimpleNamespace as P
        p = ArgPacker("k", [P(name="n", kind="scalar", type=T.u32, size=4, align=4,
                              is_bool=False)])
        values = []
        def reading_entry(cfg, f, params, extra):
            # the driver reads the values during the call: read them the same way here
            slot = ctypes.c_void_p.from_address(params).value
            values.append(ctypes.c_uint32.from_address(slot).value)
            return 0
        reading = ENTRY(reading_entry)
        c.set_entry(ctypes.cast(reading, ctypes.c_void_p).value)
        print("packed:", c.launch_packed(0x1000, 0x2000, p.c_spec, (5,)), values)
        print("not packed:", c.launch_packed(0x1000, 0x2000, p.c_spec, (-5,)), values)
        print("python buffer untouched:", p.buffer.hex())
    """)
    assert "packed: 0 [5]" in out
    assert "not packed: -1 [5]" in out
    assert "python buffer untouched: 00000000" in out


def test_fast_launch_launches_the_common_case_and_hands_on_everything_else():
    """`Function.launch` is `partial(fast_launch, state)` where the C module is built: the
    common launch never reaches Python, and every other call reaches the Python method with
    exactly the arguments it was given (which checks, reports and launches as before)."""
    out = _child("""
        RESULT = 0
        import numpy as np
        from ptxdsl import _launch_c as c
        from ptxdsl.runtime.args import ArgPacker
        from ptxdsl.types import ScalarType as T
        p = ArgPacker("k", [SimpleNamespace(name="n", kind="scalar", type=T.u32, size=4,
                                            align=4, is_bool=False)])
        handed = []
        def slow(*args, **kw):
            handed.append((args, kw))
        tls = SimpleNamespace(device=0)
        state = (slow, tls, 0, {(1, 32, 0, None, None): 0xC0F, (1, 32, 0, 77, None): 0xC1F},
                 0xF00, p.c_spec)
        c.set_entry(address)
        def launch(*args, **kw):
            before = len(seen), len(handed)
            c.fast_launch(state, *args, **kw)
            return len(seen) - before[0], len(handed) - before[1]
        print("common:", launch(1, 32, (7,)), launch(1, 32, args=(7,)),
              launch(1, 32, (7,), shared_mem=0, stream=None, cluster=None))
        print("config:", hex(seen[-1][0]), hex(seen[-1][1]))
        print("int stream:", launch(1, 32, (7,), stream=77), hex(seen[-1][0]))
        for what, a, kw in [("tuple grid", ((1, 1, 1), 32, (7,)), {}),
                            ("stream", (1, 32, (7,)), {"stream": 5}),
                            ("stream object", (1, 32, (7,)), {"stream": SimpleNamespace()}),
                            ("cluster", (1, 32, (7,)), {"cluster": 2}),
                            ("numpy shared_mem", (1, 32, (7,)), {"shared_mem": np.int64(0)}),
                            ("unknown config", (2, 32, (7,)), {}),
                            ("list args", (1, 32, [7]), {}),
                            ("numpy arg", (1, 32, (np.uint32(7),)), {}),
                            ("negative arg", (1, 32, (-7,)), {}),
                            ("no args", (1, 32), {}),
                            ("too many", (1, 32, (7,), 0), {}),
                            ("unknown keyword", (1, 32, (7,)), {"grid_x": 1})]:
            print(what + ":", launch(*a, **kw), handed[-1] == (a, kw))
        tls.device = 1
        print("other device:", launch(1, 32, (7,)))
        tls.device = 0
        RESULT = 719
        print("refused by the driver:", launch(1, 32, (7,)))
    """)
    assert "common: (1, 0) (1, 0) (1, 0)" in out
    assert "config: 0xc0f 0xf00" in out
    assert "int stream: (1, 0) 0xc1f" in out
    for what in ("tuple grid", "stream", "stream object", "cluster", "numpy shared_mem",
                 "unknown config", "list args", "numpy arg", "negative arg", "no args", "too many",
                 "unknown keyword"):
        assert f"{what}: (0, 1) True" in out, what
    assert "other device: (0, 1)" in out
    # The driver's refusal launched nothing: the Python method launches (and reports) once.
    assert "refused by the driver: (1, 1)" in out
