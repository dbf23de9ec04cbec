"""tests/child_env.py (issue 31): a test's child Python imports the ptxdsl its test run
imports, the installed wheel's in the wheel job, and still finds the checkout's `tests`."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import ptxdsl
from tests.child_env import CHILD_SITE, ROOT, child_env, in_wheel_job

REPORT = ("import json, sys, ptxdsl, tests\n"
          "print(json.dumps([ptxdsl.__file__, tests.__file__, sys.path,\n"
          "                  getattr(sys, 'theirs_ran', False)]))\n")


def _child(env: dict[str, str], cwd: Path) -> tuple[Path, Path, list[str], bool]:
    res = subprocess.run([sys.executable, "-c", REPORT], capture_output=True, text=True,
                         env=env, cwd=cwd, timeout=120)
    assert res.returncode == 0 and res.stderr == "", res.stderr
    pkg, tests, path, theirs_ran = json.loads(res.stdout)
    return Path(pkg).resolve(), Path(tests).resolve(), path, theirs_ran


def test_a_child_imports_the_ptxdsl_of_this_run(tmp_path):
    """In the wheel job (.ci/wheel) the installed wheel's, under site-packages; otherwise the
    checkout's."""
    pkg, tests, _, _ = _child(child_env(), tmp_path)
    assert pkg == Path(ptxdsl.__file__).resolve()
    if in_wheel_job():
        assert "site-packages" in pkg.parts and not pkg.is_relative_to(ROOT), pkg
    else:
        assert pkg == ROOT / "ptxdsl" / "__init__.py"
    assert tests == ROOT / "tests" / "__init__.py"


def _stand_in(tmp_path: Path) -> Path:
    """A folder with a ptxdsl of its own: where the wheel job's child finds the installed
    one (what precedes the checkout on its sys.path), simulated without installing; and a
    sitecustomize, as some distributions' Pythons have."""
    site = tmp_path / "site"
    (site / "ptxdsl").mkdir(parents=True)
    (site / "ptxdsl" / "__init__.py").write_text("")
    (site / "sitecustomize.py").write_text("import sys\nsys.theirs_ran = True\n")
    return site


def test_in_the_wheel_job_the_installed_ptxdsl_wins_over_the_checkout(tmp_path):
    """Run from the checkout, whose own folder holds a ptxdsl too: the child still takes the
    one before the checkout on its path, and the checkout's `tests`; the sitecustomize's
    folder is gone from the path again, the checkout is its last entry, and the
    sitecustomize it hid has run."""
    site = _stand_in(tmp_path)
    env = child_env({"PATH": "", "PYTHONPATH": str(site)}, installed=True)
    pkg, tests, path, theirs_ran = _child(env, ROOT)
    assert pkg == site / "ptxdsl" / "__init__.py"
    assert tests == ROOT / "tests" / "__init__.py"
    assert str(CHILD_SITE) not in path and path[-1] == str(ROOT), path
    assert theirs_ran


def test_outside_the_wheel_job_the_checkout_comes_first(tmp_path):
    site = _stand_in(tmp_path)
    env = child_env({"PATH": "", "PYTHONPATH": str(site)}, installed=False)
    pkg, _, _, _ = _child(env, tmp_path)
    assert pkg == ROOT / "ptxdsl" / "__init__.py"
