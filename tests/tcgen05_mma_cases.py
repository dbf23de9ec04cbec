"""Shared by the tcgen05.mma tests (test_tcgen05_mma.py, test_tcgen05_mma_refusals.py): the
operand environment, the requirement ptxas gives each form, a table row's instruction and the
front end's round trip."""

from __future__ import annotations

import re

from ptxdsl import t
from ptxdsl.frontend import parse_ptx
from ptxdsl.frontend.compare import first_difference
from ptxdsl.instructions.tcgen05_mma import ScaleVec, Tcgen05Mma, Tcgen05MmaWs
from ptxdsl.types import req
from tests.tma_cases import Env


def expected_requirement(form: str):
    """What ptxas needs, which is cuda::ptx 13.0's PTX ISA 8.6 / SM_100a, SM_101a except:
    .kind::mxf4nvf4 needs PTX 8.7, .block16/.block32 PTX 8.8; scale_input_d is refused on
    sm_110a/f (so sm_100a and sm_103a only); .kind::i8 on sm_103a and the f targets;
    .scale_vec::NX, and .sp with mxf4/mxf4nvf4, on the f targets. The other forms take every
    sm_100a-class target and the f family targets."""
    version = "8.8" if re.search(r"\.block(16|32)", form) else "8.7" if "mxf4nvf4" in form \
        else "8.6"
    arch = {100, 101, 103, 110}
    if "scale_input_d" in form:
        arch &= {100, 103}
    if "kind::i8" in form:
        arch &= {100, 101, 110}
    family = not ("kind::i8" in form or "scale_vec" in form
                  or ".sp." in form and "mxf4" in form)
    return req(version, 100, arch=tuple(sorted(arch)), family=family)


class MmaEnv(Env):
    """Operands of the tcgen05.mma forms: TMEM addresses and idesc as .u32 parameters,
    descriptors as .u64 ones."""

    def _p(self, ty, name):
        return self._get(name, lambda: self.k.ld_param(self.k.param(ty, name)))

    d = property(lambda s: s._p(t.u32, "d_tmem"))
    a_tmem = property(lambda s: s._p(t.u32, "a_tmem"))
    a = property(lambda s: s._p(t.u64, "a_desc"))
    b = property(lambda s: s._p(t.u64, "b_desc"))
    i = property(lambda s: s._p(t.u32, "idesc"))
    sa = property(lambda s: s._p(t.u32, "scale_a"))
    sb = property(lambda s: s._p(t.u32, "scale_b"))
    z = property(lambda s: s._p(t.u64, "zero_mask"))
    meta = property(lambda s: s._p(t.u32, "sp_meta"))
    p = property(lambda s: s._get("p", lambda: s.k.setp("ne", s.i, 0)))

    def lanes(self, n: int):
        return [self._p(t.u32, f"lane{j}") for j in range(n)]



DENSE = ("f16", "tf32", "f8f6f4", "i8")
# The scale vector sizes ptxas takes per block-scaled kind (None: left out; blockN: PTX 8.8).
VECS = {"mxf8f6f4": (None, "1X", "block32"), "mxf4": (None, "2X", "block32"),
        "mxf4nvf4": ("2X", "4X", "block16", "block32")}


def vec_text(v) -> str:
    """How a scale vector size is written: '.scale_vec::2X', '.block32' or nothing."""
    return "" if v is None else f".{v}" if v.startswith("block") else f".scale_vec::{v}"


def vec_name(v: ScaleVec) -> str:
    return v.value.removeprefix("scale_vec::")


def mma_insn(e: MmaEnv, kind: str, cg: int, a: str, variant: str, arg=None, sparse=False):
    kw = dict(kind=kind, cta_group=cg, d_tmem=e.d, b_desc=e.b, idesc=e.i, enable_input_d=e.p)
    kw.update({"a_desc": e.a} if a == "desc" else {"a_tmem": e.a_tmem})
    if sparse:
        kw["sp_meta_tmem"] = e.meta
    if variant == "lanes":
        kw["disable_output_lane"] = e.lanes(4 * cg)
    elif variant == "scale":
        kw["scale_input_d"] = 7
    elif variant == "block_scale":
        kw.update(scale_vec=arg, scale_A_tmem=e.sa, scale_B_tmem=e.sb)
    elif variant == "collector":
        kw["collector"] = arg
    return Tcgen05Mma(**kw)



def round_trip(kernels, text: str) -> None:
    """The PTX parses back into the same statements, every tcgen05.mma read typed."""
    parsed = parse_ptx(text, file="tcgen05_mma.ptx")
    for k in kernels:
        body = parsed.function(k.name).body
        assert first_difference(k.body, body, raw_ok=frozenset()) is None, k.name
        mmas = [s for s in body if getattr(s, "insn", None) is not None
                and s.insn.opcode().startswith("tcgen05.mma")]
        assert mmas and all(type(s.insn) in (Tcgen05Mma, Tcgen05MmaWs) for s in mmas)

