"""Interop both ways on the GPU (issue 31): a DeviceBuffer exported through DLPack to torch and
CuPy, a ptxdsl Stream handed to cuda.core, and a cuda.core ObjectCode loaded by ptxdsl.
Prints what it saw for a failing run."""

from __future__ import annotations

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
