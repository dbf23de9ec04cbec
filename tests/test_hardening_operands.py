"""Issue 13, input hardening: no public constructor carries PTX text, non-ASCII never reaches
ptxas, special-register names cannot be shadowed, shared arrays of every type assemble, raw
Python exceptions become ptxdsl errors naming the user's line."""

from __future__ import annotations

import re
import sys

import numpy as np
import pytest

from ptxdsl import BuildError, Kernel, Module, OperandError, t
from ptxdsl.errors import PtxdslError
from ptxdsl.instructions import inline
from ptxdsl.kernel import Param
from ptxdsl.kernel_core import SPECIAL_REGISTERS
from ptxdsl.operands import (
    READABLE_SPECIAL_REGISTERS,
    SPECIAL_REGISTER_NAMES,
    Addr,
    Imm,
    Label,
    Reg,
    SpecialReg,
    Symbol,
    Vec,
)
from ptxdsl.testing import assemble_declared
from ptxdsl.types import StateSpace

HERE = __file__
INJECT = "0], %r1;\n\ttrap;\n\tst.global.u32 [%rd1"


def line_of(text: str) -> int:
    return next(i for i, ln in enumerate(open(HERE).read().splitlines(), 1) if text in ln)


# -- operand classes validate themselves ---------------------------------------------------------
def test_addr_string_offset_is_refused_not_pasted():
    # The exploit: a string offset smuggled a `trap` and an extra store into the PTX.
    k = Kernel("k")
    p = k.ld_param(k.param_ptr("p"))
    with pytest.raises(BuildError, match=r"Addr: the offset must be an int"):
        Addr(p, INJECT)
    with pytest.raises(BuildError, match=r"Addr \+ offset: the offset must be an int"):
        Addr(p) + INJECT


@pytest.mark.parametrize("offset", [1.0, 2.5, True, None, "8", b"8", 1 << 64, -(1 << 63) - 1,
                                    float("nan")])
def test_addr_offset_must_be_an_int_in_range(offset):
    k = Kernel("k")
    with pytest.raises(BuildError, match="the offset must be an int in"):
        Addr(k.reg(t.u64), offset)


@pytest.mark.parametrize("base", ["%rd1", None, True, 1.5, -1, 1 << 64, [1]])
def test_addr_base_must_be_register_symbol_or_address(base):
    with pytest.raises(BuildError, match="the base must be a register, a symbol or an absolute"):
        Addr(base)


def test_addr_accepts_numpy_integers_as_ints():
    k = Kernel("k")
    a = Addr(k.reg(t.u64), np.int64(16)) + np.int32(-8)
    assert a.offset == 8 and type(a.offset) is int
    assert Addr(np.uint64(64)).base == 64


@pytest.mark.parametrize("cls, args", [
    (Label, ("x; trap",)), (Label, ("a:\n\ttrap;\nb",)), (Label, (1,)),
    (Symbol, ("x[1]; trap", StateSpace.shared, t.u32)),
    (Symbol, ("x", "shared", t.u32)), (Symbol, ("x", StateSpace.shared, "u32")),
    (Symbol, ("x", StateSpace.shared, t.u32, "4]; trap; //")),
    (Symbol, ("x", StateSpace.shared, t.u32, 1, "16 .u32 y")),
    (Reg, (t.u32, "r; trap")), (Reg, ("u32", "x")), (Reg, (t.u32, "clock")),
    (SpecialReg, ("tid.x; trap", t.u32)), (SpecialReg, ("nothing", t.u32)),
    (Imm, ("1; trap", t.u32)), (Imm, (1, "u32")), (Imm, (True, t.u32)), (Imm, (256, t.u8)),
    (Imm, (10 ** 400, t.f32)), (Imm, (float("inf"), t.u32)), (Imm, (1.5, t.s32)),
    (Imm, (1.0, t.bf16)), (Imm, (2, t.pred)),
    (Vec, (("%r1",),)), (Vec, ((),)), (Vec, ("ab",)),
    (Param, ("p", StateSpace.param, t.u64, 1, None, None)),
])
def test_operand_constructors_refuse_ptx_text(cls, args):
    with pytest.raises(BuildError, match=rf"^{re.escape(HERE)}:\d+: "):
        if cls is Param:    # each field of a hand-built parameter that reaches .param text
            for kw in ({"kind": "x"}, {"ptr_align": "8 .u32 x"}, {"ptr_space": "global"}):
                with pytest.raises(BuildError, match=r"Param"):
                    Param(*args, **kw)
            Param("p; trap", *args[1:])
        cls(*args)


def test_names_reassigned_after_construction_are_checked_too():
    k = Kernel("k")
    r = k.reg(t.u32, "x")
    with pytest.raises(BuildError, match="not a valid PTX identifier"):
        r.name = "x; trap"
    with pytest.raises(BuildError, match="kernel name 'k; trap' is not a valid PTX identifier"):
        k.name = "k; trap"
    sym = k.shared_array(t.u32, 4)
    with pytest.raises(BuildError, match="not a valid PTX identifier"):
        sym.name = "s[1]; trap"


def test_imm_normalises_numpy_and_integral_floats():
    assert Imm(np.int64(5), t.u32).render() == "5"
    assert Imm(4.0, t.s32).render() == "4"
    assert Imm(np.float32(1.5), t.f32).render() == "0f3FC00000"


# -- non-ASCII ------------------------------------------------------------------------------------
def test_non_ascii_asm_comment_is_refused_with_the_python_line():
    k = Kernel("k")
    r = k.reg(t.u32)
    with pytest.raises(BuildError) as e:
        k.asm("mov.u32 $0, 1; // café", outs=[r])   # the line the error must name
    assert str(e.value).startswith(f"{HERE}:{line_of('// café')}: inline asm (template line 1)")
    assert "'é' is not printable ASCII" in str(e.value)


def test_lineinfo_file_path_with_non_ascii_is_escaped_and_assembles():
    # A kernel built from a file whose path is not ASCII: ptxas refuses a non-ASCII `.file`
    # ("Unexpected non-ASCII character"), so the path is %-escaped; line numbers still match.
    src = "def build(k):\n    k.ret()\n"
    scope: dict = {}
    exec(compile(src, "/tmp/résumé dir/k \"q\".py", "exec"), scope)
    k = Kernel("k")
    scope["build"](k)
    m = Module([k], lineinfo=True, check=False)
    text = m.emit()
    assert '.file 1 "/tmp/r%C3%A9sum%C3%A9 dir/k %22q%22.py"' in text
    assert "\t.loc 1 2 0\n\tret;" in text
    assert text.isascii()
    assemble_declared(text)


# -- special registers: one list -----------------------------------------------------------------
def test_one_special_register_list():
    assert inline.SPECIAL_REGISTERS is SPECIAL_REGISTER_NAMES
    assert SPECIAL_REGISTERS is READABLE_SPECIAL_REGISTERS
    assert {n.split(".")[0] for n in READABLE_SPECIAL_REGISTERS} <= SPECIAL_REGISTER_NAMES
    assert {"clock", "clock64", "smid", "globaltimer", "envreg0", "envreg31", "pm0", "pm7_64",
            "lanemask_eq", "cluster_ctarank", "dynamic_smem_size"} <= SPECIAL_REGISTER_NAMES


@pytest.mark.parametrize("name", sorted(SPECIAL_REGISTER_NAMES))
def test_register_named_after_a_special_register_is_refused(name):
    k = Kernel("k")
    with pytest.raises(BuildError, match=f"register name '{name}' is the name of the PTX "
                       f"special register %{name}"):
        k.reg(t.u32, name)


def test_read_special_reads_the_special_register_not_a_user_register():
    k = Kernel("k")
    with pytest.raises(BuildError):
        k.reg(t.u32, "clock")
    k.read_special("clock")
    assert "mov.u32 %r1, %clock;" in Module([k], check=False).emit()


def test_asm_scoped_register_named_after_special_register_is_refused():
    k = Kernel("k")
    with pytest.raises(BuildError, match="register %clock would shadow the special register"):
        k.asm("{ .reg .u32 %clock; mov.u32 %clock, 1; mov.u32 $0, %clock; }",
              outs=[t.u32])


# -- shared arrays -------------------------------------------------------------------------------
@pytest.mark.parametrize("type, decl", [(t.bf16, "b16"), (t.bf16x2, "b32"), (t.f16, "f16"),
                                        (t.u32, "u32")])
def test_shared_array_of_every_data_type_assembles(type, decl):
    k = Kernel("k")
    smem = k.shared_array(type, 8, align=4, name="s")
    ext = k.extern_shared("dyn", type=type, align=4)
    k.ld(smem, type=t.b16 if type.bits == 16 else t.b32)
    k.ld(ext, type=t.b16 if type.bits == 16 else t.b32)
    k.ret()
    m = Module([k], check=False)
    m.global_array(type, 2, name="g")
    text = m.emit()
    assert f"\t.shared .align 4 .{decl} s[8];" in text
    assert f".extern .shared .align 4 .{decl} dyn[];" in text
    assert f".visible .global .{decl} g[2];" in text
    assemble_declared(text)


@pytest.mark.parametrize("type", [t.pred, bool, "f", None])
def test_shared_array_of_non_data_type_is_refused(type):
    k = Kernel("k")
    with pytest.raises(OperandError, match=r"a data type such as t\.u32 \(not \.pred\)"):
        k.shared_array(type, 4)
    with pytest.raises(OperandError, match=r"such as t\.u32"):
        k.extern_shared(type=type)
    with pytest.raises(OperandError, match=r"a data type such as t\.u32"):
        Module().global_array(type, 4, name="g")


def test_shared_declarations_carry_their_python_line():
    k = Kernel("k")
    k.shared_array(t.u32, 4, name="tile")   # static-line
    k.extern_shared("dyn")                  # extern-line
    k.ret()
    m = Module([k], check=False)
    lines = m.emit().splitlines()
    for marker, needle in (("static-line", "tile[4];"), ("extern-line", "dyn[];")):
        at = next(i for i, ln in enumerate(lines, 1) if needle in ln)
        assert m.locate(at).line == line_of(marker) and m.locate(at).file == HERE


# -- raw exceptions become ptxdsl errors ----------------------------------------------------------
@pytest.mark.parametrize("type", [t.f32, t.f64])
def test_huge_int_immediate_for_float_is_an_operand_error(type):
    k = Kernel("k")
    with pytest.raises(OperandError, match=rf"expected a value representable as \.{type}"):
        k.mov(10 ** 400, type=type)


def test_numpy_integers_work_where_ints_do():
    k = Kernel("k", maxntid=np.int64(128), minnctapersm=np.int32(2), maxnreg=np.int64(64))
    k2 = Kernel("k2", reqntid=(np.int64(32), np.int64(4)))
    k.shared_array(t.u32, np.int64(4), align=np.int64(16), name="s")
    k.mov(np.int64(3), type=t.u32)
    for kk in (k, k2):
        kk.ret()
    text = Module([k, k2], check=False).emit()
    assert ".maxntid 128\n" in text and ".minnctapersm 2\n" in text and ".maxnreg 64\n" in text
    assert ".reqntid 32, 4\n" in text and ".shared .align 16 .u32 s[4];" in text
    assemble_declared(text)


@pytest.mark.parametrize("call", [
    lambda k: k.emit(None),
    lambda k: k.generic_addr(np.int64(4)),
    lambda k: k.ld_param(Addr(k.reg(t.u64))),
    lambda k: k.place(Addr(k.reg(t.u64))),
    lambda k: k.read_special({}),
    lambda k: k.shared_array(bool, 4),
    lambda k: k.copy(k.shared_array(t.u8, 16), k.param_ptr("p"), None),
    lambda k: k.copy(k.shared_array(t.u8, 16), k.param_ptr("p"), 16, width=[]),
    lambda k: k.asm("ret;", outs=None),
    lambda k: k.add(k.reg(t.u32), 1, type=True),
    lambda k: k.mov(1, type=t.u32, dst=True),
    lambda k: k.param_ptr("p", space={}),
    lambda k: k.sub(k.reg(t.u32), 1, mode={}),
], ids=["emit-None", "generic_addr-np", "ld_param-Addr", "place-Addr", "read_special-dict",
        "shared_array-bool", "copy-None", "copy-width-list", "asm-outs-None", "type-bool",
        "mov-dst-bool", "param_ptr-space-dict", "sub-mode-dict"])
def test_junk_the_random_calls_found_is_a_ptxdsl_error_naming_this_line(call):
    k = Kernel("k")
    with pytest.raises(PtxdslError) as e:
        call(k)
    assert e.value.loc.file == HERE


def test_builders_accept_type_names_as_strings():
    k = Kernel("k")
    r = k.add(k.reg(t.u32), 1, type="u32")
    assert r.type is t.u32


def test_module_pins_that_do_not_parse_are_build_errors():
    with pytest.raises(BuildError, match="not a PTX ISA version"):
        Module(version="8.0; trap")
    with pytest.raises(BuildError, match="unknown PTX target"):
        Module(target="sm_90\n.entry x")


if __name__ == "__main__":  # pragma: no cover
    sys.exit(pytest.main([__file__]))
