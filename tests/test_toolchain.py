"""nvJitLink assembly: cubins, and ptxas errors mapped to PTX and Python lines."""

from __future__ import annotations

import pytest

from ptxdsl import Kernel, Module, t
from ptxdsl.assembly_report import PtxdslAssemblerWarning, parse_info_log
from ptxdsl.errors import AssemblyError, SourceLoc
from ptxdsl.instructions.bulk import cp_async_bulk
from ptxdsl.runtime.compat import build_arch
from ptxdsl.toolchain import assemble, toolchain_version, uses_setmaxnreg
from ptxdsl.types import Target

BAD_SYNTAX = (".version 8.0\n.target sm_90\n.address_size 64\n"
              ".visible .entry k()\n{\n\tfoo bar baz;\n}\n")


def test_assemble_returns_an_elf_cubin():
    k = Kernel("k")
    k.add(k.reg(t.u32), 1)
    k.ret()
    cubin = Module([k]).assemble("sm_90")
    assert cubin[:4] == b"\x7fELF"


def test_parse_error_names_ptx_line_and_python_line():
    loc = SourceLoc("user.py", 42)
    with pytest.raises(AssemblyError) as ei:
        assemble(BAD_SYNTAX, "sm_90", locate=lambda n: loc if n == 6 else None)
    err = ei.value
    assert err.ptx_line == 6 and err.ptx_text == "foo bar baz;"
    assert err.loc == loc and "user.py:42" in str(err) and "syntax error" in str(err)


def test_sm90a_ptx_refused_for_plain_sm90():
    text = BAD_SYNTAX.replace("sm_90\n", "sm_90a\n").replace("\tfoo bar baz;\n", "\tret;\n")
    with pytest.raises(AssemblyError, match="sm_90a"):
        assemble(text, "sm_90")


def test_toolchain_version_is_major_minor():
    major, minor = toolchain_version().split(".")
    assert int(major) >= 12 and int(minor) >= 0


# -- options: every one reaches nvJitLink; an unknown one is a clear error -------------------------
def _spilling_ptx(maxnreg: str = "") -> str:
    """99 values loaded (volatile) and stored back in reverse: all live at once."""
    body = [f"\tld.global.volatile.u32 %r{i}, [%rd1+{4 * i}];" for i in range(1, 100)]
    body += [f"\tst.global.volatile.u32 [%rd1+{4 * i}], %r{i};" for i in range(99, 0, -1)]
    return (".version 8.0\n.target sm_90\n.address_size 64\n"
            f".visible .entry spill(.param .u64 p){maxnreg}\n{{\n\t.reg .u32 %r<100>;\n"
            "\t.reg .u64 %rd<2>;\n\tld.param.u64 %rd1, [p];\n" + "\n".join(body) + "\n\tret;\n}\n")


def test_every_option_is_passed_to_nvjitlink():
    free = assemble(_spilling_ptx(), "sm_90").report["spill"]
    capped = assemble(_spilling_ptx(), "sm_90",
                      options=("-Xptxas=-O3", "-maxrregcount=24")).report["spill"]
    assert free.registers > 24 and not free.spills
    # The second option (the one the old code dropped) took effect: 24 registers, spilling.
    assert capped.registers == 24 and capped.spills
    assert capped.spill_stores > 0 and capped.spill_loads > 0 and capped.stack_frame > 0


def test_a_single_string_option_is_one_option():
    assert assemble(_spilling_ptx(), "sm_90", options="-maxrregcount=24").report[
        "spill"].registers == 24


@pytest.mark.parametrize("option, culprit", [
    ("-no-such-option", "nvJitLink refused option '-no-such-option'"),
    ("-Xptxas=-no-such-option", "ptxas does not know option 'no-such-option'"),
    ("maxrregcount=24", "must be strings starting with '-'"),
    (42, "must be strings starting with '-'"),
])
def test_unknown_option_is_a_clear_error(option, culprit):
    with pytest.raises(AssemblyError, match=culprit) as ei:
        assemble(_spilling_ptx(), "sm_90", options=("-maxrregcount=64", option))
    assert ei.value.loc.file == __file__


# -- the info log: resources per kernel, warnings as Python warnings -----------------------------
def test_report_has_registers_spills_stack_and_shared_per_kernel():
    k = Kernel("k")
    buf = k.shared_array(t.b32, 256, name="buf")
    k.st(buf, k.tid.x)
    k.ret()
    other = Kernel("other")
    other.ret()
    cubin = Module([k, other]).assemble("sm_90")
    assert isinstance(cubin, bytes) and cubin[:4] == b"\x7fELF"   # still bytes for old callers
    rep = cubin.report
    assert set(rep.kernels) == {"k", "other"} and rep.arch == cubin.arch == "sm_90"
    assert rep["k"].shared == 1024 and rep["other"].shared == 0
    assert rep["k"].registers >= 1 and rep["k"].stack_frame == 0 and not rep["k"].spills
    assert "Used" in rep.log and "k:" in rep.summary()


def test_parse_info_log_reads_cmem_barriers_and_bare_warnings():
    log = ("ptxas info    : 8 bytes gmem\n"
           "ptxas info    : Compiling entry function 'k' for 'sm_90'\n"
           "ptxas info    : Function properties for k\n"
           "    16 bytes stack frame, 8 bytes spill stores, 4 bytes spill loads\n"
           "ptxas info    : Used 40 registers, used 1 barriers, 2048 bytes smem, "
           "368 bytes cmem[0], 8 bytes cmem[2]\n"
           "ptxas warning : Registers are spilled to local memory in function 'k'\n")
    rep = parse_info_log(log, "sm_90")
    k = rep["k"]
    assert (k.registers, k.barriers, k.shared, k.const) == (40, 1, 2048, {0: 368, 2: 8})
    assert (k.stack_frame, k.spill_stores, k.spill_loads, rep.gmem) == (16, 8, 4, 8)
    assert [w.text for w in rep.warnings] == ["Registers are spilled to local memory in "
                                              "function 'k'"]


def test_ptxas_warning_names_the_python_line():
    k = Kernel("k")
    g = k.ld_param(k.param_ptr("g"))
    smem = k.shared_array(t.b8, 256, align=128, name="smem")
    bar = k.shared_array(t.b64, 1, align=8, name="bar")
    line = _line() + 1
    cp_async_bulk(k, "shared::cluster", "global", smem, g, 256, bar, cta_mask=3)
    k.ret()
    m = Module([k])
    assert str(m.target) == "sm_90"   # inferred; ptxas advises sm_90a for .multicast::cluster
    with pytest.warns(PtxdslAssemblerWarning, match=r"multicast::cluster.*pin "
                      r"Module\(\.\.\., target='sm_90a'\)") as rec:
        cubin = m.assemble("sm_90")
    (w,) = [r for r in rec if r.category is PtxdslAssemblerWarning]
    assert (w.filename, w.lineno) == (__file__, line)
    (msg,) = cubin.report.warnings
    assert msg.loc == SourceLoc(__file__, line, "test_ptxas_warning_names_the_python_line")
    assert msg.ptx_line is not None and "cp.async.bulk" in m.emit().splitlines()[
        msg.ptx_line - 1]


def test_warn_false_keeps_warnings_in_the_report_only(recwarn):
    text = _setmaxnreg_module().emit()
    cubin = assemble(text, "sm_90a", warn=False)
    assert not [w for w in recwarn if issubclass(w.category, PtxdslAssemblerWarning)]
    assert cubin.report.setmaxnreg_dropped


def _line() -> int:
    import sys
    return sys._getframe(1).f_lineno


# -- setmaxnreg: nvJitLink drops it; the warning says so and names the Python line --------------
def _setmaxnreg_module():
    k = Kernel("k", maxntid=256, minnctapersm=1)
    k.asm("setmaxnreg.inc.sync.aligned.u32 240;", requires=("8.0", "sm_90a"))
    k.ret()
    return Module([k])


def test_setmaxnreg_dropped_by_nvjitlink_is_a_warning_at_its_python_line():
    m = _setmaxnreg_module()
    line = _setmaxnreg_module.__code__.co_firstlineno + 2
    assert uses_setmaxnreg(m.emit())
    with pytest.warns(PtxdslAssemblerWarning, match="setmaxnreg.*driver JIT") as rec:
        cubin = m.assemble("sm_90a")
    assert any((w.filename, w.lineno) == (__file__, line) for w in rec)
    assert cubin.report.setmaxnreg_dropped


def test_uses_setmaxnreg_sees_the_opcode_only():
    assert uses_setmaxnreg("\tsetmaxnreg.dec.sync.aligned.u32 40;\n")
    assert uses_setmaxnreg("\t@%p1 setmaxnreg.inc.sync.aligned.u32 240;\n")
    assert not uses_setmaxnreg("// setmaxnreg.inc is not used here\n\tret;\n")


# -- which arch Module.assemble() builds when none is named --------------------------------------
@pytest.mark.parametrize("cc, target, want, loads", [
    (None, "sm_75", "sm_75", True),        # no GPU: the module's (inferred) target
    ((9, 0), "sm_75", "sm_90", True),      # a Hopper GPU: its arch, never the sm_75 minimum
    ((9, 0), "sm_90a", "sm_90a", True),    # arch-specific: the device's own 'a' arch
    ((8, 0), "sm_90", "sm_90", False),     # never below the target, and said to not load
])
def test_build_arch_rule(cc, target, want, loads):
    arch, reason, ok = build_arch(Target.parse(target), cc)
    assert (arch, ok) == (want, loads) and reason


def _simple_module():
    k = Kernel("k")
    k.ret()
    return Module([k])


def test_assemble_without_arch_uses_the_gpu_in_use(monkeypatch):
    from ptxdsl.runtime import device
    m = _simple_module()
    assert str(m.target) == "sm_75"
    monkeypatch.setattr(device, "current_compute_capability", lambda: None)
    cubin = m.assemble()
    assert cubin.arch == "sm_75" and _elf_arch(cubin) == 75
    monkeypatch.setattr(device, "current_compute_capability", lambda: (9, 0))
    cubin = m.assemble()
    assert cubin.arch == "sm_90" and "9.0" in cubin.report.arch_reason
    assert _elf_arch(cubin) == 90
    monkeypatch.setattr(device, "current_compute_capability", lambda: (8, 0))
    hopper_only = Module([Kernel("h", reqnctapercluster=2)])
    hopper_only.kernels[0].ret()
    with pytest.warns(PtxdslAssemblerWarning, match="cannot run on the GPU in use"):
        assert hopper_only.assemble().arch == "sm_90"


def _elf_arch(cubin: bytes) -> int:
    """The SM number nvJitLink wrote into the cubin's ELF header (e_flags bits 8-15 for these
    CUDA 13 cubins: 0x4b sm_75, 0x5a sm_90)."""
    import struct
    (flags,) = struct.unpack_from("<I", cubin, 48)
    return (flags >> 8) & 0xFF


def test_module_assemble_passes_options_and_names_the_callers_line():
    m = _simple_module()
    with pytest.raises(AssemblyError, match="-no-such-option") as ei:
        m.assemble("sm_90", options=["-no-such-option"])
    assert ei.value.loc.file == __file__
    # ptxas acknowledges the option in its info log only when it received it.
    assert "of maxrregcount option" in m.assemble(
        "sm_90", options=["-maxrregcount=32"], warn=False).report.log


def test_report_has_constant_banks_from_the_cubin():
    k = Kernel("k")
    a = k.param(t.u64, "a")
    b = k.param(t.u64, "b")
    k.add(k.ld_param(a), k.ld_param(b))
    k.ret()
    small = Kernel("small")
    small.ret()
    m = Module([k, small])
    m.const_array(t.u32, 64, name="table", init=range(64))   # .visible: kept though unused
    rep = m.assemble("sm_90").report
    assert rep.const == {3: 256}   # the module's .const table: 64 x 4 bytes, in bank 3
    # bank 0: the driver's reserved words then the parameters (two more u64 for k)
    assert rep["k"].const[0] - rep["small"].const[0] == 16
