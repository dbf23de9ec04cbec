"""Held-out hazard kernels, wave 4 (tests/test_checker_wave4.py): raw PTX as nvcc and
hand-written CUTLASS/FA3-style kernels look, written without reading the rules' code.

- A 2-CTA cluster ring: each CTA multicasts its half of every stage into both CTAs
  (`.multicast::cluster`, ctaMask 0b11), and each consumer warp releases the stage on its own
  and on the peer's empty barrier (`mapa` + `mbarrier.arrive...shared::cluster`).
- Q, K and V rings in one `.extern .shared` buffer at computed offsets, the output staged in
  Q's stage and stored with TMA in two halves.
(tests/wave4b_kernels.py has the rest: FA3's named-barrier ping-pong, device-encoded tensor
maps, a swizzled ring after a header, a wgmma's swizzle.)

Loops come head-tested with `rem`/`div` stages or bottom-tested with a wrapped stage register
and a phase flipped on the wrap (`form`). Each `Pair`'s buggy twin differs by one mistake."""

from __future__ import annotations

from tests.wave3_kernels import HEAD, REGS, Pair, _maps

LOAD = "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
STORE = "cp.async.bulk.tensor.2d.global.shared::cta.bulk_group"
HALF = 4096                                  # bytes of one CTA's multicast slice


def _loop(tag: str, form: str, i: str, n: str, s: str, ph: str, start: int, body: str) -> str:
    """A loop of `n` trips over a 2-stage ring: stage in `s`, phase in `ph` (starting at
    `start`: 0 for consumers, 1 for producers). 'rem' is head-tested and recomputes both from
    the counter `i` each trip; 'wrap' is nvcc's bottom-tested form (zero-trip test first)
    with `s` wrapped in place and `ph` flipped on the wrap."""
    if form == "rem":
        flip = f"  xor.b32 {ph}, {ph}, 1;\n" if start else ""
        return f"""  mov.b32 {i}, 0;
$L_{tag}:
  setp.ge.u32 %p30, {i}, {n};
  @%p30 bra $L_{tag}_DONE;
  rem.u32 {s}, {i}, 2;
  div.u32 {ph}, {i}, 2;
  and.b32 {ph}, {ph}, 1;
{flip}{body}  add.s32 {i}, {i}, 1;
  bra.uni $L_{tag};
$L_{tag}_DONE:
"""
    if form == "selp":   # the stage stepped into a temporary, wrapped and flipped by selp
        step = f"""  add.s32 %r95, {s}, 1;
  setp.eq.s32 %p31, %r95, 2;
  selp.b32 {s}, 0, %r95, %p31;
  xor.b32 %r94, {ph}, 1;
  selp.b32 {ph}, %r94, {ph}, %p31;
"""
    else:
        step = f"""  add.s32 {s}, {s}, 1;
  setp.eq.s32 %p31, {s}, 2;
  @%p31 mov.b32 {s}, 0;
  @%p31 xor.b32 {ph}, {ph}, 1;
"""
    return f"""  mov.b32 {i}, 0;
  mov.b32 {s}, 0;
  mov.b32 {ph}, {start};
  setp.eq.s32 %p30, {n}, 0;
  @%p30 bra $L_{tag}_DONE;
$L_{tag}:
{body}{step}  add.s32 {i}, {i}, 1;
  setp.lt.u32 %p30, {i}, {n};
  @%p30 bra $L_{tag};
$L_{tag}_DONE:
"""


def _wait(tag: str, bar: str, ph: str, pred: str = "%p29") -> str:
    return f"""$L_{tag}:
  mbarrier.try_wait.parity.shared::cta.b64 {pred}, [{bar}], {ph};
  @!{pred} bra $L_{tag};
"""


def _store_result(name: str, param: int, f: str = "%f1") -> str:
    return f"""  ld.param.u64 %rd20, [{name}_param_{param}];
  cvta.to.global.u64 %rd21, %rd20;
  mul.wide.u32 %rd22, %r1, 4;
  add.s64 %rd23, %rd21, %rd22;
  st.global.f32 [%rd23], {f};
"""


# -- a 2-CTA cluster ring fed by multicast ------------------------------------------------------
def cluster_ring(name: str, bug: str | None, form: str, lanes: str | None = None) -> str:
    """Warpgroup 0 consumes a 2-stage ring at smem+0 (stages of 8 KiB, full barriers at
    smem+16384, empty ones at smem+16400); warp 4's elected lane produces. Each CTA loads its
    4 KiB half of a stage with ctaMask 0b11, so each CTA's full barrier receives both halves
    (expect_tx 8192); each empty barrier expects one arrival per consumer warp of both CTAs
    (8). The cluster barrier publishes the inits before any multicast or remote arrive, and
    the final one keeps each CTA alive while its peer may still arrive on its barriers or
    multicast into it. `bug`: 'local' releases only the local empty barrier, 'tx' announces
    only this CTA's half, 'mask' multicasts to rank 0 only, 'self' to the issuing CTA only
    (`1 << rank`), 'pstart' starts the producer's phase at 0 (its first wait on a fresh
    empty barrier blocks: a hang), 'init' publishes the inits with
    `bar.sync` alone, 'exit' drops the final cluster barrier. With `lanes` (a predicate
    register), CUTLASS's release: lane r of each consumer warp arrives on rank r's
    `empty[s]` (`mapa` of the stage's barrier by the lane number, the own rank included)
    under `lanes` = `lane < 2`; 'one' lets lane 0 alone arrive (rank 0's barrier only)."""
    init_sync = "  bar.sync 0;\n" if bug == "init" else \
        "  barrier.cluster.arrive.release;\n  barrier.cluster.wait.acquire;\n"
    exit_sync = "" if bug == "exit" else \
        "  barrier.cluster.arrive.release;\n  barrier.cluster.wait.acquire;\n"
    tx = HALF if bug == "tx" else 2 * HALF
    pstart = 0 if bug == "pstart" else 1
    mask = {"mask": "  mov.b16 %rs1, 1;\n",
            # (`1 << rank`: each CTA multicasts only into itself)
            "self": "  mov.b16 %rs2, 1;\n  shl.b16 %rs1, %rs2, %r5;\n"}.get(
        bug or "", "  mov.b16 %rs1, 3;\n")
    remote = "" if bug == "local" else \
        "  @%p6 mbarrier.arrive.release.cluster.shared::cluster.b64 _, [%r43];\n"
    produce = _wait(f"{name}_PW", "%r19", "%r17") + f"""\
  mbarrier.arrive.expect_tx.shared::cta.b64 _, [%r20], {tx};
  shl.b32 %r21, %r14, 13;
  add.s32 %r22, %r2, %r21;
  add.s32 %r23, %r22, %r12;
  shl.b32 %r24, %r13, 6;
  {LOAD}.multicast::cluster
      [%r23], [%rd2, {{%r12, %r24}}], [%r20], %rs1;
"""
    produce = "  shl.b32 %r18, %r14, 3;\n  add.s32 %r19, %r4, %r18;\n" \
              "  add.s32 %r20, %r3, %r18;\n" + produce
    consume = "  shl.b32 %r36, %r33, 3;\n  add.s32 %r37, %r3, %r36;\n" + \
        _wait(f"{name}_CW", "%r37", "%r35", "%p8") + f"""  shl.b32 %r38, %r33, 13;
  add.s32 %r39, %r2, %r38;
  add.s32 %r41, %r39, %r40;
  ld.shared.f32 %f2, [%r41];
  ld.shared.f32 %f3, [%r41+{HALF}];
  add.f32 %f1, %f1, %f2;
  add.f32 %f1, %f1, %f3;
  bar.warp.sync -1;
  add.s32 %r42, %r4, %r36;
  add.s32 %r43, %r32, %r36;
  @%p6 mbarrier.arrive.release.cta.shared::cta.b64 _, [%r42];
{remote}"""
    if lanes:
        consume = consume.replace(
            "  @%p6 mbarrier.arrive.release.cta.shared::cta.b64 _, [%r42];\n" + remote,
            f"  setp.lt.u32 {lanes}, %r31, {1 if bug == 'one' else 2};\n"
            "  mapa.shared::cluster.u32 %r44, %r42, %r31;\n"
            f"  @{lanes} mbarrier.arrive.release.cluster.shared::cluster.b64 _, [%r44];\n")
    return HEAD + f"""
.extern .shared .align 1024 .b8 smem[];
.visible .entry {name}(.param .align 64 .b8 {name}_param_0[128], .param .u32 {name}_param_1,
    .param .u64 {name}_param_2)
.reqntid 160
.explicitcluster
.reqnctapercluster 2, 1, 1
{{
{REGS}  .reg .b16 %rs<4>;
  mov.u32 %r1, %tid.x;
  mov.u32 %r2, smem;
  add.s32 %r3, %r2, 16384;
  add.s32 %r4, %r2, 16400;
  mov.u32 %r5, %cluster_ctarank;
  xor.b32 %r6, %r5, 1;
  setp.eq.s32 %p1, %r1, 0;
  @!%p1 bra $L_INIT_DONE;
  mbarrier.init.shared::cta.b64 [%r3], 1;
  mbarrier.init.shared::cta.b64 [%r3+8], 1;
  mbarrier.init.shared::cta.b64 [%r4], 8;
  mbarrier.init.shared::cta.b64 [%r4+8], 8;
  fence.mbarrier_init.release.cluster;
$L_INIT_DONE:
{init_sync}  ld.param.u32 %r9, [{name}_param_1];
  shr.u32 %r10, %r1, 5;
  setp.eq.s32 %p2, %r10, 4;
  @%p2 bra $L_PROD;
  setp.ge.u32 %p9, %r1, 128;
  @%p9 bra $L_END;
  mov.f32 %f1, 0f00000000;
  and.b32 %r31, %r1, 31;
  setp.eq.s32 %p6, %r31, 0;
  mapa.shared::cluster.u32 %r32, %r4, %r6;
  shl.b32 %r40, %r1, 2;
{_loop(name + "_C", form, "%r30", "%r9", "%r33", "%r35", 0, consume)}\
{_store_result(name, 2)}  bra.uni $L_END;
$L_PROD:
  elect.sync %r11|%p3, -1;
  @!%p3 bra $L_END;
  mov.u64 %rd1, {name}_param_0;
  cvta.param.u64 %rd2, %rd1;
  shl.b32 %r12, %r5, 12;
{mask}{_loop(name + "_P", form, "%r13", "%r9", "%r14", "%r17", pstart, produce)}$L_END:
{exit_sync}  ret;
}}
"""


def _cluster_pair(name: str, hazard: str, bug: str, form: str,
                  lanes: str | None = None) -> Pair:
    return Pair(name, hazard, lambda b: cluster_ring(name, bug if b else None, form, lanes),
                _maps(name, 0, box=HALF))


# -- Q, K and V rings in one dynamic buffer, the output staged in Q's stage ----------------------
QKV_BARS = 49152


def qkv(name: str, bug: str | None, form: str) -> str:
    """FA3's layout: Q at smem+0 (8 KiB, loaded once), K's 2 stages at smem+8192, V's at
    smem+24576 (V at smem+25088 with `bug` 'align', off the 128B swizzle's 1024-byte phase),
    barriers at smem+49152 (Q full; K full x2, K empty x2; V full x2, V empty x2). Warp 4's
    elected lane loads Q, then K and V stage by stage after each stage's release; warpgroup 0
    reads Q, then K and V each trip and releases each stage (every thread arrives, count 128).
    The epilogue stages the output in Q's stage (after a `bar.sync 1, 128` that orders every
    consumer's reads of Q before the writes), in two 4 KiB halves through the same bytes,
    each stored by thread 0 with TMA. `bug`: 'vwait' drops the consumers' V wait, 'vparity'
    waits on V with the phase of the trip (`i & 1`, a 2-stage ring needs `(i / 2) & 1`),
    'fence' drops the proxy fence before the first store, 'pstart' starts the producer's
    phase at 0 (a hang), 'reuse' rewrites the staging for the second half without thread
    0's `wait_group.read` of the first store, 'vrelease' releases V's stage before reading
    it (the producer's next copy may land under the read)."""
    v_at = 25088 if bug == "align" else 24576
    pstart = 0 if bug == "pstart" else 1
    vph = "%r36" if bug == "vparity" else "%r35"
    vparity = "  and.b32 %r36, %r30, 1;\n" if bug == "vparity" else ""
    vwait = "" if bug == "vwait" else _wait(f"{name}_VW", "%r45", vph, "%p9")
    fence = "" if bug == "fence" else "  fence.proxy.async.shared::cta;\n"
    read_wait = "" if bug == "reuse" else "  @%p1 cp.async.bulk.wait_group.read 0;\n"
    produce = "  shl.b32 %r18, %r14, 3;\n  add.s32 %r19, %r4, %r18;\n" \
              "  add.s32 %r20, %r3, %r18;\n" + _wait(f"{name}_PK", "%r19", "%r17") + \
        f"""  mbarrier.arrive.expect_tx.shared::cta.b64 _, [%r20], 8192;
  shl.b32 %r21, %r14, 13;
  add.s32 %r22, %r2, %r21;
  shl.b32 %r23, %r13, 6;
  {LOAD}
      [%r22+8192], [%rd4, {{%r25, %r23}}], [%r20];
  add.s32 %r26, %r5, %r18;
  add.s32 %r27, %r6, %r18;
""" + _wait(f"{name}_PV", "%r27", "%r17") + \
        f"""  mbarrier.arrive.expect_tx.shared::cta.b64 _, [%r26], 8192;
  add.s32 %r28, %r7, %r21;
  {LOAD}
      [%r28], [%rd6, {{%r25, %r23}}], [%r26];
"""
    consume = f"""{vparity}  shl.b32 %r37, %r33, 3;
  add.s32 %r38, %r3, %r37;
  add.s32 %r39, %r4, %r37;
""" + _wait(f"{name}_KW", "%r38", "%r35", "%p8") + """  shl.b32 %r41, %r33, 13;
  add.s32 %r42, %r2, %r41;
  add.s32 %r43, %r42, %r40;
  ld.shared.f32 %f3, [%r43+8192];
  fma.rn.f32 %f1, %f2, %f3, %f1;
  mbarrier.arrive.shared::cta.b64 _, [%r39];
  add.s32 %r44, %r7, %r41;
  add.s32 %r45, %r5, %r37;
  add.s32 %r46, %r6, %r37;
""" + vwait + """  add.s32 %r47, %r44, %r40;
  ld.shared.f32 %f4, [%r47];
  add.f32 %f1, %f1, %f4;
  mbarrier.arrive.shared::cta.b64 _, [%r46];
"""
    if bug == "vrelease":   # V's stage handed back before this thread reads it
        consume = consume.replace("  ld.shared.f32 %f4, [%r47];\n", "").replace(
            "  mbarrier.arrive.shared::cta.b64 _, [%r46];\n",
            "  mbarrier.arrive.shared::cta.b64 _, [%r46];\n  ld.shared.f32 %f4, [%r47];\n")
    return HEAD + f"""
.extern .shared .align 1024 .b8 smem[];
.visible .entry {name}(.param .align 64 .b8 {name}_param_0[128],
    .param .align 64 .b8 {name}_param_1[128], .param .align 64 .b8 {name}_param_2[128],
    .param .align 64 .b8 {name}_param_3[128], .param .u32 {name}_param_4)
.reqntid 160
{{
{REGS}  mov.u32 %r1, %tid.x;
  mov.u32 %r2, smem;
  add.s32 %r8, %r2, {QKV_BARS};
  add.s32 %r3, %r8, 8;
  add.s32 %r4, %r8, 24;
  add.s32 %r5, %r8, 40;
  add.s32 %r6, %r8, 56;
  add.s32 %r7, %r2, {v_at};
  setp.eq.s32 %p1, %r1, 0;
  @!%p1 bra $L_INIT_DONE;
  mbarrier.init.shared::cta.b64 [%r8], 1;
  mbarrier.init.shared::cta.b64 [%r3], 1;
  mbarrier.init.shared::cta.b64 [%r3+8], 1;
  mbarrier.init.shared::cta.b64 [%r4], 128;
  mbarrier.init.shared::cta.b64 [%r4+8], 128;
  mbarrier.init.shared::cta.b64 [%r5], 1;
  mbarrier.init.shared::cta.b64 [%r5+8], 1;
  mbarrier.init.shared::cta.b64 [%r6], 128;
  mbarrier.init.shared::cta.b64 [%r6+8], 128;
  fence.mbarrier_init.release.cluster;
$L_INIT_DONE:
  bar.sync 0;
  ld.param.u32 %r9, [{name}_param_4];
  shr.u32 %r10, %r1, 5;
  setp.eq.s32 %p2, %r10, 4;
  @%p2 bra $L_PROD;
  setp.ge.u32 %p10, %r1, 128;
  @%p10 bra $L_END;
  shl.b32 %r40, %r1, 2;
  mov.f32 %f1, 0f00000000;
  mov.b32 %r34, 0;
""" + _wait(f"{name}_QW", "%r8", "%r34", "%p7") + f"""  add.s32 %r48, %r2, %r40;
  ld.shared.f32 %f2, [%r48];
{_loop(name + "_C", form, "%r30", "%r9", "%r33", "%r35", 0, consume)}  bar.sync 1, 128;
  st.shared.f32 [%r48], %f1;
{fence}  bar.sync 1, 128;
  mov.u64 %rd7, {name}_param_3;
  cvta.param.u64 %rd8, %rd7;
  mov.b32 %r49, 0;
  @%p1 {STORE} [%rd8, {{%r49, %r49}}], [%r2];
  @%p1 cp.async.bulk.commit_group;
{read_wait}  bar.sync 1, 128;
  mul.f32 %f5, %f1, %f1;
  st.shared.f32 [%r48], %f5;
  fence.proxy.async.shared::cta;
  bar.sync 1, 128;
  mov.b32 %r50, 64;
  @%p1 {STORE} [%rd8, {{%r50, %r49}}], [%r2];
  @%p1 cp.async.bulk.commit_group;
  @%p1 cp.async.bulk.wait_group 0;
  bra.uni $L_END;
$L_PROD:
  elect.sync %r11|%p3, -1;
  @!%p3 bra $L_END;
  mov.u64 %rd1, {name}_param_0;
  cvta.param.u64 %rd2, %rd1;
  mov.u64 %rd3, {name}_param_1;
  cvta.param.u64 %rd4, %rd3;
  mov.u64 %rd5, {name}_param_2;
  cvta.param.u64 %rd6, %rd5;
  mov.b32 %r25, 0;
  mbarrier.arrive.expect_tx.shared::cta.b64 _, [%r8], 8192;
  {LOAD}
      [%r2], [%rd2, {{%r25, %r25}}], [%r8];
{_loop(name + "_P", form, "%r13", "%r9", "%r14", "%r17", pstart, produce)}$L_END:
  ret;
}}
"""


def _qkv_maps(name: str) -> dict:
    ctx = _maps(name, 0, 1, 2, swizzle="128B")
    ctx["maps"][name][f"{name}_param_3"] = {"box_bytes": HALF}
    return ctx


def _qkv_pair(name: str, hazard: str, bug: str, form: str,
              also: tuple[str, ...] = ()) -> Pair:
    return Pair(name, hazard, lambda b: qkv(name, bug if b else None, form), _qkv_maps(name),
                also)


PAIRS: list[Pair] = [
    _cluster_pair("w4_cl_local", "mbar-arrive-count", "local", "rem"),
    _cluster_pair("w4_cl_local_wrap", "mbar-arrive-count", "local", "wrap"),
    _cluster_pair("w4_cl_tx", "expect-tx-mismatch", "tx", "wrap"),
    _cluster_pair("w4_cl_mask", "expect-tx-mismatch", "mask", "rem"),
    _cluster_pair("w4_cl_self", "expect-tx-mismatch", "self", "selp"),
    _cluster_pair("w4_cl_pstart", "wait-parity-first-phase", "pstart", "selp"),
    _cluster_pair("w4_cl_init", "mbar-init-unsynced", "init", "rem"),
    _cluster_pair("w4_cl_exit", "dsmem-released-early", "exit", "wrap"),
    _cluster_pair("w4_cl_exit_lanes", "dsmem-released-early", "exit", "rem", lanes="%p12"),
    _cluster_pair("w4_cl_lanes_one", "mbar-arrive-count", "one", "selp", lanes="%p12"),
    # (the release's predicate is %p6, the lane-0 flag set before the loop, written again)
    _cluster_pair("w4_cl_lanes_reused", "mbar-arrive-count", "one", "rem", lanes="%p6"),
    # (V read after waiting only on K's stage: a wait on another ring's barrier)
    _qkv_pair("w4_qkv_vwait", "wait-wrong-barrier", "vwait", "rem"),
    _qkv_pair("w4_qkv_vwait_wrap", "wait-wrong-barrier", "vwait", "wrap"),
    _qkv_pair("w4_qkv_vwait_selp", "wait-wrong-barrier", "vwait", "selp"),
    _qkv_pair("w4_qkv_vparity", "ring-parity", "vparity", "rem"),
    _qkv_pair("w4_qkv_pstart", "wait-parity-first-phase", "pstart", "wrap"),
    _qkv_pair("w4_qkv_vrelease", "smem-read-released", "vrelease", "rem"),
    _qkv_pair("w4_qkv_fence", "smem-no-proxy-fence", "fence", "wrap"),
    _qkv_pair("w4_qkv_reuse", "bulk-src-overwrite", "reuse", "rem"),
    _qkv_pair("w4_qkv_vparity_selp", "ring-parity", "vparity", "selp"),
    _qkv_pair("w4_qkv_align", "tma-smem-align", "align", "wrap"),
]
