"""Signal pads: flags in global memory that GPUs set and wait on to order their work (the
cross-GPU protocol of symmetric memory: issue 33; the runtime side is
`ptxdsl.runtime.symmetric`).

A signal is a `.u32` in a peer's (or this GPU's) global memory. The writer publishes what it
wrote before with a `.sys`-scope release, the reader spins on a `.sys`-scope acquire load, so
what the writer stored before the signal is visible to the reader after the wait::

    signal_set(k, flag, 1)          st.release.sys.global.u32 [flag], 1;
    signal_set(k, ctr, 1, add=True) red.release.sys.global.add.u32 [ctr], 1;
    signal_wait(k, flag, 1)         $L__sigwait_1:
                                    ld.acquire.sys.global.u32 %r1, [flag];
                                    setp.ge.u32 %p1, %r1, 1;
                                    @!%p1 bra $L__sigwait_1;

`signal_wait` is the loop `ptx.mbarrier_wait` builds (`instructions.mbarrier_wait.spin`), so
`ptxdsl.debug.bounded_waits(k)` bounds it the same way: past the timeout the waiting thread
writes the error record (naming the signal's address, the value it waited for and the last
value it read) and traps.

`barrier_all_ranks` is a barrier of every rank's CTA `block` over the signal pads: after a CTA
barrier, thread `i < world` sets slot `block * world + rank` of rank `i`'s pad to `epoch`, then
waits until slot `block * world + i` of its own pad reaches `epoch`; a CTA barrier ends it. The
epoch grows by one per use (1, 2, 3, ... e.g. one per launch), so a pad is reused without
being reset: a waiting rank reads its peer's signal of this epoch or, when that peer has
already passed the barrier and set the next one, a later one (`setp.ge`).

`lamport_wait` is the other protocol: the data is its own flag. A receive slot starts filled
with an *empty* word that no sender ever sends (bf16 data: 0x80008000, two -0.0, which
senders turn into +0.0 first); senders store their data with `st.relaxed.sys` (each .b32 word
is written whole, so a reader sees the empty word or the sender's), the receiver polls its own
slots with `ld.relaxed.sys` until no word is empty, then writes the empty word back for a
later round. No release/acquire pair and no signal: a round costs one NVLink crossing where a
signal after the data costs the data's acknowledgement and then the signal's. ::

    lamport_wait(k, [a, b], EMPTY)  $L__lamport_1:
                                    ld.relaxed.sys.global.v4.b32 {%r1, %r2, %r3, %r4}, [a];
                                    ld.relaxed.sys.global.v4.b32 {%r5, ...}, [b];
                                    setp.ne.b32 %p1, %r1, EMPTY; ... and.pred ... (all words)
                                    @!%p9 bra $L__lamport_1;
"""

from __future__ import annotations

import contextlib
import math
from typing import Any

from .errors import BuildError, OperandError, fail_closed
from .instructions import _ptx_args as A
from .instructions.atomic import AtomOp, Red
from .instructions.base import _given, check_enum, check_src, int_like
from .instructions.mbarrier_wait import WaitTimeout, resolve_timeout, spin
from .instructions.memory import Ld, St
from .kernel import Kernel
from .operands import Addr, Reg, Symbol
from .types import ScalarType, Scope, Sem, StateSpace

__all__ = ["barrier_all_ranks", "lamport_wait", "peer_pointer", "signal_set", "signal_wait"]

T = ScalarType
S = StateSpace
#: The comparisons `signal_wait` takes (unsigned: `setp.<cmp>.u32`).
COMPARES = ("eq", "ne", "ge", "gt")
#: The world sizes `barrier_all_ranks` builds for: the GPUs of one host.
WORLD_SIZES = range(2, 9)
_SCOPES = (Scope.gpu, Scope.sys)


def _kernel(name: str, k: Any) -> Kernel:
    if not isinstance(k, Kernel):
        raise BuildError(f"{name}: expected the Kernel to build in, got {_given(k)}")
    return k


def _flag(k: Kernel, name: str, addr: Any, operand: str = "addr") -> Any:
    """A signal's address as a .global operand: a generic pointer is converted (cvta.to.global);
    one known to be in another space is refused, naming the helper."""
    base = addr.base if isinstance(addr, Addr) else addr
    # a 32-bit register holds no global address: refused here, not by the ld/st built from it
    if isinstance(addr, bool) or not isinstance(addr, Reg | Addr | Symbol) or isinstance(
            base, Reg) and (base.type.bits != 64 or base.type.kind not in "bus"):
        raise OperandError(name, operand, "a global address (a 64-bit pointer register, an "
                           "Addr of one, or a .global variable)", _given(addr))
    converted = A.space_addr(k, name, addr, S.global_)
    base = converted.base if isinstance(converted, Addr) else converted
    space = getattr(base, "space", None)
    if space is not None and space is not S.global_:
        raise OperandError(name, operand, "an address in global memory (signal pads live there)",
                           f"an address in .{space.value}")
    return converted


def _scope(name: str, scope: Any) -> Scope:
    return check_enum(name, "scope", A.scope(name, scope), Scope, _SCOPES)


def signal_set(k: Kernel, addr: Any, value: Any = 1, *, add: bool = False,
               scope: Any = "sys") -> None:
    """Publish a signal: `st.release.sys.global.u32 [addr], value;`, or with `add=True` a
    counter bump, `red.release.sys.global.add.u32 [addr], value;`. `scope="gpu"` for a signal
    read on the same GPU only. The release orders the thread's earlier writes (and, after a
    CTA barrier, its CTA's) before the signal."""
    name = "signal_set"
    k = _kernel(name, k)
    if type(add) is not bool:
        raise OperandError(name, "add", "True or False", _given(add))
    sc = _scope(name, scope)
    v = check_src(name, "value", value, T.u32)
    a = _flag(k, name, addr)
    if add:
        k.emit(Red(AtomOp.add, T.u32, a, v, S.global_, Sem.release, sc))
    else:
        k.emit(St(S.global_, T.u32, a, v, Sem.release, sc))


def signal_wait(k: Kernel, addr: Any, expected: Any, *, cmp: str = "ge", scope: Any = "sys",
                timeout: WaitTimeout | None = None, timeout_ns: int | None = None,
                timeout_cycles: int | None = None, on_timeout: Any = None) -> Reg:
    """Spin until the signal at `addr` compares `cmp` (unsigned: 'eq', 'ne', 'ge', 'gt') to
    `expected` (a .u32 register or integer)::

        $L__sigwait_N:
        ld.acquire.sys.global.u32 v, [addr];
        setp.ge.u32 p, v, expected;
        @!p bra $L__sigwait_N;

    Bounded as `ptx.mbarrier_wait` is (`timeout=`, `timeout_ns=`/`timeout_cycles=` with
    `on_timeout=`, or the kernel's default from `ptxdsl.debug.bounded_waits`). Returns `v`, the
    last value read."""
    name = "signal_wait"
    k = _kernel(name, k)
    if cmp not in COMPARES:
        raise OperandError(name, "cmp", "one of " + ", ".join(map(repr, COMPARES)), _given(cmp))
    sc = _scope(name, scope)
    want = check_src(name, "expected", expected, T.u32)
    bound = resolve_timeout(name, k, timeout, timeout_ns, timeout_cycles, on_timeout)
    a = _flag(k, name, addr)
    seen = k.reg(T.u32)

    def poll() -> Reg:
        k.emit(Ld(S.global_, T.u32, seen, a, Sem.acquire, sc))
        return k.setp(cmp, seen, want, type=T.u32)

    spin(k, poll, bound, "sigwait")
    return seen


def lamport_wait(k: Kernel, addrs: Any, empty: Any, *, ok: Any = None,
                 timeout: WaitTimeout | None = None, timeout_ns: int | None = None,
                 timeout_cycles: int | None = None,
                 on_timeout: Any = None) -> list[tuple[Reg, Reg, Reg, Reg]]:
    """Spin until none of the 16-byte vectors at `addrs` (a list of global addresses, each a
    receive slot of the data-as-flag protocol above) holds the word `empty` (a .b32 register
    or an integer) anywhere; returns each vector's four .b32 words as last read. All vectors
    are loaded on every pass, so their latencies overlap. `ok` (a list of predicates, one per
    address): a vector whose predicate is false is neither loaded nor waited for. Bounded as
    `signal_wait` is."""
    name = "lamport_wait"
    k = _kernel(name, k)
    if not isinstance(addrs, list | tuple) or not addrs:
        raise OperandError(name, "addrs", "a non-empty list of addresses", _given(addrs))
    where = [_flag(k, name, a, f"addrs[{i}]") for i, a in enumerate(addrs)]
    guards: list[Any] = [None] * len(where)
    if ok is not None:
        if not isinstance(ok, list | tuple) or len(ok) != len(where):
            raise OperandError(name, "ok", f"a list of {len(where)} predicates (one per "
                               "address)", _given(ok))
        guards = [check_src(name, f"ok[{i}]", p, T.pred) for i, p in enumerate(ok)]
    want = check_src(name, "empty", empty, T.b32)
    bound = resolve_timeout(name, k, timeout, timeout_ns, timeout_cycles, on_timeout)
    seen = [(k.reg(T.b32), k.reg(T.b32), k.reg(T.b32), k.reg(T.b32)) for _ in where]

    def poll() -> Reg:
        for a, words, g in zip(where, seen, guards, strict=True):
            with k.guard(g) if g is not None else contextlib.nullcontext():
                k.emit(Ld(S.global_, T.b32, words, a, Sem.relaxed, Scope.sys))
        done: Reg | None = None
        for words, g in zip(seen, guards, strict=True):
            full = k.setp("ne", words[0], want, type=T.b32)
            for w in words[1:]:
                full = k.and_(full, k.setp("ne", w, want, type=T.b32), type=T.pred)
            if g is not None:       # a vector not waited for is done: it was not loaded
                full = k.or_(full, k.not_(g, type=T.pred), type=T.pred)
            done = full if done is None else k.and_(done, full, type=T.pred)
        assert done is not None
        return done

    spin(k, poll, bound, "lamport")
    return seen


def _index(name: str, operand: str, value: Any, limit: int | None = None) -> Any:
    """A .u32 register or an integer in [0, limit)."""
    v = int_like(value)
    if isinstance(v, int) and not isinstance(v, bool):
        if not 0 <= v < (limit if limit is not None else 1 << 32):
            raise OperandError(name, operand, f"an integer in [0, {limit})" if limit else
                               "an integer in [0, 2^32)", repr(v))
        return v
    if isinstance(v, Reg) and v.type.bits == 32 and v.type.kind in "bus":
        return v
    raise OperandError(name, operand, "a 32-bit integer register or an integer" +
                       (f" in [0, {limit})" if limit else ""), _given(value))


def peer_pointer(k: Kernel, ptrs: Any, peer: Any) -> Reg:
    """The pointer of rank `peer` (a .u32 register or an integer) from a device array of
    64-bit pointers (a torch symmetric-memory handle's `buffer_ptrs_dev` or
    `signal_pad_ptrs_dev`, `SymmetricBuffers.buffer_ptrs_dev`)::

        mad.wide.u32 %rd2, peer, 8, %rd1;          // &ptrs[peer]
        ld.global.u64 %rd3, [%rd2];

    The result is the generic address the runtime handed out."""
    name = "peer_pointer"
    k = _kernel(name, k)
    idx = _index(name, "peer", peer)
    table = _flag(k, name, ptrs, "ptrs")
    base, off = (table.base, table.offset) if isinstance(table, Addr) else (table, 0)
    if isinstance(idx, int):
        return k.ld(Addr(base, off + 8 * idx), type=T.u64, space="global")
    if not isinstance(base, Reg):       # a .global variable (or an absolute address)
        base = k.mov(base, type=T.u64)
    row = k.mad(idx, 8, base, type=T.u32, mode="wide")
    return k.ld(Addr(row, off), type=T.u64, space="global")


def barrier_all_ranks(k: Kernel, pads: Any, rank: Any, world: int, epoch: Any, *,
                      block: Any = None, timeout: WaitTimeout | None = None,
                      timeout_ns: int | None = None) -> None:
    """A barrier of CTA `block` (default `%ctaid.x`) of every rank. `pads` is the device
    array of the `world` ranks' signal-pad pointers (`signal_pad_ptrs_dev`), `rank` this
    GPU's rank and `epoch` this use's number (>= 1, one more than the last use of the same
    slots), each a .u32 register or an integer; `world` an integer in 2..8. Every rank's pad
    holds `world` .u32 slots per CTA, zeroed before the first use::

        bar.sync 0;
        setp.lt.u32 %p1, %tid.x, world;
        @%p1: pad_i = pads[tid]; st.release.sys.global.u32 [pad_i + 4*(block*world + rank)], epoch;
              pad_r = pads[rank]; signal_wait [pad_r + 4*(block*world + tid)] >= epoch;
        bar.sync 0;

    Needs at least `world` threads in the CTA (the first `world` signal): a kernel whose
    `.reqntid`/`.maxntid` says fewer is refused."""
    name = "barrier_all_ranks"
    k = _kernel(name, k)
    w = int_like(world)
    if type(w) is not int or w not in WORLD_SIZES:
        raise OperandError(name, "world", "an integer in 2..8 (the GPUs of one host)",
                           _given(world))
    r = _index(name, "rank", rank, w)
    e = _index(name, "epoch", epoch)
    if isinstance(e, int) and e == 0:
        raise OperandError(name, "epoch", "an integer >= 1 (the pads start at 0, which every "
                           "wait would take as already signalled)", "0")
    # Only the first `world` threads signal and wait: a CTA declared smaller would hang.
    declared = k.reqntid or k.maxntid
    if declared and math.prod(declared) < w:
        raise BuildError(f"{name}: the kernel's CTA has at most {math.prod(declared)} threads "
                         f"(.reqntid/.maxntid {tuple(declared)}), fewer than the {w} ranks: "
                         "thread i signals and waits for rank i")
    bound = resolve_timeout(name, k, timeout, timeout_ns, None, None)
    # The slot index block * world + rank is a .u32 (mul/add.u32 for a register block): a
    # constant block past it would wrap there, and overflows the folded immediates here.
    blk = _index(name, "block", block, (1 << 32) // w) if block is not None \
        else k.mov(k.ctaid.x, type=T.u32)
    table = _flag(k, name, pads, "pads")
    k.bar_sync(0)
    tid = k.mov(k.tid.x, type=T.u32)
    with k.if_(k.setp("lt", tid, w, type=T.u32)):
        first = blk * w if isinstance(blk, int) else k.mul(blk, w, type=T.u32)
        signal_set(k, _slot(k, peer_pointer(k, table, tid), _plus(k, first, r)), e)
        signal_wait(k, _slot(k, peer_pointer(k, table, r), _plus(k, first, tid)), e,
                    timeout=bound)
    k.bar_sync(0)


def _plus(k: Kernel, a: Any, b: Any) -> Any:
    """a + b for .u32 registers or integers (folded when both are integers)."""
    if isinstance(a, int) and isinstance(b, int):
        return a + b
    if isinstance(a, int) and a == 0:
        return b
    if isinstance(b, int) and b == 0:
        return a
    return k.add(b, a, type=T.u32) if isinstance(a, int) else k.add(a, b, type=T.u32)


def _slot(k: Kernel, pad: Reg, index: Any) -> Any:
    """The address of .u32 slot `index` of a pad (a generic pointer)."""
    if isinstance(index, int):
        return Addr(pad, 4 * index)
    return k.mad(index, 4, pad, type=T.u32, mode="wide")


# Every public helper answers bad input with a PtxdslError at the user's line, and a call that
# fails adds nothing to the kernel (errors.fail_closed), like the builders.
signal_set = fail_closed("signal_set", signal_set)
signal_wait = fail_closed("signal_wait", signal_wait)
lamport_wait = fail_closed("lamport_wait", lamport_wait)
peer_pointer = fail_closed("peer_pointer", peer_pointer)
barrier_all_ranks = fail_closed("barrier_all_ranks", barrier_all_ranks)
