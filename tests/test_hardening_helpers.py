"""Issue 28, above the instruction layer: the barrier ring checks its slots against its
buffer, a refused builder adds nothing to the kernel, kernel directives are checked when
assigned, names reach the PTX as the plain string that was checked, and renaming errors name
the user's line. (The pipeline helpers' junk property and the ring's address model are in
tests/test_pipeline_junk.py.)"""

from __future__ import annotations

import enum
import os
import sys

import pytest

from ptxdsl import Kernel, Module, t
from ptxdsl.errors import BuildError
from ptxdsl.operands import Label, Reg, Symbol
from ptxdsl.types import StateSpace

HERE = os.path.abspath(__file__)


def _next_line() -> int:
    """The line after the caller's: where the offending call is written."""
    return sys._getframe(1).f_lineno + 1


def _at(err, line: int) -> None:
    assert (os.path.abspath(err.value.loc.file), err.value.loc.line) == (HERE, line)


def _ptx(k: Kernel) -> str:
    return "\n".join(line for line, _ in k.render())


# -- 4. names as str subclasses --------------------------------------------------------------------
class Name(str, enum.Enum):  # noqa: UP042 - not StrEnum: format() gives "Name.K"
    K = "kk"
    P = "pp"
    S = "ss"
    R = "rr"
    L = "ll"
    G = "gg"
    D = "dd"
    RING = "ring"
    L2 = "ll2"
    S2 = "s2"


class Hostile(str):
    """Checked by its value, but formats, prints and compares as something else."""

    def __format__(self, spec):
        return "x()\n.entry evil("

    def __str__(self):
        return "evil"

    def __eq__(self, other):
        return False

    __hash__ = str.__hash__


@pytest.mark.parametrize("make", [Name, Hostile], ids=["enum", "hostile"])
def test_every_kind_of_name_is_rendered_as_its_plain_value(make):
    def n(s):
        return Name(s) if make is Name else Hostile(s)
    k = Kernel(n("kk"))
    k.param(t.u32, n("pp"))
    k.shared_array(t.u32, 4, name=n("ss"))
    r = k.reg(t.u32, n("rr"))
    k.mov(1, dst=r)
    k.place(k.label(n("ll")))
    k.extern_shared(n("dd"))
    k.ret()
    m = Module([k], check=False)
    g = m.global_array(t.u32, 4, name=n("gg"))
    text = m.emit()
    for plain in ("kk", "pp", "ss", "rr", "ll", "dd", "gg"):
        assert plain in text
    assert "evil" not in text and "Name." not in text
    assert ".entry kk(" in text and "\t.param .u32 pp\n" in text and "%rr" in text
    assert "\nll:\n" in text and ".global .u32 gg[4];" in text
    for obj in (k, k.params[0], k.shared[0], r, g):
        assert type(obj.name) is str
    assert type(Label(n("ll2")).name) is str
    assert type(Symbol(n("s2"), StateSpace.shared, t.u32).name) is str


def test_a_subclass_cannot_pass_a_reserved_name_off_as_another():
    # `Hostile("tid") == "tid"` is False: checking by the subclass's own comparisons let a
    # special register's name through as a register name.
    with pytest.raises(BuildError, match="the name of the PTX special register %tid"):
        Kernel("k").reg(t.u32, Hostile("tid"))
    with pytest.raises(BuildError, match="register name '_' is not a valid PTX identifier"):
        Kernel("k").reg(t.u32, Hostile("_"))


# -- 5. renaming errors name the user's line -------------------------------------------------------
def test_renaming_to_an_invalid_name_names_the_users_line():
    k = Kernel("k")
    sym = k.shared_array(t.u32, 4, name="s")
    r = k.reg(t.u32, "x")
    for obj, what in ((sym, "symbol"), (r, "register")):
        with pytest.raises(BuildError, match=f"{what} name 'bad name' is not a valid PTX") as ei:
            line = _next_line()
            obj.name = "bad name"
        _at(ei, line)
    r.name = Name.R                                      # renamed to a plain str
    assert type(r.name) is str and r.render() == "%rr"
    assert isinstance(r, Reg)
