"""The `Kernel` builder methods of `ptxdsl.instructions.warp`'s instructions: `k.shfl_sync`,
`k.vote_sync`, `k.activemask`, `k.elect_sync`.

A mixin of `ptxdsl.kernel.Kernel`; the instruction classes it emits know nothing of the
kernel (docs/CONTRIBUTING.md, Layers).
"""

from __future__ import annotations

from typing import Literal, overload

from ..instructions.base import check_enum
from ..instructions.warp import FULL_MASK, Activemask, Elect, Shfl, ShflMode, Vote, VoteMode
from ..kernel_host import KernelHost
from ..operands import SINK, IntLike, Predicate, Reg, Value
from ..types import ScalarType as T


class WarpOps(KernelHost):
    """Kernel builder methods for warp-collective instructions."""

    @overload
    def shfl_sync(self, mode: ShflMode | str, a: Value, b: Value, c: Value | None = None, *,
                  mask: Reg | IntLike = FULL_MASK, pred: Literal[False] = False,
                  dst: Reg | None = None) -> Reg: ...
    @overload
    def shfl_sync(self, mode: ShflMode | str, a: Value, b: Value, c: Value | None = None, *,
                  mask: Reg | IntLike = FULL_MASK, pred: Literal[True],
                  dst: Reg | None = None) -> tuple[Reg, Reg]: ...
    @overload
    def shfl_sync(self, mode: ShflMode | str, a: Value, b: Value, c: Value | None = None, *,
                  mask: Reg | IntLike = FULL_MASK, pred: bool,
                  dst: Reg | None = None) -> Reg | tuple[Reg, Reg]: ...

    def shfl_sync(self, mode: ShflMode | str, a: Value, b: Value, c: Value | None = None, *,
                  mask: Reg | IntLike = FULL_MASK, pred: bool = False,
                  dst: Reg | None = None) -> Reg | tuple[Reg, Reg]:
        """`shfl.sync.mode.b32`; returns d, or (d, p) with pred=True.

        `c` defaults to the whole-warp value CUDA's `__shfl_*_sync` uses: 0 for up, 31 otherwise.
        """
        m = check_enum("shfl.sync", "mode", mode, ShflMode)
        if c is None:
            c = 0 if m is ShflMode.up else 0x1F
        if dst is None:
            dst = self.reg(a.type if isinstance(a, Reg) and a.type.bits == 32 else T.b32)
        p = self.reg(T.pred) if pred else None
        self.emit(Shfl(m, dst, a, b, c, mask, p))
        return (dst, p) if p is not None else dst

    def vote_sync(self, mode: VoteMode | str, pred: Predicate, *,
                  mask: Reg | IntLike = FULL_MASK, dst: Reg | None = None) -> Reg:
        """`vote.sync.{all,any,uni}.pred` (returns a predicate) or, with mode='ballot',
        `vote.sync.ballot.b32` (returns the .b32 lane mask)."""
        m = check_enum("vote.sync", "mode", mode, VoteMode)
        d = dst if dst is not None else self.reg(T.b32 if m is VoteMode.ballot else T.pred)
        self.emit(Vote(m, d, pred, mask))
        return d

    def activemask(self, *, dst: Reg | None = None) -> Reg:
        """`activemask.b32 d;`"""
        d = dst if dst is not None else self.reg(T.b32)
        self.emit(Activemask(d))
        return d

    @overload
    def elect_sync(self, mask: Reg | IntLike = FULL_MASK, *,
                   leader: Literal[False] = False) -> Reg: ...
    @overload
    def elect_sync(self, mask: Reg | IntLike = FULL_MASK, *,
                   leader: Literal[True]) -> tuple[Reg, Reg]: ...
    @overload
    def elect_sync(self, mask: Reg | IntLike = FULL_MASK, *,
                   leader: bool) -> Reg | tuple[Reg, Reg]: ...

    def elect_sync(self, mask: Reg | IntLike = FULL_MASK, *,
                   leader: bool = False) -> Reg | tuple[Reg, Reg]:
        """`elect.sync _|p, mask;` returns p, true in one elected thread (cuda::ptx::elect_sync).
        With leader=True: `elect.sync d|p, mask;` and returns (d, p), d the leader's lane."""
        p = self.reg(T.pred)
        if not leader:
            self.emit(Elect(p, SINK, mask))
            return p
        d = self.reg(T.b32)
        self.emit(Elect(p, d, mask))
        return (d, p)
