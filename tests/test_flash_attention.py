"""samples/flash_attention.py without a GPU: its kernels check clean, and the checker finds a
removed wait on any one of its three rings (Q, K and V in one dynamic buffer), on the
consumers' side (a wgmma reading a stage TMA may still be filling) and on the producer's (a
TMA load overwriting a stage a wgmma may still read); its host side's refusals."""

from __future__ import annotations

import pytest

import samples.flash_attention as fa
from ptxdsl import Module
from ptxdsl.checker import check_module
from ptxdsl.pipeline import ConsumerView, ProducerView

CONFIGS = [("bf16", 128, False, None, None), ("bf16", 64, True, None, None),
           ("f16", 256, False, None, None), ("bf16", 64, False, 3, None),
           ("bf16", 64, False, 2, None), ("bf16", 128, True, None, None),
           ("bf16", 256, False, None, 80)]


def _check(dtype: str, d: int, varlen: bool, consumers: int | None = None,
           bn: int | None = None) -> list:
    kernel = fa.build_forward(fa.config(dtype, d, varlen, consumers, bn))
    return check_module(Module([kernel], target="sm_90a"))


@pytest.mark.parametrize("dtype,d,varlen,consumers,bn", CONFIGS)
def test_the_sample_checks_clean(dtype, d, varlen, consumers, bn):
    assert _check(dtype, d, varlen, consumers, bn) == []


def test_where_o_is_staged_and_how_many_keys_a_block_has():
    """O goes to each consumer's rows of the Q stage at D = 128 (O_IN_Q; two Q stages,
    released a tile later) and where staging buffers of their own do not fit (D = 256 with 80
    keys: one Q stage, released after the stores' reads); D = 64 and D = 256 with 64 keys
    keep their buffers. Every layout fits the CTA's shared memory."""
    made = {c.name: (c.bn, c.q_stages, c.o_in_q) for d in (64, 128, 256)
            for c in (*fa.dense_configs("bf16", d), fa.config("bf16", d, varlen=True))}
    assert made == {
        "fa_fwd_bf16_d64": (128, 2, False), "fa_fwd_bf16_d64_m128": (128, 2, False),
        "fa_fwd_bf16_d64_varlen": (128, 2, False), "fa_fwd_bf16_d128": (128, 2, True),
        "fa_fwd_bf16_d128_varlen_n160": (160, 2, True), "fa_fwd_bf16_d256": (64, 1, False),
        "fa_fwd_bf16_d256_n80": (80, 1, True), "fa_fwd_bf16_d256_varlen": (64, 1, False)}
    for d in (64, 128, 256):
        for c in (*fa.dense_configs("bf16", d), fa.config("bf16", d, varlen=True)):
            assert c.smem_bytes <= 227 * 1024 and c.q_wg_bytes == 64 * d * 2
            assert c.epi_off == c.bar_off if c.o_in_q else \
                c.bar_off - c.epi_off == c.consumers * fa.STAGING_BYTES
    # D = 256 takes 80-key blocks from LONG_KEYS_FROM keys, or causal SHORT_CAUSAL rows
    pick = {(sq, sk, causal): fa.dense_config("bf16", 256, sq, causal, sk=sk).bn
            for sq in (512, fa.SHORT_CAUSAL - 1, fa.SHORT_CAUSAL)
            for sk in (fa.LONG_KEYS_FROM - 1, fa.LONG_KEYS_FROM) for causal in (False, True)}
    assert {key for key, bn in pick.items() if bn == 80} == \
        {(sq, fa.LONG_KEYS_FROM, False) for sq in (512, fa.SHORT_CAUSAL - 1, fa.SHORT_CAUSAL)} \
        | {(fa.SHORT_CAUSAL, sk, True) for sk in (fa.LONG_KEYS_FROM - 1, fa.LONG_KEYS_FROM)}
    assert set(pick.values()) == {64, 80}


@pytest.mark.parametrize("bn,why", [(100, "a multiple of 16 from 16 to 256"),
                                    (272, "a multiple of 16 from 16 to 256"),
                                    (True, "a multiple of 16 from 16 to 256"),
                                    (128, r"need 327680 bytes of shared memory, more than the")])
def test_keys_per_block_that_cannot_be_built_are_refused(bn, why):
    with pytest.raises(ValueError, match=f"flash_attention: .*{why}"):
        fa.Config("bf16", 256, bn=bn)


@pytest.mark.parametrize("ring", ["kr", "vr"])
def test_a_removed_consumer_wait_is_found_with_three_consumers(monkeypatch, ring):
    real = ConsumerView.wait_full
    monkeypatch.setattr(ConsumerView, "wait_full",
                        lambda self: None if self.ring.name == ring else real(self))
    found = _check("bf16", 64, False, 3)
    assert any(f.severity.name == "error" for f in found), [f.id for f in found]


def test_the_dense_kernel_a_call_takes():
    """D = 64: three consumer warpgroups (192-row tiles), but two for causal calls below
    SHORT_CAUSAL query rows; the other head dims two, always; varlen two."""
    pick = {(d, sq, causal): fa.dense_config("bf16", d, sq, causal).name
            for d in (64, 128) for sq in (512, fa.SHORT_CAUSAL - 1, fa.SHORT_CAUSAL)
            for causal in (False, True)}
    assert pick[64, 512, False] == pick[64, fa.SHORT_CAUSAL, True] == "fa_fwd_bf16_d64"
    assert pick[64, 512, True] == pick[64, fa.SHORT_CAUSAL - 1, True] == "fa_fwd_bf16_d64_m128"
    assert {pick[128, sq, c] for sq in (512, fa.SHORT_CAUSAL) for c in (False, True)} == \
        {"fa_fwd_bf16_d128"}
    assert [c.consumers for c in fa.dense_configs("bf16", 64)] == [3, 2]
    assert fa.config("bf16", 64, varlen=True).bm == fa.BM
    for bad in (4, 1, 2.0, True, "3"):
        with pytest.raises(ValueError, match=f"2 or 3 consumer warpgroups, got {bad!r}"):
            fa.Config("bf16", 64, consumers=bad)
    with pytest.raises(ValueError, match=r"consumers=4, bn=None at D=64: the dense kernels of "
                                         r"that head dim have \(consumers, keys per block\) "
                                         r"\[\(3, 128\), \(2, 128\)\]"):
        fa.forward(None, 0, 0, 0, 0, 0, shape=(1, 64, 64, 1, 1, 64),
                   strides=dict.fromkeys("qkvo", (64, 64, 64)), causal=False, consumers=4)
    # each kernel by its consumers and keys per block, whichever a shape would pick
    assert [fa.dense_config("bf16", 256, 64, False, c.consumers, bn=c.bn).name
            for c in fa.dense_configs("bf16", 256)] == ["fa_fwd_bf16_d256", "fa_fwd_bf16_d256_n80"]


def test_three_consumers_ptx():
    """512 threads; the consumers take 160 registers (the producer's 24 and 3 x 160 fit the
    64K file); every ring stage is freed by three arrivals; consumer 0's first turn is
    handed over on named barrier 4 (1-3 are the epilogues')."""
    cfg = fa.config("bf16", 64)
    assert (cfg.consumers, cfg.bm, cfg.threads, cfg.consumer_regs, cfg.ping) == \
        (3, 192, 512, 160, 4)
    text = Module([fa.build_forward(cfg)], target="sm_90a").emit()
    assert ".reqntid 512" in text
    assert "setmaxnreg.inc.sync.aligned.u32 160;" in text
    assert "bar.arrive 4, 256;" in text
    two = Module([fa.build_forward(fa.config("bf16", 128))], target="sm_90a").emit()
    assert ".reqntid 384" in two and "setmaxnreg.inc.sync.aligned.u32 240;" in two
    assert "bar.arrive 3, 256;" in two


@pytest.mark.parametrize("varlen", [False, True], ids=["static", "claimed"])
@pytest.mark.parametrize("ring", ["qr", "kr", "vr"])
@pytest.mark.parametrize("side", ["consumer", "producer"])
def test_a_removed_wait_on_any_ring_is_found(monkeypatch, ring, side, varlen):
    """The wait of one side of one ring is dropped (every other stays); the checker must
    report the unsynchronised access to that ring's stages, in the static tile order and in
    varlen's claimed one (where the Q stage's wait also orders the tile index's word)."""
    view, method = (ConsumerView, "wait_full") if side == "consumer" else \
        (ProducerView, "wait_empty")
    real = getattr(view, method)

    def maybe_wait(self):
        if self.ring.name == ring:
            return None
        return real(self)

    monkeypatch.setattr(view, method, maybe_wait)
    found = _check("bf16", 128, varlen)
    assert found, f"no finding with the {side}'s wait on {ring} removed"
    assert any(f.severity.name in ("error", "warning") for f in found), \
        [f.id for f in found]


@pytest.mark.parametrize("ring", ["qr", "kr", "vr"])
@pytest.mark.parametrize("side", ["consumer", "producer"])
def test_a_removed_wait_is_found_with_o_staged_in_the_one_q_stage(monkeypatch, ring, side):
    """D = 256 with 80-key blocks: one Q stage, which also stages O."""
    view, method = (ConsumerView, "wait_full") if side == "consumer" else \
        (ProducerView, "wait_empty")
    real = getattr(view, method)
    monkeypatch.setattr(view, method, lambda self: None if self.ring.name == ring
                        else real(self))
    found = _check("bf16", 256, False, bn=80)
    assert any(f.severity.name in ("error", "warning") for f in found), \
        [f.id for f in found]


def test_the_forward_refuses_unsupported_heads():
    with pytest.raises(ValueError, match="head dim in"):
        fa.check_heads(4, 2, 96)
    with pytest.raises(ValueError, match="Hq a multiple of Hkv"):
        fa.check_heads(6, 4, 128)


def test_the_varlen_tile_list_kernel_checks_clean():
    assert check_module(Module([fa.build_varlen_tiles()], target="sm_90a")) == []


def test_the_varlen_workspace_holds_the_maps_the_scratch_and_every_tile():
    # 3 sequences, 300 tokens, 4 heads: 4 maps of 128 bytes per sequence; the sort's 8 bytes
    # per sequence (rounded to 16) and 16 per rank; the count's 16; and 8 bytes per tile, at
    # most ceil(300 / 128) + 3 row blocks per head
    assert fa.workspace_bytes(3, 300, 4) == 3 * 512 + 32 + 48 + 16 + 8 * 4 * (3 + 3)


class _Launches:
    def __init__(self):
        self.calls = []

    def __getitem__(self, name):
        calls = self.calls

        class Launch:
            def launch(self, *args, **kwargs):
                calls.append(name)
        return Launch()


@pytest.mark.parametrize("hq,longest", [(1 << 16, 100), (2, 128 << 16)])
def test_the_varlen_forward_refuses_what_a_tile_entry_cannot_hold(monkeypatch, hq, longest):
    monkeypatch.setattr(fa, "tensor_map", lambda *args: "map")
    monkeypatch.setattr(fa, "sm_count", lambda: 132)
    launches = _Launches()
    with pytest.raises(ValueError, match="fewer than 65536 heads and row blocks"):
        fa.forward_varlen(launches, 1, 2, 3, 4, 5, 6, 7, shape=(2, longest, 1000, hq, hq, 64),
                          strides=dict.fromkeys("qkvo", (hq * 64, 64)), causal=False)
    assert launches.calls == []
