"""What the checker knows about registers: constants, address provenance, divergence.

ptxdsl builds most registers once (a fresh register per builder call), so a register with one
definition is treated like an SSA value: `mov r, 5` makes r the constant 5, `mov r, smem` the
address of `smem`, `ld.param r, [p]` the value of parameter p, and `add`/`cvta` carry that
provenance along (`cvta` changes the state space, `add` the offset). A register written more
than once is only known when every write is the same constant.

Divergence is a level: 0 the same in every thread of the CTA, 1 the same within a warp (e.g.
%warpid), 2 possibly different in each lane (%tid, %laneid and anything computed from them).

Everything is computed on demand, for the registers the hazards look at and what those were
computed from, so a 100k-instruction kernel pays only for the slice that matters.
"""

from __future__ import annotations

import enum
import math
import re
from collections.abc import Callable, Sequence
from typing import Any, cast

import attrs

from ..instructions.arith import Binary, Mad, Unary
from ..instructions.base import sources
from ..instructions.compare import Selp, Setp
from ..instructions.memory import Ld
from ..instructions.move import Cvt, Cvta, Mov
from ..operands import Addr, Imm, NegPred, Reg, SpecialReg, Symbol
from ..statements import LabelDef, Statement
from ..types import ScalarType, StateSpace
from .defs import Defs
from .ops import inline_elect


class Kind(enum.Enum):
    unknown = "unknown"
    const = "const"
    addr = "addr"          # the address of `root` (a Symbol) + offset, in `space`
    value = "value"        # the value of parameter `root` (a pointer passed by the host) + offset
    special = "special"    # a special register (`root` is its name)


@attrs.frozen
class Val:
    """The abstract value of a register. `offset` None means "root plus something unknown"."""

    kind: Kind = Kind.unknown
    const: int | None = None
    root: Any = None
    offset: int | None = 0
    space: StateSpace | None = None

    @property
    def key(self) -> tuple[Any, int | None] | None:
        """Identity of the memory this address names: (root, offset); None when unknown."""
        if self.kind in (Kind.addr, Kind.value):
            return (self.root, self.offset)
        return None


UNKNOWN = Val()

# Fields that hold an instruction's results. Every other register operand is a source.
_LANE_SREGS = ("tid.", "laneid", "clock", "globaltimer", "lanemask")
_WARP_SREGS = ("warpid",)
_PER_LANE_RESULTS = frozenset({"Elect", "Atom", "AtomCas"})   # their `p`/`d` differ per lane
# An inline statement's outputs are as uniform as its inputs only when it does arithmetic on
# them and on CTA-uniform special registers (`mov.u32 $0, %cluster_ctarank;`); anything else
# (elect.sync, %laneid, a load, a shuffle) may differ per lane.
_ASM_ARITH = frozenset({"mov", "add", "sub", "mul", "mad", "shl", "shr", "and", "or", "xor",
                        "not", "cvt", "selp", "min", "max", "bfe", "bfi", "prmt", "setp"})
_ASM_UNIFORM_SREGS = re.compile(r"(?:n?ctaid|n?clusterid|cluster_n?ctaid|ntid)\.[xyz]|"
                                r"cluster_n?ctarank|nsmid|gridid")


_ASM_SREG = re.compile(r"\s*mov\.[bsu](?:32|64)\s+\$0\s*,\s*%(\w+(?:\.[xyz])?)\s*;?\s*")


def _asm_uniform(insn: Any) -> bool:
    text = re.sub(r"//[^\n]*", "", getattr(insn, "template", ""))
    for stmt in re.split(r"[;{}\n]", text):
        stmt = re.sub(r"^\s*\w+\s*:(?!:)", "", stmt).strip()
        if not stmt or stmt.startswith("."):
            continue
        if stmt.startswith("@") or stmt.split(None, 1)[0].split(".")[0] not in _ASM_ARITH:
            return False
    return all(_ASM_UNIFORM_SREGS.fullmatch(x) for x in re.findall(r"%(\w+(?:\.[xyz])?)", text))
_WARP_RESULTS = frozenset({"Vote", "Activemask"})
_FOLD = {"add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b,
         "shl": lambda a, b: a << b, "shr": lambda a, b: a >> b, "and": lambda a, b: a & b,
         "or": lambda a, b: a | b, "xor": lambda a, b: a ^ b}

# _FOLD with integer division, for the evaluators that run thread ids and loop counters through
# conditions (None: a division by zero, which the evaluators treat as unknown).
FOLD_DIV = {**_FOLD, "div": lambda a, b: a // b if b else None,
            "rem": lambda a, b: a % b if b else None}

_CMP = {"eq": lambda a, b: a == b, "ne": lambda a, b: a != b, "lt": lambda a, b: a < b,
        "le": lambda a, b: a <= b, "gt": lambda a, b: a > b, "ge": lambda a, b: a >= b,
        "lo": lambda a, b: a < b, "ls": lambda a, b: a <= b, "hi": lambda a, b: a > b,
        "hs": lambda a, b: a >= b}
_ZERO_IN_ONE_THREAD = ("tid.", "laneid", "warpid")

class Values:
    """Demand-driven facts about the registers of one kernel body."""

    def __init__(self, body: Sequence[Statement | LabelDef], nthreads: int | None = None,
                 insns: Sequence[Any] | None = None, warp_rows: bool = False,
                 ntid: Sequence[int] | None = None, cluster: Sequence[int] | None = None):
        # Read as statements: the indices asked about (a definition, a statement's sources or
        # guard) never name a label.
        self.body = cast(Sequence[Statement], body)
        # A CTA of one thread has no divergence; one of a single warp none between warps.
        self.nthreads = nthreads
        # Every warp holds 32 consecutive %tid.x of one (y, z) row, starting at a multiple of
        # 32 (.reqntid with x a multiple of 32, or a 1-D CTA): `tid.x < 32k` is warp-uniform.
        self.warp_rows = warp_rows
        # Special registers the kernel declares exactly: %ntid.x/y/z under .reqntid (`ntid`:
        # empty when the CTA's shape is not fixed), %cluster_nctaid.x/y/z and
        # %cluster_nctarank under .reqnctapercluster. (Not under .maxntid, a bound; never
        # %nwarpid, the SM's warp-slot count rather than the CTA's warps.)
        self.ntid = _dims3("ntid", ntid)
        self.fixed = {**self.ntid, **_dims3("cluster_nctaid", cluster)}
        if cluster:
            self.fixed["cluster_nctarank"] = math.prod(cluster)
        if insns is None:
            insns = [getattr(x, "insn", None) for x in body]
        self.defs = Defs(insns)
        self._src: dict[int, list[Reg]] = {}
        self._sym: dict[int, Val] = {}
        self._val: dict[Reg, Val] = {}
        self._vn: dict[Reg, Any] = {}
        self._level: dict[Reg, int] = {}
        self._data_level: dict[Reg, int] = {}
        # The level of each write of a register written more than once: (id(reg), statement
        # index) -> level (`_def_data_level` for `data_level`).
        self._def_level: dict[tuple[int, int], int] = {}
        self._def_data_level: dict[tuple[int, int], int] = {}
        # Which of a register's writes reach a statement (`CFG.reaching`, set by Divergence):
        # a read takes the level of those writes only.
        self.reaching: Callable[[Sequence[int], int], frozenset[int]] | None = None
        self._reach: dict[tuple[int, int], frozenset[int]] = {}
        self.ctrl_level: dict[int, int] = {}   # statement index -> control divergence (set later)
        # statement index -> the divergent branches (statement indices) it lies under (set
        # with ctrl_level), for `data_level`.
        self.ctrl_branches: dict[int, tuple[int, ...]] = {}
        self._data_mode = False
        self._busy_preds: set[Reg] = set()

    def sources_of(self, i: int) -> list[Reg]:
        """The registers statement i reads (cached: the analyses ask repeatedly)."""
        hit = self._src.get(i)
        if hit is None:
            hit = self._src[i] = sources(self.body[i].insn)
        return hit

    # -- constants and provenance ------------------------------------------------------------
    def val(self, op: Any) -> Val:
        """The abstract value of an operand (register, immediate, symbol or address)."""
        if isinstance(op, Imm):
            return Val(Kind.const, int(op.value)) if isinstance(op.value, int) else UNKNOWN
        if isinstance(op, int) and not isinstance(op, bool):
            return Val(Kind.const, op)
        if isinstance(op, Symbol):
            hit = self._sym.get(id(op))
            if hit is None or hit.root is not op:
                hit = self._sym[id(op)] = Val(Kind.addr, root=op, space=op.space)
            return hit
        if isinstance(op, Addr):
            base = self.val(op.base)
            if base.kind is Kind.const and base.const is not None:
                return Val(Kind.const, base.const + op.offset)
            return _offset(base, op.offset)
        if not isinstance(op, Reg):
            return UNKNOWN
        hit = self._val.get(op)
        if hit is None:
            self._solve(op)
            hit = self._val[op]
        return hit

    def const(self, op: Any) -> int | None:
        """The operand's value when its value number is a constant, else None."""
        v = self.val(op)
        return v.const if v.kind is Kind.const else None

    def origin(self, op: Any) -> int | None:
        """The statement that gave an address register its space and root: the `cvta`,
        the `mov` of a symbol or the `ld.param`, found through adds, movs and cvts."""
        reg = op.base if isinstance(op, Addr) else op
        for _ in range(1000):   # chains are short; the bound only guards against cycles
            defs = self.defs.get(reg, ()) if isinstance(reg, Reg) else ()
            if len(defs) != 1:
                return None
            insn = self.body[defs[0]].insn
            if isinstance(insn, Cvta) or isinstance(insn, Ld) or (
                    isinstance(insn, Mov) and isinstance(insn.a, Symbol)):
                return defs[0]
            if isinstance(insn, Mov | Cvt):
                reg = insn.a
            elif isinstance(insn, Binary) and insn.op in ("add", "sub"):
                a = self.val(insn.a)
                reg = insn.a if a.kind in (Kind.addr, Kind.value) else insn.b
            else:
                return defs[0]
        return None

    def guard_value(self, guard: Any) -> bool | None:
        """Whether a guard always holds (True), never holds (False), or is unknown (None)."""
        if guard is None:
            return True
        if self.nthreads is None or self.nthreads > 32:
            # Constant guards come from %tid/%warpid in one-thread (or one-warp) CTAs; skip the
            # evaluation elsewhere: it runs for every branch of the kernel.
            return None
        neg = isinstance(guard, NegPred)
        c = self.const(guard.reg if neg else guard)
        return None if c is None else bool(c) != neg

    def vn(self, op: Any) -> Any:
        """A value number: two operands with equal numbers hold the same value in a thread."""
        if isinstance(op, Imm | int):
            return ("const", int(op.value if isinstance(op, Imm) else op))
        if isinstance(op, NegPred):
            return ("not", self.vn(op.reg))
        if not isinstance(op, Reg):
            return ("other", id(op))
        if op not in self._vn:
            self._solve(op)
        return self._vn[op]

    def _solve(self, root: Reg) -> None:
        """Evaluate `root` and the single-definition registers it derives from, leaves first
        (an explicit stack: address chains can be thousands of instructions long)."""
        stack: list[tuple[Reg, bool]] = [(root, False)]
        busy: set[Reg] = set()
        while stack:
            reg, ready = stack.pop()
            if reg in self._val:
                continue
            defs = self.defs.get(reg, ())
            if len(defs) != 1:
                self._val[reg], self._vn[reg] = self._multi(reg, defs), _opaque(reg)
                continue
            insn = self.body[defs[0]].insn
            if not ready:
                if reg in busy:   # a cycle through a loop: nothing is known
                    self._val[reg], self._vn[reg] = UNKNOWN, _opaque(reg)
                    continue
                busy.add(reg)
                stack.append((reg, True))
                stack.extend((s, False) for s in self.sources_of(defs[0]) if s not in self._val)
                continue
            val, vn = self._eval(reg, insn)
            if val.kind is Kind.unknown and isinstance(insn, Binary | Mad):
                val = self._lockstep(defs[0], val)
            self._val[reg] = val
            self._vn[reg] = vn if vn is not None else ("const", val.const)

    def _lockstep(self, i: int, val: Val) -> Val:
        """LLVM's strength-reduced ring offset `p - (S * N) * (k / N)` (`lockstep`) is an
        address when p starts at one: the base's, at an offset `ranges` bounds."""
        from .lockstep import lockstep_ring
        ring = lockstep_ring(self, i)
        if ring is None:
            return val
        base = self.val(ring[0])
        return _offset(base, None) if base.kind in (Kind.addr, Kind.value) else val

    def _multi(self, reg: Reg, defs: Sequence[int]) -> Val:
        """A register written several times is known only if every write is one constant."""
        consts = set()
        for i in defs:
            insn = self.body[i].insn
            if not (isinstance(insn, Mov) and isinstance(insn.a, Imm)):
                return UNKNOWN
            consts.add(insn.a.value)
        return Val(Kind.const, int(consts.pop())) if len(consts) == 1 else UNKNOWN

    def stepped(self, reg: Any) -> Val:
        """A buffer's address stepped in place (`add r, r, 512` in a loop: nvcc's strength-
        reduced `tile[j]`, j += blockDim) stays in that buffer, at an offset not known: every
        write either steps `reg` by a non-address, or sets it to an address of one symbol.
        Not part of `val` (a stepped register is unknown there): only the rules that compare
        a write with everything in its buffer ask (UNKNOWN otherwise)."""
        defs = self.defs.get(reg, ()) if isinstance(reg, Reg) else ()
        if len(defs) < 2:
            return UNKNOWN
        found: Val | None = None
        for i in defs:
            insn = self.body[i].insn
            if isinstance(insn, Binary) and insn.op in ("add", "sub") and (
                    insn.a is reg or insn.op == "add" and insn.b is reg):
                step = insn.b if insn.a is reg else insn.a
                if self.val(step).kind in (Kind.addr, Kind.value):
                    return UNKNOWN
                continue
            for src in self.sources_of(i):
                self.val(src)
            v = self._eval(reg, insn)[0]
            if v.kind is not Kind.addr or found is not None and (
                    v.root is not found.root or v.space != found.space):
                return UNKNOWN
            found = v
        return UNKNOWN if found is None else attrs.evolve(found, offset=None)

    def _special(self, name: str) -> tuple[Val, Any]:
        if self.nthreads is not None and name.startswith(_ZERO_IN_ONE_THREAD) and (
                self.nthreads == 1 or name == "warpid" and self.nthreads <= 32):
            return Val(Kind.const, 0), ("const", 0)   # the only thread (or warp)
        if name in self.fixed:
            return Val(Kind.const, self.fixed[name]), ("const", self.fixed[name])
        return Val(Kind.special, root=name), ("sreg", name)

    def _eval(self, reg: Reg, insn: Any) -> tuple[Val, Any]:
        v = self._val
        if type(insn).__name__ == "InlineAsm":
            # CUTLASS's block_rank_in_cluster(): `mov.u32 $0, %cluster_ctarank;` is the
            # special register itself.
            m = _ASM_SREG.fullmatch(getattr(insn, "template", ""))
            if m is not None and len(insn.outs) == 1 and reg is insn.outs[0]:
                return self._special(m.group(1))
            return UNKNOWN, _opaque(reg)
        if isinstance(insn, Mov):
            a = insn.a
            if isinstance(a, SpecialReg):
                return self._special(a.name)
            if isinstance(a, Reg):
                return v.get(a, UNKNOWN), self._vn.get(a, _opaque(a))
            val = self.val(a)
            return val, (("const", val.const) if val.kind is Kind.const else ("addr", a))
        if isinstance(insn, Cvta):
            src = self.val(insn.a)
            vn = ("cvta", insn.space.value, bool(insn.to), self.vn(insn.a))
            if src.kind in (Kind.addr, Kind.value):
                space: StateSpace | None = insn.space if insn.to else StateSpace.generic
                return attrs.evolve(src, space=space), vn
            return UNKNOWN, vn
        if isinstance(insn, Binary):
            a, b = self.val(insn.a), self.val(insn.b)
            key = (insn.op, self.vn(insn.a), self.vn(insn.b))
            if a.kind is Kind.const and b.kind is Kind.const and insn.op in _FOLD:
                return Val(Kind.const, _FOLD[insn.op](a.const, b.const)), key
            if insn.op in ("add", "sub"):
                sign = 1 if insn.op == "add" else -1
                if a.kind in (Kind.addr, Kind.value):
                    delta = b.const if b.kind is Kind.const else None
                    return _offset(a, sign * delta if delta is not None else None), key
                if b.kind in (Kind.addr, Kind.value) and insn.op == "add":
                    return _offset(b, a.const if a.kind is Kind.const else None), key
            if insn.op == "xor":
                # A swizzled address (`addr ^ ((row & 7) << 4)`) stays in its buffer: the
                # same root, an offset the range analysis bounds (`ranges`).
                ptrs = [x for x in (a, b) if x.kind in (Kind.addr, Kind.value)]
                if len(ptrs) == 1:
                    return _offset(ptrs[0], None), key
            return UNKNOWN, key
        if isinstance(insn, Setp):
            a, b = self.val(insn.a), self.val(insn.b)
            if a.kind is Kind.const and b.kind is Kind.const and insn.cmp in _CMP \
                    and insn.bool_op is None:
                return Val(Kind.const, int(_CMP[insn.cmp](a.const, b.const))), None
            return UNKNOWN, ("setp", insn.cmp, self.vn(insn.a), self.vn(insn.b),
                             insn.bool_op, self.vn(insn.c) if insn.c is not None else None)
        if isinstance(insn, Ld) and insn.space is StateSpace.param:
            base = insn.a.base if isinstance(insn.a, Addr) else insn.a
            if isinstance(base, Symbol):
                off = insn.a.offset if isinstance(insn.a, Addr) else 0
                space = reg.space if reg.space is not None else None
                return Val(Kind.value, root=base, offset=off, space=space), ("param", base, off)
        if isinstance(insn, Cvt):
            src = self.val(insn.a)
            # Triton widens a 32-bit shared address for tensormap.replace and cp_fenceproxy
            # (`cvt.u64.u32 %rd3, %r5`): zero-extended, it is the same address.
            widened = src.kind is Kind.addr and isinstance(src.root, Symbol) \
                and src.root.space.is_shared and insn.dtype is ScalarType.u64 \
                and insn.atype is ScalarType.u32 and not insn.sat
            return (src if src.kind is Kind.const or widened or _keeps_address(insn, src)
                    else UNKNOWN), \
                ("cvt", self.vn(insn.a))
        if isinstance(insn, Mad):
            # Numbered by its inputs (a linear CTA id, `ctaid.y * nctaid.x + ctaid.x`,
            # computed twice is one value: two maps of one per-CTA slot are told apart), a
            # number per-thread evaluation reads too (`mad cw, 16384, off`: hazards_arrive).
            mvn = ("mad", insn.type, insn.mode, insn.ftz, self.vn(insn.a), self.vn(insn.b),
                   self.vn(insn.c))
            c = self.val(insn.c)
            # `mad.wide d, ctaid, 256, ws` is ws plus an offset, as add's form is (ranges
            # bounds the offset the same way).
            if insn.mode in (None, "lo", "wide") and c.kind in (Kind.addr, Kind.value) and \
                    not any(self.val(x).kind in (Kind.addr, Kind.value)
                            for x in (insn.a, insn.b)):
                return _offset(c, None), mvn
            return UNKNOWN, mvn
        if isinstance(insn, Selp):
            c = self.val(insn.c)
            if c.kind is Kind.const and c.const is not None:   # (known on one path only:
                pick = insn.a if c.const else insn.b            # `assume`)
                return self.val(pick), self.vn(pick)
            a, b = self.val(insn.a), self.val(insn.b)
            same = a.kind is Kind.const and a == b
            cvn = self.vn(insn.c)
            if cvn[0] == "elect" and a.kind is Kind.const and b.kind is Kind.const:
                # cuda::ptx's elect_sync(): `selp.b32 r, 1, 0, P_OUT` of the election
                return UNKNOWN, ("selp", a.const, b.const, cvn)
            return (a if same else UNKNOWN), _opaque(reg)
        if isinstance(insn, Unary) and insn.op == "not" and insn.type is ScalarType.pred:
            # `not.pred q, p` is `@!p`: the same condition (`divergence.normal_token`)
            return UNKNOWN, ("not", self.vn(insn.a))
        if type(insn).__name__ == "Elect" and reg is insn.p:
            mask = self.const(insn.membermask)
            if mask is not None and len(self.defs.get(reg, ())) == 1:
                # The same lane every time for one membermask (the PTX ISA's promise): a
                # thread's election is fixed for its life (`divergence.invariant`).
                return UNKNOWN, ("elect", mask & 0xFFFFFFFF, id(reg))
        if self.broadcast_source(reg, insn) is not None:
            return v.get(insn.a, UNKNOWN) if isinstance(insn.a, Reg) else self.val(insn.a), \
                self.vn(insn.a)
        return UNKNOWN, _opaque(reg)

    def broadcast_source(self, reg: Reg | None, insn: Any) -> Any:
        """The operand a `shfl.sync.idx` writing `reg` broadcasts when every lane of the warp
        already holds it (Triton's `shfl.sync.idx d, warp, 0, 31, -1`, warp = tid >> 5): `reg`
        is that value. None otherwise."""
        if type(insn).__name__ == "Shfl" and reg is insn.d and self.level(insn.a) <= 1 \
                and self._broadcast(insn, {}):
            return insn.a
        return None

    # -- divergence ---------------------------------------------------------------------------
    def level(self, op: Any) -> int:
        """0: CTA-uniform, 1: warp-uniform, 2: may differ per lane."""
        if isinstance(op, NegPred):
            op = op.reg
        if isinstance(op, Addr):
            op = op.base
        if not isinstance(op, Reg):
            return 0
        hit = self._level.get(op)
        if hit is None:
            if not self._levels_acyclic(op):
                self._levels(op)
            hit = self._level[op]
        return hit

    def data_level(self, op: Any) -> int:
        """`level` among the threads that compute a value: a register whose every write lies
        under one divergent branch (a loop counter in a warp-specialized branch) does not
        take that branch's divergence, only that of the branches choosing between its
        writes. 0: the same in every thread that computes it (in the same iteration), 1: in
        every lane of a warp, 2: may differ per lane."""
        saved = self._level, self._def_level, self._data_mode
        self._level, self._def_level, self._data_mode = \
            self._data_level, self._def_data_level, True
        try:
            return self.level(op)
        finally:
            self._level, self._def_level, self._data_mode = saved

    def _data_ctrl(self, reg: Reg, i: int) -> int:
        """The control divergence of write i of `reg` in `data_level`: the levels of the
        branches over it that do not also enclose every other write of `reg` (a branch's own
        level through data, its cycles through `reg` taken as uniform: a loop on a counter
        that only the counter decides)."""
        mine = self.ctrl_branches.get(i, ())
        if not mine:
            return 0
        common = set(mine).intersection(*(self.ctrl_branches.get(d, ())
                                            for d in self.defs.get(reg, ())))
        out = 0
        for b in mine:
            p = _pred(self.body[b].guard)
            if b in common or p is None or p in self._busy_preds:
                continue
            self._busy_preds.add(p)
            try:
                out = max(out, self.level(p))
            finally:
                self._busy_preds.discard(p)
        return out

    def _levels_acyclic(self, root: Reg) -> bool:
        """Levels of a slice of single-definition registers, leaves first (the usual case:
        one pass, no fixed point). False, with nothing stored, if the slice reaches a
        register written more than once (a loop may feed back: `_levels` handles it)."""
        memo = self._level
        done: list[tuple[Reg, int]] = []
        stack: list[tuple[Reg, bool]] = [(root, False)]
        seen = {root}
        while stack:
            r, expanded = stack.pop()
            defs = self.defs.get(r, ())
            if len(defs) > 1:
                return False
            if expanded or not defs:
                done.append((r, defs[0] if defs else -1))   # postorder: sources first
                continue
            stack.append((r, True))
            for s in self._slice_sources(defs[0]):
                if s not in memo and s not in seen:
                    seen.add(s)
                    stack.append((s, False))
        for r, i in done:
            memo[r] = 0 if i < 0 else self._level_of_def(r, i, memo)
        return True

    def _levels(self, root: Reg) -> None:
        """Levels of `root`'s backward slice, iterated to a fixed point (loops feed back)."""
        slice_: list[Reg] = []
        seen = {root}
        todo = [root]
        while todo:
            r = todo.pop()
            slice_.append(r)
            for i in self.defs.get(r, ()):
                for s in self._slice_sources(i):
                    if s not in seen and s not in self._level:
                        seen.add(s)
                        todo.append(s)
        cur = dict.fromkeys(slice_, 0)
        per_def = self._def_level
        changed = True
        while changed:   # levels only grow and are at most 2
            changed = False
            for r in reversed(slice_):
                defs = self.defs.get(r, ())
                lv = 0
                for i in defs:
                    d = self._level_of_def(r, i, cur)
                    lv = max(lv, d)
                    if len(defs) > 1 and d > per_def.get((id(r), i), 0):
                        per_def[id(r), i] = d
                        changed = True
                if lv > cur[r]:
                    cur[r] = lv
                    changed = True
        self._level.update(cur)

    def _slice_sources(self, i: int) -> list[Reg]:
        """The registers statement i's level depends on: those it reads, and its guard (a
        value written in the lanes `@p` picks differs where p does)."""
        p = _pred(self.body[i].guard)
        return self.sources_of(i) if p is None else [*self.sources_of(i), p]

    def _read_level(self, s: Reg, at: int, cur: dict[Reg, int]) -> int:
        """The level of register s as statement `at` reads it: for a register written more
        than once, that of the writes reaching `at` (a group search's per-lane candidates in
        a register that a later warp-wide broadcast overwrites do not make the broadcast
        value per-lane), while their levels are being computed; else the register's."""
        whole = cur.get(s, self._level.get(s, 0))
        defs = self.defs.get(s, ())
        if self.reaching is None or len(defs) < 2 or whole == 0:
            return whole
        key = (id(s), at)
        reach = self._reach.get(key)
        if reach is None:
            reach = self._reach[key] = self.reaching(defs, at)
        if not reach:
            return whole
        return max(self._def_level.get((id(s), d), 0) for d in reach)

    def _level_of_def(self, reg: Reg, i: int, cur: dict[Reg, int]) -> int:
        st = self.body[i]
        insn = st.insn
        name = type(insn).__name__
        srcs = self.sources_of(i)
        lv = max((self._read_level(s, i, cur) for s in srcs), default=0)
        if st.guard is not None or len(self.defs.get(reg, ())) > 1:
            # A value written under a condition differs where the condition does.
            p = _pred(st.guard)
            ctrl = self._data_ctrl(reg, i) if self._data_mode else self.ctrl_level.get(i, 0)
            lv = max(lv, ctrl, self._read_level(p, i, cur) if p is not None else 0)
        if isinstance(insn, Mov) and isinstance(insn.a, SpecialReg):
            n = insn.a.name
            lv = 2 if n.startswith(_LANE_SREGS) else 1 if n in _WARP_SREGS else 0
            if self.nthreads is not None and self.nthreads <= (1 if lv == 2 else 32):
                return 0
            return lv
        if name == "InlineAsm" and not _asm_uniform(insn):
            return 2
        if name in _PER_LANE_RESULTS:
            return 1 if name == "Elect" and reg is getattr(insn, "d", None) else 2
        if name == "InlineAsm" and inline_elected(self, reg) is not None:
            return 2
        if name in _WARP_RESULTS:   # one value per warp
            return 1 if name == "Activemask" else min(lv, 1)
        if isinstance(insn, Setp) and lv == 2 and self._warp_split(insn):
            return 1
        if name == "Shfl" and lv == 2 and self._broadcast(insn, cur):
            return 1         # every lane reads one lane's value: the same in the warp
        if isinstance(insn, Binary) and lv == 2 and insn.op in ("shr", "div"):
            # tid / 32 and tid >> 5 are the same in every lane of a warp.
            b = self.const(insn.b)
            if b is not None and (b >= 5 if insn.op == "shr" else b % 32 == 0 and b > 0):
                return max(1, max((cur.get(s, 0) for s in srcs if s is not insn.a), default=0))
        return lv

    def _broadcast(self, insn: Any, cur: dict[Reg, int]) -> bool:
        """`shfl.sync.idx` over the whole warp (full member mask, one 32-lane segment) from a
        source lane that is the same in every lane (a constant, or a register no more
        divergent than the warp): a warp-wide broadcast."""
        c, mask = self.const(insn.c), self.const(insn.membermask)
        if getattr(insn.mode, "name", "") != "idx" or c is None or (c >> 8) & 0x1F \
                or mask is None or mask & 0xFFFFFFFF != 0xFFFFFFFF:
            return False
        lane = insn.b
        if isinstance(lane, Reg):
            return cur.get(lane, self._level.get(lane, 0)) <= 1
        v = self.const(lane)
        return v is not None and 0 <= v < 32

    def _keeps_lane(self, insn: Binary) -> bool:
        """`x & m` with m's low five bits set, or `x % c` with c a multiple of 32: the lane
        bits of x pass unchanged, and what is above them stays whole per warp."""
        c = self.const(insn.b)
        if c is None or c <= 0:
            return False
        return (insn.op == "and" and c & 31 == 31) or (insn.op == "rem" and c % 32 == 0)

    def _warp_split(self, insn: Setp) -> bool:
        """`setp.lt %tid.x, 32k` (and its le/gt/ge, signed or not, forms): true for whole warps
        when the CTA's rows are warp-aligned (see `warp_rows`)."""
        if not self.warp_rows or insn.bool_op is not None or not isinstance(insn.a, Reg):
            return False
        defs = self.defs.get(insn.a, ())
        if len(defs) != 1:
            return False
        st = self.body[defs[0]]
        if isinstance(st.insn, Binary) and st.guard is None and isinstance(st.insn.a, Reg) \
                and self._keeps_lane(st.insn):
            # Triton's `(tid & 127) < 32` (warp 0 of each warpgroup): a mask keeping the
            # lane bits, or `tid % 128`, moves whole warps together.
            defs = self.defs.get(st.insn.a, ())
            if len(defs) != 1:
                return False
            st = self.body[defs[0]]
        if not isinstance(st.insn, Mov) or getattr(st.insn.a, "name", None) != "tid.x" \
                or st.guard is not None:
            return False
        b = self.const(insn.b)
        if b is None:
            return False
        if insn.cmp in ("lt", "ge", "lo", "hs"):
            return b % 32 == 0
        if insn.cmp in ("le", "gt", "ls", "hi"):
            return (b + 1) % 32 == 0
        return False


def _keeps_address(insn: Cvt, src: Val) -> bool:
    """Does an integer `cvt` of an address keep it? Widening an unsigned value does (nvcc's
    `cvt.u64.u32` before `cvta.shared.u64`); narrowing to 32 bits does for a shared-window
    address, which fits (`cvta.to.shared.u64` then `cvt.u32.u64`), not for a generic one."""
    if src.kind is not Kind.addr or src.space is None or insn.dtype.kind not in ("u", "s") \
            or insn.atype.kind not in ("u", "s") or insn.sat:
        return False
    if insn.dtype.bits >= insn.atype.bits:
        return insn.atype.kind != "s" or insn.dtype.bits == insn.atype.bits
    return insn.dtype.bits >= 32 and src.space.is_shared


def _dims3(name: str, dims: Sequence[int] | None) -> dict[str, int]:
    """`{name.x: ..., name.y: ..., name.z: ...}` of a declared shape (missing sizes are 1)."""
    d = (*(dims or ()), 1, 1, 1)
    return {f"{name}.{a}": d[n] for n, a in enumerate("xyz")} if dims else {}


def inline_elected(values: Values, reg: Reg) -> int | None:
    """The membermask when `reg` is the result of an inline elect.sync (ops.inline_elect):
    its one definition, or for a flag, the statement right after `mov flag, 0` (the flag's
    only other definition), so that it is 1 in the elected lane and 0 in the others."""
    defs = sorted(values.defs.get(reg, ()))
    if not defs or values.body[defs[-1]].guard is not None:
        return None
    i = defs[-1]
    hit = inline_elect(values.body[i].insn)
    if hit is None or hit[0] is not reg:
        return None
    if not hit[2]:
        return hit[1] if len(defs) == 1 else None
    prev = values.body[i - 1] if defs == [i - 1, i] else None
    if prev is None or prev.guard is not None or not isinstance(prev.insn, Mov) \
            or values.const(prev.insn.a) != 0:
        return None
    return hit[1]


def _opaque(reg: Reg) -> tuple[str, int]:
    """A value number for a register known only as itself. Never the Reg: `==` on a Reg
    builds a setp instruction, and tuples of value numbers are compared."""
    return ("reg", id(reg))


def _pred(guard: Reg | NegPred | None) -> Reg | None:
    return guard.reg if isinstance(guard, NegPred) else guard


def _offset(v: Val, delta: int | None) -> Val:
    if v.kind not in (Kind.addr, Kind.value):
        return UNKNOWN
    if delta == 0:
        return v
    off = None if v.offset is None or delta is None else v.offset + delta
    return Val(v.kind, v.const, v.root, off, v.space)
