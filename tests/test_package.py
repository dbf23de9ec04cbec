"""Packaging: PEP 639 license metadata, the sdist carries what its tests need, both the sdist
and the wheel carry the PEP 561 `py.typed` marker, and the optional fuzz extra fails with a
message naming itself."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tarfile
import tomllib
import zipfile
from pathlib import Path

import pytest

import ptxdsl

ROOT = Path(__file__).resolve().parent.parent
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())


def test_license_is_spdx_with_its_file():
    project = PYPROJECT["project"]
    assert project["license"] == "Apache-2.0"          # PEP 639, not the deprecated table
    assert project["license-files"] == ["LICENSE"]
    assert "Apache License" in (ROOT / "LICENSE").read_text()[:200]
    assert not any(c.startswith("License ::") for c in project["classifiers"]), \
        "PEP 639 forbids license classifiers next to an SPDX license"


def test_extras_declare_the_optional_imports():
    extras = PYPROJECT["project"]["optional-dependencies"]
    assert any(d.startswith("hypothesis") for d in extras["fuzz"])
    assert any(d.startswith("sphinx") for d in extras["docs"])


def test_fuzz_without_hypothesis_names_the_extra():
    code = ("import sys; sys.modules['hypothesis'] = None\n"   # None: import fails
            "import ptxdsl.fuzz")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=ROOT)
    assert proc.returncode == 1
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("ModuleNotFoundError: ptxdsl.fuzz needs hypothesis")
    assert "pip install 'ptxdsl[fuzz]'" in last


def _setuptools_major() -> int:
    import setuptools
    return int(setuptools.__version__.split(".")[0])


@pytest.mark.skipif(_setuptools_major() < 77, reason="building PEP 639 metadata needs "
                    "setuptools>=77 (the test extra installs it)")
def test_sdist_carries_goldens_test_data_and_samples(tmp_path):
    # In a child process: setuptools' build leaves state (distutils, egg-info) behind.
    code = ("import sys, setuptools.build_meta as b; "
            "print(b.build_sdist(sys.argv[1]))")
    proc = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True,
                          text=True, cwd=ROOT, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    name = proc.stdout.strip().splitlines()[-1]
    assert name == f"ptxdsl-{ptxdsl.__version__}.tar.gz"
    with tarfile.open(tmp_path / name) as tar:
        members = {m.split("/", 1)[1] for m in tar.getnames() if "/" in m}
        pkg_info = tar.extractfile(f"ptxdsl-{ptxdsl.__version__}/PKG-INFO").read().decode()
    tracked = subprocess.run(["git", "ls-files", "tests", "samples", "docs", "benchmarks"],
                             capture_output=True, text=True, cwd=ROOT)
    wanted = set(tracked.stdout.split()) if tracked.returncode == 0 else set()
    if not wanted:   # not a git checkout (e.g. an unpacked sdist): what is on disk
        wanted = {str(p.relative_to(ROOT)) for d in ("tests", "samples")
                  for p in (ROOT / d).rglob("*") if p.is_file() and "__pycache__" not in p.parts}
    missing = sorted(wanted - members)
    assert not missing, f"sdist lacks {missing[:10]}"
    assert any(m.startswith("tests/golden/") and m.endswith(".ptx") for m in members)
    assert "tests/data/tensormap_driver_verdicts.jsonl.gz" in members
    assert {"LICENSE", "pyproject.toml", "README.md", "ptxdsl/__init__.py",
            "ptxdsl/py.typed", "ptxdsl/_launch_c.c", "ptxdsl/_launch_c.pyi"} <= members
    assert "License-Expression: Apache-2.0" in pkg_info
    assert "License-File: LICENSE" in pkg_info


def _build(kind: str, out: Path) -> Path:
    # In a child process: setuptools' build leaves state (distutils, egg-info) behind.
    code = f"import sys, setuptools.build_meta as b; print(b.build_{kind}(sys.argv[1]))"
    proc = subprocess.run([sys.executable, "-c", code, str(out)], capture_output=True,
                          text=True, cwd=ROOT, timeout=180)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return out / proc.stdout.strip().splitlines()[-1]


@pytest.mark.skipif(_setuptools_major() < 77, reason="building PEP 639 metadata needs "
                    "setuptools>=77 (the test extra installs it)")
def test_wheel_ships_py_typed_and_the_package_only(tmp_path):
    """PEP 561: an installed ptxdsl tells type checkers to read its annotations."""
    assert (ROOT / "ptxdsl" / "py.typed").is_file()
    wheel = _build("wheel", tmp_path)
    assert wheel.name.startswith(f"ptxdsl-{ptxdsl.__version__}-") and wheel.suffix == ".whl"
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
    assert "ptxdsl/py.typed" in names and "ptxdsl/_launch_c.pyi" in names
    assert "ptxdsl/kernel_host.py" in names and "ptxdsl/checker/analysis.py" in names
    if shutil.which("cc") or shutil.which("gcc"):    # the optional C module, built
        assert any(n.startswith("ptxdsl/_launch_c.") and n.endswith(".so") for n in names)
    assert not any(n.startswith(("tests/", "samples/", "benchmarks/")) for n in names)
