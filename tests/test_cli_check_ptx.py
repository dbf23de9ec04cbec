"""`python -m ptxdsl check` on PTX files and folders: the report formats and the exit codes
a CI job relies on."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from ptxdsl.__main__ import main

CORPUS = Path(__file__).parent / "corpus" / "ptx"
BUGGY = CORPUS / "nvcc_ptx" / "bug_tma_store_no_fence.ptx"
CLEAN = CORPUS / "nvcc_ptx" / "tma_store_2d.ptx"
LINEINFO = CORPUS / "nvcc_ptx" / "tma_ring_2d_debug.ptx"


def run(capsys, *args: str) -> tuple[int, str, str]:
    rc = main(["check", *map(str, args)])
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_a_clean_file_exits_0(capsys):
    rc, out, _ = run(capsys, CLEAN)
    assert rc == 0 and "no hazards found" in out and "checked 1 PTX file" in out


def test_a_hazard_exits_1_and_names_the_ptx_line(capsys):
    rc, out, _ = run(capsys, BUGGY)
    assert rc == 1
    assert f"{BUGGY}:" in out and "error[smem-no-proxy-fence]" in out and "fix:" in out


def test_a_folder_is_checked_file_by_file(capsys, tmp_path):
    for f in (BUGGY, CLEAN):
        shutil.copy(f, tmp_path / f.name)
    rc, out, _ = run(capsys, tmp_path)
    assert rc == 1 and "checked 2 PTX files" in out


def test_unreadable_ptx_exits_2_with_file_and_line(capsys, tmp_path):
    bad = tmp_path / "bad.ptx"
    bad.write_text(".version 8.7\n.target sm_90a\n.entry k()\n{\n\tmov.u32 %r1, 0;\n}\n")
    rc, out, _ = run(capsys, bad, CLEAN)
    assert rc == 2
    assert f"{bad}: cannot check:" in out and f"{bad}:5: register %r1 is not declared" in out
    assert "1 could not be read" in out


def test_a_missing_path_exits_2(capsys, tmp_path):
    rc, _, err = run(capsys, tmp_path / "nope.ptx")
    assert rc == 2 and "no such file or folder" in err


def test_an_empty_folder_exits_2(capsys, tmp_path):
    rc, _, err = run(capsys, tmp_path)
    assert rc == 2 and "no .ptx files" in err


def test_json_lists_findings_with_their_ptx_and_source_lines(capsys):
    rc, out, _ = run(capsys, "--format", "json", BUGGY, CLEAN)
    doc = json.loads(out)
    assert rc == 1 and doc["tool"] == "ptxdsl"
    buggy, clean = doc["files"]
    assert clean["findings"] == [] and clean["error"] is None
    (f,) = [x for x in buggy["findings"] if x["severity"] != "note"]
    assert f["id"] == "smem-no-proxy-fence" and f["severity"] == "error"
    assert f["location"]["file"] == str(BUGGY) and f["location"]["line"] > 0
    text = BUGGY.read_text().splitlines()[f["location"]["line"] - 1]
    assert f["sites"][0]["ptx"].split()[0] in text
    if ".loc" in BUGGY.read_text():
        assert f["location"]["source"]["file"].endswith(".cu")


def test_sarif_is_what_code_scanning_reads(capsys):
    rc, out, _ = run(capsys, "--format", "sarif", BUGGY)
    doc = json.loads(out)
    assert rc == 1 and doc["version"] == "2.1.0" and "sarif" in doc["$schema"]
    (run_,) = doc["runs"]
    rules = run_["tool"]["driver"]["rules"]
    assert [r["id"] for r in rules] == ["smem-no-proxy-fence"]
    (res,) = [r for r in run_["results"] if r["level"] != "note"]
    assert res["ruleId"] == "smem-no-proxy-fence" and res["level"] == "error"
    assert rules[res["ruleIndex"]]["id"] == res["ruleId"]
    loc = res["locations"][0]["physicalLocation"]
    assert loc["artifactLocation"]["uri"] == BUGGY.as_posix() and loc["region"]["startLine"] > 0


def test_sarif_reports_a_file_it_cannot_read(capsys, tmp_path):
    bad = tmp_path / "bad.ptx"
    bad.write_text("/* never closed")
    rc, out, _ = run(capsys, "--format", "sarif", bad)
    inv = json.loads(out)["runs"][0]["invocations"][0]
    assert rc == 2 and inv["executionSuccessful"] is False
    assert "unterminated /* comment" in inv["toolExecutionNotifications"][0]["message"]["text"]


def test_the_source_line_of_a_lineinfo_file_is_shown(capsys):
    from ptxdsl.frontend import parse_ptx
    k = parse_ptx(LINEINFO.read_text(), file=str(LINEINFO)).kernels[0]
    locs = [s.loc for s in k.statements() if s.loc.caller is not None]
    assert locs and locs[0].caller.file.endswith(".cu")
    assert "(source " in locs[0].describe()


def test_python_files_still_take_text_only(capsys, tmp_path):
    py = tmp_path / "m.py"
    py.write_text("")
    rc, _, err = run(capsys, "--format", "json", py)
    assert rc == 2 and "--format json/sarif is for PTX files" in err


@pytest.mark.parametrize("strict,want", [(False, 0), (True, 1)])
def test_strict_makes_warnings_fail(capsys, tmp_path, strict, want):
    from ptxdsl import Module, ptx
    from tests.checker_kernels import Tma
    e = Tma(tile_align=64)     # a TMA buffer aligned below 128 bytes: a warning
    e.setup()
    with e.k.if_(e.k.tid.x == 0):
        ptx.cp_async_bulk_tensor(e.k, "shared::cluster", "global", e.tile, e.tmap, (0, 0), e.bar)
    path = tmp_path / "k.ptx"
    path.write_text(Module([e.k], check=False).emit())
    rc, out, _ = run(capsys, *(["--strict"] if strict else []), path)
    assert "warning[tma-smem-align]" in out and "error[" not in out
    assert rc == want


def test_a_form_the_declared_version_does_not_allow_is_an_error(capsys, tmp_path):
    golden = Path(__file__).parent / "golden" / "mbarrier" / "sm90_v86.ptx"
    old = tmp_path / "old.ptx"
    old.write_text(golden.read_text().replace(".version 8.6", ".version 7.0"))
    rc, out, _ = run(capsys, old)
    assert rc == 1
    assert f"{old}:20: error[ptx-version] mbarrier.arrive.relaxed.cta.shared::cta.b64 needs " \
           "PTX ISA 8.6, sm_90+; the file declares .version 7.0, .target sm_90" in out
    rc, out, _ = run(capsys, "--format", "sarif", old)
    doc = json.loads(out)["runs"][0]
    mine = [r for r in doc["results"] if r["ruleId"] == "ptx-version"]
    assert len(mine) == 10 and mine[0]["locations"][0]["physicalLocation"]["region"] == {
        "startLine": 20}
    assert doc["tool"]["driver"]["rules"][mine[0]["ruleIndex"]]["id"] == "ptx-version"
    assert "ptx-version" not in run(capsys, golden)[1]


def test_the_worked_example_of_the_docs_is_what_the_cli_prints(capsys, monkeypatch):
    """docs/ptx_frontend.md shows `check` on a Triton kernel: its output is the CLI's."""
    root = Path(__file__).resolve().parent.parent
    doc = (root / "docs" / "ptx_frontend.md").read_text()
    block = doc.split("```console\n$ python -m ptxdsl check tests/corpus/ptx/triton/"
                      "gluon_bug_tma_load_first_phase.ptx\n")[1].split("$ echo $?")[0]
    monkeypatch.chdir(root)
    rc, out, _ = run(capsys, "tests/corpus/ptx/triton/gluon_bug_tma_load_first_phase.ptx")
    assert rc == 1 and out == block
    rc, out, _ = run(capsys, "tests/corpus/ptx/triton/gluon_tma_load_first_phase.ptx")
    assert rc == 0 and out in doc
    snippet = doc.split("```python\nfrom ptxdsl.frontend import parse_ptx\n\npath = ")[1]
    code = "from ptxdsl.frontend import parse_ptx\n\npath = " + snippet.split("```")[0]
    exec(compile(code, "docs/ptx_frontend.md", "exec"), {})
    assert "gluon_bug_tma_load_first_phase.ptx:81" in capsys.readouterr().out
