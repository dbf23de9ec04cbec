"""Every public host-side tcgen05 helper answers junk with a PtxdslError or a right result
(issue 35's helpers, the standard of test_helpers_junk.py): each public class (constructor and
methods) and function of `ptxdsl.instructions.tcgen05_desc` and `tcgen05_tmem`, enumerated
from the modules' __all__ so new ones are covered, is called from a valid call with one
argument in turn replaced by junk (tests/junk.py's values plus near misses: neighbouring
shapes, other kinds' types, floats, numpy scalars, foreign enums). Allowed: a PtxdslError at
the caller's line that is the helper's own (not the safety net's wrapping of a raw
TypeError/ValueError...), or a result that is right: descriptors decode back to themselves
with plain-int fields, positions invert, sizes obey their rules. The long variant is marked
`slow`."""

from __future__ import annotations

import contextlib
import enum
import inspect
import os

import attrs
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ptxdsl import Addr, Imm, Kernel, Module, t
from ptxdsl.errors import OperandError, PtxdslError
from ptxdsl.instructions import tcgen05_desc as D
from ptxdsl.instructions import tcgen05_tmem as M
from ptxdsl.instructions.bulk import CtaGroup
from ptxdsl.instructions.wgmma import WgmmaType
from ptxdsl.instructions.wgmma_desc import SmemLayout, SwizzleMode
from ptxdsl.operands import Reg, as_int
from ptxdsl.types import ScalarType
from tests.helper_model import Model, Unsupported
from tests.junk import class_methods, junk

QUICK = settings(max_examples=15, deadline=None, database=None,
                 suppress_health_check=list(HealthCheck))
LONG = settings(max_examples=300, deadline=None, database=None,
                suppress_health_check=list(HealthCheck))

MODULES = (D, M)
_RAW = (TypeError, AttributeError, ValueError, KeyError, IndexError, OverflowError,
        ZeroDivisionError)


def _public() -> tuple[list[type], dict[str, object]]:
    classes, functions = [], {}
    for mod in MODULES:
        for name in mod.__all__:
            obj = getattr(mod, name)
            if isinstance(obj, type) and obj not in classes:
                classes.append(obj)
            elif inspect.isfunction(obj):
                functions[name] = obj
    return classes, functions


CLASSES, FUNCTIONS = _public()


def helper_methods() -> list[tuple[type, str]]:
    """(class, method) for every public method, static/class method and constructor."""
    return class_methods(CLASSES)


# -- valid calls: each case's (receiver or None, args, kwargs); junk replaces one argument ---

_LAY = SmemLayout(t.bf16, 64, 64)
_LAYS = (_LAY, SmemLayout("e4m3", 128, 128, "K", "64B"), SmemLayout(t.f16, 64, 64, "MN", "32B"))
_IDESCS = (
    D.InstrDesc("f16", 128, 256, atype="bf16", btype="bf16"),
    D.InstrDesc("f16", 64, 8, dtype="f16", atype="f16", btype="f16", negate_b=True),
    D.InstrDesc("tf32", 256, 32, cta_group=2, transpose_a=True),
    D.InstrDesc("i8", 128, 24, atype="s8", btype="u8", saturate=True),
    D.InstrDesc("f8f6f4", 128, 64, atype="e4m3", btype="e2m1", sparse=True,
                sparsity_selector=2),
    D.InstrDesc("f16", 64, 128, atype="f16", btype="f16", ws=True, max_shift=16),
    D.InstrDesc("mxf8f6f4", 256, 128, cta_group=2, atype="e5m2", btype="e3m2",
                scale_a_id=3, scale_b_id=1),
    D.InstrDesc("mxf4nvf4", 128, 64, atype="e2m1", btype="e2m1", scale_type="ue4m3",
                scale_b_id=2),
    D.InstrDesc("mxf4", 256, 256, cta_group=2, atype="e2m1", btype="e2m1", k=96),
)
_SDESCS = (D.SmemDesc100(1024, 16, 1024, "128B"), D.SmemDesc100(0, 128, 256),
           D.SmemDesc100(4096, 2048, 512, "128B_base32B", 3, True))
_ACCS = (M.AccumulatorLayout(128, 256), M.AccumulatorLayout(64, 64),
         M.AccumulatorLayout(256, 128, cta_group=2), M.AccumulatorLayout(128, 64, cta_group=2),
         M.AccumulatorLayout(64, 128, ws=True), M.AccumulatorLayout(32, 64, ws=True))


def _idesc_kwargs(d: D.InstrDesc) -> dict:
    return {f.name: getattr(d, f.name) for f in attrs.fields(D.InstrDesc)[3:]}


def _valid(case: str, k: Kernel) -> list[tuple[object, tuple, dict]]:
    """Valid calls of `case` ('Class.method', 'Class.__init__' or a function name)."""
    tile = k.shared_array(t.b8, 16384, align=1024)
    calls: dict[str, list] = {
        "InstrDesc.__init__": [(None, (d.kind, d.m, d.n), _idesc_kwargs(d)) for d in _IDESCS],
        "InstrDesc.decode": [(None, (d.value, d.kind), {"cta_group": d.cta_group, "ws": d.ws})
                             for d in _IDESCS],
        "Kind.coerce": [(None, (x,), {})
                        for x in ("f16", "kind::tf32", ".kind_i8", D.MmaKind.mxf4)],
        "Swizzle100.coerce": [(None, (x,), {}) for x in ("128B_base32B", "64B", 32, "none")],
        "SmemDesc100.__init__": [(None, (d.start, d.lbo, d.sbo),
                                  {"swizzle": d.swizzle, "base_offset": d.base_offset,
                                   "lbo_absolute": d.lbo_absolute}) for d in _SDESCS],
        "SmemDesc100.decode": [(None, (d.value,), {}) for d in _SDESCS],
        "SmemDesc100.from_layout": [(None, (lay, 2048), {"k_step": 0, "base_offset": 0})
                                    for lay in _LAYS] + [(None, (_LAY, 4096), {"k_step": 16})],
        "smem_descriptor": [(None, (k, lay, a), {}) for lay in _LAYS
                            for a in (tile, Addr(tile, 8192), 1024, k.mov(tile))],
        "check_alloc_columns": [(None, (n,), {}) for n in (32, 128, 512)],
        "tmem_columns": [(None, (n,), {}) for n in (1, 33, 512)],
        "tmem_address": [(None, (5, 8), {"base": 64}), (None, (127, 511), {})],
        "AccumulatorLayout.__init__": [(None, (a.m, a.n), {"cta_group": a.cta_group,
                                                           "ws": a.ws}) for a in _ACCS],
        "AccumulatorLayout.position": [(a, (a.rows - 1, a.n - 1), {}) for a in _ACCS],
        "AccumulatorLayout.element": [(a, (a.lanes[-1], a.columns - 1), {}) for a in _ACCS],
        "LdShape.coerce": [(None, (s.value,), {}) for s in M.LdShape],
        "registers_per_thread": [(None, ("16x256b", 8), {}), (None, ("32x32b", 128), {})],
        "fragment_position": [(None, ("16x64b", 4, 7, 3), {"half": 1}),
                              (None, ("16x32bx2", 2, 20, 1), {"half_split": 64}),
                              (None, ("16x32bx2", 2, 20, 1), {"half_split": 64, "half": 0}),
                              (None, ("32x32b", 1, 31, 0), {})],
        "fragment_map": [(None, ("16x256b", 2), {"pack16b": True}),
                         (None, ("16x32bx2", 4), {"half_split": 32, "pack16b": False}),
                         (None, ("16x128b", 1), {})],
    }
    return calls.get(case, [])      # a new helper: give it valid calls and a judge


def _near_misses(k: Kernel, other: Kernel) -> list:
    """Values a careless caller passes to these helpers in particular."""
    tile = k.shared_array(t.b8, 16384, align=1024)
    return [0, 1, 2, 3, 4, 7, 8, 12, 16, 24, 31, 32, 33, 48, 64, 96, 100, 127, 128, 129, 192,
            256, 257, 511, 512, 513, 1024, 1 << 16, (1 << 16) + 8, 1 << 18, 1 << 31, 1 << 32,
            -1, -16, -32, -600, -1024, -4096, 1.0, 2.0, 128.0, 0.5, np.int64(128), np.uint64(2),
            np.int64(1), np.uint8(8), np.int32(64), np.float32(1.0), np.bool_(False), True,
            False, None,
            Imm(128, t.u32), Imm(1, t.u32),
            "f16", "bf16", "f32", "tf32", "e4m3", "e2m1", "e3m2", "s8", "u8", "s32", "ue8m0",
            "ue4m3", "kind::f16", "kind_mxf4", "f8f6f4", "i8", "32x32b", "16x32bx2",
            ".16x256b", "128B", "128B_base32B", "none", "K", "MN", "cta_group::2",
            t.f16, t.bf16, t.f32, t.s8, t.s32, t.u8, t.b32, t.b64, t.b128, WgmmaType.f16,
            WgmmaType.tf32, *D.MmaKind, *D.Swizzle100, *M.LdShape, *SwizzleMode, *CtaGroup,
            *_LAYS, _IDESCS[0], _SDESCS[0], _ACCS[0],
            tile, Addr(tile, 16), Addr(tile, 15360), k.mov(tile), k.reg(t.u16),
            other.reg(t.u64), (1, 2), [64]]


def _values(k: Kernel, other: Kernel) -> st.SearchStrategy:
    return st.one_of(junk(k, other), st.sampled_from(_near_misses(k, other)))


# -- what a right result is ----------------------------------------------------------------

def _plain_ints(x) -> None:
    """Numbers in a result are Python ints (a float or numpy value leaks the junk)."""
    if isinstance(x, tuple):
        for y in x:
            _plain_ints(y)
    elif x is not None and not isinstance(x, enum.Enum | str | Reg):
        assert type(x) in (int, bool), f"{type(x).__name__} {x!r} in a result"


def _fields_plain(obj) -> None:
    for f in attrs.fields(type(obj)):
        _plain_ints(getattr(obj, f.name))


def _class(name: str) -> type:
    return getattr(D, name, None) or getattr(M, name)


def _arg(name: str, fn, args: tuple, kwargs: dict):
    """The value the call gave parameter `name` (its default when not given)."""
    sig = inspect.signature(fn)
    bound = sig.bind_partial(*args, **kwargs)
    bound.apply_defaults()
    return bound.arguments[name]


def _judge_instr(d) -> None:
    _fields_plain(d)
    v = d.value
    assert type(v) is int and 0 <= v < 1 << 32
    assert D.InstrDesc.decode(v, d.kind, cta_group=d.cta_group, ws=d.ws) == d


def _judge_coerce(cls, value, result) -> None:
    assert isinstance(result, cls)
    assert not isinstance(value, ScalarType), f"the type {value} taken as a {cls.__name__}"
    if isinstance(value, enum.Enum) and cls is not D.Swizzle100 and not isinstance(value, cls):
        # a foreign kind or shape is read by its value, the PTX spelling (Swizzle100 takes
        # wgmma's and the runtime's swizzle enums by name, as SwizzleMode does)
        assert value.value == result.value, value


def _judge(case: str, fn, args: tuple, kwargs: dict, result, k: Kernel) -> None:
    def a(name):
        return _arg(name, fn, args, kwargs)
    if case in ("InstrDesc.__init__", "InstrDesc.decode"):
        _judge_instr(result)
    elif case.startswith("SmemDesc100."):
        _fields_plain(result)
        assert D.SmemDesc100.decode(result.value) == result
        if case == "SmemDesc100.from_layout":
            lay = a("layout")
            assert as_int(a("address")) >= 0     # no shared address is negative
            assert result.start == as_int(a("address")) + lay.k_offset(as_int(a("k_step")))
            assert (result.lbo, result.sbo, result.base_offset) == (
                lay.lbo, lay.sbo, as_int(a("base_offset")))
    elif case.endswith(".coerce"):
        _judge_coerce(_class(case.split(".")[0]), a("value"), result)
    elif case == "smem_descriptor":
        assert (as_int(a("addr")) or 0) >= 0
        _judge_smem(k, a("layout"), result)
    elif case == "check_alloc_columns":
        assert result == as_int(a("n")) and result in (32, 64, 128, 256, 512)
    elif case == "tmem_columns":
        need = as_int(a("needed"))
        assert result in (32, 64, 128, 256, 512) and need <= result
        assert result == 32 or result // 2 < need
    elif case == "tmem_address":
        base, lane, col = (as_int(a(n)) for n in ("base", "lane", "column"))
        # an allocation's address has lane 0 and a column of the 512; the column is an
        # offset into the allocation
        assert 0 <= base < M.TMEM_COLUMNS and 0 <= col and 0 <= lane < M.TMEM_LANES
        assert result == lane << 16 | base + col
    elif case == "AccumulatorLayout.__init__":
        _fields_plain(result)
        assert result.lanes and result.alloc_columns >= result.columns
    elif case == "AccumulatorLayout.position":
        _plain_ints(result)
        assert fn.__self__.element(*result) == (as_int(a("row")), as_int(a("col")))
    elif case == "AccumulatorLayout.element":
        _plain_ints(result)
        if result is not None:
            assert fn.__self__.position(*result) == (as_int(a("lane")), as_int(a("column")))
    elif case == "registers_per_thread":
        shape = M.LdShape.coerce(a("shape"))
        split = 0 if shape is M.LdShape.s16x32bx2 else None
        assert result == len(M.fragment_map(shape, a("num"), half_split=split)[0])
    elif case == "fragment_position":
        _plain_ints(result)
        half = a("half")
        whole = M.fragment_map(a("shape"), a("num"), half_split=a("half_split"),
                               pack16b=half is not None)[as_int(a("thread"))][as_int(a("reg"))]
        assert result == (whole if half is None else whole[as_int(half)])
    elif case == "fragment_map":
        _plain_ints(result)
        assert len(result) == 32
    else:
        raise AssertionError(f"no judge for {case}")


def _judge_smem(k: Kernel, layout: SmemLayout, result) -> None:
    """The descriptor's tile lies inside the shared symbol its start address falls in."""
    assert isinstance(result, Reg) and result.type.bits == 64
    try:
        model = Model(k)
    except Unsupported:
        return
    for start in set(model.descriptor_start(result) or ()) - {None}:
        home = [b for b in model.buffers.values() if b.start <= start < b.start + b.size]
        if home:
            assert start + layout.nbytes <= home[0].start + home[0].size


# -- the property ----------------------------------------------------------------------------

def _call(case: str, data) -> None:
    k, other = Kernel("k", reqntid=128), Kernel("other", reqntid=128)
    recv, args, kwargs = data.draw(st.sampled_from(_valid(case, k)), label="valid call")
    cls_name, _, method = case.rpartition(".")
    if not cls_name:
        fn = FUNCTIONS[case]
    elif method == "__init__":
        fn = _class(cls_name)
    else:
        fn = getattr(recv if recv is not None else _class(cls_name), method)
    names = [p.name for p in inspect.signature(fn).parameters.values()
             if p.name != "k" and p.kind is not p.VAR_KEYWORD]
    target = data.draw(st.sampled_from(names), label="junk for")
    bound = inspect.signature(fn).bind_partial(*args, **kwargs)
    args_, kwargs_ = list(bound.args), dict(bound.kwargs)
    value = data.draw(_values(k, other), label="junk")
    params = list(inspect.signature(fn).parameters)
    if params.index(target) < len(args_):
        args_[params.index(target)] = value
    else:
        kwargs_[target] = value
    try:
        result = fn(*args_, **kwargs_)
    except PtxdslError as e:
        # the safety net's wrapping of a raw exception is an escape: the helper missed a check
        assert not isinstance(e.__cause__, _RAW), f"{case}: {e}"
        assert os.path.abspath(e.loc.file) == os.path.abspath(__file__), f"{case}: {e}"
        return
    _judge(case, fn, tuple(args_), kwargs_, result, k)
    k.ret()
    with contextlib.suppress(PtxdslError):
        Module([k], check=False).emit()


def _cases() -> list[str]:
    # MmaKind is named Kind (its class name, as the instructions call it)
    return [f"{cls.__name__}.{name}" for cls, name in helper_methods()] + sorted(FUNCTIONS)


@pytest.mark.parametrize("case", _cases())
@QUICK
@given(data=st.data())
def test_tcgen05_helper_junk(case, data):
    _call(case, data)


@pytest.mark.slow
@pytest.mark.parametrize("case", _cases())
@LONG
@given(data=st.data())
def test_tcgen05_helper_junk_long(case, data):
    _call(case, data)


def test_every_tcgen05_helper_is_enumerated():
    # The enumeration is what makes the property cover new helpers; each needs valid calls.
    cases = set(_cases())
    assert {"InstrDesc.__init__", "InstrDesc.decode", "SmemDesc100.from_layout",
            "Kind.coerce", "Swizzle100.coerce", "LdShape.coerce", "AccumulatorLayout.element",
            "smem_descriptor", "fragment_map", "fragment_position", "tmem_address",
            "registers_per_thread", "tmem_columns", "check_alloc_columns"} <= cases
    for case in cases:
        assert _valid(case, Kernel("k", reqntid=128)), case


# -- the escapes the property found, one test each (the words, and the user's line) ---------

def _here(err) -> bool:
    return os.path.abspath(err.value.loc.file) == os.path.abspath(__file__)


@pytest.mark.parametrize("kind", [t.f16, WgmmaType.tf32, WgmmaType.f16])
def test_kind_refuses_an_element_type(kind):
    # t.f16's value is the name 'f16': it was read as .kind::f16
    with pytest.raises(OperandError, match=r"InstrDesc: operand 'kind'.*'f16'.*got") as ei:
        D.InstrDesc(kind, 128, 64, atype="f16", btype="f16")
    assert _here(ei)

    class Tag(enum.Enum):      # another enum spelled as a kind is still taken
        f16 = "kind_f16"
        tf32 = "kind::tf32"
    assert [D.MmaKind.coerce(x) for x in Tag] == [D.MmaKind.f16, D.MmaKind.tf32]


@pytest.mark.parametrize("swizzle", [t.b32, t.b64, t.b128])
def test_swizzle_refuses_a_type(swizzle):
    # a foreign enum is read by its name, and t.b32 is named like the 32-byte swizzle
    with pytest.raises(OperandError, match=r"SmemDesc100: operand 'swizzle'") as ei:
        D.SmemDesc100(0, 16, 1024, swizzle)
    assert _here(ei)
    with pytest.raises(PtxdslError, match=r"swizzle must be one of none, 32B"):
        SwizzleMode.coerce(swizzle)


def test_numpy_fields_stay_plain_ints():
    # stored as given, they made `.value` a numpy scalar (np.uint64 for a scale id)
    d = D.InstrDesc("mxf8f6f4", 128, 64, atype="e4m3", btype="e4m3", scale_a_id=np.uint64(1),
                    scale_b_id=np.int32(2))
    s = D.InstrDesc("f8f6f4", 128, 64, atype="e4m3", btype="e4m3", sparse=True,
                    sparsity_selector=np.int64(1))
    w = D.InstrDesc("f16", 64, 64, atype="f16", btype="f16", ws=True, max_shift=np.uint8(8))
    for desc in (d, s, w):
        _judge_instr(desc)
    assert d == D.InstrDesc("mxf8f6f4", 128, 64, atype="e4m3", btype="e4m3", scale_a_id=1,
                            scale_b_id=2)


@pytest.mark.parametrize("half", [1.0, 0.0, np.float64(1)])
def test_fragment_half_is_an_int(half):
    # 1.0 in (0, 1) holds: the columns came back as floats
    with pytest.raises(OperandError, match=r"fragment_position: operand 'half'.*0 \(the low "
                       r"16 bits\) or 1") as ei:
        M.fragment_position("16x64b", 4, 7, 3, half=half)
    assert _here(ei)


@pytest.mark.parametrize(("lane", "column", "base", "words"), [
    (0, -100, 600, r"operand 'base': expected an allocation's address \(lane 0, column 0..511"),
    (0, -8, 64, r"operand 'column': expected a column of the allocation, 0 to 447"),
    (0, 448, 64, r"operand 'column'.*base \+ column in 0..511"),
])
def test_tmem_address_checks_base_and_column_apart(lane, column, base, words):
    # only base + column was checked: base 600 with column -100 made column 500
    with pytest.raises(OperandError, match=words) as ei:
        M.tmem_address(lane, column, base=base)
    assert _here(ei)
    assert M.tmem_address(1, 447, base=64) == 1 << 16 | 511


def test_layout_refuses_a_negative_address():
    # an MN-major tile's K offset carried -2048 back into the 14-bit start field
    lay = SmemLayout(t.f16, 64, 64, "MN", "128B")
    with pytest.raises(OperandError, match=r"SmemLayout.encode: operand 'address'.*0 or "
                       r"more.*-2048") as ei:
        D.SmemDesc100.from_layout(lay, -2048, k_step=32)
    assert _here(ei)
    with pytest.raises(OperandError, match=r"operand 'address'.*0 or more"):
        lay.encode(-2048, k_step=32)
    assert D.SmemDesc100.from_layout(lay, 2048, k_step=32).start == 2048 + lay.k_offset(32)
