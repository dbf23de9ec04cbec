"""N-stage producer/consumer pipelines on mbarriers: `MbarrierRing` and its two views.

A ring is `stages` pairs of mbarriers in shared memory: `full[s]` completes when stage `s`
holds data (the producer arrived and, for TMA, every byte landed), `empty[s]` when every
consumer has released it. Each side walks the ring with its own run-time stage index and
phase parity, kept in two .u32 registers, so a loop over any number of tiles is written once::

    ring = MbarrierRing(k, stages=4, empty_count=2)      # 2 consumer warps release each stage
    ring.init()                                          # thread 0 inits, fence, bar.sync 0
    with k.if_(is_producer_lane):
        p = ring.producer()
        with k.for_range(0, n_tiles) as i:
            p.wait_empty()
            p.arrive_expect_tx(ring_tx_bytes)              # from the tensor maps: tx_bytes(...)
            ptx.cp_async_bulk_tensor(k, "shared::cluster", "global",
                                     p.slot(tiles, TILE_BYTES), tmap, (0, i), p.full_barrier())
            p.advance()
    with k.else_():
        c = ring.consumer()
        with k.for_range(0, n_tiles):
            c.wait_full()
            ...                                          # read the stage's slot
            k.syncwarp()
            with k.if_(lane == 0):
                c.release()
            c.advance()

## The PTX a ring emits (no hidden state: every register is a named `.reg`)

Storage (static, the default): `.shared .align 8 .b64 ring_full[N]; .shared .align 8 .b64
ring_empty[N];`, or 16*N bytes of a given shared buffer (`storage=Addr(dyn_smem, off)`: full
at `off`, empty at `off + 8*N`). `MbarrierRing(...)` emits one base register per kind,
single-assigned before any loop::

    mov.u32 %ring_full_base, ring_full;      // dynamic storage: mov.u32 + add.u32 off
    mov.u32 %ring_empty_base, ring_empty;

`init()` (one thread, `tid.x == 0` unless `elect=` says otherwise)::

    mbarrier.init.shared::cta.b64 [ring_full+8*s], full_count;          // s = 0..N-1
    mbarrier.init.shared::cta.b64 [ring_empty+8*s], empty_count*peers;
    fence.mbarrier_init.release.cluster;
    bar.sync 0;     // or, for a cluster ring: barrier.cluster.arrive.release;
                    //                         barrier.cluster.wait.acquire;

A view (`producer()` / `consumer()`) owns two loop-carried registers, set where it is made::

    mov.u32 %ring_p_stage, 0;   mov.u32 %ring_p_phase, 1;   // producer: empty parity 1 first
    mov.u32 %ring_c_stage, 0;   mov.u32 %ring_c_phase, 0;   // consumer

The barrier address of the current stage is computed where it is used, as a fresh register
that is assigned once (the shape the hazard checker reads as "the barrier array + a run-time
offset", with `stage` in [0, N))::

    shl.b32 %r1, %ring_c_stage, 3;
    add.u32 %r2, %ring_full_base, %r1;       // [%r2] is full[stage]

waits are `mbarrier_wait` loops (so `ptxdsl.debug.bounded_waits` bounds them)::

    $L__wait_1:
    mbarrier.try_wait.parity.shared::cta.b64 %p1, [%r2], %ring_c_phase;
    @!%p1 bra $L__wait_1;

and `advance()` moves to the next stage, flipping the parity on wrap (no branch)::

    add.u32 %ring_c_stage, %ring_c_stage, 1;
    setp.eq.u32 %p2, %ring_c_stage, N;
    @%p2 mov.u32 %ring_c_stage, 0;
    @%p2 xor.b32 %ring_c_phase, %ring_c_phase, 1;

## Clusters and multicast

`peers=C` makes a cluster ring for TMA multicast over C CTAs: every CTA loads a 1/C slice of a
stage and multicasts it to all C, so (1) each CTA's full barrier expects the whole stage
(`tx_bytes(slice_map, multicast=C)`), and (2) a CTA may only overwrite stage `s` once the
consumers of every receiving CTA released it: `empty[s]` counts `empty_count * C` arrivals and
`release(ctas=range(C))` arrives on each of those CTAs' `empty[s]` through `mapa`::

    mapa.shared::cluster.u32 %r5, %r4, 1;                             // CTA rank 1's empty[s]
    mbarrier.arrive.release.cluster.shared::cluster.b64 _, [%r5];

Waits of a cluster ring are `.acquire.cluster` (the releases they pair with come from other
CTAs), and `init()` synchronises with a cluster barrier so no multicast or remote arrive
reaches a barrier that is not initialised yet.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from .errors import BuildError, OperandError, Sealed, fail_closed
from .instructions import _tma_box
from .instructions._tma_addr import symbol_align
from .instructions.base import int_like
from .instructions.fence import FenceMbarrierInit
from .instructions.mbarrier import (
    MAX_COUNT,
    ArriveKind,
    ArriveOp,
    MbarrierArrive,
    MbarrierInit,
    MbarrierTx,
    TxOp,
)
from .instructions.mbarrier_wait import mbarrier_wait
from .kernel import Kernel
from .kernel_core import MAX_STATIC_SHARED
from .kernel_directives import cluster_limit
from .operands import (
    SINK,
    Addr,
    IntLike,
    NegPred,
    Predicate,
    Reg,
    Symbol,
    _show,
    check_identifier,
    check_owned,
    plain_str,
)
from .provenance import known_fit
from .types import MAX_CLUSTER_CTAS, ScalarType, Scope, Sem, StateSpace

if TYPE_CHECKING:  # pragma: no cover
    from numpy.typing import DTypeLike

__all__ = ["MbarrierRing", "ProducerView", "ConsumerView", "RingView", "tx_bytes", "box_bytes"]

T = ScalarType
S = StateSpace
MAX_STAGES = 64            # 2 x 64 barriers = 1 KiB of shared memory; more is surely a mistake
SLOT_ALIGN = 128           # a TMA/bulk shared buffer's alignment (hazards.md tma-smem-align)


# -- expect_tx byte counts ---------------------------------------------------------------------
def box_bytes(box: IntLike | Iterable[IntLike], dtype: ScalarType | DTypeLike) -> int:
    """Bytes one TMA box of `box` elements of `dtype` writes to shared memory.

    `dtype`: a ptxdsl type, a PTX or wgmma type name ('f16', 'u8', 'e4m3': PTX's meaning,
    never numpy's float128 and uint64) or a numpy dtype ('float16', np.uint8).

    `box` is in numpy order (outermost first), as `TensorMap.tiled` takes it, and TMA's box
    rules hold: 1 to 5 extents of 1..256 elements, the last a multiple of 16 bytes. It
    counts the elements that land: for a map with element strides (TMA loads
    ceil(boxDim / stride) along a strided dimension) pass the `TiledDesc` or `TensorMap` to
    `tx_bytes`, whose `box_bytes` counts them."""
    return _tma_box.box_bytes("box_bytes", box, dtype)


def _source_bytes(src: Any) -> int:
    # A TiledDesc (runtime.tensormap_desc) has box_bytes; a TensorMap carries its desc.
    for obj in (src, getattr(src, "desc", None)):
        n = getattr(obj, "box_bytes", None)
        if isinstance(n, int) and not isinstance(n, bool):
            if hasattr(obj, "box_dim"):     # a description validated later, or never
                _tma_box.desc_box("tx_bytes", obj)
            return n
    if isinstance(src, tuple) and len(src) == 2:
        return _tma_box.box_bytes("tx_bytes", *src)
    raise OperandError("tx_bytes", "source", "a TensorMap, a TiledDesc or a (box, dtype) pair",
                       repr(src))


def tx_bytes(*sources: object, multicast: IntLike = 1) -> int:
    """The expect_tx count of one stage: the box bytes of every load completing on the
    barrier (a `TensorMap`, a `TiledDesc` or a `(box, dtype)` pair each, OOB elements
    included; a map's element strides count as TMA applies them, see `TiledDesc.box_bytes`),
    times `multicast` when each of that many CTAs loads one such slice and
    multicasts it to all of them (each receiving CTA then gets every slice)."""
    if not sources:
        raise BuildError("tx_bytes: give at least one tensor map, TiledDesc or (box, dtype)")
    multicast = int_like(multicast)
    if isinstance(multicast, bool) or not isinstance(multicast, int) or \
            not 1 <= multicast <= MAX_CLUSTER_CTAS:
        raise OperandError("tx_bytes", "multicast", f"a CTA count in [1, {MAX_CLUSTER_CTAS}]",
                           repr(multicast))
    total = sum(_source_bytes(s) for s in sources) * multicast
    if total > MAX_COUNT:
        raise OperandError("tx_bytes", "bytes", f"at most {MAX_COUNT} bytes per phase (the "
                           "mbarrier tx-count limit, 2^20-1)", total)
    return total


def _box_info(k: Kernel, box: Any) -> Any:
    """A `loads=` entry's box: a `(box, dtype)` pair as `tx_bytes` takes it, or a TensorMap,
    TiledDesc or SmemLayout (see `Kernel.param_tensormap`)."""
    if isinstance(box, tuple) and len(box) == 2 and not isinstance(int_like(box[1]), int):
        return k._box_info("MbarrierRing", box[0], box[1], None)
    return k._box_info("MbarrierRing", box, None, None)


def _kernel(what: str, k: Any) -> Kernel:
    if not isinstance(k, Kernel):
        raise OperandError(what, "k", "the Kernel to build into", _show(k))
    return k


def _flag(what: str, operand: str, v: Any) -> bool:
    if type(v) is not bool:
        raise OperandError(what, operand, "True or False", _show(v))
    return v


def _tx_count(what: str, nbytes: Any) -> Any:
    """An expect_tx byte count given as a number: an int in [0, MAX_COUNT], refused by the
    helper's name (the mbarrier instruction's check named the instruction). A register is
    the instruction's to check (its txCount operand)."""
    n = int_like(nbytes)
    if isinstance(n, Reg) or isinstance(n, int) and not isinstance(n, bool) and \
            0 <= n <= MAX_COUNT:
        return n
    raise OperandError(what, "nbytes", f"the stage's byte count: an int in [0, {MAX_COUNT}] "
                       "(the mbarrier tx-count limit, 2^20-1; see tx_bytes) or a 32-bit "
                       "integer register", _show(nbytes))


def _count(what: str, v: Any, hi: int) -> int:
    v = int_like(v)
    if isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= hi:
        raise OperandError("MbarrierRing", what, f"an integer in [1, {hi}]", repr(v))
    return v


# -- the ring ------------------------------------------------------------------------------------
class MbarrierRing(Sealed):
    """`stages` full/empty mbarrier pairs in shared memory (see the module docstring for the
    PTX). `full_count`: arrivals completing a full phase (the producer's arrive.expect_tx:
    1); `empty_count`: consumer arrivals per CTA completing an empty phase; `peers`: the CTAs
    of a multicast group whose consumers all release each stage (1: a CTA-local ring).
    `storage`: None for two static `.shared` arrays named `<name>_full`/`<name>_empty`, or
    an 8-byte aligned `Addr`/`Symbol` in shared memory (e.g. dynamic) with 16 * stages bytes.
    `loads`: what the stages are filled through, for the hazard checker (which then compares
    each expect_tx with the copies' bytes without `check_module(maps=...)`): a dict from
    each tensor-map parameter the producer loads with (`k.param_tensormap`, or a
    `k.param_ptr` to maps in global memory) to its box: a `TensorMap` or `TiledDesc`, an
    `SmemLayout` (one atom column's box), or a `(box, dtype)` pair as `tx_bytes` takes it.
    Recorded in `Kernel.map_boxes` (docs/hazards.md, "Context").
    """

    def __init__(self, k: Kernel, stages: IntLike, *, full_count: IntLike = 1,
                 empty_count: IntLike = 1, peers: IntLike = 1,
                 storage: Symbol | Addr | None = None, name: str = "ring",
                 loads: Mapping[Any, Any] | None = None) -> None:
        self.k = k = _kernel("MbarrierRing", k)
        if loads is not None and not isinstance(loads, Mapping):
            raise OperandError("MbarrierRing", "loads", "a dict from tensor-map parameters to "
                               "their boxes, e.g. {map_a: LAYOUT_A, map_b: tmap_b}", _show(loads))
        for param, box in (loads or {}).items():
            k._declare_box("MbarrierRing", param, _box_info(k, box))
        name = check_identifier(name, "MbarrierRing")   # a plain str: it names the arrays
        self.stages = _count("stages", stages, MAX_STAGES)
        self.full_count = _count("full_count", full_count, MAX_COUNT)
        self.peers = _count("peers", peers, MAX_CLUSTER_CTAS)
        self.empty_count = _count("empty_count", empty_count, MAX_COUNT // self.peers)
        cluster = cluster_limit(k)
        if cluster and self.peers > cluster:
            raise OperandError("MbarrierRing", "peers", f"at most the kernel's {cluster} CTAs "
                               "per cluster (.reqnctapercluster / .maxclusterrank)", self.peers)
        self.name = name
        n = self.stages
        if storage is None:
            self.full: Symbol | Addr = k.shared_array(T.b64, n, align=8, name=f"{name}_full")
            self.empty: Symbol | Addr = k.shared_array(T.b64, n, align=8, name=f"{name}_empty")
            self.full_base = k.mov(self.full, dst=k.reg(T.u32, f"{name}_full_base"))
            self.empty_base = k.mov(self.empty, dst=k.reg(T.u32, f"{name}_empty_base"))
        else:
            check_owned("MbarrierRing", k, storage=storage)
            base, off = (storage.base, storage.offset) if isinstance(storage, Addr) \
                else (storage, 0)
            if not isinstance(base, Symbol) or not base.space.is_shared:
                raise OperandError("MbarrierRing", "storage", "a shared-memory symbol or "
                                   "Addr(symbol, offset)", repr(storage))
            if off < 0:
                raise OperandError("MbarrierRing", "storage", "an address at or after the "
                                   "symbol's start", f"{base.name}{off}")
            if off % 8 or symbol_align(base) < 8:   # a .b64 array is 8-aligned undeclared
                raise OperandError("MbarrierRing", "storage", "an 8-byte aligned address "
                                   "(mbarriers are .b64)", f"{base.name}+{off} (align "
                                   f"{symbol_align(base)})")
            if base.count is not None and off + 16 * n > base.size:
                raise OperandError("MbarrierRing", "storage", f"{16 * n} bytes from offset "
                                   f"{off}", f"{base.name} of {base.size} bytes")
            self.full, self.empty = Addr(base, off), Addr(base, off + 8 * n)
            start = k.mov(base)
            self.full_base = k.add(start, off, dst=k.reg(T.u32, f"{name}_full_base"))
            self.empty_base = k.add(start, off + 8 * n, dst=k.reg(T.u32, f"{name}_empty_base"))
        self._views = 0
        if self.peers > 1:   # a cluster directive set later must still allow the peers
            k._cluster_needs.append((self.peers, f"MbarrierRing {name} (peers={self.peers})"))
        self._seal()

    @property
    def empty_arrivals(self) -> int:
        """The count `empty[s]` is initialised with: `empty_count * peers`."""
        return self.empty_count * self.peers

    def full_at(self, stage: int) -> Addr:
        """The address of `full[stage]` for a stage known when building (init, tests)."""
        return self._at(self.full, stage)

    def empty_at(self, stage: int) -> Addr:
        """The address of `empty[stage]` for a stage known when building."""
        return self._at(self.empty, stage)

    def _at(self, base, stage: int) -> Addr:
        stage = int_like(stage)
        if isinstance(stage, bool) or not isinstance(stage, int) or \
                not 0 <= stage < self.stages:
            raise OperandError("MbarrierRing", "stage", f"an int in [0, {self.stages})",
                               repr(stage))
        if isinstance(base, Addr):
            return Addr(base.base, base.offset + 8 * stage)
        return Addr(base, 8 * stage)

    def init(self, *, elect: Predicate | None = None, sync: bool = True) -> None:
        """Initialise every barrier from one thread (`elect`: a predicate, default
        `tid.x == 0`), `fence.mbarrier_init.release.cluster`, then (`sync=True`) make the
        inits visible: `bar.sync 0`, or for a cluster ring (`peers > 1`) a cluster barrier
        (every CTA's barriers must be ready before any multicast or remote arrive)."""
        k = self.k
        _flag("MbarrierRing.init", "sync", sync)
        flag = elect.reg if isinstance(elect, NegPred) else elect
        if elect is not None and (not isinstance(flag, Reg) or flag.type is not T.pred
                                  or flag.kernel is not k):
            raise OperandError("MbarrierRing.init", "elect", f"a predicate of kernel "
                               f"'{k.name}' (true in the one thread that initialises)",
                               _show(elect))
        with k.if_(elect if elect is not None else k.tid.x == 0):
            for s in range(self.stages):
                k.emit(MbarrierInit(S.shared_cta, self.full_at(s), self.full_count))
            for s in range(self.stages):
                k.emit(MbarrierInit(S.shared_cta, self.empty_at(s), self.empty_arrivals))
            k.emit(FenceMbarrierInit())
        if not sync:
            return
        if self.peers == 1:
            k.bar_sync(0)
        else:
            cluster_sync(k)

    def producer(self) -> ProducerView:
        """The producer's walk over the ring: stage 0, empty-wait parity 1 (right after init
        the phase before the first counts as complete, so the first pass does not block)."""
        return ProducerView(self, "p", 1)

    def consumer(self) -> ConsumerView:
        """The consumer's walk over the ring: stage 0, full-wait parity 0."""
        return ConsumerView(self, "c", 0)


def cluster_sync(k: Kernel, *, aligned: bool = False) -> None:
    """`barrier.cluster.arrive.release; barrier.cluster.wait.acquire;` — every thread of every
    CTA of the cluster. `.aligned` (`aligned=True`) is only for code every thread of each warp
    reaches together: after a one-thread branch such as the init, warps may not have
    reconverged, so the default is the unaligned form."""
    from .instructions import cluster as cl
    _kernel("cluster_sync", k)
    _flag("cluster_sync", "aligned", aligned)
    cl.barrier_cluster_arrive(k, "release", aligned=aligned)
    cl.barrier_cluster_wait(k, "acquire", aligned=aligned)


class RingView(Sealed):
    """One side's position in a ring: `stage` (.u32, 0..N-1) and `phase` (.u32 parity)."""

    WAIT_ON = "full"

    def __init__(self, ring: MbarrierRing, tag: str, parity: int):
        if not isinstance(ring, MbarrierRing):
            raise OperandError(type(self).__name__, "ring", "an MbarrierRing (ring.producer() "
                               "or ring.consumer() makes the views)", _show(ring))
        tag = plain_str(tag)
        if type(tag) is not str or type(parity) is not int or \
                (tag, parity) not in (("p", 1), ("c", 0)):
            raise OperandError(type(self).__name__, "tag, parity", "'p', 1 (producer) or 'c', "
                               "0 (consumer): use ring.producer() / ring.consumer()",
                               f"{_show(tag)}, {_show(parity)}")
        k = ring.k
        self.ring, self.k = ring, k
        self.stage: Reg = k.mov(0, dst=k.reg(T.u32, f"{ring.name}_{tag}_stage"))
        self.phase: Reg = k.mov(parity, dst=k.reg(T.u32, f"{ring.name}_{tag}_phase"))
        self._seal()

    # -- addresses of the current stage ----------------------------------------------------
    def _bar(self, base: Reg) -> Reg:
        return self.k.add(base, self.k.shl(self.stage, 3), type=T.u32)

    def full_barrier(self) -> Reg:
        """`full[stage]` as a fresh .u32 shared address (shl + add, see the module doc)."""
        return self._bar(self.ring.full_base)

    def empty_barrier(self) -> Reg:
        """`empty[stage]` as a fresh .u32 shared address."""
        return self._bar(self.ring.empty_base)

    def slot(self, buffer: Symbol | Addr | Reg, stride: IntLike) -> Reg:
        """The current stage's slot of a data buffer: `buffer + stage * stride` (bytes).

        `buffer`: a shared array, `Addr(array, offset)`, or a 32-bit shared address register.
        The ring's `stages` slots of `stride` bytes must fit in the array from the offset
        (checked where the array's size is known: not for dynamic shared memory, nor for a
        register unless it is known to hold the array's address, `ptxdsl.provenance`), and
        never run past the largest shared memory of any GPU.

        A stride of 128 bytes or more is a multiple of 128, one of 16 or more a multiple of 16:
        a stage's slot that big is a TMA or bulk buffer (128-byte aligned, the checker's
        `tma-smem-align` rule) or a vector/ldmatrix/wgmma tile (16); every slot after the
        first is only as aligned as the stride. Smaller strides (a ring of words) are free."""
        check_owned("RingView.slot", self.k, buffer=buffer)
        stride = int_like(stride)
        if isinstance(stride, bool) or not isinstance(stride, int) or stride < 1:
            raise OperandError("RingView.slot", "stride", "a positive byte count", repr(stride))
        unit = SLOT_ALIGN if stride >= SLOT_ALIGN else 16 if stride >= 16 else 1
        if stride % unit:
            raise OperandError("RingView.slot", "stride", f"a multiple of {unit} bytes (slot s "
                               f"starts s x stride after the first, and a {unit}-byte or "
                               f"larger slot needs {unit}-byte alignment"
                               + (": a TMA or bulk buffer" if unit == SLOT_ALIGN else "")
                               + f"); e.g. {-(-stride // unit) * unit}", stride)
        need = self.ring.stages * stride

        def fits(at: Addr) -> None:
            sym, off = at.base, at.offset
            assert isinstance(sym, Symbol)   # a symbol base: here or from known_fit
            if not sym.space.is_shared:
                raise OperandError("RingView.slot", "buffer", "a shared-memory array",
                                   f"{sym.space.value} variable {sym.name}")
            if off < 0 or sym.count is not None and off + need > sym.size:
                raise OperandError("RingView.slot", "buffer", f"{self.ring.stages} slots of "
                                   f"{stride} bytes ({need} bytes) inside the buffer",
                                   f"{sym.name} of {sym.size} bytes from offset {off}"
                                   if sym.count is not None else f"offset {off}")

        sym, off = (buffer.base, buffer.offset) if isinstance(buffer, Addr) else (buffer, 0)
        if isinstance(sym, Symbol):
            fits(Addr(sym, off))
        elif isinstance(buffer, Reg) and buffer.type.bits == 32 and buffer.type.kind in "bus":
            known_fit(buffer, fits)   # a register holding a symbol's address: checked the same
        else:
            raise OperandError("RingView.slot", "buffer", "a shared symbol or a 32-bit shared "
                               "address register (or Addr(symbol, offset))", _show(buffer))
        # A .u32 offset past every GPU's shared memory wraps around or lands outside the
        # window: no size of buffer makes it right.
        if off + need > MAX_STATIC_SHARED:
            raise OperandError("RingView.slot", "stride", f"slots that fit in shared memory "
                               f"({self.ring.stages} x stride at most {MAX_STATIC_SHARED} "
                               "bytes)", stride)
        k = self.k
        if isinstance(sym, Symbol):
            base = k.mov(sym)
            if off:
                base = k.add(base, off, type=T.u32)
        else:
            assert isinstance(buffer, Reg)   # refused above otherwise
            base = buffer
        return k.add(base, k.mul(self.stage, stride, type=T.u32), type=T.u32)

    # -- waiting and moving on ------------------------------------------------------------------
    def _wait(self, bar: Reg) -> Reg:
        cluster = self.ring.peers > 1
        return mbarrier_wait(self.k, bar, self.phase,
                             sem="acquire" if cluster else None,
                             scope="cluster" if cluster else None)

    def advance(self) -> None:
        """Next stage; on the wrap back to 0 flip the phase parity (see the module doc)."""
        k = self.k
        k.add(self.stage, 1, dst=self.stage)
        wrap = k.setp("eq", self.stage, self.ring.stages, type=T.u32)
        with k.guard(wrap):
            k.mov(0, dst=self.stage)
            k.xor(self.phase, 1, dst=self.phase)


class ProducerView(RingView):
    """The producer side: wait for `empty[stage]`, fill the slot, signal `full[stage]`."""

    def wait_empty(self) -> Reg:
        """Wait until every consumer released the current stage (try_wait.parity loop)."""
        return self._wait(self.empty_barrier())

    def arrive_expect_tx(self, nbytes: Reg | IntLike) -> None:
        """`mbarrier.arrive.expect_tx.release.cta.shared::cta.b64 _, [full], nbytes;` — the
        producer's arrival, announcing the bytes the stage's TMA loads will deliver (see
        `tx_bytes`)."""
        check_owned("ProducerView.arrive_expect_tx", self.k, nbytes=nbytes)
        nbytes = _tx_count("ProducerView.arrive_expect_tx", nbytes)
        self.k.emit(MbarrierArrive(ArriveOp.arrive, ArriveKind.expect_tx, S.shared_cta, SINK,
                                   Addr(self.full_barrier()), nbytes, Sem.release, Scope.cta))

    def expect_tx(self, nbytes: Reg | IntLike) -> None:
        """`mbarrier.expect_tx.relaxed.cta.shared::cta.b64 [full], nbytes;` (no arrival)."""
        check_owned("ProducerView.expect_tx", self.k, nbytes=nbytes)
        nbytes = _tx_count("ProducerView.expect_tx", nbytes)
        self.k.emit(MbarrierTx(TxOp.expect_tx, S.shared_cta, Addr(self.full_barrier()), nbytes,
                               Sem.relaxed, Scope.cta))

    def arrive(self) -> None:
        """`mbarrier.arrive.shared::cta.b64 _, [full];` (a producer that writes with st)."""
        self.k.emit(MbarrierArrive(ArriveOp.arrive, ArriveKind.plain, S.shared_cta, SINK,
                                   Addr(self.full_barrier())))


class ConsumerView(RingView):
    """The consumer side: wait for `full[stage]`, read the slot, release `empty[stage]`."""

    def wait_full(self) -> Reg:
        """Wait until the current stage is full (try_wait.parity loop)."""
        return self._wait(self.full_barrier())

    def release(self, *, ctas: Sequence[Reg | IntLike] | None = None,
                scope: str = "cluster") -> None:
        """Arrive on `empty[stage]`: the local CTA's (`mbarrier.arrive.shared::cta.b64 _,
        [a];`), or with `ctas=` (cluster ranks: ints or .u32 registers; a cluster ring
        defaults to all `peers` ranks 0..peers-1; each rank once) on each of those CTAs' through
        `mapa` + `mbarrier.arrive.release.cluster.shared::cluster.b64 _, [remote];`.

        `scope="cta"` arrives on the remote barriers with `.release.cta` instead: for
        consumers whose reads of the stage were wgmma's (already complete after
        `wgmma.wait_group`), there is nothing to publish at cluster scope, and ptxas turns
        each `.release.cluster` arrive into MEMBAR.ALL.GPU + arrive (seen in the SASS of
        samples/gemm_hopper.py on sm_90a: one GPU-wide fence per stage per consumer)."""
        scope = plain_str(scope)
        if type(scope) is not str or scope not in ("cluster", "cta"):
            raise OperandError("ConsumerView.release", "scope", "'cluster' or 'cta'",
                               _show(scope))
        if ctas is not None and not isinstance(ctas, list | tuple | range):
            raise OperandError("ConsumerView.release", "ctas", "a list of cluster ranks (ints "
                               "or .u32 registers), e.g. ctas=[0, 1]", _show(ctas))
        k, ring = self.k, self.ring
        check_owned("ConsumerView.release", k, ctas=list(ctas or ()))
        bar = self.empty_barrier()
        if ctas is None and ring.peers == 1:
            k.emit(MbarrierArrive(ArriveOp.arrive, ArriveKind.plain, S.shared_cta, SINK,
                                  Addr(bar)))
            return
        ranks = list(range(ring.peers)) if ctas is None else list(ctas)
        if not ranks:
            raise OperandError("ConsumerView.release", "ctas", "at least one cluster rank",
                               repr(ctas))
        from .instructions import cluster as cl
        seen: set[int] = set()
        for rank in ranks:
            rank = int_like(rank)
            if not (type(rank) is int or isinstance(rank, Reg) and rank.type.bits == 32
                    and rank.type.kind in "bus"):
                raise OperandError("ConsumerView.release", "ctas", "cluster ranks: ints or "
                                   "32-bit integer registers", _show(rank))
            # Two arrivals on one CTA's barrier count for a peer that never arrived: that
            # CTA's producer refills the stage while the peer may still read it.
            if isinstance(rank, int) and not isinstance(rank, bool):
                if rank in seen:
                    raise OperandError("ConsumerView.release", "ctas", "each cluster rank once",
                                       f"rank {rank} twice in {_show(ctas)}")
                seen.add(rank)
            # The ring's empty barriers expect the arrivals of its `peers` CTAs' consumers:
            # a rank past them arrives on a barrier this ring does not count for.
            if isinstance(rank, int) and not isinstance(rank, bool) and \
                    not 0 <= rank < ring.peers:
                raise OperandError("ConsumerView.release", "ctas", f"cluster ranks of the "
                                   f"ring's CTAs, in [0, {ring.peers}) (a ring shared by a "
                                   "cluster is MbarrierRing(..., peers=N))", repr(rank))
            remote = cl.mapa(k, "shared::cluster", bar, rank)
            k.emit(MbarrierArrive(ArriveOp.arrive, ArriveKind.plain, S.shared_cluster, SINK,
                                  Addr(remote), None, Sem.release,
                                  Scope.cluster if scope == "cluster" else Scope.cta))


# Every public helper here answers bad input with a PtxdslError at the user's line, and a
# call that fails adds nothing to the kernel (errors.fail_closed), like the builders.
def _fail_closed_all() -> None:
    g = globals()
    for fname in ("tx_bytes", "box_bytes", "cluster_sync"):
        g[fname] = fail_closed(fname, g[fname])
    for cls in (MbarrierRing, RingView, ProducerView, ConsumerView):
        for mname, fn in list(vars(cls).items()):
            if inspect.isfunction(fn) and (mname == "__init__" or not mname.startswith("_")):
                setattr(cls, mname, fail_closed(f"{cls.__name__}.{mname}", fn))


_fail_closed_all()
