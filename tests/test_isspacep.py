"""`isspacep.space p, a;` (PTX ISA §9.7.9.19): `k.isspacep`, its forms and requirements, the
maximum-target rule of its 32-bit form (`types.addr32`: refused for sm_90 and later, never
handed to nvJitLink, which may crash on it), its refusals, and the front end's reading."""

from __future__ import annotations

import inspect
import os

import pytest

from ptxdsl import Kernel, Module, VersionError, t
from ptxdsl import module as module_py
from ptxdsl.errors import OperandError
from ptxdsl.frontend import parse_ptx
from ptxdsl.frontend.items import Raw
from ptxdsl.instructions.move import FORMS, Isspacep, SpaceWindow
from ptxdsl.types import ScalarType, StateSpace, Target

HERE = os.path.abspath(__file__)
WINDOWS = [w.value for w in SpaceWindow]
WIDE = (t.u64, t.b64, t.s64)
NARROW = (t.u32, t.b32, t.s32)
ROWS = {form: need for form, need, _ in FORMS}


def _line() -> int:
    frame = inspect.currentframe()
    assert frame is not None and frame.f_back is not None
    return frame.f_back.f_lineno


def _row(space: str, bits: int):
    """The forms-table row of `space` with a `bits`-bit address."""
    tail = " p, a" if bits == 64 else " p, a32"
    (need,) = [n for f, n in ROWS.items() if f.endswith(tail) and (
        f == f"isspacep.{space}{tail}" or f.startswith("isspacep.{") and
        space in f[10:f.index("}")].split(","))]
    return need


def _kernel(space: str, ty: ScalarType) -> Kernel:
    """A kernel that stores whether a loaded (not constant) address is in `space`."""
    k = Kernel("k")
    out = k.ld_param(k.param_ptr("out"))
    a = k.ld_param(k.param(ty, "a"))
    k.st(out, k.selp(1, 0, k.isspacep(space, a), type=t.u32))
    return k


# -- every form: its requirement, and ptxas's verdict ------------------------------------------
@pytest.mark.parametrize("ty", WIDE, ids=str)
@pytest.mark.parametrize("space", WINDOWS)
def test_every_64_bit_form_assembles_for_sm_90a(space, ty):
    k = _kernel(space, ty)
    (insn,) = [s.insn for s in k.statements() if isinstance(s.insn, Isspacep)]
    assert insn.opcode() == f"isspacep.{space}"
    need = _row(space, 64)
    assert insn.requires == need and need.ceiling is None
    m = Module([k])
    assert (m.version, m.target) == (need.version, need.min_target())
    assert m.assemble("sm_90a").arch == "sm_90a"
    if need.sm < 90:
        assert m.assemble("sm_80", warn=False).arch == "sm_80"


@pytest.mark.parametrize("ty", NARROW, ids=str)
@pytest.mark.parametrize("space", [w for w in WINDOWS if w != "shared::cluster"])
def test_every_32_bit_form_assembles_up_to_sm_89_and_is_refused_past_it(space, ty, monkeypatch):
    k = _kernel(space, ty)
    (insn,) = [s.insn for s in k.statements() if isinstance(s.insn, Isspacep)]
    need = _row(space, 32)
    assert insn.requires == need and need.ceiling is not None
    assert need.describe() == f"PTX ISA {need.version}, sm_75 to sm_89"
    m = Module([k])
    for arch in ("sm_80", "sm_89"):
        assert m.assemble(arch, warn=False).arch == arch
    # Refused by ptxdsl before nvJitLink sees it (which may kill the process).
    monkeypatch.setattr(module_py, "assemble_module", _never)
    for arch in ("sm_90a", "sm_100a"):
        with pytest.raises(OperandError, match=r"expected a 64-bit register \(\.u64, \.b64 or "
                           r"\.s64\) \(ptxas refuses 32-bit addresses on sm_90 and later") as e:
            m.assemble(arch)
        assert (e.value.instruction, e.value.operand, e.value.given) == (
            f"isspacep.{space}", "a", "a 32-bit register")
        assert os.path.abspath(e.value.loc.file) == HERE     # _kernel's isspacep line


def _never(*args, **kwargs):
    raise AssertionError("a 32-bit isspacep handed to nvJitLink for sm_90+")


def test_the_32_bit_form_is_refused_at_emit_by_its_line(monkeypatch):
    k = Kernel("k")
    a = k.mov(0, dst=k.reg(t.u32))
    k.isspacep("global", a)
    line = _line() - 1
    with pytest.raises(OperandError, match=r"isspacep\.global: operand 'a': expected a 64-bit "
                       r"register .* on sm_90a \(the module is pinned to \.target sm_90a") as e:
        Module([k], target="sm_90a").emit()
    assert os.path.abspath(e.value.loc.file) == HERE and e.value.loc.line == line
    assert e.value.given == "a 32-bit register"
    m = Module([k])
    assert m.target == Target(75)
    monkeypatch.setattr(module_py, "assemble_module", _never)
    with pytest.raises(OperandError, match=r"on sm_90a \(the arch being built; the module's "
                       r"\.target is sm_75\)") as e:
        m.assemble("sm_90a")
    assert e.value.loc.line == line


@pytest.mark.parametrize(("space", "below"), [("shared::cta", "7.7"), ("param", "7.6"),
                                               ("param::entry", "8.2")])
def test_pinning_below_a_sub_space_version_is_refused(space, below):
    k = _kernel(space, t.u64)
    with pytest.raises(VersionError, match=rf"isspacep\.{space}"):
        Module([k], version=below, target="sm_75").emit()


def test_shared_cluster_needs_sm_90():
    with pytest.raises(VersionError, match=r"isspacep\.shared::cluster"):
        Module([_kernel("shared::cluster", t.u64)], target="sm_89").emit()


def test_the_space_by_member_or_name():
    k = Kernel("k")
    a = k.mov(0, dst=k.reg(t.u64))
    for space in (SpaceWindow.param_entry, StateSpace.shared, StateSpace.global_, "global_",
                  ".const", "shared_cluster"):
        k.isspacep(space, a)
    assert [s.insn.opcode() for s in k.statements() if isinstance(s.insn, Isspacep)] == [
        "isspacep.param::entry", "isspacep.shared", "isspacep.global", "isspacep.global",
        "isspacep.const", "isspacep.shared::cluster"]


def test_goldens(golden):
    """One golden per requirement, at its inferred (minimum) version and target."""
    for name, spaces, types in (
            ("isspacep", ("const", "global", "local", "shared"), WIDE + NARROW),
            ("isspacep_cta", ("shared::cta",), (t.u64, t.u32)),
            ("isspacep_param", ("param",), (t.u64, t.u32)),
            ("isspacep_param_entry", ("param::entry",), (t.u64, t.u32)),
            ("isspacep_cluster", ("shared::cluster",), (t.u64,))):
        k = Kernel(name)
        out = k.ld_param(k.param_ptr("out"))
        for i, ty in enumerate(types):
            a = k.ld_param(k.param(ty, f"a{i}"))
            for space in spaces:
                k.st(out, k.selp(1, 0, k.isspacep(space, a), type=t.u32))
        golden(Module([k]), f"core/{name}")


# -- refusals: one per class of mistake -------------------------------------------------------
def _refused(make, operand: str, expected: str, given: str) -> None:
    k = Kernel("k")
    with pytest.raises(OperandError, match=expected) as e:
        make(k)
    assert (e.value.operand, e.value.given) == (operand, given)
    assert e.value.instruction.startswith("isspacep")
    # the user's line: the lambda's, where k.isspacep is called
    assert os.path.abspath(e.value.loc.file) == HERE
    assert e.value.loc.line == make.__code__.co_firstlineno
    assert list(k.statements()) == []            # a refused call leaves nothing behind


def test_an_unknown_space_is_refused():
    _refused(lambda k: k.isspacep("texture", k.reg(t.u64)), "space",
             "one of 'const', 'global', 'local', 'shared'", "str 'texture'")
    _refused(lambda k: k.isspacep(StateSpace.generic, k.reg(t.u64)), "space",
             "one of 'const'", "StateSpace.generic")
    _refused(lambda k: k.isspacep(StateSpace.reg, k.reg(t.u64)), "space",
             "one of 'const'", "StateSpace.reg")


def test_a_float_register_is_refused():
    _refused(lambda k: k.isspacep("global", k.reg(t.f64)), "a",
             r"a \.u32/\.u64 register", "register %fd1 of type .f64")


def test_a_predicate_or_16_bit_register_is_refused():
    _refused(lambda k: k.isspacep("global", k.reg(t.pred)), "a",
             r"a \.u32/\.u64 register", "register %p1 of type .pred")
    _refused(lambda k: k.isspacep("local", k.reg(t.u16)), "a",
             r"a \.u32/\.u64 register", "register %rs1 of type .u16")


def test_an_immediate_or_symbol_is_refused():
    _refused(lambda k: k.isspacep("global", 0), "a", "a constant address has nothing to ask",
             "int 0")
    _refused(lambda k: k.isspacep("shared", k.shared_array(t.b8, 16, name="smem")), "a",
             "k.generic_addr", "symbol smem in .shared")


def test_a_32_bit_cluster_window_is_refused():
    _refused(lambda k: k.isspacep("shared::cluster", k.reg(t.u32)), "a",
             "::cluster needs sm_90, where ptxas refuses 32-bit addresses",
             "register %r1 of type .u32")


def test_the_result_must_be_a_predicate():
    k = Kernel("k")
    with pytest.raises(OperandError, match=r"isspacep\.global: operand 'p': expected a "
                       r"register compatible with \.pred"):
        Isspacep(SpaceWindow.global_, k.reg(t.u32), k.reg(t.u64))


# -- the front end ------------------------------------------------------------------------------
def test_emit_parse_emit_gives_the_same_text():
    k = Kernel("k")
    out = k.ld_param(k.param_ptr("out"))
    for ty in (t.u64, t.b64, t.s64):
        a = k.ld_param(k.param(ty, f"a_{ty}"))
        for space in WINDOWS:
            k.st(out, k.selp(1, 0, k.isspacep(space, a), type=t.u32))
    text = Module([k]).emit()
    parsed = parse_ptx(text)
    body = parsed.function("k").body
    assert sum(isinstance(getattr(s, "insn", None), Isspacep) for s in body) == 3 * len(WINDOWS)
    def lines(ptx: str) -> list[str]:   # blank lines and the banner comment aside
        return [x for x in ptx.splitlines() if x.strip() and not x.startswith("//")]
    assert lines(parsed.emit()) == lines(text)


PTX = """.version 8.0
.target {target}
.address_size 64
.visible .entry k()
{{
\t.reg .pred %p<2>;
\t.reg .b32 %r<2>;
\tmov.u32 %r1, %tid.x;
\t{insn};
\tret;
}}
"""


def test_parsed_32_bit_text_for_sm_90_is_named():
    text = PTX.format(target="sm_90a", insn="isspacep.global %p1, %r1")
    assert parse_ptx(text, file="x.ptx").version_problems() == [
        "x.ptx:9: isspacep.global: operand 'a': expected a 64-bit register (.u64, .b64 or "
        ".s64) (ptxas refuses 32-bit addresses on sm_90 and later: '32-Bit ABI ... is not "
        "supported') on the file's .target sm_90a, got a 32-bit register"]
    ok = PTX.format(target="sm_80", insn="isspacep.global %p1, %r1")
    assert parse_ptx(ok, file="y.ptx").version_problems() == []


def test_parsed_text_ptxdsl_refuses_stays_raw():
    for insn in ("isspacep.global %p1, 0", "isspacep.texture %p1, %r1"):
        body = parse_ptx(PTX.format(target="sm_80", insn=insn)).function("k").body
        (st,) = [s for s in body if "isspacep" in s.render()]
        assert isinstance(st.insn, Raw), st
