"""Arrivals and bytes the CTAs of a cluster deliver to each other's mbarriers.

A barrier that other CTAs arrive on through `mapa` (a cluster ring's `empty[s]`, released by
every CTA's consumers) completes a phase when the arrivals of all of them add up to its
count; a barrier that st.async / red.async (or a bulk copy from a peer's shared memory)
complete on receives bytes its expect_tx must announce. Every CTA runs the same code, so
what CTA r receives is what each CTA c sends to the rank its `mapa` names when run as c:
the analysis evaluates the arrive's conditions and the target rank for every rank of the
declared cluster (`.reqnctapercluster`) and every thread of the CTA (`.reqntid`), like the
local arrive-count check (`hazards_arrive.Threads`). Ranks are constants, `%cluster_ctarank`
and what is computed from them (`rank ^ 1`, `(rank + 1) % n`); anything else, or a kernel
whose cluster shape is not declared, leaves a note. Where only the CTA's shape is not declared,
thread 0 of each CTA gives a lower bound on the arrivals (`FirstThread`): too many are
reported, too few leave a note.
"""

from __future__ import annotations

import math
from typing import Any

from .analysis import STRUCTURAL, Analysis, keys_match
from .cfg import guard_polarity
from .findings import Hazard
from .hazards_arrive import Threads, _anchor, _barriers, _Unknown
from .hazards_cluster import (
    CLUSTER,
    cp_async_arrives,
    describe,
    local_key,
    loops_of,
    mapa_source,
    remote_roots,
)
from .ops import Op, Role


class RankThreads(Threads):
    """`Threads` of one CTA of the cluster: `%cluster_ctarank` is `rank`, and
    `%cluster_ctaid.x/y/z` its position in the cluster's declared shape (x fastest, as the
    PTX ISA numbers ranks: a (1, 4, 1) cluster's `%cluster_ctaid.y` is its rank)."""

    def __init__(self, an: Analysis, dims: tuple[int, ...], cluster: tuple[int, ...]):
        super().__init__(an, dims)
        self.shape = (*tuple(cluster), 1, 1, 1)[:3]
        self.size = math.prod(self.shape)
        self.rank = 0
        self._tids: dict[tuple[int, int, bool], tuple[list[int], bool] | None] = {}
        self.cluster = {"cluster_nctarank": self.size}
        self.cluster.update({f"cluster_nctaid.{a}": n for a, n in zip("xyz", self.shape,
                                                                       strict=True)})

    def _sreg(self, name: str, tid: int) -> int:
        if name == "cluster_ctarank":
            return self.rank
        if name.startswith("cluster_ctaid.") and name[-1] in "xyz":
            cx, cy, _ = self.shape
            return {"x": self.rank % cx, "y": self.rank // cx % cy,
                    "z": self.rank // (cx * cy)}[name[-1]]
        if name in self.cluster:
            return self.cluster[name]
        return super()._sreg(name, tid)

    def running_tids(self, i: int, partial: bool = False) -> tuple[list[int], bool] | None:
        """`Threads.running_tids`, with the branches on the CTA's rank (the same in every
        thread of a CTA, so not divergence) evaluated for `self.rank`. Cached per rank, or
        once for every rank where no condition of the statement names the rank."""
        key = (i, self.rank if self._on_rank(i) else -1, partial)
        if key not in self._tids:
            try:
                if any(bool(self.value(vn, 0)) != pol for vn, pol in _rank_conds(self.an, i)):
                    self._tids[key] = ([], False)
                    return self._tids[key]
            except _Unknown:
                self._tids[key] = None
                return None
            self._tids[key] = super().running_tids(i, partial)
        return self._tids[key]

    def _on_rank(self, i: int) -> bool:
        return bool(_rank_conds(self.an, i)) or any(
            _on_rank(vn) for vn, _ in self.an.div.stmt_tokens(i))

    def target(self, operand: Any, tid: int) -> int | None:
        """The rank of the CTA whose barrier `operand` names, in thread `tid` of `self.rank`
        (a CUTLASS-style release has lane r arrive on CTA r's barrier)."""
        src = mapa_source(self.an, operand)
        if src is None:
            return self.rank
        r = src[2]
        c = self.an.const(r)
        if c is not None:
            return c
        try:
            t = self.value(self.an.values.vn(r), tid)
        except _Unknown:
            return None
        return t if 0 <= t < self.size else None

    def received(self, sends: list[tuple[Op, Any, int]]) -> list[int] | None:
        """Per rank, the sum of what the sends (op, barrier operand, amount per thread)
        deliver to it from every CTA of the cluster; None when some count is unknown."""
        out = [0] * self.size
        for c in range(self.size):
            self.rank = c
            for op, operand, amount in sends:
                hit = self.running_tids(op.index)
                if hit is None:
                    return None
                tids, elect = hit
                per_lane = _per_lane_rank(self.an, operand)
                if elect:   # which lane is elected is not known: its rank must not matter
                    if per_lane:
                        return None
                    tids = sorted({t // 32 * 32 for t in tids})
                for tid in tids if per_lane else tids[:1]:
                    t = self.target(operand, tid)
                    if t is None:
                        return None
                    out[t] += amount * (1 if per_lane else len(tids))
        return out

    def ranks_running(self, i: int) -> list[int]:
        """The ranks some thread of which runs statement i (all when unknown)."""
        out = []
        for c in range(self.size):
            self.rank = c
            hit = self.running_tids(i)
            if hit is None or hit[0]:
                out.append(c)
        return out


class FirstThread(RankThreads):
    """`RankThreads` of a CTA whose shape is not declared (`.maxntid` bounds only its size):
    thread (0, 0, 0) alone, which every CTA has, with the CTA's extent (`%ntid`) unknown.
    What it sends is a lower bound on what each CTA sends, so arrivals above the count are
    too many in every launch shape (fewer prove nothing)."""

    def __init__(self, an: Analysis, cluster: tuple[int, ...]):
        super().__init__(an, (1,), cluster)

    def _sreg(self, name: str, tid: int) -> int:
        if name.startswith("ntid."):
            raise _Unknown(name)
        return super()._sreg(name, tid)


def rank_sets(an: Analysis, access: int, local: int) -> tuple[set, set] | None:
    """(the ranks whose shared memory the remote access at statement `access` reaches, the
    ranks that run statement `local`), or None where the ranks are not known."""
    threads = _threads(an)
    op = an.op_at.get(access)
    if threads is None or op is None or op.smem is None:
        return None
    reached = set()
    for c in threads.ranks_running(access):
        threads.rank = c
        hit = threads.running_tids(access)
        if hit is None:
            return None
        for tid in hit[0] if _per_lane_rank(an, op.smem) else hit[0][:1]:
            t = threads.target(op.smem, tid)
            if t is None:
                return None
            reached.add(t)
    return reached, set(threads.ranks_running(local))


def _per_lane_rank(an: Analysis, operand: Any) -> bool:
    """Does the rank a mapa'd address names differ between the threads of a CTA?"""
    src = mapa_source(an, operand)
    return src is not None and an.values.level(src[2]) > 0


def _on_rank(vn: Any) -> bool:
    if not isinstance(vn, tuple) or not vn:
        return False
    if vn[0] == "sreg":
        return str(vn[1]).startswith("cluster_cta")
    return any(_on_rank(x) for x in vn[1:] if isinstance(x, tuple))


def _rank_conds(an: Analysis, i: int) -> list[tuple[Any, bool]]:
    """The conditions on the CTA's rank under which statement i runs: its guard, and each
    rank branch whose one side only reaches i (structured if/else on `rank == 0`)."""
    table = an.cache.get("rank_conds")
    if table is None:
        table = an.cache["rank_conds"] = {}
        for blk in an.cfg.blocks:
            if blk.branch is None or blk.taken is None or blk.fall is None or \
                    blk.taken == blk.fall:
                continue
            pred, pol = guard_polarity(an.body[blk.branch].guard)
            vn = an.values.vn(pred)
            if an.values.level(pred) or not _on_rank(vn):
                continue
            yes, no = _reach(an, blk.taken, blk.id), _reach(an, blk.fall, blk.id)
            for b in yes - no:
                table.setdefault(b, []).append((vn, pol))
            for b in no - yes:
                table.setdefault(b, []).append((vn, not pol))
    out = list(table.get(an.cfg.block_of(i), ()))
    guard = an.body[i].guard
    if guard is not None:
        pred, pol = guard_polarity(guard)
        if not an.values.level(pred) and _on_rank(an.values.vn(pred)):
            out.append((an.values.vn(pred), pol))
    return out


def _reach(an: Analysis, start: int, stop: int) -> set[int]:
    """The blocks reachable from `start` without passing through `stop`."""
    seen, todo = {start}, [start]
    while todo:
        for s in an.cfg.succs(todo.pop()):
            if s != stop and s not in seen:
                seen.add(s)
                todo.append(s)
    return seen


def _threads(an: Analysis) -> RankThreads | None:
    hit = an.cache.get("rank_threads", an)
    if hit is an:
        dims = getattr(an.kernel, "reqntid", None)
        cluster = getattr(an.kernel, "reqnctapercluster", None)
        hit = an.cache["rank_threads"] = (RankThreads(an, dims, tuple(cluster))
                                          if dims and cluster else None)
    return hit


def _offsets(an: Analysis, operand: Any) -> frozenset | None:
    """The offsets of the barriers a (possibly mapa'd) barrier address may name, in this
    CTA's terms: those of a local barrier operation on the same value (a ring's release goes
    through mapa, its wait does not), else the address's own constant offset."""
    src = mapa_source(an, operand)
    local = src[1] if src is not None else operand
    k = an.val(local).key
    if k is None:
        return None
    if k[1] is not None:
        return frozenset({k[1]})
    vn = an.values.vn(getattr(local, "base", local))
    anchor = _anchor(an, local)
    users = [o for o in an.ops if o.mbar is not None and o.role is not Role.MBAR_INIT]
    for o in users:
        if an.values.vn(getattr(o.mbar, "base", o.mbar)) == vn:
            return _barriers(an).get(o.index)
    for o in users:   # the same ring base with its own stage register (a consumer's release)
        if anchor is not None and _anchor(an, o.mbar) == anchor:
            return _barriers(an).get(o.index)
    return None


def remote_arrive_counts(an: Analysis) -> None:
    """`mbar-arrive-count` for barriers the cluster's CTAs arrive on through mapa: the arrivals each
    CTA receives in a phase (every CTA's arrives, evaluated per CTA rank and thread) against the
    barrier's count."""
    roots = remote_roots(an)
    if not roots or cp_async_arrives(an):
        return
    arrives = [o for o in an.ops if o.role is Role.MBAR_ARRIVE]
    ident = {o.index: (local_key(an, o.mbar), _offsets(an, o.mbar)) for o in arrives}
    sites = [o for o in arrives if ident[o.index][0] is not None
             and id(ident[o.index][0][0]) in roots]
    threads = _threads(an)
    cluster = getattr(an.kernel, "reqnctapercluster", None)
    if threads is None and cluster:
        threads = FirstThread(an, tuple(cluster))
    if threads is None:
        an.note("arrive-count", "other CTAs of the cluster arrive on these barriers through "
                "mapa, and the kernel does not declare its cluster and CTA shape "
                "(reqnctapercluster=, reqntid=): the arrivals are not counted",
                [("arrive", o.index) for o in sites[:1]])
        return

    def overlap(a: Op, b: Op) -> bool:
        (ka, sa), (kb, sb) = ident[a.index], ident[b.index]
        return ka[0] is kb[0] and (sa is None or sb is None or bool(sa & sb))

    # Sites in different loops (a release in the loop, a drain after it) feed different
    # phases: each such set is checked as one phase's arrivals.
    groups = {frozenset(x.index for x in sites if overlap(x, o) and loops_of(an, x) ==
                        loops_of(an, o)) for o in sites}
    inits = [o for o in an.ops if o.role is Role.MBAR_INIT]
    for group in sorted(groups, key=min):
        _group(an, threads, [an.op_at[i] for i in sorted(group)], ident, inits)


def _group(an: Analysis, threads: RankThreads, group: list[Op], ident: dict,
           inits: list[Op]) -> None:
    where = [("arrive", o.index) for o in group]
    root = ident[group[0].index][0][0]
    offs: set | None = set()
    for o in group:
        s = ident[o.index][1]
        offs = None if s is None or offs is None else offs | s
    mine = [i for i in inits for k in [an.key(i, "mbar")] if k is not None and k[0] is root
            and (offs is None or k[1] in offs)]
    counts = {an.const(i.count) for i in mine}
    per = [an.const(o.arrivals) for o in group]
    blocks = {an.cfg.block_of(o.index) for o in group}
    why = None
    if not mine:
        return   # reported as mbar-uninit
    if len(counts) != 1 or None in counts or None in per:
        why = "its barriers are initialised with different or run-time counts"
    elif len(blocks) > 1:
        why = ("its arrive sites in one loop lie in different blocks (which phase each "
               "feeds is open)")
    recv = None if why else threads.received(
        [(o, o.mbar, n or 0) for o, n in zip(group, per, strict=True)])
    low = isinstance(threads, FirstThread)
    if recv is not None and low and max(recv) <= (next(iter(counts)) or 0):   # (one count)
        recv, why = None, ("the CTA shape is not declared (reqntid=): only thread 0's "
                           "arrivals are counted, and they do not exceed the count")
    if recv is None:
        an.note("arrive-count", f"the arrivals other CTAs of the cluster make on the mbarrier "
                f"at {describe(an, group[0].mbar)} are not counted: "
                f"{why or 'a condition or target rank is not known per CTA'}", where[:2])
        return
    count = counts.pop()
    assert count is not None
    # A CTA whose barrier gets no arrivals is wrong only if some thread there waits on it
    # (rank 0 alone may produce: the peers' consumers release rank 0's stage only).
    waiting = {r for w in an.ops if w.role is Role.MBAR_WAIT and _overlaps(
        an, w, root, offs) for r in threads.ranks_running(w.index)}
    wrong = [r for r, n in enumerate(recv) if (n > count if low else n != count)
             and (n or r in waiting)]
    if not wrong:
        return
    r = wrong[0]
    effect = ("the phase never completes and its waiters hang" if recv[r] < count else
              "the phase completes before all of them arrived")
    got = (f"at least {recv[r]} (thread 0 of each CTA, whatever the CTA's shape)" if low
           else str(recv[r]))
    an.report(Hazard.MBAR_ARRIVE_COUNT, f"the mbarrier at {describe(an, group[0].mbar)} is "
              f"initialised to expect {count} arrivals per phase in every CTA of the "
              f"{threads.size}-CTA cluster, but with every CTA running these arrives (through "
              f"mapa to the ranks they name) CTA {r} receives {got}: {effect}",
              where + [("init", mine[0].index)], dedupe=("cluster-arrive", group[0].index))


def _overlaps(an: Analysis, op: Op, root: Any, offs: set | None) -> bool:
    k = local_key(an, op.mbar)
    if k is None or k[0] is not root:
        return False
    mine = _offsets(an, op.mbar)
    return offs is None or mine is None or bool(mine & offs)


def remote_bytes(an: Analysis, key: Any, wait: Op) -> list[tuple[int, frozenset]] | None:
    """Per rank running the wait, the bytes st.async / red.async / peer copies of the whole
    cluster deliver to this CTA's barrier `key` in one phase, with their sites; [(0, {})]
    when none targets it; None when unknown."""
    sends = [o for o in an.ops if (o.role is Role.MBAR_REMOTE and type(
        an.body[o.index].insn).__name__ != "CpAsyncMbarrierArrive") or (
        o.role is Role.BULK_LOAD and o.space is CLUSTER)]
    if any(local_key(an, o.mbar) is None for o in sends):
        return None
    mine = [o for o in sends if keys_match(local_key(an, o.mbar), key)]
    if not mine:
        return [(0, frozenset())]
    if any(o.space is CLUSTER and o.count is not None and o.role in (
            Role.MBAR_ARRIVE, Role.MBAR_EXPECT_TX) and keys_match(local_key(an, o.mbar), key)
            for o in an.ops):
        return None   # peers announce bytes on it too (a remote expect_tx): not modelled
    threads = _threads(an)
    if threads is None or any(loops_of(an, o) != loops_of(an, wait) for o in mine):
        return None   # the phase a send feeds is not known
    amounts = [an.const(o.count) for o in mine]
    if None in amounts:
        return None
    recv = threads.received([(o, o.mbar, n or 0) for o, n in zip(mine, amounts, strict=True)])
    if recv is None:
        return None
    sites = frozenset(o.index for o in mine)
    return [(recv[r], sites) for r in threads.ranks_running(wait.index)]


def multicast_bytes(an: Analysis, op: Op, n: int) -> int | None:
    """The bytes one multicast load (`n` per slice) delivers to the barrier of the CTA that
    issues it, counted per rank: each CTA c that runs it sends a slice to every rank of its
    ctaMask (a constant, or computed from the rank, like `1 << (rank ^ 1)`). Only when every
    CTA that runs it gets the same, and every other multicast load on that barrier runs in
    the same CTAs (a slice from a load this CTA does not run is not on its path); else
    None."""
    threads = _threads(an)
    if threads is None or op.mask is None:
        return None
    issuers = threads.ranks_running(op.index)
    key = an.key(op, "mbar")
    if any(o.role is op.role and o.multicast and o is not op and keys_match(
            an.key(o, "mbar"), key) and threads.ranks_running(o.index) != issuers
            for o in an.ops):
        return None
    recv = multicast_recv(an, threads, op, n)
    if recv is None:
        return None
    got = {recv[r] for r in issuers}
    return got.pop() if len(got) == 1 else None


def multicast_recv(an: Analysis, threads: RankThreads, op: Op, n: int) -> list[int] | None:
    """Per rank, the bytes one multicast load (`n` per slice) delivers to its barrier from
    every CTA that runs it (each sends a slice to every rank of its ctaMask, a constant or
    computed from the rank); None when a count or mask is unknown."""
    if op.mask is None:
        return None
    recv = [0] * threads.size
    for c in threads.ranks_running(op.index):
        threads.rank = c
        count = threads.running(op.index)
        mask = an.const(op.mask)
        if mask is None and not an.values.level(op.mask):
            try:
                mask = threads.value(an.values.vn(op.mask), 0)
            except _Unknown:
                mask = None
        if count is None or mask is None:
            return None
        for r in range(threads.size):
            recv[r] += count * n * (mask >> r & 1)
    return recv


STRUCTURAL.append(remote_arrive_counts)
