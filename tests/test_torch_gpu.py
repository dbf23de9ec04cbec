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


def test_grad_inputs_and_strided_inputs_are_refused_on_the_gpu():
    from ptxdsl.torch import KernelOpError
    with gpu_deadline(60):
        op = _vadd()
        a, b = _inputs(4096)
        with pytest.raises(KernelOpError, match="input 'a' requires grad"):
            op(a.clone().requires_grad_(), b)
        with pytest.raises(KernelOpError, match="input 'b' is not contiguous"):
            op(a[:2048], b[::2])


def test_a_registered_backward_runs_its_own_kernel_op():
    from ptxdsl.runtime import load_ptx
    from ptxdsl.torch import kernel_op
    with gpu_deadline(120):
        def load(d):
            return load_ptx(K.VADD, device=d)["vadd"]

        def vadd_launch(a, b, out):
            return dict(grid=-(-a.numel() // 256), block=256, args=(a, b, out, a.numel()))

        # d(a + b)/da = d(a + b)/db = 1: the backward adds the gradient to zeros with the kernel
        grad_op = kernel_op("ptxdsl_test::vadd_grad", load, inputs=("g", "z"),
                            outputs=lambda g, z: torch.empty_like(g), launch=vadd_launch)

        def backward(ctx, grad):
            g = grad.contiguous()
            same = grad_op(g, torch.zeros_like(g))
            return same, same

        op = kernel_op("ptxdsl_test::vadd_diff", load, inputs=("a", "b"),
                       outputs=lambda a, b: torch.empty_like(a), launch=vadd_launch,
                       backward=backward)
        a, b = (x.clone().requires_grad_() for x in _inputs(4096))
        out = op(a, b)
        (out * 3).sum().backward()
        torch.cuda.synchronize()
        print("grads:", a.grad[:4], b.grad[:4])
        assert torch.equal(out, (a + b).detach())
        assert torch.equal(a.grad, torch.full_like(a, 3)) and torch.equal(b.grad, a.grad)
