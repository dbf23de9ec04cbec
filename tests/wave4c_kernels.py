"""Wave 4, continued (tests/test_checker_wave4.py): a thread reading a ring stage after its own
release of it (`smem-read-released`), written other ways than `w4_qkv_vrelease`'s
`ld.shared`: an `ldmatrix` of V's stage after V's release, a TMA store from V's stage issued
after it, the 2-CTA cluster ring released CUTLASS's way (lane r arrives on rank r's empty
barrier through `mapa`) before its reads, and ptxdsl's `MbarrierRing` whose consumer view
releases the slot before `k.ld` reads it. Each correct twin reads first and releases after,
but one: it releases the other stage before reading (a consumer a stage behind). And
`expect-tx-mismatch` of a multicast copy only rank 0 issues, under an instruction predicate
on the rank as well as behind a branch on it."""

from __future__ import annotations

from ptxdsl import Addr, Kernel, ptx, t
from ptxdsl.pipeline import MbarrierRing
from tests.wave3_kernels import Pair, _maps
from tests.wave4_kernels import HALF, LOAD, STORE, _qkv_maps, cluster_ring, qkv

_V_READ = "  ld.shared.f32 %f4, [%r47];\n"
_V_RELEASE = "  mbarrier.arrive.shared::cta.b64 _, [%r46];\n"
# An ldmatrix of V's stage: threads 0-7 give the rows, 16 bytes apart.
_LDMATRIX = """  and.b32 %r62, %r1, 7;
  shl.b32 %r62, %r62, 4;
  add.s32 %r61, %r44, %r62;
  ldmatrix.sync.aligned.m8n8.x1.shared.b16 {%r60}, [%r61];
  mov.b32 %f4, %r60;
"""


def qkv_ldmatrix(name: str, bug: bool, form: str) -> str:
    """`wave4_kernels.qkv` with V's stage read by `ldmatrix` (the bug: after V's release)."""
    text = qkv(name, None, form)
    assert text.count(_V_READ) == 1 and text.count(_V_RELEASE) == 1
    text = text.replace(_V_READ, "" if bug else _LDMATRIX)
    return text.replace(_V_RELEASE, _V_RELEASE + _LDMATRIX) if bug else text


def qkv_prev(name: str, bug: bool, form: str) -> str:
    """`wave4_kernels.qkv` releasing V's stage before reading it: the bug releases the
    stage it reads, the correct twin the other stage (the previous one of the two, whose
    reads ended last trip: a consumer a stage behind in its releases)."""
    text = qkv(name, "vrelease", form)
    if bug:
        return text
    at = "  add.s32 %r46, %r6, %r37;\n"
    assert text.count(at) == 1
    return text.replace(at, "  xor.b32 %r63, %r33, 1;\n  shl.b32 %r63, %r63, 3;\n"
                        "  add.s32 %r46, %r6, %r63;\n")


_V_STORE = f"""  @%p1 {STORE} [%rd10, {{%r64, %r64}}], [%r44];
  @%p1 cp.async.bulk.commit_group;
  @%p1 cp.async.bulk.wait_group.read 0;
"""


def qkv_vstore(name: str, bug: bool, form: str) -> str:
    """`wave4_kernels.qkv` with thread 0 also storing V's stage with TMA each trip (and
    waiting for the store's read): the bug issues the store after V's release, the twin
    between two `bar.sync 1, 128` before it."""
    text = qkv(name, None, form)
    start = "  mov.f32 %f1, 0f00000000;\n"
    assert text.count(start) == 1 and text.count(_V_RELEASE) == 1
    text = text.replace(start, start + f"  mov.u64 %rd9, {name}_param_3;\n"
                        "  cvta.param.u64 %rd10, %rd9;\n  mov.b32 %r64, 0;\n")
    sync = "  bar.sync 1, 128;\n"
    return text.replace(_V_RELEASE, _V_RELEASE + _V_STORE if bug
                        else sync + _V_STORE + sync + _V_RELEASE)


_CL_READS = f"""  ld.shared.f32 %f2, [%r41];
  ld.shared.f32 %f3, [%r41+{HALF}];
  add.f32 %f1, %f1, %f2;
  add.f32 %f1, %f1, %f3;
"""
_CL_RELEASE = "  @%p12 mbarrier.arrive.release.cluster.shared::cluster.b64 _, [%r44];\n"


_CL_COPY = f"""  {LOAD}.multicast::cluster
      [%r23], [%rd2, {{%r12, %r24}}], [%r20], %rs1;
"""
_CL_LEADER = f"""  setp.ne.u32 %p13, %r5, 0;
  @%p13 bra $L_NOCOPY_TAG;
  {LOAD}.multicast::cluster
      [%r22], [%rd2, {{%r12, %r24}}], [%r20], %rs1;
$L_NOCOPY_TAG:
"""


def cluster_mapa(name: str, bug: bool, form: str) -> str:
    """`wave4_kernels.cluster_ring` with rank 0 multicasting each whole 8 KiB stage into
    both CTAs (rank 1 announces its bytes and issues no copy), and CUTLASS's release: lane
    r of each consumer warp arrives on rank r's empty barrier (`mapa` of the stage's
    barrier by the lane number, so lane 0 of rank 1's warps releases rank 0's stage for
    the copy). The bug reads both halves of the stage after that release."""
    text = cluster_ring(name, None, form, lanes="%p12")
    assert text.count(_CL_READS) == 1 and text.count(_CL_RELEASE) == 1 \
        and text.count(_CL_COPY) == 1
    text = text.replace(_CL_COPY, _CL_LEADER.replace("TAG", name))
    if bug:
        text = text.replace(_CL_READS, "").replace(_CL_RELEASE, _CL_RELEASE + _CL_READS)
    return text


_CL_PRED = f"""  setp.eq.u32 %p13, %r5, 0;
  @%p13 {LOAD}.multicast::cluster
      [%r22], [%rd2, {{%r12, %r24}}], [%r20], %rs1;
"""
_CL_TX = "  mbarrier.arrive.expect_tx.shared::cta.b64 _, [%r20], {};\n"


def cluster_leader(name: str, bug: bool, guard: str, tx: int) -> str:
    """`cluster_mapa`'s correct twin (rank 0 multicasts each 8 KiB stage into both CTAs,
    each CTA announces 8192 bytes on its own full barrier), its copy behind the branch
    `@%p13 bra` on the rank (`guard` 'branch') or under the instruction predicate
    `@%p13` = `rank == 0` ('pred'): either way only rank 0 issues it. The bug announces
    `tx` bytes instead (half or double what each barrier receives)."""
    text = cluster_mapa(name, False, "selp")
    leader = _CL_LEADER.replace("TAG", name)
    assert text.count(leader) == 1 and text.count(_CL_TX.format(2 * HALF)) == 1
    if guard == "pred":
        text = text.replace(leader, _CL_PRED)
    return text.replace(_CL_TX.format(2 * HALF), _CL_TX.format(tx)) if bug else text


def builder_ring(bug: bool) -> Kernel:
    """A CTA-local `MbarrierRing` of 3 stages: warp 4's elected lane loads 4 KiB per stage
    with TMA; lane 0 of each consumer warp releases the stage (`c.release()`, 4 arrivals)
    after the warp's reads (`syncwarp`), or, the bug, before them."""
    k = Kernel(f"w4c_builder_{'bug' if bug else 'ok'}", reqntid=160)
    tm = k.param_tensormap("tm")
    n = k.ld_param(k.param(t.u32, "n"))
    smem = k.extern_shared("smem", align=1024)
    ring = MbarrierRing(k, 3, empty_count=4, storage=Addr(smem, 3 * HALF))
    ring.init()
    warp = k.shr(k.tid.x, 5)
    with k.if_(warp == 4), k.if_(k.elect_sync()):
        tmap = k.tensormap_addr(tm)
        p = ring.producer()
        with k.for_range(0, n) as i:
            p.wait_empty()
            p.arrive_expect_tx(HALF)
            ptx.cp_async_bulk_tensor(k, "shared::cluster", "global",
                                     p.slot(Addr(smem, 0), HALF), tmap, (0, i),
                                     p.full_barrier())
            p.advance()
    with k.if_(warp < 4):
        c = ring.consumer()
        with k.for_range(0, n):
            c.wait_full()
            if bug:
                with k.if_(k.and_(k.tid.x, 31) == 0):
                    c.release()
            k.ld(k.add(c.slot(Addr(smem, 0), HALF), k.shl(k.tid.x, 2)), type=t.f32,
                 space="shared::cta")
            if not bug:
                k.syncwarp()
                with k.if_(k.and_(k.tid.x, 31) == 0):
                    c.release()
            c.advance()
    k.ret()
    return k


BUILDER_MAPS = {"tm": {"box_bytes": HALF}}

PAIRS: list[Pair] = [
    Pair("w4c_qkv_ldmatrix", "smem-read-released",
         lambda b: qkv_ldmatrix("w4c_qkv_ldmatrix", b, "wrap"), _qkv_maps("w4c_qkv_ldmatrix")),
    Pair("w4c_qkv_ldmatrix_rem", "smem-read-released",
         lambda b: qkv_ldmatrix("w4c_qkv_ldmatrix_rem", b, "rem"),
         _qkv_maps("w4c_qkv_ldmatrix_rem")),
    Pair("w4c_qkv_vprev", "smem-read-released",
         lambda b: qkv_prev("w4c_qkv_vprev", b, "wrap"), _qkv_maps("w4c_qkv_vprev")),
    Pair("w4c_qkv_vstore", "smem-read-released",
         lambda b: qkv_vstore("w4c_qkv_vstore", b, "rem"), _qkv_maps("w4c_qkv_vstore")),
    Pair("w4c_cl_mapa", "smem-read-released",
         lambda b: cluster_mapa("w4c_cl_mapa", b, "selp"), _maps("w4c_cl_mapa", 0, box=2 * HALF)),
    *[Pair(f"w4c_cl_leader_{guard}_{tx}", "expect-tx-mismatch",
           lambda b, n=f"w4c_cl_leader_{guard}_{tx}", g=guard, x=tx: cluster_leader(n, b, g, x),
           _maps(f"w4c_cl_leader_{guard}_{tx}", 0, box=2 * HALF))
      for guard in ("pred", "branch") for tx in (HALF, 4 * HALF)],
]
