"""The host-side address model of the helper families (`fuzz.helpers`).

`EXPECT[helper](cfg)` computes the accesses a helper should make from its configuration alone,
with the PTX ISA's layouts restated here (never taken from the helper): the accumulator
fragment and the RS A fragment (§9.7.15.5.1), stmatrix rows, the canonical shared-memory
layouts a matrix descriptor describes, a ring's slots and barriers. `actual` reads the
accesses the built kernel makes: its loads and stores for each of the 128 threads of a
warpgroup (`interp`), its descriptor registers decoded, its ring address registers at each
stage. `problems` says what is wrong with a set of accesses: outside the buffer, misaligned
(the buffer placed at its declared alignment and no more), stores overlapping.

Accesses are grouped by `Key` (buffer, bytes per access, alignment needed, store or read),
each group an array of byte offsets from the buffer's start: one 64x256 fragment store makes
tens of thousands of them.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import attrs
import numpy as np

from . import interp
from .case import Case

GLOBAL_ALIGN = 256          # what cudaMalloc promises a pointer parameter
A_BITS = {"bf16": 16, "f16": 16, "tf32": 32, "e4m3": 8, "s8": 8}   # wgmma input widths


class Key(NamedTuple):
    buffer: str
    width: int              # bytes per access (0: an alignment requirement only)
    align: int = 1
    store: bool = False


Accesses = dict[Key, np.ndarray]
Buffers = dict[str, tuple[int, int]]          # name -> (size, declared alignment)


class Collect:
    """Accesses gathered group by group."""

    def __init__(self) -> None:
        self._parts: dict[Key, list[np.ndarray]] = {}

    def add(self, key: Key, offsets: Any) -> Collect:
        """Add the byte offsets an access group `key` touches; returns the collector."""
        self._parts.setdefault(key, []).append(np.asarray(offsets, dtype=np.int64).ravel())
        return self

    def done(self) -> Accesses:
        """The offsets of each group, sorted."""
        return {k: np.sort(np.concatenate(v)) for k, v in self._parts.items()}


@attrs.frozen
class Probe:
    """How to read a built kernel: the run-time parameter values, the buffer its loads and
    stores go to, the registers holding addresses (name, buffer, bytes from there, alignment
    needed) and the descriptor registers (name, the K index its `k_step` advanced to)."""

    params: dict[str, int] = attrs.field(factory=dict)
    target: str = ""
    regs: list[tuple[str, str, int, int]] = attrs.field(factory=list)
    descs: list[tuple[str, int]] = attrs.field(factory=list)


# -- what is wrong -------------------------------------------------------------------------------
def problems(accs: Accesses, buffers: Buffers) -> list[str]:
    """Accesses outside their buffer, misaligned, or stores that overlap (at most 4 said)."""
    out: list[str] = []
    for key, offs in accs.items():
        size, align = buffers[key.buffer]
        if key.width:
            out += [f"{key.width} bytes at offset {o} of {key.buffer} ({size} bytes)"
                    for o in offs[(offs < 0) | (offs + key.width > size)][:2]]
        bad = offs if key.align > align else offs[offs % key.align != 0]
        out += [f"offset {o} of {key.buffer} (.align {align}) is not {key.align}-byte aligned"
                for o in bad[:2]]
    for buffer in {k.buffer for k in accs}:
        stores = [(offs, k.width) for k, offs in accs.items()
                  if k.buffer == buffer and k.store and k.width]
        if not stores:
            continue
        starts = np.concatenate([o for o, _ in stores])
        widths = np.concatenate([np.full(len(o), w) for o, w in stores])
        order = np.argsort(starts, kind="stable")
        s, w = starts[order], widths[order]
        hit = np.nonzero(s[1:] < s[:-1] + w[:-1])[0]
        if hit.size:
            out.append(f"stores overlap at offsets {s[hit[0]]} and {s[hit[0] + 1]} of {buffer}")
    return out[:4]


def differences(got: Accesses, want: Accesses) -> str | None:
    """None when both make the same accesses, else a few of the differences."""
    for key in sorted(set(got) | set(want)):
        g, w = got.get(key, np.empty(0, np.int64)), want.get(key, np.empty(0, np.int64))
        if not np.array_equal(g, w):
            extra, missing = np.setdiff1d(g, w)[:3].tolist(), np.setdiff1d(w, g)[:3].tolist()
            return (f"{key}: emitted but not expected at offsets {extra}, expected but not "
                    f"emitted at {missing} ({len(g)} emitted, {len(w)} expected)")
    return None


# -- fragments ------------------------------------------------------------------------------------
def _val(v: Any) -> Any:
    """A configuration value: an int, or ("reg", int) for a run-time one."""
    return v[1] if isinstance(v, tuple) else v


def value_bytes(cfg: dict) -> int:
    """The bytes of one stored value for a store configuration: 1 for fp8 packing, 2 for f16 or
    other packing, 4 otherwise."""
    packed = cfg.get("packed")
    if packed:
        return 1 if packed in ("e4m3", "e5m2") else 2
    return 2 if cfg["dtype"] == "f16" else 4


def expected_store(cfg: dict) -> tuple[Accesses, Buffers]:
    """Fragment.store: thread t holds value i of an m64nN accumulator at row 16*(t/32) +
    (t%32)/4 + 8*((i/2)%2), column 8*(i/4) + 2*(t%4) + i%2 (the D fragment); 16- and 8-bit
    values are stored in pairs (i, i+1), a pair only when both are inside the bounds."""
    eb, n = value_bytes(cfg), cfg["n"]
    ld, rows, cols = _val(cfg["ld"]), _val(cfg.get("rows")), _val(cfg.get("cols"))
    pairs = eb < 4
    t = np.arange(128)[:, None]
    i = np.arange(0, n // 2, 2 if pairs else 1)[None, :]
    row = 16 * (t // 32) + (t % 32) // 4 + 8 * ((i // 2) % 2)
    col = 8 * (i // 4) + 2 * (t % 4) + i % 2
    keep = np.ones(row.shape, bool)
    if rows is not None:
        keep &= row < rows
    if cols is not None:
        keep &= col + pairs < cols
    width = eb * (2 if pairs else 1)
    accs = Collect().add(Key("out", width, width, True), ((row * ld + col) * eb)[keep]).done()
    return accs, {"out": ((64 if rows is None else rows) * ld * eb, GLOBAL_ALIGN)}


def expected_store_matrix(cfg: dict) -> tuple[Accesses, Buffers]:
    """store_matrix: the packed 64xN tile, row-major with stride ld, as 16-byte stmatrix rows
    (8 values each)."""
    off, ld = cfg.get("reg_offset") or 0, cfg["ld"]
    r, c = np.arange(64)[:, None], np.arange(0, cfg["n"], 8)[None, :]
    accs = Collect().add(Key("tile", 16, 16, True), off + 2 * (r * ld + c)).done()
    return accs, {"tile": (cfg["size"], cfg["align"])}


def expected_a_load(cfg: dict) -> tuple[Accesses, Buffers]:
    """AFragment.load: register j of thread t holds 32 bits of row 16*(t/32) + (t%32)/4 +
    8*(j%2) of A, K elements from k0 + (j/2)*K/2 + (t%4)*(32/bits) (the RS A fragment)."""
    bits = A_BITS[cfg["dtype"]]
    per, kdim, eb = 32 // bits, 256 // bits, bits // 8
    ld, k0 = _val(cfg["ld"]), _val(cfg["k0"])
    t, j = np.arange(128)[:, None], np.arange(4)[None, :]
    row = 16 * (t // 32) + (t % 32) // 4 + 8 * (j % 2)
    col = k0 + (j // 2) * (kdim // 2) + (t % 4) * per
    accs = Collect().add(Key("a", 4, 4), (row * ld + col) * eb).done()
    return accs, {"a": (64 * ld * eb, GLOBAL_ALIGN)}


# -- descriptors ----------------------------------------------------------------------------------
def geometry(bits: int, mn: int, kdim: int, major: str, atom: int) -> tuple[int, int]:
    """(lbo, sbo) of the canonical layouts (PTX ISA §9.7.15.5.1): K-major, 8-row groups of
    `atom`-byte rows are `sbo` apart; without swizzle the K-adjacent 16-byte core matrices
    are whole MN columns (`lbo`) apart. MN-major: 8-row K groups `sbo` apart, MN atoms `lbo`
    apart (without swizzle the 16-byte MN chunks are whole K columns apart, in `sbo`)."""
    if major == "K":
        return (mn * 16 if atom == 16 else 16), 8 * atom
    if atom == 16:
        return 128, kdim * 16
    return kdim * atom, 8 * atom


def footprint(start: int, lbo: int, sbo: int, atom: int, bits: int, mn: int,
              major: str) -> list[int]:
    """Start offsets of the 16-byte chunks one wgmma reads through a descriptor: mn rows by
    one instruction's K (256 bits of K per row)."""
    if major == "K":
        return [start + (r // 8) * sbo + (r % 8) * atom + (c * lbo if atom == 16 else 16 * c)
                for r in range(mn) for c in range(2)]
    out = []
    for kk in range(256 // bits):
        for m in range(mn * bits // 128):
            if atom == 16:
                out.append(start + m * sbo + (kk // 8) * lbo + (kk % 8) * 16)
            else:
                mb = 16 * m
                out.append(start + (mb // atom) * lbo + (kk // 8) * sbo + (kk % 8) * atom
                           + mb % atom)
    return out


def atom_bytes(swizzle: int) -> int:
    """The bytes of one row of a swizzle atom: the swizzle width, or 16 without swizzling."""
    return swizzle or 16


def k_steps(cfg: dict) -> list[int]:
    """The K offsets a descriptor is advanced to over a tile: every 32 bytes of A elements up to
    `k`."""
    return list(range(0, cfg["k"], 256 // A_BITS[cfg["dtype"]]))


def expected_descriptor(cfg: dict) -> tuple[Accesses, Buffers]:
    """descriptor() and k_step(kk) for every instruction's K of the tile: the tile starts
    aligned to its swizzle pattern's span (8 atoms), each step reads mn rows x 32 bytes."""
    bits, mn, kdim, major = A_BITS[cfg["dtype"]], cfg["mn"], cfg["k"], cfg["major"]
    atom = atom_bytes(cfg["swizzle"])
    lbo, sbo = geometry(bits, mn, kdim, major, atom)
    start0 = cfg["offset"] if cfg["form"] != "symbol" else 0
    acc = Collect().add(Key("tile", 0, 8 * atom if cfg["swizzle"] else 16), [start0])
    for kk in k_steps(cfg):
        if major == "K":
            col, inner = divmod(kk * bits // 8, atom)
            step = col * mn * atom + inner
        else:
            step = kk * atom
        acc.add(Key("tile", 16, 16), footprint(start0 + step, lbo, sbo, atom, bits, mn, major))
    return acc.done(), {"tile": (cfg["size"], cfg["align"])}


SWIZZLE_CODE = {0: 16, 1: 128, 2: 64, 3: 32}       # the descriptor's bits 62-63 -> atom bytes


def decode(acc: Collect, cfg: dict, value: int, base: int, first: bool) -> None:
    """The chunks a descriptor value reads: its start address, LBO, SBO and swizzle decoded
    from the bits (start >> 4 in 0-13, LBO >> 4 in 16-29, SBO >> 4 in 32-45)."""
    start = ((value & 0x3FFF) << 4) - base
    lbo, sbo = ((value >> 16) & 0x3FFF) << 4, ((value >> 32) & 0x3FFF) << 4
    atom = SWIZZLE_CODE[value >> 62 & 3]
    if first:
        acc.add(Key("tile", 0, 8 * atom if atom > 16 else 16), [start])
    acc.add(Key("tile", 16, 16), footprint(start, lbo, sbo, atom, A_BITS[cfg["dtype"]],
                                           cfg["mn"], cfg["major"]))


# -- rings ----------------------------------------------------------------------------------------
def expected_ring(cfg: dict) -> tuple[Accesses, Buffers]:
    """A view over 2*stages+1 steps: slot s*stride of the buffer (stride bytes), full[s] and
    empty[s] (8 bytes, 8-aligned) of the ring's storage, s = step % stages."""
    n, stride = cfg["stages"], cfg["stride"]
    buffers = {"buf": (cfg["size"], 128)}
    if cfg["storage"] is None:
        full, empty, f0, e0 = "ring_full", "ring_empty", 0, 0
        buffers |= {"ring_full": (8 * n, 8), "ring_empty": (8 * n, 8)}
    else:
        size, align, off = cfg["storage"]
        full = empty = "bars"
        f0, e0 = off, off + 8 * n
        buffers["bars"] = (size, align)
    s = np.arange(2 * n + 1) % n
    accs = (Collect().add(Key("buf", stride), s * stride).add(Key(full, 8, 8), f0 + 8 * s)
            .add(Key(empty, 8, 8), e0 + 8 * s).done())
    return accs, buffers


EXPECT = {"store": expected_store, "store_matrix": expected_store_matrix,
          "a_load": expected_a_load, "descriptor": expected_descriptor, "ring": expected_ring}


def strict(name: str, cfg: dict) -> list[str]:
    """Rules a helper may enforce although every access of the configuration is fine: a
    refusal for one of them agrees too (`refused:precondition`)."""
    if name == "store" and _val(cfg["ld"]) < cfg["n"]:
        # issue 28: "refuse ld < N as store_matrix already does" (with cols <= ld the
        # stores stay in their rows, but the tile does not fit the stride)
        return [f"a row stride ld={_val(cfg['ld'])} below the tile's N={cfg['n']}"]
    cols, ld = cfg.get("cols"), cfg["ld"] if name == "store" else None
    if name == "store" and value_bytes(cfg) < 4 and isinstance(ld, int) and ld % 2:
        # an odd stride misaligns the pairs of every odd row: refused whatever `rows` is
        return [f"an odd row stride ld={ld} with values stored in pairs"]
    if name == "store" and value_bytes(cfg) < 4 and isinstance(cols, int) and cols % 2:
        # 16- and 8-bit values are stored in pairs: an odd constant bound would drop the
        # last column's in-bounds value, so the helper refuses it (issue 28: never lost data)
        return [f"an odd column bound cols={cols} with values stored in pairs"]
    stride = cfg["stride"] if name == "ring" else 0
    unit = 128 if stride >= 128 else 16
    if stride >= 16 and stride % unit:
        # slot s starts s x stride in: only as aligned as the stride, where a slot that big
        # is a TMA/bulk buffer (128) or a vector tile (16)
        return [f"a slot stride of {stride} bytes, not a multiple of {unit}"]
    return []


def invalid(name: str, cfg: dict) -> list[str]:
    """Preconditions a configuration breaks besides the bounds of its accesses."""
    if name == "store_matrix" and cfg["packed"] in ("e4m3", "e5m2"):
        return ["stmatrix moves 16-bit values only"]
    if name == "a_load":
        kdim, ld, k0 = 256 // A_BITS[cfg["dtype"]], _val(cfg["ld"]), _val(cfg["k0"])
        if k0 + kdim > ld:
            return [f"A's columns {k0}..{k0 + kdim - 1} run past its row stride ld={ld}"]
    return []


# -- what the kernel does -------------------------------------------------------------------------
def actual(cfg: dict, ptx: str, probe: Probe) -> Accesses:
    """The accesses the emitted kernel makes, relative to the buffers they should be in."""
    m = interp.run(ptx, probe.params)
    base = {name: b.base for name, b in m.buffers.items()}
    base |= {name: interp.GLOBAL_BASE for name in m.params if name not in base}
    acc = Collect()
    for a in m.accesses:
        align = 16 if a.op.startswith("stmatrix") else a.width
        addrs = np.asarray(a.addr[a.mask], dtype=np.int64)
        acc.add(Key(probe.target, a.width, align, a.store), addrs - base[probe.target])
    for reg, buf, width, align in probe.regs:
        v = m.regs.get(reg)
        if v is None:
            raise interp.Unknown(f"register %{reg} is not computed by the model")
        acc.add(Key(buf, width, align), [int(v[0]) - base[buf]])
    for reg, kk in probe.descs:
        v = m.regs.get(reg)
        if v is None:
            raise interp.Unknown(f"descriptor register %{reg} is not computed by the model")
        decode(acc, cfg, int(v[0]), base["tile"], kk == 0)
    return acc.done()


def _name(c: Case) -> str:
    return c.call.removeprefix("helper.")


def judge_refused(c: Case, message: str) -> tuple[str, str]:
    """A refusal agrees when the model finds the configuration out of bounds (or invalid)."""
    cfg = dict(c.kwargs)
    accs, buffers = EXPECT[_name(c)](cfg)
    bad = invalid(_name(c), cfg) + problems(accs, buffers)
    if bad:
        return "refused:out-of-bounds", f"{message} (model: {bad[0]})"
    rule = strict(_name(c), cfg)
    if rule:
        return "refused:precondition", f"{message} (model: {rule[0]})"
    return "refused:in-bounds", (f"the helper refused ({message}) but every access the model "
                                 "finds is inside its buffer and aligned")


def judge_built(c: Case, ptx: str, probe: Probe) -> tuple[str, str]:
    """The verdict on an accepted case whose kernel assembled."""
    cfg = dict(c.kwargs)
    want, buffers = EXPECT[_name(c)](cfg)
    try:
        got = actual(cfg, ptx, probe)
    except interp.Unknown as e:
        return "model", str(e)
    diff = differences(got, want)
    if diff is not None:
        return "model", "the emitted accesses differ from the model's: " + diff
    bad = invalid(_name(c), cfg) + problems(got, buffers)
    if bad:
        return "accepted:out-of-bounds", "the helper built " + "; ".join(bad)
    return "accepted", ""
