"""The ptxdsl side of the TMA copy benchmark: a persistent-grid, multi-stage 2-D TMA copy.

One CTA per SM walks tiles `ctaid.x, ctaid.x + nctaid.x, ...` of a row-major 2-D tensor. The
shared-memory ring (dynamic shared memory) has STAGES tiles, each with a "full" and an
"empty" mbarrier:

- the producer (thread 0) waits until a stage is empty, arrives on its full barrier with
  expect_tx = the tile's bytes and issues the TMA load into it;
- the consumer (thread 32, the first lane of warp 1) waits until the stage is full, issues the
  TMA store out of it and commits a bulk async-group; `cp.async.bulk.wait_group.read LAG`
  then says the store issued LAG tiles ago has finished reading shared memory, and the
  consumer arrives on that tile's empty barrier so the producer can refill it.

`benchmarks/tma_copy.cu` is the same algorithm written with `<cuda/ptx>`, line for line.
"""

from __future__ import annotations

from ptxdsl import Addr, Kernel, Module, ptx, t

THREADS = 64              # warp 0: producer lane, warp 1: consumer lane
PRODUCER, CONSUMER = 0, 32


def kernel_name(box_rows: int, box_cols: int, stages: int) -> str:
    return f"tma_copy_{box_rows}x{box_cols}_s{stages}"


def smem_bytes(box_rows: int, box_cols: int, stages: int) -> int:
    """Dynamic shared memory a launch needs: the ring of fp32 tiles, then the barriers."""
    return stages * box_rows * box_cols * 4 + 2 * 8 * stages


def build_copy(box_rows: int = 32, box_cols: int = 256, stages: int = 4, lag: int = 1
               ) -> Kernel:
    """`tma_copy_<R>x<C>_s<S>(src_map, dst_map, tiles_x, num_tiles)` for fp32 tiles of
    `box_rows` x `box_cols` (the maps' box), `stages` deep."""
    if stages < 2 or not 0 <= lag < stages:
        raise ValueError("need stages >= 2 and 0 <= lag < stages")
    tile_bytes = box_rows * box_cols * 4
    k = Kernel(kernel_name(box_rows, box_cols, stages), reqntid=THREADS, minnctapersm=1)
    src_param = k.param_tensormap("src_map")
    dst_param = k.param_tensormap("dst_map")
    tiles_x_param = k.param(t.u32, "tiles_x")
    num_tiles_param = k.param(t.u32, "num_tiles")
    # All shared memory is dynamic: the ring at offset 0 (the only offset whose alignment the
    # launch guarantees: dynamic shared memory starts right after any static shared memory,
    # 16-byte aligned, whatever `.align` says), then the full and the empty barriers.
    ring = k.extern_shared("ring", align=1024)
    tid = k.tid.x
    ring_base = k.mov(ring)            # 32-bit .shared address
    full_base = k.add(ring_base, stages * tile_bytes)
    empty_base = k.add(ring_base, stages * tile_bytes + 8 * stages)

    with k.if_(tid == PRODUCER):
        for s in range(stages):
            ptx.mbarrier_init(k, Addr(full_base, 8 * s), 1)
            ptx.mbarrier_init(k, Addr(empty_base, 8 * s), 1)
        # Make the initialised barriers visible to the async proxy (the TMA unit).
        ptx.fence_proxy_async(k, "shared::cta")
    k.bar_sync(0)

    tiles_x = k.ld_param(tiles_x_param)
    num_tiles = k.ld_param(num_tiles_param)

    def tile_coords(tile):
        ty = k.div(tile, tiles_x)
        x = k.mul(k.sub(tile, k.mul(ty, tiles_x)), box_cols)
        y = k.mul(ty, box_rows)
        return x, y

    def walk(body):
        """for (tile = ctaid.x, stage = 0, phase = 0; tile < num_tiles; tile += nctaid.x)"""
        tile = k.mov(k.ctaid.x, dst=k.reg(t.u32, "tile"))
        step = k.nctaid.x
        stage = k.mov(0, dst=k.reg(t.u32, "stage"))
        phase = k.mov(0, dst=k.reg(t.u32, "phase"))
        with k.while_(lambda: tile < num_tiles):
            body(tile, stage, phase)
            k.add(tile, step, dst=tile)
            k.add(stage, 1, dst=stage)
            wrap = stage == stages
            with k.guard(wrap):
                k.mov(0, dst=stage)
                k.xor(phase, 1, dst=phase)
        return stage

    # -- producer ----------------------------------------------------------------------------
    with k.if_(tid == PRODUCER):
        src = k.tensormap_addr(src_param)

        def produce(tile, stage, phase):
            empty_bar = k.add(empty_base, k.shl(stage, 3))
            full_bar = k.add(full_base, k.shl(stage, 3))
            # A fresh barrier counts its preceding phase as complete: wait on phase ^ 1.
            ptx.mbarrier_wait(k, empty_bar, k.xor(phase, 1))
            ptx.mbarrier_arrive_expect_tx(k, "release", "cta", "shared::cta", full_bar,
                                          tile_bytes, dst="_")
            x, y = tile_coords(tile)
            smem = k.add(ring_base, k.mul(stage, tile_bytes))
            ptx.cp_async_bulk_tensor(k, "shared::cluster", "global", smem, src, (x, y),
                                     full_bar)

        walk(produce)

    # -- consumer ----------------------------------------------------------------------------
    with k.if_(tid == CONSUMER):
        dst = k.tensormap_addr(dst_param)
        # Stages whose stores are still reading shared memory, oldest first (LAG of them).
        pending = [k.reg(t.u32, f"pending{i}") for i in range(lag)]
        for r in pending:
            k.mov(stages, dst=r)               # `stages` marks "no tile"

        def consume(tile, stage, phase):
            full_bar = k.add(full_base, k.shl(stage, 3))
            ptx.mbarrier_wait(k, full_bar, phase)
            x, y = tile_coords(tile)
            smem = k.add(ring_base, k.mul(stage, tile_bytes))
            ptx.cp_async_bulk_tensor(k, "global", "shared::cta", dst, (x, y), smem)
            ptx.cp_async_bulk_commit_group(k)
            # Every store but the newest LAG has finished reading its stage: release the
            # oldest one to the producer.
            ptx.cp_async_bulk_wait_group_read(k, lag)
            done = pending[0] if lag else stage
            with k.if_(done != stages):
                ptx.mbarrier_arrive(k, k.add(empty_base, k.shl(done, 3)), dst="_")
            for a, b in zip(pending, pending[1:], strict=False):
                k.mov(b, dst=a)
            if lag:
                k.mov(stage, dst=pending[-1])

        walk(consume)
        # The global writes must be complete before the CTA exits.
        ptx.cp_async_bulk_wait_group(k, 0)
    k.ret()
    return k


CONFIGS = ((32, 256, 4), (16, 256, 8), (64, 128, 4), (32, 128, 6))


def build_module(configs=CONFIGS, lag: int = 1) -> Module:
    """One module with a copy kernel per (box_rows, box_cols, stages) configuration."""
    return Module([build_copy(r, c, s, lag) for r, c, s in configs], name="tma_copy")
