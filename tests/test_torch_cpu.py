"""ptxdsl.torch without a GPU: registration, the fake (meta) implementation that torch.compile
uses for shapes, and refusals. Skipped when PyTorch is not installed."""

from __future__ import annotations

from types import SimpleNamespace

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


def test_a_loader_returning_something_else_is_refused():
    from ptxdsl.torch import _PerDevice
    with pytest.raises(TypeError, match="not a ptxdsl Function"):
        _PerDevice(lambda d: SimpleNamespace())(0)
