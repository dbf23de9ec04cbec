"""Inline PTX (`k.asm`): goldens, binding, refusals, requirements, line mapping, a GPU run."""

from __future__ import annotations

import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ptxdsl import (
    Addr,
    AssemblyError,
    BuildError,
    Imm,
    Kernel,
    Module,
    OperandError,
    VersionError,
    t,
)
from ptxdsl.instructions.inline import InlineAsm
from ptxdsl.types import req


def _here() -> int:
    """The caller's current line (for checking the line errors name)."""
    return sys._getframe(1).f_lineno


def _kernel(name="inl"):
    k = Kernel(name)
    out = k.ld_param(k.param_ptr("out"))
    return k, out, k.tid.x


# -- goldens: one instruction ptxdsl has no builder for, each at its inferred version/target --

SINGLE = {  # name: (template, inputs after x, requires)
    "prmt": ("prmt.b32 $0, $1, $2, $3;", lambda k: [k.laneid, 0x3210], None),
    "brev": ("brev.b32 $0, $1;", lambda k: [], None),
    "clz": ("clz.b32 $0, $1;", lambda k: [], None),
    "popc": ("popc.b32 $0, $1;", lambda k: [], None),
    "bfe": ("bfe.u32 $0, $1, $2, $3;", lambda k: [(8, t.u32), (4, t.u32)], None),
    "lop3": ("lop3.b32 $0, $1, $2, $3, 0x96;", lambda k: [k.laneid, k.reg(t.b32, "c")],
             ("4.3", "sm_75")),
}


@pytest.mark.parametrize("name", SINGLE)
def test_single_instruction_golden(golden, name):
    template, more, requires = SINGLE[name]
    k, out, x = _kernel(name)
    (d,) = k.asm(template, outs=[t.b32], ins=[x, *more(k)], requires=requires)
    assert d.type is t.b32 and d.kernel is k
    k.st(out, d, type=t.b32)
    golden(Module([k]), f"inline/{name}")


def test_setmaxnreg_golden_infers_sm90a(golden):
    k = Kernel("setmaxnreg", reqntid=128)
    assert k.asm("setmaxnreg.inc.sync.aligned.u32 $0;", ins=[240],
                 requires=("8.0", "sm_90a")) == ()
    m = Module([k])
    assert (str(m.version), str(m.target)) == ("8.0", "sm_90a")
    golden(m, "inline/setmaxnreg")


def test_scoped_block_golden(golden):
    k, out, x = _kernel("scoped_block")
    lane = k.laneid
    total, = k.asm("""
        {   // popcount of x, then add the lane id once per set bit (a loop with its own label)
            .reg .b32 %n, %acc;
            .reg .pred %more;
            popc.b32 %n, $1;
            mov.u32 %acc, 0;
            setp.ne.u32 %more, %n, 0;
            @!%more bra DONE;
        AGAIN:
            add.u32 %acc, %acc, $2;
            sub.u32 %n, %n, 1;
            setp.ne.u32 %more, %n, 0;
            @%more bra AGAIN;
        DONE:
            mov.u32 $0, %acc;   // $0 in a comment is kept as written
        }
    """, outs=[t.u32], ins=[x, lane])
    k.st(out, total)
    golden(Module([k]), "inline/scoped_block")


def test_mbarrier_wait_loop_golden(golden):
    # The CUTLASS-style wait loop on an mbarrier: a block-scoped predicate and labels.
    k = Kernel("mbar_wait")
    bar = k.shared_array(t.b64, 1, align=8, name="bar")
    phase = k.ld_param(k.param(t.u32, "phase"))
    k.asm("""
    {
        .reg .pred P1;
    LAB_WAIT:
        mbarrier.try_wait.parity.shared::cta.b64 P1, $0, $1;
        @P1 bra DONE;
        bra LAB_WAIT;
    DONE:
    }
    """, ins=[bar, phase], requires=("7.8", "sm_90"))
    m = Module([k])
    assert (str(m.version), str(m.target)) == ("7.8", "sm_90")
    golden(m, "inline/mbarrier_wait")


def test_addresses_guard_and_typed_operands_golden(golden):
    k = Kernel("addresses")
    smem = k.shared_array(t.u32, 8, align=16, name="tile")
    src = k.param_ptr("src")
    base = k.mov(smem)
    p = k.tid.x < 4
    a, b = k.asm("ld.shared.v2.u32 {$0, $1}, $2;", outs=[t.u32, t.u32], ins=[Addr(base, 8)])
    c, = k.asm("ld.shared.u32 $0, [$1+4];", outs=[t.u32], ins=[smem])   # symbol, bare
    d, = k.asm("ld.shared.u32 $0, $1;", outs=[t.u32], ins=[smem])       # symbol, [tile]
    g, = k.asm("ld.param.u64 $0, [$1];", outs=[t.u64], ins=[src])
    k.asm("add.u32 $0, $0, $1;", outs=[(a, t.b32)], ins=[(b, t.u32)], when=p)  # read-write
    k.asm("selp.f32 $0, $1, $2, $3;", outs=[t.f32], ins=[(1.5, t.f32), Imm(-2.0, t.f32), p])
    k.asm("st.global.u32 $0, $1;", ins=[Addr(g, 4), c])
    with k.guard(~p):
        k.asm("st.shared.u32 $0, $1;", ins=[smem, d])
    golden(Module([k]), "inline/addresses")


def test_outputs_are_fresh_typed_registers_the_kernel_can_use():
    k, out, x = _kernel()
    p, q = k.asm("setp.lt.u32 $0|$1, $2, 5;", outs=[t.pred, t.pred], ins=[x])
    assert (p.type, q.type) == (t.pred, t.pred) and p is not q
    y = k.selp(x, 0, p)                       # the outputs are ordinary registers
    insn = k.body[-2].insn
    assert isinstance(insn, InlineAsm)
    assert insn.operands() == (p, q, x) or all(a is b for a, b in zip(insn.operands(),
                                                                      (p, q, x), strict=True))
    assert {r.name for r in insn.registers()} == {p.name, q.name, x.name}
    assert y.kernel is k


def test_text_is_kept_and_comments_are_not_substituted():
    k, out, x = _kernel()
    k.asm("popc.b32\t$0,  $1; // $7 is not a placeholder here /* nor $8 */", outs=[t.u32],
          ins=[x])
    text = Module([k]).emit()
    assert "\tpopc.b32\t%r2,  %r1; // $7 is not a placeholder here /* nor $8 */\n" in text


# -- requirements take part in inference and pinning -------------------------------------------

def test_stated_requirements_raise_the_inferred_module():
    k, out, x = _kernel()
    k.asm("mov.u32 $0, %cluster_ctarank;", outs=[t.u32], requires=("7.8", "sm_90"))
    assert (str(Module([k]).version), str(Module([k]).target)) == ("7.8", "sm_90")
    k2, _, x2 = _kernel("k2")
    k2.asm("popc.b32 $0, $1;", outs=[t.u32], ins=[x2], requires=req("8.6", arch=(100, 101)))
    assert (str(Module([k2]).version), str(Module([k2]).target)) == ("8.6", "sm_100a")


def test_pinning_below_the_stated_target_raises_version_error():
    k, out, x = _kernel()
    line = _here() + 1
    k.asm("setmaxnreg.dec.sync.aligned.u32 $0;", ins=[64], requires=("8.0", "sm_90a"))
    with pytest.raises(VersionError, match=r"inline asm `setmaxnreg.dec.sync.aligned.u32` "
                       r"needs PTX ISA 8.0, sm_90a, but the module is pinned to .target "
                       r"sm_90") as e:
        Module([k], target="sm_90").emit()
    assert (e.value.loc.file, e.value.loc.line) == (__file__, line)


def test_pinning_below_the_stated_version_raises_version_error():
    k, out, x = _kernel()
    k.asm("popc.b32 $0, $1;", outs=[t.u32], ins=[x], requires=("8.3", "sm_90"))
    with pytest.raises(VersionError, match=r"needs PTX ISA 8.3, sm_90\+, but the module is "
                       r"pinned to .version 8.0"):
        Module([k], version="8.0", target="sm_90").emit()


def test_requires_spec_is_checked():
    k, out, x = _kernel()
    with pytest.raises(BuildError, match=r"requires=: unknown PTX target 'sm_91'"):
        k.asm("popc.b32 $0, $1;", outs=[t.u32], ins=[x], requires=("8.0", "sm_91"))
    with pytest.raises(BuildError, match=r"requires= expects"):
        k.asm("popc.b32 $0, $1;", outs=[t.u32], ins=[x], requires=90)


# -- every PTX line of a template maps to its Python line; ptxas errors name it -------------

def test_every_line_of_a_block_locates_to_the_asm_call():
    k, out, x = _kernel()
    line = _here() + 1
    (y,) = k.asm("""
        {
            .reg .b32 %t;
            not.b32 %t, $1;
            and.b32 $0, %t, 255;
        }""", outs=[t.b32], ins=[x])
    k.st(out, y)
    m = Module([k])
    text = m.emit().splitlines()
    first = text.index("\t{")
    assert text[first:first + 5] == ["\t{", "\t\t.reg .b32 %t;", "\t\tnot.b32 %t, %r1;",
                                     "\t\tand.b32 %r2, %t, 255;", "\t}"]
    for n in range(first + 1, first + 6):
        assert (m.locate(n).file, m.locate(n).line) == (__file__, line)
    assert m.locate(first + 6).line == line + 6             # the st after it (1-based)


def test_a_template_ptxas_rejects_names_its_python_line():
    k, out, x = _kernel()
    line = _here() + 1
    (y,) = k.asm("""
        {
            .reg .b32 %t;
            popc.b32 %t, $1, $1;
            mov.b32 $0, %t;
        }""", outs=[t.b32], ins=[x])
    k.st(out, y)
    with pytest.raises(AssemblyError) as e:
        Module([k]).assemble()
    assert (e.value.loc.file, e.value.loc.line) == (__file__, line)
    assert e.value.ptx_text == "popc.b32 %t, %r1, %r1;"


def test_a_single_line_template_ptxas_rejects_names_its_python_line():
    k, out, x = _kernel()
    line = _here() + 1
    (y,) = k.asm("brev.b64 $0, $1;", outs=[t.b32], ins=[x])
    k.st(out, y)
    with pytest.raises(AssemblyError, match=r"brev\.b64 %r2, %r1;") as e:
        Module([k]).assemble()
    assert (e.value.loc.file, e.value.loc.line) == (__file__, line)


# -- refusals: placeholders and operands --------------------------------------------------------

def _refuse(template, match, *, outs=(t.u32,), ins=None, exc=BuildError, k=None, **kw):
    k2, out, x = _kernel()
    k = k or k2
    ins = [k.tid.x] if ins is None else ins
    line = _here() + 2
    with pytest.raises(exc, match=match) as e:
        k.asm(template, outs=list(outs), ins=ins, **kw)
    assert e.value.loc.line == line and e.value.loc.file == __file__
    return e.value


def test_too_few_operands():
    _refuse("bfe.u32 $0, $1, $2, $3;", r"template line 1\): placeholder \$2 has no operand "
            r"\(2 bound: outputs 1, inputs 1\)")


def test_too_many_operands():
    k, _, x = _kernel()
    _refuse("popc.b32 $0, $1;", r"input operand \$2 \(immediate 3 \(\.b64\)\) is never used",
            ins=[x, 3], k=k)


def test_unused_output():
    _refuse("popc.b32 $1, $2;", r"output operand \$0 \(register %r\d+ of type \.u32\) is "
            "never used", outs=(t.u32, t.u32))


def test_output_must_be_written():
    k, _, x = _kernel()
    _refuse("st.global.u32 [$1], $0;", r"output \$0 \(%r\d+\) is never written: use it as "
            r"the destination", ins=[k.reg(t.u64)], k=k)


def test_output_inside_an_address_is_not_a_destination():
    k, _, x = _kernel()
    a = k.reg(t.u64)
    _refuse("ld.global.u64 $1, [$0];", r"output \$0 .* never written", outs=(t.u64,),
            ins=[a], k=k)


def test_type_spec_refuses_a_predicate_where_32_bits_are_wanted():
    k, _, x = _kernel()
    p = x < 3
    _refuse("popc.b32 $0, $1;", r"inline asm: operand '\$1': expected a \.b32 register, got "
            r"register %p1 of type \.pred", ins=[(p, t.b32)], k=k, exc=OperandError)


def test_type_spec_range_checks_immediates():
    k, _, x = _kernel()
    _refuse("add.u32 $0, $1, $2;", r"operand '\$2': expected an immediate in \[0, 255\]",
            ins=[k.reg(t.u32), (300, t.u8)], k=k, exc=OperandError)


def test_guard_placeholder_needs_a_predicate():
    _refuse("@$1 mov.u32 $0, 1;", r"operand '\$1': expected a \.pred register for a guard",
            exc=OperandError)


def test_address_operand_inside_brackets():
    k, _, x = _kernel()
    _refuse("ld.u32 $0, [$1];", r"operand '\$1': expected an operand that can stand inside "
            r"\[\.\.\.\] \(an Addr brings its own brackets", ins=[Addr(k.reg(t.u64))], k=k,
            exc=OperandError)


@pytest.mark.parametrize("value, match", [
    (1.5, r"expected a typed float immediate: \(x, t\.f32\)"),
    (True, r"expected a register, \(value, type\), Imm, Addr or Symbol"),
    ("%r1", r"expected a register, \(value, type\), Imm, Addr or Symbol"),
    (t.u32, r"expected an operand \(a type spec is written as a pair"),
])
def test_input_kinds(value, match):
    _refuse("add.u32 $0, $1, 1;", r"operand '\$1': " + match, ins=[value], exc=OperandError)


def test_immediates_are_range_checked():
    # An out-of-range Imm cannot even be built (the operand class checks itself).
    with pytest.raises(BuildError, match=r"Imm: the value must be in \[0, 255\] for \.u8"):
        Imm(256, t.u8)
    with pytest.raises(BuildError, match=r"Imm: PTX has no immediates of this type"):
        Imm(1.0, t.f16)
    _refuse("add.u32 $0, $1, 1;", r"operand '\$1': expected an immediate in "
            r"\[-9223372036854775808, 18446744073709551615\]", ins=[1 << 64], exc=OperandError)


def test_numpy_integers_bind_like_ints():
    np = pytest.importorskip("numpy")
    k, out, x = _kernel()
    k.asm("add.u32 $0, $1, $2;", outs=[t.u32], ins=[x, np.uint32(7)])
    assert "\tadd.u32 %r2, %r1, 7;\n" in Module([k]).emit()


def test_negated_predicate_input():
    k, _, x = _kernel()
    _refuse("selp.u32 $0, 1, 2, $1;", r"write the negation in the template: @!\$1", k=k,
            ins=[~(x < 2)], exc=OperandError)


def test_outputs_must_be_registers_once():
    _refuse("mov.u32 $0, 1;", r"operand '\$0': expected an output register \(or a type\), "
            r"each once, got immediate 1", outs=(Imm(1, t.u32),), ins=[], exc=OperandError)
    _refuse("mov.u32 $0, 1;", r"operand '\$0': expected an output register \(or a type\), "
            r"each once, got immediate 5", outs=((5, t.u32),), ins=[], exc=OperandError)
    k, _, x = _kernel()
    r = k.reg(t.u32)
    _refuse("mov.u32 $0, 1; mov.u32 $1, 2;", r"operand '\$1': expected an output register "
            r"\(or a type\), each once, got register %r2 of type \.u32 again", outs=(r, r),
            ins=[], k=k, exc=OperandError)


def test_operands_of_another_kernel():
    other = Kernel("other").reg(t.u32)
    _refuse("popc.b32 $0, $1;", r"operand '\$1': expected an operand of kernel 'inl', got "
            r"register %r1", ins=[other], exc=OperandError)


@pytest.mark.parametrize("template, match", [
    ("popc.b32 $0, $1abc;", r"placeholder \$1 runs into the text after it"),
    ("$0.b32 $0, $1;", r"a placeholder cannot stand for an opcode"),
    ("{ $0: popc.b32 $0, $1; }", r"placeholder \$0 cannot be a label"),
    ("popc.b32 %0, $1; mov.u32 $0, 0;", r"%0 is CUDA's placeholder syntax; ptxdsl templates "
     r"use \$0"),
    ("", r"the template has no statements"),
    ("// only a comment", r"the template has no statements"),
    ("popc.b32 $0, $1", r"statement not terminated with ';'"),
    ("popc.b32 $0, $1; /* open", r"unterminated /\* comment"),
    ('popc.b32 $0, $1; .pragma "x;', r"unterminated string literal"),
    ("@$1;", r"a guard @p must be followed by an instruction"),
    ("#define ret trap\npopc.b32 $0, $1;", r"preprocessor directives \(#define, #include, "
     r"\.\.\.\) are not allowed"),
])
def test_malformed_templates(template, match):
    _refuse(template, match)


# -- refusals: braces ---------------------------------------------------------------------------

@pytest.mark.parametrize("template, match", [
    ("{ popc.b32 $0, $1;", r"template line 1\): unbalanced '\{' \(scoped block never closed"),
    ("popc.b32 $0, $1; }", r"unbalanced '\}' \(no scoped block is open\)"),
    ("{\n{ popc.b32 $0, $1; }\n}\n}", r"template line 4\): unbalanced '\}'"),
    ("{ popc.b32 $0, $1 }", r"a statement before '\}' is not terminated with ';'"),
    ("mov.b64 $0, {$1, $1;", r"unbalanced '\{' in a statement"),
    ("ld.u32 $0, [$1;", r"unbalanced '\[' in a statement"),
    ("ld.u32 $0, $1];", r"unbalanced '\]'"),
])
def test_unbalanced_braces(template, match):
    _refuse(template, match, outs=(t.u64,) if "b64" in template else (t.u32,))


def test_errors_name_the_line_of_the_template_as_written():
    _refuse("""
        {
            .reg .b32 %t;

            popc.b32 %t, $1;
            mov.u32 $0, %t
        }""", r"inline asm \(template line 6\): a statement before '\}' is not terminated")


# -- refusals: declarations, labels, directives, registers --------------------------------------

@pytest.mark.parametrize("template, match", [
    (".reg .b32 %x;\npopc.b32 $0, $1;", r"template line 1\): directive \.reg is not allowed "
     r"at the top level of a template; declare registers in a scoped block"),
    ("{ .reg .b32 %r1; popc.b32 %r1, $1; mov.b32 $0, %r1; }", r"register %r1 would shadow "
     r"ptxdsl's automatic register names"),
    ("{ .reg .b64 %rd<4>; popc.b32 $0, $1; }", r"register %rd<4> would shadow ptxdsl's "
     "automatic"),
    ("{ .reg .pred %p2; popc.b32 $0, $1; }", r"register %p2 would shadow"),
    ("{ .reg .f32 %f7; popc.b32 $0, $1; }", r"register %f7 would shadow"),
    ("{ .reg .b32 $0; popc.b32 $0, $1; }", r"a placeholder cannot appear in a \.reg"),
    ("{ .reg .b32 %x = 1; popc.b32 $0, $1; }", r"cannot read the \.reg declaration"),
    ("L1: popc.b32 $0, $1;", r"label L1: at the top level it would clash with the kernel's "
     "labels"),
    ("{ $L__else_1: popc.b32 $0, $1; }", r"looks like ptxdsl's generated labels"),
])
def test_colliding_declarations(template, match):
    _refuse(template, match)


def test_block_register_shadowing_a_bound_operand():
    k, _, x = _kernel()
    acc = k.reg(t.u32, "acc")
    _refuse("{ .reg .b32 %acc; popc.b32 %acc, $1; mov.b32 $0, %acc; }",
            r"register %acc would shadow operand \$1 bound to the same name", ins=[acc], k=k)


def test_block_names_shadowing_the_kernels_names():
    k, _, x = _kernel()
    k.reg(t.u32, "acc")
    k.shared_array(t.u32, 4, name="tile")
    k.label("again")
    for decl, name in (("{ .reg .b32 %acc; popc.b32 $0, $1; }", "%acc"),
                       ("{ .reg .b32 tile; popc.b32 $0, $1; }", "tile"),
                       ("{ again: popc.b32 $0, $1; }", "again"),
                       ("{ .reg .b64 out; popc.b32 $0, $1; }", "out")):
        _refuse(decl, rf"the template declares {name}, which shadows a name of kernel 'inl'",
                k=k, ins=[x])


@pytest.mark.parametrize("directive", [
    ".version 8.0;", ".target sm_90;", ".entry evil();", ".shared .b32 s[4];",
    ".global .b32 g;", ".maxnreg 32;", ".extern .shared .b8 dyn[];",
])
def test_directive_injection_at_top_level(directive):
    name = directive.split()[0]
    _refuse(f"{directive}\npopc.b32 $0, $1;", rf"directive \{name} is not allowed at the "
            "top level of a template")


@pytest.mark.parametrize("directive", [".shared .b32 s[4];", ".local .b32 l;", ".version 8.0;",
                                       '.pragma "nounroll";'])
def test_only_reg_directives_inside_a_block(directive):
    name = directive.split()[0]
    _refuse(f"{{ {directive} popc.b32 $0, $1; }}", rf"directive \{name} is not allowed in "
            r"a template \(only \.reg declarations, inside a scoped block\)")


@pytest.mark.parametrize("template, reg", [
    ("add.u32 $0, %r1, $1;", "%r1"),                          # a kernel register by name
    ("{ .reg .b32 %t; } { mov.u32 %t, $1; mov.u32 $0, %t; }", "%t"),   # a sibling's
    ("{ .reg .b32 %t<2>; mov.u32 %t2, $1; mov.u32 $0, %t0; }", "%t2"),  # beyond <2>
    ("mov.u32 $0, %tidx; add.u32 $0, $0, $1;", "%tidx"),
])
def test_undeclared_registers(template, reg):
    _refuse(template, rf"{reg} is not declared in the template's scoped block and is not a "
            r"bound operand; bind kernel registers as operands")


def test_special_and_declared_registers_are_allowed():
    k, out, x = _kernel()
    k.asm("{ .reg .b32 %t<2>; mov.u32 %t1, %laneid; add.u32 %t0, %t1, %tid.y;"
          " add.u32 $0, %t0, $1; }", outs=[t.u32], ins=[x])
    Module([k]).emit()


def test_branch_targets_must_be_template_labels():
    k, _, x = _kernel()
    k.label("outside")
    _refuse("@$1 bra outside;", r"bra target 'outside' is not a label of this template",
            outs=(), ins=[x < 1], k=k)
    _refuse("{ L: bra.uni L; } { bra.uni L; }", r"bra target 'L' is not a label",
            outs=(), ins=[])


def test_a_guard_covers_one_instruction_only():
    k, _, x = _kernel()
    p = x < 1
    with k.guard(p):
        _refuse("{ popc.b32 $0, $1; }", r"a guard predicates exactly one instruction", k=k,
                ins=[x])
        _refuse("popc.b32 $0, $1; not.b32 $0, $0;", r"a guard predicates exactly one", k=k,
                ins=[x])
        _refuse("@$2 popc.b32 $0, $1;", r"a guard predicates exactly one", k=k, ins=[x, p])
    _refuse("{ popc.b32 $0, $1; }", r"a guard predicates exactly one", k=k, ins=[x], when=p)


# -- a GPU run ------------------------------------------------------------------------------------

def _expected(x, i):
    import numpy as np
    brev = np.zeros_like(x)
    popc = np.zeros_like(x)
    for b in range(32):
        bit = (x >> np.uint32(b)) & np.uint32(1)
        brev |= bit << np.uint32(31 - b)
        popc += bit
    return (brev ^ popc ^ i) + (x & np.uint32(1))


@pytest.mark.gpu
def test_inline_block_computes_on_the_gpu():
    import numpy as np

    from ptxdsl.runtime import DeviceBuffer, synchronize

    n = 1024
    k = Kernel("inline_bits", reqntid=128)
    src, dst = k.ld_param(k.param_ptr("src")), k.ld_param(k.param_ptr("dst"))
    i = k.mad(k.ctaid.x, k.ntid.x, k.tid.x)
    off = k.mul(i, 4, mode="wide")
    x = k.ld(k.add(src, off), type=t.u32, space="global")
    y, = k.asm("""
        {   // y = brev(x) ^ popc(x) ^ i, plus one when x is odd
            .reg .b32 %pc, %rv;
            .reg .pred %odd;
            popc.b32 %pc, $1;
            brev.b32 %rv, $1;
            lop3.b32 $0, %rv, %pc, $2, 0x96;
            and.b32 %pc, $1, 1;
            setp.ne.u32 %odd, %pc, 0;
            @%odd add.u32 $0, $0, 1;
        }""", outs=[t.u32], ins=[x, i])
    k.st(k.add(dst, off), y, space="global")
    m = Module([k])
    m.assemble()
    f = m.load()["inline_bits"]
    rng = np.random.default_rng(10)
    host = rng.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32)
    with DeviceBuffer.from_numpy(host) as d_src, DeviceBuffer.zeros(n, np.uint32) as d_dst:
        f.launch(n // 128, 128, (d_src, d_dst))
        synchronize(timeout=30)
        got = d_dst.to_numpy()
    np.testing.assert_array_equal(got, _expected(host, np.arange(n, dtype=np.uint32)))


# -- robustness: any template is either refused with a BuildError or keeps the kernel whole --------

_TOKENS = ["{", "}", ";", "\n", " ", "$0", "$1", "$2", "%t", "%r1", "%tid.x", ".reg .b32 %t;",
           "[", "]", "L:", "bra L", "@$1", "@%t", "mov.u32", ",", "// c\n", "/* } */", '"}"',
           ":", "::", "(", ")", "$1a", ".version 8.0", "0x10", "|", "!", "#"]


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(_TOKENS), max_size=24))
def test_any_template_is_refused_or_keeps_one_entry(tokens):
    k = Kernel("f")
    x = k.tid.x
    try:
        k.asm("".join(tokens), outs=[t.u32], ins=[x, x < 1])
    except BuildError:
        return
    ptx = Module([k]).emit()
    assert ptx.count(".entry") == 1 and ptx.count(".version") == 1
    assert ptx.rstrip().endswith("\n}")
