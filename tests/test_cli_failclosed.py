"""Checks fail closed (issue 28): a command that checked nothing says so and exits non-zero, a
reader closing the pipe early ends the command quietly, and a target conflict says where the
target came from."""

from __future__ import annotations

import inspect
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ptxdsl import Kernel, Module, ptx, t
from ptxdsl.__main__ import EXIT_BROKEN_PIPE, main
from ptxdsl.errors import VersionError
from ptxdsl.instructions.setmaxnreg import setmaxnreg_dec
from tests.child_env import child_env

ROOT = Path(__file__).resolve().parent.parent

# A file that ends the process while it is being run: `sys.exit(main())` without the guard.
EXITS = """\
import sys
from ptxdsl import Kernel, Module
k = Kernel("k")
k.ret()
mod = Module([k])

def main():
    return 0

sys.exit(main())
"""


@pytest.mark.parametrize("cmd", ["check", "emit"])
@pytest.mark.parametrize("code", ["0", "None", "3"])
def test_a_file_that_exits_while_run_is_reported(tmp_path, capsys, cmd, code):
    src = tmp_path / "m.py"
    src.write_text(EXITS.replace("sys.exit(main())", f"sys.exit({code})"))
    argv = [cmd, str(src)] + (["-o", str(tmp_path / "out")] if cmd == "emit" else [])
    assert main(argv) == 2
    out, err = capsys.readouterr()
    assert f"{src}: running it called sys.exit({code}) before its modules were collected, " \
           "so nothing was checked" in err
    assert 'if __name__ == "__main__":' in err and "checked" not in out
    assert not (tmp_path / "out").exists()


def test_a_pipe_closed_early_ends_the_command_quietly():
    """`python -m ptxdsl forms | head`: the reader is gone before ptxdsl writes (its end of
    the pipe is closed before the child starts), so the first write fails with EPIPE."""
    r, w = os.pipe()
    os.close(r)
    try:
        proc = subprocess.run([sys.executable, "-m", "ptxdsl", "forms"], stdout=w,
                              stderr=subprocess.PIPE, text=True, cwd=ROOT, timeout=120,
                              env=child_env())
    finally:
        os.close(w)
    assert proc.stderr == "" and proc.returncode == EXIT_BROKEN_PIPE == 141


def _line() -> int:
    frame = inspect.currentframe()
    assert frame is not None and frame.f_back is not None
    return frame.f_back.f_lineno


def test_an_inferred_target_conflict_names_the_instruction_that_chose_it():
    k = Kernel("k")
    p = k.ld_param(k.param_ptr("p"))
    ptx.wgmma_fence(k)
    fence_line = _line() - 1
    k.st(p, k.ld(p, type=t.f32, space="global", vec=8), space="global")
    with pytest.raises(VersionError, match=rf"ld.global.v8.f32 needs PTX ISA 8.8, sm_100\+, but "
                       r"the module's .target sm_90a was inferred from wgmma.fence.sync.aligned "
                       rf"at {__file__}:{fence_line} \(PTX ISA 8.0, sm_90a\), and no target "
                       r"has both forms \(no target was pinned\)") as e:
        Module([k]).emit()
    assert "pinned to" not in str(e.value)


def test_a_pinned_target_conflict_names_the_pin():
    k = Kernel("k")
    p = k.ld_param(k.param_ptr("p"))
    k.st(p, k.ld(p, type=t.f32, space="global", vec=8), space="global")
    m = Module([k], target="sm_90a")
    pin_line = _line() - 1
    with pytest.raises(VersionError, match=r"but the module is pinned to .target sm_90a "
                                           rf"\(Module\(target=...\) at {__file__}:{pin_line}\)"):
        m.emit()


def test_an_arch_specific_form_and_a_later_portable_one_infer_the_target_with_both():
    """setmaxnreg (sm_90a, sm_100a, ...) with a .v8 load (sm_100+): sm_100a has both."""
    k = Kernel("k", maxnreg=168, reqntid=384)
    p = k.ld_param(k.param_ptr("p"))
    setmaxnreg_dec(k, 40)
    k.st(p, k.ld(p, type=t.f32, space="global", vec=8), space="global")
    m = Module([k])
    assert (str(m.target), str(m.version)) == ("sm_100a", "8.8")
    assert ".target sm_100a" in m.emit()
