"""samples/gemm_reduce_scatter.py on the CPU: the fused kernels check clean with the
cross-GPU context and assemble; the checker finds a signal that no longer publishes the TMA
stores (a `.gpu` release, or stores only read, not complete) and a wait that no longer
acquires; the signal counts the owner waits for match what the senders' loop sends; the host
refuses shapes the kernel does not take. The GPU runs are in test_gemm_reduce_scatter_gpu.py
and test_samples.py."""

from __future__ import annotations

import runpy
from pathlib import Path

import pytest

from ptxdsl import ptx
from ptxdsl.checker import Hazard, check_kernel
from ptxdsl.testing import assemble_declared
from tests.checker_kernels import ids

SAMPLE = Path(__file__).resolve().parent.parent / "samples" / "gemm_reduce_scatter.py"


@pytest.fixture(scope="module")
def g():
    return runpy.run_path(str(SAMPLE), run_name="__ptxdsl_test__")


def _findings(ns, variant="skinny"):
    return check_kernel(ns["build_kernel"](variant), **ns["CONTEXT"])


@pytest.mark.parametrize("bounded", [False, True])
def test_builds_checks_clean_and_assembles(g, bounded):
    for variant in g["VARIANTS"]:
        assert [f.format() for f in check_kernel(g["build_kernel"](variant, bounded),
                                                 **g["CONTEXT"])] == []
    assemble_declared(g["build_module"](bounded).emit())


def test_its_ptx_read_back_checks_clean_too(g):
    """`python -m ptxdsl check` on the sample's PTX, with the same context."""
    from ptxdsl.checker import check_module
    from ptxdsl.frontend import parse_ptx
    found = check_module(parse_ptx(g["build_module"]().emit()), **g["CONTEXT"])
    assert [f.format() for f in found] == []


def _patched(monkeypatch, name, fn):
    """The sample's namespace with `name` replaced (its functions read their globals)."""
    ns = runpy.run_path(str(SAMPLE), run_name="__ptxdsl_test__")
    glob = ns["build_kernel"].__globals__
    monkeypatch.setitem(glob, name, fn(glob[name]))
    return ns


def test_checker_finds_a_tile_signal_without_sys_release(monkeypatch):
    def gpu_count(signal_set):
        def wrapped(k, addr, *a, **kw):
            if kw.get("add") and addr.offset == 0:     # the COUNT signal after the stores
                kw["scope"] = "gpu"
            return signal_set(k, addr, *a, **kw)
        return wrapped
    ns = _patched(monkeypatch, "signal_set", gpu_count)
    found = ids(_findings(ns))
    assert found and set(found) == {Hazard.PEER_PUBLISH_NO_SYS_RELEASE.value}, found


def test_checker_finds_a_signal_before_the_stores_complete(monkeypatch):
    ns = _patched(monkeypatch, "_stores_complete",
                  lambda _: lambda k: ptx.cp_async_bulk_wait_group_read(k, 0))
    findings = _findings(ns)
    assert set(ids(findings)) == {Hazard.PEER_PUBLISH_NO_SYS_RELEASE.value}, \
        [f.format() for f in findings]
    assert any("wait_group 0 (not .read)" in f.format() for f in findings)


def test_checker_finds_a_tile_wait_without_sys_acquire(monkeypatch):
    def gpu_wait(signal_wait):
        def wrapped(k, addr, *a, **kw):
            if addr.offset == 0:                        # the COUNT wait before the sums
                kw["scope"] = "gpu"
            return signal_wait(k, addr, *a, **kw)
        return wrapped
    ns = _patched(monkeypatch, "signal_wait", gpu_wait)
    found = ids(_findings(ns))
    assert found and set(found) == {Hazard.PEER_CONSUME_NO_SYS_ACQUIRE.value}, found


def _sent(g, m, n, world, variant):
    """What the senders' loop (ScatterStore.store) signals each owner per call, counted the
    way the kernel walks the tiles: every CTA tile of the grid (a cluster's CTAs included,
    past M or N), each warpgroup's 64 rows, each owner whose block they meet."""
    cfg = g["VARIANTS"][variant]
    rows = m // world
    got = [0] * world
    tiles_m, tiles_n = -(-m // cfg.tile_m), -(-n // cfg.tile_n)
    for _mb in range(tiles_m):
        for _nb in range(tiles_n):
            for cta_m in range(cfg.tile_m // 128):
                for _cta_n in range(cfg.tile_n // cfg.bn):
                    for cw in range(2):
                        row0 = _mb * cfg.tile_m + cta_m * 128 + cw * 64
                        for o in range(row0 // rows, min((row0 + 63) // rows, world - 1) + 1):
                            got[o] += world        # from every rank
    return got


@pytest.mark.parametrize("m,n", [(8192, 8192), (128, 8192), (200, 520), (328, 264), (64, 8)])
@pytest.mark.parametrize("world", [1, 2, 4, 8])
def test_the_owner_waits_for_what_the_senders_send(g, m, n, world):
    if m % world:
        pytest.skip("M not split evenly")
    for variant in g["VARIANTS"]:
        want = _sent(g, m, n, world, variant)
        assert [g["chunks_per_call"](m, n, world, r, variant) for r in range(world)] == want


@pytest.mark.parametrize("m,n,kl,world,words", [
    (201, 520, 224, 2, "multiple of the world size 2"),
    (200, 524, 224, 2, "N and K_r multiples of 8"),
    (200, 520, 100, 2, "N and K_r multiples of 8"),
    (200, 520, 224, 9, "world size must be 1 to 8"),
    (0, 520, 224, 2, "M >= 1"),
])
def test_host_refuses_shapes_the_kernel_does_not_take(g, m, n, kl, world, words):
    with pytest.raises(ValueError, match=words):
        g["check_shape"](m, n, kl, world)


def test_variant_follows_gemm_hopper(g):
    assert [g["variant_for"](m, 2) for m in (8192, 256, 128, 64)] == \
        ["default", "skinny", "row", "skinny"]


def test_layer_refuses_symmetric_buffers_too_small_for_the_slots(g):
    from ptxdsl.runtime import SymmetricBuffers
    bufs = SymmetricBuffers(0, 2, 0, (1 << 20, 2 << 20), (3 << 20, 4 << 20), 5 << 20, 6 << 20,
                            buffer_size=1024, signal_pad_size=2048)
    need = g["buffer_bytes"](200, 520, 2)
    with pytest.raises(ValueError, match=f"each rank's buffer needs {need} bytes .* have 1024"):
        g["GemmReduceScatter"](None, bufs, 200, 520, 224, sms=132)


def test_counters_refuse_to_wrap_the_pads_u32(g):
    c = g["Counters"]()
    assert c.advance(10, 4) == (10, 4) and c.advance(10, 4) == (20, 8)
    c.count = 2**32 - 15
    with pytest.raises(RuntimeError, match="u32 counters are full"):
        c.advance(15, 4)
    assert (c.count, c.done) == (2**32 - 15, 8)     # nothing counted by the refused call


def test_with_two_gpus_main_relaunches_under_torchrun_after_writing_the_ptx(monkeypatch,
                                                                            tmp_path):
    import ptxdsl.runtime as rt
    from ptxdsl import sample_runner
    ns = runpy.run_path(str(SAMPLE), run_name="__ptxdsl_test__")
    calls = []
    monkeypatch.setattr(rt, "multi_gpu_skip_reason", lambda *a, **kw: None)
    monkeypatch.setattr(sample_runner, "torchrun",
                        lambda sample, n, args, **kw: calls.append((sample, n, args)) or (0, ""))
    monkeypatch.delenv("RANK", raising=False)
    out = tmp_path / "grs.ptx"
    assert ns["main"](["--save-ptx", str(out), "--bounded"]) == 0
    assert calls == [(str(SAMPLE), 2, ["--bounded"])]
    assert ".entry gemm_rs_default" in out.read_text()


class _Fn:
    """A loaded kernel that records its launches (no GPU)."""

    def __init__(self, name):
        self.name, self.launches = name, []

    def max_active_clusters(self, block, *, shared_mem=0, cluster=None):
        return 60

    def launch(self, grid, block, args, **kwargs):
        self.launches.append((grid, block, args, kwargs))


@pytest.mark.parametrize("m,variant", [(200, "skinny"), (8192, "default"), (128, "row")])
def test_forward_passes_what_the_kernel_declares(monkeypatch, m, variant):
    """The launch's arguments pack into the kernel's parameters (as the runtime packs them),
    the counters' targets grow by one call's worth per call, and the grid stays within the
    clusters that fit at once."""

    from ptxdsl.runtime import SymmetricBuffers, TensorMap
    from ptxdsl.runtime.args import ArgPacker
    from ptxdsl.runtime.ptx_params import parse_entries
    ns = runpy.run_path(str(SAMPLE), run_name="__ptxdsl_test__")
    fake_map = TensorMap.from_bytes(bytes(128))
    monkeypatch.setattr(SymmetricBuffers, "tensor_maps",
                        lambda self, *a, **kw: (fake_map,) * self.world_size)
    monkeypatch.setattr(ns["TmaStoreEpilogue"], "check_tensormap",
                        staticmethod(lambda *a, **kw: None))
    gh = ns["gh"]                  # the gemm_hopper the sample loaded (sibling_sample)
    monkeypatch.setattr(gh, "tensor_maps", lambda *a, **kw: (fake_map, fake_map))
    import ptxdsl.runtime as rt
    monkeypatch.setattr(rt.DeviceBuffer, "from_numpy",
                        staticmethod(lambda a, device=0: 0x7000_0000))
    n, world = 8192, 2
    bufs = SymmetricBuffers(1, world, 0, (1 << 32, 2 << 32), (3 << 32, 4 << 32), 5 << 32,
                            6 << 32, buffer_size=ns["buffer_bytes"](m, n, world),
                            signal_pad_size=2048)
    cfg = ns["VARIANTS"][variant]
    fn = _Fn(cfg.name)
    layer = ns["GemmReduceScatter"]({cfg.name: fn}, bufs, m, n, 4096, sms=132)
    assert layer.variant == variant
    for _ in range(2):
        layer.forward(1 << 33, 2 << 33, 3 << 33)
    params = parse_entries(ns["Module"]([ns["build_kernel"](variant)], check=False).emit())
    packer = ArgPacker(cfg.name, params[cfg.name])
    (g1, b1, a1, k1), (g2, _, a2, _) = fn.launches
    for args in (a1, a2):
        packer.pack(args)
    names = [p.name for p in params[cfg.name]]
    got = dict(zip(names, a2, strict=True))
    assert (got["rank"], got["world"], got["rows"]) == (1, world, m // world)
    expect = ns["chunks_per_call"](m, n, world, 1, variant)
    assert got["count_target"] == 2 * expect and got["done_target"] == 2 * world * g2
    assert b1 == 384 and g1 <= (120 if cfg.cluster > 1 else 132)
    assert k1["cluster"] == ((cfg.cluster, 1, 1) if cfg.cluster > 1 else None)
