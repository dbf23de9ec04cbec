"""samples/allreduce.py on the CPU: its kernels check clean under the cross-GPU protocol rules
and the checker sees a broken protocol in them; the grid and algorithm choices. Its run on
two or more GPUs (under torchrun) is tests/test_samples.py's GPU test of every sample, and
tests/test_allreduce_gpu.py's."""

from __future__ import annotations

import runpy
from pathlib import Path

import pytest

import ptxdsl.signals as signals
from ptxdsl.checker import Hazard, check_module

SAMPLE = Path(__file__).resolve().parents[1] / "samples" / "allreduce.py"
S = runpy.run_path(str(SAMPLE))


def _ids(module) -> set[Hazard]:
    return {f.hazard for f in check_module(module, notes=True)}


@pytest.mark.parametrize("bounded", [False, True])
def test_every_kernel_checks_clean(bounded):
    module = S["build_module"](S["WORLDS"], bounded=bounded)
    assert len(module.kernels) == len(S["ALGORITHMS"]) * 2 * len(S["WORLDS"])
    assert check_module(module, notes=True) == []


def test_a_gpu_scope_signal_is_reported(monkeypatch):
    """The barrier's flags released at .gpu scope: the peers' reads of the buffer are no
    longer ordered after this rank's copy into it."""
    real = signals.signal_set
    monkeypatch.setattr(signals, "signal_set",
                        lambda k, addr, value=1, **kw: real(k, addr, value, scope="gpu"))
    assert Hazard.PEER_PUBLISH_NO_SYS_RELEASE in _ids(S["build_module"]((2,)))


def test_a_gpu_scope_wait_is_reported(monkeypatch):
    """The spin on its own pad acquiring at .gpu scope: the reads of the peers' buffers after
    it are not ordered after their writes."""
    real = signals.signal_wait
    monkeypatch.setattr(signals, "signal_wait",
                        lambda k, addr, expected, **kw: real(k, addr, expected,
                                                             **{**kw, "scope": "gpu"}))
    assert Hazard.PEER_CONSUME_NO_SYS_ACQUIRE in _ids(S["build_module"]((2,)))


def test_reads_without_the_barrier_are_reported(monkeypatch):
    """No barrier at all: every rank reads the peers' buffers before they copied into them
    (no wait on any path, which the acquire rule alone does not see), and nothing announces
    the (weak) copies into the buffer."""
    monkeypatch.setitem(S["build_one_shot"].__globals__, "barrier_all_ranks",
                        lambda *a, **kw: None)
    assert _ids(S["build_module"]((2,))) == {Hazard.PEER_READ_UNSYNCHRONIZED,
                                             Hazard.PEER_WRITE_UNPUBLISHED}


def test_a_weak_poll_is_reported(monkeypatch):
    """The Lamport kernel polling its slots with a plain ld: the load may be served from L1
    or hoisted out of the loop, and never see the sender's store."""
    from ptxdsl import Addr, t
    from ptxdsl.instructions.mbarrier_wait import spin

    def weak_wait(k, addrs, empty, ok):
        seen = [tuple(k.reg(t.b32) for _ in range(4)) for _ in addrs]

        def poll():
            done = None
            for a, words, g in zip(addrs, seen, ok, strict=True):
                with k.guard(g):
                    k.ld(Addr(a), type=t.b32, vec=4, space="global", dst=words)
                p = k.or_(k.setp("ne", words[0], empty, type=t.b32), k.not_(g, type=t.pred),
                          type=t.pred)
                done = p if done is None else k.and_(done, p, type=t.pred)
            return done
        spin(k, poll, None, "weak")
        return seen
    monkeypatch.setitem(S["build_lamport"].__globals__, "lamport_wait", weak_wait)
    assert Hazard.PEER_POLL_WEAK in _ids(S["build_module"]((2,)))


@pytest.mark.parametrize("alg", ["lamport", "lamport_two_shot"])
@pytest.mark.parametrize("dtype, maker", [("bf16", "cvt.rn.bf16x2.f32"),
                                           ("f32", "add.rn.f32")])
def test_the_lamport_kernels_send_no_empty_word(alg, dtype, maker):
    """Every word a rank stores into a slot is the empty word itself (the reset) or was made
    by the +0.0 add (bf16: unpacked, added, repacked), the only way -0.0, and so the empty
    word, cannot reach a receive slot (the two-shot's sums too)."""
    import re
    ptx = S["build_module"]((4,), (dtype,)).emit()
    body = next(e for e in ptx.split(".visible .entry ")
                if e.startswith(S["kernel_name"](alg, dtype, 4) + "("))
    made = {}
    for line in body.splitlines():
        m = re.match(r"\s*(?:@%p\d+ )?([\w.:]+) (%[rf]\d+),", line)
        if m:
            made[m[2]] = m[1]
    empty = next(r for r, ins in made.items() if ins == "mov.b32"
                 and f"{r}, {S['EMPTY'][dtype]};" in body)
    stores = re.findall(r"st\.relaxed\.sys\.global\.v4\.b32 \[[^]]+\], \{([^}]+)\}", body)
    sent = {w for st in stores for w in st.split(", ")} - {empty}
    assert len(stores) >= 3 and sent
    assert {made[w] for w in sent} == {maker}


@pytest.mark.parametrize("alg, nvec, world, pad, want", [
    ("one_shot", 0, 2, 9216, 1),              # a tail only: CTA 0 sums it
    ("one_shot", 512, 2, 9216, 1),            # 8 KiB: one CTA
    ("one_shot", 1 << 21, 2, 9216, 132),      # 32 MiB: one CTA per SM
    ("two_shot", 1 << 21, 8, 9216, 132),
    ("two_shot", 4096, 4, 9216, 2),           # a chunk is 1024 vectors
    ("one_shot", 1 << 21, 8, 2048, 64),       # a 2 KiB pad holds 8 x 64 slots
    ("lamport", 1 << 21, 8, 2048, 132),       # no pad slots: the Lamport kernel meets no one
    ("lamport", 513, 4, 2048, 2),
])
def test_grid(alg, nvec, world, pad, want):
    assert S["ctas"](alg, nvec, world, pad) == want


def test_choice_by_size():
    choose = S["choose"]
    assert choose(32 << 20, 2) == "one_shot"          # two ranks: the same peer reads
    assert choose(64 << 10, 8) == "one_shot"
    assert choose(4 << 20, 4) == "two_shot"
    assert choose(512 << 10, 4) == "one_shot"         # measured: 12.2 against 16.6 us
    assert choose((1 << 20) + 2, 4) == "two_shot"
    # the Lamport kernels where their slots hold the message and the world's caps allow
    assert choose(8 << 10, 2, 1 << 20) == "lamport"
    assert choose(32 << 20, 2, 32 << 20) == "lamport"
    assert choose((32 << 20) + 16, 2, 64 << 20, 64 << 20) == "one_shot"   # past both caps
    assert choose(64 << 10, 4, 256 << 10, 32 << 20) == "lamport"
    assert choose(512 << 10, 4, 256 << 10, 32 << 20) == "lamport_two_shot"
    assert choose(4 << 20, 4, 0, 32 << 20) == "lamport_two_shot"
    assert choose(4 << 20, 4, 0, 2 << 20) == "two_shot"                   # past its slots
    assert choose(64 << 20, 4, 64 << 20, 64 << 20) == "two_shot"          # past the cap
    assert choose(64 << 10, 8, 1 << 20, 1 << 20) == "one_shot"            # eight: unmeasured


class _Fn:
    def __init__(self, name):
        self.name, self.launches = name, []

    def launch(self, grid, block, args, stream=None):
        self.launches.append((grid, block, args, stream))


def _bare(world=2, lamport_bytes=1 << 20, max_numel=1 << 20):
    """An AllReduce without torch: what `_plan` reads, set by hand."""
    from types import SimpleNamespace
    ar = S["AllReduce"].__new__(S["AllReduce"])
    ar.max_numel, ar.dtype, ar.world, ar.lamport_bytes = max_numel, "bf16", world, lamport_bytes
    ar.fns = {alg: _Fn(alg) for alg in S["ALGORITHMS"]}
    ar.ranks = SimpleNamespace(signal_pad_size=9216, rank=1)
    ar._static, ar._lstatic = (11, 12, 13), (21, 13)
    ar.slot_bytes, ar.half_bytes, ar._plans = lamport_bytes, 2 * max_numel, {}
    ar.lamport2_bytes, ar.chunk_slot_bytes, ar._l2static = 1 << 19, 1 << 18, (31, 13)
    return ar


def test_plan_per_algorithm():
    ar = _bare()
    fn, grid, in_place, (before, after) = ar._plan(4096 + 3, None, False)   # 8 KiB + 6 B
    assert fn.name == "lamport" and in_place and grid == 1
    assert before == (21, 13) and after == (512, 3, 1 << 20, 1)
    fn, grid, in_place, (before, after) = ar._plan(4096, "one_shot", False)
    assert fn.name == "one_shot" and not in_place and after == (512, 0, 2 << 20, 1, 0)
    assert ar._plan(4096, "two_shot", True)[2]                   # a symmetric x, in place
    assert not ar._plan(4096, "two_shot", False)[2]
    fn, grid, in_place, (before, after) = ar._plan(1 << 18, "lamport_two_shot", True)
    assert fn.name == "lamport_two_shot" and not in_place and grid == 32    # 16384 a chunk
    assert before == (31, 13) and after == (1 << 15, 0, 1 << 18, 1)
    assert ar._plan(0, None, False)[0] is None                    # nothing to launch
    assert (4096, "one_shot", False) in ar._plans                 # planned once per size


@pytest.mark.parametrize("numel, alg, words", [
    ((1 << 20) + 1, None, "made for at most 1048576"),
    (1 << 19, "three_shot", "algorithm is one of"),
    ((1 << 19) + 8, "lamport", "the lamport takes at most 1048576 bytes here"),
    ((1 << 18) + 8, "lamport_two_shot", "the lamport two shot takes at most 524288 bytes"),
])
def test_plan_rejects(numel, alg, words):
    with pytest.raises(ValueError, match=words):
        _bare()._plan(numel, alg, False)


def _on_cpu(ar):
    """_bare's AllReduce with what a call reads of torch: tensors on the CPU (device -1)."""
    torch = pytest.importorskip("torch")
    ar._torch, ar.torch_dtype, ar.index, ar.device = torch, torch.bfloat16, -1, "cpu"
    ar._sym_ptr, ar._stream = 0, lambda index: 77
    return torch


def test_a_call_launches_the_plan_with_x_and_out():
    ar = _bare()
    torch = _on_cpu(ar)
    x = torch.ones(4096, dtype=torch.bfloat16)
    out = torch.empty_like(x)
    assert ar(x, out) is out
    assert ar.fns["lamport"].launches == [
        (1, S["THREADS"], (21, 13, x.data_ptr(), out.data_ptr(), 512, 0, 1 << 20, 1), 77)]
    assert ar(x, x, algorithm="lamport") is x                   # the Lamport one-shot in place
    with pytest.raises(ValueError, match="x itself only for the Lamport one-shot"):
        ar(x, x, algorithm="one_shot")
    with pytest.raises(ValueError, match="x must be a contiguous torch.bfloat16 tensor"):
        ar(x.float(), out)
    with pytest.raises(ValueError, match="out must be a contiguous tensor of x's 4096"):
        ar(x, out[:100])


def test_a_bound_call_checks_once_and_refuses_moved_memory():
    ar = _bare()
    torch = _on_cpu(ar)
    x = torch.ones(4096, dtype=torch.bfloat16)
    out = torch.empty_like(x)
    call = ar.bind(x, out)
    assert ar.fns["lamport"].launches == []                   # binding launches nothing
    assert call() is out and call() is out
    assert len(ar.fns["lamport"].launches) == 2
    assert ar.fns["lamport"].launches[0][2][2:4] == (x.data_ptr(), out.data_ptr())
    out.resize_(1 << 20)                                       # new memory behind out
    with pytest.raises(ValueError, match="no longer has the memory it had"):
        call()
    assert len(ar.fns["lamport"].launches) == 2
    with pytest.raises(ValueError, match="out must be a contiguous tensor"):
        ar.bind(x, out)                                        # checked as a call is

