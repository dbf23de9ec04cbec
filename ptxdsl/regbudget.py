"""The register budget of a kernel that uses `setmaxnreg`, checked when the module is emitted.

What ptxas does (ptxas 13, checked by hand; recorded in the tests):

- `setmaxnreg` is kept only when ptxas knows the per-thread register count at entry: from
  `.maxnreg N`, or from `.minnctapersm B` with `.maxntid`/`.reqntid` (then
  floor8(65536 / (B * threads rounded up to warps))). Without either, ptxas prints
  "(C7508) 'setmaxnreg' ignored; unable to determine register count at entry" and drops it,
  so ptxdsl refuses such a kernel.
- A `.dec` to more registers than the entry count is a ptxas error (C7406).

The pool: a CTA holds `warps * 32 * R` registers, R the entry count rounded up to the
allocation granularity (256 registers per warp, i.e. 8 per thread); at most 65536 (one SM's
register file). `setmaxnreg.inc` blocks until the pool can give the warpgroup its new count.

Which warpgroup runs which `setmaxnreg` comes from `ptxdsl.warpgroups` (per-thread constant
propagation from `%tid`; needs `.reqntid`, or `.maxntid` which is then taken as the launch
size). The rule (sound: it only reports a budget that no schedule can meet):

- a warpgroup whose threads all run exactly one `setmaxnreg`, on every path, ends holding its
  count; one that runs none holds R; any other warpgroup holds at least min(R, the smallest
  count it may set) at every moment;
- if some warpgroup must run a `.inc`, the warpgroups that must run a single `.inc` all hold
  their counts once the last of them completes: when that sum plus the others' minimum
  exceeds the pool, that `.inc` waits forever -> `BuildError` naming the `.inc`.
"""

from __future__ import annotations

from typing import Any

from .errors import BuildError
from .instructions.setmaxnreg import RegAction, SetMaxNReg
from .warpgroups import Reach, check_kernel_like, cta_threads, per_thread

REGISTER_FILE = 65536     # 32-bit registers per SM (sm_90/sm_100)
GRANULE = 8               # per-thread allocation unit (256 registers per warp)


def _floor8(n: int) -> int:
    return n // GRANULE * GRANULE


def _ceil8(n: int) -> int:
    return -(-n // GRANULE) * GRANULE


def entry_registers(kernel: Any) -> int | None:
    """ptxas's per-thread register count at entry for a setmaxnreg kernel (None: unknown)."""
    check_kernel_like("entry_registers", kernel, "maxnreg", "minnctapersm")
    bounds = []
    if kernel.maxnreg is not None:
        bounds.append(kernel.maxnreg)
    threads = cta_threads(kernel)
    if kernel.minnctapersm is not None and threads is not None:
        warps = -(-threads // 32)
        bounds.append(_floor8(REGISTER_FILE // (kernel.minnctapersm * warps * 32)))
    return min(bounds + [255]) if bounds else None


def check_kernel_budget(kernel: Any) -> None:
    """Raise `BuildError` when a kernel's setmaxnreg use cannot work (see the module doc)."""
    check_kernel_like("check_kernel_budget", kernel, "body", "name", "maxnreg",
                      "minnctapersm")
    sites = [(i, s) for i, s in enumerate(kernel.body)
             if isinstance(getattr(s, "insn", None), SetMaxNReg)]
    if not sites or kernel.__dict__.get("_budget_checked") == len(kernel.body):
        return
    first = sites[0][1]
    r = entry_registers(kernel)
    if r is None:
        raise BuildError(
            f"kernel {kernel.name}: setmaxnreg needs the register count at entry to be known: "
            "give the kernel maxnreg=N, or minnctapersm=B with reqntid/maxntid (without them "
            "ptxas ignores setmaxnreg: C7508)", first.loc)
    for _, s in sites:
        if s.insn.action is RegAction.dec and s.insn.count > _ceil8(r):
            raise BuildError(
                f"kernel {kernel.name}: setmaxnreg.dec {s.insn.count} asks for more registers "
                f"than the {r} per thread the kernel starts with (ptxas C7406)", s.loc)
    threads = cta_threads(kernel)
    if threads is None:
        return
    warps = -(-threads // 32)
    pool = warps * 32 * _ceil8(r)
    if pool > REGISTER_FILE:
        raise BuildError(
            f"kernel {kernel.name}: {threads} threads x {r} registers = {pool} registers, more "
            f"than the {REGISTER_FILE} of an SM: the launch fails; lower maxnreg or give "
            "minnctapersm", kernel.loc)
    reach = per_thread(kernel, [i for i, _ in sites])
    if reach is None:
        return
    _check_pool(kernel, sites, reach, warps, r, pool)
    kernel._budget_checked = len(kernel.body)   # statements are only ever added


def _check_pool(kernel: Any, sites: list, reach: list[Reach], warps: int, r: int,
                pool: int) -> None:
    at = dict(sites)
    smallest = min(s.insn.count for _, s in sites)
    holds: list[tuple[int, int]] = []   # (registers held, warps) per warpgroup
    musts: list[int] = []          # statements of the .inc each such warpgroup must run
    for w in range(-(-warps // 4)):
        group = reach[w * 128:(w + 1) * 128]
        nwarps = min(4, warps - 4 * w)
        mine = [frozenset(i for i in t.reached if i in at) for t in group]
        sure = [frozenset(i for i in t.definite if i in at) for t in group]
        complete = all(t.complete for t in group)
        one = mine[0]
        if complete and len(one) == 1 and all(m == one for m in mine) and all(
                s == one for s in sure):
            (i,) = one
            hold = at[i].insn.count
            if at[i].insn.action is RegAction.inc:
                musts.append(i)
            else:
                hold = min(r, hold)
        elif complete and not any(mine):
            hold = r
        else:
            counts = [at[i].insn.count for m in mine for i in m] if complete else [smallest]
            hold = min([r, *counts])
        holds.append((hold, nwarps))
    need = sum(h * n * 32 for h, n in holds)
    if musts and need > pool:
        i = max(musts, key=lambda j: at[j].insn.count)
        per = ", ".join(f"warpgroup {w}: {h}" for w, (h, _) in enumerate(holds))
        raise BuildError(
            f"kernel {kernel.name}: setmaxnreg.inc {at[i].insn.count} can never complete: the "
            f"warpgroups end up asking for {need} registers ({per} per thread) but the "
            f"CTA holds {pool} ({warps} warps x {_ceil8(r)} per thread, 64K per SM); lower the "
            ".inc counts or release more with .dec", at[i].loc)
