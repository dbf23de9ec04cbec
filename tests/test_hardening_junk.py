"""Every public builder answers junk with a PtxdslError (issue 13): each public Kernel method,
each `ptxdsl.ptx` function and each operand class is called with random values and objects;
the only allowed outcomes are success or a PtxdslError, and the kernel still emits (or refuses
with a PtxdslError) afterwards. The long variant is marked `slow`."""

from __future__ import annotations

import contextlib
import inspect

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ptxdsl import Kernel, Module, ptx
from ptxdsl.errors import PtxdslError
from tests.junk import (
    junk,
    operand_classes,
    positional,
    ptx_functions,
    public_methods,
    required_keywords,
)

QUICK = settings(max_examples=10, deadline=None, database=None,
                 suppress_health_check=list(HealthCheck))
LONG = settings(max_examples=400, deadline=None, database=None,
                suppress_health_check=list(HealthCheck))


def _call(fn, data, k, other):
    req, kws = positional(fn)
    values = junk(k, other)
    args = [data.draw(values, label=f"arg{i}") for i in range(req)]
    chosen = data.draw(st.lists(st.sampled_from(kws), unique=True, max_size=2) if kws
                       else st.just([]), label="keywords")
    kwargs = {n: data.draw(values, label=n) for n in [*chosen, *required_keywords(fn)]}
    try:
        result = fn(*args, **kwargs)
        if hasattr(result, "__enter__"):   # if_/for_range/guard/...: run an empty body
            with result:
                pass
    except PtxdslError:
        pass
    # Whatever happened, the kernel is still usable or refuses cleanly.
    with contextlib.suppress(PtxdslError):
        k.ret()
        Module([k], check=False).emit()


def _check_method(name, data):
    k, other = Kernel("k"), Kernel("other")
    _call(getattr(k, name), data, k, other)


def _check_ptx(name, data):
    k, other = Kernel("k"), Kernel("other")
    fn = getattr(ptx, name)
    req, kws = positional(fn)
    values = junk(k, other)
    args = [data.draw(values, label=f"arg{i}") for i in range(max(req - 1, 0))]
    chosen = data.draw(st.lists(st.sampled_from(kws), unique=True, max_size=2) if kws
                       else st.just([]), label="keywords")
    kwargs = {n: data.draw(values, label=n) for n in [*chosen, *required_keywords(fn)]}
    with contextlib.suppress(PtxdslError):
        fn(k, *args, **kwargs)
    with contextlib.suppress(PtxdslError):
        Module([k], check=False).emit()


def _check_operand(cls, data):
    k, other = Kernel("k"), Kernel("other")
    values = junk(k, other)
    params = list(inspect.signature(cls).parameters.values())
    n_req = sum(p.default is p.empty and p.kind is p.POSITIONAL_OR_KEYWORD for p in params)
    n_pos = sum(p.kind is p.POSITIONAL_OR_KEYWORD for p in params)
    args = [data.draw(values, label=f"arg{i}")
            for i in range(data.draw(st.integers(n_req, n_pos)))]
    with contextlib.suppress(PtxdslError):
        cls(*args)


@pytest.mark.parametrize("name", public_methods())
@QUICK
@given(data=st.data())
def test_kernel_method_junk(name, data):
    _check_method(name, data)


@pytest.mark.parametrize("name", ptx_functions())
@QUICK
@given(data=st.data())
def test_ptx_function_junk(name, data):
    _check_ptx(name, data)


@pytest.mark.parametrize("cls", operand_classes(), ids=lambda c: c.__name__)
@QUICK
@given(data=st.data())
def test_operand_class_junk(cls, data):
    _check_operand(cls, data)


@pytest.mark.slow
@pytest.mark.parametrize("name", public_methods())
@LONG
@given(data=st.data())
def test_kernel_method_junk_long(name, data):
    _check_method(name, data)


@pytest.mark.slow
@pytest.mark.parametrize("name", ptx_functions())
@LONG
@given(data=st.data())
def test_ptx_function_junk_long(name, data):
    _check_ptx(name, data)


def test_every_builder_is_enumerated():
    # The enumeration is what makes the property cover new builders: make sure it sees them.
    methods = public_methods()
    for name in ("add", "ld", "st", "mov", "if_", "for_range", "shared_array", "read_special",
                 "copy", "emit", "place", "asm", "generic_addr", "ld_param"):
        assert name in methods
    assert "cp_async_bulk_tensor" in ptx_functions()
    assert {c.__name__ for c in operand_classes()} >= {"Addr", "Label", "Symbol", "Imm", "Reg",
                                                       "SpecialReg", "Vec", "NegPred"}
