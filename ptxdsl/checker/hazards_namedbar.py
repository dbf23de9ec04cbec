"""Named barriers: `bar.sync id, n` / `bar.arrive id, n` / `bar.red ... id, n` (and their
`barrier.*` spellings), as FlashAttention-3's ping-pong and CUTLASS's epilogues use them.

The hardware counts a named barrier's arrivals per warp (a warp that runs the instruction
adds 32, whichever lanes are active), and a phase completes once `n` threads arrived; a sync
waits for the phase it arrived in, an arrive does not wait. Without a count, every thread
of the CTA takes part.

The model. Which warps reach each barrier instruction, and with which id and count, comes
from `ptxdsl.warpgroups` (per-thread constant propagation: `tid.x >> 7`, `wg + 1`, a warp
index, its `shfl.sync.idx` broadcast are exact; a value loaded from memory is unknown), so
it needs the CTA's size (`.reqntid`/`.maxntid`). Along the paths of one loop iteration (the
innermost loop holding the barrier; outside loops, the whole kernel), a warp's arrivals on
barrier X are counted per path: a branch the per-thread analysis decides goes its way for
that warp, one on a value that is the same in every thread (`Values.data_level` 0: a loop
counter, a parameter) goes the same way in every warp (each such choice is tried, up to
`_UNIFORM_BRANCHES` of them), and any other may go either way.

- `named-barrier-count`: a count that is not a multiple of 32, larger than the CTA, or
  larger than all the threads of the warps that ever use that barrier id (it never
  completes).
- `named-barrier-unpaired`: on some path, the arrivals on X in an iteration (or in the
  kernel outside loops) are fewer than a sync there waits for: a partner's `bar.arrive` is
  missing on that path, and the sync waits forever.
- `named-barrier-surplus`: more arrivals on X than the syncs there consume: in a loop, any
  surplus (a phase completes with nobody waiting, and the next sync passes without its
  partner: the ordering is lost); outside loops, a whole phase's worth (one partial phase
  may be carried into a loop: FA3's pre-arrive that lets the first warpgroup start).
- `named-barrier-deadlock`: where every count is right and each warp's syncs and arrives
  are one sequence (no path choice between them), the warps run those sequences (before
  the loop, two iterations, after it; loops nested in it likewise in each iteration) as
  far as the barriers let them; a sync still waiting when none can move waits forever (a
  ping-pong without its pre-arrive).
- `named-barrier-collision`: one id used with two different thread counts by different
  warps (TmaStoreEpilogue's per-warpgroup ids 1/2 with 128 threads, reused by a ping-pong
  with 256): the counts of both uses add up in one phase.
- `cta-barrier-divergent`: a count-less `bar.sync X` (`__syncthreads` for X = 0) that only
  some warps reach, while the warps that never reach barrier X wait at other barriers.

The model also pairs uses for rules that carry facts across a barrier (`partners`: the
syncs with a thread count whose warps never reach an arrive of the same id; or the
arrives of the same id in warps that never reach a given sync or arrive).

Loops nested one in another (FlashAttention's tile loop round its key-block loop, a turn
in each) are counted each per iteration, the inner loop's uses apart from the outer one's.

Not modelled (left unchecked, never guessed): a barrier in inline PTX (`k.asm`); an id or
count a thread cannot compute; ids used in loops side by side (a producer's loop and a
consumer's loop), whose iterations cannot be paired. Loops are taken to run as many
iterations in every warp.
"""

from __future__ import annotations

import itertools
from typing import Any

from .analysis import STRUCTURAL, Analysis
from .findings import Hazard
from .ops import Role

_WARP = 32
_UNIFORM_BRANCHES = 6   # same-in-every-thread branches tried both ways per region (2^6 paths)
_NAMES = ("Barrier", "BarrierRed")


class _Use:
    """One warp's use of a barrier instruction: its id and thread count (None: unknown;
    `full`: no count, all the CTA's threads) and whether it waits."""

    __slots__ = ("site", "warp", "id", "count", "full", "sync", "maybe")

    def __init__(self, site: int, warp: int, id: int | None, count: int | None, full: bool,
                 sync: bool, maybe: bool):
        self.site, self.warp, self.id, self.count = site, warp, id, count
        self.full, self.sync, self.maybe = full, sync, maybe


def _agree(values: list) -> Any:
    """The one value all lanes have, else None (unknown, or lanes disagree)."""
    first = values[0] if values else None
    return first if all(v == first for v in values) else None


class _Model:
    """Per warp: the barrier instructions it may reach (`uses`) and the way it goes at each
    branch the per-thread analysis decides (`turns`: True taken, False not, None unknown)."""

    def __init__(self, an: Analysis, sites: list[int], nthreads: int):
        insns = {i: an.body[i].insn for i in sites}
        branches = [b.branch for b in an.cfg.blocks if b.branch is not None]
        reach = an.threads() or []
        self.nwarps = -(-nthreads // _WARP)
        self.uses: list[_Use] = []
        self.turns: list[dict[int, bool | None]] = []
        for w in range(self.nwarps):
            lanes = reach[w * _WARP:(w + 1) * _WARP]
            turns: dict[int, bool | None] = {}
            for j in branches:
                seen = [t.seen[j][0] for t in lanes if j in t.seen]
                turns[j] = _agree(seen) if seen else None
            self.turns.append(turns)
            for i, insn in insns.items():
                seen = [t.seen[i] for t in lanes if i in t.seen and i in t.reached]
                if not seen:
                    continue
                ids = _agree([s[1] for s in seen])
                full = insn.count is None
                count = nthreads if full else _agree([s[2] for s in seen])
                sync = type(insn).__name__ == "BarrierRed" or \
                    getattr(insn.op, "value", insn.op) == "sync"
                maybe = any(s[0] is None for s in seen)
                self.uses.append(_Use(i, w, ids, count, full, sync, maybe))
        self.complete = bool(reach) and all(t.complete for t in reach)


def _sites(an: Analysis) -> list[int]:
    """The kernel's named-barrier statements (`bar.sync`, `bar.arrive`, `bar.red`)."""
    return [i for i, st in enumerate(an.body)
            if type(getattr(st, "insn", None)).__name__ in _NAMES]


def _model(an: Analysis) -> _Model | None:
    """The kernel's `_Model`, built once for the rules here and `partners`; None without
    barrier statements or a known CTA size."""
    if "namedbar.model" not in an.cache:
        sites, nthreads = _sites(an), an.values.nthreads
        an.cache["namedbar.model"] = (_Model(an, sites, nthreads)
                                      if sites and nthreads is not None else None)
    return an.cache["namedbar.model"]


def partners(an: Analysis, site: int, sync: bool = True) -> frozenset[int]:
    """The statements that wait (`bar.sync`/`bar.red` with a thread count) for a phase the
    named-barrier statement at `site` may arrive in: the same id in some warp, and no warp
    that reaches `site` reaches them (the warp-specialized branches of CUTLASS's epilogues
    and FA3's ping-pong: an arrive in one warpgroup's branch, its partners' sync in the
    other's). No path joins the two, so a rule that carries facts from one to the other
    (`Analysis.carry`) asks here; a warp at both takes its facts along its own path. Empty
    when the model cannot tell: the CTA's size unknown, the per-thread analysis given up,
    or an id a warp cannot compute (uses with such ids pair with nothing). `sync=False`:
    the `bar.arrive` statements of the same id in those other warps instead, which do not
    wait (their threads' later program is not ordered after `site`'s earlier one)."""
    table = an.cache.get(("namedbar.partners", sync))
    if table is None:
        table = an.cache[("namedbar.partners", sync)] = _partners(an, sync)
    return table.get(site, frozenset())


def _partners(an: Analysis, sync: bool) -> dict[int, frozenset[int]]:
    model = _model(an)
    if model is None or not model.complete:
        return {}
    ids: dict[int, set[int]] = {}
    warps: dict[int, set[int]] = {}
    for u in model.uses:
        warps.setdefault(u.site, set()).add(u.warp)   # (a warp that may reach it, too)
        if u.id is not None:
            ids.setdefault(u.site, set()).add(u.id)
    ends = {u.site for u in model.uses if u.sync == sync and not u.full}
    return {s: frozenset(w for w in ends if ids.get(w, set()) & xs
                         and not warps[w] & warps[s])
            for s, xs in ids.items()}


def _warps(ws: set[int]) -> str:
    """Warp numbers as ranges: {0, 1, 2, 3, 8} -> 'warps 0-3, 8'."""
    out: list[list[int]] = []
    run: list[int] = []
    for w in sorted(ws):
        if run and w != run[-1] + 1:
            out.append(run)
            run = []
        run.append(w)
    if run:
        out.append(run)
    text = ", ".join(f"{r[0]}-{r[-1]}" if len(r) > 1 else f"{r[0]}" for r in out)
    return ("warp " if len(ws) == 1 else "warps ") + text


def _check(an: Analysis) -> None:
    sites = _sites(an)
    if not sites or not any(o.role is Role.NAMED_BARRIER for o in an.ops) and \
            not _divergent_candidates(an, sites):
        return
    nthreads = an.values.nthreads
    if nthreads is None:
        an.note("named barriers", "the CTA's size is unknown (no .reqntid or .maxntid), so "
                "which warps arrive on each barrier is not known", [("barrier", sites[0])])
        return
    model = _model(an)
    if model is None or not model.complete:
        an.note("named barriers", "the per-thread analysis gave up on this kernel",
                [("barrier", sites[0])])
        return
    ordered = not _counts(an, model, nthreads)
    ids = [u.id for u in model.uses]
    if None in ids:
        at = next(u.site for u in model.uses if u.id is None)
        an.note("named barriers", "a barrier id the analysis cannot compute may be any id: "
                "the per-id checks are skipped", [("barrier", at)])
        return
    by_id: dict[int, list[_Use]] = {}
    for u in model.uses:
        if u.id is not None:
            by_id.setdefault(u.id, []).append(u)
    # The barriers whose counts were found right, with the warps of one phase: their order
    # is followed only when that holds for every counted barrier of the kernel (a barrier
    # left out would let the warps that block on it run ahead in the run).
    phases: dict[int, int] = {}
    for x, uses in sorted(by_id.items()):
        if _never_completes(an, model, x, uses) or _collision(an, x, uses) or \
                _divergent(an, model, x, uses, by_id):
            ordered = False
            continue
        if any(u.full for u in uses):
            continue   # CTA-wide: every warp's, or one that exited; not in the run
        per_phase = _balance(an, model, x, uses) if any(not u.sync for u in uses) else \
            _one_count(uses)
        if per_phase is None:
            ordered = False
        else:
            phases[x] = per_phase
    if ordered and any(not u.sync for x in phases for u in by_id[x]):
        _order(an, model, {x: by_id[x] for x in phases}, phases)


def _one_count(uses: list[_Use]) -> int | None:
    """The warps of one phase when every use gives the same known count (a multiple of 32)."""
    counts = {u.count for u in uses}
    count = counts.pop() if len(counts) == 1 else None
    return None if count is None or count % _WARP else count // _WARP


def _divergent_candidates(an: Analysis, sites: list[int]) -> bool:
    """Is some count-less sync reached by only some threads (worth the per-warp model)?"""
    return any(an.body[i].insn.count is None and an.div.stmt_level(i) >= 1 for i in sites)


def _counts(an: Analysis, model: _Model, nthreads: int) -> bool:
    """Counts that are wrong whoever arrives; True when one was reported."""
    found = False
    for u in model.uses:
        if u.full or u.count is None:
            continue
        if u.count % _WARP or u.count <= 0:
            found = True
            an.report(Hazard.NAMEDBAR_COUNT, f"the thread count is {u.count}: it must be a "
                      "positive multiple of the warp size (32), since the barrier counts "
                      "whole warps", [("barrier", u.site)], dedupe=("count", u.site))
        elif u.count > nthreads:
            found = True
            an.report(Hazard.NAMEDBAR_COUNT, f"the thread count is {u.count}, but the CTA has "
                      f"only {nthreads} threads: the barrier never completes",
                      [("barrier", u.site)], dedupe=("count", u.site))
    return found


def _never_completes(an: Analysis, model: _Model, x: int, uses: list[_Use]) -> bool:
    """A count above all the threads of the warps that ever use barrier x."""
    warps = {u.warp for u in uses}
    for u in uses:
        if u.full or u.count is None or u.count % _WARP or u.count > _WARP * model.nwarps:
            continue
        if u.count > _WARP * len(warps):
            an.report(Hazard.NAMEDBAR_COUNT, f"barrier {x} waits for {u.count} threads, but "
                      f"only {_warps(warps)} ({_WARP * len(warps)} threads) ever arrive on "
                      "it: no phase completes, and every sync on it waits forever",
                      [("barrier", u.site)], dedupe=("never", x))
            return True
    return False


def _collision(an: Analysis, x: int, uses: list[_Use]) -> bool:
    """Two counts on barrier x, used by different warps."""
    counts: dict[int, list[_Use]] = {}
    for u in uses:
        if u.count is not None:
            counts.setdefault(u.count, []).append(u)
    for (c1, a), (c2, b) in itertools.combinations(sorted(counts.items()), 2):
        wa, wb = {u.warp for u in a}, {u.warp for u in b}
        if not (wa == wb and len(wa) == 1):   # one warp may use both, one after the other
            sa, sb = a[0], b[0]
            an.report(Hazard.NAMEDBAR_COLLISION, f"barrier {x} is used with {c1} threads by "
                      f"{_warps(wa)} and with {c2} threads by {_warps(wb)}: where the two "
                      "uses overlap, the arrivals of both count towards one phase, which "
                      "then completes with the wrong threads (or never)",
                      [("barrier", sa.site), ("other use", sb.site)],
                      dedupe=("collision", x))
            return True
    return False


def _divergent(an: Analysis, model: _Model, x: int, uses: list[_Use],
               by_id: dict[int, list[_Use]]) -> bool:
    """A CTA-wide sync on barrier x that warps busy at other barriers never reach."""
    full = [u for u in uses if u.full and u.sync]
    if not full:
        return False
    here = {u.warp for u in uses}
    missing = set(range(model.nwarps)) - here
    busy = {u.warp for y, other in by_id.items() if y != x for u in other} & missing
    if busy:
        an.report(Hazard.CTA_BARRIER_DIVERGENT, f"bar.sync {x} waits for every thread of the "
                  f"CTA, but only {_warps(here)} reach barrier {x}; {_warps(busy)} never do, "
                  "and wait at other barriers instead", [("barrier", full[0].site)],
                  dedupe=("divergent", x))
    return bool(busy)


# -- arrivals per iteration -----------------------------------------------------------------------
def _innermost(an: Analysis, block: int) -> int | None:
    """The header of the innermost loop holding `block` (None: no loop)."""
    table = an.cache.get("namedbar.innermost")
    if table is None:
        table = {}
        for header, body in sorted(an.loops, key=lambda hb: -len(hb[1])):
            table.update(dict.fromkeys(body, header))   # inner loops overwrite outer ones
        an.cache["namedbar.innermost"] = table
    return table.get(block)


def _regions(an: Analysis, uses: list[_Use]) -> dict[int | None, list[_Use]]:
    """The uses by the header of their innermost loop (None: outside loops), in body order."""
    regions: dict[int | None, list[_Use]] = {}
    for u in sorted(uses, key=lambda u: (u.site, u.warp)):
        regions.setdefault(_innermost(an, an.cfg.block_of(u.site)), []).append(u)
    return regions


def _balance(an: Analysis, model: _Model, x: int, uses: list[_Use]) -> int | None:
    """Count barrier x's arrivals per region; the warps per phase when nothing was wrong
    and every region was counted, else None."""
    regions = _regions(an, uses)
    if not _nested(an, [r for r in regions if r is not None]):
        return None   # a producer's loop and a consumer's loop: iterations not paired
    per_phase = _one_count(uses)
    if per_phase is None:
        return None   # two counts (a collision), one unknown, or one _counts reported
    for region, here in sorted(regions.items(), key=lambda r: r[0] is None):
        # one finding per barrier: the first region that goes wrong (loops first) says it
        if _region(an, model, x, region, here, per_phase) is not False:
            return None
    return per_phase


def _nested(an: Analysis, headers: list[int]) -> bool:
    """Do the loops at `headers` nest, each inside the next (FlashAttention's tile loop
    round its key-block loop)? Then every warp runs each of them as often as the others
    (loops are taken to run as many iterations in every warp), and each one's iteration
    is counted on its own; loops side by side (a producer's and a consumer's) are not
    paired."""
    bodies = sorted((an.loop_body[h] for h in headers), key=len)
    return all(a < b for a, b in itertools.pairwise(bodies))


def _uniform_branches(an: Analysis, model: _Model, header: int | None, body: frozenset,
                      here: list[_Use]) -> list[int]:
    """The branches of a region worth trying both ways: the same in every thread, and with
    a use of the barrier before they join again (a branch around other code changes no
    count)."""
    cfg = an.cfg
    uses = {cfg.block_of(u.site) for u in here}
    return sorted({j for b in body if (j := cfg.blocks[b].branch) is not None
                   and _innermost(an, b) == header and _uniform(an, model, j)
                   and uses & cfg.reachable(cfg.succs(b), cfg.ipdom[b])})


def _region(an: Analysis, model: _Model, x: int, header: int | None, here: list[_Use],
            per_phase: int) -> bool | None:
    """Check the arrivals on barrier x along the paths of one region (an iteration of the
    loop at `header`, or the kernel outside loops): True when a finding was reported, False
    when the counts are right, None when they were not counted."""
    cfg = an.cfg
    body = an.loop_body[header] if header is not None else frozenset(range(len(cfg.blocks)))
    start = header if header is not None else 0
    # (warp, block) -> the fewest and most arrivals, then syncs, the warp makes there (a
    # use under a guard the warp's analysis could not decide may not run)
    at: dict[tuple[int, int], tuple[int, int, int, int]] = {}
    for u in here:
        b = cfg.block_of(u.site)
        lo, hi, slo, shi = at.get((u.warp, b), (0, 0, 0, 0))
        sure = not u.maybe
        at[(u.warp, b)] = (lo + sure, hi + 1, slo + (sure and u.sync), shi + u.sync)
    uniform = _uniform_branches(an, model, header, body, here)
    if len(uniform) > _UNIFORM_BRANCHES:
        an.note("named barriers", f"barrier {x}: more than {_UNIFORM_BRANCHES} branches on "
                "values the same in every thread decide its arrivals; not counted",
                [("barrier", here[0].site)])
        return None
    warps = sorted({u.warp for u in here})
    syncs = [u for u in here if u.sync]
    arrives = [u for u in here if not u.sync]
    where = "in an iteration of this loop" if header is not None else "outside loops"
    for choice in itertools.product((True, False), repeat=len(uniform)):
        fixed = dict(zip(uniform, choice, strict=True))
        sums = [_paths(an, model, w, start, body, header, at, fixed) for w in warps]
        if any(s is None for s in sums):
            continue   # a warp has no path with these choices
        lo = sum(s[0] for s in sums if s)              # the fewest arrivals of all warps
        lo_sync = max(s[2] for s in sums if s)         # the syncs one warp surely makes
        hi_sync = max(s[3] for s in sums if s)         # the most syncs of one warp
        if syncs and lo < per_phase * lo_sync:
            an.report(Hazard.NAMEDBAR_UNPAIRED, f"on some path {where}, barrier {x} gets "
                      f"{lo * _WARP} threads' arrivals but a sync waits for "
                      f"{per_phase * lo_sync * _WARP}: a partner's bar.arrive is missing on "
                      "that path, and the sync waits forever",
                      [("sync", syncs[0].site)] + [("arrive", u.site) for u in arrives[:1]],
                      dedupe=("unpaired", x))
            return True
        spare = lo - per_phase * hi_sync
        if spare > 0 and (header is not None or spare >= per_phase):
            used = (f"its syncs there consume only {per_phase * hi_sync * _WARP} "
                    f"({per_phase * _WARP} per phase)") if hi_sync else "no sync there waits"
            an.report(Hazard.NAMEDBAR_SURPLUS, f"{where}, barrier {x} gets {lo * _WARP} "
                      f"threads' arrivals but {used}: a phase completes with nobody waiting "
                      "on it, and a later sync passes without its partner",
                      [("arrive", (arrives or syncs)[0].site)]
                      + [("sync", u.site) for u in syncs[:1]],
                      dedupe=("surplus", x))
            return True
    return False


# -- the order of syncs and arrives -----------------------------------------------------------
def _order(an: Analysis, model: _Model, uses: dict[int, list[_Use]],
           per_phase: dict[int, int]) -> None:
    """`named-barrier-deadlock`: run the warps' sequences of syncs and arrives on the
    barriers whose counts are right (the part before the loop, two iterations of it, the
    part after), each warp as far as it can go; a sync still waiting when no warp can move
    waits forever. Only where every warp's sequence is one path: each use on every path of
    its region (the fewest and most uses equal), and its loops nest (each loop's part in
    the run is two of its iterations)."""
    every = [u for xs in uses.values() for u in xs]
    regions = _regions(an, every)
    loops = [r for r in regions if r is not None]
    if not _nested(an, loops) or any(u.maybe for u in every):
        return
    at: dict[tuple[int, int], tuple[int, int, int, int]] = {}
    for u in every:
        b = an.cfg.block_of(u.site)
        n = at.get((u.warp, b), (0, 0, 0, 0))
        at[(u.warp, b)] = (n[0] + 1, n[1] + 1, 0, 0)
    cfg = an.cfg
    for header in regions:
        body = an.loop_body[header] if header is not None else \
            frozenset(range(len(cfg.blocks)))
        # an iteration runs through the body: the loop's exit tests stay in it
        stay = {j: cfg.blocks[b].taken in body for b in body
                if (j := cfg.blocks[b].branch) is not None
                and (cfg.blocks[b].taken in body) != (cfg.blocks[b].fall in body)}
        if not _one_path(an, model, header, body, regions[header], at, stay):
            return   # a warp's sequence depends on the path: not one run to follow
    chain = sorted(loops, key=lambda h: -len(an.loop_body[h]))   # outermost first
    seqs: dict[int, list[tuple[int, _Use]]] = {}
    for w in sorted({u.warp for u in every}):
        mine = sorted(((x, u) for x, xs in uses.items() for u in xs if u.warp == w),
                      key=lambda xu: xu[1].site)
        seqs[w] = _unroll(an, mine, chain)
    stuck = _run(seqs, per_phase)
    if stuck:
        w, (x, u) = min(stuck.items(), key=lambda wu: (wu[1][1].site, wu[0]))
        waiting = {v for v, s in stuck.items() if s[0] == x}
        others = sorted({s[0] for s in stuck.values()} - {x})
        also = "" if not others else (f", while the warps whose arrive it needs wait at "
                                      f"barrier{'s' if len(others) > 1 else ''} "
                                      f"{', '.join(map(str, others))} first")
        an.report(Hazard.NAMEDBAR_DEADLOCK, f"{_warps(waiting)} wait here on barrier {x} "
                  f"forever: in no order can the warps complete this sync{also} (each "
                  "side waits for the other's arrive, which comes after its own sync; "
                  "one side must arrive first, before the loop)", [("sync", u.site)])


def _one_path(an: Analysis, model: _Model, header: int | None, body: frozenset,
              here: list[_Use], at: dict, stay: dict[int, bool]) -> bool:
    """Does each warp make its uses of the region in one sequence: the same number on every
    path, or all of them on the paths where the branches on values the same in every thread
    go one way (FlashAttention's tile loop: a tile index in range, the tile live)?"""
    warps = sorted({u.warp for u in here})
    start = header if header is not None else 0

    def counts(fixed: dict[int, bool]) -> list:
        return [_paths(an, model, w, start, body, header,
                       {k: v for k, v in at.items() if k[0] == w and
                        _innermost(an, k[1]) == header}, fixed) for w in warps]

    if all(got is not None and got[0] == got[1] for got in counts(stay)):
        return True
    uniform = [j for j in _uniform_branches(an, model, header, body, here) if j not in stay]
    if len(uniform) > _UNIFORM_BRANCHES:
        return False
    total = [sum(u.warp == w for u in here) for w in warps]
    return any(all(got is not None and got[0] == got[1] == n
                   for got, n in zip(counts({**stay, **dict(zip(uniform, choice,
                                                                 strict=True))}),
                                     total, strict=True))
               for choice in itertools.product((True, False), repeat=len(uniform)))


def _unroll(an: Analysis, mine: list[tuple[int, _Use]], chain: list[int]
            ) -> list[tuple[int, _Use]]:
    """One warp's uses in the order of a run: those before the outermost loop of `chain`,
    two iterations of it (each with its inner loops unrolled likewise), those after."""
    if not chain:
        return mine
    body = an.loop_body[chain[0]]
    start = min((i for b in body for i in an.cfg.blocks[b].stmts), default=0)
    inside = [xu for xu in mine if an.cfg.block_of(xu[1].site) in body]
    pre = [xu for xu in mine if xu not in inside and xu[1].site < start]
    post = [xu for xu in mine if xu not in inside and xu[1].site >= start]
    once = _unroll(an, inside, chain[1:])
    return pre + once + once + post


def _run(seqs: dict[int, list[tuple[int, _Use]]], per_phase: dict[int, int]
         ) -> dict[int, tuple[int, _Use]]:
    """Run each warp's sequence of (barrier, use) as far as the barriers let it; the warps
    left waiting, with the sync each waits in."""
    pos = dict.fromkeys(seqs, 0)
    arrived = dict.fromkeys(per_phase, 0)
    waiting: dict[int, set[int]] = {x: set() for x in per_phase}
    stuck: dict[int, tuple[int, _Use]] = {}
    moved = True
    while moved:
        moved = False
        for w, seq in seqs.items():
            while w not in stuck and pos[w] < len(seq):
                x, u = seq[pos[w]]
                pos[w] += 1
                moved = True
                arrived[x] += 1
                if arrived[x] == per_phase[x]:   # the phase completes
                    arrived[x] = 0
                    for v in waiting[x]:
                        del stuck[v]
                    waiting[x] = set()
                elif u.sync:
                    stuck[w] = (x, u)
                    waiting[x].add(w)
    return stuck


def _uniform(an: Analysis, model: _Model, j: int) -> bool:
    """Is branch j undecided by the per-thread analysis and the same in every thread?"""
    guard = an.body[j].guard
    return all(t.get(j) is None for t in model.turns) and guard is not None and \
        an.values.data_level(guard) == 0


def _paths(an: Analysis, model: _Model, w: int, start: int, body: frozenset,
           header: int | None, at: dict, fixed: dict[int, bool]
           ) -> tuple[int, int, int, int] | None:
    """(min, max arrivals, min, max syncs) of warp w over the paths from `start` to the end
    of one iteration of the loop at `header` (or from the entry to the kernel's exit), inner
    loops' back edges left out; None when the warp takes no such path."""
    # The edges warp w may take from each block, and whether the path may end there.
    nxt: dict[int, list[int]] = {}
    ends: dict[int, bool] = {}
    order: list[int] = []
    state: dict[int, int] = {}    # 1: on the DFS stack, 2: done
    stack: list[tuple[int, int]] = [(start, 0)]
    while stack:
        b, k = stack.pop()
        if k == 0:
            if state.get(b) == 2:
                continue
            state[b] = 1
            nxt[b], ends[b] = _steps(an, model, w, b, body, header, fixed)
        succ = nxt[b]
        if k < len(succ):
            stack.append((b, k + 1))
            s = succ[k]
            if state.get(s) == 1:
                return None   # a cycle no back edge breaks (irreducible): not counted
            if s not in state:
                stack.append((s, 0))
        else:
            state[b] = 2
            order.append(b)
    inf = 1 << 30
    best: dict[int, tuple[int, int, int, int]] = {}
    for b in order:   # successors first
        lo, hi, slo, shi = (0, 0, 0, 0) if ends[b] else (inf, -1, inf, -1)
        for s in nxt[b]:
            r = best.get(s)
            if r is not None:
                lo, hi, slo, shi = min(lo, r[0]), max(hi, r[1]), min(slo, r[2]), max(shi, r[3])
        if hi < 0:
            continue
        n = at.get((w, b), (0, 0, 0, 0))
        best[b] = (lo + n[0], hi + n[1], slo + n[2], shi + n[3])
    return best.get(start)


def _steps(an: Analysis, model: _Model, w: int, b: int, body: frozenset, header: int | None,
           fixed: dict[int, bool]) -> tuple[list[int], bool]:
    """The blocks warp w may go to from block b within the region, and whether one
    iteration (or the kernel) may end there."""
    cfg = an.cfg
    blk = cfg.blocks[b]
    succs = list(blk.succs)
    if blk.branch is not None:
        turn = model.turns[w].get(blk.branch)
        if turn is None:
            turn = fixed.get(blk.branch)
        if turn is not None:
            succs = [s for s in (blk.taken if turn else blk.fall,) if s is not None]
    out, ends = [], blk.exits
    for s in succs:
        if s == cfg.exit or s not in body:
            ends = True   # the kernel's end, or leaving the loop: the iteration ends
        elif (b, s) in an.back_edges:
            ends = ends or s == header   # an inner loop's back edge: its exit path goes on
        else:
            out.append(s)
    return out, ends


STRUCTURAL.append(_check)
