"""TMA tiles from a host-encoded tensor map passed by value: the CUDA Programming Guide's 2-D
example, then ranks 1 to 5, several dtypes, negative and out-of-bounds coordinates, and swizzled
maps read back through the matching XOR.

Seed: CUDA Programming Guide §10.29.2 "Using TMA to transfer multi-dimensional arrays".

`tile_2d` is the guide's kernel line by line: the map is a `const __grid_constant__ CUtensorMap`
(in PTX a `.param .align 64 .b8 [128]`, addressed through `cvta.param`), a tile is loaded at
(x, y) into 128-byte aligned shared memory, row 0 is modified (`+= threadIdx.x`), and after
`fence.proxy.async.shared::cta` and a barrier the tile is stored back with a TMA store, committed
and waited for with `cp.async.bulk.wait_group.read 0`.

`box_<N>d` (N = 1..5) does the same for any rank and element type: it loads a box from one map
(the coordinates may be negative or run past the end: those elements arrive as zeros), copies
the tile as it lands in shared memory to `out` (un-swizzling it with the XOR of digest §7.4 when
the map is swizzled), inverts every bit in place, and stores the box through a second map
(clipped at the tensor's end). numpy checks `out` and the whole destination tensor.

Two hardware rules the maps cannot express, both seen on an H100 (Triton documents them too):
the innermost start coordinate of a load or store must be a whole number of 16-byte chunks
(else the copy faults with an illegal instruction; `check_coordinates` refuses it first), and a
TMA store writes whole 16-byte chunks, so where a row of the tensor does not end on a 16-byte
boundary it also writes the rest of the row's last chunk (the padding) with what the box holds
there. The checks expect exactly that.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from types import ModuleType
from typing import TYPE_CHECKING, Any

import numpy as np

from ptxdsl import Addr, Kernel, Module, ptx, t
from ptxdsl.sample_runner import POISON, Report, random_array, sample_main, sync

if TYPE_CHECKING:   # the runtime is imported when a GPU run needs it
    from ptxdsl.runtime import LoadedModule

# -- the guide's 2-D example ---------------------------------------------------------------------
SMEM_HEIGHT, SMEM_WIDTH = 8, 32      # the box: 8 rows of 32 ints (1 KiB), one thread per column
GMEM_HEIGHT, GMEM_WIDTH = 40, 100    # not multiples of the box: edge tiles are partial
# (x, y) = (column, row) of the tile's top-left corner. Stores cannot start at a negative
# coordinate (that faults), so the guide's load-modify-store kernel only gets non-negative ones;
# the last tile overhangs both edges (zero fill on the load, clipped on the store).
TILE_2D_AT = [(0, 0), (32, 8), (80, 36)]


def build_tile_2d() -> Kernel:
    # __global__ void kernel(const __grid_constant__ CUtensorMap tensor_map, int x, int y)
    k = Kernel("tile_2d", reqntid=SMEM_WIDTH)
    tensor_map = k.param_tensormap("tensor_map")
    x, y = k.param(t.s32, "x"), k.param(t.s32, "y")
    # The destination shared memory buffer of a bulk tensor operation should be 128 byte aligned.
    smem_buffer = k.shared_array(t.s32, SMEM_HEIGHT * SMEM_WIDTH, align=128, name="smem_buffer")
    bar = k.shared_array(t.b64, 1, align=8, name="bar")
    tmap = k.tensormap_addr(tensor_map)  # the map's generic address (mov + cvta.param)
    tid = k.tid.x
    is_first = tid == 0

    with k.if_(is_first):
        # Initialize barrier. All `blockDim.x` threads in block participate.
        ptx.mbarrier_init(k, bar, k.ntid.x)
        # Make initialized barrier visible in async proxy.
        ptx.fence_proxy_async(k, "shared::cta")
    # Syncthreads so initialized barrier is visible to all threads.
    k.bar_sync(0)

    token = k.reg(t.b64, "token")
    with k.if_(is_first):
        # Initiate bulk tensor copy.
        ptx.cp_async_bulk_tensor(k, "shared::cluster", "global", smem_buffer, tmap,
                                 (k.ld_param(x), k.ld_param(y)), bar)
        # Arrive on the barrier and tell how many bytes are expected to come in.
        ptx.mbarrier_arrive_expect_tx(k, "release", "cta", "shared::cta", bar,
                                      smem_buffer.size, dst=token)
    with k.else_():
        # Other threads just arrive.
        ptx.mbarrier_arrive(k, bar, dst=token)
    # Wait for the data to have arrived.
    with k.loop():
        k.break_(when=ptx.mbarrier_try_wait(k, bar, token))

    # Symbolically modify a value in shared memory: smem_buffer[0][threadIdx.x] += threadIdx.x.
    elem = k.add(k.mov(smem_buffer), k.shl(tid, 2))
    value = k.ld(Addr(elem), type=t.s32, space="shared::cta")
    k.st(Addr(elem), k.add(value, tid), type=t.s32, space="shared::cta")

    # Wait for shared memory writes to be visible to TMA engine.
    ptx.fence_proxy_async(k, "shared::cta")
    k.bar_sync(0)
    # After syncthreads, writes by all threads are visible to TMA engine.

    # Initiate TMA transfer to copy shared memory to global memory
    with k.if_(is_first):
        ptx.cp_async_bulk_tensor(k, "global", "shared::cta", tmap,
                                 (k.ld_param(x), k.ld_param(y)), smem_buffer)
        # Create a "bulk async-group" out of the previous bulk copy operation.
        ptx.cp_async_bulk_commit_group(k)
        # Wait for the group to have completed reading from shared memory.
        ptx.cp_async_bulk_wait_group_read(k, 0)

    # Destroy barrier. This invalidates the memory region of the barrier.
    with k.if_(is_first):
        ptx.mbarrier_inval(k, bar)
    k.ret()
    return k


# -- any rank, any dtype, swizzled or not --------------------------------------------------------
THREADS = 128
TILE_BYTES = 8192        # the largest box the box_<N>d kernels take
CHUNK = 16               # bytes each thread moves per step (one 16-byte swizzle unit)
# Swizzle mode -> the mask of the 128-byte row index XORed into the 16-byte chunk index
# (digest §7.4: 128B XORs address bits [6:4] with [9:7], 64B [5:4] with [8:7], 32B 4 with 7).
SWIZZLE_ROW_MASK = {"NONE": 0, "32B": 1, "64B": 3, "128B": 7}


def build_tile_nd(rank: int) -> Kernel:
    """Load a box through `src_map`, copy it (un-swizzled) to `out`, invert its bits and store
    it through `dst_map`."""
    k = Kernel(f"box_{rank}d", reqntid=THREADS)
    src_map = k.param_tensormap("src_map")
    dst_map = k.param_tensormap("dst_map")
    # Coordinates innermost first (c0 is the contiguous dimension), as TMA takes them.
    load_at = [k.param(t.s32, f"load_c{i}") for i in range(rank)]
    store_at = [k.param(t.s32, f"store_c{i}") for i in range(rank)]
    box_bytes = k.param(t.u32, "box_bytes")        # the expect_tx count: the whole box
    row_mask = k.param(t.u32, "swizzle_row_mask")  # SWIZZLE_ROW_MASK[the maps' swizzle]
    out = k.param_ptr("out")
    # 1024-byte alignment: a 128B-swizzled box must start on its 1024-byte pattern boundary.
    tile = k.shared_array(t.b8, TILE_BYTES, align=1024, name="tile")
    bar = k.shared_array(t.b64, 1, align=8, name="bar")
    tid = k.tid.x
    is_first = tid == 0
    nbytes = k.ld_param(box_bytes)

    with k.if_(is_first):
        ptx.mbarrier_init(k, bar, 1)
        ptx.fence_proxy_async(k, "shared::cta")
    k.bar_sync(0)
    with k.if_(is_first):
        ptx.cp_async_bulk_tensor(k, "shared::cluster", "global", tile,
                                 k.tensormap_addr(src_map), [k.ld_param(c) for c in load_at],
                                 bar)
        # The whole box counts, out-of-bounds (zero-filled) elements included.
        ptx.mbarrier_arrive_expect_tx(k, "release", "cta", "shared::cta", bar, nbytes, dst="_")
    ptx.mbarrier_wait(k, bar, 0)

    # Each thread takes 16-byte chunks: logical offset `off` in the box lives at `off` XOR
    # (row & mask) << 4 in shared memory, with row = off >> 7 (the XOR is its own inverse).
    tile_base = k.mov(tile)
    out_base = k.cvta(k.ld_param(out), "global", to=True)
    mask = k.ld_param(row_mask)
    with k.for_range(k.mul(tid, CHUNK), nbytes, THREADS * CHUNK) as off:
        swz = k.shl(k.and_(k.shr(off, 7), mask), 4)
        src = k.add(tile_base, k.xor(off, swz))
        chunk = k.ld(Addr(src), type=t.b32, space="shared::cta", vec=4)
        dst = k.add(out_base, k.cvt(off, t.u64))
        k.st(Addr(dst), chunk, type=t.b32, space="global")
        k.st(Addr(src), tuple(k.not_(w) for w in chunk), type=t.b32, space="shared::cta")

    # Shared memory written by threads is read by the TMA store (async proxy): fence, barrier.
    ptx.fence_proxy_async(k, "shared::cta")
    k.bar_sync(0)
    with k.if_(is_first):
        ptx.cp_async_bulk_tensor(k, "global", "shared::cta", k.tensormap_addr(dst_map),
                                 [k.ld_param(c) for c in store_at], tile)
        ptx.cp_async_bulk_commit_group(k)
        ptx.cp_async_bulk_wait_group_read(k, 0)
        ptx.mbarrier_inval(k, bar)
    k.ret()
    return k


def build_module() -> Module:
    return Module([build_tile_2d(), *(build_tile_nd(rank) for rank in range(1, 6))],
                  name="tma_tile_2d")


# -- host side -----------------------------------------------------------------------------------
def box_at(a: np.ndarray, start: Sequence[int], box: Sequence[int]) -> np.ndarray:
    """What TMA loads: the box of `a` at `start` (numpy order), zeros where out of bounds."""
    tile = np.zeros(box, a.dtype)
    src, dst = [], []
    for s, b, n in zip(start, box, a.shape, strict=True):
        lo, hi = max(s, 0), min(s + b, n)
        if lo >= hi:
            return tile
        src.append(slice(lo, hi))
        dst.append(slice(lo - s, hi - s))
    tile[tuple(dst)] = a[tuple(src)]
    return tile


def store_box(a: np.ndarray, start: Sequence[int], tile: np.ndarray) -> None:
    """`tile` at `start` (non-negative), clipped at the end of `a` (pass the view a TMA store
    can reach: see `store_view`)."""
    src, dst = [], []
    for s, b, n in zip(start, tile.shape, a.shape, strict=True):
        hi = min(s + b, n)
        if s >= hi:
            return
        dst.append(slice(s, hi))
        src.append(slice(0, hi - s))
    a[tuple(dst)] = tile[tuple(src)]


def store_view(buffer: np.ndarray, shape: Sequence[int]) -> np.ndarray:
    """The part of `buffer` a TMA store to a tensor of `shape` (at the start of `buffer`, rows
    padded) can write: the tensor, with each innermost row widened to a whole number of 16-byte
    chunks, since the store writes whole chunks."""
    inner = -(-shape[-1] * buffer.itemsize // 16) * 16 // buffer.itemsize
    if inner > buffer.shape[-1]:
        raise ValueError(f"rows of {shape[-1]} x {buffer.itemsize} bytes need padding to 16 "
                         "bytes in the buffer: a TMA store writes whole 16-byte chunks")
    return buffer[(*(slice(0, n) for n in shape[:-1]), slice(0, inner))]


def run_tile_2d(mod: LoadedModule, rt: ModuleType, rng: np.random.Generator,
                report: Report) -> None:
    gmem = random_array(rng, (GMEM_HEIGHT, GMEM_WIDTH), np.int32)
    buf = rt.DeviceBuffer.empty(gmem.shape, np.int32)
    tensor_map = rt.TensorMap.tiled(buf, gmem.shape, np.int32, (SMEM_HEIGHT, SMEM_WIDTH))
    for x, y in TILE_2D_AT:
        check_coordinates("tile_2d", 4, (y, x), (y, x))
        buf.copy_from(gmem)
        mod["tile_2d"].launch(grid=1, block=SMEM_WIDTH, args=(tensor_map, x, y))
        sync()
        want = gmem.copy()
        tile = box_at(gmem, (y, x), (SMEM_HEIGHT, SMEM_WIDTH))
        tile[0] += np.arange(SMEM_WIDTH, dtype=np.int32)
        store_box(want, (y, x), tile)
        report.check_equal(f"tile_2d s32 {GMEM_HEIGHT}x{GMEM_WIDTH}, box {SMEM_HEIGHT}x"
                           f"{SMEM_WIDTH} at (x={x}, y={y})", buf.to_numpy(), want)


# name, TMA data type, numpy dtype of the data, shape, row pitch (elements; None = contiguous),
# box, load start, store start (numpy order: outermost axis first), swizzle. The innermost
# coordinate of every start is a whole number of 16-byte chunks (see check_coordinates).
CASES = [
    ("1-D u8, load from -16, store clipped", "UINT8", np.uint8, (1000,), 1008, (64,),
     (-16,), (960,), "NONE"),
    ("2-D f32, padded rows, load at (-3, 60), store clipped", "FLOAT32", np.float32, (50, 70),
     72, (16, 32), (-3, 60), (45, 48), "NONE"),
    ("2-D bf16, 128B swizzle", "BFLOAT16", np.uint16, (64, 128), None, (32, 64), (5, 8),
     (40, 64), "128B"),
    ("2-D u32, 64B swizzle, load at (-2, 28)", "UINT32", np.uint32, (30, 40), None, (8, 16),
     (-2, 28), (24, 32), "64B"),
    ("2-D u8, 32B swizzle, load past both ends", "UINT8", np.uint8, (20, 48), None, (4, 32),
     (18, 32), (17, 32), "32B"),
    ("3-D f16, load at (-1, 15, 32)", "FLOAT16", np.float16, (6, 20, 40), None, (2, 8, 16),
     (-1, 15, 32), (5, 16, 32), "NONE"),
    ("4-D s64, load at (2, -1, 8, 10)", "INT64", np.int64, (3, 4, 10, 12), None, (2, 2, 4, 4),
     (2, -1, 8, 10), (1, 3, 7, 10), "NONE"),
    ("5-D f64, load at (1, 2, -1, 3, 6)", "FLOAT64", np.float64, (2, 3, 4, 5, 8), None,
     (1, 2, 2, 4, 4), (1, 2, -1, 3, 6), (0, 1, 2, 3, 6), "NONE"),
]


def check_coordinates(name: str, itemsize: int, load_at: Sequence[int],
                      store_at: Sequence[int]) -> None:
    """TMA rules the hardware enforces at run time (an illegal-instruction fault otherwise, seen
    on an H100): the innermost start coordinate must be a multiple of 16 bytes, for loads and
    stores alike (it may be negative for loads), and a store cannot start below zero."""
    for what, start in (("load", load_at), ("store", store_at)):
        if start[-1] * itemsize % 16:
            raise ValueError(f"{name}: the {what}'s innermost coordinate {start[-1]} is "
                             f"{start[-1] * itemsize} bytes, not a multiple of 16")
    if min(store_at) < 0:
        raise ValueError(f"{name}: a TMA store cannot start at a negative coordinate")


def run_case(mod: LoadedModule, rt: ModuleType, rng: np.random.Generator, report: Report,
             case: tuple[Any, ...]) -> None:
    name, tma_type, dtype, shape, pitch, box, load_at, store_at, swizzle = case
    check_coordinates(name, np.dtype(dtype).itemsize, load_at, store_at)
    rank = len(shape)
    alloc = shape if pitch is None else (*shape[:-1], pitch)  # padded rows live in the buffer
    strides = None if pitch is None else tuple(int(np.prod(alloc[i + 1:])) for i in range(rank))
    src_host = random_array(rng, alloc, dtype)
    dst_host = random_array(rng, alloc, dtype)
    src, dst = rt.DeviceBuffer.from_numpy(src_host), rt.DeviceBuffer.from_numpy(dst_host)
    maps = [rt.TensorMap.tiled(b, shape, tma_type, box, strides=strides, swizzle=swizzle)
            for b in (src, dst)]
    box_bytes = maps[0].desc.box_bytes
    guard = 256  # bytes past the box that must stay poisoned
    out = rt.DeviceBuffer.empty((box_bytes + guard,), np.uint8)
    out.memset(POISON)
    args = (*maps, *load_at[::-1], *store_at[::-1], box_bytes, SWIZZLE_ROW_MASK[swizzle], out)
    mod[f"box_{rank}d"].launch(grid=1, block=THREADS, args=args)
    sync()

    view = tuple(slice(0, n) for n in shape)  # the tensor inside its (maybe padded) buffer
    tile = box_at(src_host[view], load_at, box)
    got = out.to_numpy()
    report.check_equal(f"{name}: loaded box {list(box)}", got[:box_bytes].view(dtype)
                       .reshape(box), tile)
    report.check_equal(f"{name}: bytes past the box untouched", got[box_bytes:],
                       np.full(guard, POISON, np.uint8))
    want = dst_host.copy()
    inverted = (~tile.view(f"u{tile.itemsize}")).view(dtype)  # every bit flipped
    store_box(store_view(want, shape), store_at, inverted)
    report.check_equal(f"{name}: stored box in the destination", dst.to_numpy(), want)


def run(cases: Iterable[int] | None = None) -> Report:
    """The guide's kernel, then every entry of CASES (or only the indices in `cases`)."""
    from ptxdsl import runtime as rt
    report = Report("tma_tile_2d")
    rng = np.random.default_rng(2003)
    mod = build_module().load()
    if cases is None:
        run_tile_2d(mod, rt, rng, report)
    for i, case in enumerate(CASES):
        if cases is None or i in cases:
            run_case(mod, rt, rng, report, case)
    return report


def main(argv: list[str] | None = None) -> int:
    return sample_main(argv, __doc__, build_module, run)


if __name__ == "__main__":
    raise SystemExit(main())
