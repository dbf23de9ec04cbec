"""Split-K partial sums added up in a fixed order through global memory.

When a tile's K range is cut into `parts` units that run on different CTAs (split-K, or a
grouped GEMM's parts of one expert's tile), each unit's consumer warpgroup calls
`ordered_split_sum` at its end: it stores its f32 accumulator in its slot, counts itself on
the tile's counter, and the unit that counts last adds every part's slot, in part order,
into its accumulator. The order is fixed, so the sum has the same bits whichever unit finished
last (samples/gemm_decode.py and samples/grouped_gemm_moe.py check that on the GPU)::

    st.global.v4.f32 [mine + 2048*q], {quad q};          // q = 0 .. regs/4 - 1
    bar.sync barrier, 128;                                // the warpgroup's stores are done
    @leader atom.acq_rel.gpu.global.add.u32 %parts_before, [counter], 1;
    setp.eq.and.u32 %last, %parts_before, parts - 1, leader;
    @%last st.global.u32 [counter], 0;                    // zero for the next launch
    bar.red.or.pred %holds, barrier, 128, %last;          // the whole warpgroup learns it
    @%holds: quads = [first + 2048*q]; then for each part p = 1 .. parts - 1:
             quads += [first + p*stride + 2048*q]         // ld.global.v4.f32, part order

A slot holds a warpgroup's accumulator quad-major, its 128 threads' 16-byte quads
interleaved (each `st.v4` of the warpgroup is one contiguous 2 KiB run): thread t's quad q is
at slot + 2048*q + 16*t, so `mine` and `first` already include the thread's 16*t. The
leader's acquire-release add orders every thread's stores (published by the barrier) before
the count, and the last unit's count before its loads of the other slots.
"""

from __future__ import annotations

from typing import Any

from .errors import OperandError, fail_closed
from .fragments import Fragment
from .instructions.base import _given, int_like
from .instructions.sync import _barrier_id
from .kernel import Kernel
from .operands import Addr, NegPred, Reg, check_owned
from .types import ScalarType as T

THREADS = 128                 # a warpgroup
QUAD_BYTES = THREADS * 16     # one v4 of each thread: a slot's quads follow one another


def ordered_split_sum(k: Kernel, acc: Fragment, *, mine: Reg, first: Reg, stride: int,
                      counter: Reg, parts: Reg, barrier: Any, leader: Reg) -> Reg:
    """Store this unit's part of `acc` (an .f32 accumulator of one warpgroup) at `mine`, count
    it at `counter` (a .u32 in global memory, zero before the tile's first unit counts), and
    when it is the last of `parts` units, load every part's slot (part p at `first` + p *
    `stride` bytes) into `acc`, added in part order. `barrier`: the warpgroup's named barrier
    (128 threads); `leader`: the predicate of the one thread that counts. Returns the
    predicate "this warpgroup holds the tile's sum" (the same in all its threads)."""
    name = "ordered_split_sum"
    if not isinstance(k, Kernel):
        raise OperandError(name, "k", "the Kernel to build into", _given(k))
    if not isinstance(acc, Fragment) or acc.dtype is not T.f32 or acc.packed:
        raise OperandError(name, "acc", "an .f32 accumulator Fragment (k.fragment(t.f32, ...))",
                           _given(acc))
    # by this helper's name and the operand given, not by the st/atom/mov it builds from them
    check_owned(name, k, acc=acc.regs, mine=mine, first=first, counter=counter, parts=parts,
                barrier=barrier, leader=leader)
    for operand, ptr in (("mine", mine), ("first", first), ("counter", counter)):
        if not isinstance(ptr, Reg) or ptr.type.bits != 64 or ptr.type.kind not in "bus":
            raise OperandError(name, operand, "a 64-bit integer register holding a global "
                               "address", _given(ptr))
    if not isinstance(parts, Reg) or parts.type.bits != 32 or parts.type.kind not in "bus":
        raise OperandError(name, "parts", "a 32-bit integer register (the tile's unit count, "
                           "the same in every unit)", _given(parts))
    flag = leader.reg if isinstance(leader, NegPred) else leader
    if not isinstance(flag, Reg) or flag.type is not T.pred:
        raise OperandError(name, "leader", "a predicate (true in the one thread that counts)",
                           _given(leader))
    _barrier_id(f"{name}: barrier", barrier)
    stride = int_like(stride)
    # below 2^63: the step between slots is added to a 64-bit address (add.u64), and a
    # larger one wraps past any slot a device holds
    if isinstance(stride, bool) or not isinstance(stride, int) or stride < acc.n * 64 * 4 \
            or stride % 16 or stride >= 1 << 63:
        raise OperandError(name, "stride", f"an int multiple of 16, at least the accumulator's "
                           f"{acc.n * 64 * 4} bytes (one slot) and below 2^63", _given(stride))
    regs = acc.regs
    quads = [regs[q:q + 4] for q in range(0, len(regs), 4)]
    for q, quad in enumerate(quads):
        k.st(Addr(mine, q * QUAD_BYTES), quad, type=T.f32, space="global")
    k.bar_sync(barrier, THREADS)            # every thread's partial is stored: publish them
    before = k.mov(0, dst=k.reg(T.u32, "parts_before"))
    with k.if_(leader):
        k.atom("add", Addr(counter), 1, type=T.u32, space="global", sem="acq_rel",
               scope="gpu", dst=before)
    last = k.setp("eq", before, k.sub(parts, 1), type=T.u32, bool_op="and", c=leader)
    with k.if_(last):
        k.st(Addr(counter), 0, type=T.u32, space="global")      # zero for the next launch
    holds = k.bar_red("or", last, barrier, THREADS)
    with k.if_(holds):
        src = k.mov(first)          # a copy: the caller's register stays where it pointed
        for q, quad in enumerate(quads):
            part0 = k.ld(Addr(src, q * QUAD_BYTES), type=T.f32, space="global", vec=4)
            for r, v in zip(quad, part0, strict=True):
                k.mov(v, dst=r)
        with k.for_range(1, parts):
            k.add(src, stride, dst=src)
            for q, quad in enumerate(quads):
                more = k.ld(Addr(src, q * QUAD_BYTES), type=T.f32, space="global", vec=4)
                for r, v in zip(quad, more, strict=True):
                    k.add(r, v, dst=r)
    return holds


ordered_split_sum = fail_closed("ordered_split_sum", ordered_split_sum)
