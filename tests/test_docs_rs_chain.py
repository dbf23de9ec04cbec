"""docs/wgmma.md, "The RS chain of attention": the page's example runs as written (its python
blocks in that section, in order, hazard warnings as errors), checks clean, assembles, and is
the chain it describes: P converted into the same registers before the loop and in it, the
RS wgmma reading them, V as a transposed (MN-major) B operand."""

from __future__ import annotations

import re
import warnings
from pathlib import Path

from ptxdsl.checker.findings import PtxdslHazardWarning
from ptxdsl.testing import assemble_declared
from tests.test_tutorials import blocks

PAGE = Path(__file__).resolve().parent.parent / "docs" / "wgmma.md"
SECTION = "## The RS chain of attention"


def _run_section() -> dict:
    text = PAGE.read_text()
    start = text.index(SECTION)
    end = text.index("\n## ", start + len(SECTION))
    first, last = text.count("\n", 0, start) + 1, text.count("\n", 0, end) + 1
    ns: dict = {"__name__": "docs_wgmma_rs_chain"}
    mine = [(line, code) for line, gpu, code in blocks(PAGE) if first <= line <= last]
    assert len(mine) == 2
    with warnings.catch_warnings():
        warnings.simplefilter("error", category=PtxdslHazardWarning)
        for line, code in mine:
            # compiled at the page's lines, so a failure names the Markdown line
            exec(compile("\n" * (line - 1) + code, str(PAGE), "exec"), ns)
    return ns


def test_the_rs_chain_example_builds_checks_clean_and_assembles():
    ns = _run_section()
    text = ns["ptx_text"]
    assert assemble_declared(text)[:4] == b"\x7fELF"
    assert ns["k"].check(strict=True) == []
    # P_0 before the loop and P_j in it: the same 16 registers, 32 conversions in all
    p_regs = [f"%{r.name}" for r in ns["p"].regs]
    dests = re.findall(r"cvt\.rn\.bf16x2\.f32 (%r\d+),", text)
    assert dests == p_regs * 2
    # the RS wgmma: A from p's registers, B an MN-major descriptor (imm-trans-b 1)
    rs = re.findall(r"wgmma\.mma_async\.sync\.aligned\.m64n128k16\.f32\.bf16\.bf16 "
                    r"\{[^}]*\}, \{(%r\d+), (%r\d+), (%r\d+), (%r\d+)\}, %rd\d+, 1, 1, 1, "
                    r"(\d);", text)
    assert len(rs) == 2 * 4                                   # in the loop and after it
    assert {r[4] for r in rs} == {"1"}
    assert [list(r[:4]) for r in rs[:4]] == [p_regs[4 * q:4 * q + 4] for q in range(4)]
    # S = Q K^T: SS, K-major, no transpose; its first k16 step overwrites S
    ss = re.findall(r"wgmma\.mma_async\.sync\.aligned\.m64n64k16\.f32\.bf16\.bf16 \{[^}]*\}, "
                    r"%rd\d+, %rd\d+, (\S+), 1, 1, 0, 0;", text)
    assert len(ss) == 2 * 8 and ss[0] == ss[8] == "0"


def test_rewriting_p_before_the_wait_is_reported_as_the_page_says():
    """The page: P is rewritten only after wgmma_wait_group retired the wgmma reading it; the
    checker reports an earlier `to_packed(into=p)`."""
    from ptxdsl import Kernel, ptx, t
    from ptxdsl.instructions.wgmma_desc import SmemLayout, descriptor
    k = Kernel("early_p", reqntid=128)
    lv = SmemLayout(t.bf16, 64, 64, "MN", "128B")
    dv = descriptor(k, lv, k.shared_array(t.b8, lv.nbytes, align=1024, name="v"))
    s, o = k.fragment(t.f32, shape=(64, 64)), k.fragment(t.f32, shape=(64, 64))
    p = s.to_packed(t.bf16)
    ptx.wgmma_fence(k)
    ptx.wgmma_mma_async(k, o, p.a_operand(0), dv, atype="bf16")
    ptx.wgmma_commit_group(k)
    s.to_packed(t.bf16, into=p)                 # too early: the wgmma may still read P
    ptx.wgmma_wait_group(k, 0)
    k.ret()
    assert [f.hazard.value for f in k.check()] == ["wgmma-regs-in-flight"]
    assert "`wgmma-regs-in-flight`" in PAGE.read_text()
