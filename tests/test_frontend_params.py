"""nvcc's `.param` calling convention bound across inlined `.func` calls (frontend/params.py)
and each inlined copy of a callee given its own registers (frontend/regcopy.py).

The corpus pair nvcc_ptx/noinline_mbar_args.ptx / bug_noinline_wait_wrong_barrier.ptx passes
the consumer's full barrier to a `__noinline__` wait through a returned pointer and a by-value
struct: the wrong barrier is found only when the arguments and the return value are bound."""

from __future__ import annotations

from pathlib import Path

import pytest

from ptxdsl.checker import Severity
from ptxdsl.frontend import Raw, calls, parse_ptx
from ptxdsl.frontend.params import ParamStores
from ptxdsl.instructions.memory import Ld
from ptxdsl.instructions.move import Mov
from ptxdsl.statements import Statement
from ptxdsl.toolchain import assemble

NVCC = Path(__file__).parent / "corpus" / "ptx" / "nvcc_ptx"
PAIR = {"noinline_mbar_args.ptx": [], "bug_noinline_wait_wrong_barrier.ptx": [
    "wait-wrong-barrier"]}


def _verdict(text: str) -> list[str]:
    return sorted({f.hazard.value for f in parse_ptx(text).check()
                   if f.severity is not Severity.note})


@pytest.mark.parametrize("name", sorted(PAIR))
def test_corpus_pair_found_and_silent(name):
    assert _verdict((NVCC / name).read_text()) == PAIR[name]


def test_wrong_barrier_needs_the_binding(monkeypatch):
    # Without the binding the helper's barrier is an unknown `ld.param`: nothing is found.
    monkeypatch.setattr(ParamStores, "bind", lambda self, item, renamed=None: [item])
    monkeypatch.setattr(calls, "returned_values", lambda callee, body, call: ParamStores())
    assert _verdict((NVCC / "bug_noinline_wait_wrong_barrier.ptx").read_text()) == []


def test_wrong_barrier_needs_a_register_copy_per_call_site(monkeypatch):
    # The helpers are called at several sites: sharing one register among them, each is
    # written once per site and known at none.
    monkeypatch.setattr(calls.RegCopy, "statement", lambda self, item: item)
    monkeypatch.setattr(calls.RegCopy, "reg", lambda self, r: r)
    assert _verdict((NVCC / "bug_noinline_wait_wrong_barrier.ptx").read_text()) == []


# A vector argument, a byte-array argument read at two offsets (one of them as nvcc never
# stores it), and a returned value.
CALLS = """\
.version 8.0
.target sm_90a
.address_size 64

.func  (.param .b64 func_retval0) pick(
\t.param .align 8 .b8 pick_param_0[8],
\t.param .align 8 .b8 pick_param_1[16]
)
{
\t.reg .b32 \t%r<4>;
\t.reg .b64 \t%rd<5>;

\tld.param.v2.u32 \t{%r1, %r2}, [pick_param_0];
\tld.param.u32 \t%r3, [pick_param_1+4];
\tld.param.u64 \t%rd1, [pick_param_1+8];
\tcvt.u64.u32 \t%rd2, %r2;
\tadd.s64 \t%rd3, %rd1, %rd2;
RET
}

.visible .entry k()
{
\t.reg .b32 \t%r<4>;
\t.reg .b64 \t%rd<4>;

\tmov.u32 \t%r1, 8;
\tmov.u32 \t%r2, 16;
\tmov.u64 \t%rd1, 64;
\t{
\t.param .align 8 .b8 param0[8];
\tst.param.v2.b32 \t[param0+0], {%r1, %r2};
\t.param .align 8 .b8 param1[16];
\tst.param.b64 \t[param1+0], %rd1;
\tst.param.b64 \t[param1+8], %rd1;
\t.param .b64 retval0;
\tcall.uni (retval0), pick, (param0, param1);
\tld.param.b64 \t%rd2, [retval0+0];
\t}
\tret;
}
"""
ONE_RET = "\tst.param.b64 \t[func_retval0+0], %rd3;\n\tret;"
# Two returns, one of them before the store: the value returned is not known.
TWO_RETS = ("\tsetp.eq.u64 \t%p1, %rd3, 0;\n\t@%p1 bra \tL_skip;\n"
            "\tst.param.b64 \t[func_retval0+0], %rd3;\n\tret;\nL_skip:\n\tret;")


def _kernel_body(ret: str) -> list:
    text = CALLS.replace("RET", ret)
    if "%p1" in text:
        text = text.replace("\t.reg .b32 \t%r<4>;\n\t.reg .b64 \t%rd<5>;",
                            "\t.reg .pred \t%p<2>;\n\t.reg .b32 \t%r<4>;\n\t.reg .b64 \t%rd<5>;")
    assemble(text, "sm_90a")
    return [x for x in parse_ptx(text).kernels[0].body if type(x) is Statement]


def _named(body: list, cls: type) -> list[tuple[str, str]]:
    """(destination, source register or `.param` variable) of each `cls` statement."""
    got = []
    for x in body:
        if isinstance(x.insn, cls):
            a = x.insn.a.base if isinstance(x.insn, Ld) else x.insn.a
            got.append((x.insn.d.name, getattr(a, "name", None)))
    return got


@pytest.mark.parametrize("ret, returned", [(ONE_RET, True), (TWO_RETS, False)])
def test_param_elements_bound_where_offsets_and_widths_match(ret, returned):
    body = _kernel_body(ret)
    moves = _named(body, Mov)
    # The vector's two elements and the 8-byte element at +8; `[pick_param_1+4]` is half of
    # what was stored at +0: it stays a load, of a value not known.
    assert ("r1", "r1") in moves and ("r2", "r2") in moves and ("rd1", "rd1") in moves
    assert "r3" not in [d for d, _ in moves]
    assert [x.insn.op for x in body if isinstance(x.insn, Raw) and x.insn.d and
            getattr(x.insn.d[0], "name", None) == "r3"] == ["ld.param.u32"]
    assert (("rd2", "rd3") in moves) is returned
    assert (("rd2", "retval0") in _named(body, Ld)) is not returned


def test_each_call_site_has_its_own_callee_registers():
    text = CALLS.replace("RET", ONE_RET)
    second = text[text.index("\t{\n\t.param .align 8 .b8 param0"):text.index("\t}\n\tret;")]
    text = text.replace(second, second + "\t}\n" + second)
    body = [x for x in parse_ptx(text).kernels[0].body if type(x) is Statement]
    callee_r2 = [x.insn.d for x in body if isinstance(x.insn, Mov) and x.insn.d.name == "r2"
                 and getattr(x.insn.a, "name", None) == "r2"]
    assert len(callee_r2) == 2 and callee_r2[0] is not callee_r2[1]


# rec calls seven (inlined, its result bound), then itself (recursion: not inlined), with only
# directives between, as nvcc writes two call blocks.
RECURSIVE = """\
.version 8.0
.target sm_90a
.address_size 64

.func  (.param .b64 func_retval0) seven()
{
\t.reg .b64 \t%rd<2>;
\tmov.u64 \t%rd1, 7;
\tst.param.b64 \t[func_retval0+0], %rd1;
\tret;
}

.func  (.param .b64 func_retval0) rec()
{
\t.reg .b64 \t%rd<4>;
\t{
\t.param .b64 retval0;
\tcall.uni (retval0), seven, ();
\tld.param.b64 \t%rd1, [retval0+0];
\t}
\t{
\t.param .b64 retval0;
\tcall.uni (retval0), rec, ();
\tld.param.b64 \t%rd2, [retval0+0];
\t}
\tadd.s64 \t%rd3, %rd1, %rd2;
\tst.param.b64 \t[func_retval0+0], %rd3;
\tret;
}

.visible .entry k()
{
\t.reg .b64 \t%rd<2>;
\t{
\t.param .b64 retval0;
\tcall.uni (retval0), rec, ();
\tld.param.b64 \t%rd1, [retval0+0];
\t}
\tret;
}
"""


def test_a_later_call_not_inlined_rewrites_the_return_value():
    # The recursive call's result is unknown: not seven's, which the same `retval0` held.
    assemble(RECURSIVE, "sm_90a", warn=False)
    body = [x for x in parse_ptx(RECURSIVE).kernels[0].body if type(x) is Statement]
    assert ("rd1", "rd1") in _named(body, Mov)          # seven's result, in rec
    assert ("rd2", "retval0") in _named(body, Ld)       # rec's own, still a load
