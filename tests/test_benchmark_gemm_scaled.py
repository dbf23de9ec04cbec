"""benchmarks/gemm.py's rows for fp8 with row-wise and per-128-block scales, end to end on the
CPU: samples/gemm_fp8_scaled.py's torch helpers on CPU tensors, its launch replaced by the
fp32 computation written through the pointers it is given, torch._scaled_mm by the same
computation (or by a refusal of the block-wise mode, as a torch without cuBLAS 12.9 gives),
the timing by fixed times. What is checked: each side is verified before it is timed, the
rows and ratios are made, and without a block-wise torch path the block-wise rows compare
with the row-wise mode and say so."""

from __future__ import annotations

import ctypes
import math
import runpy
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

SAMPLE = Path(__file__).resolve().parent.parent / "samples" / "gemm_fp8_scaled.py"
SHAPES = ((256, 384, 512), (128, 256, 256))


def _view(ptr, shape, dtype):
    nbytes = math.prod(shape) * torch.empty((), dtype=dtype).element_size()
    return torch.frombuffer((ctypes.c_char * nbytes).from_address(ptr),
                            dtype=dtype).view(shape)


class _FakeSample:
    """The sample's host side on the CPU (its real helpers; `launch` computes in torch)."""

    def __init__(self, error=0.0):
        self.ns = runpy.run_path(str(SAMPLE), run_name="__ptxdsl_test__")
        self.error, self.launches = error, 0
        for name in ("SCALINGS", "VARIANTS", "config_for", "scale_shapes", "torch_reference",
                     "torch_scales", "rel_error", "torch_scaled_mm"):
            setattr(self, name, self.ns[name])

    class gh:
        @staticmethod
        def tensor_maps(*args):
            return None, None

        @staticmethod
        def output_map(*args):
            return None

    def torch_inputs(self, scaling, m, n, k):
        return self.ns["torch_inputs"](scaling, m, n, k, device="cpu")

    def build_module(self):
        sample = self

        class Built:
            def load(self):
                return {cfg.name: type("Fn", (), {"name": cfg.name, "num_regs": 168})()
                        for v in sample.VARIANTS.values() for cfg in v.values()}
        return Built()

    def launch(self, mod, scaling, a, b, c, sa, sb, m, n, k, *, sms, maps, cfg):
        assert cfg.name in mod and sms == 132
        self.launches += 1
        e4m3 = torch.float8_e4m3fn
        sa_shape, sb_shape = self.scale_shapes(scaling, m, n, k)
        y = self.torch_reference(_view(a, (m, k), e4m3), _view(b, (n, k), e4m3),
                                 _view(sa, sa_shape, torch.float32),
                                 _view(sb, sb_shape, torch.float32))
        _view(c, (m, n), torch.bfloat16).copy_(y * (1 + self.error))


def _scaled_mm(block_wise, reference):
    """torch._scaled_mm(x, w.t(), ...) on the CPU: the fp32 formula (`reference`) in bf16,
    or a refusal of the block-wise layouts."""
    def fake(x, wt, scale_a, scale_b, out_dtype):
        if scale_a.shape[1] != 1 or scale_b.shape[0] != 1:
            if not block_wise:
                raise RuntimeError("Invalid scaling configuration (no cuBLAS 12.9 here)")
            scale_a, scale_b = scale_a.contiguous(), scale_b.t().contiguous()
        return reference(x, wt.t(), scale_a, scale_b).to(out_dtype)
    return fake


def _run(monkeypatch, sample, block_wise=True):
    from benchmarks import gemm as G
    from benchmarks.common import Section
    monkeypatch.setattr(G, "load_sample", lambda name: sample)
    monkeypatch.setattr(G, "checker_note", lambda built: "checker: 0 findings")
    monkeypatch.setattr(torch.cuda, "synchronize", lambda: None)
    monkeypatch.setattr(torch, "_scaled_mm", _scaled_mm(block_wise, sample.torch_reference))

    def turns(launches, *, reps, burst, warmup=2, settle_s=0.0, hold=False):
        assert hold            # section 7 times the GPU's work alone (benchmarks/gemm.py)
        for launch in launches.values():
            launch()
        return {name: [0.8 if name == "ptxdsl" else 1.0] * 3 for name in launches}
    monkeypatch.setattr(G, "interleaved_gpu_ms", turns)
    section = Section("gemm", "7. Dense GEMM")
    G._scaled(section, torch, 132, shapes=SHAPES)
    return section


def test_scaled_rows_verify_then_time_both_scalings(monkeypatch):
    sample = _FakeSample()
    section = _run(monkeypatch, sample)
    rows = {r["name"]: r for r in section.rows}
    for scaling in ("row", "block"):
        for m, n, k in SHAPES:
            shape = f"e4m3 {scaling}-wise scales M={m} N={n} K={k}"
            label = f"torch._scaled_mm {scaling}-wise"
            assert rows[f"{shape}: ptxdsl / {label}"]["median"] == pytest.approx(1.25)
            target = [t for t in section.targets if t["name"] == f"{shape}: ptxdsl / {label}"]
            assert [(t["goal"], t["met"]) for t in target] == [(">= 1.00", True)]
            assert "verified (rel. error" in rows[f"{shape}: {label}"]["note"]
            kernel = sample.config_for(scaling, m).name
            assert rows[f"{shape}: ptxdsl"]["note"].endswith(f"kernel {kernel}")
    # per row: the checked launch and the timed turn
    assert sample.launches == 2 * 2 * len(SHAPES)
    assert any("gemm_fp8_blockwise: block-wise scales, 128-column tiles" in n
               for n in section.notes), section.notes


def test_without_a_block_wise_torch_path_the_rows_say_so(monkeypatch):
    section = _run(monkeypatch, _FakeSample(), block_wise=False)
    rows = {r["name"] for r in section.rows}
    m, n, k = SHAPES[0]
    shape = f"e4m3 block-wise scales M={m} N={n} K={k}"
    assert f"{shape}: ptxdsl / torch._scaled_mm row-wise" in rows
    assert any(note.startswith(f"block-wise M={m} N={n} K={k}: torch._scaled_mm has no "
                               "block-wise path here (RuntimeError: Invalid scaling")
               for note in section.notes), section.notes


def test_a_wrong_result_stops_the_row(monkeypatch):
    with pytest.raises(AssertionError, match=r"row-wise e4m3 256x384x512: ptxdsl's relative "
                       r"error 0.0[0-9]+ against the fp32 computation"):
        _run(monkeypatch, _FakeSample(error=0.05))
