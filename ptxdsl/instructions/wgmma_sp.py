"""Sparse warpgroup MMA: `wgmma.mma_async.sp` (PTX ISA §9.7.15.6; sm_90a, PTX 8.2).

::

    wgmma.mma_async.sp.sync.aligned.m64nNkK.dtype.atype.btype  d, a-desc|{a}, b-desc,
        sp-meta, sp-sel, scale-d{, imm-scale-a, imm-scale-b{, imm-trans-a}, imm-trans-b};

A is 2:4 structured-sparse: K is twice the dense form's for the same types, A holds half of
it (compressed) and `sp-meta` (a 32-bit register) says which two of each four it keeps.
`sp-sel` (an immediate) picks which threads of each quad supply the metadata: 0 or 1 for
16-bit and tf32 inputs, 0 for 8-bit inputs (ptxas: "expected to be 0"). There is no b1 form.
Everything else (types, N, immediates, refusals) is the dense form's, `WgmmaMmaAsync`.
"""

from __future__ import annotations

from typing import Any

import attrs

from ..operands import Imm, Reg
from ..types import Requires, ScalarType, req
from .base import check_dst, check_imm, refuse
from .wgmma import WgmmaMmaAsync, WgmmaType, _dtype_of, _n_of

__all__ = ["wgmma_mma_async_sp"]

WGMMA_SP = req("8.2", 90, arch=(90,))
WGMMA_SP_MIXED_INT = req("8.4", 90, arch=(90,))


@attrs.frozen
class WgmmaMmaAsyncSp(WgmmaMmaAsync):
    """`wgmma.mma_async.sp.sync.aligned.m64nNkK.dtype.atype.btype{.satfinite}
    d, a-desc|{a0..a3}, b-desc, sp-meta, sp-sel, scale-d{, imm-scale-a, imm-scale-b
    {, imm-trans-a}, imm-trans-b};`"""

    MNEMONIC = "wgmma.mma_async.sp"
    SPARSE = True
    sp_meta: Reg | None = None
    sp_sel: int = 0

    def _check_extra(self, name: str, kind: Any) -> None:
        if self.sp_meta is None:
            refuse(name, "the sparse form needs sp-meta, the metadata register")
        self._set("sp_meta", check_dst(name, "sp_meta", self.sp_meta, ScalarType.b32))
        self._set("sp_sel", check_imm(name, "sp_sel", self.sp_sel, 0, max(kind.sel)))

    @property
    def requires(self) -> Requires:
        if self.atype is not self.btype and self.atype in (WgmmaType.s8, WgmmaType.u8):
            return WGMMA_SP_MIXED_INT
        return WGMMA_SP

    def operands(self):
        ops = super().operands()
        return (*ops[:3], self.sp_meta, Imm(self.sp_sel, ScalarType.s32), *ops[3:])


def wgmma_mma_async_sp(k, d, a, b_desc, sp_meta, sp_sel=0, scale_d=1, imm_scale_a=None,
                       imm_scale_b=None, tnspA=None, tnspB=None, *, atype, btype=None,
                       dtype=None, n=None, satfinite=False) -> WgmmaMmaAsyncSp:
    """`wgmma.mma_async.sp.sync.aligned.m64nNkK.dtype.atype.btype d, a, b-desc, sp-meta, sp-sel,
    scale-d, ...;` — arguments as `wgmma_mma_async`, plus the metadata register and selector."""
    btype = atype if btype is None else btype
    dtype = _dtype_of(d, dtype)
    return k.emit(WgmmaMmaAsyncSp(_n_of(d, dtype, n), dtype, atype, btype, d, a, b_desc,
                                  scale_d, imm_scale_a, imm_scale_b, tnspA, tnspB, satfinite,
                                  sp_meta, sp_sel))


_TAIL = "d, a-desc|{a}, b-desc, sp-meta, sp-sel, scale-d"
FORMS: list[tuple[str, Requires, str]] = [
    ("wgmma.mma_async.sp.sync.aligned.m64nNk32.{f16,f32}.f16.f16 " + _TAIL
     + ", ±1, ±1{, tA}, tB", WGMMA_SP, "sp-sel 0..1; RS form takes no tA"),
    ("wgmma.mma_async.sp.sync.aligned.m64nNk32.f32.bf16.bf16 " + _TAIL + ", ±1, ±1{, tA}, tB",
     WGMMA_SP, "sp-sel 0..1"),
    ("wgmma.mma_async.sp.sync.aligned.m64nNk16.f32.tf32.tf32 " + _TAIL + ", ±1, ±1", WGMMA_SP,
     "sp-sel 0..1"),
    ("wgmma.mma_async.sp.sync.aligned.m64nNk64.{f16,f32}.{e4m3,e5m2}.{e4m3,e5m2} " + _TAIL
     + ", ±1, ±1", WGMMA_SP, "sp-sel 0"),
    ("wgmma.mma_async.sp.sync.aligned.m64nNk64.s32.{s8.s8,u8.u8}{.satfinite} " + _TAIL,
     WGMMA_SP, "sp-sel 0; N = 8, 16, 24, 32..256 step 16"),
    ("wgmma.mma_async.sp.sync.aligned.m64nNk64.s32.{s8.u8,u8.s8}{.satfinite} " + _TAIL,
     WGMMA_SP_MIXED_INT, "mixed signedness: PTX 8.4 (ptxas)"),
]
