"""Held-out hazard kernels, wave 4 (tests/test_checker_wave4.py): raw PTX as nvcc and
hand-written CUTLASS/FA3-style kernels look, written without reading the rules' code.

- A 2-CTA cluster ring: each CTA multicasts its half of every stage into both CTAs
  (`.multicast::cluster`, ctaMask 0b11), and each consumer warp releases the stage on its own
  and on the peer's empty barrier (`mapa` + `mbarrier.arrive...shared::cluster`).
- Q, K and V rings in one `.extern .shared` buffer at computed offsets, the output staged in
  Q's stage and stored with TMA in two halves.
- Two consumer warpgroups ordered by named barriers (FA3's ping-pong) in a persistent loop.
- A tensor map encoded on the device (`tensormap.replace` in global or shared memory).

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


# -- FA3's ping-pong of two consumer warpgroups, in a persistent loop over tiles ---------------
def pingpong(name: str, bug: str | None, form: str) -> str:
    """384 threads: warpgroup 0 idles (the producer's place), warpgroups 1 and 2 own named
    barriers 1 and 2 (256 threads each phase). For each tile, warpgroup 2 pre-arrives on
    barrier 1; each k-block each group syncs on its own barrier, runs its GEMM (an `fma`
    here) and arrives on the other's; after the k-blocks warpgroup 1 syncs on barrier 1 and
    arrives on 2, warpgroup 2 syncs on 2: every phase of both barriers is consumed within the
    tile. `bug`: 'count' gives every use a count of 128 (each group's arrive completes a
    phase alone), 'final' drops warpgroup 2's sync after the k-blocks (a phase of barrier 2
    is left over into the next tile), 'both' has warpgroup 1 pre-arrive on barrier 2 too."""
    c = 128 if bug == "count" else 256
    final2 = "" if bug == "final" else f"  @%p5 bar.sync 2, {c};\n"
    both = f"  @%p4 bar.arrive 2, {c};\n" if bug == "both" else ""
    body = f"""  bar.sync %r3, {c};
  fma.rn.f32 %f1, %f1, %f2, %f3;
  bar.arrive %r4, {c};
"""
    inner = _loop(name + "_K", form, "%r20", "%r9", "%r21", "%r22", 0, body)
    return HEAD + f"""
.visible .entry {name}(.param .u32 {name}_param_0, .param .u32 {name}_param_1,
    .param .u64 {name}_param_2)
.reqntid 384
{{
{REGS}  mov.u32 %r1, %tid.x;
  shr.u32 %r3, %r1, 7;
  setp.eq.s32 %p1, %r3, 0;
  @%p1 bra $L_END;
  sub.s32 %r4, 3, %r3;
  setp.eq.s32 %p4, %r3, 1;
  setp.eq.s32 %p5, %r3, 2;
  ld.param.u32 %r8, [{name}_param_0];
  ld.param.u32 %r9, [{name}_param_1];
  mov.f32 %f1, 0f00000000;
  cvt.rn.f32.u32 %f2, %r1;
  mov.f32 %f3, 0f3F800000;
  mov.u32 %r10, %ctaid.x;
$L_TILE:
  setp.ge.u32 %p2, %r10, %r8;
  @%p2 bra $L_OUT;
  @%p5 bar.arrive 1, {c};
{both}{inner}  @%p4 bar.sync 1, {c};
  @%p4 bar.arrive 2, {c};
{final2}  mov.u32 %r11, %nctaid.x;
  add.s32 %r10, %r10, %r11;
  bra.uni $L_TILE;
$L_OUT:
{_store_result(name, 2)}$L_END:
  ret;
}}
"""


def _pp_pair(name: str, hazard: str, bug: str, form: str,
             also: tuple[str, ...] = ()) -> Pair:
    return Pair(name, hazard, lambda b: pingpong(name, bug if b else None, form), {}, also)


# -- a tensor map encoded on the device -------------------------------------------------------
def _map_to(at: str, name: str, space: str) -> str:
    """Lane 0 copies the map parameter's 128 bytes to `at` (a shared or global address)."""
    return "".join(f"  @%p1 ld.param.v2.u64 {{%rd10, %rd11}}, [{name}_param_0+{o}];\n"
                   f"  @%p1 st.{space}.v2.u64 [{at}+{o}], {{%rd10, %rd11}};\n"
                   for o in range(0, 128, 16))


def tmap_global(name: str, bug: str | None) -> str:
    """Lane 0 writes the template map into a global workspace, points it at another tensor
    (`tensormap.replace ... .global`), releases its writes to the tensor-map proxy, and the
    warp acquires the workspace map and loads a tile through it. `bug`: 'acquire' drops the
    acquire, 'late' replaces the global address again after the release."""
    acq = "" if bug == "acquire" else \
        "  fence.proxy.tensormap::generic.acquire.gpu [%rd3], 128;\n"
    late = "  @%p1 tensormap.replace.tile.global_address.global.b1024.b64 [%rd4], %rd6;\n" \
        if bug == "late" else ""
    return HEAD + f"""
.extern .shared .align 1024 .b8 smem[];
.visible .entry {name}(.param .align 64 .b8 {name}_param_0[128], .param .u64 {name}_param_1,
    .param .u64 {name}_param_2, .param .u64 {name}_param_3)
.reqntid 32
{{
{REGS}  mov.u32 %r1, %tid.x;
  mov.u32 %r2, smem;
  add.s32 %r3, %r2, 8192;
  setp.eq.s32 %p1, %r1, 0;
  @%p1 mbarrier.init.shared::cta.b64 [%r3], 1;
  fence.mbarrier_init.release.cluster;
  bar.warp.sync -1;
  ld.param.u64 %rd3, [{name}_param_1];
  cvta.to.global.u64 %rd4, %rd3;
{_map_to("%rd4", name, "global")}  ld.param.u64 %rd5, [{name}_param_2];
  ld.param.u64 %rd6, [{name}_param_3];
  @%p1 tensormap.replace.tile.global_address.global.b1024.b64 [%rd4], %rd5;
  fence.proxy.tensormap::generic.release.gpu;
{late}{acq}  mov.b32 %r5, 0;
  @%p1 mbarrier.arrive.expect_tx.shared::cta.b64 _, [%r3], 8192;
  @%p1 {LOAD}
      [%r2], [%rd3, {{%r5, %r5}}], [%r3];
{_wait(name + "_W", "%r3", "%r5", "%p2")}  shl.b32 %r6, %r1, 2;
  add.s32 %r7, %r2, %r6;
  ld.shared.f32 %f1, [%r7];
{_store_result(name, 2)}  ret;
}}
"""


def tmap_shared(name: str, bug: str | None) -> str:
    """Lane 0 copies the template map into shared memory, points it at another tensor there;
    the warp syncs, publishes it to a per-CTA global slot (`ws + 128 * ctaid`) with
    `tensormap.cp_fenceproxy`, acquires the slot and loads through it. `bug`: 'space' gives
    the acquire the `cvta.to.global` address, 'lane' publishes from lane 0 alone (the copy
    is `.sync.aligned`: the whole warp runs it), 'acquire' drops the acquire."""
    acq = {"space": "  fence.proxy.tensormap::generic.acquire.gpu [%rd4], 128;\n",
           "acquire": ""}.get(bug or "",
                              "  fence.proxy.tensormap::generic.acquire.gpu [%rd7], 128;\n")
    lane = "@%p1 " if bug == "lane" else ""
    return HEAD + f"""
.extern .shared .align 1024 .b8 smem[];
.visible .entry {name}(.param .align 64 .b8 {name}_param_0[128], .param .u64 {name}_param_1,
    .param .u64 {name}_param_2)
.reqntid 32
{{
{REGS}  mov.u32 %r1, %tid.x;
  mov.u32 %r2, smem;
  add.s32 %r3, %r2, 8192;
  add.s32 %r4, %r2, 9216;
  setp.eq.s32 %p1, %r1, 0;
  @%p1 mbarrier.init.shared::cta.b64 [%r3], 1;
  fence.mbarrier_init.release.cluster;
{_map_to("%r4", name, "shared")}  ld.param.u64 %rd5, [{name}_param_2];
  @%p1 tensormap.replace.tile.global_address.shared::cta.b1024.b64 [%r4], %rd5;
  bar.warp.sync -1;
  ld.param.u64 %rd3, [{name}_param_1];
  mov.u32 %r8, %ctaid.x;
  mul.wide.u32 %rd6, %r8, 128;
  add.s64 %rd7, %rd3, %rd6;
  cvta.to.global.u64 %rd4, %rd7;
  {lane}tensormap.cp_fenceproxy.global.shared::cta.tensormap::generic.release.gpu.sync.aligned
      [%rd4], [%r4], 128;
{acq}  mov.b32 %r5, 0;
  @%p1 mbarrier.arrive.expect_tx.shared::cta.b64 _, [%r3], 8192;
  @%p1 {LOAD}
      [%r2], [%rd7, {{%r5, %r5}}], [%r3];
{_wait(name + "_W", "%r3", "%r5", "%p2")}  shl.b32 %r6, %r1, 2;
  add.s32 %r7, %r2, %r6;
  ld.shared.f32 %f1, [%r7];
  ret;
}}
"""


def _tm_pair(name: str, hazard: str, build, bug: str) -> Pair:
    return Pair(name, hazard, lambda b: build(name, bug if b else None), {})


def ring_align(name: str, bug: bool) -> str:
    """A 2-stage ring of 128B-swizzled 16 KiB tiles after a 2 KiB header of the dynamic
    buffer (its barriers and flags), written as nvcc lowers `tiles + (i & 1) * 16384`
    (`and`, `mul.lo`, a 64-bit `cvta` of the base): every thread waits for stage `i & 1`,
    reads it, and the CTA syncs before thread 0 refills it. The buggy twin's header is 2176
    bytes, so every stage starts 128 bytes past the swizzle's 1024-byte phase."""
    header = 2176 if bug else 2048
    return HEAD + f"""
.extern .shared .align 1024 .b8 smem[];
.visible .entry {name}(.param .align 64 .b8 {name}_param_0[128], .param .u32 {name}_param_1,
    .param .u64 {name}_param_2)
.reqntid 128
{{
{REGS}  mov.u32 %r1, %tid.x;
  setp.eq.s32 %p1, %r1, 0;
  mov.u64 %rd1, smem;
  cvta.shared.u64 %rd2, %rd1;
  add.s64 %rd3, %rd2, {header};
  cvta.to.shared.u64 %rd4, %rd3;
  cvt.u32.u64 %r2, %rd4;
  mov.u32 %r3, smem;
  @%p1 mbarrier.init.shared::cta.b64 [%r3], 1;
  @%p1 mbarrier.init.shared::cta.b64 [%r3+8], 1;
  fence.mbarrier_init.release.cluster;
  bar.sync 0;
  mov.u64 %rd5, {name}_param_0;
  cvta.param.u64 %rd6, %rd5;
  ld.param.u32 %r9, [{name}_param_1];
  shl.b32 %r10, %r1, 2;
  mov.f32 %f1, 0f00000000;
  mov.b32 %r4, 0;
$L_LOOP:
  setp.ge.u32 %p2, %r4, %r9;
  @%p2 bra $L_DONE;
  and.b32 %r5, %r4, 1;
  mul.lo.s32 %r6, %r5, 16384;
  add.s32 %r7, %r2, %r6;
  shl.b32 %r8, %r5, 3;
  add.s32 %r11, %r3, %r8;
  shr.u32 %r12, %r4, 1;
  and.b32 %r13, %r12, 1;
  shl.b32 %r14, %r4, 7;
  @%p1 mbarrier.arrive.expect_tx.shared::cta.b64 _, [%r11], 16384;
  @%p1 {LOAD}
      [%r7], [%rd6, {{%r14, %r14}}], [%r11];
{_wait(name + "_W", "%r11", "%r13", "%p3")}  add.s32 %r15, %r7, %r10;
  ld.shared.f32 %f2, [%r15];
  add.f32 %f1, %f1, %f2;
  bar.sync 0;
  add.s32 %r4, %r4, 1;
  bra.uni $L_LOOP;
$L_DONE:
{_store_result(name, 2)}  ret;
}}
"""


def wgmma_swizzle(name: str, bug: bool) -> str:
    """Thread 0 loads a 64x64 bf16 A tile (8 KiB) and an 8x64 B tile (1 KiB), both through
    128B-swizzled maps, on one barrier; the warpgroup waits and runs one m64n8k16 wgmma on
    them, its K-major descriptors built as nvcc lowers CUTLASS's `make_gmma_desc`
    (`(addr >> 4) & 0x3FFF` or'ed with a constant holding LBO, SBO = 1024 bytes and the
    layout type). The buggy twin's constant says the 64B swizzle (layout type 2)."""
    desc = 0x8000004000010000 if bug else 0x4000004000010000
    return HEAD + f"""
.extern .shared .align 1024 .b8 smem[];
.visible .entry {name}(.param .align 64 .b8 {name}_param_0[128],
    .param .align 64 .b8 {name}_param_1[128], .param .u64 {name}_param_2)
.reqntid 128
{{
{REGS}  mov.u32 %r1, %tid.x;
  mov.u32 %r2, smem;
  add.s32 %r3, %r2, 9216;
  setp.eq.s32 %p1, %r1, 0;
  @%p1 mbarrier.init.shared::cta.b64 [%r3], 1;
  fence.mbarrier_init.release.cluster;
  bar.sync 0;
  mov.b32 %r4, 0;
  @!%p1 bra $L_LOADED;
  mov.u64 %rd1, {name}_param_0;
  cvta.param.u64 %rd2, %rd1;
  mov.u64 %rd3, {name}_param_1;
  cvta.param.u64 %rd4, %rd3;
  mbarrier.arrive.expect_tx.shared::cta.b64 _, [%r3], 9216;
  {LOAD}
      [%r2], [%rd2, {{%r4, %r4}}], [%r3];
  {LOAD}
      [%r2+8192], [%rd4, {{%r4, %r4}}], [%r3];
$L_LOADED:
{_wait(name + "_W", "%r3", "%r4", "%p2")}  cvt.u64.u32 %rd10, %r2;
  shr.u64 %rd11, %rd10, 4;
  and.b64 %rd12, %rd11, 16383;
  or.b64 %rd13, %rd12, {desc:#x};
  add.s64 %rd14, %rd13, 512;
  mov.f32 %f1, 0f00000000;
  mov.f32 %f2, 0f00000000;
  mov.f32 %f3, 0f00000000;
  mov.f32 %f4, 0f00000000;
  wgmma.fence.sync.aligned;
  wgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16
      {{%f1, %f2, %f3, %f4}}, %rd13, %rd14, 1, 1, 1, 0, 0;
  wgmma.commit_group.sync.aligned;
  wgmma.wait_group.sync.aligned 0;
  ld.param.u64 %rd5, [{name}_param_2];
  cvta.to.global.u64 %rd6, %rd5;
  mul.wide.u32 %rd7, %r1, 16;
  add.s64 %rd8, %rd6, %rd7;
  st.global.v4.f32 [%rd8], {{%f1, %f2, %f3, %f4}};
  ret;
}}
"""


def _swizzle_maps(name: str) -> dict:
    return {"maps": {name: {f"{name}_param_0": {"box_bytes": 8192, "swizzle": "128B"},
                            f"{name}_param_1": {"box_bytes": 1024, "swizzle": "128B"}}}}


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
    _qkv_pair("w4_qkv_vrelease", "smem-read-before-wait", "vrelease", "rem"),
    _qkv_pair("w4_qkv_fence", "smem-no-proxy-fence", "fence", "wrap"),
    _qkv_pair("w4_qkv_reuse", "bulk-src-overwrite", "reuse", "rem"),
    _qkv_pair("w4_qkv_vparity_selp", "ring-parity", "vparity", "selp"),
    _qkv_pair("w4_qkv_align", "tma-smem-align", "align", "wrap"),
    Pair("w4_ring_align", "tma-smem-align", lambda b: ring_align("w4_ring_align", b),
         _maps("w4_ring_align", 0, box=16384, swizzle="128B")),
    Pair("w4_wgmma_swizzle", "wgmma-swizzle-mismatch",
         lambda b: wgmma_swizzle("w4_wgmma_swizzle", b), _swizzle_maps("w4_wgmma_swizzle")),
    _pp_pair("w4_pp_count", "named-barrier-surplus", "count", "rem"),
    _pp_pair("w4_pp_final", "named-barrier-surplus", "final", "wrap"),
    _pp_pair("w4_pp_both", "named-barrier-surplus", "both", "rem"),
    _tm_pair("w4_tm_acquire", "tmap-no-acquire", tmap_global, "acquire"),
    _tm_pair("w4_tm_late", "tmap-replace-no-release", tmap_global, "late"),
    _tm_pair("w4_tm_space", "tmap-acquire-space", tmap_shared, "space"),
    _tm_pair("w4_tm_slot_acquire", "tmap-no-acquire", tmap_shared, "acquire"),
    _tm_pair("w4_tm_lane", "fenceproxy-divergent", tmap_shared, "lane"),
]
