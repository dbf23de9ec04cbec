"""Bad input found by the second input-validation probe (scratch/nc_hardening): each class of
mistake is refused at build (or emit) with a ptxdsl error naming the user's line, and the
valid neighbours keep their PTX."""

from __future__ import annotations

import os

import numpy as np
import pytest

from ptxdsl import Kernel, Module, t
from ptxdsl.errors import BuildError, OperandError, OutputError
from ptxdsl.instructions.wgmma_desc import SmemLayout, descriptor
from ptxdsl.toolchain import assemble

HERE = os.path.abspath(__file__)


def _here(err) -> bool:
    return os.path.abspath(err.value.loc.file) == HERE


# -- 1. symbols of another kernel or module ---------------------------------------------------
def test_another_kernels_shared_array_or_param_is_refused():
    k2 = Kernel("k2")
    x2 = k2.shared_array(t.f64, 1, align=8, name="x")   # same name as k's own array below
    p2 = k2.param(t.f64, "scale")
    k = Kernel("k")
    k.shared_array(t.u32, 64, align=16, name="x")
    k.param(t.u32, "scale")
    with pytest.raises(OperandError, match="expected a symbol of kernel 'k' or a module "
                       "variable, got shared variable x of kernel 'k2'") as ei:
        k.ld(x2)
    assert _here(ei)
    with pytest.raises(OperandError, match="got parameter scale of kernel 'k2'"):
        k.ld_param(p2)
    with pytest.raises(OperandError, match="of kernel 'k2'"):
        k.mov(x2)                          # the symbol as a plain operand
    with pytest.raises(OperandError, match="of kernel 'k2'"):
        k.ld(k2.shared_array(t.u32, 4, name="y", align=4), type=t.u32)
    assert "ld.shared" not in "\n".join(line for line, _ in k.render())


def test_another_kernels_label_is_refused():
    k2 = Kernel("k2")
    lab = k2.label("there")
    k = Kernel("k")
    with pytest.raises(OperandError, match="expected a label of kernel 'k', got label there "
                       "of kernel 'k2'"):
        k.bra(lab)


def test_a_module_variable_of_another_module_is_refused_at_emit():
    m1 = Module(name="m1", check=False)
    g = m1.global_array(t.u32, 4, name="g", align=4)
    own = Kernel("own")
    own.ld(g, type=t.u32)                  # a kernel of g's own module: fine
    own.ret()
    m1.add(own)
    assert "ld.global.u32 %r1, [g];" in m1.emit()
    k = Kernel("k")
    k.ld(g, type=t.u32)
    line = k.body[-1].loc.line
    k.ret()
    m2 = Module([k], name="m2", check=False)
    m2.global_array(t.u32, 4, name="g")    # a same-named variable must not stand in for it
    with pytest.raises(OperandError, match="expected a module variable of this kernel's "
                       "module 'm2', got global variable g of module 'm1'") as ei:
        m2.emit()
    assert _here(ei) and ei.value.loc.line == line


# -- 2. counting down over an unsigned counter from 2^31 or more --------------------------------
@pytest.mark.parametrize("ty, start, stop", [(t.u32, 4_000_000_000, 3_000_000_000),
                                             (t.u64, 2**63 + 10, 2**63)])
def test_counting_down_from_the_upper_half_compares_unsigned(ty, start, stop):
    k = Kernel("k")
    o = k.ld_param(k.param_ptr("o"))
    with k.for_range(start, stop, -1, type=ty) as i:
        k.st(o, i, space="global", type=ty)
    k.ret()
    text = Module([k], check=False).emit()
    assert f"setp.gt.{ty.value} " in text and ".s32" not in text and ".s64" not in text
    assemble(text, "sm_75", warn=False)


def test_counting_down_small_values_still_compares_signed():
    k = Kernel("k")
    with k.for_range(10, 0, -3):
        pass
    text = "\n".join(line for line, _ in k.render())
    assert "setp.gt.s32 %p1, %r1, 0;" in text and "sub.u32 %r1, %r1, 3;" in text


def test_counting_down_from_the_upper_half_past_zero_is_refused():
    k = Kernel("k")
    with pytest.raises(BuildError, match=r"for_range: counting down over \.u32 with a bound of "
                       r"2\^31 or more needs an immediate stop >= \|step\| - 1 = 4") as ei:
        with k.for_range(3_000_000_000, 2, -5):
            pass
    assert _here(ei)
    with pytest.raises(BuildError, match="needs an immediate stop"):
        with k.for_range(3_000_000_000, k.reg(t.u32), -1):
            pass


def test_a_counter_that_would_wrap_past_its_range_is_refused():
    k = Kernel("k")
    with pytest.raises(BuildError, match="can step past the end of its range"):
        with k.for_range(0, 2**32 - 1, 2):          # 2^32 - 2 + 2 wraps to 0: endless
            pass
    with k.for_range(0, 2**32 - 1, 1):              # ends at 2^32 - 2: fine
        pass


# -- 3. break_/continue_ conditions ------------------------------------------------------------
@pytest.mark.parametrize("when", ["f32", "u32", True, False, 1])
@pytest.mark.parametrize("which", ["break_", "continue_"])
def test_break_and_continue_need_a_predicate(which, when):
    k = Kernel("k")
    with k.loop():
        cond = k.reg(getattr(t, when)) if isinstance(when, str) else when
        with pytest.raises(OperandError, match=f"{which}: operand 'when': expected a predicate "
                           r"register or its negation \(p or ~p\)") as ei:
            getattr(k, which)(when=cond)
        assert _here(ei)
        p = k.tid.x == 0
        getattr(k, which)(when=~p)                  # a predicate or its negation: fine
        k.break_()


# -- 4. for_range's type and bounds ------------------------------------------------------------
@pytest.mark.parametrize("ty", [t.b32, t.u8, t.b64, t.f32, t.pred])
def test_for_range_type_is_an_integer_counter_type(ty):
    k = Kernel("k")
    with pytest.raises(OperandError, match="for_range: operand 'type': expected an integer "
                       "type: t.s16, t.u16, t.s32, t.u32, t.s64, t.u64"):
        with k.for_range(0, 10, type=ty):
            pass


@pytest.mark.parametrize("what, start, stop", [("start", -1, 10), ("stop", 0, 2**32),
                                               ("start", 1.5, 10), ("stop", 0, "10"),
                                               ("start", "u64", 10), ("stop", 0, "f32")])
def test_for_range_bounds_are_checked_up_front(what, start, stop):
    k = Kernel("k")
    start, stop = (k.reg(getattr(t, v)) if v in ("u64", "f32") else v for v in (start, stop))
    with pytest.raises(OperandError, match=f"for_range: operand '{what}': expected an integer "
                       "or an integer register"):
        with k.for_range(start, stop):
            pass


# -- 5. bool options ---------------------------------------------------------------------------
@pytest.mark.parametrize("option", ["visible", "explicitcluster"])
@pytest.mark.parametrize("value", ["no", 1, None])
def test_kernel_bool_options_must_be_bools(option, value):
    with pytest.raises(BuildError, match=f"kernel k: {option} must be True or False"):
        Kernel("k", **{option: value})


def test_other_bool_options_must_be_bools():
    k = Kernel("k")
    with pytest.raises(OperandError, match="bra: operand 'uni': expected True or False"):
        k.bra(k.fresh_label(), uni="no")
    with pytest.raises(BuildError, match="Module: lineinfo must be True or False"):
        Module([k], lineinfo="no")
    with pytest.raises(BuildError, match="Module: strict must be True, False or None"):
        Module([k], strict="no")
    with pytest.raises(BuildError, match="Module: check must be True, False or a mapping"):
        Module([k], check="no")


# -- 6. addr_of's size -------------------------------------------------------------------------
@pytest.mark.parametrize("bits", [16, 8, 0, 128, True, "64"])
def test_addr_of_takes_32_or_64_bits(bits):
    k = Kernel("k")
    s = k.shared_array(t.u32, 4, name="s", align=4)
    with pytest.raises(OperandError, match="k.addr_of: operand 'bits': expected 32"):
        k.addr_of(s, bits=bits)
    assert k.addr_of(s, bits=64).type is t.u64 and k.addr_of(s).type is t.u32


# -- 7. renaming a kernel after Module.add -----------------------------------------------------
def test_a_kernel_renamed_after_add_cannot_duplicate_an_entry():
    a, b = Kernel("a"), Kernel("b")
    a.ret()
    b.ret()
    m = Module([a, b], check=False)
    b.name = "a"
    with pytest.raises(BuildError, match="module has another kernel named 'a' too"):
        m.emit()
    b.name = "c"
    m.add(Kernel("b"))                     # the old name is free again
    m2 = Module(check=False)
    m2.global_array(t.u32, 1, name="g")
    m2.add(a)
    a.name = "g"
    with pytest.raises(BuildError, match="module has a module variable named 'g' too"):
        m2.emit()


# -- 8. Module.write to a path that cannot be written ------------------------------------------
def test_write_to_a_bad_path_names_the_path(tmp_path):
    k = Kernel("k")
    k.ret()
    m = Module([k], check=False)
    (tmp_path / "file").write_text("x")
    with pytest.raises(OutputError, match=r"Module.write: cannot write .*file/out.ptx'") as ei:
        m.write(tmp_path / "file" / "out.ptx")     # a folder that is a file
    assert _here(ei) and isinstance(ei.value, OSError) and ei.value.errno is not None
    assert (tmp_path / "file").read_text() == "x"


# -- 9. static resource limits -----------------------------------------------------------------
def test_static_shared_memory_past_48_kib_is_refused_at_the_crossing_array():
    k = Kernel("k")
    k.shared_array(t.b8, 40000, name="a")
    k.shared_array(t.b8, 10000, name="b")
    line = k.decl_locs["b"].line
    k.ret()
    with pytest.raises(BuildError, match=r"kernel k: static shared memory reaches 50000 bytes "
                       r"with b \(10000 bytes\), above the 49152 bytes ptxas allows for "
                       r"\.target sm_75; use dynamic shared memory instead: "
                       r"k\.extern_shared") as ei:
        Module([k], check=False).emit()
    assert _here(ei) and ei.value.loc.line == line
    # An arch-specific target gets the chip's opt-in size (ptxas: 227 KiB on sm_90a).
    assemble(Module([k], check=False, target="sm_90a").emit(), "sm_90a", warn=False)


def test_module_shared_counts_for_the_kernels_that_use_it():
    m = Module(check=False)
    g = m.shared_array(t.b8, 40000, name="g", align=4)
    user, other = Kernel("user"), Kernel("other")
    for k in (user, other):
        k.shared_array(t.b8, 10000, name="s")
    user.ld(g, type=t.u32)
    for k in (user, other):
        k.ret()
        m.add(k)
    with pytest.raises(BuildError, match="kernel user: static shared memory reaches 50000 "
                       r"bytes with g \(40000 bytes\)"):
        m.emit()
    m.kernels.remove(user)
    assemble(m.emit(), "sm_75", warn=False)   # not used by `other`: not counted (as ptxas)


@pytest.mark.parametrize("count", [1 << 32, (1 << 32) + 16, 300 * 1024])
def test_shared_arrays_past_every_limit_are_refused_at_build(count):
    k = Kernel("k")
    with pytest.raises(BuildError, match="static shared memory reaches .* for any target") as ei:
        k.shared_array(t.b8, count, name="big")   # 4 GiB would wrap to 0 and assemble
    assert _here(ei) and not k.shared
    k.shared_array(t.b8, 16, name="big")       # the name was not taken by the refusal
    with pytest.raises(BuildError, match="module variable big: static shared memory"):
        Module().shared_array(t.b8, count, name="big")


def test_const_data_past_64_kib_is_refused():
    m = Module(check=False)
    m.const_array(t.b8, 40000, name="c1")
    with pytest.raises(BuildError, match=r"module variable c2: \.const data reaches 80000 "
                       r"bytes .* above the 65536 bytes") as ei:
        m.const_array(t.b8, 40000, name="c2")
    assert _here(ei)
    m.const_array(t.b8, 65536 - 40000, name="c3")   # exactly 64 KiB: fine


# -- 10. targets and versions ptxas does not know ----------------------------------------------
@pytest.mark.parametrize("target", ["sm_89a", "sm_80a", "sm_90f", "sm_75f"])
def test_suffixes_the_chip_has_no_variant_for_are_refused(target):
    k = Kernel("k")
    k.ret()
    with pytest.raises(BuildError, match=f"unknown PTX target '{target}'") as ei:
        Module([k], target=target)
    assert _here(ei)
    with pytest.raises(BuildError, match=f"Module.assemble: unknown PTX target '{target}'"):
        Module([k], check=False).assemble(arch=target)


def test_versions_that_never_existed_are_refused_and_unknown_ones_name_the_module_line():
    k = Kernel("k")
    k.ret()
    with pytest.raises(BuildError, match=r"\.version 8\.9 is not a PTX ISA version"):
        Module([k], version="8.9")
    m = Module([k], version="99.0", check=False)
    line = m.loc.line
    from ptxdsl.errors import AssemblyError
    with pytest.raises(AssemblyError, match=r"Unsupported \.version 99\.0") as ei:
        m.assemble(arch="sm_75", warn=False)
    assert _here(ei) and ei.value.loc.line == line


# -- 11. build time is linear in the number of blocks ------------------------------------------
def test_a_discarded_block_still_undoes_its_labels():
    k = Kernel("k")
    n = k.tid.x
    with k.if_(n == 0):
        k.add(n, 1)
    with pytest.raises(ZeroDivisionError):
        with k.if_(n == 1):
            with k.for_range(0, 4):
                k.add(n, 2)
                raise ZeroDivisionError
    assert list(k._placed) == ["$L__else_1"]
    assert list(k._used_labels) == ["$L__else_1"]
    k.ret()
    assemble(Module([k], check=False).emit(), "sm_75", warn=False)


# -- 12. ld's vector count before any register is made ---------------------------------------
@pytest.mark.parametrize("vec", [3_000_000, 0, -2, 16, "4", 2.0])
def test_ld_vec_is_checked_before_registers_are_made(vec):
    k = Kernel("k")
    s = k.shared_array(t.u32, 4, name="s", align=16)
    with pytest.raises(OperandError, match="k.ld: operand 'vec': expected 1, 2, 4 or 8"):
        k.ld(s, type=t.u32, vec=vec)
    assert "r" not in k._counters


# -- generated label names ----------------------------------------------------------------------
def test_user_labels_cannot_take_generated_names():
    k = Kernel("k")
    with pytest.raises(BuildError, match="names starting with '\\$L__' are reserved") as ei:
        k.label("$L__else_1")
    assert _here(ei)
    with k.if_(k.tid.x == 0):
        pass
    k.ret()
    assert "$L__else_1:" in Module([k], check=False).emit()


def test_numpy_integers_in_layouts_descriptors_and_pointer_alignment():
    layout = SmemLayout(t.bf16, np.int64(64), np.int32(64))
    assert (type(layout.mn), layout.mn) == (int, 64)
    k = Kernel("k")
    assert descriptor(k, layout, np.int64(1024)).value == layout.encode(1024)
    assert k.param_ptr("p", align=np.int64(16)).ptr_align == 16


def test_refuse_b128_initialiser_ptxas_would_truncate():
    m = Module([])
    with pytest.raises(OperandError, match=r"\.global g: operand 'init\[0\]': expected a "
                       r"\.b128 immediate in \[0, 2\^64\)"):
        m.global_array(t.b128, 1, name="g", init=[1 << 64])
    m.global_array(t.b128, 1, name="ok", init=[(1 << 64) - 1])


def test_refuse_unknown_suffixed_arch_in_assemble():
    with pytest.raises(BuildError, match=r"assemble: unknown PTX target 'sm_89a': the 'a' "
                       r"variant exists from sm_90 on"):
        assemble(".version 8.0\n.target sm_89\n.address_size 64\n", "sm_89a")
