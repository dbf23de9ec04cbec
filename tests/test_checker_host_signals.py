"""Checker: signal pads the host sets too (`host_signal_pads=`, issue 33). A kernel that waits
for data a peer's copy engines pushed (`SymmetricBuffers.put`, then `.signal` on the same
stream) has no signal-pad set of its own: without the context its spin is
`signal-wait-unset`; with it the spin is a wait, and the rules that judge the wait itself
still apply (a weak spin, a read no spin precedes, a read under a rank-dependent wait).
Built kernels and their parsed PTX alike; samples/allgather_gemm.py's kernels, whose
copy-engine calls skip the in-kernel signal, need the context."""

from __future__ import annotations

import runpy
from pathlib import Path

import pytest

from ptxdsl import Module, t
from ptxdsl.checker import Hazard, check_kernel, check_module
from ptxdsl.frontend import parse_ptx
from tests import xgpu_kernels as xk
from tests.checker_kernels import ids

HOST = {**xk.CONTEXT, "host_signal_pads": ["signal_pad_ptrs"]}
SAMPLE = Path(__file__).resolve().parent.parent / "samples" / "allgather_gemm.py"


def host_fed(variant: str = "ok"):
    """Thread p (< WORLD) waits until rank p's host wrote this launch's epoch into slot p
    of this rank's pad, then every thread sums the WORLD slots of this rank's buffer the
    peers' copy engines filled. Variants: "weak_spin" (the flag read without .acquire),
    "no_wait" (no spin), "rank_wait" (only rank 0 spins)."""
    s = xk.Sym(f"host_fed_{variant}")
    k = s.k
    if variant != "no_wait":
        pad = s.ptr(s.pads, s.rank)
        sem, scope = ("relaxed", "gpu") if variant == "weak_spin" else ("acquire", "sys")

        def spin():
            with k.if_(s.tid < xk.WORLD), k.loop():
                got = k.ld(s.at(pad, s.tid), type=t.u32, space="global", sem=sem, scope=scope)
                k.break_(k.setp("ge", got, s.epoch))
        if variant == "rank_wait":
            with k.if_(s.rank == 0):
                spin()
        else:
            spin()
    k.bar_sync(0)
    own = s.ptr(s.bufs, s.rank)
    acc = k.mov(0.0, type=t.f32)
    for p in range(xk.WORLD):
        k.add(acc, k.ld(s.at(own, k.add(s.tid, p * xk.THREADS)), type=t.f32,
                        space="global"), dst=acc)
    k.st(s.at(s.out, s.tid), acc, type=t.f32, space="global")
    return k





def both(k, **context) -> tuple[list[str], list[str]]:
    """The findings' ids from the built kernel and from its parsed PTX."""
    return (ids(check_kernel(k, **context)),
            ids(check_module(parse_ptx(Module([k]).emit()), **context)))


def test_a_spin_only_the_host_satisfies_is_unset_without_the_context():
    built, parsed = both(host_fed(), **xk.CONTEXT)
    assert Hazard.SIGNAL_WAIT_UNSET.value in built
    assert parsed == built


def test_with_host_signal_pads_the_spin_is_a_wait():
    assert both(host_fed(), **HOST) == ([], [])


@pytest.mark.parametrize("variant, hazard", [
    ("weak_spin", Hazard.PEER_CONSUME_NO_SYS_ACQUIRE),   # the host's barrier needs an acquire
    ("no_wait", Hazard.PEER_READ_UNSYNCHRONIZED),        # nothing waited for the copies
    ("rank_wait", Hazard.PEER_READ_UNSYNCHRONIZED),      # ranks other than 0 read at once
])
def test_the_wait_itself_is_still_judged(variant, hazard):
    built, parsed = both(host_fed(variant), **HOST)
    assert hazard.value in built, built
    assert Hazard.SIGNAL_WAIT_UNSET.value not in built
    assert parsed == built


def test_host_signal_pads_only_covers_the_pads_it_names():
    # the pads named as peer buffers' neighbours but not as set by the host: still unset
    context = {**xk.CONTEXT, "host_signal_pads": {"some_other_kernel": ["signal_pad_ptrs"]}}
    assert Hazard.SIGNAL_WAIT_UNSET.value in both(host_fed(), **context)[0]


def test_unknown_context_names_the_new_key():
    with pytest.raises(TypeError, match="host_signal_pads="):
        check_kernel(host_fed(), **xk.CONTEXT, host_signal=["signal_pad_ptrs"])


def test_allgather_gemm_needs_the_host_context():
    ag = runpy.run_path(str(SAMPLE), run_name="__ptxdsl_test__")
    k = ag["build_kernel"](2, "default")
    context = ag["context"]([k])
    assert ids(check_kernel(k, **context)) == []
    del context["host_signal_pads"]
    assert Hazard.SIGNAL_WAIT_UNSET.value in ids(check_kernel(k, **context))
