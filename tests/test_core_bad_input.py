"""Issue 2 item 8: every class of bad input raises a ptxdsl error at build time that names the
instruction (or kernel), the operand, what was expected, what was given, and this file:line."""

from __future__ import annotations

import sys

import pytest

from ptxdsl import BuildError, Kernel, Module, OperandError, t


def _next_line() -> int:
    """The line after the caller's: where the offending call is written."""
    return sys._getframe(1).f_lineno + 1


def _at(err, line: int) -> None:
    assert (err.loc.file, err.loc.line) == (__file__, line)
    assert str(err).startswith(f"{__file__}:{line}: ")


def _operand_error(err, instruction, operand, expected, given) -> None:
    assert isinstance(err, OperandError)
    assert (err.instruction, err.operand) == (instruction, operand)
    assert expected in err.expected and given in str(err.given)
    assert f"{instruction}: operand '{operand}': expected {err.expected}, got {err.given}" \
        in str(err)


def test_wrong_operand_type():
    k = Kernel("k")
    count = k.reg(t.u32)
    with pytest.raises(OperandError) as e:
        line = _next_line()
        k.vote_sync("all", count)
    _at(e.value, line)
    _operand_error(e.value, "vote.sync.all.pred", "a", "a .pred register",
                   "register %r1 of type .u32")


def test_wrong_float_for_integer():
    k = Kernel("k")
    with pytest.raises(OperandError) as e:
        line = _next_line()
        k.add(k.reg(t.u32), k.reg(t.f32))
    _at(e.value, line)
    _operand_error(e.value, "add.u32", "b", "a register compatible with .u32",
                   "register %f1 of type .f32")


def test_wrong_width():
    k = Kernel("k")
    a, wide = k.reg(t.u32), k.reg(t.u64)
    with pytest.raises(OperandError) as e:
        line = _next_line()
        k.add(a, wide)
    _at(e.value, line)
    _operand_error(e.value, "add.u32", "b", "a register compatible with .u32",
                   "register %rd1 of type .u64")


def test_wrong_address_width():
    k = Kernel("k")
    with pytest.raises(OperandError) as e:
        line = _next_line()
        k.ld(k.reg(t.u32), type=t.f32, space="global")
    _at(e.value, line)
    _operand_error(e.value, "ld.global.f32", "a", "a 64-bit integer register holding a global "
                   "address", "register %r1 of type .u32")


def test_wrong_state_space():
    k = Kernel("k")
    tile = k.shared_array(t.f32, 64, name="tile")
    with pytest.raises(OperandError) as e:
        line = _next_line()
        k.ld(tile, type=t.f32, space="global")
    _at(e.value, line)
    _operand_error(e.value, "ld.global.f32", "a", "a symbol in .global", "symbol tile in .shared")


def test_wrong_state_space_for_an_instruction():
    k = Kernel("k")
    table = k.param(t.u32, "table")
    with pytest.raises(OperandError) as e:
        line = _next_line()
        k.atom("add", table, 1)
    _at(e.value, line)
    _operand_error(e.value, "atom", "space", "one of 'generic', 'global', 'shared'",
                   "StateSpace.param")


def test_out_of_range_immediate():
    k = Kernel("k")
    with pytest.raises(OperandError) as e:
        line = _next_line()
        k.mov(70000, type=t.u16)
    _at(e.value, line)
    _operand_error(e.value, "mov.u16", "a", "an immediate in [0, 65535] for .u16", "70000")


def test_out_of_range_barrier_number():
    k = Kernel("k")
    with pytest.raises(OperandError) as e:
        line = _next_line()
        k.bar_sync(16)
    _at(e.value, line)
    _operand_error(e.value, "bar.sync", "id", "an integer immediate in [0, 15]", "16")


def test_unknown_qualifier_value():
    k = Kernel("k")
    g = k.cvta(k.ld_param(k.param_ptr("p")), "global", to=True)
    with pytest.raises(OperandError) as e:
        line = _next_line()
        k.atom("add", g, 1, type=t.u32, sem="seq_cst", scope="gpu")
    _at(e.value, line)
    _operand_error(e.value, "atom", "sem", "one of 'relaxed', 'acquire', 'release', 'acq_rel'",
                   "str 'seq_cst'")


def test_unknown_rounding_mode():
    k = Kernel("k")
    with pytest.raises(OperandError) as e:
        line = _next_line()
        k.cvt(k.reg(t.f32), t.s32, rnd="nearest")
    _at(e.value, line)
    _operand_error(e.value, "cvt", "rnd", "one of 'rn', 'rz'", "str 'nearest'")


def test_register_from_another_kernel():
    a, b = Kernel("a"), Kernel("b")
    foreign = b.reg(t.u32)
    with pytest.raises(OperandError) as e:
        line = _next_line()
        a.add(a.reg(t.u32), foreign)
    _at(e.value, line)
    _operand_error(e.value, "add.u32", "b", "a register of kernel 'a'", "%r1 of kernel 'b'")


def test_guard_from_another_kernel():
    a, b = Kernel("a"), Kernel("b")
    with pytest.raises(OperandError) as e:
        with a.guard(b.reg(t.pred)):
            line = _next_line()
            a.trap()
    _at(e.value, line)
    _operand_error(e.value, "trap", "guard", "a predicate of 'a'", "%p1")


def test_duplicate_label():
    k = Kernel("k")
    here = k.label("here")
    k.place(here)
    first = _next_line() - 2
    with pytest.raises(BuildError) as e:
        line = _next_line()
        k.place(here)
    _at(e.value, line)
    assert e.value.message == (f"kernel k: duplicate label 'here' (first placed at "
                               f"{__file__}:{first})")


def test_label_of_another_kernel():
    a, b = Kernel("a"), Kernel("b")
    with pytest.raises(OperandError) as e:
        line = _next_line()
        a.bra(b.label("elsewhere"))
    _at(e.value, line)
    _operand_error(e.value, "bra", "target", "a label of kernel 'a'", "elsewhere")


def test_missing_label_is_reported_at_the_branch():
    k = Kernel("k")
    never = k.label("never")
    line = _next_line()
    k.bra(never)
    with pytest.raises(BuildError) as e:
        Module([k]).emit()
    _at(e.value, line)
    assert e.value.message == ("kernel k: label 'never' is a branch target but is never placed "
                               "(call k.place(label))")


@pytest.mark.parametrize("name", ["x; trap", "a\nb", "", "1abc", "a-b", "a.b", "%r1", "_",
                                  "a b", "tid", "x}", "a[0]", "é", 3])
@pytest.mark.parametrize("what, make", [
    ("kernel", lambda name: Kernel(name)),
    ("parameter", lambda name: Kernel("k").param(t.u32, name)),
    ("register", lambda name: Kernel("k").reg(t.u32, name)),
    ("label", lambda name: Kernel("k").label(name)),
    ("shared variable", lambda name: Kernel("k").shared_array(t.u32, 4, name=name)),
    ("module variable", lambda name: Module().global_array(t.u32, 4, name=name)),
])
def test_invalid_identifier(what, make, name):
    with pytest.raises(BuildError) as e:
        make(name)
    if what == "register" and name == "tid":   # the more precise rule (issue 13)
        assert e.value.message.startswith("register name 'tid' is the name of the PTX special "
                                          "register %tid")
        return
    assert e.value.message.startswith(f"{what} name {name!r} is not a valid PTX identifier "
                                      "(letters, digits, '_' and '$'")
    _at(e.value, make.__code__.co_firstlineno)


def test_valid_identifiers_are_kept_verbatim():
    k = Kernel("$k_1")
    k.param(t.u32, "_x$")
    k.reg(t.u32, "acc$2")
    k.place(k.label("$L_top"))
    text = Module([k]).emit()
    assert ".entry $k_1(" in text and "_x$" in text and "%acc$2" in text and "$L_top:" in text


def test_parameter_name_clash():
    k = Kernel("k")
    k.param(t.u32, "n")
    with pytest.raises(BuildError) as e:
        line = _next_line()
        k.param_ptr("n")
    _at(e.value, line)
    assert e.value.message == "kernel k: parameter name 'n' is already used in this kernel"


def test_parameter_and_shared_variable_clash():
    k = Kernel("k")
    k.param_tensormap("tmap")
    with pytest.raises(BuildError) as e:
        line = _next_line()
        k.shared_array(t.b8, 128, name="tmap")
    _at(e.value, line)
    assert e.value.message == "kernel k: shared variable name 'tmap' is already used in this " \
                              "kernel"


def test_bad_parameter_type():
    k = Kernel("k")
    with pytest.raises(OperandError) as e:
        line = _next_line()
        k.param(t.f16, "h")
    _at(e.value, line)
    _operand_error(e.value, ".param", "h", "a ptxdsl type, one of t.u16, t.u32, t.s32", ".f16")
    with pytest.raises(OperandError) as e:
        k.param("u32", "s")          # a type's name is not a type (as for k.reg)
    _operand_error(e.value, ".param", "s", "a ptxdsl type", "str 'u32'")


def test_maxntid_with_reqntid():
    with pytest.raises(BuildError) as e:
        line = _next_line()
        Kernel("k", maxntid=128, reqntid=128)
    _at(e.value, line)
    assert e.value.message == ("kernel k: .maxntid and .reqntid cannot be combined (ptxas "
                               "refuses both on one kernel); keep one")


def test_reqnctapercluster_with_maxclusterrank():
    with pytest.raises(BuildError) as e:
        line = _next_line()
        Kernel("k", reqnctapercluster=(2, 1, 1), maxclusterrank=2)
    _at(e.value, line)
    assert e.value.message == ("kernel k: .reqnctapercluster and .maxclusterrank cannot be "
                               "combined (ptxas refuses both on one kernel)")


def test_nothing_is_emitted_for_a_refused_instruction():
    k = Kernel("k")
    with pytest.raises(OperandError):
        k.add(k.reg(t.u32), k.reg(t.u64))
    assert k.body == []
