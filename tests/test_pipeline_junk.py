"""The pipeline helpers (issue 28): every public function, class and method of
`ptxdsl.pipeline` (enumerated, so a new helper is covered) answers random junk with success or
a PtxdslError at the caller's line, and a refused call leaves the kernel's PTX as it was; and
a host-side model of the ring: every slot address a ring can produce, over its whole walk,
stays inside the buffer whenever `slot()` accepts it, and `slot()` refuses exactly the rings
that would leave it. The long variants are marked `slow`."""

from __future__ import annotations

import contextlib
import inspect
import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ptxdsl import Addr, Kernel, Module, pipeline, t
from ptxdsl.errors import PtxdslError
from ptxdsl.instructions.arith import Binary
from ptxdsl.instructions.compare import Setp
from ptxdsl.instructions.move import Mov
from ptxdsl.operands import Imm, Reg, Symbol
from ptxdsl.pipeline import MbarrierRing
from tests.junk import junk, positional, required_keywords

HERE = os.path.abspath(__file__)
QUICK = settings(max_examples=10, deadline=None, database=None,
                 suppress_health_check=list(HealthCheck))
LONG = settings(max_examples=300, deadline=None, database=None,
                suppress_health_check=list(HealthCheck))


def helpers() -> list[str]:
    """'function' or 'Class.method' (the constructor as 'Class.__init__') for every public
    helper the module defines."""
    out = []
    for name, obj in vars(pipeline).items():
        if name.startswith("_") or getattr(obj, "__module__", None) != pipeline.__name__:
            continue
        if inspect.isfunction(obj):
            out.append(name)
        elif inspect.isclass(obj):
            out += [f"{name}.{m}" for m, _ in inspect.getmembers(obj, inspect.isfunction)
                    if m == "__init__" or not m.startswith("_")]
    return sorted(out)


def _target(name: str, k: Kernel):
    """The callable for `name`, bound to a fresh ring or view of `k` for a method."""
    if "." not in name:
        return getattr(pipeline, name)
    cls_name, method = name.split(".")
    cls = getattr(pipeline, cls_name)
    if method == "__init__":
        return cls
    ring = MbarrierRing(k, 2)
    obj = {"MbarrierRing": ring, "ProducerView": ring.producer(),
           "ConsumerView": ring.consumer(), "RingView": ring.consumer()}[cls_name]
    return getattr(obj, method)


def _ptx(k: Kernel) -> list[str]:
    return [line for line, _ in k.render()]


def _check(name: str, data) -> None:
    k, other = Kernel("k"), Kernel("other")
    fn = _target(name, k)
    sig_fn = fn.__init__ if inspect.isclass(fn) else fn
    req, kws = positional(sig_fn)
    ring = MbarrierRing(k, 2, name="r2")
    values = st.one_of(st.sampled_from([k, ring, ring.producer(), 1, 2, 4, 64, 1024, t.u32,
                                        ((8, 8), t.f32)]), junk(k, other))
    args = [data.draw(values, label=f"arg{i}") for i in range(req)]
    chosen = data.draw(st.lists(st.sampled_from(kws), unique=True, max_size=2) if kws
                       else st.just([]), label="keywords")
    kwargs = {n: data.draw(values, label=n) for n in [*chosen, *required_keywords(sig_fn)]}
    before = _ptx(k)
    try:
        fn(*args, **kwargs)
    except PtxdslError as e:
        assert os.path.abspath(e.loc.file) == HERE, e       # the caller's line
        assert _ptx(k) == before, "a refused helper left statements behind"
    with contextlib.suppress(PtxdslError):
        k.ret()
        Module([k], check=False).emit()


@pytest.mark.parametrize("name", helpers())
@QUICK
@given(data=st.data())
def test_pipeline_helper_junk(name, data):
    _check(name, data)


@pytest.mark.slow
@pytest.mark.parametrize("name", helpers())
@LONG
@given(data=st.data())
def test_pipeline_helper_junk_long(name, data):
    _check(name, data)


def test_every_helper_is_enumerated():
    names = helpers()
    for name in ("tx_bytes", "box_bytes", "cluster_sync", "MbarrierRing.__init__",
                 "MbarrierRing.init", "ProducerView.wait_empty", "ProducerView.arrive_expect_tx",
                 "ProducerView.expect_tx", "ProducerView.arrive", "ProducerView.slot",
                 "ConsumerView.wait_full", "ConsumerView.release", "ConsumerView.advance",
                 "RingView.__init__"):
        assert name in names


# -- the host-side model of a ring's slot addresses ---------------------------------------------
_OPS = {"add": lambda a, b: a + b, "mul": lambda a, b: a * b, "xor": lambda a, b: a ^ b}


def _run(statements, env: dict, buffer: Symbol) -> None:
    """Execute the .u32 arithmetic a ring emits (mov, add, mul.lo, xor, setp.eq, guards):
    `buffer`'s address is 0, so a slot's value is its byte offset in the buffer."""
    def value(x):
        if isinstance(x, Imm):
            return x.value
        if isinstance(x, Symbol):
            assert x is buffer
            return 0
        return env[x]
    for st_ in statements:
        if st_.guard is not None and not env[st_.guard]:
            continue
        insn = st_.insn
        if isinstance(insn, Mov):
            env[insn.d] = value(insn.a)
        elif isinstance(insn, Binary):
            env[insn.d] = _OPS[insn.op](value(insn.a), value(insn.b)) % (1 << 32)
        elif isinstance(insn, Setp):
            assert insn.cmp == "eq"
            env[insn.p] = value(insn.a) == value(insn.b)
        else:   # pragma: no cover - the model would need extending
            raise AssertionError(f"the model does not know {insn.name}")


def _model(stages: int, stride: int, size: int, offset: int, consumer: bool) -> None:
    k = Kernel("m")
    ring = MbarrierRing(k, stages)
    buf = k.shared_array(t.u8, size, align=128, name="buf")
    n0 = len(k.body)
    view = ring.consumer() if consumer else ring.producer()
    n1 = len(k.body)
    fits = offset + stages * stride <= size
    unit = 128 if stride >= 128 else 16 if stride >= 16 else 1
    if stride % unit:   # slots after the first would lose the alignment a slot that big needs
        with pytest.raises(PtxdslError, match=f"expected a multiple of {unit} bytes"):
            view.slot(Addr(buf, offset) if offset else buf, stride)
        return
    try:
        slot = view.slot(Addr(buf, offset) if offset else buf, stride)
    except PtxdslError as e:
        assert not fits, f"refused a ring that fits: {e}"
        assert "inside the buffer" in str(e)
        return
    assert fits, "accepted slots that run past the buffer"
    n2 = len(k.body)
    view.advance()
    create, compute, advance = k.body[n0:n1], k.body[n1:n2], k.body[n2:]
    env: dict[Reg, object] = {}
    _run(create, env, buf)
    seen = set()
    for _ in range(2 * stages + 1):     # two wraps: every stage, both parities
        _run(compute, env, buf)
        addr = env[slot]
        assert offset <= addr and addr + stride <= size, (addr, stride, size)
        seen.add(addr)
        _run(advance, env, buf)
    assert len(seen) == stages


@st.composite
def _rings(draw):
    stages = draw(st.integers(1, 8))
    # mostly strides that keep the slots aligned, so the fit itself is what is tested
    stride = draw(st.one_of(st.integers(1, 600), st.integers(1, 7).map(lambda n: 16 * n),
                            st.integers(1, 4).map(lambda n: 128 * n)))
    size = draw(st.integers(1, 4096))
    offset = draw(st.integers(0, size))
    return stages, stride, size, offset, draw(st.booleans())


@QUICK
@given(_rings())
def test_ring_slots_stay_inside_their_buffer(case):
    _model(*case)


@pytest.mark.slow
@LONG
@given(_rings())
def test_ring_slots_stay_inside_their_buffer_long(case):
    _model(*case)


@pytest.mark.parametrize("case", [(4, 256, 1024, 0, False), (4, 256, 1023, 0, True),
                                  (4, 128, 1024, 512, True), (4, 128, 1024, 513, False),
                                  (1, 1024, 1024, 0, True), (3, 1, 1, 0, False)])
def test_ring_slot_model_edges(case):
    _model(*case)
