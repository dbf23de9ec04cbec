"""The committed PTX corpus (tests/corpus) matches its MANIFEST.json: every file listed, every
listed file present with the recorded size and sha256, and each entry says what the checker
should find. Cheap: reads files only (regenerating needs tests/corpus/build.py and the
compilers, which CI does not have)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from ptxdsl.checker.findings import Hazard

CORPUS = Path(__file__).parent / "corpus"
MANIFEST = json.loads((CORPUS / "MANIFEST.json").read_text())
FILES = MANIFEST["files"]
ON_DISK = sorted(str(p.relative_to(CORPUS / "ptx")) for p in (CORPUS / "ptx").rglob("*.ptx"))
HAZARD_IDS = {h.value for h in Hazard}


def test_every_file_on_disk_is_listed():
    assert sorted(set(ON_DISK) - set(FILES)) == []


def test_every_listed_file_is_on_disk():
    assert sorted(set(FILES) - set(ON_DISK)) == []


@pytest.mark.parametrize("name", sorted(FILES))
def test_file_matches_manifest(name):
    entry = FILES[name]
    data = (CORPUS / "ptx" / name).read_bytes()
    assert hashlib.sha256(data).hexdigest() == entry["sha256"], f"{name} changed since build.py"
    assert len(data) == entry["bytes"]
    assert data.count(b"\n") == entry["lines"]
    assert name.split("/")[0] == entry["generator"]
    assert (CORPUS.parents[1] / entry["source"]).is_file(), f"{name}: source {entry['source']}"


@pytest.mark.parametrize("name", sorted(FILES))
def test_expectations_are_hazard_ids(name):
    entry = FILES[name]
    assert set(entry["expect"]) <= HAZARD_IDS, f"{name}: unknown hazard id"
    # A buggy kernel says what its bug is and what the checker should make of it: hazard ids,
    # or why the PTX cannot show it (undecidable, or the compiler repaired the bug).
    explained = entry["expect"] or entry.get("expect_undecidable") or entry.get(
        "bug_repaired_by_compiler")
    assert bool(entry.get("bug")) == bool(explained)


def test_corpus_stays_small():
    total = sum(e["bytes"] for e in FILES.values())
    assert total < 12 * 2**20, f"corpus is {total / 2**20:.1f} MiB"


def test_readme_sizes_match_manifest():
    # build.py rewrites the table; a hand edit of the corpus without it shows here.
    readme = (CORPUS / "README.md").read_text()
    for gen in ("nvcc_ptx", "nvcc_cutlass", "triton", None):
        mine = [e for e in FILES.values() if gen in (None, e["generator"])]
        label = f"`{gen}`" if gen else "total"
        row = f"| {label} | {len(mine)} | {sum(e['lines'] for e in mine):,} |"
        assert row in readme, f"README.md's size table is stale for {label}"
