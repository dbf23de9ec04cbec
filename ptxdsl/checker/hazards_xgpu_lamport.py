"""Data as its own flag (the "Lamport" protocol of one-shot all-reduces): no signal pad.
Every receive slot starts filled with a sentinel word that no sender stores (-0.0: a sender
turns -0.0 into +0.0 first); a sender stores its data straight into the peer's slot with a
strong `.sys` store, and the receiver spins on its own slot until no word of it is the
sentinel, then stores the sentinel back for the next call::

    st.relaxed.sys.global.v4.b32 [peer + slot_r], {a, b, c, d};     // for every rank
    $L__poll:
    ld.relaxed.sys.global.v4.b32 {e, f, g, h}, [own + slot_q];
    setp.eq.b32 p, e, S; setp.eq.or.b32 p, f, S, p; ...
    @p bra $L__poll;

A *poll* (`hazards_xgpu.polls`) is a peer-buffer read inside a loop that one of its exits
decides by comparing a word the read loaded with a constant. It is its own wait, and the
wait of later reads of the same address (`peer-read-unsynchronized`, in
`hazards_xgpu_rounds`). Two rules judge the protocol's memory order:

- `peer-poll-weak`: a poll whose load is weak (a plain `ld`, no `.relaxed`/`.acquire`/
  `.volatile`) or narrower than `.sys`: it may be served from L1 or hoisted out of the loop
  and never see the peer's store, or see it torn.
- `peer-write-unpublished`: a peer-buffer write that is not a strong `.sys` access (a plain
  `st`, a `red` at its default `.gpu` scope, a TMA store) after which, on some path to the
  kernel's end, no signal (a pad set) runs: nothing tells the peer the data arrived, and a
  reader that polls the data races with it. The paths are `_runs_before`'s, turned around.
"""

from __future__ import annotations

from typing import Any

from .analysis import STRUCTURAL, Analysis
from .findings import Hazard
from .hazards_xgpu import is_reset, polls, shown, strong_sys
from .hazards_xgpu_rounds import _conditions, _ops, _runs_before
from .ops import Op, Role


def poll_weak(an: Analysis) -> None:
    """`peer-poll-weak`: each poll whose load is not a strong `.sys` access."""
    if Role.XG_READ not in an.roles:
        return
    for op in polls(an).values():
        if strong_sys(op):
            continue
        if op.sem == "weak":
            why = ("weak (no .sem): it may be served from L1 or hoisted out of the loop and "
                   "never see the peer's store, and its words may be torn")
        else:
            why = (f"{shown(op)}: a scope narrower than .sys leaves the other GPU's store "
                   "out, so nothing says the load ever sees it")
        an.report(Hazard.PEER_POLL_WEAK, "this load polls a peer buffer until the data "
                  f"another GPU stores there replaces the sentinel, but it is {why}",
                  [("poll", op.index)])


def _how(op: Op) -> str:
    if op.field == "tma":
        return "a TMA store (weak)"
    return shown(op)


def unpublished(an: Analysis) -> None:
    """`peer-write-unpublished`: a peer-buffer write that is not a strong `.sys` access and
    that no signal follows on some path to the kernel's end."""
    if Role.XG_WRITE not in an.roles:
        return
    signals = [op for op in _ops(an, Role.XG_PAD_WRITE) if not is_reset(an, op)]
    done: dict[Any, bool] = {}
    for op in sorted(_ops(an, Role.XG_WRITE), key=lambda o: o.index):
        if strong_sys(op):
            continue
        b = an.cfg.block_of(op.index)
        # writes of one block under the same conditions, with the same signals after them
        # there, share their answer: the first is named
        later = tuple(s.index for s in signals
                      if an.cfg.block_of(s.index) == b and s.index > op.index)
        key = (b, tuple(_conditions(an, op.index).items()), later)
        if key in done:
            continue
        done[key] = _runs_before(an, op.index, signals, after=True)
        if not done[key]:
            an.report(Hazard.PEER_WRITE_UNPUBLISHED, "this write into a peer buffer is "
                      f"{_how(op)}, and on some path from it to the kernel's end no "
                      "signal-pad set follows: nothing tells the peer the data arrived, and "
                      "a reader that polls the data itself races with a store that is not a "
                      "strong .sys one", [("write", op.index)],
                      dedupe=("unpublished",) + key)


STRUCTURAL.append(poll_weak)
STRUCTURAL.append(unpublished)
