"""Bad input to the layer above the instructions, found by calling the public API as a user who
did not read the code (session 11): each class of mistake is refused with a ptxdsl error naming
the helper, the operand, what was expected and what was given, at the user's line; and the
nearest valid call still builds (so a test cannot pass by refusing everything)."""

from __future__ import annotations

import inspect

import pytest

from ptxdsl import Kernel, Module, ptx, t
from ptxdsl.errors import BuildError, OperandError, PtxdslError
from ptxdsl.fragments import a_fragment_coords, fragment_coords
from ptxdsl.instructions.wgmma_desc import SmemLayout, descriptor

HERE = __file__.rsplit("/", 1)[-1]


def _tile(k, layout):
    return descriptor(k, layout, k.shared_array(t.b8, layout.nbytes, align=1024))


def _meta(k):
    return k.reg(t.b32)


# -- a wgmma descriptor's tile: element type ---------------------------------------------------
# A layout that names its element type (t.bf16, 'e4m3', t.s8) is read as that type only: the
# width matched, so ptxas and the old check took a bf16 tile as .f16 inputs (other numbers).
@pytest.mark.parametrize("tile, atype, acc", [
    (t.bf16, "f16", t.f32), (t.f16, "bf16", t.f32), ("e4m3", "e5m2", t.f32),
    ("e5m2", "e4m3", t.f32), (t.s8, "u8", t.s32), (t.u8, "s8", t.s32)])
@pytest.mark.parametrize("operand", ["a", "b_desc"])
def test_descriptor_of_another_element_type(tile, atype, acc, operand):
    k = Kernel("k")
    kk = 64 if atype in ("f16", "bf16") else 128     # one 128-byte swizzle atom of K
    same = _tile(k, SmemLayout(atype, 64, kk))
    wrong = _tile(k, SmemLayout(tile, 64, kk))
    d = k.fragment(acc, (64, 64))
    a, b = (wrong, same) if operand == "a" else (same, wrong)
    with pytest.raises(OperandError) as e:
        ptx.wgmma_mma_async(k, d, a, b, atype=atype)
    name = getattr(tile, "value", tile)
    assert e.value.operand == operand
    assert f"a tile of .{atype} elements" in e.value.expected
    assert e.value.given.endswith(f"tile of .{name}")
    assert e.value.loc.file.endswith(HERE)
    ptx.wgmma_mma_async(k, d, same, same, atype=atype)      # the tile of the right type


@pytest.mark.parametrize("atype", ["f16", "bf16"])
def test_descriptor_of_a_bare_width_takes_either_type(atype):
    """A layout given by width (16, t.b16) says nothing of the type: both 16-bit types read it."""
    k = Kernel("k")
    for dtype in (16, t.b16):
        tile = _tile(k, SmemLayout(dtype, 64, 64))
        ptx.wgmma_mma_async(k, k.fragment(t.f32, (64, 64)), tile, tile, atype=atype)


# -- a wgmma descriptor's tile: extent ------------------------------------------------------------
# wgmma reads 64 rows of A, N rows of B and one instruction's K of each from the descriptor's
# start: a smaller tile was read past its end (the next atom column, or another buffer).
@pytest.mark.parametrize("what, a_layout, b_layout, n", [
    ("B of 64 rows for N=128", SmemLayout(t.bf16, 64, 64), SmemLayout(t.bf16, 64, 64), 128),
    ("A of 32 rows", SmemLayout(t.bf16, 32, 64), SmemLayout(t.bf16, 64, 64), 64),
    ("A of K=8 (half a k16)", SmemLayout(t.bf16, 64, 8, "K", "none"),
     SmemLayout(t.bf16, 64, 64), 64),
    ("B of K=24 (1.5 k16)", SmemLayout(t.bf16, 64, 64),
     SmemLayout(t.bf16, 64, 24, "K", "none"), 64),
])
def test_descriptor_of_a_tile_smaller_than_one_instruction(what, a_layout, b_layout, n):
    k = Kernel("k")
    a, b = _tile(k, a_layout), _tile(k, b_layout)
    with pytest.raises(OperandError, match=r"a descriptor of a tile of at least \d+ rows "
                       r"\(m64n\d+k16\) and a multiple of 16 along K") as e:
        ptx.wgmma_mma_async(k, k.fragment(t.f32, (64, n)), a, b, atype="bf16")
    assert e.value.operand == ("b_desc" if what.startswith("B") else "a")
    assert e.value.loc.file.endswith(HERE)


def test_descriptor_of_a_larger_tile_is_taken():
    """A tile bigger than one instruction reads (a 256-row B for N=128, K=128) is fine."""
    k = Kernel("k")
    a, b = _tile(k, SmemLayout(t.bf16, 128, 128)), _tile(k, SmemLayout(t.bf16, 256, 128))
    ptx.wgmma_mma_async(k, k.fragment(t.f32, (64, 128)), a.k_step(k, 64), b.k_step(k, 112),
                        atype="bf16")


def test_sparse_descriptor_extent_counts_the_sparse_k():
    """The sparse form reads K=32 of B (16-bit) and K=16 of A's compressed values: a B tile of
    K=48 would be read past its end at K index 32; A's 16-wide tile is whole."""
    k = Kernel("k")
    a = _tile(k, SmemLayout(t.bf16, 64, 16, "K", "32B"))
    b = _tile(k, SmemLayout(t.bf16, 64, 48, "K", "32B"))
    with pytest.raises(OperandError, match=r"operand 'b_desc'.*a multiple of 32 along K"):
        ptx.wgmma_mma_async_sp(k, k.fragment(t.f32, (64, 64)), a, b, _meta(k), 0, atype="bf16")
    b = _tile(k, SmemLayout(t.bf16, 64, 64, "K", "32B"))
    ptx.wgmma_mma_async_sp(k, k.fragment(t.f32, (64, 64)), a, b, _meta(k), 0, atype="bf16")


# -- the kernel left out, or something else in its place ----------------------------------------
# `ptx.mbarrier_init(bar, 1)` (the kernel forgotten) reached `None.emit` inside the builder:
# the safety net then said "invalid argument (AttributeError: ... no attribute 'emit')".
_KERNEL_FIRST = sorted(name for name in ptx.__all__
                       if inspect.isfunction(getattr(ptx, name))
                       and inspect.unwrap(getattr(ptx, name)).__code__.co_varnames[:1] == ("k",))


def test_every_kernel_builder_is_checked():
    assert len(_KERNEL_FIRST) > 300     # the ptx module's builders, not an empty list


@pytest.mark.parametrize("not_a_kernel", [None, SmemLayout(t.bf16, 64, 64)])
@pytest.mark.parametrize("name", _KERNEL_FIRST)
def test_ptx_builder_without_a_kernel(name, not_a_kernel):
    with pytest.raises(OperandError) as e:
        getattr(ptx, name)(not_a_kernel, 0, 1)
    assert (e.value.instruction, e.value.operand) == (name, "k")
    assert e.value.expected.startswith("the Kernel to build into")
    assert e.value.loc.file.endswith(HERE)


def test_ptx_builder_with_no_argument_at_all():
    with pytest.raises(OperandError, match=r"wgmma_fence: operand 'k': expected the Kernel "
                       r"to build into, first, got nothing"):
        ptx.wgmma_fence()
    k = Kernel("k")
    ptx.wgmma_fence(k=k)                                     # by keyword: still a kernel
    assert k.body[-1].insn.render().startswith("wgmma.fence")


def test_descriptor_without_a_kernel():
    k = Kernel("k")
    sym = k.shared_array(t.b8, 8192, align=1024)
    with pytest.raises(OperandError, match=r"wgmma descriptor: operand 'k': expected the Kernel "
                       r"to build into, got NoneType None") as e:
        descriptor(None, SmemLayout(t.bf16, 64, 64), sym)
    assert e.value.loc.file.endswith(HERE)


@pytest.mark.parametrize("kernels", ["kernel", "name"])
def test_module_of_one_kernel_not_in_a_list(kernels):
    k = Kernel("k")
    given = k if kernels == "kernel" else "k"
    with pytest.raises(BuildError, match=r"Module: kernels must be a list of Kernels "
                       r"\(Module\(\[k\]\)\)") as e:
        Module(given)
    assert e.value.loc.file.endswith(HERE)
    assert Module([k]).kernels == [k]


# -- a thread index past any CTA -----------------------------------------------------------
# The fragment layouts take a CTA thread index (the warpgroup is index % 128): one of 1024 or
# more names no thread and wrapped around silently.
@pytest.mark.parametrize("call", [
    lambda i: fragment_coords(64, i), lambda i: a_fragment_coords(16, i),
    lambda i: Kernel("k").fragment(t.f32, (64, 64)).coords(i),
    lambda i: Kernel("k").a_fragment(t.bf16).coords(i)])
def test_thread_index_past_the_cta(call):
    assert call(1023) == call(127)              # the last thread: warpgroup 7's thread 127
    for bad in (1024, 10**6, -1):
        with pytest.raises(PtxdslError, match=r"thread must be a thread's index in the CTA, "
                           rf"an int in \[0, 1024\), got {bad}"):
            call(bad)


# -- a PyTorch op called with tensors on the CPU -------------------------------------------------
def test_kernel_op_with_inputs_on_the_cpu():
    """The op is registered for CUDA only: torch's dispatcher answered a CPU input with its own
    NotImplementedError naming no argument ("Could not run ... from the 'CPU' backend")."""
    torch = pytest.importorskip("torch")
    from ptxdsl.torch import KernelOpError, kernel_op

    def never(*_):
        raise AssertionError("nothing is loaded or launched for CPU inputs")

    op = kernel_op("ptxdsl_s11_test::scale", never, inputs=("x", "y"),
                   outputs=lambda x, y: torch.empty_like(x), launch=never)
    with pytest.raises(KernelOpError, match=r"ptxdsl_s11_test::scale: the op runs a CUDA kernel "
                       r"on its inputs' GPU, got 'x' on cpu, 'y' on cpu; move them") as e:
        op(torch.ones(4), torch.ones(4))
    assert e.value.loc.file.endswith(HERE)
    out = op(torch.ones(4, device="meta"), torch.ones(4, device="meta"))   # fake: shapes only
    assert out.shape == (4,)


# -- a fragment sliced with a step of 0 or float bounds -------------------------------------------
# `__getitem__` is a dunder, outside the methods' safety net: Python's ValueError/TypeError leaked.
@pytest.mark.parametrize("make", [lambda k: k.fragment(t.f32, (64, 64)),
                                  lambda k: k.a_fragment(t.bf16)])
@pytest.mark.parametrize("index", [slice(None, None, 0), slice(0, 1.5)])
def test_fragment_slice_that_python_refuses(make, index):
    frag = make(Kernel("k"))
    with pytest.raises(OperandError, match=r"\[\.\.\.\]: operand 'index': expected a slice of "
                       r"ints \(or None\) with a step other than 0, got slice") as e:
        frag[index]
    assert e.value.loc.file.endswith(HERE)
    assert frag[::2] == list(frag)[::2] and frag[1:3] == list(frag)[1:3]


# -- a register or symbol of another kernel given to a helper ------------------------------------
# Refused before, but by the instruction the helper builds from it (`mad.lo.u32: operand 'b'`
# for `acc.store(ptr, ld)`, `mov.u32: operand 'a'` for a ring's storage): now by the helper's
# name and the operand the user gave.
def _other():
    other = Kernel("other", reqntid=128)
    return other, other.reg(t.u32, "theirs"), other.shared_array(t.b8, 16384, align=1024)


def _ring(k, **kw):
    from ptxdsl.pipeline import MbarrierRing
    return MbarrierRing(k, 2, **kw)


def _epilogue(k, **kw):
    from ptxdsl.epilogue import TmaStoreEpilogue
    args = dict(staging=k.shared_array(t.b8, 16384, align=1024),
                tmap=k.tensormap_addr(k.param_tensormap("out")), barrier=1) | kw
    return TmaStoreEpilogue(k, **args)


def _packed(k, n=64):
    return k.fragment(t.f32, (64, n)).to_packed(t.bf16)


@pytest.mark.parametrize("helper, operand, call", [
    ("wgmma descriptor", "addr",
     lambda k, o: descriptor(k, SmemLayout(t.bf16, 64, 64), o.sym)),
    ("fragment.store", "ptr", lambda k, o: k.fragment(t.f32, (64, 64)).store(o.ptr, 64)),
    ("fragment.store", "ld", lambda k, o: k.fragment(t.f32, (64, 64)).store(k.reg(t.u64), o.reg)),
    ("fragment.store", "rows",
     lambda k, o: k.fragment(t.f32, (64, 64)).store(k.reg(t.u64), 64, rows=o.reg)),
    ("fragment.store_matrix", "smem", lambda k, o: _packed(k).store_matrix(o.sym, 64)),
    ("a_fragment.load", "k0", lambda k, o: k.a_fragment(t.bf16).load(k.reg(t.u64), 64, k0=o.reg)),
    ("MbarrierRing", "storage", lambda k, o: _ring(k, storage=o.sym)),
    ("RingView.slot", "buffer", lambda k, o: _ring(k).producer().slot(o.sym, 1024)),
    ("ProducerView.arrive_expect_tx", "nbytes",
     lambda k, o: _ring(k).producer().arrive_expect_tx(o.reg)),
    ("ProducerView.expect_tx", "nbytes", lambda k, o: _ring(k).producer().expect_tx(o.reg)),
    ("ConsumerView.release", "ctas", lambda k, o: _ring(k).consumer().release(ctas=[o.reg])),
    ("TmaStoreEpilogue", "staging", lambda k, o: _epilogue(k, staging=o.sym)),
    ("TmaStoreEpilogue.store", "packed", lambda k, o: _epilogue(k).store(_packed(o.k), 0, 0)),
    ("TmaStoreEpilogue.store", "col0", lambda k, o: _epilogue(k).store(_packed(k), 0, o.reg)),
    ("for_range", "stop", lambda k, o: k.for_range(0, o.reg).__enter__()),
    ("if_", "cond", lambda k, o: k.if_(~o.k.reg(t.pred)).__enter__()),
    ("tensormap_addr", "p", lambda k, o: k.tensormap_addr(o.k.param_tensormap("map"))),
])
def test_helper_operand_of_another_kernel(helper, operand, call):
    k = Kernel("mine", reqntid=128)
    other, reg, sym = _other()
    o = type("Other", (), {"k": other, "reg": reg, "sym": sym, "ptr": other.reg(t.u64)})
    with pytest.raises(OperandError) as e:
        call(k, o)
    assert (e.value.instruction, e.value.operand) == (helper, operand)
    assert "of kernel 'mine'" in e.value.expected and "of kernel 'other'" in str(e.value.given)
    assert e.value.loc.file.endswith(HERE)


# -- a tensor map whose element strides change what one box moves --------------------------------
# boxDim / elementStrides elements are copied (TMA skips rows): the checks compared boxDim.
def _desc(box, strides, dtype="bf16"):
    from ptxdsl.runtime.tensormap_desc import TiledDesc
    return TiledDesc.from_numpy_order(1 << 20, (256, 128), dtype, box, swizzle="128B",
                                      element_strides=strides)


def test_layout_check_counts_the_rows_a_strided_box_writes():
    layout = SmemLayout(t.bf16, 64, 64)
    with pytest.raises(BuildError, match=r"tensor map and wgmma layout disagree .*boxDim=\[64, "
                       r"22\] \(the rows must divide 64"):
        layout.check_tensormap(_desc((64, 64), (3, 1)))     # 22 rows a copy: 64 never filled
    layout.check_tensormap(_desc((128, 64), (2, 1)))        # every other row of 128: 64 rows
    layout.check_tensormap(_desc((64, 64), (1, 1)))


def test_epilogue_map_with_element_strides():
    from ptxdsl.epilogue import TmaStoreEpilogue
    with pytest.raises(BuildError, match=r"TmaStoreEpilogue: the output map's elementStrides "
                       r"\[1, 2\] make a box store \[64, 32\] of the \[64, 64\] staged elements"):
        TmaStoreEpilogue.check_tensormap(_desc((64, 64), (2, 1)))
    TmaStoreEpilogue.check_tensormap(_desc((64, 64), (1, 1)))


# -- a count that would build for minutes --------------------------------------------------------
# k.copy unrolls ld/st pairs: nbytes=10**9 (a slip for 10**3) built 125M pairs, a hang.
def test_copy_count_past_any_memory_it_could_unroll():
    k = Kernel("k")
    # global pointers in registers: no extent known to stop the unrolling early
    a, b = k.reg(t.u64), k.reg(t.u64)
    spaces = dict(dst_space="global", src_space="global")
    with pytest.raises(OperandError, match=r"copy: operand 'nbytes': expected a multiple of "
                       r"width=8 from 0 to 232448 .*got int 1000000000") as e:
        k.copy(a, b, 10**9, **spaces)
    assert e.value.loc.file.endswith(HERE) and len(k.body) == 0
    with pytest.raises(OperandError, match=r"copy: operand 'width': expected 4, 8 or 16"):
        k.copy(a, b, 256, width=3, **spaces)
    k.copy(a, b, 256, width=16, **spaces)
    assert len(k.body) == 2 * 256 // 16


# -- a launch argument that is no device pointer ---------------------------------------------------
# The packer quoted the inner error's str(), which repeats its location: "got float 1.5:
# file.py:12: float 1.5 is not a device pointer ...".
def test_pointer_argument_message_has_one_location():
    from ptxdsl.runtime.args import ArgPacker
    from ptxdsl.runtime.errors import ArgumentError
    with pytest.raises(ArgumentError) as e:
        ArgPacker("k", [Kernel("k").param_ptr("out")]).pack((1.5,))
    message = str(e.value)
    assert "got float 1.5: float 1.5 is not a device pointer" in message
    assert message.count(HERE) == 1
