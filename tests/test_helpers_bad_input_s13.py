"""Bad input to the helpers above the instructions added since session 11, found by calling
them as a user who did not read the code (session 13): each class of mistake is refused with
a ptxdsl error (the samples: their ValueError) naming the helper, the operand, what was
expected and what was given, at the user's line; and the nearest valid call still builds (so
a test cannot pass by refusing everything)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from ptxdsl import Addr, Kernel, signals, t
from ptxdsl.epilogue import TmaStoreEpilogue
from ptxdsl.errors import OperandError, PtxdslError
from ptxdsl.pipeline import MbarrierRing, box_bytes, cluster_sync, tx_bytes
from ptxdsl.runtime.errors import SymmetricMemoryError
from ptxdsl.runtime.symmetric import SymmetricBuffers
from ptxdsl.split_sum import ordered_split_sum

HERE = __file__


def _here(err) -> bool:
    return err.value.loc.file == HERE


# -- a kernel_op's rules: what launch(...) returns, and how many tensors each takes ------------
# launch(...) was read as cfg["grid"], cfg["args"] deep in the op: None, a list or a missing
# key raised TypeError/KeyError there, and a misspelt key (smem=) was ignored, so the kernel
# ran without the dynamic shared memory it needs.
def _op(monkeypatch, launch, outputs=None, name="op"):
    torch = pytest.importorskip("torch")
    import ptxdsl.torch as pt
    from ptxdsl.runtime.launch import Function
    monkeypatch.setattr(pt, "_DISPATCH_KEY", "CPU")
    monkeypatch.setattr(pt, "_raw_stream", lambda: (lambda index: 0))
    calls: list = []
    fn = object.__new__(Function)        # a real Function needs a driver; this one records
    fn.name, fn.device = "k", -1
    fn.launch = lambda grid, block, args, **kw: calls.append((grid, block, args, kw))
    op = pt.kernel_op(f"ptxdsl_s13_test::{name}{len(pt._LIBRARIES)}", fn, inputs=("a",),
                      outputs=outputs or (lambda a: torch.empty_like(a)), launch=launch)
    return op, calls, torch


@pytest.mark.parametrize("made, words", [
    (lambda a, o: None, r"must return a dict of grid, block, args .*got NoneType"),
    (lambda a, o: [1, 32, (a, o)], r"must return a dict of grid, block, args .*got list"),
    (lambda a, o: dict(block=32, args=(a, o)), r"got missing grid"),
    (lambda a, o: dict(grid=1, block=32, args=(a, o), smem=1024), r"got unknown smem"),
    (lambda a, o: dict(grid=1, block=32, args=5), r"\['args'\] must be the kernel's arguments "
     r"\(a tuple or list\), got int"),
])
def test_kernel_op_launch_rule_result(monkeypatch, made, words):
    from ptxdsl.torch import KernelOpError
    op, calls, torch = _op(monkeypatch, made)
    with pytest.raises(KernelOpError, match=r"ptxdsl_s13_test::op\d+: launch\(\.\.\.\).*" + words) \
            as e:
        op(torch.ones(4))
    assert _here(e) and calls == []
    good, calls, _ = _op(monkeypatch, lambda a, o: dict(grid=1, block=32, args=[a, o],
                                                         shared_mem=1024))
    good(torch.ones(4))
    assert [(g, b, len(args), kw["shared_mem"]) for g, b, args, kw in calls] == [(1, 32, 2, 1024)]


@pytest.mark.parametrize("rule, rules", [
    (dict(launch=lambda a: {}), r"launch is called with 2 tensors \('a', output 0\), but too "
     r"many positional arguments"),
    (dict(outputs=lambda a, b: a), r"outputs is called with 1 tensor \('a'\), but missing a "
     r"required argument: 'b'"),
])
def test_kernel_op_rule_taking_another_count_of_tensors(monkeypatch, rule, rules):
    """A rule is called only at the op's first use: a wrong arity was Python's TypeError
    inside the op. *args rules and the right count register."""
    from ptxdsl.torch import KernelOpError
    with pytest.raises(KernelOpError, match=r"kernel_op ptxdsl_s13_test::op\d+: " + rules) as e:
        _op(monkeypatch, rule.get("launch", lambda a, o: {}), rule.get("outputs"))
    assert _here(e)
    _op(monkeypatch, lambda *tensors: {}, lambda a, *rest: a)


def test_kernel_op_outputs_rule_refusal_names_the_callers_line(monkeypatch):
    from ptxdsl.torch import KernelOpError
    op, _, torch = _op(monkeypatch, lambda a, o: {}, outputs=lambda a: (a, a))
    with pytest.raises(KernelOpError, match=r"the outputs rule must return 1 tensor\(s\), got "
                       r"\['Tensor', 'Tensor'\]") as e:
        op(torch.ones(4, device="meta"))
    assert _here(e)


def test_kernel_op_name_with_an_overload_dot(monkeypatch):
    """torch defines "op.x" as overload x of op: torch.ops then had no "op.x" to return
    (AttributeError from torch)."""
    from ptxdsl.torch import KernelOpError
    with pytest.raises(KernelOpError, match=r"without a '\.' in the op .*got "
                       r"'ptxdsl_s13_test::a\.b\d+'") as e:
        _op(monkeypatch, lambda a, o: {}, name="a.b")
    assert _here(e)
    op, _, _ = _op(monkeypatch, lambda a, o: {}, name="a_b")
    assert "a_b" in str(op)


# -- symmetric memory: 64-bit addresses and sizes, and what launch is given --------------------
def _bufs(**kw):
    args = dict(rank=0, world_size=2, device=0, buffer_ptrs=(1 << 20, 2 << 20),
                signal_pad_ptrs=(3 << 20, 4 << 20), buffer_ptrs_dev=5 << 20,
                signal_pad_ptrs_dev=6 << 20, buffer_size=4096, signal_pad_size=2048) | kw
    return SymmetricBuffers(**args)


@pytest.mark.parametrize("field, bad, fits, words", [
    ("buffer_ptrs", (1 << 64, 1 << 20), ((1 << 64) - 4096, 1 << 20), r"buffer_ptrs\[0\] must "
     r"be below 2\^64, got 18446744073709551616"),
    ("buffer_ptrs", ((1 << 64) - 4095, 1 << 20), ((1 << 64) - 4096, 1 << 20), r"buffer_ptrs "
     r"0xfffffffffffff001 \+ buffer_size 4096 runs past the 64-bit address space"),
    ("buffer_ptrs_dev", 1 << 64, (1 << 64) - 8, r"buffer_ptrs_dev must be below 2\^64"),
    ("buffer_size", 1 << 70, 1 << 40, r"buffer_size must be below 2\^64"),
    ("device", 1 << 40, 7, r"device must be below 2\^31"),
])
def test_symmetric_buffers_past_64_bits(field, bad, fits, words):
    """Kept before, to wrap or overflow only in the driver call or the kernel."""
    with pytest.raises(SymmetricMemoryError, match=r"SymmetricBuffers: " + words) as e:
        _bufs(**{field: bad})
    assert _here(e)
    assert getattr(_bufs(**{field: fits}), field) == fits


@pytest.mark.parametrize("fn", [None, object(), "k"])
def test_symmetric_launch_of_something_not_a_kernel(fn):
    bufs = _bufs()
    with pytest.raises(SymmetricMemoryError, match=r"SymmetricBuffers\.launch: fn must be a "
                       r"loaded kernel .*got " + type(fn).__name__) as e:
        bufs.launch(fn, 1, 32)
    assert _here(e)
    calls: list = []
    bufs.launch(SimpleNamespace(name="k", device=0, launch=lambda *a, **kw: calls.append(a)),
                1, 32)
    assert calls == [(1, 32, ())]


# -- ordered_split_sum: the operands of another kernel, and the stride's width -----------------
def _split(k, **kw):
    args = dict(acc=k.fragment(t.f32, (64, 64)), mine=k.reg(t.u64), first=k.reg(t.u64),
                stride=64 * 64 * 4, counter=k.reg(t.u64), parts=k.reg(t.u32), barrier=1,
                leader=k.reg(t.pred))
    args.update({n: v(k) if callable(v) else v for n, v in kw.items()})
    return ordered_split_sum(k, **args)


@pytest.mark.parametrize("operand, make", [
    ("acc", lambda o: o.fragment(t.f32, (64, 64))), ("first", lambda o: o.reg(t.u64)),
    ("counter", lambda o: o.reg(t.u64)), ("parts", lambda o: o.reg(t.u32)),
    ("leader", lambda o: o.reg(t.pred)), ("barrier", lambda o: o.reg(t.u32))])
def test_split_sum_operand_of_another_kernel(operand, make):
    """Refused before by the st/mov/atom/if_ it builds from the operand, not by its name."""
    k, other = Kernel("mine", reqntid=128), Kernel("other", reqntid=128)
    with pytest.raises(OperandError) as e:
        _split(k, **{operand: make(other)})
    assert (e.value.instruction, e.value.operand) == ("ordered_split_sum", operand)
    assert "of kernel 'other'" in str(e.value.given) and _here(e)
    _split(k, **{operand: make(k)})


def test_split_sum_stride_past_a_64_bit_address():
    k = Kernel("k", reqntid=128)
    with pytest.raises(OperandError, match=r"ordered_split_sum: operand 'stride': expected .* "
                       r"and below 2\^63, got int 18446744073709551616") as e:
        _split(k, stride=1 << 64)
    assert _here(e)
    _split(k, stride=(1 << 63) - 16)


def test_refusals_show_a_fragment_by_its_shape():
    """`got Fragment <ptxdsl.fragments.Fragment object at 0x7f...>` said nothing."""
    k = Kernel("k", reqntid=128)
    with pytest.raises(OperandError, match=r"operand 'acc': .*got Fragment <fragment \(m64n64 "
                       r"\.f32, packed bf16\) of kernel 'k'>") as e:
        _split(k, acc=lambda k: k.fragment(t.f32, (64, 64)).to_packed(t.bf16))
    assert _here(e)
    assert repr(k.a_fragment("e4m3")) == "<a_fragment (m64k32 .e4m3) of kernel 'k'>"
    _split(k)


# -- element types no TMA map has ------------------------------------------------------------
@pytest.mark.parametrize("dtype", ["complex64", np.complex128, "float128"])
@pytest.mark.parametrize("call", [
    lambda d: box_bytes((64, 64), d), lambda d: tx_bytes(((64, 64), d)),
    lambda d: MbarrierRing(Kernel("k"), 2, loads={Kernel("k").param_tensormap("m"): ((64, 64),
                                                                                   d)})])
def test_box_of_an_element_type_tma_has_not(call, dtype):
    """numpy's complex and float128 were counted as 8- and 16-byte elements: an expect_tx no
    copy delivers (TensorMap.tiled refuses those types)."""
    with pytest.raises(OperandError, match=r"operand 'dtype': expected an element type TMA "
                       r"copies \(1 to 8 bytes: no complex numbers, no float128\), got numpy") \
            as e:
        call(dtype)
    assert _here(e)
    assert box_bytes((64, 64), "float64") == box_bytes((64, 64), np.int64) == 64 * 64 * 8


# -- a ring's byte counts and the cluster barrier's flag, by the helper's name ----------------
@pytest.mark.parametrize("method", ["arrive_expect_tx", "expect_tx"])
@pytest.mark.parametrize("nbytes", [1 << 20, -1, 1.5, None, "16"])
def test_ring_byte_count_refused_by_the_helper(method, nbytes):
    k = Kernel("k", reqntid=128)
    producer = MbarrierRing(k, 2).producer()
    with pytest.raises(OperandError, match=rf"ProducerView\.{method}: operand 'nbytes': "
                       r"expected the stage's byte count: an int in \[0, 1048575\]") as e:
        getattr(producer, method)(nbytes)
    assert _here(e)
    getattr(producer, method)((1 << 20) - 1)
    getattr(producer, method)(np.int64(0))


def test_cluster_sync_flag_refused_by_its_name():
    k = Kernel("k", reqntid=128, reqnctapercluster=(2, 1, 1))
    with pytest.raises(OperandError, match=r"cluster_sync: operand 'aligned': expected True or "
                       r"False, got int 1") as e:
        cluster_sync(k, aligned=1)
    assert _here(e)
    cluster_sync(k, aligned=True)


# -- what a refusal names: the helper the user called ------------------------------------------
def test_a_fragment_type_refused_by_its_name():
    k = Kernel("k")
    with pytest.raises(OperandError, match=r"a_fragment: operand 'dtype': expected one of") as e:
        k.a_fragment("f32")
    assert _here(e)
    assert k.a_fragment("tf32").k == 8


def test_signal_address_in_a_32_bit_register():
    """Refused before by the st.release it built (`st.release.sys.global.u32: operand 'a'`)."""
    k = Kernel("k")
    for call in (lambda a: signals.signal_set(k, a), lambda a: signals.signal_wait(k, a, 1),
                 lambda a: signals.peer_pointer(k, a, 0)):
        with pytest.raises(OperandError, match=r"^.*: (signal_set|signal_wait|peer_pointer): "
                           r"operand '(addr|ptrs)': expected a global address .*got register "
                           r"%r\d+ of type \.u32") as e:
            call(k.reg(t.u32))
        assert _here(e)
        call(Addr(k.reg(t.b64), 8))


def test_no_tensor_map_at_all_is_not_a_map_of_raw_bytes():
    with pytest.raises(OperandError, match=r"TmaStoreEpilogue\.check_tensormap: operand 'tmap': "
                       r"expected a runtime TensorMap or its TiledDesc, got NoneType None") as e:
        TmaStoreEpilogue.check_tensormap(None)
    assert _here(e)
    with pytest.raises(PtxdslError, match=r"built from raw bytes"):
        TmaStoreEpilogue.check_tensormap(SimpleNamespace(desc=None))


# -- CPU-side argument checks of the runtime and the samples ------------------------------------
@pytest.mark.parametrize("nbytes", [1.5, -16, True, "16"])
def test_copy_peer_count(nbytes):
    """int(1.5) copied 1 byte, silently; a negative count reached the driver."""
    from ptxdsl.runtime.peer import copy_peer
    buf = SimpleNamespace(nbytes=64, device=0, ptr=1 << 20)
    with pytest.raises(ValueError, match=r"copy_peer: nbytes must be None \(all of src\) or an "
                       r"int >= 0"):
        copy_peer(buf, buf, nbytes)
    with pytest.raises(ValueError, match="do not fit"):      # past the count check
        copy_peer(buf, buf, 65)


@pytest.fixture
def fa(monkeypatch):
    import samples.flash_attention as fa
    monkeypatch.setattr(fa, "tensor_map", lambda *a, **kw: b"\0" * 128)    # no driver here
    monkeypatch.setattr(fa, "sm_count", lambda: 132)
    return fa


def _forward(fa, **kw):
    calls: list = []
    module = _Module(calls)
    args = dict(shape=(1, 128, 128, 4, 4, 64), causal=True,
                strides={n: (128 * 4 * 64, 4 * 64, 64) for n in "qkvo"}) | kw
    fa.forward(module, 1 << 20, 1 << 21, 1 << 22, 1 << 23, 1 << 24, **args)
    return calls


class _Module:
    def __init__(self, calls):
        self.calls = calls

    def __getitem__(self, name):
        return SimpleNamespace(launch=lambda *a, **kw: self.calls.append((name, a)))


@pytest.mark.parametrize("kw, words", [
    (dict(shape=(1, 128, 128, 4, 4)), r"shape must be 6 ints \(B, Sq, Sk, Hq, Hkv, D\)"),
    (dict(shape=(1, 128, 128, 4.0, 4, 64)), r"shape must be 6 ints"),
    (dict(strides={}), r"strides must map each of q, k, v, o to its 3 strides"),
    (dict(strides={n: (64, 64) for n in "qkvo"}), r"strides must map each of q, k, v, o"),
    (dict(causal=None), r"causal must be True or False, got None"),
    (dict(causal=0.5), r"causal must be True or False, got 0\.5"),
    (dict(scale="x"), r"scale must be None \(1/sqrt\(D\)\) or a finite number, got 'x'"),
    (dict(scale=float("nan")), r"scale must be None .*got nan"),
])
def test_flash_attention_forward_arguments(fa, kw, words):
    """A KeyError, an unpacking error or int(None)'s TypeError deep in `forward` before;
    causal=0.5 ran the causal kernel."""
    with pytest.raises(ValueError, match=r"^flash_attention: " + words):
        _forward(fa, **kw)
    (name, args), = _forward(fa, scale=np.float32(0.125))
    assert name.startswith("fa_fwd_bf16_d64") and args[1] == fa.dense_config(
        "bf16", 64, 128, True).threads


# -- the test helpers: a folder that is none, a count past the C int, no bytes -------------------
def test_testing_helpers_arguments(tmp_path):
    """golden_files of a mistyped root gave [] (tests parametrized over it ran nothing);
    gpu_deadline(10**12) was an OverflowError from signal.alarm; sass(None) a TypeError from
    tempfile."""
    from ptxdsl import testing
    (tmp_path / "a.ptx").write_text("")
    for call, words in ((lambda: testing.golden_files(tmp_path / "nope"),
                         r"golden_files: operand 'root': expected an existing folder"),
                        (lambda: testing.golden_files(None), r"golden_files: operand 'root'"),
                        (lambda: testing.gpu_deadline(10**12).__enter__(),
                         r"gpu_deadline: operand 'seconds': expected at most 2\^31 - 1 "
                         r"seconds, got int 10{12}"),
                        (lambda: testing.sass(None), r"sass: operand 'cubin': expected the "
                         r"cubin's bytes")):
        with pytest.raises(OperandError, match=words) as e:
            call()
        assert _here(e)
    assert testing.golden_files(tmp_path) == [tmp_path / "a.ptx"]


# -- device and pinned host buffers: whole, non-negative counts ----------------------------------
from tests.test_runtime_multigpu import fake as fake_driver  # noqa: E402,F401 - a fixture


@pytest.mark.parametrize("cls", ["DeviceBuffer", "HostBuffer"])
@pytest.mark.parametrize("call, operand", [
    (lambda c: c(1.5), "nbytes"), (lambda c: c(-8), "nbytes"), (lambda c: c(True), "nbytes"),
    (lambda c: c(8, shape=(-2, -4)), "shape"), (lambda c: c(8, shape=(2.0,)), "shape"),
    (lambda c: (c.empty if hasattr(c, "empty") else c.zeros)(1.5), "shape")])
@pytest.mark.usefixtures("fake_driver")
def test_buffer_counts(cls, call, operand):
    """int() made 1.5 bytes one; -8 bytes allocated one byte with shape (-8,)."""
    from ptxdsl import runtime as rt
    buffer = getattr(rt, cls)
    with pytest.raises(OperandError, match=rf"{cls}(\.empty|\.zeros)?: operand '{operand}': "
                       r"expected (a byte count: an int >= 0|extents that are ints >= 0)") as e:
        call(buffer)
    assert _here(e)
    made = (buffer.empty if hasattr(buffer, "empty") else buffer.zeros)((2, 4), np.uint16)
    assert (made.nbytes, made.shape) == (16, (2, 4))
    assert buffer(np.int64(24), shape=np.int64(3), dtype=np.uint64).shape == (3,)
