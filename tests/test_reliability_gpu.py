"""Reliability on the GPU (issue 7, items 3-5): hangs become `WaitTimeoutError` with the
error record, faults become `KernelFault` naming the CUDA error and the kernel, and
compute-sanitizer names the Python line of a faulting store.

A trap or a memory fault is a sticky error that no later CUDA call of the process survives
(driver 580: not even a context reset), so the faulting kernels run in a child process
(`debug.isolated`) and this process — the test suite — goes on, as `_still_works` checks after
each. Every test runs under a timeout, so a hang is a failure.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time

import numpy as np
import pytest

from ptxdsl import Kernel, Module, debug, t
from ptxdsl.runtime import DeviceBuffer, SyncTimeoutError, TensorMap, load_module, synchronize
from ptxdsl.testing import gpu_deadline
from tests import test_reliability_cpu as K

pytestmark = pytest.mark.gpu
TIMEOUT_S = 90
SOON_S = 5.0          # "within seconds": the bounded waits give up after K.WAIT_NS


@pytest.fixture(autouse=True)
def _timeout():
    with gpu_deadline(TIMEOUT_S):
        yield


def _loaded(kernel):
    return load_module(debug.module([kernel], check=False))


def _still_works():
    """The process goes on: a fresh module loads and computes the right answer."""
    k = Kernel("still_works", reqntid=32)
    out = k.ld_param(k.param_ptr("out"))
    o = k.add(out, k.mul(k.tid.x, 4, mode="wide"), type=t.u64)
    k.st(o, k.add(k.tid.x, 1), type=t.u32, space="generic")
    k.ret()
    fn = load_module(Module([k], check=False))["still_works"]
    with DeviceBuffer.zeros(32, np.uint32) as buf:
        debug.run(fn, 1, 32, (buf,), timeout=20)
        np.testing.assert_array_equal(buf.to_numpy(), np.arange(1, 33))
    assert not debug.context_broken()


# -- children: run by debug.isolated in a spawned process, where a sticky error stays ----------
def child_wait_timeout(which: str):
    """A wrong wait (the expect_tx byte count, or the parity) under bounded waits."""
    if which == "expect_tx":
        kernel, args = K.expect_tx_kernel(1024, 512), (DeviceBuffer.zeros(1024, np.uint8),)
    else:
        kernel, args = K.parity_kernel(1), ()
    fn = _loaded(kernel)[kernel.name]
    with debug.Recorder() as rec:
        rec.attach(fn.module)
        debug.run(fn, 1, 32, args, timeout=30, recorder=rec)
    return "the wait did not time out"


def child_fault(which: str):
    """A trap, an illegal address, or a TMA load through a map at a misaligned address."""
    args: tuple = ()
    if which == "trap":
        kernel = K.trap_kernel()
    elif which == "illegal_address":
        kernel = K.illegal_address_kernel()
    else:
        kernel = K.misaligned_tensormap_kernel()
        data = DeviceBuffer.zeros((64, 64), np.float32)
        tmap = TensorMap.tiled(data, (64, 64), np.float32, (16, 16))
        staging = np.zeros(512, np.uint8)
        staging[16:144] = np.frombuffer(bytes(tmap), np.uint8)   # 16- not 64-byte aligned
        where = DeviceBuffer.from_numpy(staging)
        args = (where.ptr + 16,)      # `data` and `where` stay alive until we return
    fn = _loaded(kernel)[kernel.name]
    with debug.Recorder() as rec:
        rec.attach(fn.module)         # a bounded wait that timed out would show here
        debug.run(fn, 1, 32, args, timeout=30, recorder=rec)
    return "no fault"


def child_slow_wait():
    """trap=False and a 3 s bound: the host's 0.5 s synchronize times out first, then the
    kernel gives up waiting, writes the record and ends by itself."""
    k = K.parity_kernel(1, name="slow_wait", timeout_ns=3_000_000_000, trap=False)
    fn = _loaded(k)["slow_wait"]
    with debug.Recorder() as rec:
        rec.attach(fn.module)
        t0 = time.monotonic()
        try:
            debug.run(fn, 1, 32, (), timeout=0.5, recorder=rec)
            host = "no timeout"
        except SyncTimeoutError as e:
            host = f"SyncTimeoutError after {time.monotonic() - t0:.2f} s: {e}"
        synchronize(timeout=20)
        return {"host": host, "record": rec.record(), "ended_after_s": time.monotonic() - t0,
                "context_broken": debug.context_broken()}


# -- the tests (this process never faults) --------------------------------------------------------
def _wait_timeout(which: str, **checks):
    t0 = time.monotonic()
    with pytest.raises(debug.WaitTimeoutError) as err:
        debug.isolated(child_wait_timeout, which, timeout=120)
    e = err.value
    print(f"\n{which}: {e} [launch to exception {e.seconds:.2f} s; child process "
          f"{time.monotonic() - t0:.1f} s]")
    assert e.seconds < SOON_S
    r = e.record
    assert r.kernel == e.kernel and e.kernel in ("expect_tx", "wrong_parity")
    assert r.space == "shared::cta" and r.block == (0, 0, 0) and 0 <= r.thread[0] < 32
    assert r.barrier % 8 == 0 and r.globaltimer_ns > 0
    for key, value in checks.items():
        assert getattr(r, key) == value, (key, getattr(r, key))
    assert e.error.startswith("CUDA_ERROR_") and e.sticky        # the trap is sticky
    _still_works()


def test_wrong_expect_tx_byte_count_raises_with_the_record():
    _wait_timeout("expect_tx", parity=0)


def test_wrong_parity_raises_with_the_record():
    _wait_timeout("wrong_parity", parity=1)


def test_right_counts_and_parity_do_not_time_out():
    with debug.Recorder() as rec:
        ok_tx = _loaded(K.expect_tx_kernel(512, 512, name="right_tx"))["right_tx"]
        ok_par = _loaded(K.parity_kernel(0, name="right_parity"))["right_parity"]
        rec.attach(ok_tx.module).attach(ok_par.module)
        with DeviceBuffer.zeros(1024, np.uint8) as src:
            debug.run(ok_tx, 1, 32, (src,), timeout=20, recorder=rec)
        debug.run(ok_par, 1, 32, (), timeout=20, recorder=rec)
        assert rec.record() is None


def test_host_synchronize_times_out_then_the_record_arrives():
    r = debug.isolated(child_slow_wait, timeout=120)
    print(f"\nslow_wait: {r}")
    assert r["host"].startswith("SyncTimeoutError") and r["record"] is not None
    assert r["record"].kernel == "slow_wait" and r["record"].parity == 1
    assert not r["context_broken"] and r["ended_after_s"] < 20


def _fault(which: str, errors):
    with pytest.raises(debug.KernelFault) as err:
        debug.isolated(child_fault, which, timeout=120)
    e = err.value
    print(f"\n{which}: {e}")
    assert not isinstance(e, debug.WaitTimeoutError), f"no fault, a wait timed out: {e}"
    assert f"kernel '{e.kernel}'" in str(e) and e.error in str(e)
    assert e.error in errors, e.error
    assert e.sticky
    _still_works()


def test_trap_is_a_kernel_fault_and_the_suite_goes_on():
    _fault("trap", {"CUDA_ERROR_LAUNCH_FAILED", "CUDA_ERROR_ILLEGAL_INSTRUCTION"})


def test_illegal_address_is_a_kernel_fault_and_the_suite_goes_on():
    _fault("illegal_address", {"CUDA_ERROR_ILLEGAL_ADDRESS"})


def test_misaligned_tensormap_address_is_a_kernel_fault():
    _fault("misaligned_tensormap", {"CUDA_ERROR_MISALIGNED_ADDRESS"})


def test_suite_goes_on_after_the_faults():
    _still_works()


# -- compute-sanitizer names the Python line -----------------------------------------------------
def sanitizer_child() -> None:
    """Run by compute-sanitizer: the out-of-bounds store, built with lineinfo (JIT path)."""
    k, _ = K.oob_store_kernel()
    fn = load_module(Module([k], lineinfo=True, check=False))["oob_store"]
    with DeviceBuffer.zeros(32, np.uint32) as buf:
        fn.launch(1, 32, (buf,))
        try:
            synchronize(timeout=60)
        except Exception as e:  # noqa: BLE001 - the fault is the point
            print(f"child saw: {e}")


def _sanitizer() -> str | None:
    return shutil.which("compute-sanitizer") or next(
        (p for p in ("/usr/local/cuda/bin/compute-sanitizer",
                     "/usr/local/cuda/compute-sanitizer/compute-sanitizer") if os.path.exists(p)),
        None)


def test_compute_sanitizer_names_the_python_line():
    tool = _sanitizer()
    if tool is None:
        pytest.skip("compute-sanitizer is not on PATH")
    _, line = K.oob_store_kernel()
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    code = (f"import sys; sys.path.insert(0, {root!r}); from tests.test_reliability_gpu "
            "import sanitizer_child; sanitizer_child()")
    proc = subprocess.run([tool, "--tool", "memcheck", sys.executable, "-c", code],
                          capture_output=True, text=True, timeout=240, cwd=root)
    report = proc.stdout + proc.stderr
    print("\n" + "\n".join(ln for ln in report.splitlines() if "=====" in ln)[:3000])
    # The store is an st.global into the null page (see oob_store_kernel), so memcheck can
    # only call it a global write, on any board; and the point: the error names the Python
    # line that built the store.
    error = re.search(r"Invalid __global__ write of size 4\b[^\n]*\n(?:[^\n]*\n){0,4}",
                      report)
    assert error, report[-3000:]
    # The error's own lines (`at oob_store+0x.. in FILE:LINE`) name the line.
    assert re.search(rf"test_reliability_cpu\.py:{line}\b", error[0]), \
        f"expected the error at test_reliability_cpu.py:{line}:\n{error[0]}"
