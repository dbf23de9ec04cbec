"""`python -m ptxdsl lift`: PTX into a Python program that rebuilds it through ptxdsl's
classes (issue 30, "Round trip"), and the construction API the program calls
(`ptxdsl.frontend.build`)."""

from __future__ import annotations

import ast
import re
import runpy
import shutil
import subprocess
import sys
from pathlib import Path

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ptxdsl.__main__ import main, modules_in, sample_files
from ptxdsl.errors import BuildError, OperandError
from ptxdsl.frontend import Directive, ParsedModule, lift, parse_ptx
from ptxdsl.frontend.build import FunctionBuilder, names_in
from ptxdsl.frontend.compare import first_difference
from ptxdsl.frontend.lift import lift_module, lift_ptx
from ptxdsl.frontend.readers import READERS
from ptxdsl.instructions.arith import Binary
from ptxdsl.instructions.base import Instruction, check_dst
from ptxdsl.instructions.control import Bra
from ptxdsl.instructions.memory import Ld
from ptxdsl.operands import Imm, Label, NegPred, Reg, Symbol
from ptxdsl.statements import Statement
from ptxdsl.types import ScalarType, StateSpace
from tests.child_env import child_env

ROOT = Path(__file__).resolve().parent.parent
GOLDENS = sorted((ROOT / "tests" / "golden").rglob("*.ptx"))


def _run(source: str, path: Path) -> ParsedModule:
    """Write the program and run it as a user would import it: build_module()."""
    path.write_text(source)
    return runpy.run_path(str(path), run_name="lifted")["build_module"]()


def _assert_rebuilds(original: ParsedModule, rebuilt: ParsedModule) -> None:
    assert rebuilt.emit() == original.emit()
    assert [(f.kind, f.name, f.prototype) for f in rebuilt.functions] == \
        [(f.kind, f.name, f.prototype) for f in original.functions]
    for a, b in zip(original.functions, rebuilt.functions, strict=True):
        assert first_difference(a.body, b.body) is None, a.name


def test_goldens_are_many():
    assert len(GOLDENS) >= 134


@pytest.mark.parametrize("path", GOLDENS, ids=[str(p.relative_to(ROOT / "tests" / "golden"))
                                               for p in GOLDENS])
def test_every_golden_lifts_into_a_program_that_rebuilds_it(path, tmp_path):
    text = path.read_text()
    lifted = lift_ptx(text, file=str(path))
    _assert_rebuilds(parse_ptx(text, file=str(path)), _run(lifted.source, tmp_path / "g.py"))


# What compilers write beyond ptxdsl's goldens: module variables with initialisers, an
# extern prototype, a .func with a return value and its call, .file/.loc, register names
# without '%', sibling scopes repeating a label, shadowed registers, forward branches.
MIXED = """\
.version 8.5
.target sm_90a
.address_size 64
.file 1 "/src/kernel.cu"
.extern .shared .align 16 .b8 dyn_smem[];
.global .align 4 .u32 counter = 7;
.extern .func (.param .b32 func_retval0) helper
(
\t.param .b32 helper_param_0
)
;
.visible .func (.param .b32 func_retval0) twice(.param .b32 twice_param_0)
{
\t.reg .b32 %r<3>;
\tld.param.b32 %r1, [twice_param_0];
\tadd.s32 %r2, %r1, %r1;
\tst.param.b32 [func_retval0], %r2;
\tret;
}
.visible .entry mixed(
\t.param .u64 .ptr .global .align 4 mixed_param_0,
\t.param .u32 mixed_param_1
)
.maxntid 128, 1, 1
{
\t.reg .pred %p<3>;
\t.reg .b32 %r<20>;
\t.reg .b64 %rd<6>;
\t.reg .f32 %f<4>;
\t.reg .pred P1;
\t.loc 1 10 3
\tld.param.u64 %rd1, [mixed_param_0];
\tld.param.u32 %r1, [mixed_param_1];
\tmov.u32 %r2, %tid.x;
\tsetp.ge.u32 %p1, %r2, %r1;
\t@%p1 bra $L__BB0_3;
\tmad.lo.s32 %r3, %r2, 4, %r1;
\tmul.wide.u32 %rd2, %r3, 4;
\tsub.s32 %r4, %r3, -16;
\tand.b32 %r5, %r4, 0xFF;
\tmax.f32 %f1, %f2, 0f7FC00000;
\t@!%p2 neg.f32 %f3, %f1;
\t{
\t.reg .b32 %r<2>;
\tsetp.ne.s32 P1, %r1, 0;
\t@!P1 bra LAB_WAIT;
\tadd.s32 %r1, %r1, 1;
LAB_WAIT:
\t}
\t{
LAB_WAIT:
\t@P1 bra LAB_WAIT;
\t}
\t{ // callseq 0, 0
\t.param .b32 param0;
\tst.param.b32 [param0], %r5;
\t.param .b32 retval0;
\tcall.uni (retval0), twice, (param0);
\tld.param.b32 %r7, [retval0];
\t}
\tst.global.v2.u32 [%rd1+8], {%r7, %r5};
$L__BB0_3:
\tret;
}
"""


def test_compiler_style_ptx_lifts_into_a_program_that_rebuilds_it(tmp_path):
    lifted = lift_ptx(MIXED, file="mixed.ptx")
    _assert_rebuilds(parse_ptx(MIXED, file="mixed.ptx"), _run(lifted.source, tmp_path / "m.py"))
    src = lifted.source
    assert src.startswith('# Lifted from "mixed.ptx" by `python -m ptxdsl lift`.')
    # Typed instructions by their classes: keywords, registers by name, guards, numbers.
    assert 'f.emit(Mad(type=ScalarType.s32, d=r("%r3"), a=r("%r2"), b=4, c=r("%r1"), ' \
           'mode="lo"))' in src
    assert 'f.emit(Unary(op="neg", type=ScalarType.f32, d=r("%f3"), a=r("%f1")), ' \
           'guard=NegPred(r("%p2")))' in src
    assert 'float("nan")' in src
    # Scopes as open/close, a forward label declared where its scope opens.
    assert 'f.open()\n    f.labels("LAB_WAIT")\n' in src
    assert 'f.labels("$L__BB0_3")' in src
    # Readers of more families type more (arith's read 8 here).
    assert lifted.typed >= 8
    assert "    m.directive('.file 1 \"/src/kernel.cu\"')\n" in src


def test_editing_a_field_of_the_lifted_program_is_checked_by_the_class(tmp_path):
    lifted = lift_ptx(MIXED, file="mixed.ptx")
    call = 'Binary(op="sub", type=ScalarType.s32, d=r("%r4"), a=r("%r3"), b=-16)'
    assert call in lifted.source
    # A valid edit rebuilds: the class takes it, the PTX says it.
    edited = lifted.source.replace(call, call.replace('op="sub"', 'op="min"'))
    assert "\tmin.s32 %r4, %r3, -16;" in _run(edited, tmp_path / "ok.py").emit()
    # An invalid one (a 64-bit register where sub.s32 writes 32 bits) is the class's error,
    # at the program's line.
    bad = lifted.source.replace(call, call.replace('d=r("%r4")', 'd=r("%rd4")'))
    path = tmp_path / "bad.py"
    with pytest.raises(OperandError, match=r"sub.s32: operand 'd': expected a register "
                       r"compatible with .s32, got register %rd4 of type .b64") as e:
        _run(bad, path)
    line = next(i for i, ln in enumerate(bad.splitlines(), 1) if 'd=r("%rd4")' in ln)
    assert (e.value.loc.file, e.value.loc.line) == (str(path), line)


def test_samples_read_with_every_statement_typed_lift_and_rebuild(tmp_path):
    """Readers for more families will type more statements: the lifter spells any class by
    its attrs fields. Each sample's PTX parsed, with every instruction replaced by the typed
    one the builder made (what readers for all families would give), lifts into calls of
    those classes that rebuild the same statements."""
    classes: set[str] = set()
    for path in sample_files():
        for name, mod in modules_in(path).items():
            parsed = parse_ptx(mod.emit(), file=f"{path.stem}.{name}.ptx")
            count = 0
            for k in mod.kernels:
                body = parsed.function(k.name).body
                at = [i for i, s in enumerate(body)
                      if type(s) is Statement and type(s.insn) is not Directive]
                built = [s for s in k.body if type(s) is Statement]
                assert len(at) == len(built)
                for i, made in zip(at, built, strict=True):
                    body[i] = Statement(made.insn, made.guard, body[i].loc)
                    classes.add(type(made.insn).__name__)
                count += len(built)
            lifted = lift_module(parsed)
            assert (lifted.typed, lifted.as_text) == (count, ())
            _assert_rebuilds(parsed, _run(lifted.source, tmp_path / f"{path.stem}.py"))
    assert len(classes) >= 40   # wgmma, TMA, tensormap, mbarrier, memory, control, ...


@attrs.frozen
class Halves(Instruction):
    """A class that does not take its own fields back: its constructor wants `b` as an
    int and keeps it as a 1-tuple."""

    d: Reg
    b: object

    def __attrs_post_init__(self):
        check_dst(self, "d", self.d, ScalarType.u32)
        if not isinstance(self.b, int):
            raise OperandError("halves.u32", "b", "an int", repr(self.b))
        self._set("b", (self.b,))

    def opcode(self) -> str:
        return "halves.u32"

    def operands(self):
        return (self.d, Imm(self.b[0], ScalarType.u32))


def test_an_instruction_whose_class_refuses_its_own_fields_is_lifted_as_text(monkeypatch,
                                                                              tmp_path):
    monkeypatch.setitem(READERS, "halves", [lambda parts, ops: Halves(*ops)])
    assert MIXED.endswith("\tret;\n}\n")
    text = MIXED[:-len("\tret;\n}\n")] + "\thalves.u32 %r9, 6;\n\tret;\n}\n"
    parsed = parse_ptx(text)
    assert [type(s.insn) for s in parsed.function("mixed").statements()][-2] is Halves
    lifted = lift_ptx(text)
    assert [name for name, _ in lifted.as_text] == ["Halves"]
    assert 'f.ptx("halves.u32 %r9, 6;")  # Halves kept as text: OperandError' in lifted.source
    # Read back by the same reader: the statement is typed again, equal to the parsed one.
    _assert_rebuilds(parsed, _run(lifted.source, tmp_path / "h.py"))


def test_a_long_body_is_built_in_parts(monkeypatch, tmp_path):
    """Python finds a call's line by scanning its function's line table: a 50,000-line
    kernel in one function would build in quadratic time, so long bodies come in parts."""
    monkeypatch.setattr(lift, "PART", 10)
    lifted = lift_ptx(MIXED, file="mixed.ptx")
    assert "    f = m.entry(" in lifted.source and "\n    _mixed_1(f)\n    _mixed_2(f)\n" \
        in lifted.source
    assert '\n\ndef _mixed_2(f: FunctionBuilder) -> None:\n    """.entry mixed: lines 11 to ' \
        '20 of its body."""\n' in lifted.source
    _assert_rebuilds(parse_ptx(MIXED), _run(lifted.source, tmp_path / "p.py"))


@pytest.mark.parametrize("part", [1000, 10])
def test_lifted_program_is_ruff_clean(monkeypatch, tmp_path, part):
    ruff = shutil.which("ruff") or str(Path(sys.executable).with_name("ruff"))
    if not Path(ruff).exists():
        pytest.skip("ruff is not installed")
    monkeypatch.setattr(lift, "PART", part)
    path = tmp_path / "lifted.py"
    path.write_text(lift_ptx(MIXED, file="mixed.ptx").source)
    done = subprocess.run([ruff, "check", "--isolated", "--select", "E,F,W,I,B,UP", str(path)],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stdout


# -- the command ---------------------------------------------------------------------------------

def test_cli_lift_writes_a_program_that_prints_the_ptx(tmp_path, capsys):
    ptx = tmp_path / "mixed.ptx"
    ptx.write_text(MIXED)
    out = tmp_path / "mixed.py"
    assert main(["lift", str(ptx), "-o", str(out)]) == 0
    assert re.search(rf"wrote {re.escape(str(out))} \(\d+ instructions built by their "
                     r"classes\)", capsys.readouterr().out)
    done = subprocess.run([sys.executable, str(out)], capture_output=True, text=True,
                          env=child_env({"PATH": ""}))
    assert done.returncode == 0, done.stderr
    assert done.stdout == parse_ptx(MIXED).emit()
    # Without -o the program goes to stdout.
    assert main(["lift", str(ptx)]) == 0
    assert capsys.readouterr().out == out.read_text()


@pytest.mark.parametrize("case", ["missing", "folder", "parse", "same", "output folder"])
def test_cli_lift_refuses_what_it_cannot_read_with_status_2(tmp_path, capsys, case):
    ptx = tmp_path / "k.ptx"
    ptx.write_text(MIXED.replace("\tmov.u32 %r2, %tid.x;", "\tmov.u32 %r2, %q9;"))
    args, want = {
        "missing": ([str(tmp_path / "nope.ptx")], f"{tmp_path / 'nope.ptx'}: no such file"),
        "folder": ([str(tmp_path)], f"{tmp_path}: not a file"),
        "parse": ([str(ptx)], f"{ptx}:34: register %q9 is not declared"),
        "same": ([str(ptx), "-o", str(ptx)], "is the input file itself"),
        "output folder": ([str(ptx), "-o", str(tmp_path)], f"'{tmp_path}' is a folder"),
    }[case]
    if case in ("same", "output folder"):
        ptx.write_text(MIXED)
    assert main(["lift", *args]) == 2
    err = capsys.readouterr().err
    assert err.startswith("ptxdsl lift: ") and want in err and err.count("ptxdsl lift") == 1
    if case == "same":
        assert ptx.read_text() == MIXED


# -- the construction API ------------------------------------------------------------------------

def _module():
    m = ParsedModule(file="k.ptx")
    m.directive(".version 8.5\n.target sm_90a\n.address_size 64")
    f = m.entry(".visible .entry k(.param .u64 k_param_0)")
    f.declare(".reg .b32 %r<4>;")
    f.declare(".reg .pred %p<2>;")
    return m, f


def test_building_a_function_by_hand():
    m, f = _module()
    r = f.r
    f.declare(".shared .align 4 .b32 buf[4];")
    f.emit(Ld(StateSpace.shared, ScalarType.b32, r("%r3"), r("buf")))
    f.labels("done")
    f.emit(Bra(r("done")), guard=NegPred(r("%p1")))
    st = f.ptx("@%p1 bra done;")
    assert r("done") in names_in(st.insn)   # the label declared above, not text
    f.emit(Binary(op="add", type=ScalarType.u32, d=r("%r1"), a=r("%r2"), b=5), guard=r("%p1"))
    f.label("done")
    f.open()
    f.declare(".reg .b32 %r<2>;")           # shadows the function's %r0, %r1
    f.ptx("mov.b32 %r1, 3;")
    f.close()
    f.ptx("ret;")
    assert m.emit().endswith("{\n\t.reg .b32 %r<4>;\n\t.reg .pred %p<2>;\n"
                              "\t.shared .align 4 .b32 buf[4];\n\tld.shared.b32 %r3, [buf];\n"
                              "\t@!%p1 bra done;\n\t@%p1 bra done;\n"
                              "\t@%p1 add.u32 %r1, %r2, 5;\ndone:\n\t{\n\t\t.reg .b32 %r<2>;\n"
                              "\t\tmov.b32 %r1, 3;\n\t}\n\tret;\n}\n")
    assert m.version == "8.5" and m.target == "sm_90a"
    loc = st.loc
    assert loc.file == __file__ and loc.function == "k"


def _here() -> int:
    return sys._getframe(1).f_lineno + 1


MISTAKES = {
    "undeclared name": (lambda m, f: f.r("%r9"), r"f.r: register %r9 is not declared"),
    "unknown name": (lambda m, f: f.r("nowhere"), r"'nowhere' names nothing declared so far"),
    "undeclared register in a typed instruction": (
        lambda m, f: f.emit(Binary(op="add", type=ScalarType.u32, d=Reg(ScalarType.u32, "zz"),
                                   a=f.r("%r1"), b=1)),
        r"f.emit: add.u32: register %zz is not declared in function k"),
    "register of another width": (
        lambda m, f: f.emit(Binary(op="add", type=ScalarType.u64, d=Reg(ScalarType.u64, "r1"),
                                   a=Reg(ScalarType.u64, "r2"), b=1)),
        r"register %r1 is declared .b32, the instruction uses it as .u64"),
    "guard not a predicate": (
        lambda m, f: f.emit(Binary(op="add", type=ScalarType.u32, d=f.r("%r1"), a=f.r("%r1"),
                                   b=1), guard=f.r("%r2")),
        r"f.emit: operand 'guard': expected a .pred register"),
    "label of no scope here": (
        lambda m, f: (f.open(), f.label("inner"), f.close(), f.emit(Bra(Label("inner")))),
        r"f.emit: bra: label inner is not the one declared under that name at this point"),
    "undeclared variable": (
        lambda m, f: f.emit(Ld(StateSpace.shared, ScalarType.b32, f.r("%r1"),
                               Symbol("buf", StateSpace.shared, ScalarType.b32, 4))),
        r"f.emit: ld.shared.b32: variable buf is not the one declared under that name"),
    "text to emit": (lambda m, f: f.emit("ret;"), r"f.emit: expected a ptxdsl instruction"),
    "two statements": (lambda m, f: f.ptx("ret; ret;"),
                       r"f.ptx: expected one statement ending in ';', got 2 statements"),
    "a label as a statement": (lambda m, f: f.ptx("L1:"), r"got a label"),
    "directive to ptx": (lambda m, f: f.ptx(".reg .b32 x;"), r"goes through f.declare"),
    "instruction to declare": (lambda m, f: f.declare("ret;"),
                               r"f.declare: expected a directive"),
    "not text": (lambda m, f: f.ptx(5), r"f.ptx: expected the PTX text as a str, got int 5"),
    "parse error": (lambda m, f: f.ptx("add.u32 %r1, %r1, %q1;"),
                    r"f.ptx: register %q1 is not declared"),
    "close without open": (lambda m, f: f.close(), r"f.close: function k has no open scope"),
    "label placed twice": (lambda m, f: (f.label("a"), f.label("a")),
                           r"f.label: label a is already placed in this scope"),
    "label never placed in a scope": (lambda m, f: (f.open(), f.labels("a"), f.close()),
                                      r"f.close: function k: label\(s\) a declared but never "
                                      r"placed"),
    "a body in the header": (lambda m, f: m.entry(".entry j() { ret; }"),
                             r"m.entry: expected a function header without its body"),
    "a .func for m.entry": (lambda m, f: m.entry(".func j()"),
                            r"m.entry: expected one .entry header"),
}


@pytest.mark.parametrize("case", sorted(MISTAKES))
def test_builder_mistakes_are_refused_at_the_callers_line(case):
    m, f = _module()
    call, words = MISTAKES[case]
    with pytest.raises(BuildError, match=words) as e:
        call(m, f)
    assert e.value.loc.file == __file__


def test_lift_module_takes_a_parsed_module():
    with pytest.raises(BuildError, match=r"lift_module: expected a ParsedModule \(parse_ptx's\), "
                       r"got str"):
        lift_module(MIXED)


@pytest.mark.parametrize("case", ["open scope", "label declared"])
def test_an_incomplete_function_does_not_emit(case):
    m, f = _module()
    if case == "open scope":
        f.open()
        words = r"function k: a scope opened with f.open\(\) is not closed"
    else:
        f.labels("later")
        words = r"label\(s\) later declared but never placed"
    with pytest.raises(BuildError, match=words) as e:
        line = _here()
        m.emit()
    assert (e.value.loc.file, e.value.loc.line) == (__file__, line)


def test_a_parsed_module_can_be_extended():
    m = parse_ptx(MIXED, file="mixed.ptx")
    f = m.entry(".visible .entry extra(.param .u32 extra_param_0)")
    f.declare(".reg .b32 %r<2>;")
    f.ptx("ld.global.u32 %r1, [counter];")      # the parsed module's variable
    f.ptx("ret;")
    assert m.emit().endswith(".visible .entry extra(.param .u32 extra_param_0)\n{\n"
                             "\t.reg .b32 %r<2>;\n\tld.global.u32 %r1, [counter];\n\tret;\n}\n")
    load = m.functions[-1].body[1].insn
    assert any(x is m.variables[1] for x in names_in(load))


def test_loc_gives_the_statements_after_it_their_source_line():
    m = ParsedModule(file="k.ptx")
    m.directive('.version 8.5\n.target sm_90a\n.address_size 64\n.file 1 "/src/k.cu"')
    f = m.entry(".visible .entry k()")
    f.declare(".loc 1 42 7")                 # a line of its own, without ';'
    st = f.ptx("ret;")
    assert st.loc.caller == ("/src/k.cu", 42, ".loc", None)
    assert st.loc.describe().endswith("(source /src/k.cu:42)")
    assert m.emit().endswith("{\n\t.loc 1 42 7\n\tret;\n}\n")


@pytest.mark.parametrize("case", ["differs", "fails"])
def test_a_program_that_would_not_rebuild_the_ptx_is_never_written(monkeypatch, tmp_path,
                                                                   capsys, case):
    """The lifter runs every call it writes and compares what it made with the parsed
    statement: a defect is its error (status 1), not a wrong program."""
    ptx = tmp_path / "mixed.ptx"
    ptx.write_text(MIXED)
    real = FunctionBuilder.declare

    def declare(self, text):
        if text != ".reg .f32 %f<4>;":
            return real(self, text)
        if case == "fails":
            raise BuildError("no")
        return real(self, ".reg .f32 %f<5>;")

    monkeypatch.setattr(FunctionBuilder, "declare", declare)
    out = tmp_path / "m.py"
    assert main(["lift", str(ptx), "-o", str(out)]) == 1
    err = capsys.readouterr().err
    line = MIXED.splitlines().index("\t.reg .f32 %f<4>;") + 1
    assert err.startswith(f"ptxdsl lift: {ptx}:{line}: the lifted call ")
    assert ("does not rebuild this statement: the PTX has '.reg .f32 %f<4>;', the call "
            "made '.reg .f32 %f<5>;'" if case == "differs" else "fails: no") in err
    assert not out.exists()


@given(st.text(alphabet=st.sampled_from('ab"\'\\\n\t\r\x00é%{};')))
@settings(max_examples=300, deadline=None)
def test_every_text_is_written_as_a_literal_of_itself(text):
    assert ast.literal_eval(lift._q(text)) == text
