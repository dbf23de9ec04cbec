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
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ptxdsl import Addr, Kernel, Module, ptx, t
from ptxdsl.errors import BuildError, OperandError, PtxdslError
from ptxdsl.operands import Label, Reg, Symbol
from ptxdsl.pipeline import MbarrierRing, box_bytes, cluster_sync, tx_bytes
from ptxdsl.types import StateSpace
from tests.junk import junk, positional, ptx_functions, public_methods, required_keywords

HERE = os.path.abspath(__file__)


def _next_line() -> int:
    """The line after the caller's: where the offending call is written."""
    return sys._getframe(1).f_lineno + 1


def _at(err, line: int) -> None:
    assert (os.path.abspath(err.value.loc.file), err.value.loc.line) == (HERE, line)


def _ptx(k: Kernel) -> str:
    return "\n".join(line for line, _ in k.render())


# -- 1. the ring's slots inside the buffer; junk to its helpers ------------------------------------
def test_ring_slots_past_their_buffer_are_refused():
    k = Kernel("k")
    ring = MbarrierRing(k, 4)
    p = ring.producer()
    buf = k.shared_array(t.u8, 1024, align=128, name="buf")
    p.slot(buf, 256)                                    # 4 x 256 = the whole buffer
    p.slot(Addr(buf, 512), 128)                         # the upper half
    with pytest.raises(OperandError, match=r"RingView.slot: operand 'buffer': expected 4 "
                       r"slots of 1024 bytes \(4096 bytes\) inside the buffer, got buf of "
                       "1024 bytes from offset 0") as ei:
        line = _next_line()
        p.slot(buf, 1024)                               # stages 1..3 past the end
    _at(ei, line)
    with pytest.raises(OperandError, match="from offset 640"):
        p.slot(Addr(buf, 640), 128)                     # symbol + constant offset
    with pytest.raises(OperandError, match="a shared-memory array"):
        p.slot(k.param(t.u32, "n"), 4)
    # Unknown extent (dynamic shared memory, a register): only the shared window bounds it.
    dyn = k.extern_shared("dyn")
    p.slot(dyn, 4096)
    p.slot(k.mov(buf), 256)
    with pytest.raises(OperandError, match="slots that fit in shared memory"):
        p.slot(dyn, 1 << 20)


def test_ring_helpers_answer_junk_with_ptxdsl_errors():
    k = Kernel("k")
    ring = MbarrierRing(k, 2)
    c = ring.consumer()
    cases = [
        (lambda: MbarrierRing(None, 4), "MbarrierRing: operand 'k': expected the Kernel to "
         "build into, got NoneType None"),
        (lambda: MbarrierRing(k, 2, name=5), "MbarrierRing name 5 is not a valid PTX"),
        (lambda: ring.init(sync="no"), "MbarrierRing.init: operand 'sync': expected True or "
         "False"),
        (lambda: c.release(ctas=5), "ConsumerView.release: operand 'ctas': expected a list of "
         "cluster ranks"),
        (lambda: c.release(scope=None), "operand 'scope': expected 'cluster' or 'cta', got "
         "NoneType"),
        (lambda: type(c)(None, "c", 0), "ConsumerView: operand 'ring': expected an "
         "MbarrierRing"),
        (lambda: type(c)(ring, "x", 7), "use ring.producer.. / ring.consumer.."),
        (lambda: type(c)(ring, "c", 1), "use ring.producer.. / ring.consumer.."),
        (lambda: cluster_sync(None), "cluster_sync: operand 'k': expected the Kernel"),
        (lambda: tx_bytes((None, None)), "operand 'box': expected 1 to 5 positive box "
         "dimensions of at most 256 .integers: TMA's boxDim limits., got NoneType None"),
        (lambda: box_bytes(None, t.f32), "operand 'box': expected 1 to 5 positive"),
        (lambda: box_bytes((2, 3, 4, 5, 6, 7), t.f32), "operand 'box': expected 1 to 5"),
        # a set drops the repeated dimension: it counted 8 elements for an 8 x 8 box
        (lambda: tx_bytes((set([8, 8]), t.f32)), "operand 'box': expected 1 to 5 positive box "
         "dimensions of at most 256 .integers: TMA's boxDim limits., got set"),
        # numpy reads None as float64 and takes object dtypes: neither is an element type.
        (lambda: box_bytes((8, 8), None), "operand 'dtype': expected a ptxdsl type"),
        (lambda: box_bytes((8, 8), object), "operand 'dtype': expected a ptxdsl type"),
    ]
    for call, words in cases:
        with pytest.raises(PtxdslError, match=words) as ei:
            call()
        assert os.path.abspath(ei.value.loc.file) == HERE


# -- 2. a refused builder adds nothing -------------------------------------------------------------
FEW = settings(max_examples=5, deadline=None, database=None,
               suppress_health_check=list(HealthCheck))


def _tma_kernel():
    k = Kernel("k")
    src = k.ld_param(k.param_ptr("src"))                # a generic pointer: needs cvta.to.global
    smem = k.shared_array(t.u8, 1024, align=128, name="buf")
    bar = k.shared_array(t.b64, 1, align=8, name="bar")
    return k, src, smem, bar


def test_a_refused_builder_leaves_the_kernel_as_it_was():
    failing = {
        # cvta.to.global of `src` is emitted, then the size is refused.
        "ptx TMA": lambda k, src, smem, bar, p, c: ptx.cp_async_bulk(
            k, "shared::cluster", "global", smem, src, "junk", bar),
        # the result register is allocated, then the operand is refused.
        "Kernel method": lambda k, src, smem, bar, p, c: k.atom(
            "add", Addr(src), "x", type=t.u32, space="global"),
        "Kernel method, vector": lambda k, src, smem, bar, p, c: k.ld(Addr(src), type=t.u32,
                                                                         vec=3),
        # the stage's barrier address (shl + add) is computed, then the count is refused.
        "helper": lambda k, src, smem, bar, p, c: p.expect_tx("x"),
        # two remote arrives (mapa + arrive each), then the third rank is refused.
        "helper, a loop": lambda k, src, smem, bar, p, c: c.release(ctas=[0, 1, 2]),
    }
    for what, call in failing.items():
        k, src, smem, bar = _tma_kernel()
        ring = MbarrierRing(k, 2, peers=2)
        p, c = ring.producer(), ring.consumer()
        with k.if_(k.tid.x == 0):
            k.ld(Addr(src), type=t.u32)
        before = _ptx(k)
        with pytest.raises(PtxdslError):
            call(k, src, smem, bar, p, c)
        assert _ptx(k) == before, what
        with k.else_():                                 # the if_ before it is still open
            k.ret()


def test_a_refused_builder_inside_a_block_leaves_the_block_as_it_was():
    def build(fail: bool) -> str:
        k, src, smem, bar = _tma_kernel()
        with k.if_(k.tid.x == 0):
            v = k.ld(Addr(src), type=t.u32)
            if fail:
                with pytest.raises(PtxdslError):
                    ptx.cp_async_bulk(k, "shared::cluster", "global", smem, src, -1, bar)
            k.st(Addr(src, 4), v, type=t.u32)
        k.ret()
        return Module([k], check=False).emit()
    assert build(True) == build(False)


def test_a_failed_call_is_rolled_back_once_where_builders_nest():
    # ring.producer() calls k.mov/k.reg (wrapped too): only the outermost call snapshots,
    # and a failing nested builder inside a succeeding one is the outer builder's business.
    k, src, smem, bar = _tma_kernel()
    ring = MbarrierRing(k, 2)
    p = ring.producer()
    assert k._txn_depth == 0
    p.arrive_expect_tx(128)
    assert "mbarrier.arrive.expect_tx" in _ptx(k) and k._txn_depth == 0


def _refused_call_leaves_nothing(fn, data, k, other, skip_k: bool) -> None:
    req, kws = positional(fn)
    values = junk(k, other)
    k.ret()                      # a statement before: the rollback keeps what was there
    args = [data.draw(values, label=f"arg{i}") for i in range(req - skip_k)]
    chosen = data.draw(st.lists(st.sampled_from(kws), unique=True, max_size=2) if kws
                       else st.just([]), label="keywords")
    kwargs = {n: data.draw(values, label=n) for n in [*chosen, *required_keywords(fn)]}
    try:
        before = _ptx(k)
    except PtxdslError:          # junk made an unplaced label a branch target: nothing to see
        return
    try:
        fn(*([k] if skip_k else []), *args, **kwargs)
    except PtxdslError:
        assert _ptx(k) == before, "a refused builder left something in the kernel"


@pytest.mark.parametrize("name", public_methods())
@FEW
@given(data=st.data())
def test_every_refused_kernel_method_leaves_the_kernel_as_it_was(name, data):
    k, other = Kernel("k"), Kernel("other")
    _refused_call_leaves_nothing(getattr(k, name), data, k, other, skip_k=False)


@pytest.mark.parametrize("name", ptx_functions())
@FEW
@given(data=st.data())
def test_every_refused_ptx_function_leaves_the_kernel_as_it_was(name, data):
    k, other = Kernel("k"), Kernel("other")
    _refused_call_leaves_nothing(getattr(ptx, name), data, k, other, skip_k=True)


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
    ring = MbarrierRing(k, 1, name=n("ring"))
    k.ret()
    m = Module([k], check=False)
    g = m.global_array(t.u32, 4, name=n("gg"))
    text = m.emit()
    for plain in ("kk", "pp", "ss", "rr", "ll", "dd", "gg", "ring_full"):
        assert plain in text
    assert "evil" not in text and "Name." not in text
    assert ".entry kk(" in text and "\t.param .u32 pp\n" in text and "%rr" in text
    assert "\nll:\n" in text and ".global .u32 gg[4];" in text
    for obj in (k, k.params[0], k.shared[0], r, g, ring.full):
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
