"""setmaxnreg: goldens, pins below sm_90a, count refusals, and the register-budget check at
emit (`ptxdsl.regbudget`, `ptxdsl.warpgroups`), each rule with a kernel that breaks it and a
corrected twin."""

from __future__ import annotations

import pytest

from ptxdsl import (
    BuildError,
    Kernel,
    Module,
    OperandError,
    VersionError,
    ptx,
    regbudget,
    t,
    warpgroups,
)
from ptxdsl.assembly_report import PtxdslAssemblerWarning
from ptxdsl.instructions.setmaxnreg import RegAction, SetMaxNReg
from ptxdsl.regbudget import entry_registers
from ptxdsl.testing import declared_target
from ptxdsl.toolchain import assemble


def producer_consumer(inc=232, dec=40, threads=384, *, via="shr", **kw) -> Kernel:
    """The warp-specialized pattern: warpgroup 0 releases, the others take."""
    k = Kernel("ws", reqntid=threads, **kw)
    tid = k.tid.x
    wg = k.shr(tid, 7) if via == "shr" else k.div(tid, 128)
    with k.if_(k.setp("eq", wg, 0)):
        ptx.setmaxnreg_dec(k, dec)
    with k.else_():
        ptx.setmaxnreg_inc(k, inc)
    k.ret()
    return k


def assembles(ptx_or_module, target=None) -> bool:
    """Assembled by nvJitLink, which drops setmaxnreg and says so (C7504): the warning is part
    of what is checked."""
    with pytest.warns(PtxdslAssemblerWarning, match="C7504"):
        if isinstance(ptx_or_module, str):
            out = assemble(ptx_or_module, target or declared_target(ptx_or_module))
        else:
            out = ptx_or_module.assemble()
    return out[:4] == b"\x7fELF"


def line_of(k: Kernel, action: str, count: int) -> int:
    for s in k.statements():
        if isinstance(s.insn, SetMaxNReg) and s.insn.action.value == action \
                and s.insn.count == count:
            return s.loc.line
    raise AssertionError("no such setmaxnreg")


# -- forms ---------------------------------------------------------------------------------------
def test_golden_producer_consumer(golden):
    m = Module([producer_consumer(minnctapersm=1)])
    assert (str(m.version), str(m.target)) == ("8.0", "sm_90a")
    assert assembles(golden(m, "setmaxnreg/producer_consumer"))


@pytest.mark.parametrize("target", ["sm_90a", "sm_100a", "sm_100f", "sm_103a", "sm_120a"])
@pytest.mark.parametrize("action", ["inc", "dec"])
def test_assembles_on_every_listed_target(target, action):
    k = Kernel("k", maxnreg=128)
    k.emit(SetMaxNReg(action, 64 if action == "dec" else 128))
    m = Module([k], target=target)
    assert assembles(m.emit(), target)


@pytest.mark.parametrize("count", range(24, 257, 8))
def test_every_count_assembles(count):
    k = Kernel("k", maxnreg=255)
    k.emit(SetMaxNReg(RegAction.inc, count))
    assert assembles(Module([k]))


@pytest.mark.parametrize("target", ["sm_90", "sm_100"])
def test_pin_below_arch_specific_refused(target):
    k = Kernel("k", maxnreg=128)
    ptx.setmaxnreg_dec(k, 64)
    with pytest.raises(VersionError, match=f"setmaxnreg.dec.sync.aligned.u32 needs PTX ISA 8.0"
                                           f".*pinned to .target {target}"):
        Module([k], target=target).emit()


@pytest.mark.parametrize("count", [16, 23, 264, 300])
def test_refuse_count_out_of_range(count):
    with pytest.raises(OperandError, match=r"count.*\[24, 256\]"):
        SetMaxNReg("inc", count)


@pytest.mark.parametrize("count", [36, 100, 250])
def test_refuse_count_not_multiple_of_8(count):
    with pytest.raises(BuildError, match="multiple of 8"):
        SetMaxNReg("dec", count)


def test_refuse_count_register():
    k = Kernel("k")
    with pytest.raises(OperandError, match="a register is not allowed"):
        SetMaxNReg("dec", k.reg(t.u32))


def test_refuse_unknown_action():
    with pytest.raises(OperandError, match="'inc', 'dec'"):
        SetMaxNReg("grow", 64)


# -- the budget ----------------------------------------------------------------------------------
@pytest.mark.parametrize("kw, threads, regs", [
    ({"minnctapersm": 1}, 384, 168), ({"minnctapersm": 2}, 384, 80),
    ({"minnctapersm": 3}, 384, 56), ({"minnctapersm": 1}, 1024, 64),
    ({"maxnreg": 200, "minnctapersm": 1}, 384, 168), ({"maxnreg": 160}, 384, 160)])
def test_entry_registers_follow_ptxas(kw, threads, regs):
    # the counts ptxas 13 reports ("Used N registers") for these directives with setmaxnreg
    assert entry_registers(Kernel("k", reqntid=threads, **kw)) == regs


def test_cutlass_budget_fits():
    m = Module([producer_consumer(232, 40, minnctapersm=1)])
    assert assembles(m)


def test_refuse_budget_that_never_fits():
    k = producer_consumer(240, 40, minnctapersm=1)
    # 40 + 240 + 240 = 520 per thread of a warpgroup > 3 x 168: the last .inc waits forever
    with pytest.raises(BuildError, match=rf"test_setmaxnreg.py:{line_of(k, 'inc', 240)}: "
                       r"kernel ws: setmaxnreg.inc 240 can never complete.*66560 registers.*"
                       r"warpgroup 0: 40, warpgroup 1: 240, warpgroup 2: 240.*CTA holds 64512"):
        Module([k]).emit()


def test_refuse_budget_written_another_way():
    """The same mistake with tid / 128, a loop around the consumers' work and two warpgroups
    under maxnreg: warpgroup 1's .inc 256 needs 40 + 256 > 2 x 144."""
    k = Kernel("ws2", reqntid=256, maxnreg=144)
    wg = k.div(k.tid.x, 128)
    with k.if_(k.setp("ne", wg, 0)):
        ptx.setmaxnreg_inc(k, 256)
        n = k.ld_param(k.param(t.u32, "n"))
        with k.for_range(0, n):
            k.add(wg, 1)
    with k.else_():
        ptx.setmaxnreg_dec(k, 40)
    k.ret()
    with pytest.raises(BuildError, match=rf":{line_of(k, 'inc', 256)}: kernel ws2: setmaxnreg"
                                         r".inc 256 can never complete"):
        Module([k]).emit()


def test_budget_fits_written_another_way():
    k = Kernel("ws2", reqntid=256, maxnreg=144)
    wg = k.div(k.tid.x, 128)
    with k.if_(k.setp("ne", wg, 0)):
        ptx.setmaxnreg_inc(k, 248)
    with k.else_():
        ptx.setmaxnreg_dec(k, 40)
    k.ret()
    assert assembles(Module([k]))


def test_inc_behind_unknown_condition_is_not_counted_as_certain():
    # whether warpgroup 1 takes its registers depends on a parameter: no verdict (sound)
    k = Kernel("k", reqntid=256, minnctapersm=1)
    go = k.setp("ne", k.ld_param(k.param(t.u32, "go")), 0)
    with k.if_(go):
        ptx.setmaxnreg_inc(k, 256)
    k.ret()
    Module([k]).emit()


def test_refuse_unknown_entry_count():
    k = producer_consumer()       # reqntid only: ptxas drops setmaxnreg (C7508)
    with pytest.raises(BuildError, match=rf":{line_of(k, 'dec', 40)}: kernel ws: setmaxnreg "
                                         r"needs the register count at entry.*C7508"):
        Module([k]).emit()


def test_refuse_dec_above_entry_count():
    k = Kernel("k", maxnreg=32)
    ptx.setmaxnreg_dec(k, 40)
    with pytest.raises(BuildError, match=r"setmaxnreg.dec 40 asks for more registers than the "
                                         r"32 per thread.*C7406"):
        Module([k]).emit()


def test_refuse_launch_larger_than_the_register_file():
    k = producer_consumer(maxnreg=200)    # 384 x 200 > 65536
    with pytest.raises(BuildError, match=r"384 threads x 200 registers = 76800 registers, more "
                                         r"than the 65536"):
        Module([k]).emit()


@pytest.mark.parametrize("call, what", [
    (lambda: warpgroups.thread_specials("k", 0), "thread_specials"),
    (lambda: warpgroups.cta_threads(3), "cta_threads"),
    (lambda: warpgroups.per_thread(None, [0]), "per_thread"),
    (lambda: regbudget.entry_registers("k"), "entry_registers"),
    (lambda: regbudget.check_kernel_budget(None), "check_kernel_budget"),
])
def test_the_budget_helpers_name_a_non_kernel(call, what):
    with pytest.raises(OperandError, match=f"{what}: operand 'kernel': expected a kernel") as e:
        call()
    assert (e.value.loc.file, e.value.loc.line) == (__file__, call.__code__.co_firstlineno)


def test_thread_specials_refuses_a_negative_thread():
    with pytest.raises(OperandError, match="thread_specials: operand 'linear'"):
        warpgroups.thread_specials(Kernel("ts", reqntid=128), -1)
