"""samples/grouped_gemm_moe.py on a Hopper GPU: ragged experts (empty ones, sizes that are not
multiples of the 128-row tile or of its 64-row halves, all empty but one, G = 1), N and K
tails (K smaller than one 64-wide stage; N not a multiple of 8: direct stores only), items
split along K, and G = 8/32/128 at moderate sizes, each checked per expert against numpy
(exact). Every case runs in a child process with bounded waits (tests/moe_gpu_run.py), so a
hang or a fault fails that case only; a failure names the experts and rows that differ."""

from __future__ import annotations

import runpy

import pytest

from ptxdsl import debug
from tests.moe_gpu_run import SAMPLE, moe_case

pytestmark = pytest.mark.gpu
S = runpy.run_path(str(SAMPLE), run_name="__ptxdsl_test__")
sizes_of = S["expert_sizes"]

CASES = {
    "G1": ([300], 256, 128, None),
    "G1_tail_M_N_K": ([77], 264, 40, None),                    # K < one stage (64)
    "one_expert_empty": ([130, 0, 255, 1], 512, 192, None),
    "all_empty_but_one_last": ([0, 0, 0, 0, 0, 0, 0, 513], 256, 64, None),
    "all_empty_but_one_first": ([129, 0, 0, 0], 520, 72, 6),
    "odd_pairs": ([1, 300, 0, 129, 385], 520, 136, None),   # N-pairs, odd n_tiles
    "tile_edges": ([1, 127, 128, 129, 255, 256, 257, 0], 264, 200, None),
    "half_tile_edges": ([63, 64, 65, 191, 192, 193, 320, 0, 383], 136, 136, None),
    "N_not_multiple_of_8": ([70, 200, 0, 129], 262, 64, 4),     # every row stored directly
    "G8": (list(sizes_of(8, 4096, seed=8, zeros=1)), 1024, 1024, None),
    "G32": (list(sizes_of(32, 8192, seed=32, zeros=3)), 1024, 1792, None),
    "G128": (list(sizes_of(128, 8192, seed=128, zeros=10)), 512, 1024, None),
    "G32_one_cluster": (list(sizes_of(32, 1000, seed=5, zeros=4)), 256, 136, 2),
    # the last partial wave split along K: 2 items on the GPU's clusters, 4 parts each; 10
    # items on 3 clusters, the last in 2 parts
    "split_parts": ([300], 256, 2048, None),
    "split_last_item": ([0, 300, 17, 0, 129], 520, 1024, 6),
}
RELAUNCH = ([0, 300, 17, 0, 129], 520, 1024)      # on 3 clusters: the last item split in two


def test_moe_relaunch_on_the_same_buffers():
    """Three launches on one set of buffers: each finds the work counters zero (the last
    cluster of the previous launch reset them, and the last part of a split item its
    counter) and computes every expert again."""
    sizes, N, K = RELAUNCH
    ok, text = debug.isolated(moe_case, sizes, N, K, 6, 0, 3, timeout=240)
    print(text)
    assert ok and text.count("the work counters are zero again") == 3, text


@pytest.mark.parametrize("name", list(CASES))
def test_moe_matches_numpy_per_expert(name):
    sizes, N, K, grid = CASES[name]
    try:
        ok, text = debug.isolated(moe_case, sizes, N, K, grid, timeout=240)
    except debug.WaitTimeoutError as e:
        pytest.fail(f"{name}: an mbarrier wait timed out: {e.record}")
    print(text)
    assert ok, text
