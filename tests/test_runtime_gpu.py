"""GPU tests of the runtime: load, launch, arguments, tensor maps + TMA, memory, clusters,
shared memory, JIT errors, the cubin cache and timeouts. Marked `gpu` (skipped without a
Hopper GPU by tests/conftest.py); each test runs under a timeout so a hang is a failure."""

from __future__ import annotations

import struct
import time
from types import SimpleNamespace

import numpy as np
import pytest

from ptxdsl.errors import AssemblyError, SourceLoc
from ptxdsl.runtime import (
    ArgPacker,
    ArgumentError,
    CompatibilityError,
    DeviceBuffer,
    DriverError,
    Event,
    JitError,
    KernelNotFoundError,
    LaunchError,
    SharedMemoryError,
    Stream,
    SyncTimeoutError,
    TensorMap,
    device_info,
    load_module,
    load_ptx,
    max_ptx_version,
    synchronize,
)
from ptxdsl.runtime.ptx_params import parse_entries
from ptxdsl.testing import gpu_deadline
from ptxdsl.types import PtxVersion, Target
from tests import gpu_kernels_runtime as K

pytestmark = pytest.mark.gpu
TIMEOUT_S = 60


@pytest.fixture(autouse=True)
def _timeout():
    with gpu_deadline(TIMEOUT_S):
        yield


def sync():
    synchronize(timeout=20)


@pytest.fixture(scope="module")
def info():
    return device_info(0)


@pytest.fixture(scope="module")
def vadd():
    return load_ptx(K.VADD, name="vadd")["vadd"]


def test_device_info(info):
    print(f"\n{info}; driver {info.driver_version}; optin smem "
          f"{info.max_shared_per_block_optin}")
    assert info.compute_capability[0] == 9 and info.sm_count > 0
    assert info.max_shared_per_block_optin > 48 * 1024 and info.cluster_launch


def test_every_scalar_kind_round_trips():
    mod = load_ptx(K.ARGS_ECHO, name="args_echo")
    fn = mod["args_echo"]
    assert mod.jit_wall_ms > 0 and isinstance(mod.info_log, str)
    with DeviceBuffer.zeros(48, np.uint8) as out:
        for args in [(65535, 4_000_000_000, -5, 2**64 - 1, -2**63, 1.5, -2.25, out),
                     (np.uint16(1), np.uint32(2), np.int32(-3), np.uint64(4), np.int64(-6),
                      np.float32(0.25), np.float64(8.5), out.ptr)]:
            out.memset(0xEE)
            fn.launch(1, 1, args)
            sync()
            raw = out.to_numpy().tobytes()
            got = [struct.unpack_from("<" + f, raw, off)[0] for f, off in
                   zip("HIiQqfd", (0, 4, 8, 16, 24, 32, 40), strict=True)]
            assert got == [int(a) if i < 5 else float(a) for i, a in enumerate(args[:7])]


def test_launches_call_the_driver_from_c_when_built():
    """With ptxdsl._launch_c built, every launch's driver call is made from C (the other GPU
    tests' launches all take it; tests/test_launch_c.py checks the error path on the CPU)."""
    try:
        import ptxdsl._launch_c  # noqa: F401
    except ImportError:
        pytest.skip("ptxdsl._launch_c is not built here (no C compiler at install)")
    import ptxdsl.runtime.launch as L
    from ptxdsl import settings
    if not settings.C_LAUNCH.get():
        pytest.skip("PTXDSL_C_LAUNCH switches the C call off")
    mod = load_ptx(K.ARGS_ECHO, name="args_echo")
    fn = mod["args_echo"]
    assert fn.launch_path == "C" and L.c_launcher(L.driver()) is not None
    with DeviceBuffer.zeros(48, np.uint8) as out:
        fn.launch(1, 1, (1, 2, -3, 4, -5, 0.5, 0.25, out))
        sync()
        assert struct.unpack_from("<H", out.to_numpy().tobytes(), 0)[0] == 1


def _core_descriptor(array, box):
    """A cuda.core TensorMapDescriptor over `array`, or None if this cuda.core has none."""
    try:
        import cuda.core as core
        from cuda.core.utils import StridedMemoryView
    except ImportError:
        return None
    if not hasattr(StridedMemoryView, "as_tensor_map"):
        return None
    core.Device(0).set_current()
    return StridedMemoryView.from_cuda_array_interface(array, stream_ptr=-1).as_tensor_map(box)


def test_tensormap_argument_kinds_arrive_byte_exact():
    fn = load_ptx(K.TMAP_ECHO)["tmap_echo"]
    with DeviceBuffer.zeros((32, 64), np.uint32) as src, DeviceBuffer(128) as out:
        tm = TensorMap.from_array(src, box=(8, 16))
        print("\n" + tm.describe())
        kinds = {"TensorMap": tm, "bytes": bytes(tm), "numpy": np.frombuffer(bytes(tm), np.uint8),
                 "CUtensorMap": tm.as_cutensormap()}
        print("kinds:", list(kinds))
        for name, value in kinds.items():
            out.memset(0xFF)
            fn.launch(1, 1, (value, out))
            sync()
            assert out.to_numpy().tobytes() == bytes(tm), name
        core = _core_descriptor(src, (8, 16))
        if core is not None:
            # No public accessor for its bytes (cuda.core 1.2): refused with the way out.
            with pytest.raises(ArgumentError, match="no public way.*to_cuda_core"):
                fn.launch(1, 1, (core, out))


def _expected_tile(host, x, y, rows, cols):
    out = np.zeros((rows, cols), host.dtype)
    for r in range(rows):
        for c in range(cols):
            if 0 <= y + r < host.shape[0] and 0 <= x + c < host.shape[1]:
                out[r, c] = host[y + r, x + c]
    return out


def test_tma_2d_tile_load_matches_numpy():
    rng = np.random.default_rng(1)
    host = rng.integers(1, 2**31, size=(32, 64), dtype=np.uint32)
    fn = load_ptx(K.tma_load_2d(512))["tma_load_2d"]
    with DeviceBuffer.from_numpy(host) as src, DeviceBuffer.empty((8, 16), np.uint32) as out:
        tm = TensorMap.from_array(src, box=(8, 16))
        assert tm.desc.box_bytes == 512 and tm.ptx_elemtype == 2
        for x, y in [(0, 0), (16, 8), (56, 28), (-8, -4)]:
            out.memset(0xAB)
            fn.launch(1, 128, (tm, out, x, y))
            sync()
            np.testing.assert_array_equal(out.to_numpy(), _expected_tile(host, x, y, 8, 16))


def test_tma_with_pitched_strides_through_encode_tiled():
    rng = np.random.default_rng(2)
    padded = rng.integers(1, 2**31, size=(32, 80), dtype=np.uint32)  # row pitch 320 B
    fn = load_ptx(K.tma_load_2d(512))["tma_load_2d"]
    with DeviceBuffer.from_numpy(padded) as src, DeviceBuffer.empty((8, 16), np.uint32) as out:
        tm = TensorMap.tiled(src, shape=(32, 64), dtype="UINT32", box=(8, 16),
                             byte_strides=(320, 4))
        fn.launch(1, 128, (tm, out, 56, 24))
        sync()
        np.testing.assert_array_equal(out.to_numpy(),
                                      _expected_tile(padded[:, :64], 56, 24, 8, 16))


def test_tma_swizzle_128b_layout():
    rng = np.random.default_rng(3)
    host = rng.integers(1, 2**31, size=(16, 64), dtype=np.uint32)
    fn = load_ptx(K.tma_load_2d(1024))["tma_load_2d"]
    with DeviceBuffer.from_numpy(host) as src, DeviceBuffer.empty((8, 32), np.uint32) as out:
        tm = TensorMap.from_array(src, box=(8, 32), swizzle="128B")
        assert (tm.swizzle_mode, tm.swizzle_atomicity) == (3, 0)
        fn.launch(1, 128, (tm, out, 32, 4))
        sync()
        tile = host[4:12, 32:64].reshape(8, 8, 4)  # rows x 16-byte chunks x words
        expect = np.empty_like(tile)
        for row in range(8):
            for chunk in range(8):
                expect[row, chunk ^ (row % 8)] = tile[row, chunk]
        np.testing.assert_array_equal(out.to_numpy(), expect.reshape(8, 32))


def test_pointers_from_cupy(vadd):
    cp = pytest.importorskip("cupy")
    n = 1000
    a = cp.random.random(n, dtype=cp.float32)
    b = cp.random.random(n, dtype=cp.float32)
    c = cp.full(n, -1, dtype=cp.float32)
    vadd.launch((n + 255) // 256, 256, (a, b, c, n))
    sync()
    np.testing.assert_array_equal(cp.asnumpy(c), cp.asnumpy(a + b))

    class DLPackOnly:  # exercise the DLPack capsule path with device memory
        def __init__(self, x):
            self.x = x

        def __dlpack__(self, **kw):
            return self.x.__dlpack__(**kw)

        def __dlpack_device__(self):
            return self.x.__dlpack_device__()

    c.fill(-1)
    vadd.launch((n + 255) // 256, 256, (DLPackOnly(a), DLPackOnly(b), DLPackOnly(c), n))
    sync()
    np.testing.assert_array_equal(cp.asnumpy(c), cp.asnumpy(a + b))


def test_pointers_and_tensor_map_from_torch(vadd):
    torch = pytest.importorskip("torch")
    n = 777
    a = torch.rand(n, device="cuda")
    b = torch.rand(n, device="cuda")
    c = torch.full((n,), -1.0, device="cuda")
    vadd.launch((n + 127) // 128, 128, {"p_a": a, "p_b": b, "p_c": c, "p_n": n})
    sync()
    assert torch.equal(c, a + b)
    with pytest.raises(ArgumentError, match="CPU memory"):
        vadd.launch(1, 32, (a.cpu(), b, c, n))
    t = torch.arange(32 * 64, dtype=torch.int32, device="cuda").reshape(32, 64)
    tm = TensorMap.from_array(t, box=(8, 16))
    assert tm.desc.data_type.driver_name == "INT32"
    out = torch.zeros((8, 16), dtype=torch.int32, device="cuda")
    load_ptx(K.tma_load_2d(512))["tma_load_2d"].launch(1, 128, (tm, out, 8, 20))
    sync()
    assert torch.equal(out, t[20:28, 8:24])
    with pytest.raises(ValueError, match="innermost"):
        TensorMap.from_array(t.t(), box=(8, 16))


def test_jit_error_maps_to_ptx_and_python_lines():
    line = K.JIT_ERROR.splitlines().index(K.BAD_LINE) + 1
    fake = SimpleNamespace(
        emit=lambda: K.JIT_ERROR, version=PtxVersion(8, 0), target=Target(90),
        kernels=(SimpleNamespace(name="broken", params=parse_entries(K.JIT_ERROR)["broken"]),),
        locate=lambda n: SourceLoc("builder.py", 1000 + n), name="broken_mod")
    with pytest.raises(JitError) as info:
        load_module(fake)
    err = info.value
    print("\n" + str(err))
    assert isinstance(err, AssemblyError)
    assert (err.ptx_line, err.ptx_text) == (line, K.BAD_LINE)
    assert err.loc == SourceLoc("builder.py", 1000 + line) and "error" in err.log
    assert str(err).startswith(f"builder.py:{1000 + line}:")


def test_incompatible_version_or_target_is_refused_before_the_jit(info):
    text = K.VADD.replace(".version 8.0\n.target sm_90", ".version 8.6\n.target sm_100a")
    with pytest.raises(CompatibilityError, match="sm_100a.*compute capability 9.0"):
        load_ptx(text)
    limit = max_ptx_version(info.driver_version)
    if limit is not None:
        newer = PtxVersion(limit.major, limit.minor + 1)
        with pytest.raises(CompatibilityError, match=f"PTX ISA {newer}"):
            load_ptx(K.VADD.replace(".version 8.0", f".version {newer}"))


def test_large_dynamic_shared_memory(info):
    fn = load_ptx(K.DYN_SMEM)["dyn_smem"]
    expect = ((np.arange(256) + 1) % 256) * 3 + 7
    limit = info.max_shared_per_block_optin - fn.static_shared_bytes
    with DeviceBuffer.zeros(256, np.uint32) as out:
        for nbytes in (200 * 1024, limit):
            out.memset(0)
            fn.launch(1, 256, (out, nbytes), shared_mem=nbytes)
            sync()
            np.testing.assert_array_equal(out.to_numpy(), expect)
        with pytest.raises(SharedMemoryError, match=f"limit of {info.max_shared_per_block_optin}"):
            fn.launch(1, 256, (out, limit), shared_mem=limit + 1)


def test_cluster_launch():
    fn = load_ptx(K.cluster_ids(".explicitcluster"))["cluster_ids"]
    assert fn.cluster_must_be_set and fn.required_cluster == (0, 0, 0)
    with DeviceBuffer.zeros(32, np.uint32) as out:
        fn.launch(16, 32, (out,), cluster=(2, 1, 1))
        sync()
        ids = out.to_numpy().reshape(16, 2)
        assert ids[:, 0].tolist() == [0, 1] * 8 and set(ids[:, 1]) == {2}
        with pytest.raises(LaunchError, match="whole number of clusters"):
            fn.launch(15, 32, (out,), cluster=2)
        with pytest.raises(LaunchError, match="explicitcluster: launch it with cluster="):
            fn.launch(16, 32, (out,))
        req = load_ptx(K.cluster_ids(".reqnctapercluster 4, 1, 1"))["cluster_ids"]
        assert req.required_cluster == (4, 1, 1)
        out.memset(0)
        req.launch(16, 32, (out,))
        sync()
        ids = out.to_numpy().reshape(16, 2)
        assert ids[:, 0].tolist() == [0, 1, 2, 3] * 4 and set(ids[:, 1]) == {4}
        req.launch(16, 32, (out,), cluster=4)  # the same shape, stated: fine
        sync()
        with pytest.raises(LaunchError, match="reqnctapercluster 4, 1, 1"):
            req.launch(16, 32, (out,), cluster=2)
        with pytest.raises(LaunchError, match="whole number of clusters"):
            req.launch(14, 32, (out,))


def _check_vadd(fn, n=300):
    a = np.random.default_rng(n).random(n, dtype=np.float32)
    with DeviceBuffer.from_numpy(a) as da, DeviceBuffer.from_numpy(2 * a) as db, \
            DeviceBuffer.zeros(n, np.float32) as dc:
        fn.launch((n + 127) // 128, 128, (da, db, dc, n))
        sync()
        np.testing.assert_array_equal(dc.to_numpy(), 3 * a)


def test_cubin_cache_miss_then_hit(tmp_path):
    first = load_ptx(K.VADD, use_cubin=True, cache_dir=tmp_path)
    second = load_ptx(K.VADD, use_cubin=True, cache_dir=tmp_path)
    assert (first.arch, first.cache_hit, second.cache_hit) == ("sm_90", False, True)
    _check_vadd(first["vadd"])
    _check_vadd(second["vadd"])
    (entry,) = tmp_path.glob("*.cubin")
    entry.write_bytes(entry.read_bytes()[:100])  # corrupt: rebuilt, not handed to the driver
    third = load_ptx(K.VADD, use_cubin=True, cache_dir=tmp_path)
    assert third.cache_hit is False
    _check_vadd(third["vadd"])
    arch_a = load_ptx(K.VADD.replace("sm_90\n", "sm_90a\n"), use_cubin=True, cache_dir=tmp_path)
    assert (arch_a.arch, arch_a.cache_hit) == ("sm_90a", False)
    _check_vadd(arch_a["vadd"])
    assert load_ptx(K.VADD, use_cubin=True, cache=False).cache_hit is None


def test_synchronize_times_out_instead_of_hanging():
    fn = load_ptx(K.SPIN)["spin"]
    stream = Stream(non_blocking=True)
    fn.launch(1, 1, (1_500_000_000,), stream=stream)  # 1.5 s of spinning
    t0 = time.monotonic()
    with pytest.raises(SyncTimeoutError, match="not finished after 0.1 s"):
        stream.synchronize(timeout=0.1)
    with pytest.raises(SyncTimeoutError):
        synchronize(timeout=0.1)
    assert time.monotonic() - t0 < 1.0
    stream.synchronize(timeout=20)
    assert stream.query()
    stream.close()


def test_stream_and_event_timing():
    fn = load_ptx(K.SPIN)["spin"]
    with Stream() as s:
        start = Event().record(s)
        fn.launch(1, 1, (50_000_000,), stream=s)  # 50 ms
        end = Event().record(s)
        end.synchronize(timeout=20)
        ms = start.elapsed_ms(end)
    assert 40 < ms < 1000, ms


def test_builder_module_loads_and_runs():
    from ptxdsl import Addr, Kernel, Module, t
    from ptxdsl.types import StateSpace

    k = Kernel("store_scaled", reqntid=32)
    v = k.param(t.u32, "v")
    k.param(t.pred, "flag")
    out = k.param_ptr("out")
    o = k.cvta(k.ld_param(out), StateSpace.global_, to=True)
    x = k.mad(k.tid.x, k.ld_param(v), 1)
    k.st(Addr(k.add(o, k.mul(k.tid.x, 4, mode="wide"))), x, space=StateSpace.global_)
    k.ret()
    mod = Module([k]).load()
    with DeviceBuffer.zeros(32, np.uint32) as buf:
        mod["store_scaled"].launch(1, 32, (5, True, buf))
        sync()
        np.testing.assert_array_equal(buf.to_numpy(), np.arange(32) * 5 + 1)


def test_launch_errors_before_the_driver(vadd):
    with pytest.raises(KernelNotFoundError, match="has no kernel 'nope'; it has: vadd"):
        vadd.module["nope"]
    with DeviceBuffer.zeros(4, np.float32) as buf:
        with pytest.raises(ArgumentError, match="kernel 'vadd': parameter 'p_n'"):
            vadd.launch(1, 32, (buf, buf, buf, -1))
        with pytest.raises(LaunchError, match="exceeds the limit of 1024 threads"):
            vadd.launch(1, 2048, (buf, buf, buf, 4))
        with pytest.raises(LaunchError, match="grid must be"):
            vadd.launch(0, 32, (buf, buf, buf, 4))


def _per_call(fn, reps=3000) -> float:
    for _ in range(100):
        fn()
    sync()
    t0 = time.perf_counter()
    for _ in range(reps):
        fn()
    per = (time.perf_counter() - t0) / reps
    sync()
    return per


def test_launch_overhead_is_close_to_the_raw_driver_call(vadd):
    from cuda.bindings import driver

    n = 32
    with DeviceBuffer.zeros(n, np.float32) as a:
        args = (a, a, a, n)
        ours = _per_call(lambda: vadd.launch(1, 32, args))
        packer = ArgPacker("vadd", vadd.params)
        params = packer.pack((a.ptr, a.ptr, a.ptr, n))
        stream0 = driver.CUstream(0)
        raw = _per_call(lambda: driver.cuLaunchKernel(vadd.handle, 1, 1, 1, 32, 1, 1, 0,
                                                      stream0, params, 0))
        cfg = driver.CUlaunchConfig()
        cfg.gridDimX = cfg.gridDimY = cfg.gridDimZ = 1
        cfg.blockDimX, cfg.blockDimY, cfg.blockDimZ = 32, 1, 1
        cfg.hStream = stream0
        raw_ex = _per_call(lambda: driver.cuLaunchKernelEx(cfg, vadd.handle, params, 0))
        clustered = _per_call(lambda: vadd.launch(2, 32, args, cluster=2))
    print(f"\nlaunch overhead per call: ptxdsl Function.launch {ours * 1e6:.2f} us; raw "
          f"cuLaunchKernel {raw * 1e6:.2f} us; raw cuLaunchKernelEx {raw_ex * 1e6:.2f} us; "
          f"ptxdsl with cluster=2 {clustered * 1e6:.2f} us")
    assert ours < max(3 * raw, raw + 15e-6)


def test_rule_checker_agrees_with_the_driver(info):
    """Each violating description (checks bypassed) must also be refused by the driver, and
    the boundary cases accepted: the Python rules are the driver's rules."""
    from ptxdsl.runtime.tensormap import _encode
    from ptxdsl.runtime.tensormap_desc import TiledDesc, validate

    with DeviceBuffer(1 << 20) as buf:
        base = buf.ptr

        def d(**kw):
            fields = dict(data_type="UINT32", global_address=base, global_dim=(64, 32),
                          global_strides=(256,), box_dim=(16, 8), element_strides=(1, 1))
            return TiledDesc(**(fields | kw))

        five = dict(data_type="UINT8", global_dim=(32, 4, 4, 4, 2),
                    global_strides=(32, 128, 512, 2048), box_dim=(32, 4, 4, 4, 2),
                    element_strides=(1,) * 5)
        bad = {
            "rank": d(global_dim=(2,) * 6, global_strides=(16,) * 5, box_dim=(4,) * 6,
                      element_strides=(1,) * 6),
            "interleave_rank": d(interleave="16B"),
            "address_align": d(global_address=base + 8),
            "global_dim_range": d(global_dim=(64, 2**32 + 1)),
            "stride_multiple": d(global_strides=(264,)),
            "stride_range": d(global_strides=(2**40,)),
            "box_dim_range": d(box_dim=(16, 257)),
            "box_inner_bytes": d(box_dim=(6, 8)),
            "element_stride_range": d(element_strides=(1, 9)),
            "swizzle_span": d(swizzle="32B"),
            "oob_fill_type": d(oob_fill="NAN_REQUEST_ZERO_FMA"),
            "swizzle_atomicity_cc": d(box_dim=(32, 8), swizzle="128B_ATOM_32B"),
            "packed_cc": d(data_type="16U4_ALIGN8B", box_dim=(32, 8)),
        }
        good = [d(), d(global_dim=(64, 2**32), box_dim=(16, 256), element_strides=(8, 8)),
                d(box_dim=(32, 8), swizzle="128B"), d(interleave="32B", swizzle="32B", **five),
                d(data_type="FLOAT32", oob_fill="NAN_REQUEST_ZERO_FMA"),
                d(global_strides=(0,))]
        table, wrong = [], []
        for rule, desc in bad.items():
            assert rule in [v.rule for v in validate(desc, info.compute_capability)], rule
            try:
                _encode(desc, 0)
                table.append(f"{rule}: driver ACCEPTED")
                wrong.append(rule)
            except DriverError as e:
                table.append(f"{rule}: driver refused ({e.name})")
            except ValueError as e:  # cuda.bindings refuses over-long arrays itself
                table.append(f"{rule}: cuda.bindings refused ({e})")
        for desc in good:
            assert validate(desc, info.compute_capability) == []
            _encode(desc, 0)
        # Not asserted, printed for the record: a rule cuda.h documents that driver 580 does
        # not enforce, and overlapping rows, which are no rule at all.
        for label, desc in [("interleave 32B + swizzle 64B", d(interleave="32B", swizzle="64B",
                                                               **five)),
                            ("overlapping rows (stride < row bytes)", d(global_strides=(128,)))]:
            try:
                _encode(desc, 0)
                table.append(f"probe {label}: accepted")
            except (DriverError, ValueError) as e:
                table.append(f"probe {label}: refused ({getattr(e, 'name', e)})")
        print("\n" + "\n".join(table))
        assert not wrong, f"rules the driver does not enforce: {wrong}"
