"""The front end's round-trip promise, checked on every golden a test builds: the PTX a
module emits parses back into the statements the module was built from, and the checker
finds the same on them."""

from __future__ import annotations

from collections.abc import Mapping

from ptxdsl.checker.context import Context
from ptxdsl.frontend import parse_ptx
from ptxdsl.frontend.compare import first_difference
from ptxdsl.frontend.readers import READERS
from tests.parsed_check import differences


def unread() -> frozenset[str]:
    """Mnemonics no reader claims yet: their statements may stay raw (compared as text)."""
    return frozenset(m for m in _ALL if m not in READERS)


# Every mnemonic a ptxdsl builder emits; the round trip must read each back typed once a
# reader claims it.
_ALL = frozenset("""abs activemask add and atom bar barrier bfe bfi bfind bmsk bra brev clz
    cp cp.async createpolicy cvt cvta discard div elect exit fence fma getctarank griddepcontrol
    ld ldmatrix lop3 mad mapa max mbarrier membar min mov mul multimem nanosleep neg not or popc
    prefetch prefetchu prmt red rem ret selp setmaxnreg setp shf shfl shl shr st stmatrix sub
    tcgen05 tensormap trap vote wgmma xor""".split())


def assert_round_trip(module, text: str, name: str) -> None:
    parsed = parse_ptx(text, file=f"{name}.ptx")
    raw_ok = unread()
    for k in module.kernels:
        got = parsed.function(k.name)
        diff = first_difference(k.body, got.body, raw_ok=raw_ok)
        assert diff is None, f"{name}: kernel {k.name}: parse_ptx(emit()) differs: {diff}"
    assert_same_findings(module, text, name)


def assert_same_findings(module, text: str, name: str) -> None:
    """The checker finds on the parsed PTX what it finds on the module (notes included),
    with the module's own emit-time context."""
    own = getattr(module, "check_on_emit", None)
    ctx = Context.make(**own) if isinstance(own, Mapping) else Context.make()
    for k in module.kernels:
        diff = differences(k, ctx, text)
        assert not diff, f"{name}: kernel {k.name}: checked otherwise parsed: {diff}"
