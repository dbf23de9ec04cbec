"""samples/flash_attention_bwd.py, the FlashAttention backward pass.

CPU: the numpy reference against finite differences; a block-by-block numpy model of what the
kernels compute (keys as wgmma's M, the mask limits, the causal start block, the padded LSE/D
rows, bf16 P and dS, the G query heads walked in one CTA) against the reference; the PTX: clean
under the hazard checker (with the expect-tx counts checked against the maps the host
encodes), the checker finding a removed wait on the ring and on the K/V barrier, the
instruction mix, assembled for sm_90a and, under a whole-program compile that keeps
setmaxnreg, without spills; the host side's launches and refusals. GPU (`gpu`-marked, each run
in its own process so a fault or a hang cannot reach the other tests): the sample's cases
against the float64 reference. The golden is tests/test_samples.py's.
"""

from __future__ import annotations

import math
import re
import runpy
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from ptxdsl import pipeline
from ptxdsl.checker import check_module
from ptxdsl.runtime.tensormap_desc import check as check_desc
from ptxdsl.toolchain import ptxas_path
from tests.child_env import child_env
from tests.whole_program import advisories, whole_program_report

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "samples" / "flash_attention_bwd.py"
S = runpy.run_path(str(SAMPLE), run_name="__ptxdsl_test__")
CONFIGS = S["CONFIGS"]


@pytest.fixture(scope="module")
def module():
    return S["build_module"]()


@pytest.fixture(scope="module")
def ptx_text(module):
    return module.emit()


def _entry(text: str, name: str) -> str:
    return text.split(f".entry {name}(")[1].split(".entry")[0]


# -- the reference -------------------------------------------------------------------------------
def _loss(q, k, v, do, causal, scale):
    o, _ = S["reference_forward"](q, k, v, causal, scale)
    return float(np.sum(o * do))


@pytest.mark.parametrize("causal", [False, True])
def test_reference_backward_is_the_gradient(causal):
    """dQ, dK, dV are the gradients of sum(O * dO) (central differences), with GQA (G = 2)
    and Sq != Sk."""
    rng = np.random.default_rng(1)
    q, do = (rng.standard_normal((1, 5, 4, 8)) for _ in range(2))
    k, v = (rng.standard_normal((1, 3, 2, 8)) for _ in range(2))
    scale = 0.4
    grads = S["reference_backward"](q, k, v, do, causal, scale)
    eps = 1e-6
    for x, g in zip((q, k, v), grads, strict=True):
        assert g.shape == x.shape
        num = np.zeros_like(x)
        for idx in np.ndindex(x.shape):
            old = x[idx]
            x[idx] = old + eps
            up = _loss(q, k, v, do, causal, scale)
            x[idx] = old - eps
            num[idx] = (up - _loss(q, k, v, do, causal, scale)) / (2 * eps)
            x[idx] = old
        np.testing.assert_allclose(g, num, atol=1e-6)


def test_bits_round_to_nearest_even():
    x = np.array([1.0, 1 + 2 ** -8, 1 + 3 * 2 ** -8, -2.5, 0.0])
    assert S["to_bits"](x, "bf16").tolist() == [0x3F80, 0x3F80, 0x3F82, 0xC020, 0]
    np.testing.assert_array_equal(S["from_bits"](S["to_bits"](x, "bf16"), "bf16"),
                                  [1.0, 1.0, 1 + 2 ** -6, -2.5, 0.0])
    assert S["from_bits"](S["to_bits"](x, "f16"), "f16")[1] == 1 + 2 ** -8


# -- a numpy model of the kernels, block by block -------------------------------------------------
def _bf16(x):
    return S["from_bits"](S["to_bits"](np.asarray(x, np.float32), "bf16"), "bf16")


def _model(q, k, v, o, do, lse, causal, scale):
    """What the three kernels compute, in their blocks and order: the pre kernel's padded
    LSE (log2 units, +inf past Sq) and D (0 past Sq), then per CTA (key block j, KV head h)
    and consumer warpgroup w (64 keys), per query head of h and query block i from the causal
    start, S^T and dP^T of the zero-filled tiles, the mask as the limits the kernel compares
    with, P^T and dS^T rounded to bf16 for the second products."""
    B, Sq, Hq, D = q.shape
    Sk, Hkv = k.shape[1], k.shape[2]
    G, BR, BC = Hq // Hkv, S["BR"], S["BC"]
    sq_pad = S["padded"](Sq)
    lse2 = np.full((B, Hq, sq_pad), np.inf)
    lse2[:, :, :Sq] = lse * S["LOG2E"]
    dpsum = np.zeros((B, Hq, sq_pad))
    dpsum[:, :, :Sq] = np.einsum("bqhd,bqhd->bhq", do, o)
    dq_acc = np.zeros((B, Hq, sq_pad, D))
    dk, dv = np.zeros_like(k), np.zeros_like(v)

    def rows(x, start, n):                   # a TMA tile: zero past the tensor's rows
        out = np.zeros((n, x.shape[-1]))
        got = x[start:start + n]
        out[:len(got)] = got
        return out

    c = np.arange(64)
    for b in range(B):
        for h in range(Hkv):
            for j in range(-(-Sk // BC)):
                for w in range(2):
                    key0 = j * BC + 64 * w
                    kw, vw = rows(k[b, :, h], key0, 64), rows(v[b, :, h], key0, 64)
                    keys = key0 + np.arange(64)
                    acc_k, acc_v = np.zeros((64, D)), np.zeros((64, D))
                    for g in range(G):
                        hq = h * G + g
                        for i in range(j * BC // BR if causal else 0, sq_pad // BR):
                            q0 = i * BR
                            qi, doi = rows(q[b, :, hq], q0, BR), rows(do[b, :, hq], q0, BR)
                            st, dpt = kw @ qi.T, vw @ doi.T
                            limit = np.where(causal, keys - q0, -1)
                            limit = np.where(keys >= Sk, 64, limit)[:, None]
                            x = st * scale * S["LOG2E"] - lse2[b, hq, q0:q0 + BR]
                            with np.errstate(invalid="ignore"):
                                pt = np.where(c[None, :] >= limit, np.exp2(x), 0.0)
                            dst = pt * (dpt - dpsum[b, hq, q0:q0 + BR])
                            pt, dst = _bf16(pt), _bf16(dst)
                            acc_v += pt @ doi
                            acc_k += dst @ qi
                            dq_acc[b, hq, q0:q0 + BR] += dst.T @ kw
                    n = min(64, Sk - key0)
                    if n > 0:
                        dk[b, key0:key0 + n, h] = (acc_k * scale)[:n]
                        dv[b, key0:key0 + n, h] = acc_v[:n]
    dq = dq_acc[:, :, :Sq].transpose(0, 2, 1, 3) * scale
    return dq, dk, dv


@pytest.mark.parametrize("Sq, Sk, Hkv, G, causal", [
    (1, 1, 1, 1, True), (77, 77, 1, 2, True), (70, 150, 2, 1, True), (150, 70, 1, 1, True),
    (130, 200, 1, 2, False)])
def test_block_model_matches_the_reference(Sq, Sk, Hkv, G, causal):
    """The kernels' blocked algorithm (a numpy model) agrees with the float64 reference within
    the sample's bf16 tolerance: the masks, the causal start block, the padding rows and the
    per-CTA walk over the query heads lose nothing."""
    rng = np.random.default_rng(7)
    D, scale = 64, 1 / math.sqrt(64)
    q, do = (_bf16(rng.standard_normal((1, Sq, Hkv * G, D))) for _ in range(2))
    k, v = (_bf16(rng.standard_normal((1, Sk, Hkv, D))) for _ in range(2))
    o, lse = S["reference_forward"](q, k, v, causal, scale)
    want = S["reference_backward"](q, k, v, do, causal, scale)
    got = _model(q, k, v, _bf16(o), do, lse.astype(np.float32), causal, scale)
    for g, w in zip(got, want, strict=True):
        assert np.isfinite(g).all()
        assert np.max(np.abs(g - w)) <= S["TOLERANCE"]["bf16"] * np.max(np.abs(w))


# -- the PTX ------------------------------------------------------------------------------------
def test_checker_finds_nothing():
    """Clean at every severity, notes included: the expect-tx counts are checked against the
    maps' boxes (the module's check context, MAP_CONTEXT)."""
    for bounded in (False, True):
        assert check_module(S["build_module"](bounded), notes=True) == []


def _skip(*args, **kwargs):
    return None


_SHORT_TX = pipeline.ProducerView.arrive_expect_tx
_WAIT_FULL = pipeline.ConsumerView.wait_full
_WAIT_EMPTY = pipeline.ProducerView.wait_empty


def _skip_on(ring: str, original):
    """`original`, except on the ring named `ring`, where the wait is left out."""
    def wait(self):
        return None if self.ring.name == ring else original(self)
    return wait


@pytest.mark.parametrize("owner, name, replacement, finding", [
    (pipeline.ConsumerView, "wait_full", _skip_on("qring", _WAIT_FULL), "wait-wrong-barrier"),
    (pipeline.ProducerView, "wait_empty", _skip_on("qring", _WAIT_EMPTY),
     "ring-refill-unguarded"),
    (pipeline.ConsumerView, "wait_full", _skip_on("kvring", _WAIT_FULL), "wait-wrong-barrier"),
    (pipeline.ProducerView, "wait_empty", _skip_on("kvring", _WAIT_EMPTY),
     "ring-refill-unguarded"),
    (pipeline.ProducerView, "arrive_expect_tx", lambda self, n: _SHORT_TX(self, n - 256),
     "expect-tx-mismatch"),
], ids=["ring-full", "ring-empty", "kv-full", "kv-empty", "expect-tx"])
def test_checker_finds_a_removed_wait(monkeypatch, owner, name, replacement, finding):
    """Each wait of the kernel, taken out, is reported (the consumers' full wait and the
    producer's empty wait on the Q/dO ring and on the one-stage K/V ring of the persistent
    tiles), and so is a stage's byte count short of what its loads deliver."""
    monkeypatch.setattr(owner, name, replacement)
    module = S["build_module"](configs=[CONFIGS["bf16", 64]])
    assert finding in {f.hazard.value for f in check_module(module)}


def test_checker_finds_the_stage_released_before_dk_dv_retire(monkeypatch):
    """At D = 128 dV's and dK's products (which read Q_i and dO_i in the stage) are the last
    group issued and retired after dQ_i's stores (`Config.dq_first`): without that wait the
    stage goes back to the producer while they may still read it."""
    from ptxdsl import ptx
    real, full_waits = ptx.wgmma_wait_group, []

    def wait(k, n, *args, **kwargs):
        if n == 0:
            full_waits.append(n)
            if len(full_waits) == 2:     # dP^T's is the first, the release's the second
                return None
        return real(k, n, *args, **kwargs)
    monkeypatch.setattr(ptx, "wgmma_wait_group", wait)
    module = S["build_module"](configs=[CONFIGS["bf16", 128]])
    assert "wgmma-smem-released" in {f.hazard.value for f in check_module(module)}


def test_ds_tile_lands_where_the_dq_wgmma_reads_it():
    """_stage_swizzled's stmatrix rows (run on the host model of tests/helper_model.py): lane
    L of warp w writes row L % 8 of matrix m = L / 8 of x4 store q, i.e. key row 16w + 8(m %
    2) + L % 8 of dS^T, queries from 16q + 8(m / 2); each 16-byte row must sit where the
    MN-major A layout of the dQ product (queries contiguous, 128B swizzle) has those elements."""
    from ptxdsl import Kernel, t
    from tests.helper_model import Model
    k = Kernel("ds_tile", reqntid=128)
    buf = k.shared_array(t.b8, 64 * 64 * 2, align=1024, name="ds")
    packed = k.fragment(t.f32, shape=(64, 64), zero=False).to_packed(t.bf16)
    S["_stage_swizzled"](k, packed, k.mov(buf))
    m = Model(k)
    start = m.buffers["ds"].start
    got = [(a.thread, a.start - start) for a in m.accesses if a.opcode.startswith("stmatrix")]
    layout = CONFIGS["bf16", 64].ds
    want = []
    for q in range(4):
        for thread in range(128):
            w, lane = divmod(thread, 32)
            mat = lane // 8
            key, query = 16 * w + 8 * (mat % 2) + lane % 8, 16 * q + 8 * (mat // 2)
            want.append((thread, layout.swizzled_offset(query, key)))
    assert got == want


@pytest.mark.parametrize("dtype, d", list(CONFIGS))
def test_ptx_shape(ptx_text, dtype, d):
    body = _entry(ptx_text, f"fa_bwd_{dtype}_d{d}")
    assert ".reqntid 384" in body and ".minnctapersm 1" in body
    assert body.count("setmaxnreg.dec.sync.aligned.u32 24;") == 1
    assert body.count("setmaxnreg.inc.sync.aligned.u32 240;") == 1
    # S^T and dP^T (K = D), dQ in 64-column parts (K = 64 keys): SS m64n64
    assert body.count(f"wgmma.mma_async.sync.aligned.m64n64k16.f32.{dtype}.{dtype}") == \
        2 * d // 16 + 4 * d // 64 + (8 if d == 64 else 0)
    # dV and dK from registers (4 k16 steps over the 64 queries each)
    assert len(re.findall(rf"m64n{d}k16\.f32\.{dtype}\.{dtype} \{{[^}}]*\}}, \{{", body)) == 8
    # dQ_i: each warpgroup's share to shared memory, then one bulk add into the accumulator;
    # at D = 128 a share is 64 of the columns over all 128 keys (8 k16 steps from both dS^T
    # buffers), at D = 64 all columns over the warpgroup's 64 keys
    assert "red.global" not in body
    assert body.count("cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32") == 1
    assert body.count("st.shared.v4.f32") == CONFIGS[dtype, d].dq_cols // 8 == 8
    assert ("bar.sync 5, 256;" in body) == (d == 128)
    # after dS^T is staged: at D = 128 dQ_i's products (both operands in shared memory) come
    # first and are retired alone (wait_group 1) before its stores, dV's and dK's (A from
    # registers) after them; at D = 64 dV's and dK's first, all retired together
    after = body[body.rindex("stmatrix.sync.aligned"):]
    first = re.search(r"wgmma\.mma_async\S+ \{[^}]*\}, (\{|%rd)", after)
    assert first is not None and (first.group(1) == "%rd") == CONFIGS[dtype, d].dq_first
    assert CONFIGS[dtype, d].dq_first == (d == 128)
    assert body.count("wgmma.wait_group.sync.aligned 1;") == (2 if d == 128 else 1)
    # K and V: 2 tiles each, once; Q and dO per block: one box per 64 columns of D
    assert body.count("cp.async.bulk.tensor.4d.shared::cluster.global") == 6 * d // 64
    assert body.count("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes") == 2
    assert body.count("stmatrix.sync.aligned.m8n8.x4") == 4
    assert body.count("ex2.approx.ftz.f32") == 32
    assert _entry(ptx_text, f"fa_bwd_pre_{dtype}_d{d}").count(f"cvt.f32.{dtype}") == 2 * d // 32
    convert = _entry(ptx_text, f"fa_bwd_convert_{dtype}_d{d}")
    assert f"cvt.rn.{dtype}x2.f32" in convert
    # dQ's rows through shared memory (stmatrix), then whole 16-byte chunks of rows: no
    # 4-byte pair stores (8 rows per warp instruction, half of each sector)
    assert convert.count("stmatrix.sync.aligned.m8n8.x4") == d // 16
    assert convert.count("st.global.v4.b32") == d // 16 and "st.global.b32" not in convert


def test_smem_plan():
    for cfg in CONFIGS.values():
        assert cfg.smem_bytes <= 227 * 1024
        for off in (cfg.k_off, cfg.v_off, cfg.ds_off, cfg.dq_off, cfg.stage_off,
                    cfg.stage_bytes):
            assert off % 1024 == 0
        # in order, none overlapping: K_w, V_w, dS^T, dQ_i, the stages' tiles, their statistics
        assert cfg.ds_off + 4 * 64 * 64 * 2 == cfg.dq_off
        assert cfg.dq_off + 2 * cfg.dq_bytes == cfg.stage_off
        assert cfg.stat_off == cfg.stage_off + cfg.stages * cfg.stage_bytes
        assert cfg.ring_off == cfg.stat_off + cfg.stages * 2 * 4 * 64
    assert [CONFIGS["bf16", d].stages for d in (64, 128)] == [4, 3]


def test_assembles_for_sm_90a(module):
    cubin = module.assemble("sm_90a", warn=False)
    assert bytes(cubin)[:4] == b"\x7fELF"


@pytest.mark.skipif(ptxas_path() is None, reason="no standalone ptxas here")
def test_whole_program_compile_keeps_setmaxnreg_without_spills(module):
    """What the driver JIT does on load: setmaxnreg kept (entry count 168 for 384 threads at
    one CTA per SM), no spills, no serialized wgmma."""
    rep = whole_program_report(module)
    assert [rep[cfg.name].registers for cfg in CONFIGS.values()] == [168] * len(CONFIGS)
    assert len(rep.kernels) == 3 * len(CONFIGS)
    assert all(r.spill_stores == r.spill_loads == 0 for r in rep.kernels.values()), rep.log
    assert advisories(rep) == [], rep.log


# -- the host side ------------------------------------------------------------------------------
class _Fn:
    def __init__(self, kernel, calls):
        self.kernel, self.calls = kernel, calls

    def launch(self, grid, block, args, *, shared_mem=0, stream=None):
        assert len(args) == len(self.kernel.params), self.kernel.name
        self.calls.append((self.kernel.name, grid, block, shared_mem, args))


class _Module:
    """Stands in for a loaded module: each launch's arguments against the kernel's params."""

    def __init__(self):
        self.kernels = {k.name: k for k in S["build_module"]().kernels}
        self.calls = []

    def __getitem__(self, name):
        return _Fn(self.kernels[name], self.calls)


class _Workspace:
    def __init__(self, B, Hq, Sq, D):
        self.shape = (B, Hq, S["padded"](Sq), D)
        self.lse2, self.dpsum, self.dq_acc = 1 << 20, 2 << 20, 3 << 20


def _encoding(monkeypatch) -> list:
    """TensorMap.from_desc recording each description it is asked to encode (and returning
    it), with the map cache emptied and a GPU of 132 SMs: the forward sample's, whose host
    helpers the backward calls."""
    encoded: list = []
    monkeypatch.setattr("ptxdsl.runtime.TensorMap.from_desc",
                        classmethod(lambda cls, desc, **kw: encoded.append(desc) or desc))
    monkeypatch.setattr(S["fa"], "_MAP_CACHE", {})
    monkeypatch.setattr(S["fa"], "_SMS", [132])
    return encoded


def test_backward_launches_the_three_kernels(monkeypatch):
    mod = _Module()
    encoded = _encoding(monkeypatch)
    ptrs = [(i + 1) << 24 for i in range(9)]      # q k v o do lse dq dk dv
    S["backward"](mod, *ptrs, B=2, Sq=77, Sk=200, Hq=8, Hkv=2, D=128, causal=True,
                  scale=0.125, workspace=_Workspace(2, 8, 77, 128),
                  strides={"q": (8 * 77 * 128, 128, 77 * 128)})
    (pre, g0, b0, _, _), (main, g1, b1, smem, args), (conv, g2, b2, _, cargs) = mod.calls
    assert (pre, g0, b0) == ("fa_bwd_pre_bf16_d128", (128 // 8, 8, 2), 256)
    # persistent: a CTA per tile (2 key blocks x 2 KV heads x 2 batches) up to one per SM
    assert (main, g1, b1) == ("fa_bwd_bf16_d128", (8, 1, 1), 384)
    assert smem == CONFIGS["bf16", 128].smem_bytes
    # sq sk sq_pad hq group causal hkv batch
    assert args[9:17] == (77, 200, 128, 8, 4, 1, 2, 2)
    assert args[-2:] == (0.125 * S["LOG2E"], 0.125)
    assert (conv, g2, b2) == ("fa_bwd_convert_bf16_d128", (2, 8, 2), 128)     # a 64-row block each
    assert cargs[-1] == 0.125
    q_map = encoded[0]
    assert q_map.global_dim == (128, 77, 8, 2)                # (D, S, H, B)
    assert q_map.global_strides == (128 * 2, 77 * 128 * 2, 8 * 77 * 128 * 2)   # S, H, B bytes
    assert encoded[1].global_dim == (128, 200, 2, 2)
    for desc in encoded:                  # what TensorMap.from_desc would check and encode
        check_desc(desc)
        CONFIGS["bf16", 128].tile.check_tensormap(desc)


def test_backward_grid_is_one_cta_per_sm_at_most_and_maps_are_encoded_once(monkeypatch):
    encoded = _encoding(monkeypatch)
    ptrs = [(i + 1) << 24 for i in range(9)]
    kw = {"B": 4, "Sq": 2048, "Sk": 2048, "Hq": 16, "Hkv": 16, "D": 128, "causal": False,
          "scale": 0.125}
    for _ in range(2):
        mod = _Module()
        S["backward"](mod, *ptrs, **kw, workspace=_Workspace(4, 16, 2048, 128))
        assert mod.calls[1][1] == (132, 1, 1)          # 1024 tiles on 132 SMs
    assert len(encoded) == 4                           # q, k, v, dO: once for both calls
    S["backward"](_Module(), ptrs[0] + 256, *ptrs[1:], **kw,
                  workspace=_Workspace(4, 16, 2048, 128))
    assert len(encoded) == 5 and encoded[-1].global_address == ptrs[0] + 256   # a new Q


def test_a_buffer_objects_maps_are_encoded_each_call_and_keep_it(monkeypatch):
    """A buffer object, not a plain address, is never cached (its address may be freed and
    reused by another buffer): its map is encoded on every call and holds it as `source`."""
    _encoding(monkeypatch)
    sources: list = []
    monkeypatch.setattr("ptxdsl.runtime.TensorMap.from_desc", classmethod(
        lambda cls, desc, source=None, **kw: sources.append((desc.global_address, source)) or desc))

    class Buffer:
        ptr = 5 << 24

    q = Buffer()
    ptrs = [(i + 1) << 24 for i in range(9)]
    for _ in range(2):
        S["backward"](_Module(), q, *ptrs[1:], B=1, Sq=64, Sk=64, Hq=1, Hkv=1, D=64,
                      causal=False, scale=0.125, workspace=_Workspace(1, 1, 64, 64))
    assert [s for s in sources if s[1] is q] == [(5 << 24, q)] * 2     # Q, each call
    assert len(sources) == 5 and S["fa"]._MAP_CACHE                    # K, V, dO: once


@pytest.mark.parametrize("kw, words", [
    ({"D": 96}, "D in"),
    ({"Hq": 6, "Hkv": 4}, "Hkv dividing Hq"),
    ({"Sq": 0}, "B, Sq, Sk, Hq, Hkv >= 1"),
    ({"strides": {"k": (8, 12, 8)}}, "multiples of 8 elements"),
    ({"strides": {"dk": (8, 1 << 25, 8)}}, "at most 2"),
])
def test_backward_refuses_what_the_kernels_cannot_take(kw, words):
    args = {"B": 1, "Sq": 8, "Sk": 8, "Hq": 2, "Hkv": 1, "D": 64, "causal": False,
            "scale": 1.0, **kw}
    with pytest.raises(ValueError, match=words):
        S["backward"](None, *range(9), **args)


# -- on the GPU ---------------------------------------------------------------------------------
def _run_on_gpu(**kwargs) -> str:
    """The sample's run(**kwargs) in a fresh process (a fault poisons the process's CUDA
    context and a hung kernel never returns), killed after 300 s."""
    code = (f"import runpy, sys\n"
            f"ns = runpy.run_path({str(SAMPLE)!r}, run_name='__ptxdsl_test__')\n"
            f"report = ns['run'](**{kwargs!r})\n"
            f"print(report.format())\n"
            f"sys.exit(0 if report.ok else 1)\n")
    try:
        res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                             cwd=ROOT, env=child_env(), timeout=300)
    except subprocess.TimeoutExpired:
        pytest.fail(f"run({kwargs}) did not finish within 300 s (hung kernel?)")
    assert res.returncode == 0, res.stdout + res.stderr
    return res.stdout


@pytest.mark.gpu
@pytest.mark.parametrize("d", S["HEAD_DIMS"])
@pytest.mark.parametrize("dtype", list(S["DTYPES"]))
def test_gpu_against_float64_reference(dtype, d):
    """Every case of the sample (odd lengths, one token, Sq != Sk, causal and not, G = 1 and
    4, a head-major layout) against the float64 reference, within TOLERANCE."""
    print(_run_on_gpu(head_dims=(d,), dtypes=(dtype,)))
