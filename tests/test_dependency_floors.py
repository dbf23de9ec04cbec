"""Dependency floors (issue 31): pyproject's floors, the measured table in docs/CONTRIBUTING.md
and the pins `.ci/lowest` installs are one list; and the reason for the cuda-core floor."""

from __future__ import annotations

import ctypes
import importlib.util
import re
import shlex
import subprocess
import sys
import tomllib
import warnings
from pathlib import Path

import pytest

from ptxdsl import Kernel, Module, toolchain
from ptxdsl.assembly_report import PtxdslAssemblerWarning
from ptxdsl.runtime.arrays import device_pointer

ROOT = Path(__file__).resolve().parent.parent
LOWEST = (ROOT / ".ci" / "lowest").read_text()

_spec = importlib.util.spec_from_file_location("ci_floors", ROOT / ".ci" / "floors.py")
assert _spec is not None and _spec.loader is not None
ci_floors = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(ci_floors)


def _lowest_floors_command() -> list[str]:
    line = next(ln for ln in LOWEST.splitlines()
                if ".ci/floors.py" in ln and ">" in ln and not ln.startswith("#"))
    return shlex.split(line.split(">")[0])


def _contributing_table() -> dict[str, str]:
    text = (ROOT / "docs" / "CONTRIBUTING.md").read_text()
    section = text.split("## Dependency floors", 1)[1].split("\n## ", 1)[0]
    return dict(re.findall(r"^\| `([\w.-]+)` \| ([0-9][^ |]*) \|", section, re.M))


def test_the_lowest_job_installs_the_pins_it_prints_from_pyproject():
    cmd = _lowest_floors_command()
    assert cmd[:2] == ["python3", ".ci/floors.py"]
    extras = cmd[2:]
    assert f"-e '.[{','.join(extras)}]'" in LOWEST, "install the extras whose floors it pins"
    assert re.search(r'pip install -q -c "\$work/floors.txt" -e', LOWEST)
    printed = subprocess.run([sys.executable, ".ci/floors.py", *extras], cwd=ROOT, check=True,
                             capture_output=True, text=True).stdout.split()
    assert printed == [f"{k}=={v}" for k, v in ci_floors.floors(extras).items()]


def test_the_contributing_table_has_every_floor_and_only_those():
    extras = _lowest_floors_command()[2:]
    assert _contributing_table() == ci_floors.floors(extras)


def test_every_extra_but_docs_is_pinned_by_the_lowest_job():
    optional = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"]
    assert set(optional) - set(_lowest_floors_command()[2:]) == {"docs"}


def test_the_cuda_versioned_packages_stay_below_the_next_major():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    reqs = project["dependencies"] + [r for rs in project["optional-dependencies"].values()
                                      for r in rs]
    for name in ("cuda-bindings", "nvidia-nvjitlink", "nvidia-cuda-nvdisasm"):
        req = next(r for r in reqs if r.startswith(name + ">"))
        assert req.endswith(",<14"), req


def _pyproject(tmp_path: Path, deps: str, extras: str = "") -> Path:
    path = tmp_path / "pyproject.toml"
    path.write_text(f'[project]\nname = "ptxdsl"\ndependencies = {deps}\n'
                    f"[project.optional-dependencies]\n{extras}\n")
    return path


def test_an_extra_naming_the_project_brings_its_floors(tmp_path):
    path = _pyproject(tmp_path, '["numpy>=2.1.0"]',
                      'test = ["pytest>=8.0.0", "ptxdsl[torch]"]\ntorch = ["torch>=2.13.0,<3"]')
    assert ci_floors.floors(["test"], path) == {
        "numpy": "2.1.0", "pytest": "8.0.0", "torch": "2.13.0"}


@pytest.mark.parametrize("deps, extras, msg", [
    ('["numpy"]', "", "needs exactly one '>=' floor"),
    ('["numpy<3"]', "", "needs exactly one '>=' floor"),
    ('["numpy>=2.1.0"]', 'test = ["numpy>=2.0.0"]', "numpy has two floors"),
])
def test_a_dependency_the_job_could_not_pin_is_refused(tmp_path, deps, extras, msg):
    path = _pyproject(tmp_path, deps, extras)
    with pytest.raises(SystemExit, match=msg):
        ci_floors.floors(["test"] if extras else [], path)


# -- the cuda-core floor ----------------------------------------------------------------------
# A DLPack producer may describe a tensor as an allocation base (`data`) plus `byte_offset`.
# cuda-core 1.1.1's StridedMemoryView.from_dlpack dropped the offset (fixed in 1.2.0), so the
# kernel got a pointer that many bytes early with no error.
class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", ctypes.c_int32 * 2),
                ("ndim", ctypes.c_int32), ("dtype", _DLDataType),
                ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


class _Versioned(ctypes.Structure):       # DLManagedTensorVersioned (DLPack 1.x)
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32),
                ("manager_ctx", ctypes.c_void_p), ("deleter", ctypes.c_void_p),
                ("flags", ctypes.c_uint64), ("tensor", _DLTensor)]


_capsule = ctypes.pythonapi.PyCapsule_New
_capsule.restype = ctypes.py_object
_capsule.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
_DL_CUDA = 2


class _SlicedProducer:
    """A float32 CUDA tensor of 8 elements handed out as base 0x7F00_0000 + 256 bytes."""

    def __init__(self):
        self._keep: list = []

    def __dlpack_device__(self):
        return (_DL_CUDA, 0)

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        shape = (ctypes.c_int64 * 1)(8)
        t = _DLTensor(0x7F00_0000, (_DL_CUDA, 0), 1, _DLDataType(2, 32, 1), shape, None, 256)
        m = _Versioned(1, 0, None, None, 0, t)
        self._keep += [shape, m]
        return _capsule(ctypes.addressof(m), b"dltensor_versioned", None)


def test_a_dlpack_byte_offset_is_part_of_the_pointer():
    assert device_pointer(_SlicedProducer()) == 0x7F00_0000 + 256


# -- the nvjitlink floor, where pip cannot keep it ----------------------------------------------
@pytest.mark.parametrize("loaded,says", [
    ((12, 9), r"another library loaded its own libnvJitLink first \(a CUDA 12 build of torch"),
    ((13, 0), r"upgrade it: pip install 'nvidia-nvjitlink>=13\.2,<14'"),
])
def test_an_older_nvjitlink_is_used_with_one_warning_that_says_why(monkeypatch, loaded, says):
    """Below the tested 13.2 (what torch 2.4 leaves loaded; what a torch 2.11 environment pins)
    most kernels still assemble: one warning, at the user's line, says what to expect."""
    from cuda.bindings import nvjitlink
    monkeypatch.setattr(nvjitlink, "version", lambda: loaded)
    monkeypatch.setattr(toolchain, "_version_checked", [])
    m = Module(target="sm_90a")
    m.add(Kernel("k"))
    with pytest.warns(PtxdslAssemblerWarning, match=says) as record:
        m.assemble()
    (w,) = [w for w in record if "is the one loaded" in str(w.message)]
    assert w.filename == __file__
    assert f"nvJitLink {loaded[0]}.{loaded[1]} is the one loaded" in str(w.message)
    with warnings.catch_warnings():
        warnings.simplefilter("error", PtxdslAssemblerWarning)
        m.assemble()        # once per process
