"""Gluon kernels (explicit mbarriers, TMA and wgmma) for the classes of bug that Triton's
runtime checker ConSan reports, each as a correct and a buggy kernel: the same function with a
BUG constexpr, so the two PTX files differ only by the bug.

ConSan's classes (Triton's TritonInstrument dialect notes): a shared buffer read while a write
to it is outstanding (TMA load not waited), a buffer written while reads of it are outstanding
(a TMA store's source or an async wgmma's operand), generic-proxy writes reaching an
async-proxy access with no fence_async_shared, and barrier misuse (re-initialisation without
invalidation, arrival-count underflow and waits that deadlock, transaction-count errors).
"""

from triton.experimental import gluon
from triton.experimental.gluon import language as ttgl
from triton.experimental.gluon.language.nvidia.hopper import (
    fence_async_shared,
    mbarrier,
    tma,
    warpgroup_mma,
    warpgroup_mma_wait,
)

TILE = 64
SMEM = ttgl.NVMMASharedLayout.get_default_for([TILE, TILE], ttgl.float16)
DESC = f"tensordesc<fp16[{TILE},{TILE}],{SMEM!r}>"


@gluon.jit
def _regs_layout():
    return ttgl.BlockedLayout([1, 8], [4, 8], [4, 1], [1, 0])


@gluon.jit
def _row_sums(tile, out, row0):
    layout: ttgl.constexpr = _regs_layout()
    x = tile.load(layout).to(ttgl.float32)
    rows = row0 + ttgl.arange(0, tile.shape[0], layout=ttgl.SliceLayout(1, layout))
    ttgl.store(out + rows, ttgl.sum(x, axis=1))


@gluon.jit
def tma_load_wait(desc, out, BUG: ttgl.constexpr):
    """Load one tile with TMA and reduce it. BUG: read the tile without waiting."""
    row0 = ttgl.program_id(0) * desc.block_type.shape[0]
    tile = ttgl.allocate_shared_memory(desc.dtype, desc.block_type.shape, desc.layout)
    bar = ttgl.allocate_shared_memory(ttgl.int64, [1], mbarrier.MBarrierLayout())
    mbarrier.init(bar, count=1)
    fence_async_shared()
    mbarrier.expect(bar, desc.block_type.nbytes)
    tma.async_load(desc, [row0, 0], bar, tile)
    if not BUG:
        mbarrier.wait(bar, phase=0)
    _row_sums(tile, out, row0)
    mbarrier.invalidate(bar)


@gluon.jit
def tma_load_first_phase(desc, out, BUG: ttgl.constexpr):
    """As tma_load_wait, waiting for the load's phase. BUG: waits for parity 1, which a fresh
    barrier reports complete at once, so the tile is read before it lands."""
    row0 = ttgl.program_id(0) * desc.block_type.shape[0]
    tile = ttgl.allocate_shared_memory(desc.dtype, desc.block_type.shape, desc.layout)
    bar = ttgl.allocate_shared_memory(ttgl.int64, [1], mbarrier.MBarrierLayout())
    mbarrier.init(bar, count=1)
    fence_async_shared()
    mbarrier.expect(bar, desc.block_type.nbytes)
    tma.async_load(desc, [row0, 0], bar, tile)
    mbarrier.wait(bar, phase=1 if BUG else 0)
    _row_sums(tile, out, row0)
    mbarrier.invalidate(bar)


@gluon.jit
def tma_load_init_order(desc, out, BUG: ttgl.constexpr):
    """As tma_load_wait. BUG: the barrier is initialised after the expect and the TMA load
    that use it (ConSan: barrier used before initialisation)."""
    row0 = ttgl.program_id(0) * desc.block_type.shape[0]
    tile = ttgl.allocate_shared_memory(desc.dtype, desc.block_type.shape, desc.layout)
    bar = ttgl.allocate_shared_memory(ttgl.int64, [1], mbarrier.MBarrierLayout())
    if not BUG:
        mbarrier.init(bar, count=1)
        fence_async_shared()
    mbarrier.expect(bar, desc.block_type.nbytes)
    tma.async_load(desc, [row0, 0], bar, tile)
    if BUG:
        mbarrier.init(bar, count=1)
        fence_async_shared()
    mbarrier.wait(bar, phase=0)
    _row_sums(tile, out, row0)
    mbarrier.invalidate(bar)


@gluon.jit
def tma_load_two_barriers(desc, out, BUG: ttgl.constexpr):
    """Two tiles loaded on two barriers, each waited before its tile is read. BUG: the second
    tile is read after waiting only on the first tile's barrier."""
    rows: ttgl.constexpr = desc.block_type.shape[0]
    row0 = ttgl.program_id(0) * 2 * rows
    tiles = ttgl.allocate_shared_memory(desc.dtype, [2] + desc.block_type.shape, desc.layout)
    bars = ttgl.allocate_shared_memory(ttgl.int64, [2, 1], mbarrier.MBarrierLayout())
    for j in ttgl.static_range(2):
        mbarrier.init(bars.index(j), count=1)
    fence_async_shared()
    for j in ttgl.static_range(2):
        mbarrier.expect(bars.index(j), desc.block_type.nbytes)
        tma.async_load(desc, [row0 + j * rows, 0], bars.index(j), tiles.index(j))
    for j in ttgl.static_range(2):
        mbarrier.wait(bars.index(0 if BUG else j), phase=0)
        _row_sums(tiles.index(j), out, row0 + j * rows)
    for j in ttgl.static_range(2):
        mbarrier.invalidate(bars.index(j))


@gluon.jit
def tma_load_loop(desc, out, n_tiles, BUG: ttgl.constexpr):
    """Reduce n_tiles tiles one after another through one buffer and one barrier whose phase
    flips per tile. BUG: re-initialises the live barrier every iteration instead."""
    rows: ttgl.constexpr = desc.block_type.shape[0]
    tile = ttgl.allocate_shared_memory(desc.dtype, desc.block_type.shape, desc.layout)
    bar = ttgl.allocate_shared_memory(ttgl.int64, [1], mbarrier.MBarrierLayout())
    if not BUG:
        mbarrier.init(bar, count=1)
        fence_async_shared()
    phase = 0
    for i in range(n_tiles):
        if BUG:
            mbarrier.init(bar, count=1)
            fence_async_shared()
        mbarrier.expect(bar, desc.block_type.nbytes)
        tma.async_load(desc, [i * rows, 0], bar, tile)
        mbarrier.wait(bar, phase=0 if BUG else phase)
        phase ^= 1
        _row_sums(tile, out, i * rows)
        # every warp has read the tile before the next load overwrites it
        ttgl.barrier()
    mbarrier.invalidate(bar)


@gluon.jit
def tma_store_fenced(desc, scale, BUG: ttgl.constexpr):
    """Write a tile from registers to shared memory and TMA-store it. BUG: no
    fence_async_shared between the generic-proxy writes and the async-proxy store."""
    layout: ttgl.constexpr = _regs_layout()
    rows: ttgl.constexpr = desc.block_type.shape[0]
    cols: ttgl.constexpr = desc.block_type.shape[1]
    r = ttgl.arange(0, rows, layout=ttgl.SliceLayout(1, layout))
    c = ttgl.arange(0, cols, layout=ttgl.SliceLayout(0, layout))
    x = (r[:, None] * cols + c[None, :]).to(ttgl.float32) * scale
    tile = ttgl.allocate_shared_memory(desc.dtype, desc.block_type.shape, desc.layout)
    tile.store(x.to(desc.dtype))
    if not BUG:
        fence_async_shared()
    tma.async_store(desc, [ttgl.program_id(0) * rows, 0], tile)
    tma.store_wait(0)


@gluon.jit
def tma_store_reuse(desc, scale, BUG: ttgl.constexpr):
    """Two TMA stores from one staging buffer. BUG: the buffer is rewritten for the second
    store before store_wait says the first has finished reading it."""
    layout: ttgl.constexpr = _regs_layout()
    rows: ttgl.constexpr = desc.block_type.shape[0]
    cols: ttgl.constexpr = desc.block_type.shape[1]
    r = ttgl.arange(0, rows, layout=ttgl.SliceLayout(1, layout))
    c = ttgl.arange(0, cols, layout=ttgl.SliceLayout(0, layout))
    x = (r[:, None] * cols + c[None, :]).to(ttgl.float32) * scale
    row0 = ttgl.program_id(0) * 2 * rows
    tile = ttgl.allocate_shared_memory(desc.dtype, desc.block_type.shape, desc.layout)
    tile.store(x.to(desc.dtype))
    fence_async_shared()
    tma.async_store(desc, [row0, 0], tile)
    if not BUG:
        tma.store_wait(0)
    tile.store((x * 2.0).to(desc.dtype))
    fence_async_shared()
    tma.async_store(desc, [row0 + rows, 0], tile)
    tma.store_wait(0)


@gluon.jit
def arrive_count(out, BUG: ttgl.constexpr):
    """One arrive completes the barrier's phase, then everyone waits for it. BUG: the
    barrier is initialised to expect two arrivals, so the phase never completes (hang)."""
    bar = ttgl.allocate_shared_memory(ttgl.int64, [1], mbarrier.MBarrierLayout())
    mbarrier.init(bar, count=2 if BUG else 1)
    ttgl.barrier()
    mbarrier.arrive(bar)
    mbarrier.wait(bar, phase=0)
    mbarrier.invalidate(bar)
    layout: ttgl.constexpr = ttgl.BlockedLayout([1], [32], [4], [0])
    i = ttgl.arange(0, 128, layout=layout)
    ttgl.store(out + i, i.to(ttgl.float32))


@gluon.jit
def expect_tx_device_desc(a, out, M, BUG: ttgl.constexpr):
    """A tensor descriptor made on the device (its box is a constant in the PTX), one TMA load
    of a 64 x 64 fp16 box (8192 bytes). BUG: expect announces half of it, so the wait can pass
    before the data has landed."""
    layout: ttgl.constexpr = ttgl.NVMMASharedLayout.get_default_for([64, 64], ttgl.float16)
    desc = tma.make_tensor_descriptor(a, shape=[M, 64], strides=[64, 1], block_shape=[64, 64],
                                      layout=layout)
    row0 = ttgl.program_id(0) * 64
    tile = ttgl.allocate_shared_memory(ttgl.float16, [64, 64], layout)
    bar = ttgl.allocate_shared_memory(ttgl.int64, [1], mbarrier.MBarrierLayout())
    mbarrier.init(bar, count=1)
    fence_async_shared()
    mbarrier.expect(bar, 4096 if BUG else 8192)
    tma.async_load(desc, [row0, 0], bar, tile)
    mbarrier.wait(bar, phase=0)
    _row_sums(tile, out, row0)
    mbarrier.invalidate(bar)


@gluon.jit
def wgmma_from_registers(c, BUG: ttgl.constexpr):
    """Operands computed in registers, written to shared memory (generic proxy) and read by
    an async wgmma (async proxy). BUG: no fence_async_shared between the two."""
    layout: ttgl.constexpr = _regs_layout()
    smem: ttgl.constexpr = ttgl.NVMMASharedLayout.get_default_for([64, 64], ttgl.float16)
    r = ttgl.arange(0, 64, layout=ttgl.SliceLayout(1, layout))
    k = ttgl.arange(0, 64, layout=ttgl.SliceLayout(0, layout))
    x = ((r[:, None] + k[None, :]) % 7).to(ttgl.float16)
    a = ttgl.allocate_shared_memory(ttgl.float16, [64, 64], smem)
    b = ttgl.allocate_shared_memory(ttgl.float16, [64, 64], smem)
    a.store(x)
    b.store(x)
    if not BUG:
        fence_async_shared()
    acc_layout: ttgl.constexpr = ttgl.NVMMADistributedLayout(
        version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, 64, 16])
    acc = ttgl.zeros([64, 64], ttgl.float32, layout=acc_layout)
    acc = warpgroup_mma(a, b.permute((1, 0)), acc, is_async=True)
    acc = warpgroup_mma_wait(0, deps=[acc])
    out = ttgl.convert_layout(acc, layout)
    ttgl.store(c + r[:, None] * 64 + k[None, :], out)


@gluon.jit
def _ws_loader(a_desc, b_desc, a_bufs, b_bufs, ready, empty, k_tiles,
               STAGES: ttgl.constexpr):
    bk: ttgl.constexpr = a_desc.block_type.shape[1]
    m0 = ttgl.program_id(0) * a_desc.block_type.shape[0]
    n0 = ttgl.program_id(1) * b_desc.block_type.shape[0]
    for i in range(k_tiles):
        s = i % STAGES
        # a fresh barrier's previous phase counts as complete: the first lap passes
        mbarrier.wait(empty.index(s), ((i // STAGES) & 1) ^ 1)
        mbarrier.expect(ready.index(s), a_desc.block_type.nbytes + b_desc.block_type.nbytes)
        tma.async_load(a_desc, [m0, i * bk], ready.index(s), a_bufs.index(s))
        tma.async_load(b_desc, [n0, i * bk], ready.index(s), b_bufs.index(s))


@gluon.jit
def _ws_mma(a_bufs, b_bufs, ready, empty, k_tiles, STAGES: ttgl.constexpr,
            BUG: ttgl.constexpr):
    acc_layout: ttgl.constexpr = ttgl.NVMMADistributedLayout(
        version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, 64, 16])
    acc = ttgl.zeros([64, 64], ttgl.float32, layout=acc_layout)
    for i in range(k_tiles):
        s = i % STAGES
        mbarrier.wait(ready.index(s), (i // STAGES) & 1)
        a = a_bufs.index(s)
        b = b_bufs.index(s).permute((1, 0))
        acc = warpgroup_mma(a, b, acc, is_async=True)
        if BUG:
            # the stage goes back to the loader while the wgmma may still read it
            mbarrier.arrive(empty.index(s))
            acc = warpgroup_mma_wait(0, deps=[acc])
        else:
            acc = warpgroup_mma_wait(0, deps=[acc])
            mbarrier.arrive(empty.index(s))
    return acc


@gluon.jit
def ws_gemm(a_desc, b_desc, c, N, K, BUG: ttgl.constexpr):
    """A 64 x 64 output tile per CTA: a 1-warp TMA loader partition and a 4-warp wgmma
    partition share a 3-stage ring of ready/empty barriers. BUG: the wgmma partition hands
    a stage back (arrive on empty) before warpgroup_mma_wait retires the wgmma reading it,
    so the loader's next TMA load may overwrite operands still being read."""
    STAGES: ttgl.constexpr = 3
    a_bufs = ttgl.allocate_shared_memory(a_desc.dtype, [STAGES] + a_desc.block_type.shape,
                                         a_desc.layout)
    b_bufs = ttgl.allocate_shared_memory(b_desc.dtype, [STAGES] + b_desc.block_type.shape,
                                         b_desc.layout)
    ready = ttgl.allocate_shared_memory(ttgl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    empty = ttgl.allocate_shared_memory(ttgl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    for s in ttgl.static_range(STAGES):
        mbarrier.init(ready.index(s), count=1)
        mbarrier.init(empty.index(s), count=1)
    fence_async_shared()
    k_tiles = ttgl.cdiv(K, a_desc.block_type.shape[1])
    acc = ttgl.warp_specialize(
        [(_ws_mma, (a_bufs, b_bufs, ready, empty, k_tiles, STAGES, BUG)),
         (_ws_loader, (a_desc, b_desc, a_bufs, b_bufs, ready, empty, k_tiles, STAGES))],
        [1], [24])
    layout: ttgl.constexpr = _regs_layout()
    out = ttgl.convert_layout(acc, layout)
    r = ttgl.program_id(0) * 64 + ttgl.arange(0, 64, layout=ttgl.SliceLayout(1, layout))
    col = ttgl.program_id(1) * 64 + ttgl.arange(0, 64, layout=ttgl.SliceLayout(0, layout))
    ttgl.store(c + r[:, None] * N + col[None, :], out.to(ttgl.float16))


def _pair(name, fn, signature, expect, bug, constexprs=None, repaired=None):
    """The correct and the buggy build of one kernel. `repaired`: why the buggy source still
    gives clean PTX (the compiler fixed the bug), so nothing is expected of it."""
    common = dict(fn=fn, signature={**signature, "BUG": "constexpr"},
                  options={"num_warps": 4})
    buggy = dict(name=f"gluon_bug_{name}", constexprs={**(constexprs or {}), "BUG": True},
                 expect=[] if repaired else expect, bug=bug, **common)
    if repaired:
        buggy["repaired"] = repaired
    return [dict(name=f"gluon_{name}", constexprs={**(constexprs or {}), "BUG": False},
                 **common), buggy]


_OUT = {"out": "*fp32"}
CORPUS = [
    *_pair("tma_load_wait", tma_load_wait, {"desc": DESC, **_OUT},
           ["smem-read-before-wait"], "TMA tile read with no mbarrier wait"),
    *_pair("tma_load_first_phase", tma_load_first_phase, {"desc": DESC, **_OUT},
           ["wait-parity-first-phase"],
           "first wait on a fresh barrier asks for parity 1: passes before the load lands"),
    *_pair("tma_load_init_order", tma_load_init_order, {"desc": DESC, **_OUT},
           ["mbar-uninit"], "expect_tx and the TMA load use the mbarrier before its init"),
    *_pair("tma_load_two_barriers", tma_load_two_barriers, {"desc": DESC, **_OUT},
           ["wait-wrong-barrier"],
           "tile 1 is read after waiting on tile 0's barrier, not its own"),
    *_pair("tma_load_loop", tma_load_loop, {"desc": DESC, **_OUT, "n_tiles": "i32"},
           ["mbar-reinit"], "live mbarrier re-initialised in every loop iteration"),
    *_pair("tma_store_fenced", tma_store_fenced, {"desc": DESC, "scale": "fp32"},
           ["smem-no-proxy-fence"], "st.shared tile TMA-stored with no fence.proxy.async",
           repaired="Triton 3.9's fence insertion adds fence.proxy.async.shared::cta before "
                    "the TMA store by itself: the PTX is clean"),
    *_pair("tma_store_reuse", tma_store_reuse, {"desc": DESC, "scale": "fp32"},
           ["bulk-src-overwrite"],
           "TMA store's source rewritten before cp.async.bulk.wait_group.read"),
    *_pair("arrive_count", arrive_count, dict(_OUT), ["mbar-arrive-count"],
           "barrier initialised for 2 arrivals, each phase gets 1: the wait hangs"),
    *_pair("expect_tx", expect_tx_device_desc, {"a": "*fp16", **_OUT, "M": "i32"},
           ["expect-tx-mismatch"],
           "expect_tx announces 4096 bytes, the device-made descriptor's 64x64 fp16 box is 8192"),
    *_pair("wgmma_from_registers", wgmma_from_registers, {"c": "*fp32"},
           ["wgmma-smem-no-proxy-fence"],
           "st.shared operands read by wgmma.mma_async with no fence.proxy.async",
           repaired="Triton 3.9's fence insertion adds fence.proxy.async.shared::cta before "
                    "the wgmma by itself: the PTX is clean"),
    *_pair("ws_gemm_release", ws_gemm,
           {"a_desc": DESC, "b_desc": DESC, "c": "*fp16", "N": "i32", "K": "i32"},
           ["wgmma-smem-released"],
           "wgmma partition arrives on the stage's empty barrier before warpgroup_mma_wait"),
]
