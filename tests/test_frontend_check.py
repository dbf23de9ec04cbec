"""The checker on parsed PTX: statements kept as text still count, `.func` helpers count at
their call sites, and findings name the PTX line."""

from __future__ import annotations

from pathlib import Path

import pytest

from ptxdsl.checker import Severity
from ptxdsl.frontend import Raw, parse_ptx
from ptxdsl.testing import assemble_declared

TEMPLATE = (Path(__file__).parent / "data" / "frontend" / "tma_wait_template.ptx").read_text()

INLINE_WAIT = """WAIT:
\tmbarrier.try_wait.parity.shared::cta.b64 \t%p2, [%r2], 0;
\t@!%p2 bra \tWAIT;"""
CALLED_WAIT = """\t{
\t.param .b32 param0;
\tst.param.b32 \t[param0], %r2;
\tcall.uni \twait_full, (param0);
\t}"""
GUARDED_CALL = CALLED_WAIT.replace("\tcall.uni", "\t@%p1 call.uni")


def kernel(wait: str, file: str = "k.ptx"):
    text = TEMPLATE.replace("WAITCALL", wait)
    assemble_declared(text)           # what the tests read is PTX that ptxas takes
    return parse_ptx(text, file=file)


def errors(mod) -> list[str]:
    return sorted(f.id for f in mod.check() if f.severity is not Severity.note)


def test_a_raw_shared_load_is_still_a_shared_read():
    mod = kernel("")
    read = [s for s in mod.function("k").statements() if s.insn.opcode() == "ld.shared.b8"]
    assert len(read) == 1 and isinstance(read[0].insn, Raw)   # .b8 into a .b16 register
    (f,) = [f for f in mod.check() if f.severity is not Severity.note]
    assert f.id == "smem-read-before-wait"
    assert f.loc.file == "k.ptx" and TEMPLATE.replace("WAITCALL", "").splitlines()[
        f.loc.line - 1].strip().startswith("ld.shared.b8")


def test_the_wait_in_line_makes_it_clean():
    assert errors(kernel(INLINE_WAIT)) == []


def test_a_wait_in_a_called_function_counts_at_the_call():
    mod = kernel(CALLED_WAIT)
    assert errors(mod) == []
    assert "wait_full$ret" not in mod.emit()       # the inlining is the checker's view only


def test_a_guarded_call_is_skipped_around_where_its_guard_is_false():
    view = kernel(GUARDED_CALL).kernels[0]
    texts = [x.render() if hasattr(x, "render") else x.label.render() + ":" for x in view.body]
    at = texts.index("@%p1 call.uni \twait_full, (param0);")
    assert texts[at + 1] == "@!%p1 bra wait_full$ret;"
    assert texts.index("wait_full$ret:") > texts.index("bra wait_full$ret;") > at


@pytest.mark.parametrize("wait", [INLINE_WAIT, CALLED_WAIT])
def test_round_trip_of_the_checked_kernels(wait):
    from ptxdsl.testing import same_program
    text = TEMPLATE.replace("WAITCALL", wait)
    assert same_program(text, parse_ptx(text).emit()) is None
