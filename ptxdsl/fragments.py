"""Warpgroup register fragments: the wgmma accumulator tile and the A operand of RS forms.

A wgmma accumulator of m64nN lives in the 128 threads of a warpgroup, N/2 values per thread
(PTX ISA §9.7.15.5, "Matrix D fragment"). Thread t (warp w = t/32, lane l = t%32) holds, for
value index i in 0..N/2-1:

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

from typing import Any

from .errors import BuildError
from .instructions.cvt_packed import cvt_packed
from .instructions.matrix import stmatrix
from .instructions.wgmma import ALL_N, d_count, d_register_type
from .kernel_host import KernelHost
from .operands import Addr, Reg, Symbol
from .types import ScalarType

T = ScalarType
WARPGROUP = 128
_ACC_TYPES = (T.f32, T.s32, T.f16)
# to_packed targets: name -> (cvt_packed destination, bits of one value)
_PACKED = {"bf16": ("bf16x2", 16), "f16": ("f16x2", 16), "e4m3": ("e4m3x2", 8),
           "e5m2": ("e5m2x2", 8)}


def _global_ptr(k: Any, ptr: Any, what: str) -> Reg:
    """A 64-bit global (or generic) address: a register, or a pointer parameter loaded."""
    if isinstance(ptr, Symbol) and getattr(ptr, "kind", None) == "pointer":
        ptr = k.ld_param(ptr)
    space = ptr.space if isinstance(ptr, Reg | Symbol) else None
    if not isinstance(ptr, Reg) or ptr.type.bits != 64 or space is not None and space.is_shared:
        given = (f"symbol {ptr.name} in .{ptr.space.value}" if isinstance(ptr, Symbol) else
                 f"register %{ptr.name} (.{ptr.type.value}"
                 + (f", a .{space.value} address)" if space is not None else ")")
                 if isinstance(ptr, Reg) else repr(ptr))
        raise BuildError(f"{what}: ptr must be a 64-bit global address (a register or a "
                         f"pointer parameter), got {given}")
    return ptr


def _check_extent(value: Any, what: str, name: str, bound: bool = False) -> None:
    """A row stride (positive) or a bound (None, or >= 0): an int or a 32-bit integer register,
    not a float or a bool."""
    if value is None and bound:
        return
    if isinstance(value, Reg) and value.type.is_int and value.type.bits == 32:
        return
    if isinstance(value, int) and not isinstance(value, bool) and value >= (0 if bound else 1):
        return
    sign = "a non-negative" if bound else "a positive"
    raise BuildError(f"{what}: {name} must be {sign} int or a 32-bit integer register "
                     f"(elements), got {value!r}")


def fragment_coords(n: int, thread: int, dtype: ScalarType = T.f32) -> list[tuple[int, int]]:
    """(row, col) of each value thread `thread` (0..127) holds in an m64nN accumulator, in
    register order (`.f16`: two values per register, low half first)."""
    w, lane = divmod(thread % WARPGROUP, 32)
    out = []
    for i in range(n // 2):
        out.append((16 * w + lane // 4 + 8 * ((i // 2) % 2), 8 * (i // 4) + 2 * (lane % 4)
                    + i % 2))
    return out


def a_fragment_coords(bits: int, thread: int) -> list[list[tuple[int, int]]]:
    """(row, k) of each element of the 4 registers of an RS A fragment (m64 x K of one
    wgmma, K = 256/bits), per register, low bits first."""
    w, lane = divmod(thread % WARPGROUP, 32)
    per = 32 // bits
    k = 256 // bits
    return [[(16 * w + lane // 4 + 8 * (j % 2), (j // 2) * (k // 2) + (lane % 4) * per + e)
             for e in range(per)] for j in range(4)]


class Fragment:
    """An m64nN accumulator (or a packed bf16/f16/fp8 copy of one) in a warpgroup's
    registers. `packed` names the copy's value type ('bf16', 'f16', 'e4m3', 'e5m2')."""

    def __init__(self, k, dtype: ScalarType, n: int, regs: list[Reg] | None = None,
                 packed: str | None = None):
        if dtype not in _ACC_TYPES and packed is None:
            raise BuildError(f"fragment: accumulators are .f32, .s32 or .f16, got {dtype!r}")
        if n not in ALL_N:
            raise BuildError(f"fragment: N must be 8..256 in steps of 8, got {n!r}")
        self.kernel, self.dtype, self.n, self.m = k, dtype, n, 64
        self.packed = packed          # the value type of a converted copy
        count = n // 4 if packed else d_count(n, dtype)
        rt = T.b32 if packed else d_register_type(dtype)
        self.regs = regs if regs is not None else [k.reg(rt) for _ in range(count)]

    @property
    def value_bits(self) -> int:
        """Bits of one value: 32 (.f32/.s32), 16 (.f16, packed bf16/f16), 8 (packed fp8)."""
        if self.packed:
            return _PACKED[self.packed][1]
        return 16 if self.dtype is T.f16 else 32

    def __len__(self) -> int:
        return len(self.regs)

    def __iter__(self):
        return iter(self.regs)

    def __getitem__(self, i):
        return self.regs[i]

    def coords(self, thread: int) -> list[tuple[int, int]]:
        return fragment_coords(self.n, thread, self.dtype)

    def offsets(self, i: int) -> tuple[int, int]:
        """(row, col) of value `i` relative to the thread's origin (`origin()`), known at build
        time: (8*((i/2)%2), 8*(i/4) + i%2)."""
        if not 0 <= i < self.n // 2:
            raise BuildError(f"fragment.offsets: value index must be in [0, {self.n // 2})")
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
        """mov `value` into every value of the fragment (an .f16 fragment: both halves)."""
        k = self.kernel
        for r in self.regs:
            if r.type is T.f32:
                k.mov(float(value), type=T.f32, dst=r)
            elif self.dtype is T.f16 and not self.packed:
                import numpy as np
                half = int(np.float16(value).view(np.uint16))
                k.mov(half | half << 16, type=T.b32, dst=r)
            else:
                k.mov(int(value), type=T.b32, dst=r)
        return self

    def to_packed(self, dtype: Any = T.bf16) -> Fragment:
        """A packed copy of an `.f32` accumulator, two adjacent columns of one row per
        register: values 2j (low) and 2j+1 (high) of register j. bf16/f16: `cvt.rn.{bf16x2,
        f16x2}.f32` into .b32 registers; e4m3/e5m2: `cvt.rn.satfinite.{e4m3x2,e5m2x2}.f32`
        into .b16 registers."""
        if self.dtype is not T.f32 or self.packed:
            got = self.packed or self.dtype.value
            raise BuildError(f"fragment.to_packed: converts an .f32 accumulator (got .{got})")
        name = getattr(dtype, "value", dtype)
        if name not in _PACKED:
            raise BuildError("fragment.to_packed: one of bf16, f16, e4m3, e5m2, got "
                             f"{dtype!r}")
        k = self.kernel
        out = [cvt_packed(k, _PACKED[name][0], self.regs[2 * j + 1], self.regs[2 * j])
               for j in range(self.n // 4)]
        return Fragment(k, T.f32, self.n, out, packed=name)

    def a_operand(self, step: int = 0) -> tuple[Reg, Reg, Reg, Reg]:
        """The A fragment of k16 step `step` (columns 16*step..16*step+15) of a packed 16-bit
        copy: its 4 registers, for an RS wgmma (P @ V chains)."""
        if self.value_bits != 16 or not self.packed:
            raise BuildError("fragment.a_operand: convert with to_packed(t.bf16/t.f16) first")
        if not 0 <= step < self.n // 16:
            raise BuildError(f"fragment.a_operand: step must be in [0, {self.n // 16})")
        a0, a1, a2, a3 = self.regs[4 * step:4 * step + 4]
        return a0, a1, a2, a3

    # -- the direct-store epilogue -----------------------------------------------------------
    def store(self, ptr: Any, ld: Any, *, rows: Any = None, cols: Any = None) -> None:
        """Each thread stores its values to a row-major global tile at `ptr` (a 64-bit global
        or generic register, or a pointer parameter) with a row stride of `ld` elements (int
        or register). `rows`/`cols` (int or register) bound the tile for M/N tails; values
        outside are not stored. Packed fragments store each register's pair in one store."""
        k = self.kernel
        for name, value in (("ld", ld), ("rows", rows), ("cols", cols)):
            _check_extent(value, "fragment.store", name, bound=name != "ld")
        ptr = _global_ptr(k, ptr, "fragment.store")
        eb = self.value_bits // 8
        row0, col0 = self.origin()
        first = k.mad(row0, ld, col0, type=T.u32) if not isinstance(ld, int) \
            else k.mad(row0, ld, col0)
        base = k.add(ptr, k.mul(first, eb, type=T.u32, mode="wide"))
        if isinstance(ld, int):
            below = base, ld * 8 * eb
        else:
            below = k.add(base, k.mul(ld, 8 * eb, type=T.u32, mode="wide")), 0
        row_ok = {dr: self._bound(row0, rows, dr) for dr in (0, 8)}
        pairs = self.packed is not None or self.dtype is T.f16
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

    def store_matrix(self, smem: Any, ld: int) -> None:
        """The `stmatrix` epilogue: a packed bf16/f16 copy to a row-major tile in shared
        memory (a shared symbol or 32-bit shared address register; row stride `ld` elements,
        a multiple of 8 so every 8x8 matrix row is 16-byte aligned).

        Packed register j of a warp holds the 8x8 matrix (rows 8*(j%2).., columns 8*(j/2)..)
        of the warp's 16 rows in exactly stmatrix's per-thread layout, so registers 4q..4q+3
        are one `stmatrix.x4`; lane L gives the address of row L%8 of matrix L/8."""
        k = self.kernel
        if self.value_bits != 16 or not self.packed:
            raise BuildError("fragment.store_matrix: stmatrix stores 16-bit values; convert "
                             "with to_packed(t.bf16/t.f16) first")
        if isinstance(ld, bool) or not isinstance(ld, int) or ld < self.n or ld % 8:
            raise BuildError(f"fragment.store_matrix: ld must be an int >= N={self.n} and a "
                             f"multiple of 8 (16-byte rows), got {ld!r}")
        if isinstance(smem, Symbol):
            if not smem.space.is_shared:
                raise BuildError(f"fragment.store_matrix: {smem.name} is not in shared memory")
            smem = k.mov(smem)
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


class AFragment:
    """The A operand of an RS wgmma in registers: 4 x 32 bits per thread (m64 x K of one
    instruction, K = 256/bits)."""

    def __init__(self, k, dtype: Any, regs: list[Reg] | None = None):
        from .instructions.wgmma_desc import _bits
        self.kernel, self.dtype, self.bits = k, dtype, _bits(dtype)
        self.k = 256 // self.bits
        self.regs = regs if regs is not None else [k.reg(T.b32) for _ in range(4)]

    def __len__(self) -> int:
        return 4

    def __iter__(self):
        return iter(self.regs)

    def __getitem__(self, i):
        return self.regs[i]

    def coords(self, thread: int) -> list[list[tuple[int, int]]]:
        return a_fragment_coords(self.bits, thread)

    def load(self, ptr: Any, ld: int, *, k0: Any = 0) -> AFragment:
        """Load the fragment from a row-major global A (row stride `ld` elements), K columns
        from `k0`: one 32-bit load per register (its elements are adjacent in a row)."""
        k = self.kernel
        _check_extent(ld, "a_fragment.load", "ld")
        ptr = _global_ptr(k, ptr, "a_fragment.load")
        per = 32 // self.bits
        tid = k.and_(k.tid.x, WARPGROUP - 1)
        row0 = k.add(k.mul(k.shr(tid, 5), 16), k.shr(k.and_(tid, 31), 2))
        col0 = k.mul(k.and_(tid, 3), per)
        if not isinstance(k0, int) or k0:
            col0 = k.add(col0, k0)
        first = k.mad(row0, ld, col0)
        base = k.add(ptr, k.mul(first, self.bits // 8 or 1, type=T.u32, mode="wide")) \
            if self.bits >= 8 else None
        if base is None:
            raise BuildError("a_fragment.load: b1 fragments are loaded by the user")
        eb = self.bits // 8
        for j, r in enumerate(self.regs):
            off = (8 * (j % 2) * ld + (j // 2) * (self.k // 2)) * eb
            k.ld(Addr(base, off), type=T.b32, space="global", dst=r)
        return self


class FragmentOps(KernelHost):
    """Kernel methods: `k.fragment(t.f32, shape=(64, N))`, `k.a_fragment(t.bf16)`."""

    def fragment(self, dtype: ScalarType = T.f32, shape: tuple[int, int] = (64, 64), *,
                 zero: bool = True) -> Fragment:
        """An m64nN wgmma accumulator in registers, zero-filled unless zero=False."""
        m, n = shape
        if m != 64:
            raise BuildError(f"fragment: wgmma accumulators are 64 rows per warpgroup, got "
                             f"shape {shape!r}")
        frag = Fragment(self, dtype, n)
        return frag.zero() if zero else frag

    def a_fragment(self, dtype: Any = T.bf16) -> AFragment:
        """4 registers for the A operand of an RS wgmma of `dtype` inputs."""
        return AFragment(self, dtype)
