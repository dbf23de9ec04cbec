"""Warpgroup register fragments: the wgmma accumulator tile and the A operand of RS forms.

A wgmma accumulator of m64nN lives in the 128 threads of a warpgroup, N/2 values per thread
(PTX ISA §9.7.15.5, "Matrix D fragment"). Thread t (warp w = t/32, lane l = t%32) holds, for
value index i in 0..N/2-1::

    row = 16*w + l/4 + 8*((i/2) % 2)          col = 8*(i/4) + 2*(l%4) + i%2

`.f16` accumulators pack values 2i and 2i+1 into register i. The A fragment of the RS forms
(m64 x one instruction's K) has the same shape with K in place of N: 4 registers of 32 bits,
register j holding 32/bits consecutive K elements of row 16*w + l/4 + 8*(j%2), starting at
column (j/2)*K/2 + (l%4)*32/bits. A `.f32` accumulator of m64n16 converted to packed
bf16/f16 is therefore exactly the A fragment of one k16 step (the flash-attention chain).

`k.fragment(t.f32, shape=(64, N))` allocates and zero-fills the registers; pass the fragment
to `ptx.wgmma_mma_async` as `d`; `to_packed(t.bf16)` converts (`cvt.rn.bf16x2.f32`);
`store(ptr, ld, rows=, cols=)` is the direct-store epilogue (each thread stores its values,
bounds predicated for M/N tails), `store_matrix(smem, ld)` the `stmatrix` one (to shared
memory, e.g. for a TMA store). `fragment_coords` / `a_fragment_coords` are the host-side
maps for tests.
"""

from __future__ import annotations

import bisect
import functools
import math
from collections.abc import Iterator
from typing import Any, SupportsIndex, overload

from .errors import (
    BuildError,
    BuildIndexError,
    OperandError,
    Sealed,
    fail_closed,
    fail_closed_methods,
)
from .instructions._tma_addr import symbol_fit
from .instructions.base import _given, int_like
from .instructions.cvt_packed import cvt_packed
from .instructions.matrix import stmatrix
from .instructions.wgmma import ALL_N, check_distinct, d_count, d_register_type
from .instructions.wgmma_desc import SMEM_LIMIT, check_index
from .kernel_core import KernelCore
from .kernel_directives import MAX_CTA_THREADS
from .kernel_host import KernelHost
from .operands import Addr, AddrLike, IntLike, Reg, Symbol, check_owned, make_imm
from .provenance import known_fit
from .types import ScalarType, StateSpace, compatible

T = ScalarType
WARPGROUP = 128
_ACC_TYPES = (T.f32, T.s32, T.f16)
# to_packed targets: name -> (cvt_packed destination, bits of one value)
_PACKED = {"bf16": ("bf16x2", 16), "f16": ("f16x2", 16), "e4m3": ("e4m3x2", 8),
           "e5m2": ("e5m2x2", 8)}


def _global_ptr(k: Any, ptr: Any, what: str) -> Reg:
    """A 64-bit global (or generic) address: a register, or a pointer parameter loaded."""
    if isinstance(ptr, Symbol) and getattr(ptr, "kind", None) == "pointer":
        pointee = getattr(ptr, "ptr_space", None)   # `.ptr .shared p`: st.global would miss
        if pointee is not None and pointee is not StateSpace.global_:
            raise BuildError(f"{what}: ptr must be a 64-bit global address (a register or a "
                             f"pointer parameter), got pointer parameter {ptr.name} declared "
                             f".ptr .{pointee.value}")
        ptr = k.ld_param(ptr)
    space = ptr.space if isinstance(ptr, Reg | Symbol) else None
    # Any 64-bit integer register (a .b64 one loaded from memory too: the adds are .u64), not
    # a float one.
    if not isinstance(ptr, Reg) or ptr.type.bits != 64 or ptr.type.is_float \
            or space is not None and space.is_shared:
        given = (f"symbol {ptr.name} in .{ptr.space.value}" if isinstance(ptr, Symbol) else
                 f"register %{ptr.name} (.{ptr.type.value}"
                 + (f", a .{space.value} address)" if space is not None and space.value
                    else ", a generic address)" if space is not None else ")")
                 if isinstance(ptr, Reg) else repr(ptr))
        raise BuildError(f"{what}: ptr must be a 64-bit global address (a register or a "
                         f"pointer parameter), got {given}")
    return ptr


# Offsets within a global tile are computed in 32 bits (mad.lo.u32, then mul.wide): a row
# stride of up to 2^24 elements keeps 64 rows of the widest value below 2^32 bytes.
MAX_LD = 1 << 24


def _check_extent(value: Any, what: str, name: str, bound: bool = False) -> Any:
    """A row stride (positive, at most MAX_LD) or a bound (None, or >= 0): an int (a numpy
    integer too, returned as an int) or a 32-bit integer register, not a float or a bool."""
    value = int_like(value)
    if value is None and bound:
        return value
    if isinstance(value, Reg) and value.type.kind in "bus" and value.type.bits == 32:
        return value
    # a constant bound is compared as a .u32 immediate (setp.lt.u32)
    if isinstance(value, int) and not isinstance(value, bool) and value >= (0 if bound else 1) \
            and value <= (0xFFFFFFFF if bound else MAX_LD):
        return value
    sign = "a non-negative int below 2^32" if bound else f"a positive int (at most {MAX_LD})"
    raise BuildError(f"{what}: {name} must be {sign} or a 32-bit integer register "
                     f"(elements), got {value!r}"[:300])


def check_kernel(what: str, k: Any) -> None:
    """The kernel a helper builds into (a `Kernel`)."""
    if not isinstance(k, KernelCore):
        raise OperandError(what, "k", "the Kernel to build into", _given(k))


def _thread(what: str, thread: Any) -> int:
    """A thread's index in its warpgroup, from its index in the CTA (an int in [0, 1024))."""
    t = int_like(thread)
    # a CTA has at most 1024 threads: a larger index names none (it would wrap silently)
    if isinstance(t, bool) or not isinstance(t, int) or not 0 <= t < MAX_CTA_THREADS:
        raise BuildError(f"{what}: thread must be a thread's index in the CTA, an int in "
                         f"[0, {MAX_CTA_THREADS}), got {thread!r}"[:300])
    return t % WARPGROUP


def _check_n(what: str, n: Any) -> int:
    m = int_like(n)
    if type(m) is not int or m not in ALL_N:      # 64.0 == 64 is "in" ALL_N, yet no int
        raise BuildError(f"{what}: N must be 8..256 in steps of 8, got {n!r}"[:300])
    return m


def shared_dst(k: Any, smem: Any, what: str, size: int, align: int, needs: str,
                operand: str = "smem") -> Reg:
    """A 32-bit shared address register for a store of `size` bytes from `smem`: a shared
    symbol or Addr(symbol, constant) is checked to hold them (`symbol_fit`) and moved into a
    register; a 32-bit register (no space hint, or a shared one) is taken as it is, checked
    the same way when it is known to hold a symbol's address (`provenance`)."""
    def fits(at: Addr) -> None:
        sym = at.base
        assert isinstance(sym, Symbol)   # a symbol base: here or from known_fit
        if not sym.space.is_shared:
            raise BuildError(f"{what}: {sym.name} is not in shared memory")
        symbol_fit(what, operand, at, align=align, size=size, what=needs)

    base = smem.base if isinstance(smem, Addr) else smem
    if isinstance(base, Symbol):
        off = smem.offset if isinstance(smem, Addr) else 0
        fits(Addr(base, off))
        reg = k.mov(base)
        return k.add(reg, off) if off else reg
    if isinstance(smem, Reg) and smem.type.bits == 32 and smem.type.kind in "bus" \
            and (smem.space is None or smem.space.is_shared):
        known_fit(smem, fits)   # a register holding a symbol's address is checked the same
        return smem
    raise OperandError(what, operand, "a shared symbol, Addr(shared symbol, offset) or a 32-bit "
                       "register holding a shared address", _given(smem))


# The small float formats a fragment's values may have: (exponent bits, mantissa bits, whether
# the all-ones exponent is inf/NaN (IEEE) or, for e4m3, holds finite values but one NaN).
_FLOATS = {"f16": (5, 10, True), "bf16": (8, 7, True), "e5m2": (5, 2, True),
           "e4m3": (4, 3, False)}


@functools.cache
def _finite(fmt: str) -> tuple[list[float], int]:
    """The non-negative finite values of a small float format, ascending (= their codes in
    order), and the code's width in bits."""
    e_bits, m_bits, ieee = _FLOATS[fmt]
    bias, top = (1 << (e_bits - 1)) - 1, (1 << e_bits) - 1
    values = []
    for code in range(1 << (e_bits + m_bits)):
        e, m = code >> m_bits, code & ((1 << m_bits) - 1)
        if e == top and (ieee or m == (1 << m_bits) - 1):
            break                         # inf/NaN (e4m3: only S.1111.111 is NaN)
        values.append(math.ldexp(m, 1 - bias - m_bits) if e == 0
                      else math.ldexp((1 << m_bits) + m, e - bias - m_bits))
    return values, 1 + e_bits + m_bits


def _small_float(fmt: str, x: float) -> int:
    """The code of `x` rounded to nearest (ties to even) in `fmt`; refused when a finite `x`
    would round past the largest finite value, or `x` is infinite and `fmt` has no inf."""
    values, width = _finite(fmt)
    sign = 1 << (width - 1) if math.copysign(1.0, x) < 0 else 0
    top = ((1 << (width - 1)) - 1) >> _FLOATS[fmt][1] << _FLOATS[fmt][1]   # exponent all ones
    if math.isnan(x):      # the canonical quiet NaN; e4m3 has one NaN, mantissa all ones
        return top | (1 << (_FLOATS[fmt][1] - 1) if _FLOATS[fmt][2] else (1 << (width - 1)) - 1)
    a = abs(x)
    big = values[-1] + (values[-1] - values[-2]) / 2       # from here on rounding overflows
    if math.isinf(a) and _FLOATS[fmt][2]:
        return sign | top
    if a >= big:
        raise OperandError("fragment.fill", "value", f"a value that stays finite as .{fmt} "
                           f"(the largest is {values[-1]:g})", repr(x))
    i = bisect.bisect_left(values, a)
    if i == len(values) or i > 0 and (a - values[i - 1] < values[i] - a
                                      or a - values[i - 1] == values[i] - a and i % 2):
        i -= 1
    return sign | i


def fill_bits(values: str, value: Any) -> tuple[ScalarType, int | float]:
    """The mov type and immediate that put `value` in every value of a register holding
    `values` ('f32', 's32', or two of 'f16', 'bf16', 'e4m3', 'e5m2'): the checks of an
    immediate (`make_imm`: an .s32 integer in range, an .f32 finite unless given as inf/NaN),
    and a 16/8-bit float rounded to nearest-even that must stay finite."""
    n = int_like(value)
    if isinstance(n, bool) or not isinstance(n, int | float):
        import numpy as np
        if not isinstance(n, np.floating):
            raise OperandError("fragment.fill", "value", "a number (int or float)",
                               _given(value))
        n = float(n)
    if values in ("f32", "s32"):
        t = T.f32 if values == "f32" else T.s32
        imm = make_imm("fragment.fill", "value", n, t).value
        return (T.f32, imm) if values == "f32" else (T.b32, imm)
    code = _small_float(values, make_imm("fragment.fill", "value", n, T.f64).value)
    if values in ("e4m3", "e5m2"):
        return T.b16, code | code << 8
    return T.b32, code | code << 16


def packed_name(what: str, dtype: Any) -> str:
    """The packed value type named by `dtype`: t.bf16 / t.f16, or 'bf16', 'f16', 'e4m3',
    'e5m2' (a leading dot taken)."""
    name = getattr(dtype, "value", dtype)
    if not isinstance(name, str) or name.lstrip(".") not in _PACKED:
        raise BuildError(f"{what}: one of bf16, f16, e4m3, e5m2, got {dtype!r}"[:300])
    return name.lstrip(".")


def _item(what: str, regs: list[Reg], i: Any) -> Reg | list[Reg]:
    """`regs[i]` for a fragment's `__getitem__` (a slice as Python slices; an int, numpy's
    too, negative from the end), refusing an index out of range at the user's line."""
    if isinstance(i, slice):
        try:
            return regs[i]
        except (TypeError, ValueError):   # f[::0], f[0:1.5]: __getitem__ has no safety net
            raise OperandError(f"{what}[...]", "index", "a slice of ints (or None) with a "
                               "step other than 0", _given(i)) from None
    n = int_like(i)
    if isinstance(n, bool) or not isinstance(n, int):
        raise OperandError(f"{what}[...]", "index", "an int or a slice", _given(i))
    if not -len(regs) <= n < len(regs):
        raise BuildIndexError(f"{what}[{n}]: index out of range: it holds {len(regs)} "
                              f"registers per thread, indices 0..{len(regs) - 1} (or "
                              f"-{len(regs)}..-1 from the end)")
    return regs[n]


def _regs(what: str, k: Any, regs: Any, count: int, rt: ScalarType) -> list[Reg]:
    """`count` new registers of type `rt`, or the given ones checked to be that many
    registers that an instruction of type `rt` takes (ptxas's rule: `.u32` serves an `.s32`
    accumulator); bit-typed `rt` (packed values, cvt's destinations) wants bit registers."""
    if regs is None:
        return [k.reg(rt) for _ in range(count)]
    if not isinstance(regs, list | tuple) or len(regs) != count or not all(
            isinstance(r, Reg) and r.type.bits == rt.bits and (
                r.type.kind == "b" if rt.kind == "b" else compatible(r.type, rt))
            for r in regs):
        raise OperandError(what, "regs", f"{count} registers of .{rt.value}", _given(regs))
    check_distinct(what, "regs", regs)   # each holds its own values (fill, cvt, ld write each)
    return list(regs)


def fragment_coords(n: int, thread: int, dtype: ScalarType = T.f32) -> list[tuple[int, int]]:
    """(row, col) of each value thread `thread` (0..127) holds in an m64nN accumulator, in
    register order (`.f16`: two values per register, low half first)."""
    n = _check_n("fragment_coords", n)
    if dtype not in _ACC_TYPES:      # the layout is every accumulator's: only checked
        raise OperandError("fragment_coords", "dtype", "an accumulator type: t.f32, t.s32 or "
                           "t.f16", _given(dtype))
    w, lane = divmod(_thread("fragment_coords", thread), 32)
    out = []
    for i in range(n // 2):
        out.append((16 * w + lane // 4 + 8 * ((i // 2) % 2), 8 * (i // 4) + 2 * (lane % 4)
                    + i % 2))
    return out


def a_fragment_coords(bits: int, thread: int) -> list[list[tuple[int, int]]]:
    """(row, k) of each element of the 4 registers of an RS A fragment (m64 x K of one
    wgmma, K = 256/bits), per register, low bits first."""
    bits = int_like(bits)
    if isinstance(bits, bool) or bits not in (1, 8, 16, 32):
        raise BuildError(f"a_fragment_coords: bits must be 1, 8, 16 or 32, got {bits!r}"[:300])
    w, lane = divmod(_thread("a_fragment_coords", thread), 32)
    per = 32 // bits
    k = 256 // bits
    return [[(16 * w + lane // 4 + 8 * (j % 2), (j // 2) * (k // 2) + (lane % 4) * per + e)
             for e in range(per)] for j in range(4)]


class Fragment(Sealed):
    """An m64nN accumulator (or a packed bf16/f16/fp8 copy of one) in a warpgroup's
    registers. `packed` names the copy's value type ('bf16', 'f16', 'e4m3', 'e5m2')."""

    def __init__(self, k: Any, dtype: ScalarType, n: int, regs: list[Reg] | None = None,
                 packed: str | None = None) -> None:
        check_kernel("fragment", k)
        if not isinstance(dtype, ScalarType) or dtype not in _ACC_TYPES:
            raise BuildError(f"fragment: accumulators are .f32, .s32 or .f16, got {dtype!r}"
                             [:300])
        if packed is not None and (dtype is not T.f32 or not isinstance(packed, str)
                                   or packed not in _PACKED):
            raise BuildError("fragment: packed names the copy of an .f32 accumulator: one of "
                             f"{', '.join(_PACKED)}, got {packed!r}"[:300])
        n = _check_n("fragment", n)
        self.kernel, self.dtype, self.n, self.m = k, dtype, n, 64
        self.packed = packed          # the value type of a converted copy
        count = n // 4 if packed else d_count(n, dtype)
        rt = (T.b16 if _PACKED[packed][1] == 8 else T.b32) if packed else d_register_type(dtype)
        self.regs = _regs("fragment", k, regs, count, rt)
        self._seal()

    @property
    def value_bits(self) -> int:
        """Bits of one value: 32 (.f32/.s32), 16 (.f16, packed bf16/f16), 8 (packed fp8)."""
        if self.packed:
            return _PACKED[self.packed][1]
        return 16 if self.dtype is T.f16 else 32

    def __len__(self) -> int:
        return len(self.regs)

    def __iter__(self) -> Iterator[Reg]:
        return iter(self.regs)

    @overload
    def __getitem__(self, i: SupportsIndex) -> Reg: ...
    @overload
    def __getitem__(self, i: slice) -> list[Reg]: ...

    def __getitem__(self, i: SupportsIndex | slice) -> Reg | list[Reg]:
        return _item(self._describe(), self.regs, i)

    def _describe(self) -> str:
        what = f"fragment (m64n{self.n} .{self.dtype.value}"
        return what + (f", packed {self.packed})" if self.packed else ")")

    def __repr__(self) -> str:
        # what a refusal quotes as "got Fragment ...": the shape and type, not an address
        return f"<{self._describe()} of kernel {getattr(self.kernel, 'name', None)!r}>"

    def coords(self, thread: int) -> list[tuple[int, int]]:
        """(row, col) of each value thread `thread` (0..127) holds: `fragment_coords`."""
        return fragment_coords(self.n, thread, self.dtype)

    def offsets(self, i: int) -> tuple[int, int]:
        """(row, col) of value `i` relative to the thread's origin (`origin()`), known at build
        time: (8*((i/2)%2), 8*(i/4) + i%2)."""
        i = check_index("fragment.offsets: value index", i, self.n // 2)
        return 8 * ((i // 2) % 2), 8 * (i // 4) + i % 2

    def origin(self) -> tuple[Reg, Reg]:
        """The thread's first (row, col) in the tile, as registers: (16*warp + lane/4,
        2*(lane%4)) within the warpgroup; value i sits at origin + offsets(i). For custom
        epilogues (bias, activation by column, ...)."""
        k = self.kernel
        tid = k.and_(k.tid.x, WARPGROUP - 1)
        row0 = k.add(k.mul(k.shr(tid, 5), 16), k.shr(k.and_(tid, 31), 2))
        return row0, k.shl(k.and_(tid, 3), 1)

    def zero(self) -> Fragment:
        """mov 0 into every register (`.f32` 0.0, integer/packed registers 0)."""
        return self.fill(0)

    def fill(self, value: int | float) -> Fragment:
        """mov `value` into every value of the fragment (a register of two values: both
        halves). The value must fit the values' type (`fill_bits`): an integer in range for
        .s32, a number that stays finite once rounded to nearest-even for the float types
        (inf and NaN given as such are kept; e4m3 has no inf)."""
        k = self.kernel
        mov_type, imm = fill_bits(self.packed or self.dtype.value, value)
        for r in self.regs:
            k.mov(imm, type=mov_type, dst=r)
        return self

    def to_packed(self, dtype: ScalarType | str = T.bf16, *,
                  into: Fragment | None = None) -> Fragment:
        """A packed copy of an `.f32` accumulator, two adjacent columns of one row per
        register: values 2j (low) and 2j+1 (high) of register j. bf16/f16: `cvt.rn.{bf16x2,
        f16x2}.f32` into .b32 registers; e4m3/e5m2: `cvt.rn.satfinite.{e4m3x2,e5m2x2}.f32`
        into .b16 registers.

        `into`: a packed fragment of the same N and value type (an earlier `to_packed`, or
        `k.fragment(t.f32, shape=(64, N), packed=t.bf16)`) whose registers receive the copy,
        returned. A value that the code reads at several places (an RS wgmma's P, made before
        a loop and again in it, read in the next iteration) then lives in one set of
        registers."""
        if self.dtype is not T.f32 or self.packed:
            got = self.packed or self.dtype.value
            raise BuildError(f"fragment.to_packed: converts an .f32 accumulator (got .{got})")
        name = packed_name("fragment.to_packed", dtype)
        k = self.kernel
        regs = None if into is None else self._packed_target(into, name)
        out = [cvt_packed(k, _PACKED[name][0], self.regs[2 * j + 1], self.regs[2 * j],
                          dst=None if regs is None else regs[j])
               for j in range(self.n // 4)]
        return into if into is not None else Fragment(k, T.f32, self.n, out, packed=name)

    def _packed_target(self, into: Any, name: str) -> list[Reg]:
        """The registers of `into`, checked to hold this accumulator's packed `name` copy."""
        what = "fragment.to_packed"
        if not isinstance(into, Fragment):
            raise OperandError(what, "into", f"a packed {name} fragment of N={self.n} (an "
                               "earlier to_packed, or k.fragment(..., packed=))", _given(into))
        if into.kernel is not self.kernel:
            raise BuildError(f"{what}: into belongs to another kernel "
                             f"({into.kernel.name!r}, not {self.kernel.name!r})")
        held = f"packed {into.packed}" if into.packed else f".{into.dtype.value} accumulator"
        if into.packed != name or into.n != self.n:
            raise BuildError(f"{what}: into must be a packed {name} fragment of N={self.n} "
                             f"(this conversion's), got a {held} fragment of N={into.n}")
        return into.regs

    def a_operand(self, step: int = 0) -> tuple[Reg, Reg, Reg, Reg]:
        """The A fragment of k16 step `step` (columns 16*step..16*step+15) of a packed 16-bit
        copy: its 4 registers, for an RS wgmma (P @ V chains)."""
        if self.value_bits != 16 or not self.packed:
            raise BuildError("fragment.a_operand: convert with to_packed(t.bf16/t.f16) first")
        step = check_index("fragment.a_operand: step", step, self.n // 16)
        a0, a1, a2, a3 = self.regs[4 * step:4 * step + 4]
        return a0, a1, a2, a3

    # -- the direct-store epilogue -----------------------------------------------------------
    def store(self, ptr: Reg | Symbol, ld: Reg | IntLike, *, rows: Reg | IntLike | None = None,
              cols: Reg | IntLike | None = None) -> None:
        """Each thread stores its values to a row-major global tile at `ptr` (a 64-bit global
        or generic register, or a pointer parameter) with a row stride of `ld` elements (int
        or register). `rows`/`cols` (int or register) bound the tile for M/N tails; values
        outside are not stored. Packed fragments store each register's pair in one store."""
        k = self.kernel
        check_owned("fragment.store", k, ptr=ptr, ld=ld, rows=rows, cols=cols)
        ld, rows, cols = (_check_extent(value, "fragment.store", name, bound=name != "ld")
                          for name, value in (("ld", ld), ("rows", rows), ("cols", cols)))
        pairs = self.packed is not None or self.dtype is T.f16
        self._check_store_ld(ld, cols, pairs)
        ptr = _global_ptr(k, ptr, "fragment.store")
        eb = self.value_bits // 8
        row0, col0 = self.origin()
        first = k.mad(row0, ld, col0, type=T.u32) if not isinstance(ld, int) \
            else k.mad(row0, ld, col0)
        base = k.add(ptr, k.mul(first, eb, type=T.u32, mode="wide"), type=T.u64)
        if isinstance(ld, int):
            below = base, ld * 8 * eb
        else:
            below = k.add(base, k.mul(ld, 8 * eb, type=T.u32, mode="wide")), 0
        row_ok = {dr: self._bound(row0, rows, dr) for dr in (0, 8)}
        st_type = (T.b32 if self.value_bits == 16 else T.b16) if pairs else self.dtype
        for idx, reg in enumerate(self.regs):
            if pairs:      # register idx holds values 2idx, 2idx+1
                i = 2 * idx
            else:
                i = idx
            dr, dc = self.offsets(i)
            addr_base, extra = (base, 0) if dr == 0 else below
            addr = Addr(addr_base, extra + dc * eb)
            pred = self._bound(col0, cols, dc + (1 if pairs else 0), row_ok[dr])
            if pred is False:
                continue
            if pred is True:
                k.st(addr, reg, type=st_type, space="global")
            else:
                with k.guard(pred):
                    k.st(addr, reg, type=st_type, space="global")

    def _check_store_ld(self, ld: Any, cols: Any, pairs: bool) -> None:
        """What a constant stride and bound prove wrong: rows that overlap (ld below the
        columns stored), and for a fragment stored two values at a time (packed, .f16), an
        odd stride (every other row's pairs misaligned) or an odd column bound (the last
        column's pair would be dropped whole)."""
        width = self.n if not isinstance(cols, int) else min(self.n, cols)
        if isinstance(ld, int) and ld < width:
            raise BuildError(f"fragment.store: ld={ld} is below the {width} columns stored per "
                             f"row (N={self.n}{f', cols={cols}' if isinstance(cols, int) else ''})"
                             ": rows would overwrite each other; ld is the row stride of the "
                             "destination in elements")
        if not pairs:
            return
        size = 2 * self.value_bits // 8
        if isinstance(ld, int) and ld % 2:
            raise BuildError(f"fragment.store: ld={ld} must be even: each store writes two "
                             f"adjacent values as one {size}-byte access, which must be "
                             f"{size}-byte aligned in every row")
        if isinstance(cols, int) and cols % 2 and cols < self.n:
            raise BuildError(f"fragment.store: cols={cols} must be even: each store writes two "
                             "adjacent columns, so an odd bound would drop the last column")

    def store_matrix(self, smem: AddrLike, ld: IntLike) -> None:
        """The `stmatrix` epilogue: a packed bf16/f16 copy to a row-major tile in shared
        memory (a shared symbol, `Addr(symbol, offset)` or 32-bit shared address register; row
        stride `ld` elements, a multiple of 8 so every 8x8 matrix row is 16-byte aligned). A
        symbol must hold the whole tile, (63*ld + N)*2 bytes from the offset, 16-byte
        aligned.

        Packed register j of a warp holds the 8x8 matrix (rows 8*(j%2).., columns 8*(j/2)..)
        of the warp's 16 rows in exactly stmatrix's per-thread layout, so registers 4q..4q+3
        are one `stmatrix.x4`; lane L gives the address of row L%8 of matrix L/8."""
        k = self.kernel
        check_owned("fragment.store_matrix", k, smem=smem, ld=ld)
        if self.value_bits != 16 or not self.packed:
            raise BuildError("fragment.store_matrix: stmatrix stores 16-bit values; convert "
                             "with to_packed(t.bf16/t.f16) first")
        ld = int_like(ld)
        if isinstance(ld, bool) or not isinstance(ld, int) or ld < self.n or ld % 8:
            raise BuildError(f"fragment.store_matrix: ld must be an int >= N={self.n} and a "
                             f"multiple of 8 (16-byte rows), got {ld!r}"[:300])
        size = (63 * ld + self.n) * 2
        if size > SMEM_LIMIT:
            raise BuildError(f"fragment.store_matrix: ld={ld} makes the 64 x {self.n} tile span "
                             f"{size} bytes, more than shared memory has")
        smem = shared_dst(k, smem, "fragment.store_matrix", size, 16,
                           f"the 64 x {self.n} tile of 16-bit values with row stride {ld} "
                           f"({size} bytes, 16-byte aligned rows)")
        tid = k.and_(k.tid.x, WARPGROUP - 1)
        lane = k.and_(tid, 31)
        mat = k.shr(lane, 3)
        row = k.add(k.add(k.mul(k.shr(tid, 5), 16), k.shl(k.and_(mat, 1), 3)),
                    k.and_(lane, 7))
        col = k.shl(k.shr(mat, 1), 3)
        base = k.add(smem, k.shl(k.mad(row, ld, col), 1))
        for q in range(self.n // 16):
            stmatrix(k, Addr(base, 32 * q), self.regs[4 * q:4 * q + 4])

    def _bound(self, start: Reg, limit: Any, off: int, also: Any = True) -> Any:
        """start + off < limit, as True/False when known at build time or a predicate."""
        k = self.kernel
        if limit is None:
            return also
        if isinstance(limit, int):
            if off >= limit:
                return False
            if also is False:
                return False
            if also is True:
                return k.setp("lt", start, limit - off, type=T.u32)
            return k.setp("lt", start, limit - off, type=T.u32, bool_op="and", c=also)
        lim = k.sub(limit, off, type=T.s32) if off else limit
        if also is True:
            return k.setp("lt", start, lim, type=T.s32)
        if also is False:
            return False
        return k.setp("lt", start, lim, type=T.s32, bool_op="and", c=also)


class AFragment(Sealed):
    """The A operand of an RS wgmma in registers: 4 x 32 bits per thread (m64 x K of one
    instruction, K = 256/bits)."""

    def __init__(self, k: Any, dtype: ScalarType | str, regs: list[Reg] | None = None) -> None:
        from .instructions.wgmma_desc import _bits
        check_kernel("a_fragment", k)
        self.kernel, self.dtype, self.bits = k, dtype, _bits(dtype, "a_fragment")
        self.k = 256 // self.bits
        self.regs = _regs("a_fragment", k, regs, 4, T.b32)
        self._seal()

    def __len__(self) -> int:
        return 4

    def __repr__(self) -> str:
        dtype = getattr(self.dtype, "value", self.dtype)
        return (f"<a_fragment (m64k{self.k} .{dtype}) of kernel "
                f"{getattr(self.kernel, 'name', None)!r}>")

    def __iter__(self) -> Iterator[Reg]:
        return iter(self.regs)

    @overload
    def __getitem__(self, i: SupportsIndex) -> Reg: ...
    @overload
    def __getitem__(self, i: slice) -> list[Reg]: ...

    def __getitem__(self, i: SupportsIndex | slice) -> Reg | list[Reg]:
        return _item(f"a_fragment (.{getattr(self.dtype, 'value', self.dtype)})", self.regs, i)

    def coords(self, thread: int) -> list[list[tuple[int, int]]]:
        """(row, k) of each element of the thread's registers: `a_fragment_coords`."""
        return a_fragment_coords(self.bits, thread)

    def load(self, ptr: Reg | Symbol, ld: IntLike, *, k0: Reg | IntLike = 0) -> AFragment:
        """Load the fragment from a row-major global A (row stride `ld` elements), K columns
        from `k0` (int or 32-bit register): one 32-bit load per register (its elements are
        adjacent in a row), so a constant `ld` and `k0` must keep every load 4-byte aligned
        and the K columns inside a row."""
        k = self.kernel
        check_owned("a_fragment.load", k, ptr=ptr, ld=ld, k0=k0)
        if self.bits < 8:
            raise BuildError("a_fragment.load: b1 fragments are loaded by the user")
        ld = _check_extent(ld, "a_fragment.load", "ld")
        k0 = int_like(k0)
        if k0 is None:
            raise BuildError("a_fragment.load: k0 must be a non-negative int or a 32-bit "
                             "integer register, got None")
        k0 = _check_extent(k0, "a_fragment.load", "k0", bound=True)
        per = 32 // self.bits
        for name, v in (("ld", ld), ("k0", k0)):
            if isinstance(v, int) and v % per:
                raise BuildError(f"a_fragment.load: {name}={v} must be a multiple of {per}: "
                                 f"each register is one 4-byte load of {per} {self.bits}-bit "
                                 "elements, which must be 4-byte aligned")
        # A register k0 is at least 0, so a constant ld below K is wrong whatever it holds.
        if isinstance(ld, int) and (k0 if isinstance(k0, int) else 0) + self.k > ld:
            cols = f"[{k0}, {k0 + self.k})" if isinstance(k0, int) else f"[k0, k0 + {self.k})"
            raise BuildError(f"a_fragment.load: columns {cols} run past the row stride "
                             f"ld={ld}: they would read the next row")
        ptr = _global_ptr(k, ptr, "a_fragment.load")
        tid = k.and_(k.tid.x, WARPGROUP - 1)
        row0 = k.add(k.mul(k.shr(tid, 5), 16), k.shr(k.and_(tid, 31), 2))
        col0 = k.mul(k.and_(tid, 3), per)
        if not isinstance(k0, int) or k0:
            col0 = k.add(col0, k0)
        first = k.mad(row0, ld, col0) if isinstance(ld, int) else k.mad(row0, ld, col0,
                                                                         type=T.u32)
        eb = self.bits // 8
        base = k.add(ptr, k.mul(first, eb, type=T.u32, mode="wide"), type=T.u64)
        # registers 1 and 3 hold row +8: a constant offset, or one add for a register stride
        below = (base, 8 * ld * eb) if isinstance(ld, int) else \
            (k.add(base, k.mul(ld, 8 * eb, type=T.u32, mode="wide")), 0)
        for j, r in enumerate(self.regs):
            row_base, extra = below if j % 2 else (base, 0)
            k.ld(Addr(row_base, extra + (j // 2) * (self.k // 2) * eb), type=T.b32,
                 space="global", dst=r)
        return self


class FragmentOps(KernelHost):
    """Kernel methods: `k.fragment(t.f32, shape=(64, N))`, `k.a_fragment(t.bf16)`."""

    def fragment(self, dtype: ScalarType = T.f32, shape: tuple[int, int] = (64, 64), *,
                 zero: bool = True, packed: ScalarType | str | None = None) -> Fragment:
        """An m64nN wgmma accumulator in registers, zero-filled unless zero=False.
        `packed` (t.bf16, t.f16, 'e4m3', 'e5m2'; with dtype .f32): the registers of a packed
        copy instead, for `to_packed(..., into=)` to convert into (a P that lives in the
        same registers across a loop's iterations)."""
        if not isinstance(shape, tuple | list) or len(shape) != 2:
            raise BuildError(f"fragment: shape must be (64, N), got {shape!r}"[:300])
        m, n = shape
        if type(int_like(m)) is not int or m != 64:
            raise BuildError(f"fragment: wgmma accumulators are 64 rows per warpgroup, got "
                             f"shape {shape!r}"[:300])
        # Real bools only, as for the kernel's flags: zero="no" is truthy and would zero-fill.
        if type(zero) is not bool:
            raise OperandError("fragment", "zero", "True or False", _given(zero))
        name = None if packed is None else packed_name("fragment", packed)
        frag = Fragment(self, dtype, n, packed=name)
        return frag.zero() if zero else frag

    def a_fragment(self, dtype: ScalarType | str = T.bf16) -> AFragment:
        """4 registers for the A operand of an RS wgmma of `dtype` inputs."""
        return AFragment(self, dtype)


# The safety net under the checks above (errors.fail_closed), as for the Kernel builders.
fail_closed_methods(Fragment, "fragment")
fail_closed_methods(AFragment, "a_fragment")
fragment_coords = fail_closed("fragment_coords", fragment_coords)
a_fragment_coords = fail_closed("a_fragment_coords", a_fragment_coords)
