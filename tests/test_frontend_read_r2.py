"""Typed readers of the memory families (issue 30): ld, st (memory.py / ld_st.py), atom and
red (atomic.py), prefetch and prefetchu, createpolicy, multimem, ldmatrix and stmatrix.

Every instance a builder makes, emitted and parsed back, must come back as the same typed
object: the fuzz strategies' random builder calls (no ptxas involved), every cuda::ptx form
of ld.h / st.h / multimem_*.h, every prefetch combination, and hand-written PTX (the
shared-memory accesses the hazard checker reads, with register, symbol and negative
offsets), also in the spellings nvcc, CUTLASS and Triton use where ptxdsl writes the same
instruction otherwise. What the classes do not model stays Raw, beside a typed twin; no
operand makes a reader raise anything but a refusal. A statement of another family that
scaffolds a kernel (`ret`) may stay Raw only while no reader claims its mnemonic
(`unread()`): for the mnemonics read here that set is empty, so every one must be typed.
"""

from __future__ import annotations

import collections
import random

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from ptxdsl import Kernel, Module, PtxdslError, t
from ptxdsl.frontend import Raw, parse_ptx
from ptxdsl.frontend.compare import first_difference, instructions
from ptxdsl.frontend.items import Braces, Bracket, PredPair, RawOperand
from ptxdsl.frontend.readers import READERS, RESPELL, respell
from ptxdsl.fuzz import bulk, core, cuda_ptx, matrix, oracle
from ptxdsl.instructions.atomic import Atom, AtomCas, Red
from ptxdsl.instructions.base import Instruction
from ptxdsl.instructions.cache_policy import (
    CreatePolicyCvt,
    CreatePolicyFractional,
    CreatePolicyRange,
)
from ptxdsl.instructions.matrix import LdMatrix, StMatrix
from ptxdsl.instructions.memory import Ld, St
from ptxdsl.instructions.multimem import Multimem
from ptxdsl.instructions.prefetch import Prefetch, PrefetchU
from ptxdsl.operands import SINK, Addr, Label, NegPred, Reg, SpecialReg, Symbol, Vec
from ptxdsl.types import ScalarType, StateSpace
from tests import test_ld_st, test_multimem_bits
from tests.cccl_forms import needs_cccl
from tests.frontend_support import unread
from tests.tma_cases import Env

MINE = frozenset(("ld", "st", "atom", "red", "prefetch", "prefetchu", "createpolicy",
                  "multimem", "ldmatrix", "stmatrix"))


def round_trip(module: Module) -> collections.Counter:
    """Emit, parse, compare every kernel; the classes read back, counted."""
    text = module.emit()
    parsed = parse_ptx(text)
    raw_ok = unread()
    assert not raw_ok & MINE
    seen: collections.Counter = collections.Counter()
    for k in module.kernels:
        body = parsed.function(k.name).body
        diff = first_difference(k.body, body, raw_ok=raw_ok)
        assert diff is None, f"kernel {k.name}: {diff}\n{text}"
        for s in instructions(body):
            if s.insn.opcode().split(".")[0] in MINE:
                assert type(s.insn) is not Raw, s.render()
                seen[type(s.insn).__name__] += 1
    return seen


# -- fuzz strategies: random builder calls, each the builder accepted ---------------------------
STRATEGIES = {"memory": core.memories(), "atomic": core.atomics(), "matrix": matrix.matrices(),
              "multimem": cuda_ptx.multimems(), "createpolicy": bulk.policies()}
# Classes each family must produce, and how many of each at least (the draws are fixed:
# derandomized), so a strategy drifting into refusals cannot leave the test vacuous.
EXPECTED = {"memory": {"Ld": 100, "St": 100}, "atomic": {"Atom": 50, "AtomCas": 10, "Red": 100},
            "matrix": {"LdMatrix": 50, "StMatrix": 50}, "multimem": {"Multimem": 100},
            "createpolicy": {"CreatePolicyFractional": 50, "CreatePolicyRange": 20,
                             "CreatePolicyCvt": 20}}
BATCH = 100
# Draws per family / BATCH: most atomic draws are refused (op/type/space mismatches).
EXAMPLES = {"atomic": 60, "memory": 40}


@pytest.mark.parametrize("family", sorted(STRATEGIES))
def test_fuzzed_builder_calls_read_back_typed(family):
    seen: collections.Counter = collections.Counter()

    @settings(max_examples=EXAMPLES.get(family, 20), deadline=None, derandomize=True, database=None,
              suppress_health_check=list(HealthCheck), phases=(Phase.generate,))
    @given(st.lists(STRATEGIES[family], min_size=BATCH, max_size=BATCH))
    def run(cases):
        kernels = [k for i, c in enumerate(cases) for k in [oracle.build(i, c)]
                   if isinstance(k, Kernel)]
        if kernels:
            seen.update(round_trip(Module(kernels, check=False)))

    run()
    for cls, least in EXPECTED[family].items():
        assert seen[cls] >= least, (family, dict(seen))


# -- cuda::ptx's forms -----------------------------------------------------------------------
class _GlobalEnv(Env):
    """The forms' environment with a .global address register that needs no cvta (its
    conversion is another family's instruction)."""

    gglobal = property(lambda s: s._get("gglobal", lambda: _pointer(s.k, StateSpace.global_)))


def _pointer(k: Kernel, space: StateSpace, name: str = "g") -> Reg:
    """A 64-bit register known to point into `space` (as `cvta` would leave it)."""
    r = k.reg(t.u64, name)
    r.space = space
    return r


@needs_cccl
def test_every_ld_st_header_form_reads_back_typed():
    e = _GlobalEnv()
    for form, name, *_ in test_ld_st.FORMS:
        test_ld_st.build_form(e, form, name)
    seen = round_trip(e.module())
    assert (seen["Ld"], seen["St"]) == (480, 60)


@needs_cccl
def test_every_multimem_header_form_reads_back_typed():
    e = _GlobalEnv()
    n = 0
    for form, name, q, *_ in test_multimem_bits.FORMS:
        if name.startswith("multimem"):
            test_multimem_bits.build_form(e, form, name, q)
            n += 1
    assert n == 18 * 9 + 2 * 9 + 18 * 8
    assert round_trip(e.module())["Multimem"] == n


# -- prefetch: every space, level, priority and address the builder takes ----------------------
def test_every_prefetch_form_reads_back_typed():
    k = Kernel("pf")
    gen = _pointer(k, StateSpace.generic, "gen")
    glob, local = _pointer(k, StateSpace.global_), _pointer(k, StateSpace.local, "loc")
    built = 0
    for space in (None, "generic", "global", "local"):
        for level in ("L1", "L2"):
            for evict in (None, "last", "normal"):
                for a in (gen, glob, Addr(glob, 64), Addr(gen, -8), local, Addr(local, 8)):
                    try:
                        k.prefetch(a, level, space=space, evict=evict)
                        built += 1
                    except PtxdslError:
                        pass
    k.prefetchu(gen)
    k.prefetchu(Addr(gen, 128))
    seen = round_trip(Module([k], check=False))
    assert seen == {"Prefetch": built, "PrefetchU": 2} and built >= 30, (built, seen)


# -- hand-written PTX: the spellings compilers use ---------------------------------------------
HEADER = """.version 8.0
.target sm_90
.address_size 64
.visible .entry k(.param .u64 p)
{
\t.reg .pred %p<2>;
\t.reg .b16 %rs<4>;
\t.reg .b32 %r<12>;
\t.reg .b64 %rd<6>;
\t.reg .f32 %f<5>;
\t.shared .align 16 .b8 smem[1024];
"""
# (statement, class, address base, offset): the address the checker reads from each.
HAND = [
    ("st.shared.u32 [%r1+16], %r2;", St, "%r1", 16),
    ("ld.shared.u32 %r3, [smem+8];", Ld, "smem", 8),
    ("ld.global.f32 %f1, [%rd1+-4];", Ld, "%rd1", -4),
    ("st.shared.v2.u32 [%r1+-8], {%r2, 0};", St, "%r1", -8),
    ("ld.shared.v4.f32 {%f1, %f2, %f3, %f4}, [smem+32];", Ld, "smem", 32),
    ("ld.volatile.shared.u32 %r2, [%r1+-4];", Ld, "%r1", -4),
    ("st.release.cta.shared::cta.b32 [%r1], %r2;", St, "%r1", 0),
    ("ld.acquire.cluster.shared::cluster.u32 %r2, [%r4+4];", Ld, "%r4", 4),
    ("ld.global.nc.L1::no_allocate.L2::128B.v2.u64 {%rd2, %rd3}, [%rd1+64];", Ld, "%rd1", 64),
    ("st.global.L1::evict_last.L2::cache_hint.b32 [%rd1], %r2, %rd5;", St, "%rd1", 0),
    ("atom.shared.add.u32 %r4, [%r1+4], 1;", Atom, "%r1", 4),
    ("atom.shared.cas.b32 %r5, [%r1+-8], %r2, %r3;", AtomCas, "%r1", -8),
    ("atom.acq_rel.gpu.global.cas.b64 %rd3, [%rd1], %rd2, 5;", AtomCas, "%rd1", 0),
    ("atom.relaxed.cluster.shared::cluster.exch.b32 %r2, [%r4+-12], %r3;", Atom, "%r4", -12),
    ("atom.global.add.noftz.bf16 %rs1, [%rd1+2], %rs2;", Atom, "%rd1", 2),
    ("red.shared.add.u32 [smem+12], %r2;", Red, "smem", 12),
    ("red.release.gpu.global.add.f32 [%rd1+-16], %f1;", Red, "%rd1", -16),
    ("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%r6, %r7, %r8, %r9}, [%r1+32];", LdMatrix,
     "%r1", 32),
    ("ldmatrix.sync.aligned.m8n8.x1.trans.shared::cta.b16 {%r6}, [%r1+-16];", LdMatrix,
     "%r1", -16),
    ("stmatrix.sync.aligned.m8n8.x2.trans.shared.b16 [smem+64], {%r6, %r7};", StMatrix,
     "smem", 64),
    ("stmatrix.sync.aligned.m8n8.x4.shared::cta.b16 [%r1+-32], {%r6, %r7, %r8, %r9};",
     StMatrix, "%r1", -32),
    ("prefetch.global.L2::evict_last [%rd1+128];", Prefetch, "%rd1", 128),
    ("prefetchu.L1 [%rd1];", PrefetchU, "%rd1", 0),
    ("createpolicy.fractional.L2::evict_last.L2::evict_unchanged.b64 %rd5, 0f3F000000;",
     CreatePolicyFractional, None, 0),
    ("createpolicy.fractional.L2::evict_first.b64 %rd5;", CreatePolicyFractional, None, 0),
    ("createpolicy.range.global.L2::evict_last.b64 %rd5, [%rd1+-64], 1024, 4096;",
     CreatePolicyRange, "%rd1", -64),
    ("createpolicy.cvt.L2.b64 %rd5, %rd2;", CreatePolicyCvt, None, 0),
    ("multimem.ld_reduce.relaxed.gpu.global.add.u32 %r1, [%rd1+8];", Multimem, "%rd1", 8),
    ("multimem.red.release.sys.global.min.s64 [%rd1], %rd2;", Multimem, "%rd1", 0),
]


@pytest.mark.parametrize("line,cls,base,offset", HAND, ids=[h[0].split(" ")[0] for h in HAND])
def test_handwritten_ptx_reads_typed_with_its_address(line, cls, base, offset):
    (s,) = instructions(parse_ptx(f"{HEADER}\t@%p1 {line}\n}}\n").function("k").body)
    assert type(s.insn) is cls, getattr(s.insn, "why", "")
    assert s.render() == f"@%p1 {line}"
    if base is not None:
        a = s.insn.a
        assert isinstance(a, Addr) and isinstance(a.base, Reg | Symbol)
        assert (a.base.render(), a.offset) == (base, offset)


# Compilers' spellings of what ptxdsl writes otherwise, read typed as the same access: a zero
# offset (Triton: `[ %r1 + 0 ]` on every address; nvcc: `[retval0+0]`), a scalar's one
# register in braces (Triton: `{ %rs1 }`), ldmatrix/stmatrix's qualifiers in another order.
SPELLINGS = [
    ("@%p1 st.shared::cta.b32 [ %r1 + 0 ], %r2;", St, "%r2"),
    ("ld.shared.v2.b32 { %r1, %r2 }, [ %r3 + 0 ];", Ld, None),
    ("st.global.v4.b32 [ %rd1 + 0 ], { %r1, %r2, %r3, %r4 };", St, None),
    ("atom.shared.add.u32 %r4, [smem+0], 1;", Atom, None),
    ("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%r6, %r7}, [%r1+0];", LdMatrix, None),
    ("@%p1 ld.global.b16 { %rs1 }, [ %rd1 + 0 ];", Ld, "%rs1"),
    ("st.global.b32 [ %rd1 + 0 ], { %r2 };", St, "%r2"),
    ("st.shared.b32 [ %r1 + 0 ], { 7 };", St, "7"),
    # CUTLASS's semaphores and Triton's atomics: the space before the memory order
    ("ld.global.acquire.gpu.b32 %r1, [%rd1];", Ld, None),
    ("st.global.release.gpu.b32 [%rd1], %r1;", St, None),
    ("ld.shared.volatile.u32 %r1, [%r2];", Ld, None),
    ("atom.global.gpu.acq_rel.add.f32 %f1, [ %rd1 + 0 ], %f2;", Atom, None),
    ("atom.global.gpu.release.exch.b32 %r1, [%rd1], %r2;", Atom, None),
    ("red.shared::cta.cta.relaxed.add.u32 [%r1], %r2;", Red, None),
    # nvcc's cuda::atomic_ref: the operation before the memory order and scope
    ("atom.cas.release.gpu.b64 %rd1, [%rd2], %rd3, %rd4;", AtomCas, None),
    ("atom.add.release.gpu.u32 %r1, [%rd2], %r2;", Atom, None),
    ("atom.exch.acquire.gpu.global.b32 %r1, [%rd2], %r2;", Atom, None),
    # Triton's stack pointer %SPL is .b32: the local window takes 32-bit addresses
    ("st.local.v2.b32 [ %r1 + 0 ], { %r2, %r3 };", St, None),
    ("ld.local.b32 %r2, [%r1];", Ld, "%r2"),
    # CUTLASS: the count before the shape
    ("ldmatrix.sync.aligned.x4.m8n8.shared.b16 {%r6, %r7, %r8, %r9}, [%r1];", LdMatrix, None),
    ("stmatrix.sync.aligned.x2.m8n8.trans.shared.b16 [%r1], {%r6, %r7};", StMatrix, None),
]


@pytest.mark.parametrize("line,cls,value", SPELLINGS, ids=[z[0] for z in SPELLINGS])
def test_compiler_spellings_read_typed(line, cls, value):
    (s,) = instructions(parse_ptx(f"{HEADER}\t{line}\n}}\n").function("k").body)
    assert type(s.insn) is cls, getattr(s.insn, "why", "")
    assert s.insn.a.offset == 0
    if value is not None:     # the scalar, unbraced
        assert (s.insn.d if cls is Ld else s.insn.b).render() == value


def test_atom_operation_moved_after_order_keeps_its_meaning():
    (s,) = instructions(parse_ptx(f"{HEADER}\tatom.cas.acquire.gpu.global.b64 %rd1, [%rd2], "
                                  "%rd3, %rd4;\n}\n").function("k").body)
    a = s.insn
    assert type(a) is AtomCas
    assert (a.sem.value, a.scope.value, a.space) == ("acquire", "gpu", StateSpace.global_)
    # the text keeps nvcc's order
    assert "atom.cas.acquire.gpu.global.b64" in parse_ptx(
        f"{HEADER}\tatom.cas.acquire.gpu.global.b64 %rd1, [%rd2], %rd3, %rd4;\n}}\n").emit()


def test_respellings_chain_and_only_permute():
    try:
        respell("zz")(lambda op: op.replace("b.a", "a.b"))
        respell("zz")(lambda op: op.replace("d.c", "c.d"))
        assert RESPELL["zz"]("zz.b.a.d.c.u32") == "zz.a.b.c.d.u32"
        respell("zz")(lambda op: op + ".x")          # adds a qualifier: not a respelling
        assert RESPELL["zz"]("zz.b.a.u32") == "zz.a.b.u32"
    finally:
        del RESPELL["zz"]


def test_braces_hold_one_scalar_only():
    """`{ %r1 }` is the scalar, not a one-element vector: ptxdsl has no .v1."""
    for line in ("ld.global.v2.b32 { %r1 }, [%rd1];", "st.global.v4.b32 [%rd1], { %r1 };"):
        (s,) = instructions(parse_ptx(f"{HEADER}\t{line}\n}}\n").function("k").body)
        assert type(s.insn) is Raw


# Forms the classes do not model, or refuse as ptxas does, kept Raw (with the constructor's
# reason where one refused), each beside its twin in a spelling the class has, read typed: a
# reading of the first would hand the checker an access the text does not make.
UNREAD = [
    ("ld.shared.u32 %r1, [%r2], %rd1;", "", "ld.shared.u32 %r1, [%r2];"),  # policy, no hint
    ("ld.shared.v4.u32 {%r1, %r2}, [%r2];", "", "ld.shared.v2.u32 {%r1, %r2}, [%r2];"),
    ("ld.shared.u32 {%r1, %r2}, [%r2];", "", "ld.shared.v2.u32 {%r1, %r2}, [%r2];"),
    ("st.global.nc.u32 [%rd1], %r1;", "", "st.global.u32 [%rd1], %r1;"),   # .nc: loads only
    ("ld.shared.shared::cta.u32 %r1, [%r2];", "", "ld.shared::cta.u32 %r1, [%r2];"),
    ("ld.global.unified.u32 %r1, [%rd1];", "", "ld.global.u32 %r1, [%rd1];"),
    ("ld.global.cg.u32 %r1, [%rd1];", "", "ld.global.u32 %r1, [%rd1];"),   # cache operators
    ("st.global.cs.u32 [%rd1], %r1;", "", "st.global.u32 [%rd1], %r1;"),
    ("ld.global.u32.u32 %r1, [%rd1];", "", "ld.global.u32 %r1, [%rd1];"),
    ("ld.shared.u32 %r1, [smem+1024];", "inside smem", "ld.shared.u32 %r1, [smem+1020];"),
    ("ld.global.u8 %rs1, [%rd1];", "compatible with .u8", "ld.global.u16 %rs1, [%rd1];"),
    ("ld.volatile.global.L1::evict_last.u32 %r1, [%rd1];", "volatile",
     "ld.volatile.global.u32 %r1, [%rd1];"),
    ("ld.shared.v2.u32 {%r1, _}, [%r2];", "Sink", "ld.shared.v2.u32 {%r1, %r3}, [%r2];"),
    ("ld.global.L1::evict_last.nc.u32 %r1, [%rd1];", "rendered",        # qualifier order
     "ld.global.nc.L1::evict_last.u32 %r1, [%rd1];"),
    ("atom.global.add.f16 %rs1, [%rd1], %rs2;", "rendered",             # ptxas wants .noftz
     "atom.global.add.noftz.f16 %rs1, [%rd1], %rs2;"),
    ("atom.global.noftz.add.u32 %r1, [%rd1], 1;", "rendered",
     "atom.global.add.u32 %r1, [%rd1], 1;"),
    ("atom.global.cas.b32 %r1, [%rd1], %r2;", "", "atom.global.cas.b32 %r1, [%rd1], %r2, %r3;"),
    ("red.global.exch.b32 [%rd1], %r2;", "OperandError", "atom.global.exch.b32 %r1, [%rd1], %r2;"),
    ("atom.global.u32 %r1, [%rd1], 1;", "", "atom.global.add.u32 %r1, [%rd1], 1;"),
    ("multimem.ld_reduce.weak.global.add.acc::f32.v2.f16x2 {%r1, %r2}, [%rd1];", "",
     "multimem.ld_reduce.weak.global.add.u32 %r1, [%rd1];"),
    ("ldmatrix.sync.aligned.m16n16.x1.trans.shared.b8 {%r6, %r7}, [%r1];", "",
     "ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%r6, %r7}, [%r1];"),
    ("ldmatrix.sync.aligned.x4.m8n8.shared.b16 {%r6, %r7}, [%r1];", "",   # text as written
     "ldmatrix.sync.aligned.x2.m8n8.shared.b16 {%r6, %r7}, [%r1];"),
    ("ldmatrix.sync.aligned.x4.m8n8.shared.b16 {%r6, %r7, %r8, %r9}, [%r1+8];", "16-byte",
     "ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%r6, %r7, %r8, %r9}, [%r1+16];"),
    ("stmatrix.sync.aligned.m8n8.x1.shared.b16 [%r1], %r6;", "",
     "stmatrix.sync.aligned.m8n8.x1.shared.b16 [%r1], {%r6};"),
    ("prefetch.shared.L2 [%r1];", "space", "prefetch.global.L2 [%rd1];"),
    ("prefetch.local.L2::evict_last [%rd1];", "evict", "prefetch.global.L2::evict_last [%rd1];"),
    ("prefetchu.L2 [%rd1];", "", "prefetchu.L1 [%rd1];"),
    ("createpolicy.fractional.b64 %rd1, 1.0;", "",
     "createpolicy.fractional.L2::evict_last.b64 %rd1, 1.0;"),
    ("createpolicy.range.L2::evict_last.b64 %rd1, [%rd2], 1024;", "",
     "createpolicy.range.L2::evict_last.b64 %rd1, [%rd2], 1024, 4096;"),
    ("createpolicy.cvt.L2.b32 %r1, %rd2;", "", "createpolicy.cvt.L2.b64 %rd1, %rd2;"),
]


def _one(line: str):
    (s,) = instructions(parse_ptx(f"{HEADER}\t{line}\n}}\n").function("k").body)
    return s.insn


@pytest.mark.parametrize("line,why,twin", UNREAD, ids=[u[0] for u in UNREAD])
def test_unmodelled_forms_stay_raw_beside_their_typed_twin(line, why, twin):
    got = _one(line)
    assert type(got) is Raw and got.render() == line and why in got.why
    assert type(_one(twin)) is not Raw, _one(twin).why


# -- any operand the parser makes, under mutated opcodes: None, an instruction or a refusal ----
_K = Kernel("junk")
_R32, _R64, _P, _F32 = (_K.reg(ty) for ty in (t.b32, t.b64, t.pred, t.f32))
_SMEM = _K.shared_array(t.b8, 1024, align=16, name="smem")
JUNK = [_R32, _R64, _P, _F32, NegPred(_P),
        SpecialReg("tid.x", ScalarType.u32), Addr(_R32), Addr(_R64, -4), Addr(_SMEM, 8), Addr(8),
        Vec([_R32, _R32]), Vec([_R32]), Braces([_R32, 1]), Braces([SINK]),
        Bracket([_R64, Vec([_R32, _R32])]), PredPair(_P, _P), _SMEM, Label("L"), SINK, 0, -1,
        1.5, 2**70, RawOperand("x"), RawOperand("%r1.x", (_R32,))]
SEEDS = ["ld.global.nc.L2::cache_hint.v4.f32", "st.shared.v2.b32", "atom.global.cas.b32",
         "red.add.noftz.f16", "prefetch.global.L2::evict_last", "prefetchu.L1",
         "createpolicy.fractional.L2::evict_last.b64",
         "createpolicy.range.global.L2::evict_last.b64", "createpolicy.cvt.L2.b64",
         "multimem.ld_reduce.relaxed.gpu.global.add.u32", "multimem.st.weak.global.b32",
         "ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16", "stmatrix.sync.aligned.m8n8.x1.b16"]
_MODULES = {f"ptxdsl.frontend.readers.{m}" for m in ("memory", "atomic", "prefetch",
                                                     "cache_policy", "multimem", "matrix")}


def _mutations(opcode: str):
    parts = opcode.split(".")
    yield tuple(parts[:1])
    for i in range(1, len(parts) + 1):
        yield tuple(parts[:i])                                # cut short
        yield tuple(parts[:i] + parts[i - 1:])                # a qualifier twice
        yield tuple(parts[:i - 1] + ["zz"] + parts[i:])       # one unknown


@pytest.mark.parametrize("opcode", SEEDS)
def test_readers_take_any_operands_without_crashing(opcode):
    """The parser keeps a reader's exception as the reason a statement stayed Raw; anything
    but a refusal (`PtxdslError`) would be a reader's bug shown to the user as the reason."""
    rnd = random.Random(opcode)
    mine = [fn for fn in READERS[opcode.split(".")[0]] if fn.__module__ in _MODULES]
    assert mine
    for parts in _mutations(opcode):
        for fn in mine:
            for n in range(6):
                for _ in range(10):
                    ops = [rnd.choice(JUNK) for _ in range(n)]
                    try:
                        out = fn(parts, ops)
                    except PtxdslError:
                        continue
                    assert out is None or isinstance(out, Instruction), (parts, ops)
