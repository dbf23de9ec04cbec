"""Seed 003 (CUDA Programming Guide "Using TMA to transfer multi-dimensional arrays"), line by
line: load a 2-D tile at (x, y) with an mbarrier, modify it in shared memory,
fence.proxy.async.shared::cta + bar.sync, store it back, commit and wait_group.read."""

from __future__ import annotations

import pytest

from ptxdsl import Kernel, Module, t
from ptxdsl.instructions.bulk import cp_async_bulk_commit_group, cp_async_bulk_wait_group_read
from ptxdsl.instructions.bulk_tensor import cp_async_bulk_tensor
from ptxdsl.testing import assemble_declared

mbarrier = pytest.importorskip("ptxdsl.instructions.mbarrier",
                               reason="the mbarrier family is not in this checkout")
mbarrier_wait = pytest.importorskip("ptxdsl.instructions.mbarrier_wait",
                                    reason="the mbarrier wait helpers are not in this checkout")
fence = pytest.importorskip("ptxdsl.instructions.fence",
                            reason="the fence family is not in this checkout")

SMEM_WIDTH, SMEM_HEIGHT = 32, 8        # int smem_buffer[SMEM_HEIGHT][SMEM_WIDTH]


def seed_003() -> Module:
    k = Kernel("kernel", reqntid=SMEM_WIDTH)
    tensor_map = k.param_tensormap("tensor_map")   # const __grid_constant__ CUtensorMap
    x = k.ld_param(k.param(t.s32, "x"))
    y = k.ld_param(k.param(t.s32, "y"))
    smem_buffer = k.shared_array(t.b32, SMEM_HEIGHT * SMEM_WIDTH, align=128, name="smem_buffer")
    bar = k.shared_array(t.b64, 1, align=8, name="bar")
    tid = k.tid.x
    is_first = tid == 0

    with k.if_(is_first):
        mbarrier.mbarrier_init(k, bar, SMEM_WIDTH)          # init(&bar, blockDim.x)
        fence.fence_proxy_async(k, "shared::cta")           # fence_proxy_async_shared_cta()
    k.bar_sync()                                            # __syncthreads()

    tmap = k.tensormap_addr(tensor_map)
    with k.if_(is_first):
        cp_async_bulk_tensor(k, "shared::cluster", "global", smem_buffer, tmap, (x, y), bar)
        mbarrier.mbarrier_arrive_expect_tx(k, "release", "cta", "shared::cta", bar,
                                           SMEM_HEIGHT * SMEM_WIDTH * 4)
    with k.else_():
        mbarrier.mbarrier_arrive(k, bar)
    mbarrier_wait.mbarrier_wait(k, bar, 0)                  # bar.wait(std::move(token))

    # smem_buffer[0][threadIdx.x] += threadIdx.x
    slot = k.mad(tid, 4, k.addr_of(smem_buffer))
    v = k.ld(slot, type=t.u32, space="shared::cta")
    k.st(slot, k.add(v, tid), space="shared::cta")

    fence.fence_proxy_async(k, "shared::cta")
    k.bar_sync()
    with k.if_(is_first):
        cp_async_bulk_tensor(k, "global", "shared::cta", tmap, (x, y), smem_buffer)
        cp_async_bulk_commit_group(k)
        cp_async_bulk_wait_group_read(k, 0)
    with k.if_(is_first):
        mbarrier.mbarrier_inval(k, bar)                     # (&bar)->~barrier()
    return Module([k])


def test_seed_003_golden(golden):
    m = seed_003()
    assert (str(m.version), str(m.target)) == ("8.0", "sm_90")
    text = golden(m, "bulk/seed_003_tma_2d")
    assert assemble_declared(text)[:4] == b"\x7fELF"
    body = [line.strip() for line in text.splitlines()]
    order = [next(i for i, line in enumerate(body) if line.startswith(p)) for p in (
        "@!%p1 bra", "mbarrier.init", "fence.proxy.async.shared::cta", "bar.sync",
        "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes",
        "mbarrier.arrive.expect_tx", "mbarrier.try_wait.parity")]
    assert order == sorted(order)
    store = body.index("cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group "
                       "[%rd2, {%r1, %r2}], [smem_buffer];")
    assert body[store + 1:store + 3] == ["cp.async.bulk.commit_group;",
                                         "cp.async.bulk.wait_group.read 0;"]
