"""A static checker for async-proxy and tensor-map hazards in ptxdsl kernels.

ptxas accepts many programs that hang, fault or race on the GPU: a tensor map used without
its acquire fence, an expect_tx that does not match the bytes a TMA load delivers, shared data
stored by TMA before it was fenced into the async proxy, and so on (`Hazard` lists them all).
ptxdsl knows every instruction it built, so it can catch these before the GPU does.

::

    findings = check_module(mod, host_maps=["tmap_ptr"], maps={"tmap": desc})
    for f in findings:
        print(f.format())    # `file:line`: error[tmap-no-acquire] kernel 'k': ... + fix

`Module.emit()` runs the checker by default (warnings of category `PtxdslHazardWarning`;
`HazardError` in strict mode: `Module(..., strict=True)` or `PTXDSL_STRICT=1`; off with
`Module(..., check=False)`), and `python -m ptxdsl check FILE.py` prints the findings.

How it works: `ops` maps instructions to roles; `cfg` builds the control-flow graph and solves
dataflow problems over it; `defs` indexes which statement writes which register; `values` tracks
constants, address provenance and divergence; `ranges` bounds address offsets (per-thread
offsets, ring indices), with `threadwise` evaluating those of one thread index exactly;
`divergence` finds the code that only some threads run and correlates branches on one
thread-invariant condition; `trywait` decides when a try_wait counts as a wait;
`maps` reads box sizes and swizzles from constant tensormap.replace values (`context`: those
the caller gives or the kernel declares); `stages` follows
stage registers a ring advances in place; `guards` finds the waits that guard each copy;
`blocks` tells apart buffers each warpgroup owns (`smem + cw * size`);
`analysis` drives the hazard modules (`hazards_tmap`, `hazards_mbar`, `hazards_phase`,
`hazards_arrive`, `hazards_ring`, `hazards_refill`,
`hazards_overlap`, `hazards_stages`, `hazards_bulk`, `hazards_bulk_namedbar` (bulk
stores across a named barrier's arrive and sync), `hazards_cluster`, `hazards_remote`,
`hazards_txrank`, `hazards_wgmma`, `hazards_read_release` (thread reads of a stage
after its release), `hazards_proxy` (shared memory the tensor cores
read through descriptors), `hazards_xdev`, `hazards_namedbar`, `hazards_xgpu`,
`hazards_xgpu_rounds`, `hazards_xgpu_lamport` (data as its own flag), `hazards_tmem`
(tensor memory; `tmem_ops` reads the tcgen05 instructions), `sync`) to a fixed
point over `state`,
and reports `findings`. docs/hazards.md lists every hazard id. Checks skipped for lack of
information leave a note-level finding (`check_kernel(..., notes=True)`).

Cost: a kernel with no TMA, bulk, mbarrier, tensor-map, wgmma, setmaxnreg, distributed
shared memory, named-barrier (`bar.arrive`, a thread count) or tcgen05 instruction, and no
`peer_buffers` / `signal_pads` in the context for it, is dismissed in one scan (a few % of
emitting it); otherwise the analysis is linear in the body plus the TMA ops.
"""

from __future__ import annotations

import gc
import threading
import warnings
import weakref
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar

from ptxdsl import settings

from . import (  # noqa: F401  (register handlers)
    hazards_arrive,
    hazards_bulk,
    hazards_bulk_namedbar,
    hazards_bulk_release,
    hazards_cluster,
    hazards_mbar,
    hazards_namedbar,
    hazards_overlap,
    hazards_phase,
    hazards_proxy,
    hazards_read_release,
    hazards_refill,
    hazards_remote,
    hazards_ring,
    hazards_stages,
    hazards_swizzle,
    hazards_tmap,
    hazards_tmap_fields,
    hazards_tmem,
    hazards_walk,
    hazards_wgmma,
    hazards_xdev,
    hazards_xgpu,
    hazards_xgpu_lamport,
    hazards_xgpu_rounds,
    overwrites,
    sync,
)
from .analysis import Analysis
from .context import Context, MapInfo
from .findings import Finding, Hazard, HazardError, PtxdslHazardWarning, Severity, Site
from .ops import TRIGGERS, extract

__all__ = ["check_kernel", "check_module", "emit_check", "report", "Finding", "Hazard",
           "HazardError", "PtxdslHazardWarning", "Severity", "Site", "MapInfo", "Context"]


def check_kernel(kernel: Any, *, notes: bool = False, **context: Any) -> list[Finding]:
    """Every hazard found in one kernel, sorted by Python location.

    Context (optional): `host_maps=[param or name, ...]` for pointer parameters whose maps
    the host wrote, `maps={param or name: TiledDesc | TensorMap | SmemLayout | {"box_bytes",
    "swizzle"}}` (or `{kernel name: {param or name: ...}}` for one kernel's parameters),
    `cross_device_maps=[param or name, ...]` for maps written on one GPU and used on another,
    `peer_buffers=` / `signal_pads=` (names, or `{kernel: names}`) for the cross-GPU
    protocol's buffers and flags (one pointer, or a device array of per-rank pointers).
    Boxes the kernel declares (`Kernel.map_boxes`) count where `maps=` says nothing
    (docs/hazards.md, "Context"). `notes=True` adds the note-level findings that say which
    checks were skipped for lack of information (a run-time byte count, an unknown box
    size, ...).
    """
    return _visible(_check(kernel, Context.make(**context)), notes)


def _visible(findings: list[Finding], notes: bool) -> list[Finding]:
    return findings if notes else [f for f in findings if f.severity is not Severity.note]


def _check(kernel: Any, ctx: Context) -> list[Finding]:
    # The checker makes many small short-lived objects and no reference cycles; with the
    # collector on, each allocation burst rescans every object of a large kernel (that was
    # more than half the checker's time on 100k-instruction kernels).
    paused = gc.isenabled()
    gc.disable()
    try:
        insns = [getattr(x, "insn", None) for x in kernel.body]
        ops = extract(insns)
        # Fast path: a kernel with no TMA, bulk, mbarrier or tensor-map instruction has
        # nothing to check (most of a large arithmetic kernel is never looked at twice).
        if not any(op.role in TRIGGERS for op in ops) and not ctx.has_xgpu(kernel):
            return []
        return Analysis(kernel, ops, ctx, insns).run()
    finally:
        if paused:
            gc.enable()


def check_module(module: Any, *, notes: bool = False, **context: Any) -> list[Finding]:
    """Every hazard found in every kernel of a module (same context as `check_kernel`).

    Without context, the module's own emit-time context is used (`Module(check={...})`), so
    `python -m ptxdsl check` sees what the file's author told the module.
    """
    own = getattr(module, "check_on_emit", None)
    if not context and isinstance(own, Mapping):
        context = dict(own)
    ctx = Context.make(**context)
    out: list[Finding] = []
    for k in module.kernels:
        out.extend(_check(k, ctx))
    return _visible(out, notes)


def report(findings: Iterable[Finding], *, strict: bool = False) -> None:
    """Raise `HazardError` listing the findings (strict), or warn once per finding."""
    findings = [f for f in findings if f.severity is not Severity.note]
    if not findings:
        return
    if strict:
        raise HazardError(findings)
    for f in findings:
        loc = f.loc
        warnings.warn_explicit(f.format(with_loc=False), PtxdslHazardWarning,
                               loc.file if loc is not None else "<ptxdsl>",
                               loc.line if loc is not None else 0)


_EMITTED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
T = TypeVar("T")


def strict_from_env() -> bool:
    """Whether `PTXDSL_STRICT` asks for strict checking (1/true/yes/on): findings raise
    `HazardError` instead of warning."""
    return settings.STRICT.get()


def emit_check(module: Any, *, strict: bool | None = None,
               context: Mapping[str, Any] | None = None) -> list[Finding]:
    """What `Module.emit()` runs: check, then warn (or raise when strict). A module emitted
    again unchanged is neither re-checked nor re-warned."""
    return emit_check_started(module, strict=strict, context=context, thread=False)()


def emit_started(source: Any) -> tuple[str, Callable[[], object]]:
    """`source.emit()` with its hazard check left running beside the caller's next work:
    the text and the call that finishes the check (`Module.emit_deferred`); for a source
    without one (a stand-in module), its `emit()` and nothing to finish."""
    deferred = getattr(source, "emit_deferred", None)
    return deferred() if deferred is not None else (source.emit(), nothing_pending)


def finishing(finish: Callable[[], object], work: Callable[[], T]) -> T:
    """`work()`, then `finish()` (a started check's warnings or HazardError); when `work`
    fails, the check's HazardError (strict) still comes first, as it would from `emit()`."""
    try:
        result = work()
    except BaseException:
        finish()
        raise
    finish()
    return result


def nothing_pending() -> None:
    """No hazard check left to finish."""


def emit_check_started(module: Any, *, strict: bool | None = None,
                       context: Mapping[str, Any] | None = None,
                       thread: bool = True) -> Callable[[], list[Finding]]:
    """`emit_check` in two halves: the checking starts now, in a worker thread (`thread`),
    and the returned call waits for it, then warns (or raises) from the caller's thread and
    returns the findings. `load_module` assembles in between: nvJitLink runs without the GIL,
    so the checker's time hides behind ptxas's instead of adding to it."""
    strict = strict_from_env() if strict is None else strict
    shape = (tuple((id(k), len(k.body)) for k in module.kernels), id(context))
    hit = _EMITTED.get(module)
    if hit is not None and hit[0] == shape:
        def again() -> list[Finding]:
            if strict:
                report(hit[1], strict=True)
            return hit[1]
        return again
    result: dict[str, Any] = {}

    def work() -> None:
        try:
            result["findings"] = check_module(module, **dict(context or {}))
        except BaseException as exc:  # noqa: BLE001 - raised again in the caller's thread
            result["error"] = exc
    worker = None
    if thread:
        worker = threading.Thread(target=work, name="ptxdsl-hazard-check", daemon=True)
        worker.start()
    else:
        work()

    def finish() -> list[Finding]:
        if worker is not None:
            worker.join()
        if "error" in result:
            raise result["error"]
        findings = result["findings"]
        _EMITTED[module] = (shape, findings)
        report(findings, strict=strict)
        return findings
    return finish
