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

CONFIGS = [("bf16", 128, False), ("bf16", 64, True), ("f16", 256, False)]


def _check(dtype: str, d: int, varlen: bool) -> list:
    kernel = fa.build_forward(fa.config(dtype, d, varlen))
    return check_module(Module([kernel], target="sm_90a"))


@pytest.mark.parametrize("dtype,d,varlen", CONFIGS)
def test_the_sample_checks_clean(dtype, d, varlen):
    assert _check(dtype, d, varlen) == []


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
    monkeypatch.setattr(fa, "_tensor_map", lambda *args: "map")
    monkeypatch.setattr(fa, "_sms", lambda: 132)
    launches = _Launches()
    with pytest.raises(ValueError, match="fewer than 65536 heads and row blocks"):
        fa.forward_varlen(launches, 1, 2, 3, 4, 5, 6, 7, shape=(2, longest, 1000, hq, hq, 64),
                          strides=dict.fromkeys("qkvo", (hq * 64, 64)), causal=False)
    assert launches.calls == []
