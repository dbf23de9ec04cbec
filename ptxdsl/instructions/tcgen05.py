"""Blackwell tensor memory (TMEM), all but the MMA and the loads/stores (PTX ISA §9.7.16;
cuda::ptx tcgen05_alloc.h, tcgen05_fence.h, tcgen05_commit.h, tcgen05_wait.h, tcgen05_shift.h,
tcgen05_cp.h)::

    tcgen05.alloc.cta_group.sync.aligned.shared::cta.b32 [dst], nCols;
    tcgen05.dealloc.cta_group.sync.aligned.b32 taddr, nCols;
    tcgen05.relinquish_alloc_permit.cta_group.sync.aligned;
    tcgen05.fence::before_thread_sync;  tcgen05.fence::after_thread_sync;
    tcgen05.commit.cta_group.mbarrier::arrive::one.shared::cluster{.multicast::cluster}.b64
        [smem_bar]{, ctaMask};
    tcgen05.wait::ld.sync.aligned;  tcgen05.wait::st.sync.aligned;
    tcgen05.shift.cta_group.down [taddr];
    tcgen05.cp.cta_group.shape{.multicast}{.b8x16.src_fmt} [taddr], s_desc;

`.cta_group::1` / `::2` is `ptx.cta_group_1` / `ptx.cta_group_2` (or 1, 2, 'cta_group::2').
A TMEM address (`taddr`) is the 32-bit value tcgen05.alloc writes to shared memory, loaded
into a register; ptxdsl takes a register only, as cuda::ptx binds it (ptxas 13.5 crashes on
an immediate `[0]` in shift and cp).
tcgen05.ld and tcgen05.st are in `tcgen05_ldst.py`, tcgen05.mma in `tcgen05_mma.py`.

Every form needs an sm_100a-class target (sm_100a, sm_103a, sm_110a; from PTX 8.8 also the
f targets), except tcgen05.shift, which ptxas 13 refuses on every f target.
"""

from __future__ import annotations

import enum
from typing import Any

import attrs

from ..errors import OperandError
from ..operands import Addr, Imm, Reg
from ..types import Requires, ScalarType, StateSpace, req
from . import _ptx_args as A
from ._tma_addr import mbar_addr, symbol_fit, tma_addr
from .base import Instruction, _given, _n, check_enum, int_like, refuse
from .bulk import BLACKWELL, CtaGroup, cta_group_arg, mask16

__all__ = [
    "tcgen05_alloc", "tcgen05_dealloc", "tcgen05_relinquish_alloc_permit",
    "tcgen05_fence_before_thread_sync", "tcgen05_fence_after_thread_sync",
    "tcgen05_commit", "tcgen05_commit_multicast", "tcgen05_wait_ld", "tcgen05_wait_st",
    "tcgen05_shift_down",
    "tcgen05_cp_128x256b", "tcgen05_cp_4x256b", "tcgen05_cp_128x128b",
    "tcgen05_cp_64x128b_warpx2_02_13", "tcgen05_cp_64x128b_warpx2_01_23",
    "tcgen05_cp_32x128b_warpx4",
    "tcgen05_cp_128x256b_b8x16_b6x16_p32", "tcgen05_cp_4x256b_b8x16_b6x16_p32",
    "tcgen05_cp_128x128b_b8x16_b6x16_p32", "tcgen05_cp_64x128b_warpx2_02_13_b8x16_b6x16_p32",
    "tcgen05_cp_64x128b_warpx2_01_23_b8x16_b6x16_p32", "tcgen05_cp_32x128b_warpx4_b8x16_b6x16_p32",
    "tcgen05_cp_128x256b_b8x16_b4x16_p64", "tcgen05_cp_4x256b_b8x16_b4x16_p64",
    "tcgen05_cp_128x128b_b8x16_b4x16_p64", "tcgen05_cp_64x128b_warpx2_02_13_b8x16_b4x16_p64",
    "tcgen05_cp_64x128b_warpx2_01_23_b8x16_b4x16_p64", "tcgen05_cp_32x128b_warpx4_b8x16_b4x16_p64",
    "FORMS",
]

S = StateSpace
T = ScalarType
#: Every tcgen05 form: sm_100a, sm_103a, sm_110a (sm_101a before CUDA 13 renamed it), and
#: from PTX 8.8 sm_100f / sm_103f / sm_110f (measured with ptxas 13.5).
TCGEN05 = BLACKWELL
#: tcgen05.shift: ptxas 13.5 refuses it on sm_100f, sm_103f and sm_110f.
TCGEN05_NO_FAMILY = req("8.6", 100, arch=tuple(sorted(BLACKWELL.arch_specific)))

# ptxas: nCols is "in range [32..512]", a "multiple of 32" and a "power of 2".
N_COLS = (32, 64, 128, 256, 512)
TMEM_SLOT = "the TMEM address tcgen05.alloc writes (a .b32 slot: 4 bytes, 4-byte aligned)"


# -- operand checks shared with tcgen05_ldst and tcgen05_mma ----------------------------------
def b32_reg(insn: Any, operand: str, value: Any, what: str) -> Reg:
    """A 32-bit integer register (.b32/.u32/.s32): ptxas refuses .f32 and other widths."""
    if not isinstance(value, Reg) or value.type.bits != 32 or value.type.kind not in "bus":
        raise OperandError(_n(insn), operand, "a 32-bit integer register (.b32/.u32) holding "
                           + what, _given(value))
    return value


def taddr_reg(insn: Any, operand: str, value: Any) -> Reg:
    """A TMEM address: a .b32/.u32 register not known to hold an address of a state space (a
    register from `k.mov(slot)` is the slot's shared address, not the TMEM address in it)."""
    reg = b32_reg(insn, operand, value, "a tensor-memory address (load it from the slot "
                  "tcgen05.alloc wrote with ld.shared.b32)")
    if reg.space is not None:
        raise OperandError(_n(insn), operand, "a tensor-memory address (the value tcgen05.alloc "
                           "wrote to shared memory, loaded with ld.shared.b32)",
                           f"{_given(reg)}, which holds a .{reg.space.value or 'generic'} "
                           "address")
    return reg


def taddr_operand(insn: Any, operand: str, value: Any) -> Addr:
    """`[taddr]` or `[taddr+offset]`: a TMEM address register (`taddr_reg`) with an optional
    constant offset (an `Addr`)."""
    if isinstance(value, Addr):
        if not isinstance(value.base, Reg):
            raise OperandError(_n(insn), operand, "a register holding a tensor-memory address "
                               "(ptxas takes no symbol or immediate here)", value.render())
        taddr_reg(insn, operand, value.base)
        return value
    return Addr(taddr_reg(insn, operand, value))


def n_cols_arg(insn: Any, value: Any) -> Reg | Imm:
    """nCols: a 32-bit integer register, or a power of two in [32, 512]."""
    if isinstance(value, Reg):
        return b32_reg(insn, "n_cols", value, "a number of TMEM columns")
    n = int_like(value.value if isinstance(value, Imm) else value)
    if type(n) is not int or n not in N_COLS:
        raise OperandError(_n(insn), "n_cols", "a number of TMEM columns: a power of two in [32, "
                           "512] (32, 64, 128, 256 or 512), or a 32-bit register",
                           _given(n) if type(n) is not int else n)
    return Imm(n, T.u32)


def s_desc_arg(insn: Any, operand: str, value: Any) -> Reg | Imm:
    """A 64-bit shared-memory descriptor: a .b64/.u64 register, or its value (an int in [0,
    2^64): ptxas would take -1 as all ones, ptxdsl asks for the value meant)."""
    if isinstance(value, Reg):
        if value.type.bits != 64 or value.type.kind not in "bus":
            raise OperandError(_n(insn), operand, "a 64-bit register (.b64/.u64) holding a "
                               "shared-memory descriptor", _given(value))
        return value
    n = int_like(value.value if isinstance(value, Imm) else value)
    if type(n) is not int or not 0 <= n < 1 << 64:
        raise OperandError(_n(insn), operand, f"an immediate in [0, {(1 << 64) - 1}] for .b64 "
                           "(a shared-memory descriptor's value) or a 64-bit register (.b64/"
                           ".u64) holding it", _given(value))
    return Imm(n, T.b64)


def _cta_group(insn: Any, value: Any) -> CtaGroup:
    return cta_group_arg(insn if isinstance(insn, str) else insn.MNEMONIC, value)


def one_cta_group(k: Any, insn: Any) -> Any:
    """`insn` (a tcgen05 instruction with a `cta_group`), refused when the kernel already has a
    tcgen05 instruction of the other CTA group: ptxas rejects the whole function ("uses single
    CTA(.cta_group::1) and CTA pair granularity(.cta_group::2) and that is not allowed"); and
    `.cta_group::2` in a kernel whose declared cluster (.reqnctapercluster) has an odd number
    of CTAs, where a CTA (the last) has no peer (ranks 2i and 2i+1 pair up; ptxas takes it)."""
    dims = getattr(k, "reqnctapercluster", None)
    n = A.cluster_size(k) if dims else None
    if insn.cta_group is CtaGroup.two and n is not None and n % 2:
        refuse(insn, f".cta_group::2 works on CTA pairs (cluster ranks 2i and 2i+1), but the "
               f"kernel declares .reqnctapercluster {dims}: {n} CTAs, one without a "
               "peer (use an even cluster size, or .cta_group::1)")
    for st in k.statements():
        other = getattr(st.insn, "cta_group", None)
        if (isinstance(other, CtaGroup) and other is not insn.cta_group
                and type(st.insn).MNEMONIC.startswith("tcgen05")):
            refuse(insn, f".{insn.cta_group.value} in a kernel whose {st.insn.name} (line "
                   f"{st.loc}) uses .{other.value}: ptxas refuses a function that mixes "
                   "single-CTA and CTA-pair tcgen05 instructions")
    return insn


# -- alloc / dealloc / relinquish_alloc_permit -------------------------------------------------
@attrs.frozen
class Tcgen05Alloc(Instruction):
    """`tcgen05.alloc.cta_group::{1,2}.sync.aligned.shared::cta.b32 [dst], nCols;` allocates
    nCols columns of tensor memory and writes their address to the 4-byte slot `dst`."""

    MNEMONIC = "tcgen05.alloc"
    REQUIRES = TCGEN05
    cta_group: CtaGroup
    dst: Addr
    n_cols: Reg | Imm

    def __attrs_post_init__(self):
        self._set("cta_group", _cta_group(self, self.cta_group))
        dst = tma_addr(self.name, "dst", self.dst, S.shared_cta)
        symbol_fit(self.name, "dst", dst, align=4, size=4, what=TMEM_SLOT)
        self._set("dst", dst)
        self._set("n_cols", n_cols_arg(self, self.n_cols))

    def opcode(self) -> str:
        return f"tcgen05.alloc.{self.cta_group.value}.sync.aligned.shared::cta.b32"

    def operands(self):
        return (self.dst, self.n_cols)


@attrs.frozen
class Tcgen05Dealloc(Instruction):
    """`tcgen05.dealloc.cta_group::{1,2}.sync.aligned.b32 taddr, nCols;` frees the columns
    tcgen05.alloc gave at `taddr`."""

    MNEMONIC = "tcgen05.dealloc"
    REQUIRES = TCGEN05
    cta_group: CtaGroup
    taddr: Reg
    n_cols: Reg | Imm

    def __attrs_post_init__(self):
        self._set("cta_group", _cta_group(self, self.cta_group))
        self._set("taddr", taddr_reg(self, "taddr", self.taddr))
        self._set("n_cols", n_cols_arg(self, self.n_cols))

    def opcode(self) -> str:
        return f"tcgen05.dealloc.{self.cta_group.value}.sync.aligned.b32"

    def operands(self):
        return (self.taddr, self.n_cols)


@attrs.frozen
class Tcgen05RelinquishAllocPermit(Instruction):
    """`tcgen05.relinquish_alloc_permit.cta_group::{1,2}.sync.aligned;`: this CTA will
    allocate no more tensor memory (so a CTA waiting in tcgen05.alloc may proceed)."""

    MNEMONIC = "tcgen05.relinquish_alloc_permit"
    REQUIRES = TCGEN05
    cta_group: CtaGroup

    def __attrs_post_init__(self):
        self._set("cta_group", _cta_group(self, self.cta_group))

    def opcode(self) -> str:
        return f"tcgen05.relinquish_alloc_permit.{self.cta_group.value}.sync.aligned"


# -- fence / wait ---------------------------------------------------------------------------------
class Tcgen05FenceKind(enum.Enum):
    """Which side of a thread synchronisation tcgen05.fence orders tcgen05 operations on."""

    before_thread_sync = "before_thread_sync"
    after_thread_sync = "after_thread_sync"


@attrs.frozen
class Tcgen05Fence(Instruction):
    """`tcgen05.fence::before_thread_sync;` / `tcgen05.fence::after_thread_sync;`"""

    MNEMONIC = "tcgen05.fence"
    REQUIRES = TCGEN05
    kind: Tcgen05FenceKind

    def __attrs_post_init__(self):
        self._set("kind", check_enum(self.MNEMONIC, "kind", self.kind, Tcgen05FenceKind))

    def opcode(self) -> str:
        return f"tcgen05.fence::{self.kind.value}"


class Tcgen05WaitKind(enum.Enum):
    """What tcgen05.wait waits for: this thread's tcgen05.ld or tcgen05.st operations."""

    ld = "ld"
    st = "st"


@attrs.frozen
class Tcgen05Wait(Instruction):
    """`tcgen05.wait::ld.sync.aligned;` / `tcgen05.wait::st.sync.aligned;`"""

    MNEMONIC = "tcgen05.wait"
    REQUIRES = TCGEN05
    kind: Tcgen05WaitKind

    def __attrs_post_init__(self):
        self._set("kind", check_enum(self.MNEMONIC, "kind", self.kind, Tcgen05WaitKind))

    def opcode(self) -> str:
        return f"tcgen05.wait::{self.kind.value}.sync.aligned"


# -- commit ---------------------------------------------------------------------------------------
@attrs.frozen
class Tcgen05Commit(Instruction):
    """`tcgen05.commit.cta_group::{1,2}.mbarrier::arrive::one.shared::cluster.b64 [smem_bar];`
    and, with `cta_mask`, `....shared::cluster.multicast::cluster.b64 [smem_bar], ctaMask;`:
    the mbarrier gets one arrive once this thread's earlier tcgen05 operations complete."""

    MNEMONIC = "tcgen05.commit"
    REQUIRES = TCGEN05
    cta_group: CtaGroup
    smem_bar: Addr
    cta_mask: Reg | Imm | None = None

    def __attrs_post_init__(self):
        self._set("cta_group", _cta_group(self, self.cta_group))
        self._set("smem_bar", mbar_addr(self.name, "smem_bar", self.smem_bar, S.shared_cluster))
        if self.cta_mask is not None:
            self._set("cta_mask", mask16(self.name, "cta_mask", self.cta_mask))

    def opcode(self) -> str:
        mc = ".multicast::cluster" if self.cta_mask is not None else ""
        return (f"tcgen05.commit.{self.cta_group.value}.mbarrier::arrive::one.shared::cluster"
                f"{mc}.b64")

    def operands(self):
        return (self.smem_bar,) if self.cta_mask is None else (self.smem_bar, self.cta_mask)


# -- shift ----------------------------------------------------------------------------------------
@attrs.frozen
class Tcgen05Shift(Instruction):
    """`tcgen05.shift.cta_group::{1,2}.down [taddr];`: shifts the 32-byte rows of the matrix at
    taddr down by one row (lanes 0..126 to 1..127)."""

    MNEMONIC = "tcgen05.shift"
    REQUIRES = TCGEN05_NO_FAMILY
    cta_group: CtaGroup
    taddr: Addr

    def __attrs_post_init__(self):
        self._set("cta_group", _cta_group(self, self.cta_group))
        self._set("taddr", taddr_operand(self, "taddr", self.taddr))

    def opcode(self) -> str:
        return f"tcgen05.shift.{self.cta_group.value}.down"

    def operands(self):
        return (self.taddr,)


# -- cp -------------------------------------------------------------------------------------------
class CpShape(enum.Enum):
    """tcgen05.cp's shape: rows x bits of the TMEM tile copied from shared memory."""

    s128x256b = "128x256b"
    s4x256b = "4x256b"
    s128x128b = "128x128b"
    s64x128b = "64x128b"
    s32x128b = "32x128b"


class CpMulticast(enum.Enum):
    """The warps (32-lane groups) a 64x128b / 32x128b copy is repeated to."""

    warpx2_02_13 = "warpx2::02_13"
    warpx2_01_23 = "warpx2::01_23"
    warpx4 = "warpx4"


class CpSrcFmt(enum.Enum):
    """tcgen05.cp's decompression `.b8x16.<src_fmt>`: 16 packed 6-bit or 4-bit elements in
    shared memory widened to 8 bits each in TMEM."""

    b6x16_p32 = "b6x16_p32"
    b4x16_p64 = "b4x16_p64"


_C, _M = CpShape, CpMulticast
# ptxas: ".warptype" is required with .64x128b (a warpx2 variant) and .32x128b (warpx4), and
# not allowed with the other shapes.
CP_MULTICAST: dict[CpShape, tuple[CpMulticast | None, ...]] = {
    _C.s128x256b: (None,), _C.s4x256b: (None,), _C.s128x128b: (None,),
    _C.s64x128b: (_M.warpx2_02_13, _M.warpx2_01_23), _C.s32x128b: (_M.warpx4,),
}


@attrs.frozen
class Tcgen05Cp(Instruction):
    """`tcgen05.cp.cta_group::{1,2}.shape{.multicast}{.b8x16.src_fmt} [taddr], s_desc;` with
    .shape = .128x256b | .4x256b | .128x128b | .64x128b (.warpx2::02_13 / .warpx2::01_23) |
    .32x128b (.warpx4); .src_fmt = .b6x16_p32 | .b4x16_p64 (decompression to 8 bits)."""

    MNEMONIC = "tcgen05.cp"
    REQUIRES = TCGEN05
    cta_group: CtaGroup
    shape: CpShape
    taddr: Addr
    s_desc: Reg | Imm
    multicast: CpMulticast | None = None
    src_fmt: CpSrcFmt | None = None

    def __attrs_post_init__(self):
        n = self.MNEMONIC
        self._set("cta_group", _cta_group(n, self.cta_group))
        shape = check_enum(n, "shape", self.shape, CpShape)
        self._set("shape", shape)
        if self.multicast is not None:
            self._set("multicast", check_enum(n, "multicast", self.multicast, CpMulticast))
        allowed = CP_MULTICAST[shape]
        if self.multicast not in allowed:
            want = " or ".join(f".{m.value}" for m in allowed if m is not None)
            refuse(self, f".{shape.value} copies " + (f"need {want}" if want else
                   "take no multicast qualifier") + " (ptxas)" + (
                   f", given .{self.multicast.value}" if self.multicast is not None else ""))
        if self.src_fmt is not None:
            self._set("src_fmt", check_enum(n, "src_fmt", self.src_fmt, CpSrcFmt))
        self._set("taddr", taddr_operand(self, "taddr", self.taddr))
        self._set("s_desc", s_desc_arg(self, "s_desc", self.s_desc))

    def opcode(self) -> str:
        mc = f".{self.multicast.value}" if self.multicast is not None else ""
        fmt = f".b8x16.{self.src_fmt.value}" if self.src_fmt is not None else ""
        return f"tcgen05.cp.{self.cta_group.value}.{self.shape.value}{mc}{fmt}"

    def operands(self):
        return (self.taddr, self.s_desc)


# -- builder functions (cuda::ptx names, kernel first) -----------------------------------------
def tcgen05_alloc(k, cta_group, dst, n_cols) -> Tcgen05Alloc:
    """`tcgen05.alloc.cta_group.sync.aligned.shared::cta.b32 [dst], nCols;` (cuda::ptx
    tcgen05_alloc): `dst` is the shared::cta slot (a symbol, a shared register, or a generic
    pointer, converted) that receives the TMEM address; `n_cols` 32..512, a power of two."""
    dst = A.space_addr(k, "tcgen05.alloc", dst, S.shared_cta)
    return k.emit(one_cta_group(k, Tcgen05Alloc(cta_group, dst, n_cols)))


def tcgen05_dealloc(k, cta_group, taddr, n_cols) -> Tcgen05Dealloc:
    """`tcgen05.dealloc.cta_group.sync.aligned.b32 taddr, nCols;` (cuda::ptx tcgen05_dealloc)."""
    return k.emit(one_cta_group(k, Tcgen05Dealloc(cta_group, taddr, n_cols)))


def tcgen05_relinquish_alloc_permit(k, cta_group) -> Tcgen05RelinquishAllocPermit:
    """`tcgen05.relinquish_alloc_permit.cta_group.sync.aligned;` (cuda::ptx
    tcgen05_relinquish_alloc_permit)."""
    return k.emit(one_cta_group(k, Tcgen05RelinquishAllocPermit(cta_group)))


def tcgen05_fence_before_thread_sync(k) -> Tcgen05Fence:
    """`tcgen05.fence::before_thread_sync;` (cuda::ptx tcgen05_fence_before_thread_sync)."""
    return k.emit(Tcgen05Fence(Tcgen05FenceKind.before_thread_sync))


def tcgen05_fence_after_thread_sync(k) -> Tcgen05Fence:
    """`tcgen05.fence::after_thread_sync;` (cuda::ptx tcgen05_fence_after_thread_sync)."""
    return k.emit(Tcgen05Fence(Tcgen05FenceKind.after_thread_sync))


def tcgen05_wait_ld(k) -> Tcgen05Wait:
    """`tcgen05.wait::ld.sync.aligned;` (cuda::ptx tcgen05_wait_ld)."""
    return k.emit(Tcgen05Wait(Tcgen05WaitKind.ld))


def tcgen05_wait_st(k) -> Tcgen05Wait:
    """`tcgen05.wait::st.sync.aligned;` (cuda::ptx tcgen05_wait_st)."""
    return k.emit(Tcgen05Wait(Tcgen05WaitKind.st))


def _commit(k, cta_group, smem_bar, cta_mask) -> Tcgen05Commit:
    bar = A.space_addr(k, "tcgen05.commit", smem_bar, S.shared_cluster)
    insn = one_cta_group(k, Tcgen05Commit(cta_group, bar, cta_mask))
    if isinstance(insn.cta_mask, Imm):
        A.cluster_mask(k, insn.name, "cta_mask", insn.cta_mask)
        # cuda::ptx binds ctaMask to a 16-bit register, and ptxas 13.0 (the nvJitLink that
        # torch's CUDA 13 build loads) refuses an immediate there ("Arguments mismatch"),
        # which ptxas 13.5 takes
        insn = attrs.evolve(insn, cta_mask=k.mov(insn.cta_mask.value, type=ScalarType.b16))
    return k.emit(insn)


def tcgen05_commit(k, cta_group, smem_bar) -> Tcgen05Commit:
    """`tcgen05.commit.cta_group.mbarrier::arrive::one.shared::cluster.b64 [smem_bar];`
    (cuda::ptx tcgen05_commit): a generic pointer is converted to .shared::cluster."""
    return _commit(k, cta_group, smem_bar, None)


def tcgen05_commit_multicast(k, cta_group, smem_bar, cta_mask) -> Tcgen05Commit:
    """`tcgen05.commit.cta_group.mbarrier::arrive::one.shared::cluster.multicast::cluster.b64
    [smem_bar], ctaMask;` (cuda::ptx tcgen05_commit_multicast): the mbarrier at the same offset
    in each CTA of `cta_mask` (16 bits) gets the arrive."""
    if cta_mask is None:
        refuse("tcgen05.commit", "the multicast form needs a 16-bit cta_mask")
    return _commit(k, cta_group, smem_bar, cta_mask)


def tcgen05_shift_down(k, cta_group, taddr) -> Tcgen05Shift:
    """`tcgen05.shift.cta_group.down [taddr];` (cuda::ptx tcgen05_shift_down)."""
    return k.emit(one_cta_group(k, Tcgen05Shift(cta_group, taddr)))


def _cp_builder(shape: CpShape, multicast: CpMulticast | None, src_fmt: CpSrcFmt | None):
    """The cuda::ptx function of one tcgen05.cp shape / multicast / decompression."""
    mc = f".{multicast.value}" if multicast else ""
    fmt = f".b8x16.{src_fmt.value}" if src_fmt else ""
    form = f"tcgen05.cp.cta_group.{shape.value}{mc}{fmt} [taddr], s_desc;"
    name = "tcgen05_cp_" + (shape.value + mc + fmt).replace(".", "_").replace("::", "_")

    def build(k, cta_group, taddr, s_desc) -> Tcgen05Cp:
        return k.emit(one_cta_group(k, Tcgen05Cp(cta_group, shape, taddr, s_desc, multicast,
                                                   src_fmt)))

    build.__name__ = build.__qualname__ = name
    build.__doc__ = (f"`{form}` (cuda::ptx {name}): `taddr` a TMEM address register, "
                     "`s_desc` the 64-bit shared-memory descriptor of the source.")
    return build


_W = CpMulticast
_B6, _B4 = CpSrcFmt.b6x16_p32, CpSrcFmt.b4x16_p64
tcgen05_cp_128x256b = _cp_builder(_C.s128x256b, None, None)
tcgen05_cp_4x256b = _cp_builder(_C.s4x256b, None, None)
tcgen05_cp_128x128b = _cp_builder(_C.s128x128b, None, None)
tcgen05_cp_64x128b_warpx2_02_13 = _cp_builder(_C.s64x128b, _W.warpx2_02_13, None)
tcgen05_cp_64x128b_warpx2_01_23 = _cp_builder(_C.s64x128b, _W.warpx2_01_23, None)
tcgen05_cp_32x128b_warpx4 = _cp_builder(_C.s32x128b, _W.warpx4, None)
tcgen05_cp_128x256b_b8x16_b6x16_p32 = _cp_builder(_C.s128x256b, None, _B6)
tcgen05_cp_4x256b_b8x16_b6x16_p32 = _cp_builder(_C.s4x256b, None, _B6)
tcgen05_cp_128x128b_b8x16_b6x16_p32 = _cp_builder(_C.s128x128b, None, _B6)
tcgen05_cp_64x128b_warpx2_02_13_b8x16_b6x16_p32 = _cp_builder(_C.s64x128b, _W.warpx2_02_13, _B6)
tcgen05_cp_64x128b_warpx2_01_23_b8x16_b6x16_p32 = _cp_builder(_C.s64x128b, _W.warpx2_01_23, _B6)
tcgen05_cp_32x128b_warpx4_b8x16_b6x16_p32 = _cp_builder(_C.s32x128b, _W.warpx4, _B6)
tcgen05_cp_128x256b_b8x16_b4x16_p64 = _cp_builder(_C.s128x256b, None, _B4)
tcgen05_cp_4x256b_b8x16_b4x16_p64 = _cp_builder(_C.s4x256b, None, _B4)
tcgen05_cp_128x128b_b8x16_b4x16_p64 = _cp_builder(_C.s128x128b, None, _B4)
tcgen05_cp_64x128b_warpx2_02_13_b8x16_b4x16_p64 = _cp_builder(_C.s64x128b, _W.warpx2_02_13, _B4)
tcgen05_cp_64x128b_warpx2_01_23_b8x16_b4x16_p64 = _cp_builder(_C.s64x128b, _W.warpx2_01_23, _B4)
tcgen05_cp_32x128b_warpx4_b8x16_b4x16_p64 = _cp_builder(_C.s32x128b, _W.warpx4, _B4)


# -- forms: (form, requires, note) — rendered by ptxdsl.forms ----------------------------------
_CG = "cta_group::{1,2}"
FORMS: list[tuple[str, Requires, str]] = [
    (f"tcgen05.alloc.{_CG}.sync.aligned.shared::cta.b32 [dst], nCols", TCGEN05,
     "nCols a power of two in 32..512"),
    (f"tcgen05.dealloc.{_CG}.sync.aligned.b32 taddr, nCols", TCGEN05, ""),
    (f"tcgen05.relinquish_alloc_permit.{_CG}.sync.aligned", TCGEN05, ""),
    ("tcgen05.fence::{before,after}_thread_sync", TCGEN05, ""),
    (f"tcgen05.commit.{_CG}.mbarrier::arrive::one.shared::cluster.b64 [smem_bar]", TCGEN05,
     ""),
    (f"tcgen05.commit.{_CG}.mbarrier::arrive::one.shared::cluster.multicast::cluster.b64 "
     "[smem_bar], ctaMask", TCGEN05, "16-bit ctaMask"),
    ("tcgen05.wait::{ld,st}.sync.aligned", TCGEN05, ""),
    (f"tcgen05.shift.{_CG}.down [taddr]", TCGEN05_NO_FAMILY, "ptxas 13.5: no f targets"),
    (f"tcgen05.cp.{_CG}.{{128x256b,4x256b,128x128b}}{{.b8x16.{{b6x16_p32,b4x16_p64}}}} "
     "[taddr], s_desc", TCGEN05, ""),
    (f"tcgen05.cp.{_CG}.64x128b.warpx2::{{02_13,01_23}}{{.b8x16.{{b6x16_p32,b4x16_p64}}}} "
     "[taddr], s_desc", TCGEN05, ""),
    (f"tcgen05.cp.{_CG}.32x128b.warpx4{{.b8x16.{{b6x16_p32,b4x16_p64}}}} [taddr], s_desc",
     TCGEN05, ""),
]
