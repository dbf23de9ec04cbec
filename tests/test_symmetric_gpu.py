"""Symmetric memory on two Hopper GPUs in one process (`SymmetricBuffers.allocate`): a kernel
per rank writes its buffer, meets the other at `signals.barrier_all_ranks`, reads both
buffers with 16-byte vector loads through the pointer array and reduces into device 0's memory with
a vector `red.release.sys`, twice (the pads reused). The GPU test skips with the reason where
two such GPUs are not there; the kernel assembles on the CPU."""

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

WORLD, THREADS = 2, 128


@pytest.fixture
def two_gpus():
    reason = multi_gpu_skip_reason(WORLD)
    if reason is not None:
        pytest.skip(f"needs {WORLD} Hopper GPUs with peer access: {reason}")
    with gpu_deadline(60):
        yield


def _kernel() -> Kernel:
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
    barrier_all_ranks(k, pads, rank, WORLD, epoch, block=0)
    acc = None
    for r in range(WORLD):
        at = k.mad(tid, 16, peer_pointer(k, bufs, r), type=t.u32, mode="wide")
        v = k.ld(at, type=t.f32, vec=4, space="generic")
        acc = v if acc is None else tuple(k.add(a, b) for a, b in zip(acc, v, strict=True))
    assert acc is not None
    k.st(k.mad(tid, 16, out, type=t.u32, mode="wide"), acc, type=t.f32, space="generic")
    k.red("add", Addr(k.mad(tid, 16, sink, type=t.u32, mode="wide")), (1.0,) * 4,
          type=t.f32, space="generic", sem="release", scope="sys")
    return k


def test_the_kernel_assembles():
    assemble_declared(Module([_kernel()]).emit())


@pytest.mark.gpu
def test_ranks_meet_read_each_other_and_reduce(two_gpus):
    ranks = SymmetricBuffers.allocate(THREADS * 16, devices=list(range(WORLD)))
    loaded = load_on_devices(Module([_kernel()]), list(range(WORLD)))
    fns = [loaded[d].preload()["sum_peers"] for d in range(WORLD)]
    outs = [DeviceBuffer.zeros((THREADS * 4,), np.float32, device=d) for d in range(WORLD)]
    sink = DeviceBuffer.zeros((THREADS * 4,), np.float32, device=0)
    for epoch in (1, 2):                       # the pads are reused without a reset
        streams = [Stream(device=d) for d in range(WORLD)]
        for r, bufs in enumerate(ranks):       # both run at once: each waits for the other
            fns[r].launch(1, THREADS, (bufs.buffer_ptrs_dev, bufs.signal_pad_ptrs_dev,
                                       outs[r], sink, r, epoch), stream=streams[r])
        for s in streams:
            s.synchronize(20)
        for out in outs:                       # 1 from rank 0 + 2 from rank 1
            np.testing.assert_array_equal(out.to_numpy(), np.full(THREADS * 4, 3.0,
                                                                  np.float32))
    np.testing.assert_array_equal(sink.to_numpy(), np.full(THREADS * 4, 2.0 * WORLD,
                                                            np.float32))
