"""Kernels with named barriers for the checker's tests (tests/test_checker_namedbar.py): a
FlashAttention-3-style ping-pong of two consumer warpgroups and its broken variants; their
findings name the statements `LINES` marks (lines of this file)."""

from __future__ import annotations

import sys

from ptxdsl import Kernel, t

LINES: dict[str, int] = {}


def _mark(name: str) -> None:
    """Remember the caller's next line as `LINES[name]`."""
    LINES[name] = sys._getframe(1).f_lineno + 1


def _gemm(k: Kernel, acc) -> None:
    """Stands for the warpgroup's GEMM the ping-pong orders (a wgmma in FA3)."""
    k.add(acc, 1, dst=acc)


def pingpong(variant: str = "ok", *, count: int = 256, epilogue_ids: tuple = (3, 4),
             extra_branches: int = 0) -> Kernel:
    """CTA of 384 threads: warpgroup 0 the producer (no named barrier), warpgroups 1 and 2
    the consumers, each owning named barrier `wg` (ids 1 and 2). Warpgroup 2 pre-arrives on
    warpgroup 1's barrier so warpgroup 1 goes first; then each iteration: bar.sync on its
    own barrier, its GEMM, bar.arrive on the other's; the last iteration is peeled, as FA3
    does for its last P.V GEMM. Each consumer then stores its tile through a per-warpgroup
    epilogue barrier (`bar.sync id, 128`, as TmaStoreEpilogue runs it). `extra_branches`:
    that many branches on a parameter around other work in each iteration."""
    k = Kernel(f"pingpong_{variant}", reqntid=384)
    nk = k.ld_param(k.param(t.u32, "nk"))
    acc = k.mov(0, dst=k.reg(t.u32, "acc"))
    wg = k.shr(k.tid.x, 7)
    with k.if_(wg != 0):
        own = wg                              # warpgroup 1: barrier 1, warpgroup 2: barrier 2
        other = k.sub(3, wg)
        if variant != "no_prearrive":
            with k.if_(wg == 2):
                _mark("prearrive")
                k.bar_arrive(1, count)        # warpgroup 1 goes first
        if variant == "both_prearrive":
            with k.if_(wg == 1):
                k.bar_arrive(1, count)        # ... and warpgroup 1 lets itself go too
        last = k.sub(nk, 1)
        with k.for_range(0, last) as kb:
            _mark("loop_sync")
            k.bar_sync(own, count)
            _gemm(k, acc)
            for j in range(extra_branches):
                with k.if_(k.ld_param(k.param(t.pred, f"flag{j}"))):
                    _gemm(k, acc)
            if variant == "arrive_skipped":   # not after the loop's last GEMM
                with k.if_(kb < k.sub(last, 1)):
                    k.bar_arrive(other, count)
            elif variant == "arrive_guarded":   # the same, as `@p bar.arrive`
                with k.guard(kb < k.sub(last, 1)):
                    k.bar_arrive(other, count)
            else:
                _mark("loop_arrive")
                k.bar_arrive(other, count)
        if variant != "final_sync_dropped":
            _mark("final_sync")
            k.bar_sync(own, count)
        _gemm(k, acc)
        if variant != "final_arrive_dropped":
            k.bar_arrive(other, count)
        epi = k.add(wg, epilogue_ids[0] - 1)  # the epilogue's barrier of this warpgroup
        _mark("epilogue")
        k.bar_sync(epi, 128)
    return k
