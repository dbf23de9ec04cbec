"""ptxdsl.epilogue.TmaStoreEpilogue on the CPU: the PTX sequence of one 64 x 256 tile (each
half's wait for the buffer, stmatrix, proxy fence, the two box stores, in that order), clean
under the checker and assembled; its refusals; the host check of the output map. The GPU side
is the two GEMM samples' runs (tests/test_gemm_gpu.py, tests/test_moe_gpu.py), which compare
every stored value with numpy. Maps of 3 to 5 dimensions (issue 32): the `.Nd` stores and
their coordinates on the CPU, and on the GPU a 3-D store whose tiles run past a sequence's end
(clipped there, the next sequence untouched). A store given another staging buffer (issue
32's attention stages O in a ring stage of Q) writes and reads that one, checked the same."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from ptxdsl import BuildError, Kernel, Module, t
from ptxdsl.epilogue import STAGING_BYTES, TmaStoreEpilogue
from ptxdsl.fragments import fragment_coords
from ptxdsl.runtime.tensormap_desc import TiledDesc
from ptxdsl.testing import assemble_declared
from tests.child_env import child_env

ROOT = Path(__file__).resolve().parent.parent
HERE = os.path.abspath(__file__)


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



# -- N-D maps (issue 32) ------------------------------------------------------------------------
SEQ, HEADS, D = 100, 3, 128      # a 3-D output (col, row, batch_head): rows end at SEQ
FIRST_ROW = 64                   # CTA x stores rows FIRST_ROW + 64 x ..: rows 0..63 stay unwritten


def _nd_kernel(rank: int = 3) -> Kernel:
    """CTA (x, y) stores 64 rows from FIRST_ROW + 64 x of batch-head y (4-D: head y % 2, batch
    y // 2), each thread's value i being thread * D/2 + i + 8192 * y (bf16-rounded), through a
    map of `rank` dimensions."""
    k = Kernel(f"epi{rank}d", reqntid=128)
    out = k.param_tensormap("out")
    staging = k.extern_shared("smem", align=1024)
    acc = k.fragment(t.f32, shape=(64, D), zero=False)
    first = k.add(k.mul(k.and_(k.tid.x, 127), D // 2), k.mul(k.ctaid.y, 8192))
    for i, r in enumerate(acc):
        k.cvt(k.add(first, i), t.f32, rnd="rn", dst=r)
    epi = TmaStoreEpilogue(k, k.mov(staging), k.tensormap_addr(out), 1, rank=rank)
    outer = (k.ctaid.y,) if rank == 3 else (k.and_(k.ctaid.y, 1), k.shr(k.ctaid.y, 1))
    epi.store(acc.to_packed(t.bf16), k.add(k.mul(k.ctaid.x, 64), FIRST_ROW), 0, *outer)
    epi.finish()
    k.ret()
    return k


@pytest.mark.parametrize("rank", [3, 4])
def test_nd_store_gives_every_coordinate_and_assembles(rank):
    text = Module([_nd_kernel(rank)], target="sm_90a").emit()
    assert assemble_declared(text)[:4] == b"\x7fELF"
    stores = re.findall(rf"cp\.async\.bulk\.tensor\.{rank}d\.global\.shared::cta\.tile\."
                        r"bulk_group \[%rd\d+, \{(.*?)\}\]", text)
    assert [s.split(", ")[0] for s in stores] == ["0", "64"]     # one box per 64 columns
    assert all(len(s.split(", ")) == rank for s in stores)
    assert "cp.async.bulk.tensor.2d" not in text
    from ptxdsl.checker import check_module
    assert check_module(Module([_nd_kernel(rank)], target="sm_90a")) == []


def _next_line() -> int:
    return sys._getframe(1).f_lineno + 1


def test_nd_refusals():
    k = Kernel("bad", reqntid=128)
    tmap = k.tensormap_addr(k.param_tensormap("out"))
    packed = k.fragment(t.f32, shape=(64, 64)).to_packed(t.bf16)
    for rank in (1, 6, 2.0, True):
        with pytest.raises(BuildError, match=r"TmaStoreEpilogue: operand 'rank': expected the "
                           r"output map's dimensions: an int from 2 to 5"):
            TmaStoreEpilogue(k, k.reg(t.u32), tmap, 1, rank=rank)
    epi = TmaStoreEpilogue(k, k.reg(t.u32), tmap, 1, rank=4)
    with pytest.raises(BuildError, match=r"the output map has 4 dimensions \(rank=4\): give "
                       r"row0, col0 and 2 further coordinates .* got 1 after col0; a map of "
                       r"another rank needs an epilogue made with rank=3") as err:
        line = _next_line()
        epi.store(packed, 0, 0, 5)
    assert (os.path.abspath(err.value.loc.file), err.value.loc.line) == (HERE, line)
    with pytest.raises(BuildError, match="the output map has 2 dimensions"):
        TmaStoreEpilogue(k, k.reg(t.u32), tmap, 2).store(packed, 0, 0, 5)
    with pytest.raises(BuildError, match=r"operand 'coordinate 3': expected a tensor "
                       r"coordinate"):
        epi.store(packed, 0, 0, 1, -1)


def test_nd_output_map_check():
    three = TiledDesc.from_numpy_order(1 << 20, (HEADS, SEQ, D), "BFLOAT16", (1, 64, 64),
                                       swizzle="128B")
    TmaStoreEpilogue.check_tensormap(three, rank=3)
    with pytest.raises(BuildError, match=r"needs a box of \[64, 64\] 16-bit elements .*"
                       r"\(rank 2\), got box \[64, 64, 1\], .*the map has 3 dimensions: an "
                       r"epilogue made with rank=3 checks it with check_tensormap\(map, "
                       r"rank=3\)"):
        TmaStoreEpilogue.check_tensormap(three)
    wide = TiledDesc.from_numpy_order(1 << 20, (HEADS, SEQ, D), "BFLOAT16", (2, 64, 64),
                                      swizzle="128B")
    with pytest.raises(BuildError, match=r"needs a box of \[64, 64, 1\] .*got box "
                       r"\[64, 64, 2\]"):
        TmaStoreEpilogue.check_tensormap(wide, rank=3)
    with pytest.raises(BuildError, match="operand 'rank': expected the epilogue's rank"):
        TmaStoreEpilogue.check_tensormap(three, rank=9)


def expected_3d() -> np.ndarray:
    """What _nd_kernel(3) launched on (1, HEADS) leaves in a (HEADS, SEQ, D) bf16 tensor filled
    with 0xFFFF: rows FIRST_ROW..SEQ-1 of each batch-head hold its tile's values (rounded to
    bf16 as cvt.rn does), every other row keeps the fill."""
    value = np.zeros((HEADS, SEQ, D), np.float32)
    written = np.zeros((HEADS, SEQ, D), bool)
    for bh in range(HEADS):
        for thread in range(128):
            for i, (r, c) in enumerate(fragment_coords(D, thread)):
                if FIRST_ROW + r < SEQ:
                    value[bh, FIRST_ROW + r, c] = thread * D // 2 + i + 8192 * bh
                    written[bh, FIRST_ROW + r, c] = True
    bits = value.view(np.uint32).astype(np.uint64)
    bf16 = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)
    return np.where(written, bf16, np.uint16(0xFFFF))


def run_3d_store() -> tuple[bool, str]:
    """Launch _nd_kernel(3) on (1, HEADS); compare the whole tensor with expected_3d."""
    from ptxdsl import runtime as rt
    from ptxdsl.sample_runner import sync
    mod = Module([_nd_kernel(3)], name="epi3d").load()
    out = rt.DeviceBuffer.empty((HEADS, SEQ, D), np.uint16)
    out.memset(0xFF)
    tmap = rt.TensorMap.tiled(out, (HEADS, SEQ, D), "BFLOAT16", (1, 64, 64), swizzle="128B")
    TmaStoreEpilogue.check_tensormap(tmap, rank=3)
    mod["epi3d"].launch(grid=(1, HEADS), block=128, args=(tmap,), shared_mem=STAGING_BYTES)
    sync()
    got, want = out.to_numpy(), expected_3d()
    bad = np.argwhere(got != want)
    if not len(bad):
        return True, f"{want.size} values equal"
    return False, (f"{len(bad)}/{want.size} differ, first at {tuple(bad[0])}: got "
                   f"{got[tuple(bad[0])]:#x}, want {want[tuple(bad[0])]:#x}")


def test_3d_expectation_leaves_the_rows_outside_the_tile():
    """On the CPU: the GPU check can tell a clipped store from one that spills: the rows
    before FIRST_ROW keep the fill, the tile's rows below SEQ are all written."""
    want = expected_3d()
    assert (want[:, :FIRST_ROW] == 0xFFFF).all()
    assert (want[:, FIRST_ROW:] != 0xFFFF).all() and FIRST_ROW + 64 > SEQ


@pytest.mark.gpu
def test_3d_store_clips_at_each_sequence_end_on_gpu():
    """Each batch-head's tile covers rows 64..127 of a 100-row sequence: rows 100..127 are
    dropped, and the next batch-head's first rows keep the fill (a 2-D map over all
    HEADS * SEQ rows would have written them)."""
    code = ("import sys\nfrom tests.test_epilogue import run_3d_store\n"
            "ok, detail = run_3d_store()\nprint(detail)\nsys.exit(0 if ok else 1)\n")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=ROOT, env=child_env(), timeout=120)
    print(res.stdout)
    assert res.returncode == 0, res.stdout + res.stderr


@pytest.mark.parametrize("operand", ["tmap", "barrier"])
def test_a_register_of_another_kernel_is_refused_when_made(operand):
    # kept for every later store: refused at the constructor's line, not at a store
    k, other = Kernel("epi", reqntid=128), Kernel("other", reqntid=128)
    args = dict(tmap=k.tensormap_addr(k.param_tensormap("out")), barrier=1)
    args[operand] = other.reg(t.u64 if operand == "tmap" else t.u32)
    with pytest.raises(BuildError, match=f"TmaStoreEpilogue: operand '{operand}': expected a "
                       "register of kernel 'epi'") as e:
        TmaStoreEpilogue(k, k.shared_array(t.b8, STAGING_BYTES, align=1024), **args)
    assert e.value.loc.file == __file__


def test_a_column_whose_last_box_passes_s32_is_refused_by_name():
    k = Kernel("col", reqntid=128)
    epi = TmaStoreEpilogue(k, k.shared_array(t.b8, STAGING_BYTES, align=1024),
                           k.tensormap_addr(k.param_tensormap("out")), 1)
    packed = k.fragment(t.f32, shape=(64, 256)).to_packed(t.bf16)
    with pytest.raises(BuildError, match=r"TmaStoreEpilogue.store: operand 'col0': expected a "
                       r"column whose last box \(col0 \+ 192 for N=256\)") as e:
        epi.store(packed, 0, (1 << 31) - 192)
    assert e.value.loc.file == __file__
    epi.store(packed, 0, (1 << 31) - 193)          # the last box starts at 2^31 - 1
    epi.finish()


def test_a_wrong_fragment_is_described_as_it_is():
    k = Kernel("desc", reqntid=128)
    epi = TmaStoreEpilogue(k, k.shared_array(t.b8, STAGING_BYTES, align=1024),
                           k.tensormap_addr(k.param_tensormap("out")), 1)
    with pytest.raises(BuildError, match=r"got a fragment \(m64n128 \.f32, packed e4m3\)"):
        epi.store(k.fragment(t.f32, shape=(64, 128)).to_packed("e4m3"), 0, 0)


def _moved(staging) -> tuple[str, Kernel]:
    """A 64-column tile made with buffer `stage_a` and stored from `staging` (in `stage_b`),
    then `wait_read`."""
    k = Kernel("epi", reqntid=128)
    out = k.param_tensormap("out")
    a = k.shared_array(t.b8, STAGING_BYTES, align=1024, name="stage_a")
    b = k.shared_array(t.b8, 2 * STAGING_BYTES, align=1024, name="stage_b")
    epi = TmaStoreEpilogue(k, a, k.tensormap_addr(out), 1)
    epi.store(k.fragment(t.f32, shape=(64, 64)).to_packed(t.bf16), 0, 0,
              staging=staging(k, b))
    epi.wait_read()
    epi.finish()
    k.ret()
    return Module([k], target="sm_90a").emit(), k


def test_a_store_given_another_staging_buffer_writes_and_reads_that_one():
    from ptxdsl import Addr
    text, _ = _moved(lambda k, b: Addr(b, STAGING_BYTES))
    assert assemble_declared(text)[:4] == b"\x7fELF"
    # the buffer's address: stage_b + 16384 in one register
    [b] = re.findall(r"mov\.u32 (%r\d+), stage_b;", text)
    [base] = re.findall(rf"add\.u32 (%r\d+), {re.escape(b)}, {STAGING_BYTES};", text)
    # each lane's chunk: that register plus its offset in the epilogue's own buffer
    # (a chunk of stage_a less stage_a)
    [a] = re.findall(r"mov\.u32 (%r\d+), stage_a;", text)
    offsets = set(re.findall(rf"sub\.u32 (%r\d+), %r\d+, {re.escape(a)};", text))
    chunks = {m[0] for m in re.findall(rf"add\.u32 (%r\d+), {re.escape(base)}, (%r\d+);", text)
              if m[1] in offsets}
    assert len(offsets) == len(chunks) == 4
    assert set(re.findall(r"stmatrix\.sync\.aligned\.m8n8\.x4\.shared\.b16 \[(%r\d+)\]",
                          text)) == chunks
    # the box is stored from the moved buffer, then the wait for its reads
    [src] = re.findall(r"cp\.async\.bulk\.tensor\.2d\.global\.shared::cta\.tile\.bulk_group "
                       r"\[%rd\d+, \{0, 0\}\], \[(%r\d+)\];", text)
    assert re.search(rf"add\.u32 {re.escape(src)}, {re.escape(base)}, 0;", text)
    tail = text[text.index("cp.async.bulk.commit_group;"):]
    assert tail.index("cp.async.bulk.wait_group.read 0;") < \
        tail.index("cp.async.bulk.wait_group 0;")


def test_the_moved_buffer_checks_clean():
    from ptxdsl import Addr
    from ptxdsl.checker import check_module
    _, k = _moved(lambda k, b: Addr(b, STAGING_BYTES))
    assert check_module(Module([k], target="sm_90a")) == []


@pytest.mark.parametrize("offset,needs", [
    (512, "a 1024-byte aligned address"),
    (2 * STAGING_BYTES - 1024, "an access inside stage_b")])
def test_a_moved_buffer_is_checked_like_the_first(offset, needs):
    from ptxdsl import Addr
    with pytest.raises(BuildError, match=f"TmaStoreEpilogue.store: operand 'staging': "
                       f"expected {needs}") as e:
        _moved(lambda k, b: Addr(b, offset))
    assert e.value.loc.file == HERE


def test_a_moved_buffer_of_the_wrong_kind_is_refused():
    with pytest.raises(BuildError, match="TmaStoreEpilogue.store: operand 'staging': expected "
                       "a shared symbol") as e:
        _moved(lambda k, b: k.reg(t.u64))
    assert e.value.loc.file == HERE


def _whole(size: int) -> str:
    """A 64 x 256 tile stored whole from a `size`-byte buffer."""
    k = Kernel("epi", reqntid=128)
    out = k.param_tensormap("out")
    buf = k.shared_array(t.b8, size, align=1024, name="tile_buf")
    epi = TmaStoreEpilogue(k, buf, k.tensormap_addr(out), 1)
    epi.store(k.fragment(t.f32, shape=(64, 256)).to_packed(t.bf16), 0, 0, staging=buf,
              whole=True)
    epi.finish()
    k.ret()
    return Module([k], target="sm_90a").emit()


def test_a_whole_tile_is_staged_in_one_round():
    """whole=True: all 16 stmatrix (four boxes at 0, 8, 16, 24 KiB) before one fence and
    four stores in one bulk group, no wait between 128-column passes."""
    text = _whole(2 * STAGING_BYTES)
    assert assemble_declared(text)[:4] == b"\x7fELF"
    marks = {"wait_group.read 0;": "W", "bar.sync 1, 128;": "B", "stmatrix.sync": "S",
             "fence.proxy.async.shared::cta;": "F",
             "cp.async.bulk.tensor.2d.global.shared::cta": "T",
             "cp.async.bulk.commit_group;": "C", "cp.async.bulk.wait_group 0;": "E"}
    seq = "".join(mark for line in text.splitlines() for key, mark in marks.items()
                  if key in line)
    assert seq == "WB" + "S" * 16 + "FB" + "TTTTC" + "E"
    srcs = re.findall(r"cp\.async\.bulk\.tensor\.2d\.global\.shared::cta\.tile\.bulk_group "
                      r"\[%rd\d+, \{(\d+), 0\}\], \[(%r\d+)\];", text)
    assert [int(c) for c, _ in srcs] == [0, 64, 128, 192]
    offsets = [re.search(rf"add\.u32 {re.escape(r)}, %r\d+, (\d+);", text) for _, r in srcs]
    assert [int(m.group(1)) if m else 0 for m in offsets] == [0, 8192, 16384, 24576]


def test_a_whole_tile_needs_room_for_all_of_it():
    with pytest.raises(BuildError, match="TmaStoreEpilogue.store: operand 'staging': expected "
                       r"an access inside tile_buf .*the whole tile's 32768 bytes") as e:
        _whole(STAGING_BYTES)
    assert e.value.loc.file == HERE
    with pytest.raises(BuildError, match="operand 'whole': expected True or False, got int 1"):
        k = Kernel("epi", reqntid=128)
        epi = TmaStoreEpilogue(k, k.shared_array(t.b8, STAGING_BYTES, align=1024),
                               k.tensormap_addr(k.param_tensormap("out")), 1)
        epi.store(k.fragment(t.f32, shape=(64, 64)).to_packed(t.bf16), 0, 0, whole=1)
