"""Issue 13: an exception inside a structured-control-flow block surfaces as itself and leaves
the kernel as it was before the block; `for_range` takes a register step (grid-stride loops);
special registers fixed for a thread's life are read once per kernel, at its entry."""

from __future__ import annotations

import pytest

from ptxdsl import BuildError, Kernel, Module, OperandError, t
from ptxdsl.testing import assemble_declared


class Boom(Exception):
    pass


def body_text(k: Kernel) -> str:
    k.ret()
    return Module([k], check=False).emit()


def base_kernel() -> tuple[Kernel, object]:
    k = Kernel("k")
    n = k.ld_param(k.param(t.u32, "n"))
    return k, n


BLOCKS = {
    "if_": lambda k, n: k.if_(n > 1),
    "for_range": lambda k, n: k.for_range(0, n),
    "while_": lambda k, n: k.while_(lambda: n > 1),
    "loop": lambda k, n: k.loop(),
}


@pytest.mark.parametrize("block", sorted(BLOCKS))
def test_exception_in_block_surfaces_and_the_block_is_discarded(block):
    reference, rn = base_kernel()
    BLOCKS[block](reference, rn)   # what is built before the block is entered (if_'s setp)
    rn + 1
    want = body_text(reference)
    k, n = base_kernel()
    with pytest.raises(Boom):
        with BLOCKS[block](k, n):
            k.add(n, 2)
            _ = k.tid.x      # a once-per-kernel read made inside the failed block stays valid
            with k.if_(n > 3):
                raise Boom()
    n + 1
    text = body_text(k)
    # Same statements as a kernel built without the block, apart from the %tid.x read at the
    # entry and the registers the failed block numbered.
    got = [ln for ln in text.splitlines() if ln and "%tid.x" not in ln and ".reg" not in ln]
    ref = [ln for ln in want.splitlines() if ln and ".reg" not in ln]
    assert [ln.split()[0] for ln in got] == [ln.split()[0] for ln in ref]
    assert "$L__" not in text
    assemble_declared(text)


def test_ptxdsl_error_inside_else_discards_the_else_only():
    k, n = base_kernel()
    with k.if_(n > 1):
        k.add(n, 1)
    with pytest.raises(OperandError):
        with k.else_():
            k.add(n, "x")
    text = body_text(k)
    assert "$L__endif" not in text and "bra $L__endif" not in text
    assert text.count("add.u32") == 1 and "$L__else_1:" in text
    assemble_declared(text)


def test_exception_keeps_an_enclosing_guard():
    k, n = base_kernel()
    p = n > 1
    with k.guard(p):
        with pytest.raises(BuildError, match="inside a guard block"):
            with k.if_(p):
                pass
        k.add(n, 1)
    assert "@%p1 add.u32" in body_text(k)


def test_grid_stride_loop_with_register_step(golden):
    # for (i = tid + ctaid * ntid; i < n; i += ntid * nctaid) out[i] = i
    k = Kernel("grid_stride")
    out = k.ld_param(k.param_ptr("out"))
    n = k.ld_param(k.param(t.u32, "n"))
    start = k.mad(k.ctaid.x, k.ntid.x, k.tid.x)
    stride = k.ntid.x * k.nctaid.x
    with k.for_range(start, n, stride) as i:
        k.st(k.add(out, k.mul(i, 4, mode="wide")), i, space="global")
    k.ret()
    text = golden(Module([k]), "core/grid_stride")
    assert "add.u32 %r8, %r8, %r7;" in text   # i += the stride register
    assemble_declared(text)


@pytest.mark.parametrize("step", [t.u32, "x", 0, 1.5, None])
def test_for_range_step_refusals(step):
    k, n = base_kernel()
    if step is t.u32:
        step = k.reg(t.f32)
    with pytest.raises(OperandError, match="operand 'step': expected a non-zero integer or an "
                       "integer register"):
        with k.for_range(0, n, step):
            pass


def test_special_registers_fixed_for_the_thread_are_read_once_at_entry():
    k, n = base_kernel()
    with k.if_(n > 1):
        a = k.tid.x            # first read inside a branch: still placed at the entry
    b = k.tid.x
    assert a is b
    assert k.laneid is k.laneid
    c1, c2 = k.clock64, k.clock64          # a clock is read at each use
    assert c1 is not c2
    text = body_text(k)
    assert text.count("%tid.x;") == 1 and text.count("%laneid;") == 1
    assert text.count("%clock64;") == 2
    body = text[text.index("{\n"):].splitlines()
    first = [ln.strip() for ln in body if ln.strip() and not ln.strip().startswith((".", "{"))]
    assert first[:2] == ["mov.u32 %r2, %tid.x;", "mov.u32 %r3, %laneid;"]
    assemble_declared(text)


def test_writing_a_once_read_special_register_is_refused():
    k, n = base_kernel()
    tid = k.tid.x
    k.add(tid, 1, dst=tid)    # the write
    k.ret()
    with pytest.raises(BuildError, match=r"add.u32: writes %r2, which holds %tid.x \(read once "
                       r"per kernel, read-only\); copy it first") as e:
        Module([k], check=False).emit()
    assert e.value.loc.line == test_writing_a_once_read_special_register_is_refused.__code__\
        .co_firstlineno + 3


def test_else_after_if_still_pairs_when_the_if_made_the_first_special_read():
    k, n = base_kernel()
    with k.if_(n > 1):
        k.add(k.tid.x, 1)
    with k.else_():
        k.add(k.ctaid.x, 1)
    text = body_text(k)
    body = text[text.index("$L__else_1:") - 200:]
    assert "bra $L__endif_2;\n$L__else_1:" in body
    assemble_declared(text)
