"""samples/allgather_gemm.py on the CPU: its kernels build and check clean with the
cross-GPU context, the checker finds a ready signal stripped of its `.sys` release, the
producer's wait is an acquire followed by the proxy fence before any TMA load of peer data,
the module assembles (the debug build too), and the host side refuses bad shapes, epochs and
buffers before touching a GPU. The GPU runs are tests/test_allgather_gemm_gpu.py."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from ptxdsl import Module
from ptxdsl.checker import Hazard, check_kernel
from ptxdsl.runtime import SymmetricBuffers, gpu_skip_reason, multi_gpu_skip_reason
from ptxdsl.testing import assemble_declared
from tests.checker_kernels import ids
from tests.child_env import child_env

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "samples"))
import allgather_gemm as ag  # noqa: E402
import gemm_hopper as gh  # noqa: E402

VARIANTS = tuple(gh.VARIANTS)


@pytest.mark.parametrize("world", ag.WORLDS)
@pytest.mark.parametrize("variant", VARIANTS)
def test_kernels_check_clean(world, variant):
    k = ag.build_kernel(world, variant)
    assert [f.format() for f in check_kernel(k, **ag.context([k]))] == []


def test_a_ready_signal_without_release_is_reported():
    """The copy's writes reach the ready counter through a relaxed `red`: every peer could
    read the buffer before the copy is visible."""
    k = ag.build_kernel(2, "default", release=False)
    found = check_kernel(k, **ag.context([k]))
    assert set(ids(found)) == {Hazard.PEER_PUBLISH_NO_SYS_RELEASE.value}, \
        [f.format() for f in found]
    source = Path(ag.__file__).read_text().splitlines()
    for f in found:      # the statement named is the red in the sample
        assert f.loc.file == ag.__file__ and "k.red(" in source[f.loc.line - 1], f.format()


def _producer_loads(ptx: str) -> str:
    """The producer thread's code of one kernel: from its first signal wait or A load to
    the consumers' setmaxnreg."""
    return ptx[ptx.index("setmaxnreg.dec"):ptx.index("setmaxnreg.inc")]


def test_the_wait_acquires_then_fences_the_async_proxy():
    """Before the first TMA load of a peer's rows: `ld.acquire.sys` spin on the owner's
    counter, then `fence.proxy.async.global` (the copy wrote through the generic proxy, TMA
    reads through the async one). Without the wait (wait=False) neither is there, and the
    checker reports the TMA loads of the peers' rows."""
    text = _producer_loads(Module([ag.build_kernel(2, "skinny")], target="sm_90a").emit())
    spin = text.index("ld.acquire.sys.global.u32")
    fence = text.index("fence.proxy.async.global;", spin)
    assert fence < text.index("cp.async.bulk.tensor.3d", spin)
    assert re.search(r"setp\.ge\.u32 %p\d+, %r\d+, %r\d+;", text[spin:fence])
    bare = _producer_loads(Module([ag.build_kernel(2, "skinny", wait=False)],
                                  target="sm_90a").emit())
    assert "ld.acquire.sys" not in bare and "fence.proxy.async.global" not in bare
    k = ag.build_kernel(2, "skinny", wait=False)
    found = check_kernel(k, **ag.context([k]))
    assert set(ids(found)) == {Hazard.PEER_READ_UNSYNCHRONIZED.value}, \
        [f.format() for f in found]
    assert all("TMA load through a peer's tensor map" in f.message for f in found)


@pytest.mark.parametrize("world", ag.WORLDS)
def test_the_gather_kernel_checks_clean_and_its_release_is_checked(world):
    k = ag.build_gather_kernel(world)
    assert [f.format() for f in check_kernel(k, **ag.context([k]))] == []
    bare = ag.build_gather_kernel(world, release=False)
    found = check_kernel(bare, **ag.context([bare]))
    assert set(ids(found)) == {Hazard.PEER_PUBLISH_NO_SYS_RELEASE.value}
    assert len(found) == world - 1          # one per peer's signal


def test_the_gather_kernel_copies_everywhere_then_cta0_waits_and_fences():
    """The own slot is written before any peer's, each peer's copy is followed by its
    signal, and CTA 0's wait (an acquire spin on this rank's pad) is followed by the proxy
    fence that the next kernel's TMA reads of the gathered rows need."""
    text = Module([ag.build_gather_kernel(4)], target="sm_90a").emit()
    signals = [m.start() for m in re.finditer(r"red\.release\.sys\.global\.add\.u32", text)]
    assert len(signals) == 3
    spin = text.index("ld.acquire.sys.global.u32")
    assert signals[-1] < spin < text.index("fence.proxy.async.global;", spin)
    # own slot + 3 peers, each COPY_UNROLL stores in the loop and 1 in the tail loop
    assert text.count("st.global.v4.u32") == (ag.COPY_UNROLL + 1) * (1 + 3)


@pytest.mark.parametrize("m, world, path", [
    (1, 2, "gather"), (128, 4, "gather"), (128, 2, "gather"), (130, 2, "fused"),
    (8192, 4, "fused")])
def test_path_for_takes_the_decode_kernel_at_decode_sizes(m, world, path):
    assert ag.path_for(m, world) == path


@pytest.mark.parametrize("bounded", [False, True])
def test_module_assembles(bounded):
    module = ag.build_module(bounded, worlds=(2,))
    assert assemble_declared(module.emit())[:4] == b"\x7fELF"


def test_the_bounded_build_bounds_the_signal_wait():
    text = ag.build_module(True, worlds=(2,)).emit()
    loop = text[text.index("$L__sigwait"):]
    assert "globaltimer" in loop[:2000] and "trap;" in loop[:4000]


@pytest.mark.parametrize("m, world, variant", [
    (128, 2, "row"),          # decode: 64 rows a rank, one 128-row tile row
    (128, 4, "skinny"),       # 32 rows a rank, padded to 64: 256 rows
    (8192, 2, "default"),
    (300, 4, "default"),      # 75 rows a rank, padded to 128: 512 rows
])
def test_config_for_pads_each_shard(m, world, variant):
    assert ag.config_for(m, world).name == f"allgather_gemm_w{world}_{variant}"


@pytest.mark.parametrize("shape, words", [
    ((300, 520, 208, 3), "world size must be one of"),
    ((301, 520, 208, 2), "do not split evenly over 2 ranks"),
    ((300, 520, 210, 2), "K \\* 2 bytes a multiple of 16"),
    ((300, 521, 208, 2), "N even"),
])
def test_check_shape_refuses(shape, words):
    with pytest.raises(ValueError, match=words):
        ag.check_shape(*shape)


def _fake_buffers(world: int = 2, size: int = 1 << 20, pad: int = 2048) -> SymmetricBuffers:
    """A rank's view with made-up addresses: launch refuses before it uses any."""
    return SymmetricBuffers(0, world, 0, tuple(range(4096, 4096 * (world + 1), 4096)),
                            tuple(range(8192, 8192 * (world + 1), 8192)), 64, 128, size, pad)


@pytest.mark.parametrize("kwargs, words", [
    ({"epoch": 0}, "epoch must be an int in 1.."),
    ({"epoch": ag.MAX_EPOCH + 1}, "epoch must be an int in 1.."),
    ({"epoch": True}, "epoch must be an int"),
    ({"epoch": 1, "size": 1000}, "buffers have 1000 bytes, this shape needs"),
    ({"epoch": 1, "pad": 4}, "signal pads have 4 bytes, 8 needed"),
    ({"epoch": 1, "push": "dma"}, "push must be 'auto' or one of"),
    ({"epoch": 1, "path": "split"}, "path must be 'auto' or one of"),
    ({"epoch": 1, "path": "gather"}, "the gather path's GEMM takes M up to 128, got M = 300"),
    ({"epoch": 1, "path": "gather", "push": "copy_engine", "m": 128},
     "push='copy_engine' is the fused path's"),
])
def test_launch_refuses_before_the_gpu(kwargs, words):
    size, pad = kwargs.pop("size", 1 << 20), kwargs.pop("pad", 2048)
    m = kwargs.pop("m", 300)
    with pytest.raises(ValueError, match=words):
        ag.launch(None, _fake_buffers(size=size, pad=pad), 1, 2, 3, m, 260, 208, sms=132,
                  **kwargs)


def test_forward_refuses_tensors_it_cannot_take():
    torch = pytest.importorskip("torch")
    x = torch.zeros((150, 208), dtype=torch.bfloat16)
    w = torch.zeros((260, 208), dtype=torch.bfloat16)
    bufs = _fake_buffers()
    with pytest.raises(ValueError, match="contiguous 2-D bf16 torch tensors"):
        ag.forward(x.float(), w, bufs, epoch=1)
    with pytest.raises(ValueError, match="its K must be x's 208"):
        ag.forward(x, w[:, :200].contiguous(), bufs, epoch=1)
    with pytest.raises(ValueError, match="out must be a contiguous 300 x 260 bf16"):
        ag.forward(x, w, bufs, epoch=1, out=torch.zeros((300, 259), dtype=torch.bfloat16))
    with pytest.raises(ValueError, match="N even"):
        ag.forward(x, w[:259], bufs, epoch=1)
    with pytest.raises(ValueError, match="must be on the rank's device cuda:0, got cpu"):
        ag.forward(x, w, bufs, epoch=1)


def test_without_two_gpus_the_sample_says_why():
    """`python samples/allgather_gemm.py` with fewer than two Hopper GPUs (with peer access):
    names the reason, keeps out/allgather_gemm.ptx, and exits 0 after assembling it (offline
    without a GPU; on one GPU, a check that says it did not run)."""
    if multi_gpu_skip_reason(2) is None:
        pytest.skip("two Hopper GPUs with peer access here: the sample runs under torchrun")
    root = Path(ag.__file__).resolve().parent.parent
    res = subprocess.run([sys.executable, str(Path(ag.__file__))], capture_output=True,
                         text=True, cwd=root, env=child_env(), timeout=600)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "allgather_gemm needs 2 Hopper GPUs with peer access" in res.stdout, res.stdout
    assert "wrote out/allgather_gemm.ptx" in res.stdout, res.stdout
    assert (root / "out" / "allgather_gemm.ptx").read_text() == ag.build_module().emit()
    if gpu_skip_reason() is None:
        assert "): not run" in res.stdout and "PASS:" in res.stdout, res.stdout
    else:
        assert "bytes of cubin" in res.stdout, res.stdout
