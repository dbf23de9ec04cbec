"""`tmap-encoded-invalid`: a tensor map encoded on the device with field values the driver's
encoder would refuse (ptxas checks none; the builders check an immediate against its own
field only). Found from constants however they reach the replace (immediates, registers
that hold one); silent on the maps Triton, nvcc and the samples encode."""

from __future__ import annotations

from pathlib import Path

import pytest

from ptxdsl import Kernel, ptx, t
from ptxdsl.checker import check_kernel
from ptxdsl.frontend import parse_ptx
from ptxdsl.ptx import space_shared

ID = "tmap-encoded-invalid"
TRITON = Path(__file__).parent / "corpus" / "ptx" / "triton" / "tl_persistent_matmul_desc.ptx"


def _ids(found) -> list[str]:
    return [f.hazard.value for f in found]


# Triton's first map: f16 (elemtype 6), box 64 x 128 loaded through `mov.b32 %r22, 64`,
# the 128B swizzle. Each edit makes one field (or pair of fields) invalid.
EDITS = {
    "inner extent past the 128B span": ("mov.b32 \t%r22, 64;", "mov.b32 \t%r22, 128;"),
    "box extent past 256": ("mov.b32 \t%r23, 128;", "mov.b32 \t%r23, 300;"),
    "inner extent not 16-byte": ("mov.b32 \t%r22, 64;", "mov.b32 \t%r22, 4;"),
    "traversal stride past 8": ("mov.b32 \t%r24, 1;", "mov.b32 \t%r24, 9;"),
    "64B swizzle under a 128-byte box": (
        "tensormap.replace.tile.swizzle_mode.shared::cta.b1024.b32 [ %rd7 + 0 ], 0x3;",
        "tensormap.replace.tile.swizzle_mode.shared::cta.b1024.b32 [ %rd7 + 0 ], 0x2;"),
}


def test_triton_device_encoded_maps_check_clean():
    assert ID not in _ids(parse_ptx(TRITON.read_text()).check())


@pytest.mark.parametrize("edit", list(EDITS))
def test_an_invalid_field_in_tritons_encoding_is_found(edit):
    old, new = EDITS[edit]
    text = TRITON.read_text()
    assert text.count(old) == 1, old
    found = [f for f in parse_ptx(text.replace(old, new)).check() if f.hazard.value == ID]
    assert found, edit
    assert "tensormap.replace" in found[0].message


def _encoder(box0: int, elemtype: str, swizzle: str, interleave: str = "none") -> Kernel:
    """A map encoded in shared memory from a host template, with a constant box and the
    element type, interleave and swizzle written by the kernel."""
    k = Kernel("encode", maxntid=32)
    template = k.param_tensormap("template")
    smem = k.shared_array(t.b8, 128, align=128, name="smem_tmap")
    with k.if_(k.tid.x == 0):
        k.copy(smem, template, 128)
        ptx.tensormap_replace_box_dim(k, space_shared, smem, 0, k.mov(box0, type=t.u32))
        ptx.tensormap_replace_elemtype(k, space_shared, smem, elemtype)
        ptx.tensormap_replace_interleave_layout(k, space_shared, smem, interleave)
        ptx.tensormap_replace_swizzle_mode(k, space_shared, smem, swizzle)
    return k


@pytest.mark.parametrize("box0,elemtype,swizzle,interleave,bad", [
    (64, "bf16", "128B", "none", False),      # 128 bytes: the 128B span exactly
    (128, "bf16", "128B", "none", True),      # 256 bytes
    (32, "f32", "64B", "none", True),         # 128 bytes under 64B
    (16, "f32", "64B", "none", False),
    (8, "u8", "none", "none", True),          # 8 bytes: not a multiple of 16
    (16, "u8", "none", "none", False),
    (16, "f32", "64B", "32B", True),          # a 32B interleave needs the 32B swizzle
    (8, "f32", "32B", "32B", False),          # (that pair satisfied; an interleaved map's
])                                            # other rules are not this check's)
def test_built_encoder(box0, elemtype, swizzle, interleave, bad):
    found = _ids(check_kernel(_encoder(box0, elemtype, swizzle, interleave)))
    assert (ID in found) is bad, found


def test_the_finding_names_the_fields_and_their_replaces():
    f = [x for x in check_kernel(_encoder(128, "bf16", "128B")) if x.hazard.value == ID][0]
    assert "128 elements of 2 bytes" in f.message and "128B swizzle" in f.message
    # the box_dim, swizzle_mode and elemtype replaces, each with the user's line
    assert len(f.sites) == 3
    assert all("test_checker_tmap_fields.py" in str(s.loc) for s in f.sites)
