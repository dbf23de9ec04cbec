"""`python -m ptxdsl.fuzz --examples N [--families a,b] [--seed S]`: a fuzz campaign.

Draws N cases per family (hypothesis, in batches of `fuzz.BATCH`), judges every builder
verdict with ptxas and prints the tally per family and verdict, the policy table's use, and
every disagreement. Exit status 1 when there is any.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter

from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis import strategies as st

from . import BATCH, check, policy, strategies
from .oracle import Report, newest_version, targets


def _runner(fam: str, examples: int, done: Report):
    @settings(max_examples=max(1, -(-examples // BATCH)), deadline=None, database=None,
              suppress_health_check=list(HealthCheck),
              phases=(Phase.explicit, Phase.generate))
    @given(st.lists(strategies[fam], min_size=BATCH, max_size=BATCH))
    def run(cases):
        done.merge(check(cases))
    return run


def campaign(families, examples: int, seed_: int | None = None, out=sys.stdout) -> Report:
    """Run `examples` cases of each family; return the merged report."""
    total = Report()
    for fam in families:
        done = Report()
        run = _runner(fam, examples, done)
        if seed_ is not None:
            run = seed(seed_)(run)
        t0 = time.perf_counter()
        run()
        tally = done.tally()
        print(f"{fam:12s} {len(done.outcomes):7d} cases {time.perf_counter() - t0:7.1f} s  "
              f"failures {len(done.failures)}  " + ", ".join(
                  f"{k}={v}" for k, v in sorted(tally.items())), file=out, flush=True)
        total.merge(done)
    return total


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m ptxdsl.fuzz", description=__doc__)
    ap.add_argument("--examples", type=int, default=2000, help="cases per family")
    ap.add_argument("--families", default="all", help="comma-separated; default all: "
                    + ",".join(strategies))
    ap.add_argument("--seed", type=int, default=None)
    args = ap.parse_args(argv)
    fams = list(strategies) if args.families == "all" else args.families.split(",")
    print(f"ptxas: newest PTX ISA {newest_version()}, targets {', '.join(targets())}")
    t0 = time.perf_counter()
    report = campaign(fams, args.examples, args.seed)
    tally = report.tally()
    n, bad = len(report.outcomes), len(report.failures)
    print(f"\ntotal: {n} cases in {time.perf_counter() - t0:.0f} s, {bad} disagreements")
    for verdict, count in sorted(tally.items(), key=lambda kv: -kv[1]):
        print(f"  {verdict:34s} {count}")
    used = Counter(o.verdict.split(":")[-1] for o in report.outcomes
                   if o.verdict.startswith("refused:policy:"))
    print(f"policy rules used: {len(used)} of {len(policy.RULES)}")
    if bad:
        print("\n" + report.describe_failures(50))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
