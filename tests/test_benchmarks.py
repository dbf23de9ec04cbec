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
