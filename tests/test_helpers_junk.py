"""Every public wgmma helper answers junk with a PtxdslError or a correct result (issue 28):
each public method (and constructor) of Fragment, AFragment, SmemLayout, MatrixDescriptor and
TmaStoreEpilogue, and the helper functions, enumerated from the classes and modules so new
ones are covered, is called on valid objects with random arguments (tests/junk.py's values
plus shared symbols of wrong sizes and alignments, other kernels' registers and fragments,
layouts and descriptors). Allowed: a PtxdslError, or success where every shared address the
built code produces (the host model of tests/helper_model.py) lies inside its symbol and the
kernel still emits. The long variant is marked `slow`."""

from __future__ import annotations

import contextlib
import inspect

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ptxdsl import Addr, Kernel, Module, signals, t
from ptxdsl import fragments as F
from ptxdsl.epilogue import STAGING_BYTES, TmaStoreEpilogue
from ptxdsl.errors import PtxdslError
from ptxdsl.instructions import wgmma_desc as D
from tests.helper_model import Model, Unsupported
from tests.junk import class_methods, junk, positional, required_keywords

QUICK = settings(max_examples=10, deadline=None, database=None,
                 suppress_health_check=list(HealthCheck))
LONG = settings(max_examples=300, deadline=None, database=None,
                suppress_health_check=list(HealthCheck))

CLASSES = (F.Fragment, F.AFragment, D.SmemLayout, D.MatrixDescriptor, TmaStoreEpilogue,
           D.SwizzleMode, D.Major)
WINDOW = 1 << 40        # the model places shared symbols below this, global pointers above


def _instances(k: Kernel) -> dict[type, list]:
    """Valid objects of each class to call methods on, built in `k`."""
    lay = D.SmemLayout(t.bf16, 64, 64)
    tile = k.shared_array(t.b8, 8192, align=1024, name="ok_tile")
    staging = k.shared_array(t.b8, STAGING_BYTES, align=1024, name="ok_staging")
    acc = k.fragment(t.f32, shape=(64, 16), zero=False)
    return {
        F.Fragment: [acc, k.fragment(t.s32, shape=(64, 8), zero=False),
                     k.fragment(t.f16, shape=(64, 16), zero=False), acc.to_packed(t.bf16),
                     k.fragment(t.f32, shape=(64, 64), zero=False).to_packed(t.f16),
                     acc.to_packed("e4m3")],
        F.AFragment: [k.a_fragment(t.bf16), k.a_fragment("e4m3"), k.a_fragment("tf32")],
        D.SmemLayout: [lay, D.SmemLayout("e4m3", 64, 128, "K", "64B"),
                       D.SmemLayout(t.f16, 128, 64, "MN", "none")],
        D.MatrixDescriptor: [D.descriptor(k, lay, tile), D.descriptor(k, lay, 2048)],
        TmaStoreEpilogue: [TmaStoreEpilogue(k, staging, k.tensormap_addr(
            k.param_tensormap("out")), 1)],
        D.SwizzleMode: list(D.SwizzleMode),
        D.Major: list(D.Major),
    }


def _helper_values(k: Kernel, other: Kernel) -> list:
    """What a careless caller passes to these helpers in particular."""
    small = k.shared_array(t.b8, 16, align=16)
    kib = k.shared_array(t.b8, 1024, align=1024)
    big = k.shared_array(t.b8, 16384, align=1024)
    loose = k.shared_array(t.b8, 16384)
    return [small, kib, big, loose, Addr(big, 8192), Addr(big, 16), Addr(kib, 17),
            Addr(big, -1024), k.mov(big), k.reg(t.u32), k.reg(t.s32), k.reg(t.u64),
            other.fragment(t.f32, shape=(64, 16), zero=False), D.SmemLayout(t.bf16, 128, 64),
            D.descriptor(k, D.SmemLayout(t.bf16, 64, 64), 0), 0, 8, 15, 16, 17, 63, 64, 65,
            127, 128, 256, 1 << 18, -8, 1.5, 1e6, 1e39, float("inf"), "k", "mn", "128B", "bf16",
            "e4m3", t.bf16, t.s32, t.f64, D.Major.MN, D.SwizzleMode.b64, (64, 16), [64, 16]]


def _values(k: Kernel, other: Kernel) -> st.SearchStrategy:
    return st.one_of(junk(k, other), st.sampled_from(_helper_values(k, other)))


def helper_methods() -> list[tuple[type, str]]:
    """(class, method) for every public method, static/class method and constructor."""
    return class_methods(CLASSES)


FUNCTIONS = {"fragment_coords": F.fragment_coords, "a_fragment_coords": F.a_fragment_coords,
             **{n: getattr(D, n) for n in D.__all__ if inspect.isfunction(getattr(D, n))},
             **{n: getattr(signals, n) for n in signals.__all__}}


def _judge(k: Kernel, result) -> None:
    """A success is correct: every shared access and descriptor tile inside its symbol, and
    the kernel still emits (or refuses with a PtxdslError)."""
    try:
        model = Model(k)
    except Unsupported:
        model = None
    if model is not None:
        bad = [why for a, why in model.outside() if a.start is not None and a.start < WINDOW]
        assert bad == [], bad[:3]
        if isinstance(result, D.MatrixDescriptor) and not isinstance(result.value, int):
            starts = model.descriptor_start(result.value)
            for start in set(starts or ()) - {None}:
                home = [b for b in model.buffers.values() if b.start <= start < b.start + b.size]
                if home:
                    assert start + result.layout.nbytes <= home[0].start + home[0].size
    k.ret()
    with contextlib.suppress(PtxdslError):
        Module([k], check=False).emit()


def _draw_call(fn, data, values, skip_first: bool = False):
    req, kws = positional(fn)
    n = max(req - 1, 0) if skip_first else req
    args = [data.draw(values, label=f"arg{i}") for i in range(n)]
    chosen = data.draw(st.lists(st.sampled_from(kws), unique=True, max_size=2) if kws
                       else st.just([]), label="keywords")
    kwargs = {n: data.draw(values, label=n) for n in [*chosen, *required_keywords(fn)]}
    return args, kwargs


def _check_method(cls, name, data):
    k, other = Kernel("k", reqntid=128), Kernel("other", reqntid=128)
    values = _values(k, other)
    result = None
    if name == "__init__":
        fn = cls
        args, kwargs = _draw_call(cls, data, values)
        if args and "k" in inspect.signature(cls).parameters \
                and data.draw(st.booleans(), label="own kernel"):
            args[0] = k
    else:
        obj = data.draw(st.sampled_from(_instances(k)[cls]), label="self")
        fn = getattr(obj, name)
        args, kwargs = _draw_call(fn, data, values)
    try:
        result = fn(*args, **kwargs)
    except PtxdslError:
        pass
    _judge(k, result)


def _check_function(name, data):
    k, other = Kernel("k", reqntid=128), Kernel("other", reqntid=128)
    values = _values(k, other)
    fn = FUNCTIONS[name]
    args, kwargs = _draw_call(fn, data, values)
    if args and next(iter(inspect.signature(fn).parameters)) == "k":
        args[0] = k if data.draw(st.booleans(), label="own kernel") else args[0]
    result = None
    try:
        result = fn(*args, **kwargs)
    except PtxdslError:
        pass
    _judge(k, result)


def _id(case) -> str:
    cls, name = case
    return f"{cls.__name__}.{name}"


@pytest.mark.parametrize("case", helper_methods(), ids=_id)
@QUICK
@given(data=st.data())
def test_helper_method_junk(case, data):
    _check_method(*case, data)


@pytest.mark.parametrize("name", sorted(FUNCTIONS))
@QUICK
@given(data=st.data())
def test_helper_function_junk(name, data):
    _check_function(name, data)


@pytest.mark.slow
@pytest.mark.parametrize("case", helper_methods(), ids=_id)
@LONG
@given(data=st.data())
def test_helper_method_junk_long(case, data):
    _check_method(*case, data)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(FUNCTIONS))
@LONG
@given(data=st.data())
def test_helper_function_junk_long(name, data):
    _check_function(name, data)


def test_every_helper_is_enumerated():
    # The enumeration is what makes the property cover new helpers: make sure it sees them.
    names = {_id(c) for c in helper_methods()}
    assert {"Fragment.fill", "Fragment.store", "Fragment.store_matrix", "Fragment.to_packed",
            "Fragment.a_operand", "Fragment.offsets", "AFragment.load", "SmemLayout.__init__",
            "SmemLayout.k_offset", "SmemLayout.check_tensormap", "MatrixDescriptor.k_step",
            "TmaStoreEpilogue.store", "TmaStoreEpilogue.check_tensormap",
            "SwizzleMode.coerce", "Major.coerce"} <= names
    assert {"descriptor", "encode_descriptor", "fragment_coords", "signal_wait",
            "barrier_all_ranks"} <= set(FUNCTIONS)
