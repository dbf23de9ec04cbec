"""cp.async.bulk.tensor, cp.reduce.async.bulk.tensor, cp.async.bulk.prefetch.tensor.

Goldens (one per group of related forms, each at its inferred minimum version/target), the
inference and pin-below tests for every form, an exhaustive qualifier sweep assembled with
nvJitLink, and one test per refusal rule (with ptxas shown to agree where it has an opinion).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable

import attrs
import pytest

from ptxdsl import Addr, BuildError, Kernel, Module, OperandError, VersionError, t
from ptxdsl.instructions.bulk import BLACKWELL
from ptxdsl.instructions.bulk_tensor import (
    FORMS,
    LOAD_MODES,
    STORE_MODES,
    CpAsyncBulkPrefetchTensor,
    CpAsyncBulkTensor,
    CpReduceAsyncBulkTensor,
    TensorMode,
    cp_async_bulk_prefetch_tensor,
    cp_async_bulk_tensor,
    cp_reduce_async_bulk_tensor,
)
from ptxdsl.instructions.cache_policy import createpolicy_fractional
from ptxdsl.testing import assemble_declared
from ptxdsl.toolchain import assemble
from ptxdsl.types import Requires
from tests.tma_cases import FormChecks

OPS = ("add", "min", "max", "inc", "dec", "and", "or", "xor")


class Env:
    """A kernel with a by-value tensor map, TMA-aligned shared buffers and coordinate registers
    read from parameters. 16-bit values and the cache policy are made on first use."""

    def __init__(self, name: str = "k"):
        k = self.k = Kernel(name)
        self.tm = k.param_tensormap("tmap")
        self.tmap = k.tensormap_addr(self.tm)
        self.c = [k.ld_param(k.param(t.s32, f"c{i}")) for i in range(5)]
        self.smem = k.shared_array(t.b8, 8192, align=1024, name="smem")
        self.bar = k.shared_array(t.b64, 1, align=8, name="bar")
        self._h: list = []
        self._policy = None

    def coords(self, n: int) -> tuple:
        return tuple(self.c[:n])

    def h(self, i: int):
        """The i-th 16-bit register (ctaMask, im2col offsets), from a .u16 parameter."""
        while len(self._h) <= i:
            self._h.append(self.k.ld_param(self.k.param(t.u16, f"h{len(self._h)}")))
        return self._h[i]

    @property
    def policy(self):
        if self._policy is None:
            self._policy = createpolicy_fractional(self.k, "evict_last", None, 1.0)
        return self._policy


@attrs.frozen
class Case:
    id: str
    build: Callable[[Env], object]
    version: str
    target: str


def load(dst, n, mode="tile", **kw):
    def build(e: Env):
        extra = dict(kw)
        if extra.pop("hint", False):
            extra["cache_policy"] = e.policy
        if extra.pop("mc", False):
            extra["cta_mask"] = e.h(7)
        if mode in ("im2col", "im2col::w", "im2col::w::128"):
            extra["im2col"] = tuple(e.h(i) for i in range(n - 2 if mode == "im2col" else 2))
        ncoords = 5 if mode == "tile::gather4" else n
        return cp_async_bulk_tensor(e.k, dst, "global", e.smem, e.tmap, e.coords(ncoords),
                                    e.bar, mode=mode, **extra)
    return build


def store(n, mode="tile", hint=False):
    def build(e: Env):
        ncoords = 5 if mode == "tile::scatter4" else n
        return cp_async_bulk_tensor(e.k, "global", "shared::cta", e.tmap, e.coords(ncoords),
                                    e.smem, mode=mode,
                                    cache_policy=e.policy if hint else None)
    return build


def reduce(op, n, mode="tile", hint=False):
    def build(e: Env):
        ncoords = 5 if mode == "tile::scatter4" else n
        return cp_reduce_async_bulk_tensor(e.k, op, e.tmap, e.coords(ncoords), e.smem,
                                           mode=mode, cache_policy=e.policy if hint else None)
    return build


def prefetch(n, mode="tile", hint=False):
    def build(e: Env):
        im2col = None
        if mode in ("im2col", "im2col::w", "im2col::w::128"):
            im2col = tuple(e.h(i) for i in range(n - 2 if mode == "im2col" else 2))
        ncoords = 5 if mode == "tile::gather4" else n
        return cp_async_bulk_prefetch_tensor(e.k, "global", e.tmap, e.coords(ncoords),
                                             e.policy if hint else None, mode=mode,
                                             im2col=im2col)
    return build


def implied(n: int, store: bool = False):
    """A tile load (or store) spelled as CUTLASS and Triton write it, `.tile` left implied."""
    def build(e: Env):
        spaces = ("global", "shared::cta") if store else ("shared::cluster", "global")
        return e.k.emit(CpAsyncBulkTensor(n, *spaces, e.smem, e.tmap, e.coords(n),
                                          None if store else e.bar, mode_implied=True))
    return build


CL, CTA = "shared::cluster", "shared::cta"
GROUPS: dict[str, list[Case]] = {
    "bulk/tensor_load_cluster": [
        *(Case(f"tile-{n}d", load(CL, n), "8.0", "sm_90") for n in range(1, 6)),
        *(Case(f"im2col-{n}d", load(CL, n, "im2col"), "8.0", "sm_90") for n in range(3, 6)),
        Case("tile-2d-multicast", load(CL, 2, mc=True), "8.0", "sm_90"),
        Case("tile-2d-cache_hint", load(CL, 2, hint=True), "8.0", "sm_90"),
        Case("tile-2d-multicast-cache_hint", load(CL, 2, mc=True, hint=True), "8.0", "sm_90"),
        Case("im2col-5d-multicast-cache_hint", load(CL, 5, "im2col", mc=True, hint=True),
             "8.0", "sm_90"),
    ],
    "bulk/tensor_load_cta": [
        *(Case(f"cta-tile-{n}d", load(CTA, n), "8.6", "sm_90") for n in range(1, 6)),
        *(Case(f"cta-im2col-{n}d", load(CTA, n, "im2col"), "8.6", "sm_90") for n in range(3, 6)),
        Case("cta-tile-3d-cache_hint", load(CTA, 3, hint=True), "8.6", "sm_90"),
    ],
    "bulk/tensor_mode_implied": [
        *(Case(f"load-{n}d-implied", implied(n), "8.0", "sm_90") for n in (1, 2, 5)),
        Case("store-2d-implied", implied(2, store=True), "8.0", "sm_90"),
    ],
    "bulk/tensor_store": [
        *(Case(f"store-tile-{n}d", store(n), "8.0", "sm_90") for n in range(1, 6)),
        *(Case(f"store-im2col_no_offs-{n}d", store(n, "im2col_no_offs"), "8.0", "sm_90")
          for n in range(3, 6)),
        Case("store-tile-2d-cache_hint", store(2, hint=True), "8.0", "sm_90"),
    ],
    "bulk/tensor_reduce": [
        *(Case(f"reduce-{op}-2d", reduce(op, 2), "8.0", "sm_90") for op in OPS),
        *(Case(f"reduce-add-{n}d", reduce("add", n), "8.0", "sm_90") for n in (1, 3, 4, 5)),
        *(Case(f"reduce-max-im2col_no_offs-{n}d", reduce("max", n, "im2col_no_offs"), "8.0",
               "sm_90") for n in range(3, 6)),
        Case("reduce-or-3d-cache_hint", reduce("or", 3, hint=True), "8.0", "sm_90"),
    ],
    "bulk/tensor_prefetch": [
        *(Case(f"prefetch-tile-{n}d", prefetch(n), "8.0", "sm_90") for n in range(1, 6)),
        *(Case(f"prefetch-im2col-{n}d", prefetch(n, "im2col"), "8.0", "sm_90")
          for n in range(3, 6)),
        Case("prefetch-tile-2d-cache_hint", prefetch(2, hint=True), "8.0", "sm_90"),
        Case("prefetch-im2col-4d-cache_hint", prefetch(4, "im2col", hint=True), "8.0", "sm_90"),
    ],
    "bulk/tensor_sm100": [   # portable Blackwell: into the executing CTA only
        Case("cta-gather4", load(CTA, 2, "tile::gather4"), "8.6", "sm_100"),
        *(Case(f"cta-im2col_w-{n}d", load(CTA, n, "im2col::w"), "8.6", "sm_100")
          for n in range(3, 6)),
    ],
    "bulk/tensor_sm100a": [
        Case("cluster-gather4", load(CL, 2, "tile::gather4"), "8.6", "sm_100a"),
        Case("cluster-gather4-multicast-cache_hint",
             load(CL, 2, "tile::gather4", mc=True, hint=True), "8.6", "sm_100a"),
        *(Case(f"cluster-im2col_w-{n}d", load(CL, n, "im2col::w"), "8.6", "sm_100a")
          for n in range(3, 6)),
        *(Case(f"{d[8:]}-im2col_w_128-{n}d", load(d, n, "im2col::w::128"), "8.6", "sm_100a")
          for d in (CTA, CL) for n in (3, 5)),
        *(Case(f"{d[8:]}-tile-2d-cta_group_{g}", load(d, 2, cta_group=g), "8.6", "sm_100a")
          for d in (CTA, CL) for g in (1, 2)),
        Case("cluster-im2col-4d-multicast-cta_group_2-cache_hint",
             load(CL, 4, "im2col", mc=True, hint=True, cta_group=2), "8.6", "sm_100a"),
        Case("store-scatter4", store(2, "tile::scatter4"), "8.6", "sm_100a"),
        Case("store-scatter4-cache_hint", store(2, "tile::scatter4", hint=True), "8.6",
             "sm_100a"),
        Case("reduce-add-scatter4", reduce("add", 2, "tile::scatter4"), "8.6", "sm_100a"),
        Case("prefetch-gather4", prefetch(2, "tile::gather4"), "8.6", "sm_100a"),
        *(Case(f"prefetch-{m.replace('::', '_')}-3d", prefetch(3, m), "8.6", "sm_100a")
          for m in ("im2col::w", "im2col::w::128")),
    ],
}
CASES = [c for cs in GROUPS.values() for c in cs]


def build_group(cases: list[Case], name: str = "k", **pins) -> Module:
    e = Env(name)
    for c in cases:
        c.build(e)
    return Module([e.k], **pins)


class TestForms(FormChecks):
    GROUPS = GROUPS

    def build(self, cases, **pins) -> Module:
        return build_group(cases, **pins)


def test_family_target_accepts_blackwell_forms():
    m = build_group(GROUPS["bulk/tensor_sm100a"])
    fam = Module(m.kernels, version="8.8", target="sm_100f")
    assert assemble(fam.emit(), "sm_100f")[:4] == b"\x7fELF"


def test_blackwell_arch_forms_refused_on_sm_120a():
    """ptxas rejects these on sm_120a, so the arch set is 100/101/103/110 only."""
    m = build_group([GROUPS["bulk/tensor_sm100a"][0]])
    with pytest.raises(VersionError, match="sm_120a"):
        Module(m.kernels, version="8.7", target="sm_120a").emit()


def test_emitted_text_canonical_order():
    e = Env()
    cp_async_bulk_tensor(e.k, CL, "global", e.smem, e.tmap, e.coords(3), e.bar, mode="im2col",
                         im2col=(e.h(0),), cta_mask=e.h(1), cache_policy=e.policy,
                         cta_group=2)
    line = e.k.body[-1].render()
    assert line == ("cp.async.bulk.tensor.3d.shared::cluster.global.im2col.mbarrier::"
                    "complete_tx::bytes.multicast::cluster.cta_group::2.L2::cache_hint "
                    "[smem], [%rd2, {%r1, %r2, %r3}], [bar], {%rs1}, %rs2, %rd3;")


def test_operand_spellings():
    """Shared operands as 32/64-bit registers and symbol+offset; immediate coordinates."""
    e = Env()
    k = e.k
    s32, b64 = k.addr_of(e.smem), k.mov(e.bar, type=t.u64)
    cp_async_bulk_tensor(k, CL, "global", s32, e.tmap, (e.c[0], -8), b64)
    cp_async_bulk_tensor(k, "cluster", "global", Addr(e.smem, 1024), e.tmap, (0, 0), e.bar)
    cp_async_bulk_tensor(k, "global", "shared", e.tmap, (e.c[0], 4), s32)
    lines = [s.render() for s in list(k.statements())[-3:]]
    assert lines[0].endswith("[%r6], [%rd2, {%r1, -8}], [%rd3];")
    assert lines[1].endswith("[smem+1024], [%rd2, {0, 0}], [bar];")
    assert lines[2] == ("cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group "
                        "[%rd2, {%r1, 4}], [%r6];")
    assert assemble_declared(Module([k]).emit())[:4] == b"\x7fELF"


# -- the whole qualifier space, checked against ptxas ---------------------------------------------
def _sweep() -> tuple[dict[tuple[str, str], list], int]:
    """Every load/store/reduce/prefetch qualifier combination the DSL accepts, grouped by the
    inferred (version, target)."""
    groups: dict[tuple[str, str], list] = {}
    refused = 0
    e = Env()

    def offs(mode, n):
        if mode is TensorMode.im2col:
            return tuple(e.h(i) for i in range(n - 2)) if n >= 3 else ()
        if mode in (TensorMode.im2col_w, TensorMode.im2col_w_128):
            return (e.h(0), e.h(1))
        return None

    def nco(mode, n):
        return 5 if mode in (TensorMode.tile_gather4, TensorMode.tile_scatter4) else n

    candidates = []
    for n, dst, mode, mc, group, hint in itertools.product(
            range(1, 6), (CL, CTA), LOAD_MODES, (False, True), (None, 1, 2), (False, True)):
        candidates.append(lambda n=n, dst=dst, mode=mode, mc=mc, group=group, hint=hint:
                          CpAsyncBulkTensor(n, dst, "global", e.smem, e.tmap,
                                            e.coords(nco(mode, n)), e.bar, mode,
                                            im2col=offs(mode, n),
                                            cta_mask=e.h(7) if mc else None, cta_group=group,
                                            cache_policy=e.policy if hint else None))
    for n, mode, hint in itertools.product(range(1, 6), STORE_MODES, (False, True)):
        candidates.append(lambda n=n, mode=mode, hint=hint: CpAsyncBulkTensor(
            n, "global", CTA, e.smem, e.tmap, e.coords(nco(mode, n)), mode=mode,
            cache_policy=e.policy if hint else None))
        for op in OPS:
            candidates.append(lambda n=n, mode=mode, hint=hint, op=op: CpReduceAsyncBulkTensor(
                n, op, e.tmap, e.coords(nco(mode, n)), e.smem, mode,
                cache_policy=e.policy if hint else None))
    for n, mode, hint in itertools.product(range(1, 6), LOAD_MODES, (False, True)):
        candidates.append(lambda n=n, mode=mode, hint=hint: CpAsyncBulkPrefetchTensor(
            n, e.tmap, e.coords(nco(mode, n)), mode, offs(mode, n),
            cache_policy=e.policy if hint else None))
    for make in candidates:
        try:
            insn = make()
        except BuildError:
            refused += 1
            continue
        r: Requires = insn.requires
        tgt = r.min_target()
        key = (str(max(r.version, tgt.introduced)), str(tgt))
        groups.setdefault(key, []).append(insn)
    return groups, refused


def test_qualifier_sweep_assembles():
    groups, refused = _sweep()
    accepted = sum(len(v) for v in groups.values())
    assert set(groups) == {("8.0", "sm_90"), ("8.6", "sm_90"), ("8.6", "sm_100"),
                           ("8.6", "sm_100a")}
    assert accepted > 250 and refused > 150
    for (version, target), insns in sorted(groups.items()):
        lines = "\n".join("\t" + i.render() for i in insns)
        ptx = (f".version {version}\n.target {target}\n.address_size 64\n"
               ".visible .entry k(.param .align 64 .b8 tmap[128])\n{\n"
               "\t.reg .b16 %rs<9>;\n\t.reg .b32 %r<8>;\n\t.reg .b64 %rd<4>;\n"
               "\t.shared .align 1024 .b8 smem[8192];\n\t.shared .align 8 .b64 bar[1];\n"
               f"{lines}\n}}\n")
        assert assemble(ptx, target)[:4] == b"\x7fELF", (version, target)


def test_sweep_inferred_targets_are_minimal():
    """One step below the inferred target, ptxas rejects each Blackwell-only instruction."""
    groups, _ = _sweep()
    for (version, target), insns in groups.items():
        if target == "sm_90":
            continue
        for insn in insns[:: max(1, len(insns) // 12)]:
            ptx = (f".version {version}\n.target sm_90a\n.address_size 64\n"
                   ".visible .entry k(.param .align 64 .b8 tmap[128])\n{\n"
                   "\t.reg .b16 %rs<9>;\n\t.reg .b32 %r<8>;\n\t.reg .b64 %rd<4>;\n"
                   "\t.shared .align 1024 .b8 smem[8192];\n\t.shared .align 8 .b64 bar[1];\n"
                   f"\t{insn.render()}\n}}\n")
            with pytest.raises(Exception, match="not supported|requires .target"):
                assemble(ptx, "sm_90a")


def test_forms_table():
    names = [f[0] for f in FORMS]
    assert len(names) == len(set(names))
    for name, r, note in FORMS:
        assert isinstance(r, Requires) and isinstance(note, str)
        assert name.startswith(("cp.async.bulk.tensor", "cp.reduce.async.bulk.tensor",
                                "cp.async.bulk.prefetch.tensor"))
    blackwell = [n for n, r, _ in FORMS if r.arch_specific]
    assert all(r.arch_specific == BLACKWELL.arch_specific for _, r, _ in FORMS if r.arch_specific)
    assert any("scatter4" in n for n in blackwell) and any("cta_group" in n for n in blackwell)


# -- refusal rules ---------------------------------------------------------------------------------
def test_refuse_32bit_cta_mask():
    e = Env()
    with pytest.raises(OperandError, match="16-bit"):
        cp_async_bulk_tensor(e.k, CL, "global", e.smem, e.tmap, e.coords(2), e.bar,
                             cta_mask=e.c[0])


def test_refuse_32bit_im2col_offset():
    e = Env()
    with pytest.raises(OperandError, match="im2col.*16-bit"):
        cp_async_bulk_tensor(e.k, CL, "global", e.smem, e.tmap, e.coords(3), e.bar,
                             mode="im2col", im2col=(e.c[0],))


def test_refuse_wrong_coordinate_count():
    e = Env()
    with pytest.raises(BuildError, match=r"wrong coordinate count: \.3d takes 3, got 2"):
        cp_async_bulk_tensor(e.k, CL, "global", e.smem, e.tmap, e.coords(2), e.bar, dim=3)


def test_refuse_64bit_coordinate():
    e = Env()
    with pytest.raises(OperandError, match="32-bit"):
        cp_async_bulk_tensor(e.k, CL, "global", e.smem, e.tmap, (e.tmap, 0), e.bar)


def test_refuse_mbarrier_completion_on_store():
    e = Env()
    with pytest.raises(BuildError, match=r"no cuda::ptx overload.*cp_async_bulk_tensor\(k, "
                                         r"dst_space, src_space, tensor_map, tensor_coords, "
                                         r"src_mem, mode="):
        cp_async_bulk_tensor(e.k, "global", CTA, e.tmap, e.coords(2), e.smem, e.bar)
    with pytest.raises(BuildError, match="mbarrier completion on a store is not allowed"):
        CpAsyncBulkTensor(2, "global", CTA, e.smem, e.tmap, e.coords(2), e.bar)


def test_refuse_bulk_group_on_load():
    e = Env()
    with pytest.raises(BuildError, match=r"\.bulk_group is for stores"):
        CpAsyncBulkTensor(2, CL, "global", e.smem, e.tmap, e.coords(2),
                          completion="bulk_group")


def test_refuse_load_without_mbarrier():
    e = Env()
    with pytest.raises(BuildError, match=r"no cuda::ptx overload.*tensor_coords, smem_bar"):
        cp_async_bulk_tensor(e.k, CL, "global", e.smem, e.tmap, e.coords(2))
    with pytest.raises(BuildError, match=r"needs the mbarrier's shared address \(bar=\.\.\.\)"):
        CpAsyncBulkTensor(2, CL, "global", e.smem, e.tmap, e.coords(2))


@pytest.mark.parametrize("make", [
    lambda e: cp_async_bulk_tensor(e.k, "global", CTA, e.tmap, (e.c[0], -1), e.smem),
    lambda e: cp_reduce_async_bulk_tensor(e.k, "add", e.tmap, (-4, 0, e.c[0]), e.smem),
], ids=["store", "reduce"])
def test_refuse_store_negative_coordinates(make):
    with pytest.raises(BuildError, match="start coordinates must be non-negative"):
        make(Env())


def test_load_accepts_negative_coordinates():
    e = Env()
    cp_async_bulk_tensor(e.k, CL, "global", e.smem, e.tmap, (-8, -4), e.bar)
    assert "{-8, -4}" in e.k.body[-1].render()


BLACKWELL_ONLY = GROUPS["bulk/tensor_sm100a"] + GROUPS["bulk/tensor_sm100"]


@pytest.mark.parametrize("case", BLACKWELL_ONLY, ids=[c.id for c in BLACKWELL_ONLY])
def test_refuse_blackwell_forms_on_sm_90a(case):
    m = build_group([case])
    with pytest.raises(VersionError, match="sm_100.*pinned to .target sm_90a"):
        Module(m.kernels, version="8.6", target="sm_90a").emit()


@pytest.mark.parametrize("mode,dst", [("tile::gather4", CL), ("tile::scatter4", "global")])
def test_refuse_gather_scatter_not_2d(mode, dst):
    e = Env()
    with pytest.raises(BuildError, match=r"is a \.2d form \(five coordinates\), not \.3d"):
        if dst == "global":
            cp_async_bulk_tensor(e.k, dst, CTA, e.tmap, e.coords(5), e.smem, mode=mode, dim=3)
        else:
            cp_async_bulk_tensor(e.k, dst, "global", e.smem, e.tmap, e.coords(5), e.bar,
                                 mode=mode, dim=3)


@pytest.mark.parametrize("n", [2, 4])
def test_refuse_gather4_without_five_coords(n):
    e = Env()
    with pytest.raises(BuildError, match=r"\.tile::gather4 takes 5"):
        cp_async_bulk_tensor(e.k, CTA, "global", e.smem, e.tmap, e.coords(n), e.bar,
                             mode="tile::gather4")


def test_refuse_shared_cta_destination_below_ptx_86():
    m = build_group([Case("x", load(CTA, 2), "8.6", "sm_90")])
    with pytest.raises(VersionError, match="needs PTX ISA 8.6.*pinned to .version 8.5"):
        Module(m.kernels, version="8.5", target="sm_90a").emit()


def test_refuse_multicast_without_mask():
    e = Env()
    with pytest.raises(BuildError, match="needs a 16-bit ctaMask operand"):
        CpAsyncBulkTensor(2, CL, "global", e.smem, e.tmap, e.coords(2), e.bar, multicast=True)


def test_refuse_multicast_into_shared_cta():
    e = Env()
    with pytest.raises(BuildError, match=r"multicast::cluster needs a \.shared::cluster dest"):
        cp_async_bulk_tensor(e.k, CTA, "global", e.smem, e.tmap, e.coords(2), e.bar,
                             cta_mask=3)


def test_refuse_cache_hint_without_policy():
    e = Env()
    with pytest.raises(BuildError, match="needs a 64-bit cache-policy register"):
        CpAsyncBulkTensor(2, CL, "global", e.smem, e.tmap, e.coords(2), e.bar, cache_hint=True)


@pytest.mark.parametrize("policy", ["c0", 5], ids=["32-bit register", "immediate"])
def test_refuse_cache_policy_not_64bit_register(policy):
    e = Env()
    policy = e.c[0] if policy == "c0" else policy
    with pytest.raises(OperandError, match="cache_policy.*64-bit register"):
        cp_reduce_async_bulk_tensor(e.k, "add", e.tmap, e.coords(2), e.smem,
                                    cache_policy=policy)


@pytest.mark.parametrize("mode,n,offs,want", [
    ("im2col", 4, 1, "takes 2 16-bit offsets"), ("im2col", 3, 2, "takes 1 16-bit offsets"),
    ("im2col::w", 3, 1, r"takes 2 16-bit values \{wHalo, wOffset\}")])
def test_refuse_wrong_im2col_offset_count(mode, n, offs, want):
    e = Env()
    with pytest.raises(BuildError, match="wrong im2col offset count.*" + want):
        cp_async_bulk_tensor(e.k, CL, "global", e.smem, e.tmap, e.coords(n), e.bar, mode=mode,
                             im2col=tuple(e.h(i) for i in range(offs)))


@pytest.mark.parametrize("mode", ["im2col", "im2col::w", "im2col::w::128", "im2col_no_offs"])
def test_refuse_im2col_below_3d(mode):
    e = Env()
    with pytest.raises(BuildError, match=r"needs a 3d-5d tensor, not \.2d"):
        if mode == "im2col_no_offs":
            cp_async_bulk_tensor(e.k, "global", CTA, e.tmap, e.coords(2), e.smem, mode=mode)
        else:
            cp_async_bulk_tensor(e.k, CL, "global", e.smem, e.tmap, e.coords(2), e.bar,
                                 mode=mode, im2col=(e.h(0),))


def test_refuse_im2col_offsets_in_tile_mode():
    e = Env()
    with pytest.raises(BuildError, match=r"im2col offsets belong to the \.im2col modes"):
        cp_async_bulk_tensor(e.k, CL, "global", e.smem, e.tmap, e.coords(3), e.bar,
                             im2col=(e.h(0),))


def test_refuse_im2col_without_offsets():
    e = Env()
    with pytest.raises(BuildError, match=r"\.im2col needs im2colInfo"):
        cp_async_bulk_tensor(e.k, CL, "global", e.smem, e.tmap, e.coords(3), e.bar,
                             mode="im2col")


@pytest.mark.parametrize("mode", ["im2col", "tile::gather4"])
def test_refuse_load_mode_on_store(mode):
    e = Env()
    with pytest.raises(OperandError, match="mode"):
        cp_async_bulk_tensor(e.k, "global", CTA, e.tmap, e.coords(3), e.smem, mode=mode, dim=3)


def test_refuse_raw_param_tensormap():
    e = Env()
    with pytest.raises(OperandError, match=r"k\.tensormap_addr\(tmap\)"):
        cp_async_bulk_tensor(e.k, CL, "global", e.smem, e.tm, e.coords(2), e.bar)


def test_refuse_param_address_without_cvta():
    e = Env()
    raw = e.k.mov(e.tm, type=t.b64)          # mov only: the address is still param-space
    with pytest.raises(OperandError, match="cvta.param"):
        cp_async_bulk_prefetch_tensor(e.k, raw, e.coords(2))


def test_refuse_cta_group_on_store():
    e = Env()
    with pytest.raises(BuildError, match="cta_group::k exists only on loads"):
        CpAsyncBulkTensor(2, "global", CTA, e.smem, e.tmap, e.coords(2), cta_group=1)


def test_refuse_misaligned_shared_buffer():
    e = Env()
    buf = e.k.shared_array(t.b32, 64)
    with pytest.raises(OperandError, match="16-byte aligned"):
        cp_async_bulk_tensor(e.k, CL, "global", buf, e.tmap, e.coords(2), e.bar)


def test_refuse_generic_address_as_shared_operand():
    e = Env()
    gen = e.k.generic_addr(e.smem)
    with pytest.raises(OperandError, match=r"k.cvta\(reg, 'shared::cluster', to=True\)"):
        CpAsyncBulkTensor(2, CL, "global", gen, e.tmap, e.coords(2), e.bar)
    # the builder converts a generic pointer, as cuda::ptx's __as_ptr_dsmem does
    cp_async_bulk_tensor(e.k, CL, "global", gen, e.tmap, e.coords(2), e.bar)
    assert [s.render() for s in e.k.statements()][-2].startswith(
        "cvta.to.shared::cluster.u64 %rd")


def test_refuse_unknown_direction_space():
    e = Env()
    with pytest.raises(OperandError, match="dst_space"):
        CpAsyncBulkTensor(2, "local", "global", e.smem, e.tmap, e.coords(2), e.bar)


# ptxas agrees with the refusals above wherever it has an opinion.
_HDR = (".version {v}\n.target {t}\n.address_size 64\n.visible .entry k()\n{{\n"
        "\t.reg .b16 %rs<4>;\n\t.reg .b32 %r<8>;\n\t.reg .b64 %rd<4>;\n\t{line}\n}}\n")
PTXAS_REJECTS = [
    ("32-bit ctaMask", "8.0", "sm_90a", "cp.async.bulk.tensor.2d.shared::cluster.global.tile."
     "mbarrier::complete_tx::bytes.multicast::cluster [%r1], [%rd1, {%r2, %r3}], [%r4], %r5;"),
    ("32-bit im2col offset", "8.0", "sm_90a", "cp.async.bulk.tensor.3d.shared::cluster.global."
     "im2col.mbarrier::complete_tx::bytes [%r1], [%rd1, {%r2, %r3, %r4}], [%r5], {%r6};"),
    ("coordinate count", "8.0", "sm_90a", "cp.async.bulk.tensor.3d.shared::cluster.global.tile."
     "mbarrier::complete_tx::bytes [%r1], [%rd1, {%r2, %r3}], [%r4];"),
    ("mbarrier on store", "8.0", "sm_90a", "cp.async.bulk.tensor.2d.global.shared::cta.tile."
     "mbarrier::complete_tx::bytes [%rd1, {%r2, %r3}], [%r1], [%r4];"),
    ("multicast into cta", "8.6", "sm_90a", "cp.async.bulk.tensor.2d.shared::cta.global.tile."
     "mbarrier::complete_tx::bytes.multicast::cluster [%r1], [%rd1, {%r2, %r3}], [%r4], %rs1;"),
    ("cta dst below 8.6", "8.5", "sm_90a", "cp.async.bulk.tensor.2d.shared::cta.global.tile."
     "mbarrier::complete_tx::bytes [%r1], [%rd1, {%r2, %r3}], [%r4];"),
    ("im2col offsets", "8.0", "sm_90a", "cp.async.bulk.tensor.3d.shared::cluster.global.im2col."
     "mbarrier::complete_tx::bytes [%r1], [%rd1, {%r2, %r3, %r4}], [%r5], {%rs1, %rs2};"),
    ("im2col_no_offs 2d", "8.0", "sm_90a", "cp.async.bulk.tensor.2d.global.shared::cta."
     "im2col_no_offs.bulk_group [%rd1, {%r2, %r3}], [%r1];"),
    ("gather4 3d", "8.6", "sm_100a", "cp.async.bulk.tensor.3d.shared::cta.global.tile::gather4."
     "mbarrier::complete_tx::bytes [%r1], [%rd1, {%r2, %r3, %r4, %r5, %r6}], [%r7];"),
    ("cta_group on sm_90a", "8.6", "sm_90a", "cp.async.bulk.tensor.2d.shared::cta.global.tile."
     "mbarrier::complete_tx::bytes.cta_group::1 [%r1], [%rd1, {%r2, %r3}], [%r4];"),
    ("cache policy order", "8.0", "sm_90a", "cp.async.bulk.tensor.2d.shared::cluster.global."
     "tile.mbarrier::complete_tx::bytes.multicast::cluster.L2::cache_hint "
     "[%r1], [%rd1, {%r2, %r3}], [%r4], %rd2, %rs1;"),
]


@pytest.mark.parametrize("what,v,tgt,line", PTXAS_REJECTS, ids=[p[0] for p in PTXAS_REJECTS])
def test_ptxas_agrees_with_refusal(what, v, tgt, line):
    with pytest.raises(Exception, match="ptxas rejected"):
        assemble(_HDR.format(v=v, t=tgt, line=line), tgt)
