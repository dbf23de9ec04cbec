"""bra (plain, @p, @!p, .uni), ret, exit, trap, guards and structured control flow."""

from __future__ import annotations

import pytest

from ptxdsl import BuildError, Kernel, Module, OperandError, t


def test_control_golden(golden):
    k = Kernel("control")
    n = k.ld_param(k.param(t.u32, "n"))
    p = k.tid.x < n
    top, skip, done = k.label("top"), k.label("skip"), k.label("done")
    k.place(top)
    k.bra(skip, when=p)                       # @p bra
    k.bra(done, when=~p)                      # @!p bra
    k.bra(top)                                # plain
    k.bra(top, uni=True)                      # bra.uni
    k.place(skip)
    with k.guard(~p):
        k.trap()                              # @!p trap
    with k.guard(p):
        k.exit()
    k.place(done)
    k.ret()
    golden(Module([k]), "core/control")


def test_structured_control_flow_golden(golden):
    k = Kernel("structured")
    n = k.ld_param(k.param(t.u32, "n"))
    out = k.cvta(k.ld_param(k.param_ptr("out")), "global", to=True)
    acc = k.mov(0, type=t.u32)
    tid = k.tid.x
    with k.if_(tid == 0):                     # if without else
        k.st(out, acc)
    with k.if_(tid < n):                      # if / else
        k.add(acc, 1, dst=acc)
    with k.else_():
        k.sub(acc, 1, dst=acc)
    with k.for_range(0, n) as i:              # counted loop to a register bound
        k.add(acc, i, dst=acc)
    with k.for_range(10, 0, -3) as j:         # counting down: 10, 7, 4, 1 (compared signed)
        with k.if_(j == 4):
            k.continue_()
        k.add(acc, j, dst=acc)
    with k.while_(lambda: acc < 100):
        k.mul(acc, 2, dst=acc)
    with k.loop():
        k.sub(acc, 3, dst=acc)
        k.break_(when=acc < 10)
        k.continue_(when=acc > 50)
        k.break_()
    k.st(out, acc)
    k.ret()
    golden(Module([k]), "core/structured")


def test_labels_are_unique_and_placed_once():
    k = Kernel("labels")
    lab = k.label("here")
    with pytest.raises(BuildError, match="label 'here' is already declared"):
        k.label("here")
    k.place(lab)
    with pytest.raises(BuildError, match=r"duplicate label 'here' \(first placed at "
                       rf"{__file__}:\d+\)"):
        k.place(lab)


def test_control_refusals():
    k = Kernel("bad")
    with pytest.raises(OperandError, match="bra: operand 'target': expected a label"):
        k.bra("somewhere")
    with pytest.raises(OperandError, match=r"@guard: operand 'pred': expected a \.pred register"):
        with k.guard(k.reg(t.u32)):
            pass
    with pytest.raises(BuildError, match="else_\\(\\) must directly follow an if_\\(\\) block"):
        with k.else_():
            pass
    with pytest.raises(BuildError, match="break_\\(\\) outside a loop"):
        k.break_()
    with pytest.raises(OperandError, match="for_range: operand 'step': expected a non-zero "
                       "integer or an integer register, got 0"):
        with k.for_range(0, 4, 0):
            pass
    p = k.reg(t.pred)
    with pytest.raises(BuildError, match="guards do not nest"):
        with k.guard(p), k.guard(~p):
            pass
