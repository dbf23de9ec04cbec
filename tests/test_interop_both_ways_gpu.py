"""Interop both ways on the GPU (issue 31): a DeviceBuffer exported through DLPack to torch and
CuPy, a ptxdsl Stream handed to cuda.core, and a cuda.core ObjectCode loaded by ptxdsl.
Prints what it saw for a failing run."""

from __future__ import annotations

import gc

import numpy as np
import pytest

from ptxdsl.runtime import DeviceBuffer, Stream, load_ptx
from ptxdsl.testing import gpu_deadline
from tests import gpu_kernels_runtime as K

pytestmark = pytest.mark.gpu


def test_a_ptxdsl_stream_is_a_cuda_core_stream():
    core = pytest.importorskip("cuda.core")
    with gpu_deadline(60):
        dev = core.Device(0)
        dev.set_current()
        with Stream(non_blocking=True) as s:
            theirs = dev.create_stream(s)          # through __cuda_stream__
            print("ptxdsl", hex(s.ptr), "cuda.core", theirs.handle)
            assert int(theirs.handle) == s.ptr
            fn = load_ptx(K.VADD)["vadd"]
            n = 512
            a = DeviceBuffer.from_numpy(np.arange(n, dtype=np.float32))
            b = DeviceBuffer.from_numpy(np.ones(n, np.float32))
            c = DeviceBuffer.from_numpy(np.zeros(n, np.float32))   # copied before return
            fn.launch(n // 256, 256, (a, b, c, n), stream=theirs)  # and back again
            theirs.sync()
            assert (c.to_numpy() == np.arange(n, dtype=np.float32) + 1).all()


def _check_vadd(fn, n=1024):
    a = DeviceBuffer.from_numpy(np.arange(n, dtype=np.float32))
    b = DeviceBuffer.from_numpy(np.full(n, 3, np.float32))
    c = DeviceBuffer.from_numpy(np.zeros(n, np.float32))
    fn.launch(n // 256, 256, (a, b, c, n))
    out = c.to_numpy()
    print("first values:", out[:4])
    assert (out == np.arange(n, dtype=np.float32) + 3).all()


def test_cuda_core_object_code_loads_into_ptxdsl():
    core = pytest.importorskip("cuda.core")
    from ptxdsl.runtime import load_object_code
    with gpu_deadline(120):
        dev = core.Device(0)
        dev.set_current()
        cc = dev.compute_capability
        arch = f"sm_{cc[0]}{cc[1]}"
        ptx_obj = core.ObjectCode.from_ptx(K.VADD.encode(), name="vadd_ptx")
        mod = load_object_code(ptx_obj)                              # PTX: the JIT path
        print(mod)
        _check_vadd(mod["vadd"])
        # PTX -> cubin through cuda.core's Program (nvJitLink), loaded with the PTX signatures
        cubin = core.Program(K.VADD, "ptx", core.ProgramOptions(arch=arch)).compile("cubin")
        mod = load_object_code(cubin, ptx=K.VADD)
        print(mod, cubin.code_type)
        assert mod.code_type == "cubin"
        _check_vadd(mod["vadd"])


def test_a_setmaxnreg_module_handed_to_cuda_core_as_ptx_loads_back():
    core = pytest.importorskip("cuda.core")
    from ptxdsl import Addr, Kernel, Module, t
    from ptxdsl.runtime import load_object_code
    k = Kernel("echo", maxntid=128, minnctapersm=1)
    out = k.cvta(k.ld_param(k.param_ptr("out")), "global", to=True)
    k.asm("setmaxnreg.inc.sync.aligned.u32 240;", requires=("8.0", "sm_90a"))
    k.st(Addr(k.add(out, k.mul(k.tid.x, 4, mode="wide"))), k.tid.x, type=t.u32, space="global")
    k.ret()
    m = Module([k], name="echo")
    with gpu_deadline(120):
        obj = m.to_cuda_core()
        assert obj.code_type == "ptx"
        core.Device(0).set_current()
        obj.get_kernel("echo")          # cuda.core loads it (bytes: a str would be a path)
        mod = load_object_code(obj).preload()       # and ptxdsl, through the driver JIT
        print(mod, mod["echo"])
        assert mod.code_type == "ptx" and "setmaxnreg.inc" in mod.ptx


def test_torch_views_a_device_buffer_through_dlpack():
    torch = pytest.importorskip("torch")
    with gpu_deadline(60):
        with DeviceBuffer.from_numpy(np.arange(64, dtype=np.float32).reshape(8, 8)) as buf:
            t = torch.from_dlpack(buf)                  # versioned capsule, no copy
            print(t.device, t.shape, t.dtype, hex(t.data_ptr()), hex(buf.ptr))
            assert t.data_ptr() == buf.ptr and t.shape == (8, 8) and t.dtype == torch.float32
            t += 1                                      # the same memory, seen from ptxdsl
            torch.cuda.synchronize()
            assert (buf.to_numpy() == np.arange(64, dtype=np.float32).reshape(8, 8) + 1).all()
        # the buffer is freed on leaving the block, but torch still views it: kept
        gc.collect()
        assert float(t.sum()) == float(np.arange(64).sum() + 64)
        del t
        gc.collect()                                    # now freed (no error at exit)


def test_a_torch_side_stream_waits_for_the_buffers_pending_work():
    torch = pytest.importorskip("torch")
    with gpu_deadline(60):
        n = 1 << 24
        buf = DeviceBuffer.zeros(n, np.uint8)           # memset queued on the legacy stream
        buf.memset(7)
        side = torch.cuda.Stream()                      # torch's streams are non-blocking
        with torch.cuda.stream(side):
            t = torch.from_dlpack(buf)                  # side waits for the memsets
            total = int(t.to(torch.int64).sum())
        print("sum", total)
        assert total == 7 * n


def test_cupy_views_a_device_buffer_and_numpy_refuses_it():
    with gpu_deadline(60):
        buf = DeviceBuffer.from_numpy(np.arange(16, dtype=np.int32))
        with pytest.raises((BufferError, RuntimeError)):   # numpy takes host memory only
            np.from_dlpack(buf)
        cp = pytest.importorskip("cupy")
        a = cp.from_dlpack(buf)
        assert a.data.ptr == buf.ptr and int(a.sum()) == 120


def test_torch_asks_for_a_copy():
    torch = pytest.importorskip("torch")
    with gpu_deadline(60):
        buf = DeviceBuffer.from_numpy(np.arange(32, dtype=np.int32))
        t = torch.from_dlpack(buf, copy=True)           # the producer copies on the device
        buf.memset(0)
        torch.cuda.synchronize()
        print(hex(t.data_ptr()), hex(buf.ptr), t[:4])
        assert t.data_ptr() != buf.ptr
        assert torch.equal(t.cpu(), torch.arange(32, dtype=torch.int32))
