"""The front end on PTX that no one here wrote by hand: nvcc (CUDA C++ with cuda::ptx, and
CUTLASS's Hopper collectives) and Triton/Gluon output, built by tests/corpus/build.py and
committed with its manifest.

Every file parses, emits back to the same tokens and the same cubin, and reads typed wherever
a reader claims the opcode; the checker reports nothing on the clean kernels and the bug each
buggy kernel carries (its manifest's `expect`)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ptxdsl.checker import Severity
from ptxdsl.frontend import Raw, parse_ptx
from ptxdsl.frontend.lexer import Source, tokenize
from ptxdsl.frontend.readers import READERS
from ptxdsl.testing import same_program

CORPUS = Path(__file__).parent / "corpus"
MANIFEST = json.loads((CORPUS / "MANIFEST.json").read_text())
FILES = sorted(MANIFEST["files"])

# Statements a reader claims but that stay raw, by the reason: each is a builder refusing
# what ptxas accepts, kept as text on purpose (docs/ptx_frontend.md).
RAW_REASONS = (
    "expected an immediate in [0,",   # nvcc's negative immediates for unsigned types
)

# Checker verdicts that differ from the manifest, each with its reason (strict xfails: a fix
# makes the test fail until the entry is removed).
KNOWN: dict[str, str] = {}


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
            if insn.op.split(".")[0] in READERS and not any(r in insn.why
                                                             for r in RAW_REASONS):
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
