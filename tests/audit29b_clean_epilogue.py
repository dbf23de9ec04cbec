"""Audit corpus b (see tests/audit29b_clean_asm.py), epilogues: a persistent GEMM that stores
each bf16 tile through a double-buffered staging area with TMA stores, the staging laid out
for a 128B, 64B or 32B swizzled tensor map (XOR addressing: bits [4, 4 + b) of a box offset
take bits [7, 7 + b)), a grid-stride tile loop and wait_group.read 1 before a buffer is
written again."""

from __future__ import annotations

from ptxdsl import Addr, Kernel, Module, ptx, t
from ptxdsl.instructions.wgmma_desc import descriptor
from tests.audit29b_clean_asm import A64, B128, box

_SWIZZLE = {128: "128B", 64: "64B", 32: "32B"}


def swizzled_epilogue_gemm(width: int = 64, bug: str | None = None, asm_groups: bool = False
                           ) -> tuple[Module, dict]:
    """Persistent C (bf16) = A @ B^T over 64 x 128 tiles, one warpgroup, tiles
    ctaid.x, ctaid.x + nctaid.x, ... Each tile's row of 256 bytes goes out as 256 / width
    boxes of 64 rows x `width` bytes; a thread writes its packed pairs at
    box * 64 * width + (row * width + col) ^ (((row * width + col) >> 7) & (width/16 - 1))
    << 4, fences the generic writes for the async proxy, and after a bar.sync thread 0
    issues the boxes' TMA stores and commits them. The tile after next reuses the buffer:
    thread 0's cp.async.bulk.wait_group.read 1 and a bar.sync come first. `bug="read2"`
    waits with wait_group.read 2 (the store that read the buffer may still run), "spill"
    shifts the columns by 4 bytes (the last one lands in the other buffer). `asm_groups`:
    the bulk group's commit and waits are inline PTX (CUTLASS's tma_store_arrive and
    tma_store_wait<N>)."""
    boxes = 256 // width
    stage = A64.nbytes + B128.nbytes
    buf = 64 * 256                                          # one staging buffer (16 KiB)
    bars = stage + 2 * buf
    k = Kernel(f"audit_b_epilogue{width}", reqntid=128)
    tma, tmb, tmc = (k.tensormap_addr(k.param_tensormap(n))
                     for n in ("map_a", "map_b", "map_c"))
    ntiles = k.ld_param(k.param(t.u32, "ntiles"))
    tiles_n = k.ld_param(k.param(t.u32, "tiles_n"))
    kblocks = k.ld_param(k.param(t.u32, "kblocks"))
    smem = k.extern_shared("smem", align=1024)
    tid = k.tid.x
    with k.if_(tid == 0):
        ptx.mbarrier_init(k, Addr(smem, bars), 1)
        ptx.fence_mbarrier_init(k, "release", "cluster")
    k.bar_sync(0)
    base = k.mov(smem)
    bar = k.add(base, bars)
    lane, warp = k.and_(tid, 31), k.shr(tid, 5)
    row0 = k.mad(warp, 16, k.shr(lane, 2))                  # rows row0 and row0 + 8
    q4 = k.shl(k.and_(lane, 3), 2)
    it = k.mov(0, dst=k.reg(t.u32, "it"))
    n = k.mov(0, dst=k.reg(t.u32, "n"))
    tile = k.mov(k.ctaid.x, dst=k.reg(t.u32, "tile"))
    with k.while_(lambda: tile < ntiles):
        m0 = k.mul(k.div(tile, tiles_n), 64)
        n0 = k.mul(k.rem(tile, tiles_n), 128)
        acc = k.fragment(t.f32, shape=(64, 128)).zero()
        da, db = descriptor(k, A64, base), descriptor(k, B128, k.add(base, A64.nbytes))
        with k.for_range(0, kblocks) as kb:
            with k.if_(tid == 0):
                ptx.mbarrier_arrive_expect_tx(k, "release", "cta", "shared::cta", bar, stage,
                                              dst="_")
                kc = k.shl(kb, 6)
                ptx.cp_async_bulk_tensor(k, "shared::cluster", "global", base, tma, (kc, m0),
                                         bar)
                ptx.cp_async_bulk_tensor(k, "shared::cluster", "global",
                                         k.add(base, A64.nbytes), tmb, (kc, n0), bar)
            ptx.mbarrier_wait(k, bar, k.and_(it, 1))
            ptx.wgmma_fence(k)
            for kk in range(0, 64, 16):
                ptx.wgmma_mma_async(k, acc, da.k_step(k, kk), db.k_step(k, kk), atype="bf16")
            ptx.wgmma_commit_group(k)
            ptx.wgmma_wait_group(k, 0)
            k.bar_sync(1, 128)                              # all warps done with the stage
            k.add(it, 1, dst=it)
        packed = acc.to_packed(t.bf16)
        staging = k.mad(k.and_(n, 1), buf, k.add(base, stage))
        with k.if_(tid == 0):
            n_read = 2 if bug == "read2" else 1
            if asm_groups:
                k.asm("cp.async.bulk.wait_group.read $0;", ins=[n_read])
            else:
                ptx.cp_async_bulk_wait_group_read(k, n_read)
        k.bar_sync(1, 128)                                  # the buffer's last store read it
        for j in range(16):
            bx, col = divmod(16 * j, width)
            for half in range(2):
                row = k.add(row0, 8 * half)
                off = k.add(k.mad(row, width, q4), col + (4 if bug == "spill" else 0))
                sw = k.xor(off, k.shl(k.and_(k.shr(off, 7), width // 16 - 1), 4))
                k.st(k.add(k.add(staging, bx * 64 * width), sw), packed[2 * j + half],
                     type=t.b32, space="shared")
        ptx.fence_proxy_async(k, "shared::cta")
        k.bar_sync(1, 128)
        with k.if_(tid == 0):
            for bx in range(boxes):
                ptx.cp_async_bulk_tensor(k, "global", "shared::cta", tmc,
                                         (k.add(n0, bx * width // 2), m0),
                                         k.add(staging, bx * 64 * width))
            if asm_groups:
                k.asm("cp.async.bulk.commit_group;")
            else:
                ptx.cp_async_bulk_commit_group(k)
        k.add(n, 1, dst=n)
        k.add(tile, k.nctaid.x, dst=tile)
    with k.if_(tid == 0):
        if asm_groups:
            k.asm("cp.async.bulk.wait_group.read 0;")
        else:
            ptx.cp_async_bulk_wait_group_read(k, 0)
    k.ret()
    c_box = {"box_bytes": 64 * width, "swizzle": _SWIZZLE[width]}
    return Module([k], target="sm_90a"), {"map_a": box(A64), "map_b": box(B128),
                                          "map_c": c_box}


def swizzled_epilogue128() -> tuple[Module, dict]:
    return swizzled_epilogue_gemm(128)


def swizzled_epilogue64() -> tuple[Module, dict]:
    return swizzled_epilogue_gemm(64)


def swizzled_epilogue32() -> tuple[Module, dict]:
    return swizzled_epilogue_gemm(32)


def swizzled_epilogue64_asm_groups() -> tuple[Module, dict]:
    return swizzled_epilogue_gemm(64, asm_groups=True)
