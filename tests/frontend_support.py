"""The front end's round-trip promise, checked on every golden a test builds: the PTX a
module emits parses back into the statements the module was built from."""

from __future__ import annotations

from ptxdsl.frontend import parse_ptx
from ptxdsl.frontend.compare import first_difference
from ptxdsl.frontend.readers import READERS


def unread() -> frozenset[str]:
    """Mnemonics no reader claims yet: their statements may stay raw (compared as text)."""
    return frozenset(m for m in _ALL if m not in READERS)


# Every mnemonic a ptxdsl builder emits; the round trip must read each back typed once a
# reader claims it.
_ALL = frozenset("""abs activemask add and atom bar barrier bfe bfi bfind bmsk bra brev clz
    cp cp.async createpolicy cvt cvta discard div elect exit fence fma getctarank griddepcontrol
    ld ldmatrix lop3 mad mapa max mbarrier membar min mov mul multimem nanosleep neg not or popc
    prefetch prefetchu prmt red rem ret selp setmaxnreg setp shf shfl shl shr st stmatrix sub
    tensormap trap vote wgmma xor""".split())


def assert_round_trip(module, text: str, name: str) -> None:
    parsed = parse_ptx(text, file=f"{name}.ptx")
    raw_ok = unread()
    for k in module.kernels:
        got = parsed.function(k.name)
        diff = first_difference(k.body, got.body, raw_ok=raw_ok)
        assert diff is None, f"{name}: kernel {k.name}: parse_ptx(emit()) differs: {diff}"
