"""Symmetric memory on 2, 4 or 8 Hopper GPUs in one process (`SymmetricBuffers.allocate`):
a kernel per rank writes its buffer, meets the others at `signals.barrier_all_ranks`, reads
every rank's buffer with 16-byte vector loads through the pointer array, and reduces into
device 0's memory with a vector `red.release.sys`; twice, the pads reused. The GPU test skips
with the reason where that many such GPUs are not there; the kernel assembles on the CPU."""

from __future__ import annotations

import numpy as np
import pytest

from ptxdsl import Addr, Kernel, Module, t
from ptxdsl.runtime import (
    DeviceBuffer,
    Stream,
    SymmetricBuffers,
    load_on_devices,
    multi_gpu_skip_reason,
)
from ptxdsl.signals import barrier_all_ranks, peer_pointer
from ptxdsl.testing import assemble_declared, gpu_deadline

THREADS = 128


def _gpus(world: int):
    reason = multi_gpu_skip_reason(world)
    if reason is not None:
        pytest.skip(f"needs {world} Hopper GPUs with peer access: {reason}")


def _kernel(world: int) -> Kernel:
    k = Kernel("sum_peers", reqntid=(THREADS, 1, 1))
    bufs, pads = k.param_ptr("bufs"), k.param_ptr("pads")
    out = k.ld_param(k.param_ptr("out", space=None))
    sink = k.ld_param(k.param_ptr("sink", space=None))
    rank = k.ld_param(k.param(t.u32, "rank"))
    epoch = k.ld_param(k.param(t.u32, "epoch"))
    tid = k.mov(k.tid.x, type=t.u32)
    mine = k.cvt(k.add(rank, 1, type=t.u32), t.f32, atype=t.u32)
    own = k.mad(tid, 16, peer_pointer(k, bufs, rank), type=t.u32, mode="wide")
    k.st(own, (mine,) * 4, type=t.f32, space="generic")
    barrier_all_ranks(k, pads, rank, world, epoch, block=0)
    acc = None
    for r in range(world):
        at = k.mad(tid, 16, peer_pointer(k, bufs, r), type=t.u32, mode="wide")
        v = k.ld(at, type=t.f32, vec=4, space="generic")
        acc = v if acc is None else tuple(k.add(a, b) for a, b in zip(acc, v, strict=True))
    assert acc is not None
    k.st(k.mad(tid, 16, out, type=t.u32, mode="wide"), acc, type=t.f32, space="generic")
    k.red("add", Addr(k.mad(tid, 16, sink, type=t.u32, mode="wide")), (1.0,) * 4,
          type=t.f32, space="generic", sem="release", scope="sys")
    return k


@pytest.mark.parametrize("world", [2, 8])
def test_the_kernel_assembles(world):
    assemble_declared(Module([_kernel(world)]).emit())


@pytest.mark.gpu
@pytest.mark.parametrize("world", [2, 4, 8])
def test_ranks_meet_read_each_other_and_reduce(world):
    _gpus(world)
    with gpu_deadline(60):
        _run(world)


def _run(world: int) -> None:
    devices = list(range(world))
    ranks = SymmetricBuffers.allocate(THREADS * 16, devices=devices)
    loaded = load_on_devices(Module([_kernel(world)]), devices)
    fns = [loaded[d].preload()["sum_peers"] for d in devices]
    outs = [DeviceBuffer.zeros((THREADS * 4,), np.float32, device=d) for d in devices]
    sink = DeviceBuffer.zeros((THREADS * 4,), np.float32, device=0)
    for epoch in (1, 2):                       # the pads are reused without a reset
        streams = [Stream(device=d) for d in devices]
        for r, bufs in enumerate(ranks):       # all run at once: each waits for the others
            fns[r].launch(1, THREADS, (bufs.buffer_ptrs_dev, bufs.signal_pad_ptrs_dev,
                                       outs[r], sink, r, epoch), stream=streams[r])
        for s in streams:
            s.synchronize(20)
        total = world * (world + 1) / 2        # rank r wrote r + 1
        for out in outs:
            np.testing.assert_array_equal(out.to_numpy(), np.full(THREADS * 4, total,
                                                                  np.float32))
    np.testing.assert_array_equal(sink.to_numpy(), np.full(THREADS * 4, 2.0 * world,
                                                            np.float32))
