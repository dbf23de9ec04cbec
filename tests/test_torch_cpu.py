"""ptxdsl.torch without a GPU: registration, the fake (meta) implementation that torch.compile
uses for shapes, and refusals. Skipped when PyTorch is not installed."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="ptxdsl.torch needs PyTorch (pip install "
                            "ptxdsl[torch]); not installed here")

from ptxdsl.torch import kernel_op  # noqa: E402


def _loader(d):
    raise AssertionError("the fake implementation must not load or launch anything")


def test_fake_implementation_allocates_by_the_rule():
    op = kernel_op("ptxdsl_cpu_test::twice", _loader, inputs=("a",),
                   outputs=lambda a: (torch.empty_like(a), a.new_empty(a.shape[0], 2)),
                   launch=lambda a, o1, o2: {}, n_outputs=2)
    o1, o2 = op(torch.empty(5, 3, device="meta"))
    assert (o1.shape, o2.shape, o1.device.type) == ((5, 3), (5, 2), "meta")
    assert torch.ops.ptxdsl_cpu_test.twice.default is not None


def test_a_wrong_outputs_rule_is_named():
    op = kernel_op("ptxdsl_cpu_test::bad", _loader, inputs=("a",), outputs=lambda a: [a.shape],
                   launch=lambda a, o: {})
    with pytest.raises(TypeError, match="ptxdsl_cpu_test::bad: the outputs rule must return 1"):
        op(torch.empty(2, device="meta"))


@pytest.mark.parametrize("kw, msg", [
    (dict(name="noscope"), "namespace::op"),
    (dict(inputs=()), "parameter names"),
    (dict(inputs=("not a name",)), "parameter names"),
    (dict(n_outputs=0), "at least one output")])
def test_bad_registrations_are_refused(kw, msg):
    args = dict(name="ptxdsl_cpu_test::x", function=_loader, inputs=("a",),
                outputs=lambda a: a, launch=lambda a, o: {})
    args.update(kw)
    with pytest.raises(ValueError, match=msg):
        kernel_op(args.pop("name"), args.pop("function"), **args)


@pytest.mark.parametrize("kw, msg", [
    (dict(name="ns::1op"), "torch refused the operator ns::1op"),   # a RuntimeError before
    (dict(name="ns::"), "'namespace::op'"),
    (dict(inputs="ab"), "distinct parameter names"),          # not the inputs a and b
    (dict(inputs=None), "distinct parameter names"),
    (dict(inputs=("a", "a")), "distinct parameter names"),
    (dict(inputs=("def",)), "torch refused .* schema 'probe\\(Tensor def\\) -> Tensor'"),
    (dict(n_outputs="2"), "n_outputs must be an int >= 1"),
    (dict(n_outputs=True), "n_outputs must be an int >= 1"),
    (dict(outputs=3), "outputs must be callable"),            # else found at the first call
    (dict(launch=None), "launch must be callable"),
    (dict(function="k"), "function must be callable"),
    (dict(backward=3), "backward must be callable"),
    (dict(contiguous="no"), "contiguous must be True or False")])
def test_probe_registrations_are_refused_at_the_call(kw, msg):
    args = dict(name="ptxdsl_cpu_test::probe", function=_loader, inputs=("a",),
                outputs=lambda a: a, launch=lambda a, o: {})
    args.update(kw)
    with pytest.raises(ValueError, match=msg) as e:
        kernel_op(args.pop("name"), args.pop("function"), **args)
    assert e.value.loc.file == __file__


def test_a_name_registered_twice_is_refused_by_name():
    args = dict(inputs=("a",), outputs=lambda a: a, launch=lambda a, o: {},
                n_outputs=np.int64(1))
    kernel_op("ptxdsl_cpu_test::once", _loader, **args)       # a numpy count is taken
    with pytest.raises(ValueError, match="ptxdsl_cpu_test::once is already registered"):
        kernel_op("ptxdsl_cpu_test::once", _loader, **args)


def test_a_loader_returning_something_else_is_refused():
    from ptxdsl.torch import _PerDevice
    with pytest.raises(TypeError, match="not a ptxdsl Function"):
        _PerDevice(lambda d: SimpleNamespace())(0)


# -- the real implementation on a CPU stand-in ------------------------------------------------
# The op is registered for the CPU dispatch key instead of CUDA, CPU tensors stand in for GPU
# ones (get_device() is -1 for them), and the "kernel" is a Function whose launch computes
# out = a + b through the pointers it is given, so eager and compiled results can be compared.
def _vadd_function(calls):
    import ctypes

    import numpy as np

    from ptxdsl.runtime.launch import Function
    fn = object.__new__(Function)   # a real Function needs a driver; this one only launches
    fn.name, fn.device = "vadd", -1

    def launch(grid, block, args, *, shared_mem=0, stream=None, cluster=None):
        calls.append(dict(grid=grid, block=block, args=args, stream=stream))
        a, b, out, n = args
        view = (lambda p: np.ctypeslib.as_array((ctypes.c_float * n).from_address(p)))
        view(out)[:] = view(a) + view(b)

    fn.launch = launch
    return fn


@pytest.fixture
def cpu_vadd(monkeypatch):
    import ptxdsl.torch as pt
    monkeypatch.setattr(pt, "_DISPATCH_KEY", "CPU")
    monkeypatch.setattr(pt, "_raw_stream", lambda: (lambda index: 0x5EED + index))
    calls: list = []
    name = f"ptxdsl_cpu_test::vadd{len(pt._LIBRARIES)}"
    op = kernel_op(name, _vadd_function(calls), inputs=("a", "b"),
                   outputs=lambda a, b: torch.empty_like(a),
                   launch=lambda a, b, out: dict(grid=-(-a.numel() // 256), block=256,
                                                 args=(a, b, out, a.numel())))
    return op, calls


def test_eager_launches_with_pointers_on_the_current_stream(cpu_vadd):
    op, calls = cpu_vadd
    a, b = torch.arange(300, dtype=torch.float32), torch.ones(300)
    out = op(a, b)
    assert torch.equal(out, a + b)
    (call,) = calls
    assert (call["grid"], call["block"], call["stream"]) == (2, 256, 0x5EED - 1)
    assert call["args"] == (a.data_ptr(), b.data_ptr(), out.data_ptr(), 300)


def test_compiled_fullgraph_equals_eager_on_the_stand_in(cpu_vadd):
    op, _ = cpu_vadd
    a, b = torch.randn(64), torch.randn(64)

    def f(x, y):
        return op(x, y) * 2 + 1

    torch._dynamo.reset()
    got = torch.compile(f, fullgraph=True, backend="aot_eager")(a, b)   # a break would raise
    assert torch.equal(got, f(a, b))


def test_a_tensor_elsewhere_in_the_launch_args_is_refused_before_the_launch(monkeypatch):
    import ptxdsl.torch as pt
    monkeypatch.setattr(pt, "_DISPATCH_KEY", "CPU")
    monkeypatch.setattr(pt, "_raw_stream", lambda: (lambda index: 0))

    class OnGpu3(torch.Tensor):
        def get_device(self):
            return 3

    elsewhere = torch.Tensor._make_subclass(OnGpu3, torch.zeros(4))
    calls: list = []
    op = kernel_op(f"ptxdsl_cpu_test::elsewhere{len(pt._LIBRARIES)}", _vadd_function(calls),
                   inputs=("a",), outputs=lambda a: torch.empty_like(a),
                   launch=lambda a, out: dict(grid=1, block=32, args=(a, elsewhere, out, 4)))
    with pytest.raises(ValueError, match=r"elsewhere\d+: a tensor in launch\(...\)\['args'\] "
                                         r"is on .* not on cuda:-1 with the inputs"):
        op(torch.zeros(4))
    assert calls == []


# -- gradients and layouts ----------------------------------------------------------------------
def _stand_in_op(monkeypatch, **kw):
    import ptxdsl.torch as pt
    monkeypatch.setattr(pt, "_DISPATCH_KEY", "CPU")
    monkeypatch.setattr(pt, "_raw_stream", lambda: (lambda index: 0))
    calls: list = []
    op = kernel_op(f"ptxdsl_cpu_test::grad{len(pt._LIBRARIES)}", _vadd_function(calls),
                   inputs=("a", "b"), outputs=kw.pop("outputs", lambda a, b: torch.empty_like(a)),
                   launch=lambda a, b, out: dict(grid=1, block=32, args=(a, b, out, a.numel())),
                   **kw)
    return op, calls


def test_an_input_requiring_grad_is_refused_without_a_backward(monkeypatch):
    from ptxdsl.errors import PtxdslError
    op, calls = _stand_in_op(monkeypatch)
    a, b = torch.ones(8, requires_grad=True), torch.ones(8)
    with pytest.raises(PtxdslError, match=r"test_torch_cpu.py:\d+: ptxdsl_cpu_test::grad\d+: "
                       r"input 'a' requires grad and the op has no backward formula"):
        op(a, b)
    assert calls == []
    with torch.no_grad():
        assert torch.equal(op(a, b), torch.full((8,), 2.0))
    assert torch.equal(op(a.detach(), b), torch.full((8,), 2.0))


def test_a_registered_backward_carries_the_gradient(monkeypatch):
    def setup_context(ctx, inputs, output):
        ctx.scale = 3.0

    def backward(ctx, grad):
        return grad * ctx.scale, grad

    op, _ = _stand_in_op(monkeypatch, backward=backward, setup_context=setup_context)
    a, b = torch.ones(8, requires_grad=True), torch.ones(8, requires_grad=True)
    op(a, b).sum().backward()
    assert torch.equal(a.grad, torch.full((8,), 3.0)) and torch.equal(b.grad, torch.ones(8))


def test_setup_context_without_backward_is_refused(monkeypatch):
    with pytest.raises(ValueError, match="setup_context= is given without backward="):
        _stand_in_op(monkeypatch, setup_context=lambda ctx, inputs, output: None)


def test_a_non_contiguous_tensor_is_refused_by_name(monkeypatch):
    from ptxdsl.errors import PtxdslError
    op, calls = _stand_in_op(monkeypatch)
    base = torch.arange(16, dtype=torch.float32)
    with pytest.raises(PtxdslError, match=r"test_torch_cpu.py:\d+: ptxdsl_cpu_test::grad\d+: "
                       r"input 'b' is not contiguous \(shape \(8,\), strides \(2,\)\); the "
                       r"kernel gets only its data_ptr\(\)"):
        op(base[:8], base[::2])
    op, calls = _stand_in_op(monkeypatch,
                             outputs=lambda a, b: torch.empty(a.numel() * 2)[::2])
    with pytest.raises(PtxdslError, match="output 0 is not contiguous"):
        op(base[:8], base[8:])
    assert calls == []


def test_contiguous_false_passes_strided_tensors(monkeypatch):
    op, calls = _stand_in_op(monkeypatch, contiguous=False)
    base = torch.arange(16, dtype=torch.float32)
    op(base[:8], base[::2])
    assert calls[0]["args"][1] == base.data_ptr()


def test_compiled_refuses_an_input_requiring_grad_too(monkeypatch):
    op, calls = _stand_in_op(monkeypatch)
    torch._dynamo.reset()
    f = torch.compile(lambda x, y: op(x, y) * 2, fullgraph=True, backend="aot_eager")
    with pytest.raises(Exception, match="input 'a' requires grad and the op has no backward"):
        f(torch.ones(8, requires_grad=True), torch.ones(8))
    assert calls == []


def test_compiled_op_with_a_backward_carries_the_gradient(monkeypatch):
    op, _ = _stand_in_op(monkeypatch, backward=lambda ctx, grad: (grad * 2, grad))
    torch._dynamo.reset()
    f = torch.compile(lambda x, y: op(x, y) * 3, fullgraph=True, backend="aot_eager")
    a, b = torch.ones(8, requires_grad=True), torch.ones(8)
    f(a, b).sum().backward()
    assert torch.equal(a.grad, torch.full((8,), 6.0))
