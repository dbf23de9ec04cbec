"""The PTX front end: what it reads, what it refuses (with the file and line), and the round
trip: `parse_ptx(text).emit()` is the same program, token for token and cubin for cubin."""

from __future__ import annotations

from pathlib import Path

import pytest

from ptxdsl.errors import PtxdslError
from ptxdsl.frontend import (
    Directive,
    ParsedModule,
    PlainReg,
    PredPair,
    PtxParseError,
    Raw,
    ScopedLabel,
    parse_ptx,
)
from ptxdsl.frontend.lexer import Source, number, tokenize
from ptxdsl.operands import Addr, Label, NegPred, Reg, SpecialReg, Symbol
from ptxdsl.statements import LabelDef, Statement
from ptxdsl.testing import golden_files, same_program
from ptxdsl.types import ScalarType, StateSpace
from tests.conftest import GOLDEN_DIR

DATA = Path(__file__).parent / "data" / "frontend"
FEATURES = DATA / "features.ptx"
GOLDENS = golden_files(GOLDEN_DIR)


def tokens(text: str) -> list[str]:
    return [t[1] for t in tokenize(Source(text))]


def features() -> ParsedModule:
    return parse_ptx(FEATURES.read_text(), file=str(FEATURES))


@pytest.mark.parametrize("path", GOLDENS, ids=[str(p.relative_to(GOLDEN_DIR)) for p in GOLDENS])
def test_every_golden_round_trips(path):
    text = path.read_text()
    again = parse_ptx(text, file=str(path)).emit()
    assert tokens(again) == tokens(text)
    assert same_program(text, again) is None


def test_features_file_round_trips_to_the_same_cubin():
    text = FEATURES.read_text()
    again = features().emit()
    assert tokens(again) == tokens(text)
    assert same_program(text, again) is None
    assert tokens(parse_ptx(again).emit()) == tokens(again)   # a fixed point


def test_module_directives_functions_and_variables():
    m = features()
    assert (m.version, m.targets, m.address_size) == ("8.7", ("sm_90a",), 64)
    assert m.files == {1: "/src/features.cu", 2: "/src/helpers.cuh"}
    assert [(f.kind, f.name, f.prototype) for f in m.functions] == [
        ("func", "ext_helper", True), ("func", "add_one", False), ("func", "twice", False),
        ("entry", "features", False)]
    assert [f.name for f in m.kernels] == ["features"]
    assert m.function("add_one").linkage == (".weak",)
    assert m.function("twice").directives == {"noreturn": ()}
    names = {s.name: s for s in m.variables}
    assert names["table"].count == 16 and names["table"].space is StateSpace.global_
    assert names["weights"].space is StateSpace.const and names["weights"].align == 4
    assert names["dyn_smem"].count is None and names["dyn_smem"].space is StateSpace.shared


def test_entry_parameters_and_directives():
    k = features().function("features")
    ptr, tmap, n = k.params
    assert (ptr.kind, ptr.ptr_space, ptr.ptr_align, ptr.type) == (
        "pointer", StateSpace.global_, 16, ScalarType.u64)
    assert (tmap.kind, tmap.align, tmap.count) == ("tensormap", 64, 128)
    assert (n.kind, n.type) == ("scalar", ScalarType.u32)
    assert k.reqntid == (128, 1, 1) and k.directives["maxnreg"] == (128,)
    assert [s.name for s in k.shared] == ["dyn_smem", "bar", "tile"]


def _stmts(k, opcode_prefix: str) -> list[Statement]:
    return [s for s in k.statements() if s.insn.opcode().startswith(opcode_prefix)]


def test_operands_are_ptxdsl_operands():
    k = features().function("features")
    ld = _stmts(k, "ld.global.nc.v2")[0].insn
    addr = ld.operands()[-1]
    assert isinstance(addr, Addr) and addr.offset == -8 and addr.base.name == "rd2"
    const = _stmts(k, "ld.const")[0].insn.operands()[-1]
    assert isinstance(const.base, Symbol) and const.base.name == "weights" and const.offset == 4
    mov_tid = [s for s in _stmts(k, "mov.u32") if "%tid.x" in s.render()][0].insn
    assert any(isinstance(o, SpecialReg) and o.name == "tid.x" for o in mov_tid.operands())
    guard = [s for s in k.statements() if s.guard is not None]
    assert isinstance(guard[0].guard, Reg) and isinstance(guard[1].guard, NegPred)
    setp = _stmts(k, "setp.lt")[0].insn
    assert isinstance(setp.operands()[0], PredPair) if isinstance(setp, Raw) else True


@pytest.mark.parametrize("text,value", [
    ("0f3F800000", 1.0), ("0fBF800000", -1.0), ("0d3FF0000000000000", 1.0), ("0x10", 16),
    ("0X1fU", 31), ("017", 15), ("0b101", 5), ("42", 42), ("0", 0), ("1.5", 1.5),
    ("2e3", 2000.0)])
def test_every_immediate_spelling(text, value):
    assert number(text) == value


def test_nested_scopes_shadow_registers_and_labels():
    k = features().function("features")
    body = k.body
    labels = [x.label for x in body if type(x) is LabelDef]
    waits = [x for x in labels if x.render() == "LAB_WAIT"]
    assert len(waits) == 2 and waits[0] != waits[1]
    assert all(isinstance(x, ScopedLabel) for x in waits)
    # Each scope's branch goes to its own scope's label.
    bras = [s for s in k.statements() if s.insn.opcode().startswith("bra")
            and "LAB_WAIT" in s.render()]
    targets = [o for s in bras for o in s.insn.operands() if isinstance(o, Label)]
    assert targets == [waits[0], waits[1]]
    # The inner `%r1` is a new register; the outer one is still the parameter's value.
    movs = [s for s in _stmts(k, "mov.u32") if s.render().endswith("5;")]
    inner = movs[0].insn.operands()[0]
    outer = _stmts(k, "ld.param.u32")[0].insn.operands()[0]
    assert inner.name == outer.name == "r1" and inner is not outer
    p1 = [s for s in k.statements() if "P1, " in s.render()][0].insn.operands()[0]
    assert isinstance(p1, PlainReg) and p1.render() == "P1"


def test_directives_are_kept_in_place():
    k = features().function("features")
    kinds = [x.insn.kind for x in k.body if type(x) is Statement
             and type(x.insn) is Directive]
    assert kinds[:10] == [".reg"] * 7 + [".shared", ".shared", ".local"]
    assert ".pragma" in kinds and ".loc" in kinds and "{" in kinds and "}" in kinds


def test_loc_gives_the_source_line():
    k = features().function("features")
    ld = _stmts(k, "ld.param.u64")[0]
    assert ld.loc.file == str(FEATURES) and ld.loc.caller[:3] == ("/src/features.cu", 10, ".loc")
    assert "(source /src/features.cu:10)" in ld.loc.describe()
    setp = _stmts(k, "setp.eq")[0]
    assert setp.loc.caller[:2] == ("/src/helpers.cuh", 5)


def test_raw_statements_know_what_they_write():
    k = features().function("features")
    call = [s.insn for s in k.statements() if s.insn.opcode().startswith("call")][0]
    assert isinstance(call, Raw) and "retval0" in call.render()
    st = [s.insn for s in k.statements() if s.insn.opcode().startswith("st.local")][0]
    if isinstance(st, Raw):
        assert st.d == ()


# -- refusals: each class of mistake is an error naming the file and line -------------------

BAD = [
    ("unterminated comment", ".version 8.7\n/* never closed", "unterminated /\\* comment", 2),
    ("stray character", ".version 8.7\n.target sm_90a\n#", "unexpected character", 3),
    ("missing semicolon", ".version 8.7\n.entry k()\n{\n\tret\n}\n", "statement without ';'",
     4),
    ("unbalanced brace", ".version 8.7\n.entry k()\n{\n\t{\n\tret;\n}\n", "missing '}'", 4),
    ("closing a scope that is not open", ".entry k()\n{\n\tret;\n\t}\n}\n", "expected a "
     "directive", 5),
    ("undeclared register", ".entry k()\n{\n\tmov.u32 %r1, 0;\n}\n",
     "register %r1 is not declared", 3),
    ("register out of its range", ".entry k()\n{\n\t.reg .b32 %r<2>;\n\tmov.u32 %r2, 0;\n}\n",
     "register %r2 is not declared", 4),
    ("unknown register type", ".entry k()\n{\n\t.reg .b33 %r<2>;\n}\n",
     "unknown register type '.b33'", 3),
    ("guard is not a predicate", ".entry k()\n{\n\t.reg .b32 %r<2>;\n\t@%r1 ret;\n}\n",
     "a guard must be a .pred register", 4),
    ("unknown top-level word", ".version 8.7\nfoo;\n", "expected a directive, a variable", 2),
    ("unknown function directive", ".entry k()\n.bogus 1\n{\n\tret;\n}\n",
     "unknown function directive '.bogus'", 2),
    ("declaration without a type", ".shared .align 4 x[4];\n", "needs a state space, a type",
     1),
    ("unknown declaration type", ".global .b9 x;\n", "unknown type '.b9'", 1),
    ("truncated function", ".entry k(\n", "unexpected end of file|missing", 1),
]


@pytest.mark.parametrize("text,rule,line", [b[1:] for b in BAD], ids=[b[0] for b in BAD])
def test_bad_ptx_is_an_error_with_file_and_line(text, rule, line):
    with pytest.raises(PtxParseError, match=rule) as e:
        parse_ptx(text, file="bad.ptx")
    assert f"bad.ptx:{line}:" in str(e.value)
    assert isinstance(e.value, PtxdslError)


def test_parse_ptx_takes_text_only():
    with pytest.raises(PtxParseError, match="expected the PTX text as a str, got bytes"):
        parse_ptx(b".version 8.7")   # type: ignore[arg-type]


def test_nothing_is_dropped_or_reordered():
    text = FEATURES.read_text()
    m = parse_ptx(text)
    k = m.function("features")
    emitted = [line.strip() for line in "\n".join(k.emit()).splitlines()]
    statements = [x for x in emitted if x.endswith(";") and not x.startswith(".")]
    source = [line.strip() for line in text.split(".visible .entry features")[1].splitlines()]
    assert [s.split()[0] for s in statements if not s.startswith("@")][:6] == [
        s.split()[0] for s in source if s.endswith(";") and not s.startswith((".", "@"))][:6]


def test_calls_to_functions_are_inlined_for_the_checker_only():
    m = features()
    own = m.function("features")
    view = m.kernels[0]
    assert view is not own and len(view.body) == len(own.body) + 6
    texts = [x.render() if type(x) is Statement else x.label.render() + ":" for x in view.body]
    at = texts.index(next(t for t in texts if t.startswith("call.uni")))
    callee = [x.render() for x in m.function("add_one").body]
    # The callee's body after the call, its `ret` a branch to the end of the spliced body; its
    # `.param` argument and result bound (frontend/params.py): the callee's `ld.param` reads
    # the caller's `st.param [param0], %r1`, the caller's `ld.param [retval0]` the callee's
    # `st.param [func_retval0], %r2`.
    assert texts[at + 1:at + 5] == [callee[0], "mov.u32 %r1, %r1;", *callee[2:4]]
    assert texts[at + 5:at + 8] == ["bra add_one$ret;", "add_one$ret:", "mov.b32 %r11, %r2;"]
    assert "add_one$ret" not in m.emit()


def test_long_compiler_names_are_read_and_the_process_killing_ones_refused():
    long = "_ZN7cutlass13device_kernel" + "I" * 1200 + "E"
    text = f".version 8.7\n.target sm_90a\n.entry {long}()\n{{\n\tret;\n}}\n"
    assert parse_ptx(text).kernels[0].name == long
    assert same_program(text, parse_ptx(text).emit()) is None
    huge = "k" * 70_000
    with pytest.raises(PtxdslError, match="name is too long .* nvJitLink 13 aborts"):
        parse_ptx(f".version 8.7\n.target sm_90a\n.entry {huge}()\n{{\n\tret;\n}}\n")


@pytest.mark.parametrize("line,value", [
    ("mov.u32 %r1, -1;", 0xFFFFFFFF), ("mov.u64 %rd1, -2;", (1 << 64) - 2),
    ("mul.wide.u32 %rd1, %r1, -1431655765;", 2863311531)])
def test_negative_literals_of_unsigned_types_read_typed_and_keep_their_spelling(line, value):
    text = (".version 8.7\n.target sm_90a\n.entry k()\n{\n\t.reg .b32 %r<2>;\n"
            f"\t.reg .b64 %rd<2>;\n\t{line}\n\tret;\n}}\n")
    m = parse_ptx(text)
    insn = next(m.kernels[0].statements()).insn
    assert not isinstance(insn, Raw), insn.why
    assert any(getattr(o, "value", None) == value for o in insn.operands())
    assert line in m.emit() and same_program(text, m.emit()) is None


def test_a_negative_literal_that_does_not_fit_stays_raw():
    text = (".version 8.7\n.target sm_90a\n.entry k()\n{\n\t.reg .b16 %rs<2>;\n"
            "\tmov.u16 %rs1, -70000;\n\tret;\n}\n")
    insn = next(parse_ptx(text).kernels[0].statements()).insn
    assert isinstance(insn, Raw) and "immediate" in insn.why


def test_typed_statements_say_what_version_and_target_they_need():
    golden = GOLDEN_DIR / "mbarrier" / "sm90_v86.ptx"
    assert parse_ptx(golden.read_text()).version_problems() == []
    old = parse_ptx(golden.read_text().replace(".version 8.6", ".version 7.0"), file="x.ptx")
    problems = old.version_problems()
    assert problems[0] == ("x.ptx:20: mbarrier.arrive.relaxed.cta.shared::cta.b64 needs PTX "
                           "ISA 8.6, sm_90+; the file declares .version 7.0, .target sm_90")
    needs = {str(r.version) for _, r in old.requirements()}
    assert "8.6" in needs


def test_loc_of_inlined_code_names_the_users_line():
    text = """.version 8.7
.target sm_90a
.entry k()
{
\t.reg .b32 %r<3>;
\t.loc 1 49 5
\tmov.u32 %r1, 1;
\t.loc 2 15 3, function_name $L__info_string5, inlined_at 1 49 5
\tmov.u32 %r2, 2;
\t.loc 3 18 3, function_name $L__info_string6, inlined_at 2 15 3
\tadd.s32 %r1, %r1, %r2;
\tret;
}
\t.file 1 "kernel.cu"
\t.file 2 "ptx_common.cuh"
\t.file 3 "cccl/mbarrier_try_wait.h"
"""
    k = parse_ptx(text, file="k.ptx").kernels[0]
    assert [s.loc.caller[:2] for s in k.statements()] == [("kernel.cu", 49)] * 4
    assert [s.loc.line for s in k.statements()] == [7, 9, 11, 12]
