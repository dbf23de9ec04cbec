"""Encode a tensor map entirely on the device, starting from a zero-filled shared buffer: no
driver call, no template. Then use it from many CTAs, with zero and OOB-NaN fill.

Seed: the CUDA Programming Guide's tip in §10.30.1 ("On sm_90a, a zero-initialized buffer in
shared memory may also be used as the initial tensor map value. This enables encoding a tensor
map purely on device").

`encode_from_zeros` (one warp): lane 0 zeroes 128 bytes of 128-byte aligned shared memory and
writes every field with `tensormap.replace` (2-D f32; the fill mode, an immediate-only field, is
picked by a run-time branch between two instructions); `__syncwarp()`; the warp publishes the
map with `tensormap.cp_fenceproxy ... .release.gpu`.

`load_tiles` (one CTA per tile, launched after the encode): thread 0 acquires the map with
`fence.proxy.tensormap::generic.acquire.gpu` (each CTA must acquire for itself), loads its
8x16 tile, and the CTA copies it out. The tiles cover the tensor from (-8, -4), so every edge
has out-of-bounds elements; the tensor's rows are padded in memory, and the padding (which
holds data) must not appear either.
"""

from __future__ import annotations

import numpy as np

from ptxdsl import Addr, Kernel, Module, ptx, t
from ptxdsl.sample_runner import POISON, Report, random_array, sample_main, sync

space_shared = ptx.space_shared   # cuda::ptx's tag, as the CUDA code spells it

ROWS, COLS, ROW_PITCH = 37, 60, 64     # f32 tensor; rows padded to 64 elements (256 bytes)
BOX_ROWS, BOX_COLS = 8, 16              # 8 x 16 f32 = 512 bytes per tile
BOX_BYTES = BOX_ROWS * BOX_COLS * 4
ORIGIN = (-8, -4)                       # (x, y) of the first tile: left of and above the tensor
TILES_X = -(-(COLS - ORIGIN[0]) // BOX_COLS)
TILES_Y = -(-(ROWS - ORIGIN[1]) // BOX_ROWS)


def build_encode() -> Kernel:
    k = Kernel("encode_from_zeros", maxntid=32)
    global_address = k.param(t.u64, "global_address")
    cols, rows = k.param(t.u32, "cols"), k.param(t.u32, "rows")
    row_pitch = k.param(t.u64, "row_pitch")         # bytes between rows, a multiple of 16
    nan_fill = k.param(t.u32, "nan_fill")           # 0: zero fill, else OOB-NaN fill
    out = k.param_ptr("out")
    smem_tmap = k.shared_array(t.b8, 128, align=128, name="smem_tmap")

    with k.if_(k.tid.x == 0):
        # The initial value: 128 zero bytes (legal on sm_90a, where tensormap.replace lives).
        for off in range(0, 128, 16):
            k.st(Addr(smem_tmap, off), (0, 0), type=t.b64)
        ptx.tensormap_replace_global_address(k, space_shared, smem_tmap, k.ld_param(global_address))
        ptx.tensormap_replace_rank(k, space_shared, smem_tmap, 1)  # new_val = rank - 1 (2-d)
        ptx.tensormap_replace_box_dim(k, space_shared, smem_tmap, 0, BOX_COLS)     # innermost first
        ptx.tensormap_replace_box_dim(k, space_shared, smem_tmap, 1, BOX_ROWS)
        ptx.tensormap_replace_global_dim(k, space_shared, smem_tmap, 0, k.ld_param(cols))
        ptx.tensormap_replace_global_dim(k, space_shared, smem_tmap, 1, k.ld_param(rows))
        ptx.tensormap_replace_global_stride(k, space_shared, smem_tmap, 0, k.ld_param(row_pitch))
        ptx.tensormap_replace_element_stride(k, space_shared, smem_tmap, 0, 1)
        ptx.tensormap_replace_element_stride(k, space_shared, smem_tmap, 1, 1)
        ptx.tensormap_replace_elemtype(k, space_shared, smem_tmap, "f32")
        ptx.tensormap_replace_interleave_layout(k, space_shared, smem_tmap, "none")
        ptx.tensormap_replace_swizzle_mode(k, space_shared, smem_tmap, "none")
        # .fill_mode takes an immediate only: choose between two instructions at run time.
        with k.if_(k.ld_param(nan_fill) == 0):
            ptx.tensormap_replace_fill_mode(k, space_shared, smem_tmap, "zero")
        with k.else_():
            ptx.tensormap_replace_fill_mode(k, space_shared, smem_tmap, "nan")
    k.syncwarp()
    ptx.tensormap_cp_fenceproxy(k, ptx.sem_release, ptx.scope_gpu, out, smem_tmap, 128)
    k.ret()
    return k


def build_load_tiles() -> Kernel:
    k = Kernel("load_tiles", reqntid=32)
    tensor_map = k.param_ptr("tensor_map")
    origin_x, origin_y = k.param(t.s32, "origin_x"), k.param(t.s32, "origin_y")
    out = k.param_ptr("out")          # [TILES_Y][TILES_X][BOX_ROWS][BOX_COLS] f32
    tile = k.shared_array(t.b8, BOX_BYTES, align=128, name="tile")
    bar = k.shared_array(t.b64, 1, align=8, name="bar")
    tmap = k.ld_param(tensor_map)
    tid = k.tid.x
    is_first = tid == 0
    bx, by = k.ctaid.x, k.ctaid.y

    with k.if_(is_first):
        # This CTA's acquire: the encode kernel's release does not reach it otherwise.
        ptx.fence_proxy_tensormap_generic(k, "acquire", "gpu", tmap)
        ptx.mbarrier_init(k, bar, 1)
        ptx.fence_proxy_async(k, "shared::cta")
    k.bar_sync(0)
    with k.if_(is_first):
        x = k.mad(bx, BOX_COLS, k.ld_param(origin_x), type=t.s32)
        y = k.mad(by, BOX_ROWS, k.ld_param(origin_y), type=t.s32)
        ptx.cp_async_bulk_tensor(k, "shared::cluster", "global", tile, tmap, (x, y), bar)
        ptx.mbarrier_arrive_expect_tx(k, "release", "cta", "shared::cta", bar, BOX_BYTES,
                                      dst="_")
    ptx.mbarrier_wait(k, bar, 0)

    # 32 threads x 16 bytes = the 512-byte tile, to out[by][bx].
    index = k.mad(by, TILES_X, bx)
    off = k.shl(tid, 4)
    chunk = k.ld(Addr(k.add(k.mov(tile), off)), type=t.b32, space="shared::cta", vec=4)
    base = k.cvta(k.ld_param(out), "global", to=True)
    dst = k.add(base, k.cvt(k.mad(index, BOX_BYTES, off), t.u64))
    k.st(Addr(dst), chunk, type=t.b32, space="global")
    k.ret()
    return k


def build_module() -> Module:
    return Module([build_encode(), build_load_tiles()], name="zero_template")


# -- host side -----------------------------------------------------------------------------------
def expected_tiles(tensor: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The tiles (zero fill) and which of their elements lie inside the tensor."""
    ox, oy = ORIGIN
    big = np.zeros((TILES_Y * BOX_ROWS, TILES_X * BOX_COLS), tensor.dtype)
    inside = np.zeros(big.shape, bool)
    big[-oy:-oy + ROWS, -ox:-ox + COLS] = tensor
    inside[-oy:-oy + ROWS, -ox:-ox + COLS] = True

    def tiles(a: np.ndarray) -> np.ndarray:
        return a.reshape(TILES_Y, BOX_ROWS, TILES_X, BOX_COLS).transpose(0, 2, 1, 3)

    return tiles(big), tiles(inside)


def run() -> Report:
    from ptxdsl import runtime as rt
    report = Report("zero_template")
    rng = np.random.default_rng(2010)
    mod = build_module().load()

    memory = random_array(rng, (ROWS, ROW_PITCH), np.float32)   # padding columns hold data too
    tensor = rt.DeviceBuffer.from_numpy(memory)
    want, inside = expected_tiles(memory[:, :COLS])
    shape = (TILES_Y, TILES_X, BOX_ROWS, BOX_COLS)
    report.note(f"{ROWS}x{COLS} f32 (rows padded to {ROW_PITCH}), {TILES_Y}x{TILES_X} tiles of "
                f"{BOX_ROWS}x{BOX_COLS} from (x, y) = {ORIGIN}, one CTA each")

    for nan_fill in (0, 1):
        fill = "OOB-NaN" if nan_fill else "zero"
        global_map = rt.DeviceBuffer.empty((128,), np.uint8)
        global_map.memset(POISON)
        mod["encode_from_zeros"].launch(grid=1, block=32, args=(
            tensor, COLS, ROWS, ROW_PITCH * 4, nan_fill, global_map))
        out = rt.DeviceBuffer.empty(shape, np.float32)
        out.memset(POISON)
        mod["load_tiles"].launch(grid=(TILES_X, TILES_Y), block=32,
                                 args=(global_map, *ORIGIN, out))
        sync()
        got = out.to_numpy()
        if nan_fill:
            report.check_equal(f"{fill} fill: in-bounds elements", got[inside], want[inside])
            nans = np.isnan(got[~inside])
            report.check(f"{fill} fill: out-of-bounds elements are NaN", nans.all(),
                         f"{int(nans.sum())} of {nans.size} NaN")
        else:
            report.check_equal(f"{fill} fill: all {TILES_Y * TILES_X} tiles", got, want)
    return report


def main(argv: list[str] | None = None) -> int:
    return sample_main(argv, __doc__, build_module, run)


if __name__ == "__main__":
    raise SystemExit(main())
