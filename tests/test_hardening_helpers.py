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


# -- 3. directives assigned after construction -----------------------------------------------------
@pytest.mark.parametrize("attr, value, words", [
    ("maxntid", ("1, 1, 1\n)\n.entry evil(", "2"), r"kernel directive \.maxntid: expected 1 "
     "to 3 positive integers"),
    ("maxntid", (1, 2, 3, 4), r"\.maxntid: expected 1 to 3 positive integers"),
    ("maxnreg", 1000, r"kernel directive \.maxnreg: expected an integer in \[1, 255\], got "
     "1000"),
    ("minnctapersm", 2, r"kernel k: \.minnctapersm needs \.maxntid or \.reqntid"),
    ("maxclusterrank", "4", r"\.maxclusterrank: expected an integer in"),
    ("reqnctapercluster", (8, 2, 2), "32 CTAs per cluster; no GPU launches more than 16"),
    ("visible", "yes", "kernel k: visible must be True or False, got str 'yes'"),
    ("explicitcluster", 1, "kernel k: explicitcluster must be True or False"),
])
def test_directives_are_checked_when_assigned(attr, value, words):
    k = Kernel("k")
    k.ret()
    with pytest.raises(BuildError, match=words) as ei:
        line = _next_line()
        setattr(k, attr, value)
    _at(ei, line)
    assert _ptx(k).count(".entry") == 1
    assert getattr(k, attr) == getattr(Kernel("k"), attr)        # unchanged


def test_directive_rules_between_directives_hold_on_assignment():
    k = Kernel("k", maxntid=128, minnctapersm=2)
    with pytest.raises(BuildError, match=r"\.maxntid and \.reqntid cannot be combined"):
        k.reqntid = 128
    with pytest.raises(BuildError, match=r"\.minnctapersm needs \.maxntid or \.reqntid"):
        k.maxntid = None
    c = Kernel("c", reqnctapercluster=2)
    with pytest.raises(BuildError, match=r"\.reqnctapercluster and \.maxclusterrank cannot"):
        c.maxclusterrank = 4
    c.reqnctapercluster = None
    c.maxclusterrank = 4
    with pytest.raises(BuildError, match=r"\.reqnctapercluster and \.maxclusterrank cannot"):
        c.reqnctapercluster = (2, 1)


def test_directives_assigned_after_construction_render_like_the_constructors():
    k = Kernel("k")
    k.reqntid = 256                       # an int, as the constructor takes it
    k.maxnreg = 128
    k.minnctapersm = 2
    k.visible = False
    k.ret()
    built = Kernel("k", reqntid=256, maxnreg=128, minnctapersm=2, visible=False)
    built.ret()
    assert _ptx(k) == _ptx(built)
    assert k.reqntid == (256,)


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
