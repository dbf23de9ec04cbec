"""The PTX front end reads the bulk-copy, tensor-copy and wgmma families back typed (issue 30),
and a built inline-asm block matches the statements its text parses into.

Four sources of PTX: builder calls drawn by the fuzz strategies and the products of every
class's qualifiers and operand kinds (cp.async.bulk, its prefetch and reduction, the bulk
groups, the tensor copies, reductions and prefetches, dense and sparse wgmma and its
fence/commit/wait), emitted and parsed back into the same objects; every statement cuda::ptx's
bulk headers emit, filled with registers and parsed typed; and the spellings compilers write
(guards, CUTLASS's predicate scale-d in a scoped block, 64 accumulator registers).
"""

from __future__ import annotations

import itertools
import re
from collections import Counter

import attrs
import pytest

from ptxdsl import Addr, Kernel, Module, PtxdslError, fuzz, t
from ptxdsl.frontend import Raw, parse_ptx
from ptxdsl.frontend.compare import first_difference, key
from ptxdsl.fuzz.oracle import build
from ptxdsl.instructions.bulk import (
    CLUSTER,
    CTA,
    GLOBAL,
    RED_TYPES,
    CpAsyncBulk,
    CpAsyncBulkCommitGroup,
    CpAsyncBulkPrefetch,
    CpAsyncBulkWaitGroup,
    CpReduceAsyncBulk,
    RedOp,
)
from ptxdsl.instructions.bulk_tensor import (
    CpAsyncBulkPrefetchTensor,
    CpAsyncBulkTensor,
    CpReduceAsyncBulkTensor,
    TensorMode,
)
from ptxdsl.instructions.wgmma import (
    KINDS,
    WgmmaCommitGroup,
    WgmmaFence,
    WgmmaMmaAsync,
    WgmmaWaitGroup,
    d_count,
)
from ptxdsl.instructions.wgmma_sp import WgmmaMmaAsyncSp
from ptxdsl.operands import NegPred
from ptxdsl.statements import Statement
from tests.cccl_forms import asm_shapes, needs_cccl
from tests.fuzz_cover import draw_until_covered

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
    want = {c.__name__ for c in FAMILY_CLASSES[family]}

    def run(cases):
        kernels = [k for i, c in enumerate(cases) if isinstance(k := build(i, c), Kernel)]
        round_trip(kernels, seen)
    draw_until_covered(fuzz.strategies[family], fuzz.BATCH,
                       max(1, fuzz.examples(600) // fuzz.BATCH), run, lambda: want <= set(seen),
                       first_seed=30)
    assert want <= set(seen), seen


# -- every form, systematically ------------------------------------------------------------------
class Operands:
    """The operands the systematic forms take, declared in one kernel."""

    def __init__(self, k: Kernel):
        self.k = k
        self.smem = k.shared_array(t.b8, 8192, align=1024, name="smem")
        self.bar = k.shared_array(t.b64, 1, align=8, name="bar")
        self.r32, self.r64, self.r16 = k.reg(t.u32), k.reg(t.u64), k.reg(t.b16)
        self.pol, self.meta, self.p = k.reg(t.b64), k.reg(t.b32), k.reg(t.pred)
        self.coords = [k.reg(t.s32) for _ in range(5)]
        self.b32 = tuple(k.reg(t.b32) for _ in range(4))
        self.acc = {ty: tuple(k.reg(ty) for _ in range(128)) for ty in (t.f32, t.s32, t.b32)}

    def shared(self):
        return (Addr(self.smem), Addr(self.smem, 64), Addr(self.r32), Addr(self.r64, 16))

    def coord_sets(self, n: int):
        return (tuple(self.coords[:n]), tuple(range(n)), (0, *self.coords[1:n]))


def _forms(make) -> list:
    """The instruction objects `make()` yields that the classes accept (the products below
    also spell combinations the ISA has no form for: those are refused and left out)."""
    out = []
    for build_one in make():
        try:
            out.append(build_one())
        except PtxdslError:
            continue
    return out


def bulk_forms(o: Operands):
    hints = (None, o.pol)
    for (dst, src), mbars in {(CLUSTER, GLOBAL): (Addr(o.bar), Addr(o.r32)),
                              (CTA, GLOBAL): (Addr(o.bar),), (CLUSTER, CTA): (Addr(o.bar),),
                              (GLOBAL, CTA): (None,)}.items():
        for size, mbar, mask, hint, bmask, sm in itertools.product(
                (16, 4096, o.r32), mbars, (None, 3, o.r16), hints, (None, 0xFF, o.r16),
                o.shared()[:2]):
            gl = Addr(o.r64, 256)
            d, s = (gl, sm) if dst is GLOBAL else (sm, gl if src is GLOBAL else Addr(o.smem))
            yield lambda d=d, s=s, dst=dst, src=src, size=size, mbar=mbar, mask=mask, \
                hint=hint, bmask=bmask: CpAsyncBulk(dst, src, d, s, size, mbar, cta_mask=mask,
                                                    cache_policy=hint, byte_mask=bmask)
    for size, hint in itertools.product((16, o.r32), hints):
        yield lambda size=size, hint=hint: CpAsyncBulkPrefetch(Addr(o.r64), size,
                                                               cache_policy=hint)
    for (space, op), types in RED_TYPES.items():
        for ty, hint in itertools.product(types, hints):
            dst = Addr(o.r64) if space is GLOBAL else Addr(o.r32)
            mbar = Addr(o.bar) if space is CLUSTER else None
            yield lambda space=space, op=op, ty=ty, dst=dst, mbar=mbar, hint=hint: \
                CpReduceAsyncBulk(space, op, ty, dst, Addr(o.smem), 256, mbar,
                                  cache_policy=hint)
    yield CpAsyncBulkCommitGroup
    for n, read in itertools.product((0, 1, 7, 63), (False, True)):
        yield lambda n=n, read=read: CpAsyncBulkWaitGroup(n, read)


def tensor_forms(o: Operands):
    hints = (None, o.pol)
    for dim, mode in itertools.product(range(1, 6), TensorMode):
        n = 5 if mode in (TensorMode.tile_gather4, TensorMode.tile_scatter4) else dim
        im2col = (o.r16,) * (dim - 2) if mode is TensorMode.im2col else (o.r16, 7)
        for coords, hint in itertools.product(o.coord_sets(n), hints):
            for dst, mask, group in itertools.product((CLUSTER, CTA), (None, o.r16, 1),
                                                      (None, 1, 2)):
                yield lambda dst=dst, mask=mask, group=group, coords=coords, hint=hint, \
                    dim=dim, mode=mode, im2col=im2col: CpAsyncBulkTensor(
                        dim, dst, GLOBAL, Addr(o.smem), o.r64, coords, Addr(o.bar), mode,
                        im2col=im2col, cta_mask=mask, cta_group=group, cache_policy=hint)
            yield lambda coords=coords, hint=hint, dim=dim, mode=mode: CpAsyncBulkTensor(
                dim, GLOBAL, CTA, Addr(o.smem, 1024), o.r64, coords, mode=mode,
                cache_policy=hint)
            for op in RedOp:
                yield lambda coords=coords, hint=hint, dim=dim, mode=mode, op=op: \
                    CpReduceAsyncBulkTensor(dim, op, o.r64, coords, Addr(o.r32), mode,
                                            cache_policy=hint)
            yield lambda coords=coords, hint=hint, dim=dim, mode=mode, im2col=im2col: \
                CpAsyncBulkPrefetchTensor(dim, o.r64, coords, mode, im2col, cache_policy=hint)


def wgmma_forms(o: Operands):
    for kind in KINDS:
        for atype, btype, dtype, n, rs, sparse, satfinite in itertools.product(
                kind.types, kind.types, kind.dtypes, (8, 16, 24, 64, 136, 256),
                (False, True), (False, True), (False, True)):
            regs = o.acc[t.b32 if dtype is t.f16 else dtype][:d_count(n, dtype)]
            a = o.b32 if rs else o.r64
            for scale_d, imms in ((1, (None,) * 4), (0, (-1, 1, 1, 0)),
                                  (o.p, (1, -1, 0, 1)), (NegPred(o.p), (-1, -1, 1, 1))):
                if not kind.scale_ab:
                    imms = (None,) * 4
                elif not kind.transpose:
                    imms = (*imms[:2], None, None)
                if rs:
                    imms = (*imms[:2], None, imms[3])
                args = (n, dtype, atype, btype, regs, a, o.pol, scale_d, *imms, satfinite)
                if sparse:
                    for sel in kind.sel:
                        yield lambda args=args, sel=sel: WgmmaMmaAsyncSp(*args, o.meta, sel)
                else:
                    yield lambda args=args: WgmmaMmaAsync(*args)
    yield WgmmaFence
    yield WgmmaCommitGroup
    for n in range(8):
        yield lambda n=n: WgmmaWaitGroup(n)


@pytest.mark.parametrize("family, make", [("bulk", bulk_forms), ("bulk_tensor", tensor_forms),
                                          ("wgmma", wgmma_forms)])
def test_every_form_reads_back_typed(family, make):
    """The products of each class's qualifiers and operand kinds that the class accepts, in
    one kernel, emitted and parsed back equal."""
    k = Kernel(f"all_{family}")
    forms = _forms(lambda: make(Operands(k)))
    for insn in forms:
        k.emit(insn)
    seen: Counter = Counter()
    round_trip([k], seen)
    assert set(seen) == {c.__name__ for c in FAMILY_CLASSES[family]}
    assert len({s.insn.opcode() for s in ours(k.body)}) >= MIN_OPCODES[family], seen


# distinct opcodes the products reach (all of the 1-D and tensor families' forms)
MIN_OPCODES = {"bulk": 82, "bulk_tensor": 342, "wgmma": 232}


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


IMPLIED = kernel_text("", [
    f"cp.async.bulk.tensor.2d.shared::cluster.global.{MB} [%r1], {TMAP}, [%r4];",
    f"cp.async.bulk.tensor.2d.global.shared::cta.bulk_group {TMAP}, [%r1];",
    f"cp.reduce.async.bulk.tensor.2d.global.shared::cta.add.bulk_group {TMAP}, [%r1];",
    f"cp.async.bulk.prefetch.tensor.2d.L2.global {TMAP};",
    "ret;"])


def test_tile_mode_left_implied_reads_typed_and_renders_as_written():
    """CUTLASS and Triton leave `.tile` implied: the same instruction (`mode_implied=True`,
    not part of equality), rendered as written."""
    got = ours(parse_ptx(IMPLIED).function("k").body)
    assert [type(s.insn).__name__ for s in got] == [
        "CpAsyncBulkTensor", "CpAsyncBulkTensor", "CpReduceAsyncBulkTensor",
        "CpAsyncBulkPrefetchTensor"]
    for s in got:
        assert s.insn.mode_implied and s.insn.mode.value == "tile"
        assert ".tile" not in s.insn.render()
        assert key(s.insn) == key(attrs.evolve(s.insn, mode_implied=False))
    with pytest.raises(PtxdslError, match="only .tile may be left implied"):
        attrs.evolve(got[0].insn, mode=got[0].insn.mode.__class__("im2col"), mode_implied=True)


RAW = kernel_text(".param .align 64 .b8 tmap[128]", [
    f"cp.async.bulk.tensor.2d.shared::cluster.global.tile.{MB} [%r1], [tmap, {{%r2, %r3}}], "
    "[%r4];",
    f"cp.async.bulk.shared::cluster.global.{MB}.L2::cache_hint.multicast::cluster "
    "[%r1], [%rd3], %r5, [%r4], %rs1, %rd2;",
    "wgmma.wait_group.sync.aligned 8;",
    "ret;"])


def test_spellings_the_classes_cannot_represent_stay_raw_and_say_why():
    """The builder's classes refuse a tensor map named by its parameter (it faults at run
    time), spell qualifiers in the canonical order, and keep wgmma.wait_group to 0..7: such
    text stays raw, with the reason."""
    got = ours(parse_ptx(RAW).function("k").body)
    assert all(type(s.insn) is Raw for s in got)
    why = [s.insn.why for s in got]
    assert "tensormap" in why[0] and "tensormap_addr" in why[0]
    assert "L2::cache_hint" in why[1] and "rendered" in why[1]
    assert "wgmma.wait_group" in why[2] and "8" in why[2]


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
