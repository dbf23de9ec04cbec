"""`python -m ptxdsl check/emit FILE`: say what was checked, fail when nothing was."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from ptxdsl.__main__ import main
from tests.child_env import child_env

ROOT = Path(__file__).resolve().parent.parent

TWO_MODULES = '''\
from ptxdsl import Kernel, Module, t

def kernel(name):
    k = Kernel(name)
    k.add(k.reg(t.u32), 1)
    k.ret()
    return k

first = Module([kernel("a"), kernel("b")])
second = Module([kernel("c")], name="second")

def build_modules():
    return {"third": Module([kernel("d"), kernel("e"), kernel("f"), kernel("g")])}
'''


def _write(tmp_path, text, name="m.py"):
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def test_check_says_how_many_modules_and_kernels(tmp_path, capsys):
    assert main(["check", _write(tmp_path, TWO_MODULES)]) == 0
    out = capsys.readouterr().out
    assert "checked 3 modules, 7 kernels" in out and out.count("no hazards found") == 3


def test_file_without_modules_fails(tmp_path, capsys):
    assert main(["check", _write(tmp_path, "x = 1\n")]) == 1
    err = capsys.readouterr().err
    assert "defines no ptxdsl Module" in err and "nothing was checked" in err
    assert "__main__" not in err


def test_modules_only_under_main_guard_are_explained(tmp_path, capsys):
    src = "from ptxdsl import Kernel, Module\n\nif __name__ == '__main__':\n" \
          "    k = Kernel('k')\n    k.ret()\n    mod = Module([k])\n"
    assert main(["check", _write(tmp_path, src)]) == 1
    err = capsys.readouterr().err
    assert "nothing was checked" in err and 'if __name__ == "__main__":' in err
    assert "build_module()" in err


def test_module_that_cannot_emit_fails_and_is_named(tmp_path, capsys):
    src = TWO_MODULES + "broken = Module([])\n"   # no kernels: emit refuses it
    assert main(["check", _write(tmp_path, src)]) == 1
    out = capsys.readouterr().out
    assert "broken: cannot emit:" in out and "module has no kernels" in out
    assert "checked 3 modules, 7 kernels; 1 module could not emit: broken" in out
    assert "broken: no hazards found" not in out


@pytest.mark.parametrize("cmd", ["check", "emit"])
def test_missing_file_is_one_line_without_traceback(tmp_path, cmd):
    res = subprocess.run([sys.executable, "-m", "ptxdsl", cmd, str(tmp_path / "nope.py")],
                         capture_output=True, text=True, env=child_env(), timeout=120,
                         cwd=tmp_path)
    assert res.returncode == 2
    assert res.stderr.strip() == f"ptxdsl {cmd}: {tmp_path / 'nope.py'}: no such file"
    assert "Traceback" not in res.stderr and res.stdout == ""


def test_file_that_raises_is_one_line(tmp_path, capsys):
    assert main(["check", _write(tmp_path, "raise RuntimeError('boom')\n")]) == 2
    err = capsys.readouterr().err
    assert err.strip().endswith("running it raised RuntimeError: boom")
