"""A host-side model of the code the wgmma helpers emit (fragment stores and loads, stmatrix
epilogues, matrix descriptors): it runs a kernel's straight-line integer code for the 128
threads of one warpgroup and lists every memory access with the bytes it touches, so a test
can check that each lies inside its buffer. It knows the few instructions the helpers emit
(mov, and/or/xor/shl/shr, add/sub, mul/mad .lo/.wide, setp, ld.param, cvta, forward bra) and
the accesses (ld/st, ldmatrix/stmatrix, cp.async.bulk.tensor); any other instruction's result
is unknown, and an access through an unknown address is listed as such."""

from __future__ import annotations

from typing import NamedTuple

from ptxdsl.kernel_core import LabelDef
from ptxdsl.operands import Addr, Imm, NegPred, Reg, SpecialReg, Symbol

THREADS = 128
BOX_BYTES = 64 * 64 * 2        # one cp.async.bulk.tensor box of the TMA-store epilogue
Values = list[int | None] | None   # per thread (None: unknown), or unknown for all


class Unsupported(Exception):
    """The kernel has control flow the model does not follow (a backward branch)."""


class Access(NamedTuple):
    opcode: str
    thread: int
    start: int | None    # None: an address the model could not compute
    size: int


class Buffer(NamedTuple):
    name: str
    start: int
    size: int


def _width(opcode: str) -> int:
    last = opcode.rsplit(".", 1)[-1]
    return 64 if last.endswith("64") else 32


def _signed(v: int, bits: int) -> int:
    return v - (1 << bits) if v >= 1 << (bits - 1) else v


class Model:
    """Run `kernel`'s body. Symbols are placed as they are first used: shared ones 1024-byte
    aligned from 0x400, each global pointer parameter at its own 2^40 multiple, with the size
    `global_sizes` gives it (0 when not given: every access through it is outside)."""

    def __init__(self, kernel, global_sizes: dict[str, int] | None = None):
        self.buffers: dict[str, Buffer] = {}
        self.accesses: list[Access] = []
        self.env: dict[str, Values] = {}
        self._next_shared = 0x400          # not 0: a missing base would show
        self._global_sizes = global_sizes or {}
        self._run(kernel)

    # -- placement -------------------------------------------------------------------------
    def _place_shared(self, sym: Symbol, at: int) -> int:
        align = max(sym.align or 1, 1024)
        at = -(-at // align) * align
        self.buffers[sym.name] = Buffer(sym.name, at, sym.size)
        return at + max(sym.size, 1)

    def _symbol(self, sym: Symbol) -> int:
        if sym.name not in self.buffers:
            if sym.space.is_shared:
                self._next_shared = self._place_shared(sym, self._next_shared)
            else:
                n = len(self.buffers) + 1
                self.buffers[sym.name] = Buffer(sym.name, n << 40,
                                                self._global_sizes.get(sym.name, 0))
        return self.buffers[sym.name].start

    # -- values ----------------------------------------------------------------------------
    def value(self, op) -> Values:
        if isinstance(op, Reg):
            return self.env.get(op.name)
        if isinstance(op, Imm):
            v = op.value
            return [int(v)] * THREADS if isinstance(v, int) else None
        if isinstance(op, Symbol):
            return [self._symbol(op)] * THREADS
        if isinstance(op, SpecialReg) and op.name == "tid.x":
            return list(range(THREADS))
        if isinstance(op, NegPred):
            v = self.env.get(op.reg.name)
            return None if v is None else [None if x is None else 1 - x for x in v]
        return None

    def address(self, addr: Addr) -> Values:
        base = self.value(addr.base)
        return None if base is None else [None if b is None else b + addr.offset for b in base]

    # -- the run ---------------------------------------------------------------------------
    def _run(self, kernel) -> None:
        active = [True] * THREADS
        pending: dict[str, list[bool]] = {}
        placed: set[str] = set()
        for item in kernel.body:
            if isinstance(item, LabelDef):
                name = item.label.name
                placed.add(name)
                jumped = pending.pop(name, None)
                if jumped is not None:
                    active = [a or j for a, j in zip(active, jumped, strict=True)]
                continue
            guard = active
            if item.guard is not None:
                g = self.value(item.guard)
                # a thread whose guard is unknown counts as running the statement
                guard = [a and (x is None or bool(x)) for a, x in zip(active, g, strict=True)] \
                    if g is not None else active
            self._step(item.insn, guard, pending, placed)
            if item.insn.opcode() == "bra":
                active = [a and not g for a, g in zip(active, guard, strict=True)]

    def _step(self, insn, mask: list[bool], pending, placed) -> None:
        opcode = insn.opcode()
        parts = opcode.split(".")
        ops = list(insn.operands())
        name = parts[0]
        if name == "bra":
            target = ops[0].name
            if target in placed:
                raise Unsupported("backward branch")
            old = pending.get(target, [False] * THREADS)
            pending[target] = [o or m for o, m in zip(old, mask, strict=True)]
            return
        if name in ("st", "ld") and "param" not in parts:
            size = insn.type.bytes if getattr(insn, "type", None) is not None else 4
            addr = ops[0] if name == "st" else ops[1]
            self._access(opcode, mask, self.address(addr), size)
            if name == "ld" and isinstance(ops[0], Reg):
                self.env[ops[0].name] = None
            return
        if name in ("stmatrix", "ldmatrix"):
            addr = ops[0] if name == "stmatrix" else ops[1]
            lanes = 8 * int(parts[4].removeprefix("x"))
            rows = [m and t % 32 < lanes for t, m in enumerate(mask)]
            self._access(opcode, rows, self.address(addr), 16)
            return
        if opcode.startswith("cp.async.bulk.tensor") and ".shared::cta" in opcode:
            smem = ops[1] if opcode.startswith("cp.async.bulk.tensor.2d.global") else ops[0]
            self._access(opcode, mask, self.address(smem), BOX_BYTES)
            return
        dst = ops[0] if ops and isinstance(ops[0], Reg) else None
        if dst is None:
            return
        result = self._compute(name, parts, opcode, ops)
        # threads that do not run the statement keep the old value (unknown if none)
        old = self.env.get(dst.name) or [None] * THREADS
        new = result or [None] * THREADS
        merged = [r if m else o for r, o, m in zip(new, old, mask, strict=True)]
        self.env[dst.name] = None if all(v is None for v in merged) else merged

    def _compute(self, name, parts, opcode, ops) -> Values:
        if name == "ld" and isinstance(ops[1], Addr) and isinstance(ops[1].base, Symbol):
            return [self._symbol(ops[1].base)] * THREADS      # a pointer parameter's value
        if name in ("mov", "cvta"):
            return self.value(ops[1])
        vals = [self.value(o) for o in ops[1:]]
        if any(v is None for v in vals):
            return None
        bits = _width(opcode)
        mask = (1 << bits) - 1
        if name == "setp":
            cmp, signed = parts[1], opcode.endswith("s32") or opcode.endswith("s64")
            a, b = vals[0], vals[1]
            if signed:
                a, b = ([None if x is None else _signed(x, bits) for x in v] for v in (a, b))
            fn = {"lt": int.__lt__, "le": int.__le__, "gt": int.__gt__, "ge": int.__ge__,
                  "eq": int.__eq__, "ne": int.__ne__}[cmp]
            out = [None if x is None or y is None else int(fn(x, y))
                   for x, y in zip(a, b, strict=True)]
            if len(vals) == 3:        # setp.cmp.and: the third source predicate
                out = [None if o is None or c is None else o & c
                       for o, c in zip(out, vals[2], strict=True)]
            return out
        wide = "wide" in parts
        if name == "mad":
            a, b, c = vals
            return [None if None in (x, y, z) else (x * y + z) & ((1 << 64) - 1 if wide else mask)
                    for x, y, z in zip(a, b, c, strict=True)]
        fns = {"and": int.__and__, "or": int.__or__, "xor": int.__xor__, "add": int.__add__,
               "sub": int.__sub__, "mul": int.__mul__, "shl": int.__lshift__,
               "shr": int.__rshift__}
        fn = fns.get(name)
        if fn is None or len(vals) != 2:
            return None
        a, b = vals
        out_mask = (1 << 64) - 1 if wide else mask
        return [None if x is None or y is None else fn(x & mask, y & mask) & out_mask
                for x, y in zip(a, b, strict=True)]

    def _access(self, opcode: str, mask: list[bool], addr: Values, size: int) -> None:
        for t in range(THREADS):
            if mask[t]:
                self.accesses.append(Access(opcode, t, None if addr is None else addr[t], size))

    # -- judging ---------------------------------------------------------------------------
    def outside(self) -> list[tuple[Access, str]]:
        """Every access not inside one buffer (unknown addresses excluded), with why."""
        bad = []
        for a in self.accesses:
            if a.start is None:
                continue
            home = [b for b in self.buffers.values() if b.start <= a.start < b.start + max(
                b.size, 1)]
            if not home or a.start + a.size > home[0].start + home[0].size:
                where = f"{home[0].name}+{a.start - home[0].start}" if home else hex(a.start)
                bad.append((a, f"{a.opcode} by thread {a.thread}: bytes [{where}, +{a.size})"))
        return bad

    def unknown(self) -> int:
        return sum(a.start is None for a in self.accesses)

    def descriptor_start(self, value) -> Values:
        """The start address (bytes) a descriptor register or int encodes, per thread."""
        v = [value] * THREADS if isinstance(value, int) else self.value(value)
        return None if v is None else [None if x is None else (x & 0x3FFF) << 4 for x in v]
