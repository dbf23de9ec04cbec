"""samples/_flash_attention_op.py: FlashAttention as a PyTorch operator.

CPU (no GPU): every refusal (one per class of mistake, naming the argument and the user's
line), the fake implementation's shapes under FakeTensorMode and on meta tensors,
`torch.library.opcheck` and a `torch.compile(fullgraph=True)` trace of forward and backward on
meta tensors (where the fake implementations stand in for the kernels), the kernels built once
and loaded once per device, and the real implementation's launches (kernel, arguments, tensor
maps checked by TMA's rules) on CPU tensors with stand-in modules. GPU (`gpu`-marked):
the forward and backward against torch's fp32 SDPA (math backend) for bf16 and fp16, head dims
64/128/256 (backward 64/128), causal and not, GQA and MQA, odd and unequal lengths; packed
batches with empty and one-token sequences against SDPA per sequence; opcheck on the real
operator (dense and packed); torch.compile(fullgraph=True) forward and backward; a CUDA graph
replay of a packed batch. Each GPU test prints the errors it measured.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from ptxdsl.testing import gpu_deadline

torch = pytest.importorskip("torch", reason="the FlashAttention op needs PyTorch (pip install "
                            "ptxdsl[torch])")

from ptxdsl.torch import KernelOpError  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
NAME = "_flash_attention_op"


def _load():
    """The op module, imported once under its own name (torch.compile looks its globals up
    in sys.modules)."""
    mod = sys.modules.get(NAME)
    if mod is None:
        spec = importlib.util.spec_from_file_location(NAME, ROOT / "samples" / f"{NAME}.py")
        mod = importlib.util.module_from_spec(spec)
        sys.modules[NAME] = mod
        spec.loader.exec_module(mod)
    return mod


OP = _load()
flash_attention = OP.flash_attention
BF16, F16 = torch.bfloat16, torch.float16


def _t(*shape, dtype=BF16, device="meta", grad=False):
    return torch.empty(*shape, dtype=dtype, device=device, requires_grad=grad)


# -- CPU: refusals ------------------------------------------------------------------------------
Q, KV = _t(2, 77, 4, 128), _t(2, 200, 2, 128)
PACKED = _t(300, 4, 64, dtype=F16)
CU = torch.tensor([0, 100, 300], dtype=torch.int32, device="meta")

# (the words, the call): each call on one line, the line the error must name
REFUSALS = {
    "dtype": (r"q, k and v must be bfloat16 or float16, all three the same; got torch\.float32",
              lambda: flash_attention(_t(2, 77, 4, 128, dtype=torch.float32), KV, KV)),
    "mixed dtypes": (r"all three the same; got torch\.bfloat16, torch\.float16",
                     lambda: flash_attention(Q, _t(2, 200, 2, 128, dtype=F16), KV)),
    "rank": (r"must be \[B, S, H, D\], k and v of one shape with the same batch as q; got q "
             r"\(77, 4, 128\)", lambda: flash_attention(_t(77, 4, 128), KV, KV)),
    "packed rows": (r"packed \[total, H, D\] \(with cu_seqlens\), .* same rows as q",
                    lambda: flash_attention(PACKED, PACKED[:299], PACKED[:299], cu_seqlens=CU,
                                            max_seqlen=200)),
    "head dim": (r"head dim \(the last dimension of q, k and v\) must be one of \(64, 128, 256\)"
                 r".*got q 96", lambda: flash_attention(_t(2, 77, 4, 96), KV, KV)),
    "heads": (r"q's heads \(Hq = 6\) must be a multiple of k's and v's \(Hkv = 4\)",
              lambda: flash_attention(_t(2, 77, 6, 128), _t(2, 9, 4, 128), _t(2, 9, 4, 128))),
    "last dim strided": (r"q must have its last dimension contiguous \(stride 1\).*got strides "
                         r"\(39424, 512, 1, 4\)",
                         lambda: flash_attention(_t(2, 77, 128, 4).transpose(2, 3), KV, KV)),
    "stride not 8": (r"k must have .* strides positive multiples of 8 elements.*k\.contiguous",
                     lambda: flash_attention(Q, _t(2, 200, 2, 132)[..., :128], KV)),
    "unaligned start": (r"v must have .* 16-byte aligned.*storage offset 4",
                        lambda: flash_attention(Q, KV, _t(2 * 200 * 2 * 128 + 4)[4:].view(
                            2, 200, 2, 128))),
    "not a GPU": (r"the inputs are on cpu; the kernels run on a CUDA GPU",
                  lambda: flash_attention(*(_t(1, 8, 1, 64, device="cpu") for _ in range(3)))),
    "two devices": (r"k is on cpu, q on meta: all inputs must be on one GPU",
                    lambda: flash_attention(Q, _t(2, 200, 2, 128, device="cpu"), KV)),
    "cu_seqlens dtype": (r"cu_seqlens must be a 1-D int32 tensor of nseq \+ 1 >= 2 offsets; got "
                         r"torch\.int64", lambda: flash_attention(
                             PACKED, PACKED, PACKED, cu_seqlens=CU.long(), max_seqlen=200)),
    "cu_seqlens device": (r"cu_seqlens is on cpu, q on meta", lambda: flash_attention(
        PACKED, PACKED, PACKED, cu_seqlens=torch.tensor([0, 300], dtype=torch.int32),
        max_seqlen=300)),
    "max_seqlen missing": (r"max_seqlen= \(the longest sequence's length, an int\) is needed "
                           r"with cu_seqlens: the grid is sized on the host",
                           lambda: flash_attention(PACKED, PACKED, PACKED, cu_seqlens=CU)),
    "max_seqlen range": (r"max_seqlen must be the longest sequence's length, between 1 and q's "
                         r"300 rows; got 0", lambda: flash_attention(
                             PACKED, PACKED, PACKED, cu_seqlens=CU, max_seqlen=0)),
    "max_seqlen dense": (r"max_seqlen is for packed batches",
                         lambda: flash_attention(Q, KV, KV, max_seqlen=77)),
    "no keys": (r"k and v have no keys \(Sk = 0\)",
                lambda: flash_attention(Q, _t(2, 0, 2, 128), _t(2, 0, 2, 128))),
    "backward head dim": (r"no backward for head dim 256: the backward kernels exist for head "
                          r"dims \(64, 128\); call flash_attention under torch\.no_grad\(\)",
                          lambda: flash_attention(_t(1, 9, 2, 256, grad=True), _t(1, 9, 2, 256),
                                                  _t(1, 9, 2, 256))),
    "backward packed": (r"no backward for packed \(varlen\) batches: the backward kernels take "
                        r"dense \[B, S, H, D\] batches only", lambda: flash_attention(
                            _t(300, 4, 64, dtype=F16, grad=True), PACKED, PACKED,
                            cu_seqlens=CU, max_seqlen=200)),
}


@pytest.mark.parametrize("case", sorted(REFUSALS))
def test_refusals_name_the_argument_and_the_callers_line(case):
    words, call = REFUSALS[case]
    with pytest.raises(KernelOpError, match=words) as err:
        call()
    assert err.value.message.startswith("flash_attention: ")
    # the checks run inside the operator, below torch's dispatcher: the line is still the call
    assert (err.value.loc.file, err.value.loc.line) == (__file__, call.__code__.co_firstlineno)


def test_what_is_refused_with_gradients_runs_without_them():
    with torch.no_grad():
        out = flash_attention(_t(1, 9, 2, 256, grad=True), _t(1, 9, 2, 256), _t(1, 9, 2, 256))
    assert out.shape == (1, 9, 2, 256)
    out = flash_attention(_t(300, 4, 64, dtype=F16, grad=True).detach(), PACKED, PACKED,
                          cu_seqlens=CU, max_seqlen=200)
    assert out.shape == (300, 4, 64)


def test_kernels_are_built_once_and_loaded_once_per_device(monkeypatch):
    built, loads = [], []

    class Built:
        def load(self, *, device):
            loads.append(device)
            return f"loaded on {device}"

    monkeypatch.setattr(OP, "_BUILT", {})
    monkeypatch.setattr(OP, "_LOADED", {})
    monkeypatch.setattr(OP.fa, "build_module", lambda *a: built.append(("fwd", a)) or Built())
    monkeypatch.setattr(OP.fab, "build_module", lambda **kw: built.append(("bwd", kw)) or Built())
    for device in (0, 1, 0, 1):
        assert OP._kernels("fwd", "f16", 256, device) == f"loaded on {device}"
    OP._kernels("bwd", "bf16", 64, 0)
    assert built == [("fwd", (("f16",), (256,))),
                     ("bwd", {"configs": (OP.fab.CONFIGS["bf16", 64],)})]
    assert loads == [0, 1, 0]


# -- CPU: shapes (the fake implementation), opcheck, torch.compile ---------------------------------
def test_fake_shapes_dense_packed_and_backward():
    from torch._subclasses.fake_tensor import FakeTensorMode
    with FakeTensorMode():
        # a transposed [B, H, S, D] view is taken as it is; O comes back contiguous
        q = torch.empty(2, 4, 77, 64, device="cuda", dtype=F16).transpose(1, 2)
        k = torch.empty(2, 33, 1, 64, device="cuda", dtype=F16)
        o, lse = flash_attention(q, k, k, causal=True, return_lse=True)
        assert (o.shape, o.stride(), o.dtype, o.device.type) == (
            (2, 77, 4, 64), (77 * 4 * 64, 4 * 64, 64, 1), F16, "cuda")
        assert (lse.shape, lse.dtype) == ((2, 4, 77), torch.float32)
        packed = torch.empty(300, 8, 256, device="cuda", dtype=BF16)
        cu = torch.empty(4, dtype=torch.int32, device="cuda")      # 3 sequences
        kv = torch.empty(300, 2, 256, device="cuda", dtype=BF16)
        o, lse = flash_attention(packed, kv, kv, cu_seqlens=cu, max_seqlen=299,
                                 return_lse=True)
        assert (o.shape, lse.shape, lse.dtype) == ((300, 8, 256), (8, 300), torch.float32)
        q = torch.empty(2, 77, 4, 128, device="cuda", dtype=BF16)
        k = torch.empty(2, 5, 2, 128, device="cuda", dtype=BF16)
        lse = torch.empty(2, 4, 77, device="cuda")
        dq, dk, dv = torch.ops.ptxdsl_fa.bwd(q, q, k, k, q, lse, True, 0.1)
        assert (dq.shape, dk.shape, dv.shape) == ((2, 77, 4, 128), (2, 5, 2, 128), (2, 5, 2, 128))


def test_opcheck_on_meta_tensors():
    """Schema, autograd registration, fake against meta (here the same function) and AOT
    dispatch with dynamic shapes, forward and backward, without running a kernel."""
    q = _t(2, 4, 77, 64).transpose(1, 2).requires_grad_()
    kv = _t(2, 40, 2, 64, grad=True)
    for args in ((q, kv, kv, None, None, True, 0.125),
                 (PACKED, PACKED[:, :1], PACKED[:, :1], CU, 200, False, 0.125)):
        result = torch.library.opcheck(torch.ops.ptxdsl_fa.fwd.default, args)
        assert set(result.values()) == {"SUCCESS"}, result


def test_compile_fullgraph_traces_forward_and_backward():
    q = _t(2, 4, 77, 128).transpose(1, 2).requires_grad_()
    kv = _t(2, 200, 2, 128, grad=True)
    f = torch.compile(lambda q, k, v: flash_attention(q, k, v, causal=True) * 2, fullgraph=True,
                      backend="aot_eager")
    out = f(q, kv, kv)
    assert out.shape == (2, 77, 4, 128) and out.requires_grad
    out.sum().backward()
    assert q.grad.shape == q.shape and kv.grad.shape == kv.shape


def test_the_lse_carries_no_gradient():
    q = _t(1, 9, 2, 64, grad=True)
    out, lse = flash_attention(q, _t(1, 9, 2, 64), _t(1, 9, 2, 64), return_lse=True)
    assert out.requires_grad and not lse.requires_grad


# -- CPU: the real implementation's host side on a stand-in ---------------------------------------
# CPU tensors reach the real implementation (registered for every device; only `_on_gpu` keeps
# it to CUDA, patched here), the loaded modules are stand-ins that check each launch's argument
# count against the kernel's parameters, and tensor maps are described instead of encoded, then
# checked by TMA's rules (what TensorMap would check before encoding).
class _Fn:
    def __init__(self, kernel, calls):
        self.kernel, self.calls = kernel, calls

    def launch(self, grid, block, args, *, shared_mem=0, stream=None):
        assert len(args) == len(self.kernel.params), self.kernel.name
        self.calls.append((self.kernel.name, grid, args, stream))


class _Loaded:
    def __init__(self, module):
        self.kernels = {k.name: k for k in module.kernels}
        self.calls = []

    def __getitem__(self, name):
        return _Fn(self.kernels[name], self.calls)


@pytest.fixture(scope="module")
def built():
    return {"fwd": OP.fa.build_module(("bf16",), (64,)),
            "bwd": OP.fab.build_module(configs=(OP.fab.CONFIGS["bf16", 64],))}


@pytest.fixture
def stand_in(monkeypatch, built):
    from ptxdsl.runtime.tensormap_desc import check as check_desc
    loaded = {kind: _Loaded(m) for kind, m in built.items()}
    maps = []

    def described(desc):
        check_desc(desc)
        maps.append(desc)
        return desc

    monkeypatch.setattr(OP, "_on_gpu", lambda q: 0)
    monkeypatch.setattr(OP, "_stream", lambda device: 7)
    monkeypatch.setattr(OP, "_kernels", lambda kind, dtype, d, device: loaded[kind])
    # no GPU to count SMs; no maps left cached: the forward sample's, which the backward's
    # host side calls too
    monkeypatch.setattr(OP.fa, "_SMS", [132])
    monkeypatch.setattr(OP.fa, "_MAP_CACHE", {})
    monkeypatch.setattr("ptxdsl.runtime.TensorMap.from_desc", classmethod(
        lambda cls, desc, **kw: described(desc)))
    return loaded, maps


def test_dense_forward_launch_from_transposed_views(stand_in):
    loaded, maps = stand_in
    q = _t(2, 4, 77, 64, device="cpu").transpose(1, 2)           # [B, H, S, D] storage
    k, v = _t(2, 200, 2, 64, device="cpu"), _t(2, 200, 2, 64, device="cpu")
    out, lse = flash_attention(q, k, v, causal=True, scale=0.5, return_lse=True)
    [(name, grid, args, stream)] = loaded["fwd"].calls
    # 1 row block x 4 heads x 2; causal below fa.SHORT_CAUSAL rows: D = 64's two-consumer
    # kernel
    assert (name, grid, stream) == ("fa_fwd_bf16_d64_m128", 8, 7)
    assert args[4] == lse.data_ptr() and out.is_contiguous()
    # sq sk heads batch mblocks group_heads group lse_sb lse_sh causal scale_log2 (one head
    # group: the 8 (batch, head) pairs' tiles are fewer than two waves)
    assert args[5:] == (77, 200, 4, 2, 1, 8, 2, 4 * 77, 77, 1, 0.5 * OP.fa.LOG2E)
    q_map, k_map, v_map, o_map = maps
    assert q_map.global_dim == (64, 77, 4, 2)                    # (D, S, H, B)
    assert q_map.global_strides == (64 * 2, 77 * 64 * 2, 4 * 77 * 64 * 2)   # S, H, B in bytes
    assert o_map.global_strides == (4 * 64 * 2, 64 * 2, 77 * 4 * 64 * 2)
    assert k_map.global_dim == v_map.global_dim == (64, 200, 2, 2)


def test_packed_forward_launches_the_maps_the_tile_list_then_the_attention(stand_in):
    loaded, maps = stand_in
    q, k, v = _t(300, 4, 64, device="cpu"), _t(300, 1, 64, device="cpu"), \
        _t(300, 1, 64, device="cpu")
    cu = torch.tensor([0, 0, 1, 300], dtype=torch.int32)
    flash_attention(q, k, v, cu_seqlens=cu, max_seqlen=299)
    (maps_name, g0, a0, s0), (tiles_name, g1, a1, s1), (name, g2, a2, s2) = \
        loaded["fwd"].calls
    assert (maps_name, g0, tiles_name, g1, name, s0, s1, s2) == \
        ("fa_varlen_maps", 3, "fa_varlen_tiles", 1, "fa_fwd_bf16_d64_varlen", 7, 7, 7)
    assert a0[4] == a1[0] == a2[0] == cu.data_ptr()
    # the workspace: sequence 0's Q, K, V and O maps, then 512 bytes per sequence
    assert a2[1:5] == tuple(a0[5] + 128 * i for i in range(4))
    # the tile sort's scratch after the 3 sequences' maps (3 x 512 bytes), then the list
    # after the scratch (8 bytes per sequence rounded to 16, and 16 per sequence)
    assert (a1[1] - a0[5], a1[2] - a1[1], a2[5]) == (3 * 512, 32 + 48, a1[2])
    assert a1[3:] == (3, 4, 12, 4)          # nseq heads group_heads bins (3 row blocks + 1)
    assert a2[9:14] == (4, 3, 3, 12, 4)     # heads nseq mblocks group_heads (all 12) group
    assert [m.global_dim for m in maps] == [(64, 300, 4, 1), (64, 300, 1, 1),
                                            (64, 300, 1, 1), (64, 300, 4, 1)]


def test_backward_launches_with_a_made_contiguous_gradient(stand_in):
    loaded, maps = stand_in
    q = _t(2, 4, 77, 64, device="cpu").transpose(1, 2).requires_grad_()
    k = _t(2, 130, 2, 64, device="cpu", grad=True)
    v = _t(2, 130, 2, 64, device="cpu", grad=True)
    flash_attention(q, k, v, causal=True).sum().backward()     # dout: an expanded 1, stride 0
    names = [c[0] for c in loaded["bwd"].calls]
    assert names == ["fa_bwd_pre_bf16_d64", "fa_bwd_bf16_d64", "fa_bwd_convert_bf16_d64"]
    assert [c[3] for c in loaded["bwd"].calls] == [7, 7, 7]
    # the forward's four, then the backward's K, V and dO: its Q map (64-row boxes) is the
    # forward's, from the map cache
    assert len(maps) == 7
    q_map, do_map = maps[0], maps[6]
    assert q_map.global_strides == (64 * 2, 77 * 64 * 2, 4 * 77 * 64 * 2)
    assert do_map.global_strides == (4 * 64 * 2, 64 * 2, 77 * 4 * 64 * 2)   # contiguous
    assert (q.grad.shape, k.grad.shape, v.grad.shape) == (q.shape, k.shape, v.shape)


# -- GPU: against torch's fp32 SDPA ---------------------------------------------------------------
# Tolerances, as max |error| / max |reference|: the reference takes the same rounded inputs in
# fp32, so what differs is the kernels' own rounding: P (and dS in the backward) rounded to 16
# bits before the second GEMM, the result rounded to the output type, ex2.approx. bf16 keeps 8
# significant bits (2^-9 = 2e-3 per rounding), fp16 11 (2^-12 = 2.4e-4); a few roundings in a
# chain, with room for the worst element of a tile, give 2e-2 and 5e-3, the tolerances the
# samples' own checks pass with against float64. The floor: a gradient that is zero in exact
# arithmetic (one visible key: softmax is 1 whatever the score) is rounding noise on both
# sides; the inputs are of unit scale, so it is compared at 1e-2.
TOL = {BF16: 2e-2, F16: 5e-3}
FLOOR = 1e-2
LSE_TOL = 1e-3       # f32 in the kernel as in the reference: max absolute error


def _close(name, got, want, tol, absolute=False):
    """max |got - want| <= tol * max(max |want|, FLOOR), or <= tol with `absolute`."""
    got = got.float()
    err = float((got - want).abs().max()) if want.numel() else 0.0
    top = 1.0 if absolute else max(float(want.abs().max()) if want.numel() else 0.0, FLOOR)
    finite = bool(torch.isfinite(got).all())
    print(f"{name}: max error {err:.3g}, {err / top:.3g} of max |ref| {top:.3g} "
          f"(tolerance {tol:g}){'' if finite else ', NOT FINITE'}")
    assert finite and err <= tol * top, name


def _sdpa(q, k, v, causal, scale):
    """fp32 attention of [B, S, H, D] tensors by torch's math backend, [B, S, H, D]."""
    from torch.nn.attention import SDPBackend, sdpa_kernel
    with sdpa_kernel(SDPBackend.MATH):
        o = torch.nn.functional.scaled_dot_product_attention(
            *(x.float().transpose(1, 2) for x in (q, k, v)), is_causal=causal, scale=scale,
            enable_gqa=True)
    return o.transpose(1, 2)


def _lse(q, k, causal, scale):
    """fp32 log-sum-exp of each query row's scores, [B, Hq, Sq]."""
    g = q.shape[2] // k.shape[2]
    s = torch.einsum("bqhd,bkhd->bhqk", q.float(), k.float().repeat_interleave(g, dim=2)) * scale
    if causal:
        sq, sk = q.shape[1], k.shape[1]
        visible = torch.ones(sq, sk, dtype=torch.bool, device=q.device).tril()
        s = s.masked_fill(~visible, float("-inf"))
    return torch.logsumexp(s, dim=-1)


def _inputs(b, sq, sk, hq, hkv, d, dtype, transposed, seed=0):
    """q [B, Sq, Hq, D], k and v [B, Sk, Hkv, D] of unit scale; `transposed`: views of
    [B, H, S, D] tensors, as torch's attention code holds them."""
    g = torch.Generator(device="cuda").manual_seed(seed)

    def one(s, h):
        if transposed:
            return torch.randn(b, h, s, d, generator=g, device="cuda").to(dtype).transpose(1, 2)
        return torch.randn(b, s, h, d, generator=g, device="cuda").to(dtype)

    return one(sq, hq), one(sk, hkv), one(sk, hkv)


def _dtype_id(dtype):
    return {BF16: "bf16", F16: "f16"}[dtype]


# (B, Sq, Sk, Hq, Hkv, causal, transposed): GQA with Sq < Sk, MQA with Sq > Sk, odd equal
# lengths, a single query
FORWARD_CASES = ((2, 77, 200, 4, 2, True, True), (1, 300, 129, 4, 1, True, False),
                 (2, 130, 130, 2, 2, False, True), (1, 1, 65, 2, 2, False, False))


@pytest.mark.gpu
@pytest.mark.parametrize("d", (64, 128, 256))
@pytest.mark.parametrize("dtype", (BF16, F16), ids=_dtype_id)
def test_forward_against_sdpa(dtype, d):
    with gpu_deadline(300):
        for b, sq, sk, hq, hkv, causal, transposed in FORWARD_CASES:
            q, k, v = _inputs(b, sq, sk, hq, hkv, d, dtype, transposed)
            scale = d ** -0.5
            out, lse = flash_attention(q, k, v, causal=causal, return_lse=True)
            name = f"{_dtype_id(dtype)} d{d} B={b} Sq={sq} Sk={sk} Hq={hq} Hkv={hkv} " \
                   f"causal={causal}{' transposed' if transposed else ''}"
            assert out.shape == q.shape and out.dtype == dtype
            _close(name + " O", out, _sdpa(q, k, v, causal, scale), TOL[dtype])
            _close(name + " LSE", lse, _lse(q, k, causal, scale), LSE_TOL, absolute=True)


# (B, Sq, Sk, Hq, Hkv, causal, transposed): GQA causal with Sq < Sk from [B, H, S, D] views,
# MQA with Sq > Sk, one key (dq and dk exactly zero: the softmax of one score is 1)
BACKWARD_CASES = ((2, 77, 200, 4, 2, True, True), (1, 130, 77, 4, 1, False, False),
                  (1, 9, 1, 2, 1, False, False))


@pytest.mark.gpu
@pytest.mark.parametrize("d", (64, 128))
@pytest.mark.parametrize("dtype", (BF16, F16), ids=_dtype_id)
def test_backward_against_fp32_autograd(dtype, d):
    with gpu_deadline(300):
        for b, sq, sk, hq, hkv, causal, transposed in BACKWARD_CASES:
            q, k, v = _inputs(b, sq, sk, hq, hkv, d, dtype, transposed, seed=1)
            do = torch.randn(b, sq, hq, d, device="cuda").to(dtype)
            mine = [x.detach().requires_grad_() for x in (q, k, v)]
            flash_attention(*mine, causal=causal).backward(do)
            ref = [x.detach().float().requires_grad_() for x in (q, k, v)]
            _sdpa(*ref, causal, d ** -0.5).backward(do.float())
            name = f"{_dtype_id(dtype)} d{d} B={b} Sq={sq} Sk={sk} Hq={hq} Hkv={hkv} " \
                   f"causal={causal}"
            for n, got, want in zip(("dq", "dk", "dv"), mine, ref, strict=True):
                assert got.grad.shape == got.shape
                _close(f"{name} {n}", got.grad, want.grad, TOL[dtype])


# (dtype, D, causal, Hkv): each forward kernel's packed form; 4 query heads
VARLEN_CASES = ((BF16, 64, True, 2), (BF16, 128, False, 2), (BF16, 256, True, 1),
                (F16, 64, False, 1), (F16, 128, True, 2), (F16, 256, False, 2))
LENGTHS = (0, 1, 77, 300, 0, 129, 1)       # empty and one-token sequences among odd lengths


def _packed(lengths, hq, hkv, d, dtype, seed=2):
    g = torch.Generator(device="cuda").manual_seed(seed)
    total = sum(lengths)
    cu = torch.tensor([0, *torch.tensor(lengths).cumsum(0).tolist()], dtype=torch.int32,
                      device="cuda")
    q = torch.randn(total, hq, d, generator=g, device="cuda").to(dtype)
    k, v = (torch.randn(total, hkv, d, generator=g, device="cuda").to(dtype) for _ in range(2))
    return q, k, v, cu


@pytest.mark.gpu
@pytest.mark.parametrize("dtype, d, causal, hkv", VARLEN_CASES,
                         ids=[f"{_dtype_id(c[0])}-d{c[1]}-{'causal' if c[2] else 'full'}-"
                              f"hkv{c[3]}" for c in VARLEN_CASES])
def test_packed_batch_against_sdpa_per_sequence(dtype, d, causal, hkv):
    with gpu_deadline(300):
        q, k, v, cu = _packed(LENGTHS, 4, hkv, d, dtype)
        out, lse = flash_attention(q, k, v, causal=causal, cu_seqlens=cu,
                                   max_seqlen=max(LENGTHS), return_lse=True)
        assert out.shape == q.shape and lse.shape == (4, q.shape[0])
        scale = d ** -0.5
        for i, (s0, s1) in enumerate(zip(cu[:-1].tolist(), cu[1:].tolist(), strict=True)):
            if s1 == s0:
                continue
            seq = [x[s0:s1].unsqueeze(0) for x in (q, k, v)]
            name = f"{_dtype_id(dtype)} d{d} causal={causal} Hkv={hkv} sequence {i} " \
                   f"(length {s1 - s0})"
            _close(name + " O", out[s0:s1], _sdpa(*seq, causal, scale)[0], TOL[dtype])
            _close(name + " LSE", lse[:, s0:s1], _lse(seq[0], seq[1], causal, scale)[0],
                   LSE_TOL, absolute=True)


@pytest.mark.gpu
def test_opcheck_on_the_gpu():
    with gpu_deadline(300):
        q, k, v = _inputs(2, 77, 130, 4, 2, 64, BF16, transposed=True, seed=3)
        dense = [x.detach().requires_grad_() for x in (q, k, v)]
        result = torch.library.opcheck(torch.ops.ptxdsl_fa.fwd.default,
                                       (*dense, None, None, True, 0.125))
        print("dense", result)
        assert set(result.values()) == {"SUCCESS"}, result
        q, k, v, cu = _packed(LENGTHS, 4, 2, 64, BF16)
        result = torch.library.opcheck(torch.ops.ptxdsl_fa.fwd.default,
                                       (q, k, v, cu, max(LENGTHS), True, 0.125))
        print("packed", result)
        assert set(result.values()) == {"SUCCESS"}, result


@pytest.mark.gpu
def test_compiled_forward_and_backward_match_eager():
    with gpu_deadline(300):
        q, k, v = _inputs(2, 77, 200, 4, 2, 128, BF16, transposed=True, seed=4)
        do = torch.randn(2, 77, 4, 128, device="cuda").to(BF16)
        eager = [x.detach().requires_grad_() for x in (q, k, v)]
        want = flash_attention(*eager, causal=True) * 2
        want.backward(do)
        compiled = [x.detach().requires_grad_() for x in (q, k, v)]
        f = torch.compile(lambda q, k, v: flash_attention(q, k, v, causal=True) * 2,
                          fullgraph=True)
        got = f(*compiled)
        got.backward(do)
        assert torch.equal(got, want)     # the same kernel on the same inputs
        for n, a, b in zip(("dq", "dk", "dv"), compiled, eager, strict=True):
            # dQ is summed with atomics, in no fixed order: close, not equal
            _close(f"compiled {n}", a.grad, b.grad.float(), TOL[BF16])


@pytest.mark.gpu
def test_packed_batch_replays_from_a_cuda_graph():
    with gpu_deadline(300):
        q, k, v, cu = _packed(LENGTHS, 4, 2, 64, BF16)
        static = [x.clone() for x in (q, k, v)]

        def run():
            return flash_attention(*static, causal=True, cu_seqlens=cu, max_seqlen=max(LENGTHS))

        # warm up (load the module, fill the launch cache) on the stream that then captures
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            run()
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, stream=side):
            out = run()
        q2, k2, v2, _ = _packed(LENGTHS, 4, 2, 64, BF16, seed=5)
        for s, x in zip(static, (q2, k2, v2), strict=True):
            s.copy_(x)
        graph.replay()
        torch.cuda.synchronize()
        want = flash_attention(q2, k2, v2, causal=True, cu_seqlens=cu, max_seqlen=max(LENGTHS))
        assert torch.equal(out, want)
