"""PTX read back typed (issue 30), for the instructions the hazard checker reasons about:
mbarrier (init, inval, arrive, arrive_drop, expect_tx, complete_tx, test_wait, try_wait,
pending_count), the fences (membar, fence, fence.proxy.*, fence.mbarrier_init,
sync_restrict, prefetch.tensormap), tensormap.replace / cp_fenceproxy, barrier.cluster,
mapa, getctarank, st.async, red.async, cp.async.mbarrier.arrive and setmaxnreg.

Sources of instances: the fuzz strategies of these families (random valid builder calls),
every cuda::ptx form and overload the family tests build, the asm() templates of cuda::ptx's
headers as nvcc emits them, and spellings nvcc / Triton / CUTLASS write that no builder
emits byte for byte. Each built kernel's PTX parses back into statements equal to the built
ones (`first_difference`); statements of mnemonics no reader claims yet (the ld.param, mov,
cvta and ret the builders add around these instructions) compare as text until their
readers land, and none of this file's mnemonics is among them.
"""

from __future__ import annotations

import itertools
import re
from collections import Counter

import pytest

from ptxdsl import Kernel, PtxdslError, fuzz, ptx
from ptxdsl.frontend import Raw, parse_ptx
from ptxdsl.frontend.compare import first_difference, instructions
from ptxdsl.fuzz.oracle import build as build_case
from ptxdsl.instructions import (
    cluster,
    fence,
    mbarrier,
    mbarrier_wait,
    setmaxnreg,
    st_async,
    tensormap,
)
from ptxdsl.instructions.base import Instruction
from ptxdsl.instructions.bulk import RedOp
from ptxdsl.instructions.cluster import BarrierCluster, ClusterBarrierOp, Getctarank, Mapa
from ptxdsl.instructions.fence import (
    Fence,
    FenceMbarrierInit,
    FenceProxyAlias,
    FenceProxyAsync,
    FenceProxyTensormapAcquire,
    FenceProxyTensormapRelease,
    FenceSyncRestrict,
    Membar,
    MembarLevel,
    PrefetchTensormap,
)
from ptxdsl.instructions.mbarrier import (
    ArriveKind,
    ArriveOp,
    MbarrierArrive,
    MbarrierInit,
    MbarrierInval,
    MbarrierTx,
    TxOp,
)
from ptxdsl.instructions.mbarrier_wait import MbarrierPendingCount, MbarrierWait, WaitOp
from ptxdsl.instructions.setmaxnreg import RegAction, SetMaxNReg
from ptxdsl.instructions.st_async import CpAsyncMbarrierArrive, RedAsync, StAsync
from ptxdsl.instructions.tensormap import (
    Field,
    TensormapCpFenceproxy,
    TensormapReplace,
    TensormapReplaceDim,
)
from ptxdsl.operands import SINK, Addr
from ptxdsl.types import ScalarType as T
from ptxdsl.types import Scope, Sem
from ptxdsl.types import StateSpace as S
from tests.cccl_forms import CCCL, needs_cccl
from tests.frontend_support import unread
from tests.fuzz_cover import draw_until_covered
from tests.tma_cases import Env as TmaEnv
from tests.tma_cases import unchecked_module

# Every instruction class of the families, by name.
CLASSES: dict[str, type] = {
    name: obj for mod in (mbarrier, mbarrier_wait, fence, tensormap, cluster, st_async,
                          setmaxnreg)
    for name, obj in vars(mod).items()
    if isinstance(obj, type) and issubclass(obj, Instruction) and obj is not Instruction
    and obj.__module__ == mod.__name__}
# The mnemonics these readers claim (shared ones too: barrier, st, red, cp, prefetch).
MNEMONICS = frozenset("mbarrier fence membar tensormap barrier mapa getctarank st red cp "
                      "setmaxnreg prefetch".split())


def round_trip(kernels: list[Kernel]) -> Counter[str]:
    """Emit, parse, compare each kernel; the classes read back, counted."""
    text = unchecked_module(kernels).emit()
    parsed = parse_ptx(text, file="r3.ptx")
    seen: Counter[str] = Counter()
    for k in kernels:
        body = parsed.function(k.name).body
        diff = first_difference(k.body, body, raw_ok=unread())
        assert diff is None, f"{k.name}: {diff}\n{text}"
        seen.update(type(s.insn).__name__ for s in instructions(body)
                    if type(s.insn).__name__ in CLASSES)
    return seen


def test_every_class_is_listed():
    assert set(CLASSES) == {
        "MbarrierInit", "MbarrierInval", "MbarrierArrive", "MbarrierTx", "MbarrierWait",
        "MbarrierPendingCount", "Membar", "Fence", "FenceProxyAlias", "FenceProxyAsync",
        "FenceProxyTensormapRelease", "FenceProxyTensormapAcquire", "FenceMbarrierInit",
        "FenceSyncRestrict", "PrefetchTensormap", "TensormapReplace", "TensormapReplaceDim",
        "TensormapCpFenceproxy", "BarrierCluster", "Mapa", "Getctarank", "StAsync",
        "RedAsync", "CpAsyncMbarrierArrive", "SetMaxNReg"}


# -- random builder calls (the fuzz strategies) ------------------------------------------------
FUZZ = {
    "fence": {"Membar", "Fence", "FenceProxyAlias", "FenceProxyAsync",
              "FenceProxyTensormapRelease", "FenceProxyTensormapAcquire", "FenceMbarrierInit",
              "FenceSyncRestrict", "PrefetchTensormap"},
    "tensormap": {"TensormapReplace", "TensormapReplaceDim", "TensormapCpFenceproxy"},
    "mbarrier": {"MbarrierInit", "MbarrierInval", "MbarrierArrive", "MbarrierTx",
                 "MbarrierWait", "MbarrierPendingCount"},
    "cluster": {"BarrierCluster", "Mapa", "Getctarank", "StAsync", "RedAsync"},
}
BATCHES = 25


@pytest.mark.parametrize("family", sorted(FUZZ))
def test_fuzzed_builder_calls_read_back_typed(family):
    seen: Counter[str] = Counter()

    def run(cases):
        built = [build_case(i, c) for i, c in enumerate(cases)]
        kernels = [k for k in built if isinstance(k, Kernel)]   # refusals are not PTX
        for k in kernels:        # one module each: forms of one batch need other targets
            seen.update(round_trip([k]))

    draw_until_covered(fuzz.strategies[family], fuzz.BATCH, BATCHES, run,
                       lambda: FUZZ[family] <= set(seen))
    assert FUZZ[family] <= set(seen), FUZZ[family] - set(seen)


# -- cuda::ptx: every header form and overload the family tests build ---------------------------
def _header_forms():
    from tests.test_cluster import HEADER_FORMS
    return HEADER_FORMS


@needs_cccl
def test_every_cuda_ptx_header_form_reads_back_typed():
    """barrier_cluster, getctarank, cp_async_mbarrier_arrive{,_noinc}, the fence headers,
    st_async and red_async: each form built as cuda::ptx calls it (test_cluster)."""
    from tests.test_cluster import _build_header_form
    seen: Counter[str] = Counter()
    for form, name, q, _, _ in _header_forms():
        e = TmaEnv()
        _build_header_form(e, form, name, q)
        seen.update(round_trip([e.k]))
    assert sum(seen.values()) >= len(_header_forms())
    assert {"BarrierCluster", "Getctarank", "CpAsyncMbarrierArrive", "Fence",
            "FenceMbarrierInit", "FenceProxyAlias", "FenceProxyAsync", "FenceSyncRestrict",
            "FenceProxyTensormapRelease", "FenceProxyTensormapAcquire", "StAsync",
            "RedAsync"} <= set(seen)


def _overloads():
    """test_cuda_ptx_convention's rows for these families: every overload of the mbarrier,
    tensormap and fence headers (and the seed programs' calls)."""
    from tests.test_cuda_ptx_convention import OVERLOADS, SEED_CALLS
    rows = [p.values for p in OVERLOADS if p.values[0].startswith(("mbarrier", "tensormap",
                                                                    "fence"))]
    return rows, [c for c in SEED_CALLS if not c[1].startswith("cp_")]


def test_every_cuda_ptx_overload_reads_back_typed():
    from tests.test_cuda_ptx_convention import Env, Seed
    rows, seeds = _overloads()
    seen: Counter[str] = Counter()
    for fn, _, _, values, kw in rows:
        e = Env()
        getattr(ptx, fn)(e.k, *values(e), **kw)
        seen.update(round_trip([e.k]))
    for _, _, call, _ in seeds:
        s = Seed()
        call(s)
        seen.update(round_trip([s.k]))
    assert len(rows) >= 80 and sum(seen.values()) >= len(rows) + len(seeds)
    assert {"MbarrierInit", "MbarrierArrive", "MbarrierTx", "MbarrierWait", "TensormapReplace",
            "TensormapReplaceDim", "TensormapCpFenceproxy", "Fence"} <= set(seen)


# -- what nvcc emits for cuda::ptx: the headers' asm() templates --------------------------------
HEADERS = ("barrier_cluster", "getctarank", "cp_async_mbarrier_arrive",
           "cp_async_mbarrier_arrive_noinc", "fence", "fence_mbarrier_init", "fence_proxy_alias",
           "fence_proxy_async", "fence_sync_restrict", "fence_proxy_async_generic_sync_restrict",
           "fence_proxy_tensormap_generic", "mbarrier_init", "mbarrier_arrive",
           "mbarrier_arrive_no_complete", "mbarrier_arrive_expect_tx", "mbarrier_expect_tx",
           "mbarrier_test_wait", "mbarrier_test_wait_parity", "mbarrier_try_wait",
           "mbarrier_try_wait_parity", "st_async", "red_async", "tensormap_replace",
           "tensormap_cp_fenceproxy")
_ASM = re.compile(r'asm(?:\s+volatile)?\(\s*((?:"(?:[^"\\]|\\.)*"\s*)+)(.*?)\);', re.S)
_LITERAL = re.compile(r'"((?:[^"\\]|\\.)*)"')
_CONSTRAINT = re.compile(r'"[=+]?([a-z])"\s*\(')
# cuda::ptx's cp_async_mbarrier_arrive{,_noinc} pass the barrier's 32-bit shared-window
# address to the generic form; ptxas zero-extends it (fuzz.policy "address-width"), so the
# class refuses it and the statement stays raw.
RAW_TEMPLATES = {"cp.async.mbarrier.arrive.b64": "64-bit integer register",
                 "cp.async.mbarrier.arrive.noinc.b64": "64-bit integer register"}


def nvcc_body(template: str, constraints: str) -> str:
    """An asm() template with its operands bound as nvcc binds them: `r` to a .b32 register,
    `l` to a .b64 one, `n` to its constant (the size operand 128, enum values and ords 0)."""
    found = list(_CONSTRAINT.finditer(constraints))
    bound = []
    for i, c in enumerate(found):
        arg = constraints[c.end():found[i + 1].start() if i + 1 < len(found) else None]
        bound.append({"r": f"%r{i}", "l": f"%rd{i}",
                      "n": "128" if "__size" in arg else "0"}[c.group(1)])
    return re.sub(r"%(\d+)", lambda m: bound[int(m.group(1))], template)


def header_templates() -> list[tuple[str, str]]:
    out = []
    for header in HEADERS:
        for m in _ASM.finditer((CCCL / f"{header}.h").read_text()):
            text = "".join(_LITERAL.findall(m.group(1)))
            text = text.replace("\\n", "\n").replace("\\t", "\t")
            out.append((header, nvcc_body(text, m.group(2))))
    return out


def kernel_text(body: str, decls: str = "") -> str:
    """A kernel around `body`; `decls` are module-scope declarations."""
    return (f".version 9.0\n.target sm_100a\n.address_size 64\n\n{decls}"
            ".visible .entry k()\n{\n"
            "\t.reg .pred %p<8>;\n\t.reg .b32 %r<16>;\n\t.reg .b64 %rd<16>;\n"
            f"{body}\n\tret;\n}}\n")


def mine(body) -> list:
    """The parsed statements of this file's mnemonics (selp, bra, ret and the rest left out)."""
    return [s for s in instructions(body) if (s.insn.op if type(s.insn) is Raw
                                              else s.insn.opcode()).split(".")[0] in MNEMONICS]


@needs_cccl
def test_every_cuda_ptx_asm_template_reads_back_typed():
    templates = header_templates()
    seen: Counter[str] = Counter()
    for header, body in templates:
        got = mine(parse_ptx(kernel_text(body), file=f"{header}.h").function("k").body)
        assert len(got) == 1, (header, body)
        insn = got[0].insn
        if type(insn) is Raw:
            assert re.search(RAW_TEMPLATES[insn.op], insn.why), (header, body, insn.why)
        else:
            seen[type(insn).__name__] += 1
    assert len(templates) == sum(seen.values()) + len(RAW_TEMPLATES) == 144
    assert seen["MbarrierWait"] == 30 and seen["RedAsync"] == 13 and seen["Fence"] == 16


# -- spellings nvcc, Triton and CUTLASS write ---------------------------------------------------
def spelled(id, body, want, decls=""):
    return pytest.param(body, want, decls, id=id)


BAR = ".shared .align 8 .b64 bar[2];\n"
SMEM = ".extern .shared .align 1024 .b8 smem[];\n"
SPELLINGS = [
    # CUTLASS / CuTe DSL / Triton leave st.async's optional .weak out (StAsync(weak=False)).
    spelled("st.async-no-weak", "st.async.shared::cluster.mbarrier::complete_tx::bytes.u32 "
            "[%r1], %r2, [%r3];", "StAsync"),
    spelled("nvcc-try_wait-plain-pred", "{\n\t.reg .pred P1;\n\tmbarrier.try_wait.parity."
            "shared::cta.b64 P1, [%r1], %r2;\n\tselp.b32 %r3, 1, 0, P1;\n}", "MbarrierWait"),
    spelled("cutlass-wait-loop", "{\n\t.reg .pred P1;\nLAB_WAIT:\n\tmbarrier.try_wait.parity."
            "shared::cta.b64 P1, [%r1], %r2, 0x989680;\n\t@P1 bra DONE;\n\tbra LAB_WAIT;\n"
            "DONE:\n}", "MbarrierWait"),
    spelled("triton-wait-loop", "{\n\t.reg .pred complete;\nwaitLoop:\n\tmbarrier.try_wait."
            "parity.shared::cta.b64 complete, [%r1], %r2;\n\t@!complete bra.uni waitLoop;\n}",
            "MbarrierWait"),
    spelled("nvcc-sibling-scopes", "{\n\t.reg .pred P_OUT;\n\tmbarrier.try_wait.shared::cta"
            ".b64 P_OUT, [%r1], %rd1;\n\tselp.b32 %r3, 1, 0, P_OUT;\n}\n{\n\t.reg .pred P_OUT;\n"
            "\tmbarrier.test_wait.parity.shared::cta.b64 P_OUT, [%r1], %r2;\n\tselp.b32 %r4, 1, 0,"
            " P_OUT;\n}", "MbarrierWait MbarrierWait"),
    spelled("cutlass-guarded-test_wait", "{\n\t.reg .pred P1;\n\t.reg .pred P2;\n\tsetp.eq.u32"
            " P2, %r3, 1;\n\t@P2 mbarrier.test_wait.parity.shared::cta.b64 P1, [%r1], %r2;\n}",
            "MbarrierWait"),
    spelled("try_wait-parity-generic", "mbarrier.try_wait.parity.b64 %p1, [%rd1], %r2;",
            "MbarrierWait"),
    spelled("try_wait-parity-bare-shared", "mbarrier.try_wait.parity.shared.b64 %p1, [%r1], "
            "%r2;", "MbarrierWait"),
    spelled("try_wait-state-hint", "mbarrier.try_wait.shared::cta.b64 %p1, [%r1], %rd2, %r3;",
            "MbarrierWait"),
    spelled("test_wait-acquire-cluster", "mbarrier.test_wait.parity.acquire.cluster.shared::cta"
            ".b64 %p1, [bar+8], 1;", "MbarrierWait", BAR),
    spelled("nvcc-test_wait", "mbarrier.test_wait.shared.b64 %p1, [%r1], %rd1;",
            "MbarrierWait"),
    spelled("arrive-expect_tx-sink", "mbarrier.arrive.expect_tx.shared::cta.b64 _, [%r1], "
            "16384;", "MbarrierArrive"),
    spelled("triton-guarded-arrive-expect_tx", "@%p1 mbarrier.arrive.expect_tx.shared.b64 _, "
            "[%r1], 16384;", "MbarrierArrive"),
    spelled("arrive-expect_tx-release-cluster", "mbarrier.arrive.expect_tx.release.cluster."
            "shared::cluster.b64 _, [%r1], %r2;", "MbarrierArrive"),
    spelled("cutlass-arrive-local", "mbarrier.arrive.shared::cta.b64 _, [%r1];",
            "MbarrierArrive"),
    spelled("cutlass-arrive-remote", "{\n\t.reg .b32 remAddr32;\n\tmapa.shared::cluster.u32 "
            "remAddr32, %r1, %r2;\n\tmbarrier.arrive.shared::cluster.b64 _, [remAddr32];\n}",
            "Mapa MbarrierArrive"),
    spelled("cutlass-remote-expect_tx", "{\n\t.reg .b32 remAddr32;\n\tmapa.shared::cluster.u32"
            " remAddr32, %r1, %r2;\n\t@%p1 mbarrier.arrive.expect_tx.shared::cluster.b64 _, "
            "[remAddr32], %r3;\n}", "Mapa MbarrierArrive"),
    spelled("nvcc-arrive-state", "mbarrier.arrive.shared.b64 %rd1, [%r1];", "MbarrierArrive"),
    spelled("arrive-generic", "mbarrier.arrive.b64 %rd1, [%rd2];", "MbarrierArrive"),
    spelled("arrive-count", "mbarrier.arrive.release.cta.shared::cta.b64 %rd1, [bar], 2;",
            "MbarrierArrive", BAR),
    spelled("arrive-noComplete", "mbarrier.arrive.noComplete.shared.b64 %rd1, [%r1], %r2;",
            "MbarrierArrive"),
    spelled("arrive_drop", "mbarrier.arrive_drop.shared::cta.b64 %rd1, [%r1];",
            "MbarrierArrive"),
    spelled("cutlass-expect_tx", "mbarrier.expect_tx.shared::cta.b64 [%r1], %r2;",
            "MbarrierTx"),
    spelled("complete_tx-canonical", "mbarrier.complete_tx.relaxed.cluster.shared::cluster.b64 "
            "[%r1], %r2;", "MbarrierTx"),
    spelled("init-hex-count", "mbarrier.init.shared::cta.b64 [%r1], 0x80;", "MbarrierInit"),
    spelled("init-dynamic-smem", "mbarrier.init.shared::cta.b64 [smem+64], 1;", "MbarrierInit",
            SMEM),
    spelled("inval", "mbarrier.inval.shared::cta.b64 [%r1];", "MbarrierInval"),
    spelled("pending_count", "mbarrier.pending_count.b64 %r1, %rd1;", "MbarrierPendingCount"),
    spelled("fence-proxy-async-cta", "fence.proxy.async.shared::cta;", "FenceProxyAsync"),
    spelled("fence-proxy-async", "fence.proxy.async;", "FenceProxyAsync"),
    spelled("fence-mbarrier_init", "fence.mbarrier_init.release.cluster;",
            "FenceMbarrierInit"),
    spelled("fence-acq_rel-gpu", "fence.acq_rel.gpu;", "Fence"),
    spelled("membar-gl", "membar.gl;", "Membar"),
    spelled("fence-proxy-alias", "fence.proxy.alias;", "FenceProxyAlias"),
    spelled("tensormap-fence-release", "fence.proxy.tensormap::generic.release.gpu;",
            "FenceProxyTensormapRelease"),
    spelled("tensormap-fence-acquire", "fence.proxy.tensormap::generic.acquire.gpu [%rd1], 128;",
            "FenceProxyTensormapAcquire"),
    spelled("sync_restrict", "fence.proxy.async::generic.acquire.sync_restrict::shared::cluster"
            ".cluster;", "FenceSyncRestrict"),
    spelled("prefetch-tensormap", "prefetch.tensormap [%rd1];", "PrefetchTensormap"),
    spelled("cp_fenceproxy", "tensormap.cp_fenceproxy.global.shared::cta.tensormap::generic."
            "release.gpu.sync.aligned [%rd1], [%r1], 128;", "TensormapCpFenceproxy"),
    spelled("replace-global_address", "tensormap.replace.tile.global_address.shared::cta.b1024"
            ".b64 [%r1], %rd2;", "TensormapReplace"),
    spelled("replace-global_stride", "tensormap.replace.tile.global_stride.shared::cta.b1024.b64"
            " [%r1], 1, %rd2;", "TensormapReplaceDim"),
    spelled("replace-swizzle", "tensormap.replace.tile.swizzle_mode.global.b1024.b32 [%rd1], 3;",
            "TensormapReplace"),
    spelled("cluster-arrive-relaxed", "barrier.cluster.arrive.relaxed.aligned;",
            "BarrierCluster"),
    spelled("cluster-wait", "barrier.cluster.wait.aligned;", "BarrierCluster"),
    spelled("llvm-cluster-arrive", "barrier.cluster.arrive;", "BarrierCluster"),
    spelled("getctarank", "getctarank.shared::cluster.u32 %r2, %r1;", "Getctarank"),
    spelled("mapa-generic", "mapa.u64 %rd2, %rd1, %r1;", "Mapa"),
    spelled("mapa-u64", "mapa.shared::cluster.u64 %rd2, %rd1, %r1;", "Mapa"),
    spelled("st.async-weak", "st.async.weak.shared::cluster.mbarrier::complete_tx::bytes.v2.f32"
            " [%r1], {%r4, %r5}, [%r3];", "StAsync"),
    spelled("red.async", "red.async.relaxed.cluster.shared::cluster.mbarrier::complete_tx::bytes"
            ".add.u32 [%r1], %r2, [%r3];", "RedAsync"),
    spelled("cp.async.mbarrier.arrive", "cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%r1];",
            "CpAsyncMbarrierArrive"),
    spelled("setmaxnreg", "setmaxnreg.inc.sync.aligned.u32 240;", "SetMaxNReg"),
]


@pytest.mark.parametrize("body, want, decls", SPELLINGS)
def test_compiler_spellings_read_back_typed(body, want, decls):
    got = mine(parse_ptx(kernel_text(body, decls)).function("k").body)
    assert [type(s.insn).__name__ for s in got] == want.split(), [
        getattr(s.insn, "why", "") for s in got]


# Spellings ptxas takes that the builder classes cannot represent: they stay raw, with why.
UNTYPED = [
    # CUTLASS's ClusterTransactionBarrier::complete_transaction: the space before .sem.scope
    # (the class renders the canonical order).
    spelled("cutlass-complete_tx-order", "mbarrier.complete_tx.shared::cluster.relaxed.cluster"
            ".b64 [%r1], %r2;", "rendered 'mbarrier.complete_tx.relaxed.cluster."
            "shared::cluster.b64"),
    # mapa / getctarank take .u32 or .u64 from the address operand's width, and a symbol is
    # read as .u32; ptxas also takes the symbol with .u64.
    spelled("mapa-u64-symbol", "mapa.shared::cluster.u64 %rd1, bar, 1;", "mapa.shared::cluster"
            ".u32: operand 'd'", BAR),
    spelled("getctarank-u64-symbol", "getctarank.shared::cluster.u64 %r1, bar;",
            "rendered 'getctarank.shared::cluster.u32", BAR),
    # A generic address in a 32-bit register: ptxas zero-extends it (fuzz.policy).
    spelled("cuda-ptx-cp.async.mbarrier.arrive", "cp.async.mbarrier.arrive.b64 [%r1];",
            "64-bit integer register holding a generic address"),
]


@pytest.mark.parametrize("body, why, decls", UNTYPED)
def test_spellings_the_classes_cannot_represent_stay_raw(body, why, decls):
    (got,) = mine(parse_ptx(kernel_text(body, decls)).function("k").body)
    assert type(got.insn) is Raw and why in got.insn.why, got.insn


# -- every qualifier combination each class takes -------------------------------------------------
def accepted(make, **grid) -> list[Instruction]:
    """`make(**point)` for every point of the grid; the builder's refusals left out."""
    out = []
    for values in itertools.product(*grid.values()):
        try:
            out.append(make(**dict(zip(grid, values, strict=True))))
        except PtxdslError:
            pass
    return out


def class_forms(k: Kernel) -> dict[str, list[Instruction]]:
    """Each class's instances over the qualifiers and operand kinds it distinguishes."""
    r32, r64, p = k.reg(T.b32), k.reg(T.b64), k.reg(T.pred)
    g64 = k.reg(T.u64)
    g64.space = S.generic
    bar = k.shared_array(T.b64, 1, align=8, name="bar")
    smap = k.shared_array(T.b8, 128, align=128, name="smap")
    tmap = k.param_tensormap("tmap")
    at = {S.generic: Addr(g64), S.global_: Addr(r64)}
    bar_at = lambda sp: at.get(sp, Addr(bar))            # noqa: E731 - a table lookup
    map_at = lambda sp: at.get(sp, Addr(smap))           # noqa: E731
    sems, scopes = (None, *Sem), (None, *Scope)
    fields = [f for f in Field if not f.has_ord]
    values = {f: (list(f.enum) if f.enum else [r32, r64, 0, 16, 1]) for f in Field}
    return {
        "MbarrierInit": accepted(lambda sp, n: MbarrierInit(sp, bar_at(sp), n), sp=S, n=(1, r32)),
        "MbarrierInval": accepted(lambda sp: MbarrierInval(sp, bar_at(sp)), sp=S),
        "MbarrierArrive": accepted(
            lambda op, kind, sp, d, n, sem, sc: MbarrierArrive(op, kind, sp, d, bar_at(sp), n,
                                                               sem, sc),
            op=ArriveOp, kind=ArriveKind, sp=S, d=(SINK, r64), n=(None, 1, r32), sem=sems,
            sc=scopes),
        "MbarrierTx": accepted(lambda op, sp, n, sem, sc: MbarrierTx(op, sp, bar_at(sp), n, sem,
                                                                     sc),
                               op=TxOp, sp=S, n=(0, r32), sem=sems, sc=scopes),
        "MbarrierWait": accepted(
            lambda op, par, sp, tok, hint, sem, sc: MbarrierWait(op, par, sp, p, bar_at(sp), tok,
                                                                 hint, sem, sc),
            op=WaitOp, par=(False, True), sp=S, tok=(1, r32, r64), hint=(None, 100, r32),
            sem=sems, sc=scopes),
        "MbarrierPendingCount": [MbarrierPendingCount(r32, r64)],
        "Membar": accepted(Membar, level=MembarLevel),
        "Fence": accepted(Fence, sem=Sem, scope=Scope),
        "FenceProxyAlias": [FenceProxyAlias()],
        "FenceProxyAsync": accepted(FenceProxyAsync, space=S),
        "FenceProxyTensormapRelease": accepted(FenceProxyTensormapRelease, scope=Scope),
        "FenceProxyTensormapAcquire": accepted(lambda sc: FenceProxyTensormapAcquire(
            sc, Addr(g64)), sc=Scope),
        "FenceMbarrierInit": accepted(FenceMbarrierInit, sem=Sem, scope=Scope),
        "FenceSyncRestrict": accepted(FenceSyncRestrict, sem=Sem, space=(None, *S),
                                      scope=Scope, proxy_async=(False, True)),
        "PrefetchTensormap": [PrefetchTensormap(S.generic, Addr(g64)),
                              PrefetchTensormap(S.param, Addr(tmap))],
        "TensormapReplace": [i for f in fields for i in accepted(
            lambda sp, v, f=f: TensormapReplace(f, sp, map_at(sp), v), sp=S, v=values[f])],
        "TensormapReplaceDim": [i for f in Field if f.has_ord for i in accepted(
            lambda sp, o, v, f=f: TensormapReplaceDim(f, sp, map_at(sp), o, v), sp=S,
            o=range(5), v=values[f])],
        "TensormapCpFenceproxy": accepted(lambda sc: TensormapCpFenceproxy(
            sc, Addr(r64), Addr(smap)), sc=Scope),
        "BarrierCluster": accepted(BarrierCluster, op=ClusterBarrierOp, sem=sems,
                                   aligned=(False, True)),
        "Mapa": accepted(lambda sp, a, b: Mapa(sp, r32 if a is bar or a is r32 else r64, a, b),
                         sp=S, a=(bar, r32, r64, g64), b=(1, r32)),
        "Getctarank": accepted(lambda sp, a: Getctarank(sp, r32, a), sp=S, a=(bar, r32, r64,
                                                                               g64)),
        "StAsync": accepted(lambda t, n: StAsync(t, Addr(r32), (k.reg(t),) * n if n > 1
                                                 else k.reg(t), Addr(r32)),
                            t=(T.b32, T.b64, T.u32, T.u64, T.s32, T.s64, T.f32, T.f64),
                            n=(1, 2, 4)),
        "RedAsync": accepted(lambda op, t: RedAsync(op, t, Addr(r32), k.reg(t), Addr(r32)),
                             op=RedOp, t=(T.u32, T.s32, T.u64, T.b32)),
        "CpAsyncMbarrierArrive": accepted(lambda sp, noinc: CpAsyncMbarrierArrive(
            sp, bar_at(sp), noinc), sp=S, noinc=(False, True)),
        "SetMaxNReg": accepted(SetMaxNReg, action=RegAction, count=(24, 256)),
    }


def test_every_qualifier_combination_reads_back_typed():
    k = Kernel("forms", maxnreg=255)
    forms = class_forms(k)
    assert set(forms) == set(CLASSES) and all(forms.values())
    for insns in forms.values():
        for insn in insns:
            k.emit(insn)
    assert round_trip([k]) == {name: len(insns) for name, insns in forms.items()}
    # every opcode each class spells: e.g. 60 waits = {test,try}_wait x {,.parity} x (no
    # sem, or {acquire,relaxed} x {cta,cluster}) x {generic, .shared, .shared::cta}
    assert {name: len({i.opcode() for i in insns}) for name, insns in forms.items()} == {
        "MbarrierInit": 3, "MbarrierInval": 3, "MbarrierArrive": 92, "MbarrierTx": 24,
        "MbarrierWait": 60, "MbarrierPendingCount": 1, "Membar": 3, "Fence": 16,
        "FenceProxyAlias": 1, "FenceProxyAsync": 4, "FenceProxyTensormapRelease": 4,
        "FenceProxyTensormapAcquire": 4, "FenceMbarrierInit": 1, "FenceSyncRestrict": 4,
        "PrefetchTensormap": 2, "TensormapReplace": 21, "TensormapReplaceDim": 12,
        "TensormapCpFenceproxy": 4, "BarrierCluster": 10, "Mapa": 3, "Getctarank": 3,
        "StAsync": 20, "RedAsync": 12, "CpAsyncMbarrierArrive": 6, "SetMaxNReg": 2}


# -- the forms no fuzz strategy draws ------------------------------------------------------------
def test_every_setmaxnreg_count_reads_back_typed():
    k = Kernel("k", maxnreg=255)
    for action in ("inc", "dec"):
        for count in range(24, 257, 8):
            k.emit(SetMaxNReg(action, count))
    assert round_trip([k])["SetMaxNReg"] == 60


def test_every_cp_async_mbarrier_arrive_form_reads_back_typed():
    e = TmaEnv()
    for noinc, fn in enumerate((ptx.cp_async_mbarrier_arrive,
                                ptx.cp_async_mbarrier_arrive_noinc)):
        for bar in (e.bar, e.bar32, e.bar64, e.bar_generic):
            fn(e.k, bar)
        fn(e.k, e.bar, space="shared")
        e.k.emit(CpAsyncMbarrierArrive(S.shared, Addr(e.bar), bool(noinc)))
    assert round_trip([e.k])["CpAsyncMbarrierArrive"] == 12
