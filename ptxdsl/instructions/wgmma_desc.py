"""Shared-memory matrix descriptors for wgmma, built from a tile's layout (PTX ISA §9.7.15.5.1).

A descriptor is 64 bits: start address >> 4 (bits 0-13), leading-dimension byte offset >> 4
(16-29), stride-dimension byte offset >> 4 (32-45), base offset (49-51) and the swizzle mode
(62-63: 0 none, 1 128B, 2 64B, 3 32B). Users should not write those bits: `SmemLayout`
describes a tile (element width, MN and K extents, K- or MN-major, swizzle) in the canonical
arrangement wgmma reads, and derives the offsets, the alignment the tile needs, the offset of
each K step and the TMA box that writes exactly this layout.

The arrangement: a swizzle "atom" is 8 rows of `atom_bytes` (the swizzle width, 16 without
swizzle) contiguous along the major dimension. K-major: row r of the tile (an M or N index)
holds K elements; atom column j (K elements [j*A, (j+1)*A), A = atom elements) is MN rows of
`atom_bytes`, and the columns follow each other (column j at j * MN * atom_bytes). MN-major:
the same with the roles of MN and K exchanged. This is what one TMA box of
(atom elements, rows) per column writes, with the same swizzle.

`descriptor(k, layout, addr)` folds the constant fields into one 64-bit immediate at build
time and ORs the run-time address in (2 instructions: shr, then mad.wide or or);
`MatrixDescriptor.k_step(k, kk)` advances it along K with one add.
"""

from __future__ import annotations

import enum
from typing import Any

import attrs

from ..errors import BuildError, OperandError, fail_closed, fail_closed_methods, refuse_assignment
from ..operands import Addr, Reg, Symbol, as_int, check_owned
from ..provenance import known_fit
from ..types import ScalarType
from ._tma_addr import symbol_fit
from ._tma_box import MAX_BOX_DIM, box_dim_ok
from .base import _given, int_like, known_space

__all__ = ["SmemLayout", "MatrixDescriptor", "Major", "SwizzleMode", "encode_descriptor",
           "descriptor"]

SMEM_LIMIT = 1 << 18      # the descriptor's 14-bit start address field covers 256 KiB


class SwizzleMode(enum.Enum):
    """The shared-memory swizzle of a wgmma operand; the value is the swizzle width in bytes
    (0: no swizzle, 16-byte core-matrix rows)."""

    none = 0
    b32 = 32
    b64 = 64
    b128 = 128

    @property
    def code(self) -> int:
        """The descriptor's 2-bit layout type."""
        return {0: 0, 128: 1, 64: 2, 32: 3}[self.value]

    @property
    def atom_bytes(self) -> int:
        """The bytes of one row of the swizzle atom: the swizzle width, or 16 without swizzling."""
        return self.value or 16

    @property
    def alignment(self) -> int:
        """The tile base alignment: the swizzle pattern repeats every 8 rows of the atom."""
        return 8 * self.value if self.value else 16

    @property
    def tma_name(self) -> str:
        """The matching CUtensorMapSwizzle member name (runtime.tensormap_enums.Swizzle)."""
        return f"B{self.value}" if self.value else "NONE"

    @classmethod
    def coerce(cls, value: Any) -> SwizzleMode:
        """A SwizzleMode from a member, its width (0, 32, 64, 128), or exactly one of the
        spellings `SWIZZLE_SPELLINGS` (any case): '128B', 'b128', 'none'. A string enum member
        is read by its value, like any string; another enum (runtime's `Swizzle.B128`, an
        IntEnum whose value is the driver's code) by its name."""
        if isinstance(value, cls):
            return value
        # A foreign enum is read by its name, and t.b32 / t.b64 / t.b128 are named like
        # swizzles: a type is never one.
        text = value.name if isinstance(value, enum.Enum) and not isinstance(value, str
                                                                             | ScalarType) \
            else value
        n = int_like(text)
        if isinstance(n, int) and not isinstance(n, bool):
            text = str(n)
        if isinstance(text, str):
            found = _SWIZZLE_SPELLINGS.get(str.lower(text).strip())
            if found is not None:
                return cls(found)
        raise BuildError(f"wgmma descriptor: swizzle must be one of none, 32B, 64B, 128B (the "
                         f"spellings taken, any case: {', '.join(_SWIZZLE_SPELLINGS)}; or a "
                         f"SwizzleMode, or the width 0/32/64/128 as an int), got {value!r}")


# Every spelling SwizzleMode.coerce takes; nothing looser ('128bbbb' read as 128B).
_SWIZZLE_SPELLINGS = {
    "none": 0, "0": 0, "interleave": 0,
    **{spelling: w for w in (32, 64, 128) for spelling in (f"{w}b", f"b{w}", str(w))},
}


class Major(enum.Enum):
    """Which dimension is contiguous in shared memory: K ('K-major', no transpose) or M/N."""

    K = "K"
    MN = "MN"

    @classmethod
    def coerce(cls, value: Any) -> Major:
        """A Major from a member (of this or any enum with the same values) or its name, in
        any case, as `SwizzleMode.coerce` takes swizzle names: Major.K, 'K', 'k', 'mn',
        'MN-major'."""
        if isinstance(value, cls):
            return value
        text = getattr(value, "value", value)
        if isinstance(text, str):
            key = text.strip().upper().removesuffix("-MAJOR").removesuffix("_MAJOR")
            if key in ("K", "MN"):
                return cls(key)
        raise OperandError("SmemLayout", "major", "'K' or 'MN' (any case), or Major.K / "
                           "Major.MN", _given(value))


# Element widths a wgmma operand tile can have: b1, 8-bit (fp8, s8/u8), 16-bit, tf32.
_WIDTHS = (1, 8, 16, 32)


def _bits(dtype: Any, what: str = "SmemLayout") -> int:
    """Element width in bits of a ptxdsl type, a wgmma type ('e4m3', 'tf32', 'b1') or an int
    (1, 8, 16 or 32: the widths wgmma reads); a refusal names `what` (the helper called)."""
    n = int_like(dtype)
    bits = None
    if isinstance(n, int) and not isinstance(n, bool):
        bits = n
    elif isinstance(dtype, ScalarType):
        # not .pred (1 "bit") nor the packed pairs: a tile element is one value
        bits = dtype.bits if dtype.kind != "pred" and "x" not in dtype.value else None
    else:
        from .wgmma import check_wtype
        return check_wtype(what, "dtype", dtype).bits
    if bits not in _WIDTHS:
        raise OperandError(what, "dtype", "a wgmma input type (.f16, .bf16, .tf32, "
                           ".e4m3, .e5m2, .s8, .u8, .b1) or its width in bits (1, 8, 16, 32)",
                           _given(dtype))
    return bits


def encode_descriptor(start: int, lbo: int, sbo: int, swizzle: Any = SwizzleMode.none,
                      base_offset: int = 0) -> int:
    """The 64-bit descriptor from byte values (each checked: 16-byte multiples, 14-bit
    encodings, base offset 0..7)."""
    sw = SwizzleMode.coerce(swizzle)
    start, lbo, sbo, base_offset = map(int_like, (start, lbo, sbo, base_offset))
    for what, v in (("start address", start), ("leading byte offset", lbo),
                    ("stride byte offset", sbo)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 0 or v % 16 or v >= SMEM_LIMIT:
            raise BuildError(f"wgmma descriptor: {what} must be a multiple of 16 below "
                             f"{SMEM_LIMIT} (it is encoded >> 4 in 14 bits), got {v!r}")
    if isinstance(base_offset, bool) or not isinstance(base_offset, int) \
            or not 0 <= base_offset <= 7:
        raise BuildError(f"wgmma descriptor: base offset must be 0..7, got {base_offset!r}")
    return ((start >> 4) | (lbo >> 4) << 16 | (sbo >> 4) << 32 | base_offset << 49
            | sw.code << 62)


_FIELD_BITS = 0x3FFF | 0x3FFF << 16 | 0x3FFF << 32 | 7 << 49 | 3 << 62


def decode_descriptor(value: int) -> tuple[int, int, int, SwizzleMode, int]:
    """`encode_descriptor`'s inverse: (start, lbo, sbo, swizzle, base_offset) in bytes. A
    value with a reserved bit set is refused (no encode_descriptor gives it)."""
    n = as_int(value)     # numpy's uint64 too (its & with a negative Python int overflows)
    if n is None or not 0 <= n < 1 << 64:
        raise OperandError("decode_descriptor", "value", "a 64-bit descriptor (an int in "
                           "[0, 2^64))", _given(value))
    value = n
    if value & ~_FIELD_BITS:
        raise BuildError(f"wgmma descriptor: {value:#x} sets reserved bits "
                         f"{value & ~_FIELD_BITS:#x} (only 0-13, 16-29, 32-45, 49-51 and 62-63 "
                         "are fields)")
    mode = {0: SwizzleMode.none, 1: SwizzleMode.b128, 2: SwizzleMode.b64,
            3: SwizzleMode.b32}[value >> 62 & 3]
    return ((value & 0x3FFF) << 4, (value >> 16 & 0x3FFF) << 4, (value >> 32 & 0x3FFF) << 4,
            mode, value >> 49 & 7)


def _swizzle(v: Any) -> SwizzleMode:   # a named converter: the attrs plugin types the field
    return SwizzleMode.coerce(v)


def _major(v: Any) -> Major:   # a named converter, as _swizzle
    return Major.coerce(v)


@attrs.frozen
class SmemLayout:
    """A wgmma operand tile in shared memory: `mn` rows (M for A, N for B) by `k` columns of
    `dtype`, `major` contiguous, with `swizzle`. Everything else is derived."""

    dtype: Any
    mn: int
    k: int
    major: Major = attrs.field(default=Major.K, converter=_major)
    swizzle: SwizzleMode = attrs.field(default=SwizzleMode.b128, converter=_swizzle)

    def __attrs_post_init__(self):
        bits = _bits(self.dtype)
        object.__setattr__(self, "bits", bits)
        for what, v in (("mn", self.mn), ("k", self.k)):
            n = as_int(v)          # numpy integers too, stored as Python ints
            if n is not None:
                object.__setattr__(self, what, n)
                v = n
            if isinstance(v, bool) or not isinstance(v, int) or v < 8 or v % 8:
                raise BuildError(f"SmemLayout: {what} must be a positive multiple of 8 "
                                 f"(whole core matrices), got {v!r}")
        if self.mn * self.k * bits > 8 * SMEM_LIMIT:   # no shared memory holds it
            raise OperandError("SmemLayout", "mn, k", f"a tile of at most {SMEM_LIMIT // 1024} "
                               "KiB (what a descriptor addresses; shared memory holds less)",
                               f"{self.mn} x {self.k} of {bits} bits = "
                               f"{self.mn * self.k * bits // 8} bytes")
        if self.major is Major.MN and bits != 16:
            raise BuildError("SmemLayout: only 16-bit types (.f16/.bf16) may be MN-major "
                             "(wgmma transposes those only); store tf32/fp8/int tiles K-major")
        major_elems = self.k if self.major is Major.K else self.mn
        if (major_elems * bits) % (8 * self.atom_bytes):
            dim = "k" if self.major is Major.K else "mn"
            raise BuildError(f"SmemLayout: the {self.major.value}-major extent {dim}="
                             f"{major_elems} must fill whole {self.atom_bytes}-byte swizzle "
                             f"atoms ({self.atom_elems} elements of {bits} bits)")

    bits: int = attrs.field(init=False, default=0)

    # -- geometry --------------------------------------------------------------------------
    @property
    def atom_bytes(self) -> int:
        """The bytes of one row of the layout's swizzle atom (see `SwizzleMode.atom_bytes`)."""
        return self.swizzle.atom_bytes

    @property
    def atom_elems(self) -> int:
        """The elements in one row of the swizzle atom."""
        return self.atom_bytes * 8 // self.bits

    @property
    def outer(self) -> int:
        """Rows of one atom column: MN for K-major, K for MN-major."""
        return self.mn if self.major is Major.K else self.k

    @property
    def column_bytes(self) -> int:
        """Bytes of one atom column (the stride between columns)."""
        return self.outer * self.atom_bytes

    @property
    def nbytes(self) -> int:
        """The tile's size in bytes (`mn * k` elements)."""
        return self.mn * self.k * self.bits // 8

    @property
    def alignment(self) -> int:
        """The alignment the tile's shared-memory address needs for its swizzle mode."""
        return self.swizzle.alignment

    @property
    def lbo(self) -> int:
        """Leading-dimension byte offset (K-major: between core-matrix columns along K, unused
        with a swizzle and then 16; MN-major: between atoms along MN, 128 B K-groups without
        swizzle)."""
        if self.major is Major.K:
            return self.column_bytes if self.swizzle is SwizzleMode.none else 16
        return 128 if self.swizzle is SwizzleMode.none else self.column_bytes

    @property
    def sbo(self) -> int:
        """Stride-dimension byte offset (K-major: between 8-row groups; MN-major: between
        groups of 8 K rows, or between 16-byte MN chunks without swizzle)."""
        if self.major is Major.MN and self.swizzle is SwizzleMode.none:
            return self.column_bytes
        return 8 * self.atom_bytes

    @property
    def transpose(self) -> int:
        """The wgmma imm-trans flag this layout needs (1 for MN-major)."""
        return int(self.major is Major.MN)

    def offset(self, mn: int, k: int) -> int:
        """Byte offset of element (mn, k) before the swizzle (host side; for tests/fills)."""
        mn, k = (check_index(f"SmemLayout.offset: {name}", v, hi)
                 for name, v, hi in (("mn", mn, self.mn), ("k", k, self.k)))
        major, minor = (k, mn) if self.major is Major.K else (mn, k)
        col, inner = divmod(major, self.atom_elems)
        return col * self.column_bytes + minor * self.atom_bytes + inner * self.bits // 8

    def swizzled_offset(self, mn: int, k: int) -> int:
        """Byte offset of element (mn, k) in shared memory, the swizzle applied (16-byte chunk
        index XOR the row index within the atom's repeat), as TMA and wgmma see it."""
        off = self.offset(mn, k)
        if self.swizzle is SwizzleMode.none:
            return off
        span = self.atom_bytes // 16 - 1          # chunk bits: 1, 2 or 3
        return off ^ (((off >> 7) & span) << 4)

    def k_offset(self, kk: int) -> int:
        """Bytes to add to the start address to reach K index `kk` (a multiple of one
        instruction's K): inside a swizzle atom the byte offset along K (the +32 B per k16
        step for 16-bit K-major), across atoms the column stride; MN-major: kk rows."""
        kk = check_index("SmemLayout.k_offset: K index", kk, self.k)
        if (kk * self.bits) % 256:
            raise BuildError(f"SmemLayout.k_offset: K index {kk} is not a multiple of one "
                             f"wgmma's K ({256 // self.bits} elements of {self.bits} bits)")
        if self.major is Major.MN:
            return kk * self.atom_bytes
        col, inner = divmod(kk, self.atom_elems)
        return col * self.column_bytes + inner * self.bits // 8

    # -- the descriptor --------------------------------------------------------------------
    def encode(self, address: int = 0, base_offset: int = 0, *, k_step: int = 0) -> int:
        """The descriptor of this tile at shared address `address` (host side), advanced to
        K index `k_step` (a multiple of one wgmma's K, as `MatrixDescriptor.k_step` takes
        it): the value `descriptor(k, layout, address).k_step(k, k_step)` holds on the
        device, for a descriptor passed as a kernel argument or checked in a test."""
        address = int_like(address)
        # a negative address is refused here: a K offset would carry it into the 14-bit field
        if isinstance(address, bool) or not isinstance(address, int) or address < 0:
            raise OperandError("SmemLayout.encode", "address", "a shared-memory address (an "
                               "int), 0 or more", _given(address))
        if address % self.alignment and base_offset == 0:
            up = -(-address // self.alignment) * self.alignment
            why = (f"the {self.swizzle.value}B swizzle pattern repeats every {self.alignment} "
                   "bytes" if self.swizzle.value else "16-byte core-matrix rows")
            raise BuildError(
                f"SmemLayout.encode: a {self.describe()} tile must start {self.alignment}-byte "
                f"aligned ({why}), got address {address:#x}: place it at {up:#x}, the "
                f"next multiple of {self.alignment} (a shared symbol declared with "
                f"align={self.alignment}, at an offset that is a multiple of it), or, for a tile "
                "that starts inside the pattern on purpose, give base_offset (PTX ISA "
                "§9.7.15.5.1, the matrix base offset)")
        if address + self.nbytes > SMEM_LIMIT:
            raise BuildError(f"SmemLayout: a {self.describe()} tile ({self.nbytes} bytes) at "
                             f"{address:#x} runs past the {SMEM_LIMIT // 1024} KiB a descriptor "
                             "addresses")
        # k_offset stays inside the tile, which ends below SMEM_LIMIT: no carry out of the
        # 14-bit start field (the device path's k_step checks it for an unknown start).
        return encode_descriptor(address + self.k_offset(int_like(k_step)), self.lbo, self.sbo,
                                 self.swizzle, base_offset)

    def constant_bits(self) -> int:
        """The descriptor without its start address: what is folded at build time."""
        return encode_descriptor(0, self.lbo, self.sbo, self.swizzle)

    # -- the TMA side ----------------------------------------------------------------------
    @property
    def tma_box(self) -> tuple[int, int]:
        """The TMA box (inner dimension first, as boxDim) that writes one atom column."""
        if not box_dim_ok(self.outer):
            dim = "mn" if self.major is Major.K else "k"
            raise OperandError("SmemLayout.tma_box", dim, f"at most {MAX_BOX_DIM} rows in an "
                               "atom column (TMA's boxDim limit; load the tile with several "
                               "boxes of fewer rows)", self.outer)
        return (self.atom_elems, self.outer)

    @property
    def tma_swizzle(self) -> str:
        """The swizzle a TMA load must use to write this layout: the `runtime.Swizzle` member name
        (`B128`, `NONE`)."""
        return self.swizzle.tma_name

    def tma_copies(self) -> list[tuple[int, int]]:
        """(shared byte offset, element offset along the major dimension) of each box load
        that fills the tile: one per atom column."""
        major = self.k if self.major is Major.K else self.mn
        return [(j * self.column_bytes, j * self.atom_elems)
                for j in range(major // self.atom_elems)]

    def check_tensormap(self, tmap: Any) -> None:
        """Raise BuildError unless the tensor map (runtime TensorMap or its TiledDesc) writes
        this layout: same element width, swizzle, inner box = one atom, outer box dividing the
        atom column's rows."""
        desc = tensormap_desc("SmemLayout.check_tensormap", tmap)
        problems = []
        sw = getattr(desc.swizzle, "name", str(desc.swizzle))
        if sw != self.tma_swizzle:
            problems.append(f"swizzle {sw} (the layout needs {self.tma_swizzle})")
        bits = desc.data_type.bits
        if bits != self.bits:
            problems.append(f"{bits}-bit elements (the layout has {self.bits}-bit)")
        # What one copy writes: boxDim / elementStrides (a box of 64 rows with stride 2 writes
        # 32), not boxDim. Not `tma_box`: a column taller than 256 rows takes several boxes.
        box = tuple(getattr(desc, "box_elements", desc.box_dim))
        inner, outer = self.atom_elems, self.outer
        if box[0] != inner:
            problems.append(f"boxDim[0]={box[0]} (one {self.atom_bytes}-byte atom is {inner} "
                            "elements)")
        if len(box) < 2 or self.outer % box[1] or any(b != 1 for b in box[2:]):
            problems.append(f"boxDim={list(box)} (the rows must divide {outer}, further "
                            "dimensions be 1)")
        elif self.swizzle is not SwizzleMode.none and box[1] % 8:
            problems.append(f"boxDim[1]={box[1]} (a swizzled box must hold whole 8-row atoms)")
        if problems:
            raise BuildError(f"tensor map and wgmma layout disagree ({self.describe()}): "
                             + "; ".join(problems))

    def describe(self) -> str:
        """A one-line description for messages: `64x64 16-bit K-major, 128B swizzle`."""
        sw = f"{self.swizzle.value}B" if self.swizzle.value else "no"
        return f"{self.mn}x{self.k} {self.bits}-bit {self.major.value}-major, {sw} swizzle"


def tensormap_desc(what: str, tmap: Any) -> Any:
    """The description (a TiledDesc) of a runtime TensorMap, or the TiledDesc itself."""
    desc = getattr(tmap, "desc", tmap)
    if desc is None and tmap is not None:     # None itself is no map at all (below)
        raise BuildError(f"{what}: the tensor map was built from raw bytes and carries no "
                         "description to compare")
    if not all(hasattr(desc, a) for a in ("swizzle", "data_type", "box_dim")):
        raise OperandError(what, "tmap", "a runtime TensorMap or its TiledDesc", _given(tmap))
    return desc


def check_index(what: str, value: Any, hi: int) -> int:
    """An int in [0, hi) (a numpy integer too), for the helpers' index arguments."""
    n = int_like(value)
    if isinstance(n, bool) or not isinstance(n, int) or not 0 <= n < hi:
        raise BuildError(f"{what} must be in [0, {hi}) (an int), got {value!r}"[:300])
    return n


def _symbol_of(addr: Any) -> tuple[Symbol | None, int]:
    if isinstance(addr, Symbol):
        return addr, 0
    if isinstance(addr, Addr) and isinstance(addr.base, Symbol):
        return addr.base, addr.offset
    return None, 0


@attrs.frozen
class MatrixDescriptor:
    """A descriptor of `layout` in a register (`value` a .b64 Reg), or known at build time
    (`value` an int). Pass it to `wgmma_mma_async` as `a` or `b_desc`."""

    layout: SmemLayout
    value: Reg | int

    def __attrs_post_init__(self):
        if not isinstance(self.layout, SmemLayout):
            raise OperandError("MatrixDescriptor", "layout", "an SmemLayout",
                               _given(self.layout))
        value = int_like(self.value)
        if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 1 << 64:
            _, lbo, sbo, mode, _ = decode_descriptor(value)
            want = (self.layout.lbo, self.layout.sbo, self.layout.swizzle)
            # The start address may sit inside an atom (k_step's +32 bytes): only the fields
            # that describe the layout must be the layout's.
            if (lbo, sbo, mode) != want:
                def fields(lbo: int, sbo: int, mode: SwizzleMode) -> str:
                    return f"LBO {lbo}, SBO {sbo}, {mode.value or 'no'}{'B' * bool(mode.value)}"
                raise OperandError("MatrixDescriptor", "value", f"a descriptor of the "
                                   f"{self.layout.describe()} tile ({fields(*want)} swizzle)",
                                   f"{value:#x}: {fields(lbo, sbo, mode)} swizzle")
            object.__setattr__(self, "value", value)
        elif not (isinstance(value, Reg) and value.type.bits == 64
                  and value.type.kind in "bus"):
            raise OperandError("MatrixDescriptor", "value", "a 64-bit integer register or a "
                               "64-bit descriptor known at build time (an int)", _given(value))

    def encode(self) -> int:
        """The 64-bit descriptor value; a `BuildError` when the address is only known at run time
        (then the descriptor is built in registers)."""
        if not isinstance(self.value, int):
            raise BuildError("MatrixDescriptor.encode: the address is only known at run time")
        return self.value

    def k_step(self, k: Any, kk: int) -> MatrixDescriptor:
        """The descriptor of the same tile advanced to K index `kk` (one add, or folded)."""
        delta = self.layout.k_offset(int_like(kk)) >> 4
        if delta == 0:
            return self
        if isinstance(self.value, int):
            # The start address is the low 14 bits (address >> 4): a carry out of them would
            # change the reserved bits and the leading byte offset, not the address.
            if (self.value & 0x3FFF) + delta > 0x3FFF:
                raise BuildError(f"MatrixDescriptor.k_step: the tile's start address "
                                 f"{(self.value & 0x3FFF) << 4:#x} plus the K offset "
                                 f"{delta << 4} bytes runs past the {SMEM_LIMIT // 1024} KiB "
                                 "a descriptor addresses")
            return MatrixDescriptor(self.layout, self.value + delta)
        if id(k) != id(self.value.kernel):   # (not `is`: mypy would narrow k to its type)
            raise OperandError("MatrixDescriptor.k_step", "k", "the kernel the descriptor's "
                               f"register %{self.value.name} belongs to", _given(k))
        return MatrixDescriptor(self.layout, k.add(self.value, delta))


def _tile_fits(layout: SmemLayout, at: Addr, who: str = "wgmma descriptor") -> None:
    """A tile at a symbol plus a constant: in shared memory, aligned for the layout, inside."""
    sym, off = at.base, at.offset
    assert isinstance(sym, Symbol)   # both callers pass a symbol base
    if not sym.space.is_shared:
        raise BuildError(f"{who}: {sym.name} is not in shared memory")
    if (sym.align or 1) < layout.alignment or off % layout.alignment:
        raise BuildError(f"{who}: a {layout.describe()} tile must start "
                         f"{layout.alignment}-byte aligned; {sym.name} is declared "
                         f".align {sym.align} (offset {off})")
    symbol_fit(who, "addr", at, size=layout.nbytes,
               what=f"the {layout.describe()} tile ({layout.nbytes} bytes)")


def descriptor(k, layout: SmemLayout, addr: Any) -> MatrixDescriptor:
    """The descriptor of `layout` at `addr`: a shared symbol (alignment checked against the
    swizzle), an `Addr(symbol, offset)`, a 32/64-bit register holding a shared address, or an
    int (a known shared address; the whole descriptor folds to a constant). A symbol must
    hold the whole tile ([offset, offset + layout.nbytes) inside it): wgmma reads all of it."""
    if not isinstance(layout, SmemLayout):
        raise OperandError("wgmma descriptor", "layout", "an SmemLayout", _given(layout))
    # the kernel left out (descriptor(layout, addr)): refused here by name, not by the first
    # method called on it; by its emit, as this layer sits below the builder's classes
    # (docs/CONTRIBUTING.md, Layers)
    if not callable(getattr(k, "emit", None)):
        raise OperandError("wgmma descriptor", "k", "the Kernel to build into", _given(k))
    check_owned("wgmma descriptor", k, addr=addr)
    known = as_int(addr)          # a numpy integer too
    if known is not None:
        return MatrixDescriptor(layout, layout.encode(known))
    return MatrixDescriptor(layout, address_descriptor(k, layout, addr, layout.constant_bits()))


def address_descriptor(k, layout: SmemLayout, addr: Any, constant: int,
                       who: str = "wgmma descriptor") -> Reg:
    """`constant` (a descriptor without its start address) with the start-address field of
    the run-time address `addr` (a shared symbol, `Addr(symbol, offset)` or a 32/64-bit
    register holding a shared address, checked against the layout) in a 64-bit register.
    The sm_100 descriptor (`tcgen05_desc.smem_descriptor`) has the same field."""
    sym, off = _symbol_of(addr)
    if sym is not None:
        _tile_fits(layout, Addr(sym, off), who)
        reg = k.mov(sym)
        if off:
            reg = k.add(reg, off)
    elif isinstance(addr, Reg) and addr.type.bits in (32, 64) and addr.type.kind in "bus":
        space = known_space(addr)
        if space is not None and not space.is_shared:
            raise OperandError(who, "addr", "a shared-memory address (the "
                               "descriptor encodes an offset in the CTA's shared window)",
                               f"register %{addr.name}, which holds a "
                               f"{space.value or 'generic'} address")
        # a register holding a symbol's address: the tile must fit there too
        known_fit(addr, lambda at: _tile_fits(layout, at, who))
        reg = addr
    else:
        raise BuildError(f"{who}: the address must be a shared symbol, Addr, a "
                         f"32/64-bit register or an int, got {addr!r}")
    t = ScalarType
    # The start-address field is address >> 4: shared addresses are below 2**18, so the shift
    # leaves 14 bits, where the constant fields have zeros; adding them is OR-ing them in,
    # and mad.wide does the add and the widening of a 32-bit address in one instruction.
    if reg.type.bits == 32:
        field = k.shr(reg, 4, type=t.u32)
        return k.mad(field, 1, constant, type=t.u32, mode="wide")
    field = k.shr(reg, 4, type=t.u64)
    return k.or_(field, constant, type=t.b64)


# The safety net under the checks above (errors.fail_closed), as for the Kernel builders.
for _cls, _name in ((SmemLayout, "SmemLayout"), (MatrixDescriptor, "MatrixDescriptor"),
                    (SwizzleMode, "SwizzleMode"), (Major, "Major")):
    fail_closed_methods(_cls, _name)
refuse_assignment(SmemLayout, "the layout's offsets, descriptor fields and TMA box follow from "
                  "its fields together: make another SmemLayout")
refuse_assignment(MatrixDescriptor, "its value was checked against its layout: make another, "
                  "or k_step() for another K index")
encode_descriptor = fail_closed("encode_descriptor", encode_descriptor)
descriptor = fail_closed("wgmma descriptor", descriptor)
address_descriptor = fail_closed("address_descriptor", address_descriptor)
