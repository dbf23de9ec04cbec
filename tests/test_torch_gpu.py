"""ptxdsl.torch on the GPU: one ptxdsl kernel as a torch custom op gives the same result eager,
under torch.compile(fullgraph=True) and replayed from a CUDA graph, on the current stream.

Each test prints what it saw (torch version, device, the values that differed) so a failure in
the lead's validation run says why without a rerun."""

from __future__ import annotations

import time

import pytest

from ptxdsl.testing import gpu_deadline
from tests import gpu_kernels_runtime as K

torch = pytest.importorskip("torch", reason="ptxdsl.torch needs PyTorch (pip install "
                            "ptxdsl[torch])")
pytestmark = pytest.mark.gpu

_OPS: dict = {}


def _vadd():
    """mylib_ptxdsl::vadd over tests/gpu_kernels_runtime.VADD (c = a + b, f32), made once."""
    if "vadd" not in _OPS:
        from ptxdsl.runtime import load_ptx
        from ptxdsl.torch import kernel_op
        _OPS["vadd"] = kernel_op(
            "ptxdsl_test::vadd", lambda d: load_ptx(K.VADD, device=d)["vadd"],
            inputs=("a", "b"),
            outputs=lambda a, b: torch.empty_like(a, memory_format=torch.contiguous_format),
            launch=lambda a, b, out: dict(grid=-(-a.numel() // 256), block=256,
                                          args=(a, b, out, a.numel())))
    return _OPS["vadd"]


def _inputs(n=10_000, seed=0):
    g = torch.Generator(device="cuda").manual_seed(seed)
    return (torch.randn(n, device="cuda", generator=g),
            torch.randn(n, device="cuda", generator=g))


def _diag(name, got, want):
    bad = (got != want).nonzero()
    print(f"{name}: torch {torch.__version__} on {torch.cuda.get_device_name()}; "
          f"{bad.numel()} of {want.numel()} differ; first: "
          f"{[(int(i), float(got[i]), float(want[i])) for i in bad.flatten()[:4]]}")


def test_eager_runs_on_the_current_stream():
    with gpu_deadline(60):
        op = _vadd()
        a, b = _inputs()
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            out = op(a, b)                  # launched on s: the sync below must cover it
        s.synchronize()
        _diag("eager on a side stream", out, a + b)
        assert torch.equal(out, a + b)
        assert torch.equal(torch.ops.ptxdsl_test.vadd(a, b), a + b)


def test_compiled_fullgraph_equals_eager():
    with gpu_deadline(300):
        op = _vadd()
        a, b = _inputs(seed=1)

        def f(x, y):
            return op(x, y) * 2 + 1

        torch._dynamo.reset()
        compiled = torch.compile(f, fullgraph=True)   # a graph break would raise here
        got, want = compiled(a, b), f(a, b)
        torch.cuda.synchronize()
        _diag("compiled", got, want)
        assert torch.equal(got, want)
        a2, b2 = _inputs(n=4097, seed=2)              # another shape: the fake rule again
        assert torch.equal(torch.compile(f, fullgraph=True, dynamic=True)(a2, b2), f(a2, b2))


def test_cuda_graph_replay_equals_eager():
    with gpu_deadline(60):
        op = _vadd()
        a, b = _inputs(seed=3)
        static_a, static_b = a.clone(), b.clone()
        op(static_a, static_b)                         # load + warm up before the capture
        torch.cuda.synchronize()
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            static_out = op(static_a, static_b)
        for seed in (4, 5):
            x, y = _inputs(seed=seed)
            static_a.copy_(x)
            static_b.copy_(y)
            g.replay()
            torch.cuda.synchronize()
            _diag(f"graph replay {seed}", static_out, x + y)
            assert torch.equal(static_out, x + y)


def test_dispatch_overhead_is_reported():
    with gpu_deadline(120):
        op = _vadd()
        a, b = _inputs(n=256)
        for _ in range(50):
            op(a, b)
        torch.cuda.synchronize()
        n = 2000
        t0 = time.perf_counter()
        for _ in range(n):
            op(a, b)
        t1 = time.perf_counter()
        torch.cuda.synchronize()
        eager_us = (t1 - t0) / n * 1e6
        t0 = time.perf_counter()
        for _ in range(n):
            torch.add(a, b)
        t1 = time.perf_counter()
        torch.cuda.synchronize()
        add_us = (t1 - t0) / n * 1e6
        print(f"ptxdsl.torch dispatch: {eager_us:.1f} us per call eager "
              f"(torch.add on the same tensors: {add_us:.1f} us)")
        assert eager_us < 1000     # a sanity bound; the number itself is the report
