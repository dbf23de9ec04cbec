"""A tiny PTX interpreter for the helper families' address model (`fuzz.helpers`).

It runs the straight-line body of one emitted kernel for every thread of a warpgroup at once
(each register holds one Python int per thread, in a numpy object array) and records each
load's and store's address, width and executing threads. It knows the integer arithmetic
the helpers emit to compute addresses (mov, add, sub, mul, mad, shl, shr, and, or, xor,
setp, selp, ld.param, cvta) and the memory accesses (ld, st, stmatrix); the result of
anything else (cvt, wgmma, a loaded value, ...) is unknown, and an address computed from an
unknown value is reported as such, never guessed.

Shared symbols get concrete addresses from their declarations, each aligned to its declared
`.align` and no more (the worst case the hardware may pick), so a misaligned access shows;
a pointer parameter holds `GLOBAL_BASE`, other parameters the values the caller gives.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

import attrs
import numpy as np

THREADS = 128
GLOBAL_BASE = 1 << 40
SHARED_BASE = 1 << 12
_DECL = re.compile(r"^\s*\.shared\s+\.align\s+(\d+)\s+\.(\w+)\s+(\w+)\[(\d+)\];", re.M)
_PARAM = re.compile(r"\.param\s+\.(\w+)(\s+\.ptr[\w .]*)?\s+(\w+)")
_GUARD = re.compile(r"^@(!?)%(\w+)\s+")
_INT = re.compile(r"^-?(0[xX][0-9a-fA-F]+|\d+)$")
_BYTES = {"8": 1, "16": 2, "32": 4, "64": 8, "128": 16}


class Unknown(Exception):
    """An address depends on a value the interpreter does not model."""


@attrs.frozen
class Buffer:
    """A buffer the kernel addresses: a parameter's or a shared variable's `name`, its `base`
    address in the model, `size` bytes and the alignment it guarantees."""

    name: str
    base: int
    size: int
    align: int


@attrs.frozen
class Access:
    """A load or store: `op` (its opcode), per-thread addresses `addr`, `width` bytes each
    (for stmatrix, one 16-byte row per thread), executed by the threads where `mask` is
    True."""

    op: str
    addr: np.ndarray
    width: int
    mask: np.ndarray

    @property
    def store(self) -> bool:
        """Whether the access writes (anything but a load)."""
        return not self.op.startswith("ld")


def layout(ptx: str) -> dict[str, Buffer]:
    """Concrete placement of the shared symbols a kernel declares."""
    out: dict[str, Buffer] = {}
    at = SHARED_BASE
    for m in _DECL.finditer(ptx):
        align, elem, name, count = int(m[1]), m[2], m[3], int(m[4])
        size = count * _BYTES.get(re.sub(r"\D", "", elem) or "8", 1)
        # aligned to `align` and not to 2*align: the least alignment the declaration promises
        at = -(-at // (2 * align)) * (2 * align) + align
        out[name] = Buffer(name, at, size, align)
        at += size
    return out


def _lanes(v) -> np.ndarray:
    arr = np.empty(THREADS, dtype=object)
    arr[:] = v
    return arr


def _split(operands: str) -> list[str]:
    out, depth, cur = [], 0, ""
    for ch in operands:
        if ch in "{[":
            depth += 1
        elif ch in "}]":
            depth -= 1
        if ch == "," and depth == 0:
            out.append(cur.strip())
            cur = ""
        else:
            cur += ch
    return [*out, cur.strip()] if cur.strip() else out


def _bits(qual: str) -> int:
    m = re.search(r"(\d+)$", qual)
    return int(m.group(1)) if m else 32


def _signed(v: np.ndarray, bits: int) -> np.ndarray:
    half = 1 << (bits - 1)
    return ((v + half) % (1 << bits)) - half


class Machine:
    """Run a kernel body; `regs` maps register names to per-thread values (None: unknown)."""

    def __init__(self, ptx: str, params: Mapping[str, int] | None = None):
        self.ptx = ptx
        self.buffers = layout(ptx)
        self.params: dict[str, int] = {}
        for m in _PARAM.finditer(ptx.split("{", 1)[0]):
            if m.group(2):
                self.params[m.group(3)] = GLOBAL_BASE
        self.params.update(params or {})
        self.regs: dict[str, np.ndarray | None] = {}
        self.accesses: list[Access] = []

    # -- operands --------------------------------------------------------------------------
    def value(self, tok: str) -> np.ndarray | None:
        """Per-thread values of an operand token (a register, `%tid.x`, an integer, a buffer's
        name), or None when it is nothing the model computes."""
        tok = tok.strip()
        if tok == "%tid.x":
            return _lanes(0) + np.arange(THREADS, dtype=object)
        if tok.startswith("%"):
            if tok[1:] not in self.regs:
                return None
            return self.regs[tok[1:]]
        if _INT.match(tok):
            return _lanes(int(tok, 0))
        if tok in self.buffers:
            return _lanes(self.buffers[tok].base)
        return None          # a float literal, a vector, a sink: not an address

    def address(self, tok: str) -> np.ndarray:
        """Per-thread addresses of a `[base+offset]` operand; `Unknown` when the base is not
        modelled."""
        m = re.fullmatch(r"\[\s*([^+\-\]]+?)\s*(?:([+-])\s*(-?\d+))?\s*\]", tok.strip())
        if m is None:
            raise Unknown(f"address operand {tok!r}")
        base = self.value(m.group(1))
        if base is None:
            raise Unknown(f"the address {tok} depends on a value this model does not compute")
        off = int(m.group(3) or 0)
        return base + (-off if m.group(2) == "-" else off)

    # -- statements ------------------------------------------------------------------------
    def run(self) -> Machine:
        """Run the kernel's body for every thread of the CTA, recording its loads and stores;
        returns the machine."""
        body = self.ptx.split("{", 1)[1].rsplit("}", 1)[0]
        for raw in body.split(";"):
            line = re.sub(r"^(\$\w+:\s*)+", "", raw.strip())   # labels
            if not line or line.startswith((".", "//")):
                continue
            mask: np.ndarray | None = _lanes(True)
            g = _GUARD.match(line)
            if g:
                p = self.regs.get(g.group(2))
                if p is None:
                    mask = None
                else:
                    mask = np.array([not x for x in p] if g.group(1) else list(p), dtype=object)
                line = line[g.end():]
            opcode, _, rest = line.partition(" ")
            self.step(opcode, _split(rest), mask)
        return self

    def _assign(self, name: str, val: np.ndarray | None, mask: np.ndarray | None) -> None:
        name = name.lstrip("%")
        old = self.regs.get(name)
        if mask is None or val is None:
            self.regs[name] = None if mask is None or val is None else val
            return
        if all(mask):
            self.regs[name] = val
        elif old is None:
            self.regs[name] = None
        else:
            self.regs[name] = np.where(mask.astype(bool), val, old)

    def step(self, opcode: str, ops: list[str], mask: np.ndarray | None) -> None:
        """Execute one instruction (`opcode`, its operand tokens) for the threads in `mask`: loads
        and stores become `Access` records, arithmetic updates the registers; `Unknown` for what
        the model does not compute."""
        q = opcode.split(".")
        op, ty = q[0], q[-1]
        bits = _bits(ty)
        if op in ("st", "stmatrix") or op == "ld" and "param" not in q:
            if mask is None:
                raise Unknown(f"{opcode} under a predicate this model does not compute")
            addr = self.address(ops[0] if op != "ld" else ops[1])
            if op == "stmatrix":
                count = int(next(x for x in q if re.fullmatch(r"x\d", x))[1:])
                lanes = np.arange(THREADS) % 32 < 8 * count
                self.accesses.append(Access(opcode, addr, 16, mask.astype(bool) & lanes))
            else:
                vec = next((int(x[1:]) for x in q if re.fullmatch(r"v\d", x)), 1)
                self.accesses.append(Access(opcode, addr, vec * bits // 8, mask.astype(bool)))
            if op == "ld":
                self._assign(ops[0], None, mask)      # the loaded value: not modelled
            return
        if not ops:
            return
        args = [self.value(o) for o in ops[1:]]
        if op == "ld" and "param" in q:
            name = ops[1].strip("[] ")
            val = _lanes(self.params[name]) if name in self.params else None
        elif op == "cvta" or op == "mov":
            val = args[0] if args else None
        elif any(a is None for a in args):
            val = None
        else:
            val = self._arith(op, q, ty, bits, [a for a in args if a is not None])
        self._assign(ops[0], val, mask)

    def _arith(self, op: str, q: list[str], ty: str, bits: int, a: list[np.ndarray]):
        wide = "wide" in q
        out_bits = 2 * bits if wide else bits
        signed = ty.startswith("s")
        if op == "setp":
            x, y = (_signed(v, bits) for v in a[:2]) if signed else a[:2]
            cmp = {"eq": x == y, "ne": x != y, "lt": x < y, "le": x <= y, "gt": x > y,
                   "ge": x >= y, "lo": x < y, "ls": x <= y, "hi": x > y, "hs": x >= y}.get(q[1])
            if cmp is None:
                return None
            if "and" in q:
                cmp = cmp & a[2]
            elif "or" in q:
                cmp = cmp | a[2]
            return np.array([bool(v) for v in cmp], dtype=object)
        if op == "selp":
            return np.where(a[2].astype(bool), a[0], a[1])
        table = {
            "add": lambda: a[0] + a[1], "sub": lambda: a[0] - a[1],
            "mul": lambda: a[0] * a[1], "mad": lambda: a[0] * a[1] + a[2],
            "and": lambda: a[0] & a[1], "or": lambda: a[0] | a[1],
            "xor": lambda: a[0] ^ a[1], "shl": lambda: a[0] << a[1],
            "shr": lambda: (_signed(a[0], bits) if signed else a[0]) >> a[1]}
        if op not in table:
            return None
        if op in ("mul", "mad") and "hi" in q:
            return None
        return table[op]() % (1 << out_bits)


def run(ptx: str, params: Mapping[str, int] | None = None) -> Machine:
    """Interpret the (first) kernel of `ptx`; see `Machine`."""
    return Machine(ptx, params).run()
