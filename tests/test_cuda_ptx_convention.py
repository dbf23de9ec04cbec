"""One calling convention for the cuda::ptx-named builders (issue 13): a literal port of each
cuda::ptx call of the seed programs emits the PTX cuda::ptx emits (the headers' asm templates);
every overload of the TMA families takes the same arguments positionally and by keyword with
identical PTX; every value a refusal suggests is accepted when followed."""

from __future__ import annotations

import re

import pytest

from ptxdsl import BuildError, Kernel, PtxdslError, ptx, t
from tests.cccl_forms import asm_shapes, needs_cccl, shape

pytestmark = needs_cccl


class Seed:
    """The objects the seed programs name: `__shared__` buffers, the CUtensorMap* parameters
    (a loaded pointer is the C++ pointer's value), values of the params struct."""

    def __init__(self):
        k = self.k = Kernel("k")
        self.smem_tmap = k.shared_array(t.b8, 128, align=128, name="smem_tmap")
        self.bar = k.shared_array(t.b64, 1, align=8, name="bar")
        self.smem_buf = k.shared_array(t.b8, 4 * 128, align=128, name="smem_buf")
        self.out = k.param_ptr("out")                                  # CUtensorMap* out
        self.tensor_map = k.ld_param(k.param_ptr("tensor_map"))       # CUtensorMap* tensor_map
        self.u32 = k.ld_param(k.param(t.u32, "v32"))
        self.u64 = k.ld_param(k.param(t.u64, "v64"))

    def emitted(self, call) -> str:
        """The statement a call emits (after any address conversion it needs)."""
        call(self)
        return list(self.k.statements())[-1].render()


S, G, C = ptx.space_shared, ptx.space_global, ptx.space_cluster
T = "tensormap.replace.tile"

# (id, header, the literal port of the cuda::ptx call, cuda::ptx's PTX for it)
SEED_CALLS = [
    # seed 000 (CUDA Programming Guide 10.30.2) and 003: the consumer
    ("000-fence_acquire", "fence_proxy_tensormap_generic",
     lambda s: ptx.fence_proxy_tensormap_generic(s.k, ptx.sem_acquire, ptx.scope_sys,
                                                 s.tensor_map, 128),
     "fence.proxy.tensormap::generic.acquire.sys [%reg], 128;"),
    ("000-mbarrier_init", "mbarrier_init", lambda s: ptx.mbarrier_init(s.k, s.bar, 1),
     "mbarrier.init.shared.b64 [bar], 1;"),
    ("000-fence_proxy_async", "fence_proxy_async",
     lambda s: ptx.fence_proxy_async(s.k, ptx.space_shared), "fence.proxy.async.shared::cta;"),
    ("000-cp_async_bulk_tensor", "cp_async_bulk_tensor",
     lambda s: ptx.cp_async_bulk_tensor(s.k, ptx.space_cluster, ptx.space_global, s.smem_buf,
                                        s.tensor_map, (0, 0), s.bar),
     "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes "
     "[smem_buf], [%reg, {0, 0}], [bar];"),
    ("000-arrive_expect_tx", "mbarrier_arrive_expect_tx",
     lambda s: ptx.mbarrier_arrive_expect_tx(s.k, ptx.sem_release, ptx.scope_cta,
                                             ptx.space_shared, s.bar, s.smem_buf.size),
     "mbarrier.arrive.expect_tx.release.cta.shared::cta.b64 %reg, [bar], 512;"),
    ("000-try_wait_parity", "mbarrier_try_wait_parity",
     lambda s: ptx.mbarrier_try_wait_parity(s.k, s.bar, 0),
     "mbarrier.try_wait.parity.shared::cta.b64 %reg, [bar], 0;"),
    # seed 002 (10.30.1): the device-side encoder, with space_shared as the seed spells it
    ("002-global_address", "tensormap_replace",
     lambda s: ptx.tensormap_replace_global_address(s.k, S, s.smem_tmap, s.u64),
     f"{T}.global_address.shared::cta.b1024.b64 [smem_tmap], %reg;"),
    ("002-rank-register", "tensormap_replace",
     lambda s: ptx.tensormap_replace_rank(s.k, S, s.smem_tmap, s.k.sub(s.u32, 1)),
     f"{T}.rank.shared::cta.b1024.b32 [smem_tmap], %reg;"),
    ("002-rank-value", "tensormap_replace",            # p.rank - 1 for a 2-d tensor: 1, not 0
     lambda s: ptx.tensormap_replace_rank(s.k, S, s.smem_tmap, 1),
     f"{T}.rank.shared::cta.b1024.b32 [smem_tmap], 1;"),
    *((f"002-{f}-{i}", "tensormap_replace",
       lambda s, f=f, i=i: getattr(ptx, f"tensormap_replace_{f}")(s.k, S, s.smem_tmap, i,
                                                                  s.u32),
       f"{T}.{'element_stride' if f == 'element_size' else f}.shared::cta.b1024.b32 "
       f"[smem_tmap], {i}, %reg;")
      for f in ("box_dim", "global_dim", "element_size") for i in range(5)),
    *((f"002-global_stride-{i}", "tensormap_replace",
       lambda s, i=i: ptx.tensormap_replace_global_stride(s.k, S, s.smem_tmap, i, s.u64),
       f"{T}.global_stride.shared::cta.b1024.b64 [smem_tmap], {i}, %reg;") for i in range(4)),
    *((f"002-{f}", "tensormap_replace",
       lambda s, f=f: getattr(ptx, f"tensormap_replace_{f}")(s.k, S, s.smem_tmap, 0),
       f"{T}.{f}.shared::cta.b1024.b32 [smem_tmap], 0;")     # the seed's n32_t<0>{} values
      for f in ("elemtype", "interleave_layout", "swizzle_mode", "fill_mode")),
    ("002-cp_fenceproxy", "tensormap_cp_fenceproxy",
     lambda s: ptx.tensormap_cp_fenceproxy(s.k, ptx.sem_release, ptx.scope_gpu, s.out,
                                           s.smem_tmap, 128),
     "tensormap.cp_fenceproxy.global.shared::cta.tensormap::generic.release.gpu.sync.aligned "
     "[%reg], [smem_tmap], 128;"),
]


@pytest.mark.parametrize("id, header, call, want", SEED_CALLS, ids=[c[0] for c in SEED_CALLS])
def test_seed_call_ported_literally_emits_cuda_ptx_text(id, header, call, want):
    got = Seed().emitted(call)
    assert re.sub(r"%[a-z]+\d+", "%reg", got) == want
    assert shape(got) in asm_shapes(header), f"{got} is not what cuda::ptx's {header} emits"


def test_seed_calls_cover_every_cuda_ptx_call_of_the_seeds():
    """Each cuda::ptx function the seed programs call has a literal port above."""
    from pathlib import Path
    seeds = Path("/work/shared/seeds")
    if not seeds.is_dir():
        pytest.skip("the seed programs are not checked out")
    called = set(re.findall(r"ptx::(\w+)\(", "".join(p.read_text() for p in seeds.glob("*.txt"))))
    ported = {_PORTS[c[0].split("-")[1]] for c in SEED_CALLS}
    assert called <= ported, called - ported


# the cuda::ptx function each SEED_CALLS id ports
_PORTS = {"fence_acquire": "fence_proxy_tensormap_generic", "rank": "tensormap_replace_rank",
          "cp_fenceproxy": "tensormap_cp_fenceproxy", "arrive_expect_tx":
          "mbarrier_arrive_expect_tx", "try_wait_parity": "mbarrier_try_wait_parity",
          "mbarrier_init": "mbarrier_init", "fence_proxy_async": "fence_proxy_async",
          "cp_async_bulk_tensor": "cp_async_bulk_tensor",
          **{f: f"tensormap_replace_{f}" for f in (
              "global_address", "box_dim", "global_dim", "global_stride", "element_size",
              "elemtype", "interleave_layout", "swizzle_mode", "fill_mode")}}


# -- every overload: positional and keyword give the same PTX -------------------------------------
class Env(Seed):
    def __init__(self):
        super().__init__()
        k = self.k
        self.gmap = k.cvta(k.ld_param(k.param_ptr("gmap")), "global", to=True)
        self.remote = k.ld_param(k.param(t.u32, "remote"))
        self.state = k.ld_param(k.param(t.u64, "state"))
        self.mask = k.ld_param(k.param(t.u16, "mask"))
        self.data = k.shared_array(t.u32, 64, align=128, name="data")


def row(fn, header, names, values, **kw):
    return pytest.param(fn, header, names, values, kw,
                        id=f"{fn}({','.join(names)})" + "".join(f"-{v}" for v in kw.values()))


def _v(*specs):
    """Argument values: strings naming Env attributes are looked up, others kept."""
    return lambda e: [getattr(e, v[1:]) if isinstance(v, str) and v.startswith("@") else v
                      for v in specs]


_RS = ("space", "tm_addr", "new_val")
_RD = ("space", "tm_addr", "ord", "new_val")
OVERLOADS = [
    *(row(f"tensormap_replace_{f}", "tensormap_replace", _RS, _v(sp, a, v))
      for f, v in (("global_address", "@u64"), ("rank", 2), ("elemtype", 7),
                   ("interleave_layout", 1), ("swizzle_mode", 3), ("fill_mode", 1))
      for sp, a in ((S, "@smem_tmap"), (G, "@gmap"))),
    *(row(f"tensormap_replace_{f}", "tensormap_replace", _RD, _v(sp, a, 3, v))
      for f, v in (("box_dim", 64), ("global_dim", "@u32"), ("global_stride", 4096),
                   ("element_stride", 2), ("element_size", 1))
      for sp, a in ((S, "@smem_tmap"), (G, "@gmap"))),
    *(row("tensormap_cp_fenceproxy", "tensormap_cp_fenceproxy",
        ("sem", "scope", "dst", "src", "size"), _v(ptx.sem_release, sc, "@gmap", "@smem_tmap",
                                                   128))
      for sc in ("cta", "cluster", "gpu", "sys")),
    *(row("fence", "fence", ("sem", "scope"), _v(sem, sc))
      for sem in ("sc", "acq_rel", "acquire", "release") for sc in ("cta", "cluster", "gpu",
                                                                      "sys")),
    row("fence_mbarrier_init", "fence_mbarrier_init", ("sem", "scope"),
      _v(ptx.sem_release, ptx.scope_cluster)),
    row("fence_proxy_alias", "fence_proxy_alias", (), _v()),
    row("fence_proxy_async", "fence_proxy_async", (), _v()),
    *(row("fence_proxy_async", "fence_proxy_async", ("space",), _v(sp)) for sp in (S, C, G)),
    *(row(fn, fn, ("sem", "space", "scope"), _v(sem, sp, ptx.scope_cluster))
      for fn in ("fence_sync_restrict", "fence_proxy_async_generic_sync_restrict")
      for sem, sp in ((ptx.sem_acquire, C), (ptx.sem_release, S))),
    *(row("fence_proxy_tensormap_generic", "fence_proxy_tensormap_generic", ("sem", "scope"),
        _v(ptx.sem_release, sc)) for sc in ("cta", "sys")),
    *(row("fence_proxy_tensormap_generic", "fence_proxy_tensormap_generic",
        ("sem", "scope", "addr", "size"), _v(ptx.sem_acquire, sc, "@tensor_map", 128))
      for sc in ("cluster", "gpu")),
    row("mbarrier_init", "mbarrier_init", ("addr", "count"), _v("@bar", 32)),
    row("mbarrier_arrive", "mbarrier_arrive", ("addr",), _v("@bar")),
    row("mbarrier_arrive", "mbarrier_arrive", ("addr", "count"), _v("@bar", 2)),
    *(row("mbarrier_arrive", "mbarrier_arrive", ("sem", "scope", "space", "addr", *n),
        _v(sem, sc, S, "@bar", *v))
      for sem in ("release", "relaxed") for sc in ("cta", "cluster")
      for n, v in (((), ()), (("count",), (3,)))),
    *(row("mbarrier_arrive", "mbarrier_arrive", ("sem", "scope", "space", "addr", *n),
        _v(sem, "cluster", C, "@remote", *v))
      for sem in ("release", "relaxed") for n, v in (((), ()), (("count",), (3,)))),
    row("mbarrier_arrive_no_complete", "mbarrier_arrive_no_complete", ("addr", "count"),
      _v("@bar", 1)),
    *(row("mbarrier_arrive_expect_tx", "mbarrier_arrive_expect_tx",
        ("sem", "scope", "space", "addr", "tx_count"), _v(sem, sc, sp, b, 256))
      for sem in ("release", "relaxed")
      for sc, sp, b in (("cta", S, "@bar"), ("cluster", S, "@bar"), ("cluster", C, "@remote"))),
    *(row("mbarrier_expect_tx", "mbarrier_expect_tx", ("sem", "scope", "space", "addr",
                                                     "tx_count"), _v("relaxed", sc, sp, b, 64))
      for sc in ("cta", "cluster") for sp, b in ((S, "@bar"), (C, "@remote"))),
    *(row(f"mbarrier_{op}", f"mbarrier_{op}", names, _v(*values))
      for op, tn, token in (("test_wait", "state", "@state"),
                            ("test_wait_parity", "phase_parity", 1),
                            ("try_wait", "state", "@state"),
                            ("try_wait_parity", "phase_parity", 0))
      for names, values in (
          (("addr", tn), ("@bar", token)),
          *((("sem", "scope", "addr", tn), (sem, sc, "@bar", token))
            for sem in ("acquire", "relaxed") for sc in ("cta", "cluster")),
          *(((("addr", tn, "suspend_time_hint"), ("@bar", token, 1000)),
             (("sem", "scope", "addr", tn, "suspend_time_hint"),
              ("acquire", "cluster", "@bar", token, "@u32")))
            if op.startswith("try") else ()))),
    row("cp_async_bulk", "cp_async_bulk", ("dst_space", "src_space", "dst_mem", "src_mem", "size",
                                         "smem_bar"), _v(C, G, "@smem_buf", "@gmap", 512, "@bar")),
    row("cp_async_bulk", "cp_async_bulk", ("dst_space", "src_space", "dst_mem", "src_mem", "size",
                                         "smem_bar"), _v(S, G, "@smem_buf", "@gmap", "@u32",
                                                         "@bar")),
    row("cp_async_bulk", "cp_async_bulk", ("dst_space", "src_space", "dst_mem", "src_mem", "size",
                                         "smem_bar"), _v(C, S, "@smem_buf", "@data", 256,
                                                         "@bar")),
    row("cp_async_bulk", "cp_async_bulk", ("dst_space", "src_space", "dst_mem", "src_mem", "size"),
      _v(G, S, "@gmap", "@smem_buf", 512)),
    row("cp_async_bulk", "cp_async_bulk_multicast", ("dst_space", "src_space", "dst_mem",
                                                   "src_mem", "size", "smem_bar", "cta_mask"),
      _v(C, G, "@smem_buf", "@gmap", 512, "@bar", "@mask")),
    row("cp_async_bulk_cp_mask", "cp_async_bulk", ("dst_space", "src_space", "dst_mem", "src_mem",
                                                 "size", "byte_mask"),
      _v(G, S, "@gmap", "@smem_buf", 512, "@mask")),
    *(row("cp_async_bulk_tensor", "cp_async_bulk_tensor",
        ("dst_space", "src_space", "dst_mem", "tensor_map", "tensor_coords", "smem_bar"),
        _v(sp, G, "@smem_buf", "@tensor_map", tuple(range(n)), "@bar"))
      for sp in (S, C) for n in range(1, 6)),
    *(row("cp_async_bulk_tensor", "cp_async_bulk_tensor",
        ("dst_space", "src_space", "tensor_map", "tensor_coords", "src_mem"),
        _v(G, S, "@tensor_map", tuple(range(n)), "@smem_buf")) for n in range(1, 6)),
    *(row("cp_async_bulk_tensor", "cp_async_bulk_tensor_multicast",
        ("dst_space", "src_space", "dst_mem", "tensor_map", "tensor_coords", "smem_bar",
         "cta_mask"), _v(C, G, "@smem_buf", "@tensor_map", tuple(range(n)), "@bar", "@mask"))
      for n in (1, 3, 5)),
    *(row("cp_async_bulk_tensor", "cp_async_bulk_tensor",
        ("dst_space", "src_space", "cta_group", "dst_mem", "tensor_map", "tensor_coords",
         "smem_bar"), _v(S, G, g, "@smem_buf", "@tensor_map", (0, 1), "@bar"))
      for g in (ptx.cta_group_1, ptx.cta_group_2)),
    row("cp_async_bulk_tensor", "cp_async_bulk_tensor_multicast",
      ("dst_space", "src_space", "cta_group", "dst_mem", "tensor_map", "tensor_coords",
       "smem_bar", "cta_mask"), _v(C, G, "cta_group_2", "@smem_buf", "@tensor_map", (0, 1, 2),
                                   "@bar", "@mask")),
    row("cp_async_bulk_tensor_tile_gather4", "cp_async_bulk_tensor_gather_scatter",
      ("dst_space", "src_space", "dst_mem", "tensor_map", "tensor_coords", "smem_bar"),
      _v(S, G, "@smem_buf", "@tensor_map", (0, 1, 2, 3, 4), "@bar")),
    row("cp_async_bulk_tensor_tile_scatter4", "cp_async_bulk_tensor_gather_scatter",
      ("dst_space", "src_space", "tensor_map", "tensor_coords", "src_mem"),
      _v(G, S, "@tensor_map", (0, 1, 2, 3, 4), "@smem_buf")),
    *(row("cp_reduce_async_bulk_tensor", "cp_reduce_async_bulk_tensor",
        ("dst_space", "src_space", "op", "tensor_map", "tensor_coords", "src_mem"),
        _v(G, S, op, "@tensor_map", (0, 1), "@smem_buf"))
      for op in (ptx.op_add, "op_min", "max", "op_inc", "dec", ptx.op_and_op, "op_or_op",
                 "xor")),
    *(row("cp_reduce_async_bulk", "cp_reduce_async_bulk",
        ("dst_space", "src_space", "op", "dst_mem", "src_mem", "size"),
        _v(G, S, op, "@gmap", "@data", 256), **kw)
      for op, kw in (("add", {}), ("op_min", {}), (ptx.op_xor_op, {"type": t.b32}))),
    row("cp_reduce_async_bulk", "cp_reduce_async_bulk",
      ("dst_space", "src_space", "op", "dst_mem", "src_mem", "size", "rdsmem_bar"),
      _v(C, S, ptx.op_inc, "@remote", "@data", 256, "@bar")),
    row("cp_async_bulk_commit_group", "cp_async_bulk_commit_group", (), _v()),
    row("cp_async_bulk_wait_group", "cp_async_bulk_wait_group", ("n",), _v(3)),
    row("cp_async_bulk_wait_group_read", "cp_async_bulk_wait_group", ("n",), _v(0)),
    *(row("tcgen05_alloc", "tcgen05_alloc", ("cta_group", "dst", "n_cols"), _v(g, "@data", 64))
      for g in (ptx.cta_group_1, ptx.cta_group_2)),
    row("tcgen05_dealloc", "tcgen05_alloc", ("cta_group", "taddr", "n_cols"),
        _v(ptx.cta_group_1, "@u32", "@remote")),
    row("tcgen05_commit_multicast", "tcgen05_commit", ("cta_group", "smem_bar", "cta_mask"),
        _v(ptx.cta_group_2, "@bar", "@mask")),
    row("tcgen05_cp_64x128b_warpx2_02_13", "tcgen05_cp", ("cta_group", "taddr", "s_desc"),
        _v(ptx.cta_group_1, "@u32", "@u64")),
    row("tcgen05_ld_16x32bx2", "tcgen05_ld", ("out", "taddr", "imm_half_splitoff"),
        _v(2, "@u32", 16)),
]


@pytest.mark.parametrize("fn, header, names, values, kw", OVERLOADS)
def test_overload_positional_and_keyword_agree(fn, header, names, values, kw):
    by_position, by_keyword = Env(), Env()
    getattr(ptx, fn)(by_position.k, *values(by_position), **kw)
    getattr(ptx, fn)(by_keyword.k, **dict(zip(names, values(by_keyword), strict=True)), **kw)
    got = [s.render() for s in by_position.k.statements()]
    assert got == [s.render() for s in by_keyword.k.statements()]
    assert shape(got[-1]) in asm_shapes(header), f"{got[-1]} is not a form of cuda::ptx's {fn}"


@pytest.mark.parametrize("fn, args, match", [
    ("tensormap_replace_rank", ("@smem_tmap", 1), None),                # space left out
    ("tensormap_replace_box_dim", ("@smem_tmap", 0, 64), None),
    ("mbarrier_arrive", ("@bar", 1, 2), None),
    ("cp_async_bulk_tensor", (C, G, "@smem_buf", "@tensor_map", (0, 0)), None),
    # the old order, with as many arguments as an overload: refused on the first argument
    ("tensormap_cp_fenceproxy", ("@gmap", "@smem_tmap", "release", "gpu", 128),
     r"operand 'sem': expected one of 'release', got register"),
    ("mbarrier_try_wait", ("acquire", "@bar", "@state"),
     r"operand 'addr': expected an address .*got str 'acquire'"),
])
def test_a_call_in_no_cuda_ptx_order_is_refused(fn, args, match):
    e = Env()
    with pytest.raises(BuildError, match=match or rf"{fn}: no cuda::ptx overload takes .*"
                                                   rf"{fn}\(k, "):
        getattr(ptx, fn)(e.k, *_v(*args)(e))
    assert list(e.k.statements())[-1].render() == "ld.param.u16 %rs1, [mask];"  # nothing emitted


# -- every suggestion a refusal makes is accepted when followed -------------------------------
_USE = re.compile(r"use (\w+)[ =]'([^']+)'(?: or '([^']+)')?")


def _suggestions(err: PtxdslError) -> list[tuple[str, str]]:
    """(argument, value) pairs an error message suggests."""
    text = str(err)
    found = [(m.group(1), v) for m in _USE.finditer(text) for v in m.groups()[1:] if v]
    operand = getattr(err, "operand", None)
    if operand and not found and str(getattr(err, "expected", "")).startswith("one of"):
        found = [(operand, v) for v in re.findall(r"'([^']+)'", err.expected)]
    return found


def _follow(fn, kw: dict, fixed: tuple[str, str] | None = None, depth: int = 0) -> int:
    """Call fn by keyword; on a refusal, follow each suggestion. A followed suggestion must be
    accepted: the call then builds, or is refused for another argument, or suggests again.
    Returns how many suggestions were followed."""
    e = Env()
    args = {n: (getattr(e, v[1:]) if isinstance(v, str) and v.startswith("@") else v)
            for n, v in kw.items()}
    try:
        getattr(ptx, fn)(e.k, **args)
        return 0
    except PtxdslError as err:
        hints = _suggestions(err)
        if fixed is not None and not hints:     # refused, but not for the value we followed
            name, value = fixed
            assert getattr(err, "operand", None) not in (name, "space") or \
                f"'{value}'" not in str(err), f"{fn}: suggested {name}={value!r} refused: {err}"
            return 0
        assert hints and depth < 3, f"{fn}({kw}) refused with no usable suggestion: {err}"
        return sum(1 + _follow(fn, {**kw, name: value}, (name, value), depth + 1)
                   for name, value in hints)


@pytest.mark.parametrize("fn, kw", [
    ("fence_sync_restrict", {"sem": "acquire", "space": "shared"}),
    ("fence_sync_restrict", {"sem": "release", "space": "global"}),
    ("fence_proxy_async_generic_sync_restrict", {"sem": "acquire", "space": "shared::cta"}),
    ("fence_proxy_async", {"space": "local"}),
    ("fence_proxy_async", {"space": "bogus"}),
    ("fence", {"sem": "relaxed", "scope": "gpu"}),
    ("fence", {"sem": "release", "scope": "block"}),
    ("tensormap_cp_fenceproxy", {"sem": "acquire", "scope": "gpu", "dst": "@gmap",
                                 "src": "@smem_tmap"}),
    ("tensormap_replace_rank", {"space": "shared::cluster", "tm_addr": "@smem_tmap",
                                "new_val": 1}),
    ("tensormap_replace_fill_mode", {"space": "local", "tm_addr": "@smem_tmap",
                                     "new_val": "zero"}),
    ("mbarrier_arrive", {"sem": "acquire", "scope": "cta", "space": "shared", "addr": "@bar"}),
    ("mbarrier_arrive", {"addr": "@bar", "space": "global"}),
    ("mbarrier_try_wait_parity", {"sem": "release", "scope": "cta", "addr": "@bar",
                                  "phase_parity": 0}),
    ("mbarrier_try_wait", {"sem": "acquire", "scope": "gpu", "addr": "@bar",
                           "state": "@state"}),
    ("mbarrier_expect_tx", {"sem": "release", "scope": "cta", "space": "shared",
                            "addr": "@bar", "tx_count": 16}),
    ("mbarrier_init", {"addr": "@bar", "count": 1, "space": "cluster"}),
    ("cp_async_bulk", {"dst_space": "local", "src_space": "global", "dst_mem": "@smem_buf",
                       "src_mem": "@gmap", "size": 256, "smem_bar": "@bar"}),
    ("cp_reduce_async_bulk_tensor", {"dst_space": "global", "src_space": "shared",
                                     "op": "sum", "tensor_map": "@tensor_map",
                                     "tensor_coords": (0, 0), "src_mem": "@smem_buf"}),
])
def test_every_suggestion_is_accepted_when_followed(fn, kw):
    assert _follow(fn, kw) >= 1


@pytest.mark.parametrize("call, held", [
    # a .global address where the operand is generic: convert it to generic
    (lambda e, a: ptx.fence_proxy_tensormap_generic(e.k, "acquire", "gpu", a), "gmap"),
    # a generic address given to the instruction (no builder to convert it): convert it
    (lambda e, a: e.k.emit(ptx.CpAsyncBulk("global", "shared", a, e.smem_buf, 256)), "generic"),
], ids=["global-as-generic", "generic-as-global"])
def test_the_cvta_a_refusal_suggests_is_accepted(call, held):
    e = Env()
    addr = e.gmap if held == "gmap" else e.k.cvta(e.gmap, "global")   # .global / generic
    with pytest.raises(PtxdslError, match=r"k\.cvta\(reg, '([\w:]+)'(, to=True)?\)") as info:
        call(e, addr)
    m = re.search(r"k\.cvta\(reg, '([\w:]+)'(, to=True)?\)", str(info.value))
    call(e, e.k.cvta(addr, m.group(1), to=bool(m.group(2))))           # followed: builds
