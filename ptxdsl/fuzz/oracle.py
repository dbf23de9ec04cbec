"""The oracle: builder verdicts checked against ptxas (nvJitLink), many cases per assembly.

For each case the builder is called on a fresh kernel. Then:

* accepted: the one-instruction kernel must assemble at the `.version`/`.target` its module
  infers. Kernels that infer the same pair share one module; a failing module is split into
  single kernels so the culprit is named. The raw text of the case must assemble too (at the
  toolchain's newest PTX ISA and the inferred target): that checks the fuzzer's own renderer,
  which the refusal check relies on.
* refused with a PTX spelling: every spelling must be rejected by ptxas on every target
  (`TARGETS`) at the newest PTX ISA, or a rule of the policy table must name the case.
  Refused cases are assembled together, each in its own kernel; ptxas names the lines it
  rejects, a fatal (parse) error stops it, so what it did not name is assembled again.
* refused without a PTX spelling (a Python-level mistake): fine, provided the error is a
  ptxdsl error; an accepted one is a failure.
* a helper case (`helper.<name>`: a fragment store, a descriptor, a ring; see `helpers` and
  `model`): an accepted one must assemble and make exactly the accesses the host-side model
  expects, all inside their buffers; a refused one must be a configuration the model finds
  out of bounds.

Any other exception from a builder is a failure (a crash).
"""

from __future__ import annotations

import functools
import re
import traceback
from collections import Counter
from collections.abc import Iterable, Sequence

import attrs

from ..errors import AssemblyError, PtxdslError
from ..kernel import Kernel
from ..module import Module
from ..toolchain import assemble
from . import policy as policy_table
from .case import Case, Env, declarations
from .worker import CRASH, HANG, Assembler

# Architecture-specific targets a refused form is tried on: if any accepts it, ptxdsl should
# have offered it (with that target as its requirement) or listed why not.
CANDIDATE_TARGETS = ("sm_90a", "sm_100a", "sm_103a", "sm_110a", "sm_120a", "sm_121a")
FAILURES = ("crash", "accepted:rejected", "accepted:emit", "accepted:no-ptx",
            "refused:accepted", "renderer", "accepted:out-of-bounds", "refused:in-bounds",
            "model")
_LINE = re.compile(r"line (\d+); (error|fatal)")


@functools.cache
def newest_version() -> str:
    """The newest PTX ISA version this nvJitLink's ptxas reads (asked once)."""
    try:
        assemble(".version 99.9\n.target sm_90\n.address_size 64\n", "sm_90")
    except AssemblyError as e:
        m = re.search(r"current version is '(\d+\.\d+)'", e.log)
        if m:
            return m.group(1)
    return "8.8"


@functools.cache
def targets() -> tuple[str, ...]:
    """The candidate targets this nvJitLink can assemble for."""
    out = []
    for t in CANDIDATE_TARGETS:
        try:
            assemble(f".version {newest_version()}\n.target {t}\n.address_size 64\n", t)
            out.append(t)
        except Exception:  # noqa: BLE001 - an arch this toolchain does not know
            continue
    return tuple(out)


@attrs.frozen
class Outcome:
    """The verdict on one case: `verdict` is 'accepted', 'refused:ptxas', 'refused:no-ptx',
    'refused:policy:<rule>', or one of `FAILURES`."""

    case: Case
    verdict: str
    detail: str = ""

    @property
    def failed(self) -> bool:
        """Whether the verdict is a failure (see `FAILURES`)."""
        return self.verdict in FAILURES


@attrs.define
class Report:
    """Outcomes of many cases; `tally()` counts verdicts, `failures` lists the bad ones."""

    outcomes: list[Outcome] = attrs.field(factory=list)

    def merge(self, other: Report) -> Report:
        """Add another report's outcomes to this one (returned)."""
        self.outcomes.extend(other.outcomes)
        return self

    @property
    def failures(self) -> list[Outcome]:
        """The outcomes whose verdict is a failure."""
        return [o for o in self.outcomes if o.failed]

    def tally(self, by_family: bool = False) -> Counter:
        """How many outcomes had each verdict (per family and verdict with `by_family`)."""
        return Counter((o.case.family, o.verdict) if by_family else o.verdict
                       for o in self.outcomes)

    def describe_failures(self, limit: int = 20) -> str:
        """The first `limit` failures, each with its case, facts, PTX text and the detail of the
        verdict."""
        lines = []
        for o in self.failures[:limit]:
            text = "\n      ".join(o.case.text or (
                "(a helper: judged by its address model)" if o.case.call.startswith("helper.")
                else "(no PTX spelling)",))
            lines.append(f"[{o.verdict}] {o.case.family}: {o.case.describe()}\n"
                         f"    facts: {dict(o.case.facts)}\n    text: {text}\n"
                         f"    {o.detail.strip()}")
        more = len(self.failures) - limit
        return "\n".join(lines) + (f"\n... and {more} more" if more > 0 else "")


# -- building ---------------------------------------------------------------------------------
def _builder(call: str):
    where, _, name = call.partition(".")
    if where == "ptx":
        from .. import ptx
        fn = getattr(ptx, name)
        return lambda k, *a, **kw: fn(k, *a, **kw)
    return lambda k, *a, **kw: getattr(k, name)(*a, **kw)


def build(index: int, case: Case) -> Kernel | Outcome:
    """The kernel holding the case's instruction, or the Outcome of a refusal or crash."""
    k = Kernel(f"fz{index}")
    env = Env(k)
    try:
        _builder(case.call)(k, *env.get(case.args),
                            **{n: env.get(v) for n, v in case.kwargs})
    except PtxdslError as e:
        return Outcome(case, "refused", e.message)
    except Exception as e:  # noqa: BLE001 - any other exception is the bug being looked for
        tb = traceback.format_exception_only(type(e), e)[-1].strip()
        return Outcome(case, "crash", tb)
    k.ret()
    return k


def _module(kernels, **pins) -> Module:
    return Module(kernels, check=False, **pins)


# -- raw text ----------------------------------------------------------------------------------
def raw_module(items: list[tuple[object, Case, str]], target: str) -> tuple[str, list]:
    """PTX with one kernel per (key, case, text); returns the text and (key, first, last) line
    spans of each kernel."""
    lines = [f".version {newest_version()}", f".target {target}", ".address_size 64", ""]
    spans = []
    for n, (key, case, text) in enumerate(items):
        params, body = declarations(case.tokens())
        first = len(lines) + 1
        lines.append(f".visible .entry rz{n}(" + ", ".join(params) + ")")
        lines += ["{", *body, *("\t" + t for t in text.split("\n")), "\tret;", "}", ""]
        spans.append((key, first, len(lines)))
    return "\n".join(lines) + "\n", spans


_assembler: list[Assembler] = []
_crashed: set = set()   # keys whose text alone crashed or hung the toolchain


def close_assembler() -> None:
    """Stop the nvJitLink child process (a later check starts a new one)."""
    while _assembler:
        _assembler.pop().close()


def _try(ptx: str, target: str) -> str | None:
    """None when ptxas accepts `ptx` for `target`, else its log (in a child process: see
    `worker`)."""
    if not _assembler:
        _assembler.append(Assembler())
    return _assembler[0](ptx, target)


def accepted_keys(items: list[tuple[object, Case, str]], target: str) -> set:
    """The keys of the items whose text ptxas accepts for `target`."""
    accepted: set = set()
    pending = list(items)
    while pending:
        ptx, spans = raw_module(pending, target)
        log = _try(ptx, target)
        if log is None:
            return accepted | {key for key, _, _ in pending}
        bad_lines = {int(m.group(1)) for m in _LINE.finditer(log)}
        bad = {key for key, lo, hi in spans if any(lo <= n <= hi for n in bad_lines)}
        if not bad:  # a failure ptxas does not place: split until it does
            if len(pending) == 1:
                if log.startswith((CRASH, HANG)):
                    _crashed.add(pending[0][0])
                return accepted
            mid = len(pending) // 2
            return (accepted | accepted_keys(pending[:mid], target)
                    | accepted_keys(pending[mid:], target))
        pending = [it for it in pending if it[0] not in bad]
    return accepted


def accepting_target(items: Sequence[tuple[object, Case, str]]) -> dict:
    """key -> the first candidate target whose ptxas accepts its text (None: none does)."""
    result: dict = {}
    pending = list(items)
    for target in targets():
        if not pending:
            break
        ok = accepted_keys(pending, target)
        for key in ok:
            result[key] = target
        pending = [it for it in pending if it[0] not in ok]
    for key, _, _ in pending:
        result[key] = None
    return result


# -- the check ---------------------------------------------------------------------------------
def _check_accepted(built: dict[int, tuple[Case, Kernel]], out: dict[int, Outcome]) -> None:
    groups: dict[tuple[str, str], list[int]] = {}
    for i, (case, k) in built.items():
        try:
            m = _module([k])
            key = (str(m.version), str(m.target))
            m.emit()
        except Exception as e:  # noqa: BLE001
            out[i] = Outcome(case, "accepted:emit", f"{type(e).__name__}: {e}")
            continue
        groups.setdefault(key, []).append(i)
    for (version, target), idx in groups.items():
        ptx = _module([built[i][1] for i in idx], version=version, target=target).emit()
        if _try(ptx, target) is None:
            for i in idx:
                out.setdefault(i, Outcome(built[i][0], "accepted", f"{version} {target}"))
            continue
        for i in idx:  # attribute the failure
            one = _module([built[i][1]], version=version, target=target).emit()
            log = _try(one, target)
            verdict = "accepted" if log is None else "accepted:rejected"
            detail = f"declared .version {version} .target {target}"
            if log is not None:
                detail += "\n    ptxas: " + " | ".join(_errors(log))
                detail += "\n    emitted: " + " | ".join(_body(one))
            out[i] = Outcome(built[i][0], verdict, detail)


def _errors(log: str) -> list[str]:
    return [ln.strip() for ln in log.splitlines() if "error" in ln or "fatal" in ln][:4]


def _body(ptx: str) -> list[str]:
    inside = ptx.split("{", 1)[-1]
    return [ln.strip() for ln in inside.splitlines()
            if ln.strip() and not ln.strip().startswith((".reg", ".shared", "}", "ret"))]


def _check_renderer(built: dict[int, tuple[Case, Kernel]], out: dict[int, Outcome]) -> None:
    by_target: dict[str, list] = {}
    for i, (case, _k) in built.items():
        if out.get(i) is None or out[i].verdict != "accepted" or not case.text:
            continue
        target = out[i].detail.split()[-1]
        by_target.setdefault(target, []).append((i, case, case.text[0]))
    for target, items in by_target.items():
        ok = accepted_keys(items, target)
        for i, case, text in items:
            if i not in ok:
                ptx, _ = raw_module([(i, case, text)], target)
                out[i] = Outcome(case, "renderer", "the builder accepted this, but ptxas "
                                 f"rejects the fuzzer's own text for {target}: "
                                 + " | ".join(_errors(_try(ptx, target) or "")))


def _check_refused(refused: dict[int, Outcome], out: dict[int, Outcome]) -> None:
    items = [((i, j), o.case, text) for i, o in refused.items() if o.case.text
             for j, text in enumerate(o.case.text)]
    where = accepting_target(items)
    for i, o in refused.items():
        case = o.case
        if not case.text:
            out[i] = Outcome(case, "refused:no-ptx", o.detail)
            continue
        hits = [(case.text[j], where[(i, j)]) for j in range(len(case.text))
                if where[(i, j)] is not None]
        if not hits:
            crashed = any((i, j) in _crashed for j in range(len(case.text)))
            out[i] = Outcome(case, "refused:ptxas-crash" if crashed else "refused:ptxas",
                             o.detail)
            continue
        rule = policy_table.match(case, o.detail)
        if rule is not None:
            out[i] = Outcome(case, f"refused:policy:{rule.id}", o.detail)
        else:
            text, target = hits[0]
            out[i] = Outcome(case, "refused:accepted", f"ptxdsl refused ({o.detail}) but "
                             f"ptxas accepts `{text}` for {target}")


def check(cases: Iterable[Case]) -> Report:
    """Build every case, then judge the builder's verdicts with ptxas (see the module doc)."""
    from . import helpers, model
    cases = list(cases)
    _crashed.clear()
    out: dict[int, Outcome] = {}
    built: dict[int, tuple[Case, Kernel]] = {}
    refused: dict[int, Outcome] = {}
    probes: dict[int, model.Probe] = {}
    for i, case in enumerate(cases):
        if case.call.startswith("helper."):
            h = helpers.build(i, case)
            if isinstance(h[0], Kernel):
                built[i], probes[i] = (case, h[0]), h[1]
            elif h[0] == "refused":
                out[i] = Outcome(case, *model.judge_refused(case, h[1]))
            else:
                out[i] = Outcome(case, *h)
            continue
        r = build(i, case)
        if isinstance(r, Kernel):
            if case.text is None:
                out[i] = Outcome(case, "accepted:no-ptx", "the builder accepted an input "
                                 "that has no PTX spelling")
            else:
                built[i] = (case, r)
        elif r.verdict == "refused":
            refused[i] = r
        else:
            out[i] = r
    _check_accepted(built, out)
    for i, probe in probes.items():
        if out[i].verdict == "accepted":
            case, k = built[i]
            ptx = _module([k]).emit()
            out[i] = Outcome(case, *model.judge_built(case, ptx, probe))
    _check_renderer(built, out)
    _check_refused(refused, out)
    return Report([out[i] for i in range(len(cases))])
