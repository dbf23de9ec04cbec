"""Files ptxdsl writes and reads: nothing destroyed, nothing planted (issue 28).

Output (`Module.write`, a sample's `--ptx`, `emit -o DIR`, `check_golden`) replaces only
regular files and writes through symbolic links; the cubin cache opens entries without
blocking, trusts only a folder of this user's that nobody else can write, and verifies entries
with a keyed MAC. Every "not a regular file" case is made in tmp_path (a FIFO, a socket, a
folder, a link): nothing outside it is touched.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import stat
import warnings
from pathlib import Path

import pytest

from ptxdsl import Kernel, Module, sample_runner, t
from ptxdsl.__main__ import main
from ptxdsl.errors import OutputError
from ptxdsl.runtime import cache as cache_mod
from ptxdsl.runtime.cache import (
    KEY_FILE,
    PtxdslCacheWarning,
    cache_key,
    cached_assemble,
    encode_entry,
    max_cache_bytes,
)
from ptxdsl.runtime.errors import CacheError
from ptxdsl.testing import check_golden


def _module() -> Module:
    k = Kernel("k")
    k.add(k.reg(t.u32), 1)
    k.ret()
    return Module([k])


def _make(kind: str, path: Path) -> None:
    """Something that is not a regular file at `path`."""
    if kind == "fifo":
        os.mkfifo(path)
        return
    s = socket.socket(socket.AF_UNIX)
    with contextlib.chdir(path.parent):   # a socket's path must be short: bind a relative one
        s.bind(path.name)
    s.close()   # the socket file stays


class Blocked(BaseException):
    """Not an OSError (nor an Exception): no `except` of the code under test swallows it."""


@contextlib.contextmanager
def _deadline(seconds: int):
    """A call that blocks (opening a FIFO) fails the test instead of hanging the suite."""
    def on_alarm(signum, frame):
        raise Blocked(f"blocked for {seconds} s")

    old = signal.signal(signal.SIGALRM, on_alarm)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


# -- Module.write / --ptx / check_golden: only regular files are replaced -------------------------
@pytest.mark.parametrize("kind, words", [("fifo", "a FIFO"), ("socket", "a socket")])
def test_write_refuses_what_is_not_a_regular_file(tmp_path, kind, words):
    path = tmp_path / "s"
    _make(kind, path)
    with pytest.raises(OutputError, match=rf"Module.write: .*'{path}' is {words}, not a "
                                          "regular file; refusing to replace it"):
        _module().write(path)
    assert not stat.S_ISREG(path.lstat().st_mode)   # still the FIFO / socket it was
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s"]   # no temporary file left


def test_write_refuses_a_link_to_what_is_not_a_regular_file(tmp_path):
    fifo, link = tmp_path / "fifo", tmp_path / "link.ptx"
    os.mkfifo(fifo)
    link.symlink_to(fifo)
    with pytest.raises(OutputError, match=r"\(a link to '.*fifo'\) is a FIFO"):
        _module().write(link)
    assert link.is_symlink() and stat.S_ISFIFO(fifo.stat().st_mode)


@pytest.mark.parametrize("dangling", [False, True])
def test_write_goes_through_a_symlink_which_stays_one(tmp_path, dangling):
    """A symlinked golden stays a symlink: the file it points to gets the text."""
    target, link = tmp_path / "real" / "golden.ptx", tmp_path / "golden.ptx"
    if not dangling:
        target.parent.mkdir()
        target.write_text("OLD\n")
        target.chmod(0o640)
    link.symlink_to(target)
    text = _module().write(link)
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert target.read_text() == text
    if not dangling:
        assert stat.S_IMODE(target.stat().st_mode) == 0o640


def test_sample_ptx_refuses_a_fifo(tmp_path, capsys):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    rc = sample_runner.sample_main(["--ptx", str(fifo)], "a sample", _module,
                                   lambda: sample_runner.Report("unused"))
    assert rc == 1 and stat.S_ISFIFO(fifo.stat().st_mode)
    err = capsys.readouterr().err
    assert "is a FIFO, not a regular file" in err and "Traceback" not in err


def test_check_golden_update_refuses_a_fifo(tmp_path):
    fifo = tmp_path / "golden.ptx"
    os.mkfifo(fifo)
    with _deadline(10), pytest.raises(OutputError, match="check_golden: .* is a FIFO"):
        check_golden(_module(), fifo, update=True)
    assert stat.S_ISFIFO(fifo.stat().st_mode)


# -- emit -o DIR: output names are identifiers, files stay in DIR ------------------------------
@pytest.mark.parametrize("name", ["a/../../../escaped", "two\nlines", "../up", ""])
def test_emit_refuses_a_module_name_that_is_not_an_identifier(tmp_path, capsys, name):
    src = tmp_path / "m.py"
    src.write_text("from ptxdsl import Kernel, Module\n"
                   "def build_modules():\n"
                   "    k = Kernel('k')\n    k.ret()\n"
                   f"    return {{{name!r}: Module([k]), 'ok': Module([k])}}\n")
    out = tmp_path / "a" / "b" / "c" / "out"
    assert main(["emit", str(src), "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert f"build_modules() names a module {name!r}" in err and "identifiers" in err
    assert [p.name for p in tmp_path.rglob("*.ptx")] == []   # nothing written, anywhere


# -- the cubin cache ---------------------------------------------------------------------------
PTX = ".version 8.0\n.target sm_90\n.address_size 64\n"
KEY = cache_key(PTX, "sm_90", "13.0", 13000)


def _asm(ptx: str, arch: str) -> bytes:
    return f"CUBIN[{arch}]{ptx}".encode()


def _run(directory: Path):
    return cached_assemble(PTX, "sm_90", _asm, "13.0", 13000, cache_dir=directory)


@pytest.fixture(autouse=True)
def _fresh_cache_state(monkeypatch):
    for var in ("PTXDSL_CACHE", "PTXDSL_CACHE_DIR", "PTXDSL_CACHE_MAX_MB"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr(cache_mod, "_warned", set())
    monkeypatch.setattr(cache_mod, "_swept", set())


@pytest.mark.parametrize("kind, words", [("fifo", "a FIFO"), ("socket", "a socket"),
                                         ("link", "a symbolic link")])
def test_a_planted_entry_that_is_not_a_regular_file_is_skipped(tmp_path, kind, words):
    d = tmp_path / "cache"
    d.mkdir(mode=0o700)
    entry = d / f"{KEY}.cubin"
    if kind == "link":
        elsewhere = tmp_path / "elsewhere.cubin"
        elsewhere.write_bytes(b"not ours")
        entry.symlink_to(elsewhere)
    else:
        _make(kind, entry)
    with _deadline(10), pytest.warns(PtxdslCacheWarning, match=rf"{words}, not a regular "
                                     "file; going on without the cache") as rec:
        for _ in range(2):
            assert _run(d) == (_asm(PTX, "sm_90"), None)
    assert len(rec) == 1
    assert entry.is_symlink() if kind == "link" else not stat.S_ISREG(entry.lstat().st_mode)


@pytest.mark.parametrize("mode, words", [(0o777, "mode 0777 lets other users write to it"),
                                         (0o720, "mode 0720 lets other users write to it")])
def test_a_cache_folder_others_can_write_is_refused(tmp_path, mode, words):
    d = tmp_path / "shared"
    d.mkdir()
    d.chmod(mode)
    stale = d / ".0123456789abcdef.x.tmp"   # a name the cache's sweep would remove
    stale.write_bytes(b"someone's")
    os.utime(stale, (0, 0))
    with pytest.warns(PtxdslCacheWarning, match=rf"refusing it: its {words}.*going on "
                                                "without the cache"):
        assert _run(d) == (_asm(PTX, "sm_90"), None)
    with pytest.raises(CacheError, match="refusing it"):
        cache_mod.CubinCache(d).put(KEY, b"x")
    assert list(d.iterdir()) == [stale]   # nothing put in it, nothing of it removed


def test_a_cache_folder_of_another_user_is_refused(tmp_path, monkeypatch):
    d = tmp_path / "theirs"
    d.mkdir(mode=0o700)
    me = os.geteuid()
    monkeypatch.setattr(os, "geteuid", lambda: me + 1)   # as seen by another user
    with pytest.warns(PtxdslCacheWarning, match=rf"refusing it: it belongs to uid {me}, not "
                                                rf"to this user \(uid {me + 1}\)"):
        assert _run(d) == (_asm(PTX, "sm_90"), None)


@pytest.mark.parametrize("who", ["group-writable", "other owner"])
def test_an_entry_others_could_have_written_is_not_loaded(tmp_path, who):
    d = tmp_path / "cache"
    assert _run(d)[1] is False
    entry = d / f"{KEY}.cubin"
    if who == "group-writable":
        entry.chmod(0o660)
        words = "mode 0660 lets other users write to it"
    else:
        if os.geteuid() != 0:
            pytest.skip("giving a file to another user needs root")
        os.chown(entry, 4242, -1)
        words = "belongs to uid 4242"
    with pytest.warns(PtxdslCacheWarning, match=rf"refusing entry .*{words}"):
        assert _run(d) == (_asm(PTX, "sm_90"), None)


def test_an_entry_planted_without_the_key_fails_verification(tmp_path):
    """Its key is computable from the PTX and its checksum anyone's to compute; its MAC is
    not: a planted cubin is rebuilt (one warning), never loaded."""
    d = tmp_path / "cache"
    assert _run(d)[1] is False
    entry = d / f"{KEY}.cubin"
    entry.write_bytes(encode_entry(b"EVIL CUBIN", os.urandom(32), KEY))
    with pytest.warns(PtxdslCacheWarning, match=rf"entry {KEY}.cubin fails its integrity "
                                                "check.*rebuilding"):
        assert _run(d) == (_asm(PTX, "sm_90"), False)
    assert _run(d) == (_asm(PTX, "sm_90"), True)   # rebuilt with our key


def test_the_key_is_private_and_made_with_the_folder(tmp_path):
    d = tmp_path / "cache"
    old = os.umask(0)   # the key's 0600 does not depend on the umask
    try:
        _run(d)
    finally:
        os.umask(old)
    key = d / KEY_FILE
    assert stat.S_IMODE(key.stat().st_mode) == 0o600 and len(key.read_bytes()) == 32
    assert stat.S_IMODE(d.stat().st_mode) == 0o700


@pytest.mark.parametrize("damage, words", [
    ("readable", "refusing the cache's key .*mode 0644 lets other users read or write it"),
    ("short", "holds 5 bytes, not 32"),
    ("link", "the cache's key .* is a symbolic link, not a regular file")])
def test_a_key_others_could_know_is_refused(tmp_path, damage, words):
    d = tmp_path / "cache"
    _run(d)
    key = d / KEY_FILE
    if damage == "readable":
        key.chmod(0o644)
    elif damage == "short":
        key.write_bytes(b"short")
    else:
        (tmp_path / "k").write_bytes(key.read_bytes())
        key.unlink()
        key.symlink_to(tmp_path / "k")
    with pytest.warns(PtxdslCacheWarning, match=words):
        assert _run(d) == (_asm(PTX, "sm_90"), None)


# -- PTXDSL_CACHE_MAX_MB: a bad value is a visible warning, and the default ----------------------
@pytest.mark.parametrize("raw", ["-5", "1e-9", "lots", "-0.5"])
def test_a_bad_cache_cap_warns_and_uses_the_default(monkeypatch, raw):
    monkeypatch.setenv("PTXDSL_CACHE_MAX_MB", raw)
    with pytest.warns(PtxdslCacheWarning, match=rf"PTXDSL_CACHE_MAX_MB='{raw}' is not a size "
                                                r"in MB.*using the default, 1024 MB") as rec:
        assert max_cache_bytes() == 1024 * 1024 * 1024
        assert max_cache_bytes() == 1024 * 1024 * 1024
    assert len(rec) == 1 and rec[0].filename == __file__


@pytest.mark.parametrize("raw, cap", [("0", 0), ("0.5", 512 * 1024), ("1e6", 10**6 << 20)])
def test_good_cache_caps_say_nothing(monkeypatch, raw, cap):
    monkeypatch.setenv("PTXDSL_CACHE_MAX_MB", raw)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert max_cache_bytes() == cap
