"""A ragged batch: G tensors of different shapes and dtypes copied by TMA in one launch, each
CTA encoding its own tensor maps on the device from a table in global memory.

Seed: CCCL's "How to initialize a tensor map on device" — device-side encoding exists for
"processing a batch of tensors of various sizes in a single kernel launch", where passing one
`__grid_constant__` map per tensor is not possible.

`ragged_copy` runs one warp per tensor (CTA g handles tensor g):
1. lane 0 reads record g of the table (addresses, shape, row pitch, box, element type), copies
   the host-made template into shared memory and replaces every field for the source tensor;
   a second shared copy gets the destination's address;
2. `__syncwarp()`, then the warp publishes both maps into this CTA's slots of a global
   workspace with `tensormap.cp_fenceproxy ... .release.gpu`;
3. lane 0 acquires them (`fence.proxy.tensormap::generic.acquire.gpu`) and walks the tensor's
   tiles: TMA load (mbarrier, expect_tx = the box bytes), TMA store (clipped at the edges),
   `cp.async.bulk.wait_group.read 0` before the tile buffer is reused.

The element type is an immediate-only field, so the kernel branches to one `tensormap.replace
.elemtype` per supported type.

For comparison, the module also has `ragged_copy_host_maps` (the same copy with maps encoded on
the host and uploaded in one batch: acquired with `.sys`) and `tile_copy` (one launch per
tensor, maps passed by value); the benchmarks reuse all three through `RaggedBatch` (G = 16,
256, 4096: `run(G=...)`).

A TMA store writes whole 16-byte chunks: where a row does not end on a 16-byte boundary, the
rest of its last chunk is written too (with the zeros the load filled in; seen on an H100,
and documented by Triton). The check expects exactly that, and untouched padding beyond it.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

import numpy as np

from ptxdsl import Addr, Kernel, Module, Reg, Symbol, ptx, t
from ptxdsl.sample_runner import POISON, Report, random_array, sample_main, sync

if TYPE_CHECKING:   # the runtime is imported when a GPU run needs it
    from ptxdsl.runtime import TensorMap

space_shared = ptx.space_shared   # cuda::ptx's tag, as the CUDA code spells it

# One record of the table in global memory (64 bytes, little-endian), by field offset.
RECORD = np.dtype({
    "names": ["src", "dst", "row_pitch", "cols", "rows", "box_cols", "box_rows", "elemtype",
              "box_bytes"],
    "formats": ["<u8", "<u8", "<u8", "<u4", "<u4", "<u4", "<u4", "<u4", "<u4"],
    "offsets": [0, 8, 16, 24, 28, 32, 36, 40, 44],
    "itemsize": 64,
})
# The element types the kernel can encode: numpy dtype of the data -> PTX .elemtype name
# (bf16 data travels as uint16 bits; the map still says bf16).
DTYPES = {"u8": np.uint8, "u16": np.uint16, "u32": np.uint32, "s32": np.int32,
          "u64": np.uint64, "s64": np.int64, "f16": np.float16, "f32": np.float32,
          "f64": np.float64, "bf16": np.uint16}
ELEMTYPE_CODE = {"u8": 0, "u16": 1, "u32": 2, "s32": 3, "u64": 4, "s64": 5, "f16": 6, "f32": 7,
                 "f64": 9, "bf16": 10}      # PTX codes: f64 and bf16 are not the driver's 8, 9
TILE_BYTES = 4096        # shared tile buffer; each tensor's box must fit
BOX_INNER_BYTES = 64     # the default box: 64 bytes of a row (a multiple of 16) ...
BOX_ROWS = 16            # ... by 16 rows
MAP_BYTES = 128
FIELDS = dict(RECORD.fields or {})   # name -> (dtype, byte offset)


def _field(k: Kernel, rec: Reg, name: str) -> Reg:
    """Load one field of the record at `rec` (a .global address)."""
    fmt, off = FIELDS[name][:2]
    return k.ld(Addr(rec, off), type=t.u64 if fmt.itemsize == 8 else t.u32, space="global")


def emit_encode(k: Kernel, template: Symbol, src_smap: Symbol, dst_smap: Symbol,
                rec: Reg) -> None:
    """Lane 0: the source and destination maps of record `rec` in shared memory."""
    # Copy-initialise from the template, then replace every field of a 2-D map.
    k.copy(src_smap, template, MAP_BYTES)
    ptx.tensormap_replace_global_address(k, space_shared, src_smap, _field(k, rec, "src"))
    ptx.tensormap_replace_rank(k, space_shared, src_smap, rank=2)
    ptx.tensormap_replace_box_dim(k, space_shared, src_smap, 0, _field(k, rec, "box_cols"))
    ptx.tensormap_replace_box_dim(k, space_shared, src_smap, 1, _field(k, rec, "box_rows"))
    ptx.tensormap_replace_global_dim(k, space_shared, src_smap, 0, _field(k, rec, "cols"))
    ptx.tensormap_replace_global_dim(k, space_shared, src_smap, 1, _field(k, rec, "rows"))
    ptx.tensormap_replace_global_stride(k, space_shared, src_smap, 0, _field(k, rec, "row_pitch"))
    ptx.tensormap_replace_element_stride(k, space_shared, src_smap, 0, 1)
    ptx.tensormap_replace_element_stride(k, space_shared, src_smap, 1, 1)
    # .elemtype takes an immediate: one instruction per type, chosen at run time.
    elemtype = _field(k, rec, "elemtype")
    for name, code in ELEMTYPE_CODE.items():
        with k.if_(elemtype == code):
            ptx.tensormap_replace_elemtype(k, space_shared, src_smap, name)
    ptx.tensormap_replace_interleave_layout(k, space_shared, src_smap, "none")
    ptx.tensormap_replace_swizzle_mode(k, space_shared, src_smap, "none")
    ptx.tensormap_replace_fill_mode(k, space_shared, src_smap, "zero")
    # The destination map is the same but for its address.
    k.copy(dst_smap, src_smap, MAP_BYTES)
    ptx.tensormap_replace_global_address(k, space_shared, dst_smap, _field(k, rec, "dst"))


def emit_tile_copy(k: Kernel, src_map: Reg, dst_map: Reg, rec: Reg, tile: Symbol,
                   bar: Symbol) -> None:
    """One thread: copy every tile of record `rec`'s tensor from `src_map` to `dst_map`
    (64-bit generic map addresses) through the shared buffer `tile`."""
    cols, rows = _field(k, rec, "cols"), _field(k, rec, "rows")
    box_cols, box_rows = _field(k, rec, "box_cols"), _field(k, rec, "box_rows")
    box_bytes = _field(k, rec, "box_bytes")
    tiles_x = k.div(k.add(cols, k.sub(box_cols, 1)), box_cols)     # ceil(cols / box_cols)
    tiles_y = k.div(k.add(rows, k.sub(box_rows, 1)), box_rows)
    ptx.mbarrier_init(k, bar, 1)
    ptx.fence_proxy_async(k, "shared::cta")
    phase = ptx.MbarrierPhase(k, bar)
    with k.for_range(0, k.mul(tiles_x, tiles_y)) as i:
        ty = k.div(i, tiles_x)
        x = k.mul(k.sub(i, k.mul(ty, tiles_x)), box_cols)
        y = k.mul(ty, box_rows)
        ptx.cp_async_bulk_tensor(k, "shared::cluster", "global", tile, src_map, (x, y), bar)
        ptx.mbarrier_arrive_expect_tx(k, "release", "cta", "shared::cta", bar, box_bytes,
                                      dst="_")
        phase.wait()
        # Conservative: the tile goes from TMA load to TMA store without a generic write in
        # between, but with this fence a transform of the tile here would stay correct.
        ptx.fence_proxy_async(k, "shared::cta")
        ptx.cp_async_bulk_tensor(k, "global", "shared::cta", dst_map, (x, y), tile)
        ptx.cp_async_bulk_commit_group(k)
        # The next load overwrites the tile: wait until the store has read it.
        ptx.cp_async_bulk_wait_group_read(k, 0)
    ptx.mbarrier_inval(k, bar)


def _record(k: Kernel, table: Symbol) -> Reg:
    """The .global address of this CTA's record: table + ctaid.x * 64."""
    base = k.cvta(k.ld_param(table), "global", to=True)
    return k.add(base, k.mul(k.ctaid.x, RECORD.itemsize, mode="wide"))


def build_ragged_copy() -> Kernel:
    k = Kernel("ragged_copy", reqntid=32)
    template = k.param_tensormap("template")
    table = k.param_ptr("table")          # G records
    maps = k.param_ptr("maps")            # workspace: G x (source map, destination map)
    src_smap = k.shared_array(t.b8, MAP_BYTES, align=128, name="src_smap")
    dst_smap = k.shared_array(t.b8, MAP_BYTES, align=128, name="dst_smap")
    tile = k.shared_array(t.b8, TILE_BYTES, align=128, name="tile")
    bar = k.shared_array(t.b64, 1, align=8, name="bar")
    rec = _record(k, table)
    lane0 = k.tid.x == 0

    with k.if_(lane0):
        emit_encode(k, template, src_smap, dst_smap, rec)
    k.syncwarp()
    # This CTA's two slots in the workspace, as generic addresses.
    src_map = k.add(k.ld_param(maps), k.mul(k.ctaid.x, 2 * MAP_BYTES, mode="wide"))
    dst_map = k.add(src_map, MAP_BYTES)
    ptx.tensormap_cp_fenceproxy(k, ptx.sem_release, ptx.scope_gpu, src_map, src_smap, 128)
    ptx.tensormap_cp_fenceproxy(k, ptx.sem_release, ptx.scope_gpu, dst_map, dst_smap, 128)
    with k.if_(lane0):
        ptx.fence_proxy_tensormap_generic(k, "acquire", "gpu", src_map)
        ptx.fence_proxy_tensormap_generic(k, "acquire", "gpu", dst_map)
        emit_tile_copy(k, src_map, dst_map, rec, tile, bar)
    k.ret()
    return k


def build_ragged_copy_host_maps() -> Kernel:
    """The same copy with maps the host encoded and uploaded (cudaMemcpy): acquired .sys."""
    k = Kernel("ragged_copy_host_maps", reqntid=32)
    table = k.param_ptr("table")
    maps = k.param_ptr("maps")
    tile = k.shared_array(t.b8, TILE_BYTES, align=128, name="tile")
    bar = k.shared_array(t.b64, 1, align=8, name="bar")
    rec = _record(k, table)
    with k.if_(k.tid.x == 0):
        src_map = k.add(k.ld_param(maps), k.mul(k.ctaid.x, 2 * MAP_BYTES, mode="wide"))
        dst_map = k.add(src_map, MAP_BYTES)
        ptx.fence_proxy_tensormap_generic(k, "acquire", "sys", src_map)
        ptx.fence_proxy_tensormap_generic(k, "acquire", "sys", dst_map)
        emit_tile_copy(k, src_map, dst_map, rec, tile, bar)
    k.ret()
    return k


def build_tile_copy() -> Kernel:
    """One tensor per launch, its maps passed by value (no fences needed)."""
    k = Kernel("tile_copy", reqntid=32)
    src_param, dst_param = k.param_tensormap("src_map"), k.param_tensormap("dst_map")
    table = k.param_ptr("table")
    tile = k.shared_array(t.b8, TILE_BYTES, align=128, name="tile")
    bar = k.shared_array(t.b64, 1, align=8, name="bar")
    rec = k.cvta(k.ld_param(table), "global", to=True)   # launched with the tensor's record
    with k.if_(k.tid.x == 0):
        emit_tile_copy(k, k.tensormap_addr(src_param), k.tensormap_addr(dst_param), rec, tile,
                       bar)
    k.ret()
    return k


def build_module() -> Module:
    return Module([build_ragged_copy(), build_ragged_copy_host_maps(), build_tile_copy()],
                  name="ragged_batch")


# -- host side -----------------------------------------------------------------------------------
def random_specs(G: int, seed: int = 0, max_rows: int = 48,
                 max_cols: int = 160) -> list[tuple[str, int, int]]:
    """G (elemtype, rows, cols) triples: the element types in turn (so 10 tensors cover them
    all), random shapes, most of them not a whole number of boxes."""
    rng = np.random.default_rng(seed)
    names = list(ELEMTYPE_CODE)
    return [(names[g % len(names)], int(rng.integers(1, max_rows + 1)),
             int(rng.integers(1, max_cols + 1))) for g in range(G)]


class RaggedBatch:
    """G 2-D tensors in one source pool and one (poisoned) destination pool on the device,
    with the table `ragged_copy` reads and a workspace for the maps it writes.

    `specs`: (elemtype name, rows, cols) per tensor. Rows are padded to a multiple of 16 bytes
    plus 0, 16 or 32 bytes (tensor g: 16 * (g % 3)); every tensor starts on a 256-byte
    boundary; the box is BOX_INNER_BYTES x BOX_ROWS unless given.
    """

    def __init__(self, specs: Iterable[tuple[str, int, int]], seed: int = 0,
                 box_inner_bytes: int = BOX_INNER_BYTES, box_rows: int = BOX_ROWS) -> None:
        from ptxdsl import runtime as rt
        self.rt = rt
        self.specs = list(specs)
        self.G = len(self.specs)
        rng = np.random.default_rng(seed + 1)
        offsets, layouts, end = [], [], 0
        for g, (name, rows, cols) in enumerate(self.specs):
            itemsize = np.dtype(DTYPES[name]).itemsize
            pitch = -(-cols * itemsize // 16) * 16 + 16 * (g % 3)
            offsets.append(end)
            layouts.append((rows, cols, pitch, itemsize))
            end += -(-rows * pitch // 256) * 256
        self.nbytes = max(end, 256)
        self.offsets, self.layouts = offsets, layouts
        self.src_host = random_array(rng, (self.nbytes,), np.uint8)
        self.src = rt.DeviceBuffer.from_numpy(self.src_host)
        self.dst = rt.DeviceBuffer.empty((self.nbytes,), np.uint8)

        table = np.zeros(self.G, RECORD)
        for g, ((name, rows, cols), off, (_, _, pitch, itemsize)) in enumerate(
                zip(self.specs, offsets, layouts, strict=True)):
            box_cols = min(box_inner_bytes // itemsize, 256)
            table[g] = (self.src.ptr + off, self.dst.ptr + off, pitch, cols, rows, box_cols,
                        box_rows, ELEMTYPE_CODE[name], box_cols * box_rows * itemsize)
            if table[g]["box_bytes"] > TILE_BYTES:
                raise ValueError(f"tensor {g}: a box of {table[g]['box_bytes']} bytes does not "
                                 f"fit the {TILE_BYTES}-byte tile buffer")
        self.table_host = table
        self.table = rt.DeviceBuffer.from_numpy(table.view(np.uint8))
        self.maps = rt.DeviceBuffer.empty((self.G * 2 * MAP_BYTES,), np.uint8)
        # The template only needs to be a valid tiled map: every field is replaced.
        self.template = rt.TensorMap.tiled(self.src, (16,), np.uint8, (16,))

    def poison(self) -> None:
        self.dst.memset(POISON)
        self.maps.memset(POISON)

    def host_maps(self) -> list[tuple[TensorMap, ...]]:
        """(source, destination) maps per tensor, encoded by the driver."""
        out = []
        for g, (name, rows, cols) in enumerate(self.specs):
            rec = self.table_host[g]
            pitch_el = int(rec["row_pitch"]) // self.layouts[g][3]
            tma_type = "BFLOAT16" if name == "bf16" else DTYPES[name]
            box = (int(rec["box_rows"]), int(rec["box_cols"]))
            out.append(tuple(self.rt.TensorMap.tiled(int(rec[which]), (rows, cols), tma_type, box,
                                                     strides=(pitch_el, 1))
                             for which in ("src", "dst")))
        return out

    def upload_host_maps(self, maps: Iterable[tuple[TensorMap, ...]]) -> None:
        """The host-encoded maps into the workspace (one copy), for ragged_copy_host_maps."""
        blob = np.frombuffer(b"".join(bytes(m) for pair in maps for m in pair), np.uint8)
        self.maps.copy_from(blob)

    def expected(self) -> np.ndarray:
        """The destination pool after a correct copy: every tensor's elements; zeros in the
        rest of each row's last 16-byte chunk (a TMA store writes whole chunks, and the load
        zero-filled those bytes); poison in the padding beyond and between tensors."""
        want = np.full(self.nbytes, POISON, np.uint8)
        for off, (rows, cols, pitch, itemsize) in zip(self.offsets, self.layouts, strict=True):
            src = self.src_host[off:off + rows * pitch].reshape(rows, pitch)
            dst = want[off:off + rows * pitch].reshape(rows, pitch)
            row_bytes = cols * itemsize
            dst[:, :row_bytes] = src[:, :row_bytes]
            dst[:, row_bytes:-(-row_bytes // 16) * 16] = 0
        return want

    def tensor_view(self, pool: np.ndarray, g: int) -> np.ndarray:
        rows, cols, pitch, _ = self.layouts[g]
        off = self.offsets[g]
        return pool[off:off + -(-rows * pitch // 256) * 256]


def check(report: Report, batch: RaggedBatch, what: str) -> None:
    got, want = batch.dst.to_numpy(), batch.expected()
    bad = [g for g in range(batch.G)
           if not np.array_equal(batch.tensor_view(got, g), batch.tensor_view(want, g))]
    shown = ", ".join(f"{g} ({batch.specs[g][0]} {batch.specs[g][1]}x{batch.specs[g][2]})"
                      for g in bad[:5])
    report.check(f"{what}: every tensor equals numpy's copy, padding as expected", not bad,
                 f"{batch.G} tensors" if not bad else f"{len(bad)} tensors differ: {shown}")
    report.check_equal(f"{what}: the whole destination pool ({batch.nbytes} bytes)", got, want)


def run(G: int = 16, seed: int = 0) -> Report:
    report = Report(f"ragged_batch (G = {G})")
    mod = build_module().load()
    specs = random_specs(G, seed)
    batch = RaggedBatch(specs, seed)
    types = sorted({s[0] for s in specs})
    odd = sum(r % BOX_ROWS != 0 or c * np.dtype(DTYPES[n]).itemsize % BOX_INNER_BYTES != 0
              for n, r, c in specs)
    report.note(f"{G} tensors, element types {', '.join(types)}; {odd} of them not a whole "
                "number of boxes")

    batch.poison()
    mod["ragged_copy"].launch(grid=G, block=32, args=(batch.template, batch.table, batch.maps))
    sync()
    check(report, batch, "device-encoded maps, one launch")

    host_maps = batch.host_maps()
    batch.poison()
    batch.upload_host_maps(host_maps)
    mod["ragged_copy_host_maps"].launch(grid=G, block=32, args=(batch.table, batch.maps))
    sync()
    check(report, batch, "host-encoded maps uploaded, one launch")

    if G <= 256:  # one launch per tensor: the slow path the device-side encoding replaces
        batch.poison()
        record = RECORD.itemsize
        for g, (src_map, dst_map) in enumerate(host_maps):
            mod["tile_copy"].launch(grid=1, block=32,
                                    args=(src_map, dst_map, batch.table.ptr + g * record))
        sync()
        check(report, batch, "host-encoded maps by value, one launch per tensor")
    return report


def main(argv: list[str] | None = None) -> int:
    return sample_main(argv, __doc__, build_module, run)


if __name__ == "__main__":
    raise SystemExit(main())
