"""Where the cubin cache lives, what its key covers, how big it may grow, who may read it, and
what it logs (issue 18). A fake assembler stands in for nvJitLink."""

from __future__ import annotations

import logging
import os
import stat
import time

import pytest

from ptxdsl.runtime.cache import (
    CubinCache,
    cache_key,
    cached_assemble,
    default_cache_dir,
    max_cache_bytes,
)

PTX = ".version 8.0\n.target sm_90\n.address_size 64\n"


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch):
    for name in ("PTXDSL_CACHE", "PTXDSL_CACHE_DIR", "XDG_CACHE_HOME", "PTXDSL_CACHE_MAX_MB"):
        monkeypatch.delenv(name, raising=False)


class Asm:
    def __init__(self):
        self.calls = []

    def __call__(self, ptx, arch, options=()):
        self.calls.append(tuple(options))
        return b"CUBIN" + arch.encode() + "|".join(options).encode() + ptx.encode()


def test_xdg_cache_home_is_used_unless_ptxdsl_cache_dir_is_set(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert default_cache_dir() == tmp_path / "xdg" / "ptxdsl"
    monkeypatch.setenv("PTXDSL_CACHE_DIR", str(tmp_path / "mine"))
    assert default_cache_dir() == tmp_path / "mine"
    monkeypatch.delenv("PTXDSL_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/dir")     # invalid per the XDG spec
    assert default_cache_dir().parts[-2:] == (".cache", "ptxdsl")


def test_assembler_options_are_passed_and_keyed(tmp_path):
    asm = Asm()
    kw = dict(cache_dir=tmp_path)
    a, hit_a = cached_assemble(PTX, "sm_90", asm, "t", 1, options=("-maxrregcount=64",), **kw)
    b, hit_b = cached_assemble(PTX, "sm_90", asm, "t", 1, **kw)
    c, hit_c = cached_assemble(PTX, "sm_90", asm, "t", 1, options=("-maxrregcount=64",), **kw)
    assert (hit_a, hit_b, hit_c) == (False, False, True)
    assert asm.calls == [("-maxrregcount=64",), ()] and a == c != b
    assert cache_key(PTX, "a", "t", 1, ("-x",)) != cache_key(PTX, "a", "t", 1, ())
    assert cache_key(PTX, "a", "t", 1, ("-x", "-y")) != cache_key(PTX, "a", "t", 1, ("-x-y",))


def test_toolchain_identity_names_the_installed_packages(monkeypatch):
    from ptxdsl import toolchain
    monkeypatch.setattr(toolchain, "toolchain_version", lambda: "13.5")
    ident = toolchain.toolchain_identity()
    assert ident.startswith("nvJitLink 13.5") and "cuda-bindings " in ident


def test_loader_keys_on_the_toolchain_identity(monkeypatch):
    from ptxdsl import toolchain
    from ptxdsl.runtime import loader
    monkeypatch.setattr(toolchain, "toolchain_identity", lambda: "ID")
    assert loader._default_toolchain() == (toolchain.assemble, "ID")


def _fill(store: CubinCache, names, size=1000):
    for i, name in enumerate(names):
        store.put(name, bytes(size))
        t = time.time() - 1000 + i     # distinct, increasing "last used" times
        os.utime(store.path(name), (t, t))


def test_size_cap_evicts_least_recently_used(tmp_path):
    store = CubinCache(tmp_path, max_bytes=10**9)
    _fill(store, ["a", "b", "c", "d"])
    assert store.get("a") is not None          # a hit: "a" becomes the most recently used
    store.max_bytes = 3 * (1000 + 48)          # room for 3 entries; the next put makes 5
    store.put("e", bytes(1000))
    left = sorted(p.stem for p in tmp_path.glob("*.cubin"))
    assert left == ["a", "e"]                  # b, c, d evicted (down to 3/4 of the cap)


def test_cap_from_the_environment(tmp_path, monkeypatch):
    assert max_cache_bytes() == 1024 * 1024 * 1024
    monkeypatch.setenv("PTXDSL_CACHE_MAX_MB", "0.0015")      # ~1.5 KB: one entry fits
    store = CubinCache(tmp_path)
    _fill(store, ["a", "b", "c"])
    store.put("d", bytes(1000))
    assert sorted(p.stem for p in tmp_path.glob("*.cubin")) == ["d"]
    monkeypatch.setenv("PTXDSL_CACHE_MAX_MB", "0")           # no cap
    _fill(store, ["x", "y", "z"])
    assert len(list(tmp_path.glob("*.cubin"))) == 4


def test_a_new_cache_directory_is_owner_only(tmp_path, monkeypatch):
    old = os.umask(0o022)
    try:
        store = CubinCache(tmp_path / "deep" / "cache")
        store.put("k", b"x")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "deep" / "cache").stat().st_mode) == 0o700


def test_the_ptxdsl_logger_reports_hits_misses_and_damage(tmp_path, caplog):
    asm = Asm()
    with caplog.at_level(logging.DEBUG, logger="ptxdsl"):
        cached_assemble(PTX, "sm_90", asm, "t", 1, cache_dir=tmp_path)
        cached_assemble(PTX, "sm_90", asm, "t", 1, cache_dir=tmp_path)
        (entry,) = tmp_path.glob("*.cubin")
        entry.write_bytes(b"garbage")
        cached_assemble(PTX, "sm_90", asm, "t", 1, cache_dir=tmp_path)
    msgs = [(r.name, r.levelname, r.getMessage()) for r in caplog.records]
    assert all(name.startswith("ptxdsl.") for name, _, _ in msgs)
    kinds = [m.split()[2] for _, _, m in msgs if m.startswith("cubin cache ")]
    assert kinds[:2] == ["miss", "hit"]
    assert any(lvl == "WARNING" and "damaged" in m for _, lvl, m in msgs)


def test_an_unusable_cache_is_logged_as_a_fallback(tmp_path, caplog):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with caplog.at_level(logging.WARNING, logger="ptxdsl"), pytest.warns(Warning):
        cached_assemble(PTX, "sm_90", Asm(), "t", 1, cache_dir=blocker / "sub")
    assert any("going on without the cache" in r.getMessage() for r in caplog.records)
