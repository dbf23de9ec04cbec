"""Typed readers of the data-movement, compare, control, bit, warp, barrier and packed-cvt
families (and arith's): what a builder makes, emitted and parsed back, is the same typed
instruction, never `Raw` (issue 30).

The builders' own forms come from the fuzz strategies (`ptxdsl.fuzz`: random valid and
invalid builder calls; the accepted ones are read back here), from a grid of every
qualifier combination of each class (the ones its constructor accepts are read back), from
cuda::ptx's header forms where `tests/cccl_forms.py` expands them, and from lists for what
neither draws (control flow, membar, special registers, every packed cvt). PTX as nvcc
writes it (the forms the hazard checker needs typed: a symbol's address, special registers,
cvta) is read from text.
"""

from __future__ import annotations

import itertools
import random
from collections import Counter

import pytest

from ptxdsl import Kernel, Module, PtxdslError, fuzz, ptx, t
from ptxdsl.frontend import parse_ptx
from ptxdsl.frontend.compare import first_difference, instructions
from ptxdsl.frontend.items import Braces, Bracket, PlainReg, PredPair, Raw, RawOperand
from ptxdsl.frontend.readers import READERS
from ptxdsl.fuzz.core import BINARY, CMPS
from ptxdsl.fuzz.oracle import build
from ptxdsl.instructions.arith import Binary, Mad, Unary
from ptxdsl.instructions.bits import Bfind, Bmsk, BmskMode, Prmt, PrmtMode
from ptxdsl.instructions.compare import BOOL_OPS, Selp, Setp
from ptxdsl.instructions.cvt_packed import Packed
from ptxdsl.instructions.move import Cvt, Cvta, Isspacep, Mov, Rounding, SpaceWindow
from ptxdsl.instructions.sfu import Sfu, SfuMode, SfuOp
from ptxdsl.instructions.sync import Barrier, BarrierOp, BarrierRed, BarrierRedOp, WarpSync
from ptxdsl.instructions.warp import Activemask, Elect, Shfl, ShflMode, Vote, VoteMode
from ptxdsl.operands import (
    READABLE_SPECIAL_REGISTERS,
    SINK,
    Addr,
    NegPred,
    Reg,
    SpecialReg,
    Symbol,
    Vec,
)
from ptxdsl.types import ScalarType, StateSpace
from tests.cccl_forms import needs_cccl
from tests.fuzz_cover import draw_until_covered
from tests.test_multimem_bits import FORMS as BITS_FORMS
from tests.test_multimem_bits import build_form
from tests.tma_cases import Env

# The reader modules of these families.
MODULES = {"move", "compare", "control", "bits", "warp", "sync", "cvt_packed", "arith",
           "sfu"}


def read_back(kernels, module: Module | None = None) -> Counter:
    """Emit the kernels, parse the text, require every statement back typed and equal; the
    classes read, counted. Kernels with a form ptxas takes only up to sm_89 (a 32-bit cvta,
    `types.addr32`) get a module of their own: no target holds them and an sm_90 form."""
    if module is not None:
        groups = [(kernels, module)]
    else:
        capped = [[k for k in kernels if (k.requires().ceiling is not None) == c]
                  for c in (True, False)]
        groups = [(ks, Module(ks, check=False)) for ks in capped if ks]
    seen: Counter = Counter()
    for ks, m in groups:
        parsed = parse_ptx(m.emit())
        for k in ks:
            got = parsed.function(k.name).body
            diff = first_difference(k.body, got)
            assert diff is None, f"kernel {k.name}: {diff}"
            seen.update(type(s.insn).__name__ for s in instructions(got))
    return seen


# -- the fuzzer's builder calls ----------------------------------------------------------------
# family -> the classes its accepted calls must have produced (Binary: shl/shr in cuda::ptx's
# typing; every kernel also ends with Ret).
FUZZED = {
    "move": {"Mov", "Cvt", "Cvta"},
    "compare": {"Setp", "Selp"},
    "sync": {"Barrier", "BarrierRed", "WarpSync"},
    "warp": {"Shfl", "Vote", "Activemask", "Elect"},
    "bits": {"Prmt", "Bfind", "Bmsk", "Binary"},
    "arith": {"Binary", "Unary", "Mad"},
    "sfu": {"Sfu"},
}


@pytest.mark.parametrize("family", sorted(FUZZED))
def test_fuzzed_builder_calls_read_back_typed(family):
    seen: Counter = Counter()

    # Deterministic draws (further seeded passes only while a class is missing); a failure
    # names the kernel and the statement, so no shrinking.
    def run(cases):
        built = [k for k in (build(i, c) for i, c in enumerate(cases)) if isinstance(k, Kernel)]
        if built:
            seen.update(read_back(built))

    draw_until_covered(fuzz.strategies[family], fuzz.BATCH,
                       max(1, fuzz.examples(1000) // fuzz.BATCH), run,
                       lambda: FUZZED[family] <= set(seen))
    assert FUZZED[family] <= set(seen), f"never built: {FUZZED[family] - set(seen)}"


# -- every qualifier combination each class takes --------------------------------------------
class Regs:
    """Two registers per type: an automatic one (declared by its bits, `.b32 %r1`) for
    results and a named one (declared with its own type) for sources."""

    def __init__(self, k: Kernel):
        self.k, self._d, self._s = k, {}, {}

    def d(self, ty: ScalarType) -> Reg:
        if ty not in self._d:
            self._d[ty] = self.k.reg(ty)
        return self._d[ty]

    def s(self, ty: ScalarType) -> Reg:
        if ty not in self._s:
            self._s[ty] = self.k.reg(ty, f"src_{ty.value}")
        return self._s[ty]


T = tuple(ScalarType)
WIDE = {t.u16: t.u32, t.u32: t.u64, t.s16: t.s32, t.s32: t.s64}
BOOLS = (False, True)


def _moves(k, r):
    smem = k.shared_array(t.b8, 64, align=16, name="smem")
    for ty in T:
        for a in (r.s(ty), 1, -1, 1.5, smem, k.param_tensormap("tmap") if ty is t.b64 else smem):
            yield lambda ty=ty, a=a: Mov(ty, r.d(ty), a)
    for dt, at, rnd, ftz, sat in itertools.product(T, T, (None, *Rounding), BOOLS, BOOLS):
        for a in (r.s(at), 3):
            yield lambda dt=dt, at=at, a=a, rnd=rnd, ftz=ftz, sat=sat: Cvt(dt, at, r.d(dt), a,
                                                                            rnd, ftz, sat)
    for space, to, size in itertools.product(StateSpace, BOOLS, (t.u32, t.u64)):
        yield lambda space=space, to=to, size=size: Cvta(space, to, r.d(size), r.s(size), size)
    for space, ty in itertools.product((*SpaceWindow, *StateSpace), T):
        yield lambda space=space, ty=ty: Isspacep(space, r.d(t.pred), r.s(ty))


def _compares(k, r):
    p, q = r.d(t.pred), k.reg(t.pred)
    for ty, cmp, bool_op, ftz in itertools.product(T, CMPS, (None, *BOOL_OPS), BOOLS):
        for b, c, qq in ((r.s(ty), p, None), (1, NegPred(p), q)):
            yield lambda ty=ty, cmp=cmp, bool_op=bool_op, ftz=ftz, b=b, c=c, qq=qq: Setp(
                cmp, ty, p, r.s(ty), b, bool_op, c if bool_op else None, qq, ftz)
    for ty, b in itertools.product(T, ("reg", 1, 0.5)):
        yield lambda ty=ty, b=b: Selp(ty, r.d(ty), r.s(ty), r.s(ty) if b == "reg" else b, p)


def _bits(k, r):
    for mode, c in itertools.product(PrmtMode, ("reg", 0x3210)):
        yield lambda mode=mode, c=c: Prmt(mode, r.d(t.b32), r.s(t.b32), 7,
                                          r.s(t.u32) if c == "reg" else c)
    for ty, shiftamt in itertools.product(T, BOOLS):
        yield lambda ty=ty, shiftamt=shiftamt: Bfind(ty, r.d(t.u32), r.s(ty), shiftamt)
    for mode, a, b in itertools.product(BmskMode, ("reg", 0), ("reg", 8)):
        yield lambda mode=mode, a=a, b=b: Bmsk(mode, r.d(t.b32), r.s(t.u32) if a else a,
                                               r.s(t.b32) if b == "reg" else b)


def _warps(k, r):
    masks = (-1, 0x0000FFFF, r.s(t.b32))
    for mode, b, c, m, pred in itertools.product(ShflMode, ("reg", 0, 31), ("reg", 0, 0x1F1F),
                                                 masks, BOOLS):
        yield lambda mode=mode, b=b, c=c, m=m, pred=pred: Shfl(
            mode, r.d(t.b32), r.s(t.f32), r.s(t.u32) if b == "reg" else b,
            r.s(t.b32) if c == "reg" else c, m, r.d(t.pred) if pred else None)
    for mode, neg, m in itertools.product(VoteMode, BOOLS, masks):
        a = NegPred(r.s(t.pred)) if neg else r.s(t.pred)
        yield lambda mode=mode, a=a, m=m: Vote(mode, r.d(t.b32 if mode is VoteMode.ballot
                                                          else t.pred), a, m)
    yield lambda: Activemask(r.d(t.b32))
    for d, m in itertools.product((SINK, "reg"), masks):
        yield lambda d=d, m=m: Elect(r.d(t.pred), r.d(t.u32) if d == "reg" else d, m)


def _syncs(k, r):
    for op, aligned, short, i, n in itertools.product(BarrierOp, BOOLS, BOOLS, (0, 15, "reg"),
                                                      (None, 32, 1024, "reg")):
        yield lambda op=op, aligned=aligned, short=short, i=i, n=n: Barrier(
            op, r.s(t.u32) if i == "reg" else i, r.s(t.b32) if n == "reg" else n, aligned, short)
    for op, aligned, short, n, neg in itertools.product(BarrierRedOp, BOOLS, BOOLS,
                                                        (None, 64, "reg"), BOOLS):
        c = NegPred(r.s(t.pred)) if neg else r.s(t.pred)
        yield lambda op=op, aligned=aligned, short=short, n=n, c=c: BarrierRed(
            op, r.d(t.u32 if op is BarrierRedOp.popc else t.pred), 1, c,
            r.s(t.u32) if n == "reg" else n, aligned, short)
    for m in (-1, 1, r.s(t.u32)):
        yield lambda m=m: WarpSync(m)


def _ariths(k, r):
    modes = (None, "lo", "hi", "wide", "rn", "rz", "rm", "rp", "approx", "full")
    for op, ty, mode, ftz, sat in itertools.product(BINARY, T, modes, BOOLS, BOOLS):
        dt = WIDE.get(ty, ty) if mode == "wide" else ty
        yield lambda op=op, ty=ty, mode=mode, ftz=ftz, sat=sat, dt=dt: Binary(
            op, ty, r.d(dt), r.s(ty), 2 if op in ("shl", "shr") else r.s(ty), mode, ftz, sat)
    for op, ty, ftz in itertools.product(("abs", "neg", "not"), T, BOOLS):
        yield lambda op=op, ty=ty, ftz=ftz: Unary(op, ty, r.d(ty), r.s(ty), ftz)
    for ty, mode, ftz in itertools.product(T, modes, BOOLS):
        dt = WIDE.get(ty, ty) if mode == "wide" else ty
        yield lambda ty=ty, mode=mode, ftz=ftz, dt=dt: Mad(ty, r.d(dt), r.s(ty), 3, r.s(dt),
                                                           mode, ftz)


def _sfus(k, r):
    for op, ty, mode, ftz in itertools.product(SfuOp, T, (None, *SfuMode), BOOLS):
        yield lambda op=op, ty=ty, mode=mode, ftz=ftz: Sfu(op, ty, r.d(ty), r.s(ty), mode, ftz)


# family -> (its combinations, how many of them each class accepts today: at least these
# many must be built, and every one read back typed)
GRIDS = {
    "move": (_moves, {"Mov": 47, "Cvt": 1756, "Cvta": 24, "Isspacep": 84}),
    "compare": (_compares, {"Setp": 768, "Selp": 24}),
    "bits": (_bits, {"Prmt": 14, "Bfind": 8, "Bmsk": 8}),
    "warp": (_warps, {"Shfl": 216, "Vote": 24, "Activemask": 1, "Elect": 6}),
    "sync": (_syncs, {"Barrier": 63, "BarrierRed": 54, "WarpSync": 3}),
    "arith": (_ariths, {"Binary": 274, "Unary": 28, "Mad": 37}),
    "sfu": (_sfus, {"Sfu": 50}),
}


@pytest.mark.parametrize("family", sorted(GRIDS))
def test_every_accepted_qualifier_combination_reads_back_typed(family):
    made: Counter = Counter()
    combos, want = GRIDS[family]
    # The forms capped below sm_90 (a 32-bit cvta) in a kernel of their own (see read_back).
    kernels = []
    for capped in (False, True):
        k = Kernel(f"grid_{family}{'_capped' if capped else ''}")
        r = Regs(k)
        for make in combos(k, r):
            try:
                insn = make()
                if (insn.requires.ceiling is not None) == capped:
                    made[type(k.emit(insn)).__name__] += 1
            except PtxdslError:
                continue
        kernels.append(k)
    assert read_back(kernels) == made
    assert all(made[c] >= n for c, n in want.items()), made


# -- forms the fuzzer does not draw ------------------------------------------------------------
def test_control_flow_guards_and_membar_read_back_typed():
    k = Kernel("control")
    p, n = k.reg(t.pred), k.reg(t.u32)
    top, out = k.label("top"), k.fresh_label("out")
    k.place(top)
    k.bra(out, when=p)
    k.bra(top, when=~p)
    k.bra(out, uni=True)
    with k.guard(~p):
        k.nanosleep(n)
        k.trap()
    k.nanosleep(0)
    k.nanosleep(2**32 - 1)
    for level in ("cta", "gl", "sys"):
        ptx.membar(k, level)
    k.place(out)
    ptx.exit(k)
    k.exit()
    k.ret()
    seen = read_back([k])
    assert seen == {"Bra": 3, "Nanosleep": 3, "Trap": 1, "Membar": 3, "Exit": 2, "Ret": 1}


def test_every_special_register_and_symbol_address_reads_back_typed():
    m = Module([], check=False)
    k = Kernel("moves")
    for name in READABLE_SPECIAL_REGISTERS:
        k.read_special(name)
    ptx.get_sreg_cluster_ctarank(k)
    ptx.get_sreg_clock64(k)
    smem = k.shared_array(t.b8, 256, align=16, name="smem")
    gsym = m.global_array(t.u32, 4, name="gsym")
    csym = m.const_array(t.f32, 4, name="csym")
    syms = (smem, gsym, csym, k.param_tensormap("tmap"), k.param_ptr("out"), k.param(t.u32, "n"))
    for sym in syms:
        k.mov(sym, type=t.u64)
        k.mov(sym, type=t.b64)
        k.generic_addr(sym)
    k.mov(smem)
    k.mov(smem, type=t.b32)
    g = k.cvta(k.mov(smem, type=t.u64), "shared")
    for space in ("shared", "shared::cta", "shared::cluster", "global", "local", "const",
                  "param"):
        k.cvta(g, space, to=True)
    m.add(k)
    seen = read_back([k], m)
    # %cluster_ctarank's first read is reused; %clock64 is read anew.
    assert seen["Mov"] == len(READABLE_SPECIAL_REGISTERS) + 1 + 3 * len(syms) + 3
    assert seen["Cvta"] == len(syms) + 1 + 7
    # The 32-bit form, which ptxas takes up to sm_89: not in a module with sm_90 forms.
    k32 = Kernel("cvta32")
    k32.cvta(k32.mov(k32.shared_array(t.b8, 16, name="smem")), "shared")
    assert read_back([k32]) == {"Mov": 1, "Cvta": 1}


def test_elect_forms_read_back_typed():
    k = Kernel("elect")
    ptx.elect_sync(k)
    k.elect_sync(0x0000FFFF, leader=True)
    k.elect_sync(k.activemask())
    assert read_back([k]) == {"Elect": 3, "Activemask": 1}


def test_every_packed_cvt_reads_back_typed():
    """Every pair, rounding and flag the packed cvt takes: 28 forms; the rest are refused by
    the builder and never reach the text."""
    k = Kernel("packed")
    f1, f2, h2, q = k.reg(t.f32), k.reg(t.f32), k.reg(t.b32), k.reg(t.b16)
    sources = {Packed.f32: (f1, f2), Packed.f16x2: (h2,), Packed.bf16x2: (h2,),
               Packed.e4m3x2: (q,), Packed.e5m2x2: (q,)}
    made = 0
    for d, a, rnd, relu, sat in itertools.product(Packed, Packed, ("rn", "rz"), BOOLS, BOOLS):
        try:
            k.cvt_packed(d.value, *sources[a], src_type=a.value, rnd=rnd, relu=relu,
                         satfinite=sat)
        except PtxdslError:
            continue
        made += 1
    assert made == 28
    assert read_back([k]) == {"CvtPacked": 28}


@needs_cccl
def test_cuda_ptx_bit_and_control_forms_read_back_typed():
    """prmt, bfind, bmsk, shl, shr, exit, trap: every overload of their cuda::ptx headers."""
    e = Env()
    forms = [f for f in BITS_FORMS if not f[1].startswith("multimem")]
    for form, name, q, _, _ in forms:
        build_form(e, form, name, q)
    seen = read_back([e.k], e.module())
    assert sum(seen.values()) == len(forms) == 28
    assert set(seen) == {"Prmt", "Bfind", "Bmsk", "Binary", "Exit", "Trap"}


# -- PTX as nvcc writes it ---------------------------------------------------------------------
NVCC = """
.version 8.0
.target sm_90
.address_size 64
.extern .shared .align 16 .b8 smem[];
.global .align 4 .u32 gsym[4];
.visible .entry k(.param .u64 k_param_0)
{
	.reg .pred 	%p<3>;
	.reg .pred 	P1;
	.reg .b32 	%r<10>;
	.reg .b64 	%rd<8>;
	mov.u32 	%r1, %tid.x;
	mov.u64 	%rd3, smem;
	cvta.shared.u64 	%rd4, %rd3;
	cvta.to.shared.u64 	%rd5, %rd4;
	mov.u32 	%r2, smem;
	mov.u64 	%rd6, gsym;
	mov.u32 	%r3, gsym;
	setp.ne.s32 	%p1, %r1, 0;
	elect.sync 	_|P1, -1;
	@%p1 bra 	$L__BB0_2;
	bar.sync 	0;
	mov.b64 	%rd7, {%r1, %r2};
	shfl.up.b32 	%r4, %r1, 1, 0;
	ret.uni;
$L__BB0_2:
	ret;
}
"""


def test_nvcc_text_reads_typed_where_a_class_models_it():
    body = [s.insn for s in instructions(parse_ptx(NVCC).function("k").body)]
    tid, smem64, to_generic, to_shared, smem32, g64, g32 = body[:7]
    assert isinstance(tid, Mov) and tid.a == SpecialReg("tid.x", t.u32)
    for mov, bits in ((smem64, 64), (smem32, 32)):
        assert isinstance(mov, Mov) and mov.type.bits == bits
        assert isinstance(mov.a, Symbol) and mov.a.name == "smem" and mov.a.space.is_shared
    assert isinstance(to_generic, Cvta) and not to_generic.to
    assert isinstance(to_shared, Cvta) and to_shared.to and to_shared.space is StateSpace.shared
    assert isinstance(g64, Mov) and g64.a.space is StateSpace.global_
    # A 32-bit mov of a global symbol's address is refused by Mov: raw, saying why.
    assert isinstance(g32, Raw) and "a 64-bit mov for a non-shared symbol" in g32.why
    assert [type(i).__name__ for i in body[7:11]] == ["Setp", "Elect", "Bra", "Barrier"]
    assert isinstance(body[8].p, PlainReg)
    # Forms no class models (a vector mov, the pre-sync shfl, ret.uni) stay raw; their
    # readers decline them rather than failing.
    for raw in body[11:14]:
        assert isinstance(raw, Raw) and raw.why == ""
    assert type(body[14]).__name__ == "Ret"


# nvcc's __half2 / __nv_bfloat162 math and cooperative_groups' grid barrier, as it writes them.
NVCC_LIB = """.version 8.0
.target sm_90
.address_size 64
.visible .entry k()
{
	.reg .b16 	%rs<4>;
	.reg .b32 	%r<10>;
	mul.f16x2 	%r1, %r2, %r2;
	max.f16x2 	%r3, %r1, %r2;
	abs.bf16x2 	%r4, %r3;
	min.bf16x2 	%r5, %r4, %r3;
	add.rn.bf16 	%rs1, %rs2, %rs3;
	neg.ftz.f16 	%rs1, %rs2;
	mov.u32 	%r6, %envreg2;
	mov.b32 	%r7, 0f3F800000;
	mov.b32 	%r8, 0fFF800000;
	ret;
}
"""


def test_half_math_and_environment_registers_read_typed():
    body = [s.insn for s in instructions(parse_ptx(NVCC_LIB).function("k").body)]
    assert [type(i).__name__ for i in body] == [
        "Binary", "Binary", "Unary", "Binary", "Binary", "Unary", "Mov", "Mov", "Mov", "Ret"]
    assert [i.type.value for i in body[:6]] == ["f16x2", "f16x2", "bf16x2", "bf16x2", "bf16",
                                                "f16"]
    assert body[6].a == SpecialReg("envreg2", ScalarType.b32)
    # float literals moved as bits hold those bits (1.0f, -inf), and are emitted as written
    assert [i.a.value for i in body[7:9]] == [0x3F800000, 0xFF800000]
    assert "mov.b32 \t%r7, 0f3F800000;" in parse_ptx(NVCC_LIB).emit()
    # the target each form needs: f16 add/mul/abs/neg from the base target, min/max on halves
    # and the bf16 unary forms at sm_80, bf16 add/sub/mul at sm_90
    assert [i.requires.sm for i in body[:6]] == [75, 80, 80, 80, 90, 75]


@pytest.mark.parametrize("make,why", [
    (lambda r: Binary("add", t.bf16, r(t.b16), r(t.b16), r(t.b16), "rz"), "'mode'"),
    (lambda r: Binary("add", t.bf16x2, r(t.b32), r(t.b32), r(t.b32), ftz=True), "'ftz'"),
    (lambda r: Binary("max", t.f16, r(t.b16), r(t.b16), r(t.b16), sat=True), "'sat'"),
    (lambda r: Binary("div", t.f16, r(t.b16), r(t.b16), r(t.b16)), "'type'"),
    (lambda r: Binary("add", t.f16x2, r(t.b16), r(t.b16), r(t.b16)), "'d'"),
    (lambda r: Unary("not", t.f16, r(t.b16), r(t.b16)), "'type'"),
])
def test_half_arithmetic_refuses_what_ptxas_refuses(make, why):
    k = Kernel("h")
    with pytest.raises(PtxdslError, match=why):
        make(k.reg)


# -- what the parser may hand a reader ---------------------------------------------------------
def _operand_pool(k: Kernel) -> list:
    regs = [k.reg(ty) for ty in T]
    p, q = k.reg(t.pred), k.reg(t.pred)
    sym = k.shared_array(t.b8, 64, name="pool")
    return regs + [
        NegPred(p), SpecialReg("tid.x", t.u32), SpecialReg("clock64", t.u64), sym, k.label("L"),
        SINK, 0, 1, -1, 31, 2**40, 1.5, Vec([regs[2], regs[2]]), Braces([1, SINK]),
        Bracket([sym, Vec([regs[7]])]), PredPair(p, q), PredPair(SINK, p), Addr(sym),
        Addr(regs[8], 4), RawOperand("foo")]


def test_readers_decline_or_refuse_any_operands():
    """Valid opcodes with a qualifier dropped or added and random operands (any kind the
    parser makes, one too few or too many): a reader returns None or its class refuses with
    a PtxdslError. Any other exception would leave the statement raw, hiding the bug."""
    k = Kernel("mutants")
    pool, r = _operand_pool(k), Regs(k)
    opcodes: set[tuple[tuple[str, ...], int]] = {
        (("cvt", "rn", "relu", "satfinite", "bf16x2", "f32"), 3), (("elect", "sync"), 2),
        (("bra", "uni"), 1), (("nanosleep", "u32"), 1), (("membar", "gl"), 0), (("ret",), 0)}
    for combos, _ in GRIDS.values():
        for make in itertools.islice(combos(k, r), 0, None, 7):
            try:
                insn = make()
            except PtxdslError:
                continue
            opcodes.add((tuple(insn.opcode().split(".")), len(insn.operands())))
    words = sorted({w for parts, _ in opcodes for w in parts[1:]})
    mine = {m: [fn for fn in READERS[m] if fn.__module__.rsplit(".", 1)[-1] in MODULES]
            for m in {parts[0] for parts, _ in opcodes}}
    rng = random.Random(30)
    ordered = sorted(opcodes)
    outcomes: Counter = Counter()
    for _ in range(25000):
        head, n = rng.choice(ordered)
        parts = list(head)
        if rng.random() < 0.3:
            parts.insert(rng.randrange(1, len(parts) + 1), rng.choice(words))
        elif len(parts) > 1 and rng.random() < 0.2:
            parts.pop(rng.randrange(1, len(parts)))
        ops = [rng.choice(pool) for _ in range(max(0, rng.choice((0, n - 1, n, n, n, n + 1))))]
        for read in mine[parts[0]]:
            try:
                outcomes["typed" if read(tuple(parts), ops) is not None else "declined"] += 1
            except PtxdslError:
                outcomes["refused"] += 1
    assert min(outcomes.values()) > 100, outcomes
