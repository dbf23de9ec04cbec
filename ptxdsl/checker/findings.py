"""What the checker reports: hazard ids, severities, findings, and their text.

A `Finding` names one hazard (`Hazard`, whose value is the stable id used in messages and
tests), says what is wrong in words, lists the instructions involved (`Site`: PTX text and the
Python line that built it) and says how to fix it.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable

import attrs

from ..errors import BuildError, SourceLoc


class Severity(enum.Enum):
    """`error`: the GPU faults, hangs or reads wrong data. `warning`: likely wrong or slow.
    `note`: a check that was skipped for lack of information (shown on request only; the
    command line says in one line which expect_tx counts it could not check)."""

    error = "error"
    warning = "warning"
    note = "note"


class Hazard(enum.Enum):
    """Every hazard the checker knows; the value is the id printed as `error[<id>]`."""

    TMAP_NO_ACQUIRE = "tmap-no-acquire"
    TMAP_ACQUIRE_UNSYNCED = "tmap-acquire-unsynced"
    TMAP_ACQUIRE_SIZE = "tmap-acquire-size"
    TMAP_ACQUIRE_SPACE = "tmap-acquire-space"
    TMAP_ACQUIRE_SCOPE = "tmap-acquire-scope"
    TMAP_CROSS_DEVICE_SCOPE = "tmap-cross-device-scope"
    TMAP_PARAM_NO_CVTA = "tmap-param-no-cvta"
    TMAP_REPLACE_NO_WARPSYNC = "tmap-replace-no-warpsync"
    FENCEPROXY_DIVERGENT = "fenceproxy-divergent"
    TMAP_MODIFIED_IN_FLIGHT = "tmap-modified-in-flight"
    TMAP_ENCODED_INVALID = "tmap-encoded-invalid"
    SMEM_NO_PROXY_FENCE = "smem-no-proxy-fence"
    MBAR_UNINIT = "mbar-uninit"
    MBAR_INIT_UNSYNCED = "mbar-init-unsynced"
    EXPECT_TX_MISMATCH = "expect-tx-mismatch"
    WAIT_PARITY_CONSTANT = "wait-parity-constant"
    WAIT_CLUSTER_SPACE = "wait-cluster-space"
    TMA_STORE_NEGATIVE_COORD = "tma-store-negative-coord"
    TMA_SMEM_ALIGN = "tma-smem-align"
    BULK_SRC_OVERWRITE = "bulk-src-overwrite"
    BULK_GROUP_NOT_WAITED = "bulk-group-not-waited"
    BULK_SRC_RELEASED = "bulk-src-released"
    WGMMA_REGS_IN_FLIGHT = "wgmma-regs-in-flight"
    WGMMA_NO_FENCE = "wgmma-no-fence"
    WGMMA_SMEM_NO_PROXY_FENCE = "wgmma-smem-no-proxy-fence"
    WGMMA_SMEM_RELEASED = "wgmma-smem-released"
    SMEM_READ_RELEASED = "smem-read-released"
    SETMAXNREG_NOT_UNIFORM = "setmaxnreg-not-uniform"
    WGMMA_NOT_WARPGROUP = "wgmma-not-warpgroup"
    MBAR_ARRIVE_COUNT = "mbar-arrive-count"
    MBAR_REINIT = "mbar-reinit"
    RING_PARITY = "ring-parity"
    WAIT_WRONG_BARRIER = "wait-wrong-barrier"
    RING_REFILL_UNGUARDED = "ring-refill-unguarded"
    RING_STAGE_MISMATCH = "ring-stage-mismatch"
    SMEM_READ_BEFORE_WAIT = "smem-read-before-wait"
    TRY_WAIT_NOT_LOOPED = "try-wait-not-looped"
    TMAP_REPLACE_NO_RELEASE = "tmap-replace-no-release"
    TMAP_SCOPE_TOO_NARROW = "tmap-scope-too-narrow"
    WAIT_PARITY_FIRST_PHASE = "wait-parity-first-phase"
    TMA_DST_OVERLAP = "tma-dst-overlap"
    WGMMA_SWIZZLE_MISMATCH = "wgmma-swizzle-mismatch"
    DSMEM_READ_UNSYNCED = "dsmem-read-unsynced"
    DSMEM_RELEASED_EARLY = "dsmem-released-early"
    NAMEDBAR_COUNT = "named-barrier-count"
    NAMEDBAR_UNPAIRED = "named-barrier-unpaired"
    NAMEDBAR_SURPLUS = "named-barrier-surplus"
    NAMEDBAR_DEADLOCK = "named-barrier-deadlock"
    NAMEDBAR_COLLISION = "named-barrier-collision"
    CTA_BARRIER_DIVERGENT = "cta-barrier-divergent"
    PEER_PUBLISH_NO_SYS_RELEASE = "peer-publish-no-sys-release"
    PEER_CONSUME_NO_SYS_ACQUIRE = "peer-consume-no-sys-acquire"
    PEER_READ_UNSYNCHRONIZED = "peer-read-unsynchronized"
    SIGNAL_PAD_REUSE = "signal-pad-reuse"
    SIGNAL_WAIT_UNSET = "signal-wait-unset"
    PEER_POLL_WEAK = "peer-poll-weak"
    PEER_WRITE_UNPUBLISHED = "peer-write-unpublished"
    TMEM_USE_BEFORE_ALLOC = "tmem-use-before-alloc"
    TMEM_NOT_DEALLOCATED = "tmem-not-deallocated"
    TMEM_PERMIT_NOT_RELINQUISHED = "tmem-permit-not-relinquished"
    TMEM_ALLOC_AFTER_RELINQUISH = "tmem-alloc-after-relinquish"
    TMEM_READ_BEFORE_COMMIT_WAIT = "tmem-read-before-commit-wait"
    TCGEN05_LD_NO_WAIT = "tcgen05-ld-no-wait"
    TCGEN05_ST_NO_WAIT = "tcgen05-st-no-wait"
    TCGEN05_FENCE_MISSING = "tcgen05-fence-missing"
    TCGEN05_CTA_GROUP_MIXED = "tcgen05-cta-group-mixed"
    TCGEN05_SMEM_NO_PROXY_FENCE = "tcgen05-smem-no-proxy-fence"
    CHECK_SKIPPED = "check-skipped"

    @property
    def severity(self) -> Severity:
        """How serious a finding of this hazard is (error, warning or note)."""
        return _INFO[self][0]

    @property
    def title(self) -> str:
        """The hazard's one-line title, as the finding's headline and docs/hazards.md give it."""
        return _INFO[self][1]

    @property
    def fix(self) -> str:
        """How to fix it, with the reference in brackets (a section of docs/hazards.md or the PTX
        ISA)."""
        return _INFO[self][2]


E, W, N = Severity.error, Severity.warning, Severity.note
# hazard -> (severity, one-line title, how to fix it). The reference in brackets: the id's
# section of docs/hazards.md, or the PTX ISA / CUDA Programming Guide section.
_INFO: dict[Hazard, tuple[Severity, str, str]] = {
    Hazard.TMAP_NO_ACQUIRE: (
        E, "tensor map in global memory used without an acquire fence",
        "run `fence.proxy.tensormap::generic.acquire.<scope> [map], 128` on that map in this CTA "
        "before its first use on every path (ptx.fence_proxy_tensormap_generic(k, 'acquire', ...))"
        "; param and .const maps need no fence [docs/hazards.md: tmap-no-acquire]"),
    Hazard.TMAP_ACQUIRE_UNSYNCED: (
        E, "tensor map acquired by another thread without a CTA barrier before this use",
        "put a CTA barrier (k.bar_sync(0) / bar.sync 0) between the acquiring thread's fence and "
        "the other threads' uses [docs/hazards.md: tmap-acquire-unsynced]"),
    Hazard.TMAP_ACQUIRE_SIZE: (
        E, "tensor-map acquire fence with a size other than 128",
        "the size operand of fence.proxy.tensormap::generic.acquire must be the literal 128 "
        "[docs/hazards.md: tmap-acquire-size]"),
    Hazard.TMAP_ACQUIRE_SPACE: (
        E, "tensor-map acquire fence on a non-generic address",
        "pass the generic 64-bit pointer to the map (the ld.param value itself, not the result "
        "of cvta.to.global) [docs/hazards.md: tmap-acquire-space]"),
    Hazard.TMAP_ACQUIRE_SCOPE: (
        E, "host-written tensor map acquired below .sys scope",
        "use scope='sys' for maps written by the host (cudaMemcpy) or another device; .gpu "
        "only covers writes made by this GPU [docs/hazards.md: tmap-acquire-scope]"),
    Hazard.TMAP_CROSS_DEVICE_SCOPE: (
        E, "tensor map shared between GPUs released or acquired below .sys scope",
        "a map written on one GPU and used on another needs scope='sys' on both sides: "
        "tensormap_cp_fenceproxy(..., scope='sys') and fence_proxy_tensormap_generic(k, "
        "'acquire', 'sys', map); .gpu orders only this GPU's threads [CUDA Programming Guide "
        "§10.30.2]"),
    Hazard.TMAP_PARAM_NO_CVTA: (
        E, "by-value tensor-map parameter used without cvta.param",
        "take the map's address with k.tensormap_addr(param) (mov.b64 + cvta.param.u64); a raw "
        "param-space address faults with 'misaligned address'"
        " [docs/hazards.md: tmap-param-no-cvta]"),
    Hazard.TMAP_REPLACE_NO_WARPSYNC: (
        E, "tensormap.replace on a shared map not followed by a warp sync before cp_fenceproxy",
        "run k.syncwarp() (bar.warp.sync -1) after the tensormap.replace ops and before the "
        "warp-collective tensormap.cp_fenceproxy [docs/hazards.md: tmap-replace-no-warpsync]"),
    Hazard.FENCEPROXY_DIVERGENT: (
        E, "tensormap.cp_fenceproxy executed under a per-lane (divergent) condition",
        "cp_fenceproxy is .sync.aligned: move it out of the lane-dependent if/guard so all 32 "
        "lanes of the warp execute it together [docs/hazards.md: fenceproxy-divergent]"),
    Hazard.TMAP_MODIFIED_IN_FLIGHT: (
        E, "tensor map modified while bulk operations that read it may still be in flight",
        "wait for the earlier copies first: the mbarrier wait for loads, "
        "cp.async.bulk.wait_group.read for stores/reductions"
        " [docs/hazards.md: tmap-modified-in-flight]"),
    Hazard.SMEM_NO_PROXY_FENCE: (
        E, "st.shared data read by a TMA store/reduce without fence.proxy.async and a barrier",
        "after the st.shared writes run fence.proxy.async.shared::cta, then a CTA barrier "
        "(bar.sync 0), then issue the TMA store/reduce [docs/hazards.md: smem-no-proxy-fence]"),
    Hazard.MBAR_UNINIT: (
        E, "mbarrier used before mbarrier.init",
        "initialise the barrier (mbarrier.init) before any arrive, expect_tx, wait or TMA that "
        "uses it, on every path [docs/hazards.md: mbar-uninit]"),
    Hazard.MBAR_INIT_UNSYNCED: (
        E, "mbarrier used by other threads or by TMA without a barrier after mbarrier.init",
        "after mbarrier.init run bar.sync 0 (CTA use), fence.proxy.async.shared::cta (TMA from "
        "the same thread) or fence.mbarrier_init.release.cluster + a cluster barrier (cluster / "
        "multicast use) [docs/hazards.md: mbar-init-unsynced]"),
    Hazard.EXPECT_TX_MISMATCH: (
        E, "expect_tx byte count differs from the bytes the TMA loads deliver in that phase",
        "make the expect_tx count equal the full box bytes (product of boxDim x element size, "
        "out-of-bounds elements included) of every load completing on that barrier "
        "[docs/hazards.md: expect-tx-mismatch]"),
    Hazard.WAIT_PARITY_CONSTANT: (
        E, "mbarrier wait whose parity does not follow the phases a loop completes",
        "flip the parity after every completed phase (e.g. xor phase, phase, 1) so each "
        "iteration waits for the next phase; after a loop, wait with the phase it leaves "
        "[docs/hazards.md: wait-parity-constant]"),
    Hazard.WAIT_CLUSTER_SPACE: (
        E, "mbarrier try_wait/test_wait on a .shared::cluster address",
        "wait only on the local CTA's barrier (a .shared::cta address); remote barriers "
        "support arrive/expect_tx/complete_tx only [docs/hazards.md: wait-cluster-space]"),
    Hazard.TMA_STORE_NEGATIVE_COORD: (
        E, "TMA store/reduce whose start coordinate is (or may be) negative",
        "store and reduce start coordinates must be >= 0 (a negative start faults with "
        "'illegal instruction'); only loads may start out of bounds"
        " [docs/hazards.md: tma-store-negative-coord]"),
    Hazard.TMA_SMEM_ALIGN: (
        W, "TMA shared-memory buffer aligned below 128 bytes (or below the swizzle repeat)",
        "declare the buffer with align=128, or the swizzle repeat for swizzled maps (256/512/"
        "1024 bytes for 32B/64B/128B); for an .extern (dynamic) buffer that already has it, "
        "move the static .shared variables the message names into the dynamic region "
        "(MbarrierRing(k, n, storage=Addr(dyn, offset)) for a ring's barriers) "
        "[docs/hazards.md: tma-smem-align]"),
    Hazard.BULK_SRC_OVERWRITE: (
        E, "shared source buffer overwritten before cp.async.bulk.wait_group.read",
        "commit the group and run cp.async.bulk.wait_group.read N (N small enough to cover "
        "that store) before writing the buffer again, and a CTA barrier after that wait when "
        "other threads write it [docs/hazards.md: bulk-src-overwrite]"),
    Hazard.BULK_SRC_RELEASED: (
        E, "shared memory handed back (mbarrier.arrive) while a bulk store may still read it",
        "in the thread that issued the store, run cp.async.bulk.wait_group.read N (N small "
        "enough to cover that store) before arriving on the stage's empty barrier, or a CTA "
        "barrier after that wait when other threads arrive "
        "[docs/hazards.md: bulk-src-released]"),
    Hazard.BULK_GROUP_NOT_WAITED: (
        W, "bulk async-groups committed but never waited for before the kernel exits",
        "end with cp.async.bulk.commit_group + cp.async.bulk.wait_group 0 (or .read 0) on "
        "every path to ret/exit so the shared source stays valid until read"
        " [docs/hazards.md: bulk-group-not-waited]"),
    Hazard.WGMMA_REGS_IN_FLIGHT: (
        E, "accumulator (or register A) of a wgmma.mma_async accessed before the "
        "wgmma.wait_group that retires it",
        "commit the wgmma (wgmma.commit_group) and run wgmma.wait_group N, with N small enough "
        "to cover its group, before reading or writing its d (or RS-form A) registers "
        "[PTX ISA §9.7.15.5]"),
    Hazard.WGMMA_NO_FENCE: (
        E, "wgmma.mma_async without a wgmma.fence after its registers were accessed",
        "run wgmma.fence (ptx.wgmma_fence(k)) before the first wgmma.mma_async and after any "
        "other instruction touches its accumulator or A registers [PTX ISA §9.7.15.7.1]"),
    Hazard.WGMMA_SMEM_NO_PROXY_FENCE: (
        E, "shared memory written by generic stores read by wgmma.mma_async without "
        "fence.proxy.async",
        "after the st.shared/stmatrix writes run fence.proxy.async.shared::cta, then a barrier "
        "of the threads that wrote and the warpgroup, then the wgmma [PTX ISA §9.7.15.6]"),
    Hazard.WGMMA_SMEM_RELEASED: (
        E, "shared memory handed back (mbarrier.arrive) while a wgmma.mma_async may still "
        "read it",
        "commit the wgmma and wait for it (wgmma.wait_group) before arriving on the stage's "
        "empty barrier; with wait_group 1, release the previous stage, not the current one "
        "[PTX ISA §9.7.15.5]"),
    Hazard.SMEM_READ_RELEASED: (
        E, "shared memory read after its ring stage was handed back (mbarrier.arrive)",
        "read the stage before arriving on its empty barrier (the arrive is the thread's "
        "promise that it is done with the stage) [docs/hazards.md: smem-read-released]"),
    Hazard.SETMAXNREG_NOT_UNIFORM: (
        E, "setmaxnreg executed by only some threads of a warpgroup",
        "setmaxnreg is .sync.aligned per warpgroup: branch on the warpgroup index (tid / 128, "
        "or anything uniform across 128 threads), never on a per-warp or per-thread value "
        "[PTX ISA §9.7.19.5]"),
    Hazard.WGMMA_NOT_WARPGROUP: (
        E, "wgmma instruction executed by only some threads of a warpgroup",
        "wgmma.fence / mma_async / commit_group / wait_group are .sync.aligned per warpgroup: "
        "give the CTA a multiple of 128 threads and branch on the warpgroup index (tid / 128, "
        "or anything uniform across 128 threads), never on a per-warp or per-thread value "
        "[PTX ISA, wgmma.mma_async]"),
    Hazard.MBAR_ARRIVE_COUNT: (
        E, "mbarrier arrive count differs from the arrivals each phase gets",
        "initialise the barrier with the number of arrive operations one phase receives "
        "(threads that run the arrive, times its count): 1 for one elected thread, the warp "
        "count for one lane per warp, the thread count for every thread"
        " [docs/hazards.md: mbar-arrive-count]"),
    Hazard.MBAR_REINIT: (
        E, "live mbarrier re-initialised inside a loop",
        "initialise each barrier once, before the loop, and track its phase with a parity "
        "that flips per completed phase; re-initialising a barrier other threads or TMA may "
        "still use races with them (mbarrier.inval first if it must be reused)"
        " [docs/hazards.md: mbar-reinit]"),
    Hazard.RING_PARITY: (
        E, "wait parity on a ring of more than one stage that is not its stage's phase",
        "each stage's barrier completes one phase every N iterations: wait for parity "
        "(i / N) & 1 (or flip the phase when the stage index wraps to 0)"
        " [docs/hazards.md: ring-parity]"),
    Hazard.WAIT_WRONG_BARRIER: (
        E, "shared data read after waiting on a barrier its TMA load does not complete on",
        "wait on the barrier of the same stage as the buffer you read (full[s] for tile[s]): "
        "the load of that buffer signals only its own barrier"
        " [docs/hazards.md: wait-wrong-barrier]"),
    Hazard.RING_REFILL_UNGUARDED: (
        E, "producer refills a ring stage without waiting for the consumers to free it",
        "before re-issuing the TMA load into stage s, wait on that stage's empty barrier "
        "(the consumers arrive on it after reading the stage)"
        " [docs/hazards.md: ring-refill-unguarded]"),
    Hazard.RING_STAGE_MISMATCH: (
        E, "producer and consumer walk a ring with different stage counts",
        "index every barrier and buffer of one ring modulo the same stage count on both "
        "sides (the count of barriers initialised: one constant, or one MbarrierRing for "
        "both); with N on one side and M on the other the two sides meet on different "
        "stages, and waits hang or pass on the wrong data [docs/hazards.md: ring-stage-mismatch]"),
    Hazard.SMEM_READ_BEFORE_WAIT: (
        E, "shared memory read from a TMA destination before the wait that covers it",
        "wait on the load's mbarrier (try_wait loop on the phase's parity) before reading "
        "the buffer; the copy lands asynchronously [docs/hazards.md: smem-read-before-wait]"),
    Hazard.TRY_WAIT_NOT_LOOPED: (
        E, "mbarrier try_wait/test_wait result never looped on",
        "try_wait may return false before the phase completes: branch back to it while the "
        "predicate is false (ptx.mbarrier_wait builds that loop)"
        " [docs/hazards.md: try-wait-not-looped]"),
    Hazard.TMAP_REPLACE_NO_RELEASE: (
        E, "tensor map modified in global memory and acquired with no release in between",
        "after tensormap.replace on the global map run fence.proxy.tensormap::generic."
        "release.<scope> (ptx.fence_proxy_tensormap_generic(k, 'release', 'gpu')) before the "
        "acquire; the acquire alone does not order this thread's generic-proxy writes "
        "[docs/hazards.md: tmap-replace-no-release]"),
    Hazard.TMAP_SCOPE_TOO_NARROW: (
        E, "tensor map in global memory released or acquired at .cta/.cluster scope",
        "a map in global memory that other CTAs (or later kernels) use needs .gpu scope (.sys "
        "across devices or from the host) on the release and the acquire; .cta orders only "
        "this CTA's threads [docs/hazards.md: tmap-scope-too-narrow]"),
    Hazard.WAIT_PARITY_FIRST_PHASE: (
        E, "first wait on a fresh mbarrier asks for the wrong parity",
        "a fresh barrier is in phase 0 and counts the phase before it (parity 1) as "
        "completed: consumers waiting for data start at parity 0 ((i / S) & 1), producers "
        "waiting for free stages start at parity 1 (((i / S) & 1) ^ 1) or skip the wait "
        "while i < S [docs/hazards.md: wait-parity-first-phase]"),
    Hazard.TMA_DST_OVERLAP: (
        E, "two TMA loads of one barrier phase, or in flight together, write the same shared bytes",
        "give each copy completing on a barrier phase its own destination (split producers: "
        "one slot per producer, e.g. tile + 512 for the second operand); issue a copy from "
        "one thread, not from every warp that reaches it; place a buffer's rings and stages at "
        "least a box apart [docs/hazards.md: tma-dst-overlap]"),
    Hazard.TMAP_ENCODED_INVALID: (
        E, "tensor map encoded on the device with fields the driver's encoder refuses",
        "write the fields cuTensorMapEncodeTiled would accept: box extents 1..256, the box's "
        "inner extent (box_dim[0] x element size) a multiple of 16 bytes and at most the "
        "swizzle span (32/64/128 bytes), traversal strides 1..8, byte strides multiples of "
        "16; a 32B interleave only with the 32B swizzle "
        "[docs/hazards.md: tmap-encoded-invalid]"),
    Hazard.WGMMA_SWIZZLE_MISMATCH: (
        E, "wgmma descriptor swizzle differs from the TMA map's that wrote its tile",
        "give the descriptor and the map one swizzle: build both from one SmemLayout "
        "(descriptor(k, layout, buf) and TensorMap.tiled(..., layout.tma_box[::-1], "
        "swizzle=layout.tma_swizzle)), or set the host map's CU_TENSOR_MAP_SWIZZLE_* to the "
        "descriptor's layout type (1: 128B, 2: 64B, 3: 32B, 0: none) "
        "[docs/hazards.md: wgmma-swizzle-mismatch]"),
    Hazard.NAMEDBAR_COUNT: (
        E, "named barrier thread count that no set of arriving warps can meet",
        "give bar.sync/bar.arrive the number of threads that arrive in one phase: a multiple "
        "of 32, at most the CTA's size, and no more than the warps that use that barrier id "
        "(256 for two warpgroups) [docs/hazards.md: named-barrier-count]"),
    Hazard.NAMEDBAR_UNPAIRED: (
        E, "bar.sync on a named barrier whose partner arrivals are missing on some path",
        "on every path, the warps that arrive on the barrier (bar.arrive) must supply the "
        "threads each sync waits for: run the partner's bar.arrive on every iteration (and "
        "after the last one, when the other side syncs once more) "
        "[docs/hazards.md: named-barrier-unpaired]"),
    Hazard.NAMEDBAR_SURPLUS: (
        E, "named barrier receives more arrivals than its syncs consume",
        "arrive on a barrier only as often as its partner syncs on it: one bar.arrive per "
        "bar.sync of the other side, a count covering both sides (256 for two warpgroups), "
        "and at most one side pre-arriving before the loop "
        "[docs/hazards.md: named-barrier-surplus]"),
    Hazard.NAMEDBAR_DEADLOCK: (
        E, "bar.sync on named barriers that wait for each other",
        "let one side arrive first: in a ping-pong the second warpgroup pre-arrives on the "
        "first's barrier before the loop (bar.arrive 1, 256), so the first's sync completes "
        "and its arrive then releases the second [docs/hazards.md: named-barrier-deadlock]"),
    Hazard.NAMEDBAR_COLLISION: (
        E, "one named barrier id used with different thread counts by different warps",
        "give each use its own id (ids 1..15; TmaStoreEpilogue takes the id you pass it, one "
        "per warpgroup): two counts on one id add their arrivals in one phase "
        "[docs/hazards.md: named-barrier-collision]"),
    Hazard.CTA_BARRIER_DIVERGENT: (
        E, "CTA-wide bar.sync reached by only some warps while the others wait elsewhere",
        "run bar.sync X with no count only where every warp of the CTA gets to it, or give it "
        "the thread count of the warps that do (bar.sync 1, 128 for one warpgroup) with an "
        "id of their own [docs/hazards.md: cta-barrier-divergent]"),
    Hazard.DSMEM_READ_UNSYNCED: (
        E, "shared memory of another CTA of the cluster read without a cluster barrier after "
        "its writes",
        "between the writes and the reads run barrier.cluster.arrive.release + "
        "barrier.cluster.wait.acquire in every thread (pipeline.cluster_sync(k)); a "
        ".relaxed arrive orders nothing [docs/hazards.md: dsmem-read-unsynced]"),
    Hazard.DSMEM_RELEASED_EARLY: (
        E, "a CTA exits or overwrites its shared memory while other CTAs of the cluster may "
        "still access it",
        "after the last access to another CTA's shared memory (ld/st.shared::cluster, remote "
        "mbarrier.arrive, st.async/red.async completing on a barrier nobody waits on) run "
        "barrier.cluster.arrive + barrier.cluster.wait (pipeline.cluster_sync(k)) before the "
        "exit or the overwrite [docs/hazards.md: dsmem-released-early]"),
    Hazard.PEER_PUBLISH_NO_SYS_RELEASE: (
        E, "peer buffer written, then signalled to another GPU without a .sys release",
        "signal with st.release.sys / red.release.sys (or put fence.acq_rel.sys between the "
        "writes and a .relaxed.sys signal); .gpu orders only this GPU's threads, and a TMA "
        "store must be complete (cp.async.bulk.wait_group 0) before the signal "
        "[docs/hazards.md: peer-publish-no-sys-release]"),
    Hazard.PEER_CONSUME_NO_SYS_ACQUIRE: (
        E, "peer buffer read after a signal wait without a .sys acquire",
        "spin with ld.acquire.sys (or a .relaxed.sys/.volatile load followed by "
        "fence.acq_rel.sys before the reads); .gpu orders only this GPU's threads "
        "[docs/hazards.md: peer-consume-no-sys-acquire]"),
    Hazard.PEER_READ_UNSYNCHRONIZED: (
        E, "peer buffer read with no signal wait before it on some path",
        "wait for the writer's signal (signals.signal_wait / barrier_all_ranks: a .sys "
        "acquire spin on a pad some rank sets) before the read on every path; a buffer only "
        "written before the launch need not be named in peer_buffers "
        "[docs/hazards.md: peer-read-unsynchronized]"),
    Hazard.SIGNAL_PAD_REUSE: (
        E, "signal pad slot waited for with a value every round reuses",
        "signal a value that changes every round (an epoch from a kernel parameter or a "
        "counter, compared with ==/>=), consume the flag with atom.cas 1 -> 0 (torch's "
        "wait_signal), or reset it after the wait and run a further round of signals "
        "before the kernel ends [docs/hazards.md: signal-pad-reuse]"),
    Hazard.SIGNAL_WAIT_UNSET: (
        E, "spin on a signal pad that no rank sets on some path to it",
        "every rank runs the same code: set the peers' flags before the wait on every path "
        "(a thread-id guard is fine; a rank- or data-dependent one the wait is not under "
        "is not) [docs/hazards.md: signal-wait-unset]"),
    Hazard.PEER_POLL_WEAK: (
        E, "peer buffer polled for its data with a load that is weak or narrower than .sys",
        "poll with ld.relaxed.sys (or ld.volatile, ld.acquire.sys), vector loads included: a "
        "weak load may be served from L1 or hoisted out of the loop and never see the peer's "
        "store, or see it torn; .gpu orders only this GPU's threads "
        "[docs/hazards.md: peer-poll-weak]"),
    Hazard.PEER_WRITE_UNPUBLISHED: (
        E, "peer buffer written weakly with no signal after it on some path",
        "store the data with st.relaxed.sys / st.release.sys / st.volatile (or red/atom at "
        ".sys) when the reader polls the data itself, or signal the peer after the writes "
        "(signals.signal_set, barrier_all_ranks) on every path "
        "[docs/hazards.md: peer-write-unpublished]"),
    Hazard.TMEM_USE_BEFORE_ALLOC: (
        E, "tensor memory used before tcgen05.alloc, or its address read unpublished",
        "run tcgen05.alloc on every path before the tensor memory is used; threads other than "
        "the allocating warp read the address it stored after a barrier (bar.sync), then "
        "tcgen05.fence::after_thread_sync [docs/hazards.md: tmem-use-before-alloc]"),
    Hazard.TMEM_NOT_DEALLOCATED: (
        E, "tensor memory not deallocated before the kernel exits",
        "run tcgen05.dealloc (same .cta_group and column count) on every path from the alloc "
        "to an exit [docs/hazards.md: tmem-not-deallocated]"),
    Hazard.TMEM_PERMIT_NOT_RELINQUISHED: (
        W, "a kernel that allocates tensor memory keeps its allocation permit until it exits",
        "run tcgen05.relinquish_alloc_permit once the CTA's last tcgen05.alloc is done, on "
        "every path [docs/hazards.md: tmem-permit-not-relinquished]"),
    Hazard.TMEM_ALLOC_AFTER_RELINQUISH: (
        E, "tcgen05.alloc after the CTA relinquished its allocation permit",
        "allocate everything before tcgen05.relinquish_alloc_permit (once per CTA, not per "
        "tile of a persistent loop) [docs/hazards.md: tmem-alloc-after-relinquish]"),
    Hazard.TMEM_READ_BEFORE_COMMIT_WAIT: (
        E, "tensor memory read, written or freed while a tcgen05.mma may still write it",
        "tcgen05.commit the mma to an mbarrier and wait on that barrier before the tcgen05.ld"
        " or st (then tcgen05.fence::after_thread_sync) or the dealloc "
        "[docs/hazards.md: tmem-read-before-commit-wait]"),
    Hazard.TCGEN05_LD_NO_WAIT: (
        E, "tensor memory written, freed or handed over while a tcgen05.ld may still read it",
        "run tcgen05.wait::ld after the loads and before the write, dealloc or "
        "synchronisation [docs/hazards.md: tcgen05-ld-no-wait]"),
    Hazard.TCGEN05_ST_NO_WAIT: (
        E, "tensor memory used, freed or handed over while a tcgen05.st may still write it",
        "run tcgen05.wait::st after the stores and before the next tcgen05 operation on "
        "tensor memory, the dealloc or the synchronisation [docs/hazards.md: "
        "tcgen05-st-no-wait]"),
    Hazard.TCGEN05_FENCE_MISSING: (
        E, "tcgen05 operations ordered by a thread synchronisation without tcgen05.fence",
        "tcgen05.fence::before_thread_sync between the tcgen05 work and the arrive/bar.sync "
        "that hands it over; tcgen05.fence::after_thread_sync between the wait/bar.sync and "
        "the tcgen05 work after it [docs/hazards.md: tcgen05-fence-missing]"),
    Hazard.TCGEN05_CTA_GROUP_MIXED: (
        E, "tcgen05 instructions of one kernel name different .cta_group values",
        "give every tcgen05 instruction of the kernel the same .cta_group (::1 for one CTA, "
        "::2 for a CTA pair) [docs/hazards.md: tcgen05-cta-group-mixed]"),
    Hazard.TCGEN05_SMEM_NO_PROXY_FENCE: (
        E, "shared memory written by generic stores read by tcgen05.mma or tcgen05.cp without "
        "fence.proxy.async",
        "after the st.shared/stmatrix writes run fence.proxy.async.shared::cta, then a barrier "
        "of the threads that wrote and the issuing thread (bar.sync), then the tcgen05.mma/cp "
        "[docs/hazards.md: tcgen05-smem-no-proxy-fence]"),
    Hazard.CHECK_SKIPPED: (
        N, "a check was skipped for lack of information",
        "give the checker what it lacks (a map's box: k.param_tensormap(name, box=...) or "
        "maps={...}; a constant count; a CTA shape with reqntid=), or verify that part by "
        "hand [docs/hazards.md: Context]"),
}


@attrs.frozen
class Site:
    """One instruction involved in a finding: its role, PTX text and the Python line."""

    role: str
    ptx: str
    loc: SourceLoc | None

    def format(self) -> str:
        """`role:      ptx  (file:line)`, one line of a finding's report."""
        describe = getattr(self.loc, "describe", None)
        where = f"  ({describe() if describe else self.loc})" if self.loc is not None else ""
        return f"{self.role + ':':<10} {self.ptx}{where}"


def _sites(sites: Iterable[Site]) -> tuple[Site, ...]:   # a converter the attrs plugin types
    return tuple(sites)


@attrs.frozen
class Finding:
    """One hazard found in one kernel. `sites[0]` is where it bites (its line leads)."""

    hazard: Hazard
    kernel: str
    message: str
    sites: tuple[Site, ...] = attrs.field(converter=_sites)
    severity: Severity = attrs.field()
    fix: str = attrs.field()
    # A note the command line prints even without --notes, as this one line: a check that a
    # declaration in the kernel would turn on ("expect_tx bytes of k: not checked, ...").
    unchecked: str = attrs.field(default="", kw_only=True)

    @severity.default
    def _severity(self) -> Severity:
        return self.hazard.severity

    @fix.default
    def _fix(self) -> str:
        return self.hazard.fix

    @property
    def id(self) -> str:
        """The hazard id (`tmap-no-acquire`), as docs/hazards.md and suppressions name it."""
        return self.hazard.value

    @property
    def loc(self) -> SourceLoc | None:
        """The Python location of the instruction where the hazard bites."""
        for s in self.sites:
            if s.loc is not None:
                return s.loc
        return None

    def headline(self) -> str:
        """`error[id] kernel 'k': title: message`: the finding in one line, without sites."""
        return (f"{self.severity.value}[{self.id}] kernel '{self.kernel}': "
                f"{self.hazard.title}: {self.message}")

    def format(self, with_loc: bool = True) -> str:
        """`file:line: error[id] kernel 'k': title: message`, then the sites and the fix."""
        where = f"{self.loc}: " if self.loc is not None and with_loc else ""
        lines = [where + self.headline()]
        lines += ["    " + s.format() for s in self.sites]
        lines.append(f"    fix: {self.fix}")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.format()


class PtxdslHazardWarning(UserWarning):
    """The category of the warnings `Module.emit()` issues for hazards the checker finds."""


class HazardError(BuildError):
    """Raised by `Module.emit()` in strict mode: lists every finding."""

    def __init__(self, findings: list[Finding]):
        self.findings = list(findings)
        n = len(self.findings)
        text = f"{n} hazard{'s' if n != 1 else ''} found:\n" + "\n".join(
            f.format() for f in self.findings)
        loc = self.findings[0].loc if self.findings else None
        super().__init__(text, loc if loc is not None else SourceLoc("<checker>", 0))
