"""ptxdsl.epilogue.TmaStoreEpilogue on the CPU: the PTX sequence of one 64 x 256 tile (each
half's wait for the buffer, stmatrix, proxy fence, the two box stores, in that order), clean
under the checker and assembled; its refusals; the host check of the output map. The GPU side
is the two GEMM samples' runs (tests/test_gemm_gpu.py, tests/test_moe_gpu.py), which compare
every stored value with numpy."""

from __future__ import annotations

import re

import pytest

from ptxdsl import BuildError, Kernel, Module, t
from ptxdsl.epilogue import STAGING_BYTES, TmaStoreEpilogue
from ptxdsl.runtime.tensormap_desc import TiledDesc
from ptxdsl.testing import assemble_declared


def _kernel(n: int = 256) -> Kernel:
    k = Kernel("epi", reqntid=128)
    out = k.param_tensormap("out")
    staging = k.extern_shared("smem", align=1024)
    acc = k.fragment(t.f32, shape=(64, n))
    epi = TmaStoreEpilogue(k, k.mov(staging), k.tensormap_addr(out), 1)
    epi.store(acc.to_packed(t.bf16), k.mul(k.ctaid.y, 64), k.mul(k.ctaid.x, n))
    epi.finish()
    k.ret()
    return k


def test_one_tile_emits_each_half_in_order_and_assembles():
    text = Module([_kernel()], target="sm_90a").emit()
    assert assemble_declared(text)[:4] == b"\x7fELF"
    body = [line.strip() for line in text.splitlines()]
    marks = {"wait_group.read 0;": "W", "bar.sync 1, 128;": "B", "stmatrix.sync": "S",
             "fence.proxy.async.shared::cta;": "F",
             "cp.async.bulk.tensor.2d.global.shared::cta": "T",
             "cp.async.bulk.commit_group;": "C", "cp.async.bulk.wait_group 0;": "E"}
    seq = "".join(mark for line in body for key, mark in marks.items() if key in line)
    assert seq == ("WB" + "S" * 8 + "FB" + "TTC") * 2 + "E"
    # the two boxes of a half sit STAGING_BYTES / 2 apart; columns 64 apart
    assert len(re.findall(rf"add\.u32 %r\d+, %r\d+, {STAGING_BYTES // 2};", text)) >= 1
    assert {int(c) for c in re.findall(r"add\.u32 %r\d+, %r\d+, (64|128|192);", text)} >= \
        {64, 128, 192}


def test_checker_passes_it_clean():
    from ptxdsl.checker import check_module
    assert check_module(Module([_kernel()], target="sm_90a")) == []


def test_refusals():
    k = Kernel("bad", reqntid=128)
    out = k.param_tensormap("out")
    with pytest.raises(BuildError, match="staging must be a 32-bit shared address register"):
        TmaStoreEpilogue(k, k.reg(t.u64), k.tensormap_addr(out), 1)
    epi = TmaStoreEpilogue(k, k.reg(t.u32), k.tensormap_addr(out), 1)
    with pytest.raises(BuildError, match="packed 16-bit fragment with N a multiple of 64"):
        epi.store(k.fragment(t.f32, shape=(64, 128)), 0, 0)        # not packed
    with pytest.raises(BuildError, match="packed 16-bit fragment with N a multiple of 64"):
        epi.store(k.fragment(t.f32, shape=(64, 96)).to_packed(t.bf16), 0, 0)
    with pytest.raises(BuildError, match="packed 16-bit fragment with N a multiple of 64"):
        epi.store(k.fragment(t.f32, shape=(64, 128)).to_packed("e4m3"), 0, 0)


@pytest.mark.parametrize("n,seq", [(64, "WB" + "S" * 4 + "FB" + "TC"),
                                   (192, "WB" + "S" * 8 + "FB" + "TTC" + "WB" + "S" * 4 + "FB"
                                    + "TC")])
def test_64_column_remainder_takes_one_box(n, seq):
    """N = 64 and N = 192: the last 64 columns are one pass of 4 stmatrix and one box, from
    the fragment's registers that hold them."""
    text = Module([_kernel(n)], target="sm_90a").emit()
    assert assemble_declared(text)[:4] == b"\x7fELF"
    marks = {"wait_group.read 0;": "W", "bar.sync 1, 128;": "B", "stmatrix.sync": "S",
             "fence.proxy.async.shared::cta;": "F",
             "cp.async.bulk.tensor.2d.global.shared::cta": "T",
             "cp.async.bulk.commit_group;": "C"}
    got = "".join(mark for line in text.splitlines() for key, mark in marks.items()
                  if key in line)
    assert got == seq
    from ptxdsl.checker import check_module
    assert check_module(Module([_kernel(n)], target="sm_90a")) == []


@pytest.mark.parametrize("dtype,box,swizzle,ok", [
    ("BFLOAT16", (64, 64), "128B", True),
    ("FLOAT16", (64, 64), "128B", True),
    ("BFLOAT16", (64, 32), "128B", False),
    ("BFLOAT16", (64, 64), "64B", False),
    ("FLOAT32", (64, 32), "128B", False),
])
def test_output_map_check(dtype, box, swizzle, ok):
    desc = TiledDesc.from_numpy_order(1 << 20, (1000, 512), dtype, box, swizzle=swizzle)
    if ok:
        TmaStoreEpilogue.check_tensormap(desc)
    else:
        with pytest.raises(BuildError, match="the output map needs a box of"):
            TmaStoreEpilogue.check_tensormap(desc)

