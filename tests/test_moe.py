"""samples/grouped_gemm_moe.py on the CPU: the work list walk, the map fields and slot reuse
(a Python model of what the kernel computes, line by line), an emulation of the whole kernel
on top of it against numpy, and the PTX itself: clean under the hazard checker, the device-side
map protocol present, assembled without spills. The GPU side is tests/test_moe_gpu.py; the
golden is tests/test_samples.py's."""

from __future__ import annotations

import runpy
import warnings
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent
S = runpy.run_path(str(ROOT / "samples" / "grouped_gemm_moe.py"), run_name="__ptxdsl_test__")
BM, BN, BK = S["BM"], S["BN"], S["BK"]
STAGES, MAP_SLOTS = S["STAGES"], S["MAP_SLOTS"]

# (expert sizes, N): empty experts first, last, in a row, all but one; tails in M and N.
CASES = [
    ([300], 256),
    ([0], 256),
    ([0, 0, 129, 0], 520),
    ([1, 127, 128, 129, 0, 255, 256, 257], 264),
    ([0] * 31 + [1000], 2048),
    (list(S["expert_sizes"](128, 32768, seed=3, zeros=9)), 2048),
    (list(S["expert_sizes"](8, 16384, seed=4)), 4096),
]
GRIDS = [2, 6, 132]                  # CTAs: 1, 3 and 66 clusters of 2


def _tiles(sizes, N):
    n_tiles = -(-N // BN)
    return [(g, mt, nt) for g, m in enumerate(sizes) for nt in range(n_tiles)
            for mt in range(-(-m // BM))]


def _offsets(sizes):
    return np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)


def _cluster_items(sizes, N):
    """The cluster work list written out directly: per expert, per n-tile pair q the M-pairs
    ((2p, n), (2p + 1, n)) of n = 2q and of n = 2q + 1, then for an odd m-tile count the last
    m-tile's N-pair ((m, 2q), (m, 2q + 1)); each item the two CTAs' (expert, m-tile,
    n-tile)."""
    n_tiles = -(-N // BN)
    out = []
    for g, m in enumerate(sizes):
        m_tiles = -(-m // BM)
        for q in range(-(-n_tiles // 2)):
            for n in (2 * q, 2 * q + 1)[:n_tiles - 2 * q]:
                out += [((g, 2 * p, n), (g, 2 * p + 1, n)) for p in range(m_tiles // 2)]
            if m_tiles % 2:
                out.append(((g, m_tiles - 1, 2 * q), (g, m_tiles - 1, 2 * q + 1)))
    return out


@pytest.mark.parametrize("grid", GRIDS)
@pytest.mark.parametrize("case", range(len(CASES)))
def test_walk_covers_every_tile_once_in_order(case, grid):
    """Every (expert, m-tile, n-tile) of every non-empty expert is computed by exactly one
    CTA; cluster c takes items c, c + clusters, ... of the expert-ordered pair list, its rank
    r the pair's r-th tile; an M-pair's CTAs share the n-tile (W_g's tile, multicast) and an
    N-pair's the m-tile (X_g's); no CTA takes a tile of an empty expert or past an expert's
    rows, and the only tile past N is rank 1's of an odd n-tile count's last N-pair."""
    sizes, N = CASES[case]
    n_tiles = -(-N // BN)
    items = _cluster_items(sizes, N)
    per_cta = S["simulate_walk"](_offsets(sizes), N, grid)
    assert len(per_cta) == grid
    clusters = grid // 2
    for c in range(clusters):
        mine = items[c::clusters]
        for r in range(2):
            assert per_cta[2 * c + r] == [pair[r] for pair in mine], f"cluster {c} rank {r}"
        for a, b in mine:
            assert a[0] == b[0] and (a[2] == b[2] and b[1] == a[1] + 1
                                     or a[1] == b[1] and b[2] == a[2] + 1)
    real = [it for items in per_cta for it in items if it[2] < n_tiles]
    assert sorted(real) == sorted(_tiles(sizes, N)) and len(set(real)) == len(real)
    past = [it for items in per_cta for it in items if it[2] >= n_tiles]
    assert len(past) == (n_tiles % 2) * sum(-(-m // BM) % 2 for m in sizes)


def test_walk_matches_an_independent_prefix_sum():
    """The walk's item -> expert mapping equals a searchsorted over the prefix sums of the
    per-expert item counts (what a separate work-list kernel would build)."""
    rng = np.random.default_rng(5)
    for _ in range(50):
        G = int(rng.integers(1, 40))
        sizes = rng.integers(0, 600, G) * (rng.random(G) < 0.7)
        N = int(rng.integers(1, 20)) * 8 * 16
        n_tiles = -(-N // BN)
        m_tiles = -(-sizes // BM)
        counts = m_tiles // 2 * n_tiles + m_tiles % 2 * (-(-n_tiles // 2))
        starts = np.concatenate([[0], np.cumsum(counts)])
        items = _cluster_items(sizes, N)
        assert len(items) == starts[-1]
        clusters = int(rng.integers(1, 9))
        per_cta = S["simulate_walk"](_offsets(sizes), N, 2 * clusters)
        for c in range(clusters):
            for i, (g, mt, nt) in enumerate(per_cta[2 * c]):
                w = c + i * clusters
                assert g == np.searchsorted(starts, w, side="right") - 1
                assert (g, mt, nt) == items[w][0]
            assert len(per_cta[2 * c]) == len(range(c, int(starts[-1]), clusters))


@pytest.mark.parametrize("total,grid", [(0, 4), (1, 4), (3, 4), (4, 4), (5, 4), (1000, 132),
                                        (2520, 132), (37, 1)])
@pytest.mark.parametrize("seed", [None, 0, 1, 2])
def test_claims_hand_out_every_item_once_in_increasing_order(total, grid, seed):
    """Whatever order the producers' atomics land in, every item is taken by exactly one
    cluster (`grid` here counts clusters), cluster c starts with item c, and each cluster's
    items increase (the walk only moves forward)."""
    rng = None if seed is None else np.random.default_rng(seed)
    per_cta = S["claims"](total, grid, rng)
    assert sorted(w for items in per_cta for w in items) == list(range(total))
    for c, items in enumerate(per_cta):
        assert items == sorted(items) and (items[:1] == [c] if c < total else items == [])
    if seed is None:                       # in turn: the static round-robin
        assert per_cta == [list(range(c, total, grid)) for c in range(grid)]


@pytest.mark.parametrize("seed", [None, 3])
@pytest.mark.parametrize("case", range(len(CASES)))
def test_map_slot_is_rewritten_only_after_its_last_load_is_stages_back(case, seed):
    """With one K step per tile (every item is one load: the closest reuse), a slot rewritten
    at load j was last read by a load <= j - STAGES - 1, so the producer's wait_empty at load
    j (which proves loads <= j - STAGES landed) covers it; for any claim order."""
    sizes, N = CASES[case]
    rng = None if seed is None else np.random.default_rng(seed)
    for items in S["simulate_walk"](_offsets(sizes), N, 6, rng)[::2]:   # the producers
        switches = S["map_switches"](items)
        last_use = {}
        for idx, (j, slot) in enumerate(switches):
            if slot in last_use:
                assert last_use[slot] <= j - STAGES - 1, (slot, last_use[slot], j)
            end = switches[idx + 1][0] if idx + 1 < len(switches) else len(items)
            last_use[slot] = end - 1
        assert len(switches) == len({g for g, _, _ in items})   # one switch per expert


def _emulate(sizes, N, K, grid, x, w, rng=None):
    """The kernel in numpy, driven by the walk and the map fields: TMA loads clip at the
    per-expert map (rows M_g, columns K; zero fill), the epilogue stores only rows < M_g and
    columns < N of each tile. Returns Y (T x N f32, NaN where nothing was stored)."""
    offsets = _offsets(sizes)
    T = int(offsets[-1])
    y = np.full((T + 8, N), np.nan, np.float32)
    flat_x, flat_w = x.reshape(-1), w.reshape(-1)
    k_steps, done, sums = -(-K // BK), {}, {}
    for items in S["simulate_walk"](offsets, N, grid, rng, K=K):
        for g, mt, nt, kb0, kb1 in items:
            f = S["map_fields"](offsets, g, K, N, 0, 0)
            rows_x = f["x_rows"]
            base_x, base_w = f["x_address"] // 2, f["w_address"] // 2
            acc = np.zeros((BM, BN))
            for kb in range(kb0, kb1):
                a = np.zeros((BM, BK))
                b = np.zeros((BN, BK))
                for r in range(BM):
                    row = mt * BM + r
                    if row < rows_x:
                        cols = min(BK, K - kb * BK)
                        a[r, :cols] = flat_x[base_x + row * K + kb * BK:][:cols]
                for r in range(BN):
                    row = nt * BN + r
                    if row < N:
                        cols = min(BK, K - kb * BK)
                        b[r, :cols] = flat_w[base_w + row * K + kb * BK:][:cols]
                acc += a @ b.T
            # a split tile is stored by its last part, with every part's sum
            done[g, mt, nt] = done.get((g, mt, nt), 0) + kb1 - kb0
            sums[g, mt, nt] = sums.get((g, mt, nt), 0) + acc
            assert done[g, mt, nt] <= k_steps
            if done[g, mt, nt] < k_steps:
                continue
            acc = sums[g, mt, nt]
            for wg in range(2):                       # each consumer warpgroup's 64 rows
                row0 = mt * BM + wg * 64
                rows = rows_x - row0                  # may be <= 0: nothing stored
                cols = N - nt * BN
                if cols <= 0:                         # rank 1 past N: nothing stored
                    continue
                for r in range(64):
                    if r < rows:
                        n = min(BN, cols)
                        y[int(offsets[g]) + row0 + r, nt * BN:nt * BN + n] = \
                            acc[wg * 64 + r, :n]
    return y


@pytest.mark.parametrize("sizes,N,K,grid", [
    ([0, 0, 129, 0], 264, 72, 4),
    ([1, 130, 0, 64], 16, 40, 2),
    ([200], 520, 200, 6),
    ([65, 191, 256, 257, 385], 136, 24, 4),
    ([1, 300, 0, 129], 520, 40, 2),
    ([100, 0, 200], 264, 1024, 12),     # 3 items on 6 clusters: each in 2 parts
])
def test_emulated_kernel_equals_numpy(sizes, N, K, grid):
    """The whole kernel's index math emulated: every expert's rows equal X_g @ W_g^T, every
    other row (padding after the last expert) untouched."""
    rng = np.random.default_rng(len(sizes) * 100 + N)
    T = sum(sizes)
    x = rng.integers(-8, 9, (max(T, 1), K)) / 8.0
    w = rng.integers(-8, 9, (len(sizes), N, K)) / 8.0
    y = _emulate(sizes, N, K, grid, x, w, np.random.default_rng(grid))
    offsets = _offsets(sizes)
    for g in range(len(sizes)):
        lo, hi = offsets[g], offsets[g + 1]
        np.testing.assert_array_equal(y[lo:hi], x[lo:hi] @ w[g].T, err_msg=f"expert {g}")
    assert np.isnan(y[T:]).all()


def test_map_fields():
    offsets = _offsets([5, 0, 7])
    f = S["map_fields"](offsets, 2, 64, 32, 1 << 20, 1 << 30)
    assert f == {"x_address": (1 << 20) + 5 * 64 * 2, "x_rows": 7,
                 "w_address": (1 << 30) + 2 * 32 * 64 * 2}


def test_expert_sizes_and_bf16_rounding():
    sizes = S["expert_sizes"](32, 32768, seed=1, zeros=4)
    assert sizes.sum() == 32768 and (sizes == 0).sum() == 4 and (sizes >= 0).all()
    assert S["f32_to_bf16_bits"](np.array([1.0, 1.00390625, 1.01171875], np.float32)).tolist() \
        == [0x3F80, 0x3F80, 0x3F82]      # exact, tie to even (down), tie to even (up)


@pytest.mark.parametrize("sizes,N,K,grid,what", [
    ([64], 256, 0, 2, "K must be a positive multiple of 8"),    # no K step: nothing to claim
    ([64], 256, 12, 2, "K must be a positive multiple of 8"),
    ([64], 255, 64, 2, "N even"),
    ([64, -1], 256, 64, 2, "no negative token counts"),
    ([], 256, 64, 2, "at least one expert"),
    ([64], 256, 64, 3, "multiple of the cluster size"),
])
def test_problem_refusals(sizes, N, K, grid, what):
    """MoeProblem refuses what the kernel cannot run before it touches the device."""
    with pytest.raises(ValueError, match=what):
        S["MoeProblem"](sizes, N, K, grid)


# -- the PTX ----------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def ptx_text():
    with warnings.catch_warnings():
        warnings.simplefilter("error")          # a hazard warning fails the build
        return S["build_module"]().emit()


def test_checker_passes_the_kernel_clean():
    """No hazard at any severity; the only notes are that expect-tx could not be checked: the
    loads go through maps the kernel encodes itself (their box comes from the templates, which
    the checker cannot follow through the shared copy and the global slot), which the note
    the command line shows says, and so the cluster's phases are not counted per CTA."""
    from ptxdsl.checker import check_module
    for bounded in (False, True):
        assert check_module(S["build_module"](bounded)) == []
        notes = check_module(S["build_module"](bounded), notes=True)
        assert {(f.hazard.value, f.message.split(":")[0]) for f in notes} == \
            {("check-skipped", "expect-tx")}, [str(f) for f in notes]
        assert [f.unchecked.split(";")[0] for f in notes if f.unchecked] == [
            "expect_tx bytes of moe_gemm: not checked, no box size known for the maps at "
            "%map_w, %map_x (not traced to a parameter)"], [str(f) for f in notes]


def test_ptx_has_the_device_side_map_protocol(ptx_text):
    p = ptx_text
    assert p.count("tensormap.replace.tile.global_address.shared::cta.b1024.b64") == 2
    assert p.count("tensormap.replace.tile.global_dim.shared::cta.b1024.b32") == 1
    assert p.count("tensormap.cp_fenceproxy.global.shared::cta.tensormap::generic.release.gpu"
                   ".sync.aligned") == 2
    assert p.count("fence.proxy.tensormap::generic.acquire.gpu") == 2
    assert "setmaxnreg.dec.sync.aligned.u32 40;" in p
    assert "setmaxnreg.inc.sync.aligned.u32 232;" in p
    # a tile's first stage (scale-d 0: starts from zero) and the rest of its stages
    assert p.count("wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16") == 2 * (BK // 16)
    # the staged epilogue: 2 halves x 8 stmatrix.x4, each half two 64 x 64 TMA stores
    assert p.count("stmatrix.sync.aligned.m8n8.x4.shared.b16") == 16
    assert p.count("cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group") == 4
    assert p.count("fence.proxy.async.shared::cta;") == 2
    # each stage's wgmmas are waited for before its release (a tile's first stage and the
    # rest: the step is emitted twice), none kept in flight across a wait
    assert p.count("wgmma.wait_group.sync.aligned 1;") == 0
    assert p.count("wgmma.wait_group.sync.aligned 0;") == 2
    # the cluster pair: rank 0's producer fills both CTAs' stages. Per stage the shared tile
    # goes to both (mask 3), each CTA's own tile to it alone (rank 1's by mask 2); the peer's
    # full barrier expects the stage and its item, which arrives by st.async; both CTAs'
    # consumers (2 each) release rank 0's empty barriers.
    assert ".reqnctapercluster 2, 1, 1" in p
    load = "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
    assert p.count(load + " [") == 2 and p.count(load + ".multicast::cluster") == 4
    assert p.count("], 3;") == 2 and p.count("], 2;") == 2
    stage = S["STAGE_TX"]
    assert p.count("mbarrier.arrive.expect_tx.release.cta.shared::cta.b64 _, [%r") == 1
    assert p.count("mbarrier.arrive.expect_tx.release.cta.shared::cluster.b64 _, [%r") == 2
    assert f"], {stage};" in p and f"], {stage + 4};" in p and "], 4;" in p
    assert p.count("st.async.weak.shared::cluster.mbarrier::complete_tx::bytes.b32") == 2
    assert p.count("mbarrier.init.shared::cta.b64") == 2 * STAGES and p.count("], 4;\n") >= 1
    assert p.count("mbarrier.arrive.release.cta.shared::cluster.b64 _, [%r") == 2
    # the work queue: one claim per item (in the K loop, or before it for an item with no K
    # step: test_producer_claims_...), broadcast to the producer warp; the end mark through
    # the ring; the last cluster's reset after an acq_rel count of the finished ones (the
    # other acq_rel count is a split part's); each role's WorkList broadcasts its sum
    assert p.count("atom.global.add.u32") == 2
    assert p.count("atom.acq_rel.gpu.global.add.u32") == 2
    assert p.count("shfl.sync.idx.b32") == 3 and p.count("shfl.sync.bfly.b32") == 10
    assert p.count("st.shared.u32 [%r") == 2 and f"], {S['END_ITEM']};" in p
    assert p.count("ld.shared.u32") == 1          # the consumers read each tile's item


def test_assembles_without_spills():
    from ptxdsl.testing import assemble_declared
    m = S["build_module"]()
    cubin = m.assemble()
    res = cubin.report.kernels["moe_gemm"]
    assert res.spill_stores == 0 and res.spill_loads == 0 and res.stack_frame == 0
    assert res.registers <= 168            # 65536 / 384 threads, the entry budget
    assert assemble_declared(S["build_module"](True).emit())[:4] == b"\x7fELF"
    enc = S["build_encode_only_module"]()
    assert check_module_clean(enc)
    assert "wgmma" not in enc.emit() and "cp.async.bulk.tensor" not in enc.emit()
    assert enc.emit().count("tensormap.cp_fenceproxy") == 2
    assert assemble_declared(enc.emit())[:4] == b"\x7fELF"


def check_module_clean(module) -> bool:
    from ptxdsl.checker import check_module
    return check_module(module) == []


@pytest.mark.parametrize("G,N,K,T", [(8, 4096, 4096, 16384), (32, 2048, 7168, 32768),
                                     (128, 2048, 7168, 32768)])
def test_benchmark_shapes(G, N, K, T):
    """The benchmark's expert sizes are ragged multiples of 16 summing to the token count, and
    its work list has every tile once (the walk at the benchmark's grid of 132)."""
    from benchmarks import moe
    assert (G, N, K, T) in moe.SHAPES
    sample = type("S", (), {"expert_sizes": staticmethod(S["expert_sizes"])})
    sizes = moe._sizes(sample, G, T)
    assert sizes.sum() == T and (sizes % 16 == 0).all() and len(set(sizes.tolist())) > 1
    per_cta = S["simulate_walk"](_offsets(sizes), N, 132)
    assert sum(map(len, per_cta)) == len(_tiles(sizes, N)) + \
        (-(-N // BN) % 2) * sum(-(-int(m) // BM) % 2 for m in sizes)


def test_benchmark_patterns_make_the_items_their_rows_name():
    """The diagnostic rows of the benchmark (every expert of one size at G = 128's N) are the
    kinds of work items their descriptions say: from the walk, an M-pair's two tiles share
    the n-tile (W_g's tile), an N-pair's share the m-tile (X_g's)."""
    from benchmarks import moe
    N = 2048
    kinds = {}
    for m, what in moe.PATTERNS:
        offsets = [0, m]
        items = list(range(S["expert_items"](m, -(-N // BN))))
        t0, t1 = S["walk"](offsets, N, items, 0), S["walk"](offsets, N, items, 1)
        mpairs = sum(a[2] == b[2] and a[1] != b[1] for a, b in zip(t0, t1, strict=True))
        npairs = sum(a[1] == b[1] and a[2] != b[2] for a, b in zip(t0, t1, strict=True))
        assert mpairs + npairs == len(items)
        kinds[m] = (mpairs, npairs)
        assert ("M-pair" in what) == (mpairs > 0) and ("N-pair" in what) == (npairs > 0)
    assert kinds == {256: (8, 0), 128: (0, 4), 384: (8, 4), 512: (16, 0)}


def test_consumer_releases_a_stage_only_after_its_wgmmas_completed(ptx_text):
    """In the PTX, between a stage's wgmma.mma_async and the consumer's release of it (the
    arrive on rank 0's empty barrier) there is a `wgmma.wait_group 0`, with no wgmma issued
    after it: the producer never refills a stage a wgmma may still read. The release is
    `.release.cta` (the wait completed the reads; nothing to publish at cluster scope)."""
    lines = [ln.strip() for ln in ptx_text.splitlines()]
    release = "mbarrier.arrive.release.cta.shared::cluster.b64 _, [%r"
    sites = [i for i, ln in enumerate(lines) if ln.startswith(release)]
    assert len(sites) == 2
    for i in sites:
        last_mma = max(j for j in range(i) if lines[j].startswith("wgmma.mma_async"))
        between = lines[last_mma:i]
        waits = [j for j, ln in enumerate(between) if ln == "wgmma.wait_group.sync.aligned 0;"]
        assert waits and "wgmma.commit_group.sync.aligned;" in between[:waits[0]]


def test_producer_claims_its_next_item_near_its_current_items_end(ptx_text):
    """The producer claims once per item, in its K loop at step max(kb1 - CLAIM_LEAD, kb0)
    (so clusters claim in the order they free up), or before the loop when the item has no
    K step: the claim is never skipped, so no producer spins on a stale item."""
    lines = [ln.strip() for ln in ptx_text.split(".entry moe_gemm")[1].splitlines()]
    claims = [i for i, ln in enumerate(lines) if ln.startswith("atom.global.add.u32 %claimed,")]
    assert len(claims) == 2
    lead = next(i for i in range(claims[0], 0, -1) if lines[i].startswith("sub.s32"))
    assert lines[lead].endswith(f", {S['CLAIM_LEAD']};")
    at = lines[lead + 1]                               # max.s32 %at, kb1 - lead, kb0
    assert at.startswith("max.s32")
    head = next(i for i in range(claims[1], 0, -1) if lines[i].startswith("$L__loop_"))
    assert lead < claims[0] < head < claims[1]         # the guard, then the K loop
    end = lines[head + 2].split()[-1].rstrip(";")      # the loop's exit branch
    body = lines[head:lines.index(end + ":")]
    assert any(ln.startswith("cp.async.bulk.tensor") for ln in body)
    guard = lines[claims[1] - 3]
    assert guard.startswith("setp.eq.u32") and guard.endswith(f", {at.split()[1].rstrip(',')};")


def test_template_descriptors_fill_the_layouts_and_the_expect_tx():
    """The templates' box and swizzle (what every device-encoded map inherits) write exactly
    the shared layouts the wgmma descriptors read, and one stage's two boxes are the ring's
    expect-tx count; the whole shared footprint fits an SM (227 KiB)."""
    from ptxdsl.runtime.tensormap_desc import TiledDesc
    boxes = []
    for layout, rows in ((S["LAYOUT_X"], 1000), (S["LAYOUT_W"], 2048)):
        d = TiledDesc.from_numpy_order(1 << 20, (rows, 7168), "BFLOAT16",
                                       layout.tma_box[::-1], swizzle=layout.tma_swizzle)
        layout.check_tensormap(d)
        boxes.append(d.box_bytes)
    assert boxes == [S["STAGE_X"], S["STAGE_W"]] and sum(boxes) == S["STAGE_TX"]
    assert S["LAYOUT_XW"].nbytes * 2 == S["STAGE_X"]        # two warpgroups' 64-row halves
    assert S["SHARED_BYTES"] <= 227 * 1024


def test_split_part_publishes_its_sum_before_it_counts_and_reads_after():
    """In the PTX of a split part's end: the warpgroup's 32 v4 stores of its partial sum, then
    its barrier, then the leader's acq_rel count (publishing every thread's stores), then the
    barrier's OR of "counted last", and only then the loads of the parts' sums (the first
    part's and, in the loop, the others'); the counter is zeroed by the last."""
    lines = [ln.strip() for ln in S["build_module"]().emit().splitlines()]

    def at(prefix):
        return [i for i, ln in enumerate(lines) if ln.split(" ")[-1] and
                ln.lstrip("@!%p0123456789 ").startswith(prefix)]
    stores, loads = at("st.global.v4.f32"), at("ld.global.v4.f32")
    count = [i for i in at("atom.acq_rel.gpu.global.add.u32") if i > stores[0]]
    red = at("bar.red.or.pred")
    assert len(stores) == 32 and len(loads) == 64 and len(count) == 1 and len(red) == 1
    barrier = [i for i in at("bar.sync") if stores[-1] < i < count[0]]
    assert len(barrier) == 1 and max(stores) < barrier[0] < count[0] < red[0] < min(loads)
    zero = [i for i in at("st.global.u32") if count[0] < i < red[0]]
    assert len(zero) == 1 and lines[zero[0]].endswith(", 0;")


@pytest.mark.parametrize("total,clusters,k_steps,want", [
    (1260, 66, 112, (1254, 4)),     # G = 128's 6 leftover items, 4 parts each (MAX_PARTS)
    (1056, 66, 64, (1056, 1)),      # no partial wave
    (1104, 66, 112, (1104, 1)),     # 48 leftover: one part each would not help
    (10, 3, 16, (9, 2)),            # 1 leftover, K allows 2 parts of 8 steps
    (2, 66, 32, (0, 4)),            # fewer items than clusters: all split
    (2, 66, 15, (2, 1)),            # too few K steps for two parts of 8
    (0, 66, 112, (0, 1)),
])
def test_split_plan(total, clusters, k_steps, want):
    assert S["split_plan"](total, clusters, k_steps) == want
    base, parts = want
    assert base + (total - base) * parts <= base + clusters     # a slot per part


@pytest.mark.parametrize("seed", [None, 4])
@pytest.mark.parametrize("sizes,N,K,grid", [
    ([300], 256, 2048, 132),                   # 2 items -> 8 parts of 8 K steps
    ([0, 300, 17, 0, 129], 520, 1024, 6),     # 10 items on 3 clusters: the last in 2 parts
    (list(S["expert_sizes"](128, 32768 // 16, seed=128) * 16), 2048, 7168, 132),
    ([77], 264, 40, 132),                      # K < one stage: nothing to split
])
def test_split_parts_cover_each_tiles_k_steps_once(sizes, N, K, grid, seed):
    """With WorkList's items, every tile's K steps are computed exactly once: whole, or by
    parts whose ranges tile [0, k_steps) in order; every part covers at least MIN_PART_STEPS
    steps, and the split tiles are the last total % clusters items' ones."""
    rng = None if seed is None else np.random.default_rng(seed)
    k_steps = -(-K // BK)
    per_cta = S["simulate_walk"](_offsets(sizes), N, grid, rng, K=K)
    ranges = {}
    for items in per_cta:
        for g, mt, nt, kb0, kb1 in items:
            ranges.setdefault((g, mt, nt), []).append((kb0, kb1))
    assert set(ranges) == {(g, mt, nt) for items in S["simulate_walk"](_offsets(sizes), N,
                                                                        grid)
                           for g, mt, nt in items}
    split = 0
    for tile, rs in ranges.items():
        rs.sort()
        assert rs[0][0] == 0 and rs[-1][1] == k_steps, tile
        assert all(a[1] == b[0] for a, b in zip(rs, rs[1:], strict=False)), (tile, rs)
        if len(rs) > 1:
            split += 1
            assert all(b - a >= S["MIN_PART_STEPS"] for a, b in rs) and \
                len(rs) <= S["MAX_PARTS"]
    total = S["total_items"](_offsets(sizes), N)
    base, parts = S["split_plan"](total, grid // 2, k_steps)
    tiles_per_item = 2                  # both ranks' tiles (one may be past N: not listed)
    assert split <= (total - base) * tiles_per_item and (split > 0) == (base < total)
