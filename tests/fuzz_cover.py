"""Draw fuzz batches until every class a test wants has been reached.

A test that asserts "the family's strategy reaches every class" through a fixed number of draws
depends on the hypothesis release: its generator changes between releases (the read-back tests
drew every class at 6.128.3 and 6.170, not at 6.150). The first pass is the test's own
(deterministic) one; only when a class is still missing do further passes run, each under
another fixed seed, up to `extra_passes`. The assertion stays the same: the strategy reaches
every class, within a bounded and reproducible number of draws.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis import strategies as st


def draw_until_covered(strategy: st.SearchStrategy[Any], batch: int, batches: int,
                       run_batch: Callable[[list[Any]], None], covered: Callable[[], bool],
                       *, first_seed: int | None = None,
                       extra_passes: Iterable[int] = range(1, 8)) -> None:
    """Run `run_batch` on `batches` lists of `batch` draws of `strategy`: the first pass under
    `first_seed` (None: hypothesis's derandomized stream), then, while not `covered()`, one
    more pass per seed of `extra_passes`."""
    common: dict[str, Any] = dict(max_examples=batches, database=None, deadline=None,
                                  suppress_health_check=list(HealthCheck),
                                  phases=(Phase.generate,))
    cases = st.lists(strategy, min_size=batch, max_size=batch)
    if first_seed is None:
        settings(derandomize=True, **common)(given(cases)(run_batch))()
    else:
        seed(first_seed)(settings(**common)(given(cases)(run_batch)))()
    for s in extra_passes:
        if covered():
            return
        seed(s)(settings(**common)(given(cases)(run_batch)))()
