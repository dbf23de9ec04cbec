"""The cross-GPU signal protocol across rounds: a wait no rank satisfies, a pad reused before
every rank consumed it (the ops come from `hazards_xgpu`).

A *spin* is a signal-pad read inside a loop (a load, or torch's wait_signal `atom.cas` that
swaps the flag back to 0). A *set* is a pad write other than a store of 0 (st, red, atom,
or a cas to a non-zero value); a *reset* is a store of a constant to the slot a spin reads.

- `signal-wait-unset`: every rank runs the same kernel, so a spin is satisfied only if a set
  of the same region of the pads (`_region`) runs before it on every path from the kernel's
  entry. A branch on the thread's ids (`%tid`, `%laneid`, `%warpid`, with constants and
  parameters: `tid < world`), on a condition the spin itself is under, or on a register its
  own side writes (a memo: `if (done & bit) == 0 { ...; done |= bit }`) does not lose the
  set when either way has it (some thread, or every rank that gets to the wait, or an
  earlier pass, ran it); a loop that does not hold the spin is taken to run at least once
  (a loop over the peers). A set under a rank- or data-dependent condition, or after the
  spin on its path, is the bug.
- `peer-read-unsynchronized`: a peer-buffer read needs, on every path read the same way, a
  wait before it: a spin on a pad region that some set of the kernel writes, or a poll of
  the data at its own address (`hazards_xgpu.polls`; a poll itself needs none).
- `signal-pad-reuse`: a spin whose loop leaves on a comparison of the flag with a constant
  (`== 1`, `!= 0`, `>= 4`) passes at once in the next round or launch, since the flag still
  holds that value, unless the kernel resets the slot after the spin, and then, on every
  path to its end, sets a pad and spins on another slot (a second round: no rank may set the
  slot again before every rank reset it); the paths are the spinning thread's (a second
  `if tid < WORLD` goes the way the first did). A comparison with a value that changes per round
  (an epoch from a parameter or a counter) and a consuming `atom.cas` are round-safe.
"""

from __future__ import annotations

from collections import deque
from typing import Any

from ..instructions.arith import Binary, Mad
from ..instructions.base import sources
from ..instructions.compare import Setp
from ..instructions.move import Cvt, Cvta, Mov
from ..operands import Addr, Reg
from .analysis import STRUCTURAL, Analysis
from .cfg import guard_polarity, solve
from .findings import Hazard
from .hazards_xgpu import innermost_loop, is_reset, polls, root_param, with_copies
from .ops import Op, Role

_THREAD_SREGS = ("tid.", "laneid", "warpid", "ntid.")


def _thread_only(an: Analysis, vn: Any, params: bool = False) -> bool:
    """Is a value number built only from the thread's ids and constants (and, with `params`,
    kernel parameters: the same in every thread of the launch)?"""
    if not isinstance(vn, tuple) or not vn:
        return False
    if vn[0] == "const":
        return True
    if vn[0] == "sreg":
        return str(vn[1]).startswith(_THREAD_SREGS) or vn[1] in an.values.fixed
    if vn[0] == "param":
        return params
    if vn[0] in ("reg", "addr"):
        return False
    kids = [x for x in vn[1:] if isinstance(x, tuple)]
    return bool(kids) and all(_thread_only(an, x, params) for x in kids if x is not None)


def _per_thread(an: Analysis, vn: Any) -> bool:
    """A condition that tells the threads apart (`tid < world`, world a parameter): some
    thread of the CTA takes each way, on every rank alike."""
    def ids(x: Any) -> bool:
        if not isinstance(x, tuple) or not x:
            return False
        if x[0] == "sreg":
            return str(x[1]).startswith(_THREAD_SREGS)
        return any(ids(y) for y in x[1:])
    return _thread_only(an, vn, params=True) and ids(vn)


def _ops(an: Analysis, *roles: Role) -> list[Op]:
    return [op for ops in an.by_block for op in ops if op.role in roles]


def _slot(an: Analysis, op: Op) -> Any:
    a = op.smem
    base = a.base if isinstance(a, Addr) else a
    return an.values.vn(base), a.offset if isinstance(a, Addr) else 0


def _spins(an: Analysis) -> list[tuple[Op, frozenset]]:
    """Each spin with the blocks of the innermost loop holding it."""
    out = []
    for op in _ops(an, Role.XG_PAD_READ):
        body = innermost_loop(an, op.index)
        if body is not None:
            out.append((op, body))
    return out


def _branches(an: Analysis) -> list[tuple[int, Any, bool, set, set, int | None]]:
    """(block, condition's value number, the value that takes the branch, blocks reached when
    taken, when not, the branch's reconvergence) of each two-way branch, computed once per
    kernel."""
    if "xgpu-branches" not in an.cache:
        cfg, out = an.cfg, []
        for blk in cfg.blocks:
            if blk.branch is None or blk.taken is None or blk.fall is None:
                continue
            stop = cfg.ipdom[blk.id]
            pred, taken_when = guard_polarity(an.body[blk.branch].guard)
            out.append((blk.id, an.values.vn(pred), taken_when,
                        cfg.reachable([blk.taken], stop), cfg.reachable([blk.fall], stop),
                        stop))
        an.cache["xgpu-branches"] = out
    return an.cache["xgpu-branches"]


def _conditions(an: Analysis, i: int) -> dict:
    """The branch conditions statement i runs under (and its guard), as value number -> the
    value the condition has wherever i runs."""
    b = an.cfg.block_of(i)
    out = {}
    for _blk, vn, taken_when, taken, fall, _stop in _branches(an):
        if (b in taken) != (b in fall):
            out[vn] = taken_when if b in taken else not taken_when
    guard = an.body[i].guard
    if guard is not None:
        pred, when = guard_polarity(guard)
        out[an.values.vn(pred)] = when
    return out


def _region(an: Analysis, x: Any, depth: int = 0) -> int | None:
    """The constant part of an address's linear form, in bytes: `pad + 4 * (rank + 8)` and
    `pads[p] + 4 * (tid + 8)` are both 32. A signal sets a peer's slot of its own rank, a
    wait reads this rank's slot of the peer's: the per-rank terms differ, the region they
    index (the barrier's slots) does not. Ranks, thread ids, loop counters and loaded
    pointers count 0; None where the form is not linear (it matches any region)."""
    if isinstance(x, Addr):
        base = _region(an, x.base, depth)
        return None if base is None else base + x.offset
    c = an.values.const(x)
    if c is not None:
        return c
    defs = an.values.defs.get(x, ()) if isinstance(x, Reg) else ()
    if len(defs) != 1 or depth > 24:
        return 0
    insn: Any = an.body[defs[0]].insn

    def part(y: Any) -> int | None:
        return _region(an, y, depth + 1)
    if isinstance(insn, Mov | Cvt | Cvta):
        return part(insn.a)
    if isinstance(insn, Binary) and insn.op in ("add", "sub", "mul", "shl"):
        a, b = part(insn.a), part(insn.b)
        kb = an.values.const(insn.b)
        if insn.op in ("add", "sub"):
            return None if a is None or b is None else a + b if insn.op == "add" else a - b
        ka = an.values.const(insn.a)
        if kb is not None and a is not None:
            return a * kb if insn.op == "mul" else a << kb
        return b * ka if ka is not None and b is not None and insn.op == "mul" else None
    if isinstance(insn, Mad):
        c, kb, ka = part(insn.c), an.values.const(insn.b), an.values.const(insn.a)
        if c is None:
            return None
        if kb is not None:
            a = part(insn.a)
            return None if a is None else a * kb + c
        if ka is not None:
            b = part(insn.b)
            return None if b is None else b * ka + c
        return None
    return 0


def _same_region(a: int | None, b: int | None) -> bool:
    return a is None or b is None or a == b


def _set_runs(an: Analysis, op: Op, conds: dict) -> bool:
    guard = an.body[op.index].guard
    if guard is None:
        return True
    vn = an.values.vn(guard_polarity(guard)[0])
    return vn in conds or _thread_only(an, vn)


def _memo(an: Analysis, blk: int, region: set[int]) -> bool:
    """Does the branch at the end of block `blk` test a register that its own region writes
    (`if (waited & bit) == 0 { wait; waited |= bit }`)? Its other way runs only once the
    region ran for that value: a loop's later iteration, after the first took the region.
    (A loop's own exit test, whose region leads back to it, is no such branch.)"""
    if blk in region:
        return False
    seen: set[int] = set()
    todo: list[Any] = [guard_polarity(an.body[an.cfg.blocks[blk].branch].guard)[0]]
    while todo and len(seen) < 32:     # nearest registers first
        r = todo.pop(0)
        if not isinstance(r, Reg) or id(r) in seen:
            continue
        seen.add(id(r))
        where = {an.cfg.block_of(i) in region for i in an.values.defs.get(r, ())}
        if where == {True, False}:
            return True
        for i in an.values.defs.get(r, ()):
            todo += sources(an.body[i].insn)
    return False


def _either_ways(an: Analysis) -> list[tuple[Any, bool, int, tuple[set[int], set[int],
                                                                     set[int]], int]]:
    """(condition, whether some thread takes each way whatever the statement asked about,
    reconvergence, (taken way's preds of it, fall way's, the region's blocks), the branch's
    block) of each two-way branch, computed once per kernel."""
    if "xgpu-ways" not in an.cache:
        cfg, out = an.cfg, []
        for blk, vn, _when, taken, fall, stop in _branches(an):
            if stop is None or stop >= len(cfg.blocks):
                continue
            branch = cfg.blocks[blk]
            t = taken | ({blk} if branch.taken == stop else set())
            f = fall | ({blk} if branch.fall == stop else set())
            always = _per_thread(an, vn) or _memo(an, blk, taken | fall)
            out.append((vn, always, stop, (t, f, taken | fall | {blk}), blk))
        an.cache["xgpu-ways"] = out
    return an.cache["xgpu-ways"]


def _runs_before(an: Analysis, at: int, ops: list[Op], after: bool = False) -> bool:
    """Has one of `ops` run, on every path from the entry to statement `at` (see the module's
    text)? At the reconvergence of a branch that some thread takes each way (on the thread's
    ids, on a condition `at` is under, or a memo: `_memo`) one way suffices; within each
    way, every path counts. A loop that does not hold `at` is followed for its first
    iteration only (its back edges say nothing), and leaves from its header with what that
    iteration set.

    With `after`, the question turned around: does one of `ops` run after `at` on every path
    from it to the kernel's end (a write followed by its signal)? The same ways count, but
    not a branch whose region holds `at`: its other way is a thread that never ran `at`."""
    cfg = an.cfg
    conds = _conditions(an, at)
    at_block = cfg.block_of(at)
    first: dict[int, int] = {}
    for op in ops:
        b = cfg.block_of(op.index)
        if _set_runs(an, op, conds) and not (after and b == at_block and op.index < at):
            first[b] = min(first.get(b, op.index), op.index)
    # per reconvergence block: (taken way's preds, fall way's preds, blocks of the region)
    either: dict[int, list[tuple[set[int], set[int], set[int]]]] = {}
    for vn, always, stop, way, blk in _either_ways(an):
        if (always or vn in conds) and not (after and at_block != blk and at_block in way[2]):
            either.setdefault(stop, []).append(way)
    for ways in either.values():
        ways.sort(key=lambda w: -len(w[2]))      # outermost first
    other = {h: body for h, body in an.loops if at_block not in body}
    latches = {h: [b for b, hh in an.back_edges if hh == h] for h in other}
    outs: dict[int, bool] = {}

    def transfer(b: int, state: Any) -> bool:
        if after and b == at_block:     # (what ran before `at` does not count)
            outs[b] = b in first
        else:
            outs[b] = (state[2] if isinstance(state, tuple) else state) or b in first
        return outs[b]

    def edge(p: int, b: int, state: bool) -> tuple[int, int, bool]:
        if b in other and p in latches[b]:
            return b, p, True     # (neutral: the header keeps what its entry brought)
        if p in other and b not in other[p]:
            state = state or bool(latches[p]) and all(outs.get(x, False) for x in latches[p])
        return b, p, state

    def merge(got: list[tuple[int, bool]], ways: list) -> bool:
        if not ways:
            return all(v for _p, v in got)
        t, f, region = ways[0]
        inner = [w for w in ways[1:] if w[2] <= region]
        outer = [w for w in ways[1:] if not w[2] <= region]
        sides = [[x for x in got if x[0] in side] for side in (t, f)]
        rest = [x for x in got if x[0] not in region]
        known = [merge(side, [w for w in inner if w[2] & {p for p, _ in side}])
                 for side in sides if side]
        return (any(known) if known else True) and merge(rest, outer)

    def join(states: list[Any], _united: list[bool]) -> bool:
        pairs = [(x[1], x[2]) for x in states if isinstance(x, tuple)]
        entry = [x for x in states if not isinstance(x, tuple)]
        b = next(x[0] for x in states if isinstance(x, tuple))
        return all(entry) and merge(pairs, either.get(b, []))

    ins = solve(cfg, after, transfer, join, edge=edge)
    if after:
        return all(outs.get(b.id, True) for b in cfg.blocks if b.exits)
    got = ins[at_block]
    return bool(got[2] if isinstance(got, tuple) else got) or \
        first.get(at_block, at) < at


def _set_before(an: Analysis, spin: Op, sets: list[Op]) -> bool:
    """Has a set of the spin's region run on every path from the entry to the spin?"""
    region = _region(an, spin.smem)
    return _runs_before(an, spin.index, [op for op in sets
                                         if _same_region(_region(an, op.smem), region)])


def _compared_with(an: Analysis, spin: Op, body: frozenset) -> tuple[bool, Any] | None:
    """(whether the value is a constant, the other operand) of the comparison of the spun-on
    flag that its loop branches on; None when no setp in the loop compares it."""
    flag = spin.result
    if not isinstance(flag, Reg):
        return None
    names = with_copies(an, [flag], body)      # `cvt.u64.u32` of the flag is the flag
    for b in sorted(body):
        for i in an.cfg.blocks[b].stmts:
            insn: Any = getattr(an.body[i], "insn", None)
            if isinstance(insn, Setp) and (id(insn.a) in names) != (id(insn.b) in names):
                other = insn.b if id(insn.a) in names else insn.a
                return an.values.const(other) is not None, other
    return None


def _rounds_after(an: Analysis, spin: Op) -> tuple[int, int | None]:
    """The least progress over the paths from the spin to the kernel's end: 0 no reset of
    its slot, 1 reset, 2 reset then a set, 3 then a spin on another slot (round-safe); and
    the reset's statement where one was seen."""
    cfg, slot = an.cfg, _slot(an, spin)
    spins = {op.index for op, _ in _spins(an)}
    reset_at: list[int] = []

    def step(state: int, b: int, after: int = -1) -> int:
        for op in an.by_block[b]:
            if op.index <= after:
                continue
            if op.role is Role.XG_PAD_WRITE:
                if state == 0 and op.field in ("st", "atom.exch") \
                        and an.values.const(op.value) is not None and _slot(an, op) == slot:
                    state = 1
                    reset_at.append(op.index)
                elif state == 1 and not is_reset(an, op):
                    state = 2
            elif op.role is Role.XG_PAD_READ and state == 2 and op.index in spins \
                    and _slot(an, op) != slot:
                state = 3
        return state

    start = cfg.block_of(spin.index)
    least = 3
    ins: dict[int, int] = {}
    work: deque[tuple[int, int]] = deque()

    # The thread that spun takes its thread-id conditions the same way again (a second
    # `if tid < WORLD` after the first): the other way is some other thread's path.
    conds = _conditions(an, spin.index)
    ways = {blk: (vn, when) for blk, vn, when, _t, _f, _s in _branches(an)
            if vn in conds and _thread_only(an, vn)}

    def leave(b: int, out: int) -> None:
        nonlocal least
        blk = cfg.blocks[b]
        if blk.exits:
            least = min(least, out)
        succs = cfg.succs(b)
        if b in ways:     # (ways holds two-way branches only: taken and fall are blocks)
            vn, when = ways[b]
            succs = tuple(x for x in (blk.taken if conds[vn] == when else blk.fall,)
                          if x is not None)
        for s in succs:
            if s < len(cfg.blocks) and (s not in ins or out < ins[s]):
                ins[s] = out
                work.append((s, out))

    leave(start, step(0, start, spin.index))
    while work:
        b, st = work.popleft()
        if ins.get(b) != st:
            continue
        leave(b, step(st, b))
    return least, (reset_at[0] if reset_at else None)


def _host_set(an: Analysis, op: Op) -> bool:
    """Is `op` an access to a signal pad the host sets too (the context's
    `host_signal_pads`)?"""
    return an.ctx.is_host_signal_pad(root_param(an, op.smem), an.kernel)


def rounds(an: Analysis) -> None:
    """`signal-wait-unset` and `signal-pad-reuse` for each spin (module text)."""
    if Role.XG_PAD_READ not in an.roles:
        return
    sets = [op for op in _ops(an, Role.XG_PAD_WRITE) if not is_reset(an, op)]
    for spin, body in _spins(an):
        if not _host_set(an, spin) and not _set_before(an, spin, sets):
            an.report(Hazard.SIGNAL_WAIT_UNSET, "every rank runs this kernel, and on some "
                      "path to this wait no signal-pad set has run before it (a set under a "
                      "rank- or data-dependent condition the wait is not under, or only "
                      "after the wait): the ranks on that path wait for each other forever",
                      [("wait", spin.index)], dedupe=spin.index)
        if spin.field == "cas":
            continue
        cmp = _compared_with(an, spin, body)
        if cmp is None:
            an.note("signal-pad-reuse", "no comparison of the flag found in its wait loop",
                    [("wait", spin.index)], dedupe=spin.index)
            continue
        if not cmp[0]:
            continue
        least, reset = _rounds_after(an, spin)
        if least == 0:
            an.report(Hazard.SIGNAL_PAD_REUSE, "the wait compares the flag with the "
                      f"constant {an.values.const(cmp[1])} and nothing resets the slot after "
                      "it: in the next round (or launch) the flag still holds that value and "
                      "the wait passes before the peer signalled", [("wait", spin.index)],
                      dedupe=spin.index)
        elif least < 3:
            an.report(Hazard.SIGNAL_PAD_REUSE, "the flag is reset after the wait, but on "
                      "some path no further round of signals follows before the kernel ends: "
                      "a fast rank's next set may land before this rank's reset and be "
                      "erased", [("wait", spin.index), ("reset", reset)], dedupe=spin.index)


def unsynchronized(an: Analysis) -> None:
    """`peer-read-unsynchronized`: a peer-buffer read that no wait precedes on some path.
    A wait is a spin on a pad region some pad write of the kernel sets (its memory order is
    `peer-consume-no-sys-acquire`'s to judge), or, for reads of the address it reads, a poll
    of the data itself (`hazards_xgpu.polls`: a poll is its own wait); the paths are
    `_runs_before`'s."""
    if Role.XG_READ not in an.roles:
        return
    sets = [_region(an, op.smem) for op in _ops(an, Role.XG_PAD_WRITE) if not is_reset(an, op)]
    waits = [op for op, _ in _spins(an)
             if _host_set(an, op) or any(_same_region(_region(an, op.smem), r) for r in sets)]
    polled = polls(an)
    done: dict[Any, bool] = {}
    for op in sorted(_ops(an, Role.XG_READ), key=lambda o: o.index):
        if op.index in polled:
            continue
        slot = _slot(an, op) if op.field != "tma" else None
        same = tuple(p for p in polled.values() if _slot(an, p) == slot)
        # reads in one block under the same conditions share their answer: the first is named
        key = (an.cfg.block_of(op.index), tuple(_conditions(an, op.index).items()),
               tuple(p.index for p in same))
        if key in done:
            continue
        done[key] = _runs_before(an, op.index, waits + list(same))
        if not done[key]:
            what = "a TMA load through a peer's tensor map" if op.field == "tma" else \
                "a read of a peer buffer"
            an.report(Hazard.PEER_READ_UNSYNCHRONIZED, f"this is {what}, and on some path to "
                      "it no signal-pad wait has run (a spin on a pad some rank sets, or a "
                      "poll of this address's data): it may read the buffer before the rank "
                      "that writes it has signalled",
                      [("read", op.index)], dedupe=("unsynchronized",) + key)


STRUCTURAL.append(rounds)
STRUCTURAL.append(unsynchronized)
