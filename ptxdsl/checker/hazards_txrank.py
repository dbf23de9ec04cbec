"""The bytes of one mbarrier phase counted per CTA rank, from every site of the kernel.

`hazards_mbar` compares a barrier's expect_tx with its deliveries along the waiting thread's
own path. That misses what a cluster does: in a warp-specialized kernel the producer warp
announces the bytes and the consumer warps wait (the wait's path carries no accounting); a
multicast load only some ranks issue (`if rank == 0`) makes the paths that meet at the wait
disagree; and a producer may announce bytes on a peer's barrier (`mbarrier.expect_tx` through
`mapa`, the MoE sample's hand-out). Every CTA runs the same code, so CTA r's phase is the sum,
over every CTA c and every thread of c that runs a site, of what that site sends to r:

- expect_tx / arrive.expect_tx: their count to the barrier their address names (this CTA's,
  or rank `b` of a `mapa`);
- TMA and bulk loads: their bytes to the barrier they name, a multicast load's slice to every
  rank of its ctaMask (`hazards_remote.multicast_recv`); st.async / red.async, complete_tx:
  their bytes to the barrier they name.

The ranks and threads come from `.reqnctapercluster` and `.reqntid` (`RankThreads`), which
also evaluate the branches on the thread and the rank. The sites must all lie in the same
loops, as deep as the wait's (a producer loop feeding the consumer loop one phase a trip).
Run-time branches the wait does not share (the MoE producer's `if mpair`) are followed each
way they may go: the phase is wrong if it is wrong every way, right if right every way.
Anything else (a count computed at run time, a map of unknown box, a phase right only some
ways) leaves the phase unknown: the caller says so in a note.
"""

from __future__ import annotations

from typing import Any

from .analysis import Analysis, keys_match
from .cfg import guard_polarity
from .hazards_cluster import CLUSTER, local_key, loops_of
from .hazards_remote import (
    RankThreads,
    _offsets,
    _on_rank,
    _reach,
    _threads,
    multicast_recv,
)
from .ops import Op, Role

_ANNOUNCE = (Role.MBAR_EXPECT_TX, Role.MBAR_ARRIVE)
_DELIVER = (Role.TMA_LOAD, Role.BULK_LOAD, Role.MBAR_COMPLETE_TX, Role.MBAR_REMOTE)

# Per rank running the wait: (announced, delivered, announce sites, delivery sites).
Phase = tuple[int, int, frozenset, frozenset]


def cluster_fed(an: Analysis, key: Any, ranks_differ: bool) -> bool:
    """Does barrier `key` get bytes or announcements from other CTAs (st.async, red.async,
    a peer's bulk copy, an expect_tx through mapa, a multicast load)? A multicast load with
    a constant ctaMask in a kernel whose ranks run the same code (`ranks_differ` False) is
    left to the path's own count (`hazards_mbar._multicast_bytes`), which is exact there."""
    return any(keys_match(local_key(an, o.mbar), key) for o in _cluster_sites(an)
               if ranks_differ or not o.multicast or an.const(o.mask) is None)


def announced_remotely(an: Analysis, key: Any) -> bool:
    """Does some CTA announce bytes on barrier `key` through mapa (an expect_tx of a peer's)?"""
    return any(o.role in _ANNOUNCE and o.space is CLUSTER and keys_match(local_key(an, o.mbar),
                                                                          key)
               for o in _cluster_sites(an))


def _cluster_sites(an: Analysis) -> list[Op]:
    hit = an.cache.get("txrank_cluster_sites")
    if hit is None:
        hit = an.cache["txrank_cluster_sites"] = [
            o for o in an.ops if o.mbar is not None and (
                (o.role is Role.MBAR_REMOTE and _bytes_op(an, o)) or o.multicast
                or (o.role in _DELIVER + _ANNOUNCE and o.space is CLUSTER
                    and o.count is not None))]
    return hit


def _bytes_op(an: Analysis, o: Op) -> bool:
    """cp.async.mbarrier.arrive is an arrival, not bytes."""
    return type(an.body[o.index].insn).__name__ != "CpAsyncMbarrierArrive"


def phase_bytes(an: Analysis, key: Any, wait: Op) -> list[tuple[int, Phase]] | None:
    """[(rank, phase)] for every rank that runs `wait`, or None when the phase is unknown."""
    cache = an.cache.setdefault("txrank_phase", {})
    ck = (key, loops_of(an, wait), wait.index)
    if ck not in cache:
        cache[ck] = _phase_bytes(an, key, wait)
    return cache[ck]


def _phase_bytes(an: Analysis, key: Any, wait: Op) -> list[tuple[int, Phase]] | None:
    threads = _threads(an)
    if threads is None:
        return None
    sites = []
    want = _offs(an, wait)
    for o in an.ops:
        if o.mbar is None or not (o.role in _DELIVER or (
                o.role in _ANNOUNCE and o.count is not None)):
            continue
        if o.role is Role.MBAR_REMOTE and not _bytes_op(an, o):
            continue
        k = local_key(an, o.mbar)
        if k is None:
            return None   # it may name this barrier
        if keys_match(k, key):
            # (a ring's full and empty barriers may share one buffer: told apart by offset)
            offs = _offs(an, o)
            if want is None or offs is None or offs & want:
                sites.append(o)
    loops = {loops_of(an, o) for o in sites}
    if len(loops) != 1 or len(loops.pop()) != len(loops_of(an, wait)):
        return None   # which phase each site feeds is open
    mine = _uniform_conds(an, wait.index)
    fixed = dict(mine)
    free = sorted({vn for o in sites for vn, _ in _uniform_conds(an, o.index)} - set(fixed),
                  key=repr)
    if len(free) > _MAX_FREE:
        return None
    sends = {}
    for o in sites:
        n = _amount(an, o)
        recv = None if n is None else multicast_recv(an, threads, o, n) if o.multicast \
            else _to_ranks(threads, o, n)
        if recv is None:
            return None
        sends[o.index] = recv
    ranks = threads.ranks_running(wait.index)
    # Each way the run-time branches the wait does not share may go (conditions on distinct
    # values taken as independent): a phase is wrong only if it is wrong every way, right if
    # right every way, and unknown otherwise (an if/else whose arms load the same bytes in
    # another order is counted once per arm, never both arms at once).
    outcomes = []
    for bits in range(1 << len(free)):
        way = dict(fixed)
        way.update((vn, bool(bits >> j & 1)) for j, vn in enumerate(free))
        run = [o for o in sites if all(way[vn] == pol for vn, pol in _uniform_conds(an, o.index))]
        outcomes.append(_count(ranks, run, sends, threads.size))
    wrong = [x for x in outcomes if any(ph[0] != ph[1] for _, ph in x)]
    if wrong and len(wrong) < len(outcomes):
        return None
    return (wrong or outcomes)[0]


_MAX_FREE = 3     # run-time conditions enumerated (8 ways)


def _count(ranks: list[int], run: list[Op], sends: dict, size: int
           ) -> list[tuple[int, Phase]]:
    """Per rank of `ranks`, the phase the sites `run` make (their per-rank bytes: `sends`)."""
    exp, got = [0] * size, [0] * size
    told: list[set[int]] = [set() for _ in range(size)]
    sent: list[set[int]] = [set() for _ in range(size)]
    for o in run:
        into, seen = (exp, told) if o.role in _ANNOUNCE else (got, sent)
        for r, b in enumerate(sends[o.index]):
            into[r] += b
            if b:
                seen[r].add(o.index)
    return [(r, (exp[r], got[r], frozenset(told[r]), frozenset(sent[r]))) for r in ranks]


def _offs(an: Analysis, o: Op) -> frozenset | None:
    """`hazards_remote._offsets` of an op's barrier, once per op."""
    key = ("txrank_offs", o.index, o.role)
    if key not in an.cache:
        an.cache[key] = _offsets(an, o.mbar)
    return an.cache[key]


def _amount(an: Analysis, o: Op) -> int | None:
    """The bytes one thread's run of a site announces or delivers."""
    if o.role is Role.TMA_LOAD:
        info = an.map_info(o.map)
        return info.box_bytes if info is not None else None
    return an.const(o.count)


def _to_ranks(threads: RankThreads, o: Op, n: int) -> list[int] | None:
    """Per rank, what every CTA's threads running `o` send to the barrier it names."""
    return threads.received([(o, o.mbar, n)])


def _uniform_conds(an: Analysis, i: int) -> frozenset:
    """The branches and guard, uniform across the CTA and not on its rank, that decide
    whether statement i runs (a loop's own exit branches left out: they decide how many
    phases, not a phase's bytes). Those on the thread or the rank are evaluated per thread
    and rank instead."""
    table = an.cache.get("txrank_conds")
    if table is None:
        table = an.cache["txrank_conds"] = {}
        exits = {b for _h, body in an.loops for b in body
                 if any(s not in body for s in an.cfg.succs(b))}
        for blk in an.cfg.blocks:
            if blk.branch is None or blk.taken is None or blk.fall is None or \
                    blk.taken == blk.fall or blk.id in exits:
                continue
            pred, pol = guard_polarity(an.body[blk.branch].guard)
            vn = an.values.vn(pred)
            if an.values.level(pred) or _on_rank(vn):
                continue
            yes, no = _reach(an, blk.taken, blk.id), _reach(an, blk.fall, blk.id)
            for b in yes - no:
                table.setdefault(b, set()).add((vn, pol))
            for b in no - yes:
                table.setdefault(b, set()).add((vn, not pol))
    out = frozenset(table.get(an.cfg.block_of(i), ()))
    guard = an.body[i].guard
    if guard is not None:   # a uniform guard (`@p` on a run-time flag) decides it as well
        pred, pol = guard_polarity(guard)
        vn = an.values.vn(pred)
        if not an.values.level(pred) and not _on_rank(vn):
            out |= {(vn, pol)}
    return out
