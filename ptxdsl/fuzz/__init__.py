"""Property-based fuzzing of the instruction builders against ptxas (through nvJitLink).

::

    from ptxdsl import fuzz
    report = fuzz.check(cases)            # a list of fuzz.Case
    assert not report.failures, report.describe_failures()

Strategies (hypothesis) draw random qualifier and operand combinations of each family and
call the public builders: `fuzz.strategies["fence"]`, ..., `fuzz.tma_cases()`,
`fuzz.core_cases()`. The oracle (`fuzz.oracle`) judges each verdict with ptxas; the table
of combinations refused on purpose although ptxas accepts them is `fuzz.policy`.

The helper families (`fuzz.helper_cases()`: "fragment", "descriptor", "ring") draw random
configurations of `Fragment.store` / `store_matrix`, `descriptor` / `SmemLayout` and
`MbarrierRing` slots; the oracle assembles what a helper builds and checks every address it
produces against a host-side model of its buffer (`fuzz.helpers`, `fuzz.interp`).

`python -m ptxdsl.fuzz --examples 20000` runs a large campaign and prints the tally.
"""

from __future__ import annotations

try:
    from hypothesis import strategies as st
except ModuleNotFoundError as e:   # the fuzzer is an optional extra: say which one
    if e.name != "hypothesis":
        raise
    raise ModuleNotFoundError(
        "ptxdsl.fuzz needs hypothesis, which is not installed: pip install 'ptxdsl[fuzz]' "
        "(or pip install hypothesis)", name="hypothesis") from None

from .. import settings
from . import policy
from .case import A, Case, N, R, S, case
from .helpers import FAMILIES as HELPER_FAMILIES
from .oracle import Outcome, Report, check

__all__ = ["A", "Case", "N", "Outcome", "R", "Report", "S", "case", "check", "examples",
           "policy", "strategies", "tma_cases", "core_cases", "helper_cases", "BATCH"]

BATCH = 40          # cases per hypothesis example (one assembly covers them all)
DEFAULT_EXAMPLES = 300


def examples(default: int = DEFAULT_EXAMPLES) -> int:
    """Cases per fuzz test: $PTXDSL_FUZZ_EXAMPLES, else `default`."""
    return settings.FUZZ_EXAMPLES.get(default)


def _strategies() -> dict[str, st.SearchStrategy]:
    from . import bulk, clc, core, cuda_ptx, helpers, matrix, sfu, tcgen05, tcgen05_mma, tma, wgmma
    return {"fence": tma.fences(), "tensormap": tma.tensormaps(), "mbarrier": tma.mbarriers(),
            "bulk": bulk.bulks(), "bulk_tensor": bulk.bulk_tensors(),
            **core.STRATEGIES, **cuda_ptx.STRATEGIES, **wgmma.STRATEGIES,
            **matrix.STRATEGIES, **sfu.STRATEGIES, **clc.STRATEGIES, **tcgen05.STRATEGIES,
            **tcgen05_mma.STRATEGIES,
            **helpers.STRATEGIES}


strategies = _strategies()
TMA_FAMILIES = ("fence", "tensormap", "mbarrier", "bulk", "bulk_tensor")


def tma_cases() -> st.SearchStrategy:
    """Cases of the TMA families (fence, tensormap, mbarrier, bulk, bulk_tensor)."""
    return st.one_of(*(strategies[f] for f in TMA_FAMILIES))


def core_cases() -> st.SearchStrategy:
    """Every instruction family but the TMA ones (core, cuda::ptx, wgmma, matrix, cvt)."""
    return st.one_of(*(s for f, s in strategies.items()
                       if f not in TMA_FAMILIES + HELPER_FAMILIES))


def helper_cases() -> st.SearchStrategy:
    """Configurations of the helpers above the builders (fragments, descriptors, rings, epilogues),
    judged by the address model rather than by ptxas."""
    return st.one_of(*(strategies[f] for f in HELPER_FAMILIES))
