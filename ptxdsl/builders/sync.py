"""The `Kernel` builder methods of `ptxdsl.instructions.sync`'s instructions: `k.bar_sync`,
`k.barrier_sync`, `k.bar_arrive`, `k.barrier_arrive`, `k.bar_red`, `k.barrier_red`,
`k.syncwarp`.

A mixin of `ptxdsl.kernel.Kernel`; the instruction classes it emits know nothing of the
kernel (docs/CONTRIBUTING.md, Layers).
"""

from __future__ import annotations

from ..instructions.sync import Barrier, BarrierOp, BarrierRed, BarrierRedOp, WarpSync
from ..kernel_host import KernelHost
from ..operands import IntLike, Predicate, Reg
from ..types import ScalarType as T


class SyncOps(KernelHost):
    """Kernel builder methods for barriers."""

    def bar_sync(self, id: Reg | IntLike = 0, count: Reg | IntLike | None = None) -> None:
        """`bar.sync id{, count};` (`__syncthreads()` is `bar.sync 0`)."""
        self.emit(Barrier(BarrierOp.sync, id, count, short=True))

    def barrier_sync(self, id: Reg | IntLike = 0, count: Reg | IntLike | None = None, *,
                     aligned: bool = True) -> None:
        """`barrier.sync{.aligned} id{, count};`; aligned=False allows divergent arrival."""
        self.emit(Barrier(BarrierOp.sync, id, count, aligned))

    def bar_arrive(self, id: Reg | IntLike, count: Reg | IntLike) -> None:
        """`bar.arrive id, count;`: arrive without waiting (producer side of a named barrier)."""
        self.emit(Barrier(BarrierOp.arrive, id, count, short=True))

    def barrier_arrive(self, id: Reg | IntLike, count: Reg | IntLike, *,
                       aligned: bool = True) -> None:
        """`barrier.arrive{.aligned} id, count;`"""
        self.emit(Barrier(BarrierOp.arrive, id, count, aligned))

    def bar_red(self, op: BarrierRedOp | str, pred: Predicate, id: Reg | IntLike = 0,
                count: Reg | IntLike | None = None, *, dst: Reg | None = None) -> Reg:
        """`bar.red.popc.u32` (op='popc': how many threads had `pred`) or `bar.red.{and,or}.pred`;
        returns the result register."""
        return self._barrier_red(op, pred, id, count, True, True, dst)

    def barrier_red(self, op: BarrierRedOp | str, pred: Predicate, id: Reg | IntLike = 0,
                    count: Reg | IntLike | None = None, *, aligned: bool = True,
                    dst: Reg | None = None) -> Reg:
        """`barrier.red.op{.aligned}.type d, id{, count}, pred;`"""
        return self._barrier_red(op, pred, id, count, aligned, False, dst)

    def _barrier_red(self, op, pred, id, count, aligned, short, dst):
        is_popc = op in ("popc", BarrierRedOp.popc)
        d = dst if dst is not None else self.reg(T.u32 if is_popc else T.pred)
        self.emit(BarrierRed(op, d, id, pred, count, aligned, short))
        return d

    def syncwarp(self, mask: Reg | IntLike = 0xFFFFFFFF) -> None:
        """`bar.warp.sync mask;` (`__syncwarp(mask)`); the full mask is written `-1`."""
        self.emit(WarpSync(mask))
