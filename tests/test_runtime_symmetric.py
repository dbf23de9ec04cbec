"""ptxdsl.runtime.symmetric on the CPU: SymmetricBuffers from a stand-in for torch's
symmetric-memory handle (attribute validation, pointer arrays, the refusals), the per-rank
tensor maps (encoding stood in for), the launch stream. The GPU tests are in
tests/test_symmetric_gpu.py."""

from __future__ import annotations

import ctypes
import gc
import subprocess
import sys
from types import SimpleNamespace

import numpy as np
import pytest

from ptxdsl.errors import PtxdslError
from ptxdsl.runtime import SymmetricBuffers, SymmetricMemoryError, _driver, device, peer
from ptxdsl.runtime.symmetric import HANDLE_ATTRIBUTES
from tests.child_env import child_env
from tests.test_runtime_multigpu import FakeDriver

BASE = [0x7F00_0000_0000, 0x7F10_0000_0000, 0x7F20_0000_0000, 0x7F30_0000_0000]


def handle(**changes):
    """What rendezvous(tensor, group) returns for rank 1 of 4 (torch 2.13's attribute names)."""
    h = SimpleNamespace(rank=1, world_size=4, buffer_ptrs=list(BASE),
                        signal_pad_ptrs=[p + 0x100_0000 for p in BASE],
                        buffer_ptrs_dev=0x7F40_0000_0000, signal_pad_ptrs_dev=0x7F40_0000_0100,
                        buffer_size=1 << 20, signal_pad_size=2048, device=SimpleNamespace(
                            type="cuda", index=1))
    for name, value in changes.items():
        if value is None:
            delattr(h, name)
        else:
            setattr(h, name, value)
    return h


def test_from_a_torch_handle():
    bufs = SymmetricBuffers.from_torch(handle(rank=np.int64(1)), world_size=4)
    assert (bufs.rank, bufs.world_size, bufs.device) == (1, 4, 1)
    assert bufs.buffer_ptrs == tuple(BASE) and type(bufs.rank) is int
    assert bufs.signal_pad_ptrs[3] == BASE[3] + 0x100_0000
    assert (bufs.buffer_ptrs_dev, bufs.signal_pad_ptrs_dev) == (0x7F40_0000_0000,
                                                                0x7F40_0000_0100)
    assert bufs.torch_stream and bufs.owner is not None
    assert SymmetricBuffers.from_torch(handle(device=None), device=3).device == 3


def test_the_handle_attributes_are_torchs():
    """The names read are those of torch's _SymmetricMemory (where this torch has it)."""
    sm = pytest.importorskip("torch._C._distributed_c10d", reason="torch without c10d")
    cls = getattr(sm, "_SymmetricMemory", None)
    if cls is None:
        pytest.skip("this torch has no _SymmetricMemory")
    assert [a for a in HANDLE_ATTRIBUTES if not hasattr(cls, a)] == []


@pytest.mark.parametrize("changes, message", [
    ({"signal_pad_ptrs_dev": None, "buffer_size": None},
     r"from_torch: the handle \(SimpleNamespace\) has no signal_pad_ptrs_dev, buffer_size; "
     r"pass what torch\.distributed\._symmetric_memory\.rendezvous"),
    ({"buffer_ptrs": BASE[:3]}, r"buffer_ptrs has 3 addresses but world_size is 4"),
    ({"signal_pad_ptrs": [1] * 5}, r"signal_pad_ptrs has 5 addresses but world_size is 4"),
    ({"rank": 4}, r"rank 4 is not in \[0, 4\)"),
    ({"rank": -1}, r"rank must be an integer >= 0, got -1"),
    ({"world_size": 9, "buffer_ptrs": [1] * 9, "signal_pad_ptrs": [1] * 9},
     r"world_size 9 is more than the 8 GPUs of one host"),
    ({"world_size": "4"}, r"world_size must be an integer >= 1, got '4'"),
    ({"buffer_ptrs": [BASE[0], 0, BASE[2], BASE[3]]},
     r"buffer_ptrs\[1\] must be an integer >= 1, got 0"),
    ({"buffer_ptrs": "0x7f"}, r"buffer_ptrs must be a sequence of 4 device addresses, got str"),
    ({"buffer_ptrs_dev": 0}, r"buffer_ptrs_dev must be an integer >= 1, got 0"),
    ({"signal_pad_size": 2}, r"signal_pad_size must be an integer >= 4, got 2"),
])
def test_a_bad_handle_is_refused(changes, message):
    with pytest.raises(SymmetricMemoryError, match=message) as e:
        SymmetricBuffers.from_torch(handle(**changes))
    assert isinstance(e.value, PtxdslError) and isinstance(e.value, ValueError)


def test_a_world_size_mismatch_is_refused():
    with pytest.raises(SymmetricMemoryError, match=r"from_torch: the handle's world_size is 4, "
                       r"not the 2 expected"):
        SymmetricBuffers.from_torch(handle(), world_size=2)


def test_tensor_maps_one_per_rank_over_each_buffer(monkeypatch):
    from ptxdsl.runtime.tensormap import TensorMap
    made = []
    monkeypatch.setattr(TensorMap, "from_desc", classmethod(
        lambda cls, desc, device=0, source=None: made.append((desc, device)) or len(made)))
    bufs = SymmetricBuffers.from_torch(handle())
    maps = bufs.tensor_maps((256, 512), "bf16", (64, 64), byte_offset=4096, swizzle="128B")
    assert maps == (1, 2, 3, 4)
    assert [d.global_address for d, _ in made] == [b + 4096 for b in BASE]
    assert {dev for _, dev in made} == {1}                  # encoded for this rank's device
    assert made[0][0].global_dim == (512, 256) and made[0][0].swizzle.name == "B128"
    with pytest.raises(SymmetricMemoryError, match=r"tensor_maps: the map's region ends at "
                       r"byte 1052672 of each rank's buffer, which has 1048576"):
        bufs.tensor_maps((1024, 512), "bf16", (64, 64), byte_offset=4096)


def test_launch_uses_the_rank_stream_and_device(monkeypatch):
    calls = []
    fn = SimpleNamespace(name="k", device=1,
                         launch=lambda *a, **kw: calls.append((a, kw)))
    bufs = SymmetricBuffers.from_torch(handle())
    monkeypatch.setattr(SymmetricBuffers, "stream", lambda self: 0xABC)
    bufs.launch(fn, 4, 128, (bufs.buffer_ptrs_dev,), shared_mem=0)
    assert calls == [((4, 128, (bufs.buffer_ptrs_dev,)), {"stream": 0xABC, "shared_mem": 0})]
    with pytest.raises(SymmetricMemoryError, match=r"launch: kernel 'k' is loaded on device 0, "
                       r"rank 1's memory is on device 1"):
        bufs.launch(SimpleNamespace(name="k", device=0, launch=None), 1, 1)


def test_torch_memory_launches_on_the_current_torch_stream_of_its_device(monkeypatch):
    from ptxdsl.runtime import symmetric
    monkeypatch.setattr(symmetric, "torch_raw_stream", lambda: (lambda index: 0x5EED + index))
    assert SymmetricBuffers.from_torch(handle()).stream() == 0x5EED + 1


def test_own_memory_launches_on_the_default_stream():
    own = SymmetricBuffers(0, 2, 0, (1, 2), (3, 4), 5, 6, 64, 64)
    assert own.stream() is None


class _AllocDriver(FakeDriver):
    """The multi-GPU tests' fake driver, with the memset and host-to-device copy that
    DeviceBuffer.zeros / from_numpy make (the copied bytes kept by destination)."""

    def __init__(self, n: int):
        super().__init__(n)
        self.copied: dict[int, bytes] = {}

    def cuMemsetD8Async(self, ptr, value, n, stream):
        self._log("cuMemsetD8Async", ptr, value, n)
        return (0,)

    def cuMemcpyHtoDAsync(self, dst, src, n, stream):
        self.copied[dst] = ctypes.string_at(src, n)
        self._log("cuMemcpyHtoDAsync", dst, n)
        return (0,)


@pytest.fixture
def fake4(monkeypatch):
    drv = _AllocDriver(4)
    monkeypatch.setattr(_driver, "_driver", drv)
    monkeypatch.setattr(device, "_contexts", {})
    monkeypatch.setattr(device, "_tls", device._ThreadState())
    monkeypatch.setattr(peer, "_enabled", set())
    yield drv
    gc.collect()   # the buffers are freed through the fake, not the real driver


def test_allocate_lays_out_every_rank_on_its_device(fake4):
    ranks = SymmetricBuffers.allocate(4096, devices=[2, 0, 3], signal_pad_size=256)
    assert [(r.rank, r.world_size, r.device) for r in ranks] == [(0, 3, 2), (1, 3, 0),
                                                                  (2, 3, 3)]
    allocs = {args[1]: (ctx, args[0]) for _, ctx, args in fake4.named("cuMemAlloc")}
    for r in ranks:
        assert r.buffer_ptrs == ranks[0].buffer_ptrs                   # every rank sees all
        assert [allocs[p] for p in r.buffer_ptrs] == [("ctx2", 4096), ("ctx0", 4096),
                                                      ("ctx3", 4096)]
        assert [allocs[p] for p in r.signal_pad_ptrs] == [("ctx2", 256), ("ctx0", 256),
                                                          ("ctx3", 256)]
        # the pointer arrays live on the rank's own device and hold every rank's address
        assert allocs[r.buffer_ptrs_dev] == (f"ctx{r.device}", 24)
        assert np.frombuffer(fake4.copied[r.buffer_ptrs_dev], np.uint64).tolist() == list(
            r.buffer_ptrs)
        assert np.frombuffer(fake4.copied[r.signal_pad_ptrs_dev], np.uint64).tolist() == list(
            r.signal_pad_ptrs)
    zeroed = {args[0] for _, _, args in fake4.named("cuMemsetD8Async") if args[1] == 0}
    assert set(ranks[0].signal_pad_ptrs) <= zeroed
    enabled = {(ctx, peer_ctx) for _, ctx, (peer_ctx,) in fake4.named("cuCtxEnablePeerAccess")}
    assert enabled == {(f"ctx{a}", f"ctx{b}") for a in (2, 0, 3) for b in (2, 0, 3) if a != b}


def test_allocate_refuses_bad_devices():
    with pytest.raises(SymmetricMemoryError, match=r"allocate: devices must be 1 to 8 distinct "
                       r"device ordinals, got \[0, 0\]"):
        SymmetricBuffers.allocate(1024, devices=[0, 0])


def test_importing_the_runtime_does_not_import_torch():
    code = ("import sys, ptxdsl, ptxdsl.runtime, ptxdsl.signals; "
            "print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=child_env(), check=True)
    assert out.stdout.strip() == "False"


class _PutDriver(_AllocDriver):
    """A driver that records the copy engines' copies and the stream writes."""

    CUstreamWriteValue_flags = SimpleNamespace(CU_STREAM_WRITE_VALUE_DEFAULT=0)

    class CUstream(int):
        pass

    def cuStreamWriteValue32(self, stream, addr, value, flags):
        self._log("cuStreamWriteValue32", stream, addr, value, flags)
        return (0,)


def test_put_and_signal_address_the_peer_on_the_rank_device(monkeypatch):
    drv = _PutDriver(4)
    monkeypatch.setattr(_driver, "_driver", drv)
    monkeypatch.setattr(device, "_contexts", {})
    monkeypatch.setattr(device, "_tls", device._ThreadState())
    bufs = SymmetricBuffers.from_torch(handle())        # rank 1 of 4, on device 1
    bufs.put(3, 4096, 0x1234_0000, 512, stream=0x5)
    bufs.signal(2, 1, 7 << 10, stream=0x5)
    (copy,) = drv.named("cuMemcpyDtoDAsync")
    assert copy[2] == (BASE[3] + 4096, 0x1234_0000, 512, 0x5)
    (write,) = drv.named("cuStreamWriteValue32")
    # the pad word of rank 1 in rank 2's pad, with the default flags (a memory barrier first)
    assert write[2] == (0x5, BASE[2] + 0x100_0000 + 4, 7 << 10, 0)
    assert str(copy[1]) == str(write[1]) == "ctx1"      # device 1's context is current


@pytest.mark.parametrize("call, message", [
    (lambda b: b.put(4, 0, 1, 16), r"put: peer 4 is not a rank of \[0, 4\)"),
    (lambda b: b.put(0, (1 << 20) - 8, 1, 16), r"put: bytes \[1048568, 1048584\) of rank 0's "
                                                r"buffer, which has 1048576"),
    (lambda b: b.put(0, 0, 0, 16), r"src must be an integer >= 1, got 0"),
    (lambda b: b.put(0, 0, 1, 0), r"nbytes must be an integer >= 1, got 0"),
    (lambda b: b.put(0, -4, 1, 16), r"offset must be an integer >= 0, got -4"),
    (lambda b: b.signal(0, 512, 1), r"signal: word 512 of a 2048-byte signal pad"),
    (lambda b: b.signal(0, 0, 1 << 32), r"signal: value 4294967296 does not fit 32 bits"),
    (lambda b: b.signal(-1, 0, 1), r"peer must be an integer >= 0, got -1"),
    (lambda b: b.signal(0, 0, 1.5), r"value must be an integer >= 0, got 1.5"),
])
def test_put_and_signal_refuse_before_the_driver(call, message):
    with pytest.raises(SymmetricMemoryError, match=message):
        call(SymmetricBuffers.from_torch(handle()))
