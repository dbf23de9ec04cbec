"""The command line, the samples' harness, `Module` and `ptxdsl.debug` answering mistakes with
one clear message (naming the user's file:line where there is one) and a non-zero exit, never a
traceback or a false success."""

from __future__ import annotations

import inspect
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ptxdsl import BuildError, Kernel, Module, debug, ptx, sample_runner, t
from ptxdsl.__main__ import main, sample_files
from tests.child_env import child_env

ROOT = Path(__file__).resolve().parent.parent
HERE = os.path.abspath(__file__)


def _line() -> int:
    """The line of the caller (where the next statement's error must point)."""
    frame = inspect.currentframe()
    assert frame is not None and frame.f_back is not None
    return frame.f_back.f_lineno


def _kernel(name: str = "k") -> Kernel:
    k = Kernel(name)
    k.add(k.reg(t.u32), 1)
    k.ret()
    return k


def _write(tmp_path: Path, text: str, name: str = "m.py") -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def _no_gpu() -> str | None:
    from ptxdsl.runtime import gpu_skip_reason
    return gpu_skip_reason()


# -- demo: a sample name that does not exist ----------------------------------------------------
def test_demo_refuses_an_unknown_sample_and_lists_the_samples(capsys):
    assert main(["demo", "nosuchsample"]) == 2
    out, err = capsys.readouterr()
    assert "no sample named 'nosuchsample'" in err
    assert all(p.stem in err for p in sample_files())
    assert "===" not in out and "demo:" not in out   # nothing ran, no success claimed


# -- emit / demo / --ptx: ptxdsl errors as one message, not a traceback -------------------------
BAD_ASM = """\
from ptxdsl import Kernel, Module
k = Kernel("bad_asm")
k.asm("fence.bogus.gpu;")
k.ret()
mod = Module([k], check=False)
"""
STRICT_HAZARD = """\
from ptxdsl import Kernel, Module, ptx, t
k = Kernel("wrong", reqntid=32)
bar = k.shared_array(t.b64, 1, align=8, name="bar")
ptx.mbarrier_wait(k, bar, 1)
k.ret()
mod = Module([k], strict=True)
"""


@pytest.mark.parametrize("case", ["assembly", "hazard", "output is a file",
                                  "output under a file"])
def test_emit_reports_ptxdsl_errors_without_a_traceback(tmp_path, capsys, case):
    """AssemblyError, HazardError and OutputError end `emit` with the error (and the user's
    file:line where it has one) and a non-zero exit; main() returning proves none escaped."""
    afile = tmp_path / "afile"
    afile.write_text("")
    out = str(tmp_path / "out")
    if case == "assembly":
        argv, want = ["emit", _write(tmp_path, BAD_ASM), "-o", out, "--assemble"], \
            ["m.py:3:", "Unknown modifier '.bogus'"]
    elif case == "hazard":
        argv, want = ["emit", _write(tmp_path, STRICT_HAZARD), "-o", out], \
            ["m.py:4:", "mbar-uninit"]
    elif case == "output is a file":
        argv, want = ["emit", _write(tmp_path, BAD_ASM), "-o", str(afile)], ["not a folder"]
    else:
        argv, want = ["emit", _write(tmp_path, BAD_ASM), "-o", str(afile / "sub")], \
            ["cannot write", str(afile)]
    assert main(argv) != 0
    err = capsys.readouterr().err
    assert all(w in err for w in want), err


def test_demo_refuses_an_output_that_is_a_file(tmp_path, capsys):
    afile = tmp_path / "afile"
    afile.write_text("")
    assert main(["demo", "-o", str(afile)]) == 2
    assert "not a folder" in capsys.readouterr().err


def _sample_main(argv: list[str]) -> int:
    return sample_runner.sample_main(argv, "a sample", lambda: Module([_kernel()]),
                                     lambda: sample_runner.Report("unused"))


@pytest.mark.parametrize("where", ["under a file", "a folder"])
def test_sample_ptx_path_that_cannot_be_written(tmp_path, capsys, where):
    """A sample's `--ptx PATH` that cannot be written: one line naming it, exit 1."""
    afile = tmp_path / "afile"
    afile.write_text("")
    path = afile / "x.ptx" if where == "under a file" else tmp_path
    assert _sample_main(["--ptx", str(path)]) == 1
    err = capsys.readouterr().err
    assert str(path) in err or str(afile) in err, err
    assert "Traceback" not in err


def test_sample_ptx_error_from_the_shell_has_no_traceback(tmp_path):
    """The same from the shell, through a real sample."""
    afile = tmp_path / "afile"
    afile.write_text("")
    res = subprocess.run([sys.executable, str(ROOT / "samples" / "zero_template.py"), "--ptx",
                          str(afile / "x.ptx")], capture_output=True, text=True, env=child_env(),
                         timeout=300, cwd=tmp_path)
    assert res.returncode == 1, res.stdout + res.stderr
    assert "cannot write" in res.stderr and "Traceback" not in res.stderr


# -- build_module() / build_modules() returning the wrong thing ---------------------------------
@pytest.mark.parametrize("cmd", ["emit", "check"])
@pytest.mark.parametrize("src, want", [
    ("def build_module():\n    return 42\n",
     "build_module() must return a ptxdsl Module, got int 42"),
    ("from ptxdsl import Kernel, Module\ndef build_modules():\n    k = Kernel('a')\n"
     "    k.ret()\n    return [Module([k])]\n",
     "build_modules() must return a dict of name -> ptxdsl Module, got list"),
    ("def build_modules():\n    return {'a': 1}\n",
     "build_modules() must return a dict of name -> ptxdsl Module; its entry str 'a' is int 1"),
])
def test_build_functions_must_return_modules(tmp_path, capsys, cmd, src, want):
    path = _write(tmp_path, src)
    assert main([cmd, path, *(["-o", str(tmp_path)] if cmd == "emit" else [])]) == 2
    err = capsys.readouterr().err
    assert f"{path}: {want}" in err, err


# -- Module: unknown checker context ------------------------------------------------------------
def test_unknown_checker_context_is_refused_at_the_users_line():
    k = _kernel()
    with pytest.raises(BuildError, match=r"unknown checker context 'bogus'; the checker takes "
                       r"host_maps, maps, cross_device_maps") as ei:
        line = _line() + 1
        Module([k], check={"bogus": 1})
    assert (ei.value.loc.file, ei.value.loc.line) == (HERE, line)
    with pytest.raises(BuildError, match=r"Module.check: unknown checker context 'bogus'; "
                       r"the checker takes .*notes") as ei:
        line = _line() + 1
        Module([k]).check(bogus=1)
    assert (ei.value.loc.file, ei.value.loc.line) == (HERE, line)
    assert Module([k], check={"host_maps": ["x"]}).check(notes=True, host_maps=["x"]) == []


# -- ptxdsl.debug ------------------------------------------------------------------------------
def test_bounded_waits_refuses_what_is_not_a_kernel_or_a_bool():
    with pytest.raises(BuildError, match=r"bounded_waits: expected the Kernel .* got str 'k'"):
        debug.bounded_waits("k")
    with pytest.raises(BuildError, match=r"trap must be True or False, got str 'no'"):
        debug.bounded_waits(Kernel("w"), trap="no")


def _bounded_kernel() -> Kernel:
    k = Kernel("w", reqntid=32)
    debug.bounded_waits(k)
    bar = k.shared_array(t.b64, 1, align=8, name="bar")
    with k.if_(k.tid.x == 0):
        ptx.mbarrier_init(k, bar, 1)
        ptx.fence_mbarrier_init(k)
    k.bar_sync(0)
    ptx.mbarrier_wait(k, bar, 0)
    k.ret()
    return k


def test_bounded_waits_in_a_module_without_the_record_is_refused_at_emit():
    """ptxas would only say "Illegal operand type ... [ptxdsl_dbg_record]"."""
    line = _line() + 1
    mod = Module([_bounded_kernel()], check=False)
    with pytest.raises(BuildError, match=r"kernel w: .*ptxdsl_dbg_record.* module 'module' "
                       r"does not declare: call debug.declare\(module\)") as ei:
        mod.emit()
    assert (ei.value.loc.file, ei.value.loc.line) == (HERE, line)
    debug.declare(mod)                            # the fix the message names
    assert debug.RECORD_NAME in mod.emit()
    assert debug.RECORD_NAME in debug.module([_bounded_kernel()], check=False).emit()


def test_isolated_refuses_a_function_the_child_cannot_import():
    with pytest.raises(BuildError, match=r"must be importable \(a module-level function"):
        debug.isolated(lambda: 1)


# -- demo -o DIR: every file under DIR ----------------------------------------------------------
def test_demo_writes_multi_gpu_ptx_under_its_output_folder(tmp_path, monkeypatch):
    if _no_gpu() is None:
        pytest.skip("on a GPU the demo runs the sample: see test_samples.py")
    cwd, out = tmp_path / "cwd", tmp_path / "ptx"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    assert main(["demo", "-o", str(out), "multi_gpu_tensormap"]) == 0
    assert not (cwd / "out").exists()
    assert sorted(p.name for p in out.iterdir()) == ["multi_gpu_tensormap.ptx"]
    assert sample_runner.PTX_DIR == Path("out")   # restored for the shell's default


# -- Module.assemble(arch) for an arch that cannot build the module's target -------------------
@pytest.mark.parametrize("target, arch", [("sm_90a", "sm_80"), ("sm_90a", "sm_90"),
                                          ("sm_90a", "sm_100a"), ("sm_90", "sm_89"),
                                          ("sm_100f", "sm_110f")])
def test_assemble_for_an_arch_that_cannot_build_the_target(target, arch):
    mod = Module([_kernel()], target=target)
    with pytest.raises(BuildError, match=rf"arch {arch} cannot build this module: its "
                       rf".target is {target}") as ei:
        line = _line() + 1
        mod.assemble(arch)
    assert (ei.value.loc.file, ei.value.loc.line) == (HERE, line)


@pytest.mark.parametrize("target, arch", [("sm_90", "sm_100"), ("sm_90", "sm_90a"),
                                          ("sm_90a", "sm_90a"), ("sm_100f", "sm_103a")])
def test_assemble_for_an_arch_that_builds_the_target(target, arch):
    assert Module([_kernel()], target=target).assemble(arch).arch == arch


# -- fuzz --help ------------------------------------------------------------------------------
def test_fuzz_examples_help_says_it_rounds_up_to_a_batch(capsys):
    pytest.importorskip("hypothesis")
    from ptxdsl.fuzz import BATCH
    with pytest.raises(SystemExit):
        main(["fuzz", "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert f"rounded up to a multiple of {BATCH}" in help_text
