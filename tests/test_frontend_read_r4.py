"""The PTX front end reads the bulk-copy, tensor-copy and wgmma families back typed (issue 30),
and a built inline-asm block matches the statements its text parses into.

Three sources of PTX: many builder calls drawn by the fuzz strategies (every class of the
families: cp.async.bulk, its prefetch and reduction, the bulk groups, the tensor copies,
reductions and prefetches, dense and sparse wgmma and its fence/commit/wait), emitted and
parsed back into the same objects; every statement cuda::ptx's bulk headers emit, filled with
registers and parsed typed; and the spellings compilers write (guards, CUTLASS's predicate
scale-d in a scoped block, 64 accumulator registers).
"""

from __future__ import annotations

import re
from collections import Counter

import pytest
from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis import strategies as st

from ptxdsl import Kernel, Module, fuzz, t
from ptxdsl.frontend import Raw, parse_ptx
from ptxdsl.frontend.compare import first_difference, key
from ptxdsl.fuzz.oracle import build
from ptxdsl.instructions.bulk import (
    CpAsyncBulk,
    CpAsyncBulkCommitGroup,
    CpAsyncBulkPrefetch,
    CpAsyncBulkWaitGroup,
    CpReduceAsyncBulk,
)
from ptxdsl.instructions.bulk_tensor import (
    CpAsyncBulkPrefetchTensor,
    CpAsyncBulkTensor,
    CpReduceAsyncBulkTensor,
)
from ptxdsl.instructions.wgmma import (
    WgmmaCommitGroup,
    WgmmaFence,
    WgmmaMmaAsync,
    WgmmaWaitGroup,
)
from ptxdsl.instructions.wgmma_sp import WgmmaMmaAsyncSp
from ptxdsl.statements import Statement
from tests.cccl_forms import asm_shapes, needs_cccl

FAMILY_CLASSES = {
    "bulk": (CpAsyncBulk, CpAsyncBulkPrefetch, CpReduceAsyncBulk, CpAsyncBulkCommitGroup,
             CpAsyncBulkWaitGroup),
    "bulk_tensor": (CpAsyncBulkTensor, CpReduceAsyncBulkTensor, CpAsyncBulkPrefetchTensor),
    "wgmma": (WgmmaMmaAsync, WgmmaMmaAsyncSp, WgmmaFence, WgmmaCommitGroup, WgmmaWaitGroup),
}
MINE = tuple(c for cs in FAMILY_CLASSES.values() for c in cs)
# The parsed statements of these families (the builders also emit cvta, mov, ... around them,
# which other readers type).
_OURS = re.compile(r"(cp\.async\.bulk|cp\.reduce\.async\.bulk|wgmma)\b")


def ours(body) -> list:
    return [s for s in body if type(s) is Statement and _OURS.match(s.insn.opcode())]


def round_trip(kernels: list[Kernel], seen: Counter) -> None:
    """Emit the kernels, parse the PTX; each kernel's statements of these families come back
    as equal typed objects (no raw allowance). `seen` counts them by class."""
    if not kernels:
        return
    text = Module(kernels, check=False).emit()
    parsed = parse_ptx(text)
    for k in kernels:
        built = [s for s in ours(k.body) if isinstance(s.insn, MINE)]
        seen.update(type(s.insn).__name__ for s in built)
        got = ours(parsed.function(k.name).body)
        assert first_difference(built, got) is None, (
            f"{first_difference(built, got)}\n{text}")


@pytest.mark.parametrize("family", sorted(FAMILY_CLASSES))
def test_fuzzed_builder_calls_read_back_typed(family):
    """Every class of the family is reached (600 drawn calls by default, $PTXDSL_FUZZ_EXAMPLES
    to change; about half are valid and built)."""
    seen: Counter = Counter()

    @seed(30)
    @settings(max_examples=max(1, fuzz.examples(600) // fuzz.BATCH), deadline=None,
              suppress_health_check=list(HealthCheck), phases=(Phase.generate,))
    @given(st.lists(fuzz.strategies[family], min_size=fuzz.BATCH, max_size=fuzz.BATCH))
    def run(cases):
        kernels = [k for i, c in enumerate(cases) if isinstance(k := build(i, c), Kernel)]
        round_trip(kernels, seen)
    run()
    assert {c.__name__ for c in FAMILY_CLASSES[family]} <= set(seen), seen


# -- what cuda::ptx emits ------------------------------------------------------------------------
BULK_HEADERS = ("cp_async_bulk", "cp_async_bulk_multicast", "cp_async_bulk_tensor",
                "cp_async_bulk_tensor_gather_scatter", "cp_async_bulk_tensor_multicast",
                "cp_async_bulk_commit_group", "cp_async_bulk_wait_group", "cp_reduce_async_bulk",
                "cp_reduce_async_bulk_bf16", "cp_reduce_async_bulk_f16",
                "cp_reduce_async_bulk_tensor")
def _operands(parts: list[str], ops: list[str]) -> list[str]:
    """cuda::ptx's operand placeholders filled in: shared addresses in 32-bit registers,
    global ones in 64-bit registers, the map `%rd1`, coordinates and sizes 32-bit registers,
    masks 16-bit, wait_group's N an immediate."""
    tensor = "tensor" in parts
    spaces = [p for p in parts if p in ("global", "shared::cta", "shared::cluster")]
    dst, src = (spaces + ["global", "global"])[:2]
    mem = iter(([src if dst == "global" else dst] * 2) if tensor else [dst, src, dst])
    scalar = iter(["0"] if "wait_group" in parts else ["%rs1"] if tensor else ["%r1", "%rs1"])
    out = []
    for op in ops:
        if op.startswith("[%,"):
            n = op.count("%") - 1
            out.append("[%rd1, {" + ", ".join(f"%r{4 + i}" for i in range(n)) + "}]")
        elif op == "[%]":
            out.append("[%rd2]" if next(mem) == "global" else "[%r2]")
        else:
            out.append(next(scalar))
    return out


def cuda_ptx_statements() -> list[str]:
    out = []
    for shape in sorted(asm_shapes(*BULK_HEADERS)):
        opcode, _, rest = shape.rstrip(";").partition(" ")
        ops = re.findall(r"\[[^\]]*\]|[^,\s]+", rest)
        out.append(f"{opcode} {', '.join(_operands(opcode.split('.'), ops))};".replace(" ;", ";"))
    return out


@needs_cccl
def test_every_statement_cuda_ptx_emits_reads_typed():
    statements = cuda_ptx_statements()
    assert len(statements) == 135      # every asm template of the eleven headers
    body = parse_ptx(kernel_text("", statements)).function("k").body
    got = ours(body)
    assert len(got) == len(statements)
    raw = [f"{s.insn.text} ({s.insn.why})" for s in got if type(s.insn) is Raw]
    assert not raw, "\n".join(raw)
    assert all(isinstance(s.insn, MINE) for s in got)


# -- the spellings compilers write --------------------------------------------------------------
ACC = "{" + ", ".join(f"%f{i}" for i in range(1, 65)) + "}"    # m64n128 .f32: 64 registers
MB = "mbarrier::complete_tx::bytes"
TMAP = "[%rd1, {%r2, %r3}]"


def kernel_text(param: str, lines: list[str]) -> str:
    """A module of one kernel `k` declaring the registers the statements use."""
    decls = [".reg .pred %p<3>;", ".reg .b16 %rs<2>;", ".reg .b32 %r<10>;",
             ".reg .f32 %f<65>;", ".reg .b64 %rd<5>;"]
    return (".version 8.6\n.target sm_90a\n.address_size 64\n"
            f".visible .entry k({param})\n{{\n"
            + "".join(f"\t{x}\n" for x in decls + lines) + "}\n")


WRITTEN = kernel_text(".param .u64 tmap", [
    ".shared .align 1024 .b8 tile[16384];",
    f"@%p1 cp.async.bulk.tensor.2d.shared::cluster.global.tile.{MB} [%r1], {TMAP}, [%r4];",
    f"@!%p2 cp.async.bulk.tensor.3d.shared::cluster.global.tile.{MB}.multicast::cluster"
    ".L2::cache_hint [tile], [%rd1, {%r2, %r3, 0}], [%r4], %rs1, %rd2;",
    f"cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group {TMAP}, [tile+1024];",
    f"cp.reduce.async.bulk.tensor.2d.global.shared::cta.add.tile.bulk_group {TMAP}, [%r1];",
    f"cp.async.bulk.shared::cluster.global.{MB} [%r1], [%rd3], %r5, [%r4];",
    "cp.async.bulk.global.shared::cta.bulk_group.L2::cache_hint [%rd3], [%r1], 4096, %rd2;",
    "cp.reduce.async.bulk.global.shared::cta.bulk_group.add.noftz.bf16 [%rd3], [%r1], %r5;",
    "cp.async.bulk.prefetch.L2.global [%rd3], %r5;",
    "cp.async.bulk.commit_group;",
    "cp.async.bulk.wait_group.read 0;",
    "wgmma.fence.sync.aligned;",
    "{", ".reg .pred p;", "setp.ne.b32 p, %r6, 0;",
    f"wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {ACC}, %rd3, %rd4, p, 1, 1, 0, 1;",
    "}",
    f"wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 {ACC}, {{%r1, %r2, %r3, %r4}}, "
    "%rd4, 1, -1, 1, 1;",
    f"wgmma.mma_async.sp.sync.aligned.m64n128k32.f32.f16.f16 {ACC}, %rd3, %rd4, %r7, 1, %p1, "
    "1, 1, 0, 0;",
    "wgmma.mma_async.sync.aligned.m64n16k32.s32.s8.u8.satfinite "
    "{%r1, %r2, %r3, %r4, %r5, %r6, %r7, %r8}, %rd3, %rd4, 0;",
    "wgmma.commit_group.sync.aligned;",
    "wgmma.wait_group.sync.aligned 1;",
    "ret;"])


def test_compiler_spellings_read_typed():
    """nvcc / CUTLASS / Triton style: guards, a symbol base with an offset, immediate
    coordinates, CUTLASS's predicate scale-d declared in a scoped block, 64 accumulators."""
    body = parse_ptx(WRITTEN).function("k").body
    got = ours(body)
    raw = [f"{s.insn.text} ({s.insn.why})" for s in got if type(s.insn) is Raw]
    assert not raw, "\n".join(raw)
    assert [type(s.insn).__name__ for s in got] == [
        "CpAsyncBulkTensor", "CpAsyncBulkTensor", "CpAsyncBulkTensor", "CpReduceAsyncBulkTensor",
        "CpAsyncBulk", "CpAsyncBulk", "CpReduceAsyncBulk", "CpAsyncBulkPrefetch",
        "CpAsyncBulkCommitGroup", "CpAsyncBulkWaitGroup", "WgmmaFence", "WgmmaMmaAsync",
        "WgmmaMmaAsync", "WgmmaMmaAsyncSp", "WgmmaMmaAsync", "WgmmaCommitGroup",
        "WgmmaWaitGroup"]
    load, multicast = got[0], got[1]
    assert load.guard.name == "p1" and multicast.render().startswith("@!%p2 ")
    assert multicast.insn.cta_mask.name == "rs1" and multicast.insn.cache_hint
    dense, rs, sparse = got[11].insn, got[12].insn, got[13].insn
    assert (dense.n, len(dense.d), dense.scale_d.name, dense.tnspB) == (128, 64, "p", 1)
    assert rs.rs and (rs.imm_scale_a, rs.imm_scale_b, rs.tnspB) == (-1, None, 1)
    assert (sparse.sp_meta.name, sparse.sp_sel, sparse.scale_d.name) == ("r7", 1, "p1")
    assert got[14].insn.satfinite and str(got[14].insn.requires.version) == "8.4"


RAW = kernel_text(".param .align 64 .b8 tmap[128]", [
    f"cp.async.bulk.tensor.2d.shared::cluster.global.{MB} [%r1], {TMAP}, [%r4];",
    f"cp.async.bulk.tensor.2d.global.shared::cta.bulk_group {TMAP}, [%r1];",
    f"cp.reduce.async.bulk.tensor.2d.global.shared::cta.add.bulk_group {TMAP}, [%r1];",
    f"cp.async.bulk.prefetch.tensor.2d.L2.global {TMAP};",
    f"cp.async.bulk.tensor.2d.shared::cluster.global.tile.{MB} [%r1], [tmap, {{%r2, %r3}}], "
    "[%r4];",
    f"cp.async.bulk.shared::cluster.global.{MB}.L2::cache_hint.multicast::cluster "
    "[%r1], [%rd3], %r5, [%r4], %rs1, %rd2;",
    "wgmma.wait_group.sync.aligned 8;",
    "ret;"])


def test_spellings_the_classes_cannot_represent_stay_raw_and_say_why():
    """The builder's classes always spell `.tile` (CUTLASS and Triton leave it implied), refuse
    a tensor map named by its parameter (it faults at run time), spell qualifiers in the
    canonical order, and keep wgmma.wait_group to 0..7: such text stays raw, with the reason."""
    got = ours(parse_ptx(RAW).function("k").body)
    assert all(type(s.insn) is Raw for s in got)
    why = [s.insn.why for s in got]
    for w in why[:4]:
        assert re.search(r"a typed reading rendered '[^']*\.tile[. ]", w), w
    assert "tensormap" in why[4] and "tensormap_addr" in why[4]
    assert "L2::cache_hint" in why[5] and "rendered" in why[5]
    assert "wgmma.wait_group" in why[6] and "8" in why[6]


# -- inline asm: one built statement, several parsed ones ---------------------------------------
def _asm_kernel() -> Kernel:
    k = Kernel("blk")
    out = k.ld_param(k.param_ptr("out"))
    p = k.tid.x < 4
    total, = k.asm("""
    {
        .reg .pred %more;
        .reg .b32 %n;
        mov.u32 %n, $1;
    AGAIN:
        sub.u32 %n, %n, 1;
        setp.ne.u32 %more, %n, 0;
        @%more bra AGAIN;
        mov.u32 $0, %n;   // the comment is not a token
    }
    """, outs=[t.u32], ins=[k.tid.x])
    k.asm("add.u32 $0, $0, 1;", outs=[(total, t.u32)], when=p)
    k.st(out, total)
    return k


def _compare(k: Kernel, edit=lambda s: s):
    from tests.frontend_support import unread
    text = edit(Module([k], check=False).emit())
    return first_difference(k.body, parse_ptx(text).function(k.name).body, raw_ok=unread())


def test_inline_asm_matches_the_statements_its_text_parses_into():
    assert _compare(_asm_kernel()) is None


@pytest.mark.parametrize("edit, match", [
    (lambda s: s.replace("sub.u32 %n, %n, 1;", "sub.u32 %n, %n, 2;"), "built inline asm"),
    (lambda s: s.replace("\tsetp.ne.u32 %more, %n, 0;\n", ""), "built inline asm"),
    (lambda s: s.replace("@%p1 add.u32", "@!%p1 add.u32"), "built inline asm"),
    (lambda s: s.replace("\t}\n", "\t}\n\tmov.u32 %r1, 0;\n", 1), "built inline asm"),
    (lambda s: s.rstrip().rstrip("}") + "\tadd.u32 %r1, %r1, 1;\n}\n",
     r"instructions built, \d+ parsed"),
])
def test_inline_asm_text_that_differs_is_found(edit, match):
    """A changed token, a dropped line, another guard, or an extra statement inside or after
    the block: each is a difference."""
    diff = _compare(_asm_kernel(), edit)
    assert diff is not None and re.search(match, diff), diff


def test_a_default_wgmma_immediate_given_or_left_out_is_one_instruction():
    """Scale 1 and no transpose render as the defaults left out do, so they are the same
    instruction (a reading of the text cannot tell them apart)."""
    k = Kernel("k")
    d = tuple(k.reg(t.f32) for _ in range(4))
    a, b = k.reg(t.b64), k.reg(t.b64)
    given = WgmmaMmaAsync(8, t.f32, "f16", "f16", d, a, b, 1, 1, 1, 0, 0)
    assert key(given) == key(WgmmaMmaAsync(8, t.f32, "f16", "f16", d, a, b, 1))
    assert given.render().endswith(", 1, 1, 1, 0, 0;")
    flipped = WgmmaMmaAsync(8, t.f32, "f16", "f16", d, a, b, 1, -1, 1, 1, 0)
    assert (flipped.imm_scale_a, flipped.tnspA, flipped.tnspB) == (-1, 1, None)
