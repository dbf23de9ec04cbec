"""The helper families: what a fragment store, a wgmma descriptor or a ring slot addresses.

A helper (`Fragment.store`, `Fragment.store_matrix`, `AFragment.load`, `descriptor` /
`SmemLayout` / `MatrixDescriptor.k_step`, `MbarrierRing` and its views' `slot` and barriers)
emits many instructions whose addresses ptxas does not judge. Each case is a random
configuration (tile type and shape, stride, bounds, the buffer's size, alignment and offset),
built into a kernel by the public helper and judged by the host-side model of `fuzz.model`:
the accesses the configuration should make (from the ISA's layouts) and the accesses the
emitted kernel does make (run for each of the 128 threads of a warpgroup, descriptors
decoded, a ring's view unrolled over more than one wrap) must be the same, and each must lie
inside its buffer, aligned, with no two stores overlapping.

Verdicts (`oracle.check`):

* `accepted`: built, assembles, makes exactly the expected accesses, all of them fine;
* `refused:out-of-bounds`: the helper raised a ptxdsl error on a configuration the model finds
  out of bounds, misaligned or overlapping: a correct refusal; `refused:precondition`: it
  refused one that breaks a rule it may enforce though the accesses are fine (`model.strict`);
* failures: `accepted:out-of-bounds` (built such a configuration without a word),
  `refused:in-bounds` (refused a configuration whose accesses are all fine), `model` (the
  emitted accesses differ from the expected ones, or depend on a value the model does not
  compute), and the oracle's `crash` / `accepted:rejected`.

A run-time value (a stride or bound in a register, `("reg", value)` in a configuration) is
drawn in-bounds only: the helper cannot check it. A case reproduces with
`BUILD[name](Kernel("k"), dict(case.kwargs))`.
"""

from __future__ import annotations

import traceback
from collections.abc import Callable
from typing import Any

from hypothesis import strategies as st

from ..errors import PtxdslError
from ..instructions.wgmma_desc import SmemLayout, descriptor
from ..kernel import Kernel
from ..operands import Addr
from ..pipeline import MbarrierRing
from ..types import ScalarType
from .case import Case, case
from .model import A_BITS, Probe, atom_bytes, k_steps
from .tma import maybe, pick

T = ScalarType
FAMILIES = ("fragment", "descriptor", "ring")


def _extent(k: Kernel, cfg: dict, name: str, probe: Probe) -> Any:
    v = cfg.get(name)
    if isinstance(v, tuple):        # ("reg", value): a run-time value from a parameter
        probe.params[name] = v[1]
        return k.ld_param(k.param(T.u32, name))
    return v


# -- fragments ------------------------------------------------------------------------------------
ACC = {"f32": T.f32, "s32": T.s32, "f16": T.f16}
PACKED = ("bf16", "f16", "e4m3", "e5m2")
NS = (8, 16, 24, 32, 64, 128, 256)


def build_store(k: Kernel, cfg: dict) -> Probe:
    """Build an accumulator fragment's `store` to global memory from configuration `cfg` (dtype, n,
    packing, leading dimension, bounds)."""
    probe = Probe(target="out")
    frag = k.fragment(ACC[cfg["dtype"]], shape=(64, cfg["n"]))
    if cfg.get("packed"):
        frag = frag.to_packed(cfg["packed"])
    ld = _extent(k, cfg, "ld", probe)
    rows, cols = _extent(k, cfg, "rows", probe), _extent(k, cfg, "cols", probe)
    frag.store(k.param_ptr("out"), ld, rows=rows, cols=cols)
    return probe


def build_store_matrix(k: Kernel, cfg: dict) -> Probe:
    """Build a packed fragment's `store_matrix` (stmatrix) into a shared tile from configuration
    `cfg`."""
    frag = k.fragment(T.f32, shape=(64, cfg["n"])).to_packed(cfg["packed"])
    sym = k.shared_array(T.b8, cfg["size"], align=cfg["align"], name="tile")
    dest = sym if not cfg.get("reg_offset") else k.add(k.mov(sym), cfg["reg_offset"])
    frag.store_matrix(dest, cfg["ld"])
    return Probe(target="tile")


def build_a_load(k: Kernel, cfg: dict) -> Probe:
    """Build an A fragment's `load` from global memory from configuration `cfg` (dtype, leading
    dimension, k0)."""
    probe = Probe(target="a")
    ld, k0 = _extent(k, cfg, "ld", probe), _extent(k, cfg, "k0", probe)
    k.a_fragment(cfg["dtype"]).load(k.param_ptr("a"), ld, k0=k0)
    return probe


@st.composite
def fragments(draw):
    """Configurations of wgmma fragments: accumulator stores, packed stmatrix stores and A loads,
    in and out of bounds; the model in `fuzz.model` says which accesses each must make."""
    which = pick(draw, ("store", "store", "store", "store_matrix", "a_load"))
    if which == "a_load":
        return draw(a_loads())
    if which == "store_matrix":
        return draw(store_matrices())
    packed = maybe(draw, PACKED, 0.6)
    dtype = "f32" if packed else pick(draw, ("f32", "f32", "s32", "f16"))
    n = pick(draw, NS)
    if pick(draw, (False,) * 4 + (True,)):     # a run-time stride: in-bounds only
        ld: Any = ("reg", pick(draw, (n, n + 8, 2 * n)))
    else:
        ld = pick(draw, (n, n, n + 8, 2 * n, n - 8, n // 2, n + 1, n - 1, 1)
                  if n > 8 else (n, n + 8, 16, 4, 9, 7))
    rows = maybe(draw, (64, 50, 1, 0, 63, 100, ("reg", 40), ("reg", 64)), 0.5)
    cols = maybe(draw, (n, n - 1, max(n - 7, 0), 1, 0, n + 8, ("reg", n), ("reg", n // 2)),
                 0.5)
    cfg = {"dtype": dtype, "packed": packed, "n": n, "ld": ld, "rows": rows, "cols": cols}
    return case("fragment", "helper.store", (), cfg, None, **cfg)


@st.composite
def store_matrices(draw):
    """Configurations of a packed fragment's `store_matrix`: tile size, leading dimension,
    alignment and offset, in and out of bounds; the model in `fuzz.model` says which accesses
    each must make."""
    packed = pick(draw, ("bf16", "bf16", "f16", "e4m3"))
    n = pick(draw, (16, 32, 64, 128))
    ld = pick(draw, (n, n, n + 8, 2 * n, n - 8, n + 4))
    exact = 2 * (63 * ld + n)
    size = pick(draw, (exact, exact, 2 * 64 * ld, exact - 16, 1024, 16384, exact + 512))
    align = pick(draw, (128, 128, 16, 1024, 8))
    reg_offset = 0
    if pick(draw, (False,) * 4 + (True,)):     # a register: in-bounds only (no extent known)
        reg_offset, size, align = 256, max(size, 256 + exact), max(align, 16)
    cfg = {"packed": packed, "n": n, "ld": ld, "size": max(size, 16), "align": align,
           "reg_offset": reg_offset}
    return case("fragment", "helper.store_matrix", (), cfg, None, **cfg)


@st.composite
def a_loads(draw):
    """Configurations of an A fragment's `load`: element type, leading dimension and k0, in and out
    of bounds; the model in `fuzz.model` says which accesses each must make."""
    dtype = pick(draw, tuple(A_BITS))
    kdim = 256 // A_BITS[dtype]
    # `ld` is an int (a register stride is refused: see the issue-28 report); k0 is a
    # run-time value now and then, in-bounds only
    ld = pick(draw, (kdim, 2 * kdim, 4 * kdim, kdim // 2, kdim + 1, kdim + 4))
    k0: Any = pick(draw, (0, 0, kdim, kdim // 2, 2 * kdim, ("reg", 0)))
    cfg = {"dtype": dtype, "ld": ld, "k0": k0}
    return case("fragment", "helper.a_load", (), cfg, None, **cfg)


# -- wgmma descriptors ----------------------------------------------------------------------------
def build_descriptor(k: Kernel, cfg: dict) -> Probe:
    """Build a matrix descriptor of a shared tile from configuration `cfg` (layout, address form)
    and advance it through every K step; the probe records the descriptor registers."""
    layout = SmemLayout(cfg["dtype"], cfg["mn"], cfg["k"], major=cfg["major"],
                        swizzle=cfg["swizzle"])
    sym = k.shared_array(T.b8, cfg["size"], align=cfg["align"], name="tile")
    off = cfg["offset"]
    addr: Any = {"symbol": sym, "addr": Addr(sym, off),
                 "reg": k.add(k.mov(sym), off) if off else k.mov(sym)}[cfg["form"]]
    d = descriptor(k, layout, addr)
    probe = Probe()
    for kk in k_steps(cfg):
        v = d.k_step(k, kk).value
        probe.descs.append((v.name if not isinstance(v, int) else str(v), kk))
    return probe


@st.composite
def descriptors(draw):
    """Configurations of matrix descriptors: layout, swizzle, tile size and address form, in and
    out of bounds; the model in `fuzz.model` says which accesses each must make."""
    dtype = pick(draw, tuple(A_BITS))
    bits = A_BITS[dtype]
    major = "MN" if bits == 16 and pick(draw, (False, False, True)) else "K"
    swizzle = pick(draw, (0, 32, 64, 128))
    atom_elems = atom_bytes(swizzle) * 8 // bits
    mn = pick(draw, (8, 16, 64, 128) if major == "K" else
              tuple(m for m in (8, 64, 128) if m % atom_elems == 0) or (atom_elems,))
    steps = 256 // bits
    k_unit = max(atom_elems, steps) if major == "K" else steps
    # whole tiles of at most 16 KiB: the buffer (up to twice that) stays static shared memory
    kdim = k_unit * pick(draw, tuple(m for m in (1, 1, 2, 4)
                                     if mn * k_unit * m * bits <= 8 * 16384) or (1,))
    nbytes = mn * kdim * bits // 8
    need = 8 * atom_bytes(swizzle) if swizzle else 16
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


# -- mbarrier rings -------------------------------------------------------------------------------
def build_ring(k: Kernel, cfg: dict) -> Probe:
    """Build an `MbarrierRing` (static or given storage) and walk one of its views past a wrap; the
    probe records the slot and barrier addresses it computes."""
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


@st.composite
def rings(draw):
    """Configurations of an `MbarrierRing` and its views: stages, slot stride, buffer size and
    barrier storage, in and out of bounds; the model in `fuzz.model` says which accesses each
    must make."""
    n = pick(draw, (1, 2, 3, 4, 6))
    stride = pick(draw, (128, 1024, 4096, 48, 3, 1000, 40))   # 1000, 40 misalign the slots
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
    "store": build_store, "store_matrix": build_store_matrix, "a_load": build_a_load,
    "descriptor": build_descriptor, "ring": build_ring}


def build(index: int, c: Case) -> tuple[Kernel, Probe] | tuple[str, str]:
    """(kernel, probe), or (verdict, detail) of a refusal ('refused') or a crash."""
    k = Kernel(f"fz{index}")
    try:
        probe = BUILD[c.call.removeprefix("helper.")](k, dict(c.kwargs))
    except PtxdslError as e:
        return "refused", e.message
    except Exception as e:  # noqa: BLE001 - any other exception is a bug
        return "crash", traceback.format_exception_only(type(e), e)[-1].strip()
    k.ret()
    return k, probe
