"""Small kernels shared by the checker tests: the common prologues of TMA code, so each test
shows only the lines that make (or fix) its hazard."""

from __future__ import annotations

import sys
from contextlib import nullcontext
from typing import Any

from ptxdsl import Kernel, ptx, t


def here() -> int:
    """The caller's line number (the line a finding must name is the next one)."""
    return sys._getframe(1).f_lineno


def ids(findings) -> list[str]:
    return sorted(f.id for f in findings)


def only(findings, hazard, line: int, count: int = 1):
    """The findings are `count` of `hazard`, the first (by line) at `line` of the calling test
    file; returns that one."""
    assert ids(findings) == [hazard.value] * count, [f.format() for f in findings]
    f = findings[0]
    caller = sys._getframe(1).f_code.co_filename
    assert f.loc.file == caller and f.loc.line == line, f.format()
    return f


def tiles_loop(k: Kernel, ntiles: Any = None) -> Any:
    """A persistent kernel's loop over its `ntiles` tiles (a register), as a context whose
    value is the tile; without `ntiles`, tile 0 once."""
    return k.for_range(0, ntiles) if ntiles is not None else nullcontext(0)


def produce_blocks(k: Kernel, ring: Any, tiles: Any, stage: int, tmap: Any, blocks: Any,
                   ntiles: Any = None) -> Any:
    """The producer of the staging tests' rings (in the thread the caller picks): for each
    tile (`tiles_loop`) and each of `blocks` blocks, wait for an empty stage, expect `stage`
    bytes and TMA-load block (tile, j) of `tmap` into it. Returns the ProducerView, past the
    last block."""
    p = ring.producer()
    with tiles_loop(k, ntiles) as tile:
        with k.for_range(0, blocks) as j:
            p.wait_empty()
            p.arrive_expect_tx(stage)
            ptx.cp_async_bulk_tensor(k, "shared::cluster", "global", p.slot(tiles, stage),
                                     tmap, (tile, j), p.full_barrier())
            p.advance()
    return p


def clean(k, **context) -> None:
    """The checker finds nothing in kernel `k` (with the given context, e.g. maps=)."""
    from ptxdsl.checker import check_kernel
    assert [f.format() for f in check_kernel(k, **context)] == []


class Tma:
    """A kernel with a tile, an mbarrier, and a map: a by-value parameter (`map="param"`) or a
    pointer to a map in global memory (`map="global"`, acquired by thread 0 unless
    `acquire=False`). `setup()` initialises the barrier in thread 0 and publishes it with
    bar.sync; `load()` / `store()` issue TMA from thread 0."""

    def __init__(self, name: str = "k", *, map: str = "param", acquire: bool = True,
                 scope: str = "gpu", tile_align: int = 128, threads: int = 128):
        k = self.k = Kernel(name, reqntid=threads)
        self.tile = k.shared_array(t.b8, 512, align=tile_align, name="tile")
        self.bar = k.shared_array(t.b64, 1, align=8, name="bar")
        if map == "param":
            self.tmap_param = k.param_tensormap("tmap")
            self.tmap = k.tensormap_addr(self.tmap_param)
        else:
            self.tmap_param = k.param_ptr("tmap_ptr")
            self.tmap = k.ld_param(self.tmap_param)
            if acquire:
                with k.if_(k.tid.x == 0):
                    ptx.fence_proxy_tensormap_generic(k, "acquire", scope, self.tmap)
                k.bar_sync(0)

    def setup(self) -> None:
        k = self.k
        with k.if_(k.tid.x == 0):
            ptx.mbarrier_init(k, self.bar, 1)
        k.bar_sync(0)

    def load(self, tx: int = 512, coords=(0, 0)) -> None:
        k = self.k
        with k.if_(k.tid.x == 0):
            ptx.cp_async_bulk_tensor(k, "shared::cluster", "global", self.tile, self.tmap,
                                     coords, self.bar)
            ptx.mbarrier_arrive_expect_tx(k, "release", "cta", "shared::cta", self.bar, tx,
                                          dst="_")

    def fill(self) -> None:
        """Every thread writes 4 bytes of the tile with st.shared."""
        k = self.k
        base = k.mov(self.tile)
        k.st(k.add(base, k.shl(k.tid.x, 2)), k.tid.x, type=t.u32, space="shared::cta")

    def store(self, coords=(0, 0), *, commit: bool = True, wait: int | None = 0) -> None:
        k = self.k
        with k.if_(k.tid.x == 0):
            ptx.cp_async_bulk_tensor(k, "global", "shared::cta", self.tmap, coords, self.tile)
            if commit:
                ptx.cp_async_bulk_commit_group(k)
            if wait is not None:
                ptx.cp_async_bulk_wait_group_read(k, wait)


TILE_DESC = {"box_bytes": 512}     # what maps={"tmap": ...} says of the map in these kernels

# The checker's context for a `peer_tma` kernel: its map `tmap_ptr` is of a peer's buffer, its
# signal pad `pad`
PEER_TMA_CONTEXT = dict(peer_buffers=["tmap_ptr"], signal_pads=["pad"],
                        cross_device_maps=["tmap_ptr"], maps={"tmap_ptr": TILE_DESC})


def peer_tma(name: str) -> tuple[Tma, object]:
    """A Tma kernel whose map is of a peer's buffer (check it with PEER_TMA_CONTEXT), with a
    signal-pad parameter `pad` (returned, loaded), its tile filled and fenced for the async
    proxy, and a CTA barrier: the TMA store into the peer comes next."""
    m = Tma(name, map="global", scope="sys")
    pad = m.k.ld_param(m.k.param_ptr("pad"))
    m.fill()
    ptx.fence_proxy_async(m.k, "shared::cta")
    m.k.bar_sync(0)
    return m, pad


def encode_map(k: Kernel, out, *, lane_cond=None, sync: bool = True):
    """The device-side encoder of the programming guide: lane 0 edits a shared copy, the warp
    publishes it with cp_fenceproxy. Returns the shared map."""
    smap = k.shared_array(t.b8, 128, align=128, name="smap")
    with k.if_(lane_cond if lane_cond is not None else k.tid.x == 0):
        ptx.tensormap_replace_rank(k, ptx.space_shared, smap, rank=2)
        ptx.tensormap_replace_box_dim(k, ptx.space_shared, smap, 0, 16)
    if sync:
        k.syncwarp()
    ptx.tensormap_cp_fenceproxy(k, ptx.sem_release, ptx.scope_gpu, out, smap, 128)
    return smap
