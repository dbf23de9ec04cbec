"""Version/target compatibility, PTX signature parsing, JIT-log mapping, foreign arrays, driver
discovery and timeout polling: the runtime's pure parts (no GPU)."""

from __future__ import annotations

import numpy as np
import pytest

from ptxdsl.errors import SourceLoc
from ptxdsl.runtime import _driver, gpu_skip_reason
from ptxdsl.runtime.arrays import DL_CPU, array_info, dlpack_info
from ptxdsl.runtime.compat import (
    check_module_compat,
    check_target,
    check_version,
    cubin_arch,
    max_ptx_version,
    runs_on,
)
from ptxdsl.runtime.errors import CompatibilityError, DriverError, NoDriverError, SyncTimeoutError
from ptxdsl.runtime.loader import jit_error, parse_jit_log
from ptxdsl.runtime.memory import _wait
from ptxdsl.runtime.ptx_params import parse_entries, parse_target, parse_version
from ptxdsl.types import PtxVersion, ScalarType, Target
from tests import gpu_kernels_runtime as kernels


@pytest.mark.parametrize("driver,ptx", [
    (11080, "7.8"), (12000, "8.0"), (12040, "8.4"), (12060, "8.5"), (12080, "8.7"),
    (12090, "8.8"), (13000, "9.0"), (13010, "9.1"), (13020, "9.2"), (13030, "9.3"),
])
def test_max_ptx_version(driver, ptx):
    assert max_ptx_version(driver) == PtxVersion.parse(ptx)


def test_unknown_future_driver_refuses_nothing():
    assert max_ptx_version(14000) is None
    check_version(PtxVersion(99, 9), 14000)


def test_version_above_driver_is_refused_with_advice():
    check_version(PtxVersion(9, 0), 13000)
    with pytest.raises(CompatibilityError) as info:
        check_version(PtxVersion(9, 1), 13000)
    msg = str(info.value)
    assert "PTX ISA 9.1" in msg and "(13.0" in msg and "up to 9.0" in msg
    assert "update the driver or lower" in msg


@pytest.mark.parametrize("target,cc,ok", [
    ("sm_90a", (9, 0), True), ("sm_90a", (10, 0), False), ("sm_90", (9, 0), True),
    ("sm_90", (12, 0), True), ("sm_80", (9, 0), True), ("sm_100", (9, 0), False),
    ("sm_100a", (9, 0), False), ("sm_100f", (10, 3), True), ("sm_100f", (12, 0), False),
    ("sm_103f", (10, 0), False),
])
def test_runs_on(target, cc, ok):
    assert runs_on(Target.parse(target), cc) is ok


def test_target_errors_say_what_is_needed():
    with pytest.raises(CompatibilityError, match="exactly compute capability 9.0.*is compute "
                       "capability 10.0"):
        check_target(Target.parse("sm_90a"), (10, 0), "device 0 (B200)")
    with pytest.raises(CompatibilityError, match="sm_100, which needs compute capability 10.0 or "
                       "newer; device 0 \\(H100\\) is compute capability 9.0"):
        check_target(Target.parse("sm_100"), (9, 0), "device 0 (H100)")
    check_module_compat(None, None, 13000, (9, 0))  # unparsable raw PTX: left to the driver


def test_cubin_arch_keeps_the_suffix():
    assert cubin_arch(Target.parse("sm_90a"), (9, 0)) == "sm_90a"
    assert cubin_arch(Target.parse("sm_80"), (9, 0)) == "sm_90"
    assert cubin_arch(None, (9, 0)) == "sm_90"


def test_parse_entries_reads_kinds_types_sizes():
    params = parse_entries(kernels.ARGS_ECHO)["args_echo"]
    assert [(p.name, p.kind, p.type, p.size) for p in params] == [
        ("p_u16", "scalar", ScalarType.u16, 2), ("p_u32", "scalar", ScalarType.u32, 4),
        ("p_s32", "scalar", ScalarType.s32, 4), ("p_u64", "scalar", ScalarType.u64, 8),
        ("p_s64", "scalar", ScalarType.s64, 8), ("p_f32", "scalar", ScalarType.f32, 4),
        ("p_f64", "scalar", ScalarType.f64, 8), ("p_out", "pointer", ScalarType.u64, 8)]
    (tmap, out, x, y) = parse_entries(kernels.tma_load_2d(512))["tma_load_2d"]
    assert (tmap.kind, tmap.size, tmap.align) == ("tensormap", 128, 64)
    assert (out.kind, x.type) == ("pointer", ScalarType.s32)


def test_parse_entries_edge_cases():
    text = """.version 8.3 // header
    .target sm_90a
    /* .entry commented_out(.param .u32 a) */
    .visible .entry noargs()
    { ret; }
    .visible .entry blob(.param .align 8 .b8 s[24], .param .b32 w)
    { ret; }"""
    entries = parse_entries(text)
    assert list(entries) == ["noargs", "blob"] and entries["noargs"] == ()
    s, w = entries["blob"]
    assert (s.kind, s.size, s.align, w.type) == ("bytes", 24, 8, ScalarType.b32)
    assert parse_version(text) == PtxVersion(8, 3) and parse_target(text) == Target(90, "a")
    with pytest.raises(ValueError, match="kernel 'k': unknown parameter type .q32"):
        parse_entries(".entry k(.param .q32 x)")


LOG = ("ptxas application ptx input, line 11; error   : Arguments mismatch for instruction "
       "'add'\nptxas application ptx input, line 11; error   : Unknown symbol '%undeclared'\n"
       "ptxas application ptx input, line 3; warning : something minor\n"
       "ptxas fatal   : Ptx assembly aborted due to errors\n")


def test_parse_jit_log():
    assert parse_jit_log(LOG) == [
        (11, "error", "Arguments mismatch for instruction 'add'"),
        (11, "error", "Unknown symbol '%undeclared'"), (3, "warning", "something minor")]


def test_jit_error_names_ptx_line_text_and_python_line():
    line = kernels.JIT_ERROR.splitlines().index(kernels.BAD_LINE) + 1
    log = LOG.replace("line 11", f"line {line}")
    err = jit_error(log, kernels.JIT_ERROR, "broken", lambda n: SourceLoc("build.py", 100 + n),
                    "CUDA_ERROR_INVALID_PTX")
    assert (err.ptx_line, err.ptx_text, err.log) == (line, kernels.BAD_LINE, log)
    assert err.loc == SourceLoc("build.py", 100 + line)
    msg = str(err)
    assert msg.startswith(f"build.py:{100 + line}: ") and "CUDA_ERROR_INVALID_PTX" in msg
    assert f"PTX line {line}: `add.u32 %r1, %r1, %undeclared;`" in msg


def test_jit_error_without_locate_or_line():
    def broken_locate(n):
        raise RuntimeError("bug")

    err = jit_error(LOG, kernels.JIT_ERROR, "m", broken_locate, "CUDA_ERROR_INVALID_PTX")
    assert err.loc == SourceLoc("<ptx:m>", 11)
    err = jit_error("", "x", "m", None, "CUDA_ERROR_NO_BINARY_FOR_GPU")
    assert err.ptx_line is None and "CUDA_ERROR_NO_BINARY_FOR_GPU" in str(err)


def test_dlpack_of_a_strided_host_array():
    base = np.arange(48, dtype=np.float32).reshape(6, 8)
    view = base[::2, 1:5]
    info = dlpack_info(view)
    assert info.shape == (3, 4) and info.byte_strides == (64, 4)
    assert info.dtype == np.float32 and info.ptr == view.ctypes.data
    assert info.device_type == DL_CPU and not info.on_device


def test_array_info_from_cuda_array_interface():
    class Cai:
        __cuda_array_interface__ = {"data": (0x1000, False), "shape": (2, 3),
                                    "typestr": "<u2", "strides": None, "version": 3}

    info = array_info(Cai())
    assert (info.ptr, info.shape, info.dtype, info.on_device) == (0x1000, (2, 3),
                                                                 np.uint16, True)
    assert info.strides_or_contiguous() == (6, 2)
    with pytest.raises(TypeError, match="no device array interface"):
        array_info(object())


@pytest.fixture
def fresh_driver_state(monkeypatch):
    monkeypatch.setattr(_driver, "_driver", None)
    monkeypatch.setattr(_driver, "_init_error", None)


def test_missing_bindings_is_reported(fresh_driver_state, monkeypatch):
    def no_bindings():
        raise ImportError("No module named 'cuda.bindings'")

    monkeypatch.setattr(_driver, "_import_driver", no_bindings)
    assert "cuda.bindings is not installed" in _driver.init_error()
    with pytest.raises(NoDriverError, match="cuda.bindings is not installed"):
        _driver.driver()


def test_missing_libcuda_is_reported(fresh_driver_state, monkeypatch):
    class DynamicLibNotFoundError(RuntimeError):
        pass

    class FakeDriver:
        @staticmethod
        def cuInit(flags):
            raise DynamicLibNotFoundError("libcuda.so not found")

    monkeypatch.setattr(_driver, "_import_driver", lambda: FakeDriver)
    assert _driver.init_error() == ("no CUDA driver (DynamicLibNotFoundError: libcuda.so not "
                                    "found)")


def test_gpu_skip_reason_is_a_reason_or_none():
    reason = gpu_skip_reason()
    if _driver.init_error() is not None:
        assert reason == _driver.init_error()
    else:
        assert reason is None or "compute capability" in reason or "device" in reason


class Result:
    def __init__(self, code):
        self.code = code

    def __int__(self):
        return self.code


def test_wait_polls_until_done():
    answers = iter([600, 600, 0])
    _wait(lambda: (Result(next(answers)),), "cuEventQuery", "event", 5.0, None)


def test_wait_times_out_instead_of_hanging():
    with pytest.raises(SyncTimeoutError, match="event not finished after 0.05 s"):
        _wait(lambda: (Result(600),), "cuEventQuery", "event", 0.05, None)


def test_wait_raises_a_real_error_at_once():
    with pytest.raises(DriverError, match="cuStreamQuery failed.*\\(700\\)"):
        _wait(lambda: (Result(700),), "cuStreamQuery", "stream", 5.0, None)
