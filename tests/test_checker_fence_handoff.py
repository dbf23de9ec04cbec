"""Checker: `smem-no-proxy-fence` across an mbarrier hand-off and a named-barrier pair. The
threads that write a staging tile with st.shared fence it for the async proxy
(`fence.proxy.async.shared::cta`) and then tell the thread that TMA-stores it, without a CTA
barrier: by an arrive on an mbarrier that thread waits on (the arrive releases, the wait
acquires), or by `bar.arrive id, n` against the storer's `bar.sync id, n` (CUTLASS's and
FA3's epilogues, the writers and the storer in warp-specialized branches). Each clean
kernel checks clean while its mistake does not; each mistake (no fence, the arrive before
the fence, another barrier waited on, a phase the arrive does not complete, an arrive by
threads other than the writers, a named barrier of another id, the pair the wrong way round)
is reported at the store, and the kernels' PTX read back by the front end gives the same
findings."""

from __future__ import annotations

import pytest

from ptxdsl import Kernel, ptx, t
from ptxdsl.checker import Hazard, check_kernel
from ptxdsl.checker.context import Context
from tests.checker_kernels import clean, here, only
from tests.parsed_check import differences

TILE = 512
MAPS = {"tmap": {"box_bytes": TILE}}


def _fill(k: Kernel, tile, lane) -> None:
    """Each thread writes the 4 bytes of the tile at `lane * 4`."""
    k.st(k.add(k.mov(tile), k.shl(lane, 2)), lane, type=t.u32, space="shared::cta")


def _store(k: Kernel, tmap, tile, bulk: bool = False) -> int:
    """Store the tile (a TMA store, or a bulk store with `bulk`), wait for its read and
    return the store's line."""
    line = here() + 2
    if not bulk:
        ptx.cp_async_bulk_tensor(k, "global", "shared::cta", tmap, (0, 0), tile)
    else:
        ptx.cp_async_bulk(k, "global", "shared::cta", k.ld_param(k.param_ptr("out")), tile,
                          TILE)
    ptx.cp_async_bulk_commit_group(k)
    ptx.cp_async_bulk_wait_group(k, 0)
    return line


def mbarrier(how: str) -> tuple[Kernel, int]:
    """128 threads write the tile (each its 4 bytes), fence it and arrive on `full` (count
    128); thread 0 waits on `full` for parity 0 and TMA-stores the tile:

    - "mbar": as said (clean); "mbar_bulk": a bulk store instead (clean);
    - "mbar_warps": only warps 2-3 write, fence and arrive (count 64) in their branch
      (clean: the warp-specialized producer);
    - "mbar_nofence": no fence;
    - "mbar_early": the arrive before the fence;
    - "mbar_other": the writers arrive on `other`, a barrier thread 0 does not wait on;
    - "mbar_parity1": thread 0 waits for parity 1, which a fresh barrier counts as
      completed (the phase before the first): the wait passes at once;
    - "mbar_stranger": thread 33 alone arrives (count 1), after its own fence: the other
      writers are not ordered before the arrive;
    - "mbar_relaxed": `mbarrier.arrive.relaxed`, which releases nothing.

    Returns the kernel and the line of the store a finding names."""
    k = Kernel("fence_mbar", reqntid=128)
    tile = k.shared_array(t.b8, TILE, align=128, name="tile")
    full = k.shared_array(t.b64, 1, align=8, name="full")
    other = k.shared_array(t.b64, 1, align=8, name="other")
    tmap = k.tensormap_addr(k.param_tensormap("tmap"))
    kind = how.removeprefix("mbar_")
    count = {"warps": 64, "stranger": 1}.get(kind, 128)
    with k.if_(k.tid.x == 0):
        for bar in (full, other):
            ptx.mbarrier_init(k, bar, count)
    k.bar_sync(0)

    def arrive(bar) -> None:
        if kind == "relaxed":
            ptx.mbarrier_arrive(k, "relaxed", "cta", "shared::cta", bar, dst="_")
        else:
            ptx.mbarrier_arrive(k, bar, space="shared::cta", dst="_")

    def produce() -> None:
        _fill(k, tile, k.tid.x)
        if kind == "early":
            arrive(full)
        if kind != "nofence":
            ptx.fence_proxy_async(k, "shared::cta")
        if kind == "stranger":
            with k.guard(k.setp("eq", k.tid.x, 33, type=t.u32)):
                arrive(full)
        elif kind != "early":
            arrive(other if kind == "other" else full)

    if kind == "warps":
        with k.if_(k.shr(k.tid.x, 6) == 1):
            produce()
    else:
        produce()
    with k.if_(k.tid.x == 0):
        ptx.mbarrier_wait(k, full, 1 if kind == "parity1" else 0)
        line = _store(k, tmap, tile, bulk=kind == "bulk")
    k.ret()
    return k, line


def named(how: str) -> tuple[Kernel, int]:
    """Warpgroup 1 writes the tile, fences it and `bar.arrive 1, 256`; in the other branch
    warpgroup 0 `bar.sync 1, 256` and its thread 0 fences (its own writes: none) and
    TMA-stores the tile:

    - "pair": as said (clean);
    - "pair_nofence": no fence;
    - "pair_early": the fence after the arrive;
    - "pair_other_id": warpgroup 0 syncs on barrier 2 (no partner: the named-barrier model
      reports both barriers, which never complete; no write is handed across);
    - "pair_reversed": warpgroup 1 syncs, warpgroup 0 arrives and stores (the arrive does
      not wait for the writes).

    Returns the kernel and the line of the store a finding names."""
    k = Kernel("fence_pair", reqntid=256)
    tile = k.shared_array(t.b8, TILE, align=128, name="tile")
    tmap = k.tensormap_addr(k.param_tensormap("tmap"))
    kind = how.removeprefix("pair_")
    wg = k.shr(k.tid.x, 7)
    with k.if_(wg == 1):
        _fill(k, tile, k.and_(k.tid.x, 127))
        if kind not in ("nofence", "early"):
            ptx.fence_proxy_async(k, "shared::cta")
        if kind == "reversed":
            k.bar_sync(1, 256)
        else:
            k.bar_arrive(1, 256)
        if kind == "early":
            ptx.fence_proxy_async(k, "shared::cta")
    with k.else_():
        if kind == "reversed":
            k.bar_arrive(1, 256)
        else:
            k.bar_sync(2 if kind == "other_id" else 1, 256)
        with k.if_(k.tid.x == 0):
            # (the storer's own fence: it fences no write of the other warpgroup)
            ptx.fence_proxy_async(k, "shared::cta")
            line = _store(k, tmap, tile)
    k.ret()
    return k, line


def shared(how: str) -> tuple[Kernel, int]:
    """One path: every thread of warpgroups 0 and 1 writes the tile (a thread per 4 bytes,
    twice over) and fences it; then

    - "shared_pair": warpgroup 1 `bar.arrive 1, 256`, warpgroup 0 `bar.sync 1, 256` and its
      thread 0 stores (clean);
    - "shared_reversed": warpgroup 0 arrives and stores, warpgroup 1 syncs;
    - "cover": a third warpgroup idles; warpgroups 0 and 1 both `bar.sync 1, 256` and
      thread 0 stores (clean: the named barrier covers writers and storer);
    - "cover_nofence": the same without the fence.

    Returns the kernel and the line of the store a finding names."""
    k = Kernel("fence_shared", reqntid=384 if how.startswith("cover") else 256)
    tile = k.shared_array(t.b8, TILE, align=128, name="tile")
    tmap = k.tensormap_addr(k.param_tensormap("tmap"))
    wg = k.shr(k.tid.x, 7)
    line = 0
    with k.if_(wg < 2):
        _fill(k, tile, k.and_(k.tid.x, 127))
        if how != "cover_nofence":
            ptx.fence_proxy_async(k, "shared::cta")
    if how.startswith("cover"):
        with k.if_(wg < 2):
            k.bar_sync(1, 256)
        with k.if_(k.tid.x == 0):
            line = _store(k, tmap, tile)
    else:
        with k.if_(wg == 1):
            k.bar_sync(1, 256) if how == "shared_reversed" else k.bar_arrive(1, 256)
        with k.else_():
            k.bar_arrive(1, 256) if how == "shared_reversed" else k.bar_sync(1, 256)
            with k.if_(k.tid.x == 0):
                line = _store(k, tmap, tile)
    k.ret()
    return k, line


def build(how: str) -> tuple[Kernel, int]:
    if how.startswith("mbar"):
        return mbarrier(how)
    return named(how) if how.startswith("pair") else shared(how)


def _ids(how: str) -> list[str]:
    return [f.id for f in check_kernel(build(how)[0], maps=MAPS)]


# each clean kernel and a mistake it differs from by the one thing the hand-off needs
CLEAN = {"mbar": "mbar_early", "mbar_bulk": "mbar_nofence", "mbar_warps": "mbar_other",
         "pair": "pair_early", "shared_pair": "shared_reversed", "cover": "cover_nofence"}
# mistake: what the finding says of the write (the words of the message)
MISTAKES = {
    "mbar_nofence": "no fence",
    "mbar_early": "other threads",       # fenced after the arrive: not handed on
    "mbar_other": "other threads",       # handed on a barrier thread 0 does not wait on
    "mbar_parity1": "other threads",     # a wait that sees no phase of the arrive
    "mbar_stranger": "other threads",    # the arrive is not the writers'
    "mbar_relaxed": "other threads",     # a .relaxed arrive releases nothing
    "pair_nofence": "named",             # handed to the partner sync unfenced
    "pair_early": "named",
    "pair_reversed": "arrives",          # the storer's arrive does not wait
    "shared_reversed": "arrives",
    "cover_nofence": "no fence",
}
WORDS = {
    "no fence": "was written with a generic-proxy store and no "
                "fence.proxy.async.shared::cta follows it before the tma store reads it",
    "named": "no fence.proxy.async.shared::cta follows it before the writing threads' named "
             "barrier (bar.arrive, or bar.sync with a thread count) that this thread's "
             "bar.sync waits on",
    "other threads": "was written (and fenced) by other threads, with no CTA barrier "
                     "between those writes and the tma store",
    "arrives": "was written (and fenced) by other threads, at a named barrier this thread "
               "only arrives at (bar.arrive does not wait",
}
# the named-barrier statement a finding names after the write, where a write is carried
VIA = {"named": "bar.arrive 1, 256;", "arrives": "bar.sync 1, 256;"}


@pytest.mark.parametrize("how", CLEAN)
def test_store_after_a_hand_off_of_fenced_writes_is_clean(how):
    clean(build(how)[0], maps=MAPS)
    assert CLEAN[how] in MISTAKES and _ids(CLEAN[how])     # (its twin is not)


@pytest.mark.parametrize("how", MISTAKES)
def test_store_the_hand_off_does_not_cover_is_reported(how):
    k, line = build(how)
    f = only(check_kernel(k, maps=MAPS), Hazard.SMEM_NO_PROXY_FENCE, line)
    assert WORDS[MISTAKES[how]] in f.message
    via = VIA.get(MISTAKES[how])
    assert [s.role for s in f.sites] == ["store", "write"] + (["barrier"] if via else [])
    assert f.sites[1].ptx.startswith("st.shared::cta.u32")
    if via:
        assert f.sites[2].ptx == via


def test_a_named_barrier_of_another_id_hands_nothing_on():
    """`bar.sync 2` is no partner of `bar.arrive 1`: the model reports both barriers (they
    never complete) and no write is handed across the branches."""
    found = sorted(f.id for f in check_kernel(build("pair_other_id")[0], maps=MAPS))
    assert found == ["named-barrier-count", "named-barrier-count"], found
    assert _ids("pair") == []


def test_an_arrive_hands_on_only_writes_fenced_before_it():
    """The fact of a fenced write names the arrives that handed it on: the same kernel
    with the fence after the arrive, or the arrive on a barrier the storer does not wait
    on, keeps the write pending for the storer."""
    assert _ids("mbar") == []
    assert _ids("mbar_early") == _ids("mbar_other") == ["smem-no-proxy-fence"]


@pytest.mark.parametrize("how", [*CLEAN, *MISTAKES, "pair_other_id"])
def test_parsed_ptx_is_judged_alike(how):
    """The hand-offs read only instructions (writes, fences, arrives, waits, named
    barriers, stores): the kernels' PTX read back by the front end gives the same
    findings."""
    assert differences(build(how)[0], Context.make(maps=MAPS)) == []
    assert bool(_ids(how)) == (how not in CLEAN)
