"""The benchmark harness's pure-Python parts (no GPU; no figures are asserted): the emitter
benchmark at a small size, the results -> Markdown rendering, and the PTX of the benchmark
kernels assembling offline."""

from __future__ import annotations

import json
import re

import pytest

from benchmarks import emitter
from benchmarks.common import Section, environment, guarded, summarize
from benchmarks.report import fmt, render
from benchmarks.run_all import SECTIONS, _module_doc


def test_summarize():
    assert summarize([3.0, 1.0, 2.0]) == {"median": 2.0, "min": 1.0, "max": 3.0, "n": 3}
    with pytest.raises(ValueError):
        summarize([])


def test_emitter_benchmark_small():
    count, build_s, emit_s, size = emitter.build_and_emit(600)
    assert count >= 600 and build_s > 0 and emit_s > 0 and size > count * 10
    section = Section("emitter", "5. Emitter")
    emitter.run(section, n_instructions=600, reps=2)
    assert section.error is None
    names = [r["name"] for r in section.rows]
    assert any(n.startswith("build + emit") for n in names)
    assert any(n.startswith("hazard checker, largest sample (") for n in names)
    assert all(r["n"] >= 1 and r["min"] <= r["median"] <= r["max"] for r in section.rows)
    rate, parse = sorted(section.targets, key=lambda t: t["goal"] != ">= 200,000")
    assert rate["goal"] == ">= 200,000" and isinstance(rate["met"], bool)
    assert parse["goal"] == "< 2 s" and parse["met"] is True   # a 600-line file
    assert any(n.startswith("parse_ptx, ") and "-line PTX file" in n for n in names)


def test_failing_section_is_recorded_not_raised():
    def body(section):
        section.row("first", [1.0, 2.0], "ms")
        raise RuntimeError("boom")
    section = guarded(Section("x", "X"), body)
    assert section.error == "RuntimeError: boom"
    assert section.rows[0]["median"] == 1.5


def _results():
    ok = Section("a", "1. Something fast", "What it measures.\n\n- item one\n- item two")
    ok.row("ptxdsl", [10.0, 12.0, 11.0], "GB/s", "verified")
    ok.skip("CuPy", "not installed")
    ok.target("ratio", 1.05, ">= 1.00", True)
    ok.target("other | ratio", 0.5, ">= 0.93", False)
    ok.note("a note")
    bad = Section("b", "2. Broken")
    bad.error = "RuntimeError: boom"
    return {"command": "python -m benchmarks", "environment": {"gpu": "NVIDIA H100 80GB HBM3",
            "cuda_driver_api": "13.0", "date": "2026-11-22 00:00 UTC"},
            "sections": [ok.as_dict(), bad.as_dict()]}


def test_render_markdown():
    results = json.loads(json.dumps(_results()))     # what results.json holds
    md = render(results)
    assert md.startswith("# Benchmarks\n")
    assert "| GPU | NVIDIA H100 80GB HBM3 |" in md
    assert "| ptxdsl | 11.00 | 10.00 | 12.00 | GB/s | 3 | verified |" in md
    assert "| CuPy | — | — | — | " in md and "not measured: not installed" in md
    assert "| ratio | 1.050 | >= 1.00 | met |" in md
    assert "other \\| ratio" in md and "**missed**" in md       # pipes escaped
    assert "**This section failed:** `RuntimeError: boom`" in md
    assert "## Targets at a glance" in md and "- a note" in md


def test_fmt():
    assert fmt(None) == "—"
    assert fmt(123456.7) == "123,457"
    assert fmt(2.5) == "2.500"
    assert fmt(0.01234) == "0.0123"
    # a value below 1 never reads as 1 (a missed ratio goal of 1.00 at 0.9999)
    assert fmt(0.9999) == "0.9999" and fmt(0.99995) == "0.99995" and fmt(0.9994) == "0.999"
    assert fmt(-0.9999) == "-0.9999"


def test_section_docs_and_environment():
    for name in SECTIONS:
        assert _module_doc(name), name
    env = environment()
    assert "python" in env and "date" in env


def test_benchmark_kernels_assemble():
    """The TMA copy and launch-probe PTX assemble for Hopper with nvJitLink (no GPU)."""
    from benchmarks.launch_overhead import build_module as probe
    from benchmarks.tma_copy_kernel import CONFIGS, build_module, kernel_name
    module = build_module(CONFIGS[:1])
    ptx = module.emit()
    assert f".entry {kernel_name(*CONFIGS[0])}(" in ptx
    assert "cp.async.bulk.wait_group.read 1;" in ptx
    assert "mbarrier.arrive.expect_tx.release.cta.shared::cta.b64" in ptx
    assert len(module.assemble("sm_90")) > 1000
    assert len(probe().assemble("sm_90")) > 1000


def test_progress_and_ctrl_c_keep_the_sections_done(monkeypatch, tmp_path, capsys):
    from benchmarks import run_all
    ran = []

    def fake_section(name, gpu_reason, isolate=True):
        if ran:                                   # Ctrl-C during the second section
            raise KeyboardInterrupt
        ran.append(name)
        s = Section(name, run_all.SECTIONS[name][0])
        s.target("emitter | instructions/s", 250_000, ">= 200,000", True)
        return s
    monkeypatch.setattr(run_all, "run_section", fake_section)
    monkeypatch.setattr(run_all, "environment", lambda: {"gpu_skip_reason": "none here"})
    rc = run_all.main(["--only", "emitter", "tma_copy", "--out-dir", str(tmp_path)])
    out = capsys.readouterr().out
    assert rc == 130 and ran == ["emitter"]
    assert "[1/2] emitter" in out and "[2/2] tma_copy" in out
    assert "emitter | instructions/s | " in out and "| >= 200,000 | met" in out
    assert "interrupted after 1 of 2 sections" in out
    assert not (tmp_path / "BENCHMARKS.md").exists()        # a partial run replaces nothing


def test_checker_note_times_the_checker_and_counts_findings():
    from benchmarks.common import checker_note
    from ptxdsl import Addr, Kernel, Module, t
    k = Kernel("tiny")
    k.st(Addr(k.cvta(k.ld_param(k.param_ptr("out")), "global", to=True)),
         k.mov(1, type=t.u32), space="global")
    k.ret()
    note = checker_note(Module([k], name="tiny_mod"), reps=2)
    assert re.fullmatch(r"hazard checker on tiny_mod \(tiny\): \d+ ms median of 2, 0 findings",
                        note), note



def test_interleaved_gpu_ms_settles_untimed_then_takes_turns(monkeypatch):
    """settle_s runs the candidates in turns, untimed, before the first sample; the samples
    then alternate AB, BA, AB, each a burst, and each is the burst's mean."""
    import ptxdsl.runtime as rt
    from benchmarks import common

    log = []

    class FakeEvent:
        def record(self, stream=None):
            log.append("record")

        def synchronize(self):
            pass

        def elapsed_ms(self, other):
            return 6.0

        def close(self):
            pass

    class FakeTime:           # each reading is 0.5 s after the one before
        now = 0.0

        @classmethod
        def perf_counter(cls):
            cls.now += 0.5
            return cls.now

    monkeypatch.setattr(rt, "Event", FakeEvent)
    monkeypatch.setattr(common, "time", FakeTime)
    launches = {"a": lambda: log.append("a"), "b": lambda: log.append("b")}
    out = common.interleaved_gpu_ms(launches, reps=3, warmup=1, burst=2, settle_s=1.0)
    assert out == {"a": [3.0] * 3, "b": [3.0] * 3}
    timed = ["record", "a", "a", "record", "record", "b", "b", "record",
             "record", "b", "b", "record", "record", "a", "a", "record",
             "record", "a", "a", "record", "record", "b", "b", "record"]
    # warm-up, then one untimed round (the clock reads 1.0, 1.5: one turn), then the samples
    assert log == ["a", "b"] + ["a", "a", "b", "b", "record"] + timed
    log.clear()
    FakeTime.now = 0.0
    common.interleaved_gpu_ms(launches, reps=3, warmup=1, burst=2)
    assert log == ["a", "b"] + timed
    # hold: before each sample's start event, the GPU is held for ISSUE_US per launch of
    # the burst (at most HOLD_MAX_US), on the timed stream; the settling turns and warm-up
    # are not held
    log.clear()
    FakeTime.now = 0.0
    monkeypatch.setattr(common, "hold_gpu", lambda us, stream=None: log.append(("hold", us,
                                                                                   stream)))
    common.interleaved_gpu_ms(launches, reps=3, warmup=1, burst=2, stream="s", hold=True)
    held = [("hold", min(2 * common.ISSUE_US, common.HOLD_MAX_US), "s")]
    assert log == ["a", "b"] + [x for ev in [timed[i:i + 4] for i in range(0, 24, 4)]
                                for x in held + ev]


@pytest.mark.gpu
def test_hold_gpu_keeps_the_stream_busy_that_long():
    """The hold kernel runs for the time asked (%globaltimer), not much longer."""
    from benchmarks import common
    from ptxdsl.runtime import Event
    start, end = Event(), Event()
    start.record()
    common.hold_gpu(3000)
    end.record()
    end.synchronize()
    assert 3.0 <= start.elapsed_ms(end) < 30.0


# -- section 8, attention: what runs without a GPU -------------------------------------------------
def test_attention_shapes_and_targets_are_the_issues():
    from benchmarks import attention as A
    from benchmarks.compile_latency import load_sample
    for s in A.DENSE_S:
        for d in A.DENSE_D:
            b, h = A.dense_shape(s, d)
            assert b * s == 16384 and h * d == 2048, (s, d)
    assert sorted(A.DENSE_S) == [512, 1024, 2048, 4096, 8192, 16384]
    assert sorted(A.DENSE_D) == [64, 128, 256] and sorted(A.BWD_D) == [64, 128]
    assert set(A.BWD_S) == {2048, 4096, 8192} and A.BWD_GOAL_D == 128
    assert set(A.DENSE_D) <= set(load_sample("flash_attention").BLOCKS)
    assert set(A.BWD_D) <= set(load_sample("flash_attention_bwd").HEAD_DIMS)
    assert A.fwd_goal(512) == 1.00 and {A.fwd_goal(s) for s in A.DENSE_S[1:]} == {1.05}
    assert (A.VARLEN_GOAL, A.BWD_GOAL) == (1.20, 1.00)
    lengths = A.varlen_lengths()
    assert lengths == A.varlen_lengths() and len(lengths) == 32      # seeded
    assert 64 <= min(lengths) and max(lengths) <= 8192 and len(set(lengths)) > 16
    assert A.attention_flops(2, 16, 1024, 128, False) == 4 * 2 * 16 * 1024 ** 2 * 128
    assert A.attention_flops(2, 16, 1024, 128, True, backward=True) == \
        2.5 * A.attention_flops(2, 16, 1024, 128, False) / 2
    for flops in (1e9, A.attention_flops(1, 16, 16384, 128, False)):   # tiny .. the longest
        reps, burst = A.timing(flops)
        assert 2 <= burst <= 40 and reps in (9, 15)
    doc = " ".join(A.__doc__.split())          # what BENCHMARKS.md says is what runs
    assert f"SETTLE_S = {A.SETTLE_S:g} s" in doc and f"BUDGET_S = {A.BUDGET_S:g} s" in doc
    assert f"bursts of {A.MAPS_BURST} back-to-back" in doc and "15 samples, 9 for" in doc


def test_attention_rows_targets_and_markdown_from_fake_times():
    from benchmarks import attention as A
    from benchmarks.report import render_section
    section = Section("attention", "8. Attention")
    flops = A.attention_flops(4, 16, 4096, 128, False)
    times = {"ptxdsl": [1.0, 1.0, 1.1], "torch SDPA cuDNN": [1.2, 1.1, 1.2],
             "torch SDPA flash": [1.3, 1.3, 1.3]}
    A.compare(section, "fwd D=128 S=4096", times, flops, 1.05, ours_note="verified: x")
    (target,) = section.targets
    assert target == {"name": "fwd D=128 S=4096: best torch / ptxdsl", "value": 1.2,
                      "goal": ">= 1.05", "met": True, "note": "best: torch SDPA cuDNN"}
    ours = section.find("fwd D=128 S=4096: ptxdsl")
    assert ours["unit"] == "TFLOP/s" and ours["median"] == pytest.approx(flops / 1e9)
    assert ours["note"].startswith("56% of dense bf16 peak; 1.000 ms; verified: x")
    # the backward's target is cuDNN's, whichever torch backend is fastest
    A.compare(section, "bwd D=128 S=2048", {"ptxdsl": [2.0], "torch SDPA cuDNN backward":
              [1.9], "torch SDPA flash backward": [1.5]}, flops, 1.00,
              versus="torch SDPA cuDNN backward")
    assert section.targets[-1]["name"] == "bwd D=128 S=2048: torch SDPA cuDNN backward / ptxdsl"
    assert section.targets[-1]["value"] == 0.95 and section.targets[-1]["met"] is False
    assert section.find("bwd D=128 S=2048: torch SDPA flash backward / ptxdsl")["median"] == 0.75
    md = "\n".join(render_section(section.as_dict()))
    assert "| fwd D=128 S=4096: torch SDPA cuDNN / ptxdsl | 1.200 | 1.200 | 1.200 | ratio | 1 | " \
           "of the median times; the fastest torch baseline |" in md
    assert "| bwd D=128 S=2048: torch SDPA cuDNN backward / ptxdsl | 0.95 | >= 1.00 | " \
           "**missed** |" in md


def test_attention_verify_keeps_what_agrees_and_says_why_not():
    torch = pytest.importorskip("torch")
    from benchmarks import attention as A
    ours = torch.zeros(4, 8)

    def candidate(value):
        return lambda: (lambda: torch.full((4, 8), value), lambda out: out)

    def refused():
        raise RuntimeError("No available kernel. Aborting execution.")
    section = Section("attention", "8. Attention")
    kept, note = A.verify(torch, section, "row", ours, {
        "cuDNN": lambda: refused(), "flash": candidate(0.01), "efficient": candidate(0.5)},
        A.max_abs_diff, "max |O difference|")
    assert list(kept) == ["flash"] and note == "verified: max |O difference| flash 1.0e-02, " \
                                               "efficient 5.0e-01"
    assert [r["note"] for r in section.rows] == [
        "not measured: did not run: RuntimeError: No available kernel. Aborting execution.",
        "not measured: not timed: its output differs from ptxdsl's (max |O difference| 0.5), "
        "and ptxdsl agrees with flash's"]
    with pytest.raises(AssertionError, match=r"row: ptxdsl's output differs from flash's: "
                                             r"max \|O difference\| nan \(tolerance 0.02\)"):
        A.verify(torch, section, "row", ours, {"flash": candidate(float("nan"))},
                 A.max_abs_diff, "max |O difference|")
    with pytest.raises(AssertionError, match="no torch baseline ran"):
        A.verify(torch, section, "row", ours, {"cuDNN": lambda: refused()},
                 A.max_abs_diff, "max |O difference|")


def test_attention_torch_paths_match_a_reference_on_the_cpu():
    """The padded (masked or causal), per-sequence and nested-tensor paths and the backward
    candidate compute what they claim (torch's math backend, float32, small sizes)."""
    torch = pytest.importorskip("torch")
    from torch.nn.attention import SDPBackend

    from benchmarks import attention as A
    gen = torch.Generator().manual_seed(0)
    lengths, h, d = [5, 9, 1, 12], 2, 16
    q, k, v = (torch.randn(sum(lengths), h, d, generator=gen) for _ in range(3))

    def reference(causal):
        outs, start = [], 0
        for n in lengths:
            qs, ks, vs = (x[start:start + n].transpose(0, 1).double() for x in (q, k, v))
            s = qs @ ks.transpose(1, 2) / d ** 0.5
            if causal:
                s = s.masked_fill(torch.ones(n, n, dtype=torch.bool).triu(1), float("-inf"))
            outs.append((s.softmax(-1) @ vs).transpose(0, 1))
            start += n
        return torch.cat(outs)
    math_only = {"math": SDPBackend.MATH}
    for causal in (False, True):
        paths = A.varlen_candidates(torch, math_only, q, k, v, lengths, causal)
        ran = {}
        for name, make in paths.items():
            call, out, why = A.first_run(torch, make)
            if call is not None:
                ran[name] = A.max_abs_diff(out, reference(causal))
        assert set(ran) >= {"padded SDPA, math", "per-sequence SDPA loop, math"}, ran
        assert max(ran.values()) < 1e-5, ran
    # the dense candidate and the backward candidate on [B, S, H, D] tensors
    qd, kd, vd, dout = (torch.randn(2, 7, h, d, generator=gen) for _ in range(4))
    call, out, why = A.first_run(torch, A.dense_candidates(torch, math_only, qd, kd, vd,
                                                           True)["torch SDPA math"])
    leaves = [x.detach().double().requires_grad_() for x in (qd, kd, vd)]
    want = torch.nn.functional.scaled_dot_product_attention(
        *(x.transpose(1, 2) for x in leaves), is_causal=True).transpose(1, 2)
    assert why is None and out.shape == qd.shape and A.max_abs_diff(out, want.detach()) < 1e-5
    call, grads, why = A.first_run(torch, A.backward_candidate(
        torch, SDPBackend.MATH, qd, kd, vd, dout, True))
    expected = torch.autograd.grad(want, leaves, dout.double())
    assert why is None and A.grad_error(grads, expected) < 1e-5
    again = [g.transpose(1, 2) for g in call()]   # the timed call repeats the backward
    assert A.grad_error(again, grads) == 0


def test_attention_recorder_gives_the_maps_kernels_launch(monkeypatch):
    """forward_varlen through the Recorder: its three launches, made by none, in order."""
    from benchmarks import attention as A
    from benchmarks.compile_latency import load_sample
    fa = load_sample("flash_attention")
    monkeypatch.setattr(fa, "tensor_map", lambda *args: "map")    # no driver here
    monkeypatch.setattr(fa, "sm_count", lambda: 132)                # an H100
    launches = A.Recorder()
    h, d, nseq, total = 16, 128, 3, 1000
    fa.forward_varlen(launches, 1, 2, 3, 4, 5, 6, 7, shape=(nseq, 500, total, h, h, d),
                      strides=dict.fromkeys("qkvo", (h * d, d)), causal=True)
    (maps, grid, block, args, kwargs), tiles, attention = launches.calls
    assert (maps, grid, block, kwargs) == ("fa_varlen_maps", nseq, 32, {"stream": None})
    assert args[:6] == ("map", "map", "map", "map", 6, 7)          # templates, cu, workspace
    assert tiles[:3] == ("fa_varlen_tiles", 1, 256) and tiles[3][0] == 6
    assert attention[0] == "fa_fwd_bf16_d128_varlen_n160" and attention[1] == 132


def test_attention_section_skips_without_a_cuda_device():
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("a CUDA device is present")
    from benchmarks import attention
    section = Section("attention", "8. Attention")
    attention.run(section)
    assert section.error == f"skipped: torch {torch.__version__} sees no CUDA device"


class _FakeSamples:
    """The two attention samples' host functions on the CPU, computing with torch through the
    pointers they are given (as the real ones hand them to the GPU): the section's rows then
    run end to end here, minus the GPU. `error` is added to ptxdsl's forward output."""

    def __init__(self, torch, error=0.0):
        self.torch, self.error, self.maps_launches, self.tiles_launches = torch, error, 0, 0

    def view(self, ptr, shape, dtype):
        import ctypes
        import math
        nbytes = math.prod(shape) * self.torch.empty((), dtype=dtype).element_size()
        return self.torch.frombuffer((ctypes.c_char * nbytes).from_address(ptr),
                                     dtype=dtype).view(shape)

    def attention(self, q, k, v, causal):          # [.., S, H, D] -> the same, in f32
        out = self.torch.nn.functional.scaled_dot_product_attention(
            *(x.transpose(-3, -2).float() for x in (q, k, v)), is_causal=causal)
        return out.transpose(-3, -2) + self.error

    # samples/flash_attention.py
    def workspace_bytes(self, nseq, total, heads):
        return 512 * nseq

    def forward(self, module, q, k, v, o, lse, *, shape, strides, causal):
        b, s, _, h, _, d = shape
        bf16 = self.torch.bfloat16
        q, k, v, o = (self.view(p, (b, s, h, d), bf16) for p in (q, k, v, o))
        o.copy_(self.attention(q, k, v, causal))

    def forward_varlen(self, module, q, k, v, o, lse, cu, ws, *, shape, strides, causal):
        nseq, _, total, h, _, d = shape
        module["fa_varlen_maps"].launch(nseq, 32, (cu, ws), stream=None)
        module["fa_varlen_tiles"].launch(1, 256, (cu, ws), stream=None)
        q, k, v, o = (self.view(p, (total, h, d), self.torch.bfloat16) for p in (q, k, v, o))
        bounds = self.view(cu, (nseq + 1,), self.torch.int32).tolist()
        for s0, s1 in zip(bounds[:-1], bounds[1:], strict=True):
            o[s0:s1] = self.attention(q[s0:s1], k[s0:s1], v[s0:s1], causal)

    # samples/flash_attention_bwd.py
    def Workspace(self, *shape):
        return shape

    def backward(self, module, q, k, v, o, do, lse, dq, dk, dv, *, B, Sq, Sk, Hq, Hkv, D,
                 causal, scale, workspace):
        views = [self.view(p, (B, Sq, Hq, D), self.torch.bfloat16)
                 for p in (q, k, v, do, dq, dk, dv)]
        leaves = [x.float().requires_grad_() for x in views[:3]]
        grads = self.torch.autograd.grad(self.attention(*leaves, causal), leaves, views[3])
        for out, grad in zip(views[4:], grads, strict=True):
            out.copy_(grad)


class _FakeKernels(dict):
    def __init__(self, samples):
        super().__init__()
        self.samples = samples

    def __getitem__(self, name):
        samples = self.samples

        class Launch:
            def launch(self, *args, **kwargs):
                samples.maps_launches += name == "fa_varlen_maps"
                samples.tiles_launches += name == "fa_varlen_tiles"
        return Launch()


def _fake_bench(monkeypatch, torch, samples, budget=240.0):
    from benchmarks import attention as A
    monkeypatch.setattr(A, "TOKENS", 256)
    monkeypatch.setattr(A, "HIDDEN", 256)            # B = 2, H = 2 at S = D = 128
    monkeypatch.setattr(A, "VARLEN", {"nseq": 3, "lo": 5, "hi": 40, "seed": 0, "d": 128,
                                      "heads": 2})
    monkeypatch.setattr(A, "BUDGET_S", budget)

    def turns(launches, *, reps, burst, warmup=2, settle_s=0.0, hold=False):
        assert hold            # the GPU's time alone (benchmarks/attention.py)
        for launch in launches.values():
            launch()
        return {name: [{"ptxdsl": 0.8, "set-up": 0.2}.get(name, 1.0)] * 3 for name in launches}
    monkeypatch.setattr(A, "interleaved_gpu_ms", turns)
    section = Section("attention", "8. Attention")
    kernels = _FakeKernels(samples)
    return section, A.Bench(section, torch, (samples, samples), (kernels, kernels), (128,),
                            (128,), device="cpu")


def test_attention_rows_run_end_to_end_on_the_cpu(monkeypatch):
    torch = pytest.importorskip("torch")
    samples = _FakeSamples(torch)
    section, bench = _fake_bench(monkeypatch, torch, samples)
    bench.run((128,), (128,), varlen=True)
    notes = {r["name"]: r["note"] for r in section.rows}
    assert not [n for n in notes.values() if "failed" in n], notes
    # torch's CPU build runs the flash backend only: the others say why not
    assert notes["fwd D=128 S=128 B=2 H=2: torch SDPA cuDNN"].startswith(
        "not measured: did not run: RuntimeError: ")
    assert "verified: max |O difference| torch SDPA flash " in \
        notes["fwd D=128 S=128 B=2 H=2 causal: ptxdsl"]
    targets = {t["name"]: (t["value"], t["met"], t["note"]) for t in section.targets}
    lengths = "3 sequences of 23..35 tokens (85 in all)"
    assert targets == {
        "fwd D=128 S=128 B=2 H=2: best torch / ptxdsl": (1.25, True, "best: torch SDPA flash"),
        "fwd D=128 S=128 B=2 H=2 causal: best torch / ptxdsl":
            (1.25, True, "best: torch SDPA flash"),
        f"varlen D=128 H=2, {lengths}: best torch / ptxdsl":
            (1.25, True, "best: per-sequence SDPA loop, flash"),
        f"varlen D=128 H=2, {lengths} causal: best torch / ptxdsl":
            (1.25, True, "best: per-sequence SDPA loop, flash"),
        "bwd D=128 S=128 B=2 H=2: torch SDPA cuDNN backward / ptxdsl": (1.25, True,
            "torch SDPA cuDNN backward was not timed; against the best, "
            "torch SDPA flash backward"),
        "bwd D=128 S=128 B=2 H=2 causal: torch SDPA cuDNN backward / ptxdsl": (1.25, True,
            "torch SDPA cuDNN backward was not timed; against the best, "
            "torch SDPA flash backward")}
    # every torch path that runs agrees with the reference and is timed
    for path in ("per-sequence SDPA loop", "padded SDPA"):
        for causal in ("", " causal"):
            row = section.find(f"varlen D=128 H=2, {lengths}{causal}: {path}, flash")
            assert row["unit"] == "TFLOP/s" and row["n"] == 3, row
    assert notes[f"varlen D=128 H=2, {lengths}: fa_varlen_maps + fa_varlen_tiles alone"
                 ].startswith("25.00% of ptxdsl's median time (bursts")
    # per causal: ptxdsl's checked run, its timed turn, the set-up kernels' own turn (the
    # Recorder's forward_varlen launches nothing)
    assert samples.maps_launches == samples.tiles_launches == 2 * 3


def test_attention_row_fails_on_a_wrong_result_and_rows_stop_at_the_budget(monkeypatch):
    torch = pytest.importorskip("torch")
    section, bench = _fake_bench(monkeypatch, torch, _FakeSamples(torch, error=0.05))
    bench.run((128,), (), varlen=False)
    (note,) = [r["note"] for r in section.rows if r["name"] == "fwd D=128 S=128 B=2 H=2"]
    assert re.fullmatch(r"not measured: failed: AssertionError: fwd D=128 S=128 B=2 H=2: "
                        r"ptxdsl's output differs from torch SDPA flash's: max \|O difference\| "
                        r"0\.05\d* \(tolerance 0\.02\)", note), note
    assert not section.targets
    section, bench = _fake_bench(monkeypatch, torch, _FakeSamples(torch), budget=-1.0)
    bench.run((128,), (128,), varlen=True)
    assert len(section.rows) == 6 and not section.targets
    assert {r["note"] for r in section.rows} == {"not measured: the section's -1 s were spent"}


# -- section 10, tensor-parallel GEMMs: what runs without a GPU ----------------------------------
def test_tp_gemm_rows_targets_and_figures_from_fake_times():
    from benchmarks import tp_gemm as T
    section = Section("tp_gemm", "10. TP GEMMs")
    us = {T.OURS: [1000.0, 1000.0, 1100.0], T.SEQUENTIAL: [1200.0] * 3,
          T.FUSED: [950.0] * 3, T.ALONE: [800.0] * 3}
    rows = {f"gemm_rs {m}": {name: {"us": v} for name, v in us.items()}
            for m, _, _ in T.SHAPES}
    rows["ag_gemm 8192"] = {T.OURS: {"us": [500.0]}, T.FUSED: {"error": "RuntimeError: no"}}
    T._record(section, 2, {"rows": rows, "notes": ["rank 0 on X"]})
    assert section.notes == ["W=2: rank 0 on X"]
    ours = section.find("W=2 GEMM + reduce-scatter M=8192 N=8192 K=8192: ptxdsl fused")
    # per rank: 2 * 8192^3 / 2 flops in 1 ms; it sends half of its 8192 x 8192 bf16 partial
    assert ours["note"].startswith("550 TFLOP/s per rank; sends 64.0 MiB per rank: 67 GB/s "
                                   "(15% of NVLink's 450 GB/s)")
    alone = section.find("W=2 GEMM + reduce-scatter M=8192 N=8192 K=8192: matmul alone")
    assert "sends" not in alone["note"]
    seq, fused = section.targets[:2]
    assert seq["name"].endswith("M=8192 N=8192 K=8192: torch sequential / ptxdsl")
    assert (seq["value"], seq["goal"], seq["met"]) == (1.2, ">= 1.15", True)
    assert (fused["value"], fused["goal"], fused["met"]) == (0.95, ">= 1.00", False)
    # a baseline that did not run: its row says why, and no target compares with it
    skipped = [r for r in section.rows if r["median"] is None]
    assert [r["name"] for r in skipped] == [
        "W=2 all-gather + GEMM M=8192 N=8192 K=8192: torch symm-mem fused"]
    assert skipped[0]["note"] == "not measured: RuntimeError: no"
    assert not any("all-gather" in t["name"] for t in section.targets)
    # AG + GEMM: a rank sends its M/W x K shard to each of the W - 1 others
    assert "sends 64.0 MiB per rank" in section.find(
        "W=2 all-gather + GEMM M=8192 N=8192 K=8192: ptxdsl fused")["note"]


@pytest.mark.parametrize("name", ["allreduce", "tp_gemm"])
def test_multi_gpu_sections_skip_with_the_reason(monkeypatch, name):
    pytest.importorskip("torch")
    import importlib
    bench = importlib.import_module(f"benchmarks.{name}")
    monkeypatch.setattr("ptxdsl.runtime.multi_gpu_skip_reason", lambda n: f"only 0 of {n}")
    section = Section(name, "a multi-GPU section")
    bench.run(section)
    assert section.error is None and section.notes[0].startswith("torch ")
    assert [(r["name"], r["note"]) for r in section.rows] == [
        (f"W={w}", f"not measured: needs {w} Hopper GPUs with peer access: only 0 of {w}")
        for w in (2, 4)]
