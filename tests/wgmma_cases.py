"""Scaffolding of the wgmma tests: an environment kernel with accumulator, A-fragment,
descriptor and metadata registers made on first use, and the enumeration of every form the
ISA (and ptxas) allow for sm_90a."""

from __future__ import annotations

from collections.abc import Iterator

import attrs

from ptxdsl import t
from ptxdsl.instructions.wgmma import KINDS, WgmmaType, d_count, d_register_type
from tests.tma_cases import Env


class WEnv(Env):
    """`Env` plus the registers wgmma needs; accumulators are shared by every N (a prefix of
    one register list per type), so a module holding hundreds of forms stays small."""

    def acc(self, n: int, dtype=t.f32):
        regs = self._get(("acc", dtype), lambda: [self.k.reg(d_register_type(dtype))
                                                  for _ in range(d_count(256, dtype))])
        return regs[:d_count(n, dtype)]

    a_regs = property(lambda s: s._get("a_regs", lambda: [s.k.reg(t.b32) for _ in range(4)]))
    desc_a = property(lambda s: s._get("desc_a", lambda: s.k.ld_param(
        s.k.param(t.u64, "desc_a"))))
    desc_b = property(lambda s: s._get("desc_b", lambda: s.k.ld_param(
        s.k.param(t.u64, "desc_b"))))
    meta = property(lambda s: s._get("meta", lambda: s.k.ld_param(s.k.param(t.b32, "meta"))))
    p = property(lambda s: s._get("p", lambda: s.k.setp("ne", s.meta, 0)))


@attrs.frozen
class Form:
    """One legal wgmma form: types, N, operand kind and the optional qualifier."""

    sparse: bool
    atype: WgmmaType
    btype: WgmmaType
    dtype: object
    n: int
    rs: bool
    satfinite: bool = False

    @property
    def id(self) -> str:
        kind = "rs" if self.rs else "ss"
        sat = "-sat" if self.satfinite else ""
        sp = "sp-" if self.sparse else ""
        return (f"{sp}{self.atype.value}.{self.btype.value}-{self.dtype.value}-n{self.n}-"
                f"{kind}{sat}")

    def build(self, e: WEnv):
        from ptxdsl import ptx
        a = e.a_regs if self.rs else e.desc_a
        if self.sparse:
            return ptx.wgmma_mma_async_sp(e.k, e.acc(self.n, self.dtype), a, e.desc_b, e.meta,
                                          0, e.p, atype=self.atype, btype=self.btype,
                                          satfinite=self.satfinite)
        return ptx.wgmma_mma_async(e.k, e.acc(self.n, self.dtype), a, e.desc_b, e.p,
                                   atype=self.atype, btype=self.btype,
                                   satfinite=self.satfinite)


def all_forms() -> Iterator[Form]:
    """Every dense and sparse form for sm_90a: types x accumulator x N x SS/RS x .satfinite."""
    for sparse in (False, True):
        for kind in KINDS:
            if sparse and not kind.sel:
                continue      # b1 has no sparse form
            pairs = ([(a, a) for a in kind.types] if kind.same_types
                     else [(a, b) for a in kind.types for b in kind.types])
            sats = (False, True) if kind.name == "integer" else (False,)
            for a, b in pairs:
                for dtype in kind.dtypes:
                    for n in kind.n:
                        for rs in (False, True):
                            for sat in sats:
                                yield Form(sparse, a, b, dtype, n, rs, sat)
