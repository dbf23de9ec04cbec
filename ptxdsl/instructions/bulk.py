"""Non-tensor bulk copies and their companions (PTX ISA §9.7.9.25.4, §9.7.9.25.6, §9.7.9.15).

cp.async.bulk (1-D) in each direction, cp.async.bulk.prefetch.L2, cp.reduce.async.bulk, the
bulk async-group instructions (commit_group, wait_group{.read}). The operand checks shared
with the tensor forms (`bulk_tensor.py`) live here too; createpolicy, which makes the 64-bit
policy the `.L2::cache_hint` forms take, is in `cache_policy.py`.

Every form was checked against ptxas 13 through nvJitLink; where the digest and ptxas differ,
ptxas wins (see the notes in FORMS).
"""

from __future__ import annotations

import enum
from typing import Any

import attrs

from ..errors import BuildError, OperandError
from ..operands import Addr, Imm, Reg, Symbol
from ..types import Requires, ScalarType, StateSpace, req
from . import _ptx_args as A
from ._tma_addr import MBARRIER, cvta_advice, hint_fits, symbol_fit
from .base import (
    Instruction,
    _given,
    check_addr,
    check_dst,
    check_enum,
    check_imm,
    int_like,
    refuse,
)

__all__ = [
    "Completion", "RedOp", "CtaGroup",
    "CpAsyncBulk", "CpAsyncBulkPrefetch", "CpReduceAsyncBulk", "CpAsyncBulkCommitGroup",
    "CpAsyncBulkWaitGroup",
    "cp_async_bulk", "cp_async_bulk_cp_mask", "cp_async_bulk_prefetch", "cp_reduce_async_bulk",
    "cp_async_bulk_commit_group", "cp_async_bulk_wait_group", "cp_async_bulk_wait_group_read",
    "FORMS",
]

# -- requirements (digest §0.1, confirmed with ptxas) ---------------------------------------------
R80 = req("8.0", 90)                   # the Hopper bulk-copy baseline
R86 = req("8.6", 90)                   # .shared::cta destinations
R86_SM100 = req("8.6", 100)            # portable Blackwell features (.cp_mask, some tensor modes)
BLACKWELL = req("8.6", 100, arch=(100, 101, 103, 110), family=True)  # sm_100a-class only

CLUSTER, CTA, GLOBAL = StateSpace.shared_cluster, StateSpace.shared_cta, StateSpace.global_


class Completion(enum.Enum):
    """How an async bulk operation reports completion."""

    mbarrier = "mbarrier::complete_tx::bytes"
    bulk_group = "bulk_group"


class RedOp(enum.Enum):
    """The reduction of cp.reduce.async.bulk{.tensor}."""

    add = "add"
    min = "min"
    max = "max"
    inc = "inc"
    dec = "dec"
    and_ = "and"
    or_ = "or"
    xor = "xor"


class CtaGroup(enum.Enum):
    """`.cta_group::1` / `.cta_group::2` (Blackwell); builders also take the ints 1 and 2."""

    one = "cta_group::1"
    two = "cta_group::2"


# -- shared operand checks ------------------------------------------------------------------------
def space_arg(insn: str, operand: str, value: Any, allowed) -> StateSpace:
    """A state-space qualifier, named as in every cuda::ptx family (`_ptx_args.space`):
    'shared' / space_shared is .shared::cta, 'cluster' / space_cluster .shared::cluster."""
    return A.space(insn, operand, value, allowed)


def cta_group_arg(insn: str, value: Any) -> CtaGroup:
    """`.cta_group::1/2`: the ints 1 and 2, 'cta_group::1', cuda::ptx's 'cta_group_1', a
    CtaGroup."""
    if isinstance(value, str):
        value = value.lstrip(".").replace("cta_group_", "cta_group::")
    value = int_like(value)
    value = {1: CtaGroup.one, 2: CtaGroup.two}.get(value, value) \
        if isinstance(value, int) and not isinstance(value, bool) else value
    return check_enum(insn, "cta_group", value, CtaGroup)


def is_cta_group(value: Any) -> bool:
    """Whether a positional argument is a cta_group (cuda::ptx's overloads that take one)."""
    try:
        cta_group_arg("", value)
        return True
    except BuildError:
        return False


def mem_addr(insn: str, operand: str, value: Any, space: StateSpace, align: int = 16,
             size: int | None = None, what: str = "") -> Addr:
    """A bulk-copy memory operand in `space`, `align`-byte aligned where that is knowable, and
    (when `size` is given) with `size` bytes inside a symbol base.

    Shared operands take symbols or 32/64-bit registers, global ones symbols or 64-bit registers.
    A register known to hold an address of another space (generic included) is refused: PTX
    would read it as an address in the wrong window.
    """
    addr = check_addr(insn, operand, value, space)
    base = addr.base
    if isinstance(base, Reg) and base.space is not None:
        # the rule of every TMA family (`_tma_addr.tma_addr`): the builders convert a generic
        # pointer first; given to the instruction itself it is refused
        if not hint_fits(base.space, space):
            raise OperandError(insn, operand, f"a register holding a .{space.value} address "
                               f"({cvta_advice(base.space, space)})",
                               f"%{base.name}, which holds a .{base.space.value or 'generic'} "
                               "address")
    symbol_fit(insn, operand, addr, align=align, size=size, what=what)
    return addr


def mask16(insn: str, operand: str, value: Any) -> Reg | Imm:
    """A 16-bit mask (ctaMask, byteMask): a .b16/.u16/.s16 register or an immediate."""
    if isinstance(value, Reg):
        if value.type.bits != 16 or value.type.is_float:
            raise OperandError(insn, operand, "a 16-bit register (.b16/.u16) or immediate; "
                               "ptxas rejects a wider register (convert with cvt.u16.u32)",
                               _given(value))
        return value
    if isinstance(value, Imm):
        value = value.value
    value = int_like(value)
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 0xFFFF:
        raise OperandError(insn, operand, "a 16-bit register or an immediate in [0, 65535]",
                           _given(value))
    return Imm(value, ScalarType.b16)


def policy64(insn: str, value: Any) -> Reg:
    """The cache-policy operand of `.L2::cache_hint`: a 64-bit register (from createpolicy)."""
    if not isinstance(value, Reg) or value.type.bits != 64 or value.type.is_float:
        raise OperandError(insn, "cache_policy", "a 64-bit register holding an L2 cache policy "
                           "(make one with createpolicy_fractional)", _given(value))
    return value


def cache_hint_arg(insn: str, hint: bool | None, policy: Any) -> tuple[bool, Reg | None]:
    """Normalise the `.L2::cache_hint` qualifier and its cache-policy operand."""
    if hint is None:
        hint = policy is not None
    if hint and policy is None:
        refuse(insn, ".L2::cache_hint needs a 64-bit cache-policy register (cache_policy=...)")
    if not hint and policy is not None:
        refuse(insn, "a cache-policy operand needs the .L2::cache_hint qualifier")
    return hint, (policy64(insn, policy) if hint else None)


def multicast_arg(insn: str, multicast: bool | None, mask: Any, dst: StateSpace
                  ) -> tuple[bool, Reg | Imm | None]:
    """Normalise `.multicast::cluster` and its 16-bit ctaMask operand."""
    if multicast is None:
        multicast = mask is not None
    if multicast and mask is None:
        refuse(insn, ".multicast::cluster needs a 16-bit ctaMask operand (cta_mask=...)")
    if not multicast and mask is not None:
        refuse(insn, "a ctaMask operand needs the .multicast::cluster qualifier")
    if multicast and dst is not CLUSTER:
        refuse(insn, ".multicast::cluster needs a .shared::cluster destination (ptxas refuses "
               "it with .shared::cta)")
    return multicast, (mask16(insn, "cta_mask", mask) if multicast else None)


# ptxas 13: "value '1048576' out of range, expected to be in range [0..1048560]" for the size of
# every cp.async.bulk / cp.async.bulk.prefetch / cp.reduce.async.bulk form (1 MiB - 16).
BULK_SIZE_MAX = 1048560


def size_arg(insn: str, value: Any) -> Reg | Imm:
    """A byte count: a 32-bit register, or an immediate in [0, 1048560] that is a multiple
    of 16 (ptxas's range)."""
    if isinstance(value, Reg):
        return check_dst(insn, "size", value, ScalarType.b32)
    n = check_imm(insn, "size", value, 0, BULK_SIZE_MAX)
    if n % 16:
        raise OperandError(insn, "size", "a multiple of 16 bytes (ptxas rejects other sizes)",
                           n)
    return Imm(n, ScalarType.u32)


def completion_arg(insn: str, completion: Any, mbar: Any, is_store: bool) -> Completion:
    """The completion mechanism: an mbarrier for loads, a bulk async-group for stores."""
    if completion is None:
        completion = Completion.mbarrier if (mbar is not None or not is_store) \
            else Completion.bulk_group
    completion = check_enum(insn, "completion", completion, Completion)
    if is_store and completion is Completion.mbarrier:
        refuse(insn, "a store to .global completes through a bulk async-group (.bulk_group, "
               "then commit_group/wait_group); mbarrier completion on a store is not allowed")
    if not is_store and completion is Completion.bulk_group:
        refuse(insn, "a copy into shared memory completes on an mbarrier "
               "(.mbarrier::complete_tx::bytes); .bulk_group is for stores to .global")
    if completion is Completion.mbarrier and mbar is None:
        refuse(insn, "mbarrier completion needs the mbarrier's shared address (bar=...)")
    return completion


# -- cp.async.bulk ---------------------------------------------------------------------------------
_DIRECTIONS = {(CLUSTER, GLOBAL): R80, (CTA, GLOBAL): R86, (CLUSTER, CTA): R80, (GLOBAL, CTA): R80}


@attrs.frozen
class CpAsyncBulk(Instruction):
    """1-D bulk copy, four directions (PTX 8.0, sm_90; global->shared::cta PTX 8.6):

    `cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes{.multicast::cluster}
    {.L2::cache_hint} [dstMem], [srcMem], size, [mbar]{, ctaMask}{, cache-policy};`
    `cp.async.bulk.shared::cta.global.mbarrier::complete_tx::bytes{.L2::cache_hint}
    [dstMem], [srcMem], size, [mbar]{, cache-policy};`
    `cp.async.bulk.shared::cluster.shared::cta.mbarrier::complete_tx::bytes
    [dstMem], [srcMem], size, [mbar];`
    `cp.async.bulk.global.shared::cta.bulk_group{.L2::cache_hint}{.cp_mask}
    [dstMem], [srcMem], size{, cache-policy}{, byteMask};`  (.cp_mask: PTX 8.6, sm_100)
    """

    MNEMONIC = "cp.async.bulk"
    dst_space: StateSpace
    src_space: StateSpace
    dst: Any
    src: Any
    size: Any
    mbar: Any = None
    completion: Completion | None = None
    multicast: bool | None = None
    cta_mask: Any = None
    cache_hint: bool | None = None
    cache_policy: Any = None
    byte_mask: Any = None

    def __attrs_post_init__(self):
        n = "cp.async.bulk"
        spaces = (CLUSTER, CTA, GLOBAL)
        self._set("dst_space", space_arg(n, "dst_space", self.dst_space, spaces))
        self._set("src_space", space_arg(n, "src_space", self.src_space, spaces))
        if (self.dst_space, self.src_space) not in _DIRECTIONS:
            refuse(n, f"no .{self.dst_space.value}.{self.src_space.value} direction; use "
                   + ", ".join(f".{d.value}.{s.value}" for d, s in _DIRECTIONS))
        n = f"cp.async.bulk.{self.dst_space.value}.{self.src_space.value}"
        is_store = self.dst_space is GLOBAL
        self._set("completion", completion_arg(n, self.completion, self.mbar, is_store))
        mc, mask = multicast_arg(n, self.multicast, self.cta_mask, self.dst_space)
        if mc and self.src_space is not GLOBAL:
            refuse(n, ".multicast::cluster needs a .global source")
        self._set("multicast", mc)
        self._set("cta_mask", mask)
        hint, policy = cache_hint_arg(n, self.cache_hint, self.cache_policy)
        if hint and self.src_space is CTA and self.dst_space is CLUSTER:
            refuse(n, ".L2::cache_hint is not allowed on a shared::cta -> shared::cluster copy")
        self._set("cache_hint", hint)
        self._set("cache_policy", policy)
        if self.byte_mask is not None:
            if not is_store:
                refuse(n, ".cp_mask (byteMask) exists only on the store to .global")
            self._set("byte_mask", mask16(n, "byte_mask", self.byte_mask))
        self._set("size", size_arg(n, self.size))
        nbytes = int(self.size.value) if isinstance(self.size, Imm) else None
        self._set("dst", mem_addr(n, "dst", self.dst, self.dst_space, size=nbytes))
        self._set("src", mem_addr(n, "src", self.src, self.src_space, size=nbytes))
        if self.mbar is not None:
            self._set("mbar", mem_addr(n, "mbar", self.mbar, self.dst_space, 8, 8, MBARRIER))

    @property
    def requires(self) -> Requires:
        r = _DIRECTIONS[(self.dst_space, self.src_space)]
        return r.merge(R86_SM100) if self.byte_mask is not None else r

    def opcode(self) -> str:
        completion = self.completion
        assert completion is not None   # __attrs_post_init__ picks one
        q = f"cp.async.bulk.{self.dst_space.value}.{self.src_space.value}.{completion.value}"
        if self.multicast:
            q += ".multicast::cluster"
        if self.cache_hint:
            q += ".L2::cache_hint"
        if self.byte_mask is not None:
            q += ".cp_mask"
        return q

    def operands(self):
        return [op for op in (self.dst, self.src, self.size, self.mbar, self.cta_mask,
                              self.cache_policy, self.byte_mask) if op is not None]


@attrs.frozen
class CpAsyncBulkPrefetch(Instruction):
    """`cp.async.bulk.prefetch.L2.global{.L2::cache_hint} [srcMem], size{, cache-policy};`
    (PTX 8.0, sm_90)."""

    MNEMONIC = "cp.async.bulk.prefetch.L2.global"
    src: Any
    size: Any
    cache_hint: bool | None = None
    cache_policy: Any = None

    REQUIRES = R80

    def __attrs_post_init__(self):
        n = self.MNEMONIC
        hint, policy = cache_hint_arg(n, self.cache_hint, self.cache_policy)
        self._set("cache_hint", hint)
        self._set("cache_policy", policy)
        self._set("src", mem_addr(n, "src", self.src, GLOBAL))
        self._set("size", size_arg(n, self.size))

    def opcode(self) -> str:
        return self.MNEMONIC + (".L2::cache_hint" if self.cache_hint else "")

    def operands(self):
        return [self.src, self.size] + ([self.cache_policy] if self.cache_hint else [])


# -- cp.reduce.async.bulk --------------------------------------------------------------------------
T = ScalarType
# (dst space, op) -> element types ptxas accepts (digest §6; ptxas 13 is stricter than the ISA
# grammar for shared::cluster: no .b64 for and/or/xor, no .s64/.u64 for min/max).
RED_TYPES: dict[tuple[StateSpace, RedOp], tuple[ScalarType, ...]] = {}
for _op, _c, _g in (
        (RedOp.add, (T.u32, T.s32, T.u64), (T.u32, T.s32, T.u64, T.f16, T.bf16, T.f32, T.f64)),
        (RedOp.min, (T.u32, T.s32), (T.u32, T.s32, T.u64, T.s64, T.f16, T.bf16)),
        (RedOp.max, (T.u32, T.s32), (T.u32, T.s32, T.u64, T.s64, T.f16, T.bf16)),
        (RedOp.inc, (T.u32,), (T.u32,)), (RedOp.dec, (T.u32,), (T.u32,)),
        (RedOp.and_, (T.b32,), (T.b32, T.b64)), (RedOp.or_, (T.b32,), (T.b32, T.b64)),
        (RedOp.xor, (T.b32,), (T.b32, T.b64))):
    RED_TYPES[(CLUSTER, _op)] = _c
    RED_TYPES[(GLOBAL, _op)] = _g


def _red_hint(op: RedOp, t: ScalarType) -> str:
    if op is RedOp.add and t is T.s64:
        return " (use .u64: a two's-complement add is the same bits)"
    if op in (RedOp.and_, RedOp.or_, RedOp.xor) and t.is_int:
        return f" (bitwise reductions take .b{t.bits})"
    if op not in (RedOp.and_, RedOp.or_, RedOp.xor) and t.kind == "b":
        return " (arithmetic reductions take .u/.s/.f types)"
    return ""


@attrs.frozen
class CpReduceAsyncBulk(Instruction):
    """1-D bulk reduction into shared::cluster or global memory (PTX 8.0, sm_90):

    `cp.reduce.async.bulk.shared::cluster.shared::cta.mbarrier::complete_tx::bytes.op.type
    [dstMem], [srcMem], size, [mbar];`
    `cp.reduce.async.bulk.global.shared::cta.bulk_group{.L2::cache_hint}.op{.noftz}.type
    [dstMem], [srcMem], size{, cache-policy};`

    `.noftz` is emitted for `.add` on `.f16`/`.bf16`, where ptxas requires it.
    """

    MNEMONIC = "cp.reduce.async.bulk"
    dst_space: StateSpace
    op: RedOp
    type: ScalarType
    dst: Any
    src: Any
    size: Any
    mbar: Any = None
    completion: Completion | None = None
    cache_hint: bool | None = None
    cache_policy: Any = None

    REQUIRES = R80

    def __attrs_post_init__(self):
        n = self.MNEMONIC
        self._set("dst_space", space_arg(n, "dst_space", self.dst_space, (CLUSTER, GLOBAL)))
        self._set("op", A.op(n, self.op, RedOp))
        self._set("type", check_enum(n, "type", self.type, ScalarType))
        n = f"cp.reduce.async.bulk.{self.dst_space.value}.shared::cta"
        allowed = RED_TYPES[(self.dst_space, self.op)]
        if self.type not in allowed:
            refuse(n, f".{self.op.value} into .{self.dst_space.value} takes "
                   + "/".join("." + t.value for t in allowed)
                   + f", not .{self.type.value}" + _red_hint(self.op, self.type))
        is_store = self.dst_space is GLOBAL
        self._set("completion", completion_arg(n, self.completion, self.mbar, is_store))
        hint, policy = cache_hint_arg(n, self.cache_hint, self.cache_policy)
        if hint and not is_store:
            refuse(n, ".L2::cache_hint exists only on the reduction into .global")
        self._set("cache_hint", hint)
        self._set("cache_policy", policy)
        self._set("size", size_arg(n, self.size))
        nbytes = int(self.size.value) if isinstance(self.size, Imm) else None
        self._set("dst", mem_addr(n, "dst", self.dst, self.dst_space, size=nbytes))
        self._set("src", mem_addr(n, "src", self.src, CTA, size=nbytes))
        if self.mbar is not None:
            self._set("mbar", mem_addr(n, "mbar", self.mbar, CLUSTER, 8, 8, MBARRIER))

    @property
    def noftz(self) -> bool:
        """Whether the opcode carries `.noftz`: PTX requires it on an `.add` of `.f16`/`.bf16`."""
        return self.op is RedOp.add and self.type in (T.f16, T.bf16)

    def opcode(self) -> str:
        completion = self.completion
        assert completion is not None   # __attrs_post_init__ picks one
        q = f"cp.reduce.async.bulk.{self.dst_space.value}.shared::cta.{completion.value}"
        if self.cache_hint:
            q += ".L2::cache_hint"
        return f"{q}.{self.op.value}{'.noftz' if self.noftz else ''}.{self.type.value}"

    def operands(self):
        ops = [self.dst, self.src, self.size]
        if self.mbar is not None:
            ops.append(self.mbar)
        if self.cache_hint:
            ops.append(self.cache_policy)
        return ops


# -- bulk async-groups -----------------------------------------------------------------------------
@attrs.frozen
class CpAsyncBulkCommitGroup(Instruction):
    """`cp.async.bulk.commit_group;` (PTX 8.0, sm_90)."""

    MNEMONIC = "cp.async.bulk.commit_group"
    REQUIRES = R80

    def opcode(self) -> str:
        return self.MNEMONIC


@attrs.frozen
class CpAsyncBulkWaitGroup(Instruction):
    """`cp.async.bulk.wait_group{.read} N;` with N an integer immediate (PTX 8.0, sm_90)."""

    MNEMONIC = "cp.async.bulk.wait_group"
    n: Any
    read: bool = False
    REQUIRES = R80

    def __attrs_post_init__(self):
        self._set("n", check_imm(self.opcode(), "N", self.n, 0, 0x7FFFFFFF))

    def opcode(self) -> str:
        return self.MNEMONIC + (".read" if self.read else "")

    def operands(self):
        return [Imm(self.n, ScalarType.u32)]


# -- builders (cuda::ptx names and argument order, kernel first) ---------------------------------
_COPY = (("dst_space", "src_space", "dst_mem", "src_mem", "size", "smem_bar", "*cache_policy"),
         ("dst_space", "src_space", "dst_mem", "src_mem", "size", "smem_bar", "cta_mask",
          "*cache_policy"),
         ("dst_space", "src_space", "dst_mem", "src_mem", "size", "*cache_policy", "*byte_mask"))


def converted(k, insn: str, addr: Any, space: Any, allowed, operand: str = "space") -> Any:
    """`addr` for an operand in `space` (the argument `operand`), a generic pointer converted
    (`_ptx_args.space_addr`)."""
    return A.space_addr(k, insn, addr, space_arg(insn, operand, space, allowed))


def _bar(k, insn: str, bar: Any, dst_space: Any) -> Any:
    if bar is None:
        return None
    return converted(k, insn, bar, dst_space, (CLUSTER, CTA, GLOBAL), "dst_space")


@A.overloads(*_COPY)
def cp_async_bulk(k, *args, **kw) -> CpAsyncBulk:
    """cuda::ptx's overloads, by direction:
    `(k, 'cluster'|'shared', 'global', dst_mem, src_mem, size, smem_bar)`,
    `(k, 'cluster', 'global', dst_mem, src_mem, size, smem_bar, cta_mask)` (.multicast::cluster),
    `(k, 'cluster', 'shared', dst_mem, src_mem, size, smem_bar)` and
    `(k, 'global', 'shared', dst_mem, src_mem, size)`; `cache_policy=` (.L2::cache_hint) and,
    on the store, `byte_mask=` (.cp_mask, as cp_async_bulk_cp_mask) are keyword extensions."""
    _, a = A.bind("cp_async_bulk", args, kw, _COPY)
    n, spaces = "cp.async.bulk", (CLUSTER, CTA, GLOBAL)
    return k.emit(_in_cluster(k, CpAsyncBulk(
        a["dst_space"], a["src_space"],
        converted(k, n, a["dst_mem"], a["dst_space"], spaces, "dst_space"),
        converted(k, n, a["src_mem"], a["src_space"], spaces, "src_space"), a["size"],
        _bar(k, n, a.get("smem_bar"), a["dst_space"]), cta_mask=a.get("cta_mask"),
        cache_policy=a.get("cache_policy"), byte_mask=a.get("byte_mask"))))


def _in_cluster(k, insn: Any) -> Any:
    """A multicast's constant ctaMask names only CTAs of the kernel's declared cluster."""
    if getattr(insn, "cta_mask", None) is not None:
        A.cluster_mask(k, insn.name, "cta_mask", insn.cta_mask)
    return insn


_CP_MASK = (("dst_space", "src_space", "dst_mem", "src_mem", "size", "byte_mask",
             "*cache_policy"),)


@A.overloads(*_CP_MASK)
def cp_async_bulk_cp_mask(k, *args, **kw) -> CpAsyncBulk:
    """`(k, 'global', 'shared', dst_mem, src_mem, size, byte_mask)`:
    `cp.async.bulk.global.shared::cta.bulk_group.cp_mask [dstMem], [srcMem], size, byteMask;`"""
    _, a = A.bind("cp_async_bulk_cp_mask", args, kw, _CP_MASK)
    return cp_async_bulk(k, **a)


def cp_async_bulk_prefetch(k, src, size, cache_policy=None) -> CpAsyncBulkPrefetch:
    """`cp.async.bulk.prefetch.L2.global [src], size{, policy}` (no cuda::ptx counterpart in
    CCCL 13.0; a generic pointer is converted to .global)."""
    src = A.space_addr(k, "cp.async.bulk.prefetch.L2.global", src, GLOBAL)
    return k.emit(CpAsyncBulkPrefetch(src, size, cache_policy=cache_policy))


def cp_reduce_async_bulk(k, dst_space, src_space, op, dst_mem, src_mem, size, rdsmem_bar=None,
                         *, type=None, cache_policy=None) -> CpReduceAsyncBulk:
    """`(k, 'global', 'shared', op, dst_mem, src_mem, size)` or `(k, 'cluster', 'shared', op,
    dst_mem, src_mem, size, rdsmem_bar)`, as cuda::ptx; op 'add' / ptx.op_add / 'op_add', ...

    The element type (cuda::ptx's pointer type) is `type=`, or the source symbol's type when it
    is a valid one.
    """
    n = "cp.reduce.async.bulk"
    space_arg(n, "src_space", src_space, (CTA,))
    if type is None:
        base = src_mem.base if isinstance(src_mem, Addr) else src_mem
        if isinstance(base, Symbol) and base.type is not T.b8:
            type = base.type
        else:
            refuse(n, "pass type=... (the element type of the reduction)")
    return k.emit(CpReduceAsyncBulk(
        dst_space, op, type, converted(k, n, dst_mem, dst_space, (CLUSTER, GLOBAL), "dst_space"),
        A.space_addr(k, n, src_mem, CTA), size, _bar(k, n, rdsmem_bar, CLUSTER),
        cache_policy=cache_policy))


def cp_async_bulk_commit_group(k) -> CpAsyncBulkCommitGroup:
    """`cp.async.bulk.commit_group;`"""
    return k.emit(CpAsyncBulkCommitGroup())


def cp_async_bulk_wait_group(k, n: int) -> CpAsyncBulkWaitGroup:
    """`cp.async.bulk.wait_group N;` (N an immediate)."""
    return k.emit(CpAsyncBulkWaitGroup(n))


def cp_async_bulk_wait_group_read(k, n: int) -> CpAsyncBulkWaitGroup:
    """`cp.async.bulk.wait_group.read N;` (N an immediate)."""
    return k.emit(CpAsyncBulkWaitGroup(n, read=True))


# -- the version/target table ----------------------------------------------------------------------
FORMS: list[tuple[str, Requires, str]] = [
    ("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes",
     _DIRECTIONS[(CLUSTER, GLOBAL)], "+ .multicast::cluster (16-bit ctaMask), .L2::cache_hint"),
    ("cp.async.bulk.shared::cta.global.mbarrier::complete_tx::bytes",
     _DIRECTIONS[(CTA, GLOBAL)], "+ .L2::cache_hint; no multicast"),
    ("cp.async.bulk.shared::cluster.shared::cta.mbarrier::complete_tx::bytes",
     _DIRECTIONS[(CLUSTER, CTA)], "no cache hint"),
    ("cp.async.bulk.global.shared::cta.bulk_group", _DIRECTIONS[(GLOBAL, CTA)],
     "+ .L2::cache_hint"),
    ("cp.async.bulk.global.shared::cta.bulk_group.cp_mask", R80.merge(R86_SM100),
     "16-bit byteMask"),
    ("cp.async.bulk.prefetch.L2.global", CpAsyncBulkPrefetch.REQUIRES, "+ .L2::cache_hint"),
    ("cp.reduce.async.bulk.shared::cluster.shared::cta.mbarrier::complete_tx::bytes.op.type",
     CpReduceAsyncBulk.REQUIRES, "add u32/s32/u64; min/max u32/s32; inc/dec u32; "
     "and/or/xor b32 (ptxas: no b64)"),
    ("cp.reduce.async.bulk.global.shared::cta.bulk_group.op.type", CpReduceAsyncBulk.REQUIRES,
     "+ .L2::cache_hint; .add.noftz for f16/bf16"),
    ("cp.async.bulk.commit_group", CpAsyncBulkCommitGroup.REQUIRES, ""),
    ("cp.async.bulk.wait_group{.read} N", CpAsyncBulkWaitGroup.REQUIRES, "N an immediate"),
]
