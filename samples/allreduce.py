"""All-reduce (sum) across the GPUs of one host on PyTorch symmetric memory: one-shot,
two-shot and Lamport one-shot, bf16 and fp32, in one launch each, with no host
synchronisation and nothing the host must count (so a CUDA graph can replay it).

Every rank's symmetric buffer has two halves; a call uses the half its call number's parity
picks, so a rank never overwrites data a slower rank may still be reading from the previous
call. CTA b of every rank handles the same 16-byte vectors and meets CTA b of the other ranks
at `signals.barrier_all_ranks` (slot b * world + rank of each pad), so no grid-wide barrier
is needed:

- `ar_one_shot_<dtype>_w<W>`: each CTA copies its vectors of the input into its rank's buffer,
  meets the other ranks, then reads those vectors from every rank's buffer (16-byte loads over
  NVLink), sums them in f32 and writes the output. One barrier; each rank reads (W - 1) times
  the message from its peers.
- `ar_two_shot_<dtype>_w<W>`: the message is cut into W chunks; rank r reduces chunk r (as the
  one-shot does, writing the sums into its own buffer too), meets the others again, then copies
  the other chunks' sums from their owners. Two barriers; each rank reads 2 (W - 1) / W times
  the message.
- `ar_lamport_<dtype>_w<W>`: the data is its own flag (`signals.lamport_wait`). Each thread
  stores its vector of x (-0.0 made +0.0) into its slot of every other rank's receive buffer
  (`st.relaxed.sys`), then polls its own slots until no word is the empty one (two -0.0 per
  word for bf16, -0.0 for fp32), sums the ranks' vectors in rank order (so every rank gets
  the same bits), writes the output and stores the empty word back. No barrier and no
  acknowledgement: one NVLink crossing per call, which is what small messages cost. Two sets
  of slots alternate by call parity; a rank reuses a set two calls later, when every other
  rank has sent it the call between, which it does only after its own previous call, and so
  its emptying of that set, is over. x is read only by its own rank, so it may be anywhere
  and the call may run in place. Each rank sends (W - 1) times the message.
- `ar_lamport_two_shot_<dtype>_w<W>`: the two-shot on the same protocol. Each rank stores
  chunk q of x into rank q's slots, sums what it receives for its own chunk, writes that into
  the output and stores it into every other rank's second slots, then waits there for the
  other chunks' sums. Each rank sends 2 (W - 1) / W times the message, with no barrier and no
  copy of x.

The barriers' epochs and the call numbers live on the device (`state`, four .u32 per
`AllReduce`): every CTA reads them at the start and the last CTA to finish (an atomic count)
advances them, so launches need no changing arguments. A tail shorter than 16 bytes is summed
by CTA 0 element by element.

`AllReduce(max_numel, dtype, group)` allocates the symmetric buffers (torch
`_symmetric_memory`), loads the kernels and is called like `dist.all_reduce` on a tensor of up
to `max_numel` elements (a new output, or `out=`), choosing the algorithm by size
(`algorithm=` forces one): the Lamport one-shot up to `LAMPORT_MAX_BYTES` (32 MiB on two
GPUs, 256 KiB on four), the Lamport two-shot up to `LAMPORT_TWO_SHOT_MAX_BYTES` (32 MiB on
four), then the pulled one-shot up to `ONE_SHOT_MAX_BYTES`, then the pulled two-shot. Run
under `torchrun --nproc-per-node N python samples/allreduce.py` (N in 2, 4, 8) to compare
with `torch.distributed.all_reduce` for odd and round sizes, every algorithm and dtype (the
Lamport one-shot in place too), repeated calls and CUDA-graph replay. Run plainly, it
relaunches itself under torchrun on the visible GPUs (2 or more with peer access), else says
why and assembles its PTX offline.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from ptxdsl import Addr, Kernel, Module, Reg, debug, t
from ptxdsl.sample_runner import Report, multi_gpu_main, not_run, torchrun, torchrun_world
from ptxdsl.signals import barrier_all_ranks, lamport_wait, peer_pointer

if TYPE_CHECKING:
    import torch

THREADS = 512
VEC = 16                         # bytes per vector access
UNROLL = 4                       # vectors per thread per iteration, all loads issued first
# The Lamport kernel's: one. It keeps every polled vector of a pass in registers (W per
# vector), and with four a pass did not fit 128 registers: on 4 H200s 7.6 against 4.6 us at
# 8 KiB, 13.5 against 9.5 at 512 KiB (2 GPUs: 4.0 against 3.6, 6.7 against 5.1)
LAMPORT_UNROLL = 1
MAX_CTAS = 132                   # one per SM of an H100 SXM; the pad must hold world * CTAs
                                 # .u32 slots (torch 2.11's 9 KiB pads hold 8 x 288)
WORLDS = (2, 4, 8)
ESIZE = {"bf16": 2, "f32": 4}
ALGORITHMS = ("one_shot", "two_shot", "lamport", "lamport_two_shot")
# state words: the next barrier epoch - 1, the number of calls, CTAs finished in this call,
# the number of Lamport calls
EPOCH, CALLS, DONE, LCALLS = 0, 4, 8, 12
# The Lamport kernel's empty word: no sender sends it (each sends +0.0 for -0.0)
EMPTY = {"bf16": 0x80008000, "f32": 0x80000000}
TORCHRUN_TIMEOUT_S = 300


def kernel_name(algorithm: str, dtype: str, world: int) -> str:
    return f"ar_{algorithm}_{dtype}_w{world}"


# -- the kernels ---------------------------------------------------------------------------------
def _sum(k: Kernel, dtype: str, vecs: list[tuple[Reg, ...]]) -> tuple[Reg, ...]:
    """The element-wise sum of 16-byte vectors (4 .b32 each), in f32."""
    if dtype == "f32":
        total = list(vecs[0])
        for v in vecs[1:]:
            total = [k.add(a, b, type=t.f32) for a, b in zip(total, v, strict=True)]
        return tuple(total)
    halves: list[Reg] | None = None          # bf16: each .b32 is two values, low one first
    for v in vecs:
        f = [x for w in v for x in (k.shl(w, 16, type=t.b32),
                                    k.and_(w, 0xFFFF0000, type=t.b32))]
        halves = f if halves is None else [k.add(a, b, type=t.f32)
                                           for a, b in zip(halves, f, strict=True)]
    assert halves is not None
    return tuple(k.cvt_packed("bf16x2", halves[2 * i + 1], halves[2 * i])
                 for i in range(4))


def _scalar_sum(k: Kernel, dtype: str, addrs: list[Reg]) -> Reg:
    """One element summed over the ranks' buffers, in f32, back to the element type."""
    total = None
    for a in addrs:
        if dtype == "f32":
            x = k.ld(Addr(a), type=t.f32, space="global")
        else:
            x = k.cvt(k.ld(Addr(a), type=t.b16, space="global"), t.f32, atype=t.bf16)
        total = x if total is None else k.add(total, x, type=t.f32)
    assert total is not None
    return total if dtype == "f32" else k.cvt(total, t.bf16, atype=t.f32, rnd="rn")


def _vec_at(k: Kernel, base: Reg, vec: Reg) -> Reg:
    """The address of 16-byte vector `vec` of the buffer at `base`."""
    return k.mad(vec, VEC, base, type=t.u32, mode="wide")


def _load_vec(k: Kernel, base: Reg, vec: Reg, ok: Reg) -> tuple[Reg, ...]:
    """Vector `vec` at `base` as four .b32, loaded where `ok` holds."""
    regs = tuple(k.reg(t.b32) for _ in range(4))
    with k.guard(ok):
        k.ld(Addr(_vec_at(k, base, vec)), type=t.b32, vec=4, space="global", dst=regs)
    return regs


def _store_vec(k: Kernel, base: Reg, vec: Reg, ok: Reg, words: tuple[Reg, ...]) -> None:
    with k.guard(ok):
        k.st(Addr(_vec_at(k, base, vec)), words, type=t.b32, space="global")


def _when_last_cta(k: Kernel, state: Reg, tid: Reg, then: Callable[[], None]) -> None:
    """`then()` in thread 0 of the last CTA of the grid to get here (an atomic count of CTAs
    in the state's DONE word, which that CTA resets): every other CTA has passed this point,
    so what they read of the state before it (every thread of them, where the caller made
    sure of that within its CTA) is read, and `then` may advance it for the next call."""
    with k.if_(tid == 0):
        done = k.atom("add", Addr(state, DONE), 1, type=t.u32, space="global")
        with k.if_(k.add(done, 1, type=t.u32) == k.mov(k.nctaid.x, type=t.u32)):
            k.st(Addr(state, DONE), k.mov(0, type=t.u32), space="global")
            then()


class _Ctx:
    """What both kernels read at the start: parameters, the rank's buffer pointers (this
    call's half), the state, the grid-stride indices."""

    def __init__(self, k: Kernel, dtype: str, world: int):
        self.k, self.dtype, self.world = k, dtype, world
        self.etype = t.f32 if dtype == "f32" else t.b16
        self.bufs, self.pads = k.param_ptr("bufs"), k.param_ptr("pads")
        self.state = k.ld_param(k.param_ptr("state"))
        self.inp = k.ld_param(k.param_ptr("inp"))
        self.out = k.ld_param(k.param_ptr("out"))
        self.nvec = k.ld_param(k.param(t.u32, "nvec"))
        self.tail = k.ld_param(k.param(t.u32, "tail"))          # elements after the vectors
        half_bytes = k.ld_param(k.param(t.u64, "half_bytes"))
        self.rank = k.ld_param(k.param(t.u32, "rank"))
        # 0: x is copied into this call's half; 1: x is already the buffer's third part
        self.sym = k.ld_param(k.param(t.u32, "symmetric")) != 0
        self.epoch = k.ld(Addr(self.state, EPOCH), type=t.u32, space="global")
        calls = k.ld(Addr(self.state, CALLS), type=t.u32, space="global")
        which = k.selp(2, k.and_(calls, 1), self.sym, type=t.u32)
        half = k.mul(k.cvt(which, t.u64, atype=t.u32), half_bytes, type=t.u64)
        self.half = half
        self.calls = calls
        self.ranks = [k.add(peer_pointer(k, self.bufs, r), half, type=t.u64)
                      for r in range(world)]
        self.own = k.add(peer_pointer(k, self.bufs, self.rank), half, type=t.u64)
        self.tid = k.mov(k.tid.x, type=t.u32)
        self.gid = k.mad(k.ctaid.x, THREADS, self.tid, type=t.u32)
        self.stride = k.mul(k.nctaid.x, THREADS, type=t.u32)

    def vectors(self, stop: Reg, body: Callable[[list[tuple[Reg, Reg]]], None],
                first: Reg | None = None) -> None:
        """body([(vec, in range), ...]) for this thread's vectors below `stop` (plus
        `first`), UNROLL at a time, so that their loads are in flight together."""
        k = self.k
        with k.for_range(self.gid, stop, k.mul(self.stride, UNROLL, type=t.u32)) as i:
            group = []
            for u in range(UNROLL):
                j = i if u == 0 else k.mad(self.stride, u, i, type=t.u32)
                ok = j < stop
                group.append((j if first is None else k.add(first, j, type=t.u32), ok))
            body(group)

    def copy_in(self, group: list[tuple[Reg, Reg]]) -> None:
        loaded = [_load_vec(self.k, self.inp, vec, ok) for vec, ok in group]
        for (vec, ok), v in zip(group, loaded, strict=True):
            _store_vec(self.k, self.own, vec, ok, v)

    def reduce(self, group: list[tuple[Reg, Reg]], also_own: bool = False) -> None:
        """out[vec] (and, for the two-shot, own[vec]) = the sum of every rank's vec."""
        loaded = [[_load_vec(self.k, b, vec, ok) for b in self.ranks] for vec, ok in group]
        for (vec, ok), vecs in zip(group, loaded, strict=True):
            total = _sum(self.k, self.dtype, vecs)
            _store_vec(self.k, self.out, vec, ok, total)
            if also_own:
                _store_vec(self.k, self.own, vec, ok, total)

    def gather(self, base: Reg, group: list[tuple[Reg, Reg]]) -> None:
        """out[vec] = the vec of the buffer at `base` (another rank's sums)."""
        loaded = [_load_vec(self.k, base, vec, ok) for vec, ok in group]
        for (vec, ok), v in zip(group, loaded, strict=True):
            _store_vec(self.k, self.out, vec, ok, v)

    def _tail_at(self, base: Reg) -> Reg:
        k, es = self.k, ESIZE[self.dtype]
        first = k.mad(self.nvec, VEC, base, type=t.u32, mode="wide")
        return k.mad(self.tid, es, first, type=t.u32, mode="wide")

    def tail_copy_in(self) -> None:
        k = self.k
        with k.if_(k.and_(k.ctaid.x == 0, self.tid < self.tail)):
            x = k.ld(Addr(self._tail_at(self.inp)), type=self.etype, space="global")
            k.st(Addr(self._tail_at(self.own)), x, type=self.etype, space="global")

    def tail_reduce(self, then: Callable[[], None] | None = None) -> None:
        """CTA 0 sums the tail; its threads store it after `then()` (the two-shot's second
        barrier: a two-shot in place writes x's tail, which the other ranks read until then)."""
        k = self.k
        mine = k.and_(k.ctaid.x == 0, self.tid < self.tail)
        total = k.reg(self.etype)
        with k.if_(mine):
            k.mov(_scalar_sum(k, self.dtype, [self._tail_at(b) for b in self.ranks]),
                  dst=total)
        if then is not None:
            then()
        with k.if_(mine):
            k.st(Addr(self._tail_at(self.out)), total, type=self.etype, space="global")

    def barrier(self, n: int) -> None:
        """Barrier n (1, 2) of this call: epoch state + n."""
        barrier_all_ranks(self.k, self.pads, self.rank, self.world,
                          self.k.add(self.epoch, n, type=t.u32))

    def copy_phase(self, body: Callable[[], None]) -> None:
        """The copy of x into the buffer, which a symmetric x skips."""
        with self.k.if_(k_not(self.k, self.sym)):
            body()

    def advance(self, barriers: int) -> None:
        """After the first barrier (every thread of every CTA has read the state): the last
        CTA to get here advances the epoch past this call's barriers (one more for a
        symmetric x) and the call number. Early, so the atomic's latency hides behind the
        reads that follow."""
        k = self.k
        after = k.add(k.selp(1, 0, self.sym, type=t.u32), barriers, type=t.u32)

        def count() -> None:
            k.st(Addr(self.state, EPOCH), k.add(self.epoch, after, type=t.u32), space="global")
            k.st(Addr(self.state, CALLS), k.add(self.calls, 1, type=t.u32), space="global")
        _when_last_cta(k, self.state, self.tid, count)


def k_not(k: Kernel, p: Reg) -> Reg:
    return k.not_(p, type=t.pred)


def _end(c: _Ctx, n: int) -> None:
    """A symmetric x is the caller's to overwrite after the call: a last barrier, so no
    rank returns while another may still read its buffer."""
    with c.k.if_(c.sym):
        c.barrier(n)


def _kernel(algorithm: str, dtype: str, world: int, bounded: bool) -> tuple[Kernel, _Ctx]:
    k = Kernel(kernel_name(algorithm, dtype, world), reqntid=THREADS)
    if bounded:
        debug.bounded_waits(k, timeout_ns=2_000_000_000)
    return k, _Ctx(k, dtype, world)


def build_one_shot(dtype: str, world: int, bounded: bool = False) -> Kernel:
    k, c = _kernel("one_shot", dtype, world, bounded)

    def copy() -> None:
        c.vectors(c.nvec, c.copy_in)
        c.tail_copy_in()
    c.copy_phase(copy)
    c.barrier(1)
    c.advance(1)
    c.vectors(c.nvec, c.reduce)
    c.tail_reduce()
    _end(c, 2)
    k.ret()
    return k


def build_two_shot(dtype: str, world: int, bounded: bool = False) -> Kernel:
    k, c = _kernel("two_shot", dtype, world, bounded)
    # chunk q is vectors [q * chunk, (q + 1) * chunk) of those below nvec
    chunk = k.div(k.add(c.nvec, world - 1, type=t.u32), world, type=t.u32)
    firsts = [k.mul(chunk, q, type=t.u32) for q in range(world)]
    mine = k.mul(chunk, c.rank, type=t.u32)

    def within(group: list[tuple[Reg, Reg]]) -> list[tuple[Reg, Reg]]:
        return [(vec, k.and_(ok, vec < c.nvec)) for vec, ok in group]

    def copy() -> None:
        for first in firsts:
            c.vectors(chunk, lambda g: c.copy_in(within(g)), first)
        c.tail_copy_in()
    c.copy_phase(copy)
    c.barrier(1)
    c.advance(2)
    c.vectors(chunk, lambda g: c.reduce(within(g), also_own=True), mine)
    c.tail_reduce(then=lambda: c.barrier(2))
    def gather_from(base: Reg) -> Callable[[list[tuple[Reg, Reg]]], None]:
        return lambda g: c.gather(base, within(g))

    # rank r copies the other chunks in the order r + 1, r + 2, ...: were every rank to start
    # at rank 0's, W - 1 ranks would read from one GPU's links at a time
    for i in range(1, world):
        q = k.rem(k.add(c.rank, i, type=t.u32), world, type=t.u32)
        base = k.add(peer_pointer(k, c.bufs, q), c.half, type=t.u64)
        c.vectors(chunk, gather_from(base), k.mul(chunk, q, type=t.u32))
    _end(c, 3)
    k.ret()
    return k


# -- the Lamport kernels ---------------------------------------------------------------------------
class _Lamport:
    """What the Lamport kernels read at the start: their parameters, this call's receive set,
    every peer's slots in it and the grid-stride indices. A set has `regions` parts (the
    one-shot one, the two-shot one per phase), each a slot per other rank."""

    def __init__(self, k: Kernel, dtype: str, world: int, regions: int = 1):
        self.k, self.dtype, self.world = k, dtype, world
        bufs = k.param_ptr("bufs")
        self.state = k.ld_param(k.param_ptr("state"))
        self.inp = k.ld_param(k.param_ptr("inp"))
        self.out = k.ld_param(k.param_ptr("out"))
        self.nvec = k.ld_param(k.param(t.u32, "nvec"))             # whole 16-byte vectors
        self.tail = k.ld_param(k.param(t.u32, "tail"))             # elements after them
        self.slot = k.ld_param(k.param(t.u64, "slot_bytes"))
        self.rank = k.ld_param(k.param(t.u32, "rank"))
        self.calls = k.ld(Addr(self.state, LCALLS), type=t.u32, space="global")
        # two receive sets, one per call parity
        which = k.cvt(k.and_(self.calls, 1, type=t.u32), t.u64, atype=t.u32)
        set_off = k.mul(which, k.mul(self.slot, regions * (world - 1), type=t.u64),
                        type=t.u64)
        # peer i: (rank + i) % W, which keeps what this rank sends in its slot W - 1 - i (so
        # that the receiver's slot j holds sender (receiver + 1 + j) % W)
        self.peers = [k.rem(k.add(self.rank, i, type=t.u32), world, type=t.u32)
                      for i in range(1, world)]
        bases = [k.add(peer_pointer(k, bufs, q), set_off, type=t.u64) for q in self.peers]
        own = k.add(peer_pointer(k, bufs, self.rank), set_off, type=t.u64)
        # what this rank receives, in sender order (every rank sums in the same order, so
        # every rank gets the same bits): sender s sits in slot (s - rank - 1) mod W
        froms = [k.cvt(k.rem(k.sub(s_ + world - 1, self.rank, type=t.u32), world, type=t.u32),
                       t.u64, atype=t.u32) for s_ in range(world)]
        self.sends: list[list[Reg]] = []
        self.recvs: list[list[Reg]] = []
        for r in range(regions):
            first = r * (world - 1)
            self.sends.append([k.mad(self.slot, first + world - 1 - i, b, type=t.u64)
                               for i, b in enumerate(bases, start=1)])
            mine = own if r == 0 else k.mad(self.slot, first, own, type=t.u64)
            self.recvs.append([k.mad(j, self.slot, mine, type=t.u64) for j in froms])
        self.tid = k.mov(k.tid.x, type=t.u32)
        self.gid = k.mad(k.ctaid.x, THREADS, self.tid, type=t.u32)
        self.stride = k.mul(k.nctaid.x, THREADS, type=t.u32)
        self.empty = k.mov(EMPTY[dtype], type=t.b32)

    def advance(self) -> None:
        """After every thread of the CTA has read the call count: the last CTA to get here
        counts this call."""
        k = self.k
        k.bar_sync(0)
        _when_last_cta(k, self.state, self.tid, lambda: k.st(
            Addr(self.state, LCALLS), k.add(self.calls, 1, type=t.u32), space="global"))

    def canonical(self, words: tuple[Reg, ...]) -> tuple[Reg, ...]:
        """The words with every -0.0 made +0.0 (x + 0.0 in round-to-nearest), so that no
        sent word is the empty one."""
        k = self.k
        if self.dtype == "f32":
            return tuple(k.add(w, 0.0, type=t.f32, mode="rn") for w in words)
        out = []
        for w in words:
            lo = k.add(k.shl(w, 16, type=t.b32), 0.0, type=t.f32, mode="rn")
            hi = k.add(k.and_(w, 0xFFFF0000, type=t.b32), 0.0, type=t.f32, mode="rn")
            out.append(k.cvt_packed("bf16x2", hi, lo))
        return tuple(out)

    def send(self, region: int, i: int, j: Reg, ok: Reg, words: tuple[Reg, ...]) -> None:
        """Store `words` into this rank's slot of `region`, vector j, at peer i."""
        with self.k.guard(ok):
            self.k.st(Addr(_vec_at(self.k, self.sends[region][i - 1], j)), words, type=t.b32,
                      space="global", sem="relaxed", scope="sys")

    def receive(self, region: int, js: Sequence[tuple[Reg, Reg | list[Reg]]]
                ) -> list[list[tuple[Reg, Reg, Reg, Reg]]]:
        """Wait for vector j of every other rank's slot of `region`, for each (j, in range:
        one predicate, or one per sender), all polled together; empty the slots (for the
        call after next). Per j, the words in sender order (this rank's own place: its polled
        registers, not loaded)."""
        k, world = self.k, self.world
        addrs, oks = [], []
        for j, ok in js:
            for s_ in range(world):
                addrs.append(_vec_at(self.k, self.recvs[region][s_], j))
                oks.append(k.and_(ok[s_] if isinstance(ok, list) else ok, self.rank != s_))
        got = lamport_wait(k, addrs, self.empty, ok=oks)
        empty = (self.empty,) * 4
        for a, ok in zip(addrs, oks, strict=True):
            with k.guard(ok):
                k.st(Addr(a), empty, type=t.b32, space="global", sem="relaxed", scope="sys")
        return [got[n * world:(n + 1) * world] for n in range(len(js))]

    def total(self, mine: tuple[Reg, ...], got: Sequence[tuple[Reg, ...]]) -> tuple[Reg, ...]:
        """The sum of every rank's vector in rank order, this rank's being `mine`."""
        k = self.k
        vecs = [tuple(k.selp(a, b, self.rank == s_, type=t.b32)
                      for a, b in zip(mine, got[s_], strict=True))
                for s_ in range(self.world)]
        return _sum(k, self.dtype, vecs)

    def exchange(self, group: list[tuple[Reg, Reg]],
                 load: Callable[[Reg, Reg], tuple[Reg, ...]],
                 store: Callable[[Reg, Reg, tuple[Reg, ...]], None]) -> None:
        """The one-shot for each (vector, in range) of the group: send this rank's vector to
        every other rank, wait for theirs, store the sum."""
        mine = [self.canonical(load(vec, ok)) for vec, ok in group]
        for (vec, ok), words in zip(group, mine, strict=True):
            for i in range(1, self.world):
                self.send(0, i, vec, ok, words)
        got = self.receive(0, group)
        for (vec, ok), words, theirs in zip(group, mine, got, strict=True):
            store(vec, ok, self.total(words, theirs))

    def load(self, vec: Reg, ok: Reg) -> tuple[Reg, ...]:
        return _load_vec(self.k, self.inp, vec, ok)

    def store(self, vec: Reg, ok: Reg, words: tuple[Reg, ...]) -> None:
        _store_vec(self.k, self.out, vec, ok, words)

    def load_any(self, vec: Reg, ok: Reg) -> tuple[Reg, ...]:
        """Vector `vec` of x, a whole one or the one after them (its missing elements 0)."""
        k = self.k
        whole = self.load(vec, k.and_(ok, vec < self.nvec))
        last = vec == self.nvec
        part = self.load_tail(vec, k.and_(ok, last))
        return tuple(k.selp(p, w, last, type=t.b32) for p, w in zip(part, whole, strict=True))

    def store_any(self, vec: Reg, ok: Reg, words: tuple[Reg, ...]) -> None:
        k = self.k
        self.store(vec, k.and_(ok, vec < self.nvec), words)
        self.store_tail(vec, k.and_(ok, vec == self.nvec), words)

    def _elements(self) -> list[tuple[int, int, int]]:
        """The tail's elements: (index, word, bit offset in the word)."""
        per = VEC // ESIZE[self.dtype]
        bits = 8 * ESIZE[self.dtype]
        return [(e, e * bits // 32, e * bits % 32) for e in range(per - 1)]

    def load_tail(self, vec: Reg, ok: Reg) -> tuple[Reg, ...]:
        """The vector after the whole ones, its missing elements zero."""
        k = self.k
        words = [k.mov(0, type=t.b32) for _ in range(4)]
        first = _vec_at(self.k, self.inp, vec)
        for e, w, sh in self._elements():
            with k.if_(k.and_(ok, self.tail > e)):
                if self.dtype == "f32":
                    k.ld(Addr(first, 4 * e), type=t.b32, space="global", dst=words[w])
                else:
                    h = k.cvt(k.ld(Addr(first, 2 * e), type=t.u16, space="global"), t.u32,
                              atype=t.u16)
                    k.or_(words[w], k.shl(h, sh, type=t.b32), type=t.b32, dst=words[w])
        return tuple(words)

    def store_tail(self, vec: Reg, ok: Reg, words: tuple[Reg, ...]) -> None:
        k = self.k
        first = _vec_at(self.k, self.out, vec)
        for e, w, sh in self._elements():
            with k.if_(k.and_(ok, self.tail > e)):
                if self.dtype == "f32":
                    k.st(Addr(first, 4 * e), words[w], type=t.b32, space="global")
                else:
                    h = k.cvt(k.shr(words[w], sh, type=t.b32), t.u16, atype=t.u32)
                    k.st(Addr(first, 2 * e), h, type=t.u16, space="global")


def build_lamport(dtype: str, world: int, bounded: bool = False) -> Kernel:
    """The one-shot with the data as its own flag: every rank stores its vectors straight
    into a receive slot of every other rank's buffer (`st.relaxed.sys`), then polls its own
    slots until no word is the empty one (`signals.lamport_wait`), sums in rank order and
    empties what it read. No barrier and no acknowledgement wait: a round is one NVLink
    crossing. Two receive sets alternate by call parity; a rank reuses a set two calls
    later, after every other rank has sent it the call between, which each sends only once
    its previous call, and so its emptying of that set, is over."""
    k = Kernel(kernel_name("lamport", dtype, world), reqntid=THREADS)
    if bounded:
        debug.bounded_waits(k, timeout_ns=2_000_000_000)
    c = _Lamport(k, dtype, world)
    c.advance()
    with k.for_range(c.gid, c.nvec, k.mul(c.stride, LAMPORT_UNROLL, type=t.u32)) as i:
        group = []
        for u in range(LAMPORT_UNROLL):
            j = i if u == 0 else k.mad(c.stride, u, i, type=t.u32)
            group.append((j, j < c.nvec))
        c.exchange(group, c.load, c.store)
    # the elements after the whole vectors: one more vector, by the first thread
    last = k.and_(c.gid == 0, c.tail > 0)
    c.exchange([(c.nvec, last)], c.load_tail, c.store_tail)
    k.ret()
    return k


def build_lamport_two_shot(dtype: str, world: int, bounded: bool = False) -> Kernel:
    """The two-shot with the data as its own flag: x (with the vector after the whole ones)
    is cut into W chunks of `chunk` vectors. Reduce-scatter: each thread stores vector j of
    chunk q into its slot of rank q's first region, for every other rank q, polls its own
    slots for vector j of its chunk, sums in rank order, writes it to the output and stores
    the sum into every other rank's second region. All-gather: it polls its second region for
    vector j of every other chunk and writes those. Each rank sends 2 (W - 1) / W times the
    message, as the pulled two-shot reads, with no barrier and no copy of x. Thread t of
    every rank handles the same j, so a thread waits only on the same thread of the other
    ranks, which sent before it waited."""
    k = Kernel(kernel_name("lamport_two_shot", dtype, world), reqntid=THREADS)
    if bounded:
        debug.bounded_waits(k, timeout_ns=2_000_000_000)
    c = _Lamport(k, dtype, world, regions=2)
    c.advance()
    nall = k.add(c.nvec, k.selp(1, 0, c.tail > 0, type=t.u32), type=t.u32)
    chunk = k.div(k.add(nall, world - 1, type=t.u32), world, type=t.u32)
    with k.for_range(c.gid, chunk, c.stride) as j:
        for i, q in enumerate(c.peers, start=1):
            v = k.mad(q, chunk, j, type=t.u32)
            ok = v < nall
            c.send(0, i, j, ok, c.canonical(c.load_any(v, ok)))
        v = k.mad(c.rank, chunk, j, type=t.u32)
        ok = v < nall
        mine = c.canonical(c.load_any(v, ok))
        # a sum can round to -0.0 (a tiny negative f32 in bf16): made +0.0 before it is sent
        total = c.canonical(c.total(mine, c.receive(0, [(j, ok)])[0]))
        c.store_any(v, ok, total)
        for i in range(1, world):
            c.send(1, i, j, ok, total)
    with k.for_range(c.gid, chunk, c.stride) as j:
        vs = [k.mad(chunk, s_, j, type=t.u32) for s_ in range(world)]
        sent = [v < nall for v in vs]                  # rank s sent vector j of chunk s
        got = c.receive(1, [(j, sent)])[0]
        for s_, (v, ok) in enumerate(zip(vs, sent, strict=True)):
            c.store_any(v, k.and_(ok, c.rank != s_), got[s_])
    k.ret()
    return k


BUILDERS = {"one_shot": build_one_shot, "two_shot": build_two_shot, "lamport": build_lamport,
            "lamport_two_shot": build_lamport_two_shot}


def build_module(worlds: tuple[int, ...] = (2,), dtypes: tuple[str, ...] = tuple(ESIZE),
                 bounded: bool = False) -> Module:
    """Both algorithms for each dtype and world size; `bounded`: every cross-GPU wait traps
    after 2 s with a record naming the signal (`ptxdsl.debug`)."""
    kernels = [build(dt, w, bounded) for w in worlds for dt in dtypes
               for build in BUILDERS.values()]
    context = {"peer_buffers": ["bufs"], "signal_pads": ["pads"]}
    make = debug.module if bounded else Module
    return make(kernels, name="allreduce", target="sm_90a", check=context)


# -- host side ---------------------------------------------------------------------------------
def ctas(algorithm: str, nvec: int, world: int, pad_bytes: int) -> int:
    """The grid: a CTA per THREADS vectors of the work each CTA splits (the message, or one
    chunk for the two-shot), at most MAX_CTAS and, for the kernels that meet at the signal
    pads, what the pad has slots for."""
    work = -(-nvec // world) if algorithm.endswith("two_shot") else nvec
    slots = MAX_CTAS if algorithm.startswith("lamport") else pad_bytes // (4 * world)
    return max(1, min(-(-work // THREADS), MAX_CTAS, slots))


def choose(nbytes: int, world: int, lamport_bytes: int = 0, lamport2_bytes: int = 0) -> str:
    """The Lamport one-shot up to `lamport_bytes` (its receive slots' size) and
    `LAMPORT_MAX_BYTES[world]`; then the Lamport two-shot (which sends 2/W as much) up to
    `lamport2_bytes` and `LAMPORT_TWO_SHOT_MAX_BYTES[world]`; past those, the pulled one-shot
    when each rank's peer reads are few (small messages) or no more than the two-shot's (two
    ranks: (W - 1) = 2 (W - 1) / W), else the pulled two-shot (two barriers)."""
    if nbytes <= min(lamport_bytes, LAMPORT_MAX_BYTES.get(world, 0)):
        return "lamport"
    if nbytes <= min(lamport2_bytes, LAMPORT_TWO_SHOT_MAX_BYTES.get(world, 0)):
        return "lamport_two_shot"
    if world == 2 or nbytes <= ONE_SHOT_MAX_BYTES:
        return "one_shot"
    return "two_shot"


# On 4 H100s (BENCHMARKS.md section 9, CUDA graphs): one-shot 12.2 us against two-shot's
# 16.6 at 512 KiB, 51.7 against 36.8 at 4 MiB
ONE_SHOT_MAX_BYTES = 1 << 20
# The largest message the Lamport kernels take by default, per world size (the one-shot's
# receive slots cost 2 (W - 1) times that per rank, the two-shot's 4 (W - 1) / W times).
# Measured on 2 and 4 H200s with CUDA graphs (BENCHMARKS.md section 9): on two the one-shot
# wins at every size (107 us at 32 MiB against the Lamport two-shot's 117 and the pulled
# kernels' 125); on four the one-shot up to 64 KiB (5.5 against 6.9 us), the Lamport two-shot
# from 512 KiB (7.9 against 9.7; 22.8 against the pulled two-shot's 32.2 at 4 MiB, 163
# against 188 at 32 MiB). Eight GPUs have not been measured: their calls take the pulled
# kernels.
LAMPORT_MAX_BYTES = {2: 32 << 20, 4: 256 << 10}
LAMPORT_TWO_SHOT_MAX_BYTES = {4: 32 << 20}
# Sizes whose launch plan an AllReduce keeps (a call of another size plans anew)
MAX_PLANS = 64
# A plan: the function (None: nothing to launch), the grid, whether out may be x, and the
# launch's arguments before and after x's and out's pointers
_Plan = tuple[Any, int, bool, tuple[tuple[int, ...], tuple[int, ...]]]


class AllReduce:
    """All-reduce (sum) of tensors of up to `max_numel` elements of `dtype` ('bf16' or 'f32')
    over `group` (default: the world), on the current CUDA device. `lamport_bytes`: the
    largest message the Lamport kernels' slots take (default: `LAMPORT_MAX_BYTES` and
    `LAMPORT_TWO_SHOT_MAX_BYTES` of the world size; they cost 2 (W - 1) and 4 (W - 1) / W
    times that of symmetric memory per rank); `bounded`: the debug build, whose cross-GPU
    waits trap after 2 s with an error record."""

    def __init__(self, max_numel: int, dtype: str = "bf16", group: Any = None,
                 bounded: bool = False, lamport_bytes: int | None = None):
        import torch
        import torch.distributed as dist
        import torch.distributed._symmetric_memory as symm_mem

        from ptxdsl.runtime import SymmetricBuffers
        from ptxdsl.runtime.symmetric import torch_raw_stream
        if dtype not in ESIZE:
            raise ValueError(f"AllReduce: dtype is one of {sorted(ESIZE)}, got {dtype!r}")
        if not isinstance(max_numel, int) or max_numel < 1:
            raise ValueError(f"AllReduce: max_numel is a positive int, got {max_numel!r}")
        if lamport_bytes is not None and (not isinstance(lamport_bytes, int)
                                          or lamport_bytes < 0):
            raise ValueError(f"AllReduce: lamport_bytes is an int >= 0 (the largest message "
                             f"of the Lamport kernels), got {lamport_bytes!r}")
        self.group = group if group is not None else dist.group.WORLD
        assert self.group is not None, "torch.distributed is not initialised"
        self.world = dist.get_world_size(self.group)
        if self.world not in WORLDS:
            raise ValueError(f"AllReduce: world sizes {WORLDS}, this group has {self.world}")
        self.dtype, self.torch_dtype = dtype, {"bf16": torch.bfloat16,
                                               "f32": torch.float32}[dtype]
        self.max_numel = max_numel
        self.half_bytes = -(-max_numel * ESIZE[dtype] // VEC) * VEC
        device = torch.device("cuda", torch.cuda.current_device())
        # two halves that calls copying x alternate between, then `symmetric_input`'s part
        self.buf = symm_mem.empty(3 * self.half_bytes, dtype=torch.uint8, device=device)
        handle = symm_mem.rendezvous(self.buf, self.group.group_name)
        self.ranks = SymmetricBuffers.from_torch(handle, world_size=self.world)
        # the Lamport kernel's receive slots: two sets of W - 1, each slot as large as the
        # largest message it takes, all filled with the empty word before any rank can send
        # (the fill is synchronised before the rendezvous, which every rank must reach)
        cap = LAMPORT_MAX_BYTES.get(self.world, 0) if lamport_bytes is None else lamport_bytes
        self.lamport_bytes = min(cap, max_numel * ESIZE[dtype])
        self.slot_bytes = VEC * max(1, -(-self.lamport_bytes // VEC))
        self.lbuf, self.lranks = self._slots(2 * (self.world - 1) * self.slot_bytes, device)
        # the Lamport two-shot's: two sets of two regions of W - 1 slots of a chunk
        cap = (LAMPORT_TWO_SHOT_MAX_BYTES.get(self.world, 0) if lamport_bytes is None
               else lamport_bytes)
        self.lamport2_bytes = min(cap, max_numel * ESIZE[dtype])
        vectors = -(-self.lamport2_bytes // VEC)            # with the one after the whole
        self.chunk_slot_bytes = VEC * max(1, -(-vectors // self.world))
        self.l2buf, self.l2ranks = self._slots(4 * (self.world - 1) * self.chunk_slot_bytes,
                                               device)
        self.state = torch.zeros(4, dtype=torch.int32, device=device)
        module = build_module((self.world,), (dtype,), bounded).load(device=self.ranks.device)
        self.module = module                 # the functions' module stays loaded
        self.fns = {alg: module[kernel_name(alg, dtype, self.world)] for alg in ALGORITHMS}
        self.device, self.index = device, device.index
        # what every launch passes unchanged, and PyTorch's current-stream lookup: a call
        # costs the checks of x and out and one launch
        r = self.ranks
        self._static = (r.buffer_ptrs_dev, r.signal_pad_ptrs_dev, self.state.data_ptr())
        self._lstatic = (self.lranks.buffer_ptrs_dev, self.state.data_ptr())
        self._l2static = (self.l2ranks.buffer_ptrs_dev, self.state.data_ptr())
        self._stream = torch_raw_stream()
        nbytes = max_numel * ESIZE[dtype]
        self._sym = self.buf[2 * self.half_bytes:2 * self.half_bytes + nbytes].view(
            self.torch_dtype)
        self._sym_ptr = self._sym.data_ptr()
        self._plans: dict[tuple[int, str | None, bool], _Plan] = {}
        self._torch = torch

    def _slots(self, nbytes: int, device: Any) -> tuple[Any, Any]:
        """A Lamport kernel's receive slots: `nbytes` of symmetric memory per rank, filled
        with the empty word before any rank can send (the fill is synchronised before the
        rendezvous, which every rank must reach), and this rank's view of them."""
        import torch
        import torch.distributed._symmetric_memory as symm_mem

        from ptxdsl.runtime import SymmetricBuffers
        buf = symm_mem.empty(nbytes // 4, dtype=torch.int32, device=device)
        buf.fill_(EMPTY[self.dtype] - (1 << 32))
        torch.cuda.synchronize(device)
        assert self.group is not None
        handle = symm_mem.rendezvous(buf, self.group.group_name)
        return buf, SymmetricBuffers.from_torch(handle, world_size=self.world)

    def symmetric_input(self, numel: int) -> torch.Tensor:
        """A tensor of `numel` elements in the symmetric buffer itself: written by the caller
        and passed as `x`, it is read where it is (no copy; one more barrier at the end, after
        which the caller may overwrite it). The two-shot may reduce it in place (`out=x`)."""
        if not isinstance(numel, int) or not 0 <= numel <= self.max_numel:
            raise ValueError(f"AllReduce.symmetric_input: numel in 0..{self.max_numel}, got "
                             f"{numel!r}")
        return self._sym[:numel]

    def __call__(self, x: torch.Tensor, out: torch.Tensor | None = None,
                 algorithm: str | None = None) -> torch.Tensor:
        fn, grid, args, result = self._prepare(x, out, algorithm)
        if fn is not None:
            fn.launch(grid, THREADS, args, stream=self._stream(self.index))
        return result

    def bind(self, x: torch.Tensor, out: torch.Tensor | None = None,
             algorithm: str | None = None) -> Callable[[], torch.Tensor]:
        """This all-reduce of x into out (as a call would make or take it), checked once:
        the function returned launches it on the current stream each time it is called and
        returns out, checking only that x and out still have the memory they had (a tensor
        resized or re-pointed since is refused). For a step that reduces the same buffers
        every time (a decode loop): a call costs its launch and not the checks."""
        fn, grid, args, result = self._prepare(x, out, algorithm)
        xp, op, stream, index = x.data_ptr(), result.data_ptr(), self._stream, self.index

        def call() -> torch.Tensor:
            if x.data_ptr() != xp or result.data_ptr() != op:
                raise ValueError("AllReduce.bind: x or out no longer has the memory it had "
                                 "when bound (resized or re-pointed): bind again")
            if fn is not None:
                fn.launch(grid, THREADS, args, stream=stream(index))
            return result
        return call

    def _prepare(self, x: torch.Tensor, out: torch.Tensor | None,
                 algorithm: str | None) -> tuple[Any, int, tuple[int, ...], torch.Tensor]:
        """A call's checks: (function or None, grid, arguments, out)."""
        th = self._torch
        if not isinstance(x, th.Tensor) or x.dtype is not self.torch_dtype \
                or x.get_device() != self.index or not x.is_contiguous():
            raise ValueError(f"AllReduce: x must be a contiguous {self.torch_dtype} tensor on "
                             f"{self.device}, got {_describe(x)}")
        numel = x.numel()
        xp = x.data_ptr()
        sym = xp == self._sym_ptr
        plan = self._plans.get((numel, algorithm, sym))
        if plan is None:
            plan = self._plan(numel, algorithm, sym)
        fn, grid, in_place, (before, after) = plan
        if out is None:
            made: torch.Tensor = x if sym and in_place else th.empty_like(x)
            out = made
            op = out.data_ptr()
        elif not isinstance(out, th.Tensor) or out.dtype is not x.dtype \
                or out.get_device() != self.index or out.numel() != numel \
                or not out.is_contiguous() or ((op := out.data_ptr()) == xp and not in_place):
            raise ValueError(f"AllReduce: out must be a contiguous tensor of x's {numel} "
                             "elements, type and device (x itself only for the Lamport "
                             f"one-shot or a two-shot of a symmetric_input), got "
                             f"{_describe(out)}")
        return fn, grid, (*before, xp, op, *after), out

    def _plan(self, numel: int, algorithm: str | None, sym: bool) -> _Plan:
        """What a call of `numel` elements launches, checked once per size, algorithm and
        kind of x (calls repeat a few sizes, and a call's host time is what small messages
        cost): (function or None for nothing to do, grid, whether out may be x, the
        launch's arguments before and after x's and out's pointers)."""
        if numel > self.max_numel:
            raise ValueError(f"AllReduce: x has {numel} elements, this AllReduce was made "
                             f"for at most {self.max_numel}")
        nbytes = numel * ESIZE[self.dtype]
        alg = algorithm or choose(nbytes, self.world, self.lamport_bytes,
                                  self.lamport2_bytes)
        fn = self.fns.get(alg)
        if fn is None:
            raise ValueError(f"AllReduce: algorithm is one of {ALGORITHMS}, got {alg!r}")
        room = {"lamport": self.lamport_bytes, "lamport_two_shot": self.lamport2_bytes}
        if nbytes > room.get(alg, nbytes):
            raise ValueError(f"AllReduce: the {alg.replace('_', ' ')} takes at most "
                             f"{room[alg]} bytes here (lamport_bytes=), x has {nbytes}")
        # the Lamport one-shot reads each vector of x before it writes that vector of out,
        # in the same thread, and no other rank reads x: it may run in place on any x (the
        # Lamport two-shot writes chunk r of out before it reads the other chunks of x)
        in_place = alg == "lamport" or (sym and alg == "two_shot")
        nvec, rest = divmod(nbytes, VEC)
        grid = ctas(alg, nvec, self.world, self.ranks.signal_pad_size)
        args: tuple[tuple[int, ...], tuple[int, ...]]
        if alg == "lamport":
            args = (self._lstatic, (nvec, rest // ESIZE[self.dtype], self.slot_bytes,
                                    self.ranks.rank))
        elif alg == "lamport_two_shot":
            args = (self._l2static, (nvec, rest // ESIZE[self.dtype], self.chunk_slot_bytes,
                                     self.ranks.rank))
        else:
            args = (self._static, (nvec, rest // ESIZE[self.dtype], self.half_bytes,
                                   self.ranks.rank, int(sym)))
        plan = (fn if numel else None, grid, in_place, args)
        if len(self._plans) < MAX_PLANS:
            self._plans[(numel, algorithm, sym)] = plan
        return plan


def _describe(x: Any) -> str:
    if not hasattr(x, "dtype"):
        return type(x).__name__
    return (f"{x.dtype} {tuple(x.shape)} on {x.device}"
            + ("" if x.is_contiguous() else ", not contiguous"))


# -- the run under torchrun --------------------------------------------------------------------
SIZES = (1, 7, 8, 4095, 4096, 65536 + 3, 1 << 20, (4 << 20) + 5)   # elements


def _torchrun_main() -> int:
    import torch
    import torch.distributed as dist
    local = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local)
    dist.init_process_group("nccl", device_id=torch.device("cuda", local))
    rank, world = dist.get_rank(), dist.get_world_size()
    report = Report(f"allreduce (rank {rank} of {world})")
    report.note(f"rank {rank}: {torch.cuda.get_device_name()}")
    try:
        for dtype, tol in (("bf16", 2e-2), ("f32", 1e-5)):
            # slots for every size, so that both Lamport kernels run at each
            ar = AllReduce(max(SIZES), dtype, lamport_bytes=max(SIZES) * ESIZE[dtype])
            report.note(f"{dtype}: signal pad {ar.ranks.signal_pad_size} bytes, buffer "
                        f"2 x {ar.half_bytes} bytes")
            gen = torch.Generator(device="cuda").manual_seed(1234 + rank)
            for n in SIZES:
                for alg in ALGORITHMS:
                    x = torch.randn(n, generator=gen, device="cuda").to(ar.torch_dtype)
                    want = x.float().clone()       # .float() of an f32 tensor is itself
                    dist.all_reduce(want)
                    for rep in range(2):          # the pads and buffer halves reused
                        got = ar(x, algorithm=alg).float()
                        err = float((got - want).abs().max() / want.abs().max().clamp(min=1))
                        report.check(f"{dtype} {alg} n={n} call {rep + 1}", err <= tol,
                                     f"max relative difference {err:.2e}")
                    if alg == "lamport":          # in place on any tensor
                        y = x.clone()
                        ar(y, y, algorithm=alg)
                        err = float((y.float() - want).abs().max()
                                    / want.abs().max().clamp(min=1))
                        report.check(f"{dtype} {alg} n={n} in place", err <= tol,
                                     f"max relative difference {err:.2e}")
                    xs = ar.symmetric_input(n)    # read where it is; two-shot: in place
                    xs.copy_(x)
                    got = ar(xs, algorithm=alg).float()
                    err = float((got - want).abs().max() / want.abs().max().clamp(min=1))
                    report.check(f"{dtype} {alg} n={n} symmetric input"
                                 + (" (in place)" if alg == "two_shot" else ""), err <= tol,
                                 f"max relative difference {err:.2e}")
            x = torch.randn(SIZES[5], device="cuda").to(ar.torch_dtype)
            out = torch.empty_like(x)
            want = x.float().clone()
            dist.all_reduce(want)
            graph = torch.cuda.CUDAGraph()
            ar(x, out)                             # warm up outside the capture
            torch.cuda.synchronize()
            with torch.cuda.graph(graph):
                for _ in range(3):
                    ar(x, out)
            for rep in range(3):
                out.zero_()
                graph.replay()
                err = float((out.float() - want).abs().max() / want.abs().max())
                report.check(f"{dtype} CUDA graph replay {rep + 1} (3 calls each)", err <= tol,
                             f"max relative difference {err:.2e}")
        torch.cuda.synchronize()
    finally:
        dist.barrier()
        dist.destroy_process_group()
    if rank == 0 or not report.ok:
        print(report.format())
    return 0 if report.ok else 1


def _not_run(reason: str) -> Report:
    return not_run("allreduce", reason, lambda: build_module(WORLDS),
                   "every world size's kernels")


def run() -> Report:
    """Relaunch under torchrun on the visible GPUs (2, 4 or 8 with peer access), its ranks'
    output one check; with fewer, the kernels built, checked and assembled."""
    n, reason = torchrun_world(WORLDS)
    if reason is not None:
        return _not_run(reason)
    report = Report("allreduce")
    code, out = torchrun(__file__, n, capture=True, timeout_s=TORCHRUN_TIMEOUT_S)
    report.check(f"torchrun --nproc-per-node={n} (every check on every rank)", code == 0,
                 "\n" + out[-20000:])
    return report


def main(argv: list[str] | None = None) -> int:
    return multi_gpu_main(argv, __doc__, build_module, run, sample=__file__,
                          rank_main=_torchrun_main, one_gpu=_not_run, worlds=WORLDS,
                          timeout_s=TORCHRUN_TIMEOUT_S)


if __name__ == "__main__":
    raise SystemExit(main())
