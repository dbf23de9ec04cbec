"""Packaging: PEP 639 license metadata, the sdist carries what its tests need, both the sdist
and the wheel carry the PEP 561 `py.typed` marker, and the optional fuzz extra fails with a
message naming itself. The wheels, built from the sdist as `python -m build` and pip build
them (setup.py): with a compiler a cp311-abi3 wheel whose C module uses only the stable ABI,
without one a pure py3-none-any wheel; both ship the samples, so the demo runs from them, and
`--version` says which one is installed. (.ci/run installs them in fresh venvs: .ci/wheel.)"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import tomllib
import zipfile
from pathlib import Path

import pytest

import ptxdsl
from ptxdsl.__main__ import sample_files

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


needs_setuptools_77 = pytest.mark.skipif(
    _setuptools_major() < 77, reason="building PEP 639 metadata needs setuptools>=77 (the "
    "test extra installs it)")
_CC = (sysconfig.get_config_var("CC") or "cc").split()[0]
needs_compiler = pytest.mark.skipif(shutil.which(_CC) is None,
                                    reason=f"no C compiler ({_CC}) to build the C module")
PLATFORM = sysconfig.get_platform().replace("-", "_").replace(".", "_")


def _build(kind: str, src: Path, out: Path, **env: str) -> Path:
    # In a child process: setuptools' build leaves state (distutils, egg-info) behind.
    code = f"import sys, setuptools.build_meta as b; print(b.build_{kind}(sys.argv[1]))"
    proc = subprocess.run([sys.executable, "-c", code, str(out)], capture_output=True,
                          text=True, cwd=src, timeout=180, env={**os.environ, **env})
    assert proc.returncode == 0, proc.stderr[-2000:]
    return out / proc.stdout.strip().splitlines()[-1]


@pytest.fixture(scope="module")
def sdist(tmp_path_factory) -> Path:
    return _build("sdist", ROOT, tmp_path_factory.mktemp("sdist"))


def _wheel_from(sdist: Path, tmp: Path, **env: str) -> Path:
    """A wheel built from the unpacked sdist, as pip builds one, in a folder of its own (a
    build/ left by another build would be reused)."""
    with tarfile.open(sdist) as tar:
        tar.extractall(tmp, filter="data")
    return _build("wheel", tmp / sdist.name.removesuffix(".tar.gz"), tmp, **env)


@pytest.fixture(scope="module")
def wheel(sdist, tmp_path_factory) -> Path:
    return _wheel_from(sdist, tmp_path_factory.mktemp("wheel"))


@pytest.fixture(scope="module")
def pure_wheel(sdist, tmp_path_factory) -> Path:
    return _wheel_from(sdist, tmp_path_factory.mktemp("pure"), CC="/bin/false")


def _contents(wheel: Path) -> tuple[set[str], str]:
    """The wheel's file names and its WHEEL metadata."""
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
        meta = zf.read(f"ptxdsl-{ptxdsl.__version__}.dist-info/WHEEL").decode()
    return names, meta


# An editable install of ptxdsl in this environment (the README's `pip install -e .`) adds
# an import hook that finds ptxdsl's submodules in its checkout when the package at hand
# lacks them: a pure wheel would find the checkout's C module through it.
_NO_EDITABLE = ("import sys\n"
                "def _ours(o):\n"
                "    return getattr(o, '__module__', '').startswith('__editable__')\n"
                "sys.meta_path[:] = [f for f in sys.meta_path if not _ours(f)]\n"
                "sys.path_hooks[:] = [h for h in sys.path_hooks if not _ours(h)]\n")


def _run_from(wheel: Path, tmp: Path, code: str = "", module_argv: tuple[str, ...] = ()
              ) -> subprocess.CompletedProcess:
    """`python -c CODE` (or `python -m ptxdsl MODULE_ARGV`) with the wheel unpacked as the
    only ptxdsl (as installed) and the working folder outside the checkout."""
    site, cwd = tmp / "site", tmp / "cwd"
    if not site.exists():
        with zipfile.ZipFile(wheel) as zf:
            zf.extractall(site)
    cwd.mkdir(exist_ok=True)
    if module_argv:
        code = ("import runpy\nsys.argv[1:] = " + repr(list(module_argv)) + "\n"
                "runpy.run_module('ptxdsl', run_name='__main__', alter_sys=True)")
    env = {**os.environ, "PYTHONPATH": str(site), "PYTHONSAFEPATH": "1"}
    return subprocess.run([sys.executable, "-c", _NO_EDITABLE + code], capture_output=True,
                          text=True, cwd=cwd, env=env, timeout=300)


@needs_setuptools_77
def test_sdist_carries_goldens_test_data_and_samples(sdist):
    assert sdist.name == f"ptxdsl-{ptxdsl.__version__}.tar.gz"
    with tarfile.open(sdist) as tar:
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
    assert {"LICENSE", "pyproject.toml", "setup.py", "README.md", "ptxdsl/__init__.py",
            "ptxdsl/py.typed", "ptxdsl/_launch_c.c", "ptxdsl/_launch_c.pyi"} <= members
    assert "License-Expression: Apache-2.0" in pkg_info
    assert "License-File: LICENSE" in pkg_info


@needs_setuptools_77
def test_wheel_ships_py_typed_the_package_and_the_samples(wheel):
    """PEP 561: an installed ptxdsl tells type checkers to read its annotations. The samples
    are the package's ptxdsl.samples (from samples/, not a second copy), for the demo."""
    assert (ROOT / "ptxdsl" / "py.typed").is_file()
    assert wheel.name.startswith(f"ptxdsl-{ptxdsl.__version__}-") and wheel.suffix == ".whl"
    names, _ = _contents(wheel)
    assert "ptxdsl/py.typed" in names and "ptxdsl/_launch_c.pyi" in names
    assert "ptxdsl/kernel_host.py" in names and "ptxdsl/checker/analysis.py" in names
    shipped = {n.removeprefix("ptxdsl/samples/") for n in names
               if n.startswith("ptxdsl/samples/")}
    # the demo's samples and the modules beside them that they are not (_flash_attention_op)
    assert shipped == {p.name for p in (ROOT / "samples").glob("*.py")}
    assert {p.name for p in sample_files()} < shipped
    assert not any(n.startswith(("tests/", "samples/", "benchmarks/")) for n in names)


@needs_setuptools_77
@needs_compiler
def test_wheel_with_the_c_module_is_abi3(wheel, tmp_path):
    """One wheel for every supported Python: the module is built against the limited API of
    3.11 and named as such; it imports, with the two functions the launch calls."""
    assert wheel.name.endswith(f"-cp311-abi3-{PLATFORM}.whl"), wheel.name
    names, meta = _contents(wheel)
    assert "Root-Is-Purelib: false" in meta and f"Tag: cp311-abi3-{PLATFORM}" in meta
    assert [n for n in names if n.endswith(".so")] == ["ptxdsl/_launch_c.abi3.so"]
    res = _run_from(wheel, tmp_path, "from ptxdsl import _launch_c as c; "
                    "print(c.__file__, callable(c.launch_ex), callable(c.set_entry))")
    assert res.returncode == 0, res.stderr
    file, *entries = res.stdout.split()
    assert file == str(tmp_path / "site" / "ptxdsl" / "_launch_c.abi3.so")
    assert entries == ["True", "True"]
    res = _run_from(wheel, tmp_path, module_argv=("--version",))
    assert res.stdout.strip() == f"ptxdsl {ptxdsl.__version__} (C launch path: built)"


# What the C module takes from the interpreter; each is in CPython's stable ABI
# (Misc/stable_abi.toml). A new call that is not fails this test: check it there, then add it.
STABLE_ABI_USED = {
    "PyBool_FromLong", "PyBytes_AsStringAndSize", "PyBytes_Type", "PyCapsule_GetPointer",
    "PyCapsule_New", "PyDict_GetItemWithError", "PyDict_New", "PyDict_SetItem", "PyErr_Clear",
    "PyErr_Format", "PyErr_NoMemory", "PyErr_Occurred", "PyErr_SetString", "PyEval_RestoreThread",
    "PyEval_SaveThread", "PyExc_RuntimeError", "PyExc_TypeError", "PyExc_ValueError",
    "PyFloat_AsDouble", "PyFloat_Type", "PyLong_AsLong", "PyLong_AsLongLong",
    "PyLong_AsSsize_t", "PyLong_AsUnsignedLongLong", "PyLong_FromLong", "PyLong_Type",
    "PyModule_Create2", "PyObject_Call", "PyObject_GetAttr", "PyObject_RichCompareBool",
    "PyTuple_GetItem", "PyTuple_New", "PyTuple_Pack", "PyTuple_SetItem", "PyTuple_Size",
    "PyTuple_Type", "PyType_GetFlags", "PyUnicode_CompareWithASCIIString",
    "PyUnicode_InternFromString", "_Py_Dealloc", "_Py_NoneStruct",
}


@needs_setuptools_77
@needs_compiler
@pytest.mark.skipif(shutil.which("nm") is None, reason="no nm (binutils) to list symbols")
def test_abi3_module_uses_only_the_stable_abi(wheel, tmp_path):
    with zipfile.ZipFile(wheel) as zf:
        so = Path(zf.extract("ptxdsl/_launch_c.abi3.so", tmp_path))
    res = subprocess.run(["nm", "-D", "--undefined-only", str(so)], capture_output=True,
                         text=True, check=True)
    python_symbols = {line.split()[-1] for line in res.stdout.splitlines()
                      if line.split()[-1].startswith(("Py", "_Py"))}
    assert python_symbols == STABLE_ABI_USED


@needs_setuptools_77
def test_without_a_compiler_the_wheel_is_pure(pure_wheel, tmp_path):
    """An install that could not build the C module is pure Python: tagged py3-none-any and
    installed to purelib, not a platform wheel without its module; --version says so."""
    assert pure_wheel.name == f"ptxdsl-{ptxdsl.__version__}-py3-none-any.whl"
    names, meta = _contents(pure_wheel)
    assert "Root-Is-Purelib: true" in meta and "Tag: py3-none-any" in meta
    assert not [n for n in names if n.endswith(".so") or ".data/" in n]
    assert "ptxdsl/samples/gemm_hopper.py" in names
    res = _run_from(pure_wheel, tmp_path, module_argv=("--version",))
    assert res.stdout.strip() == (f"ptxdsl {ptxdsl.__version__} (C launch path: not built; "
                                  "launches use cuda.bindings)")


@needs_setuptools_77
@needs_compiler
def test_a_failed_rebuild_does_not_ship_the_last_module(sdist, tmp_path):
    """A tree built once with a compiler, its C source changed, rebuilt without one: the wheel
    is pure and holds no module (the last build's, of other code, is not kept)."""
    first = _wheel_from(sdist, tmp_path)
    assert first.name.endswith(f"-cp311-abi3-{PLATFORM}.whl")
    tree = tmp_path / sdist.name.removesuffix(".tar.gz")
    source = tree / "ptxdsl" / "_launch_c.c"
    os.utime(source)    # now: newer than the module, which is then rebuilt
    first.unlink()
    again = _build("wheel", tree, tmp_path, CC="/bin/false")
    assert again.name.endswith("-py3-none-any.whl")
    assert not [n for n in _contents(again)[0] if n.endswith(".so")]


@needs_setuptools_77
def test_the_demo_runs_from_the_wheel(pure_wheel, tmp_path):
    """From an installed wheel, away from any checkout, the demo finds the samples in the
    package; what ptxas says of a sample's line names the sample's file in the package."""
    res = _run_from(pure_wheel, tmp_path,
                    module_argv=("demo", "-o", "ptx", "gemm_hopper"))
    assert res.returncode == 0, res.stdout + res.stderr
    assert (tmp_path / "cwd" / "ptx" / "gemm_hopper.ptx").is_file()
    sample = tmp_path / "site" / "ptxdsl" / "samples" / "gemm_hopper.py"
    if "assembled offline" in res.stdout:    # on a GPU the sample runs instead
        assert f"{sample}:" in res.stderr and "'setmaxnreg' ignored" in res.stderr, res.stderr
