"""mbarrier (init, inval, arrive/arrive_drop with .noComplete/.expect_tx, expect_tx,
complete_tx, test_wait/try_wait (.parity, hint), pending_count), the wait loop and the phase
tracker: goldens at each inferred minimum, pin-below tests per form, refusal rules, and the
sync part of the seed 000 consumer."""

from __future__ import annotations

import pytest

from ptxdsl import Addr, BuildError, Kernel, Module, OperandError, VersionError, ptx, t
from ptxdsl.instructions.mbarrier import ArriveKind, ArriveOp, MbarrierArrive, MbarrierInval
from ptxdsl.instructions.mbarrier_wait import MbarrierWait, WaitOp
from ptxdsl.operands import SINK
from ptxdsl.testing import assemble_declared
from tests.tma_cases import (
    Case,
    Env,
    FormChecks,
    unchecked_module,
)

SS, CL, GEN = "shared::cta", "shared::cluster", "generic"


def C(id, fn, version, target):
    return Case(id, fn, version, target)


def _bar(e, where):
    return getattr(e, {"sym": "bar", "r32": "bar32", "r64": "bar64", "gen": "bar_generic",
                       "remote": "remote"}[where])


def _per_addr(prefix, fn, version, target, wheres=("sym", "r32", "r64", "gen"), space=None):
    """One case per way of naming the barrier; `space` is passed for the shared ones (None:
    the space cuda::ptx's overload emits), 'generic' for the generic pointer."""
    return [C(f"{prefix}-{w}", lambda e, w=w: fn(e, _bar(e, w),
                                                  GEN if w == "gen" else space), version,
              target) for w in wheres]


A, AD = ptx.mbarrier_arrive, ptx.mbarrier_arrive_drop
V70, V71 = ("7.0", "sm_80"), ("7.1", "sm_80")
GROUPS: dict[str, list[Case]] = {
    "mbarrier/sm80_v70": [
        *_per_addr("init", lambda e, b, s: ptx.mbarrier_init(e.k, b, 1, space=s), *V70,
                   ("sym", "gen")),
        C("init-reg-count", lambda e: ptx.mbarrier_init(e.k, e.bar, e.v32), *V70),
        *_per_addr("inval", lambda e, b, s: ptx.mbarrier_inval(e.k, b, space=s), *V70,
                   ("gen",)),
        *_per_addr("arrive", lambda e, b, s: A(e.k, b, space=s), *V70, ("sym", "gen")),
        *_per_addr("arrive_drop", lambda e, b, s: AD(e.k, b, space=s), *V70, ("sym", "gen")),
        C("arrive_drop-sink", lambda e: AD(e.k, e.bar, dst="_"), *V70),
        *_per_addr("noComplete", lambda e, b, s: ptx.mbarrier_arrive_no_complete(
            e.k, b, 2, space=s), *V70, ("sym", "gen")),
        C("noComplete-reg", lambda e: ptx.mbarrier_arrive_no_complete(e.k, e.bar32, e.v32),
          *V70),
        C("drop-noComplete", lambda e: ptx.mbarrier_arrive_drop_no_complete(
            e.k, e.bar_generic, 1, space=GEN), *V70),
        *_per_addr("test_wait", lambda e, b, s: ptx.mbarrier_test_wait(
            e.k, b, e.state, space=s), *V70, ("sym", "gen")),
        C("pending_count", lambda e: ptx.mbarrier_pending_count(e.k, e.state), *V70),
    ],
    "mbarrier/sm80_v71": [
        *_per_addr("arrive-sink", lambda e, b, s: A(e.k, b, space=s, dst="_"), *V71,
                   ("sym", "gen")),
        C("noComplete-sink", lambda e: ptx.mbarrier_arrive_no_complete(
            e.k, e.bar, 1, dst=SINK), *V71),
        *_per_addr("test_wait.parity", lambda e, b, s: ptx.mbarrier_test_wait_parity(
            e.k, b, 1, space=s), *V71, ("sym", "gen")),
        C("test_wait.parity-reg", lambda e: ptx.mbarrier_test_wait_parity(
            e.k, e.bar, e.v32), *V71),
    ],
    "mbarrier/sm80_v78": [
        *_per_addr("init", lambda e, b, s: ptx.mbarrier_init(e.k, b, 128, space=s), "7.8",
                   "sm_80", ("sym", "r32", "r64"), "shared"),
        C("inval", lambda e: ptx.mbarrier_inval(e.k, e.bar), "7.8", "sm_80"),
        C("inval-r32", lambda e: ptx.mbarrier_inval(e.k, e.bar32, space="shared"), "7.8",
          "sm_80"),
        C("arrive", lambda e: A(e.k, e.bar, space="shared"), "7.8", "sm_80"),
        C("arrive-sink", lambda e: A(e.k, e.bar32, space=ptx.space_shared, dst="_"), "7.8",
          "sm_80"),
        C("arrive_drop", lambda e: AD(e.k, e.bar64, space=SS), "7.8", "sm_80"),
        C("noComplete", lambda e: ptx.mbarrier_arrive_no_complete(e.k, e.bar, 3, space=SS),
          "7.8", "sm_80"),
        C("drop-noComplete", lambda e: ptx.mbarrier_arrive_drop_no_complete(
            e.k, e.bar, 3, space="space_shared"), "7.8", "sm_80"),
        C("test_wait", lambda e: ptx.mbarrier_test_wait(e.k, e.bar, e.state, space=SS), "7.8",
          "sm_80"),
        C("test_wait.parity", lambda e: ptx.mbarrier_test_wait_parity(e.k, e.bar32, 0,
                                                                      space=SS), "7.8",
          "sm_80"),
    ],
    "mbarrier/sm80_v80": [
        *_per_addr("arrive.release.cta", lambda e, b, s: A(e.k, b, sem="release", scope="cta",
                                                           space=s), "8.0", "sm_80"),
        C("arrive.release-default-scope", lambda e: A(e.k, e.bar, sem="release", dst="_"),
          "8.0", "sm_80"),
        C("drop.release.cta", lambda e: AD(e.k, e.bar, sem="release", scope="cta"), "8.0",
          "sm_80"),
        C("noComplete.release.cta", lambda e: ptx.mbarrier_arrive_no_complete(
            e.k, e.bar, 2, sem="release", scope="cta"), "8.0", "sm_80"),
        C("drop-noComplete.release.cta", lambda e: ptx.mbarrier_arrive_drop_no_complete(
            e.k, e.bar_generic, 2, sem="release", scope="cta", space=GEN), "8.0", "sm_80"),
        C("test_wait.acquire.cta", lambda e: ptx.mbarrier_test_wait(
            e.k, e.bar, e.state, sem="acquire", scope="cta"), "8.0", "sm_80"),
        C("test_wait.parity.acquire", lambda e: ptx.mbarrier_test_wait_parity(
            e.k, e.bar_generic, 0, sem="acquire", space=GEN), "8.0", "sm_80"),
    ],
    "mbarrier/sm90_v78": [
        *_per_addr("arrive-count", lambda e, b, s: A(e.k, b, 4, space=s), "7.8", "sm_90"),
        C("arrive-count-reg-shared", lambda e: A(e.k, e.bar, e.v32, space="shared"), "7.8",
          "sm_90"),
        C("drop-count", lambda e: AD(e.k, e.bar, 2, dst="_"), "7.8", "sm_90"),
        *_per_addr("try_wait", lambda e, b, s: ptx.mbarrier_try_wait(e.k, b, e.state, space=s),
                   "7.8", "sm_90"),
        C("try_wait-hint", lambda e: ptx.mbarrier_try_wait(e.k, e.bar, e.state, 1000), "7.8",
          "sm_90"),
        C("try_wait-hint-reg", lambda e: ptx.mbarrier_try_wait(e.k, e.bar, e.state, e.v32),
          "7.8", "sm_90"),
        *_per_addr("try_wait.parity", lambda e, b, s: ptx.mbarrier_try_wait_parity(
            e.k, b, 0, space=s), "7.8", "sm_90"),
        C("try_wait.parity-space-shared", lambda e: ptx.mbarrier_try_wait_parity(
            e.k, e.bar, e.v32, space="shared"), "7.8", "sm_90"),
        C("try_wait.parity-hint", lambda e: ptx.mbarrier_try_wait_parity(
            e.k, e.bar, 1, 10_000_000), "7.8", "sm_90"),
    ],
    "mbarrier/sm90_v80": [
        C("arrive.release.cluster", lambda e: A(e.k, e.bar, 2, sem="release",
                                                scope="cluster"), "8.0", "sm_90"),
        C("arrive-remote", lambda e: A(e.k, e.remote, space=CL), "8.0", "sm_90"),
        C("arrive-remote-release", lambda e: A(e.k, e.remote, 2, sem="release",
                                               scope="cluster", space=CL), "8.0", "sm_90"),
        C("arrive-own-cta-as-cluster", lambda e: A(e.k, e.bar, sem="release", scope="cta",
                                                   space=CL), "8.0", "sm_90"),
        C("drop-remote", lambda e: AD(e.k, e.remote, space=CL), "8.0", "sm_90"),
        *(C(f"expect_tx-{sc}-{w}", lambda e, sc=sc, w=w: ptx.mbarrier_arrive_expect_tx(
            e.k, "release", sc, SS if w == "sym" else GEN, _bar(e, w), 16384), "8.0",
            "sm_90") for sc in ("cta", "cluster") for w in ("sym", "gen")),
        C("expect_tx-sink-reg", lambda e: ptx.mbarrier_arrive_expect_tx(
            e.k, None, None, None, e.bar, e.v32, dst="_"), "8.0", "sm_90"),
        C("expect_tx-remote", lambda e: ptx.mbarrier_arrive_expect_tx(
            e.k, "release", "cluster", CL, e.remote, e.v32), "8.0", "sm_90"),
        C("drop-expect_tx", lambda e: ptx.mbarrier_arrive_drop_expect_tx(
            e.k, "release", "cta", SS, e.bar, 512), "8.0", "sm_90"),
        C("drop-expect_tx-remote", lambda e: ptx.mbarrier_arrive_drop_expect_tx(
            e.k, "release", "cluster", CL, e.remote, 512), "8.0", "sm_90"),
        *(C(f"{op}-{sem}-{w}", lambda e, op=op, sem=sem, w=w: getattr(ptx, f"mbarrier_{op}")(
            e.k, sem, "cluster" if sem else None, {"remote": CL, "gen": GEN}.get(w), _bar(e, w),
            e.v32 if w == "remote" else 64), "8.0", "sm_90")
          for op in ("expect_tx", "complete_tx") for sem in (None, "relaxed")
          for w in ("sym", "gen", "remote")),
        C("test_wait.acquire.cluster", lambda e: ptx.mbarrier_test_wait(
            e.k, e.bar, e.state, sem="acquire", scope="cluster"), "8.0", "sm_90"),
        C("test_wait.parity.acquire.cluster", lambda e: ptx.mbarrier_test_wait_parity(
            e.k, e.bar, 1, sem="acquire", scope="cluster"), "8.0", "sm_90"),
        C("try_wait.acquire.cta-hint", lambda e: ptx.mbarrier_try_wait(
            e.k, e.bar, e.state, 100, sem="acquire", scope="cta"), "8.0", "sm_90"),
        C("try_wait.parity.acquire.cluster", lambda e: ptx.mbarrier_try_wait_parity(
            e.k, e.bar, 0, sem="acquire", scope="cluster"), "8.0", "sm_90"),
    ],
    "mbarrier/sm90_v86": [
        *(C(f"arrive.relaxed.{sc}", lambda e, sc=sc: A(e.k, e.bar, sem="relaxed", scope=sc),
            "8.6", "sm_90") for sc in ("cta", "cluster")),
        C("arrive.relaxed-remote", lambda e: A(e.k, e.remote, 1, sem="relaxed",
                                               scope="cluster", space=CL), "8.6", "sm_90"),
        C("drop.relaxed", lambda e: AD(e.k, e.bar_generic, sem="relaxed", scope="cta",
                                      space=GEN), "8.6", "sm_90"),
        C("expect_tx.relaxed", lambda e: ptx.mbarrier_arrive_expect_tx(
            e.k, "relaxed", "cta", SS, e.bar, 256, dst="_"), "8.6", "sm_90"),
        C("drop-expect_tx.relaxed", lambda e: ptx.mbarrier_arrive_drop_expect_tx(
            e.k, "relaxed", "cluster", CL, e.remote, 256), "8.6", "sm_90"),
        C("test_wait.relaxed", lambda e: ptx.mbarrier_test_wait(
            e.k, e.bar, e.state, sem="relaxed", scope="cta"), "8.6", "sm_90"),
        C("test_wait.parity.relaxed", lambda e: ptx.mbarrier_test_wait_parity(
            e.k, e.bar, 0, sem="relaxed", scope="cluster"), "8.6", "sm_90"),
        C("try_wait.relaxed", lambda e: ptx.mbarrier_try_wait(
            e.k, e.bar, e.state, sem="relaxed", scope="cluster"), "8.6", "sm_90"),
        C("try_wait.parity.relaxed-hint", lambda e: ptx.mbarrier_try_wait_parity(
            e.k, e.bar, 1, e.v32, sem="relaxed", scope="cta"), "8.6", "sm_90"),
    ],
}


def _error_record(e):
    """An on_timeout hook: store a code into a global error word (then the helper traps)."""
    def hook(k):
        k.st(e.gptr, 0xDEAD, type=t.u32)
    return hook


WAIT_CASES = [
    C("wait-imm", lambda e: ptx.mbarrier_wait(e.k, e.bar, 0), "7.8", "sm_90"),
    C("wait-reg-hint", lambda e: ptx.mbarrier_wait(e.k, e.bar32, e.v32, suspend_time_hint=1000),
      "7.8", "sm_90"),
    C("phase", lambda e: [ph := ptx.MbarrierPhase(e.k, e.bar), ph.wait(), ph.wait()],
      "7.8", "sm_90"),
    C("phase-producer", lambda e: ptx.MbarrierPhase(e.k, e.bar, 1).try_wait(), "7.8", "sm_90"),
    C("wait-timeout-ns", lambda e: ptx.mbarrier_wait(
        e.k, e.bar, 1, timeout_ns=2_000_000_000, on_timeout=_error_record(e)), "7.8", "sm_90"),
    C("wait-timeout-cycles", lambda e: ptx.mbarrier_wait(
        e.k, e.bar, 0, timeout=ptx.WaitTimeout(cycles=1 << 32, trap=False)), "7.8", "sm_90"),
]
GROUPS["mbarrier/wait_loop"] = WAIT_CASES


class TestForms(FormChecks):
    GROUPS = GROUPS


def test_text():
    e = Env()
    st = A(e.k, e.bar)
    ptx.mbarrier_arrive_expect_tx(e.k, "release", "cta", SS, e.bar, 512, dst="_")
    ptx.mbarrier_try_wait_parity(e.k, e.bar, 0, sem="acquire", scope="cta")
    assert ptx.mbarrier_pending_count(e.k, st).type is t.u32
    assert A(e.k, e.remote, space=CL) is None
    assert [s.render() for s in e.k.statements()] == [
        "mbarrier.arrive.shared.b64 %rd1, [bar];",
        "mbarrier.arrive.expect_tx.release.cta.shared::cta.b64 _, [bar], 512;",
        "mbarrier.try_wait.parity.acquire.cta.shared::cta.b64 %p1, [bar], 0;",
        "mbarrier.pending_count.b64 %r1, %rd1;",
        "ld.param.u32 %r2, [remote_bar];",
        "mbarrier.arrive.shared::cluster.b64 _, [%r2];"]


def test_wait_loop_text():
    e = Env()
    ptx.mbarrier_wait(e.k, e.bar, 0)
    lines = [text for text, _ in e.k.render()]
    i = lines.index("$L__wait_1:")
    assert lines[i:i + 3] == ["$L__wait_1:",
                              "\tmbarrier.try_wait.parity.shared::cta.b64 %p1, [bar], 0;",
                              "\t@!%p1 bra $L__wait_1;"]


def test_phase_flips_with_xor():
    e = Env()
    ph = ptx.MbarrierPhase(e.k, e.bar)
    ph.wait()
    body = [s.render() for s in e.k.statements()]
    assert body[0] == "mov.u32 %r1, 0;"
    assert body[-1] == "xor.b32 %r1, %r1, 1;"
    assert "mbarrier.try_wait.parity.shared::cta.b64 %p1, [bar], %r1;" in body


def test_kernel_default_timeout_hook():
    """A later debug build can set `k.wait_timeout`; mbarrier_wait then bounds every loop."""
    e = Env()
    e.k.wait_timeout = ptx.WaitTimeout(ns=1000)
    ptx.mbarrier_wait(e.k, e.bar, 0)
    body = [s.render() for s in e.k.statements()]
    assert body[0] == "mov.u64 %rd1, %globaltimer;" and body[-1] == "trap;"


# -- the seed 000 consumer (CUDA Programming Guide 10.30.2), without its printf loop -----------
def consume_tensor_map() -> Module:
    k = Kernel("consume_tensor_map")
    tensor_map = k.ld_param(k.param_ptr("tensor_map"))    # CUtensorMap* (generic pointer)
    size_bytes = 128
    ptx.fence_proxy_tensormap_generic(k, "acquire", "sys", tensor_map, size_bytes)
    bar = k.shared_array(t.b64, 1, align=8, name="bar")
    smem_buf = k.shared_array(t.b8, 4 * 128, align=128, name="smem_buf")
    with k.if_(k.tid.x == 0):
        ptx.mbarrier_init(k, bar, 1)
        ptx.fence_proxy_async(k, "shared::cta")
        ptx.cp_async_bulk_tensor(k, "shared::cluster", "global", smem_buf, tensor_map, (0, 0),
                                 bar)
        ptx.mbarrier_arrive_expect_tx(k, "release", "cta", "shared::cta", bar, smem_buf.size)
    parity = 0
    ptx.mbarrier_wait(k, bar, parity)     # while (!ptx::mbarrier_try_wait_parity(&bar, parity))
    return unchecked_module([k])


def test_seed_consumer_golden(golden):
    m = consume_tensor_map()
    assert (str(m.version), str(m.target)) == ("8.3", "sm_90")
    assert assemble_declared(golden(m, "mbarrier/seed_consumer"))[:4] == b"\x7fELF"


def test_seed_consumer_init_race_is_flagged():
    """The guide's example lets threads other than 0 wait on `bar` with no __syncthreads()
    after thread 0's init; the line-by-line translation keeps that race, and the hazard
    checker reports it."""
    pytest.importorskip("ptxdsl.checker")
    m = Module(consume_tensor_map().kernels)
    with pytest.warns(UserWarning, match="mbar-init-unsynced"):
        m.emit()


# -- refusal rules ---------------------------------------------------------------------------------
@pytest.mark.parametrize("fn", ["mbarrier_test_wait", "mbarrier_try_wait"])
@pytest.mark.parametrize("parity", [False, True])
def test_refuse_wait_on_shared_cluster(fn, parity):
    e = Env()
    f = getattr(ptx, fn + ("_parity" if parity else ""))
    with pytest.raises(BuildError, match="only the local CTA's barrier.*shared::cluster"):
        f(e.k, e.remote, 0 if parity else e.state, space=CL)


def test_refuse_state_for_remote_arrive():
    e = Env()
    with pytest.raises(BuildError, match="remote .* arrive returns no state.*sink '_'"):
        A(e.k, e.remote, space=CL, dst=e.k.reg(t.b64))


def test_refuse_state_for_remote_expect_tx():
    with pytest.raises(BuildError, match="sink '_'"):
        MbarrierArrive(ArriveOp.arrive, ArriveKind.expect_tx, CL, Env().k.reg(t.b64),
                       Env().remote, 16)


def test_refuse_expect_tx_without_tx_count():
    e = Env()
    with pytest.raises(BuildError, match="needs a txCount"):
        MbarrierArrive(ArriveOp.arrive, ArriveKind.expect_tx, SS, SINK, e.bar)


@pytest.mark.parametrize("make", [
    lambda e: ptx.mbarrier_arrive_expect_tx(e.k, None, None, None, e.bar, e.v64),
    lambda e: ptx.mbarrier_expect_tx(e.k, None, None, None, e.bar, e.v64),
    lambda e: ptx.mbarrier_complete_tx(e.k, "relaxed", "cta", None, e.bar, e.v64),
], ids=["arrive.expect_tx", "expect_tx", "complete_tx"])
def test_refuse_64bit_tx_count(make):
    with pytest.raises(OperandError, match="'txCount'.*compatible with .b32"):
        make(Env())


@pytest.mark.parametrize("make, operand", [
    (lambda e, f: ptx.mbarrier_init(e.k, e.bar, f), "count"),
    (lambda e, f: ptx.mbarrier_arrive(e.k, "release", "cta", "shared", e.bar, f), "count"),
    (lambda e, f: ptx.mbarrier_arrive_expect_tx(e.k, None, None, None, e.bar, f), "txCount"),
    (lambda e, f: ptx.mbarrier_expect_tx(e.k, None, None, None, e.bar, f), "txCount"),
], ids=["init", "arrive", "arrive.expect_tx", "expect_tx"])
def test_refuse_a_float_register_as_a_count(make, operand):
    # .b32 takes an .f32 register, but ptxas answers "Arguments mismatch" in a count
    e = Env()
    with pytest.raises(OperandError, match=f"'{operand}': expected a 32-bit integer register "
                       "or an immediate count, got register %f1 of type .f32") as err:
        make(e, e.k.reg(t.f32))
    assert err.value.loc.file == __file__


def test_refuse_64bit_hint():
    e = Env()
    with pytest.raises(OperandError, match="'suspendTimeHint'.*compatible with .u32"):
        ptx.mbarrier_try_wait_parity(e.k, e.bar, 0, e.v64)


def test_refuse_64bit_count():
    e = Env()
    with pytest.raises(OperandError, match="'count'.*compatible with .b32"):
        ptx.mbarrier_init(e.k, e.bar, e.v64)


def test_relaxed_needs_ptx_86():
    e = Env(version="8.5", target="sm_90")
    A(e.k, e.bar, sem="relaxed", scope="cta")
    with pytest.raises(VersionError, match="relaxed.*needs PTX ISA 8.6.*pinned to .version 8.5"):
        e.module().emit()


def test_refuse_arrive_acquire():
    e = Env()
    with pytest.raises(BuildError, match="no .acquire semantics"):
        A(e.k, e.bar, sem="acquire", scope="cta")


def test_refuse_wait_release():
    e = Env()
    with pytest.raises(BuildError, match="a wait has no .release"):
        ptx.mbarrier_try_wait_parity(e.k, e.bar, 0, sem="release", scope="cta")


def test_refuse_expect_tx_release():
    e = Env()
    with pytest.raises(BuildError, match=r"only .relaxed is allowed .*\.release"):
        ptx.mbarrier_expect_tx(e.k, "release", "cta", SS, e.bar, 16)


@pytest.mark.parametrize("sem,scope", [("release", "cluster"), ("relaxed", "cta")])
def test_refuse_no_complete_sem(sem, scope):
    e = Env()
    with pytest.raises(BuildError, match=r"takes at most \.release\.cta"):
        ptx.mbarrier_arrive_no_complete(e.k, e.bar, 1, sem=sem, scope=scope)


def test_refuse_no_complete_remote():
    e = Env()
    with pytest.raises(BuildError, match="has no .shared::cluster form"):
        ptx.mbarrier_arrive_no_complete(e.k, e.remote, 1, space=CL)


def test_refuse_no_complete_without_count():
    with pytest.raises(BuildError, match="needs a count"):
        MbarrierArrive(ArriveOp.arrive, ArriveKind.no_complete, SS, Env().k.reg(t.b64),
                       Env().bar)


@pytest.mark.parametrize("count", [0, 1 << 20])
def test_refuse_count_out_of_range(count):
    e = Env()
    with pytest.raises(OperandError, match=r"'count'.*\[1, 1048575\]"):
        ptx.mbarrier_init(e.k, e.bar, count)


def test_refuse_tx_count_out_of_range():
    e = Env()
    with pytest.raises(OperandError, match=r"'txCount'.*\[0, 1048575\]"):
        ptx.mbarrier_arrive_expect_tx(e.k, "release", "cta", SS, e.bar, 1 << 20)


def test_refuse_init_on_cluster_space():
    e = Env()
    with pytest.raises(OperandError, match="'space'"):
        ptx.mbarrier_init(e.k, e.remote, 1, space=CL)


def test_refuse_parity_value():
    e = Env()
    with pytest.raises(OperandError, match="'phaseParity'.*0 or 1"):
        ptx.mbarrier_try_wait_parity(e.k, e.bar, 2)


def test_refuse_state_immediate():
    e = Env()
    with pytest.raises(OperandError, match="'state'.*a .b64 register"):
        ptx.mbarrier_test_wait(e.k, e.bar, 5)


def test_refuse_wait_complete_not_pred():
    e = Env()
    with pytest.raises(OperandError, match="'waitComplete'.*a .pred register"):
        MbarrierWait(WaitOp.try_wait, True, SS, e.v32, e.bar, 0)


def test_refuse_test_wait_hint():
    e = Env()
    with pytest.raises(BuildError, match="takes no suspendTimeHint"):
        MbarrierWait(WaitOp.test_wait, True, SS, e.k.reg(t.pred), e.bar, 0, 100)


def test_refuse_pending_count_width():
    e = Env()
    with pytest.raises(OperandError, match="'count'.*compatible with .b32"):
        ptx.mbarrier_pending_count(e.k, e.state, dst=e.k.reg(t.b64))


def test_refuse_generic_32bit_address():
    e = Env()
    with pytest.raises(OperandError, match="64-bit integer register holding a generic"):
        A(e.k, e.v32, space="generic")


def test_refuse_shared_symbol_as_generic():
    e = Env()
    with pytest.raises(OperandError, match="convert the address with cvta first"):
        ptx.mbarrier_init(e.k, e.bar, 1, space="generic")


def test_refuse_generic_pointer_as_shared():
    """The instruction refuses a generic pointer for a shared operand (and says how to convert
    it); the builders convert it as cuda::ptx does."""
    e = Env()
    with pytest.raises(OperandError, match="a .shared::cta address.*holds a .generic address"
                                           r".*k.cvta\(reg, 'shared::cta', to=True\)"):
        MbarrierInval(SS, e.bar_generic)
    e.k.cvta(e.bar_generic, "shared::cta", to=True)     # the suggestion is accepted
    ptx.mbarrier_inval(e.k, e.bar_generic)
    assert [s.render() for s in e.k.statements()][-2:] == [
        "cvta.to.shared.u64 %rd4, %rd2;", "mbarrier.inval.shared::cta.b64 [%rd4];"]


def test_refuse_timeout_both_clocks():
    with pytest.raises(BuildError, match="exactly one of ns=... or cycles="):
        ptx.WaitTimeout(ns=1, cycles=1)


def test_refuse_on_timeout_without_timeout():
    e = Env()
    with pytest.raises(BuildError, match="on_timeout needs timeout_ns"):
        ptx.mbarrier_wait(e.k, e.bar, 0, on_timeout=lambda k: None)


def test_refuse_phase_parity():
    with pytest.raises(OperandError, match="'parity'.*0 or 1"):
        ptx.MbarrierPhase(Env().k, Env().bar, 2)


def test_addr_offset_into_barrier_array():
    e = Env()
    bars = e.k.shared_array(t.b64, 4, align=8, name="bars")
    ptx.mbarrier_init(e.k, Addr(bars, 16), 1)
    assert list(e.k.statements())[-1].render() == "mbarrier.init.shared.b64 [bars+16], 1;"


def test_bounded_wait_returns_the_predicate():
    e = Env()
    p = ptx.mbarrier_wait(e.k, e.bar, 0, timeout=ptx.WaitTimeout(ns=100, trap=False))
    assert p.type is t.pred
    assert list(e.k.statements())[1].render() == (
        f"mbarrier.try_wait.parity.shared::cta.b64 %{p.name}, [bar], 0;")
