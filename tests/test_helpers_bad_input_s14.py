"""Bad input to the helpers above the instructions (session 14): each class of mistake is
refused when built (before any driver call) with a ptxdsl error naming the helper, the
operand, what was expected and what was given, at the user's line; and the nearest valid
call still builds, numpy integers included (so a test cannot pass by refusing everything)."""

from __future__ import annotations

import numpy as np
import pytest

from ptxdsl import Kernel, Module, t
from ptxdsl.errors import BuildError, OperandError
from ptxdsl.instructions.wgmma_desc import SmemLayout, decode_descriptor, encode_descriptor

HERE = __file__


def _here(err) -> bool:
    return err.value.loc.file == HERE


# -- for_range: a constant step or start that wraps the counter before a register stop --------
# With `stop` a register only its value at run time decides, but a step longer than half the
# .u32 range wraps the counter past most stops (0 -> 2^31 + 1 -> 2 < stop: endless), and a
# start whose first step leaves the range wraps whenever the body runs.
@pytest.mark.parametrize("start, step, operand, words", [
    (0, 2**31 + 1, "step", r"a step of magnitude at most 2\^31 with a register stop.*got "
     r"2147483649"),
    (0, -(2**31 + 1), "step", r"a step of magnitude at most 2\^31 .*got -2147483649"),
    (2**32 - 2, 2, "start", r"a start from which one step \(2\) stays in \[0, 4294967295\].*"
     r"got 4294967294"),
])
def test_for_range_constant_step_wrapping_past_a_register_stop(start, step, operand, words):
    k = Kernel("k")
    stop = k.ld_param(k.param(t.u32, "n"))
    with pytest.raises(OperandError, match=r"for_range: operand '" + operand + "': expected "
                       + words) as e:
        with k.for_range(start, stop, step):
            pass
    assert _here(e)
    for first, by in ((0, 2**31), (2**32 - 3, 2), (np.uint32(7), np.int64(-3))):
        with k.for_range(first, stop, by):      # the largest that cannot wrap, numpy's too
            pass


# -- a named barrier waiting for more threads than the kernel's CTA has ----------------------
# It never completes: the checker's named-barrier-count reported it at emit; the builder knows
# both numbers when the kernel declares its size (.reqntid / .maxntid), before or after.
@pytest.mark.parametrize("directive, call", [
    (dict(reqntid=128), lambda k: k.bar_sync(1, 256)),
    (dict(maxntid=(64, 2)), lambda k: k.barrier_arrive(2, 160)),
    (dict(reqntid=(32, 4)), lambda k: k.bar_red("popc", k.setp("eq", k.tid.x, 0), 3, 192)),
])
def test_named_barrier_count_past_the_declared_cta(directive, call):
    k = Kernel("k", **directive)
    with pytest.raises(OperandError, match=r"operand 'count': expected at most the CTA's 128 "
                       r"threads \(\.(reqntid|maxntid) [0-9, ]+: a barrier waiting for more "
                       r"never completes\), got (256|160|192)") as e:
        call(k)
    assert _here(e) and not [s for s in k.statements() if s.insn.opcode().startswith("bar")]
    k.bar_sync(1, 128)
    k.bar_sync(2, np.int64(96))


def test_named_barrier_count_refused_by_a_cta_size_set_later():
    k = Kernel("k")
    k.bar_sync(1, 256)
    line = k.body[-1].loc.line
    with pytest.raises(BuildError, match=rf"kernel k: \.reqntid 128 is 128 threads per CTA, but "
                       rf"bar\.sync at .*:{line} waits for 256: it would never complete"
                       ) as e:
        k.reqntid = 128
    assert _here(e) and k.reqntid is None
    k.reqntid = 256


# -- a device that names no GPU ---------------------------------------------------------------
# True was device 1 (and found its cached context), a float or a string went into the driver
# (or made context_broken answer True); refused before the driver is loaded at all.
@pytest.mark.parametrize("device", [True, 0.0, "0", -1, None])
@pytest.mark.parametrize("call", [
    lambda d: __import__("ptxdsl.debug").debug.context_broken(d),
    lambda d: __import__("ptxdsl.runtime").runtime.DeviceBuffer(16, device=d),
    lambda d: Module([Kernel("k")]).load(device=d),
])
def test_device_that_is_no_ordinal(call, device):
    from ptxdsl.runtime.errors import DeviceOrdinalError
    with pytest.raises(DeviceOrdinalError, match=r"device: expected a device ordinal \(an int 0 "
                       r"or more, a cuda\.core Device or a torch\.device\), got ") as e:
        call(device)
    assert _here(e) and isinstance(e.value, ValueError) and isinstance(e.value, TypeError)
    from ptxdsl.runtime.device import checked_ordinal
    assert checked_ordinal(np.int64(1)) == 1 and type(checked_ordinal(np.uint8(0))) is int


# -- decode_descriptor of something that is no 64-bit value ----------------------------------
@pytest.mark.parametrize("value", [2.0, "0", None, True, -1, 1 << 64])
def test_decode_descriptor_of_no_64_bit_int(value):
    """A float or a string was Python's TypeError from `&`; a numpy uint64 (what a descriptor
    read back from memory is) an OverflowError."""
    with pytest.raises(OperandError, match=r"decode_descriptor: operand 'value': expected a "
                       r"64-bit descriptor \(an int in \[0, 2\^64\)\), got ") as e:
        decode_descriptor(value)
    assert _here(e)
    d = encode_descriptor(1024, 16, 1024, 128)
    assert decode_descriptor(np.uint64(d)) == decode_descriptor(d)
    assert decode_descriptor(d)[:3] == (1024, 16, 1024)


# -- a wgmma tile no shared memory holds ------------------------------------------------------
def test_smem_layout_larger_than_a_descriptor_addresses():
    with pytest.raises(OperandError, match=r"SmemLayout: operand 'mn, k': expected a tile of at "
                       r"most 256 KiB .*got 1024 x 256 of 16 bits = 524288 bytes") as e:
        SmemLayout(t.bf16, 1024, 256)
    assert _here(e)
    assert SmemLayout(t.bf16, np.int64(512), 256).nbytes == 256 * 1024


# -- a module's kernel by a name it does not have; a check's strict flag ---------------------
def test_module_kernel_by_an_unknown_name():
    """A bare KeyError from inside Module.kernel, without the caller's line."""
    from ptxdsl.runtime.errors import KernelNotFoundError
    m = Module([Kernel("gemm"), Kernel("attn")])
    with pytest.raises(KernelNotFoundError, match=r"Module\.kernel: no kernel named 'gem' in "
                       r"module 'module'; it has: gemm, attn") as e:
        m.kernel("gem")
    assert _here(e) and isinstance(e.value, KeyError)
    assert m.kernel("attn").name == "attn"


@pytest.mark.parametrize("make", [lambda: Kernel("k"), lambda: Module([Kernel("k")])])
@pytest.mark.parametrize("strict", ["no", None, 1])
def test_check_strict_flag_that_is_no_bool(make, strict):
    """strict="no" was truthy: the check raised on any finding."""
    obj = make()
    with pytest.raises(OperandError, match=r"check: operand 'strict': expected True or False, "
                       r"got ") as e:
        obj.check(strict=strict)
    assert _here(e)
    assert obj.check(strict=True) == []


# -- the flash_attention operator's non-tensor arguments --------------------------------------
# The schema converted what it could (causal=0.5 ran the causal kernel, scale=True a scale of
# 1, max_seqlen=True one row) and refused the rest with torch's RuntimeError, at no line of
# the caller's.
@pytest.mark.parametrize("kw, words", [
    (dict(causal=0.5), r"causal must be True or False, got 0\.5"),
    (dict(causal=None), r"causal must be True or False, got None"),
    (dict(return_lse="yes"), r"return_lse must be True or False, got 'yes'"),
    (dict(scale=True), r"scale must be None \(1/sqrt\(D\)\) or a finite number, got True"),
    (dict(scale="x"), r"scale must be None .*got 'x'"),
    (dict(scale=float("inf")), r"scale must be None .*got inf"),
    (dict(max_seqlen=2.0), r"max_seqlen must be None or an int .*got 2\.0"),
    (dict(max_seqlen=True), r"max_seqlen must be None or an int .*got True"),
    (dict(q=np.zeros((1, 128, 4, 64))), r"q must be a torch\.Tensor, got ndarray"),
    (dict(cu_seqlens=[0, 128]), r"cu_seqlens must be a torch\.Tensor, got list"),
])
def test_flash_attention_operator_arguments(kw, words):
    torch = pytest.importorskip("torch")
    import sys
    from pathlib import Path
    sys.path.insert(0, str(Path(HERE).parents[1] / "samples"))
    try:
        from _flash_attention_op import flash_attention
    finally:
        sys.path.pop(0)
    from ptxdsl.torch import KernelOpError

    def x():
        return torch.empty(1, 128, 4, 64, device="meta", dtype=torch.bfloat16)
    args = dict(q=x(), k=x(), v=x()) | kw
    q, k, v = args.pop("q"), args.pop("k"), args.pop("v")
    with pytest.raises(KernelOpError, match=r"^.*flash_attention: " + words) as e:
        flash_attention(q, k, v, **args)
    assert _here(e)
    out, lse = flash_attention(x(), x(), x(), causal=True, scale=np.float32(0.125),
                               return_lse=True)
    assert out.shape == (1, 128, 4, 64) and out.device.type == "meta"
