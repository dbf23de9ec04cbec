"""Kernels of the issue-29 recall audit: %ntid under .reqntid, ragged-tail arrives, and tensor
maps in a per-CTA workspace (audit classes C7-C10); see tests/audit29_kernels.py for the
builders' contract."""

from __future__ import annotations

from ptxdsl import Addr, Kernel, Module, ptx, t
from tests.audit29_kernels import TILE, nxt


# -- C7: %ntid.x arrivals under .reqntid --------------------------------------------------------
def ntid_count_warp_arrive(bug: bool):
    """A 192-thread CTA: a barrier initialised with %ntid.x (192 under .reqntid) that only lane
    0 of each warp arrives on (the mistake: 6 arrivals of 192); twin: %ntid.x / 32."""
    k = Kernel("ntid1", reqntid=192)
    bar = k.shared_array(t.b64, 1, align=8, name="done")
    with k.if_(k.tid.x == 0):
        cnt = k.mov(k.ntid.x) if bug else k.shr(k.ntid.x, 5)
        ptx.mbarrier_init(k, bar, cnt)
    k.bar_sync(0)
    with k.if_(k.laneid == 0):
        line = nxt()
        ptx.mbarrier_arrive(k, bar, dst="_")
    ptx.mbarrier_wait(k, bar, 0)
    k.ret()
    return k, line if bug else None, {}


def ntid_warps_every_thread(bug: bool):
    """A 2-D CTA (64 x 2): the barrier is initialised with the warp count %ntid.x * %ntid.y / 32
    (4) but every thread arrives, in a loop over phases (the mistake: 128 a phase, phases end
    early); twin: %ntid.x * %ntid.y arrivals."""
    k = Kernel("ntid2", reqntid=(64, 2, 1))
    bar = k.shared_array(t.b64, 1, align=8, name="step")
    n = k.ld_param(k.param(t.u32, "n"))
    with k.if_(k.tid.x == 0), k.if_(k.tid.y == 0):
        all_ = k.mul(k.ntid.x, k.ntid.y, type=t.u32)
        ptx.mbarrier_init(k, bar, k.shr(all_, 5) if bug else all_)
    k.bar_sync(0)
    with k.for_range(0, n) as i:
        line = nxt()
        ptx.mbarrier_arrive(k, bar, dst="_")
        ptx.mbarrier_wait(k, bar, k.and_(i, 1))
    k.ret()
    return k, line if bug else None, {}


# -- C8: a per-lane ragged-tail arrive mixing %tid and a loop counter ---------------------------
def ragged_tail_ws(bug: bool):
    """Warp-specialized, 256 threads: warpgroup 1 consumes chunks of 128 elements and each
    thread releases the chunk's barrier (count 128) when its element exists. The mistake:
    `(tid - 128) + kb * 128 < n` per lane, so the last chunk's phase gets fewer arrivals;
    twin: the whole warpgroup arrives while `kb * 128 < n`."""
    k = Kernel("tail1", reqntid=256)
    n = k.ld_param(k.param(t.u32, "n"))
    nk = k.ld_param(k.param(t.u32, "nk"))
    bar = k.shared_array(t.b64, 1, align=8, name="freed")
    with k.if_(k.tid.x == 0):
        ptx.mbarrier_init(k, bar, 128)
    k.bar_sync(0)
    with k.if_(k.tid.x >= 128):
        with k.for_range(0, nk) as kb:
            base = k.mul(kb, 128, type=t.u32)
            cond = k.add(k.sub(k.tid.x, 128), base) < n if bug else base < n
            with k.if_(cond):
                line = nxt()
                ptx.mbarrier_arrive(k, bar, dst="_")
    with k.else_():
        with k.for_range(0, nk) as kb:
            ptx.mbarrier_wait(k, bar, k.and_(kb, 1))
    k.ret()
    return k, line if bug else None, {}


def _tail_arrive(k: Kernel, bar, ok) -> int:
    """A helper: arrive when `ok` holds; returns the arrive's line."""
    with k.if_(ok):
        line = nxt()
        ptx.mbarrier_arrive(k, bar, dst="_")
    return line


def ragged_tail_lane(bug: bool):
    """All 128 threads, a loop over 32-element rows of a ragged block: lane l arrives when
    `l < n - r * 32` (the mistake: per lane, the count is 128); twin: `r * 32 < n` for all."""
    k = Kernel("tail2", reqntid=128)
    n = k.ld_param(k.param(t.u32, "n"))
    bar = k.shared_array(t.b64, 1, align=8, name="rowbar")
    with k.if_(k.tid.x == 0):
        ptx.mbarrier_init(k, bar, 128)
    k.bar_sync(0)
    rows = k.shr(k.add(n, 31), 5)
    with k.for_range(0, rows) as r:
        rem = k.sub(n, k.shl(r, 5))
        line = _tail_arrive(k, bar, k.laneid < rem if bug else k.mov(0, type=t.u32) < rem)
        ptx.mbarrier_wait(k, bar, k.and_(r, 1))
    k.ret()
    return k, line if bug else None, {}


# -- C9: two tensor maps in one per-CTA workspace slot -----------------------------------------
def workspace_wide_offsets(bug: bool):
    """Each CTA's 512-byte slot (`ws + ctaid.x * 512`, a wide multiply) holds map A at +0 and
    map B at +256; the kernel acquires B only (the mistake) and loads through A."""
    k = Kernel("ws1", reqntid=32)
    ws = k.ld_param(k.param_ptr("ws"))
    slot = k.add(ws, k.mul(k.ctaid.x, 512, mode="wide"))
    map_b = k.add(slot, 256)
    tile = k.shared_array(t.b8, TILE, align=1024, name="wtile")
    bar = k.shared_array(t.b64, 1, align=8, name="wbar")
    with k.if_(k.laneid == 0):
        ptx.mbarrier_init(k, bar, 1)
    k.syncwarp()
    ptx.fence_proxy_tensormap_generic(k, "acquire", "gpu", map_b)
    if not bug:
        ptx.fence_proxy_tensormap_generic(k, "acquire", "gpu", slot)
    with k.if_(k.laneid == 0):
        ptx.mbarrier_arrive_expect_tx(k, "release", "cta", "shared::cta", bar, TILE, dst="_")
        line = nxt()
        ptx.cp_async_bulk_tensor(k, "shared::cluster", "global", tile, slot, (0, 0), bar)
    ptx.mbarrier_wait(k, bar, 0)
    ptx.cp_async_bulk_prefetch_tensor(k, map_b, (0, 0))
    k.ret()
    return k, line if bug else None, {"maps": {"ws": {"box_bytes": TILE}}}


def _map_of(k: Kernel, ws, i: int):
    """A helper: map i of this CTA's three-map slot (384 bytes, indexed by the linear CTA id)."""
    cta = k.mad(k.ctaid.y, k.nctaid.x, k.ctaid.x)
    return k.add(k.add(ws, k.cvt(k.mul(cta, 384, type=t.u32), t.u64)), 128 * i)


def workspace_three_maps(bug: bool):
    """Three maps a slot, addresses from a helper; maps 0 and 1 acquired in a loop-free
    prologue, map 2 used by a prefetch with no acquire of its own (the mistake)."""
    k = Kernel("ws3", reqntid=32)
    ws = k.ld_param(k.param_ptr("ws"))
    for i in range(3 if not bug else 2):
        ptx.fence_proxy_tensormap_generic(k, "acquire", "gpu", _map_of(k, ws, i))
    ptx.cp_async_bulk_prefetch_tensor(k, _map_of(k, ws, 0), (0, 0))
    ptx.cp_async_bulk_prefetch_tensor(k, _map_of(k, ws, 1), (0, 0))
    line = nxt()
    ptx.cp_async_bulk_prefetch_tensor(k, _map_of(k, ws, 2), (0, 0))
    k.ret()
    return k, line if bug else None, {}


# -- C10: a .cta/.cluster release into a per-CTA slot that another kernel acquires ---------------
def percta_release_cluster_scope(bug: bool):
    """A writer kernel edits the box of its CTA's map in the workspace (slot by ctaid.y) with
    tensormap.replace and releases it at .cluster (the mistake) before a consumer kernel of
    the module acquires it at .gpu; twin: the release at .gpu."""
    w = Kernel("tune", reqntid=32)
    ws = w.ld_param(w.param_ptr("ws"))
    slot = w.cvta(w.add(ws, w.mul(w.ctaid.y, 128, mode="wide")), "global", to=True)
    with w.if_(w.laneid == 0):
        ptx.tensormap_replace_box_dim(w, "global", slot, 1, 32)
        ptx.tensormap_replace_box_dim(w, "global", slot, 0, 64)
        line = nxt()
        ptx.fence_proxy_tensormap_generic(w, "release", "cluster" if bug else "gpu")
    w.ret()
    r = Kernel("use", reqntid=32)
    ws = r.ld_param(r.param_ptr("ws"))
    slot = r.add(ws, r.mul(r.ctaid.y, 128, mode="wide"))
    ptx.fence_proxy_tensormap_generic(r, "acquire", "gpu", slot)
    ptx.cp_async_bulk_prefetch_tensor(r, slot, (0, 0))
    r.ret()
    return Module([w, r]), line if bug else None, {}


def percta_cp_fenceproxy_cta(bug: bool):
    """One kernel builds its CTA's map in shared memory and publishes it into the workspace
    with cp_fenceproxy at .cta (the mistake: a later launch acquires it); the kernel itself
    never uses the map. Twin: .gpu."""
    k = Kernel("publish", reqntid=32)
    ws = k.ld_param(k.param_ptr("ws"))
    tmpl = k.ld_param(k.param_ptr("tmpl"))
    smap = k.shared_array(t.b8, 128, align=128, name="smap")
    # the template map from global memory, one 4-byte word a lane
    word = k.ld(Addr(k.add(k.cvta(tmpl, "global", to=True), k.mul(k.laneid, 4, mode="wide"))),
                type=t.b32, space="global")
    k.st(Addr(k.add(k.mov(smap), k.shl(k.laneid, 2))), word, type=t.b32, space="shared::cta")
    k.syncwarp()
    with k.if_(k.laneid == 0):
        ptx.tensormap_replace_global_dim(k, "shared", smap, 0, k.ld_param(k.param(t.u32, "n")))
    k.syncwarp()
    slot = k.add(ws, k.cvt(k.shl(k.ctaid.x, 7), t.u64))
    line = nxt()
    ptx.tensormap_cp_fenceproxy(k, "release", "cta" if bug else "gpu", slot, smap, 128)
    k.ret()
    return k, line if bug else None, {}


def workspace_mad_wide(bug: bool):
    """The per-CTA slot as one `mad.wide.u32 slot, ctaid.x, 256, ws`; maps at +0 and +128,
    only +0 acquired (the mistake), +128 prefetched. (A mad's result was not followed to the
    parameter at all, so the map went unchecked.)"""
    k = Kernel("wsmad", reqntid=32)
    ws = k.ld_param(k.param_ptr("ws"))
    slot = k.mad(k.ctaid.x, 256, ws, mode="wide")
    ptx.fence_proxy_tensormap_generic(k, "acquire", "gpu", slot)
    if not bug:
        ptx.fence_proxy_tensormap_generic(k, "acquire", "gpu", k.add(slot, 128))
    ptx.cp_async_bulk_prefetch_tensor(k, slot, (0, 0))
    line = nxt()
    ptx.cp_async_bulk_prefetch_tensor(k, k.add(slot, 128), (0, 0))
    k.ret()
    return k, line if bug else None, {}


def percta_store_copy_release(bug: bool):
    """Each CTA copies a template map into its workspace slot with plain st.global, edits the
    box in place, and releases at .cta (the mistake: a later kernel acquires the slot)."""
    k = Kernel("stcopy", reqntid=32)
    ws, tm = k.ld_param(k.param_ptr("ws")), k.ld_param(k.param_ptr("tmpl"))
    slot = k.add(k.cvta(ws, "global", to=True), k.mul(k.ctaid.x, 128, mode="wide"))
    lane4 = k.mul(k.laneid, 4, mode="wide")
    w = k.ld(Addr(k.add(k.cvta(tm, "global", to=True), lane4)), type=t.b32, space="global")
    k.st(Addr(k.add(slot, lane4)), w, type=t.b32, space="global")
    k.syncwarp()
    with k.if_(k.laneid == 0):
        ptx.tensormap_replace_box_dim(k, "global", slot, 0, 64)
    k.syncwarp()
    line = nxt()
    ptx.fence_proxy_tensormap_generic(k, "release", "cta" if bug else "gpu")
    k.ret()
    return k, line if bug else None, {}


def replace_lane0_release_warp(bug: bool):
    """Clean only (`bug` is ignored): lane 0 edits the CTA's map in its workspace slot with
    tensormap.replace, the warp syncs, and every lane releases, acquires and prefetches. The
    whole warp's release covers lane 0's write (it was taken for no release at all:
    tmap-replace-no-release at the acquire)."""
    k = Kernel("rel_warp", reqntid=32)
    ws = k.ld_param(k.param_ptr("ws"))
    slot = k.add(ws, k.mul(k.ctaid.x, 128, mode="wide"))
    with k.if_(k.laneid == 0):
        ptx.tensormap_replace_box_dim(k, "global", k.cvta(slot, "global", to=True), 0, 64)
    k.syncwarp()
    ptx.fence_proxy_tensormap_generic(k, "release", "gpu")
    ptx.fence_proxy_tensormap_generic(k, "acquire", "gpu", slot)
    ptx.cp_async_bulk_prefetch_tensor(k, slot, (0, 0))
    k.ret()
    return k, None, {}


def ntid_minus_producer_warp(bug: bool):
    """160 threads, warp 0 waits for the 4 consumer warps: the count written %ntid.x - 32
    (128 under .reqntid, every consumer thread) while lane 0 of each consumer warp arrives
    (the mistake); twin: (%ntid.x - 32) / 32."""
    k = Kernel("ntid3", reqntid=160)
    bar = k.shared_array(t.b64, 1, align=8, name="cw")
    with k.if_(k.tid.x == 0):
        rest = k.sub(k.ntid.x, 32)
        ptx.mbarrier_init(k, bar, rest if bug else k.shr(rest, 5))
    k.bar_sync(0)
    with k.if_(k.tid.x >= 32), k.if_(k.laneid == 0):
        line = nxt()
        ptx.mbarrier_arrive(k, bar, dst="_")
    with k.if_(k.tid.x < 32):
        ptx.mbarrier_wait(k, bar, 0)
    k.ret()
    return k, line if bug else None, {}


def ragged_tail_min(bug: bool):
    """A tail written with min: `cnt = min(n - kb * 128, 128)`, and thread t arrives when
    `t < cnt` on a barrier expecting 128 (the mistake: per lane); twin: every thread
    arrives while the chunk exists."""
    k = Kernel("tail3", reqntid=128)
    n = k.ld_param(k.param(t.u32, "n"))
    bar = k.shared_array(t.b64, 1, align=8, name="mb3")
    with k.if_(k.tid.x == 0):
        ptx.mbarrier_init(k, bar, 128)
    k.bar_sync(0)
    nk = k.shr(k.add(n, 127), 7)
    with k.for_range(0, nk) as kb:
        cnt = k.min(k.sub(n, k.shl(kb, 7)), 128)
        with k.if_(k.tid.x < cnt if bug else kb < nk):
            line = nxt()
            ptx.mbarrier_arrive(k, bar, dst="_")
        ptx.mbarrier_wait(k, bar, k.and_(kb, 1))
    k.ret()
    return k, line if bug else None, {}


def workspace_offset_in_cvt(bug: bool):
    """The second map's offset added before the widening: `ws + cvt(ctaid * 256)` and `ws +
    cvt(ctaid * 256 + 128)`; only the first is acquired (the mistake), both are used. (The
    two addresses were taken for maps on unrelated bases, which may be one map.)"""
    k = Kernel("wscvt", reqntid=32)
    ws = k.ld_param(k.param_ptr("ws"))
    off = k.mul(k.ctaid.x, 256, type=t.u32)
    map_a = k.add(ws, k.cvt(off, t.u64))
    map_b = k.add(ws, k.cvt(k.add(off, 128), t.u64))
    ptx.fence_proxy_tensormap_generic(k, "acquire", "gpu", map_a)
    if not bug:
        ptx.fence_proxy_tensormap_generic(k, "acquire", "gpu", map_b)
    ptx.cp_async_bulk_prefetch_tensor(k, map_a, (0, 0))
    line = nxt()
    ptx.cp_async_bulk_prefetch_tensor(k, map_b, (0, 0))
    k.ret()
    return k, line if bug else None, {}
