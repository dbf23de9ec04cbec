"""cuda.core and ptxdsl both ways on the GPU (issue 18): a ptxdsl module launched by
cuda.core, cuda.core's Device/Stream/Buffer in a ptxdsl launch, and a framework stream that is a
new wrapper on every call hitting the launch cache. Prints what it saw for a failing run."""

from __future__ import annotations

import numpy as np
import pytest

from ptxdsl import Addr, Kernel, Module, t
from ptxdsl.runtime import DeviceBuffer, load_ptx, synchronize
from ptxdsl.runtime._driver import check, driver
from ptxdsl.testing import gpu_deadline
from tests import gpu_kernels_runtime as K

pytestmark = pytest.mark.gpu


def _core():
    try:
        import cuda.core as core
        core.launch  # noqa: B018
        return core
    except (ImportError, AttributeError):
        pass
    try:
        import cuda.core.experimental as core
        return core
    except ImportError:
        pytest.skip("cuda.core is not installed")


def _store_tid() -> Module:
    k = Kernel("store_tid", maxntid=128)
    out = k.cvta(k.ld_param(k.param_ptr("out")), "global", to=True)
    tid = k.tid.x
    k.st(Addr(k.add(out, k.mul(tid, 4, mode="wide"))), tid, type=t.u32, space="global")
    k.ret()
    return Module([k], name="store_tid")


def test_a_ptxdsl_module_runs_as_a_cuda_core_kernel():
    core = _core()
    with gpu_deadline(60):
        dev = core.Device(0)
        dev.set_current()
        print("cuda.core", getattr(core, "__version__", "?"), "on", dev.name)
        kernel = _store_tid().to_cuda_core().get_kernel("store_tid")
        stream = dev.create_stream()
        buf = dev.allocate(128 * 4, stream=stream)
        core.launch(stream, core.LaunchConfig(grid=1, block=128), kernel, buf)
        stream.sync()
        host = np.zeros(128, np.uint32)
        check(driver().cuMemcpyDtoH(host.ctypes.data, int(buf.handle), host.nbytes),
              "cuMemcpyDtoH")
        print("first values:", host[:8])
        assert (host == np.arange(128, dtype=np.uint32)).all()


def test_cuda_core_device_stream_and_buffers_in_a_ptxdsl_launch():
    core = _core()
    with gpu_deadline(60):
        dev = core.Device(0)
        dev.set_current()
        fn = load_ptx(K.VADD, device=dev)["vadd"]          # a cuda.core Device as device=
        stream = dev.create_stream()
        n = 1024
        a = DeviceBuffer.from_numpy(np.arange(n, dtype=np.float32), device=dev)
        b = DeviceBuffer.from_numpy(np.full(n, 2, np.float32))
        c = dev.allocate(n * 4, stream=stream)             # a cuda.core Buffer as pointer
        synchronize()
        fn.launch(n // 256, 256, (a, b, c, n), stream=stream)   # a cuda.core Stream
        stream.sync()
        host = np.zeros(n, np.float32)
        check(driver().cuMemcpyDtoH(host.ctypes.data, int(c.handle), host.nbytes),
              "cuMemcpyDtoH")
        print("first values:", host[:4], "configs cached:", len(fn._configs))
        assert (host == np.arange(n, dtype=np.float32) + 2).all()


def test_a_new_torch_stream_wrapper_each_call_hits_the_launch_cache():
    torch = pytest.importorskip("torch", reason="PyTorch not installed")
    with gpu_deadline(60):
        fn = load_ptx(K.VADD)["vadd"]
        n = 256
        a = torch.ones(n, device="cuda")
        b = torch.ones(n, device="cuda")
        c = torch.empty(n, device="cuda")
        s = torch.cuda.Stream()
        with torch.cuda.stream(s):
            for _ in range(20):
                fn.launch(1, 256, (a, b, c, n), stream=torch.cuda.current_stream())
        s.synchronize()
        print("configs cached:", list(fn._configs))
        assert len(fn._configs) == 1
        assert torch.equal(c, a + b)
