"""Findings of issue 28's audit left open by tests/test_audit28.py: a type string read by numpy
instead of PTX, junk swizzle spellings, a misaligned ring stride, a descriptor int that
disagrees with its layout, raw attrs errors, the wgmma fuzz family's repeated registers and a
repeated fuzz family. One test per class of mistake: the error's words and the user's line."""

from __future__ import annotations

import os

import numpy as np
import pytest

from ptxdsl import PtxdslError, t
from ptxdsl.runtime.tensormap_desc import DataType, TiledDesc, data_type_of

HERE = os.path.abspath(__file__)


def _here(err) -> bool:
    return os.path.abspath(err.value.loc.file) == HERE


# -- 1. type strings mean PTX's types ---------------------------------------------------------
@pytest.mark.parametrize("name,want", [
    ("u8", DataType.UINT8), ("s8", DataType.UINT8), ("u16", DataType.UINT16),
    ("s16", DataType.UINT16), ("u32", DataType.UINT32), ("s32", DataType.INT32),
    ("u64", DataType.UINT64), ("s64", DataType.INT64), ("f16", DataType.FLOAT16),
    ("bf16", DataType.BFLOAT16), ("f32", DataType.FLOAT32), ("f64", DataType.FLOAT64),
    ("tf32", DataType.TFLOAT32), ("e4m3", DataType.UINT8), ("e5m2", DataType.UINT8),
    (t.f16, DataType.FLOAT16), ("float16", DataType.FLOAT16), (np.uint8, DataType.UINT8)])
def test_tensor_map_type_names_mean_ptx_types(name, want):
    """numpy read 'u8' as uint64 and 'f16' as float128: a TensorMap of PTX-named u8 data got
    8-byte elements, wrong data on the GPU."""
    assert data_type_of(name) is want


def test_tensor_map_box_of_ptx_named_type_has_ptx_bytes():
    d = TiledDesc.from_numpy_order(0x10000, (64, 64), "u8", (16, 16))
    assert d.data_type is DataType.UINT8 and d.global_strides == (64,)


def test_tensor_map_refuses_numpy_codes_and_typeless_ptx_types():
    with pytest.raises(PtxdslError, match="'f8' is numpy's code for float64, ambiguous") as e:
        data_type_of("f8")
    assert _here(e)
    with pytest.raises(PtxdslError, match="PTX type f16x2 has no CUtensorMapDataType") as e:
        TiledDesc.from_numpy_order(0x10000, (64, 64), "f16x2", (16, 16))
    assert _here(e)


def test_tx_bytes_refuses_a_numpy_code_read_otherwise_in_ptx():
    """tx_bytes(((8, 8), 'f8')) counted numpy's float64 (512 bytes) for what a PTX reader
    writes for an 8-bit float (64 bytes): the barrier's wait never ends."""
    from ptxdsl.pipeline import box_bytes
    assert box_bytes((8, 16), "e4m3") == 128 and box_bytes((8, 8), "float64") == 512
    with pytest.raises(PtxdslError, match=r"box_bytes: operand 'dtype': expected a PTX type "
                       r"name or numpy's full name \('float64'\).*got 'f8'") as e:
        box_bytes((8, 8), "f8")
    assert _here(e)


def test_buffer_refuses_a_ptx_type_name_numpy_reads_otherwise():
    from ptxdsl.runtime.memory import DeviceBuffer
    with pytest.raises(PtxdslError, match=r"DeviceBuffer.empty: operand 'dtype'.*'f16' \(numpy "
                       "reads it as float128\\)") as e:
        DeviceBuffer.empty((4,), "f16")
    assert _here(e)


# -- 2. swizzle spellings ---------------------------------------------------------------------
def test_swizzle_takes_only_its_spellings():
    """'128bbbb' read as 128B (trailing B's stripped), and a string enum member was read by
    its name: a member named B128 whose value is 'none' swizzled 128B."""
    import enum

    from ptxdsl.instructions.wgmma_desc import SmemLayout, SwizzleMode
    from ptxdsl.runtime.tensormap_enums import Swizzle

    class Named(enum.StrEnum):
        B128 = "none"

    assert SwizzleMode.coerce(Named.B128) is SwizzleMode.none
    assert SwizzleMode.coerce(Swizzle.B128) is SwizzleMode.b128   # runtime's, by its name
    assert [SwizzleMode.coerce(v) for v in ("128B", "b64", " 32b ", 128, "NONE")] == [
        SwizzleMode.b128, SwizzleMode.b64, SwizzleMode.b32, SwizzleMode.b128, SwizzleMode.none]
    with pytest.raises(PtxdslError, match=r"swizzle must be one of none, 32B, 64B, 128B \(the "
                       r"spellings taken, any case: none, 0, interleave, 32b, b32.*got '128bbbb'"
                       ) as e:
        SmemLayout(t.bf16, 64, 64, "K", "128bbbb")
    assert _here(e)


# -- 3. the ring's slot stride ----------------------------------------------------------------
def test_ring_slot_stride_keeps_the_slots_aligned():
    """A stride of 1000 put slot 1 of a TMA ring 1000 bytes in: 8-byte aligned, where TMA
    needs 128 (and 40 left slot 1 of 16-byte vectors at 8)."""
    from ptxdsl import Kernel
    from ptxdsl.pipeline import MbarrierRing
    k = Kernel("k", reqntid=128)
    buf = k.shared_array(t.b8, 8192, align=1024, name="buf")
    p = MbarrierRing(k, 4).producer()
    p.slot(buf, 1024)
    p.slot(buf, 48)                    # 16-byte slots: 16-aligned
    p.slot(buf, 4)                     # a ring of words
    with pytest.raises(PtxdslError, match=r"RingView.slot: operand 'stride': expected a "
                       r"multiple of 128 bytes .*TMA or bulk buffer\); e.g. 1024, got 1000"
                       ) as e:
        p.slot(buf, 1000)
    assert _here(e)
    with pytest.raises(PtxdslError, match="expected a multiple of 16 bytes .*got 40") as e:
        p.slot(buf, 40)
    assert _here(e)


def test_ring_fuzz_model_knows_the_stride_rule(monkeypatch):
    """The ring family draws misaligned strides; the model calls their refusal a
    precondition, and a refusal it does not know of stays a disagreement."""
    from ptxdsl import fuzz
    from ptxdsl.fuzz import case, model
    cfg = {"stages": 4, "stride": 1000, "size": 4096, "storage": None, "side": "producer"}
    ring = case("ring", "helper.ring", (), cfg, None, **cfg)
    (o,) = fuzz.check([ring]).outcomes
    assert o.verdict == "refused:precondition", o.detail
    monkeypatch.setattr(model, "strict", lambda name, cfg: [])
    (o,) = fuzz.check([ring]).outcomes
    assert o.verdict == "refused:in-bounds"


# -- 4. a descriptor int and its layout -------------------------------------------------------
def test_descriptor_int_must_describe_its_layout():
    """MatrixDescriptor(layout, int) took any 64 bits: a no-swizzle descriptor labelled as a
    128B-swizzled tile (k_step and wgmma's checks then trusted the label)."""
    from ptxdsl.instructions.wgmma_desc import MatrixDescriptor, SmemLayout
    layout = SmemLayout(t.bf16, 64, 64, "K", "128B")
    assert MatrixDescriptor(layout, layout.encode(1024) + 2).value == layout.encode(1024) + 2
    other = SmemLayout(t.bf16, 64, 64, "K", "none")
    with pytest.raises(PtxdslError, match=r"MatrixDescriptor: operand 'value': expected a "
                       r"descriptor of the 64x64 16-bit K-major, 128B swizzle tile \(LBO 16, "
                       r"SBO 1024, 128B swizzle\), got 0x\w+: LBO 1024, SBO 128, no swizzle"
                       ) as e:
        MatrixDescriptor(layout, other.encode(1024))
    assert _here(e)
    with pytest.raises(PtxdslError, match="sets reserved bits 0x4000") as e:
        MatrixDescriptor(layout, layout.encode(1024) | 1 << 14)
    assert _here(e)


# -- 5. assigning to frozen helpers -----------------------------------------------------------
def test_frozen_helpers_refuse_assignment_in_ptxdsl_words():
    """`lab.name = ...`, `layout.k = ...` and `desc.value = ...` raised attrs'
    FrozenInstanceError, a raw AttributeError without the user's line."""
    from ptxdsl import Kernel
    from ptxdsl.instructions.wgmma_desc import SmemLayout, descriptor
    k = Kernel("k", reqntid=128)
    lab = k.label("top")
    layout = SmemLayout(t.bf16, 64, 64, "K", "128B")
    desc = descriptor(k, layout, 1024)
    for obj, field, why in ((lab, "name", "a label is placed and branched to by its name"),
                            (layout, "k", "make another SmemLayout"),
                            (desc, "value", "checked against its layout")):
        with pytest.raises(PtxdslError, match=rf"{type(obj).__name__}: \.{field} cannot be "
                           rf"assigned or deleted \(.*{why}") as e:
            setattr(obj, field, getattr(obj, field))
        assert _here(e)
    with pytest.raises(PtxdslError, match="Label: .name cannot be assigned or deleted"):
        del lab.name
    assert lab.name == "top" and desc.layout is layout


# -- 6. the wgmma fuzz family draws repeated registers ----------------------------------------
def _twice():
    from ptxdsl.fuzz import R, case
    d = (R("f32"), R("f32"), R("f32", idx=2), R("f32", idx=3))   # %x_f32 as d[0] and d[1]
    return case("wgmma", "ptx.wgmma_mma_async", (d, R("b64", idx=1), R("b64", idx=2),
                                                 R("pred")),
                {"atype": "f16", "dtype": "f32", "n": 8},
                "wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16 {%x_f32, %x_f32, %x_f32_2, "
                "%x_f32_3}, %x_b64_1, %x_b64_2, %x_pred, 1, 1, 0, 0;")


def test_a_repeated_accumulator_rule_removed_is_a_disagreement(monkeypatch):
    """ptxas takes one register as two accumulators; only the policy table says why ptxdsl
    refuses (instructions/wgmma.check_distinct), and the fuzz family now draws such cases."""
    from ptxdsl import fuzz
    from ptxdsl.fuzz import policy
    (o,) = fuzz.check([_twice()]).outcomes
    assert o.verdict == "refused:policy:wgmma-distinct"
    monkeypatch.setattr(policy, "RULES", [r for r in policy.RULES if r.id != "wgmma-distinct"])
    (o,) = fuzz.check([_twice()]).outcomes
    assert o.verdict == "refused:accepted"


def test_wgmma_family_draws_a_register_twice():
    from hypothesis import HealthCheck, given, settings

    from ptxdsl.fuzz.wgmma import wgmmas
    seen = []

    @settings(max_examples=300, deadline=None, database=None, derandomize=True,
              suppress_health_check=list(HealthCheck))
    @given(wgmmas())
    def draw(c):
        regs = [a for a in c.args[:2] if isinstance(a, tuple)] if c.fact("op") == "mma" else []
        seen.extend(len(set(r)) < len(r) for r in regs)

    draw()
    assert any(seen)


# -- 7. a fuzz family named twice -------------------------------------------------------------
def test_fuzz_refuses_a_family_named_twice(capsys):
    """`--families fence,fence` ran the fence family twice."""
    from ptxdsl.__main__ import main
    with pytest.raises(SystemExit) as ei:
        main(["fuzz", "--families", "fence,arith, fence", "--examples", "1"])
    err = capsys.readouterr().err
    assert ei.value.code == 2
    assert "python -m ptxdsl fuzz: error: argument --families: 'fence' given more than once" \
        in err
