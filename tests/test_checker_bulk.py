"""Checker: shared-memory and bulk-group hazards around TMA stores, store coordinates and
buffer alignment; one kernel with the hazard and its corrected twin each."""

from __future__ import annotations

from ptxdsl import Addr, Kernel, ptx, t
from ptxdsl.checker import Hazard, Severity, check_kernel
from tests.checker_kernels import Tma, here, ids, only


def _store(e: Tma, coords=(0, 0)) -> int:
    """Thread 0 stores the tile, commits and waits for the read; returns the store's line."""
    k = e.k
    with k.if_(k.tid.x == 0):
        line = here() + 1
        ptx.cp_async_bulk_tensor(k, "global", "shared::cta", e.tmap, coords, e.tile)
        ptx.cp_async_bulk_commit_group(k)
        ptx.cp_async_bulk_wait_group_read(k, 0)
    return line


# -- st.shared, then a TMA store -------------------------------------------------------------------
def test_tma_store_of_shared_writes_without_proxy_fence():
    e = Tma()
    e.fill()
    e.k.bar_sync(0)
    line = _store(e)
    f = only(check_kernel(e.k), Hazard.SMEM_NO_PROXY_FENCE, line)
    assert "no fence.proxy.async" in f.message and f.sites[1].ptx.startswith("st.shared")


def test_tma_store_of_shared_writes_fenced_without_barrier():
    e = Tma()
    e.fill()
    ptx.fence_proxy_async(e.k, "shared::cta")
    line = _store(e)
    f = only(check_kernel(e.k), Hazard.SMEM_NO_PROXY_FENCE, line)
    assert "other threads" in f.message


def test_tma_store_of_shared_writes_fenced_then_barrier():
    e = Tma()
    e.fill()
    ptx.fence_proxy_async(e.k, "shared::cta")
    e.k.bar_sync(0)
    _store(e)
    assert check_kernel(e.k) == []


def test_reduce_of_shared_writes_without_proxy_fence():
    e = Tma()
    k = e.k
    e.fill()
    k.bar_sync(0)
    with k.if_(k.tid.x == 0):
        line = here() + 1
        ptx.cp_reduce_async_bulk_tensor(k, "add", e.tmap, (0, 0), e.tile)
        ptx.cp_async_bulk_commit_group(k)
        ptx.cp_async_bulk_wait_group_read(k, 0)
    only(check_kernel(k), Hazard.SMEM_NO_PROXY_FENCE, line)


def test_single_thread_needs_only_the_fence():
    k = Kernel("k", reqntid=1)
    tile = k.shared_array(t.b8, 512, align=128, name="tile")
    tmap = k.tensormap_addr(k.param_tensormap("tmap"))
    k.st(tile, 7, type=t.u32, space="shared::cta")
    ptx.fence_proxy_async(k, "shared::cta")
    ptx.cp_async_bulk_tensor(k, "global", "shared::cta", tmap, (0, 0), tile)
    ptx.cp_async_bulk_commit_group(k)
    ptx.cp_async_bulk_wait_group_read(k, 0)
    assert check_kernel(k) == []


# -- reusing the source before wait_group.read -----------------------------------------------------
def _overwrite(wait: bool) -> tuple[Kernel, int]:
    e = Tma()
    k = e.k
    e.fill()
    ptx.fence_proxy_async(k, "shared::cta")
    k.bar_sync(0)
    with k.if_(k.tid.x == 0):
        ptx.cp_async_bulk_tensor(k, "global", "shared::cta", e.tmap, (0, 0), e.tile)
        ptx.cp_async_bulk_commit_group(k)
        if wait:
            ptx.cp_async_bulk_wait_group_read(k, 0)
        line = here() + 1
        k.st(e.tile, 0, type=t.u32, space="shared::cta")      # next tile's data
        ptx.cp_async_bulk_wait_group(k, 0)
    return k, line


def test_source_overwritten_before_wait_group_read():
    k, line = _overwrite(wait=False)
    f = only(check_kernel(k), Hazard.BULK_SRC_OVERWRITE, line)
    assert f.sites[1].role == "store"


def test_source_overwritten_after_wait_group_read():
    k, _ = _overwrite(wait=True)
    assert check_kernel(k) == []


def _refill(barrier: bool) -> tuple[Kernel, int]:
    e = Tma()
    k = e.k
    e.fill()
    ptx.fence_proxy_async(k, "shared::cta")
    k.bar_sync(0)
    _store(e)                               # thread 0 stores, commits, waits for the read
    if barrier:
        k.bar_sync(0)
    line = here() + 1
    k.st(Addr(e.tile, 0), k.tid.x, type=t.u32, space="shared::cta")   # the next tile's data
    return k, line


def test_other_threads_refill_before_the_reader_waited():
    k, line = _refill(barrier=False)
    f = only(check_kernel(k), Hazard.BULK_SRC_OVERWRITE, line)
    assert [s.role for s in f.sites] == ["write", "store", "wait"]


def test_other_threads_refill_after_a_barrier():
    k, _ = _refill(barrier=True)
    assert check_kernel(k) == []


def test_double_buffer_waits_for_the_older_group_only():
    # Two 256-byte halves: writing half A while half B's store is in flight is fine once
    # wait_group.read 1 has retired A's (older) group.
    k = Kernel("k", reqntid=1)
    tile = k.shared_array(t.b8, 512, align=256, name="tile")
    tmap = k.tensormap_addr(k.param_tensormap("tmap"))
    for half in (0, 256):
        ptx.fence_proxy_async(k, "shared::cta")
        ptx.cp_async_bulk_tensor(k, "global", "shared::cta", tmap, (0, half), Addr(tile, half))
        ptx.cp_async_bulk_commit_group(k)
    ptx.cp_async_bulk_wait_group_read(k, 1)
    k.st(tile, 0, type=t.u32, space="shared::cta")            # half A: its group is done
    line = here() + 1
    k.st(Addr(tile, 256), 0, type=t.u32, space="shared::cta")  # half B: maybe still read
    ptx.cp_async_bulk_wait_group(k, 0)
    assert check_kernel(k, maps={"tmap": {"box_bytes": 256}})[0].loc.line == line
    assert ids(check_kernel(k, maps={"tmap": {"box_bytes": 256}})) == ["bulk-src-overwrite"]


# -- groups still pending at exit ------------------------------------------------------------------
def _exit_after_store(wait: bool) -> tuple[Kernel, int]:
    e = Tma()
    k = e.k
    with k.if_(k.tid.x == 0):
        line = here() + 1
        ptx.cp_async_bulk_tensor(k, "global", "shared::cta", e.tmap, (0, 0), e.tile)
        ptx.cp_async_bulk_commit_group(k)
        if wait:
            ptx.cp_async_bulk_wait_group(k, 0)
    k.ret()
    return k, line


def test_bulk_group_never_waited_before_exit():
    k, line = _exit_after_store(wait=False)
    found = check_kernel(k)
    assert ids(found) == ["bulk-group-not-waited"]
    f = found[0]
    assert f.severity is Severity.warning and f.sites[0].role == "exit"
    assert f.sites[1].loc.line == line and "committed but not waited" in f.message


def test_bulk_group_waited_before_exit():
    k, _ = _exit_after_store(wait=True)
    assert check_kernel(k) == []


# -- store coordinates -----------------------------------------------------------------------------
def _store_at(x: int) -> tuple[Kernel, int]:
    e = Tma()
    col = e.k.mov(x, type=t.s32)      # an immediate -8 is refused at build time; a register
    line = _store(e, (col, 0))        # holding -8 is only known to the checker
    return e.k, line


def test_tma_store_with_negative_constant_coordinate():
    k, line = _store_at(-8)
    f = only(check_kernel(k), Hazard.TMA_STORE_NEGATIVE_COORD, line)
    assert "coordinate 0" in f.message and f.sites[1].ptx.startswith("mov.s32")


def test_tma_store_with_non_negative_coordinate():
    k, _ = _store_at(8)
    assert check_kernel(k) == []


# -- TMA buffer alignment --------------------------------------------------------------------------
def _declared(e: Tma):
    """Where Tma() declared its tile (the alignment finding's leading line)."""
    return e.k.decl_locs["tile"]


def _align_only(findings, copy_line: int, decl):
    """An alignment finding leads with the buffer's declaration, then names the copy."""
    assert ids(findings) == [Hazard.TMA_SMEM_ALIGN.value], [f.format() for f in findings]
    f = findings[0]
    assert f.loc == decl and [s.role for s in f.sites] == ["buffer", "copy"]
    assert f.sites[1].loc.file == __file__ and f.sites[1].loc.line == copy_line
    return f


def test_tma_buffer_aligned_below_128():
    e = Tma(tile_align=64)
    e.setup()
    with e.k.if_(e.k.tid.x == 0):
        line = here() + 1
        ptx.cp_async_bulk_tensor(e.k, "shared::cluster", "global", e.tile, e.tmap, (0, 0), e.bar)
    f = _align_only(check_kernel(e.k), line, _declared(e))
    assert f.severity is Severity.warning and "aligned to 64 bytes" in f.message
    assert f.sites[0].ptx == ".shared .align 64 .b8 tile[512]"
    assert f.loc.file.endswith("checker_kernels.py")


def test_tma_buffer_below_swizzle_repeat():
    e = Tma(tile_align=128)
    e.setup()
    with e.k.if_(e.k.tid.x == 0):
        line = here() + 1
        ptx.cp_async_bulk_tensor(e.k, "shared::cluster", "global", e.tile, e.tmap, (0, 0), e.bar)
    assert check_kernel(e.k) == []                         # swizzle unknown: 128 is enough
    f = _align_only(check_kernel(e.k, maps={"tmap": {"swizzle": "128B"}}), line, _declared(e))
    assert "1024-byte repeat" in f.message


def test_tma_buffer_at_swizzle_repeat():
    e = Tma(tile_align=1024)
    e.setup()
    with e.k.if_(e.k.tid.x == 0):
        ptx.cp_async_bulk_tensor(e.k, "shared::cluster", "global", e.tile, e.tmap, (0, 0), e.bar)
    assert check_kernel(e.k, maps={"tmap": {"swizzle": "128B"}}) == []


def _dynamic_tile_kernel(static_bar: bool) -> tuple[Kernel, int]:
    """A 1024-aligned dynamic-shared tile; the mbarrier is static (.shared) or placed in the
    dynamic region after the tile."""
    k = Kernel("dyn", reqntid=128)
    tmap = k.tensormap_addr(k.param_tensormap("tmap"))
    ring = k.extern_shared("ring", align=1024)
    assert k.decl_locs["ring"].line == here() - 1
    bar = k.shared_array(t.b64, 1, align=8, name="bar") if static_bar else Addr(ring, 4096)
    with k.if_(k.tid.x == 0):
        ptx.mbarrier_init(k, bar, 1)
    k.bar_sync(0)
    with k.if_(k.tid.x == 0):
        line = here() + 1
        ptx.cp_async_bulk_tensor(k, "shared::cluster", "global", ring, tmap, (0, 0), bar)
        ptx.mbarrier_arrive_expect_tx(k, "release", "cta", "shared::cta", bar, 512, dst="_")
    ptx.mbarrier_wait(k, bar, 0)
    return k, line


def test_dynamic_tile_after_static_shared_is_not_aligned():
    k, line = _dynamic_tile_kernel(static_bar=True)
    f = _align_only(check_kernel(k), line, k.decl_locs["ring"])
    assert f.sites[0].ptx == ".extern .shared .align 1024 .b8 ring[]"
    assert "aligned to 16 bytes" in f.message and "static .shared" in f.message


def test_dynamic_tile_with_barrier_inside_the_dynamic_region():
    k, _ = _dynamic_tile_kernel(static_bar=False)
    assert check_kernel(k) == []
