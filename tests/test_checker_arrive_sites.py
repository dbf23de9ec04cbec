"""Checker: `mbar-arrive-count` where several arrive sites may arrive on one barrier (a ring
stage released in a loop and again after it, as samples/flash_attention.py's K and V rings
and its Q ring do, or two producers). Which phase each site feeds is not known, but a phase
gets a sum of whole sites' arrivals either way: a site whose arrivals alone overshoot the
init count, or a count no sum of the sites' arrivals can make, is reported; counts that some
sum makes are not (a note). Built kernels and their parsed PTX alike."""

from __future__ import annotations

from pathlib import Path

import pytest

from ptxdsl import Kernel, Module, ptx, t
from ptxdsl.checker import Hazard, check_kernel
from ptxdsl.frontend import parse_ptx
from tests.checker_kernels import ids


def sites(name: str, init: int, first: int, second: int, *, loop: bool = True) -> Kernel:
    """A barrier expecting `init` arrivals; threads tid < `first` arrive in a loop of n
    iterations (`loop`; else once), threads `32 <= tid < 32 + second` once after it."""
    k = Kernel(name, reqntid=128)
    n = k.ld_param(k.param(t.u32, "n"))
    bar = k.shared_array(t.b64, 1, align=8, name="bar")
    with k.if_(k.tid.x == 0):
        ptx.mbarrier_init(k, bar, init)
    k.bar_sync(0)

    def first_site() -> None:
        with k.if_(k.tid.x < first):
            ptx.mbarrier_arrive(k, bar, dst="_")
    if loop:
        with k.for_range(0, n):
            first_site()
    else:
        first_site()
    with k.if_(k.and_(k.tid.x >= 32, k.tid.x < 32 + second)):
        ptx.mbarrier_arrive(k, bar, dst="_")
    k.ret()
    return k


def both(k: Kernel) -> tuple[list, list]:
    parsed = parse_ptx(Module([k], check=False).emit())
    return check_kernel(k), parsed.check()


BROKEN = {  # name: (init, first site's threads, second's, what the message says)
    "early": (2, 3, 3, "3 arrivals: the phase completes before all of them arrived"),
    "short": (3, 2, 2, "no sum of the 2 arrive sites' arrivals on it (2 each) makes 3: the "
                       "phase never completes"),
    "apart": (5, 2, 4, "no sum of the 2 arrive sites' arrivals on it (2, 4 each) makes 5"),
}


@pytest.mark.parametrize("name", sorted(BROKEN))
def test_counts_no_sum_of_sites_makes_are_found(name):
    init, first, second, says = BROKEN[name]
    built, parsed = both(sites(f"sites_{name}", init, first, second))
    assert ids(built) == ids(parsed) == [Hazard.MBAR_ARRIVE_COUNT.value], \
        [f.format() for f in built + parsed]
    f = built[0]
    assert f"initialised to expect {init} arrivals per phase" in f.message and says in f.message
    assert f.loc.file == __file__
    assert "ptx.mbarrier_arrive" in Path(__file__).read_text().splitlines()[f.loc.line - 1]


@pytest.mark.parametrize("init,first,second,loop", [
    (3, 3, 3, True),      # the loop's release and the drain: alternatives, 3 each
    (5, 2, 3, True),      # 2 + 3
    (2, 1, 1, False),     # two producers, one arrival each, one phase together
    (4, 2, 2, False),
])
def test_counts_a_sum_of_sites_makes_are_not(init, first, second, loop):
    built, parsed = both(sites("sites_ok", init, first, second, loop=loop))
    assert built == [] and parsed == [], [f.format() for f in built + parsed]


def test_the_sample_with_a_wrong_count_is_found_on_every_ring(monkeypatch):
    """The attention forward's K and V rings are released in the key loop and after it: the
    check reaches them too (it had skipped every barrier with two arrive sites)."""
    import samples.flash_attention as fa
    real = fa.MbarrierRing
    monkeypatch.setattr(fa, "MbarrierRing", lambda k, n, empty_count=1, **kw:
                        real(k, n, empty_count=2, **kw))
    kernel = fa.build_forward(fa.config("bf16", 64, consumers=3))
    found = check_kernel(kernel)
    assert ids(found) == [Hazard.MBAR_ARRIVE_COUNT.value] * 3, [f.format() for f in found]
    assert all("expect 2 arrivals per phase, but 3 threads run this arrive" in f.message
               for f in found)
