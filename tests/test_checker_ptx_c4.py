"""Checker on parsed PTX (issue 30, parity with built kernels): what the built kernel told the
checker and the PTX must say as well. A lane mask spelled `0xffffffff` (inline PTX as people
write it) reads as the typed elect.sync the builder makes; a value written under a guard
differs where its guard does (CUTLASS's elect_one_sync flag once the inline PTX is part of
the kernel); an acquire fence of a size the class refuses stays raw text and is still judged;
pending facts come in one order whatever the hash seed; an inline-PTX wait on a variable bound
to `$N` without brackets is the wait the parsed PTX shows. Each clean form checks clean; each
buggy twin is reported."""

from __future__ import annotations

from types import SimpleNamespace

from ptxdsl import Addr, Kernel, ptx, t
from ptxdsl.checker import check_kernel
from ptxdsl.checker.analysis import Analysis
from ptxdsl.frontend import parse_ptx
from ptxdsl.frontend.items import Raw
from ptxdsl.instructions.warp import Elect

HEAD = ".version 8.0\n.target sm_90a\n.address_size 64\n"


def _arrive(elect: str) -> str:
    """Warp 0 arrives on a barrier that counts one arrival, under `elect` (PTX lines)."""
    return HEAD + f"""
.visible .entry k()
.reqntid 128
{{
	.reg .pred %p<8>;
	.reg .b32 %r<8>;
	.shared .align 8 .b64 bar[1];
	mov.u32 %r1, %tid.x;
	setp.eq.u32 %p1, %r1, 0;
	@!%p1 bra SKIP;
	mbarrier.init.shared::cta.b64 [bar], 1;
	fence.mbarrier_init.release.cluster;
SKIP:
	bar.sync 0;
	setp.lt.u32 %p2, %r1, 32;
	@!%p2 bra DONE;
{elect}
	mbarrier.arrive.shared::cta.b64 _, [bar];
DONE:
	ret;
}}
"""


def _errors(text: str) -> list[str]:
    return [f.id for f in parse_ptx(text).check()]


def test_elect_with_a_hex_lane_mask_reads_as_the_typed_elect():
    text = _arrive("\telect.sync %r2|%p3, 0xffffffff;\n\t@!%p3 bra DONE;")
    f = parse_ptx(text).function("k")
    (st,) = [s for s in f.statements() if s.insn.opcode() == "elect.sync"]
    assert type(st.insn) is Elect
    assert "\telect.sync %r2|%p3, 0xffffffff;" in parse_ptx(text).emit()   # as written
    assert _errors(text) == []


def test_every_lane_arriving_without_the_elect_is_found():
    assert _errors(_arrive("")) == ["mbar-arrive-count"]


def test_other_classes_with_a_lane_mask_read_it_in_hex_too():
    f = parse_ptx(_arrive("\tshfl.sync.bfly.b32 %r3, %r1, 1, 31, 0xffffffff;")).function("k")
    (st,) = [s for s in f.statements() if s.insn.opcode().startswith("shfl")]
    assert type(st.insn) is not Raw, st.insn.why


# CUTLASS's cute::elect_one_sync() once nvcc (or ptxdsl's emit) inlines it: a flag set to 1
# in the elected lane only.
FLAG = """\tmov.u32 %r4, 0;
	{
	.reg .b32 %rx;
	.reg .pred %px;
	elect.sync %rx|%px, -1;
	@%px mov.s32 %r4, 1;
	}
	setp.ne.u32 %p4, %r4, 0;
	@!%p4 bra DONE;"""


def test_a_flag_set_under_an_elected_predicate_is_not_the_same_in_every_lane():
    # How many lanes set it is not evaluated: a note, never "32 threads arrive".
    findings = parse_ptx(_arrive(FLAG)).check(notes=True)
    assert [f.id for f in findings] == ["check-skipped"]
    assert "how many threads run the arrive" in findings[0].message


def test_a_flag_every_lane_sets_is_still_found():
    bug = FLAG.replace("@%px mov.s32", "mov.s32")
    assert _errors(_arrive(bug)) == ["mbar-arrive-count"]


def _acquire(size: int) -> str:
    return HEAD + f"""
.visible .entry k(
	.param .u64 .ptr .global tmap_ptr
)
.reqntid 32
{{
	.reg .b64 %rd<2>;
	ld.param.u64 %rd1, [tmap_ptr];
	fence.proxy.tensormap::generic.acquire.gpu [%rd1], {size};
	cp.async.bulk.prefetch.tensor.2d.L2.global.tile [%rd1, {{0, 0}}];
	ret;
}}
"""


def test_acquire_of_128_bytes_is_clean():
    assert _errors(_acquire(128)) == []


def test_acquire_of_a_size_the_class_refuses_stays_raw_and_is_judged():
    f = parse_ptx(_acquire(64)).function("k")
    (st,) = [s for s in f.statements() if s.insn.opcode().startswith("fence")]
    assert type(st.insn) is Raw and "128" in st.insn.why
    found = parse_ptx(_acquire(64)).check()
    assert [x.id for x in found] == ["tmap-acquire-size"]
    assert found[0].loc.line == 12   # the fence's PTX line


def test_pending_facts_come_in_one_order_whatever_the_set_iterates():
    # (One store pending twice, at two ring distances: a rule that stops at its first
    # finding must see them in the same order in every run.)
    facts = [("bulk", 224, 1, 0), ("bulk", 224, 0, 1), ("inflight", 7)]
    ab = Analysis.pending(None, SimpleNamespace(may=facts), "bulk")   # type: ignore[arg-type]
    ba = Analysis.pending(None, SimpleNamespace(may=facts[::-1]), "bulk")   # type: ignore[arg-type]
    assert ab == ba == [(224, 0, 1), (224, 1, 0)]


def _asm_wait(init: bool) -> list[str]:
    """A built kernel waiting in inline PTX on a variable bound to `$0` without brackets
    (an address operand renders as `[bar]`): the same wait the parsed PTX shows."""
    k = Kernel("k", reqntid=32)
    bar = k.shared_array(t.b64, 1, align=8, name="bar")
    if init:
        ptx.mbarrier_init(k, Addr(bar), 1)
        ptx.fence_mbarrier_init(k)
        k.bar_sync(0)
    k.asm("{\n .reg .pred P1;\nLAB_WAIT:\n mbarrier.try_wait.parity.shared::cta.b64 P1, $0, $1;\n"
          " @P1 bra DONE;\n bra LAB_WAIT;\nDONE:\n}", ins=[bar, (0, t.u32)])
    return [f.id for f in check_kernel(k)]


def test_inline_wait_on_an_unbracketed_variable_operand_is_a_wait():
    assert _asm_wait(init=True) == []
    assert _asm_wait(init=False) == ["mbar-uninit"]
