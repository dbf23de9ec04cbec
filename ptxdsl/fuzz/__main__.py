"""`python -m ptxdsl.fuzz --examples N [--families a,b] [--seed S]`: a fuzz campaign.

Also `python -m ptxdsl fuzz ...`, with the same options.

Draws N cases per family (hypothesis, in batches of `fuzz.BATCH`), judges every builder
verdict with ptxas (the helper families "fragment", "descriptor" and "ring": by assembling
and by a host-side model of every address the helper produces) and prints the tally per
family and verdict, the policy table's use, and every disagreement. Exit status 1 when
there is any; Ctrl-C stops the campaign, prints the tally of the cases judged so far and
exits 130. On a terminal, a progress line counts the cases of the running family
(`--no-progress` turns it off, `--progress` forces it).
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
import time
from collections import Counter

from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis import strategies as st

from ..progress import Progress
from . import BATCH, check, policy, strategies
from .oracle import Report, close_assembler, newest_version, targets


class _CtrlC:
    """While active, SIGINT only sets `seen`; each batch raises KeyboardInterrupt when it
    starts or ends with `seen` set. Raised wherever the main thread happened to be, the
    interrupt could land in hypothesis's gc callback (Python prints 'Exception ignored' and
    the campaign runs on) or inside `check` (the cut-short batch would count as a
    disagreement); judged whole, a batch never holds a half-judged case."""

    def __init__(self):
        self.seen = False
        self._previous = None

    def _handler(self, signum, frame):
        self.seen = True

    def check(self) -> None:
        if self.seen:
            raise KeyboardInterrupt

    def __enter__(self) -> _CtrlC:
        self.seen = False
        if threading.current_thread() is threading.main_thread():
            self._previous = signal.signal(signal.SIGINT, self._handler)
        return self

    def __exit__(self, *exc) -> None:
        if self._previous is not None:
            signal.signal(signal.SIGINT, self._previous)


_ctrl_c = _CtrlC()


def _runner(fam: str, examples: int, done: Report, progress: Progress | None = None):
    @settings(max_examples=max(1, -(-examples // BATCH)), deadline=None, database=None,
              suppress_health_check=list(HealthCheck),
              phases=(Phase.explicit, Phase.generate))
    @given(st.lists(strategies[fam], min_size=BATCH, max_size=BATCH))
    def run(cases):
        _ctrl_c.check()
        done.merge(check(cases))
        if progress is not None:
            progress.update(len(done.outcomes))
        _ctrl_c.check()
    return run


class Interrupted(Exception):
    """Ctrl-C during a campaign; `.report` holds every case judged before it."""

    def __init__(self, report: Report):
        super().__init__("interrupted")
        self.report = report


def campaign(families, examples: int, seed_: int | None = None, out=sys.stdout,
             progress: bool | None = None) -> Report:
    """Run `examples` cases of each family; return the merged report. Ctrl-C raises
    `Interrupted` carrying the cases judged so far (the current family's included).
    `progress`: draw a progress line on stderr (None: only when stderr is a terminal)."""
    total = Report()
    for fam in families:
        done = Report()
        # hypothesis draws whole batches: the family's case count rounds up to BATCH
        bar = Progress(f"{fam:12s}", total=max(1, -(-examples // BATCH)) * BATCH,
                       enabled=progress, unit="cases")
        run = _runner(fam, examples, done, bar)
        if seed_ is not None:
            run = seed(seed_)(run)
        t0 = time.perf_counter()
        stopped = False
        try:
            run()
        except KeyboardInterrupt:
            stopped = True
        finally:
            bar.close()
        tally = done.tally()
        print(f"{fam:12s} {len(done.outcomes):7d} cases {time.perf_counter() - t0:7.1f} s  "
              f"failures {len(done.failures)}  " + ", ".join(
                  f"{k}={v}" for k, v in sorted(tally.items()))
              + ("  (interrupted)" if stopped else ""), file=out, flush=True)
        total.merge(done)
        if stopped:
            raise Interrupted(total)
    return total


def _positive(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected a positive whole number, got {text!r}") from None
    if n < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {n}")
    return n


def _families(ap: argparse.ArgumentParser, text: str) -> list[str]:
    if text == "all":
        return list(strategies)
    fams = [f.strip() for f in text.split(",") if f.strip()]
    unknown = [f for f in fams if f not in strategies]
    if unknown or not fams:
        ap.error(f"argument --families: unknown famil{'y' if len(unknown) == 1 else 'ies'} "
                 f"{', '.join(map(repr, unknown)) or '(none given)'}; choose from: all, "
                 + ", ".join(strategies))
    # A family named twice ran twice: the same cases again, counted as twice the examples.
    twice = sorted({f for f in fams if fams.count(f) > 1})
    if twice:
        ap.error(f"argument --families: {', '.join(map(repr, twice))} given more than once")
    return fams


def parser(prog: str = "python -m ptxdsl.fuzz") -> argparse.ArgumentParser:
    """The campaign's options (also read by the documentation's command-line page)."""
    ap = argparse.ArgumentParser(prog=prog, description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--examples", type=_positive, default=2000,
                    help="cases per family, a whole number >= 1, rounded up to a multiple "
                    f"of {BATCH} (cases are drawn in batches; default: %(default)s)")
    ap.add_argument("--families", default="all", help="comma-separated families to fuzz; "
                    "default all: " + ",".join(strategies))
    ap.add_argument("--seed", type=int, default=None,
                    help="hypothesis seed, to repeat a campaign (default: random)")
    ap.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                    help="a progress line on stderr (default: only on a terminal)")
    return ap


def main(argv=None, prog: str = "python -m ptxdsl.fuzz") -> int:
    ap = parser(prog)
    args = ap.parse_args(argv)
    fams = _families(ap, args.families)
    t0 = time.perf_counter()
    interrupted = False
    try:
        print(f"ptxas: newest PTX ISA {newest_version()}, targets {', '.join(targets())}",
              flush=True)
        with _ctrl_c:
            report = campaign(fams, args.examples, args.seed, progress=args.progress)
        interrupted = _ctrl_c.seen      # after the last batch ended
    except Interrupted as e:
        report, interrupted = e.report, True
    except KeyboardInterrupt:   # before the first case
        report, interrupted = Report(), True
    finally:
        close_assembler()
    tally = report.tally()
    n, bad = len(report.outcomes), len(report.failures)
    print(f"\n{'interrupted' if interrupted else 'total'}: {n} cases in "
          f"{time.perf_counter() - t0:.0f} s, {bad} disagreements")
    for verdict, count in sorted(tally.items(), key=lambda kv: -kv[1]):
        print(f"  {verdict:34s} {count}")
    used = Counter(o.verdict.split(":")[-1] for o in report.outcomes
                   if o.verdict.startswith("refused:policy:"))
    print(f"policy rules used: {len(used)} of {len(policy.RULES)}")
    if bad:
        print("\n" + report.describe_failures(50))
    if interrupted:
        return 130
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
