"""Memory and proxy fences, membar, and the tensor-map prefetch (PTX ISA §9.7.13.4, §9.7.9.15;
digest §3).

Builder functions are named after `cuda::ptx` and take its arguments in its order after the
kernel: `fence_proxy_tensormap_generic(k, "acquire", "gpu", addr, 128)`,
`fence_proxy_async(k, "shared")` (names as in `_ptx_args`: 'shared' is .shared::cta).
"""

from __future__ import annotations

import enum

import attrs

from ..errors import OperandError
from ..operands import Addr, Imm, Reg, Symbol
from ..types import BASE, Requires, ScalarType, Scope, Sem, StateSpace, req
from . import _ptx_args as A
from ._tma_addr import parse_space, resolve_space, tma_addr
from .base import Instruction, _given, check_enum, refuse

__all__ = ["membar", "fence", "fence_proxy_alias", "fence_proxy_async",
           "fence_proxy_tensormap_generic", "fence_mbarrier_init", "fence_sync_restrict",
           "fence_proxy_async_generic_sync_restrict", "prefetch_tensormap"]

S = StateSpace
SM90_80 = req("8.0", 90)
SM90_83 = req("8.3", 90)
SM90_86 = req("8.6", 90)
TENSORMAP_BYTES = 128


class MembarLevel(enum.Enum):
    cta = "cta"
    gl = "gl"
    sys = "sys"


@attrs.frozen
class Membar(Instruction):
    """`membar.level;` with level = .cta | .gl | .sys"""

    MNEMONIC = "membar"
    level: MembarLevel

    def __attrs_post_init__(self):
        self._set("level", check_enum("membar", "level", self.level, MembarLevel))

    def opcode(self) -> str:
        return f"membar.{self.level.value}"


_FENCE_SEMS = (Sem.sc, Sem.acq_rel, Sem.acquire, Sem.release)


@attrs.frozen
class Fence(Instruction):
    """`fence.sem.scope;` with .sem = .sc | .acq_rel | .acquire | .release and
    .scope = .cta | .cluster | .gpu | .sys (.acquire/.release: PTX 8.6, sm_90)."""

    MNEMONIC = "fence"
    sem: Sem
    scope: Scope

    def __attrs_post_init__(self):
        self._set("sem", A.sem("fence", self.sem, _FENCE_SEMS))
        self._set("scope", A.scope("fence", self.scope))

    @property
    def requires(self) -> Requires:
        if self.sem in (Sem.acquire, Sem.release):
            return SM90_86
        if self.scope is Scope.cluster:
            return req("7.8", 90)
        return BASE

    def opcode(self) -> str:
        return f"fence{self.sem.ptx}{self.scope.ptx}"


@attrs.frozen
class FenceProxyAlias(Instruction):
    """`fence.proxy.alias;`"""

    MNEMONIC = "fence.proxy.alias"
    REQUIRES = req("7.5", 75)

    def opcode(self) -> str:
        return "fence.proxy.alias"


_ASYNC_SPACES = (S.shared_cta, S.shared_cluster, S.global_, S.generic)


@attrs.frozen
class FenceProxyAsync(Instruction):
    """`fence.proxy.async{.space};` with .space = .global | .shared::cta ('shared') |
    .shared::cluster ('cluster') (generic = all spaces; ptxas rejects bare `.shared`)."""

    MNEMONIC = "fence.proxy.async"
    REQUIRES = SM90_80
    space: StateSpace = S.generic

    def __attrs_post_init__(self):
        self._set("space", A.space("fence.proxy.async", "space", self.space, _ASYNC_SPACES))

    def opcode(self) -> str:
        return "fence.proxy.async" + self.space.ptx


@attrs.frozen
class FenceProxyTensormapRelease(Instruction):
    """`fence.proxy.tensormap::generic.release.scope;` (no operands)."""

    MNEMONIC = "fence.proxy.tensormap::generic.release"
    REQUIRES = SM90_83
    scope: Scope

    def __attrs_post_init__(self):
        self._set("scope", A.scope(self.MNEMONIC, self.scope))

    def opcode(self) -> str:
        return f"fence.proxy.tensormap::generic.release{self.scope.ptx}"


def check_size_128(insn: str, size) -> int:
    """The `size` operand of the tensor-map forms: the immediate 128 (a tensor map's size), given as
    an int or an `Imm`; a register or another value is refused."""
    if isinstance(size, Reg):
        raise OperandError(insn, "size", "the immediate 128 (a register is not allowed here)",
                           _given(size))
    if isinstance(size, Imm):
        size = size.value
    if size != TENSORMAP_BYTES or isinstance(size, bool):
        refuse(insn, f"size must be the immediate 128 (a tensor map is 128 bytes), got {size!r}")
    return TENSORMAP_BYTES


@attrs.frozen
class FenceProxyTensormapAcquire(Instruction):
    """`fence.proxy.tensormap::generic.acquire.scope [addr], 128;` — `addr` is a generic
    64-bit address of a tensor map in global memory."""

    MNEMONIC = "fence.proxy.tensormap::generic.acquire"
    REQUIRES = SM90_83
    scope: Scope
    addr: Addr
    size: int = TENSORMAP_BYTES

    def __attrs_post_init__(self):
        self._set("scope", A.scope(self.MNEMONIC, self.scope))
        name = self.opcode()
        self._set("addr", tma_addr(name, "addr", self.addr, S.generic))
        self._set("size", check_size_128(name, self.size))

    def opcode(self) -> str:
        return f"fence.proxy.tensormap::generic.acquire{self.scope.ptx}"

    def operands(self):
        return (self.addr, Imm(self.size, ScalarType.u32))


@attrs.frozen
class FenceMbarrierInit(Instruction):
    """`fence.mbarrier_init.release.cluster;` (the only legal spelling)."""

    MNEMONIC = "fence.mbarrier_init"
    REQUIRES = SM90_80
    sem: Sem = Sem.release
    scope: Scope = Scope.cluster

    def __attrs_post_init__(self):
        self._set("sem", A.sem(self.MNEMONIC, self.sem, (Sem.release,)))
        self._set("scope", A.scope(self.MNEMONIC, self.scope, (Scope.cluster,)))

    def opcode(self) -> str:
        return "fence.mbarrier_init.release.cluster"


# sync_restrict pairs: .acquire goes with ::shared::cluster, .release with ::shared::cta.
_RESTRICT = {Sem.acquire: S.shared_cluster, Sem.release: S.shared_cta}


@attrs.frozen
class FenceSyncRestrict(Instruction):
    """`fence{.proxy.async::generic}.sem.sync_restrict::space.cluster;` with
    (.acquire, ::shared::cluster) or (.release, ::shared::cta)."""

    MNEMONIC = "fence.sync_restrict"
    REQUIRES = SM90_86
    sem: Sem
    space: StateSpace | None = None
    scope: Scope = Scope.cluster
    proxy_async: bool = False

    def __attrs_post_init__(self):
        insn = self.MNEMONIC
        sem = A.sem(insn, self.sem, tuple(_RESTRICT))
        self._set("sem", sem)
        want = _RESTRICT[sem]
        if self.space is None:
            self._set("space", want)
        else:
            sp = A.space(insn, "space", self.space, (S.shared_cta, S.shared_cluster))
            if sp is not want:
                refuse(insn, f".{sem.value} pairs with sync_restrict::{want.value} only: use "
                       f"space {A.space_name(want)}, or leave it out (got ::{sp.value})")
            self._set("space", sp)
        self._set("scope", A.scope(insn, self.scope, (Scope.cluster,)))

    def opcode(self) -> str:
        proxy = ".proxy.async::generic" if self.proxy_async else ""
        space = self.space
        assert space is not None   # __attrs_post_init__ derives it from sem when not given
        return f"fence{proxy}{self.sem.ptx}.sync_restrict::{space.value}{self.scope.ptx}"


_PREFETCH_SPACES = (S.generic, S.param, S.const)


@attrs.frozen
class PrefetchTensormap(Instruction):
    """`prefetch{.param,.const}.tensormap [addr];` (generic when no space is given)."""

    MNEMONIC = "prefetch.tensormap"
    REQUIRES = SM90_80
    space: StateSpace
    addr: Addr

    def __attrs_post_init__(self):
        self._set("space", parse_space(self.MNEMONIC, self.space, _PREFETCH_SPACES))
        self._set("addr", tma_addr(self.opcode(), "addr", self.addr, self.space))
        base = self.addr.base
        if isinstance(base, Symbol) and getattr(base, "kind", "tensormap") != "tensormap":
            raise OperandError(self.opcode(), "addr", "a tensor map (a k.param_tensormap() "
                               "parameter or a .const map); a pointer parameter holds the "
                               "map's address: pass the parameter to prefetch_tensormap(), "
                               "which loads it", f"parameter {base.name}")

    def opcode(self) -> str:
        return f"prefetch{self.space.ptx}.tensormap"

    def operands(self):
        return (self.addr,)


# -- builder functions (cuda::ptx names, kernel first) -----------------------------------------
def membar(k, level) -> None:
    """`membar.{cta,gl,sys};`"""
    k.emit(Membar(level))


def fence(k, sem, scope) -> None:
    """`(k, sem, scope)`: `fence.{sc,acq_rel,acquire,release}.{cta,cluster,gpu,sys};`"""
    k.emit(Fence(sem, scope))


def fence_proxy_alias(k) -> None:
    """`fence.proxy.alias;`"""
    k.emit(FenceProxyAlias())


def fence_proxy_async(k, space=None) -> None:
    """`(k)`: `fence.proxy.async;` or `(k, space)`: `fence.proxy.async.<space>;` with space
    'shared' (.shared::cta), 'cluster' (.shared::cluster) or 'global'."""
    k.emit(FenceProxyAsync(S.generic if space is None else space))


def _generic_pointer(k, addr):
    """A pointer parameter is loaded (a cudaMalloc pointer is a generic address)."""
    if isinstance(addr, Symbol) and getattr(addr, "kind", None) == "pointer":
        return k.ld_param(addr)
    return addr


def fence_proxy_tensormap_generic(k, sem, scope, addr=None, size=TENSORMAP_BYTES) -> None:
    """Release (`fence.proxy.tensormap::generic.release.scope;`, no operands) or acquire
    (`fence.proxy.tensormap::generic.acquire.scope [addr], 128;`, `addr` a generic pointer to
    the map in global memory: a 64-bit register or a pointer parameter, loaded first)."""
    insn = "fence.proxy.tensormap::generic"
    sem = A.sem(insn, sem, (Sem.release, Sem.acquire))
    if sem is Sem.release:
        if addr is not None:
            refuse(insn + ".release", "the release form takes no operands (ptxas rejects "
                   "[addr], 128): write fence_proxy_tensormap_generic(k, 'release', scope); "
                   "only the acquire form names the tensor map")
        check_size_128(insn + ".release", size)
        k.emit(FenceProxyTensormapRelease(scope))
        return
    if addr is None:
        refuse(insn + ".acquire", "the acquire form needs the tensor map's address: "
               "fence_proxy_tensormap_generic(k, 'acquire', scope, addr)")
    k.emit(FenceProxyTensormapAcquire(scope, _generic_pointer(k, addr), size))


def fence_mbarrier_init(k, sem="release", scope="cluster") -> None:
    """`fence.mbarrier_init.release.cluster;`"""
    k.emit(FenceMbarrierInit(sem, scope))


def fence_sync_restrict(k, sem, space=None, scope="cluster") -> None:
    """`(k, sem, space, scope)`: `fence.acquire.sync_restrict::shared::cluster.cluster;`
    (acquire, 'cluster', 'cluster') or `fence.release.sync_restrict::shared::cta.cluster;`
    (release, 'shared', 'cluster'); space and scope may be left out (they follow from sem)."""
    k.emit(FenceSyncRestrict(sem, space, scope, False))


def fence_proxy_async_generic_sync_restrict(k, sem, space=None, scope="cluster") -> None:
    """`(k, sem, space, scope)`: `fence.proxy.async::generic.{acquire,release}
    .sync_restrict::<space>.cluster;` (as fence_sync_restrict)."""
    k.emit(FenceSyncRestrict(sem, space, scope, True))


def prefetch_tensormap(k, addr, space=None) -> None:
    """`prefetch{.param,.const}.tensormap [addr];` — a tensor-map parameter or `.const` symbol
    gives its space; a register its hint (a 64-bit unhinted one is generic); a pointer
    parameter is loaded and its generic address prefetched."""
    addr = _generic_pointer(k, addr)
    sp = resolve_space("prefetch.tensormap", addr, space, _PREFETCH_SPACES)
    k.emit(PrefetchTensormap(sp, addr))


# -- forms: (form, requires, note) — rendered by ptxdsl.forms ----------------------------------
FORMS: list[tuple[str, Requires, str]] = [
    ("membar.{cta,gl,sys}", BASE, ""),
    ("fence.{sc,acq_rel}.{cta,gpu,sys}", BASE, "PTX 6.0 / sm_70 in the ISA; ptxdsl's floor"),
    ("fence.{sc,acq_rel}.cluster", req("7.8", 90), ""),
    ("fence.{acquire,release}.{cta,cluster,gpu,sys}", SM90_86, ""),
    ("fence.proxy.alias", req("7.5", 75), "sm_70 in the ISA; ptxdsl's floor"),
    ("fence.proxy.async{,.global,.shared::cta,.shared::cluster}", SM90_80,
     "bare .shared rejected"),
    ("fence.proxy.tensormap::generic.release.{cta,cluster,gpu,sys}", SM90_83, "no operands"),
    ("fence.proxy.tensormap::generic.acquire.{cta,cluster,gpu,sys} [addr], 128", SM90_83,
     "generic 64-bit addr"),
    ("fence.mbarrier_init.release.cluster", SM90_80, ""),
    ("fence.proxy.async::generic.{acquire,release}.sync_restrict::<space>.cluster", SM90_86,
     "acquire: shared::cluster; release: shared::cta"),
    ("fence.{acquire,release}.sync_restrict::<space>.cluster", SM90_86,
     "acquire: shared::cluster; release: shared::cta"),
    ("prefetch{,.param,.const}.tensormap", SM90_80, ""),
]
