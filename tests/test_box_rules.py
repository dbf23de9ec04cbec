"""TMA's box rules, one copy (`instructions._tma_box`) for every helper that takes a box:
`pipeline.box_bytes` / `tx_bytes`, `MbarrierRing(loads=...)`, `Kernel.param_tensormap(box=...)`,
`SmemLayout.tma_box`, a `TiledDesc` / `TensorMap` given to them or to `check_module(maps=...)`,
the `tensormap.replace .box_dim` form and `runtime.tensormap_desc.validate`.

`tx_bytes(((300, 64), t.f16))` counted 38400 bytes for a box no tensor map can have (boxDim
is 1..256): the expect_tx of a copy that can never be encoded."""

from __future__ import annotations

import os

import numpy as np
import pytest

from ptxdsl import Kernel, Module, t
from ptxdsl.checker import check_module
from ptxdsl.errors import OperandError
from ptxdsl.instructions import _tma_box
from ptxdsl.instructions.tensormap import TensormapReplaceDim
from ptxdsl.instructions.wgmma_desc import Major, SmemLayout
from ptxdsl.operands import Addr
from ptxdsl.pipeline import MbarrierRing, box_bytes, tx_bytes
from ptxdsl.runtime.tensormap import TensorMap
from ptxdsl.runtime.tensormap_desc import TiledDesc, validate

HERE = os.path.abspath(__file__)


def _ring(box):
    k = Kernel("k", reqntid=128)
    return MbarrierRing(k, 2, loads={k.param_tensormap("m"): box})


def _declare(box, **kw):
    return Kernel("k", reqntid=128).param_tensormap("m", box=box, **kw)


# Each helper, as a user calls it with a numpy-order box of f16 (and an optional swizzle).
HELPERS = {
    "box_bytes": lambda box, sw: box_bytes(box, t.f16),
    "tx_bytes": lambda box, sw: tx_bytes((box, t.f16)),
    "MbarrierRing": lambda box, sw: _ring((box, t.f16)),
    "param_tensormap": lambda box, sw: _declare(box, dtype=t.f16, swizzle=sw),
}

# One box per class of mistake: (box, swizzle, the words of the rule it breaks).
RANGE = r"expected 1 to 5 positive box dimensions of at most 256 \(integers"
MISTAKES = {
    "extent above 256": ((8, 300), None, RANGE),
    "zero extent": ((0, 64), None, RANGE),
    "negative extent": ((-8, 64), None, RANGE),
    "six dimensions": ((2, 2, 2, 2, 2, 64), None, RANGE),
    "no dimensions": ((), None, RANGE),
    "bool extent": ((True, 64), None, RANGE),
    "float extent": ((8.0, 64), None, RANGE),
    "inner not 16 bytes": ((64, 4), None, r"an innermost extent of a multiple of 16 bytes"),
}


def _refused(call, words, helper):
    with pytest.raises(OperandError, match=words) as e:
        call()
    msg = str(e.value)
    assert f"{helper}: operand 'box'" in msg and "got " in msg, msg
    assert os.path.abspath(e.value.loc.file) == HERE, e.value.loc
    return msg


@pytest.mark.parametrize("mistake", sorted(MISTAKES))
@pytest.mark.parametrize("helper", sorted(HELPERS))
def test_every_helper_refuses_each_box_mistake(helper, mistake):
    box, sw, words = MISTAKES[mistake]
    msg = _refused(lambda: HELPERS[helper](box, sw), words, helper)
    assert repr(tuple(box))[:-1] in msg, msg        # the box as given


def test_the_inner_extent_names_its_bytes():
    msg = _refused(lambda: tx_bytes(((64, 4), t.f16)), "multiple of 16", "tx_bytes")
    assert "the last (innermost) extent 4 x 2 bytes = 8 bytes" in msg


def test_a_declared_swizzle_bounds_the_inner_extent():
    # 128 f16 = 256 bytes per row: more than the 128B swizzle's span, which TMA refuses.
    msg = _refused(lambda: _declare((8, 128), dtype=t.f16, swizzle="128B"),
                   r"an innermost extent of at most the swizzle's 128 bytes", "param_tensormap")
    assert "= 256 bytes" in msg
    _refused(lambda: _declare((8, 32), dtype=t.f32, swizzle="64B"), "swizzle's 64 bytes",
             "param_tensormap")


def test_boxes_at_the_limits_are_taken():
    assert box_bytes((256, 8), t.f16) == 256 * 8 * 2
    assert tx_bytes(((2, 2, 2, 2, 8), t.f16)) == 16 * 16
    assert box_bytes(np.array([4, 16]), "u8") == 64 and box_bytes(8, t.f16) == 16
    assert _declare((8, 64), dtype=t.f16, swizzle="128B") is not None    # 128 bytes == span
    assert _declare((256, 256), dtype=t.u8) is not None


# -- descriptions: a TiledDesc or TensorMap handed to a helper -----------------------------------
def _desc(box, swizzle="NONE"):
    """A description built without its rules (TiledDesc is checked by `validate`)."""
    return TiledDesc.from_numpy_order(1 << 20, (1024, 1024), np.float16, box, swizzle=swizzle)


def _check_module(desc):
    k = Kernel("k", reqntid=128)
    m = Module([k])
    return check_module(m, maps={"m": desc})


DESC_HELPERS = {
    "tx_bytes": lambda d: tx_bytes(d),
    "tx_bytes (TensorMap)": lambda d: tx_bytes(TensorMap.from_bytes(bytes(128), d)),
    "MbarrierRing": lambda d: _ring(d),
    "param_tensormap": lambda d: _declare(d),
    "check_module": _check_module,
}
DESC_MISTAKES = {
    "extent above 256": ((300, 64), "NONE", RANGE, "box_dim_range"),
    "inner not 16 bytes": ((64, 4), "NONE", "a multiple of 16 bytes", "box_inner_bytes"),
    "inner past the swizzle span": ((64, 128), "128B", "at most the swizzle's 128 bytes",
                                    "swizzle_span"),
}


@pytest.mark.parametrize("mistake", sorted(DESC_MISTAKES))
@pytest.mark.parametrize("helper", sorted(DESC_HELPERS))
def test_a_description_with_a_bad_box_is_refused(helper, mistake):
    box, swizzle, words, rule = DESC_MISTAKES[mistake]
    d = _desc(box, swizzle)
    assert rule in [v.rule for v in validate(d)]          # the same rule, one copy
    _refused(lambda: DESC_HELPERS[helper](d), words, helper.split()[0])


def test_a_valid_description_is_counted():
    d = _desc((64, 64), "128B")
    assert validate(d) == [] and tx_bytes(d) == 64 * 64 * 2
    assert _declare(d) is not None


# -- SmemLayout: the box of one atom column --------------------------------------------------------
def test_an_atom_column_taller_than_a_box_is_refused():
    tall = SmemLayout(t.bf16, 512, 64)                    # 512 rows: no box holds them
    with pytest.raises(OperandError, match=r"SmemLayout.tma_box: operand 'mn': expected at "
                       r"most 256 rows in an atom column.*got 512") as e:
        _ = tall.tma_box
    assert os.path.abspath(e.value.loc.file) == HERE
    with pytest.raises(OperandError, match=r"SmemLayout.tma_box: operand 'k'"):
        _ = SmemLayout(t.bf16, 64, 512, major=Major.MN).tma_box
    _refused(lambda: _declare(tall), RANGE, "param_tensormap")
    _refused(lambda: _ring(tall), RANGE, "MbarrierRing")
    assert SmemLayout(t.bf16, 256, 64).tma_box == (64, 256)
    # Two boxes of 256 rows fill the column: the map is still checked against the layout.
    tall.check_tensormap(TiledDesc.from_numpy_order(1 << 20, (1024, 1024), "bfloat16",
                                                    (256, 64), swizzle="128B"))


# -- the instruction layer and the runtime read the same limits -----------------------------------
def test_one_copy_of_the_limits():
    k = Kernel("k", reqntid=128)
    buf = k.shared_array(t.b8, 128, align=128)
    TensormapReplaceDim("box_dim", "shared::cta", Addr(buf), 0, _tma_box.MAX_BOX_DIM)
    with pytest.raises(OperandError, match=r"a box extent of 1..256 elements"):
        TensormapReplaceDim("box_dim", "shared::cta", Addr(buf), 0, _tma_box.MAX_BOX_DIM + 1)
    assert [v.rule for v in validate(_desc((257, 8)))] == ["box_dim_range"]
    assert _tma_box.inner_problems(200, 128) == ("box_inner_bytes", "swizzle_span")
    assert _tma_box.inner_problems(128, 128) == () and _tma_box.inner_problems(48, None) == ()
