"""Kernels for the value/range tests of issue 29 (tests/test_checker_29_values.py and the
clean corpus): a persistent kernel whose epilogue stages each output tile in one of two
8 KiB shared buffers, in the 128B swizzle, and TMA-stores it from there."""

from __future__ import annotations

from ptxdsl import Addr, Kernel, ptx, t

STAGE = 8192          # one staging buffer: 64 rows of 128 bytes
BOX = {"box_bytes": STAGE, "swizzle": "128B"}   # what maps={"out": ...} says of the map


def _chunk_addresses(k: Kernel, buf, swizzle: str) -> list:
    """The four 16-byte chunks thread t writes: row t / 2, chunks 4 * (t % 2) + j, each at
    chunk ^ (row % 8) (the 128B swizzle), the XOR on the chunk index or on the address."""
    tid = k.tid.x
    row = k.shr(tid, 1)
    sw = k.and_(row, 7)
    row_addr = k.add(buf, k.shl(row, 7))
    out = []
    for j in range(4):
        chunk = k.add(k.shl(k.and_(tid, 1), 2), j)
        if swizzle == "index":
            out.append(k.add(row_addr, k.shl(k.xor(chunk, sw), 4)))
        else:   # `addr ^ ((row & 7) << 4)`
            out.append(k.xor(k.add(row_addr, k.shl(chunk, 4)), k.shl(sw, 4)))
    return out


def _encoded_map(k: Kernel, smem):
    """The output map encoded in the kernel: warp 0 writes a 64 x 64 bf16 box with the 128B
    swizzle into a shared copy (after the two staging buffers) with constant
    tensormap.replace values, publishes it to a global workspace, and thread 0 acquires it
    before the CTA uses it."""
    smap = Addr(smem, 2 * STAGE)
    gmap = k.ld_param(k.param_ptr("workspace"))
    with k.if_(k.tid.x < 32):
        with k.if_(k.tid.x == 0):
            ptx.tensormap_replace_rank(k, ptx.space_shared, smap, rank=2)
            ptx.tensormap_replace_elemtype(k, ptx.space_shared, smap, "bf16")
            ptx.tensormap_replace_box_dim(k, ptx.space_shared, smap, 0, 64)
            ptx.tensormap_replace_box_dim(k, ptx.space_shared, smap, 1, 64)
            ptx.tensormap_replace_swizzle_mode(k, ptx.space_shared, smap, 3)
        k.syncwarp()
        ptx.tensormap_cp_fenceproxy(k, ptx.sem_release, ptx.scope_gpu, gmap, smap, 128)
    with k.if_(k.tid.x == 0):
        ptx.fence_proxy_tensormap_generic(k, "acquire", "gpu", gmap)
    k.bar_sync(0)
    return gmap


def persistent_epilogue(select: str = "toggle", swizzle: str = "index", keep: int = 1,
                        stmatrix: bool = False, encoded: bool = False,
                        name: str = "epilogue") -> Kernel:
    """`select`: how the staging buffer of a tile is picked: "toggle" (an index flipped in
    place, `s ^= 1`, after each tile), "mask" (`it & 1`), "mask_xor" (`(it & 1) ^ 1`), or
    "same" (always buffer 0: the bug a second buffer fixes). `keep`: the wait_group.read
    before the buffer is rewritten (1: the store of the other buffer may still run; 0 with
    "same" is the correct single-buffered form). `encoded`: the output map is encoded in
    the kernel (`_encoded_map`) rather than passed as a parameter `out`."""
    k = Kernel(name, reqntid=128)
    smem = k.extern_shared("smem", align=1024)
    tmap = _encoded_map(k, smem) if encoded else k.tensormap_addr(k.param_tensormap("out"))
    ntiles = k.ld_param(k.param(t.u32, "ntiles"))
    base = k.mov(smem)
    s = k.mov(0, type=t.b32)
    it = k.mov(0, type=t.u32)
    with k.for_range(k.ctaid.x, ntiles, k.nctaid.x) as tile:
        if select == "toggle":
            stage = s
        elif select == "mask":
            stage = k.and_(it, 1)
        elif select == "mask_xor":
            stage = k.xor(k.and_(it, 1), 1)
        else:
            stage = 0
        buf = k.add(base, k.shl(stage, 13)) if select != "same" else base
        # The store that last read this buffer (two tiles ago) must be done reading it.
        with k.if_(k.tid.x == 0):
            ptx.cp_async_bulk_wait_group_read(k, keep)
        k.bar_sync(0)
        chunks = _chunk_addresses(k, buf, swizzle)
        value = k.mov(tile, type=t.b32)
        for j, addr in enumerate(chunks):
            if stmatrix and j < 2:
                k.stmatrix(addr, [value] * 4)                              # stmatrix: x4
            else:
                k.st(addr, [value] * 4, type=t.b32, space="shared::cta")   # the staging write
        ptx.fence_proxy_async(k, "shared::cta")
        k.bar_sync(0)
        with k.if_(k.tid.x == 0):
            ptx.cp_async_bulk_tensor(k, "global", "shared::cta", tmap, (0, k.shl(tile, 6)), buf)
            ptx.cp_async_bulk_commit_group(k)
        if select == "toggle":
            k.xor(s, 1, dst=s)
        k.add(it, 1, dst=it)
    with k.if_(k.tid.x == 0):
        ptx.cp_async_bulk_wait_group(k, 0)
    return k
