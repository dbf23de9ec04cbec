"""The helper families: what a fragment store, a wgmma descriptor or a ring slot addresses.

A helper (`Fragment.store`, `Fragment.store_matrix`, `descriptor` / `SmemLayout` /
`MatrixDescriptor.k_step`, `MbarrierRing` and its views' `slot` and barriers) emits many
instructions whose addresses ptxas does not judge. Each case is a random configuration (tile
type and shape, stride, bounds, the buffer's size, alignment and offset), built into a kernel by
the public helper, and judged by a host-side model:

* `expected(case)`: the accesses the helper should make, from the configuration alone, with the
  PTX ISA's layouts (the accumulator fragment of §9.7.15.5, stmatrix rows, the canonical
  shared-memory layouts of the matrix descriptor), written here and not taken from the helper;
* the accesses it does make: the emitted kernel run for each of the 128 threads of a
  warpgroup (`interp`), its stores recorded, its descriptors decoded, its ring addresses read
  at every stage (the view's loop unrolled over more than one wrap of the ring).

Every access must lie inside its buffer, be aligned to its width (a swizzled tile to its
pattern's span), and no two stores may overlap (rows that overwrite each other). The oracle
(`oracle.check`) gives these cases the verdicts:

* `accepted`: built, assembles, makes exactly the expected accesses, all of them inside;
* `refused:out-of-bounds`: the helper raised a ptxdsl error and the model finds an access of
  the configuration outside its buffer, misaligned or overlapping: a correct refusal;
* failures: `accepted:out-of-bounds` (built an access outside its buffer, misaligned or
  overlapping), `refused:in-bounds` (refused a configuration whose accesses are all fine),
  `model` (the emitted accesses differ from the expected ones, or depend on a value the model
  does not compute), and the oracle's `crash` / `accepted:rejected`.
"""

from __future__ import annotations

import traceback
from collections.abc import Callable
from typing import Any, NamedTuple

import attrs
from hypothesis import strategies as st

from ..errors import PtxdslError
from ..instructions.wgmma_desc import SmemLayout, descriptor
from ..kernel import Kernel
from ..operands import Addr
from ..pipeline import MbarrierRing
from ..types import ScalarType
from . import interp
from .case import Case, case
from .tma import maybe, pick

T = ScalarType
FAMILIES = ("fragment", "descriptor", "ring")
GLOBAL_ALIGN = 256          # what cudaMalloc promises a pointer parameter


class Acc(NamedTuple):
    """One access relative to its buffer: `offset`, `width` bytes, needing `align` (a tuple:
    a model compares tens of thousands of them per case)."""

    buffer: str
    offset: int
    width: int
    align: int = 1
    store: bool = True


@attrs.frozen
class Probe:
    """How to read a built kernel: the run-time parameter values, the buffer its stores go to,
    the registers holding addresses (name, buffer, bytes from there, alignment needed) and
    the descriptor registers (name, the K index its `k_step` advanced to)."""

    params: dict[str, int] = attrs.field(factory=dict)
    store_target: str = ""
    regs: list[tuple[str, str, int, int]] = attrs.field(factory=list)
    descs: list[tuple[str, int]] = attrs.field(factory=list)


# -- the model: what is wrong with a set of accesses ----------------------------------------
def problems(accs: list[Acc], buffers: dict[str, tuple[int, int]]) -> list[str]:
    """Why `accs` are not fine: outside their buffer (name -> (size, align)), misaligned (the
    buffer placed at its declared alignment and no more), or stores that overlap."""
    out: list[str] = []
    for a in accs:
        size, align = buffers[a.buffer]
        if a.width and (a.offset < 0 or a.offset + a.width > size):
            why = f"{a.width} bytes at offset {a.offset} of {a.buffer} ({size} bytes)"
        elif a.offset % a.align or a.align > align:
            why = f"offset {a.offset} of {a.buffer} (.align {align}) is not " \
                f"{a.align}-byte aligned"
        else:
            continue
        if why not in out:
            out.append(why)
        if len(out) > 3:
            break
    stores = sorted((a.buffer, a.offset, a.width) for a in accs if a.store and a.width)
    for (b0, o0, w0), (b1, o1, _w1) in zip(stores, stores[1:], strict=False):
        if b0 == b1 and o1 < o0 + w0:
            out.append(f"stores overlap at offsets {o0} and {o1} of {b0}")
            break
    return out


# -- fragment stores ---------------------------------------------------------------------------
ACC = {"f32": T.f32, "s32": T.s32, "f16": T.f16}
PACKED = ("bf16", "f16", "e4m3", "e5m2")
NS = (8, 16, 24, 32, 64, 128, 256)


def _value_bytes(cfg: dict) -> int:
    packed = cfg.get("packed")
    if packed:
        return 1 if packed in ("e4m3", "e5m2") else 2
    return 2 if cfg["dtype"] == "f16" else 4


def fragment_values(n: int, thread: int) -> list[tuple[int, int]]:
    """(row, col) of the values thread `thread` holds in an m64nN accumulator, in register
    order (PTX ISA §9.7.15.5.1, the D fragment), restated from the ISA's figure."""
    w, lane = divmod(thread, 32)
    return [(16 * w + lane // 4 + 8 * ((i // 2) % 2), 8 * (i // 4) + 2 * (lane % 4) + i % 2)
            for i in range(n // 2)]


def _extent(k: Kernel, cfg: dict, name: str, probe: Probe) -> Any:
    v = cfg.get(name)
    if isinstance(v, tuple):        # ("reg", value): a run-time value from a parameter
        probe.params[name] = v[1]
        return k.ld_param(k.param(T.u32, name))
    return v


def _val(v: Any) -> Any:
    return v[1] if isinstance(v, tuple) else v


def build_store(k: Kernel, cfg: dict) -> Probe:
    probe = Probe(store_target="out")
    frag = k.fragment(ACC[cfg["dtype"]], shape=(64, cfg["n"]))
    if cfg.get("packed"):
        frag = frag.to_packed(cfg["packed"])
    ld = _extent(k, cfg, "ld", probe)
    rows, cols = _extent(k, cfg, "rows", probe), _extent(k, cfg, "cols", probe)
    frag.store(k.param_ptr("out"), ld, rows=rows, cols=cols)
    return probe


def expected_store(cfg: dict) -> tuple[list[Acc], dict]:
    eb = _value_bytes(cfg)
    ld, rows, cols = _val(cfg["ld"]), _val(cfg.get("rows")), _val(cfg.get("cols"))
    pairs = eb < 4
    accs = []
    for t in range(128):
        vals = fragment_values(cfg["n"], t)
        for r, c in (vals[::2] if pairs else vals):
            last = c + (1 if pairs else 0)     # a pair is stored whole or not at all
            if (rows is None or r < rows) and (cols is None or last < cols):
                w = eb * (2 if pairs else 1)
                accs.append(Acc("out", (r * ld + c) * eb, w, w))
    size = (64 if rows is None else rows) * ld * eb
    return accs, {"out": (size, GLOBAL_ALIGN)}


def build_store_matrix(k: Kernel, cfg: dict) -> Probe:
    frag = k.fragment(T.f32, shape=(64, cfg["n"])).to_packed(cfg["packed"])
    sym = k.shared_array(T.b8, cfg["size"], align=cfg["align"], name="tile")
    dest = sym if not cfg.get("reg_offset") else k.add(k.mov(sym), cfg["reg_offset"])
    frag.store_matrix(dest, cfg["ld"])
    return Probe(store_target="tile")


def expected_store_matrix(cfg: dict) -> tuple[list[Acc], dict]:
    off, ld = cfg.get("reg_offset") or 0, cfg["ld"]
    buffers = {"tile": (cfg["size"], cfg["align"])}
    return [Acc("tile", off + 2 * (r * ld + c), 16, 16) for r in range(64)
            for c in range(0, cfg["n"], 8)], buffers


@st.composite
def fragments(draw):
    if draw(st.integers(0, 2)) == 0:
        return draw(store_matrices())
    packed = maybe(draw, PACKED, 0.6)
    dtype = "f32" if packed else pick(draw, ("f32", "f32", "s32", "f16"))
    n = pick(draw, NS)
    pairs = packed is not None or dtype == "f16"
    if draw(st.integers(0, 4)) == 0:      # a run-time stride: the helper cannot check it
        ld: Any = ("reg", pick(draw, (n, n + 8, 2 * n)))
    else:
        ld = pick(draw, (n, n, n + 8, 2 * n, n - 8, n // 2, n + 1, n - 1, 1)
                  if n > 8 else (n, n + 8, 16, 4, 9, 7))
    rows = maybe(draw, (64, 50, 1, 0, 63, 100, ("reg", 40), ("reg", 64)), 0.5)
    cols = maybe(draw, (n, n - 1, max(n - 7, 0), 1, 0, n + 8, ("reg", n), ("reg", n // 2)),
                 0.5)
    cfg = {"dtype": dtype, "packed": packed, "n": n, "ld": ld, "rows": rows, "cols": cols}
    return case("fragment", "helper.store", (), cfg, None, pairs=pairs, **cfg)


@st.composite
def store_matrices(draw):
    packed = pick(draw, ("bf16", "bf16", "f16", "e4m3"))
    n = pick(draw, (16, 32, 64, 128))
    ld = pick(draw, (n, n, n + 8, 2 * n, n - 8, n + 4))
    exact = 2 * (63 * ld + n)
    size = pick(draw, (exact, exact, 2 * 64 * ld, exact - 16, 1024, 16384, exact + 512))
    align = pick(draw, (128, 128, 16, 1024, 8))
    reg_offset = 0
    if draw(st.integers(0, 4)) == 0:     # a register: in-bounds only (no extent to check)
        reg_offset, size, align = 256, max(size, 256 + exact), max(align, 16)
    cfg = {"packed": packed, "n": n, "ld": ld, "size": max(size, 16), "align": align,
           "reg_offset": reg_offset}
    return case("fragment", "helper.store_matrix", (), cfg, None, **cfg)


# -- wgmma descriptors -------------------------------------------------------------------------
DTYPES = {"bf16": 16, "f16": 16, "tf32": 32, "e4m3": 8, "s8": 8}
SWIZZLES = (0, 32, 64, 128)


def _geometry(bits: int, mn: int, kdim: int, major: str, atom: int) -> tuple[int, int]:
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
    out = []
    if major == "K":
        for r in range(mn):
            row = start + (r // 8) * sbo + (r % 8) * atom
            out += [row + (c * lbo if atom == 16 else 16 * c) for c in range(2)]
        return out
    for kk in range(256 // bits):
        for m in range(mn * bits // 128):
            mb = 16 * m
            if atom == 16:
                out.append(start + m * sbo + (kk // 8) * lbo + (kk % 8) * 16)
            else:
                out.append(start + (mb // atom) * lbo + (kk // 8) * sbo + (kk % 8) * atom
                           + mb % atom)
    return out


def _k_steps(cfg: dict) -> list[int]:
    return list(range(0, cfg["k"], 256 // DTYPES[cfg["dtype"]]))


def build_descriptor(k: Kernel, cfg: dict) -> Probe:
    layout = SmemLayout(cfg["dtype"], cfg["mn"], cfg["k"], major=cfg["major"],
                        swizzle=cfg["swizzle"])
    sym = k.shared_array(T.b8, cfg["size"], align=cfg["align"], name="tile")
    off = cfg["offset"]
    addr: Any = {"symbol": sym, "addr": Addr(sym, off),
                 "reg": k.add(k.mov(sym), off) if off else k.mov(sym)}[cfg["form"]]
    d = descriptor(k, layout, addr)
    probe = Probe()
    for kk in _k_steps(cfg):
        v = d.k_step(k, kk).value
        probe.descs.append((v.name if not isinstance(v, int) else str(v), kk))
    return probe


def _atom(swizzle: int) -> int:
    return swizzle or 16


def expected_descriptor(cfg: dict) -> tuple[list[Acc], dict]:
    bits, mn, kdim, major = DTYPES[cfg["dtype"]], cfg["mn"], cfg["k"], cfg["major"]
    atom = _atom(cfg["swizzle"])
    lbo, sbo = _geometry(bits, mn, kdim, major, atom)
    start0 = cfg["offset"] if cfg["form"] != "symbol" else 0
    accs = [Acc("tile", start0, 0, 8 * atom if cfg["swizzle"] else 16, store=False)]
    for kk in _k_steps(cfg):
        if major == "K":
            col, inner = divmod(kk * bits // 8, atom)
            step = col * mn * atom + inner
        else:
            step = kk * atom
        accs += [Acc("tile", c, 16, 16, store=False)
                 for c in footprint(start0 + step, lbo, sbo, atom, bits, mn, major)]
    return accs, {"tile": (cfg["size"], cfg["align"])}


def decoded_descriptor(cfg: dict, value: int, base: int) -> list[Acc]:
    """The chunks a descriptor value reads (its start, LBO, SBO and swizzle decoded)."""
    start = ((value & 0x3FFF) << 4) - base
    lbo, sbo = ((value >> 16) & 0x3FFF) << 4, ((value >> 32) & 0x3FFF) << 4
    atom = {0: 16, 1: 128, 2: 64, 3: 32}[value >> 62 & 3]
    return [Acc("tile", c, 16, 16, store=False)
            for c in footprint(start, lbo, sbo, atom, DTYPES[cfg["dtype"]], cfg["mn"],
                               cfg["major"])]


@st.composite
def descriptors(draw):
    dtype = pick(draw, tuple(DTYPES))
    bits = DTYPES[dtype]
    major = "MN" if bits == 16 and draw(st.integers(0, 2)) == 0 else "K"
    swizzle = pick(draw, SWIZZLES)
    atom_elems = _atom(swizzle) * 8 // bits
    mn = pick(draw, (8, 16, 64, 128) if major == "K" else
              tuple(m for m in (8, 64, 128) if m % atom_elems == 0) or (atom_elems,))
    steps = 256 // bits
    k_unit = max(atom_elems, steps) if major == "K" else steps
    # whole tiles of at most 16 KiB: the buffer (up to twice that) stays static shared memory
    kdim = k_unit * pick(draw, tuple(m for m in (1, 1, 2, 4)
                                     if mn * k_unit * m * bits <= 8 * 16384) or (1,))
    nbytes = mn * kdim * bits // 8
    need = 8 * _atom(swizzle) if swizzle else 16
    form = pick(draw, ("symbol", "addr", "addr", "reg"))
    offset = 0 if form == "symbol" else pick(draw, (0, need, 2 * need, nbytes))
    size = pick(draw, tuple(s for s in (nbytes, nbytes + offset, nbytes + offset,
                                        nbytes + offset - 16, nbytes // 2,
                                        2 * (nbytes + offset)) if s <= 40960))
    align = pick(draw, (need, need, 1024, max(need // 2, 8)))
    if form == "reg":                   # a register: no extent or alignment to check
        size, align = max(size, nbytes + offset), max(align, need)
    cfg = {"dtype": dtype, "mn": mn, "k": kdim, "major": major, "swizzle": swizzle,
           "form": form, "offset": offset, "size": max(size, 16), "align": align}
    return case("descriptor", "helper.descriptor", (), cfg, None, **cfg)


# -- mbarrier rings -----------------------------------------------------------------------------
def build_ring(k: Kernel, cfg: dict) -> Probe:
    n = cfg["stages"]
    storage: Any = None
    if cfg["storage"] is not None:
        size, align, off = cfg["storage"]
        sym = k.shared_array(T.b8, size, align=align, name="bars")
        storage = Addr(sym, off) if off else sym
    ring = MbarrierRing(k, n, storage=storage)
    buf = k.shared_array(T.b8, cfg["size"], align=128, name="buf")
    view = ring.producer() if cfg["side"] == "producer" else ring.consumer()
    probe = Probe()
    full, empty = ("ring_full", "ring_empty") if storage is None else ("bars", "bars")
    for _ in range(2 * n + 1):           # past one wrap of the ring
        probe.regs.append((view.slot(buf, cfg["stride"]).name, "buf", cfg["stride"], 1))
        probe.regs.append((view.full_barrier().name, full, 8, 8))
        probe.regs.append((view.empty_barrier().name, empty, 8, 8))
        view.advance()
    return probe


def expected_ring(cfg: dict) -> tuple[list[Acc], dict]:
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
    accs = []
    for i in range(2 * n + 1):
        s = i % n
        accs += [Acc("buf", s * stride, stride, 1, store=False),
                 Acc(full, f0 + 8 * s, 8, 8, store=False),
                 Acc(empty, e0 + 8 * s, 8, 8, store=False)]
    return accs, buffers


@st.composite
def rings(draw):
    n = pick(draw, (1, 2, 3, 4, 6))
    stride = pick(draw, (128, 1024, 4096, 48, 3))
    size = pick(draw, tuple(s for s in (n * stride, n * stride, 2 * n * stride, n * stride - 1,
                                        stride, 1024) if s <= 32768))
    storage = None
    if draw(st.booleans()):
        off = pick(draw, (0, 0, 8, 16, 4))
        ssize = pick(draw, (16 * n + off, 16 * n + off, 1024, 16 * n + off - 8))
        storage = (max(ssize, 8), pick(draw, (8, 16, 128, 4)), off)
    cfg = {"stages": n, "stride": stride, "size": max(size, 1), "storage": storage,
           "side": pick(draw, ("producer", "consumer"))}
    return case("ring", "helper.ring", (), cfg, None, **cfg)


STRATEGIES = {"fragment": fragments(), "descriptor": descriptors(), "ring": rings()}
BUILD: dict[str, Callable[[Kernel, dict], Probe]] = {
    "store": build_store, "store_matrix": build_store_matrix,
    "descriptor": build_descriptor, "ring": build_ring}
EXPECT: dict[str, Callable[[dict], tuple[list[Acc], dict]]] = {
    "store": expected_store, "store_matrix": expected_store_matrix,
    "descriptor": expected_descriptor, "ring": expected_ring}


# -- judging -------------------------------------------------------------------------------------
def _name(c: Case) -> str:
    return c.call.removeprefix("helper.")


def build(index: int, c: Case) -> tuple[Kernel, Probe] | tuple[str, str]:
    """(kernel, probe), or (verdict, detail) of a refusal ('refused') or a crash."""
    k = Kernel(f"fz{index}")
    try:
        probe = BUILD[_name(c)](k, dict(c.kwargs))
    except PtxdslError as e:
        return "refused", e.message
    except Exception as e:  # noqa: BLE001 - any other exception is a bug
        return "crash", traceback.format_exception_only(type(e), e)[-1].strip()
    k.ret()
    return k, probe


def invalid(c: Case) -> list[str]:
    """Preconditions a configuration breaks besides its addresses."""
    cfg = dict(c.kwargs)
    if _name(c) == "store_matrix" and cfg["packed"] in ("e4m3", "e5m2"):
        return ["stmatrix moves 16-bit values only"]
    return []


def judge_refused(c: Case, message: str) -> tuple[str, str]:
    accs, buffers = EXPECT[_name(c)](dict(c.kwargs))
    bad = invalid(c) + problems(accs, buffers)
    if bad:
        return "refused:out-of-bounds", f"{message} (model: {bad[0]})"
    return "refused:in-bounds", (f"the helper refused ({message}) but every access the model "
                                 "finds is inside its buffer and aligned")


def actual(c: Case, ptx: str, probe: Probe) -> list[Acc]:
    """The accesses the emitted kernel makes, relative to the buffers they should be in."""
    m = interp.run(ptx, probe.params)
    base = {name: b.base for name, b in m.buffers.items()} | {"out": interp.GLOBAL_BASE}
    accs = []
    target = probe.store_target
    for a in m.accesses:
        for t in range(interp.THREADS):
            if a.mask[t]:
                accs.append(Acc(target, int(a.addr[t]) - base[target], a.width,
                                16 if a.op.startswith("stmatrix") else a.width))
    for reg, buf, width, align in probe.regs:
        v = m.regs.get(reg)
        if v is None:
            raise interp.Unknown(f"register %{reg} is not computed by the model")
        accs.append(Acc(buf, int(v[0]) - base[buf], width, align, store=False))
    cfg = dict(c.kwargs)
    for reg, kk in probe.descs:
        v = m.regs.get(reg)
        if v is None:
            raise interp.Unknown(f"descriptor register %{reg} is not computed by the model")
        value = int(v[0])
        start = ((value & 0x3FFF) << 4) - base["tile"]
        if kk == 0:
            swz = value >> 62 & 3
            accs.append(Acc("tile", start, 0, {0: 16, 1: 1024, 2: 512, 3: 256}[swz],
                            store=False))
        accs += decoded_descriptor(cfg, value, base["tile"])
    return accs


def judge_built(c: Case, ptx: str, probe: Probe) -> tuple[str, str]:
    """The verdict on an accepted case whose kernel assembled."""
    want, buffers = EXPECT[_name(c)](dict(c.kwargs))
    try:
        got = actual(c, ptx, probe)
    except interp.Unknown as e:
        return "model", str(e)
    if sorted(got) != sorted(want):
        extra = sorted(set(got) - set(want))[:3]
        missing = sorted(set(want) - set(got))[:3]
        return "model", (f"the emitted accesses differ from the model's: emitted but not "
                         f"expected {extra}, expected but not emitted {missing}")
    bad = invalid(c) + problems(got, buffers)
    if bad:
        return "accepted:out-of-bounds", "the helper built " + "; ".join(bad)
    return "accepted", ""
