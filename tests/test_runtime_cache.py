"""The on-disk cubin cache, driven by a fake assembler (no GPU, no nvJitLink)."""

from __future__ import annotations

import errno
import multiprocessing
import os
import time
import warnings

import pytest

from ptxdsl.runtime import cache as cache_mod
from ptxdsl.runtime.cache import (
    HEADER_SIZE,
    CubinCache,
    cache_key,
    cached_assemble,
    decode_entry,
    default_cache_dir,
    encode_entry,
)
from ptxdsl.runtime.errors import CacheError

PTX = ".version 8.0\n.target sm_90\n.address_size 64\n"


class FakeAssembler:
    def __init__(self):
        self.calls = []

    def __call__(self, ptx: str, arch: str) -> bytes:
        self.calls.append((ptx, arch))
        return f"CUBIN[{arch}]{ptx}".encode() * 50


def run(asm, tmp_path, ptx=PTX, arch="sm_90", **kw):
    return cached_assemble(ptx, arch, asm, "13.0", 13000, cache_dir=tmp_path, **kw)


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch):
    monkeypatch.delenv("PTXDSL_CACHE", raising=False)
    monkeypatch.delenv("PTXDSL_CACHE_DIR", raising=False)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)


def test_key_depends_on_every_input():
    base = cache_key(PTX, "sm_90", "13.0", 13000)
    assert base == cache_key(PTX, "sm_90", "13.0", 13000)
    others = {cache_key(PTX + " ", "sm_90", "13.0", 13000), cache_key(PTX, "sm_90a", "13.0", 13000),
              cache_key(PTX, "sm_90", "13.1", 13000), cache_key(PTX, "sm_90", "13.0", 13010)}
    assert base not in others and len(others) == 4
    # Length prefixes: moving a character between fields changes the key.
    assert cache_key("ab", "c", "", "") != cache_key("a", "bc", "", "")


def test_miss_then_hit(tmp_path):
    asm = FakeAssembler()
    first, hit1 = run(asm, tmp_path)
    second, hit2 = run(asm, tmp_path)
    assert (hit1, hit2) == (False, True)
    assert first == second == asm(PTX, "sm_90")
    assert len(asm.calls) == 2  # one build + the reference call above
    (entry,) = tmp_path.glob("*.cubin")
    assert entry.name == cache_key(PTX, "sm_90", "13.0", 13000) + ".cubin"
    assert entry.read_bytes()[:8] == b"PTXDSLC2"


def test_other_arch_or_text_misses(tmp_path):
    asm = FakeAssembler()
    run(asm, tmp_path)
    assert run(asm, tmp_path, arch="sm_90a")[1] is False
    assert run(asm, tmp_path, ptx=PTX + "// changed\n")[1] is False
    assert len(asm.calls) == 3 and len(list(tmp_path.glob("*.cubin"))) == 3


@pytest.mark.parametrize("damage", ["truncate", "flip", "magic", "empty", "extend"])
def test_corrupt_entry_is_rebuilt(tmp_path, damage):
    asm = FakeAssembler()
    good, _ = run(asm, tmp_path)
    (entry,) = tmp_path.glob("*.cubin")
    blob = bytearray(entry.read_bytes())
    if damage == "truncate":
        blob = blob[:-10]
    elif damage == "flip":
        blob[HEADER_SIZE + 5] ^= 0xFF
    elif damage == "magic":
        blob[:8] = b"NOTACUBN"
    elif damage == "empty":
        blob = bytearray()
    else:
        blob += b"junk"
    entry.write_bytes(bytes(blob))
    store = CubinCache(tmp_path)
    key = cache_key(PTX, "sm_90", "13.0", 13000)
    with warnings.catch_warnings():   # a flipped byte fails the MAC: a visible warning
        warnings.simplefilter("ignore", cache_mod.PtxdslCacheWarning)
        data, hit = store.get_or_build(key, lambda: asm(PTX, "sm_90"))
    assert (data, hit, store.corrupt) == (good, False, 1)
    assert decode_entry(entry.read_bytes(), store.mac_key(), key) == good  # repaired on disk
    assert run(asm, tmp_path)[1] is True


def test_disabled_by_argument_and_by_env(tmp_path, monkeypatch):
    asm = FakeAssembler()
    assert run(asm, tmp_path, cache=False)[1] is None
    monkeypatch.setenv("PTXDSL_CACHE", "0")
    assert run(asm, tmp_path)[1] is None
    assert run(asm, tmp_path)[1] is None
    assert len(asm.calls) == 3 and not list(tmp_path.iterdir())
    monkeypatch.setenv("PTXDSL_CACHE", "1")
    assert run(asm, tmp_path)[1] is False


def test_default_dir_from_env(tmp_path, monkeypatch):
    monkeypatch.setenv("PTXDSL_CACHE_DIR", str(tmp_path / "c"))
    assert default_cache_dir() == tmp_path / "c"
    asm = FakeAssembler()
    cached_assemble(PTX, "sm_90", asm, "13.0", 13000)
    assert len(list((tmp_path / "c").glob("*.cubin"))) == 1
    monkeypatch.delenv("PTXDSL_CACHE_DIR")
    assert default_cache_dir().parts[-2:] == (".cache", "ptxdsl")


def test_failed_write_leaves_old_entry_and_no_temp_files(tmp_path, monkeypatch):
    store = CubinCache(tmp_path)
    store.put("k", b"old")

    def boom(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(cache_mod.os, "replace", boom)
    with pytest.raises(OSError, match="disk full"):
        store.put("k", b"new")
    monkeypatch.undo()
    assert store.get("k") == b"old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["hmac.key", "k.cubin"]


def test_unusable_directory_is_a_clear_error(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    with pytest.raises(CacheError, match="cannot create cubin cache directory"):
        CubinCache(blocker / "sub").put("k", b"x")


def test_header_round_trip():
    key = bytes(range(32))
    assert decode_entry(encode_entry(b"abc", key, "n"), key, "n") == b"abc"
    assert decode_entry(encode_entry(b"", key, "n"), key, "n") == b""
    assert decode_entry(b"short", key, "n") is None


def _hammer(directory: str, key: str, rounds: int, seed: int) -> int:
    """Write and read one entry many times; count reads that saw a bad or partial entry."""
    store = CubinCache(directory)
    payload = bytes([seed]) + b"P" * 200_000  # writers differ in the first byte only
    bad = 0
    for _ in range(rounds):
        store.put(key, payload)
        got = store.get(key)
        if got is not None and (len(got) != len(payload) or got[1:] != payload[1:]):
            bad += 1
        if store.corrupt:
            bad += 1
    return bad


def test_concurrent_writers_never_expose_a_partial_entry(tmp_path):
    ctx = multiprocessing.get_context("fork" if hasattr(os, "fork") else "spawn")
    with ctx.Pool(4) as pool:
        results = pool.starmap(_hammer, [(str(tmp_path), "shared", 25, i) for i in range(4)])
    assert results == [0, 0, 0, 0]
    assert not [p for p in tmp_path.iterdir() if p.suffix == ".tmp"]


# -- a cache that cannot be used degrades to uncached, with one warning ---------------------------
@pytest.fixture
def fresh_warnings(monkeypatch):
    monkeypatch.setattr(cache_mod, "_warned", set())
    monkeypatch.setattr(cache_mod, "_swept", set())


def _read_only(tmp_path, monkeypatch):
    d = tmp_path / "ro"
    d.mkdir()
    d.chmod(0o500)
    if os.access(d, os.W_OK):   # root ignores permissions: refuse the way the kernel would

        def refuse(*a, **kw):
            raise PermissionError(errno.EACCES, "Permission denied", str(d))

        monkeypatch.setattr(cache_mod.tempfile, "mkstemp", refuse)
    return d


def _enospc(*a, **kw):
    raise OSError(errno.ENOSPC, "No space left on device")


@pytest.mark.parametrize("how", ["read-only", "disk-full", "dir-in-the-way", "file-as-dir",
                                 "env-names-a-file"])
def test_unusable_cache_degrades_to_uncached_with_one_warning(tmp_path, monkeypatch,
                                                               fresh_warnings, how):
    asm = FakeAssembler()
    where = tmp_path / "cache"
    if how == "read-only":
        where = _read_only(tmp_path, monkeypatch)
    elif how == "disk-full":
        monkeypatch.setattr(cache_mod.os, "fsync", _enospc)
    elif how == "dir-in-the-way":
        where.mkdir()
        (where / (cache_key(PTX, "sm_90", "13.0", 13000) + ".cubin")).mkdir()
    elif how == "file-as-dir":
        where.write_text("not a directory")
    else:
        where = tmp_path / "file"
        where.write_text("not a directory")
        monkeypatch.setenv("PTXDSL_CACHE_DIR", str(where))
    kw = {} if how == "env-names-a-file" else {"cache_dir": where}
    with pytest.warns(cache_mod.PtxdslCacheWarning, match="going on without the cache") as rec:
        for _ in range(3):
            cubin, hit = cached_assemble(PTX, "sm_90", asm, "13.0", 13000, **kw)
            assert cubin == FakeAssembler()(PTX, "sm_90")
            assert hit is None
    assert len(rec) == 1 and rec[0].filename == __file__
    assert len(asm.calls) == 3   # built every time, never lost
    if where.is_dir():
        assert not [p for p in where.iterdir() if p.suffix == ".tmp"]


def test_built_object_is_returned_as_is(tmp_path):
    class Tagged(bytes):
        pass

    built = Tagged(b"cubin" * 20)
    out, hit = cached_assemble(PTX, "sm_90", lambda p, a: built, "13.0", 13000,
                               cache_dir=tmp_path)
    assert out is built and hit is False   # its report (a Cubin's .report) is kept


def test_stale_temp_files_are_swept_and_fresh_ones_kept(tmp_path, fresh_warnings):
    stale, fresh, other = tmp_path / ".abc.x1.tmp", tmp_path / ".abc.x2.tmp", tmp_path / "a.tmp"
    for p in (stale, fresh, other):
        p.write_bytes(b"partial")
    old = time.time() - 2 * cache_mod.STALE_TMP_S
    os.utime(stale, (old, old))
    os.utime(other, (old, old))
    run(FakeAssembler(), tmp_path)
    assert not stale.exists()
    assert fresh.exists()   # a concurrent writer's file, seconds old: left alone
    assert other.exists()   # not a name the cache makes
    assert CubinCache(tmp_path).sweep(max_age_s=0) == 1 and not fresh.exists()


def test_no_home_folder_degrades_to_uncached(monkeypatch, fresh_warnings):
    def no_home():
        raise RuntimeError("Could not determine home directory.")

    monkeypatch.setattr(cache_mod.Path, "home", staticmethod(no_home))
    asm = FakeAssembler()
    with pytest.warns(cache_mod.PtxdslCacheWarning, match="home folder"):
        assert cached_assemble(PTX, "sm_90", asm, "13.0", 13000) == (asm(PTX, "sm_90"), None)
