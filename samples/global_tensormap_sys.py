"""A tensor map in global memory: copied there from the host and acquired with `.sys` scope in
every CTA before use; then modified on the device between two uses and re-acquired each time.

Seeds: CUDA Programming Guide §10.29.2 (host-to-device transfer: "Since the tensor map was
modified from the host using cudaMemcpy, the scope should be .sys") and §10.30.2 ("If there are
no intermediate modifications, the fence does not have to be repeated"; with one, it must be).

- `consume_global_map` (one CTA per tile): thread 0 runs `fence.proxy.tensormap::generic
  .acquire.sys [map], 128` (the fence cannot be delegated to another CTA or kernel), then loads
  its tile; the CTA copies it out.
- `modify_between_uses` (one warp): loads a tile through the map (tensor A); rewrites the map's
  address to tensor B through shared memory and publishes it with `tensormap.cp_fenceproxy
  ... .release.gpu`, re-acquires (`.gpu`) and loads again; then rewrites the address to tensor
  C in place in global memory (`tensormap.replace ... .global` + `fence.proxy.tensormap::generic
  .release.gpu`), re-acquires and loads a third time.
- `consume_global_map` again: the map a previous kernel modified now points at C.
"""

from __future__ import annotations

import numpy as np

from ptxdsl import Addr, Kernel, Module, Reg, Symbol, ptx, t
from ptxdsl.sample_runner import POISON, Report, random_array, sample_main, sync

ROWS, COLS = 48, 80                   # u16 tensors (160-byte rows)
BOX_ROWS, BOX_COLS = 16, 32           # 16 x 32 u16 = 1 KiB per tile
BOX_BYTES = BOX_ROWS * BOX_COLS * 2
TILES_X, TILES_Y = -(-COLS // BOX_COLS), -(-ROWS // BOX_ROWS)
THREADS = 32
MODIFY_AT = (64, 40)                  # (x, y): a tile that overhangs both edges


def emit_load(k: Kernel, tmap: Reg, coords: tuple[Reg | int, ...], tile: Symbol, bar: Symbol,
              parity: int) -> None:
    """Thread 0 issues the TMA load; every thread waits for phase `parity` to complete."""
    with k.if_(k.tid.x == 0):
        ptx.cp_async_bulk_tensor(k, "shared::cluster", "global", tile, tmap, coords, bar)
        ptx.mbarrier_arrive_expect_tx(k, "release", "cta", "shared::cta", bar, BOX_BYTES,
                                      dst="_")
    ptx.mbarrier_wait(k, bar, parity)


def emit_copy_out(k: Kernel, tile: Symbol, dst: Reg) -> None:
    """The CTA copies the tile (BOX_BYTES) to the .global address `dst`, 16 bytes a thread."""
    base = k.mov(tile)
    with k.for_range(k.shl(k.tid.x, 4), BOX_BYTES, THREADS * 16) as off:
        chunk = k.ld(Addr(k.add(base, off)), type=t.b32, space="shared::cta", vec=4)
        k.st(Addr(k.add(dst, k.cvt(off, t.u64))), chunk, type=t.b32, space="global")


def build_consume() -> Kernel:
    k = Kernel("consume_global_map", reqntid=THREADS)
    tensor_map = k.param_ptr("tensor_map")
    out = k.param_ptr("out")              # [TILES_Y][TILES_X][BOX_ROWS][BOX_COLS] u16
    tile = k.shared_array(t.b8, BOX_BYTES, align=128, name="tile")
    bar = k.shared_array(t.b64, 1, align=8, name="bar")
    tmap = k.ld_param(tensor_map)
    bx, by = k.ctaid.x, k.ctaid.y
    with k.if_(k.tid.x == 0):
        # Fence acquire tensor map. Since the tensor map was modified from the host using
        # cudaMemcpy (or by a kernel on this device: .sys covers both), the scope is .sys.
        ptx.fence_proxy_tensormap_generic(k, "acquire", "sys", tmap)
        ptx.mbarrier_init(k, bar, 1)
        ptx.fence_proxy_async(k, "shared::cta")
    k.bar_sync(0)
    emit_load(k, tmap, (k.mul(bx, BOX_COLS), k.mul(by, BOX_ROWS)), tile, bar, 0)
    index = k.mad(by, TILES_X, bx)
    dst = k.add(k.cvta(k.ld_param(out), "global", to=True),
                k.mul(index, BOX_BYTES, mode="wide"))
    emit_copy_out(k, tile, dst)
    k.ret()
    return k


def build_modify() -> Kernel:
    k = Kernel("modify_between_uses", reqntid=THREADS)   # one warp: cp_fenceproxy is collective
    tensor_map = k.param_ptr("tensor_map")
    address_b, address_c = k.param(t.u64, "address_b"), k.param(t.u64, "address_c")
    x, y = k.param(t.s32, "x"), k.param(t.s32, "y")
    out = k.param_ptr("out")              # [3][BOX_ROWS][BOX_COLS] u16: one tile per use
    smem_tmap = k.shared_array(t.b8, 128, align=128, name="smem_tmap")
    tile = k.shared_array(t.b8, BOX_BYTES, align=128, name="tile")
    bar = k.shared_array(t.b64, 1, align=8, name="bar")
    tmap = k.ld_param(tensor_map)                          # generic: for the fences and TMA
    tmap_global = k.cvta(tmap, "global", to=True)          # .global: for ld and replace
    out_global = k.cvta(k.ld_param(out), "global", to=True)
    coords = (k.ld_param(x), k.ld_param(y))
    lane0 = k.tid.x == 0

    # Use 1: the map as the host wrote it (tensor A).
    with k.if_(lane0):
        ptx.fence_proxy_tensormap_generic(k, "acquire", "sys", tmap)
        ptx.mbarrier_init(k, bar, 1)
        ptx.fence_proxy_async(k, "shared::cta")
    k.bar_sync(0)
    emit_load(k, tmap, coords, tile, bar, 0)
    emit_copy_out(k, tile, out_global)
    k.bar_sync(0)   # the loads that read the map are complete; the tile buffer is free again

    # Modification 1, through shared memory: copy, replace the address, publish.
    with k.if_(lane0):
        k.copy(smem_tmap, Addr(tmap_global), 128)
        ptx.tensormap_replace_global_address(k, ptx.space_shared, smem_tmap, k.ld_param(address_b))
    k.syncwarp()
    ptx.tensormap_cp_fenceproxy(k, ptx.sem_release, ptx.scope_gpu, tmap_global, smem_tmap, 128)
    # Use 2: re-acquire (this thread, this GPU: .gpu) and load from tensor B.
    with k.if_(lane0):
        ptx.fence_proxy_tensormap_generic(k, "acquire", "gpu", tmap)
    emit_load(k, tmap, coords, tile, bar, 1)
    emit_copy_out(k, tile, k.add(out_global, BOX_BYTES))
    k.bar_sync(0)

    # Modification 2, in place in global memory: a generic-proxy write of the map, so release
    # it to the tensormap proxy with a fence, then acquire before the next use.
    with k.if_(lane0):
        ptx.tensormap_replace_global_address(k, ptx.space_global, tmap_global,
                                             k.ld_param(address_c))
        ptx.fence_proxy_tensormap_generic(k, "release", "gpu")
        ptx.fence_proxy_tensormap_generic(k, "acquire", "gpu", tmap)
    # Use 3: tensor C.
    emit_load(k, tmap, coords, tile, bar, 0)
    emit_copy_out(k, tile, k.add(out_global, 2 * BOX_BYTES))
    k.bar_sync(0)
    with k.if_(lane0):
        ptx.mbarrier_inval(k, bar)
    k.ret()
    return k


def build_module() -> Module:
    return Module([build_consume(), build_modify()], name="global_tensormap_sys")


# -- host side -----------------------------------------------------------------------------------
def tile_at(a: np.ndarray, x: int, y: int) -> np.ndarray:
    tile = np.zeros((BOX_ROWS, BOX_COLS), a.dtype)
    part = a[y:y + BOX_ROWS, x:x + BOX_COLS]
    tile[:part.shape[0], :part.shape[1]] = part
    return tile


def all_tiles(a: np.ndarray) -> np.ndarray:
    return np.stack([np.stack([tile_at(a, bx * BOX_COLS, by * BOX_ROWS)
                               for bx in range(TILES_X)]) for by in range(TILES_Y)])


def run() -> Report:
    from ptxdsl import runtime as rt
    report = Report("global_tensormap_sys")
    rng = np.random.default_rng(2004)
    mod = build_module().load()
    hosts = [random_array(rng, (ROWS, COLS), np.uint16) for _ in range(3)]
    a, b, c = (rt.DeviceBuffer.from_numpy(h) for h in hosts)

    # Encode on the host, then cudaMemcpy the 128 bytes into global memory.
    host_map = rt.TensorMap.tiled(a, (ROWS, COLS), np.uint16, (BOX_ROWS, BOX_COLS))
    global_map = rt.DeviceBuffer.from_numpy(np.frombuffer(bytes(host_map), np.uint8))
    grid = (TILES_X, TILES_Y)

    out = rt.DeviceBuffer.empty((TILES_Y, TILES_X, BOX_ROWS, BOX_COLS), np.uint16)
    out.memset(POISON)
    mod["consume_global_map"].launch(grid=grid, block=THREADS, args=(global_map, out))
    sync()
    report.check_equal(f"host-written map, acquired .sys in each of {TILES_X * TILES_Y} CTAs: "
                       "every tile of A", out.to_numpy(), all_tiles(hosts[0]))

    three = rt.DeviceBuffer.empty((3, BOX_ROWS, BOX_COLS), np.uint16)
    three.memset(POISON)
    mod["modify_between_uses"].launch(grid=1, block=THREADS, args=(
        global_map, b.ptr, c.ptr, *MODIFY_AT, three))
    sync()
    got = three.to_numpy()
    for i, (how, name) in enumerate((("as uploaded", "A"),
                                     ("after cp_fenceproxy + acquire", "B"),
                                     ("after in-place replace + release/acquire", "C"))):
        report.check_equal(f"one kernel, use {i + 1} {how}: tile of {name} at "
                           f"(x, y) = {MODIFY_AT}", got[i], tile_at(hosts[i], *MODIFY_AT))

    out.memset(POISON)
    mod["consume_global_map"].launch(grid=grid, block=THREADS, args=(global_map, out))
    sync()
    report.check_equal("next launch, map modified on the device, acquired .sys in each CTA: "
                       "every tile of C", out.to_numpy(), all_tiles(hosts[2]))
    return report


def main(argv: list[str] | None = None) -> int:
    return sample_main(argv, __doc__, build_module, run)


if __name__ == "__main__":
    raise SystemExit(main())
