"""`Module.write`: a failed write leaves an existing file as it was."""

from __future__ import annotations

import os
import stat

import pytest

from ptxdsl import BuildError, Kernel, Module, t
from ptxdsl.errors import PtxdslError


def _module() -> Module:
    k = Kernel("k")
    k.add(k.reg(t.u32), 1)
    k.ret()
    return Module([k])


def test_write_replaces_the_file_and_keeps_its_mode(tmp_path):
    path = tmp_path / "out" / "k.ptx"
    text = _module().write(path)
    assert path.read_text() == text and text.startswith("//")
    path.chmod(0o640)
    _module().write(path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o640
    assert sorted(p.name for p in path.parent.iterdir()) == ["k.ptx"]   # no temp file left


def test_new_file_gets_the_usual_permissions(tmp_path):
    old = os.umask(0o022)
    try:
        _module().write(tmp_path / "new.ptx")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "new.ptx").stat().st_mode) == 0o644


def _broken_emit(self):
    raise BuildError("emit failed on purpose")


@pytest.mark.parametrize("failure", ["emit", "non-ascii", "disk"])
def test_failed_write_leaves_the_old_file_intact(tmp_path, monkeypatch, failure):
    path = tmp_path / "golden.ptx"
    path.write_text("OLD GOLDEN\n")
    m = _module()
    if failure == "emit":
        monkeypatch.setattr(Module, "emit", _broken_emit)
        expect = PtxdslError
    elif failure == "non-ascii":
        monkeypatch.setattr(Module, "emit", lambda self: "// caf\u00e9\n")
        expect = PtxdslError   # Module's fail-closed net, with the UnicodeEncodeError as cause
    else:
        def full(src, dst):
            raise OSError(28, "No space left on device")
        monkeypatch.setattr(os, "replace", full)
        expect = OSError
    with pytest.raises(expect) as ei:
        m.write(path)
    if failure == "non-ascii":
        assert isinstance(ei.value.__cause__, UnicodeEncodeError)
    monkeypatch.undo()
    assert path.read_text() == "OLD GOLDEN\n"
    assert [p.name for p in tmp_path.iterdir()] == ["golden.ptx"]
