"""The front end on PTX that no one here wrote by hand: nvcc (CUDA C++ with cuda::ptx, and
CUTLASS's Hopper collectives) and Triton/Gluon output, built by tests/corpus/build.py and
committed with its manifest.

Every file parses, emits back to the same tokens and the same cubin, and reads typed wherever
a reader claims the opcode; the checker reports nothing on the clean kernels and the bug each
buggy kernel carries (its manifest's `expect`)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from ptxdsl.checker import Severity
from ptxdsl.frontend import Raw, parse_ptx
from ptxdsl.frontend.lexer import Source, tokenize
from ptxdsl.fuzz.oracle import newest_version
from ptxdsl.testing import same_program

CORPUS = Path(__file__).parent / "corpus"
MANIFEST = json.loads((CORPUS / "MANIFEST.json").read_text())
FILES = sorted(MANIFEST["files"])

# Statements a reader recognised but whose class refused them or renders them otherwise, by
# the reason's words: each is a form ptxas takes that the builders do not make, kept as text
# (docs/ptx_frontend.md, "What stays raw"). A reading refused for any other reason fails.
RAW_REASONS = {
    "(ptxas checks the declaration here)":
        "cvt.rn.f16x2.f32 with .b32 sources: ptxas 13.5 takes them, the class follows the "
        "stricter ptxas it was measured with",
    "expected a writable space (global, shared, local, generic), got .param":
        "st.param: a call's argument setup; ptxdsl builds no calls",
    "expected a predicate register, got immediate": "mov.pred of a constant",
    "expected a 64-bit mov for a non-shared symbol's address":
        "Triton's mov.b32 of a parameter's address",
    "expected a register compatible with":
        "ld/st/cvt with a register wider than the type (nvcc's ld.u8 into .b16, ld.u32 into "
        ".b64), which the PTX ISA allows and the builders do not make",
}

# Checker verdicts that differ from the manifest, each with its reason (strict xfails: a fix
# makes the test fail until the entry is removed).
KNOWN: dict[str, str] = {
    "nvcc_ptx/bug_cluster_release_own_cta.ptx": (
        "mbar-arrive-count missed (a note): nvcc's __launch_bounds__(128) is `.maxntid 128, "
        "1, 1`, which bounds the CTA's size, not its shape, so the per-warp release "
        "(`lane == 0`, tid.x % 32) is counted by thread 0 of each CTA alone, a lower bound: "
        "more arrivals than the count are reported, fewer (here 4 warps of the 8 the empty "
        "barrier expects) only as a note (docs/hazards.md, mbar-arrive-count)"),
}


def parsed(rel: str):
    return parse_ptx((CORPUS / "ptx" / rel).read_text(), file=f"tests/corpus/ptx/{rel}")


def test_the_corpus_is_what_the_issue_asks_for():
    gens = {MANIFEST["files"][f]["generator"] for f in FILES}
    assert {"nvcc_ptx", "nvcc_cutlass", "triton"} <= gens
    assert sum(MANIFEST["files"][f]["lines"] for f in FILES) > 50_000
    assert any(MANIFEST["files"][f]["expect"] for f in FILES)


@pytest.mark.parametrize("rel", FILES)
def test_corpus_file_round_trips_to_the_same_cubin(rel):
    text = (CORPUS / "ptx" / rel).read_text()
    # The files declare PTX ISA 9.4 and 9.5 (their compilers'); the nvJitLink floor (13.2) reads
    # up to 9.2, and without ptxas reading the original there is no cubin to compare with.
    declared = re.search(r"^\.version (\d+)\.(\d+)", text, re.M)
    assert declared is not None, rel
    newest = newest_version()
    if tuple(map(int, declared.groups())) > tuple(map(int, newest.split("."))):
        pytest.skip(f"{rel} is PTX ISA {'.'.join(declared.groups())}; this nvJitLink's ptxas "
                    f"reads up to {newest}")
    again = parse_ptx(text, file=rel).emit()
    assert [t[1] for t in tokenize(Source(again))] == [t[1] for t in tokenize(Source(text))]
    assert same_program(text, again) is None


@pytest.mark.parametrize("rel", FILES)
def test_corpus_file_reads_typed_where_a_reader_claims_the_opcode(rel):
    left = []
    for fn in parsed(rel).functions:
        for s in fn.raw():
            insn = s.insn
            assert isinstance(insn, Raw)
            # No `why`: no reader knows the form (no class models it), text is all there is.
            if insn.why and not any(r in insn.why for r in RAW_REASONS):
                left.append(f"{s.loc}: {insn.render()} ({insn.why or 'no reader took it'})")
    assert left == [], "\n".join(left[:20])


def _verdict(rel: str) -> list[str]:
    return sorted({f.id for f in parsed(rel).check() if f.severity is not Severity.note})


@pytest.mark.parametrize("rel", [pytest.param(f, marks=pytest.mark.xfail(
    reason=KNOWN[f], strict=True)) if f in KNOWN else f for f in FILES])
def test_corpus_file_checks_as_its_manifest_says(rel):
    want = sorted(MANIFEST["files"][rel]["expect"])
    got = _verdict(rel)
    assert got == want, [f.format() for f in parsed(rel).check()
                         if f.severity is not Severity.note]
