"""`load_object_code`: cuda.core ObjectCodes into ptxdsl's loader, without a GPU (issue 31).

What each code type becomes is checked here with the driver calls stubbed out; loading and
launching for real is in tests/test_interop_both_ways_gpu.py."""

from __future__ import annotations

import contextlib
from types import SimpleNamespace

import pytest

from ptxdsl.errors import PtxdslError
from ptxdsl.runtime import loader
from ptxdsl.runtime.errors import ObjectCodeError

core = pytest.importorskip("cuda.core")

PTX = """.version 8.0
.target sm_90
.address_size 64
.visible .entry k(.param .u64 .ptr .global p, .param .f32 x) { ret; }
"""


@pytest.fixture
def loads(monkeypatch):
    """What reached load_module (PTX) or the driver load (cubin), without a driver."""
    seen: list = []
    monkeypatch.setattr(loader, "load_module", lambda text, **kw: seen.append(
        ("ptx", text, kw)) or SimpleNamespace())
    monkeypatch.setattr(loader, "on_device", lambda d: contextlib.nullcontext())
    monkeypatch.setattr(loader, "device_info", lambda d: SimpleNamespace(
        driver_version=13000, compute_capability=(9, 0), name="fake"))
    monkeypatch.setattr(loader, "_cuda_load", lambda image, text, name, locate: (
        seen.append(("image", image, name)) or ("mod", "", 0.0)))
    return seen


def test_ptx_object_code_takes_the_ptx_path(loads):
    mod = loader.load_object_code(core.ObjectCode.from_ptx(PTX.encode(), name="mine"),
                                  use_cubin=True)
    assert loads == [("ptx", PTX, {"device": 0, "name": "mine", "use_cubin": True})]
    assert mod.code_type == "ptx"


def test_a_str_code_is_a_path_as_cuda_core_reads_it(loads, tmp_path):
    path = tmp_path / "k.ptx"
    path.write_text(PTX)
    loader.load_object_code(core.ObjectCode.from_ptx(str(path)))
    assert loads[0][1] == PTX
    with pytest.raises(PtxdslError, match=r"names the file '.*nope.ptx' \(cuda.core reads a "
                       "str code as a path\\), which cannot be read"):
        loader.load_object_code(core.ObjectCode.from_ptx(str(tmp_path / "nope.ptx")))


def test_a_cubin_is_loaded_with_the_signatures_of_its_ptx(loads):
    cubin = b"\x7fELF" + bytes(60)
    mod = loader.load_object_code(core.ObjectCode.from_cubin(cubin, name="c"), ptx=PTX)
    assert loads == [("image", cubin, "c")]
    (p, x) = mod.kernels["k"]
    assert (p.kind, x.type.ptx, mod.code_type) == ("pointer", ".f32", "cubin")
    assert "cuda.core cubin" in repr(mod)


def test_a_cubin_without_its_ptx_is_refused(loads):
    with pytest.raises(ObjectCodeError, match="parameter sizes but not their types; pass ptx="):
        loader.load_object_code(core.ObjectCode.from_cubin(b"\x7fELF"))
    with pytest.raises(ObjectCodeError, match="says 'cubin' but is not an ELF image"):
        loader.load_object_code(core.ObjectCode.from_cubin(b"PTX?"), ptx=PTX)
    with pytest.raises(ObjectCodeError, match="use_cubin only apply to PTX"):
        loader.load_object_code(core.ObjectCode.from_cubin(b"\x7fELF"), ptx=PTX,
                                use_cubin=True)
    with pytest.raises(ObjectCodeError, match="ptx= must be PTX text or a ptxdsl Module, got int"):
        loader.load_object_code(core.ObjectCode.from_cubin(b"\x7fELF"), ptx=42)
    assert loads == []


@pytest.mark.parametrize("make", ["from_ltoir", "from_object", "from_library"])
def test_code_the_driver_does_not_load_is_refused(loads, make):
    obj = getattr(core.ObjectCode, make)(b"\0" * 8, name="lto")
    with pytest.raises(ObjectCodeError, match=r"'lto' is '\w+' code, which the driver does not "
                       r"load; link it into a cubin first \(cuda.core.Linker"):
        loader.load_object_code(obj)


def test_not_an_object_code_is_refused():
    with pytest.raises(ObjectCodeError, match="expected a cuda.core ObjectCode .* got bytes"):
        loader.load_object_code(PTX.encode())
