"""The maximum-target rule (`types.Ceiling`, `types.addr32`): ptxas takes a 32-bit cvta up to
sm_89 and refuses it from sm_90 on ("32-Bit ABI (--machine 32 or 32-Bit addressing) is not
supported on sm_90 or higher architectures"), a fatal error with no line. ptxdsl says so at
emit, at assemble and when it reads such PTX text, naming the instruction, the operand and
the user's line."""

from __future__ import annotations

import inspect
import os

import pytest

from ptxdsl import Kernel, Module, ptx, t
from ptxdsl.errors import AssemblyError, OperandError
from ptxdsl.frontend import parse_ptx
from ptxdsl.instructions.move import Cvta
from ptxdsl.toolchain import assemble
from ptxdsl.types import ADDR32_LAST_SM, Target, req

HERE = os.path.abspath(__file__)
SPACES = ("global", "shared", "local", "const", "param")
RULE = (r"operand 'size': expected \.u64 \(ptxas refuses 32-bit addresses on sm_90 and "
        r"later: '32-Bit ABI \.\.\. is not supported'\) on ")


def _kernel(space: str = "shared", to: bool = False) -> tuple[Kernel, int]:
    k = Kernel("k")
    a = k.mov(0, dst=k.reg(t.u32))
    k.cvta(a, space, to=to)
    return k, _caller_line() - 1          # the cvta's line, which the error must name


def _caller_line() -> int:
    frame = inspect.currentframe()
    assert frame is not None and frame.f_back is not None
    return frame.f_back.f_lineno


def _refused(call, words: str, line: int) -> OperandError:
    with pytest.raises(OperandError, match=words) as e:
        call()
    assert os.path.abspath(e.value.loc.file) == HERE and e.value.loc.line == line, e.value.loc
    assert e.value.operand == "size" and e.value.given == ".u32"
    return e.value


# -- what ptxas does: the table's row, measured -----------------------------------------------
PTX = """.version {version}
.target {target}
.address_size 64
.visible .entry k()
{{
\t.reg .b32 %r<3>;
\tmov.u32 %r1, 0;
\t{insn} %r2, %r1;
\tret;
}}
"""


@pytest.mark.parametrize("to", [False, True])
@pytest.mark.parametrize("space", SPACES)
def test_ptxas_takes_a_32_bit_cvta_to_sm_89_only(space, to):
    insn = f"cvta{'.to' if to else ''}.{space}.u32"
    assemble(PTX.format(version="8.0", target="sm_89", insn=insn), "sm_89", warn=False)
    with pytest.raises(AssemblyError, match="32-Bit ABI"):
        assemble(PTX.format(version="8.0", target="sm_90a", insn=insn), "sm_90a")
    assert ADDR32_LAST_SM == 89


# -- the builder ---------------------------------------------------------------------------------
@pytest.mark.parametrize("to", [False, True])
@pytest.mark.parametrize("space", SPACES)
def test_a_module_pinned_to_sm_90_refuses_a_32_bit_cvta(space, to):
    k, line = _kernel(space, to)
    err = _refused(lambda: Module([k], target="sm_90a").emit(), RULE + r"sm_90a \(the module "
                   r"is pinned to \.target sm_90a", line)
    assert err.instruction == f"cvta{'.to' if to else ''}.{space}.u32"


def test_a_target_inferred_from_another_form_refuses_it():
    k, line = _kernel()
    ptx.fence_proxy_async(k, "shared::cta")              # sm_90+
    _refused(lambda: Module([k]).emit(), RULE + r"sm_90 \(the module's \.target sm_90 was "
             r"inferred from fence\.proxy\.async", line)


def test_assembling_for_sm_90_refuses_it_before_ptxas():
    k, line = _kernel("global")
    m = Module([k])
    assert m.target == Target(75)
    _refused(lambda: m.assemble("sm_90a"), RULE + r"sm_90a \(the arch being built; the "
             r"module's \.target is sm_75\)", line)
    _refused(lambda: m.assemble("sm_100a"), RULE + "sm_100a", line)


def test_the_sm_80_form_still_emits_and_assembles():
    k, _ = _kernel()
    m = Module([k], target="sm_80")
    assert "\tcvta.shared.u32 %r2, %r1;" in m.emit()
    assert m.assemble("sm_80", warn=False).arch == "sm_80"
    assert m.assemble("sm_89", warn=False).arch == "sm_89"
    k64 = Kernel("k64")                                # the .u64 form has no ceiling
    k64.cvta(k64.mov(0, dst=k64.reg(t.u64)), "shared")
    assert "cvta.shared.u64" in Module([k64], target="sm_90a").emit()


def test_the_requirement_says_its_ceiling():
    k, _ = _kernel()
    (need,) = [st.insn.requires for st in k.statements() if isinstance(st.insn, Cvta)]
    assert need.describe() == "PTX ISA 6.3, sm_75 to sm_89"
    assert need.satisfied_by(Target(89)) and not need.satisfied_by(Target(90))
    merged = req("7.0", 80).merge(need)
    assert merged.ceiling == need.ceiling and merged.describe() == "PTX ISA 7.0, sm_80 to sm_89"


# -- the front end: PTX text read back -----------------------------------------------------------
def test_parsed_text_for_sm_90_names_the_32_bit_cvta():
    text = PTX.format(version="8.0", target="sm_90a", insn="cvta.to.global.u32")
    assert parse_ptx(text, file="x.ptx").version_problems() == [
        "x.ptx:8: cvta.to.global.u32: operand 'size': expected .u64 (ptxas refuses 32-bit "
        "addresses on sm_90 and later: '32-Bit ABI ... is not supported') on the file's "
        ".target sm_90a, got .u32"]
    ok = PTX.format(version="8.0", target="sm_80", insn="cvta.to.global.u32")
    assert parse_ptx(ok, file="y.ptx").version_problems() == []
