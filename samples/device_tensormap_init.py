"""Encode a tensor map on the device from a host template, publish it to global memory, acquire
it in another kernel and TMA-load a tile through it.

Seeds: CUDA Programming Guide §10.30.1 "Device-side Encoding and Modification of a Tensor Map"
(the encode kernel), §10.30.2 "Usage of a Modified Tensor Map" (the consume kernel), and CCCL's
"How to initialize a tensor map on device" (the host flow: the template, the 8x256 u8 buffer,
the 4x128 box).

1. The host encodes a minimal template map with cuTensorMapEncodeTiled (1-D, u8).
2. `encode_tensor_map` (one warp): lane 0 copies the template into 128-byte aligned shared
   memory and replaces every field with `tensormap.replace`; `__syncwarp()`; the whole warp
   copies the map to global memory and releases it with `tensormap.cp_fenceproxy ... .gpu`.
3. `consume_tensor_map` (one thread) acquires the map with `fence.proxy.tensormap::generic
   .acquire`, initialises an mbarrier, issues a 2-D `cp.async.bulk.tensor`, arrives with
   expect_tx = 4 x 128 = 512 bytes (the whole box), loops on `try_wait.parity`, and writes the
   tile where the seed prints it; numpy checks it, zero fill included.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ptxdsl import Addr, Kernel, Module, ptx, t
from ptxdsl.sample_runner import POISON, Report, random_array, sample_main, sync

space_shared = ptx.space_shared   # cuda::ptx's tag, as the CUDA code spells it

# The CCCL example's tensor and box: 8 rows of 256 u8, loaded 4 rows x 128 columns at a time.
GMEM_HEIGHT, GMEM_WIDTH = 8, 256
BOX_HEIGHT, BOX_WIDTH = 4, 128
BOX_BYTES = BOX_HEIGHT * BOX_WIDTH   # 512: what the TMA load writes, OOB-filled bytes included
# (x, y) = (column, row) of the tile: the seed's {0, 0}, the opposite quadrant, and a tile that
# runs past both edges (its outer part arrives as zeros).
LOAD_AT = [(0, 0), (128, 4), (192, 6)]


class TensormapParams:
    """The CCCL example's `struct tensormap_params`, one scalar `.param` per field:

        struct tensormap_params {
          void* global_address;  int rank;  uint32_t box_dim[5];  uint64_t global_dim[5];
          size_t global_stride[4];  uint32_t element_stride[5];
        };
    """

    def __init__(self, k: Kernel) -> None:
        self.global_address = k.param(t.u64, "global_address")
        self.rank = k.param(t.s32, "rank")
        self.box_dim = [k.param(t.u32, f"box_dim{i}") for i in range(5)]
        self.global_dim = [k.param(t.u64, f"global_dim{i}") for i in range(5)]
        self.global_stride = [k.param(t.u64, f"global_stride{i}") for i in range(4)]
        self.element_stride = [k.param(t.u32, f"element_stride{i}") for i in range(5)]

    @staticmethod
    def args(global_address: int, box_dim: Sequence[int], global_dim: Sequence[int],
             global_stride: Sequence[int], element_stride: Sequence[int]) -> dict[str, int]:
        """Launch arguments by parameter name; dimensions innermost first, as the driver."""
        def pad(values: Sequence[int], n: int) -> list[int]:
            return list(values) + [0] * (n - len(values))

        args = {"global_address": global_address, "rank": len(global_dim)}
        for name, values, n in (("box_dim", box_dim, 5), ("global_dim", global_dim, 5),
                                ("global_stride", global_stride, 4),
                                ("element_stride", element_stride, 5)):
            args.update({f"{name}{i}": v for i, v in enumerate(pad(values, n))})
        return args


def build_encode() -> Kernel:
    # launch with 1 warp.
    # __launch_bounds__(32)
    # __global__ void encode_tensor_map(const __grid_constant__ CUtensorMap template_tensor_map,
    #                                   tensormap_params p, CUtensorMap* out)
    k = Kernel("encode_tensor_map", maxntid=32)
    template_tensor_map = k.param_tensormap("template_tensor_map")
    p = TensormapParams(k)
    out = k.param_ptr("out")
    # __shared__ alignas(128) CUtensorMap smem_tmap;
    smem_tmap = k.shared_array(t.b8, 128, align=128, name="smem_tmap")

    with k.if_(k.tid.x == 0):
        # Copy template to shared memory:
        k.copy(smem_tmap, template_tensor_map, 128)

        ptx.tensormap_replace_global_address(k, space_shared, smem_tmap,
                                             k.ld_param(p.global_address))
        # For field .rank, the operand new_val must be ones less than the desired
        # tensor rank as this field uses zero-based numbering.
        rank = k.ld_param(p.rank)
        ptx.tensormap_replace_rank(k, space_shared, smem_tmap, k.sub(rank, 1))

        # Set box dimensions:  if (i < p.rank) { ...box_dim(..., n32_t<i>{}, p.box_dim[i]); }
        for i in range(5):
            with k.if_(rank > i):
                ptx.tensormap_replace_box_dim(k, space_shared, smem_tmap, i,
                                              k.ld_param(p.box_dim[i]))
        # Set global dimensions:  ... (uint32_t) p.global_dim[i]
        for i in range(5):
            with k.if_(rank > i):
                ptx.tensormap_replace_global_dim(k, space_shared, smem_tmap, i,
                                                 k.cvt(k.ld_param(p.global_dim[i]), t.u32))
        # Set global stride:  if (i + 1 < p.rank) { ...global_stride(..., p.global_stride[i]); }
        for i in range(4):
            with k.if_(rank > i + 1):
                ptx.tensormap_replace_global_stride(k, space_shared, smem_tmap, i,
                                                    k.ld_param(p.global_stride[i]))
        # Set element stride:
        for i in range(5):
            with k.if_(rank > i):
                ptx.tensormap_replace_element_size(k, space_shared, smem_tmap, i,
                                                   k.ld_param(p.element_stride[i]))

        # These constants are documented in this table:
        # https://docs.nvidia.com/cuda/parallel-thread-execution/index.html#tensormap-new-val-validity
        ptx.tensormap_replace_elemtype(k, space_shared, smem_tmap, "u8")
        ptx.tensormap_replace_interleave_layout(k, space_shared, smem_tmap, "none")
        ptx.tensormap_replace_swizzle_mode(k, space_shared, smem_tmap, "none")
        ptx.tensormap_replace_fill_mode(k, space_shared, smem_tmap, "zero")
    # Synchronize the modifications with other threads in warp
    k.syncwarp()
    # Copy the tensor map to global memory collectively with threads in the warp.
    # In addition: make the updated tensor map visible to other threads on device that
    # for use with cp.async.bulk.
    ptx.tensormap_cp_fenceproxy(k, ptx.sem_release, ptx.scope_gpu, out, smem_tmap, 128)
    k.ret()
    return k


def build_consume() -> Kernel:
    # __global__ void consume_tensor_map(CUtensorMap* tensor_map)
    # (plus the tile's coordinates, and `out` for the tile the seed prints; one thread)
    k = Kernel("consume_tensor_map", reqntid=1)
    tensor_map = k.param_ptr("tensor_map")
    x, y = k.param(t.s32, "x"), k.param(t.s32, "y")
    out = k.param_ptr("out")
    tmap = k.ld_param(tensor_map)

    # Fence acquire tensor map (.sys as in the seed; .gpu would do: this GPU wrote the map):
    ptx.fence_proxy_tensormap_generic(k, "acquire", "sys", tmap, 128)
    # Safe to use tensor_map after fence..

    bar = k.shared_array(t.b64, 1, align=8, name="bar")
    smem_buf = k.shared_array(t.b8, BOX_BYTES, align=128, name="smem_buf")  # char [4][128]

    with k.if_(k.tid.x == 0):
        # Initialize barrier
        ptx.mbarrier_init(k, bar, 1)
        # Make barrier init visible in async proxy, i.e., to TMA engine
        ptx.fence_proxy_async(k, "shared::cta")
        # Issue TMA request
        ptx.cp_async_bulk_tensor(k, "shared::cluster", "global", smem_buf, tmap,
                                 (k.ld_param(x), k.ld_param(y)), bar)
        # Arrive on barrier. Expect 4 * 128 bytes.
        ptx.mbarrier_arrive_expect_tx(k, "release", "cta", "shared::cta", bar, BOX_BYTES,
                                      dst="_")
    parity = 0
    # Wait for load to have completed:  while (!ptx::mbarrier_try_wait_parity(&bar, parity)) {}
    with k.loop():
        k.break_(when=ptx.mbarrier_try_wait_parity(k, bar, parity))

    # The seed prints the tile; write it to `out` instead, 16 bytes at a time.
    dst = k.cvta(k.ld_param(out), "global", to=True)
    src = k.mov(smem_buf)
    with k.for_range(0, BOX_BYTES, 16) as off:
        chunk = k.ld(Addr(k.add(src, off)), type=t.b32, space="shared::cta", vec=4)
        k.st(Addr(k.add(dst, k.cvt(off, t.u64))), chunk, type=t.b32, space="global")
    k.ret()
    return k


def build_module() -> Module:
    return Module([build_encode(), build_consume()], name="device_tensormap_init")


# -- host side -----------------------------------------------------------------------------------
def expected_tile(gmem: np.ndarray, x: int, y: int) -> np.ndarray:
    """The box at column x, row y, with zeros where it leaves the tensor."""
    tile = np.zeros((BOX_HEIGHT, BOX_WIDTH), gmem.dtype)
    part = gmem[y:y + BOX_HEIGHT, x:x + BOX_WIDTH]
    tile[:part.shape[0], :part.shape[1]] = part
    return tile


def run() -> Report:
    from ptxdsl import runtime as rt
    report = Report("device_tensormap_init")
    rng = np.random.default_rng(2002)
    mod = build_module().load()

    # The template: a minimal 1-D u8 map (CCCL's make_tensormap_template); every field the
    # kernel can write is replaced, so its address is only a placeholder.
    placeholder = rt.DeviceBuffer.zeros((16,), np.uint8)
    template = rt.TensorMap.tiled(placeholder, (16,), np.uint8, (16,))

    gmem = random_array(rng, (GMEM_HEIGHT, GMEM_WIDTH), np.uint8)
    tensor = rt.DeviceBuffer.from_numpy(gmem)
    global_tensor_map = rt.DeviceBuffer.empty((128,), np.uint8)
    global_tensor_map.memset(POISON)
    p = TensormapParams.args(tensor.ptr, box_dim=(BOX_WIDTH, BOX_HEIGHT),
                             global_dim=(GMEM_WIDTH, GMEM_HEIGHT), global_stride=(GMEM_WIDTH,),
                             element_stride=(1, 1))
    mod["encode_tensor_map"].launch(grid=1, block=32, args={
        "template_tensor_map": template, **p, "out": global_tensor_map})
    sync()

    # The map the driver would encode for the same tensor, for comparison (not a check: the
    # bits tensormap.replace cannot write, such as L2 promotion, come from the template).
    host_map = rt.TensorMap.tiled(tensor, gmem.shape, np.uint8, (BOX_HEIGHT, BOX_WIDTH))
    device_q = global_tensor_map.to_numpy().view(np.uint64)
    differ = [i for i in range(16) if int(device_q[i]) != host_map.qwords[i]]
    report.note(f"device-encoded map vs cuTensorMapEncodeTiled's: qwords {differ or 'none'} "
                "differ")

    for x, y in LOAD_AT:
        out = rt.DeviceBuffer.empty((BOX_HEIGHT, BOX_WIDTH), np.uint8)
        out.memset(POISON)
        mod["consume_tensor_map"].launch(grid=1, block=1, args=(global_tensor_map, x, y, out))
        sync()
        report.check_equal(f"tile {BOX_HEIGHT}x{BOX_WIDTH} u8 at (x={x}, y={y}) of the "
                           f"{GMEM_HEIGHT}x{GMEM_WIDTH} tensor", out.to_numpy(),
                           expected_tile(gmem, x, y))
    return report


def main(argv: list[str] | None = None) -> int:
    return sample_main(argv, __doc__, build_module, run)


if __name__ == "__main__":
    raise SystemExit(main())
