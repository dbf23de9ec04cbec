"""Checker: the round-robin ping-pong of samples/flash_attention.py (three consumer
warpgroups at head dim 64, two elsewhere) with one mistake each. A stand-alone kernel with
the sample's skeleton (consumer c waits its turn on barrier PING + c with `bar.sync id, 256`
and hands it on with `bar.arrive` on the next consumer's; the last consumer primes consumer
0's barrier; consumer 0 consumes the last arrive at the end; epilogue barriers 1..n with 128
threads), flat or with the sample's tile loop round its key-block loop; then the sample
itself, patched. A dropped prime, a turn handed to the wrong barrier or to oneself, 384
threads on one side, an epilogue id on a turn barrier, a ring's empty count that is not the
consumers' are each reported; so is the deadlock of the prime and the final consume both
dropped (every count right, only the order wrong).

What is not a hazard, and checks clean on purpose: a prime by another consumer than the last
(any arrive of 128 other threads completes consumer 0's first phase), a round robin in
another order (0 -> 2 -> 1), and the final consume dropped: the PTX ISA releases a barrier
at `exit` only for count-less (all-thread) barriers and says nothing of a counted barrier's
phase left part-arrived when the CTA ends; no thread waits on it, and each CTA starts with
its own sixteen barriers, so the pending arrive is untidy, not a hang (two-consumer FA3
leaves one pending too: tests/namedbar_kernels.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

import samples.flash_attention as fa
from ptxdsl import Kernel, Module, t
from ptxdsl.checker import Hazard, check_kernel, check_module
from ptxdsl.frontend.parser import parse_ptx
from tests.checker_kernels import clean, here, ids

UNPAIRED, SURPLUS, COUNT, COLLISION, DEADLOCK = (h.value for h in (
    Hazard.NAMEDBAR_UNPAIRED, Hazard.NAMEDBAR_SURPLUS, Hazard.NAMEDBAR_COUNT,
    Hazard.NAMEDBAR_COLLISION, Hazard.NAMEDBAR_DEADLOCK))
LINES: dict[str, int] = {}
PING = 4   # the sample's first ping-pong barrier with three consumers (1..3: the epilogues')


def roundrobin(n: int, variant: str = "ok", *, nested: bool = False) -> Kernel:
    """CTA of 128 * (n + 1) threads: warpgroup 0 the producer (no named barrier), consumers
    c = 0 .. n-1 in warpgroups 1 .. n, as samples/flash_attention.py runs them; `nested`: the
    turns of a tile's first key block in the tile loop, the others' in a loop inside it."""
    k = Kernel(f"rr{n}_{variant}", reqntid=128 * (n + 1))
    tiles = k.ld_param(k.param(t.u32, "tiles"))
    nk = k.ld_param(k.param(t.u32, "nk"))
    acc = k.mov(0, dst=k.reg(t.u32, "acc"))
    wg = k.shr(k.tid.x, 7)
    with k.if_(wg != 0):
        c = k.sub(wg, 1)
        mine = k.add(c, PING)
        step = 2 if variant == "order_021" else 1
        nxt = k.rem(k.add(c, step), n)
        if variant == "self_handoff":          # consumer 1 hands its turn to itself
            nxt = k.selp(c, nxt, c == 1, type=t.u32)
        elif variant == "handoff_skips":       # consumer 0 hands it to consumer 2, not 1
            nxt = k.selp(2, nxt, c == 0, type=t.u32)
        other = k.add(nxt, PING)
        primer = {"prime_by_first": 0, "prime_by_middle": 1}.get(variant, n - 1)
        if variant not in ("no_prime", "no_prime_no_final"):
            with k.if_(c == primer):
                k.bar_arrive(PING + (variant == "prime_wrong_barrier"), 256)

        def turn() -> None:
            k.bar_sync(mine, 384 if variant == "sync384" else 256)
            k.add(acc, 1, dst=acc)             # stands for the turn's wgmma
            k.bar_arrive(other, 384 if variant == "arrive384" else 256)

        if nested:
            with k.for_range(0, tiles):
                turn()
                with k.for_range(1, nk):
                    turn()
        else:
            with k.for_range(0, nk):
                turn()
        # this consumer's epilogue barrier: 1 .. n, below the turns' (the sample's PING is
        # n + 1); moved up to PING - n + 1 .. PING, the last one is consumer 0's turn barrier
        k.bar_sync(k.add(wg, PING - n) if variant == "epilogue_collides" else wg, 128)
        if variant not in ("no_final", "no_prime_no_final"):
            with k.if_(c == 0):
                LINES["final"] = here() + 1
                k.bar_sync(PING, 384 if variant == "sync384" else 256)
    return k


SHAPES = [pytest.param(n, nested, id=f"{n}c-{'nested' if nested else 'flat'}")
          for n in (2, 3) for nested in (False, True)]

# variant -> the findings with (2, 3) consumers, flat or nested alike
BROKEN = {
    # consumer 0's first sync waits for an arrive nobody makes: outside loops its final
    # consume is one warpgroup short
    "no_prime": ([UNPAIRED], [UNPAIRED]),
    # both dropped, every count is right again: consumer 0 waits for consumer n-1's
    # arrive, which follows its sync, which waits for ... consumer 0's arrive (the order)
    "no_prime_no_final": ([DEADLOCK], [DEADLOCK]),
    # the last consumer primes consumer 1's barrier: consumer 0's is one arrive short
    "prime_wrong_barrier": ([UNPAIRED], [UNPAIRED]),
    # consumer 1's barrier gets three warpgroups' arrivals an iteration (surplus); with two
    # consumers, consumer 0's gets one (unpaired); with three, consumer 2's gets none but
    # its own sync's (count: no warps but its own ever arrive)
    "self_handoff": ([SURPLUS, UNPAIRED], [COUNT, SURPLUS]),
    # consumers 0 and 2 both hand to consumer 2's barrier, none to consumer 1's
    "handoff_skips": ([], [COUNT, SURPLUS]),   # (three consumers only)
    # 384 on one side: only two warpgroups (256 threads) ever use each turn barrier
    "sync384": ([COUNT] * 2, [COUNT] * 3),
    "arrive384": ([COUNT] * 2, [COUNT] * 3),
    # the last epilogue barrier on consumer 0's turn barrier, with 128 threads against 256
    "epilogue_collides": ([COLLISION], [COLLISION]),
}
CLEAN = ["ok", "prime_by_middle", "prime_by_first", "order_021", "no_final"]


def _cases(variants) -> list:
    """(variant, n, nested) for each variant the round robin of n consumers can have."""
    return [pytest.param(v, n, nested, id=f"{v}-{n}c-{'nested' if nested else 'flat'}")
            for v in variants for n in (2, 3) for nested in (False, True)
            if n == 3 or v not in ("prime_by_middle", "order_021", "handoff_skips")]


@pytest.mark.parametrize("variant,n,nested", _cases(CLEAN))
def test_correct_round_robins_check_clean(variant, n, nested):
    clean(roundrobin(n, variant, nested=nested))


@pytest.mark.parametrize("variant,n,nested", _cases(sorted(BROKEN)))
def test_a_broken_round_robin_is_reported(variant, n, nested):
    found = check_kernel(roundrobin(n, variant, nested=nested))
    assert ids(found) == BROKEN[variant][n - 2], [f.format() for f in found]
    assert all(f.loc.file == __file__ for f in found), [f.format() for f in found]


@pytest.mark.parametrize("n,nested", SHAPES)
def test_a_missing_prime_names_consumer_zeros_last_sync(n, nested):
    # Nested: the turns live in two loops, one inside the other (the sample's tile loop
    # round its key-block loop); each loop's iteration and the rest are counted apart.
    (f,) = check_kernel(roundrobin(n, "no_prime", nested=nested))
    assert f.message.startswith("on some path outside loops, barrier 4 gets 128 threads' "
                                "arrivals but a sync waits for 256"), f.format()
    assert f.loc.file == __file__ and f.loc.line == LINES["final"], f.format()


# -- the sample, patched ---------------------------------------------------------------------
def _sample(consumers: int) -> list:
    kernel = fa.build_forward(fa.config("bf16", 64, consumers=consumers))
    return check_module(Module([kernel], target="sm_90a"))


@pytest.mark.parametrize("consumers", [3, 2])
def test_the_sample_without_its_prime(monkeypatch, consumers):
    # The prime is the one bar.arrive with a constant id (the turns' ids are registers).
    real = Kernel.bar_arrive
    monkeypatch.setattr(Kernel, "bar_arrive", lambda self, id, count: None
                        if isinstance(id, int) else real(self, id, count))
    found = _sample(consumers)
    assert ids(found) == [UNPAIRED], [f.format() for f in found]
    ping = fa.config("bf16", 64, consumers=consumers).ping
    assert f"outside loops, barrier {ping} gets 128 threads' arrivals" in found[0].message


def test_the_sample_without_its_prime_and_its_final_consume(monkeypatch):
    # Every count is right (the two made one phase of consumer 0's barrier): only the order
    # shows that consumer 0's first turn waits forever. The turns run under the tile loop's
    # `index < ntiles` and `tile.live` (the same in every thread), taken for the run.
    ping = fa.config("bf16", 64).ping
    arrive, sync = Kernel.bar_arrive, Kernel.bar_sync
    monkeypatch.setattr(Kernel, "bar_arrive", lambda self, id, count: None
                        if isinstance(id, int) else arrive(self, id, count))
    monkeypatch.setattr(Kernel, "bar_sync", lambda self, id=0, count=None: None
                        if isinstance(id, int) and id == ping else sync(self, id, count))
    found = _sample(3)
    assert ids(found) == [DEADLOCK], [f.format() for f in found]
    at = found[0].loc.caller   # the patched bar_sync's caller: consumer 0's first turn
    assert at is not None and at.file == fa.__file__, found[0].format()
    assert "k.bar_sync(self.mine, 256)" in Path(at.file).read_text().splitlines()[at.line - 1]
    assert f"warps 4-7 wait here on barrier {ping} forever" in found[0].message
    assert f"wait at barriers {ping + 1}, {ping + 2} first" in found[0].message


def test_the_sample_with_a_consumer_handing_its_turn_to_itself(monkeypatch):
    real = fa.Consumer.__init__

    def init(self, *args, **kwargs):
        real(self, *args, **kwargs)
        self.other = self.k.selp(self.mine, self.other, self.c == 1, type=t.u32)

    monkeypatch.setattr(fa.Consumer, "__init__", init)
    found = _sample(3)
    assert ids(found) == [COUNT, SURPLUS], [f.format() for f in found]


@pytest.mark.parametrize("consumers,empty", [(3, 2), (2, 3)])
def test_the_sample_with_a_ring_freed_by_the_wrong_count(monkeypatch, consumers, empty):
    # Each consumer warpgroup's leader frees a stage: 3 arrivals on a barrier expecting 2
    # complete a phase early and run into the next (the producer overwrites a stage still
    # read); 2 on one expecting 3 never complete it (the producer hangs).
    real = fa.MbarrierRing
    monkeypatch.setattr(fa, "MbarrierRing", lambda k, n, empty_count=1, **kw:
                        real(k, n, empty_count=empty, **kw))
    found = _sample(consumers)
    assert found and {f.id for f in found} == {Hazard.MBAR_ARRIVE_COUNT.value}, \
        [f.format() for f in found]
    effect = "completes before all of them arrived" if empty < consumers else "never completes"
    assert f"expect {empty} arrivals per phase, but {consumers} threads run this arrive" \
        in found[0].message and effect in found[0].message


@pytest.mark.parametrize("variant,n,nested",
                         [c for c in _cases(["ok", *sorted(BROKEN)]) if c.values[1] == 3])
def test_parsed_ptx_gives_the_same_findings(variant, n, nested):
    k = roundrobin(n, variant, nested=nested)
    parsed = parse_ptx(Module([k], check=False).emit())
    assert ids(parsed.check()) == ids(check_kernel(k))
