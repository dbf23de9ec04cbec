"""The staged TMA-store epilogue of a wgmma tile: a consumer warpgroup's packed 16-bit 64 x n
accumulator copy goes to global memory through shared memory, so the global writes are TMA's
(clipped at the tensor map's edges, running on while the warpgroup starts its next tile)
instead of 2n predicated stores per thread.

Per 128 columns of the tile (PTX emitted by `TmaStoreEpilogue.store`; a last 64 columns take
4 stmatrix and one box)::

    @leader cp.async.bulk.wait_group.read 0;     // the staging buffer's last stores read it
    bar.sync id, 128;
    stmatrix.sync.aligned.m8n8.x4.shared.b16 [chunk], {r0, r1, r2, r3};    // x 8
    fence.proxy.async.shared::cta;               // generic-proxy writes -> TMA's reads
    bar.sync id, 128;
    @leader cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group [map, {c, r}], [box];  // x 2
    @leader cp.async.bulk.commit_group;

The staging buffer is two 64 x 64 boxes of 128-byte rows in the 128B swizzle (16-byte chunk c
of row r at chunk c ^ (r % 8)), 16 KiB, 1024-byte aligned; the tensor map must have a 64 x 64
box of a 16-bit type with the 128B swizzle (`TmaStoreEpilogue.check_tensormap`).

A map of 3 to 5 dimensions (`rank=`) is stored with `cp.async.bulk.tensor.Nd` and a box of
64 x 64 x 1 ...: columns are dimension 0 and rows dimension 1, as in 2-D, and each store gives
the further coordinates (a batch-head index, or head and batch). TMA clips each dimension at
its own extent, so a tile that runs past a sequence's last row drops those rows instead of
writing the next sequence's, which a 2-D map over all sequences' rows would do.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .errors import BuildError, OperandError, Sealed, fail_closed_methods
from .fragments import Fragment, check_kernel, shared_dst
from .instructions._tma_addr import symbol_fit
from .instructions.base import _given, check_src, int_like
from .instructions.sync import _barrier_id
from .instructions.wgmma_desc import SwizzleMode, tensormap_desc
from .operands import Addr, IntLike, Reg, Symbol, check_owned
from .types import ScalarType

if TYPE_CHECKING:  # pragma: no cover
    from .kernel import Kernel

BOX_ROWS = BOX_COLS = 64                       # one TMA store: 64 rows x 64 16-bit values
MAX_RANK = 5                                   # cp.async.bulk.tensor's .1d ... .5d
STAGING_BYTES = 2 * BOX_ROWS * BOX_COLS * 2    # two boxes: 128 columns of the tile at a time
STAGING_ALIGN = 1024                           # the 128B swizzle repeats every 8 rows of 128 B
STAGING_NEEDS = (f"the staging buffer ({STAGING_BYTES} bytes, {STAGING_BYTES // 2} for N = 64; "
                 f"{STAGING_ALIGN}-byte aligned for the 128B swizzle)")


def _coord(value: Any, name: str) -> Any:
    """A tensor coordinate: a 32-bit integer register or an int in [0, 2^31) (rows/columns
    past the tensor's far edges are clipped; a TMA store's start may not be negative, which
    faults at run time, as cp.async.bulk.tensor's builder says)."""
    value = int_like(value)
    if isinstance(value, int) and not isinstance(value, bool):
        if 0 <= value < 1 << 31:
            return value
    elif isinstance(value, Reg) and value.type.bits == 32 and value.type.kind in "bus":
        return check_src("TmaStoreEpilogue.store", name, value, ScalarType.s32)
    raise OperandError("TmaStoreEpilogue.store", name, "a tensor coordinate: a 32-bit integer "
                       "register or a non-negative int below 2^31 (a TMA store may not start "
                       "at a negative coordinate)", _given(value))


class TmaStoreEpilogue(Sealed):
    """One consumer warpgroup's epilogue. `staging`: its STAGING_BYTES buffer (1024-byte
    aligned; each warpgroup needs its own), a 32-bit shared address register or a shared
    symbol (or `Addr(symbol, offset)`), whose alignment and extent are then checked (a tile of
    N = 64 uses only the first half); `tmap`: the 64-bit generic address of the output's
    tensor map (e.g. `k.tensormap_addr(param)`, or a map the kernel encoded in global memory
    and acquired); `barrier`: a named barrier id (int 0..15 or .u32 register) only this
    warpgroup's 128 threads use (not one a ping-pong's `bar.sync id, 256` also uses: the
    checker reports that as `named-barrier-collision`); `rank`: the tensor map's dimensions,
    2 (the default) to 5, which each `store` gives coordinates for (columns, rows, then the
    further ones)."""

    def __init__(self, k: Kernel, staging: Reg | Symbol | Addr, tmap: Reg,
                 barrier: Reg | IntLike, *, rank: IntLike = 2) -> None:
        check_kernel("TmaStoreEpilogue", k)
        check_owned("TmaStoreEpilogue", k, staging=staging, tmap=tmap, barrier=barrier)
        n = int_like(rank)
        if isinstance(n, bool) or not isinstance(n, int) or not 2 <= n <= MAX_RANK:
            raise OperandError("TmaStoreEpilogue", "rank", f"the output map's dimensions: an "
                               f"int from 2 to {MAX_RANK}", _given(rank))
        base = staging.base if isinstance(staging, Addr) else staging
        if not isinstance(base, Symbol) and not (
                isinstance(staging, Reg) and staging.type.bits == 32
                and (staging.space is None or staging.space.is_shared)):
            raise BuildError("TmaStoreEpilogue: staging must be a 32-bit shared address "
                             "register, a shared symbol or Addr(symbol, offset), got "
                             f"{_given(staging)}"[:300])
        if not isinstance(tmap, Reg) or tmap.type.bits != 64 or tmap.type.is_float:
            raise OperandError("TmaStoreEpilogue", "tmap", "a 64-bit register holding the "
                               "tensor map's generic address (k.tensormap_addr(param))",
                               _given(tmap))
        _barrier_id("TmaStoreEpilogue: barrier", barrier)
        # kept to check each store's extent against the symbol it is (or a register is known
        # to hold the address of: symbol_fit checks that one too, and no other register)
        self.staging = staging
        staging = shared_dst(k, staging, "TmaStoreEpilogue", STAGING_BYTES // 2, STAGING_ALIGN,
                              STAGING_NEEDS, "staging")
        self.k, self.buf, self.tmap, self.barrier, self.rank = k, staging, tmap, barrier, n
        tid = k.and_(k.tid.x, 127)
        self.leader = tid == 0
        # stmatrix addressing: lane L writes row L%8 of matrix L/8 (matrices: rows +0/+8,
        # columns +0/+8 of a 16 x 16 block); the swizzle's r % 8 is L % 8 here.
        lane = k.and_(tid, 31)
        mat = k.shr(lane, 3)
        row = k.add(k.add(k.mul(k.shr(tid, 5), 16), k.shl(k.and_(mat, 1), 3)),
                    k.and_(lane, 7))
        y = k.xor(k.and_(lane, 7), k.shr(mat, 1))
        row_base = k.add(staging, k.shl(row, 7))
        self.chunks = [k.add(row_base, k.shl(k.xor(y, 2 * j), 4)) for j in range(4)]
        self._seal()

    def store(self, packed: Fragment, row0: Reg | IntLike, col0: Reg | IntLike,
              *outer: Reg | IntLike, staging: Reg | Symbol | Addr | None = None,
              whole: bool = False) -> None:
        """Store `packed` (a packed bf16/f16 64 x n fragment, n a multiple of 64) at
        (row0, col0) of the tensor map's tensor; rows/columns past its edges are dropped.
        A map of `rank` 3 to 5 takes its further coordinates after col0, in the map's order
        (dimension 2 first): `store(p, row0, col0, batch_head)` for (col, row, batch_head),
        `store(p, row0, col0, head, batch)` for (col, row, head, batch).

        `staging`: this store's staging buffer instead of the one the epilogue was made
        with (same rules), for a buffer that moves from store to store, e.g. the ring stage
        of an operand the warpgroup has finished reading; hand such a buffer back to its
        ring only after `wait_read`. `whole`: the staging buffer holds the whole tile (n x 64
        x 2 bytes, e.g. a 64-row ring stage of the tile's width): every box is staged at once
        and stored in one bulk group, with no wait for one pass's reads before the next
        (with N above 128, a 16 KiB buffer is reused pass by pass)."""
        from . import ptx
        k = self.k
        if type(whole) is not bool:
            raise OperandError("TmaStoreEpilogue.store", "whole", "True or False",
                               _given(whole))
        check_owned("TmaStoreEpilogue.store", k, packed=getattr(packed, "regs", None),
                    row0=row0, col0=col0, outer=outer, staging=staging)
        chunks, buf, at = self.chunks, self.buf, self.staging
        if staging is not None:
            at = staging
            buf = shared_dst(k, staging, "TmaStoreEpilogue.store", STAGING_BYTES // 2,
                             STAGING_ALIGN, STAGING_NEEDS, "staging")
            # each lane's chunks at the same offsets in the other buffer
            chunks = [k.add(buf, k.sub(c, self.buf)) for c in self.chunks]
        if not isinstance(packed, Fragment):
            raise OperandError("TmaStoreEpilogue.store", "packed", "a packed 16-bit fragment "
                               "(acc.to_packed(t.bf16))", _given(packed))
        if packed.value_bits != 16 or not packed.packed or packed.n % BOX_COLS:
            raise BuildError("TmaStoreEpilogue.store: a packed 16-bit fragment with N a "
                             f"multiple of {BOX_COLS} (to_packed(t.bf16)), got a "
                             f"{packed._describe()}")
        if len(outer) != self.rank - 2:
            raise BuildError(
                f"TmaStoreEpilogue.store: the output map has {self.rank} dimensions (rank="
                f"{self.rank}): give row0, col0 and {self.rank - 2} further coordinate"
                f"{'s' * (self.rank != 3)} (dimension 2 on, in the map's order), got "
                f"{len(outer)} after col0; a map of another rank needs an epilogue made with "
                f"rank={2 + len(outer)}")
        row0, col0 = _coord(row0, "row0"), _coord(col0, "col0")
        rest = tuple(_coord(c, f"coordinate {2 + i}") for i, c in enumerate(outer))
        # the last box starts N - 64 columns on, which must still be an .s32 coordinate
        if isinstance(col0, int) and col0 + packed.n - BOX_COLS >= 1 << 31:
            raise OperandError("TmaStoreEpilogue.store", "col0", f"a column whose last box "
                               f"(col0 + {packed.n - BOX_COLS} for N={packed.n}) starts "
                               "below 2^31", repr(col0))
        size = packed.n * BOX_ROWS * 2 if whole else min(STAGING_BYTES, packed.n * BOX_ROWS * 2)
        symbol_fit("TmaStoreEpilogue.store", "staging", at, size=size, what=STAGING_NEEDS
                   if not whole else f"the whole tile's {size} bytes (whole=True)")
        # passes of 128 columns (64-column boxes each), one at a time through the buffer, or
        # all in one round at successive STAGING_BYTES (whole)
        passes = [(h, min(2, (packed.n - 128 * h) // BOX_COLS))
                  for h in range(-(-packed.n // 128))]
        for round_ in [passes] if whole else [[p] for p in passes]:
            with k.if_(self.leader):
                ptx.cp_async_bulk_wait_group_read(k, 0)
            k.bar_sync(self.barrier, 128)
            for h, boxes in round_:
                for q in range(4 * boxes):
                    regs = packed.regs[4 * (8 * h + q):4 * (8 * h + q) + 4]
                    k.stmatrix(Addr(chunks[q % 4], h * STAGING_BYTES * whole
                                    + (q // 4) * STAGING_BYTES // 2), regs)
            ptx.fence_proxy_async(k, "shared::cta")   # stmatrix writes -> TMA's reads
            k.bar_sync(self.barrier, 128)
            with k.if_(self.leader):
                for h, boxes in round_:
                    for box in range(boxes):
                        step = 128 * h + BOX_COLS * box
                        col = col0 + step if isinstance(col0, int) else k.add(col0, step)
                        ptx.cp_async_bulk_tensor(
                            k, "global", "shared::cta", self.tmap, (col, row0, *rest),
                            k.add(buf, h * STAGING_BYTES * whole + box * STAGING_BYTES // 2))
                ptx.cp_async_bulk_commit_group(k)

    def wait_read(self) -> None:
        """The leader thread (the one that issues the stores) waits until every store has
        read its staging buffer: after this, and only in that thread's program order, the
        buffer may be written by others (a ring stage released by that thread: the next
        copy into it cannot overwrite what a store has yet to read)."""
        from . import ptx
        with self.k.if_(self.leader):
            ptx.cp_async_bulk_wait_group_read(self.k, 0)

    def finish(self) -> None:
        """Wait until this warpgroup's stores are complete (before the kernel ends)."""
        from . import ptx
        with self.k.if_(self.leader):
            ptx.cp_async_bulk_wait_group(self.k, 0)

    @staticmethod
    def check_tensormap(tmap: object, rank: IntLike = 2) -> None:
        """Raise BuildError unless `tmap` (a runtime TensorMap or its TiledDesc) stores what
        `store` stages to an epilogue of `rank` dimensions: a map of that rank, a box of
        64 x 64 (x 1 in the further dimensions) 16-bit elements with the 128B swizzle."""
        what = "TmaStoreEpilogue.check_tensormap"
        desc = tensormap_desc(what, tmap)
        n = int_like(rank)
        if isinstance(n, bool) or not isinstance(n, int) or not 2 <= n <= MAX_RANK:
            raise OperandError(what, "rank", f"the epilogue's rank: an int from 2 to "
                               f"{MAX_RANK}", _given(rank))
        swizzle = getattr(desc.swizzle, "name", str(desc.swizzle))
        box, bits = tuple(desc.box_dim), desc.data_type.bits
        want = (BOX_COLS, BOX_ROWS) + (1,) * (n - 2)
        # elementStrides > 1 read part of the staged box (64 rows with stride 2: 32) and
        # spread it over the tensor's rows: the rest of the tile would be lost
        delivered = tuple(getattr(desc, "box_elements", box))
        if delivered != box:
            raise BuildError(f"TmaStoreEpilogue: the output map's elementStrides "
                             f"{list(desc.element_strides)} make a box store "
                             f"{list(delivered)} of the {list(box)} staged elements: give a "
                             "map with element strides of 1")
        if box != want or bits != 16 or swizzle != SwizzleMode.b128.tma_name:
            # a static method: an epilogue of another rank must say so (rank=), or a right
            # 3-D map would be refused for not being 2-D
            hint = (f"; the map has {len(box)} dimensions: an epilogue made with rank="
                    f"{len(box)} checks it with check_tensormap(map, rank={len(box)})"
                    if len(box) != n and 2 <= len(box) <= MAX_RANK else "")
            raise BuildError(f"TmaStoreEpilogue: the output map needs a box of {list(want)} "
                             f"16-bit elements with the 128B swizzle (rank {n}), got box "
                             f"{list(box)}, {bits}-bit elements, {swizzle}{hint}")


fail_closed_methods(TmaStoreEpilogue, "TmaStoreEpilogue")
