"""Registers written more than once that a thread reads as one value.

A register with one write is a value (`values`); one written several times is opaque there, so
two branches on a flag nvcc writes twice were not known to go the same way. Two shapes are
taken as one value per thread, for the conditions `divergence` correlates:

- settled: no statement reading it writes it or can be followed by a write of it, so every
  read sees the last write (CUTLASS's storer flag `warp == 4 && elect_one_sync()`, written
  `mov.pred p, 0` and, in the block only warp 4 enters, `setp.ne p, elected, 0`, before the
  tile loop that branches on it);
- recomputed the same way: one unguarded write dominates the others and every read, the
  blocks between that first write and the others (the region) have no cycle and no branch,
  guard or written value that is not itself fixed for the thread, and no write can follow a
  read before the first write runs again. Each time it is recomputed (CUTLASS's grouped GEMM
  recomputes the storer flag for every tile: `mov.u16 f, 0`, then `selp.u16 f, 1, 0,
  elected` under `warp == 0`) the thread takes the same way through the region and writes
  the same values, and every read comes once it is done with them: no read sees a partial
  recomputation.

A flag written again after it is read any other way (flipped in a loop, set under a loop
counter) is neither: a later branch may see another value.
"""

from __future__ import annotations

from typing import Any

from ..instructions.base import sources
from .cfg import guard_polarity


class Flags:
    """`stable(id)` for the registers of one body, memoised (`Divergence.settled`)."""

    def __init__(self, div: Any):
        self.div, self.cfg, self.values = div, div.cfg, div.values
        self._memo: dict[int, bool] = {}
        self._reads: dict[int, tuple[Any, list[int]]] | None = None

    def stable(self, reg_id: int) -> bool:
        """Does a thread read the register with this id as one value (see the module)?"""
        hit = self._memo.get(reg_id)
        if hit is None:
            self._memo[reg_id] = False      # a flag computed from itself is not
            if self._reads is None:
                self._reads = self._multi_reads()
            reg, reads = self._reads.get(reg_id, (None, []))
            hit = reg is not None and (self._settled(reg, reads) or
                                       self._recomputed(reg, reads))
            self._memo[reg_id] = hit
        return hit

    def _multi_reads(self) -> dict[int, tuple[Any, list[int]]]:
        """id -> (register, the statements reading it, guards included) for each register
        written more than once: one pass over the body."""
        multi = {id(r): r for r in self.values.defs.multi()}
        out: dict[int, tuple[Any, list[int]]] = {}
        for i, st in enumerate(self.cfg.body):
            insn = getattr(st, "insn", None)
            if insn is None:
                continue
            guard = getattr(st, "guard", None)
            regs = sources(insn)
            if guard is not None:
                regs.append(guard_polarity(guard)[0])
            for r in regs:
                if id(r) in multi:
                    out.setdefault(id(r), (r, []))[1].append(i)
        return out

    def _settled(self, reg: Any, reads: list[int]) -> bool:
        cfg = self.cfg
        writes = set(self.values.defs.get(reg, ()))
        back = self._walk({cfg.block_of(i) for i in writes}, cfg.preds, None)
        for i in reads:
            b = cfg.block_of(i)
            if i in writes or any(w > i and cfg.block_of(w) == b for w in writes) or \
                    any(x in back for x in cfg.succs(b)):
                return False
        return True

    def _walk(self, start: set[int], step: Any, stop: int | None) -> set[int]:
        """`start` and every block reached from it through `step` (preds or succs), not
        passing block `stop`."""
        seen = set(start)
        todo = list(start)
        while todo:
            n = todo.pop()
            for x in (step[n] if isinstance(step, list) else step(n)):
                if x not in seen and x != stop and x < len(self.cfg.blocks):
                    seen.add(x)
                    todo.append(x)
        return seen

    def _dominates(self, a: int, b: int) -> bool:
        ba, bb = self.cfg.block_of(a), self.cfg.block_of(b)
        return a < b if ba == bb else ba in self.div._dominating(bb)

    def _recomputed(self, reg: Any, reads: list[int]) -> bool:
        cfg, values, body = self.cfg, self.values, self.cfg.body
        writes = list(values.defs.get(reg, ()))
        firsts = [w for w in writes if body[w].guard is None and
                  all(self._dominates(w, x) for x in writes if x != w)]
        if len(firsts) != 1 or not reads:
            return False
        first = firsts[0]
        home = cfg.block_of(first)
        if any(cfg.block_of(w) == home and w < first for w in writes) or \
                not all(self._dominates(first, i) for i in reads):
            return False
        # The blocks between the first write and the others (not through the first again).
        ahead = self._walk(set(cfg.succs(home)) - {home}, cfg.succs, home)
        behind = self._walk({cfg.block_of(w) for w in writes} - {home}, cfg.preds, home)
        region = (ahead & behind) | {home}
        if self._cyclic(region, home):
            return False
        # A read from which no write can be reached before the first one runs again comes
        # once the thread is done with the writes: it sees what they left.
        for i in reads:
            b = cfg.block_of(i)
            if any(w > i and cfg.block_of(w) == b for w in writes) or \
                    any(x in behind and x != home for x in cfg.succs(b)):
                return False
        for b in region:
            blk = cfg.blocks[b]
            if blk.branch is not None and blk.taken != blk.fall and \
                    not self._fixed(guard_polarity(body[blk.branch].guard)[0]):
                return False
        for w in writes:
            st = body[w]
            if st.guard is not None and not self._fixed(guard_polarity(st.guard)[0]):
                return False
            for src in values.sources_of(w):
                if not self._fixed(src, w):
                    return False
        return True

    def _fixed(self, reg: Any, at: int | None = None) -> bool:
        """Is `reg` (read at statement `at`) one value for the thread? A register written
        more than once is, where the one write reaching `at` is a constant `mov` (nvcc's
        `mov.u32 %r712, %r711` right after `mov.u32 %r711, 0`)."""
        from ..instructions.move import Mov
        from ..operands import Imm
        from .divergence import invariant
        writes = self.values.defs.get(reg, ())
        if at is not None and len(writes) > 1:
            got = self.cfg.reaching(writes, at)
            if len(got) == 1:
                st = self.cfg.body[next(iter(got))]
                if st.guard is None and isinstance(st.insn, Mov) and isinstance(st.insn.a, Imm):
                    return True
        return invariant(self.values.vn(reg), self.stable)

    def _cyclic(self, region: set[int], home: int) -> bool:
        """Does the region have a cycle (edges back into `home` aside)?"""
        state: dict[int, int] = {}
        for root in region:
            if root in state:
                continue
            stack = [(root, iter(self.cfg.succs(root)))]
            state[root] = 1
            while stack:
                n, it = stack[-1]
                for x in it:
                    if x in region and x != home:
                        if state.get(x) == 1:
                            return True
                        if x not in state:
                            state[x] = 1
                            stack.append((x, iter(self.cfg.succs(x))))
                            break
                else:
                    state[n] = 2
                    stack.pop()
        return False


__all__ = ["Flags"]
