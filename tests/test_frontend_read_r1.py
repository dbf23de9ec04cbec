"""Typed readers of the data-movement, compare, control, bit, warp, barrier and packed-cvt
families (and arith's): what a builder makes, emitted and parsed back, is the same typed
instruction, never `Raw` (issue 30).

The builders' own forms come from the fuzz strategies (`ptxdsl.fuzz`: random valid and
invalid builder calls; the accepted ones are read back here), from cuda::ptx's header forms
where `tests/cccl_forms.py` expands them, and from lists below for the families the fuzzer
does not draw (control flow, membar, special registers, every packed cvt). PTX as nvcc
writes it (the forms the hazard checker needs typed: a symbol's address, special registers,
cvta) is read from text.
"""

from __future__ import annotations

import itertools
from collections import Counter

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from ptxdsl import Kernel, Module, PtxdslError, fuzz, ptx, t
from ptxdsl.frontend import parse_ptx
from ptxdsl.frontend.compare import first_difference, instructions
from ptxdsl.frontend.items import PlainReg, Raw
from ptxdsl.fuzz.oracle import build
from ptxdsl.instructions.cvt_packed import Packed
from ptxdsl.instructions.move import Cvta, Mov
from ptxdsl.operands import READABLE_SPECIAL_REGISTERS, SpecialReg, Symbol
from ptxdsl.types import StateSpace
from tests.cccl_forms import needs_cccl
from tests.test_multimem_bits import FORMS as BITS_FORMS
from tests.test_multimem_bits import build_form
from tests.tma_cases import Env


def read_back(kernels, module: Module | None = None) -> Counter:
    """Emit the kernels, parse the text, require every statement back typed and equal; the
    classes read, counted."""
    m = module or Module(kernels, check=False)
    parsed = parse_ptx(m.emit())
    seen: Counter = Counter()
    for k in kernels:
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
}


@pytest.mark.parametrize("family", sorted(FUZZED))
def test_fuzzed_builder_calls_read_back_typed(family):
    seen: Counter = Counter()

    # Deterministic draws; a failure names the kernel and the statement, so no shrinking.
    @settings(max_examples=max(1, fuzz.examples(1000) // fuzz.BATCH), deadline=None,
              derandomize=True, database=None, suppress_health_check=list(HealthCheck),
              phases=(Phase.generate,))
    @given(st.lists(fuzz.strategies[family], min_size=fuzz.BATCH, max_size=fuzz.BATCH))
    def run(cases):
        built = [k for k in (build(i, c) for i, c in enumerate(cases)) if isinstance(k, Kernel)]
        if built:
            seen.update(read_back(built))

    run()
    assert FUZZED[family] <= set(seen), f"never built: {FUZZED[family] - set(seen)}"


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
    k.cvta(k.mov(smem), "shared")            # the 32-bit form
    m.add(k)
    seen = read_back([k], m)
    # %cluster_ctarank's first read is reused; %clock64 is read anew.
    assert seen["Mov"] == len(READABLE_SPECIAL_REGISTERS) + 1 + 3 * len(syms) + 4
    assert seen["Cvta"] == len(syms) + 1 + 7 + 1


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
    for d, a, rnd, relu, sat in itertools.product(Packed, Packed, ("rn", "rz"), (False, True),
                                                  (False, True)):
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
