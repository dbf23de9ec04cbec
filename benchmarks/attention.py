"""Row 8: attention, the samples `samples/flash_attention.py` (forward, dense and varlen) and
`samples/flash_attention_bwd.py` (backward) against torch's SDPA backends (cuDNN, flash,
efficient) in the same process on the same GPU, bf16.

- Forward, dense: FlashAttention-3's shapes (batch x seqlen = 16k tokens, hidden 2048, so
  B = 16384 / S and H = 2048 / D): S = 512 ... 16k, D = 64, 128, 256, causal and not.
  ptxdsl's `forward` on [B, S, H, D] tensors against each backend under
  `torch.nn.attention.sdpa_kernel` on the [B, H, S, D] views of the same tensors
  (`q.transpose(1, 2)`).
- Forward, variable length: 32 sequences of lengths drawn uniformly from 64..8192 (seeded),
  D = 128, Hq = Hkv = 16, causal and not. ptxdsl's `forward_varlen` (the maps kernel, the
  tile-list kernel, then the attention kernel) on the packed tensors against three torch
  paths, each under each backend: SDPA per sequence in a loop; padded SDPA (the batch padded
  to the longest sequence, B = 32; non-causal with a [B, 1, 1, S] key-padding mask, causal
  with `is_causal` alone, which already hides every padded key from the real rows); SDPA on
  nested tensors (`torch.nested.nested_tensor_from_jagged` over the same packed tensors).
  Only the SDPA calls are timed: padding the inputs and unpadding or gathering the outputs
  are left out, in torch's favour. The two set-up kernels are also timed alone (bursts of
  100 back-to-back launches of the pair with the arguments `forward_varlen` gives them), for
  their share of ptxdsl's time.
- Backward, D = 128 and 64, S = 2k, 4k, 8k (the same B and H), causal and not: ptxdsl's
  `backward` (all three kernels: the row statistics, the main kernel, the dQ conversion)
  from ptxdsl's forward's O and LSE, against each backend's backward. The backend's forward
  runs once with its graph kept; the timed call is
  `torch.autograd.grad(out, (q, k, v), dout, retain_graph=True)`, which runs the backend's
  backward kernels and nothing else (q, k, v are the [B, H, S, D] views themselves, made
  leaves, so no transpose or copy is added; dout has the output's strides).

Inputs are random normal. Before a row is timed, ptxdsl's result is compared with every
baseline that runs: the forward's O by the largest absolute difference (below 2e-2), the
backward's dQ, dK, dV by the largest difference over the largest gradient (below 2e-2).
ptxdsl must agree with the first baseline that runs (in the order of the rows: cuDNN, flash,
efficient; for varlen the per-sequence loops first) or the row fails; a later baseline that
disagrees with ptxdsl is not timed, and its row says by how much. A baseline that does not
run (a backend that refuses the shape, a torch path that is missing) gets a row with torch's
reason. Times are CUDA-event medians of bursts of back-to-back launches, each burst queued
behind a kernel that holds the GPU while the host issues it (`interleaved_gpu_ms(hold=True)`),
so a sample is the GPU's time alone, 15 samples, 9 for launches over 2 ms; all the
candidates of a row take turns, after SETTLE_S = 1 s of untimed turns (sections 6 and 7
take 2 s; here the rows run back to back, so the GPU is already under load). The section
starts no row after BUDGET_S = 270 s (its process is ended at 300 s; the last rows, the
backward's, take seconds each); a row left out says so.
TFLOP/s count 4 B H S^2 D for the forward, 2.5 times that for the backward (FlashAttention's
convention), halved when causal; varlen counts each sequence's own work, so padded SDPA's
extra work earns it nothing. The fraction of peak is against the dense bf16 tensor-core
peak of an H100/H200 SXM (989.4 TFLOP/s). Ratios are of median times: the best torch
baseline's (for the backward also cuDNN's) over ptxdsl's. Targets: forward >= 1.05 for
S >= 1k and >= 1.00 at S = 512; varlen >= 1.20 against the best torch path; backward >= 1.00
against cuDNN at D = 128. Registers per thread are the loaded functions' (at launch, before
setmaxnreg moves them); shared memory is the launch's dynamic bytes and the static bytes.
"""
from __future__ import annotations

import logging
import math
import statistics
import time
import warnings
from collections.abc import Callable, Sequence

import numpy as np

from benchmarks.common import Section, checker_note, interleaved_gpu_ms
from benchmarks.compile_latency import load_sample
from benchmarks.gemm import PEAK
from ptxdsl import Module

TOKENS, HIDDEN = 16384, 2048             # batch x seqlen, heads x head dim (FA3's shapes)
DENSE_S = (512, 1024, 2048, 4096, 8192, 16384)
DENSE_D = (128, 64, 256)                 # the main case first
BWD_S = (2048, 4096, 8192)
BWD_D = (128, 64)
VARLEN = {"nseq": 32, "lo": 64, "hi": 8192, "seed": 0, "d": 128, "heads": 16}
BACKENDS = ("cuDNN", "flash", "efficient")
TOL = 2e-2
VARLEN_GOAL, BWD_GOAL, BWD_GOAL_D = 1.20, 1.00, 128
# Untimed turns before each row's samples (sections 6 and 7 take 2 s): the rows run back to
# back, so the GPU is already under load when a row starts, and 50 rows must fit the section.
SETTLE_S = 1.0
# The section stops starting rows after this many seconds (run_all ends a section's process
# at 300 s, and a killed section loses every row it measured; the last rows, the backward's,
# take seconds each).
BUDGET_S = 270.0
BURST_MS = 6.0                           # GPU time per sample, spread over a burst
GUESS_TFLOPS = 450.0                     # to size bursts before anything is measured
MAPS_BURST = 100                         # launches per sample of the set-up kernels alone
SETUP = ("fa_varlen_maps", "fa_varlen_tiles")   # forward_varlen's kernels before the attention


def fwd_goal(s: int) -> float:
    """The forward target at sequence length s: the best torch time / ptxdsl's."""
    return 1.00 if s < 1024 else 1.05


def dense_shape(s: int, d: int) -> tuple[int, int]:
    """(B, H) of FlashAttention-3's shapes: B S = 16k tokens, H D = 2048."""
    return TOKENS // s, HIDDEN // d


def attention_flops(b: int, h: int, s: int, d: int, causal: bool, backward: bool = False
                    ) -> float:
    """4 B H S^2 D for the forward, 2.5 times that for the backward, halved when causal."""
    return 4.0 * b * h * s * s * d * (2.5 if backward else 1.0) / (2 if causal else 1)


def varlen_lengths() -> list[int]:
    """The varlen batch's sequence lengths (VARLEN's), uniform in lo..hi (both included)."""
    rng = np.random.default_rng(VARLEN["seed"])
    return [int(n) for n in rng.integers(VARLEN["lo"], VARLEN["hi"], size=VARLEN["nseq"],
                                         endpoint=True)]


def timing(flops: float) -> tuple[int, int]:
    """(samples, launches per sample) for work of `flops`: each sample a burst of about
    BURST_MS of GPU work (2 to 40 launches), 15 samples below 2 ms a launch, 9 above."""
    est_ms = flops / (GUESS_TFLOPS * 1e9)
    return (15 if est_ms < 2 else 9), max(2, min(40, round(BURST_MS / est_ms)))


# -- torch's side (device-agnostic: tests run it on the CPU) -----------------------------------
Candidate = Callable[[], tuple[Callable[[], object], Callable[[object], object]]]


def sdpa_backends(torch) -> dict:
    """BACKENDS' names -> torch's SDPBackend members."""
    from torch.nn.attention import SDPBackend
    members = (SDPBackend.CUDNN_ATTENTION, SDPBackend.FLASH_ATTENTION,
               SDPBackend.EFFICIENT_ATTENTION)
    return dict(zip(BACKENDS, members, strict=True))


def sdpa_call(torch, backend, q, k, v, causal: bool, mask=None) -> Callable[[], object]:
    """SDPA of [B, H, S, D] tensors under one backend."""
    from torch.nn.attention import sdpa_kernel
    attention = torch.nn.functional.scaled_dot_product_attention

    def call():
        with sdpa_kernel(backend):
            return attention(q, k, v, attn_mask=mask, is_causal=causal)
    return call


def dense_candidates(torch, backends: dict, q, k, v, causal: bool) -> dict[str, Candidate]:
    """Each backend's SDPA on the [B, H, S, D] views of [B, S, H, D] q, k, v; the output
    packed back to [B, S, H, D] for the comparison."""
    qt, kt, vt = (x.transpose(1, 2) for x in (q, k, v))

    def make(backend) -> Candidate:
        return lambda: (sdpa_call(torch, backend, qt, kt, vt, causal),
                        lambda out: out.transpose(1, 2))
    return {f"torch SDPA {name}": make(b) for name, b in backends.items()}


def backward_candidate(torch, backend, q, k, v, dout, causal: bool) -> Candidate:
    """The backend's backward alone: the forward runs once (when the candidate is made) with
    its graph kept; the call is autograd's backward of it. q, k, v, dout: [B, S, H, D]; the
    gradients come back as [B, S, H, D] views."""
    def make():
        leaves = [x.transpose(1, 2).detach().requires_grad_() for x in (q, k, v)]
        out = sdpa_call(torch, backend, *leaves, causal)()
        grad = torch.empty_like(out).copy_(dout.transpose(1, 2))   # the output's strides

        def call():
            return torch.autograd.grad(out, leaves, grad, retain_graph=True)
        return call, lambda grads: tuple(g.transpose(1, 2) for g in grads)
    return make


def padded(x, lengths: Sequence[int]):
    """Packed [total, H, D] -> [len(lengths), max length, H, D], zero-padded."""
    out = x.new_zeros((len(lengths), max(lengths), *x.shape[1:]))
    start = 0
    for b, n in enumerate(lengths):
        out[b, :n] = x[start:start + n]
        start += n
    return out


def unpadded(torch, x, lengths: Sequence[int]):
    """[B, S, H, D] -> packed [total, H, D] (the first lengths[b] rows of each b)."""
    return torch.cat([x[b, :n] for b, n in enumerate(lengths)])


def varlen_candidates(torch, backends: dict, q, k, v, lengths: Sequence[int], causal: bool
                      ) -> dict[str, Candidate]:
    """The torch paths for packed [total, H, D] q, k, v of sequences of `lengths`, for each
    backend; each output packed to [total, H, D] for the comparison."""
    lengths = [int(n) for n in lengths]
    offsets = np.concatenate([[0], np.cumsum(lengths)]).tolist()
    qp, kp, vp = (padded(x, lengths).transpose(1, 2) for x in (q, k, v))
    # Causal needs no mask: a padded key j >= L_b is visible only to rows i >= j, all padding.
    mask = None
    if not causal:
        seen = torch.arange(max(lengths), device=q.device)[None, :] < torch.tensor(
            lengths, device=q.device)[:, None]
        mask = seen[:, None, None, :]
    pieces = [[x[s0:s1].unsqueeze(0).transpose(1, 2) for x in (q, k, v)]
              for s0, s1 in zip(offsets[:-1], offsets[1:], strict=True)]

    def padded_path(backend):
        return (sdpa_call(torch, backend, qp, kp, vp, causal, mask),
                lambda o: unpadded(torch, o.transpose(1, 2), lengths))

    def loop_path(backend):
        from torch.nn.attention import sdpa_kernel
        attention = torch.nn.functional.scaled_dot_product_attention

        def loop():
            with sdpa_kernel(backend):
                return [attention(*p, is_causal=causal) for p in pieces]
        return loop, lambda outs: torch.cat([o[0].transpose(0, 1) for o in outs])

    def nested_path(backend):
        cu = torch.tensor(offsets, device=q.device, dtype=torch.int64)
        nq, nk, nv = (torch.nested.nested_tensor_from_jagged(
            x, cu, min_seqlen=min(lengths), max_seqlen=max(lengths)).transpose(1, 2)
            for x in (q, k, v))
        return (sdpa_call(torch, backend, nq, nk, nv, causal),
                lambda o: o.transpose(1, 2).values())
    # the plain per-sequence calls first: the first that runs is the reference (`verify`)
    paths = (("per-sequence SDPA loop", loop_path), ("padded SDPA", padded_path),
             ("nested-tensor SDPA", nested_path))
    return {f"{path}, {name}": (lambda make=make, backend=backend: make(backend))
            for path, make in paths for name, backend in backends.items()}


def first_run(torch, make: Candidate) -> tuple[Callable[[], object] | None, object, str | None]:
    """(call, packed output, None) from making and running a candidate once, or
    (None, None, why) where it does not run: the error and what torch warned or logged with
    it (its reasons for refusing a backend: warnings from C++, log records from the nested
    tensors' Python dispatch)."""
    logged = _Collect()
    logger = logging.getLogger("torch")
    logger.addHandler(logged)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            call, pack = make()
            result = pack(call())
            _sync(torch)
        return call, result, None
    except Exception as exc:  # noqa: BLE001 - a baseline that cannot run is a finding
        said = dict.fromkeys(" ".join(text.split()) for text in
                             [str(w.message) for w in caught] + logged.messages)
        why = f"{type(exc).__name__}: {' '.join(str(exc).split())}"
        if said:
            why += " (torch said: " + "; ".join(said) + ")"
        return None, None, why[:600]
    finally:
        logger.removeHandler(logged)


class _Collect(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        if "sdpa" in record.name:      # not torch's other one-time notices
            self.messages.append(record.getMessage())


def _sync(torch) -> None:
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def max_abs_diff(ours, theirs) -> float:
    return float((ours.float() - theirs.float()).abs().max())


def grad_error(ours, theirs) -> float:
    """The largest |difference| over the largest |gradient|, worst of dQ, dK, dV."""
    return max(float((a.float() - b.float()).abs().max() / b.float().abs().max().clamp_min(1e-6))
               for a, b in zip(ours, theirs, strict=True))


def verify(torch, section: Section, label: str, ours, candidates: dict[str, Candidate],
           diff: Callable[[object, object], float], what: str
           ) -> tuple[dict[str, Callable[[], object]], str]:
    """Run each candidate once and compare its output with ptxdsl's (`ours`). ptxdsl must
    agree (diff < TOL) with the first candidate that runs, else AssertionError; a later one
    that disagrees with ptxdsl is not timed. Returns the candidates to time and a note of
    the differences; a skip row records each one left out, and why."""
    kept: dict[str, Callable[[], object]] = {}
    diffs: dict[str, float] = {}
    for name, make in candidates.items():
        call, result, why = first_run(torch, make)
        if call is None:
            section.skip(f"{label}: {name}", f"did not run: {why}")
            continue
        diffs[name] = diff(ours, result)
        del result
        ref = next(iter(diffs))
        if name == ref and not diffs[name] < TOL:
            raise AssertionError(f"{label}: ptxdsl's output differs from {name}'s: {what} "
                                 f"{diffs[name]:.3g} (tolerance {TOL:g})")
        if diffs[name] < TOL:
            kept[name] = call
        else:
            section.skip(f"{label}: {name}", f"not timed: its output differs from ptxdsl's "
                                             f"({what} {diffs[name]:.3g}), and ptxdsl agrees "
                                             f"with {ref}'s")
    if not diffs:
        raise AssertionError(f"{label}: no torch baseline ran, so ptxdsl's output is unchecked")
    return kept, "verified: " + what + " " + ", ".join(f"{n} {d:.1e}" for n, d in diffs.items())


def compare(section: Section, label: str, times: dict[str, list[float]], flops: float,
            goal: float | None, versus: str | None = None, ours_note: str = "") -> None:
    """The rows of one comparison from its CUDA-event milliseconds (`times`: ptxdsl and the
    torch candidates): each candidate's TFLOP/s, the ratio of the best torch median time
    (or `versus`'s, where it was timed) over ptxdsl's, and the target at `goal`."""
    meds = {who: statistics.median(ms) for who, ms in times.items()}
    for who, ms in times.items():
        tflops = [flops / (t * 1e9) for t in ms]
        note = (f"{100 * statistics.median(tflops) / PEAK['bf16']:.0f}% of dense bf16 peak; "
                f"{meds[who]:.3f} ms")
        section.row(f"{label}: {who}", tflops, "TFLOP/s",
                    note + (f"; {ours_note}" if who == "ptxdsl" and ours_note else ""))
    theirs = {who: m for who, m in meds.items() if who != "ptxdsl"}
    if not theirs:
        if goal is not None:
            section.target(f"{label}: {versus or 'best torch'} / ptxdsl", None,
                           f">= {goal:.2f}", None, "no torch baseline was timed")
        return
    best = min(theirs, key=theirs.__getitem__)
    ref = versus if versus in theirs else best
    for who in dict.fromkeys((ref, best)):
        section.row(f"{label}: {who} / ptxdsl", [theirs[who] / meds["ptxdsl"]], "ratio",
                    "of the median times" + ("; the fastest torch baseline"
                                             if who == best else ""))
    if goal is not None:
        ratio = theirs[ref] / meds["ptxdsl"]
        name = "best torch" if versus is None else versus
        note = f"best: {best}" if versus is None else (
            "" if ref == versus else f"{versus} was not timed; against the best, {best}")
        section.target(f"{label}: {name} / ptxdsl", round(ratio, 3), f">= {goal:.2f}",
                       ratio >= goal, note)


# -- the run -----------------------------------------------------------------------------------
def run(section: Section, dense_s=DENSE_S, dense_d=DENSE_D, bwd_s=BWD_S, bwd_d=BWD_D,
        varlen: bool = True) -> None:
    try:
        import torch
    except ImportError as exc:
        section.error = f"skipped: the baselines need torch ({exc})"
        return
    if not torch.cuda.is_available():
        section.error = f"skipped: torch {torch.__version__} sees no CUDA device"
        return
    fa, fb = load_sample("flash_attention"), load_sample("flash_attention_bwd")
    t0 = time.perf_counter()
    # only the kernels measured: each costs seconds of JIT at load (the cache is off)
    configs = [cfg for d in dense_d for cfg in fa.dense_configs("bf16", d)]
    configs.append(fa.config("bf16", VARLEN["d"], varlen=True))
    built_f = Module([*map(fa.build_forward, configs), fa.build_varlen_maps(),
                      fa.build_varlen_tiles()],
                     name="flash_attention", target="sm_90a")
    built_b = fb.build_module(configs=[fb.CONFIGS["bf16", d] for d in bwd_d])
    bench = Bench(section, torch, (fa, fb), (built_f.load(), built_b.load()), tuple(dense_d),
                  tuple(bwd_d), t0=t0)
    cudnn = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
    section.note(f"torch {torch.__version__}, cuDNN {cudnn}, CUDA {torch.version.cuda}")
    for built in (built_f, built_b):
        section.note(checker_note(built, reps=3))
    bench.kernel_notes(configs)
    bench.run(dense_s, bwd_s, varlen)


class Bench:
    """The rows, each guarded: a row that fails records its error in a row of its own and
    the others still run. `samples`: the two sample modules; `modules`: their loaded
    kernels (forward, backward); `device`: where torch's tensors go."""

    def __init__(self, section: Section, torch, samples: tuple, modules: tuple,
                 dense_d: tuple[int, ...], bwd_d: tuple[int, ...], device: str = "cuda",
                 t0: float | None = None) -> None:
        self.section, self.torch, self.device = section, torch, device
        self.t0 = time.perf_counter() if t0 is None else t0
        self.fa, self.fb = samples
        self.fwd, self.bwd = modules
        self.dense_d, self.bwd_d = dense_d, bwd_d
        self.backends = sdpa_backends(torch)

    def kernel_notes(self, configs: list) -> None:
        """Registers and shared memory of each kernel measured (forward `configs`)."""
        fa, fb = self.fa, self.fb
        for cfg in configs:
            self._kernel_note(self.fwd[cfg.name], cfg.smem_bytes,
                              f"{cfg.threads} threads, setmaxnreg {fa.PRODUCER_REGS}/"
                              f"{cfg.consumer_regs}; {cfg.bm} query rows and {cfg.bn} keys per "
                              f"block, {cfg.stages} K/V stages, {cfg.q_stages} Q stages")
        self._kernel_note(self.fwd["fa_varlen_maps"], 0, "32 threads, one CTA per sequence")
        self._kernel_note(self.fwd["fa_varlen_tiles"], 0,
                          f"{self.fa.TILE_THREADS} threads, one CTA")
        for d in self.bwd_d:
            cfg = fb.CONFIGS["bf16", d]
            self._kernel_note(self.bwd[cfg.pre_name], 0, f"{32 * fb.PRE_ROWS} threads")
            self._kernel_note(self.bwd[cfg.name], cfg.smem_bytes,
                              f"{fb.THREADS} threads, setmaxnreg {fb.PRODUCER_REGS}/"
                              f"{fb.CONSUMER_REGS}; {cfg.stages} stages")
            self._kernel_note(self.bwd[cfg.convert_name], 0, f"{fb.CONVERT_THREADS} threads")

    def _kernel_note(self, fn, dynamic: int, extra: str) -> None:
        self.section.note(f"{fn.name}: {fn.num_regs} registers per thread at launch, {dynamic} "
                          f"bytes of dynamic and {fn.static_shared_bytes} of static shared "
                          f"memory, {fn.local_bytes} bytes of local memory; {extra}")

    def run(self, dense_s, bwd_s, varlen: bool) -> None:
        for d in self.dense_d:
            for s in dense_s:
                for causal in (False, True):
                    self.guarded(_label("fwd", d, s, causal), self.dense, d, s, causal)
        if varlen:
            for causal in (False, True):
                self.guarded(_varlen_label(causal), self.varlen, causal)
        for d in self.bwd_d:
            for s in bwd_s:
                for causal in (False, True):
                    self.guarded(_label("bwd", d, s, causal), self.backward, d, s, causal)
        self.section.note(f"the section took {time.perf_counter() - self.t0:.0f} s, the "
                          f"kernels' build, load and checks included (budget {BUDGET_S:.0f} s)")

    def guarded(self, label: str, body, *args) -> None:
        spent = time.perf_counter() - self.t0
        if spent > BUDGET_S:
            self.section.skip(label, f"the section's {BUDGET_S:.0f} s were spent")
            return
        try:
            body(label, *args)
        except Exception as exc:  # noqa: BLE001 - one failing row must not end the others
            self.section.skip(label, f"failed: {type(exc).__name__}: "
                                     f"{' '.join(str(exc).split())}"[:600])

    def _randn(self, shape, count: int, seed: int):
        torch = self.torch
        gen = torch.Generator(device=self.device).manual_seed(seed)
        return [torch.randn(shape, device=self.device, dtype=torch.bfloat16, generator=gen)
                for _ in range(count)]

    def _time(self, launches: dict, flops: float) -> dict[str, list[float]]:
        reps, burst = timing(flops)
        return interleaved_gpu_ms(launches, reps=reps, burst=burst, settle_s=SETTLE_S,
                                  hold=True)

    def _forward(self, q, k, v, o, lse, b: int, s: int, h: int, d: int, causal: bool):
        """ptxdsl's dense forward on contiguous [B, S, H, D] tensors, as a launch."""
        strides = dict.fromkeys(("q", "k", "v", "o"), (s * h * d, h * d, d))
        ptrs = [x.data_ptr() for x in (q, k, v, o, lse)]

        def launch() -> None:
            self.fa.forward(self.fwd, *ptrs, shape=(b, s, s, h, h, d), strides=strides,
                            causal=causal)
        return launch

    def dense(self, label: str, d: int, s: int, causal: bool) -> None:
        torch = self.torch
        b, h = dense_shape(s, d)
        q, k, v = self._randn((b, s, h, d), 3, seed=s + d)
        o = torch.full_like(q, float("nan"))
        lse = torch.empty((b, h, s), device=self.device, dtype=torch.float32)
        ours = self._forward(q, k, v, o, lse, b, s, h, d, causal)
        ours()
        _sync(torch)
        kept, note = verify(torch, self.section, label, o,
                            dense_candidates(torch, self.backends, q, k, v, causal),
                            max_abs_diff, "max |O difference|")
        flops = attention_flops(b, h, s, d, causal)
        compare(self.section, label, self._time({"ptxdsl": ours, **kept}, flops), flops,
                fwd_goal(s), ours_note=note)

    def varlen(self, label: str, causal: bool) -> None:
        torch, fa = self.torch, self.fa
        d, h = VARLEN["d"], VARLEN["heads"]
        lengths = varlen_lengths()
        nseq, total, longest = len(lengths), sum(lengths), max(lengths)
        q, k, v = self._randn((total, h, d), 3, seed=VARLEN["seed"])
        o = torch.full_like(q, float("nan"))
        lse = torch.empty((h, total), device=self.device, dtype=torch.float32)
        cu = torch.tensor(np.concatenate([[0], np.cumsum(lengths)]), device=self.device,
                          dtype=torch.int32)
        ws = torch.empty(fa.workspace_bytes(nseq, total, h), device=self.device,
                         dtype=torch.uint8)
        args = [x.data_ptr() for x in (q, k, v, o, lse, cu, ws)]
        kw = {"shape": (nseq, longest, total, h, h, d),
              "strides": dict.fromkeys(("q", "k", "v", "o"), (h * d, d)), "causal": causal}

        def ours() -> None:
            fa.forward_varlen(self.fwd, *args, **kw)
        ours()
        _sync(torch)
        kept, note = verify(torch, self.section, label, o,
                            varlen_candidates(torch, self.backends, q, k, v, lengths, causal),
                            max_abs_diff, "max |O difference|")
        flops = sum(attention_flops(1, h, n, d, causal) for n in lengths)
        times = self._time({"ptxdsl": ours, **kept}, flops)
        compare(self.section, label, times, flops, VARLEN_GOAL, ours_note=note)
        # The device-side set-up alone (the maps, the tile list), with the arguments
        # forward_varlen gives it
        launches = Recorder()
        fa.forward_varlen(launches, *args, **kw)
        setup = [(self.fwd[name], grid, block, a, kwargs)
                 for name, grid, block, a, kwargs in launches.calls if name in SETUP]

        def prepare() -> None:
            for fn, grid, block, a, kwargs in setup:
                fn.launch(grid, block, a, **kwargs)
        maps_ms = interleaved_gpu_ms({"set-up": prepare}, reps=15, burst=MAPS_BURST,
                                     hold=True)["set-up"]
        share = statistics.median(maps_ms) / statistics.median(times["ptxdsl"])
        self.section.row(f"{label}: {' + '.join(SETUP)} alone", maps_ms, "ms",
                         f"{share:.2%} of ptxdsl's median time (bursts of {MAPS_BURST} "
                         f"launches of the pair, the GPU's time alone)")

    def backward(self, label: str, d: int, s: int, causal: bool) -> None:
        torch, fb = self.torch, self.fb
        b, h = dense_shape(s, d)
        q, k, v, dout = self._randn((b, s, h, d), 4, seed=s + d + 1)
        o = torch.empty_like(q)
        lse = torch.empty((b, h, s), device=self.device, dtype=torch.float32)
        self._forward(q, k, v, o, lse, b, s, h, d, causal)()
        grads = [torch.full_like(q, float("nan")) for _ in range(3)]
        ws = fb.Workspace(b, h, s, d)
        ptrs = [x.data_ptr() for x in (q, k, v, o, dout, lse, *grads)]

        def ours() -> None:
            fb.backward(self.bwd, *ptrs, B=b, Sq=s, Sk=s, Hq=h, Hkv=h, D=d, causal=causal,
                        scale=1 / math.sqrt(d), workspace=ws)
        ours()
        _sync(torch)
        candidates = {f"torch SDPA {name} backward": backward_candidate(torch, backend, q, k, v,
                                                                         dout, causal)
                      for name, backend in self.backends.items()}
        kept, note = verify(torch, self.section, label, grads, candidates, grad_error,
                            "max |dQ, dK, dV difference| / max |gradient|")
        flops = attention_flops(b, h, s, d, causal, backward=True)
        compare(self.section, label, self._time({"ptxdsl": ours, **kept}, flops), flops,
                BWD_GOAL if d == BWD_GOAL_D else None, versus="torch SDPA cuDNN backward",
                ours_note=note)


class Recorder:
    """Stands in for a loaded module in one call of a sample's host function and records the
    launches it would make, (kernel, grid, block, args, keywords), making none: one kernel of
    a multi-kernel call can then be timed alone with exactly the arguments the call gives."""

    def __init__(self) -> None:
        self.calls: list[tuple] = []

    def __getitem__(self, name: str):
        recorder = self

        class Launch:
            def launch(self, grid, block, args, **kwargs) -> None:
                recorder.calls.append((name, grid, block, args, kwargs))
        return Launch()


def _label(kind: str, d: int, s: int, causal: bool) -> str:
    b, h = dense_shape(s, d)
    return f"{kind} D={d} S={s} B={b} H={h}" + (" causal" if causal else "")


def _varlen_label(causal: bool) -> str:
    lengths = varlen_lengths()
    return (f"varlen D={VARLEN['d']} H={VARLEN['heads']}, {len(lengths)} sequences of "
            f"{min(lengths)}..{max(lengths)} tokens ({sum(lengths)} in all)"
            + (" causal" if causal else ""))
